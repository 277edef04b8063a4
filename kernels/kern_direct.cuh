/*
 * OneShot AllReduce (kernels.h: KERN_ALGO_ONESHOT) over the direct connections: every rank of
 * the communicator reaches every other by p2p, and each pair has, per CTA and direction, a
 * connection with an LL buffer (kern_comm_t.direct_send / direct_recv).
 *
 * CTA g takes part g of the buffer (whole 16-byte units, as the ring splits over channels) and
 * moves it in steps of at most the connections' LL step capacity. Per step:
 *   1. room: thread q (a peer) waits until the send end to q has a free slot (head), as an LL
 *      sender does; then the CTA meets at a barrier.
 *   2. each thread takes lines l = tid, tid + nthreads, ...: for each it loads 8 bytes of its
 *      input, applies the pre-op (avg, premulsum: once, by the rank that owns the data) and
 *      writes the line {data, flag, data, flag} into the step's slot of every peer's receive
 *      buffer; then, for each line again, it reduces line l of every rank in rank order 0..n-1
 *      (its own value at its rank, the others polled from its receive buffers until both flags
 *      are the step's, every peer's load issued before any is waited for), applies the post-op
 *      and stores the result. Every rank folds the same values in the same order: the results
 *      are equal on every rank, bit for bit.
 *   3. a barrier (every line read), then thread q publishes head on the receive end from q.
 * TwoShot (KERN_ALGO_TWOSHOT) cuts a CTA's part into n slices, slice q reduced by rank q, and
 * moves every slice in rounds of at most a step's capacity, two steps per round:
 *   step 1: each rank writes its slice q (pre-op applied) to rank q;
 *   step 2: rank q folds its slice from every rank in rank order, applies the post-op, stores it
 *           and writes it to every peer; each rank then polls the other ranks' reduced slices
 *           and stores them. Each rank moves 2(n-1)/n of its data instead of OneShot's n-1.
 * OneShot AllGather and ReduceScatter (direct_allgather, direct_reducescatter) take the same
 * connections and steps: AllGather writes each line of the rank's block to every peer and
 * stores every peer's; ReduceScatter writes block q's line to rank q and folds its own block.
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

/* The CTA's ends with every peer, in shared memory; the abort state. */
struct direct_state {
  direct_peer peers[KERN_DIRECT_MAX_RANKS];
  bool aborted;
};

/* Thread q (a peer) loads its two ends; after a barrier every thread computes the step capacity
 * (the smallest of the ends' LL slots, and at most the work's chunk), which it returns: one
 * barrier, not a second one after a single thread's computation. */
__device__ __forceinline__ uint32_t direct_open(kern_comm_t* comm, const kern_coll_work_t& w,
                                                direct_state& sh) {
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = blockIdx.x, tid = threadIdx.x;
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
    /* A plan naming these algorithms without their connections is a bug of the core. */
    if (!s->connected || !c->connected || p.sbuf == nullptr || p.rbuf == nullptr) __trap();
    sh.peers[tid] = p;
  }
  if (tid == 0) sh.aborted = false;
  __syncthreads();
  uint32_t slot = ~0u;
  for (int q = 0; q < n; q++) {
    if (q == me) continue;
    if (sh.peers[q].sslot < slot) slot = sh.peers[q].sslot;
    if (sh.peers[q].rslot < slot) slot = sh.peers[q].rslot;
  }
  uint32_t cap = kern_proto_step_capacity(KERN_PROTO_LL, slot == ~0u ? 0 : slot);
  if (w.chunk_bytes < cap) cap = w.chunk_bytes & ~15u;
  if (cap == 0) __trap();
  return cap;
}

/* Room for `steps` more steps on every send end (thread q waits for peer q's head), then a CTA
 * barrier. */
__device__ __forceinline__ void direct_room(kern_comm_t* comm, direct_state& sh, int steps) {
  const int n = comm->nranks, me = comm->rank;
  const uint32_t tid = threadIdx.x;
  if (tid < (uint32_t)n && (int)tid != me) {
    direct_peer& p = sh.peers[tid];
    if (!kern_ll_room(p.head_seen, p.sstep, (uint64_t)steps)) {
      int spins = 0;
      uint64_t h;
      while (!kern_ll_room(h = ld_acquire_sys(p.shead), p.sstep, (uint64_t)steps)) {
        if (++spins == KERN_ABORT_CHECK_SPINS) {
          spins = 0;
          if (*comm->abort_flag) {
            sh.aborted = true;
            break;
          }
        }
      }
      p.head_seen = h;
    }
  }
  __syncthreads();
}

/* Line l of step `ahead` (0: the end's next step, 1: the one after) from every peer q whose bit
 * is set in `mask` (never this rank's), handed to use(q, data) in rank order: every peer's load
 * is issued before any flag is looked at, so the peers' lines cost one memory round trip
 * together instead of one each; a line whose flags are not yet the step's is re-loaded until
 * they are. False when the communicator was aborted meanwhile (use is then not called for the
 * rest). */
#define DIRECT_LOADS_AHEAD 4 /* peers whose lines are loaded before any is waited for */
template <class Use>
__device__ __forceinline__ bool direct_take_peers(const kern_comm_t* comm, direct_state& sh,
                                                  uint32_t mask, int ahead, uint64_t l,
                                                  Use use) {
  /* Where peer q's line is and the flag it must carry: from shared memory, recomputed rather
   * than kept in registers, which the loads in flight need. */
  auto at = [&](int q) {
    const direct_peer& p = sh.peers[q];
    return p.rbuf + kern_ll_line_at(p.rstep + (uint64_t)ahead, p.rslot, l);
  };
  constexpr int D = DIRECT_LOADS_AHEAD;
  uint4 line[D];
#pragma unroll
  for (int q = 0; q < D; q++)
    if ((mask >> q) & 1u) line[q] = ld_volatile_v4(at(q));
#pragma unroll
  for (int q = 0; q < KERN_DIRECT_MAX_RANKS; q++) {
    if (!((mask >> q) & 1u)) continue;
    uint4 cur = q < D ? line[q % D] : ld_volatile_v4(at(q));
    const uint32_t f = kern_ll_flag(sh.peers[q].rstep + (uint64_t)ahead);
    int spins = 0;
    while (cur.y != f || cur.w != f) {
      cur = ld_volatile_v4(at(q));
      if (++spins == KERN_ABORT_CHECK_SPINS) {
        spins = 0;
        if (*comm->abort_flag) {
          sh.aborted = true;
          return false;
        }
      }
    }
    use(q, make_uint2(cur.x, cur.z));
  }
  return true;
}

/* acc = the fold of line l of every rank in rank order (this rank's value `mine` at its own
 * place), the peers' taken as direct_take_peers does. False when aborted. */
template <class R>
__device__ __forceinline__ bool direct_fold_peers(const R& r, const kern_comm_t* comm,
                                                  direct_state& sh, uint32_t peers, int ahead,
                                                  uint64_t l, uint2 mine, uint2* acc) {
  const int me = comm->rank;
  uint2 a = mine;
  bool mine_in = me == 0; /* rank 0's value starts the fold */
  const bool ok = direct_take_peers(comm, sh, peers, ahead, l, [&](int q, uint2 x) {
    if (!mine_in && q > me) {
      a = r.reduce(a, mine);
      mine_in = true;
    }
    a = q == 0 ? x : r.reduce(a, x);
  });
  if (ok && !mine_in) a = r.reduce(a, mine); /* this rank is the last */
  *acc = a;
  return ok;
}

/* The peers of this rank: bit q for every rank q but this one. */
__device__ __forceinline__ uint32_t direct_peer_mask(const kern_comm_t* comm) {
  return ((1u << comm->nranks) - 1u) & ~(1u << comm->rank);
}

/* Line l of step `ahead` to peer q. */
__device__ __forceinline__ void direct_put(direct_state& sh, int q, int ahead, uint64_t l,
                                           uint2 v) {
  const direct_peer& p = sh.peers[q];
  const uint64_t step = p.sstep + (uint64_t)ahead;
  const uint32_t f = kern_ll_flag(step);
  st_volatile_v4(p.sbuf + kern_ll_line_at(step, p.sslot, l), make_uint4(v.x, f, v.y, f));
}

/* After a CTA barrier (every line of the steps read): publish head, and every end moves `steps`
 * steps; then, when `more` steps follow, a barrier (after the last step only thread q reads its
 * own end again, in direct_close). */
__device__ __forceinline__ void direct_advance(kern_comm_t* comm, direct_state& sh, int steps,
                                               bool more) {
  const int n = comm->nranks, me = comm->rank;
  const uint32_t tid = threadIdx.x;
  __syncthreads();
  if (tid < (uint32_t)n && (int)tid != me) {
    direct_peer& p = sh.peers[tid];
    if (!sh.aborted) st_relaxed_sys(p.rhead, p.rstep + (uint64_t)steps);
    p.rstep += (uint64_t)steps;
    p.sstep += (uint64_t)steps;
  }
  if (more) __syncthreads();
}

/* The counters carry over to the next kernel. */
__device__ __forceinline__ void direct_close(kern_comm_t* comm, const direct_state& sh) {
  const int n = comm->nranks, me = comm->rank;
  const uint32_t g = blockIdx.x, tid = threadIdx.x;
  if (tid < (uint32_t)n && (int)tid != me) {
    const direct_peer& p = sh.peers[tid];
    kern_conn_t* s = &comm->direct_send[tid * KERN_DIRECT_MAX_CTAS + g];
    kern_conn_t* c = &comm->direct_recv[tid * KERN_DIRECT_MAX_CTAS + g];
    s->step = p.sstep;
    s->head_seen = p.head_seen;
    c->step = p.rstep;
  }
}

/* A run of OneShot works (one, or consecutive ones of a batch with the same operator
 * arguments), as one stream of lines: CTA g's part of every work, in order, each work's lines
 * after the previous one's. Every rank builds the same stream from the same works, so a step
 * carries the same lines everywhere, and many small works share one step instead of paying a
 * step each. */
struct direct_run {
  const char* in[KERN_COLL_BATCH_MAX];
  char* out[KERN_COLL_BATCH_MAX];
  uint64_t nbytes[KERN_COLL_BATCH_MAX]; /* this CTA's part of work k */
  uint64_t lend[KERN_COLL_BATCH_MAX];   /* lines of works 0..k together */
};

/* What a OneShot run needs of each of its works: the first four words of kern_coll_work_t
 * (kernels.h), which the batch kernel copies to shared memory (coll_batch_run). */
struct direct_item {
  kern_prof_rec_t* prof;
  const void* sendbuff;
  void* recvbuff;
  uint64_t count;
};
static_assert(sizeof(direct_item) == 32, "a direct_item is 4 words");

/* OneShot over the nw works item(0..nw) (1 <= nw <= KERN_COLL_BATCH_MAX; item(k) returns the
 * direct_item of work k) of one communicator, r valid for all of them; head (the run's first
 * work) gives the communicator, the CTAs (every work of a run has head.nchannels: the launcher
 * checks it) and the step size. Every CTA of the grid calls it; those past the run's CTAs return
 * at once. */
template <class R, class Item>
__device__ __forceinline__ void direct_allreduce(const R& r, const kern_coll_work_t& head,
                                                 Item item, uint32_t nw) {
  using B = typename R::B;
  kern_comm_t* comm = head.comm;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  const int ctas = head.nchannels;
  if ((int)blockIdx.x >= ctas) return; /* the same for the whole CTA */
  __shared__ direct_state sh;
  __shared__ direct_run run;
  /* The run's table, by warp 0: lane l takes works l and l + 32 (their parts: 64-bit
   * divisions), then a warp scan gives each work's end in lines. */
  static_assert(KERN_COLL_BATCH_MAX <= 64, "warp 0 takes two works per lane");
  auto part = [&](uint32_t k, uint64_t* cnt) {
    const direct_item it = item(k);
    uint64_t off;
    kern_split_part(it.count, KERN_RC_VEC_BYTES / sizeof(B), (uint32_t)ctas, blockIdx.x, &off,
                    cnt);
    run.in[k] = (const char*)it.sendbuff + off * sizeof(B);
    run.out[k] = (char*)it.recvbuff + off * sizeof(B);
    run.nbytes[k] = *cnt * sizeof(B);
  };
  if (nw == 1) { /* a lone work (kern_coll_lone_kernel: nw is 1 at compile time): no scan */
    if (tid == 0) {
      uint64_t cnt;
      part(0, &cnt);
      run.lend[0] = (cnt * sizeof(B) + 7) / 8;
    }
  } else if (tid < 32) {
    uint64_t lines[2] = {0, 0};
    for (int h = 0; h < 2; h++) {
      const uint32_t k = tid + 32u * (uint32_t)h;
      if (k >= nw) continue;
      uint64_t cnt;
      part(k, &cnt);
      lines[h] = (cnt * sizeof(B) + 7) / 8;
    }
    uint64_t carry = 0;
    for (int h = 0; h < 2; h++) {
      uint64_t v = lines[h];
      for (int d = 1; d < 32; d <<= 1) {
        const uint64_t u = __shfl_up_sync(0xffffffffu, v, d);
        if ((int)tid >= d) v += u;
      }
      const uint32_t k = tid + 32u * (uint32_t)h;
      if (k < nw) run.lend[k] = carry + v;
      carry += __shfl_sync(0xffffffffu, v, 31);
    }
  }
  /* A lone work: each thread loads its first line (line tid of the CTA's part, in the first
   * step) now, so that the load overlaps the connections' loads and direct_open's barriers
   * instead of following them. */
  uint2 first = make_uint2(0, 0);
  if (nw == 1) {
    const direct_item it = item(0);
    uint64_t off, cnt;
    kern_split_part(it.count, KERN_RC_VEC_BYTES / sizeof(B), (uint32_t)ctas, blockIdx.x, &off,
                    &cnt);
    const uint64_t nb = cnt * sizeof(B), o = (uint64_t)tid * 8;
    if (o < nb)
      first = user_load<uint2>((const char*)it.sendbuff + off * sizeof(B) + o,
                               nb - o < 8 ? (uint32_t)(nb - o) : 8u);
  }
  /* direct_open's barrier: run's entries are visible after it */
  const uint32_t cap_lines = direct_open(comm, head, sh) / 8;
  const uint64_t total = run.lend[nw - 1];
  const uint32_t peers = direct_peer_mask(comm);
  uint32_t k = 0; /* a thread's lines only grow: its work index too */
  /* Stream line gl: its work (k, moved forward only: the first work ending past gl, by
   * halves), its byte offset in that work's part and its valid bytes. */
  auto locate = [&](uint64_t gl, uint64_t* o, uint32_t* valid) {
    if (run.lend[k] <= gl) {
      uint32_t lo = k + 1, hi = nw - 1;
      while (lo < hi) {
        const uint32_t mid = (lo + hi) / 2;
        if (run.lend[mid] <= gl) lo = mid + 1;
        else hi = mid;
      }
      k = lo;
    }
    *o = (gl - (k > 0 ? run.lend[k - 1] : 0)) * 8;
    const uint64_t nbytes = run.nbytes[k];
    *valid = nbytes - *o < 8 ? (uint32_t)(nbytes - *o) : 8u;
  };
  for (uint64_t base = 0; base < total && !sh.aborted; base += cap_lines) {
    const uint32_t nlines = total - base < cap_lines ? (uint32_t)(total - base) : cap_lines;
    direct_room(comm, sh, 1);
    if (sh.aborted) break;
    /* First every line of this thread to every peer, then the folds: a thread with several
     * lines waits once for the peers' lines of all of them, not once per line. The fold
     * loads its input again (the first pass brought it into the caches). */
    const uint32_t k0 = k;
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      uint64_t o;
      uint32_t valid;
      locate(base + l, &o, &valid);
      const uint2 raw =
          nw == 1 && base == 0 && l == tid ? first : user_load<uint2>(run.in[k] + o, valid);
      const uint2 mine = r.pre(raw, true);
      for (int q = 0; q < n; q++)
        if (q != me) direct_put(sh, q, 0, l, mine);
    }
    k = k0;
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      uint64_t o;
      uint32_t valid;
      locate(base + l, &o, &valid);
      const uint2 raw =
          nw == 1 && base == 0 && l == tid ? first : user_load<uint2>(run.in[k] + o, valid);
      const uint2 mine = r.pre(raw, true);
      uint2 acc;
      if (!direct_fold_peers(r, comm, sh, peers, 0, l, mine, &acc)) break;
      user_store(run.out[k] + o, r.post(acc), valid);
    }
    direct_advance(comm, sh, 1, base + cap_lines < total);
  }
  direct_close(comm, sh);
}

template <class R>
__device__ __forceinline__ void direct_allreduce_twoshot(const R& r, const kern_coll_work_t& w) {
  using B = typename R::B;
  kern_comm_t* comm = w.comm;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  __shared__ direct_state sh;
  const uint32_t cap = direct_open(comm, w, sh);
  const uint32_t peers = direct_peer_mask(comm);
  uint64_t off, cnt;
  const uint64_t unit = KERN_RC_VEC_BYTES / sizeof(B);
  kern_split_part(w.count, unit, w.nchannels, blockIdx.x, &off, &cnt);
  const char* in = (const char*)w.sendbuff + off * sizeof(B);
  char* out = (char*)w.recvbuff + off * sizeof(B);
  /* Slice q of the part: [soff(q), + sbytes(q)) bytes, whole 16-byte units (the last short). */
  auto slice = [&](int q, uint64_t* so, uint64_t* sn) {
    uint64_t o, c;
    kern_split_part(cnt, unit, (uint32_t)n, (uint32_t)q, &o, &c);
    *so = o * sizeof(B);
    *sn = c * sizeof(B);
  };
  /* Slice q's bytes in the round at `base`: where they start, where the slice ends, its lines. */
  auto round_of = [&](int q, uint64_t base, uint64_t* start, uint64_t* end, uint32_t* nlines) {
    uint64_t so, sn;
    slice(q, &so, &sn);
    const uint64_t sb = sn > base ? (sn - base < cap ? sn - base : cap) : 0;
    *start = so + base;
    *end = so + sn;
    *nlines = (uint32_t)((sb + 7) / 8);
  };
  uint64_t first, most;
  slice(0, &first, &most); /* slice 0 is the longest */
  /* Every slice's bytes in the round, for the last pass (thread q writes slice q's before
   * direct_room's barrier; the previous round's readers are past direct_advance's). */
  __shared__ struct {
    uint64_t start[KERN_DIRECT_MAX_RANKS], end[KERN_DIRECT_MAX_RANKS];
    uint32_t nlines[KERN_DIRECT_MAX_RANKS]; /* slice 0's is the most */
  } rnd;
  for (uint64_t base = 0; base < most && !sh.aborted; base += cap) {
    if (tid < KERN_DIRECT_MAX_RANKS) {
      rnd.nlines[tid] = 0;
      if ((int)tid < n) round_of((int)tid, base, &rnd.start[tid], &rnd.end[tid], &rnd.nlines[tid]);
    }
    direct_room(comm, sh, 2);
    if (sh.aborted) break;
    /* Step 1: slice q of this rank's input to rank q. */
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      uint64_t start, end;
      uint32_t nlines;
      round_of(q, base, &start, &end, &nlines);
      for (uint32_t l = tid; l < nlines; l += nthreads) {
        const uint64_t o = start + (uint64_t)l * 8;
        const uint32_t valid = end - o < 8 ? (uint32_t)(end - o) : 8u;
        direct_put(sh, q, 0, l, r.pre(user_load<uint2>(in + o, valid), true));
      }
    }
    /* Step 2: fold this rank's slice from every rank, store it and give it to every peer. */
    bool ok = true;
    {
      uint64_t start, end;
      uint32_t nlines;
      round_of(me, base, &start, &end, &nlines);
      for (uint32_t l = tid; l < nlines && ok; l += nthreads) {
        const uint64_t o = start + (uint64_t)l * 8;
        const uint32_t valid = end - o < 8 ? (uint32_t)(end - o) : 8u;
        const uint2 mine = r.pre(user_load<uint2>(in + o, valid), true);
        uint2 acc;
        ok = direct_fold_peers(r, comm, sh, peers, 0, l, mine, &acc);
        if (!ok) break;
        acc = r.post(acc);
        user_store(out + o, acc, valid);
        for (int q = 0; q < n; q++)
          if (q != me) direct_put(sh, q, 1, l, acc);
      }
    }
    /* ... and take every other rank's reduced slice: line l of every slice that has one, the
     * peers polled together. */
    if (ok) {
      for (uint32_t l = tid; l < rnd.nlines[0]; l += nthreads) {
        uint32_t mask = 0;
#pragma unroll
        for (int q = 0; q < KERN_DIRECT_MAX_RANKS; q++)
          mask |= (q != me && l < rnd.nlines[q] ? 1u : 0u) << q;
        if (!direct_take_peers(comm, sh, mask, 1, l, [&](int q, uint2 v) {
              const uint64_t o = rnd.start[q] + (uint64_t)l * 8;
              user_store(out + o, v, rnd.end[q] - o < 8 ? (uint32_t)(rnd.end[q] - o) : 8u);
            }))
          break;
      }
    }
    direct_advance(comm, sh, 2, base + cap < most);
  }
  direct_close(comm, sh);
}

/* OneShot AllGather (bytes: w.count per rank, the copy kernel): CTA g takes part g of the
 * rank's block and moves it in steps; per step each thread takes lines l = tid, tid + nthreads,
 * ...: writes its line of the input to every peer and to its own block of the output, then
 * polls line l from every peer and stores it into that peer's block. */
__device__ __forceinline__ void direct_allgather(const kern_coll_work_t& w) {
  kern_comm_t* comm = w.comm;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  __shared__ direct_state sh;
  const uint32_t cap = direct_open(comm, w, sh);
  const uint32_t peers = direct_peer_mask(comm);
  uint64_t off, cnt;
  kern_split_part(w.count, KERN_RC_VEC_BYTES, w.nchannels, blockIdx.x, &off, &cnt);
  const char* in = (const char*)w.sendbuff + off;
  char* out = (char*)w.recvbuff + off;
  const uint64_t block = w.count;
  for (uint64_t base = 0; base < cnt && !sh.aborted; base += cap) {
    const uint32_t nlines = (uint32_t)(((cnt - base < cap ? cnt - base : cap) + 7) / 8);
    direct_room(comm, sh, 1);
    if (sh.aborted) break;
    /* Every line of this thread to every peer first, then the peers' (as direct_allreduce). */
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      const uint64_t o = base + (uint64_t)l * 8;
      const uint32_t valid = cnt - o < 8 ? (uint32_t)(cnt - o) : 8u;
      const uint2 mine = user_load<uint2>(in + o, valid);
      for (int q = 0; q < n; q++)
        if (q != me) direct_put(sh, q, 0, l, mine);
      user_store(out + (uint64_t)me * block + o, mine, valid);
    }
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      const uint64_t o = base + (uint64_t)l * 8;
      const uint32_t valid = cnt - o < 8 ? (uint32_t)(cnt - o) : 8u;
      if (!direct_take_peers(comm, sh, peers, 0, l, [&](int q, uint2 v) {
            user_store(out + (uint64_t)q * block + o, v, valid);
          }))
        break;
    }
    direct_advance(comm, sh, 1, base + cap < cnt);
  }
  direct_close(comm, sh);
}

/* OneShot ReduceScatter (w.count elements per rank's block): CTA g takes part g of every block;
 * per step each thread writes its line of block q (pre-op applied) to rank q, then folds line l
 * of its own block from every rank in rank order (its own value at its rank), applies the
 * post-op and stores it: the same order on every rank as OneShot AllReduce. */
template <class R>
__device__ __forceinline__ void direct_reducescatter(const R& r, const kern_coll_work_t& w) {
  using B = typename R::B;
  kern_comm_t* comm = w.comm;
  const int n = comm->nranks, me = comm->rank;
  const uint32_t tid = threadIdx.x, nthreads = blockDim.x;
  __shared__ direct_state sh;
  const uint32_t cap = direct_open(comm, w, sh);
  const uint32_t peers = direct_peer_mask(comm);
  uint64_t off, cnt;
  kern_split_part(w.count, KERN_RC_VEC_BYTES / sizeof(B), w.nchannels, blockIdx.x, &off, &cnt);
  const uint64_t nbytes = cnt * sizeof(B), block = w.count * sizeof(B);
  const char* in = (const char*)w.sendbuff + off * sizeof(B);
  char* out = (char*)w.recvbuff + off * sizeof(B);
  for (uint64_t base = 0; base < nbytes && !sh.aborted; base += cap) {
    const uint32_t nlines = (uint32_t)(((nbytes - base < cap ? nbytes - base : cap) + 7) / 8);
    direct_room(comm, sh, 1);
    if (sh.aborted) break;
    /* Block q's lines of this thread to rank q first, then the folds (as direct_allreduce). */
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      const uint64_t o = base + (uint64_t)l * 8;
      const uint32_t valid = nbytes - o < 8 ? (uint32_t)(nbytes - o) : 8u;
      for (int q = 0; q < n; q++)
        if (q != me)
          direct_put(sh, q, 0, l,
                     r.pre(user_load<uint2>(in + (uint64_t)q * block + o, valid), true));
    }
    for (uint32_t l = tid; l < nlines; l += nthreads) {
      const uint64_t o = base + (uint64_t)l * 8;
      const uint32_t valid = nbytes - o < 8 ? (uint32_t)(nbytes - o) : 8u;
      const uint2 mine = r.pre(user_load<uint2>(in + (uint64_t)me * block + o, valid), true);
      uint2 acc;
      if (!direct_fold_peers(r, comm, sh, peers, 0, l, mine, &acc)) break;
      user_store(out + o, r.post(acc), valid);
    }
    direct_advance(comm, sh, 1, base + cap < nbytes);
  }
  direct_close(comm, sh);
}

/* A barrier of this CTA with CTA blockIdx.x of every peer: one step of the direct connections
 * whose line 0 carries `tag` (the LL flag makes it this step's). Thread 0 writes every peer's
 * line, then waits for every peer's; when `release`, every thread's earlier stores (to peers'
 * memory too) are fenced at system scope before the barrier's lines go out; after the barrier,
 * thread 0's fence orders every later load after the peers' lines (acquire), and the CTA's
 * barrier in direct_advance passes that on to every thread. False when the communicator was
 * aborted, or a peer's line carries another tag (ranks that took different algorithms: a
 * misuse, since windows are collective; the kernel traps rather than mix data). */
__device__ __forceinline__ bool direct_barrier(kern_comm_t* comm, direct_state& sh, uint32_t tag,
                                               bool release, bool more) {
  const int n = comm->nranks, me = comm->rank;
  if (release) __threadfence_system();
  direct_room(comm, sh, 1); /* its CTA barrier orders every thread's stores before the lines */
  if (sh.aborted) return false;
  if (threadIdx.x == 0) {
    for (int q = 0; q < n; q++)
      if (q != me) direct_put(sh, q, 0, 0, make_uint2(tag, (uint32_t)me));
    bool ok = direct_take_peers(comm, sh, direct_peer_mask(comm), 0, 0, [&](int q, uint2 v) {
      if (v.x != tag || v.y != (uint32_t)q) __trap();
    });
    if (ok) __threadfence_system();
  }
  direct_advance(comm, sh, 1, more);
  return !sh.aborted;
}

#define DIRECT_SYM_ENTER 0x53594d45u /* "SYME" */
#define DIRECT_SYM_LEAVE 0x53594d4cu /* "SYML" */

/* The Sym kernels' frame (KERN_ALGO_SYM): the two barriers around body(), which runs only when
 * the first barrier passed; every rank goes through both whatever its share of the data. */
template <class Body>
__device__ __forceinline__ void direct_sym(const kern_coll_work_t& w, Body body) {
  kern_comm_t* comm = w.comm;
  if ((int)blockIdx.x >= w.nchannels) return; /* the same for the whole CTA */
  __shared__ direct_state sh;
  (void)direct_open(comm, w, sh);
  if (direct_barrier(comm, sh, DIRECT_SYM_ENTER, false, true)) body();
  if (!sh.aborted) direct_barrier(comm, sh, DIRECT_SYM_LEAVE, true, false);
  direct_close(comm, sh);
}

/* The Sym kernels' data movers, run by the whole CTA (rc_run over every warp of it). */

/* cnt elements at byte offset `at` of every rank's input (this rank's own sendbuff, the others'
 * window copies), folded in rank order into dst, the pre-op applied to each (avg; never
 * premulsum) and the post-op to the result. */
template <class R>
__device__ __forceinline__ void direct_sym_fold(const R& r, const kern_coll_work_t& w, uint64_t at,
                                                char* dst, uint64_t cnt) {
  const int n = w.comm->nranks, me = w.comm->rank;
  const uint64_t stride = (uint64_t)w.sym_stride4g << 32;
  rc_ptrs p;
#pragma unroll
  for (int q = 0; q < KERN_RC_MAX_SRCS; q++)
    p.src[q] = q >= n ? nullptr
               : q == me ? (const char*)w.sendbuff + at
                         : w.sym_send0 + (uint64_t)q * stride + at;
  p.dst[0] = dst;
  p.dst[1] = nullptr;
  rc_run(r, p, cnt, n, 1, R::has_pre ? (1u << n) - 1u : 0u, R::has_post, threadIdx.x / 32,
         blockDim.x / 32, threadIdx.x % 32);
}

/* cnt elements of src copied into dst(0), ..., dst(ndst - 1), two a pass (a one-source rc_run:
 * no pre- or post-op), each pass's two pointers built apart so that they stay in registers. */
template <class R, class Dst>
__device__ __forceinline__ void direct_sym_copy(const R& r, const char* src, int ndst, Dst dst,
                                                uint64_t cnt) {
  for (int k = 0; k < ndst; k += 2) {
    rc_ptrs c;
    c.src[0] = src;
#pragma unroll
    for (int x = 1; x < KERN_RC_MAX_SRCS; x++) c.src[x] = nullptr;
    c.dst[0] = dst(k);
    const bool two = k + 1 < ndst;
    c.dst[1] = two ? dst(k + 1) : nullptr;
    rc_run(r, c, cnt, 1, two ? 2 : 1, 0u, false, threadIdx.x / 32, blockDim.x / 32,
           threadIdx.x % 32);
  }
}

/* AllGather (KERN_ALGO_SYM): recvbuff lies in a symmetric window; CTA g stores part g of this
 * rank's block (w.count bytes) into block `rank` of every rank's output (its own included: out
 * of place it is a copy like the others, in place it rewrites the same bytes). Block `rank` of
 * any output is written by this rank only and read by none during the call. */
__device__ __forceinline__ void direct_allgather_sym(const kern_coll_work_t& w) {
  direct_sym(w, [&] {
    const uint64_t stride = (uint64_t)w.sym_stride4g << 32;
    uint64_t off, cnt;
    kern_split_part(w.count, KERN_RC_VEC_BYTES, (uint32_t)w.nchannels, blockIdx.x, &off, &cnt);
    if (cnt == 0) return;
    const uint64_t at = (uint64_t)w.comm->rank * w.count + off;
    direct_sym_copy(red<KERN_OP_SUM, ncclUint8>(0, nullptr, 1), (const char*)w.sendbuff + off,
                    w.comm->nranks, [&](int q) { return w.sym_recv0 + (uint64_t)q * stride + at; },
                    cnt);
  });
}

/* ReduceScatter (KERN_ALGO_SYM): sendbuff lies in a symmetric window; CTA g folds part g of
 * block `rank` of every rank's input, in rank order, into this rank's output. Block `rank` of any
 * input is read by this rank only, so in place (the output is that block of its own input)
 * needs nothing more. */
template <class R>
__device__ __forceinline__ void direct_reducescatter_sym(const R& r, const kern_coll_work_t& w) {
  using B = typename R::B;
  direct_sym(w, [&] {
    uint64_t off, cnt;
    kern_split_part(w.count, KERN_RC_VEC_BYTES / sizeof(B), (uint32_t)w.nchannels, blockIdx.x,
                    &off, &cnt);
    if (cnt == 0) return;
    direct_sym_fold(r, w, ((uint64_t)w.comm->rank * w.count + off) * sizeof(B),
                    (char*)w.recvbuff + off * sizeof(B), cnt);
  });
}

/* SymTwoShot AllReduce (KERN_ALGO_SYM): sendbuff and recvbuff lie in symmetric windows,
 * so every rank's copy of them is mapped here (w.sym_send0, w.sym_recv0, rank q's copy q x
 * stride further). CTA g takes part g of the buffer (as the ring splits over channels) and cuts
 * it into n slices, slice q reduced by rank q:
 *   1. a barrier with every peer's CTA g: every rank's input is written (earlier work on its
 *      stream is done) and its output free;
 *   2. slice q of every rank's input, reduced in rank order, into this rank's output (rc_run
 *      with n sources, the pre-op applied to each: avg; premulsum, whose scalar is per rank, never
 *      comes here), then, after a CTA barrier, copied from there into every peer's output, two
 *      peers a pass;
 *   3. a barrier again (after a system fence): every peer is done reading this rank's input and
 *      writing its output, so the kernel may end and the user reuse both.
 * Each slice is read and written by one rank only, so in place (sendbuff == recvbuff) needs no
 * more: rank q reads slice q of every input before it writes slice q of any output. Each rank
 * moves its data once in and once out, and no step capacity bounds a round. */
template <class R>
__device__ __forceinline__ void direct_allreduce_sym(const R& r, const kern_coll_work_t& w) {
  using B = typename R::B;
  const int n = w.comm->nranks, me = w.comm->rank;
  direct_sym(w, [&] {
    const uint64_t stride = (uint64_t)w.sym_stride4g << 32;
    const uint64_t unit = KERN_RC_VEC_BYTES / sizeof(B);
    uint64_t off, cnt, so, sc;
    kern_split_part(w.count, unit, (uint32_t)w.nchannels, blockIdx.x, &off, &cnt);
    kern_split_part(cnt, unit, (uint32_t)n, (uint32_t)me, &so, &sc);
    if (sc == 0) return; /* the same for the whole CTA */
    const uint64_t at = (off + so) * sizeof(B);
    direct_sym_fold(r, w, at, (char*)w.recvbuff + at, sc);
    __syncthreads(); /* the slice is whole in this rank's output before any thread copies it */
    /* Into every peer's output: peer k = 0..n-2 is rank k, or k + 1 from this rank on. */
    auto peer_out = [&](int k) {
      return w.sym_recv0 + (uint64_t)(k < me ? k : k + 1) * stride + at;
    };
    direct_sym_copy(r, (const char*)w.recvbuff + at, n - 1, peer_out, sc);
  });
}

} /* namespace kern */

#endif
