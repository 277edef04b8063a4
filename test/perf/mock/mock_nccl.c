/*
 * Choir perf tools, CPU mock: the NCCL calls the perf tools make, computed on the host with the
 * reference arithmetic of ref.h (see mock.h). It also checks what a real library would reject
 * (mismatched collectives, bad ranks and operators), so that harness bugs fail loudly here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "mock.h"
#include "ref.h"

#define MOCK_MAX_RANKS 64
#define MOCK_MAX_OPS 16

struct mock_redop {
  int used;
  int type;
  int residence;
  _Alignas(8) unsigned char value[8]; /* host-immediate factor, read with ref_load */
  const void* ptr;
};

struct mock_slot {
  unsigned long long seq;
  int nposted;
  int posted[MOCK_MAX_RANKS];
  struct mock_call call[MOCK_MAX_RANKS];
  struct mock_slot* next;
};

struct mock_queue {
  struct mock_call* v;
  int n, cap;
};

struct mock_clique {
  char id[NCCL_UNIQUE_ID_BYTES];
  int nranks;
  int live;
  struct ncclComm* members[MOCK_MAX_RANKS];
  struct mock_slot* slots;
  struct mock_queue sends[MOCK_MAX_RANKS][MOCK_MAX_RANKS]; /* [from][to] */
  struct mock_queue recvs[MOCK_MAX_RANKS][MOCK_MAX_RANKS]; /* [at][from] */
  struct mock_clique* next;
};

struct ncclComm {
  struct mock_clique* q;
  int rank;
  int dev;
  unsigned long long next_seq;
  int posted_any;
  int nonblocking; /* config.blocking = 0: calls leave work "in progress" for a few polls */
  int in_progress;
  struct mock_redop ops[MOCK_MAX_OPS];
};

static struct mock_clique* mock_cliques;
static __thread int mock_group_depth;
static char mock_last_error[256];

static int mock_env_int(const char* name, int dflt) {
  const char* e = getenv(name);
  return e && *e ? atoi(e) : dflt;
}

static ncclResult_t mock_error(ncclResult_t r, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(mock_last_error, sizeof mock_last_error, fmt, ap);
  va_end(ap);
  fprintf(stderr, "mock nccl: %s\n", mock_last_error);
  return r;
}

/* ---- Execution ---- */

static void mock_complete(struct mock_call* c) {
  if (c->comm->rank == mock_env_int("MOCK_NCCL_HANG", -1)) {
    c->stream->hung = 1; /* stays pending for ever */
    return;
  }
  c->stream->pending--;
}

static ref_val mock_scalar(const struct ncclComm* comm, int op, int type) {
  const struct mock_redop* r = &comm->ops[op - ncclNumOps];
  if (r->type != type) mock_fail("premulsum operator of type %d used with type %d", r->type, type);
  return ref_load(type, r->residence == ncclScalarDevice ? r->ptr : r->value, 0);
}

static void mock_execute(struct mock_clique* q, struct mock_slot* s) {
  const struct mock_call* c0 = &s->call[0];
  int n = q->nranks, t = c0->type, kind = c0->kind;
  size_t c = c0->count, elt = ref_type_size(t);
  size_t in_count = c, out_count = c;
  if (kind == MOCK_REDUCESCATTER || kind == MOCK_ALLTOALL || kind == MOCK_SCATTER) in_count = c * n;
  if (kind == MOCK_ALLGATHER || kind == MOCK_ALLTOALL || kind == MOCK_GATHER) out_count = c * n;
  for (int r = 1; r < n; r++) {
    const struct mock_call* x = &s->call[r];
    int same_op = x->op == c0->op || (x->op >= ncclNumOps && c0->op >= ncclNumOps);
    if (x->kind != kind || x->count != c || x->type != t || !same_op || x->root != c0->root)
      mock_fail("collective #%llu differs between rank 0 (kind %d count %zu type %d op %d root %d)"
                " and rank %d (kind %d count %zu type %d op %d root %d)",
                s->seq, kind, c, t, c0->op, c0->root, r, x->kind, x->count, x->type, x->op,
                x->root);
  }
  /* Snapshot every input first: in-place outputs overwrite them. */
  unsigned char* in[MOCK_MAX_RANKS] = {0};
  for (int r = 0; r < n; r++) {
    if ((kind == MOCK_BROADCAST || kind == MOCK_SCATTER) && r != c0->root) continue;
    in[r] = malloc(in_count * elt + 1);
    if (!in[r]) mock_fail("out of memory");
    memcpy(in[r], s->call[r].send, in_count * elt);
  }
  for (int r = 0; r < n; r++) {
    const struct mock_call* x = &s->call[r];
    unsigned char* out = x->recv;
    if ((kind == MOCK_REDUCE || kind == MOCK_GATHER) && r != c0->root) continue;
    if (kind == MOCK_ALLREDUCE || kind == MOCK_REDUCE || kind == MOCK_REDUCESCATTER) {
      int rop = c0->op >= ncclNumOps ? REF_PREMULSUM : c0->op;
      size_t off = kind == MOCK_REDUCESCATTER ? (size_t)r * c : 0;
      for (size_t i = 0; i < c; i++) {
        struct ref_acc a;
        ref_acc_init(&a);
        for (int p = 0; p < n; p++) {
          int op = s->call[p].op;
          ref_val scalar =
              op >= ncclNumOps ? mock_scalar(s->call[p].comm, op, t) : ref_from_i64(t, 1);
          ref_acc_add(&a, t, op >= ncclNumOps ? REF_PREMULSUM : op, ref_load(t, in[p], off + i),
                      scalar);
        }
        ref_store(t, out, i, ref_acc_result(&a, t, rop));
      }
    } else if (kind == MOCK_ALLGATHER || kind == MOCK_GATHER) {
      for (int p = 0; p < n; p++) memcpy(out + (size_t)p * c * elt, in[p], c * elt);
    } else if (kind == MOCK_ALLTOALL) {
      for (int p = 0; p < n; p++)
        memcpy(out + (size_t)p * c * elt, in[p] + (size_t)r * c * elt, c * elt);
    } else if (kind == MOCK_BROADCAST) {
      memcpy(out, in[c0->root], c * elt);
    } else if (kind == MOCK_SCATTER) {
      memcpy(out, in[c0->root] + (size_t)r * c * elt, c * elt);
    }
    int last_out = (kind == MOCK_REDUCE || kind == MOCK_GATHER) ? c0->root : n - 1;
    if (mock_env_int("MOCK_NCCL_CORRUPT", 0) && r == last_out && out_count > 0)
      out[(out_count / 2) * elt + elt - 1] ^= 0x40; /* top exponent (or high) bit */
    if (mock_env_int("MOCK_NCCL_OVERRUN", 0) && r == 0) out[out_count * elt] = 0;
  }
  for (int r = 0; r < n; r++) {
    free(in[r]);
    mock_complete(&s->call[r]);
  }
}

static void mock_queue_push(struct mock_queue* qu, const struct mock_call* c) {
  if (qu->n == qu->cap) {
    qu->cap = qu->cap ? 2 * qu->cap : 8;
    qu->v = realloc(qu->v, (size_t)qu->cap * sizeof *qu->v);
    if (!qu->v) mock_fail("out of memory");
  }
  qu->v[qu->n++] = *c;
}

static struct mock_call mock_queue_pop(struct mock_queue* qu) {
  struct mock_call c = qu->v[0];
  memmove(qu->v, qu->v + 1, (size_t)(--qu->n) * sizeof *qu->v);
  return c;
}

static void mock_p2p_match(struct mock_clique* q, int from, int to) {
  struct mock_queue* sq = &q->sends[from][to];
  struct mock_queue* rq = &q->recvs[to][from];
  while (sq->n && rq->n) {
    struct mock_call s = mock_queue_pop(sq), r = mock_queue_pop(rq);
    if (s.count != r.count || s.type != r.type)
      mock_fail("send %d->%d of %zu elements of type %d matched with a receive of %zu of type %d",
                from, to, s.count, s.type, r.count, r.type);
    size_t elt = ref_type_size(s.type);
    memmove(r.recv, s.send, s.count * elt);
    if (mock_env_int("MOCK_NCCL_CORRUPT", 0) && to == q->nranks - 1 && s.count > 0)
      ((unsigned char*)r.recv)[(s.count / 2) * elt + elt - 1] ^= 0x40;
    mock_complete(&s);
    mock_complete(&r);
  }
}

void mock_nccl_post(const struct mock_call* c) {
  struct ncclComm* comm = c->comm;
  struct mock_clique* q = comm->q;
  if (c->stream->capturing) {
    struct CUstream_st* st = c->stream;
    if (st->nrec == st->cap) {
      st->cap = st->cap ? 2 * st->cap : 16;
      st->rec = realloc(st->rec, (size_t)st->cap * sizeof *st->rec);
      if (!st->rec) mock_fail("out of memory");
    }
    st->rec[st->nrec++] = *c;
    return;
  }
  c->stream->pending++;
  comm->posted_any = 1;
  if (c->kind == MOCK_SEND) {
    mock_queue_push(&q->sends[comm->rank][c->peer], c);
    mock_p2p_match(q, comm->rank, c->peer);
    return;
  }
  if (c->kind == MOCK_RECV) {
    mock_queue_push(&q->recvs[comm->rank][c->peer], c);
    mock_p2p_match(q, c->peer, comm->rank);
    return;
  }
  unsigned long long seq = comm->next_seq++;
  struct mock_slot** pp = &q->slots;
  while (*pp && (*pp)->seq != seq) pp = &(*pp)->next;
  if (!*pp) {
    *pp = calloc(1, sizeof **pp);
    if (!*pp) mock_fail("out of memory");
    (*pp)->seq = seq;
  }
  struct mock_slot* s = *pp;
  if (s->posted[comm->rank]) mock_fail("rank %d posted collective #%llu twice", comm->rank, seq);
  s->posted[comm->rank] = 1;
  s->call[comm->rank] = *c;
  if (++s->nposted == q->nranks) {
    *pp = s->next;
    mock_execute(q, s);
    free(s);
  }
}

/* ---- API ---- */

static ncclResult_t mock_call(int kind, const void* send, void* recv, size_t count,
                              ncclDataType_t type, ncclRedOp_t op, int root, int peer,
                              ncclComm_t comm, cudaStream_t stream) {
  if (!comm || !stream) return mock_error(ncclInvalidArgument, "NULL communicator or stream");
  if ((int)type < 0 || (int)type >= ncclNumTypes)
    return mock_error(ncclInvalidArgument, "invalid type %d", (int)type);
  int reduces = kind == MOCK_ALLREDUCE || kind == MOCK_REDUCE || kind == MOCK_REDUCESCATTER;
  if (reduces && ((int)op < 0 || ((int)op >= ncclNumOps && ((int)op - ncclNumOps >= MOCK_MAX_OPS ||
                                                            !comm->ops[op - ncclNumOps].used))))
    return mock_error(ncclInvalidArgument, "invalid operator %d", (int)op);
  int rooted =
      kind == MOCK_BROADCAST || kind == MOCK_REDUCE || kind == MOCK_GATHER || kind == MOCK_SCATTER;
  if (rooted && (root < 0 || root >= comm->q->nranks))
    return mock_error(ncclInvalidArgument, "invalid root %d", root);
  if ((kind == MOCK_SEND || kind == MOCK_RECV) && (peer < 0 || peer >= comm->q->nranks))
    return mock_error(ncclInvalidArgument, "invalid peer %d", peer);
  if (count && ((kind != MOCK_RECV && !send) ||
                (kind != MOCK_SEND && !recv &&
                 !((kind == MOCK_REDUCE || kind == MOCK_GATHER) && comm->rank != root))))
    return mock_error(ncclInvalidArgument, "NULL buffer");
  if (stream->dev != comm->dev)
    return mock_error(ncclInvalidArgument,
                      "stream of device %d used with a communicator of device %d", stream->dev,
                      comm->dev);
  struct mock_call c = {
      kind, send, recv,  count, (int)type, reduces ? (int)op : 0, rooted ? root : -1,
      peer, comm, stream};
  if (comm->nonblocking) comm->in_progress = 2;
  mock_lock();
  mock_nccl_post(&c);
  mock_unlock();
  return ncclSuccess;
}

/* Device memory is host memory in the mock; never zero, like cudaMalloc's. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return cudaMalloc(ptr, size) == cudaSuccess ? ncclSuccess : ncclSystemError;
}

ncclResult_t ncclMemFree(void* ptr) {
  cudaFree(ptr);
  return ncclSuccess;
}

ncclResult_t ncclGetVersion(int* version) {
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclInvalidArgument: return "invalid argument";
  case ncclInvalidUsage: return "invalid usage";
  case ncclSystemError: return "unhandled system error";
  default: return "mock error";
  }
}

const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  return mock_last_error;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static unsigned counter;
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "mock %d %u %ld", (int)getpid(), ++counter,
           (long)time(NULL));
  return ncclSuccess;
}

static struct mock_clique* mock_clique_get(const char* id, int nranks) {
  struct mock_clique* q;
  for (q = mock_cliques; q; q = q->next)
    if (!memcmp(q->id, id, NCCL_UNIQUE_ID_BYTES)) break;
  if (q) return q->nranks == nranks ? q : NULL;
  q = calloc(1, sizeof *q);
  if (!q) mock_fail("out of memory");
  memcpy(q->id, id, NCCL_UNIQUE_ID_BYTES);
  q->nranks = nranks;
  q->next = mock_cliques;
  mock_cliques = q;
  return q;
}

static ncclResult_t mock_join(ncclComm_t* out, const char* id, int nranks, int rank, int dev) {
  if (nranks < 1 || nranks > MOCK_MAX_RANKS || rank < 0 || rank >= nranks)
    return mock_error(ncclInvalidArgument, "invalid rank %d of %d", rank, nranks);
  mock_lock();
  struct mock_clique* q = mock_clique_get(id, nranks);
  if (!q || q->members[rank]) {
    mock_unlock();
    return mock_error(ncclInvalidUsage, "rank %d joined twice, or nranks differs", rank);
  }
  struct ncclComm* c = calloc(1, sizeof *c);
  if (!c) mock_fail("out of memory");
  c->q = q;
  c->rank = rank;
  c->dev = dev;
  q->members[rank] = c;
  q->live++;
  *out = c;
  mock_unlock();
  return ncclSuccess;
}

static void mock_init_hang(void) {
  if (mock_env_int("MOCK_NCCL_INIT_HANG", 0))
    for (;;) pause();
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  mock_init_hang();
  return mock_join(comm, id.internal, nranks, rank, mock_current_device());
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  ncclUniqueId id;
  mock_init_hang();
  ncclGetUniqueId(&id);
  for (int i = 0; i < ndev; i++) {
    ncclResult_t r = mock_join(&comms[i], id.internal, ndev, i, devlist ? devlist[i] : i);
    if (r != ncclSuccess) return r;
  }
  return ncclSuccess;
}

static ncclResult_t mock_leave(ncclComm_t comm) {
  if (!comm) return mock_error(ncclInvalidArgument, "NULL communicator");
  mock_lock();
  struct mock_clique* q = comm->q;
  q->members[comm->rank] = NULL;
  if (--q->live == 0) {
    struct mock_clique** pp = &mock_cliques;
    while (*pp != q) pp = &(*pp)->next;
    *pp = q->next;
    while (q->slots) {
      struct mock_slot* s = q->slots;
      q->slots = s->next;
      free(s);
    }
    for (int a = 0; a < MOCK_MAX_RANKS; a++)
      for (int b = 0; b < MOCK_MAX_RANKS; b++) {
        free(q->sends[a][b].v);
        free(q->recvs[a][b].v);
      }
    free(q);
  }
  mock_unlock();
  free(comm);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return mock_leave(comm); }
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return mock_error(ncclInvalidArgument, "NULL communicator");
  if (comm->nonblocking) comm->in_progress = 2;
  return comm->nonblocking ? ncclInProgress : ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config) {
  mock_init_hang();
  ncclResult_t r = mock_join(comm, id.internal, nranks, rank, mock_current_device());
  if (r != ncclSuccess || !config || config->blocking) return r;
  (*comm)->nonblocking = 1;
  (*comm)->in_progress = 2;
  return mock_group_depth ? ncclSuccess : ncclInProgress;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return mock_leave(comm); }

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* err) {
  if (comm->in_progress > 0) {
    comm->in_progress--;
    *err = ncclInProgress;
    return ncclSuccess;
  }
  *err =
      mock_env_int("MOCK_NCCL_ASYNC_ERROR", 0) && comm->posted_any ? ncclSystemError : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
  mock_group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (mock_group_depth == 0)
    return mock_error(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  mock_group_depth--;
  return ncclSuccess;
}

/* The mock runs every operation when it is posted: nothing is left to simulate or discard. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  if (!info) return mock_error(ncclInvalidArgument, "NULL simInfo");
  if (mock_group_depth == 0)
    return mock_error(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  mock_group_depth--;
  info->estimatedTime = 1.0f;
  return ncclSuccess;
}

ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t type,
                                      ncclScalarResidence_t residence, ncclComm_t comm) {
  for (int i = 0; i < MOCK_MAX_OPS; i++) {
    struct mock_redop* r = &comm->ops[i];
    if (r->used) continue;
    r->used = 1;
    r->type = (int)type;
    r->residence = (int)residence;
    r->ptr = scalar;
    if (residence == ncclScalarHostImmediate) memcpy(r->value, scalar, ref_type_size((int)type));
    *op = (ncclRedOp_t)(ncclNumOps + i);
    return ncclSuccess;
  }
  return mock_error(ncclInvalidUsage, "too many premulsum operators");
}

ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  int i = (int)op - ncclNumOps;
  if (i < 0 || i >= MOCK_MAX_OPS || !comm->ops[i].used)
    return mock_error(ncclInvalidArgument, "ncclRedOpDestroy of unknown operator %d", (int)op);
  comm->ops[i].used = 0;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t st) {
  return mock_call(MOCK_ALLREDUCE, s, r, n, t, op, -1, -1, comm, st);
}

ncclResult_t ncclBcast(void* buff, size_t n, ncclDataType_t t, int root, ncclComm_t comm,
                       cudaStream_t st) {
  return mock_call(MOCK_BROADCAST, buff, buff, n, t, ncclSum, root, -1, comm, st);
}

ncclResult_t ncclAllGather(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t comm,
                           cudaStream_t st) {
  return mock_call(MOCK_ALLGATHER, s, r, n, t, ncclSum, -1, -1, comm, st);
}

ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t st) {
  return mock_call(MOCK_REDUCESCATTER, s, r, n, t, op, -1, -1, comm, st);
}

ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t st) {
  return mock_call(MOCK_BROADCAST, s, r, n, t, ncclSum, root, -1, comm, st);
}

ncclResult_t ncclReduce(const void* s, void* r, size_t n, ncclDataType_t t, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t st) {
  return mock_call(MOCK_REDUCE, s, r, n, t, op, root, -1, comm, st);
}

ncclResult_t ncclAlltoAll(const void* s, void* r, size_t n, ncclDataType_t t, ncclComm_t comm,
                          cudaStream_t st) {
  return mock_call(MOCK_ALLTOALL, s, r, n, t, ncclSum, -1, -1, comm, st);
}

ncclResult_t ncclGather(const void* s, void* r, size_t n, ncclDataType_t t, int root,
                        ncclComm_t comm, cudaStream_t st) {
  return mock_call(MOCK_GATHER, s, r, n, t, ncclSum, root, -1, comm, st);
}

ncclResult_t ncclScatter(const void* s, void* r, size_t n, ncclDataType_t t, int root,
                         ncclComm_t comm, cudaStream_t st) {
  return mock_call(MOCK_SCATTER, s, r, n, t, ncclSum, root, -1, comm, st);
}

ncclResult_t ncclSend(const void* s, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st) {
  return mock_call(MOCK_SEND, s, NULL, n, t, ncclSum, -1, peer, comm, st);
}

ncclResult_t ncclRecv(void* r, size_t n, ncclDataType_t t, int peer, ncclComm_t comm,
                      cudaStream_t st) {
  return mock_call(MOCK_RECV, NULL, r, n, t, ncclSum, -1, peer, comm, st);
}
