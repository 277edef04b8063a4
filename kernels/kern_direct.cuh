/*
 * OneShot AllReduce (kernels.h: KERN_ALGO_ONESHOT) over the direct connections: every rank of
 * the communicator reaches every other by p2p, and each pair has, per CTA and direction, a
 * connection with an LL buffer (kern_comm_t.direct_send / direct_recv).
 *
 * CTA g takes part g of the buffer (whole 16-byte units, as the ring splits over channels) and
 * moves it in steps of at most the connections' LL step capacity. Per step:
 *   1. room: thread q (a peer) waits until the send end to q has a free slot (head), as an LL
 *      sender does; then the CTA meets at a barrier.
 *   2. each thread takes lines l = tid, tid + nthreads, ...: loads 8 bytes of its input, applies
 *      the pre-op (avg, premulsum: once, by the rank that owns the data), writes the line
 *      {data, flag, data, flag} into the step's slot of every peer's receive buffer, then reduces
 *      line l of every rank in rank order 0..n-1 (its own value at its rank, the others polled
 *      from its receive buffers until both flags are the step's), applies the post-op and
 *      stores the result. Every rank folds the same values in the same order: the results are
 *      equal on every rank, bit for bit.
 *   3. a barrier (every line read), then thread q publishes head on the receive end from q.
 * The connections' step counters (kern_conn_t.step, head_seen) live in device memory and carry
 * over between kernels, so back-to-back calls and CUDA-graph replays never read a line of an
 * earlier call: its flag is step + 1 of that call's step (the LL rule, kernels.h).
 */
#ifndef CHOIR_KERN_DIRECT_CUH
#define CHOIR_KERN_DIRECT_CUH

#include "kern_prims.cuh"

namespace kern {

/* One peer's two ends for this CTA, loaded once by thread `peer`. */
struct direct_peer {
  char* sbuf;           /* the peer's receive buffer (LL), written here */
  const char* rbuf;     /* this rank's receive buffer from the peer (LL), polled here */
  const uint64_t* shead; /* send end: head, written by the peer */
  uint64_t* rhead;      /* receive end: head, written here */
  uint64_t sstep, rstep, head_seen;
  uint32_t sslot, rslot;
};

template <class R>
__device__ __forceinline__ void direct_allreduce(const R& r, const kern_coll_work_t& w) {
  using B = typename R::B;
  kern_comm_t* comm = w.comm;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = blockIdx.x, tid = threadIdx.x, nthreads = blockDim.x;
  __shared__ direct_peer peers[KERN_DIRECT_MAX_RANKS];
  __shared__ uint32_t step_cap;
  __shared__ bool aborted;
  const volatile uint32_t* abort_flag = comm->abort_flag;
  if (tid < (uint32_t)n && (int)tid != me) {
    const kern_conn_t* s = &comm->direct_send[tid * KERN_DIRECT_MAX_CTAS + g];
    const kern_conn_t* c = &comm->direct_recv[tid * KERN_DIRECT_MAX_CTAS + g];
    direct_peer p;
    p.sbuf = s->buff[KERN_PROTO_LL];
    p.shead = s->head;
    p.sstep = s->step;
    p.head_seen = s->head_seen;
    p.sslot = s->slot_bytes[KERN_PROTO_LL];
    p.rbuf = c->buff[KERN_PROTO_LL];
    p.rhead = c->head;
    p.rstep = c->step;
    p.rslot = c->slot_bytes[KERN_PROTO_LL];
    /* A plan naming OneShot without its connections is a bug of the core. */
    if (!s->connected || !c->connected || p.sbuf == nullptr || p.rbuf == nullptr) __trap();
    peers[tid] = p;
  }
  if (tid == 0) aborted = false;
  __syncthreads();
  if (tid == 0) {
    uint32_t slot = ~0u;
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      if (peers[q].sslot < slot) slot = peers[q].sslot;
      if (peers[q].rslot < slot) slot = peers[q].rslot;
    }
    uint32_t cap = kern_proto_step_capacity(KERN_PROTO_LL, slot == ~0u ? 0 : slot);
    if (w.chunk_bytes < cap) cap = w.chunk_bytes & ~15u;
    if (cap == 0) __trap();
    step_cap = cap;
  }
  __syncthreads();

  uint64_t off, cnt;
  kern_split_part(w.count, KERN_RC_VEC_BYTES / sizeof(B), w.nchannels, g, &off, &cnt);
  const uint64_t nbytes = cnt * sizeof(B);
  const char* in = (const char*)w.sendbuff + off * sizeof(B);
  char* out = (char*)w.recvbuff + off * sizeof(B);
  const uint32_t cap = step_cap;

  for (uint64_t base = 0; base < nbytes && !aborted; base += cap) {
    const uint64_t sb = nbytes - base < cap ? nbytes - base : cap;
    const uint32_t nlines = (uint32_t)((sb + 7) / 8);
    /* 1. Room on every send end. */
    if (tid < (uint32_t)n && (int)tid != me) {
      direct_peer& p = peers[tid];
      if (p.head_seen + KERN_NSLOTS < p.sstep + 1) {
        int spins = 0;
        uint64_t h;
        while ((h = ld_acquire_sys(p.shead)) + KERN_NSLOTS < p.sstep + 1) {
          if (++spins == KERN_ABORT_CHECK_SPINS) {
            spins = 0;
            if (*abort_flag) {
              aborted = true;
              break;
            }
          }
        }
        p.head_seen = h;
      }
    }
    __syncthreads();
    if (aborted) break;
    /* 2. Write this rank's lines to every peer, then fold every rank's. */
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      const uint64_t o = base + (uint64_t)l * 8;
      const uint32_t valid = nbytes - o < 8 ? (uint32_t)(nbytes - o) : 8u;
      const uint2 mine = r.pre(user_load<uint2>(in + o, valid), true);
      for (int q = 0; q < n; q++) {
        if (q == me) continue;
        const direct_peer& p = peers[q];
        const uint32_t f = (uint32_t)(p.sstep + 1);
        st_volatile_v4(p.sbuf + (p.sstep % KERN_NSLOTS) * p.sslot + (uint64_t)l * KERN_LL_LINE_BYTES,
                       make_uint4(mine.x, f, mine.y, f));
      }
      uint2 acc = mine;
      bool quit = false;
      for (int q = 0; q < n && !quit; q++) {
        uint2 x = mine;
        if (q != me) {
          const direct_peer& p = peers[q];
          const uint32_t f = (uint32_t)(p.rstep + 1);
          const char* at =
              p.rbuf + (p.rstep % KERN_NSLOTS) * p.rslot + (uint64_t)l * KERN_LL_LINE_BYTES;
          uint4 line = ld_volatile_v4(at);
          int spins = 0;
          while (line.y != f || line.w != f) {
            line = ld_volatile_v4(at);
            if (++spins == KERN_ABORT_CHECK_SPINS) {
              spins = 0;
              if (*abort_flag) {
                aborted = true;
                quit = true;
                break;
              }
            }
          }
          x = make_uint2(line.x, line.z);
        }
        acc = q == 0 ? x : r.reduce(acc, x);
      }
      if (quit) break;
      user_store(out + o, r.post(acc), valid);
    }
    /* 3. Every line read: publish head; every end moves one step. */
    __syncthreads();
    if (tid < (uint32_t)n && (int)tid != me) {
      direct_peer& p = peers[tid];
      if (!aborted) st_relaxed_sys(p.rhead, p.rstep + 1);
      p.rstep++;
      p.sstep++;
    }
    __syncthreads();
  }
  /* The counters carry over to the next kernel. */
  if (tid < (uint32_t)n && (int)tid != me) {
    const direct_peer& p = peers[tid];
    kern_conn_t* s = &comm->direct_send[tid * KERN_DIRECT_MAX_CTAS + g];
    kern_conn_t* c = &comm->direct_recv[tid * KERN_DIRECT_MAX_CTAS + g];
    s->step = p.sstep;
    s->head_seen = p.head_seen;
    c->step = p.rstep;
  }
}

template <int OP, int TYPE>
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_direct_kernel(const __grid_constant__ kern_coll_work_t w) {
  prof_mark_start(w.prof);
  const red<OP, TYPE> r(w.scalar_bits, w.scalar_ptr, w.divisor);
  direct_allreduce(r, w);
  prof_mark_stop(w.prof);
}

} /* namespace kern */

#endif
