/*
 * Choir perf tools: command line. Option letters, long names and defaults are nccl-tests' (see
 * README.md for the few differences); every error names the option it is about.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#define PERF_MAX_RANKS 65536

/* Long options without a letter (the letters are nccl-tests'). */
#define PERF_OPT_CUDAMALLOC 0x100
#define PERF_OPT_RANKS_PER_GPU 0x101

struct perf_name {
  const char* name;
  int value;
};

static const struct perf_name perf_type_names[] = {
    {"int8", REF_INT8},     {"char", REF_INT8},       {"uint8", REF_UINT8},
    {"int32", REF_INT32},   {"int", REF_INT32},       {"uint32", REF_UINT32},
    {"int64", REF_INT64},   {"uint64", REF_UINT64},   {"half", REF_FLOAT16},
    {"fp16", REF_FLOAT16},  {"float16", REF_FLOAT16}, {"float", REF_FLOAT32},
    {"fp32", REF_FLOAT32},  {"float32", REF_FLOAT32}, {"double", REF_FLOAT64},
    {"fp64", REF_FLOAT64},  {"float64", REF_FLOAT64}, {"bfloat16", REF_BFLOAT16},
    {"bf16", REF_BFLOAT16}, {"f8e4m3", REF_FP8_E4M3}, {"fp8_e4m3", REF_FP8_E4M3},
    {"e4m3", REF_FP8_E4M3}, {"f8e5m2", REF_FP8_E5M2}, {"fp8_e5m2", REF_FP8_E5M2},
    {"e5m2", REF_FP8_E5M2},
};

static const struct perf_name perf_op_names[] = {
    {"sum", REF_SUM}, {"prod", REF_PROD},           {"max", REF_MAX},          {"min", REF_MIN},
    {"avg", REF_AVG}, {"premulsum", REF_PREMULSUM}, {"mulsum", REF_PREMULSUM},
};

int perf_type_from_name(const char* s) {
  for (size_t i = 0; i < sizeof perf_type_names / sizeof perf_type_names[0]; i++)
    if (strcmp(s, perf_type_names[i].name) == 0) return perf_type_names[i].value;
  return -1;
}

int perf_op_from_name(const char* s) {
  for (size_t i = 0; i < sizeof perf_op_names / sizeof perf_op_names[0]; i++)
    if (strcmp(s, perf_op_names[i].name) == 0) return perf_op_names[i].value;
  return -1;
}

const char* perf_op_label(int op) {
  if (op == PERF_OP_NONE) return "none";
  return op == REF_PREMULSUM ? "mulsum" : ref_op_name(op);
}

int perf_parse_size(const char* s, size_t* out) {
  char* end;
  double unit = 1.0;
  if (!*s || *s == '-' || *s == '+' || *s == ' ') return -1;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno) return -1;
  switch (*end) {
  case '\0': break;
  case 'k':
  case 'K':
    unit = 1024.0;
    end++;
    break;
  case 'm':
  case 'M':
    unit = 1024.0 * 1024.0;
    end++;
    break;
  case 'g':
  case 'G':
    unit = 1024.0 * 1024.0 * 1024.0;
    end++;
    break;
  default: return -1;
  }
  if (*end) return -1;
  v *= unit;
  if (!(v >= 0.0) || v > 0x1p62) return -1; /* also rejects NaN */
  *out = (size_t)v;
  return 0;
}

size_t perf_sizes(const struct perf_opts* o, size_t* out, size_t cap) {
  size_t n = 0;
  size_t s = o->min_bytes;
  while (s <= o->max_bytes) {
    if (n < cap) out[n] = s;
    n++;
    size_t next = o->step_factor > 1 ? s * (size_t)o->step_factor : s + o->step_bytes;
    if (next <= s) break; /* overflow, or no progress (rejected by the parser) */
    s = next;
  }
  return n;
}

static int perf_opts_fail(char* err, size_t errlen, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return PERF_EXIT_USAGE;
}

/* Strict integer in [lo, hi]. */
static int perf_parse_int(const char* s, long lo, long hi, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static const struct option perf_long_opts[] = {
    {"nthreads", required_argument, NULL, 't'},
    {"ngpus", required_argument, NULL, 'g'},
    {"procs", required_argument, NULL, 'p'},
    {"minbytes", required_argument, NULL, 'b'},
    {"maxbytes", required_argument, NULL, 'e'},
    {"stepbytes", required_argument, NULL, 'i'},
    {"stepfactor", required_argument, NULL, 'f'},
    {"iters", required_argument, NULL, 'n'},
    {"warmup_iters", required_argument, NULL, 'w'},
    {"agg_iters", required_argument, NULL, 'm'},
    {"check", required_argument, NULL, 'c'},
    {"datatype", required_argument, NULL, 'd'},
    {"op", required_argument, NULL, 'o'},
    {"root", required_argument, NULL, 'r'},
    {"blocking", required_argument, NULL, 'z'},
    {"cudagraph", required_argument, NULL, 'G'},
    {"average", required_argument, NULL, 'a'},
    {"timeout", required_argument, NULL, 'T'},
    {"output_json", required_argument, NULL, 'J'},
    {"local_register", required_argument, NULL, 'R'},
    {"cudamalloc", no_argument, NULL, PERF_OPT_CUDAMALLOC},
    {"ranks-per-gpu", required_argument, NULL, PERF_OPT_RANKS_PER_GPU},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static const char* perf_long_name(int c) {
  for (const struct option* l = perf_long_opts; l->name; l++)
    if (l->val == c) return l->name;
  return "?";
}

/* Integer options: letter, range, destination offset. */
struct perf_int_opt {
  int letter;
  long lo, hi;
  size_t offset;
};

static const struct perf_int_opt perf_int_opts[] = {
    {'t', 1, 1024, offsetof(struct perf_opts, nthreads)},
    {'g', 1, 1024, offsetof(struct perf_opts, ngpus)},
    {'p', 1, PERF_MAX_PROCS, offsetof(struct perf_opts, nprocs)},
    {'f', 1, 1 << 20, offsetof(struct perf_opts, step_factor)},
    {'n', 1, INT_MAX, offsetof(struct perf_opts, iters)},
    {'w', 0, INT_MAX, offsetof(struct perf_opts, warmup)},
    {'m', 1, 1 << 20, offsetof(struct perf_opts, agg)},
    {'c', 0, 1 << 20, offsetof(struct perf_opts, check)},
    {'z', 0, 2, offsetof(struct perf_opts, blocking)},
    {'G', 0, 1 << 20, offsetof(struct perf_opts, graph)},
    {'a', 0, 3, offsetof(struct perf_opts, average)},
    {'T', 0, 1 << 24, offsetof(struct perf_opts, timeout)},
    {'R', 0, 2, offsetof(struct perf_opts, local_register)},
};

static void perf_opts_defaults(struct perf_opts* o) {
  memset(o, 0, sizeof *o);
  o->nthreads = 1;
  o->ngpus = 1;
  o->nprocs = 1;
  o->min_bytes = 32u << 20;
  o->max_bytes = 32u << 20;
  o->step_bytes = 1u << 20;
  o->step_factor = 1;
  o->iters = 20;
  o->warmup = 1;
  o->agg = 1;
  o->check = 1;
  o->ntypes = 1;
  o->types[0] = REF_FLOAT32;
  o->nops = 1;
  o->ops[0] = REF_SUM;
  o->root = 0;
  o->average = 1;
  o->ranks_per_gpu = 1;
}

int perf_opts_parse(struct perf_opts* o, int argc, char** argv, int mpi_build, char* err,
                    size_t errlen) {
  int c;
  perf_opts_defaults(o);
  err[0] = '\0';
  optind = 0; /* full re-initialisation of getopt (GNU), so that parsing can be repeated */
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":t:g:p:b:e:i:f:n:w:m:c:d:o:r:z:G:a:T:J:R:h", perf_long_opts,
                          NULL)) != -1) {
    const struct perf_int_opt* io = NULL;
    for (size_t i = 0; i < sizeof perf_int_opts / sizeof perf_int_opts[0]; i++)
      if (perf_int_opts[i].letter == c) io = &perf_int_opts[i];
    if (io) {
      if (perf_parse_int(optarg, io->lo, io->hi, (int*)((char*)o + io->offset)))
        return perf_opts_fail(err, errlen,
                              "option -%c (--%s): expected an integer from %ld to %ld, got '%s'", c,
                              perf_long_name(c), io->lo, io->hi, optarg);
      if (c == 'p' && mpi_build)
        return perf_opts_fail(err, errlen,
                              "option -p (--procs): not available in the MPI build; start the "
                              "processes with mpirun -np N");
      continue;
    }
    switch (c) {
    case 'b':
    case 'e':
    case 'i': {
      size_t v;
      if (perf_parse_size(optarg, &v))
        return perf_opts_fail(err, errlen,
                              "option -%c (--%s): expected a size such as 8, 64K, 1M or 8G, got "
                              "'%s'",
                              c, perf_long_name(c), optarg);
      if (c == 'b')
        o->min_bytes = v;
      else if (c == 'e')
        o->max_bytes = v;
      else
        o->step_bytes = v;
      break;
    }
    case 'd':
      if (strcmp(optarg, "all") == 0) {
        o->ntypes = REF_NTYPES;
        for (int t = 0; t < REF_NTYPES; t++) o->types[t] = t;
      } else if ((o->types[0] = perf_type_from_name(optarg)) >= 0) {
        o->ntypes = 1;
      } else {
        return perf_opts_fail(err, errlen,
                              "option -d (--datatype): unknown type '%s' (int8 uint8 int32 uint32 "
                              "int64 uint64 half float double bfloat16 f8e4m3 f8e5m2, or all)",
                              optarg);
      }
      break;
    case 'o':
      if (strcmp(optarg, "all") == 0) {
        o->nops = REF_NOPS;
        for (int p = 0; p < REF_NOPS; p++) o->ops[p] = p;
      } else if ((o->ops[0] = perf_op_from_name(optarg)) >= 0) {
        o->nops = 1;
      } else {
        return perf_opts_fail(err, errlen,
                              "option -o (--op): unknown operator '%s' (sum prod max min avg "
                              "premulsum, or all)",
                              optarg);
      }
      break;
    case 'r':
      if (strcmp(optarg, "all") == 0) {
        o->root = -1;
      } else if (perf_parse_int(optarg, 0, PERF_MAX_RANKS - 1, &o->root)) {
        return perf_opts_fail(err, errlen,
                              "option -r (--root): expected a rank (0 or more) or 'all', got '%s'",
                              optarg);
      }
      break;
    case 'J':
      if (!*optarg) return perf_opts_fail(err, errlen, "option -J (--output_json): empty path");
      o->json = optarg;
      break;
    case PERF_OPT_CUDAMALLOC: o->cuda_malloc = 1; break;
    case PERF_OPT_RANKS_PER_GPU:
      if (perf_parse_int(optarg, 1, 1024, &o->ranks_per_gpu))
        return perf_opts_fail(err, errlen,
                              "option --ranks-per-gpu: expected an integer from 1 to 1024, got "
                              "'%s'",
                              optarg);
      break;
    case 'h': o->help = 1; return 0;
    case ':':
      if (optopt >= PERF_OPT_CUDAMALLOC) /* a long option without a letter */
        return perf_opts_fail(err, errlen, "option --%s: missing argument",
                              perf_long_name(optopt));
      if (optopt)
        return perf_opts_fail(err, errlen, "option -%c (--%s): missing argument", optopt,
                              perf_long_name(optopt));
      return perf_opts_fail(err, errlen, "option %s: missing argument", argv[optind - 1]);
    default: {
      /* A value given to a flag (--help=1, --cudamalloc=1), an unknown long or short option. */
      const char* arg = argv[optind - 1];
      const char* eq = strchr(arg, '=');
      if (!strncmp(arg, "--", 2) && eq)
        for (const struct option* l = perf_long_opts; l->name; l++)
          if (strlen(l->name) == (size_t)(eq - arg - 2) &&
              !strncmp(arg + 2, l->name, strlen(l->name)))
            return perf_opts_fail(err, errlen, "option --%s takes no value, got '%s'", l->name,
                                  arg);
      if (optopt > 0 && optopt < 0x80)
        return perf_opts_fail(err, errlen, "unknown option -%c", optopt);
      return perf_opts_fail(err, errlen, "unknown option %s", arg);
    }
    }
  }
  if (optind < argc)
    return perf_opts_fail(err, errlen, "unexpected argument '%s' (options take the form -x value)",
                          argv[optind]);

  if (o->min_bytes > o->max_bytes)
    return perf_opts_fail(err, errlen,
                          "option -b (--minbytes): %zu is larger than the maximum size -e %zu",
                          o->min_bytes, o->max_bytes);
  if (o->step_factor > 1 && o->min_bytes == 0)
    return perf_opts_fail(err, errlen,
                          "option -b (--minbytes): must be at least 1 with -f (a size of 0 never "
                          "grows)");
  if (o->step_factor <= 1 && o->step_bytes == 0 && o->min_bytes != o->max_bytes)
    return perf_opts_fail(err, errlen, "option -i (--stepbytes): must be at least 1");
  if (o->local_register == 2 && o->cuda_malloc)
    return perf_opts_fail(err, errlen,
                          "option -R (--local_register) 2: symmetric windows need ncclMemAlloc "
                          "buffers; drop --cudamalloc");
  if (o->graph > 0 && o->blocking > 0)
    return perf_opts_fail(err, errlen,
                          "option -z (--blocking): cannot be combined with -G (a CUDA graph "
                          "capture cannot wait for each operation)");
  if ((long)o->nthreads * o->ngpus * o->nprocs > PERF_MAX_RANKS)
    return perf_opts_fail(err, errlen, "option -g (--ngpus): more than %d ranks (-p x -t x -g)",
                          PERF_MAX_RANKS);
  return 0;
}

void perf_opts_usage(FILE* f, const char* prog, int mpi_build) {
  fprintf(f,
          "usage: %s [options]\n"
          "  -t, --nthreads N       threads per process (default 1)\n"
          "  -g, --ngpus N          GPUs per thread (default 1)\n",
          prog);
  if (mpi_build)
    fprintf(f, "                         processes: one per MPI rank (mpirun -np N)\n");
  else
    fprintf(f, "  -p, --procs N          fork N processes, one rank set each (default 1)\n");
  fprintf(
      f, "  -b, --minbytes SIZE    smallest size (default 32M; K, M, G = 2^10, 2^20, 2^30)\n"
         "  -e, --maxbytes SIZE    largest size (default 32M)\n"
         "  -i, --stepbytes SIZE   increment between sizes (default 1M)\n"
         "  -f, --stepfactor N     multiply sizes by N instead (default: disabled)\n"
         "  -n, --iters N          timed iterations (default 20)\n"
         "  -w, --warmup_iters N   warm-up iterations (default 1)\n"
         "  -m, --agg_iters N      operations aggregated in one group per iteration (default 1)\n"
         "  -c, --check N          check every element N times per size (default 1; 0: off)\n"
         "  -d, --datatype TYPE    int8 uint8 int32 uint32 int64 uint64 half float double\n"
         "                         bfloat16 f8e4m3 f8e5m2, or all (default float)\n"
         "  -o, --op OP            sum prod max min avg premulsum, or all (default sum)\n"
         "  -r, --root R           root rank, or all (default 0)\n"
         "  -z, --blocking N       0: free running; 1: wait and barrier after each operation;\n"
         "                         2: wait after each operation (default 0)\n"
         "  -G, --cudagraph N      capture the iterations in a CUDA graph, launch it N times\n"
         "  -a, --average N        time reported: 0 rank 0, 1 average, 2 min, 3 max (default 1)\n"
         "  -T, --timeout S        fail with a message when an operation or the initialisation\n"
         "                         takes more than S seconds (default 0: no limit)\n"
         "  -J, --output_json FILE write the results as JSON too\n"
         "  -R, --local_register N 1: register the buffers (ncclCommRegister); 2: as symmetric\n"
         "                         windows (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC),\n"
         "                         as nccl-tests (default 0)\n"
         "      --cudamalloc       buffers from cudaMalloc (default: ncclMemAlloc, as nccl-tests)\n"
         "      --ranks-per-gpu R  R ranks on each GPU (default 1): -t/-g/-p still count ranks;\n"
         "                         local rank i uses device i / R; sets\n"
         "                         CHOIR_RANKS_SHARE_GPU=1 unless it is set; processes sharing a\n"
         "                         GPU need MPS; with -p, CHOIR_TEST_HOSTS=H makes the\n"
         "                         processes pose as H hosts (NCCL_HOSTID per block of\n"
         "                         processes): the network between them\n"
         "  -h, --help             this text\n");
}
