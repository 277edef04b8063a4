/*
 * Ring collectives of kernels/ on every protocol, n "ranks" on one GPU: each rank a kern_comm_t
 * in device memory with NCH ring channels whose connections (every protocol's buffer, device
 * memory, flag-synchronized LL/LL128) are built here by hand, each rank's kernel launched through
 * kern_coll_launch on its own stream, all running at once. Every element of every rank's output
 * is checked against test/harness/ref.h (ref_acc: exact for integers and max/min, and for the
 * float data used here, small integers, wherever every order is exact; otherwise within
 * ref_acc_tolerance).
 *
 * Cases: for each protocol and collective, n cycles through {2, 3, 4, 1} (1: no connection at
 * all) and counts through {1, 7, 1003, 20000 elements}, in place and out of place alternately,
 * threads through {64, 192, 512} and the chunk cap through {2048, 256, 65536}:
 *   AllReduce, ReduceScatter, Reduce: every (op, type) instance this build has;
 *   AllGather, Broadcast (bytes): 4 cases per protocol each, roots cycling.
 * Then works that start past channel 0 (channel0 = 1), and pairs of AllReduces in one launch,
 * each on a channel of its own (kern_coll_batch_launch), in both orders.
 * Connections keep their step counters from case to case, so protocols alternate on them.
 *
 * Exit: 0 all passed, 1 a failure (or a launch that did not end within 30 s), 77 without a GPU.
 *   --bench  also print, per protocol, 2-rank all_reduce times at 8 B .. 64 KB and the time per
 *            ring step (informational: the time of 1 and of 64 rounds of tiny steps, differenced)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "nccl_common.h"
#include "ref.h"

#define MAX_RANKS 4
#define NCH 2
#define BUF_BYTES ((size_t)MAX_RANKS * 20000 * 8 + 4096)
static const uint32_t slot_bytes[KERN_PROTO_NUM] = {16384, 30720, 32768}; /* LL, LL128, Simple */
static const char* const coll_names[KERN_COLL_NUM] = {"Broadcast", "Reduce", "AllGather",
                                                      "ReduceScatter", "AllReduce"};

#define CUDA_OK(call)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    if (e_ != cudaSuccess) {                                                               \
      fprintf(stderr, "kern-ring: %s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
              cudaGetErrorString(e_));                                                     \
      exit(1);                                                                             \
    }                                                                                      \
  } while (0)

struct world {
  int n;
  kern_comm_t* comm[MAX_RANKS];
  cudaStream_t stream[MAX_RANKS];
  unsigned char* sendbuf[MAX_RANKS]; /* device */
  unsigned char* recvbuf[MAX_RANKS];
};

static uint32_t* d_abort;
static unsigned char* h_in[MAX_RANKS];
static unsigned char* h_out;
static int failures, printed, ncases;
/* The first channel of run_case's works (kern_coll_work_t.channel0): 1 runs them on channel 1
 * only, as a launch that spreads its works puts one past channel 0. */
static int case_ch0;

static void* dalloc(size_t bytes) {
  void* p;
  CUDA_OK(cudaMalloc(&p, bytes));
  CUDA_OK(cudaMemset(p, 0, bytes));
  return p;
}

/* Connection r -> r+1 of each channel: buffers and counters at the receiver (one GPU here). */
static void world_make(struct world* w, int n) {
  w->n = n;
  kern_conn_t conn[NCH][MAX_RANKS]; /* [c][r]: the connection from r to r+1 */
  memset(conn, 0, sizeof conn);
  int32_t ranks[MAX_RANKS];
  for (int r = 0; r < n; r++) ranks[r] = r;
  int32_t* d_ranks = dalloc(sizeof ranks);
  CUDA_OK(cudaMemcpy(d_ranks, ranks, sizeof ranks, cudaMemcpyHostToDevice));
  for (int c = 0; c < NCH; c++) {
    for (int r = 0; r < n && n > 1; r++) {
      kern_conn_t* k = &conn[c][r];
      for (int p = 0; p < KERN_PROTO_NUM; p++) {
        k->buff[p] = dalloc((size_t)KERN_NSLOTS * slot_bytes[p]);
        k->slot_bytes[p] = slot_bytes[p];
      }
      uint64_t* ht = dalloc(2 * sizeof(uint64_t));
      k->head = ht;
      k->tail = ht + 1;
      k->connected = 1;
      k->transport = KERN_TRANSPORT_P2P;
    }
  }
  for (int r = 0; r < n; r++) {
    kern_comm_t* h = calloc(1, sizeof *h);
    h->rank = r;
    h->nranks = n;
    h->nchannels = NCH;
    h->abort_flag = d_abort;
    for (int c = 0; c < NCH; c++) {
      kern_channel_t* ch = &h->channels[c];
      if (n > 1) {
        ch->send = conn[c][r];
        ch->recv = conn[c][(r + n - 1) % n];
      }
      ch->prev = (r + n - 1) % n;
      ch->next = (r + 1) % n;
      ch->index = r;
      ch->ranks = d_ranks;
    }
    w->comm[r] = dalloc(sizeof *h);
    CUDA_OK(cudaMemcpy(w->comm[r], h, sizeof *h, cudaMemcpyHostToDevice));
    free(h);
    CUDA_OK(cudaStreamCreateWithFlags(&w->stream[r], cudaStreamNonBlocking));
    w->sendbuf[r] = dalloc(BUF_BYTES);
    w->recvbuf[r] = dalloc(BUF_BYTES);
  }
}

static void fill(unsigned char* buf, int t, size_t n, unsigned seed) {
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    if (ref_type_is_float(t)) {
      const int lim = (t == REF_FP8_E4M3 || t == REF_FP8_E5M2) ? 2 : 8;
      ref_store(t, buf, i, ref_from_f64(t, (double)((int)(x % (2 * lim + 1)) - lim)));
    } else {
      ref_store(t, buf, i, ref_wrap(t, x));
    }
  }
}

static ref_val scalar_of(int t, int r) {
  static const double f[MAX_RANKS] = {-2.0, 1.0, 2.0, -1.0};
  return ref_type_is_float(t) ? ref_from_f64(t, f[r]) : ref_from_i64(t, r + 3);
}

/* Launches the collective on every rank at once and waits (30 s watchdog). */
static void launch_all(struct world* w, const kern_coll_work_t* works) {
  for (int r = 0; r < w->n; r++) {
    ncclResult_t res = kern_coll_launch(&works[r], w->stream[r]);
    if (res != ncclSuccess) {
      printf("FAIL launch: %s\n", kern_last_error());
      exit(1);
    }
  }
  const time_t t0 = time(NULL);
  for (int r = 0; r < w->n; r++) {
    cudaError_t q;
    while ((q = cudaStreamQuery(w->stream[r])) == cudaErrorNotReady && time(NULL) - t0 < 30) {
    }
    if (q != cudaSuccess) {
      printf("FAIL: rank %d's kernel did not end within 30 s (%s): a deadlock; stopping\n", r,
             cudaGetErrorString(q));
      exit(1);
    }
  }
}

static void check_elem(const char* ctx, int rank, size_t i, int t, int op, const struct ref_acc* a,
                       ref_val got) {
  if (ref_acc_accept(a, t, op, got, ref_acc_tolerance(a, t, op))) return;
  failures++;
  if (printed++ < 20)
    printf("FAIL %s: rank %d [%zu] = %g (bits 0x%llx), expected %g\n", ctx, rank, i,
           ref_to_f64(t, got), (unsigned long long)got.u, ref_acc_exact(a, t, op));
}

static void run_case(struct world* w, int coll, int proto, int op, int t, size_t count,
                     int inplace, uint32_t nthreads, uint32_t chunk, int root) {
  const int n = w->n;
  const size_t es = ref_type_size(t);
  const int rs = coll == KERN_COLL_REDUCESCATTER, ag = coll == KERN_COLL_ALLGATHER;
  const size_t in_elems = rs ? n * count : count, out_elems = ag ? n * count : count;
  char ctx[200];
  snprintf(ctx, sizeof ctx, "%s %s %s/%s n=%d count=%zu %s nthreads=%u chunk=%u root=%d",
           coll_names[coll], kern_proto_name(proto), ref_op_name(op), ref_type_name(t), n, count,
           inplace ? "in-place" : "out-of-place", nthreads, chunk, root);
  kern_coll_work_t works[MAX_RANKS];
  for (int r = 0; r < n; r++) {
    fill(h_in[r], t, in_elems, (unsigned)(ncases * 31 + r));
    unsigned char* recv = w->recvbuf[r];
    unsigned char* send = w->sendbuf[r];
    CUDA_OK(cudaMemset(recv, 0xa5, BUF_BYTES));
    if (inplace) {
      if (ag) send = recv + (size_t)r * count * es;
      else if (rs) send = recv, recv = recv + (size_t)r * count * es;
      else send = recv;
    }
    CUDA_OK(cudaMemcpy(send, h_in[r], in_elems * es, cudaMemcpyHostToDevice));
    kern_coll_work_t* k = &works[r];
    memset(k, 0, sizeof *k);
    k->sendbuff = send;
    k->recvbuff = recv;
    k->count = count;
    unsigned char sb[8] = {0};
    ref_store(t, sb, 0, scalar_of(t, r));
    memcpy(&k->scalar_bits, sb, sizeof sb);
    k->comm = w->comm[r];
    k->coll = coll;
    k->op = op;
    k->type = t;
    k->root = root;
    k->divisor = n;
    k->channel0 = (uint16_t)case_ch0;
    k->nchannels = NCH - case_ch0;
    k->chunk_bytes = chunk;
    k->algo = NCCL_ALGO_RING;
    k->proto = proto;
    k->nthreads = nthreads;
  }
  launch_all(w, works);
  ncases++;
  for (int r = 0; r < n; r++) {
    if (coll == KERN_COLL_REDUCE && r != root) continue;
    unsigned char* recv = w->recvbuf[r] + (inplace && rs ? (size_t)r * count * es : 0);
    CUDA_OK(cudaMemcpy(h_out, recv, out_elems * es, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < out_elems; i++) {
      struct ref_acc a;
      ref_acc_init(&a);
      if (coll == KERN_COLL_BROADCAST) {
        ref_acc_add(&a, t, REF_SUM, ref_load(t, h_in[root], i), ref_from_i64(t, 1));
      } else if (ag) {
        ref_acc_add(&a, t, REF_SUM, ref_load(t, h_in[i / count], i % count), ref_from_i64(t, 1));
      } else {
        for (int q = 0; q < n; q++)
          ref_acc_add(&a, t, op, ref_load(t, h_in[q], (rs ? (size_t)r * count : 0) + i),
                      scalar_of(t, q));
      }
      const int cop = (coll == KERN_COLL_BROADCAST || ag) ? REF_SUM : op;
      const size_t before = failures;
      check_elem(ctx, r, i, t, cop, &a, ref_load(t, h_out, i));
      if ((size_t)failures != before) break;
    }
  }
}

/* Two AllReduces (f32 sum) in one batch per rank, each on a channel of its own (side by side:
 * work 0 on channel first, work 1 on the other), from two halves of the buffers, both checked.
 * Counts ca and cb elements. */
static void run_pair(struct world* w, int proto, size_t ca, size_t cb, int first) {
  const int n = w->n, t = ncclFloat32;
  const size_t half = BUF_BYTES / 2 / 4 * 4, counts[2] = {ca, cb};
  char ctx[160];
  snprintf(ctx, sizeof ctx, "pair %s n=%d counts %zu (channel %d) and %zu (channel %d)",
           kern_proto_name(proto), n, ca, first, cb, 1 - first);
  static kern_coll_batch_t b[MAX_RANKS];
  static unsigned char* in[2][MAX_RANKS];
  for (int r = 0; r < n; r++) {
    b[r].tag = KERN_COLL_BATCH_TAG;
    b[r].nworks = 2;
    CUDA_OK(cudaMemset(w->recvbuf[r], 0xa5, BUF_BYTES));
    for (int j = 0; j < 2; j++) {
      if (in[j][r] == NULL) in[j][r] = malloc(BUF_BYTES);
      fill(in[j][r], t, counts[j], (unsigned)(ncases * 37 + r * 5 + j));
      CUDA_OK(cudaMemcpy(w->sendbuf[r] + j * half, in[j][r], counts[j] * 4,
                         cudaMemcpyHostToDevice));
      kern_coll_work_t* k = &b[r].works[j];
      memset(k, 0, sizeof *k);
      k->sendbuff = w->sendbuf[r] + j * half;
      k->recvbuff = w->recvbuf[r] + j * half;
      k->count = counts[j];
      k->comm = w->comm[r];
      k->coll = KERN_COLL_ALLREDUCE;
      k->op = KERN_OP_SUM;
      k->type = t;
      k->divisor = n;
      k->channel0 = (uint16_t)(j == 0 ? first : 1 - first);
      k->nchannels = 1;
      k->chunk_bytes = 2048;
      k->algo = NCCL_ALGO_RING;
      k->proto = proto;
      k->nthreads = 256;
    }
    if (kern_coll_batch_launch(&b[r], w->stream[r]) != ncclSuccess) {
      printf("FAIL %s: launch: %s\n", ctx, kern_last_error());
      exit(1);
    }
  }
  const time_t t0 = time(NULL);
  for (int r = 0; r < n; r++) {
    cudaError_t q;
    while ((q = cudaStreamQuery(w->stream[r])) == cudaErrorNotReady && time(NULL) - t0 < 30) {
    }
    if (q != cudaSuccess) {
      printf("FAIL %s: rank %d's kernel did not end within 30 s (%s); stopping\n", ctx, r,
             cudaGetErrorString(q));
      exit(1);
    }
  }
  ncases++;
  for (int r = 0; r < n; r++)
    for (int j = 0; j < 2; j++) {
      CUDA_OK(cudaMemcpy(h_out, w->recvbuf[r] + j * half, counts[j] * 4, cudaMemcpyDeviceToHost));
      for (size_t i = 0; i < counts[j]; i++) {
        struct ref_acc a;
        ref_acc_init(&a);
        for (int q = 0; q < n; q++)
          ref_acc_add(&a, t, REF_SUM, ref_load(t, in[j][q], i), ref_from_i64(t, 1));
        const size_t before = failures;
        check_elem(ctx, r, i, t, REF_SUM, &a, ref_load(t, h_out, i));
        if ((size_t)failures != before) break;
      }
    }
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Mean time of iters back-to-back all_reduce (sum, f32) on 2 ranks, one channel. */
static double bench_one(struct world* w, int proto, size_t count, uint32_t chunk, int iters) {
  kern_coll_work_t works[MAX_RANKS];
  for (int r = 0; r < w->n; r++) {
    kern_coll_work_t* k = &works[r];
    memset(k, 0, sizeof *k);
    k->sendbuff = w->sendbuf[r];
    k->recvbuff = w->recvbuf[r];
    k->count = count;
    k->comm = w->comm[r];
    k->coll = KERN_COLL_ALLREDUCE;
    k->op = KERN_OP_SUM;
    k->type = ncclFloat32;
    k->divisor = w->n;
    k->nchannels = 1;
    k->chunk_bytes = chunk;
    k->algo = NCCL_ALGO_RING;
    k->proto = proto;
    k->nthreads = proto == KERN_PROTO_SIMPLE ? 512 : 256;
  }
  launch_all(w, works);
  const double t0 = now_us();
  for (int i = 0; i < iters; i++)
    for (int r = 0; r < w->n; r++)
      if (kern_coll_launch(&works[r], w->stream[r]) != ncclSuccess) exit(1);
  for (int r = 0; r < w->n; r++) CUDA_OK(cudaStreamSynchronize(w->stream[r]));
  return (now_us() - t0) / iters;
}

int main(int argc, char** argv) {
  const int bench = argc > 1 && strcmp(argv[1], "--bench") == 0;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    printf("kern-ring: skipped: no CUDA device\n");
    return 77;
  }
  if (kern_preload() != ncclSuccess) {
    printf("FAIL kern_preload: %s\n", kern_last_error());
    return 1;
  }
  void* hab;
  CUDA_OK(cudaHostAlloc(&hab, sizeof(uint32_t), cudaHostAllocMapped));
  *(volatile uint32_t*)hab = 0;
  CUDA_OK(cudaHostGetDevicePointer((void**)&d_abort, hab, 0));
  for (int r = 0; r < MAX_RANKS; r++) h_in[r] = malloc(BUF_BYTES);
  h_out = malloc(BUF_BYTES);
  struct world worlds[MAX_RANKS + 1];
  for (int n = 1; n <= MAX_RANKS; n++) world_make(&worlds[n], n);

  const int ns[] = {2, 3, 4, 1};
  const size_t counts[] = {1, 7, 1003, 20000};
  const uint32_t threads[] = {64, 192, 512};
  const uint32_t chunks[] = {2048, 256, 65536};
  const int reds[] = {KERN_COLL_ALLREDUCE, KERN_COLL_REDUCESCATTER, KERN_COLL_REDUCE};
  for (int proto = 0; proto < KERN_PROTO_NUM; proto++) {
    for (int ci = 0; ci < 3; ci++) {
      int k = 0;
      for (int op = 0; op < KERN_OP_NUM; op++)
        for (int t = 0; t < ncclNumTypes; t++) {
          if (!kern_coll_available((kern_op_t)op, (ncclDataType_t)t)) continue;
          const int n = ns[k % 4];
          run_case(&worlds[n], reds[ci], proto, op, t, counts[(k / 4 + k) % 4], k % 2,
                   threads[k % 3], chunks[(k / 3) % 3], k % n);
          k++;
        }
    }
    for (int k = 0; k < 8; k++) {
      const int n = ns[k % 4];
      const int coll = k < 4 ? KERN_COLL_ALLGATHER : KERN_COLL_BROADCAST;
      run_case(&worlds[n], coll, proto, KERN_OP_SUM, ncclUint8, counts[(k + 1) % 4] * 4 + 3,
               k % 2, threads[k % 3], chunks[k % 3], (k + 1) % n);
    }
  }
  /* Works past channel 0 (channel0 = 1), and two works side by side on channels of their own
   * in one launch, in both orders, on every protocol. */
  case_ch0 = 1;
  for (int proto = 0; proto < KERN_PROTO_NUM; proto++)
    for (int k = 0; k < 6; k++) {
      const int n = ns[k % 4];
      if (k < 3)
        run_case(&worlds[n], reds[k], proto, KERN_OP_SUM, ncclFloat32, counts[(k + 2) % 4],
                 k % 2, threads[k % 3], chunks[k % 3], k % n);
      else
        run_case(&worlds[n], k == 3 ? KERN_COLL_ALLGATHER : KERN_COLL_BROADCAST, proto,
                 KERN_OP_SUM, ncclUint8, counts[k % 4] * 4 + 3, k % 2, threads[k % 3],
                 chunks[k % 3], (k + 1) % n);
    }
  case_ch0 = 0;
  for (int proto = 0; proto < KERN_PROTO_NUM; proto++)
    for (int k = 0; k < 4; k++)
      run_pair(&worlds[ns[k % 3]], proto, counts[(k + 3) % 4], counts[(k + 1) % 4], k % 2);
  printf("kern-ring: %d cases, %d failures\n", ncases, failures);

  if (bench && failures == 0) {
    struct world* w = &worlds[2];
    for (int proto = 0; proto < KERN_PROTO_NUM; proto++) {
      printf("bench %s all_reduce 2 ranks, 1 channel:", kern_proto_name(proto));
      for (size_t bytes = 8; bytes <= 65536; bytes *= 8)
        printf(" %zuB %.1fus", bytes, bench_one(w, proto, bytes / 4, 65536, 2000));
      /* Rounds of 3 steps (send, recvReduceCopySend, recv) of 64 bytes: 1 round vs 64. */
      const double t1 = bench_one(w, proto, 2 * 16, 64, 500);
      const double t64 = bench_one(w, proto, 2 * 16 * 64, 64, 500);
      printf("; per ring step %.2f us\n", (t64 - t1) / (3 * 63));
    }
  }
  return failures ? 1 : 0;
}
