/*
 * Choir perf tools, CPU mock: host versions of the data kernels of perf_data.cu, with the same
 * per-element definitions (perf_gen.h), run synchronously.
 */
#include "mock.h"
#include "perf_data.h"

static void mock_data_idle(cudaStream_t s, const char* what) {
  mock_lock();
  mock_stream_idle(s, what);
  mock_unlock();
}

int perf_data_fill(void* buf, size_t count, const struct perf_gen* g, int rank, cudaStream_t s) {
  mock_data_idle(s, "perf_data_fill");
  for (size_t i = 0; i < count; i++)
    ref_store(g->type, buf, i, perf_gen_value(g, g->type, rank, i));
  return cudaSuccess;
}

int perf_data_check(const void* buf, size_t count, const struct perf_gen* g,
                    const struct perf_expect* x, struct perf_check_out* out, cudaStream_t s) {
  mock_data_idle(s, "perf_data_check");
  for (size_t i = 0; i < count; i++) {
    if (perf_expect_elem(g, g->type, x, i, ref_load(g->type, buf, i), NULL, NULL)) {
      out->nwrong++;
      if (i < out->first) out->first = i;
    }
  }
  return cudaSuccess;
}

int perf_data_guard(const void* buf, size_t bytes, unsigned char fill, struct perf_check_out* out,
                    cudaStream_t s) {
  mock_data_idle(s, "perf_data_guard");
  for (size_t i = 0; i < bytes; i++) {
    if (((const unsigned char*)buf)[i] != fill) {
      out->nwrong++;
      if (i < out->first) out->first = i;
    }
  }
  return cudaSuccess;
}
