/*
 * ABI probe: built once against Choir's nccl.h and once against NVIDIA's NCCL 2.28 nccl.h (from
 * the CUDA toolkit). It prints every size, offset, enum value and macro value that the ABI
 * depends on, one "key value" line each; compare_probes.py requires the two outputs to be
 * identical. The function-pointer assignments at the end fail to compile if either header
 * declares a function with another signature than NCCL 2.28's.
 */
#include <stddef.h>
#include <stdio.h>

#include "nccl.h"

#include "probe.h"

/* Signatures of NCCL 2.28, written out; each is assigned the nccl and pnccl functions. */
#define SIG(name, ret, ...)                    \
  {                                            \
    ret (*fn_)(__VA_ARGS__) = name;            \
    ret (*pfn_)(__VA_ARGS__) = p##name;        \
    P("function " #name, fn_ != NULL && pfn_ != NULL); \
  }

static void probe_functions(void) {
  SIG(ncclMemAlloc, ncclResult_t, void**, size_t);
  SIG(ncclMemFree, ncclResult_t, void*);
  SIG(ncclGetVersion, ncclResult_t, int*);
  SIG(ncclGetUniqueId, ncclResult_t, ncclUniqueId*);
  SIG(ncclCommInitRankConfig, ncclResult_t, ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*);
  SIG(ncclCommInitRank, ncclResult_t, ncclComm_t*, int, ncclUniqueId, int);
  SIG(ncclCommInitAll, ncclResult_t, ncclComm_t*, int, const int*);
  SIG(ncclCommFinalize, ncclResult_t, ncclComm_t);
  SIG(ncclCommDestroy, ncclResult_t, ncclComm_t);
  SIG(ncclCommAbort, ncclResult_t, ncclComm_t);
  SIG(ncclCommRevoke, ncclResult_t, ncclComm_t, int);
  SIG(ncclCommSplit, ncclResult_t, ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*);
  SIG(ncclCommShrink, ncclResult_t, ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
  SIG(ncclCommInitRankScalable, ncclResult_t, ncclComm_t*, int, int, int, ncclUniqueId*,
      ncclConfig_t*);
  SIG(ncclGetErrorString, const char*, ncclResult_t);
  SIG(ncclGetLastError, const char*, ncclComm_t);
  SIG(ncclResetDebugInit, void, void);
  SIG(ncclCommGetAsyncError, ncclResult_t, ncclComm_t, ncclResult_t*);
  SIG(ncclCommCount, ncclResult_t, const ncclComm_t, int*);
  SIG(ncclCommCuDevice, ncclResult_t, const ncclComm_t, int*);
  SIG(ncclCommUserRank, ncclResult_t, const ncclComm_t, int*);
  SIG(ncclCommRegister, ncclResult_t, const ncclComm_t, void*, size_t, void**);
  SIG(ncclCommDeregister, ncclResult_t, const ncclComm_t, void*);
  SIG(ncclCommWindowRegister, ncclResult_t, ncclComm_t, void*, size_t, ncclWindow_t*, int);
  SIG(ncclCommWindowDeregister, ncclResult_t, ncclComm_t, ncclWindow_t);
  SIG(ncclRedOpCreatePreMulSum, ncclResult_t, ncclRedOp_t*, void*, ncclDataType_t,
      ncclScalarResidence_t, ncclComm_t);
  SIG(ncclRedOpDestroy, ncclResult_t, ncclRedOp_t, ncclComm_t);
  SIG(ncclReduce, ncclResult_t, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
      ncclComm_t, cudaStream_t);
  SIG(ncclBcast, ncclResult_t, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  SIG(ncclBroadcast, ncclResult_t, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
      cudaStream_t);
  SIG(ncclAllReduce, ncclResult_t, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
      ncclComm_t, cudaStream_t);
  SIG(ncclReduceScatter, ncclResult_t, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
      ncclComm_t, cudaStream_t);
  SIG(ncclAllGather, ncclResult_t, const void*, void*, size_t, ncclDataType_t, ncclComm_t,
      cudaStream_t);
  SIG(ncclAlltoAll, ncclResult_t, const void*, void*, size_t, ncclDataType_t, ncclComm_t,
      cudaStream_t);
  SIG(ncclGather, ncclResult_t, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
      cudaStream_t);
  SIG(ncclScatter, ncclResult_t, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
      cudaStream_t);
  SIG(ncclSend, ncclResult_t, const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  SIG(ncclRecv, ncclResult_t, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
  SIG(ncclGroupStart, ncclResult_t, void);
  SIG(ncclGroupEnd, ncclResult_t, void);
  SIG(ncclGroupSimulateEnd, ncclResult_t, ncclSimInfo_t*);
}

int main(void) {
#ifdef CHOIR_NCCL_TYPES_H
  printf("header choir\n");
#else
  printf("header reference\n");
#endif
  VAL(NCCL_MAJOR);
  VAL(NCCL_MINOR);
  VAL(NCCL_PATCH);
  VAL(NCCL_VERSION_CODE);
  P("NCCL_VERSION(2,28,9)", NCCL_VERSION(2, 28, 9));
  P("NCCL_VERSION(2,30,7)", NCCL_VERSION(2, 30, 7));
  P("NCCL_VERSION(3,0,1)", NCCL_VERSION(3, 0, 1));
  printf("NCCL_SUFFIX \"%s\"\n", NCCL_SUFFIX);
  VAL(NCCL_UNIQUE_ID_BYTES);
  VAL(NCCL_CONFIG_UNDEF_INT);
  P("NCCL_CONFIG_UNDEF_PTR", NCCL_CONFIG_UNDEF_PTR == NULL);
  P("NCCL_COMM_NULL", NCCL_COMM_NULL == NULL);
  VAL(NCCL_SPLIT_NOCOLOR);
  P("NCCL_UNDEF_FLOAT*1000", NCCL_UNDEF_FLOAT * 1000);
  VAL(NCCL_WIN_DEFAULT);
  VAL(NCCL_WIN_COLL_SYMMETRIC);
  VAL(NCCL_WIN_REQUIRED_ALIGNMENT);
  VAL(NCCL_CTA_POLICY_DEFAULT);
  VAL(NCCL_CTA_POLICY_EFFICIENCY);
  VAL(NCCL_CTA_POLICY_ZERO);
  VAL(NCCL_SHRINK_DEFAULT);
  VAL(NCCL_SHRINK_ABORT);
  VAL(NCCL_REVOKE_DEFAULT);

  SIZE(ncclComm_t);
  SIZE(ncclWindow_t);
  SIZE(ncclUniqueId);
  OFF(ncclUniqueId, internal);

  SIZE(ncclResult_t);
  VAL(ncclSuccess);
  VAL(ncclUnhandledCudaError);
  VAL(ncclSystemError);
  VAL(ncclInternalError);
  VAL(ncclInvalidArgument);
  VAL(ncclInvalidUsage);
  VAL(ncclRemoteError);
  VAL(ncclInProgress);
  VAL(ncclNumResults);

  SIZE(ncclRedOp_t);
  VAL(ncclSum);
  VAL(ncclProd);
  VAL(ncclMax);
  VAL(ncclMin);
  VAL(ncclAvg);
  VAL(ncclNumOps);
  VAL(ncclMaxRedOp);

  SIZE(ncclDataType_t);
  VAL(ncclInt8);
  VAL(ncclChar);
  VAL(ncclUint8);
  VAL(ncclInt32);
  VAL(ncclInt);
  VAL(ncclUint32);
  VAL(ncclInt64);
  VAL(ncclUint64);
  VAL(ncclFloat16);
  VAL(ncclHalf);
  VAL(ncclFloat32);
  VAL(ncclFloat);
  VAL(ncclFloat64);
  VAL(ncclDouble);
  VAL(ncclBfloat16);
  VAL(ncclFloat8e4m3);
  VAL(ncclFloat8e5m2);
  VAL(ncclNumTypes);

  SIZE(ncclScalarResidence_t);
  VAL(ncclScalarDevice);
  VAL(ncclScalarHostImmediate);

  SIZE(ncclConfig_t);
  SIZE(struct ncclConfig_v22800);
  OFF(ncclConfig_t, size);
  OFF(ncclConfig_t, magic);
  OFF(ncclConfig_t, version);
  OFF(ncclConfig_t, blocking);
  OFF(ncclConfig_t, cgaClusterSize);
  OFF(ncclConfig_t, minCTAs);
  OFF(ncclConfig_t, maxCTAs);
  OFF(ncclConfig_t, netName);
  OFF(ncclConfig_t, splitShare);
  OFF(ncclConfig_t, trafficClass);
  OFF(ncclConfig_t, commName);
  OFF(ncclConfig_t, collnetEnable);
  OFF(ncclConfig_t, CTAPolicy);
  OFF(ncclConfig_t, shrinkShare);
  OFF(ncclConfig_t, nvlsCTAs);
  OFF(ncclConfig_t, nChannelsPerNetPeer);
  OFF(ncclConfig_t, nvlinkCentricSched);

  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  P("config.size", c.size);
  P("config.magic", c.magic);
  P("config.version", c.version);
  P("config.blocking", c.blocking);
  P("config.cgaClusterSize", c.cgaClusterSize);
  P("config.minCTAs", c.minCTAs);
  P("config.maxCTAs", c.maxCTAs);
  P("config.netName", c.netName == NULL);
  P("config.splitShare", c.splitShare);
  P("config.trafficClass", c.trafficClass);
  P("config.commName", c.commName == NULL);
  P("config.collnetEnable", c.collnetEnable);
  P("config.CTAPolicy", c.CTAPolicy);
  P("config.shrinkShare", c.shrinkShare);
  P("config.nvlsCTAs", c.nvlsCTAs);
  P("config.nChannelsPerNetPeer", c.nChannelsPerNetPeer);
  P("config.nvlinkCentricSched", c.nvlinkCentricSched);

  SIZE(ncclSimInfo_t);
  SIZE(struct ncclSimInfo_v22200);
  OFF(ncclSimInfo_t, size);
  OFF(ncclSimInfo_t, magic);
  OFF(ncclSimInfo_t, version);
  OFF(ncclSimInfo_t, estimatedTime);
  ncclSimInfo_t s = NCCL_SIM_INFO_INITIALIZER;
  P("siminfo.size", s.size);
  P("siminfo.magic", s.magic);
  P("siminfo.version", s.version);
  P("siminfo.estimatedTime*1000", s.estimatedTime * 1000);

  probe_functions();
  return 0;
}
