/* Device side of test_memalloc.c (test_memalloc_kern.cu). */
#ifndef CHOIR_TEST_MEMALLOC_KERN_H
#define CHOIR_TEST_MEMALLOC_KERN_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* On device `reader`: counts the bytes of p[0..n) that differ from v, read by a kernel through
 * the reader's own mapping of p, into *bad_p (all ones when the call failed). */
cudaError_t ma_count_mismatches(int reader, const void* p, size_t n, unsigned char v,
                                unsigned long long* bad_p);

#ifdef __cplusplus
}
#endif

#endif
