/*
 * Reference test of every (protocol, primitive) pair of kernels/kern_prims.cuh, in the manner of
 * dav1d's checkasm: on one GPU, connections built by hand, every element checked on the host.
 *
 * One launch is a chain of three CTAs over two connections, up -> mid -> down:
 *   CTA 0 (up)   send(A)           when the primitive under test receives
 *   CTA 1 (mid)  the primitive under test, user input B, user output D
 *   CTA 2 (down) recv(E)           when the primitive under test sends
 * so incoming data is pre(A) and what mid sends lands in E. Expected, per element:
 *   send: E = pre(B)                       recv: D = pre(A)
 *   recvReduceSend: E = pre(A) (+) pre(B)  recvReduceCopySend: D = E = post(pre(A) (+) pre(B))
 *   recvCopySend: D = E = pre(A)           recvReduceCopy: D = post(pre(A) (+) pre(B))
 *   copySend: D = E = pre(B)               localCopy (no peer): D = post(pre(B))
 * with (+), pre and post from test/harness/ref.h (premulsum multiplies by the scalar, float avg by
 * 1/divisor, integer avg divides at the end). Float data are small integers, so every result is
 * exact and must match bit for bit (by value: -0 == +0); integer data are any bits.
 *
 * Cases: per (op, type) pair below, protocol (Simple, LL, LL128), primitive, counts {1, 7, 131,
 * about 20 KB}, layouts {aligned, unaligned: every buffer at another element offset, in place:
 * D = B}, thread counts cycling {64, 160, 512}, chunk caps cycling {4096, 256}. The protocols
 * alternate on the same connections, whose step counters keep growing (slots are reused: the
 * large counts take 11 to 80 steps of 8 slots), and after each launch both ends' step counters
 * must equal the steps the case took. Two connection sets run every case:
 *   device  buffers and counters in device memory, LL and LL128 synchronized by their flags
 *   host    buffers and counters in host-mapped memory, LL and LL128 tail-synchronized (LL128
 *           in the Simple buffer), with size FIFOs: the last step's FIFO entry must be its line
 *           bytes.
 * Guards: 64 bytes around D and E must be untouched. Abort: per protocol, a receiver with no
 * sender and a sender with no receiver (more steps than slots) must end once the abort flag is
 * set (a watchdog of 20 s fails the test if they do not).
 *
 * Exit: 0 all passed, 1 a failure, 77 (skipped) without a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "kern_prims.cuh"
#include "ref.h"

enum prim_id {
  P_SEND,
  P_RECV,
  P_RECV_REDUCE_SEND,
  P_RECV_REDUCE_COPY_SEND,
  P_RECV_COPY_SEND,
  P_RECV_REDUCE_COPY,
  P_COPY_SEND,
  P_LOCAL_COPY,
  P_NUM
};
static const char* const prim_names[P_NUM] = {"send",         "recv",           "recvReduceSend",
                                              "recvReduceCopySend", "recvCopySend",
                                              "recvReduceCopy", "copySend",     "localCopy"};

__host__ __device__ static inline bool prim_recvs(int p) {
  return p == P_RECV || p == P_RECV_REDUCE_SEND || p == P_RECV_REDUCE_COPY_SEND ||
         p == P_RECV_COPY_SEND || p == P_RECV_REDUCE_COPY;
}
__host__ __device__ static inline bool prim_sends(int p) {
  return p == P_SEND || p == P_RECV_REDUCE_SEND || p == P_RECV_REDUCE_COPY_SEND ||
         p == P_RECV_COPY_SEND || p == P_COPY_SEND;
}
static bool prim_reads_b(int p) {
  return p == P_SEND || p == P_RECV_REDUCE_SEND || p == P_RECV_REDUCE_COPY_SEND ||
         p == P_RECV_REDUCE_COPY || p == P_COPY_SEND || p == P_LOCAL_COPY;
}
static bool prim_writes_d(int p) {
  return p == P_RECV || p == P_RECV_REDUCE_COPY_SEND || p == P_RECV_COPY_SEND ||
         p == P_RECV_REDUCE_COPY || p == P_COPY_SEND || p == P_LOCAL_COPY;
}
static bool prim_posts(int p) {
  return p == P_RECV_REDUCE_COPY_SEND || p == P_RECV_REDUCE_COPY || p == P_LOCAL_COPY;
}

struct chain_args {
  kern_conn_t* up_send;
  kern_conn_t* mid_recv;
  kern_conn_t* mid_send;
  kern_conn_t* down_recv;
  const char* a;
  const char* b;
  char* d;
  char* e;
  uint64_t count;
  uint64_t scalar_bits;
  const volatile uint32_t* abort_flag;
  int divisor;
  uint32_t chunk_bytes;
  int prim;
};

template <int PROTO, int OP, int TYPE>
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    chain_kernel(const __grid_constant__ chain_args a) {
  using R = kern::red<OP, TYPE>;
  constexpr uint64_t es = sizeof(typename R::B);
  const R r(a.scalar_bits, nullptr, a.divisor);
  const bool recvs = prim_recvs(a.prim), sends = prim_sends(a.prim);
  kern_conn_t* rc = nullptr;
  kern_conn_t* sc = nullptr;
  if (blockIdx.x == 0) {
    if (!recvs) return;
    sc = a.up_send;
  } else if (blockIdx.x == 1) {
    rc = recvs ? a.mid_recv : nullptr;
    sc = sends ? a.mid_send : nullptr;
  } else {
    if (!sends) return;
    rc = a.down_recv;
  }
  kern::prims<PROTO, R> p(r, rc, sc, a.abort_flag, a.chunk_bytes);
  const uint64_t slice = p.step_elems();
  for (uint64_t base = 0; base < a.count;) {
    const uint64_t ne = a.count - base < slice ? a.count - base : slice;
    const uint64_t o = base * es;
    if (blockIdx.x == 0) {
      p.send(a.a + o, ne);
    } else if (blockIdx.x == 2) {
      p.recv(a.e + o, ne);
    } else {
      switch (a.prim) {
        case P_SEND: p.send(a.b + o, ne); break;
        case P_RECV: p.recv(a.d + o, ne); break;
        case P_RECV_REDUCE_SEND: p.recvReduceSend(a.b + o, ne); break;
        case P_RECV_REDUCE_COPY_SEND:
          p.recvReduceCopySend(a.b + o, a.d + o, ne, kern::POST_APPLY);
          break;
        case P_RECV_COPY_SEND: p.recvCopySend(a.d + o, ne); break;
        case P_RECV_REDUCE_COPY: p.recvReduceCopy(a.b + o, a.d + o, ne, kern::POST_APPLY); break;
        case P_COPY_SEND: p.copySend(a.b + o, a.d + o, ne); break;
        default: p.localCopy(a.b + o, a.d + o, ne, kern::POST_APPLY); break;
      }
    }
    base += ne;
  }
  p.finish();
}

/* The (op, type) pairs under test: every element size, pre-ops, the integer post-op, fp8. */
struct combo {
  int op, type;
  void* kernels[KERN_PROTO_NUM];
};
#define COMBO(OP, TYPE)                                                             \
  {                                                                                 \
    OP, TYPE, {                                                                     \
      (void*)chain_kernel<KERN_PROTO_LL, OP, TYPE>,                                 \
          (void*)chain_kernel<KERN_PROTO_LL128, OP, TYPE>,                          \
          (void*)chain_kernel<KERN_PROTO_SIMPLE, OP, TYPE>                          \
    }                                                                               \
  }
static const combo combos[] = {
    COMBO(KERN_OP_SUM, ncclFloat32),       COMBO(KERN_OP_AVG, ncclInt32),
    COMBO(KERN_OP_PREMULSUM, ncclFloat16), COMBO(KERN_OP_MAX, ncclFloat8e4m3),
    COMBO(KERN_OP_PROD, ncclFloat64),      COMBO(KERN_OP_MIN, ncclUint8),
    COMBO(KERN_OP_AVG, ncclBfloat16),      COMBO(KERN_OP_SUM, ncclFloat8e5m2),
};
#define NCOMBOS (int)(sizeof(combos) / sizeof(combos[0]))

#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "kern-prims: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,            \
              cudaGetErrorString(e_));                                                     \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

#define BUF_BYTES (64 * 1024)
#define GUARD 64
#define GUARD_BYTE 0xa5
#define DIVISOR 4    /* avg: a power of two, so float avg's 1/n is exact */
#define SLOT_SIMPLE 1024
#define SLOT_LL 1024
#define SLOT_LL128 2048

/* One connection: the receive end's buffers and counters, and its two kern_conn_t ends. */
struct conn_pair {
  char* buff[KERN_PROTO_NUM];
  uint64_t* head; /* head and tail, two words */
  uint32_t* sizes;
  kern_conn_t* ends; /* device: [0] send end, [1] receive end */
};

struct conn_set {
  const char* name;
  int host; /* host-mapped memory, LL/LL128 tail-synchronized, size FIFOs */
  conn_pair c[2];
};

static int failures, printed;

static void* dev_or_host_alloc(size_t bytes, int host) {
  void* p;
  if (host) {
    void* h;
    CUDA_OK(cudaHostAlloc(&h, bytes, cudaHostAllocMapped));
    memset(h, 0, bytes);
    CUDA_OK(cudaHostGetDevicePointer(&p, h, 0));
  } else {
    CUDA_OK(cudaMalloc(&p, bytes));
    CUDA_OK(cudaMemset(p, 0, bytes));
  }
  return p;
}

static void conn_make(conn_pair* cp, int host) {
  const uint32_t slots[KERN_PROTO_NUM] = {SLOT_LL, SLOT_LL128, SLOT_SIMPLE};
  for (int p = 0; p < KERN_PROTO_NUM; p++)
    cp->buff[p] = (char*)dev_or_host_alloc((size_t)KERN_NSLOTS * slots[p], host);
  if (host) cp->buff[KERN_PROTO_LL128] = NULL; /* shares the Simple buffer below */
  cp->head = (uint64_t*)dev_or_host_alloc(2 * sizeof(uint64_t), host);
  cp->sizes = host ? (uint32_t*)dev_or_host_alloc(KERN_NSLOTS * sizeof(uint32_t), 1) : NULL;
  kern_conn_t e[2];
  memset(e, 0, sizeof e);
  for (int k = 0; k < 2; k++) {
    for (int p = 0; p < KERN_PROTO_NUM; p++) {
      e[k].buff[p] = cp->buff[p];
      e[k].slot_bytes[p] = slots[p];
    }
    if (host) {
      /* Tail-synchronized LL128 may live in the Simple buffer (kernels.h): same slots. */
      e[k].buff[KERN_PROTO_LL128] = cp->buff[KERN_PROTO_SIMPLE];
      e[k].slot_bytes[KERN_PROTO_LL128] = SLOT_SIMPLE;
      e[k].tail_sync = (1u << KERN_PROTO_LL) | (1u << KERN_PROTO_LL128);
    }
    e[k].head = cp->head;
    e[k].tail = cp->head + 1;
    e[k].connected = 1;
    e[k].transport = host ? KERN_TRANSPORT_NET : KERN_TRANSPORT_P2P;
  }
  e[0].sizes = cp->sizes; /* the send end */
  CUDA_OK(cudaMalloc(&cp->ends, sizeof e));
  CUDA_OK(cudaMemcpy(cp->ends, e, sizeof e, cudaMemcpyHostToDevice));
}

static uint32_t slot_of(const conn_set* s, int proto) {
  if (proto == KERN_PROTO_LL) return SLOT_LL;
  if (proto == KERN_PROTO_LL128) return s->host ? SLOT_SIMPLE : SLOT_LL128;
  return SLOT_SIMPLE;
}

/* Line bytes a step of `bytes` data bytes occupies (what the size FIFO must say). */
static uint32_t line_bytes(int proto, uint64_t bytes) {
  if (proto == KERN_PROTO_LL) return (uint32_t)((bytes + 7) / 8 * KERN_LL_LINE_BYTES);
  if (proto == KERN_PROTO_LL128)
    return (uint32_t)((bytes + KERN_LL128_LINE_DATA - 1) / KERN_LL128_LINE_DATA *
                      KERN_LL128_LINE_BYTES);
  return (uint32_t)bytes;
}

/* Host data: A and B inputs; the scalar. */
static unsigned char *h_a, *h_b, *h_d, *h_e;
static char *d_a, *d_b, *d_d, *d_e;
static volatile uint32_t* h_abort;
static uint32_t* d_abort;

static void fill(unsigned char* buf, int t, size_t n, unsigned seed) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    ref_val v;
    if (ref_type_is_float(t)) {
      /* Small integers: every sum and product below is exact in every type. */
      const int lim = (t == REF_FP8_E4M3 || t == REF_FP8_E5M2) ? 4 : 16;
      int k = (int)(x % (2 * lim + 1)) - lim;
      v = ref_from_f64(t, (double)k);
    } else {
      v = ref_wrap(t, x);
    }
    ref_store(t, buf, i, v);
  }
}

static ref_val scalar_of(int t) { return ref_from_f64(t, ref_type_is_float(t) ? -2.0 : 3.0); }

static ref_val pre(int t, int op, ref_val x) {
  if (op == REF_PREMULSUM) return ref_apply(t, REF_PROD, x, scalar_of(t));
  if (op == REF_AVG && ref_type_is_float(t))
    return ref_apply(t, REF_PROD, x, ref_from_f64(t, 1.0 / DIVISOR));
  return x;
}
static ref_val post(int t, int op, ref_val x) {
  if (op == REF_AVG && !ref_type_is_float(t)) return ref_avg_finish(t, x, DIVISOR);
  return x;
}
static int same(int t, ref_val a, ref_val b) {
  if (ref_type_is_float(t)) return a.f == b.f || (ref_isnan(a.f) && ref_isnan(b.f));
  return a.u == b.u;
}

static ref_val expected(int t, int op, int prim, size_t i, const unsigned char* a,
                        const unsigned char* b) {
  ref_val in = pre(t, op, ref_load(t, a, i));
  ref_val x = prim_reads_b(prim) ? pre(t, op, ref_load(t, b, i)) : in;
  ref_val v;
  switch (prim) {
    case P_SEND:
    case P_COPY_SEND:
    case P_LOCAL_COPY: v = x; break;
    case P_RECV:
    case P_RECV_COPY_SEND: v = in; break;
    default: v = ref_apply(t, op, in, x); break;
  }
  if (prim_posts(prim)) v = post(t, op, v); /* these write D and E alike */
  return v;
}

enum layout { L_ALIGNED, L_UNALIGNED, L_INPLACE, NLAYOUTS };
static const char* const layout_names[NLAYOUTS] = {"aligned", "unaligned", "inplace"};

/* Checks one output buffer (h: GUARD bytes, then count elements, then GUARD bytes). */
static void check_out(const char* what, const char* ctx, int t, int op, int prim,
                      const unsigned char* h, size_t count, const unsigned char* a,
                      const unsigned char* b) {
  const size_t es = ref_type_size(t);
  for (size_t g = 0; g < GUARD; g++) {
    if (h[g] != GUARD_BYTE || h[GUARD + count * es + g] != GUARD_BYTE) {
      failures++;
      if (printed++ < 20) printf("FAIL %s: %s: guard byte overwritten\n", ctx, what);
      return;
    }
  }
  for (size_t i = 0; i < count; i++) {
    ref_val got = ref_load(t, h + GUARD, i);
    ref_val want = expected(t, op, prim, i, a, b);
    if (!same(t, got, want)) {
      failures++;
      if (printed++ < 20)
        printf("FAIL %s: %s[%zu] = %g (bits 0x%llx), expected %g (bits 0x%llx)\n", ctx, what, i,
               ref_to_f64(t, got), (unsigned long long)got.u, ref_to_f64(t, want),
               (unsigned long long)want.u);
      return;
    }
  }
}

static kern_conn_t read_end(const conn_pair* cp, int k) {
  kern_conn_t e;
  CUDA_OK(cudaMemcpy(&e, cp->ends + k, sizeof e, cudaMemcpyDeviceToHost));
  return e;
}

static uint64_t steps_of(uint64_t count, size_t es, uint32_t chunk, uint32_t slot, int proto) {
  uint64_t cap = kern_proto_step_capacity(proto, slot);
  uint64_t sb = chunk < cap ? chunk : cap;
  uint64_t slice = sb / es;
  return (count + slice - 1) / slice;
}

static void run_case(conn_set* s, const combo* cb, int proto, int prim, size_t count, int lay,
                     uint32_t nthreads, uint32_t chunk) {
  const int t = cb->type, op = cb->op;
  const size_t es = ref_type_size(t);
  /* Element offsets of A, B, D, E from their allocations (unaligned: odd multiples). */
  const size_t oa = lay == L_UNALIGNED ? 1 : 0, ob = lay == L_UNALIGNED ? 3 : 0;
  const size_t od = lay == L_UNALIGNED ? 5 : 0, oe = lay == L_UNALIGNED ? 2 : 0;
  const int inplace = lay == L_INPLACE && prim_reads_b(prim) && prim_writes_d(prim);
  char ctx[256];
  snprintf(ctx, sizeof ctx, "%s %s/%s %s %s count=%zu %s nthreads=%u chunk=%u", s->name,
           ref_op_name(op), ref_type_name(t), kern_proto_name(proto), prim_names[prim], count,
           layout_names[lay], nthreads, chunk);

  /* Inputs (regenerated per case: an in-place case overwrites B), output guards. */
  fill(h_a, t, count, (unsigned)(count * 7 + prim));
  fill(h_b, t, count, (unsigned)(count * 13 + prim + 1));
  CUDA_OK(cudaMemcpy(d_a + GUARD + oa * es, h_a, count * es, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d_d, GUARD_BYTE, BUF_BYTES));
  CUDA_OK(cudaMemset(d_e, GUARD_BYTE, BUF_BYTES));
  char* bptr = d_b + GUARD + ob * es;
  if (inplace) {
    /* D = B: B's data goes into the D buffer, between its guards. */
    bptr = d_d + GUARD + od * es;
  }
  CUDA_OK(cudaMemcpy(bptr, h_b, count * es, cudaMemcpyHostToDevice));

  const kern_conn_t up0 = read_end(&s->c[0], 0), mid0 = read_end(&s->c[1], 0);
  chain_args a;
  memset(&a, 0, sizeof a);
  a.up_send = s->c[0].ends + 0;
  a.mid_recv = s->c[0].ends + 1;
  a.mid_send = s->c[1].ends + 0;
  a.down_recv = s->c[1].ends + 1;
  a.a = d_a + GUARD + oa * es;
  a.b = bptr;
  a.d = d_d + GUARD + od * es;
  a.e = d_e + GUARD + oe * es;
  a.count = count;
  ref_val sc = scalar_of(t);
  unsigned char sbytes[8] = {0};
  ref_store(t, sbytes, 0, sc);
  memcpy(&a.scalar_bits, sbytes, sizeof sbytes);
  a.abort_flag = d_abort;
  a.divisor = DIVISOR;
  a.chunk_bytes = chunk;
  a.prim = prim;
  void* params[] = {&a};
  CUDA_OK(cudaLaunchKernel(cb->kernels[proto], dim3(3), dim3(nthreads), params, 0, 0));
  CUDA_OK(cudaDeviceSynchronize());

  if (prim_writes_d(prim)) {
    CUDA_OK(cudaMemcpy(h_d, d_d + od * es, 2 * GUARD + count * es, cudaMemcpyDeviceToHost));
    check_out("D", ctx, t, op, prim, h_d, count, h_a, h_b);
  }
  if (prim_sends(prim)) {
    CUDA_OK(cudaMemcpy(h_e, d_e + oe * es, 2 * GUARD + count * es, cudaMemcpyDeviceToHost));
    check_out("E", ctx, t, op, prim, h_e, count, h_a, h_b);
  }
  /* Step counters: both ends of each connection agree and moved by the case's steps. */
  const uint32_t slot = slot_of(s, proto);
  const uint64_t n = steps_of(count, es, chunk, slot, proto);
  const kern_conn_t up1 = read_end(&s->c[0], 0), mr = read_end(&s->c[0], 1);
  const kern_conn_t ms = read_end(&s->c[1], 0), dn = read_end(&s->c[1], 1);
  const uint64_t want_up = up0.step + (prim_recvs(prim) ? n : 0);
  const uint64_t want_mid = mid0.step + (prim_sends(prim) ? n : 0);
  if (up1.step != want_up || mr.step != want_up || ms.step != want_mid || dn.step != want_mid) {
    failures++;
    if (printed++ < 20)
      printf("FAIL %s: steps up=%llu/%llu mid=%llu/%llu, expected %llu and %llu\n", ctx,
             (unsigned long long)up1.step, (unsigned long long)mr.step,
             (unsigned long long)ms.step, (unsigned long long)dn.step,
             (unsigned long long)want_up, (unsigned long long)want_mid);
  }
  /* Size FIFO (host set): the last step's entry holds its line bytes. */
  if (s->host && prim_sends(prim) && n > 0) {
    const uint64_t cap = kern_proto_step_capacity(proto, slot);
    const uint64_t step_b = chunk < cap ? chunk : cap;
    const uint64_t slice = step_b / es;
    const uint64_t last = (count - (n - 1) * slice) * es;
    uint32_t got;
    CUDA_OK(cudaMemcpy(&got, s->c[1].sizes + (ms.step - 1) % KERN_NSLOTS, sizeof got,
                       cudaMemcpyDeviceToHost));
    if (got != line_bytes(proto, last)) {
      failures++;
      if (printed++ < 20)
        printf("FAIL %s: size FIFO says %u, expected %u\n", ctx, got, line_bytes(proto, last));
    }
  }
}

/* Abort: a receiver with nobody sending, and a sender with nobody receiving (more steps than
 * slots), on fresh connections, must end once the flag is set. */
static void run_abort(const combo* cb, int proto) {
  conn_set s;
  s.name = "abort";
  s.host = 0;
  conn_make(&s.c[0], 0);
  conn_make(&s.c[1], 0);
  const size_t es = ref_type_size(cb->type);
  for (int prim = P_SEND; prim <= P_RECV; prim++) {
    chain_args a;
    memset(&a, 0, sizeof a);
    /* Only mid runs: the chain's other CTA is given no part (recv: up never sends). */
    a.up_send = NULL;
    a.mid_recv = s.c[0].ends + 1;
    a.mid_send = s.c[1].ends + 0;
    a.down_recv = NULL;
    a.b = d_b + GUARD;
    a.d = d_d + GUARD;
    a.count = (size_t)(KERN_NSLOTS + 4) * 256 / es;
    a.abort_flag = d_abort;
    a.divisor = DIVISOR;
    a.chunk_bytes = 256;
    a.prim = prim;
    *h_abort = 1;
    /* Grid of 2: CTA 0 (up) has no connection (its send is a local no-op without a source),
     * CTA 1 (mid) sends into a connection nobody drains, or waits on one nobody fills. */
    void* params[] = {&a};
    cudaStream_t st;
    CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CUDA_OK(cudaLaunchKernel(cb->kernels[proto], dim3(2), dim3(128), params, 0, st));
    const time_t t0 = time(NULL);
    cudaError_t q;
    while ((q = cudaStreamQuery(st)) == cudaErrorNotReady && time(NULL) - t0 < 20) {
    }
    if (q != cudaSuccess) {
      failures++;
      printf("FAIL abort %s %s: the kernel did not end after the abort flag was set (%s)\n",
             kern_proto_name(proto), prim_names[prim], cudaGetErrorString(q));
      printf("kern-prims: stopping: a hung kernel keeps the GPU\n");
      exit(1);
    }
    CUDA_OK(cudaStreamDestroy(st));
    *h_abort = 0;
  }
}

int main(void) {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("kern-prims: skipped: no CUDA device\n");
    return 77;
  }
  CUDA_OK(cudaMalloc(&d_a, BUF_BYTES));
  CUDA_OK(cudaMalloc(&d_b, BUF_BYTES));
  CUDA_OK(cudaMalloc(&d_d, BUF_BYTES));
  CUDA_OK(cudaMalloc(&d_e, BUF_BYTES));
  h_a = (unsigned char*)malloc(BUF_BYTES);
  h_b = (unsigned char*)malloc(BUF_BYTES);
  h_d = (unsigned char*)malloc(BUF_BYTES);
  h_e = (unsigned char*)malloc(BUF_BYTES);
  void* hab;
  CUDA_OK(cudaHostAlloc(&hab, sizeof(uint32_t), cudaHostAllocMapped));
  h_abort = (volatile uint32_t*)hab;
  *h_abort = 0;
  CUDA_OK(cudaHostGetDevicePointer((void**)&d_abort, hab, 0));

  conn_set sets[2];
  sets[0].name = "device";
  sets[0].host = 0;
  sets[1].name = "host";
  sets[1].host = 1;
  for (int k = 0; k < 2; k++) {
    conn_make(&sets[k].c[0], sets[k].host);
    conn_make(&sets[k].c[1], sets[k].host);
  }

  const uint32_t threads[] = {64, 160, 512};
  const uint32_t chunks[] = {4096, 256};
  int ncases = 0;
  for (int ci = 0; ci < NCOMBOS; ci++) {
    const combo* cb = &combos[ci];
    const size_t es = ref_type_size(cb->type);
    const size_t counts[] = {1, 7, 131, 20000 / es + 3};
    for (int lay = 0; lay < NLAYOUTS; lay++)
      for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
        for (int prim = 0; prim < P_NUM; prim++)
          for (int proto = 0; proto < KERN_PROTO_NUM; proto++)
            for (int si = 0; si < 2; si++) {
              run_case(&sets[si], cb, proto, prim, counts[k], lay, threads[ncases % 3],
                       chunks[(ncases / 3) % 2]);
              ncases++;
            }
  }
  for (int proto = 0; proto < KERN_PROTO_NUM; proto++) run_abort(&combos[0], proto);

  printf("kern-prims: %d cases, %d failures\n", ncases, failures);
  return failures ? 1 : 0;
}
