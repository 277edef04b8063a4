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

int main(void) {
  fork_case("defaults", case_defaults);
  fork_case("lazy_then_cached", case_lazy_then_cached);
  fork_case("bad_integer", case_bad_integer);
  fork_case("conf_file", case_conf_file);
  fork_case("home_conf", case_home_conf);
  fork_case("table", case_table);
  return check_finish("param");
}
