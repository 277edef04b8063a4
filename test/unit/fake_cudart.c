/*
 * The emulated CUDA runtime calls of fake_cudart.h, counting what is alive (streams, events,
 * allocations), copies and launches, and able to fail one event creation.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cudart.h"
#include "kernels.h" /* kern_coll_batch_t: a batch's works carry their own records */

fake_cudart_t fake_cudart;

/* The linker sends the core's calls of cudaX to __wrap_cudaX (--wrap=cudaX). */
cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags);
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t s);
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags);
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t e);
cudaError_t __wrap_cudaHostAlloc(void** p, size_t size, unsigned int flags);
cudaError_t __wrap_cudaHostGetDevicePointer(void** d, void* h, unsigned int flags);
cudaError_t __wrap_cudaFreeHost(void* p);
cudaError_t __wrap_cudaMalloc(void** p, size_t size);
cudaError_t __wrap_cudaFree(void* p);
cudaError_t __wrap_cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s);
cudaError_t __wrap_cudaMemcpyAsync(void* d, const void* src, size_t n, enum cudaMemcpyKind k, cudaStream_t s);
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t s);
cudaError_t __wrap_cudaFuncGetAttributes(struct cudaFuncAttributes* a, const void* f);
cudaError_t __wrap_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* m);
cudaError_t __wrap_cudaGetDevice(int* d);
cudaError_t __wrap_cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int d);
cudaError_t __wrap_cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t sh, cudaStream_t s);
cudaError_t __wrap_cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* st);
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t __wrap_cudaEventQuery(cudaEvent_t e);
cudaError_t __wrap_cudaEventSynchronize(cudaEvent_t e);
cudaError_t __wrap_cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* arg);
cudaError_t __wrap_cudaGetFuncBySymbol(cudaFunction_t* f, const void* sym);
cudaError_t __wrap_cudaGetDriverEntryPointByVersion(const char* sym, void** fn, unsigned int ver,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult* q);
cudaError_t __real_cudaGetDriverEntryPointByVersion(const char* sym, void** fn, unsigned int ver,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult* q);

cudaError_t __wrap_cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  (void)flags;
  *s = (cudaStream_t)malloc(1);
  if (*s == NULL) return cudaErrorMemoryAllocation;
  __atomic_add_fetch(&fake_cudart.streams, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaStreamDestroy(cudaStream_t s) {
  free(s);
  __atomic_sub_fetch(&fake_cudart.streams, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  (void)flags;
  if (++fake_cudart.event_creations == fake_cudart.fail_event) return cudaErrorMemoryAllocation;
  *e = (cudaEvent_t)malloc(1);
  if (*e == NULL) return cudaErrorMemoryAllocation;
  __atomic_add_fetch(&fake_cudart.events, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaEventDestroy(cudaEvent_t e) {
  free(e);
  __atomic_sub_fetch(&fake_cudart.events, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
/* Host allocations alive, so that an emulated launch recognises the profiler's kernel-channel
 * records among its arguments (kernels.h: the first member of both works). */
#define FAKE_HOST_MAX 64
static struct {
  char* p;
  size_t size;
} fake_host[FAKE_HOST_MAX];

static void fake_host_track(void* p, size_t size) {
  for (int i = 0; i < FAKE_HOST_MAX; i++)
    if (fake_host[i].p == NULL || fake_host[i].p == p) {
      fake_host[i].p = p;
      fake_host[i].size = size;
      return;
    }
}

cudaError_t __wrap_cudaHostAlloc(void** p, size_t size, unsigned int flags) {
  (void)flags;
  *p = calloc(1, size);
  if (*p == NULL) return cudaErrorMemoryAllocation;
  fake_host_track(*p, size);
  __atomic_add_fetch(&fake_cudart.host_allocs, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaHostGetDevicePointer(void** d, void* h, unsigned int flags) {
  (void)flags;
  *d = h;
  return cudaSuccess;
}
cudaError_t __wrap_cudaFreeHost(void* p) {
  for (int i = 0; i < FAKE_HOST_MAX; i++)
    if (fake_host[i].p == p) fake_host[i].p = NULL;
  free(p);
  __atomic_sub_fetch(&fake_cudart.host_allocs, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaMalloc(void** p, size_t size) {
  *p = calloc(1, size);
  if (*p == NULL) return cudaErrorMemoryAllocation;
  __atomic_add_fetch(&fake_cudart.dev_allocs, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaFree(void* p) {
  free(p);
  __atomic_sub_fetch(&fake_cudart.dev_allocs, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) {
  (void)s;
  memset(p, v, n);
  return cudaSuccess;
}
cudaError_t __wrap_cudaMemcpyAsync(void* d, const void* src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s) {
  (void)s;
  if (k == cudaMemcpyDeviceToDevice) { /* between the user's buffers: counted, not touched */
    __atomic_add_fetch(&fake_cudart.copies, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fake_cudart.copied, n, __ATOMIC_RELAXED);
  } else {
    memcpy(d, src, n);
  }
  return cudaSuccess;
}
cudaError_t __wrap_cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return cudaSuccess;
}
cudaError_t __wrap_cudaFuncGetAttributes(struct cudaFuncAttributes* a, const void* f) {
  (void)f;
  memset(a, 0, sizeof(*a));
  return cudaSuccess;
}
cudaError_t __wrap_cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode* m) {
  (void)m;
  return cudaSuccess;
}
cudaError_t __wrap_cudaGetDevice(int* d) {
  *d = 0;
  return cudaSuccess;
}
cudaError_t __wrap_cudaDeviceGetAttribute(int* v, enum cudaDeviceAttr a, int d) {
  (void)a, (void)d;
  *v = 132;
  return cudaSuccess;
}
/* The kernel's part of the profiler's KernelCh events for one work or batch of ncta CTAs: CTA
 * i's start and stop times into record i, where rec points into host-mapped memory with room
 * for every CTA (anything else, a user buffer or a device table, points elsewhere). */
static void fake_prof_write(char* rec, unsigned ncta, int launch) {
  const size_t need = (size_t)ncta * 2 * sizeof(unsigned long long);
  for (int i = 0; rec != NULL && i < FAKE_HOST_MAX; i++) {
    if (fake_host[i].p == NULL || rec < fake_host[i].p ||
        rec + need > fake_host[i].p + fake_host[i].size)
      continue;
    unsigned long long* t = (unsigned long long*)(void*)rec;
    for (unsigned c = 0; c < ncta; c++) {
      t[2 * c] = 1000000ull * (unsigned long long)launch + c;
      t[2 * c + 1] = t[2 * c] + 500;
    }
    __atomic_add_fetch(&fake_cudart.timed_ctas, (int)ncta, __ATOMIC_RELAXED);
    break;
  }
}

/* One launch whose parameter starts at arg (NULL: none) on a grid of gx CTAs. */
static void fake_launch(const void* arg, unsigned gx) {
  const int launch = __atomic_add_fetch(&fake_cudart.launches, 1, __ATOMIC_RELAXED);
  if (arg == NULL) return;
  /* A collective batch (its tag first): each work's records, one per CTA that runs it (its
   * nchannels of them), as the batch kernel writes them; and its works in order. Otherwise the
   * argument's first member is the records pointer of every CTA of the launch (kernels.h). */
  const kern_coll_batch_t* batch = (const kern_coll_batch_t*)arg;
  if (batch->tag == KERN_COLL_BATCH_TAG) {
    __atomic_add_fetch(&fake_cudart.batches, 1, __ATOMIC_RELAXED);
    for (uint32_t w = 0; w < batch->nworks && w < KERN_COLL_BATCH_MAX; w++) {
      const kern_coll_work_t* k = &batch->works[w];
      fake_prof_write((char*)k->prof, (unsigned)k->nchannels, launch);
      const int at = __atomic_fetch_add(&fake_cudart.batch_works, 1, __ATOMIC_RELAXED);
      if (at < FAKE_WORKS_MAX) {
        fake_cudart.batch_recv[at] = k->recvbuff;
        fake_cudart.batch_algo[at] = (int)k->algo;
        fake_cudart.batch_ch0[at] = (int)k->channel0;
        fake_cudart.batch_nch[at] = (int)k->nchannels;
        fake_cudart.batch_run[at] = (int)k->run;
      }
    }
    return;
  }
  fake_prof_write(*(char* const*)arg, gx, launch);
}

cudaError_t __wrap_cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** args, size_t sh,
                             cudaStream_t s) {
  (void)f, (void)b, (void)sh, (void)s;
  fake_launch(args == NULL ? NULL : args[0], g.x);
  return cudaSuccess;
}

/* The driver's launch with its parameter as one buffer (kern_launch_prefix): the same. */
static CUresult fake_cu_launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned smem, CUstream s, void** params,
                               void** extra) {
  (void)f, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)smem, (void)s;
  const void* arg = params != NULL ? params[0] : NULL;
  for (int i = 0; extra != NULL && extra[i] != CU_LAUNCH_PARAM_END; i += 2)
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) arg = extra[i + 1];
  fake_launch(arg, gx);
  return CUDA_SUCCESS;
}

cudaError_t __wrap_cudaGetFuncBySymbol(cudaFunction_t* f, const void* sym) {
  *f = (cudaFunction_t)(uintptr_t)sym;
  return cudaSuccess;
}

/* cuLaunchKernel is the fake's; any other entry point the real runtime's (none without a
 * driver). */
cudaError_t __wrap_cudaGetDriverEntryPointByVersion(const char* sym, void** fn, unsigned int ver,
                                                    unsigned long long flags,
                                                    enum cudaDriverEntryPointQueryResult* q) {
  if (strcmp(sym, "cuLaunchKernel") == 0) {
    *fn = (void*)fake_cu_launch;
    if (q != NULL) *q = cudaDriverEntryPointSuccess;
    return cudaSuccess;
  }
  return __real_cudaGetDriverEntryPointByVersion(sym, fn, ver, flags, q);
}

/* Stream order: nothing runs, so nothing is captured, waited for or pending. */
cudaError_t __wrap_cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus* st) {
  (void)s;
  *st = cudaStreamCaptureStatusNone;
  return cudaSuccess;
}
cudaError_t __wrap_cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  (void)s, (void)e, (void)flags;
  __atomic_add_fetch(&fake_cudart.stream_waits, 1, __ATOMIC_RELAXED);
  return cudaSuccess;
}
cudaError_t __wrap_cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  (void)e, (void)s;
  return cudaSuccess;
}
cudaError_t __wrap_cudaEventQuery(cudaEvent_t e) {
  (void)e;
  return cudaSuccess;
}
cudaError_t __wrap_cudaEventSynchronize(cudaEvent_t e) {
  (void)e;
  return cudaSuccess;
}

/* A host function in stream order: nothing runs before it, so it runs now. */
cudaError_t __wrap_cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void* arg) {
  (void)s;
  fn(arg);
  return cudaSuccess;
}
