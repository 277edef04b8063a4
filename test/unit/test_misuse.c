/*
 * The misuse defects of issue 17, as a careless user meets them, through the public API. Each
 * case failed (hung, crashed, or returned the wrong result) before its fix:
 *   pending     ncclCommDestroy / ncclCommAbort of a communicator whose creation (or a split of
 *               it, or queued operations) still waits for this thread's ncclGroupEnd returns at
 *               once; ncclCommFinalize says to end the group first; the group end touches
 *               nothing of it
 *   notready    operations and queries on a communicator still being created fail with a message
 *               (they used to reach a data path that does not exist yet)
 *   group       an operation or a creation call that fails its checks inside a group makes
 *               ncclGroupEnd return that error and run nothing of the group (no launch, no
 *               creation waiting for absent peers); the next group starts clean
 *   finalized   operations, splits and new operators after ncclCommFinalize: ncclInvalidUsage
 *   count       counts whose size in bytes (times nranks where a buffer holds a block per rank)
 *               overflows size_t: ncclInvalidArgument naming the count
 *   memalloc    ncclMemAlloc of more than the device has, ncclMemFree of a foreign, interior or
 *               already freed pointer: ncclInvalidArgument before any driver call
 *   envknob     a bad communicator knob in the environment is reported by its variable's name
 *   netname     NCCL_NET / config.netName naming no network fails creation, listing those found;
 *               no name opens no net plugin at creation
 *   duprank     two ranks claiming one rank number: every rank fails within seconds, told which
 * Built twice: for the unit suite on emulated devices and CUDA runtime calls (fake_cuda.c,
 * fake_cudart.c), and with -DTEST_REAL_GPU for the gpu suite on a real GPU (skipped with exit 77
 * where there is none). Every case runs in its own process, with an alarm: a hang fails it.
 *
 *   test-misuse [CASE]   CASE: one of the above (default: all)
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fork_case.h"
#include "nccl.h"

#ifdef TEST_REAL_GPU
#include <cuda_runtime_api.h>
static int set_device(int dev) { return cudaSetDevice(dev) == cudaSuccess ? 0 : 1; }
#else
#include "base.h"
#include "fake_cudart.h"
static int set_device(int dev) { return cuda_set_device(dev) == ncclSuccess ? 0 : 1; }
#endif

/* Bound on what must happen "at once" (a bootstrap timeout is 10 s here, see main). */
#define QUICK_S 4.0

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Devices this process sees (emulated: fake_cuda.c's 8). */
static int ndev = 8;

/* Device buffers of 64 floats (emulated: never touched) filled with `fill` bytes: send buffers
 * get 0x11, receive buffers 0x5a, so that a launched operation changes its receive buffer. */
static void* buf_alloc(int fill) {
#ifdef TEST_REAL_GPU
  void* p = NULL;
  CHECK_EQ_INT(cudaMalloc(&p, 256), cudaSuccess);
  CHECK_EQ_INT(cudaMemset(p, fill, 256), cudaSuccess);
  return p;
#else
  void* p = malloc(256);
  memset(p, fill, 256);
  return p;
#endif
}

static void buf_free(void* p) {
#ifdef TEST_REAL_GPU
  cudaFree(p);
#else
  free(p);
#endif
}

/* Operations launched (emulated: one-rank copies counted; real GPU: `recv` changed). */
static int launched(void* recv) {
#ifdef TEST_REAL_GPU
  unsigned char h[256];
  cudaDeviceSynchronize();
  if (cudaMemcpy(h, recv, sizeof(h), cudaMemcpyDeviceToHost) != cudaSuccess) return -1;
  for (size_t i = 0; i < sizeof(h); i++)
    if (h[i] != 0x5a) return 1;
  return 0;
#else
  (void)recv;
  return fake_cudart.copies;
#endif
}

static ncclComm_t one_rank(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(set_device(0), 0);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  return c;
}

/* Two ranks driven by this thread (one real GPU: both on it, CHOIR_RANKS_SHARE_GPU). */
static void two_ranks(ncclComm_t c[2]) {
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ_INT(set_device(r % ndev), 0);
    CHECK_EQ_INT(ncclCommInitRank(&c[r], 2, id, r), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
}

/* Every case runs in a process of its own (fork_case) under an alarm, so that a hang fails the
 * case instead of the whole test (an alarm does not survive fork: the child sets its own). */
#define CASE_ALARM_S 60
static void (*guarded_fn)(void);

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "case timed out: a hang\n";
  (void)!write(2, msg, sizeof(msg) - 1);
  _exit(3);
}

static void guarded(void) {
  signal(SIGALRM, on_alarm);
  alarm(CASE_ALARM_S);
  guarded_fn();
}

static void run_case(const char* name, void (*fn)(void)) {
  guarded_fn = fn;
  fork_case(name, guarded);
}

/* ---- pending ------------------------------------------------------------------------------- */

static void case_pending(void) {
  void* a = buf_alloc(0x11);
  void* b = buf_alloc(0x5a);
  /* Creation of rank 0 of 2 queued in the group; rank 1 never comes: destroy and abort return at
   * once, and the group end has nothing left to run (else it would wait for rank 1). */
  for (int abort = 0; abort < 2; abort++) {
    ncclUniqueId id;
    ncclComm_t c = NULL;
    CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    CHECK_EQ_INT(ncclCommInitRank(&c, 2, id, 0), ncclSuccess);
    double t0 = now_s();
    CHECK_EQ_INT(abort ? ncclCommAbort(c) : ncclCommDestroy(c), ncclSuccess);
    CHECK_TRUE(now_s() - t0 < QUICK_S);
    CHECK_CONTAINS(ncclGetLastError(NULL), "waiting for this thread's ncclGroupEnd");
    t0 = now_s();
    CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
    CHECK_TRUE(now_s() - t0 < QUICK_S);
  }
  /* Finalize cannot finalize what does not exist yet: it says to end the group first. */
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  CHECK_EQ_INT(ncclCommFinalize(c), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "call ncclGroupEnd first");
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  CHECK_EQ_INT(ncclCommFinalize(c), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  /* A split of a communicator destroyed before the group end: cancelled; the child says so. */
  ncclComm_t p = one_rank(), s = NULL;
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclCommSplit(p, 0, 0, &s, NULL), ncclSuccess);
  double t0 = now_s();
  CHECK_EQ_INT(ncclCommDestroy(p), ncclSuccess);
  CHECK_TRUE(now_s() - t0 < QUICK_S);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  ncclResult_t st = ncclSuccess;
  CHECK_EQ_INT(ncclCommGetAsyncError(s, &st), ncclSuccess);
  CHECK_EQ_INT(st, ncclInvalidUsage);
  CHECK_EQ_INT(ncclCommDestroy(s), ncclSuccess);
  /* Operations queued on a communicator destroyed before the group end are dropped; the group
   * end must not touch the freed communicator. */
  c = one_rank();
  int before = launched(b);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  CHECK_CONTAINS(ncclGetLastError(NULL), "and 1 operation(s)");
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  CHECK_EQ_INT(launched(b), before);
  buf_free(a);
  buf_free(b);
}

/* ---- notready ------------------------------------------------------------------------------ */

static void case_notready(void) {
  void* a = buf_alloc(0x11);
  void* b = buf_alloc(0x5a);
  ncclUniqueId id;
  ncclComm_t c = NULL;
  int n = -1;
  /* Blocking creation waiting in the group. The failed operation fails the group too, so the
   * creation never runs and the communicator reports the error. */
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "is still being created");
  CHECK_EQ_INT(ncclCommCount(c, &n), ncclInvalidArgument);
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
  ncclResult_t st = ncclSuccess;
  CHECK_EQ_INT(ncclCommGetAsyncError(c, &st), ncclSuccess);
  CHECK_EQ_INT(st, ncclInvalidArgument);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  /* Non-blocking creation still running (rank 1 never comes). */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 2, id, 0, &cfg), ncclInProgress);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclInvalidArgument);
  CHECK_EQ_INT(ncclSend(a, 16, ncclFloat, 1, c, NULL), ncclInvalidArgument);
  CHECK_EQ_INT(ncclCommUserRank(c, &n), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "ncclCommUserRank: comm");
  double t0 = now_s();
  CHECK_EQ_INT(ncclCommAbort(c), ncclSuccess);
  CHECK_TRUE(now_s() - t0 < QUICK_S);
  buf_free(a);
  buf_free(b);
}

/* ---- group --------------------------------------------------------------------------------- */

static void case_group(void) {
  void* a = buf_alloc(0x11);
  void* b = buf_alloc(0x5a);
  ncclComm_t c = one_rank();
  if (c == NULL) return;
  /* A valid operation and a bad one: the group end returns the error and launches nothing. */
  int before = launched(b);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, (ncclDataType_t)99, ncclSum, c, NULL), ncclInvalidArgument);
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "datatype 99");
  CHECK_EQ_INT(launched(b), before);
  /* The next group starts clean, and the communicator still works. */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
#ifndef TEST_REAL_GPU
  CHECK_EQ_INT(launched(b), before + 1);
#endif
  /* Nested: the inner end passes, the outer end reports. */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclSend(a, 16, ncclFloat, 3, c, NULL), ncclInvalidArgument);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "peer 3 is not a rank");
  /* A creation job in a failed group never runs: no waiting for its absent peer. */
  ncclUniqueId id;
  ncclComm_t d = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&d, 2, id, 0), ncclSuccess);
  CHECK_EQ_INT(ncclBroadcast(a, b, 16, ncclFloat, 5, c, NULL), ncclInvalidArgument);
  double t0 = now_s();
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
  CHECK_TRUE(now_s() - t0 < QUICK_S);
  ncclResult_t st = ncclSuccess;
  CHECK_EQ_INT(ncclCommGetAsyncError(d, &st), ncclSuccess);
  CHECK_EQ_INT(st, ncclInvalidArgument);
  CHECK_EQ_INT(ncclCommDestroy(d), ncclSuccess);
  /* A creation call that fails its checks fails the group: its sibling rank is not left waiting
   * for it (the ncclCommInitAll pattern done by hand). */
  ncclComm_t e[2] = {NULL, NULL};
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&e[0], 2, id, 0), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&e[1], 2, id, 7), ncclInvalidArgument);
  t0 = now_s();
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
  CHECK_TRUE(now_s() - t0 < QUICK_S);
  CHECK_CONTAINS(ncclGetLastError(NULL), "rank 7 is out of range");
  CHECK_EQ_INT(ncclCommDestroy(e[0]), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  buf_free(a);
  buf_free(b);
}

/* ---- finalized ----------------------------------------------------------------------------- */

static void case_finalized(void) {
  void* a = buf_alloc(0x11);
  void* b = buf_alloc(0x5a);
  ncclComm_t c = one_rank(), s = NULL;
  if (c == NULL) return;
  CHECK_EQ_INT(ncclCommFinalize(c), ncclSuccess);
  int before = launched(b);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "ncclAllReduce: communicator");
  CHECK_CONTAINS(ncclGetLastError(NULL), "was finalized");
  CHECK_EQ_INT(ncclBroadcast(a, b, 16, ncclFloat, 0, c, NULL), ncclInvalidUsage);
  CHECK_EQ_INT(ncclSend(a, 16, ncclFloat, 0, c, NULL), ncclInvalidUsage);
  CHECK_EQ_INT(ncclRecv(b, 16, ncclFloat, 0, c, NULL), ncclInvalidUsage);
  CHECK_EQ_INT(ncclAlltoAll(a, b, 4, ncclFloat, c, NULL), ncclInvalidUsage);
  CHECK_EQ_INT(launched(b), before);
  CHECK_EQ_INT(ncclCommSplit(c, 0, 0, &s, NULL), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "ncclCommSplit: communicator");
  CHECK_TRUE(s == NULL);
  ncclRedOp_t op;
  float two = 2.0f;
  CHECK_EQ_INT(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat, ncclScalarHostImmediate, c),
               ncclInvalidUsage);
  /* Queries and destroy are still allowed. */
  int n = 0;
  CHECK_EQ_INT(ncclCommCount(c, &n), ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  buf_free(a);
  buf_free(b);
}

/* ---- count --------------------------------------------------------------------------------- */

static void expect_count(ncclResult_t got, const char* want) {
  CHECK_EQ_INT(got, ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), want);
}

static void case_count(void) {
  void* a = buf_alloc(0x11);
  void* b = buf_alloc(0x5a);
  ncclComm_t one = one_rank();
  if (one == NULL) return;
  const size_t half = SIZE_MAX / 2; /* x 4 bytes overflows */
  expect_count(ncclAllReduce(a, b, half, ncclFloat, ncclSum, one, NULL),
               "ncclAllReduce: count 9223372036854775807 is too large: count x 4 bytes");
  expect_count(ncclReduce(a, b, SIZE_MAX / 8 + 1, ncclDouble, ncclSum, 0, one, NULL),
               "ncclReduce: count");
  expect_count(ncclBroadcast(a, b, SIZE_MAX / 2 + 1, ncclHalf, 0, one, NULL),
               "ncclBroadcast: count");
  expect_count(ncclBcast(a, SIZE_MAX / 4 + 1, ncclInt32, 0, one, NULL), "ncclBcast: count");
  expect_count(ncclSend(a, SIZE_MAX / 8 + 1, ncclUint64, 0, one, NULL), "ncclSend: count");
  expect_count(ncclRecv(b, SIZE_MAX / 4 + 1, ncclFloat, 0, one, NULL), "ncclRecv: count");
  /* One byte per element never overflows. */
  CHECK_EQ_INT(ncclAllReduce(a, b, 0, ncclInt8, ncclSum, one, NULL), ncclSuccess);

  /* Blocks per rank: fits for one rank, overflows for two. */
  const size_t q = SIZE_MAX / 8 + 1; /* x 4 bytes fits, x 2 ranks x 4 bytes does not */
  ncclComm_t c[2] = {NULL, NULL};
  two_ranks(c);
  if (c[0] != NULL) {
    expect_count(ncclAllGather(a, b, q, ncclFloat, c[0], NULL),
                 "ncclAllGather: sendcount 2305843009213693952 is too large: sendcount x nranks "
                 "(2) x 4 bytes");
    expect_count(ncclReduceScatter(a, b, q, ncclFloat, ncclSum, c[0], NULL),
                 "ncclReduceScatter: recvcount");
    expect_count(ncclAlltoAll(a, b, q, ncclFloat, c[0], NULL), "ncclAlltoAll: count");
    expect_count(ncclGather(a, b, q, ncclFloat, 0, c[0], NULL), "ncclGather: count");
    expect_count(ncclScatter(a, b, q, ncclFloat, 0, c[0], NULL), "ncclScatter: count");
    /* In a group, the group fails too. */
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    expect_count(ncclAllGather(a, b, q, ncclFloat, c[1], NULL), "ncclAllGather: sendcount");
    CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidArgument);
    for (int r = 0; r < 2; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
#ifndef TEST_REAL_GPU
  /* On one rank the same count passes the check (emulated: the copy is only counted). */
  CHECK_EQ_INT(ncclAllGather(a, b, q, ncclFloat, one, NULL), ncclSuccess);
#endif
  CHECK_EQ_INT(ncclCommDestroy(one), ncclSuccess);
  buf_free(a);
  buf_free(b);
}

/* ---- memalloc ------------------------------------------------------------------------------ */

static void check_frees(size_t size) {
  void* p = NULL;
  CHECK_EQ_INT(ncclMemAlloc(&p, size), ncclSuccess);
  CHECK_TRUE(p != NULL);
  if (p == NULL) return;
  CHECK_EQ_INT(ncclMemFree((char*)p + size / 2), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "pass the pointer ncclMemAlloc returned");
  CHECK_EQ_INT(ncclMemFree(p), ncclSuccess);
  CHECK_EQ_INT(ncclMemFree(p), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "(or was freed already)");
}

static void case_memalloc(void) {
  CHECK_EQ_INT(set_device(0), 0);
  void* p = (void*)0x1;
  size_t total = (size_t)80 << 30; /* fake_cuda.c's devices */
#ifdef TEST_REAL_GPU
  size_t free_b = 0;
  CHECK_EQ_INT(cudaMemGetInfo(&free_b, &total), cudaSuccess);
#endif
  CHECK_EQ_INT(ncclMemAlloc(&p, SIZE_MAX), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "ncclMemAlloc: size 18446744073709551615 bytes is more");
  CHECK_EQ_INT(ncclMemAlloc(&p, total + 1), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "CUDA device 0 has");
  CHECK_TRUE(p == (void*)0x1);                    /* untouched on failure */
  CHECK_EQ_INT(ncclMemAlloc(&p, 0), ncclSuccess); /* as NCCL: no memory, NULL */
  CHECK_TRUE(p == NULL);
  int local = 0;
  CHECK_EQ_INT(ncclMemFree(&local), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "was not allocated by ncclMemAlloc");
  CHECK_EQ_INT(ncclMemFree((void*)(uintptr_t)0x7f0000001000ull), ncclInvalidArgument);
#ifdef TEST_REAL_GPU
  check_frees(1 << 20); /* cuMem */
  void* plain = NULL;
  CHECK_EQ_INT(cudaMalloc(&plain, 1 << 20), cudaSuccess);
  CHECK_EQ_INT(ncclMemFree(plain), ncclInvalidArgument);
  cudaFree(plain);
#endif
}

/* With cudaMalloc behind ncclMemAlloc (emulated on the CPU). */
static void case_memalloc_nocumem(void) {
  setenv("NCCL_CUMEM_ENABLE", "0", 1);
  CHECK_EQ_INT(set_device(0), 0);
  check_frees(4096);
  void* p[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(ncclMemAlloc(&p[i], 100 + (size_t)i), ncclSuccess);
  CHECK_EQ_INT(ncclMemFree(p[1]), ncclSuccess);
  CHECK_EQ_INT(ncclMemFree(p[1]), ncclInvalidArgument);
  CHECK_EQ_INT(ncclMemFree(p[2]), ncclSuccess);
  CHECK_EQ_INT(ncclMemFree(p[0]), ncclSuccess);
}

/* ---- envknob ------------------------------------------------------------------------------- */

typedef struct {
  const char* env[2]; /* NAME=VALUE settings */
  const char* want;   /* in the message */
} knob_case_t;

static const knob_case_t knob_cases[] = {
    {{"NCCL_COMM_BLOCKING=7"},
     "NCCL_COMM_BLOCKING=7 (from the environment, overriding config.blocking) is invalid; it must "
     "be in [0, 1]"},
    {{"NCCL_CGA_CLUSTER_SIZE=99"},
     "NCCL_CGA_CLUSTER_SIZE=99 (from the environment, overriding "
     "config.cgaClusterSize)"},
    {{"NCCL_MIN_CTAS=0"}, "NCCL_MIN_CTAS=0 (from the environment, overriding config.minCTAs)"},
    {{"NCCL_MAX_CTAS=-3"}, "NCCL_MAX_CTAS=-3 (from the environment, overriding config.maxCTAs)"},
    {{"NCCL_COMM_SPLIT_SHARE_RESOURCES=2"},
     "NCCL_COMM_SPLIT_SHARE_RESOURCES=2 (from the environment, overriding config.splitShare)"},
    {{"NCCL_CTA_POLICY=9"},
     "NCCL_CTA_POLICY=9 (from the environment, overriding config.CTAPolicy)"},
    {{"NCCL_COLLNET_ENABLE=3"},
     "NCCL_COLLNET_ENABLE=3 (from the environment, overriding config.collnetEnable)"},
    {{"NCCL_NCHANNELS_PER_NET_PEER=0"},
     "NCCL_NCHANNELS_PER_NET_PEER=0 (from the environment, overriding config.nChannelsPerNetPeer)"},
    {{"NCCL_MIN_CTAS=8", "NCCL_MAX_CTAS=4"},
     "NCCL_MIN_CTAS=8 (from the environment, overriding config.minCTAs) is larger than "
     "NCCL_MAX_CTAS=4 (from the environment, overriding config.maxCTAs)"},
    {{"NCCL_MIN_CTAS=4294967297"}, "NCCL_MIN_CTAS=4294967297 (from the environment"},
};
static int knob_index;

static void case_envknob_one(void) {
  const knob_case_t* k = &knob_cases[knob_index];
  for (int i = 0; i < 2 && k->env[i] != NULL; i++) {
    char name[64];
    const char* eq = strchr(k->env[i], '=');
    snprintf(name, sizeof(name), "%.*s", (int)(eq - k->env[i]), k->env[i]);
    setenv(name, eq + 1, 1);
  }
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  /* No config at all: the message must name the variable, not a field the caller never set. */
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), k->want);
  CHECK_TRUE(strstr(ncclGetLastError(NULL), " = ") == NULL);
  /* A valid config: the variable still overrides it, and is still the one named. */
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 1;
  cfg.minCTAs = 1;
  cfg.maxCTAs = 4;
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), k->want);
  CHECK_TRUE(c == NULL);
}

static void case_envknob(void) {
  for (size_t i = 0; i < sizeof(knob_cases) / sizeof(knob_cases[0]); i++) {
    knob_index = (int)i;
    run_case(knob_cases[i].env[0], case_envknob_one);
  }
  /* A config field against an environment variable: each named as the caller set it. */
  setenv("NCCL_MIN_CTAS", "8", 1);
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.maxCTAs = 4;
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL),
                 "NCCL_MIN_CTAS=8 (from the environment, overriding config.minCTAs) is larger "
                 "than config.maxCTAs = 4");
}

/* ---- netname ------------------------------------------------------------------------------- */

static int maps_contain(const char* what) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return -1;
  char line[4096];
  int found = 0;
  while (!found && fgets(line, sizeof(line), f) != NULL) found = strstr(line, what) != NULL;
  fclose(f);
  return found;
}

static void net_bad_env(void) {
  setenv("NCCL_NET", "NoSuchNet", 1);
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(set_device(0), 0);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL),
                 "NCCL_NET 'NoSuchNet' names no network; the networks "
                 "found are 'Socket' (");
  CHECK_TRUE(c == NULL);
  /* Two ranks of one thread: both fail at creation, promptly. */
  ncclComm_t d[2] = {NULL, NULL};
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ_INT(set_device(r % ndev), 0);
    CHECK_EQ_INT(ncclCommInitRank(&d[r], 2, id, r), ncclSuccess);
  }
  double t0 = now_s();
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidUsage);
  CHECK_TRUE(now_s() - t0 < QUICK_S);
  for (int r = 0; r < 2; r++) {
    ncclResult_t st = ncclSuccess;
    CHECK_EQ_INT(ncclCommGetAsyncError(d[r], &st), ncclSuccess);
    CHECK_EQ_INT(st, ncclInvalidUsage);
    CHECK_EQ_INT(ncclCommDestroy(d[r]), ncclSuccess);
  }
}

static void net_bad_config(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.netName = "bogus";
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL),
                 "config.netName 'bogus' names no network; the networks "
                 "found are 'Socket' (");
}

static void net_good(void) {
  /* No name: creation opens no net plugin. */
  ncclComm_t c = one_rank();
  CHECK_EQ_INT(maps_contain("libnccl-net-socket"), 0);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  /* A name that exists, in any case. */
  setenv("NCCL_NET", "socket", 1);
  c = one_rank();
  CHECK_TRUE(c != NULL);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

static void case_netname(void) {
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    /* Meson sets it where net-socket is built. */
    printf("netname: CHOIR_PLUGIN_DIR unset (net-socket not built); skipped\n");
    CHECK_TRUE(true);
    return;
  }
  run_case("netname_bad_env", net_bad_env);
  run_case("netname_bad_config", net_bad_config);
  run_case("netname_good", net_good);
}

/* ---- duprank ------------------------------------------------------------------------------- */

typedef struct {
  ncclUniqueId id;
  int rank, nranks, dev;
  ncclResult_t res;
  double secs;
  char msg[1024];
} dup_arg_t;

static void* dup_thread(void* p) {
  dup_arg_t* a = (dup_arg_t*)p;
  ncclComm_t c = NULL;
  double t0 = now_s();
  a->res = set_device(a->dev) == 0 ? ncclSuccess : ncclUnhandledCudaError;
  if (a->res == ncclSuccess) a->res = ncclCommInitRank(&c, a->nranks, a->id, a->rank);
  a->secs = now_s() - t0;
  snprintf(a->msg, sizeof(a->msg), "%s", ncclGetLastError(NULL));
  if (c != NULL) ncclCommDestroy(c);
  return NULL;
}

static void case_duprank(void) {
  /* Ranks 0, 0 and 1 of 3 (rank 2 never comes, so the rendezvous cannot complete before the
   * second claim arrives): every caller fails fast, each told which rank was claimed twice. */
  dup_arg_t a[3];
  pthread_t t[3];
  const int ranks[3] = {0, 0, 1};
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  for (int i = 0; i < 3; i++) {
    memset(&a[i], 0, sizeof(a[i]));
    a[i].id = id;
    a[i].rank = ranks[i];
    a[i].nranks = 3;
    a[i].dev = i % ndev;
    pthread_create(&t[i], NULL, dup_thread, &a[i]);
  }
  for (int i = 0; i < 3; i++) {
    pthread_join(t[i], NULL);
    CHECK_EQ_INT(a[i].res, ncclInvalidUsage);
    CHECK_MSG(a[i].secs < QUICK_S, "caller %d (rank %d) took %.1f s", i, a[i].rank, a[i].secs);
    CHECK_CONTAINS(a[i].msg, "rank 0 of 3 was claimed twice");
  }
}

/* ---- main ---------------------------------------------------------------------------------- */

static const struct {
  const char* name;
  void (*fn)(void);
} cases[] = {
    {"pending", case_pending},
    {"notready", case_notready},
    {"group", case_group},
    {"finalized", case_finalized},
    {"count", case_count},
    {"memalloc", case_memalloc},
    {"memalloc_nocumem", case_memalloc_nocumem},
    {"envknob", case_envknob},
    {"netname", case_netname},
    {"duprank", case_duprank},
};

int main(int argc, char** argv) {
#ifdef TEST_REAL_GPU
  /* Look for a GPU in a child: CUDA must not be initialized in this process before it forks. */
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0)
      printf("no CUDA device (%s); skipping\n", e != cudaSuccess ? cudaGetErrorString(e) : "none");
    fflush(stdout);
    _exit(e == cudaSuccess ? (n > 64 ? 64 : n) : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ndev = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  if (ndev == 0) return CHECK_SKIP;
  printf("misuse: %d GPU(s)\n", ndev);
  setenv("CHOIR_RANKS_SHARE_GPU", "1", 1); /* with one GPU, two ranks of one thread share it */
#endif
  setenv("NCCL_CONF_FILE", "/nonexistent", 1);
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "10", 1);
  const char* only = argc > 1 ? argv[1] : NULL;
  int ran = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (only != NULL && strcmp(only, cases[i].name) != 0) continue;
#ifdef TEST_REAL_GPU
    if (strcmp(cases[i].name, "memalloc_nocumem") == 0) continue; /* memalloc-gpu covers it */
#endif
    run_case(cases[i].name, cases[i].fn);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "no case named %s\n", only);
    return 2;
  }
  return check_finish("misuse");
}
