/*
 * The GDR shim test plugin's counters (net_gdr_shim.c, libnccl-net-gdrshim.so), for tests that
 * dlopen it: choir_gdrshim_stats fills GDRSHIM_NSTATS values, in this order. Process-wide, since
 * the library was loaded; never reset.
 */
#ifndef CHOIR_TEST_NET_GDR_SHIM_H
#define CHOIR_TEST_NET_GDR_SHIM_H

#include <stdint.h>

enum {
  GDRSHIM_CUDA_REGS,         /* regMr(NCCL_PTR_CUDA) calls that succeeded */
  GDRSHIM_CUDA_REGS_DEVICE,  /* of which real device memory (bounce-buffered) */
  GDRSHIM_DEVICE_SENDS,      /* isends from device memory the inner plugin accepted */
  GDRSHIM_DEVICE_SEND_BYTES, /* their bytes */
  GDRSHIM_DEVICE_RECVS,      /* completed receive buffers copied into device memory */
  GDRSHIM_DEVICE_RECV_BYTES, /* their bytes: the sizes received */
  GDRSHIM_FLUSHES,           /* iflush calls */
  GDRSHIM_NSTATS
};

/* Exported by the shim; look them up with dlsym. */
void choir_gdrshim_stats(uint64_t out[GDRSHIM_NSTATS]);
/* Buffers named by all iflush calls together (GDRSHIM_FLUSHES counts the calls). */
uint64_t choir_gdrshim_flush_buffers(void);

#endif
