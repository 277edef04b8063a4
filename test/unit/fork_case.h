/*
 * Run each test case in a child process, so that process-wide state (cached parameters, log
 * settings, the environment) starts fresh for every case.
 */
#ifndef CHOIR_TEST_FORK_CASE_H
#define CHOIR_TEST_FORK_CASE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* In the parent: counts the case as one check, passed when the child's checks all passed; a
 * child that only skipped (CHECK_SKIPPED, exit CHECK_SKIP) counts as skipped, not as a check.
 * The child's skips reach the parent's count through a shared page. */
static void fork_case(const char* name, void (*fn)(void)) {
  /* CHOIR_TEST_CASE=name runs that case alone (while debugging one). */
  const char* only = getenv("CHOIR_TEST_CASE");
  if (only != NULL && only[0] != '\0' && strcmp(only, name) != 0) return;
  static int* skips_shared;
  if (skips_shared == NULL) {
    void* p = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    skips_shared = p == MAP_FAILED ? NULL : p;
  }
  if (skips_shared != NULL) *skips_shared = 0;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    check_count_ = check_failures_ = check_skips_ = 0;
    fn();
    fflush(stdout);
    if (skips_shared != NULL) *skips_shared = check_skips_;
    _exit(check_failures_ ? 1 : check_count_ > 0 ? 0 : check_skips_ > 0 ? CHECK_SKIP : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (skips_shared != NULL) check_skips_ += *skips_shared;
  if (WIFEXITED(status) && WEXITSTATUS(status) == CHECK_SKIP) return;
  check_count_++;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    check_failures_++;
    fprintf(stderr, "case %s failed (status 0x%x)\n", name, status);
  }
}

#endif
