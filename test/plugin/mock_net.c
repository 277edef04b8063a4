/*
 * A functional mock net plugin, one source built once per ABI version (Vulkan-loader style), so
 * that every adaptation path of core/plugin/plugin_net.c runs against a table of exactly that
 * version:
 *   MOCK_V=N        export ncclNetPlugin_vN (6..12)
 *   MOCK_CV=N       also export ncclCollNetPlugin_vN
 *   MOCK_NAME="x"   the table name (default MockFn_vN)
 *   MOCK_INIT_FAIL  init fails
 *   MOCK_NDEV_ENV="VAR"  number of devices read from VAR at each devices() (default 2)
 *   MOCK_NO_OPTIONAL     leave every optional entry NULL
 * The network is an in-process loopback: listen registers a slot, connect finds it through the
 * handle, accept takes the connection; sends and receives on a connection match in posting order,
 * tags choosing the slot of the first posted multi-receive. Calls are recorded in the stats that
 * mock_net_stats() exports.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "mock_net.h"
#include "nccl_net.h"

#define EXPORT __attribute__((visibility("default")))
#define MOCK_CAT_(a, b) a##b
#define MOCK_CAT(a, b) MOCK_CAT_(a, b)
#define MOCK_CAT3_(a, b, c) a##b##c
#define MOCK_CAT3(a, b, c) MOCK_CAT3_(a, b, c)
#define MOCK_STR_(x) #x
#define MOCK_STR(x) MOCK_STR_(x)

#ifndef MOCK_NAME
#define MOCK_NAME "MockFn_v" MOCK_STR(MOCK_V)
#endif

#define MOCK_PV MOCK_V
#include "mock_net_props.h"
#undef MOCK_PV
#if defined(MOCK_CV) && MOCK_CV != MOCK_V
#define MOCK_PV MOCK_CV
#include "mock_net_props.h"
#undef MOCK_PV
#endif

static mock_net_stats_t stats = {.version = MOCK_V, .last_traffic_class = -2};

EXPORT mock_net_stats_t* mock_net_stats(void) { return &stats; }

/* ---- the loopback network ---- */

#define MOCK_QUEUE 64
#define MOCK_LISTENS 256
#define MOCK_MAGIC 0x6d6f636bu

typedef struct mock_req {
  bool done;
  bool is_recv;
  int n;
  void* data[NCCL_NET_MAX_REQUESTS];
  size_t size[NCCL_NET_MAX_REQUESTS]; /* send: bytes; recv: posted capacity */
  int tag[NCCL_NET_MAX_REQUESTS];
  bool filled[NCCL_NET_MAX_REQUESTS];
  size_t got[NCCL_NET_MAX_REQUESTS];
} mock_req_t;

typedef struct mock_conn {
  mock_req_t* sends[MOCK_QUEUE];
  int nsends;
  mock_req_t* recvs[MOCK_QUEUE];
  int nrecvs;
  int traffic_class;
  int open_sides;
} mock_conn_t;

typedef struct mock_listen {
  int id;
  mock_conn_t* pending[MOCK_QUEUE];
  int npending;
} mock_listen_t;

typedef struct {
  unsigned magic;
  int id;
  int stage; /* connect needs two calls, to exercise the retry contract */
} mock_handle_t;

typedef struct {
  uint64_t comm_id;
  int traffic_class;
} mock_ctx_t;

typedef struct {
  size_t size;
} mock_mr_t;

static mock_listen_t* listens[MOCK_LISTENS];

static void mock_pop(mock_req_t** q, int* n) {
  memmove(q, q + 1, (size_t)(*n - 1) * sizeof(*q));
  (*n)--;
}

/* Match the oldest send with a free slot of the oldest receive. */
static ncclResult_t mock_match(mock_conn_t* c) {
  while (c->nsends > 0 && c->nrecvs > 0) {
    mock_req_t* s = c->sends[0];
    mock_req_t* r = c->recvs[0];
    int slot = -1;
    for (int i = 0; i < r->n && slot < 0; i++)
      if (!r->filled[i] && r->tag[i] == s->tag[0]) slot = i;
    if (slot < 0) return ncclSuccess; /* waits for a receive with that tag */
    if (s->size[0] > r->size[slot]) return ncclInternalError;
    if (s->size[0] > 0) memcpy(r->data[slot], s->data[0], s->size[0]);
    r->got[slot] = s->size[0];
    r->filled[slot] = true;
    s->done = true;
    mock_pop(c->sends, &c->nsends);
    bool all = true;
    for (int i = 0; i < r->n; i++) all &= r->filled[i];
    if (all) {
      r->done = true;
      mock_pop(c->recvs, &c->nrecvs);
    }
  }
  return ncclSuccess;
}

static ncclResult_t mock_init_common(ncclDebugLogger_t log) {
  stats.init_calls++;
  stats.logger_given = log != NULL;
  if (log != NULL) log(NCCL_LOG_INFO, NCCL_NET, __FILE__, __LINE__, "mock net %s: init", MOCK_NAME);
#ifdef MOCK_INIT_FAIL
  return ncclSystemError;
#else
  return ncclSuccess;
#endif
}

static ncclResult_t mock_devices(int* ndev) {
#ifdef MOCK_NDEV_ENV
  const char* s = getenv(MOCK_NDEV_ENV);
  *ndev = s ? atoi(s) : MOCK_NET_NDEV;
#else
  *ndev = MOCK_NET_NDEV;
#endif
  return ncclSuccess;
}

static ncclResult_t mock_listen_common(int dev, void* handle, void** listen_comm) {
  if (dev < 0 || dev >= MOCK_NET_NDEV) return ncclInvalidArgument;
  for (int id = 0; id < MOCK_LISTENS; id++) {
    if (listens[id] != NULL) continue;
    mock_listen_t* l = calloc(1, sizeof(*l));
    if (l == NULL) return ncclSystemError;
    l->id = id;
    listens[id] = l;
    mock_handle_t h = {MOCK_MAGIC, id, 0};
    memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
    memcpy(handle, &h, sizeof(h));
    *listen_comm = l;
    return ncclSuccess;
  }
  return ncclSystemError;
}

static ncclResult_t mock_connect_common(void* handle, int traffic_class, void** send_comm) {
  mock_handle_t h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != MOCK_MAGIC || h.id < 0 || h.id >= MOCK_LISTENS || listens[h.id] == NULL)
    return ncclInvalidArgument;
  stats.last_traffic_class = traffic_class;
  *send_comm = NULL;
  if (h.stage == 0) { /* not yet: call again */
    h.stage = 1;
    memcpy(handle, &h, sizeof(h));
    return ncclSuccess;
  }
  mock_listen_t* l = listens[h.id];
  if (l->npending == MOCK_QUEUE) return ncclSystemError;
  mock_conn_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->traffic_class = traffic_class;
  c->open_sides = 2;
  l->pending[l->npending++] = c;
  *send_comm = c;
  return ncclSuccess;
}

static ncclResult_t mock_accept_common(void* listen_comm, void** recv_comm) {
  mock_listen_t* l = listen_comm;
  *recv_comm = NULL;
  if (l->npending == 0) return ncclSuccess;
  *recv_comm = l->pending[0];
  memmove(l->pending, l->pending + 1, (size_t)(l->npending - 1) * sizeof(l->pending[0]));
  l->npending--;
  return ncclSuccess;
}

static ncclResult_t mock_reg_common(size_t size, void** mh) {
  mock_mr_t* m = calloc(1, sizeof(*m));
  if (m == NULL) return ncclSystemError;
  m->size = size;
  stats.last_reg_size = size;
  *mh = m;
  return ncclSuccess;
}

__attribute__((unused)) static ncclResult_t mock_reg_dmabuf(void* comm, void* data, size_t size,
                                                            int type, uint64_t offset, int fd,
                                                            void** mh) {
  (void)comm, (void)data, (void)type, (void)offset, (void)fd;
  stats.last_dmabuf_size = size;
  return mock_reg_common(size, mh);
}

static ncclResult_t mock_dereg(void* comm, void* mh) {
  (void)comm;
  free(mh);
  return ncclSuccess;
}

static ncclResult_t mock_isend_common(void* send_comm, void* data, size_t size, int tag,
                                      void** request) {
  mock_conn_t* c = send_comm;
  stats.last_send_size = size;
  *request = NULL;
  if (c->nsends == MOCK_QUEUE) return ncclSuccess; /* full: retry later */
  mock_req_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->n = 1;
  r->data[0] = data;
  r->size[0] = size;
  r->tag[0] = tag;
  c->sends[c->nsends++] = r;
  *request = r;
  return mock_match(c);
}

static ncclResult_t mock_irecv_common(void* recv_comm, int n, void** data, const size_t* sizes,
                                      const int* tags, void** request) {
  mock_conn_t* c = recv_comm;
  stats.irecv_calls++;
  if (*request == (void*)NCCL_NET_OPTIONAL_RECV_COMPLETION) stats.hint_seen++;
  *request = NULL;
  if (n < 1 || n > MOCK_NET_MAX_RECVS) return ncclInvalidArgument;
  if (c->nrecvs == MOCK_QUEUE) return ncclSuccess;
  mock_req_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->is_recv = true;
  r->n = n;
  for (int i = 0; i < n; i++) {
    r->data[i] = data[i];
    r->size[i] = sizes[i];
    r->tag[i] = tags[i];
  }
  c->recvs[c->nrecvs++] = r;
  *request = r;
  return mock_match(c);
}

static ncclResult_t mock_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhs,
                                void** request) {
  (void)recv_comm, (void)data, (void)sizes, (void)mhs;
  stats.flush_calls++;
  mock_req_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->done = true;
  r->n = n;
  *request = r;
  return ncclSuccess;
}

static ncclResult_t mock_test(void* request, int* done, int* sizes) {
  mock_req_t* r = request;
  *done = r->done;
  if (!r->done) return ncclSuccess;
  if (sizes != NULL) {
    for (int i = 0; i < r->n; i++) sizes[i] = (int)(r->is_recv ? r->got[i] : r->size[i]);
  }
  free(r);
  return ncclSuccess;
}

static ncclResult_t mock_close_conn(void* comm) {
  mock_conn_t* c = comm;
  if (--c->open_sides == 0) free(c);
  return ncclSuccess;
}

static ncclResult_t mock_close_listen(void* listen_comm) {
  mock_listen_t* l = listen_comm;
  listens[l->id] = NULL;
  for (int i = 0; i < l->npending; i++) free(l->pending[i]);
  free(l);
  return ncclSuccess;
}

__attribute__((unused)) static ncclResult_t mock_get_device_mr(void* comm, void* mh, void** dptr) {
  (void)comm;
  *dptr = mh;
  return ncclSuccess;
}

__attribute__((unused)) static ncclResult_t mock_irecv_consumed(void* recv_comm, int n,
                                                                void* request) {
  (void)recv_comm, (void)n, (void)request;
  return ncclSuccess;
}

/* ---- the version's own signatures ---- */

#define V MOCK_V
#define PROPS_T MOCK_CAT3(ncclNetProperties_v, V, _t)

#if V <= 9
static ncclResult_t mock_init(ncclDebugLogger_t log) { return mock_init_common(log); }
#elif V == 10
static ncclResult_t mock_init(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  stats.prof_given = prof != NULL;
  return mock_init_common(log);
}
#else
static ncclResult_t mock_init(void** ctx, uint64_t comm_id,
                              MOCK_CAT3(ncclNetCommConfig_v, V, _t) * config, ncclDebugLogger_t log,
                              ncclProfilerCallback_t prof) {
  stats.prof_given = prof != NULL;
  stats.last_comm_id = comm_id;
  ncclResult_t res = mock_init_common(log);
  if (res != ncclSuccess) return res;
  mock_ctx_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->comm_id = comm_id;
  c->traffic_class = config ? config->trafficClass : -3;
  stats.live_ctx++;
  *ctx = c;
  return ncclSuccess;
}
static ncclResult_t mock_finalize(void* ctx) {
  stats.finalize_calls++;
  stats.live_ctx--;
  free(ctx);
  return ncclSuccess;
}
#endif

static ncclResult_t mock_get_props(int dev, PROPS_T* props) {
  if (dev < 0 || dev >= MOCK_NET_NDEV) return ncclInvalidArgument;
  MOCK_CAT(mock_fill_props_v, V)(dev, props);
  return ncclSuccess;
}

#if V <= 10
static ncclResult_t mock_listen(int dev, void* handle, void** listen_comm) {
  return mock_listen_common(dev, handle, listen_comm);
}
#else
static ncclResult_t mock_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  (void)ctx;
  return mock_listen_common(dev, handle, listen_comm);
}
#endif

#if V == 6
static ncclResult_t mock_connect(int dev, void* handle, void** send_comm) {
  (void)dev;
  return mock_connect_common(handle, -1, send_comm);
}
static ncclResult_t mock_accept(void* listen_comm, void** recv_comm) {
  return mock_accept_common(listen_comm, recv_comm);
}
#else
#define DEVH_T MOCK_CAT3(ncclNetDeviceHandle_v, V, _t)
#if V <= 9
static ncclResult_t mock_connect(int dev, void* handle, void** send_comm, DEVH_T** dev_comm) {
  (void)dev, (void)dev_comm;
  return mock_connect_common(handle, -1, send_comm);
}
#elif V == 10
static ncclResult_t mock_connect(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                                 void** send_comm, DEVH_T** dev_comm) {
  (void)dev, (void)dev_comm;
  return mock_connect_common(handle, config ? config->trafficClass : -3, send_comm);
}
#else
static ncclResult_t mock_connect(void* ctx, int dev, void* handle, void** send_comm,
                                 DEVH_T** dev_comm) {
  (void)dev, (void)dev_comm;
  return mock_connect_common(handle, ((mock_ctx_t*)ctx)->traffic_class, send_comm);
}
#endif
static ncclResult_t mock_accept(void* listen_comm, void** recv_comm, DEVH_T** dev_comm) {
  (void)dev_comm;
  return mock_accept_common(listen_comm, recv_comm);
}
#endif

#if V <= 7
static ncclResult_t mock_reg(void* comm, void* data, int size, int type, void** mh) {
  (void)comm, (void)data, (void)type;
  return mock_reg_common((size_t)size, mh);
}
#else
static ncclResult_t mock_reg(void* comm, void* data, size_t size, int type, void** mh) {
  (void)comm, (void)data, (void)type;
  return mock_reg_common(size, mh);
}
#endif

#if V <= 8
static ncclResult_t mock_isend(void* send_comm, void* data, int size, int tag, void* mh,
                               void** request) {
  (void)mh;
  return mock_isend_common(send_comm, data, (size_t)size, tag, request);
}
static ncclResult_t mock_irecv(void* recv_comm, int n, void** data, int* sizes, int* tags,
                               void** mhs, void** request) {
  (void)mhs;
  size_t s[NCCL_NET_MAX_REQUESTS];
  for (int i = 0; i < n && i < NCCL_NET_MAX_REQUESTS; i++) s[i] = (size_t)sizes[i];
  return mock_irecv_common(recv_comm, n, data, s, tags, request);
}
#elif V == 9
static ncclResult_t mock_isend(void* send_comm, void* data, size_t size, int tag, void* mh,
                               void** request) {
  (void)mh;
  return mock_isend_common(send_comm, data, size, tag, request);
}
static ncclResult_t mock_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                               void** mhs, void** request) {
  (void)mhs;
  return mock_irecv_common(recv_comm, n, data, sizes, tags, request);
}
#else
static ncclResult_t mock_isend(void* send_comm, void* data, size_t size, int tag, void* mh,
                               void* phandle, void** request) {
  (void)mh, (void)phandle;
  return mock_isend_common(send_comm, data, size, tag, request);
}
static ncclResult_t mock_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                               void** mhs, void** phandles, void** request) {
  (void)mhs;
  if (phandles == NULL) return ncclInvalidArgument; /* NCCL always passes the array */
  return mock_irecv_common(recv_comm, n, data, sizes, tags, request);
}
#endif

#if V >= 9
#define VPROPS_T MOCK_CAT3(ncclNetVDeviceProps_v, V, _t)
__attribute__((unused)) static ncclResult_t mock_make_vdevice(int* d, VPROPS_T* props) {
  *d = MOCK_NET_NDEV + props->ndevs * 10 + props->devs[props->ndevs - 1];
  return ncclSuccess;
}
#endif
#if V >= 11
__attribute__((unused)) static ncclResult_t mock_set_attr(void* ctx,
                                                          MOCK_CAT3(ncclNetAttr_v, V, _t) * attr) {
  (void)ctx, (void)attr;
  return ncclSuccess;
}
#endif

#ifdef MOCK_NO_OPTIONAL
#define OPT(x) NULL
#else
#define OPT(x) x
#endif

EXPORT const MOCK_CAT3(ncclNet_v, V, _t) MOCK_CAT(ncclNetPlugin_v, V) = {
    .name = MOCK_NAME,
    .init = mock_init,
    .devices = mock_devices,
    .getProperties = mock_get_props,
    .listen = mock_listen,
    .connect = mock_connect,
    .accept = mock_accept,
    .regMr = mock_reg,
    .regMrDmaBuf = OPT(mock_reg_dmabuf),
    .deregMr = mock_dereg,
    .isend = mock_isend,
    .irecv = mock_irecv,
    .iflush = mock_iflush,
    .test = mock_test,
    .closeSend = mock_close_conn,
    .closeRecv = mock_close_conn,
    .closeListen = mock_close_listen,
#if V >= 7
    .getDeviceMr = OPT(mock_get_device_mr),
    .irecvConsumed = OPT(mock_irecv_consumed),
#endif
#if V >= 9
    .makeVDevice = OPT(mock_make_vdevice),
#endif
#if V >= 11
    .finalize = mock_finalize,
    .setNetAttr = OPT(mock_set_attr),
#endif
};

#undef V
#undef PROPS_T

#ifdef MOCK_CV
#include "mock_collnet.h"
#endif
