/* Collectives, point-to-point and groups. */
#include "api.h"
#include "comm.h"
#include "enqueue.h"

/* An operation's checks: a failure is returned, and inside a group it also becomes the group's
 * error (ncclGroupEnd returns it and runs nothing of the group), as in NCCL. */
#define OP_CHECK(call)                                            \
  do {                                                            \
    ncclResult_t op_res_ = (call);                                \
    if (op_res_ != ncclSuccess) {                                 \
      INFO(NCCL_ALL, "%s:%d -> %d", __FILE__, __LINE__, op_res_); \
      return enqueue_group_fail(op_res_);                         \
    }                                                             \
  } while (0)

/* What every operation checks before going inward (NCCL's order: comm, then arguments). A
 * communicator still being created, failed, revoked or finalized takes no operation. */
static ncclResult_t api_check_op(const char* f, ncclComm_t comm, ncclDataType_t datatype) {
  CHECK(comm_check_usable(f, comm));
  CHECK(api_check_datatype(f, datatype));
  return ncclSuccess;
}

/* The largest buffer's size in bytes must fit in size_t: count elements of datatype, times
 * `blocks` (nranks for the buffers that hold one block per rank, else 1). A larger count can only
 * be a mistake, and the data path computes with those sizes. */
static ncclResult_t api_check_count(const char* f, const char* what, size_t count,
                                    ncclDataType_t datatype, int blocks) {
  size_t esize = enqueue_type_size(datatype); /* 0 for a bad datatype: its own check reports it */
  if (esize == 0 || count <= SIZE_MAX / esize / (size_t)blocks) return ncclSuccess;
  if (blocks > 1)
    WARN("%s: %s %zu is too large: %s x nranks (%d) x %zu bytes per element overflows size_t", f,
         what, count, what, blocks, esize);
  else
    WARN("%s: %s %zu is too large: %s x %zu bytes per element overflows size_t", f, what, count,
         what, esize);
  return ncclInvalidArgument;
}

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

/* Buffers: a NULL pointer is an error wherever the operation reads or writes it (count > 0). */
static ncclResult_t api_check_buf(const char* f, const char* what, const void* p, size_t count) {
  if (count > 0 && p == NULL) {
    WARN("%s: %s is NULL with count %zu; pass a device buffer (or count 0)", f, what, count);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

static ncclResult_t api_enqueue(const char* f, ncclComm_t comm, enq_kind_t kind,
                                const void* sendbuff, void* recvbuff, size_t count,
                                ncclDataType_t type, ncclRedOp_t op, int root,
                                cudaStream_t stream) {
  OP_CHECK(comm_check_peers(f, comm, kind == ENQ_SEND || kind == ENQ_RECV ? root : -1));
  OP_CHECK(enqueue_comm_deferred_idle(comm->dp, f));
  enq_op_t o = {.kind = kind, .sendbuff = sendbuff, .recvbuff = recvbuff, .count = count,
                .type = type, .op = op, .root = root, .stream = stream};
  return enqueue_group_fail(enqueue_op(comm->dp, &o));
}

static ncclResult_t api_reduction(const char* f, ncclComm_t comm, ncclDataType_t datatype,
                                  ncclRedOp_t op) {
  CHECK(api_check_op(f, comm, datatype)); /* the callers' OP_CHECK makes it the group's error */
  CHECK(api_check_redop(f, op));
  CHECK(enqueue_redop_check(comm->dp, f, op, datatype));
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclAllReduce";
  OP_CHECK(api_reduction(f, comm, datatype, op));
  OP_CHECK(api_check_count(f, "count", count, datatype, 1));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, count));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, count));
  return api_enqueue(f, comm, ENQ_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
         cudaStream_t stream) {
  const char* f = "ncclReduce";
  OP_CHECK(api_reduction(f, comm, datatype, op));
  OP_CHECK(api_check_count(f, "count", count, datatype, 1));
  OP_CHECK(api_check_rank(f, "root", comm, root));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, count));
  if (comm->rank == root) OP_CHECK(api_check_buf(f, "recvbuff (at the root)", recvbuff, count));
  return api_enqueue(f, comm, ENQ_REDUCE, sendbuff, recvbuff, count, datatype, op, root, stream);
}

NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclBcast";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, 1));
  OP_CHECK(api_check_rank(f, "root", comm, root));
  OP_CHECK(api_check_buf(f, "buff", buff, count));
  return api_enqueue(f, comm, ENQ_BROADCAST, buff, buff, count, datatype, ncclSum, root, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclBroadcast";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, 1));
  OP_CHECK(api_check_rank(f, "root", comm, root));
  if (comm->rank == root) OP_CHECK(api_check_buf(f, "sendbuff (at the root)", sendbuff, count));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, count));
  return api_enqueue(f, comm, ENQ_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root,
                     stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclReduceScatter";
  OP_CHECK(api_reduction(f, comm, datatype, op));
  OP_CHECK(api_check_count(f, "recvcount", recvcount, datatype, comm->nranks));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, recvcount));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, recvcount));
  return api_enqueue(f, comm, ENQ_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0,
                     stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclAllGather";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "sendcount", sendcount, datatype, comm->nranks));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, sendcount));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, sendcount));
  return api_enqueue(f, comm, ENQ_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0,
                     stream);
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclAlltoAll";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, comm->nranks));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, count));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, count));
  return api_enqueue(f, comm, ENQ_ALLTOALL, sendbuff, recvbuff, count, datatype, ncclSum, 0,
                     stream);
}

NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclGather";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, comm->nranks));
  OP_CHECK(api_check_rank(f, "root", comm, root));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, count));
  if (comm->rank == root) OP_CHECK(api_check_buf(f, "recvbuff (at the root)", recvbuff, count));
  return api_enqueue(f, comm, ENQ_GATHER, sendbuff, recvbuff, count, datatype, ncclSum, root,
                     stream);
}

NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclScatter";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, comm->nranks));
  OP_CHECK(api_check_rank(f, "root", comm, root));
  if (comm->rank == root) OP_CHECK(api_check_buf(f, "sendbuff (at the root)", sendbuff, count));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, count));
  return api_enqueue(f, comm, ENQ_SCATTER, sendbuff, recvbuff, count, datatype, ncclSum, root,
                     stream);
}

NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclSend";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, 1));
  OP_CHECK(api_check_rank(f, "peer", comm, peer));
  OP_CHECK(api_check_buf(f, "sendbuff", sendbuff, count));
  return api_enqueue(f, comm, ENQ_SEND, sendbuff, NULL, count, datatype, ncclSum, peer, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream) {
  const char* f = "ncclRecv";
  OP_CHECK(api_check_op(f, comm, datatype));
  OP_CHECK(api_check_count(f, "count", count, datatype, 1));
  OP_CHECK(api_check_rank(f, "peer", comm, peer));
  OP_CHECK(api_check_buf(f, "recvbuff", recvbuff, count));
  return api_enqueue(f, comm, ENQ_RECV, NULL, recvbuff, count, datatype, ncclSum, peer, stream);
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
