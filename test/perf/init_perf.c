/*
 * init_perf: how long ncclCommInitRank takes and how much GPU memory a communicator holds, with
 * whichever libnccl.so.2 the loader finds (run it once with Choir's, once with NVIDIA's).
 *
 *   init_perf -g NGPUS [-p] [-n REPS]
 *     -g  ranks (one GPU each)          -p  one process per rank (default: one process, a group)
 *     -n  repetitions (default 5)
 *
 * Time: wall clock from just before the first rank calls ncclCommInitRank (after a barrier, with
 * every CUDA context already created) to the return of the last one. Memory: cudaMemGetInfo of
 * each rank's device before creation and after it, the communicator still alive; the largest
 * difference over the ranks is reported. Then what the first operations add: a 64 MiB
 * all-reduce (float sum, in place), then a 64 MiB all-to-all (64 MiB / n per peer), each
 * synchronized, the user buffers allocated before the measurement (so the figures are the
 * library's buffers and connections only). One line per repetition, then the median time and
 * the largest memory figures.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define MAX_RANKS 64

static double init_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define CUDA_OR_DIE(call)                                                           \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "init_perf: %s failed: %s\n", #call, cudaGetErrorString(e_)); \
      exit(1);                                                                      \
    }                                                                               \
  } while (0)
#define NCCL_OR_DIE(call)                                                               \
  do {                                                                                  \
    ncclResult_t r_ = (call);                                                           \
    if (r_ != ncclSuccess) {                                                            \
      fprintf(stderr, "init_perf: %s failed: %s (%s)\n", #call, ncclGetErrorString(r_), \
              ncclGetLastError(NULL));                                                  \
      exit(1);                                                                          \
    }                                                                                   \
  } while (0)

/* Memory one rank's communicator holds, in bytes: after creation, after the first all-reduce,
 * after the first all-to-all (each the growth since before creation). */
typedef struct {
  long long init, allreduce, alltoall;
} init_mem_t;

#define INIT_OP_BYTES ((size_t)64 << 20)

/* Shared between the processes of one repetition. */
typedef struct {
  pthread_barrier_t barrier;
  ncclUniqueId id;
  double t_start[MAX_RANKS], t_end[MAX_RANKS];
  init_mem_t mem[MAX_RANKS];
} init_shared_t;

static void init_mem_max(init_mem_t* acc, const init_mem_t* m) {
  if (m->init > acc->init) acc->init = m->init;
  if (m->allreduce > acc->allreduce) acc->allreduce = m->allreduce;
  if (m->alltoall > acc->alltoall) acc->alltoall = m->alltoall;
}

/* One rank's user buffers and stream, made before its "before" measurement. */
typedef struct {
  float *a, *b;
  cudaStream_t s;
} init_bufs_t;

static void init_bufs_make(int dev, init_bufs_t* u) {
  CUDA_OR_DIE(cudaSetDevice(dev));
  CUDA_OR_DIE(cudaMalloc((void**)&u->a, INIT_OP_BYTES));
  CUDA_OR_DIE(cudaMalloc((void**)&u->b, INIT_OP_BYTES));
  CUDA_OR_DIE(cudaMemset(u->a, 0, INIT_OP_BYTES));
  CUDA_OR_DIE(cudaStreamCreateWithFlags(&u->s, cudaStreamNonBlocking));
  CUDA_OR_DIE(cudaDeviceSynchronize());
}

static void init_bufs_free(int dev, init_bufs_t* u) {
  CUDA_OR_DIE(cudaSetDevice(dev));
  CUDA_OR_DIE(cudaStreamDestroy(u->s));
  CUDA_OR_DIE(cudaFree(u->a));
  CUDA_OR_DIE(cudaFree(u->b));
}

/* The first all-reduce (op 0) or all-to-all (op 1) of the k communicators (of n ranks) driven
 * from here, on devices dev0 .. dev0 + k - 1 (one group), then waits for them. */
static void init_op(int op, ncclComm_t* comms, int dev0, init_bufs_t* u, int k, int n) {
  const size_t count = INIT_OP_BYTES / sizeof(float);
  NCCL_OR_DIE(ncclGroupStart());
  for (int i = 0; i < k; i++) {
    CUDA_OR_DIE(cudaSetDevice(dev0 + i));
    if (op == 0)
      NCCL_OR_DIE(ncclAllReduce(u[i].a, u[i].a, count, ncclFloat, ncclSum, comms[i], u[i].s));
    else
      NCCL_OR_DIE(ncclAlltoAll(u[i].a, u[i].b, count / (size_t)n, ncclFloat, comms[i], u[i].s));
  }
  NCCL_OR_DIE(ncclGroupEnd());
  for (int i = 0; i < k; i++) {
    CUDA_OR_DIE(cudaSetDevice(dev0 + i));
    CUDA_OR_DIE(cudaStreamSynchronize(u[i].s));
  }
}

static size_t init_free_mem(int dev) {
  size_t f = 0, t = 0;
  CUDA_OR_DIE(cudaSetDevice(dev));
  CUDA_OR_DIE(cudaMemGetInfo(&f, &t));
  return f;
}

/* GPU memory taken on dev since `before` (its free memory then). */
static long long init_grown(size_t before, int dev) {
  return (long long)before - (long long)init_free_mem(dev);
}

static void init_one_process(int n, double* secs, init_mem_t* mem) {
  ncclComm_t comms[MAX_RANKS];
  size_t before[MAX_RANKS];
  init_bufs_t u[MAX_RANKS];
  init_mem_t m[MAX_RANKS];
  ncclUniqueId id;
  for (int r = 0; r < n; r++) {
    CUDA_OR_DIE(cudaSetDevice(r));
    CUDA_OR_DIE(cudaFree(NULL)); /* create the context outside the measurement */
    init_bufs_make(r, &u[r]);
    before[r] = init_free_mem(r);
  }
  NCCL_OR_DIE(ncclGetUniqueId(&id));
  double t0 = init_now();
  NCCL_OR_DIE(ncclGroupStart());
  for (int r = 0; r < n; r++) {
    CUDA_OR_DIE(cudaSetDevice(r));
    NCCL_OR_DIE(ncclCommInitRank(&comms[r], n, id, r));
  }
  NCCL_OR_DIE(ncclGroupEnd());
  *secs = init_now() - t0;
  for (int r = 0; r < n; r++) m[r].init = init_grown(before[r], r);
  init_op(0, comms, 0, u, n, n);
  for (int r = 0; r < n; r++) m[r].allreduce = init_grown(before[r], r);
  init_op(1, comms, 0, u, n, n);
  for (int r = 0; r < n; r++) m[r].alltoall = init_grown(before[r], r);
  memset(mem, 0, sizeof(*mem));
  for (int r = 0; r < n; r++) init_mem_max(mem, &m[r]);
  for (int r = 0; r < n; r++) NCCL_OR_DIE(ncclCommDestroy(comms[r]));
  for (int r = 0; r < n; r++) init_bufs_free(r, &u[r]);
}

static void init_rank_process(init_shared_t* sh, int rank, int n) {
  CUDA_OR_DIE(cudaSetDevice(rank));
  CUDA_OR_DIE(cudaFree(NULL));
  init_bufs_t u;
  init_bufs_make(rank, &u);
  if (rank == 0) NCCL_OR_DIE(ncclGetUniqueId(&sh->id));
  size_t before = init_free_mem(rank);
  pthread_barrier_wait(&sh->barrier);
  ncclComm_t comm;
  sh->t_start[rank] = init_now();
  NCCL_OR_DIE(ncclCommInitRank(&comm, n, sh->id, rank));
  sh->t_end[rank] = init_now();
  sh->mem[rank].init = init_grown(before, rank);
  init_op(0, &comm, rank, &u, 1, n);
  sh->mem[rank].allreduce = init_grown(before, rank);
  init_op(1, &comm, rank, &u, 1, n);
  sh->mem[rank].alltoall = init_grown(before, rank);
  pthread_barrier_wait(&sh->barrier);
  NCCL_OR_DIE(ncclCommDestroy(comm));
  init_bufs_free(rank, &u);
}

static void init_processes(int n, double* secs, init_mem_t* mem) {
  init_shared_t* sh =
      mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    perror("init_perf: mmap");
    exit(1);
  }
  pthread_barrierattr_t attr;
  pthread_barrierattr_init(&attr);
  pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&sh->barrier, &attr, (unsigned)n);
  pid_t pids[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    fflush(NULL);
    pids[r] = fork();
    if (pids[r] == 0) {
      init_rank_process(sh, r, n);
      _exit(0);
    }
  }
  int bad = 0;
  for (int r = 0; r < n; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  if (bad) {
    fprintf(stderr, "init_perf: a rank process failed\n");
    exit(1);
  }
  double t0 = sh->t_start[0], t1 = sh->t_end[0];
  memset(mem, 0, sizeof(*mem));
  for (int r = 0; r < n; r++) {
    if (sh->t_start[r] < t0) t0 = sh->t_start[r];
    if (sh->t_end[r] > t1) t1 = sh->t_end[r];
    init_mem_max(mem, &sh->mem[r]);
  }
  *secs = t1 - t0;
  pthread_barrier_destroy(&sh->barrier);
  munmap(sh, sizeof(*sh));
}

static int init_cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int n = 0, procs = 0, reps = 5;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-g") == 0 && i + 1 < argc) {
      n = atoi(argv[++i]);
    } else if (strcmp(argv[i], "-p") == 0) {
      procs = 1;
    } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else {
      fprintf(stderr, "usage: init_perf -g NGPUS [-p] [-n REPS]\n");
      return 2;
    }
  }
  if (n < 1 || n > MAX_RANKS || reps < 1) {
    fprintf(stderr, "init_perf: -g must be in [1, %d] and -n at least 1\n", MAX_RANKS);
    return 2;
  }
  int version = 0;
  ncclGetVersion(&version);
  printf("# init_perf: %d rank(s), %s, library version %d\n", n,
         procs ? "one process per rank" : "one process (group)", version);
  printf("# GPU memory of the busiest rank, MiB: after creation, after a first 64 MiB all-reduce, "
         "after a 64 MiB all-to-all\n");
  printf("# %4s %12s %12s %12s %12s\n", "rep", "init (ms)", "mem init", "+allreduce",
         "+alltoall");
  double t[256];
  init_mem_t mem = {0, 0, 0};
  if (reps > 256) reps = 256;
  for (int k = 0; k < reps; k++) {
    init_mem_t m;
    if (procs)
      init_processes(n, &t[k], &m);
    else
      init_one_process(n, &t[k], &m);
    init_mem_max(&mem, &m);
    printf("  %4d %12.2f %12.1f %12.1f %12.1f\n", k, 1e3 * t[k], (double)m.init / (1 << 20),
           (double)m.allreduce / (1 << 20), (double)m.alltoall / (1 << 20));
  }
  qsort(t, (size_t)reps, sizeof(t[0]), init_cmp);
  printf("init_perf ranks %d %s median_ms %.2f min_ms %.2f max_mem_mib %.1f "
         "allreduce_mem_mib %.1f alltoall_mem_mib %.1f\n",
         n, procs ? "procs" : "group", 1e3 * t[reps / 2], 1e3 * t[0],
         (double)mem.init / (1 << 20), (double)mem.allreduce / (1 << 20),
         (double)mem.alltoall / (1 << 20));
  return 0;
}
