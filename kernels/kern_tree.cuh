/*
 * Tree AllReduce (NCCL_ALGO_TREE) with the Simple, LL and LL128 protocols: one CTA per tree channel
 * (kernels.h: kern_tree_t), NCCL's non-split form. The channel's part of the buffer goes in steps:
 *   up:    each rank folds what its children sent (their partial sums, in child order) and its
 *          own input, and sends the sum to its parent; the root writes the final result to its
 *          output;
 *   down:  the root sends its output to its children; every other rank receives the result
 *          from its parent, writes it to its output and passes it on to its children.
 * The up phase runs over all of the part before the down phase starts: both pipeline through the
 * connections' KERN_NSLOTS slots (a rank's children can be several steps ahead of it). The root
 * must not send down during its up phase: its children would take those steps only after their
 * own up phase, and with more steps than slots each would wait for the other.
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
                                          uint64_t nelem, bool post, bool pre,
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
    const uint32_t mask = src && pre ? 1u << nr : 0u;
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

/* Before an LL or LL128 step, every thread: room in every send slot (one lane of each warp with
 * lines, has_lines, reads head when the head it saw last is not enough; warp 0 also on a
 * tail-synchronized end, which moves its counters even for a step without lines), and on
 * tail-synchronized receive ends the slot whole (tail; flags unchecked). */
__device__ __forceinline__ void tree_lines_wait(const tree_ends& e, tree_ll_regs& g,
                                                bool has_lines,
                                                const volatile uint32_t* abort_flag) {
  const int nr = e.nrecv, ns = e.nsend;
  const uint32_t lane = threadIdx.x % 32;
  const bool warp0 = threadIdx.x < 32;
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) {
    if (i >= ns || !(has_lines || (e.ssync[i] && warp0))) continue;
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
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) {
    if (i >= nr || !e.rsync[i] || !(has_lines || warp0)) continue;
    bool ok = !g.aborted;
    const uint64_t want = g.rstep[i] + 1;
    const uint64_t* tail = e.rtail[i];
    if (lane == 0 && ok)
      ok = tree_poll(abort_flag, [&] { return ld_acquire_sys(tail); },
                     [&](uint64_t v) { return v >= want; });
    if (!__shfl_sync(0xffffffffu, ok, 0)) g.aborted = true;
    __syncwarp();
  }
}

/* After an LL or LL128 step's lines, every thread: on tail-synchronized send ends, once every
 * line is written, sizes (the step's line bytes), a fence and tail; then the step counters, and
 * every KERN_LL_HEAD_EVERY steps the receive ends' heads. */
__device__ __forceinline__ void tree_lines_done(const tree_ends& e, tree_ll_regs& g,
                                                uint32_t line_bytes) {
  const int nr = e.nrecv, ns = e.nsend;
  const uint32_t tid = threadIdx.x;
  bool sync_send = false;
#pragma unroll
  for (int i = 0; i < KERN_TREE_ARITY; i++) sync_send |= i < ns && e.ssync[i];
  if (sync_send) {
    __syncthreads();
    if (tid == 0 && !g.aborted) {
#pragma unroll
      for (int i = 0; i < KERN_TREE_ARITY; i++)
        if (i < ns && e.ssync[i] && e.ssizes[i] != nullptr)
          *(volatile uint32_t*)&e.ssizes[i][g.sstep[i] % KERN_NSLOTS] = line_bytes;
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

/* One LL step over every end of e: dst (NULL: none) and the send slots <- the receive slots (+)
 * pre(src) (src NULL: none), post-op when post. Every thread of the CTA, in order. */
template <class R>
__device__ __forceinline__ void tree_ll_step(const R& r, const tree_ends& e, tree_ll_regs& g,
                                             const char* src, char* dst, uint64_t nelem,
                                             bool post, bool pre,
                                             const volatile uint32_t* abort_flag) {
  const int nr = e.nrecv, ns = e.nsend;
  const uint64_t nbytes = nelem * sizeof(typename R::B);
  const uint32_t nlines = (uint32_t)((nbytes + 7) / 8);
  const uint32_t tid = threadIdx.x, lane = tid % 32, nthreads = blockDim.x;
  tree_lines_wait(e, g, (tid & ~31u) < nlines, abort_flag);
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
      const uint2 s = pre ? r.pre(in, true) : in;
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
  tree_lines_done(e, g, nlines * KERN_LL_LINE_BYTES);
}

/* One LL128 step over every end of e, as tree_ll_step (kern_prims.cuh: proto_ll128 for the
 * lines): the step's bytes in 128-byte lines of 120 data bytes and a 64-bit flag (step + 1) in
 * the last 8, in groups of 4 lines; warp w takes groups w, w + nwarps, ..., lane l bytes
 * [16 (l % 8), +16) of line 4 g + l / 8, so one warp-wide access moves 4 whole lines. A receive
 * end's line is used once its flag lane sees the flag (the warp votes: a line is used whole or
 * not at all); a tail-synchronized end's lines once tail says so. */
template <class R>
__device__ __forceinline__ void tree_ll128_step(const R& r, const tree_ends& e, tree_ll_regs& g,
                                                const char* src, char* dst, uint64_t nelem,
                                                bool post, bool pre,
                                                const volatile uint32_t* abort_flag) {
  const int nr = e.nrecv, ns = e.nsend;
  const uint64_t nbytes = nelem * sizeof(typename R::B);
  const uint32_t nlines = (uint32_t)((nbytes + KERN_LL128_LINE_DATA - 1) / KERN_LL128_LINE_DATA);
  const uint32_t ngroups = (nlines + 3) / 4;
  const uint32_t warp = threadIdx.x / 32, nwarps = blockDim.x / 32, lane = threadIdx.x % 32;
  const uint32_t part = lane % 8, sub = lane / 8;
  const bool flag_lane = part == 7;
  tree_lines_wait(e, g, warp < ngroups, abort_flag);
  for (uint32_t g0 = warp; g0 < ngroups && !g.aborted; g0 += nwarps) {
    const uint32_t line = g0 * 4 + sub;
    const bool mine = line < nlines;
    const uint64_t at = (uint64_t)line * KERN_LL128_LINE_BYTES + part * 16;
    const uint64_t off = (uint64_t)line * KERN_LL128_LINE_DATA + part * 16;
    const uint32_t room = flag_lane ? 8u : 16u;
    const uint32_t valid = !mine || off >= nbytes ? 0u
                           : nbytes - off < room  ? (uint32_t)(nbytes - off)
                                                  : room;
    uint4 in = make_uint4(0, 0, 0, 0);
    if (src != nullptr && valid) in = user_load<uint4>(src + off, valid);
    uint4 v = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (i >= nr) continue;
      const char* p = e.rbuf[i] + (g.rstep[i] % KERN_NSLOTS) * e.rslot[i] + at;
      const uint64_t flag = g.rstep[i] + 1;
      uint4 d = mine ? ld_volatile_v2u64(p) : make_uint4(0, 0, 0, 0);
      int spins = 0;
      /* Warp-uniform: every lane loops until every line of the warp is there. */
      while (!e.rsync[i] && !g.aborted) {
        const bool ok = !mine || !flag_lane || ((uint64_t)d.w << 32 | d.z) == flag;
        const bool line_ok = __shfl_sync(0xffffffffu, ok, lane | 7);
        if (__all_sync(0xffffffffu, line_ok)) break;
        if (!line_ok) d = ld_volatile_v2u64(p);
        if (++spins == KERN_ABORT_CHECK_SPINS) {
          spins = 0;
          if (__any_sync(0xffffffffu, *abort_flag != 0)) g.aborted = true;
        }
      }
      v = i == 0 ? d : r.reduce(v, d);
    }
    if (g.aborted || !mine) continue;
    if (src != nullptr) {
      const uint4 s = pre ? r.pre(in, true) : in;
      v = nr > 0 ? r.reduce(v, s) : s;
    }
    if (post) v = r.post(v);
    if (dst != nullptr && valid) user_store(dst + off, v, valid);
#pragma unroll
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (i >= ns) continue;
      const uint64_t flag = g.sstep[i] + 1;
      uint4 d = v;
      if (flag_lane) {
        d.z = (uint32_t)flag;
        d.w = (uint32_t)(flag >> 32);
      }
      st_volatile_v2u64(e.sbuf[i] + (g.sstep[i] % KERN_NSLOTS) * e.sslot[i] + at, d);
    }
  }
  tree_lines_done(e, g, nlines * KERN_LL128_LINE_BYTES);
}

/* Elements per 16-byte unit. */
template <typename B>
__device__ __forceinline__ uint64_t tree_unit() {
  return KERN_RC_VEC_BYTES / sizeof(B);
}

/* One LL or LL128 step (PROTO) over every end of e (only PROTO's step is compiled). */
template <int PROTO, class R>
__device__ __forceinline__ void tree_lines_step(const R& r, const tree_ends& e, tree_ll_regs& g,
                                                const char* src, char* dst, uint64_t nelem,
                                                bool post, bool pre,
                                                const volatile uint32_t* abort_flag) {
  if constexpr (PROTO == KERN_PROTO_LL128)
    tree_ll128_step(r, e, g, src, dst, nelem, post, pre, abort_flag);
  else
    tree_ll_step(r, e, g, src, dst, nelem, post, pre, abort_flag);
}

/* AllReduce over tree channel blockIdx.x (w.algo == NCCL_ALGO_TREE, w.proto PROTO: Simple, LL
 * or LL128). */
template <int PROTO, class R>
__device__ __forceinline__ void tree_allreduce(const R& r, const kern_coll_work_t& w) {
  static_assert(PROTO == KERN_PROTO_SIMPLE || PROTO == KERN_PROTO_LL || PROTO == KERN_PROTO_LL128,
                "the tree runs Simple, LL or LL128");
  constexpr bool lines = PROTO != KERN_PROTO_SIMPLE; /* LL, LL128: tree_lines_step */
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
    /* Up phase: the children in; the parent out (the root: its output only). */
    e.nrecv = e.nsend = 0;
    kern_conn_t* first_send = up >= 0 ? &tr->up_send : nullptr;
    for (int i = 0; i < KERN_TREE_ARITY; i++) {
      if (tr->down[i] < 0) continue;
      tree_add_recv(e, &tr->down_recv[i], PROTO);
      if (first_send == nullptr) first_send = &tr->down_send[i];
    }
    if (up >= 0) tree_add_send(e, &tr->up_send, PROTO);
    /* Every connection of the channel has Simple's slot, and LL and LL128 slots that hold at
     * least the ring's steps of them (the core checks both), so the plan's chunk is every end's
     * step. A channel without a send end (a root without children) or a buffer missing is a
     * bug of the core. */
    const uint32_t cap =
        first_send != nullptr ? kern_proto_step_capacity(PROTO, first_send->slot_bytes[PROTO]) : 0u;
    bool bufs = cap > 0 && (first_send->buff[PROTO] != nullptr);
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
  /* Up: the root folds its children's sums into its output (post-op), the others send theirs
   * up. The root sends nothing yet: its children take the result only in their down phase,
   * after all of their up phase, so a root sending in this phase would fill their slots and
   * wait for them while they wait for it (NCCL's non-split tree has the same two loops). */
  if (lines) tree_ll_begin(e, g);
  for (uint64_t base = 0; base < cnt; base += slice) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    if constexpr (lines)
      tree_lines_step<PROTO>(r, e, g, in + base * es, root ? out + base * es : nullptr, ne, root,
                             true, abort_flag);
    else
      aborted = tree_step(r, e, in + base * es, root ? out + base * es : nullptr, ne, root, true,
                          abort_flag, aborted);
  }
  if (lines) {
    tree_ll_end(e, g);
    aborted = g.aborted;
  } else {
    __syncthreads();
    if (threadIdx.x == 0) tree_ends_store(e);
  }
  /* Down: the root sends its output (final: no pre-op) to its children; the others receive the
   * result from their parent, write it and pass it on. */
  __syncthreads();
  if (threadIdx.x == 0) {
    e.nrecv = e.nsend = 0;
    if (!root) tree_add_recv(e, &tr->up_recv, PROTO);
    for (int i = 0; i < KERN_TREE_ARITY; i++)
      if (tr->down[i] >= 0) tree_add_send(e, &tr->down_send[i], PROTO);
  }
  __syncthreads();
  if (lines) {
    tree_ll_begin(e, g);
    g.aborted = aborted; /* an aborted phase skips the next one's data as well */
  }
  for (uint64_t base = 0; base < cnt; base += slice) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    const char* src = root ? out + base * es : nullptr;
    char* dst = root ? nullptr : out + base * es;
    if constexpr (lines)
      tree_lines_step<PROTO>(r, e, g, src, dst, ne, false, false, abort_flag);
    else
      aborted = tree_step(r, e, src, dst, ne, false, false, abort_flag, aborted);
  }
  if (lines) {
    tree_ll_end(e, g);
  } else {
    __syncthreads();
    if (threadIdx.x == 0) tree_ends_store(e);
  }
  __syncthreads();
}

} /* namespace kern */

#endif
