/* Logging: levels, subsystem filter, file with %h/%p, last error, plugin logger. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "fork_case.h"

static char log_path[256];

/* Point the log at a fresh file and return its content after `emit` ran. */
static char* capture(void (*emit)(void)) {
  snprintf(log_path, sizeof(log_path), "/tmp/choir-log-test.%d", (int)getpid());
  setenv("NCCL_DEBUG_FILE", "/tmp/choir-log-test.%p", 1);
  setenv("NCCL_CONF_FILE", "/nonexistent", 1);
  emit();
  FILE* f = fopen(log_path, "r");
  static char buf[16384];
  buf[0] = '\0';
  if (f != NULL) {
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(log_path);
  }
  return buf;
}

static void emit_all(void) {
  INFO(NCCL_INIT, "info-init %d", 1);
  INFO(NCCL_NET, "info-net %d", 2);
  TRACE(NCCL_INIT, "trace-init");
  WARN("warn-message %s", "x");
  log_plugin_logger(NCCL_LOG_INFO, NCCL_NET, "plug.c", 7, "plugin-net-info");
  log_plugin_logger(NCCL_LOG_WARN, NCCL_NET, "plug.c", 8, "plugin-warn");
}

static void case_info_default_subsys(void) {
  setenv("NCCL_DEBUG", "INFO", 1);
  unsetenv("NCCL_DEBUG_SUBSYS");
  char* out = capture(emit_all);
  CHECK_CONTAINS(out, "NCCL INFO info-init 1");
  CHECK_TRUE(strstr(out, "info-net") == NULL); /* NET is not in the default INIT,BOOTSTRAP,ENV */
  CHECK_TRUE(strstr(out, "trace-init") == NULL);
  CHECK_CONTAINS(out, "NCCL WARN warn-message x");
  CHECK_CONTAINS(out, "test_log.c:");           /* WARN lines carry file:line */
  CHECK_TRUE(strstr(out, "plugin-net-info") == NULL);
  CHECK_CONTAINS(out, "plug.c:8 NCCL WARN plugin-warn");
  char host_pid[128];
  snprintf(host_pid, sizeof(host_pid), "%s:%d:", sys_hostname(), (int)getpid());
  CHECK_CONTAINS(out, host_pid);
}

static void case_subsys_list_and_exclude(void) {
  setenv("NCCL_DEBUG", "info", 1);
  setenv("NCCL_DEBUG_SUBSYS", "NET", 1);
  char* out = capture(emit_all);
  CHECK_CONTAINS(out, "info-net 2");
  CHECK_CONTAINS(out, "plugin-net-info");
  CHECK_TRUE(strstr(out, "info-init") == NULL);
  log_reset();
  setenv("NCCL_DEBUG_SUBSYS", "^NET", 1);
  out = capture(emit_all);
  CHECK_CONTAINS(out, "info-init 1");
  CHECK_TRUE(strstr(out, "info-net") == NULL);
}

static void case_trace_and_all(void) {
  setenv("NCCL_DEBUG", "TRACE", 1);
  setenv("NCCL_DEBUG_SUBSYS", "ALL", 1);
  char* out = capture(emit_all);
  CHECK_CONTAINS(out, "trace-init");
  CHECK_CONTAINS(out, "info-net 2");
}

static void case_warn_level(void) {
  setenv("NCCL_DEBUG", "WARN", 1);
  char* out = capture(emit_all);
  CHECK_TRUE(strstr(out, "info-init") == NULL);
  CHECK_CONTAINS(out, "warn-message x");
}

static void case_no_debug_still_records(void) {
  unsetenv("NCCL_DEBUG");
  err_clear_last();
  char* out = capture(emit_all);
  CHECK_EQ_STR(out, ""); /* nothing written, no file created */
  CHECK_EQ_STR(err_last(), "plugin-warn");
}

static void case_bad_level(void) {
  setenv("NCCL_DEBUG", "LOUD", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT,BOGUS", 1);
  char* out = capture(emit_all);
  CHECK_CONTAINS(out, "NCCL_DEBUG=LOUD is not a level");
  CHECK_CONTAINS(out, "unknown subsystem 'BOGUS'");
  CHECK_CONTAINS(out, "warn-message");
  CHECK_TRUE(strstr(out, "info-init") == NULL); /* fell back to WARN */
}

static void case_hostname_pattern(void) {
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_CONF_FILE", "/nonexistent", 1);
  setenv("NCCL_DEBUG_FILE", "/tmp/choir-log-%h-%p.txt", 1);
  WARN("to a named file");
  char path[512];
  snprintf(path, sizeof(path), "/tmp/choir-log-%s-%d.txt", sys_hostname(), (int)getpid());
  CHECK_TRUE(access(path, F_OK) == 0);
  unlink(path);
}

static void case_unwritable_file(void) {
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_CONF_FILE", "/nonexistent", 1);
  setenv("NCCL_DEBUG_FILE", "/nonexistent-dir/x.log", 1);
  WARN("still works");
  CHECK_EQ_STR(err_last(), "still works");
}

static void case_thread_last_error(void) {
  err_clear_last();
  err_set_last("first %d", 1);
  CHECK_EQ_STR(err_last(), "first 1");
  CHECK_EQ_STR(err_string(ncclSuccess), "no error");
  CHECK_CONTAINS(err_string(ncclInvalidUsage), "invalid usage");
  CHECK_EQ_STR(err_string((ncclResult_t)99), "unknown result code");
}

int main(void) {
  fork_case("info_default_subsys", case_info_default_subsys);
  fork_case("subsys_list_and_exclude", case_subsys_list_and_exclude);
  fork_case("trace_and_all", case_trace_and_all);
  fork_case("warn_level", case_warn_level);
  fork_case("no_debug_still_records", case_no_debug_still_records);
  fork_case("bad_level", case_bad_level);
  fork_case("hostname_pattern", case_hostname_pattern);
  fork_case("unwritable_file", case_unwritable_file);
  fork_case("thread_last_error", case_thread_last_error);
  return check_finish("log");
}
