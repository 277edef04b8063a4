/*
 * Private to core/bootstrap: the unique id's layout, the wire format, and the rank-side state.
 *
 * Wire format: every message is a bs_hdr_t followed by `size` payload bytes. Every process of a
 * job runs the same build on the same architecture, so fields travel in host byte order; what
 * comes off a socket is still checked (magic, kind, tag, sizes, ranks, addresses) before use, and
 * a connection that fails a check is dropped with a WARN.
 *
 * Rendezvous, for root i of nids serving ranks [first, first+count):
 *   rank -> root   JOIN (its listening address); the root answers ROOT_REPLY (accepted, or the
 *                  reason for refusing) on the same connection and closes it, so that a root holds
 *                  no connection per rank while it waits.
 *   root -> root   with nids > 1 the roots form a ring (ROOT_JOIN, then nids-1 ROOT_BLOCK steps)
 *                  until each holds every rank's address; a root whose rendezvous failed for
 *                  good sends ROOT_FAIL instead, and each root passes it on.
 *   root -> rank   a new connection to the rank's listening socket: ROOT_REPLY with the addresses
 *                  of the log2(nranks) peers the rank sends to in a Bruck all-gather, or the reason
 *                  the rendezvous failed (e.g. which rank never came).
 *   ranks          a Bruck all-gather of the listening addresses over direct connections.
 * Rank to rank, each connection carries one direction; it opens with CONN (who, for which
 * bootstrap), then USER, COLL and SPLIT messages.
 */
#ifndef CHOIR_BOOTSTRAP_INTERNAL_H
#define CHOIR_BOOTSTRAP_INTERNAL_H

#include <poll.h>
#include <pthread.h>
#include <sys/uio.h>

#include "bootstrap.h"

/* ---- Unique id ------------------------------------------------------------------------------ */

#define BS_ID_MAGIC 0x31534252494f4843ull /* "CHOIRBS1" */
#define BS_ID_VERSION 1u
#define BS_ID_ROOT_IN_INIT 0x1u /* NCCL_COMM_ID: the first rank of the group starts the root */

typedef struct {
  uint64_t magic;
  uint32_t version;
  uint32_t flags;
  uint64_t tag; /* random; identifies the rendezvous (derived from NCCL_COMM_ID when set) */
  sock_addr_t root;
} bs_id_t;

_Static_assert(sizeof(bs_id_t) <= NCCL_UNIQUE_ID_BYTES, "bs_id_t must fit in ncclUniqueId");

/* Checked copy of ids[index] (index is for messages). */
ncclResult_t bs_id_decode(const ncclUniqueId* id, int index, bs_id_t* out_p);

/* ---- Wire format ---------------------------------------------------------------------------- */

#define BS_WIRE_MAGIC 0xb0075ea1u

enum {
  BS_MSG_JOIN = 1,   /* rank -> root; tag: the root's id tag; payload bs_join_t */
  BS_MSG_ROOT_REPLY, /* root -> rank; tag: the root's id tag; bs_reply_t, then entries or text */
  BS_MSG_ROOT_JOIN,  /* root -> next root; tag: the next root's id tag; payload bs_root_join_t */
  BS_MSG_ROOT_BLOCK, /* root -> next root; tag: comm tag; step; addresses of one root's ranks */
  BS_MSG_CONN,       /* rank -> rank, first on a connection; tag: bootstrap tag; bs_conn_t */
  BS_MSG_USER,       /* bootstrap_send; tag: the user's tag */
  BS_MSG_COLL,       /* all-gather and barrier; tag: collective sequence number; step */
  BS_MSG_SPLIT,      /* bootstrap_split's address exchange; tag: split tag; step */
  BS_MSG_ROOT_FAIL,  /* root -> next root; tag: comm tag; step: the status for the ranks; the
                      * NUL-terminated reason the rendezvous failed (the sender then closes) */
  BS_MSG_WATCH,      /* bootstrap_watch_start: a rank's liveness address, to its previous rank */
};

typedef struct {
  uint32_t magic;
  uint16_t kind;
  uint16_t step;
  uint64_t tag;
  uint64_t size; /* payload bytes that follow */
} bs_hdr_t;

/* The bootstrap carries metadata, never bulk data: a larger size can only be garbage. */
#define BS_MAX_PAYLOAD (1ull << 30)
/* Largest job the rendezvous accepts (a bound on what a root allocates on a peer's word). */
#define BS_MAX_RANKS (1 << 24)
/* Room for the reason text of a refusal. */
#define BS_REASON_MAX 512

typedef struct {
  uint64_t comm_tag; /* the same on every rank of the rendezvous */
  int32_t rank;
  int32_t nranks;
  int32_t nids;
  int32_t root_index;
  sock_addr_t addr;      /* the rank's listening address */
  sock_addr_t next_root; /* root (root_index + 1) % nids, for the root ring */
  uint32_t pad;
  uint64_t next_root_tag;
} bs_join_t;

typedef struct {
  int32_t status; /* 0: count entries follow; otherwise a NUL-terminated reason follows, and
                   * status is BS_REPLY_FAILED, or ncclInvalidUsage when the ranks misused the
                   * rendezvous (e.g. two claimed one rank): the error the ranks return */
  int32_t count;
} bs_reply_t;
#define BS_REPLY_FAILED 1

typedef struct {
  int32_t rank;
  int32_t pad;
  sock_addr_t addr;
  uint32_t pad2;
} bs_peer_entry_t;

typedef struct {
  uint64_t comm_tag;
  int32_t from_index;
  int32_t nids;
  int32_t nranks;
  int32_t pad;
} bs_root_join_t;

typedef struct {
  int32_t src;
  int32_t dst;
  int32_t nranks;
  int32_t pad;
} bs_conn_t;

/* Root i of nids serves ranks [bs_group_first(i), bs_group_first(i + 1)): rank r belongs to root
 * r * nids / nranks. */
static inline int bs_group_of(int rank, int nids, int nranks) {
  return (int)((int64_t)rank * nids / nranks);
}
static inline int bs_group_first(int index, int nids, int nranks) {
  return (int)(((int64_t)index * nranks + nids - 1) / nids);
}
/* Bruck all-gather: at step k (distance d = 2^k) rank r sends to (r - d) mod n. */
static inline int bs_bruck_steps(int n) {
  int k = 0;
  for (int64_t d = 1; d < n; d <<= 1) k++;
  return k;
}

/* The root's checks of what a connection sends it (pure functions, fuzzed in test/fuzz): why a
 * header is refused (NULL: a JOIN or ROOT_JOIN for this root's tag); whether a JOIN describes a
 * possible rank (counts within limits, the rank served by the root it names, valid addresses);
 * whether a ROOT_JOIN describes a possible previous root. */
const char* bs_root_hdr_problem(const bs_hdr_t* h, uint64_t tag);
bool bs_join_consistent(const bs_join_t* j);
bool bs_root_join_consistent(const bs_root_join_t* j);

/* Start a root service listening on addr (port 0: ephemeral) for the id with this tag; the
 * address it listens on goes to *bound_p. */
ncclResult_t bs_root_start(const sock_addr_t* addr, uint64_t tag, sock_addr_t* bound_p);

/* ---- Rank side ------------------------------------------------------------------------------ */

/* A message that arrived and waits to be received. */
typedef struct bs_msg {
  struct bs_msg* next;
  int peer;
  uint16_t kind;
  uint16_t step;
  uint64_t tag;
  size_t size;
  char data[];
} bs_msg_t;

/* A connection another rank (or a root, or a stranger) opened to our listening socket. Only the
 * thread that holds the polling role touches these. */
typedef struct {
  sock_t sock;
  int peer; /* -1 until its first message identified it; bs->nranks for the root */
  bool ended;
  int end_err; /* why it ended: 0 closed by the peer, > 0 errno, -1 we dropped it */
  bs_hdr_t hdr;
  size_t hdr_got;
  bs_msg_t* msg; /* the payload being read */
  size_t got;
} bs_in_t;

/* Our connection to a peer's listening socket, used for everything we send it. */
typedef struct {
  sock_t sock; /* fd -1 until the first send */
  bool busy;   /* a thread is writing a message on it */
  bool broken; /* a send failed half-way: the stream is unusable */
} bs_out_t;

struct bootstrap {
  int rank;
  int nranks;
  uint64_t tag; /* identifies this bootstrap in CONN messages */
  uint64_t timeout_ms;
  volatile uint32_t* abort_flag;
  sock_t listener;
  sock_addr_t* addrs; /* nranks listening addresses */
  bs_out_t* out;      /* nranks */
  /* Set while bootstrap_init waits for its root: a connection whose first message is a
   * ROOT_REPLY with this tag is the root's answer. Zero otherwise. */
  uint64_t join_tag;
  sock_addr_t root_addr;
  uint32_t coll_seq; /* next collective's sequence number; 0 is the address exchange */

  pthread_mutex_t lock;
  pthread_cond_t cond; /* broadcast when messages arrive, a peer leaves, or a role is released */
  bool polling;        /* a thread holds the polling role: it alone reads `ins` */
  /* Under lock: */
  bs_msg_t* head; /* arrived messages, oldest first */
  bs_msg_t** tailp;
  int8_t* peer_gone;  /* nranks + 1 (the root last): the peer's connection to us ended... */
  int* peer_gone_err; /* ...and why (bs_in_t.end_err) */
  /* Polling role only: */
  bs_in_t** ins;
  int nins, cap_ins;
  bool* in_from; /* nranks: an identified connection from that rank exists */
  struct pollfd* pfds;
  int cap_pfds;
};

ncclResult_t bs_create(int rank, int nranks, uint64_t tag, volatile uint32_t* abort_flag,
                       const sock_addr_t* listen_addr, bootstrap_t** bs_p);
/* One round of progress (read what arrived on the listening socket and the incoming
 * connections, for up to ms), as a thread waiting for a message makes: for the fuzz target of
 * the rank side's reader. */
ncclResult_t bs_progress_once(bootstrap_t* bs, int ms);
/* "rank 3 (1.2.3.4:5)"; the root for peer == nranks. */
const char* bs_peer_str(const bootstrap_t* bs, int peer, char* buf, size_t size);
#define BS_PEER_STRLEN 128

/* Send/receive one message (kind, tag, step) to/from peer, gathering from/scattering into iov.
 * abort_flag is the flag this operation watches. */
ncclResult_t bs_send(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag, uint16_t step,
                     const struct iovec* iov, int niov, volatile uint32_t* abort_flag);
ncclResult_t bs_recv(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag, uint16_t step,
                     const struct iovec* iov, int niov, volatile uint32_t* abort_flag);
/* Receive one message of any size; the caller frees it. */
ncclResult_t bs_recv_any(bootstrap_t* bs, int peer, uint16_t kind, uint64_t tag, uint16_t step,
                         uint64_t timeout_ms, volatile uint32_t* abort_flag, bs_msg_t** msg_p);
/* Bruck all-gather among n ranks of bs: this one is r; map[i] is the bs rank of group member i
 * (NULL: the identity). */
ncclResult_t bs_allgather_over(bootstrap_t* bs, const int* map, int r, int n, uint16_t kind,
                               uint64_t tag, void* data, size_t size,
                               volatile uint32_t* abort_flag);

#endif
