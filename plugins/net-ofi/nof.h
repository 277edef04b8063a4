/*
 * net-ofi: Choir's libfabric net plugin (libnccl-net-ofi.so, table name "OFI"). Internal header:
 * one core implementation (nof_*), which nof_abi.c wraps in the five exported tables (v12 .. v8).
 *
 * Model. Devices are the domains (NICs) of one provider with reliable datagram endpoints
 * (FI_EP_RDM) and tagged messages. Every comm (listen, send, receive) owns its own domain,
 * endpoint, address vector and completion queue, so calls on different comms never share a
 * libfabric object and need no lock (the ABI never runs two calls on one comm at once).
 *
 * Connection: listen opens an endpoint and puts its address in the handle. connect opens the send
 * comm's endpoint and sends a CONN message (its own address and id) to the listener; accept
 * takes a CONN, opens the receive comm's endpoint and sends an ACK (that endpoint's address and
 * id) back; connect completes when the ACK arrives, accept when the ACK's send has completed.
 *
 * Data: tagged messages, one per request; the tag carries the kind, the receiver comm's id and a
 * per-comm sequence number, so sends and receives match in posting order whatever order the
 * provider delivers in, and nothing of another (or an earlier) comm can match.
 *
 * Liveness: an RDM receive is bound to no connection, so a dead sender leaves it pending forever.
 * A comm with requests pending and no completion for the probe interval sends a small PROBE
 * message to its peer's endpoint (which always keeps a receive posted for them). A probe that
 * fails, or that the provider refuses (FI_EAGAIN) on every attempt while nothing completes for
 * the probe timeout, means the peer is gone, and the comm fails with ncclRemoteError.
 * (tcp;ofi_rxm refuses sends to a dead peer while it retries the connection, refused each time,
 * so the timeout is what catches it there.) A probe the provider took is waited for without
 * limit: it may queue behind data a live peer has not read yet.
 */
#ifndef NOF_H
#define NOF_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "nccl_net.h"

/* ---- Logging: only through the core's logger (nof_dev.c) ------------------------------------ */

extern ncclDebugLogger_t nof_logger;
#define NOF_WARN(...)                                                                     \
  do {                                                                                    \
    ncclDebugLogger_t nof_l_ = nof_logger;                                                \
    if (nof_l_ != NULL) nof_l_(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define NOF_INFO(flags, ...)                                                             \
  do {                                                                                   \
    ncclDebugLogger_t nof_l_ = nof_logger;                                               \
    if (nof_l_ != NULL) nof_l_(NCCL_LOG_INFO, (flags), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/* ---- Limits and defaults -------------------------------------------------------------------- */

#define NOF_MAX_DEVS 64
#define NOF_MAX_REQS NCCL_NET_MAX_REQUESTS
#define NOF_MAX_ADDR 80                    /* endpoint address bytes carried in handle/messages */
#define NOF_MAX_BYTES ((size_t)0x7ffff000) /* test() reports sizes as int */
#define NOF_MAGIC 0x43484f4eU              /* "CHON" */
#define NOF_CONN_RECVS 4                   /* CONN receives a listener keeps posted */
#define NOF_DEFAULT_PROBE_MS 1000
#define NOF_MAX_PROBE_MS 3600000
#define NOF_DEFAULT_PROBE_TIMEOUT_MS 10000
/* Oldest libfabric API this plugin asks for (fi_getinfo version); 1.14 has everything used. */
#define NOF_FI_VERSION FI_VERSION(1, 14)

/* ---- Tags (nof_util.c) ----------------------------------------------------------------------
 * 48 bits, the narrowest tag any RDM provider offers (cxi):
 *   [47:46] kind   [45:24] id of the comm the message is for   [23:0] sequence number
 * Data requests use the sequence number of their comm (posting order); control messages use 0. */
enum { NOF_TAG_DATA = 0, NOF_TAG_CONN = 1, NOF_TAG_ACK = 2, NOF_TAG_PROBE = 3 };
#define NOF_TAG_BITS 48
#define NOF_ID_BITS 22
#define NOF_SEQ_BITS 24
#define NOF_ID_MASK ((1u << NOF_ID_BITS) - 1)
#define NOF_SEQ_MASK ((1u << NOF_SEQ_BITS) - 1)
uint64_t nof_tag(int kind, uint32_t id, uint32_t seq);
void nof_tag_split(uint64_t tag, int* kind_p, uint32_t* id_p, uint32_t* seq_p);
/* A fresh comm id (1 .. NOF_ID_MASK, wrapping), unique among the process's next 4M comms. */
uint32_t nof_next_id(void);
/* A fresh requested_key for fi_mr_reg on a provider without FI_MR_PROV_KEY: never 0 (1.17 refuses
 * a second key 0 with FI_ENOKEY), never repeated within 2^(8 * key_size) - 1 registrations. */
uint64_t nof_next_key(size_t key_size);

/* ---- Knob parsing (nof_util.c), pure functions for the unit test -----------------------------
 * Integer in [lo, hi]; false when v is malformed or out of range. */
bool nof_parse_int(const char* v, long lo, long hi, long* out_p);
/* Whether name passes a comma list of prefixes: "^" first excludes them, "=" makes them exact
 * names (NCCL_SOCKET_IFNAME's syntax). NULL or "" passes everything. */
bool nof_list_match(const char* list, const char* name);
/* Whether provider name prov (as fi_info reports it, "tcp;ofi_rxm") is selected by want, a
 * comma list of names; each matches the full name or its first (core) component. */
bool nof_prov_match(const char* want, const char* prov);

/* ---- Devices (nof_dev.c) -------------------------------------------------------------------- */

typedef struct {
  struct fi_info* info;      /* one fi_info of the domain (owned: a fi_dupinfo copy) */
  struct fid_fabric* fabric; /* opened at init, shared by the device's comms */
  char* name;                /* "<domain>" for logs and props */
  char* pci_path;            /* sysfs path of the NIC's PCI function, or NULL */
  int speed;                 /* Mbit/s */
  float latency;             /* us */
  bool hmem;                 /* provider offers FI_HMEM: CUDA memory registrable */
  bool mr_local; /* local buffers need a registration (FI_MR_LOCAL or FI_MR_HMEM+CUDA) */
  uint64_t guid;
} nof_dev_t;

typedef struct {
  int ndev;
  nof_dev_t dev[NOF_MAX_DEVS];
  char prov[64];        /* provider chosen */
  int probe_ms;         /* liveness probe interval, 0 = none */
  int probe_timeout_ms; /* a probe refused this long (nothing completing) means the peer is gone */
  int reg_always;       /* register host memory even when the provider does not need it */
} nof_global_t;

extern nof_global_t nof_g;

ncclResult_t nof_init(ncclDebugLogger_t logger);
ncclResult_t nof_devices(int* ndev);
ncclResult_t nof_get_properties(int dev, ncclNetProperties_v12_t* props);

/* ---- Endpoints and comms (nof_conn.c) -------------------------------------------------------- */

/* What travels through NCCL's 128-byte handle from listen() to connect(). */
typedef struct {
  uint32_t magic;
  uint32_t listen_id; /* listener comm id (tag id of CONN messages) */
  uint16_t addrlen;
  uint16_t reserved[3];
  uint8_t addr[NOF_MAX_ADDR];
} nof_handle_t;

/* CONN (connector -> listener) and ACK (acceptor -> connector) messages. */
typedef struct {
  uint32_t magic;
  uint32_t id;      /* CONN: the send comm's id; ACK: the receive comm's id */
  uint32_t peer_id; /* CONN: the listener's id; ACK: the send comm's id */
  uint16_t addrlen;
  uint16_t reserved;
  uint8_t addr[NOF_MAX_ADDR];
} nof_ctrl_msg_t;

struct nof_ep;

/* Every posted operation's context: the provider hands it back in the completion. */
typedef struct {
  struct fi_context2 fictx; /* first: the provider's scratch space */
  int kind;                 /* NOF_OP_* */
  int state;                /* NOF_REQ_* */
  int error;                /* ncclResult_t of a failed operation */
  size_t len;               /* bytes moved, from the completion */
  struct nof_ep* ep;
} nof_op_t;

enum { NOF_OP_DATA = 0, NOF_OP_CTRL_TX, NOF_OP_CTRL_RX, NOF_OP_PROBE_TX, NOF_OP_PROBE_RX };
enum { NOF_REQ_FREE = 0, NOF_REQ_POSTED, NOF_REQ_DONE };

typedef struct nof_mr {
  struct fid_mr* mr; /* NULL: nothing registered (the provider does not need it) */
  void* desc;
  struct nof_mr *prev, *next; /* the comm's registrations, closed with the comm if left */
} nof_mr_t;

/* A libfabric endpoint with its own domain, address vector and completion queue. */
typedef struct nof_ep {
  int dev;
  struct fid_domain* domain;
  struct fid_ep* ep;
  struct fid_av* av;
  struct fid_cq* cq;
  uint8_t addr[NOF_MAX_ADDR];
  size_t addrlen;
  uint32_t id;          /* this comm's id (tags of messages for it) */
  nof_mr_t mrs;         /* list head of registrations */
  nof_mr_t* ctrl_mr;    /* registration of the control buffers below */
  int error;            /* ncclResult_t; sticky once set */
  double last_progress; /* monotonic s of the last completion (or of the last probe) */
  double probe_since;   /* monotonic s the current probe was first tried; 0: none */
  double probe_tried;   /* monotonic s of the last attempt to post it */
  /* Control traffic (connection messages, probes); one registration covers it all. */
  struct {
    nof_ctrl_msg_t tx;
    nof_ctrl_msg_t rx[NOF_CONN_RECVS];
    uint64_t probe_tx, probe_rx;
  } * ctrl;
  nof_op_t ctrl_tx_op;
  nof_op_t ctrl_rx_op[NOF_CONN_RECVS];
  nof_op_t probe_tx_op, probe_rx_op;
} nof_ep_t;

typedef struct nof_comm {
  nof_ep_t e;
  bool is_send;
  fi_addr_t peer;   /* the peer endpoint in e.av */
  uint32_t peer_id; /* the peer comm's id */
  uint32_t seq;     /* next data sequence number */
  nof_op_t reqs[NOF_MAX_REQS];
  int npending;
  char peer_str[64];
} nof_comm_t;

ncclResult_t nof_listen(int dev, void* handle, void** listen_comm);
ncclResult_t nof_connect(int dev, void* handle, void** send_comm);
ncclResult_t nof_accept(void* listen_comm, void** recv_comm);
ncclResult_t nof_close_listen(void* listen_comm);
ncclResult_t nof_close_send(void* send_comm);
ncclResult_t nof_close_recv(void* recv_comm);

/* Endpoint helpers shared by nof_conn.c and nof_xfer.c. */
ncclResult_t nof_ep_open(int dev, nof_ep_t* e);
void nof_ep_close(nof_ep_t* e);
/* Reads every completion the CQ has now, marking their ops; never blocks. */
ncclResult_t nof_ep_progress(nof_ep_t* e);
ncclResult_t nof_post_probe_rx(nof_ep_t* e);
double nof_now(void);

/* ---- Memory and transfers (nof_xfer.c) --------------------------------------------------------
 */

ncclResult_t nof_mr_reg(nof_ep_t* e, void* data, size_t size, int type, nof_mr_t** mr_p);
void nof_mr_close(nof_ep_t* e, nof_mr_t* m);
ncclResult_t nof_reg_mr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t nof_dereg_mr(void* comm, void* mhandle);
ncclResult_t nof_isend(void* send_comm, void* data, size_t size, void* mhandle, void** request);
ncclResult_t nof_irecv(void* recv_comm, int n, void** data, const size_t* sizes, void** mhandles,
                       void** request);
ncclResult_t nof_iflush(void* recv_comm, int n, void** request);
ncclResult_t nof_test(void* request, int* done, int* sizes);
/* Liveness: sends a probe when requests wait too long, and turns a failed probe into an error. */
ncclResult_t nof_comm_progress(nof_comm_t* c);

#endif
