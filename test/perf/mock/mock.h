/*
 * Choir perf tools, CPU mock: a fake CUDA runtime and a fake NCCL that run the perf binaries
 * end to end on a machine without a GPU (unit tests only; never installed).
 *
 * Device memory is host memory. Every kernel and memory operation runs synchronously when it is
 * called. NCCL operations are posted: the k-th collective of every rank of a communicator is
 * executed (in rank order, with the mock's own arithmetic, independent of ref.h's: see
 * mock_nccl.c) by the call that posts the last of them, and a
 * send by the call that posts its matching receive (or the other way round). Until then, the
 * stream it was posted on is busy: cudaStreamQuery returns cudaErrorNotReady, and any other
 * operation on that stream is a harness bug that the mock reports and aborts on. Captured
 * streams record NCCL calls; launching the graph posts them again.
 *
 * A communicator created with config.blocking = 0 reports ncclInProgress from
 * ncclCommGetAsyncError for two polls after each call (init, operations, finalize), so that callers'
 * polling loops run. ncclGroupSimulateEnd closes the group and reports an estimate of 1 us.
 *
 * Faults, from the environment (to prove that the perf tools notice them):
 *   MOCK_CUDA_DEVICES=N        number of devices (default 8; 0: cudaGetDeviceCount fails)
 *   MOCK_NCCL_CORRUPT=1        every collective writes a wrong value into the last rank's output
 *   MOCK_NCCL_OVERRUN=1        every collective writes one byte after rank 0's output
 *   MOCK_NCCL_DROP_LAST=1      reductions leave out the last rank's input (avg still divides
 *                              by the rank count)
 *   MOCK_NCCL_HANG=R           operations posted by rank R never complete
 *   MOCK_NCCL_ASYNC_ERROR=1    ncclCommGetAsyncError reports ncclSystemError once work is posted
 *   MOCK_NCCL_INIT_HANG=1      communicator initialisation never returns
 */
#ifndef CHOIR_PERF_MOCK_H
#define CHOIR_PERF_MOCK_H

#include <cuda_runtime_api.h>
#include <stddef.h>

struct ncclComm;

/* One NCCL call, as posted or as recorded in a graph. */
struct mock_call {
  int kind; /* MOCK_* */
  const void* send;
  void* recv;
  size_t count;
  int type;
  int op; /* ncclRedOp_t value */
  int root;
  int peer;
  struct ncclComm* comm;
  cudaStream_t stream;
};

enum {
  MOCK_ALLREDUCE,
  MOCK_ALLGATHER,
  MOCK_REDUCESCATTER,
  MOCK_BROADCAST,
  MOCK_REDUCE,
  MOCK_ALLTOALL,
  MOCK_GATHER,
  MOCK_SCATTER,
  MOCK_SEND,
  MOCK_RECV
};

struct CUstream_st {
  int dev;
  int capturing;
  int pending; /* posted NCCL operations not executed yet */
  int hung;    /* holds an operation of the MOCK_NCCL_HANG rank */
  struct mock_call* rec;
  int nrec, cap;
};

struct CUgraph_st {
  struct mock_call* rec;
  int nrec;
};

/* One lock for the whole mock (streams and NCCL state). */
void mock_lock(void);
void mock_unlock(void);

int mock_current_device(void);

/* Abort with a message when the stream still has NCCL work (called under the lock). */
void mock_stream_idle(cudaStream_t s, const char* what);

/* Post a call (fake NCCL), under the lock. */
void mock_nccl_post(const struct mock_call* c);

__attribute__((noreturn, format(printf, 1, 2))) void mock_fail(const char* fmt, ...);

#endif
