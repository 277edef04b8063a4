/*
 * net-ib: Choir's InfiniBand / RoCE net plugin (libnccl-net-ib.so, table name "IB"). Internal
 * header: one core implementation (nib_*), which nib_abi.c wraps in the five exported tables
 * (v12 .. v8).
 *
 * Verbs come from libibverbs.so.1, opened at run time (nib_verbs.c): the plugin never links it,
 * so it loads on machines without RDMA and then reports no devices.
 *
 * Objects:
 *   - devices: every ACTIVE port of every HCA that NCCL_IB_HCA selects; each keeps its verbs
 *     context open, a protection domain and a registration cache (refcounted ranges) for the
 *     life of the process (nib_dev.c);
 *   - a connection: a send comm and a receive comm, each with its own completion queue and
 *     NCCL_IB_QPS_PER_CONNECTION RC queue pairs connected to the other's, set up over a TCP
 *     socket from the listen handle (nib_conn.c). The socket stays open: its closing tells a
 *     comm that its peer has gone (killed or closed).
 * Data (nib_xfer.c), receiver-driven as NCCL's own IB transport is:
 *   - irecv takes the next of NCCL_NET_MAX_REQUESTS slots, posts one receive work request per
 *     buffer and RDMA-writes the buffers' addresses, keys, sizes and tags (one FIFO element per
 *     buffer, stamped with the slot's sequence number) into the sender's FIFO;
 *   - isend waits (returns no request) until the FIFO element of its slot and tag is there, then
 *     RDMA-writes the data into the receiver's buffer and, behind it on the same queue pair, the
 *     size into the receiver's size table with immediate data naming the slot and buffer;
 *   - the receiver's completion of that immediate write completes the buffer; the sender's
 *     completion of it (RC: acknowledged, so the data is in place) completes the send.
 */
#ifndef NIB_H
#define NIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "nccl_net.h"
#include "nib_util.h"
#include "sock_if.h"

/* ---- Logging: only through the core's logger ------------------------------------------------ */

extern ncclDebugLogger_t nib_logger;
#define NIB_WARN(...)                                                                     \
  do {                                                                                    \
    ncclDebugLogger_t nib_l_ = nib_logger;                                                \
    if (nib_l_ != NULL) nib_l_(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define NIB_INFO(flags, ...)                                                             \
  do {                                                                                   \
    ncclDebugLogger_t nib_l_ = nib_logger;                                               \
    if (nib_l_ != NULL) nib_l_(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- Verbs, opened at run time (nib_verbs.c) ------------------------------------------------ */

typedef struct {
  void* lib;
  struct ibv_device** (*get_device_list)(int*);
  void (*free_device_list)(struct ibv_device**);
  const char* (*get_device_name)(struct ibv_device*);
  __be64 (*get_device_guid)(struct ibv_device*);
  struct ibv_context* (*open_device)(struct ibv_device*);
  int (*close_device)(struct ibv_context*);
  int (*query_device)(struct ibv_context*, struct ibv_device_attr*);
  int (*query_port)(struct ibv_context*, uint8_t, struct _compat_ibv_port_attr*);
  int (*query_gid)(struct ibv_context*, uint8_t, int, union ibv_gid*);
  int (*query_gid_ex)(struct ibv_context*, uint32_t, uint32_t, struct ibv_gid_entry*, uint32_t,
                      size_t); /* optional (rdma-core >= 32) */
  struct ibv_pd* (*alloc_pd)(struct ibv_context*);
  int (*dealloc_pd)(struct ibv_pd*);
  struct ibv_mr* (*reg_mr)(struct ibv_pd*, void*, size_t, int);
  int (*dereg_mr)(struct ibv_mr*);
  struct ibv_cq* (*create_cq)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
  int (*destroy_cq)(struct ibv_cq*);
  struct ibv_qp* (*create_qp)(struct ibv_pd*, struct ibv_qp_init_attr*);
  int (*modify_qp)(struct ibv_qp*, struct ibv_qp_attr*, int);
  int (*destroy_qp)(struct ibv_qp*);
  int (*get_async_event)(struct ibv_context*, struct ibv_async_event*);
  void (*ack_async_event)(struct ibv_async_event*);
  const char* (*wc_status_str)(enum ibv_wc_status);
  const char* (*event_type_str)(enum ibv_event_type);
} nib_verbs_t;

extern nib_verbs_t nib_v;
/* Opens the library (name: CHOIR_IB_LIBVERBS, default libibverbs.so.1) once; false (with
 * *why set) when it or a required symbol is missing. */
bool nib_verbs_open(const char** why);
/* ibv_query_port through the context's extended op when present (as verbs.h's inline does). */
int nib_query_port(struct ibv_context* ctx, uint8_t port, struct ibv_port_attr* attr);

/* ---- Devices (nib_dev.c) -------------------------------------------------------------------- */

#define NIB_MAX_DEVS 32
#define NIB_MAGIC 0x43686f69724e4942ULL /* "ChoirNIB" */

typedef struct {
  void* addr; /* page-aligned start */
  size_t len; /* page multiple */
  struct ibv_mr* mr;
  int refs;
} nib_mr_entry_t;

typedef struct {
  char name[80]; /* "mlx5_0:1" as logged and reported */
  char hca[64];  /* "mlx5_0" */
  int port;
  struct ibv_context* ctx;
  struct ibv_pd* pd;
  int link_layer; /* IBV_LINK_LAYER_* */
  uint16_t lid;
  enum ibv_mtu mtu;
  int gid_index;
  union ibv_gid gid;
  uint32_t max_msg;
  int max_qp_wr, max_cqe, max_sge;
  int speed; /* Mbit/s */
  uint64_t guid;
  char* pci_path;
  pthread_mutex_t lock; /* the registration cache */
  nib_mr_entry_t* mrs;
  int nmrs, cap_mrs;
  uint64_t async_next_ms; /* next check of the async event queue */
} nib_dev_t;

typedef struct {
  pthread_mutex_t lock; /* init, async events */
  bool initialized;
  int ndev;
  nib_dev_t dev[NIB_MAX_DEVS];
  nib_knobs_t knobs;
  sock_addr_t hs;       /* the handshake address (NCCL_SOCKET_IFNAME, port 0) */
  char hs_if[SOCK_IFNAME_MAX];
  bool hs_ok;
} nib_global_t;

extern nib_global_t nib_g;

ncclResult_t nib_init(ncclDebugLogger_t logger);
ncclResult_t nib_devices(int* ndev);
ncclResult_t nib_get_properties(int dev, ncclNetProperties_v12_t* props);
/* Logs what the device's async event queue holds (port down, QP fatal ...), at most every
 * 100 ms per device; never blocks. */
void nib_dev_async_poll(nib_dev_t* d);
uint64_t nib_now_ms(void);

/* ---- Comms (nib_conn.c, nib_xfer.c) --------------------------------------------------------- */

#define NIB_MAX_REQS NCCL_NET_MAX_REQUESTS

/* One FIFO element: a buffer of a posted multi-receive, as the receiver writes it into the
 * sender's memory. seq is last so that an element whose seq is current was written whole. */
typedef struct {
  uint64_t addr;
  uint64_t size;
  uint32_t rkey;
  int32_t tag;
  uint32_t nreqs; /* buffers in this receive */
  uint32_t qp;    /* the queue pair the message must come on (a receive WR waits there) */
  uint64_t seq;   /* the receive's sequence number, from 1 */
} nib_fifo_elem_t;

/* What each side sends the other over the handshake socket. */
typedef struct {
  uint64_t magic;
  uint64_t listen_id; /* the listener's, echoed */
  uint32_t nqps;
  uint32_t qpn[NIB_MAX_QPS];
  uint32_t psn;
  uint16_t lid;
  uint8_t link_layer;
  uint8_t mtu;
  uint8_t gid[16];
  uint64_t addr; /* sender: its FIFO; receiver: its size table */
  uint32_t rkey;
  uint32_t reserved;
} nib_qp_info_t;

struct nib_comm;

typedef struct nib_req {
  struct nib_comm* comm;
  bool used;
  int n;       /* buffers (1 for a send) */
  int pending; /* buffers (or the send) not yet complete */
  size_t len[NIB_MAX_RECVS];
  ncclResult_t error;
} nib_req_t;

typedef struct nib_comm {
  bool is_send;
  nib_dev_t* dev;
  int fd; /* the handshake socket, kept to learn of the peer's end */
  struct ibv_cq* cq;
  int nqps;
  struct ibv_qp* qp[NIB_MAX_QPS];
  /* The sender's FIFO, written by the receiver (send comm), or the receiver's local copy it
   * writes from (receive comm). */
  nib_fifo_elem_t (*fifo)[NIB_MAX_RECVS];
  struct ibv_mr* fifo_mr;
  /* The receiver's size table, written by the sender (receive comm), or the sender's staging of
   * the sizes it writes (send comm). */
  uint64_t (*sizes)[NIB_MAX_RECVS];
  struct ibv_mr* sizes_mr;
  uint64_t remote_addr; /* send: the receiver's size table; receive: the sender's FIFO */
  uint32_t remote_rkey;
  uint32_t psn_init; /* first packet sequence number of this comm's queue pairs */
  uint64_t seq; /* receive: receives posted; send: FIFO slots fully consumed */
  int next_qp;  /* receive: round-robin of messages over queue pairs */
  /* Receive: the receive slots. Send: one request per (slot, buffer), and per slot which of the
   * FIFO elements got their send. */
  nib_req_t reqs[NIB_MAX_REQS];
  nib_req_t sreqs[NIB_MAX_REQS][NIB_MAX_RECVS];
  bool slot_sent[NIB_MAX_REQS][NIB_MAX_RECVS];
  int nused;
  int wr_outstanding[NIB_MAX_QPS]; /* signaled send WRs not yet completed, per queue pair */
  ncclResult_t error; /* sticky: a failed completion or a gone peer */
  uint64_t peer_gone_ms; /* when the socket was seen closed (0: not) */
  uint64_t peer_check_ms;
  char peer[64];
} nib_comm_t;

/* Creates a comm's completion queue, queue pairs (INIT) and its FIFO or size table. */
ncclResult_t nib_comm_create(nib_dev_t* d, bool is_send, const char* peer, nib_comm_t** comm_p);
/* Fills what the peer needs from this comm. */
void nib_comm_info(const nib_comm_t* c, uint64_t listen_id, nib_qp_info_t* info);
/* Moves the queue pairs to RTR then RTS against the peer's info; errors name the step. */
ncclResult_t nib_comm_connect_qps(nib_comm_t* c, const nib_qp_info_t* peer);
void nib_comm_destroy(nib_comm_t* c);

ncclResult_t nib_listen(int dev, void* handle, void** listen_comm);
ncclResult_t nib_connect(int dev, void* handle, void** send_comm);
ncclResult_t nib_accept(void* listen_comm, void** recv_comm);
ncclResult_t nib_close_listen(void* listen_comm);
ncclResult_t nib_close_send(void* send_comm);
ncclResult_t nib_close_recv(void* recv_comm);

ncclResult_t nib_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t nib_dereg_mr(void* comm, void* mhandle);
/* The keys of a handle from nib_reg_mr. */
uint32_t nib_mh_lkey(void* mhandle);
uint32_t nib_mh_rkey(void* mhandle);
ncclResult_t nib_isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request);
ncclResult_t nib_irecv(void* recv_comm, int n, void** data, const size_t* sizes, const int* tags,
                       void** mhandles, void** request);
ncclResult_t nib_iflush(void* recv_comm, int n, void** request);
ncclResult_t nib_test(void* request, int* done, int* sizes);

#endif
