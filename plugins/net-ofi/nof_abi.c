/*
 * net-ofi's exported tables: ncclNetPlugin_v12 .. _v8, signature adapters over one core (nof_*).
 * Choir takes v12, NVIDIA NCCL 2.28 takes v11.
 *
 * v11 / v12 init and finalize bracket each communicator (the context is only a marker: every
 * libfabric object belongs to a comm); v10 and older init once per process. Process-wide setup
 * happens once whatever the version (nof_init).
 */
#include <stdlib.h>
#include <string.h>

#include "net_props.h"
#include "nof.h"

#define NOF_EXPORT __attribute__((visibility("default")))
#define NOF_NAME "OFI"

/* ---- init / finalize ------------------------------------------------------------------------ */

static ncclResult_t nof_init_ctx(void** ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  *ctx = NULL;
  ncclResult_t res = nof_init(log);
  if (res != ncclSuccess) return res;
  uint64_t* c = malloc(sizeof(*c));
  if (c == NULL) {
    NOF_WARN("net-ofi: init: out of memory");
    return ncclSystemError;
  }
  *c = comm_id;
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t nof_init_v12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config; /* traffic classes: libfabric has fi_tx_attr.tclass, not used yet */
  (void)prof;   /* no plugin-defined profiler events */
  return nof_init_ctx(ctx, comm_id, log);
}

static ncclResult_t nof_init_v11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                                 ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)config;
  (void)prof;
  return nof_init_ctx(ctx, comm_id, log);
}

static ncclResult_t nof_init_v10(ncclDebugLogger_t log, ncclProfilerCallback_t prof) {
  (void)prof;
  return nof_init(log);
}

static ncclResult_t nof_init_v8(ncclDebugLogger_t log) { return nof_init(log); }

static ncclResult_t nof_finalize(void* ctx) {
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t nof_set_net_attr_v12(void* ctx, ncclNetAttr_v12_t* attr) {
  (void)ctx;
  (void)attr; /* hints only */
  return ncclSuccess;
}

static ncclResult_t nof_set_net_attr_v11(void* ctx, ncclNetAttr_v11_t* attr) {
  (void)ctx;
  (void)attr;
  return ncclSuccess;
}

/* ---- properties ----------------------------------------------------------------------------- */

/* Older versions' properties: the v12 ones, converted (common/net_props.h). */
static ncclResult_t nof_props_v11(int dev, ncclNetProperties_v11_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nof_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v11(&q, p);
  return res;
}

static ncclResult_t nof_props_v10(int dev, ncclNetProperties_v10_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nof_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v10(&q, p);
  return res;
}

static ncclResult_t nof_props_v9(int dev, ncclNetProperties_v9_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nof_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v9(&q, p);
  return res;
}

static ncclResult_t nof_props_v8(int dev, ncclNetProperties_v8_t* p) {
  ncclNetProperties_v12_t q;
  ncclResult_t res = nof_get_properties(dev, &q);
  if (res == ncclSuccess) net_props_to_v8(&q, p);
  return res;
}

/* ---- connections ---------------------------------------------------------------------------- */

static ncclResult_t nof_listen_ctx(void* ctx, int dev, void* handle, void** listen_comm) {
  (void)ctx;
  return nof_listen(dev, handle, listen_comm);
}

static ncclResult_t nof_connect_ctx(void* ctx, int dev, void* handle, void** send_comm,
                                    ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)ctx;
  (void)dev_comm; /* host-driven only (netDeviceType HOST) */
  return nof_connect(dev, handle, send_comm);
}

static ncclResult_t nof_connect_v10(int dev, ncclNetCommConfig_v10_t* config, void* handle,
                                    void** send_comm, ncclNetDeviceHandle_v10_t** dev_comm) {
  (void)config;
  (void)dev_comm;
  return nof_connect(dev, handle, send_comm);
}

static ncclResult_t nof_connect_v8(int dev, void* handle, void** send_comm,
                                   ncclNetDeviceHandle_v8_t** dev_comm) {
  (void)dev_comm;
  return nof_connect(dev, handle, send_comm);
}

static ncclResult_t nof_accept_dev(void* listen_comm, void** recv_comm,
                                   ncclNetDeviceHandle_v12_t** dev_comm) {
  (void)dev_comm;
  return nof_accept(listen_comm, recv_comm);
}

/* ---- data ----------------------------------------------------------------------------------- */

static ncclResult_t nof_isend_v10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                  void* phandle, void** request) {
  (void)tag; /* maxRecvs is 1: nothing to select */
  (void)phandle;
  return nof_isend(send_comm, data, size, mhandle, request);
}

static ncclResult_t nof_isend_v9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                                 void** request) {
  (void)tag;
  return nof_isend(send_comm, data, size, mhandle, request);
}

static ncclResult_t nof_isend_v8(void* send_comm, void* data, int size, int tag, void* mhandle,
                                 void** request) {
  (void)tag;
  if (size < 0) {
    *request = NULL;
    NOF_WARN("net-ofi: isend of a negative size (%d)", size);
    return ncclInvalidArgument;
  }
  return nof_isend(send_comm, data, (size_t)size, mhandle, request);
}

static ncclResult_t nof_irecv_v10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                  void** mhandles, void** phandles, void** request) {
  (void)tags;
  (void)phandles;
  return nof_irecv(recv_comm, n, data, sizes, mhandles, request);
}

static ncclResult_t nof_irecv_v9(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                 void** mhandles, void** request) {
  (void)tags;
  return nof_irecv(recv_comm, n, data, sizes, mhandles, request);
}

static ncclResult_t nof_irecv_v8(void* recv_comm, int n, void** data, int* sizes, int* tags,
                                 void** mhandles, void** request) {
  (void)tags;
  size_t size = 0;
  if (n == 1) {
    if (sizes[0] < 0) {
      *request = NULL;
      NOF_WARN("net-ofi: irecv of a negative size (%d)", sizes[0]);
      return ncclInvalidArgument;
    }
    size = (size_t)sizes[0];
  }
  return nof_irecv(recv_comm, n, data, &size, mhandles, request);
}

static ncclResult_t nof_iflush_any(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                                   void** request) {
  (void)data;
  (void)sizes;
  (void)mhandles;
  return nof_iflush(recv_comm, n, request);
}

/* ---- tables --------------------------------------------------------------------------------- */

NOF_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = NOF_NAME,
    .init = nof_init_v12,
    .devices = nof_devices,
    .getProperties = nof_get_properties,
    .listen = nof_listen_ctx,
    .connect = nof_connect_ctx,
    .accept = nof_accept_dev,
    .regMr = nof_reg_mr,
    .regMrDmaBuf = NULL, /* libfabric 1.17 has no dma-buf registration */
    .deregMr = nof_dereg_mr,
    .isend = nof_isend_v10,
    .irecv = nof_irecv_v10,
    .iflush = nof_iflush_any,
    .test = nof_test,
    .closeSend = nof_close_send,
    .closeRecv = nof_close_recv,
    .closeListen = nof_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nof_finalize,
    .setNetAttr = nof_set_net_attr_v12,
};

NOF_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = NOF_NAME,
    .init = nof_init_v11,
    .devices = nof_devices,
    .getProperties = nof_props_v11,
    .listen = nof_listen_ctx,
    .connect = nof_connect_ctx,
    .accept = nof_accept_dev,
    .regMr = nof_reg_mr,
    .regMrDmaBuf = NULL, /* libfabric 1.17 has no dma-buf registration */
    .deregMr = nof_dereg_mr,
    .isend = nof_isend_v10,
    .irecv = nof_irecv_v10,
    .iflush = nof_iflush_any,
    .test = nof_test,
    .closeSend = nof_close_send,
    .closeRecv = nof_close_recv,
    .closeListen = nof_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = nof_finalize,
    .setNetAttr = nof_set_net_attr_v11,
};

NOF_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = NOF_NAME,
    .init = nof_init_v10,
    .devices = nof_devices,
    .getProperties = nof_props_v10,
    .listen = nof_listen,
    .connect = nof_connect_v10,
    .accept = nof_accept_dev,
    .regMr = nof_reg_mr,
    .regMrDmaBuf = NULL, /* libfabric 1.17 has no dma-buf registration */
    .deregMr = nof_dereg_mr,
    .isend = nof_isend_v10,
    .irecv = nof_irecv_v10,
    .iflush = nof_iflush_any,
    .test = nof_test,
    .closeSend = nof_close_send,
    .closeRecv = nof_close_recv,
    .closeListen = nof_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NOF_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = NOF_NAME,
    .init = nof_init_v8,
    .devices = nof_devices,
    .getProperties = nof_props_v9,
    .listen = nof_listen,
    .connect = nof_connect_v8,
    .accept = nof_accept_dev,
    .regMr = nof_reg_mr,
    .regMrDmaBuf = NULL, /* libfabric 1.17 has no dma-buf registration */
    .deregMr = nof_dereg_mr,
    .isend = nof_isend_v9,
    .irecv = nof_irecv_v9,
    .iflush = nof_iflush_any,
    .test = nof_test,
    .closeSend = nof_close_send,
    .closeRecv = nof_close_recv,
    .closeListen = nof_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
};

NOF_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = NOF_NAME,
    .init = nof_init_v8,
    .devices = nof_devices,
    .getProperties = nof_props_v8,
    .listen = nof_listen,
    .connect = nof_connect_v8,
    .accept = nof_accept_dev,
    .regMr = nof_reg_mr,
    .regMrDmaBuf = NULL, /* libfabric 1.17 has no dma-buf registration */
    .deregMr = nof_dereg_mr,
    .isend = nof_isend_v8,
    .irecv = nof_irecv_v8,
    .iflush = nof_iflush_any,
    .test = nof_test,
    .closeSend = nof_close_send,
    .closeRecv = nof_close_recv,
    .closeListen = nof_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
};
