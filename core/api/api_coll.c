/* Collectives, point-to-point and groups. */
#include "api.h"
#include "comm.h"
#include "enqueue.h"

static const char* const api_feature_coll = "collective and point-to-point operations";

/* What every operation checks before going inward (NCCL's order: comm, then arguments). */
static ncclResult_t api_check_op(const char* f, ncclComm_t comm, ncclDataType_t datatype) {
  CHECK(comm_check_ready(f, comm));
  CHECK(api_check_datatype(f, datatype));
  return ncclSuccess;
}

/* root of rooted collectives, peer of send/recv: a rank of the communicator. */
static ncclResult_t api_check_rank(const char* f, const char* what, ncclComm_t comm, int r) {
  if (r < 0 || r >= comm->nranks) {
    WARN("%s: %s %d is not a rank of the communicator (0..%d)", f, what, r, comm->nranks - 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t api_check_redop(const char* f, ncclRedOp_t op) {
  if ((int)op < 0) {
    WARN("%s: op %d is not an ncclRedOp_t (use ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg or "
         "an operator from ncclRedOpCreatePreMulSum)", f, (int)op);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclAllReduce", comm, datatype));
  CHECK(api_check_redop("ncclAllReduce", op));
  return api_missing("ncclAllReduce", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
         cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclReduce", comm, datatype));
  CHECK(api_check_rank("ncclReduce", "root", comm, root));
  CHECK(api_check_redop("ncclReduce", op));
  return api_missing("ncclReduce", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  (void)buff, (void)count, (void)stream;
  CHECK(api_check_op("ncclBcast", comm, datatype));
  CHECK(api_check_rank("ncclBcast", "root", comm, root));
  return api_missing("ncclBcast", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclBroadcast", comm, datatype));
  CHECK(api_check_rank("ncclBroadcast", "root", comm, root));
  return api_missing("ncclBroadcast", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)recvcount, (void)stream;
  CHECK(api_check_op("ncclReduceScatter", comm, datatype));
  CHECK(api_check_redop("ncclReduceScatter", op));
  return api_missing("ncclReduceScatter", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)sendcount, (void)stream;
  CHECK(api_check_op("ncclAllGather", comm, datatype));
  return api_missing("ncclAllGather", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclAlltoAll", comm, datatype));
  return api_missing("ncclAlltoAll", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclGather", comm, datatype));
  CHECK(api_check_rank("ncclGather", "root", comm, root));
  return api_missing("ncclGather", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclScatter", comm, datatype));
  CHECK(api_check_rank("ncclScatter", "root", comm, root));
  return api_missing("ncclScatter", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  (void)sendbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclSend", comm, datatype));
  CHECK(api_check_rank("ncclSend", "peer", comm, peer));
  return api_missing("ncclSend", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  (void)recvbuff, (void)count, (void)stream;
  CHECK(api_check_op("ncclRecv", comm, datatype));
  CHECK(api_check_rank("ncclRecv", "peer", comm, peer));
  return api_missing("ncclRecv", api_feature_coll);
}

NCCL_API(ncclResult_t, ncclGroupStart, void) { return enqueue_group_start(); }

NCCL_API(ncclResult_t, ncclGroupEnd, void) { return enqueue_group_end(NULL); }

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  API_CHECK_PTR("ncclGroupSimulateEnd", simInfo);
  if (simInfo->magic != 0x74685283u) {
    WARN("ncclGroupSimulateEnd: simInfo was not initialized with NCCL_SIM_INFO_INITIALIZER "
         "(magic 0x%x)", simInfo->magic);
    return ncclInvalidArgument;
  }
  return enqueue_group_end(simInfo);
}
