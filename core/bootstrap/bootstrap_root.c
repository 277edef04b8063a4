/*
 * The root service: one detached thread per unique id, serving one rendezvous and then exiting.
 *
 *   gather   accept connections; each must open with a JOIN from a rank of this root's group (or,
 *            with several ids, ROOT_JOIN from the previous root of the ring). A JOIN is answered
 *            at once, accepted or refused with the reason, and its connection closed: the root
 *            keeps no connection per rank. Strangers and garbage are dropped with a WARN; a
 *            connection that says nothing costs only a slot among the pending ones.
 *   ring     (several ids) the roots pass their ranks' addresses around until each has them all.
 *   reply    connect to each rank's listening socket and send it its Bruck peers' addresses; on
 *            failure, send each joined rank the reason instead (e.g. which rank never came).
 *
 * A rendezvous that cannot succeed whatever comes next (two processes claiming one rank) fails
 * at once: the ranks that joined are told why right away, and the root keeps answering JOINs
 * with the same reason until every rank of its group has been told (or the timeout), so that
 * ranks still on their way fail with it too instead of waiting for the timeout. With several
 * roots, the failing root sends the reason to the next root of the ring (ROOT_FAIL, then it
 * closes that connection), which fails the same way and passes it on, whether it is still
 * gathering (it watches the previous root's connection) or already in the ring exchange.
 *
 * The clock: once a rank joined, everything must be done within CHOIR_BOOTSTRAP_TIMEOUT counted
 * from that first JOIN; ranks wait slightly longer, so they hear the root's verdict. Before that,
 * the time belongs to the application (broadcasting the id, launching processes), so a root that
 * nobody joins waits BS_ROOT_IDLE_EXTRA_S more before it gives up, quietly: an unused id is
 * legitimate.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap_internal.h"

/* Connections that have not finished their first message yet, at most (the oldest is dropped to
 * make room: a real rank sends its JOIN as soon as it connects). */
#define BS_ROOT_MAX_PENDING 4096
#define BS_ROOT_IDLE_EXTRA_S 60

static int bs_roots_running_;

int bootstrap_roots_running(void) { return __atomic_load_n(&bs_roots_running_, __ATOMIC_ACQUIRE); }

typedef struct {
  sock_t sock;
  bs_hdr_t hdr;
  size_t hdr_got;
  union {
    bs_join_t join;
    bs_root_join_t root_join;
  } body;
  size_t got;
} bs_pending_t;

typedef struct {
  sock_t listener;
  uint64_t tag; /* this root's id tag */
  uint64_t timeout_ms;
  uint64_t created_ns;
  char where[SOCK_ADDR_STRLEN]; /* the listening address, for messages */
  /* The rendezvous, as the first valid JOIN described it: */
  bool known;
  uint64_t comm_tag;
  int nranks, nids, index, first, count;
  sock_addr_t next_root;
  uint64_t next_tag;
  sock_addr_t* addrs; /* nranks */
  bool* joined;       /* count: rank first + i has joined */
  int njoined;
  uint64_t first_join_ns;
  /* The ring of roots (nids > 1): */
  sock_t prev, next;
  bool have_prev_info;
  bs_root_join_t prev_info;
  bs_pending_t** pending;
  int npending;
  struct pollfd* pfds;
  char why[BS_REASON_MAX]; /* why the rendezvous failed: sent to every joined rank */
  /* The rendezvous failed for good (why says why): every JOIN is refused with that reason.
   * Non-zero: the status the ranks get (BS_REPLY_FAILED, or ncclInvalidUsage for misuse). */
  int32_t fail_status;
  bool failure_sent;   /* the joined ranks were told */
  bool ring_told;      /* the next root was told (ROOT_FAIL) */
  bool prev_has_block; /* the previous root's first ROOT_BLOCK waits on prev: stop watching it */
  bool* told;          /* count: rank first + i knows of the failure */
  int ntold;
} bs_root_t;

typedef enum { BS_PENDING_MORE, BS_PENDING_MOVED, BS_PENDING_CLOSE } bs_pending_state_t;

static void bs_root_free(bs_root_t* root) {
  for (int i = 0; i < root->npending; i++) {
    sock_close(&root->pending[i]->sock);
    free(root->pending[i]);
  }
  sock_close(&root->listener);
  sock_close(&root->prev);
  sock_close(&root->next);
  free(root->pending);
  free(root->pfds);
  free(root->addrs);
  free(root->joined);
  free(root->told);
  free(root);
}

/* A ROOT_REPLY: status 0 accepts; otherwise `why` says what was wrong (truncated to fit). */
typedef struct {
  bs_hdr_t h;
  bs_reply_t r;
  char text[BS_REASON_MAX];
} bs_root_reply_msg_t;

/* Fill *msg and return the bytes to send. status (when why is set): BS_REPLY_FAILED, or
 * ncclInvalidUsage when the ranks were misused. */
static size_t bs_root_reply(const bs_root_t* root, const char* why, int32_t status,
                            bs_root_reply_msg_t* msg) {
  memset(msg, 0, sizeof(*msg));
  size_t len = why != NULL ? strlen(why) + 1 : 0;
  if (len > sizeof(msg->text)) len = sizeof(msg->text);
  if (len > 0) sys_strlcpy(msg->text, why, len);
  msg->h = (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_ROOT_REPLY, 0, root->tag, sizeof(bs_reply_t) + len};
  msg->r.status = why != NULL ? status : 0;
  return sizeof(bs_hdr_t) + sizeof(bs_reply_t) + len;
}

/* Answer a JOIN on its own connection. Best effort and without blocking: the reply is small and
 * the socket fresh, and a peer that went away needs no answer. */
static void bs_root_answer(bs_root_t* root, sock_t* s, const char* why) {
  bs_root_reply_msg_t msg;
  int32_t status = root->fail_status ? root->fail_status : BS_REPLY_FAILED;
  struct iovec iov = {&msg, bs_root_reply(root, why, status, &msg)};
  size_t n = 0;
  int err = 0;
  (void)sock_try_sendv(s, &iov, 1, &n, &err);
}

/* The next root is up (its id was created before any rank could have it): connect and say who
 * we are. Blocking, but only on the local kernel (up to timeout_ms, with retries or not). */
static ncclResult_t bs_root_connect_next(bs_root_t* root, bool retry, uint64_t timeout_ms) {
  char name[SOCK_NAME_MAX];
  snprintf(name, sizeof(name), "bootstrap root %d", (root->index + 1) % root->nids);
  sock_deadline_t dl = sock_deadline(timeout_ms, NULL);
  CHECK(sock_connect(&root->next_root, name, retry, &dl, &root->next));
  struct {
    bs_hdr_t h;
    bs_root_join_t j;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.h = (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_ROOT_JOIN, 0, root->next_tag, sizeof(bs_root_join_t)};
  msg.j = (bs_root_join_t){root->comm_tag, root->index, root->nids, root->nranks, 0};
  CHECK(sock_send(&root->next, &msg, sizeof(msg), &dl));
  return ncclSuccess;
}

/* The previous root's ROOT_JOIN must describe the same rendezvous, from the right place. */
static bool bs_root_prev_ok(bs_root_t* root) {
  const bs_root_join_t* j = &root->prev_info;
  if (j->comm_tag == root->comm_tag && j->nids == root->nids && j->nranks == root->nranks &&
      j->from_index == (root->index - 1 + root->nids) % root->nids)
    return true;
  char a[SOCK_ADDR_STRLEN];
  WARN(
      "bootstrap root %s (root %d of %d): dropped the connection from %s claiming to be root %d "
      "of %d for %d ranks: not the previous root of this rendezvous",
      root->where, root->index, root->nids, sock_addr_str(&root->prev.addr, a, sizeof(a)),
      j->from_index, j->nids, j->nranks);
  sock_close(&root->prev);
  root->have_prev_info = false;
  return false;
}

/* Learn the rendezvous from its first valid JOIN. */
static ncclResult_t bs_root_learn(bs_root_t* root, const bs_join_t* j) {
  root->comm_tag = j->comm_tag;
  root->nranks = j->nranks;
  root->nids = j->nids;
  root->index = j->root_index;
  root->first = bs_group_first(root->index, root->nids, root->nranks);
  root->count = bs_group_first(root->index + 1, root->nids, root->nranks) - root->first;
  root->next_root = j->next_root;
  root->next_tag = j->next_root_tag;
  CHECK(MEM_CALLOC(&root->addrs, (size_t)root->nranks));
  CHECK(MEM_CALLOC(&root->joined, (size_t)root->count));
  CHECK(MEM_CALLOC(&root->told, (size_t)root->count));
  root->first_join_ns = sock_clock_ns();
  root->known = true;
  if (root->have_prev_info) (void)bs_root_prev_ok(root);
  INFO(NCCL_BOOTSTRAP,
       "bootstrap root %s: rendezvous of %d ranks, root %d of %d serving ranks "
       "%d..%d",
       root->where, root->nranks, root->index, root->nids, root->first,
       root->first + root->count - 1);
  return ncclSuccess;
}

/* Rank `rank` (valid or not) now knows that the rendezvous failed. */
static void bs_root_tell(bs_root_t* root, int rank) {
  int i = rank - root->first;
  if (i < 0 || i >= root->count || root->told[i]) return;
  root->told[i] = true;
  root->ntold++;
}

bool bs_join_consistent(const bs_join_t* j) {
  return j->nranks >= 1 && j->nranks <= BS_MAX_RANKS && j->nids >= 1 && j->nids <= j->nranks &&
         j->root_index >= 0 && j->root_index < j->nids && j->rank >= 0 && j->rank < j->nranks &&
         bs_group_of(j->rank, j->nids, j->nranks) == j->root_index &&
         sock_addr_valid(&j->addr, false) &&
         (j->nids == 1 || sock_addr_valid(&j->next_root, false));
}

const char* bs_root_hdr_problem(const bs_hdr_t* h, uint64_t tag) {
  if (h->magic != BS_WIRE_MAGIC) return "not a bootstrap message";
  if (!((h->kind == BS_MSG_JOIN && h->size == sizeof(bs_join_t)) ||
        (h->kind == BS_MSG_ROOT_JOIN && h->size == sizeof(bs_root_join_t))))
    return "not a request to join";
  if (h->tag != tag) return "it holds a different unique id";
  return NULL;
}

bool bs_root_join_consistent(const bs_root_join_t* j) {
  return j->nids >= 2 && j->nranks >= j->nids && j->from_index >= 0 && j->from_index < j->nids;
}

/* A complete JOIN arrived on p. */
static ncclResult_t bs_root_on_join(bs_root_t* root, bs_pending_t* p, bs_pending_state_t* st_p) {
  const bs_join_t* j = &p->body.join;
  char why[BS_REASON_MAX] = "";
  char a[SOCK_ADDR_STRLEN];
  if (!bs_join_consistent(j)) {
    snprintf(why, sizeof(why), "its request is inconsistent (rank %d of %d, root %d of %d)",
             j->rank, j->nranks, j->root_index, j->nids);
  } else if (root->known && (j->comm_tag != root->comm_tag || j->nranks != root->nranks ||
                             j->nids != root->nids || j->root_index != root->index)) {
    snprintf(why, sizeof(why),
             "rank %d says there are %d ranks and %d unique ids (this is root "
             "%d), but the first rank to join said %d ranks and %d ids (root %d)%s",
             j->rank, j->nranks, j->nids, j->root_index, root->nranks, root->nids, root->index,
             j->comm_tag != root->comm_tag ? ", and the ranks hold different lists of ids" : "");
  } else if (root->fail_status) {
    sys_strlcpy(why, root->why, sizeof(why));
    bs_root_tell(root, j->rank);
  } else if (root->known && root->joined[j->rank - root->first]) {
    /* Two processes hold one rank: whichever is right, the other rank number has no process
     * and the rendezvous can never complete. End it now for everyone, with the reason. */
    char b[SOCK_ADDR_STRLEN];
    snprintf(root->why, sizeof(root->why),
             "rank %d of %d was claimed twice: by the process listening on %s and by the one "
             "listening on %s; every process must pass its own rank (0..%d) to ncclCommInitRank",
             j->rank, root->nranks, sock_addr_str(&root->addrs[j->rank], a, sizeof(a)),
             sock_addr_str(&j->addr, b, sizeof(b)), root->nranks - 1);
    root->fail_status = ncclInvalidUsage;
    sys_strlcpy(why, root->why, sizeof(why));
  }
  if (why[0] != '\0') {
    WARN("bootstrap root %s: refused the rank connecting from %s: %s", root->where,
         sock_addr_str(&p->sock.addr, a, sizeof(a)), why);
    bs_root_answer(root, &p->sock, why);
    *st_p = BS_PENDING_CLOSE;
    return ncclSuccess;
  }
  if (!root->known) CHECK(bs_root_learn(root, j));
  root->addrs[j->rank] = j->addr;
  root->joined[j->rank - root->first] = true;
  root->njoined++;
  bs_root_answer(root, &p->sock, NULL);
  TRACE(NCCL_BOOTSTRAP, "bootstrap root %s: rank %d joined (%d of %d)", root->where, j->rank,
        root->njoined, root->count);
  *st_p = BS_PENDING_CLOSE; /* answered: the root keeps no connection per rank */
  return ncclSuccess;
}

/* A complete ROOT_JOIN arrived on p: it becomes the connection from the previous root. */
static void bs_root_on_root_join(bs_root_t* root, bs_pending_t* p, bs_pending_state_t* st_p) {
  const bs_root_join_t* j = &p->body.root_join;
  char a[SOCK_ADDR_STRLEN];
  if (root->prev.fd >= 0 || !bs_root_join_consistent(j)) {
    WARN("bootstrap root %s: dropped the connection from %s claiming to be root %d of %d%s",
         root->where, sock_addr_str(&p->sock.addr, a, sizeof(a)), j->from_index, j->nids,
         root->prev.fd >= 0 ? ": that root is already connected" : "");
    *st_p = BS_PENDING_CLOSE;
    return;
  }
  root->prev = p->sock;
  snprintf(root->prev.name, sizeof(root->prev.name), "bootstrap root %d", j->from_index);
  p->sock.fd = -1;
  root->prev_info = *j;
  root->have_prev_info = true;
  if (root->known) (void)bs_root_prev_ok(root);
  *st_p = BS_PENDING_MOVED;
}

/* Read what arrived on a pending connection. */
static ncclResult_t bs_root_read(bs_root_t* root, bs_pending_t* p, bs_pending_state_t* st_p) {
  char a[SOCK_ADDR_STRLEN];
  *st_p = BS_PENDING_MORE;
  for (;;) {
    size_t n = 0;
    int err = 0;
    ncclResult_t res;
    if (p->hdr_got < sizeof(p->hdr)) {
      res = sock_try_recv(&p->sock, (char*)&p->hdr + p->hdr_got, sizeof(p->hdr) - p->hdr_got, &n,
                          &err);
      if (res == ncclRemoteError) {
        INFO(NCCL_BOOTSTRAP, "bootstrap root %s: %s closed its connection before joining",
             root->where, sock_addr_str(&p->sock.addr, a, sizeof(a)));
        *st_p = BS_PENDING_CLOSE;
        return ncclSuccess;
      }
      CHECK(res);
      if (n == 0) return ncclSuccess;
      p->hdr_got += n;
      if (p->hdr_got < sizeof(p->hdr)) continue;
      const bs_hdr_t* h = &p->hdr;
      const char* bad = bs_root_hdr_problem(h, root->tag);
      if (bad != NULL && h->magic != BS_WIRE_MAGIC) {
        WARN("bootstrap root %s: dropped a connection from %s: %s (magic 0x%08x)", root->where,
             sock_addr_str(&p->sock.addr, a, sizeof(a)), bad, h->magic);
      } else if (bad != NULL) {
        WARN(
            "bootstrap root %s: dropped a connection from %s: %s (kind %u, tag 0x%llx, %llu "
            "bytes)",
            root->where, sock_addr_str(&p->sock.addr, a, sizeof(a)), bad, (unsigned)h->kind,
            (unsigned long long)h->tag, (unsigned long long)h->size);
      }
      if (bad != NULL) {
        if (h->magic == BS_WIRE_MAGIC && h->kind == BS_MSG_JOIN && h->tag != root->tag)
          bs_root_answer(root, &p->sock, "this root serves another unique id (a stale id?)");
        *st_p = BS_PENDING_CLOSE;
        return ncclSuccess;
      }
    }
    res = sock_try_recv(&p->sock, (char*)&p->body + p->got, (size_t)p->hdr.size - p->got, &n, &err);
    if (res == ncclRemoteError) {
      WARN("bootstrap root %s: %s closed its connection in the middle of its request", root->where,
           sock_addr_str(&p->sock.addr, a, sizeof(a)));
      *st_p = BS_PENDING_CLOSE;
      return ncclSuccess;
    }
    CHECK(res);
    if (n == 0) return ncclSuccess;
    p->got += n;
    if (p->got < p->hdr.size) continue;
    if (p->hdr.kind == BS_MSG_JOIN) return bs_root_on_join(root, p, st_p);
    bs_root_on_root_join(root, p, st_p);
    return ncclSuccess;
  }
}

static void bs_root_pending_remove(bs_root_t* root, int i, bool close_it) {
  if (close_it) sock_close(&root->pending[i]->sock);
  free(root->pending[i]);
  root->pending[i] = root->pending[--root->npending];
}

static ncclResult_t bs_root_accept(bs_root_t* root) {
  for (;;) {
    sock_t s;
    CHECK(sock_accept(&root->listener, &s));
    if (s.fd < 0) return ncclSuccess;
    if (root->npending == BS_ROOT_MAX_PENDING) {
      /* Full of connections that say nothing: strangers. Make room. */
      char a[SOCK_ADDR_STRLEN];
      WARN("bootstrap root %s: %d connections said nothing; dropping the one from %s", root->where,
           BS_ROOT_MAX_PENDING, sock_addr_str(&root->pending[0]->sock.addr, a, sizeof(a)));
      bs_root_pending_remove(root, 0, true);
    }
    bs_pending_t* p = NULL;
    ncclResult_t res = MEM_CALLOC(&p, 1);
    if (res != ncclSuccess) {
      sock_close(&s);
      return res;
    }
    p->sock = s;
    root->pending[root->npending++] = p;
  }
}

static bool bs_root_gathered(const bs_root_t* root) {
  return root->known && root->njoined == root->count && (root->nids == 1 || root->prev.fd >= 0);
}

static uint64_t bs_root_end_ns(const bs_root_t* root) {
  if (root->known) return root->first_join_ns + root->timeout_ms * 1000000ull;
  return root->created_ns + (root->timeout_ms + BS_ROOT_IDLE_EXTRA_S * 1000ull) * 1000000ull;
}

static ncclResult_t bs_root_timed_out(bs_root_t* root) {
  double s = (double)root->timeout_ms / 1000.0;
  if (!root->known || root->njoined == 0) {
    INFO(NCCL_BOOTSTRAP,
         "bootstrap root %s: no rank came within %.3g s; the unique id was not "
         "used",
         root->where, s + BS_ROOT_IDLE_EXTRA_S);
    return ncclRemoteError;
  }
  int missing = 0, first_missing = -1;
  for (int i = 0; i < root->count; i++) {
    if (root->joined[i]) continue;
    if (first_missing < 0) first_missing = root->first + i;
    missing++;
  }
  if (missing > 0)
    snprintf(root->why, sizeof(root->why),
             "the root at %s gave up after %.3g s "
             "(CHOIR_BOOTSTRAP_TIMEOUT): rank %d%s never joined (%d of %d ranks of this root did)",
             root->where, s, first_missing, missing > 1 ? " and others" : "", root->njoined,
             root->count);
  else
    snprintf(root->why, sizeof(root->why),
             "the root at %s gave up after %.3g s "
             "(CHOIR_BOOTSTRAP_TIMEOUT): root %d of %d never connected to it",
             root->where, s, (root->index - 1 + root->nids) % root->nids, root->nids);
  WARN("bootstrap: %s", root->why);
  return ncclRemoteError;
}

static void bs_root_send_failure(bs_root_t* root);

/* Tell the next root of the ring why the rendezvous failed, then drop the connection: it fails
 * too, tells its ranks and passes the reason on. Best effort, once; a short wait at most (the
 * next root may be gone already). The status travels in the header's step. */
static void bs_root_fail_ring(bs_root_t* root) {
  if (root->nids < 2 || root->ring_told) return;
  root->ring_told = true;
  if (root->next.fd < 0 && bs_root_connect_next(root, false, 1000) != ncclSuccess) return;
  struct {
    bs_hdr_t h;
    char text[BS_REASON_MAX];
  } msg;
  memset(&msg, 0, sizeof(msg));
  size_t len = strnlen(root->why, BS_REASON_MAX - 1) + 1;
  memcpy(msg.text, root->why, len - 1);
  msg.h =
      (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_ROOT_FAIL, (uint16_t)root->fail_status, root->comm_tag, len};
  sock_deadline_t dl = sock_deadline(1000, NULL);
  (void)sock_send(&root->next, &msg, sizeof(bs_hdr_t) + len, &dl);
  sock_close(&root->next);
}

/* Fail the rendezvous with `status` and the reason in root->why (already written). */
static void bs_root_fail(bs_root_t* root, int32_t status) {
  if (root->fail_status) return;
  root->fail_status = status;
  WARN("bootstrap root %s: %s", root->where, root->why);
}

/* A ROOT_FAIL message (header h already read) from the previous root: read its reason into
 * root->why and fail with its status. */
static void bs_root_on_ring_fail(bs_root_t* root, const bs_hdr_t* h, const char* text, size_t len) {
  if (root->fail_status) return; /* our own reason, come back around the ring */
  char why[BS_REASON_MAX];
  size_t n = len < sizeof(why) - 1 ? len : sizeof(why) - 1;
  memcpy(why, text, n);
  why[n] = '\0';
  for (size_t i = 0; i < n && why[i] != '\0'; i++)
    if (why[i] < 0x20 || why[i] > 0x7e) why[i] = '?';
  snprintf(root->why, sizeof(root->why), "%.440s (passed on by root %d of %d)", why,
           (root->index - 1 + root->nids) % root->nids, root->nids);
  bs_root_fail(root, h->step == ncclInvalidUsage ? ncclInvalidUsage : BS_REPLY_FAILED);
}

/* While gathering: what the previous root sent. A ROOT_FAIL fails this root too; its first
 * ROOT_BLOCK (it is in the ring exchange already) is left for bs_root_ring; a closed connection
 * means the previous root is gone, and the ring can never complete. */
static void bs_root_watch_prev(bs_root_t* root) {
  bs_hdr_t h;
  ssize_t n = recv(root->prev.fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n > 0 && (size_t)n < sizeof(h)) return; /* the rest of the header is on its way */
  if (n == (ssize_t)sizeof(h) && !(h.magic == BS_WIRE_MAGIC && h.kind == BS_MSG_ROOT_FAIL &&
                                   h.tag == root->comm_tag && h.size <= BS_REASON_MAX)) {
    root->prev_has_block = true;
    return;
  }
  if (n == (ssize_t)sizeof(h)) {
    char body[sizeof(bs_hdr_t) + BS_REASON_MAX];
    sock_deadline_t dl = sock_deadline(1000, NULL);
    if (sock_recv(&root->prev, body, sizeof(h) + (size_t)h.size, &dl) == ncclSuccess) {
      bs_root_on_ring_fail(root, &h, body + sizeof(h), (size_t)h.size);
      sock_close(&root->prev);
      return;
    }
  }
  sock_close(&root->prev);
  if (root->fail_status) return;
  snprintf(root->why, sizeof(root->why),
           "root %d of %d (the previous one in the ring of roots) closed its connection to the "
           "root at %s before the exchange",
           (root->index - 1 + root->nids) % root->nids, root->nids, root->where);
  bs_root_fail(root, BS_REPLY_FAILED);
}

static ncclResult_t bs_root_gather(bs_root_t* root) {
  for (;;) {
    if (root->fail_status) {
      if (!root->failure_sent) bs_root_send_failure(root);
      bs_root_fail_ring(root);
      if (root->ntold == root->count)
        return root->fail_status == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError;
    } else if (bs_root_gathered(root)) {
      return ncclSuccess;
    }
    uint64_t now = sock_clock_ns(), end = bs_root_end_ns(root);
    if (now >= end)
      return root->fail_status == ncclInvalidUsage ? ncclInvalidUsage
             : root->fail_status                   ? ncclRemoteError
                                                   : bs_root_timed_out(root);
    uint64_t ms = (end - now) / 1000000 + 1;
    int n = 0;
    root->pfds[n++] = (struct pollfd){root->listener.fd, POLLIN, 0};
    int npending = root->npending;
    for (int i = 0; i < npending; i++)
      root->pfds[n++] = (struct pollfd){root->pending[i]->sock.fd, POLLIN, 0};
    int prev_slot = -1;
    if (root->known && root->prev.fd >= 0 && !root->prev_has_block) {
      prev_slot = n;
      root->pfds[n++] = (struct pollfd){root->prev.fd, POLLIN, 0};
    }
    int r = poll(root->pfds, (nfds_t)n, ms > 1000 ? 1000 : (int)ms);
    if (r < 0 && errno != EINTR) {
      WARN("bootstrap root %s: poll failed: %m", root->where);
      return ncclSystemError;
    }
    if (r <= 0) continue;
    /* Backwards, so that removing entry i (swapped with the last) keeps pfds[1 + j] matching
     * pending[j] for every j still to visit. */
    for (int i = npending - 1; i >= 0; i--) {
      if (root->pfds[1 + i].revents == 0) continue;
      bs_pending_state_t st;
      CHECK(bs_root_read(root, root->pending[i], &st));
      if (st != BS_PENDING_MORE) bs_root_pending_remove(root, i, st == BS_PENDING_CLOSE);
    }
    if (root->pfds[0].revents != 0) CHECK(bs_root_accept(root));
    if (prev_slot >= 0 && root->pfds[prev_slot].revents != 0) bs_root_watch_prev(root);
    if (root->known && root->nids > 1 && root->next.fd < 0 && !root->fail_status)
      CHECK(bs_root_connect_next(root, true, root->timeout_ms));
  }
}

/* Pass the blocks of addresses around the ring of roots: at step s, send the block of root
 * index - s to the next root and receive the block of root index - s - 1 from the previous. */
static ncclResult_t bs_root_ring(bs_root_t* root) {
  sock_deadline_t dl = {bs_root_end_ns(root), root->timeout_ms, NULL};
  ncclResult_t res = ncclSuccess;
  size_t max = (size_t)(root->nranks / root->nids + 1) * sizeof(sock_addr_t);
  size_t rcap = max > BS_REASON_MAX ? max : BS_REASON_MAX; /* a block, or a ROOT_FAIL reason */
  char* sbuf = (char*)malloc(sizeof(bs_hdr_t) + max);
  char* rbuf = (char*)malloc(sizeof(bs_hdr_t) + rcap);
  if (sbuf == NULL || rbuf == NULL) {
    WARN("bootstrap root %s: out of memory for the ring of roots", root->where);
    res = ncclSystemError;
    goto out_free;
  }
  for (int s = 0; s < root->nids - 1; s++) {
    int sb = (root->index - s + root->nids) % root->nids;
    int rb = (root->index - s - 1 + root->nids) % root->nids;
    int sfirst = bs_group_first(sb, root->nids, root->nranks);
    int scount = bs_group_first(sb + 1, root->nids, root->nranks) - sfirst;
    int rfirst = bs_group_first(rb, root->nids, root->nranks);
    int rcount = bs_group_first(rb + 1, root->nids, root->nranks) - rfirst;
    size_t ssize = (size_t)scount * sizeof(sock_addr_t),
           rsize = (size_t)rcount * sizeof(sock_addr_t);
    bs_hdr_t h = {BS_WIRE_MAGIC, BS_MSG_ROOT_BLOCK, (uint16_t)s, root->comm_tag, ssize};
    memcpy(sbuf, &h, sizeof(h));
    memcpy(sbuf + sizeof(h), &root->addrs[sfirst], ssize);
    memset(rbuf, 0, sizeof(h) + rcap);
    res = sock_exchange(&root->next, sbuf, sizeof(h) + ssize, &root->prev, rbuf, sizeof(h) + rsize,
                        &dl);
    memcpy(&h, rbuf, sizeof(h));
    if (h.magic == BS_WIRE_MAGIC && h.kind == BS_MSG_ROOT_FAIL && h.tag == root->comm_tag &&
        h.size <= BS_REASON_MAX) {
      /* The previous root failed and closed the connection (which may have failed the exchange
       * too): what arrived of its reason is in rbuf, zero-padded. */
      if (res == ncclSuccess && h.size > rsize) {
        sock_deadline_t rest = sock_deadline(1000, NULL);
        (void)sock_recv(&root->prev, rbuf + sizeof(h) + rsize, (size_t)h.size - rsize, &rest);
      }
      bs_root_on_ring_fail(root, &h, rbuf + sizeof(h), strnlen(rbuf + sizeof(h), (size_t)h.size));
      res = root->fail_status == ncclInvalidUsage ? ncclInvalidUsage : ncclRemoteError;
      goto out_free;
    }
    if (res != ncclSuccess) goto out_free;
    bool ok = h.magic == BS_WIRE_MAGIC && h.kind == BS_MSG_ROOT_BLOCK && h.step == s &&
              h.tag == root->comm_tag && h.size == rsize;
    for (int i = 0; i < rcount && ok; i++) {
      sock_addr_t* a = &root->addrs[rfirst + i];
      memcpy(a, rbuf + sizeof(h) + (size_t)i * sizeof(*a), sizeof(*a));
      ok = sock_addr_valid(a, false);
    }
    if (!ok) {
      WARN("bootstrap root %s: root %d sent a malformed block of addresses at step %d", root->where,
           root->prev_info.from_index, s);
      res = ncclRemoteError;
      goto out_free;
    }
  }
out_free:
  free(rbuf);
  free(sbuf);
  return res;
}

/* Connect to a rank's listening socket and send it one ROOT_REPLY. */
static void bs_root_send_to_rank(bs_root_t* root, int rank, const void* msg, size_t size) {
  char name[SOCK_NAME_MAX];
  snprintf(name, sizeof(name), "rank %d", rank);
  /* The rank listened before it joined: a refused connection means it is gone; no retries. */
  sock_deadline_t dl = sock_deadline(root->timeout_ms < 10000 ? root->timeout_ms : 10000, NULL);
  sock_t s;
  if (sock_connect(&root->addrs[rank], name, false, &dl, &s) != ncclSuccess) return;
  (void)sock_send(&s, msg, size, &dl);
  sock_close(&s);
}

static ncclResult_t bs_root_send_peers(bs_root_t* root) {
  int k = bs_bruck_steps(root->nranks);
  size_t size = sizeof(bs_hdr_t) + sizeof(bs_reply_t) + (size_t)k * sizeof(bs_peer_entry_t);
  char* msg = NULL;
  CHECK(MEM_CALLOC(&msg, size));
  bs_hdr_t h = {BS_WIRE_MAGIC, BS_MSG_ROOT_REPLY, 0, root->tag, size - sizeof(bs_hdr_t)};
  bs_reply_t r = {0, k};
  memcpy(msg, &h, sizeof(h));
  memcpy(msg + sizeof(h), &r, sizeof(r));
  for (int rank = root->first; rank < root->first + root->count; rank++) {
    int64_t d = 1;
    for (int i = 0; i < k; i++, d <<= 1) {
      bs_peer_entry_t e;
      memset(&e, 0, sizeof(e));
      e.rank = (int)((rank - d + root->nranks) % root->nranks);
      e.addr = root->addrs[e.rank];
      memcpy(msg + sizeof(h) + sizeof(r) + (size_t)i * sizeof(e), &e, sizeof(e));
    }
    bs_root_send_to_rank(root, rank, msg, size);
  }
  free(msg);
  INFO(NCCL_BOOTSTRAP, "bootstrap root %s: rendezvous of ranks %d..%d of %d done in %.1f ms",
       root->where, root->first, root->first + root->count - 1, root->nranks,
       (double)(sock_clock_ns() - root->first_join_ns) / 1e6);
  return ncclSuccess;
}

/* Tell every rank that joined why the rendezvous failed, so that it fails with that reason. */
static void bs_root_send_failure(bs_root_t* root) {
  bs_root_reply_msg_t msg;
  size_t len =
      bs_root_reply(root, root->why, root->fail_status ? root->fail_status : BS_REPLY_FAILED, &msg);
  for (int i = 0; i < root->count; i++) {
    if (!root->joined[i]) continue;
    bs_root_send_to_rank(root, root->first + i, &msg, len);
    bs_root_tell(root, root->first + i);
  }
  root->failure_sent = true;
}

static void* bs_root_main(void* arg) {
  bs_root_t* root = (bs_root_t*)arg;
  ncclResult_t res = bs_root_gather(root);
  /* Nobody else may join; and a fixed port (NCCL_COMM_ID) must be free for the next rendezvous
   * as soon as this one's ranks can start it. */
  sock_close(&root->listener);
  if (res == ncclSuccess && root->nids > 1) {
    res = bs_root_ring(root);
    /* The error was WARNed in this thread: pass its text on to the ranks (unless the previous
     * root said why). */
    if (res != ncclSuccess && !root->fail_status)
      snprintf(root->why, sizeof(root->why),
               "the exchange between the %d roots failed at root "
               "%d (%s): %.300s",
               root->nids, root->index, root->where, err_last());
  }
  if (res == ncclSuccess) {
    res = bs_root_send_peers(root);
  } else if (root->known && root->njoined > 0 && !root->failure_sent) {
    if (root->why[0] == '\0')
      snprintf(root->why, sizeof(root->why), "the root at %s failed: %s", root->where,
               err_string(res));
    bs_root_send_failure(root);
  }
  if (root->fail_status) bs_root_fail_ring(root); /* pass a failure from the ring on */
  bs_root_free(root);
  __atomic_sub_fetch(&bs_roots_running_, 1, __ATOMIC_RELEASE);
  return NULL;
}

ncclResult_t bs_root_start(const sock_addr_t* addr, uint64_t tag, sock_addr_t* bound_p) {
  bs_root_t* root = NULL;
  ncclResult_t res = ncclSuccess;
  CHECK(MEM_CALLOC(&root, 1));
  root->listener.fd = root->prev.fd = root->next.fd = -1;
  root->tag = tag;
  root->timeout_ms = bootstrap_timeout_ms();
  root->created_ns = sock_clock_ns();
  CHECK_GOTO(MEM_CALLOC(&root->pending, BS_ROOT_MAX_PENDING), res, err_free);
  CHECK_GOTO(MEM_CALLOC(&root->pfds, BS_ROOT_MAX_PENDING + 2), res, err_free);
  CHECK_GOTO(sock_listen(addr, "bootstrap root", &root->listener), res, err_free);
  sock_addr_str(&root->listener.addr, root->where, sizeof(root->where));
  sock_addr_t bound = root->listener.addr;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  __atomic_add_fetch(&bs_roots_running_, 1, __ATOMIC_RELEASE);
  pthread_t thread;
  int err = pthread_create(&thread, &attr, bs_root_main, root);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    __atomic_sub_fetch(&bs_roots_running_, 1, __ATOMIC_RELEASE);
    errno = err;
    WARN("bootstrap: cannot start the root thread for %s: %m", root->where);
    res = ncclSystemError;
    goto err_free;
  }
  /* From here the thread owns root. */
  *bound_p = bound;
  return ncclSuccess;
err_free:
  bs_root_free(root);
  return res;
}
