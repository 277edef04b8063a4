/*
 * plugins/profiler: the trace profiler's internal interface (prefix prof_).
 *
 * Every exported ABI version (prof_abi.c) decodes its own descriptors into the one event store
 * defined here (prof_event.c); communicator contexts, knobs (prof_config.c) and the Chrome-trace
 * writer (prof_trace.c) are shared by all versions.
 *
 * Memory model. Each communicator owns a fixed pool of event slots, mapped at init and released at
 * finalize. A slot is claimed with one atomic increment and never reused while the communicator
 * lives, so a handle stays valid until finalize: stopEvent and recordEventState on it are always
 * safe, whatever happened to its parent. Parents are stored as the pointers the core passed and
 * only resolved (inside this pool, by address range) when the trace is written. A slot's fields
 * are written by the thread that owns the event and published with release stores of `flags`
 * and of each state's id, so a writer running while events are still recorded (the flush at exit)
 * reads only what was completely written.
 */
#ifndef CHOIR_PROF_H
#define CHOIR_PROF_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "nccl_profiler.h"

#define PROF_EXPORT __attribute__((visibility("default")))

/* Event kinds: the bit index of the ncclProfile* type. */
enum {
  PROF_K_GROUP = 0,
  PROF_K_COLL,
  PROF_K_P2P,
  PROF_K_PROXY_OP,
  PROF_K_PROXY_STEP,
  PROF_K_PROXY_CTRL,
  PROF_K_KERNEL_CH,
  PROF_K_NET,
  PROF_K_GROUP_API,
  PROF_K_COLL_API,
  PROF_K_P2P_API,
  PROF_K_KERNEL_LAUNCH,
  PROF_K_CE_COLL,
  PROF_K_CE_SYNC,
  PROF_K_CE_BATCH,
  PROF_K_COUNT
};

/* Event types each ABI version can report (and the bits its activation mask may carry). */
#define PROF_TYPES_V4 0x00ffu
#define PROF_TYPES_V5 0x0fffu
#define PROF_TYPES_V6 0x7fffu

/* Default: what a user looks at first, at low overhead (no per-step proxy events). */
#define PROF_MASK_DEFAULT                                                      \
  (ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh | \
   ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch)

#define PROF_STR 16    /* copied strings (function, datatype, algorithm...), NUL included */
#define PROF_NSTATES 4 /* states kept per event; later ones are counted, not kept */
#define PROF_NAME_MAX 64

/* prof_event_t.flags */
#define PROF_EV_STARTED 1u
#define PROF_EV_STOPPED 2u

/* prof_event_t.u.net.format */
enum { PROF_NET_OTHER = 0, PROF_NET_IB, PROF_NET_SOCK };

/* One slot: 256 bytes, cache-line aligned so that threads filling neighbouring slots do not
 * share lines. */
typedef struct prof_event {
  _Alignas(64) _Atomic uint32_t flags; /* PROF_EV_*, release-stored after what they publish */
  _Atomic uint32_t nstates;            /* states recorded, kept or not */
  _Atomic uint32_t nupdates;           /* NetPluginUpdate calls */
  uint8_t kind;                        /* PROF_K_* */
  uint8_t foreign_parent;              /* parent belongs to another process (PXN): never resolved */
  int32_t rank;
  uint64_t thread;                     /* pthread_self() of the thread that started the event */
  uint64_t t_start, t_end;             /* ns on the process's trace clock */
  const void* parent;                  /* parent handle as the core gave it */
  const void* group;                   /* Coll/P2p (v5+): the legacy Group parent */
  _Atomic uint8_t st_id[PROF_NSTATES]; /* state + 1, release-stored after st_t/st_v; 0 = none */
  uint64_t st_t[PROF_NSTATES];
  uint64_t st_v[PROF_NSTATES]; /* transSize, appendedProxyOps or GPU timer, by kind */
  union {
    struct {
      uint64_t seq;
      size_t count;
      const void* sendbuff;
      const void* recvbuff;
      int root;
      uint8_t nchannels, nwarps;
      char func[PROF_STR], datatype[PROF_STR], algo[PROF_STR], proto[PROF_STR / 2];
    } coll;
    struct {
      size_t count;
      const void* buff;
      int peer;
      uint8_t nchannels;
      char func[PROF_STR], datatype[PROF_STR];
    } p2p;
    struct {
      int pid, peer, nsteps, chunk_size;
      uint8_t channel, is_send;
    } proxy_op;
    struct {
      int step;
    } proxy_step;
    struct {
      uint64_t gpu_start;
      uint8_t channel;
    } kernel_ch;
    struct {
      int64_t id;
      uint8_t format; /* PROF_NET_*: how `ib` / `sock` were decoded */
      union {
        struct {
          uint64_t wr_id;
          size_t length;
          int device, opcode, qp;
        } ib;
        struct {
          size_t length;
          int fd, op;
        } sock;
      };
    } net;
    struct {
      int depth;
      bool graph_captured;
    } group_api;
    struct { /* CollApi and P2pApi */
      size_t count;
      const void* stream;
      int root; /* -1 for P2pApi */
      bool graph_captured;
      char func[PROF_STR], datatype[PROF_STR];
    } api;
    struct {
      const void* stream;
    } kernel_launch;
    struct {
      uint64_t seq;
      size_t count;
      const void* stream;
      int root;
      uint32_t batch_size, num_batches, ce_seq;
      bool intra_sync;
      char func[PROF_STR], datatype[PROF_STR], sync[PROF_STR];
    } ce_coll;
    struct {
      int nranks;
      bool complete;
    } ce_sync;
    struct {
      size_t total_bytes;
      int num_ops;
      bool intra_sync;
    } ce_batch;
  } u;
} prof_event_t;

/* Knobs, read from CHOIR_PROFILER_* at each init (see README.md). */
typedef struct prof_config {
  uint32_t mask;       /* ncclProfile* bits to record, before the version's limit */
  uint64_t max_events; /* slots per communicator */
  char path[PATH_MAX]; /* output file, pattern expanded and made absolute */
  clockid_t clock;     /* trace clock; the first init of the process fixes it */
  bool flush_at_exit;  /* write still-open communicators when the process exits */
} prof_config_t;

struct prof_file;

typedef struct prof_ctx {
  /* Hot path: read-only after init, then the two counters. */
  uint32_t mask;            /* recorded types, already limited to the version's */
  uint64_t cap;             /* pool slots */
  prof_event_t* pool;       /* cap slots, mapped at init */
  pid_t pid;                /* process that created the context */
  _Atomic uint64_t next;    /* slots claimed (may pass cap by the number of racing threads) */
  _Atomic uint64_t dropped; /* events refused because the pool was full */

  /* Identity, for the trace and the logs. */
  int version; /* ABI version the core uses */
  uint64_t comm_id;
  char comm_name[PROF_NAME_MAX];
  int rank, nranks, nnodes;
  ncclDebugLogger_t log;
  uint64_t t_init;
  /* GPU timer minus the trace's clock (ns), estimated from the kernel channels written so far
   * (prof_trace.c); INT64_MIN: none yet. */
  int64_t gpu_off;
  bool flush_at_exit;

  /* Process bookkeeping, under the process lock (prof_trace.c). */
  struct prof_file* file;
  struct prof_ctx *live_prev, *live_next;
  bool written;
} prof_ctx_t;

/* ---- Logging through the core's logger (never stdio) ---- */
#define PROF_LOG(ctx, level, flags, ...)                                                   \
  do {                                                                                     \
    if ((ctx)->log != NULL) (ctx)->log((level), (flags), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define PROF_WARN(ctx, ...) PROF_LOG(ctx, NCCL_LOG_WARN, NCCL_ALL, __VA_ARGS__)
#define PROF_INFO(ctx, ...) PROF_LOG(ctx, NCCL_LOG_INFO, NCCL_INIT | NCCL_PROFILE, __VA_ARGS__)

/* ---- prof_config.c ---- */
/* Reads the CHOIR_PROFILER_* variables; problems are WARNed through `log` and defaults used. */
void prof_config_load(prof_config_t* cfg, ncclDebugLogger_t log);
/* Parses an event list ("default,proxyop,^kernelch", "all", "0x12"); unknown names are
 * reported through `log` and ignored. */
uint32_t prof_config_parse_events(const char* text, ncclDebugLogger_t log);
/* Name of an event kind ("Coll") and of a state ("SendGPUWait"). */
const char* prof_kind_name(int kind);
const char* prof_state_name(int state);

/* ---- prof_event.c: contexts and the hot path ---- */
ncclResult_t prof_ctx_init(prof_ctx_t** ctx_p, int version, uint64_t comm_id, const char* comm_name,
                           int nnodes, int nranks, int rank, ncclDebugLogger_t log, int* mask_p);
ncclResult_t prof_ctx_finalize(prof_ctx_t* ctx);

/* Claims and stamps a slot for an event of `type` (one ncclProfile* bit), or returns NULL when
 * the type is not recorded or the pool is full. The caller fills the payload, then publishes. */
prof_event_t* prof_event_begin(prof_ctx_t* ctx, uint64_t type, const void* parent, int rank);
static inline void prof_event_publish(prof_event_t* ev) {
  atomic_store_explicit(&ev->flags, PROF_EV_STARTED, memory_order_release);
}
void prof_event_stop(prof_event_t* ev);
/* Records a state; `value` is the state's argument (transfer size, appended ops, GPU timer). */
void prof_event_state(prof_event_t* ev, int state, uint64_t value);
/* Decodes a net plugin's payload (IB and socket v1 formats) into the event. */
void prof_event_net_payload(prof_event_t* ev, int64_t id, const void* data);
/* Copies a core string into a fixed field, truncating; NULL gives "". */
void prof_strcpy(char* dst, size_t size, const char* src);
uint64_t prof_now(void);

/* ---- prof_trace.c: the process's output files ---- */
/* Fixes the process-wide settings at the first init (clock, host) and attaches ctx to the file
 * of its path. */
ncclResult_t prof_trace_attach(prof_ctx_t* ctx, const prof_config_t* cfg);
/* Writes ctx's events to its file and detaches it; returns the number written. */
ncclResult_t prof_trace_detach(prof_ctx_t* ctx, uint64_t* written_p);
/* Process trace clock, fixed at the first init. */
extern clockid_t prof_clock_id;

#endif
