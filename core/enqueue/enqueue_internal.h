/*
 * Private to core/enqueue: the data-path state of a communicator, shared by the files that set
 * it up (enqueue_comm.c), plan and launch its operations (enqueue_plan.c), and run groups
 * (enqueue_group.c).
 */
#ifndef CHOIR_ENQUEUE_INTERNAL_H
#define CHOIR_ENQUEUE_INTERNAL_H

#include <cuda_runtime_api.h>

#include "enqueue.h"
#include "kernels.h"
#include "nccl_common.h"

/* Setup work (allocations, IPC, uploads on a private stream) may run while the application
 * captures a CUDA graph, even in the global capture mode that forbids such calls; like NCCL,
 * relax the calling thread's capture mode around it and restore it after. */
static inline enum cudaStreamCaptureMode enq_capture_relax(void) {
  enum cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  return mode;
}
static inline void enq_capture_restore(enum cudaStreamCaptureMode mode) {
  cudaThreadExchangeStreamCaptureMode(&mode);
}

/* Bootstrap tags of the data path's connection rounds. */
#define ENQ_TAG_RING 0x43520001
#define ENQ_TAG_P2P 0x43520002

/* A user-created reduction operator (ncclRedOpCreatePreMulSum). */
typedef struct enq_redop {
  int live;
  ncclDataType_t type;
  ncclScalarResidence_t residence;
  uint64_t scalar_bits;    /* host-immediate scalar, as memcpy leaves it */
  const void* scalar_ptr;  /* device-resident scalar: the user's pointer, read by the kernel */
} enq_redop_t;

struct enq_comm {
  int rank;
  int nranks;
  int cuda_dev;
  uint64_t comm_hash;
  char* net_name;  /* for the transport's choice of net plugin (NULL: any) */
  int traffic_class;
  bootstrap_t* bs;
  transport_t* transport;
  transport_peer_t* peers;
  volatile uint32_t* host_abort;

  /* Abort flag the kernels poll: pinned host memory mapped into the device. */
  uint32_t* abort_host;
  uint32_t* abort_dev;

  /* Device-side communicator and its host mirror (the mirror's connection steps are stale: the
   * kernels own them; uploads write only what changed). */
  kern_comm_t host_kc;
  kern_comm_t* dev_kc;
  int32_t* dev_ring_ranks; /* [nchannels][nranks] */
  int32_t* ring_ranks;     /* host copy */
  int32_t* graph_rings;    /* [ngraph_rings][nranks] from the topology search, or NULL */
  int ngraph_rings;
  transport_p2p_policy_fn p2p_policy;
  void* p2p_policy_ctx;
  kern_conn_t* dev_p2p;    /* [2][nranks * KERN_MAX_P2P_CHANNELS]: send, then recv */
  int nchannels;            /* ring channels, decided at the first collective */
  int min_ctas, max_ctas;   /* the communicator's config */
  int net_peer_nch;         /* config nChannelsPerNetPeer, -1: ENQ_NET_P2P_NCH */
  uint32_t ring_slot_bytes;
  int p2p_nch;             /* connections per peer and direction (p2p transport) */
  int cta_cap;             /* most CTAs of one launch (0: no cap): ranks sharing a GPU */
  uint8_t* p2p_nch_peer;   /* per peer: connections made per direction (0: not connected) */
  uint64_t dev_bytes;
  int device_ready; /* streams, events, device structures, transport: at the first operation */
  int ring_ready;   /* ring channels connected: at the first collective */

  cudaStream_t setup_stream; /* non-blocking: uploads never wait for the user's work */
  cudaEvent_t done_ev;       /* recorded after every launch outside capture */
  cudaEvent_t join_ev;       /* joins the streams of one launch */
  cudaStream_t last_stream;
  int launched;

  /* Operations collected by the current group, in call order. */
  enq_op_t* ops;
  int nops;
  int ops_cap;
  enq_comm_t* group_next; /* the thread's list of communicators with operations */
  int in_group;

  enq_redop_t* redops;
  int nredops;
};

/* enqueue_plan.c */
/* Connections the pending operations need that do not exist yet: 1 if any. */
int enqueue_plan_needs_connect(enq_comm_t* dp);
/* Make them (blocking, talks to the peers concerned). */
ncclResult_t enqueue_plan_connect(enq_comm_t* dp);
/* Plan and launch every pending operation, then clear the list. */
ncclResult_t enqueue_plan_launch(enq_comm_t* dp);
/* Estimated time in microseconds of the pending operations (ncclGroupSimulateEnd). */
float enqueue_plan_estimate(const enq_comm_t* dp);
void enqueue_plan_clear(enq_comm_t* dp);

/* enqueue_group.c */
/* Adds dp to the calling thread's group (once). */
void enqueue_group_add_comm(enq_comm_t* dp);

/* enqueue_comm.c */
void enqueue_redop_scalar(enq_comm_t* dp, ncclRedOp_t op, uint64_t* bits_p, const void** ptr_p);
/* Local device resources (no communication): at the first operation. */
ncclResult_t enqueue_comm_setup_device(enq_comm_t* dp);
/* Connect the ring channels (collective over all ranks): at the first collective. */
ncclResult_t enqueue_comm_connect_ring(enq_comm_t* dp);
/* Connect both directions with each listed peer (p2p channels), update the device structures. */
ncclResult_t enqueue_comm_connect_p2p(enq_comm_t* dp, const int* peers, int npeers);

/* CTAs one send/recv launch may use: all must be resident together, and with ranks sharing a
 * GPU, within the communicator's cap (enqueue_plan.c). */
int enq_p2p_batch_ctas(const enq_comm_t* dp);

#endif
