/*
 * Communicator lifecycle: creation across processes, threads and groups, non-blocking creation
 * and group ends (operations finishing in the background), ncclCommInitAll, split, shrink, config
 * validation, revoke, abort, and the errors of misuse.
 * Everything goes through the public API. Built twice: for the unit suite on emulated devices
 * (fake_cuda.c, 8 of them), and with -DTEST_REAL_GPU for the multigpu suite on every local GPU
 * (skipped with exit 77 where there is none).
 */
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fork_case.h"
#include "log_file.h"
#include "nccl.h"
#include "nccl_device.h"

#ifdef TEST_REAL_GPU
#include <cuda_runtime_api.h>
static int set_device(int dev) { return cudaSetDevice(dev) == cudaSuccess ? 0 : 1; }
#else
#include <cuda_runtime_api.h>

#include "base.h"
#include "kernels.h"
static int set_device(int dev) { return cuda_set_device(dev) == ncclSuccess ? 0 : 1; }

#include "fake_cudart.h"
#include "transport_internal.h"
#endif
static int ndev = 8;        /* devices this run uses */
static int ndev_total = 8;  /* devices the process sees */

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void expect_comm(ncclComm_t c, int rank, int nranks, int dev) {
  int v = -1;
  CHECK_EQ_INT(ncclCommUserRank(c, &v), ncclSuccess);
  CHECK_EQ_INT(v, rank);
  CHECK_EQ_INT(ncclCommCount(c, &v), ncclSuccess);
  CHECK_EQ_INT(v, nranks);
  CHECK_EQ_INT(ncclCommCuDevice(c, &v), ncclSuccess);
  CHECK_EQ_INT(v, dev);
  ncclResult_t async = ncclInternalError;
  CHECK_EQ_INT(ncclCommGetAsyncError(c, &async), ncclSuccess);
  CHECK_EQ_INT(async, ncclSuccess);
}

/* ---- one rank ---- */
static void case_single(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(set_device(ndev - 1), 0);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  expect_comm(c, 0, 1, ndev - 1);
  /* Rooted calls check the root against the communicator; buffers are checked before anything
   * is queued. */
  CHECK_EQ_INT(ncclBroadcast(NULL, NULL, 1, ncclFloat, 1, c, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(c), "root 1 is not a rank");
  CHECK_EQ_INT(ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, c, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(c), "sendbuff is NULL");
  CHECK_EQ_INT(ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(c), "built-in");
  CHECK_EQ_INT(ncclCommFinalize(c), ncclSuccess);
  CHECK_EQ_INT(ncclCommFinalize(c), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(c), "already finalized");
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* ---- processes: init, split (halves, reversed keys, NOCOLOR), shrink ---- */
static void proc_rank(ncclUniqueId id, int rank, int n) {
  ncclComm_t c = NULL, half = NULL, none = NULL, shrunk = NULL;
  CHECK_EQ_INT(set_device(rank % ndev), 0);
  CHECK_EQ_INT(ncclCommInitRank(&c, n, id, rank), ncclSuccess);
  expect_comm(c, rank, n, rank % ndev);
  if (getenv("NCCL_HOSTID") != NULL) {
    /* Two hosts: the rail team has 2 ranks, and a barrier between hosts needs GIN. */
    ncclDevCommRequirements_t q;
    ncclDevComm_t dc;
    memset(&q, 0, sizeof(q));
    q.railGinBarrierCount = 32;
    CHECK_EQ_INT(ncclDevCommCreate(c, &q, &dc), ncclInvalidUsage);
    CHECK_CONTAINS(ncclGetLastError(c), "reqs->railGinBarrierCount is 32 and the rail team has 2");
  }

  /* Halves, ordered by descending parent rank through the key. */
  int color = rank < n / 2 ? 0 : 1, size = color == 0 ? n / 2 : n - n / 2;
  int first = color == 0 ? 0 : n / 2;
  CHECK_EQ_INT(ncclCommSplit(c, color, -rank, &half, NULL), ncclSuccess);
  expect_comm(half, size - 1 - (rank - first), size, rank % ndev);

  /* Odd ranks opt out. */
  CHECK_EQ_INT(ncclCommSplit(c, rank % 2 ? NCCL_SPLIT_NOCOLOR : 7, 0, &none, NULL), ncclSuccess);
  if (rank % 2) {
    CHECK_TRUE(none == NULL);
  } else {
    expect_comm(none, rank / 2, (n + 1) / 2, rank % ndev);
  }

  /* The last rank leaves; the others shrink without it. */
  if (rank != n - 1) {
    int excl = n - 1;
    CHECK_EQ_INT(ncclCommShrink(c, &excl, 1, &shrunk, NULL, NCCL_SHRINK_DEFAULT), ncclSuccess);
    expect_comm(shrunk, rank, n - 1, rank % ndev);
    CHECK_EQ_INT(ncclCommDestroy(shrunk), ncclSuccess);
  }
  CHECK_EQ_INT(ncclCommDestroy(none), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(half), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* Each rank is a fresh process: fork, then exec this program at once, since a process that forks
 * while threads run (the rendezvous root) may not use locks those threads held. With log_dir:
 * the first half of the ranks poses as one host and the second half as another (NCCL_HOSTID),
 * each rank logging GRAPH INFO lines to log_dir/rank<r>.log. With fault: the ranks run
 * fault_rank (TEST_COMM_FAULT), and rank 1 of "kill" must die by SIGKILL. */
static void run_procs(int n, const char* log_dir, const char* fault) {
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  char hex[2 * sizeof(id) + 1], n_s[16], rank_s[64][16], ndev_s[16];
  for (size_t i = 0; i < sizeof(id); i++) sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
  snprintf(n_s, sizeof(n_s), "%d", n);
  snprintf(ndev_s, sizeof(ndev_s), "%d", ndev);
  pid_t pids[64];
  for (int r = 0; r < n; r++) snprintf(rank_s[r], sizeof(rank_s[r]), "%d", r);
  fflush(NULL);
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) {
      if (fault != NULL) setenv("TEST_COMM_FAULT", fault, 1);
      if (log_dir != NULL) {
        char host[32], file[512];
        snprintf(host, sizeof(host), "choir-test-host-%d", r < n / 2 ? 0 : 1);
        snprintf(file, sizeof(file), "%s/rank%d.log", log_dir, r);
        setenv("NCCL_HOSTID", host, 1);
        setenv("NCCL_DEBUG", "INFO", 1);
        setenv("NCCL_DEBUG_SUBSYS", "GRAPH", 1);
        setenv("NCCL_DEBUG_FILE", file, 1);
      }
      execl("/proc/self/exe", "test-comm", "--rank", rank_s[r], n_s, hex, ndev_s, (char*)NULL);
      _exit(127);
    }
  }
  for (int r = 0; r < n; r++) {
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (r == 1 && fault != NULL && strcmp(fault, "kill") == 0)
      CHECK_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else
      CHECK_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
}

/* ---- a rank that goes away (TEST_COMM_FAULT) ---- */
/* Rank 1 is killed, destroys its communicator, or exits with it open; the others are idle. */
static void fault_rank(ncclUniqueId id, int rank, int n, const char* fault) {
  ncclComm_t c = NULL;
  CHECK_EQ_INT(set_device(rank % ndev), 0);
  CHECK_EQ_INT(ncclCommInitRank(&c, n, id, rank), ncclSuccess);
  if (rank == 1) {
    fflush(NULL);
    if (strcmp(fault, "kill") == 0) raise(SIGKILL);
    if (strcmp(fault, "destroy") == 0) CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
    fflush(NULL);
    exit(check_failures_ == 0 ? 0 : 1); /* "exit": the communicator stays open */
  }
  const double t0 = now_s();
  ncclResult_t async = ncclSuccess;
  if (strcmp(fault, "kill") == 0) {
    /* Seen through the liveness connections within a second (the process's sockets close). */
    while (async == ncclSuccess && now_s() - t0 < 3.0) {
      CHECK_EQ_INT(ncclCommGetAsyncError(c, &async), ncclSuccess);
      usleep(1000);
    }
    printf("[rank %d] async error %d after %.0f ms: %s\n", rank, (int)async, (now_s() - t0) * 1e3,
           ncclGetLastError(c));
    CHECK_EQ_INT(async, ncclRemoteError);
    CHECK_TRUE(now_s() - t0 < 1.5);
    CHECK_CONTAINS(ncclGetLastError(c), "rank 1 (");
    CHECK_CONTAINS(ncclGetLastError(c), "exited without closing the communicator");
    CHECK_CONTAINS(ncclGetLastError(c), "shrink it without rank 1");
    /* The communicator takes no more work, and says why. */
    CHECK_EQ_INT(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL), ncclRemoteError);
    CHECK_CONTAINS(ncclGetLastError(c), "exited without closing");
    double ta = now_s();
    CHECK_EQ_INT(ncclCommAbort(c), ncclSuccess);
    CHECK_TRUE(now_s() - ta < 5.0);
    return;
  }
  /* A rank that left while this one was idle breaks nothing by itself... */
  usleep(500 * 1000);
  CHECK_EQ_INT(ncclCommGetAsyncError(c, &async), ncclSuccess);
  CHECK_EQ_INT(async, ncclSuccess);
  /* ...but an operation that needs it fails at once instead of waiting forever. */
  const bool destroyed = strcmp(fault, "destroy") == 0;
  CHECK_EQ_INT(ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL),
               destroyed ? ncclInvalidUsage : ncclRemoteError);
  CHECK_CONTAINS(ncclGetLastError(c), "rank 1 (");
  CHECK_CONTAINS(ncclGetLastError(c), destroyed ? "destroyed the communicator"
                                                : "exited with the communicator still open");
  CHECK_EQ_INT(ncclSend(NULL, 0, ncclFloat, 1, c, NULL),
               destroyed ? ncclInvalidUsage : ncclRemoteError);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

static void case_fault_kill(void) { run_procs(ndev >= 3 ? 3 : 2, NULL, "kill"); }
/* Two ranks: with more, the survivors' own destroys would race with each other's checks. */
static void case_fault_destroy(void) { run_procs(2, NULL, "destroy"); }
static void case_fault_exit(void) { run_procs(2, NULL, "exit"); }

/* The process of one rank of run_procs. */
static int rank_main(const char* rank_s, const char* n_s, const char* hex, const char* ndev_s) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id); i++) {
    unsigned v = 0;
    sscanf(hex + 2 * i, "%2x", &v);
    id.internal[i] = (char)v;
  }
  ndev = atoi(ndev_s);
  /* TEST_COMM_EXPECT_FAIL=TEXT: creation must fail with ncclInvalidUsage and a message
   * containing TEXT (nothing else is run). */
  const char* expect_fail = getenv("TEST_COMM_EXPECT_FAIL");
  if (expect_fail != NULL) {
    ncclComm_t c = NULL;
    CHECK_EQ_INT(set_device(atoi(rank_s) % ndev), 0);
    CHECK_EQ_INT(ncclCommInitRank(&c, atoi(n_s), id, atoi(rank_s)), ncclInvalidUsage);
    CHECK_CONTAINS(ncclGetLastError(NULL), expect_fail);
    fflush(NULL);
    return check_failures_ == 0 && check_count_ > 0 ? 0 : 1;
  }
  const char* fault = getenv("TEST_COMM_FAULT");
  if (fault != NULL)
    fault_rank(id, atoi(rank_s), atoi(n_s), fault);
  else
    proc_rank(id, atoi(rank_s), atoi(n_s));
  fflush(NULL);
  return check_failures_ == 0 && check_count_ > 0 ? 0 : 1;
}

static void case_procs_2(void) { run_procs(2, NULL, NULL); }
static void case_procs_all(void) { run_procs(ndev, NULL, NULL); }

/* Ranks on two "hosts": each rank searches its own host (with the network's devices) and the
 * per-host results combine into the same rings on every rank, which each rank logs. Needs
 * Choir's net-socket (CHOIR_PLUGIN_DIR, NCCL_SOCKET_IFNAME=lo), as the unit suite sets. */
static void case_procs_hosts(void) {
  char dir[] = "/tmp/choir-test-hosts-XXXXXX";
  CHECK_TRUE(mkdtemp(dir) != NULL);
  const int n = ndev >= 4 ? 4 : 2;
  run_procs(n, dir, NULL);
  for (int r = 0; r < n; r++) {
    static char text[1 << 16];
    char file[512];
    snprintf(file, sizeof(file), "%s/rank%d.log", dir, r);
    FILE* f = fopen(file, "r");
    CHECK_TRUE(f != NULL);
    if (f == NULL) continue;
    size_t got = fread(text, 1, sizeof(text) - 1, f);
    text[got] = '\0';
    fclose(f);
    CHECK_CONTAINS(text, "rings from the searches of 2 hosts");
    /* and no fallback to rank order */
    CHECK_TRUE(strstr(text, "rings in rank order") == NULL);
    if (check_failures_ == 0) unlink(file);
  }
  if (check_failures_ == 0) rmdir(dir);
}

/* ---- threads, one rank each ---- */
typedef struct {
  ncclUniqueId id;
  int rank, n;
  ncclComm_t comm;
  ncclResult_t res;
} thread_arg_t;

static void* thread_rank(void* p) {
  thread_arg_t* a = (thread_arg_t*)p;
  a->res = set_device(a->rank) == 0 ? ncclSuccess : ncclUnhandledCudaError;
  if (a->res == ncclSuccess) a->res = ncclCommInitRank(&a->comm, a->n, a->id, a->rank);
  return NULL;
}

static void case_threads(void) {
  int N = ndev;
  thread_arg_t args[64];
  pthread_t t[64];
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  for (int r = 0; r < N; r++) {
    args[r] = (thread_arg_t){id, r, N, NULL, ncclInternalError};
    pthread_create(&t[r], NULL, thread_rank, &args[r]);
  }
  for (int r = 0; r < N; r++) pthread_join(t[r], NULL);
  for (int r = 0; r < N; r++) {
    CHECK_EQ_INT(args[r].res, ncclSuccess);
    expect_comm(args[r].comm, r, N, r);
    CHECK_EQ_INT(ncclCommDestroy(args[r].comm), ncclSuccess);
  }
}

/* ---- one thread, several devices: group, InitAll, split in a group ---- */
/* Windows in groups over N ranks of this process (emulated devices, so no buffer can be
 * registered): two registrations per communicator in one group, each rank failing for its own
 * reason or a peer's, none waiting for another; then rounds with one bad rank, every rank told
 * its reason; the communicators still work afterwards. */
static void case_windows_group(void) {
  int N = ndev < 4 ? ndev : 4;
  if (N < 2) {
    CHECK_SKIPPED("windows_group: needs 2 emulated devices");
    return;
  }
  ncclComm_t c[4];
  CHECK_EQ_INT(ncclCommInitAll(c, N, NULL), ncclSuccess);
  char host[4][2][64];
  ncclWindow_t w[4][2];
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    /* Rank 1 registers a NULL buffer first, every other one a host buffer; then all a host
     * buffer of size 0 on rank 2, 64 elsewhere. */
    CHECK_EQ_INT(ncclCommWindowRegister(c[r], r == 1 ? NULL : host[r][0], 64, &w[r][0],
                                        NCCL_WIN_DEFAULT), ncclSuccess);
    CHECK_EQ_INT(ncclCommWindowRegister(c[r], host[r][1], r == 2 % N ? 0 : 64, &w[r][1],
                                        NCCL_WIN_DEFAULT), ncclSuccess);
  }
  const ncclResult_t res = ncclGroupEnd();
  CHECK_TRUE(res == ncclInvalidUsage || res == ncclInvalidArgument);
  for (int r = 0; r < N; r++) CHECK_TRUE(w[r][0] == NULL && w[r][1] == NULL);
  /* Registrations out of a group: one round each, every rank told the same first reason. */
  for (int round = 0; round < 2; round++) {
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < N; r++) {
      set_device(r);
      ncclCommWindowRegister(c[r], round == 0 && r == 0 ? NULL : host[r][0], 64, &w[r][0],
                             NCCL_WIN_DEFAULT);
    }
    CHECK_TRUE(ncclGroupEnd() != ncclSuccess);
    CHECK_CONTAINS(ncclGetLastError(NULL), round == 0 ? "rank 0 cannot register its window: its "
                                                       "buffer is NULL"
                                                     : "not inside an ncclMemAlloc allocation");
  }
  float x = 1;
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++)
    CHECK_EQ_INT(ncclAllReduce(&x, &x, 0, ncclFloat, ncclSum, c[r], NULL), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < N; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
}

static void case_group_and_init_all(void) {
  int N = ndev;
  ncclComm_t c[64], h[64];
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(set_device(0), 0);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommInitRank(&c[r], N, id, r), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < N; r++) expect_comm(c[r], r, N, r);

  /* Singletons: every rank its own color. */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) CHECK_EQ_INT(ncclCommSplit(c[r], r, 0, &h[r], NULL), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    expect_comm(h[r], 0, 1, r);
    CHECK_EQ_INT(ncclCommDestroy(h[r]), ncclSuccess);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }

  /* A devlist in another order than the devices. */
  int devs[64];
  for (int r = 0; r < N; r++) devs[r] = N - 1 - r;
  CHECK_EQ_INT(ncclCommInitAll(c, N, devs), ncclSuccess);
  for (int r = 0; r < N; r++) {
    expect_comm(c[r], r, N, devs[r]);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
  CHECK_EQ_INT(ncclCommInitAll(c, N, NULL), ncclSuccess);
  for (int r = 0; r < N; r++) {
    expect_comm(c[r], r, N, r);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
  int dup[2] = {0, 0};
  CHECK_EQ_INT(ncclCommInitAll(c, 2, dup), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "are both device 0");
  int bad[1] = {ndev_total};
  CHECK_EQ_INT(ncclCommInitAll(c, 1, bad), ncclInvalidArgument);
}

/* Two ranks on one device: caught at creation. */
static void case_duplicate_gpu(void) {
  ncclComm_t c[2] = {NULL, NULL};
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    set_device(0);
    CHECK_EQ_INT(ncclCommInitRank(&c[r], 2, id, r), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "duplicate GPU");
  CHECK_CONTAINS(ncclGetLastError(NULL), "CHOIR_RANKS_SHARE_GPU=1");
  for (int r = 0; r < 2; r++) {
    ncclResult_t async = ncclSuccess;
    CHECK_EQ_INT(ncclCommGetAsyncError(c[r], &async), ncclSuccess);
    CHECK_EQ_INT(async, ncclInvalidUsage);
    CHECK_EQ_INT(ncclCommCount(c[r], &(int){0}), ncclInvalidUsage);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
}

/* ---- several ranks on one GPU (CHOIR_RANKS_SHARE_GPU) ---- */

/* One process: ranks on one device through a group and through ncclCommInitAll with a devlist
 * that repeats it; each rank gets multiprocessors / (2 x sharing ranks) CTAs (132 emulated
 * multiprocessors: 4 ranks, 16 CTAs) and the data path applies that cap. */
static void case_shared_gpu(void) {
  enum { N = 4 };
  ncclComm_t c[N];
  ncclUniqueId id;
  snprintf(log_path, sizeof(log_path), "/tmp/choir-test-shared-%d.log", (int)getpid());
  setenv("CHOIR_RANKS_SHARE_GPU", "1", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,GRAPH", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(0);
    CHECK_EQ_INT(ncclCommInitRank(&c[r], N, id, r), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    expect_comm(c[r], r, N, 0);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
  const char* text = log_text();
#ifndef TEST_REAL_GPU
  CHECK_CONTAINS(text, "up to 4 ranks share a GPU (CHOIR_RANKS_SHARE_GPU): at most 16 CTAs");
  CHECK_CONTAINS(text, "at most 16 ring channels, 5 send/recv connections per peer, 16 CTAs per "
                       "send/recv launch");
#endif
  CHECK_CONTAINS(text, "ranks share GPUs: no topology search");
  /* Two ranks on device 1, one each on 0 and 2: every rank gets the cap of the busiest GPU. */
  int devs[N] = {1 % ndev, 0, 1 % ndev, 2 % ndev};
  CHECK_EQ_INT(ncclCommInitAll(c, N, devs), ncclSuccess);
  for (int r = 0; r < N; r++) {
    expect_comm(c[r], r, N, devs[r]);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
#ifndef TEST_REAL_GPU
  CHECK_CONTAINS(log_text(), "up to 2 ranks share a GPU (CHOIR_RANKS_SHARE_GPU): at most 33 CTAs");
#endif
  if (check_failures_ == 0) unlink(log_path);
}

#ifndef TEST_REAL_GPU
/* One rank: collectives launch no data-path kernel (in place nothing, out of place one copy,
 * premulsum one reduce-copy kernel). A device setup that fails half way (the second event)
 * leaves nothing behind, and the next operation sets up afresh. */
static void case_one_rank_data_path(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  char a[64], b[64];
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(set_device(0), 0);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  fake_cudart.fail_event = 2;
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclUnhandledCudaError);
  CHECK_EQ_INT(fake_cudart.streams, 0);
  CHECK_EQ_INT(fake_cudart.events, 0);
  CHECK_EQ_INT(fake_cudart.dev_allocs, 0);
  CHECK_EQ_INT(fake_cudart.host_allocs, 0);
  CHECK_EQ_INT(fake_cudart.copies, 0);
  CHECK_EQ_INT(ncclAllReduce(a, b, 16, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(fake_cudart.streams, 1);
  CHECK_EQ_INT(fake_cudart.events, 2);
  CHECK_EQ_INT(fake_cudart.copies, 1);
  CHECK_EQ_INT((int)fake_cudart.copied, 64);
  /* In place: nothing at all; every other collective out of place: one copy of its bytes. */
  CHECK_EQ_INT(ncclAllReduce(a, a, 16, ncclFloat, ncclMax, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, a, 16, ncclFloat, ncclAvg, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclBroadcast(a, a, 16, ncclFloat, 0, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclAllGather(a, a, 16, ncclInt8, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclReduceScatter(a, a, 16, ncclInt8, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(fake_cudart.copies, 1);
  CHECK_EQ_INT(ncclReduce(a, b, 3, ncclDouble, ncclMin, 0, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclAllGather(a, b, 5, ncclHalf, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclReduceScatter(a, b, 7, ncclInt8, ncclProd, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclBroadcast(a, b, 2, ncclInt32, 0, c, NULL), ncclSuccess);
  CHECK_EQ_INT(fake_cudart.copies, 5);
  CHECK_EQ_INT((int)fake_cudart.copied, 64 + 24 + 10 + 7 + 8);
  CHECK_EQ_INT(fake_cudart.launches, 0);
  /* premulsum changes values: one reduce-copy kernel, in place too, and no copy (where the
   * build has that kernel: kernel_subset may leave it out). */
  if (!kern_instance_available(KERN_OP_PREMULSUM, ncclFloat)) {
    CHECK_SKIPPED("one rank, premulsum: the reduce-copy kernel for premulsum/f32 is not built");
  } else {
    ncclRedOp_t op;
    float two = 2.0f;
    CHECK_EQ_INT(ncclRedOpCreatePreMulSum(&op, &two, ncclFloat, ncclScalarHostImmediate, c),
                 ncclSuccess);
    CHECK_EQ_INT(ncclAllReduce(a, a, 16, ncclFloat, op, c, NULL), ncclSuccess);
    CHECK_EQ_INT(fake_cudart.launches, 1);
    CHECK_EQ_INT(fake_cudart.copies, 5);
    CHECK_EQ_INT(ncclRedOpDestroy(op, c), ncclSuccess);
  }
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  CHECK_EQ_INT(fake_cudart.streams, 0);
  CHECK_EQ_INT(fake_cudart.events, 0);
  CHECK_EQ_INT(fake_cudart.dev_allocs, 0);
  CHECK_EQ_INT(fake_cudart.host_allocs, 0);
}

/* Too many ranks for the multiprocessors: refused at creation, naming how many fit. */
static void case_shared_gpu_too_many(void) {
  enum { N = 4 };
  ncclComm_t c[N];
  int devs[N] = {0, 0, 0, 0};
  setenv("CHOIR_RANKS_SHARE_GPU", "1", 1);
  setenv("CHOIR_FAKE_SMS", "60", 1); /* 60 / (2 x 4) = 7 CTAs: fewer than the 8 needed */
  CHECK_EQ_INT(ncclCommInitAll(c, N, devs), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "each rank would get 7 CTAs");
  CHECK_CONTAINS(ncclGetLastError(NULL), "put at most 3 ranks on it");
}

/* Ranks of one process on one GPU need a hardware queue each: refused beyond
 * CUDA_DEVICE_MAX_CONNECTIONS (default 8; an MPS client is assumed to have 2 unless it is set). */
static void case_shared_gpu_queues(void) {
  ncclComm_t c[9];
  int devs[9] = {0};
  setenv("CHOIR_RANKS_SHARE_GPU", "1", 1);
  setenv("CHOIR_FAKE_SMS", "400", 1); /* 400 / (2 x 9) = 22 CTAs each: the cap is not the limit */
  CHECK_EQ_INT(ncclCommInitAll(c, 9, devs), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "9 ranks of one process (rank 0's) share the GPU");
  CHECK_CONTAINS(ncclGetLastError(NULL), "has 8 hardware work queues");
  CHECK_CONTAINS(ncclGetLastError(NULL), "set CUDA_DEVICE_MAX_CONNECTIONS=32");
  CHECK_EQ_INT(ncclCommInitAll(c, 8, devs), ncclSuccess);
  for (int r = 0; r < 8; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  setenv("CHOIR_FAKE_MPS", "1", 1);
  CHECK_EQ_INT(ncclCommInitAll(c, 3, devs), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(NULL), "an MPS client gets few");
  CHECK_EQ_INT(ncclCommInitAll(c, 2, devs), ncclSuccess);
  for (int r = 0; r < 2; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 1);
  CHECK_EQ_INT(ncclCommInitAll(c, 9, devs), ncclSuccess);
  for (int r = 0; r < 9; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
}

/* Processes sharing a GPU: only under MPS (emulated: CHOIR_FAKE_MPS), where creation, split and
 * shrink work as on separate GPUs; without MPS every rank fails at creation, naming MPS. */
static void case_shared_gpu_procs(void) {
  setenv("CHOIR_RANKS_SHARE_GPU", "1", 1);
  ndev = 1; /* run_procs puts rank r on device r % ndev */
  setenv("CHOIR_FAKE_MPS", "1", 1);
  run_procs(4, NULL, NULL);
  setenv("CHOIR_FAKE_MPS", "0", 1);
  setenv("TEST_COMM_EXPECT_FAIL", "without MPS", 1);
  run_procs(2, NULL, NULL);
}
#endif

/* ---- non-blocking creation and split, polled to completion ---- */
/* ---- non-blocking group ends ---- */
#ifndef TEST_REAL_GPU
/* The transport's CUDA calls on emulated devices: mapped host memory is its own device address,
 * device memory is host memory, and no device maps another's (the network carries everything). */
static ncclResult_t nb_get_device(int* d) { return cuda_get_device(d); }
static ncclResult_t nb_set_device(int d) { return cuda_set_device(d); }
static ncclResult_t nb_by_bus_id(int64_t bus_id, int* d) {
  (void)bus_id;
  *d = -1;
  return ncclSuccess;
}
static ncclResult_t nb_can_access(int dev, int peer, int* can) {
  (void)dev, (void)peer;
  *can = 0;
  return ncclSuccess;
}
static ncclResult_t nb_enable_peer(int peer) {
  (void)peer;
  return ncclSuccess;
}
static ncclResult_t nb_dev_alloc(size_t bytes, void** p) {
  *p = calloc(1, bytes);
  return *p != NULL ? ncclSuccess : ncclSystemError;
}
static ncclResult_t nb_ipc_get(void* p, unsigned char h[64]) {
  (void)p, (void)h;
  return ncclUnhandledCudaError;
}
static ncclResult_t nb_ipc_open(const unsigned char h[64], void** p) {
  (void)h, (void)p;
  return ncclUnhandledCudaError;
}
static void nb_ipc_close(void* p) { (void)p; }
static ncclResult_t nb_host_register(void* p, size_t bytes, void** d) {
  (void)bytes;
  *d = p;
  return ncclSuccess;
}
static void nb_host_unregister(void* p) { (void)p; }
static const transport_cuda_ops_t nb_cuda_ops = {
    nb_get_device, nb_set_device, nb_by_bus_id, nb_can_access, nb_enable_peer, nb_dev_alloc, free,
    nb_ipc_get,    nb_ipc_open,   nb_ipc_close, nb_host_register, nb_host_unregister};
#endif

/* Poll until the communicator leaves ncclInProgress (at most max_s); its state then. */
static ncclResult_t nb_settle(ncclComm_t c, double max_s) {
  ncclResult_t st = ncclInProgress;
  const double t0 = now_s();
  while (st == ncclInProgress && now_s() - t0 < max_s) {
    CHECK_EQ_INT(ncclCommGetAsyncError(c, &st), ncclSuccess);
    if (st == ncclInProgress) usleep(500);
  }
  return st;
}

/* The INIT lines of this process into a fresh file made from the template path (mkstemp). */
static void init_log_to(char* path) {
  const int fd = mkstemp(path);
  CHECK_TRUE(fd >= 0);
  if (fd >= 0) close(fd);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", path, 1);
}

#ifndef TEST_REAL_GPU
/* Two non-blocking ranks of one communicator on devices 0 and 1, created in one group, settled. */
static void nb_pair(ncclComm_t c[2]) {
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommInitRankConfig(&c[r], 2, id, r, &cfg), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclInProgress);
  for (int r = 0; r < 2; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
}
#endif

/* Two non-blocking ranks driven from one thread, every pair through the network (net-socket).
 * An operation that needs connections first (the first collective) returns ncclInProgress: its
 * connections and launch finish in the background; until then ncclCommGetAsyncError says
 * ncclInProgress and the communicator takes no operation (ncclInvalidUsage, saying why). Rank 1
 * joins only after rank 0 has seen all that, so it cannot have finished early. Once connected,
 * operations launch before returning (ncclSuccess). An abort while a group end still connects
 * (its peer never comes) returns within seconds. */
static void case_nonblocking_ops(void) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  /* The INIT lines, for the memory each communicator reports (checked at the end). */
  char log[] = "/tmp/choir-test-nb-XXXXXX";
  init_log_to(log);
#ifndef TEST_REAL_GPU
  transport_set_cuda_ops(&nb_cuda_ops);
#endif
  ncclComm_t c[2], d[2];
  ncclUniqueId id, id2;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGetUniqueId(&id2), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommInitRankConfig(&c[r], 2, id, r, &cfg), ncclSuccess);
    CHECK_EQ_INT(ncclCommInitRankConfig(&d[r], 2, id2, r, &cfg), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclInProgress);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
    CHECK_EQ_INT(nb_settle(d[r], 10), ncclSuccess);
  }
  void* buf[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(cudaMalloc(&buf[r], 4096), cudaSuccess);
  }
#ifndef TEST_REAL_GPU
  const int launches0 = __atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED);
#endif
  set_device(0);
  CHECK_EQ_INT(ncclAllReduce(buf[0], buf[0], 1024, ncclFloat, ncclSum, c[0], NULL),
               ncclInProgress);
  ncclResult_t st = ncclInternalError;
  CHECK_EQ_INT(ncclCommGetAsyncError(c[0], &st), ncclSuccess);
  CHECK_EQ_INT(st, ncclInProgress);
  CHECK_EQ_INT(ncclAllReduce(buf[0], buf[0], 1024, ncclFloat, ncclSum, c[0], NULL),
               ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(c[0]), "still connecting and launching in the background");
  /* Operators too: the background launch reads them. */
  ncclRedOp_t premul;
  float two = 2.0f;
  CHECK_EQ_INT(ncclRedOpCreatePreMulSum(&premul, &two, ncclFloat, ncclScalarHostImmediate, c[0]),
               ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(c[0]), "ncclRedOpCreatePreMulSum: this communicator's last");
  set_device(1);
  ncclResult_t r1 = ncclAllReduce(buf[1], buf[1], 1024, ncclFloat, ncclSum, c[1], NULL);
  CHECK_TRUE(r1 == ncclInProgress || r1 == ncclSuccess);
  CHECK_EQ_INT(nb_settle(c[0], 10), ncclSuccess);
  CHECK_EQ_INT(nb_settle(c[1], 10), ncclSuccess);
#ifndef TEST_REAL_GPU
  CHECK_EQ_INT(__atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED) - launches0, 2);
#endif
  /* Connected: the next ones launch at once. */
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclAllReduce(buf[r], buf[r], 1024, ncclFloat, ncclSum, c[r], NULL),
                 ncclSuccess);
  }
#ifndef TEST_REAL_GPU
  CHECK_EQ_INT(__atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED) - launches0, 4);
#endif
  /* Both settled before either is destroyed: on emulated devices no kernel moves data, so each
   * rank's proxy still waits for the steps of the network connections when the operations
   * count as done, and a peer's destroy closing them can surface as a network error: the
   * likely cause of this check failing now and then on a loaded machine (ASan, rank 1 got
   * ncclRemoteError after rank 0 was destroyed first). */
  for (int r = 0; r < 2; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  for (int r = 0; r < 2; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  /* Rank 1 of d never takes part: rank 0's group end connects until its abort cuts it short. */
  set_device(0);
  CHECK_EQ_INT(ncclAllReduce(buf[0], buf[0], 1024, ncclFloat, ncclSum, d[0], NULL),
               ncclInProgress);
  usleep(100 * 1000);
  CHECK_EQ_INT(ncclCommGetAsyncError(d[0], &st), ncclSuccess);
  CHECK_EQ_INT(st, ncclInProgress);
  const double t0 = now_s();
  CHECK_EQ_INT(ncclCommAbort(d[0]), ncclSuccess);
  CHECK_TRUE(now_s() - t0 < 5.0);
  CHECK_EQ_INT(ncclCommDestroy(d[1]), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(cudaFree(buf[r]), cudaSuccess);
  }
#ifndef TEST_REAL_GPU
  /* Memory accounting: what rank 0 of c reported once its ring was connected matches the ring
   * it describes (every pair through the network: per channel a send and a receive block of
   * KERN_NSLOTS Simple slots plus 3 counter lines, page-aligned, in pinned host memory). */
  static char text[1 << 20];
  FILE* f = fopen(log, "r");
  CHECK_TRUE(f != NULL);
  size_t got = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;
  text[got] = '\0';
  if (f != NULL) fclose(f);
  int nch = 0;
  unsigned slot_ll = 0, slot_ll128 = 0, slot_simple = 0;
  double gpu_mib = -1, host_mib = -1;
  for (char* line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
    const char* r0 = strstr(line, "rank 0: ");
    if (r0 == NULL) continue;
    if (strstr(line, "ring channels connected via NET") != NULL) {
      const char* sl = strstr(line, "slots LL ");
      CHECK_TRUE(sscanf(r0, "rank 0: %d ring", &nch) == 1 && sl != NULL &&
                 sscanf(sl, "slots LL %u LL128 %u Simple %u", &slot_ll, &slot_ll128,
                        &slot_simple) == 3);
    }
    if (strstr(line, "memory after its ring connections") != NULL)
      CHECK_TRUE(sscanf(r0, "rank 0: memory after its ring connections: %lf MiB of GPU memory, "
                            "%lf MiB",
                        &gpu_mib, &host_mib) == 2);
  }
  const double block =
      (double)(((uint64_t)KERN_NSLOTS * slot_simple + 3 * 128 + 4095) / 4096 * 4096);
  const double want = nch * 2 * block / 1048576.0;
  CHECK_MSG(nch > 0 && host_mib > want - 0.06 && host_mib < want + 0.06,
            "rank 0 reported %.1f MiB of host memory for %d channels of %u-byte slots (%.1f MiB "
            "expected)", host_mib, nch, slot_simple, want);
  CHECK_TRUE(gpu_mib >= 0);
#endif
  if (check_failures_ == 0) unlink(log);
}

#ifndef TEST_REAL_GPU
/* Launch batches (kernels.h: kern_coll_batch_t) through the public API, two ranks over the
 * network on emulated devices: a group of N equal all-reduces on one stream launches
 * ceil(N / KERN_COLL_BATCH_MAX) batches whose works come in call order; a collective on another
 * stream between others cuts them, and call order still holds. */
/* OneShot on emulated devices that map each other (p2p between every pair): its direct
 * connections are made with the ring, and the plan takes it for a small AllReduce (the TUNING
 * line says so), the ring for a large one; CHOIR_ONESHOT=0 (oneshot_off) makes none. */
static ncclResult_t os_by_bus_id(int64_t bus_id, int* d) {
  *d = -1;
  for (int dev = 0; dev < 8; dev++) {
    int64_t b = -1;
    if (cuda_bus_id(dev, &b) == ncclSuccess && b == bus_id) *d = dev;
  }
  return ncclSuccess;
}
static ncclResult_t os_can_access(int dev, int peer, int* can) {
  (void)dev, (void)peer;
  *can = 1;
  return ncclSuccess;
}
static const transport_cuda_ops_t os_cuda_ops = {
    nb_get_device, nb_set_device, os_by_bus_id, os_can_access, nb_enable_peer, nb_dev_alloc, free,
    nb_ipc_get,    nb_ipc_open,   nb_ipc_close, nb_host_register, nb_host_unregister};

/* on: CHOIR_ONESHOT; ctas: CHOIR_DIRECT_CTAS as set (NULL: unset), want_ctas: the direct CTAs
 * the INIT line must report (CHOIR_DIRECT_CTAS within 1..16; 0 without OneShot). */
static void oneshot_run(int on, const char* ctas, int want_ctas) {
  char log[] = "/tmp/choir-test-oneshot-XXXXXX";
  const int log_fd = mkstemp(log);
  CHECK_TRUE(log_fd >= 0);
  if (log_fd >= 0) close(log_fd);
  setenv("CHOIR_ONESHOT", on ? "1" : "0", 1);
  if (ctas != NULL) setenv("CHOIR_DIRECT_CTAS", ctas, 1);
  /* With two ranks the ring's AllGather and ReduceScatter are one step too (the model keeps the
   * ring): forced, so that the plan and the launch take OneShot for them. */
  if (on) setenv("NCCL_ALGO", "allgather:oneshot;reducescatter:oneshot", 1);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "TUNING,INIT", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  transport_set_cuda_ops(&os_cuda_ops);
  enum { N = 2 };
  ncclComm_t c[N];
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommInitRankConfig(&c[r], N, id, r, &cfg), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclInProgress);
  for (int r = 0; r < N; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  const size_t big = (size_t)16 << 20; /* floats: 64 MiB */
  float* buf[N] = {NULL, NULL};
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(cudaMalloc((void**)&buf[r], sizeof(float) * big), cudaSuccess);
  }
  /* Both ranks in one group: the first collective connects the ring (and OneShot's). */
  for (size_t count = 16; count <= big; count *= big / 16) {
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < N; r++) {
      set_device(r);
      CHECK_EQ_INT(ncclAllReduce(buf[r], buf[r], count, ncclFloat, ncclSum, c[r], NULL),
                   ncclSuccess);
    }
    const ncclResult_t res = ncclGroupEnd();
    CHECK_TRUE(res == ncclSuccess || res == ncclInProgress);
    for (int r = 0; r < N; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  }
  /* A small AllGather and ReduceScatter (16 floats per rank, in place): OneShot when forced. */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclAllGather(buf[r] + r * 16, buf[r], 16, ncclFloat, c[r], NULL), ncclSuccess);
    CHECK_EQ_INT(ncclReduceScatter(buf[r], buf[r] + r * 16, 16, ncclFloat, ncclSum, c[r], NULL),
                 ncclSuccess);
  }
  {
    const ncclResult_t res = ncclGroupEnd();
    CHECK_TRUE(res == ncclSuccess || res == ncclInProgress);
    for (int r = 0; r < N; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  }
  /* A group of 5 small alike AllReduces per rank: one launch of one OneShot run, whose works
   * the launcher numbers 5, 4, 3, 2, 1 (kernels.h: run, the works of the run from each on). */
  if (on) {
    enum { G = 5 };
    const int works0 = fake_cudart.batch_works;
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    for (int r = 0; r < N; r++) {
      set_device(r);
      for (int i = 0; i < G; i++)
        CHECK_EQ_INT(ncclAllReduce(buf[r] + i * 16, buf[r] + i * 16, 16, ncclFloat, ncclSum,
                                   c[r], NULL), ncclSuccess);
    }
    const ncclResult_t res = ncclGroupEnd();
    CHECK_TRUE(res == ncclSuccess || res == ncclInProgress);
    for (int r = 0; r < N; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
    CHECK_EQ_INT(fake_cudart.batch_works - works0, N * G);
    for (int k = 0; k < N * G && works0 + N * G <= FAKE_WORKS_MAX; k++)
      CHECK_MSG(fake_cudart.batch_algo[works0 + k] == KERN_ALGO_ONESHOT &&
                    fake_cudart.batch_run[works0 + k] == G - k % G,
                "work %d of the group: algo %d run %d, want OneShot (%d) run %d", k,
                fake_cudart.batch_algo[works0 + k], fake_cudart.batch_run[works0 + k],
                KERN_ALGO_ONESHOT, G - k % G);
  }
  for (int r = 0; r < N; r++) CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(cudaFree(buf[r]), cudaSuccess);
  }
  static char text[1 << 20];
  FILE* f = fopen(log, "r");
  CHECK_TRUE(f != NULL);
  size_t got = f != NULL ? fread(text, 1, sizeof(text) - 1, f) : 0;
  text[got] = '\0';
  if (f != NULL) fclose(f);
  unlink(log);
  char want_line[64];
  snprintf(want_line, sizeof(want_line), ", %d direct CTAs (OneShot, TwoShot)", want_ctas);
  CHECK_MSG(strstr(text, want_line) != NULL,
            "CHOIR_ONESHOT=%d CHOIR_DIRECT_CTAS=%s: no INIT line with '%s' in:\n%.2000s", on,
            ctas ? ctas : "(unset)", want_line, text);
  const char* small = strstr(text, "TUNE: AllReduce 64 bytes: ");
  const char* large = strstr(text, "TUNE: AllReduce 67108864 bytes: ");
  CHECK_MSG(small != NULL && large != NULL, "TUNING lines missing:\n%s", text);
  if (small != NULL)
    CHECK_MSG(strncmp(small + strlen("TUNE: AllReduce 64 bytes: "), on ? "OneShot/LL" : "Ring/",
                      on ? 10 : 5) == 0,
              "64 bytes, CHOIR_ONESHOT=%d: %.120s", on, small);
  if (large != NULL)
    CHECK_MSG(strncmp(large + strlen("TUNE: AllReduce 67108864 bytes: "), "Ring/", 5) == 0,
              "64 MiB: %.120s", large);
  /* Two in a group: "(pipelined)" before the choice. */
  const char* const small_ag_rs[] = {"TUNE: AllGather 128 bytes (pipelined): ",
                                     "TUNE: ReduceScatter 128 bytes (pipelined): "};
  for (int k = 0; k < 2; k++) {
    const char* line = strstr(text, small_ag_rs[k]);
    CHECK_MSG(line != NULL, "no line '%s' in:\n%s", small_ag_rs[k], text);
    if (line != NULL)
      CHECK_MSG(strncmp(line + strlen(small_ag_rs[k]), on ? "OneShot/LL" : "Ring/",
                        on ? 10 : 5) == 0,
                "CHOIR_ONESHOT=%d: %.120s", on, line);
  }
}
static void case_oneshot_on(void) { oneshot_run(1, NULL, 16); }
static void case_oneshot_off(void) { oneshot_run(0, NULL, 0); }
static void case_oneshot_ctas(void) { oneshot_run(1, "3", 3); }
static void case_oneshot_ctas_most(void) { oneshot_run(1, "99", 16); }

static void case_group_batches(void) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  transport_set_cuda_ops(&nb_cuda_ops);
  enum { N = 90, E = 16 }; /* N all-reduces of E floats each */
  ncclComm_t c[2];
  nb_pair(c);
  float* buf[2] = {NULL, NULL};
  cudaStream_t s1[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(cudaMalloc((void**)&buf[r], sizeof(float) * N * E), cudaSuccess);
    CHECK_EQ_INT(cudaStreamCreateWithFlags(&s1[r], cudaStreamNonBlocking), cudaSuccess);
    /* The first collective connects the ring (in the background). */
    ncclResult_t res = ncclAllReduce(buf[r], buf[r], E, ncclFloat, ncclSum, c[r], NULL);
    CHECK_TRUE(res == ncclInProgress || res == ncclSuccess);
  }
  for (int r = 0; r < 2; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  /* N alike per rank: 2 batches (64, 26) each, in call order. */
  const int launches0 = __atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED);
  const int batches0 = fake_cudart.batches, works0 = fake_cudart.batch_works;
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < N; i++)
      CHECK_EQ_INT(ncclAllReduce(buf[r] + i * E, buf[r] + i * E, E, ncclFloat, ncclSum, c[r],
                                 NULL), ncclSuccess);
    const ncclResult_t res = ncclGroupEnd();
    CHECK_TRUE(res == ncclSuccess || res == ncclInProgress);
    CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  }
  const int per_rank = (N + KERN_COLL_BATCH_MAX - 1) / KERN_COLL_BATCH_MAX;
  CHECK_EQ_INT(__atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED) - launches0, 2 * per_rank);
  CHECK_EQ_INT(fake_cudart.batches - batches0, 2 * per_rank);
  CHECK_EQ_INT(fake_cudart.batch_works - works0, 2 * N);
  for (int r = 0; r < 2 && works0 + 2 * N <= FAKE_WORKS_MAX; r++)
    for (int i = 0; i < N; i++)
      CHECK_MSG(fake_cudart.batch_recv[works0 + r * N + i] == (void*)(buf[r] + i * E),
                "rank %d: work %d of the group is not all-reduce %d", r, i, i);
  /* Placement (enqueue_plan_spread_ring): both ranks put each work on the same channels, within
   * the ring's 64 at most; works of fewer channels than the ring has sit side by side, each
   * from where the one before ended in the group's call order (across its launches), wrapping
   * to 0 (the ring's channels, L: the end of the furthest work). */
  if (works0 + 2 * N <= FAKE_WORKS_MAX) {
    int grid = 0;
    for (int i = 0; i < N; i++) {
      const int w0 = works0 + i, w1 = works0 + N + i;
      CHECK_MSG(fake_cudart.batch_ch0[w0] == fake_cudart.batch_ch0[w1] &&
                    fake_cudart.batch_nch[w0] == fake_cudart.batch_nch[w1],
                "work %d: rank 0 on channels %d+%d, rank 1 on %d+%d", i,
                fake_cudart.batch_ch0[w0], fake_cudart.batch_nch[w0], fake_cudart.batch_ch0[w1],
                fake_cudart.batch_nch[w1]);
      CHECK_TRUE(fake_cudart.batch_algo[w0] == NCCL_ALGO_RING && fake_cudart.batch_nch[w0] >= 1);
      const int end = fake_cudart.batch_ch0[w0] + fake_cudart.batch_nch[w0];
      CHECK_TRUE(end <= KERN_MAX_CHANNELS);
      if (end > grid) grid = end;
    }
    int next = 0;
    for (int i = 0; i < N; i++) {
      const int w0 = works0 + i, nch = fake_cudart.batch_nch[w0];
      const int want = nch >= grid ? 0 : next + nch > grid ? 0 : next;
      CHECK_MSG(fake_cudart.batch_ch0[w0] == want, "work %d (%d channels) starts at %d, want %d "
                "(ring of %d channels)", i, nch, fake_cudart.batch_ch0[w0], want, grid);
      if (nch < grid) next = want + nch;
    }
    printf("  %d works: %d channel(s) each, over %d channels\n", N, fake_cudart.batch_nch[works0],
           grid);
  }
  /* Streams: 3 on the default stream, 2 on s1, 3 on the default again: one launch per rank, on
   * the default stream (the group's first), s1 joined before it and after it (NCCL's rule for a
   * group on several streams): at least two waits per rank. The streams never cut a batch, so
   * ranks that use streams differently still cut the same ones. */
  const int launches1 = __atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED);
  const int waits1 = __atomic_load_n(&fake_cudart.stream_waits, __ATOMIC_RELAXED);
  const int works1 = fake_cudart.batch_works;
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < 8; i++)
      CHECK_EQ_INT(ncclAllReduce(buf[r] + i * E, buf[r] + i * E, E, ncclFloat, ncclSum, c[r],
                                 i == 3 || i == 4 ? s1[r] : NULL), ncclSuccess);
    const ncclResult_t res = ncclGroupEnd();
    CHECK_TRUE(res == ncclSuccess || res == ncclInProgress);
    CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
  }
  CHECK_EQ_INT(__atomic_load_n(&fake_cudart.launches, __ATOMIC_RELAXED) - launches1, 2 * 1);
  CHECK_TRUE(__atomic_load_n(&fake_cudart.stream_waits, __ATOMIC_RELAXED) - waits1 >= 2 * 2);
  CHECK_EQ_INT(fake_cudart.batch_works - works1, 2 * 8);
  for (int r = 0; r < 2 && works1 + 16 <= FAKE_WORKS_MAX; r++)
    for (int i = 0; i < 8; i++)
      CHECK_TRUE(fake_cudart.batch_recv[works1 + r * 8 + i] == (void*)(buf[r] + i * E));
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
    CHECK_EQ_INT(cudaStreamDestroy(s1[r]), cudaSuccess);
    CHECK_EQ_INT(cudaFree(buf[r]), cudaSuccess);
  }
}
#endif

#ifndef TEST_REAL_GPU
/* Tree channels are connected when a plan first picks the tree, not with the ring: two ranks
 * over the network on emulated devices with NCCL_ALGO=allreduce:tree (which makes the tree
 * possible on one host). A Broadcast connects the ring only; the first AllReduce (a tree plan)
 * connects the tree, once; a later one connects nothing. The INIT lines say when. */
static int log_count(const char* log, const char* what) {
  static char text[1 << 20];
  FILE* f = fopen(log, "r");
  if (f == NULL) return -1;
  const size_t got = fread(text, 1, sizeof(text) - 1, f);
  text[got] = '\0';
  fclose(f);
  int n = 0;
  for (const char* at = strstr(text, what); at != NULL; at = strstr(at + 1, what)) n++;
  return n;
}

static void tree_lazy(const char* proto) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  if (proto != NULL) setenv("NCCL_PROTO", proto, 1);
  char log[] = "/tmp/choir-test-tree-XXXXXX";
  init_log_to(log);
  transport_set_cuda_ops(&nb_cuda_ops);
  ncclComm_t c[2];
  nb_pair(c);
  enum { E = 256 };
  float* buf[2] = {NULL, NULL};
  /* step 0: a Broadcast; 1 and 2: an AllReduce each. */
  for (int step = 0; step < 3; step++) {
    const int works0 = fake_cudart.batch_works;
    for (int r = 0; r < 2; r++) {
      set_device(r);
      if (step == 0) CHECK_EQ_INT(cudaMalloc((void**)&buf[r], sizeof(float) * E), cudaSuccess);
      const ncclResult_t res =
          step == 0 ? ncclBroadcast(buf[r], buf[r], E, ncclFloat, 0, c[r], NULL)
                    : ncclAllReduce(buf[r], buf[r], E, ncclFloat, ncclSum, c[r], NULL);
      CHECK_TRUE(res == ncclInProgress || res == ncclSuccess);
    }
    for (int r = 0; r < 2; r++) CHECK_EQ_INT(nb_settle(c[r], 10), ncclSuccess);
    CHECK_EQ_INT(fake_cudart.batch_works - works0, 2);
    for (int w = works0; w < works0 + 2 && w < FAKE_WORKS_MAX; w++)
      CHECK_EQ_INT(fake_cudart.batch_algo[w], step == 0 ? NCCL_ALGO_RING : NCCL_ALGO_TREE);
    CHECK_EQ_INT(log_count(log, "ring channels connected"), 2);
    CHECK_EQ_INT(log_count(log, "tree channels connected ("), step == 0 ? 0 : 2);
    CHECK_EQ_INT(log_count(log, "memory after its tree connections"), step == 0 ? 0 : 2);
  }
  for (int r = 0; r < 2; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
    CHECK_EQ_INT(cudaFree(buf[r]), cudaSuccess);
  }
  if (check_failures_ == 0) unlink(log);
}

static void case_tree_lazy(void) { tree_lazy(NULL); }

/* LL128 forced: over the network it lives in the Simple buffer, with Simple's slot, which the
 * ring's connections the tree reuses have; the tree must ask for that slot, not LL128's own. */
static void case_tree_lazy_ll128(void) { tree_lazy("LL128"); }
#endif

static void case_nonblocking(void) {
  int N = ndev < 3 ? ndev : 3;
  ncclComm_t c[3], s[3];
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  cfg.commName = "nb";
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommInitRankConfig(&c[r], N, id, r, &cfg), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclInProgress);
  for (int r = 0; r < N; r++) {
    ncclResult_t st = ncclInProgress;
    double t0 = now_s();
    while (st == ncclInProgress && now_s() - t0 < 10) {
      CHECK_EQ_INT(ncclCommGetAsyncError(c[r], &st), ncclSuccess);
      if (st == ncclInProgress) usleep(1000);
    }
    CHECK_EQ_INT(st, ncclSuccess);
    expect_comm(c[r], r, N, r);
  }
  /* Split of a non-blocking parent: InProgress, then ready (the child inherits blocking=0). */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) CHECK_EQ_INT(ncclCommSplit(c[r], 0, r, &s[r], NULL), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclInProgress);
  for (int r = 0; r < N; r++) {
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
      CHECK_EQ_INT(ncclCommGetAsyncError(s[r], &st), ncclSuccess);
      usleep(500);
    }
    CHECK_EQ_INT(st, ncclSuccess);
    expect_comm(s[r], r, N, r);
    CHECK_EQ_INT(ncclCommDestroy(s[r]), ncclSuccess);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
}

/* A single non-blocking rank outside a group returns InProgress at once. */
static void case_nonblocking_single(void) {
  ncclComm_t c = NULL;
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  ncclResult_t res = ncclCommInitRankConfig(&c, 1, id, 0, &cfg);
  CHECK_TRUE(res == ncclInProgress || res == ncclSuccess);
  CHECK_TRUE(c != NULL);
  ncclResult_t st = ncclInProgress;
  while (st == ncclInProgress) ncclCommGetAsyncError(c, &st);
  CHECK_EQ_INT(st, ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* Abort while the other rank never comes: returns promptly, frees everything. */
static void case_abort_during_init(void) {
  ncclComm_t c = NULL;
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = 0;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 2, id, 0, &cfg), ncclInProgress);
  usleep(50 * 1000);
  ncclResult_t st = ncclSuccess;
  CHECK_EQ_INT(ncclCommGetAsyncError(c, &st), ncclSuccess);
  CHECK_EQ_INT(st, ncclInProgress);
  double t0 = now_s();
  CHECK_EQ_INT(ncclCommAbort(c), ncclSuccess);
  CHECK_TRUE(now_s() - t0 < 2.0);
}

/* ---- configuration ---- */
static void case_config(void) {
  ncclComm_t c = NULL;
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.magic = 0;
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &cfg), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "NCCL_CONFIG_INITIALIZER");
  ncclConfig_t b = NCCL_CONFIG_INITIALIZER;
  b.blocking = 5;
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &b), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "config.blocking = 5");
  ncclConfig_t m = NCCL_CONFIG_INITIALIZER;
  m.minCTAs = 8;
  m.maxCTAs = 4;
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &m), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "minCTAs = 8 is larger than config.maxCTAs = 4");
  ncclConfig_t p = NCCL_CONFIG_INITIALIZER;
  p.CTAPolicy = 9;
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &p), ncclInvalidArgument);
  CHECK_TRUE(c == NULL);
  /* A caller with an older header: fields it did not have are ignored, even if set. */
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.version = NCCL_VERSION(2, 16, 0);
  old.size = offsetof(ncclConfig_t, splitShare);
  old.minCTAs = 99; /* garbage from the caller's point of view */
  CHECK_EQ_INT(ncclCommInitRankConfig(&c, 1, id, 0, &old), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  /* The environment overrides the configuration. */
  ncclGetUniqueId(&id);
  setenv("NCCL_COMM_BLOCKING", "0", 1);
  ncclConfig_t nb = NCCL_CONFIG_INITIALIZER;
  nb.blocking = 1;
  ncclResult_t res = ncclCommInitRankConfig(&c, 1, id, 0, &nb);
  CHECK_TRUE(res == ncclInProgress || res == ncclSuccess);
  ncclResult_t st = ncclInProgress;
  while (st == ncclInProgress) ncclCommGetAsyncError(c, &st);
  CHECK_EQ_INT(st, ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* ---- revoke ---- */
static void case_revoke(void) {
  ncclComm_t c = NULL, s = NULL;
  ncclUniqueId id;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  CHECK_EQ_INT(ncclCommRevoke(c, 1), ncclInvalidArgument);
  CHECK_EQ_INT(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, c, NULL), ncclInvalidUsage);
  CHECK_CONTAINS(ncclGetLastError(c), "revoked");
  CHECK_EQ_INT(ncclCommFinalize(c), ncclInvalidUsage);
  CHECK_EQ_INT(ncclCommSplit(c, 0, 0, &s, NULL), ncclSuccess); /* allowed after revoke */
  expect_comm(s, 0, 1, 0);
  CHECK_EQ_INT(ncclCommDestroy(s), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* ---- scalable init: several ids ---- */
static void case_scalable(void) {
  int N = ndev, NID = ndev < 2 ? 1 : 2;
  ncclUniqueId ids[2];
  for (int i = 0; i < NID; i++) CHECK_EQ_INT(ncclGetUniqueId(&ids[i]), ncclSuccess);
  ncclComm_t c[64];
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    set_device(r);
    CHECK_EQ_INT(ncclCommInitRankScalable(&c[r], N, r, NID, ids, NULL), ncclSuccess);
  }
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < N; r++) {
    expect_comm(c[r], r, N, r);
    CHECK_EQ_INT(ncclCommDestroy(c[r]), ncclSuccess);
  }
}

/* ---- misuse ---- */
static void case_misuse(void) {
  int v;
  char junk[256] = {0};
  CHECK_EQ_INT(ncclCommCount((ncclComm_t)junk, &v), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "not a valid communicator");
  CHECK_EQ_INT(ncclCommCount(NULL, &v), ncclInvalidArgument);
  CHECK_EQ_INT(ncclCommShrink((ncclComm_t)junk, NULL, 0, (ncclComm_t*)junk, NULL, 0),
               ncclInvalidArgument);
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "--rank") == 0)
    return rank_main(argv[2], argv[3], argv[4], argv[5]);
#ifdef TEST_REAL_GPU
  /* Count the GPUs in a child: CUDA must not be initialized in this process before it forks. */
  int count = 0;
  pid_t pid = fork();
  if (pid == 0) {
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) printf("no CUDA device: %s; skipping\n", cudaGetErrorString(e));
    fflush(stdout);
    _exit(e == cudaSuccess ? (count > 64 ? 64 : count) : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  count = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  if (count == 0) {
    printf("no CUDA device; skipping\n");
    return CHECK_SKIP;
  }
  ndev = ndev_total = count > 64 ? 64 : count;
  const char* want = getenv("CHOIR_TEST_NDEV"); /* run on fewer GPUs than the machine has */
  if (want != NULL && atoi(want) > 0 && atoi(want) < ndev) ndev = atoi(want);
  printf("comm: %d GPU(s)\n", ndev);
#endif
  setenv("NCCL_CONF_FILE", "/nonexistent", 1);
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "20", 1);
  fork_case("single", case_single);
  if (ndev >= 2) fork_case("procs_2", case_procs_2);
  if (ndev > 2) fork_case("procs_all", case_procs_all);
  if (ndev >= 2 && getenv("CHOIR_PLUGIN_DIR") != NULL) fork_case("procs_hosts", case_procs_hosts);
  fork_case("threads", case_threads);
  fork_case("group_and_init_all", case_group_and_init_all);
  fork_case("windows_group", case_windows_group);
  if (ndev >= 2) fork_case("duplicate_gpu", case_duplicate_gpu);
  fork_case("shared_gpu", case_shared_gpu);
#ifndef TEST_REAL_GPU
  fork_case("shared_gpu_too_many", case_shared_gpu_too_many);
  fork_case("one_rank_data_path", case_one_rank_data_path);
  fork_case("shared_gpu_procs", case_shared_gpu_procs);
  fork_case("shared_gpu_queues", case_shared_gpu_queues);
#endif
  fork_case("nonblocking", case_nonblocking);
  fork_case("nonblocking_single", case_nonblocking_single);
  if (ndev >= 2 && getenv("CHOIR_PLUGIN_DIR") != NULL)
    fork_case("nonblocking_ops", case_nonblocking_ops);
#ifndef TEST_REAL_GPU
  if (ndev >= 2 && getenv("CHOIR_PLUGIN_DIR") != NULL) {
    fork_case("group_batches", case_group_batches);
    fork_case("tree_lazy", case_tree_lazy);
    fork_case("tree_lazy_ll128", case_tree_lazy_ll128);
  }
  if (ndev >= 2) {
    fork_case("oneshot_on", case_oneshot_on);
    fork_case("oneshot_off", case_oneshot_off);
    fork_case("oneshot_ctas", case_oneshot_ctas);
    fork_case("oneshot_ctas_most", case_oneshot_ctas_most);
  }
#endif
  fork_case("abort_during_init", case_abort_during_init);
  fork_case("config", case_config);
  fork_case("revoke", case_revoke);
  fork_case("scalable", case_scalable);
  fork_case("misuse", case_misuse);
  if (ndev >= 2) {
    fork_case("fault_kill", case_fault_kill);
    fork_case("fault_destroy", case_fault_destroy);
    fork_case("fault_exit", case_fault_exit);
  }
  return check_finish(ndev == 8 ? "comm" : "comm-gpu");
}
