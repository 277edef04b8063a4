/*
 * Logging as NCCL documents it: NCCL_DEBUG picks the level, NCCL_DEBUG_SUBSYS the subsystems shown
 * at INFO and TRACE, NCCL_DEBUG_FILE the destination. Every line carries host, pid, tid and the
 * thread's CUDA device, so that logs of many ranks can be merged and grepped.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"

int log_level_ = -1;
uint64_t log_mask_ = 0;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE* log_file = NULL; /* NULL: stdout */
static __thread int log_thread_dev = -1;

static const struct {
  const char* name;
  uint64_t bit;
} log_subsys[] = {
    {"INIT", NCCL_INIT},     {"COLL", NCCL_COLL},       {"P2P", NCCL_P2P},
    {"SHM", NCCL_SHM},       {"NET", NCCL_NET},         {"GRAPH", NCCL_GRAPH},
    {"TUNING", NCCL_TUNING}, {"ENV", NCCL_ENV},         {"ALLOC", NCCL_ALLOC},
    {"CALL", NCCL_CALL},     {"PROXY", NCCL_PROXY},     {"NVLS", NCCL_NVLS},
    {"BOOTSTRAP", NCCL_BOOTSTRAP}, {"REG", NCCL_REG},   {"PROFILE", NCCL_PROFILE},
    {"RAS", NCCL_RAS},       {"DESTROY", NCCL_DESTROY}, {"ALLOC_HOST", NCCL_ALLOC_HOST},
    {"ALL", (uint64_t)NCCL_ALL},
};

void log_set_thread_device(int dev) { log_thread_dev = dev; }

/* Problems found while reading the settings are reported once the settings are in place. */
static char log_init_problem[2][256];

static int log_parse_level(const char* v) {
  if (v == NULL || v[0] == '\0') return NCCL_LOG_NONE;
  if (sys_strcasecmp(v, "VERSION") == 0) return NCCL_LOG_VERSION;
  if (sys_strcasecmp(v, "WARN") == 0) return NCCL_LOG_WARN;
  if (sys_strcasecmp(v, "INFO") == 0) return NCCL_LOG_INFO;
  if (sys_strcasecmp(v, "TRACE") == 0) return NCCL_LOG_TRACE;
  if (sys_strcasecmp(v, "ABORT") == 0) return NCCL_LOG_ABORT;
  snprintf(log_init_problem[0], sizeof(log_init_problem[0]),
           "NCCL_DEBUG=%.64s is not a level (use VERSION, WARN, INFO or TRACE); using WARN", v);
  return NCCL_LOG_WARN;
}

static uint64_t log_parse_subsys(const char* v) {
  if (v == NULL) return NCCL_INIT | NCCL_BOOTSTRAP | NCCL_ENV;
  bool invert = false;
  if (v[0] == '^') {
    invert = true;
    v++;
  }
  char buf[512];
  sys_strlcpy(buf, v, sizeof(buf));
  uint64_t mask = 0;
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    while (*tok == ' ') tok++;
    bool known = false;
    for (size_t i = 0; i < sizeof(log_subsys) / sizeof(log_subsys[0]); i++) {
      if (sys_strcasecmp(tok, log_subsys[i].name) == 0) {
        mask |= log_subsys[i].bit;
        known = true;
      }
    }
    if (!known && log_init_problem[1][0] == '\0')
      snprintf(log_init_problem[1], sizeof(log_init_problem[1]),
               "NCCL_DEBUG_SUBSYS: unknown subsystem '%.32s' ignored", tok);
  }
  return invert ? ~mask : mask;
}

/* Expand %h (host) and %p (pid) in NCCL_DEBUG_FILE. */
static void log_expand_path(const char* in, char* out, size_t size) {
  size_t o = 0;
  for (const char* p = in; *p && o + 1 < size; p++) {
    if (p[0] == '%' && (p[1] == 'h' || p[1] == 'p')) {
      int n = p[1] == 'h' ? snprintf(out + o, size - o, "%s", sys_hostname())
                          : snprintf(out + o, size - o, "%d", (int)getpid());
      if (n < 0) break;
      o += (size_t)n < size - o ? (size_t)n : size - o - 1;
      p++;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = '\0';
}

void log_init(void) {
  pthread_mutex_lock(&log_lock);
  if (log_level_ >= 0) goto out_unlock;
  param_load_conf_files();
  log_init_problem[0][0] = log_init_problem[1][0] = '\0';
  int level = log_parse_level(getenv(param_desc(PARAM_DEBUG)->env));
  log_mask_ = log_parse_subsys(getenv(param_desc(PARAM_DEBUG_SUBSYS)->env));
  const char* file = getenv(param_desc(PARAM_DEBUG_FILE)->env);
  char path_problem[300] = "";
  if (level > NCCL_LOG_NONE && file != NULL && file[0] != '\0') {
    char path[4096];
    log_expand_path(file, path, sizeof(path));
    FILE* f = fopen(path, "w");
    if (f == NULL) {
      snprintf(path_problem, sizeof(path_problem),
               "NCCL_DEBUG_FILE: cannot open %.200s (%s); logging to stdout", path,
               strerror(errno));
    } else {
      setvbuf(f, NULL, _IOLBF, 0);
      if (log_file != NULL) fclose(log_file);
      log_file = f;
    }
  }
  /* Publish the level last: log_enabled() reads it without the lock. */
  __atomic_store_n(&log_level_, level, __ATOMIC_RELEASE);
out_unlock:
  pthread_mutex_unlock(&log_lock);
  for (int i = 0; i < 2; i++)
    if (log_init_problem[i][0] != '\0') WARN("%s", log_init_problem[i]);
  if (path_problem[0] != '\0') WARN("%s", path_problem);
}

void log_reset(void) {
  pthread_mutex_lock(&log_lock);
  __atomic_store_n(&log_level_, -1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&log_lock);
}

static const char* log_basename(const char* path) {
  const char* s = strrchr(path, '/');
  return s ? s + 1 : path;
}

void log_vmessage(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                  const char* fmt, va_list ap) {
  /* Initialize first: problems found while reading the settings are WARNed from there, and must
   * not replace this message as the last error. */
  bool enabled = log_enabled((int)level, flags);
  char msg[1024];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  if (level == NCCL_LOG_WARN) err_set_last("%s", msg);
  if (!enabled) return;

  char dev[16];
  if (log_thread_dev >= 0)
    snprintf(dev, sizeof(dev), "%d", log_thread_dev);
  else
    sys_strlcpy(dev, "-", sizeof(dev));
  char head[256];
  int pid = (int)getpid(), tid = (int)syscall(SYS_gettid);
  const char* host = sys_hostname();
  switch (level) {
    case NCCL_LOG_WARN:
      snprintf(head, sizeof(head), "%s:%d:%d [%s] %s:%d NCCL WARN ", host, pid, tid, dev,
               log_basename(file), line);
      break;
    case NCCL_LOG_TRACE:
      snprintf(head, sizeof(head), "%s:%d:%d [%s] %s:%d NCCL TRACE ", host, pid, tid, dev,
               log_basename(file), line);
      break;
    default:
      snprintf(head, sizeof(head), "%s:%d:%d [%s] NCCL %s ", host, pid, tid, dev,
               level == NCCL_LOG_VERSION ? "VERSION" : "INFO");
      break;
  }
  pthread_mutex_lock(&log_lock);
  FILE* out = log_file ? log_file : stdout;
  fprintf(out, "%s%s\n", head, msg);
  fflush(out);
  pthread_mutex_unlock(&log_lock);
}

void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vmessage(level, flags, file, line, fmt, ap);
  va_end(ap);
}

void log_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                       const char* fmt, ...) {
  /* Plugins may pass any level; the cheap check comes first, as for the core's own messages. */
  if (level != NCCL_LOG_WARN && !log_enabled((int)level, flags)) return;
  va_list ap;
  va_start(ap, fmt);
  log_vmessage(level, flags, file ? file : "plugin", line, fmt, ap);
  va_end(ap);
}
