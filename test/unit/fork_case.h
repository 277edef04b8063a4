/*
 * Run each test case in a child process, so that process-wide state (cached parameters, log
 * settings, the environment) starts fresh for every case.
 */
#ifndef CHOIR_TEST_FORK_CASE_H
#define CHOIR_TEST_FORK_CASE_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* In the parent: counts the case as one check, passed when the child's checks all passed. */
static void fork_case(const char* name, void (*fn)(void)) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    check_count_ = check_failures_ = 0;
    fn();
    fflush(stdout);
    _exit(check_failures_ == 0 && check_count_ > 0 ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  check_count_++;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    check_failures_++;
    fprintf(stderr, "case %s failed (status 0x%x)\n", name, status);
  }
}

#endif
