/*
 * plugins/net-socket through its ABI, in one process over a local interface: dlopen the built
 * library (argv[1]), take the v12 table (and check the v11 .. v8 ones are there), then
 * listen/connect/accept as non-blocking loops, transfers of 0 B, 1 B, 1 MiB and 256 MiB checked
 * byte for byte, 32 outstanding requests each way (the 33rd refused), a receive larger than the
 * send, a send larger than the receive (an error), peers closing mid-transfer (an error, never a
 * hang; SIGPIPE is left at its default so a missing MSG_NOSIGNAL would kill the test), closeListen
 * with a connect pending, one round trip through the v8 table, and a throughput line for a 1 GiB
 * transfer with the thread / socket counts of the environment.
 * Everything runs from one thread: nothing the plugin offers may block.
 */
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "capture_log.h"
#include "check.h"
#include "nccl_net.h"
#include "net_pair.h"

#define MiB (1024 * 1024)

static const ncclNet_v12_t* net;
static void* ctx;

/* ---- the plugin's log: test_log, log_buf, log_clear (test/harness/capture_log.h) ---- */

static double now_s(void) { return net_pair_now_s(); }

/* Loops may spin this long before the test calls it a hang. */
#define HANG_S 20.0

/* ---- helpers ---- */

static bool connect_pair(void** s_p, void** r_p) {
  return net_pair_connect(net, ctx, HANG_S, s_p, r_p);
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(p + i, &x, 8);
  }
  for (; i < n; i++) p[i] = (unsigned char)(i * 31 + seed);
}

/* Drives both requests to completion; returns the results of the last test calls. */
static void drive(void* sreq, void* rreq, ncclResult_t* sres, ncclResult_t* rres, int* ssize,
                  int* rsize) {
  int sdone = sreq == NULL, rdone = rreq == NULL;
  *sres = *rres = ncclSuccess;
  double t0 = now_s();
  while ((!sdone || !rdone) && *sres == ncclSuccess && *rres == ncclSuccess &&
         now_s() - t0 < HANG_S) {
    if (!sdone) *sres = net->test(sreq, &sdone, ssize);
    if (!rdone) *rres = net->test(rreq, &rdone, rsize);
  }
  CHECK_MSG(sdone || *sres != ncclSuccess, "send did not finish in %.0f s", HANG_S);
  CHECK_MSG(rdone || *rres != ncclSuccess, "receive did not finish in %.0f s", HANG_S);
}

static void post_send(void* s, void* buf, size_t n, void** req) {
  *req = NULL;
  double t0 = now_s();
  while (*req == NULL && now_s() - t0 < HANG_S)
    if (net->isend(s, buf, n, 0, NULL, NULL, req) != ncclSuccess) break;
}

static void post_recv(void* r, void* buf, size_t n, void** req) {
  *req = NULL;
  int tag = 0;
  double t0 = now_s();
  while (*req == NULL && now_s() - t0 < HANG_S)
    if (net->irecv(r, 1, &buf, &n, &tag, NULL, NULL, req) != ncclSuccess) break;
}

/* One checked transfer of `n` bytes into a receive of `room` bytes. */
static void transfer(void* s, void* r, size_t n, size_t room, unsigned seed) {
  unsigned char* src = malloc(n ? n : 1);
  unsigned char* dst = malloc(room ? room : 1);
  fill(src, n, seed);
  memset(dst, 0xee, room ? room : 1);
  void *sreq, *rreq;
  post_send(s, src, n, &sreq);
  post_recv(r, dst, room, &rreq);
  CHECK_MSG(sreq != NULL && rreq != NULL, "posting %zu bytes", n);
  ncclResult_t sres, rres;
  int ssize = -1, rsize = -1;
  drive(sreq, rreq, &sres, &rres, &ssize, &rsize);
  CHECK_EQ_INT(sres, ncclSuccess);
  CHECK_EQ_INT(rres, ncclSuccess);
  CHECK_EQ_INT(ssize, (long long)n);
  CHECK_EQ_INT(rsize, (long long)n);
  CHECK_MSG(memcmp(src, dst, n) == 0, "%zu bytes arrived changed", n);
  if (room > n) CHECK_MSG(dst[n] == 0xee, "bytes past the send's size were written");
  free(src);
  free(dst);
}

/* ---- cases ---- */

static void test_tables(void* lib) {
  static const char* names[] = {"ncclNetPlugin_v11", "ncclNetPlugin_v10", "ncclNetPlugin_v9",
                                "ncclNetPlugin_v8"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    const char* const* t = dlsym(lib, names[i]);
    CHECK_MSG(t != NULL && strcmp(*t, "Socket") == 0, "%s missing or misnamed", names[i]);
  }
  CHECK_TRUE(dlsym(lib, "ncclNetPlugin_v7") == NULL);
  CHECK_TRUE(dlsym(lib, "ncclCollNetPlugin_v12") == NULL);
}

static void test_properties(void) {
  int ndev = 0;
  CHECK_EQ_INT(net->devices(&ndev), ncclSuccess);
  CHECK_MSG(ndev > 0, "no devices");
  for (int d = 0; d < ndev; d++) {
    ncclNetProperties_v12_t p;
    memset(&p, 0x5a, sizeof(p));
    CHECK_EQ_INT(net->getProperties(d, &p), ncclSuccess);
    CHECK_TRUE(p.name != NULL && p.name[0] != '\0');
    CHECK_EQ_INT(p.guid, d);
    CHECK_EQ_INT(p.ptrSupport, NCCL_PTR_HOST);
    CHECK_EQ_INT(p.regIsGlobal, 0);
    CHECK_EQ_INT(p.forceFlush, 0);
    CHECK_TRUE(p.speed > 0);
    CHECK_EQ_INT(p.maxRecvs, 1);
    CHECK_TRUE(p.maxComms > 1000);
    CHECK_EQ_INT(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    CHECK_EQ_INT(p.vProps.ndevs, 1);
    CHECK_EQ_INT(p.vProps.devs[0], d);
    CHECK_TRUE(p.maxP2pBytes >= (size_t)1 << 30 && p.maxP2pBytes < (size_t)1 << 31);
    CHECK_EQ_INT(p.railId, -1);
    CHECK_EQ_INT(p.planeId, -1);
    printf("device %d: %s speed %d Mbit/s pci %s\n", d, p.name, p.speed,
           p.pciPath ? p.pciPath : "(none)");
  }
  ncclNetProperties_v12_t p;
  CHECK_TRUE(net->getProperties(ndev, &p) != ncclSuccess);
}

static void test_basic(void) {
  void *s, *r;
  if (!connect_pair(&s, &r)) return;
  void* mh = NULL;
  char buf[16];
  CHECK_EQ_INT(net->regMr(s, buf, sizeof(buf), NCCL_PTR_HOST, &mh), ncclSuccess);
  CHECK_TRUE(mh != NULL);
  CHECK_EQ_INT(net->deregMr(s, mh), ncclSuccess);
  CHECK_TRUE(net->regMr(r, buf, sizeof(buf), NCCL_PTR_CUDA, &mh) != ncclSuccess);

  transfer(s, r, 0, 0, 1);
  transfer(s, r, 1, 1, 2);
  transfer(s, r, MiB, MiB, 3);
  transfer(s, r, 256 * (size_t)MiB, 256 * (size_t)MiB, 4);
  /* A receive larger than the send: the send's size is reported. */
  transfer(s, r, 1000, 4096, 5);
  transfer(s, r, 3 * MiB + 7, 8 * MiB, 6);
  transfer(s, r, 0, 4096, 7);

  /* maxRecvs is 1. */
  void* bufs[2] = {buf, buf};
  size_t sizes[2] = {8, 8};
  int tags[2] = {0, 1};
  void* req = (void*)1;
  CHECK_TRUE(net->irecv(r, 2, bufs, sizes, tags, NULL, NULL, &req) != ncclSuccess);
  CHECK_TRUE(req == NULL);
  /* Host memory: nothing to flush. */
  int isz = 8;
  req = (void*)1;
  CHECK_EQ_INT(net->iflush(r, 1, bufs, &isz, NULL, &req), ncclSuccess);
  CHECK_TRUE(req == NULL);
  /* The connection still works after refused calls. */
  transfer(s, r, 12345, 12345, 8);
  CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
  CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
}

static void test_outstanding(void) {
  void *s, *r;
  if (!connect_pair(&s, &r)) return;
  enum { N = NCCL_NET_MAX_REQUESTS };
  unsigned char* src[N];
  unsigned char* dst[N];
  size_t len[N];
  void* sreq[N];
  void* rreq[N];
  for (int i = 0; i < N; i++) {
    len[i] = i % 4 == 0 ? (size_t)(i + 1) * 100 * 1024 : (size_t)i * 37;
    src[i] = malloc(len[i] + 1);
    dst[i] = malloc(len[i] + 1);
    fill(src[i], len[i], 100 + i);
    memset(dst[i], 0, len[i] + 1);
    sreq[i] = rreq[i] = NULL;
    CHECK_EQ_INT(net->isend(s, src[i], len[i], 0, NULL, NULL, &sreq[i]), ncclSuccess);
    CHECK_MSG(sreq[i] != NULL, "isend %d of %d refused", i, N);
  }
  void* extra = (void*)1;
  char b = 0;
  CHECK_EQ_INT(net->isend(s, &b, 1, 0, NULL, NULL, &extra), ncclSuccess);
  CHECK_MSG(extra == NULL, "a 33rd isend was accepted");
  for (int i = 0; i < N; i++) {
    void* d = dst[i];
    size_t room = len[i] + 1;
    int tag = 0;
    CHECK_EQ_INT(net->irecv(r, 1, &d, &room, &tag, NULL, NULL, &rreq[i]), ncclSuccess);
    CHECK_MSG(rreq[i] != NULL, "irecv %d of %d refused", i, N);
  }
  void* d = &b;
  size_t room = 1;
  int tag = 0;
  extra = (void*)1;
  CHECK_EQ_INT(net->irecv(r, 1, &d, &room, &tag, NULL, NULL, &extra), ncclSuccess);
  CHECK_MSG(extra == NULL, "a 33rd irecv was accepted");
  /* Test newest first: completion must not depend on the order of test calls. */
  int sdone[N] = {0}, rdone[N] = {0}, left = 2 * N;
  double t0 = now_s();
  bool ok = true;
  while (left > 0 && ok && now_s() - t0 < HANG_S) {
    for (int i = N - 1; i >= 0 && ok; i--) {
      int sz = -1;
      if (!sdone[i]) {
        ok = net->test(sreq[i], &sdone[i], &sz) == ncclSuccess;
        if (sdone[i]) {
          left--;
          CHECK_EQ_INT(sz, (long long)len[i]);
        }
      }
      if (!rdone[i] && ok) {
        ok = net->test(rreq[i], &rdone[i], &sz) == ncclSuccess;
        if (rdone[i]) {
          left--;
          CHECK_EQ_INT(sz, (long long)len[i]);
        }
      }
    }
  }
  CHECK_MSG(left == 0 && ok, "%d requests left, ok %d", left, ok);
  for (int i = 0; i < N; i++) {
    CHECK_MSG(memcmp(src[i], dst[i], len[i]) == 0, "request %d's bytes", i);
    free(src[i]);
    free(dst[i]);
  }
  /* Slots are free again. */
  transfer(s, r, 4096, 4096, 9);
  CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
  CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
}

static void test_truncation(void) {
  void *s, *r;
  if (!connect_pair(&s, &r)) return;
  static char src[8192], dst[4096];
  void *sreq, *rreq;
  log_clear();
  post_send(s, src, sizeof(src), &sreq);
  post_recv(r, dst, sizeof(dst), &rreq);
  ncclResult_t sres, rres;
  int ssz, rsz;
  drive(NULL, rreq, &sres, &rres, &ssz, &rsz);
  CHECK_EQ_INT(rres, ncclInvalidUsage);
  CHECK_CONTAINS(log_buf, "truncated");
  CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
  CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
}

/* The most bytes the kernel can hold for one connection of `socks` sockets: a send buffer on one
 * side and a receive buffer on the other, per socket, at their largest (/proc/sys/net). */
static size_t socket_buffers_max(int socks) {
  size_t most = 0;
  static const char* const files[] = {"/proc/sys/net/core/rmem_max", "/proc/sys/net/core/wmem_max",
                                      "/proc/sys/net/ipv4/tcp_rmem", "/proc/sys/net/ipv4/tcp_wmem"};
  size_t v[4] = {0, 0, 0, 0};
  for (int i = 0; i < 4; i++) {
    FILE* f = fopen(files[i], "r");
    if (f == NULL) continue;
    unsigned long long a = 0, b = 0, c = 0;
    int n = fscanf(f, "%llu %llu %llu", &a, &b, &c);
    fclose(f);
    v[i] = (size_t)(n == 3 ? c : n >= 1 ? a : 0);
  }
  size_t r = v[0] > v[2] ? v[0] : v[2], w = v[1] > v[3] ? v[1] : v[3];
  most = (r + w) * (size_t)socks;
  return most ? most : (size_t)64 * MiB * (size_t)socks;
}

/*
 * The peer closes while a large request is in flight: an error, in bounded time, never a hang.
 * The contract (plugins/net-socket/README.md, as NCCL's socket transport): a close abandons the
 * comm's requests; bytes already handed to the kernel may still arrive, nothing more is sent. So
 * a receive completes only if every byte of its send left before the sender closed. To keep
 * that impossible whatever the scheduling, each side closes before its peer has posted the
 * matching request, with a request of its own posted (and, for the sender, moving into the
 * socket buffers), and the message is larger than the kernel can buffer.
 */
static void test_peer_close(bool close_receiver) {
  void *s, *r;
  if (!connect_pair(&s, &r)) return;
  int threads = getenv("NCCL_SOCKET_NTHREADS") ? atoi(getenv("NCCL_SOCKET_NTHREADS")) : 1;
  int per = getenv("NCCL_NSOCKS_PERTHREAD") ? atoi(getenv("NCCL_NSOCKS_PERTHREAD")) : 2;
  size_t buffered = socket_buffers_max(1 + (threads > 0 ? threads : 1) * (per > 0 ? per : 1));
  size_t n = 256 * (size_t)MiB;
  if (n < 2 * buffered) n = 2 * buffered;
  if (n > (size_t)1024 * MiB) {
    CHECK_SKIPPED(
        "peer_close: the kernel may buffer %zu MiB per connection here; a closed peer "
        "cannot be told from a finished transfer",
        buffered / MiB);
    CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
    CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
    return;
  }
  unsigned char* src = malloc(n);
  unsigned char* dst = malloc(n);
  memset(src, 1, n);
  void *sreq, *rreq;
  log_clear();
  ncclResult_t res = ncclSuccess;
  int done = 0;
  if (close_receiver) {
    /* A receive in flight when its comm closes; the send comes after. */
    post_recv(r, dst, n, &rreq);
    CHECK_TRUE(rreq != NULL);
    CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
    post_send(s, src, n, &sreq);
    CHECK_TRUE(sreq != NULL);
    double t0 = now_s();
    while (sreq != NULL && res == ncclSuccess && !done && now_s() - t0 < HANG_S)
      res = net->test(sreq, &done, NULL);
    CHECK_MSG(!done, "the send completed although the receiver had closed");
    CHECK_MSG(res == ncclRemoteError || res == ncclSystemError, "send test gave %d", res);
    CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
  } else {
    /* A send in flight (its bytes filling the socket buffers) when its comm closes; the receive
     * comes after, and finds the connection closed before the message's end. */
    post_send(s, src, n, &sreq);
    CHECK_TRUE(sreq != NULL);
    for (int i = 0; i < 100 && sreq != NULL && res == ncclSuccess && !done; i++)
      res = net->test(sreq, &done, NULL);
    CHECK_MSG(!done && res == ncclSuccess, "the send ended (done %d, result %d) with no receiver",
              done, res);
    CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
    post_recv(r, dst, n, &rreq);
    CHECK_TRUE(rreq != NULL);
    double t0 = now_s();
    while (rreq != NULL && res == ncclSuccess && !done && now_s() - t0 < HANG_S)
      res = net->test(rreq, &done, NULL);
    CHECK_MSG(!done, "the receive completed although the sender closed");
    CHECK_MSG(res == ncclRemoteError || res == ncclSystemError, "receive test gave %d", res);
    /* Later calls keep failing rather than hanging. */
    CHECK_TRUE(rreq == NULL || net->test(rreq, &done, NULL) != ncclSuccess);
    CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
  }
  CHECK_CONTAINS(log_buf, "WARN");
  free(src);
  free(dst);
}

/* closeListen while a connect is under way: connect fails, or its comm fails; never a hang. */
static void test_close_listen_pending(void) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof(handle));
  void* l = NULL;
  CHECK_EQ_INT(net->listen(ctx, 0, handle, &l), ncclSuccess);
  void* s = NULL;
  ncclNetDeviceHandle_v12_t* dh = NULL;
  ncclResult_t res = net->connect(ctx, 0, handle, &s, &dh);
  CHECK_EQ_INT(net->closeListen(l), ncclSuccess);
  double t0 = now_s();
  while (res == ncclSuccess && s == NULL && now_s() - t0 < HANG_S)
    res = net->connect(ctx, 0, handle, &s, &dh);
  if (s != NULL) {
    static char buf[4 * MiB];
    void* req = NULL;
    post_send(s, buf, sizeof(buf), &req);
    int done = 0;
    res = ncclSuccess;
    while (req != NULL && res == ncclSuccess && !done && now_s() - t0 < HANG_S)
      res = net->test(req, &done, NULL);
    CHECK_MSG(res != ncclSuccess, "a send to a closed listener succeeded");
    CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
  } else {
    CHECK_MSG(res != ncclSuccess, "connect to a closed listener neither failed nor finished");
  }
}

/* White-box: net-socket's handle and hello (plugins/net-socket/nsk.h), written by hand here to
 * play a peer that lies. */
typedef struct {
  uint64_t magic, listen_id;
  union {
    struct sockaddr sa;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
  } addr;
} nsk_handle_view_t;
typedef struct {
  uint64_t magic, listen_id, conn_id;
  uint32_t index;
  uint16_t nthreads, nsocks;
  uint32_t inline_max, reserved;
} nsk_hello_view_t;

static int raw_hello(const nsk_handle_view_t* h, uint32_t index, uint16_t nsocks) {
  int fd = socket(h->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = h->addr.sa.sa_family == AF_INET ? sizeof(h->addr.sin) : sizeof(h->addr.sin6);
  CHECK_TRUE(fd >= 0 && connect(fd, &h->addr.sa, len) == 0);
  nsk_hello_view_t hello = {h->magic, h->listen_id, 0xfeedull, index, 0, nsocks, 16384, 0};
  CHECK_TRUE(send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) == (ssize_t)sizeof(hello));
  return fd;
}

/* A socket that claims a pending connection's id with other counts is not one of its sockets:
 * accept must not build the connection from it (it once did, reading slots past the connection's
 * own count), and still builds it when the real socket comes. */
static void test_mismatched_hellos(void) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* l = NULL;
  CHECK_EQ_INT(net->listen(ctx, 0, handle, &l), ncclSuccess);
  nsk_handle_view_t h;
  memcpy(&h, handle, sizeof(h));
  int ctrl = raw_hello(&h, 0, 1), liar = raw_hello(&h, 1, 3);
  void* r = NULL;
  ncclNetDeviceHandle_v12_t* dh = NULL;
  double t0 = now_s();
  ncclResult_t res = ncclSuccess;
  while (res == ncclSuccess && r == NULL && now_s() - t0 < 0.3) res = net->accept(l, &r, &dh);
  CHECK_EQ_INT(res, ncclSuccess);
  CHECK_MSG(r == NULL, "accept built a connection from a socket with other counts");
  int data = raw_hello(&h, 1, 1);
  t0 = now_s();
  while (res == ncclSuccess && r == NULL && now_s() - t0 < HANG_S) res = net->accept(l, &r, &dh);
  CHECK_MSG(res == ncclSuccess && r != NULL, "accept did not build the connection (%d)", (int)res);
  if (r != NULL) CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
  CHECK_EQ_INT(net->closeListen(l), ncclSuccess);
  close(ctrl);
  close(liar);
  close(data);
}

/* The v8 table: one-time init, int sizes, no ctx. */
static void test_v8(void* lib) {
  const ncclNet_v8_t* v8 = dlsym(lib, "ncclNetPlugin_v8");
  if (v8 == NULL) return;
  CHECK_EQ_INT(v8->init(test_log), ncclSuccess);
  ncclNetProperties_v8_t p;
  CHECK_EQ_INT(v8->getProperties(0, &p), ncclSuccess);
  CHECK_EQ_INT(p.ptrSupport, NCCL_PTR_HOST);
  CHECK_EQ_INT(p.maxRecvs, 1);
  char handle[NCCL_NET_HANDLE_MAXSIZE] = {0};
  void *l = NULL, *s = NULL, *r = NULL;
  CHECK_EQ_INT(v8->listen(0, handle, &l), ncclSuccess);
  double t0 = now_s();
  while ((s == NULL || r == NULL) && now_s() - t0 < HANG_S) {
    if (s == NULL && v8->connect(0, handle, &s, NULL) != ncclSuccess) break;
    if (r == NULL && v8->accept(l, &r, NULL) != ncclSuccess) break;
  }
  CHECK_TRUE(s != NULL && r != NULL);
  if (s != NULL && r != NULL) {
    static char src[100000], dst[200000];
    fill((unsigned char*)src, sizeof(src), 42);
    void *sreq = NULL, *rreq = NULL;
    void* d = dst;
    int room = (int)sizeof(dst), tag = 0;
    CHECK_EQ_INT(v8->isend(s, src, (int)sizeof(src), 0, NULL, &sreq), ncclSuccess);
    CHECK_EQ_INT(v8->irecv(r, 1, &d, &room, &tag, NULL, &rreq), ncclSuccess);
    int sd = 0, rd = 0, ssz = -1, rsz = -1;
    while ((!sd || !rd) && now_s() - t0 < HANG_S) {
      if (!sd && v8->test(sreq, &sd, &ssz) != ncclSuccess) break;
      if (!rd && v8->test(rreq, &rd, &rsz) != ncclSuccess) break;
    }
    CHECK_TRUE(sd && rd);
    CHECK_EQ_INT(rsz, (int)sizeof(src));
    CHECK_TRUE(memcmp(src, dst, sizeof(src)) == 0);
  }
  if (s) v8->closeSend(s);
  if (r) v8->closeRecv(r);
  if (l) v8->closeListen(l);
}

static void throughput(void) {
  void *s, *r;
  if (!connect_pair(&s, &r)) return;
  size_t n = 1024 * (size_t)MiB;
  unsigned char* src = malloc(n);
  unsigned char* dst = malloc(n);
  memset(src, 3, n);
  memset(dst, 0, n); /* fault the pages in before timing */
  ncclResult_t sres, rres;
  int ssz, rsz;
  double best = 0;
  for (int rep = 0; rep < 3; rep++) {
    void *sreq, *rreq;
    double t0 = now_s();
    post_recv(r, dst, n, &rreq);
    post_send(s, src, n, &sreq);
    drive(sreq, rreq, &sres, &rres, &ssz, &rsz);
    double t = now_s() - t0;
    CHECK_EQ_INT(rsz, (long long)n);
    if (n / t > best) best = (double)n / t;
  }
  CHECK_TRUE(dst[n - 1] == 3 && dst[0] == 3);
  const char* th = getenv("NCCL_SOCKET_NTHREADS");
  const char* so = getenv("NCCL_NSOCKS_PERTHREAD");
  printf(
      "throughput: 1 GiB over loopback, NCCL_SOCKET_NTHREADS=%s NCCL_NSOCKS_PERTHREAD=%s: "
      "%.2f GB/s (best of 3)\n",
      th ? th : "(default)", so ? so : "(default)", best / 1e9);
  free(src);
  free(dst);
  CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
  CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s libnccl-net-socket.so [throughput-only]\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  net = dlsym(lib, "ncclNetPlugin_v12");
  CHECK_TRUE(net != NULL);
  if (net == NULL) return check_finish("net-socket");
  CHECK_EQ_STR(net->name, "Socket");
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK_EQ_INT(net->init(&ctx, 0x1234, &cfg, test_log, NULL), ncclSuccess);
  if (argc > 2 && strcmp(argv[2], "throughput-only") == 0) {
    throughput();
  } else {
    test_tables(lib);
    test_properties();
    test_basic();
    test_outstanding();
    test_truncation();
    test_peer_close(true);
    test_peer_close(false);
    test_close_listen_pending();
    test_mismatched_hellos();
    test_v8(lib);
    throughput();
  }
  CHECK_EQ_INT(net->finalize(ctx), ncclSuccess);
  return check_finish("net-socket");
}
