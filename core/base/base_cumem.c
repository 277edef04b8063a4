/*
 * GPU memory for ncclMemAlloc: cuMem allocations (physical memory mapped into a reserved
 * virtual range, granularity-aligned, readable and writable by every GPU that can reach this one
 * peer to peer, exportable as a file descriptor where the driver allows), so that the buffers can
 * later be registered, mapped by peers and used by network plugins. With NCCL_CUMEM_ENABLE=0,
 * plain cudaMalloc.
 *
 * The driver API is reached through cudaGetDriverEntryPointByVersion, so libnccl.so.2 does not
 * link libcuda.so.1 (which machines without a GPU do not have).
 *
 * Every live allocation is recorded, so that ncclMemFree frees only what ncclMemAlloc returned:
 * a foreign pointer, one inside an allocation or a second free is refused with a message before
 * any driver call.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

/* ---- the live allocations ---- */

typedef struct {
  void* base;
  size_t size; /* as asked */
  bool cumem;  /* cuMem (else cudaMalloc): how to free it, whatever NCCL_CUMEM_ENABLE says now */
} cumem_live_t;

static pthread_mutex_t cumem_live_lock = PTHREAD_MUTEX_INITIALIZER;
static cumem_live_t* cumem_live;
static size_t cumem_nlive, cumem_cap;

static ncclResult_t cumem_live_add(void* base, size_t size, bool cumem) {
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&cumem_live_lock);
  if (cumem_nlive == cumem_cap) {
    size_t ncap = cumem_cap ? 2 * cumem_cap : 64;
    cumem_live_t* g = realloc(cumem_live, ncap * sizeof(*g));
    if (g == NULL) {
      WARN("ncclMemAlloc: out of host memory recording allocation %zu", cumem_nlive + 1);
      res = ncclSystemError;
      goto out_unlock;
    }
    cumem_live = g;
    cumem_cap = ncap;
  }
  cumem_live[cumem_nlive++] = (cumem_live_t){base, size, cumem};
out_unlock:
  pthread_mutex_unlock(&cumem_live_lock);
  return res;
}

/* Take ptr's record out (it must be an allocation's base), or say why it cannot be freed. */
static ncclResult_t cumem_live_take(void* ptr, cumem_live_t* out_p) {
  ncclResult_t res = ncclInvalidArgument;
  const char* p = (const char*)ptr;
  pthread_mutex_lock(&cumem_live_lock);
  for (size_t i = 0; i < cumem_nlive; i++) {
    const char* b = (const char*)cumem_live[i].base;
    if (p == b) {
      *out_p = cumem_live[i];
      cumem_live[i] = cumem_live[--cumem_nlive];
      res = ncclSuccess;
      goto out_unlock;
    }
    if (p > b && p < b + cumem_live[i].size) {
      WARN(
          "ncclMemFree: ptr %p is inside the allocation at %p (%zu bytes); pass the pointer "
          "ncclMemAlloc returned",
          ptr, cumem_live[i].base, cumem_live[i].size);
      goto out_unlock;
    }
  }
  WARN(
      "ncclMemFree: ptr %p was not allocated by ncclMemAlloc (or was freed already); pass a "
      "pointer that ncclMemAlloc returned",
      ptr);
out_unlock:
  pthread_mutex_unlock(&cumem_live_lock);
  return res;
}

static struct {
  CUresult (*get_granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags);
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*,
                     unsigned long long);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*address_reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*address_free)(CUdeviceptr, size_t);
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*unmap)(CUdeviceptr, size_t);
  CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t);
  CUresult (*retain_handle)(CUmemGenericAllocationHandle*, void*);
  CUresult (*get_address_range)(CUdeviceptr*, size_t*, CUdeviceptr);
  CUresult (*device_get_attribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*get_error_string)(CUresult, const char**);
  CUresult (*export_handle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType,
                            unsigned long long);
  CUresult (*import_handle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType);
} cu;

static pthread_once_t cu_once = PTHREAD_ONCE_INIT;
static ncclResult_t cu_load_result = ncclSuccess;
static char cu_load_error[256];

static void cu_load(void) {
  static const struct {
    const char* name;
    void** fn;
  } syms[] = {
      {"cuMemGetAllocationGranularity", (void**)&cu.get_granularity},
      {"cuMemCreate", (void**)&cu.create},
      {"cuMemRelease", (void**)&cu.release},
      {"cuMemAddressReserve", (void**)&cu.address_reserve},
      {"cuMemAddressFree", (void**)&cu.address_free},
      {"cuMemMap", (void**)&cu.map},
      {"cuMemUnmap", (void**)&cu.unmap},
      {"cuMemSetAccess", (void**)&cu.set_access},
      {"cuMemRetainAllocationHandle", (void**)&cu.retain_handle},
      {"cuMemGetAddressRange", (void**)&cu.get_address_range},
      {"cuDeviceGetAttribute", (void**)&cu.device_get_attribute},
      {"cuGetErrorString", (void**)&cu.get_error_string},
      {"cuMemExportToShareableHandle", (void**)&cu.export_handle},
      {"cuMemImportFromShareableHandle", (void**)&cu.import_handle},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaError_t e = cudaGetDriverEntryPointByVersion(syms[i].name, syms[i].fn, 12000,
                                                     cudaEnableDefault, &q);
    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || *syms[i].fn == NULL) {
      snprintf(cu_load_error, sizeof(cu_load_error), "driver entry point %s unavailable (%s)",
               syms[i].name, e != cudaSuccess ? cudaGetErrorString(e) : "not found");
      cu_load_result = e == cudaSuccess ? ncclSystemError : ncclUnhandledCudaError;
      return;
    }
  }
}

#define CU_CHECK(call)                                                            \
  do {                                                                            \
    CUresult r_ = (call);                                                         \
    if (r_ != CUDA_SUCCESS) {                                                     \
      const char* s_ = "unknown error";                                           \
      cu.get_error_string(r_, &s_);                                               \
      WARN("CUDA driver call %s failed: %s (%d)", #call, s_, (int)r_);            \
      res = ncclUnhandledCudaError;                                               \
      goto fail;                                                                  \
    }                                                                             \
  } while (0)

static ncclResult_t cumem_ready(void) {
  pthread_once(&cu_once, cu_load);
  if (cu_load_result != ncclSuccess) WARN("cuMem allocation unavailable: %s", cu_load_error);
  return cu_load_result;
}

static ncclResult_t cumem_release(const cumem_live_t* a);

ncclResult_t cumem_alloc(void** ptr_p, size_t size) {
  if (param_int(PARAM_CUMEM_ENABLE) == 0) {
    void* p = NULL;
    cudaError_t e = cudaMalloc(&p, size);
    if (e != cudaSuccess) {
      WARN("cudaMalloc of %zu bytes failed: %s", size, cudaGetErrorString(e));
      return ncclUnhandledCudaError;
    }
    cumem_live_t a = {p, size, false};
    if (cumem_live_add(p, size, false) != ncclSuccess) {
      (void)cumem_release(&a);
      return ncclSystemError;
    }
    *ptr_p = p;
    return ncclSuccess;
  }
  CHECK(cumem_ready());
  ncclResult_t res = ncclSuccess;
  int dev = -1, ndev = 0, fd_ok = 0, rdma_ok = 0;
  CHECK(cuda_get_device(&dev));
  CHECK(cuda_device_count(&ndev));
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr base = 0;
  size_t gran = 0, rounded = 0;
  bool created = false, reserved = false, mapped = false;

  CU_CHECK(cu.device_get_attribute(&fd_ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                   (CUdevice)dev));
  CU_CHECK(cu.device_get_attribute(&rdma_ok, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED,
                                   (CUdevice)dev));
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  prop.requestedHandleTypes = fd_ok ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.allocFlags.gpuDirectRDMACapable = rdma_ok ? 1 : 0;
  CU_CHECK(cu.get_granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  rounded = (size + gran - 1) / gran * gran;

  CU_CHECK(cu.create(&handle, rounded, &prop, 0));
  created = true;
  CU_CHECK(cu.address_reserve(&base, rounded, gran, 0, 0));
  reserved = true;
  CU_CHECK(cu.map(base, rounded, 0, handle, 0));
  mapped = true;
  /* This GPU, and every GPU that can reach it peer to peer, may read and write the buffer. */
  for (int d = 0; d < ndev; d++) {
    int can = d == dev;
    if (!can && cudaDeviceCanAccessPeer(&can, d, dev) != cudaSuccess) can = 0;
    if (!can) continue;
    CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, d}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CU_CHECK(cu.set_access(base, rounded, &acc, 1));
  }
  CHECK_GOTO(cumem_live_add((void*)base, size, true), res, fail);
  INFO(NCCL_ALLOC, "ncclMemAlloc: %zu bytes (%zu with granularity %zu) at %p on device %d", size,
       rounded, gran, (void*)base, dev);
  *ptr_p = (void*)base;
  return ncclSuccess;
fail:
  if (mapped) cu.unmap(base, rounded);
  if (reserved) cu.address_free(base, rounded);
  if (created) cu.release(handle);
  return res;
}

ncclResult_t cumem_free(void* ptr) {
  cumem_live_t a;
  CHECK(cumem_live_take(ptr, &a));
  return cumem_release(&a);
}

static ncclResult_t cumem_release(const cumem_live_t* a) {
  void* ptr = a->base;
  if (!a->cumem) {
    cudaError_t e = cudaFree(ptr);
    if (e != cudaSuccess) {
      WARN("ncclMemFree: cudaFree(%p) failed: %s", ptr, cudaGetErrorString(e));
      return ncclUnhandledCudaError;
    }
    return ncclSuccess;
  }
  CHECK(cumem_ready());
  ncclResult_t res = ncclSuccess;
  CUmemGenericAllocationHandle handle = 0;
  CUdeviceptr base = 0;
  size_t size = 0;
  if (cu.retain_handle(&handle, ptr) != CUDA_SUCCESS ||
      cu.get_address_range(&base, &size, (CUdeviceptr)ptr) != CUDA_SUCCESS) {
    WARN("ncclMemFree: %p was not allocated by ncclMemAlloc", ptr);
    return ncclInvalidArgument;
  }
  /* The retain above took a reference of its own. */
  CU_CHECK(cu.release(handle));
  if ((void*)base != ptr) {
    WARN("ncclMemFree: %p is inside the allocation at %p; pass the pointer ncclMemAlloc returned",
         ptr, (void*)base);
    return ncclInvalidArgument;
  }
  CU_CHECK(cu.unmap(base, size));
  CU_CHECK(cu.release(handle));
  CU_CHECK(cu.address_free(base, size));
  return ncclSuccess;
fail:
  return res;
}

/* ---- windows: an allocation's descriptor, and a flat range of mapped allocations ---- */

ncclResult_t cumem_find(const void* ptr, void** base_p, size_t* size_p, bool* cumem_p) {
  const char* p = (const char*)ptr;
  ncclResult_t res = ncclInvalidArgument;
  pthread_mutex_lock(&cumem_live_lock);
  for (size_t i = 0; i < cumem_nlive; i++) {
    const char* b = (const char*)cumem_live[i].base;
    if (p >= b && p < b + cumem_live[i].size) {
      *base_p = cumem_live[i].base;
      *size_p = cumem_live[i].size;
      *cumem_p = cumem_live[i].cumem;
      res = ncclSuccess;
      break;
    }
  }
  pthread_mutex_unlock(&cumem_live_lock);
  return res;
}

ncclResult_t cumem_export_fd(void* base, size_t* mapped_p, int* fd_p) {
  CHECK(cumem_ready());
  ncclResult_t res = ncclSuccess;
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr b = 0;
  size_t mapped = 0;
  int fd = -1;
  bool retained = false;
  CU_CHECK(cu.retain_handle(&h, base));
  retained = true;
  CU_CHECK(cu.get_address_range(&b, &mapped, (CUdeviceptr)base));
  CU_CHECK(cu.export_handle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CU_CHECK(cu.release(h));
  *mapped_p = mapped;
  *fd_p = fd;
  return ncclSuccess;
fail:
  if (retained) cu.release(h);
  return res;
}

ncclResult_t cumem_flat_reserve(cumem_flat_t* f, size_t size, int nmaps) {
  memset(f, 0, sizeof(*f));
  CHECK(cumem_ready());
  ncclResult_t res = ncclSuccess;
  CHECK(MEM_CALLOC(&f->maps, (size_t)nmaps));
  f->nmaps = nmaps;
  CU_CHECK(cu.address_reserve((CUdeviceptr*)&f->va, size, 0, 0, 0));
  f->size = size;
  return ncclSuccess;
fail:
  free(f->maps);
  f->maps = NULL;
  return res;
}

ncclResult_t cumem_flat_map(cumem_flat_t* f, int i, size_t off, size_t size, int fd, int dev) {
  ncclResult_t res = ncclSuccess;
  CUmemGenericAllocationHandle h = 0;
  bool imported = false;
  CUdeviceptr at = 0;
  if (i < 0 || i >= f->nmaps || f->maps[i].size != 0 || off + size > f->size) {
    WARN("cuMem window: mapping %d at offset %zu (%zu bytes) does not fit the range", i, off, size);
    return ncclInternalError;
  }
  CU_CHECK(cu.import_handle(&h, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  imported = true;
  at = (CUdeviceptr)((char*)f->va + off);
  CU_CHECK(cu.map(at, size, 0, h, 0));
  f->maps[i].handle = h;
  f->maps[i].off = off;
  f->maps[i].size = size;
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, dev}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CU_CHECK(cu.set_access(at, size, &acc, 1));
  return ncclSuccess;
fail:
  if (f->maps[i].size != 0) {
    cu.unmap(at, size);
    f->maps[i].size = 0;
  }
  if (imported) cu.release(h);
  return res;
}

void cumem_flat_free(cumem_flat_t* f) {
  if (f->va == NULL) return;
  for (int i = 0; i < f->nmaps; i++) {
    if (f->maps[i].size == 0) continue;
    CUresult r = cu.unmap((CUdeviceptr)((char*)f->va + f->maps[i].off), f->maps[i].size);
    if (r == CUDA_SUCCESS) r = cu.release(f->maps[i].handle);
    if (r != CUDA_SUCCESS) WARN("cuMem window: unmapping part %d failed (%d)", i, (int)r);
  }
  if (cu.address_free((CUdeviceptr)f->va, f->size) != CUDA_SUCCESS)
    WARN("cuMem window: freeing the range at %p (%zu bytes) failed", f->va, f->size);
  free(f->maps);
  memset(f, 0, sizeof(*f));
}
