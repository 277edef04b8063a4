/*
 * GPU checker of the reduce-copy primitive (kernels.h), in the manner of dav1d's checkasm: every
 * built (op, type) instance against the host reference of test/harness/ref.h.
 *
 * For every built (op, type), nsrcs N in {1,2,3,8}, ndsts M in {1,2}, counts {0, 1, 7, 1023,
 * 65536+3, 2^20} and four pointer layouts, it launches the kernel and compares EVERY element of
 * every destination with the reference: exactly for integer types and max/min, within
 * ref_tolerance for the other floating-point results (derivation in ref.h; the kernel's rounding
 * chain per term is at most: the 1/n rounding, one multiply, N-1 additions, each through fp16 and
 * fp8 for the fp8 types, which is what ref_tolerance's k = N+2 for avg, N+1 for premulsum and N
 * for sum and prod cover), and exactly wherever ref.h finds the element's result exact in every
 * order (ref_acc_determined). It also checks that nothing outside [dst, dst+count) was written.
 *
 * Data, floating types: two passes. "random": magnitudes in [0.75, 1.5), random signs, scalar
 * -1.5. "exact": per element, four of the eight sources positive and four negative (which ones
 * turns with the element), magnitudes 1 or 2 (fp8) or integers 1..2^p/16 (up to 1024, and
 * small enough that a product of 8 stays finite: 3 for fp16), scalar -2: most results are then
 * exact in every order and are checked bit for bit. The exact pass is what makes a source missing
 * from fp8 (and wide bf16) sums visible: ref_tolerance of 8 fp8 terms is wider than one term.
 * Integer types: one pass, any bit pattern.
 *
 * Layouts (offsets in elements from 256-byte aligned allocations):
 *   aligned  every pointer at offset 0: pure 16-byte vector path
 *   shared   every pointer at offset 3: same misalignment, so element head + vectors + tail;
 *            launched on a single CTA, so each warp loops over many chunks
 *   mixed    src s at offset s, dst d at offset d+1: pointers disagree modulo 16, so element
 *            path throughout; 3 CTAs; premulsum scales only sources 0 and 2 (preop_mask 0x5)
 *   inplace  dst 0 is src 0 (offset 0)
 * avg divides by N (a true average, ref.h's own avg), except in layout shared (divisor 1000) and
 * mixed (255), as a collective step over more ranks than sources does.
 * The premulsum scalar comes by value or from device memory, alternating by case.
 *
 * Exit: 0 when every case passed, 1 on any failure, 77 (skipped) when there is no GPU.
 *   --bench       also print the bandwidth of a few shapes (informational, not a pass criterion)
 *   --sweep       --bench, at several grid sizes too
 *   --bench-only  the bandwidths alone, no checking (exit 0)
 *   --quick       leave out the 2^20 count
 *   --drop-last-source   planted fault: every launch of N >= 2 sources gets only the first N - 1
 *                 (the reference still has N); exit 0 only when every instance then fails, in
 *                 each pass (kern-reduce-copy-catches-dropped-source)
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels.h"
#include "ref.h"

#define MAX_COUNT ((size_t)1 << 20)
#define MAX_OFFSET 16 /* elements: room for the layouts' offsets */
#define GUARD 256     /* bytes checked on each side of a destination range */
#define BUF_BYTES(size) (GUARD + (MAX_COUNT + MAX_OFFSET) * (size) + GUARD)
#define NTHREADS_REF 16

enum layout { LAYOUT_ALIGNED, LAYOUT_SHARED, LAYOUT_MIXED, LAYOUT_INPLACE, NLAYOUTS };
static const char* const layout_names[NLAYOUTS] = {"aligned", "shared", "mixed", "inplace"};
static const int nsrcs_list[] = {1, 2, 3, 8};
static const size_t counts_all[] = {0, 1, 7, 1023, 65536 + 3, (size_t)1 << 20};

/* Each source and destination lives GUARD bytes into its own allocation. */
static unsigned char* d_src[KERN_RC_MAX_SRCS];
static unsigned char* d_dst[KERN_RC_MAX_DSTS];
static unsigned char* h_src[KERN_RC_MAX_SRCS];
static unsigned char* h_dst;
static void* d_scalar;

static int failures;
static int printed;
static int drop_last_source; /* --drop-last-source */

enum { PASS_RANDOM, PASS_EXACT };
static const char* const pass_names[2] = {"random", "exact"};

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) {
  /* splitmix64: deterministic, so a failure reproduces. */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Integers: any bit pattern (sums and products wrap). Floats, random pass: magnitude in
 * [0.75, 1.5), random sign: sums cancel, and a product of 8 stays well inside every type's
 * normal range. Exact pass: see the header comment. */
static void fill_sources(int t, int pass) {
  size_t size = ref_type_size(t);
  size_t n = (BUF_BYTES(size) - 2 * GUARD) / size;
  uint64_t range = 2;
  if (ref_type_precision(t) > 4) {
    range = (uint64_t)1 << (ref_type_precision(t) - 4);
    if (range > 1024) range = 1024;
  }
  /* A product of all 8 sources must stay finite (fp16: at most 3^8). */
  while (range > 2 && pow((double)range, KERN_RC_MAX_SRCS) > ref_type_max(t)) range--;
  for (size_t i = 0; i < n; i++) {
    const unsigned first_pos = (unsigned)(rng_next() % KERN_RC_MAX_SRCS);
    for (int s = 0; s < KERN_RC_MAX_SRCS; s++) {
      ref_val v;
      if (!ref_type_is_float(t)) {
        v = ref_wrap(t, rng_next());
      } else if (pass == PASS_EXACT) {
        double m = (double)(1 + rng_next() % range);
        int negative = ((unsigned)s + first_pos) % KERN_RC_MAX_SRCS >= KERN_RC_MAX_SRCS / 2;
        v = ref_from_f64(t, negative ? -m : m);
      } else {
        double m = 0.75 + 0.75 * (double)(rng_next() >> 11) * 0x1p-53;
        v = ref_from_f64(t, (rng_next() & 1) ? -m : m);
      }
      ref_store(t, h_src[s] + GUARD, i, v);
    }
  }
  for (int s = 0; s < KERN_RC_MAX_SRCS; s++)
    CUDA_OK(cudaMemcpy(d_src[s], h_src[s], BUF_BYTES(size), cudaMemcpyHostToDevice));
}

/* The premulsum scalar: a power of two in the exact pass, so that products stay exact. */
static int scalar_pass;
static ref_val scalar_of(int t) {
  if (!ref_type_is_float(t)) return ref_from_i64(t, 3);
  return ref_from_f64(t, scalar_pass == PASS_EXACT ? -2.0 : -1.5);
}

/* The expected value of one element: exact (want) or within tol of exact. */
struct expect {
  ref_val want;
  double exact;
  double tol;
};

struct ref_job {
  int t, op, nsrcs, divisor;
  uint32_t preop_mask;
  size_t src_off[KERN_RC_MAX_SRCS];
  size_t begin, end;
  struct expect* out;
};

static void* ref_worker(void* arg) {
  const struct ref_job* j = arg;
  const ref_val scalar = scalar_of(j->t), one = ref_from_i64(j->t, 1);
  for (size_t i = j->begin; i < j->end; i++) {
    struct ref_acc a;
    ref_acc_init(&a);
    for (int s = 0; s < j->nsrcs; s++) {
      ref_val x = ref_load(j->t, h_src[s] + GUARD, j->src_off[s] + i);
      ref_acc_add(&a, j->t, j->op, x, ((j->preop_mask >> s) & 1) ? scalar : one);
    }
    struct expect* e = &j->out[i];
    if (j->op == REF_AVG && j->divisor != j->nsrcs) {
      /* avg by a divisor other than the number of terms (a collective step over more ranks than
       * sources): the same arithmetic as ref.h's avg, with the divisor in place of n. */
      e->want = ref_avg_finish(j->t, a.v, j->divisor);
      e->exact = a.exact / j->divisor;
      e->tol = ref_tolerance(j->t, REF_AVG, a.n, a.sum_abs / j->divisor);
    } else {
      e->want = ref_acc_result(&a, j->t, j->op);
      e->exact = ref_acc_exact(&a, j->t, j->op);
      e->tol = ref_acc_tolerance(&a, j->t, j->op);
    }
  }
  return NULL;
}

/* Reference for elements [0, n) of one (type, op, nsrcs, layout), in parallel. */
static void compute_reference(int t, int op, int nsrcs, int divisor, uint32_t mask,
                              const size_t* src_off, size_t n, struct expect* out) {
  pthread_t th[NTHREADS_REF];
  struct ref_job jobs[NTHREADS_REF];
  for (int k = 0; k < NTHREADS_REF; k++) {
    struct ref_job* j = &jobs[k];
    j->t = t;
    j->op = op;
    j->nsrcs = nsrcs;
    j->divisor = divisor;
    j->preop_mask = mask;
    memcpy(j->src_off, src_off, sizeof(j->src_off));
    j->begin = n * (size_t)k / NTHREADS_REF;
    j->end = n * (size_t)(k + 1) / NTHREADS_REF;
    j->out = out;
    if (pthread_create(&th[k], NULL, ref_worker, j) != 0) {
      fprintf(stderr, "pthread_create failed\n");
      exit(1);
    }
  }
  for (int k = 0; k < NTHREADS_REF; k++) pthread_join(th[k], NULL);
}

static void fail_line(const char* what, int t, int op, int nsrcs, int ndsts, size_t count,
                      int layout, const char* detail) {
  failures++;
  if (printed++ < 40)
    fprintf(stderr, "FAIL %s/%s (%s data) N=%d M=%d count=%zu layout=%s: %s: %s\n",
            kern_op_name(op), kern_type_name(t), pass_names[scalar_pass], nsrcs, ndsts, count,
            layout_names[layout], what, detail);
}

/* Compares one destination as read back (guards included) against the expectations. For an
 * in-place destination the bytes outside the range must still be the source's. Returns the
 * number of bad elements. */
static size_t check_dst(int t, int op, int nsrcs, int ndsts, size_t count, int layout, int d,
                        const unsigned char* got, const unsigned char* outside,
                        const struct expect* ex) {
  size_t size = ref_type_size(t), bad = 0;
  char detail[256];
  for (size_t b = 0; b < GUARD; b++) {
    size_t after = GUARD + count * size + b;
    if (got[b] != outside[b] || got[after] != outside[after]) {
      snprintf(detail, sizeof detail, "dst%d: byte %s the range changed", d,
               got[b] != outside[b] ? "before" : "after");
      fail_line("guard", t, op, nsrcs, ndsts, count, layout, detail);
      bad++;
      break;
    }
  }
  for (size_t i = 0; i < count; i++) {
    ref_val g = ref_load(t, got + GUARD, i);
    const struct expect* e = &ex[i];
    int ok;
    if (!ref_type_is_float(t))
      ok = g.u == e->want.u;
    else if (ref_isnan(g.f))
      ok = 0;
    else if (op == REF_MAX || op == REF_MIN)
      ok = g.f == e->want.f;
    else
      ok = fabs(g.f - e->exact) <= e->tol;
    if (!ok) {
      if (bad < 3) {
        if (ref_type_is_float(t))
          snprintf(detail, sizeof detail, "dst%d[%zu] = %.9g, want %.9g (exact %.9g, tol %.3g)", d,
                   i, g.f, e->want.f, e->exact, e->tol);
        else
          snprintf(detail, sizeof detail, "dst%d[%zu] = %lld (0x%llx), want %lld (0x%llx)", d, i,
                   (long long)g.i, (unsigned long long)g.u, (long long)e->want.i,
                   (unsigned long long)e->want.u);
        fail_line("value", t, op, nsrcs, ndsts, count, layout, detail);
      }
      bad++;
    }
  }
  return bad;
}

static int run_cases(int t, int op, const size_t* counts, int ncounts, struct expect* ex,
                     unsigned char* outside) {
  size_t size = ref_type_size(t);
  int cases = 0;
  for (int ni = 0; ni < (int)(sizeof nsrcs_list / sizeof nsrcs_list[0]); ni++) {
    const int nsrcs = nsrcs_list[ni];
    for (int layout = 0; layout < NLAYOUTS; layout++) {
      size_t src_off[KERN_RC_MAX_SRCS] = {0}, dst_off[KERN_RC_MAX_DSTS] = {0};
      uint32_t mask = (1u << nsrcs) - 1;
      unsigned nctas = 0;
      int divisor = nsrcs;
      if (layout == LAYOUT_SHARED) {
        for (int s = 0; s < KERN_RC_MAX_SRCS; s++) src_off[s] = 3;
        for (int d = 0; d < KERN_RC_MAX_DSTS; d++) dst_off[d] = 3;
        nctas = 1;
        divisor = 1000; /* above any 8-bit magnitude: integer quotients 0 */
      } else if (layout == LAYOUT_MIXED) {
        for (int s = 0; s < KERN_RC_MAX_SRCS; s++) src_off[s] = (size_t)s;
        for (int d = 0; d < KERN_RC_MAX_DSTS; d++) dst_off[d] = (size_t)d + 1;
        nctas = 3;
        divisor = 255; /* the largest divisor of the 8-bit multiply-shift division */
        /* avg keeps every source scaled: a partial mask is no average, and ref.h knows none. */
        if (op == REF_PREMULSUM) mask &= 0x5u;
      }
      size_t maxc = counts[ncounts - 1];
      compute_reference(t, op, nsrcs, divisor, mask, src_off, maxc, ex);

      for (int ndsts = 1; ndsts <= KERN_RC_MAX_DSTS; ndsts++) {
        for (int ci = 0; ci < ncounts; ci++) {
          const size_t count = counts[ci];
          kern_reduce_copy_args_t a;
          memset(&a, 0, sizeof a);
          for (int s = 0; s < nsrcs; s++) a.srcs[s] = d_src[s] + GUARD + src_off[s] * size;
          /* The planted fault: the kernel sees one source less than the reference. */
          const int launch_srcs = drop_last_source && nsrcs > 1 ? nsrcs - 1 : nsrcs;
          for (int d = 0; d < ndsts; d++) {
            CUDA_OK(cudaMemset(d_dst[d], 0xa5, 2 * GUARD + (count + MAX_OFFSET) * size));
            a.dsts[d] = d_dst[d] + GUARD + dst_off[d] * size;
          }
          if (layout == LAYOUT_INPLACE) a.dsts[0] = (void*)a.srcs[0];
          a.count = count;
          a.op = (kern_op_t)op;
          a.type = (ncclDataType_t)t;
          a.nsrcs = launch_srcs;
          a.ndsts = ndsts;
          ref_val sc = scalar_of(t);
          unsigned char sbytes[8] = {0};
          ref_store(t, sbytes, 0, sc);
          memcpy(&a.scalar_bits, sbytes, sizeof sbytes);
          if ((ci + ndsts + layout) & 1) {
            CUDA_OK(cudaMemcpy(d_scalar, sbytes, sizeof sbytes, cudaMemcpyHostToDevice));
            a.scalar_ptr = d_scalar;
            a.scalar_bits = 0; /* must not be used */
          }
          a.preop_mask = mask & ((1u << launch_srcs) - 1);
          a.postop = 1;
          a.divisor = divisor;
          a.nctas = nctas;

          ncclResult_t res = kern_reduce_copy_launch(&a, NULL);
          cudaError_t ce = res == ncclSuccess ? cudaDeviceSynchronize() : cudaSuccess;
          cases++;
          if (res != ncclSuccess || ce != cudaSuccess) {
            char detail[300];
            snprintf(detail, sizeof detail, "%s",
                     res != ncclSuccess ? kern_last_error() : cudaGetErrorString(ce));
            fail_line("launch", t, op, nsrcs, ndsts, count, layout, detail);
            if (ce != cudaSuccess) exit(1); /* the context is gone */
            continue;
          }
          for (int d = 0; d < ndsts; d++) {
            const unsigned char* base = (const unsigned char*)a.dsts[d] - GUARD;
            size_t bytes = 2 * GUARD + count * size;
            CUDA_OK(cudaMemcpy(h_dst, base, bytes, cudaMemcpyDeviceToHost));
            /* What the bytes around the range must still be. */
            if (layout == LAYOUT_INPLACE && d == 0)
              memcpy(outside, h_src[0] + GUARD + src_off[0] * size - GUARD, bytes);
            else
              memset(outside, 0xa5, bytes);
            check_dst(t, op, nsrcs, ndsts, count, layout, d, h_dst, outside, ex);
          }
          if (layout == LAYOUT_INPLACE) /* put source 0 back */
            CUDA_OK(cudaMemcpy(d_src[0], h_src[0], BUF_BYTES(size), cudaMemcpyHostToDevice));
        }
      }
    }
  }
  return cases;
}

/* Kernel time for a few shapes, in GB/s of (nsrcs + ndsts) * bytes moved. With sweep, also
 * for grid sizes of 1, 2, 4 and 8 CTAs per SM (the launcher's choice is "auto"). */
static void bench(int sweep, int sms) {
  const size_t bytes = (size_t)256 << 20;
  void* src[KERN_RC_MAX_SRCS];
  void* dst[KERN_RC_MAX_DSTS];
  for (int s = 0; s < KERN_RC_MAX_SRCS; s++) {
    CUDA_OK(cudaMalloc(&src[s], bytes));
    CUDA_OK(cudaMemset(src[s], 0, bytes));
  }
  for (int d = 0; d < KERN_RC_MAX_DSTS; d++) CUDA_OK(cudaMalloc(&dst[d], bytes));
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  const struct {
    int op, type, nsrcs, ndsts;
  } shapes[] = {
      {KERN_OP_SUM, ncclFloat32, 1, 1},
      {KERN_OP_SUM, ncclFloat32, 2, 1},
      {KERN_OP_SUM, ncclFloat32, 2, 2},
      {KERN_OP_SUM, ncclFloat32, 8, 1},
      {KERN_OP_SUM, ncclBfloat16, 2, 1},
      {KERN_OP_SUM, ncclFloat16, 2, 1},
      {KERN_OP_SUM, ncclFloat8e4m3, 2, 1},
      {KERN_OP_SUM, ncclInt8, 2, 1},
      {KERN_OP_SUM, ncclFloat64, 2, 1},
      {KERN_OP_PREMULSUM, ncclFloat32, 2, 1},
      {KERN_OP_AVG, ncclInt32, 2, 1},
      {KERN_OP_AVG, ncclInt8, 2, 1},
      {KERN_OP_PREMULSUM, ncclFloat8e4m3, 2, 1},
  };
  /* The reference: cudaMemcpyAsync device to device of the same bytes (read + write counted, as
   * for N=1 M=1). */
  double memcpy_gbs = 0;
  {
    const int iters = 20;
    CUDA_OK(cudaMemcpyAsync(dst[0], src[0], bytes, cudaMemcpyDeviceToDevice, NULL));
    CUDA_OK(cudaEventRecord(e0, NULL));
    for (int i = 0; i < iters; i++)
      CUDA_OK(cudaMemcpyAsync(dst[0], src[0], bytes, cudaMemcpyDeviceToDevice, NULL));
    CUDA_OK(cudaEventRecord(e1, NULL));
    CUDA_OK(cudaEventSynchronize(e1));
    float ms;
    CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
    memcpy_gbs = 2.0 * (double)bytes * iters / (ms * 1e-3) / 1e9;
    printf("bench cudaMemcpyAsync D2D 256 MiB          : %7.1f GB/s (%.3f ms)\n", memcpy_gbs,
           ms / iters);
  }
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
    if (!kern_instance_available((kern_op_t)shapes[k].op, (ncclDataType_t)shapes[k].type)) continue;
    kern_reduce_copy_args_t a;
    memset(&a, 0, sizeof a);
    for (int s = 0; s < shapes[k].nsrcs; s++) a.srcs[s] = src[s];
    for (int d = 0; d < shapes[k].ndsts; d++) a.dsts[d] = dst[d];
    a.count = bytes / kern_type_size((ncclDataType_t)shapes[k].type);
    a.op = (kern_op_t)shapes[k].op;
    a.type = (ncclDataType_t)shapes[k].type;
    a.nsrcs = shapes[k].nsrcs;
    a.ndsts = shapes[k].ndsts;
    a.preop_mask = (1u << a.nsrcs) - 1;
    a.postop = 1;
    a.divisor = a.nsrcs;
    a.scalar_bits = 0;
    for (int per_sm = 0; per_sm <= (sweep ? 8 : 0); per_sm = per_sm ? 2 * per_sm : 1) {
      const int iters = 20;
      a.nctas = (uint32_t)(per_sm * sms);
      if (kern_reduce_copy_launch(&a, NULL) != ncclSuccess) {
        printf("bench %s: %s\n", kern_op_name(a.op), kern_last_error());
        break;
      }
      CUDA_OK(cudaEventRecord(e0, NULL));
      for (int i = 0; i < iters; i++) (void)kern_reduce_copy_launch(&a, NULL);
      CUDA_OK(cudaEventRecord(e1, NULL));
      CUDA_OK(cudaEventSynchronize(e1));
      float ms;
      CUDA_OK(cudaEventElapsedTime(&ms, e0, e1));
      double gbs = (double)(a.nsrcs + a.ndsts) * (double)bytes * iters / (ms * 1e-3) / 1e9;
      char grid[32];
      if (per_sm)
        snprintf(grid, sizeof grid, "%d CTA/SM", per_sm);
      else
        snprintf(grid, sizeof grid, "auto");
      printf("bench %-9s %-6s N=%d M=%d 256 MiB %-9s: %7.1f GB/s (%.3f ms)", kern_op_name(a.op),
             kern_type_name(a.type), a.nsrcs, a.ndsts, grid, gbs, ms / iters);
      if (a.nsrcs == 1 && a.ndsts == 1 && memcpy_gbs > 0)
        printf(", %.1f%% of cudaMemcpy", 100.0 * gbs / memcpy_gbs);
      printf("\n");
    }
  }
  for (int s = 0; s < KERN_RC_MAX_SRCS; s++) CUDA_OK(cudaFree(src[s]));
  for (int d = 0; d < KERN_RC_MAX_DSTS; d++) CUDA_OK(cudaFree(dst[d]));
}

int main(int argc, char** argv) {
  int want_bench = 0, quick = 0, sweep = 0, skip_check = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--bench") == 0)
      want_bench = 1;
    else if (strcmp(argv[i], "--sweep") == 0)
      want_bench = sweep = 1;
    else if (strcmp(argv[i], "--bench-only") == 0)
      want_bench = skip_check = 1;
    else if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--drop-last-source") == 0)
      drop_last_source = 1;
    else {
      fprintf(stderr,
              "usage: %s [--quick] [--bench] [--sweep] [--bench-only] [--drop-last-source]\n",
              argv[0]);
      return 2;
    }
  }
  int ndev = 0;
  cudaError_t ce = cudaGetDeviceCount(&ndev);
  if (ce != cudaSuccess) {
    printf("no CUDA device: %s\n", cudaGetErrorString(ce));
    return 77;
  }
  if (ndev == 0) {
    printf("no CUDA device: cudaGetDeviceCount found none\n");
    return 77;
  }
  struct cudaDeviceProp prop;
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  printf("device 0: %s, sm_%d%d, %d SMs; kernel_subset=%s\n", prop.name, prop.major, prop.minor,
         prop.multiProcessorCount, kern_subset());

  const size_t maxbytes = BUF_BYTES(8);
  for (int s = 0; s < KERN_RC_MAX_SRCS; s++) {
    CUDA_OK(cudaMalloc((void**)&d_src[s], maxbytes));
    h_src[s] = malloc(maxbytes);
    if (!h_src[s]) return 1;
  }
  for (int d = 0; d < KERN_RC_MAX_DSTS; d++) CUDA_OK(cudaMalloc((void**)&d_dst[d], maxbytes));
  CUDA_OK(cudaMallocHost((void**)&h_dst, maxbytes));
  CUDA_OK(cudaMalloc(&d_scalar, 8));
  unsigned char* outside = malloc(maxbytes);
  struct expect* ex = malloc(MAX_COUNT * sizeof(*ex));
  if (!outside || !ex) return 1;

  const int ncounts = (int)(sizeof counts_all / sizeof counts_all[0]) - (quick ? 1 : 0);
  int total = 0, tested = 0, runs = 0, caught = 0;
  for (int t = 0; t < REF_NTYPES && !skip_check; t++) {
    int any = 0;
    for (int op = 0; op < REF_NOPS; op++)
      any |= kern_instance_available((kern_op_t)op, (ncclDataType_t)t);
    if (!any) continue;
    for (int pass = PASS_RANDOM; pass <= (ref_type_is_float(t) ? PASS_EXACT : PASS_RANDOM);
         pass++) {
      fill_sources(t, pass);
      scalar_pass = pass;
      for (int op = 0; op < REF_NOPS; op++) {
        if (!kern_instance_available((kern_op_t)op, (ncclDataType_t)t)) continue;
        int before = failures;
        int n = run_cases(t, op, counts_all, ncounts, ex, outside);
        total += n;
        tested += pass == PASS_RANDOM;
        runs++;
        caught += failures != before;
        printf("%-9s %-6s %-6s %4d cases %s\n", kern_op_name((kern_op_t)op),
               kern_type_name((ncclDataType_t)t), pass_names[pass], n,
               failures == before ? "ok" : "FAILED");
        fflush(stdout);
      }
    }
  }
  if (want_bench) bench(sweep, prop.multiProcessorCount);
  if (skip_check) return 0;
  printf("kern-reduce-copy: %d instances, %d cases, %d failure(s)\n", tested, total, failures);
  if (drop_last_source) {
    printf("kern-reduce-copy: a dropped source caught in %d of %d instance passes\n", caught, runs);
    return caught == runs && runs > 0 ? 0 : 1;
  }
  return failures == 0 && tested > 0 ? 0 : 1;
}
