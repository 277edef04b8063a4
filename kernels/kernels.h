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

/* ======================================================================================
 * The data path: connections, the device-side communicator, and collective work.
 *
 * A connection moves data one way between two ranks through a buffer of KERN_NSLOTS slots
 * owned by the receiving side's transport (GPU memory for p2p, host shared memory for shm).
 * Two monotonically increasing 64-bit counters drive it:
 *   tail  slots the sender has filled. The sender writes it (after the data, with a system-scope
 *         fence); the receiver polls it.
 *   head  slots the receiver has consumed. The receiver writes it; the sender polls it.
 * Slot i of the stream lives at buff + (i % KERN_NSLOTS) * slot_bytes. The sender may fill slot
 * i once head >= i + 1 - KERN_NSLOTS; the receiver may read it once tail >= i + 1. Both ends
 * keep `step` (slots moved so far) in their own kern_conn_t in device memory: the one CTA that
 * owns the connection in a kernel reads it at start and writes it back at the end, so a
 * connection carries on across kernels. Both ends compute every slot's byte count from the
 * same work description, so no size travels with the data.
 * ====================================================================================== */

#define KERN_NSLOTS 8              /* slots per connection buffer (NCCL's NCCL_STEPS) */
#define KERN_MAX_CHANNELS 64       /* ring channels per communicator */
#define KERN_MAX_P2P_CHANNELS 32   /* connections per peer and direction for send/recv */
#define KERN_NTHREADS 512          /* threads per CTA of the collective and p2p kernels */
/* OneShot (kern_coll_work_t.algo == KERN_ALGO_ONESHOT, Choir's own algorithm after NCCL's
 * seven; AllReduce, AllGather, ReduceScatter) and TwoShot (AllReduce): at most this many ranks
 * (every pair p2p) and CTAs, one direct connection per peer, CTA and direction. */
#define KERN_ALGO_TREE 0 /* NCCL_ALGO_TREE: kern_tree_t, kern_tree.cuh */
#define KERN_ALGO_ONESHOT 7
#define KERN_ALGO_TWOSHOT 8 /* the same connections, kern_direct.cuh */
/* The Sym kernels (kern_direct.cuh), for buffers inside symmetric windows
 * (ncclCommWindowRegister): every rank's copy is reached through the window's flat mapping, no
 * copy through a connection; the direct connections carry only their two barriers. AllReduce
 * (SymTwoShot): rank q reduces slice q straight from every rank's input and stores it into
 * every rank's output; AllGather: each rank stores its block into every rank's output;
 * ReduceScatter: rank q reduces block q straight from every rank's input. Not in NCCL_ALGO's
 * names: the plan takes them for buffers in windows (CHOIR_SYM_KERNELS). */
#define KERN_ALGO_SYM 9
#define KERN_DIRECT_MAX_RANKS 8
#define KERN_DIRECT_MAX_CTAS 16 /* the tables' stride; CHOIR_DIRECT_CTAS of them are made */
/* The ring collectives split a buffer over channels, and each channel's part into steps, in
 * whole 16-byte units (so that vectors stay aligned); the host counts their steps the same way
 * (the profiler's ProxyOp events). */
#define KERN_RC_VEC_BYTES 16

/* Protocols, with NCCL's numbering (NCCL_PROTO_LL/LL128/SIMPLE, the tuner ABI's table index).
 *   SIMPLE  the slot holds plain data; the sender publishes tail after a system-scope fence and
 *           the receiver polls tail before reading.
 *   LL      16-byte lines {data0 u32, flag0 u32, data1 u32, flag1 u32}: 8 bytes of data and the
 *           step's flag twice, written by one 16-byte store; the receiver polls the flags of
 *           each line, so no fence and no tail per step (8 data bytes per 16 moved).
 *   LL128   128-byte lines: 120 bytes of data and one 8-byte flag (the line's last 8 bytes),
 *           written by one warp-wide store of the whole line; valid only where the link keeps
 *           128-byte stores whole (NVLink, the same GPU).
 * The flag of a line written at step s (the connection's step counter, shared by every protocol)
 * is (uint32_t)(s + 1) for LL and (uint64_t)(s + 1) for LL128: a line left from an earlier step
 * never carries it, so a protocol's buffer must only ever hold that protocol's lines. */
typedef enum {
  KERN_PROTO_LL = 0,
  KERN_PROTO_LL128 = 1,
  KERN_PROTO_SIMPLE = 2,
  KERN_PROTO_NUM = 3
} kern_proto_t;

#define KERN_LL_LINE_BYTES 16
#define KERN_LL128_LINE_BYTES 128
#define KERN_LL128_LINE_DATA 120

/* A protocol's name as NCCL spells it ("LL", "LL128", "Simple"); "?" for another value. Inline:
 * modules that use only this header (the transport) need no kernel library. */
static inline const char* kern_proto_name(int proto) {
  return proto == KERN_PROTO_LL      ? "LL"
         : proto == KERN_PROTO_LL128 ? "LL128"
         : proto == KERN_PROTO_SIMPLE ? "Simple"
                                      : "?";
}

/* Data bytes one step of protocol `proto` moves at most through a slot of slot_bytes bytes, a
 * multiple of 16 (0 when the slot cannot hold one unit). Host and device use it alike: a step
 * moves min(work chunk_bytes, this), so both ends of a connection agree. */
#ifdef __CUDACC__
#define KERN_HOST_DEVICE __host__ __device__
#else
#define KERN_HOST_DEVICE
#endif
static inline KERN_HOST_DEVICE uint32_t kern_proto_step_capacity(int proto, uint32_t slot_bytes) {
  uint32_t b = proto == KERN_PROTO_LL      ? slot_bytes / KERN_LL_LINE_BYTES * 8u
               : proto == KERN_PROTO_LL128 ? slot_bytes / KERN_LL128_LINE_BYTES * KERN_LL128_LINE_DATA
                                           : slot_bytes;
  return b & ~15u;
}

/* Part i of n of count elements, in whole units of `unit` elements (the last parts may be short
 * or empty): how a collective splits its buffer over channels and a send/recv its bytes over
 * CTAs. Host and device alike: the core counts the steps each part takes for the profiler. */
static inline KERN_HOST_DEVICE void kern_split_part(uint64_t count, uint64_t unit, uint32_t n,
                                                    uint32_t i, uint64_t* off_p, uint64_t* cnt_p) {
  const uint64_t units = (count + unit - 1) / unit;
  const uint64_t per = (units + n - 1) / n * unit;
  uint64_t off = per * i;
  if (off > count) off = count;
  uint64_t end = off + per;
  if (end > count) end = count;
  *off_p = off;
  *cnt_p = end - off;
}

/* The LL rule of a connection's step counters (kern_conn_t.step, head), shared by the kernels and
 * the CPU test of its logic (test/unit/test_ll_epochs.c). Step s lives in slot s % KERN_NSLOTS
 * and its lines carry the flag (uint32_t)(s + 1) in both 8-byte halves; a sender may write `steps`
 * more steps from step s only while head + KERN_NSLOTS >= s + steps, head being the steps the
 * receiver has finished reading. The counters carry over between kernels, so a line an earlier
 * step left in a slot (of this kernel, an earlier call or an earlier replay of a CUDA graph)
 * bears another step's flag and is never taken for the current one. */
static inline KERN_HOST_DEVICE uint32_t kern_ll_flag(uint64_t step) {
  return (uint32_t)(step + 1);
}
static inline KERN_HOST_DEVICE uint64_t kern_ll_line_at(uint64_t step, uint32_t slot_bytes,
                                                        uint64_t line) {
  return (step % KERN_NSLOTS) * (uint64_t)slot_bytes + line * KERN_LL_LINE_BYTES;
}
static inline KERN_HOST_DEVICE int kern_ll_room(uint64_t head, uint64_t step, uint64_t steps) {
  return head + KERN_NSLOTS >= step + steps;
}

typedef struct kern_conn {
  /* Per protocol (kern_proto_t), KERN_NSLOTS * slot_bytes[p] bytes, NULL when the connection
   * was made without that protocol (slot_bytes[p] == 0). Receive end: where data arrives (read
   * here). Send end: the peer's receive buffer (written here). Device-accessible (peer-mapped
   * or host-mapped). A protocol whose bit is set in tail_sync may share the SIMPLE buffer. */
  char* buff[KERN_PROTO_NUM];
  uint64_t* tail;      /* see above; device-accessible from both ends */
  uint64_t* head;
  uint64_t step;       /* slots moved by this end so far (owned by the kernels, starts at 0) */
  /* Send ends, LL and LL128: a value of *head this end has seen (owned by the kernels, starts
   * at 0). head only grows, so it is a lower bound: a kernel starts from it instead of reading
   * head (one dependent round trip before its first step) and reads head only when it is not
   * enough for the step at hand. */
  uint64_t head_seen;
  uint32_t slot_bytes[KERN_PROTO_NUM]; /* multiples of 128; 0: protocol not made */
  uint32_t connected;  /* 1 once the transport filled it; a kernel never uses one that is 0 */
  uint32_t transport;  /* kern_transport_t, for logs and tests */
  /* Bit p (1u << kern_proto_t): protocol p synchronizes like SIMPLE on this connection (the
   * sender publishes tail, and the byte count where sizes is set; the receiver waits for tail)
   * instead of polling its lines' flags. Set by the transport where the lines cannot be polled:
   * the network (the proxy moves whole slots), and LL128 over host memory (PCIe does not keep
   * 128-byte stores whole). The line format is the same either way. SIMPLE's bit is ignored. */
  uint32_t tail_sync;
  /* Net send ends only (NULL otherwise): KERN_NSLOTS byte counts, host-mapped. The sender
   * writes slot i's count to sizes[i % KERN_NSLOTS] before publishing tail, so that the proxy
   * thread knows how much to hand to the network (the receiver computes its own). For LL and
   * LL128 the count is of line bytes (flags included). */
  uint32_t* sizes;
} kern_conn_t;

typedef enum { KERN_TRANSPORT_NONE = 0, KERN_TRANSPORT_P2P = 1, KERN_TRANSPORT_SHM = 2,
               KERN_TRANSPORT_NET = 3 } kern_transport_t;

/* One ring channel: this rank's connections to its ring neighbours. */
typedef struct kern_channel {
  kern_conn_t send;  /* to ring.next */
  kern_conn_t recv;  /* from ring.prev */
  int32_t prev, next;
  int32_t index;     /* this rank's position in the ring */
  int32_t pad;
  const int32_t* ranks; /* device memory: the ring's ranks in ring order (nranks entries) */
} kern_channel_t;

/* One tree channel (NCCL_ALGO_TREE: AllReduce, every protocol): this rank's links in the
 * channel's tree, and a connection each way with every one of them. Inside a node the tree is the
 * chain of its ranks in ring order; across nodes, NCCL's double binary tree over the nodes' first
 * ranks (graph.h). up: the parent (-1 at the root); down[]: the children (-1 where absent, in any
 * slot). The reduction goes up (children's partial sums in down_recv, this rank's to up_send),
 * the result comes down (up_recv, then to every child through down_send). Every connection of
 * the channel has the same slot per protocol, so both ends of each cut the data into the same
 * steps. */
#define KERN_TREE_ARITY 3
typedef struct kern_tree {
  kern_conn_t up_send;
  kern_conn_t up_recv;
  kern_conn_t down_send[KERN_TREE_ARITY];
  kern_conn_t down_recv[KERN_TREE_ARITY];
  int32_t up;
  int32_t down[KERN_TREE_ARITY];
} kern_tree_t;

/* The device-side communicator (in device memory; the kernels get a pointer to it). */
typedef struct kern_comm {
  int32_t rank;
  int32_t nranks;
  int32_t nchannels;     /* ring channels connected (channels[0..nchannels-1]) */
  int32_t p2p_nchannels; /* connections per peer and direction used by send/recv */
  /* Host-mapped flag set by ncclCommAbort: kernels waiting on a peer give up when it is set. */
  const volatile uint32_t* abort_flag;
  /* [peer * KERN_MAX_P2P_CHANNELS + c]: send/recv connections, connected == 0 until set up. */
  kern_conn_t* p2p_send;
  kern_conn_t* p2p_recv;
  /* [peer * KERN_DIRECT_MAX_CTAS + cta]: OneShot's connections (LL buffers), NULL until made. */
  kern_conn_t* direct_send;
  kern_conn_t* direct_recv;
  /* [c], c < tree_nchannels: the tree channels (NULL and 0 when no tree was connected). */
  kern_tree_t* trees;
  int32_t tree_nchannels;
  int32_t pad;
  kern_channel_t channels[KERN_MAX_CHANNELS];
} kern_comm_t;

/* The profiler's kernel-channel record of one CTA of a launch: the GPU's global timer (ns) when
 * the CTA started and when it finished, written by its thread 0 into host-mapped memory (0 until
 * written: the host zeroes a record before the launch and reads it after, without waiting on the
 * stream). A launch with records gets one per CTA: CTA i writes record i. */
typedef struct kern_prof_rec {
  uint64_t start;
  uint64_t stop;
} kern_prof_rec_t;

/* Ring collectives (reductions use (op, type); the others move bytes). */
typedef enum {
  KERN_COLL_BROADCAST = 0,
  KERN_COLL_REDUCE = 1,
  KERN_COLL_ALLGATHER = 2,
  KERN_COLL_REDUCESCATTER = 3,
  KERN_COLL_ALLREDUCE = 4,
  KERN_COLL_NUM = 5
} kern_coll_t;

/* Whether direct algorithm algo runs collective coll (a kern_coll_t, whose values are
 * ncclFunc_t's): OneShot AllReduce, AllGather and ReduceScatter, TwoShot AllReduce. The model,
 * the plan and the launch check all ask this. */
static inline KERN_HOST_DEVICE int kern_direct_runs(int algo, int coll) {
  if (coll == KERN_COLL_ALLREDUCE) return algo == KERN_ALGO_ONESHOT || algo == KERN_ALGO_TWOSHOT;
  return algo == KERN_ALGO_ONESHOT &&
         (coll == KERN_COLL_ALLGATHER || coll == KERN_COLL_REDUCESCATTER);
}

/*
 * One collective over the ring channels channel0..channel0+nchannels-1 (one CTA each, at most
 * KERN_NTHREADS threads).
 * count is in elements of type, as the API takes it: AllReduce, Broadcast, Reduce: the whole
 * buffer; AllGather: sendcount (recvbuff holds nranks blocks); ReduceScatter: recvcount
 * (sendbuff holds nranks blocks). Every rank's slot_bytes of a ring connection must be equal.
 * Semantics of op, scalar and divisor as for reduce-copy (avg: divisor = nranks).
 * The kernel splits the buffer into nchannels parts of whole 16-byte units; part k (channel
 * channel0 + k) moves in steps of at most min(chunk_bytes, kern_proto_step_capacity(proto,
 * slot)) bytes (chunk_bytes a multiple of 16), with proto's line format and synchronization.
 */
typedef struct kern_coll_work {
  kern_prof_rec_t* prof; /* NULL, or nchannels records (kern_prof_rec_t); first in every work */
  const void* sendbuff;
  void* recvbuff;
  uint64_t count;
  /* The Sym kernels (never with premulsum, the only operator that reads a scalar): where LSA
   * rank 0's copy of recvbuff (AllReduce, AllGather) and sendbuff (AllReduce, ReduceScatter) lie
   * in the windows' flat ranges; rank q's copy is sym_stride4g x 4 GiB further per rank. */
  union {
    uint64_t scalar_bits;
    char* sym_recv0;
  };
  union {
    const void* scalar_ptr;
    const char* sym_send0;
  };
  kern_comm_t* comm; /* device pointer */
  int32_t coll;      /* kern_coll_t */
  int32_t op;        /* kern_op_t (reductions) */
  int32_t type;      /* ncclDataType_t */
  union {
    int32_t root; /* Broadcast, Reduce */
    /* OneShot AllReduce in a batch: the works of its run from this one on, this one included
     * (kern_oneshot_joins); set by kern_coll_batch_launch, whatever the caller wrote. */
    int32_t run;
    uint32_t sym_stride4g; /* Sym kernels: the windows' stride between LSA ranks, in 4 GiB */
  };
  int32_t divisor;
  int32_t nchannels;
  uint32_t chunk_bytes; /* data bytes per step at most (capped by kern_proto_step_capacity) */
  int32_t algo;         /* NCCL_ALGO_RING; NCCL_ALGO_TREE (AllReduce, Simple: nchannels CTAs
                         * over the tree channels, kern_tree.cuh); KERN_ALGO_ONESHOT (AllReduce,
                         * AllGather, ReduceScatter) or KERN_ALGO_TWOSHOT (AllReduce): nchannels
                         * CTAs over the direct connections, proto LL, kern_direct.cuh */
  int32_t proto;        /* kern_proto_t; the ring connections must have its buffers */
  uint16_t nthreads;    /* threads per CTA: a multiple of 32 in [64, KERN_NTHREADS] */
  /* The ring's first channel: part k of the buffer (k < nchannels) runs on ring channel and CTA
   * channel0 + k, so that the works of one launch can run side by side on channels of their
   * own (channel0 + nchannels <= KERN_MAX_CHANNELS and the channels connected). 0 for every
   * other algorithm. */
  uint16_t channel0;
} kern_coll_work_t;

/* Whether OneShot work b continues the run of OneShot work a in one batch (kernels.h's batch
 * kernel streams such a run as one): both OneShot AllReduces, with the same operator arguments.
 * The kernel and the plan (which gives the run its CTAs) must agree, so both ask this. */
static inline KERN_HOST_DEVICE int kern_oneshot_joins(const kern_coll_work_t* a,
                                                      const kern_coll_work_t* b) {
  return a->algo == KERN_ALGO_ONESHOT && b->algo == KERN_ALGO_ONESHOT &&
         a->coll == KERN_COLL_ALLREDUCE && b->coll == KERN_COLL_ALLREDUCE &&
         b->scalar_bits == a->scalar_bits && b->scalar_ptr == a->scalar_ptr &&
         b->divisor == a->divisor;
}

/* One send, receive or local copy of a p2p batch. A send (recv) to/from peer uses the p2p
 * connections [peer][0..nctas-1]: its bytes are split into nctas parts of whole 16-byte units
 * (the last part takes the rest), and both ends must use the same nctas and byte count. */
typedef enum { KERN_P2P_SEND = 0, KERN_P2P_RECV = 1, KERN_P2P_COPY = 2 } kern_p2p_kind_t;
typedef struct kern_p2p_op {
  const void* src;  /* send, copy */
  void* dst;        /* recv, copy */
  uint64_t bytes;
  int32_t peer;
  uint16_t kind;    /* kern_p2p_kind_t */
  uint16_t nctas;   /* >= 1 */
} kern_p2p_op_t;

#define KERN_P2P_MAX_OPS 96
/* Sends, receives and copies that progress together in one kernel: op k gets CTAs
 * [sum of nctas of ops < k, + nctas). */
typedef struct kern_p2p_batch {
  kern_prof_rec_t* prof; /* NULL, or nctas records (kern_prof_rec_t) */
  kern_comm_t* comm; /* device pointer */
  uint32_t nops;
  uint32_t nctas;    /* sum of the ops' nctas: the grid */
  uint32_t chunk_bytes; /* slice cap, multiple of 16 (slices never exceed a connection's slot) */
  uint32_t pad;
  kern_p2p_op_t ops[KERN_P2P_MAX_OPS];
} kern_p2p_batch_t;

/*
 * Several collectives in one launch, run in order: what a group of small collectives costs is
 * then one launch, not one per collective. Every work must be valid for kern_coll_launch and all
 * must use the same kernel: the same proto and, for reductions (Reduce, ReduceScatter,
 * AllReduce), the same op and type; Broadcast and AllGather (bytes) share the copy kernel. The
 * two families do not mix. The grid is the largest channel0 + nchannels of the works and the
 * CTAs the largest nthreads (clamped to what the kernel is built for, as for one work). CTA c
 * runs, in order, each work that has channel c (channel0 <= c < channel0 + nchannels) and skips
 * the others; it starts work w + 1 only after finishing its part of work w. So works on
 * channels of their own run side by side, and works that share a channel run one after the
 * other on it. Each work's records (prof, one per its CTA, record k for channel channel0 + k)
 * are written by the CTAs that run it, as for a launch of that work alone.
 * Every rank must form the same batches from the same collectives: a connection's two ends then
 * see the same works in the same order. A CTA's thread count may exceed a work's nthreads (all
 * its threads then run it); no protocol lets a step's data placement depend on the thread count, so
 * the two ends need not agree on it (kern_prims.cuh: lines are placed by index, threads only
 * share them out).
 */
#define KERN_COLL_BATCH_MAX 64
/* The first word of every batch: an emulated launch (the CPU tests' fake runtime) tells a batch
 * from a single work by it. Not a pointer any allocation can have (non-canonical, odd), so a
 * single work's records pointer, in the same place, never equals it. */
#define KERN_COLL_BATCH_TAG 0xc011ba7c4000000bull
typedef struct kern_coll_batch {
  uint64_t tag;       /* KERN_COLL_BATCH_TAG (unchecked by the kernel) */
  uint32_t nworks;    /* 1..KERN_COLL_BATCH_MAX */
  uint32_t pad;
  kern_coll_work_t works[KERN_COLL_BATCH_MAX]; /* the first nworks are used */
} kern_coll_batch_t;

/* A batch of one work with its parameter declared at that size: the kernels of a lone LL work
 * (kern_coll.cuh: kern_coll_lone_kernel; kern_copy.cu: kern_copy_lone_kernel) take it. A launch
 * passes the first KERN_COLL_BATCH_BYTES(1) bytes of a kern_coll_batch_t, the same prefix as for
 * the batch kernel. */
typedef struct kern_coll_batch1 {
  uint64_t tag; /* KERN_COLL_BATCH_TAG */
  uint32_t nworks; /* 1 */
  uint32_t pad;
  kern_coll_work_t works[1];
} kern_coll_batch1_t;

/* Launch one collective (nchannels CTAs) / one p2p batch on stream. Errors as for reduce-copy;
 * ncclInvalidUsage when the (op, type) instance is not built. */
ncclResult_t kern_coll_launch(const kern_coll_work_t* work, cudaStream_t stream);
/* Launch a batch of collectives (above). Every work is checked as kern_coll_launch checks it
 * (the message names the work's index); then ncclInvalidArgument when nworks is outside
 * 1..KERN_COLL_BATCH_MAX, the tag is wrong, or the works do not share one kernel (the message
 * names the first work that differs and how). A batch of one launches as kern_coll_launch. */
ncclResult_t kern_coll_batch_launch(const kern_coll_batch_t* batch, cudaStream_t stream);
ncclResult_t kern_p2p_launch(const kern_p2p_batch_t* batch, cudaStream_t stream);
/* Load every data-path kernel into the current device's context. CUDA loads modules lazily by
 * default, and loading waits for the kernels already running on the device: a first launch of
 * some kernel while another of ours waits for a peer would deadlock. Call it once per device
 * before the first launch (cheap when already done). */
ncclResult_t kern_preload(void);
/* 1 when the reduction-collective instance for (op, type) was built. */
int kern_coll_available(kern_op_t op, ncclDataType_t type);

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
KERN_STATIC_ASSERT(sizeof(kern_conn_t) == 88, "kern_conn_t layout");
KERN_STATIC_ASSERT(sizeof(kern_channel_t) == 200, "kern_channel_t layout");
KERN_STATIC_ASSERT(sizeof(kern_tree_t) == 8 * 88 + 16, "kern_tree_t layout");
KERN_STATIC_ASSERT(sizeof(kern_coll_work_t) == 96, "kern_coll_work_t layout");
/* A launch's records pointer is the first member of both works: an emulated launch (the CPU
 * tests' fake runtime) writes the timestamps without knowing which kernel it stands for. */
KERN_STATIC_ASSERT(offsetof(kern_coll_work_t, prof) == 0, "kern_coll_work_t layout");
KERN_STATIC_ASSERT(offsetof(kern_p2p_batch_t, prof) == 0, "kern_p2p_batch_t layout");
KERN_STATIC_ASSERT(offsetof(kern_coll_batch_t, works) == 16, "kern_coll_batch_t layout");
KERN_STATIC_ASSERT(sizeof(kern_coll_batch_t) == 16 + 96 * KERN_COLL_BATCH_MAX,
                   "kern_coll_batch_t layout");
KERN_STATIC_ASSERT(offsetof(kern_coll_batch1_t, works) == offsetof(kern_coll_batch_t, works) &&
                       sizeof(kern_coll_batch1_t) == 16 + 96,
                   "kern_coll_batch1_t is kern_coll_batch_t's prefix of one work");
/* Over the classic 4 KB of kernel parameters: CUDA 12.1 and later take up to 32764 bytes (Volta
 * and newer); a launch copies only the works in use (kern_internal.h), so a batch of a few works
 * costs what it did. */
KERN_STATIC_ASSERT(sizeof(kern_coll_batch_t) <= 32764,
                   "a collective batch fits the kernel parameter space");
KERN_STATIC_ASSERT(sizeof(kern_p2p_op_t) == 32, "kern_p2p_op_t layout");
KERN_STATIC_ASSERT(sizeof(kern_p2p_batch_t) <= 4096, "a p2p batch fits the classic parameter space");

#endif
