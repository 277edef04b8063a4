/*
 * net-ib transfers: isend, irecv, test, iflush (see nib.h for the protocol).
 *
 * A comm's requests live in fixed tables: a receive comm has one per FIFO slot (a post whose
 * slot is still busy returns no request: the caller retries), a send comm one per (slot,
 * buffer). Every test() drains the comm's completion queue, so completions of other requests of
 * the comm are recorded as they come, and logs the device's async events (rate-limited).
 *
 * Failures: a completion with an error status (a queue pair in error, retries exhausted, a bad
 * key) makes the comm fail: that request and every later call return the error (one WARN). A
 * peer that has gone (its end of the handshake socket closed: killed, or closed its comm) fails
 * a post at once and a pending request CHOIR_IB_PEER_GRACE_MS later, during which completions
 * already on their way are still taken.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "nib.h"

#define NIB_WR_FIFO 0          /* a receive comm's FIFO write */
#define NIB_WR_RECV UINT64_MAX /* a receive work request (found by its imm data instead) */
#define NIB_PEER_CHECK_MS 10

/* Whether the peer's end of the handshake socket is closed (checked at most every 10 ms). */
static bool nib_peer_gone(nib_comm_t* c) {
  if (c->peer_gone_ms != 0) return true;
  uint64_t now = nib_now_ms();
  if (now < c->peer_check_ms) return false;
  c->peer_check_ms = now + NIB_PEER_CHECK_MS;
  char b;
  ssize_t r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
    return false;
  c->peer_gone_ms = now;
  NIB_INFO(NCCL_NET, "net-ib: %s: the peer %s of a %s comm has gone (%s)", c->dev->name, c->peer,
           c->is_send ? "send" : "receive", r == 0 ? "connection closed" : strerror(errno));
  return true;
}

static ncclResult_t nib_fail(nib_comm_t* c, ncclResult_t res) {
  if (c->error == ncclSuccess) c->error = res;
  return c->error;
}

/* Takes every completion the queue has now. */
static void nib_poll(nib_comm_t* c) {
  struct ibv_wc wc[16];
  for (;;) {
    int n = ibv_poll_cq(c->cq, 16, wc);
    if (n < 0) {
      if (c->error == ncclSuccess)
        NIB_WARN("net-ib: %s: polling the completion queue of the %s comm with %s failed",
                 c->dev->name, c->is_send ? "send" : "receive", c->peer);
      nib_fail(c, ncclSystemError);
      return;
    }
    for (int i = 0; i < n; i++) {
      const struct ibv_wc* w = &wc[i];
      if (w->status != IBV_WC_SUCCESS) {
        if (c->error == ncclSuccess)
          NIB_WARN("net-ib: %s: %s of the %s comm with %s failed: %s (vendor error %u)%s",
                   c->dev->name, w->wr_id == NIB_WR_RECV ? "a receive" : "an RDMA write",
                   c->is_send ? "send" : "receive", c->peer, nib_v.wc_status_str(w->status),
                   w->vendor_err,
                   w->status == IBV_WC_RETRY_EXC_ERR ? ": the peer does not answer (dead, or "
                                                       "unreachable: check GIDs and routes)"
                                                     : "");
        bool local = w->status == IBV_WC_LOC_LEN_ERR || w->status == IBV_WC_LOC_QP_OP_ERR ||
                     w->status == IBV_WC_LOC_PROT_ERR || w->status == IBV_WC_MW_BIND_ERR;
        nib_fail(c, local ? ncclSystemError : ncclRemoteError);
        continue;
      }
      if (w->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        uint32_t imm = ntohl(w->imm_data);
        int slot = nib_imm_slot(imm), idx = nib_imm_idx(imm);
        nib_req_t* r = slot < NIB_MAX_REQS ? &c->reqs[slot] : NULL;
        if (r == NULL || !r->used || idx >= r->n || r->len[idx] != SIZE_MAX) {
          NIB_WARN("net-ib: %s: a completion from %s names receive slot %d buffer %d, which is "
                   "not waiting for one",
                   c->dev->name, c->peer, slot, idx);
          nib_fail(c, ncclInternalError);
          continue;
        }
        r->len[idx] = (size_t)__atomic_load_n(&c->sizes[slot][idx], __ATOMIC_ACQUIRE);
        r->pending--;
      } else if (w->opcode == IBV_WC_RDMA_WRITE && w->wr_id != NIB_WR_FIFO) {
        uint64_t k = w->wr_id - 1;
        nib_req_t* r = &c->sreqs[k / NIB_MAX_RECVS][k % NIB_MAX_RECVS];
        if (r->used && r->pending > 0) r->pending--;
      }
    }
    if (n < 16) return;
  }
}

ncclResult_t nib_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                       void** mhandles, void** request) {
  nib_comm_t* c = recv_comm;
  *request = NULL;
  if (n < 1 || n > nib_g.knobs.max_recvs) {
    NIB_WARN("net-ib: irecv of %d buffers; this plugin's maxRecvs is %d", n, nib_g.knobs.max_recvs);
    return ncclInvalidArgument;
  }
  if (c->error != ncclSuccess) return c->error;
  if (nib_peer_gone(c)) {
    NIB_WARN("net-ib: irecv: the sender %s has gone (its connection closed); nothing can arrive",
             c->peer);
    return nib_fail(c, ncclRemoteError);
  }
  int slot = (int)(c->seq % NIB_MAX_REQS);
  nib_req_t* r = &c->reqs[slot];
  if (r->used) {
    nib_poll(c);
    return ncclSuccess; /* slot still busy: the caller retries */
  }
  for (int i = 0; i < n; i++) {
    if (sizes[i] > 0 && (mhandles == NULL || mhandles[i] == NULL)) {
      NIB_WARN("net-ib: irecv buffer %d (%zu bytes) has no memory handle (regMr it first)", i,
               sizes[i]);
      return ncclInvalidArgument;
    }
  }
  uint64_t seq = c->seq + 1;
  for (int i = 0; i < n; i++) {
    int q = c->next_qp;
    c->next_qp = (c->next_qp + 1) % c->nqps;
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = NIB_WR_RECV;
    int rc = ibv_post_recv(c->qp[q], &wr, &bad);
    if (rc != 0) {
      NIB_WARN("net-ib: %s: posting a receive for %s failed: %s", c->dev->name, c->peer,
               strerror(rc));
      return nib_fail(c, ncclSystemError);
    }
    nib_fifo_elem_t* e = &c->fifo[slot][i];
    e->addr = (uint64_t)(uintptr_t)data[i];
    e->size = sizes[i];
    e->rkey = sizes[i] > 0 ? nib_mh_rkey(mhandles[i]) : 0;
    e->tag = tags != NULL ? tags[i] : 0;
    e->nreqs = (uint32_t)n;
    e->qp = (uint32_t)q;
    e->seq = seq;
  }
  struct ibv_sge sge = {.addr = (uint64_t)(uintptr_t)c->fifo[slot],
                        .length = (uint32_t)(n * sizeof(nib_fifo_elem_t)),
                        .lkey = c->fifo_mr->lkey};
  struct ibv_send_wr wr, *bad = NULL;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = NIB_WR_FIFO;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr =
      c->remote_addr + (uint64_t)slot * NIB_MAX_RECVS * sizeof(nib_fifo_elem_t);
  wr.wr.rdma.rkey = c->remote_rkey;
  int rc = ibv_post_send(c->qp[0], &wr, &bad);
  if (rc != 0) {
    NIB_WARN("net-ib: %s: writing the FIFO of %s failed: %s", c->dev->name, c->peer, strerror(rc));
    return nib_fail(c, ncclSystemError);
  }
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = true;
  r->n = n;
  r->pending = n;
  for (int i = 0; i < n; i++) r->len[i] = SIZE_MAX; /* not yet arrived */
  c->seq = seq;
  *request = r;
  return ncclSuccess;
}

ncclResult_t nib_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request) {
  nib_comm_t* c = send_comm;
  *request = NULL;
  if (c->error != ncclSuccess) return c->error;
  if (nib_peer_gone(c)) {
    NIB_WARN("net-ib: isend: the receiver %s has gone (its connection closed)", c->peer);
    return nib_fail(c, ncclRemoteError);
  }
  int slot = (int)(c->seq % NIB_MAX_REQS);
  volatile nib_fifo_elem_t* elems = c->fifo[slot];
  uint64_t seq = c->seq + 1;
  if (__atomic_load_n(&elems[0].seq, __ATOMIC_ACQUIRE) != seq) return ncclSuccess; /* not yet */
  uint32_t nreqs = elems[0].nreqs;
  if (nreqs < 1 || nreqs > NIB_MAX_RECVS) {
    NIB_WARN("net-ib: isend: the receiver %s posted a receive of %u buffers", c->peer, nreqs);
    return nib_fail(c, ncclInternalError);
  }
  for (uint32_t i = 1; i < nreqs; i++)
    if (__atomic_load_n(&elems[i].seq, __ATOMIC_ACQUIRE) != seq) return ncclSuccess;
  int idx = -1;
  if (nreqs == 1) {
    idx = 0;
  } else {
    for (uint32_t i = 0; i < nreqs && idx < 0; i++)
      if (!c->slot_sent[slot][i] && elems[i].tag == tag) idx = (int)i;
    if (idx < 0) {
      NIB_WARN("net-ib: isend with tag %d: none of the %u buffers of the receiver's multi-receive "
               "waits for that tag",
               tag, nreqs);
      return ncclInvalidUsage;
    }
  }
  nib_req_t* r = &c->sreqs[slot][idx];
  if (r->used) {
    nib_poll(c);
    return ncclSuccess; /* that buffer's previous send is not tested yet */
  }
  if (size > elems[idx].size) {
    NIB_WARN("net-ib: isend of %zu bytes to %s, whose matching receive posted %llu bytes "
             "(ncclInvalidUsage: the sizes of the two sides disagree)",
             size, c->peer, (unsigned long long)elems[idx].size);
    return ncclInvalidUsage;
  }
  if (size > 0 && mhandle == NULL) {
    NIB_WARN("net-ib: isend of %zu bytes without a memory handle (regMr it first)", size);
    return ncclInvalidArgument;
  }
  struct ibv_qp* qp = c->qp[elems[idx].qp % (uint32_t)c->nqps];
  c->sizes[slot][idx] = size;
  struct ibv_sge dsge = {.addr = (uint64_t)(uintptr_t)data,
                         .length = (uint32_t)size,
                         .lkey = size > 0 ? nib_mh_lkey(mhandle) : 0};
  struct ibv_sge ssge = {.addr = (uint64_t)(uintptr_t)&c->sizes[slot][idx],
                         .length = sizeof(uint64_t),
                         .lkey = c->sizes_mr->lkey};
  struct ibv_send_wr wr[2], *bad = NULL;
  memset(wr, 0, sizeof(wr));
  wr[0].wr_id = NIB_WR_FIFO; /* unsignaled */
  wr[0].sg_list = &dsge;
  wr[0].num_sge = 1;
  wr[0].opcode = IBV_WR_RDMA_WRITE;
  wr[0].wr.rdma.remote_addr = elems[idx].addr;
  wr[0].wr.rdma.rkey = elems[idx].rkey;
  wr[0].next = &wr[1];
  wr[1].wr_id = 1 + (uint64_t)slot * NIB_MAX_RECVS + (uint64_t)idx;
  wr[1].sg_list = &ssge;
  wr[1].num_sge = 1;
  wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr[1].send_flags = IBV_SEND_SIGNALED;
  wr[1].imm_data = htonl(nib_imm_make(slot, idx));
  wr[1].wr.rdma.remote_addr =
      c->remote_addr + ((uint64_t)slot * NIB_MAX_RECVS + (uint64_t)idx) * sizeof(uint64_t);
  wr[1].wr.rdma.rkey = c->remote_rkey;
  int rc = ibv_post_send(qp, size > 0 ? &wr[0] : &wr[1], &bad);
  if (rc != 0) {
    NIB_WARN("net-ib: %s: posting a write of %zu bytes to %s failed: %s", c->dev->name, size,
             c->peer, strerror(rc));
    return nib_fail(c, ncclSystemError);
  }
  memset(r, 0, sizeof(*r));
  r->comm = c;
  r->used = true;
  r->n = 1;
  r->pending = 1;
  r->len[0] = size;
  c->slot_sent[slot][idx] = true;
  bool all = true;
  for (uint32_t i = 0; i < nreqs; i++) all = all && c->slot_sent[slot][i];
  if (all) {
    memset(c->slot_sent[slot], 0, sizeof(c->slot_sent[slot]));
    c->seq = seq;
  }
  *request = r;
  return ncclSuccess;
}

ncclResult_t nib_iflush(void* recv_comm, int n, void** request) {
  (void)recv_comm;
  (void)n;
  *request = NULL; /* host memory only: nothing to make visible */
  return ncclSuccess;
}

ncclResult_t nib_test(void* request, int* done, int* sizes) {
  nib_req_t* r = request;
  nib_comm_t* c = r->comm;
  *done = 0;
  nib_poll(c);
  nib_dev_async_poll(c->dev);
  if (r->pending == 0) {
    *done = 1;
    if (sizes != NULL)
      for (int i = 0; i < r->n; i++) sizes[i] = (int)r->len[i];
    r->used = false;
    return ncclSuccess;
  }
  if (c->error != ncclSuccess) return c->error;
  if (nib_peer_gone(c) &&
      nib_now_ms() - c->peer_gone_ms >= (uint64_t)nib_g.knobs.peer_grace_ms) {
    NIB_WARN("net-ib: %s: the peer %s has gone (its connection closed) with this %s pending",
             c->dev->name, c->peer, c->is_send ? "send" : "receive");
    return nib_fail(c, ncclRemoteError);
  }
  return ncclSuccess;
}
