/*
 * Device side of test_transport.c: a GPU writes a connection's buffer and a counter through the
 * pointers of its kern_conn_t (peer-mapped or host-mapped), and checks what arrived, as the data
 * path's kernels will. Each returns the CUDA error of the launch or the wait.
 */
#ifndef CHOIR_TEST_TRANSPORT_KERN_H
#define CHOIR_TEST_TRANSPORT_KERN_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The byte at offset i of a buffer written with seed (host and device). */
#ifdef __CUDACC__
#define TT_HD __host__ __device__
#else
#define TT_HD
#endif
static inline TT_HD unsigned char tt_pattern(uint32_t seed, size_t i) {
  return (unsigned char)(seed * 2654435761u + (uint32_t)i * 40503u + (uint32_t)(i >> 11));
}

/* On the current device: dst[0..bytes) = tt_pattern(seed, .), then (after a system-scope fence)
 * *counter = value; waits for completion. dst or counter may be NULL. */
cudaError_t tt_write(char* dst, size_t bytes, uint32_t seed, uint64_t* counter, uint64_t value);

/* On the current device: counts the bytes of src that differ from tt_pattern(seed, .) into
 * *wrong_p and reads *counter into *counter_p; waits for completion. */
cudaError_t tt_check(const char* src, size_t bytes, uint32_t seed, const uint64_t* counter,
                     unsigned long long* wrong_p, uint64_t* counter_p);

#ifdef __cplusplus
}
#endif

#endif
