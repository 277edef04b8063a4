/*
 * GdrShim: a test-only net plugin (libnccl-net-gdrshim.so) that poses as a CUDA-aware NIC, so that
 * the core's GPUDirect RDMA path (connection buffers in GPU memory, regMr(NCCL_PTR_CUDA), GPU
 * pointers handed to isend / irecv, iflush after every receive into GPU memory) runs end to end
 * on machines without an RDMA NIC. Never shipped, never installed.
 *
 * It wraps another net plugin's v12 table, the "inner" (the library named by CHOIR_GDRSHIM_INNER,
 * a full path, else libnccl-net-socket.so through the normal search), and forwards every call to
 * it, with these differences:
 *   - getProperties adds NCCL_PTR_CUDA to ptrSupport (not NCCL_PTR_DMABUF);
 *   - regMr(NCCL_PTR_CUDA) asks the CUDA driver (libcuda.so.1, loaded on first use) whether the
 *     pointer is device memory. If it is, the shim allocates a host bounce buffer of the same size,
 *     registers that with the inner plugin as host memory and copies through it: isend copies
 *     GPU -> bounce before sending, a completed receive is copied bounce -> GPU inside test()
 *     before it reports done. If it is not (no driver, or host memory posing as device memory, as
 *     in the CPU unit tests' fake CUDA), the buffer itself is registered as host memory;
 *   - iflush never reaches the inner plugin: data is in GPU memory by the time test() reports a
 *     receive done, so the flush request it returns is done at once;
 *   - the device-offload entries (getDeviceMr, irecvConsumed) are absent: the shim moves data on
 *     the host, so it refuses an inner device whose netDeviceType is not NCCL_NET_DEVICE_HOST;
 *   - makeVDevice is absent (NULL only means "no NIC fusion"; the table is fixed before the inner
 *     plugin is known, and a forwarder would claim fusion for inner plugins without it, such as
 *     net-socket); setNetAttr forwards when the inner plugin has it, else is a no-op (a hint);
 *   - a receive into device memory clears NCCL_NET_OPTIONAL_RECV_COMPLETION (see gdr_irecv).
 * Copies run on a CU_STREAM_NON_BLOCKING stream of the buffer's own context, pushed around each
 * driver call (proxy threads may have no current context). Never the NULL stream and never a
 * synchronous cuMemcpy: those wait for the legacy stream, where the collective kernel waits for
 * this very data. A copy does wait for its stream, so isend and test may take as long as one
 * copy of the message: fine for a test plugin, never for a real one.
 *
 * Counters (process-wide, atomic), read by tests through choir_gdrshim_stats (order below, named
 * GDRSHIM_* in net_gdr_shim.h) and printed to stderr at each closeRecv when CHOIR_GDRSHIM_REPORT=1
 * ("gdrshim: pid P: cuda regs R (device D), device sends S (B bytes), device recvs V (B bytes),
 * flushes F"):
 *   [0] regMr(NCCL_PTR_CUDA) calls that succeeded     [1] of which real device memory
 *   [2] isends from device memory (accepted requests) [3] their bytes
 *   [4] receive buffers copied into device memory     [5] their bytes (the sizes received)
 *   [6] iflush calls
 * choir_gdrshim_flush_buffers returns the number of buffers those iflush calls named.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_net.h"
#include "net_gdr_shim.h"

#define GDR_EXPORT __attribute__((visibility("default")))
#define GDR_INNER_ENV "CHOIR_GDRSHIM_INNER"
#define GDR_INNER_DEFAULT "libnccl-net-socket.so"
#define GDR_REPORT_ENV "CHOIR_GDRSHIM_REPORT"

/* ---- the few CUDA driver API types and values used (cuda.h's names and values) --------------- */

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* 64-bit builds */
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;

#define CUDA_SUCCESS 0
#define CU_POINTER_ATTRIBUTE_CONTEXT 1
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define CU_MEMORYTYPE_DEVICE 2
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_MEMHOSTALLOC_PORTABLE 0x1

static struct {
  CUresult (*init)(unsigned int flags);
  CUresult (*get_error_string)(CUresult error, const char** str);
  CUresult (*pointer_get_attribute)(void* data, int attribute, CUdeviceptr ptr);
  CUresult (*device_get)(CUdevice* device, int ordinal);
  CUresult (*primary_ctx_retain)(CUcontext* ctx, CUdevice device);
  CUresult (*primary_ctx_release)(CUdevice device);
  CUresult (*ctx_push)(CUcontext ctx);
  CUresult (*ctx_pop)(CUcontext* ctx);
  CUresult (*stream_create)(CUstream* stream, unsigned int flags);
  CUresult (*stream_destroy)(CUstream stream);
  CUresult (*stream_synchronize)(CUstream stream);
  CUresult (*memcpy_dtoh_async)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*memcpy_htod_async)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
  CUresult (*mem_host_alloc)(void** p, size_t bytes, unsigned int flags);
  CUresult (*mem_free_host)(void* p);
} cu;
static bool cu_usable; /* libcuda loaded, every symbol found, cuInit succeeded */
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

/* ---- counters (indices in net_gdr_shim.h) ---------------------------------------------------- */

static _Atomic uint64_t gdr_stats[GDRSHIM_NSTATS];
static _Atomic uint64_t gdr_flush_buffers;

static void gdr_count(int which, uint64_t n) {
  atomic_fetch_add_explicit(&gdr_stats[which], n, memory_order_relaxed);
}

/* ---- shim objects ---------------------------------------------------------------------------- */

/* Every mhandle the shim hands out is one of these, so that every call can unwrap it. */
typedef struct gdr_mr {
  void* inner;          /* the inner plugin's handle: of the buffer itself, or of `bounce` */
  char* dev;            /* start of the registered device range; NULL: host-backed */
  char* bounce;         /* host copy of [dev, dev + size) */
  size_t size;          /* bytes registered */
  CUcontext ctx;        /* context owning `dev`, current around every driver call on it */
  CUstream stream;      /* non-blocking stream of ctx for the copies */
  bool primary;         /* ctx is the primary context of primary_dev, retained by the shim */
  CUdevice primary_dev; /* device of ctx, when primary */
  bool pinned;          /* bounce from cuMemHostAlloc (else posix_memalign) */
} gdr_mr_t;

enum { GDR_REQ_SEND, GDR_REQ_RECV, GDR_REQ_FLUSH };

/* One receive buffer of a request: where its bytes land on the host and must go on the GPU. */
typedef struct gdr_dst {
  gdr_mr_t* mr; /* device registration, or NULL: nothing to copy */
  char* dev;
  char* bounce;
  size_t room; /* size posted */
} gdr_dst_t;

/* Every request the shim hands out is one of these (test() must tell them apart). */
typedef struct gdr_req {
  struct gdr_req *prev, *next; /* gdr_live: every request not yet completed */
  void* comm;                  /* the comm it was posted on: its close frees what is left */
  int kind;
  void* inner; /* the inner plugin's request (NULL for flushes) */
  int n;       /* receives: buffers in dst[] */
  bool any_dev;
  int* sizes;  /* n entries, for the inner's test when the caller passes no sizes */
  void** data; /* n entries: the addresses given to the inner irecv */
  void** mhs;  /* n entries: the inner handles given to the inner irecv */
  gdr_dst_t dst[];
} gdr_req_t;

/* ---- logging --------------------------------------------------------------------------------- */

static _Atomic(ncclDebugLogger_t) gdr_logger; /* the latest one init was given */

__attribute__((format(printf, 1, 2))) static void gdr_warn(const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  ncclDebugLogger_t logger = atomic_load_explicit(&gdr_logger, memory_order_acquire);
  if (logger != NULL)
    logger(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "gdrshim: %s", msg);
  else
    fprintf(stderr, "gdrshim: %s\n", msg);
}

/* ---- the CUDA driver ------------------------------------------------------------------------- */

static void cu_load(void) {
  static const struct {
    const char* name;
    void** fn;
  } syms[] = {
      {"cuInit", (void**)&cu.init},
      {"cuGetErrorString", (void**)&cu.get_error_string},
      {"cuPointerGetAttribute", (void**)&cu.pointer_get_attribute},
      {"cuDeviceGet", (void**)&cu.device_get},
      {"cuDevicePrimaryCtxRetain", (void**)&cu.primary_ctx_retain},
      {"cuDevicePrimaryCtxRelease_v2", (void**)&cu.primary_ctx_release},
      {"cuCtxPushCurrent_v2", (void**)&cu.ctx_push},
      {"cuCtxPopCurrent_v2", (void**)&cu.ctx_pop},
      {"cuStreamCreate", (void**)&cu.stream_create},
      {"cuStreamDestroy_v2", (void**)&cu.stream_destroy},
      {"cuStreamSynchronize", (void**)&cu.stream_synchronize},
      {"cuMemcpyDtoHAsync_v2", (void**)&cu.memcpy_dtoh_async},
      {"cuMemcpyHtoDAsync_v2", (void**)&cu.memcpy_htod_async},
      {"cuMemHostAlloc", (void**)&cu.mem_host_alloc},
      {"cuMemFreeHost", (void**)&cu.mem_free_host},
  };
  /* Kept loaded for the life of the process, as the core keeps it. */
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) return; /* no driver: every CUDA registration is host memory */
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    *syms[i].fn = dlsym(lib, syms[i].name);
    if (*syms[i].fn == NULL) {
      gdr_warn("libcuda.so.1 lacks %s: treating CUDA registrations as host memory", syms[i].name);
      return;
    }
  }
  CUresult e = cu.init(0);
  if (e != CUDA_SUCCESS) return; /* a driver without a usable GPU: the same as none */
  cu_usable = true;
}

static const char* cu_error_name(CUresult e) {
  const char* s = NULL;
  if (cu.get_error_string == NULL || cu.get_error_string(e, &s) != CUDA_SUCCESS || s == NULL)
    return "unknown error";
  return s;
}

static ncclResult_t cu_check(CUresult e, const char* what) {
  if (e == CUDA_SUCCESS) return ncclSuccess;
  gdr_warn("%s failed: CUDA error %d (%s)", what, e, cu_error_name(e));
  return ncclUnhandledCudaError;
}

/* True when p is device memory as the driver sees it (never for plain host memory). */
static bool cu_is_device(const void* p) {
  pthread_once(&cu_once, cu_load);
  if (!cu_usable) return false;
  unsigned int type = 0;
  CUresult e =
      cu.pointer_get_attribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p);
  return e == CUDA_SUCCESS && type == CU_MEMORYTYPE_DEVICE;
}

/* Copies n bytes between mr's device range and its bounce buffer, and waits for the copy. */
static ncclResult_t gdr_copy(gdr_mr_t* mr, bool to_device, char* dev, char* host, size_t n) {
  if (n == 0) return ncclSuccess;
  ncclResult_t res = cu_check(cu.ctx_push(mr->ctx), "cuCtxPushCurrent");
  if (res != ncclSuccess) return res;
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)dev;
  CUresult e = to_device ? cu.memcpy_htod_async(d, host, n, mr->stream)
                         : cu.memcpy_dtoh_async(host, d, n, mr->stream);
  const char* what = to_device ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
  if (e == CUDA_SUCCESS) {
    e = cu.stream_synchronize(mr->stream);
    what = "cuStreamSynchronize";
  }
  CUcontext popped;
  cu.ctx_pop(&popped);
  return cu_check(e, what);
}

/* The context to copy [data, ...) in: the one it was allocated in, or, for allocations tied to
 * no context (the driver reports none for cuMem* virtual memory), the device's primary context. */
static ncclResult_t gdr_find_ctx(gdr_mr_t* mr, void* data) {
  CUdeviceptr p = (CUdeviceptr)(uintptr_t)data;
  CUcontext ctx = NULL;
  if (cu.pointer_get_attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS &&
      ctx != NULL) {
    mr->ctx = ctx;
    return ncclSuccess;
  }
  int ordinal = -1;
  ncclResult_t res =
      cu_check(cu.pointer_get_attribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p),
               "cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)");
  if (res == ncclSuccess) res = cu_check(cu.device_get(&mr->primary_dev, ordinal), "cuDeviceGet");
  if (res == ncclSuccess)
    res = cu_check(cu.primary_ctx_retain(&mr->ctx, mr->primary_dev), "cuDevicePrimaryCtxRetain");
  if (res == ncclSuccess) mr->primary = true;
  return res;
}

/* Releases what gdr_device_setup acquired; errors are only reported (a context torn down
 * before deregMr takes its resources with it). */
static void gdr_device_release(gdr_mr_t* mr) {
  bool pushed = mr->ctx != NULL && cu.ctx_push(mr->ctx) == CUDA_SUCCESS;
  if (mr->stream != NULL) cu_check(cu.stream_destroy(mr->stream), "cuStreamDestroy");
  if (mr->pinned)
    cu_check(cu.mem_free_host(mr->bounce), "cuMemFreeHost");
  else
    free(mr->bounce);
  if (pushed) {
    CUcontext popped;
    cu.ctx_pop(&popped);
  }
  if (mr->primary) cu_check(cu.primary_ctx_release(mr->primary_dev), "cuDevicePrimaryCtxRelease");
  mr->stream = NULL;
  mr->bounce = NULL;
  mr->ctx = NULL;
  mr->primary = false;
}

/* Device registration of [data, data + size): context, copy stream, bounce buffer. */
static ncclResult_t gdr_device_setup(gdr_mr_t* mr, void* data, size_t size) {
  mr->dev = data;
  mr->size = size;
  ncclResult_t res = gdr_find_ctx(mr, data);
  if (res != ncclSuccess) goto err_release;
  res = cu_check(cu.ctx_push(mr->ctx), "cuCtxPushCurrent");
  if (res != ncclSuccess) goto err_release;
  res = cu_check(cu.stream_create(&mr->stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  /* Pinned, so that the copies are plain DMA; pageable memory works too, only slower. */
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t bytes = size == 0 ? page : (size + page - 1) / page * page;
  void* bounce = NULL;
  int err = 0;
  if (res == ncclSuccess &&
      cu.mem_host_alloc(&bounce, bytes, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS) {
    mr->pinned = true;
  } else if (res == ncclSuccess && (err = posix_memalign(&bounce, page, bytes)) != 0) {
    gdr_warn("regMr: cannot allocate a %zu-byte bounce buffer: %s", bytes, strerror(err));
    res = ncclSystemError;
    bounce = NULL;
  }
  mr->bounce = bounce;
  CUcontext popped;
  cu.ctx_pop(&popped);
  if (res != ncclSuccess) goto err_release;
  return ncclSuccess;
err_release:
  gdr_device_release(mr);
  return res;
}

/* ---- the inner plugin ------------------------------------------------------------------------ */

GDR_EXPORT extern const ncclNet_v12_t ncclNetPlugin_v12;

static pthread_mutex_t gdr_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(const ncclNet_v12_t*) gdr_inner_table; /* set once, under gdr_lock */

static const ncclNet_v12_t* gdr_inner(void) {
  return atomic_load_explicit(&gdr_inner_table, memory_order_acquire);
}

/* Loads the inner plugin once; a failure is not remembered (the next call tries again). */
static ncclResult_t gdr_load(void) {
  if (gdr_inner() != NULL) return ncclSuccess;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&gdr_lock);
  if (gdr_inner() != NULL) goto out_unlock;
  const char* env = getenv(GDR_INNER_ENV);
  const char* path = env != NULL && *env != '\0' ? env : GDR_INNER_DEFAULT;
  const char* from =
      env != NULL && *env != '\0' ? "from " GDR_INNER_ENV : GDR_INNER_ENV " unset: the default";
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr,
            "gdrshim: cannot load the inner net plugin %s (%s): %s; set " GDR_INNER_ENV
            " to the full path of a net plugin exporting ncclNetPlugin_v12\n",
            path, from, dlerror());
    res = ncclSystemError;
    goto out_unlock;
  }
  const ncclNet_v12_t* t = dlsym(lib, "ncclNetPlugin_v12");
  if (t == NULL || t == &ncclNetPlugin_v12) {
    fprintf(stderr, "gdrshim: the inner net plugin %s (%s) %s\n", path, from,
            t == NULL ? "exports no ncclNetPlugin_v12" : "is the shim itself");
    dlclose(lib);
    res = ncclSystemError;
    goto out_unlock;
  }
  /* Left loaded: the inner plugin's threads and objects live as long as the shim's. */
  atomic_store_explicit(&gdr_inner_table, t, memory_order_release);
out_unlock:
  pthread_mutex_unlock(&gdr_lock);
  return res;
}

/* ---- the table's entries --------------------------------------------------------------------- */

static ncclResult_t gdr_init(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                             ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
  if (log_fn != NULL) atomic_store_explicit(&gdr_logger, log_fn, memory_order_release);
  ncclResult_t res = gdr_load();
  if (res != ncclSuccess) return res;
  return gdr_inner()->init(ctx, comm_id, config, log_fn, prof_fn);
}

static ncclResult_t gdr_devices(int* ndev) {
  ncclResult_t res = gdr_load();
  return res != ncclSuccess ? res : gdr_inner()->devices(ndev);
}

static ncclResult_t gdr_get_properties(int dev, ncclNetProperties_v12_t* props) {
  ncclResult_t res = gdr_load();
  if (res == ncclSuccess) res = gdr_inner()->getProperties(dev, props);
  if (res != ncclSuccess) return res;
  if (props->netDeviceType != NCCL_NET_DEVICE_HOST) {
    gdr_warn(
        "device %d (%s) of the inner plugin offloads to the GPU (type %d); the shim moves "
        "data on the host and wraps host-driven devices only",
        dev, props->name ? props->name : "?", (int)props->netDeviceType);
    return ncclInvalidUsage;
  }
  props->ptrSupport |= NCCL_PTR_CUDA;
  return ncclSuccess;
}

static ncclResult_t gdr_listen(void* ctx, int dev, void* handle, void** listen_comm) {
  return gdr_inner()->listen(ctx, dev, handle, listen_comm);
}

static ncclResult_t gdr_connect(void* ctx, int dev, void* handle, void** send_comm,
                                ncclNetDeviceHandle_v12_t** send_dev_comm) {
  return gdr_inner()->connect(ctx, dev, handle, send_comm, send_dev_comm);
}

static ncclResult_t gdr_accept(void* listen_comm, void** recv_comm,
                               ncclNetDeviceHandle_v12_t** recv_dev_comm) {
  return gdr_inner()->accept(listen_comm, recv_comm, recv_dev_comm);
}

static ncclResult_t gdr_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  gdr_mr_t* mr = calloc(1, sizeof(*mr));
  if (mr == NULL) {
    gdr_warn("regMr: out of memory");
    return ncclSystemError;
  }
  bool device = type == NCCL_PTR_CUDA && cu_is_device(data);
  void* reg = data;
  ncclResult_t res = ncclSuccess;
  if (device) {
    res = gdr_device_setup(mr, data, size);
    if (res != ncclSuccess) goto err_free;
    reg = mr->bounce;
  }
  /* CUDA memory that is not device memory is host memory to the inner plugin, like any other. */
  int inner_type = type == NCCL_PTR_CUDA ? NCCL_PTR_HOST : type;
  res = gdr_inner()->regMr(comm, reg, size, inner_type, &mr->inner);
  if (res != ncclSuccess) goto err_release;
  if (type == NCCL_PTR_CUDA) gdr_count(GDRSHIM_CUDA_REGS, 1);
  if (device) gdr_count(GDRSHIM_CUDA_REGS_DEVICE, 1);
  *mhandle = mr;
  return ncclSuccess;
err_release:
  if (device) gdr_device_release(mr);
err_free:
  free(mr);
  return res;
}

static ncclResult_t gdr_reg_mr_dmabuf(void* comm, void* data, size_t size, int type,
                                      uint64_t offset, int fd, void** mhandle) {
  const ncclNet_v12_t* in = gdr_inner();
  if (in->regMrDmaBuf == NULL) {
    gdr_warn("regMrDmaBuf: the inner plugin %s has none", in->name);
    return ncclInvalidUsage;
  }
  gdr_mr_t* mr = calloc(1, sizeof(*mr));
  if (mr == NULL) {
    gdr_warn("regMrDmaBuf: out of memory");
    return ncclSystemError;
  }
  ncclResult_t res = in->regMrDmaBuf(comm, data, size, type, offset, fd, &mr->inner);
  if (res != ncclSuccess) {
    free(mr);
    return res;
  }
  *mhandle = mr;
  return ncclSuccess;
}

static ncclResult_t gdr_dereg_mr(void* comm, void* mhandle) {
  gdr_mr_t* mr = mhandle;
  ncclResult_t res = gdr_inner()->deregMr(comm, mr ? mr->inner : NULL);
  if (mr != NULL && mr->dev != NULL) gdr_device_release(mr);
  free(mr);
  return res;
}

/* Where [data, data + size) of mr's device range sits in its bounce buffer, or NULL if the range
 * is not inside the registration. */
static char* gdr_bounce_of(const gdr_mr_t* mr, void* data, size_t size) {
  uintptr_t p = (uintptr_t)data, base = (uintptr_t)mr->dev;
  if (p < base || p - base > mr->size || size > mr->size - (p - base)) {
    gdr_warn("buffer %p + %zu is outside its device registration %p + %zu", data, size,
             (void*)mr->dev, mr->size);
    return NULL;
  }
  return mr->bounce + (p - base);
}

/* Requests handed out and not completed, so that closing a comm frees those its caller gave up
 * on (after a failure the caller stops testing them). */
static gdr_req_t* gdr_live;
static pthread_mutex_t gdr_live_lock = PTHREAD_MUTEX_INITIALIZER;

static void gdr_req_free(gdr_req_t* r) {
  pthread_mutex_lock(&gdr_live_lock);
  if (r->prev != NULL)
    r->prev->next = r->next;
  else if (gdr_live == r)
    gdr_live = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  pthread_mutex_unlock(&gdr_live_lock);
  free(r);
}

static void gdr_req_free_comm(void* comm) {
  pthread_mutex_lock(&gdr_live_lock);
  for (gdr_req_t *r = gdr_live, *next; r != NULL; r = next) {
    next = r->next;
    if (r->comm != comm) continue;
    if (r->prev != NULL)
      r->prev->next = r->next;
    else
      gdr_live = r->next;
    if (r->next != NULL) r->next->prev = r->prev;
    free(r);
  }
  pthread_mutex_unlock(&gdr_live_lock);
}

static gdr_req_t* gdr_req_new(void* comm, int kind, int n) {
  size_t bytes =
      sizeof(gdr_req_t) + (size_t)n * (sizeof(gdr_dst_t) + 2 * sizeof(void*) + sizeof(int));
  gdr_req_t* r = calloc(1, bytes);
  if (r == NULL) {
    gdr_warn("out of memory for a request");
    return NULL;
  }
  r->comm = comm;
  pthread_mutex_lock(&gdr_live_lock);
  r->next = gdr_live;
  if (gdr_live != NULL) gdr_live->prev = r;
  gdr_live = r;
  pthread_mutex_unlock(&gdr_live_lock);
  r->kind = kind;
  r->n = n;
  r->data = (void**)&r->dst[n];
  r->mhs = r->data + n;
  r->sizes = (int*)(r->mhs + n);
  return r;
}

static ncclResult_t gdr_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                              void* phandle, void** request) {
  gdr_mr_t* mr = mhandle;
  bool device = mr != NULL && mr->dev != NULL;
  void* src = data;
  if (device) {
    /* Copied again on a retry: the inner plugin reads the bounce only once it takes the send. */
    src = gdr_bounce_of(mr, data, size);
    if (src == NULL) return ncclInvalidArgument;
    ncclResult_t res = gdr_copy(mr, false, data, src, size);
    if (res != ncclSuccess) return res;
  }
  gdr_req_t* r = gdr_req_new(send_comm, GDR_REQ_SEND, 0);
  if (r == NULL) return ncclSystemError;
  ncclResult_t res =
      gdr_inner()->isend(send_comm, src, size, tag, mr ? mr->inner : NULL, phandle, &r->inner);
  if (res != ncclSuccess || r->inner == NULL) {
    gdr_req_free(r);
    *request = NULL;
    return res;
  }
  if (device) {
    gdr_count(GDRSHIM_DEVICE_SENDS, 1);
    gdr_count(GDRSHIM_DEVICE_SEND_BYTES, size);
  }
  *request = r;
  return ncclSuccess;
}

static ncclResult_t gdr_irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                              void** mhandles, void** phandles, void** request) {
  if (n < 0) {
    gdr_warn("irecv: %d buffers", n);
    return ncclInvalidArgument;
  }
  gdr_req_t* r = gdr_req_new(recv_comm, GDR_REQ_RECV, n);
  if (r == NULL) return ncclSystemError;
  for (int i = 0; i < n; i++) {
    gdr_mr_t* mr = mhandles ? mhandles[i] : NULL;
    r->data[i] = data[i];
    r->mhs[i] = mr ? mr->inner : NULL;
    if (mr == NULL || mr->dev == NULL) continue;
    char* bounce = gdr_bounce_of(mr, data[i], sizes[i]);
    if (bounce == NULL) {
      gdr_req_free(r);
      return ncclInvalidArgument;
    }
    r->dst[i] = (gdr_dst_t){.mr = mr, .dev = data[i], .bounce = bounce, .room = sizes[i]};
    r->data[i] = bounce;
    r->any_dev = true;
  }
  /* Early completion (LL / LL128 flags in the data) would let test() copy a bounce buffer that
   * is still filling: a receive into device memory completes only once every byte is in. */
  if (r->any_dev)
    *request = (void*)((uintptr_t)*request & ~(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION);
  ncclResult_t res = gdr_inner()->irecv(recv_comm, n, r->data, sizes, tags,
                                        mhandles ? r->mhs : NULL, phandles, request);
  if (res != ncclSuccess || *request == NULL) {
    gdr_req_free(r);
    return res;
  }
  r->inner = *request;
  *request = r;
  return ncclSuccess;
}

static ncclResult_t gdr_iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                               void** request) {
  (void)recv_comm;
  (void)data;
  (void)sizes;
  (void)mhandles;
  /* test() has already copied every completed receive into device memory. */
  gdr_req_t* r = gdr_req_new(recv_comm, GDR_REQ_FLUSH, 0);
  if (r == NULL) return ncclSystemError;
  gdr_count(GDRSHIM_FLUSHES, 1);
  atomic_fetch_add_explicit(&gdr_flush_buffers, n > 0 ? (uint64_t)n : 0, memory_order_relaxed);
  *request = r;
  return ncclSuccess;
}

/* A completed receive: each device buffer's received bytes, bounce -> GPU. */
static ncclResult_t gdr_recv_done(gdr_req_t* r, const int* got) {
  for (int i = 0; i < r->n; i++) {
    gdr_dst_t* d = &r->dst[i];
    if (d->mr == NULL) continue;
    if (got[i] < 0 || (size_t)got[i] > d->room) {
      gdr_warn("test: the inner plugin reports %d bytes received into a %zu-byte buffer", got[i],
               d->room);
      return ncclInternalError;
    }
    ncclResult_t res = gdr_copy(d->mr, true, d->dev, d->bounce, (size_t)got[i]);
    if (res != ncclSuccess) return res;
    gdr_count(GDRSHIM_DEVICE_RECVS, 1);
    gdr_count(GDRSHIM_DEVICE_RECV_BYTES, (uint64_t)got[i]);
  }
  return ncclSuccess;
}

static ncclResult_t gdr_test(void* request, int* done, int* sizes) {
  gdr_req_t* r = request;
  if (r->kind == GDR_REQ_FLUSH) {
    *done = 1;
    gdr_req_free(r);
    return ncclSuccess;
  }
  bool copy = r->kind == GDR_REQ_RECV && r->any_dev;
  int* got = copy && sizes == NULL ? r->sizes : sizes;
  /* After an error the inner request's fate is the inner plugin's business; r stays, in case the
   * caller polls it again. */
  ncclResult_t res = gdr_inner()->test(r->inner, done, got);
  if (res != ncclSuccess || !*done) return res;
  if (copy) res = gdr_recv_done(r, got);
  gdr_req_free(r);
  return res;
}

static ncclResult_t gdr_close_send(void* send_comm) {
  ncclResult_t res = gdr_inner()->closeSend(send_comm);
  gdr_req_free_comm(send_comm);
  return res;
}

static ncclResult_t gdr_close_recv(void* recv_comm) {
  ncclResult_t res = gdr_inner()->closeRecv(recv_comm);
  gdr_req_free_comm(recv_comm);
  const char* report = getenv(GDR_REPORT_ENV);
  if (report != NULL && strcmp(report, "1") == 0) {
    uint64_t s[GDRSHIM_NSTATS];
    for (int i = 0; i < GDRSHIM_NSTATS; i++)
      s[i] = atomic_load_explicit(&gdr_stats[i], memory_order_relaxed);
    fprintf(stderr,
            "gdrshim: pid %ld: cuda regs %llu (device %llu), device sends %llu (%llu bytes), "
            "device recvs %llu (%llu bytes), flushes %llu\n",
            (long)getpid(), (unsigned long long)s[GDRSHIM_CUDA_REGS],
            (unsigned long long)s[GDRSHIM_CUDA_REGS_DEVICE],
            (unsigned long long)s[GDRSHIM_DEVICE_SENDS],
            (unsigned long long)s[GDRSHIM_DEVICE_SEND_BYTES],
            (unsigned long long)s[GDRSHIM_DEVICE_RECVS],
            (unsigned long long)s[GDRSHIM_DEVICE_RECV_BYTES],
            (unsigned long long)s[GDRSHIM_FLUSHES]);
  }
  return res;
}

static ncclResult_t gdr_close_listen(void* listen_comm) {
  return gdr_inner()->closeListen(listen_comm);
}

static ncclResult_t gdr_finalize(void* ctx) { return gdr_inner()->finalize(ctx); }

static ncclResult_t gdr_set_net_attr(void* ctx, ncclNetAttr_v12_t* attr) {
  const ncclNet_v12_t* in = gdr_inner();
  return in->setNetAttr != NULL ? in->setNetAttr(ctx, attr) : ncclSuccess; /* only a hint */
}

GDR_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = "GdrShim",
    .init = gdr_init,
    .devices = gdr_devices,
    .getProperties = gdr_get_properties,
    .listen = gdr_listen,
    .connect = gdr_connect,
    .accept = gdr_accept,
    .regMr = gdr_reg_mr,
    .regMrDmaBuf = gdr_reg_mr_dmabuf,
    .deregMr = gdr_dereg_mr,
    .isend = gdr_isend,
    .irecv = gdr_irecv,
    .iflush = gdr_iflush,
    .test = gdr_test,
    .closeSend = gdr_close_send,
    .closeRecv = gdr_close_recv,
    .closeListen = gdr_close_listen,
    .getDeviceMr = NULL,
    .irecvConsumed = NULL,
    .makeVDevice = NULL,
    .finalize = gdr_finalize,
    .setNetAttr = gdr_set_net_attr,
};

/* ---- counters, for tests that dlopen the shim (net_gdr_shim.h) ------------------------------- */

GDR_EXPORT void choir_gdrshim_stats(uint64_t out[GDRSHIM_NSTATS]) {
  for (int i = 0; i < GDRSHIM_NSTATS; i++)
    out[i] = atomic_load_explicit(&gdr_stats[i], memory_order_relaxed);
}

GDR_EXPORT uint64_t choir_gdrshim_flush_buffers(void) {
  return atomic_load_explicit(&gdr_flush_buffers, memory_order_relaxed);
}
