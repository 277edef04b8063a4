/*
 * core/bootstrap: the out-of-band rendezvous communicators are built on. The unique id carries the
 * root's address; ranks meet at the root(s), learn each other's listening addresses, and from then
 * on talk directly over TCP: all-gather, barrier, and tagged point-to-point messages. This is the
 * module's only header for the rest of the core.
 *
 * Every blocking step is bounded by CHOIR_BOOTSTRAP_TIMEOUT (seconds) and by the abort flag given
 * at creation; a failure names the peer (rank and address) or the root that did not answer.
 * Calls on one bootstrap_t may come from several threads: they are serialized where they must be,
 * and a thread waiting for a message never stops another from sending.
 */
#ifndef CHOIR_BOOTSTRAP_H
#define CHOIR_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "nccl.h"

typedef struct bootstrap bootstrap_t; /* opaque */

/* Create the 128-byte unique id: magic, a random 64-bit tag, and the root's listening address;
 * starts the root's rendezvous service in this process (a thread that serves one communicator's
 * rendezvous, then exits; it gives up after the timeout if ranks never come). With NCCL_COMM_ID
 * set, the id carries that address and a tag derived from it, so that every process computes the
 * same id, and the root service is started by the first rank inside bootstrap_init instead. */
ncclResult_t bootstrap_get_unique_id(ncclUniqueId* id);

/* Rendezvous of nranks ranks. ids: nids unique ids (the same list on every rank; 1 <= nids <=
 * nranks); rank r meets at the root of id r*nids/nranks, and the roots exchange what their ranks
 * told them among themselves, so no root talks to every rank. abort_flag (may be NULL): set
 * non-zero by another thread to make any blocking call on this bootstrap return ncclInternalError
 * promptly. Returns after every rank has joined: this rank then has its own listening socket and
 * knows every other rank's bootstrap address. */
ncclResult_t bootstrap_init(const ncclUniqueId* ids, int nids, int rank, int nranks,
                            volatile uint32_t* abort_flag, bootstrap_t** bs_p);

/* All-gather in log2(nranks) steps (Bruck), peer to peer: data holds nranks slots of size bytes;
 * slot `rank` is this rank's input; on return every slot is filled. */
ncclResult_t bootstrap_allgather(bootstrap_t* bs, void* data, size_t size);
ncclResult_t bootstrap_barrier(bootstrap_t* bs);
/* The limit every wait on peers observes: CHOIR_BOOTSTRAP_TIMEOUT in milliseconds (its default
 * when the value is not a positive number, with one WARN). */
uint64_t bootstrap_timeout_ms(void);

/* Point-to-point messages, matched by (peer, tag) in the order they were sent; messages that
 * arrive for other tags or peers are kept until received. The sizes must match exactly; a
 * mismatch is ncclInternalError naming both sizes. A send returns once the data is handed to the
 * kernel; it may block while the peer does not read, and still progresses incoming messages
 * meanwhile, so that two ranks sending to each other cannot deadlock. Sending to oneself works. */
ncclResult_t bootstrap_send(bootstrap_t* bs, int peer, int tag, const void* data, size_t size);
ncclResult_t bootstrap_recv(bootstrap_t* bs, int peer, int tag, void* data, size_t size);

/* A new bootstrap for a subset of this one's ranks (ncclCommSplit, ncclCommShrink): `ranks` lists
 * the parent ranks of the new group in new-rank order (n entries, this rank at position new_rank);
 * every member calls it with the same list and tag; non-members do not call, and nothing here
 * waits for them (they may be dead). The parent stays usable. tag distinguishes splits of one
 * parent that overlap in time. Blocking steps watch abort_flag (the parent's when NULL), which
 * also becomes the new bootstrap's abort flag. */
ncclResult_t bootstrap_split(bootstrap_t* parent, uint64_t tag, const int* ranks, int n,
                             int new_rank, volatile uint32_t* abort_flag, bootstrap_t** bs_p);

int bootstrap_rank(const bootstrap_t* bs);
int bootstrap_nranks(const bootstrap_t* bs);
/* The bootstrap listening address of `rank` (for logs and diagnostics). */
const sock_addr_t* bootstrap_peer_addr(const bootstrap_t* bs, int rank);

/* ---- Liveness (bootstrap_watch.c) ----------------------------------------------------------
 * Every rank of a watch is linked to its two ring neighbours by connections of their own with
 * heartbeats; one thread per process polls them. What happens to a rank reaches the owner of
 * every watch of that bootstrap once, on the watch thread, whichever rank saw it first. */
typedef enum {
  BOOTSTRAP_PEER_EXITED = 1,  /* its connection ended without a goodbye: killed, crashed */
  BOOTSTRAP_PEER_SILENT = 2,  /* nothing from it for CHOIR_PEER_TIMEOUT: stopped, hung, cut off */
  BOOTSTRAP_PEER_ABORTED = 3, /* goodbye: ncclCommAbort */
  BOOTSTRAP_PEER_LEFT = 4,    /* goodbye: ncclCommDestroy */
  BOOTSTRAP_PEER_QUIT = 5,    /* goodbye: its process exited with the communicator open */
} bootstrap_peer_event_t;
/* How a rank leaves (the goodbye its neighbours get). */
typedef enum {
  BOOTSTRAP_LEAVE_ABORT = BOOTSTRAP_PEER_ABORTED,
  BOOTSTRAP_LEAVE_DESTROY = BOOTSTRAP_PEER_LEFT,
  BOOTSTRAP_LEAVE_QUIT = BOOTSTRAP_PEER_QUIT,
} bootstrap_leave_t;
typedef struct bootstrap_watch bootstrap_watch_t;
/* What a watch reports about a rank. For a goodbye, what the rank said of itself: the
 * collectives it had launched (every rank launches the same sequence), whether some of its
 * operations had not completed, and the rank whose failure made it leave (an abort after a peer
 * died: the root cause, or -1); for EXITED and SILENT, colls 0, busy 1 and cause -1 (nothing is
 * known). */
typedef struct {
  int rank;     /* may be this rank: a neighbour gave up on it */
  int event;    /* bootstrap_peer_event_t */
  int reporter; /* the rank that saw it first (a neighbour of `rank`, or this rank itself) */
  uint64_t colls;
  int busy;
  int cause;
} bootstrap_peer_report_t;
/* The owner's side. Both are called on the watch thread with the watch's lock held and must not
 * call bootstrap_watch_*: report, at most once per rank; state, when this rank says goodbye
 * (bootstrap_watch_stop, or its process exiting), for what the goodbye carries. */
typedef struct {
  void (*report)(void* ctx, const bootstrap_peer_report_t* r);
  void (*state)(void* ctx, uint64_t* colls_p, int* busy_p, int* cause_p);
} bootstrap_watch_ops_t;

/* Collective over bs (every rank calls it, after bootstrap_init or bootstrap_split): connect to
 * the ring neighbours and start watching. ops must outlive the watch. With one rank *w_p is
 * NULL (nothing to watch). */
ncclResult_t bootstrap_watch_start(bootstrap_t* bs, const bootstrap_watch_ops_t* ops, void* ctx,
                                   bootstrap_watch_t** w_p);
/* Say goodbye (how) and stop; fn is never called after this returns. Safe with NULL. */
void bootstrap_watch_stop(bootstrap_watch_t* w, bootstrap_leave_t how);
/* The event reported about rank so far (0: none). */
int bootstrap_watch_event(bootstrap_watch_t* w, int rank);
/* "exited without ...": what an event means, for messages. */
const char* bootstrap_peer_event_str(int event);
/* CHOIR_PEER_TIMEOUT in milliseconds (0: no silence check). */
uint64_t bootstrap_peer_timeout_ms(void);

/* Close sockets and free. Safe after an abort, and with NULL. No other call on bs may be running
 * or follow. */
ncclResult_t bootstrap_close(bootstrap_t* bs);

/* The root address inside a unique id (for logs and tests); ncclInvalidArgument when the id is
 * not one of ours. */
ncclResult_t bootstrap_id_root(const ncclUniqueId* id, sock_addr_t* addr_p);
/* Root services of this process still running (tests check that they end). */
int bootstrap_roots_running(void);

#endif
