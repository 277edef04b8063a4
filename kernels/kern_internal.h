/*
 * Private to kernels/: what the C launcher (kern_launch.c), the generated table (kern_table.c)
 * and the generated CUDA instances (kern_inst_<type>.cu) share. Plain C, like kernels.h.
 */
#ifndef CHOIR_KERN_INTERNAL_H
#define CHOIR_KERN_INTERNAL_H

#include "kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One built reduce-copy instance: launches nctas CTAs of KERN_RC_NTHREADS on stream. The
 * arguments have been validated and count > 0. Returns the launch's own CUDA error. */
typedef cudaError_t kern_rc_launch_fn(const kern_reduce_copy_args_t* args, unsigned nctas,
                                      cudaStream_t stream);

/* One built batch launcher of reduction collectives (kernels.h: kern_coll_batch_t), the one
 * kernel per protocol of its (op, type), which also runs a single work (a batch of one), but for
 * a lone LL work off the tree, which runs in the LL kernel of one work (kern_coll.cuh:
 * kern_coll_lone_kernel): grid and CTA from the works. Arguments validated: 1..KERN_COLL_BATCH_MAX works of this (op, type), one
 * protocol. batch == NULL: load the instance's kernels only (kern_preload). */
typedef cudaError_t kern_coll_batch_launch_fn(const kern_coll_batch_t* batch, cudaStream_t stream);

/* The byte-moving kernels, always built (kern_copy.cu): Broadcast and AllGather with count in
 * bytes (a validated batch of one or more works), and p2p batches. */
cudaError_t kern_copy_coll_batch_launch(const kern_coll_batch_t* batch, cudaStream_t stream);
cudaError_t kern_p2p_batch_launch(const kern_p2p_batch_t* batch, cudaStream_t stream);
/* Loads the byte-moving kernels into the current context. */
cudaError_t kern_copy_preload(void);

/* Generated from instances.py (kern_table.c): NULL where kernel_subset left the instance out. */
extern kern_rc_launch_fn* const kern_rc_table[KERN_OP_NUM][ncclNumTypes];
extern kern_coll_batch_launch_fn* const kern_coll_batch_table[KERN_OP_NUM][ncclNumTypes];
extern const char* const kern_op_names[KERN_OP_NUM];
extern const char* const kern_type_names[ncclNumTypes];
extern const char kern_subset_str[];

/* Kernels whose one parameter is a large struct of which a launch uses a prefix (a batch of
 * works or p2p ops, declared for the most it can hold: kernels.h) are launched with only the
 * bytes in use, as NVIDIA's NCCL launches its kernels: a batch of one work copies 112 bytes of
 * parameters, not 3.9 KB. Launches fn (a __global__ function's host symbol) with grid x threads
 * CTAs, its parameter the first `bytes` bytes of params, through the driver's cuLaunchKernel
 * (reached with cudaGetDriverEntryPointByVersion: libnccl.so.2 does not link libcuda.so.1). The
 * rest of the parameter is undefined in the kernel, which must not read it. Returns the launch's
 * error (the driver's CUresult, whose values the runtime's cudaError_t shares). */
cudaError_t kern_launch_prefix(const void* fn, unsigned grid, unsigned threads, const void* params,
                               size_t bytes, cudaStream_t stream);

/* Parameter bytes in use of a batch of n collective works / of n p2p ops. */
#define KERN_COLL_BATCH_BYTES(n) \
  (offsetof(kern_coll_batch_t, works) + (size_t)(n) * sizeof(kern_coll_work_t))
#define KERN_P2P_BATCH_BYTES(n) \
  (offsetof(kern_p2p_batch_t, ops) + (size_t)(n) * sizeof(kern_p2p_op_t))

/* 16-byte vectors, unrolled 4 deep per thread, in chunks of one warp: the packs one CTA moves in
 * one step. The launcher sizes the grid with it; the device code is written for these values. */
#ifndef KERN_RC_UNROLL /* overridable for tuning experiments only */
#define KERN_RC_UNROLL 4
#endif

#ifdef __cplusplus
}
#endif

#endif
