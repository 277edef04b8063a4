/*
 * For tests that must act while another thread of the process waits inside the library (an
 * abort that has to end a wait in progress): every wait in Choir's socket code is a poll(), so
 * "the thread sleeps in poll() or ppoll()" is the event to wait for, read from
 * /proc/self/task/TID/syscall (Linux). thread_self_id gives the TID to publish.
 */
#ifndef CHOIR_TEST_THREAD_WAIT_H
#define CHOIR_TEST_THREAD_WAIT_H

#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static inline pid_t thread_self_id(void) { return (pid_t)syscall(SYS_gettid); }

/* 1 once thread tid is seen sleeping in poll()/ppoll(), 0 after timeout_s without that (or when
 * /proc cannot tell). */
static inline int thread_wait_in_poll(pid_t tid, double timeout_s) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    FILE* f = fopen(path, "r");
    long nr = -1;
    if (f != NULL) {
      if (fscanf(f, "%ld", &nr) != 1) nr = -1; /* "running" */
      fclose(f);
    }
#ifdef SYS_poll
    if (nr == SYS_poll) return 1;
#endif
    if (nr == SYS_ppoll) return 1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + 1e-9 * (double)(now.tv_nsec - t0.tv_nsec) > timeout_s)
      return 0;
    sched_yield();
  }
}

#endif
