/*
 * core/base: services every other module uses: logging, parameters, error propagation, system and
 * CUDA call wrappers. This is the only header of the module meant for the rest of the core.
 */
#ifndef CHOIR_BASE_H
#define CHOIR_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"

/* ---- Logging ---------------------------------------------------------------------------- */

/* Current level and subsystem mask; -1 until the log is initialized from the environment. */
extern int log_level_;
extern uint64_t log_mask_;

void log_init(void);
/* Forget the log settings so that the next message re-reads NCCL_DEBUG* (ncclResetDebugInit). */
void log_reset(void);
void log_message(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                 const char* fmt, ...) __attribute__((format(printf, 5, 6)));
void log_vmessage(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                  const char* fmt, va_list ap);
/* The logger handed to plugins (ncclDebugLogger_t). */
void log_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                       const char* fmt, ...) __attribute__((format(printf, 5, 6)));
/* Device shown in log lines of this thread ([dev]); -1 when none. */
void log_set_thread_device(int dev);

static inline bool log_enabled(int level, unsigned long flags) {
  if (__builtin_expect(log_level_ < 0, 0)) log_init();
  return level <= log_level_ && (level <= NCCL_LOG_WARN || (flags & log_mask_));
}

/* WARN also records the message as the text ncclGetLastError returns. */
#define WARN(...) log_message(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, __VA_ARGS__)
#define INFO(flags, ...)                                                              \
  do {                                                                                \
    if (log_enabled(NCCL_LOG_INFO, (flags)))                                          \
      log_message(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__);           \
  } while (0)
#define TRACE(flags, ...)                                                             \
  do {                                                                                \
    if (log_enabled(NCCL_LOG_TRACE, (flags)))                                         \
      log_message(NCCL_LOG_TRACE, (flags), __FILE__, __LINE__, __VA_ARGS__);          \
  } while (0)

/* ---- Errors ------------------------------------------------------------------------------ */

const char* err_string(ncclResult_t res);
/* Record `fmt` as the last error without logging it (WARN does both). */
void err_set_last(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
const char* err_last(void);
void err_clear_last(void);

/* Propagate a failure, leaving a file:line trail at INFO. ncclInProgress is not a failure. */
#define CHECK(call)                                                                   \
  do {                                                                                \
    ncclResult_t res_ = (call);                                                       \
    if (res_ != ncclSuccess && res_ != ncclInProgress) {                              \
      INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, res_);                        \
      return res_;                                                                    \
    }                                                                                 \
  } while (0)

#define CHECK_GOTO(call, res, label)                                                  \
  do {                                                                                \
    (res) = (call);                                                                   \
    if ((res) != ncclSuccess && (res) != ncclInProgress) {                            \
      INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, (res));                       \
      goto label;                                                                     \
    }                                                                                 \
  } while (0)

/* A system call that returns -1 and sets errno. */
#define SYSCHECK(call, name)                                                          \
  do {                                                                                \
    if ((call) == -1) {                                                               \
      WARN("%s failed: %m", (name));                                                  \
      return ncclSystemError;                                                         \
    }                                                                                 \
  } while (0)

/* ---- Parameters -------------------------------------------------------------------------- */

/* Tests build the module with their own table (which includes this one) to exercise every type. */
#ifndef PARAM_TABLE_HEADER
#define PARAM_TABLE_HEADER "base_param_table.h"
#endif

typedef enum {
#define PARAM_INT(id, env, def, help) PARAM_##id,
#define PARAM_STR(id, env, def, help) PARAM_##id,
#include PARAM_TABLE_HEADER
#undef PARAM_INT
#undef PARAM_STR
  PARAM_COUNT
} param_id_t;

typedef enum { PARAM_TYPE_INT, PARAM_TYPE_STR } param_type_t;

typedef struct {
  const char* env;
  param_type_t type;
  int64_t def_int;
  const char* def_str;
  const char* help;
} param_desc_t;

/* Values are read at first use (a net plugin may set variables during its init) and then kept. */
int64_t param_int(param_id_t id);
/* NULL when unset and without default. The string lives until the process ends. */
const char* param_str(param_id_t id);
/* True when the environment (or a conf file) gave a value. */
bool param_is_set(param_id_t id);
const param_desc_t* param_desc(param_id_t id);
/* Apply NCCL_CONF_FILE (or ~/.nccl.conf, then /etc/nccl.conf) to the environment, once. */
void param_load_conf_files(void);

/* ---- System helpers ---------------------------------------------------------------------- */

/* Host name up to the first '.', never fails (falls back to "unknown"). */
const char* sys_hostname(void);
/* Case-insensitive comparison of ASCII strings. */
int sys_strcasecmp(const char* a, const char* b);
/* Copy with truncation and guaranteed termination; returns the length that was wanted. */
size_t sys_strlcpy(char* dst, const char* src, size_t size);

/* ---- Allocation -------------------------------------------------------------------------- */

/* calloc that logs and returns ncclSystemError on failure; *ptr_p written only on success. */
ncclResult_t mem_calloc(void** ptr_p, size_t nmemb, size_t size);
#define MEM_CALLOC(ptr_p, n) mem_calloc((void**)(ptr_p), (n), sizeof(**(ptr_p)))

#endif
