/*
 * The test harness itself (test/harness/check.h, test/unit/fork_case.h): a case that cannot run
 * here is reported as skipped, never as passed, and a test whose cases all skipped exits 77.
 * Each scenario runs as a fresh process of this program; the parent checks its exit status and
 * its summary line.
 *
 *   test-check               run every scenario
 *   test-check --scenario S  one scenario (S: all-skip, mixed, skip-in-child, fail-and-skip)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fork_case.h"

static void case_pass(void) { CHECK_TRUE(1 + 1 == 2); }
static void case_skip(void) { CHECK_SKIPPED("no such interface here"); }
static void case_pass_and_skip(void) {
  CHECK_TRUE(2 + 2 == 4);
  CHECK_SKIPPED("the IPv6 half of this case");
}
static void case_fail(void) { CHECK_TRUE(1 + 1 == 3); }

static int scenario(const char* s) {
  if (strcmp(s, "all-skip") == 0) {
    fork_case("skip1", case_skip);
    fork_case("skip2", case_skip);
  } else if (strcmp(s, "mixed") == 0) {
    fork_case("pass", case_pass);
    fork_case("skip", case_skip);
  } else if (strcmp(s, "skip-in-child") == 0) {
    fork_case("pass_and_skip", case_pass_and_skip);
  } else if (strcmp(s, "fail-and-skip") == 0) {
    fork_case("fail", case_fail);
    fork_case("skip", case_skip);
  } else if (strcmp(s, "direct-skip") == 0) {
    CHECK_SKIPPED("nothing to run on this machine");
  } else {
    return 2;
  }
  return check_finish(s);
}

/* Runs one scenario in a fresh process; returns its exit status and its stdout in out. */
static int run_scenario(const char* s, char* out, size_t size) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl("/proc/self/exe", "test-check", "--scenario", s, (char*)NULL);
    _exit(127);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t k;
  while (n + 1 < size && (k = read(fds[0], out + n, size - 1 - n)) > 0) n += (size_t)k;
  out[n] = '\0';
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  printf("--- scenario %s (exit %d):\n%s", s, WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int main(int argc, char** argv) {
  if (argc == 3 && strcmp(argv[1], "--scenario") == 0) return scenario(argv[2]);
  char out[4096];
  /* Every case skipped: the whole test is skipped (77), with the count. */
  CHECK_EQ_INT(run_scenario("all-skip", out, sizeof(out)), CHECK_SKIP);
  CHECK_CONTAINS(out, "all-skip: skipped: all 2 case(s)");
  CHECK_EQ_INT(run_scenario("direct-skip", out, sizeof(out)), CHECK_SKIP);
  /* A pass and a skip: passes, and says one case was skipped (not "2/2 passed"). */
  CHECK_EQ_INT(run_scenario("mixed", out, sizeof(out)), 0);
  CHECK_CONTAINS(out, "mixed: 1/1 checks passed, 1 case(s) skipped");
  /* A skip inside a case that also checked something reaches the parent's count. */
  CHECK_EQ_INT(run_scenario("skip-in-child", out, sizeof(out)), 0);
  CHECK_CONTAINS(out, "skip-in-child: 1/1 checks passed, 1 case(s) skipped");
  /* A skip never hides a failure. */
  CHECK_EQ_INT(run_scenario("fail-and-skip", out, sizeof(out)), 1);
  CHECK_CONTAINS(out, "fail-and-skip: 0/1 checks passed, 1 case(s) skipped");
  return check_finish("check");
}
