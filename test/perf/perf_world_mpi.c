/*
 * Choir perf tools: the process world over MPI, for the *_perf_mpi binaries (one or more ranks
 * per MPI process, as with nccl-tests built with MPI=1). Only the thread that completes a team
 * operation calls MPI, one at a time, so MPI_THREAD_SERIALIZED is enough.
 */
#include <mpi.h>
#include <stdio.h>

#include "perf.h"

static int perf_mpi_allreduce(struct perf_world* w, double* v, int n, int op) {
  (void)w;
  if (n == 0) return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
  MPI_Op mop = op == PERF_RED_SUM ? MPI_SUM : op == PERF_RED_MIN ? MPI_MIN : MPI_MAX;
  return MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, mop, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int perf_mpi_bcast(struct perf_world* w, void* buf, size_t len) {
  (void)w;
  return MPI_Bcast(buf, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int perf_mpi_gather(struct perf_world* w, const void* mine, size_t each, void* all) {
  (void)w;
  return MPI_Gather(mine, (int)each, MPI_BYTE, all, (int)each, MPI_BYTE, 0, MPI_COMM_WORLD) !=
         MPI_SUCCESS;
}

static void perf_mpi_fail(struct perf_world* w, int status) {
  (void)w;
  fflush(stdout);
  fflush(stderr);
  /* The other ranks may be inside NCCL calls waiting for this one: end the whole job. */
  MPI_Abort(MPI_COMM_WORLD, status);
}

/* A failing MPI process ends the job (perf_mpi_fail), so there is nothing to poll. */
static int perf_mpi_failed(struct perf_world* w) {
  (void)w;
  return 0;
}

static const struct perf_world_ops perf_mpi_ops = {
    perf_mpi_allreduce, perf_mpi_bcast, perf_mpi_gather, perf_mpi_fail, perf_mpi_failed,
};

int perf_world_mpi_init(struct perf_world* w, int* argc, char*** argv) {
  int provided = 0;
  MPI_Comm local;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    fprintf(stderr, "perf: MPI_Init_thread failed\n");
    return -1;
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    fprintf(stderr, "perf: the MPI library does not support MPI_THREAD_SERIALIZED\n");
    MPI_Finalize();
    return -1;
  }
  MPI_Comm_size(MPI_COMM_WORLD, &w->nprocs);
  MPI_Comm_rank(MPI_COMM_WORLD, &w->proc);
  /* The processes sharing this host, in world-rank order, take consecutive GPU sets. */
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w->proc, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &w->local_rank);
  MPI_Comm_size(local, &w->local_nprocs);
  MPI_Comm_free(&local);
  w->ops = &perf_mpi_ops;
  w->impl = NULL;
  return 0;
}

void perf_world_mpi_finalize(struct perf_world* w) {
  (void)w;
  MPI_Finalize();
}
