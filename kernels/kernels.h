/*
 * Choir kernels: the C-callable boundary of the device code.
 *
 * Everything the host side (core/, tests) may call in kernels/ is declared here, in plain C that
 * compiles as C11 and as C++; CUDA C++ stays inside the .cu and .cuh files of kernels/. Struct
 * layouts are fixed-width and static-asserted below, so that C and nvcc translation units agree.
 *
 * Errors: every function that can fail returns ncclResult_t and, on failure, leaves a one-line
 * explanation in a thread-local buffer read with kern_last_error(). The caller (core) logs it;
 * kernels/ never logs, since it sits below the core's logger.
 *   ncclInvalidArgument   malformed arguments (bad op/type, nsrcs out of 1..8, NULL or
 *                         misaligned pointer, avg with divisor < 1)
 *   ncclInvalidUsage      the (op, type) instance was left out of this build by kernel_subset
 *   ncclUnhandledCudaError the CUDA runtime refused a query or the launch (message says why)
 */
#ifndef CHOIR_KERNELS_H
#define CHOIR_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "nccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reduction operators the kernels implement. The first five have the values of the built-in
 * ncclRedOp_t; every operator made by ncclRedOpCreatePreMulSum maps to KERN_OP_PREMULSUM, its
 * scalar travelling in the launch arguments. */
typedef enum {
  KERN_OP_SUM = 0,
  KERN_OP_PROD = 1,
  KERN_OP_MAX = 2,
  KERN_OP_MIN = 3,
  KERN_OP_AVG = 4,
  KERN_OP_PREMULSUM = 5,
  KERN_OP_NUM = 6
} kern_op_t;

/* Maps an ncclRedOp_t to the kernel operator: built-ins keep their value, user-created
 * operators (ncclNumOps and above) are all premulsum. */
static inline kern_op_t kern_op_from_nccl(ncclRedOp_t op) {
  return (int)op < (int)ncclNumOps ? (kern_op_t)op : KERN_OP_PREMULSUM;
}

#define KERN_RC_MAX_SRCS 8
#define KERN_RC_MAX_DSTS 2

/*
 * reduce-copy: dsts[d][i] = post(red_{s<nsrcs} pre_s(srcs[s][i])) for every d < ndsts and
 * i < count, where red folds the sources in order s = 0, 1, ..., nsrcs-1, rounding to the element
 * type after every step (fp8 computes each step in fp16, then rounds to fp8, saturating to the
 * largest finite value).
 *
 *   pre_s(x) = x * scalar   if bit s of preop_mask is set and op is premulsum, or
 *            = x * (1/divisor) if bit s is set, op is avg and the type is floating point
 *                          (1/divisor rounded to the compute type: fp64 and fp32 directly,
 *                          bf16, and fp16 for fp16 and fp8, by way of fp32), otherwise x.
 *   post(x)  = x / divisor  if postop != 0, op is avg and the type is an integer (the sum wraps
 *                          in the type first, the quotient truncates toward zero), otherwise x.
 * So avg over n ranks is: every rank's own input pre-scaled by 1/n for floats (no overflow of
 * the intermediate sum in fp16/fp8), and for integers an exact wrapped sum divided once at the
 * end. The caller marks as pre-op sources only data that has not been scaled yet (the user's
 * input), and sets postop only on the step that produces final results.
 * Integer sum and prod wrap modulo 2^bits; float max/min ignore a NaN operand as fmax does.
 * With premulsum and float avg, sources outside preop_mask are multiplied by exactly 1 (one code
 * path, no branch per source): a no-op except that an fp8 e5m2 infinity saturates there too.
 *
 * Pointers are device (or peer-mapped) addresses, each aligned to the element size. When all of
 * them share the same address modulo 16 the kernel moves 16-byte vectors, with element-wise
 * head and tail; otherwise it goes element by element. A destination may equal a source (in
 * place); other overlaps are undefined. count == 0 launches nothing and succeeds.
 */
typedef struct kern_reduce_copy_args {
  const void* srcs[KERN_RC_MAX_SRCS]; /* the first nsrcs are used */
  void* dsts[KERN_RC_MAX_DSTS];       /* the first ndsts are used */
  uint64_t count;                     /* elements per source and destination */
  /* premulsum scalar by value: its sizeof(type) bytes at the start, as memcpy leaves them. */
  uint64_t scalar_bits;
  /* premulsum scalar in device memory (one element of the type), read by the kernel when it
   * runs; overrides scalar_bits when non-NULL. */
  const void* scalar_ptr;
  kern_op_t op;
  ncclDataType_t type;
  int32_t nsrcs;       /* 1..KERN_RC_MAX_SRCS */
  int32_t ndsts;       /* 1..KERN_RC_MAX_DSTS */
  uint32_t preop_mask; /* bit s: source s gets pre_s (premulsum, float avg) */
  int32_t postop;      /* nonzero: apply post (integer avg) to the result */
  int32_t divisor;     /* avg: the number of ranks, >= 1; ignored by other ops */
  uint32_t nctas;      /* CTAs to launch; 0 lets the launcher choose from count */
} kern_reduce_copy_args_t;

/* Threads per CTA of the standalone reduce-copy kernel. */
#define KERN_RC_NTHREADS 512

/* Launches reduce-copy on stream. Returns ncclSuccess, or an error as in the header comment.
 * Arguments are validated before any CUDA call, so a malformed call fails the same way on a
 * machine without a GPU. */
ncclResult_t kern_reduce_copy_launch(const kern_reduce_copy_args_t* args, cudaStream_t stream);

/* 1 when reduce-copy for (op, type) was built (kernel_subset), 0 when left out or invalid. */
int kern_instance_available(kern_op_t op, ncclDataType_t type);

/* The kernel_subset string this library was built with ("all" or a filter). */
const char* kern_subset(void);

/* Short names as kernel_subset spells them ("sum", "bf16"); "?" for an invalid value. */
const char* kern_op_name(kern_op_t op);
const char* kern_type_name(ncclDataType_t type);

/* Size in bytes of one element of type, 0 for an invalid type. */
size_t kern_type_size(ncclDataType_t type);

/* One line explaining the last error returned to this thread by a kern_ function ("" if none). */
const char* kern_last_error(void);

#ifdef __cplusplus
} /* extern "C" */
#define KERN_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define KERN_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

/* The layout is part of the boundary between C and nvcc translation units (and later the
 * device-side work descriptors): pin it. */
KERN_STATIC_ASSERT(sizeof(kern_op_t) == 4, "kern_op_t must be int-sized");
KERN_STATIC_ASSERT(sizeof(ncclDataType_t) == 4, "ncclDataType_t must be int-sized");
KERN_STATIC_ASSERT(sizeof(void*) == 8, "kernels assume 64-bit pointers");
KERN_STATIC_ASSERT(offsetof(kern_reduce_copy_args_t, dsts) == 64, "kern_reduce_copy_args_t layout");
KERN_STATIC_ASSERT(offsetof(kern_reduce_copy_args_t, count) == 80,
                   "kern_reduce_copy_args_t layout");
KERN_STATIC_ASSERT(offsetof(kern_reduce_copy_args_t, op) == 104, "kern_reduce_copy_args_t layout");
KERN_STATIC_ASSERT(offsetof(kern_reduce_copy_args_t, nctas) == 132,
                   "kern_reduce_copy_args_t layout");
KERN_STATIC_ASSERT(sizeof(kern_reduce_copy_args_t) == 136, "kern_reduce_copy_args_t size");
KERN_STATIC_ASSERT(KERN_RC_MAX_SRCS <= 32, "preop_mask has one bit per source");

#endif
