/*
 * Choir: the basic NCCL value types shared by the application ABI (nccl.h) and the plugin ABIs
 * (nccl_common.h). Values and sizes are NCCL 2.28's; test/abi pins them against NVIDIA's header.
 * C99, no CUDA dependency, so that plugins can include it without the CUDA toolkit.
 */
#ifndef CHOIR_NCCL_TYPES_H
#define CHOIR_NCCL_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* Result of every NCCL call. ncclNumResults is 8 at the 2.28 level (2.30 inserted ncclTimeout=8). */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

/* ncclRedOp_t must stay int-sized: the largest value is derived from the size of a small enum,
 * as NCCL does, so that compilers with short enums keep the same size as before. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  /* Number of built-in operators, and the first id handed out by ncclRedOpCreatePreMulSum. */
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

#ifdef __cplusplus
}
#endif

#endif
