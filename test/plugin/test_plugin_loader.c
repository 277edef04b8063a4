/*
 * The generic plugin loader against mock libraries of every accepted version (and some that must
 * be rejected): name resolution, newest-first symbol lookup, validation, log lines, and the
 * NCCL_<KIND>_PLUGIN list syntax. Run with CHOIR_PLUGIN_DIR pointing at the mocks and
 * LD_LIBRARY_PATH at elsewhere/ (a library only the dynamic loader's search can find).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log_file.h"
#include "plugin.h"

/* The test program itself holds a tuner table, for NCCL_TUNER_PLUGIN=STATIC_PLUGIN. */
__attribute__((visibility("default"))) void* ncclTunerPlugin_v3[4];
static int static_entry(void) { return 0; }

/* log_path and log_text: test/harness/log_file.h */

static void expect_load(const plugin_kind_t* kind, const char* spec, int version,
                        const char* name) {
  plugin_lib_t lib;
  ncclResult_t res = plugin_open(kind, spec, true, &lib);
  CHECK_EQ_INT(res, ncclSuccess);
  if (res != ncclSuccess) {
    fprintf(stderr, "  while loading %s: %s\n", spec, err_last());
    return;
  }
  CHECK_EQ_INT(lib.version, version);
  CHECK_EQ_STR(lib.table_name, name);
  CHECK_TRUE(lib.handle != NULL && lib.table != NULL);
  CHECK_TRUE(lib.path[0] == '/' || strcmp(spec, "STATIC_PLUGIN") == 0);
  plugin_close(&lib);
  CHECK_TRUE(lib.handle == NULL);
}

static void expect_reject(const plugin_kind_t* kind, const char* spec, const char* why) {
  plugin_lib_t lib;
  err_clear_last();
  CHECK_EQ_INT(plugin_open(kind, spec, true, &lib), ncclInvalidUsage);
  CHECK_CONTAINS(err_last(), why);
}

static void test_versions(void) {
  char spec[64], name[64];
  for (int v = 6; v <= 12; v++) {
    snprintf(spec, sizeof(spec), "mocknet%d", v); /* -> libnccl-net-mocknet<v>.so */
    snprintf(name, sizeof(name), "MockNet_v%d", v);
    expect_load(&plugin_kind_net, spec, v, name);
  }
  for (int v = 2; v <= 6; v++) {
    if (v == 3) continue; /* the program's own table, see test_resolution */
    snprintf(spec, sizeof(spec), "mocktuner%d", v);
    snprintf(name, sizeof(name), "MockTuner_v%d", v);
    expect_load(&plugin_kind_tuner, spec, v, name);
  }
  for (int v = 1; v <= 6; v++) {
    snprintf(spec, sizeof(spec), "mockprofiler%d", v);
    snprintf(name, sizeof(name), "MockProfiler_v%d", v);
    expect_load(&plugin_kind_profiler, spec, v, name);
  }
  /* Newest first: a library exporting v12 and v8 is used at v12. */
  expect_load(&plugin_kind_net, "multi", 12, "MockNet_v12");
  /* Collnet is found next to net in the same library, at its own version. */
  expect_load(&plugin_kind_collnet, "libnccl-net-withcollnet.so", 9, "MockCollNet_v9");
}

static void test_rejections(void) {
  expect_reject(&plugin_kind_net, "old", "exports only ncclNetPlugin_v5");
  expect_reject(&plugin_kind_net, "brokenisend", "required entry 'isend' is NULL");
  expect_reject(&plugin_kind_tuner, "brokentuner", "required entry 'getCollInfo' is NULL");
  expect_reject(&plugin_kind_net, "notaplugin", "not a net plugin");
  expect_reject(&plugin_kind_net, "undefined", "choir_mock_symbol_nobody_defines");
  expect_reject(&plugin_kind_net, "doesnotexist", "could not find 'doesnotexist'");
  expect_reject(&plugin_kind_net, "/no/such/dir/libx.so", "could not find");
  /* A tuner library is not a net plugin. */
  expect_reject(&plugin_kind_net, "libnccl-tuner-mocktuner4.so", "not a net plugin");
  /* Optional entries left NULL are fine. */
  expect_load(&plugin_kind_net, "optnull", 9, "MockNet_v9");
  expect_load(&plugin_kind_tuner, "mocktuner6nochunk", 6, "MockTuner_v6");
}

static void test_resolution(void) {
  char path[4096];
  /* Full path. */
  snprintf(path, sizeof(path), "%s/libnccl-net-mocknet7.so", plugin_dir());
  expect_load(&plugin_kind_net, path, 7, "MockNet_v7");
  /* File name, found in Choir's plugin directory. */
  expect_load(&plugin_kind_net, "libnccl-net-mocknet8.so", 8, "MockNet_v8");
  /* Short name, found only through the dynamic loader's search (LD_LIBRARY_PATH). */
  expect_load(&plugin_kind_net, "elsewhere", 11, "MockNet_v11");
  /* The main program's own symbols. */
  ncclTunerPlugin_v3[0] = (void*)"StaticTuner";
  for (int i = 1; i < 4; i++) ncclTunerPlugin_v3[i] = (void*)static_entry;
  expect_load(&plugin_kind_tuner, "STATIC_PLUGIN", 3, "StaticTuner");
}

static void test_open_in(void) {
  plugin_lib_t net, tuner;
  CHECK_EQ_INT(plugin_open(&plugin_kind_net, "mixed", true, &net), ncclSuccess);
  CHECK_EQ_INT(plugin_open_in(&plugin_kind_tuner, &net, &tuner), ncclSuccess);
  CHECK_EQ_INT(tuner.version, 5);
  CHECK_EQ_STR(tuner.table_name, "MockTuner_v5");
  /* The tuner holds its own reference: closing the net first leaves it usable. */
  plugin_close(&net);
  CHECK_EQ_STR(*(const char* const*)tuner.table, "MockTuner_v5");
  plugin_close(&tuner);
  plugin_lib_t prof;
  CHECK_EQ_INT(plugin_open(&plugin_kind_net, "mocknet10", true, &net), ncclSuccess);
  CHECK_EQ_INT(plugin_open_in(&plugin_kind_profiler, &net, &prof), ncclInvalidUsage);
  plugin_close(&net);
}

static void test_specs(void) {
  char specs[PLUGIN_MAX_SPECS][PLUGIN_SPEC_MAX];
  int n = -1;
  bool named = true;
  CHECK_EQ_INT(plugin_specs(&plugin_kind_net, NULL, specs, PLUGIN_MAX_SPECS, &n, &named),
               ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_STR(specs[0], "libnccl-net.so");
  CHECK_TRUE(!named);
  CHECK_EQ_INT(plugin_specs(&plugin_kind_tuner, "", specs, PLUGIN_MAX_SPECS, &n, &named),
               ncclSuccess);
  CHECK_EQ_STR(specs[0], "libnccl-tuner.so");
  CHECK_EQ_INT(plugin_specs(&plugin_kind_net, "NoNe", specs, PLUGIN_MAX_SPECS, &n, &named),
               ncclSuccess);
  CHECK_EQ_INT(n, 0);
  CHECK_TRUE(named);
  CHECK_EQ_INT(plugin_specs(&plugin_kind_net, "a, b,,/x/c.so", specs, PLUGIN_MAX_SPECS, &n,
                            &named),
               ncclSuccess);
  CHECK_EQ_INT(n, 3);
  CHECK_EQ_STR(specs[0], "a");
  CHECK_EQ_STR(specs[1], "b");
  CHECK_EQ_STR(specs[2], "/x/c.so");
  /* Only net takes a list. */
  CHECK_EQ_INT(plugin_specs(&plugin_kind_profiler, "a,b", specs, PLUGIN_MAX_SPECS, &n, &named),
               ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_STR(specs[0], "a,b");
  char many[512] = "";
  for (int i = 0; i < PLUGIN_MAX_SPECS + 1; i++) strcat(many, "p,");
  CHECK_EQ_INT(plugin_specs(&plugin_kind_net, many, specs, PLUGIN_MAX_SPECS, &n, &named),
               ncclInvalidArgument);
  CHECK_CONTAINS(err_last(), "more than 16 plugins");
  char longname[PLUGIN_SPEC_MAX + 10];
  memset(longname, 'x', sizeof(longname) - 1);
  longname[sizeof(longname) - 1] = '\0';
  CHECK_EQ_INT(plugin_specs(&plugin_kind_net, longname, specs, PLUGIN_MAX_SPECS, &n, &named),
               ncclInvalidArgument);
}

static void test_log_lines(void) {
  /* One INFO line per load, naming the table, the plugin and the file. */
  plugin_lib_t lib;
  CHECK_EQ_INT(plugin_open(&plugin_kind_net, "mocknet9", false, &lib), ncclSuccess);
  plugin_close(&lib);
  CHECK_CONTAINS(log_text(), "NET/Plugin: loaded ncclNetPlugin_v9 'MockNet_v9' from /");
  /* A default candidate that is absent is only INFO, not a warning. */
  err_clear_last();
  CHECK_EQ_INT(plugin_open(&plugin_kind_tuner, "libnccl-tuner.so", false, &lib),
               ncclInvalidUsage);
  CHECK_EQ_STR(err_last(), "");
  CHECK_CONTAINS(log_text(), "TUNER/Plugin: could not find 'libnccl-tuner.so'");
  /* A malformed table is always a warning. */
  CHECK_EQ_INT(plugin_open(&plugin_kind_net, "brokenisend", false, &lib), ncclInvalidUsage);
  CHECK_CONTAINS(log_text(), "NCCL WARN NET/Plugin: rejecting ncclNetPlugin_v10");
}

int main(void) {
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    fprintf(stderr, "CHOIR_PLUGIN_DIR must point at the mock plugins\n");
    return 1;
  }
  snprintf(log_path, sizeof(log_path), "/tmp/choir-plugin-test.%d.log", (int)getpid());
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,ENV", 1);
  setenv("NCCL_DEBUG_FILE", log_path, 1);
  test_versions();
  test_rejections();
  test_resolution();
  test_open_in();
  test_specs();
  test_log_lines();
  unlink(log_path);
  return check_finish("plugin-loader");
}
