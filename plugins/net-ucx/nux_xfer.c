/*
 * net-ucx transfers: comms, requests, test(), registration.
 *
 * A request is one slot of its comm (NCCL_NET_MAX_REQUESTS per comm; a post with every slot busy
 * returns a NULL request) holding one UCX request per buffer. UCX requests carry no callback:
 * test() progresses the worker and asks UCX for each one's status (ucp_request_check_status,
 * ucp_tag_recv_request_test), so nothing of ours is ever referenced by a UCX callback except an
 * endpoint's error flag (nux_epctx_t), whose lifetime nux_comm_destroy manages.
 *
 * Close: a comm first sends its peer a close notice (nux_notice_t), then flushes its endpoint
 * unless it is a send comm with sends outstanding (bounded); then every endpoint is closed with
 * UCP_EP_CLOSE_FLAG_FORCE, which completes its sends with
 * UCS_ERR_CANCELED and waits for nothing from the peer, and the comm's receives are cancelled.
 * The close waits at most CHOIR_UCX_CLOSE_TIMEOUT_MS in all, progressing the worker, then
 * releases what is left to UCX (ucp_request_free: freed by UCX when it completes) and returns.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nux.h"

static uint64_t nux_now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000u + (uint64_t)t.tv_nsec / 1000000u;
}

/* The ABI's result for a failed UCX operation. */
static ncclResult_t nux_status_result(ucs_status_t st) {
  switch (st) {
    case UCS_ERR_MESSAGE_TRUNCATED: return ncclInvalidUsage;
    case UCS_ERR_CANCELED:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_NOT_CONNECTED: return ncclRemoteError;
    default: return ncclSystemError;
  }
}

/* ---- Comms ---------------------------------------------------------------------------------- */

static void nux_ep_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  (void)ep;
  nux_epctx_t* e = arg;
  int zero = 0;
  __atomic_compare_exchange_n(&e->status, &zero, (int)status, false, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
}

ncclResult_t nux_comm_create(nux_worker_t* w, bool is_send, uint32_t comm_id, uint32_t own_id,
                             uint32_t peer_id, const void* peer_addr, const char* peer,
                             nux_comm_t** comm_p) {
  nux_comm_t* c = calloc(1, sizeof(*c));
  nux_epctx_t* e = calloc(1, sizeof(*e));
  if (c == NULL || e == NULL) {
    free(c);
    free(e);
    NUX_WARN("net-ucx: out of memory creating a comm");
    return ncclSystemError;
  }
  c->is_send = is_send;
  c->comm_id = comm_id;
  c->notice.own_id = own_id;
  c->notice.peer_id = peer_id;
  c->epctx = e;
  snprintf(c->peer, sizeof(c->peer), "%s", peer);
  ucp_ep_params_t p = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = peer_addr};
  if (nux_g.knobs.peer_errors) {
    p.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    p.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    p.err_handler.cb = nux_ep_error;
    p.err_handler.arg = e;
  }
  pthread_mutex_lock(&w->lock);
  ucs_status_t st = ucp_ep_create(w->ucp, &p, &c->ep);
  if (st == UCS_OK) {
    w->refs++;
    ucp_request_param_t np = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
    void* h = ucp_tag_recv_nbx(w->ucp, &e->notice_in, sizeof(e->notice_in),
                               nux_tag_notice(own_id), NUX_TAG_MASK, &np);
    if (h == NULL || UCS_PTR_IS_ERR(h))
      NUX_WARN(
          "net-ucx: posting the close-notice receive of a comm with %s failed: %s; this comm "
          "will not notice its peer's orderly close",
          peer, h == NULL ? "no request" : ucs_status_string(UCS_PTR_STATUS(h)));
    else
      c->notice.recv_req = h;
    /* The flush completes once UCX has wired the endpoint up; connect and accept wait for it
     * (nux_comm_wired). */
    ucp_request_param_t fp = {.op_attr_mask = 0};
    h = ucp_ep_flush_nbx(c->ep, &fp);
    if (UCS_PTR_IS_ERR(h))
      c->wire_status = UCS_PTR_STATUS(h);
    else
      c->notice.wire_req = h;
  }
  pthread_mutex_unlock(&w->lock);
  if (st != UCS_OK) {
    NUX_WARN(
        "net-ucx: creating an endpoint to %s on %s failed: %s (no common UCX transport? "
        "UCX_TLS=%s)",
        peer, nux_g.dev[w->dev].name, ucs_status_string(st),
        getenv("UCX_TLS") ? getenv("UCX_TLS") : "(unset)");
    free(c);
    free(e);
    return ncclSystemError;
  }
  c->worker = w;
  NUX_INFO(NCCL_NET, "net-ucx: %s comm with %s on %s, tag space %u", is_send ? "send" : "receive",
           c->peer, nux_g.dev[w->dev].name, comm_id);
  *comm_p = c;
  return ncclSuccess;
}

/* Frees the endpoint's wireup flush once it completed, keeping a failure in wire_status;
 * whether it is still in flight (w->lock held). */
static bool nux_wire_pending(nux_comm_t* c) {
  void* h = c->notice.wire_req;
  if (h == NULL) return false;
  ucs_status_t st = ucp_request_check_status(h);
  if (st == UCS_INPROGRESS) return true;
  ucp_request_free(h);
  c->notice.wire_req = NULL;
  if (st != UCS_OK) c->wire_status = st;
  return false;
}

int nux_comm_wired(nux_comm_t* c) {
  nux_worker_t* w = c->worker;
  pthread_mutex_lock(&w->lock);
  (void)nux_wire_pending(c);
  int failed = __atomic_load_n(&c->epctx->status, __ATOMIC_ACQUIRE);
  if (failed != 0 && c->wire_status == UCS_OK) c->wire_status = (ucs_status_t)failed;
  int r = c->wire_status != UCS_OK ? -1 : c->notice.wire_req != NULL ? 0 : 1;
  pthread_mutex_unlock(&w->lock);
  return r;
}

/* Whether a pending UCX request has completed without error (w->lock held). */
static bool nux_ucx_ok(void* h) { return h != NULL && ucp_request_check_status(h) == UCS_OK; }

/* Messages of c that completed without error, tested or not (w->lock held). */
static uint64_t nux_comm_done(const nux_comm_t* c) {
  uint64_t n = c->notice.done;
  for (int i = 0; i < NUX_MAX_REQS; i++)
    for (int k = 0; c->reqs[i].used && k < c->reqs[i].n; k++) n += nux_ucx_ok(c->reqs[i].ucx[k]);
  return n;
}

/* Picks up the peer's close notice if it came in (w->lock held, worker progressed). A comm in
 * use has no wireup flush left: connect and accept hand it out once the flush is done. */
static void nux_notice_poll(nux_comm_t* c) {
  nux_notice_t* nt = &c->notice;
  if (nt->recv_req == NULL) return;
  ucs_status_t st = ucp_request_check_status(nt->recv_req);
  if (st == UCS_INPROGRESS) return;
  ucp_request_free(nt->recv_req);
  nt->recv_req = NULL;
  if (st != UCS_OK) return; /* cancelled or failed: the endpoint's error flag tells the rest */
  nt->peer_closed = true;
  NUX_INFO(NCCL_NET, "net-ucx: the %s comm's peer %s closed after %llu messages",
           c->is_send ? "send" : "receive", c->peer,
           (unsigned long long)c->epctx->notice_in);
}

/* Waits for h (bounded by deadline, progressing the worker, w->lock held); frees it. */
static void nux_wait_free(nux_worker_t* w, void* h, uint64_t deadline) {
  while (h != NULL && !UCS_PTR_IS_ERR(h)) {
    ucp_worker_progress(w->ucp);
    if (ucp_request_check_status(h) != UCS_INPROGRESS || nux_now_ms() >= deadline) {
      ucp_request_free(h);
      return;
    }
    pthread_mutex_unlock(&w->lock);
    sched_yield();
    pthread_mutex_lock(&w->lock);
  }
}

void nux_comm_destroy(nux_comm_t* c) {
  nux_worker_t* w = c->worker;
  pthread_mutex_lock(&w->lock);
  uint64_t deadline = nux_now_ms() + (uint64_t)nux_g.knobs.close_timeout_ms;
  bool failed = __atomic_load_n(&c->epctx->status, __ATOMIC_ACQUIRE) != 0;
  /* Count before anything is cancelled: what was cancelled was not delivered. */
  uint64_t done = nux_comm_done(c);
  bool outstanding = false;
  for (int i = 0; i < NUX_MAX_REQS; i++) {
    nux_req_t* r = &c->reqs[i];
    if (!r->used) continue;
    for (int k = 0; k < r->n; k++) {
      if (r->ucx[k] == NULL) continue;
      outstanding = true;
      if (!c->is_send) ucp_request_cancel(w->ucp, r->ucx[k]);
    }
  }
  nux_notice_poll(c);
  if (c->notice.recv_req != NULL) ucp_request_cancel(w->ucp, c->notice.recv_req);
  if (!failed && c->notice.peer_id != 0 && !c->notice.peer_closed) {
    /* The close notice: eager and tiny, normally out at once. */
    c->epctx->notice_out = done;
    ucp_request_param_t np = {.op_attr_mask = 0};
    void* h = ucp_tag_send_nbx(c->ep, &c->epctx->notice_out, sizeof(c->epctx->notice_out),
                               nux_tag_notice(c->notice.peer_id), &np);
    if (UCS_PTR_IS_ERR(h))
      NUX_INFO(NCCL_NET, "net-ucx: the close notice to %s failed: %s", c->peer,
               ucs_status_string(UCS_PTR_STATUS(h)));
    else
      nux_wait_free(w, h, deadline);
  }
  if (!failed && !(c->is_send && outstanding)) {
    /* Flush what was sent (the notice, and a send comm's eager messages whose requests completed
     * while their bytes still sat in the transport), so that the forced close below drops none
     * of it. A flush needs the peer to progress its worker (it does while it closes or polls
     * too); a peer that has stopped doing so costs at most the timeout. */
    ucp_request_param_t fp = {.op_attr_mask = 0};
    nux_wait_free(w, ucp_ep_flush_nbx(c->ep, &fp), deadline);
  }
  /* Force: outstanding sends complete with UCS_ERR_CANCELED, nothing waits for the peer (both
   * sides use UCP_ERR_HANDLING_MODE_PEER, which makes this safe for the peer's endpoint). */
  ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                            .flags = UCP_EP_CLOSE_FLAG_FORCE};
  void* close_req = ucp_ep_close_nbx(c->ep, &cp);
  if (UCS_PTR_IS_ERR(close_req)) close_req = NULL; /* closed (with an error): nothing to wait */
  for (;;) {
    ucp_worker_progress(w->ucp);
    bool busy = false;
    if (close_req != NULL) {
      if (ucp_request_check_status(close_req) != UCS_INPROGRESS) {
        ucp_request_free(close_req);
        close_req = NULL;
      } else {
        busy = true;
      }
    }
    if (nux_wire_pending(c)) busy = true;
    if (c->notice.recv_req != NULL) {
      if (ucp_request_check_status(c->notice.recv_req) != UCS_INPROGRESS) {
        ucp_request_free(c->notice.recv_req);
        c->notice.recv_req = NULL;
      } else {
        busy = true;
      }
    }
    for (int i = 0; i < NUX_MAX_REQS; i++) {
      nux_req_t* r = &c->reqs[i];
      for (int k = 0; r->used && k < r->n; k++) {
        if (r->ucx[k] == NULL) continue;
        if (ucp_request_check_status(r->ucx[k]) != UCS_INPROGRESS) {
          ucp_request_free(r->ucx[k]);
          r->ucx[k] = NULL;
        } else {
          busy = true;
        }
      }
    }
    if (!busy) break;
    if (nux_now_ms() >= deadline) {
      NUX_INFO(NCCL_NET,
               "net-ucx: closing the %s comm with %s: not done after %d ms "
               "(CHOIR_UCX_CLOSE_TIMEOUT_MS); leaving the rest to UCX",
               c->is_send ? "send" : "receive", c->peer, nux_g.knobs.close_timeout_ms);
      break;
    }
    /* Let other comms of this worker in between rounds. */
    pthread_mutex_unlock(&w->lock);
    sched_yield();
    pthread_mutex_lock(&w->lock);
  }
  bool abandoned = close_req != NULL || c->notice.recv_req != NULL;
  if (close_req != NULL) ucp_request_free(close_req);
  if (c->notice.wire_req != NULL) ucp_request_free(c->notice.wire_req);
  if (c->notice.recv_req != NULL) ucp_request_free(c->notice.recv_req);
  for (int i = 0; i < NUX_MAX_REQS; i++)
    for (int k = 0; c->reqs[i].used && k < c->reqs[i].n; k++)
      if (c->reqs[i].ucx[k] != NULL) ucp_request_free(c->reqs[i].ucx[k]);
  /* An endpoint still closing may yet call its error handler; a receive still in UCX's hands may
   * yet write the notice buffer. */
  if (abandoned)
    nux_worker_orphan(w, c->epctx);
  else
    free(c->epctx);
  pthread_mutex_unlock(&w->lock);
  nux_worker_put(w);
  free(c);
}

ncclResult_t nux_close_send(void* send_comm) {
  if (send_comm != NULL) nux_comm_destroy(send_comm);
  return ncclSuccess;
}

ncclResult_t nux_close_recv(void* recv_comm) {
  if (recv_comm != NULL) nux_comm_destroy(recv_comm);
  return ncclSuccess;
}

/* The comm's peer error, if its endpoint failed: ncclRemoteError, WARNed once. A receive comm's
 * endpoint also fails when its sender closes in an orderly way (the connection goes), and the
 * sender's last messages and close notice may still be on their way: a receive comm waits
 * NUX_NOTICE_GRACE_MS from the failure for the notice, and once the notice is in, its count
 * decides (nux_test), not the endpoint. */
#define NUX_NOTICE_GRACE_MS 250
static ncclResult_t nux_comm_error(nux_comm_t* c) {
  int st = __atomic_load_n(&c->epctx->status, __ATOMIC_ACQUIRE);
  if (st == 0) return ncclSuccess;
  if (!c->is_send) {
    if (c->notice.peer_closed) return ncclSuccess;
    uint64_t now = nux_now_ms();
    if (c->err_since_ms == 0) c->err_since_ms = now;
    if (now - c->err_since_ms < NUX_NOTICE_GRACE_MS) return ncclSuccess;
  }
  if (!c->error_logged) {
    c->error_logged = true;
    NUX_WARN("net-ucx: %s connection with %s failed: %s; its requests will not complete",
             c->is_send ? "send" : "receive", c->peer, ucs_status_string((ucs_status_t)st));
  }
  return ncclRemoteError;
}

/* ---- Requests ------------------------------------------------------------------------------- */

static nux_req_t* nux_req_alloc(nux_comm_t* c) {
  if (c->nused >= NUX_MAX_REQS) return NULL;
  for (int i = 0; i < NUX_MAX_REQS; i++) {
    nux_req_t* r = &c->reqs[i];
    if (r->used) continue;
    memset(r, 0, sizeof(*r));
    r->comm = c;
    r->used = true;
    c->nused++;
    return r;
  }
  return NULL;
}

static void nux_req_release(nux_req_t* r) {
  r->used = false;
  r->comm->nused--;
}

typedef struct {
  ucp_mem_h memh; /* NULL: placeholder (CHOIR_UCX_REG=0) */
  ucp_context_h ucp;
} nux_mr_t;

static void nux_param_memh(ucp_request_param_t* p, void* mhandle) {
  const nux_mr_t* mr = mhandle;
  if (mr != NULL && mr->memh != NULL) {
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p->memh = mr->memh;
  }
}

ncclResult_t nux_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request) {
  nux_comm_t* c = send_comm;
  nux_worker_t* w = c->worker;
  *request = NULL;
  if (size > nux_max_bytes()) {
    NUX_WARN("net-ucx: isend of %zu bytes exceeds maxP2pBytes %zu (CHOIR_UCX_MAX_MIB raises it)",
             size, nux_max_bytes());
    return ncclInvalidArgument;
  }
  ncclResult_t res = nux_comm_error(c);
  if (res != ncclSuccess) return res;
  nux_req_t* r = nux_req_alloc(c);
  pthread_mutex_lock(&w->lock);
  if (r == NULL) { /* every slot busy: the caller retries */
    nux_worker_progress_locked(w);
    pthread_mutex_unlock(&w->lock);
    return ncclSuccess;
  }
  ucp_request_param_t p = {.op_attr_mask = 0};
  nux_param_memh(&p, mhandle);
  void* h = ucp_tag_send_nbx(c->ep, data, size, nux_tag_make(c->comm_id, tag), &p);
  if (UCS_PTR_IS_ERR(h)) {
    pthread_mutex_unlock(&w->lock);
    nux_req_release(r);
    ucs_status_t st = UCS_PTR_STATUS(h);
    NUX_WARN("net-ucx: send of %zu bytes to %s failed: %s", size, c->peer, ucs_status_string(st));
    return nux_status_result(st);
  }
  r->n = 1;
  r->len[0] = size;
  r->ucx[0] = h;
  r->pending = h != NULL;
  if (h == NULL) c->notice.done++; /* completed in place */
  nux_worker_progress_locked(w);
  pthread_mutex_unlock(&w->lock);
  *request = r;
  return ncclSuccess;
}

ncclResult_t nux_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                       void** mhandles, void** request) {
  nux_comm_t* c = recv_comm;
  nux_worker_t* w = c->worker;
  *request = NULL;
  if (n < 1 || n > nux_g.knobs.max_recvs) {
    NUX_WARN("net-ucx: irecv of %d buffers; this plugin's maxRecvs is %d", n,
             nux_g.knobs.max_recvs);
    return ncclInvalidArgument;
  }
  pthread_mutex_lock(&w->lock);
  nux_notice_poll(c);
  ncclResult_t res = nux_comm_error(c);
  if (res != ncclSuccess) {
    pthread_mutex_unlock(&w->lock);
    return res;
  }
  nux_req_t* r = nux_req_alloc(c);
  if (r == NULL) {
    nux_worker_progress_locked(w);
    pthread_mutex_unlock(&w->lock);
    return ncclSuccess;
  }
  r->n = n;
  for (int i = 0; i < n; i++) {
    /* Always a request: UCX 1.13 can complete a receive from its unexpected queue at once
     * without filling recv_info.tag_info, which loses the length (seen between network
     * namespaces); ucp_tag_recv_request_test reports it reliably. */
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
    nux_param_memh(&p, mhandles != NULL ? mhandles[i] : NULL);
    r->posted[i] = sizes[i];
    void* h =
        ucp_tag_recv_nbx(w->ucp, data[i], sizes[i],
                         nux_tag_make(c->comm_id, tags != NULL ? tags[i] : 0), NUX_TAG_MASK, &p);
    if (h == NULL || UCS_PTR_IS_ERR(h)) {
      /* NULL cannot come back with UCP_OP_ATTR_FLAG_NO_IMM_CMPL; it would hide the length. */
      ucs_status_t st = h == NULL ? UCS_ERR_NO_PROGRESS : UCS_PTR_STATUS(h);
      /* Buffers already posted stay with the request slot until the comm closes. */
      r->error = h == NULL ? ncclInternalError : nux_status_result(st);
      r->n = i;
      pthread_mutex_unlock(&w->lock);
      NUX_WARN("net-ucx: posting a receive of %zu bytes from %s failed: %s", sizes[i], c->peer,
               ucs_status_string(st));
      return r->error;
    }
    r->ucx[i] = h;
    r->pending++;
  }
  nux_worker_progress_locked(w);
  pthread_mutex_unlock(&w->lock);
  *request = r;
  return ncclSuccess;
}

ncclResult_t nux_iflush(void* recv_comm, int n, void** request) {
  (void)recv_comm;
  (void)n;
  *request = NULL; /* host memory only: nothing to make visible */
  return ncclSuccess;
}

ncclResult_t nux_test(void* request, int* done, int* sizes) {
  nux_req_t* r = request;
  nux_comm_t* c = r->comm;
  nux_worker_t* w = c->worker;
  *done = 0;
  if (r->error != ncclSuccess) return r->error;
  pthread_mutex_lock(&w->lock);
  nux_worker_progress_locked(w);
  for (int i = 0; i < r->n; i++) {
    void* h = r->ucx[i];
    if (h == NULL) continue;
    ucs_status_t st;
    if (c->is_send) {
      st = ucp_request_check_status(h);
    } else {
      ucp_tag_recv_info_t info;
      st = ucp_tag_recv_request_test(h, &info);
      if (st == UCS_OK) r->len[i] = info.length;
    }
    if (st == UCS_INPROGRESS) continue;
    ucp_request_free(h);
    r->ucx[i] = NULL;
    r->pending--;
    if (st == UCS_OK) c->notice.done++;
    if (st != UCS_OK && r->error == ncclSuccess) {
      r->error = nux_status_result(st);
      c->error_logged = true;
      if (st == UCS_ERR_MESSAGE_TRUNCATED)
        NUX_WARN(
            "net-ucx: message truncated: %s sent more than the %zu bytes the matching "
            "receive posted (ncclInvalidUsage)",
            c->peer, r->posted[i]);
      else
        NUX_WARN("net-ucx: %s with %s failed: %s", c->is_send ? "send" : "receive", c->peer,
                 ucs_status_string(st));
    }
  }
  nux_notice_poll(c);
  if (r->pending > 0 && r->error == ncclSuccess) {
    if (c->notice.peer_closed && nux_comm_done(c) >= c->epctx->notice_in) {
      r->error = ncclRemoteError;
      if (!c->error_logged) {
        c->error_logged = true;
        NUX_WARN(
            "net-ucx: the peer %s closed its comm after %llu messages and all of them are in; "
            "this %s can never complete",
            c->peer, (unsigned long long)c->epctx->notice_in, c->is_send ? "send" : "receive");
      }
    }
  }
  pthread_mutex_unlock(&w->lock);
  if (r->error != ncclSuccess) return r->error;
  if (r->pending > 0) return nux_comm_error(c);
  *done = 1;
  if (sizes != NULL)
    for (int i = 0; i < r->n; i++) sizes[i] = (int)r->len[i];
  nux_req_release(r);
  return ncclSuccess;
}

/* ---- Memory registration -------------------------------------------------------------------- */

static nux_mr_t nux_mr_placeholder;

ncclResult_t nux_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  nux_comm_t* c = comm;
  *mhandle = NULL;
  if (type != NCCL_PTR_HOST) {
    NUX_WARN("net-ucx: regMr of memory type %d; this plugin supports host memory only (%d)", type,
             NCCL_PTR_HOST);
    return ncclInvalidArgument;
  }
  if (!nux_g.knobs.reg) {
    *mhandle = &nux_mr_placeholder;
    return ncclSuccess;
  }
  nux_mr_t* mr = calloc(1, sizeof(*mr));
  if (mr == NULL) {
    NUX_WARN("net-ucx: regMr: out of memory");
    return ncclSystemError;
  }
  mr->ucp = nux_g.dev[c->worker->dev].ucp;
  ucp_mem_map_params_t p = {
      .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
      .address = data,
      .length = size};
  ucs_status_t st = ucp_mem_map(mr->ucp, &p, &mr->memh);
  if (st != UCS_OK) {
    NUX_WARN("net-ucx: registering %zu bytes at %p on %s failed: %s", size, data,
             nux_g.dev[c->worker->dev].name, ucs_status_string(st));
    free(mr);
    return ncclSystemError;
  }
  *mhandle = mr;
  return ncclSuccess;
}

ncclResult_t nux_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle) {
  (void)comm;
  (void)data;
  (void)size;
  (void)offset;
  (void)fd;
  *mhandle = NULL;
  NUX_WARN("net-ucx: regMrDmaBuf (memory type %d): dma-buf is not supported", type);
  return ncclInvalidArgument;
}

ncclResult_t nux_dereg_mr(void* comm, void* mhandle) {
  (void)comm;
  nux_mr_t* mr = mhandle;
  if (mr == NULL || mr == &nux_mr_placeholder) return ncclSuccess;
  ucs_status_t st = ucp_mem_unmap(mr->ucp, mr->memh);
  free(mr);
  if (st != UCS_OK) {
    NUX_WARN("net-ucx: deregistering memory failed: %s", ucs_status_string(st));
    return ncclSystemError;
  }
  return ncclSuccess;
}
