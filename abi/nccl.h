/*
 * Choir: the NCCL application interface, at the NCCL 2.28 ABI level.
 *
 * Every type, value and layout here is NCCL 2.28's, so programs built against NVIDIA's nccl.h run
 * on Choir's libnccl.so.2 unchanged and the other way round; test/abi checks that against the
 * header shipped with the CUDA toolkit. The text of this header is Choir's own.
 *
 * Every function has a twin with a `p` prefix (pncclAllReduce ...), for profiling tools that
 * interpose on the `nccl` names, as with MPI's PMPI.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <cuda_runtime.h>
#include <cuda_fp16.h>
#if CUDART_VERSION >= 11000
#include <cuda_bf16.h>
#endif
#if defined(__cplusplus) && CUDART_VERSION >= 11080
#include <cuda_fp8.h>
#endif

/* The NCCL API level this header and the library implement. Choir's own release number is
 * separate (choir-info prints it, and NCCL_DEBUG=VERSION logs it). */
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_SUFFIX ""

#define NCCL_VERSION_CODE 22809
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))

#include <limits.h>
#include <stddef.h>

#include "nccl_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handles. */
typedef struct ncclComm* ncclComm_t;
typedef struct ncclWindow_vidmem* ncclWindow_t;
#define NCCL_COMM_NULL NULL

/* Rendezvous token created by ncclGetUniqueId on one rank and handed to all others. Its content
 * is private to the library that created it. */
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR -1
#define NCCL_UNDEF_FLOAT -1.0f

/* ncclCommWindowRegister flags, and the alignment a symmetric window needs. */
#define NCCL_WIN_DEFAULT 0x00
#define NCCL_WIN_COLL_SYMMETRIC 0x01
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/* ncclConfig_t.CTAPolicy values. */
#define NCCL_CTA_POLICY_DEFAULT 0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO 0x02

/* ncclCommShrink flags: keep the parent as it is, or abort its outstanding work first. */
#define NCCL_SHRINK_DEFAULT 0x00
#define NCCL_SHRINK_ABORT 0x01

/* ncclCommRevoke flags: only the default exists. */
#define NCCL_REVOKE_DEFAULT 0x00

/*
 * Communicator options. Always start from NCCL_CONFIG_INITIALIZER: the library reads `size`,
 * checks `magic` and uses `version` to know which fields the caller's header had, so a program
 * built against an older header keeps working. Fields left at NCCL_CONFIG_UNDEF_* take the
 * library's defaults (or the matching NCCL_* environment variable).
 */
typedef struct ncclConfig_v22800 {
  size_t size;                /* sizeof(ncclConfig_t) of the caller's header */
  unsigned int magic;         /* 0xcafebeef */
  unsigned int version;       /* NCCL_VERSION_CODE of the caller's header */
  int blocking;               /* 0: calls may return ncclInProgress; poll ncclCommGetAsyncError */
  int cgaClusterSize;         /* CUDA thread-block cluster size for the kernels */
  int minCTAs;                /* lower bound on CTAs (channels) per collective */
  int maxCTAs;                /* upper bound on CTAs (channels) per collective */
  const char* netName;        /* net plugin to use, by its table name (NCCL_NET overrides) */
  int splitShare;             /* children of ncclCommSplit share the parent's resources */
  int trafficClass;           /* network traffic class handed to net plugins */
  const char* commName;       /* name used in logs and by the profiler */
  int collnetEnable;          /* allow CollNet algorithms */
  int CTAPolicy;              /* NCCL_CTA_POLICY_* */
  int shrinkShare;            /* children of ncclCommShrink share the parent's resources */
  int nvlsCTAs;               /* CTAs used by NVLink SHARP algorithms */
  int nChannelsPerNetPeer;    /* channels per network peer for point-to-point */
  int nvlinkCentricSched;     /* schedule point-to-point around NVLink domains */
} ncclConfig_t;

#define NCCL_CONFIG_INITIALIZER                                                          \
  {                                                                                      \
    sizeof(ncclConfig_t),                       /* size */                               \
    0xcafebeef,                                 /* magic */                              \
    NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                      \
    NCCL_CONFIG_UNDEF_INT,                      /* blocking */                           \
    NCCL_CONFIG_UNDEF_INT,                      /* cgaClusterSize */                     \
    NCCL_CONFIG_UNDEF_INT,                      /* minCTAs */                            \
    NCCL_CONFIG_UNDEF_INT,                      /* maxCTAs */                            \
    NCCL_CONFIG_UNDEF_PTR,                      /* netName */                            \
    NCCL_CONFIG_UNDEF_INT,                      /* splitShare */                         \
    NCCL_CONFIG_UNDEF_INT,                      /* trafficClass */                       \
    NCCL_CONFIG_UNDEF_PTR,                      /* commName */                           \
    NCCL_CONFIG_UNDEF_INT,                      /* collnetEnable */                      \
    NCCL_CONFIG_UNDEF_INT,                      /* CTAPolicy */                          \
    NCCL_CONFIG_UNDEF_INT,                      /* shrinkShare */                        \
    NCCL_CONFIG_UNDEF_INT,                      /* nvlsCTAs */                           \
    NCCL_CONFIG_UNDEF_INT,                      /* nChannelsPerNetPeer */                \
    NCCL_CONFIG_UNDEF_INT,                      /* nvlinkCentricSched */                 \
  }

/* Filled by ncclGroupSimulateEnd: the estimated time of the group, in microseconds. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;   /* 0x74685283 */
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_INITIALIZER                                          \
  {                                                                        \
    sizeof(ncclSimInfo_t),                            /* size */           \
    0x74685283,                                       /* magic */          \
    NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */        \
    NCCL_UNDEF_FLOAT                                  /* estimatedTime */  \
  }

/* Where the scalar of ncclRedOpCreatePreMulSum lives: device memory read while the collective
 * runs, or host memory read before the call returns. */
typedef enum {
  ncclScalarDevice = 0,
  ncclScalarHostImmediate = 1
} ncclScalarResidence_t;

/* ---- Memory, version, unique id ---- */

/* Allocate GPU memory suited to registration and peer mapping (cuMem based); free it with
 * ncclMemFree. The allocation may be larger than asked, for granularity. */
ncclResult_t ncclMemAlloc(void** ptr, size_t size);
ncclResult_t pncclMemAlloc(void** ptr, size_t size);
ncclResult_t ncclMemFree(void* ptr);
ncclResult_t pncclMemFree(void* ptr);

/* The NCCL API level of the library (NCCL_VERSION_CODE form). */
ncclResult_t ncclGetVersion(int* version);
ncclResult_t pncclGetVersion(int* version);

/* Create the token that every rank of a new communicator passes to ncclCommInitRank*. Call it on
 * one rank and distribute the bytes (MPI_Bcast, a file, ...). */
ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId* uniqueId);

/* ---- Communicator lifecycle ---- */

/* Create this rank's communicator (one call per rank, from distinct threads or processes, or
 * inside a group) with options. The CUDA device current at the call is the rank's device. */
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t* config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t* config);

/* Same, with default options. */
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank);

/* Create ndev communicators of one clique in this process, one per device of devlist (or devices
 * 0..ndev-1 when devlist is NULL); comm must hold ndev handles. */
ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist);

/* Complete every operation issued on the communicator and release what needs the other ranks; a
 * non-blocking communicator returns ncclInProgress until done. Then ncclCommDestroy is local. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/* Release the communicator's local resources. */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/* Stop the communicator's outstanding work and release it, without waiting for other ranks. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/* Stop in-flight work and leave the communicator quiescent, ready for destroy, split or shrink.
 * revokeFlags must be NCCL_REVOKE_DEFAULT. Finalize is not allowed afterwards. */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/* Collective over the parent: ranks passing the same color form a new communicator, ordered by
 * key (ties by parent rank). NCCL_SPLIT_NOCOLOR yields *newcomm == NULL. A NULL config inherits
 * the parent's. */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                            ncclConfig_t* config);

/* New communicator of the parent's ranks minus excludeRanksList, renumbered in order; excluded
 * ranks do not call. shrinkFlags: NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT. */
ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                            ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                             ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags);

/* Like ncclCommInitRankConfig, with nId unique ids (the same list, in the same order, on every
 * rank) to spread the rendezvous over several roots. */
ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId* commIds, ncclConfig_t* config);

/* ---- Errors and queries ---- */

const char* ncclGetErrorString(ncclResult_t result);
const char* pncclGetErrorString(ncclResult_t result);

/* Human-readable text of the last error seen by the library (comm may be NULL). */
const char* ncclGetLastError(ncclComm_t comm);
const char* pncclGetLastError(ncclComm_t comm);

/* Re-read NCCL_DEBUG and friends. Deprecated in NCCL; kept for ABI compatibility. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("ncclResetDebugInit is not part of the supported NCCL API")))
#endif
void ncclResetDebugInit(void);
#if defined(__GNUC__) || defined(__clang__)
__attribute__((deprecated("pncclResetDebugInit is not part of the supported NCCL API")))
#endif
void pncclResetDebugInit(void);

/* Asynchronous state: an error found in the background, or ncclInProgress while a non-blocking
 * operation on the communicator is still being set up. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError);

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count);

ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device);

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank);

/* ---- Buffer registration ---- */

/* Register a GPU buffer with the communicator for zero-copy transfers. */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle);

ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle);

/* Collective registration of a memory window (symmetric when NCCL_WIN_COLL_SYMMETRIC). */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                     int winFlags);

ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);

/* ---- User-defined reduction operators ---- */

/* New operator for `comm` and `datatype`: multiply each input by *scalar, then sum. With
 * ncclScalarDevice the scalar is read from device memory while each collective runs; with
 * ncclScalarHostImmediate it is copied before the call returns. */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);

/* Destroy an operator created on `comm`; allowed once the last call using it has returned. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/*
 * ---- Collectives ----
 * Each rank of the communicator makes the same call. Calls return once the operation is enqueued
 * on `stream`; completion follows stream order. Several ranks driven from one thread must be
 * inside ncclGroupStart/ncclGroupEnd.
 */

/* Reduce count elements of every rank's sendbuff with op into recvbuff of rank `root` (recvbuff
 * is ignored elsewhere). In place when sendbuff == recvbuff. */
ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/* Deprecated in-place broadcast of buff from rank `root`. */
ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/* Copy count elements of rank root's sendbuff into every rank's recvbuff. */
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/* Reduce count elements across ranks; every rank gets the result. */
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/* Reduce nranks*recvcount elements; rank i gets block i. In place when
 * recvbuff == sendbuff + rank*recvcount. */
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/* Every rank gets every rank's sendcount elements, rank i's at offset i*sendcount. In place when
 * sendbuff == recvbuff + rank*sendcount. */
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Rank i sends sendbuff + j*count to rank j, which stores it at recvbuff + i*count. */
ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/* Rank root gets rank i's count elements at recvbuff + i*count. In place when
 * sendbuff == recvbuff + root*count. */
ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                        ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/* Rank i gets root's sendbuff + i*count. In place when recvbuff == sendbuff + root*count. */
ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm,
                          cudaStream_t stream);

/* ---- Point to point ---- */

/* Send count elements to `peer`, which must post a matching ncclRecv. Sends and receives that
 * must progress together go in one group. */
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/* ---- Groups ----
 * Calls between ncclGroupStart and ncclGroupEnd are launched together at ncclGroupEnd:
 * several GPUs from one thread, aggregated operations, sends and receives that must progress
 * concurrently. Groups nest; only the outermost end launches. ncclGroupEnd returns once
 * everything is enqueued (or ncclInProgress for non-blocking communicators). */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/* Plan the open group as ncclGroupEnd would, without launching, and fill simInfo. */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo);

#ifdef __cplusplus
}
#endif

#endif
