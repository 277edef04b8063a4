/*
 * core/topo on the CPU: XML parse/write round trips, malformed input, detection on a fake sysfs
 * tree with a fake NVML, the flat (VM) case, path types and bandwidths of the handmade H200 file,
 * the p2p level rules on a PCIe system built here, GPUDirect RDMA rules, NCCL_TOPO_FILE merging.
 *   test-topo DATA_DIR          (DATA_DIR: test/data/topo; every *.xml there must load)
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "topo.h"

static const char* data_dir;

static char* data_path(const char* name) {
  static char buf[4][1024];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof(buf[k]), "%s/%s", data_dir, name);
  return buf[k];
}

static bool near(float a, float b) { return fabsf(a - b) < 0.01f; }

static topo_system_t* sys_from_text(const char* text) {
  topo_xml_node_t* x = NULL;
  if (topo_xml_parse(text, strlen(text), "inline", &x) != ncclSuccess) return NULL;
  topo_system_t* s = NULL;
  if (topo_system_from_xml(x, &s) != ncclSuccess) return NULL;
  return s;
}

static char* format(const topo_system_t* s) {
  char* t = NULL;
  CHECK_EQ_INT(topo_system_format(s, &t), ncclSuccess);
  return t;
}

/* ---- XML ------------------------------------------------------------------------------------ */

static void test_roundtrip_file(const char* name) {
  topo_xml_node_t* a = NULL;
  CHECK_EQ_INT(topo_xml_load(data_path(name), &a), ncclSuccess);
  if (a == NULL) return;
  char* text;
  size_t len;
  CHECK_EQ_INT(topo_xml_write(a, &text, &len), ncclSuccess);
  topo_xml_node_t* b = NULL;
  CHECK_EQ_INT(topo_xml_parse(text, len, "written", &b), ncclSuccess);
  CHECK_MSG(b && topo_xml_equal(a, b), "%s: load -> write -> parse differs", name);
  /* Writing again gives the same bytes. */
  char* text2;
  CHECK_EQ_INT(topo_xml_write(b, &text2, NULL), ncclSuccess);
  CHECK_EQ_STR(text, text2);
  /* Same model from both trees. */
  topo_xml_node_t* a2;
  CHECK_EQ_INT(topo_xml_copy(a, &a2), ncclSuccess);
  topo_system_t *sa = NULL, *sb = NULL;
  CHECK_EQ_INT(topo_system_from_xml(a2, &sa), ncclSuccess);
  CHECK_EQ_INT(topo_system_from_xml(b, &sb), ncclSuccess);
  if (sa && sb) {
    char *fa = format(sa), *fb = format(sb);
    CHECK_EQ_STR(fa, fb);
    free(fa);
    free(fb);
  }
  /* Through a file, too. */
  char tmp[] = "/tmp/choir-topo-XXXXXX";
  int fd = mkstemp(tmp);
  CHECK_TRUE(fd >= 0);
  close(fd);
  CHECK_EQ_INT(topo_xml_dump(a, tmp), ncclSuccess);
  topo_xml_node_t* c = NULL;
  CHECK_EQ_INT(topo_xml_load(tmp, &c), ncclSuccess);
  CHECK_TRUE(c && topo_xml_equal(a, c));
  unlink(tmp);
  topo_xml_free(c);
  topo_system_free(sa);
  topo_system_free(sb);
  free(text);
  free(text2);
  topo_xml_free(a);
}

static void test_unknown_kept(void) {
  const char* in =
      "<?xml version=\"1.0\"?>\n<!-- a comment -->\n"
      "<system version=\"1\" vendor_key=\"x&amp;y &lt;z&gt; &#65;&#x42;\">\n"
      "  <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\" familyid=\"25\" modelid=\"1\" "
      "future='yes'>\n"
      "    <pci busid=\"0000:01:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "      <gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"><power watts=\"400\"/></gpu>\n"
      "    </pci>\n"
      "    <gizmo a=\"1\"><inner/></gizmo>\n"
      "  </cpu>\n"
      "</system>\n";
  topo_xml_node_t* x = NULL;
  CHECK_EQ_INT(topo_xml_parse(in, strlen(in), "unknown.xml", &x), ncclSuccess);
  if (x == NULL) return;
  CHECK_EQ_STR(topo_xml_get(x, "vendor_key"), "x&y <z> AB");
  char* out;
  CHECK_EQ_INT(topo_xml_write(x, &out, NULL), ncclSuccess);
  CHECK_CONTAINS(out, "future=\"yes\"");
  CHECK_CONTAINS(out, "<gizmo a=\"1\">");
  CHECK_CONTAINS(out, "<inner/>");
  CHECK_CONTAINS(out, "<power watts=\"400\"/>");
  CHECK_CONTAINS(out, "vendor_key=\"x&amp;y &lt;z&gt; AB\"");
  topo_xml_node_t* y = NULL;
  CHECK_EQ_INT(topo_xml_parse(out, strlen(out), "out", &y), ncclSuccess);
  CHECK_TRUE(y && topo_xml_equal(x, y));
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_from_xml(y, &s), ncclSuccess);
  if (s) CHECK_EQ_INT(topo_gpu_count(s), 1);
  topo_system_free(s);
  free(out);
  topo_xml_free(x);
}

/* Every prefix of a real file either parses or fails with a message; never crashes (run under
 * the sanitizers in CI). */
static void test_truncated(void) {
  FILE* f = fopen(data_path("h200x4-handmade.xml"), "rb");
  CHECK_TRUE(f != NULL);
  if (f == NULL) return;
  static char buf[16384];
  size_t len = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  int ok = 0;
  for (size_t n = 0; n < len; n++) {
    topo_xml_node_t* x = NULL;
    ncclResult_t r = topo_xml_parse(buf, n, "prefix", &x);
    CHECK_MSG(r == ncclSuccess || r == ncclInvalidArgument, "prefix %zu: %d", n, r);
    ok += r == ncclSuccess;
    topo_xml_free(x);
  }
  CHECK_EQ_INT(ok, 1); /* only the file less its final newline is complete */
}

static void expect_malformed(const char* text, const char* needle) {
  topo_xml_node_t* x = NULL;
  err_clear_last();
  ncclResult_t r = topo_xml_parse(text, strlen(text), "bad.xml", &x);
  CHECK_MSG(r == ncclInvalidArgument, "parse of %s gave %d", text, r);
  CHECK_MSG(x == NULL, "root written on failure");
  CHECK_MSG(strstr(err_last(), needle) != NULL, "error \"%s\" lacks \"%s\"", err_last(), needle);
  CHECK_MSG(strstr(err_last(), "bad.xml:") != NULL, "error \"%s\" does not name the file",
            err_last());
}

static void test_malformed(void) {
  expect_malformed("", "no element");
  expect_malformed("<system>", "bad.xml:1: element <system> is never closed");
  expect_malformed("<system>\n<cpu>\n</gpu>\n</system>", "bad.xml:3: </gpu> closes <cpu>");
  expect_malformed("<system a=1/>", "must be quoted");
  expect_malformed("<system a=\"1/>", "never closed");
  expect_malformed("<system a=\"1\" a=\"2\"/>", "appears twice");
  expect_malformed("<system a/>", "has no '=value'");
  expect_malformed("<system a=\"&bogus;\"/>", "bad entity");
  expect_malformed("<system/><system/>", "after the end of the root");
  expect_malformed("<system a=\"1\"b=\"2\"/>", "expected a space");
  expect_malformed("<!-- open", "never closed");
  expect_malformed("<system>\n\n  <1cpu/></system>", "bad.xml:3:");
  expect_malformed("text<system/>", "text before the root");
  /* Files: errors name the path. */
  topo_xml_node_t* x = NULL;
  CHECK_EQ_INT(topo_xml_load("/nonexistent/topo.xml", &x), ncclSystemError);
  CHECK_CONTAINS(err_last(), "/nonexistent/topo.xml");
  /* A tree that parses but is not a topology. */
  topo_system_t* s = NULL;
  CHECK_TRUE(sys_from_text("<notsystem/>") == NULL);
  CHECK_CONTAINS(err_last(), "expected <system");
  s = sys_from_text("<system><cpu numaid=\"0\"><pci busid=\"0000:01:00.0\"><gpu sm=\"90\"/>"
                    "</pci></cpu></system>");
  CHECK_TRUE(s == NULL);
  CHECK_CONTAINS(err_last(), "lacks dev");
  s = sys_from_text("<system><cpu numaid=\"0\"><pci busid=\"zz:01\"/></cpu></system>");
  CHECK_TRUE(s == NULL);
  CHECK_CONTAINS(err_last(), "malformed busid");
}

static void test_busid(void) {
  CHECK_EQ_INT(topo_busid_parse("0000:19:00.0"), 0x19000);
  CHECK_EQ_INT(topo_busid_parse("0001:BB:1f.3"), 0x1bb1f3);
  CHECK_EQ_INT(topo_busid_parse("19:00.0"), 0x19000);
  CHECK_EQ_INT(topo_busid_parse("00000000:19:00.0"), 0x19000);
  CHECK_EQ_INT(topo_busid_parse("0000:19:00"), -1);
  CHECK_EQ_INT(topo_busid_parse("pci0000:00"), -1);
  CHECK_EQ_INT(topo_busid_parse(""), -1);
  char b[20];
  CHECK_EQ_STR(topo_busid_str(0x1bb1f3, b, sizeof(b)), "0001:bb:1f.3");
  CHECK_TRUE(near(topo_pci_bw("8.0 GT/s PCIe", 16), 12.0f));
  CHECK_TRUE(near(topo_pci_bw("32.0 GT/s PCIe", 16), 48.0f));
  CHECK_TRUE(near(topo_pci_bw("16 GT/s", 8), 12.0f));
  CHECK_TRUE(near(topo_pci_bw(NULL, 0), TOPO_PCI_BW_DEFAULT));
  CHECK_TRUE(near(topo_nvlink_bw_per_link(90), 20.6f));
  CHECK_TRUE(near(topo_nvlink_bw_per_link(80), 20.0f));
  CHECK_TRUE(near(topo_nvlink_bw_per_link(70), 20.0f));
  CHECK_TRUE(near(topo_nvlink_bw_per_link(60), 18.0f));
  CHECK_TRUE(near(topo_nvlink_bw_per_link(86), 12.0f));
  CHECK_TRUE(near(topo_nvlink_bw_per_link(100), 40.1f));
}

/* ---- The handmade H200 machine ------------------------------------------------------------- */

static void test_h200(void) {
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_from_xml_file(data_path("h200x4-handmade.xml"), &s), ncclSuccess);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_gpu_count(s), 4);
  CHECK_EQ_INT(topo_nvs_count(s), 1);
  CHECK_EQ_INT(topo_cpu_count(s), 2);
  CHECK_EQ_INT(topo_nic_count(s), 0);
  float nvbw = 18 * 20.6f;
  for (int i = 0; i < 4; i++) {
    int g;
    CHECK_EQ_INT(topo_rank_to_gpu(s, i, &g), ncclSuccess);
    CHECK_EQ_INT(topo_gpu_dev(s, g), i);
    CHECK_EQ_INT(topo_gpu_nvlink_count(s, g), 18);
    CHECK_TRUE(near(topo_gpu_nvlink_bw(s, g), nvbw));
    for (int j = 0; j < 4; j++) {
      const topo_path_t* p = topo_path(s, TOPO_NODE_GPU, i, TOPO_NODE_GPU, j);
      if (i == j) {
        CHECK_EQ_INT(p->type, TOPO_PATH_LOC);
        continue;
      }
      CHECK_MSG(p->type == TOPO_PATH_NVL, "GPU %d-%d path %s", i, j,
                topo_path_type_name(p->type));
      CHECK_MSG(near(p->bw, nvbw), "GPU %d-%d bw %.1f", i, j, (double)p->bw);
      CHECK_EQ_INT(p->nhops, 2);
      if (p->nhops == 2) {
        CHECK_EQ_INT(p->hops[0]->rem->type, TOPO_NODE_NVS);
        CHECK_EQ_INT(p->hops[1]->rem->type, TOPO_NODE_GPU);
        CHECK_EQ_INT(p->hops[1]->rem->index, j);
        CHECK_EQ_INT(p->hops[0]->count, 18);
      }
      int allowed = -1, rd = -1;
      CHECK_EQ_INT(topo_p2p_check(s, i, j, &allowed, &rd), ncclSuccess);
      CHECK_EQ_INT(allowed, 1);
      CHECK_EQ_INT(rd, 0); /* p2p read is NCCL's rule for sm80 only */
    }
  }
  /* GPU 0 is on CPU 0 (PHB through its switch) and reaches CPU 1 across the socket link. */
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_CPU, 0)->type, TOPO_PATH_PHB);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_CPU, 1)->type, TOPO_PATH_SYS);
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_CPU, 1)->bw, 22.0f));
  CHECK_TRUE(near(s->max_bw, nvbw));
  CHECK_TRUE(near(s->total_bw, nvbw));
  char* t = format(s);
  CHECK_CONTAINS(t, "=== System : maxBw 370.8 totalBw 370.8 ===");
  CHECK_CONTAINS(t, "+ NVL[370.8] - NVS/0 x18");
  free(t);
  topo_system_free(s);
}

/* ---- A PCIe system: each path type from GPU 0 ---------------------------------------------- */

/* GPU0 and GPU1 share switch A (PIX); GPU2 is under switch B, A and B under switch T (PXB);
 * GPU3 under switch C directly on CPU 0 (PHB); GPU4 on CPU 1 (SYS). A NIC sits in switch A. */
static const char* pcie_system(const char* vendor) {
  static char buf[4096];
  snprintf(
      buf, sizeof(buf),
      "<system version=\"1\">\n"
      " <cpu numaid=\"0\" arch=\"x86_64\" vendor=\"%s\" familyid=\"25\" modelid=\"1\">\n"
      "  <pci busid=\"0000:10:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "   <pci busid=\"0000:11:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "    <pci busid=\"0000:12:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><gpu dev=\"0\" sm=\"80\" rank=\"0\" gdr=\"1\"/></pci>\n"
      "    <pci busid=\"0000:13:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"8\"><gpu dev=\"1\" sm=\"80\" rank=\"1\" gdr=\"1\"/></pci>\n"
      "    <pci busid=\"0000:14:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><nic><net name=\"mlx5_0\" dev=\"0\" speed=\"200000\" port=\"1\" "
      "latency=\"0.000000\" guid=\"0x1234\" maxconn=\"131072\" gdr=\"1\"/></nic></pci>\n"
      "   </pci>\n"
      "   <pci busid=\"0000:21:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "    <pci busid=\"0000:22:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><gpu dev=\"2\" sm=\"80\" rank=\"2\" gdr=\"1\"/></pci>\n"
      "   </pci>\n"
      "  </pci>\n"
      "  <pci busid=\"0000:30:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\">\n"
      "   <pci busid=\"0000:31:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><gpu dev=\"3\" sm=\"70\" rank=\"3\" gdr=\"1\"/></pci>\n"
      "  </pci>\n"
      " </cpu>\n"
      " <cpu numaid=\"1\" arch=\"x86_64\" vendor=\"%s\" familyid=\"25\" modelid=\"1\">\n"
      "  <pci busid=\"0000:81:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
      "link_width=\"16\"><gpu dev=\"4\" sm=\"80\" rank=\"4\" gdr=\"1\"/></pci>\n"
      " </cpu>\n"
      "</system>\n",
      vendor, vendor);
  return buf;
}

static void test_pcie_paths_and_levels(void) {
  topo_system_t* s = sys_from_text(pcie_system("AuthenticAMD"));
  CHECK_TRUE(s != NULL);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_gpu_count(s), 5);
  CHECK_EQ_INT(s->count[TOPO_NODE_PCI], 4);
  const int expect[5] = {TOPO_PATH_LOC, TOPO_PATH_PIX, TOPO_PATH_PXB, TOPO_PATH_PHB,
                         TOPO_PATH_SYS};
  for (int j = 0; j < 5; j++) {
    int g;
    CHECK_EQ_INT(topo_rank_to_gpu(s, j, &g), ncclSuccess);
    const topo_path_t* p = topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, g);
    CHECK_MSG((int)p->type == expect[j], "GPU0-GPU%d: %s, expected %s", j,
              topo_path_type_name(p->type), topo_path_type_name(expect[j]));
  }
  /* Bottlenecks: GPU1's x8 link (gen4 x8 = 12 GB/s); across sockets AMD Zen3 xGMI 24 GB/s. */
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, 1)->bw, 12.0f));
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, 2)->bw, 24.0f));
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, 4)->bw, 24.0f));
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_NET, 0)->type, TOPO_PATH_PIX);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 2, TOPO_NODE_NET, 0)->type, TOPO_PATH_PXB);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 3, TOPO_NODE_NET, 0)->type, TOPO_PATH_PHB);
  CHECK_TRUE(near(topo_net_bw(s, 0), 25.0f));

  /* Each level: which of GPU0's peers (ranks 1..4 at PIX, PXB, PHB, SYS) p2p may reach. */
  static const struct {
    const char* level;
    int allowed[5];
  } cases[] = {
      {"LOC", {1, 0, 0, 0, 0}}, {"NVL", {1, 0, 0, 0, 0}}, {"PIX", {1, 1, 0, 0, 0}},
      {"PXB", {1, 1, 1, 0, 0}}, {"PHB", {1, 1, 1, 1, 0}}, {"SYS", {1, 1, 1, 1, 1}},
      {"0", {1, 0, 0, 0, 0}},   {"1", {1, 1, 0, 0, 0}},   {"2", {1, 1, 1, 0, 0}},
      {"3", {1, 1, 1, 1, 0}},   {"4", {1, 1, 1, 1, 1}},   {"5", {1, 1, 1, 1, 1}},
  };
  for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
    topo_policy_t pol = s->policy;
    CHECK_EQ_INT(topo_level_parse("NCCL_P2P_LEVEL", cases[c].level, &pol.p2p_level), ncclSuccess);
    topo_system_set_policy(s, &pol);
    for (int j = 0; j < 5; j++) {
      int allowed = -1;
      CHECK_EQ_INT(topo_p2p_check(s, 0, j, &allowed, NULL), ncclSuccess);
      CHECK_MSG(allowed == cases[c].allowed[j], "NCCL_P2P_LEVEL=%s rank 0-%d: allowed %d",
                cases[c].level, j, allowed);
    }
  }
  /* Default on AMD: SYS. */
  topo_policy_t pol = s->policy;
  pol.p2p_level = -1;
  topo_system_set_policy(s, &pol);
  int allowed = -1, rd = -1;
  CHECK_EQ_INT(topo_p2p_check(s, 0, 4, &allowed, &rd), ncclSuccess);
  CHECK_EQ_INT(allowed, 1);
  CHECK_EQ_INT(rd, 0); /* PCIe: no p2p read */
  /* A rank without a GPU here: not allowed, no error. */
  CHECK_EQ_INT(topo_p2p_check(s, 0, 9, &allowed, &rd), ncclSuccess);
  CHECK_EQ_INT(allowed, 0);

  /* GPUDirect RDMA: default level PXB. */
  int gdr = -1;
  CHECK_EQ_INT(topo_net_gdr(s, 0, 0, 0, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 1);
  CHECK_EQ_INT(topo_net_gdr(s, 2, 0, 0, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 1); /* PXB */
  CHECK_EQ_INT(topo_net_gdr(s, 3, 0, 0, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 0); /* PHB > PXB */
  /* Sends from a pre-Ampere GPU without an NVLink peer: no GDR read by default. */
  pol.net_gdr_level = TOPO_PATH_SYS;
  topo_system_set_policy(s, &pol);
  CHECK_EQ_INT(topo_net_gdr(s, 3, 0, 0, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 1);
  CHECK_EQ_INT(topo_net_gdr(s, 3, 0, 1, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 0);
  pol.net_gdr_read = 1;
  topo_system_set_policy(s, &pol);
  CHECK_EQ_INT(topo_net_gdr(s, 3, 0, 1, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 1);
  pol.net_gdr_read = 0;
  topo_system_set_policy(s, &pol);
  CHECK_EQ_INT(topo_net_gdr(s, 0, 0, 1, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 0);
  CHECK_EQ_INT(topo_net_gdr(s, 0, 0, 0, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 1);
  CHECK_EQ_INT(topo_net_gdr(s, 0, 7, 0, &gdr), ncclInvalidArgument);
  pol.shm_disable = 1;
  topo_system_set_policy(s, &pol);
  CHECK_TRUE(!topo_shm_allowed(s));
  pol.shm_disable = 0;
  topo_system_set_policy(s, &pol);
  CHECK_TRUE(topo_shm_allowed(s));
  topo_system_free(s);

  /* Intel x86: NCCL's default stops at PXB. */
  s = sys_from_text(pcie_system("GenuineIntel"));
  CHECK_TRUE(s != NULL);
  if (s == NULL) return;
  const int intel[5] = {1, 1, 1, 0, 0};
  for (int j = 0; j < 5; j++) {
    CHECK_EQ_INT(topo_p2p_check(s, 0, j, &allowed, NULL), ncclSuccess);
    CHECK_MSG(allowed == intel[j], "Intel default rank 0-%d: allowed %d", j, allowed);
  }
  topo_system_free(s);
}

static void test_levels(void) {
  int l = -1;
  CHECK_EQ_INT(topo_level_parse("K", "PHB", &l), ncclSuccess);
  CHECK_EQ_INT(l, TOPO_PATH_PHB);
  CHECK_EQ_INT(topo_level_parse("K", "NVL", &l), ncclSuccess);
  CHECK_EQ_INT(l, TOPO_PATH_NVL);
  CHECK_EQ_INT(topo_level_parse("K", "3", &l), ncclSuccess);
  CHECK_EQ_INT(l, TOPO_PATH_PHB);
  CHECK_EQ_INT(topo_level_parse("K", "17", &l), ncclSuccess);
  CHECK_EQ_INT(l, TOPO_PATH_SYS);
  CHECK_EQ_INT(topo_level_parse("NCCL_P2P_LEVEL", "bogus", &l), ncclInvalidArgument);
  CHECK_CONTAINS(err_last(), "NCCL_P2P_LEVEL=\"bogus\"");
  CHECK_EQ_INT(topo_level_parse("K", "NET", &l), ncclInvalidArgument);
  CHECK_EQ_STR(topo_path_type_name(TOPO_PATH_DIS), "DIS");
  CHECK_EQ_STR(topo_path_type_name(TOPO_PATH_P2C), "P2C");
  CHECK_EQ_INT(TOPO_PATH_SYS, 9);
}

/* ---- Detection on the fake sysfs tree ------------------------------------------------------ */

/* 03:00.0 and 04:00.0 are linked by 4 NVLinks; 81:00.0 has none; "nvs" GPUs see an invisible
 * NVSwitch on 6 links. */
typedef struct {
  bool nvs;
} fake_nvml_t;

static ncclResult_t fake_link_count(void* ctx, const char* busid, int* n_p) {
  (void)ctx;
  (void)busid;
  *n_p = 18;
  return ncclSuccess;
}

static ncclResult_t fake_link_remote(void* ctx, const char* busid, int link, int* active_p,
                                     char* remote, size_t size, topo_nvl_remote_t* kind_p) {
  fake_nvml_t* f = ctx;
  *active_p = 0;
  if (f->nvs) {
    if (link >= 6) return ncclSuccess;
    snprintf(remote, size, "fffffff:ffff:ff.0");
    *kind_p = TOPO_NVL_REMOTE_SWITCH;
    *active_p = 1;
    return ncclSuccess;
  }
  if (link >= 4) return ncclSuccess;
  if (strcmp(busid, "0000:03:00.0") == 0) snprintf(remote, size, "0000:04:00.0");
  else if (strcmp(busid, "0000:04:00.0") == 0) snprintf(remote, size, "0000:03:00.0");
  else return ncclSuccess;
  *kind_p = TOPO_NVL_REMOTE_GPU;
  *active_p = 1;
  return ncclSuccess;
}

static ncclResult_t fake_sm(void* ctx, int dev, int* sm_p) {
  (void)ctx;
  (void)dev;
  *sm_p = 90;
  return ncclSuccess;
}

static void test_detect_sysfs(void) {
  fake_nvml_t fn = {.nvs = false};
  topo_nvml_ops_t ops = {.ctx = &fn, .link_count = fake_link_count,
                         .link_remote = fake_link_remote};
  topo_detect_env_t env = {.sysfs_root = data_path("sysfs-pcie"),
                           .cpuinfo_path = data_path("sysfs-pcie-cpuinfo"),
                           .nvml = &ops,
                           .gpu_sm = fake_sm};
  /* Ranks given out of bus order: the tree and model must not depend on it. */
  topo_rank_info_t ranks[3] = {{2, 2, 0x81000}, {0, 0, 0x03000}, {1, 1, 0x04000}};
  char pci0[1024], pci1[1024];
  snprintf(pci0, sizeof(pci0), "%s/bus/pci/devices/0000:05:00.0", data_path("sysfs-pcie"));
  snprintf(pci1, sizeof(pci1), "%s/bus/pci/devices/0000:05:00.1", data_path("sysfs-pcie"));
  topo_nic_props_t nics[2] = {
      {.name = "mlx5_0", .pci_path = pci0, .guid = 0xabc, .speed_mbps = 400000, .port = 1,
       .max_comms = 65536, .gdr = 1},
      {.name = "mlx5_1", .pci_path = pci1, .guid = 0xabd, .speed_mbps = 400000, .port = 1,
       .max_comms = 65536, .gdr = 1},
  };
  topo_xml_node_t* x = NULL;
  CHECK_EQ_INT(topo_detect(&env, ranks, 3, nics, 2, &x), ncclSuccess);
  if (x == NULL) return;
  /* The tree: cpu 0 > switch 01:00.0 > GPUs 03, 04 and the NIC functions; cpu 1 > GPU 81. */
  topo_xml_node_t* cpu0 = topo_xml_find_child(x, "cpu", "numaid", "0");
  topo_xml_node_t* cpu1 = topo_xml_find_child(x, "cpu", "numaid", "1");
  CHECK_TRUE(cpu0 != NULL && cpu1 != NULL);
  if (cpu0 == NULL || cpu1 == NULL) return;
  CHECK_EQ_STR(topo_xml_get(cpu0, "vendor"), "GenuineIntel");
  CHECK_EQ_STR(topo_xml_get(cpu0, "familyid"), "6");
  CHECK_EQ_STR(topo_xml_get(cpu0, "modelid"), "143");
  CHECK_EQ_STR(topo_xml_get(cpu0, "affinity"), "00000000,0000ffff");
  CHECK_EQ_STR(topo_xml_get(cpu1, "affinity"), "00000000,ffff0000");
  topo_xml_node_t* sw = topo_xml_find_child(cpu0, "pci", "busid", "0000:01:00.0");
  CHECK_TRUE(sw != NULL);
  if (sw) {
    CHECK_EQ_STR(topo_xml_get(sw, "class"), "0x060400");
    CHECK_EQ_STR(topo_xml_get(sw, "link_speed"), "32.0 GT/s PCIe");
    CHECK_EQ_STR(topo_xml_get(sw, "link_width"), "16");
    CHECK_EQ_INT(sw->nchildren, 4);
    topo_xml_node_t* g0 = topo_xml_find_child(sw, "pci", "busid", "0000:03:00.0");
    CHECK_TRUE(g0 != NULL && topo_xml_find_child(g0, "gpu", "rank", "0") != NULL);
    if (g0 && g0->nchildren) {
      topo_xml_node_t* nv = topo_xml_find_child(g0->children[0], "nvlink", NULL, NULL);
      CHECK_TRUE(nv != NULL);
      if (nv) {
        CHECK_EQ_STR(topo_xml_get(nv, "target"), "0000:04:00.0");
        CHECK_EQ_STR(topo_xml_get(nv, "count"), "4");
        CHECK_EQ_STR(topo_xml_get(nv, "tclass"), "0x030200");
      }
    }
    CHECK_TRUE(topo_xml_find(sw, "net", "name", "mlx5_1") != NULL);
  }
  CHECK_TRUE(topo_xml_find(cpu1, "gpu", "rank", "2") != NULL);
  /* The root port above the switch is not a node, nor the downstream ports. */
  CHECK_TRUE(topo_xml_find(x, "pci", "busid", "0000:00:01.0") == NULL);
  CHECK_TRUE(topo_xml_find(x, "pci", "busid", "0000:02:00.0") == NULL);

  char* detected;
  CHECK_EQ_INT(topo_xml_write(x, &detected, NULL), ncclSuccess);
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_from_xml(x, &s), ncclSuccess);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_gpu_count(s), 3);
  CHECK_EQ_INT(topo_nic_count(s), 1); /* two functions of one NIC */
  CHECK_EQ_INT(topo_net_count(s), 2);
  int g0, g1, g2;
  CHECK_EQ_INT(topo_rank_to_gpu(s, 0, &g0), ncclSuccess);
  CHECK_EQ_INT(topo_rank_to_gpu(s, 1, &g1), ncclSuccess);
  CHECK_EQ_INT(topo_rank_to_gpu(s, 2, &g2), ncclSuccess);
  CHECK_EQ_INT(g0, 0); /* numbered in bus order */
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, g0, TOPO_NODE_GPU, g1)->type, TOPO_PATH_NVL);
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, g0, TOPO_NODE_GPU, g1)->bw, 4 * 20.6f));
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, g0, TOPO_NODE_GPU, g2)->type, TOPO_PATH_SYS);
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, g0, TOPO_NODE_GPU, g2)->bw, 22.0f)); /* SPR UPI */
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, g0, TOPO_NODE_NET, 1)->type, TOPO_PATH_PIX);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, g2, TOPO_NODE_NET, 0)->type, TOPO_PATH_SYS);
  CHECK_TRUE(near(topo_net_bw(s, 0), 50.0f));
  int gdr = -1;
  CHECK_EQ_INT(topo_net_gdr(s, 0, 0, 1, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 1);
  CHECK_EQ_INT(topo_net_gdr(s, 2, 0, 0, &gdr), ncclSuccess);
  CHECK_EQ_INT(gdr, 0);

  /* Dump and reload: same tree, same model. */
  topo_xml_node_t* y = NULL;
  CHECK_EQ_INT(topo_xml_parse(detected, strlen(detected), "detected", &y), ncclSuccess);
  topo_system_t* s2 = NULL;
  CHECK_EQ_INT(topo_system_from_xml(y, &s2), ncclSuccess);
  if (s2) {
    char *a = format(s), *b = format(s2);
    CHECK_EQ_STR(a, b);
    free(a);
    free(b);
  }
  /* Detection is order-independent: the same ranks in another order give the same bytes. */
  topo_rank_info_t ranks2[3] = {ranks[1], ranks[2], ranks[0]};
  topo_xml_node_t* z = NULL;
  CHECK_EQ_INT(topo_detect(&env, ranks2, 3, nics, 2, &z), ncclSuccess);
  char* again = NULL;
  if (z) CHECK_EQ_INT(topo_xml_write(z, &again, NULL), ncclSuccess);
  CHECK_TRUE(again != NULL && strcmp(again, detected) == 0);
  free(again);
  topo_xml_free(z);
  free(detected);
  topo_system_free(s2);
  topo_system_free(s);
}

/* A VM: no sysfs at all, switches hidden. GPUs hang off one CPU; NVLinks still show. */
static void test_detect_flat(void) {
  fake_nvml_t fn = {.nvs = true};
  topo_nvml_ops_t ops = {.ctx = &fn, .link_count = fake_link_count,
                         .link_remote = fake_link_remote};
  topo_detect_env_t env = {.sysfs_root = "/nonexistent-sysfs",
                           .cpuinfo_path = "/nonexistent-cpuinfo",
                           .nvml = &ops,
                           .gpu_sm = fake_sm};
  topo_rank_info_t ranks[2] = {{0, 0, 0x1b000}, {1, 1, 0x1a000}};
  topo_nic_props_t nic = {.name = "eth0", .pci_path = NULL, .speed_mbps = 100000, .port = 1};
  topo_xml_node_t* x = NULL;
  CHECK_EQ_INT(topo_detect(&env, ranks, 2, &nic, 1, &x), ncclSuccess);
  if (x == NULL) return;
  CHECK_EQ_INT(x->nchildren, 1);
  topo_xml_node_t* cpu = topo_xml_find_child(x, "cpu", "numaid", "0");
  CHECK_TRUE(cpu != NULL);
  if (cpu) {
    CHECK_EQ_INT(cpu->nchildren, 3);
    /* Sorted by bus id. */
    CHECK_EQ_STR(topo_xml_get(cpu->children[0], "busid"), "0000:1a:00.0");
    CHECK_EQ_STR(cpu->children[2]->name, "nic");
  }
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_from_xml(x, &s), ncclSuccess);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_gpu_count(s), 2);
  CHECK_EQ_INT(topo_nvs_count(s), 1);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, 1)->type, TOPO_PATH_NVL);
  CHECK_TRUE(near(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, 1)->bw, 6 * 20.6f));
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_CPU, 0)->type, TOPO_PATH_PHB);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_NET, 0)->type, TOPO_PATH_PHB);
  topo_system_free(s);

  /* Without NVLinks either: PHB between the GPUs, p2p allowed by default on this host only
   * when the CPU is not Intel; the cpuinfo here is missing so the vendor is unknown: SYS. */
  env.no_nvml = 1;
  x = NULL;
  CHECK_EQ_INT(topo_detect(&env, ranks, 2, NULL, 0, &x), ncclSuccess);
  s = NULL;
  if (x) CHECK_EQ_INT(topo_system_from_xml(x, &s), ncclSuccess);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, 0, TOPO_NODE_GPU, 1)->type, TOPO_PATH_PHB);
  int allowed = -1;
  CHECK_EQ_INT(topo_p2p_check(s, 0, 1, &allowed, NULL), ncclSuccess);
  CHECK_EQ_INT(allowed, 1);
  topo_system_free(s);
}

/* NCCL_TOPO_FILE: the file first, then what detection finds that it lacks. */
static void test_file_merge(void) {
  fake_nvml_t fn = {.nvs = false};
  topo_nvml_ops_t ops = {.ctx = &fn, .link_count = fake_link_count,
                         .link_remote = fake_link_remote};
  topo_detect_env_t env = {.sysfs_root = data_path("sysfs-pcie"),
                           .cpuinfo_path = data_path("sysfs-pcie-cpuinfo"),
                           .nvml = &ops,
                           .gpu_sm = fake_sm};
  /* Ranks 5 and 6 run on two of the file's GPUs (devices 0 and 2); rank 7 on a GPU the file
   * does not have (found in the fake sysfs). */
  topo_rank_info_t ranks[3] = {{5, 0, 0x19000}, {6, 2, 0x9b000}, {7, 1, 0x03000}};
  char tmp[] = "/tmp/choir-topo-dump-XXXXXX";
  int fd = mkstemp(tmp);
  CHECK_TRUE(fd >= 0);
  close(fd);
  setenv("NCCL_TOPO_FILE", data_path("h200x4-handmade.xml"), 1);
  setenv("NCCL_TOPO_DUMP_FILE", tmp, 1);
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_build(&env, ranks, 3, 0, NULL, 0, &s), ncclSuccess);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_gpu_count(s), 5);
  int g;
  CHECK_EQ_INT(topo_rank_to_gpu(s, 5, &g), ncclSuccess);
  CHECK_EQ_INT(s->nodes[TOPO_NODE_GPU][g].id, 0x19000);
  CHECK_EQ_INT(topo_rank_to_gpu(s, 7, &g), ncclSuccess);
  CHECK_EQ_INT(s->nodes[TOPO_NODE_GPU][g].id, 0x03000);
  /* The file's NVLinks are kept, not re-detected. */
  int g5, g6;
  CHECK_EQ_INT(topo_rank_to_gpu(s, 5, &g5), ncclSuccess);
  CHECK_EQ_INT(topo_rank_to_gpu(s, 6, &g6), ncclSuccess);
  CHECK_EQ_INT(topo_path(s, TOPO_NODE_GPU, g5, TOPO_NODE_GPU, g6)->type, TOPO_PATH_NVL);
  CHECK_EQ_INT(topo_gpu_nvlink_count(s, g5), 18);
  /* The dump is the merged tree. */
  topo_system_t* d = NULL;
  CHECK_EQ_INT(topo_system_from_xml_file(tmp, &d), ncclSuccess);
  if (d) {
    char *a = format(s), *b = format(d);
    CHECK_EQ_STR(a, b);
    free(a);
    free(b);
  }
  unlink(tmp);
  topo_system_free(d);
  topo_system_free(s);
}

/* ---- Network device placement -------------------------------------------------------------- */

/* two-nic-switches.xml: CPU 0 has switch A with GPU 0 and a two-port NIC (nets 2 and 0: device
 * order differs from tree order) and switch B with GPU 1 and NIC net 1; CPU 1 has GPU 2. */
static void test_rank_nets(void) {
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_from_xml_file(data_path("two-nic-switches.xml"), &s), ncclSuccess);
  if (s == NULL) return;
  CHECK_EQ_INT(topo_net_count(s), 3);
  int devs[8], n = -1, type = -1;
  /* GPU 0: both ports of the NIC in its switch, in device order. */
  CHECK_EQ_INT(topo_rank_nets(s, 0, devs, 8, &n, &type), ncclSuccess);
  CHECK_EQ_INT(n, 2);
  if (n == 2) {
    CHECK_EQ_INT(devs[0], 0);
    CHECK_EQ_INT(devs[1], 2);
  }
  CHECK_EQ_INT(type, TOPO_PATH_PIX);
  /* GPU 1: its own switch's NIC only. */
  CHECK_EQ_INT(topo_rank_nets(s, 1, devs, 8, &n, &type), ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(devs[0], 1);
  CHECK_EQ_INT(type, TOPO_PATH_PIX);
  /* GPU 2, across the CPUs from every NIC: all three, equally far. */
  CHECK_EQ_INT(topo_rank_nets(s, 2, devs, 8, &n, &type), ncclSuccess);
  CHECK_EQ_INT(n, 3);
  if (n == 3) {
    CHECK_EQ_INT(devs[0], 0);
    CHECK_EQ_INT(devs[1], 1);
    CHECK_EQ_INT(devs[2], 2);
  }
  CHECK_EQ_INT(type, TOPO_PATH_SYS);
  /* Room for one: one. */
  CHECK_EQ_INT(topo_rank_nets(s, 0, devs, 1, &n, NULL), ncclSuccess);
  CHECK_EQ_INT(n, 1);
  /* A rank with no GPU here. */
  CHECK_EQ_INT(topo_rank_nets(s, 7, devs, 8, &n, NULL), ncclInvalidArgument);
  CHECK_EQ_INT(n, 0);
  topo_system_free(s);
  /* A GPU whose only NIC is across the CPUs: that NIC (SYS). */
  s = sys_from_text(pcie_system("AuthenticAMD"));
  CHECK_TRUE(s != NULL);
  if (s) {
    CHECK_EQ_INT(topo_rank_nets(s, 4, devs, 8, &n, &type), ncclSuccess);
    CHECK_EQ_INT(n, 1); /* the one NIC of that system, far away but the only one */
    CHECK_EQ_INT(type, TOPO_PATH_SYS);
    topo_system_free(s);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test-topo DATA_DIR\n");
    return 2;
  }
  data_dir = argv[1];
  test_busid();
  test_levels();
  /* Every fixture in the folder loads, builds a model and round-trips (the graph module's
   * fixtures included, whoever adds them). */
  DIR* d = opendir(data_dir);
  CHECK_TRUE(d != NULL);
  int nfix = 0;
  for (struct dirent* e; d != NULL && (e = readdir(d)) != NULL;) {
    size_t n = strlen(e->d_name);
    if (n < 5 || strcmp(e->d_name + n - 4, ".xml") != 0) continue;
    test_roundtrip_file(e->d_name);
    nfix++;
  }
  if (d) closedir(d);
  CHECK_TRUE(nfix >= 1);
  test_unknown_kept();
  test_malformed();
  test_truncated();
  test_h200();
  test_pcie_paths_and_levels();
  test_rank_nets();
  test_detect_sysfs();
  test_detect_flat();
  test_file_merge();
  return check_finish("topo");
}
