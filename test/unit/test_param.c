/* Parameters: defaults, lazy reads, caching, bad values, conf files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "fork_case.h"

static void case_defaults(void) {
  unsetenv("CHOIR_TEST_INT");
  unsetenv("CHOIR_TEST_STR");
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  CHECK_EQ_INT(param_int(PARAM_TEST_INT), 42);
  CHECK_EQ_INT(param_int(PARAM_TEST_NEG), -1);
  CHECK_EQ_STR(param_str(PARAM_TEST_STR), "dflt");
  CHECK_TRUE(!param_is_set(PARAM_TEST_INT));
  CHECK_TRUE(param_str(PARAM_NET_PLUGIN) == NULL || getenv("NCCL_NET_PLUGIN") != NULL);
}

static void case_lazy_then_cached(void) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  /* Set after the library started but before the first read: must be seen. */
  setenv("CHOIR_TEST_INT", "0x10", 1);
  CHECK_EQ_INT(param_int(PARAM_TEST_INT), 16);
  CHECK_TRUE(param_is_set(PARAM_TEST_INT));
  /* Read once, then kept: later changes do not move it. */
  setenv("CHOIR_TEST_INT", "99", 1);
  CHECK_EQ_INT(param_int(PARAM_TEST_INT), 16);
  setenv("CHOIR_TEST_NEG", " -7 ", 1); /* surrounding blanks are tolerated */
  CHECK_EQ_INT(param_int(PARAM_TEST_NEG), -7);
}

static void case_bad_integer(void) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  setenv("CHOIR_TEST_INT", "12abc", 1);
  err_clear_last();
  CHECK_EQ_INT(param_int(PARAM_TEST_INT), 42);
  CHECK_CONTAINS(err_last(), "CHOIR_TEST_INT=12abc is not an integer");
  CHECK_TRUE(!param_is_set(PARAM_TEST_INT));
  setenv("CHOIR_TEST_NEG", "99999999999999999999", 1); /* out of range */
  CHECK_EQ_INT(param_int(PARAM_TEST_NEG), -1);
  CHECK_CONTAINS(err_last(), "CHOIR_TEST_NEG=99999999999999999999 is not an integer");
}

static void case_conf_file(void) {
  char path[] = "/tmp/choir-conf-XXXXXX";
  int fd = mkstemp(path);
  CHECK_TRUE(fd >= 0);
  FILE* f = fdopen(fd, "w");
  fprintf(f, "# comment\n\n  CHOIR_TEST_STR = from_file  \nCHOIR_TEST_INT=7\nnot a line\n");
  fclose(f);
  setenv("NCCL_CONF_FILE", path, 1);
  setenv("CHOIR_TEST_INT", "5", 1); /* the environment wins over the file */
  unsetenv("CHOIR_TEST_STR");
  CHECK_EQ_STR(param_str(PARAM_TEST_STR), "from_file");
  CHECK_EQ_INT(param_int(PARAM_TEST_INT), 5);
  unlink(path);
}

static void case_home_conf(void) {
  char dir[] = "/tmp/choir-home-XXXXXX";
  CHECK_TRUE(mkdtemp(dir) != NULL);
  char path[256];
  snprintf(path, sizeof(path), "%s/.nccl.conf", dir);
  FILE* f = fopen(path, "w");
  fprintf(f, "CHOIR_TEST_INT=123\n");
  fclose(f);
  unsetenv("NCCL_CONF_FILE");
  unsetenv("CHOIR_TEST_INT");
  setenv("HOME", dir, 1);
  CHECK_EQ_INT(param_int(PARAM_TEST_INT), 123);
  unlink(path);
  rmdir(dir);
}

static void case_table(void) {
  /* Every knob has a name, help text and a type-consistent default. */
  for (int i = 0; i < PARAM_COUNT; i++) {
    const param_desc_t* d = param_desc((param_id_t)i);
    CHECK_TRUE(d->env != NULL && (strncmp(d->env, "NCCL_", 5) == 0 ||
                                  strncmp(d->env, "CHOIR_", 6) == 0));
    CHECK_TRUE(d->help != NULL && strlen(d->help) > 10);
    for (int j = 0; j < i; j++) CHECK_TRUE(strcmp(d->env, param_desc((param_id_t)j)->env) != 0);
  }
}

/* sys_host_hash in a fresh process (the knob is read once per process) with NCCL_HOSTID set. */
static uint64_t host_hash_with(const char* hostid) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    setenv("NCCL_HOSTID", hostid, 1);
    const uint64_t h = sys_host_hash();
    _exit(write(fds[1], &h, sizeof(h)) == (ssize_t)sizeof(h) ? 0 : 1);
  }
  close(fds[1]);
  uint64_t h = 0;
  if (read(fds[0], &h, sizeof(h)) != (ssize_t)sizeof(h)) h = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? h : 0;
}

/* NCCL_HOSTID replaces the host identity: equal values mean one host, different values two. */
static void case_hostid(void) {
  /* The children first: this process must not have read (and cached) the knob before. */
  const uint64_t a1 = host_hash_with("node-a"), a2 = host_hash_with("node-a");
  const uint64_t b = host_hash_with("node-b");
  unsetenv("NCCL_HOSTID");
  const uint64_t real = sys_host_hash();
  /* Without NCCL_HOSTID the identity is the host name (up to its first dot) followed by the
   * kernel's boot id line, built here from the system's own answers. */
  char ident[512] = "";
  char host[256] = "";
  CHECK_TRUE(gethostname(host, sizeof(host) - 1) == 0);
  host[strcspn(host, ".")] = '\0';
  size_t n = (size_t)snprintf(ident, sizeof(ident), "%s", host);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (fgets(ident + n, (int)(sizeof(ident) - n), f) == NULL) ident[n] = '\0';
    fclose(f);
  }
  CHECK_MSG(real == sys_hash(ident, strlen(ident)),
            "sys_host_hash() is not the hash of host name and boot id \"%s\"", ident);
  CHECK_TRUE(a1 != 0 && b != 0);
  CHECK_TRUE(a1 == sys_hash("node-a", 6)); /* NCCL_HOSTID is the whole identity */
  CHECK_TRUE(b == sys_hash("node-b", 6));
  CHECK_TRUE(a1 == a2); /* same NCCL_HOSTID: same host */
  CHECK_TRUE(a1 != b);  /* different: different hosts */
  CHECK_TRUE(a1 != real && b != real);
}

int main(void) {
  fork_case("defaults", case_defaults);
  fork_case("lazy_then_cached", case_lazy_then_cached);
  fork_case("bad_integer", case_bad_integer);
  fork_case("conf_file", case_conf_file);
  fork_case("home_conf", case_home_conf);
  fork_case("table", case_table);
  fork_case("hostid", case_hostid);
  return check_finish("param");
}
