/*
 * ncclMemAlloc / ncclMemFree on real GPUs: sizes that are and are not multiples of the
 * granularity, data written and read back on the owning GPU and from every peer GPU, memory given
 * back on free, the errors of misuse, and the same with NCCL_CUMEM_ENABLE=0 (cudaMalloc).
 * Skipped (exit 77) where there is no GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"

#define CUDA_OK(call) CHECK_EQ_INT((call), cudaSuccess)

static int ndev;

static void check_pattern(void* dptr, size_t size, unsigned char value, int reader_dev) {
  unsigned char* host = (unsigned char*)malloc(size);
  CUDA_OK(cudaSetDevice(reader_dev));
  /* Device to device on the reader, then to the host: the reader must be allowed to read. */
  void* staging = NULL;
  CUDA_OK(cudaMalloc(&staging, size));
  CUDA_OK(cudaMemcpy(staging, dptr, size, cudaMemcpyDeviceToDevice));
  CUDA_OK(cudaMemcpy(host, staging, size, cudaMemcpyDeviceToHost));
  size_t bad = 0;
  for (size_t i = 0; i < size; i++) bad += host[i] != value;
  CHECK_EQ_INT(bad, 0);
  CUDA_OK(cudaFree(staging));
  free(host);
}

static void run_sizes(void) {
  static const size_t sizes[] = {1, 4096, (2u << 20) + 1, 64u << 20};
  for (int dev = 0; dev < ndev; dev++) {
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      size_t size = sizes[k];
      CUDA_OK(cudaSetDevice(dev));
      size_t free_before = 0, free_after = 0, total = 0;
      CUDA_OK(cudaMemGetInfo(&free_before, &total));
      void* p = NULL;
      CHECK_EQ_INT(ncclMemAlloc(&p, size), ncclSuccess);
      CHECK_TRUE(p != NULL);
      if (p == NULL) continue;
      struct cudaPointerAttributes attr;
      CUDA_OK(cudaPointerGetAttributes(&attr, p));
      CHECK_EQ_INT(attr.device, dev);
      unsigned char v = (unsigned char)(0x11 * (k + 1) + dev);
      CUDA_OK(cudaMemset(p, v, size));
      CUDA_OK(cudaDeviceSynchronize());
      for (int reader = 0; reader < ndev; reader++) {
        int can = reader == dev;
        if (!can) cudaDeviceCanAccessPeer(&can, reader, dev);
        if (can) check_pattern(p, size, v, reader);
      }
      CUDA_OK(cudaSetDevice(dev));
      /* Freeing from the middle is refused; freeing the base works and gives the memory back. */
      if (size > 1 && getenv("NCCL_CUMEM_ENABLE") == NULL) {
        CHECK_EQ_INT(ncclMemFree((char*)p + 1), ncclInvalidArgument);
        CHECK_CONTAINS(ncclGetLastError(NULL), "pass the pointer ncclMemAlloc returned");
      }
      CHECK_EQ_INT(ncclMemFree(p), ncclSuccess);
      CUDA_OK(cudaMemGetInfo(&free_after, &total));
      CHECK_TRUE(free_after + (4u << 20) >= free_before);
    }
  }
}

int main(void) {
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("no CUDA device: %s; skipping\n", e != cudaSuccess ? cudaGetErrorString(e) : "none");
    return CHECK_SKIP;
  }
  void* p = (void*)0x1;
  CHECK_EQ_INT(ncclMemAlloc(&p, 0), ncclSuccess);
  CHECK_TRUE(p == NULL);
  CHECK_EQ_INT(ncclMemFree(NULL), ncclSuccess);
  CHECK_EQ_INT(ncclMemAlloc(NULL, 16), ncclInvalidArgument);

  run_sizes();
  /* Memory from cudaMalloc is not ncclMemAlloc's. */
  if (getenv("NCCL_CUMEM_ENABLE") == NULL) {
    void* plain = NULL;
    CUDA_OK(cudaSetDevice(0));
    CUDA_OK(cudaMalloc(&plain, 1 << 20));
    CHECK_EQ_INT(ncclMemFree(plain), ncclInvalidArgument);
    CHECK_CONTAINS(ncclGetLastError(NULL), "was not allocated by ncclMemAlloc");
    CUDA_OK(cudaFree(plain));
  }

  int rc = check_finish("memalloc");
  if (getenv("NCCL_CUMEM_ENABLE") == NULL) {
    /* Again with cudaMalloc behind ncclMemAlloc. */
    fflush(stdout);
    setenv("NCCL_CUMEM_ENABLE", "0", 1);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
      self[n] = '\0';
      int sub = system(self);
      if (sub != 0) rc = 1;
    }
  }
  return rc;
}
