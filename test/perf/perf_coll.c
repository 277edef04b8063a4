/*
 * Choir perf tools: the nine collectives as data. Sizes, in-place layouts and bandwidth factors
 * follow nccl-tests, so that numbers compare with its output line by line.
 */
#include "perf.h"

const struct perf_coll perf_colls[PERF_NCOLLS] = {
    [PERF_ALL_REDUCE] = {"all_reduce", 1, 0, 1},
    [PERF_ALL_GATHER] = {"all_gather", 0, 0, 1},
    [PERF_REDUCE_SCATTER] = {"reduce_scatter", 1, 0, 1},
    [PERF_BROADCAST] = {"broadcast", 0, 1, 1},
    [PERF_REDUCE] = {"reduce", 1, 1, 1},
    /* In-place send/recv and alltoall overwrite data still to be sent: nccl-tests times them but
   * does not check them, and neither do we. */
    [PERF_SENDRECV] = {"sendrecv", 0, 0, 0},
    [PERF_ALLTOALL] = {"alltoall", 0, 0, 0},
    [PERF_GATHER] = {"gather", 0, 1, 1},
    [PERF_SCATTER] = {"scatter", 0, 1, 1},
};

void perf_coll_counts(int coll, size_t count, int nranks, struct perf_counts* c) {
  size_t per = count / (size_t)nranks;
  size_t whole = per * (size_t)nranks;
  c->send_count = c->recv_count = c->param_count = count;
  c->send_inplace = c->recv_inplace = 0;
  switch (coll) {
  case PERF_ALL_GATHER:
  case PERF_GATHER:
    c->send_count = per;
    c->recv_count = whole;
    c->param_count = per;
    c->send_inplace = per;
    break;
  case PERF_REDUCE_SCATTER:
  case PERF_SCATTER:
    c->send_count = whole;
    c->recv_count = per;
    c->param_count = per;
    c->recv_inplace = per;
    break;
  case PERF_ALLTOALL:
    c->send_count = whole;
    c->recv_count = whole;
    c->param_count = per;
    break;
  default: break;
  }
}

double perf_coll_busbw_factor(int coll, int nranks) {
  double n = nranks;
  switch (coll) {
  case PERF_ALL_REDUCE: return 2.0 * (n - 1.0) / n;
  case PERF_ALL_GATHER:
  case PERF_REDUCE_SCATTER:
  case PERF_ALLTOALL:
  case PERF_GATHER:
  case PERF_SCATTER: return (n - 1.0) / n;
  default: return 1.0;
  }
}

void perf_coll_bw(int coll, size_t param_count, size_t elt_size, int nranks, double sec,
                  double* algbw, double* busbw) {
  double bytes = (double)param_count * (double)elt_size;
  switch (coll) {
  case PERF_ALL_GATHER:
  case PERF_REDUCE_SCATTER:
  case PERF_ALLTOALL:
  case PERF_GATHER:
  case PERF_SCATTER: bytes *= nranks; break;
  default: break;
  }
  *algbw = sec > 0 ? bytes / 1.0e9 / sec : 0.0;
  *busbw = *algbw * perf_coll_busbw_factor(coll, nranks);
}

int perf_coll_has_input(int coll, int rank, int root) {
  if (coll == PERF_BROADCAST || coll == PERF_SCATTER) return rank == root;
  return 1;
}

int perf_coll_expect(int coll, int rank, int nranks, int root, const struct perf_counts* c,
                     struct perf_expect* x) {
  uint64_t per = c->param_count;
  x->kind = PERF_X_REDUCE;
  x->src = 0;
  x->block = 1;
  x->offset = 0;
  switch (coll) {
  case PERF_ALL_REDUCE: return 1;
  case PERF_REDUCE: return rank == root;
  case PERF_REDUCE_SCATTER: x->offset = (uint64_t)rank * per; return 1;
  case PERF_ALL_GATHER:
  case PERF_GATHER:
    x->kind = PERF_X_COPY_BLOCK;
    x->block = per ? per : 1;
    return coll == PERF_ALL_GATHER || rank == root;
  case PERF_ALLTOALL:
    x->kind = PERF_X_COPY_BLOCK;
    x->block = per ? per : 1;
    x->offset = (uint64_t)rank * per;
    return 1;
  case PERF_BROADCAST:
    x->kind = PERF_X_COPY_FIXED;
    x->src = root;
    return 1;
  case PERF_SCATTER:
    x->kind = PERF_X_COPY_FIXED;
    x->src = root;
    x->offset = (uint64_t)rank * per;
    return 1;
  case PERF_SENDRECV:
    x->kind = PERF_X_COPY_FIXED;
    x->src = (rank - 1 + nranks) % nranks;
    return 1;
  default: return 0;
  }
}
