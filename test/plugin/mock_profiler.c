/*
 * A functional mock profiler of one ABI version (MOCK_PROF_V, 1..6), exporting ncclProfiler_vN.
 * It writes what it is told to the file MOCK_PROF_LOG (appended, one line per call, under a
 * lock), for test_prof.c to check:
 *   I <version> <rank> <nranks> <nnodes> <commHash or 0>      init (v4+ give the communicator)
 *   S <id> <type> <parent id, 0: none> <rank> <fields>         startEvent
 *   E <id>                                                     stopEvent
 *   R <id> <state>                                             recordEventState
 *   F                                                          finalize
 * Fields: Coll "<func> <algo> <proto> <nChannels> <count> <datatype> <seq>", P2p "<func> <peer>
 * <count> <datatype>", ProxyOp "<channel> <peer> <nSteps> <isSend>", ProxyStep "<step>",
 * NetPlugin "<id>", CollApi/P2pApi "<func> <count> <datatype>", GroupApi "<depth>", KernelCh
 * "<channelId> <pTimer>" (v3 has no pTimer: 0), others "-"; a KernelChStop state (v4+) adds
 * its pTimer to the R line. v1's numeric func/datatype/algo/proto are written as numbers. Event handles live until
 * finalize, so a parent handle can be read after its stop.
 * MOCK_PROF_MASK: the activation mask to set (default: every type); MOCK_PROF_FAIL_INIT=1: init
 * returns ncclInternalError.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_profiler.h"

#ifndef MOCK_PROF_V
#error "MOCK_PROF_V (1..6) must be defined"
#endif

typedef struct mock_ev {
  long id;
  struct mock_ev* next;
} mock_ev_t;

typedef struct {
  mock_ev_t* evs; /* every handle of this context, freed at finalize */
} mock_ctx_t;

static pthread_mutex_t mock_lock = PTHREAD_MUTEX_INITIALIZER;
static long mock_next_id = 1;

static void mock_log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void mock_log(const char* fmt, ...) {
  const char* path = getenv("MOCK_PROF_LOG");
  if (path == NULL) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}

static ncclResult_t mock_init_common(void** context, int* mask, int rank, int nranks, int nnodes,
                                     unsigned long long hash) {
  const char* fail = getenv("MOCK_PROF_FAIL_INIT");
  pthread_mutex_lock(&mock_lock);
  mock_log("I %d %d %d %d %llu\n", MOCK_PROF_V, rank, nranks, nnodes, hash);
  pthread_mutex_unlock(&mock_lock);
  if (fail != NULL && strcmp(fail, "1") == 0) return ncclInternalError;
  mock_ctx_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  const char* m = getenv("MOCK_PROF_MASK");
  *mask = m != NULL ? (int)strtol(m, NULL, 0) : -1;
  *context = c;
  return ncclSuccess;
}

#if MOCK_PROF_V >= 5
static ncclResult_t mock_init(void** context, uint64_t commId, int* mask, const char* name,
                              int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)name, (void)logfn;
  return mock_init_common(context, mask, rank, nranks, nNodes, (unsigned long long)commId);
}
#elif MOCK_PROF_V == 4
static ncclResult_t mock_init(void** context, int* mask, const char* name, uint64_t commHash,
                              int nNodes, int nranks, int rank, ncclDebugLogger_t logfn) {
  (void)name, (void)logfn;
  return mock_init_common(context, mask, rank, nranks, nNodes, (unsigned long long)commHash);
}
#else
static ncclResult_t mock_init(void** context, int* mask) {
  return mock_init_common(context, mask, -1, -1, -1, 0);
}
#endif

#define MOCK_CAT2(a, b) a##b
#define MOCK_CAT(a, b) MOCK_CAT2(a, b)
#define MOCK_DESCR MOCK_CAT(MOCK_CAT(ncclProfilerEventDescr_v, MOCK_PROF_V), _t)
#define MOCK_ARGS MOCK_CAT(MOCK_CAT(ncclProfilerEventStateArgs_v, MOCK_PROF_V), _t)
#define MOCK_STATE MOCK_CAT(MOCK_CAT(ncclProfilerEventState_v, MOCK_PROF_V), _t)
#define MOCK_TABLE MOCK_CAT(MOCK_CAT(ncclProfiler_v, MOCK_PROF_V), _t)
#define MOCK_SYMBOL MOCK_CAT(ncclProfiler_v, MOCK_PROF_V)

__attribute__((unused)) static inline const char* s_or(const char* s) { return s != NULL ? s : "(null)"; }

static ncclResult_t mock_start(void* context, void** eHandle, MOCK_DESCR* d) {
  mock_ctx_t* c = context;
  mock_ev_t* e = calloc(1, sizeof(*e));
  if (e == NULL) {
    *eHandle = NULL;
    return ncclSuccess;
  }
  char fields[512] = "-";
  const int type = (int)d->type;
  switch (type) {
#if MOCK_PROF_V == 1
    case ncclProfileColl:
      snprintf(fields, sizeof(fields), "%d %d %d %d %zu %d %llu", d->coll.func, d->coll.algo,
               d->coll.proto, d->coll.nMaxChannels, d->coll.count, d->coll.datatype,
               (unsigned long long)d->coll.seqNumber);
      break;
    case ncclProfileP2p:
      snprintf(fields, sizeof(fields), "%d %d %zu %d", d->p2p.func, d->p2p.peer, d->p2p.count,
               d->p2p.datatype);
      break;
#else
    case ncclProfileColl:
#if MOCK_PROF_V <= 3
      snprintf(fields, sizeof(fields), "%s %s %s %d %zu %s %llu", s_or(d->coll.func),
               s_or(d->coll.algo), s_or(d->coll.proto), d->coll.nMaxChannels, d->coll.count,
               s_or(d->coll.datatype), (unsigned long long)d->coll.seqNumber);
#else
      snprintf(fields, sizeof(fields), "%s %s %s %d %zu %s %llu", s_or(d->coll.func),
               s_or(d->coll.algo), s_or(d->coll.proto), d->coll.nChannels, d->coll.count,
               s_or(d->coll.datatype), (unsigned long long)d->coll.seqNumber);
#endif
      break;
    case ncclProfileP2p:
      snprintf(fields, sizeof(fields), "%s %d %zu %s", s_or(d->p2p.func), d->p2p.peer,
               d->p2p.count, s_or(d->p2p.datatype));
      break;
#endif
    case ncclProfileProxyOp:
      snprintf(fields, sizeof(fields), "%d %d %d %d", d->proxyOp.channelId, d->proxyOp.peer,
               d->proxyOp.nSteps, d->proxyOp.isSend);
      break;
    case ncclProfileProxyStep:
      snprintf(fields, sizeof(fields), "%d", d->proxyStep.step);
      break;
#if MOCK_PROF_V >= 4
    case ncclProfileKernelCh:
      snprintf(fields, sizeof(fields), "%d %llu", d->kernelCh.channelId,
               (unsigned long long)d->kernelCh.pTimer);
      break;
#elif MOCK_PROF_V == 3
    case ncclProfileKernelCh:
      snprintf(fields, sizeof(fields), "%d 0", d->kernelCh.channelId);
      break;
#endif
#if MOCK_PROF_V >= 3
    case ncclProfileNetPlugin:
      snprintf(fields, sizeof(fields), "0x%llx", (unsigned long long)d->netPlugin.id);
      break;
#endif
#if MOCK_PROF_V >= 5
    case ncclProfileCollApi:
      snprintf(fields, sizeof(fields), "%s %zu %s", s_or(d->collApi.func), d->collApi.count,
               s_or(d->collApi.datatype));
      break;
    case ncclProfileP2pApi:
      snprintf(fields, sizeof(fields), "%s %zu %s", s_or(d->p2pApi.func), d->p2pApi.count,
               s_or(d->p2pApi.datatype));
      break;
    case ncclProfileGroupApi:
      snprintf(fields, sizeof(fields), "%d", d->groupApi.groupDepth);
      break;
#endif
    default: break;
  }
  long parent = d->parentObj != NULL ? ((mock_ev_t*)d->parentObj)->id : 0;
  pthread_mutex_lock(&mock_lock);
  e->id = mock_next_id++;
  e->next = c->evs;
  c->evs = e;
  mock_log("S %ld %d %ld %d %s\n", e->id, type, parent, d->rank, fields);
  pthread_mutex_unlock(&mock_lock);
  *eHandle = e;
  return ncclSuccess;
}

static ncclResult_t mock_stop(void* eHandle) {
  pthread_mutex_lock(&mock_lock);
  mock_log("E %ld\n", ((mock_ev_t*)eHandle)->id);
  pthread_mutex_unlock(&mock_lock);
  return ncclSuccess;
}

static ncclResult_t mock_record(void* eHandle, MOCK_STATE state, MOCK_ARGS* args) {
  unsigned long long v = 0;
#if MOCK_PROF_V >= 4
  if (state == ncclProfilerKernelChStop && args != NULL) v = args->kernelCh.pTimer;
#else
  (void)args;
#endif
  pthread_mutex_lock(&mock_lock);
  mock_log("R %ld %d %llu\n", ((mock_ev_t*)eHandle)->id, (int)state, v);
  pthread_mutex_unlock(&mock_lock);
  return ncclSuccess;
}

static ncclResult_t mock_finalize(void* context) {
  mock_ctx_t* c = context;
  pthread_mutex_lock(&mock_lock);
  mock_log("F\n");
  pthread_mutex_unlock(&mock_lock);
  for (mock_ev_t *e = c->evs, *n; e; e = n) {
    n = e->next;
    free(e);
  }
  free(c);
  return ncclSuccess;
}

__attribute__((visibility("default"))) const MOCK_TABLE MOCK_SYMBOL = {
    "mock-profiler", mock_init, mock_start, mock_stop, mock_record,
    mock_finalize};
