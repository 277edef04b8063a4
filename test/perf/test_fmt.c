/*
 * Unit test of the perf tools' output: the nccl-tests text layout (header, rows, footer, number
 * widths), byte for byte, and the JSON report.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "perf.h"


/* Capture what fn writes. */
struct capture {
  char* buf;
  size_t len;
  FILE* f;
};

static void cap_open(struct capture* c) {
  c->buf = NULL;
  c->len = 0;
  c->f = open_memstream(&c->buf, &c->len);
}

static char* cap_close(struct capture* c) {
  fclose(c->f);
  return c->buf;
}

static void test_numbers(void) {
  static const struct {
    double v;
    int width;
    const char* want;
  } cases[] = {
      {0.0, 6, "  0.00"},       {9.1, 7, "   9.10"},        {123.456, 6, "123.46"},
      {1234.5, 6, "1234.5"},    {12345.6, 6, " 12346"},     {123456.7, 6, "123457"},
      {1234567.0, 6, " 1e+06"}, {12345678.0, 7, "1.2e+07"}, {35305.24, 7, "35305.2"},
      {135306.4, 7, " 135306"}, {1234567.0, 7, "1234567"},  {0.004, 6, "  0.00"},
      {365.0, 6, "365.00"},     {18.5, 7, "  18.50"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char buf[32];
    perf_fmt_num(buf, sizeof buf, cases[i].v, cases[i].width);
    CHECK_MSG(!strcmp(buf, cases[i].want), "%g in %d: '%s', want '%s'", cases[i].v, cases[i].width, buf,
          cases[i].want);
  }
}

static void test_table(void) {
  struct capture c;
  cap_open(&c);
  perf_fmt_table_header(c.f);
  char* s = cap_close(&c);
  const char* want =
      "#\n"
      "#                                                              out-of-place                 "
      " "
      "     in-place          \n"
      "#       size         count      type   redop    root     time   algbw   busbw  #wrong     t"
      "ime   algbw   busbw  #wrong \n"
      "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (u"
      "s)  (GB/s)  (GB/s)         \n";
  CHECK_MSG(!strcmp(s, want), "header:\n%s\nwant:\n%s", s, want);
  free(s);

  struct perf_row r = {8, 2, "float", "sum", -1, {{9.1, 0.0, 0.0, 1, 0}, {8.95, 0.0, 0.0, 0, 0}}};
  cap_open(&c);
  perf_fmt_row(c.f, &r);
  s = cap_close(&c);
  want = "           8             2     float     sum      -1     9.10    0.00    0.00       0  "
         "   8.95    0.00    0.00    N/A\n";
  CHECK_MSG(!strcmp(s, want), "row:\n'%s'\nwant:\n'%s'", s, want);
  free(s);

  struct perf_row r2 = {8589934592ull,
                        2147483648ull,
                        "bfloat16",
                        "mulsum",
                        3,
                        {{35305.24, 243.31, 364.97, 1, 1234567}, {135306.4, 243.30, 364.95, 1, 0}}};
  cap_open(&c);
  perf_fmt_row(c.f, &r2);
  s = cap_close(&c);
  want =
      "  8589934592    2147483648  bfloat16  mulsum       3  35305.2  243.31  364.97  1.23457e+06"
      "   135306  243.30  364.95       0\n";
  CHECK_MSG(!strcmp(s, want), "row:\n'%s'\nwant:\n'%s'", s, want);
  free(s);

  cap_open(&c);
  perf_fmt_footer(c.f, 0, 123.456, "all_reduce_perf");
  s = cap_close(&c);
  want = "# Out of bounds values : 0 OK\n"
         "# Avg bus bandwidth    : 123.456 \n"
         "#\n"
         "# Collective test concluded: all_reduce_perf\n\n";
  CHECK_MSG(!strcmp(s, want), "footer:\n'%s'", s);
  free(s);
  cap_open(&c);
  perf_fmt_footer(c.f, 3, 0.5, "x");
  s = cap_close(&c);
  CHECK_MSG(strstr(s, "# Out of bounds values : 3 FAILED\n") != NULL, "failed footer: '%s'", s);
  free(s);
}

static void test_config(void) {
  struct perf_opts o;
  char err[256];
  char* argv[] = {(char*)"all_reduce_perf",
                  (char*)"-b",
                  (char*)"8",
                  (char*)"-e",
                  (char*)"128M",
                  (char*)"-f",
                  (char*)"2",
                  (char*)"-g",
                  (char*)"4",
                  (char*)"-z",
                  (char*)"1",
                  NULL};
  CHECK_MSG(perf_opts_parse(&o, 11, argv, 0, err, sizeof err) == 0, "%s", err);
  struct capture c;
  cap_open(&c);
  perf_fmt_config(c.f, &o, "all_reduce_perf", 22809, 22809, "/opt/lib/libnccl.so.2");
  char* s = cap_close(&c);
  CHECK_MSG(strstr(s, "# Collective test starting: all_reduce_perf\n") != NULL, "%s", s);
  CHECK_MSG(strstr(s, "# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: "
                  "1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0\n") != NULL,
        "%s", s);
  CHECK_MSG(strstr(s, "nccl-headers=22809 nccl-library=22809\n") != NULL, "%s", s);
  CHECK_MSG(strstr(s, "# Blocking Enabled: wait for completion and barrier after each collective \n") !=
            NULL,
        "%s", s);
  CHECK_MSG(strstr(s, "# Library: /opt/lib/libnccl.so.2\n") != NULL, "%s", s);
  free(s);

  struct perf_devinfo d = {0, 12345, 0, 0, 0x18, 0, "node1", "NVIDIA H100 80GB HBM3"};
  cap_open(&c);
  perf_fmt_devices(c.f, &d, 1);
  s = cap_close(&c);
  CHECK_MSG(!strcmp(s,
                "# Using devices\n"
                "#  Rank  0 Group  0 Pid  12345 on      node1 device  0 [0000:18:00] NVIDIA H100 "
                "80GB HBM3\n"),
        "'%s'", s);
  free(s);
}

static void test_json(void) {
  char path[] = "/tmp/perf_test_fmt_XXXXXX";
  int fd = mkstemp(path);
  CHECK_MSG(fd >= 0, "mkstemp");
  if (fd < 0) return;
  close(fd);
  char err[256];
  struct perf_opts o;
  char* argv[] = {(char*)"all_reduce_perf",
                  (char*)"-b",
                  (char*)"8",
                  (char*)"-e",
                  (char*)"16",
                  (char*)"-f",
                  (char*)"2",
                  (char*)"-J",
                  path,
                  NULL};
  CHECK_MSG(perf_opts_parse(&o, 9, argv, 0, err, sizeof err) == 0, "%s", err);
  struct perf_json* j = perf_json_open(path, err, sizeof err);
  CHECK_MSG(j != NULL, "%s", err);
  if (!j) return;
  struct perf_devinfo d = {0, 42, 0, 0, 0x18, 0, "host\"q", "GPU"};
  perf_json_begin(j, 9, argv, &o, "all_reduce_perf", 1, 1, 22809, "/lib/libnccl.so.2", &d, 1);
  struct perf_row r = {8, 2, "float", "sum", -1, {{9.1, 0.5, 0.25, 1, 0}, {8.95, 0.5, 0.25, 0, 0}}};
  perf_json_row(j, &r, 20);
  r.bytes = 16;
  r.half[0].nwrong = 3;
  perf_json_row(j, &r, 20);
  CHECK_MSG(perf_json_close(j, 1, 0.25, NULL) == 0, "close");

  FILE* f = fopen(path, "r");
  char buf[16384];
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  buf[n] = '\0';
  if (f) fclose(f);
  unlink(path);
  static const char* const needles[] = {
      "\"version\":2",
      "\"config\":{\"collective\":\"all_reduce_perf\",\"nprocs\":1,\"nthreads\":1,\"ngpus\":1,"
      "\"nranks\":1,\"minimum_bytes\":8,\"maximum_bytes\":16,\"step_factor\":2,",
      "\"devices\":[{\"rank\":0,\"group\":0,\"pid\":42,\"hostname\":\"host\\\"q\",\"device\":0,"
      "\"device_hex\":\"0000:18:00\",\"device_info\":\"GPU\"}]",
      "\"results\":[{\"size\":8,\"count\":2,\"type\":\"float\",\"redop\":\"sum\",\"root\":-1,"
      "\"out_of_place\":{\"time\":9.1,\"alg_bw\":0.5,\"bus_bw\":0.25,\"nwrong\":0},"
      "\"in_place\":{\"time\":8.95,\"alg_bw\":0.5,\"bus_bw\":0.25,\"nwrong\":null},"
      "\"actual_iterations\":20},{\"size\":16,",
      "\"nwrong\":3",
      "\"out_of_bounds\":{\"count\":1,\"okay\":false}",
      "\"average_bus_bandwidth\":{\"bandwidth\":0.25,\"okay\":\"unchecked\"}",
      "\"errors\":[]",
      "\"library\":\"/lib/libnccl.so.2\"",
      "\"nccl_version\":22809",
  };
  for (size_t i = 0; i < sizeof needles / sizeof needles[0]; i++)
    CHECK_MSG(strstr(buf, needles[i]) != NULL, "JSON lacks %s in:\n%s", needles[i], buf);
  int depth = 0, ok = 1, in_str = 0;
  for (char* p = buf; *p; p++) {
    if (in_str) {
      if (*p == '\\')
        p++;
      else if (*p == '"')
        in_str = 0;
      continue;
    }
    if (*p == '"') in_str = 1;
    if (*p == '{' || *p == '[') depth++;
    if (*p == '}' || *p == ']') ok &= --depth >= 0;
  }
  CHECK_MSG(ok && depth == 0 && !in_str, "JSON brackets balance");
  CHECK_MSG(perf_json_open("/nonexistent-dir/x.json", err, sizeof err) == NULL &&
            strstr(err, "/nonexistent-dir/x.json") != NULL,
        "unwritable path: '%s'", err);
}

int main(void) {
  test_numbers();
  test_table();
  test_config();
  test_json();
  return check_finish("perf-fmt");
}
