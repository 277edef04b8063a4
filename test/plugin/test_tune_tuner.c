/*
 * The tuner plugin inside core/tune: functional mock tuners of every ABI version (mock_tuner.c,
 * libnccl-tuner-fn2..6.so) forcing algorithms, protocols, channel counts and chunks, and Choir
 * honouring them (or ignoring what it must); init failing fails tune_create; finalize once per
 * communicator; the library found under its default name; Choir's own tuner-default with a CSV
 * rule changing Choir's choice, as the TUNING INFO line shows.
 *   test-tune-tuner <dir of the mocks> <libnccl-tuner-default.so or "">
 * Each case runs in a child process (knobs are read once per process).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fork_case.h"
#include "kernels.h"
#include "log_file.h"
#include "tune.h"
#include "tune_internal.h"

/* mock_tuner.c's record, same layout. */
typedef struct mock_tuner_state {
  int inits, finalizes, coll_calls, chunk_calls;
  size_t nranks, nnodes;
  uint64_t comm_id;
  int nch_in;
  int num_algo, num_proto;
  float table_in[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS];
  ncclTunerConstants_v5_t consts;
  ncclNvlDomainInfo_v5_t nvl;
  int chunk_algo, chunk_proto, chunk_nch;
  size_t chunk_in;
} mock_tuner_state_t;

static const char* mock_dir;
static const char* default_lib;
static int version; /* of the mock the current case uses */

/* 4 x H200 over NVLink, every protocol: the model picks LL for 8 B and Simple for 1 GiB. */
static tune_topo_t topo_nvlink(void) {
  tune_topo_t t;
  memset(&t, 0, sizeof(t));
  t.nranks = 4;
  t.nnodes = 1;
  t.local_ranks = 4;
  t.gpu_share = 1;
  t.link_intra = t.link_inter = TUNE_LINK_NVLINK;
  t.ring_nchannels = 16;
  t.bw_intra = 20.6f;
  t.cuda_arch = 90;
  t.proto_mask = 7;
  t.slot_bytes[NCCL_PROTO_LL] = 65536;
  t.slot_bytes[NCCL_PROTO_LL128] = 614400;
  t.slot_bytes[NCCL_PROTO_SIMPLE] = 524288;
  t.algo_mask = 1u << NCCL_ALGO_RING;
  return t;
}
#define MIB (1ull << 20)
#define GIB ((uint64_t)1 << 30)

static void env_base(void) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  snprintf(log_path, sizeof(log_path), "/tmp/choir-test-tune-tuner-%d.log", (int)getpid());
  unlink(log_path);
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,TUNING", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
}

/* Selects mock version v, and holds a reference to it so that its record outlives Choir's. */
static mock_tuner_state_t* use_mock(int v) {
  static char path[512];
  snprintf(path, sizeof(path), "%s/libnccl-tuner-fn%d.so", mock_dir, v);
  setenv("NCCL_TUNER_PLUGIN", path, 1);
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECK_MSG(h != NULL, "dlopen %s: %s", path, dlerror());
  if (h == NULL) _exit(1);
  mock_tuner_state_t* s = dlsym(h, "mock_tuner_state");
  CHECK_TRUE(s != NULL);
  if (s == NULL) _exit(1);
  return s;
}

/* tune_create on the NVLink fixture with the mock the case set up; NULL after a failed check. */
static tune_t* tune_nvlink(void) {
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  return t;
}

static void choose(tune_t* t, ncclFunc_t coll, uint64_t n, tune_choice_t* c) {
  memset(c, 0, sizeof(*c));
  CHECK_EQ_INT(tune_choose(t, coll, n, 1, c), ncclSuccess);
}

/* ---- Per version ---------------------------------------------------------------------------- */

/* Ring/LL on 3 channels for 1 GiB (the model: Simple on 16): honoured; and what the mock saw. */
static void case_force_ll_3(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(version);
  setenv("MOCK_TUNER_FORCE", "ring,ll,3", 1);
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 0xc0ffee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  CHECK_EQ_INT(s->inits, 1);
  CHECK_EQ_INT(s->nranks, 4);
  CHECK_EQ_INT(s->nnodes, 1);
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(c.algo, NCCL_ALGO_RING);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_LL);
  CHECK_EQ_INT(c.nchannels, 3);
  CHECK_EQ_INT(c.nthreads, KERN_NTHREADS);
  CHECK_TRUE(c.chunk_bytes == kern_proto_step_capacity(NCCL_PROTO_LL, 65536));
  /* The estimate is the model's time for what was chosen: LL on 3 channels. */
  CHECK_TRUE(c.time_us > tune_estimate_us(t, ncclFuncAllReduce, GIB));
  CHECK_EQ_INT(s->coll_calls, 1);
  CHECK_EQ_INT(s->nch_in, 0);
  if (version >= 3) {
    /* The table: the ring's three protocols priced, everything else -1. */
    CHECK_EQ_INT(s->num_algo, NCCL_NUM_ALGORITHMS);
    CHECK_EQ_INT(s->num_proto, NCCL_NUM_PROTOCOLS);
    for (int a = 0; a < NCCL_NUM_ALGORITHMS; a++)
      for (int p = 0; p < NCCL_NUM_PROTOCOLS; p++)
        CHECK_MSG(a == NCCL_ALGO_RING ? s->table_in[a][p] > 0 : s->table_in[a][p] == -1.0f,
                  "table[%d][%d] = %f", a, p, (double)s->table_in[a][p]);
    CHECK_TRUE(s->table_in[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] <
               s->table_in[NCCL_ALGO_RING][NCCL_PROTO_LL]);
  }
  if (version >= 5) {
    CHECK_TRUE(s->comm_id == 0xc0ffee);
    CHECK_EQ_INT(s->nvl.nNvlDomains, 1);
    CHECK_EQ_INT(s->nvl.maxRanksPerNvlDomain, 4);
    /* The constants: the table's, in NCCL's shape. */
    CHECK_TRUE(s->consts.baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_LL] > 6.59 &&
               s->consts.baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_LL] < 6.61);
    CHECK_TRUE(s->consts.hwLatencies[NCCL_HW_NET][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] == 14.0);
    CHECK_TRUE(s->consts.llMaxBws[NCCL_HOPPER_COMPCAP_IDX][0] == 141.0);
    CHECK_TRUE(s->consts.baseLatencies[NCCL_ALGO_TREE][NCCL_PROTO_LL] == 0.0);
  }
  CHECK_CONTAINS(log_text(), "TUNE: AllReduce 1073741824 bytes: Ring/LL 3 channels");
  CHECK_CONTAINS(log_text(), "(tuner: 'MockFn_v");
  CHECK_CONTAINS(log_text(), "' chose Ring/LL, channels 3, knob: -)");
  tune_destroy(t);
  CHECK_EQ_INT(s->finalizes, 1);
  unlink(log_path);
}

/* The other protocols, and a channel count alone (which caps; small sizes still use fewer). */
static void case_force_protocols(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(version);
  setenv("MOCK_TUNER_FORCE", version == 2 ? "ring,ll128,-" : "-,ll128,-", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  for (uint64_t n = 8; n <= GIB; n *= 32) {
    choose(t, ncclFuncAllGather, n, &c);
    CHECK_MSG(c.proto == NCCL_PROTO_LL128, "%llu: %s", (unsigned long long)n,
              tune_proto_name(c.proto));
    CHECK_TRUE(c.chunk_bytes % 16 == 0 &&
               c.chunk_bytes <= kern_proto_step_capacity(NCCL_PROTO_LL128, 614400));
  }
  tune_destroy(t);
  CHECK_EQ_INT(s->finalizes, 1);
  CHECK_EQ_INT(s->coll_calls, 6);
}

static void case_force_simple_small(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_FORCE", "ring,simple,-", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncBroadcast, 8, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_SIMPLE);
  CHECK_EQ_INT(c.nchannels, 1);
  tune_destroy(t);
}

static void case_force_channels(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_FORCE", "-,-,7", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncReduceScatter, GIB, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_SIMPLE);
  CHECK_EQ_INT(c.nchannels, 7);
  CHECK_CONTAINS(log_text(), "' kept Ring/Simple, channels 7, knob: -)");
  /* More than the ring has: clamped. */
  tune_destroy(t);
  unlink(log_path);
}

static void case_force_channels_clamped(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_FORCE", "-,-,500", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(c.nchannels, 16);
  tune_destroy(t);
  unlink(log_path);
}

/* Tree channels made (2 hosts of 4, the network between): a tuner forcing Tree/Simple on 2
 * channels is honoured, the table it saw priced the tree's Simple and LL; LL128 (not made on this
 * network: proto_mask) is ignored like any unusable entry. */
static void case_force_tree(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(version);
  setenv("MOCK_TUNER_FORCE", "tree,simple,2", 1);
  tune_topo_t topo = topo_nvlink();
  topo.nranks = 8;
  topo.nnodes = 2;
  topo.link_inter = TUNE_LINK_NET;
  topo.bw_inter = 12.5f;
  topo.proto_mask = 5; /* LL and Simple over the network */
  topo.slot_bytes[NCCL_PROTO_LL128] = 0;
  topo.algo_mask |= 1u << NCCL_ALGO_TREE;
  topo.tree_nchannels = 4;
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 0x7ee, 0, &t), ncclSuccess);
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, 8, &c);
  CHECK_EQ_INT(c.algo, NCCL_ALGO_TREE);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_SIMPLE);
  CHECK_EQ_INT(c.nchannels, 1); /* 8 bytes: the size's own count, within the tuner's 2 */
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(c.algo, NCCL_ALGO_TREE);
  CHECK_EQ_INT(c.nchannels, 2);
  CHECK_TRUE(c.chunk_bytes % 16 == 0 &&
             c.chunk_bytes <= kern_proto_step_capacity(NCCL_PROTO_SIMPLE, 524288));
  if (version >= 3) {
    CHECK_TRUE(s->table_in[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] > 0);
    CHECK_TRUE(s->table_in[NCCL_ALGO_TREE][NCCL_PROTO_LL] > 0);
    CHECK_TRUE(s->table_in[NCCL_ALGO_TREE][NCCL_PROTO_LL128] == -1.0f);
  }
  /* Broadcast has no tree: the tuner's Tree is ignored there. */
  choose(t, ncclFuncBroadcast, GIB, &c);
  CHECK_EQ_INT(c.algo, NCCL_ALGO_RING);
  CHECK_CONTAINS(log_text(), "TUNE: AllReduce 1073741824 bytes: Tree/Simple 2 channels");
  CHECK_CONTAINS(log_text(), "' chose Tree/Simple, channels 2");
  tune_destroy(t);
  unlink(log_path);
}

/* One host, no tree channels: the tuner's Tree is ignored (with an INFO), the model's choice
 * stands. */
static void case_force_unusable(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_FORCE", "tree,simple,-", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, 8, &c);
  CHECK_EQ_INT(c.algo, NCCL_ALGO_RING);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_LL);
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_SIMPLE);
  CHECK_CONTAINS(log_text(), version == 2 ? "chose Tree/Simple for AllReduce, which is not usable "
                                            "here; ignored"
                                          : "set Tree/Simple to 0 for AllReduce, which the core "
                                            "marked unusable; ignored");
  CHECK_CONTAINS(log_text(), "' kept Ring/LL, knob: -)");
  tune_destroy(t);
  unlink(log_path);
}

/* init fails: tune_create fails with the tuner's error and says so. */
static void case_init_fails(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(version);
  setenv("MOCK_TUNER_INIT_FAIL", "1", 1);
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclInternalError);
  CHECK_TRUE(t == NULL);
  CHECK_EQ_INT(s->inits, 1);
  CHECK_EQ_INT(s->finalizes, 0);
  CHECK_CONTAINS(err_last(), "init failed (internal error");
  CHECK_CONTAINS(err_last(), "set NCCL_TUNER_PLUGIN=none");
  unlink(log_path);
}

/* getCollInfo fails: tune_choose returns its error. */
static void case_coll_fails(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_COLL_FAIL", "1", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  err_clear_last();
  CHECK_EQ_INT(tune_choose(t, ncclFuncAllReduce, 4096, 1, &c), ncclInvalidArgument);
  CHECK_CONTAINS(err_last(), "getCollInfo failed (invalid argument");
  tune_destroy(t);
  unlink(log_path);
}

/* Two communicators: one library, two contexts, two finalizes. */
static void case_two_comms(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(version);
  tune_topo_t topo = topo_nvlink();
  tune_t *a = NULL, *b = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &a), ncclSuccess);
  CHECK_EQ_INT(tune_create(&topo, 2, 0, &b), ncclSuccess);
  CHECK_EQ_INT(s->inits, 2);
  tune_destroy(a);
  CHECK_EQ_INT(s->finalizes, 1);
  tune_destroy(b);
  CHECK_EQ_INT(s->finalizes, 2);
  /* One load for both: the loader's line appears once. */
  const char* text = log_text();
  const char* first = strstr(text, "TUNER/Plugin: using 'MockFn_v");
  CHECK_TRUE(first != NULL && strstr(first + 1, "TUNER/Plugin: using 'MockFn_v") == NULL);
  unlink(log_path);
}

/* The tuner forbids everything: the model's choice stands, the line says so. */
static void case_forbid_all(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_FORCE", "none", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, 8, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_LL);
  CHECK_CONTAINS(log_text(), "' left nothing usable, ignored, knob: -)");
  tune_destroy(t);
  unlink(log_path);
}

/* v2 answers a pair or nothing: a protocol alone is ignored, the model's choice stands. */
static void case_v2_half_answer(void) {
  env_base();
  use_mock(2);
  setenv("MOCK_TUNER_FORCE", "-,ll128,-", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_SIMPLE);
  CHECK_CONTAINS(log_text(),
                 "'MockFn_v2' answered algorithm -1 protocol 1 for AllReduce: not a "
                 "pair, ignored");
  tune_destroy(t);
  unlink(log_path);
}

/* ---- v5 / v6 only ---------------------------------------------------------------------------- */

/* The constants a v5 tuner writes are the model's: LL made expensive, 8 B takes another. */
static void case_consts_changed(void) {
  env_base();
  use_mock(version);
  setenv("MOCK_TUNER_BASE_LL", "1000", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, 8, &c);
  CHECK_TRUE(c.proto != NCCL_PROTO_LL);
  tune_destroy(t);
  unlink(log_path);
}

/* A change of NCCL's PCI row applies to the links it stands for: PCIe and shm (NCCL prices shm
 * with its PCI latencies), and not to NVLink. 4 ranks, AllReduce: 6 steps of 5.7 -> 105.7 us. */
static void case_consts_pci_row(void) {
  env_base();
  use_mock(version);
  tune_topo_t topo = topo_nvlink();
  topo.proto_mask = 1u << NCCL_PROTO_SIMPLE; /* the estimate is Simple's, before and after */
  topo.slot_bytes[NCCL_PROTO_LL] = topo.slot_bytes[NCCL_PROTO_LL128] = 0;
  float before[3];
  tune_link_t links[3] = {TUNE_LINK_PCIE, TUNE_LINK_SHM, TUNE_LINK_NVLINK};
  for (int i = 0; i < 3; i++) {
    topo.link_intra = topo.link_inter = links[i];
    tune_t* t = NULL;
    CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
    if (t == NULL) return;
    before[i] = tune_estimate_us(t, ncclFuncAllReduce, 32 * MIB); /* Simple, one round */
    tune_destroy(t);
  }
  setenv("MOCK_TUNER_PCI_SIMPLE", "105.7", 1);
  for (int i = 0; i < 3; i++) {
    topo.link_intra = topo.link_inter = links[i];
    tune_t* t = NULL;
    CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
    if (t == NULL) return;
    float after = tune_estimate_us(t, ncclFuncAllReduce, 32 * MIB);
    float want = i < 2 ? before[i] + 600.0f : before[i];
    CHECK_MSG(after > want - 0.5f && after < want + 0.5f, "link %d: %f -> %f, want %f",
              (int)links[i], (double)before[i], (double)after, (double)want);
    tune_destroy(t);
  }
  unlink(log_path);
}

/* v6 getChunkSize: asked with the final (algo, proto, channels); clamped and rounded. */
static void chunk_case(const char* value, uint32_t want) {
  env_base();
  mock_tuner_state_t* s = use_mock(6);
  setenv("MOCK_TUNER_CHUNK", value, 1);
  setenv("MOCK_TUNER_FORCE", "ring,simple,5", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(s->chunk_calls, 1);
  CHECK_EQ_INT(s->chunk_algo, NCCL_ALGO_RING);
  CHECK_EQ_INT(s->chunk_proto, NCCL_PROTO_SIMPLE);
  CHECK_EQ_INT(s->chunk_nch, 5);
  CHECK_EQ_INT(s->chunk_in, 524288);
  CHECK_EQ_INT(c.chunk_bytes, want);
  char line[96];
  snprintf(line, sizeof(line), "channels 5, chunk %s, knob: -)", value);
  CHECK_CONTAINS(log_text(), line);
  tune_destroy(t);
  unlink(log_path);
}
static void case_chunk_v6(void) { chunk_case("100008", 100000); }
static void case_chunk_v6_big(void) { chunk_case("1073741824", 524288); }
static void case_chunk_v6_tiny(void) { chunk_case("3", 16); }

/* A v6 table without getChunkSize, and older versions: the model's chunk, nothing asked. */
static void case_chunk_not_asked(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(5);
  setenv("MOCK_TUNER_CHUNK", "4096", 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(s->chunk_calls, 0);
  CHECK_EQ_INT(c.chunk_bytes, 524288);
  tune_destroy(t);
  unlink(log_path);
}

/* ---- Finding the library --------------------------------------------------------------------- */

/* Unset: the default name, libnccl-tuner.so, in Choir's plugin directory. */
static void case_default_name(void) {
  env_base();
  mock_tuner_state_t* s = use_mock(6);
  unsetenv("NCCL_TUNER_PLUGIN");
  char dir[] = "/tmp/choir-tune-dir-XXXXXX";
  CHECK_TRUE(mkdtemp(dir) != NULL);
  char link[600], target[512];
  snprintf(link, sizeof(link), "%s/libnccl-tuner.so", dir);
  snprintf(target, sizeof(target), "%s/libnccl-tuner-fn6.so", mock_dir);
  CHECK_EQ_INT(symlink(target, link), 0);
  setenv("CHOIR_PLUGIN_DIR", dir, 1);
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  CHECK_MSG(s->inits == 1, "%d inits; log:\n%s", s->inits, log_text());
  tune_destroy(t);
  CHECK_EQ_INT(s->finalizes, 1);
  unlink(link);
  rmdir(dir);
  unlink(log_path);
}

/* Unset and absent: no tuner, and no WARN. "none": no tuner. A user-named library that cannot be
 * loaded: a WARN from the loader, and the communicator goes on without a tuner (as in NCCL). */
static void case_no_tuner(void) {
  env_base();
  unsetenv("NCCL_TUNER_PLUGIN");
  setenv("CHOIR_PLUGIN_DIR", "/nonexistent", 1);
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  CHECK_EQ_STR(err_last(), "");
  CHECK_CONTAINS(log_text(), "TUNER/Plugin: no tuner plugin found; the core's model decides");
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, 8, &c);
  CHECK_CONTAINS(log_text(), "(tuner: -, knob: -)");
  tune_destroy(t);
  unlink(log_path);
}
static void case_none(void) {
  env_base();
  setenv("NCCL_TUNER_PLUGIN", "NONE", 1);
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  CHECK_CONTAINS(log_text(), "no tuner plugin (NCCL_TUNER_PLUGIN=none)");
  tune_destroy(t);
  unlink(log_path);
}
static void case_named_missing(void) {
  env_base();
  setenv("NCCL_TUNER_PLUGIN", "/nonexistent/libnccl-tuner-x.so", 1);
  tune_topo_t topo = topo_nvlink();
  tune_t* t = NULL;
  err_clear_last();
  CHECK_EQ_INT(tune_create(&topo, 1, 0, &t), ncclSuccess);
  CHECK_CONTAINS(err_last(), "/nonexistent/libnccl-tuner-x.so");
  CHECK_CONTAINS(log_text(), "no tuner plugin could be loaded");
  tune_destroy(t);
  unlink(log_path);
}

/* ---- Choir's tuner-default ---------------------------------------------------------------------
 */

static void case_tuner_default_rule(void) {
  if (default_lib == NULL || default_lib[0] == '\0') {
    CHECK_SKIPPED("tuner-default not built");
    return;
  }
  env_base();
  char conf[] = "/tmp/choir-tune-conf-XXXXXX";
  int fd = mkstemp(conf);
  CHECK_TRUE(fd >= 0);
  FILE* f = fdopen(fd, "w");
  fprintf(f,
          "# big allreduces on LL over 4 channels, against the model's Simple\n"
          "allreduce,1048576,-1,ring,ll,4,-1,-1\n"
          "allgather,0,-1,-1,-1,-1,-1,-1,-1,-1,65536\n");
  fclose(f);
  setenv("NCCL_TUNER_PLUGIN", default_lib, 1);
  setenv("NCCL_TUNER_CONFIG_FILE", conf, 1);
  tune_t* t = tune_nvlink();
  if (t == NULL) return;
  tune_choice_t c;
  choose(t, ncclFuncAllReduce, GIB, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_LL);
  CHECK_EQ_INT(c.nchannels, 4);
  CHECK_CONTAINS(log_text(), "TUNE: AllReduce 1073741824 bytes: Ring/LL 4 channels 512 threads");
  CHECK_CONTAINS(log_text(), "(tuner: 'Choir-default' chose Ring/LL, channels 4, knob: -)");
  /* Below the rule's range: the model's LL for 8 B, untouched. */
  choose(t, ncclFuncAllReduce, 8, &c);
  CHECK_CONTAINS(log_text(), "(tuner: 'Choir-default' kept Ring/LL, knob: -)");
  /* The chunk rule (v6 getChunkSize). */
  choose(t, ncclFuncAllGather, GIB, &c);
  CHECK_EQ_INT(c.proto, NCCL_PROTO_SIMPLE);
  CHECK_EQ_INT(c.chunk_bytes, 65536);
  CHECK_CONTAINS(log_text(), "(tuner: 'Choir-default' kept Ring/Simple, chunk 65536, knob: -)");
  tune_destroy(t);
  unlink(conf);
  unlink(log_path);
}

typedef struct {
  const char* name;
  void (*fn)(void);
} tcase_t;

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <dir of libnccl-tuner-fnN.so> [libnccl-tuner-default.so]\n",
            argv[0]);
    return 2;
  }
  /* Absolute: a case links to the mocks from another directory. */
  static char dir[4096];
  if (realpath(argv[1], dir) == NULL) {
    fprintf(stderr, "%s: %s: cannot resolve\n", argv[0], argv[1]);
    return 2;
  }
  mock_dir = dir;
  default_lib = argc > 2 ? argv[2] : NULL;
  static const tcase_t per_version[] = {
      {"force_ll_3", case_force_ll_3},
      {"force_protocols", case_force_protocols},
      {"force_simple_small", case_force_simple_small},
      {"force_channels", case_force_channels},
      {"force_channels_clamped", case_force_channels_clamped},
      {"force_unusable", case_force_unusable},
      {"force_tree", case_force_tree},
      {"init_fails", case_init_fails},
      {"coll_fails", case_coll_fails},
      {"two_comms", case_two_comms},
  };
  for (version = 2; version <= 6; version++)
    for (size_t i = 0; i < sizeof(per_version) / sizeof(per_version[0]); i++) {
      char name[64];
      snprintf(name, sizeof(name), "v%d_%s", version, per_version[i].name);
      fork_case(name, per_version[i].fn);
    }
  fork_case("v2_half_answer", case_v2_half_answer);
  /* v2 answers a pair: it cannot forbid entries. */
  for (version = 3; version <= 6; version++) fork_case("forbid_all", case_forbid_all);
  for (version = 5; version <= 6; version++) fork_case("consts_changed", case_consts_changed);
  for (version = 5; version <= 6; version++) fork_case("consts_pci_row", case_consts_pci_row);
  fork_case("chunk_v6", case_chunk_v6);
  fork_case("chunk_v6_big", case_chunk_v6_big);
  fork_case("chunk_v6_tiny", case_chunk_v6_tiny);
  fork_case("chunk_not_asked", case_chunk_not_asked);
  fork_case("default_name", case_default_name);
  fork_case("no_tuner", case_no_tuner);
  fork_case("none", case_none);
  fork_case("named_missing", case_named_missing);
  fork_case("tuner_default_rule", case_tuner_default_rule);
  return check_finish("test-tune-tuner");
}
