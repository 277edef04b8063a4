/*
 * net-ucx unit tests.
 *
 *   test-net-ucx PLUGIN_SO
 *
 * Part 1, no UCX: the tag scheme, the knob table and UCX_NET_DEVICES / UCX_TLS matching
 * (plugins/net-ucx/nux_util.c, compiled in).
 * Part 2, through the plugin's exported tables (dlopen), each scenario in a child process because
 * the device list is decided once per process:
 *   - every exported table (v12 .. v8) is named "UCX";
 *   - a UCX_NET_DEVICES or UCX_TLS that leaves nothing gives 0 devices, not a failed init;
 *   - two plugin contexts (two communicators) in one process over loopback: several connections
 *     sharing each context's worker carry interleaved messages with the same NCCL tag and never
 *     see each other's data (the tag scheme keeps them apart);
 *   - two threads drive comms of the same workers at once;
 *   - a 33rd outstanding request gives a NULL request, not an error;
 *   - a finalized context's worker is reused by the next context with fresh comm ids;
 *   - the v8 table (process-wide context, int sizes) carries data; v11 reports properties.
 * Exits normally so that LeakSanitizer checks the process in the sanitizer build.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nccl_net.h"
#include "nux_util.h"

static int failures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                        \
      fprintf(stderr, "\n");                               \
      failures++;                                          \
    }                                                      \
  } while (0)

/* ---- Part 1: pure helpers ------------------------------------------------------------------- */

static void test_tags(void) {
  CHECK(nux_tag_make(1, 0) == 0x100000000ULL, "comm 1 tag 0");
  CHECK(nux_tag_make(NUX_COMM_ID_MAX, -1) == UINT64_MAX >> 1, "comm max tag -1");
  CHECK(nux_tag_notice(NUX_COMM_ID_MAX) == (UINT64_MAX & ~0xffffffffULL), "notice of comm max");
  for (int t = -3; t <= 3; t++)
    for (uint32_t c = 1; c < 5; c++) {
      uint64_t x = nux_tag_make(c, t);
      CHECK(nux_tag_comm(x) == c && nux_tag_nccl(x) == t, "round trip comm %u tag %d", c, t);
      CHECK(!nux_tag_is_notice(x), "comm %u tag %d reads as a notice", c, t);
      /* Another comm's tag, whatever its NCCL tag, never equals this one; no data tag of any
       * comm equals a notice tag. */
      for (int u = -3; u <= 3; u++)
        CHECK(nux_tag_make(c + 1, u) != x, "comm %u tag %d collides with comm %u", c, t, c + 1);
      for (uint32_t d = 1; d < 5; d++)
        CHECK(nux_tag_notice(d) != x, "comm %u tag %d equals comm %u's notice", c, t, d);
    }
  for (uint32_t c = 1; c < 5; c++) {
    uint64_t n = nux_tag_notice(c);
    CHECK(nux_tag_is_notice(n) && nux_tag_comm(n) == c, "notice round trip comm %u", c);
    CHECK(nux_tag_make(c, INT32_MIN) != n && nux_tag_make(c, -1) != n, "notice of comm %u", c);
  }
  uint32_t ctr = 0;
  CHECK(nux_comm_id_next(&ctr) == 1 && nux_comm_id_next(&ctr) == 2, "ids start at 1");
  ctr = NUX_COMM_ID_MAX - 1;
  CHECK(nux_comm_id_next(&ctr) == NUX_COMM_ID_MAX, "last id");
  CHECK(nux_comm_id_next(&ctr) == 1, "wrap skips 0");
}

static const char* fake_env[][2] = {{"CHOIR_UCX_MAX_RECVS", "3"},
                                    {"CHOIR_UCX_CLOSE_TIMEOUT_MS", "70000"},
                                    {"CHOIR_UCX_PEER_ERRORS", "x"},
                                    {"CHOIR_UCX_PROGRESS", ""},
                                    {NULL, NULL}};

static const char* fake_get(const char* name) {
  for (int i = 0; fake_env[i][0] != NULL; i++)
    if (strcmp(fake_env[i][0], name) == 0) return fake_env[i][1];
  return NULL;
}

static void count_bad(const nux_knob_t* k, const char* value, void* arg) {
  (void)k;
  (void)value;
  (*(int*)arg)++;
}

static const nux_knob_t* knob(const char* name) {
  for (int i = 0; i < nux_knob_count; i++)
    if (strcmp(nux_knob_table[i].name, name) == 0) return &nux_knob_table[i];
  return NULL;
}

static void test_knobs(void) {
  for (int i = 0; i < nux_knob_count; i++) {
    const nux_knob_t* k = &nux_knob_table[i];
    CHECK(strncmp(k->name, "CHOIR_UCX_", 10) == 0, "knob %s: prefix", k->name);
    CHECK(k->lo <= k->def && k->def <= k->hi, "knob %s: default in range", k->name);
    CHECK(k->help != NULL && strlen(k->help) > 10, "knob %s: help", k->name);
    CHECK(k->offset + sizeof(int) <= sizeof(nux_knobs_t), "knob %s: offset", k->name);
  }
  const nux_knob_t* k = knob("CHOIR_UCX_MAX_RECVS");
  CHECK(k != NULL && k->hi == NUX_MAX_RECVS, "max recvs knob");
  /* Message size cap: small by default (one UCX progress call moves a whole message over tcp),
   * and at its highest still within what test() can report as an int. */
  const nux_knob_t* mb = knob("CHOIR_UCX_MAX_MIB");
  CHECK(mb != NULL && mb->def == 16 && mb->lo == 1, "max MiB knob");
  CHECK(mb != NULL && ((size_t)mb->hi << 20) <= (size_t)0x7ffff000, "max MiB knob: int sizes");
  int v = -1;
  CHECK(nux_knob_parse(k, "1", &v) && v == 1, "parse 1");
  CHECK(nux_knob_parse(k, "8", &v) && v == 8, "parse 8");
  CHECK(!nux_knob_parse(k, "9", &v), "9 out of range");
  CHECK(!nux_knob_parse(k, "0", &v), "0 out of range");
  CHECK(!nux_knob_parse(k, "2x", &v), "trailing junk");
  CHECK(!nux_knob_parse(k, "", &v), "empty");
  CHECK(!nux_knob_parse(k, NULL, &v), "NULL");
  CHECK(!nux_knob_parse(k, "99999999999999999999", &v), "overflow");
  nux_knobs_t kn;
  int bad = 0;
  nux_knobs_read(&kn, fake_get, count_bad, &bad);
  CHECK(kn.max_recvs == 3, "max_recvs read: %d", kn.max_recvs);
  CHECK(kn.close_timeout_ms == knob("CHOIR_UCX_CLOSE_TIMEOUT_MS")->def, "out of range -> default");
  CHECK(kn.peer_errors == 1, "malformed -> default");
  CHECK(kn.progress == knob("CHOIR_UCX_PROGRESS")->def, "empty -> default");
  CHECK(kn.reg == 1, "unset -> default");
  CHECK(bad == 2, "two bad values reported, got %d", bad);
}

static void test_lists(void) {
  CHECK(nux_netdev_selected(NULL, "eth0") && nux_netdev_selected("", "eth0"), "unset");
  CHECK(nux_netdev_selected("all", "mlx5_0:1"), "all");
  CHECK(nux_netdev_selected("lo,eth0", "eth0") && !nux_netdev_selected("lo,eth0", "eth1"), "list");
  CHECK(!nux_netdev_selected("eth", "eth0"), "names are exact");
  CHECK(nux_netdev_selected(" mlx5_0:1 , eth0", "mlx5_0:1"), "spaces");
  CHECK(nux_netdev_named("lo", "lo") && !nux_netdev_named("all", "lo") &&
            !nux_netdev_named(NULL, "lo"),
        "named");
  CHECK(nux_tls_selected(NULL, "tcp") && nux_tls_selected("all", "rc_mlx5"), "tls all");
  CHECK(nux_tls_selected("tcp", "tcp") && !nux_tls_selected("tcp", "rc_verbs"), "tls tcp");
  CHECK(nux_tls_selected("rc", "rc_verbs") && nux_tls_selected("rc", "rc_mlx5") &&
            !nux_tls_selected("rc", "ud_verbs"),
        "tls rc family");
  CHECK(nux_tls_selected("ib", "dc_mlx5") && !nux_tls_selected("ib", "tcp"), "tls ib");
  CHECK(nux_tls_selected("rc_x", "rc_mlx5") && !nux_tls_selected("rc_x", "rc_verbs"), "rc_x");
  CHECK(nux_tls_selected("sm,ud:aux,tcp", "ud_verbs"), "aux suffix");
  CHECK(!nux_tls_selected("^tcp", "tcp") && nux_tls_selected("^tcp", "rc_verbs"), "exclude");
  CHECK(!nux_tls_selected("rcx", "rc_verbs"), "prefix must end at '_'");
}

/* ---- Part 2: through the plugin ------------------------------------------------------------- */

static const char* plugin_path;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  (void)flags;
  if (level > NCCL_LOG_WARN && getenv("TEST_NET_UCX_VERBOSE") == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[%s %s:%d] ", level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
}

static void* open_plugin(void) {
  void* h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) fprintf(stderr, "dlopen %s: %s\n", plugin_path, dlerror());
  return h;
}

/* Runs fn in a child with the variables set; returns its failure count (or 1 if it died). */
static int in_child(const char* what, void (*fn)(void), const char* const* env) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; env != NULL && env[i] != NULL; i += 2) setenv(env[i], env[i + 1], 1);
    alarm(60);
    fn();
    exit(failures > 0 ? 1 : 0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  return ok ? 0 : 1;
}

static void child_tables(void) {
  void* h = open_plugin();
  if (h == NULL) {
    failures++;
    return;
  }
  static const char* const syms[] = {"ncclNetPlugin_v12", "ncclNetPlugin_v11", "ncclNetPlugin_v10",
                                     "ncclNetPlugin_v9", "ncclNetPlugin_v8"};
  for (int i = 0; i < 5; i++) {
    /* Every version's table starts with its name. */
    const char* const* t = dlsym(h, syms[i]);
    CHECK(t != NULL && strcmp(*t, "UCX") == 0, "%s named UCX", syms[i]);
  }
  CHECK(dlsym(h, "nux_init") == NULL, "internal symbols hidden");
  /* No dlclose: UCX keeps allocations reachable from its globals, which LeakSanitizer would
   * report once the library is gone. */
}

static void child_no_device(void) {
  void* h = open_plugin();
  if (h == NULL) {
    failures++;
    return;
  }
  const ncclNet_v12_t* n = dlsym(h, "ncclNetPlugin_v12");
  void* ctx = NULL;
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK(n->init(&ctx, 1, &cfg, logger, NULL) == ncclSuccess, "init succeeds without devices");
  int ndev = -1;
  CHECK(n->devices(&ndev) == ncclSuccess && ndev == 0, "0 devices, got %d", ndev);
  ncclNetProperties_v12_t p;
  CHECK(n->getProperties(0, &p) != ncclSuccess, "no device 0");
  CHECK(n->finalize(ctx) == ncclSuccess, "finalize");
  /* No dlclose: UCX keeps allocations reachable from its globals, which LeakSanitizer would
   * report once the library is gone. */
}

typedef struct {
  const ncclNet_v12_t* n;
  void* ctx_a; /* receiver side */
  void* ctx_b; /* sender side */
} pair_t;

/* One connection from ctx_b (send) to ctx_a (receive), polled from one thread. */
static int connect_pair(pair_t* p, void** s, void** r) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* l = NULL;
  *s = *r = NULL;
  if (p->n->listen(p->ctx_a, 0, handle, &l) != ncclSuccess) return -1;
  for (int i = 0; i < 200000 && (*s == NULL || *r == NULL); i++) {
    if (*s == NULL && p->n->connect(p->ctx_b, 0, handle, s, NULL) != ncclSuccess) return -1;
    if (*r == NULL && p->n->accept(l, r, NULL) != ncclSuccess) return -1;
  }
  p->n->closeListen(l);
  return *s != NULL && *r != NULL ? 0 : -1;
}

static void fill(char* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) b[i] = (char)(seed * 131 + i * 7);
}

static int check(const char* b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != (char)(seed * 131 + i * 7)) return (int)i;
  return -1;
}

/* Waits for both requests; returns the received size or -1. */
static int wait2(const ncclNet_v12_t* n, void* sreq, void* rreq) {
  int sd = sreq == NULL, rd = 0, size = -1, ssz = -1;
  for (long i = 0; i < 20000000 && !(sd && rd); i++) {
    if (!sd && n->test(sreq, &sd, &ssz) != ncclSuccess) return -1;
    if (!rd && n->test(rreq, &rd, &size) != ncclSuccess) return -1;
  }
  return sd && rd ? size : -1;
}

/* Messages over k connections sharing the two workers, posted round-robin with the same NCCL
 * tag, received in reverse connection order: each receive must see its own connection's data. */
static int exchange(pair_t* p, void** s, void** r, int k, int rounds, unsigned base) {
  int bad = 0;
  enum { MAXK = 4 };
  char* sb[MAXK];
  char* rb[MAXK];
  for (int round = 0; round < rounds && !bad; round++) {
    void *sreq[MAXK], *rreq[MAXK];
    for (int c = 0; c < k; c++) {
      size_t n = 1 + (size_t)((c * 7919 + round * 104729) % 100000);
      sb[c] = malloc(n);
      rb[c] = calloc(1, n + 16);
      fill(sb[c], n, base + (unsigned)(c * 1000 + round));
      sreq[c] = rreq[c] = NULL;
      while (sreq[c] == NULL)
        if (p->n->isend(s[c], sb[c], n, 0, NULL, NULL, &sreq[c]) != ncclSuccess) return 1;
    }
    for (int c = k - 1; c >= 0; c--) {
      size_t n = 1 + (size_t)((c * 7919 + round * 104729) % 100000) + 16;
      int tag = 0;
      void* data = rb[c];
      while (rreq[c] == NULL)
        if (p->n->irecv(r[c], 1, &data, &n, &tag, NULL, NULL, &rreq[c]) != ncclSuccess) return 1;
    }
    for (int c = 0; c < k; c++) {
      size_t n = 1 + (size_t)((c * 7919 + round * 104729) % 100000);
      int got = wait2(p->n, sreq[c], rreq[c]);
      if (got != (int)n || check(rb[c], n, base + (unsigned)(c * 1000 + round)) >= 0) bad = 1;
      free(sb[c]);
      free(rb[c]);
    }
  }
  return bad;
}

typedef struct {
  pair_t* p;
  void* s[2];
  void* r[2];
  unsigned base;
  int bad;
} thr_t;

static void* thread_main(void* arg) {
  thr_t* t = arg;
  t->bad = exchange(t->p, t->s, t->r, 2, 200, t->base);
  return NULL;
}

static void child_loopback(void) {
  void* h = open_plugin();
  if (h == NULL) {
    failures++;
    return;
  }
  pair_t p = {.n = dlsym(h, "ncclNetPlugin_v12")};
  ncclNetCommConfig_v12_t cfg = {NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK(p.n->init(&p.ctx_a, 1, &cfg, logger, NULL) == ncclSuccess, "init a");
  CHECK(p.n->init(&p.ctx_b, 2, &cfg, logger, NULL) == ncclSuccess, "init b");
  int ndev = 0;
  p.n->devices(&ndev);
  CHECK(ndev >= 1, "a device on lo");
  if (ndev < 1) return;

  /* Three connections sharing the workers, interleaved. */
  void *s[3], *r[3];
  for (int c = 0; c < 3; c++) CHECK(connect_pair(&p, &s[c], &r[c]) == 0, "connection %d", c);
  CHECK(exchange(&p, s, r, 3, 50, 1) == 0, "three connections on shared workers keep apart");

  /* The 33rd outstanding send gives a NULL request. */
  char small[8] = {0};
  void* reqs[NCCL_NET_MAX_REQUESTS + 1] = {NULL};
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; i++)
    CHECK(p.n->isend(s[0], small, sizeof(small), 0, NULL, NULL, &reqs[i]) == ncclSuccess &&
              reqs[i] != NULL,
          "send %d posted", i);
  CHECK(p.n->isend(s[0], small, sizeof(small), 0, NULL, NULL, &reqs[NCCL_NET_MAX_REQUESTS]) ==
                ncclSuccess &&
            reqs[NCCL_NET_MAX_REQUESTS] == NULL,
        "33rd send: NULL request");
  char rbuf[NCCL_NET_MAX_REQUESTS][8];
  for (int i = 0; i < NCCL_NET_MAX_REQUESTS; i++) {
    void* rr = NULL;
    void* data = rbuf[i];
    size_t n = 8;
    int tag = 0;
    while (rr == NULL) CHECK(p.n->irecv(r[0], 1, &data, &n, &tag, NULL, NULL, &rr) == 0, "irecv");
    CHECK(wait2(p.n, reqs[i], rr) == 8, "small %d", i);
  }

  /* Two threads at once on comms of the same two workers. */
  thr_t t[2];
  pthread_t th[2];
  for (int i = 0; i < 2; i++) {
    t[i] = (thr_t){.p = &p, .base = 100000u * (unsigned)(i + 1)};
    for (int c = 0; c < 2; c++)
      CHECK(connect_pair(&p, &t[i].s[c], &t[i].r[c]) == 0, "thread %d connection %d", i, c);
  }
  for (int i = 0; i < 2; i++) pthread_create(&th[i], NULL, thread_main, &t[i]);
  for (int i = 0; i < 2; i++) {
    pthread_join(th[i], NULL);
    CHECK(t[i].bad == 0, "thread %d data", i);
    for (int c = 0; c < 2; c++) {
      p.n->closeSend(t[i].s[c]);
      p.n->closeRecv(t[i].r[c]);
    }
  }
  for (int c = 0; c < 3; c++) {
    CHECK(p.n->closeSend(s[c]) == ncclSuccess, "closeSend");
    CHECK(p.n->closeRecv(r[c]) == ncclSuccess, "closeRecv");
  }

  /* A new communicator after finalize reuses the workers; its connections still work. */
  CHECK(p.n->finalize(p.ctx_a) == ncclSuccess && p.n->finalize(p.ctx_b) == ncclSuccess, "finalize");
  CHECK(p.n->init(&p.ctx_a, 3, &cfg, logger, NULL) == ncclSuccess, "init a again");
  CHECK(p.n->init(&p.ctx_b, 4, &cfg, logger, NULL) == ncclSuccess, "init b again");
  CHECK(connect_pair(&p, &s[0], &r[0]) == 0, "connection after reuse");
  CHECK(exchange(&p, s, r, 1, 20, 7) == 0, "data after reuse");
  p.n->closeSend(s[0]);
  p.n->closeRecv(r[0]);
  p.n->finalize(p.ctx_a);
  p.n->finalize(p.ctx_b);
  /* No dlclose: UCX keeps allocations reachable from its globals, which LeakSanitizer would
   * report once the library is gone. */
}

/* The v8 table (one process-wide context, int sizes) and v11's properties, in one process. */
static void child_old_tables(void) {
  void* h = open_plugin();
  if (h == NULL) {
    failures++;
    return;
  }
  const ncclNet_v8_t* n = dlsym(h, "ncclNetPlugin_v8");
  const ncclNet_v11_t* n11 = dlsym(h, "ncclNetPlugin_v11");
  CHECK(n != NULL && n11 != NULL, "tables");
  if (n == NULL || n11 == NULL) return;
  CHECK(n->init(logger) == ncclSuccess, "v8 init");
  int ndev = 0;
  n->devices(&ndev);
  CHECK(ndev >= 1, "a device");
  if (ndev < 1) return;
  ncclNetProperties_v11_t p11;
  CHECK(n11->getProperties(0, &p11) == ncclSuccess && p11.maxRecvs == NUX_MAX_RECVS &&
            p11.ptrSupport == NCCL_PTR_HOST && p11.maxP2pBytes > 0,
        "v11 properties");
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void *l = NULL, *sc = NULL, *rc = NULL;
  CHECK(n->listen(0, handle, &l) == ncclSuccess, "v8 listen");
  for (int i = 0; i < 200000 && (sc == NULL || rc == NULL); i++) {
    if (sc == NULL) CHECK(n->connect(0, handle, &sc, NULL) == ncclSuccess, "v8 connect");
    if (rc == NULL) CHECK(n->accept(l, &rc, NULL) == ncclSuccess, "v8 accept");
  }
  CHECK(sc != NULL && rc != NULL, "v8 connection");
  n->closeListen(l);
  if (sc == NULL || rc == NULL) return;
  enum { N = 70000 };
  char* sb = malloc(N);
  char* rb = calloc(1, N + 100);
  fill(sb, N, 42);
  void *smh = NULL, *rmh = NULL, *sreq = NULL, *rreq = NULL;
  CHECK(n->regMr(sc, sb, N, NCCL_PTR_HOST, &smh) == ncclSuccess, "v8 regMr");
  CHECK(n->regMr(rc, rb, N + 100, NCCL_PTR_HOST, &rmh) == ncclSuccess, "v8 regMr");
  void* cmh = NULL;
  CHECK(n->regMr(sc, sb, N, NCCL_PTR_CUDA, &cmh) != ncclSuccess && cmh == NULL, "CUDA refused");
  int rsize = N + 100, tag = 5;
  void* data = rb;
  while (rreq == NULL) CHECK(n->irecv(rc, 1, &data, &rsize, &tag, &rmh, &rreq) == 0, "v8 irecv");
  while (sreq == NULL) CHECK(n->isend(sc, sb, N, 5, smh, &sreq) == 0, "v8 isend");
  int sd = 0, rd = 0, got = -1;
  for (long i = 0; i < 20000000 && !(sd && rd); i++) {
    if (!sd) CHECK(n->test(sreq, &sd, NULL) == ncclSuccess, "v8 test send");
    if (!rd) CHECK(n->test(rreq, &rd, &got) == ncclSuccess, "v8 test recv");
  }
  CHECK(sd && rd && got == N && check(rb, N, 42) < 0, "v8 data (%d bytes)", got);
  void* freq = (void*)1;
  CHECK(n->iflush(rc, 1, &data, &got, &rmh, &freq) == ncclSuccess && freq == NULL,
        "iflush: NULL request");
  int neg = -1;
  CHECK(n->isend(sc, sb, neg, 0, smh, &sreq) == ncclInvalidArgument, "negative size refused");
  CHECK(n->deregMr(sc, smh) == ncclSuccess && n->deregMr(rc, rmh) == ncclSuccess, "v8 deregMr");
  CHECK(n->closeSend(sc) == ncclSuccess && n->closeRecv(rc) == ncclSuccess, "v8 close");
  free(sb);
  free(rb);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: test-net-ucx PLUGIN_SO\n");
    return 2;
  }
  plugin_path = argv[1];
  test_tags();
  test_knobs();
  test_lists();
  printf("%s helpers (tags, knobs, lists)\n", failures ? "FAIL" : "PASS");
  int bad = failures;
  static const char* const lo[] = {"UCX_TLS", "tcp", "UCX_NET_DEVICES", "lo", NULL};
  static const char* const none[] = {"UCX_NET_DEVICES", "nosuchdev0", NULL};
  static const char* const notls[] = {"UCX_TLS", "nosuchtl", NULL};
  bad += in_child("tables", child_tables, NULL);
  bad += in_child("no device (UCX_NET_DEVICES=nosuchdev0)", child_no_device, none);
  bad += in_child("no device (UCX_TLS=nosuchtl)", child_no_device, notls);
  bad += in_child("loopback: shared workers, threads, request limit, reuse", child_loopback, lo);
  bad += in_child("loopback through the v8 table (and v11 properties)", child_old_tables, lo);
  return bad ? 1 : 0;
}
