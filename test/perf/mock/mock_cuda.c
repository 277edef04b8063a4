/*
 * Choir perf tools, CPU mock: the CUDA runtime calls the perf tools make (see mock.h).
 *
 * Several ranks on one device (the tools' ranks-per-GPU layouts) are checked here too:
 *   - MOCK_CUDA_TRACE=FILE appends one line per stream created, "stream pid=P dev=D", in
 *     creation order, so that a test sees which device each rank's stream (and so its
 *     communicator: the fake NCCL refuses a stream of another device) was on.
 *   - MOCK_CUDA_MPS=1: cudaDevAttrMpsEnabled is 1 (default 0, a machine without an MPS daemon).
 *   - cudaMalloc, cudaFree and cudaMemcpy abort while an NCCL operation is in flight on a stream
 *     of the current device: on a GPU they may wait for the whole device, whose kernels may wait
 *     for a rank that the caller has not launched yet (ranks sharing a GPU from one thread).
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mock.h"

static pthread_mutex_t mock_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int mock_device;

/* Every live stream, under mock_mu. */
static cudaStream_t* mock_streams;
static int mock_nstreams, mock_streams_cap;

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

/* A call that may synchronise the whole current device: no NCCL work may be in flight on it. */
static void mock_device_quiet(const char* what) {
  mock_lock();
  for (int i = 0; i < mock_nstreams; i++) {
    cudaStream_t s = mock_streams[i];
    if (s->dev == mock_device && s->pending > 0 && !s->hung)
      mock_fail("%s on device %d while %d NCCL operations are in flight there: on a GPU this "
                "may wait for kernels that wait for a rank not launched yet (deadlock when ranks "
                "share the GPU)",
                what, mock_device, s->pending);
  }
  mock_unlock();
}

static void mock_trace(const char* fmt, ...) {
  const char* path = getenv("MOCK_CUDA_TRACE");
  if (!path || !*path) return;
  char line[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n <= 0 || n >= (int)sizeof line) mock_fail("trace line too long");
  /* One write per line on an O_APPEND file: lines of several processes never interleave. */
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0 || write(fd, line, (size_t)n) != n) mock_fail("cannot write the trace %s", path);
  close(fd);
}

cudaError_t cudaDeviceGetAttribute(int* value, enum cudaDeviceAttr attr, int dev) {
  if (dev < 0 || dev >= mock_device_count()) return cudaErrorInvalidDevice;
  const char* e = getenv("MOCK_CUDA_MPS");
  *value = attr == cudaDevAttrMpsEnabled && e && atoi(e) == 1;
  return cudaSuccess;
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
  mock_lock();
  if (mock_nstreams == mock_streams_cap) {
    mock_streams_cap = mock_streams_cap ? 2 * mock_streams_cap : 16;
    mock_streams = realloc(mock_streams, (size_t)mock_streams_cap * sizeof *mock_streams);
    if (!mock_streams) mock_fail("out of memory");
  }
  mock_streams[mock_nstreams++] = *s;
  mock_unlock();
  mock_trace("stream pid=%d dev=%d\n", (int)getpid(), mock_device);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  mock_lock();
  mock_stream_idle(s, "cudaStreamDestroy");
  for (int i = 0; i < mock_nstreams; i++)
    if (mock_streams[i] == s) mock_streams[i] = mock_streams[--mock_nstreams];
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
  mock_device_quiet("cudaMalloc");
  if (posix_memalign(p, 256, size ? size : 1)) return cudaErrorMemoryAllocation;
  memset(*p, 0xa5, size); /* never zero: a check must not pass on untouched memory */
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  mock_device_quiet("cudaFree");
  free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind) {
  (void)kind;
  mock_device_quiet("cudaMemcpy");
  memmove(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, enum cudaMemcpyKind kind,
                            cudaStream_t s) {
  (void)kind;
  mock_lock();
  mock_stream_idle(s, "cudaMemcpyAsync");
  mock_unlock();
  memmove(dst, src, n);
  return cudaSuccess;
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
