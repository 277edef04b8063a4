/*
 * The primitives layer: what every algorithm of the data path is written against.
 *
 * kern::prims<PROTO, R> is one CTA's view of a receive connection end and a send connection end
 * (either may be absent) and of the operator R. Every thread of the CTA constructs it, calls the
 * same primitives in the same order (each call is one step of each connection it uses), and calls
 * finish() at the end. The primitives, nelem elements each (at most step_elems()):
 *
 *   send(src)                        peer <- pre(src)
 *   recv(dst)                        dst <- incoming
 *   recvReduceSend(src)              peer <- incoming (+) pre(src)
 *   recvReduceCopySend(src, dst, p)  dst, peer <- p(incoming (+) pre(src))
 *   recvCopySend(dst)                dst, peer <- incoming
 *   recvReduceCopy(src, dst, p)      dst <- p(incoming (+) pre(src))
 *   copySend(src, dst)               dst, peer <- pre(src)
 *   localCopy(src, dst, p)           dst <- p(pre(src))          (no peer)
 *
 * src is always the user's input, so it always gets the pre-op (premulsum's scalar, float avg's
 * 1/n): the user's data is scaled exactly once; incoming data is a partial result, already scaled.
 * p is POST_APPLY only where the step produces final results (integer avg divides there). A NULL
 * src or dst drops that operand (in-place Broadcast passes no dst at the root).
 *
 * Missing peers are handled here, once: a primitive's receive half is skipped when the CTA has no
 * receive end, its send half when it has no send end, and what remains runs as a local
 * reduce-copy (or nothing, when it has no source or no destination). So a ring algorithm written
 * for n ranks is also correct for one rank, where no connection exists.
 *
 * Protocols (kernels.h has the line formats). Each is a policy below with its contract: what a
 * step is, how the sender waits for room, writes and publishes, how the receiver waits and reads.
 * The connection's step counter is shared by every protocol: head and tail hold absolute step
 * counts, so a connection may run Simple, then LL, then Simple.
 *
 * Abort: every polling loop looks at *abort_flag once per KERN_ABORT_CHECK_SPINS polls and gives
 * up when it is set; the thread then skips the data of every later step but keeps calling (and
 * reaching the barriers), so the CTA ends.
 */
#ifndef CHOIR_KERN_PRIMS_CUH
#define CHOIR_KERN_PRIMS_CUH

#include "kern_reduce_copy.cuh"

namespace kern {

/* ---- memory operations ---- */

__device__ __forceinline__ uint64_t ld_acquire_sys(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_relaxed_sys(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void fence_acq_rel_sys() {
  asm volatile("fence.acq_rel.sys;" ::: "memory");
}

/* LL: one line, 16 bytes, in one access. */
__device__ __forceinline__ uint4 ld_volatile_v4(const void* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}
__device__ __forceinline__ void st_volatile_v4(void* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}

/* LL128: a lane's 16 bytes of a line; a warp's 32 lanes cover 4 whole lines in one access. */
__device__ __forceinline__ uint4 ld_volatile_v2u64(const void* p) {
  uint64_t a, b;
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
  return make_uint4((uint32_t)a, (uint32_t)(a >> 32), (uint32_t)b, (uint32_t)(b >> 32));
}
__device__ __forceinline__ void st_volatile_v2u64(void* p, uint4 v) {
  const uint64_t a = (uint64_t)v.y << 32 | v.x, b = (uint64_t)v.w << 32 | v.z;
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

/* ---- user buffers at any element-aligned address ---- */

/* Word k (0..3) of a pack, with k a compile-time constant once loops are unrolled. */
template <typename V>
__device__ __forceinline__ uint32_t pack_word(const V& v, int k) {
  if constexpr (std::is_same_v<V, uint2>) return k == 0 ? v.x : v.y;
  else return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
template <typename V>
__device__ __forceinline__ void pack_set_word(V& v, int k, uint32_t w) {
  if constexpr (std::is_same_v<V, uint2>) {
    if (k == 0) v.x = w; else v.y = w;
  } else {
    if (k == 0) v.x = w; else if (k == 1) v.y = w; else if (k == 2) v.z = w; else v.w = w;
  }
}

/* The first `valid` bytes (a multiple of the element size, <= sizeof(V)) at p, the rest zero.
 * Never touches memory past p + valid. One vector access when p is aligned to it and the pack
 * is whole, else words where they are aligned, else bytes (fp16/int8 buffers at odd places). */
template <typename V>
__device__ __forceinline__ V user_load(const char* p, uint32_t valid) {
  constexpr uint32_t N = sizeof(V);
  const uintptr_t a = (uintptr_t)p;
  if (valid == N && a % N == 0) return __ldcg((const V*)p);
  V v;
  pack_set_word(v, 0, 0u);
#pragma unroll
  for (int k = 1; k < (int)(N / 4); k++) pack_set_word(v, k, 0u);
  if (valid == 0) return v;
#pragma unroll
  for (int k = 0; k < (int)(N / 4); k++) {
    const uint32_t o = 4u * k;
    uint32_t w = 0;
    if (o + 4 <= valid && (a + o) % 4 == 0) {
      w = __ldcg((const unsigned int*)(p + o));
    } else {
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (o + j < valid) w |= (uint32_t)__ldcg((const unsigned char*)(p + o + j)) << (8 * j);
    }
    pack_set_word(v, k, w);
  }
  return v;
}

/* Stores the first `valid` bytes of v at p (as user_load reads them). */
template <typename V>
__device__ __forceinline__ void user_store(char* p, const V& v, uint32_t valid) {
  constexpr uint32_t N = sizeof(V);
  const uintptr_t a = (uintptr_t)p;
  if (valid == N && a % N == 0) {
    __stcg((V*)p, v);
    return;
  }
#pragma unroll
  for (int k = 0; k < (int)(N / 4); k++) {
    const uint32_t o = 4u * k;
    const uint32_t w = pack_word(v, k);
    if (o + 4 <= valid && (a + o) % 4 == 0) {
      __stcg((unsigned int*)(p + o), w);
    } else {
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (o + j < valid) __stcg((unsigned char*)(p + o + j), (unsigned char)(w >> (8 * j)));
    }
  }
}

/* ---- connection ends and the primitives' state ---- */

/* Polls between two looks at the abort flag (host memory: a look costs a PCIe round trip). */
#define KERN_ABORT_CHECK_SPINS 4096
/* LL and LL128 receivers publish head once per this many steps of a kernel, counted from its
 * first step (and at its end): a CTA barrier every few steps instead of every step. The sender
 * may run KERN_NSLOTS steps ahead of the published head, so the lag (at most this minus one
 * unpublished steps) leaves it room. Counted per kernel, not by the connection's step counter:
 * by the counter, whether a short operation (2 ranks: 2 steps) paid a barrier in the middle
 * depended on how many steps the connection had made before it. */
#define KERN_LL_HEAD_EVERY 4

/* Whether a step's result is final (integer avg divides it by the rank count). */
enum post_op_t { POST_NONE = 0, POST_APPLY = 1 };

/* Which connection ends a primitive uses. */
enum { PRIM_RECV = 1, PRIM_SEND = 2 };

/* The connection ends, fixed for the CTA's life: in shared memory (written by thread 0 in the
 * constructor), so that registers stay for the copy loops. */
struct prim_conns {
  const char* rbuf;
  uint64_t* rhead;
  const uint64_t* rtail;
  char* sbuf;
  uint64_t* stail;
  const uint64_t* shead;
  uint32_t* ssizes;
  uint64_t step_bytes; /* data bytes per step at most (every rank computes the same) */
  const volatile uint32_t* abort_flag;
  uint64_t shead0; /* LL, LL128: the send end's head_seen at construction (a lower bound) */
  uint32_t rslot, sslot;
  bool has_recv, has_send;
  bool rsync, ssync; /* the protocol synchronizes by tail on this end (kern_conn_t.tail_sync) */
};

/* One thread's state: every thread executes every step, so each keeps the step counters in
 * registers (they agree), and thread 0 writes them back in finish(). */
struct prim_state {
  const prim_conns* c;
  uint64_t rstep, sstep;
  uint64_t rstep0;     /* rstep when the kernel started (head publication counts from it) */
  uint64_t head_cache; /* sender (LL, LL128): the last head this warp read */
  bool aborted;        /* this thread saw the abort flag (Simple: every thread) */
};

/* Polls *flag-like value `read()` until `done(value)`; false (and sets st.aborted) if the
 * communicator was aborted meanwhile. */
template <class Read, class Done>
__device__ __forceinline__ bool poll(prim_state& st, Read read, Done done) {
  int spins = 0;
  while (!done(read())) {
    if (++spins == KERN_ABORT_CHECK_SPINS) {
      spins = 0;
      if (*st.c->abort_flag) {
        st.aborted = true;
        return false;
      }
    }
  }
  return true;
}

/* The operands of one step (the rest is in prim_state). */
struct step_ops {
  const char* src; /* user input (gets the pre-op), or NULL */
  char* dst;       /* user output, or NULL */
  uint64_t nelem;
  post_op_t post;
};

/* A step with no connection: a plain reduce-copy over the CTA's warps. */
template <class R>
__device__ __forceinline__ void local_step(const R& r, const step_ops& o) {
  if (o.src == nullptr || o.dst == nullptr || o.nelem == 0) return;
  rc_ptrs p;
#pragma unroll
  for (int k = 0; k < KERN_RC_MAX_SRCS; k++) p.src[k] = nullptr;
  p.src[0] = o.src;
  p.dst[0] = o.dst;
  p.dst[1] = nullptr;
  rc_run(r, p, o.nelem, 1, 1, 1u, o.post == POST_APPLY, threadIdx.x / 32, blockDim.x / 32,
         threadIdx.x % 32);
}

/*
 * SIMPLE. A step moves up to slot_bytes of plain data through slot (step % KERN_NSLOTS).
 *   sender:   one thread waits until head + KERN_NSLOTS >= step + 1 (the slot is free); all
 *             threads reduce-copy into the slot; after a CTA barrier one thread writes the byte
 *             count to sizes (net), fences (system scope) and publishes tail = step + 1.
 *   receiver: one thread waits until tail >= step + 1; all threads read the slot; after a CTA
 *             barrier one thread publishes head = step + 1.
 * Two CTA barriers per step: one after the waits, one before publishing.
 */
struct proto_simple {
  static constexpr int id = KERN_PROTO_SIMPLE;

  template <class R>
  __device__ __forceinline__ static void step(const R& r, prim_state& st, const step_ops& o,
                                              bool recv, bool send) {
    bool bad = false;
    if (!st.aborted) {
      if (recv && threadIdx.x == 0)
        bad = !poll(st, [&] { return ld_acquire_sys(st.c->rtail); },
                    [&](uint64_t t) { return t >= st.rstep + 1; });
      if (send && threadIdx.x == 32)
        bad = !poll(st, [&] { return ld_acquire_sys(st.c->shead); },
                    [&](uint64_t h) { return h + KERN_NSLOTS >= st.sstep + 1; });
    }
    st.aborted = __syncthreads_or(bad || st.aborted) != 0;
    if (!st.aborted && o.nelem > 0) {
      rc_ptrs p;
#pragma unroll
      for (int k = 0; k < KERN_RC_MAX_SRCS; k++) p.src[k] = nullptr;
      const char* rptr = recv ? st.c->rbuf + (st.rstep % KERN_NSLOTS) * st.c->rslot : nullptr;
      char* sptr = send ? st.c->sbuf + (st.sstep % KERN_NSLOTS) * st.c->sslot : nullptr;
      p.src[0] = recv ? rptr : o.src;
      p.src[1] = o.src;
      p.dst[0] = o.dst ? o.dst : sptr;
      p.dst[1] = sptr;
      const int nsrcs = (recv ? 1 : 0) + (o.src ? 1 : 0);
      const int ndsts = (o.dst ? 1 : 0) + (send ? 1 : 0);
      const uint32_t mask = o.src ? (recv ? 2u : 1u) : 0u;
      if (nsrcs > 0 && ndsts > 0)
        rc_run(r, p, o.nelem, nsrcs, ndsts, mask, o.post == POST_APPLY, threadIdx.x / 32,
               blockDim.x / 32, threadIdx.x % 32);
    }
    __syncthreads();
    if (threadIdx.x == 0 && !st.aborted) {
      if (send) {
        if (st.c->ssizes != nullptr)
          *(volatile uint32_t*)&st.c->ssizes[st.sstep % KERN_NSLOTS] =
              (uint32_t)(o.nelem * sizeof(typename R::B));
        fence_acq_rel_sys();
        st_relaxed_sys(st.c->stail, st.sstep + 1);
      }
      if (recv) st_relaxed_sys(st.c->rhead, st.rstep + 1);
    }
    st.rstep += recv;
    st.sstep += send;
  }
};

/* Sender side of LL and LL128, one warp (all lanes together): waits until the step's slot is
 * free, i.e. head + KERN_NSLOTS >= step + 1, reading head only when the last value this warp read
 * does not already show it. */
__device__ __forceinline__ void warp_wait_send(prim_state& st) {
  if (st.head_cache + KERN_NSLOTS >= st.sstep + 1) return; /* the same in every lane */
  bool ok = !st.aborted;
  uint64_t h = st.head_cache;
  if (threadIdx.x % 32 == 0 && ok)
    ok = poll(st, [&] { return h = ld_acquire_sys(st.c->shead); },
              [&](uint64_t v) { return v + KERN_NSLOTS >= st.sstep + 1; });
  st.head_cache = __shfl_sync(0xffffffffu, h, 0);
  if (!__shfl_sync(0xffffffffu, ok, 0)) st.aborted = true;
}

/* Receiver side of a tail-synchronized LL or LL128 end, one warp: waits until tail >= step + 1
 * (one lane polls; __syncwarp orders the other lanes' reads after its acquire). */
__device__ __forceinline__ void warp_wait_tail(prim_state& st) {
  bool ok = !st.aborted;
  if (threadIdx.x % 32 == 0 && ok)
    ok = poll(st, [&] { return ld_acquire_sys(st.c->rtail); },
              [&](uint64_t t) { return t >= st.rstep + 1; });
  if (!__shfl_sync(0xffffffffu, ok, 0)) st.aborted = true;
  __syncwarp();
}

/* The end of an LL or LL128 step. Sender on a tail-synchronized end: after a CTA barrier (every
 * line written), one thread writes the line bytes to sizes, fences and publishes tail. Receiver:
 * head is published every KERN_LL_HEAD_EVERY steps, after a CTA barrier (every line read). */
__device__ __forceinline__ void ll_step_end(prim_state& st, bool recv, bool send,
                                            uint32_t line_bytes) {
  if (send && st.c->ssync) {
    __syncthreads();
    if (threadIdx.x == 0 && !st.aborted) {
      if (st.c->ssizes != nullptr)
        *(volatile uint32_t*)&st.c->ssizes[st.sstep % KERN_NSLOTS] = line_bytes;
      fence_acq_rel_sys();
      st_relaxed_sys(st.c->stail, st.sstep + 1);
    }
  }
  st.sstep += send;
  if (recv) {
    st.rstep++;
    if ((st.rstep - st.rstep0) % KERN_LL_HEAD_EVERY == 0) {
      __syncthreads();
      if (threadIdx.x == 0 && !st.aborted) st_relaxed_sys(st.c->rhead, st.rstep);
    }
  }
}

/*
 * LL. A step of b data bytes is ceil(b / 8) lines of 16 bytes {data0, flag, data1, flag} at the
 * start of slot (step % KERN_NSLOTS), flag = (uint32_t)(step + 1). Thread t owns lines t,
 * t + nthreads, ... on both ends, so no CTA barrier is needed per step.
 *   sender:   each warp with lines waits for room (warp_wait_send), then each thread writes its
 *             lines, data and flag in one 16-byte volatile store. No fence, no tail, unless the
 *             end is tail-synchronized (ll_step_end).
 *   receiver: each thread loads its input first (a step with a source: the load's latency
 *             hides in the wait), then polls its lines with 16-byte volatile loads until both
 *             flags are the step's (tail-synchronized end: its warp waits for tail first, flags
 *             unchecked); head as ll_step_end says.
 * Every sender starts from the head its connection last saw (kern_conn_t.head_seen, a lower
 * bound: head only grows) and reads head only when that leaves no room.
 */
struct proto_ll {
  static constexpr int id = KERN_PROTO_LL;

  template <class R>
  __device__ __forceinline__ static void step(const R& r, prim_state& st, const step_ops& o,
                                              bool recv, bool send) {
    constexpr int U = R::heavy ? 2 : 4; /* lines in flight per thread (fewer: no spills) */
    const uint64_t nbytes = o.nelem * sizeof(typename R::B);
    const uint32_t nlines = (uint32_t)((nbytes + 7) / 8);
    const uint32_t nthreads = blockDim.x, tid = threadIdx.x;
    const bool warp_has_lines = (tid & ~31u) < nlines;
    /* On a tail-synchronized end a step without lines still moves the counters the proxy reads
     * (sizes[slot], tail, head): warp 0 waits for the slot and for tail as for any step, or a
     * sender would overwrite a size the proxy has not read yet and a receiver would publish head
     * past what arrived (LL over the network hung on all_reduce of 1..7 bytes without this). */
    const bool warp0 = tid < 32;
    if (send && (warp_has_lines || (st.c->ssync && warp0))) warp_wait_send(st);
    if (recv && st.c->rsync && (warp_has_lines || warp0)) warp_wait_tail(st);
    const char* rslot = st.c->rbuf + (st.rstep % KERN_NSLOTS) * st.c->rslot;
    char* sslot = st.c->sbuf + (st.sstep % KERN_NSLOTS) * st.c->sslot;
    const uint32_t rflag = (uint32_t)(st.rstep + 1), sflag = (uint32_t)(st.sstep + 1);
    /* Warp-uniform trips: a lane past the last line stays in the loop with its warp (its lines
     * predicated off) instead of running ahead alone, and the warp leaves together. Measured on
     * one H200, 2 ranks sharing it, CUDA-graph all_reduce, LL: 4.35-4.48 us at 8 B and 5.5-5.6
     * at 32..256 B with it, 4.94 and 5.9 without (same build otherwise). */
    const uint32_t lane = tid % 32;
    for (uint32_t w0 = tid - lane; w0 < nlines && !st.aborted; w0 += U * nthreads) {
      const uint32_t l0 = w0 + lane;
      uint4 line[U];
      uint2 in[U]; /* this rank's input: loaded before the wait, so its latency hides in it */
#pragma unroll
      for (int u = 0; u < U; u++) {
        line[u] = make_uint4(0, 0, 0, 0);
        in[u] = make_uint2(0, 0);
        const uint32_t l = l0 + u * nthreads;
        if (o.src && l < nlines) {
          const uint64_t off = (uint64_t)l * 8;
          in[u] = user_load<uint2>(o.src + off, nbytes - off < 8 ? (uint32_t)(nbytes - off) : 8u);
        }
      }
      if (recv) {
#pragma unroll
        for (int u = 0; u < U; u++)
          if (l0 + u * nthreads < nlines)
            line[u] = ld_volatile_v4(rslot + (uint64_t)(l0 + u * nthreads) * KERN_LL_LINE_BYTES);
        if (!st.c->rsync) {
          if (nlines <= nthreads) {
            /* At most one line per thread (line[0], l0): the warp polls together, as LL128's
             * does (a lane reloads its line while the flags are not the step's, and the warp
             * votes). With lanes spinning in loops of their own, all_reduce of 32..256 B took
             * 5.67 us instead of 4.73 with 2 ranks sharing one H200, 13.3 instead of 10.1 at
             * 64..512 B with 4 (CUDA graphs). */
            int spins = 0;
            for (;;) {
              const bool ok = l0 >= nlines || (line[0].y == rflag && line[0].w == rflag);
              if (__all_sync(0xffffffffu, ok)) break;
              if (!ok) line[0] = ld_volatile_v4(rslot + (uint64_t)l0 * KERN_LL_LINE_BYTES);
              if (++spins == KERN_ABORT_CHECK_SPINS) {
                spins = 0;
                if (__any_sync(0xffffffffu, *st.c->abort_flag != 0)) st.aborted = true;
                if (st.aborted) break;
              }
            }
          } else {
#pragma unroll
            for (int u = 0; u < U; u++) {
              const uint32_t l = l0 + u * nthreads;
              if (l >= nlines) continue;
              int spins = 0;
              while (!st.aborted && (line[u].y != rflag || line[u].w != rflag)) {
                line[u] = ld_volatile_v4(rslot + (uint64_t)l * KERN_LL_LINE_BYTES);
                if (++spins == KERN_ABORT_CHECK_SPINS) {
                  spins = 0;
                  if (*st.c->abort_flag) st.aborted = true;
                }
              }
            }
            /* Every lane of the warp is here (the trip count is the warp's). */
            if (__any_sync(0xffffffffu, st.aborted)) st.aborted = true;
          }
          if (st.aborted) break;
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const uint32_t l = l0 + u * nthreads;
        if (l >= nlines) continue;
        const uint64_t off = (uint64_t)l * 8;
        const uint32_t valid = nbytes - off < 8 ? (uint32_t)(nbytes - off) : 8u;
        uint2 v = make_uint2(line[u].x, line[u].z);
        if (o.src) {
          const uint2 s = r.pre(in[u], true);
          v = recv ? r.reduce(v, s) : s;
        }
        if (o.post == POST_APPLY) v = r.post(v);
        if (o.dst) user_store(o.dst + off, v, valid);
        if (send)
          st_volatile_v4(sslot + (uint64_t)l * KERN_LL_LINE_BYTES,
                         make_uint4(v.x, sflag, v.y, sflag));
      }
    }
    ll_step_end(st, recv, send, nlines * KERN_LL_LINE_BYTES);
  }
};

/*
 * LL128. A step of b data bytes is ceil(b / 120) lines of 128 bytes at the start of slot
 * (step % KERN_NSLOTS): data bytes [120 i, 120 i + 120) of the step in line i's first 120 bytes,
 * flag = (uint64_t)(step + 1) in its last 8. Lines go in groups of 4 (512 bytes); warp w owns
 * groups w, w + nwarps, ...: lane l holds bytes [16 (l % 8), +16) of line 4 g + l / 8, so one
 * warp-wide 16-byte access moves 4 whole lines, the flag lane's (l % 8 == 7) included.
 *   sender:   each warp with groups waits for room (warp_wait_send), then stores its lines. No
 *             fence, no tail, unless tail-synchronized (ll_step_end).
 *   receiver: each warp loads its lines and re-loads a line until its flag lane sees the step's
 *             flag (the warp votes before any lane uses data: a line is used whole or not at
 *             all, which holds where the link keeps 128-byte stores whole); tail-synchronized:
 *             its warp waits for tail first, flags unchecked. Head as ll_step_end says.
 */
struct proto_ll128 {
  static constexpr int id = KERN_PROTO_LL128;

  template <class R>
  __device__ __forceinline__ static void step(const R& r, prim_state& st, const step_ops& o,
                                              bool recv, bool send) {
    constexpr int U = R::heavy ? 1 : 2; /* groups in flight per warp (fewer: no spills) */
    const uint64_t nbytes = o.nelem * sizeof(typename R::B);
    const uint32_t nlines = (uint32_t)((nbytes + KERN_LL128_LINE_DATA - 1) / KERN_LL128_LINE_DATA);
    const uint32_t ngroups = (nlines + 3) / 4;
    const uint32_t warp = threadIdx.x / 32, nwarps = blockDim.x / 32, lane = threadIdx.x % 32;
    const uint32_t part = lane % 8, sub = lane / 8;
    const bool flag_lane = part == 7;
    /* A step without lines on a tail-synchronized end: warp 0 still waits (see proto_ll). */
    if (send && (warp < ngroups || (st.c->ssync && warp == 0))) warp_wait_send(st);
    if (recv && st.c->rsync && (warp < ngroups || warp == 0)) warp_wait_tail(st);
    const char* rslot = st.c->rbuf + (st.rstep % KERN_NSLOTS) * st.c->rslot;
    char* sslot = st.c->sbuf + (st.sstep % KERN_NSLOTS) * st.c->sslot;
    const uint64_t rflag = st.rstep + 1, sflag = st.sstep + 1;
    for (uint32_t g0 = warp; g0 < ngroups && !st.aborted; g0 += U * nwarps) {
      uint4 v[U];
      if (recv) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          const uint32_t line = (g0 + u * nwarps) * 4 + sub;
          if (line < nlines)
            v[u] = ld_volatile_v2u64(rslot + (uint64_t)line * KERN_LL128_LINE_BYTES + part * 16);
        }
        if (!st.c->rsync) {
          int spins = 0;
          for (;;) {
            bool mine_ok = true; /* this lane's line is complete (or not there) */
#pragma unroll
            for (int u = 0; u < U; u++) {
              const uint32_t line = (g0 + u * nwarps) * 4 + sub;
              const bool ok = line >= nlines || !flag_lane ||
                              ((uint64_t)v[u].w << 32 | v[u].z) == rflag;
              /* The line's verdict comes from its flag lane. */
              if (!__shfl_sync(0xffffffffu, ok, lane | 7)) {
                mine_ok = false;
                v[u] = ld_volatile_v2u64(rslot + (uint64_t)line * KERN_LL128_LINE_BYTES +
                                         part * 16);
              }
            }
            if (__all_sync(0xffffffffu, mine_ok)) break;
            if (++spins == KERN_ABORT_CHECK_SPINS) {
              spins = 0;
              if (__any_sync(0xffffffffu, *st.c->abort_flag != 0)) {
                st.aborted = true;
                break;
              }
            }
          }
          if (st.aborted) break;
        }
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        const uint32_t line = (g0 + u * nwarps) * 4 + sub;
        if (line >= nlines) continue;
        const uint64_t off = (uint64_t)line * KERN_LL128_LINE_DATA + part * 16;
        const uint32_t room = flag_lane ? 8u : 16u;
        const uint32_t valid = off >= nbytes ? 0u : nbytes - off < room ? (uint32_t)(nbytes - off)
                                                                        : room;
        uint4 d = recv ? v[u] : make_uint4(0, 0, 0, 0);
        if (o.src) {
          const uint4 s = r.pre(user_load<uint4>(o.src + off, valid), true);
          d = recv ? r.reduce(d, s) : s;
        }
        if (o.post == POST_APPLY) d = r.post(d);
        if (o.dst && valid) user_store(o.dst + off, d, valid);
        if (send) {
          if (flag_lane) {
            d.z = (uint32_t)sflag;
            d.w = (uint32_t)(sflag >> 32);
          }
          st_volatile_v2u64(sslot + (uint64_t)line * KERN_LL128_LINE_BYTES + part * 16, d);
        }
      }
    }
    ll_step_end(st, recv, send, nlines * KERN_LL128_LINE_BYTES);
  }
};

template <int PROTO>
struct proto_of;
template <>
struct proto_of<KERN_PROTO_SIMPLE> {
  using type = proto_simple;
};
template <>
struct proto_of<KERN_PROTO_LL> {
  using type = proto_ll;
};
template <>
struct proto_of<KERN_PROTO_LL128> {
  using type = proto_ll128;
};

/* The profiler's kernel-channel timestamps (kernels.h: kern_prof_rec_t), by thread 0 of the
 * CTA: start when it begins, stop once every thread is done (after prims::finish()'s barrier).
 * Nothing but a test of a kernel argument when the launch has no records. */
__device__ __forceinline__ uint64_t global_timer() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
/* The CTA's start or stop time into record `at` (the CTA's index in the work), written by the
 * thread that is `writer`. */
__device__ __forceinline__ void prof_mark_start_at(kern_prof_rec_t* recs, unsigned at,
                                                   bool writer) {
  if (recs != nullptr && writer) *(volatile uint64_t*)&recs[at].start = global_timer();
}
__device__ __forceinline__ void prof_mark_stop_at(kern_prof_rec_t* recs, unsigned at,
                                                  bool writer) {
  if (recs != nullptr && writer) {
    __threadfence_system(); /* the host sees stop only after start and the work's writes */
    *(volatile uint64_t*)&recs[at].stop = global_timer();
  }
}
/* The same for a work that starts at CTA 0, by the thread that is `writer` (thread 0 by
 * default). */
__device__ __forceinline__ void prof_mark_start_by(kern_prof_rec_t* recs, bool writer) {
  prof_mark_start_at(recs, blockIdx.x, writer);
}
__device__ __forceinline__ void prof_mark_stop_by(kern_prof_rec_t* recs, bool writer) {
  prof_mark_stop_at(recs, blockIdx.x, writer);
}
__device__ __forceinline__ void prof_mark_start(kern_prof_rec_t* recs) {
  prof_mark_start_by(recs, threadIdx.x == 0);
}
__device__ __forceinline__ void prof_mark_stop(kern_prof_rec_t* recs) {
  prof_mark_stop_by(recs, threadIdx.x == 0);
}

template <int PROTO, class R>
class prims {
 public:
  using B = typename R::B;
  using P = typename proto_of<PROTO>::type;

  /* Every thread of the CTA, with the same arguments. recv_conn / send_conn: this CTA's ends
   * (NULL: none); `connected` false: neither is used, though both may point at readable (unset)
   * connections, so that a caller need not wait for a load to decide. chunk_bytes: the work's
   * cap on data bytes per step (a multiple of 16). One prims per CTA at a time: a later one may
   * be made after the earlier one's finish().
   * Thread 0 reads every field it needs from both ends in one batch of independent loads (no
   * load waits for another: a send end starts from head_seen instead of reading *head), so the
   * CTA pays one memory round trip here, not three. */
  __device__ __forceinline__ prims(const R& r, kern_conn_t* recv_conn, kern_conn_t* send_conn,
                                   const volatile uint32_t* abort_flag, uint32_t chunk_bytes,
                                   bool connected = true)
      : r_(r),
        rconn_(connected ? recv_conn : nullptr),
        sconn_(connected ? send_conn : nullptr) {
    __shared__ prim_conns sh;
    if (threadIdx.x == 0) {
      prim_conns c;
      c.abort_flag = abort_flag;
      c.rbuf = nullptr;
      c.sbuf = nullptr;
      c.rhead = nullptr;
      c.rtail = nullptr;
      c.stail = nullptr;
      c.shead = nullptr;
      c.ssizes = nullptr;
      c.rslot = c.sslot = 0;
      c.rsync = c.ssync = false;
      c.shead0 = 0;
      if (recv_conn) {
        c.rbuf = recv_conn->buff[PROTO];
        c.rhead = recv_conn->head;
        c.rtail = recv_conn->tail;
        c.rslot = recv_conn->slot_bytes[PROTO];
        c.rsync = PROTO != KERN_PROTO_SIMPLE && ((recv_conn->tail_sync >> PROTO) & 1u);
      }
      if (send_conn) {
        c.sbuf = send_conn->buff[PROTO];
        c.stail = send_conn->tail;
        c.shead = send_conn->head;
        c.ssizes = send_conn->sizes;
        c.sslot = send_conn->slot_bytes[PROTO];
        c.ssync = PROTO != KERN_PROTO_SIMPLE && ((send_conn->tail_sync >> PROTO) & 1u);
        /* LL and LL128 senders start from the head their end last saw (a lower bound). */
        if (PROTO != KERN_PROTO_SIMPLE) c.shead0 = send_conn->head_seen;
      }
      c.has_recv = connected && recv_conn != nullptr;
      c.has_send = connected && send_conn != nullptr;
      if (c.has_recv || c.has_send) {
        uint32_t slot = c.has_recv ? c.rslot : 0;
        if (c.has_send) slot = slot == 0 || c.sslot < slot ? c.sslot : slot;
        const uint32_t cap = kern_proto_step_capacity(PROTO, slot);
        /* A plan naming a protocol the connection was not made with is a bug of the core:
         * going on would spin forever or write through a NULL buffer. */
        if (cap == 0 || (c.has_recv && c.rbuf == nullptr) || (c.has_send && c.sbuf == nullptr))
          __trap();
        c.step_bytes = chunk_bytes < cap ? chunk_bytes : cap;
      } else {
        c.step_bytes = ~0ull >> 8; /* no peer: everything is one local step */
      }
      sh = c;
    }
    st_.c = &sh;
    /* Loaded by every thread alongside thread 0's batch (unused when not connected). */
    const uint64_t rstep = recv_conn ? recv_conn->step : 0;
    const uint64_t sstep = send_conn ? send_conn->step : 0;
    st_.rstep = rconn_ ? rstep : 0;
    st_.rstep0 = st_.rstep;
    st_.sstep = sconn_ ? sstep : 0;
    st_.aborted = false;
    __syncthreads();
    st_.head_cache = sh.shead0;
  }

  /* Elements one step moves at most: a multiple of 16 bytes' worth. */
  __device__ __forceinline__ uint64_t step_elems() const { return st_.c->step_bytes / sizeof(B); }

  __device__ __forceinline__ void send(const void* src, uint64_t n) {
    step<PRIM_SEND>({(const char*)src, nullptr, n, POST_NONE});
  }
  __device__ __forceinline__ void recv(void* dst, uint64_t n) {
    step<PRIM_RECV>({nullptr, (char*)dst, n, POST_NONE});
  }
  __device__ __forceinline__ void recvReduceSend(const void* src, uint64_t n) {
    step<PRIM_RECV | PRIM_SEND>({(const char*)src, nullptr, n, POST_NONE});
  }
  __device__ __forceinline__ void recvReduceCopySend(const void* src, void* dst, uint64_t n,
                                                     post_op_t post) {
    step<PRIM_RECV | PRIM_SEND>({(const char*)src, (char*)dst, n, post});
  }
  __device__ __forceinline__ void recvCopySend(void* dst, uint64_t n) {
    step<PRIM_RECV | PRIM_SEND>({nullptr, (char*)dst, n, POST_NONE});
  }
  __device__ __forceinline__ void recvReduceCopy(const void* src, void* dst, uint64_t n,
                                                 post_op_t post) {
    step<PRIM_RECV>({(const char*)src, (char*)dst, n, post});
  }
  __device__ __forceinline__ void copySend(const void* src, void* dst, uint64_t n) {
    step<PRIM_SEND>({(const char*)src, (char*)dst, n, POST_NONE});
  }
  __device__ __forceinline__ void localCopy(const void* src, void* dst, uint64_t n,
                                            post_op_t post) {
    local_step(r_, {(const char*)src, (char*)dst, n, post});
  }

  /* Every thread, once, after the last primitive: publishes what the receive end consumed and
   * writes both ends' step counters back to the connections. */
  __device__ __forceinline__ void finish() {
    __syncthreads();
    if (threadIdx.x == 0) {
      if (rconn_) {
        if (PROTO != KERN_PROTO_SIMPLE && !st_.aborted) st_relaxed_sys(st_.c->rhead, st_.rstep);
        rconn_->step = st_.rstep;
      }
      if (sconn_) {
        sconn_->step = st_.sstep;
        /* Thread 0's warp waits at every LL/LL128 send step that has lines: its cache is the
         * newest head the CTA saw (Simple keeps none: its head_seen stays 0, unused). */
        if (PROTO != KERN_PROTO_SIMPLE) sconn_->head_seen = st_.head_cache;
      }
    }
  }

 private:
  template <int F>
  __device__ __forceinline__ void step(const step_ops& o) {
    const bool recv = (F & PRIM_RECV) && st_.c->has_recv;
    const bool send = (F & PRIM_SEND) && st_.c->has_send;
    if (!recv && !send) {
      /* No peer: what is left is a local reduce-copy (one rank, or a CTA without that end). */
      local_step(r_, o);
      return;
    }
    P::step(r_, st_, o, recv, send);
  }

  const R& r_;
  kern_conn_t* rconn_;
  kern_conn_t* sconn_;
  prim_state st_;
};

} /* namespace kern */

#endif
