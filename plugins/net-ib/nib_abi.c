/*
 * net-ib's exported tables: ncclNetPlugin_v12 .. _v8, signature adapters over one core (nib_*).
 * Choir takes v12, NVIDIA NCCL 2.28 takes v11.
 *
 * v11 / v12 init and finalize bracket each communicator (the context is only a marker: every
 * verbs object belongs to a device or a comm); v10 and older init once per process. Process-wide
 * setup happens once whatever the version (nib_init).
 */
#include <stdlib.h>
#include <string.h>

#include "net_props.h"
#include "nib.h"

#define NIB_EXPORT __attribute__((visibility("default")))
#define NIB_NAME "IB"

/* ---- init / finalize ------------------------------------------------------------------------ */

static ncclResult_t nib_init_ctx(void** ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  *ctx = NULL;
  ncclResult_t res = nib_init(log);
  if (res != ncclSuccess) return res;
  uint64_t* c = malloc(sizeof(*c));
  if (c == NULL) {
    NIB_WARN("net-ib: init: out of memory");
    return ncclSystemError;
  }
  *c = comm_id;
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t nib_init_v12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config; /* traffic classes: NCCL_IB_TC for every connection */
  (void)prof;   /* no plugin-defined profiler events */
  return nib_init_ctx(ctx, comm_id, log);
}

static ncclResult_t nib_init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config;
  (void)prof;
  return nib_init_ctx(ctx, comm_id, log);
}

static ncclResult_t nib_init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)prof;
  return nib_init(log);
}

static ncclResult_t nib_init_v8(ncclDebugLogger_t log) { return nib_init(log); }

static ncclResult_t nib_finalize(void* ctx) {
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t nib_set_net_attr_v12(void* ctx, ncclNetAttr_v12_t* attr) {
  (void)ctx;
  (void)attr; /* hints only */
  return ncclSuccess;
}

static ncclResult_t nib_set_net_attr_v11(void* ctx, ncclNetAttr_v11_t* attr) {
  (void)ctx;
  (void)attr;
  return ncclSuccess;
}

/* ---- properties ----------------------------------------------------------------------------- */

/* Older versions' properties: the v12 ones, converted (common/net_props.h). */
static ncclResult_t nib_props_v11(int dev, ncclNetProperties_v11_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nib_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v11(&q, p);
  return res;
}

static ncclResult_t nib_props_v10(int dev, ncclNetProperties_v10_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nib_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v10(&q, p);
  return res;
}

static ncclResult_t nib_props_v9(int dev, ncclNetProperties_v9_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nib_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v9(&q, p);
  return res;
}

static ncclResult_t nib_props_v8(int dev, ncclNetProperties_v8_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nib_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v8(&q, p);
  return res;
}

/* ---- connections ---------------------------------------------------------------------------- */

static ncclResult_t nib_listen_ctx(void* ctx, int dev, void* handle, void** listen_comm) {
  (void)ctx;
  return nib_listen(dev, handle, listen_comm);
}

static ncclResult_t nib_connect_ctx(void* ctx, int dev, void* handle, void** send_comm,
                                    ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)ctx;
  (void)dev_comm; /* host-driven only (netDeviceType HOST) */
  return nib_connect(dev, handle, send_comm);
}

static ncclResult_t nib_connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                                    void** send_comm, ncclNetDeviceHandle_v10_t** dev_comm) {
  (void)config;
  (void)dev_comm;
  return nib_connect(dev, handle, send_comm);
}

static ncclResult_t nib_connect_v8(int dev, void* handle, void** send_comm,
                                   ncclNetDeviceHandle_v8_t** dev_comm) {
  (void)dev_comm;
  return nib_connect(dev, handle, send_comm);
}

static ncclResult_t nib_accept_dev(void* listen_comm, void** recv_comm,
                                   ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)dev_comm;
  return nib_accept(listen_comm, recv_comm);
}

/* ---- data ----------------------------------------------------------------------------------- */

static ncclResult_t nib_isend_v10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                  void* phandle, void** request) {
  (void)phandle;
  return nib_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t nib_isend_v9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                 void** request) {
  return nib_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t nib_isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                                 void** request) {
  if (size < 0) {
    *request = NULL;
    NIB_WARN("net-ib: isend of a negative size (%d)", size);
    return ncclInvalidArgument;
  }
  return nib_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t nib_irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                  void** mhandles, void** phandles, void** request) {
  (void)phandles;
  return nib_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t nib_irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                 void** mhandles, void** request) {
  return nib_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t nib_irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags,
                                 void** mhandles, void** request) {
  size_t s[NIB_MAX_RECVS];
  *request = NULL;
  if (n < 1 || n > NIB_MAX_RECVS) return nib_irecv(recv_comm, n, data, NULL, tags, mhandles,
                                                   request); /* rejects n, WARNed */
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) {
      NIB_WARN("net-ib: irecv of a negative size (%d)", sizes[i]);
      return ncclInvalidArgument;
    }
    s[i] = (size_t)sizes[i];
  }
  return nib_irecv(recv_comm, n, data, s, tags, mhandles, request);
}

static ncclResult_t nib_iflush_any(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                                   void** request) {
  (void)data;
  (void)sizes;
  (void)mhandles;
  return nib_iflush(recv_comm, n, request);
}

/* ---- tables --------------------------------------------------------------------------------- */

NIB_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = NIB_NAME,
    .init = nib_init_v12,
    .devices = nib_devices,
    .getProperties = nib_get_properties,
    .listen = nib_listen_ctx,
    .connect = nib_connect_ctx,
    .accept = nib_accept_dev,
    .regMr = nib_reg_mr,
    .regMrDmaBuf = NULL, /* host memory only: no dma-buf yet */
    .deregMr = nib_dereg_mr,
    .isend = nib_isend_v10,
    .irecv = nib_irecv_v10,
    .iflush = nib_iflush_any,
    .test = nib_test,
    .closeSend = nib_close_send,
    .closeRecv = nib_close_recv,
    .closeListen = nib_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nib_finalize,
    .setNetAttr = nib_set_net_attr_v12,
};

NIB_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = NIB_NAME,
    .init = nib_init_v11,
    .devices = nib_devices,
    .getProperties = nib_props_v11,
    .listen = nib_listen_ctx,
    .connect = nib_connect_ctx,
    .accept = nib_accept_dev,
    .regMr = nib_reg_mr,
    .regMrDmaBuf = NULL, /* host memory only: no dma-buf yet */
    .deregMr = nib_dereg_mr,
    .isend = nib_isend_v10,
    .irecv = nib_irecv_v10,
    .iflush = nib_iflush_any,
    .test = nib_test,
    .closeSend = nib_close_send,
    .closeRecv = nib_close_recv,
    .closeListen = nib_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nib_finalize,
    .setNetAttr = nib_set_net_attr_v11,
};

NIB_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = NIB_NAME,
    .init = nib_init_v10,
    .devices = nib_devices,
    .getProperties = nib_props_v10,
    .listen = nib_listen,
    .connect = nib_connect_v10,
    .accept = nib_accept_dev,
    .regMr = nib_reg_mr,
    .regMrDmaBuf = NULL, /* host memory only: no dma-buf yet */
    .deregMr = nib_dereg_mr,
    .isend = nib_isend_v10,
    .irecv = nib_irecv_v10,
    .iflush = nib_iflush_any,
    .test = nib_test,
    .closeSend = nib_close_send,
    .closeRecv = nib_close_recv,
    .closeListen = nib_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NIB_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = NIB_NAME,
    .init = nib_init_v8,
    .devices = nib_devices,
    .getProperties = nib_props_v9,
    .listen = nib_listen,
    .connect = nib_connect_v8,
    .accept = nib_accept_dev,
    .regMr = nib_reg_mr,
    .regMrDmaBuf = NULL, /* host memory only: no dma-buf yet */
    .deregMr = nib_dereg_mr,
    .isend = nib_isend_v9,
    .irecv = nib_irecv_v9,
    .iflush = nib_iflush_any,
    .test = nib_test,
    .closeSend = nib_close_send,
    .closeRecv = nib_close_recv,
    .closeListen = nib_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NIB_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = NIB_NAME,
    .init = nib_init_v8,
    .devices = nib_devices,
    .getProperties = nib_props_v8,
    .listen = nib_listen,
    .connect = nib_connect_v8,
    .accept = nib_accept_dev,
    .regMr = nib_reg_mr,
    .regMrDmaBuf = NULL, /* host memory only: no dma-buf yet */
    .deregMr = nib_dereg_mr,
    .isend = nib_isend_v8,
    .irecv = nib_irecv_v8,
    .iflush = nib_iflush_any,
    .test = nib_test,
    .closeSend = nib_close_send,
    .closeRecv = nib_close_recv,
    .closeListen = nib_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
