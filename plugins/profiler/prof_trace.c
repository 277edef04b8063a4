/*
 * The Chrome trace writer ("traceEvents" JSON, for chrome://tracing and Perfetto).
 *
 * One file per output path per process (the default path holds %h and %p). A communicator's
 * events are written when it is finalized: they are appended in place before the file's closing
 * "]}", so the file is valid JSON after every finalize and the events of communicators finalized
 * earlier are never lost or rewritten. Communicators still open when the process exits are
 * written by the library destructor (CHOIR_PROFILER_FLUSH_AT_EXIT); the library is linked with
 * -z nodelete so that this state survives the core's dlclose between communicators.
 *
 * Layout of the timeline: pid is the process; each communicator gets its own lanes (tid), by
 * family: API calls, enqueue (Group/Coll/P2p), copy engine, one per kernel channel, one per proxy
 * channel and direction, proxy control. Chrome and Perfetto need the "X" slices of one lane to
 * nest properly, but proxy steps overlap (pipelining), so each family is spread over as many
 * sub-lanes as needed: an event goes on the first sub-lane where it either starts after
 * everything open has ended or fits entirely inside the innermost open slice. States of proxy
 * steps and proxy control events become nested slices (phases) of their event; such events take
 * no other children, so phases always nest. Coll/P2p slices span the enqueue (their stop means
 * "enqueued", as NCCL defines it); the execution shows in the kernel-channel and proxy lanes.
 * Every slice carries args.comm, args.id and args.parent, which is how ancestry is followed
 * across lanes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof.h"

#define PROF_MAX_SUBLANES 128

typedef struct prof_file {
  struct prof_file* next;
  char path[PATH_MAX];
  bool started;  /* header written by this process */
  long tail_off; /* where the closing "]}" starts */
  int next_tid;  /* lanes handed out in this file */
} prof_file_t;

static pthread_mutex_t prof_lock = PTHREAD_MUTEX_INITIALIZER;
static prof_file_t* prof_files;
static prof_ctx_t* prof_live;
static bool prof_proc_ready;
static char prof_host[256];

static const char prof_tail[] = "\n]}\n";

ncclResult_t prof_trace_attach(prof_ctx_t* ctx, const prof_config_t* cfg) {
  pthread_mutex_lock(&prof_lock);
  if (!prof_proc_ready) {
    prof_clock_id = cfg->clock;
    if (gethostname(prof_host, sizeof(prof_host) - 1) != 0) strcpy(prof_host, "unknown");
    prof_proc_ready = true;
  }
  prof_file_t* f = prof_files;
  while (f != NULL && strcmp(f->path, cfg->path) != 0) f = f->next;
  if (f == NULL) {
    f = calloc(1, sizeof(*f));
    if (f == NULL) {
      pthread_mutex_unlock(&prof_lock);
      PROF_WARN(ctx, "PROFILER/Trace: out of memory for the trace file state");
      return ncclSystemError;
    }
    memcpy(f->path, cfg->path, sizeof(f->path));
    f->next_tid = 1;
    f->next = prof_files;
    prof_files = f;
  }
  ctx->file = f;
  ctx->live_prev = NULL;
  ctx->live_next = prof_live;
  if (prof_live != NULL) prof_live->live_prev = ctx;
  prof_live = ctx;
  pthread_mutex_unlock(&prof_lock);
  return ncclSuccess;
}

/* ---- JSON helpers ---- */

static void prof_json_str(FILE* out, const char* s) {
  fputc('"', out);
  for (const unsigned char* p = (const unsigned char*)s; *p != '\0'; p++) {
    if (*p == '"' || *p == '\\') {
      fputc('\\', out);
      fputc(*p, out);
    } else if (*p < 0x20 || *p >= 0x7f) {
      fprintf(out, "\\u%04x", *p); /* bytes outside ASCII are kept as Latin-1 code points */
    } else {
      fputc(*p, out);
    }
  }
  fputc('"', out);
}

/* Microseconds with nanosecond digits, exactly. */
static void prof_json_us(FILE* out, uint64_t ns) {
  fprintf(out, "%llu.%03u", (unsigned long long)(ns / 1000), (unsigned)(ns % 1000));
}

static void prof_json_ptr(FILE* out, const char* key, const void* p) {
  fprintf(out, ",\"%s\":\"%p\"", key, p);
}

/* ---- per-communicator analysis ---- */

/* Lane families, in display order. */
enum {
  PROF_F_API,
  PROF_F_ENQUEUE,
  PROF_F_CE,
  PROF_F_KERNEL,
  PROF_F_PROXY,
  PROF_F_PROXY_ORPHAN,
  PROF_F_CTRL,
  PROF_F_OTHER
};

typedef struct {
  uint64_t start, end;
  uint32_t key; /* family << 10 | channel << 1 | is_send */
  uint32_t ev;
  int8_t phase; /* -1: the event itself; else the phase index */
  int32_t tid;  /* 0: not placed (a phase that could not nest) */
} prof_item_t;

typedef struct {
  uint64_t t, v;
  int state;
} prof_state_t;

typedef struct {
  int64_t parent, group, op; /* resolved indices, -1 if none */
  uint64_t end;              /* stop time, or the write time when never stopped */
  int32_t sub;               /* sub-lane inside its family while placing */
  int32_t tid;
  uint8_t flags;
} prof_info_t;

typedef struct {
  uint64_t end;
  uint32_t ev;
  bool sealed; /* an event with phases: only its phases nest directly in it */
} prof_open_t;

typedef struct {
  prof_open_t* v;
  int n, cap;
} prof_stack_t;

static int64_t prof_resolve(const prof_ctx_t* ctx, uint64_t n, const void* p) {
  uintptr_t base = (uintptr_t)ctx->pool, a = (uintptr_t)p;
  if (p == NULL || a < base) return -1;
  uintptr_t off = a - base;
  if (off % sizeof(prof_event_t) != 0 || off / sizeof(prof_event_t) >= n) return -1;
  uint64_t i = off / sizeof(prof_event_t);
  if ((atomic_load_explicit(&ctx->pool[i].flags, memory_order_acquire) & PROF_EV_STARTED) == 0)
    return -1;
  return (int64_t)i;
}

/* The kept states of an event, in time order. */
static int prof_states(const prof_event_t* ev, prof_state_t* out) {
  int n = 0;
  for (int k = 0; k < PROF_NSTATES; k++) {
    uint8_t id = atomic_load_explicit(&ev->st_id[k], memory_order_acquire);
    if (id == 0) continue;
    prof_state_t s = {ev->st_t[k], ev->st_v[k], id - 1};
    int j = n++;
    while (j > 0 && out[j - 1].t > s.t) {
      out[j] = out[j - 1];
      j--;
    }
    out[j] = s;
  }
  return n;
}

static bool prof_has_phases(int kind) {
  return kind == PROF_K_PROXY_STEP || kind == PROF_K_PROXY_CTRL || kind == PROF_K_GROUP_API;
}

/* Phase `k` of an event: its interval and name; false when it does not exist. */
static bool prof_phase(const prof_event_t* ev, uint64_t end, const prof_state_t* st, int nst, int k,
                       uint64_t* a_p, uint64_t* b_p, const char** name_p) {
  if (ev->kind == PROF_K_GROUP_API) {
    /* ncclGroupStart runs from the event's start to GroupStartApiStop, ncclGroupEnd from
     * GroupEndApiStart to the event's stop; the calls in between nest in the event itself. */
    if (k > 1) return false;
    int want = k == 0 ? ncclProfilerGroupStartApiStop : ncclProfilerGroupEndApiStart;
    for (int i = 0; i < nst; i++) {
      if (st[i].state != want) continue;
      *a_p = k == 0 ? ev->t_start : st[i].t;
      *b_p = k == 0 ? st[i].t : end;
      *name_p = k == 0 ? "ncclGroupStart" : "ncclGroupEnd";
      return *b_p >= *a_p;
    }
    return false;
  }
  if (k >= nst) return false;
  *a_p = st[k].t;
  *b_p = k + 1 < nst ? st[k + 1].t : end;
  *name_p = prof_state_name(st[k].state);
  return *b_p >= *a_p;
}

static int prof_item_cmp(const void* pa, const void* pb) {
  const prof_item_t *a = pa, *b = pb;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1; /* enclosing first */
  if (a->ev != b->ev) return a->ev < b->ev ? -1 : 1;
  return a->phase < b->phase ? -1 : a->phase > b->phase;
}

static bool prof_push(prof_stack_t* s, prof_open_t o) {
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    prof_open_t* v = realloc(s->v, (size_t)cap * sizeof(*v));
    if (v == NULL) return false;
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = o;
  return true;
}

static void prof_pop_ended(prof_stack_t* s, uint64_t t) {
  while (s->n > 0 && s->v[s->n - 1].end <= t) s->n--;
}

static const char* prof_send_name(int is_send) { return is_send ? "send" : "recv"; }

/* Whether a proxy step looks like a send, from its op or else its states. */
static int prof_step_is_send(const prof_ctx_t* ctx, const prof_info_t* info, uint64_t i,
                             const prof_state_t* st, int nst) {
  if (info[i].op >= 0) return ctx->pool[info[i].op].u.proxy_op.is_send;
  for (int k = 0; k < nst; k++) {
    int s = st[k].state;
    if (s == ncclProfilerProxyStepSendGPUWait || s == ncclProfilerProxyStepSendWait ||
        s == ncclProfilerProxyStepSendPeerWait_v4)
      return 1;
    if (s == ncclProfilerProxyStepRecvWait || s == ncclProfilerProxyStepRecvFlushWait ||
        s == ncclProfilerProxyStepRecvGPUWait)
      return 0;
  }
  return -1;
}

static uint32_t prof_lane_key(const prof_ctx_t* ctx, const prof_info_t* info, uint64_t i) {
  const prof_event_t* ev = &ctx->pool[i];
  switch (ev->kind) {
    case PROF_K_GROUP_API:
    case PROF_K_COLL_API:
    case PROF_K_P2P_API:
    case PROF_K_KERNEL_LAUNCH: return PROF_F_API << 10;
    case PROF_K_GROUP:
    case PROF_K_COLL:
    case PROF_K_P2P: return PROF_F_ENQUEUE << 10;
    case PROF_K_CE_COLL:
    case PROF_K_CE_SYNC:
    case PROF_K_CE_BATCH: return PROF_F_CE << 10;
    case PROF_K_KERNEL_CH: return PROF_F_KERNEL << 10 | (uint32_t)ev->u.kernel_ch.channel << 1;
    case PROF_K_PROXY_CTRL: return PROF_F_CTRL << 10;
    case PROF_K_PROXY_OP:
    case PROF_K_PROXY_STEP:
    case PROF_K_NET:
      if (info[i].op >= 0) {
        const prof_event_t* op = &ctx->pool[info[i].op];
        return PROF_F_PROXY << 10 | (uint32_t)op->u.proxy_op.channel << 1 | op->u.proxy_op.is_send;
      }
      return PROF_F_PROXY_ORPHAN << 10;
    default: return PROF_F_OTHER << 10;
  }
}

static void prof_comm_label(const prof_ctx_t* ctx, char* buf, size_t size) {
  if (ctx->comm_name[0] != '\0')
    snprintf(buf, size, "%s r%d", ctx->comm_name, ctx->rank);
  else
    snprintf(buf, size, "comm %08llx r%d", (unsigned long long)(ctx->comm_id >> 32), ctx->rank);
}

static void prof_lane_name(const prof_ctx_t* ctx, uint32_t key, int sub, char* buf, size_t size) {
  char label[PROF_NAME_MAX + 32];
  prof_comm_label(ctx, label, sizeof(label));
  int family = (int)(key >> 10), ch = (int)((key >> 1) & 0x1ff), send = (int)(key & 1);
  int n;
  switch (family) {
    case PROF_F_API: n = snprintf(buf, size, "%s API", label); break;
    case PROF_F_ENQUEUE: n = snprintf(buf, size, "%s enqueue", label); break;
    case PROF_F_CE: n = snprintf(buf, size, "%s copy engine", label); break;
    case PROF_F_KERNEL: n = snprintf(buf, size, "%s kernel ch %d", label, ch); break;
    case PROF_F_PROXY:
      n = snprintf(buf, size, "%s proxy ch %d %s", label, ch, prof_send_name(send));
      break;
    case PROF_F_PROXY_ORPHAN: n = snprintf(buf, size, "%s proxy", label); break;
    case PROF_F_CTRL: n = snprintf(buf, size, "%s proxy ctrl", label); break;
    default: n = snprintf(buf, size, "%s other", label); break;
  }
  if (sub > 0 && n > 0 && (size_t)n < size) snprintf(buf + n, size - (size_t)n, " (%d)", sub + 1);
}

static void prof_event_name(const prof_ctx_t* ctx, const prof_info_t* info, uint64_t i,
                            const prof_state_t* st, int nst, char* buf, size_t size) {
  const prof_event_t* ev = &ctx->pool[i];
  switch (ev->kind) {
    case PROF_K_COLL:
      snprintf(buf, size, "%s", ev->u.coll.func[0] ? ev->u.coll.func : "Coll");
      break;
    case PROF_K_P2P: snprintf(buf, size, "%s", ev->u.p2p.func[0] ? ev->u.p2p.func : "P2p"); break;
    case PROF_K_PROXY_OP:
      snprintf(buf, size, "ProxyOp %s", ev->u.proxy_op.is_send ? "Send" : "Recv");
      break;
    case PROF_K_PROXY_STEP: {
      int send = prof_step_is_send(ctx, info, i, st, nst);
      snprintf(buf, size, "ProxyStep%s", send < 0 ? "" : send ? " Send" : " Recv");
      break;
    }
    case PROF_K_NET:
      snprintf(buf, size, "NetPlugin%s",
               ev->u.net.format == PROF_NET_IB     ? " IB"
               : ev->u.net.format == PROF_NET_SOCK ? " Socket"
                                                   : "");
      break;
    case PROF_K_GROUP_API: snprintf(buf, size, "ncclGroup"); break;
    case PROF_K_COLL_API:
    case PROF_K_P2P_API:
      snprintf(buf, size, "nccl%s", ev->u.api.func[0] ? ev->u.api.func : prof_kind_name(ev->kind));
      break;
    case PROF_K_CE_COLL:
      snprintf(buf, size, "%s%s", ev->u.ce_coll.func[0] ? "CE " : "CeColl", ev->u.ce_coll.func);
      break;
    default: snprintf(buf, size, "%s", prof_kind_name(ev->kind)); break;
  }
}

static void prof_emit_args(FILE* out, const prof_ctx_t* ctx, const prof_info_t* info, uint64_t i,
                           const prof_state_t* st, int nst) {
  const prof_event_t* ev = &ctx->pool[i];
  fprintf(out, "\"args\":{\"comm\":\"0x%016llx\",\"rank\":%d,\"id\":%llu",
          (unsigned long long)ctx->comm_id, ev->rank, (unsigned long long)i);
  if (info[i].parent >= 0) fprintf(out, ",\"parent\":%lld", (long long)info[i].parent);
  fprintf(out, ",\"thread\":\"0x%llx\"", (unsigned long long)ev->thread);
  switch (ev->kind) {
    case PROF_K_COLL:
      fprintf(out, ",\"seq\":%llu,\"count\":%zu,\"datatype\":", (unsigned long long)ev->u.coll.seq,
              ev->u.coll.count);
      prof_json_str(out, ev->u.coll.datatype);
      fprintf(out, ",\"root\":%d,\"algo\":", ev->u.coll.root);
      prof_json_str(out, ev->u.coll.algo);
      fprintf(out, ",\"proto\":");
      prof_json_str(out, ev->u.coll.proto);
      fprintf(out, ",\"nChannels\":%u,\"nWarps\":%u", ev->u.coll.nchannels, ev->u.coll.nwarps);
      prof_json_ptr(out, "sendBuff", ev->u.coll.sendbuff);
      prof_json_ptr(out, "recvBuff", ev->u.coll.recvbuff);
      break;
    case PROF_K_P2P:
      fprintf(out, ",\"peer\":%d,\"count\":%zu,\"datatype\":", ev->u.p2p.peer, ev->u.p2p.count);
      prof_json_str(out, ev->u.p2p.datatype);
      fprintf(out, ",\"nChannels\":%u", ev->u.p2p.nchannels);
      prof_json_ptr(out, "buff", ev->u.p2p.buff);
      break;
    case PROF_K_PROXY_OP:
      fprintf(
          out, ",\"channel\":%u,\"peer\":%d,\"send\":%s,\"nSteps\":%d,\"chunkSize\":%d,\"pid\":%d",
          ev->u.proxy_op.channel, ev->u.proxy_op.peer, ev->u.proxy_op.is_send ? "true" : "false",
          ev->u.proxy_op.nsteps, ev->u.proxy_op.chunk_size, ev->u.proxy_op.pid);
      break;
    case PROF_K_PROXY_STEP: {
      uint64_t bytes = 0;
      for (int k = 0; k < nst; k++)
        if (st[k].v > bytes) bytes = st[k].v;
      fprintf(out, ",\"step\":%d,\"transSize\":%llu", ev->u.proxy_step.step,
              (unsigned long long)bytes);
      if (info[i].op >= 0)
        fprintf(out, ",\"channel\":%u,\"peer\":%d", ctx->pool[info[i].op].u.proxy_op.channel,
                ctx->pool[info[i].op].u.proxy_op.peer);
      break;
    }
    case PROF_K_PROXY_CTRL: {
      uint64_t ops = 0;
      for (int k = 0; k < nst; k++)
        if (st[k].state == ncclProfilerProxyCtrlAppendEnd ||
            st[k].state == ncclProfilerProxyCtrlAppend)
          ops = st[k].v;
      fprintf(out, ",\"appendedProxyOps\":%llu", (unsigned long long)ops);
      break;
    }
    case PROF_K_KERNEL_CH: {
      fprintf(out, ",\"channel\":%u,\"gpuStart\":%llu", ev->u.kernel_ch.channel,
              (unsigned long long)ev->u.kernel_ch.gpu_start);
      for (int k = 0; k < nst; k++) {
        if (st[k].state != ncclProfilerKernelChStop) continue;
        fprintf(out, ",\"gpuStop\":%llu", (unsigned long long)st[k].v);
        if (st[k].v >= ev->u.kernel_ch.gpu_start && ev->u.kernel_ch.gpu_start != 0) {
          fprintf(out, ",\"gpuDur\":");
          prof_json_us(out, st[k].v - ev->u.kernel_ch.gpu_start);
        }
      }
      break;
    }
    case PROF_K_NET:
      fprintf(out, ",\"pluginId\":\"0x%llx\",\"updates\":%u", (unsigned long long)ev->u.net.id,
              atomic_load_explicit(&ev->nupdates, memory_order_relaxed));
      if (ev->u.net.format == PROF_NET_IB)
        fprintf(out, ",\"device\":%d,\"wrId\":%llu,\"opcode\":%d,\"qpNum\":%d,\"length\":%zu",
                ev->u.net.ib.device, (unsigned long long)ev->u.net.ib.wr_id, ev->u.net.ib.opcode,
                ev->u.net.ib.qp, ev->u.net.ib.length);
      else if (ev->u.net.format == PROF_NET_SOCK)
        fprintf(out, ",\"fd\":%d,\"op\":%d,\"length\":%zu", ev->u.net.sock.fd, ev->u.net.sock.op,
                ev->u.net.sock.length);
      break;
    case PROF_K_GROUP_API:
      fprintf(out, ",\"depth\":%d,\"graphCaptured\":%s", ev->u.group_api.depth,
              ev->u.group_api.graph_captured ? "true" : "false");
      break;
    case PROF_K_COLL_API:
    case PROF_K_P2P_API:
      fprintf(out, ",\"count\":%zu,\"datatype\":", ev->u.api.count);
      prof_json_str(out, ev->u.api.datatype);
      if (ev->kind == PROF_K_COLL_API) fprintf(out, ",\"root\":%d", ev->u.api.root);
      fprintf(out, ",\"graphCaptured\":%s", ev->u.api.graph_captured ? "true" : "false");
      prof_json_ptr(out, "stream", ev->u.api.stream);
      break;
    case PROF_K_KERNEL_LAUNCH: prof_json_ptr(out, "stream", ev->u.kernel_launch.stream); break;
    case PROF_K_CE_COLL:
      fprintf(out,
              ",\"seq\":%llu,\"count\":%zu,\"datatype\":", (unsigned long long)ev->u.ce_coll.seq,
              ev->u.ce_coll.count);
      prof_json_str(out, ev->u.ce_coll.datatype);
      fprintf(out, ",\"root\":%d,\"syncStrategy\":", ev->u.ce_coll.root);
      prof_json_str(out, ev->u.ce_coll.sync);
      fprintf(out, ",\"intraBatchSync\":%s,\"batchSize\":%u,\"numBatches\":%u,\"ceSeqNum\":%u",
              ev->u.ce_coll.intra_sync ? "true" : "false", ev->u.ce_coll.batch_size,
              ev->u.ce_coll.num_batches, ev->u.ce_coll.ce_seq);
      prof_json_ptr(out, "stream", ev->u.ce_coll.stream);
      break;
    case PROF_K_CE_SYNC:
      fprintf(out, ",\"isComplete\":%s,\"nRanks\":%d", ev->u.ce_sync.complete ? "true" : "false",
              ev->u.ce_sync.nranks);
      break;
    case PROF_K_CE_BATCH:
      fprintf(out, ",\"numOps\":%d,\"totalBytes\":%zu,\"useIntraSync\":%s", ev->u.ce_batch.num_ops,
              ev->u.ce_batch.total_bytes, ev->u.ce_batch.intra_sync ? "true" : "false");
      break;
    default: break;
  }
  if ((ev->kind == PROF_K_COLL || ev->kind == PROF_K_P2P) && info[i].group >= 0)
    fprintf(out, ",\"group\":%lld", (long long)info[i].group);
  if (nst > 0) {
    fprintf(out, ",\"states\":[");
    for (int k = 0; k < nst; k++) {
      fprintf(out, "%s[\"%s\",", k ? "," : "", prof_state_name(st[k].state));
      prof_json_us(out, st[k].t);
      fprintf(out, ",%llu]", (unsigned long long)st[k].v);
    }
    fputc(']', out);
  }
  uint32_t recorded = atomic_load_explicit(&ev->nstates, memory_order_relaxed);
  if (recorded > PROF_NSTATES) fprintf(out, ",\"statesDropped\":%u", recorded - PROF_NSTATES);
  if ((info[i].flags & PROF_EV_STOPPED) == 0) fprintf(out, ",\"incomplete\":true");
  fputc('}', out);
}

/* A kernel channel's slice spans its GPU start and stop (the core reports the event after the
 * kernel, so its host times say only when it was read), placed on the trace's clock. The GPU
 * timer's offset to that clock is estimated from the events themselves: a channel cannot stop
 * after the host read its stop, so the offset is at least stop - (host time of the report) for
 * every channel, and the largest such bound is taken (exact for a channel read as it stopped;
 * the GPU timer and the host clocks are not synchronized finely enough to use directly). Host
 * times when the stop is missing or the result falls before the clock's origin. */
static bool prof_kernel_ch_times(const prof_event_t* ev, uint64_t* g0, uint64_t* g1) {
  prof_state_t st[PROF_NSTATES];
  const int nst = prof_states(ev, st);
  *g0 = ev->u.kernel_ch.gpu_start;
  for (int k = 0; k < nst; k++)
    if (st[k].state == ncclProfilerKernelChStop && *g0 != 0 && st[k].v >= *g0) {
      *g1 = st[k].v;
      return true;
    }
  return false;
}

static void prof_kernel_ch_calibrate(prof_ctx_t* ctx, const prof_info_t* info, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    const prof_event_t* ev = &ctx->pool[i];
    uint64_t g0, g1;
    if ((info[i].flags & PROF_EV_STARTED) == 0 || ev->kind != PROF_K_KERNEL_CH ||
        !prof_kernel_ch_times(ev, &g0, &g1))
      continue;
    int64_t bound;
    if (!__builtin_sub_overflow((int64_t)g1, (int64_t)ev->t_start, &bound) &&
        bound > ctx->gpu_off)
      ctx->gpu_off = bound;
  }
}

static void prof_kernel_ch_span(const prof_ctx_t* ctx, const prof_event_t* ev, uint64_t* t0,
                                uint64_t* t1) {
  uint64_t g0, g1;
  if (ctx->gpu_off == INT64_MIN || !prof_kernel_ch_times(ev, &g0, &g1)) return;
  int64_t a, b; /* a timer value a plugin-facing caller garbled must not overflow */
  if (__builtin_sub_overflow((int64_t)g0, ctx->gpu_off, &a) ||
      __builtin_sub_overflow((int64_t)g1, ctx->gpu_off, &b) || a <= 0 || b < a)
    return;
  *t0 = (uint64_t)a;
  *t1 = (uint64_t)b;
}

static void prof_emit_slice(FILE* out, pid_t pid, int tid, const char* name, const char* cat,
                            uint64_t start, uint64_t end) {
  fputs(",\n{\"name\":", out);
  prof_json_str(out, name);
  fprintf(out, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":", cat);
  prof_json_us(out, start);
  fputs(",\"dur\":", out);
  prof_json_us(out, end - start);
  fprintf(out, ",\"pid\":%d,\"tid\":%d,", (int)pid, tid);
}

/* Opens the file positioned where the next record goes (before the tail). */
static FILE* prof_file_open(prof_ctx_t* ctx, prof_file_t* f) {
  FILE* out = NULL;
  if (f->started) {
    out = fopen(f->path, "r+");
    if (out != NULL && fseek(out, f->tail_off, SEEK_SET) != 0) {
      fclose(out);
      out = NULL;
    }
    if (out == NULL)
      PROF_WARN(ctx, "PROFILER/Trace: cannot reopen %s (%s); starting it again", f->path,
                strerror(errno));
  }
  if (out == NULL) {
    out = fopen(f->path, "w");
    if (out == NULL) {
      PROF_WARN(ctx, "PROFILER/Trace: cannot create %s: %s", f->path, strerror(errno));
      return NULL;
    }
    f->started = true;
    f->next_tid = 1;
    fprintf(out, "{\"otherData\":{\"producer\":\"choir-trace\",\"host\":");
    prof_json_str(out, prof_host);
    fprintf(out, ",\"pid\":%d,\"clock\":\"%s\",\"timeUnit\":\"us\"},\n\"traceEvents\":[\n",
            (int)ctx->pid, prof_clock_id == CLOCK_REALTIME ? "realtime" : "monotonic");
    fprintf(out, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":",
            (int)ctx->pid);
    char pname[320];
    snprintf(pname, sizeof(pname), "%s pid %d", prof_host, (int)ctx->pid);
    prof_json_str(out, pname);
    fputs("}}", out);
  }
  return out;
}

static bool prof_file_close(prof_ctx_t* ctx, prof_file_t* f, FILE* out) {
  long off = ftell(out);
  bool ok = off >= 0;
  if (ok) f->tail_off = off;
  fputs(prof_tail, out);
  ok = ok && fflush(out) == 0 && !ferror(out);
  if (ok && ftruncate(fileno(out), off + (long)strlen(prof_tail)) != 0) ok = false;
  int err = errno;
  if (fclose(out) != 0) ok = false;
  if (!ok) {
    PROF_WARN(ctx, "PROFILER/Trace: writing %s failed: %s", f->path, strerror(err));
    f->started = false; /* the next communicator starts the file again */
  }
  return ok;
}

/* Writes ctx's events; the process lock is held. */
static ncclResult_t prof_trace_write(prof_ctx_t* ctx, uint64_t* written_p) {
  uint64_t n = atomic_load_explicit(&ctx->next, memory_order_relaxed);
  if (n > ctx->cap) n = ctx->cap;
  uint64_t now = prof_now();
  ncclResult_t res = ncclSystemError;
  prof_info_t* info = n ? calloc(n, sizeof(*info)) : NULL;
  prof_item_t* items = n ? malloc(n * (PROF_NSTATES + 1) * sizeof(*items)) : NULL;
  prof_stack_t* lanes = calloc(PROF_MAX_SUBLANES, sizeof(*lanes));
  FILE* out = NULL;
  if ((n != 0 && (info == NULL || items == NULL)) || lanes == NULL) {
    PROF_WARN(ctx, "PROFILER/Trace: out of memory writing %llu events", (unsigned long long)n);
    goto out_free;
  }

  /* Resolve ancestry and end times. */
  for (uint64_t i = 0; i < n; i++) {
    const prof_event_t* ev = &ctx->pool[i];
    info[i].flags = (uint8_t)atomic_load_explicit(&ev->flags, memory_order_acquire);
    info[i].parent = -1, info[i].group = -1, info[i].op = -1;
    if ((info[i].flags & PROF_EV_STARTED) == 0) continue;
    if ((info[i].flags & PROF_EV_STOPPED) && ev->t_end >= ev->t_start)
      info[i].end = ev->t_end;
    else /* never stopped: it lasts until now */
      info[i].end = now > ev->t_start ? now : ev->t_start;
    if (!ev->foreign_parent) info[i].parent = prof_resolve(ctx, n, ev->parent);
    info[i].group = prof_resolve(ctx, n, ev->group);
  }
  for (uint64_t i = 0; i < n; i++) {
    /* A step or net event takes the channel and direction of its proxy op. */
    int64_t p = (int64_t)i;
    for (int depth = 0; depth < 3 && p >= 0; depth++, p = info[p].parent) {
      if (ctx->pool[p].kind == PROF_K_PROXY_OP) {
        info[i].op = p;
        break;
      }
    }
  }

  prof_kernel_ch_calibrate(ctx, info, n);
  /* Items: every started event, and the phases of those that have them. */
  size_t nitems = 0;
  for (uint64_t i = 0; i < n; i++) {
    const prof_event_t* ev = &ctx->pool[i];
    if ((info[i].flags & PROF_EV_STARTED) == 0) continue;
    uint32_t key = prof_lane_key(ctx, info, i);
    uint64_t t0 = ev->t_start, t1 = info[i].end;
    if (ev->kind == PROF_K_KERNEL_CH) prof_kernel_ch_span(ctx, ev, &t0, &t1);
    items[nitems++] = (prof_item_t){t0, t1, key, (uint32_t)i, -1, 0};
    if (!prof_has_phases(ev->kind)) continue;
    prof_state_t st[PROF_NSTATES];
    int nst = prof_states(ev, st);
    for (int k = 0; k < PROF_NSTATES; k++) {
      uint64_t a, b;
      const char* pname;
      if (prof_phase(ev, info[i].end, st, nst, k, &a, &b, &pname) && a >= ev->t_start &&
          b <= info[i].end)
        items[nitems++] = (prof_item_t){a, b, key, (uint32_t)i, (int8_t)k, 0};
    }
  }
  if (nitems > 1) qsort(items, nitems, sizeof(*items), prof_item_cmp);

  out = prof_file_open(ctx, ctx->file);
  if (out == NULL) goto out_free;
  char buf[PROF_NAME_MAX + 96];

  /* Place each family on its sub-lanes, naming the lanes as they open. */
  for (size_t g = 0; g < nitems;) {
    uint32_t key = items[g].key;
    size_t end = g;
    int nlanes = 0;
    int tids[PROF_MAX_SUBLANES];
    for (; end < nitems && items[end].key == key; end++) {
      prof_item_t* it = &items[end];
      prof_info_t* owner = &info[it->ev];
      if (it->phase >= 0) {
        prof_stack_t* s = &lanes[owner->sub];
        prof_pop_ended(s, it->start);
        /* Inside its event, or (zero-length, sorted after a longer one starting with it)
         * inside a sibling phase; never across another event's slice. */
        const prof_open_t* top = s->n > 0 ? &s->v[s->n - 1] : NULL;
        if (top != NULL && top->ev == it->ev && it->end <= top->end &&
            prof_push(s, (prof_open_t){it->end, it->ev, false}))
          it->tid = owner->tid;
        continue;
      }
      int l = 0;
      for (; l < nlanes; l++) {
        prof_stack_t* s = &lanes[l];
        prof_pop_ended(s, it->start);
        if (s->n == 0 || (!s->v[s->n - 1].sealed && it->end <= s->v[s->n - 1].end)) break;
      }
      if (l == nlanes) {
        if (nlanes < PROF_MAX_SUBLANES) {
          tids[nlanes] = ctx->file->next_tid++;
          lanes[nlanes].n = 0;
          prof_lane_name(ctx, key, nlanes, buf, sizeof(buf));
          fprintf(
              out,
              ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
              (int)ctx->pid, tids[nlanes]);
          prof_json_str(out, buf);
          fprintf(out,
                  "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                  "\"args\":{\"sort_index\":%d}}",
                  (int)ctx->pid, tids[nlanes], tids[nlanes]);
          nlanes++;
        } else {
          l = nlanes - 1; /* out of lanes: nest improperly rather than lose the event */
        }
      }
      int kind = ctx->pool[it->ev].kind;
      bool sealed = kind != PROF_K_GROUP_API && prof_has_phases(kind);
      prof_push(&lanes[l], (prof_open_t){it->end, it->ev, sealed});
      owner->sub = l;
      owner->tid = tids[l];
      it->tid = tids[l];
    }
    g = end;
  }

  /* The communicator itself, then every slice. */
  prof_comm_label(ctx, buf, sizeof(buf));
  fputs(",\n{\"name\":", out);
  char cname[sizeof(buf) + 8];
  snprintf(cname, sizeof(cname), "comm %s", buf);
  prof_json_str(out, cname);
  fputs(",\"cat\":\"Comm\",\"ph\":\"i\",\"s\":\"p\",\"ts\":", out);
  prof_json_us(out, ctx->t_init);
  uint64_t nevents = 0;
  for (uint64_t i = 0; i < n; i++) nevents += (info[i].flags & PROF_EV_STARTED) != 0;
  fprintf(out, ",\"pid\":%d,\"tid\":0,\"args\":{\"comm\":\"0x%016llx\",\"name\":", (int)ctx->pid,
          (unsigned long long)ctx->comm_id);
  prof_json_str(out, ctx->comm_name);
  fprintf(out,
          ",\"rank\":%d,\"nranks\":%d,\"nNodes\":%d,\"abi\":%d,\"mask\":\"0x%x\",\"cap\":%llu,"
          "\"events\":%llu,\"dropped\":%llu}}",
          ctx->rank, ctx->nranks, ctx->nnodes, ctx->version, ctx->mask,
          (unsigned long long)ctx->cap, (unsigned long long)nevents,
          (unsigned long long)atomic_load_explicit(&ctx->dropped, memory_order_relaxed));

  for (size_t j = 0; j < nitems; j++) {
    const prof_item_t* it = &items[j];
    if (it->tid == 0) continue;
    const prof_event_t* ev = &ctx->pool[it->ev];
    prof_state_t st[PROF_NSTATES];
    int nst = prof_states(ev, st);
    if (it->phase < 0) {
      prof_event_name(ctx, info, it->ev, st, nst, buf, sizeof(buf));
      prof_emit_slice(out, ctx->pid, it->tid, buf, prof_kind_name(ev->kind), it->start, it->end);
      prof_emit_args(out, ctx, info, it->ev, st, nst);
      fputc('}', out);
    } else {
      uint64_t a, b;
      const char* pname = "";
      prof_phase(ev, info[it->ev].end, st, nst, it->phase, &a, &b, &pname);
      char cat[32];
      snprintf(cat, sizeof(cat), "%sState", prof_kind_name(ev->kind));
      prof_emit_slice(out, ctx->pid, it->tid, pname, cat, it->start, it->end);
      fprintf(out, "\"args\":{\"comm\":\"0x%016llx\",\"id\":%u", (unsigned long long)ctx->comm_id,
              it->ev);
      if (ev->kind != PROF_K_GROUP_API) {
        fprintf(out, ",\"value\":%llu", (unsigned long long)st[it->phase].v);
      }
      fputs("}}", out);
    }
  }
  *written_p = nevents;
  res = prof_file_close(ctx, ctx->file, out) ? ncclSuccess : ncclSystemError;

out_free:
  if (lanes != NULL)
    for (int l = 0; l < PROF_MAX_SUBLANES; l++) free(lanes[l].v);
  free(lanes);
  free(items);
  free(info);
  return res;
}

static void prof_live_unlink(prof_ctx_t* ctx) {
  if (ctx->live_prev != NULL)
    ctx->live_prev->live_next = ctx->live_next;
  else if (prof_live == ctx)
    prof_live = ctx->live_next;
  if (ctx->live_next != NULL) ctx->live_next->live_prev = ctx->live_prev;
  ctx->live_prev = ctx->live_next = NULL;
}

ncclResult_t prof_trace_detach(prof_ctx_t* ctx, uint64_t* written_p) {
  ncclResult_t res = ncclSuccess;
  uint64_t written = 0;
  pthread_mutex_lock(&prof_lock);
  prof_live_unlink(ctx);
  if (!ctx->written) {
    res = prof_trace_write(ctx, &written);
    ctx->written = true;
  }
  const char* path = ctx->file->path;
  pthread_mutex_unlock(&prof_lock);
  if (res == ncclSuccess)
    PROF_INFO(ctx, "PROFILER/Trace: comm %s rank %d: wrote %llu events to %s",
              ctx->comm_name[0] ? ctx->comm_name : "-", ctx->rank, (unsigned long long)written,
              path);
  *written_p = written;
  return res;
}

/* At exit, write the communicators this process never finalized. Other threads may still be
 * recording: only published fields are read, and nothing is freed. A lock held elsewhere (exit
 * called during a finalize) skips the flush rather than deadlock. */
__attribute__((destructor)) static void prof_trace_at_exit(void) {
  if (pthread_mutex_trylock(&prof_lock) != 0) return;
  pid_t self = getpid();
  for (prof_ctx_t* ctx = prof_live; ctx != NULL; ctx = ctx->live_next) {
    if (ctx->pid != self || !ctx->flush_at_exit || ctx->written) continue;
    uint64_t written = 0;
    if (prof_trace_write(ctx, &written) == ncclSuccess)
      PROF_INFO(ctx,
                "PROFILER/Trace: comm %s rank %d was not finalized: wrote %llu events to %s "
                "at exit",
                ctx->comm_name[0] ? ctx->comm_name : "-", ctx->rank, (unsigned long long)written,
                ctx->file->path);
    ctx->written = true;
  }
  pthread_mutex_unlock(&prof_lock);
}
