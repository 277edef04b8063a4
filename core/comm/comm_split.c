/*
 * ncclCommSplit and ncclCommShrink: a child communicator over a subset of the parent's ranks,
 * with its own bootstrap derived from the parent's. Both run as creation jobs, so several ranks
 * driven by one thread split together inside a group, and non-blocking parents return at once.
 */
#include <stdlib.h>
#include <string.h>

#include "comm.h"

typedef struct {
  ncclComm_t parent;
  uint64_t tag; /* the same on every member: parent hash and split count */
  int color;
  int key;
} comm_split_arg_t;

typedef struct {
  int32_t color;
  int32_t key;
} comm_split_entry_t;

/* Members of `color`, ordered by key then parent rank, as NCCL documents. */
static int comm_split_members(const comm_split_entry_t* all, int nranks, int color, int* members) {
  int n = 0;
  for (int r = 0; r < nranks; r++) {
    if (all[r].color != color) continue;
    int pos = n++;
    /* insertion keeps (key, rank) order; ranks arrive in increasing order */
    while (pos > 0 && all[members[pos - 1]].key > all[r].key) {
      members[pos] = members[pos - 1];
      pos--;
    }
    members[pos] = r;
  }
  return n;
}

/* Create the child over parent ranks `members` (this rank at new_rank); the parent's bootstrap
 * lock must be held. */
static ncclResult_t comm_split_child(ncclComm_t parent, ncclComm_t child, uint64_t tag,
                                     const int* members, int n, int new_rank, const char* how) {
  bootstrap_t* bs = NULL;
  CHECK(bootstrap_split(parent->bootstrap, tag, members, n, new_rank, &child->abort_flag, &bs));
  child->comm_hash = sys_hash_mix(tag, (uint64_t)members[0]);
  return comm_setup(child, bs, how);
}

static ncclResult_t comm_split_work(comm_job_t* job) {
  comm_split_arg_t* a = (comm_split_arg_t*)comm_job_arg(job);
  ncclComm_t parent = a->parent, child = comm_job_comm(job);
  int nranks = parent->nranks;
  comm_split_entry_t* all = NULL;
  int* members = NULL;
  ncclResult_t res = MEM_CALLOC(&all, (size_t)nranks);
  if (res == ncclSuccess) res = MEM_CALLOC(&members, (size_t)nranks);
  if (res != ncclSuccess) goto out_free;

  pthread_mutex_lock(&parent->bootstrap_lock);
  all[parent->rank].color = a->color;
  all[parent->rank].key = a->key;
  res = bootstrap_allgather(parent->bootstrap, all, sizeof(*all));
  if (res == ncclSuccess && child != NULL) {
    int n = comm_split_members(all, nranks, a->color, members);
    int new_rank = 0;
    while (members[new_rank] != parent->rank) new_rank++;
    res = comm_split_child(parent, child, sys_hash_mix(a->tag, (uint64_t)a->color), members, n,
                           new_rank, "split");
  }
  pthread_mutex_unlock(&parent->bootstrap_lock);
out_free:
  free(members);
  free(all);
  return res;
}

ncclResult_t comm_split(ncclComm_t parent, int color, int key, ncclComm_t* newcomm_p,
                        const ncclConfig_t* config) {
  comm_split_arg_t arg = {parent, sys_hash_mix(parent->comm_hash, ++parent->nsplits), color, key};
  *newcomm_p = NULL;
  if (color == NCCL_SPLIT_NOCOLOR) {
    /* No child, but this rank must still take part in the exchange of colors. There is no new
     * communicator to poll, so a non-blocking exchange is simply left to finish (the parent's
     * destroy waits for it). */
    ncclResult_t res = comm_job_submit_full(NULL, parent, parent->config.blocking == 0,
                                            comm_split_work, &arg, sizeof(arg));
    return res == ncclInProgress ? ncclSuccess : res;
  }
  comm_config_t cfg;
  CHECK(comm_config_build("ncclCommSplit", config, &parent->config, &cfg));
  ncclComm_t child = NULL;
  ncclResult_t res = comm_alloc(&cfg, &child);
  comm_config_free(&cfg);
  CHECK(res);
  return comm_create(child, newcomm_p, parent, comm_split_work, &arg, sizeof(arg));
}

/* ---- shrink ---- */

typedef struct {
  ncclComm_t parent;
  uint64_t tag;
  int n; /* survivors */
  int new_rank;
  int members[]; /* parent ranks of the survivors, in parent order */
} comm_shrink_arg_t;

static ncclResult_t comm_shrink_work(comm_job_t* job) {
  comm_shrink_arg_t* a = (comm_shrink_arg_t*)comm_job_arg(job);
  /* Only survivors take part: excluded ranks may be dead, so nothing may wait for them. */
  pthread_mutex_lock(&a->parent->bootstrap_lock);
  ncclResult_t res = comm_split_child(a->parent, comm_job_comm(job), a->tag, a->members, a->n,
                                      a->new_rank, "shrink");
  pthread_mutex_unlock(&a->parent->bootstrap_lock);
  return res;
}

ncclResult_t comm_shrink(ncclComm_t parent, const int* exclude, int nexclude, ncclComm_t* newcomm_p,
                         const ncclConfig_t* config, int flags) {
  int nranks = parent->nranks;
  *newcomm_p = NULL;
  char* excluded = NULL;
  CHECK(MEM_CALLOC(&excluded, (size_t)nranks));
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < nexclude; i++) {
    int r = exclude[i];
    if (r < 0 || r >= nranks) {
      WARN("ncclCommShrink: excludeRanksList[%d] = %d is not a rank of the communicator "
           "(0..%d)", i, r, nranks - 1);
      res = ncclInvalidArgument;
    } else if (excluded[r]) {
      WARN("ncclCommShrink: rank %d appears twice in excludeRanksList", r);
      res = ncclInvalidArgument;
    } else if (r == parent->rank) {
      WARN("ncclCommShrink: rank %d is in excludeRanksList; excluded ranks must not call "
           "ncclCommShrink", r);
      res = ncclInvalidArgument;
    } else {
      excluded[r] = 1;
    }
    if (res != ncclSuccess) goto out_free;
  }
  int n = nranks - nexclude;
  size_t arg_size = sizeof(comm_shrink_arg_t) + (size_t)n * sizeof(int);
  comm_shrink_arg_t* arg = (comm_shrink_arg_t*)calloc(1, arg_size);
  if (arg == NULL) {
    WARN("ncclCommShrink: out of host memory");
    res = ncclSystemError;
    goto out_free;
  }
  arg->parent = parent;
  arg->tag = sys_hash_mix(parent->comm_hash, ++parent->nsplits) ^ 0x5348524bull; /* "SHRK" */
  arg->n = 0;
  for (int r = 0; r < nranks; r++) {
    if (excluded[r]) continue;
    if (r == parent->rank) arg->new_rank = arg->n;
    arg->members[arg->n++] = r;
  }
  /* Nothing runs on a communicator yet, so NCCL_SHRINK_ABORT has no operations to stop; it only
   * means the child must not share resources with the parent. */
  comm_config_t cfg;
  res = comm_config_build("ncclCommShrink", config, &parent->config, &cfg);
  if (res != ncclSuccess) goto out_free_arg;
  if (flags & NCCL_SHRINK_ABORT) cfg.shrink_share = 0;
  ncclComm_t child = NULL;
  res = comm_alloc(&cfg, &child);
  comm_config_free(&cfg);
  if (res != ncclSuccess) goto out_free_arg;
  res = comm_create(child, newcomm_p, parent, comm_shrink_work, arg, arg_size);
out_free_arg:
  free(arg);
out_free:
  free(excluded);
  return res;
}
