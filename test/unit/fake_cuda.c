/*
 * A stand-in for core/base/base_cuda.c in CPU tests: emulated devices, so that communicator
 * creation, split and shrink run where there is no GPU. Linked into the test program, these
 * definitions keep the real ones (in the base library's archive) from being pulled in.
 * CHOIR_FAKE_NDEV sets the number of devices (default 8). Each thread has its own current device.
 */
#include <stdlib.h>

#include "base.h"

static __thread int fake_dev;

static int fake_ndev(void) {
  const char* s = getenv("CHOIR_FAKE_NDEV");
  return s ? atoi(s) : 8;
}

ncclResult_t cuda_get_device(int* dev_p) {
  *dev_p = fake_dev;
  return ncclSuccess;
}

ncclResult_t cuda_set_device(int dev) {
  if (dev < 0 || dev >= fake_ndev()) {
    WARN("fake CUDA: no device %d (CHOIR_FAKE_NDEV=%d)", dev, fake_ndev());
    return ncclUnhandledCudaError;
  }
  fake_dev = dev;
  log_set_thread_device(dev);
  return ncclSuccess;
}

ncclResult_t cuda_device_count(int* n_p) {
  *n_p = fake_ndev();
  return ncclSuccess;
}

ncclResult_t cuda_bus_id(int dev, int64_t* bus_id_p) {
  *bus_id_p = (int64_t)(0x18 + dev) << 12;
  return ncclSuccess;
}

ncclResult_t cuda_device_sm(int dev, int* sm_p) {
  (void)dev;
  *sm_p = 90;
  return ncclSuccess;
}

/* CHOIR_FAKE_SMS: multiprocessors per device (default 132); CHOIR_FAKE_MPS=1: an MPS client. */
ncclResult_t cuda_device_mp_count(int dev, int* n_p) {
  (void)dev;
  const char* s = getenv("CHOIR_FAKE_SMS");
  *n_p = s ? atoi(s) : 132;
  return ncclSuccess;
}

ncclResult_t cuda_device_mps(int dev, int* on_p) {
  (void)dev;
  const char* s = getenv("CHOIR_FAKE_MPS");
  *on_p = s && atoi(s) != 0;
  return ncclSuccess;
}

ncclResult_t cuda_mem_get_info(size_t* free_p, size_t* total_p) {
  *free_p = *total_p = (size_t)80 << 30;
  return ncclSuccess;
}
