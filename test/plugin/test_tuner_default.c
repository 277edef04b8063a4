/*
 * plugins/tuner-default through its ABI: dlopen the built library (argv[1]), take its v6 and v5
 * tables, write config files to a temporary folder, and check what getCollInfo and getChunkSize
 * do to a real float[7][3] cost table; bad files, missing files, several communicators from
 * several threads; and that Choir's own loader finds it at v6 (CHOIR_PLUGIN_DIR points at it).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capture_log.h"
#include "check.h"
#include "nccl_tuner.h"
#include "plugin.h"

#define NA NCCL_NUM_ALGORITHMS
#define NP NCCL_NUM_PROTOCOLS
#define IGN ((float)NCCL_ALGO_PROTO_IGNORE)

static const ncclTuner_v6_t* v6;
static const ncclTuner_v5_t* v5;
static char tmp_dir[256];

/* ---- the plugin's log: test_log, log_buf, log_clear (test/harness/capture_log.h) ---- */

/* ---- helpers ---- */

static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  if (f == NULL) {
    perror(path);
    exit(1);
  }
  fputs(text, f);
  fclose(f);
}

/* Writes `text` to <tmp>/<name> and points NCCL_TUNER_CONFIG_FILE at it. */
static const char* use_config(const char* name, const char* text) {
  static char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmp_dir, name);
  write_file(path, text);
  setenv("NCCL_TUNER_CONFIG_FILE", path, 1);
  return path;
}

/* A cost table with distinct usable entries (10 + 3a + p) and some disabled ones. */
static void table_fill(float t[NA][NP]) {
  for (int a = 0; a < NA; a++)
    for (int p = 0; p < NP; p++) t[a][p] = 10.0f + 3.0f * (float)a + (float)p;
}

static void* init6(size_t n_ranks, size_t n_nodes) {
  void* ctx = NULL;
  ncclTunerConstants_v6_t constants;
  memset(&constants, 0, sizeof(constants));
  ncclNvlDomainInfo_v6_t nvl = {1, (int)n_ranks, (int)n_ranks};
  ncclResult_t res = v6->init(&ctx, 0x1234abcdULL, n_ranks, n_nodes, test_log, &nvl, &constants);
  CHECK_EQ_INT(res, ncclSuccess);
  CHECK_TRUE(ctx != NULL);
  return ctx;
}

typedef struct {
  int algo, proto; /* the entry expected at 0.0, or -1 for "table unchanged" */
  int channels;    /* expected *nChannels */
} expect_t;

/* Runs getCollInfo on a fresh table (optionally with entries disabled) and checks that exactly
 * the expected entry changed, to 0.0, and the channel count. */
static void check_coll(const ncclTuner_v6_t* t, void* ctx, ncclFunc_t coll, size_t bytes,
                       int pipe_ops, int reg_buff, const int (*disabled)[2], int ndisabled,
                       expect_t want, int line) {
  float table[NA][NP], orig[NA][NP];
  table_fill(table);
  for (int i = 0; i < ndisabled; i++) table[disabled[i][0]][disabled[i][1]] = IGN;
  memcpy(orig, table, sizeof(table));
  int nch = 0;
  CHECK_EQ_INT(t->getCollInfo(ctx, coll, bytes, pipe_ops, (float**)table, NA, NP, reg_buff, &nch),
               ncclSuccess);
  int bad = 0;
  for (int a = 0; a < NA; a++) {
    for (int p = 0; p < NP; p++) {
      float expected = (a == want.algo && p == want.proto) ? 0.0f : orig[a][p];
      if (table[a][p] != expected) bad++;
    }
  }
  if (bad != 0 || nch != want.channels)
    fprintf(stderr,
            "  (from line %d: coll %d, %zu bytes, pipeOps %d, regBuff %d: %d entries "
            "differ, channels %d; wanted entry [%d][%d] at 0 (-1: none), channels %d)\n",
            line, (int)coll, bytes, pipe_ops, reg_buff, bad, nch, want.algo, want.proto,
            want.channels);
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(nch, want.channels);
}

#define COLL(ctx, coll, bytes, ops, reg, a, p, ch) \
  check_coll(v6, ctx, coll, bytes, ops, reg, NULL, 0, (expect_t){a, p, ch}, __LINE__)
#define UNCHANGED(ctx, coll, bytes, ops, reg) COLL(ctx, coll, bytes, ops, reg, -1, -1, 0)

/* ---- the tests ---- */

static void test_symbols(void* lib) {
  CHECK_EQ_STR(v6->name, "Choir-default");
  CHECK_EQ_STR(v5->name, "Choir-default");
  CHECK_TRUE(v6->init != NULL && v6->getCollInfo != NULL && v6->finalize != NULL &&
             v6->getChunkSize != NULL);
  CHECK_TRUE(v5->init != NULL && v5->getCollInfo != NULL && v5->finalize != NULL);
  /* Same behaviour: v5 shares the v6 entries (only init differs, to know the version). */
  CHECK_TRUE(v5->getCollInfo == v6->getCollInfo && v5->finalize == v6->finalize);
  /* Nothing else is visible. */
  CHECK_TRUE(dlsym(lib, "ncclTunerPlugin_v4") == NULL);
  CHECK_TRUE(dlsym(lib, "tun_config_read") == NULL);
  CHECK_TRUE(dlsym(lib, "tun_coll_name") == NULL);
}

static const char* const rules_text =
    "# Choir default tuner test rules\n"
    "\n"
    "allreduce,0,65536,ring,ll,4,-1,-1\n"
    "   allreduce , 65537 , 1048576 , tree , ll128 , -1 , -1 , -1   # spaces and a comment\n"
    "allgather,0,-1,ring,simple,-1,2,16\n"
    "broadcast,0,1024,nvls,simple,8,-1,-1\n"
    "broadcast,0,1024,ring,ll,2,-1,-1\n"
    "reduce,0,1000,tree,simple,-1,-1,8,1\n"
    "reduce,0,1000,ring,simple,-1,-1,8,2,1\r\n"
    "reducescatter,100,200,-1,ll,-1,-1,-1\n"
    "reducescatter,300,400,pat,-1,3,-1,-1\n"
    "reducescatter,500,600,-1,-1,5,-1,-1\n"
    "AllReduce,4194304,4194304,NVLS_TREE,Simple,-1,1,-1\n"
    "reduce,2000,3000,pat,ll,-1,-1,-1\n";

static void test_matching(void) {
  const char* path = use_config("rules.conf", rules_text);
  log_clear();
  void* ctx = init6(8, 1);
  /* 11 of 12 rules fit 8 ranks on 1 node (the allgather rule wants 16 ranks on 2 nodes). */
  CHECK_CONTAINS(log_buf, "11 of 12 rules from");
  CHECK_CONTAINS(log_buf, path);

  /* allreduce: inclusive ranges, first match, channels applied or left at 0. */
  COLL(ctx, ncclFuncAllReduce, 8, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_LL, 4);
  COLL(ctx, ncclFuncAllReduce, 0, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_LL, 4);
  COLL(ctx, ncclFuncAllReduce, 65536, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_LL, 4);
  COLL(ctx, ncclFuncAllReduce, 65537, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_LL128, 0);
  COLL(ctx, ncclFuncAllReduce, 1048576, 3, 1, NCCL_ALGO_TREE, NCCL_PROTO_LL128, 0);
  UNCHANGED(ctx, ncclFuncAllReduce, 1048577, 1, 0);
  /* Case-insensitive names; nNodes 1 matches. */
  COLL(ctx, ncclFuncAllReduce, 4194304, 1, 0, NCCL_ALGO_NVLS_TREE, NCCL_PROTO_SIMPLE, 0);
  UNCHANGED(ctx, ncclFuncAllReduce, 4194305, 1, 0);

  /* allgather: its only rule is for another communicator shape. */
  UNCHANGED(ctx, ncclFuncAllGather, 100, 1, 0);

  /* broadcast: nvls/simple while usable, else the next rule as a fallback. */
  COLL(ctx, ncclFuncBroadcast, 512, 1, 0, NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE, 8);
  const int nvls_off[][2] = {{NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE}};
  check_coll(v6, ctx, ncclFuncBroadcast, 512, 1, 0, nvls_off, 1,
             (expect_t){NCCL_ALGO_RING, NCCL_PROTO_LL, 2}, __LINE__);
  /* Both disabled: nothing is revived, nothing else changes, channels stay 0. */
  const int both_off[][2] = {{NCCL_ALGO_NVLS, NCCL_PROTO_SIMPLE}, {NCCL_ALGO_RING, NCCL_PROTO_LL}};
  check_coll(v6, ctx, ncclFuncBroadcast, 512, 1, 0, both_off, 2, (expect_t){-1, -1, 0}, __LINE__);

  /* reduce: nRanks 8 matches; numPipeOps and regBuff conditions. */
  COLL(ctx, ncclFuncReduce, 10, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, 0);
  COLL(ctx, ncclFuncReduce, 10, 1, 1, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, 0);
  COLL(ctx, ncclFuncReduce, 10, 2, 1, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 0);
  UNCHANGED(ctx, ncclFuncReduce, 10, 2, 0);
  UNCHANGED(ctx, ncclFuncReduce, 10, 3, 1);
  UNCHANGED(ctx, ncclFuncReduce, 1001, 1, 0);

  /* reducescatter: -1 algorithm = the cheapest usable algorithm for LL (ring here once tree is
   * disabled); -1 protocol = the cheapest usable protocol of PAT; -1/-1 = channels only. */
  COLL(ctx, ncclFuncReduceScatter, 150, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_LL, 0);
  const int tree_ll_off[][2] = {{NCCL_ALGO_TREE, NCCL_PROTO_LL}};
  check_coll(v6, ctx, ncclFuncReduceScatter, 150, 1, 0, tree_ll_off, 1,
             (expect_t){NCCL_ALGO_RING, NCCL_PROTO_LL, 0}, __LINE__);
  COLL(ctx, ncclFuncReduceScatter, 350, 1, 0, NCCL_ALGO_PAT, NCCL_PROTO_LL, 3);
  const int pat_ll_off[][2] = {{NCCL_ALGO_PAT, NCCL_PROTO_LL}};
  check_coll(v6, ctx, ncclFuncReduceScatter, 350, 1, 0, pat_ll_off, 1,
             (expect_t){NCCL_ALGO_PAT, NCCL_PROTO_LL128, 3}, __LINE__);
  COLL(ctx, ncclFuncReduceScatter, 550, 1, 0, -1, -1, 5);
  UNCHANGED(ctx, ncclFuncReduceScatter, 250, 1, 0);

  /* Not collectives the tuner knows: left alone. */
  UNCHANGED(ctx, ncclFuncSendRecv, 8, 1, 0);
  UNCHANGED(ctx, (ncclFunc_t)99, 8, 1, 0);

  /* A core with fewer algorithms than the rule's (PAT is id 6): the rule cannot apply. */
  float table[NA][NP], orig[NA][NP];
  table_fill(table);
  memcpy(orig, table, sizeof(table));
  int nch = 0;
  CHECK_EQ_INT(v6->getCollInfo(ctx, ncclFuncReduce, 2500, 1, (float**)table, 6, NP, 0, &nch),
               ncclSuccess);
  CHECK_TRUE(memcmp(table, orig, sizeof(table)) == 0);
  CHECK_EQ_INT(nch, 0);

  /* The first use of a rule is reported at INFO with file and line, later ones at TRACE. */
  char want[600];
  snprintf(want, sizeof(want), "INFO TUNER/Choir-default: %s:3 applied to allreduce of 8 bytes",
           path);
  CHECK_CONTAINS(log_buf, want);
  snprintf(want, sizeof(want), "TRACE TUNER/Choir-default: %s:3 applied to allreduce of 0 bytes",
           path);
  CHECK_CONTAINS(log_buf, want);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);

  /* Another communicator shape: the allgather rule applies, the reduce rules (nRanks 8) and the
   * nNodes 1 allreduce rule do not. */
  void* ctx16 = init6(16, 2);
  COLL(ctx16, ncclFuncAllGather, 1ull << 40, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 0);
  UNCHANGED(ctx16, ncclFuncReduce, 10, 1, 0);
  UNCHANGED(ctx16, ncclFuncAllReduce, 4194304, 1, 0);
  COLL(ctx16, ncclFuncAllReduce, 100, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_LL, 4);
  CHECK_EQ_INT(v6->finalize(ctx16), ncclSuccess);
}

static void test_v5(void) {
  use_config("v5.conf",
             "allreduce,0,65536,ring,ll,4,-1,-1\n"
             "allreduce,0,-1,-1,-1,-1,-1,-1,-1,-1,65536\n");
  log_clear();
  void* ctx = NULL;
  ncclTunerConstants_v5_t constants;
  memset(&constants, 0, sizeof(constants));
  constants.baseLatencies[1][0] = 6.8;
  ncclNvlDomainInfo_v5_t nvl = {1, 4, 4};
  CHECK_EQ_INT(v5->init(&ctx, 7, 4, 1, test_log, &nvl, &constants), ncclSuccess);
  CHECK_TRUE(ctx != NULL);
  /* The core's model constants are not touched. */
  CHECK_TRUE(constants.baseLatencies[1][0] == 6.8 && constants.baseLatencies[0][0] == 0.0);
  CHECK_CONTAINS(log_buf, "tuner v5");
  CHECK_CONTAINS(log_buf, "chunk sizes in");
  float table[NA][NP];
  table_fill(table);
  int nch = 0;
  CHECK_EQ_INT(v5->getCollInfo(ctx, ncclFuncAllReduce, 100, 1, (float**)table, NA, NP, 0, &nch),
               ncclSuccess);
  CHECK_TRUE(table[NCCL_ALGO_RING][NCCL_PROTO_LL] == 0.0f);
  CHECK_EQ_INT(nch, 4);
  CHECK_EQ_INT(v5->finalize(ctx), ncclSuccess);
}

static void check_chunk(void* ctx, ncclFunc_t coll, size_t bytes, int algo, int proto,
                        size_t want) {
  size_t chunk = 12345;
  CHECK_EQ_INT(v6->getChunkSize(ctx, coll, bytes, algo, proto, 4, &chunk), ncclSuccess);
  CHECK_EQ_INT(chunk, want);
}

static void test_chunk_size(void) {
  const char* path = use_config("chunk.conf",
                                "allreduce,0,100,tree,ll,-1,-1,-1\n"
                                "allreduce,0,1048576,ring,simple,2,-1,-1,-1,-1,131072\n"
                                "allreduce,0,-1,-1,-1,-1,-1,-1,-1,-1,65536\n"
                                "allreduce,2000000,-1,ring,ll128,-1,-1,-1\n"
                                "broadcast,0,-1,ring,simple,-1,-1,-1,-1,-1,-1\n");
  log_clear();
  void* ctx = init6(8, 1);
  /* Cost table: the chunk-only rule (line 3) takes no part, so line 4 is still reached. */
  COLL(ctx, ncclFuncAllReduce, 50, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_LL, 0);
  COLL(ctx, ncclFuncAllReduce, 1000, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 2);
  COLL(ctx, ncclFuncAllReduce, 4000000, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_LL128, 0);
  UNCHANGED(ctx, ncclFuncAllReduce, 1500000, 1, 0);
  COLL(ctx, ncclFuncBroadcast, 10, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 0);
  /* Chunk sizes: the first rule with one that matches collective, size and the chosen pair. */
  check_chunk(ctx, ncclFuncAllReduce, 1000, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 131072);
  check_chunk(ctx, ncclFuncAllReduce, 1000, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, 65536);
  check_chunk(ctx, ncclFuncAllReduce, 50, NCCL_ALGO_TREE, NCCL_PROTO_LL, 65536);
  check_chunk(ctx, ncclFuncAllReduce, 4000000, NCCL_ALGO_RING, NCCL_PROTO_LL128, 65536);
  /* No chunk rule: the core's value comes back untouched. */
  check_chunk(ctx, ncclFuncBroadcast, 10, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 12345);
  check_chunk(ctx, ncclFuncAllGather, 10, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 12345);
  check_chunk(ctx, ncclFuncSendRecv, 10, NCCL_ALGO_RING, NCCL_PROTO_SIMPLE, 12345);
  char want[600];
  snprintf(want, sizeof(want), "%s:2: chunk size 12345 -> 131072", path);
  CHECK_CONTAINS(log_buf, want);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);

  /* Unmatched-everything file: the core's values are untouched everywhere. */
  use_config("none.conf", "# nothing but comments\n\n   # and blanks\n");
  log_clear();
  ctx = init6(8, 1);
  CHECK_CONTAINS(log_buf, "0 of 0 rules");
  UNCHANGED(ctx, ncclFuncAllReduce, 8, 1, 0);
  check_chunk(ctx, ncclFuncAllReduce, 8, NCCL_ALGO_RING, NCCL_PROTO_LL, 12345);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
}

/* One bad line per entry: the text, and what the WARN must name besides file:line. */
static const struct {
  const char* line;
  const char* field;
  const char* value;
} bad_lines[] = {
    {"allreduce,0,10,ring,ll,4,-1", "7 fields", "expected 8 to 11"},
    {"allreduce,0,10,ring,ll,4,-1,-1,-1,-1,-1,-1", "12 fields", "expected 8 to 11"},
    {"allreduc,0,10,ring,ll,4,-1,-1", "field 1 (collective_type)", "'allreduc'"},
    {"allreduce,1k,10,ring,ll,4,-1,-1", "field 2 (min_bytes)", "'1k'"},
    {"allreduce,0,-5,ring,ll,4,-1,-1", "field 3 (max_bytes)", "'-5'"},
    {"allreduce,100,10,ring,ll,4,-1,-1", "field 3 (max_bytes)", "smaller than min_bytes"},
    {"allreduce,0,99999999999999999999999,ring,ll,4,-1,-1", "field 3 (max_bytes)", "'9999"},
    {"allreduce,0,10,rign,ll,4,-1,-1", "field 4 (algorithm)", "'rign'"},
    {"allreduce,0,10,ring,l,4,-1,-1", "field 5 (protocol)", "'l'"},
    {"allreduce,0,10,ring,ll,0,-1,-1", "field 6 (channels)", "'0'"},
    {"allreduce,0,10,ring,ll,4x,-1,-1", "field 6 (channels)", "'4x'"},
    {"allreduce,0,10,ring,ll,4,-2,-1", "field 7 (nNodes)", "'-2'"},
    {"allreduce,0,10,ring,ll,4,-1,eight", "field 8 (nRanks)", "'eight'"},
    {"allreduce,0,10,ring,ll,4,-1,-1,0", "field 9 (numPipeOps)", "'0'"},
    {"allreduce,0,10,ring,ll,4,-1,-1,-1,2", "field 10 (regBuff)", "'2'"},
    {"allreduce,0,10,ring,ll,4,-1,-1,-1,-1,0", "field 11 (chunkSize)", "'0'"},
    {"allreduce,0,10,ring,ll,4,-1,-1,2,-1,4096", "field 11 (chunkSize)", "numPipeOps and regBuff"},
    {"allreduce,,10,ring,ll,4,-1,-1", "field 2 (min_bytes)", "empty"},
};

static void test_bad_files(void) {
  int n = (int)(sizeof(bad_lines) / sizeof(bad_lines[0]));
  char text[8192] = "# good lines around bad ones\nallreduce,0,65536,ring,ll,4,-1,-1\n";
  for (int i = 0; i < n; i++) {
    strcat(text, bad_lines[i].line);
    strcat(text, "\n");
  }
  strcat(text, "broadcast,0,-1,tree,simple,-1,-1,-1\n");
  const char* path = use_config("bad.conf", text);

  /* Default policy: every bad line reported, the whole file ignored, init succeeds. */
  unsetenv("CHOIR_TUNER_STRICT");
  log_clear();
  void* ctx = init6(8, 1);
  for (int i = 0; i < n; i++) {
    char want[600];
    snprintf(want, sizeof(want), "WARN TUNER/Choir-default: %s:%d: %s", path, i + 3,
             bad_lines[i].field);
    CHECK_CONTAINS(log_buf, want);
    CHECK_CONTAINS(log_buf, bad_lines[i].value);
  }
  char want[600];
  snprintf(want, sizeof(want), "%s: %d bad lines (above): ignoring the whole file", path, n);
  CHECK_CONTAINS(log_buf, want);
  CHECK_CONTAINS(log_buf, "CHOIR_TUNER_STRICT=1");
  /* The good lines are not applied either. */
  UNCHANGED(ctx, ncclFuncAllReduce, 8, 1, 0);
  UNCHANGED(ctx, ncclFuncBroadcast, 8, 1, 0);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);

  /* Strict: init fails with ncclInvalidArgument and leaves *ctx alone. */
  use_config("typo.conf",
             "allreduce,0,65536,ring,ll,4,-1,-1\nallreduce,0,65536,ring,ll128,4,-1,x\n");
  setenv("CHOIR_TUNER_STRICT", "1", 1);
  log_clear();
  void* sentinel = (void*)&log_len;
  ctx = sentinel;
  ncclTunerConstants_v6_t constants;
  memset(&constants, 0, sizeof(constants));
  CHECK_EQ_INT(v6->init(&ctx, 1, 8, 1, test_log, NULL, &constants), ncclInvalidArgument);
  CHECK_TRUE(ctx == sentinel);
  CHECK_CONTAINS(log_buf, "typo.conf:2: field 8 (nRanks): 'x'");
  CHECK_CONTAINS(log_buf, "failing init (CHOIR_TUNER_STRICT)");
  /* The same through v5. */
  CHECK_EQ_INT(v5->init(&ctx, 1, 8, 1, test_log, NULL, &constants), ncclInvalidArgument);
  unsetenv("CHOIR_TUNER_STRICT");

  /* A directory is not a config file: a read error, handled like a bad line. */
  setenv("NCCL_TUNER_CONFIG_FILE", tmp_dir, 1);
  log_clear();
  ctx = init6(8, 1);
  CHECK_CONTAINS(log_buf, "read error");
  CHECK_CONTAINS(log_buf, "ignoring the whole file");
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
}

static void test_missing_file(void) {
  char cwd[1024];
  CHECK_TRUE(getcwd(cwd, sizeof(cwd)) != NULL);
  char empty_dir[512];
  snprintf(empty_dir, sizeof(empty_dir), "%s/empty", tmp_dir);
  CHECK_EQ_INT(mkdir(empty_dir, 0700), 0);
  CHECK_EQ_INT(chdir(empty_dir), 0);

  /* Unset and no ./nccl_tuner.conf: no rules, said at INFO. */
  unsetenv("NCCL_TUNER_CONFIG_FILE");
  log_clear();
  void* ctx = init6(8, 1);
  CHECK_CONTAINS(log_buf, "INFO TUNER/Choir-default: no config file ./nccl_tuner.conf");
  CHECK_CONTAINS(log_buf, "no rules");
  CHECK_TRUE(strstr(log_buf, "WARN") == NULL);
  UNCHANGED(ctx, ncclFuncAllReduce, 8, 1, 0);
  check_chunk(ctx, ncclFuncAllReduce, 8, NCCL_ALGO_RING, NCCL_PROTO_LL, 12345);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
  /* Even in strict mode: having no file is the normal case. */
  setenv("CHOIR_TUNER_STRICT", "1", 1);
  ctx = init6(8, 1);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
  unsetenv("CHOIR_TUNER_STRICT");

  /* ./nccl_tuner.conf is the default. */
  write_file("nccl_tuner.conf", "allreduce,0,-1,tree,simple,-1,-1,-1\n");
  log_clear();
  ctx = init6(8, 1);
  CHECK_CONTAINS(log_buf, "1 of 1 rules from nccl_tuner.conf");
  COLL(ctx, ncclFuncAllReduce, 8, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_SIMPLE, 0);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
  unlink("nccl_tuner.conf");

  /* A file the operator named and that is not there: a WARN, no rules; strict fails init. */
  char missing[600];
  snprintf(missing, sizeof(missing), "%s/no-such.conf", tmp_dir);
  setenv("NCCL_TUNER_CONFIG_FILE", missing, 1);
  log_clear();
  ctx = init6(8, 1);
  CHECK_CONTAINS(log_buf, "WARN TUNER/Choir-default: cannot open config file");
  CHECK_CONTAINS(log_buf, missing);
  CHECK_CONTAINS(log_buf, "No such file");
  UNCHANGED(ctx, ncclFuncAllReduce, 8, 1, 0);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
  setenv("CHOIR_TUNER_STRICT", "1", 1);
  ctx = NULL;
  ncclTunerConstants_v6_t constants;
  memset(&constants, 0, sizeof(constants));
  CHECK_EQ_INT(v6->init(&ctx, 1, 8, 1, test_log, NULL, &constants), ncclInvalidArgument);
  CHECK_TRUE(ctx == NULL);
  unsetenv("CHOIR_TUNER_STRICT");

  /* A NULL logger is tolerated. */
  ctx = NULL;
  CHECK_EQ_INT(v6->init(&ctx, 1, 8, 1, NULL, NULL, &constants), ncclSuccess);
  CHECK_EQ_INT(v6->finalize(ctx), ncclSuccess);
  CHECK_EQ_INT(chdir(cwd), 0);
}

/* Each communicator reads the file named at its own init, and keeps it. */
static void test_env_per_comm(void) {
  use_config("a.conf", "allreduce,0,-1,ring,ll,-1,-1,-1\n");
  void* a = init6(8, 1);
  use_config("b.conf", "allreduce,0,-1,tree,ll128,6,-1,-1\n");
  void* b = init6(8, 1);
  COLL(a, ncclFuncAllReduce, 8, 1, 0, NCCL_ALGO_RING, NCCL_PROTO_LL, 0);
  COLL(b, ncclFuncAllReduce, 8, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_LL128, 6);
  CHECK_EQ_INT(v6->finalize(a), ncclSuccess);
  COLL(b, ncclFuncAllReduce, 8, 1, 0, NCCL_ALGO_TREE, NCCL_PROTO_LL128, 6);
  CHECK_EQ_INT(v6->finalize(b), ncclSuccess);
}

/* Many communicators at once from threads: each thread creates, uses and destroys its own, with
 * a shape that selects a different rule. */
#define NTHREADS 8
#define ROUNDS 200

typedef struct {
  int index;
  int failures;
} thread_arg_t;

static void* thread_main(void* p) {
  thread_arg_t* arg = p;
  size_t n_ranks = (size_t)(arg->index % 4 + 1) * 2; /* 2, 4, 6, 8 */
  int want_channels = (int)n_ranks;                  /* see the config */
  for (int round = 0; round < ROUNDS; round++) {
    void* ctx = NULL;
    ncclTunerConstants_v6_t constants;
    memset(&constants, 0, sizeof(constants));
    if (v6->init(&ctx, (uint64_t)arg->index, n_ranks, 1, test_log, NULL, &constants) !=
        ncclSuccess) {
      arg->failures++;
      continue;
    }
    for (int i = 0; i < 16; i++) {
      float table[NA][NP];
      table_fill(table);
      int nch = 0;
      v6->getCollInfo(ctx, ncclFuncAllReduce, (size_t)i * 100, 1, (float**)table, NA, NP, 0, &nch);
      int algo = n_ranks == 8 ? NCCL_ALGO_TREE : NCCL_ALGO_RING;
      if (table[algo][NCCL_PROTO_LL] != 0.0f || nch != want_channels) arg->failures++;
    }
    if (v6->finalize(ctx) != ncclSuccess) arg->failures++;
  }
  return NULL;
}

static void test_threads(void) {
  use_config("threads.conf",
             "allreduce,0,-1,ring,ll,2,-1,2\n"
             "allreduce,0,-1,ring,ll,4,-1,4\n"
             "allreduce,0,-1,ring,ll,6,-1,6\n"
             "allreduce,0,-1,tree,ll,8,-1,8\n");
  pthread_t threads[NTHREADS];
  thread_arg_t args[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    args[i] = (thread_arg_t){i, 0};
    CHECK_EQ_INT(pthread_create(&threads[i], NULL, thread_main, &args[i]), 0);
  }
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(threads[i], NULL);
    CHECK_EQ_INT(args[i].failures, 0);
  }
}

/* Choir's own loader finds it, newest version first: v6. */
static void test_choir_loader(const char* lib_path) {
  plugin_lib_t lib;
  CHECK_EQ_INT(plugin_open(&plugin_kind_tuner, "default", true, &lib), ncclSuccess);
  if (lib.handle != NULL) {
    CHECK_EQ_INT(lib.version, 6);
    CHECK_EQ_STR(lib.table_name, "Choir-default");
    CHECK_CONTAINS(lib.path, "libnccl-tuner-default.so");
    plugin_close(&lib);
  }
  CHECK_EQ_INT(plugin_open(&plugin_kind_tuner, lib_path, true, &lib), ncclSuccess);
  if (lib.handle != NULL) {
    CHECK_EQ_INT(lib.version, 6);
    CHECK_TRUE(lib.table == (const void*)v6);
    plugin_close(&lib);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s path/to/libnccl-tuner-default.so\n", argv[0]);
    return 1;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  v6 = dlsym(lib, "ncclTunerPlugin_v6");
  v5 = dlsym(lib, "ncclTunerPlugin_v5");
  CHECK_TRUE(v6 != NULL);
  CHECK_TRUE(v5 != NULL);
  if (v6 == NULL || v5 == NULL) return check_finish("tuner-default");

  const char* base = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof(tmp_dir), "%s/choir-tuner-XXXXXX", base ? base : "/tmp");
  if (mkdtemp(tmp_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  unsetenv("CHOIR_TUNER_STRICT");

  test_symbols(lib);
  test_matching();
  test_v5();
  test_chunk_size();
  test_bad_files();
  test_missing_file();
  test_env_per_comm();
  test_threads();
  test_choir_loader(argv[1]);

  /* Clean up the temporary folder. */
  static const char* const files[] = {"rules.conf", "v5.conf",  "chunk.conf",
                                      "none.conf",  "bad.conf", "typo.conf",
                                      "a.conf",     "b.conf",   "threads.conf"};
  char path[600];
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    snprintf(path, sizeof(path), "%s/%s", tmp_dir, files[i]);
    unlink(path);
  }
  snprintf(path, sizeof(path), "%s/empty", tmp_dir);
  rmdir(path);
  rmdir(tmp_dir);
  dlclose(lib);
  return check_finish("tuner-default");
}
