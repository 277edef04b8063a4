/*
 * The unique id and the rank side of the rendezvous: join the root, receive the addresses of the
 * peers this rank sends to in a Bruck all-gather, then all-gather every rank's listening address
 * directly between ranks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "bootstrap_internal.h"

/* ---- Unique id ------------------------------------------------------------------------------ */

ncclResult_t bs_id_decode(const ncclUniqueId* id, int index, bs_id_t* out_p) {
  bs_id_t v;
  memcpy(&v, id->internal, sizeof(v));
  if (v.magic != BS_ID_MAGIC || v.version != BS_ID_VERSION) {
    WARN(
        "unique id %d is not a Choir unique id (magic 0x%016llx, version %u): create it with "
        "ncclGetUniqueId of this library and pass it to every rank unchanged",
        index, (unsigned long long)v.magic, v.version);
    return ncclInvalidArgument;
  }
  if (!sock_addr_valid(&v.root, false)) {
    WARN("unique id %d holds no valid root address (address family %d)", index,
         (int)v.root.sa.sa_family);
    return ncclInvalidArgument;
  }
  *out_p = v;
  return ncclSuccess;
}

ncclResult_t bootstrap_id_root(const ncclUniqueId* id, sock_addr_t* addr_p) {
  bs_id_t v;
  CHECK(bs_id_decode(id, 0, &v));
  *addr_p = v.root;
  return ncclSuccess;
}

static ncclResult_t bs_random_tag(uint64_t* tag_p) {
  uint64_t tag = 0;
  while (tag == 0) { /* zero means "none" for join_tag */
    ssize_t n = getrandom(&tag, sizeof(tag), 0);
    if (n != (ssize_t)sizeof(tag)) {
      if (n < 0 && errno == EINTR) continue;
      WARN("bootstrap: getrandom for the unique id's tag failed: %m");
      return ncclSystemError;
    }
  }
  *tag_p = tag;
  return ncclSuccess;
}

ncclResult_t bootstrap_get_unique_id(ncclUniqueId* out) {
  bs_id_t id;
  memset(&id, 0, sizeof(id));
  id.magic = BS_ID_MAGIC;
  id.version = BS_ID_VERSION;
  const char* comm_id = param_str(PARAM_COMM_ID);
  char a[SOCK_ADDR_STRLEN];
  if (comm_id != NULL) {
    /* Every process computes the same id from the variable alone; rank 0 starts the root. */
    CHECK(sock_addr_parse(comm_id, &id.root));
    id.flags = BS_ID_ROOT_IN_INIT;
    id.tag = sys_hash_mix(sys_hash(comm_id, strlen(comm_id)), BS_ID_MAGIC) | 1;
    INFO(NCCL_BOOTSTRAP, "bootstrap: unique id for NCCL_COMM_ID=%s (root %s, started by rank 0)",
         comm_id, sock_addr_str(&id.root, a, sizeof(a)));
  } else {
    sock_if_t iface;
    CHECK(sock_if_bootstrap(&iface));
    CHECK(bs_random_tag(&id.tag));
    CHECK(bs_root_start(&iface.addr, id.tag, &id.root));
    INFO(NCCL_BOOTSTRAP, "bootstrap: new unique id, root listening on %s",
         sock_addr_str(&id.root, a, sizeof(a)));
  }
  memset(out, 0, sizeof(*out));
  memcpy(out->internal, &id, sizeof(id));
  return ncclSuccess;
}

/* ---- Rendezvous ----------------------------------------------------------------------------- */

/* Read a ROOT_REPLY refusal's reason text safely: whatever the root sent, NUL-terminated. */
static void bs_reply_reason(const char* text, size_t len, char* buf, size_t size) {
  size_t n = len < size - 1 ? len : size - 1;
  memcpy(buf, text, n);
  buf[n] = '\0';
  for (size_t i = 0; i < n; i++)
    if (buf[i] != '\0' && (buf[i] < 0x20 || buf[i] > 0x7e)) buf[i] = '?';
}

/* Send JOIN to the root of group gi and wait for it to accept; the connection is closed after. */
static ncclResult_t bs_join(bootstrap_t* bs, const bs_id_t* id, int gi, int nids,
                            const bs_id_t* next) {
  char a[SOCK_ADDR_STRLEN];
  sock_deadline_t dl = sock_deadline(bs->timeout_ms, bs->abort_flag);
  sock_t root;
  ncclResult_t res = sock_connect(&id->root, "bootstrap root", true, &dl, &root);
  if (res != ncclSuccess) {
    /* The socket layer said what failed (the last error); add what it usually means, so that
     * the text ncclGetLastError returns has both. */
    WARN(
        "bootstrap rank %d of %d: cannot reach the root at %s (%.300s). Its process may have "
        "exited or not started it yet (NCCL_COMM_ID: rank 0 starts it), the address may be "
        "unreachable from here (NCCL_SOCKET_IFNAME), or no rank joined it in time and it gave up",
        bs->rank, bs->nranks, sock_addr_str(&id->root, a, sizeof(a)), err_last());
    return res;
  }
  struct {
    bs_hdr_t h;
    bs_join_t j;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.h = (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_JOIN, 0, id->tag, sizeof(bs_join_t)};
  msg.j.comm_tag = bs->tag;
  msg.j.rank = bs->rank;
  msg.j.nranks = bs->nranks;
  msg.j.nids = nids;
  msg.j.root_index = gi;
  msg.j.addr = bs->listener.addr;
  msg.j.next_root = next->root;
  msg.j.next_root_tag = next->tag;
  bs_hdr_t h;
  bs_reply_t r;
  CHECK_GOTO(sock_send(&root, &msg, sizeof(msg), &dl), res, out_close);
  CHECK_GOTO(sock_recv(&root, &h, sizeof(h), &dl), res, out_close);
  if (h.magic != BS_WIRE_MAGIC || h.kind != BS_MSG_ROOT_REPLY || h.tag != id->tag ||
      h.size < sizeof(r) || h.size > sizeof(r) + BS_REASON_MAX) {
    WARN(
        "bootstrap rank %d: the root at %s answered with something that is not a bootstrap "
        "reply (magic 0x%08x, kind %u, %llu bytes)",
        bs->rank, sock_addr_str(&id->root, a, sizeof(a)), h.magic, (unsigned)h.kind,
        (unsigned long long)h.size);
    res = ncclRemoteError;
    goto out_close;
  }
  char body[sizeof(bs_reply_t) + BS_REASON_MAX];
  CHECK_GOTO(sock_recv(&root, body, (size_t)h.size, &dl), res, out_close);
  memcpy(&r, body, sizeof(r));
  if (r.status != 0) {
    char why[BS_REASON_MAX];
    bs_reply_reason(body + sizeof(r), (size_t)h.size - sizeof(r), why, sizeof(why));
    WARN("bootstrap rank %d of %d: the root at %s refused it: %s", bs->rank, bs->nranks,
         sock_addr_str(&id->root, a, sizeof(a)), why);
    res = ncclInvalidUsage;
    goto out_close;
  }
  res = ncclSuccess;
out_close:
  sock_close(&root);
  return res;
}

/* Wait for the root to connect back with the addresses of this rank's Bruck peers. */
static ncclResult_t bs_wait_peers(bootstrap_t* bs, const bs_id_t* id) {
  char a[SOCK_ADDR_STRLEN];
  bs_msg_t* m = NULL;
  /* The root decides when the rendezvous has failed, and says why (which rank never came); it
   * started its clock when the first rank joined, so this rank waits a little longer than the
   * timeout to hear the verdict rather than guess it. */
  uint64_t wait_ms = bs->timeout_ms + (bs->timeout_ms / 10 > 2000 ? bs->timeout_ms / 10 : 2000);
  CHECK(bs_recv_any(bs, bs->nranks, BS_MSG_ROOT_REPLY, id->tag, 0, wait_ms, bs->abort_flag, &m));
  ncclResult_t res = ncclSuccess;
  bs_reply_t r;
  memcpy(&r, m->data, sizeof(r));
  size_t body = m->size - sizeof(r);
  sock_addr_str(&id->root, a, sizeof(a));
  if (r.status != 0) {
    char why[BS_REASON_MAX];
    bs_reply_reason(m->data + sizeof(r), body, why, sizeof(why));
    WARN("bootstrap rank %d of %d: the rendezvous at root %s failed: %s", bs->rank, bs->nranks, a,
         why);
    res = r.status == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError;
    goto out_free;
  }
  int expect = bs_bruck_steps(bs->nranks);
  if (r.count != expect || body != (size_t)expect * sizeof(bs_peer_entry_t)) {
    WARN("bootstrap rank %d of %d: the root at %s sent %d peer addresses in %zu bytes; expected %d",
         bs->rank, bs->nranks, a, r.count, body, expect);
    res = ncclRemoteError;
    goto out_free;
  }
  /* Exactly the peers this rank sends to: rank - 2^k. */
  int64_t d = 1;
  for (int k = 0; k < expect; k++, d <<= 1) {
    bs_peer_entry_t e;
    memcpy(&e, m->data + sizeof(r) + (size_t)k * sizeof(e), sizeof(e));
    int want = (int)((bs->rank - d + bs->nranks) % bs->nranks);
    if (e.rank != want || !sock_addr_valid(&e.addr, false)) {
      WARN(
          "bootstrap rank %d of %d: the root at %s sent a wrong peer entry %d (rank %d, address "
          "family %d; expected rank %d)",
          bs->rank, bs->nranks, a, k, e.rank, (int)e.addr.sa.sa_family, want);
      res = ncclRemoteError;
      goto out_free;
    }
    bs->addrs[want] = e.addr;
  }
out_free:
  free(m);
  return res;
}

/* All-gather every rank's listening address, checking it against what the root said. */
static ncclResult_t bs_exchange_addrs(bootstrap_t* bs) {
  sock_addr_t* all = NULL;
  CHECK(MEM_CALLOC(&all, (size_t)bs->nranks));
  all[bs->rank] = bs->listener.addr;
  ncclResult_t res;
  CHECK_GOTO(bs_allgather_over(bs, NULL, bs->rank, bs->nranks, BS_MSG_COLL, 0, all, sizeof(*all),
                               bs->abort_flag),
             res, out_free);
  for (int p = 0; p < bs->nranks; p++) {
    bool known = sock_addr_valid(&bs->addrs[p], false);
    if (!sock_addr_valid(&all[p], false) || (known && !sock_addr_equal(&all[p], &bs->addrs[p]))) {
      char x[SOCK_ADDR_STRLEN], y[SOCK_ADDR_STRLEN];
      WARN("bootstrap rank %d: the address exchange gave rank %d the address %s, the root said %s",
           bs->rank, p, sock_addr_str(&all[p], x, sizeof(x)),
           known ? sock_addr_str(&bs->addrs[p], y, sizeof(y)) : "nothing");
      res = ncclRemoteError;
      goto out_free;
    }
  }
  memcpy(bs->addrs, all, (size_t)bs->nranks * sizeof(*all));
  res = ncclSuccess;
out_free:
  free(all);
  return res;
}

ncclResult_t bootstrap_init(const ncclUniqueId* ids, int nids, int rank, int nranks,
                            volatile uint32_t* abort_flag, bootstrap_t** bs_p) {
  if (ids == NULL || nranks < 1 || nranks > BS_MAX_RANKS || rank < 0 || rank >= nranks ||
      nids < 1 || nids > nranks) {
    WARN(
        "bootstrap_init: rank %d of %d with %d unique id(s) is not a valid rendezvous "
        "(need 0 <= rank < nranks <= %d and 1 <= nids <= nranks)",
        rank, nranks, nids, BS_MAX_RANKS);
    return ncclInvalidArgument;
  }
  int gi = bs_group_of(rank, nids, nranks);
  bs_id_t id, next;
  CHECK(bs_id_decode(&ids[gi], gi, &id));
  CHECK(bs_id_decode(&ids[(gi + 1) % nids], (gi + 1) % nids, &next));
  /* The tag every connection of this bootstrap carries: all ids and the size, the same on every
   * rank and different for every rendezvous. */
  uint64_t tag = sys_hash_mix(sys_hash(ids, (size_t)nids * sizeof(*ids)), (uint64_t)nranks);
  bool root_in_init = (id.flags & BS_ID_ROOT_IN_INIT) != 0;
  char a[SOCK_ADDR_STRLEN];
  if (root_in_init && nranks > 1 && rank == bs_group_first(gi, nids, nranks)) {
    sock_addr_t bound;
    CHECK(bs_root_start(&id.root, id.tag, &bound));
  }
  sock_if_t iface;
  CHECK(sock_if_bootstrap(&iface));
  bootstrap_t* bs = NULL;
  CHECK(bs_create(rank, nranks, tag, abort_flag, &iface.addr, &bs));
  bs->root_addr = id.root;
  ncclResult_t res = ncclSuccess;
  uint64_t t0 = sock_clock_ns();
  /* With NCCL_COMM_ID and a single rank there is no root at all. Otherwise even a single rank
   * joins, so that the root service started by ncclGetUniqueId ends instead of waiting. */
  if (!(root_in_init && nranks == 1)) {
    __atomic_store_n(&bs->join_tag, id.tag, __ATOMIC_RELEASE);
    CHECK_GOTO(bs_join(bs, &id, gi, nids, &next), res, err_close);
    CHECK_GOTO(bs_wait_peers(bs, &id), res, err_close);
    __atomic_store_n(&bs->join_tag, 0, __ATOMIC_RELEASE);
  }
  if (nranks > 1) CHECK_GOTO(bs_exchange_addrs(bs), res, err_close);
  char r[SOCK_ADDR_STRLEN];
  INFO(NCCL_BOOTSTRAP,
       "bootstrap: rank %d of %d ready in %.1f ms, listening on %s (root %s, %d "
       "id%s)",
       rank, nranks, (double)(sock_clock_ns() - t0) / 1e6,
       sock_addr_str(&bs->listener.addr, a, sizeof(a)), sock_addr_str(&id.root, r, sizeof(r)), nids,
       nids > 1 ? "s" : "");
  *bs_p = bs;
  return ncclSuccess;
err_close:
  bootstrap_close(bs);
  return res;
}
