/*
 * Choir: net / collnet plugin ABI, version 6 (NCCL 2.13 .. 2.18 level; still accepted by current
 * cores). Frozen: never edit a field, only add new version headers. Layout is pinned by
 * test/abi/plugin_layout.c.
 *
 * Lifetime: a v6 plugin is process-wide. init runs once per process; every later entry may be
 * used by several communicators.
 * Threading: init, devices and getProperties run on a thread that initializes a communicator;
 * the other entries run on the core's proxy threads. Calls on one comm object (listen, send,
 * receive or collective comm) are never concurrent; calls on different objects may be.
 * isend, irecv, iflush and test are on the data path and must never block.
 */
#ifndef CHOIR_NCCL_NET_V6_H
#define CHOIR_NCCL_NET_V6_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"
#include "nccl_net_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Outstanding requests per comm that a v6 plugin had to accept. */
#define NCCL_NET_MAX_REQUESTS_V6 8

typedef struct {
  char* name;     /* device name for logs; plugin-owned */
  char* pciPath;  /* sysfs directory of the NIC's PCI function; plugin-owned */
  uint64_t guid;  /* equal guids mean the same physical port */
  int ptrSupport; /* NCCL_PTR_* mask of registrable memory */
  int speed;      /* port speed, Mbit/s */
  int port;       /* port number */
  float latency;  /* network latency, microseconds */
  int maxComms;   /* most comms the device can create */
  int maxRecvs;   /* most buffers one irecv may post */
} ncclNetProperties_v6_t;

typedef struct {
  /* Network name, plugin-owned for the life of the library; shown in logs and compared without
   * case against NCCL_NET / ncclConfig_t.netName. */
  const char* name;
  /* Once per process, before any other entry. May block. logFunction stays valid until the
   * library is unloaded. Non-success: the core skips this plugin. */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  /* Writes the number of physical devices. May block. Zero makes the plugin unusable. */
  ncclResult_t (*devices)(int* ndev);
  /* Fills the core-owned *props for device dev (0 <= dev < ndev). Pointers stored in it stay
   * plugin-owned and valid while the library is loaded. May block. */
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  /* Receiver side: creates a listening object in *listenComm and writes at most
   * NCCL_NET_HANDLE_MAXSIZE bytes of connection data into the core-owned buffer `handle`, which
   * the core forwards to the peer's connect(). Must not wait for the peer. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Sender side: starts or continues connecting to the peer described by `handle`. Must not
   * block: success with *sendComm == NULL means "not yet, call again". */
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  /* Receiver side: completes a connection on listenComm. Same contract as connect: success with
   * *recvComm == NULL means "call again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  /* Registers [data, data + size) of memory type NCCL_PTR_HOST or NCCL_PTR_CUDA on a send or
   * receive comm; *mhandle is plugin-owned until deregMr. May block. */
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  /* Like regMr for CUDA memory exported as a dma-buf (fd, offset). The core closes fd when the
   * call returns, so the plugin must import it during the call. NULL if ptrSupport lacks
   * NCCL_PTR_DMABUF. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  /* Releases a handle from regMr or regMrDmaBuf; no pending request still uses it. */
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* Starts sending size bytes from registered memory. *request == NULL on success means "cannot
   * start now, call again"; otherwise poll it with test. tag selects the receive slot when the
   * peer posts a multi-receive. Never blocks. */
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle,
                        void** request);
  /* Posts n <= maxRecvs receive buffers as one request; sizes are upper bounds. Sends and
   * receives on a connection match in posting order; tags pick the buffer inside one
   * multi-receive. *request == NULL means "call again". Never blocks. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles,
                        void** request);
  /* Makes data received into CUDA memory visible to GPU kernels. Returns a request to poll with
   * test; *request == NULL means nothing is left to wait for. Never blocks. */
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                         void** request);
  /* Polls a request. On completion sets *done = 1 and, if sizes is not NULL, writes the bytes
   * moved per buffer; the plugin then frees the request and the core never passes it again.
   * Never blocks. */
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  /* Destroy a send comm, a receive comm or a listening object. The core never uses the object
   * or any request on it afterwards. */
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclNet_v6_t;

typedef struct {
  /* Collective network name, plugin-owned for the life of the library. */
  const char* name;
  /* Once per process. May block. Non-success disables collnet only, not the net plugin. */
  ncclResult_t (*init)(ncclDebugLogger_t logFunction);
  /* Writes the number of devices able to offload collectives. May block. When it reports 0, the
   * entries below may be NULL and collnet is not used. */
  ncclResult_t (*devices)(int* ndev);
  /* Fills the core-owned *props for device dev; same rules as ncclNet_v6_t.getProperties. */
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t* props);
  /* Creates a listening object and writes at most NCCL_NET_HANDLE_MAXSIZE bytes into `handle`,
   * which the core exchanges with every rank of the group. Must not wait for peers. */
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  /* Forms the collective group from every rank's listen handle (handles[i] from rank i,
   * core-owned, read during the call); rank is the caller's rank. Every rank of the group calls
   * it; it may block until the group is formed. */
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  /* Writes 1 to *supported when iallreduce handles (dataType, redOp), else 0. Never blocks. */
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  /* Registers memory (NCCL_PTR_HOST or NCCL_PTR_CUDA) on collComm; *mhandle is plugin-owned
   * until deregMr. May block. */
  ncclResult_t (*regMr)(void* collComm, void* data, int size, int type, void** mhandle);
  /* dma-buf variant of regMr; the core closes fd when the call returns. May be NULL. */
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  /* Releases a registration; no pending request still uses it. */
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  /* Starts an allreduce of count elements from sendData into recvData (both registered).
   * *request == NULL means "call again". Never blocks. */
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, int count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  /* Makes size bytes received at data (CUDA memory) visible to the GPU; *request == NULL means
   * nothing to wait for. Never blocks. */
  ncclResult_t (*iflush)(void* collComm, void* data, int size, void* mhandle, void** request);
  /* Polls a request; on *done = 1 writes the byte count to *size if size is not NULL, and the
   * request is gone. Never blocks. */
  ncclResult_t (*test)(void* request, int* done, int* size);
  /* Destroy the collective comm or the listening object; never used again afterwards. */
  ncclResult_t (*closeColl)(void* collComm);
  ncclResult_t (*closeListen)(void* listenComm);
} ncclCollNet_v6_t;

#ifdef __cplusplus
}
#endif

#endif
