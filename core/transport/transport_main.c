/*
 * The transport state, the choice of transport per peer, and transport_connect: the exchange
 * through which two ranks build the two ends of their connections.
 *
 * A connect call talks to each peer it names in two rounds over the bootstrap (same tag):
 *   1. header + body: this rank's decision (p2p, shm, ...) for the pair, its connection ends with
 *      the peer and what it hosts for them (IPC handle, raw address or shm name, and offsets);
 *   2. a status word once it has checked the peer's message and mapped the peer's memory.
 * Every rank sends to all its peers before receiving from any (bootstrap_send does not wait for
 * the receiver), so the rounds cannot deadlock whatever the order of the peers. A rank that
 * fails locally still takes part in both rounds, announcing the failure, so that its peers fail
 * promptly too and nothing of the call stays allocated on either side. A failure learned in
 * round 2 reaches only direct peers: a third rank that already confirmed keeps its side (the
 * communicator's creation fails on every rank anyway, and destroy frees it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "transport_internal.h"

const char* transport_kind_name(kern_transport_t kind) {
  switch (kind) {
    case KERN_TRANSPORT_NONE: return "none";
    case KERN_TRANSPORT_P2P: return "P2P";
    case KERN_TRANSPORT_SHM: return "SHM";
    case KERN_TRANSPORT_NET: return "NET";
  }
  return "?";
}

kern_transport_t transport_kind_rule(int same_host, int p2p_disable, int policy_allows,
                                     int peer_access, int shm_disable, int net_intra_disable) {
  if (!same_host) return KERN_TRANSPORT_NET;
  if (!p2p_disable && policy_allows && peer_access) return KERN_TRANSPORT_P2P;
  if (!shm_disable) return KERN_TRANSPORT_SHM;
  if (!net_intra_disable) return KERN_TRANSPORT_NET;
  return KERN_TRANSPORT_NONE;
}

/* ---- Resources -------------------------------------------------------------------------- */

void transport_res_release(transport_res_t* r) {
  if (r == NULL) return;
  const transport_cuda_ops_t* cu = transport_cuda();
  switch (r->kind) {
    case TRANSPORT_RES_DEV:
      cu->dev_free(r->ptr);
      break;
    case TRANSPORT_RES_IPC:
      cu->ipc_close(r->ptr);
      break;
    case TRANSPORT_RES_SHM:
      if (r->registered) cu->host_unregister(r->ptr);
      if (munmap(r->ptr, r->bytes) != 0) WARN("shm: munmap of segment %s failed: %m", r->name);
      transport_shm_unlink(r);
      break;
    case TRANSPORT_RES_HOST:
      if (r->registered) cu->host_unregister(r->ptr);
      free(r->ptr);
      break;
  }
  free(r);
}

ncclResult_t transport_res_dev(size_t bytes, transport_res_t** res_p) {
  transport_res_t* r = NULL;
  CHECK(MEM_CALLOC(&r, 1));
  r->kind = TRANSPORT_RES_DEV;
  r->bytes = bytes;
  ncclResult_t res = transport_cuda()->dev_alloc(bytes, &r->ptr);
  if (res != ncclSuccess) {
    free(r);
    return res;
  }
  *res_p = r;
  return ncclSuccess;
}

void transport_res_release_list(transport_res_t* list) {
  while (list != NULL) {
    transport_res_t* next = list->next;
    transport_res_release(list);
    list = next;
  }
}

/* ---- Lifecycle -------------------------------------------------------------------------- */

ncclResult_t transport_create(bootstrap_t* bs, int rank, int nranks, int cuda_dev,
                              const transport_peer_t* peers, volatile uint32_t* abort_flag,
                              transport_p2p_policy_fn policy, void* policy_ctx,
                              transport_t** t_p) {
  if (bs == NULL || peers == NULL || t_p == NULL || nranks < 1 || rank < 0 || rank >= nranks) {
    WARN("transport_create: invalid arguments (bs %p, peers %p, rank %d of %d)", (void*)bs,
         (const void*)peers, rank, nranks);
    return ncclInternalError;
  }
  ncclResult_t res = ncclSuccess;
  transport_t* t = NULL;
  CHECK(MEM_CALLOC(&t, 1));
  CHECK_GOTO(MEM_CALLOC(&t->peers, (size_t)nranks), res, err_free);
  CHECK_GOTO(MEM_CALLOC(&t->kinds, (size_t)nranks), res, err_free);
  CHECK_GOTO(MEM_CALLOC(&t->peer_devs, (size_t)nranks), res, err_free);
  memcpy(t->peers, peers, (size_t)nranks * sizeof(*peers));
  for (int i = 0; i < nranks; i++) {
    t->kinds[i] = -1;
    t->peer_devs[i] = -1;
  }
  t->bs = bs;
  t->rank = rank;
  t->nranks = nranks;
  t->cuda_dev = cuda_dev;
  t->abort_flag = abort_flag;
  t->policy = policy;
  t->policy_ctx = policy_ctx;
  *t_p = t;
  return ncclSuccess;
err_free:
  free(t->peers);
  free(t->kinds);
  free(t->peer_devs);
  free(t);
  return res;
}

void transport_destroy(transport_t* t) {
  if (t == NULL) return;
  /* The proxy first: it deregisters and closes the network comms before their memory goes. */
  proxy_destroy(t->proxy);
  if (t->res != NULL) {
    /* Release on the rank's device, whatever the caller's thread has current. */
    const transport_cuda_ops_t* cu = transport_cuda();
    int saved = -1;
    if (cu->get_device(&saved) != ncclSuccess) saved = -1;
    if (saved != t->cuda_dev) (void)cu->set_device(t->cuda_dev);
    transport_res_release_list(t->res);
    if (saved >= 0 && saved != t->cuda_dev) (void)cu->set_device(saved);
  }
  net_close(t->net);
  free(t->net_name);
  free(t->peers);
  free(t->kinds);
  free(t->peer_devs);
  free(t);
}

ncclResult_t transport_set_net(transport_t* t, const char* net_name, uint64_t comm_id,
                               int traffic_class, volatile uint32_t* kernel_abort) {
  char* name = NULL;
  if (net_name != NULL) {
    name = strdup(net_name);
    if (name == NULL) {
      WARN("transport: out of memory");
      return ncclSystemError;
    }
  }
  free(t->net_name);
  t->net_name = name;
  t->comm_id = comm_id;
  t->traffic_class = traffic_class;
  t->kernel_abort = kernel_abort;
  return ncclSuccess;
}

/* Host callbacks of CUDA streams (cudaHostFn_t): they may not call CUDA. */
static void launch_begin_cb(void* arg) { proxy_launch_begin((proxy_t*)arg); }
static void launch_end_cb(void* arg) { proxy_launch_end((proxy_t*)arg); }

ncclResult_t transport_launch_begin(transport_t* t, cudaStream_t stream, int capturing) {
  if (t == NULL || t->proxy == NULL) return ncclSuccess;
  /* Under capture the mark must replay with the graph: a host node. Otherwise now. */
  if (capturing) return cuda_result(cudaLaunchHostFunc(stream, launch_begin_cb, t->proxy),
                                    "cudaLaunchHostFunc (proxy launch mark)");
  proxy_launch_begin(t->proxy);
  return ncclSuccess;
}

ncclResult_t transport_launch_end(transport_t* t, cudaStream_t stream) {
  if (t == NULL || t->proxy == NULL) return ncclSuccess;
  return cuda_result(cudaLaunchHostFunc(stream, launch_end_cb, t->proxy),
                     "cudaLaunchHostFunc (proxy launch mark)");
}

void transport_prof_attach(transport_t* t, prof_t* prof) {
  if (t != NULL) t->prof = prof;
}

void transport_prof_op(transport_t* t, const void* key, void* parent, uint32_t nsteps, int chunk,
                       int channel) {
  if (t != NULL && t->proxy != NULL) proxy_prof_op(t->proxy, key, parent, nsteps, chunk, channel);
}

void transport_launch_abandon(transport_t* t, cudaStream_t stream, int capturing) {
  if (t == NULL || t->proxy == NULL) return;
  if (capturing)
    (void)transport_launch_end(t, stream); /* the capture is broken anyway; keep it balanced */
  else
    proxy_launch_end(t->proxy);
}

ncclResult_t transport_async_error(const transport_t* t, char* msg, size_t size, int* peer_p) {
  if (t == NULL) {
    if (msg != NULL && size > 0) msg[0] = '\0';
    if (peer_p != NULL) *peer_p = -1;
    return ncclSuccess;
  }
  return proxy_error(t->proxy, msg, size, peer_p);
}

void transport_mem_usage(const transport_t* t, uint64_t* dev_bytes_p, uint64_t* host_bytes_p) {
  if (dev_bytes_p != NULL) *dev_bytes_p = t->dev_bytes;
  if (host_bytes_p != NULL) *host_bytes_p = t->host_bytes;
}

/* ---- Kind ------------------------------------------------------------------------------- */

/* Peer access between this rank's GPU and the peer's, both ways; the peer's GPU must be visible
 * here (by bus id). Two ranks on one GPU share its memory directly. */
static ncclResult_t kind_peer_access(transport_t* t, int peer, int* ok_p) {
  const transport_cuda_ops_t* cu = transport_cuda();
  int pdev = -1;
  CHECK(cu->device_by_bus_id(t->peers[peer].bus_id, &pdev));
  t->peer_devs[peer] = pdev;
  *ok_p = 0;
  if (pdev < 0) return ncclSuccess;
  if (pdev == t->cuda_dev) {
    *ok_p = 1;
    return ncclSuccess;
  }
  int there = 0, back = 0;
  CHECK(cu->can_access_peer(t->cuda_dev, pdev, &there));
  CHECK(cu->can_access_peer(pdev, t->cuda_dev, &back));
  *ok_p = there && back;
  return ncclSuccess;
}

static ncclResult_t kind_decide(transport_t* t, int peer, kern_transport_t* kind_p) {
  if (t->kinds[peer] >= 0) {
    *kind_p = (kern_transport_t)t->kinds[peer];
    return ncclSuccess;
  }
  int same_host = t->peers[peer].host_hash == t->peers[t->rank].host_hash;
  int p2p_disable = param_int(PARAM_P2P_DISABLE) == 1;
  int shm_disable = param_int(PARAM_SHM_DISABLE) == 1;
  int net_intra_disable = param_int(PARAM_NET_DISABLE_INTRA) == 1;
  int policy_allows = 1, peer_access = 0;
  if (same_host && !p2p_disable) {
    if (t->policy != NULL) {
      int use_read = 0; /* read mode is not implemented: the sender always writes */
      policy_allows = t->policy(t->policy_ctx, peer, &use_read) != 0;
    }
    if (policy_allows) CHECK(kind_peer_access(t, peer, &peer_access));
  }
  kern_transport_t kind =
      transport_kind_rule(same_host, p2p_disable, policy_allows, peer_access, shm_disable,
                          net_intra_disable);
  TRACE(NCCL_INIT, "transport: rank %d -> %d: same host %d, p2p disabled %d, policy %d, peer "
        "access %d, shm disabled %d, net intra disabled %d: %s",
        t->rank, peer, same_host, p2p_disable, policy_allows, peer_access, shm_disable,
        net_intra_disable, transport_kind_name(kind));
  t->kinds[peer] = (int8_t)kind;
  *kind_p = kind;
  return ncclSuccess;
}

kern_transport_t transport_kind(transport_t* t, int peer) {
  if (peer < 0 || peer >= t->nranks || peer == t->rank) return KERN_TRANSPORT_NONE;
  kern_transport_t kind = KERN_TRANSPORT_NONE;
  if (kind_decide(t, peer, &kind) != ncclSuccess) return KERN_TRANSPORT_NONE;
  return kind;
}

/* ---- The messages ----------------------------------------------------------------------- */

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

uint32_t transport_shared_protos(kern_transport_t kind) {
  switch (kind) {
    case KERN_TRANSPORT_SHM: return 1u << KERN_PROTO_LL128;
    case KERN_TRANSPORT_NET: return 1u << KERN_PROTO_LL | 1u << KERN_PROTO_LL128;
    default: return 0;
  }
}

void transport_slots_effective(kern_transport_t kind, const uint32_t req[KERN_PROTO_NUM],
                               uint32_t out[KERN_PROTO_NUM]) {
  const uint32_t shared = transport_shared_protos(kind);
  for (int p = 0; p < KERN_PROTO_NUM; p++)
    out[p] = req[p] != 0 && (shared >> p & 1u) ? req[KERN_PROTO_SIMPLE] : req[p];
}

void transport_conn_buffers(kern_conn_t* c, kern_transport_t kind,
                            const transport_wire_conn_t* host, char* base) {
  uint32_t slot[KERN_PROTO_NUM];
  transport_slots_effective(kind, host->slot_bytes, slot);
  uint32_t made = 0;
  for (int p = 0; p < KERN_PROTO_NUM; p++) {
    c->slot_bytes[p] = slot[p];
    c->buff[p] = slot[p] != 0 ? base + host->off_buff[p] : NULL;
    if (slot[p] != 0) made |= 1u << p;
  }
  /* The protocols in the SIMPLE buffer synchronize by tail, as SIMPLE does. */
  c->tail_sync = made & transport_shared_protos(kind);
}

uint64_t transport_wire_layout(kern_transport_t kind, transport_wire_conn_t* conns, int n) {
  const uint32_t shared = transport_shared_protos(kind);
  uint64_t off = 0;
  for (int i = 0; i < n; i++) {
    transport_wire_conn_t* c = &conns[i];
    for (int p = 0; p < KERN_PROTO_NUM; p++) c->off_buff[p] = TRANSPORT_OFF_NONE;
    c->off_tail = c->off_head = TRANSPORT_OFF_NONE;
    if (c->is_send) continue;
    /* SIMPLE first: the protocols sharing its buffer point there. */
    static const int order[KERN_PROTO_NUM] = {KERN_PROTO_SIMPLE, KERN_PROTO_LL, KERN_PROTO_LL128};
    for (int k = 0; k < KERN_PROTO_NUM; k++) {
      const int p = order[k];
      if (c->slot_bytes[p] == 0) continue;
      if (shared >> p & 1u) {
        c->off_buff[p] = c->off_buff[KERN_PROTO_SIMPLE];
        continue;
      }
      off = align_up(off, TRANSPORT_BUFF_ALIGN);
      c->off_buff[p] = off;
      off += (uint64_t)KERN_NSLOTS * c->slot_bytes[p];
    }
  }
  off = align_up(off, TRANSPORT_LINE);
  for (int i = 0; i < n; i++) {
    bool recv = conns[i].is_send == 0;
    if (recv) {
      conns[i].off_tail = off;
      off += TRANSPORT_LINE;
    }
    if ((kind == KERN_TRANSPORT_SHM && recv) || (kind == KERN_TRANSPORT_P2P && !recv)) {
      conns[i].off_head = off;
      off += TRANSPORT_LINE;
    }
  }
  return off == 0 ? 0 : align_up(off, TRANSPORT_BUFF_ALIGN);
}

/* One part of the peer's block we will point at: announced, aligned, and inside the block. */
static ncclResult_t check_part(int peer, const transport_wire_hdr_t* theirs, uint64_t off,
                               uint64_t bytes, uint64_t align, const char* what, int id) {
  if (!theirs->has_block || off == TRANSPORT_OFF_NONE || off % align != 0 ||
      off > theirs->block_bytes || bytes > theirs->block_bytes - off) {
    WARN("transport: rank %d announced the %s of connection %d at offset %llu (%llu bytes) of "
         "a block of %llu bytes%s: garbled message",
         peer, what, id, (unsigned long long)off, (unsigned long long)bytes,
         (unsigned long long)theirs->block_bytes, theirs->has_block ? "" : " it does not host");
    return ncclInternalError;
  }
  return ncclSuccess;
}

ncclResult_t transport_wire_check(int rank, int peer, const transport_wire_hdr_t* mine,
                                  const transport_wire_conn_t* mine_c,
                                  const transport_wire_hdr_t* theirs,
                                  const transport_wire_conn_t* theirs_c, int* match) {
  if (theirs->magic != TRANSPORT_WIRE_MAGIC || theirs->rank != peer || theirs->peer != rank) {
    WARN("transport: garbled connection message from rank %d to rank %d (magic %llx, says "
         "from %d to %d)",
         peer, rank, (unsigned long long)theirs->magic, theirs->rank, theirs->peer);
    return ncclInternalError;
  }
  if (theirs->status != TRANSPORT_STATUS_OK) {
    WARN("transport: rank %d could not set up its side of the connections with rank %d (see "
         "its log)",
         peer, rank);
    return ncclRemoteError;
  }
  if (mine->kind == KERN_TRANSPORT_NONE) {
    WARN("transport: no transport between rank %d and rank %d: p2p is off (NCCL_P2P_DISABLE=1, "
         "the topology, or no peer access between the GPUs), shared memory is off "
         "(NCCL_SHM_DISABLE=1) and the network within a host is off (NCCL_NET_DISABLE_INTRA=1); "
         "unset one of them",
         rank, peer);
    return ncclInvalidUsage;
  }
  if (theirs->kind != mine->kind) {
    WARN("transport: rank %d chose %s for its connections with rank %d, but rank %d chose %s "
         "(do NCCL_P2P_DISABLE, NCCL_SHM_DISABLE or the topology differ between them?)",
         rank, transport_kind_name((kern_transport_t)mine->kind), peer, peer,
         transport_kind_name((kern_transport_t)theirs->kind));
    return ncclInternalError;
  }
  if (theirs->nconns != mine->nconns) {
    WARN("transport: rank %d connects %d end(s) with rank %d in this call, but rank %d connects "
         "%d with rank %d: the calls do not mirror each other",
         rank, mine->nconns, peer, peer, theirs->nconns, rank);
    return ncclInternalError;
  }
  for (int i = 0; i < mine->nconns; i++) {
    const transport_wire_conn_t* m = &mine_c[i];
    int j = 0;
    while (j < theirs->nconns && (theirs_c[j].id != m->id || theirs_c[j].is_send != !m->is_send))
      j++;
    if (j == theirs->nconns) {
      WARN("transport: rank %d has a %s end with id %d for rank %d, but rank %d has no %s end "
           "with id %d for rank %d: the calls do not mirror each other",
           rank, m->is_send ? "send" : "receive", m->id, peer, peer,
           m->is_send ? "receive" : "send", m->id, rank);
      return ncclInternalError;
    }
    const transport_wire_conn_t* p = &theirs_c[j];
    for (int q = 0; q < KERN_PROTO_NUM; q++) {
      if (p->slot_bytes[q] == m->slot_bytes[q]) continue;
      WARN("transport: connection %d between rank %d and rank %d: %s slot_bytes %u on rank %d, "
           "%u on rank %d (both ends must agree; 0 means the protocol is not made)",
           m->id, rank, peer, kern_proto_name(q), m->slot_bytes[q], rank, p->slot_bytes[q],
           peer);
      return ncclInternalError;
    }
    match[i] = j;
    /* Net ends point at nothing of the peer's: their far side is the plugin's. */
    if (mine->kind == KERN_TRANSPORT_NET) continue;
    /* The parts of the peer's block this end will point at. */
    bool p2p = mine->kind == KERN_TRANSPORT_P2P;
    if (m->is_send) {
      /* A protocol that shares the Simple buffer (shm's LL128) spans Simple's slots, not the
       * slots it asked for. */
      uint32_t eff[KERN_PROTO_NUM];
      transport_slots_effective(mine->kind, m->slot_bytes, eff);
      for (int q = 0; q < KERN_PROTO_NUM; q++) {
        if (eff[q] == 0) continue;
        char what[32];
        snprintf(what, sizeof(what), "%s buffer", kern_proto_name(q));
        CHECK(check_part(peer, theirs, p->off_buff[q], (uint64_t)KERN_NSLOTS * eff[q], 16, what,
                         m->id));
      }
      CHECK(check_part(peer, theirs, p->off_tail, 8, 8, "tail", m->id));
      if (!p2p) CHECK(check_part(peer, theirs, p->off_head, 8, 8, "head", m->id));
    } else if (p2p) {
      CHECK(check_part(peer, theirs, p->off_head, 8, 8, "head", m->id));
    }
  }
  return ncclSuccess;
}

/* ---- Connect ---------------------------------------------------------------------------- */

typedef struct {
  int32_t peer, is_send, id, idx;
} req_key_t;

static int req_key_cmp(const void* a, const void* b) {
  const req_key_t* x = (const req_key_t*)a;
  const req_key_t* y = (const req_key_t*)b;
  if (x->peer != y->peer) return x->peer < y->peer ? -1 : 1;
  if (x->is_send != y->is_send) return x->is_send < y->is_send ? -1 : 1;
  if (x->id != y->id) return x->id < y->id ? -1 : 1;
  return 0;
}

/* Requests are made by the core, not the user: a bad one is a bug, reported as such. */
static ncclResult_t check_reqs(const transport_t* t, const transport_req_t* reqs, int nreqs) {
  for (int i = 0; i < nreqs; i++) {
    const transport_req_t* q = &reqs[i];
    int slots_ok = q->slot_bytes[KERN_PROTO_SIMPLE] != 0;
    for (int p = 0; p < KERN_PROTO_NUM; p++) slots_ok &= q->slot_bytes[p] % 128 == 0;
    if (q->peer < 0 || q->peer >= t->nranks || q->peer == t->rank || (q->is_send != 0 &&
        q->is_send != 1) || !slots_ok || q->out == NULL) {
      WARN("transport_connect: rank %d, request %d is invalid: peer %d (of %d ranks), is_send "
           "%d, id %d, slot_bytes LL %u LL128 %u Simple %u (multiples of 128, Simple not 0), "
           "out %p",
           t->rank, i, q->peer, t->nranks, q->is_send, q->id, q->slot_bytes[KERN_PROTO_LL],
           q->slot_bytes[KERN_PROTO_LL128], q->slot_bytes[KERN_PROTO_SIMPLE], (void*)q->out);
      return ncclInternalError;
    }
  }
  return ncclSuccess;
}

static void groups_free(transport_group_t* groups, int ngroups) {
  if (groups == NULL) return;
  for (int g = 0; g < ngroups; g++) {
    free(groups[g].req_idx);
    free(groups[g].mine_c);
    free(groups[g].theirs_c);
    free(groups[g].match);
    free(groups[g].conns);
    free(groups[g].net_ends);
    free(groups[g].mine_handles);
    free(groups[g].theirs_handles);
  }
  free(groups);
}

/* Sort the requests by (peer, is_send, id) and cut them into one group per peer. */
static ncclResult_t groups_build(const transport_t* t, const transport_req_t* reqs, int nreqs,
                                 transport_group_t** groups_p, int* ngroups_p) {
  ncclResult_t res = ncclSuccess;
  req_key_t* keys = NULL;
  transport_group_t* groups = NULL;
  int ngroups = 0;
  CHECK(MEM_CALLOC(&keys, (size_t)nreqs));
  for (int i = 0; i < nreqs; i++)
    keys[i] = (req_key_t){reqs[i].peer, reqs[i].is_send, reqs[i].id, i};
  qsort(keys, (size_t)nreqs, sizeof(*keys), req_key_cmp);
  for (int i = 0; i < nreqs; i++) {
    if (i > 0 && req_key_cmp(&keys[i - 1], &keys[i]) == 0) {
      WARN("transport_connect: rank %d asks twice for the %s end with id %d for rank %d "
           "(requests %d and %d)",
           t->rank, keys[i].is_send ? "send" : "receive", keys[i].id, keys[i].peer,
           keys[i - 1].idx, keys[i].idx);
      res = ncclInternalError;
      goto out;
    }
    if (i == 0 || keys[i].peer != keys[i - 1].peer) ngroups++;
  }
  CHECK_GOTO(MEM_CALLOC(&groups, (size_t)ngroups), res, out);
  for (int i = 0, g = -1; i < nreqs; i++) {
    if (i == 0 || keys[i].peer != keys[i - 1].peer) {
      g++;
      int n = 1;
      while (i + n < nreqs && keys[i + n].peer == keys[i].peer) n++;
      transport_group_t* gr = &groups[g];
      gr->peer = keys[i].peer;
      gr->n = n;
      CHECK_GOTO(MEM_CALLOC(&gr->req_idx, (size_t)n), res, out);
      CHECK_GOTO(MEM_CALLOC(&gr->mine_c, (size_t)n), res, out);
      CHECK_GOTO(MEM_CALLOC(&gr->match, (size_t)n), res, out);
      CHECK_GOTO(MEM_CALLOC(&gr->conns, (size_t)n), res, out);
      for (int k = 0; k < n; k++) {
        const transport_req_t* q = &reqs[keys[i + k].idx];
        gr->req_idx[k] = keys[i + k].idx;
        gr->mine_c[k] = (transport_wire_conn_t){.id = q->id, .is_send = q->is_send};
        memcpy(gr->mine_c[k].slot_bytes, q->slot_bytes, sizeof(q->slot_bytes));
      }
    }
  }
  *groups_p = groups;
  *ngroups_p = ngroups;
  groups = NULL;
out:
  groups_free(groups, ngroups);
  free(keys);
  return res;
}

/* "00-03,05" from the ids of one direction (ascending, as the groups hold them). */
static void format_ids(const transport_group_t* g, int is_send, char* buf, size_t size) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < g->n; i++) {
    if (g->mine_c[i].is_send != is_send) continue;
    int first = g->mine_c[i].id, last = first;
    while (i + 1 < g->n && g->mine_c[i + 1].is_send == is_send && g->mine_c[i + 1].id == last + 1)
      last = g->mine_c[++i].id;
    int w = first == last
                ? snprintf(buf + len, size - len, "%s%02d", len ? "," : "", first)
                : snprintf(buf + len, size - len, "%s%02d-%02d", len ? "," : "", first, last);
    if (w < 0 || (size_t)w >= size - len) {
      /* Keep what fits and say that more followed. */
      if (size > 4) memcpy(buf + size - 4, "...", 4);
      return;
    }
    len += (size_t)w;
  }
}

static void log_group(const transport_t* t, const transport_group_t* g) {
  unsigned long sub = g->kind == KERN_TRANSPORT_P2P   ? NCCL_P2P
                      : g->kind == KERN_TRANSPORT_SHM ? NCCL_SHM
                                                      : NCCL_NET;
  if (!log_enabled(NCCL_LOG_INFO, NCCL_INIT | sub)) return;
  char net_via[64];
  if (g->kind == KERN_TRANSPORT_NET)
    snprintf(net_via, sizeof(net_via), "NET/%s", net_name(t->net));
  const char* via = g->kind == KERN_TRANSPORT_NET   ? net_via
                    : g->kind == KERN_TRANSPORT_SHM ? "SHM"
                    : g->mapped != NULL             ? "P2P/IPC"
                                                    : "P2P/direct pointer";
  for (int is_send = 1; is_send >= 0; is_send--) {
    char ids[192];
    format_ids(g, is_send, ids, sizeof(ids));
    if (ids[0] == '\0') continue;
    int src = is_send ? t->rank : g->peer, dst = is_send ? g->peer : t->rank;
    INFO(NCCL_INIT | sub, "Channel %s/0 : %d[%d] -> %d[%d] via %s", ids, src,
         t->peers[src].cuda_dev, dst, t->peers[dst].cuda_dev, via);
  }
}

/* This rank's side for one peer, before anything is sent: the decision and the hosted block. */
static ncclResult_t group_host(transport_t* t, transport_group_t* g) {
  CHECK(kind_decide(t, g->peer, &g->kind));
  g->mine.kind = (int32_t)g->kind;
  if (g->kind == KERN_TRANSPORT_P2P) CHECK(transport_p2p_host(t, g));
  if (g->kind == KERN_TRANSPORT_SHM) CHECK(transport_shm_host(t, g));
  if (g->kind == KERN_TRANSPORT_NET) CHECK(transport_net_host(t, g));
  return ncclSuccess;
}

static ncclResult_t group_recv(transport_t* t, transport_group_t* g, int tag) {
  CHECK(bootstrap_recv(t->bs, g->peer, tag, &g->theirs, sizeof(g->theirs)));
  if (g->theirs.magic != TRANSPORT_WIRE_MAGIC || g->theirs.nconns < 1 ||
      g->theirs.nconns > TRANSPORT_WIRE_MAX_CONNS) {
    WARN("transport: garbled connection message from rank %d (magic %llx, %d connections)",
         g->peer, (unsigned long long)g->theirs.magic, g->theirs.nconns);
    return ncclInternalError;
  }
  CHECK(MEM_CALLOC(&g->theirs_c, (size_t)g->theirs.nconns));
  CHECK(bootstrap_recv(t->bs, g->peer, tag, g->theirs_c,
                       (size_t)g->theirs.nconns * sizeof(*g->theirs_c)));
  /* Net: the listen handles follow, when the peer set its side up. */
  if (g->theirs.kind == KERN_TRANSPORT_NET && g->theirs.status == TRANSPORT_STATUS_OK) {
    CHECK(MEM_CALLOC(&g->theirs_handles, (size_t)g->theirs.nconns));
    CHECK(bootstrap_recv(t->bs, g->peer, tag, g->theirs_handles,
                         (size_t)g->theirs.nconns * NCCL_NET_HANDLE_MAXSIZE));
  }
  return ncclSuccess;
}

static ncclResult_t group_map(transport_t* t, transport_group_t* g) {
  CHECK(transport_wire_check(t->rank, g->peer, &g->mine, g->mine_c, &g->theirs, g->theirs_c,
                             g->match));
  if (g->kind == KERN_TRANSPORT_P2P) CHECK(transport_p2p_map(t, g));
  if (g->kind == KERN_TRANSPORT_SHM) CHECK(transport_shm_map(t, g));
  return ncclSuccess;
}

void transport_res_push(transport_t* t, transport_res_t* r) {
  if (r == NULL) return;
  if (r->kind == TRANSPORT_RES_DEV) t->dev_bytes += r->bytes;
  if ((r->kind == TRANSPORT_RES_SHM && r->created) || r->kind == TRANSPORT_RES_HOST)
    t->host_bytes += r->bytes;
  r->next = t->res;
  t->res = r;
}

ncclResult_t transport_connect(transport_t* t, transport_req_t* reqs, int nreqs, int tag) {
  if (nreqs == 0) return ncclSuccess;
  CHECK(check_reqs(t, reqs, nreqs));
  if (t->abort_flag != NULL && *t->abort_flag != 0) {
    WARN("transport_connect: rank %d: the communicator was aborted", t->rank);
    return ncclInternalError;
  }
  const transport_cuda_ops_t* cu = transport_cuda();
  transport_group_t* groups = NULL;
  int ngroups = 0;
  CHECK(groups_build(t, reqs, nreqs, &groups, &ngroups));

  ncclResult_t res = ncclSuccess;
  int saved_dev = -1;
  CHECK_GOTO(cu->get_device(&saved_dev), res, out_groups);
  if (saved_dev != t->cuda_dev) CHECK_GOTO(cu->set_device(t->cuda_dev), res, out_groups);

  /* Our side for every peer. After a local failure we stop allocating but still take part in
   * both rounds, so that the peers learn it. */
  ncclResult_t local = ncclSuccess;
  for (int i = 0; i < ngroups; i++) {
    transport_group_t* g = &groups[i];
    g->mine.magic = TRANSPORT_WIRE_MAGIC;
    g->mine.pid_hash = t->peers[t->rank].pid_hash;
    g->mine.rank = t->rank;
    g->mine.peer = g->peer;
    g->mine.nconns = g->n;
    if (local == ncclSuccess) local = group_host(t, g);
  }
  for (int i = 0; i < ngroups; i++)
    groups[i].mine.status = local == ncclSuccess ? TRANSPORT_STATUS_OK : TRANSPORT_STATUS_FAILED;

  /* Round 1: every message out, then every message in. */
  for (int i = 0; i < ngroups; i++) {
    transport_group_t* g = &groups[i];
    CHECK_GOTO(bootstrap_send(t->bs, g->peer, tag, &g->mine, sizeof(g->mine)), res, out_free);
    CHECK_GOTO(bootstrap_send(t->bs, g->peer, tag, g->mine_c, (size_t)g->n * sizeof(*g->mine_c)),
               res, out_free);
    if (g->kind == KERN_TRANSPORT_NET && g->mine.status == TRANSPORT_STATUS_OK)
      CHECK_GOTO(bootstrap_send(t->bs, g->peer, tag, g->mine_handles,
                                (size_t)g->n * NCCL_NET_HANDLE_MAXSIZE),
                 res, out_free);
  }
  for (int i = 0; i < ngroups; i++) CHECK_GOTO(group_recv(t, &groups[i], tag), res, out_free);

  for (int i = 0; i < ngroups && local == ncclSuccess; i++) local = group_map(t, &groups[i]);
  {
    int any_net = 0;
    for (int i = 0; i < ngroups; i++) any_net |= groups[i].kind == KERN_TRANSPORT_NET;
    if (any_net && local == ncclSuccess) local = transport_net_establish(t, groups, ngroups);
  }

  /* Round 2: whether each side keeps what it made. */
  transport_wire_done_t done = {TRANSPORT_WIRE_MAGIC,
                                local == ncclSuccess ? TRANSPORT_STATUS_OK
                                                     : TRANSPORT_STATUS_FAILED,
                                0};
  for (int i = 0; i < ngroups; i++)
    CHECK_GOTO(bootstrap_send(t->bs, groups[i].peer, tag, &done, sizeof(done)), res, out_free);
  int failed_peer = -1;
  for (int i = 0; i < ngroups; i++) {
    transport_wire_done_t theirs;
    CHECK_GOTO(bootstrap_recv(t->bs, groups[i].peer, tag, &theirs, sizeof(theirs)), res,
               out_free);
    if (theirs.magic != TRANSPORT_WIRE_MAGIC) {
      WARN("transport: garbled confirmation from rank %d (magic %llx)", groups[i].peer,
           (unsigned long long)theirs.magic);
      res = ncclInternalError;
      goto out_free;
    }
    if (theirs.status != TRANSPORT_STATUS_OK && failed_peer < 0) failed_peer = groups[i].peer;
  }
  /* Every peer has opened our segments or given up: their names can go. */
  for (int i = 0; i < ngroups; i++) transport_shm_unlink(groups[i].own);
  if (local != ncclSuccess) {
    res = local;
    goto out_free;
  }
  if (failed_peer >= 0) {
    WARN("transport: rank %d failed to connect with rank %d (see its log); rank %d releases "
         "its side too",
         failed_peer, t->rank, t->rank);
    res = ncclRemoteError;
    goto out_free;
  }

  /* Success: hand out the connections and keep the resources. */
  for (int i = 0; i < ngroups; i++) {
    transport_group_t* g = &groups[i];
    if (g->kind == KERN_TRANSPORT_NET) CHECK_GOTO(transport_net_commit(t, g, reqs), res, out_free);
  }
  for (int i = 0; i < ngroups; i++) {
    transport_group_t* g = &groups[i];
    for (int k = 0; k < g->n; k++) *reqs[g->req_idx[k]].out = g->conns[k];
    log_group(t, g);
    transport_res_push(t, g->own);
    transport_res_push(t, g->mapped);
    g->own = g->mapped = NULL;
  }
  goto out_dev;

out_free:
  for (int i = 0; i < ngroups; i++) {
    transport_net_release(t, &groups[i]);
    transport_res_release(groups[i].mapped);
    transport_res_release(groups[i].own);
  }
out_dev:
  if (saved_dev >= 0 && saved_dev != t->cuda_dev) (void)cu->set_device(saved_dev);
out_groups:
  groups_free(groups, ngroups);
  return res;
}
