/*
 * Choir perf tools: output. The text reproduces nccl-tests' layout column for column (header,
 * rows, footer), so that its readers and scripts work on ours; the JSON follows its -J layout.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define PERF_TOOL_VERSION "0.1.0"

void perf_fmt_num(char* buf, size_t len, double v, int width) {
  /* Digits before the decimal point decide how many decimals fit in the width. */
  int digits = 0;
  for (double p = 1.0; v >= p && digits < 400; p *= 10.0) digits++;
  if (digits < width - 2)
    snprintf(buf, len, "%*.2f", width, v);
  else if (digits < width - 1)
    snprintf(buf, len, "%*.1f", width, v);
  else if (digits <= width)
    snprintf(buf, len, "%*.0f", width, v);
  else if (width >= 7)
    snprintf(buf, len, "%*.1e", width, v);
  else
    snprintf(buf, len, "%*.0e", width, v);
}

void perf_fmt_config(FILE* f, const struct perf_opts* o, const char* prog, int header_version,
                     int lib_version, const char* lib_path) {
  fprintf(f, "# choir-perf version %s nccl-headers=%d nccl-library=%d\n", PERF_TOOL_VERSION,
          header_version, lib_version);
  fprintf(f, "# Collective test starting: %s\n", prog);
  fprintf(f,
          "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d iters: "
          "%d agg iters: %d validation: %d graph: %d unalign: 0\n",
          o->nthreads, o->ngpus, o->min_bytes, o->max_bytes,
          o->step_factor > 1 ? (size_t)o->step_factor : o->step_bytes,
          o->step_factor > 1 ? "factor" : "bytes", o->warmup, o->iters, o->agg, o->check, o->graph);
  if (o->blocking == 1)
    fprintf(f, "# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (o->blocking > 1)
    fprintf(f, "# Blocking Enabled: wait for completion after each collective (no barrier) \n");
  fprintf(f, "# Library: %s\n", lib_path ? lib_path : "(unknown)");
  fprintf(f, "#\n");
}

void perf_fmt_devices(FILE* f, const struct perf_devinfo* d, int n) {
  fprintf(f, "# Using devices\n");
  for (int i = 0; i < n; i++)
    fprintf(f, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", d[i].rank,
            0, d[i].pid, d[i].host, d[i].device, d[i].pci_domain, d[i].pci_bus, d[i].pci_device,
            d[i].name);
}

void perf_fmt_table_header(FILE* f) {
  fprintf(f, "#\n");
  fprintf(f,
          "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place   "
          "       \n",
          "", "", "", "", "");
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "size",
          "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
          "busbw", "#wrong");
  fprintf(f, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s \n", "(B)",
          "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void perf_fmt_row(FILE* f, const struct perf_row* r) {
  fprintf(f, "%12zu  %12zu  %8s  %6s  %6d", r->bytes, r->count, r->type, r->redop, r->root);
  for (int h = 0; h < 2; h++) {
    const struct perf_half* x = &r->half[h];
    char t[32], a[32], b[32];
    perf_fmt_num(t, sizeof t, x->time_us, 7);
    perf_fmt_num(a, sizeof a, x->algbw, 6);
    perf_fmt_num(b, sizeof b, x->busbw, 6);
    if (x->checked)
      fprintf(f, "  %7s  %6s  %6s  %6g", t, a, b, (double)x->nwrong);
    else
      fprintf(f, "  %7s  %6s  %6s    N/A", t, a, b);
  }
  fprintf(f, "\n");
}

void perf_fmt_footer(FILE* f, int nerrors, double avg_busbw, const char* prog) {
  fprintf(f, "# %-20s : %d %s\n", "Out of bounds values", nerrors, nerrors ? "FAILED" : "OK");
  fprintf(f, "# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw, "");
  fprintf(f, "#\n");
  fprintf(f, "# Collective test concluded: %s\n", prog);
  fprintf(f, "\n");
}

/* ---- JSON ---- */

#define PERF_JSON_DEPTH 8

struct perf_json {
  FILE* f;
  int depth;
  int first[PERF_JSON_DEPTH]; /* no member written yet at this level */
  int after_key;
};

static void perf_json_sep(struct perf_json* j) {
  if (j->after_key) {
    j->after_key = 0;
    return;
  }
  if (j->depth > 0) {
    if (!j->first[j->depth - 1]) fputc(',', j->f);
    j->first[j->depth - 1] = 0;
  }
}

static void perf_json_str(struct perf_json* j, const char* s) {
  perf_json_sep(j);
  fputc('"', j->f);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(j->f, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", j->f);
    else if (c == '\t')
      fputs("\\t", j->f);
    else if (c < 0x20)
      fprintf(j->f, "\\u%04x", c);
    else
      fputc(c, j->f);
  }
  fputc('"', j->f);
}

static void perf_json_key(struct perf_json* j, const char* k) {
  perf_json_str(j, k);
  fputc(':', j->f);
  j->after_key = 1;
}

static void perf_json_open_c(struct perf_json* j, char c) {
  perf_json_sep(j);
  fputc(c, j->f);
  if (j->depth < PERF_JSON_DEPTH) j->first[j->depth] = 1;
  j->depth++;
}

static void perf_json_close_c(struct perf_json* j, char c) {
  j->depth--;
  fputc(c, j->f);
}

static void perf_json_int(struct perf_json* j, long long v) {
  perf_json_sep(j);
  fprintf(j->f, "%lld", v);
}

static void perf_json_num(struct perf_json* j, double v) {
  perf_json_sep(j);
  if (isfinite(v))
    fprintf(j->f, "%.9g", v);
  else
    fputs("null", j->f);
}

static void perf_json_bool(struct perf_json* j, int v) {
  perf_json_sep(j);
  fputs(v ? "true" : "false", j->f);
}

static void perf_json_null(struct perf_json* j) {
  perf_json_sep(j);
  fputs("null", j->f);
}

static void perf_json_now(struct perf_json* j) {
  char buf[64];
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  perf_json_str(j, buf);
}

struct perf_json* perf_json_open(const char* path, char* err, size_t errlen) {
  struct perf_json* j = calloc(1, sizeof *j);
  if (!j) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  j->f = fopen(path, "w");
  if (!j->f) {
    snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    free(j);
    return NULL;
  }
  return j;
}

void perf_json_begin(struct perf_json* j, int argc, char** argv, const struct perf_opts* o,
                     const char* prog, int nprocs, int nranks, int lib_version,
                     const char* lib_path, const struct perf_devinfo* d, int ndev) {
  perf_json_open_c(j, '{');
  perf_json_key(j, "version");
  perf_json_int(j, 2);
  perf_json_key(j, "tool");
  perf_json_str(j, "choir-perf " PERF_TOOL_VERSION);
  perf_json_key(j, "start_time");
  perf_json_now(j);
  perf_json_key(j, "args");
  perf_json_open_c(j, '[');
  for (int i = 0; i < argc; i++) perf_json_str(j, argv[i]);
  perf_json_close_c(j, ']');
  /* Only the variables that shape the run: the full environment may hold secrets. */
  perf_json_key(j, "env");
  perf_json_open_c(j, '[');
  for (char** e = environ; e && *e; e++)
    if (!strncmp(*e, "NCCL_", 5) || !strncmp(*e, "CHOIR_", 6) || !strncmp(*e, "CUDA_", 5) ||
        !strncmp(*e, "LD_LIBRARY_PATH=", 16) || !strncmp(*e, "LD_PRELOAD=", 11))
      perf_json_str(j, *e);
  perf_json_close_c(j, ']');
  perf_json_key(j, "nccl_version");
  perf_json_int(j, lib_version);
  perf_json_key(j, "library");
  perf_json_str(j, lib_path ? lib_path : "");

  perf_json_key(j, "config");
  perf_json_open_c(j, '{');
  perf_json_key(j, "collective");
  perf_json_str(j, prog);
  perf_json_key(j, "nprocs");
  perf_json_int(j, nprocs);
  perf_json_key(j, "nthreads");
  perf_json_int(j, o->nthreads);
  perf_json_key(j, "ngpus");
  perf_json_int(j, o->ngpus);
  perf_json_key(j, "nranks");
  perf_json_int(j, nranks);
  perf_json_key(j, "minimum_bytes");
  perf_json_int(j, (long long)o->min_bytes);
  perf_json_key(j, "maximum_bytes");
  perf_json_int(j, (long long)o->max_bytes);
  if (o->step_factor > 1) {
    perf_json_key(j, "step_factor");
    perf_json_int(j, o->step_factor);
  } else {
    perf_json_key(j, "step_bytes");
    perf_json_int(j, (long long)o->step_bytes);
  }
  perf_json_key(j, "warmup_iters");
  perf_json_int(j, o->warmup);
  perf_json_key(j, "iterations");
  perf_json_int(j, o->iters);
  perf_json_key(j, "aggregated_iterations");
  perf_json_int(j, o->agg);
  perf_json_key(j, "validation");
  perf_json_int(j, o->check);
  perf_json_key(j, "graph");
  perf_json_int(j, o->graph);
  perf_json_key(j, "blocking_collectives");
  perf_json_int(j, o->blocking);
  perf_json_key(j, "average");
  perf_json_int(j, o->average);
  perf_json_key(j, "timeout");
  perf_json_int(j, o->timeout);
  perf_json_key(j, "allocator");
  perf_json_str(j, o->cuda_malloc ? "cudaMalloc" : "ncclMemAlloc");
  perf_json_close_c(j, '}');

  perf_json_key(j, "devices");
  perf_json_open_c(j, '[');
  for (int i = 0; i < ndev; i++) {
    char hex[32];
    snprintf(hex, sizeof hex, "%04x:%02x:%02x", d[i].pci_domain, d[i].pci_bus, d[i].pci_device);
    perf_json_open_c(j, '{');
    perf_json_key(j, "rank");
    perf_json_int(j, d[i].rank);
    perf_json_key(j, "group");
    perf_json_int(j, 0);
    perf_json_key(j, "pid");
    perf_json_int(j, d[i].pid);
    perf_json_key(j, "hostname");
    perf_json_str(j, d[i].host);
    perf_json_key(j, "device");
    perf_json_int(j, d[i].device);
    perf_json_key(j, "device_hex");
    perf_json_str(j, hex);
    perf_json_key(j, "device_info");
    perf_json_str(j, d[i].name);
    perf_json_close_c(j, '}');
  }
  perf_json_close_c(j, ']');
  perf_json_key(j, "results");
  perf_json_open_c(j, '[');
  fflush(j->f);
}

void perf_json_row(struct perf_json* j, const struct perf_row* r, int iterations) {
  static const char* const names[2] = {"out_of_place", "in_place"};
  perf_json_open_c(j, '{');
  perf_json_key(j, "size");
  perf_json_int(j, (long long)r->bytes);
  perf_json_key(j, "count");
  perf_json_int(j, (long long)r->count);
  perf_json_key(j, "type");
  perf_json_str(j, r->type);
  perf_json_key(j, "redop");
  perf_json_str(j, r->redop);
  perf_json_key(j, "root");
  perf_json_int(j, r->root);
  for (int h = 0; h < 2; h++) {
    perf_json_key(j, names[h]);
    perf_json_open_c(j, '{');
    perf_json_key(j, "time");
    perf_json_num(j, r->half[h].time_us);
    perf_json_key(j, "alg_bw");
    perf_json_num(j, r->half[h].algbw);
    perf_json_key(j, "bus_bw");
    perf_json_num(j, r->half[h].busbw);
    perf_json_key(j, "nwrong");
    if (r->half[h].checked)
      perf_json_int(j, r->half[h].nwrong);
    else
      perf_json_null(j);
    perf_json_close_c(j, '}');
  }
  perf_json_key(j, "actual_iterations");
  perf_json_int(j, iterations);
  perf_json_close_c(j, '}');
  fflush(j->f);
}

int perf_json_close(struct perf_json* j, int nerrors, double avg_busbw, const char* error) {
  perf_json_close_c(j, ']');
  perf_json_key(j, "out_of_bounds");
  perf_json_open_c(j, '{');
  perf_json_key(j, "count");
  perf_json_int(j, nerrors);
  perf_json_key(j, "okay");
  perf_json_bool(j, nerrors == 0);
  perf_json_close_c(j, '}');
  perf_json_key(j, "average_bus_bandwidth");
  perf_json_open_c(j, '{');
  perf_json_key(j, "bandwidth");
  perf_json_num(j, avg_busbw);
  perf_json_key(j, "okay");
  perf_json_str(j, "unchecked");
  perf_json_close_c(j, '}');
  perf_json_key(j, "errors");
  perf_json_open_c(j, '[');
  if (error && *error) perf_json_str(j, error);
  perf_json_close_c(j, ']');
  perf_json_key(j, "end_time");
  perf_json_now(j);
  perf_json_close_c(j, '}');
  fputc('\n', j->f);
  int rc = fclose(j->f) ? -1 : 0;
  free(j);
  return rc;
}
