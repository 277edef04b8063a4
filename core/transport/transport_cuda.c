/*
 * The CUDA runtime calls of the transport, behind transport_cuda_ops_t so that CPU tests can
 * replace them (transport_set_cuda_ops). Each failure WARNs with the call and CUDA's message.
 */
#include <pthread.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <string.h>

#include "transport_internal.h"

_Static_assert(sizeof(cudaIpcMemHandle_t) == 64, "the wire carries 64-byte IPC handles");

/* Release calls cannot be undone or retried: log and go on with the rest of the teardown. */
#define TCUDA_WARN(call)                                                                  \
  do {                                                                                    \
    cudaError_t e_ = (call);                                                              \
    if (e_ != cudaSuccess)                                                                \
      WARN("transport: CUDA call %s failed: %s (%s)", #call, cudaGetErrorString(e_),      \
           cudaGetErrorName(e_));                                                         \
  } while (0)

static ncclResult_t rt_device_by_bus_id(int64_t bus_id, int* dev_p) {
  char pci[32];
  snprintf(pci, sizeof(pci), "%04x:%02x:%02x.%x", (unsigned)((bus_id >> 20) & 0xffff),
           (unsigned)((bus_id >> 12) & 0xff), (unsigned)((bus_id >> 4) & 0xff),
           (unsigned)(bus_id & 0xf));
  int dev = -1;
  cudaError_t e = cudaDeviceGetByPCIBusId(&dev, pci);
  if (e == cudaErrorInvalidDevice || e == cudaErrorInvalidValue) {
    /* Not visible to this process (CUDA_VISIBLE_DEVICES): not an error, no p2p. */
    (void)cudaGetLastError();
    *dev_p = -1;
    return ncclSuccess;
  }
  CUDA_CHECK(e);
  *dev_p = dev;
  return ncclSuccess;
}

static ncclResult_t rt_can_access_peer(int dev, int peer_dev, int* can_p) {
  int can = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can, dev, peer_dev));
  *can_p = can;
  return ncclSuccess;
}

/* Pairs (current device, peer) this process enabled, so that each is asked for once: asking
 * again fails with "already enabled", which tools such as compute-sanitizer report. */
#define RT_MAX_DEVS 64
static uint8_t rt_peer_enabled[RT_MAX_DEVS][RT_MAX_DEVS];
static pthread_mutex_t rt_peer_lock = PTHREAD_MUTEX_INITIALIZER;

static ncclResult_t rt_enable_peer_access(int peer_dev) {
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  const int cached = dev >= 0 && dev < RT_MAX_DEVS && peer_dev >= 0 && peer_dev < RT_MAX_DEVS;
  if (cached) {
    pthread_mutex_lock(&rt_peer_lock);
    int done = rt_peer_enabled[dev][peer_dev];
    rt_peer_enabled[dev][peer_dev] = 1;
    pthread_mutex_unlock(&rt_peer_lock);
    if (done) return ncclSuccess;
  }
  cudaError_t e = cudaDeviceEnablePeerAccess(peer_dev, 0);
  if (e == cudaErrorPeerAccessAlreadyEnabled) {
    /* Another communicator (or the application) enabled it: fine, but the runtime keeps the
     * error as the thread's last one until read. */
    (void)cudaGetLastError();
    return ncclSuccess;
  }
  CUDA_CHECK(e);
  return ncclSuccess;
}

static ncclResult_t rt_dev_alloc(size_t bytes, void** ptr_p) {
  void* p = NULL;
  CUDA_CHECK(cudaMalloc(&p, bytes));
  /* Zero on a private stream and wait: the counters must read 0 before the peer learns the
   * address, and the user's streams must not be touched. */
  cudaStream_t s = NULL;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, bytes, s);
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (s != NULL) TCUDA_WARN(cudaStreamDestroy(s));
  if (e != cudaSuccess) {
    WARN("transport: zeroing %zu bytes of connection memory failed: %s (%s)", bytes,
         cudaGetErrorString(e), cudaGetErrorName(e));
    TCUDA_WARN(cudaFree(p));
    return ncclUnhandledCudaError;
  }
  *ptr_p = p;
  return ncclSuccess;
}

static void rt_dev_free(void* ptr) { TCUDA_WARN(cudaFree(ptr)); }

static ncclResult_t rt_ipc_get(void* ptr, unsigned char handle[64]) {
  cudaIpcMemHandle_t h;
  CUDA_CHECK(cudaIpcGetMemHandle(&h, ptr));
  memcpy(handle, &h, sizeof(h));
  return ncclSuccess;
}

static ncclResult_t rt_ipc_open(const unsigned char handle[64], void** ptr_p) {
  cudaIpcMemHandle_t h;
  memcpy(&h, handle, sizeof(h));
  void* p = NULL;
  CUDA_CHECK(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess));
  *ptr_p = p;
  return ncclSuccess;
}

static void rt_ipc_close(void* ptr) { TCUDA_WARN(cudaIpcCloseMemHandle(ptr)); }

static ncclResult_t rt_host_register(void* ptr, size_t bytes, void** dev_ptr_p) {
  CUDA_CHECK(cudaHostRegister(ptr, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* d = NULL;
  cudaError_t e = cudaHostGetDevicePointer(&d, ptr, 0);
  if (e != cudaSuccess) {
    WARN("transport: cudaHostGetDevicePointer on %zu registered bytes failed: %s (%s)", bytes,
         cudaGetErrorString(e), cudaGetErrorName(e));
    TCUDA_WARN(cudaHostUnregister(ptr));
    return ncclUnhandledCudaError;
  }
  *dev_ptr_p = d;
  return ncclSuccess;
}

static void rt_host_unregister(void* ptr) { TCUDA_WARN(cudaHostUnregister(ptr)); }

const transport_cuda_ops_t transport_cuda_runtime = {
    .get_device = cuda_get_device,
    .set_device = cuda_set_device,
    .device_by_bus_id = rt_device_by_bus_id,
    .can_access_peer = rt_can_access_peer,
    .enable_peer_access = rt_enable_peer_access,
    .dev_alloc = rt_dev_alloc,
    .dev_free = rt_dev_free,
    .ipc_get = rt_ipc_get,
    .ipc_open = rt_ipc_open,
    .ipc_close = rt_ipc_close,
    .host_register = rt_host_register,
    .host_unregister = rt_host_unregister,
};

static const transport_cuda_ops_t* transport_ops = &transport_cuda_runtime;

void transport_set_cuda_ops(const transport_cuda_ops_t* ops) {
  transport_ops = ops != NULL ? ops : &transport_cuda_runtime;
}

const transport_cuda_ops_t* transport_cuda(void) { return transport_ops; }
