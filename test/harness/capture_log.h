/*
 * A plugin logger (ncclDebugLogger_t shape) for tests of Choir's plugins through their ABI: it
 * keeps what the plugin logs in log_buf, so that tests can check the messages. With
 * CHOIR_TEST_VERBOSE set, log_clear shows what was kept before clearing it.
 */
#ifndef CHOIR_TEST_CAPTURE_LOG_H
#define CHOIR_TEST_CAPTURE_LOG_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "nccl_common.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[1 << 18];
static size_t log_len;

static void test_log(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...) {
  (void)flags;
  (void)file;
  (void)line;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  const char* tag = level == NCCL_LOG_WARN ? "WARN" : level == NCCL_LOG_INFO ? "INFO" : "TRACE";
  pthread_mutex_lock(&log_lock);
  int n = snprintf(log_buf + log_len, sizeof(log_buf) - log_len, "%s %s\n", tag, msg);
  if (n > 0 && (size_t)n < sizeof(log_buf) - log_len) log_len += (size_t)n;
  pthread_mutex_unlock(&log_lock);
}

static void log_clear(void) {
  pthread_mutex_lock(&log_lock);
  if (getenv("CHOIR_TEST_VERBOSE") != NULL) fputs(log_buf, stdout);
  log_len = 0;
  log_buf[0] = '\0';
  pthread_mutex_unlock(&log_lock);
}

#endif
