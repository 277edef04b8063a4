/*
 * CUDA runtime calls the core makes outside the data path, each turned into an ncclResult_t with
 * a WARN naming the call and CUDA's own message. CPU tests link a fake of this file
 * (test/unit/fake_cuda.c) that emulates devices, so the communicator logic runs in CI.
 */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "base.h"

ncclResult_t cuda_get_device(int* dev_p) {
  int dev = -1;
  CUDA_CHECK(cudaGetDevice(&dev));
  *dev_p = dev;
  return ncclSuccess;
}

ncclResult_t cuda_set_device(int dev) {
  CUDA_CHECK(cudaSetDevice(dev));
  log_set_thread_device(dev);
  return ncclSuccess;
}

ncclResult_t cuda_device_count(int* n_p) {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  *n_p = n;
  return ncclSuccess;
}

ncclResult_t cuda_bus_id(int dev, int64_t* bus_id_p) {
  char pci[64];
  CUDA_CHECK(cudaDeviceGetPCIBusId(pci, (int)sizeof(pci), dev));
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (sscanf(pci, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) {
    WARN("cannot parse the PCI bus id '%s' of CUDA device %d", pci, dev);
    return ncclInternalError;
  }
  *bus_id_p = ((int64_t)domain << 20) | ((int64_t)bus << 12) | ((int64_t)device << 4) | function;
  return ncclSuccess;
}

ncclResult_t cuda_device_sm(int dev, int* sm_p) {
  int major = 0, minor = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  *sm_p = major * 10 + minor;
  return ncclSuccess;
}

ncclResult_t cuda_device_mp_count(int dev, int* n_p) {
  int n = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
  *n_p = n;
  return ncclSuccess;
}

ncclResult_t cuda_device_mps(int dev, int* on_p) {
  int on = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&on, cudaDevAttrMpsEnabled, dev));
  *on_p = on != 0;
  return ncclSuccess;
}

ncclResult_t cuda_mem_get_info(size_t* free_p, size_t* total_p) {
  size_t f = 0, t = 0;
  CUDA_CHECK(cudaMemGetInfo(&f, &t));
  *free_p = f;
  *total_p = t;
  return ncclSuccess;
}
