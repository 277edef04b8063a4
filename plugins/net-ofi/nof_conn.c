/*
 * net-ofi endpoints and connections: opening and closing a comm's libfabric objects, reading its
 * completion queue, and the non-blocking listen / connect / accept handshake (CONN, then ACK).
 *
 * connect keeps its in-progress comm behind a pointer stored after the handle's payload, in the
 * core's handle buffer, which NCCL passes again on every retry. accept returns a receive comm
 * only once its ACK has left (send completion): a comm handed to the core earlier might sit
 * untested while the connector waits for that ACK, which on a provider with manual progress
 * would never leave.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nof.h"

typedef struct {
  nof_ep_t e;           /* first: nof_op_t.ep points here */
  nof_comm_t* pending;  /* accepted, its ACK not yet sent */
  bool pending_acked;   /* its ACK send is posted */
  double pending_since; /* when that connection request was taken */
} nof_listen_t;

typedef struct {
  nof_handle_t h;
  nof_comm_t* state; /* connect in progress */
} nof_handle_wire_t;

_Static_assert(sizeof(nof_handle_wire_t) <= NCCL_NET_HANDLE_MAXSIZE,
               "net-ofi handle must fit NCCL_NET_HANDLE_MAXSIZE");

double nof_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- endpoints ------------------------------------------------------------------------------ */

static void nof_mr_list_init(nof_ep_t* e) { e->mrs.prev = e->mrs.next = &e->mrs; }

ncclResult_t nof_ep_open(int dev, nof_ep_t* e) {
  nof_dev_t* d = &nof_g.dev[dev];
  const char* what = "fi_domain";
  int rc;
  e->dev = dev;
  nof_mr_list_init(e);
  rc = fi_domain(d->fabric, d->info, &e->domain, NULL);
  if (rc != 0) goto err;
  struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
  what = "fi_cq_open";
  rc = fi_cq_open(e->domain, &cq_attr, &e->cq, NULL);
  if (rc != 0) goto err;
  struct fi_av_attr av_attr = {.type = d->info->domain_attr->av_type};
  what = "fi_av_open";
  rc = fi_av_open(e->domain, &av_attr, &e->av, NULL);
  if (rc != 0) goto err;
  what = "fi_endpoint";
  rc = fi_endpoint(e->domain, d->info, &e->ep, NULL);
  if (rc != 0) goto err;
  what = "fi_ep_bind(cq)";
  rc = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) goto err;
  what = "fi_ep_bind(av)";
  rc = fi_ep_bind(e->ep, &e->av->fid, 0);
  if (rc != 0) goto err;
  what = "fi_enable";
  rc = fi_enable(e->ep);
  if (rc != 0) goto err;
  e->addrlen = NOF_MAX_ADDR;
  what = "fi_getname";
  rc = fi_getname(&e->ep->fid, e->addr, &e->addrlen);
  if (rc == -FI_ETOOSMALL) {
    NOF_WARN("net-ofi: %s: endpoint addresses of %zu bytes do not fit the %d-byte handle",
             nof_g.prov, e->addrlen, NOF_MAX_ADDR);
    nof_ep_close(e);
    return ncclSystemError;
  }
  if (rc != 0) goto err;
  e->ctrl = calloc(1, sizeof(*e->ctrl));
  if (e->ctrl == NULL) {
    NOF_WARN("net-ofi: out of memory");
    nof_ep_close(e);
    return ncclSystemError;
  }
  ncclResult_t res = nof_mr_reg(e, e->ctrl, sizeof(*e->ctrl), NCCL_PTR_HOST, &e->ctrl_mr);
  if (res != ncclSuccess) {
    nof_ep_close(e);
    return res;
  }
  e->id = nof_next_id();
  e->last_progress = nof_now();
  return ncclSuccess;
err:
  NOF_WARN("net-ofi: %s on %s (%s) failed: %s", what, d->name, nof_g.prov, fi_strerror(-rc));
  nof_ep_close(e);
  return ncclSystemError;
}

static void nof_close_fid(struct fid* f, const char* what) {
  if (f == NULL) return;
  int rc = fi_close(f);
  if (rc != 0) NOF_INFO(NCCL_NET, "net-ofi: closing %s: %s", what, fi_strerror(-rc));
}

void nof_ep_close(nof_ep_t* e) {
  /* The endpoint first: nothing may land in a buffer after its close returns. */
  if (e->ep) nof_close_fid(&e->ep->fid, "endpoint");
  while (e->mrs.next != NULL && e->mrs.next != &e->mrs) nof_mr_close(e, e->mrs.next);
  if (e->av) nof_close_fid(&e->av->fid, "address vector");
  if (e->cq) nof_close_fid(&e->cq->fid, "completion queue");
  if (e->domain) nof_close_fid(&e->domain->fid, "domain");
  free(e->ctrl);
  e->ep = NULL;
  e->av = NULL;
  e->cq = NULL;
  e->domain = NULL;
  e->ctrl = NULL;
  e->ctrl_mr = NULL;
}

static ncclResult_t nof_cq_error(nof_ep_t* e) {
  struct fi_cq_err_entry err;
  memset(&err, 0, sizeof(err));
  ssize_t rc = fi_cq_readerr(e->cq, &err, 0);
  if (rc == -FI_EAGAIN) return ncclSuccess;
  if (rc < 0) {
    NOF_WARN("net-ofi: fi_cq_readerr failed: %s", fi_strerror((int)-rc));
    e->error = ncclSystemError;
    return ncclSystemError;
  }
  nof_op_t* op = err.op_context;
  char buf[256];
  const char* prov_text = fi_cq_strerror(e->cq, err.prov_errno, err.err_data, buf, sizeof(buf));
  ncclResult_t res;
  if (err.err == FI_ECANCELED) {
    res = ncclRemoteError; /* tcp;ofi_rxm cancels receives bound to a connection that died */
    NOF_WARN("net-ofi: the provider cancelled a %s on %s (%s): the peer is gone",
             op != NULL && op->kind == NOF_OP_DATA ? "transfer" : "control message",
             nof_g.dev[e->dev].name, nof_g.prov);
  } else if (err.err == FI_ETRUNC) {
    res = ncclInvalidUsage;
    NOF_WARN(
        "net-ofi: a message larger than the receive posted for it arrived (%zu bytes "
        "posted, %zu more sent)",
        err.len, err.olen);
  } else {
    res = ncclRemoteError;
    bool probe = op != NULL && op->kind == NOF_OP_PROBE_TX;
    NOF_WARN("net-ofi: %s on %s (%s) failed: %s (%s)",
             probe                                   ? "liveness probe to the peer"
             : op != NULL && op->kind == NOF_OP_DATA ? "transfer"
                                                     : "control message",
             nof_g.dev[e->dev].name, nof_g.prov, fi_strerror(err.err), prov_text ? prov_text : "");
  }
  if (op == NULL) {
    e->error = res; /* no request to pin it on: the whole comm fails */
  } else {
    op->error = res;
    op->state = NOF_REQ_DONE;
  }
  return ncclSuccess;
}

ncclResult_t nof_ep_progress(nof_ep_t* e) {
  struct fi_cq_tagged_entry ent[16];
  for (int round = 0; round < 64; round++) {
    ssize_t n = fi_cq_read(e->cq, ent, 16);
    if (n == -FI_EAGAIN) return ncclSuccess;
    if (n == -FI_EAVAIL) {
      ncclResult_t res = nof_cq_error(e);
      if (res != ncclSuccess) return res;
      continue;
    }
    if (n < 0) {
      NOF_WARN("net-ofi: fi_cq_read on %s (%s) failed: %s", nof_g.dev[e->dev].name, nof_g.prov,
               fi_strerror((int)-n));
      e->error = ncclSystemError;
      return ncclSystemError;
    }
    e->last_progress = nof_now();
    for (ssize_t i = 0; i < n; i++) {
      nof_op_t* op = ent[i].op_context;
      if (op == NULL) continue;
      if (ent[i].flags & FI_RECV) op->len = ent[i].len; /* a send keeps the size it posted */
      op->state = NOF_REQ_DONE;
    }
    if (n < 16) return ncclSuccess;
  }
  return ncclSuccess;
}

ncclResult_t nof_post_probe_rx(nof_ep_t* e) {
  nof_op_t* op = &e->probe_rx_op;
  *op = (nof_op_t){.kind = NOF_OP_PROBE_RX, .state = NOF_REQ_POSTED, .ep = e};
  ssize_t rc = fi_trecv(e->ep, &e->ctrl->probe_rx, sizeof(e->ctrl->probe_rx), e->ctrl_mr->desc,
                        FI_ADDR_UNSPEC, nof_tag(NOF_TAG_PROBE, e->id, 0), 0, &op->fictx);
  if (rc == -FI_EAGAIN) {
    op->state = NOF_REQ_FREE; /* posted again at the next progress */
    return ncclSuccess;
  }
  if (rc != 0) {
    NOF_WARN("net-ofi: posting the probe receive failed: %s", fi_strerror((int)-rc));
    op->state = NOF_REQ_FREE;
    return ncclSystemError;
  }
  return ncclSuccess;
}

static ncclResult_t nof_av_insert(nof_ep_t* e, const void* addr, fi_addr_t* fa_p) {
  int rc = fi_av_insert(e->av, addr, 1, fa_p, 0, NULL);
  if (rc != 1) {
    NOF_WARN("net-ofi: fi_av_insert of the peer's address failed: %s",
             rc < 0 ? fi_strerror(-rc) : "address not inserted");
    return ncclSystemError;
  }
  return ncclSuccess;
}

static void nof_peer_str(nof_comm_t* c, const void* addr) {
  size_t len = sizeof(c->peer_str);
  if (fi_av_straddr(c->e.av, addr, c->peer_str, &len) == NULL) snprintf(c->peer_str, 64, "peer");
  c->peer_str[sizeof(c->peer_str) - 1] = '\0';
}

/* Sends e->ctrl->tx (already filled) to `to` with `tag`; FI_EAGAIN leaves the op FREE. */
static ncclResult_t nof_ctrl_send(nof_ep_t* e, fi_addr_t to, uint64_t tag) {
  nof_op_t* op = &e->ctrl_tx_op;
  *op = (nof_op_t){.kind = NOF_OP_CTRL_TX, .state = NOF_REQ_POSTED, .ep = e};
  ssize_t rc =
      fi_tsend(e->ep, &e->ctrl->tx, sizeof(e->ctrl->tx), e->ctrl_mr->desc, to, tag, &op->fictx);
  if (rc == -FI_EAGAIN) {
    op->state = NOF_REQ_FREE;
    return nof_ep_progress(e);
  }
  if (rc != 0) {
    op->state = NOF_REQ_FREE;
    NOF_WARN("net-ofi: sending a connection message failed: %s", fi_strerror((int)-rc));
    return ncclSystemError;
  }
  return ncclSuccess;
}

static ncclResult_t nof_ctrl_recv(nof_ep_t* e, int slot, uint64_t tag) {
  nof_op_t* op = &e->ctrl_rx_op[slot];
  *op = (nof_op_t){.kind = NOF_OP_CTRL_RX, .state = NOF_REQ_POSTED, .ep = e};
  ssize_t rc = fi_trecv(e->ep, &e->ctrl->rx[slot], sizeof(e->ctrl->rx[slot]), e->ctrl_mr->desc,
                        FI_ADDR_UNSPEC, tag, 0, &op->fictx);
  if (rc != 0) {
    op->state = NOF_REQ_FREE;
    NOF_WARN("net-ofi: posting a connection receive failed: %s", fi_strerror((int)-rc));
    return rc == -FI_EAGAIN ? ncclInternalError : ncclSystemError;
  }
  return ncclSuccess;
}

static void nof_comm_free(nof_comm_t* c) {
  if (c == NULL) return;
  nof_ep_close(&c->e);
  free(c);
}

/* ---- listen --------------------------------------------------------------------------------- */

ncclResult_t nof_listen(int dev, void* handle, void** listen_comm) {
  *listen_comm = NULL;
  if (dev < 0 || dev >= nof_g.ndev) {
    NOF_WARN("net-ofi: listen: device %d does not exist (%d devices)", dev, nof_g.ndev);
    return ncclInvalidArgument;
  }
  nof_listen_t* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    NOF_WARN("net-ofi: listen: out of memory");
    return ncclSystemError;
  }
  ncclResult_t res = nof_ep_open(dev, &l->e);
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  for (int i = 0; i < NOF_CONN_RECVS && res == ncclSuccess; i++)
    res = nof_ctrl_recv(&l->e, i, nof_tag(NOF_TAG_CONN, l->e.id, 0));
  if (res != ncclSuccess) {
    nof_ep_close(&l->e);
    free(l);
    return res;
  }
  nof_handle_wire_t* w = handle;
  memset(w, 0, sizeof(*w));
  w->h.magic = NOF_MAGIC;
  w->h.listen_id = l->e.id;
  w->h.addrlen = (uint16_t)l->e.addrlen;
  memcpy(w->h.addr, l->e.addr, l->e.addrlen);
  *listen_comm = l;
  return ncclSuccess;
}

/* ---- connect -------------------------------------------------------------------------------- */

static ncclResult_t nof_connect_start(int dev, const nof_handle_wire_t* w, nof_comm_t** c_p) {
  nof_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NOF_WARN("net-ofi: connect: out of memory");
    return ncclSystemError;
  }
  c->is_send = true;
  ncclResult_t res = nof_ep_open(dev, &c->e);
  if (res != ncclSuccess) {
    free(c);
    return res;
  }
  fi_addr_t listener;
  res = nof_av_insert(&c->e, w->h.addr, &listener);
  if (res == ncclSuccess) res = nof_ctrl_recv(&c->e, 0, nof_tag(NOF_TAG_ACK, c->e.id, 0));
  if (res == ncclSuccess) res = nof_post_probe_rx(&c->e);
  if (res != ncclSuccess) {
    nof_comm_free(c);
    return res;
  }
  c->peer = listener; /* until the ACK names the receive comm's endpoint */
  c->peer_id = w->h.listen_id;
  nof_ctrl_msg_t* m = &c->e.ctrl->tx;
  *m = (nof_ctrl_msg_t){.magic = NOF_MAGIC,
                        .id = c->e.id,
                        .peer_id = w->h.listen_id,
                        .addrlen = (uint16_t)c->e.addrlen};
  memcpy(m->addr, c->e.addr, c->e.addrlen);
  *c_p = c;
  return ncclSuccess;
}

ncclResult_t nof_connect(int dev, void* handle, void** send_comm) {
  *send_comm = NULL;
  nof_handle_wire_t* w = handle;
  if (w->h.magic != NOF_MAGIC || w->h.addrlen == 0 || w->h.addrlen > NOF_MAX_ADDR) {
    NOF_WARN("net-ofi: connect: the handle was not written by net-ofi's listen");
    return ncclInvalidArgument;
  }
  if (dev < 0 || dev >= nof_g.ndev) {
    NOF_WARN("net-ofi: connect: device %d does not exist (%d devices)", dev, nof_g.ndev);
    return ncclInvalidArgument;
  }
  ncclResult_t res;
  if (w->state == NULL) {
    res = nof_connect_start(dev, w, &w->state);
    if (res != ncclSuccess) return res;
  }
  nof_comm_t* c = w->state;
  nof_ep_t* e = &c->e;
  if (e->ctrl_tx_op.state == NOF_REQ_FREE) {
    res = nof_ctrl_send(e, c->peer, nof_tag(NOF_TAG_CONN, c->peer_id, 0));
    if (res != ncclSuccess) goto err_free;
  }
  res = nof_ep_progress(e);
  if (res != ncclSuccess) goto err_free;
  if (e->ctrl_tx_op.state == NOF_REQ_DONE && e->ctrl_tx_op.error != ncclSuccess) {
    NOF_WARN("net-ofi: connect: the listener did not take the connection request");
    res = e->ctrl_tx_op.error;
    goto err_free;
  }
  nof_op_t* ack = &e->ctrl_rx_op[0];
  if (ack->state != NOF_REQ_DONE) return ncclSuccess;
  const nof_ctrl_msg_t* m = &e->ctrl->rx[0];
  if (ack->error != ncclSuccess || ack->len != sizeof(*m) || m->magic != NOF_MAGIC ||
      m->peer_id != e->id || m->addrlen == 0 || m->addrlen > NOF_MAX_ADDR) {
    NOF_WARN("net-ofi: connect: malformed connection reply");
    res = ack->error != ncclSuccess ? ack->error : ncclRemoteError;
    goto err_free;
  }
  res = nof_av_insert(e, m->addr, &c->peer);
  if (res != ncclSuccess) goto err_free;
  c->peer_id = m->id;
  nof_peer_str(c, m->addr);
  ack->state = NOF_REQ_FREE;
  w->state = NULL;
  *send_comm = c;
  return ncclSuccess;
err_free:
  nof_comm_free(c);
  w->state = NULL;
  return res;
}

/* ---- accept --------------------------------------------------------------------------------- */

static ncclResult_t nof_accept_one(nof_listen_t* l, const nof_ctrl_msg_t* m) {
  nof_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NOF_WARN("net-ofi: accept: out of memory");
    return ncclSystemError;
  }
  ncclResult_t res = nof_ep_open(l->e.dev, &c->e);
  if (res != ncclSuccess) {
    free(c);
    return res;
  }
  res = nof_av_insert(&c->e, m->addr, &c->peer);
  if (res == ncclSuccess) res = nof_post_probe_rx(&c->e);
  if (res != ncclSuccess) {
    nof_comm_free(c);
    return res;
  }
  c->peer_id = m->id;
  nof_peer_str(c, m->addr);
  nof_ctrl_msg_t* a = &c->e.ctrl->tx;
  *a = (nof_ctrl_msg_t){
      .magic = NOF_MAGIC, .id = c->e.id, .peer_id = m->id, .addrlen = (uint16_t)c->e.addrlen};
  memcpy(a->addr, c->e.addr, c->e.addrlen);
  l->pending = c;
  l->pending_acked = false;
  l->pending_since = nof_now();
  return ncclSuccess;
}

ncclResult_t nof_accept(void* listen_comm, void** recv_comm) {
  nof_listen_t* l = listen_comm;
  *recv_comm = NULL;
  ncclResult_t res = nof_ep_progress(&l->e);
  if (res != ncclSuccess) return res;
  if (l->pending == NULL) {
    for (int i = 0; i < NOF_CONN_RECVS && l->pending == NULL; i++) {
      nof_op_t* op = &l->e.ctrl_rx_op[i];
      if (op->state != NOF_REQ_DONE) continue;
      nof_ctrl_msg_t m = l->e.ctrl->rx[i];
      bool ok = op->error == ncclSuccess && op->len == sizeof(m) && m.magic == NOF_MAGIC &&
                m.peer_id == l->e.id && m.addrlen > 0 && m.addrlen <= NOF_MAX_ADDR;
      res = nof_ctrl_recv(&l->e, i, nof_tag(NOF_TAG_CONN, l->e.id, 0));
      if (res != ncclSuccess) return res;
      if (!ok) {
        NOF_WARN("net-ofi: accept: dropping a malformed connection request");
        continue;
      }
      res = nof_accept_one(l, &m);
      if (res != ncclSuccess) return res;
    }
  }
  nof_comm_t* c = l->pending;
  if (c == NULL) return ncclSuccess;
  if (!l->pending_acked) {
    res = nof_ctrl_send(&c->e, c->peer, nof_tag(NOF_TAG_ACK, c->peer_id, 0));
    if (res != ncclSuccess) goto err_free;
    l->pending_acked = c->e.ctrl_tx_op.state != NOF_REQ_FREE;
  }
  res = nof_ep_progress(&c->e);
  if (res != ncclSuccess) goto err_free;
  if (c->e.ctrl_tx_op.state != NOF_REQ_DONE) {
    /* A connector that gave up (or died) after its request arrived must not hold the listener
     * forever: its request is dropped, and later ones are served. */
    if (nof_now() - l->pending_since > nof_g.probe_timeout_ms * 1e-3) {
      NOF_WARN(
          "net-ofi: accept: dropping the connection request of %s, which did not take the "
          "reply for %.1f s",
          c->peer_str, nof_now() - l->pending_since);
      l->pending = NULL;
      nof_comm_free(c);
    }
    return ncclSuccess;
  }
  if (c->e.ctrl_tx_op.error != ncclSuccess) {
    NOF_WARN("net-ofi: accept: the connecting peer %s is unreachable", c->peer_str);
    res = c->e.ctrl_tx_op.error;
    goto err_free;
  }
  l->pending = NULL;
  *recv_comm = c;
  return ncclSuccess;
err_free:
  l->pending = NULL;
  nof_comm_free(c);
  return res;
}

/* ---- close ---------------------------------------------------------------------------------- */

ncclResult_t nof_close_listen(void* listen_comm) {
  nof_listen_t* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  nof_comm_free(l->pending);
  nof_ep_close(&l->e);
  free(l);
  return ncclSuccess;
}

ncclResult_t nof_close_send(void* send_comm) {
  nof_comm_free(send_comm);
  return ncclSuccess;
}

ncclResult_t nof_close_recv(void* recv_comm) {
  nof_comm_free(recv_comm);
  return ncclSuccess;
}
