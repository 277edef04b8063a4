/*
 * The public API through libnccl.so.2 as an application sees it: version, error strings, argument
 * checks with messages naming the argument, group nesting, and the clear error every feature that
 * is not built yet returns.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "nccl.h"

static void expect(ncclResult_t got, ncclResult_t want, const char* msg_part) {
  CHECK_EQ_INT(got, want);
  if (msg_part != NULL) CHECK_CONTAINS(ncclGetLastError(NULL), msg_part);
}

/* Not in nccl.h: nccl_device.h declares them (test_api_comm.c checks them on a ready
 * communicator; here, arguments that are checked first). */
#include "nccl_device.h"

int main(void) {
  int v = 0;
  CHECK_EQ_INT(ncclGetVersion(&v), ncclSuccess);
  CHECK_EQ_INT(v, 22809);
  CHECK_EQ_INT(v, NCCL_VERSION_CODE);
  expect(ncclGetVersion(NULL), ncclInvalidArgument, "'version' is NULL");
  CHECK_EQ_INT(pncclGetVersion(&v), ncclSuccess);

  /* Error strings: one per code, all different, unknown codes handled. */
  for (int a = 0; a < ncclNumResults; a++) {
    CHECK_TRUE(strlen(ncclGetErrorString((ncclResult_t)a)) > 5);
    for (int b = 0; b < a; b++)
      CHECK_TRUE(strcmp(ncclGetErrorString((ncclResult_t)a), ncclGetErrorString((ncclResult_t)b)));
  }
  CHECK_CONTAINS(ncclGetErrorString((ncclResult_t)1234), "unknown");

  /* Communicator creation: arguments first, then the missing feature is named. */
  ncclComm_t comm = NULL;
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  expect(ncclCommInitRank(NULL, 2, id, 0), ncclInvalidArgument, "'comm' is NULL");
  expect(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks 0 is invalid");
  expect(ncclCommInitRank(&comm, 4, id, 4), ncclInvalidArgument, "rank 4 is out of range");
  CHECK_EQ_INT(ncclGetUniqueId(&id), ncclSuccess);
  expect(ncclCommInitAll(&comm, 0, NULL), ncclInvalidArgument, "ndev 0");
  expect(ncclCommRevoke((ncclComm_t)&id, 0), ncclInvalidArgument, "not a valid communicator");
  expect(ncclCommSplit((ncclComm_t)&id, -5, 0, &comm, NULL), ncclInvalidArgument, "color -5");
  CHECK_EQ_INT(ncclCommDestroy(NULL), ncclSuccess);
  CHECK_EQ_INT(ncclCommAbort(NULL), ncclSuccess);

  /* Collectives: NULL comm and bad datatypes are invalid arguments. */
  expect(ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument,
         "'comm' is NULL");
  expect(ncclAllReduce(NULL, NULL, 1, ncclFloat, ncclSum, (ncclComm_t)&id, NULL),
         ncclInvalidArgument, "not a valid communicator");
  expect(ncclSend(NULL, 1, ncclInt8, 0, NULL, NULL), ncclInvalidArgument, "'comm' is NULL");
  expect(ncclRedOpCreatePreMulSum(NULL, NULL, ncclFloat, ncclScalarDevice, NULL),
         ncclInvalidArgument, "'op' is NULL");
  expect(ncclRedOpDestroy(ncclSum, NULL), ncclInvalidArgument, "'comm' is NULL");

  /* Groups nest per thread; an end without a start is invalid usage. */
  expect(ncclGroupEnd(), ncclInvalidUsage, "no group is open");
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  CHECK_EQ_INT(ncclGroupSimulateEnd(&sim), ncclSuccess);
  CHECK_TRUE(sim.estimatedTime == 0.0f);
  expect(ncclGroupEnd(), ncclInvalidUsage, "no group is open");
  ncclSimInfo_t bad = NCCL_SIM_INFO_INITIALIZER;
  bad.magic = 0;
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  expect(ncclGroupSimulateEnd(&bad), ncclInvalidArgument, "NCCL_SIM_INFO_INITIALIZER");
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);

  expect(ncclMemAlloc(NULL, 16), ncclInvalidArgument, "'ptr' is NULL");

  /* NULL arguments are named before the communicator is looked at. */
  expect(ncclDevCommCreate(NULL, NULL, NULL), ncclInvalidArgument,
         "ncclDevCommCreate: argument 'reqs' is NULL");
  expect(ncclDevCommDestroy(NULL, NULL), ncclInvalidArgument,
         "ncclDevCommDestroy: argument 'devComm' is NULL");
  return check_finish("api");
}
