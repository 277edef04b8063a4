/*
 * net-ucx: Choir's UCX net plugin (libnccl-net-ucx.so, table name "UCX"). Internal header: one
 * core implementation (nux_*), which nux_abi.c wraps in the five exported tables (v12 .. v8).
 *
 * Objects and their owners:
 *   - devices: UCX's own network devices (uct resources of type NET, filtered by UCX_NET_DEVICES
 *     and UCX_TLS), listed once per process (nux_dev.c);
 *   - one ucp_context per device, created at its first use with NET_DEVICES set to that device
 *     (process-wide, never destroyed);
 *   - one ucp_worker per (device, plugin context): a plugin context is one NCCL communicator
 *     (v11/v12 init) or the process (v8..v10). Refcounted by the context and by every comm on it;
 *     released workers are kept for the device's next context, never destroyed: UCX 1.13's
 *     ucp_worker_destroy aborts (an assertion in ucp_request_send_state_ff) when an internal
 *     endpoint still holds a wireup reply, which happens when a peer closes first.
 *     Comms of one worker may be driven from different threads (NCCL's proxy service and progress
 *     threads), so every UCX call on a worker holds its mutex (thread mode SERIALIZED);
 *   - a connection: a send comm (an ep to the receiver's worker) and a recv comm (an ep back to
 *     the sender's worker, used only to learn of the sender's death). Worker addresses do not fit
 *     NCCL's 128-byte handle: the handle carries a TCP address, and one short TCP exchange per
 *     connection (nux_conn.c) swaps the two worker addresses and the receiver's comm id.
 * Data: ucp_tag_send_nbx / ucp_tag_recv_nbx with tag = comm id << 32 | NCCL tag (nux_util.h);
 * the comm id is unique on the receiver's worker, so comms sharing a worker never match each
 * other's messages. A comm that closes tells its peer with a close notice (nux_notice_t).
 */
#ifndef NUX_H
#define NUX_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net.h"
#include "nux_util.h"
#include "sock_if.h"

#include <ucp/api/ucp.h>

/* ---- Logging: only through the core's logger (nux_dev.c) ------------------------------------ */

extern ncclDebugLogger_t nux_logger;
#define NUX_WARN(...)                                                                     \
  do {                                                                                    \
    ncclDebugLogger_t nux_l_ = nux_logger;                                                \
    if (nux_l_ != NULL) nux_l_(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define NUX_INFO(flags, ...)                                                             \
  do {                                                                                   \
    ncclDebugLogger_t nux_l_ = nux_logger;                                               \
    if (nux_l_ != NULL) nux_l_(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- Limits --------------------------------------------------------------------------------- */

#define NUX_MAX_DEVS 32
#define NUX_MAX_REQS NCCL_NET_MAX_REQUESTS
#define NUX_MAX_BYTES ((size_t)0x7ffff000) /* test() reports sizes as int */
/* The message size limit that CHOIR_UCX_MAX_MIB sets (at most NUX_MAX_BYTES). */
size_t nux_max_bytes(void);
#define NUX_MAX_ADDR 8192                  /* largest worker address accepted in a handshake */
#define NUX_MAGIC 0x43686f69724e5558ULL    /* "ChoirNUX" */

/* ---- Devices and workers (nux_dev.c) -------------------------------------------------------- */

typedef struct {
  char name[64];  /* UCX device name: "eth0", "mlx5_0:1" */
  char tls[128];  /* UCX transports that offer it, for logs */
  char* pci_path; /* sysfs realpath, or NULL */
  int speed;      /* Mbit/s */
  sock_addr_t hs; /* address for the connection handshake (port 0) */
  char hs_if[SOCK_IFNAME_MAX];
  ucp_context_h ucp;       /* created at first use, under nux_g.lock */
  struct nux_worker* idle; /* released workers kept for reuse (under nux_g.lock) */
  bool ucp_failed;         /* ucp_init failed once: WARNed, not retried */
} nux_dev_t;

typedef struct {
  pthread_mutex_t lock; /* device contexts, default plugin context */
  int ndev;
  nux_dev_t dev[NUX_MAX_DEVS];
  nux_knobs_t knobs;
} nux_global_t;

extern nux_global_t nux_g;

/* One worker of one device, shared by the comms of one plugin context. */
typedef struct nux_worker {
  pthread_mutex_t lock; /* held around every UCX call on this worker */
  int dev;
  int refs; /* under lock */
  ucp_worker_h ucp;
  ucp_address_t* addr;
  size_t addr_len;
  uint32_t next_comm_id; /* under lock; receive comm ids on this worker */
  void** orphans;        /* error contexts of endpoints whose close never completed */
  int norphans, cap_orphans;
  struct nux_worker* next_idle;
} nux_worker_t;

/* A plugin context: its workers, one per device, created at first use. */
typedef struct {
  pthread_mutex_t lock;
  uint64_t comm_id;
  nux_worker_t* workers[NUX_MAX_DEVS];
} nux_ctx_t;

ncclResult_t nux_init(ncclDebugLogger_t logger);
ncclResult_t nux_devices(int* ndev);
ncclResult_t nux_get_properties(int dev, ncclNetProperties_v12_t* props);
ncclResult_t nux_ctx_create(uint64_t comm_id, nux_ctx_t** ctx_p);
void nux_ctx_destroy(nux_ctx_t* ctx);
/* The process-wide context of v8..v10 (which have no per-communicator init). */
nux_ctx_t* nux_ctx_default(void);
/* The context's worker for dev, with a reference for the caller. */
ncclResult_t nux_worker_get(nux_ctx_t* ctx, int dev, nux_worker_t** w_p);
void nux_worker_ref(nux_worker_t* w);
void nux_worker_put(nux_worker_t* w);
/* Keeps p until the worker is destroyed (under w->lock). */
void nux_worker_orphan(nux_worker_t* w, void* p);
/* Progresses w a few rounds (w->lock held). */
void nux_worker_progress_locked(nux_worker_t* w);

/* ---- Comms (nux_conn.c, nux_xfer.c) -----------------------------------------------------------
 */

/* What listen() writes into NCCL's handle; connect keeps its state pointer after it. */
typedef struct {
  uint64_t magic;
  uint64_t listen_id;
  sock_addr_t addr;
} nux_handle_t;

/* First bytes on the handshake socket, sender to receiver, then addr_len bytes of address. */
typedef struct {
  uint64_t magic;
  uint64_t listen_id;
  uint64_t conn_id;
  uint32_t addr_len; /* sender's worker address */
  uint32_t send_id;  /* the send comm's id on the sender's worker: where close notices go */
} nux_hello_t;

/* The receiver's answer, then addr_len bytes of its worker address. */
typedef struct {
  uint64_t magic;
  uint64_t conn_id;
  uint32_t comm_id; /* the tag space of the new connection on the receiver's worker */
  uint32_t addr_len;
} nux_reply_t;

/* The handshake's last bytes, once a side's endpoint is wired up (nux_comm_wired): the sender's
 * first, after its own flush; the receiver's answer after its flush and the sender's message.
 * Neither side returns its comm before, so that no wireup is left in flight when one of them
 * starts moving data (or dies). */
#define NUX_WIRED_MAGIC 0x43686f6972576972ULL /* "ChoirWir" */
typedef struct {
  uint64_t magic;
  uint64_t conn_id;
} nux_wired_t;

/* What UCX may write or read after a comm is gone: the endpoint's error flag (written by UCX's
 * error callback) and the two close-notice buffers. Lives apart from the comm: when a close does
 * not complete in time, this stays with the worker (nux_worker_orphan) so that a late callback or
 * transfer never touches freed memory. */
typedef struct {
  int status;          /* ucs_status_t, 0 until the endpoint fails (atomic) */
  uint64_t notice_out; /* the count this comm's close notice carries */
  uint64_t notice_in;  /* the count in the peer's close notice, once received */
} nux_epctx_t;

struct nux_comm;

typedef struct nux_req {
  struct nux_comm* comm;
  bool used;
  int n;                        /* buffers (1 for a send) */
  int pending;                  /* UCX requests not yet complete */
  void* ucx[NUX_MAX_RECVS];     /* UCX request handles; NULL once complete */
  size_t len[NUX_MAX_RECVS];    /* bytes sent or received */
  size_t posted[NUX_MAX_RECVS]; /* receive sizes, for messages */
  ncclResult_t error;
} nux_req_t;

/* Close notices. A comm that closes sends its peer one message in the peer's notice tag space
 * (nux_tag_notice) carrying the count of its messages that completed without error (a send comm:
 * sends; a receive comm: receives). Each comm keeps a receive posted for its peer's notice. Once
 * the notice is in, a request of the survivor that is still pending fails with ncclRemoteError as
 * soon as the survivor has completed as many messages as the notice says:
 *   - a receive: every message the sender sent is in, so nothing is left to match it;
 *   - a send: as many sends have completed as the receiver received, so the receiver took no more
 *     (an eager send completes locally before it is received, which can only make this later).
 * Until then messages are still in flight and the request waits for them. A send cancelled by
 * its comm's close is not counted, so the receiver never waits for it. */
typedef struct {
  uint32_t own_id;  /* this comm's id on its worker: the peer's notice arrives there */
  uint32_t peer_id; /* the peer comm's id on its worker: our notice goes there (0: none) */
  void* recv_req;   /* the posted receive for the peer's notice; NULL once in or never posted */
  void* wire_req;   /* a flush of the comm's endpoint, issued at creation so that UCX wires it
                     * up while both sides are still in connect/accept and progress (a message
                     * sent on an endpoint that was never wired up needs the peer to progress;
                     * and UCX 1.13's tcp transport aborts on an assertion when the peer dies
                     * while a wireup message of ours waits for the connection); NULL once done */
  bool peer_closed; /* the notice is in: epctx->notice_in holds its count */
  uint64_t done;    /* messages this comm completed without error, as test() saw them */
} nux_notice_t;

typedef struct nux_comm {
  bool is_send;
  nux_worker_t* worker;
  ucp_ep_h ep;
  nux_epctx_t* epctx;
  uint32_t comm_id; /* data tag space (receiver's id; the sender learns it in the reply) */
  nux_notice_t notice;
  uint64_t err_since_ms; /* receive comm: when its endpoint's failure was first seen (0: not) */
  nux_req_t reqs[NUX_MAX_REQS];
  int nused;
  bool error_logged;
  ucs_status_t wire_status; /* why the endpoint's wireup failed (UCS_OK: it has not) */
  char peer[64];
} nux_comm_t;

/* Creates a comm with an endpoint to the peer worker address (w->lock not held): data tag space
 * comm_id, close notices received on own_id and sent to peer_id (see nux_notice_t). */
ncclResult_t nux_comm_create(nux_worker_t* w, bool is_send, uint32_t comm_id, uint32_t own_id,
                             uint32_t peer_id, const void* peer_addr, const char* peer,
                             nux_comm_t** comm_p);
void nux_comm_destroy(nux_comm_t* comm);
/* Whether the comm's endpoint is wired up (w->lock not held; the caller progresses the worker):
 * 1 yes, 0 not yet, -1 its wireup failed (comm->wire_status says why). */
int nux_comm_wired(nux_comm_t* comm);

ncclResult_t nux_listen(nux_ctx_t* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t nux_connect(nux_ctx_t* ctx, int dev, void* handle, void** send_comm);
ncclResult_t nux_accept(void* listen_comm, void** recv_comm);
ncclResult_t nux_close_listen(void* listen_comm);
ncclResult_t nux_close_send(void* send_comm);
ncclResult_t nux_close_recv(void* recv_comm);

ncclResult_t nux_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t nux_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
ncclResult_t nux_dereg_mr(void* comm, void* mhandle);
ncclResult_t nux_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request);
ncclResult_t nux_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                       void** mhandles, void** request);
ncclResult_t nux_iflush(void* recv_comm, int n, void** request);
ncclResult_t nux_test(void* request, int* done, int* sizes);

#endif
