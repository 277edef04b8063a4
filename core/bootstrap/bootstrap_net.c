/*
 * The rank side's message engine: direct connections between ranks, the queue of arrived
 * messages, and the progress rule that lets several threads use one bootstrap.
 *
 * Progress: at most one thread at a time holds the polling role (bs->polling). It poll()s the
 * listening socket and every incoming connection, reads what is there, and appends complete
 * messages to the queue; then it gives the role back, so waiters take turns. Other threads waiting
 * for a message sleep on bs->cond, which is broadcast after every round. A thread blocked sending
 * (the peer's socket buffer is full) takes the polling role when it is free, and otherwise polls
 * only its own socket: either way incoming data keeps being drained, so two ranks sending large
 * messages to each other cannot deadlock.
 *
 * Invariants: `ins`, `in_from` and `pfds` are touched only by the holder of the polling role;
 * the queue, `peer_gone` and `polling` only under bs->lock; an out connection only by the thread
 * that set its `busy` flag (under the lock).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bootstrap_internal.h"

/* bs_in_t.end_err when we closed a connection after its one expected message (the root's). */
#define BS_END_DONE (-2)
/* bs_in_t.end_err when we dropped a connection for a malformed message. */
#define BS_END_DROPPED (-1)
/* Messages read from one connection in one round at most, so that one busy peer cannot starve
 * the others. */
#define BS_ROUND_MSGS 64
/* Silent connections from strangers tolerated on a rank's listening socket (beyond one per rank).
 */
#define BS_MAX_STRANGERS 64

uint64_t bootstrap_timeout_ms(void) {
  static int warned;
  int64_t s = param_int(PARAM_BOOTSTRAP_TIMEOUT);
  if (s <= 0) {
    int64_t def = param_desc(PARAM_BOOTSTRAP_TIMEOUT)->def_int;
    if (__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED) == 0)
      WARN("CHOIR_BOOTSTRAP_TIMEOUT=%lld is not a positive number of seconds; using %lld",
           (long long)s, (long long)def);
    s = def;
  }
  return (uint64_t)s * 1000;
}

const char* bs_peer_str(const bootstrap_t* bs, int peer, char* buf, size_t size) {
  char a[SOCK_ADDR_STRLEN];
  if (peer == bs->nranks)
    snprintf(buf, size, "the bootstrap root (%s)", sock_addr_str(&bs->root_addr, a, sizeof(a)));
  else if (peer >= 0 && peer < bs->nranks && sock_addr_valid(&bs->addrs[peer], false))
    snprintf(buf, size, "rank %d (%s)", peer, sock_addr_str(&bs->addrs[peer], a, sizeof(a)));
  else
    snprintf(buf, size, "rank %d", peer);
  return buf;
}

static const char* bs_what(uint16_t kind, uint64_t tag, uint16_t step, char* buf, size_t size) {
  switch (kind) {
    case BS_MSG_USER: snprintf(buf, size, "the message with tag %d", (int)(uint32_t)tag); break;
    case BS_MSG_COLL:
      if (tag == 0)
        snprintf(buf, size, "step %u of the address exchange", (unsigned)step);
      else
        snprintf(buf, size, "step %u of all-gather/barrier #%llu", (unsigned)step,
                 (unsigned long long)tag);
      break;
    case BS_MSG_SPLIT:
      snprintf(buf, size, "step %u of the split with tag 0x%llx", (unsigned)step,
               (unsigned long long)tag);
      break;
    case BS_MSG_ROOT_REPLY: snprintf(buf, size, "the peer list"); break;
    case BS_MSG_WATCH: snprintf(buf, size, "the liveness address"); break;
    default: snprintf(buf, size, "a message of kind %u", (unsigned)kind); break;
  }
  return buf;
}

static const char* bs_end_reason(int err, char* buf, size_t size) {
  if (err == 0) return "the process exited or closed this bootstrap";
  if (err == BS_END_DROPPED) return "it sent a malformed message";
  return strerror_r(err, buf, size);
}

/* ---- Creation and destruction --------------------------------------------------------------- */

ncclResult_t bs_create(int rank, int nranks, uint64_t tag, volatile uint32_t* abort_flag,
                       const sock_addr_t* listen_addr, bootstrap_t** bs_p) {
  bootstrap_t* bs = NULL;
  ncclResult_t res = ncclSuccess;
  CHECK(MEM_CALLOC(&bs, 1));
  pthread_mutex_init(&bs->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&bs->cond, &ca);
  pthread_condattr_destroy(&ca);
  bs->rank = rank;
  bs->nranks = nranks;
  bs->tag = tag;
  bs->timeout_ms = bootstrap_timeout_ms();
  bs->abort_flag = abort_flag;
  bs->listener.fd = -1;
  bs->tailp = &bs->head;
  bs->coll_seq = 1;
  CHECK_GOTO(MEM_CALLOC(&bs->addrs, (size_t)nranks), res, err_close);
  CHECK_GOTO(MEM_CALLOC(&bs->out, (size_t)nranks), res, err_close);
  for (int i = 0; i < nranks; i++) bs->out[i].sock.fd = -1;
  CHECK_GOTO(MEM_CALLOC(&bs->peer_gone, (size_t)nranks + 1), res, err_close);
  CHECK_GOTO(MEM_CALLOC(&bs->peer_gone_err, (size_t)nranks + 1), res, err_close);
  CHECK_GOTO(MEM_CALLOC(&bs->in_from, (size_t)nranks), res, err_close);
  sock_addr_t la = *listen_addr;
  sock_addr_set_port(&la, 0);
  char name[SOCK_NAME_MAX];
  snprintf(name, sizeof(name), "bootstrap rank %d", rank);
  CHECK_GOTO(sock_listen(&la, name, &bs->listener), res, err_close);
  bs->addrs[rank] = bs->listener.addr;
  *bs_p = bs;
  return ncclSuccess;
err_close:
  bootstrap_close(bs);
  return res;
}

static void bs_in_free(bs_in_t* in) {
  sock_close(&in->sock);
  free(in->msg);
  free(in);
}

ncclResult_t bootstrap_close(bootstrap_t* bs) {
  if (bs == NULL) return ncclSuccess;
  int unread = 0;
  for (bs_msg_t* m = bs->head; m != NULL;) {
    bs_msg_t* next = m->next;
    free(m);
    m = next;
    unread++;
  }
  if (unread > 0)
    INFO(NCCL_BOOTSTRAP, "bootstrap rank %d: closing with %d message(s) never received", bs->rank,
         unread);
  for (int i = 0; i < bs->nins; i++) bs_in_free(bs->ins[i]);
  if (bs->out != NULL)
    for (int i = 0; i < bs->nranks; i++) sock_close(&bs->out[i].sock);
  sock_close(&bs->listener);
  free(bs->ins);
  free(bs->pfds);
  free(bs->in_from);
  free(bs->peer_gone_err);
  free(bs->peer_gone);
  free(bs->out);
  free(bs->addrs);
  pthread_cond_destroy(&bs->cond);
  pthread_mutex_destroy(&bs->lock);
  free(bs);
  return ncclSuccess;
}

/* ---- Reading (polling role only) ------------------------------------------------------------ */

static void bs_in_end(bs_in_t* in, int err) {
  in->ended = true;
  in->end_err = err;
}

static void bs_in_who(const bootstrap_t* bs, const bs_in_t* in, char* buf, size_t size) {
  if (in->peer >= 0) {
    bs_peer_str(bs, in->peer, buf, size);
  } else {
    char a[SOCK_ADDR_STRLEN];
    snprintf(buf, size, "a connection from %s", sock_addr_str(&in->sock.addr, a, sizeof(a)));
  }
}

/* Check a header that just arrived on `in`; false: the connection must be dropped (WARNed). */
static bool bs_in_header_ok(bootstrap_t* bs, bs_in_t* in) {
  const bs_hdr_t* h = &in->hdr;
  char who[BS_PEER_STRLEN];
  bs_in_who(bs, in, who, sizeof(who));
  if (h->magic != BS_WIRE_MAGIC) {
    WARN(
        "bootstrap rank %d: %s sent data that is not a bootstrap message (magic 0x%08x); "
        "dropping the connection",
        bs->rank, who, h->magic);
    return false;
  }
  if (in->peer < 0) {
    /* The first message says who the connection is from: a rank of this bootstrap, or the root
     * answering bootstrap_init. Anything else is a stranger. */
    uint64_t join_tag = __atomic_load_n(&bs->join_tag, __ATOMIC_ACQUIRE);
    if (h->kind == BS_MSG_CONN && h->tag == bs->tag && h->size == sizeof(bs_conn_t)) return true;
    if (h->kind == BS_MSG_ROOT_REPLY && join_tag != 0 && h->tag == join_tag &&
        h->size >= sizeof(bs_reply_t) &&
        h->size <= sizeof(bs_reply_t) + 64 * sizeof(bs_peer_entry_t) + BS_REASON_MAX) {
      in->peer = bs->nranks;
      return true;
    }
    WARN(
        "bootstrap rank %d: %s opened with an unexpected message (kind %u, tag 0x%llx, %llu "
        "bytes): not a rank of this communicator; dropping it",
        bs->rank, who, (unsigned)h->kind, (unsigned long long)h->tag, (unsigned long long)h->size);
    return false;
  }
  if ((h->kind != BS_MSG_USER && h->kind != BS_MSG_COLL && h->kind != BS_MSG_SPLIT &&
       h->kind != BS_MSG_WATCH) ||
      h->size > BS_MAX_PAYLOAD) {
    WARN(
        "bootstrap rank %d: %s sent a malformed message (kind %u, %llu bytes); closing its "
        "connection",
        bs->rank, who, (unsigned)h->kind, (unsigned long long)h->size);
    return false;
  }
  return true;
}

/* A whole message arrived on `in`: identify the connection, or queue the message. */
static void bs_in_complete(bootstrap_t* bs, bs_in_t* in, bs_msg_t*** tail) {
  bs_msg_t* m = in->msg;
  in->msg = NULL;
  in->hdr_got = 0;
  if (in->peer < 0) {
    bs_conn_t c;
    memcpy(&c, m->data, sizeof(c));
    free(m);
    char who[BS_PEER_STRLEN];
    bs_in_who(bs, in, who, sizeof(who));
    if (c.dst != bs->rank || c.nranks != bs->nranks || c.src < 0 || c.src >= bs->nranks ||
        c.src == bs->rank) {
      WARN(
          "bootstrap rank %d of %d: %s claims to be rank %d of %d writing to rank %d; dropping "
          "it",
          bs->rank, bs->nranks, who, c.src, c.nranks, c.dst);
      bs_in_end(in, BS_END_DROPPED);
      return;
    }
    if (bs->in_from[c.src]) {
      WARN("bootstrap rank %d: %s claims to be rank %d, which is already connected; dropping it",
           bs->rank, who, c.src);
      bs_in_end(in, BS_END_DROPPED);
      return;
    }
    bs->in_from[c.src] = true;
    in->peer = c.src;
    return;
  }
  m->next = NULL;
  m->peer = in->peer;
  m->kind = in->hdr.kind;
  m->step = in->hdr.step;
  m->tag = in->hdr.tag;
  m->size = (size_t)in->hdr.size;
  **tail = m;
  *tail = &m->next;
  /* The root sends one message per connection. */
  if (in->peer == bs->nranks) bs_in_end(in, BS_END_DONE);
}

static void bs_in_read(bootstrap_t* bs, bs_in_t* in, bs_msg_t*** tail) {
  for (int budget = BS_ROUND_MSGS; !in->ended && budget > 0;) {
    size_t n = 0;
    int err = 0;
    ncclResult_t res;
    if (in->hdr_got < sizeof(in->hdr)) {
      res = sock_try_recv(&in->sock, (char*)&in->hdr + in->hdr_got, sizeof(in->hdr) - in->hdr_got,
                          &n, &err);
      if (res != ncclSuccess) {
        bs_in_end(in, res == ncclRemoteError ? err : EIO);
        return;
      }
      if (n == 0) return;
      in->hdr_got += n;
      if (in->hdr_got < sizeof(in->hdr)) continue;
      if (!bs_in_header_ok(bs, in)) {
        bs_in_end(in, BS_END_DROPPED);
        return;
      }
      in->msg = (bs_msg_t*)malloc(sizeof(bs_msg_t) + (size_t)in->hdr.size);
      if (in->msg == NULL) {
        char who[BS_PEER_STRLEN];
        bs_in_who(bs, in, who, sizeof(who));
        WARN("bootstrap rank %d: out of memory for a %llu-byte message from %s", bs->rank,
             (unsigned long long)in->hdr.size, who);
        bs_in_end(in, ENOMEM);
        return;
      }
      in->got = 0;
    }
    if (in->got < in->hdr.size) {
      res = sock_try_recv(&in->sock, in->msg->data + in->got, (size_t)in->hdr.size - in->got, &n,
                          &err);
      if (res != ncclSuccess) {
        bs_in_end(in, res == ncclRemoteError ? err : EIO);
        return;
      }
      if (n == 0) return;
      in->got += n;
      if (in->got < in->hdr.size) continue;
    }
    bs_in_complete(bs, in, tail);
    budget--;
  }
}

static ncclResult_t bs_in_add(bootstrap_t* bs, const sock_t* s) {
  if (bs->nins == bs->cap_ins) {
    int cap = bs->cap_ins ? 2 * bs->cap_ins : 16;
    bs_in_t** ins = (bs_in_t**)realloc(bs->ins, (size_t)cap * sizeof(*ins));
    if (ins == NULL) {
      WARN("bootstrap rank %d: out of memory for %d connections", bs->rank, cap);
      return ncclSystemError;
    }
    bs->ins = ins;
    bs->cap_ins = cap;
  }
  /* Connections that have not said who they are: at most one per rank is legitimate (and only
   * briefly, a rank introduces itself at once), so past nranks + BS_MAX_STRANGERS the oldest is
   * a stranger holding a descriptor; drop it. */
  int unknown = 0, oldest = -1;
  for (int i = 0; i < bs->nins; i++) {
    if (bs->ins[i]->peer >= 0 || bs->ins[i]->ended) continue;
    if (oldest < 0) oldest = i;
    unknown++;
  }
  if (unknown >= bs->nranks + BS_MAX_STRANGERS) {
    char a[SOCK_ADDR_STRLEN];
    WARN("bootstrap rank %d: %d connections have not said who they are; dropping the one from %s",
         bs->rank, unknown, sock_addr_str(&bs->ins[oldest]->sock.addr, a, sizeof(a)));
    bs_in_end(bs->ins[oldest], BS_END_DROPPED);
  }
  bs_in_t* in = NULL;
  CHECK(MEM_CALLOC(&in, 1));
  in->sock = *s;
  in->peer = -1;
  bs->ins[bs->nins++] = in;
  return ncclSuccess;
}

/* One round of the polling role, run without the lock: wait up to ms for data on the listening
 * socket and the incoming connections (and for want_fd to be writable), then read what came.
 * Complete messages are chained from *tail. */
static ncclResult_t bs_poll_round(bootstrap_t* bs, int ms, int want_fd, bs_msg_t*** tail) {
  int nins = bs->nins;
  int n = nins + 1 + (want_fd >= 0 ? 1 : 0);
  if (n > bs->cap_pfds) {
    struct pollfd* p = (struct pollfd*)realloc(bs->pfds, (size_t)n * 2 * sizeof(*p));
    if (p == NULL) {
      WARN("bootstrap rank %d: out of memory polling %d sockets", bs->rank, n);
      return ncclSystemError;
    }
    bs->pfds = p;
    bs->cap_pfds = n * 2;
  }
  struct pollfd* pfds = bs->pfds;
  pfds[0] = (struct pollfd){bs->listener.fd, POLLIN, 0};
  for (int i = 0; i < nins; i++) pfds[1 + i] = (struct pollfd){bs->ins[i]->sock.fd, POLLIN, 0};
  if (want_fd >= 0) pfds[n - 1] = (struct pollfd){want_fd, POLLOUT, 0};
  int r = poll(pfds, (nfds_t)n, ms);
  if (r < 0) {
    if (errno == EINTR) return ncclSuccess;
    WARN("bootstrap rank %d: poll over %d sockets failed: %m", bs->rank, n);
    return ncclSystemError;
  }
  if (r == 0) return ncclSuccess;
  for (int i = 0; i < nins; i++)
    if (pfds[1 + i].revents != 0) bs_in_read(bs, bs->ins[i], tail);
  if (pfds[0].revents != 0) {
    for (;;) {
      sock_t s;
      CHECK(sock_accept(&bs->listener, &s));
      if (s.fd < 0) break;
      ncclResult_t res = bs_in_add(bs, &s);
      if (res != ncclSuccess) {
        sock_close(&s);
        return res;
      }
    }
  }
  return ncclSuccess;
}

static void bs_cond_wait_ms(bootstrap_t* bs, int ms) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  pthread_cond_timedwait(&bs->cond, &bs->lock, &ts);
}

/* One step of progress; called with bs->lock held, returns with it held. Takes the polling role
 * when it is free; otherwise waits for the round of the thread that has it (or, with want_fd >= 0,
 * for want_fd to become writable). */
static ncclResult_t bs_progress(bootstrap_t* bs, const sock_deadline_t* dl, int want_fd) {
  int ms = sock_deadline_poll_ms(dl);
  if (bs->polling) {
    if (want_fd >= 0) {
      pthread_mutex_unlock(&bs->lock);
      struct pollfd p = {want_fd, POLLOUT, 0};
      (void)poll(&p, 1, ms);
      pthread_mutex_lock(&bs->lock);
    } else {
      bs_cond_wait_ms(bs, ms);
    }
    return ncclSuccess;
  }
  bs->polling = true;
  pthread_mutex_unlock(&bs->lock);
  bs_msg_t* head = NULL;
  bs_msg_t** tail = &head;
  ncclResult_t res = bs_poll_round(bs, ms, want_fd, &tail);
  pthread_mutex_lock(&bs->lock);
  if (head != NULL) {
    *bs->tailp = head;
    bs->tailp = tail;
  }
  int kept = 0;
  for (int i = 0; i < bs->nins; i++) {
    bs_in_t* in = bs->ins[i];
    if (!in->ended) {
      bs->ins[kept++] = in;
      continue;
    }
    if (in->peer >= 0 && in->end_err != BS_END_DONE) {
      bs->peer_gone[in->peer] = 1;
      bs->peer_gone_err[in->peer] = in->end_err;
      char who[BS_PEER_STRLEN], e[128];
      INFO(NCCL_BOOTSTRAP, "bootstrap rank %d: connection from %s ended: %s", bs->rank,
           bs_peer_str(bs, in->peer, who, sizeof(who)), bs_end_reason(in->end_err, e, sizeof(e)));
    }
    bs_in_free(in);
  }
  bs->nins = kept;
  bs->polling = false;
  pthread_cond_broadcast(&bs->cond);
  return res;
}

ncclResult_t bs_progress_once(bootstrap_t* bs, int ms) {
  sock_deadline_t dl = sock_deadline((uint64_t)ms, NULL);
  pthread_mutex_lock(&bs->lock);
  ncclResult_t res = bs_progress(bs, &dl, -1);
  pthread_mutex_unlock(&bs->lock);
  return res;
}

/* Abort and deadline of a wait on `peer` (lock held); WARNs what was awaited. */
static ncclResult_t bs_wait_check(bootstrap_t* bs, const sock_deadline_t* dl, const char* doing,
                                  int peer, uint16_t kind, uint64_t tag, uint16_t step) {
  char who[BS_PEER_STRLEN], what[96];
  if (dl->abort_flag != NULL && __atomic_load_n(dl->abort_flag, __ATOMIC_ACQUIRE) != 0) {
    WARN("bootstrap rank %d: aborted while %s %s (%s)", bs->rank, doing,
         bs_peer_str(bs, peer, who, sizeof(who)), bs_what(kind, tag, step, what, sizeof(what)));
    return ncclInternalError;
  }
  if (sock_clock_ns() < dl->end_ns) return ncclSuccess;
  if (peer == bs->nranks)
    WARN(
        "bootstrap rank %d of %d: timed out after %.3g s waiting for %s to send the peer list "
        "(CHOIR_BOOTSTRAP_TIMEOUT); is the process that created the unique id still running?",
        bs->rank, bs->nranks, (double)dl->timeout_ms / 1000.0,
        bs_peer_str(bs, peer, who, sizeof(who)));
  else
    WARN(
        "bootstrap rank %d of %d: timed out after %.3g s %s %s (%s; CHOIR_BOOTSTRAP_TIMEOUT): "
        "that rank is gone, stuck, or at a different step",
        bs->rank, bs->nranks, (double)dl->timeout_ms / 1000.0, doing,
        bs_peer_str(bs, peer, who, sizeof(who)), bs_what(kind, tag, step, what, sizeof(what)));
  return ncclRemoteError;
}

/* Wait (lock held) until the first message (peer, kind, tag, step) is queued and unlink it. */
static ncclResult_t bs_wait_msg(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag,
                                uint16_t step, const sock_deadline_t* dl, bs_msg_t** msg_p) {
  for (;;) {
    for (bs_msg_t** pp = &bs->head; *pp != NULL; pp = &(*pp)->next) {
      bs_msg_t* m = *pp;
      if (m->peer == peer && m->kind == kind && m->tag == tag && m->step == step) {
        *pp = m->next;
        if (bs->tailp == &m->next) bs->tailp = pp;
        m->next = NULL;
        *msg_p = m;
        return ncclSuccess;
      }
    }
    if (bs->peer_gone[peer]) {
      char who[BS_PEER_STRLEN], what[96], e[128];
      WARN("bootstrap rank %d: %s closed its connection before sending %s (%s)", bs->rank,
           bs_peer_str(bs, peer, who, sizeof(who)), bs_what(kind, tag, step, what, sizeof(what)),
           bs_end_reason(bs->peer_gone_err[peer], e, sizeof(e)));
      return ncclRemoteError;
    }
    CHECK(bs_wait_check(bs, dl, "waiting for", peer, kind, tag, step));
    CHECK(bs_progress(bs, dl, -1));
  }
}

/* ---- Sending and receiving ------------------------------------------------------------------ */

#define BS_IOV_MAX 4

static size_t bs_iov_total(const struct iovec* iov, int niov) {
  size_t total = 0;
  for (int i = 0; i < niov; i++) total += iov[i].iov_len;
  return total;
}

/* Write one message on the out connection to peer, whose busy flag this thread holds. */
static ncclResult_t bs_out_write(bootstrap_t* bs, int peer, bs_out_t* o, const bs_hdr_t* hdr,
                                 const struct iovec* iov, int niov, const sock_deadline_t* dl) {
  char who[BS_PEER_STRLEN], what[96];
  if (o->broken) {
    WARN("bootstrap rank %d: cannot send %s to %s: the connection failed earlier", bs->rank,
         bs_what(hdr->kind, hdr->tag, hdr->step, what, sizeof(what)),
         bs_peer_str(bs, peer, who, sizeof(who)));
    return ncclRemoteError;
  }
  struct {
    bs_hdr_t h;
    bs_conn_t c;
  } open;
  memset(&open, 0, sizeof(open));
  struct iovec v[BS_IOV_MAX + 2];
  int nv = 0;
  if (o->sock.fd < 0) {
    if (!sock_addr_valid(&bs->addrs[peer], false)) {
      WARN("bootstrap rank %d: no address is known for rank %d", bs->rank, peer);
      return ncclInternalError;
    }
    char name[SOCK_NAME_MAX];
    snprintf(name, sizeof(name), "bootstrap rank %d", peer);
    CHECK(sock_connect(&bs->addrs[peer], name, true, dl, &o->sock));
    open.h = (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_CONN, 0, bs->tag, sizeof(bs_conn_t)};
    open.c = (bs_conn_t){bs->rank, peer, bs->nranks, 0};
    v[nv++] = (struct iovec){&open, sizeof(open)};
  }
  v[nv++] = (struct iovec){(void*)(uintptr_t)hdr, sizeof(*hdr)};
  for (int i = 0; i < niov; i++)
    if (iov[i].iov_len > 0) v[nv++] = iov[i];
  int first = 0;
  while (first < nv) {
    size_t n = 0;
    int err = 0;
    ncclResult_t res = sock_try_sendv(&o->sock, v + first, nv - first, &n, &err);
    if (res != ncclSuccess) {
      o->broken = true;
      if (res == ncclRemoteError) {
        char e[128];
        WARN("bootstrap rank %d: sending %s to %s failed: %s", bs->rank,
             bs_what(hdr->kind, hdr->tag, hdr->step, what, sizeof(what)),
             bs_peer_str(bs, peer, who, sizeof(who)),
             err == 0 ? "connection closed" : strerror_r(err, e, sizeof(e)));
      }
      return res;
    }
    size_t moved = n;
    while (n > 0 && first < nv) {
      if (n >= v[first].iov_len) {
        n -= v[first].iov_len;
        first++;
      } else {
        v[first].iov_base = (char*)v[first].iov_base + n;
        v[first].iov_len -= n;
        n = 0;
      }
    }
    if (first < nv && moved == 0) {
      pthread_mutex_lock(&bs->lock);
      res = bs_wait_check(bs, dl, "sending to", peer, hdr->kind, hdr->tag, hdr->step);
      if (res == ncclSuccess) res = bs_progress(bs, dl, o->sock.fd);
      pthread_mutex_unlock(&bs->lock);
      if (res != ncclSuccess) {
        o->broken = true; /* part of the message may be on the wire */
        return res;
      }
    }
  }
  return ncclSuccess;
}

static ncclResult_t bs_msg_from_iov(int peer, const bs_hdr_t* hdr, const struct iovec* iov,
                                    int niov, bs_msg_t** msg_p) {
  bs_msg_t* m = (bs_msg_t*)malloc(sizeof(bs_msg_t) + (size_t)hdr->size);
  if (m == NULL) {
    WARN("bootstrap: out of memory for a %llu-byte message", (unsigned long long)hdr->size);
    return ncclSystemError;
  }
  m->next = NULL;
  m->peer = peer;
  m->kind = hdr->kind;
  m->step = hdr->step;
  m->tag = hdr->tag;
  m->size = (size_t)hdr->size;
  size_t off = 0;
  for (int i = 0; i < niov; i++) {
    if (iov[i].iov_len > 0) memcpy(m->data + off, iov[i].iov_base, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  *msg_p = m;
  return ncclSuccess;
}

ncclResult_t bs_send(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag, uint16_t step,
                     const struct iovec* iov, int niov, volatile uint32_t* abort_flag) {
  size_t total = bs_iov_total(iov, niov);
  if (total > BS_MAX_PAYLOAD || niov > BS_IOV_MAX) {
    WARN(
        "bootstrap rank %d: a %zu-byte message to rank %d exceeds the bootstrap's limit of %llu "
        "bytes",
        bs->rank, total, peer, (unsigned long long)BS_MAX_PAYLOAD);
    return ncclInvalidUsage;
  }
  bs_hdr_t hdr = {BS_WIRE_MAGIC, kind, step, tag, total};
  ncclResult_t res = ncclSuccess;
  if (peer == bs->rank) {
    bs_msg_t* m = NULL;
    CHECK(bs_msg_from_iov(peer, &hdr, iov, niov, &m));
    pthread_mutex_lock(&bs->lock);
    *bs->tailp = m;
    bs->tailp = &m->next;
    pthread_cond_broadcast(&bs->cond);
    pthread_mutex_unlock(&bs->lock);
    return ncclSuccess;
  }
  sock_deadline_t dl = sock_deadline(bs->timeout_ms, abort_flag);
  bs_out_t* o = &bs->out[peer];
  pthread_mutex_lock(&bs->lock);
  while (o->busy) { /* another thread is writing to the same peer: messages must not interleave */
    CHECK_GOTO(bs_wait_check(bs, &dl, "waiting to send to", peer, kind, tag, step), res,
               out_unlock);
    bs_cond_wait_ms(bs, sock_deadline_poll_ms(&dl));
  }
  o->busy = true;
  pthread_mutex_unlock(&bs->lock);
  res = bs_out_write(bs, peer, o, &hdr, iov, niov, &dl);
  pthread_mutex_lock(&bs->lock);
  o->busy = false;
  pthread_cond_broadcast(&bs->cond);
out_unlock:
  pthread_mutex_unlock(&bs->lock);
  return res;
}

ncclResult_t bs_recv_any(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag, uint16_t step,
                         uint64_t timeout_ms, volatile uint32_t* abort_flag, bs_msg_t** msg_p) {
  sock_deadline_t dl = sock_deadline(timeout_ms, abort_flag);
  pthread_mutex_lock(&bs->lock);
  ncclResult_t res = bs_wait_msg(bs, peer, kind, tag, step, &dl, msg_p);
  pthread_mutex_unlock(&bs->lock);
  return res;
}

ncclResult_t bs_recv(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag, uint16_t step,
                     const struct iovec* iov, int niov, volatile uint32_t* abort_flag) {
  size_t total = bs_iov_total(iov, niov);
  bs_msg_t* m = NULL;
  CHECK(bs_recv_any(bs, peer, kind, tag, step, bs->timeout_ms, abort_flag, &m));
  if (m->size != total) {
    char who[BS_PEER_STRLEN], what[96];
    WARN("bootstrap rank %d: %s from %s has %zu bytes, but the receiver expected %zu bytes",
         bs->rank, bs_what(kind, tag, step, what, sizeof(what)),
         bs_peer_str(bs, peer, who, sizeof(who)), m->size, total);
    free(m);
    return ncclInternalError;
  }
  size_t off = 0;
  for (int i = 0; i < niov; i++) {
    if (iov[i].iov_len > 0) memcpy(iov[i].iov_base, m->data + off, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  free(m);
  return ncclSuccess;
}
