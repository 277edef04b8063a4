/* Logging: levels, subsystem filter, file with %h/%p, last error, plugin logger; several threads
 * at once (their last errors kept apart, their lines whole). */
#include <pthread.h>
#include <stdint.h>
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

enum { NTHREADS = 8, PER_THREAD = 400, PER_ERROR = 100000 };
static pthread_barrier_t start_line;

/* Each thread sets its own last error over and over and reads it back each time (another
 * thread's must never show), then, all together again, logs numbered lines. */
static void* error_thread(void* arg) {
  const int id = (int)(intptr_t)arg;
  int wrong = 0;
  char want[64];
  pthread_barrier_wait(&start_line);
  for (int k = 0; k < PER_ERROR; k++) {
    snprintf(want, sizeof(want), "thread %d error %d", id, k);
    err_set_last("thread %d error %d", id, k);
    wrong += strcmp(err_last(), want) != 0;
  }
  pthread_barrier_wait(&start_line);
  for (int k = 0; k < PER_THREAD; k++)
    INFO(NCCL_INIT, "thread %d line %d of %d %s", id, k, PER_THREAD,
         "............................................................");
  return (void*)(intptr_t)wrong;
}

static void* fresh_thread(void* arg) {
  char* out = arg;
  snprintf(out, 64, "%s", err_last());
  return NULL;
}

static void case_thread_last_error(void) {
  CHECK_EQ_STR(err_string(ncclSuccess), "no error");
  CHECK_CONTAINS(err_string(ncclInvalidUsage), "invalid usage");
  CHECK_EQ_STR(err_string((ncclResult_t)99), "unknown result code");
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_CONF_FILE", "/nonexistent", 1);
  snprintf(log_path, sizeof(log_path), "/tmp/choir-log-test.%d", (int)getpid());
  setenv("NCCL_DEBUG_FILE", "/tmp/choir-log-test.%p", 1);
  err_clear_last();
  pthread_t th[NTHREADS];
  pthread_barrier_init(&start_line, NULL, NTHREADS);
  for (int i = 0; i < NTHREADS; i++)
    CHECK_TRUE(pthread_create(&th[i], NULL, error_thread, (void*)(intptr_t)i) == 0);
  for (int i = 0; i < NTHREADS; i++) {
    void* wrong = NULL;
    pthread_join(th[i], &wrong);
    CHECK_MSG(wrong == NULL, "thread %d read another thread's error %d time(s)", i,
              (int)(intptr_t)wrong);
  }
  pthread_barrier_destroy(&start_line);
  /* A thread with no error of its own sees the process's latest: one thread's final one. */
  char seen[64] = "";
  pthread_t t;
  CHECK_TRUE(pthread_create(&t, NULL, fresh_thread, seen) == 0);
  pthread_join(t, NULL);
  int id = -1, k = -1;
  CHECK_MSG(sscanf(seen, "thread %d error %d", &id, &k) == 2 && id >= 0 && id < NTHREADS &&
                k == PER_ERROR - 1,
            "a fresh thread sees \"%s\", not a thread's final error", seen);
  /* ...and this thread's own error, once it has one, is its own. */
  err_set_last("main %d", 1);
  CHECK_EQ_STR(err_last(), "main 1");
  CHECK_TRUE(pthread_create(&t, NULL, fresh_thread, seen) == 0);
  pthread_join(t, NULL);
  CHECK_EQ_STR(seen, "main 1");

  /* Every log line of every thread arrived whole, once: NTHREADS * PER_THREAD lines, each the
   * header and one message, none cut or interleaved with another. */
  FILE* f = fopen(log_path, "r");
  CHECK_TRUE(f != NULL);
  if (f == NULL) return;
  static char seen_line[NTHREADS][PER_THREAD];
  memset(seen_line, 0, sizeof(seen_line));
  char line[512];
  int lines = 0, bad = 0;
  char head[128];
  snprintf(head, sizeof(head), "%s:%d:", sys_hostname(), (int)getpid());
  while (fgets(line, sizeof(line), f) != NULL) {
    lines++;
    const char* msg = strstr(line, "NCCL INFO thread ");
    int i = -1, n = -1, of = -1;
    char dots[128] = "";
    if (strncmp(line, head, strlen(head)) != 0 || msg == NULL ||
        sscanf(msg, "NCCL INFO thread %d line %d of %d %127s", &i, &n, &of, dots) != 4 || i < 0 ||
        i >= NTHREADS || n < 0 || n >= PER_THREAD || of != PER_THREAD || strlen(dots) != 60 ||
        line[strlen(line) - 1] != '\n' || seen_line[i][n]++) {
      if (bad++ < 5) fprintf(stderr, "log line %d broken or repeated: %s", lines, line);
    }
  }
  fclose(f);
  unlink(log_path);
  CHECK_MSG(bad == 0 && lines == NTHREADS * PER_THREAD, "%d lines (want %d), %d broken", lines,
            NTHREADS * PER_THREAD, bad);
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
