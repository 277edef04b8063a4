/*
 * Unit test of the perf tools' command line: defaults (nccl-tests'), every option, size parsing,
 * the size sweep, and an error message naming the option for every kind of bad input.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "perf.h"


/* Parse a NULL-terminated list of arguments (after the program name). */
static int parse(struct perf_opts* o, int mpi, char* err, size_t errlen, ...) {
  char* argv[64];
  int argc = 0;
  va_list ap;
  argv[argc++] = (char*)"all_reduce_perf";
  va_start(ap, errlen);
  for (char* a; (a = va_arg(ap, char*)) != NULL;) argv[argc++] = a;
  va_end(ap);
  argv[argc] = NULL;
  return perf_opts_parse(o, argc, argv, mpi, err, errlen);
}

static void test_defaults(void) {
  struct perf_opts o;
  char err[256];
  CHECK_MSG(parse(&o, 0, err, sizeof err, NULL) == 0, "%s", err);
  CHECK_MSG(o.nthreads == 1 && o.ngpus == 1 && o.nprocs == 1, "process layout defaults");
  CHECK_MSG(o.min_bytes == 32u << 20 && o.max_bytes == 32u << 20 && o.step_bytes == 1u << 20 &&
            o.step_factor == 1,
        "size defaults");
  CHECK_MSG(o.iters == 20 && o.warmup == 1 && o.agg == 1 && o.check == 1, "iteration defaults");
  CHECK_MSG(o.ntypes == 1 && o.types[0] == REF_FLOAT32 && o.nops == 1 && o.ops[0] == REF_SUM,
        "float sum by default");
  CHECK_MSG(o.root == 0 && o.blocking == 0 && o.graph == 0 && o.average == 1 && o.timeout == 0 &&
            o.json == NULL && o.help == 0,
        "other defaults");
  CHECK_MSG(o.ranks_per_gpu == 1, "one rank per GPU by default");
}

static void test_all_options(void) {
  struct perf_opts o;
  char err[256];
  int rc =
      parse(&o, 0, err, sizeof err, "-t", "2", "-g", "4", "-p", "3", "-b", "8", "-e", "8G", "-f",
            "2", "-i", "4K", "-n", "5", "-w", "0", "-m", "3", "-c", "2", "-d", "bf16", "-o",
            "premulsum", "-r", "1", "-z", "2", "-a", "3", "-T", "60", "-J", "out.json", NULL);
  CHECK_MSG(rc == 0, "%s", err);
  CHECK_MSG(o.nthreads == 2 && o.ngpus == 4 && o.nprocs == 3, "-t -g -p");
  CHECK_MSG(o.min_bytes == 8 && o.max_bytes == 8ull << 30 && o.step_factor == 2 && o.step_bytes == 4096,
        "-b -e -f -i");
  CHECK_MSG(o.iters == 5 && o.warmup == 0 && o.agg == 3 && o.check == 2, "-n -w -m -c");
  CHECK_MSG(o.ntypes == 1 && o.types[0] == REF_BFLOAT16, "-d bf16");
  CHECK_MSG(o.nops == 1 && o.ops[0] == REF_PREMULSUM, "-o premulsum");
  CHECK_MSG(o.root == 1 && o.blocking == 2 && o.average == 3 && o.timeout == 60, "-r -z -a -T");
  CHECK_MSG(o.json && !strcmp(o.json, "out.json"), "-J");

  rc = parse(&o, 0, err, sizeof err, "--nthreads", "3", "--ngpus=2", "--minbytes", "1M",
             "--maxbytes", "1.5M", "--stepfactor", "4", "--iters", "7", "--warmup_iters", "2",
             "--agg_iters", "2", "--check", "0", "--datatype", "all", "--op", "all", "--root",
             "all", "--cudagraph", "10", "--output_json", "x.json", NULL);
  CHECK_MSG(rc == 0, "%s", err);
  CHECK_MSG(o.nthreads == 3 && o.ngpus == 2 && o.min_bytes == 1u << 20 && o.max_bytes == 1572864,
        "long options");
  CHECK_MSG(o.iters == 7 && o.warmup == 2 && o.agg == 2 && o.check == 0 && o.graph == 10,
        "long options (counts)");
  CHECK_MSG(o.ntypes == REF_NTYPES && o.nops == REF_NOPS && o.root == -1, "all types, ops, roots");
  for (int t = 0; t < REF_NTYPES; t++) CHECK_MSG(o.types[t] == t, "type %d in order", t);
  for (int p = 0; p < REF_NOPS; p++) CHECK_MSG(o.ops[p] == p, "op %d in order", p);

  CHECK_MSG(o.local_register == 0, "no registration by default");
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-R", "2", NULL) == 0 && o.local_register == 2, "-R 2");
  CHECK_MSG(parse(&o, 0, err, sizeof err, "--local_register=1", NULL) == 0 && o.local_register == 1,
            "--local_register=1");
  CHECK_MSG(o.cuda_malloc == 0, "ncclMemAlloc by default");
  CHECK_MSG(parse(&o, 0, err, sizeof err, "--cudamalloc", NULL) == 0 && o.cuda_malloc == 1,
        "--cudamalloc");
  CHECK_MSG(parse(&o, 0, err, sizeof err, "--ranks-per-gpu", "4", "-g", "4", NULL) == 0 &&
                o.ranks_per_gpu == 4 && o.ngpus == 4,
            "--ranks-per-gpu 4: %s", err);
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-t", "2", "-g", "2", "--ranks-per-gpu=4", NULL) == 0 &&
                o.ranks_per_gpu == 4 && o.nthreads == 2 && o.ngpus == 2,
            "--ranks-per-gpu=4 with -t and -g: %s", err);
  CHECK_MSG(parse(&o, 1, err, sizeof err, "--ranks-per-gpu", "2", NULL) == 0 &&
                o.ranks_per_gpu == 2,
            "--ranks-per-gpu in the MPI build: %s", err);
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-h", NULL) == 0 && o.help, "-h");
  CHECK_MSG(parse(&o, 0, err, sizeof err, "--help", NULL) == 0 && o.help, "--help");
  /* Parsing again starts from the defaults (getopt is reset). */
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-n", "9", NULL) == 0 && o.iters == 9 && o.help == 0 &&
            o.ntypes == 1,
        "reparse");
}

static void test_names(void) {
  static const struct {
    const char* name;
    int type;
  } types[] = {{"int8", REF_INT8},         {"char", REF_INT8},        {"uint8", REF_UINT8},
               {"int32", REF_INT32},       {"int", REF_INT32},        {"uint32", REF_UINT32},
               {"int64", REF_INT64},       {"uint64", REF_UINT64},    {"half", REF_FLOAT16},
               {"fp16", REF_FLOAT16},      {"float", REF_FLOAT32},    {"double", REF_FLOAT64},
               {"bfloat16", REF_BFLOAT16}, {"f8e4m3", REF_FP8_E4M3},  {"fp8_e4m3", REF_FP8_E4M3},
               {"f8e5m2", REF_FP8_E5M2},   {"fp8_e5m2", REF_FP8_E5M2}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    CHECK_MSG(perf_type_from_name(types[i].name) == types[i].type, "type %s", types[i].name);
  CHECK_MSG(perf_type_from_name("float128") == -1 && perf_type_from_name("") == -1, "unknown types");
  /* Every type's output name parses back to it. */
  for (int t = 0; t < REF_NTYPES; t++)
    CHECK_MSG(perf_type_from_name(ref_type_name(t)) == t, "type %d round trip", t);
  CHECK_MSG(perf_op_from_name("sum") == REF_SUM && perf_op_from_name("prod") == REF_PROD &&
            perf_op_from_name("max") == REF_MAX && perf_op_from_name("min") == REF_MIN &&
            perf_op_from_name("avg") == REF_AVG &&
            perf_op_from_name("premulsum") == REF_PREMULSUM &&
            perf_op_from_name("mulsum") == REF_PREMULSUM && perf_op_from_name("xor") == -1,
        "operator names");
  CHECK_MSG(!strcmp(perf_op_label(REF_PREMULSUM), "mulsum") &&
            !strcmp(perf_op_label(PERF_OP_NONE), "none") && !strcmp(perf_op_label(REF_AVG), "avg"),
        "operator labels");
}

static void test_sizes(void) {
  static const struct {
    const char* s;
    size_t v;
  } ok[] = {{"0", 0},        {"8", 8},          {"64K", 65536},     {"64k", 65536},
            {"1M", 1048576}, {"1.5M", 1572864}, {"8G", 8ull << 30}, {"2g", 2ull << 30},
            {"1e3", 1000},   {"0.5K", 512}};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    size_t v = 1234;
    CHECK_MSG(perf_parse_size(ok[i].s, &v) == 0 && v == ok[i].v, "size '%s' -> %zu", ok[i].s, v);
  }
  static const char* const bad[] = {"",    "-8",  "+8",  "8X",   "8KB", "K",
                                    "abc", "nan", "inf", "1e30", " 8",  "8 "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    size_t v;
    CHECK_MSG(perf_parse_size(bad[i], &v) != 0, "size '%s' must be rejected", bad[i]);
  }

  struct perf_opts o;
  char err[256];
  size_t s[64];
  /* nccl-tests' classic sweep: 8 B to 128 MB by 2 is 25 sizes. */
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-b", "8", "-e", "128M", "-f", "2", NULL) == 0, "%s", err);
  size_t n = perf_sizes(&o, s, 64);
  CHECK_MSG(n == 25 && s[0] == 8 && s[1] == 16 && s[24] == 128u << 20, "factor sweep: %zu sizes", n);
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-b", "1K", "-e", "4K", "-i", "1K", NULL) == 0, "%s", err);
  n = perf_sizes(&o, s, 64);
  CHECK_MSG(n == 4 && s[0] == 1024 && s[3] == 4096, "step sweep: %zu sizes", n);
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-b", "100", "-e", "1000", "-f", "3", NULL) == 0, "%s", err);
  n = perf_sizes(&o, s, 64);
  CHECK_MSG(n == 3 && s[2] == 900, "factor 3 stops below -e: %zu sizes", n);
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-b", "8G", "-e", "8G", NULL) == 0, "%s", err);
  CHECK_MSG(perf_sizes(&o, s, 64) == 1 && s[0] == 8ull << 30, "single size");
  /* Counting continues beyond the capacity so that the caller can refuse huge sweeps. */
  CHECK_MSG(parse(&o, 0, err, sizeof err, "-b", "1", "-e", "100", "-i", "1", NULL) == 0, "%s", err);
  CHECK_MSG(perf_sizes(&o, s, 10) == 100, "count beyond capacity");
}

/* Every bad input fails with PERF_EXIT_USAGE and a message naming the option. */
static void expect_error(const char* what, const char* needle, ...) {
  struct perf_opts o;
  char err[256];
  char* argv[16];
  int argc = 0;
  va_list ap;
  argv[argc++] = (char*)"all_reduce_perf";
  va_start(ap, needle);
  for (char* a; (a = va_arg(ap, char*)) != NULL;) argv[argc++] = a;
  va_end(ap);
  argv[argc] = NULL;
  int mpi = !strcmp(what, "mpi -p");
  int rc = perf_opts_parse(&o, argc, argv, mpi, err, sizeof err);
  CHECK_MSG(rc == PERF_EXIT_USAGE, "%s: rc %d", what, rc);
  CHECK_MSG(strstr(err, needle) != NULL, "%s: message '%s' lacks '%s'", what, err, needle);
}

static void test_errors(void) {
  expect_error("threads", "-t (--nthreads)", "-t", "0", NULL);
  expect_error("gpus", "-g (--ngpus)", "-g", "x", NULL);
  expect_error("procs", "-p (--procs)", "-p", "-1", NULL);
  expect_error("mpi -p", "-p (--procs): not available in the MPI build", "-p", "2", NULL);
  expect_error("min", "-b (--minbytes)", "-b", "8X", NULL);
  expect_error("max", "-e (--maxbytes)", "-e", "", NULL);
  expect_error("step", "-i (--stepbytes)", "-i", "1Q", NULL);
  expect_error("factor", "-f (--stepfactor)", "-f", "1.5", NULL);
  expect_error("iters", "-n (--iters)", "-n", "0", NULL);
  expect_error("warmup", "-w (--warmup_iters)", "-w", "-1", NULL);
  expect_error("agg", "-m (--agg_iters)", "-m", "0", NULL);
  expect_error("check", "-c (--check)", "-c", "yes", NULL);
  expect_error("type", "-d (--datatype): unknown type 'float128'", "-d", "float128", NULL);
  expect_error("op", "-o (--op): unknown operator 'xor'", "-o", "xor", NULL);
  expect_error("root", "-r (--root)", "-r", "-2", NULL);
  expect_error("blocking", "-z (--blocking)", "-z", "3", NULL);
  expect_error("graph", "-G (--cudagraph)", "-G", "many", NULL);
  expect_error("average", "-a (--average)", "-a", "4", NULL);
  expect_error("timeout", "-T (--timeout)", "-T", "1s", NULL);
  expect_error("json", "-J (--output_json)", "-J", "", NULL);
  expect_error("missing", "-n (--iters): missing argument", "-n", NULL);
  expect_error("missing long", "-e (--maxbytes): missing argument", "--maxbytes", NULL);
  expect_error("unknown", "unknown option -q", "-q", NULL);
  expect_error("unknown long", "unknown option --bogus", "--bogus", NULL);
  expect_error("flag with value", "option --cudamalloc takes no value, got '--cudamalloc=1'",
               "--cudamalloc=1", NULL);
  expect_error("help with value", "option --help takes no value", "--help=yes", NULL);
  expect_error("positional", "unexpected argument 'extra'", "extra", NULL);
  expect_error("min > max", "-b (--minbytes): 64 is larger than the maximum size -e 8", "-b", "64",
               "-e", "8", NULL);
  expect_error("zero with factor", "-b (--minbytes): must be at least 1 with -f", "-b", "0", "-e",
               "8", "-f", "2", NULL);
  expect_error("zero step", "-i (--stepbytes): must be at least 1", "-b", "8", "-e", "16", "-i",
               "0", NULL);
  expect_error("graph and blocking", "-z (--blocking): cannot be combined with -G", "-z", "1", "-G",
               "1", NULL);
  expect_error("too many ranks", "more than 65536 ranks", "-p", "1024", "-t", "1024", "-g", "2",
               NULL);
  expect_error("ranks per gpu 0", "option --ranks-per-gpu: expected an integer from 1 to 1024, "
               "got '0'", "--ranks-per-gpu", "0", NULL);
  expect_error("ranks per gpu text", "option --ranks-per-gpu: expected an integer", "--ranks-per-gpu",
               "four", NULL);
  expect_error("ranks per gpu missing", "option --ranks-per-gpu: missing argument",
               "--ranks-per-gpu", NULL);
  /* Long option only: the short letters are nccl-tests'. */
  expect_error("no short letter", "unknown option -Q", "-Q", "2", NULL);
  expect_error("-R out of range", "-R", "-R", "3", NULL);
  expect_error("-R 2 with cudaMalloc", "drop --cudamalloc", "-R", "2", "--cudamalloc", NULL);
}

int main(void) {
  test_defaults();
  test_all_options();
  test_names();
  test_sizes();
  test_errors();
  return check_finish("perf-opts");
}
