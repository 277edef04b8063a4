/*
 * The floor under a small collective with ranks sharing one GPU in CUDA-graph mode, measured the
 * way all_reduce_perf -G times one: R streams, each replaying a graph of G kernel launches (one
 * CTA of 64 threads), all streams launched together, the time per iteration. Two kernels:
 *   empty    does nothing: what the graph launches themselves cost;
 *   barrier  meets the other R - 1 streams' kernel of the same iteration through flags in device
 *            memory (each writes its epoch, then waits for every other's): a collective with no
 *            data, the least a OneShot call must do.
 * A collective's time minus the barrier's is what its own data path costs.
 *
 *   graph_floor [R [G [L]]]   R streams (default 4), G launches per graph (20), L replays (50)
 *
 * Exit 77 without a GPU.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_STREAMS 64

__global__ void floor_empty(void) {}

/* ctr[r]: this stream's epoch, counted in device memory (a graph replays fixed parameters);
 * flag[q]: stream q's latest epoch. */
__global__ void floor_barrier(unsigned* ctr, volatile unsigned* flag, int r, int n) {
  if (threadIdx.x != 0) return;
  const unsigned e = ++ctr[r];
  __threadfence();
  flag[r] = e;
  for (int q = 0; q < n; q++)
    while ((int)(flag[q] - e) < 0) {
    }
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

#define CK(x)                                                                                  \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      fprintf(stderr, "graph_floor: %s: %s\n", #x, cudaGetErrorString(e_));                    \
      exit(1);                                                                                 \
    }                                                                                          \
  } while (0)

/* Microseconds per iteration of n streams, each replaying its graph of g launches l times. */
static double run(int barrier, int n, int g, int l, unsigned* ctr, unsigned* flag) {
  cudaStream_t s[MAX_STREAMS];
  cudaGraphExec_t ex[MAX_STREAMS];
  for (int r = 0; r < n; r++) {
    CK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
    cudaGraph_t gr;
    CK(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < g; i++) {
      if (barrier)
        floor_barrier<<<1, 64, 0, s[r]>>>(ctr, flag, r, n);
      else
        floor_empty<<<1, 64, 0, s[r]>>>();
    }
    CK(cudaStreamEndCapture(s[r], &gr));
    CK(cudaGraphInstantiate(&ex[r], gr, 0));
    CK(cudaGraphDestroy(gr));
  }
  for (int w = 0; w < 2; w++)
    for (int r = 0; r < n; r++) CK(cudaGraphLaunch(ex[r], s[r]));
  CK(cudaDeviceSynchronize());
  const double t0 = now_us();
  for (int k = 0; k < l; k++)
    for (int r = 0; r < n; r++) CK(cudaGraphLaunch(ex[r], s[r]));
  CK(cudaDeviceSynchronize());
  const double us = (now_us() - t0) / ((double)l * g);
  for (int r = 0; r < n; r++) {
    CK(cudaGraphExecDestroy(ex[r]));
    CK(cudaStreamDestroy(s[r]));
  }
  return us;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 4, g = argc > 2 ? atoi(argv[2]) : 20,
            l = argc > 3 ? atoi(argv[3]) : 50;
  if (n < 1 || n > MAX_STREAMS || g < 1 || l < 1) {
    fprintf(stderr, "usage: graph_floor [streams 1..%d [launches per graph [replays]]]\n",
            MAX_STREAMS);
    return 2;
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("graph_floor: skipped: no CUDA device\n");
    return 77;
  }
  unsigned *ctr, *flag;
  CK(cudaMalloc(&ctr, MAX_STREAMS * sizeof(unsigned)));
  CK(cudaMalloc(&flag, MAX_STREAMS * sizeof(unsigned)));
  CK(cudaMemset(ctr, 0, MAX_STREAMS * sizeof(unsigned)));
  CK(cudaMemset(flag, 0, MAX_STREAMS * sizeof(unsigned)));
  const double e = run(0, n, g, l, ctr, flag), b = run(1, n, g, l, ctr, flag);
  printf("graph_floor: %d streams, graphs of %d launches x %d: empty kernels %.2f us an iteration, "
         "barrier kernels %.2f us\n", n, g, l, e, b);
  CK(cudaFree(ctr));
  CK(cudaFree(flag));
  return 0;
}
