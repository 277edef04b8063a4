/*
 * net-bench: latency and throughput of any net plugin (v12 table) between two processes on this
 * host, for comparing plugins side by side (README numbers; not a test).
 *
 *   net-bench [--max-bytes N] PLUGIN_SO
 *
 * The parent forks a receiver and a sender; each opens the plugin itself, the listen handle goes
 * through a socketpair. Per size (8 B, then x8 up to --max-bytes, default 1 GiB): ping-pong
 * latency (half the round trip, median of the iterations) over a second connection the other
 * way, then streaming throughput with 8 sends in flight. Buffers are registered once.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl_net.h"

#define WINDOW 8

static const ncclNet_v12_t* net;
static void* ctx;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char* what) {
  fprintf(stderr, "net-bench: %s failed\n", what);
  _exit(1);
}

static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  (void)flags;
  (void)file;
  (void)line;
  if (level != NCCL_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

static void open_net(const char* so) {
  void* lib = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) die(dlerror());
  net = dlsym(lib, "ncclNetPlugin_v12");
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  int ndev = 0;
  if (net == NULL || net->init(&ctx, 7, &cfg, logger, NULL) != ncclSuccess ||
      net->devices(&ndev) != ncclSuccess || ndev < 1)
    die("plugin init");
}

static void xfer(int fd, void* buf, size_t n, int out) {
  char* p = buf;
  while (n > 0) {
    ssize_t k = out ? write(fd, p, n) : read(fd, p, n);
    if (k <= 0) die("control stream");
    p += k;
    n -= (size_t)k;
  }
}

/* Listener for connection `dir` gives its handle to the peer; both poll until connected. */
static void* conn(int fd, int listener) {
  char h[NCCL_NET_HANDLE_MAXSIZE];
  void *lc = NULL, *c = NULL;
  memset(h, 0, sizeof(h));
  if (listener) {
    if (net->listen(ctx, 0, h, &lc) != ncclSuccess) die("listen");
    xfer(fd, h, sizeof(h), 1);
    while (c == NULL)
      if (net->accept(lc, &c, NULL) != ncclSuccess) die("accept");
    net->closeListen(lc);
  } else {
    xfer(fd, h, sizeof(h), 0);
    while (c == NULL)
      if (net->connect(ctx, 0, h, &c, NULL) != ncclSuccess) die("connect");
  }
  return c;
}

static void* post(void* comm, int send, void* buf, size_t n, void* mh) {
  void* req = NULL;
  int tag = 0;
  while (req == NULL) {
    ncclResult_t r = send ? net->isend(comm, buf, n, 0, mh, NULL, &req)
                          : net->irecv(comm, 1, &buf, &n, &tag, &mh, NULL, &req);
    if (r != ncclSuccess) die(send ? "isend" : "irecv");
  }
  return req;
}

static void wait_req(void* req) {
  int done = 0;
  while (!done)
    if (net->test(req, &done, NULL) != ncclSuccess) die("test");
}

static int cmp_d(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

/* side 0: receiver of the stream (and ponger); side 1: sender (and pinger, prints). */
static void run(int side, int fd, size_t max_bytes) {
  void* fwd = conn(fd, side == 0);  /* 1 -> 0 */
  void* back = conn(fd, side == 1); /* 0 -> 1 */
  char* buf = malloc(max_bytes < 8 ? 8 : max_bytes);
  memset(buf, side, max_bytes);
  void *mf = NULL, *mb = NULL;
  if (net->regMr(fwd, buf, max_bytes, NCCL_PTR_HOST, &mf) != ncclSuccess ||
      net->regMr(back, buf, max_bytes, NCCL_PTR_HOST, &mb) != ncclSuccess)
    die("regMr");
  if (side == 1) printf("%12s %12s %12s\n", "bytes", "latency_us", "MB/s");
  for (size_t n = 8; n <= max_bytes; n *= 8) {
    int iters = n <= 65536 ? 1000 : n <= (8u << 20) ? 50 : 5;
    double* lat = calloc((size_t)iters, sizeof(double));
    for (int i = 0; i < iters; i++) {
      double t0 = now_s();
      if (side == 1) {
        void* r = post(back, 0, buf, n, mb);
        wait_req(post(fwd, 1, buf, n, mf));
        wait_req(r);
      } else {
        wait_req(post(fwd, 0, buf, n, mf));
        wait_req(post(back, 1, buf, n, mb));
      }
      lat[i] = (now_s() - t0) / 2;
    }
    qsort(lat, (size_t)iters, sizeof(double), cmp_d);
    double med = lat[iters / 2];
    free(lat);
    int total = n <= 65536 ? 20000 : n <= (8u << 20) ? 200 : (int)(((size_t)4 << 30) / n);
    if (total < 3) total = 3;
    void* reqs[WINDOW] = {NULL};
    char sync = 0;
    xfer(fd, &sync, 1, side == 0); /* the receiver says it is ready; its posts follow at once */
    double t0 = now_s();
    for (int i = 0; i < total; i++) {
      if (reqs[i % WINDOW]) wait_req(reqs[i % WINDOW]);
      reqs[i % WINDOW] = post(fwd, side == 1, buf, n, mf);
    }
    for (int i = 0; i < WINDOW; i++)
      if (reqs[i]) wait_req(reqs[i]);
    double dt = now_s() - t0;
    if (side == 0) {
      xfer(fd, &dt, sizeof(dt), 1);
    } else {
      double rdt;
      xfer(fd, &rdt, sizeof(rdt), 0);
      if (rdt > dt) dt = rdt;
      printf("%12zu %12.2f %12.1f\n", n, med * 1e6, (double)n * total / dt / 1e6);
      fflush(stdout);
    }
  }
  net->deregMr(fwd, mf);
  net->deregMr(back, mb);
  net->closeSend(side == 1 ? fwd : back);
  net->closeRecv(side == 1 ? back : fwd);
  free(buf);
}

int main(int argc, char** argv) {
  size_t max_bytes = (size_t)1 << 30;
  const char* so = NULL;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc)
      max_bytes = strtoull(argv[++i], NULL, 0);
    else
      so = argv[i];
  }
  if (so == NULL) {
    fprintf(stderr, "usage: net-bench [--max-bytes N] PLUGIN_SO\n");
    return 2;
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) die("socketpair");
  fflush(stdout);
  pid_t pid[2];
  for (int side = 0; side < 2; side++) {
    pid[side] = fork();
    if (pid[side] == 0) {
      open_net(so);
      run(side, sv[side], max_bytes);
      fflush(stdout);
      _exit(0);
    }
  }
  int bad = 0;
  for (int side = 0; side < 2; side++) {
    int st = 0;
    waitpid(pid[side], &st, 0);
    bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
  }
  return bad;
}
