/* Unique id, communicator lifecycle, queries, buffer and window registration. */
#include "api.h"
#include "comm.h"
#include "enqueue.h"

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  API_CHECK_PTR("ncclGetUniqueId", uniqueId);
  return comm_get_unique_id(uniqueId);
}

/* Checks shared by every ncclCommInitRank* entry point. */
static ncclResult_t api_check_init(const char* f, ncclComm_t* comm, int nranks, int rank) {
  API_CHECK_PTR(f, comm);
  if (nranks < 1) {
    WARN("%s: nranks %d is invalid; it must be at least 1", f, nranks);
    return ncclInvalidArgument;
  }
  if (rank < 0 || rank >= nranks) {
    WARN("%s: rank %d is out of range; it must be in [0, nranks-1] = [0, %d]", f, rank,
         nranks - 1);
    return ncclInvalidArgument;
  }
  return ncclSuccess;
}

/* The calls that create communicators: inside a group, their failure is also the group's error
 * (enqueue_group_fail), so that ncclGroupEnd returns it instead of running the group's other
 * creation jobs, which would wait for the rank that failed until the bootstrap timeout. */

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId,
         int rank) {
  ncclResult_t res = api_check_init("ncclCommInitRank", comm, nranks, rank);
  if (res == ncclSuccess)
    res = comm_init_rank("ncclCommInitRank", comm, nranks, 1, &commId, rank, NULL);
  return enqueue_group_fail(res);
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks,
         ncclUniqueId commId, int rank, ncclConfig_t* config) {
  ncclResult_t res = api_check_init("ncclCommInitRankConfig", comm, nranks, rank);
  if (res == ncclSuccess)
    res = comm_init_rank("ncclCommInitRankConfig", comm, nranks, 1, &commId, rank, config);
  return enqueue_group_fail(res);
}

static ncclResult_t api_init_scalable(ncclComm_t* newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId* commIds, ncclConfig_t* config) {
  const char* f = "ncclCommInitRankScalable";
  CHECK(api_check_init(f, newcomm, nranks, myrank));
  API_CHECK_PTR(f, commIds);
  if (nId < 1 || nId > nranks) {
    WARN("%s: nId %d is invalid; it must be in [1, nranks] = [1, %d]", f, nId, nranks);
    return ncclInvalidArgument;
  }
  return comm_init_rank(f, newcomm, nranks, nId, commIds, myrank, config);
}

NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank,
         int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  return enqueue_group_fail(api_init_scalable(newcomm, nranks, myrank, nId, commIds, config));
}

static ncclResult_t api_init_all(ncclComm_t* comm, int ndev, const int* devlist) {
  API_CHECK_PTR("ncclCommInitAll", comm);
  if (ndev < 1) {
    WARN("ncclCommInitAll: ndev %d is invalid; it must be at least 1", ndev);
    return ncclInvalidArgument;
  }
  return comm_init_all(comm, ndev, devlist);
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  return enqueue_group_fail(api_init_all(comm, ndev, devlist));
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) { return comm_finalize(comm); }

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess; /* NCCL accepts destroying a NULL communicator */
  return comm_destroy(comm);
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  if (comm == NULL) return ncclSuccess;
  return comm_abort(comm);
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  CHECK(comm_check("ncclCommRevoke", comm));
  if (revokeFlags != NCCL_REVOKE_DEFAULT) {
    WARN("ncclCommRevoke: revokeFlags %d is invalid; it must be NCCL_REVOKE_DEFAULT (0)",
         revokeFlags);
    return ncclInvalidArgument;
  }
  return comm_revoke(comm);
}

static ncclResult_t api_split(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                              ncclConfig_t* config) {
  API_CHECK_PTR("ncclCommSplit", newcomm);
  if (color < NCCL_SPLIT_NOCOLOR) {
    WARN("ncclCommSplit: color %d is invalid; use a non-negative color or NCCL_SPLIT_NOCOLOR",
         color);
    return ncclInvalidArgument;
  }
  CHECK(comm_check("ncclCommSplit", comm));
  /* Split is allowed on a revoked communicator, not on one that failed or is being created. */
  int status = __atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  if (status != ncclSuccess) return comm_check_ready("ncclCommSplit", comm);
  CHECK(comm_check_not_finalized("ncclCommSplit", comm));
  return comm_split(comm, color, key, newcomm, config);
}

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  return enqueue_group_fail(api_split(comm, color, key, newcomm, config));
}

static ncclResult_t api_shrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                               ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  const char* f = "ncclCommShrink";
  API_CHECK_PTR(f, newcomm);
  CHECK(comm_check(f, comm));
  if (excludeRanksCount < 0 || excludeRanksCount >= comm->nranks ||
      (excludeRanksCount > 0 && excludeRanksList == NULL)) {
    WARN("%s: excludeRanksCount %d with excludeRanksList %p is invalid; pass a list of 0 to %d "
         "ranks", f, excludeRanksCount, (void*)excludeRanksList, comm->nranks - 1);
    return ncclInvalidArgument;
  }
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT) {
    WARN("%s: shrinkFlags %d is invalid; use NCCL_SHRINK_DEFAULT or NCCL_SHRINK_ABORT", f,
         shrinkFlags);
    return ncclInvalidArgument;
  }
  int status = __atomic_load_n(&comm->status, __ATOMIC_ACQUIRE);
  if (status == ncclInProgress) return ncclInProgress;
  /* A failed parent may be shrunk (that is what shrink is for), but it must have been created. */
  if (comm->bootstrap == NULL) {
    WARN("%s: comm %p was never fully created; it cannot be shrunk", f, (void*)comm);
    return ncclInvalidUsage;
  }
  CHECK(comm_check_not_finalized(f, comm));
  return comm_shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList,
         int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return enqueue_group_fail(
      api_shrink(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags));
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  API_CHECK_PTR("ncclCommGetAsyncError", asyncError);
  return comm_get_async_error(comm, asyncError);
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  API_CHECK_PTR("ncclCommCount", count);
  CHECK(comm_check_ready("ncclCommCount", comm));
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  API_CHECK_PTR("ncclCommCuDevice", device);
  CHECK(comm_check_ready("ncclCommCuDevice", comm));
  *device = comm->cuda_dev;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  API_CHECK_PTR("ncclCommUserRank", rank);
  CHECK(comm_check_ready("ncclCommUserRank", comm));
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size,
         void** handle) {
  API_CHECK_PTR("ncclCommRegister", handle);
  *handle = NULL;
  CHECK(comm_check_usable("ncclCommRegister", comm));
  return comm_register(comm, buff, size, handle);
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  CHECK(comm_check_ready("ncclCommDeregister", comm));
  return comm_deregister(comm, handle);
}

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size,
         ncclWindow_t* win, int winFlags) {
  const char* f = "ncclCommWindowRegister";
  API_CHECK_PTR(f, win);
  CHECK(comm_check_usable(f, comm));
  /* A NULL buffer or size 0 still joins the collective: its peers learn why, rather than wait. */
  if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC) {
    WARN("%s: winFlags %#x is not NCCL_WIN_DEFAULT or NCCL_WIN_COLL_SYMMETRIC", f, winFlags);
    return enqueue_group_fail(ncclInvalidArgument);
  }
  return enqueue_group_fail(comm_win_submit(comm, buff, size, winFlags, win));
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  CHECK(comm_check_ready("ncclCommWindowDeregister", comm));
  if (win == NULL) return ncclSuccess;
  return comm_win_deregister(comm, win);
}
