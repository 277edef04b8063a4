/*
 * Tree AllReduce (NCCL_ALGO_TREE) with the Simple protocol: one CTA per tree channel
 * (kernels.h: kern_tree_t), NCCL's non-split form. The channel's part of the buffer goes in steps:
 *   up:    each rank folds what its children sent (their partial sums, in child order) and its
 *          own input, and sends the sum to its parent; the root writes the final result to its
 *          output and sends it to its children in the same step;
 *   down:  every other rank receives the result from its parent, writes it to its output and
 *          passes it on to its children.
 * The up phase runs over all of the part before the down phase starts: both pipeline through the
 * connections' KERN_NSLOTS slots (a rank's children can be several steps ahead of it).
 *
 * A step with several connection ends is Simple's step over all of them: one thread per end waits
 * (tail of a receive end, head of a send end), the CTA reduce-copies from every receive slot and
 * the input into the output and every send slot, then one thread publishes (sizes, a system fence
 * and tail for the send ends; head for the receive ends). The reduce-copy takes two destinations
 * at most: the rest are copied from the step's first destination (the output, or a receive slot
 * that has the final data), after a CTA barrier, so every child gets exactly the bytes the
 * output has.
 *
 * Pre-op and post-op as for the ring (kern_prims.cuh): the user's input is the one pre-op source
 * (each rank's exactly once, at its own node); the root's step applies the post-op (integer avg),
 * and what travels down is final.
 */
#ifndef CHOIR_KERN_TREE_CUH
#define CHOIR_KERN_TREE_CUH

#include "kern_prims.cuh"

namespace kern {

/* The ends one phase uses, fixed for the phase: in shared memory (written by thread 0). */
struct tree_ends {
  const char* rbuf[KERN_TREE_ARITY];
  const uint64_t* rtail[KERN_TREE_ARITY];
  uint64_t* rhead[KERN_TREE_ARITY];
  char* sbuf[KERN_TREE_ARITY];
  uint64_t* stail[KERN_TREE_ARITY];
  const uint64_t* shead[KERN_TREE_ARITY];
  uint32_t* ssizes[KERN_TREE_ARITY];
  kern_conn_t* rconn[KERN_TREE_ARITY]; /* for the step counters at the start and end */
  kern_conn_t* sconn[KERN_TREE_ARITY];
  uint64_t rstep[KERN_TREE_ARITY];
  uint64_t sstep[KERN_TREE_ARITY];
  uint32_t rslot[KERN_TREE_ARITY];
  uint32_t sslot[KERN_TREE_ARITY];
  int nrecv, nsend;
};

/* Thread 0: a receive or send end into the phase's ends (e in shared memory). */
__device__ __forceinline__ void tree_add_recv(tree_ends& e, kern_conn_t* c) {
  const int i = e.nrecv++;
  e.rconn[i] = c;
  e.rbuf[i] = c->buff[KERN_PROTO_SIMPLE];
  e.rtail[i] = c->tail;
  e.rhead[i] = c->head;
  e.rslot[i] = c->slot_bytes[KERN_PROTO_SIMPLE];
  e.rstep[i] = c->step;
}
__device__ __forceinline__ void tree_add_send(tree_ends& e, kern_conn_t* c) {
  const int i = e.nsend++;
  e.sconn[i] = c;
  e.sbuf[i] = c->buff[KERN_PROTO_SIMPLE];
  e.stail[i] = c->tail;
  e.shead[i] = c->head;
  e.ssizes[i] = c->sizes;
  e.sslot[i] = c->slot_bytes[KERN_PROTO_SIMPLE];
  e.sstep[i] = c->step;
}

/* Thread 0, after the phase's last step (and a CTA barrier): the step counters back. */
__device__ __forceinline__ void tree_ends_store(const tree_ends& e) {
  for (int i = 0; i < e.nrecv; i++) e.rconn[i]->step = e.rstep[i];
  for (int i = 0; i < e.nsend; i++) e.sconn[i]->step = e.sstep[i];
}

/* Polls until done(read()); false when the communicator was aborted meanwhile. */
template <class Read, class Done>
__device__ __forceinline__ bool tree_poll(const volatile uint32_t* abort_flag, Read read,
                                          Done done) {
  int spins = 0;
  while (!done(read())) {
    if (++spins == KERN_ABORT_CHECK_SPINS) {
      spins = 0;
      if (*abort_flag) return false;
    }
  }
  return true;
}

/* One Simple step over every end of e: dst (NULL: none) and the send slots <- the receive slots
 * (+) pre(src) (src NULL: none), post-op when post. Every thread of the CTA, in order. Returns the
 * CTA's aborted state (once aborted, the data of every later step is skipped). */
template <class R>
__device__ __forceinline__ bool tree_step(const R& r, tree_ends& e, const char* src, char* dst,
                                          uint64_t nelem, bool post,
                                          const volatile uint32_t* abort_flag, bool aborted) {
  using B = typename R::B;
  const int nr = e.nrecv, ns = e.nsend;
  bool bad = false;
  if (!aborted) {
    const int t = (int)threadIdx.x;
    if (t < nr) {
      const uint64_t want = e.rstep[t] + 1;
      const uint64_t* tail = e.rtail[t];
      bad = !tree_poll(abort_flag, [&] { return ld_acquire_sys(tail); },
                       [&](uint64_t v) { return v >= want; });
    } else if (t < nr + ns) {
      const uint64_t want = e.sstep[t - nr] + 1;
      const uint64_t* head = e.shead[t - nr];
      bad = !tree_poll(abort_flag, [&] { return ld_acquire_sys(head); },
                       [&](uint64_t v) { return v + KERN_NSLOTS >= want; });
    }
  }
  aborted = __syncthreads_or(bad || aborted) != 0;
  const uint32_t warp = threadIdx.x / 32, nwarps = blockDim.x / 32, lane = threadIdx.x % 32;
  if (!aborted && nelem > 0) {
    /* Register arrays are indexed with constants only (no local memory): sources are the
     * receive slots in order, then src; destinations dst (if any), then the send slots. */
    auto rptr = [&](int i) -> const char* {
      return i < nr ? e.rbuf[i] + (e.rstep[i] % KERN_NSLOTS) * e.rslot[i] : nullptr;
    };
    auto sptr = [&](int i) -> char* {
      return i < ns ? e.sbuf[i] + (e.sstep[i] % KERN_NSLOTS) * e.sslot[i] : nullptr;
    };
    auto dptr = [&](int j) -> char* { return dst ? (j == 0 ? dst : sptr(j - 1)) : sptr(j); };
    rc_ptrs p;
#pragma unroll
    for (int k = 0; k < KERN_RC_MAX_SRCS; k++)
      p.src[k] = k < KERN_TREE_ARITY && k < nr ? rptr(k) : (k == nr ? src : nullptr);
    const int nsrcs = nr + (src ? 1 : 0);
    const uint32_t mask = src ? 1u << nr : 0u;
    const int nd = (dst ? 1 : 0) + ns;
    p.dst[0] = dptr(0);
    p.dst[1] = dptr(1);
    const int first = nd < KERN_RC_MAX_DSTS ? nd : KERN_RC_MAX_DSTS;
    if (nsrcs > 0 && first > 0)
      rc_run(r, p, nelem, nsrcs, first, mask, post, warp, nwarps, lane);
    static_assert(1 + KERN_TREE_ARITY <= 2 * KERN_RC_MAX_DSTS, "two passes cover every end");
    if (nd > KERN_RC_MAX_DSTS) {
      /* The rest from the first destination, now final: a plain copy. */
      __syncthreads();
      rc_ptrs q;
#pragma unroll
      for (int k = 0; k < KERN_RC_MAX_SRCS; k++) q.src[k] = nullptr;
      q.src[0] = dptr(0);
      q.dst[0] = dptr(2);
      q.dst[1] = dptr(3);
      rc_run(r, q, nelem, 1, nd - KERN_RC_MAX_DSTS, 0u, false, warp, nwarps, lane);
    }
  }
  __syncthreads();
  if (threadIdx.x == 0 && !aborted) {
    if (ns > 0) {
      for (int i = 0; i < ns; i++)
        if (e.ssizes[i] != nullptr)
          *(volatile uint32_t*)&e.ssizes[i][e.sstep[i] % KERN_NSLOTS] =
              (uint32_t)(nelem * sizeof(B));
      fence_acq_rel_sys();
      for (int i = 0; i < ns; i++) st_relaxed_sys(e.stail[i], e.sstep[i] + 1);
    }
    for (int i = 0; i < nr; i++) st_relaxed_sys(e.rhead[i], e.rstep[i] + 1);
  }
  /* The counters live in shared memory: thread 0 advances them once every thread has read
   * them for this step (the barrier above) and before any reads them for the next (below). */
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int i = 0; i < nr; i++) e.rstep[i]++;
    for (int i = 0; i < ns; i++) e.sstep[i]++;
  }
  __syncthreads();
  return aborted;
}

/* Elements per 16-byte unit. */
template <typename B>
__device__ __forceinline__ uint64_t tree_unit() {
  return KERN_RC_VEC_BYTES / sizeof(B);
}

/* AllReduce over tree channel blockIdx.x (w.algo == NCCL_ALGO_TREE, w.proto Simple). */
template <class R>
__device__ __forceinline__ void tree_allreduce(const R& r, const kern_coll_work_t& w) {
  using B = typename R::B;
  constexpr uint64_t es = sizeof(B);
  kern_comm_t* comm = w.comm;
  kern_tree_t* tr = &comm->trees[blockIdx.x];
  const volatile uint32_t* abort_flag = comm->abort_flag;
  __shared__ tree_ends e;
  __shared__ int sh_up;
  __shared__ uint64_t sh_step_bytes;
  if (threadIdx.x == 0) {
    const int up = tr->up;
    /* Up phase: the children in; the parent out, or at the root the children out. */
    e.nrecv = e.nsend = 0;
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (tr->down[i] < 0) continue;
      tree_add_recv(e, &tr->down_recv[i]);
      if (up < 0) tree_add_send(e, &tr->down_send[i]);
    }
    if (up >= 0) tree_add_send(e, &tr->up_send);
    /* Every connection of the channel has the same Simple slot (the core checks it). A channel
     * without a send end (a root without children) or a buffer missing is a bug of the core. */
    const uint32_t cap =
        e.nsend > 0 ? kern_proto_step_capacity(KERN_PROTO_SIMPLE, e.sslot[0]) : 0u;
    if (cap == 0) __trap();
    sh_step_bytes = w.chunk_bytes < cap ? w.chunk_bytes : cap;
    sh_up = up;
  }
  __syncthreads();
  const uint64_t unit = tree_unit<B>();
  uint64_t off, cnt;
  kern_split_part(w.count, unit, (uint32_t)w.nchannels, blockIdx.x, &off, &cnt);
  uint64_t slice = sh_step_bytes / es;
  slice = slice / unit * unit;
  if (slice == 0) slice = unit;
  const char* in = (const char*)w.sendbuff + off * es;
  char* out = (char*)w.recvbuff + off * es;
  const bool root = sh_up < 0;
  bool aborted = false;
  for (uint64_t base = 0; base < cnt; base += slice) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    aborted = tree_step(r, e, in + base * es, root ? out + base * es : nullptr, ne, root,
                        abort_flag, aborted);
  }
  __syncthreads();
  if (threadIdx.x == 0) tree_ends_store(e);
  if (!root) {
    __syncthreads();
    if (threadIdx.x == 0) {
      e.nrecv = e.nsend = 0;
      tree_add_recv(e, &tr->up_recv);
      for (int i = 0; i < KERN_TREE_ARITY; i++)
        if (tr->down[i] >= 0) tree_add_send(e, &tr->down_send[i]);
    }
    __syncthreads();
    for (uint64_t base = 0; base < cnt; base += slice) {
      const uint64_t ne = cnt - base < slice ? cnt - base : slice;
      aborted = tree_step(r, e, nullptr, out + base * es, ne, false, abort_flag, aborted);
    }
    __syncthreads();
    if (threadIdx.x == 0) tree_ends_store(e);
  }
  __syncthreads();
}

} /* namespace kern */

#endif
