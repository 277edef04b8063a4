/*
 * Ring collectives over the primitives of kern_prims.cuh, written once for every protocol. One
 * CTA per channel (kernels.h: kern_coll_work_t). Reductions fold the incoming partial result
 * first and this rank's input second (the primitives' order), so that avg/premulsum scale the
 * user's data exactly once: the input is the one pre-op source. One rank needs no code of its
 * own: its CTA has no connection, so every primitive runs only its local part.
 */
#ifndef CHOIR_KERN_COLL_CUH
#define CHOIR_KERN_COLL_CUH

#include "kern_direct.cuh"
#include "kern_prims.cuh"
#include "kern_tree.cuh"

namespace kern {

/* What the ring algorithms need of their channel, loaded once at the start of the kernel. */
struct kern_ring_view {
  int index;           /* this rank's position in the ring */
  const int32_t* ranks; /* the ring's ranks in ring order */
};

/* Elements per 16-byte unit: parts and slices are whole units so vectors stay aligned. */
template <typename B>
__device__ __forceinline__ uint64_t unit_elems() {
  return KERN_RC_VEC_BYTES / sizeof(B);
}

__device__ __forceinline__ int mod_n(int a, int n) { return ((a % n) + n) % n; }

/* The ring's element range of this CTA and its step size, common to every algorithm. */
template <class Prims>
struct ring_part {
  uint64_t off, cnt; /* this channel's elements of the buffer (or of each rank's block) */
  uint64_t slice;    /* elements per step at most */
  __device__ __forceinline__ ring_part(const Prims& p, const kern_coll_work_t& w) {
    kern_split_part(w.count, unit_elems<typename Prims::B>(), w.nchannels,
                    blockIdx.x - w.channel0, &off, &cnt);
    slice = p.step_elems();
  }
};

/* AllReduce: reduce-scatter then all-gather around the ring, n chunks per round. */
template <class Prims>
__device__ void ring_allreduce(Prims& p, const kern_coll_work_t& w, const kern_ring_view& ch,
                               int n) {
  constexpr uint64_t es = sizeof(typename Prims::B);
  const ring_part<Prims> part(p, w);
  const uint64_t unit = unit_elems<typename Prims::B>(), cnt = part.cnt;
  const char* in = (const char*)w.sendbuff + part.off * es;
  char* out = (char*)w.recvbuff + part.off * es;
  const int idx = ch.index;
  for (uint64_t base = 0; base < cnt;) {
    uint64_t chunk = (cnt - base + n - 1) / n;
    chunk = (chunk + unit - 1) / unit * unit;
    if (chunk > part.slice) chunk = part.slice;
    auto at = [&](int j, uint64_t* ne) {
      const uint64_t o = base + (uint64_t)mod_n(j, n) * chunk;
      *ne = o < cnt ? (cnt - o < chunk ? cnt - o : chunk) : 0;
      return o * es;
    };
    uint64_t ne, o;
    o = at(idx - 1, &ne);
    p.send(in + o, ne);
    for (int k = 2; k < n; k++) {
      o = at(idx - k, &ne);
      p.recvReduceSend(in + o, ne);
    }
    o = at(idx, &ne);
    p.recvReduceCopySend(in + o, out + o, ne, POST_APPLY);
    for (int k = 1; k < n - 1; k++) {
      o = at(idx - k, &ne);
      p.recvCopySend(out + o, ne);
    }
    o = at(idx + 1, &ne);
    p.recv(out + o, ne);
    base += (uint64_t)n * chunk;
  }
}

/* ReduceScatter: rank block b of the input starts at b * count elements. */
template <class Prims>
__device__ void ring_reducescatter(Prims& p, const kern_coll_work_t& w, const kern_ring_view& ch,
                                   int n) {
  constexpr uint64_t es = sizeof(typename Prims::B);
  const ring_part<Prims> part(p, w);
  const int idx = ch.index;
  auto in = [&](int pos, uint64_t at) {
    return (const char*)w.sendbuff + ((uint64_t)ch.ranks[mod_n(pos, n)] * w.count + at) * es;
  };
  char* out = (char*)w.recvbuff + part.off * es;
  for (uint64_t base = 0; base < part.cnt;) {
    const uint64_t ne = part.cnt - base < part.slice ? part.cnt - base : part.slice;
    const uint64_t at = part.off + base;
    p.send(in(idx - 1, at), ne);
    for (int k = 2; k < n; k++) p.recvReduceSend(in(idx - k, at), ne);
    p.recvReduceCopy(in(idx, at), out + base * es, ne, POST_APPLY);
    base += ne;
  }
}

/* AllGather: recvbuff block b (count elements) is rank b's input. */
template <class Prims>
__device__ void ring_allgather(Prims& p, const kern_coll_work_t& w, const kern_ring_view& ch,
                               int n) {
  constexpr uint64_t es = sizeof(typename Prims::B);
  const ring_part<Prims> part(p, w);
  const int idx = ch.index;
  const char* in = (const char*)w.sendbuff + part.off * es;
  auto out = [&](int pos, uint64_t at) {
    return (char*)w.recvbuff + ((uint64_t)ch.ranks[mod_n(pos, n)] * w.count + at) * es;
  };
  for (uint64_t base = 0; base < part.cnt;) {
    const uint64_t ne = part.cnt - base < part.slice ? part.cnt - base : part.slice;
    const uint64_t at = part.off + base;
    p.copySend(in + base * es, out(idx, at), ne);
    for (int k = 1; k < n - 1; k++) p.recvCopySend(out(idx - k, at), ne);
    if (n > 1) p.recv(out(idx + 1, at), ne);
    base += ne;
  }
}

/* Broadcast: a pipeline from the root along the ring (ring distance d from the root). */
template <class Prims>
__device__ void ring_broadcast(Prims& p, const kern_coll_work_t& w, int n, int d) {
  constexpr uint64_t es = sizeof(typename Prims::B);
  const ring_part<Prims> part(p, w);
  const char* in = (const char*)w.sendbuff + part.off * es;
  char* out = (char*)w.recvbuff + part.off * es;
  const bool inplace = w.sendbuff == w.recvbuff;
  for (uint64_t base = 0; base < part.cnt;) {
    const uint64_t ne = part.cnt - base < part.slice ? part.cnt - base : part.slice;
    const uint64_t b = base * es;
    if (d == 0)
      p.copySend(in + b, inplace ? nullptr : out + b, ne);
    else if (d < n - 1)
      p.recvCopySend(out + b, ne);
    else
      p.recv(out + b, ne);
    base += ne;
  }
}

/* Reduce: a pipeline that starts after the root and ends at it. */
template <class Prims>
__device__ void ring_reduce(Prims& p, const kern_coll_work_t& w, int d) {
  constexpr uint64_t es = sizeof(typename Prims::B);
  const ring_part<Prims> part(p, w);
  const char* in = (const char*)w.sendbuff + part.off * es;
  char* out = (char*)w.recvbuff + part.off * es;
  for (uint64_t base = 0; base < part.cnt;) {
    const uint64_t ne = part.cnt - base < part.slice ? part.cnt - base : part.slice;
    const uint64_t b = base * es;
    if (d == 0)
      p.recvReduceCopy(in + b, out + b, ne, POST_APPLY);
    else if (d == 1)
      p.send(in + b, ne);
    else
      p.recvReduceSend(in + b, ne);
    base += ne;
  }
}

/* The ring position of `rank` in the channel's ring. */
__device__ __forceinline__ int ring_pos(const kern_ring_view& ch, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (ch.ranks[i] == rank) return i;
  return 0;
}

/* Which collectives a batch kernel compiles (the DIRECT argument of coll_batch_run): the
 * reduction kernels are only given AllReduce, ReduceScatter and Reduce, the copy kernel only
 * Broadcast and AllGather (kern_coll_check and kern_coll_batch_start in kern_launch.c), so each
 * leaves the other's ring steps out: 216 reduction kernels without two collectives each compile
 * faster. */
enum { DIRECT_REDUCE = 1, DIRECT_COPY = 2 };

/* A collective: CTA c runs ring channel c, part c - channel0 of the work. With one rank the
 * channel has no connection. A collective the kernel does not compile (above) does nothing: the
 * launcher never sends it. */
template <int PROTO, int DIRECT, class R>
__device__ __forceinline__ void coll_run(const R& r, const kern_coll_work_t& w) {
  constexpr bool reduces = DIRECT == DIRECT_REDUCE, copies = DIRECT == DIRECT_COPY;
  const unsigned part = blockIdx.x - w.channel0;
  prof_mark_start_at(w.prof, part, threadIdx.x == 0);
  kern_comm_t* comm = w.comm;
  kern_channel_t* ch = &comm->channels[blockIdx.x];
  /* Independent loads, issued together with prims' own: the prologue is one round trip. The
   * channel's ends exist (unset) with one rank too; prims reads them and ignores them. */
  const int n = comm->nranks;
  __shared__ kern_ring_view ring; /* in shared memory: the copy loops keep their registers */
  if (threadIdx.x == 0) ring = kern_ring_view{ch->index, ch->ranks};
  /* prims' constructor ends with a CTA barrier: `ring` is published before any use. */
  prims<PROTO, R> p(r, &ch->recv, &ch->send, comm->abort_flag, w.chunk_bytes, n > 1);
  switch (w.coll) {
    case KERN_COLL_ALLREDUCE:
      if constexpr (reduces) ring_allreduce(p, w, ring, n);
      break;
    case KERN_COLL_REDUCESCATTER:
      if constexpr (reduces) ring_reducescatter(p, w, ring, n);
      break;
    case KERN_COLL_ALLGATHER:
      if constexpr (copies) ring_allgather(p, w, ring, n);
      break;
    case KERN_COLL_BROADCAST:
      if constexpr (copies) ring_broadcast(p, w, n, mod_n(ring.index - ring_pos(ring, n, w.root), n));
      break;
    case KERN_COLL_REDUCE:
      if constexpr (reduces) ring_reduce(p, w, mod_n(ring.index - ring_pos(ring, n, w.root), n));
      break;
    default: break;
  }
  p.finish();
  prof_mark_stop_at(w.prof, part, threadIdx.x == 0);
}

/* A batch of collectives (kernels.h: kern_coll_batch_t), in order. CTA c runs channel c of each
 * work that has it (the skip is the same for every thread of the CTA, so the barriers inside
 * stay CTA-wide). Every work gets a fresh prims: its constructor reads the connections' step
 * counters, which thread 0 of the previous work's finish() wrote back, hence the barrier between
 * works (it also keeps thread 0 from rewriting the shared `ring` and prims state of the next
 * work while another thread still reads the previous one's). All the CTA's threads run every
 * work, whatever its nthreads: the protocols place a step's data by line or unit index, never by
 * thread, so the peer, which may run the same work with another thread count, agrees. */
/* DIRECT also says which direct works (kern_direct.cuh, all LL) the kernel's LL batches may
 * hold: the reduction kernels' OneShot and TwoShot AllReduces and OneShot ReduceScatters, the
 * copy kernel's OneShot AllGathers. */
template <int PROTO, class R, int DIRECT>
__device__ __forceinline__ void coll_batch_run(const kern_coll_batch_t& b) {
  for (uint32_t i = 0; i < b.nworks; i++) {
    const kern_coll_work_t& w = b.works[i];
    if constexpr (PROTO == KERN_PROTO_LL && DIRECT == DIRECT_REDUCE) {
      /* Consecutive OneShot AllReduces with the same operator arguments run as one stream of
       * lines (direct_allreduce): their small steps merge. */
      if (w.algo == KERN_ALGO_ONESHOT && w.coll == KERN_COLL_ALLREDUCE) {
        /* The run's works (w.run of them from this one: the launcher counts them with
         * kern_oneshot_joins) give it only their first four words (direct_item), copied to
         * shared memory in one pass: a kernel parameter read at a different address per lane
         * is served one address at a time, so the copy reads no more of the parameter than
         * the run needs (a third of its works' bytes). */
        __shared__ direct_item items[KERN_COLL_BATCH_MAX];
        static_assert(sizeof(kern_coll_work_t) % sizeof(uint64_t) == 0, "works of whole words");
        constexpr uint32_t WW = sizeof(kern_coll_work_t) / sizeof(uint64_t); /* words a work */
        constexpr uint32_t IW = sizeof(direct_item) / sizeof(uint64_t);      /* words an item */
        const uint32_t j = (uint32_t)w.run;
        const uint64_t* src = (const uint64_t*)&b.works[i];
        uint64_t* dst = (uint64_t*)items;
        for (uint32_t x = threadIdx.x; x < j * IW; x += blockDim.x)
          dst[x] = src[(x / IW) * WW + x % IW];
        __syncthreads();
        /* Each work's records by a thread of its own (thread k for work k of the run). */
        const bool marks = threadIdx.x < j && (int)blockIdx.x < w.nchannels;
        kern_prof_rec_t* recs = marks ? items[threadIdx.x].prof : nullptr;
        prof_mark_start_by(recs, marks);
        direct_allreduce(R(w.scalar_bits, w.scalar_ptr, w.divisor), w,
                         [&](uint32_t k) { return items[k]; }, j);
        __syncthreads(); /* every thread's lines stored (and items read) before any stop mark
                          * and before a later run rewrites items */
        prof_mark_stop_by(recs, marks);
        i += j - 1;
        continue;
      }
    }
    /* The work's channels: channel0 (0 but for the ring) and the nchannels after it. */
    if (blockIdx.x - w.channel0 >= (unsigned)w.nchannels) continue;
    const R r(w.scalar_bits, w.scalar_ptr, w.divisor);
    if constexpr (PROTO == KERN_PROTO_LL && DIRECT == DIRECT_REDUCE) {
      if (w.algo == KERN_ALGO_TWOSHOT || w.algo == KERN_ALGO_ONESHOT) {
        prof_mark_start(w.prof);
        if (w.algo == KERN_ALGO_TWOSHOT)
          direct_allreduce_twoshot(r, w);
        else /* ReduceScatter (kern_coll_check lets no other reduction have it) */
          direct_reducescatter(r, w);
        prof_mark_stop(w.prof);
        __syncthreads();
        continue;
      }
    }
    if constexpr (PROTO == KERN_PROTO_LL && DIRECT == DIRECT_COPY) {
      if (w.algo == KERN_ALGO_ONESHOT) { /* AllGather (kern_coll_check) */
        prof_mark_start(w.prof);
        direct_allgather(w);
        prof_mark_stop(w.prof);
        __syncthreads();
        continue;
      }
    }
    coll_run<PROTO, DIRECT>(r, w);
    __syncthreads();
  }
}

/* Threads per CTA a kernel is built for (every collective runs in a batch kernel, a single work
 * as a batch of one). At 512 threads ptxas (CUDA 13.0, sm_90) spills in the LL128 kernels of an
 * operator with registers of its own (avg, premulsum) and of fp8, whose lanes widen to fp16,
 * and in the Simple kernels of f64 avg and premulsum: those run with at most 384 threads (the
 * build fails on a spill). Fewer threads on one rank than on its peers is safe: every protocol's
 * step sizes and line ownership are decided per rank from the work, never from the peer's
 * thread count. */
template <int OP, int TYPE, int PROTO>
constexpr int coll_max_threads() {
  return (PROTO == KERN_PROTO_LL128 && (red<OP, TYPE>::heavy || red<OP, TYPE>::fp8)) ||
                 (PROTO == KERN_PROTO_SIMPLE && red<OP, TYPE>::heavy)
             ? 384
             : KERN_NTHREADS;
}

template <int OP, int TYPE, int PROTO>
__global__ void __launch_bounds__(coll_max_threads<OP, TYPE, PROTO>(), 1)
    kern_coll_batch_kernel(const __grid_constant__ kern_coll_batch_t b) {
  coll_batch_run<PROTO, red<OP, TYPE>, DIRECT_REDUCE>(b);
}

/* A lone LL work (a launch of one, not on the tree: the ring, or OneShot or TwoShot AllReduce,
 * OneShot ReduceScatter) has a kernel of its own, whose parameter is a batch of one declared at
 * that size: the work's fields are read at fixed offsets of a 112-byte parameter. Run as a batch
 * of one in the LL batch kernel (a 6 KB parameter, its works read at run-time offsets, the
 * batch's prologue) a OneShot AllReduce of 8 B took 6.2 us a call with 4 ranks sharing one H200
 * (CUDA graphs), 5.2 with 2; in a kernel like this one 5.0 and 4.2 (and the ring with LL, in a
 * build whose batches held one work, 6.8 against 7.3 with 4 ranks). Small messages take LL, so
 * only LL has this second kernel. The stop marks follow the algorithms' last barrier. */
template <int OP, int TYPE>
__global__ void __launch_bounds__(coll_max_threads<OP, TYPE, KERN_PROTO_LL>(), 1)
    kern_coll_lone_kernel(const __grid_constant__ kern_coll_batch1_t b) {
  const kern_coll_work_t& w = b.works[0];
  const red<OP, TYPE> r(w.scalar_bits, w.scalar_ptr, w.divisor);
  if (w.algo == KERN_ALGO_ONESHOT || w.algo == KERN_ALGO_TWOSHOT) {
    prof_mark_start(w.prof);
    if (w.algo == KERN_ALGO_TWOSHOT)
      direct_allreduce_twoshot(r, w);
    else if (w.coll == KERN_COLL_ALLREDUCE)
      direct_allreduce(r, w,
                       [&](uint32_t) {
                         return direct_item{w.prof, w.sendbuff, w.recvbuff, w.count};
                       },
                       1);
    else /* OneShot ReduceScatter (kern_coll_check lets no other reduction have it) */
      direct_reducescatter(r, w);
    prof_mark_stop(w.prof);
    return;
  }
  /* The ring: the work's channels are channel0.. channel0 + nchannels - 1 (the grid's last). */
  if (blockIdx.x - w.channel0 >= (unsigned)w.nchannels) return;
  coll_run<KERN_PROTO_LL, DIRECT_REDUCE>(r, w);
}

/* A Sym kernel's reduction (kern_direct.cuh: AllReduce or ReduceScatter on symmetric windows)
 * runs alone (the plan never batches it) in a kernel of its own: its n-source reduce-copy beside
 * the LL kernels' code spilled registers (avg, 512 threads); alone, f64 avg still spilled at 512
 * threads, so operators with registers of their own (avg) run it with 384. Never premulsum (its
 * scalar is per rank): that instance is empty. */
template <int OP, int TYPE>
constexpr int sym_max_threads() {
  return red<OP, TYPE>::heavy ? 384 : KERN_NTHREADS;
}

template <int OP, int TYPE>
__global__ void __launch_bounds__(sym_max_threads<OP, TYPE>(), 1)
    kern_coll_sym_kernel(const __grid_constant__ kern_coll_batch1_t b) {
  if constexpr (OP != KERN_OP_PREMULSUM) {
    const kern_coll_work_t& w = b.works[0];
    const red<OP, TYPE> r(w.scalar_bits, w.scalar_ptr, w.divisor);
    prof_mark_start(w.prof);
    if (w.coll == KERN_COLL_ALLREDUCE)
      direct_allreduce_sym(r, w);
    else /* ReduceScatter (kern_coll_check) */
      direct_reducescatter_sym(r, w);
    prof_mark_stop(w.prof);
  }
}

/* Whether a batch is one LL work off the tree, which runs in kern_coll_lone_kernel (reductions)
 * or kern_copy_lone_kernel (Broadcast, AllGather: kern_copy.cu). */
__host__ inline bool coll_batch_lone_ll(const kern_coll_batch_t* b) {
  return b->nworks == 1 && b->works[0].proto == KERN_PROTO_LL &&
         b->works[0].algo != KERN_ALGO_TREE;
}

/* Tree AllReduces (kern_tree.cuh) have a kernel of their own: a batch holds tree works only
 * (kern_coll_batch_launch), and the ring's Simple kernel keeps its registers (the tree's steps
 * over up to four sources and destinations, inlined beside the ring's, made it spill). CTA c runs
 * tree channel c of each work that has one. */
/* Threads per CTA of the tree kernel: at most 384 (at 512, ptxas spilled in the int8 and uint8
 * sum kernels, CUDA 13.0, sm_90), and no more than the ring's Simple kernel of the operator. */
template <int OP, int TYPE>
constexpr int tree_max_threads() {
  return coll_max_threads<OP, TYPE, KERN_PROTO_SIMPLE>() < 384
             ? coll_max_threads<OP, TYPE, KERN_PROTO_SIMPLE>()
             : 384;
}

template <int OP, int TYPE, int PROTO>
__global__ void __launch_bounds__(tree_max_threads<OP, TYPE>(), 1)
    kern_tree_batch_kernel(const __grid_constant__ kern_coll_batch_t b) {
  using R = red<OP, TYPE>;
  for (uint32_t i = 0; i < b.nworks; i++) {
    const kern_coll_work_t& w = b.works[i];
    if ((int)blockIdx.x >= w.nchannels) continue;
    const R r(w.scalar_bits, w.scalar_ptr, w.divisor);
    prof_mark_start(w.prof);
    tree_allreduce<PROTO>(r, w);
    prof_mark_stop(w.prof);
    __syncthreads();
  }
}

/* The grid and CTA of a batch: the largest of the works' (kernels.h: a ring work's last
 * channel + 1), the threads clamped to
 * what the protocol's kernel is built for. OneShot works run as one stream of lines
 * (direct_allreduce): their CTA gets a thread per line of the stream (the lines of every OneShot
 * work's largest part together), not only its largest work's count. elem: the type's size. */
__host__ inline void coll_batch_dims(const kern_coll_batch_t* b, unsigned maxt, unsigned elem,
                                     unsigned* grid_p, unsigned* threads_p) {
  unsigned g = 0, t = 0;
  uint64_t lines = 0;
  for (uint32_t i = 0; i < b->nworks; i++) {
    const kern_coll_work_t* w = &b->works[i];
    if ((unsigned)w->channel0 + (unsigned)w->nchannels > g)
      g = (unsigned)w->channel0 + (unsigned)w->nchannels;
    if (w->nthreads > t) t = w->nthreads;
    if (w->algo == KERN_ALGO_ONESHOT && w->nchannels > 0)
      lines += (w->count * elem / (uint64_t)w->nchannels + 16 + 7) / 8;
  }
  if (lines > t) t = lines > KERN_NTHREADS ? KERN_NTHREADS : (unsigned)(lines + 31) / 32 * 32;
  *grid_p = g;
  *threads_p = t < maxt ? t : maxt;
}

/* One kernel per protocol: each path keeps its own registers. b == NULL: load the kernels only
 * (see kern_preload in kernels.h). The launch copies only the works in use (kern_internal.h). */
template <int OP, int TYPE>
cudaError_t coll_batch_launch(const kern_coll_batch_t* b, cudaStream_t stream) {
  const void* fns[KERN_PROTO_NUM] = {
      (const void*)kern_coll_batch_kernel<OP, TYPE, KERN_PROTO_LL>,
      (const void*)kern_coll_batch_kernel<OP, TYPE, KERN_PROTO_LL128>,
      (const void*)kern_coll_batch_kernel<OP, TYPE, KERN_PROTO_SIMPLE>};
  const void* tree_fns[KERN_PROTO_NUM] = {
      (const void*)kern_tree_batch_kernel<OP, TYPE, KERN_PROTO_LL>,
      (const void*)kern_tree_batch_kernel<OP, TYPE, KERN_PROTO_LL128>,
      (const void*)kern_tree_batch_kernel<OP, TYPE, KERN_PROTO_SIMPLE>};
  const void* lone = (const void*)kern_coll_lone_kernel<OP, TYPE>;
  const void* sym = (const void*)kern_coll_sym_kernel<OP, TYPE>;
  if (b == nullptr) {
    cudaFuncAttributes attr;
    cudaError_t e = cudaFuncGetAttributes(&attr, lone);
    if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, sym);
    for (int p = 0; p < KERN_PROTO_NUM && e == cudaSuccess; p++) {
      e = cudaFuncGetAttributes(&attr, fns[p]);
      if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, tree_fns[p]);
    }
    return e;
  }
  const unsigned maxt[KERN_PROTO_NUM] = {coll_max_threads<OP, TYPE, KERN_PROTO_LL>(),
                                         coll_max_threads<OP, TYPE, KERN_PROTO_LL128>(),
                                         coll_max_threads<OP, TYPE, KERN_PROTO_SIMPLE>()};
  const int proto = b->works[0].proto;
  const bool tree = b->works[0].algo == KERN_ALGO_TREE; /* a batch of tree works only */
  const bool symk = b->works[0].algo == KERN_ALGO_SYM;  /* alone: kern_launch.c */
  unsigned grid, nt;
  coll_batch_dims(b,
                  tree   ? (unsigned)tree_max_threads<OP, TYPE>()
                  : symk ? (unsigned)sym_max_threads<OP, TYPE>()
                         : maxt[proto],
                  (unsigned)sizeof(typename red<OP, TYPE>::B), &grid, &nt);
  const void* fn = tree                    ? tree_fns[proto]
                   : symk                  ? sym
                   : coll_batch_lone_ll(b) ? lone
                                           : fns[proto];
  return kern_launch_prefix(fn, grid, nt, b,
                            KERN_COLL_BATCH_BYTES(b->nworks), stream);
}

} /* namespace kern */

/* One reduction-collective instance, as listed by instances.py: the launcher of its batch kernels
 * (kernels.h: kern_coll_batch_t), which also run single works. */
#define KERN_COLL_BATCH_INSTANCE(opname, tyname, OPE, TYE)                                      \
  extern "C" kern_coll_batch_launch_fn kern_coll_batch_launch_##opname##_##tyname;              \
  extern "C" cudaError_t kern_coll_batch_launch_##opname##_##tyname(const kern_coll_batch_t* b, \
                                                                    cudaStream_t stream) {      \
    return kern::coll_batch_launch<OPE, TYE>(b, stream);                                        \
  }

#endif
