/*
 * Ring collectives and send/recv over connections (kernels.h, "the data path"), built on the
 * reduce-copy primitive. One CTA per channel (collectives) or per connection (p2p); every step
 * of a CTA is: wait for the slots it needs (one thread per direction polls), all warps
 * reduce-copy, then one thread publishes (fence, then the counter). Reductions fold the
 * incoming partial result first and this rank's input second, so that avg/premulsum scale the
 * user's data exactly once (the input is the pre-op source).
 */
#ifndef CHOIR_KERN_COLL_CUH
#define CHOIR_KERN_COLL_CUH

#include "kern_reduce_copy.cuh"

namespace kern {

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

/* Polls between two looks at the abort flag (host memory: a look costs a PCIe round trip). */
#define KERN_ABORT_CHECK_SPINS 4096

/* One CTA's two connection ends (either may be absent) and their steps. It lives in shared
 * memory (registers are for the copy loops): thread 0 alone writes it, between barriers, and
 * writes the steps back to the connections at the end. */
struct conn_io {
  const char* rbuf;
  uint64_t* rtail;
  uint64_t* rhead;
  uint64_t rstep;
  uint32_t rslot;
  char* sbuf;
  uint64_t* stail;
  uint64_t* shead;
  uint64_t sstep;
  uint32_t sslot;
  uint32_t* ssizes; /* net send ends: the slot byte counts the proxy reads (else NULL) */
  const volatile uint32_t* abort_flag;
};

__device__ __forceinline__ void io_load_recv(conn_io& io, const kern_conn_t* c) {
  io.rbuf = c->buff[KERN_PROTO_SIMPLE];
  io.rtail = c->tail;
  io.rhead = c->head;
  io.rstep = c->step;
  io.rslot = c->slot_bytes[KERN_PROTO_SIMPLE];
}

__device__ __forceinline__ void io_load_send(conn_io& io, const kern_conn_t* c) {
  io.sbuf = c->buff[KERN_PROTO_SIMPLE];
  io.stail = c->tail;
  io.shead = c->head;
  io.sstep = c->step;
  io.sslot = c->slot_bytes[KERN_PROTO_SIMPLE];
  io.ssizes = c->sizes;
}

/* Waits until `*ctr + slack >= target`; false when the communicator was aborted meanwhile. */
__device__ __forceinline__ bool io_spin(const uint64_t* ctr, uint64_t slack, uint64_t target,
                                        const volatile uint32_t* abort_flag) {
  int spins = 0;
  while (ld_acquire_sys(ctr) + slack < target) {
    if (++spins == KERN_ABORT_CHECK_SPINS) {
      spins = 0;
      if (*abort_flag) return false;
    }
  }
  return true;
}

/* All threads: wait for the receive slot to be full and the send slot to be free. The two waits
 * run on two warps at once. Returns false (in every thread) after an abort. */
__device__ __forceinline__ bool io_wait(conn_io& io, bool recv, bool send) {
  __shared__ int aborted;
  if (threadIdx.x == 0) aborted = 0;
  __syncthreads();
  bool ok = true;
  if (recv && threadIdx.x == 0) ok = io_spin(io.rtail, 0, io.rstep + 1, io.abort_flag);
  if (send && threadIdx.x == 32) ok = io_spin(io.shead, KERN_NSLOTS, io.sstep + 1, io.abort_flag);
  if (!ok) aborted = 1;
  __syncthreads();
  return aborted == 0;
}

/* All threads, after the step's copy: thread 0 publishes the data sent (its byte count first
 * where the connection has a size FIFO, then a fence, so the peer sees both before the counter)
 * and the slot consumed. */
__device__ __forceinline__ void io_post(conn_io& io, bool recv, bool send, uint64_t send_bytes) {
  __syncthreads();
  if (threadIdx.x == 0) {
    if (send) {
      if (io.ssizes != nullptr)
        *(volatile uint32_t*)&io.ssizes[io.sstep % KERN_NSLOTS] = (uint32_t)send_bytes;
      fence_acq_rel_sys();
      st_relaxed_sys(io.stail, io.sstep + 1);
    }
    if (recv) st_relaxed_sys(io.rhead, io.rstep + 1);
    io.rstep += recv;
    io.sstep += send;
  }
}

/*
 * One step: srcs = [receive slot if recv] + [usrc if non-NULL], dsts = [udst if non-NULL] +
 * [send slot if send], nelem elements each. pre: usrc gets the pre-op; post: the result gets the
 * post-op. A step with nelem 0 still moves its counters, so both ends stay in step.
 */
template <class R>
__device__ __forceinline__ bool io_step(const R& r, conn_io& io, bool recv, bool send,
                                        const char* usrc, char* udst, uint64_t nelem, bool pre,
                                        bool post) {
  if (!io_wait(io, recv, send)) return false;
  if (nelem > 0) {
    const char* rptr = recv ? io.rbuf + (io.rstep % KERN_NSLOTS) * io.rslot : nullptr;
    char* sptr = send ? io.sbuf + (io.sstep % KERN_NSLOTS) * io.sslot : nullptr;
    rc_ptrs p;
#pragma unroll
    for (int k = 0; k < KERN_RC_MAX_SRCS; k++) p.src[k] = nullptr;
    p.src[0] = recv ? rptr : usrc;
    p.src[1] = usrc;
    p.dst[0] = udst ? udst : sptr;
    p.dst[1] = sptr;
    const int nsrcs = (recv ? 1 : 0) + (usrc ? 1 : 0);
    const int ndsts = (udst ? 1 : 0) + (send ? 1 : 0);
    const uint32_t mask = (usrc && pre) ? (recv ? 2u : 1u) : 0u;
    rc_run(r, p, nelem, nsrcs, ndsts, mask, post, threadIdx.x / 32, blockDim.x / 32,
           threadIdx.x % 32);
  }
  io_post(io, recv, send, nelem * sizeof(typename R::B));
  return true;
}

/* Elements per 16-byte unit: parts and slices are whole units so vectors stay aligned. */
template <class R>
__device__ __forceinline__ uint64_t unit_elems() {
  return KERN_RC_VEC_BYTES / sizeof(typename R::B);
}

/* Part `i` of `n` of count elements, in whole units (the last parts may be short or empty). */
__device__ __forceinline__ void split_part(uint64_t count, uint64_t unit, uint32_t n, uint32_t i,
                                           uint64_t* off_p, uint64_t* cnt_p) {
  const uint64_t units = (count + unit - 1) / unit;
  const uint64_t per = (units + n - 1) / n * unit;
  uint64_t off = per * i;
  if (off > count) off = count;
  uint64_t end = off + per;
  if (end > count) end = count;
  *off_p = off;
  *cnt_p = end - off;
}

__device__ __forceinline__ int mod_n(int a, int n) { return ((a % n) + n) % n; }

template <class R>
__device__ void ring_allreduce(const R& r, const kern_coll_work_t& w, const kern_channel_t& ch,
                               int n, conn_io& io) {
  constexpr uint64_t es = sizeof(typename R::B);
  const uint64_t unit = unit_elems<R>();
  uint64_t off, cnt;
  split_part(w.count, unit, w.nchannels, blockIdx.x, &off, &cnt);
  const char* in = (const char*)w.sendbuff + off * es;
  char* out = (char*)w.recvbuff + off * es;
  if (n == 1) {
    io_step(r, io, false, false, in, out, cnt, true, true);
    return;
  }
  const uint64_t slice = w.chunk_bytes / es;
  const int idx = ch.index;
  for (uint64_t base = 0; base < cnt;) {
    uint64_t chunk = (cnt - base + n - 1) / n;
    chunk = (chunk + unit - 1) / unit * unit;
    if (chunk > slice) chunk = slice;
    auto at = [&](int j, uint64_t* ne) {
      const uint64_t o = base + (uint64_t)j * chunk;
      *ne = o < cnt ? (cnt - o < chunk ? cnt - o : chunk) : 0;
      return o * es;
    };
    uint64_t ne;
    uint64_t o = at(mod_n(idx - 1, n), &ne);
    if (!io_step(r, io, false, true, in + o, nullptr, ne, true, false)) return;
    for (int k = 2; k < n; k++) {
      o = at(mod_n(idx - k, n), &ne);
      if (!io_step(r, io, true, true, in + o, nullptr, ne, true, false)) return;
    }
    o = at(idx, &ne);
    if (!io_step(r, io, true, true, in + o, out + o, ne, true, true)) return;
    for (int k = 1; k < n - 1; k++) {
      o = at(mod_n(idx - k, n), &ne);
      if (!io_step(r, io, true, true, nullptr, out + o, ne, false, false)) return;
    }
    o = at(mod_n(idx + 1, n), &ne);
    if (!io_step(r, io, true, false, nullptr, out + o, ne, false, false)) return;
    base += (uint64_t)n * chunk;
  }
}

template <class R>
__device__ void ring_reducescatter(const R& r, const kern_coll_work_t& w,
                                   const kern_channel_t& ch, int n, conn_io& io) {
  constexpr uint64_t es = sizeof(typename R::B);
  uint64_t off, cnt;
  split_part(w.count, unit_elems<R>(), w.nchannels, blockIdx.x, &off, &cnt);
  const uint64_t slice = w.chunk_bytes / es;
  const int idx = ch.index;
  /* Rank block b of the input starts at b * count elements. */
  auto in = [&](int pos, uint64_t at) {
    return (const char*)w.sendbuff + ((uint64_t)ch.ranks[mod_n(pos, n)] * w.count + at) * es;
  };
  char* out = (char*)w.recvbuff + off * es;
  for (uint64_t base = 0; base < cnt;) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    const uint64_t at = off + base;
    if (n == 1) {
      io_step(r, io, false, false, in(idx, at), out + base * es, ne, true, true);
    } else {
      if (!io_step(r, io, false, true, in(idx - 1, at), nullptr, ne, true, false)) return;
      for (int k = 2; k < n; k++)
        if (!io_step(r, io, true, true, in(idx - k, at), nullptr, ne, true, false)) return;
      if (!io_step(r, io, true, false, in(idx, at), out + base * es, ne, true, true)) return;
    }
    base += ne;
  }
}

template <class R>
__device__ void ring_allgather(const R& r, const kern_coll_work_t& w, const kern_channel_t& ch,
                               int n, conn_io& io) {
  constexpr uint64_t es = sizeof(typename R::B);
  uint64_t off, cnt;
  split_part(w.count, unit_elems<R>(), w.nchannels, blockIdx.x, &off, &cnt);
  const uint64_t slice = w.chunk_bytes / es;
  const int idx = ch.index;
  const char* in = (const char*)w.sendbuff + off * es;
  auto out = [&](int pos, uint64_t at) {
    return (char*)w.recvbuff + ((uint64_t)ch.ranks[mod_n(pos, n)] * w.count + at) * es;
  };
  for (uint64_t base = 0; base < cnt;) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    const uint64_t at = off + base;
    if (!io_step(r, io, false, n > 1, in + base * es, out(idx, at), ne, false, false)) return;
    for (int k = 1; k < n - 1; k++)
      if (!io_step(r, io, true, true, nullptr, out(idx - k, at), ne, false, false)) return;
    if (n > 1 && !io_step(r, io, true, false, nullptr, out(idx + 1, at), ne, false, false)) return;
    base += ne;
  }
}

/* Broadcast: a pipeline from the root along the ring. */
template <class R>
__device__ void ring_broadcast(const R& r, const kern_coll_work_t& w, const kern_channel_t& ch,
                               int n, int root_pos, conn_io& io) {
  constexpr uint64_t es = sizeof(typename R::B);
  uint64_t off, cnt;
  split_part(w.count, unit_elems<R>(), w.nchannels, blockIdx.x, &off, &cnt);
  const uint64_t slice = w.chunk_bytes / es;
  const int d = mod_n(ch.index - root_pos, n);
  const char* in = (const char*)w.sendbuff + off * es;
  char* out = (char*)w.recvbuff + off * es;
  const bool inplace = w.sendbuff == w.recvbuff;
  for (uint64_t base = 0; base < cnt;) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    const uint64_t b = base * es;
    if (d == 0) {
      if (n > 1 || !inplace) {
        if (!io_step(r, io, false, n > 1, in + b, inplace ? nullptr : out + b, ne, false, false))
          return;
      }
    } else {
      if (!io_step(r, io, true, d < n - 1, nullptr, out + b, ne, false, false)) return;
    }
    base += ne;
  }
}

/* Reduce: a pipeline that starts after the root and ends at it. */
template <class R>
__device__ void ring_reduce(const R& r, const kern_coll_work_t& w, const kern_channel_t& ch, int n,
                            int root_pos, conn_io& io) {
  constexpr uint64_t es = sizeof(typename R::B);
  uint64_t off, cnt;
  split_part(w.count, unit_elems<R>(), w.nchannels, blockIdx.x, &off, &cnt);
  const uint64_t slice = w.chunk_bytes / es;
  const int d = mod_n(ch.index - root_pos, n);
  const char* in = (const char*)w.sendbuff + off * es;
  char* out = (char*)w.recvbuff + off * es;
  for (uint64_t base = 0; base < cnt;) {
    const uint64_t ne = cnt - base < slice ? cnt - base : slice;
    const uint64_t b = base * es;
    bool ok;
    if (n == 1)
      ok = io_step(r, io, false, false, in + b, out + b, ne, true, true);
    else if (d == 0)
      ok = io_step(r, io, true, false, in + b, out + b, ne, true, true);
    else
      ok = io_step(r, io, d != 1, true, in + b, nullptr, ne, true, false);
    if (!ok) return;
    base += ne;
  }
}

/* The ring position of `rank` in the channel's ring. */
__device__ __forceinline__ int ring_pos(const kern_channel_t& ch, int n, int rank) {
  for (int i = 0; i < n; i++)
    if (ch.ranks[i] == rank) return i;
  return 0;
}

/* A collective: CTA c runs channel c. */
template <class R>
__device__ __forceinline__ void coll_run(const R& r, const kern_coll_work_t& w) {
  const kern_comm_t* comm = w.comm;
  const kern_channel_t& ch = comm->channels[blockIdx.x];
  const int n = comm->nranks;
  __shared__ conn_io io;
  if (threadIdx.x == 0) {
    io.abort_flag = comm->abort_flag;
    io.rstep = io.sstep = 0;
    if (n > 1) {
      io_load_recv(io, &ch.recv);
      io_load_send(io, &ch.send);
    }
  }
  __syncthreads();
  switch (w.coll) {
    case KERN_COLL_ALLREDUCE: ring_allreduce(r, w, ch, n, io); break;
    case KERN_COLL_REDUCESCATTER: ring_reducescatter(r, w, ch, n, io); break;
    case KERN_COLL_ALLGATHER: ring_allgather(r, w, ch, n, io); break;
    case KERN_COLL_BROADCAST: ring_broadcast(r, w, ch, n, ring_pos(ch, n, w.root), io); break;
    case KERN_COLL_REDUCE: ring_reduce(r, w, ch, n, ring_pos(ch, n, w.root), io); break;
    default: break;
  }
  if (n > 1 && threadIdx.x == 0) {
    kern_channel_t* chw = &w.comm->channels[blockIdx.x];
    chw->recv.step = io.rstep;
    chw->send.step = io.sstep;
  }
}

template <int OP, int TYPE>
__global__ void __launch_bounds__(KERN_NTHREADS, 1)
    kern_coll_kernel(const __grid_constant__ kern_coll_work_t w) {
  const red<OP, TYPE> r(w.scalar_bits, w.scalar_ptr, w.divisor);
  coll_run(r, w);
}

/* w == NULL: load the kernel only (see kern_preload in kernels.h). */
template <int OP, int TYPE>
cudaError_t coll_launch(const kern_coll_work_t* w, cudaStream_t stream) {
  if (w == nullptr) {
    cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, (const void*)kern_coll_kernel<OP, TYPE>);
  }
  void* params[] = {(void*)w};
  return cudaLaunchKernel((const void*)kern_coll_kernel<OP, TYPE>, dim3(w->nchannels),
                          dim3(KERN_NTHREADS), params, 0, stream);
}

} /* namespace kern */

/* One reduction-collective instance, as listed by instances.py. */
#define KERN_COLL_INSTANCE(opname, tyname, OPE, TYE)                                            \
  extern "C" kern_coll_launch_fn kern_coll_launch_##opname##_##tyname;                          \
  extern "C" cudaError_t kern_coll_launch_##opname##_##tyname(const kern_coll_work_t* w,        \
                                                              cudaStream_t stream) {            \
    return kern::coll_launch<OPE, TYE>(w, stream);                                              \
  }

#endif
