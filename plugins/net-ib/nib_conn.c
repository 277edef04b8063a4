/*
 * net-ib connections: comm objects (completion queue, RC queue pairs, FIFO or size table), the
 * queue pair state changes, and the non-blocking connect / accept handshakes over TCP.
 *
 * Per connection, over a socket to the address in the listen handle:
 *   connect: create the send comm (queue pairs in INIT), send its nib_qp_info_t (queue pair
 *            numbers, PSN, LID, GID, MTU, the FIFO's address and key); read the receiver's;
 *            move the queue pairs to RTR and RTS; send an 8-byte ready word. The send comm is
 *            ready once that is written.
 *   accept:  read the sender's info, create the receive comm, move its queue pairs to RTR and
 *            RTS, send its info (with the size table's address and key), and wait for the ready
 *            word: only then are the sender's queue pairs able to receive the FIFO writes.
 * Every step is a non-blocking socket call; connect and accept return a NULL comm until done.
 * The socket stays with the comm afterwards: its end tells the comm that the peer has gone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "nib.h"

#define NIB_MAX_PENDING 64
#define NIB_READY 0x5245414459ULL /* "READY" */

/* ---- Comm objects --------------------------------------------------------------------------- */

static uint32_t nib_random32(void) {
  uint32_t v;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v)) v = (uint32_t)getpid() * 2654435761u;
  return v;
}

static void* nib_zalloc_pages(size_t size) {
  void* p = NULL;
  long page = sysconf(_SC_PAGESIZE);
  if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, size) != 0) return NULL;
  memset(p, 0, size);
  return p;
}

static const char* nib_qp_state_name(enum ibv_qp_state s) {
  switch (s) {
    case IBV_QPS_INIT: return "INIT";
    case IBV_QPS_RTR: return "RTR";
    case IBV_QPS_RTS: return "RTS";
    default: return "?";
  }
}

ncclResult_t nib_comm_create(nib_dev_t* d, bool is_send, const char* peer, nib_comm_t** comm_p) {
  *comm_p = NULL;
  nib_comm_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NIB_WARN("net-ib: out of memory creating a comm");
    return ncclSystemError;
  }
  c->is_send = is_send;
  c->dev = d;
  c->fd = -1;
  c->nqps = nib_g.knobs.qps;
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  const char* step = "";
  int send_wr = 2 * NIB_MAX_REQS * NIB_MAX_RECVS + NIB_MAX_REQS + 8;
  int recv_wr = NIB_MAX_REQS * NIB_MAX_RECVS + 8;
  if (d->max_qp_wr > 0 && send_wr > d->max_qp_wr) send_wr = d->max_qp_wr;
  if (d->max_qp_wr > 0 && recv_wr > d->max_qp_wr) recv_wr = d->max_qp_wr;
  int cqe = c->nqps * (send_wr + recv_wr);
  if (d->max_cqe > 0 && cqe > d->max_cqe) cqe = d->max_cqe;
  step = "ibv_create_cq";
  c->cq = nib_v.create_cq(d->ctx, cqe, NULL, NULL, 0);
  if (c->cq == NULL) goto fail;
  for (int i = 0; i < c->nqps; i++) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof(ia));
    ia.send_cq = c->cq;
    ia.recv_cq = c->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = (uint32_t)send_wr;
    ia.cap.max_recv_wr = (uint32_t)recv_wr;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    step = "ibv_create_qp";
    c->qp[i] = nib_v.create_qp(d->pd, &ia);
    if (c->qp[i] == NULL) goto fail;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = (uint8_t)d->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    step = "ibv_modify_qp to INIT";
    if (nib_v.modify_qp(c->qp[i], &a,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
      goto fail;
  }
  size_t fifo_bytes = sizeof(nib_fifo_elem_t) * NIB_MAX_REQS * NIB_MAX_RECVS;
  size_t sizes_bytes = sizeof(uint64_t) * NIB_MAX_REQS * NIB_MAX_RECVS;
  step = "allocating the FIFO";
  c->fifo = nib_zalloc_pages(fifo_bytes);
  c->sizes = nib_zalloc_pages(sizes_bytes);
  if (c->fifo == NULL || c->sizes == NULL) {
    errno = ENOMEM;
    goto fail;
  }
  /* The sender's FIFO and the receiver's size table are written by the peer. */
  step = "ibv_reg_mr of the FIFO";
  c->fifo_mr = nib_v.reg_mr(d->pd, c->fifo, fifo_bytes,
                            IBV_ACCESS_LOCAL_WRITE | (is_send ? IBV_ACCESS_REMOTE_WRITE : 0));
  if (c->fifo_mr == NULL) goto fail;
  step = "ibv_reg_mr of the size table";
  c->sizes_mr = nib_v.reg_mr(d->pd, c->sizes, sizes_bytes,
                             IBV_ACCESS_LOCAL_WRITE | (is_send ? 0 : IBV_ACCESS_REMOTE_WRITE));
  if (c->sizes_mr == NULL) goto fail;
  c->psn_init = nib_random32() & 0xffffff;
  *comm_p = c;
  return ncclSuccess;
fail:
  NIB_WARN("net-ib: %s: creating a %s comm with %s: %s failed: %s", d->name,
           is_send ? "send" : "receive", peer, step, strerror(errno ? errno : EINVAL));
  nib_comm_destroy(c);
  return ncclSystemError;
}

void nib_comm_info(const nib_comm_t* c, uint64_t listen_id, nib_qp_info_t* info) {
  memset(info, 0, sizeof(*info));
  info->magic = NIB_MAGIC;
  info->listen_id = listen_id;
  info->nqps = (uint32_t)c->nqps;
  for (int i = 0; i < c->nqps; i++) info->qpn[i] = c->qp[i]->qp_num;
  info->psn = c->psn_init;
  info->lid = c->dev->lid;
  info->link_layer = (uint8_t)c->dev->link_layer;
  info->mtu = (uint8_t)c->dev->mtu;
  memcpy(info->gid, c->dev->gid.raw, 16);
  if (c->is_send) {
    info->addr = (uint64_t)(uintptr_t)c->fifo;
    info->rkey = c->fifo_mr->rkey;
  } else {
    info->addr = (uint64_t)(uintptr_t)c->sizes;
    info->rkey = c->sizes_mr->rkey;
  }
}

ncclResult_t nib_comm_connect_qps(nib_comm_t* c, const nib_qp_info_t* peer) {
  nib_dev_t* d = c->dev;
  if (peer->nqps != (uint32_t)c->nqps) {
    NIB_WARN("net-ib: %s: the peer %s uses %u queue pairs per connection, this process %d: set "
             "NCCL_IB_QPS_PER_CONNECTION alike on every rank",
             d->name, c->peer, peer->nqps, c->nqps);
    return ncclInvalidUsage;
  }
  if (peer->link_layer != (uint8_t)d->link_layer) {
    NIB_WARN("net-ib: %s (%s) cannot reach the peer %s's %s port", d->name,
             d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB", c->peer,
             peer->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB");
    return ncclRemoteError;
  }
  c->remote_addr = peer->addr;
  c->remote_rkey = peer->rkey;
  enum ibv_mtu mtu = peer->mtu < (uint8_t)d->mtu ? (enum ibv_mtu)peer->mtu : d->mtu;
  for (int i = 0; i < c->nqps; i++) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = peer->qpn[i];
    a.rq_psn = peer->psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = (uint8_t)d->port;
    a.ah_attr.sl = (uint8_t)nib_g.knobs.sl;
    if (d->link_layer == IBV_LINK_LAYER_ETHERNET) {
      a.ah_attr.is_global = 1;
      memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
      a.ah_attr.grh.sgid_index = (uint8_t)d->gid_index;
      a.ah_attr.grh.hop_limit = 255;
      a.ah_attr.grh.traffic_class = (uint8_t)nib_g.knobs.tc;
    } else {
      a.ah_attr.dlid = peer->lid;
    }
    enum ibv_qp_state to = IBV_QPS_RTR;
    int rc = nib_v.modify_qp(c->qp[i], &a,
                             IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                 IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc == 0) {
      memset(&a, 0, sizeof(a));
      a.qp_state = to = IBV_QPS_RTS;
      a.timeout = (uint8_t)nib_g.knobs.timeout;
      a.retry_cnt = (uint8_t)nib_g.knobs.retry_cnt;
      a.rnr_retry = 7; /* infinite: a receive WR is always posted before its FIFO element */
      a.sq_psn = c->psn_init;
      a.max_rd_atomic = 1;
      rc = nib_v.modify_qp(c->qp[i], &a,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                               IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
    }
    if (rc != 0) {
      NIB_WARN("net-ib: %s: queue pair %d of the %s comm with %s: ibv_modify_qp to %s failed: %s "
               "(path MTU %d, GID index %d, SL %d, TC %d)",
               d->name, i, c->is_send ? "send" : "receive", c->peer, nib_qp_state_name(to),
               strerror(rc > 0 ? rc : errno), 128 << (int)mtu, d->gid_index, nib_g.knobs.sl,
               nib_g.knobs.tc);
      return ncclSystemError;
    }
  }
  return ncclSuccess;
}

void nib_comm_destroy(nib_comm_t* c) {
  if (c == NULL) return;
  for (int i = 0; i < NIB_MAX_QPS; i++)
    if (c->qp[i] != NULL) nib_v.destroy_qp(c->qp[i]);
  if (c->cq != NULL) nib_v.destroy_cq(c->cq);
  if (c->fifo_mr != NULL) nib_v.dereg_mr(c->fifo_mr);
  if (c->sizes_mr != NULL) nib_v.dereg_mr(c->sizes_mr);
  free(c->fifo);
  free(c->sizes);
  if (c->fd >= 0) close(c->fd);
  free(c);
}

/* ---- Handshake messages --------------------------------------------------------------------- */

typedef struct {
  uint64_t magic;
  uint64_t listen_id;
  sock_addr_t addr;
} nib_handle_t;

struct nib_connecting;

/* The handle as listen writes it: connect keeps its state pointer after it, in the caller's
 * buffer, which NCCL passes again on every retry. */
typedef struct {
  nib_handle_t h;
  struct nib_connecting* state;
} nib_handle_wire_t;

_Static_assert(sizeof(nib_handle_wire_t) <= NCCL_NET_HANDLE_MAXSIZE,
               "net-ib handle must fit NCCL_NET_HANDLE_MAXSIZE");

/* Moves what the socket takes now. Closed or reset peer: ncclRemoteError; other failures
 * ncclSystemError (each WARNed). */
static ncclResult_t nib_msg_move(int fd, sock_msg_t* m, bool out, const char* what,
                                 const char* peer) {
  int r = sock_msg_move(fd, m, out);
  if (r == SOCK_MSG_OK) return ncclSuccess;
  if (r == SOCK_MSG_CLOSED) {
    NIB_WARN("net-ib: %s with %s: connection closed by the peer", what, peer);
    return ncclRemoteError;
  }
  int err = errno;
  NIB_WARN("net-ib: %s with %s failed: %s", what, peer, strerror(err));
  return sock_err_remote(err) ? ncclRemoteError : ncclSystemError;
}

static bool nib_info_valid(const nib_qp_info_t* i, uint64_t listen_id) {
  return i->magic == NIB_MAGIC && i->listen_id == listen_id && i->nqps >= 1 &&
         i->nqps <= NIB_MAX_QPS;
}

/* ---- listen --------------------------------------------------------------------------------- */

typedef struct {
  int fd;
  nib_qp_info_t in, out;
  uint64_t ready;
  sock_msg_t min, mout, mready;
  nib_comm_t* comm;
  char peer[64];
} nib_pending_t;

typedef struct {
  int fd;
  int dev;
  uint64_t listen_id;
  nib_pending_t* pend[NIB_MAX_PENDING];
  int npend;
} nib_listen_t;

ncclResult_t nib_listen(int dev, void* handle, void** listen_comm) {
  *listen_comm = NULL;
  if (dev < 0 || dev >= nib_g.ndev) {
    NIB_WARN("net-ib: listen on device %d, which does not exist (%d devices)", dev, nib_g.ndev);
    return ncclInvalidArgument;
  }
  if (!nib_g.hs_ok) {
    NIB_WARN("net-ib: listen: no network interface for the connection handshake (set "
             "NCCL_SOCKET_IFNAME to one the hosts share)");
    return ncclSystemError;
  }
  sock_addr_t addr = nib_g.hs;
  socklen_t len = sock_addr_len(&addr);
  int fd = socket(addr.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0 || bind(fd, &addr.sa, len) != 0 || listen(fd, SOMAXCONN) != 0 ||
      getsockname(fd, &addr.sa, &len) != 0) {
    NIB_WARN("net-ib: listen on %s (handshake interface %s): %s", nib_g.dev[dev].name,
             nib_g.hs_if, strerror(errno));
    if (fd >= 0) close(fd);
    return ncclSystemError;
  }
  nib_listen_t* l = calloc(1, sizeof(*l));
  if (l == NULL) {
    close(fd);
    NIB_WARN("net-ib: listen: out of memory");
    return ncclSystemError;
  }
  l->fd = fd;
  l->dev = dev;
  l->listen_id = ((uint64_t)nib_random32() << 32) | nib_random32();
  nib_handle_wire_t* hw = handle; /* state NULL: connect starts from scratch */
  memset(hw, 0, sizeof(*hw));
  hw->h.magic = NIB_MAGIC;
  hw->h.listen_id = l->listen_id;
  hw->h.addr = addr;
  *listen_comm = l;
  return ncclSuccess;
}

/* ---- connect -------------------------------------------------------------------------------- */

typedef struct nib_connecting {
  int fd;
  bool connected;
  uint64_t listen_id;
  nib_comm_t* comm;
  nib_qp_info_t out, in;
  uint64_t ready;
  sock_msg_t mout, min, mready;
  bool qps_up;
  char peer[64];
} nib_connecting_t;


static void nib_connecting_free(nib_connecting_t* c) {
  if (c->fd >= 0) close(c->fd);
  nib_comm_destroy(c->comm);
  free(c);
}

static ncclResult_t nib_connecting_start(int dev, const nib_handle_wire_t* hw,
                                         nib_connecting_t** c_p) {
  nib_connecting_t* c = calloc(1, sizeof(*c));
  if (c == NULL) {
    NIB_WARN("net-ib: connect: out of memory");
    return ncclSystemError;
  }
  c->fd = -1;
  c->listen_id = hw->h.listen_id;
  sock_addr_str(&hw->h.addr, c->peer, sizeof(c->peer));
  ncclResult_t res = nib_comm_create(&nib_g.dev[dev], true, c->peer, &c->comm);
  if (res != ncclSuccess) goto err;
  nib_comm_info(c->comm, c->listen_id, &c->out);
  c->mout = (sock_msg_t){.buf = (char*)&c->out, .len = sizeof(c->out)};
  c->min = (sock_msg_t){.buf = (char*)&c->in, .len = sizeof(c->in)};
  c->ready = NIB_READY;
  c->mready = (sock_msg_t){.buf = (char*)&c->ready, .len = sizeof(c->ready)};
  bool remote = false;
  int err = sock_connect_start(&hw->h.addr, &c->fd, &c->connected, &remote);
  if (err != 0) {
    NIB_WARN("net-ib: connect to %s: %s%s", c->peer, remote ? "" : "socket: ", strerror(err));
    res = remote ? ncclRemoteError : ncclSystemError;
    goto err;
  }
  *c_p = c;
  return ncclSuccess;
err:
  nib_connecting_free(c);
  return res;
}

/* One step; *done once the ready word is out. */
static ncclResult_t nib_connecting_step(nib_connecting_t* c, bool* done) {
  *done = false;
  if (!c->connected) {
    int up = sock_connect_poll(c->fd);
    if (up == 0) return ncclSuccess;
    if (up < 0) {
      NIB_WARN("net-ib: connect to %s: %s", c->peer, strerror(errno));
      return ncclRemoteError;
    }
    c->connected = true;
  }
  ncclResult_t res = nib_msg_move(c->fd, &c->mout, true, "connect (queue pair info)", c->peer);
  if (res != ncclSuccess || c->mout.done < c->mout.len) return res;
  res = nib_msg_move(c->fd, &c->min, false, "connect (the receiver's info)", c->peer);
  if (res != ncclSuccess || c->min.done < c->min.len) return res;
  if (!c->qps_up) {
    if (!nib_info_valid(&c->in, c->listen_id)) {
      NIB_WARN("net-ib: connect to %s: the peer's answer is not a net-ib handshake", c->peer);
      return ncclRemoteError;
    }
    res = nib_comm_connect_qps(c->comm, &c->in);
    if (res != ncclSuccess) return res;
    c->qps_up = true;
  }
  res = nib_msg_move(c->fd, &c->mready, true, "connect (ready)", c->peer);
  if (res != ncclSuccess || c->mready.done < c->mready.len) return res;
  *done = true;
  return ncclSuccess;
}

ncclResult_t nib_connect(int dev, void* handle, void** send_comm) {
  *send_comm = NULL;
  nib_handle_wire_t* hw = handle;
  if (hw->h.magic != NIB_MAGIC) {
    NIB_WARN("net-ib: connect: the handle was not written by net-ib's listen");
    return ncclInvalidArgument;
  }
  if (dev < 0 || dev >= nib_g.ndev) {
    NIB_WARN("net-ib: connect on device %d, which does not exist (%d devices)", dev, nib_g.ndev);
    return ncclInvalidArgument;
  }
  ncclResult_t res;
  if (hw->state == NULL) {
    res = nib_connecting_start(dev, hw, &hw->state);
    if (res != ncclSuccess) return res;
  }
  nib_connecting_t* c = hw->state;
  bool done = false;
  res = nib_connecting_step(c, &done);
  if (res == ncclSuccess && !done) return ncclSuccess;
  if (res == ncclSuccess) {
    c->comm->fd = c->fd;
    c->fd = -1;
    *send_comm = c->comm;
    c->comm = NULL;
  }
  nib_connecting_free(c);
  hw->state = NULL;
  return res;
}

/* ---- accept --------------------------------------------------------------------------------- */

static void nib_pending_drop(nib_listen_t* l, int i) {
  nib_pending_t* p = l->pend[i];
  if (p->fd >= 0) close(p->fd);
  nib_comm_destroy(p->comm);
  free(p);
  l->pend[i] = l->pend[--l->npend];
}

static ncclResult_t nib_pending_step(nib_listen_t* l, nib_pending_t* p, bool* ready) {
  *ready = false;
  if (p->comm == NULL) {
    ncclResult_t res = nib_msg_move(p->fd, &p->min, false, "accept (queue pair info)", p->peer);
    if (res != ncclSuccess || p->min.done < p->min.len) return res;
    if (!nib_info_valid(&p->in, l->listen_id)) {
      NIB_WARN("net-ib: accept: dropping a connection from %s that is not a net-ib peer of this "
               "listener",
               p->peer);
      return ncclRemoteError;
    }
    res = nib_comm_create(&nib_g.dev[l->dev], false, p->peer, &p->comm);
    if (res != ncclSuccess) return res;
    res = nib_comm_connect_qps(p->comm, &p->in);
    if (res != ncclSuccess) return res;
    nib_comm_info(p->comm, l->listen_id, &p->out);
    p->mout = (sock_msg_t){.buf = (char*)&p->out, .len = sizeof(p->out)};
    p->mready = (sock_msg_t){.buf = (char*)&p->ready, .len = sizeof(p->ready)};
  }
  ncclResult_t res = nib_msg_move(p->fd, &p->mout, true, "accept (queue pair info)", p->peer);
  if (res != ncclSuccess || p->mout.done < p->mout.len) return res;
  res = nib_msg_move(p->fd, &p->mready, false, "accept (ready)", p->peer);
  if (res != ncclSuccess || p->mready.done < p->mready.len) return res;
  if (p->ready != NIB_READY) {
    NIB_WARN("net-ib: accept: %s sent a bad ready word", p->peer);
    return ncclRemoteError;
  }
  *ready = true;
  return ncclSuccess;
}

ncclResult_t nib_accept(void* listen_comm, void** recv_comm) {
  nib_listen_t* l = listen_comm;
  *recv_comm = NULL;
  while (l->npend < NIB_MAX_PENDING) {
    sock_addr_t a;
    socklen_t alen = sizeof(a);
    int fd = accept4(l->fd, &a.sa, &alen, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      NIB_WARN("net-ib: accept failed: %s", strerror(errno));
      return ncclSystemError;
    }
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    nib_pending_t* p = calloc(1, sizeof(*p));
    if (p == NULL) {
      close(fd);
      NIB_WARN("net-ib: accept: out of memory");
      return ncclSystemError;
    }
    p->fd = fd;
    sock_addr_str(&a, p->peer, sizeof(p->peer));
    p->min = (sock_msg_t){.buf = (char*)&p->in, .len = sizeof(p->in)};
    l->pend[l->npend++] = p;
  }
  for (int i = 0; i < l->npend;) {
    bool ready = false;
    if (nib_pending_step(l, l->pend[i], &ready) != ncclSuccess) {
      /* One bad or vanished connector must not fail the listener: drop it (WARNed). */
      nib_pending_drop(l, i);
      continue;
    }
    if (ready) {
      nib_pending_t* p = l->pend[i];
      p->comm->fd = p->fd;
      p->fd = -1;
      *recv_comm = p->comm;
      p->comm = NULL;
      nib_pending_drop(l, i);
      return ncclSuccess;
    }
    i++;
  }
  return ncclSuccess;
}

ncclResult_t nib_close_listen(void* listen_comm) {
  nib_listen_t* l = listen_comm;
  if (l == NULL) return ncclSuccess;
  while (l->npend > 0) nib_pending_drop(l, 0);
  close(l->fd);
  free(l);
  return ncclSuccess;
}

ncclResult_t nib_close_send(void* send_comm) {
  nib_comm_destroy(send_comm);
  return ncclSuccess;
}

ncclResult_t nib_close_recv(void* recv_comm) {
  nib_comm_destroy(recv_comm);
  return ncclSuccess;
}
