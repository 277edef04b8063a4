/*
 * The GDR shim test plugin (net_gdr_shim.c) through its v12 table, in one process over a local
 * interface: dlopen the shim (argv[1]; its inner plugin comes from CHOIR_GDRSHIM_INNER), then
 *   - a bad CHOIR_GDRSHIM_INNER (in a child process): init fails with ncclSystemError and a
 *     message naming the variable and the path;
 *   - the table and the properties: NCCL_PTR_CUDA added, NCCL_PTR_DMABUF not;
 *   - host memory registered as NCCL_PTR_HOST, as NCCL_PTR_CUDA (what the CPU unit tests' fake CUDA
 *     hands out) and not at all: data arrives, a CUDA registration of host memory counts as CUDA
 *     but not as device memory, iflush completes at once and counts, and closeRecv prints the
 *     counters with CHOIR_GDRSHIM_REPORT=1;
 *   - with a GPU (libcuda.so.1 and a device): device buffers registered as NCCL_PTR_CUDA, sends
 * from and receives into device memory (with and without test() sizes, 0 bytes, mixed with host
 *     buffers) checked byte for byte, and the counters. All of it runs with no current context
 *     on the calling thread, and with the legacy NULL stream blocked by a host function until
 *     the transfers are done: a shim copying on the NULL stream, or with a synchronous cuMemcpy,
 *     would hang there, as it would behind a collective kernel waiting for the data.
 *   net-gdrshim [--gpu] SHIM_SO      --gpu: only the device part; exit 77 without a GPU.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture_log.h"
#include "check.h"
#include "nccl_net.h"
#include "net_pair.h"
#include "net_gdr_shim.h"

#define KiB ((size_t)1024)
#define MiB (1024 * KiB)
#define HANG_S 20.0          /* a loop spinning longer than this is a hang */
#define BLOCKER_LIMIT_S 30.0 /* the NULL-stream blocker gives up after this */

enum {
  S_REGS = GDRSHIM_CUDA_REGS,
  S_REGS_DEV = GDRSHIM_CUDA_REGS_DEVICE,
  S_SENDS = GDRSHIM_DEVICE_SENDS,
  S_SEND_BYTES = GDRSHIM_DEVICE_SEND_BYTES,
  S_RECVS = GDRSHIM_DEVICE_RECVS,
  S_RECV_BYTES = GDRSHIM_DEVICE_RECV_BYTES,
  S_FLUSHES = GDRSHIM_FLUSHES,
  S_N = GDRSHIM_NSTATS
};

static const ncclNet_v12_t* net;
static void* ctx;
static void (*get_stats)(uint64_t out[S_N]);
static uint64_t (*get_flush_buffers)(void);

static double now_s(void) { return net_pair_now_s(); }

static void fill(unsigned char* p, size_t n, unsigned seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p[i] = (unsigned char)(x >> 24);
  }
}

static void stats(uint64_t out[S_N]) { get_stats(out); }

/* ---- connections and transfers --------------------------------------------------------------- */

static bool connect_pair(void** s_p, void** r_p) {
  return net_pair_connect(net, ctx, HANG_S, s_p, r_p);
}

/* One transfer: n bytes from src into a receive of `room` bytes at dst; with sizes_null the
 * receive is polled without a sizes array. Returns false when it did not complete. */
static bool transfer(void* s, void* r, void* src, void* smh, size_t n, void* dst, void* rmh,
                     size_t room, bool sizes_null) {
  void *sreq = NULL, *rreq = NULL;
  int tag = 0;
  double t0 = now_s();
  while (rreq == NULL && now_s() - t0 < HANG_S)
    if (net->irecv(r, 1, &dst, &room, &tag, &rmh, NULL, &rreq) != ncclSuccess) break;
  while (sreq == NULL && now_s() - t0 < HANG_S)
    if (net->isend(s, src, n, 0, smh, NULL, &sreq) != ncclSuccess) break;
  CHECK_MSG(sreq != NULL && rreq != NULL, "posting %zu bytes", n);
  if (sreq == NULL || rreq == NULL) return false;
  int sdone = 0, rdone = 0, ssize = -1, rsize = -1;
  ncclResult_t sres = ncclSuccess, rres = ncclSuccess;
  while ((!sdone || !rdone) && sres == ncclSuccess && rres == ncclSuccess &&
         now_s() - t0 < HANG_S) {
    if (!sdone) sres = net->test(sreq, &sdone, &ssize);
    if (!rdone) rres = net->test(rreq, &rdone, sizes_null ? NULL : &rsize);
  }
  CHECK_EQ_INT(sres, ncclSuccess);
  CHECK_EQ_INT(rres, ncclSuccess);
  CHECK_MSG(sdone && rdone, "%zu bytes did not arrive in %.0f s", n, HANG_S);
  CHECK_EQ_INT(ssize, (long long)n);
  if (!sizes_null) CHECK_EQ_INT(rsize, (long long)n);
  return sdone && rdone;
}

/* iflush returns a request that test() reports done on the first call. */
static void flush_once(void* r, void* buf, int size, void* mh) {
  void* req = NULL;
  CHECK_EQ_INT(net->iflush(r, 1, &buf, &size, &mh, &req), ncclSuccess);
  CHECK_MSG(req != NULL, "iflush returned no request");
  if (req == NULL) return;
  int done = 0;
  CHECK_EQ_INT(net->test(req, &done, NULL), ncclSuccess);
  CHECK_MSG(done == 1, "a flush request was not done at once");
}

/* closeRecv with stderr captured: returns what it printed (malloc'd). */
static char* close_recv_captured(void* r) {
  fflush(stderr);
  FILE* tmp = tmpfile();
  int saved = dup(STDERR_FILENO);
  if (tmp == NULL || saved < 0) {
    CHECK_MSG(false, "cannot capture stderr");
    CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
    return NULL;
  }
  dup2(fileno(tmp), STDERR_FILENO);
  CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  off_t len = lseek(fileno(tmp), 0, SEEK_END); /* written through the descriptor, not tmp */
  char* text = calloc(1, (size_t)(len > 0 ? len : 0) + 1);
  if (text != NULL && len > 0 && pread(fileno(tmp), text, (size_t)len, 0) != len) text[0] = '\0';
  fclose(tmp);
  if (text != NULL) fputs(text, stderr);
  return text;
}

/* ---- the shim's load errors, in a child (the inner plugin loads once per process) ------------ */

static void test_bad_inner(const char* shim) {
  int fds[2];
  if (pipe(fds) != 0) {
    CHECK_MSG(false, "pipe: %m");
    return;
  }
  const char* bogus = "/nonexistent/libnccl-net-nothing.so";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    setenv("CHOIR_GDRSHIM_INNER", bogus, 1);
    void* lib = dlopen(shim, RTLD_NOW | RTLD_LOCAL);
    const ncclNet_v12_t* t = lib ? dlsym(lib, "ncclNetPlugin_v12") : NULL;
    ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
    void* c = NULL;
    _exit(t == NULL ? 100 : (int)t->init(&c, 1, &cfg, NULL, NULL));
  }
  close(fds[1]);
  char out[2048] = "";
  size_t len = 0;
  ssize_t k;
  while (len < sizeof(out) - 1 && (k = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
    len += (size_t)k;
  out[len] = '\0';
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == ncclSystemError,
            "init with a bad inner path: status 0x%x, expected exit %d", status, ncclSystemError);
  CHECK_CONTAINS(out, "CHOIR_GDRSHIM_INNER");
  CHECK_CONTAINS(out, bogus);
}

/* ---- host memory ----------------------------------------------------------------------------- */

static void test_properties(void) {
  ncclNetProperties_v12_t p;
  memset(&p, 0, sizeof(p));
  CHECK_EQ_INT(net->getProperties(0, &p), ncclSuccess);
  CHECK_MSG(p.ptrSupport & NCCL_PTR_HOST, "ptrSupport 0x%x lacks NCCL_PTR_HOST", p.ptrSupport);
  CHECK_MSG(p.ptrSupport & NCCL_PTR_CUDA, "ptrSupport 0x%x lacks NCCL_PTR_CUDA", p.ptrSupport);
  CHECK_MSG(!(p.ptrSupport & NCCL_PTR_DMABUF), "ptrSupport 0x%x has NCCL_PTR_DMABUF", p.ptrSupport);
  CHECK_EQ_INT(p.netDeviceType, NCCL_NET_DEVICE_HOST);
  CHECK_TRUE(net->getDeviceMr == NULL && net->irecvConsumed == NULL);
}

static void test_host(void) {
  void *s, *r;
  if (!connect_pair(&s, &r)) return;
  uint64_t before[S_N], after[S_N];
  stats(before);
  uint64_t fbufs = get_flush_buffers();
  size_t n = MiB + 5;
  unsigned char* src = malloc(n);
  unsigned char* dst = malloc(2 * MiB);
  fill(src, n, 1);
  /* As host memory, as CUDA memory that is host memory, and unregistered. */
  for (int type = 0; type < 3; type++) {
    void *smh = NULL, *rmh = NULL;
    int t = type == 0 ? NCCL_PTR_HOST : NCCL_PTR_CUDA;
    if (type < 2) {
      CHECK_EQ_INT(net->regMr(s, src, n, t, &smh), ncclSuccess);
      CHECK_EQ_INT(net->regMr(r, dst, 2 * MiB, t, &rmh), ncclSuccess);
    }
    memset(dst, 0xee, 2 * MiB);
    if (transfer(s, r, src, smh, n, dst, rmh, 2 * MiB, type == 1)) {
      CHECK_MSG(memcmp(src, dst, n) == 0, "host transfer %d: data changed", type);
      CHECK_MSG(dst[n] == 0xee, "host transfer %d: bytes past the message were written", type);
    }
    if (type == 1) flush_once(r, dst, (int)n, rmh);
    if (smh) CHECK_EQ_INT(net->deregMr(s, smh), ncclSuccess);
    if (rmh) CHECK_EQ_INT(net->deregMr(r, rmh), ncclSuccess);
  }
  stats(after);
  CHECK_EQ_INT(after[S_REGS] - before[S_REGS], 2);
  CHECK_EQ_INT(after[S_REGS_DEV] - before[S_REGS_DEV], 0);
  CHECK_EQ_INT(after[S_SENDS] - before[S_SENDS], 0);
  CHECK_EQ_INT(after[S_RECVS] - before[S_RECVS], 0);
  CHECK_EQ_INT(after[S_FLUSHES] - before[S_FLUSHES], 1);
  CHECK_EQ_INT(get_flush_buffers() - fbufs, 1);
  CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
  setenv("CHOIR_GDRSHIM_REPORT", "1", 1);
  char* line = close_recv_captured(r);
  unsetenv("CHOIR_GDRSHIM_REPORT");
  char want[256];
  snprintf(want, sizeof(want),
           "gdrshim: pid %ld: cuda regs %llu (device %llu), device sends %llu (%llu bytes), "
           "device recvs %llu (%llu bytes), flushes %llu\n",
           (long)getpid(), (unsigned long long)after[S_REGS], (unsigned long long)after[S_REGS_DEV],
           (unsigned long long)after[S_SENDS], (unsigned long long)after[S_SEND_BYTES],
           (unsigned long long)after[S_RECVS], (unsigned long long)after[S_RECV_BYTES],
           (unsigned long long)after[S_FLUSHES]);
  CHECK_CONTAINS(line, want);
  free(line);
  free(src);
  free(dst);
}

/* ---- device memory, through the CUDA driver -------------------------------------------------- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st* CUcontext;
typedef struct CUstream_st* CUstream;

static struct {
  CUresult (*init)(unsigned int);
  CUresult (*device_get_count)(int*);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*primary_retain)(CUcontext*, CUdevice);
  CUresult (*primary_release)(CUdevice);
  CUresult (*ctx_push)(CUcontext);
  CUresult (*ctx_pop)(CUcontext*);
  CUresult (*ctx_get_current)(CUcontext*);
  CUresult (*ctx_synchronize)(void);
  CUresult (*mem_alloc)(CUdeviceptr*, size_t);
  CUresult (*mem_free)(CUdeviceptr);
  CUresult (*memcpy_htod)(CUdeviceptr, const void*, size_t);
  CUresult (*memcpy_dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*memset_d8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*launch_host_func)(CUstream, void (*)(void*), void*);
} cu;

/* Loads the driver and checks for a device; false (with a note) when there is none. */
static bool cu_open(CUdevice* dev) {
  static const struct {
    const char* name;
    void** fn;
  } syms[] = {
      {"cuInit", (void**)&cu.init},
      {"cuDeviceGetCount", (void**)&cu.device_get_count},
      {"cuDeviceGet", (void**)&cu.device_get},
      {"cuDevicePrimaryCtxRetain", (void**)&cu.primary_retain},
      {"cuDevicePrimaryCtxRelease_v2", (void**)&cu.primary_release},
      {"cuCtxPushCurrent_v2", (void**)&cu.ctx_push},
      {"cuCtxPopCurrent_v2", (void**)&cu.ctx_pop},
      {"cuCtxGetCurrent", (void**)&cu.ctx_get_current},
      {"cuCtxSynchronize", (void**)&cu.ctx_synchronize},
      {"cuMemAlloc_v2", (void**)&cu.mem_alloc},
      {"cuMemFree_v2", (void**)&cu.mem_free},
      {"cuMemcpyHtoD_v2", (void**)&cu.memcpy_htod},
      {"cuMemcpyDtoH_v2", (void**)&cu.memcpy_dtoh},
      {"cuMemsetD8_v2", (void**)&cu.memset_d8},
      {"cuLaunchHostFunc", (void**)&cu.launch_host_func},
  };
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    printf("# no libcuda.so.1: the device path is not run\n");
    return false;
  }
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
    *syms[i].fn = dlsym(lib, syms[i].name);
    CHECK_MSG(*syms[i].fn != NULL, "libcuda.so.1 lacks %s", syms[i].name);
    if (*syms[i].fn == NULL) return false;
  }
  int count = 0;
  if (cu.init(0) != 0 || cu.device_get_count(&count) != 0 || count < 1) {
    printf("# no usable CUDA device: the device path is not run\n");
    return false;
  }
  return cu.device_get(dev, 0) == 0;
}

/* The NULL-stream blocker: a host function that holds the legacy stream until released. */
static atomic_int blocker_running, blocker_release, blocker_gave_up;

static void blocker(void* arg) {
  (void)arg;
  atomic_store(&blocker_running, 1);
  double t0 = now_s();
  while (!atomic_load(&blocker_release)) {
    if (now_s() - t0 > BLOCKER_LIMIT_S) {
      atomic_store(&blocker_gave_up, 1);
      break;
    }
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
}

static void no_current_context(const char* when) {
  CUcontext cur = (CUcontext)1;
  CHECK_EQ_INT(cu.ctx_get_current(&cur), 0);
  CHECK_MSG(cur == NULL, "a context is current %s", when);
}

/* Returns false when there is no GPU. */
static bool test_device(void) {
  CUdevice dev;
  if (!cu_open(&dev)) return false;
  CUcontext pctx = NULL, popped;
  CHECK_EQ_INT(cu.primary_retain(&pctx, dev), 0);
  CHECK_EQ_INT(cu.ctx_push(pctx), 0);
  const size_t len = 4 * MiB;
  CUdeviceptr dsend = 0, drecv = 0;
  CHECK_EQ_INT(cu.mem_alloc(&dsend, len), 0);
  CHECK_EQ_INT(cu.mem_alloc(&drecv, len), 0);
  unsigned char* src = malloc(len);
  unsigned char* hsrc = malloc(len); /* a host-memory sender */
  unsigned char* hdst = malloc(len); /* a host-memory receiver */
  unsigned char* got = malloc(len);
  fill(src, len, 7);
  fill(hsrc, len, 8);
  memset(hdst, 0xee, len);
  CHECK_EQ_INT(cu.memcpy_htod(dsend, src, len), 0);
  CHECK_EQ_INT(cu.memset_d8(drecv, 0xee, len), 0);
  CHECK_EQ_INT(cu.ctx_synchronize(), 0);
  /* Everything below runs behind a blocked NULL stream, with no current context. */
  CHECK_EQ_INT(cu.launch_host_func(NULL, blocker, NULL), 0);
  CHECK_EQ_INT(cu.ctx_pop(&popped), 0);
  no_current_context("before the shim's calls");
  double t0 = now_s();
  while (!atomic_load(&blocker_running) && now_s() - t0 < HANG_S) {
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
  }
  CHECK_MSG(atomic_load(&blocker_running), "the NULL-stream blocker never started");

  void *s, *r;
  uint64_t before[S_N], after[S_N];
  stats(before);
  if (connect_pair(&s, &r)) {
    void *smh = NULL, *rmh = NULL, *hsmh = NULL, *hrmh = NULL;
    unsigned char* ds = (unsigned char*)(uintptr_t)dsend;
    unsigned char* dr = (unsigned char*)(uintptr_t)drecv;
    CHECK_EQ_INT(net->regMr(s, ds, len, NCCL_PTR_CUDA, &smh), ncclSuccess);
    CHECK_EQ_INT(net->regMr(r, dr, len, NCCL_PTR_CUDA, &rmh), ncclSuccess);
    CHECK_EQ_INT(net->regMr(s, hsrc, len, NCCL_PTR_HOST, &hsmh), ncclSuccess);
    CHECK_EQ_INT(net->regMr(r, hdst, len, NCCL_PTR_HOST, &hrmh), ncclSuccess);
    /* device -> device at unaligned offsets, 0 bytes, device -> device without sizes,
     * host -> device, device -> host. */
    transfer(s, r, ds + 4 * KiB, smh, MiB + 3, dr + 8 * KiB, rmh, 2 * MiB, false);
    transfer(s, r, ds, smh, 0, dr + 3 * MiB, rmh, 4 * KiB, false);
    transfer(s, r, ds + 2 * MiB + 1, smh, 64 * KiB, dr + 3 * MiB + 8 * KiB, rmh, 64 * KiB, true);
    transfer(s, r, hsrc + 100, hsmh, 5000, dr + 3 * MiB + 80 * KiB, rmh, 8 * KiB, false);
    transfer(s, r, ds + 3 * MiB, smh, 300 * KiB, hdst + 7, hrmh, 512 * KiB, false);
    flush_once(r, dr + 8 * KiB, (int)(MiB + 3), rmh);
    no_current_context("after the shim's calls");
    stats(after);
    CHECK_EQ_INT(after[S_REGS] - before[S_REGS], 2);
    CHECK_EQ_INT(after[S_REGS_DEV] - before[S_REGS_DEV], 2);
    CHECK_EQ_INT(after[S_SENDS] - before[S_SENDS], 4);
    CHECK_EQ_INT(after[S_SEND_BYTES] - before[S_SEND_BYTES], MiB + 3 + 64 * KiB + 300 * KiB);
    CHECK_EQ_INT(after[S_RECVS] - before[S_RECVS], 4);
    CHECK_EQ_INT(after[S_RECV_BYTES] - before[S_RECV_BYTES], MiB + 3 + 64 * KiB + 5000);
    CHECK_EQ_INT(after[S_FLUSHES] - before[S_FLUSHES], 1);
    CHECK_MSG(!atomic_load(&blocker_gave_up),
              "the transfers waited for the NULL stream (blocked for %.0f s)", BLOCKER_LIMIT_S);
    /* Teardown may wait for the device (freeing pinned memory can): no longer blocked. */
    atomic_store(&blocker_release, 1);
    CHECK_EQ_INT(net->deregMr(s, smh), ncclSuccess);
    CHECK_EQ_INT(net->deregMr(r, rmh), ncclSuccess);
    CHECK_EQ_INT(net->deregMr(s, hsmh), ncclSuccess);
    CHECK_EQ_INT(net->deregMr(r, hrmh), ncclSuccess);
    CHECK_EQ_INT(net->closeSend(s), ncclSuccess);
    CHECK_EQ_INT(net->closeRecv(r), ncclSuccess);
  }
  atomic_store(&blocker_release, 1);

  CHECK_EQ_INT(cu.ctx_push(pctx), 0);
  CHECK_EQ_INT(cu.ctx_synchronize(), 0);
  CHECK_EQ_INT(cu.memcpy_dtoh(got, drecv, len), 0);
  struct {
    size_t at, n;
    const unsigned char* want;
  } regions[] = {
      {8 * KiB, MiB + 3, src + 4 * KiB},
      {3 * MiB + 8 * KiB, 64 * KiB, src + 2 * MiB + 1},
      {3 * MiB + 80 * KiB, 5000, hsrc + 100},
  };
  for (size_t i = 0; i < sizeof(regions) / sizeof(regions[0]); i++)
    CHECK_MSG(memcmp(got + regions[i].at, regions[i].want, regions[i].n) == 0,
              "device receive %zu: data changed", i);
  CHECK_MSG(got[8 * KiB + MiB + 3] == 0xee && got[8 * KiB - 1] == 0xee,
            "bytes around the first device receive were written");
  CHECK_MSG(got[3 * MiB] == 0xee, "the 0-byte receive wrote");
  CHECK_MSG(memcmp(hdst + 7, src + 3 * MiB, 300 * KiB) == 0, "device -> host: data changed");
  CHECK_MSG(hdst[7 + 300 * KiB] == 0xee, "device -> host: bytes past the message were written");
  CHECK_EQ_INT(cu.mem_free(dsend), 0);
  CHECK_EQ_INT(cu.mem_free(drecv), 0);
  CHECK_EQ_INT(cu.ctx_pop(&popped), 0);
  CHECK_EQ_INT(cu.primary_release(dev), 0);
  free(src);
  free(hsrc);
  free(hdst);
  free(got);
  return true;
}

int main(int argc, char** argv) {
  bool gpu_only = argc > 2 && strcmp(argv[1], "--gpu") == 0;
  const char* shim = argv[argc - 1];
  if (argc < 2 || (argc > 2 && !gpu_only)) {
    fprintf(stderr, "usage: %s [--gpu] libnccl-net-gdrshim.so\n", argv[0]);
    return 2;
  }
  if (!gpu_only) test_bad_inner(shim);
  void* lib = dlopen(shim, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", shim, dlerror());
    return 1;
  }
  net = dlsym(lib, "ncclNetPlugin_v12");
  *(void**)&get_stats = dlsym(lib, "choir_gdrshim_stats");
  *(void**)&get_flush_buffers = dlsym(lib, "choir_gdrshim_flush_buffers");
  CHECK_TRUE(net != NULL && get_stats != NULL && get_flush_buffers != NULL);
  if (net == NULL || get_stats == NULL || get_flush_buffers == NULL) return check_finish("gdrshim");
  CHECK_EQ_STR(net->name, "GdrShim");
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK_EQ_INT(net->init(&ctx, 0x6764, &cfg, test_log, NULL), ncclSuccess);
  bool ran_device = true;
  if (gpu_only) {
    ran_device = test_device();
  } else {
    test_properties();
    test_host();
    test_device();
  }
  CHECK_MSG(strstr(log_buf, "WARN") == NULL, "the shim or its inner plugin warned:\n%s", log_buf);
  log_clear();
  CHECK_EQ_INT(net->finalize(ctx), ncclSuccess);
  if (!ran_device) {
    printf("gdrshim: no GPU, skipped\n");
    return CHECK_SKIP;
  }
  return check_finish("gdrshim");
}
