/* Version, error strings, last error, debug reset, memory and reduction operators. */
#include "api.h"
#include "comm.h"
#include "enqueue.h"

ncclResult_t api_missing(const char* func, const char* feature) {
  WARN("%s: %s is not implemented in Choir %s yet (see the support table in Choir's README)",
       func, feature, CHOIR_VERSION);
  return ncclInvalidUsage;
}

ncclResult_t api_check_datatype(const char* func, ncclDataType_t datatype) {
#ifdef CHOIR_TEST_PLANT_NO_DATATYPE_CHECK /* planted bug: test/unit's api-comm-catches-* only */
  datatype = ncclInt8;
#endif
  if ((int)datatype < 0 || (int)datatype >= ncclNumTypes) {
    WARN("%s: datatype %d is not an ncclDataType_t (valid: 0..%d, ncclInt8..ncclFloat8e5m2)",
         func, (int)datatype, ncclNumTypes - 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  API_CHECK_PTR("ncclGetVersion", version);
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) { return err_string(result); }

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  (void)comm; /* the last error is kept per thread, with the process's latest as fallback */
  return err_last();
}

/* Declared deprecated in nccl.h; the definition must not trip -Wdeprecated-declarations. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
NCCL_API(void, ncclResetDebugInit, void) { log_reset(); }
#pragma GCC diagnostic pop

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  API_CHECK_PTR("ncclMemAlloc", ptr);
  if (size == 0) {
    *ptr = NULL; /* as NCCL, whose cudaMalloc of 0 bytes gives NULL */
    return ncclSuccess;
  }
  /* More than the device has can never succeed (and near SIZE_MAX the rounding to the
   * allocation granularity would wrap): refuse it before the driver sees it. */
  int dev = -1;
  size_t free_bytes = 0, total = 0;
  CHECK(cuda_get_device(&dev));
  CHECK(cuda_mem_get_info(&free_bytes, &total));
  if (size > total) {
    WARN(
        "ncclMemAlloc: size %zu bytes is more than the %zu bytes of memory CUDA device %d has; "
        "pass the size of the buffer in bytes",
        size, total, dev);
    return ncclInvalidArgument;
  }
  return cumem_alloc(ptr, size);
}

/* cumem_free refuses, before any driver call, a pointer that is not one ncclMemAlloc returned
 * and did not free yet (a foreign pointer, one inside an allocation, a second free). */
NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  if (ptr == NULL) return ncclSuccess;
  return cumem_free(ptr);
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  const char* f = "ncclRedOpCreatePreMulSum";
  API_CHECK_PTR(f, op);
  API_CHECK_PTR(f, scalar);
  CHECK(comm_check_usable(f, comm));
  CHECK(api_check_datatype(f, datatype));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate) {
    WARN("%s: residence %d is not an ncclScalarResidence_t (use ncclScalarDevice or "
         "ncclScalarHostImmediate)", f, (int)residence);
    return ncclInvalidArgument;
  }
  CHECK(enqueue_comm_deferred_idle(comm->dp, f)); /* a background launch reads the operators */
  return enqueue_redop_create(comm->dp, op, scalar, datatype, residence);
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  CHECK(comm_check_ready("ncclRedOpDestroy", comm));
  if ((int)op < (int)ncclNumOps) {
    WARN("ncclRedOpDestroy: op %d is a built-in operator; only operators created by "
         "ncclRedOpCreatePreMulSum can be destroyed", (int)op);
    return ncclInvalidArgument;
  }
  CHECK(enqueue_comm_deferred_idle(comm->dp, "ncclRedOpDestroy"));
  return enqueue_redop_destroy(comm->dp, op);
}
