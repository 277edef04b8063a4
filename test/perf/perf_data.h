/*
 * Choir perf tools: the C-callable boundary of the data kernels (perf_data.cu). They fill input
 * buffers and check output buffers on the GPU, element by element, with the definitions of
 * perf_gen.h, so that no buffer is ever copied to the host. All calls are asynchronous on the
 * given stream, for the current device, and return a cudaError_t (cudaSuccess is 0).
 */
#ifndef CHOIR_PERF_DATA_H
#define CHOIR_PERF_DATA_H

#include <cuda_runtime_api.h>

#include "perf_gen.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counters a check adds to (device memory; clear nwrong to 0 and first to all ones before). */
struct perf_check_out {
  unsigned long long nwrong; /* elements (or bytes, for perf_data_guard) found wrong */
  unsigned long long first;  /* smallest wrong index */
};

/* buf[i] = perf_gen_value(g, rank, i) for i < count, in type g->type. */
int perf_data_fill(void* buf, size_t count, const struct perf_gen* g, int rank, cudaStream_t s);

/* Check buf[0..count) of one rank against expectation x; adds to *out. */
int perf_data_check(const void* buf, size_t count, const struct perf_gen* g,
                    const struct perf_expect* x, struct perf_check_out* out, cudaStream_t s);

/* Count the bytes of buf[0..bytes) that differ from `fill`; adds to *out. */
int perf_data_guard(const void* buf, size_t bytes, unsigned char fill, struct perf_check_out* out,
                    cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
