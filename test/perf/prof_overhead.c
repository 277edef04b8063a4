/*
 * prof_overhead: what a loaded profiler with every event masked off costs a small all-reduce,
 * measured inside one process, so that the spread between processes (larger than the effect)
 * drops out. Two communicators of 2 ranks each, all 4 ranks on GPU 0 (CHOIR_RANKS_SHARE_GPU=1),
 * driven from this thread: pair A is created while the profiler's init succeeds (it sets a mask
 * of 0), pair B while it fails (the core then runs that communicator without a profiler, as when
 * none is loaded). Rounds alternate which pair goes first; each pair times ITERS all-reduces of
 * each size (a group over its 2 ranks per call, then a stream synchronize).
 *
 *   NCCL_PROFILER_PLUGIN=<libnccl-profiler-mock6.so> prof_overhead [-n ITERS] [-r ROUNDS]
 *
 * The mock profiler (test/plugin/mock_profiler.c) reads MOCK_PROF_MASK and MOCK_PROF_FAIL_INIT at
 * each init: this program sets them around each pair's creation. One line per size: the median
 * time per call of each pair (us) and the median over rounds of the ratio of the two (profiler
 * over none), then the bar line (within 2%).
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define NSIZES 5
#define MAX_ROUNDS 101

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define DIE_IF(cond, ...)                     \
  do {                                        \
    if (cond) {                               \
      fprintf(stderr, "prof_overhead: ");     \
      fprintf(stderr, __VA_ARGS__);           \
      fprintf(stderr, "\n");                  \
      exit(1);                                \
    }                                         \
  } while (0)

typedef struct {
  ncclComm_t comm[2];
  cudaStream_t stream[2];
  float* buf[2];
} pair_t;

static void pair_make(pair_t* p, int profiled, size_t max_count) {
  setenv("MOCK_PROF_MASK", "0", 1);
  if (profiled)
    unsetenv("MOCK_PROF_FAIL_INIT");
  else
    setenv("MOCK_PROF_FAIL_INIT", "1", 1);
  int devs[2] = {0, 0};
  ncclResult_t r = ncclCommInitAll(p->comm, 2, devs);
  DIE_IF(r != ncclSuccess, "ncclCommInitAll: %s (%s)", ncclGetErrorString(r),
         ncclGetLastError(NULL));
  for (int i = 0; i < 2; i++) {
    DIE_IF(cudaStreamCreateWithFlags(&p->stream[i], cudaStreamNonBlocking) != cudaSuccess,
           "cudaStreamCreate failed");
    DIE_IF(cudaMalloc((void**)&p->buf[i], max_count * sizeof(float)) != cudaSuccess ||
               cudaMemset(p->buf[i], 0, max_count * sizeof(float)) != cudaSuccess,
           "cudaMalloc of %zu floats failed", max_count);
  }
}

static void pair_free(pair_t* p) {
  for (int i = 0; i < 2; i++) {
    ncclCommDestroy(p->comm[i]);
    cudaStreamDestroy(p->stream[i]);
    cudaFree(p->buf[i]);
  }
}

/* Seconds per call of `iters` all-reduces of count floats on the pair. */
static double pair_time(pair_t* p, size_t count, int iters) {
  const double t0 = now_s();
  for (int it = 0; it < iters; it++) {
    DIE_IF(ncclGroupStart() != ncclSuccess, "ncclGroupStart failed");
    for (int i = 0; i < 2; i++)
      DIE_IF(ncclAllReduce(p->buf[i], p->buf[i], count, ncclFloat32, ncclSum, p->comm[i],
                           p->stream[i]) != ncclSuccess,
             "ncclAllReduce: %s", ncclGetLastError(NULL));
    DIE_IF(ncclGroupEnd() != ncclSuccess, "ncclGroupEnd: %s", ncclGetLastError(NULL));
    for (int i = 0; i < 2; i++)
      DIE_IF(cudaStreamSynchronize(p->stream[i]) != cudaSuccess, "cudaStreamSynchronize failed");
  }
  return (now_s() - t0) / iters;
}

static int cmp_double(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* v, int n) {
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char** argv) {
  int iters = 500, rounds = 21, opt;
  while ((opt = getopt(argc, argv, "n:r:")) != -1) {
    if (opt == 'n') iters = atoi(optarg);
    else if (opt == 'r') rounds = atoi(optarg);
    else {
      fprintf(stderr, "usage: prof_overhead [-n ITERS] [-r ROUNDS]\n");
      return 2;
    }
  }
  DIE_IF(iters < 1 || rounds < 1 || rounds > MAX_ROUNDS, "-n >= 1 and -r in 1..%d", MAX_ROUNDS);
  DIE_IF(getenv("NCCL_PROFILER_PLUGIN") == NULL,
         "set NCCL_PROFILER_PLUGIN to the mock profiler (libnccl-profiler-mock6.so)");
  setenv("CHOIR_RANKS_SHARE_GPU", "1", 0);
  static const size_t bytes[NSIZES] = {8, 64, 512, 4096, 32768};
  pair_t pair[2]; /* [0]: profiler loaded, mask 0; [1]: no profiler context */
  pair_make(&pair[0], 1, bytes[NSIZES - 1] / sizeof(float));
  pair_make(&pair[1], 0, bytes[NSIZES - 1] / sizeof(float));
  /* Pair B must really run without one: the core's WARN of the refused init says so. */
  const char* last = ncclGetLastError(NULL);
  DIE_IF(last == NULL || strstr(last, "init failed") == NULL,
         "the profiler's init was not refused for the second communicator (last error: '%s'); "
         "is NCCL_PROFILER_PLUGIN the mock profiler?", last ? last : "");
  static double t[NSIZES][2][MAX_ROUNDS], ratio[NSIZES][MAX_ROUNDS];
  for (int s = 0; s < NSIZES; s++) (void)pair_time(&pair[0], bytes[s] / 4, 20); /* warm-up */
  for (int s = 0; s < NSIZES; s++) (void)pair_time(&pair[1], bytes[s] / 4, 20);
  for (int r = 0; r < rounds; r++)
    for (int s = 0; s < NSIZES; s++) {
      const int first = r % 2;
      for (int k = 0; k < 2; k++) {
        const int w = first ^ k;
        t[s][w][r] = pair_time(&pair[w], bytes[s] / 4, iters);
      }
      ratio[s][r] = t[s][0][r] / t[s][1][r];
    }
  printf("prof_overhead: all_reduce, 2 ranks sharing GPU 0, one process; a communicator with the "
         "profiler loaded and every event masked off against one without (us per call, median of "
         "%d alternating rounds of %d calls)\n", rounds, iters);
  double worst = 0;
  for (int s = 0; s < NSIZES; s++) {
    const double a = median(t[s][0], rounds) * 1e6, b = median(t[s][1], rounds) * 1e6;
    const double q = median(ratio[s], rounds);
    if (q > worst) worst = q;
    printf("  %8zu B  no profiler %8.2f  profiler, mask 0 %8.2f  ratio %.3f\n", bytes[s], b, a, q);
  }
  printf("  bar (within 2%%): %s (worst ratio %.3f)\n", worst <= 1.02 ? "yes" : "NOT", worst);
  pair_free(&pair[0]);
  pair_free(&pair[1]);
  return 0;
}
