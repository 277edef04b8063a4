/*
 * net-ucx's exported tables: ncclNetPlugin_v12 .. _v8, thin signature adapters over one core
 * (nux_*). Choir takes v12, NVIDIA NCCL 2.28 takes v11.
 *
 * v11 / v12 init and finalize bracket each communicator: the context they create owns that
 * communicator's UCP workers (one per device). v10 and older init once per process and share one
 * process-wide context. Process-wide setup (devices, knobs) happens once whatever the version.
 */
#include <stdlib.h>
#include <string.h>

#include "net_props.h"
#include "nux.h"

#define NUX_EXPORT __attribute__((visibility("default")))
#define NUX_NAME "UCX"

/* ---- init / finalize ------------------------------------------------------------------------ */

static ncclResult_t nux_init_ctx(void** ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  *ctx = NULL;
  ncclResult_t res = nux_init(log);
  if (res != ncclSuccess) return res;
  nux_ctx_t* c = NULL;
  res = nux_ctx_create(comm_id, &c);
  if (res != ncclSuccess) return res;
  *ctx = c;
  return ncclSuccess;
}

/* The traffic class has no UCX equivalent here (UCX_IB_TRAFFIC_CLASS is process-wide). */
static ncclResult_t nux_init_v12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config;
  (void)prof; /* no profiler events (README: missing) */
  return nux_init_ctx(ctx, comm_id, log);
}

static ncclResult_t nux_init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config;
  (void)prof;
  return nux_init_ctx(ctx, comm_id, log);
}

static ncclResult_t nux_init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)prof;
  return nux_init(log);
}

static ncclResult_t nux_init_v8(ncclDebugLogger_t log) { return nux_init(log); }

static ncclResult_t nux_finalize(void* ctx) {
  nux_ctx_destroy(ctx);
  return ncclSuccess;
}

static ncclResult_t nux_set_net_attr_v12(void* ctx, ncclNetAttr_v12_t* attr) {
  (void)ctx;
  (void)attr; /* hints only: UCX picks its lanes per endpoint */
  return ncclSuccess;
}

static ncclResult_t nux_set_net_attr_v11(void* ctx, ncclNetAttr_v11_t* attr) {
  (void)ctx;
  (void)attr;
  return ncclSuccess;
}

/* ---- properties ----------------------------------------------------------------------------- */

/* Older versions' properties: the v12 ones, converted (common/net_props.h). */
static ncclResult_t nux_props_v11(int dev, ncclNetProperties_v11_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nux_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v11(&q, p);
  return res;
}

static ncclResult_t nux_props_v10(int dev, ncclNetProperties_v10_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nux_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v10(&q, p);
  return res;
}

static ncclResult_t nux_props_v9(int dev, ncclNetProperties_v9_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nux_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v9(&q, p);
  return res;
}

static ncclResult_t nux_props_v8(int dev, ncclNetProperties_v8_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nux_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v8(&q, p);
  return res;
}

/* ---- connections ---------------------------------------------------------------------------- */

static ncclResult_t nux_listen_ctx(void* ctx, int dev, void* handle, void** listen_comm) {
  return nux_listen(ctx, dev, handle, listen_comm);
}

static ncclResult_t nux_listen_v8(int dev, void* handle, void** listen_comm) {
  return nux_listen(nux_ctx_default(), dev, handle, listen_comm);
}

static ncclResult_t nux_connect_ctx(void* ctx, int dev, void* handle, void** send_comm,
                                    ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)dev_comm; /* host-driven only (netDeviceType HOST): no device handle to fill */
  return nux_connect(ctx, dev, handle, send_comm);
}

static ncclResult_t nux_connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                                    void** send_comm, ncclNetDeviceHandle_v10_t** dev_comm) {
  (void)config;
  (void)dev_comm;
  return nux_connect(nux_ctx_default(), dev, handle, send_comm);
}

static ncclResult_t nux_connect_v8(int dev, void* handle, void** send_comm,
                                   ncclNetDeviceHandle_v8_t** dev_comm) {
  (void)dev_comm;
  return nux_connect(nux_ctx_default(), dev, handle, send_comm);
}

static ncclResult_t nux_accept_dev(void* listen_comm, void** recv_comm,
                                   ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)dev_comm;
  return nux_accept(listen_comm, recv_comm);
}

/* ---- data ----------------------------------------------------------------------------------- */

static ncclResult_t nux_isend_v10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                  void* phandle, void** request) {
  (void)phandle;
  return nux_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t nux_isend_v9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                 void** request) {
  return nux_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t nux_isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                                 void** request) {
  if (size < 0) {
    *request = NULL;
    NUX_WARN("net-ucx: isend of a negative size (%d)", size);
    return ncclInvalidArgument;
  }
  return nux_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t nux_irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                  void** mhandles, void** phandles, void** request) {
  (void)phandles;
  return nux_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t nux_irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                 void** mhandles, void** request) {
  return nux_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t nux_irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags,
                                 void** mhandles, void** request) {
  size_t sz[NUX_MAX_RECVS];
  if (n < 1 || n > NUX_MAX_RECVS) {
    *request = NULL;
    NUX_WARN("net-ucx: irecv of %d buffers; this plugin's maxRecvs is %d", n,
             nux_g.knobs.max_recvs);
    return ncclInvalidArgument;
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) {
      *request = NULL;
      NUX_WARN("net-ucx: irecv of a negative size (%d)", sizes[i]);
      return ncclInvalidArgument;
    }
    sz[i] = (size_t)sizes[i];
  }
  return nux_irecv(recv_comm, n, data, sz, tags, mhandles, request);
}

static ncclResult_t nux_iflush_any(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                                   void** request) {
  (void)data;
  (void)sizes;
  (void)mhandles;
  return nux_iflush(recv_comm, n, request);
}

/* ---- tables --------------------------------------------------------------------------------- */

NUX_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = NUX_NAME,
    .init = nux_init_v12,
    .devices = nux_devices,
    .getProperties = nux_get_properties,
    .listen = nux_listen_ctx,
    .connect = nux_connect_ctx,
    .accept = nux_accept_dev,
    .regMr = nux_reg_mr,
    .regMrDmaBuf = nux_reg_mr_dmabuf,
    .deregMr = nux_dereg_mr,
    .isend = nux_isend_v10,
    .irecv = nux_irecv_v10,
    .iflush = nux_iflush_any,
    .test = nux_test,
    .closeSend = nux_close_send,
    .closeRecv = nux_close_recv,
    .closeListen = nux_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nux_finalize,
    .setNetAttr = nux_set_net_attr_v12,
};

NUX_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = NUX_NAME,
    .init = nux_init_v11,
    .devices = nux_devices,
    .getProperties = nux_props_v11,
    .listen = nux_listen_ctx,
    .connect = nux_connect_ctx,
    .accept = nux_accept_dev,
    .regMr = nux_reg_mr,
    .regMrDmaBuf = nux_reg_mr_dmabuf,
    .deregMr = nux_dereg_mr,
    .isend = nux_isend_v10,
    .irecv = nux_irecv_v10,
    .iflush = nux_iflush_any,
    .test = nux_test,
    .closeSend = nux_close_send,
    .closeRecv = nux_close_recv,
    .closeListen = nux_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nux_finalize,
    .setNetAttr = nux_set_net_attr_v11,
};

NUX_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = NUX_NAME,
    .init = nux_init_v10,
    .devices = nux_devices,
    .getProperties = nux_props_v10,
    .listen = nux_listen_v8,
    .connect = nux_connect_v10,
    .accept = nux_accept_dev,
    .regMr = nux_reg_mr,
    .regMrDmaBuf = nux_reg_mr_dmabuf,
    .deregMr = nux_dereg_mr,
    .isend = nux_isend_v10,
    .irecv = nux_irecv_v10,
    .iflush = nux_iflush_any,
    .test = nux_test,
    .closeSend = nux_close_send,
    .closeRecv = nux_close_recv,
    .closeListen = nux_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NUX_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = NUX_NAME,
    .init = nux_init_v8,
    .devices = nux_devices,
    .getProperties = nux_props_v9,
    .listen = nux_listen_v8,
    .connect = nux_connect_v8,
    .accept = nux_accept_dev,
    .regMr = nux_reg_mr,
    .regMrDmaBuf = nux_reg_mr_dmabuf,
    .deregMr = nux_dereg_mr,
    .isend = nux_isend_v9,
    .irecv = nux_irecv_v9,
    .iflush = nux_iflush_any,
    .test = nux_test,
    .closeSend = nux_close_send,
    .closeRecv = nux_close_recv,
    .closeListen = nux_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NUX_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = NUX_NAME,
    .init = nux_init_v8,
    .devices = nux_devices,
    .getProperties = nux_props_v8,
    .listen = nux_listen_v8,
    .connect = nux_connect_v8,
    .accept = nux_accept_dev,
    .regMr = nux_reg_mr,
    .regMrDmaBuf = nux_reg_mr_dmabuf,
    .deregMr = nux_dereg_mr,
    .isend = nux_isend_v8,
    .irecv = nux_irecv_v8,
    .iflush = nux_iflush_any,
    .test = nux_test,
    .closeSend = nux_close_send,
    .closeRecv = nux_close_recv,
    .closeListen = nux_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
