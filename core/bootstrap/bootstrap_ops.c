/*
 * What the rest of the core does with a bootstrap: all-gather, barrier, point-to-point messages,
 * and split into a bootstrap over a subset of the ranks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap_internal.h"

int bootstrap_rank(const bootstrap_t* bs) { return bs->rank; }
int bootstrap_nranks(const bootstrap_t* bs) { return bs->nranks; }
const sock_addr_t* bootstrap_peer_addr(const bootstrap_t* bs, int rank) { return &bs->addrs[rank]; }

/* The iovecs of `count` consecutive slots of `data` (n slots of size bytes) from slot `start`,
 * wrapping around the end: one or two pieces. */
static int bs_slots_iov(char* data, size_t size, int n, int start, int count, struct iovec* iov) {
  int first = n - start < count ? n - start : count;
  iov[0] = (struct iovec){data + (size_t)start * size, (size_t)first * size};
  if (count == first) return 1;
  iov[1] = (struct iovec){data, (size_t)(count - first) * size};
  return 2;
}

/*
 * Bruck all-gather: after the step of distance d, member r holds the blocks of members r .. r+2d-1
 * (mod n). At distance d it sends its first min(d, n-d) blocks to member r-d and receives as many
 * from member r+d, which are exactly the blocks r+d .. that it is missing. ceil(log2 n) steps, each
 * with one peer; the blocks stay in their own slots, so no rotation is needed at the end.
 */
ncclResult_t bs_allgather_over(bootstrap_t* bs, const int* map, int r, int n, uint16_t kind,
                               uint64_t tag, void* data, size_t size,
                               volatile uint32_t* abort_flag) {
  static char empty; /* a valid base address for zero-size slots (barrier) */
  char* base = data != NULL ? (char*)data : &empty;
  uint16_t step = 0;
  for (int64_t d = 1; d < n; d <<= 1, step++) {
    int count = (int)(d < n - d ? d : n - d);
    int to = (int)((r - d + n) % n), from = (int)((r + d) % n);
    struct iovec siov[2], riov[2];
    int ns = bs_slots_iov(base, size, n, r, count, siov);
    int nr = bs_slots_iov(base, size, n, from, count, riov);
    CHECK(bs_send(bs, map ? map[to] : to, kind, tag, step, siov, ns, abort_flag));
    CHECK(bs_recv(bs, map ? map[from] : from, kind, tag, step, riov, nr, abort_flag));
  }
  return ncclSuccess;
}

ncclResult_t bootstrap_allgather(bootstrap_t* bs, void* data, size_t size) {
  if (size > BS_MAX_PAYLOAD / (size_t)bs->nranks) {
    WARN(
        "bootstrap rank %d: an all-gather of %zu bytes per rank over %d ranks exceeds the "
        "bootstrap's limit of %llu bytes",
        bs->rank, size, bs->nranks, (unsigned long long)BS_MAX_PAYLOAD);
    return ncclInvalidUsage;
  }
  /* Every rank calls the collectives in the same order, so the sequence numbers agree; they keep
   * a fast rank's next collective apart from this one. */
  uint32_t seq = __atomic_fetch_add(&bs->coll_seq, 1, __ATOMIC_RELAXED);
  return bs_allgather_over(bs, NULL, bs->rank, bs->nranks, BS_MSG_COLL, seq, data, size,
                           bs->abort_flag);
}

ncclResult_t bootstrap_barrier(bootstrap_t* bs) {
  /* An all-gather of nothing is a dissemination barrier: nobody leaves step k before hearing
   * from a rank that has passed step k-1. */
  uint32_t seq = __atomic_fetch_add(&bs->coll_seq, 1, __ATOMIC_RELAXED);
  return bs_allgather_over(bs, NULL, bs->rank, bs->nranks, BS_MSG_COLL, seq, NULL, 0,
                           bs->abort_flag);
}

static ncclResult_t bs_check_peer(const bootstrap_t* bs, const char* func, int peer) {
  if (peer < 0 || peer >= bs->nranks) {
    WARN("%s: peer %d is not a rank of this bootstrap (0..%d)", func, peer, bs->nranks - 1);
    return ncclInternalError;
  }
  return ncclSuccess;
}

ncclResult_t bootstrap_send(bootstrap_t* bs, int peer, int tag, const void* data, size_t size) {
  CHECK(bs_check_peer(bs, "bootstrap_send", peer));
  struct iovec iov = {(void*)(uintptr_t)data, size};
  return bs_send(bs, peer, BS_MSG_USER, (uint64_t)(uint32_t)tag, 0, &iov, 1, bs->abort_flag);
}

ncclResult_t bootstrap_recv(bootstrap_t* bs, int peer, int tag, void* data, size_t size) {
  CHECK(bs_check_peer(bs, "bootstrap_recv", peer));
  struct iovec iov = {data, size};
  return bs_recv(bs, peer, BS_MSG_USER, (uint64_t)(uint32_t)tag, 0, &iov, 1, bs->abort_flag);
}

/* ---- Split ---------------------------------------------------------------------------------- */

static ncclResult_t bs_split_check(const bootstrap_t* parent, const int* ranks, int n,
                                   int new_rank) {
  if (n < 1 || n > parent->nranks || new_rank < 0 || new_rank >= n ||
      ranks[new_rank] != parent->rank) {
    WARN(
        "bootstrap_split: rank %d of %d: %d members with this rank at %d (listed there: %d) is "
        "not a valid group",
        parent->rank, parent->nranks, n, new_rank,
        (n > 0 && new_rank >= 0 && new_rank < n) ? ranks[new_rank] : -1);
    return ncclInternalError;
  }
  bool* seen = NULL;
  CHECK(MEM_CALLOC(&seen, (size_t)parent->nranks));
  ncclResult_t res = ncclSuccess;
  for (int i = 0; i < n && res == ncclSuccess; i++) {
    if (ranks[i] < 0 || ranks[i] >= parent->nranks || seen[ranks[i]]) {
      WARN("bootstrap_split: member %d is parent rank %d: out of range or listed twice", i,
           ranks[i]);
      res = ncclInternalError;
    } else {
      seen[ranks[i]] = true;
    }
  }
  free(seen);
  return res;
}

ncclResult_t bootstrap_split(bootstrap_t* parent, uint64_t tag, const int* ranks, int n,
                             int new_rank, volatile uint32_t* abort_flag, bootstrap_t** bs_p) {
  CHECK(bs_split_check(parent, ranks, n, new_rank));
  volatile uint32_t* abort = abort_flag != NULL ? abort_flag : parent->abort_flag;
  /* The child's identity on its connections: the parent's, the split's tag and the member list,
   * so that two different splits never accept each other's connections. */
  uint64_t ctag =
      sys_hash_mix(sys_hash_mix(parent->tag, tag), sys_hash(ranks, (size_t)n * sizeof(*ranks)));
  bootstrap_t* bs = NULL;
  CHECK(bs_create(new_rank, n, ctag, abort, &parent->listener.addr, &bs));
  bs->root_addr = parent->root_addr;
  ncclResult_t res = ncclSuccess;
  sock_addr_t* all = NULL;
  if (n > 1) {
    /* The members exchange their new listening addresses through the parent, talking only to
     * each other. */
    CHECK_GOTO(MEM_CALLOC(&all, (size_t)n), res, err_close);
    all[new_rank] = bs->listener.addr;
    CHECK_GOTO(
        bs_allgather_over(parent, ranks, new_rank, n, BS_MSG_SPLIT, tag, all, sizeof(*all), abort),
        res, err_free);
    for (int i = 0; i < n; i++) {
      if (!sock_addr_valid(&all[i], false)) {
        char who[BS_PEER_STRLEN];
        WARN("bootstrap_split: rank %d: %s sent an invalid address for the new group", parent->rank,
             bs_peer_str(parent, ranks[i], who, sizeof(who)));
        res = ncclRemoteError;
        goto err_free;
      }
    }
    memcpy(bs->addrs, all, (size_t)n * sizeof(*all));
    free(all);
  }
  INFO(NCCL_BOOTSTRAP, "bootstrap: split 0x%llx: parent rank %d/%d is rank %d/%d",
       (unsigned long long)tag, parent->rank, parent->nranks, new_rank, n);
  *bs_p = bs;
  return ncclSuccess;
err_free:
  free(all);
err_close:
  bootstrap_close(bs);
  return res;
}
