/*
 * core/transport: connections between two ranks of a communicator for the data path. A
 * connection is one direction (send end on one rank, receive end on the other) and ends up as a
 * kern_conn_t (kernels.h) the kernels drive: a KERN_NSLOTS-slot buffer on the receiving side plus
 * the head/tail counters. Transports:
 *   p2p  same host, CUDA peer access between the two GPUs: the receive buffer and tail live in
 *        the receiver's GPU memory, head in the sender's; the sender's GPU writes the buffer over
 *        NVLink/PCIe. Within one process the pointers are shared directly (peer access enabled);
 *        across processes through CUDA IPC handles exchanged over the bootstrap.
 *   shm  same host, no p2p (or NCCL_P2P_DISABLE=1): buffer and counters in host shared memory,
 *        registered with CUDA and mapped into both processes.
 *   net  another host, or the same host with p2p and shm both off: through the net plugin
 *        (plugin_net.h), progressed by the proxy thread (core/proxy); buffers in host memory.
 * This is the module's only header for the rest of the core.
 */
#ifndef CHOIR_TRANSPORT_H
#define CHOIR_TRANSPORT_H

#include <stdint.h>

#include "base.h"
#include "bootstrap.h"
#include "topo.h"
#include "kernels.h"
#include "prof.h"

typedef struct transport transport_t; /* one per communicator */

/* What the transport needs to know about every rank (all-gathered by the communicator). */
typedef struct transport_peer {
  uint64_t host_hash; /* sys_host_hash() */
  uint64_t pid_hash;  /* sys_pid_hash(): equal means same process */
  int64_t bus_id;     /* cuda_bus_id() form */
  int32_t cuda_dev;
  int32_t pid;
} transport_peer_t;

/* Optional policy hook (the topology module's rules: NCCL_P2P_LEVEL, path types). Returns 1 when
 * p2p between this rank and peer is allowed by the topology, 0 when not; *use_read_p is set to 1
 * when the receiver should read from the sender's buffer instead (may be ignored: write mode). */
typedef int (*transport_p2p_policy_fn)(void* ctx, int peer, int* use_read_p);

/* Create the transport state of one communicator. peers: nranks entries (copied). bs and
 * abort_flag must outlive the transport. The current CUDA device must be the rank's device. */
ncclResult_t transport_create(bootstrap_t* bs, int rank, int nranks, int cuda_dev,
                              const transport_peer_t* peers, volatile uint32_t* abort_flag,
                              transport_p2p_policy_fn policy, void* policy_ctx,
                              transport_t** t_p);
/* Free every buffer, IPC mapping and shm segment of every connection made. Kernels using them
 * must have finished. Safe with NULL. */
void transport_destroy(transport_t* t);

/* Which transport a connection with peer would use (p2p, shm; net for another host), by the
 * same rule transport_connect applies. For logs, planning and tests. */
kern_transport_t transport_kind(transport_t* t, int peer);
const char* transport_kind_name(kern_transport_t kind);

/* One connection end wanted. */
typedef struct transport_req {
  int32_t peer;       /* another rank (not this one) */
  int32_t is_send;    /* 1: this rank sends to peer; 0: this rank receives from peer */
  int32_t id;         /* tells apart the connections with one peer in one call: both ends use
                       * the same id for the two ends of one connection (e.g. channel index) */
  /* Slot size per protocol (kern_proto_t), a multiple of 128; 0: the protocol is not made.
   * SIMPLE is always made. Both ends must agree on every entry. Where the transport shares
   * the SIMPLE buffer with a protocol (transport_shared_protos), that protocol's slot is the
   * SIMPLE slot whatever is asked here, as long as it is not 0. */
  uint32_t slot_bytes[KERN_PROTO_NUM];
  kern_conn_t* out;   /* host memory; filled on success (step 0, connected 1) */
  const void* key;    /* the end's name for transport_prof_op, stable after the call (NULL: out) */
} transport_req_t;

/*
 * Where each protocol's buffer lives, per transport kind: the protocols (bit 1u << kern_proto_t)
 * that share the SIMPLE buffer and synchronize through tail (kern_conn_t.tail_sync) instead of
 * polling their lines' flags. The others get a buffer of their own, zeroed at creation (LL and
 * LL128 lines carry flags from step + 1 >= 1, so a zeroed line is never valid):
 *   p2p  none: SIMPLE, LL and LL128 each their own buffer in GPU memory, LL and LL128 polled;
 *   shm  LL128 (PCIe does not keep 128-byte stores to host memory whole); LL its own buffer;
 *   net  LL and LL128 (the proxy moves whole slots; sizes[] carries the line bytes).
 */
uint32_t transport_shared_protos(kern_transport_t kind);

/* The slot sizes a connection of `kind` gets from the requested ones (both ends compute the
 * same): a protocol sharing the SIMPLE buffer (transport_shared_protos) gets SIMPLE's slot,
 * others keep theirs; 0 stays 0. */
void transport_slots_effective(kern_transport_t kind, const uint32_t req[KERN_PROTO_NUM],
                               uint32_t out[KERN_PROTO_NUM]);

/*
 * Connect a set of connection ends. For every request (peer, is_send, id) here, the peer must
 * make the mirror request (this rank, !is_send, id) in a transport_connect call with the same
 * tag; the calls exchange what they need over the bootstrap, peer by peer (a rank only talks to
 * the peers it names). Blocks until every named peer has answered (bounded by the bootstrap's
 * timeout and abort flag). On failure nothing of this call stays allocated and every out is left
 * untouched. Several connects may run at once on different communicators (threads).
 */
ncclResult_t transport_connect(transport_t* t, transport_req_t* reqs, int nreqs, int tag);

/* The network a communicator would use (net_name, comm_id, traffic_class as for
 * transport_set_net), opened only to describe its devices as the topology's NICs, then closed:
 * for the topology search at creation, before the transport exists. *nics_p: *n_p entries with
 * their own strings; free with transport_nics_free. No usable network: its error (WARN). */
ncclResult_t transport_net_nics(const char* net_name, uint64_t comm_id, int traffic_class,
                                topo_nic_props_t** nics_p, int* n_p);
void transport_nics_free(topo_nic_props_t* nics, int n); /* safe with NULL */
/* At creation, when a network is named (config.netName, NCCL_NET): fail unless one of that name
 * exists, with a WARN listing those that do (net_check_name). No name: nothing is opened. */
ncclResult_t transport_net_check_name(const char* net_name);

/* Inputs of the network choice, made at the first net connection: config.netName (NCCL_NET
 * overrides it; NULL: any), the communicator's id and traffic class (-1: undefined), and the
 * flag the kernels poll (host address), raised by the proxy on a network failure. */
ncclResult_t transport_set_net(transport_t* t, const char* net_name, uint64_t comm_id,
                               int traffic_class, volatile uint32_t* kernel_abort);
/* Around every kernel launch that may use this transport's connections (capturing: the launch
 * goes into a CUDA graph): lets the proxy thread sleep between operations. No-ops without
 * network connections. */
ncclResult_t transport_launch_begin(transport_t* t, cudaStream_t stream, int capturing);
ncclResult_t transport_launch_end(transport_t* t, cudaStream_t stream);
/* Undo a transport_launch_begin whose kernel was never launched (an error in between): at once
 * when the begin was immediate, in the stream when it was captured. */
void transport_launch_abandon(transport_t* t, cudaStream_t stream, int capturing);

/* Profiling (core/prof): the communicator's profiler for the proxy's ProxyOp/ProxyStep events
 * (NULL: none), given before the first network connection (the proxy takes it at its creation);
 * and, before a launch outside CUDA-graph capture, the steps it moves through a network
 * connection end: key is the transport_req_t.key (or out) it was connected with, parent the
 * launch's Coll or P2p event (proxy.h, proxy_prof_op). No-op for other ends. */
void transport_prof_attach(transport_t* t, prof_t* prof);
void transport_prof_op(transport_t* t, const void* key, void* parent, uint32_t nsteps, int chunk,
                       int channel);
/* ncclSuccess, or the network error that stopped the proxy; msg and peer_p (optional) as
 * proxy_error's. */
ncclResult_t transport_async_error(const transport_t* t, char* msg, size_t size, int* peer_p);

/* Bytes of device memory and of host shared memory allocated by this transport so far. */
void transport_mem_usage(const transport_t* t, uint64_t* dev_bytes_p, uint64_t* host_bytes_p);

#endif
