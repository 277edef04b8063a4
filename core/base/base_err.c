/*
 * Error strings and the last-error text behind ncclGetLastError. Each thread keeps its own last
 * error; a thread that has none sees the most recent error of the process, so that an error found
 * by a background thread is still reported to the application.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base.h"

#define ERR_MAX 1024

static __thread char err_thread_last[ERR_MAX];
static __thread bool err_thread_own; /* err_thread_last holds this thread's own error */
static char err_process_last[ERR_MAX];
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;

const char* err_string(ncclResult_t res) {
  switch (res) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the Choir developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

void err_set_last(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err_thread_last, ERR_MAX, fmt, ap);
  va_end(ap);
  err_thread_own = true;
  pthread_mutex_lock(&err_lock);
  memcpy(err_process_last, err_thread_last, ERR_MAX);
  pthread_mutex_unlock(&err_lock);
}

const char* err_last(void) {
  if (!err_thread_own) {
    pthread_mutex_lock(&err_lock);
    memcpy(err_thread_last, err_process_last, ERR_MAX);
    pthread_mutex_unlock(&err_lock);
  }
  return err_thread_last;
}

void err_clear_last(void) {
  err_thread_last[0] = '\0';
  err_thread_own = false;
  pthread_mutex_lock(&err_lock);
  err_process_last[0] = '\0';
  pthread_mutex_unlock(&err_lock);
}
