/*
 * A net plugin that breaks the contract on purpose, to prove that net-conformance catches each
 * breach. It wraps another plugin's v12 table (the library in NET_FAULTY_INNER) and injects the
 * one fault named by NET_FAULTY:
 *   hang-on-error     test() hides errors: after the inner plugin reports one, the request stays
 *                     "not done" forever (a peer death turns into a hang)
 *   wrong-size        test() reports one byte more than a receive moved
 *   corrupt           a completed receive has its first byte flipped
 *   blocking-accept   accept() waits inside until a peer has connected
 * Without NET_FAULTY it is a faithful pass-through.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_net.h"

typedef struct faulty_req {
  void* inner;
  void* data; /* receive buffer, for corrupt */
  bool recv;
  bool failed; /* hang-on-error: the inner request reported an error */
} faulty_req_t;

static const ncclNet_v12_t* inner;
static const char* fault = "";

static ncclResult_t faulty_init(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                                ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
  if (inner == NULL) {
    const char* path = getenv("NET_FAULTY_INNER");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    inner = lib ? dlsym(lib, "ncclNetPlugin_v12") : NULL;
    if (inner == NULL) return ncclInvalidUsage;
    if (getenv("NET_FAULTY")) fault = getenv("NET_FAULTY");
  }
  return inner->init(ctx, comm_id, config, log_fn, prof_fn);
}

static ncclResult_t faulty_devices(int* ndev) { return inner->devices(ndev); }
static ncclResult_t faulty_props(int dev, ncclNetProperties_v12_t* props) {
  return inner->getProperties(dev, props);
}
static ncclResult_t faulty_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return inner->listen(ctx, dev, handle, listen_comm);
}

static ncclResult_t faulty_connect(void* ctx, int dev, void* handle, void** send_comm,
                                   ncclNetDeviceHandle_v12_t** dev_comm) {
  return inner->connect(ctx, dev, handle, send_comm, dev_comm);
}

static ncclResult_t faulty_accept(void* listen_comm, void** recv_comm,
                                  ncclNetDeviceHandle_v12_t** dev_comm) {
  ncclResult_t res = inner->accept(listen_comm, recv_comm, dev_comm);
  if (strcmp(fault, "blocking-accept") == 0) {
    struct timespec ms = {0, 1000000};
    while (res == ncclSuccess && *recv_comm == NULL) {
      nanosleep(&ms, NULL);
      res = inner->accept(listen_comm, recv_comm, dev_comm);
    }
  }
  return res;
}
static ncclResult_t faulty_reg_mr(void* comm, void* data, size_t size, int type, void** mh) {
  return inner->regMr(comm, data, size, type, mh);
}
static ncclResult_t faulty_dereg_mr(void* comm, void* mh) { return inner->deregMr(comm, mh); }

static ncclResult_t wrap(void** request, void* data, bool recv) {
  if (*request == NULL) return ncclSuccess;
  faulty_req_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->inner = *request;
  r->data = data;
  r->recv = recv;
  *request = r;
  return ncclSuccess;
}

static ncclResult_t faulty_isend(void* send_comm, void* data, size_t size, int tag, void* mh,
                                 void* phandle, void** request) {
  ncclResult_t res = inner->isend(send_comm, data, size, tag, mh, phandle, request);
  return res == ncclSuccess ? wrap(request, data, false) : res;
}

static ncclResult_t faulty_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                                 void** mhs, void** phandles, void** request) {
  ncclResult_t res = inner->irecv(recv_comm, n, data, sizes, tags, mhs, phandles, request);
  return res == ncclSuccess ? wrap(request, data[0], true) : res;
}

static ncclResult_t faulty_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhs,
                                  void** request) {
  ncclResult_t res = inner->iflush(recv_comm, n, data, sizes, mhs, request);
  return res == ncclSuccess ? wrap(request, NULL, false) : res;
}

static ncclResult_t faulty_test(void* request, int* done, int* sizes) {
  faulty_req_t* r = request;
  *done = 0;
  if (r->failed) return ncclSuccess;
  ncclResult_t res = inner->test(r->inner, done, sizes);
  if (res != ncclSuccess && strcmp(fault, "hang-on-error") == 0) {
    r->failed = true;
    *done = 0;
    return ncclSuccess;
  }
  if (res != ncclSuccess || !*done) return res;
  if (r->recv && sizes && strcmp(fault, "wrong-size") == 0) sizes[0]++;
  if (r->recv && sizes && sizes[0] > 0 && strcmp(fault, "corrupt") == 0)
    ((unsigned char*)r->data)[0] ^= 0xff;
  free(r);
  return ncclSuccess;
}

static ncclResult_t faulty_close_send(void* c) { return inner->closeSend(c); }
static ncclResult_t faulty_close_recv(void* c) { return inner->closeRecv(c); }
static ncclResult_t faulty_close_listen(void* c) { return inner->closeListen(c); }
static ncclResult_t faulty_finalize(void* ctx) { return inner->finalize(ctx); }

__attribute__((visibility("default"))) const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "Faulty",
    .init = faulty_init,
    .devices = faulty_devices,
    .getProperties = faulty_props,
    .listen = faulty_listen,
    .connect = faulty_connect,
    .accept = faulty_accept,
    .regMr = faulty_reg_mr,
    .deregMr = faulty_dereg_mr,
    .isend = faulty_isend,
    .irecv = faulty_irecv,
    .iflush = faulty_iflush,
    .test = faulty_test,
    .closeSend = faulty_close_send,
    .closeRecv = faulty_close_recv,
    .closeListen = faulty_close_listen,
    .finalize = faulty_finalize,
};
