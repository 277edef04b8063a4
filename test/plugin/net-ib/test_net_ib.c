/*
 * net-ib unit test.
 *   test-net-ib PLUGIN_SO EXPECT
 * Part 1, no verbs: the helpers of nib_util.c, compiled in (knobs, NCCL_IB_HCA, address ranges,
 * GID selection, port speeds, the imm encoding).
 * Part 2, the plugin through its v12 and v8 tables (dlopen), in this process's environment:
 *   EXPECT "none:TEXT": init succeeds, no devices, and an INFO line containing TEXT says why
 *                       (no libibverbs, NCCL_IB_DISABLE, no HCA);
 *   EXPECT "any":       init succeeds; with no devices an INFO line says "no devices", with
 *                       devices each one's properties are sane;
 *   EXPECT "warn:TEXT": as "any", and a WARN containing TEXT was logged (a bad knob value).
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "nccl_net.h"
#include "nib_util.h"

static int failures;
#define CHECK(cond, ...)                       \
  do {                                         \
    if (!(cond)) {                             \
      failures++;                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);            \
      fprintf(stderr, "\n");                   \
    }                                          \
  } while (0)

/* ---- Part 1 ---------------------------------------------------------------------------------- */

static void test_hca(void) {
  nib_hca_spec_t s;
  CHECK(nib_hca_parse(NULL, &s) && nib_hca_match(&s, "mlx5_0", 1), "unset: everything");
  CHECK(nib_hca_parse("", &s) && nib_hca_match(&s, "rxe0", 1), "empty: everything");
  CHECK(nib_hca_parse("mlx5", &s) && nib_hca_match(&s, "mlx5_3", 2) && !nib_hca_match(&s, "rxe0", 1),
        "prefix");
  CHECK(nib_hca_parse("=mlx5_1", &s) && nib_hca_match(&s, "mlx5_1", 1) &&
            !nib_hca_match(&s, "mlx5_10", 1),
        "exact");
  CHECK(nib_hca_parse("mlx5_0:1,mlx5_1", &s) && s.n == 2 && nib_hca_match(&s, "mlx5_0", 1) &&
            !nib_hca_match(&s, "mlx5_0", 2) && nib_hca_match(&s, "mlx5_1", 2),
        "ports");
  CHECK(nib_hca_parse("^mlx5_0:1", &s) && !nib_hca_match(&s, "mlx5_0", 1) &&
            nib_hca_match(&s, "mlx5_0", 2) && nib_hca_match(&s, "rxe0", 1),
        "exclude a port");
  CHECK(nib_hca_parse("^=rxe0", &s) && s.exclude && s.exact && !nib_hca_match(&s, "rxe0", 1) &&
            nib_hca_match(&s, "rxe01", 1),
        "exclude exact");
  CHECK(nib_hca_parse(" mlx5_0 , mlx5_1 ", &s) && s.n == 2 && strcmp(s.name[1], "mlx5_1") == 0,
        "spaces");
  CHECK(!nib_hca_parse("mlx5_0:x", &s) && s.n == 0, "bad port is rejected");
  CHECK(!nib_hca_parse("mlx5_0:0", &s), "port 0 is rejected");
  CHECK(!nib_hca_parse(":1", &s), "port without a name is rejected");
}

static nib_gid_t gid_v4(int type, int a, int b, int c, int d) {
  nib_gid_t g = {.type = type};
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = (uint8_t)a, g.raw[13] = (uint8_t)b, g.raw[14] = (uint8_t)c, g.raw[15] = (uint8_t)d;
  return g;
}

static nib_gid_t gid_v6(int type, uint8_t first, uint8_t second, uint8_t last) {
  nib_gid_t g = {.type = type};
  g.raw[0] = first, g.raw[1] = second, g.raw[15] = last;
  return g;
}

static void test_gids(void) {
  nib_range_t r;
  CHECK(nib_range_parse(NULL, &r) && !r.set, "no range");
  CHECK(nib_range_parse("10.0.0.0/8", &r) && r.set && r.family == AF_INET && r.len == 8, "v4");
  CHECK(nib_range_parse("fd00::/8", &r) && r.set && r.family == AF_INET6, "v6");
  CHECK(!nib_range_parse("10.0.0.0", &r), "no length");
  CHECK(!nib_range_parse("10.0.0.0/33", &r), "length too long");
  CHECK(!nib_range_parse("nonsense/8", &r), "not an address");
  /* A RoCE table as the kernel builds it: link-local v6 (v1, v2), IPv4 (v1, v2), global v6. */
  nib_gid_t t[8];
  memset(t, 0, sizeof(t));
  t[0] = gid_v6(NIB_GID_ROCE_V1, 0xfe, 0x80, 1);
  t[1] = gid_v6(NIB_GID_ROCE_V2, 0xfe, 0x80, 1);
  t[2] = gid_v4(NIB_GID_ROCE_V1, 10, 0, 2, 15);
  t[3] = gid_v4(NIB_GID_ROCE_V2, 10, 0, 2, 15);
  t[4] = gid_v6(NIB_GID_ROCE_V1, 0xfd, 0x00, 5);
  t[5] = gid_v6(NIB_GID_ROCE_V2, 0xfd, 0x00, 5);
  t[6].type = -1; /* empty slots */
  t[7].type = -1;
  CHECK(nib_gid_is_v4(t[3].raw) && !nib_gid_is_v4(t[5].raw), "v4-mapped");
  nib_range_parse(NULL, &r);
  CHECK(nib_gid_pick(t, 8, 2, AF_INET, &r) == 3, "v2 IPv4: %d", nib_gid_pick(t, 8, 2, AF_INET, &r));
  CHECK(nib_gid_pick(t, 8, 1, AF_INET, &r) == 2, "v1 IPv4");
  CHECK(nib_gid_pick(t, 8, 2, AF_INET6, &r) == 5, "v2 IPv6 prefers global to link-local");
  CHECK(nib_gid_pick(t, 2, 2, AF_INET6, &r) == 1, "link-local when nothing else");
  nib_range_parse("192.168.0.0/16", &r);
  CHECK(nib_gid_pick(t, 8, 2, AF_INET, &r) == 3, "range that fits nothing: still the family");
  nib_gid_t t2[3] = {gid_v4(NIB_GID_ROCE_V2, 10, 0, 2, 15), gid_v4(NIB_GID_ROCE_V2, 192, 168, 1, 4),
                     gid_v4(NIB_GID_ROCE_V1, 192, 168, 1, 4)};
  CHECK(nib_gid_pick(t2, 3, 2, AF_INET, &r) == 1, "range picks the address inside it");
  nib_range_parse("10.0.0.0/8", &r);
  CHECK(nib_gid_pick(t2, 3, 2, AF_INET, &r) == 0, "the other range");
  nib_gid_t empty[2] = {{.type = -1}, {.type = NIB_GID_ROCE_V2}};
  CHECK(nib_gid_pick(empty, 2, 2, AF_INET, NULL) == -1, "all empty");
  nib_gid_t only_v6[1] = {gid_v6(NIB_GID_ROCE_V2, 0xfd, 0, 9)};
  CHECK(nib_gid_pick(only_v6, 1, 2, AF_INET, NULL) == 0, "falls back to another family");
}

static void test_misc(void) {
  CHECK(nib_port_speed_mbps(32, 0, 2) == 100000, "EDR 4x");
  CHECK(nib_port_speed_mbps(64, 0, 2) == 200000, "HDR 4x");
  CHECK(nib_port_speed_mbps(128, 0, 2) == 400000, "NDR 4x");
  CHECK(nib_port_speed_mbps(1, 0, 1) == 2500, "SDR 1x");
  CHECK(nib_port_speed_mbps(3, 0, 2) == 0, "unknown speed code");
  CHECK(nib_port_speed_mbps(32, 0, 3) == 0, "unknown width code");
  for (int s = 0; s < NCCL_NET_MAX_REQUESTS; s++)
    for (int i = 0; i < NIB_MAX_RECVS; i++) {
      uint32_t imm = nib_imm_make(s, i);
      CHECK(nib_imm_slot(imm) == s && nib_imm_idx(imm) == i, "imm round trip %d %d", s, i);
    }
  /* Knobs: defaults, a good value, a bad one. */
  for (int i = 0; i < nib_knob_count; i++) {
    const nib_knob_t* k = &nib_knob_table[i];
    CHECK(k->def >= k->lo && k->def <= k->hi && k->help[0], "knob %s", k->name);
    int v = 0;
    CHECK(nib_knob_parse(k, "0x1", &v) == (1 >= k->lo && 1 <= k->hi), "knob %s parses hex", k->name);
    CHECK(!nib_knob_parse(k, "12abc", &v), "knob %s rejects junk", k->name);
  }
}

/* ---- Part 2 ---------------------------------------------------------------------------------- */

static char logged[8192];
static int warns;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  (void)flags, (void)file, (void)line;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (level == NCCL_LOG_WARN) warns++;
  fprintf(stderr, "[%s] %s\n", level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
  size_t used = strlen(logged);
  snprintf(logged + used, sizeof(logged) - used, "%s\n", msg);
}

static void test_plugin(const char* path, const char* expect) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL, "dlopen %s: %s", path, dlerror());
  if (h == NULL) return;
  const ncclNet_v12_t* n = dlsym(h, "ncclNetPlugin_v12");
  const ncclNet_v8_t* n8 = dlsym(h, "ncclNetPlugin_v8");
  CHECK(n != NULL && n8 != NULL && strcmp(n->name, "IB") == 0, "tables");
  if (n == NULL || n8 == NULL) return;
  void* ctx = NULL;
  ncclNetCommConfig_v12_t cfg = {.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF};
  CHECK(n->init(&ctx, 1, &cfg, logger, NULL) == ncclSuccess, "v12 init");
  CHECK(n8->init(logger) == ncclSuccess, "v8 init after v12");
  int ndev = -1;
  CHECK(n->devices(&ndev) == ncclSuccess && ndev >= 0, "devices");
  int ndev8 = -1;
  CHECK(n8->devices(&ndev8) == ncclSuccess && ndev8 == ndev, "v8 devices agree");
  if (strncmp(expect, "none:", 5) == 0) {
    CHECK(ndev == 0, "expected no devices, got %d", ndev);
    CHECK(strstr(logged, expect + 5) != NULL, "no INFO line says \"%s\"; logged:\n%s", expect + 5,
          logged);
    CHECK(warns == 0, "%d WARN(s) where only INFO is right", warns);
  } else {
    if (ndev == 0) CHECK(strstr(logged, "no devices") != NULL, "no devices, and no INFO says so");
    if (strncmp(expect, "warn:", 5) == 0)
      CHECK(warns > 0 && strstr(logged, expect + 5) != NULL, "no WARN says \"%s\"", expect + 5);
  }
  for (int d = 0; d < ndev; d++) {
    ncclNetProperties_v12_t p;
    CHECK(n->getProperties(d, &p) == ncclSuccess, "properties %d", d);
    CHECK(p.name != NULL && p.ptrSupport == NCCL_PTR_HOST && p.maxRecvs >= 1 &&
              p.maxRecvs <= NIB_MAX_RECVS && p.maxP2pBytes > 0 && p.vProps.ndevs == 1 &&
              p.vProps.devs[0] == d && p.port >= 1,
          "device %d properties", d);
    printf("device %d: %s, %d Mbit/s, port %d, maxP2pBytes %zu, pci %s\n", d, p.name, p.speed,
           p.port, p.maxP2pBytes, p.pciPath ? p.pciPath : "(none)");
    ncclNetProperties_v8_t p8;
    CHECK(n8->getProperties(d, &p8) == ncclSuccess && p8.maxRecvs == p.maxRecvs, "v8 props");
  }
  ncclNetProperties_v12_t p;
  int w = warns;
  CHECK(n->getProperties(ndev, &p) == ncclInvalidArgument && warns == w + 1,
        "a device past the end is refused with a WARN");
  CHECK(n->finalize(ctx) == ncclSuccess, "finalize");
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: test-net-ib PLUGIN_SO none:TEXT|any|warn:TEXT\n");
    return 2;
  }
  test_hca();
  test_gids();
  test_misc();
  printf("%s helpers (NCCL_IB_HCA, GIDs, speeds, knobs)\n", failures ? "FAIL" : "PASS");
  int before = failures;
  test_plugin(argv[1], argv[2]);
  printf("%s plugin (%s)\n", failures > before ? "FAIL" : "PASS", argv[2]);
  return failures ? 1 : 0;
}
