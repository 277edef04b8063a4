/*
 * coll_check: the data-path correctness suite (issue 6). Every collective, data type, reduction
 * operator and placement at the bar's sizes, plus semantic cases (groups, CUDA graphs,
 * non-blocking communicators, stream ordering, several communicators per GPU, unaligned buffers,
 * count 0), on every rank, against the reference arithmetic of test/harness/ref.h.
 *
 * Only the public NCCL API and the CUDA runtime are used, so the same binary checks Choir's
 * libnccl.so.2 and NVIDIA's (LD_LIBRARY_PATH picks one).
 *
 * Data never crosses to the host: inputs are generated on each GPU from (seed, rank, index) and
 * outputs are compared on the GPU with the definitions of test/perf/perf_gen.h (perf_data.cu).
 * Only the counters come back, and on a failure a window of elements after the first wrong one,
 * which the host re-evaluates to print index, got, expected and tolerance.
 *
 * Every output buffer is framed by sentinel bytes (0xff) that must survive the operation, and an
 * out-of-place send buffer must still hold its input afterwards.
 *
 * Modes: one process driving every rank from one thread (communicators from ncclCommInitAll or
 * from ncclCommInitRank inside a group), or one process per rank (test/perf's fork launcher and
 * its shared-memory world carry the unique id and the failure counts). Rank i uses device
 * i / R, R ranks per GPU (--ranks-per-gpu, default 1); with R > 1 the ranks share GPUs, which
 * Choir allows with CHOIR_RANKS_SHARE_GPU=1 (set here unless the caller set it) and, between
 * processes, only under MPS.
 *
 * Exit status: 0 all passed, 1 a check failed (or an NCCL/CUDA call failed, or a wait timed out),
 * 2 bad command line, 77 skipped (no GPU, fewer GPUs than the ranks need, fewer than 2 ranks, or
 * processes sharing a GPU without MPS).
 */
#include <errno.h>
#include <execinfo.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "perf.h"
#include "perf_data.h"

#define CC_EXIT_OK 0
#define CC_EXIT_FAIL 1
#define CC_EXIT_USAGE 2
#define CC_EXIT_SKIP 77

#define CC_FRONT 256  /* sentinel bytes before every buffer */
#define CC_GUARD 256  /* sentinel bytes after the span an operation may touch */
#define CC_SLACK 64   /* room for the unaligned shifts */
#define CC_NSLOTS 64  /* buffer pairs per rank (groups of several operations) */
#define CC_NOUT 512   /* check counters per rank */
#define CC_MAX_SHOW 5 /* wrong elements printed per failing buffer */
#define CC_SHOW_WINDOW 4096
#define CC_MAX_SIZES 32

/* ---- Operations, operators ---- */

enum {
  CC_ALLREDUCE,
  CC_BROADCAST,
  CC_BCAST,
  CC_REDUCE,
  CC_ALLGATHER,
  CC_REDUCESCATTER,
  CC_ALLTOALL,
  CC_GATHER,
  CC_SCATTER,
  CC_SENDRECV,
  CC_NOPS
};

static const struct {
  const char* name;
  int coll;    /* perf_coll id: buffer layout and expected results */
  int reduces; /* takes an operator */
  int rooted;
  int inplace; /* 1: out of place and in place, 2: in place only (ncclBcast), 0: out of place only
                */
} cc_ops[CC_NOPS] = {
    [CC_ALLREDUCE] = {"allreduce", PERF_ALL_REDUCE, 1, 0, 1},
    [CC_BROADCAST] = {"broadcast", PERF_BROADCAST, 0, 1, 1},
    [CC_BCAST] = {"bcast", PERF_BROADCAST, 0, 1, 2},
    [CC_REDUCE] = {"reduce", PERF_REDUCE, 1, 1, 1},
    [CC_ALLGATHER] = {"allgather", PERF_ALL_GATHER, 0, 0, 1},
    [CC_REDUCESCATTER] = {"reducescatter", PERF_REDUCE_SCATTER, 1, 0, 1},
    /* In place, alltoall and send/recv would overwrite data still to be sent: undefined. */
    [CC_ALLTOALL] = {"alltoall", PERF_ALLTOALL, 0, 0, 0},
    [CC_GATHER] = {"gather", PERF_GATHER, 0, 1, 1},
    [CC_SCATTER] = {"scatter", PERF_SCATTER, 0, 1, 1},
    [CC_SENDRECV] = {"sendrecv", PERF_SENDRECV, 0, 0, 0},
};

/* Reduction operators: the five built-ins (ncclRedOp_t values), then premulsum with the factor on
 * the host and in device memory. */
enum { CC_RED_PREMUL_HOST = REF_PREMULSUM, CC_RED_PREMUL_DEV, CC_NREDS };

static const char* cc_red_name(int red) {
  if (red == CC_RED_PREMUL_HOST) return "premul-host";
  if (red == CC_RED_PREMUL_DEV) return "premul-dev";
  return ref_op_name(red);
}

/* The ref.h operator a reduction operator computes. */
static int cc_red_ref(int red) { return red >= CC_RED_PREMUL_HOST ? REF_PREMULSUM : red; }

/* Semantic cases, run after the matrix. */
enum {
  CC_CASE_MATRIX,
  CC_CASE_GROUPS,
  CC_CASE_GRAPH,
  CC_CASE_NONBLOCKING,
  CC_CASE_STREAMS,
  CC_CASE_MULTICOMM,
  CC_CASE_UNALIGNED,
  CC_CASE_ZERO,
  CC_NCASES
};

static const char* const cc_case_names[CC_NCASES] = {
    "matrix", "groups", "graph", "nonblocking", "streams", "multicomm", "unaligned", "zero"};

/* ---- Options ---- */

enum { CC_MODE_THREADS = 1, CC_MODE_PROCS = 2 };
enum { CC_INIT_ALL = 1, CC_INIT_GROUP = 2 };

struct cc_size {
  size_t n;  /* elements, or bytes when `bytes` */
  int bytes; /* "1MB": count = n / sizeof(type) */
};

struct cc_opts {
  int ngpus; /* ranks (-g); 0: $CHOIR_TEST_NDEV, else every visible GPU times rpg */
  int rpg;   /* ranks per GPU: rank i on device i / rpg (--ranks-per-gpu, $CHOIR_TEST_RPG) */
  int modes;
  int inits;
  int ops[CC_NOPS];
  int types[REF_NTYPES];
  int reds[CC_NREDS];
  struct cc_size sizes[CC_MAX_SIZES];
  int nsizes;
  struct cc_size big[CC_MAX_SIZES]; /* only for big_types */
  int nbig;
  int big_types[REF_NTYPES];
  int placements; /* bit 0 out of place, bit 1 in place */
  int roots;      /* -1: every rank; -2: first and last; -3: last; else that rank */
  int graph;      /* replays per matrix case (0: no graph) */
  int graph_replays;
  int cases[CC_NCASES];
  int float_exact; /* floats also with the exact pattern */
  uint32_t seed;
  int timeout;
  int verbose;
};

/* ---- State ---- */

struct cc_slot {
  char* send_base;
  char* recv_base;
  size_t cap; /* bytes usable from send/recv (unshifted), guard and slack excluded */
};

struct cc_rank {
  int rank;
  int dev;
  ncclComm_t comm;
  ncclComm_t comm2; /* the multicomm case's second communicator */
  cudaStream_t stream;
  cudaStream_t stream2;
  struct cc_slot slot[CC_NSLOTS];
  char* aux; /* the streams case's copy target */
  size_t aux_cap;
  struct perf_check_out* out; /* device, CC_NOUT entries */
  void* scalar;               /* device premulsum factor */
  ncclRedOp_t premul;
  int premul_live;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
};

struct cc_stat {
  long cases, failed;
};

struct cc_ctx {
  const struct cc_opts* o;
  struct perf_world* w;
  const char* label; /* "threads/initall", "procs" */
  int nranks;
  int rpg; /* ranks per GPU: rank r uses device r / rpg */
  int nlocal;
  struct cc_rank* r;
  int fp8_ok;
  int nccl_version;
  struct cc_stat op_stat[CC_NOPS];
  struct cc_stat case_stat[CC_NCASES];
  long failures_printed;
  long settles, settles_in_progress; /* cc_settle calls, and those that saw ncclInProgress */
};

/* One operation instance: what the matrix and the semantic cases run. */
struct cc_case {
  int op;
  int type;
  int red; /* CC_RED_* or a ref op; ignored for data movement */
  size_t count;
  int inplace;
  int root;
  size_t shift; /* bytes added to both buffers */
  int pattern;
  uint32_t seed;
  int slot;
};

/* ---- Failure exits ---- */

static const char* cc_prog = "coll_check";

__attribute__((noreturn, format(printf, 2, 3))) static void cc_die(struct cc_ctx* ctx,
                                                                   const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: %s%sFAILED: ", cc_prog, ctx && ctx->label ? ctx->label : "",
          ctx && ctx->label ? ": " : "");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  fflush(stdout);
  fflush(stderr);
  if (ctx && ctx->w) ctx->w->ops->fail(ctx->w, CC_EXIT_FAIL);
  exit(CC_EXIT_FAIL);
}

#define CC_CUDA(ctx, call)                                                            \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess)                                                            \
      cc_die((ctx), "%s:%d: %s returned %d (%s)", __FILE__, __LINE__, #call, (int)e_, \
             cudaGetErrorString(e_));                                                 \
  } while (0)

#define CC_NCCL(ctx, comm, call)                                                               \
  do {                                                                                         \
    ncclResult_t r_ = (call);                                                                  \
    if (r_ != ncclSuccess && r_ != ncclInProgress)                                             \
      cc_die((ctx), "%s:%d: %s returned %d (%s), last error: '%s'", __FILE__, __LINE__, #call, \
             (int)r_, ncclGetErrorString(r_), ncclGetLastError(comm));                         \
  } while (0)

static double cc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- Small helpers ---- */

static int cc_sum_world(struct cc_ctx* ctx, long v) {
  double d = (double)v;
  if (ctx->w->ops->allreduce(ctx->w, &d, 1, PERF_RED_SUM)) {
    fprintf(stderr, "%s: another process failed; stopping\n", cc_prog);
    exit(PERF_EXIT_ABORTED);
  }
  return (int)d;
}

static void cc_barrier(struct cc_ctx* ctx) {
  if (ctx->w->ops->allreduce(ctx->w, NULL, 0, PERF_RED_SUM)) {
    fprintf(stderr, "%s: another process failed; stopping\n", cc_prog);
    exit(PERF_EXIT_ABORTED);
  }
}

/* Counts of op at `count` (the per-rank count of the bar) over nranks. */
static void cc_counts(int op, size_t count, int nranks, struct perf_counts* c) {
  int coll = cc_ops[op].coll;
  size_t total = count;
  if (coll == PERF_ALL_GATHER || coll == PERF_GATHER || coll == PERF_REDUCE_SCATTER ||
      coll == PERF_SCATTER || coll == PERF_ALLTOALL)
    total = count * (size_t)nranks;
  perf_coll_counts(coll, total, nranks, c);
}

static size_t cc_span(const struct perf_counts* c) {
  return c->send_count > c->recv_count ? c->send_count : c->recv_count;
}

static void cc_describe(char* buf, size_t len, const struct cc_case* cs, int nranks) {
  int n = snprintf(buf, len, "%s %s", cc_ops[cs->op].name, ref_type_name(cs->type));
  if (cc_ops[cs->op].reduces) n += snprintf(buf + n, len - (size_t)n, " %s", cc_red_name(cs->red));
  n += snprintf(buf + n, len - (size_t)n, " count %zu %s", cs->count,
                cs->inplace ? "in-place" : "out-of-place");
  if (cc_ops[cs->op].rooted) n += snprintf(buf + n, len - (size_t)n, " root %d", cs->root);
  if (cs->shift) n += snprintf(buf + n, len - (size_t)n, " shift %zu B", cs->shift);
  snprintf(buf + n, len - (size_t)n, " (%d ranks, seed %u%s)", nranks, cs->seed,
           cs->pattern == PERF_PAT_EXACT ? ", exact data" : "");
}

/* ---- Buffers ---- */

static void cc_slot_reserve(struct cc_ctx* ctx, struct cc_rank* r, int s, size_t bytes) {
  struct cc_slot* sl = &r->slot[s];
  if (sl->send_base && sl->cap >= bytes) return;
  CC_CUDA(ctx, cudaSetDevice(r->dev));
  CC_CUDA(ctx, cudaStreamSynchronize(r->stream));
  if (r->stream2) CC_CUDA(ctx, cudaStreamSynchronize(r->stream2));
  if (sl->send_base) CC_CUDA(ctx, cudaFree(sl->send_base));
  if (sl->recv_base) CC_CUDA(ctx, cudaFree(sl->recv_base));
  sl->send_base = sl->recv_base = NULL;
  sl->cap = 0;
  size_t total = CC_FRONT + bytes + CC_SLACK + CC_GUARD;
  cudaError_t e = cudaMalloc((void**)&sl->send_base, total);
  if (e == cudaSuccess) e = cudaMalloc((void**)&sl->recv_base, total);
  if (e != cudaSuccess)
    cc_die(ctx, "rank %d (device %d): cudaMalloc of 2 x %zu bytes failed: %s", r->rank, r->dev,
           total, cudaGetErrorString(e));
  sl->cap = bytes;
}

static char* cc_send(struct cc_rank* r, const struct cc_case* cs) {
  return r->slot[cs->slot].send_base + CC_FRONT + cs->shift;
}

static char* cc_recv(struct cc_rank* r, const struct cc_case* cs) {
  return r->slot[cs->slot].recv_base + CC_FRONT + cs->shift;
}

/* Where this rank's input and output lie (in place: inside the receive buffer). */
static void cc_layout(struct cc_rank* r, const struct cc_case* cs, const struct perf_counts* c,
                      char** in, char** out) {
  size_t elt = ref_type_size(cs->type);
  *in = cc_send(r, cs);
  *out = cc_recv(r, cs);
  if (cs->inplace) {
    *in = cc_recv(r, cs) + c->send_inplace * (size_t)r->rank * elt;
    *out = cc_recv(r, cs) + c->recv_inplace * (size_t)r->rank * elt;
  }
}

/* ---- Premulsum operators ---- */

static void cc_premul_create(struct cc_ctx* ctx, const struct cc_case* cs) {
  if (!cc_ops[cs->op].reduces || cs->red < CC_RED_PREMUL_HOST) return;
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    _Alignas(8) unsigned char host[8];
    ref_store(cs->type, host, 0, perf_gen_scalar(cs->type, r->rank));
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    if (cs->red == CC_RED_PREMUL_DEV) {
      CC_CUDA(ctx, cudaMemcpy(r->scalar, host, ref_type_size(cs->type), cudaMemcpyHostToDevice));
      CC_NCCL(ctx, r->comm,
              ncclRedOpCreatePreMulSum(&r->premul, r->scalar, (ncclDataType_t)cs->type,
                                       ncclScalarDevice, r->comm));
    } else {
      CC_NCCL(ctx, r->comm,
              ncclRedOpCreatePreMulSum(&r->premul, host, (ncclDataType_t)cs->type,
                                       ncclScalarHostImmediate, r->comm));
    }
    r->premul_live = 1;
  }
}

static void cc_premul_destroy(struct cc_ctx* ctx) {
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    if (!r->premul_live) continue;
    CC_NCCL(ctx, r->comm, ncclRedOpDestroy(r->premul, r->comm));
    r->premul_live = 0;
  }
}

/* ---- Data ---- */

static void cc_gen(const struct cc_ctx* ctx, const struct cc_case* cs, struct perf_gen* g) {
  int op = cc_ops[cs->op].reduces ? cc_red_ref(cs->red) : PERF_OP_NONE;
  perf_gen_setup(g, cs->type, op, ctx->nranks, cs->pattern, cs->seed);
}

/* Sentinels over everything the operation may touch and around it, then the inputs. Asynchronous
 * on each rank's stream `st` (NULL: the rank's main stream). */
static void cc_prepare_rank(struct cc_ctx* ctx, struct cc_rank* r, const struct cc_case* cs,
                            cudaStream_t st) {
  struct perf_counts c;
  struct perf_gen g;
  size_t elt = ref_type_size(cs->type);
  char *in, *out;
  cc_counts(cs->op, cs->count, ctx->nranks, &c);
  cc_gen(ctx, cs, &g);
  cc_slot_reserve(ctx, r, cs->slot, cc_span(&c) * elt);
  cc_layout(r, cs, &c, &in, &out);
  if (!st) st = r->stream;
  CC_CUDA(ctx, cudaSetDevice(r->dev));
  CC_CUDA(ctx, cudaMemsetAsync(r->slot[cs->slot].recv_base, 0xff,
                               CC_FRONT + cs->shift + cc_span(&c) * elt + CC_GUARD, st));
  if (perf_coll_has_input(cc_ops[cs->op].coll, r->rank, cs->root))
    CC_CUDA(ctx, (cudaError_t)perf_data_fill(in, c.send_count, &g, r->rank, st));
}

static void cc_prepare(struct cc_ctx* ctx, const struct cc_case* cs) {
  for (int i = 0; i < ctx->nlocal; i++) cc_prepare_rank(ctx, &ctx->r[i], cs, NULL);
}

/* ---- Issuing ---- */

static ncclResult_t cc_issue_rank(struct cc_ctx* ctx, struct cc_rank* r, const struct cc_case* cs,
                                  ncclComm_t comm, cudaStream_t st) {
  struct perf_counts c;
  char *in, *out;
  size_t n = cs->count;
  ncclDataType_t t = (ncclDataType_t)cs->type;
  ncclRedOp_t op = (ncclRedOp_t)(cs->red < CC_RED_PREMUL_HOST ? cs->red : 0);
  int nr = ctx->nranks;
  if (cc_ops[cs->op].reduces && cs->red >= CC_RED_PREMUL_HOST) op = r->premul;
  cc_counts(cs->op, cs->count, nr, &c);
  cc_layout(r, cs, &c, &in, &out);
  switch (cs->op) {
  case CC_ALLREDUCE: return ncclAllReduce(in, out, n, t, op, comm, st);
  case CC_BROADCAST: return ncclBroadcast(in, out, n, t, cs->root, comm, st);
  case CC_BCAST: return ncclBcast(out, n, t, cs->root, comm, st);
  case CC_REDUCE: return ncclReduce(in, out, n, t, op, cs->root, comm, st);
  case CC_ALLGATHER: return ncclAllGather(in, out, n, t, comm, st);
  case CC_REDUCESCATTER: return ncclReduceScatter(in, out, n, t, op, comm, st);
  case CC_ALLTOALL: return ncclAlltoAll(in, out, n, t, comm, st);
  case CC_GATHER: return ncclGather(in, out, n, t, cs->root, comm, st);
  case CC_SCATTER: return ncclScatter(in, out, n, t, cs->root, comm, st);
  case CC_SENDRECV: {
    /* A ring: both halves must progress together, so they share a group. */
    ncclResult_t e = ncclGroupStart();
    if (e == ncclSuccess) e = ncclSend(in, n, t, (r->rank + 1) % nr, comm, st);
    if (e == ncclSuccess) e = ncclRecv(out, n, t, (r->rank - 1 + nr) % nr, comm, st);
    ncclResult_t e2 = ncclGroupEnd();
    return e != ncclSuccess ? e : e2;
  }
  default: return ncclInvalidArgument;
  }
}

/* Wait until a non-blocking communicator has no operation in progress. */
static void cc_settle(struct cc_ctx* ctx, ncclComm_t comm, const char* what) {
  double deadline = cc_now() + ctx->o->timeout;
  ctx->settles++;
  for (int polls = 0;; polls++) {
    ncclResult_t ae = ncclSuccess;
    CC_NCCL(ctx, comm, ncclCommGetAsyncError(comm, &ae));
    if (ae == ncclSuccess) return;
    if (polls == 0 && ae == ncclInProgress) ctx->settles_in_progress++;
    if (ae != ncclInProgress)
      cc_die(ctx, "%s: ncclCommGetAsyncError reports %d (%s), last error: '%s'", what, (int)ae,
             ncclGetErrorString(ae), ncclGetLastError(comm));
    if (cc_now() > deadline) cc_die(ctx, "%s: still in progress after %d s", what, ctx->o->timeout);
    sched_yield();
  }
}

/* One operation on every local rank, in one group. */
static void cc_issue(struct cc_ctx* ctx, const struct cc_case* cs) {
  char what[256];
  CC_NCCL(ctx, NULL, ncclGroupStart());
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    ncclResult_t e = cc_issue_rank(ctx, r, cs, r->comm, r->stream);
    if (e != ncclSuccess) {
      cc_describe(what, sizeof what, cs, ctx->nranks);
      cc_die(ctx, "rank %d: %s: the call returned %d (%s), last error: '%s'", r->rank, what, (int)e,
             ncclGetErrorString(e), ncclGetLastError(r->comm));
    }
  }
  ncclResult_t e = ncclGroupEnd();
  if (e != ncclSuccess && e != ncclInProgress) {
    cc_describe(what, sizeof what, cs, ctx->nranks);
    cc_die(ctx, "%s: ncclGroupEnd returned %d (%s), last error: '%s'", what, (int)e,
           ncclGetErrorString(e), ncclGetLastError(ctx->r[0].comm));
  }
}

/* Wait for every local stream, watching the communicators' asynchronous errors, a peer process
 * failing, and the timeout. */
static void cc_wait(struct cc_ctx* ctx, const char* what) {
  double deadline = cc_now() + ctx->o->timeout;
  for (;;) {
    int busy = 0;
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      cudaStream_t ss[2] = {r->stream, r->stream2};
      ncclComm_t cc[2] = {r->comm, r->comm2};
      for (int k = 0; k < 2; k++) {
        if (ss[k]) {
          cudaError_t e = cudaStreamQuery(ss[k]);
          if (e == cudaErrorNotReady)
            busy = 1;
          else if (e != cudaSuccess)
            cc_die(ctx, "%s: rank %d: stream error %d (%s)", what, r->rank, (int)e,
                   cudaGetErrorString(e));
        }
        if (cc[k]) {
          ncclResult_t ae = ncclSuccess;
          CC_NCCL(ctx, cc[k], ncclCommGetAsyncError(cc[k], &ae));
          if (ae != ncclSuccess && ae != ncclInProgress)
            cc_die(ctx, "%s: rank %d: asynchronous error %d (%s), last error: '%s'", what, r->rank,
                   (int)ae, ncclGetErrorString(ae), ncclGetLastError(cc[k]));
        }
      }
    }
    if (!busy) return;
    if (ctx->w->ops->failed(ctx->w)) {
      fprintf(stderr, "%s: another process failed; stopping\n", cc_prog);
      exit(PERF_EXIT_ABORTED);
    }
    if (cc_now() > deadline)
      cc_die(ctx, "%s: not complete after %d s (hang?)", what, ctx->o->timeout);
    sched_yield();
  }
}

/* ---- Checking ---- */

static void cc_fmt_val(char* buf, size_t len, int t, ref_val v) {
  if (ref_type_is_float(t))
    snprintf(buf, len, "%.9g", v.f);
  else if (ref_type_is_signed(t))
    snprintf(buf, len, "%lld", (long long)v.i);
  else
    snprintf(buf, len, "%llu", (unsigned long long)v.u);
}

/* Print the first wrong elements of buf (count elements from device memory), starting at index
 * `first`, re-evaluated on the host. */
static void cc_show(struct cc_ctx* ctx, struct cc_rank* r, const char* which, const char* buf,
                    size_t count, const struct perf_gen* g, const struct perf_expect* x,
                    unsigned long long first) {
  size_t elt = ref_type_size(g->type);
  size_t n = count - first < CC_SHOW_WINDOW ? count - first : CC_SHOW_WINDOW;
  unsigned char* host = malloc(n * elt + 8);
  int shown = 0;
  if (!host) return;
  CC_CUDA(ctx, cudaMemcpy(host, buf + first * elt, n * elt, cudaMemcpyDeviceToHost));
  for (size_t k = 0; k < n && shown < CC_MAX_SHOW; k++) {
    ref_val want, got = ref_load(g->type, host, k);
    double tol = 0.0;
    if (!perf_expect_elem(g, g->type, x, first + k, got, &want, &tol)) continue;
    char gs[48], ws[48];
    cc_fmt_val(gs, sizeof gs, g->type, got);
    cc_fmt_val(ws, sizeof ws, g->type, want);
    fprintf(stderr, "    rank %d %s[%zu]: got %s, expected %s (tolerance %.3g)\n", r->rank, which,
            (size_t)(first + k), gs, ws, tol);
    shown++;
  }
  free(host);
}

/* Queue the checks of one rank's buffers for case cs into counters out[0..4): output elements,
 * sentinels after, sentinels before, send buffer unchanged. */
static void cc_check_queue(struct cc_ctx* ctx, struct cc_rank* r, const struct cc_case* cs,
                           const struct perf_gen* g, struct perf_check_out* out, cudaStream_t st) {
  struct perf_counts c;
  struct perf_expect x;
  size_t elt = ref_type_size(cs->type);
  char *in, *o;
  int coll = cc_ops[cs->op].coll;
  cc_counts(cs->op, cs->count, ctx->nranks, &c);
  cc_layout(r, cs, &c, &in, &o);
  if (!st) st = r->stream;
  CC_CUDA(ctx, cudaSetDevice(r->dev));
  if (perf_coll_expect(coll, r->rank, ctx->nranks, cs->root, &c, &x))
    CC_CUDA(ctx, (cudaError_t)perf_data_check(o, c.recv_count, g, &x, &out[0], st));
  /* Nothing may be written outside [recv, recv + span). Non-root outputs of reduce and gather
   * are unspecified, but stay inside the buffer. */
  char* recv = cc_recv(r, cs);
  CC_CUDA(ctx, (cudaError_t)perf_data_guard(recv + cc_span(&c) * elt, CC_GUARD, 0xff, &out[1], st));
  CC_CUDA(ctx, (cudaError_t)perf_data_guard(r->slot[cs->slot].recv_base, CC_FRONT + cs->shift, 0xff,
                                            &out[2], st));
  /* An out-of-place input is const. */
  if (!cs->inplace && perf_coll_has_input(coll, r->rank, cs->root)) {
    struct perf_expect xi = {PERF_X_COPY_FIXED, r->rank, 1, 0};
    struct perf_gen gi = *g;
    CC_CUDA(ctx, (cudaError_t)perf_data_check(in, c.send_count, &gi, &xi, &out[3], st));
  }
}

static void cc_out_reset(struct cc_ctx* ctx, struct cc_rank* r, int first, int n, cudaStream_t st) {
  CC_CUDA(ctx, cudaSetDevice(r->dev));
  if (!st) st = r->stream;
  /* nwrong = 0, first = all ones. */
  for (int k = first; k < first + n; k++) {
    CC_CUDA(ctx, cudaMemsetAsync(&r->out[k].nwrong, 0, sizeof r->out[k].nwrong, st));
    CC_CUDA(ctx, cudaMemsetAsync(&r->out[k].first, 0xff, sizeof r->out[k].first, st));
  }
}

/* Read back counters out[first..first+4) of every local rank (after cc_wait) and report. Returns
 * the number of failing ranks (local). */
static int cc_check_report(struct cc_ctx* ctx, const struct cc_case* cs, const struct perf_gen* g,
                           int first, const char* tag) {
  int bad = 0;
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    struct perf_check_out h[4];
    struct perf_counts c;
    char *in, *o;
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    CC_CUDA(ctx, cudaMemcpy(h, &r->out[first], sizeof h, cudaMemcpyDeviceToHost));
    if (!h[0].nwrong && !h[1].nwrong && !h[2].nwrong && !h[3].nwrong) continue;
    bad++;
    if (++ctx->failures_printed > 40) continue;
    char what[256];
    cc_describe(what, sizeof what, cs, ctx->nranks);
    cc_counts(cs->op, cs->count, ctx->nranks, &c);
    cc_layout(r, cs, &c, &in, &o);
    fprintf(stderr, "%s: %s: FAIL %s%s%s: rank %d (device %d):", cc_prog, ctx->label, what,
            tag ? " " : "", tag ? tag : "", r->rank, r->dev);
    if (h[0].nwrong)
      fprintf(stderr, " %llu wrong elements (first at %llu)", h[0].nwrong, h[0].first);
    if (h[1].nwrong)
      fprintf(stderr, " %llu bytes overwritten after the buffer (first at +%llu)", h[1].nwrong,
              h[1].first);
    if (h[2].nwrong)
      fprintf(stderr, " %llu bytes overwritten before the buffer (first at %llu of %zu)",
              h[2].nwrong, h[2].first, (size_t)CC_FRONT + cs->shift);
    if (h[3].nwrong)
      fprintf(stderr, " send buffer modified: %llu elements (first at %llu)", h[3].nwrong,
              h[3].first);
    fprintf(stderr, "\n");
    if (h[0].nwrong) {
      struct perf_expect x;
      perf_coll_expect(cc_ops[cs->op].coll, r->rank, ctx->nranks, cs->root, &c, &x);
      cc_show(ctx, r, "recvbuff", o, c.recv_count, g, &x, h[0].first);
    }
    if (h[3].nwrong) {
      struct perf_expect xi = {PERF_X_COPY_FIXED, r->rank, 1, 0};
      cc_show(ctx, r, "sendbuff", in, c.send_count, g, &xi, h[3].first);
    }
  }
  return bad;
}

/* ---- One matrix case ---- */

/* Capture what follows on every local rank's stream into one graph per rank (thread-local mode). */
static void cc_capture_begin(struct cc_ctx* ctx) {
  for (int i = 0; i < ctx->nlocal; i++) {
    CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
    CC_CUDA(ctx, cudaStreamBeginCapture(ctx->r[i].stream, cudaStreamCaptureModeThreadLocal));
  }
}

/* End every capture, then instantiate: the thread-local capture mode forbids instantiating
 * while one of this thread's streams still captures. */
static void cc_capture_end(struct cc_ctx* ctx) {
  for (int i = 0; i < ctx->nlocal; i++) {
    CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
    CC_CUDA(ctx, cudaStreamEndCapture(ctx->r[i].stream, &ctx->r[i].graph));
  }
  for (int i = 0; i < ctx->nlocal; i++) {
    CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
    CC_CUDA(ctx, cudaGraphInstantiate(&ctx->r[i].exec, ctx->r[i].graph, 0));
  }
}

/* Run cs (optionally captured and replayed) and check it; returns 1 when any rank of any process
 * failed. */
static int cc_run_case(struct cc_ctx* ctx, struct cc_case cs, int graph_replays) {
  char what[256];
  struct perf_gen g;
  int bad = 0;
  cc_describe(what, sizeof what, &cs, ctx->nranks);
  cc_premul_create(ctx, &cs);
  if (graph_replays > 0) {
    /* Capture once, replay with fresh inputs (a new seed each time) written outside the graph. */
    cc_prepare(ctx, &cs);
    cc_wait(ctx, what);
    cc_barrier(ctx);
    cc_capture_begin(ctx);
    cc_issue(ctx, &cs);
    cc_capture_end(ctx);
    uint32_t seed0 = cs.seed;
    for (int k = 0; k < graph_replays; k++) {
      cs.seed = seed0 + 7919u * (uint32_t)k;
      cc_gen(ctx, &cs, &g);
      for (int i = 0; i < ctx->nlocal; i++) {
        cc_prepare_rank(ctx, &ctx->r[i], &cs, NULL);
        cc_out_reset(ctx, &ctx->r[i], 0, 4, NULL);
      }
      cc_wait(ctx, what);
      cc_barrier(ctx);
      for (int i = 0; i < ctx->nlocal; i++) {
        CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
        CC_CUDA(ctx, cudaGraphLaunch(ctx->r[i].exec, ctx->r[i].stream));
      }
      for (int i = 0; i < ctx->nlocal; i++)
        cc_check_queue(ctx, &ctx->r[i], &cs, &g, ctx->r[i].out, NULL);
      cc_wait(ctx, what);
      char tag[48];
      snprintf(tag, sizeof tag, "graph replay %d", k);
      bad += cc_check_report(ctx, &cs, &g, 0, tag);
    }
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      CC_CUDA(ctx, cudaGraphExecDestroy(r->exec));
      CC_CUDA(ctx, cudaGraphDestroy(r->graph));
    }
  } else {
    cc_gen(ctx, &cs, &g);
    for (int i = 0; i < ctx->nlocal; i++) {
      cc_prepare_rank(ctx, &ctx->r[i], &cs, NULL);
      cc_out_reset(ctx, &ctx->r[i], 0, 4, NULL);
    }
    cc_wait(ctx, what);
    cc_barrier(ctx);
    cc_issue(ctx, &cs);
    /* The checks queue behind the operation on the same stream: no host synchronisation. */
    for (int i = 0; i < ctx->nlocal; i++)
      cc_check_queue(ctx, &ctx->r[i], &cs, &g, ctx->r[i].out, NULL);
    cc_wait(ctx, what);
    bad += cc_check_report(ctx, &cs, &g, 0, NULL);
  }
  cc_premul_destroy(ctx);
  int total = cc_sum_world(ctx, bad);
  if (ctx->o->verbose && ctx->w->proc == 0)
    printf("%s: %s: %s %s\n", cc_prog, ctx->label, total ? "FAIL" : "ok", what);
  return total > 0;
}

static void cc_count(struct cc_ctx* ctx, int kase, int op, int failed) {
  ctx->case_stat[kase].cases++;
  ctx->case_stat[kase].failed += failed;
  if (op >= 0) {
    ctx->op_stat[op].cases++;
    ctx->op_stat[op].failed += failed;
  }
}

/* ---- The matrix ---- */

static size_t cc_size_count(const struct cc_size* s, int type) {
  return s->bytes ? s->n / ref_type_size(type) : s->n;
}

static int cc_type_ok(struct cc_ctx* ctx, int t) {
  if (t == REF_FP8_E4M3 || t == REF_FP8_E5M2) return ctx->fp8_ok;
  return 1;
}

static void cc_matrix_one(struct cc_ctx* ctx, int op, int t, size_t count, int kase) {
  const struct cc_opts* o = ctx->o;
  int nr = ctx->nranks;
  int reds[CC_NREDS], nreds = 0;
  if (cc_ops[op].reduces) {
    for (int red = 0; red < CC_NREDS; red++)
      if (o->reds[red]) reds[nreds++] = red;
  } else {
    reds[nreds++] = REF_SUM;
  }
  int roots[3], nroots = 0;
  if (!cc_ops[op].rooted) {
    roots[nroots++] = 0;
  } else if (o->roots == -2) {
    roots[nroots++] = 0;
    if (nr > 1) roots[nroots++] = nr - 1;
  } else if (o->roots == -3) {
    roots[nroots++] = nr - 1;
  } else if (o->roots >= 0) {
    roots[nroots++] = o->roots < nr ? o->roots : nr - 1;
  }
  for (int ri = 0; ri < nreds; ri++) {
    for (int ip = 0; ip < 2; ip++) {
      if (!(o->placements & (1 << ip))) continue;
      if (ip == 0 && cc_ops[op].inplace == 2) continue;
      if (ip == 1 && cc_ops[op].inplace == 0) continue;
      int npat = ref_type_is_float(t) && cc_ops[op].reduces && o->float_exact ? 2 : 1;
      for (int p = 0; p < npat; p++) {
        int pattern = PERF_PAT_RANDOM;
        if (p == 1 || (!ref_type_is_float(t) && cc_ops[op].reduces)) pattern = PERF_PAT_EXACT;
        int rall = o->roots == -1 && cc_ops[op].rooted;
        for (int k = 0; k < (rall ? nr : nroots); k++) {
          struct cc_case cs = {op,
                               t,
                               reds[ri],
                               count,
                               ip,
                               rall ? k : roots[k],
                               0,
                               pattern,
                               o->seed ^ (uint32_t)(count * 2654435761u) ^ (uint32_t)(op << 24) ^
                                   (uint32_t)(t << 16) ^ (uint32_t)(reds[ri] << 8) ^
                                   (uint32_t)(ip << 4),
                               0};
          cc_count(ctx, kase, op, cc_run_case(ctx, cs, o->graph));
        }
      }
    }
  }
}

static void cc_matrix(struct cc_ctx* ctx) {
  const struct cc_opts* o = ctx->o;
  for (int op = 0; op < CC_NOPS; op++) {
    if (!o->ops[op]) continue;
    for (int t = 0; t < REF_NTYPES; t++) {
      if (!o->types[t] || !cc_type_ok(ctx, t)) continue;
      for (int s = 0; s < o->nsizes; s++)
        cc_matrix_one(ctx, op, t, cc_size_count(&o->sizes[s], t), CC_CASE_MATRIX);
      if (!o->big_types[t]) continue;
      for (int s = 0; s < o->nbig; s++)
        cc_matrix_one(ctx, op, t, cc_size_count(&o->big[s], t), CC_CASE_MATRIX);
    }
  }
}

/* ---- Semantic cases ---- */

/* Run several cases (distinct slots) as one group: every rank issues all of them inside one
 * ncclGroupStart/End, optionally nested one level per case. split: odd ranks issue every other
 * case on a second stream (checked there), even ranks all on their first: ranks may use streams
 * differently (NCCL joins a group's streams around its kernels), and must still meet. Returns 1
 * on failure. */
static int cc_run_grouped_on(struct cc_ctx* ctx, struct cc_case* cs, int n, int nested,
                             int split, const char* tag) {
  struct perf_gen g[CC_NSLOTS];
  int bad = 0;
  for (int k = 0; k < n; k++) {
    cc_gen(ctx, &cs[k], &g[k]);
    for (int i = 0; i < ctx->nlocal; i++) {
      cc_prepare_rank(ctx, &ctx->r[i], &cs[k], NULL);
      cc_out_reset(ctx, &ctx->r[i], 4 * k, 4, NULL);
    }
  }
  for (int i = 0; i < ctx->nlocal && split; i++) {
    struct cc_rank* r = &ctx->r[i];
    if (r->stream2 != NULL) continue;
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    CC_CUDA(ctx, cudaStreamCreateWithFlags(&r->stream2, cudaStreamNonBlocking));
  }
  cc_wait(ctx, tag);
  cc_barrier(ctx);
  CC_NCCL(ctx, NULL, ncclGroupStart());
  for (int k = 0; k < n; k++) {
    if (nested) CC_NCCL(ctx, NULL, ncclGroupStart());
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      CC_CUDA(ctx, cudaSetDevice(r->dev));
      const cudaStream_t st = split && r->rank % 2 == 1 && k % 2 == 1 ? r->stream2 : r->stream;
      CC_NCCL(ctx, r->comm, cc_issue_rank(ctx, r, &cs[k], r->comm, st));
    }
    if (nested) CC_NCCL(ctx, NULL, ncclGroupEnd());
  }
  CC_NCCL(ctx, NULL, ncclGroupEnd());
  for (int k = 0; k < n; k++)
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      const cudaStream_t st = split && r->rank % 2 == 1 && k % 2 == 1 ? r->stream2 : NULL;
      cc_check_queue(ctx, r, &cs[k], &g[k], &r->out[4 * k], st);
    }
  cc_wait(ctx, tag);
  for (int k = 0; k < n; k++) bad += cc_check_report(ctx, &cs[k], &g[k], 4 * k, tag);
  if (split)
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      CC_CUDA(ctx, cudaSetDevice(r->dev));
      CC_CUDA(ctx, cudaStreamDestroy(r->stream2));
      r->stream2 = NULL;
    }
  return cc_sum_world(ctx, bad) > 0;
}

static int cc_run_grouped(struct cc_ctx* ctx, struct cc_case* cs, int n, int nested,
                          const char* tag) {
  return cc_run_grouped_on(ctx, cs, n, nested, 0, tag);
}

static struct cc_case cc_mk(int op, int type, int red, size_t count, int inplace, int root,
                            uint32_t seed, int slot) {
  struct cc_case c = {op, type, red, count, inplace, root, 0, PERF_PAT_RANDOM, seed, slot};
  if (!ref_type_is_float(type) && cc_ops[op].reduces) c.pattern = PERF_PAT_EXACT;
  return c;
}

/* Every rank sends a block to every rank (itself included) and receives one from each, all in one
 * group; odd ranks post their receives first. The result is an alltoall's. */
static int cc_p2p_all_pairs(struct cc_ctx* ctx, size_t count, uint32_t seed) {
  struct cc_case cs = cc_mk(CC_ALLTOALL, REF_FLOAT32, REF_SUM, count, 0, 0, seed, 0);
  struct perf_gen g;
  int nr = ctx->nranks;
  size_t elt = ref_type_size(cs.type);
  cc_gen(ctx, &cs, &g);
  for (int i = 0; i < ctx->nlocal; i++) {
    cc_prepare_rank(ctx, &ctx->r[i], &cs, NULL);
    cc_out_reset(ctx, &ctx->r[i], 0, 4, NULL);
  }
  cc_wait(ctx, "groups: all-pairs send/recv");
  cc_barrier(ctx);
  CC_NCCL(ctx, NULL, ncclGroupStart());
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    for (int half = 0; half < 2; half++) {
      int sends = (half == 0) == (r->rank % 2 == 0);
      for (int p = 0; p < nr; p++) {
        if (sends)
          CC_NCCL(ctx, r->comm,
                  ncclSend(cc_send(r, &cs) + (size_t)p * count * elt, count, ncclFloat32, p,
                           r->comm, r->stream));
        else
          CC_NCCL(ctx, r->comm,
                  ncclRecv(cc_recv(r, &cs) + (size_t)p * count * elt, count, ncclFloat32, p,
                           r->comm, r->stream));
      }
    }
  }
  CC_NCCL(ctx, NULL, ncclGroupEnd());
  for (int i = 0; i < ctx->nlocal; i++)
    cc_check_queue(ctx, &ctx->r[i], &cs, &g, ctx->r[i].out, NULL);
  cc_wait(ctx, "groups: all-pairs send/recv");
  return cc_sum_world(ctx, cc_check_report(ctx, &cs, &g, 0, "(as all-pairs send/recv)")) > 0;
}

static void cc_case_groups(struct cc_ctx* ctx) {
  int nr = ctx->nranks;
  uint32_t s = ctx->o->seed ^ 0x6a09e667u;
  /* Four different operations aggregated in one group. */
  struct cc_case a[4] = {
      cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, 65539, 0, 0, s + 1, 0),
      cc_mk(CC_ALLGATHER, REF_INT32, REF_SUM, 1023, 0, 0, s + 2, 1),
      cc_mk(CC_REDUCESCATTER, REF_BFLOAT16, REF_MAX, 4099, 1, 0, s + 3, 2),
      cc_mk(CC_BROADCAST, REF_UINT8, REF_SUM, 777, 0, nr - 1, s + 4, 3),
  };
  cc_count(ctx, CC_CASE_GROUPS, -1, cc_run_grouped(ctx, a, 4, 0, "(group of 4 operations)"));
  /* The same operation three times in one group, different sizes and operators. */
  struct cc_case b[3] = {
      cc_mk(CC_ALLREDUCE, REF_INT64, REF_SUM, 7, 0, 0, s + 5, 0),
      cc_mk(CC_ALLREDUCE, REF_FLOAT64, REF_MIN, 100003, 1, 0, s + 6, 1),
      cc_mk(CC_ALLREDUCE, REF_FLOAT16, REF_AVG, 1, 0, 0, s + 7, 2),
  };
  cc_count(ctx, CC_CASE_GROUPS, -1, cc_run_grouped(ctx, b, 3, 0, "(3 allreduces in one group)"));
  /* Many small allreduces in one group (Choir runs consecutive ones of one kernel in one launch,
   * kern_coll_batch_t): mixed sizes, so mixed channel counts and maybe protocols, one in-place in
   * three; every element of every one checked. */
  {
    struct cc_case m[CC_NSLOTS];
    for (int k = 0; k < CC_NSLOTS; k++) {
      const size_t count = k % 8 == 7 ? 4096 + 97 * (size_t)k : 1 + (size_t)(k * 37) % 1500;
      m[k] = cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, count, k % 3 == 0, 0,
                   s + 100 + (uint32_t)k, k);
    }
    cc_count(ctx, CC_CASE_GROUPS, -1,
             cc_run_grouped(ctx, m, CC_NSLOTS, 0, "(64 small allreduces in one group)"));
  }
  /* 64 medium AllReduces, AllGathers and ReduceScatters in a group each, sizes within 4x of one
   * another: Choir plans each group's run together (CHOIR_GROUP_PLAN) and puts ring works on
   * channels of their own, side by side in one launch (CHOIR_RING_SPREAD). */
  {
    static const int kinds[3] = {CC_ALLREDUCE, CC_ALLGATHER, CC_REDUCESCATTER};
    static const int types[3] = {REF_FLOAT32, REF_BFLOAT16, REF_FLOAT32};
    static const int reds[3] = {REF_SUM, REF_SUM, REF_AVG};
    static const char* const tags[3] = {"(64 medium allreduces in one group)",
                                        "(64 medium allgathers in one group)",
                                        "(64 medium reducescatters in one group)"};
    for (int j = 0; j < 3; j++) {
      struct cc_case m[CC_NSLOTS];
      for (int k = 0; k < CC_NSLOTS; k++) {
        const size_t base = j == 0 ? 4096 : 1024;
        const size_t count = base + (size_t)(k * 211) % (2 * base);
        m[k] = cc_mk(kinds[j], types[j], reds[j], count, k % 3 == 1, 0,
                     s + 200 + 64 * (uint32_t)j + (uint32_t)k, k);
      }
      cc_count(ctx, CC_CASE_GROUPS, -1, cc_run_grouped(ctx, m, CC_NSLOTS, 0, tags[j]));
    }
  }
  /* 64 small all-reduces and a few others in one group, odd ranks putting every other one on a
   * second stream, even ranks all on one: the launches (which Choir batches by kernel, OneShot
   * streams and ring works placed side by side) must not depend on the streams. */
  {
    struct cc_case m[CC_NSLOTS];
    for (int k = 0; k < CC_NSLOTS; k++) {
      const int op = k % 16 == 5 ? CC_ALLGATHER : k % 16 == 11 ? CC_BROADCAST : CC_ALLREDUCE;
      const size_t count = op == CC_ALLREDUCE ? 1 + (size_t)(k * 53) % 3000 : 513;
      m[k] = cc_mk(op, REF_FLOAT32, REF_SUM, count, k % 4 == 2, op == CC_BROADCAST ? nr - 1 : 0,
                   s + 400 + (uint32_t)k, k);
    }
    cc_count(ctx, CC_CASE_GROUPS, -1,
             cc_run_grouped_on(ctx, m, CC_NSLOTS, 0, 1,
                               "(64 operations in one group, ranks using streams differently)"));
  }
  /* Nested groups: the operations run at the outermost ncclGroupEnd. */
  struct cc_case c[3] = {
      cc_mk(CC_REDUCE, REF_UINT32, REF_PROD, 1023, 0, 0, s + 8, 0),
      cc_mk(CC_SENDRECV, REF_FLOAT32, REF_SUM, 65536, 0, 0, s + 9, 1),
      cc_mk(CC_GATHER, REF_INT8, REF_SUM, 33, 0, nr - 1, s + 10, 2),
  };
  cc_count(ctx, CC_CASE_GROUPS, -1, cc_run_grouped(ctx, c, 3, 1, "(nested groups)"));
  /* Send/recv that must progress together, every pair in one group. */
  cc_count(ctx, CC_CASE_GROUPS, -1, cc_p2p_all_pairs(ctx, 1000, s + 11));
  cc_count(ctx, CC_CASE_GROUPS, -1, cc_p2p_all_pairs(ctx, 262147, s + 12));

  /* ncclGroupSimulateEnd: succeeds and fills estimatedTime. */
  {
    struct cc_case d = cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, 1 << 20, 0, 0, s + 13, 3);
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    int bad = 0;
    for (int i = 0; i < ctx->nlocal; i++) cc_prepare_rank(ctx, &ctx->r[i], &d, NULL);
    cc_wait(ctx, "groups: simulate");
    CC_NCCL(ctx, NULL, ncclGroupStart());
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      CC_CUDA(ctx, cudaSetDevice(r->dev));
      CC_NCCL(ctx, r->comm, cc_issue_rank(ctx, r, &d, r->comm, r->stream));
    }
    ncclResult_t e = ncclGroupSimulateEnd(&sim);
    if (e != ncclSuccess) {
      fprintf(stderr, "%s: %s: FAIL groups: ncclGroupSimulateEnd returned %d (%s): '%s'\n", cc_prog,
              ctx->label, (int)e, ncclGetErrorString(e), ncclGetLastError(NULL));
      bad = 1;
    } else if (sim.estimatedTime == NCCL_UNDEF_FLOAT || !isfinite(sim.estimatedTime) ||
               sim.estimatedTime <= 0.0f) {
      /* A 4 MB all-reduce takes time on any library: an estimate of 0 is no estimate. */
      fprintf(stderr, "%s: %s: FAIL groups: ncclGroupSimulateEnd left estimatedTime = %g\n",
              cc_prog, ctx->label, (double)sim.estimatedTime);
      bad = 1;
    } else if (ctx->w->proc == 0 && ctx->o->verbose) {
      printf("%s: %s: ncclGroupSimulateEnd: estimatedTime %g us for a 4 MB allreduce\n", cc_prog,
             ctx->label, (double)sim.estimatedTime);
    }
    cc_wait(ctx, "groups: simulate");
    cc_count(ctx, CC_CASE_GROUPS, -1, cc_sum_world(ctx, bad) > 0);
    /* The communicators still work afterwards. */
    struct cc_case after = cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, 1 << 20, 0, 0, s + 14, 3);
    cc_count(ctx, CC_CASE_GROUPS, -1, cc_run_case(ctx, after, 0));
  }
}

/* Capture allreduce + allgather + ring send/recv on every rank's stream into one graph per rank,
 * replay it `replays` times with fresh inputs written before each replay, check every replay. */
static void cc_case_graph(struct cc_ctx* ctx) {
  int replays = ctx->o->graph_replays;
  uint32_t s = ctx->o->seed ^ 0xbb67ae85u;
  struct cc_case cs[3] = {
      cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, 262147, 0, 0, s, 0),
      cc_mk(CC_ALLGATHER, REF_BFLOAT16, REF_SUM, 65539, 0, 0, s + 1, 1),
      cc_mk(CC_SENDRECV, REF_INT32, REF_SUM, 12345, 0, 0, s + 2, 2),
  };
  struct perf_gen g[3];
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < ctx->nlocal; i++) cc_prepare_rank(ctx, &ctx->r[i], &cs[k], NULL);
  cc_wait(ctx, "graph: prepare");
  cc_barrier(ctx);
  cc_capture_begin(ctx);
  for (int k = 0; k < 3; k++) cc_issue(ctx, &cs[k]);
  cc_capture_end(ctx);
  for (int rep = 0; rep < replays; rep++) {
    int bad = 0;
    for (int k = 0; k < 3; k++) {
      cs[k].seed = s + (uint32_t)k + 104729u * (uint32_t)(rep + 1);
      cc_gen(ctx, &cs[k], &g[k]);
      for (int i = 0; i < ctx->nlocal; i++) {
        cc_prepare_rank(ctx, &ctx->r[i], &cs[k], NULL);
        cc_out_reset(ctx, &ctx->r[i], 4 * k, 4, NULL);
      }
    }
    /* Inputs are written on the stream the graph is launched on: ordered before the replay. */
    cc_barrier(ctx);
    for (int i = 0; i < ctx->nlocal; i++) {
      CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
      CC_CUDA(ctx, cudaGraphLaunch(ctx->r[i].exec, ctx->r[i].stream));
    }
    for (int k = 0; k < 3; k++)
      for (int i = 0; i < ctx->nlocal; i++)
        cc_check_queue(ctx, &ctx->r[i], &cs[k], &g[k], &ctx->r[i].out[4 * k], NULL);
    cc_wait(ctx, "graph: replay");
    char tag[48];
    snprintf(tag, sizeof tag, "(graph replay %d of %d)", rep + 1, replays);
    for (int k = 0; k < 3; k++) bad += cc_check_report(ctx, &cs[k], &g[k], 4 * k, tag);
    cc_count(ctx, CC_CASE_GRAPH, -1, cc_sum_world(ctx, bad) > 0);
  }
  for (int i = 0; i < ctx->nlocal; i++) {
    CC_CUDA(ctx, cudaGraphExecDestroy(ctx->r[i].exec));
    CC_CUDA(ctx, cudaGraphDestroy(ctx->r[i].graph));
  }
}

/* Ops on the user's stream; a dependent copy and check kernels queued behind them on that stream
 * see the results, over several iterations with no host synchronisation in between. */
static void cc_case_streams(struct cc_ctx* ctx) {
  enum { ITERS = 6 };
  uint32_t s = ctx->o->seed ^ 0x3c6ef372u;
  struct cc_case cs[ITERS];
  struct perf_gen g[ITERS];
  int ops[3] = {CC_ALLREDUCE, CC_ALLGATHER, CC_REDUCESCATTER};
  for (int it = 0; it < ITERS; it++) {
    cs[it] = cc_mk(ops[it % 3], REF_FLOAT32, REF_SUM, 100000 + (size_t)it * 1001, 0, 0,
                   s + (uint32_t)it, 0);
    cc_gen(ctx, &cs[it], &g[it]);
  }
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    size_t need = (100000 + ITERS * 1001) * sizeof(float) * (size_t)ctx->nranks;
    cc_slot_reserve(ctx, r, 0, need);
    if (r->aux_cap < need) {
      CC_CUDA(ctx, cudaSetDevice(r->dev));
      if (r->aux) CC_CUDA(ctx, cudaFree(r->aux));
      CC_CUDA(ctx, cudaMalloc((void**)&r->aux, need));
      r->aux_cap = need;
    }
    cc_out_reset(ctx, r, 0, 5 * ITERS, NULL);
  }
  cc_wait(ctx, "streams: prepare");
  cc_barrier(ctx);
  for (int it = 0; it < ITERS; it++) {
    struct perf_counts c;
    cc_counts(cs[it].op, cs[it].count, ctx->nranks, &c);
    for (int i = 0; i < ctx->nlocal; i++) cc_prepare_rank(ctx, &ctx->r[i], &cs[it], NULL);
    cc_issue(ctx, &cs[it]);
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      struct perf_expect x;
      CC_CUDA(ctx, cudaSetDevice(r->dev));
      /* A copy queued behind the operation: it must copy the result. */
      CC_CUDA(ctx, cudaMemcpyAsync(r->aux, cc_recv(r, &cs[it]), c.recv_count * sizeof(float),
                                   cudaMemcpyDeviceToDevice, r->stream));
      perf_coll_expect(cc_ops[cs[it].op].coll, r->rank, ctx->nranks, 0, &c, &x);
      CC_CUDA(ctx, (cudaError_t)perf_data_check(r->aux, c.recv_count, &g[it], &x, &r->out[5 * it],
                                                r->stream));
      /* And a check kernel directly on the result. */
      cc_check_queue(ctx, r, &cs[it], &g[it], &r->out[5 * it + 1], NULL);
    }
  }
  cc_wait(ctx, "streams");
  for (int it = 0; it < ITERS; it++) {
    int bad = 0;
    for (int i = 0; i < ctx->nlocal; i++) {
      struct cc_rank* r = &ctx->r[i];
      struct perf_check_out h[5];
      CC_CUDA(ctx, cudaMemcpy(h, &r->out[5 * it], sizeof h, cudaMemcpyDeviceToHost));
      if (h[0].nwrong || h[1].nwrong || h[2].nwrong || h[3].nwrong || h[4].nwrong) {
        char what[256];
        cc_describe(what, sizeof what, &cs[it], ctx->nranks);
        fprintf(stderr,
                "%s: %s: FAIL streams: iteration %d, %s: rank %d: copy queued behind it saw %llu "
                "wrong elements; direct check: %llu wrong, %llu+%llu sentinel bytes, %llu send "
                "elements changed\n",
                cc_prog, ctx->label, it, what, r->rank, h[0].nwrong, h[1].nwrong, h[2].nwrong,
                h[3].nwrong, h[4].nwrong);
        bad++;
      }
    }
    cc_count(ctx, CC_CASE_STREAMS, -1, cc_sum_world(ctx, bad) > 0);
  }
}

/* A communicator per local rank (new unique id), blocking or not; returns through comms[]. */
static void cc_comm_create(struct cc_ctx* ctx, ncclComm_t* comms, int blocking) {
  ncclUniqueId id;
  ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
  cfg.blocking = blocking;
  if (ctx->w->proc == 0) CC_NCCL(ctx, NULL, ncclGetUniqueId(&id));
  if (ctx->w->ops->bcast(ctx->w, &id, sizeof id)) cc_die(ctx, "unique id broadcast failed");
  CC_NCCL(ctx, NULL, ncclGroupStart());
  for (int i = 0; i < ctx->nlocal; i++) {
    CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
    CC_NCCL(ctx, NULL, ncclCommInitRankConfig(&comms[i], ctx->nranks, id, ctx->r[i].rank, &cfg));
  }
  CC_NCCL(ctx, NULL, ncclGroupEnd());
  if (!blocking)
    for (int i = 0; i < ctx->nlocal; i++) cc_settle(ctx, comms[i], "non-blocking init");
}

/* Release the local ranks' communicators comms[0..nlocal). Blocking ones are destroyed one after
 * the other, as nccl-tests does. Non-blocking ones are all finalized first (each call returns at
 * once), then polled until the finalization is done, then destroyed. */
static void cc_comms_free(struct cc_ctx* ctx, ncclComm_t* comms, int blocking) {
  if (!blocking) {
    for (int i = 0; i < ctx->nlocal; i++) {
      CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
      CC_NCCL(ctx, comms[i], ncclCommFinalize(comms[i]));
    }
    for (int i = 0; i < ctx->nlocal; i++) cc_settle(ctx, comms[i], "non-blocking finalize");
  }
  for (int i = 0; i < ctx->nlocal; i++) {
    CC_CUDA(ctx, cudaSetDevice(ctx->r[i].dev));
    CC_NCCL(ctx, comms[i], ncclCommDestroy(comms[i]));
  }
}

/* config.blocking = 0: every call may return ncclInProgress; ncclCommGetAsyncError is polled until
 * ncclSuccess before the streams are synchronised. */
static void cc_case_nonblocking(struct cc_ctx* ctx) {
  ncclComm_t* nb = calloc((size_t)ctx->nlocal, sizeof *nb);
  ncclComm_t* keep = calloc((size_t)ctx->nlocal, sizeof *keep);
  ctx->settles = ctx->settles_in_progress = 0;
  if (!nb || !keep) cc_die(ctx, "out of memory");
  cc_comm_create(ctx, nb, 0);
  for (int i = 0; i < ctx->nlocal; i++) {
    keep[i] = ctx->r[i].comm;
    ctx->r[i].comm = nb[i];
  }
  uint32_t s = ctx->o->seed ^ 0xa54ff53au;
  struct cc_case list[4] = {
      cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, 1 << 20, 0, 0, s, 0),
      cc_mk(CC_ALLGATHER, REF_INT8, REF_SUM, 65539, 1, 0, s + 1, 0),
      cc_mk(CC_SENDRECV, REF_FLOAT64, REF_SUM, 1023, 0, 0, s + 2, 0),
      cc_mk(CC_REDUCE, REF_INT32, CC_RED_PREMUL_HOST, 4097, 0, ctx->nranks - 1, s + 3, 0),
  };
  for (int k = 0; k < 4; k++) {
    struct perf_gen g;
    struct cc_case* cs = &list[k];
    cc_gen(ctx, cs, &g);
    for (int i = 0; i < ctx->nlocal; i++) {
      cc_prepare_rank(ctx, &ctx->r[i], cs, NULL);
      cc_out_reset(ctx, &ctx->r[i], 0, 4, NULL);
    }
    cc_wait(ctx, "nonblocking: prepare");
    cc_barrier(ctx);
    cc_premul_create(ctx, cs);
    for (int i = 0; i < ctx->nlocal; i++) cc_settle(ctx, ctx->r[i].comm, "nonblocking: premulsum");
    cc_issue(ctx, cs);
    for (int i = 0; i < ctx->nlocal; i++) cc_settle(ctx, ctx->r[i].comm, "nonblocking: operation");
    for (int i = 0; i < ctx->nlocal; i++)
      cc_check_queue(ctx, &ctx->r[i], cs, &g, ctx->r[i].out, NULL);
    cc_wait(ctx, "nonblocking");
    int bad = cc_check_report(ctx, cs, &g, 0, "(non-blocking communicator)");
    cc_premul_destroy(ctx);
    for (int i = 0; i < ctx->nlocal; i++) cc_settle(ctx, ctx->r[i].comm, "nonblocking: destroy op");
    cc_count(ctx, CC_CASE_NONBLOCKING, -1, cc_sum_world(ctx, bad) > 0);
  }
  /* Whether the library deferred work (a group end that returned before its launches, as
   * Choir's does while a fresh communicator connects): reported, not required, since NCCL may
   * finish every call before it returns. */
  printf("coll_check: %s: nonblocking: ncclCommGetAsyncError said ncclInProgress in %ld of %ld "
         "waits\n", ctx->label, ctx->settles_in_progress, ctx->settles);
  fflush(stdout);
  for (int i = 0; i < ctx->nlocal; i++) ctx->r[i].comm = keep[i];
  cc_comms_free(ctx, nb, 0);
  free(nb);
  free(keep);
}

/* Two communicators over the same GPUs, each on its own stream, used alternately and with both in
 * flight at once: no deadlock, every result right. */
static void cc_case_multicomm(struct cc_ctx* ctx) {
  enum { ITERS = 8 };
  ncclComm_t* second = calloc((size_t)ctx->nlocal, sizeof *second);
  if (!second) cc_die(ctx, "out of memory");
  cc_comm_create(ctx, second, 1);
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    r->comm2 = second[i];
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    CC_CUDA(ctx, cudaStreamCreateWithFlags(&r->stream2, cudaStreamNonBlocking));
  }
  uint32_t s = ctx->o->seed ^ 0x510e527fu;
  struct cc_case a[ITERS], b[ITERS];
  struct perf_gen ga[ITERS], gb[ITERS];
  for (int it = 0; it < ITERS; it++) {
    a[it] = cc_mk(CC_ALLREDUCE, REF_FLOAT32, REF_SUM, 300007, 0, 0, s + 2 * (uint32_t)it, 0);
    b[it] = cc_mk(CC_ALLGATHER, REF_INT32, REF_SUM, 70001, 0, 0, s + 2 * (uint32_t)it + 1, 1);
    cc_gen(ctx, &a[it], &ga[it]);
    cc_gen(ctx, &b[it], &gb[it]);
  }
  for (int i = 0; i < ctx->nlocal; i++) {
    cc_prepare_rank(ctx, &ctx->r[i], &a[0], NULL);
    cc_prepare_rank(ctx, &ctx->r[i], &b[0], ctx->r[i].stream2);
    cc_out_reset(ctx, &ctx->r[i], 0, 8 * ITERS, NULL);
  }
  cc_wait(ctx, "multicomm: prepare");
  cc_barrier(ctx);
  for (int it = 0; it < ITERS; it++) {
    /* Alternate which communicator goes first; each stream has its own inputs and checks. */
    for (int half = 0; half < 2; half++) {
      int use_b = (half == 0) == (it % 2 == 1);
      struct cc_case* cs = use_b ? &b[it] : &a[it];
      struct perf_gen* g = use_b ? &gb[it] : &ga[it];
      for (int i = 0; i < ctx->nlocal; i++)
        cc_prepare_rank(ctx, &ctx->r[i], cs, use_b ? ctx->r[i].stream2 : NULL);
      CC_NCCL(ctx, NULL, ncclGroupStart());
      for (int i = 0; i < ctx->nlocal; i++) {
        struct cc_rank* r = &ctx->r[i];
        CC_CUDA(ctx, cudaSetDevice(r->dev));
        CC_NCCL(
            ctx, r->comm,
            cc_issue_rank(ctx, r, cs, use_b ? r->comm2 : r->comm, use_b ? r->stream2 : r->stream));
      }
      CC_NCCL(ctx, NULL, ncclGroupEnd());
      for (int i = 0; i < ctx->nlocal; i++)
        cc_check_queue(ctx, &ctx->r[i], cs, g, &ctx->r[i].out[8 * it + 4 * use_b],
                       use_b ? ctx->r[i].stream2 : NULL);
    }
  }
  cc_wait(ctx, "multicomm");
  for (int it = 0; it < ITERS; it++) {
    int bad = cc_check_report(ctx, &a[it], &ga[it], 8 * it, "(first communicator)");
    bad += cc_check_report(ctx, &b[it], &gb[it], 8 * it + 4, "(second communicator, stream 2)");
    cc_count(ctx, CC_CASE_MULTICOMM, -1, cc_sum_world(ctx, bad) > 0);
  }
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    CC_CUDA(ctx, cudaStreamDestroy(r->stream2));
    r->stream2 = NULL;
    r->comm2 = NULL;
  }
  cc_comms_free(ctx, second, 1);
  free(second);
}

/* Buffers off alignment: by one element, and by odd byte counts for the 1-byte types; counts
 * that are multiples of nothing. */
static void cc_case_unaligned(struct cc_ctx* ctx) {
  static const size_t counts[] = {7, 1023, 65539};
  static const size_t byte_shifts[] = {1, 3, 5, 13};
  uint32_t s = ctx->o->seed ^ 0x9b05688cu;
  for (int op = 0; op < CC_NOPS; op++) {
    if (!ctx->o->ops[op]) continue;
    for (int t = 0; t < REF_NTYPES; t++) {
      if (!cc_type_ok(ctx, t)) continue;
      size_t elt = ref_type_size(t);
      for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
        for (size_t si = 0; si < (elt == 1 ? 4u : 1u); si++) {
          size_t shift = elt == 1 ? byte_shifts[si] : elt;
          for (int ip = 0; ip < 2; ip++) {
            if (ip == 0 && cc_ops[op].inplace == 2) continue;
            if (ip == 1 && cc_ops[op].inplace == 0) continue;
            struct cc_case cs =
                cc_mk(op, t, REF_SUM, counts[ci], ip, ctx->nranks - 1,
                      s + (uint32_t)(op * 1000 + t * 50 + (int)ci * 7 + (int)si), 0);
            cs.shift = shift;
            cc_count(ctx, CC_CASE_UNALIGNED, op, cc_run_case(ctx, cs, 0));
          }
        }
      }
    }
  }
}

/* Count 0 on every operation, out of place and in place, each alone and all in one group: the
 * calls succeed and no byte changes. */
static void cc_case_zero(struct cc_ctx* ctx) {
  uint32_t s = ctx->o->seed ^ 0x1f83d9abu;
  for (int op = 0; op < CC_NOPS; op++) {
    for (int ip = 0; ip < 2; ip++) {
      if (ip == 0 && cc_ops[op].inplace == 2) continue;
      if (ip == 1 && cc_ops[op].inplace == 0) continue;
      struct cc_case cs = cc_mk(op, REF_FLOAT32, REF_SUM, 0, ip, 0, s + (uint32_t)op, 0);
      cc_count(ctx, CC_CASE_ZERO, op, cc_run_case(ctx, cs, 0));
    }
  }
  struct cc_case all[4] = {
      cc_mk(CC_ALLREDUCE, REF_INT8, REF_MAX, 0, 0, 0, s + 20, 0),
      cc_mk(CC_ALLTOALL, REF_FLOAT16, REF_SUM, 0, 0, 0, s + 21, 1),
      cc_mk(CC_SENDRECV, REF_UINT64, REF_SUM, 0, 0, 0, s + 22, 2),
      cc_mk(CC_SCATTER, REF_BFLOAT16, REF_SUM, 0, 1, 0, s + 23, 3),
  };
  cc_count(ctx, CC_CASE_ZERO, -1, cc_run_grouped(ctx, all, 4, 0, "(count 0, one group)"));
}

/* ---- Ranks and communicators ---- */

/* The local ranks: rank proc * nlocal + i on device rank / rpg (one host: the rank is also the
 * rank's slot on the host), a non-blocking stream each (ranks sharing a GPU must never wait on
 * the legacy stream), then their communicators. Prints one line per rank with its device. */
static void cc_ranks_setup(struct cc_ctx* ctx, int init) {
  ctx->r = calloc((size_t)ctx->nlocal, sizeof *ctx->r);
  if (!ctx->r) cc_die(ctx, "out of memory");
  ctx->fp8_ok = ctx->nccl_version >= 22400;
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    struct cudaDeviceProp prop;
    r->rank = ctx->w->proc * ctx->nlocal + i;
    r->dev = r->rank / ctx->rpg;
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    CC_CUDA(ctx, cudaGetDeviceProperties(&prop, r->dev));
    if (prop.major < 9) ctx->fp8_ok = 0;
    CC_CUDA(ctx, cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking));
    CC_CUDA(ctx, cudaMalloc((void**)&r->out, CC_NOUT * sizeof *r->out));
    CC_CUDA(ctx, cudaMalloc(&r->scalar, 16));
  }
  /* Every process decides the same: fp8 only where every GPU has it. */
  double ok = ctx->fp8_ok;
  if (ctx->w->ops->allreduce(ctx->w, &ok, 1, PERF_RED_MIN)) exit(PERF_EXIT_ABORTED);
  ctx->fp8_ok = ok > 0.0;
  if (init == CC_INIT_ALL) {
    ncclComm_t* comms = calloc((size_t)ctx->nlocal, sizeof *comms);
    int* devs = calloc((size_t)ctx->nlocal, sizeof *devs);
    if (!comms || !devs) cc_die(ctx, "out of memory");
    for (int i = 0; i < ctx->nlocal; i++) devs[i] = ctx->r[i].dev;
    CC_NCCL(ctx, NULL, ncclCommInitAll(comms, ctx->nlocal, devs));
    for (int i = 0; i < ctx->nlocal; i++) ctx->r[i].comm = comms[i];
    free(comms);
    free(devs);
  } else {
    ncclComm_t* comms = calloc((size_t)ctx->nlocal, sizeof *comms);
    if (!comms) cc_die(ctx, "out of memory");
    cc_comm_create(ctx, comms, 1);
    for (int i = 0; i < ctx->nlocal; i++) ctx->r[i].comm = comms[i];
    free(comms);
  }
  for (int i = 0; i < ctx->nlocal; i++)
    printf("%s: %s: pid %d: rank %d on device %d\n", cc_prog, ctx->label, (int)getpid(),
           ctx->r[i].rank, ctx->r[i].dev);
  fflush(stdout);
}

static void cc_ranks_teardown(struct cc_ctx* ctx) {
  ncclComm_t* comms = calloc((size_t)ctx->nlocal, sizeof *comms);
  if (!comms) cc_die(ctx, "out of memory");
  for (int i = 0; i < ctx->nlocal; i++) comms[i] = ctx->r[i].comm;
  cc_comms_free(ctx, comms, 1);
  free(comms);
  for (int i = 0; i < ctx->nlocal; i++) {
    struct cc_rank* r = &ctx->r[i];
    CC_CUDA(ctx, cudaSetDevice(r->dev));
    for (int s = 0; s < CC_NSLOTS; s++) {
      if (r->slot[s].send_base) CC_CUDA(ctx, cudaFree(r->slot[s].send_base));
      if (r->slot[s].recv_base) CC_CUDA(ctx, cudaFree(r->slot[s].recv_base));
    }
    if (r->aux) CC_CUDA(ctx, cudaFree(r->aux));
    CC_CUDA(ctx, cudaFree(r->out));
    CC_CUDA(ctx, cudaFree(r->scalar));
    CC_CUDA(ctx, cudaStreamDestroy(r->stream));
  }
  free(ctx->r);
  ctx->r = NULL;
}

/* Run everything selected on an initialised context; prints the summary lines (process 0).
 * Returns the number of failed cases. */
static long cc_run_all(struct cc_ctx* ctx) {
  const struct cc_opts* o = ctx->o;
  double t0 = cc_now();
  if (o->cases[CC_CASE_MATRIX]) cc_matrix(ctx);
  if (o->cases[CC_CASE_GROUPS]) cc_case_groups(ctx);
  if (o->cases[CC_CASE_GRAPH]) cc_case_graph(ctx);
  if (o->cases[CC_CASE_NONBLOCKING]) cc_case_nonblocking(ctx);
  if (o->cases[CC_CASE_STREAMS]) cc_case_streams(ctx);
  if (o->cases[CC_CASE_MULTICOMM]) cc_case_multicomm(ctx);
  if (o->cases[CC_CASE_UNALIGNED]) cc_case_unaligned(ctx);
  if (o->cases[CC_CASE_ZERO]) cc_case_zero(ctx);
  long cases = 0, failed = 0;
  for (int k = 0; k < CC_NCASES; k++) {
    cases += ctx->case_stat[k].cases;
    failed += ctx->case_stat[k].failed;
  }
  if (ctx->w->proc == 0) {
    for (int op = 0; op < CC_NOPS; op++)
      if (ctx->op_stat[op].cases)
        printf("coll-check: %s: %-13s %6ld cases, %ld failed\n", ctx->label, cc_ops[op].name,
               ctx->op_stat[op].cases, ctx->op_stat[op].failed);
    for (int k = 1; k < CC_NCASES; k++)
      if (ctx->case_stat[k].cases)
        printf("coll-check: %s: case %-11s %6ld cases, %ld failed\n", ctx->label, cc_case_names[k],
               ctx->case_stat[k].cases, ctx->case_stat[k].failed);
    int ngpus = (ctx->nranks + ctx->rpg - 1) / ctx->rpg;
    printf("coll-check: %s: %ld cases, %ld failed, %d ranks on %d GPU%s, %.1f s\n", ctx->label,
           cases, failed, ctx->nranks, ngpus, ngpus > 1 ? "s" : "", cc_now() - t0);
    fflush(stdout);
  }
  return failed;
}

/* ---- Modes ---- */

struct cc_proc_arg {
  const struct cc_opts* o;
  int nranks;
  char result_path[64]; /* where process 0 leaves "cases failed" for the parent */
};

static int cc_ngpus_env(const struct cc_opts* o) {
  if (o->ngpus > 0) return o->ngpus;
  const char* e = getenv("CHOIR_TEST_NDEV");
  return e && *e ? atoi(e) : 0;
}

static int cc_gpus_for(int nranks, int rpg) { return (nranks + rpg - 1) / rpg; }

/* Can this layout run here? The ranks (-g, else $CHOIR_TEST_NDEV, else every visible GPU times
 * the ranks per GPU), at least 2 of them, the GPUs they need (ceil(ranks / rpg)), and, when
 * processes share a GPU (need_mps), MPS on each of those GPUs. Returns 0 with the rank count in
 * *nranks_p, or CC_EXIT_SKIP after one line saying why and what to do. */
static int cc_probe(const struct cc_opts* o, int need_mps, int* nranks_p) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    printf("%s: skipped: no GPU (%s)\n", cc_prog,
           e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    return CC_EXIT_SKIP;
  }
  int want = cc_ngpus_env(o);
  int n = want > 0 ? want : count * o->rpg;
  if (n < 2) {
    char why[64];
    if (o->ngpus > 0)
      snprintf(why, sizeof why, "-g %d", o->ngpus);
    else if (want > 0)
      snprintf(why, sizeof why, "CHOIR_TEST_NDEV=%d", want);
    else
      snprintf(why, sizeof why, "%d GPU visible, %d rank per GPU", count, o->rpg);
    printf("%s: skipped: 1 rank (%s), and the collectives need at least 2; on one GPU, run "
           "several ranks on it: --ranks-per-gpu 2 (or CHOIR_TEST_RPG=2)\n",
           cc_prog, why);
    return CC_EXIT_SKIP;
  }
  int need = cc_gpus_for(n, o->rpg);
  if (need > count) {
    printf("%s: skipped: %d ranks at %d per GPU need %d GPUs but only %d are visible\n", cc_prog,
           n, o->rpg, need, count);
    return CC_EXIT_SKIP;
  }
  for (int d = 0; need_mps && d < need; d++) {
    int mps = 0;
    e = cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, d);
    if (e != cudaSuccess || !mps) {
      printf("%s: skipped: needs MPS: --mode procs with %d ranks per GPU puts processes on one "
             "GPU whose kernels wait for each other, so they must run at the same time, which "
             "only MPS does, and device %d is not under MPS (%s); start a daemon "
             "(nvidia-cuda-mps-control -d, or mps_start from test/gpu-mps.sh) or use --mode "
             "threads\n",
             cc_prog, o->rpg, d,
             e != cudaSuccess ? cudaGetErrorString(e) : "cudaDevAttrMpsEnabled is 0");
      return CC_EXIT_SKIP;
    }
  }
  *nranks_p = n;
  return 0;
}

static int cc_hosts_env(void) {
  const char* e = getenv("CHOIR_TEST_HOSTS");
  return e && *e ? atoi(e) : 1;
}

/* "4 per GPU (CHOIR_RANKS_SHARE_GPU=1)", or "" with one rank per GPU. */
static const char* cc_share_note(const struct cc_opts* o, char* buf, size_t len) {
  const char* e = getenv("CHOIR_RANKS_SHARE_GPU");
  buf[0] = '\0';
  if (o->rpg > 1)
    snprintf(buf, len, ", %d ranks per GPU (CHOIR_RANKS_SHARE_GPU=%s)", o->rpg, e ? e : "unset");
  return buf;
}

static int cc_proc_main(struct perf_world* w, void* argp) {
  struct cc_proc_arg* a = argp;
  struct cc_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  ctx.o = a->o;
  ctx.w = w;
  ctx.label = "procs";
  ctx.nranks = a->nranks;
  ctx.nlocal = 1;
  ctx.rpg = a->o->rpg;
  ncclGetVersion(&ctx.nccl_version);
  /* CHOIR_TEST_HOSTS=H: the processes pose as H hosts (NCCL_HOSTID), in blocks of consecutive
   * ranks, so that one machine runs the paths of several (within a block p2p or shm, between
   * blocks the network). Set before the library reads it. */
  const int hosts = cc_hosts_env();
  if (hosts > 1) {
    char id[64];
    snprintf(id, sizeof id, "coll-check-host-%d", w->proc * hosts / a->nranks);
    setenv("NCCL_HOSTID", id, 1);
  }
  /* The parent has checked, in a probe process, that these GPUs exist. */
  cc_ranks_setup(&ctx, CC_INIT_GROUP);
  long failed = cc_run_all(&ctx);
  cc_ranks_teardown(&ctx);
  if (w->proc == 0) {
    FILE* f = fopen(a->result_path, "w");
    if (f) {
      long cases = 0;
      for (int k = 0; k < CC_NCASES; k++) cases += ctx.case_stat[k].cases;
      fprintf(f, "%ld %ld\n", cases, failed);
      fclose(f);
    }
  }
  return failed ? CC_EXIT_FAIL : CC_EXIT_OK;
}

/* cc_probe in a child, so that this process has not initialised CUDA when it forks the
 * per-rank processes. Returns the rank count, or -CC_EXIT_SKIP after the child said why. */
static int cc_probe_forked(const struct cc_opts* o, int need_mps) {
  int fds[2];
  if (pipe(fds)) return -CC_EXIT_FAIL;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    close(fds[0]);
    int rc = cc_probe(o, need_mps, &n);
    fflush(stdout);
    if (rc) n = -rc;
    if (write(fds[1], &n, sizeof n) != (ssize_t)sizeof n) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  int n = -CC_EXIT_FAIL, status;
  if (pid < 0 || read(fds[0], &n, sizeof n) != (ssize_t)sizeof n) n = -CC_EXIT_FAIL;
  close(fds[0]);
  if (pid > 0) waitpid(pid, &status, 0);
  return n;
}

static int cc_run_procs(const struct cc_opts* o, long* cases, long* failed) {
  /* Processes on one GPU: one rank each, so any rpg > 1 shares a GPU between processes. */
  int n = cc_probe_forked(o, o->rpg > 1);
  if (n < 0) return -n;
  if (n > PERF_MAX_PROCS) n = PERF_MAX_PROCS;
  struct cc_proc_arg a = {o, n, ""};
  char share[96];
  snprintf(a.result_path, sizeof a.result_path, "/tmp/coll_check.%d.result", (int)getpid());
  const int hosts = cc_hosts_env();
  if (o->rpg > 1)
    printf("%s: procs: %d processes on %d GPU%s%s\n", cc_prog, n, cc_gpus_for(n, o->rpg),
           cc_gpus_for(n, o->rpg) > 1 ? "s" : "", cc_share_note(o, share, sizeof share));
  else if (hosts > 1)
    printf("%s: procs: %d processes, one GPU each, posing as %d hosts (CHOIR_TEST_HOSTS)\n",
           cc_prog, n, hosts);
  else
    printf("%s: procs: %d processes, one GPU each\n", cc_prog, n);
  fflush(stdout);
  int rc = perf_launch(n, cc_proc_main, &a);
  FILE* f = fopen(a.result_path, "r");
  if (f) {
    long c = 0, fl = 0;
    if (fscanf(f, "%ld %ld", &c, &fl) == 2) {
      *cases += c;
      *failed += fl;
    }
    fclose(f);
    unlink(a.result_path);
  } else if (rc == 0) {
    rc = CC_EXIT_FAIL;
  }
  if (rc == PERF_EXIT_ABORTED) rc = CC_EXIT_FAIL;
  return rc;
}

static int cc_run_threads(const struct cc_opts* o, int init, long* cases, long* failed) {
  struct perf_world w;
  struct cc_ctx ctx;
  char share[96];
  int n = 0;
  /* One process: ranks that share a GPU share its context, no MPS needed. */
  int rc = cc_probe(o, 0, &n);
  if (rc) return rc;
  perf_world_single(&w);
  memset(&ctx, 0, sizeof ctx);
  ctx.o = o;
  ctx.w = &w;
  ctx.label = init == CC_INIT_ALL ? "threads/initall" : "threads/group-initrank";
  ctx.nranks = ctx.nlocal = n;
  ctx.rpg = o->rpg;
  ncclGetVersion(&ctx.nccl_version);
  if (o->rpg > 1)
    printf("%s: %s: %d ranks on %d GPU%s%s, driven from one thread\n", cc_prog, ctx.label, n,
           cc_gpus_for(n, o->rpg), cc_gpus_for(n, o->rpg) > 1 ? "s" : "",
           cc_share_note(o, share, sizeof share));
  else
    printf("%s: %s: %d GPUs driven from one thread\n", cc_prog, ctx.label, ctx.nranks);
  fflush(stdout);
  cc_ranks_setup(&ctx, init);
  long f = cc_run_all(&ctx);
  for (int k = 0; k < CC_NCASES; k++) *cases += ctx.case_stat[k].cases;
  *failed += f;
  cc_ranks_teardown(&ctx);
  return f ? CC_EXIT_FAIL : CC_EXIT_OK;
}

/* ---- Command line ---- */

static void cc_usage(FILE* f) {
  fprintf(
      f,
      "usage: %s [options]\n"
      "  -g, --ngpus N      ranks (at least 2); default $CHOIR_TEST_NDEV, else every visible\n"
      "                     GPU times the ranks per GPU\n"
      "  --ranks-per-gpu R  rank i uses device i / R (default $CHOIR_TEST_RPG, else 1); R > 1\n"
      "                     sets CHOIR_RANKS_SHARE_GPU=1 unless it is set; procs mode needs MPS\n"
      "  --mode LIST        threads (one process drives every rank) and/or procs (one process\n"
      "                     per rank); default threads. procs with CHOIR_TEST_HOSTS=H: the\n"
      "                     processes pose as H hosts (NCCL_HOSTID), consecutive ranks together\n"
      "  --init LIST        threads mode: all (ncclCommInitAll) and/or group (ncclCommInitRank\n"
      "                     per rank in a group); default all\n"
      "  --quick | --full   the matrix: quick (default) or the whole bar of issue 6\n"
      "  --ops LIST         allreduce broadcast bcast reduce allgather reducescatter alltoall\n"
      "                     gather scatter sendrecv, or all\n"
      "  --types LIST       int8 uint8 int32 uint32 int64 uint64 half float double bfloat16\n"
      "                     f8e4m3 f8e5m2, or all (fp8 only on sm_90+ with NCCL >= 2.24)\n"
      "  --redops LIST      sum prod max min avg premulsum (= premul-host,premul-dev), or all\n"
      "  --sizes LIST       counts: N elements, or NB/NKB/NMB/NGB bytes (count = bytes / size)\n"
      "  --big-sizes LIST   sizes run only for --big-types (full: 64MB,1GB; with R ranks per\n"
      "                     GPU 64MB and 1GB / R, so that R ranks' buffers fit on one GPU)\n"
      "  --big-types LIST   (full: float,int32)\n"
      "  --inplace 0|1|both placements (default both)\n"
      "  --root R|all|ends|last  roots of rooted operations (quick: last, full: ends)\n"
      "  --graph N          capture every matrix case in a CUDA graph, replay it N times\n"
      "  --replays N        replays of the graph case (default 50)\n"
      "  --case LIST        matrix groups graph nonblocking streams multicomm unaligned zero,\n"
      "                     or all (every case but the matrix), or none (only create and\n"
      "                     destroy the communicators); default matrix\n"
      "  --exact            floating-point reductions also on exactly representable data\n"
      "  --seed S  --timeout SECONDS (per wait, default 300)  -v, --verbose  -h, --help\n",
      cc_prog);
}

/* Split a comma list; calls fn(ctx, item) for each; returns -1 on the first bad item. */
static int cc_list(const char* s, int (*fn)(void*, const char*), void* arg) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (fn(arg, tok)) {
      fprintf(stderr, "%s: unknown item '%s' in '%s'\n", cc_prog, tok, s);
      return -1;
    }
  return 0;
}

static int cc_item_op(void* a, const char* s) {
  int* v = a;
  for (int i = 0; i < CC_NOPS; i++)
    if (!strcmp(s, "all") || !strcmp(s, cc_ops[i].name)) v[i] = 1;
  if (!strcmp(s, "all")) return 0;
  for (int i = 0; i < CC_NOPS; i++)
    if (!strcmp(s, cc_ops[i].name)) return 0;
  return -1;
}

static int cc_item_type(void* a, const char* s) {
  int* v = a;
  if (!strcmp(s, "all")) {
    for (int i = 0; i < REF_NTYPES; i++) v[i] = 1;
    return 0;
  }
  int t = perf_type_from_name(s);
  if (t < 0) return -1;
  v[t] = 1;
  return 0;
}

static int cc_item_red(void* a, const char* s) {
  int* v = a;
  if (!strcmp(s, "all") || !strcmp(s, "premulsum")) {
    v[CC_RED_PREMUL_HOST] = v[CC_RED_PREMUL_DEV] = 1;
    if (!strcmp(s, "all"))
      for (int i = 0; i < REF_PREMULSUM; i++) v[i] = 1;
    return 0;
  }
  for (int i = 0; i < CC_NREDS; i++)
    if (!strcmp(s, cc_red_name(i))) {
      v[i] = 1;
      return 0;
    }
  return -1;
}

static int cc_item_case(void* a, const char* s) {
  int* v = a;
  if (!strcmp(s, "none")) return 0;
  if (!strcmp(s, "all")) {
    for (int i = 1; i < CC_NCASES; i++) v[i] = 1;
    return 0;
  }
  for (int i = 0; i < CC_NCASES; i++)
    if (!strcmp(s, cc_case_names[i])) {
      v[i] = 1;
      return 0;
    }
  return -1;
}

static int cc_item_mode(void* a, const char* s) {
  int* v = a;
  if (!strcmp(s, "threads"))
    *v |= CC_MODE_THREADS;
  else if (!strcmp(s, "procs"))
    *v |= CC_MODE_PROCS;
  else
    return -1;
  return 0;
}

static int cc_item_init(void* a, const char* s) {
  int* v = a;
  if (!strcmp(s, "all"))
    *v |= CC_INIT_ALL;
  else if (!strcmp(s, "group"))
    *v |= CC_INIT_GROUP;
  else
    return -1;
  return 0;
}

struct cc_size_list {
  struct cc_size* v;
  int* n;
};

static int cc_item_size(void* a, const char* s) {
  struct cc_size_list* l = a;
  char buf[64];
  size_t len = strlen(s), v;
  int bytes = 0;
  if (*l->n >= CC_MAX_SIZES || len == 0 || len >= sizeof buf) return -1;
  snprintf(buf, sizeof buf, "%s", s);
  if (buf[len - 1] == 'B' || buf[len - 1] == 'b') {
    bytes = 1;
    buf[len - 1] = '\0';
  }
  if (perf_parse_size(buf, &v)) return -1;
  l->v[*l->n].n = v;
  l->v[*l->n].bytes = bytes;
  (*l->n)++;
  return 0;
}

static int cc_parse_int(const char* s, int lo, int hi, int* out) {
  char* end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

static void cc_set_sizes(struct cc_opts* o, const char* list, int big) {
  struct cc_size_list l = {big ? o->big : o->sizes, big ? &o->nbig : &o->nsizes};
  *l.n = 0;
  cc_list(list, cc_item_size, &l);
}

static int cc_parse(struct cc_opts* o, int argc, char** argv) {
  enum {
    O_MODE = 0x100,
    O_INIT,
    O_QUICK,
    O_FULL,
    O_OPS,
    O_TYPES,
    O_REDOPS,
    O_SIZES,
    O_BIG_SIZES,
    O_BIG_TYPES,
    O_INPLACE,
    O_ROOT,
    O_GRAPH,
    O_REPLAYS,
    O_CASE,
    O_EXACT,
    O_SEED,
    O_TIMEOUT,
    O_RPG
  };
  static const struct option longs[] = {{"ngpus", required_argument, 0, 'g'},
                                        {"ranks-per-gpu", required_argument, 0, O_RPG},
                                        {"mode", required_argument, 0, O_MODE},
                                        {"init", required_argument, 0, O_INIT},
                                        {"quick", no_argument, 0, O_QUICK},
                                        {"full", no_argument, 0, O_FULL},
                                        {"ops", required_argument, 0, O_OPS},
                                        {"types", required_argument, 0, O_TYPES},
                                        {"redops", required_argument, 0, O_REDOPS},
                                        {"sizes", required_argument, 0, O_SIZES},
                                        {"big-sizes", required_argument, 0, O_BIG_SIZES},
                                        {"big-types", required_argument, 0, O_BIG_TYPES},
                                        {"inplace", required_argument, 0, O_INPLACE},
                                        {"root", required_argument, 0, O_ROOT},
                                        {"graph", required_argument, 0, O_GRAPH},
                                        {"replays", required_argument, 0, O_REPLAYS},
                                        {"case", required_argument, 0, O_CASE},
                                        {"exact", no_argument, 0, O_EXACT},
                                        {"seed", required_argument, 0, O_SEED},
                                        {"timeout", required_argument, 0, O_TIMEOUT},
                                        {"verbose", no_argument, 0, 'v'},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  int full = 0, modes = 0, inits = 0, have_ops = 0, have_types = 0, have_reds = 0, have_cases = 0;
  int have_sizes = 0, have_big = 0, have_big_types = 0, have_root = 0;
  const char *sizes = NULL, *big = NULL;
  memset(o, 0, sizeof *o);
  o->placements = 3;
  o->graph_replays = 50;
  o->seed = 12345;
  o->timeout = 300;
  int c;
  while ((c = getopt_long(argc, argv, "g:vh", longs, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case 'g': bad = cc_parse_int(optarg, 1, PERF_MAX_PROCS, &o->ngpus); break;
    case O_RPG: bad = cc_parse_int(optarg, 1, PERF_MAX_PROCS, &o->rpg); break;
    case O_MODE: bad = cc_list(optarg, cc_item_mode, &modes); break;
    case O_INIT: bad = cc_list(optarg, cc_item_init, &inits); break;
    case O_QUICK: full = 0; break;
    case O_FULL: full = 1; break;
    case O_OPS: bad = cc_list(optarg, cc_item_op, o->ops), have_ops = 1; break;
    case O_TYPES: bad = cc_list(optarg, cc_item_type, o->types), have_types = 1; break;
    case O_REDOPS: bad = cc_list(optarg, cc_item_red, o->reds), have_reds = 1; break;
    case O_SIZES: sizes = optarg, have_sizes = 1; break;
    case O_BIG_SIZES: big = optarg, have_big = 1; break;
    case O_BIG_TYPES: bad = cc_list(optarg, cc_item_type, o->big_types), have_big_types = 1; break;
    case O_INPLACE:
      if (!strcmp(optarg, "0"))
        o->placements = 1;
      else if (!strcmp(optarg, "1"))
        o->placements = 2;
      else if (!strcmp(optarg, "both"))
        o->placements = 3;
      else
        bad = 1;
      break;
    case O_ROOT:
      have_root = 1;
      if (!strcmp(optarg, "all"))
        o->roots = -1;
      else if (!strcmp(optarg, "ends"))
        o->roots = -2;
      else if (!strcmp(optarg, "last"))
        o->roots = -3;
      else
        bad = cc_parse_int(optarg, 0, PERF_MAX_PROCS - 1, &o->roots);
      break;
    case O_GRAPH: bad = cc_parse_int(optarg, 0, 100000, &o->graph); break;
    case O_REPLAYS: bad = cc_parse_int(optarg, 1, 100000, &o->graph_replays); break;
    case O_CASE: bad = cc_list(optarg, cc_item_case, o->cases), have_cases = 1; break;
    case O_EXACT: o->float_exact = 1; break;
    case O_SEED: {
      int s;
      bad = cc_parse_int(optarg, 0, 0x7fffffff, &s);
      o->seed = (uint32_t)s;
      break;
    }
    case O_TIMEOUT: bad = cc_parse_int(optarg, 1, 86400, &o->timeout); break;
    case 'v': o->verbose = 1; break;
    case 'h': cc_usage(stdout); exit(0);
    default: bad = 1; break;
    }
    if (bad) {
      fprintf(stderr, "%s: bad value for option '%s'%s%s\n", cc_prog, argv[optind - 1],
              optarg ? ": " : "", optarg ? optarg : "");
      cc_usage(stderr);
      return CC_EXIT_USAGE;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "%s: unexpected argument '%s'\n", cc_prog, argv[optind]);
    return CC_EXIT_USAGE;
  }
  if (o->rpg == 0) {
    const char* e = getenv("CHOIR_TEST_RPG");
    o->rpg = 1;
    if (e && *e && cc_parse_int(e, 1, PERF_MAX_PROCS, &o->rpg)) {
      fprintf(stderr, "%s: CHOIR_TEST_RPG='%s': expected the ranks per GPU, from 1 to %d\n",
              cc_prog, e, PERF_MAX_PROCS);
      return CC_EXIT_USAGE;
    }
  }
  o->modes = modes ? modes : CC_MODE_THREADS;
  o->inits = inits ? inits : CC_INIT_ALL;
  if (!have_ops) cc_item_op(o->ops, "all");
  if (!have_types) cc_item_type(o->types, "all");
  if (!have_reds) cc_item_red(o->reds, "all");
  if (!have_cases) o->cases[CC_CASE_MATRIX] = 1;
  if (!have_root) o->roots = full ? -2 : -3;
  if (full && !o->float_exact) o->float_exact = 1;
  cc_set_sizes(o, have_sizes ? sizes : (full ? "0,1,7,1023,65539,1MB" : "0,1,7,1023,65539"), 0);
  /* R ranks on one GPU share its memory: the largest size is 1 GB / R (an 8-rank all-gather of
   * 1 GB holds 2 x 8 GB per rank, 128 GB for 8 ranks on one GPU). */
  char full_big[32];
  snprintf(full_big, sizeof full_big, "64MB,%dMB", 1024 / (o->rpg > 0 ? o->rpg : 1));
  cc_set_sizes(o, have_big ? big : (full ? full_big : ""), 1);
  if ((have_sizes && o->nsizes == 0) || (have_big && big[0] && o->nbig == 0)) {
    fprintf(stderr, "%s: bad size list\n", cc_prog);
    return CC_EXIT_USAGE;
  }
  if (!have_big_types && full) {
    o->big_types[REF_FLOAT32] = 1;
    o->big_types[REF_INT32] = 1;
  }
  return 0;
}

/* CHOIR_TEST_STACKS=1: SIGUSR2 makes the thread that takes it write its call stack to stderr
 * (raw frames; test/device-run.sh sends it to every thread of a lingering run and resolves the
 * offsets with addr2line). A debugging aid for stalls where no debugger is installed. */
static void cc_stack_signal(int sig) {
  (void)sig;
  void* frames[48];
  int n = backtrace(frames, 48);
  char line[48] = "== stack of thread ";
  size_t len = strlen(line);
  char digits[24];
  int nd = 0;
  for (long tid = (long)syscall(SYS_gettid); tid > 0 && nd < 24; tid /= 10)
    digits[nd++] = (char)('0' + tid % 10);
  while (nd > 0 && len < sizeof(line) - 2) line[len++] = digits[--nd];
  line[len++] = '\n';
  if (write(2, line, len) < 0) return;
  backtrace_symbols_fd(frames, n, 2);
}

static void cc_stack_install(void) {
  const char* e = getenv("CHOIR_TEST_STACKS");
  if (e == NULL || strcmp(e, "1") != 0) return;
  void* warm[2];
  backtrace(warm, 2); /* loads the unwinder now, not inside the handler */
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = cc_stack_signal;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR2, &sa, NULL);
}

int main(int argc, char** argv) {
  struct cc_opts o;
  int rc = cc_parse(&o, argc, argv);
  long cases = 0, failed = 0;
  int skipped = 0, worst = 0;
  if (rc) return rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  cc_stack_install();
  /* Ranks that share a GPU: Choir refuses them unless told (NVIDIA's NCCL always does). Set
   * before the library is first used, and before the processes are forked; a value the caller
   * set wins (CHOIR_RANKS_SHARE_GPU=0 checks the refusal). */
  if (o.rpg > 1) setenv("CHOIR_RANKS_SHARE_GPU", "1", 0);
  /* The per-GPU processes are forked first, before this process touches CUDA. */
  if (o.modes & CC_MODE_PROCS) {
    rc = cc_run_procs(&o, &cases, &failed);
    if (rc == CC_EXIT_SKIP)
      skipped++;
    else if (rc)
      worst = rc;
  }
  if (o.modes & CC_MODE_THREADS) {
    /* Ranks of one process on one GPU need a hardware queue per stream, or one rank's kernel can
     * wait in a queue behind another's that waits for it (an MPS client has few by default: 4
     * ranks hung in the groups case on an H100). Read when CUDA starts in this process, after the
     * procs mode's children are gone; not for them: one rank each, and 32 queues per MPS client
     * made their contexts fail (out of memory) with 4 of them. */
    if (o.rpg > 1) setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    for (int init = CC_INIT_ALL; init <= CC_INIT_GROUP; init <<= 1) {
      if (!(o.inits & init)) continue;
      rc = cc_run_threads(&o, init, &cases, &failed);
      if (rc == CC_EXIT_SKIP) {
        skipped++;
        break;
      }
      if (rc) worst = rc;
    }
  }
  if (skipped && cases == 0 && !worst) return CC_EXIT_SKIP;
  printf("coll-check: %ld cases, %ld failed\n", cases, failed);
  if (failed || worst) return CC_EXIT_FAIL;
  return CC_EXIT_OK;
}
