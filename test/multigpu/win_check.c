/*
 * Symmetric windows on real GPUs (ncclCommWindowRegister): every rank registers a buffer at a
 * 64 KiB offset of an ncclMemAlloc allocation, writes its pattern, and then reads every peer's
 * buffer and writes into the next one's through the window's flat range, the way nccl_device.h's
 * ncclGetLsaPointer computes it (lsaFlatBase + peer * stride4G * 4 GiB); an in-place AllReduce on
 * the window; ranks registering different sizes all refused, and the next registration working;
 * then a device communicator (ncclDevCommCreate with LSA barriers) and a kernel written with
 * nccl_device.h (LSA barrier sessions, ncclGetLsaPointer) all-reducing from the window, 3 times.
 *
 *   win_check threads N     N ranks in this process (GPUs round-robin; with more ranks than
 *                           GPUs set CHOIR_RANKS_SHARE_GPU=1), registered in one group
 *   win_check procs N       N processes, one rank each (GPU rank % count)
 *
 * Skipped (exit 77) without a GPU.
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "nccl_device.h"
#include "win_check_kern.h"

#define OFFSET ((size_t)64 << 10)
#define BYTES ((size_t)1 << 20)
#define COUNT (BYTES / sizeof(float))

/* Whole numbers below 2^24 whose sums over 8 ranks stay below it: exact in float (the data type
 * every kernel subset builds). */
static float pattern(int rank, size_t i) { return (float)(rank * 100000 + (int)(i % 65536)); }

typedef struct {
  ncclComm_t comm;
  int rank, nranks, dev;
  void* base;
  float* buf;
  ncclWindow_t win;
  ncclDevComm_t dc;
  cudaStream_t st; /* a stream of the rank's own: ranks sharing a GPU in one process must not
                    * queue behind each other on the device's legacy default stream */
  int bad;
} rank_t;

#define NCTAS 4

static int barrier(rank_t* r) {
  float* one = r->buf + COUNT - 1; /* the last element: no test reads it */
  ncclResult_t res = ncclAllReduce(one, one, 1, ncclFloat, ncclSum, r->comm, r->st);
  return res == ncclSuccess && cudaStreamSynchronize(r->st) == cudaSuccess ? 0 : 1;
}

#define RFAIL(r, ...)             \
  do {                            \
    fprintf(stderr, "rank %d: ", (r)->rank); \
    fprintf(stderr, __VA_ARGS__); \
    fprintf(stderr, "\n");        \
    (r)->bad++;                   \
    return;                       \
  } while (0)

/* AllReduces whose buffers lie in the window (SymTwoShot with CHOIR_SYM_KERNELS=2, the
 * win-check-sym tests; the plan's usual choice otherwise): counts of 1 element to 256 KiB,
 * aligned and 4 bytes off, out of place (first half into the second) three times back to back on
 * the stream, each round with new data and its result copied out before the next, then in place;
 * every element checked. h holds COUNT floats. */
#define SYM_ROUNDS 3
static void sym_checks(rank_t* r, float* h) {
  static const size_t counts[] = {1, 7, 1023, 65539, 65536};
  const size_t half = COUNT / 2;
  float* got[SYM_ROUNDS];
  for (int k = 0; k < SYM_ROUNDS; k++) got[k] = malloc(half * sizeof(float));
  for (int k = 0; k < SYM_ROUNDS; k++)
    if (got[k] == NULL) RFAIL(r, "out of memory");
  float* in = malloc(SYM_ROUNDS * half * sizeof(float));
  if (in == NULL) RFAIL(r, "out of memory");
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    for (size_t o = 0; o < 2; o++) {
      const size_t n = counts[c];
      float* src = r->buf + o;
      float* dst = r->buf + half + o; /* ends before COUNT - 1 (barrier's) */
      for (int k = 0; k < SYM_ROUNDS; k++) {
        float* ink = in + (size_t)k * half;
        for (size_t i = 0; i < n; i++) ink[i] = pattern(r->rank, i * 3 + (size_t)k * 11 + c);
        if (cudaMemcpyAsync(src, ink, n * sizeof(float), cudaMemcpyHostToDevice, r->st) !=
                cudaSuccess ||
            ncclAllReduce(src, dst, n, ncclFloat, ncclSum, r->comm, r->st) != ncclSuccess ||
            cudaMemcpyAsync(got[k], dst, n * sizeof(float), cudaMemcpyDeviceToHost, r->st) !=
                cudaSuccess)
          RFAIL(r, "out-of-place AllReduce of %zu at +%zu, round %d: %s", n, o, k,
                ncclGetLastError(r->comm));
      }
      if (cudaStreamSynchronize(r->st) != cudaSuccess) RFAIL(r, "sync (%zu at +%zu)", n, o);
      for (int k = 0; k < SYM_ROUNDS; k++)
        for (size_t i = 0; i < n; i++) {
          float want = 0;
          for (int p = 0; p < r->nranks; p++) want += pattern(p, i * 3 + (size_t)k * 11 + c);
          if (got[k][i] != want)
            RFAIL(r, "out-of-place AllReduce of %zu at +%zu, round %d, element %zu: %g, want %g",
                  n, o, k, i, got[k][i], want);
        }
      /* In place on the output of the last round: every rank holds the same sums. */
      if (ncclAllReduce(dst, dst, n, ncclFloat, ncclSum, r->comm, r->st) != ncclSuccess ||
          cudaMemcpyAsync(h, dst, n * sizeof(float), cudaMemcpyDeviceToHost, r->st) !=
              cudaSuccess ||
          cudaStreamSynchronize(r->st) != cudaSuccess)
        RFAIL(r, "in-place AllReduce of %zu at +%zu", n, o);
      for (size_t i = 0; i < n; i++)
        if (h[i] != got[SYM_ROUNDS - 1][i] * (float)r->nranks)
          RFAIL(r, "in-place AllReduce of %zu at +%zu, element %zu: %g, want %g", n, o, i, h[i],
                got[SYM_ROUNDS - 1][i] * (float)r->nranks);
    }
  }
  for (int k = 0; k < SYM_ROUNDS; k++) free(got[k]);
  free(in);
}

/* AllGather and ReduceScatter on the window (the Sym kernels with CHOIR_SYM_KERNELS=2): blocks
 * of 1 to 16383 floats, out of place (AllGather: from the second half into the first; its
 * input lies in the window too, which it need not) and in place; every element checked. h holds
 * COUNT floats. */
static float block_pattern(int rank, int block, size_t i) {
  return (float)(rank * 100000 + block * 1000 + (int)(i % 997));
}

static void sym_gather_scatter(rank_t* r, float* h) {
  static const size_t counts[] = {1, 7, 1023, 16383};
  const size_t half = COUNT / 2;
  const int n = r->nranks, me = r->rank;
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    const size_t cnt = counts[c];
    for (int inplace = 0; inplace < 2; inplace++) {
      /* AllGather: rank me's block is block_pattern(me, 0, i). */
      float* src = inplace ? r->buf + (size_t)me * cnt : r->buf + half;
      for (size_t i = 0; i < cnt; i++) h[i] = block_pattern(me, 0, i);
      if (cudaMemcpyAsync(src, h, cnt * sizeof(float), cudaMemcpyHostToDevice, r->st) !=
              cudaSuccess ||
          ncclAllGather(src, r->buf, cnt, ncclFloat, r->comm, r->st) != ncclSuccess ||
          cudaMemcpyAsync(h, r->buf, (size_t)n * cnt * sizeof(float), cudaMemcpyDeviceToHost,
                          r->st) != cudaSuccess ||
          cudaStreamSynchronize(r->st) != cudaSuccess)
        RFAIL(r, "AllGather of %zu (%s): %s", cnt, inplace ? "in place" : "out of place",
              ncclGetLastError(r->comm));
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < cnt; i++)
          if (h[(size_t)q * cnt + i] != block_pattern(q, 0, i))
            RFAIL(r, "AllGather of %zu (%s), block %d element %zu: %g, want %g", cnt,
                  inplace ? "in place" : "out of place", q, i, h[(size_t)q * cnt + i],
                  block_pattern(q, 0, i));
      /* ReduceScatter: rank me's block q is block_pattern(me, q, i); block me of the result
       * sums every rank's block me. */
      for (int q = 0; q < n; q++)
        for (size_t i = 0; i < cnt; i++) h[(size_t)q * cnt + i] = block_pattern(me, q, i);
      float* dst = inplace ? r->buf + (size_t)me * cnt : r->buf + half;
      if (cudaMemcpyAsync(r->buf, h, (size_t)n * cnt * sizeof(float), cudaMemcpyHostToDevice,
                          r->st) != cudaSuccess ||
          ncclReduceScatter(r->buf, dst, cnt, ncclFloat, ncclSum, r->comm, r->st) !=
              ncclSuccess ||
          cudaMemcpyAsync(h, dst, cnt * sizeof(float), cudaMemcpyDeviceToHost, r->st) !=
              cudaSuccess ||
          cudaStreamSynchronize(r->st) != cudaSuccess)
        RFAIL(r, "ReduceScatter of %zu (%s): %s", cnt, inplace ? "in place" : "out of place",
              ncclGetLastError(r->comm));
      for (size_t i = 0; i < cnt; i++) {
        float want = 0;
        for (int p = 0; p < n; p++) want += block_pattern(p, me, i);
        if (h[i] != want)
          RFAIL(r, "ReduceScatter of %zu (%s), element %zu: %g, want %g", cnt,
                inplace ? "in place" : "out of place", i, h[i], want);
      }
    }
  }
}

/* After registration: own pattern in, read every peer through the flat range, write into the
 * next rank's second half, AllReduce the first half in place. */
static void rank_body(rank_t* r) {
  if (cudaSetDevice(r->dev) != cudaSuccess) RFAIL(r, "cudaSetDevice(%d)", r->dev);
  if (cudaStreamCreateWithFlags(&r->st, cudaStreamNonBlocking) != cudaSuccess)
    RFAIL(r, "cudaStreamCreateWithFlags");
  float* h = malloc(BYTES);
  if (h == NULL) RFAIL(r, "out of memory");
  for (size_t i = 0; i < COUNT; i++) h[i] = pattern(r->rank, i);
  if (cudaMemcpy(r->buf, h, BYTES, cudaMemcpyHostToDevice) != cudaSuccess) RFAIL(r, "fill");
  if (barrier(r)) RFAIL(r, "barrier 1");
  struct ncclWindow_vidmem w;
  if (cudaMemcpy(&w, r->win, sizeof(w), cudaMemcpyDeviceToHost) != cudaSuccess)
    RFAIL(r, "reading the window %p", (void*)r->win);
  if (w.worldRank != r->rank || w.lsaRank != r->rank || w.stride4G < 1 || w.winHost == NULL ||
      w.lsaFlatBase == NULL)
    RFAIL(r, "window fields: worldRank %d lsaRank %d stride4G %u flat %p host %p", w.worldRank,
          w.lsaRank, w.stride4G, (void*)w.lsaFlatBase, w.winHost);
  const size_t stride = (size_t)w.stride4G << 32;
  if (w.lsaFlatBase + (size_t)r->rank * stride == (char*)r->buf)
    RFAIL(r, "the flat range is the allocation itself");
  const size_t half = COUNT / 2;
  for (int p = 0; p < r->nranks; p++) {
    char* at = w.lsaFlatBase + (size_t)p * stride;
    if (cudaMemcpy(h, at, BYTES, cudaMemcpyDeviceToHost) != cudaSuccess)
      RFAIL(r, "reading rank %d's buffer at %p", p, (void*)at);
    for (size_t i = 0; i < COUNT - 1; i++)
      if (h[i] != pattern(p, i)) RFAIL(r, "rank %d's element %zu: %g, want %g", p, i, h[i], pattern(p, i));
  }
  if (barrier(r)) RFAIL(r, "barrier 2");
  /* Into the next rank's second half. */
  const int next = (r->rank + 1) % r->nranks, prev = (r->rank + r->nranks - 1) % r->nranks;
  for (size_t i = half; i < COUNT - 1; i++) h[i] = -pattern(r->rank, i);
  char* at = w.lsaFlatBase + (size_t)next * stride + half * sizeof(float);
  if (cudaMemcpy(at, h + half, (COUNT - 1 - half) * sizeof(float), cudaMemcpyHostToDevice) !=
      cudaSuccess)
    RFAIL(r, "writing rank %d's buffer", next);
  if (barrier(r)) RFAIL(r, "barrier 3");
  if (cudaMemcpy(h, r->buf, BYTES, cudaMemcpyDeviceToHost) != cudaSuccess) RFAIL(r, "read back");
  for (size_t i = half; i < COUNT - 1; i++)
    if (h[i] != -pattern(prev, i)) RFAIL(r, "element %zu from rank %d: %g, want %g", i, prev, h[i], -pattern(prev, i));
  /* The first half in place: the sum of every rank's pattern. */
  if (ncclAllReduce(r->buf, r->buf, half, ncclFloat, ncclSum, r->comm, r->st) != ncclSuccess ||
      cudaStreamSynchronize(r->st) != cudaSuccess)
    RFAIL(r, "AllReduce on the window");
  if (cudaMemcpy(h, r->buf, half * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
    RFAIL(r, "read back 2");
  for (size_t i = 0; i < half; i++) {
    float want = 0;
    for (int p = 0; p < r->nranks; p++) want += pattern(p, i);
    if (h[i] != want) RFAIL(r, "AllReduce element %zu: %g, want %g", i, h[i], want);
  }
  sym_checks(r, h);
  if (r->bad) return;
  sym_gather_scatter(r, h);
  if (r->bad) return;
  /* The device communicator's kernel, 3 rounds with new data each. */
  const cudaStream_t st = r->st;
  float* out = NULL;
  if (cudaMalloc((void**)&out, half * sizeof(float)) != cudaSuccess) RFAIL(r, "output buffer");
  for (int round = 0; round < 3; round++) {
    for (size_t i = 0; i < half; i++) h[i] = pattern(r->rank, i + (size_t)round * 7);
    if (cudaMemcpy(r->buf, h, half * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess)
      RFAIL(r, "fill round %d", round);
    if (wc_lsa_allreduce(&r->dc, r->win, 0, out, half, NCTAS, st) != cudaSuccess ||
        cudaStreamSynchronize(st) != cudaSuccess)
      RFAIL(r, "device-API kernel, round %d: %s", round, cudaGetErrorString(cudaGetLastError()));
    if (cudaMemcpy(h, out, half * sizeof(float), cudaMemcpyDeviceToHost) != cudaSuccess)
      RFAIL(r, "read back round %d", round);
    for (size_t i = 0; i < half; i++) {
      float want = 0;
      for (int p = 0; p < r->nranks; p++) want += pattern(p, i + (size_t)round * 7);
      if (h[i] != want)
        RFAIL(r, "device-API all-reduce, round %d, element %zu: %g, want %g", round, i, h[i], want);
    }
  }
  cudaFree(out);
  free(h);
}

static void devcomm_reqs(ncclDevCommRequirements_t* q) {
  memset(q, 0, sizeof(*q));
  q->lsaBarrierCount = NCTAS;
}

/* Rank 0 registers half the size the others do: every rank is refused. Then all register the
 * same size, which works (the failed attempt counted alike everywhere). */
static size_t mismatch_size(const rank_t* r) { return r->rank == 0 ? BYTES / 2 : BYTES; }

static void* thread_body(void* arg) {
  rank_body((rank_t*)arg);
  return NULL;
}

static int alloc_rank(rank_t* r) {
  if (cudaSetDevice(r->dev) != cudaSuccess) return 1;
  if (ncclMemAlloc(&r->base, OFFSET + BYTES) != ncclSuccess) return 1;
  r->buf = (float*)((char*)r->base + OFFSET);
  return 0;
}

static void run_threads(int n) {
  int ndev = 0;
  CHECK_EQ_INT(cudaGetDeviceCount(&ndev), cudaSuccess);
  rank_t* rs = calloc((size_t)n, sizeof(*rs));
  ncclComm_t* comms = calloc((size_t)n, sizeof(*comms));
  int* devs = calloc((size_t)n, sizeof(*devs));
  for (int i = 0; i < n; i++) devs[i] = i % ndev;
  CHECK_EQ_INT(ncclCommInitAll(comms, n, devs), ncclSuccess);
  for (int i = 0; i < n; i++) {
    rs[i] = (rank_t){.comm = comms[i], .rank = i, .nranks = n, .dev = devs[i]};
    CHECK_EQ_INT(alloc_rank(&rs[i]), 0);
  }
  /* Mismatched sizes, in one group: the group fails on every rank. */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(rs[i].dev);
    ncclCommWindowRegister(rs[i].comm, rs[i].buf, mismatch_size(&rs[i]), &rs[i].win,
                           NCCL_WIN_COLL_SYMMETRIC);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "every rank registers a buffer of the same size");
  for (int i = 0; i < n; i++) CHECK_TRUE(rs[i].win == NULL);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(rs[i].dev);
    CHECK_EQ_INT(ncclCommWindowRegister(rs[i].comm, rs[i].buf, BYTES, &rs[i].win,
                                        NCCL_WIN_COLL_SYMMETRIC), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++) CHECK_TRUE(rs[i].win != NULL);
  ncclDevCommRequirements_t q;
  devcomm_reqs(&q);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    cudaSetDevice(rs[i].dev);
    CHECK_EQ_INT(ncclDevCommCreate(rs[i].comm, &q, &rs[i].dc), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int i = 0; i < n; i++) {
    CHECK_EQ_INT(rs[i].dc.rank, i);
    CHECK_EQ_INT(rs[i].dc.lsaSize, n);
    CHECK_EQ_INT(rs[i].dc.lsaBarrier.nBarriers, NCTAS);
  }
  pthread_t* th = calloc((size_t)n, sizeof(*th));
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, thread_body, &rs[i]);
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    CHECK_MSG(rs[i].bad == 0, "rank %d failed", i);
  }
  for (int i = 0; i < n; i++) {
    cudaSetDevice(rs[i].dev);
    if (rs[i].st != NULL) cudaStreamDestroy(rs[i].st);
    CHECK_EQ_INT(ncclDevCommDestroy(rs[i].comm, &rs[i].dc), ncclSuccess);
    CHECK_EQ_INT(ncclDevCommDestroy(rs[i].comm, &rs[i].dc), ncclInvalidUsage);
    CHECK_EQ_INT(ncclCommWindowDeregister(rs[i].comm, rs[i].win), ncclSuccess);
    CHECK_EQ_INT(ncclCommWindowDeregister(rs[i].comm, rs[i].win), ncclInvalidArgument);
    CHECK_EQ_INT(ncclMemFree(rs[i].base), ncclSuccess);
    CHECK_EQ_INT(ncclCommDestroy(rs[i].comm), ncclSuccess);
  }
  free(th);
  free(devs);
  free(comms);
  free(rs);
}

static int proc_rank(const ncclUniqueId* id, int rank, int n) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) return 10;
  rank_t r = {.rank = rank, .nranks = n, .dev = rank % ndev};
  if (cudaSetDevice(r.dev) != cudaSuccess) return 11;
  if (ncclCommInitRank(&r.comm, n, *id, rank) != ncclSuccess) return 12;
  if (alloc_rank(&r)) return 13;
  ncclResult_t res = ncclCommWindowRegister(r.comm, r.buf, mismatch_size(&r), &r.win,
                                            NCCL_WIN_DEFAULT);
  if (res != ncclInvalidUsage || r.win != NULL) {
    fprintf(stderr, "rank %d: mismatched sizes gave %d\n", rank, (int)res);
    return 14;
  }
  if (ncclCommWindowRegister(r.comm, r.buf, BYTES, &r.win, NCCL_WIN_DEFAULT) != ncclSuccess)
    return 15;
  ncclDevCommRequirements_t q;
  devcomm_reqs(&q);
  if (ncclDevCommCreate(r.comm, &q, &r.dc) != ncclSuccess) return 20;
  rank_body(&r);
  if (r.bad) return 16;
  cudaStreamDestroy(r.st);
  if (ncclDevCommDestroy(r.comm, &r.dc) != ncclSuccess) return 21;
  if (ncclCommWindowDeregister(r.comm, r.win) != ncclSuccess) return 17;
  if (ncclMemFree(r.base) != ncclSuccess) return 18;
  if (ncclCommDestroy(r.comm) != ncclSuccess) return 19;
  return 0;
}

static void run_procs(int n) {
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  pid_t pid[64];
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < n; i++) {
    pid[i] = fork();
    if (pid[i] == 0) _exit(proc_rank(&id, i, n));
  }
  for (int i = 0; i < n; i++) {
    int st = 0;
    waitpid(pid[i], &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d: status 0x%x", i, st);
  }
}

int main(int argc, char** argv) {
  if (argc != 3 || (strcmp(argv[1], "threads") && strcmp(argv[1], "procs")) || atoi(argv[2]) < 1 ||
      atoi(argv[2]) > 64) {
    fprintf(stderr, "usage: win_check threads|procs N\n");
    return 2;
  }
  const int n = atoi(argv[2]);
  const char* sym_log = getenv("WIN_CHECK_SYM_LOG");
  if (sym_log != NULL) unlink(sym_log); /* before any rank opens it */
  if (strcmp(argv[1], "procs") == 0) {
    /* No CUDA call in this process before the ranks' forks: a child counts the devices. */
    pid_t c = fork();
    if (c == 0) {
      int k = 0;
      _exit(cudaGetDeviceCount(&k) == cudaSuccess ? (k > 100 ? 100 : k) : 0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    const int ndev = WIFEXITED(st) ? WEXITSTATUS(st) : 0;
    if (ndev < 1) {
      printf("win-check: skipped: no CUDA device\n");
      return CHECK_SKIP;
    }
    if (ndev < n && getenv("CHOIR_RANKS_SHARE_GPU") == NULL) {
      printf("win-check: skipped: %d processes need %d GPUs (%d here; sharing one needs MPS and "
             "CHOIR_RANKS_SHARE_GPU=1)\n", n, n, ndev);
      return CHECK_SKIP;
    }
    run_procs(n);
    return check_finish("win-check procs");
  }
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("win-check: skipped: no CUDA device\n");
    return CHECK_SKIP;
  }
  run_threads(n);
  /* WIN_CHECK_SYM_LOG: the NCCL_DEBUG_FILE of a run with CHOIR_SYM_KERNELS=2 and TUNING lines,
   * which must show that SymTwoShot ran. */
  if (sym_log != NULL) {
    FILE* f = fopen(sym_log, "r");
    CHECK_MSG(f != NULL, "cannot read %s", sym_log);
    int taken = 0, gathers = 0, scatters = 0;
    char line[1024];
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
      taken += strstr(line, "takes SymTwoShot") != NULL;
      gathers += strstr(line, "takes SymAllGather") != NULL;
      scatters += strstr(line, "takes SymReduceScatter") != NULL;
    }
    if (f != NULL) fclose(f);
    printf("win-check: %d plans took SymTwoShot, %d SymAllGather, %d SymReduceScatter\n", taken,
           gathers, scatters);
    CHECK_MSG(taken >= 10 * n, "%d SymTwoShot plans in %s, want at least %d", taken, sym_log,
              10 * n);
    CHECK_MSG(gathers >= 8 * n && scatters >= 8 * n,
              "%d SymAllGather and %d SymReduceScatter plans in %s, want at least %d each",
              gathers, scatters, sym_log, 8 * n);
  }
  return check_finish("win-check threads");
}
