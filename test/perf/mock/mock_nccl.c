/*
 * Choir perf tools, CPU mock: the NCCL calls the perf tools make, computed on the host (see
 * mock.h). Reductions use the mock's own arithmetic (below), written apart from the checker's
 * (test/harness/ref.h): its own conversions of the narrow floating types and plain loops per
 * type, NCCL's way for avg (each input times the rounded 1/n). So a mock run checks the checker's
 * arithmetic against an independent one, not against itself. It also checks what a real library
 * would reject (mismatched collectives, bad ranks and operators), so that harness bugs fail
 * loudly here.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "mock.h"

#define MOCK_MAX_RANKS 64
#define MOCK_MAX_OPS 16

struct mock_redop {
  int used;
  int type;
  int residence;
  _Alignas(8) unsigned char value[8]; /* host-immediate factor, its bytes */
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

/* ---- Arithmetic ---------------------------------------------------------------------------- */

static size_t mock_type_size(int t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    default: return 8;
  }
}

/* A narrow binary floating format: bits in all, significand bits with the implicit one,
 * smallest normal exponent, bias, largest finite value; fp8 conversions saturate (CUDA's
 * __NV_SATFINITE), fp16 and bf16 overflow to Inf; e4m3 has no Inf and S.1111.111 is NaN. */
struct mock_fmt {
  int bits, p, emin, bias;
  double max;
  int fp8;
};
static const struct mock_fmt mock_half = {16, 11, -14, 15, 65504.0, 0};
static const struct mock_fmt mock_bf16 = {16, 8, -126, 127, 0x1.fep127, 0};
static const struct mock_fmt mock_e4m3 = {8, 4, -6, 7, 448.0, 1};
static const struct mock_fmt mock_e5m2 = {8, 3, -14, 15, 57344.0, 1};

static const struct mock_fmt* mock_fmt_of(int t) {
  switch (t) {
    case ncclFloat16: return &mock_half;
    case ncclBfloat16: return &mock_bf16;
    case ncclFloat8e4m3: return &mock_e4m3;
    case ncclFloat8e5m2: return &mock_e5m2;
    default: return NULL;
  }
}

static double mock_decode(const struct mock_fmt* f, unsigned code) {
  const int mbits = f->p - 1, ebits = f->bits - 1 - mbits;
  const unsigned emask = (1u << ebits) - 1, m = code & ((1u << mbits) - 1);
  const unsigned e = (code >> mbits) & emask;
  double v;
  if (f == &mock_e4m3 && e == emask && m == (1u << mbits) - 1)
    return NAN;
  else if (f != &mock_e4m3 && e == emask)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = ldexp((double)m, f->emin - mbits);
  else
    v = ldexp((double)(m + (1u << mbits)), (int)e - f->bias - mbits);
  return (code >> (f->bits - 1)) ? -v : v;
}

/* x rounded to nearest (ties to even: rint in the default mode) and encoded. */
static unsigned mock_encode(const struct mock_fmt* f, double x) {
  const int mbits = f->p - 1, ebits = f->bits - 1 - mbits;
  const unsigned sign = signbit(x) ? 1u << (f->bits - 1) : 0, inf = ((1u << ebits) - 1) << mbits;
  if (isnan(x)) return f->bits == 8 ? 0x7fu : 0x7fffu;
  double a = fabs(x);
  if (isinf(a)) {
    if (!f->fp8) return sign | inf;
    a = f->max;
  }
  if (a == 0) return sign;
  int e;
  frexp(a, &e); /* a in [2^(e-1), 2^e) */
  int exp = e - 1 < f->emin ? f->emin : e - 1;
  double r = rint(ldexp(a, mbits - exp)); /* in units of the last place at exp */
  a = ldexp(r, exp - mbits);
  if (a > f->max) {
    if (!f->fp8) return sign | inf;
    a = f->max;
  }
  if (a == 0) return sign;
  frexp(a, &e);
  exp = e - 1;
  if (exp < f->emin) return sign | (unsigned)ldexp(a, mbits - f->emin); /* subnormal */
  return sign | (unsigned)(exp + f->bias) << mbits |
         ((unsigned)ldexp(a, mbits - exp) - (1u << mbits));
}

/* One element of a floating type, as a double (float and double exactly as stored). */
static double mock_load_float(int t, const void* base, size_t i) {
  if (t == ncclFloat32) return ((const float*)base)[i];
  if (t == ncclFloat64) return ((const double*)base)[i];
  const struct mock_fmt* f = mock_fmt_of(t);
  unsigned code = f->bits == 8 ? ((const uint8_t*)base)[i] : ((const uint16_t*)base)[i];
  return mock_decode(f, code);
}

/* x rounded to floating type t. */
static double mock_round(int t, double x) {
  if (t == ncclFloat32) return (float)x;
  if (t == ncclFloat64) return x;
  return mock_decode(mock_fmt_of(t), mock_encode(mock_fmt_of(t), x));
}

static void mock_store_float(int t, void* base, size_t i, double x) {
  if (t == ncclFloat32) {
    ((float*)base)[i] = (float)x;
  } else if (t == ncclFloat64) {
    ((double*)base)[i] = x;
  } else {
    const struct mock_fmt* f = mock_fmt_of(t);
    unsigned code = mock_encode(f, x);
    if (f->bits == 8)
      ((uint8_t*)base)[i] = (uint8_t)code;
    else
      ((uint16_t*)base)[i] = (uint16_t)code;
  }
}

/* a op b in floating type t: float arithmetic for the types up to float (so that no fused or
 * wider intermediate changes the result), double for double; then rounded to the type. */
static double mock_fop(int t, int op, double a, double b) {
  if (op == ncclMax) return a >= b || isnan(a) ? a : b;
  if (op == ncclMin) return a <= b || isnan(a) ? a : b;
  if (t == ncclFloat64) return op == ncclProd ? a * b : a + b;
  volatile float x = (float)a, y = (float)b;
  float r = op == ncclProd ? x * y : x + y;
  return mock_round(t, r);
}

static int mock_is_float(int t) {
  return t == ncclFloat16 || t == ncclFloat32 || t == ncclFloat64 || t == ncclBfloat16 ||
         t == ncclFloat8e4m3 || t == ncclFloat8e5m2;
}

static int mock_is_signed(int t) { return t == ncclInt8 || t == ncclInt32 || t == ncclInt64; }

/* Integer elements as 64-bit words: signed types sign-extended, unsigned ones zero-extended. */
static uint64_t mock_load_int(int t, const void* base, size_t i) {
  switch (t) {
    case ncclInt8: return (uint64_t)(int64_t)((const int8_t*)base)[i];
    case ncclUint8: return ((const uint8_t*)base)[i];
    case ncclInt32: return (uint64_t)(int64_t)((const int32_t*)base)[i];
    case ncclUint32: return ((const uint32_t*)base)[i];
    default: return ((const uint64_t*)base)[i];
  }
}

static void mock_store_int(int t, void* base, size_t i, uint64_t v) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: ((uint8_t*)base)[i] = (uint8_t)v; break;
    case ncclInt32:
    case ncclUint32: ((uint32_t*)base)[i] = (uint32_t)v; break;
    default: ((uint64_t*)base)[i] = v; break;
  }
}

/* The 64-bit word of an integer type's value after wrapping to the type's width. */
static uint64_t mock_wrap_int(int t, uint64_t v) {
  uint64_t loaded;
  unsigned char buf[8];
  mock_store_int(t, buf, 0, v);
  loaded = mock_load_int(t, buf, 0);
  return loaded;
}

/*
 * Element i of a reduction over the inputs in[0..n) at offset off, in rank order: op is the
 * ncclRedOp_t value (premulsum operators as ncclNumOps), scalar[p] the bytes of rank p's
 * premulsum factor. With MOCK_NCCL_DROP_LAST the last rank's input is left out (avg still
 * divides by n): a planted fault that the checks must catch for every type.
 */
static void mock_reduce_elem(int t, int op, int n, int drop_last, unsigned char* const* in,
                             size_t idx, const unsigned char (*scalar)[8], void* out, size_t i) {
  const int terms = drop_last && n > 1 ? n - 1 : n;
  if (!mock_is_float(t)) {
    const int sgn = mock_is_signed(t);
    uint64_t acc = 0;
    for (int p = 0; p < terms; p++) {
      uint64_t x = mock_load_int(t, in[p], idx);
      if (op == ncclNumOps) x *= mock_load_int(t, scalar[p], 0);
      if (p == 0) {
        acc = x;
      } else if (op == ncclProd) {
        acc *= x;
      } else if (op == ncclMax || op == ncclMin) {
        int x_above = sgn ? (int64_t)x > (int64_t)acc : x > acc;
        int x_below = sgn ? (int64_t)x < (int64_t)acc : x < acc;
        if (op == ncclMax ? x_above : x_below) acc = x;
      } else {
        acc += x;
      }
      acc = mock_wrap_int(t, acc);
    }
    if (op == ncclAvg) acc = sgn ? (uint64_t)((int64_t)acc / n) : acc / (uint64_t)n;
    mock_store_int(t, out, i, acc);
    return;
  }
  /* avg: every input times 1/n rounded to the type, then a sum, as NCCL does. */
  const double inv_n = mock_round(t, 1.0 / n);
  double acc = 0;
  for (int p = 0; p < terms; p++) {
    double x = mock_load_float(t, in[p], idx);
    if (op == ncclNumOps) x = mock_fop(t, ncclProd, x, mock_load_float(t, scalar[p], 0));
    if (op == ncclAvg) x = mock_fop(t, ncclProd, x, inv_n);
    int combine = op == ncclNumOps || op == ncclAvg ? ncclSum : op;
    acc = p == 0 ? x : mock_fop(t, combine, acc, x);
  }
  mock_store_float(t, out, i, acc);
}

/* ---- Execution ---- */

static void mock_complete(struct mock_call* c) {
  if (c->comm->rank == mock_env_int("MOCK_NCCL_HANG", -1)) {
    c->stream->hung = 1; /* stays pending for ever */
    return;
  }
  c->stream->pending--;
}

/* The bytes of a rank's premulsum factor (one element of its type). */
static void mock_scalar(const struct ncclComm* comm, int op, int type, unsigned char* out) {
  const struct mock_redop* r = &comm->ops[op - ncclNumOps];
  if (r->type != type) mock_fail("premulsum operator of type %d used with type %d", r->type, type);
  memcpy(out, r->residence == ncclScalarDevice ? r->ptr : r->value, mock_type_size(type));
}

static void mock_execute(struct mock_clique* q, struct mock_slot* s) {
  const struct mock_call* c0 = &s->call[0];
  int n = q->nranks, t = c0->type, kind = c0->kind;
  size_t c = c0->count, elt = mock_type_size(t);
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
      int rop = c0->op >= ncclNumOps ? ncclNumOps : c0->op;
      size_t off = kind == MOCK_REDUCESCATTER ? (size_t)r * c : 0;
      _Alignas(8) unsigned char scalars[MOCK_MAX_RANKS][8];
      memset(scalars, 0, sizeof scalars);
      if (rop == ncclNumOps)
        for (int p = 0; p < n; p++) mock_scalar(s->call[p].comm, s->call[p].op, t, scalars[p]);
      const int drop = mock_env_int("MOCK_NCCL_DROP_LAST", 0);
      for (size_t i = 0; i < c; i++)
        mock_reduce_elem(t, rop, n, drop, in, off + i, (const unsigned char(*)[8])scalars, out, i);
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
    size_t elt = mock_type_size(s.type);
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

/* Registration (-R): the mock moves data on the host, so a handle only has to be real enough to
 * be given back once: a small allocation that remembers the buffer. */
struct mock_reg {
  unsigned magic;
  const void* buff;
};
#define MOCK_REG_MAGIC 0x6d726567u

static ncclResult_t mock_reg_new(ncclComm_t comm, const void* buff, size_t size, void** handle) {
  if (comm == NULL || buff == NULL || size == 0 || handle == NULL) return ncclInvalidArgument;
  struct mock_reg* r = malloc(sizeof(*r));
  if (r == NULL) return ncclSystemError;
  *r = (struct mock_reg){MOCK_REG_MAGIC, buff};
  *handle = r;
  return ncclSuccess;
}

static ncclResult_t mock_reg_free(void* handle) {
  struct mock_reg* r = handle;
  if (r == NULL || r->magic != MOCK_REG_MAGIC) return ncclInvalidArgument;
  r->magic = 0;
  free(r);
  return ncclSuccess;
}

ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return mock_reg_new(comm, buff, size, handle);
}

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  (void)comm;
  return mock_reg_free(handle);
}

ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags) {
  (void)winFlags;
  return mock_reg_new(comm, buff, size, (void**)win);
}

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  (void)comm;
  return mock_reg_free(win);
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

/* MOCK_NCCL_HOSTS=FILE appends "rank R host H" per ncclCommInitRank, H the NCCL_HOSTID the
 * process has then ("-" when unset): what a library would take for its host. */
static void mock_host_trace(int rank) {
  const char* path = getenv("MOCK_NCCL_HOSTS");
  if (!path || !*path) return;
  const char* h = getenv("NCCL_HOSTID");
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "rank %d host %s\n", rank, h && *h ? h : "-");
  fclose(f);
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  mock_init_hang();
  mock_host_trace(rank);
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
    if (residence == ncclScalarHostImmediate) memcpy(r->value, scalar, mock_type_size((int)type));
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
