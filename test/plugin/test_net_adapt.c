/*
 * The net loader (core/plugin/plugin_net.h) against functional mock plugins of every net and
 * collnet ABI version (mock_net.c): properties converted to v12 with the defaults, connection
 * setup with retries, data through the loopback with multi-receive tags, the old versions' size
 * limits, init once per library for v6..v10 and per communicator for v11+, the traffic class,
 * the optional-completion hint reaching only v9+, NULL optional entries, collnet adaptations, and
 * net_select's rules (each case in a child process: the knobs are read once per process).
 * Run with CHOIR_PLUGIN_DIR pointing at the mocks.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "log_file.h"
#include "mock_net.h"
#include "plugin_net.h"

/* log_path and log_text: test/harness/log_file.h */

static mock_net_stats_t* stats_of(net_t* net) {
  void* h = dlopen(net_lib_path(net), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h == NULL) return NULL;
  mock_net_stats_fn fn = (mock_net_stats_fn)dlsym(h, MOCK_NET_STATS_SYMBOL);
  dlclose(h); /* the net_t keeps its own reference */
  return fn ? fn() : NULL;
}

/* Wait for a request; returns the sizes through `sizes` (may be NULL). */
static int wait_req(net_t* net, void* req, int* sizes) {
  for (int i = 0; i < 1000; i++) {
    int done = 0;
    if (net_test(net, req, &done, sizes) != ncclSuccess) return 0;
    if (done) return 1;
  }
  return 0;
}

/* listen / connect / accept until both sides exist; returns the number of connect calls. */
static int connect_pair(net_t* net, void** lc, void** sc, void** rc) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  *lc = *sc = *rc = NULL;
  if (net_listen(net, 0, handle, lc) != ncclSuccess) return 0;
  int calls = 0;
  while (*sc == NULL && calls < 10) {
    if (net_connect(net, 0, handle, sc) != ncclSuccess) return 0;
    calls++;
  }
  for (int i = 0; i < 10 && *rc == NULL; i++)
    if (net_accept(net, *lc, rc) != ncclSuccess) return 0;
  return *sc != NULL && *rc != NULL ? calls : 0;
}

static void test_props(net_t* net, int v) {
  ncclNetProperties_v12_t p;
  memset(&p, 0x55, sizeof(p));
  CHECK_EQ_INT(net_props(net, 1, &p), ncclSuccess);
  CHECK_EQ_STR(p.name, "mockdev");
  CHECK_EQ_INT(p.guid, 0x1001);
  CHECK_EQ_INT(p.ptrSupport, NCCL_PTR_HOST);
  CHECK_EQ_INT(p.speed, MOCK_NET_SPEED);
  CHECK_EQ_INT(p.port, 2);
  CHECK_TRUE(p.latency == 1.5f);
  CHECK_EQ_INT(p.maxComms, 1024);
  CHECK_EQ_INT(p.maxRecvs, MOCK_NET_MAX_RECVS);
  CHECK_EQ_INT(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  CHECK_EQ_INT(p.netDeviceVersion, v >= 7 ? 3 : 0);
  CHECK_EQ_INT(p.regIsGlobal, v >= 8 ? 1 : 0);
  CHECK_EQ_INT(p.forceFlush, v >= 9 ? 1 : 0);
  CHECK_EQ_INT(p.vProps.ndevs, 1);
  CHECK_EQ_INT(p.vProps.devs[0], 1);
  CHECK_EQ_INT(p.maxP2pBytes, v >= 9 ? MOCK_NET_MAX_P2P : (1ULL << 30));
  CHECK_EQ_INT(p.maxCollBytes, v >= 9 ? MOCK_NET_MAX_COLL : (512ULL << 20));
  CHECK_EQ_INT(p.maxMultiRequestSize, v >= 11 ? 4 : 1);
  CHECK_EQ_INT(p.railId, v >= 12 ? 3 : -1);
  CHECK_EQ_INT(p.planeId, v >= 12 ? 2 : -1);
}

static void test_data(net_t* net, int v, mock_net_stats_t* st) {
  void *lc, *sc, *rc;
  int calls = connect_pair(net, &lc, &sc, &rc);
  CHECK_MSG(calls == 2, "v%d: connect took %d calls (the mock wants 2)", v, calls);
  if (calls == 0) return;
  /* Traffic class: at connect for v10, through init for v11+, unknown to older versions. */
  CHECK_EQ_INT(st->last_traffic_class, v >= 10 ? 5 : -1);

  static char sbuf[4096], rbuf[4096];
  void *smh = NULL, *rmh = NULL;
  CHECK_EQ_INT(net_reg_mr(net, sc, sbuf, sizeof(sbuf), NCCL_PTR_HOST, &smh), ncclSuccess);
  CHECK_EQ_INT(st->last_reg_size, sizeof(sbuf));
  CHECK_EQ_INT(net_reg_mr(net, rc, rbuf, sizeof(rbuf), NCCL_PTR_HOST, &rmh), ncclSuccess);

  /* One message. */
  for (int i = 0; i < 1000; i++) sbuf[i] = (char)(i * 7 + v);
  memset(rbuf, 0, sizeof(rbuf));
  void *sreq = NULL, *rreq = NULL;
  void* rdata[3] = {rbuf};
  size_t rsizes[3] = {2000};
  int rtags[3] = {0};
  void* rmhs[3] = {rmh, rmh, rmh};
  CHECK_EQ_INT(net_irecv(net, rc, 1, rdata, rsizes, rtags, rmhs, NULL, &rreq), ncclSuccess);
  CHECK_EQ_INT(net_isend(net, sc, sbuf, 1000, 0, smh, NULL, &sreq), ncclSuccess);
  CHECK_EQ_INT(st->last_send_size, 1000);
  int got[3] = {-1, -1, -1};
  CHECK_TRUE(sreq != NULL && wait_req(net, sreq, NULL));
  CHECK_TRUE(rreq != NULL && wait_req(net, rreq, got));
  CHECK_EQ_INT(got[0], 1000);
  CHECK_TRUE(memcmp(sbuf, rbuf, 1000) == 0);

  /* A multi-receive: tags pick the slot, whatever the order of the sends. */
  rdata[0] = rbuf, rdata[1] = rbuf + 100, rdata[2] = rbuf + 200;
  rsizes[0] = rsizes[1] = rsizes[2] = 100;
  rtags[0] = 7, rtags[1] = 8, rtags[2] = 9;
  memset(rbuf, 0, 300);
  rreq = NULL;
  CHECK_EQ_INT(net_irecv(net, rc, 3, rdata, rsizes, rtags, rmhs, NULL, &rreq), ncclSuccess);
  const int order[3] = {9, 7, 8};
  void* sreqs[3] = {NULL};
  for (int i = 0; i < 3; i++) {
    int t = order[i];
    memset(sbuf + 1000 * i, 'a' + t, 50);
    CHECK_EQ_INT(net_isend(net, sc, sbuf + 1000 * i, (size_t)(t * 3), t, smh, NULL, &sreqs[i]),
                 ncclSuccess);
  }
  for (int i = 0; i < 3; i++) CHECK_TRUE(sreqs[i] != NULL && wait_req(net, sreqs[i], NULL));
  CHECK_TRUE(rreq != NULL && wait_req(net, rreq, got));
  CHECK_EQ_INT(got[0], 21);
  CHECK_EQ_INT(got[1], 24);
  CHECK_EQ_INT(got[2], 27);
  CHECK_TRUE(rbuf[0] == 'a' + 7 && rbuf[100] == 'a' + 8 && rbuf[200] == 'a' + 9);
  CHECK_TRUE(rbuf[20] == 'a' + 7 && rbuf[21] == 0);

  /* The optional-completion hint reaches v9+ only; older plugins see a plain NULL. */
  int hints = st->hint_seen;
  rdata[0] = rbuf, rsizes[0] = 100, rtags[0] = 1;
  rreq = (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION;
  CHECK_EQ_INT(net_irecv(net, rc, 1, rdata, rsizes, rtags, rmhs, NULL, &rreq), ncclSuccess);
  CHECK_EQ_INT(st->hint_seen - hints, v >= 9 ? 1 : 0);
  CHECK_TRUE(rreq != NULL && rreq != (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION);
  CHECK_EQ_INT(net_isend(net, sc, sbuf, 5, 1, smh, NULL, &sreq), ncclSuccess);
  CHECK_TRUE(wait_req(net, sreq, NULL) && wait_req(net, rreq, NULL));

  /* Flush. */
  int flushes = st->flush_calls;
  int fsizes[1] = {5};
  void* freq = NULL;
  CHECK_EQ_INT(net_iflush(net, rc, 1, rdata, fsizes, rmhs, &freq), ncclSuccess);
  CHECK_TRUE(freq != NULL && wait_req(net, freq, NULL));
  CHECK_EQ_INT(st->flush_calls, flushes + 1);

  /* What old versions cannot carry is refused before the plugin sees it. */
  void* mh = NULL;
  size_t big = (size_t)3 << 30;
  err_clear_last();
  ncclResult_t res = net_reg_mr(net, sc, sbuf, big, NCCL_PTR_HOST, &mh);
  if (v <= 7) {
    CHECK_EQ_INT(res, ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "registers at most");
  } else {
    CHECK_EQ_INT(res, ncclSuccess);
    CHECK_EQ_INT(st->last_reg_size, big); /* the mock does not touch the memory */
    CHECK_EQ_INT(net_dereg_mr(net, sc, mh), ncclSuccess);
  }
  if (v <= 8) {
    size_t too_big = (size_t)INT_MAX + 1;
    err_clear_last();
    CHECK_EQ_INT(net_isend(net, sc, sbuf, too_big, 0, smh, NULL, &sreq), ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "sends at most");
    rsizes[0] = too_big;
    CHECK_EQ_INT(net_irecv(net, rc, 1, rdata, rsizes, rtags, rmhs, NULL, &rreq), ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "receives at most");
  }

  /* Optional entries: present in these mocks from the version that has them. */
  void* dmh = NULL;
  res = net_get_device_mr(net, rc, rmh, &dmh);
  CHECK_EQ_INT(res, v >= 7 ? ncclSuccess : ncclInvalidUsage);
  if (v < 7) CHECK_CONTAINS(err_last(), "getDeviceMr is not supported by plugin MockFn_v6");
  CHECK_EQ_INT(net_irecv_consumed(net, rc, 1, NULL), v >= 7 ? ncclSuccess : ncclInvalidUsage);
  CHECK_EQ_INT(net_reg_mr_dmabuf(net, sc, sbuf, 64, NCCL_PTR_CUDA, 0, -1, &mh), ncclSuccess);
  CHECK_EQ_INT(st->last_dmabuf_size, 64);
  CHECK_EQ_INT(net_dereg_mr(net, sc, mh), ncclSuccess);
  ncclNetVDeviceProps_v12_t vp = {2, {0, 1}};
  int vdev = -1;
  res = net_make_vdevice(net, &vp, &vdev);
  CHECK_EQ_INT(res, v >= 9 ? ncclSuccess : ncclInvalidUsage);
  if (v >= 9) CHECK_EQ_INT(vdev, MOCK_NET_NDEV + 21);
  ncclNetVDeviceProps_v12_t vp5 = {5, {0, 1, 0, 1, 0}};
  CHECK_EQ_INT(net_make_vdevice(net, &vp5, &vdev), v >= 12 ? ncclSuccess : ncclInvalidUsage);
  ncclNetAttr_v12_t attr = NCCL_NET_ATTR_INIT;
  CHECK_EQ_INT(net_set_attr(net, &attr), ncclSuccess);

  CHECK_EQ_INT(net_dereg_mr(net, sc, smh), ncclSuccess);
  CHECK_EQ_INT(net_dereg_mr(net, rc, rmh), ncclSuccess);
  CHECK_EQ_INT(net_close_send(net, sc), ncclSuccess);
  CHECK_EQ_INT(net_close_recv(net, rc), ncclSuccess);
  CHECK_EQ_INT(net_close_listen(net, lc), ncclSuccess);
}

static void test_collnet(net_t* a, net_t* b, int v, int cv, mock_net_stats_t* st) {
  collnet_t* cn = net_collnet(a);
  CHECK_MSG(cn != NULL, "v%d: no collnet", v);
  if (cn == NULL) return;
  CHECK_TRUE(net_collnet(a) == cn);
  CHECK_EQ_INT(collnet_version(cn), cv);
  CHECK_EQ_INT(collnet_ndev(cn), MOCK_NET_NDEV);
  CHECK_EQ_INT(st->coll_init_calls, 1);
  if (b != NULL) {
    CHECK_TRUE(net_collnet(b) != NULL);
    CHECK_EQ_INT(st->coll_init_calls, cv >= 11 ? 2 : 1);
  }
  ncclNetProperties_v12_t p;
  CHECK_EQ_INT(collnet_props(cn, 0, &p), ncclSuccess);
  CHECK_EQ_INT(p.maxCollBytes, cv >= 9 ? MOCK_NET_MAX_COLL : (512ULL << 20));
  CHECK_EQ_INT(p.railId, cv >= 12 ? 3 : -1);

  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *cc = NULL;
  CHECK_EQ_INT(collnet_listen(cn, 0, handle, &lc), ncclSuccess);
  void* handles[1] = {handle};
  CHECK_EQ_INT(collnet_connect(cn, handles, 1, 0, lc, &cc), ncclSuccess);
  if (cc == NULL) return;
  int sup = -1;
  CHECK_EQ_INT(collnet_reduce_support(cn, ncclFloat32, ncclSum, &sup), ncclSuccess);
  CHECK_EQ_INT(sup, 1);
  static float sendf[64], recvf[64];
  void *smh = NULL, *mh = NULL;
  CHECK_EQ_INT(collnet_reg_mr(cn, cc, sendf, sizeof(sendf), NCCL_PTR_HOST, &smh), ncclSuccess);
  CHECK_EQ_INT(st->coll_last_reg_size, sizeof(sendf));
  ncclResult_t res = collnet_reg_mr(cn, cc, sendf, (size_t)3 << 30, NCCL_PTR_HOST, &mh);
  CHECK_EQ_INT(res, cv <= 7 ? ncclInvalidUsage : ncclSuccess);
  if (res == ncclSuccess) CHECK_EQ_INT(collnet_dereg_mr(cn, cc, mh), ncclSuccess);

  for (int i = 0; i < 64; i++) sendf[i] = (float)i + 0.5f;
  void* req = NULL;
  int done = 0, size = -1;
  CHECK_EQ_INT(collnet_iallreduce(cn, cc, sendf, recvf, 16, ncclFloat32, ncclSum, smh, smh, &req),
               ncclSuccess);
  CHECK_EQ_INT(st->coll_last_count, 16);
  CHECK_EQ_INT(collnet_test(cn, req, &done, &size), ncclSuccess);
  CHECK_TRUE(done == 1 && size == 64 && recvf[15] == 15.5f);
  CHECK_EQ_INT(collnet_iallreduce(cn, cc, sendf, recvf, (size_t)INT_MAX + 1, ncclFloat32, ncclSum,
                                  smh, smh, &req),
               cv <= 8 ? ncclInvalidUsage : ncclSuccess);
  if (cv > 8) {
    /* The mock copies nothing that large: only the count that reached it is checked. */
    CHECK_EQ_INT(st->coll_last_count, (size_t)INT_MAX + 1);
    CHECK_EQ_INT(collnet_test(cn, req, &done, NULL), ncclSuccess);
  }

  static char parts_mem[2][64];
  ncclNetSGE_v12_t parts[2] = {{smh, parts_mem[0], 32}, {smh, parts_mem[1], 32}};
  res = collnet_iallgather(cn, cc, sendf, 2, parts, 32, 0, 64, smh, &req);
  CHECK_EQ_INT(res, cv >= 8 ? ncclSuccess : ncclInvalidUsage);
  if (res == ncclSuccess) {
    CHECK_EQ_INT(st->coll_last_nparts, 2);
    CHECK_EQ_INT(st->coll_last_part_size, 32);
    CHECK_TRUE(memcmp(parts_mem[1], sendf, 32) == 0);
    CHECK_EQ_INT(collnet_test(cn, req, &done, NULL), ncclSuccess);
  } else {
    CHECK_CONTAINS(err_last(), "iallgather is not supported by plugin MockColl_v");
  }
  res = collnet_ireducescatter(cn, cc, 1, parts, recvf, 32, 0, 32, ncclFloat32, ncclSum, smh, &req);
  CHECK_EQ_INT(res, cv >= 8 ? ncclSuccess : ncclInvalidUsage);
  if (res == ncclSuccess) CHECK_EQ_INT(collnet_test(cn, req, &done, NULL), ncclSuccess);
  if (cv == 8) {
    ncclNetSGE_v12_t huge = {smh, parts_mem[0], (size_t)UINT32_MAX + 1};
    CHECK_EQ_INT(collnet_iallgather(cn, cc, sendf, 1, &huge, 32, 0, 64, smh, &req),
                 ncclInvalidUsage);
  }
  CHECK_EQ_INT(collnet_iflush(cn, cc, recvf, 64, smh, &req), ncclSuccess);
  CHECK_EQ_INT(collnet_test(cn, req, &done, &size), ncclSuccess);
  CHECK_EQ_INT(size, 64);
  CHECK_EQ_INT(collnet_reg_mr_dmabuf(cn, cc, sendf, 64, NCCL_PTR_CUDA, 0, -1, &mh), ncclSuccess);
  CHECK_EQ_INT(collnet_dereg_mr(cn, cc, mh), ncclSuccess);
  CHECK_EQ_INT(collnet_dereg_mr(cn, cc, smh), ncclSuccess);
  CHECK_EQ_INT(collnet_close_coll(cn, cc), ncclSuccess);
  CHECK_EQ_INT(collnet_close_listen(cn, lc), ncclSuccess);
}

static void test_version(int v) {
  char spec[64], name[64];
  snprintf(spec, sizeof(spec), "mockfn%d", v);
  snprintf(name, sizeof(name), "MockFn_v%d", v);
  net_t *a = NULL, *b = NULL;
  CHECK_EQ_INT(net_open(spec, 0x1000 + (uint64_t)v, 5, &a), ncclSuccess);
  if (a == NULL) return;
  CHECK_EQ_INT(net_version(a), v);
  CHECK_EQ_STR(net_name(a), name);
  CHECK_EQ_INT(net_ndev(a), MOCK_NET_NDEV);
  mock_net_stats_t* st = stats_of(a);
  CHECK_TRUE(st != NULL);
  if (st == NULL) return;
  CHECK_EQ_INT(st->version, v);
  CHECK_EQ_INT(st->init_calls, 1);
  CHECK_EQ_INT(st->logger_given, 1);
  CHECK_EQ_INT(st->prof_given, v >= 10 ? 1 : 0);
  if (v >= 11) CHECK_EQ_INT(st->last_comm_id, 0x1000 + (uint64_t)v);
  /* The logger handed to the plugin writes into Choir's log. */
  char line[80];
  snprintf(line, sizeof(line), "mock net %s: init", name);
  CHECK_CONTAINS(log_text(), line);

  /* A second communicator: v6..v10 share the one-time init, v11+ get their own. */
  CHECK_EQ_INT(net_open(spec, 0x2000, 7, &b), ncclSuccess);
  CHECK_EQ_INT(st->init_calls, v >= 11 ? 2 : 1);
  if (v >= 11) CHECK_EQ_INT(st->live_ctx, 2);

  test_props(a, v);
  test_data(a, v, st);
  test_collnet(a, b, v, v, st);

  net_close(b);
  if (v >= 11) {
    CHECK_EQ_INT(st->finalize_calls, 1);
    CHECK_EQ_INT(st->coll_finalize_calls, 1);
  }
  int finalized = st->finalize_calls;
  int coll_finalized = st->coll_finalize_calls;
  net_close(a); /* may unload the library: st is not read after this */
  if (v >= 11) {
    CHECK_EQ_INT(finalized, 1);
    CHECK_EQ_INT(coll_finalized, 1);
  }
  net_close(NULL);
}

/* Plugins of different versions in use at the same time, and the edge cases. */
static void test_mixed_and_edges(void) {
  net_t *n6 = NULL, *n12 = NULL, *mixed = NULL, *noopt = NULL, *noopt9 = NULL, *x = NULL;
  CHECK_EQ_INT(net_open("mockfn6", 1, -1, &n6), ncclSuccess);
  CHECK_EQ_INT(net_open("mockfn12", 2, -1, &n12), ncclSuccess);
  if (n6 != NULL && n12 != NULL) {
    void *lc6, *sc6, *rc6, *lc12, *sc12, *rc12;
    CHECK_TRUE(connect_pair(n6, &lc6, &sc6, &rc6) > 0);
    CHECK_TRUE(connect_pair(n12, &lc12, &sc12, &rc12) > 0);
    char s[8] = "abcdefg", r6[8] = "", r12[8] = "";
    void *q1 = NULL, *q2 = NULL, *q3 = NULL, *q4 = NULL;
    void* d6[1] = {r6};
    void* d12[1] = {r12};
    size_t sz[1] = {8};
    int tg[1] = {0};
    void* mhs[1] = {NULL};
    CHECK_EQ_INT(net_irecv(n6, rc6, 1, d6, sz, tg, mhs, NULL, &q1), ncclSuccess);
    CHECK_EQ_INT(net_irecv(n12, rc12, 1, d12, sz, tg, mhs, NULL, &q2), ncclSuccess);
    CHECK_EQ_INT(net_isend(n12, sc12, s, 8, 0, NULL, NULL, &q3), ncclSuccess);
    CHECK_EQ_INT(net_isend(n6, sc6, s, 8, 0, NULL, NULL, &q4), ncclSuccess);
    CHECK_TRUE(wait_req(n6, q1, NULL) && wait_req(n12, q2, NULL));
    CHECK_TRUE(wait_req(n12, q3, NULL) && wait_req(n6, q4, NULL));
    CHECK_EQ_STR(r6, "abcdefg");
    CHECK_EQ_STR(r12, "abcdefg");
    net_close_send(n6, sc6), net_close_recv(n6, rc6), net_close_listen(n6, lc6);
    net_close_send(n12, sc12), net_close_recv(n12, rc12), net_close_listen(n12, lc12);
  }
  net_close(n6);
  net_close(n12);

  /* Net v12 with collnet v8 in one library: each used at its own version. */
  CHECK_EQ_INT(net_open("fnmixed", 3, -1, &mixed), ncclSuccess);
  if (mixed != NULL) {
    CHECK_EQ_INT(net_version(mixed), 12);
    mock_net_stats_t* st = stats_of(mixed);
    if (st != NULL) test_collnet(mixed, NULL, 12, 8, st);
    net_close(mixed);
  }

  /* Optional entries left NULL. */
  CHECK_EQ_INT(net_open("fnnoopt", 4, -1, &noopt), ncclSuccess);
  if (noopt != NULL) {
    void* mh = NULL;
    int d = 0;
    err_clear_last();
    CHECK_EQ_INT(net_reg_mr_dmabuf(noopt, NULL, NULL, 64, NCCL_PTR_CUDA, 0, -1, &mh),
                 ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "regMrDmaBuf is not supported by plugin MockNoOpt");
    CHECK_EQ_INT(net_get_device_mr(noopt, NULL, NULL, &mh), ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "getDeviceMr is not supported by plugin MockNoOpt");
    CHECK_EQ_INT(net_irecv_consumed(noopt, NULL, 1, NULL), ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "irecvConsumed is not supported by plugin MockNoOpt");
    ncclNetVDeviceProps_v12_t vp = {2, {0, 1}};
    CHECK_EQ_INT(net_make_vdevice(noopt, &vp, &d), ncclInvalidUsage);
    CHECK_CONTAINS(err_last(), "makeVDevice is not supported by plugin MockNoOpt");
    ncclNetAttr_v12_t attr = NCCL_NET_ATTR_INIT;
    CHECK_EQ_INT(net_set_attr(noopt, &attr), ncclSuccess); /* a hint: skipped */
    CHECK_TRUE(net_collnet(noopt) == NULL);                /* the library has none */
    net_close(noopt);
  }
  CHECK_EQ_INT(net_open("fnnoopt9", 5, -1, &noopt9), ncclSuccess);
  if (noopt9 != NULL) {
    collnet_t* cn = net_collnet(noopt9);
    CHECK_TRUE(cn != NULL);
    if (cn != NULL) {
      void* mh = NULL;
      CHECK_EQ_INT(collnet_version(cn), 6);
      CHECK_EQ_INT(collnet_reg_mr_dmabuf(cn, NULL, NULL, 64, NCCL_PTR_CUDA, 0, -1, &mh),
                   ncclInvalidUsage);
      CHECK_CONTAINS(err_last(), "regMrDmaBuf is not supported by plugin MockColl_v6");
    }
    net_close(noopt9);
  }

  /* A plugin whose init fails cannot be opened; nothing is left behind. */
  err_clear_last();
  CHECK_EQ_INT(net_open("fnfailinit", 6, -1, &x), ncclSystemError);
  CHECK_TRUE(x == NULL);
  CHECK_CONTAINS(err_last(), "could not initialize plugin FailInit");
}

/* ---- net_select, one child process per case ---- */

typedef struct {
  const char* what;
  const char* net_plugin; /* NCCL_NET_PLUGIN, NULL: unset */
  const char* net_env;    /* NCCL_NET */
  const char* net_arg;    /* net_select's net_name */
  const char* extra_env;  /* "VAR=value" */
  ncclResult_t res;
  const char* name;   /* expected table name */
  const char* msg[3]; /* expected in the log (or, on failure, in the last error) */
} select_case_t;

static const select_case_t select_cases[] = {
    {"list order", "mockfn9,mockfn12", NULL, NULL, NULL, ncclSuccess, "MockFn_v9", {NULL}},
    {"init failure and no devices skipped",
     "fnfailinit,fnnodev,mockfn11",
     NULL,
     NULL,
     "MOCK_NODEV_NDEV=0",
     ncclSuccess,
     "MockFn_v11",
     {"passed over: fnfailinit: init of 'FailInit' failed", "fnnodev: 'NoDev' has no devices",
      "NET/Plugin: using MockFn_v11 (v11"}},
    {"none: Choir's own", "none", NULL, NULL, NULL, ncclSuccess, "Socket", {NULL}},
    {"unset: default absent, Choir's own",
     NULL,
     NULL,
     NULL,
     NULL,
     ncclSuccess,
     "Socket",
     {"could not find 'libnccl-net.so'"}},
    {"NCCL_NET by table name, any case",
     "mockfn9",
     "sOcKeT",
     NULL,
     NULL,
     ncclSuccess,
     "Socket",
     {"its name 'MockFn_v9' is not 'sOcKeT'"}},
    {"net_name argument",
     "mockfn9,mockfn10",
     NULL,
     "mockfn_V10",
     NULL,
     ncclSuccess,
     "MockFn_v10",
     {NULL}},
    {"NCCL_NET overrides net_name",
     "mockfn10,mockfn9",
     "MockFn_v9",
     "Socket",
     NULL,
     ncclSuccess,
     "MockFn_v9",
     {NULL}},
    {"named library that does not load is a warning",
     "doesnotexist,mockfn12",
     NULL,
     NULL,
     NULL,
     ncclSuccess,
     "MockFn_v12",
     {"NCCL WARN NET/Plugin: could not find 'doesnotexist'"}},
    {"nothing usable",
     "none",
     NULL,
     NULL,
     "MOCK_SOCKET_NDEV=0",
     ncclInvalidUsage,
     NULL,
     {"no usable net plugin", "'Socket' has no devices"}},
    {"no plugin of that name",
     "mockfn12",
     "nosuch",
     NULL,
     NULL,
     ncclInvalidUsage,
     NULL,
     {"no usable net plugin named 'nosuch'", "its name 'MockFn_v12' is not 'nosuch'"}},
};

static int run_select_case(const select_case_t* c, int idx) {
  snprintf(log_path, sizeof(log_path), "/tmp/choir-net-adapt.%d.sel%d.log", (int)getpid(), idx);
  unlink(log_path);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  if (c->net_plugin) setenv("NCCL_NET_PLUGIN", c->net_plugin, 1);
  if (c->net_env) setenv("NCCL_NET", c->net_env, 1);
  if (c->extra_env) putenv((char*)c->extra_env);
  net_t* net = NULL;
  ncclResult_t res = net_select(c->net_arg, 42, -1, &net);
  CHECK_MSG(res == c->res, "%s: result %d", c->what, (int)res);
  if (res == ncclSuccess && net != NULL) {
    CHECK_MSG(c->name && strcmp(net_name(net), c->name) == 0, "%s: selected %s", c->what,
              net_name(net));
    net_close(net);
  }
  const char* text = res == ncclSuccess ? log_text() : err_last();
  for (int i = 0; i < 3 && c->msg[i]; i++)
    CHECK_MSG(strstr(text, c->msg[i]) != NULL, "%s: '%s' not in: %s", c->what, c->msg[i], text);
  unlink(log_path);
  return check_failures_ ? 1 : 0;
}

static void test_select(void) {
  for (size_t i = 0; i < sizeof(select_cases) / sizeof(select_cases[0]); i++) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) _exit(run_select_case(&select_cases[i], (int)i));
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "select case '%s' failed",
              select_cases[i].what);
  }
}

int main(void) {
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    fprintf(stderr, "CHOIR_PLUGIN_DIR must point at the mock plugins\n");
    return 1;
  }
  unsetenv("NCCL_NET_PLUGIN");
  unsetenv("NCCL_NET");
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV", 1);
  /* Before this process logs anything: each child opens its own log file. */
  test_select();

  snprintf(log_path, sizeof(log_path), "/tmp/choir-net-adapt.%d.log", (int)getpid());
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  for (int v = 6; v <= 12; v++) test_version(v);
  test_mixed_and_edges();
  unlink(log_path);
  return check_finish("net-adapt");
}
