/*
 * Choir perf tools: the benchmark (one process; perf_main also starts the processes).
 *
 * Per process: -t threads, each driving -g ranks; ranks are numbered process-major, then thread,
 * then GPU, and the local rank slot i of the host (local_rank * t * g + thread * g + gpu) uses
 * device i / R (--ranks-per-gpu R, default 1: one GPU per rank; see perf_world_device).
 * For each type, operator and root, and each size: both halves (out of place, in place) are
 * timed with a host clock around -n iterations of -m operations (after one untimed call), ending
 * in the completion of every stream; the time per operation is averaged (-a) over all threads of
 * all processes. Then, with -c N, N fresh inputs are generated on the GPUs, the operation runs
 * once, and every element of every rank's output is checked on its GPU (perf_data.cu); the
 * number of wrong elements is summed over ranks.
 *
 * Failures: a failing CUDA or NCCL call ends the process at once with a message naming the
 * rank, the operation and the call (its communicators are in an unknown state and its peers
 * would wait forever; the launcher or MPI then stops the others). With -T, waits for stream
 * completion poll and abort the communicators when the time is up, and a watchdog thread ends
 * the process when a call that blocks (initialisation, group end, destroy) takes longer.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "perf.h"
#include "perf_data.h"

#ifndef PERF_MPI
#define PERF_MPI 0
#endif

#define PERF_GUARD_BYTES 4096 /* checked sentinel after each out-of-place output */
#define PERF_MAX_SIZES 4096
#define PERF_WATCHDOG_SLACK 10.0 /* extra seconds before the watchdog overrides a polling wait */

struct perf_gpu {
  int dev;
  int rank;
  ncclComm_t comm;
  cudaStream_t stream;
  char* send;
  char* recv;
  void* scalar;                /* premulsum factor for ncclScalarDevice */
  ncclRedOp_t op_host, op_dev; /* premulsum operators of the current type */
  struct perf_check_out* out;  /* [0] elements, [1] guard bytes */
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  void* send_reg; /* -R 1: ncclCommRegister's handles */
  void* recv_reg;
  ncclWindow_t send_win; /* -R 2: the windows */
  ncclWindow_t recv_win;
};

struct perf_ctx;

struct perf_worker {
  struct perf_ctx* ctx;
  int thread;
  struct perf_gpu* gpus;
  pthread_t tid;
  /* Watchdog state, under wd_mu. */
  pthread_mutex_t wd_mu;
  int wd_armed;
  int wd_polled; /* the worker polls with its own deadline; the watchdog is the backstop */
  double wd_start;
  char what[256];
};

/* One sweep's parameters. */
struct perf_case {
  int type;
  int op; /* enum ref_op or PERF_OP_NONE */
  int root;
  size_t elt;
  struct perf_counts c;
};

struct perf_ctx {
  const struct perf_opts* o;
  int coll;
  const char* prog;
  int argc;
  char** argv;
  struct perf_world* w;
  struct perf_team* team;
  int nranks;
  int ngpus;        /* per thread */
  size_t max_bytes; /* largest size run (after the memory cap) */
  size_t alloc;     /* bytes of each send and receive buffer, guard excluded */
  size_t sizes[PERF_MAX_SIZES];
  size_t nsizes;
  ncclUniqueId id;
  int init_all;
  struct perf_worker* workers;
  pthread_t watchdog;
  int watchdog_on;
  atomic_int watchdog_stop;
  /* Results, identical in every thread after the team reductions. */
  int64_t total_wrong;
  int nerrors;
  double bw_sum;
  long bw_count;
  /* Process 0, thread 0 only. */
  struct perf_json* json;
};

static double perf_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int perf_is_reporter(const struct perf_worker* wk) {
  return wk->ctx->w->proc == 0 && wk->thread == 0;
}

__attribute__((noreturn)) static void perf_die(struct perf_ctx* ctx, int code) {
  fflush(stdout);
  fflush(stderr);
  ctx->w->ops->fail(ctx->w, code);
  _exit(code);
}

__attribute__((noreturn, format(printf, 3, 4))) static void
perf_fatal(struct perf_worker* wk, int code, const char* fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&wk->wd_mu);
  fprintf(stderr, "%s: process %d thread %d: %s%s%s\n", wk->ctx->prog, wk->ctx->w->proc, wk->thread,
          msg, wk->what[0] ? ", during " : "", wk->what);
  pthread_mutex_unlock(&wk->wd_mu);
  perf_die(wk->ctx, code);
}

#define PERF_CUDA(wk, call)                                                                     \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess)                                                                      \
      perf_fatal((wk), PERF_EXIT_ERROR, "%s failed: %s (%s:%d)", #call, cudaGetErrorString(e_), \
                 __FILE__, __LINE__);                                                           \
  } while (0)

#define PERF_NCCL(wk, call)                                                               \
  do {                                                                                    \
    ncclResult_t r_ = (call);                                                             \
    if (r_ != ncclSuccess)                                                                \
      perf_fatal((wk), PERF_EXIT_ERROR, "%s failed: %s, last error: '%s' (%s:%d)", #call, \
                 ncclGetErrorString(r_), ncclGetLastError(NULL), __FILE__, __LINE__);     \
  } while (0)

/* ---- Watchdog ---- */

/* Name what the worker does now and restart its clock. polled: the worker enforces -T itself. */
__attribute__((format(printf, 3, 4))) static void perf_phase(struct perf_worker* wk, int polled,
                                                             const char* fmt, ...) {
  va_list ap;
  pthread_mutex_lock(&wk->wd_mu);
  if (fmt) {
    va_start(ap, fmt);
    vsnprintf(wk->what, sizeof wk->what, fmt, ap);
    va_end(ap);
  }
  wk->wd_armed = 1;
  wk->wd_polled = polled;
  wk->wd_start = perf_now();
  pthread_mutex_unlock(&wk->wd_mu);
}

static void perf_phase_end(struct perf_worker* wk) {
  pthread_mutex_lock(&wk->wd_mu);
  wk->wd_armed = 0;
  pthread_mutex_unlock(&wk->wd_mu);
}

static void* perf_watchdog_main(void* arg) {
  struct perf_ctx* ctx = arg;
  const double limit = ctx->o->timeout;
  while (!ctx->watchdog_stop) {
    usleep(100 * 1000);
    double now = perf_now();
    for (int t = 0; t < ctx->o->nthreads; t++) {
      struct perf_worker* wk = &ctx->workers[t];
      pthread_mutex_lock(&wk->wd_mu);
      double allowed = limit + (wk->wd_polled ? PERF_WATCHDOG_SLACK : 0.0);
      if (wk->wd_armed && now - wk->wd_start > allowed) {
        fprintf(stderr,
                "%s: timeout: process %d thread %d (ranks %d..%d): %s did not complete within "
                "%d s; exiting\n",
                ctx->prog, ctx->w->proc, t, wk->gpus[0].rank, wk->gpus[ctx->ngpus - 1].rank,
                wk->what[0] ? wk->what : "the current step", ctx->o->timeout);
        perf_die(ctx, PERF_EXIT_TIMEOUT);
      }
      pthread_mutex_unlock(&wk->wd_mu);
    }
  }
  return NULL;
}

/* Wait until every stream of the worker is idle, watching for asynchronous NCCL errors and -T. */
static void perf_wait(struct perf_worker* wk) {
  struct perf_ctx* ctx = wk->ctx;
  int ngpus = ctx->ngpus;
  int pending = ngpus;
  int done[1024] = {0};
  double start = perf_now();
  perf_phase(wk, 1, NULL);
  while (pending) {
    for (int g = 0; g < ngpus; g++) {
      if (done[g]) continue;
      cudaError_t e = cudaStreamQuery(wk->gpus[g].stream);
      if (e == cudaSuccess) {
        done[g] = 1;
        pending--;
      } else if (e != cudaErrorNotReady) {
        perf_fatal(wk, PERF_EXIT_ERROR, "rank %d: stream failed: %s", wk->gpus[g].rank,
                   cudaGetErrorString(e));
      }
      /* Also once the stream is idle: an error may be reported after the kernels ended. */
      ncclResult_t ae = ncclSuccess;
      ncclResult_t r = ncclCommGetAsyncError(wk->gpus[g].comm, &ae);
      if (r != ncclSuccess || (ae != ncclSuccess && ae != ncclInProgress)) {
        for (int h = 0; h < ngpus; h++) ncclCommAbort(wk->gpus[h].comm);
        perf_fatal(wk, PERF_EXIT_ERROR, "rank %d: asynchronous NCCL error: %s", wk->gpus[g].rank,
                   ncclGetErrorString(r != ncclSuccess ? r : ae));
      }
    }
    if (!pending) break;
    if (ctx->w->ops->failed(ctx->w)) {
      fprintf(stderr, "%s: process %d: another process failed; stopping\n", ctx->prog,
              ctx->w->proc);
      for (int g = 0; g < ngpus; g++) ncclCommAbort(wk->gpus[g].comm);
      perf_die(ctx, PERF_EXIT_ABORTED);
    }
    if (ctx->o->timeout > 0 && perf_now() - start > ctx->o->timeout) {
      fprintf(stderr,
              "%s: timeout: process %d thread %d (ranks %d..%d): %s did not complete within %d "
              "s; aborting the communicators\n",
              ctx->prog, ctx->w->proc, wk->thread, wk->gpus[0].rank, wk->gpus[ngpus - 1].rank,
              wk->what, ctx->o->timeout);
      for (int g = 0; g < ngpus; g++) ncclCommAbort(wk->gpus[g].comm);
      perf_die(ctx, PERF_EXIT_TIMEOUT);
    }
    sched_yield();
  }
  perf_phase(wk, 0, NULL);
}

static void perf_barrier(struct perf_worker* wk) {
  if (perf_team_allreduce(wk->ctx->team, NULL, 0, PERF_RED_SUM))
    perf_die(wk->ctx, PERF_EXIT_ABORTED);
}

static double perf_allreduce1(struct perf_worker* wk, double v, int op) {
  if (perf_team_allreduce(wk->ctx->team, &v, 1, op)) perf_die(wk->ctx, PERF_EXIT_ABORTED);
  return v;
}

/* ---- Issuing the collective ---- */

static ncclResult_t perf_issue_gpu(struct perf_ctx* ctx, struct perf_gpu* gp,
                                   const struct perf_case* cs, int in_place, size_t shift) {
  char* send = gp->send + shift;
  char* recv = gp->recv + shift;
  size_t count = cs->c.param_count;
  ncclDataType_t t = (ncclDataType_t)cs->type;
  ncclRedOp_t op = (ncclRedOp_t)(cs->op < 0 ? 0 : cs->op);
  int n = ctx->nranks;
  if (in_place) {
    send = recv + cs->c.send_inplace * (size_t)gp->rank * cs->elt;
    recv = recv + cs->c.recv_inplace * (size_t)gp->rank * cs->elt;
  }
  /* premulsum: out of place with a host-immediate factor, in place with one in device memory */
  if (cs->op == REF_PREMULSUM) op = in_place ? gp->op_dev : gp->op_host;
  switch (ctx->coll) {
  case PERF_ALL_REDUCE: return ncclAllReduce(send, recv, count, t, op, gp->comm, gp->stream);
  case PERF_ALL_GATHER: return ncclAllGather(send, recv, count, t, gp->comm, gp->stream);
  case PERF_REDUCE_SCATTER:
    return ncclReduceScatter(send, recv, count, t, op, gp->comm, gp->stream);
  case PERF_BROADCAST: return ncclBroadcast(send, recv, count, t, cs->root, gp->comm, gp->stream);
  case PERF_REDUCE: return ncclReduce(send, recv, count, t, op, cs->root, gp->comm, gp->stream);
  case PERF_ALLTOALL: return ncclAlltoAll(send, recv, count, t, gp->comm, gp->stream);
  case PERF_GATHER: return ncclGather(send, recv, count, t, cs->root, gp->comm, gp->stream);
  case PERF_SCATTER: return ncclScatter(send, recv, count, t, cs->root, gp->comm, gp->stream);
  case PERF_SENDRECV: {
    ncclResult_t r = ncclGroupStart();
    if (r == ncclSuccess) r = ncclSend(send, count, t, (gp->rank + 1) % n, gp->comm, gp->stream);
    if (r == ncclSuccess)
      r = ncclRecv(recv, count, t, (gp->rank - 1 + n) % n, gp->comm, gp->stream);
    ncclResult_t e = ncclGroupEnd();
    return r != ncclSuccess ? r : e;
  }
  default: return ncclInvalidArgument;
  }
}

/* Byte offset of iteration `iter` inside the buffers: consecutive iterations use different
 * addresses (as nccl-tests does), so that small sizes are not timed from warm caches only. */
static size_t perf_shift(const struct perf_ctx* ctx, const struct perf_case* cs, long iter) {
  size_t span =
      (cs->c.send_count > cs->c.recv_count ? cs->c.send_count : cs->c.recv_count) * cs->elt;
  if (span == 0) return 0;
  size_t steps = ctx->alloc / span;
  if (steps == 0) steps = 1;
  return span * ((size_t)iter % steps);
}

static void perf_issue(struct perf_worker* wk, const struct perf_case* cs, int in_place,
                       size_t shift) {
  struct perf_ctx* ctx = wk->ctx;
  if (ctx->ngpus > 1) PERF_NCCL(wk, ncclGroupStart());
  for (int g = 0; g < ctx->ngpus; g++) {
    ncclResult_t r = perf_issue_gpu(ctx, &wk->gpus[g], cs, in_place, shift);
    if (r != ncclSuccess)
      perf_fatal(wk, PERF_EXIT_ERROR, "rank %d: %s call failed: %s, last error: '%s'",
                 wk->gpus[g].rank, perf_colls[ctx->coll].name, ncclGetErrorString(r),
                 ncclGetLastError(wk->gpus[g].comm));
  }
  if (ctx->ngpus > 1) PERF_NCCL(wk, ncclGroupEnd());
}

static void perf_capture_begin(struct perf_worker* wk) {
  for (int g = 0; g < wk->ctx->ngpus; g++) {
    PERF_CUDA(wk, cudaSetDevice(wk->gpus[g].dev));
    PERF_CUDA(wk, cudaStreamBeginCapture(wk->gpus[g].stream, cudaStreamCaptureModeThreadLocal));
  }
}

/* Every capture ends before any graph is instantiated: instantiating is not permitted while
 * another stream of this thread is still capturing (several GPUs per thread). */
static void perf_capture_end(struct perf_worker* wk) {
  for (int g = 0; g < wk->ctx->ngpus; g++) {
    struct perf_gpu* gp = &wk->gpus[g];
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk, cudaStreamEndCapture(gp->stream, &gp->graph));
  }
  for (int g = 0; g < wk->ctx->ngpus; g++) {
    struct perf_gpu* gp = &wk->gpus[g];
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk, cudaGraphInstantiate(&gp->exec, gp->graph, 0));
  }
}

static void perf_graph_launch(struct perf_worker* wk) {
  for (int g = 0; g < wk->ctx->ngpus; g++) {
    PERF_CUDA(wk, cudaSetDevice(wk->gpus[g].dev));
    PERF_CUDA(wk, cudaGraphLaunch(wk->gpus[g].exec, wk->gpus[g].stream));
  }
}

static void perf_graph_destroy(struct perf_worker* wk) {
  for (int g = 0; g < wk->ctx->ngpus; g++) {
    PERF_CUDA(wk, cudaGraphExecDestroy(wk->gpus[g].exec));
    PERF_CUDA(wk, cudaGraphDestroy(wk->gpus[g].graph));
  }
}

/* ---- Timing ---- */

static const char* perf_half_name(int in_place) { return in_place ? "in-place" : "out-of-place"; }

static void perf_case_phase(struct perf_worker* wk, const struct perf_case* cs, int in_place,
                            const char* step) {
  perf_phase(wk, 0, "%s %s %s root %d, %zu bytes, %s, %s", perf_colls[wk->ctx->coll].name,
             ref_type_name(cs->type), perf_op_label(cs->op), cs->root,
             (cs->c.send_count > cs->c.recv_count ? cs->c.send_count : cs->c.recv_count) * cs->elt,
             perf_half_name(in_place), step);
}

/* Seconds per operation for this thread. */
static double perf_time_half(struct perf_worker* wk, const struct perf_case* cs, int in_place) {
  const struct perf_opts* o = wk->ctx->o;
  perf_case_phase(wk, cs, in_place, "first call");
  perf_issue(wk, cs, in_place, 0);
  perf_wait(wk);
  perf_barrier(wk);

  perf_case_phase(wk, cs, in_place, "timed loop");
  if (o->graph) perf_capture_begin(wk);
  double t0 = perf_now();
  for (int it = 0; it < o->iters; it++) {
    if (o->agg > 1) PERF_NCCL(wk, ncclGroupStart());
    for (int a = 0; a < o->agg; a++)
      perf_issue(wk, cs, in_place, perf_shift(wk->ctx, cs, (long)it * o->agg + a));
    if (o->agg > 1) PERF_NCCL(wk, ncclGroupEnd());
    if (o->blocking) {
      perf_wait(wk);
      if (o->blocking == 1) perf_barrier(wk);
    }
  }
  if (o->graph) {
    perf_capture_end(wk);
    perf_barrier(wk);
    t0 = perf_now();
    for (int l = 0; l < o->graph; l++) perf_graph_launch(wk);
  }
  perf_wait(wk);
  double dt = perf_now() - t0;
  if (o->graph) perf_graph_destroy(wk);
  perf_phase_end(wk);
  return dt / ((double)o->iters * o->agg * (o->graph ? o->graph : 1));
}

/* ---- Checking ---- */

static void perf_val_str(char* buf, size_t len, int t, ref_val v) {
  if (ref_type_is_float(t))
    snprintf(buf, len, "%.9g", v.f);
  else if (ref_type_is_signed(t))
    snprintf(buf, len, "%lld", (long long)v.i);
  else
    snprintf(buf, len, "%llu", (unsigned long long)v.u);
}

static const char* perf_pattern_name(int p) { return p == PERF_PAT_EXACT ? "exact" : "random"; }

/* Report the first wrong element of one rank (host-side recomputation of the expectation). */
static void perf_report_wrong(struct perf_worker* wk, struct perf_gpu* gp,
                              const struct perf_case* cs, int in_place, const struct perf_gen* g,
                              const struct perf_expect* x, const char* out,
                              const struct perf_check_out* r) {
  _Alignas(8) unsigned char raw[8] = {0}; /* ref_load needs element alignment */
  ref_val got, want;
  double tol = 0.0;
  char gs[64], ws[64];
  PERF_CUDA(wk, cudaMemcpy(raw, out + r[0].first * cs->elt, cs->elt, cudaMemcpyDeviceToHost));
  got = ref_load(cs->type, raw, 0);
  perf_expect_elem(g, cs->type, x, r[0].first, got, &want, &tol);
  perf_val_str(gs, sizeof gs, cs->type, got);
  perf_val_str(ws, sizeof ws, cs->type, want);
  fprintf(stderr,
          "%s: wrong result: rank %d (device %d): %s %s %s root %d, %zu bytes, %s, %s pattern: "
          "%llu of %zu elements wrong, first at index %llu: got %s, expected %s (tolerance %g)\n",
          wk->ctx->prog, gp->rank, gp->dev, perf_colls[wk->ctx->coll].name, ref_type_name(cs->type),
          perf_op_label(cs->op), cs->root,
          (cs->c.send_count > cs->c.recv_count ? cs->c.send_count : cs->c.recv_count) * cs->elt,
          perf_half_name(in_place), perf_pattern_name(g->pattern), r[0].nwrong, cs->c.recv_count,
          r[0].first, gs, ws, tol);
}

/* Run the operation once on fresh data and check every element; returns the number of wrong
 * elements over all ranks. */
static int64_t perf_check_once(struct perf_worker* wk, const struct perf_case* cs, int in_place,
                               int pattern, uint32_t seed) {
  struct perf_ctx* ctx = wk->ctx;
  const struct perf_opts* o = ctx->o;
  struct perf_gen g;
  size_t span =
      (cs->c.send_count > cs->c.recv_count ? cs->c.send_count : cs->c.recv_count) * cs->elt;
  double local = 0.0;

  perf_gen_setup(&g, cs->type, cs->op, ctx->nranks, pattern, seed);
  perf_case_phase(wk, cs, in_place, pattern == PERF_PAT_EXACT ? "check (exact data)" : "check");
  for (int gi = 0; gi < ctx->ngpus; gi++) {
    struct perf_gpu* gp = &wk->gpus[gi];
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    /* Sentinel everywhere an output may land, then the inputs. */
    PERF_CUDA(wk, cudaMemsetAsync(gp->recv, 0xff, span + PERF_GUARD_BYTES, gp->stream));
    if (perf_coll_has_input(ctx->coll, gp->rank, cs->root)) {
      char* in = in_place ? gp->recv + cs->c.send_inplace * (size_t)gp->rank * cs->elt : gp->send;
      PERF_CUDA(wk, (cudaError_t)perf_data_fill(in, cs->c.send_count, &g, gp->rank, gp->stream));
    }
    PERF_CUDA(wk, cudaMemsetAsync(gp->out, 0, 2 * sizeof *gp->out, gp->stream));
    PERF_CUDA(wk, cudaMemsetAsync(&gp->out[0].first, 0xff, sizeof gp->out[0].first, gp->stream));
    PERF_CUDA(wk, cudaMemsetAsync(&gp->out[1].first, 0xff, sizeof gp->out[1].first, gp->stream));
  }
  perf_wait(wk);
  perf_barrier(wk);

  if (o->graph) {
    perf_capture_begin(wk);
    perf_issue(wk, cs, in_place, 0);
    perf_capture_end(wk);
    perf_graph_launch(wk);
  } else {
    perf_issue(wk, cs, in_place, 0);
  }
  perf_wait(wk);
  if (o->graph) perf_graph_destroy(wk);

  for (int gi = 0; gi < ctx->ngpus; gi++) {
    struct perf_gpu* gp = &wk->gpus[gi];
    struct perf_expect x;
    struct perf_check_out r[2];
    if (!perf_coll_expect(ctx->coll, gp->rank, ctx->nranks, cs->root, &cs->c, &x)) continue;
    char* out = gp->recv + (in_place ? cs->c.recv_inplace * (size_t)gp->rank * cs->elt : 0);
    size_t out_bytes = cs->c.recv_count * cs->elt;
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk,
              (cudaError_t)perf_data_check(out, cs->c.recv_count, &g, &x, &gp->out[0], gp->stream));
    /* Out of place, the bytes after the output must still hold the sentinel. */
    if (!in_place)
      PERF_CUDA(wk, (cudaError_t)perf_data_guard(out + out_bytes, PERF_GUARD_BYTES, 0xff,
                                                 &gp->out[1], gp->stream));
    PERF_CUDA(wk, cudaMemcpyAsync(r, gp->out, sizeof r, cudaMemcpyDeviceToHost, gp->stream));
    PERF_CUDA(wk, cudaStreamSynchronize(gp->stream));
    if (r[0].nwrong) perf_report_wrong(wk, gp, cs, in_place, &g, &x, out, r);
    if (r[1].nwrong)
      fprintf(stderr,
              "%s: rank %d (device %d): %s %s, %zu bytes, out-of-place: %llu bytes after the end "
              "of the %zu-byte output were overwritten (first at +%llu)\n",
              ctx->prog, gp->rank, gp->dev, perf_colls[ctx->coll].name, ref_type_name(cs->type),
              span, r[1].nwrong, out_bytes, r[1].first);
    local += (double)(r[0].nwrong + r[1].nwrong);
  }
  perf_phase_end(wk);
  return (int64_t)perf_allreduce1(wk, local, PERF_RED_SUM);
}

static int64_t perf_check_half(struct perf_worker* wk, const struct perf_case* cs, int in_place,
                               size_t size) {
  int patterns[2], np = 0;
  if (ref_type_is_float(cs->type) && cs->op != PERF_OP_NONE) {
    patterns[np++] = PERF_PAT_EXACT;
    patterns[np++] = PERF_PAT_RANDOM;
  } else {
    patterns[np++] = cs->op == PERF_OP_NONE ? PERF_PAT_RANDOM : PERF_PAT_EXACT;
  }
  for (int c = 0; c < wk->ctx->o->check; c++) {
    for (int p = 0; p < np; p++) {
      uint32_t seed =
          perf_mix32((uint32_t)size * 0x9e3779b1u ^ (uint32_t)(size >> 32)) ^
          perf_mix32((uint32_t)(c * 8 + p * 2 + in_place) + 0x1000u * (uint32_t)cs->type +
                     0x10000u * (uint32_t)(cs->op + 1) + 0x100000u * (uint32_t)(cs->root + 1));
      int64_t wrong = perf_check_once(wk, cs, in_place, patterns[p], seed);
      if (wrong) return wrong;
    }
  }
  return 0;
}

/* ---- Sweeps ---- */

static void perf_fill_buffers(struct perf_worker* wk, int type) {
  struct perf_ctx* ctx = wk->ctx;
  struct perf_gen g;
  size_t n = ctx->alloc / ref_type_size(type);
  perf_gen_setup(&g, type, PERF_OP_NONE, ctx->nranks, PERF_PAT_RANDOM, 0x5eedu + (uint32_t)type);
  perf_phase(wk, 0, "filling the buffers with %s values", ref_type_name(type));
  for (int gi = 0; gi < ctx->ngpus; gi++) {
    struct perf_gpu* gp = &wk->gpus[gi];
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk, (cudaError_t)perf_data_fill(gp->send, n, &g, gp->rank, gp->stream));
    PERF_CUDA(wk, (cudaError_t)perf_data_fill(gp->recv, n, &g, gp->rank, gp->stream));
  }
  perf_wait(wk);
  perf_phase_end(wk);
}

static void perf_premul_create(struct perf_worker* wk, int type) {
  for (int gi = 0; gi < wk->ctx->ngpus; gi++) {
    struct perf_gpu* gp = &wk->gpus[gi];
    _Alignas(8) unsigned char host[8] = {0}; /* ref_store needs element alignment */
    ref_store(type, host, 0, perf_gen_scalar(type, gp->rank));
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk, cudaMemcpy(gp->scalar, host, ref_type_size(type), cudaMemcpyHostToDevice));
    PERF_NCCL(wk, ncclRedOpCreatePreMulSum(&gp->op_host, host, (ncclDataType_t)type,
                                           ncclScalarHostImmediate, gp->comm));
    PERF_NCCL(wk, ncclRedOpCreatePreMulSum(&gp->op_dev, gp->scalar, (ncclDataType_t)type,
                                           ncclScalarDevice, gp->comm));
  }
}

static void perf_premul_destroy(struct perf_worker* wk) {
  for (int gi = 0; gi < wk->ctx->ngpus; gi++) {
    struct perf_gpu* gp = &wk->gpus[gi];
    PERF_NCCL(wk, ncclRedOpDestroy(gp->op_host, gp->comm));
    PERF_NCCL(wk, ncclRedOpDestroy(gp->op_dev, gp->comm));
  }
}

static void perf_case_init(struct perf_ctx* ctx, struct perf_case* cs, int type, int op, int root,
                           size_t bytes) {
  cs->type = type;
  cs->op = op;
  cs->root = root;
  cs->elt = ref_type_size(type);
  perf_coll_counts(ctx->coll, bytes / cs->elt, ctx->nranks, &cs->c);
}

static void perf_warmup(struct perf_worker* wk, int type, int op, int root, size_t bytes) {
  struct perf_case cs;
  perf_case_init(wk->ctx, &cs, type, op, root, bytes);
  perf_case_phase(wk, &cs, 0, "warm-up");
  for (int i = 0; i < wk->ctx->o->warmup; i++) {
    perf_issue(wk, &cs, 0, perf_shift(wk->ctx, &cs, i));
    if (wk->ctx->o->blocking) perf_wait(wk);
  }
  perf_wait(wk);
  perf_phase_end(wk);
}

static void perf_run_size(struct perf_worker* wk, int type, int op, int root, size_t bytes) {
  struct perf_ctx* ctx = wk->ctx;
  const struct perf_opts* o = ctx->o;
  struct perf_case cs;
  struct perf_row row;
  perf_case_init(ctx, &cs, type, op, root, bytes);
  memset(&row, 0, sizeof row);
  row.bytes = (cs.c.send_count > cs.c.recv_count ? cs.c.send_count : cs.c.recv_count) * cs.elt;
  row.count = cs.c.param_count;
  row.type = ref_type_name(type);
  row.redop = perf_op_label(op);
  row.root = root;
  for (int ip = 0; ip < 2; ip++) {
    struct perf_half* h = &row.half[ip];
    double sec = perf_time_half(wk, &cs, ip);
    double total_threads = (double)o->nthreads * ctx->w->nprocs;
    switch (o->average) {
    case 0: sec = perf_allreduce1(wk, perf_is_reporter(wk) ? sec : 0.0, PERF_RED_SUM); break;
    case 2: sec = perf_allreduce1(wk, sec, PERF_RED_MIN); break;
    case 3: sec = perf_allreduce1(wk, sec, PERF_RED_MAX); break;
    default: sec = perf_allreduce1(wk, sec, PERF_RED_SUM) / total_threads; break;
    }
    h->time_us = sec * 1e6;
    perf_coll_bw(ctx->coll, cs.c.param_count, cs.elt, ctx->nranks, sec, &h->algbw, &h->busbw);
    h->checked = o->check > 0 && (!ip || perf_colls[ctx->coll].inplace_ok);
    if (h->checked) {
      h->nwrong = perf_check_half(wk, &cs, ip, bytes);
      if (h->nwrong) ctx->nerrors += perf_is_reporter(wk);
    }
  }
  if (perf_is_reporter(wk)) {
    perf_fmt_row(stdout, &row);
    if (ctx->json) perf_json_row(ctx->json, &row, o->iters * o->agg * (o->graph ? o->graph : 1));
    ctx->bw_sum += row.half[0].busbw + row.half[1].busbw;
    ctx->bw_count += 2;
    ctx->total_wrong += row.half[0].nwrong + row.half[1].nwrong;
  }
}

static void perf_sweep(struct perf_worker* wk) {
  struct perf_ctx* ctx = wk->ctx;
  const struct perf_opts* o = ctx->o;
  const struct perf_coll* cl = &perf_colls[ctx->coll];
  int nops = cl->reduces ? o->nops : 1;
  int root_lo = -1, root_hi = -1;
  if (cl->rooted) {
    root_lo = o->root < 0 ? 0 : o->root;
    root_hi = o->root < 0 ? ctx->nranks - 1 : o->root;
  }
  for (int ti = 0; ti < o->ntypes; ti++) {
    int type = o->types[ti];
    for (int oi = 0; oi < nops; oi++) {
      int op = cl->reduces ? o->ops[oi] : PERF_OP_NONE;
      perf_fill_buffers(wk, type);
      if (op == REF_PREMULSUM) perf_premul_create(wk, type);
      for (int root = root_lo; root <= root_hi; root++) {
        perf_barrier(wk);
        perf_warmup(wk, type, op, root, ctx->max_bytes);
        perf_warmup(wk, type, op, root, ctx->sizes[0]);
        for (size_t s = 0; s < ctx->nsizes; s++) perf_run_size(wk, type, op, root, ctx->sizes[s]);
      }
      if (op == REF_PREMULSUM) perf_premul_destroy(wk);
    }
  }
}

/* ---- Worker lifetime ---- */

static void perf_worker_setup(struct perf_worker* wk) {
  struct perf_ctx* ctx = wk->ctx;
  int devs[1024];
  for (int g = 0; g < ctx->ngpus; g++) {
    struct perf_gpu* gp = &wk->gpus[g];
    gp->dev = perf_world_device(ctx->o, ctx->w->local_rank, wk->thread, g);
    gp->rank = (ctx->w->proc * ctx->o->nthreads + wk->thread) * ctx->ngpus + g;
    devs[g] = gp->dev;
    perf_phase(wk, 0, "setting up device %d for rank %d", gp->dev, gp->rank);
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk, cudaStreamCreateWithFlags(&gp->stream, cudaStreamNonBlocking));
    if (ctx->o->cuda_malloc) {
      PERF_CUDA(wk, cudaMalloc((void**)&gp->send, ctx->alloc + PERF_GUARD_BYTES));
      PERF_CUDA(wk, cudaMalloc((void**)&gp->recv, ctx->alloc + PERF_GUARD_BYTES));
    } else {
      /* As nccl-tests does since NCCL 2.19: memory suited to registration and peer mapping. */
      PERF_NCCL(wk, ncclMemAlloc((void**)&gp->send, ctx->alloc + PERF_GUARD_BYTES));
      PERF_NCCL(wk, ncclMemAlloc((void**)&gp->recv, ctx->alloc + PERF_GUARD_BYTES));
    }
    PERF_CUDA(wk, cudaMalloc(&gp->scalar, 16));
    PERF_CUDA(wk, cudaMalloc((void**)&gp->out, 2 * sizeof *gp->out));
  }
  if (ctx->init_all) {
    ncclComm_t comms[1024];
    perf_phase(wk, 0, "ncclCommInitAll of %d devices", ctx->ngpus);
    PERF_NCCL(wk, ncclCommInitAll(comms, ctx->ngpus, devs));
    for (int g = 0; g < ctx->ngpus; g++) wk->gpus[g].comm = comms[g];
  } else {
    perf_phase(wk, 0, "communicator initialisation (ncclCommInitRank of ranks %d..%d of %d)",
               wk->gpus[0].rank, wk->gpus[ctx->ngpus - 1].rank, ctx->nranks);
    PERF_NCCL(wk, ncclGroupStart());
    for (int g = 0; g < ctx->ngpus; g++) {
      PERF_CUDA(wk, cudaSetDevice(wk->gpus[g].dev));
      PERF_NCCL(wk, ncclCommInitRank(&wk->gpus[g].comm, ctx->nranks, ctx->id, wk->gpus[g].rank));
    }
    PERF_NCCL(wk, ncclGroupEnd());
  }
  const size_t bytes = ctx->alloc + PERF_GUARD_BYTES;
  if (ctx->o->local_register == 1) {
    perf_phase(wk, 0, "ncclCommRegister of the buffers");
    for (int g = 0; g < ctx->ngpus; g++) {
      struct perf_gpu* gp = &wk->gpus[g];
      PERF_CUDA(wk, cudaSetDevice(gp->dev));
      PERF_NCCL(wk, ncclCommRegister(gp->comm, gp->send, bytes, &gp->send_reg));
      PERF_NCCL(wk, ncclCommRegister(gp->comm, gp->recv, bytes, &gp->recv_reg));
    }
  } else if (ctx->o->local_register == 2) {
    /* Collective: every rank of this worker in one group. */
    perf_phase(wk, 0, "ncclCommWindowRegister of the buffers");
    PERF_NCCL(wk, ncclGroupStart());
    for (int g = 0; g < ctx->ngpus; g++) {
      struct perf_gpu* gp = &wk->gpus[g];
      PERF_CUDA(wk, cudaSetDevice(gp->dev));
      PERF_NCCL(wk, ncclCommWindowRegister(gp->comm, gp->send, bytes, &gp->send_win,
                                           NCCL_WIN_COLL_SYMMETRIC));
      PERF_NCCL(wk, ncclCommWindowRegister(gp->comm, gp->recv, bytes, &gp->recv_win,
                                           NCCL_WIN_COLL_SYMMETRIC));
    }
    PERF_NCCL(wk, ncclGroupEnd());
  }
  perf_phase_end(wk);
}

static void perf_worker_teardown(struct perf_worker* wk) {
  struct perf_ctx* ctx = wk->ctx;
  perf_phase(wk, 0, "ncclCommDestroy");
  for (int g = 0; g < ctx->ngpus; g++) {
    struct perf_gpu* gp = &wk->gpus[g];
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    if (gp->send_reg) PERF_NCCL(wk, ncclCommDeregister(gp->comm, gp->send_reg));
    if (gp->recv_reg) PERF_NCCL(wk, ncclCommDeregister(gp->comm, gp->recv_reg));
    if (gp->send_win) PERF_NCCL(wk, ncclCommWindowDeregister(gp->comm, gp->send_win));
    if (gp->recv_win) PERF_NCCL(wk, ncclCommWindowDeregister(gp->comm, gp->recv_win));
    PERF_NCCL(wk, ncclCommDestroy(gp->comm));
  }
  perf_phase_end(wk);
  for (int g = 0; g < ctx->ngpus; g++) {
    struct perf_gpu* gp = &wk->gpus[g];
    PERF_CUDA(wk, cudaSetDevice(gp->dev));
    PERF_CUDA(wk, cudaFree(gp->out));
    PERF_CUDA(wk, cudaFree(gp->scalar));
    if (ctx->o->cuda_malloc) {
      PERF_CUDA(wk, cudaFree(gp->recv));
      PERF_CUDA(wk, cudaFree(gp->send));
    } else {
      PERF_NCCL(wk, ncclMemFree(gp->recv));
      PERF_NCCL(wk, ncclMemFree(gp->send));
    }
    PERF_CUDA(wk, cudaStreamDestroy(gp->stream));
  }
}

static void* perf_worker_main(void* arg) {
  struct perf_worker* wk = arg;
  perf_worker_setup(wk);
  perf_barrier(wk);
  perf_sweep(wk);
  perf_barrier(wk);
  perf_worker_teardown(wk);
  return NULL;
}

/* ---- Process ---- */

struct perf_args {
  int coll;
  struct perf_opts* o;
  const char* prog;
  int argc;
  char** argv;
};

static const char* perf_library_path(char* buf, size_t len) {
  union {
    ncclResult_t (*fn)(int*);
    void* p;
  } sym = {ncclGetVersion};
  Dl_info info;
  if (!dladdr(sym.p, &info) || !info.dli_fname) return NULL;
  if (!realpath(info.dli_fname, buf)) snprintf(buf, len, "%s", info.dli_fname);
  return buf;
}

/* Are this process's GPUs there, and, when it shares one with another process, under MPS?
 * Returns 0, or PERF_EXIT_SKIP after one line saying why. */
static int perf_probe_devices(const struct perf_args* a, struct perf_world* w) {
  int count = 0, first, last;
  cudaError_t e = cudaGetDeviceCount(&count);
  perf_world_devices(a->o, w->local_rank, &first, &last);
  double ok[2] = {1.0, 1.0}; /* devices, MPS */
  if (e != cudaSuccess || count == 0) {
    if (w->proc == 0)
      printf("no CUDA device: %s\n",
             e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none");
    ok[0] = 0.0;
  } else if (count <= last) {
    printf("no CUDA device: process %d needs devices %d..%d but only %d are visible\n", w->proc,
           first, last, count);
    ok[0] = 0.0;
  } else if (perf_world_shares_gpu(a->o, w)) {
    /* Its kernels and another process's wait for each other on one GPU: without MPS the two
     * processes' kernels take turns on it and never meet. */
    for (int d = first; d <= last; d++) {
      int mps = 0;
      if (cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, d) != cudaSuccess || !mps)
        ok[1] = 0.0;
    }
  }
  /* Every process takes the same decision, so that none waits for a peer that left. */
  if (w->ops->allreduce(w, ok, 2, PERF_RED_MIN)) return PERF_EXIT_ABORTED;
  if (ok[0] > 0.0 && ok[1] == 0.0 && w->proc == 0)
    printf("skipped: needs MPS: with --ranks-per-gpu %d, processes share a GPU and their kernels "
           "must run at the same time, which only MPS does; start a daemon "
           "(nvidia-cuda-mps-control -d, or mps_start from test/gpu-mps.sh) or put the ranks of "
           "a GPU in one process (-g or -t)\n",
           a->o->ranks_per_gpu);
  return ok[0] > 0.0 && ok[1] > 0.0 ? 0 : PERF_EXIT_SKIP;
}

static void perf_devinfo_local(const struct perf_opts* o, struct perf_world* w,
                               struct perf_devinfo* d, int n) {
  char host[256] = "?";
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  char* dot = strchr(host, '.');
  if (dot) *dot = '\0';
  for (int i = 0; i < n; i++) {
    struct cudaDeviceProp prop;
    memset(&d[i], 0, sizeof d[i]);
    d[i].rank = w->proc * n + i;
    d[i].pid = (int)getpid();
    d[i].device = perf_world_device(o, w->local_rank, i / o->ngpus, i % o->ngpus);
    size_t k = 0;
    for (; k + 1 < sizeof d[i].host && host[k]; k++) d[i].host[k] = host[k];
    d[i].host[k] = '\0';
    if (cudaGetDeviceProperties(&prop, d[i].device) == cudaSuccess) {
      d[i].pci_domain = (unsigned)prop.pciDomainID;
      d[i].pci_bus = (unsigned)prop.pciBusID;
      d[i].pci_device = (unsigned)prop.pciDeviceID;
      for (k = 0; k + 1 < sizeof d[i].name && prop.name[k]; k++) d[i].name[k] = prop.name[k];
      d[i].name[k] = '\0';
    } else {
      snprintf(d[i].name, sizeof d[i].name, "(cudaGetDeviceProperties failed)");
    }
  }
}

static int perf_proc_main(struct perf_world* w, void* arg) {
  const struct perf_args* a = arg;
  const struct perf_opts* o = a->o;
  struct perf_ctx ctx;
  int per_proc = o->nthreads * o->ngpus;
  int rc = perf_probe_devices(a, w);
  if (rc) return rc;

  memset(&ctx, 0, sizeof ctx);
  ctx.o = o;
  ctx.coll = a->coll;
  ctx.prog = a->prog;
  ctx.argc = a->argc;
  ctx.argv = a->argv;
  ctx.w = w;
  ctx.ngpus = o->ngpus;
  ctx.nranks = w->nprocs * per_proc;
  ctx.init_all = w->nprocs == 1 && o->nthreads == 1;
  if (perf_colls[a->coll].rooted && o->root >= ctx.nranks) {
    if (w->proc == 0)
      fprintf(stderr, "%s: option -r (--root): root %d is out of range for %d ranks\n", a->prog,
              o->root, ctx.nranks);
    return PERF_EXIT_USAGE;
  }

  /* Largest size that fits: two buffers per rank, and room for NCCL itself, for the ranks that
   * share a GPU. */
  double mem = 1e30;
  int first_dev, last_dev;
  perf_world_devices(o, w->local_rank, &first_dev, &last_dev);
  for (int dev = first_dev; dev <= last_dev; dev++) {
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, dev) == cudaSuccess && (double)prop.totalGlobalMem < mem)
      mem = (double)prop.totalGlobalMem;
  }
  if (w->ops->allreduce(w, &mem, 1, PERF_RED_MIN)) return PERF_EXIT_ABORTED;
  const double rpg = o->ranks_per_gpu;
  double fit = (mem - (1.0 + rpg) * 1024 * 1024 * 1024) / (2.0 * rpg);
  ctx.max_bytes = o->max_bytes;
  if ((double)ctx.max_bytes > fit) {
    ctx.max_bytes = fit > 0 ? (size_t)fit : 0;
    if (w->proc == 0)
      printf("# Reducing maxBytes to %zu due to memory limitation\n", ctx.max_bytes);
  }
  size_t all[PERF_MAX_SIZES];
  size_t total = perf_sizes(o, all, PERF_MAX_SIZES);
  if (total > PERF_MAX_SIZES) {
    if (w->proc == 0)
      fprintf(stderr, "%s: option -i (--stepbytes): the sweep has %zu sizes, more than %d\n",
              a->prog, total, PERF_MAX_SIZES);
    return PERF_EXIT_USAGE;
  }
  for (size_t i = 0; i < total; i++)
    if (all[i] <= ctx.max_bytes) ctx.sizes[ctx.nsizes++] = all[i];
  if (ctx.nsizes == 0) {
    if (w->proc == 0)
      fprintf(stderr, "%s: option -b (--minbytes): no size of the sweep fits in GPU memory\n",
              a->prog);
    return PERF_EXIT_USAGE;
  }
  ctx.max_bytes = ctx.sizes[ctx.nsizes - 1];
  ctx.alloc = ctx.max_bytes;

  /* Header and devices, from process 0. */
  int lib_version = 0;
  char lib_buf[PATH_MAX];
  const char* lib = perf_library_path(lib_buf, sizeof lib_buf);
  ncclGetVersion(&lib_version);
  struct perf_devinfo* mine = calloc((size_t)per_proc, sizeof *mine);
  struct perf_devinfo* devs = calloc((size_t)ctx.nranks, sizeof *devs);
  if (!mine || !devs) {
    fprintf(stderr, "%s: out of memory\n", a->prog);
    return PERF_EXIT_ERROR;
  }
  perf_devinfo_local(o, w, mine, per_proc);
  if (w->ops->gather(w, mine, (size_t)per_proc * sizeof *mine, devs)) return PERF_EXIT_ABORTED;
  if (w->proc == 0) {
    char err[512];
    perf_fmt_config(stdout, o, a->prog, NCCL_VERSION_CODE, lib_version, lib);
    if (o->ranks_per_gpu > 1) {
      const char* share = getenv("CHOIR_RANKS_SHARE_GPU");
      printf("# Ranks per GPU: %d (CHOIR_RANKS_SHARE_GPU=%s)\n", o->ranks_per_gpu,
             share ? share : "unset");
    }
    perf_fmt_devices(stdout, devs, ctx.nranks);
    if (o->json) {
      ctx.json = perf_json_open(o->json, err, sizeof err);
      if (!ctx.json) fprintf(stderr, "%s: option -J (--output_json): %s\n", a->prog, err);
    }
    if (ctx.json)
      perf_json_begin(ctx.json, a->argc, a->argv, o, a->prog, w->nprocs, ctx.nranks, lib_version,
                      lib, devs, ctx.nranks);
    perf_fmt_table_header(stdout);
  }
  double json_ok = o->json == NULL || w->proc != 0 || ctx.json != NULL;
  if (w->ops->allreduce(w, &json_ok, 1, PERF_RED_MIN)) return PERF_EXIT_ABORTED;
  if (json_ok == 0.0) return PERF_EXIT_USAGE;

  if (!ctx.init_all) {
    if (w->proc == 0) {
      ncclResult_t r = ncclGetUniqueId(&ctx.id);
      if (r != ncclSuccess) {
        fprintf(stderr, "%s: ncclGetUniqueId failed: %s\n", a->prog, ncclGetErrorString(r));
        w->ops->fail(w, PERF_EXIT_ERROR);
        return PERF_EXIT_ERROR;
      }
    }
    if (w->ops->bcast(w, &ctx.id, sizeof ctx.id)) return PERF_EXIT_ABORTED;
  }

  ctx.team = perf_team_create(o->nthreads, w);
  ctx.workers = calloc((size_t)o->nthreads, sizeof *ctx.workers);
  if (!ctx.team || !ctx.workers) {
    fprintf(stderr, "%s: out of memory\n", a->prog);
    return PERF_EXIT_ERROR;
  }
  for (int t = 0; t < o->nthreads; t++) {
    struct perf_worker* wk = &ctx.workers[t];
    wk->ctx = &ctx;
    wk->thread = t;
    wk->gpus = calloc((size_t)o->ngpus, sizeof *wk->gpus);
    if (!wk->gpus) {
      fprintf(stderr, "%s: out of memory\n", a->prog);
      return PERF_EXIT_ERROR;
    }
    pthread_mutex_init(&wk->wd_mu, NULL);
    for (int g = 0; g < o->ngpus; g++)
      wk->gpus[g].rank = (w->proc * o->nthreads + t) * o->ngpus + g;
  }
  if (o->timeout > 0) {
    if (pthread_create(&ctx.watchdog, NULL, perf_watchdog_main, &ctx)) {
      fprintf(stderr, "%s: cannot start the watchdog thread\n", a->prog);
      return PERF_EXIT_ERROR;
    }
    ctx.watchdog_on = 1;
  }
  for (int t = 1; t < o->nthreads; t++) {
    if (pthread_create(&ctx.workers[t].tid, NULL, perf_worker_main, &ctx.workers[t])) {
      fprintf(stderr, "%s: cannot start thread %d\n", a->prog, t);
      perf_die(&ctx, PERF_EXIT_ERROR);
    }
  }
  perf_worker_main(&ctx.workers[0]);
  for (int t = 1; t < o->nthreads; t++) pthread_join(ctx.workers[t].tid, NULL);
  if (ctx.watchdog_on) {
    ctx.watchdog_stop = 1;
    pthread_join(ctx.watchdog, NULL);
  }

  /* Every process learns whether anything was wrong. */
  double wrong = (double)ctx.total_wrong;
  if (w->ops->allreduce(w, &wrong, 1, PERF_RED_MAX)) return PERF_EXIT_ABORTED;
  if (w->proc == 0) {
    double avg = ctx.bw_count ? ctx.bw_sum / (double)ctx.bw_count : 0.0;
    perf_fmt_footer(stdout, ctx.nerrors, avg, a->prog);
    if (ctx.json && perf_json_close(ctx.json, ctx.nerrors, avg, NULL))
      fprintf(stderr, "%s: option -J (--output_json): writing %s failed\n", a->prog, o->json);
  }
  fflush(stdout);
  for (int t = 0; t < o->nthreads; t++) {
    pthread_mutex_destroy(&ctx.workers[t].wd_mu);
    free(ctx.workers[t].gpus);
  }
  free(ctx.workers);
  perf_team_destroy(ctx.team);
  free(devs);
  free(mine);
  return wrong > 0 ? PERF_EXIT_WRONG : PERF_EXIT_OK;
}

/* Ranks that share a GPU: Choir refuses them unless told (NVIDIA's NCCL always does). Set
 * before the library is first used and before any process is forked; a value the caller set
 * wins. */
static void perf_share_env(const struct perf_opts* o) {
  if (o->ranks_per_gpu > 1) setenv("CHOIR_RANKS_SHARE_GPU", "1", 0);
  /* A hardware queue per stream where one process drives several ranks of one GPU (see Choir's
   * README, CHOIR_RANKS_SHARE_GPU); read when CUDA starts. Not for one rank per process: 32
   * queues per MPS client made 4 processes' contexts fail (out of memory). */
  if (o->ranks_per_gpu > 1 && o->nthreads * o->ngpus > 1)
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
}

int perf_main(int coll, int argc, char** argv) {
  struct perf_opts o;
  struct perf_args a;
  char err[512];
  char prog[64];
  int rc;
  snprintf(prog, sizeof prog, "%s_perf%s", perf_colls[coll].name, PERF_MPI ? "_mpi" : "");
  setvbuf(stdout, NULL, _IOLBF, 0);
  a.coll = coll;
  a.o = &o;
  a.prog = prog;
  a.argc = argc;
  a.argv = argv;
#if PERF_MPI
  struct perf_world w;
  if (perf_world_mpi_init(&w, &argc, &argv)) return PERF_EXIT_ERROR;
  a.argc = argc;
  a.argv = argv;
  rc = perf_opts_parse(&o, argc, argv, 1, err, sizeof err);
  if (rc || o.help) {
    if (w.proc == 0) {
      if (rc)
        fprintf(stderr, "%s: %s\nrun '%s -h' for the options\n", prog, err, prog);
      else
        perf_opts_usage(stdout, prog, 1);
    }
    perf_world_mpi_finalize(&w);
    return rc;
  }
  perf_share_env(&o);
  rc = perf_proc_main(&w, &a);
  perf_world_mpi_finalize(&w);
  return rc;
#else
  rc = perf_opts_parse(&o, argc, argv, 0, err, sizeof err);
  if (rc) {
    fprintf(stderr, "%s: %s\nrun '%s -h' for the options\n", prog, err, prog);
    return rc;
  }
  if (o.help) {
    perf_opts_usage(stdout, prog, 0);
    return 0;
  }
  perf_share_env(&o);
  if (o.nprocs > 1) return perf_launch(o.nprocs, perf_proc_main, &a);
  struct perf_world w;
  perf_world_single(&w);
  return perf_proc_main(&w, &a);
#endif
}
