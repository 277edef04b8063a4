/*
 * Communicator contexts and the hot path: claiming, stamping and updating event slots. Nothing
 * here blocks or allocates after init: a slot is one relaxed atomic increment of the
 * communicator's counter, a refused event is one increment of the drop counter.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prof.h"

clockid_t prof_clock_id = CLOCK_MONOTONIC;

uint64_t prof_now(void) {
  struct timespec ts;
  clock_gettime(prof_clock_id, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void prof_strcpy(char* dst, size_t size, const char* src) {
  size_t i = 0;
  if (src != NULL)
    for (; i + 1 < size && src[i] != '\0'; i++) dst[i] = src[i];
  dst[i] = '\0';
}

ncclResult_t prof_ctx_init(prof_ctx_t** ctx_p, int version, uint64_t comm_id, const char* comm_name,
                           int nnodes, int nranks, int rank, ncclDebugLogger_t log, int* mask_p) {
  prof_config_t cfg;
  prof_config_load(&cfg, log);
  uint32_t limit = version >= 6 ? PROF_TYPES_V6 : version == 5 ? PROF_TYPES_V5 : PROF_TYPES_V4;

  prof_ctx_t* ctx = calloc(1, sizeof(*ctx));
  if (ctx == NULL) {
    if (log != NULL)
      log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
          "PROFILER/Trace: out of memory for a communicator context");
    return ncclSystemError;
  }
  ctx->mask = cfg.mask & limit;
  ctx->cap = cfg.max_events;
  ctx->pid = getpid();
  ctx->version = version;
  ctx->comm_id = comm_id;
  prof_strcpy(ctx->comm_name, sizeof(ctx->comm_name), comm_name);
  ctx->rank = rank;
  ctx->nranks = nranks;
  ctx->nnodes = nnodes;
  ctx->log = log;
  ctx->flush_at_exit = cfg.flush_at_exit;

  /* The whole pool is reserved now and committed page by page as events arrive, so memory is
   * bounded by the cap and proportional to what is used. */
  size_t bytes = (size_t)ctx->cap * sizeof(prof_event_t);
  void* pool = MAP_FAILED;
  if (ctx->mask != 0)
    pool = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
  if (ctx->mask != 0 && pool == MAP_FAILED) {
    PROF_WARN(ctx, "PROFILER/Trace: cannot map %zu bytes for %llu events: %s", bytes,
              (unsigned long long)ctx->cap, strerror(errno));
    free(ctx);
    return ncclSystemError;
  }
  ctx->pool = pool == MAP_FAILED ? NULL : pool;
  if (ctx->pool == NULL) ctx->cap = 0;

  ncclResult_t res = prof_trace_attach(ctx, &cfg);
  if (res != ncclSuccess) {
    if (ctx->pool != NULL) munmap(ctx->pool, bytes);
    free(ctx);
    return res;
  }
  ctx->t_init = prof_now();
  ctx->gpu_off = INT64_MIN;
  /* The mask is one process-wide int that the core reads atomically. */
  __atomic_store_n(mask_p, (int)ctx->mask, __ATOMIC_RELAXED);
  PROF_INFO(ctx,
            "PROFILER/Trace: comm %s (0x%016llx) rank %d/%d: abi v%d, events 0x%x, up to %llu "
            "events, trace %s",
            ctx->comm_name[0] ? ctx->comm_name : "-", (unsigned long long)comm_id, rank, nranks,
            version, ctx->mask, (unsigned long long)ctx->cap, cfg.path);
  *ctx_p = ctx;
  return ncclSuccess;
}

ncclResult_t prof_ctx_finalize(prof_ctx_t* ctx) {
  if (ctx == NULL) return ncclSuccess;
  uint64_t written = 0;
  prof_trace_detach(ctx, &written);
  uint64_t dropped = atomic_load_explicit(&ctx->dropped, memory_order_relaxed);
  if (dropped != 0)
    PROF_WARN(ctx,
              "PROFILER/Trace: comm %s rank %d: %llu events dropped, the limit of %llu was "
              "reached (raise CHOIR_PROFILER_MAX_EVENTS or select fewer CHOIR_PROFILER_EVENTS)",
              ctx->comm_name[0] ? ctx->comm_name : "-", ctx->rank, (unsigned long long)dropped,
              (unsigned long long)ctx->cap);
  if (ctx->pool != NULL) munmap(ctx->pool, (size_t)ctx->cap * sizeof(prof_event_t));
  free(ctx);
  return ncclSuccess;
}

prof_event_t* prof_event_begin(prof_ctx_t* ctx, uint64_t type, const void* parent, int rank) {
  /* One bit, and one this context records: anything else costs a test and a branch. */
  if (ctx == NULL || (type & (type - 1)) != 0 || (type & ctx->mask) == 0) return NULL;
  uint64_t i = atomic_load_explicit(&ctx->next, memory_order_relaxed);
  if (i < ctx->cap) i = atomic_fetch_add_explicit(&ctx->next, 1, memory_order_relaxed);
  if (i >= ctx->cap) {
    atomic_fetch_add_explicit(&ctx->dropped, 1, memory_order_relaxed);
    return NULL;
  }
  prof_event_t* ev = &ctx->pool[i];
  ev->kind = (uint8_t)__builtin_ctzll(type);
  ev->rank = rank;
  /* pthread_self rather than the OS thread id: no system call and no thread-local storage (whose
   * dynamic form in a dlopen'ed library trips LeakSanitizer in instrumented applications). */
  ev->thread = (uint64_t)pthread_self();
  ev->parent = parent;
  ev->t_start = prof_now();
  return ev;
}

void prof_event_stop(prof_event_t* ev) {
  ev->t_end = prof_now();
  atomic_store_explicit(&ev->flags, PROF_EV_STARTED | PROF_EV_STOPPED, memory_order_release);
}

void prof_event_state(prof_event_t* ev, int state, uint64_t value) {
  uint64_t t = prof_now();
  uint32_t k = atomic_fetch_add_explicit(&ev->nstates, 1, memory_order_relaxed);
  if (k >= PROF_NSTATES || state < 0 || state > 254) return;
  ev->st_t[k] = t;
  ev->st_v[k] = value;
  atomic_store_explicit(&ev->st_id[k], (uint8_t)(state + 1), memory_order_release);
}

void prof_event_net_payload(prof_event_t* ev, int64_t id, const void* data) {
  ev->u.net.id = id;
  uint32_t type = (uint32_t)id & NCCL_PROFILER_NET_TYPE_MASK;
  uint32_t ver = (uint32_t)id & NCCL_PROFILER_NET_VER_MASK;
  if (data == NULL) return;
  if (type == NCCL_PROFILER_NET_TYPE_IB && ver == NCCL_PROFILER_NET_IB_VER) {
    const ncclProfilerNetIbDescr_v1_t* d = data;
    if (d->type == ncclProfileQp) {
      ev->u.net.ib.device = d->qp.device;
      ev->u.net.ib.wr_id = d->qp.wr_id;
      ev->u.net.ib.opcode = d->qp.opcode;
      ev->u.net.ib.qp = d->qp.qpNum;
      ev->u.net.ib.length = d->qp.length;
      ev->u.net.format = PROF_NET_IB;
    }
  } else if (type == NCCL_PROFILER_NET_TYPE_SOCK && ver == NCCL_PROFILER_NET_SOCKET_VER) {
    const ncclProfilerNetSockDescr_v1_t* d = data;
    if (d->type == ncclProfileSocket) {
      ev->u.net.sock.fd = d->sock.fd;
      ev->u.net.sock.op = d->sock.op;
      ev->u.net.sock.length = d->sock.length;
      ev->u.net.format = PROF_NET_SOCK;
    }
  }
}
