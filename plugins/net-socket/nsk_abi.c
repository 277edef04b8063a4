/*
 * net-socket's exported tables: ncclNetPlugin_v12 .. _v8, thin signature adapters over one core
 * (nsk_*). Choir takes v12, NVIDIA NCCL 2.28 takes v11.
 *
 * v11 / v12 init and finalize bracket each communicator (a small ctx); v10 and older init once
 * per process. Process-wide setup happens once whatever the version (nsk_init).
 */
#include <stdlib.h>
#include <string.h>

#include "net_props.h"
#include "nsk.h"

#define NSK_EXPORT __attribute__((visibility("default")))
#define NSK_NAME "Socket"

typedef struct {
  uint64_t comm_id;
  int traffic_class; /* unused: TCP gives no portable class; kept for logs */
} nsk_ctx_t;

/* ---- init / finalize ------------------------------------------------------------------------ */

static ncclResult_t nsk_init_ctx(void** ctx, uint64_t comm_id, int traffic_class,
                                 ncclDebugLogger_t log) {
  *ctx = NULL;
  ncclResult_t res = nsk_init(log);
  if (res != ncclSuccess) return res;
  nsk_ctx_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NSK_WARN("net-socket: init: out of memory");
    return ncclSystemError;
  }
  c->comm_id = comm_id;
  c->traffic_class = traffic_class;
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t nsk_init_v12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  __atomic_store_n(&nsk_prof_cb, prof, __ATOMIC_RELEASE);
  return nsk_init_ctx(ctx, comm_id, config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
                      log);
}

static ncclResult_t nsk_init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  __atomic_store_n(&nsk_prof_cb, prof, __ATOMIC_RELEASE);
  return nsk_init_ctx(ctx, comm_id, config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF,
                      log);
}

static ncclResult_t nsk_init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  __atomic_store_n(&nsk_prof_cb, prof, __ATOMIC_RELEASE);
  return nsk_init(log);
}

static ncclResult_t nsk_init_v8(ncclDebugLogger_t log) { return nsk_init(log); }

static ncclResult_t nsk_finalize(void* ctx) {
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t nsk_set_net_attr_v12(void* ctx, ncclNetAttr_v12_t* attr) {
  (void)ctx;
  (void)attr; /* hints only; every connection already uses all its sockets */
  return ncclSuccess;
}

static ncclResult_t nsk_set_net_attr_v11(void* ctx, ncclNetAttr_v11_t* attr) {
  (void)ctx;
  (void)attr;
  return ncclSuccess;
}

/* ---- properties ----------------------------------------------------------------------------- */

/* Older versions' properties: the v12 ones, converted (common/net_props.h). */
static ncclResult_t nsk_props_v11(int dev, ncclNetProperties_v11_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nsk_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v11(&q, p);
  return res;
}

static ncclResult_t nsk_props_v10(int dev, ncclNetProperties_v10_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nsk_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v10(&q, p);
  return res;
}

static ncclResult_t nsk_props_v9(int dev, ncclNetProperties_v9_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nsk_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v9(&q, p);
  return res;
}

static ncclResult_t nsk_props_v8(int dev, ncclNetProperties_v8_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nsk_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v8(&q, p);
  return res;
}

/* ---- connections ---------------------------------------------------------------------------- */

static ncclResult_t nsk_listen_ctx(void* ctx, int dev, void* handle, void** listen_comm) {
  (void)ctx;
  return nsk_listen(dev, handle, listen_comm);
}

static ncclResult_t nsk_connect_ctx(void* ctx, int dev, void* handle, void** send_comm,
                                    ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)ctx;
  (void)dev_comm; /* host-driven only (netDeviceType HOST): no device handle to fill */
  return nsk_connect(dev, handle, send_comm);
}

static ncclResult_t nsk_connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                                    void** send_comm, ncclNetDeviceHandle_v10_t** dev_comm) {
  (void)config;
  (void)dev_comm;
  return nsk_connect(dev, handle, send_comm);
}

static ncclResult_t nsk_connect_v8(int dev, void* handle, void** send_comm,
                                   ncclNetDeviceHandle_v8_t** dev_comm) {
  (void)dev_comm;
  return nsk_connect(dev, handle, send_comm);
}

static ncclResult_t nsk_accept_dev(void* listen_comm, void** recv_comm,
                                   ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)dev_comm;
  return nsk_accept(listen_comm, recv_comm);
}

/* ---- data ----------------------------------------------------------------------------------- */

static ncclResult_t nsk_isend_v10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                  void* phandle, void** request) {
  (void)tag;
  (void)mhandle;
  return nsk_isend(send_comm, data, size, phandle, request);
}

static ncclResult_t nsk_isend_v9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                 void** request) {
  (void)tag;
  (void)mhandle;
  return nsk_isend(send_comm, data, size, NULL, request);
}

static ncclResult_t nsk_isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                                 void** request) {
  (void)tag;
  (void)mhandle;
  if (size < 0) {
    *request = NULL;
    NSK_WARN("net-socket: isend of a negative size (%d)", size);
    return ncclInvalidArgument;
  }
  return nsk_isend(send_comm, data, (size_t)size, NULL, request);
}

static ncclResult_t nsk_irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                  void** mhandles, void** phandles, void** request) {
  (void)tags;
  (void)mhandles;
  return nsk_irecv(recv_comm, n, data, sizes, phandles != NULL ? phandles[0] : NULL, request);
}

static ncclResult_t nsk_irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                 void** mhandles, void** request) {
  (void)tags;
  (void)mhandles;
  return nsk_irecv(recv_comm, n, data, sizes, NULL, request);
}

static ncclResult_t nsk_irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags,
                                 void** mhandles, void** request) {
  (void)tags;
  (void)mhandles;
  size_t size = 0;
  if (n == 1) {
    if (sizes[0] < 0) {
      *request = NULL;
      NSK_WARN("net-socket: irecv of a negative size (%d)", sizes[0]);
      return ncclInvalidArgument;
    }
    size = (size_t)sizes[0];
  }
  return nsk_irecv(recv_comm, n, data, &size, NULL, request);
}

static ncclResult_t nsk_iflush_any(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                                   void** request) {
  (void)data;
  (void)sizes;
  (void)mhandles;
  return nsk_iflush(recv_comm, n, request);
}

/* ---- tables --------------------------------------------------------------------------------- */

NSK_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = NSK_NAME,
    .init = nsk_init_v12,
    .devices = nsk_devices,
    .getProperties = nsk_get_properties,
    .listen = nsk_listen_ctx,
    .connect = nsk_connect_ctx,
    .accept = nsk_accept_dev,
    .regMr = nsk_reg_mr,
    .regMrDmaBuf = nsk_reg_mr_dmabuf,
    .deregMr = nsk_dereg_mr,
    .isend = nsk_isend_v10,
    .irecv = nsk_irecv_v10,
    .iflush = nsk_iflush_any,
    .test = nsk_test,
    .closeSend = nsk_close_send,
    .closeRecv = nsk_close_recv,
    .closeListen = nsk_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nsk_finalize,
    .setNetAttr = nsk_set_net_attr_v12,
};

NSK_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = NSK_NAME,
    .init = nsk_init_v11,
    .devices = nsk_devices,
    .getProperties = nsk_props_v11,
    .listen = nsk_listen_ctx,
    .connect = nsk_connect_ctx,
    .accept = nsk_accept_dev,
    .regMr = nsk_reg_mr,
    .regMrDmaBuf = nsk_reg_mr_dmabuf,
    .deregMr = nsk_dereg_mr,
    .isend = nsk_isend_v10,
    .irecv = nsk_irecv_v10,
    .iflush = nsk_iflush_any,
    .test = nsk_test,
    .closeSend = nsk_close_send,
    .closeRecv = nsk_close_recv,
    .closeListen = nsk_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nsk_finalize,
    .setNetAttr = nsk_set_net_attr_v11,
};

NSK_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = NSK_NAME,
    .init = nsk_init_v10,
    .devices = nsk_devices,
    .getProperties = nsk_props_v10,
    .listen = nsk_listen,
    .connect = nsk_connect_v10,
    .accept = nsk_accept_dev,
    .regMr = nsk_reg_mr,
    .regMrDmaBuf = nsk_reg_mr_dmabuf,
    .deregMr = nsk_dereg_mr,
    .isend = nsk_isend_v10,
    .irecv = nsk_irecv_v10,
    .iflush = nsk_iflush_any,
    .test = nsk_test,
    .closeSend = nsk_close_send,
    .closeRecv = nsk_close_recv,
    .closeListen = nsk_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NSK_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = NSK_NAME,
    .init = nsk_init_v8,
    .devices = nsk_devices,
    .getProperties = nsk_props_v9,
    .listen = nsk_listen,
    .connect = nsk_connect_v8,
    .accept = nsk_accept_dev,
    .regMr = nsk_reg_mr,
    .regMrDmaBuf = nsk_reg_mr_dmabuf,
    .deregMr = nsk_dereg_mr,
    .isend = nsk_isend_v9,
    .irecv = nsk_irecv_v9,
    .iflush = nsk_iflush_any,
    .test = nsk_test,
    .closeSend = nsk_close_send,
    .closeRecv = nsk_close_recv,
    .closeListen = nsk_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NSK_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = NSK_NAME,
    .init = nsk_init_v8,
    .devices = nsk_devices,
    .getProperties = nsk_props_v8,
    .listen = nsk_listen,
    .connect = nsk_connect_v8,
    .accept = nsk_accept_dev,
    .regMr = nsk_reg_mr,
    .regMrDmaBuf = nsk_reg_mr_dmabuf,
    .deregMr = nsk_dereg_mr,
    .isend = nsk_isend_v8,
    .irecv = nsk_irecv_v8,
    .iflush = nsk_iflush_any,
    .test = nsk_test,
    .closeSend = nsk_close_send,
    .closeRecv = nsk_close_recv,
    .closeListen = nsk_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
