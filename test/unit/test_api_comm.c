/*
 * The public API on a ready communicator (emulated devices: fake_cuda.c, fake_cudart.c), for the
 * checks that test_api.c cannot reach without one:
 *   datatype  every call that takes a datatype rejects one outside ncclDataType_t with
 *             ncclInvalidArgument and a message naming it (the check comes after the
 *             communicator's, so a NULL communicator never reaches it)
 *   missing   the functions not built yet (README "missing") return ncclInvalidUsage, and
 *             ncclGetLastError says that they are not implemented
 *   register  ncclCommRegister / ncclCommDeregister as NCCL documents them: a buffer inside a
 *             registered range shares its handle, a handle is released once per registration,
 *             a foreign or released handle is refused with a message, NULL handles do nothing,
 *             NCCL_LOCAL_REGISTER=0 gives NULL handles
 *   version   NCCL_DEBUG=VERSION prints the version banner once, and nothing else, however many
 *             communicators are created and whatever goes wrong meanwhile
 *   simulate  ncclGroupSimulateEnd estimates a positive time for every operation, growing with its
 *             size, and launches nothing
 * Meson also builds this program with planted bugs (the datatype check disabled, a zero
 * estimate) and expects the matching case to fail: see test/unit/meson.build.
 *
 *   test-api-comm [CASE]   CASE: one of the above (default: all)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api_devapi.h"
#include "base.h"
#include "fork_case.h"
#include "nccl.h"

#include "fake_cudart.h"

/* A communicator of one rank on emulated device 0. */
static ncclComm_t one_rank(void) {
  ncclUniqueId id;
  ncclComm_t c = NULL;
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  CHECK_EQ_INT(cuda_set_device(0), ncclSuccess);
  CHECK_EQ_INT(ncclCommInitRank(&c, 1, id, 0), ncclSuccess);
  return c;
}

/* ---- datatype ------------------------------------------------------------------------------- */

static void expect_bad_type(const char* f, ncclResult_t got, int type) {
  char want[128];
  snprintf(want, sizeof(want), "%s: datatype %d is not an ncclDataType_t", f, type);
  CHECK_MSG(got == ncclInvalidArgument, "%s with datatype %d returned %d, want %d", f, type,
            (int)got, (int)ncclInvalidArgument);
  CHECK_MSG(strstr(ncclGetLastError(NULL), want) != NULL,
            "%s with datatype %d: last error \"%s\" does not contain \"%s\"", f, type,
            ncclGetLastError(NULL), want);
}

static void case_datatype(void) {
  ncclComm_t c = one_rank();
  if (c == NULL) return;
  /* Buffers are never touched: each call must stop at the datatype. */
  char a[64], b[64];
  float two = 2.0f;
  const int bad[] = {-1, (int)ncclNumTypes, 255, 1 << 20};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    const int t = bad[i];
    const ncclDataType_t dt = (ncclDataType_t)t;
    expect_bad_type("ncclAllReduce", ncclAllReduce(a, b, 4, dt, ncclSum, c, NULL), t);
    expect_bad_type("ncclReduce", ncclReduce(a, b, 4, dt, ncclSum, 0, c, NULL), t);
    expect_bad_type("ncclBcast", ncclBcast(a, 4, dt, 0, c, NULL), t);
    expect_bad_type("ncclBroadcast", ncclBroadcast(a, b, 4, dt, 0, c, NULL), t);
    expect_bad_type("ncclReduceScatter", ncclReduceScatter(a, b, 4, dt, ncclSum, c, NULL), t);
    expect_bad_type("ncclAllGather", ncclAllGather(a, b, 4, dt, c, NULL), t);
    expect_bad_type("ncclAlltoAll", ncclAlltoAll(a, b, 4, dt, c, NULL), t);
    expect_bad_type("ncclGather", ncclGather(a, b, 4, dt, 0, c, NULL), t);
    expect_bad_type("ncclScatter", ncclScatter(a, b, 4, dt, 0, c, NULL), t);
    expect_bad_type("ncclSend", ncclSend(a, 4, dt, 0, c, NULL), t);
    expect_bad_type("ncclRecv", ncclRecv(b, 4, dt, 0, c, NULL), t);
    ncclRedOp_t op = ncclSum;
    expect_bad_type("ncclRedOpCreatePreMulSum",
                    ncclRedOpCreatePreMulSum(&op, &two, dt, ncclScalarHostImmediate, c), t);
  }
  /* The same calls with the last valid type pass the check (count 0: nothing to move). */
  CHECK_EQ_INT(ncclAllReduce(a, b, 0, ncclFloat8e5m2, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclBroadcast(a, b, 0, ncclInt8, 0, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* ---- missing -------------------------------------------------------------------------------- */

/* Declared here as in core/api/api_comm.c: their argument types live in NCCL's device headers. */
struct ncclDevCommRequirements;
struct ncclDevComm;
ncclResult_t ncclDevCommCreate(ncclComm_t comm, const struct ncclDevCommRequirements* reqs,
                               struct ncclDevComm* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const struct ncclDevComm* devComm);

/* Windows on emulated devices: every buffer the fake CUDA can give is refused (cuMem is the
 * GPU suite's), each with its reason, the flags checked, and the communicator unharmed. */
static void expect_win_refused(ncclResult_t got, ncclResult_t want, const char* msg) {
  CHECK_MSG(got == want, "ncclCommWindowRegister returned %d, want %d", (int)got, (int)want);
  CHECK_MSG(strstr(ncclGetLastError(NULL), msg) != NULL, "last error \"%s\" lacks \"%s\"",
            ncclGetLastError(NULL), msg);
}

static void case_window_refusals(void) {
  ncclComm_t c = one_rank();
  if (c == NULL) return;
  char buf[256];
  ncclWindow_t win = NULL;
  expect_win_refused(ncclCommWindowRegister(c, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT),
                     ncclInvalidArgument, "not inside an ncclMemAlloc allocation");
  CHECK_TRUE(win == NULL);
  expect_win_refused(pncclCommWindowRegister(c, buf, 0, &win, NCCL_WIN_COLL_SYMMETRIC),
                     ncclInvalidArgument, "size of 0");
  expect_win_refused(ncclCommWindowRegister(c, buf, sizeof(buf), &win, 0x40),
                     ncclInvalidArgument, "winFlags 0x40");
  /* cudaMalloc memory (NCCL_CUMEM_ENABLE=0) is not exportable as a descriptor. */
  setenv("NCCL_CUMEM_ENABLE", "0", 1);
  void* m = NULL;
  CHECK_EQ_INT(ncclMemAlloc(&m, 1 << 20), ncclSuccess);
  expect_win_refused(ncclCommWindowRegister(c, m, 1 << 20, &win, NCCL_WIN_DEFAULT),
                     ncclInvalidArgument, "NCCL_CUMEM_ENABLE=0");
  CHECK_EQ_INT(ncclMemFree(m), ncclSuccess);
  /* Inside a group the refusal comes at the group's end. */
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclCommWindowRegister(c, buf, sizeof(buf), &win, NCCL_WIN_DEFAULT), ncclSuccess);
  expect_win_refused(ncclGroupEnd(), ncclInvalidArgument, "not inside an ncclMemAlloc");
  CHECK_TRUE(win == NULL);
  /* Deregistration: NULL is nothing; a pointer that is no window is refused. */
  CHECK_EQ_INT(ncclCommWindowDeregister(c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclCommWindowDeregister(c, (ncclWindow_t)buf), ncclInvalidArgument);
  CHECK_CONTAINS(ncclGetLastError(NULL), "not a registered window of this communicator");
  /* The communicator is unharmed. */
  int n = 0;
  CHECK_EQ_INT(ncclCommCount(c, &n), ncclSuccess);
  CHECK_EQ_INT(n, 1);
  char a[16], b[16];
  CHECK_EQ_INT(ncclAllReduce(a, b, 0, ncclFloat, ncclSum, c, NULL), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* ---- register ------------------------------------------------------------------------------- */

static void expect_refused(const char* what, ncclResult_t got, ncclResult_t want, const char* msg) {
  CHECK_MSG(got == want, "%s returned %d, want %d", what, (int)got, (int)want);
  CHECK_MSG(strstr(ncclGetLastError(NULL), msg) != NULL, "%s: last error \"%s\" lacks \"%s\"",
            what, ncclGetLastError(NULL), msg);
}

static void case_register(void) {
  ncclComm_t c = one_rank(), d = one_rank();
  if (c == NULL || d == NULL) return;
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  char* a = aligned_alloc(page, 8 * page);
  char* b = aligned_alloc(page, 2 * page);
  CHECK_TRUE(a != NULL && b != NULL);
  void *h1 = NULL, *h2 = NULL, *h3 = NULL, *h4 = NULL, *hd = NULL;
  CHECK_EQ_INT(ncclCommRegister(c, a + 100, 4 * page, &h1), ncclSuccess); /* pages 0..4 */
  CHECK_TRUE(h1 != NULL);
  /* Inside those pages (rounded out): the same entry, one more reference. */
  CHECK_EQ_INT(ncclCommRegister(c, a, page, &h2), ncclSuccess);
  CHECK_TRUE(h2 == h1);
  CHECK_EQ_INT(pncclCommRegister(c, a + 4 * page + 1, 10, &h2), ncclSuccess);
  CHECK_TRUE(h2 == h1);
  /* Past them, or another buffer: entries of their own. */
  CHECK_EQ_INT(ncclCommRegister(c, a, 6 * page, &h3), ncclSuccess);
  CHECK_TRUE(h3 != NULL && h3 != h1);
  CHECK_EQ_INT(ncclCommRegister(c, b, 2 * page, &h4), ncclSuccess);
  CHECK_TRUE(h4 != NULL && h4 != h1 && h4 != h3);
  /* Another communicator has its own registry: its handle is not c's, nor c's its. */
  CHECK_EQ_INT(ncclCommRegister(d, b, 2 * page, &hd), ncclSuccess);
  CHECK_TRUE(hd != NULL && hd != h4);
  expect_refused("ncclCommDeregister(c, d's handle)", ncclCommDeregister(c, hd), ncclInvalidUsage,
                 "was not returned by ncclCommRegister on this communicator");
  expect_refused("ncclCommDeregister(d, c's handle)", ncclCommDeregister(d, h4), ncclInvalidUsage,
                 "was not returned by ncclCommRegister on this communicator");
  /* h1 was returned three times: three releases, then it is gone. */
  for (int i = 0; i < 3; i++) CHECK_EQ_INT(ncclCommDeregister(c, h1), ncclSuccess);
  expect_refused("ncclCommDeregister of a released handle", pncclCommDeregister(c, h1),
                 ncclInvalidUsage, "or was released already");
  /* The other entries are unharmed; a buffer in the released pages gets an entry again. */
  void* h5 = NULL;
  CHECK_EQ_INT(ncclCommRegister(c, a + page, page, &h5), ncclSuccess);
  CHECK_TRUE(h5 == h3); /* inside h3's six pages */
  CHECK_EQ_INT(ncclCommDeregister(c, h5), ncclSuccess);
  CHECK_EQ_INT(ncclCommDeregister(c, h3), ncclSuccess);
  CHECK_EQ_INT(ncclCommDeregister(c, h4), ncclSuccess);
  /* NULL handle: nothing to release. A pointer that is no handle at all: refused. */
  CHECK_EQ_INT(ncclCommDeregister(c, NULL), ncclSuccess);
  expect_refused("ncclCommDeregister of a buffer pointer", ncclCommDeregister(c, a),
                 ncclInvalidUsage, "was not returned by ncclCommRegister");
  /* Bad arguments: named, and the handle NULL. */
  void* h6 = (void*)1;
  expect_refused("ncclCommRegister(buff NULL)", ncclCommRegister(c, NULL, 64, &h6),
                 ncclInvalidArgument, "buff is NULL");
  CHECK_TRUE(h6 == NULL);
  CHECK_EQ_INT(ncclCommRegister(c, a, 64, NULL), ncclInvalidArgument);
  h6 = (void*)1;
  expect_refused("ncclCommRegister past the address space",
                 ncclCommRegister(c, (void*)(UINTPTR_MAX - 64), 4096, &h6), ncclInvalidArgument,
                 "past the end of the address space");
  CHECK_TRUE(h6 == NULL);
  /* A registration left at destroy goes with the communicator (ASan sees any leak). */
  CHECK_EQ_INT(ncclCommRegister(c, b, 16, &h6), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  CHECK_EQ_INT(ncclCommDeregister(d, hd), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(d), ncclSuccess);
  free(a);
  free(b);
}

/* NCCL_LOCAL_REGISTER=0: registration succeeds with a NULL handle, which deregisters as nothing. */
static void case_register_off(void) {
  setenv("NCCL_LOCAL_REGISTER", "0", 1);
  ncclComm_t c = one_rank();
  if (c == NULL) return;
  char buf[256];
  void* h = (void*)1;
  CHECK_EQ_INT(ncclCommRegister(c, buf, sizeof(buf), &h), ncclSuccess);
  CHECK_TRUE(h == NULL);
  CHECK_EQ_INT(ncclCommDeregister(c, h), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* ---- version -------------------------------------------------------------------------------- */

/* The child of case_version: creates communicators, makes mistakes, with NCCL_DEBUG=VERSION and
 * its stdout and stderr in one pipe. Exits 0 when every call returned what it should. */
static int version_child(void) {
  int bad = 0;
  ncclUniqueId id;
  ncclComm_t c = NULL, all[2] = {NULL, NULL};
  bad += ncclGetUniqueId(&id) != ncclSuccess;
  bad += cuda_set_device(0) != ncclSuccess;
  bad += ncclCommInitRank(&c, 1, id, 0) != ncclSuccess;
  int devs[2] = {1, 2};
  bad += ncclCommInitAll(all, 2, devs) != ncclSuccess;
  /* WARN-level events: not printed at level VERSION. */
  bad += ncclAllReduce(NULL, NULL, 4, ncclFloat, ncclSum, c, NULL) != ncclInvalidArgument;
  bad += ncclGroupEnd() != ncclInvalidUsage;
  char a[16];
  bad += ncclAllReduce(a, a, 4, ncclFloat, ncclMax, c, NULL) != ncclSuccess;
  bad += ncclCommDestroy(c) != ncclSuccess;
  bad += ncclCommDestroy(all[0]) != ncclSuccess;
  bad += ncclCommDestroy(all[1]) != ncclSuccess;
  fflush(stdout);
  fflush(stderr);
  return bad;
}

static void case_version(void) {
  int fds[2];
  CHECK_TRUE(pipe(fds) == 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[0]);
    close(fds[1]);
    setenv("NCCL_DEBUG", "VERSION", 1);
    unsetenv("NCCL_DEBUG_FILE");
    unsetenv("NCCL_DEBUG_SUBSYS");
    _exit(version_child());
  }
  close(fds[1]);
  static char out[1 << 16];
  size_t n = 0;
  ssize_t k;
  while (n + 1 < sizeof(out) && (k = read(fds[0], out + n, sizeof(out) - 1 - n)) > 0)
    n += (size_t)k;
  out[n] = '\0';
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's calls: status 0x%x", st);
  int lines = 0;
  for (size_t i = 0; i < n; i++) lines += out[i] == '\n';
  char banner[64];
  snprintf(banner, sizeof(banner), "NCCL version %d.%d.%d (Choir ", NCCL_MAJOR, NCCL_MINOR,
           NCCL_PATCH);
  CHECK_MSG(lines == 1 && strstr(out, banner) != NULL && out[n - 1] == '\n',
            "with NCCL_DEBUG=VERSION, want one line with \"%s\"; got %d line(s):\n%s", banner,
            lines, out);
}

/* ---- simulate ------------------------------------------------------------------------------- */

enum {
  SIM_ALLREDUCE,
  SIM_ALLGATHER,
  SIM_REDUCESCATTER,
  SIM_BROADCAST,
  SIM_REDUCE,
  SIM_ALLTOALL,
  SIM_SENDRECV,
  SIM_NKINDS
};
static const char* const sim_names[SIM_NKINDS] = {
    "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "send/recv"};

/* One operation of `count` floats on every rank of `c`, inside a group closed by
 * ncclGroupSimulateEnd; returns the estimate (NAN when a call failed). */
static float sim_one(ncclComm_t* c, int n, int kind, size_t count) {
  /* Never read or written: the group is only simulated. */
  char* buf = (char*)(uintptr_t)0x10000;
  ncclResult_t r = ncclGroupStart();
  for (int i = 0; i < n && r == ncclSuccess; i++) {
    switch (kind) {
      case SIM_ALLREDUCE: r = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, c[i], NULL); break;
      case SIM_ALLGATHER: r = ncclAllGather(buf, buf, count, ncclFloat, c[i], NULL); break;
      case SIM_REDUCESCATTER:
        r = ncclReduceScatter(buf, buf, count, ncclFloat, ncclSum, c[i], NULL);
        break;
      case SIM_BROADCAST: r = ncclBroadcast(buf, buf, count, ncclFloat, 0, c[i], NULL); break;
      case SIM_REDUCE: r = ncclReduce(buf, buf, count, ncclFloat, ncclSum, 0, c[i], NULL); break;
      case SIM_ALLTOALL: r = ncclAlltoAll(buf, buf, count, ncclFloat, c[i], NULL); break;
      default:
        r = ncclSend(buf, count, ncclFloat, (i + 1) % n, c[i], NULL);
        if (r == ncclSuccess) r = ncclRecv(buf, count, ncclFloat, (i + n - 1) % n, c[i], NULL);
        break;
    }
  }
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  ncclResult_t e = ncclGroupSimulateEnd(&sim);
  CHECK_MSG(r == ncclSuccess && e == ncclSuccess, "%s of %zu floats: calls %d, simulate %d (%s)",
            sim_names[kind], count, (int)r, (int)e, ncclGetLastError(NULL));
  return r == ncclSuccess && e == ncclSuccess ? sim.estimatedTime : NAN;
}

static void case_simulate(void) {
  enum { N = 4 };
  ncclComm_t c[N];
  int devs[N] = {0, 1, 2, 3};
  CHECK_EQ_INT(ncclCommInitAll(c, N, devs), ncclSuccess);
  const size_t counts[] = {1, 256, 1 << 18, 1 << 24, (size_t)1 << 28};
  const int ncounts = (int)(sizeof(counts) / sizeof(counts[0]));
  for (int kind = 0; kind < SIM_NKINDS; kind++) {
    float prev = 0.0f;
    for (int k = 0; k < ncounts; k++) {
      float t = sim_one(c, N, kind, counts[k]);
      /* Positive and finite, and more for more bytes: an estimate of 0, or one that ignores the
       * size, is no estimate. */
      CHECK_MSG(isfinite(t) && t > 0.0f, "%s of %zu floats on %d ranks: estimatedTime %g",
                sim_names[kind], counts[k], N, (double)t);
      if (k > 0)
        CHECK_MSG(t > prev, "%s: %zu floats estimated at %g us, no more than %zu floats (%g us)",
                  sim_names[kind], counts[k], (double)t, counts[k - 1], (double)prev);
      prev = t;
    }
    printf("simulate: %s of 1 GiB on %d ranks: %g us\n", sim_names[kind], N, (double)prev);
  }
  /* A group with nothing in it takes no time; a simulated group launched nothing. */
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclGroupSimulateEnd(&sim), ncclSuccess);
  CHECK_TRUE(sim.estimatedTime == 0.0f);
  CHECK_EQ_INT(fake_cudart.launches, 0);
  CHECK_EQ_INT(fake_cudart.copies, 0);
  for (int i = 0; i < N; i++) CHECK_EQ_INT(ncclCommDestroy(c[i]), ncclSuccess);
}

/* ---- the device API's host helpers ----------------------------------------------------------- */

static bool team_is(ncclTeam_t t, int n, int r, int stride) {
  return t.nRanks == n && t.rank == r && t.stride == stride;
}

/* NCCL's LSA block: runs of consecutive ranks on one host, their greatest common divisor. */
static void case_devapi_lsa(void) {
  static const struct {
    const char* hosts;
    int block;
  } rows[] = {{"A", 1},      {"AAAA", 4},   {"AABB", 2}, {"AAABBB", 3}, {"AABBBB", 2},
              {"ABAB", 1},   {"AAB", 1},    {"AAAABBBBCCCC", 4}, {"AAAABBCC", 2}};
  for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
    uint64_t hosts[16];
    const int n = (int)strlen(rows[i].hosts);
    for (int r = 0; r < n; r++) hosts[r] = 0x1000 + (uint64_t)rows[i].hosts[r];
    const int got = sys_lsa_block(hosts, sizeof(hosts[0]), n);
    CHECK_MSG(got == rows[i].block, "hosts %s: LSA block %d, want %d", rows[i].hosts, got,
              rows[i].block);
  }
}

/* Teams of one rank; their rank arithmetic; a NULL communicator named in the error. */
static void case_devapi_teams(void) {
  ncclComm_t c = one_rank();
  if (c == NULL) return;
  CHECK_TRUE(team_is(ncclTeamWorld(c), 1, 0, 1));
  CHECK_TRUE(team_is(pncclTeamWorld(c), 1, 0, 1));
  CHECK_TRUE(team_is(ncclTeamLsa(c), 1, 0, 1));
  CHECK_TRUE(team_is(ncclTeamRail(c), 1, 0, 1));
  CHECK_EQ_INT(ncclTeamRankToWorld(c, ncclTeamWorld(c), 0), 0);
  CHECK_EQ_INT(ncclTeamRankToLsa(c, ncclTeamLsa(c), 0), 0);
  /* NCCL's arithmetic, without a range check: rank 3 of a stride-2 team seen from its rank 1. */
  const ncclTeam_t t = {4, 0, 2};
  CHECK_EQ_INT(ncclTeamRankToWorld(c, t, 3), 6);
  CHECK_TRUE(team_is(ncclTeamWorld(NULL), 0, 0, 0));
  CHECK_CONTAINS(ncclGetLastError(NULL), "ncclTeamWorld: argument 'comm' is NULL");
  CHECK_TRUE(team_is(ncclTeamLsa(NULL), 0, 0, 0));
  CHECK_EQ_INT(ncclTeamRankToLsa(NULL, t, 0), -1);
  CHECK_CONTAINS(ncclGetLastError(NULL), "ncclTeamRankToLsa: argument 'comm' is NULL");
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

/* The requirements: NCCL 2.28.9's buffer sizes, handles pointed at, the rest of the requirement
 * zeroed; bad arguments refused with the argument's name. */
static void case_devapi_reqs(void) {
  ncclDevResourceRequirements_t req;
  memset(&req, 0x5a, sizeof(req));
  ncclLsaBarrierHandle_t lh;
  CHECK_EQ_INT(ncclLsaBarrierCreateRequirement((ncclTeam_t){4, 1, 1}, 8, &lh, &req), ncclSuccess);
  CHECK_TRUE(req.bufferSize == (3 * 8 + 8 * 4) * 4 && req.bufferAlign == 4);
  CHECK_TRUE(req.outBufferHandle == &lh.bufHandle && lh.nBarriers == 8);
  CHECK_TRUE(req.next == NULL && req.ginSignalCount == 0 && req.ginCounterCount == 0 &&
             req.outGinSignalStart == NULL && req.outGinCounterStart == NULL);
  expect_refused("LSA barrier, outReq NULL",
                 ncclLsaBarrierCreateRequirement((ncclTeam_t){4, 1, 1}, 8, &lh, NULL),
                 ncclInvalidArgument, "ncclLsaBarrierCreateRequirement: argument 'outReq' is NULL");
  expect_refused("LSA barrier, -1 barriers",
                 ncclLsaBarrierCreateRequirement((ncclTeam_t){4, 1, 1}, -1, &lh, &req),
                 ncclInvalidArgument, "nBarriers is -1");
  expect_refused("LSA barrier, empty team",
                 ncclLsaBarrierCreateRequirement((ncclTeam_t){0, 0, 1}, 2, &lh, &req),
                 ncclInvalidArgument, "the team has 0 ranks");

  ncclComm_t c = one_rank();
  if (c == NULL) return;
  ncclGinBarrierHandle_t gh;
  memset(&req, 0x5a, sizeof(req));
  CHECK_EQ_INT(ncclGinBarrierCreateRequirement(c, ncclTeamWorld(c), 3, &gh, &req), ncclSuccess);
  CHECK_TRUE(req.bufferSize == 3 * 4 * 4 && req.bufferAlign == 4 && req.ginSignalCount == 3);
  CHECK_TRUE(req.outBufferHandle == &gh.bufHandle && req.outGinSignalStart == &gh.signal0);
  CHECK_TRUE(req.next == NULL && req.ginCounterCount == 0 && req.outGinCounterStart == NULL);
  expect_refused("GIN barrier, NULL comm",
                 ncclGinBarrierCreateRequirement(NULL, ncclTeamWorld(c), 3, &gh, &req),
                 ncclInvalidArgument, "argument 'comm' is NULL");
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);

  CHECK_EQ_INT(ncclLLA2ACalcSlots(10, 12), 20);
  CHECK_EQ_INT(ncclLLA2ACalcSlots(5, 8), 5);
  CHECK_EQ_INT(ncclLLA2ACalcSlots(5, 0), 0);
  CHECK_EQ_INT(ncclLLA2ACalcSlots(-1, 8), 0);
  ncclLLA2AHandle_t ah;
  memset(&req, 0x5a, sizeof(req));
  CHECK_EQ_INT(pncclLLA2ACreateRequirement(3, 20, &ah, &req), ncclSuccess);
  CHECK_TRUE(req.bufferSize == 3 * (1 + 2 * 20) * 16 && req.bufferAlign == 16 && ah.nSlots == 20);
  CHECK_TRUE(req.outBufferHandle == &ah.bufHandle && req.next == NULL && req.ginSignalCount == 0);
  expect_refused("LL A2A, NULL handle", ncclLLA2ACreateRequirement(3, 20, NULL, &req),
                 ncclInvalidArgument, "ncclLLA2ACreateRequirement: argument 'outHandle' is NULL");
  expect_refused("LL A2A, -2 slots", ncclLLA2ACreateRequirement(3, -2, &ah, &req),
                 ncclInvalidArgument, "nSlots is -2");
}

/* ncclDevCommCreate: GIN and multicast refused naming the field; bad counts and lists refused as
 * arguments; what is left (LSA) reported as not built yet; the output zeroed; Destroy refuses what
 * Create never made. */
static void case_devapi_create(void) {
  ncclComm_t c = one_rank();
  if (c == NULL) return;
  ncclDevComm_t dev;
  ncclDevCommRequirements_t r;
  memset(&r, 0, sizeof(r));
  memset(&dev, 0x5a, sizeof(dev));
  /* What Choir serves needs a cuMem resource window, which emulated devices cannot give: the
   * creation fails naming it, and leaves the output zeroed (the GPU suite creates them). */
  expect_refused("ncclDevCommCreate, nothing asked", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidArgument, "its resource window could not be allocated");
  CHECK_TRUE(dev.nRanks == 0 && dev.lsaBarrier.nBarriers == 0 && dev.ginSignalShadows == NULL);
  r.lsaBarrierCount = 4;
  expect_refused("ncclDevCommCreate, LSA barriers", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidArgument, "resource window could not be allocated");
  memset(&r, 0, sizeof(r));
  r.lsaMultimem = true;
  expect_refused("ncclDevCommCreate, multimem", ncclDevCommCreate(c, &r, &dev), ncclInvalidUsage,
                 "reqs->lsaMultimem is set: NVLink multicast");
  /* nccl-tests 2.19.6's GIN all-to-all (-D 3) on NCCL 2.28: world barriers and signals. */
  memset(&r, 0, sizeof(r));
  r.barrierCount = 8;
  r.ginSignalCount = 8;
  expect_refused("ncclDevCommCreate, world barriers", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidUsage, "reqs->barrierCount is 8: a world barrier");
  CHECK_CONTAINS(ncclGetLastError(NULL), "GPU-initiated networking (GIN)");
  memset(&r, 0, sizeof(r));
  r.ginSignalCount = 2;
  expect_refused("ncclDevCommCreate, signals", ncclDevCommCreate(c, &r, &dev), ncclInvalidUsage,
                 "reqs->ginSignalCount needs GPU-initiated networking");
  memset(&r, 0, sizeof(r));
  r.ginForceEnable = true;
  expect_refused("ncclDevCommCreate, forced GIN", ncclDevCommCreate(c, &r, &dev), ncclInvalidUsage,
                 "reqs->ginForceEnable needs GPU-initiated networking");
  memset(&r, 0, sizeof(r));
  /* One rank is its own rail team: rail barriers are accepted (as NCCL 2.28 does on one host;
   * PyTorch asks for 32), and creation goes on to the resource window. test-comm's two-host
   * ranks are refused. */
  r.railGinBarrierCount = 32;
  expect_refused("ncclDevCommCreate, rail barriers on one host", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidArgument, "resource window could not be allocated");
  /* A GIN barrier's resource requirement, chained behind a plain buffer. */
  ncclDevResourceRequirements_t plain, ginreq;
  memset(&plain, 0, sizeof(plain));
  plain.bufferSize = 4096;
  plain.bufferAlign = 128;
  ncclGinBarrierHandle_t gh;
  CHECK_EQ_INT(ncclGinBarrierCreateRequirement(c, ncclTeamWorld(c), 2, &gh, &ginreq), ncclSuccess);
  plain.next = &ginreq;
  memset(&r, 0, sizeof(r));
  r.resourceRequirementsList = &plain;
  expect_refused("ncclDevCommCreate, GIN resource", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidUsage, "resourceRequirementsList entry 1 asks for 2 GIN signal(s)");
  plain.next = &plain; /* a loop */
  expect_refused("ncclDevCommCreate, looping list", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidArgument, "more than 65536 entries");
  plain.next = NULL;
  plain.bufferAlign = 48;
  expect_refused("ncclDevCommCreate, alignment", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidArgument, "bufferAlign 48 is not a power of two");
  ncclTeamRequirements_t team;
  memset(&team, 0, sizeof(team));
  team.team = ncclTeamWorld(c);
  team.multimem = true;
  memset(&r, 0, sizeof(r));
  r.teamRequirementsList = &team;
  expect_refused("ncclDevCommCreate, team multimem", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidUsage, "teamRequirementsList entry 0 asks for multimem");
  memset(&r, 0, sizeof(r));
  r.lsaLLA2ABlockCount = 2;
  r.lsaLLA2ASlotCount = 16;
  expect_refused("ncclDevCommCreate, LL all-to-all", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidUsage, "the LL all-to-all session (ncclLLA2ASession) is not implemented");
  memset(&r, 0, sizeof(r));
  r.lsaBarrierCount = -1;
  expect_refused("ncclDevCommCreate, negative count", ncclDevCommCreate(c, &r, &dev),
                 ncclInvalidArgument, "reqs->lsaBarrierCount is -1");
  expect_refused("ncclDevCommCreate, NULL reqs", ncclDevCommCreate(c, NULL, &dev),
                 ncclInvalidArgument, "ncclDevCommCreate: argument 'reqs' is NULL");
  expect_refused("ncclDevCommCreate, NULL out", pncclDevCommCreate(c, &r, NULL),
                 ncclInvalidArgument, "ncclDevCommCreate: argument 'outDevComm' is NULL");
  memset(&r, 0, sizeof(r));
  expect_refused("ncclDevCommCreate, NULL comm", ncclDevCommCreate(NULL, &r, &dev),
                 ncclInvalidArgument, "ncclDevCommCreate");
  expect_refused("ncclDevCommDestroy, never created", ncclDevCommDestroy(c, &dev),
                 ncclInvalidUsage, "was not created by ncclDevCommCreate");
  expect_refused("ncclDevCommDestroy, NULL", ncclDevCommDestroy(c, NULL), ncclInvalidArgument,
                 "ncclDevCommDestroy: argument 'devComm' is NULL");
  /* The communicator is unharmed. */
  int n = 0;
  CHECK_EQ_INT(ncclCommCount(c, &n), ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

int main(int argc, char** argv) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  static const struct {
    const char* name;
    void (*fn)(void);
  } cases[] = {{"datatype", case_datatype},
               {"window-refusals", case_window_refusals},
               {"register", case_register},
               {"register-off", case_register_off},
               {"version", case_version},
               {"simulate", case_simulate},
               {"devapi-lsa", case_devapi_lsa},
               {"devapi-teams", case_devapi_teams},
               {"devapi-reqs", case_devapi_reqs},
               {"devapi-create", case_devapi_create}};
  const char* only = argc > 1 ? argv[1] : NULL;
  int ran = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (only != NULL && strcmp(only, cases[i].name) != 0) continue;
    fork_case(cases[i].name, cases[i].fn);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "test-api-comm: no case named %s\n", only);
    return 2;
  }
  return check_finish(only != NULL ? only : "api-comm");
}
