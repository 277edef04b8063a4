/*
 * Choir perf tools, CPU mock: the CUDA runtime calls the perf tools make (see mock.h).
 */
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mock.h"

static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int mock_device;

void mock_lock(void) { pthread_mutex_lock(&mock_mu); }
void mock_unlock(void) { pthread_mutex_unlock(&mock_mu); }
int mock_current_device(void) { return mock_device; }

void mock_fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mock: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}

void mock_stream_idle(cudaStream_t s, const char* what) {
  if (s && s->pending)
    mock_fail("%s on a stream with %d NCCL operations in flight", what, s->pending);
  if (s && s->capturing) mock_fail("%s on a capturing stream", what);
}

static int mock_device_count(void) {
  const char* e = getenv("MOCK_CUDA_DEVICES");
  return e ? atoi(e) : 8;
}

cudaError_t cudaGetDeviceCount(int* count) {
  *count = mock_device_count();
  return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
  case cudaSuccess: return "no error";
  case cudaErrorNoDevice: return "no CUDA-capable device is detected (mock)";
  case cudaErrorNotReady: return "device not ready";
  case cudaErrorInvalidValue: return "invalid argument";
  case cudaErrorInvalidDevice: return "invalid device ordinal";
  case cudaErrorMemoryAllocation: return "out of memory";
  default: return "mock error";
  }
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp* prop, int dev) {
  if (dev < 0 || dev >= mock_device_count()) return cudaErrorInvalidDevice;
  memset(prop, 0, sizeof *prop);
  snprintf(prop->name, sizeof prop->name, "Mock GPU %d", dev);
  prop->totalGlobalMem = (size_t)16 << 30;
  prop->pciDomainID = 0;
  prop->pciBusID = 0x10 + dev;
  prop->pciDeviceID = 0;
  prop->major = 9; /* an sm_90 part: fp8 types are available */
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  if (dev < 0 || dev >= mock_device_count()) return cudaErrorInvalidDevice;
  mock_device = dev;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  (void)flags;
  *s = calloc(1, sizeof **s);
  if (!*s) return cudaErrorMemoryAllocation;
  (*s)->dev = mock_device;
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  mock_lock();
  mock_stream_idle(s, "cudaStreamDestroy");
  mock_unlock();
  free(s->rec);
  free(s);
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  mock_lock();
  int busy = s->pending > 0;
  mock_unlock();
  return busy ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  mock_lock();
  if (s->hung) mock_fail("cudaStreamSynchronize on a stream that never completes");
  mock_unlock();
  while (cudaStreamQuery(s) == cudaErrorNotReady) sched_yield();
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** p, size_t size) {
  if (posix_memalign(p, 256, size ? size : 1)) return cudaErrorMemoryAllocation;
  memset(*p, 0xa5, size); /* never zero: a check must not pass on untouched memory */
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind) {
  (void)kind;
  memmove(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s) {
  mock_lock();
  mock_stream_idle(s, "cudaMemcpyAsync");
  mock_unlock();
  return cudaMemcpy(dst, src, n, kind);
}

cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
  mock_lock();
  mock_stream_idle(s, "cudaMemsetAsync");
  mock_unlock();
  memset(p, v, n);
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  (void)mode;
  mock_lock();
  mock_stream_idle(s, "cudaStreamBeginCapture");
  s->capturing = 1;
  s->nrec = 0;
  mock_unlock();
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* graph) {
  mock_lock();
  if (!s->capturing) mock_fail("cudaStreamEndCapture without a capture");
  s->capturing = 0;
  *graph = calloc(1, sizeof **graph);
  if (!*graph) mock_fail("out of memory");
  (*graph)->rec = s->rec;
  (*graph)->nrec = s->nrec;
  s->rec = NULL;
  s->nrec = s->cap = 0;
  mock_unlock();
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  (void)flags;
  *exec = (cudaGraphExec_t)graph;
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t s) {
  struct CUgraph_st* g = (struct CUgraph_st*)exec;
  mock_lock();
  for (int i = 0; i < g->nrec; i++) {
    struct mock_call c = g->rec[i];
    if (c.stream != s) mock_fail("graph launched on another stream than it was captured on");
    mock_nccl_post(&c);
  }
  mock_unlock();
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  (void)exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  free(graph->rec);
  free(graph);
  return cudaSuccess;
}
