/*
 * net-ofi memory registration and transfers: regMr/deregMr, isend/irecv as tagged messages,
 * test() reading the comm's completion queue, and the liveness probe.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nof.h"

/* ---- registration --------------------------------------------------------------------------- */

/* CUDA device of a pointer, through the driver API loaded on first use (the plugin does not link
 * CUDA: hosts without it still load it). -1 when unknown. */
static int nof_cuda_device(const void* p) {
  typedef int (*get_attr_t)(void* data, int attribute, unsigned long long ptr);
  static get_attr_t get_attr;
  static bool tried;
  if (!__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    get_attr_t f = lib ? (get_attr_t)dlsym(lib, "cuPointerGetAttribute") : NULL;
    __atomic_store_n(&get_attr, f, __ATOMIC_RELEASE);
    __atomic_store_n(&tried, true, __ATOMIC_RELEASE);
  }
  get_attr_t f = __atomic_load_n(&get_attr, __ATOMIC_ACQUIRE);
  int dev = -1;
  enum { CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9 };
  if (f == NULL || f(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (unsigned long long)(uintptr_t)p))
    return -1;
  return dev;
}

ncclResult_t nof_mr_reg(nof_ep_t* e, void* data, size_t size, int type, nof_mr_t** mr_p) {
  nof_dev_t* d = &nof_g.dev[e->dev];
  const struct fi_domain_attr* da = d->info->domain_attr;
  if (type != NCCL_PTR_HOST && type != NCCL_PTR_CUDA) {
    NOF_WARN("net-ofi: regMr: memory type %d is not NCCL_PTR_HOST or NCCL_PTR_CUDA", type);
    return ncclInvalidArgument;
  }
  if (type == NCCL_PTR_CUDA && !d->hmem) {
    NOF_WARN(
        "net-ofi: regMr: CUDA memory on %s, but provider %s has no FI_HMEM support (ptrSupport "
        "is host only)",
        d->name, nof_g.prov);
    return ncclInvalidArgument;
  }
  nof_mr_t* m = calloc(1, sizeof(*m));
  if (m == NULL) {
    NOF_WARN("net-ofi: regMr: out of memory");
    return ncclSystemError;
  }
  if (d->mr_local || nof_g.reg_always || type == NCCL_PTR_CUDA) {
    struct iovec iov = {.iov_base = data, .iov_len = size};
    struct fi_mr_attr attr = {
        .mr_iov = &iov, .iov_count = 1, .access = FI_SEND | FI_RECV, .iface = FI_HMEM_SYSTEM};
    if (type == NCCL_PTR_CUDA) {
      attr.iface = FI_HMEM_CUDA;
      attr.device.cuda = nof_cuda_device(data);
      if (attr.device.cuda < 0) {
        NOF_WARN("net-ofi: regMr: %p is not CUDA memory known to the driver", data);
        free(m);
        return ncclInvalidArgument;
      }
    }
    int rc;
    /* Providers without FI_MR_PROV_KEY take the key from us, unique per domain: a counter. A key
     * still taken (FI_ENOKEY) is skipped. */
    for (int tries = 0;; tries++) {
      attr.requested_key = (da->mr_mode & FI_MR_PROV_KEY) ? 0 : nof_next_key(da->mr_key_size);
      rc = fi_mr_regattr(e->domain, &attr, 0, &m->mr);
      if (rc != -FI_ENOKEY || tries == 8) break;
    }
    if (rc != 0) {
      NOF_WARN("net-ofi: registering %zu bytes of %s memory at %p on %s (%s) failed: %s", size,
               type == NCCL_PTR_CUDA ? "CUDA" : "host", data, d->name, nof_g.prov,
               fi_strerror(-rc));
      free(m);
      return ncclSystemError;
    }
    if (da->mr_mode & FI_MR_ENDPOINT) {
      rc = fi_mr_bind(m->mr, &e->ep->fid, 0);
      if (rc == 0) rc = fi_mr_enable(m->mr);
      if (rc != 0) {
        NOF_WARN("net-ofi: binding a registration to its endpoint failed: %s", fi_strerror(-rc));
        fi_close(&m->mr->fid);
        free(m);
        return ncclSystemError;
      }
    }
    m->desc = fi_mr_desc(m->mr);
  }
  m->next = &e->mrs;
  m->prev = e->mrs.prev;
  e->mrs.prev->next = m;
  e->mrs.prev = m;
  *mr_p = m;
  return ncclSuccess;
}

void nof_mr_close(nof_ep_t* e, nof_mr_t* m) {
  (void)e;
  m->prev->next = m->next;
  m->next->prev = m->prev;
  if (m->mr != NULL) {
    int rc = fi_close(&m->mr->fid);
    if (rc != 0) NOF_INFO(NCCL_NET, "net-ofi: closing a registration: %s", fi_strerror(-rc));
  }
  free(m);
}

ncclResult_t nof_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  nof_comm_t* c = comm;
  nof_mr_t* m = NULL;
  *mhandle = NULL;
  ncclResult_t res = nof_mr_reg(&c->e, data, size, type, &m);
  if (res == ncclSuccess) *mhandle = m;
  return res;
}

ncclResult_t nof_dereg_mr(void* comm, void* mhandle) {
  nof_comm_t* c = comm;
  if (mhandle != NULL) nof_mr_close(&c->e, mhandle);
  return ncclSuccess;
}

/* ---- liveness ------------------------------------------------------------------------------- */

ncclResult_t nof_comm_progress(nof_comm_t* c) {
  nof_ep_t* e = &c->e;
  if (e->probe_rx_op.state == NOF_REQ_DONE || e->probe_rx_op.state == NOF_REQ_FREE) {
    ncclResult_t res = nof_post_probe_rx(e); /* the peer's probes never pile up */
    if (res != ncclSuccess) return res;
  }
  nof_op_t* p = &e->probe_tx_op;
  if (p->state == NOF_REQ_DONE) {
    p->state = NOF_REQ_FREE;
    e->probe_since = 0;
    if (p->error != ncclSuccess && e->error == ncclSuccess) {
      NOF_WARN("net-ofi: the peer %s of a %s comm is gone (its endpoint no longer answers)",
               c->peer_str, c->is_send ? "send" : "receive");
      e->error = ncclRemoteError;
    }
  }
  if (e->error != ncclSuccess) return e->error;
  /* A probe being retried is forgotten once the comm is idle or something completed since it was
   * first tried (the peer is alive): the next one waits for a new quiet interval. */
  if (p->state == NOF_REQ_FREE && (c->npending == 0 || e->last_progress > e->probe_since))
    e->probe_since = 0;
  if (nof_g.probe_ms == 0 || c->npending == 0) return ncclSuccess;
  double now = nof_now();
  /* Gone: the provider refused every attempt to send the probe (FI_EAGAIN), and nothing at all
   * completed, for the whole timeout. A probe it took is waited for without limit: it may queue
   * behind data a live but busy peer has not read yet, and the provider fails it if the
   * connection breaks. */
  double quiet = e->last_progress > e->probe_since ? e->last_progress : e->probe_since;
  if (e->probe_since != 0 && p->state == NOF_REQ_FREE &&
      now - quiet > nof_g.probe_timeout_ms * 1e-3) {
    NOF_WARN(
        "net-ofi: the peer %s of a %s comm is gone (the provider refused every liveness probe "
        "for %.1f s, CHOIR_OFI_PROBE_TIMEOUT_MS)",
        c->peer_str, c->is_send ? "send" : "receive", now - quiet);
    e->error = ncclRemoteError;
    return e->error;
  }
  if (p->state != NOF_REQ_FREE) return ncclSuccess;
  /* A new probe waits for a quiet probe interval; one the provider refused (FI_EAGAIN) is tried
   * again after a tenth of it (at most 100 ms). */
  if (e->probe_since == 0) {
    if (now - e->last_progress < nof_g.probe_ms * 1e-3) return ncclSuccess;
    e->probe_since = now;
  } else if (now - e->probe_tried < (nof_g.probe_ms < 1000 ? nof_g.probe_ms : 1000) * 1e-4) {
    return ncclSuccess;
  }
  e->probe_tried = now;
  *p = (nof_op_t){.kind = NOF_OP_PROBE_TX, .state = NOF_REQ_POSTED, .ep = e};
  e->ctrl->probe_tx = e->id;
  ssize_t rc = fi_tsend(e->ep, &e->ctrl->probe_tx, sizeof(e->ctrl->probe_tx), e->ctrl_mr->desc,
                        c->peer, nof_tag(NOF_TAG_PROBE, c->peer_id, 0), &p->fictx);
  if (rc == -FI_EAGAIN) {
    p->state = NOF_REQ_FREE; /* tcp;ofi_rxm says so while it cannot (re)connect to the peer */
  } else if (rc != 0) {
    p->state = NOF_REQ_FREE;
    NOF_WARN("net-ofi: the peer %s is unreachable: %s", c->peer_str, fi_strerror((int)-rc));
    e->error = ncclRemoteError;
  }
  return e->error;
}

/* ---- transfers ------------------------------------------------------------------------------ */

static nof_op_t* nof_req_get(nof_comm_t* c) {
  if (c->npending >= NOF_MAX_REQS) return NULL;
  for (int i = 0; i < NOF_MAX_REQS; i++)
    if (c->reqs[i].state == NOF_REQ_FREE) return &c->reqs[i];
  return NULL;
}

static ncclResult_t nof_post(nof_comm_t* c, void* data, size_t size, void* mhandle,
                             void** request) {
  *request = NULL;
  if (c->e.error != ncclSuccess) return c->e.error;
  if (size > NOF_MAX_BYTES) {
    NOF_WARN("net-ofi: %s of %zu bytes exceeds maxP2pBytes (%zu)", c->is_send ? "isend" : "irecv",
             size, NOF_MAX_BYTES);
    return ncclInvalidArgument;
  }
  nof_op_t* op = nof_req_get(c);
  if (op == NULL) return ncclSuccess; /* NCCL_NET_MAX_REQUESTS in flight: call again */
  const nof_mr_t* m = mhandle;
  *op = (nof_op_t){.kind = NOF_OP_DATA, .state = NOF_REQ_POSTED, .len = size, .ep = &c->e};
  ssize_t rc;
  if (c->is_send)
    rc = fi_tsend(c->e.ep, data, size, m ? m->desc : NULL, c->peer,
                  nof_tag(NOF_TAG_DATA, c->peer_id, c->seq), &op->fictx);
  else
    rc = fi_trecv(c->e.ep, data, size, m ? m->desc : NULL, FI_ADDR_UNSPEC,
                  nof_tag(NOF_TAG_DATA, c->e.id, c->seq), 0, &op->fictx);
  if (rc == -FI_EAGAIN) {
    op->state = NOF_REQ_FREE;
    return nof_ep_progress(&c->e); /* the provider's queue is full: progress, call again */
  }
  if (rc != 0) {
    op->state = NOF_REQ_FREE;
    NOF_WARN("net-ofi: %s of %zu bytes to %s failed: %s", c->is_send ? "fi_tsend" : "fi_trecv",
             size, c->peer_str, fi_strerror((int)-rc));
    return ncclSystemError;
  }
  if (c->npending == 0) c->e.last_progress = nof_now(); /* the probe clock starts now */
  c->seq = (c->seq + 1) & NOF_SEQ_MASK;
  c->npending++;
  *request = op;
  return ncclSuccess;
}

ncclResult_t nof_isend(void* send_comm, void* data, size_t size, void* mhandle, void** request) {
  return nof_post(send_comm, data, size, mhandle, request);
}

ncclResult_t nof_irecv(void* recv_comm, int n, void** data, const size_t* sizes, void** mhandles,
                       void** request) {
  *request = NULL;
  if (n != 1) {
    NOF_WARN("net-ofi: irecv of %d buffers; maxRecvs is 1", n);
    return ncclInvalidArgument;
  }
  return nof_post(recv_comm, data[0], sizes[0], mhandles ? mhandles[0] : NULL, request);
}

ncclResult_t nof_iflush(void* recv_comm, int n, void** request) {
  (void)recv_comm;
  (void)n;
  *request = NULL; /* host memory, or a provider that orders its own writes: nothing to wait for */
  return ncclSuccess;
}

ncclResult_t nof_test(void* request, int* done, int* sizes) {
  nof_op_t* op = request;
  nof_comm_t* c = (nof_comm_t*)op->ep; /* the endpoint is the comm's first member */
  *done = 0;
  ncclResult_t res = nof_ep_progress(&c->e);
  if (res == ncclSuccess && op->state != NOF_REQ_DONE) res = nof_comm_progress(c);
  if (op->state == NOF_REQ_DONE) {
    ncclResult_t err = op->error;
    size_t len = op->len;
    op->state = NOF_REQ_FREE;
    c->npending--;
    if (err != ncclSuccess) return err;
    *done = 1;
    if (sizes != NULL) sizes[0] = (int)len;
    return ncclSuccess;
  }
  return res;
}

_Static_assert(offsetof(nof_comm_t, e) == 0, "nof_test finds the comm from its endpoint");
