/*
 * net-socket: Choir's TCP net plugin (libnccl-net-socket.so, table name "Socket"). Internal
 * header: one core implementation (nsk_*), which nsk_abi.c wraps in the five exported tables
 * (v12 .. v8).
 *
 * A connection is one control socket plus nthreads * nsocks data sockets, all opened by the
 * sender. Every request's data is cut into one contiguous piece per data socket (at least
 * NSK_MIN_CHUNK bytes each, so small requests use few sockets); helper threads (nthreads, each
 * owning nsocks sockets) move the pieces. With no helper thread the caller's test() moves them.
 * The control socket carries, per send and in posting order, the send's size (8 bytes), so that
 * the receiver knows how the request is cut before it reads the data sockets. Small requests
 * (1..inline_max bytes, the sender's limit, adopted by the receiver at connect) follow their
 * size on the control socket instead, moved by the caller's thread: no helper thread has to wake
 * up for them.
 */
#ifndef NSK_H
#define NSK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net.h"
#include "nccl_profiler_net_socket_v1.h"
#include "sock_if.h"

/* ---- Logging: only through the core's logger (nsk_dev.c) ------------------------------------ */

extern ncclDebugLogger_t nsk_logger;
#define NSK_WARN(...)                                                                     \
  do {                                                                                    \
    ncclDebugLogger_t nsk_l_ = nsk_logger;                                                \
    if (nsk_l_ != NULL) nsk_l_(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define NSK_INFO(flags, ...)                                                             \
  do {                                                                                   \
    ncclDebugLogger_t nsk_l_ = nsk_logger;                                               \
    if (nsk_l_ != NULL) nsk_l_(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- Limits and defaults -------------------------------------------------------------------- */

#define NSK_MAX_DEVS 64
#define NSK_MAX_SOCKS 64               /* data sockets per connection, nthreads * nsocks */
#define NSK_MAX_THREADS 16             /* NCCL_SOCKET_NTHREADS upper bound (NCCL's) */
#define NSK_DEFAULT_NTHREADS 1         /* measured on 4 x H200 over loopback, see README.md */
#define NSK_DEFAULT_NSOCKS 2           /* sockets per helper thread */
#define NSK_MIN_CHUNK (64 * 1024)      /* smallest piece of a request given to one socket */
#define NSK_DEFAULT_SPIN_US 1000       /* helper polling after its last move, see README.md */
#define NSK_DEFAULT_INLINE (16 * 1024) /* requests this small travel on the control socket */
#define NSK_MAX_INLINE (16 * 1024 * 1024)
#define NSK_MAX_SPIN_US 1000000
#define NSK_MAX_REQS NCCL_NET_MAX_REQUESTS
/* Largest request: test() reports sizes as int. */
#define NSK_MAX_BYTES ((size_t)0x7ffff000)
#define NSK_MAGIC 0x43686f69724e534bULL /* "ChoirNSK" */

/* ---- Devices (nsk_dev.c) -------------------------------------------------------------------- */

typedef struct {
  sock_if_t iface;
  char* pci_path; /* realpath of /sys/class/net/<if>/device, or NULL */
  int speed;      /* Mbit/s */
} nsk_dev_t;

typedef struct {
  int ndev;
  nsk_dev_t dev[NSK_MAX_DEVS];
  int nthreads;   /* helper threads per connection (sender side; 0 = progress in test()) */
  int nsocks;     /* data sockets per helper thread (total data sockets without helpers) */
  int spin_us;    /* a helper polls this long after its last move before it sleeps */
  int inline_max; /* sender side: requests of at most this many bytes go on the control socket */
} nsk_global_t;

extern nsk_global_t nsk_g;

/* One-time setup: logger, interfaces, knobs. Later calls only fill a missing logger. */
ncclResult_t nsk_init(ncclDebugLogger_t logger);
ncclResult_t nsk_devices(int* ndev);
/* Properties in the newest layout; the adapters copy what their version has. */
ncclResult_t nsk_get_properties(int dev, ncclNetProperties_v12_t* props);

/* ---- Connections and transfers (nsk_conn.c, nsk_xfer.c) -------------------------------------- */

/* What travels through NCCL's 128-byte handle from listen() to connect(). */
typedef struct {
  uint64_t magic;
  uint64_t listen_id; /* tells this listener's connections from a stale peer's */
  sock_addr_t addr;
} nsk_handle_t;

/* First bytes on every socket of a connection, sender to receiver. */
typedef struct {
  uint64_t magic;
  uint64_t listen_id;
  uint64_t conn_id;  /* same for every socket of one connection */
  uint32_t index;    /* 0: control socket; 1..n: data socket index + 1 */
  uint16_t nthreads; /* the sender's counts, which the receiver adopts */
  uint16_t nsocks;
  uint32_t inline_max; /* the sender's control-socket limit, which the receiver adopts */
  uint32_t reserved;
} nsk_hello_t;

/* A hello that can be from a sender of this listener: its magic and listen id, counts within
 * the limits, an index within its own count of sockets. */
bool nsk_hello_ok(const nsk_hello_t* h, uint64_t listen_id);

struct nsk_comm;
struct nsk_req;

/* One request's piece on one data socket. */
typedef struct {
  struct nsk_req* req;
  char* buf;
  size_t len;
  size_t done;
} nsk_task_t;

typedef struct {
  int fd;
  /* Single-producer (the comm's caller) / single-consumer (the owning worker) ring of pieces,
   * guarded by the worker's lock. At most one piece per request, so NSK_MAX_REQS slots. */
  nsk_task_t ring[NSK_MAX_REQS];
  unsigned head, tail;
} nsk_sock_t;

/* A helper thread and the sockets it owns; with no helper thread, one of these is progressed by
 * the caller. */
typedef struct {
  struct nsk_comm* comm;
  pthread_t thread;
  bool started;
  pthread_mutex_t lock;
  int wake_fd; /* eventfd the producer writes when the worker sleeps */
  bool sleeping;
  bool stop;
  int first, count; /* data sockets [first, first + count) */
} nsk_worker_t;

enum { NSK_REQ_FREE = 0, NSK_REQ_POSTED, NSK_REQ_DONE };

typedef struct nsk_req {
  struct nsk_comm* comm;
  int state;
  char* data;
  size_t size;      /* send: bytes to send; recv: room posted */
  size_t nbytes;    /* bytes the sender sent (recv: known once the header is in) */
  bool header_done; /* send: size written to the control socket; recv: read from it */
  int pending;      /* pieces not yet moved (atomic) */
  void* pev;        /* the core's NetPlugin event of this request (nsk_prof_cb), or NULL */
  ncclProfilerNetSockDescr_v1_t pdesc; /* its payload, alive as long as the event */
} nsk_req_t;

/* The profiler callback of the core (v10+ init), or NULL: each request posted with a profiler
 * handle reports one ncclProfileSocket event (the control socket's fd, NSK_PROF_OP_*, its
 * length; a receive's length updated to what arrived at completion). */
extern ncclProfilerCallback_t nsk_prof_cb;
enum { NSK_PROF_OP_SEND = 0, NSK_PROF_OP_RECV = 1 };

typedef struct nsk_comm {
  bool is_send;
  int ctrl_fd;
  int nsocks_total;
  int nthreads;
  nsk_sock_t socks[NSK_MAX_SOCKS];
  nsk_worker_t workers[NSK_MAX_THREADS]; /* nthreads, or one progressed inline */
  int nworkers;
  nsk_req_t reqs[NSK_MAX_REQS]; /* ring in posting order */
  unsigned rq_head, rq_tail;    /* posted = [rq_head, rq_tail) */
  unsigned hdr_next;            /* next request whose header is due on the control socket */
  uint64_t hdr_buf;             /* header being moved */
  size_t hdr_done;              /* bytes of hdr_buf moved */
  size_t inline_max;            /* requests of 1..inline_max bytes follow their header on the
                                   control socket, moved by the caller (no helper handoff) */
  size_t inline_done;           /* payload bytes of request hdr_next moved so far */
  int error;                    /* ncclResult_t, atomic; sticky once set */
  bool error_logged;
  char peer[64]; /* "address" of the peer, for messages */
} nsk_comm_t;

/* Creates a comm from connected sockets (ctrl + data), starting its helper threads. */
ncclResult_t nsk_comm_create(bool is_send, int ctrl_fd, const int* data_fds, int nthreads,
                             int nsocks, size_t inline_max, const char* peer, nsk_comm_t** comm_p);
void nsk_comm_destroy(nsk_comm_t* comm);

ncclResult_t nsk_listen(int dev, void* handle, void** listen_comm);
ncclResult_t nsk_connect(int dev, void* handle, void** send_comm);
ncclResult_t nsk_accept(void* listen_comm, void** recv_comm);
ncclResult_t nsk_close_listen(void* listen_comm);
ncclResult_t nsk_close_send(void* send_comm);
ncclResult_t nsk_close_recv(void* recv_comm);

ncclResult_t nsk_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t nsk_reg_mr_dmabuf(void* comm, void* data, size_t size, int type, uint64_t offset,
                               int fd, void** mhandle);
ncclResult_t nsk_dereg_mr(void* comm, void* mhandle);
/* phandle: the core's profiler handle of the request (v10+), or NULL. */
ncclResult_t nsk_isend(void* send_comm, void* data, size_t size, void* phandle, void** request);
ncclResult_t nsk_irecv(void* recv_comm, int n, void** data, const size_t* sizes, void* phandle,
                       void** request);
ncclResult_t nsk_iflush(void* recv_comm, int n, void** request);
ncclResult_t nsk_test(void* request, int* done, int* sizes);

/* Sockets (nsk_conn.c). "Try" calls never block: *n_p bytes moved (maybe 0); a closed or reset
 * peer is ncclRemoteError, other failures ncclSystemError, each with a WARN naming `what`. */
ncclResult_t nsk_try_send(int fd, const void* buf, size_t len, size_t* n_p, const char* what,
                          const char* peer);
ncclResult_t nsk_try_recv(int fd, void* buf, size_t len, size_t* n_p, const char* what,
                          const char* peer);

#endif
