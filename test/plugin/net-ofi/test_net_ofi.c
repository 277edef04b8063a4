/*
 * net-ofi unit test: the pure helpers (tag scheme, comm ids, registration keys, knob parsing),
 * compiled in from plugins/net-ofi/nof_util.c, then the plugin itself through its v12 and v8
 * tables in this process (dlopen): devices and properties, an in-process connection over the
 * provider the environment selects (FI_PROVIDER, FI_TCP_IFACE), several registrations of one
 * buffer on one comm (libfabric 1.17 refuses a second user key 0 with FI_ENOKEY), data through
 * them, a peer that closes its comm (process alive) while a send or a receive waits (an error
 * within the probe timeout, not a hang), a live peer idle for longer than the probe timeout (no
 * error), and a provider nobody has (0 devices, not a load
 * failure) in a child process.
 *
 *   test-net-ofi PLUGIN_SO
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nof.h"

static int failures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      failures++;                                          \
    }                                                      \
  } while (0)

static double clock_gettime_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  (void)flags;
  if (level != NCCL_LOG_WARN && getenv("TEST_NET_OFI_VERBOSE") == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[%s:%d] ", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

/* ---- pure helpers ---------------------------------------------------------------------------- */

static void test_tags(void) {
  static const uint32_t ids[] = {1, 2, 0x1234, NOF_ID_MASK - 1, NOF_ID_MASK};
  static const uint32_t seqs[] = {0, 1, 31, 0x800000, NOF_SEQ_MASK};
  uint64_t seen[4 * 5 * 5];
  int n = 0;
  for (int k = 0; k < 4; k++)
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
      for (size_t s = 0; s < sizeof(seqs) / sizeof(seqs[0]); s++) {
        uint64_t t = nof_tag(k, ids[i], seqs[s]);
        CHECK(t >> NOF_TAG_BITS == 0, "tag 0x%llx uses more than %d bits", (unsigned long long)t,
              NOF_TAG_BITS);
        int kk;
        uint32_t ii, ss;
        nof_tag_split(t, &kk, &ii, &ss);
        CHECK(kk == k && ii == ids[i] && ss == seqs[s], "tag round trip (%d,%u,%u) -> (%d,%u,%u)",
              k, ids[i], seqs[s], kk, ii, ss);
        for (int j = 0; j < n; j++)
          CHECK(seen[j] != t, "two messages share tag 0x%llx", (unsigned long long)t);
        seen[n++] = t;
      }
  /* The sequence number wraps inside its field, never into the id. */
  CHECK(nof_tag(NOF_TAG_DATA, 5, NOF_SEQ_MASK + 1) == nof_tag(NOF_TAG_DATA, 5, 0),
        "sequence wrap leaks into the id");
  /* Data for one comm never matches a control message or another comm's data. */
  CHECK(nof_tag(NOF_TAG_DATA, 7, 0) != nof_tag(NOF_TAG_PROBE, 7, 0), "data vs probe tag");
  CHECK(nof_tag(NOF_TAG_DATA, 7, 3) != nof_tag(NOF_TAG_DATA, 8, 3), "comm ids not kept apart");
}

static void test_ids(void) {
  uint32_t first = nof_next_id(), prev = first;
  CHECK(first != 0, "comm id 0");
  /* A full wrap of the id field: never 0, each id once per wrap. */
  for (uint32_t i = 0; i < NOF_ID_MASK + 5u; i++) {
    uint32_t id = nof_next_id();
    if (id == 0 || id > NOF_ID_MASK) {
      CHECK(0, "comm id %u out of range", id);
      break;
    }
    if (id == prev) {
      CHECK(0, "comm id %u twice in a row", id);
      break;
    }
    prev = id;
  }
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static void test_keys(void) {
  enum { N = 20000 };
  uint64_t* k = malloc(N * sizeof(*k));
  for (int i = 0; i < N; i++) k[i] = nof_next_key(8);
  qsort(k, N, sizeof(*k), cmp_u64);
  for (int i = 0; i < N; i++) CHECK(k[i] != 0, "registration key 0");
  int dup = 0;
  for (int i = 1; i < N; i++) dup += k[i] == k[i - 1];
  CHECK(dup == 0, "%d repeated registration keys among %d", dup, N);
  /* A 1-byte key space: 255 different non-zero keys before any repeats. */
  bool used[256] = {false};
  for (int i = 0; i < 255; i++) {
    uint64_t key = nof_next_key(1);
    CHECK(key >= 1 && key <= 255, "1-byte key %llu out of range", (unsigned long long)key);
    if (key <= 255) {
      CHECK(!used[key], "1-byte key %llu repeated within 255", (unsigned long long)key);
      used[key] = true;
    }
  }
  free(k);
}

static void test_knobs(void) {
  long v = -1;
  CHECK(nof_parse_int("1000", 0, 3600000, &v) && v == 1000, "parse 1000");
  CHECK(nof_parse_int("0", 0, 10, &v) && v == 0, "parse 0");
  CHECK(!nof_parse_int("", 0, 10, &v), "empty accepted");
  CHECK(!nof_parse_int("12x", 0, 100, &v), "trailing garbage accepted");
  CHECK(!nof_parse_int("-1", 0, 100, &v), "below range accepted");
  CHECK(!nof_parse_int("101", 0, 100, &v), "above range accepted");
  CHECK(!nof_parse_int("99999999999999999999", 0, 100, &v), "overflow accepted");

  CHECK(nof_list_match(NULL, "eth0") && nof_list_match("", "eth0"), "empty list must pass all");
  CHECK(nof_list_match("eth", "eth0"), "prefix");
  CHECK(!nof_list_match("eth", "lo"), "prefix mismatch");
  CHECK(nof_list_match("ib,eth", "eth1"), "second entry");
  CHECK(!nof_list_match("^eth", "eth0") && nof_list_match("^eth", "lo"), "exclusion");
  CHECK(nof_list_match("=eth0", "eth0") && !nof_list_match("=eth0", "eth01"), "exact");
  CHECK(!nof_list_match("^=lo", "lo") && nof_list_match("^=lo", "lo0"), "exact exclusion");

  CHECK(nof_prov_match(NULL, "tcp;ofi_rxm"), "no knob: any provider");
  CHECK(nof_prov_match("tcp", "tcp;ofi_rxm"), "core name selects the layered provider");
  CHECK(nof_prov_match("tcp;ofi_rxm", "tcp;ofi_rxm"), "full name");
  CHECK(!nof_prov_match("tcp", "net;ofi_rxm") && !nof_prov_match("ofi_rxm", "tcp;ofi_rxm"),
        "utility or other core must not match");
  CHECK(nof_prov_match("efa,net", "net") && !nof_prov_match("efa,net", "tcp;ofi_rxm"), "list");
  CHECK(!nof_prov_match("ne", "net"), "prefix must not match");
}

/* ---- through the plugin ---------------------------------------------------------------------- */

static void* open_plugin(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(lib != NULL, "dlopen(%s): %s", path, dlerror());
  return lib;
}

/* Tests two requests in turn (one thread plays both sides: neither may wait for the other). */
static bool poll_pair(const ncclNet_v12_t* net, void* a, int* asize, void* b, int* bsize) {
  int adone = 0, bdone = 0;
  for (long i = 0; i < 20000000 && !(adone && bdone); i++) {
    if (!adone && net->test(a, &adone, asize) != ncclSuccess) return false;
    if (!bdone && net->test(b, &bdone, bsize) != ncclSuccess) return false;
  }
  return adone && bdone;
}

static void test_plugin(const char* path) {
  void* lib = open_plugin(path);
  if (lib == NULL) return;
  const ncclNet_v12_t* net = dlsym(lib, "ncclNetPlugin_v12");
  const ncclNet_v8_t* net8 = dlsym(lib, "ncclNetPlugin_v8");
  CHECK(net != NULL && net8 != NULL, "ncclNetPlugin_v12 / _v8 missing");
  if (net == NULL || net8 == NULL) return;
  CHECK(strcmp(net->name, "OFI") == 0 && strcmp(net8->name, "OFI") == 0, "table name %s",
        net->name);
  CHECK(net->regMrDmaBuf == NULL, "regMrDmaBuf set without dma-buf support");
  void* ctx = NULL;
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK(net->init(&ctx, 1, &cfg, logger, NULL) == ncclSuccess, "v12 init");
  CHECK(net8->init(logger) == ncclSuccess, "v8 init after v12 init");
  int ndev = 0;
  CHECK(net->devices(&ndev) == ncclSuccess && ndev >= 1, "devices: %d", ndev);
  if (ndev < 1) return;
  ncclNetProperties_v12_t p;
  ncclNetProperties_v8_t p8;
  CHECK(net->getProperties(0, &p) == ncclSuccess, "getProperties");
  CHECK(net8->getProperties(0, &p8) == ncclSuccess, "v8 getProperties");
  CHECK(p.speed > 0 && p.latency > 0 && p.ptrSupport == NCCL_PTR_HOST && p.maxRecvs == 1 &&
            p.maxP2pBytes > 0 && p.maxP2pBytes <= NOF_MAX_BYTES,
        "properties: speed %d latency %f ptr 0x%x maxRecvs %d maxP2pBytes %zu", p.speed,
        (double)p.latency, p.ptrSupport, p.maxRecvs, p.maxP2pBytes);
  CHECK(p8.speed == p.speed && p8.guid == p.guid && strcmp(p8.name, p.name) == 0,
        "v8 properties differ from v12");
  CHECK(net->getProperties(ndev, &p) == ncclInvalidArgument, "device %d accepted", ndev);

  /* One connection inside this process: listen, then connect and accept polled in turn. */
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof(handle));
  void *lc = NULL, *sc = NULL, *rc = NULL;
  CHECK(net->listen(ctx, 0, handle, &lc) == ncclSuccess && lc != NULL, "listen");
  for (int i = 0; i < 200000 && (sc == NULL || rc == NULL); i++) {
    if (sc == NULL && net->connect(ctx, 0, handle, &sc, NULL) != ncclSuccess) break;
    if (rc == NULL && net->accept(lc, &rc, NULL) != ncclSuccess) break;
  }
  CHECK(sc != NULL && rc != NULL, "in-process connection did not complete");
  if (sc == NULL || rc == NULL) return;
  CHECK(net->closeListen(lc) == ncclSuccess, "closeListen");

  /* Three registrations of one buffer alive at once on each comm, and data through them. */
  enum { SZ = 1 << 20 };
  char* sbuf = malloc(SZ);
  char* rbuf = malloc(SZ);
  for (int i = 0; i < SZ; i++) sbuf[i] = (char)(i * 7 + 3);
  memset(rbuf, 0, SZ);
  void *smh[3] = {NULL, NULL, NULL}, *rmh[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) {
    CHECK(net->regMr(sc, sbuf, SZ, NCCL_PTR_HOST, &smh[i]) == ncclSuccess,
          "registration %d of one send buffer", i + 1);
    CHECK(net->regMr(rc, rbuf, SZ, NCCL_PTR_HOST, &rmh[i]) == ncclSuccess,
          "registration %d of one receive buffer", i + 1);
  }
  void* mh = NULL;
  CHECK(net->regMr(sc, sbuf, 64, NCCL_PTR_CUDA, &mh) != ncclSuccess,
        "CUDA registration accepted without FI_HMEM");
  for (int round = 0; round < 3; round++) {
    void *sreq = NULL, *rreq = NULL;
    size_t rsize = SZ;
    int tag = 0;
    void* rdata = rbuf;
    CHECK(net->irecv(rc, 1, &rdata, &rsize, &tag, &rmh[round], NULL, &rreq) == ncclSuccess &&
              rreq != NULL,
          "irecv");
    CHECK(net->isend(sc, sbuf, SZ - (size_t)round, 0, smh[2 - round], NULL, &sreq) == ncclSuccess &&
              sreq != NULL,
          "isend");
    if (sreq == NULL || rreq == NULL) break;
    int ssz = -1, rsz = -1;
    CHECK(poll_pair(net, sreq, &ssz, rreq, &rsz) && ssz == SZ - round && rsz == SZ - round,
          "completions: send %d, receive %d bytes, expected %d", ssz, rsz, SZ - round);
    CHECK(memcmp(sbuf, rbuf, (size_t)(SZ - round)) == 0, "data differs (round %d)", round);
    void* freq = (void*)1;
    int fsize = rsz;
    CHECK(net->iflush(rc, 1, &rdata, &fsize, &rmh[round], &freq) == ncclSuccess && freq == NULL,
          "iflush of host memory must give a NULL request");
  }
  for (int i = 0; i < 3; i++) {
    CHECK(net->deregMr(sc, smh[i]) == ncclSuccess, "deregMr");
    CHECK(net->deregMr(rc, rmh[i]) == ncclSuccess, "deregMr");
  }
  CHECK(net->closeSend(sc) == ncclSuccess, "closeSend");
  CHECK(net->closeRecv(rc) == ncclSuccess, "closeRecv");
  CHECK(net->finalize(ctx) == ncclSuccess, "finalize");
  free(sbuf);
  free(rbuf);
}

/* A connection inside this process: listen, then connect and accept polled in turn. */
static bool connect_pair(const ncclNet_v12_t* net, void* ctx, void** sc_p, void** rc_p) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof(handle));
  void *lc = NULL, *sc = NULL, *rc = NULL;
  if (net->listen(ctx, 0, handle, &lc) != ncclSuccess) return false;
  for (int i = 0; i < 200000 && (sc == NULL || rc == NULL); i++) {
    if (sc == NULL && net->connect(ctx, 0, handle, &sc, NULL) != ncclSuccess) break;
    if (rc == NULL && net->accept(lc, &rc, NULL) != ncclSuccess) break;
  }
  net->closeListen(lc);
  *sc_p = sc;
  *rc_p = rc;
  return sc != NULL && rc != NULL;
}

/* The peer closes its comm in an orderly way (the process lives on) while our request waits: the
 * request must fail within the probe timeout (CHOIR_OFI_PROBE_TIMEOUT_MS, 3 s in the test's
 * environment), never hang. The peer closes before the request is posted, so the outcome is
 * certain: a 16 MiB send needs the receiver (rendezvous), a receive needs a sender. */
static void test_peer_close(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const ncclNet_v12_t* net = lib ? dlsym(lib, "ncclNetPlugin_v12") : NULL;
  if (net == NULL) return;
  void* ctx = NULL;
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (net->init(&ctx, 3, &cfg, logger, NULL) != ncclSuccess) return;
  enum { SZ = 16 << 20 };
  char* buf = malloc(SZ);
  memset(buf, 1, SZ);
  for (int closing_receiver = 1; closing_receiver >= 0; closing_receiver--) {
    void *sc = NULL, *rc = NULL;
    CHECK(connect_pair(net, ctx, &sc, &rc), "connection for the peer-close case");
    if (sc == NULL || rc == NULL) break;
    void* survivor = closing_receiver ? sc : rc;
    if (closing_receiver)
      net->closeRecv(rc);
    else
      net->closeSend(sc);
    void* mh = NULL;
    CHECK(net->regMr(survivor, buf, SZ, NCCL_PTR_HOST, &mh) == ncclSuccess, "regMr");
    void* req = NULL;
    size_t size = SZ;
    int tag = 0;
    void* data = buf;
    ncclResult_t r = closing_receiver ? net->isend(sc, buf, SZ, 0, mh, NULL, &req)
                                      : net->irecv(rc, 1, &data, &size, &tag, &mh, NULL, &req);
    int done = 0;
    double t0 = clock_gettime_s();
    while (r == ncclSuccess && req != NULL && !done && clock_gettime_s() - t0 < 15) {
      r = net->test(req, &done, NULL);
      usleep(200);
    }
    CHECK(r == ncclRemoteError && !done,
          "%s pending after the peer closed its comm: result %d, done %d after %.1f s (expected "
          "ncclRemoteError within the probe timeout)",
          closing_receiver ? "send" : "receive", (int)r, done, clock_gettime_s() - t0);
    net->deregMr(survivor, mh);
    if (closing_receiver)
      net->closeSend(sc);
    else
      net->closeRecv(rc);
  }
  free(buf);
  net->finalize(ctx);
}

/* The opposite: a live peer that makes no progress at all for longer than the probe timeout (it
 * calls nothing on its comm) must not be declared dead. One side waits 5 s (the test's probe
 * timeout is 3 s) with its request posted while the other side's comm sits untouched, then the
 * other side posts: a receiver waiting for a 1 MiB send, and a sender of 64 MiB (more than any
 * socket buffer) waiting for the receive. */
static void test_idle_peer(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  const ncclNet_v12_t* net = lib ? dlsym(lib, "ncclNetPlugin_v12") : NULL;
  if (net == NULL) return;
  void* ctx = NULL;
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (net->init(&ctx, 4, &cfg, logger, NULL) != ncclSuccess) return;
  for (int sender_waits = 0; sender_waits <= 1; sender_waits++) {
    void *sc = NULL, *rc = NULL;
    CHECK(connect_pair(net, ctx, &sc, &rc), "connection for the idle-peer case");
    if (sc == NULL || rc == NULL) break;
    size_t sz = sender_waits ? (size_t)64 << 20 : (size_t)1 << 20;
    char* sbuf = malloc(sz);
    char* rbuf = calloc(1, sz);
    memset(sbuf, 9, sz);
    void *smh = NULL, *rmh = NULL;
    CHECK(net->regMr(sc, sbuf, sz, NCCL_PTR_HOST, &smh) == ncclSuccess, "regMr");
    CHECK(net->regMr(rc, rbuf, sz, NCCL_PTR_HOST, &rmh) == ncclSuccess, "regMr");
    void *rreq = NULL, *sreq = NULL;
    size_t size = sz;
    int tag = 0, done = 0, rsz = -1, ssz = -1;
    void* data = rbuf;
    ncclResult_t r = sender_waits ? net->isend(sc, sbuf, sz, 0, smh, NULL, &sreq)
                                  : net->irecv(rc, 1, &data, &size, &tag, &rmh, NULL, &rreq);
    void* waiting = sender_waits ? sreq : rreq;
    CHECK(r == ncclSuccess && waiting != NULL, "first post");
    double t0 = clock_gettime_s();
    while (waiting && r == ncclSuccess && !done && clock_gettime_s() - t0 < 5) {
      r = net->test(waiting, &done, sender_waits ? &ssz : &rsz);
      usleep(1000);
    }
    CHECK(r == ncclSuccess && !done, "%s waiting on an idle (live) peer: result %d, done %d",
          sender_waits ? "send" : "receive", (int)r, done);
    if (waiting && r == ncclSuccess && !done) {
      r = sender_waits ? net->irecv(rc, 1, &data, &size, &tag, &rmh, NULL, &rreq)
                       : net->isend(sc, sbuf, sz, 0, smh, NULL, &sreq);
      CHECK(r == ncclSuccess && sreq && rreq, "second post");
      if (sreq && rreq)
        CHECK(poll_pair(net, sreq, &ssz, rreq, &rsz) && ssz == (int)sz && rsz == (int)sz &&
                  memcmp(sbuf, rbuf, sz) == 0,
              "transfer after the idle period: send %d, receive %d bytes", ssz, rsz);
    }
    net->deregMr(sc, smh);
    net->deregMr(rc, rmh);
    net->closeSend(sc);
    net->closeRecv(rc);
    free(sbuf);
    free(rbuf);
  }
  net->finalize(ctx);
}

/* A provider nobody has: init succeeds with 0 devices (a child: init runs once per process). */
static void test_no_device(const char* path) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("CHOIR_OFI_PROVIDER", "no-such-provider", 1);
    void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const ncclNet_v12_t* net = lib ? dlsym(lib, "ncclNetPlugin_v12") : NULL;
    void* ctx = NULL;
    int ndev = -1;
    ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
    if (net == NULL || net->init(&ctx, 2, &cfg, logger, NULL) != ncclSuccess) _exit(2);
    if (net->devices(&ndev) != ncclSuccess || ndev != 0) _exit(3);
    net->finalize(ctx);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
        "unknown CHOIR_OFI_PROVIDER: expected init success with 0 devices (child status %d)", st);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test-net-ofi PLUGIN_SO\n");
    return 2;
  }
  test_tags();
  test_ids();
  test_keys();
  test_knobs();
  test_no_device(argv[1]);
  test_plugin(argv[1]);
  test_peer_close(argv[1]);
  test_idle_peer(argv[1]);
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("PASS test-net-ofi\n");
  return 0;
}
