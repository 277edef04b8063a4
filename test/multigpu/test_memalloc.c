/*
 * ncclMemAlloc / ncclMemFree on real GPUs: sizes that are and are not multiples of the
 * granularity, data written on the owning GPU and read by a kernel on it and on every peer GPU
 * (through that GPU's own mapping: ncclMemAlloc maps for every peer, so no peer access is
 * enabled; with NCCL_CUMEM_ENABLE=0 the test enables it, as cudaMalloc maps nothing), memory
 * taken and given back (enough allocations at once that a leak shows above the noise of
 * cudaMemGetInfo), the errors of misuse, and the same with NCCL_CUMEM_ENABLE=0 (cudaMalloc).
 * Skipped (exit 77) where there is no GPU.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "nccl.h"
#include "test_memalloc_kern.h"

#define CUDA_OK(call) CHECK_EQ_INT((call), cudaSuccess)

static int ndev;

static int cumem; /* ncclMemAlloc maps for every peer (not NCCL_CUMEM_ENABLE=0) */

/* A kernel on reader_dev reads every byte of dptr through reader_dev's mapping. */
static void check_pattern(void* dptr, size_t size, unsigned char value, int reader_dev,
                          int owner_dev) {
  if (!cumem && reader_dev != owner_dev) {
    /* cudaMalloc memory: the peer's mapping is the caller's to make. */
    CUDA_OK(cudaSetDevice(reader_dev));
    cudaError_t e = cudaDeviceEnablePeerAccess(owner_dev, 0);
    if (e == cudaErrorPeerAccessAlreadyEnabled) e = cudaSuccess;
    (void)cudaGetLastError();
    CUDA_OK(e);
  }
  unsigned long long bad = 0;
  CUDA_OK(ma_count_mismatches(reader_dev, dptr, size, value, &bad));
  CHECK_MSG(bad == 0, "%zu bytes of device %d read by device %d: %llu wrong", size, owner_dev,
            reader_dev, bad);
}

#define MIB ((size_t)1 << 20)

/* Allocations of `size` held at once for the memory checks: enough that their footprint (whole
 * 2 MiB granules with cuMem) is 64 MiB, far above the few MiB cudaMemGetInfo drifts by. With
 * cudaMalloc, allocations below a granule share pages that the driver may keep: not measured. */
static size_t held_count(size_t size) {
  size_t granule = 2 * MIB, footprint = (size + granule - 1) / granule * granule;
  if (!cumem && size < granule) return 0;
  return (64 * MIB + footprint - 1) / footprint;
}

/* Memory taken while `n` allocations of `size` are held, and given back when they are freed. */
static void check_memory(int dev, size_t size) {
  size_t n = held_count(size);
  if (n == 0) {
    CHECK_SKIPPED("device %d, %zu bytes with cudaMalloc: below a page, not measurable", dev, size);
    return;
  }
  void** held = (void**)calloc(n, sizeof(void*));
  size_t free_before = 0, free_held = 0, free_after = 0, total = 0;
  CUDA_OK(cudaSetDevice(dev));
  CUDA_OK(cudaMemGetInfo(&free_before, &total));
  size_t got = 0;
  for (; got < n; got++)
    if (ncclMemAlloc(&held[got], size) != ncclSuccess) break;
  CHECK_EQ_INT(got, n);
  CUDA_OK(cudaMemGetInfo(&free_held, &total));
  for (size_t i = 0; i < got; i++) CHECK_EQ_INT(ncclMemFree(held[i]), ncclSuccess);
  CUDA_OK(cudaMemGetInfo(&free_after, &total));
  /* 60 of the 64 MiB at least must be taken, and all but 4 MiB given back. */
  CHECK_MSG(free_before >= free_held + 60 * MIB,
            "device %d: %zu allocations of %zu bytes took only %zu MiB", dev, n, size,
            (free_before - free_held) / MIB);
  CHECK_MSG(free_after + 4 * MIB >= free_before,
            "device %d: %zu allocations of %zu bytes freed, %zu MiB not given back", dev, n, size,
            (free_before - free_after) / MIB);
  free(held);
}

static void run_sizes(void) {
  static const size_t sizes[] = {1, 4096, (2u << 20) + 1, 64u << 20};
  for (int dev = 0; dev < ndev; dev++) {
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      size_t size = sizes[k];
      CUDA_OK(cudaSetDevice(dev));
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
        if (can) check_pattern(p, size, v, reader, dev);
      }
      CUDA_OK(cudaSetDevice(dev));
      /* Freeing from the middle is refused; freeing the base works and gives the memory back. */
      if (size > 1 && getenv("NCCL_CUMEM_ENABLE") == NULL) {
        CHECK_EQ_INT(ncclMemFree((char*)p + 1), ncclInvalidArgument);
        CHECK_CONTAINS(ncclGetLastError(NULL), "pass the pointer ncclMemAlloc returned");
      }
      CHECK_EQ_INT(ncclMemFree(p), ncclSuccess);
      check_memory(dev, size);
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

  cumem = getenv("NCCL_CUMEM_ENABLE") == NULL || atoi(getenv("NCCL_CUMEM_ENABLE")) != 0;
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
