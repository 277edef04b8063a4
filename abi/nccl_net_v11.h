/*
 * Choir: net / collnet plugin ABI, version 11 (newest in NCCL 2.28 and 2.29). Frozen: never edit a
 * field, only add new version headers. Layout is pinned by test/abi/plugin_layout.c.
 *
 * Lifetime: from v11 on, init and finalize bracket each communicator and create / destroy a
 * per-communicator context; devices, getProperties and makeVDevice stay process-wide. The library
 * stays loaded while any communicator uses it.
 * Threading: init, devices and getProperties run on a thread that initializes a communicator;
 * the other entries run on the core's proxy threads. Calls on one comm object (listen, send,
 * receive or collective comm) are never concurrent; calls on different objects may be.
 * isend, irecv, iflush and test are on the data path and must never block.
 */
#ifndef CHOIR_NCCL_NET_V11_H
#define CHOIR_NCCL_NET_V11_H

#include <stddef.h>
#include <stdint.h>

#include "nccl_common.h"
#include "nccl_net_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A virtual NIC: the physical devices fused into it (makeVDevice), or the device itself. */
typedef struct {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC_V11];
} ncclNetVDeviceProps_v11_t;

/* Traffic class meaning "use the plugin's default". */
#ifndef NCCL_NET_TRAFFIC_CLASS_UNDEF
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1
#endif

/* Per-connection settings taken from the communicator's configuration. */
typedef struct {
  int trafficClass; /* plugin-specific traffic class, or NCCL_NET_TRAFFIC_CLASS_UNDEF */
} ncclNetCommConfig_v11_t;

typedef struct {
  char* name;      /* device name for logs; plugin-owned */
  char* pciPath;   /* sysfs directory of the NIC's PCI function; plugin-owned */
  uint64_t guid;   /* equal guids mean the same physical port */
  int ptrSupport;  /* NCCL_PTR_* mask of registrable memory */
  int regIsGlobal; /* 1: a registration is usable on any comm of the process, so the core may
                      register once up front and re-register sub-ranges cheaply */
  int forceFlush;  /* 1: the core must call iflush after every receive into GPU memory */
  int speed;       /* port speed, Mbit/s */
  int port;        /* port number */
  float latency;   /* network latency, microseconds */
  int maxComms;    /* most comms the device can create */
  int maxRecvs;    /* most buffers one irecv may post */
  ncclNetDeviceType netDeviceType;  /* offload kind; NCCL_NET_DEVICE_HOST for none */
  int netDeviceVersion;             /* offload code version the plugin expects */
  ncclNetVDeviceProps_v11_t vProps; /* physical devices behind this (possibly virtual) device */
  size_t maxP2pBytes;               /* largest isend/irecv size; the core splits bigger transfers */
  size_t maxCollBytes;              /* largest collnet operation size */
  int maxMultiRequestSize;          /* most requests one multi-request may group */
} ncclNetProperties_v11_t;

/* Value of any ncclNetAttr / ncclNetCommAttr field that carries no hint. */
#ifndef NCCL_NET_ATTR_UNDEF
#define NCCL_NET_ATTR_UNDEF -1
#endif

/* Initializer for an ncclNetAttr_v11_t (and v12) with every field undefined. */
#ifndef NCCL_NET_ATTR_INIT
#define NCCL_NET_ATTR_INIT                                                                    \
  {                                                                                           \
    {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF},     \
        {NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF, NCCL_NET_ATTR_UNDEF}, \
        (uint32_t)NCCL_NET_ATTR_UNDEF, (uint32_t)NCCL_NET_ATTR_UNDEF,                         \
        (uint32_t)NCCL_NET_ATTR_UNDEF                                                         \
  }
#endif

/* Expected traffic shape on one side (send or receive) of the context's connections. */
typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

/* Hints given to setNetAttr. op, algo and proto are bit masks indexed by ncclFunc_t, NCCL_ALGO_*
 * and NCCL_PROTO_* ids. */
typedef struct {
  ncclNetCommAttr_v11_t sendCommAttr;
  ncclNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} ncclNetAttr_v11_t;

typedef struct {
  /* Network name, plugin-owned for the life of the library; shown in logs and compared without
   * case against NCCL_NET / ncclConfig_t.netName. */
  const char* name;
  /* Once per communicator, before that communicator uses any other entry: creates the context
   * *ctx that listen, connect, setNetAttr and finalize receive. commId identifies the
   * communicator; config (core-owned, read during the call) carries its traffic class.
   * logFunction and profFunction stay valid until finalize; profFunction reports plugin-defined
   * events to the profiler (it may be ignored). May block. Non-success: the core does not use
   * this plugin for that communicator and tries the next one. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                       ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
  /* Writes the number of physical devices. May block. Zero makes the plugin unusable. */
  ncclResult_t (*devices)(int* ndev);
  /* Fills the core-owned *props for device dev (0 <= dev < ndev). Pointers stored in it stay
   * plugin-owned and valid while the library is loaded. May block. */
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  /* Receiver side: creates a listening object in *listenComm and writes at most
   * NCCL_NET_HANDLE_MAXSIZE bytes of connection data into the core-owned buffer `handle`, which
   * the core forwards to the peer's connect(). Must not wait for the peer. */
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  /* Sender side: starts or continues connecting to the peer described by `handle`. Must not
   * block: success with *sendComm == NULL means "not yet, call again". sendDevComm points to a
   * core-owned handle pointer: when *sendDevComm is non-NULL the core asks for device offload
   * and the plugin fills that handle; when it is NULL the connection is host-driven. */
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                          ncclNetDeviceHandle_v11_t** sendDevComm);
  /* Receiver side: completes a connection on listenComm. Same contract as connect, including
   * recvDevComm: success with *recvComm == NULL means "call again". */
  ncclResult_t (*accept)(void* listenComm, void** recvComm,
                         ncclNetDeviceHandle_v11_t** recvDevComm);
  /* Registers [data, data + size) of memory type NCCL_PTR_HOST or NCCL_PTR_CUDA on a send or
   * receive comm; *mhandle is plugin-owned until deregMr. May block. */
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  /* Like regMr for CUDA memory exported as a dma-buf (fd, offset). The core closes fd when the
   * call returns, so the plugin must import it during the call. NULL if ptrSupport lacks
   * NCCL_PTR_DMABUF. */
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  /* Releases a handle from regMr or regMrDmaBuf; no pending request still uses it. */
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  /* Starts sending size bytes from registered memory. *request == NULL on success means "cannot
   * start now, call again"; otherwise poll it with test. tag selects the receive slot when the
   * peer posts a multi-receive. phandle is an opaque profiler handle to hand back through the
   * profiler callback. Never blocks. */
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void* phandle, void** request);
  /* Posts n <= maxRecvs receive buffers as one request; sizes are upper bounds. Sends and
   * receives on a connection match in posting order; tags pick the buffer inside one
   * multi-receive. phandles holds one opaque profiler handle per buffer. On entry *request may
   * hold NCCL_NET_OPTIONAL_RECV_COMPLETION (else NULL). *request == NULL on return means "call
   * again". Never blocks. */
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** phandles, void** request);
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
  /* Device offload only: writes to *dptr_mhandle a copy of mhandle usable by the plugin's device
   * code. May be NULL for host-driven devices. */
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
  /* Device offload only: the GPU has consumed the n buffers of the completed receive `request`,
   * which the plugin may now recycle. May be NULL for host-driven devices. */
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  /* Creates a virtual device fusing the props->ndevs physical devices props->devs (core-owned,
   * read during the call) and writes its index to *d; the core then queries it with
   * getProperties. Runs during communicator initialization; may block. NULL: no NIC fusion. */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  /* Destroys the context from init, after the core has closed every comm opened with it. May
   * block. */
  ncclResult_t (*finalize)(void* ctx);
  /* Traffic hints for the context's connections: the core calls it while setting up connections
   * and whenever its expectation changes; attr is core-owned and read during the call. Fields
   * equal to NCCL_NET_ATTR_UNDEF carry no hint. Never blocks. May be NULL. */
  ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v11_t* netAttr);
} ncclNet_v11_t;

/* One registered piece of a scattered collnet buffer. */
typedef struct {
  void* mhandle; /* registration covering the piece */
  void* address; /* start of the piece */
  size_t size;   /* bytes */
} ncclNetSGE_v11_t;

typedef struct {
  /* Collective network name, plugin-owned for the life of the library. */
  const char* name;
  /* Once per communicator: creates the context *ctx that listen and finalize receive. commId
   * identifies the communicator. May block. Non-success disables collnet only, not the net
   * plugin. */
  ncclResult_t (*init)(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
  /* Writes the number of devices able to offload collectives. May block. When it reports 0, the
   * entries below may be NULL and collnet is not used. */
  ncclResult_t (*devices)(int* ndev);
  /* Fills the core-owned *props for device dev; same rules as ncclNet_v11_t.getProperties. */
  ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t* props);
  /* Creates a listening object and writes at most NCCL_NET_HANDLE_MAXSIZE bytes into `handle`,
   * which the core exchanges with every rank of the group. Must not wait for peers. */
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  /* Forms the collective group from every rank's listen handle (handles[i] from rank i,
   * core-owned, read during the call); rank is the caller's rank. Every rank of the group calls
   * it; it may block until the group is formed. */
  ncclResult_t (*connect)(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
  /* Writes 1 to *supported when iallreduce handles (dataType, redOp), else 0. Never blocks. */
  ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
  /* Registers memory (NCCL_PTR_HOST or NCCL_PTR_CUDA) on collComm; *mhandle is plugin-owned
   * until deregMr. May block. */
  ncclResult_t (*regMr)(void* collComm, void* data, size_t size, int type, void** mhandle);
  /* dma-buf variant of regMr; the core closes fd when the call returns. May be NULL. */
  ncclResult_t (*regMrDmaBuf)(void* collComm, void* data, size_t size, int type, uint64_t offset,
                              int fd, void** mhandle);
  /* Releases a registration; no pending request still uses it. */
  ncclResult_t (*deregMr)(void* collComm, void* mhandle);
  /* Starts an allreduce of count elements from sendData into recvData (both registered).
   * *request == NULL means "call again". Never blocks. */
  ncclResult_t (*iallreduce)(void* collComm, void* sendData, void* recvData, size_t count,
                             ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                             void* recvMhandle, void** request);
  /* Starts an allgather: sendData holds bytesPerRank registered bytes; recvParts (nRecvParts
   * entries, core-owned, read during the call) is where this call's part of the result lands:
   * windowBytes bytes starting windowOffset bytes into the full nranks * bytesPerRank result.
   * *request == NULL means "call again". Never blocks. */
  ncclResult_t (*iallgather)(void* collComm, void* sendData, int nRecvParts,
                             ncclNetSGE_v11_t* recvParts, size_t bytesPerRank, size_t windowOffset,
                             size_t windowBytes, void* sendMhandle, void** request);
  /* Starts a reduce-scatter: sendParts (nSendParts entries, core-owned) hold this call's window
   * of the full nranks * bytesPerRank input; this rank's reduced bytesPerRank bytes land in
   * recvData. *request == NULL means "call again". Never blocks. */
  ncclResult_t (*ireducescatter)(void* collComm, int nSendParts, ncclNetSGE_v11_t* sendParts,
                                 void* recvData, size_t bytesPerRank, size_t windowOffset,
                                 size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
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
  /* Creates a virtual collnet device from props (core-owned) and writes its index to *d. May be
   * NULL. */
  ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v11_t* props);
  /* Destroys the context from init, after every comm opened with it is closed. May block. */
  ncclResult_t (*finalize)(void* ctx);
} ncclCollNet_v11_t;

#ifdef __cplusplus
}
#endif

#endif
