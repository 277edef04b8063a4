/*
 * Tree AllReduce (NCCL_ALGO_TREE) with the Simple and LL protocols: one CTA per tree channel
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
 * An LL step over several ends is the ring's LL step (kern_prims.cuh: proto_ll) with more ends:
 * each thread owns lines t, t + nthreads, ... of every end; it polls its line of each receive end
 * (in child order) until that end's flag is there, folds them and its input, and writes the
 * result to the output and, with each send end's flag, to every send slot. No CTA barrier per step
 * but where an end is tail-synchronized (the network: sizes, fence, tail after a barrier) and
 * every KERN_LL_HEAD_EVERY steps (head of every receive end). Every thread keeps the ends' step
 * counters in registers (they agree); thread 0 writes them back at the end of the phase.
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
  uint64_t shead0[KERN_TREE_ARITY]; /* LL: the send end's head_seen (a lower bound of head) */
  bool rsync[KERN_TREE_ARITY];      /* LL: the end synchronizes by tail (kern_conn_t.tail_sync) */
  bool ssync[KERN_TREE_ARITY];
  int nrecv, nsend;
};

/* Thread 0: a receive or send end of protocol proto into the phase's ends (e in shared memory). */
__device__ __forceinline__ void tree_add_recv(tree_ends& e, kern_conn_t* c, int proto) {
  const int i = e.nrecv++;
  e.rconn[i] = c;
  e.rbuf[i] = c->buff[proto];
  e.rtail[i] = c->tail;
  e.rhead[i] = c->head;
  e.rslot[i] = c->slot_bytes[proto];
  e.rstep[i] = c->step;
  e.rsync[i] = proto != KERN_PROTO_SIMPLE && ((c->tail_sync >> proto) & 1u);
}
__device__ __forceinline__ void tree_add_send(tree_ends& e, kern_conn_t* c, int proto) {
  const int i = e.nsend++;
  e.sconn[i] = c;
  e.sbuf[i] = c->buff[proto];
  e.stail[i] = c->tail;
  e.shead[i] = c->head;
  e.ssizes[i] = c->sizes;
  e.sslot[i] = c->slot_bytes[proto];
  e.sstep[i] = c->step;
  e.shead0[i] = proto != KERN_PROTO_SIMPLE ? c->head_seen : 0;
  e.ssync[i] = proto != KERN_PROTO_SIMPLE && ((c->tail_sync >> proto) & 1u);
}

/* Thread 0, after the phase's last step (and a CTA barrier): the Simple step counters back. */
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

/* LL: one thread's copy of the phase's step counters and of the heads its warp saw, per end
 * (registers: every loop over the ends is unrolled, so they are indexed by constants only). */
struct tree_ll_regs {
  uint64_t rstep[KERN_TREE_ARITY];
  uint64_t sstep[KERN_TREE_ARITY];
  uint64_t head[KERN_TREE_ARITY];
  uint32_t nsteps; /* steps of this phase so far (head publication) */
  bool aborted;
};

/* Every thread, after the barrier that follows the phase's tree_add_* calls. */
__device__ __forceinline__ void tree_ll_begin(const tree_ends& e, tree_ll_regs& g) {
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) {
    g.rstep[i] = i < e.nrecv ? e.rstep[i] : 0;
    g.sstep[i] = i < e.nsend ? e.sstep[i] : 0;
    g.head[i] = i < e.nsend ? e.shead0[i] : 0;
  }
  g.nsteps = 0;
  g.aborted = false;
}

/* Every thread, after the phase's last LL step: receive ends' heads published, counters and the
 * heads seen back to the connections. */
__device__ __forceinline__ void tree_ll_end(const tree_ends& e, const tree_ll_regs& g) {
  __syncthreads();
  if (threadIdx.x == 0) {
#pragma unroll
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (i < e.nrecv) {
        if (!g.aborted) st_relaxed_sys(e.rhead[i], g.rstep[i]);
        e.rconn[i]->step = g.rstep[i];
      }
      if (i < e.nsend) {
        e.sconn[i]->step = g.sstep[i];
        e.sconn[i]->head_seen = g.head[i];
      }
    }
  }
}

/* One LL step over every end of e: dst (NULL: none) and the send slots <- the receive slots (+)
 * pre(src) (src NULL: none), post-op when post. Every thread of the CTA, in order. */
template <class R>
__device__ __forceinline__ void tree_ll_step(const R& r, const tree_ends& e, tree_ll_regs& g,
                                             const char* src, char* dst, uint64_t nelem,
                                             bool post, const volatile uint32_t* abort_flag) {
  const int nr = e.nrecv, ns = e.nsend;
  const uint64_t nbytes = nelem * sizeof(typename R::B);
  const uint32_t nlines = (uint32_t)((nbytes + 7) / 8);
  const uint32_t tid = threadIdx.x, lane = tid % 32, nthreads = blockDim.x;
  const bool warp_lines = (tid & ~31u) < nlines;
  const bool warp0 = tid < 32;
  /* Room in every send slot (one lane of each warp with lines reads head when the head it saw
   * last is not enough; warp 0 also on a tail-synchronized end, which moves its counters even
   * for a step without lines). */
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) {
    if (i >= ns || !(warp_lines || (e.ssync[i] && warp0))) continue;
    if (g.head[i] + KERN_NSLOTS >= g.sstep[i] + 1) continue;
    bool ok = !g.aborted;
    uint64_t h = g.head[i];
    const uint64_t want = g.sstep[i] + 1;
    const uint64_t* head = e.shead[i];
    if (lane == 0 && ok)
      ok = tree_poll(abort_flag, [&] { return h = ld_acquire_sys(head); },
                     [&](uint64_t v) { return v + KERN_NSLOTS >= want; });
    g.head[i] = __shfl_sync(0xffffffffu, h, 0);
    if (!__shfl_sync(0xffffffffu, ok, 0)) g.aborted = true;
  }
  /* Tail-synchronized receive ends: the slot is whole once tail says so (flags unchecked). */
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) {
    if (i >= nr || !e.rsync[i] || !(warp_lines || warp0)) continue;
    bool ok = !g.aborted;
    const uint64_t want = g.rstep[i] + 1;
    const uint64_t* tail = e.rtail[i];
    if (lane == 0 && ok)
      ok = tree_poll(abort_flag, [&] { return ld_acquire_sys(tail); },
                     [&](uint64_t v) { return v >= want; });
    if (!__shfl_sync(0xffffffffu, ok, 0)) g.aborted = true;
    __syncwarp();
  }
  /* Warp-uniform trips: lanes past the last line stay with their warp, predicated off. */
  for (uint32_t w0 = tid - lane; w0 < nlines && !g.aborted; w0 += nthreads) {
    const uint32_t l = w0 + lane;
    const bool mine = l < nlines;
    const uint64_t off = (uint64_t)l * 8;
    const uint32_t valid = !mine ? 0u : nbytes - off < 8 ? (uint32_t)(nbytes - off) : 8u;
    uint2 in = make_uint2(0, 0);
    if (src != nullptr && mine) in = user_load<uint2>(src + off, valid);
    uint2 v = make_uint2(0, 0);
#pragma unroll
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (i >= nr) continue;
      uint4 line = make_uint4(0, 0, 0, 0);
      if (mine) {
        const char* p = e.rbuf[i] + kern_ll_line_at(g.rstep[i], e.rslot[i], l);
        const uint32_t flag = (uint32_t)(g.rstep[i] + 1);
        line = ld_volatile_v4(p);
        int spins = 0;
        while (!e.rsync[i] && !g.aborted && (line.y != flag || line.w != flag)) {
          line = ld_volatile_v4(p);
          if (++spins == KERN_ABORT_CHECK_SPINS) {
            spins = 0;
            if (*abort_flag) g.aborted = true;
          }
        }
      }
      const uint2 d = make_uint2(line.x, line.z);
      v = i == 0 ? d : r.reduce(v, d);
    }
    /* Every lane of the warp is here (the trip count is the warp's). */
    if (__any_sync(0xffffffffu, g.aborted)) g.aborted = true;
    if (g.aborted || !mine) continue;
    if (src != nullptr) {
      const uint2 s = r.pre(in, true);
      v = nr > 0 ? r.reduce(v, s) : s;
    }
    if (post) v = r.post(v);
    if (dst != nullptr) user_store(dst + off, v, valid);
#pragma unroll
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (i >= ns) continue;
      const uint32_t flag = (uint32_t)(g.sstep[i] + 1);
      st_volatile_v4(e.sbuf[i] + kern_ll_line_at(g.sstep[i], e.sslot[i], l),
                     make_uint4(v.x, flag, v.y, flag));
    }
  }
  /* Tail-synchronized send ends: after every line is written, sizes, a fence and tail. */
  bool sync_send = false;
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) sync_send |= i < ns && e.ssync[i];
  if (sync_send) {
    __syncthreads();
    if (tid == 0 && !g.aborted) {
#pragma unroll
      for (int i = 0; i < KERN_TREE_ARITY; i++)
        if (i < ns && e.ssync[i] && e.ssizes[i] != nullptr)
          *(volatile uint32_t*)&e.ssizes[i][g.sstep[i] % KERN_NSLOTS] =
              nlines * KERN_LL_LINE_BYTES;
      fence_acq_rel_sys();
#pragma unroll
      for (int i = 0; i < KERN_TREE_ARITY; i++)
        if (i < ns && e.ssync[i]) st_relaxed_sys(e.stail[i], g.sstep[i] + 1);
    }
  }
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) {
    g.sstep[i] += i < ns;
    g.rstep[i] += i < nr;
  }
  g.nsteps++;
  if (nr > 0 && g.nsteps % KERN_LL_HEAD_EVERY == 0) {
    __syncthreads();
    if (tid == 0 && !g.aborted) {
#pragma unroll
      for (int i = 0; i < KERN_TREE_ARITY; i++)
        if (i < nr) st_relaxed_sys(e.rhead[i], g.rstep[i]);
    }
  }
}

/* Elements per 16-byte unit. */
template <typename B>
__device__ __forceinline__ uint64_t tree_unit() {
  return KERN_RC_VEC_BYTES / sizeof(B);
}

/* AllReduce over tree channel blockIdx.x (w.algo == NCCL_ALGO_TREE, w.proto PROTO: Simple or
 * LL). */
template <int PROTO, class R>
__device__ __forceinline__ void tree_allreduce(const R& r, const kern_coll_work_t& w) {
  static_assert(PROTO == KERN_PROTO_SIMPLE || PROTO == KERN_PROTO_LL, "the tree runs Simple or LL");
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
      tree_add_recv(e, &tr->down_recv[i], PROTO);
      if (up < 0) tree_add_send(e, &tr->down_send[i], PROTO);
    }
    if (up >= 0) tree_add_send(e, &tr->up_send, PROTO);
    /* Every connection of the channel has Simple's slot, and an LL slot that holds at least the
     * ring's LL step (the core checks both), so the plan's chunk is every end's step. A channel
     * without a send end (a root without children) or a buffer missing is a bug of the core. */
    const uint32_t cap = e.nsend > 0 ? kern_proto_step_capacity(PROTO, e.sslot[0]) : 0u;
    bool bufs = cap > 0;
    for (int i = 0; i < e.nrecv; i++) bufs = bufs && e.rbuf[i] != nullptr;
    for (int i = 0; i < e.nsend; i++) bufs = bufs && e.sbuf[i] != nullptr;
    if (!bufs) __trap();
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
  tree_ll_regs g;
  if (PROTO == KERN_PROTO_LL) tree_ll_begin(e, g);
  for (uint64_t base = 0; base < cnt; base += slice) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    if (PROTO == KERN_PROTO_LL)
      tree_ll_step(r, e, g, in + base * es, root ? out + base * es : nullptr, ne, root,
                   abort_flag);
    else
      aborted = tree_step(r, e, in + base * es, root ? out + base * es : nullptr, ne, root,
                          abort_flag, aborted);
  }
  if (PROTO == KERN_PROTO_LL) {
    tree_ll_end(e, g);
    aborted = g.aborted;
  } else {
    __syncthreads();
    if (threadIdx.x == 0) tree_ends_store(e);
  }
  if (!root) {
    __syncthreads();
    if (threadIdx.x == 0) {
      e.nrecv = e.nsend = 0;
      tree_add_recv(e, &tr->up_recv, PROTO);
      for (int i = 0; i < KERN_TREE_ARITY; i++)
        if (tr->down[i] >= 0) tree_add_send(e, &tr->down_send[i], PROTO);
    }
    __syncthreads();
    if (PROTO == KERN_PROTO_LL) {
      tree_ll_begin(e, g);
      g.aborted = aborted; /* an aborted phase skips the next one's data as well */
    }
    for (uint64_t base = 0; base < cnt; base += slice) {
      const uint64_t ne = cnt - base < slice ? cnt - base : slice;
      if (PROTO == KERN_PROTO_LL)
        tree_ll_step(r, e, g, nullptr, out + base * es, ne, false, abort_flag);
      else
        aborted = tree_step(r, e, nullptr, out + base * es, ne, false, abort_flag, aborted);
    }
    if (PROTO == KERN_PROTO_LL) {
      tree_ll_end(e, g);
    } else {
      __syncthreads();
      if (threadIdx.x == 0) tree_ends_store(e);
    }
  }
  __syncthreads();
}

} /* namespace kern */

#endif
