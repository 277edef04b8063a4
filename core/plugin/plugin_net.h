/*
 * core/plugin: network plugins (ncclNet v6..v12, ncclCollNet v6..v12) as the core sees them.
 *
 * A net_t is one communicator's use of one loaded net plugin: the library (opened through
 * plugin_open, so Choir's own plugins and third-party ones take the same path), the table of the
 * version found, and the per-communicator context. Every version is driven through the
 * functions below, which present the newest contract (v12) whatever the plugin's version:
 *   - per-communicator init/finalize: native for v11+; for v6..v10 the plugin's one-time init
 *     runs once per library (reference-counted) and the context is emulated; v10 gets the
 *     communicator's traffic class at connect, as its ABI takes it there;
 *   - properties are converted to ncclNetProperties_v12_t with the documented defaults for what
 *     an old version lacks (regIsGlobal 0, forceFlush 0, netDeviceType HOST, vProps {1,{dev}},
 *     maxP2pBytes 1 GiB, maxCollBytes 512 MiB, maxMultiRequestSize 1, railId/planeId -1);
 *   - size limits of old versions are enforced here with a clear error instead of truncating
 *     (isend/irecv above 2^31-1 bytes for v6..v8, regMr of 2 GiB or more for v6/v7);
 *   - the optional-receive-completion hint reaches only v9+ plugins (reset to NULL before);
 *   - entries a plugin leaves NULL (regMrDmaBuf, getDeviceMr, irecvConsumed, makeVDevice,
 *     setNetAttr) answer ncclInvalidUsage "not supported by plugin <name>" where one is needed,
 *     and are skipped where they are only hints (setNetAttr).
 * Thread safety: the plugin's own rules (one thread per comm object at a time) apply; the
 * functions add no locking except around the shared reference counts.
 */
#ifndef CHOIR_PLUGIN_NET_H
#define CHOIR_PLUGIN_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "nccl_net.h"
#include "plugin.h"

typedef struct net net_t;

/*
 * Pick the network for a communicator, as NCCL does:
 *   candidates = the NCCL_NET_PLUGIN comma list (unset: libnccl-net.so; "none": no external
 *   entry), then Choir's own net plugins from its plugin directory (net-socket);
 *   net_name (config.netName; the NCCL_NET environment variable overrides it) skips every
 *   candidate whose table name differs (case-insensitive);
 *   the first candidate that loads, initializes for this communicator and has at least one
 *   device wins. One INFO NET line says which plugin (name, version, library) and why the ones
 *   before it were passed over.
 * Nothing usable: ncclInvalidUsage with a message naming what was tried (and net_name if set).
 */
ncclResult_t net_select(const char* net_name, uint64_t comm_id, int traffic_class, net_t** net_p);
/* Whether a network named net_name (NCCL_NET overrides it, as above) exists among the candidates
 * net_select would try: each is loaded to read its table's name, none is initialized. No name:
 * ncclSuccess, nothing loaded. None matches: ncclInvalidUsage, with a WARN naming the networks
 * found (as NCCL, which fails communicator creation when no net plugin matches). */
ncclResult_t net_check_name(const char* net_name);
/* Open exactly the library `spec` (plugin_open's rules) and initialize it for one communicator.
 * For tools and tests (the conformance suite). */
ncclResult_t net_open(const char* spec, uint64_t comm_id, int traffic_class, net_t** net_p);
/* Finalize the communicator's context and drop the library reference. Safe with NULL. */
void net_close(net_t* net);

const char* net_name(const net_t* net);     /* the table's name ("Socket", "IB", ...) */
int net_version(const net_t* net);          /* ABI version of the table found (6..12) */
const char* net_lib_path(const net_t* net); /* the file opened */
int net_ndev(const net_t* net);
/* Properties of device dev (0 <= dev < net_ndev), converted to v12. */
ncclResult_t net_props(net_t* net, int dev, ncclNetProperties_v12_t* props_p);

/* The ncclNet calls, with the v12 contract (see abi/nccl_net_v12.h). handle: a buffer of
 * NCCL_NET_HANDLE_MAXSIZE bytes. connect/accept are non-blocking: success with *comm_p NULL
 * means "call again". isend/irecv: success with *req_p NULL means "retry later". */
ncclResult_t net_listen(net_t* net, int dev, void* handle, void** listen_comm_p);
ncclResult_t net_connect(net_t* net, int dev, void* handle, void** send_comm_p);
ncclResult_t net_accept(net_t* net, void* listen_comm, void** recv_comm_p);
ncclResult_t net_reg_mr(net_t* net, void* comm, void* data, size_t size, int type, void** mh_p);
ncclResult_t net_reg_mr_dmabuf(net_t* net, void* comm, void* data, size_t size, int type,
                               uint64_t offset, int fd, void** mh_p);
ncclResult_t net_dereg_mr(net_t* net, void* comm, void* mh);
/* phandle / phandles (NULL: none): the profiler's parent for the plugin's own events of this
 * request (v10+ plugins get them; see net_set_prof_hook). */
ncclResult_t net_isend(net_t* net, void* send_comm, void* data, size_t size, int tag, void* mh,
                       void* phandle, void** req_p);
/* *req_p on input: NULL, or NCCL_NET_OPTIONAL_RECV_COMPLETION as a hint. */
ncclResult_t net_irecv(net_t* net, void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                       void** mhs, void** phandles, void** req_p);
/* The profiler callback the plugins call with the phandles they were given: every plugin's init
 * gets a trampoline to fn (NULL: events are dropped). Set by core/prof when a profiler loads. */
void net_set_prof_hook(ncclProfilerCallback_t fn);
/* *req_p NULL on success: nothing to wait for. */
ncclResult_t net_iflush(net_t* net, void* recv_comm, int n, void** data, int* sizes, void** mhs,
                        void** req_p);
/* sizes may be NULL; else n entries (1 for a send) receive the bytes moved when *done_p. */
ncclResult_t net_test(net_t* net, void* req, int* done_p, int* sizes);
ncclResult_t net_close_send(net_t* net, void* send_comm);
ncclResult_t net_close_recv(net_t* net, void* recv_comm);
ncclResult_t net_close_listen(net_t* net, void* listen_comm);

/* Optional entries. A plugin that leaves one NULL, or whose version predates it, answers
 * ncclInvalidUsage (with a WARN naming the plugin and the entry), except net_set_attr, a hint,
 * which is then skipped with success. */
ncclResult_t net_get_device_mr(net_t* net, void* comm, void* mh, void** dptr_mh_p); /* v7+ */
ncclResult_t net_irecv_consumed(net_t* net, void* recv_comm, int n, void* req);     /* v7+ */
/* props->ndevs: 1..8 for v12, 1..4 before (the older layout has 4 slots). */
ncclResult_t net_make_vdevice(net_t* net, const ncclNetVDeviceProps_v12_t* props,
                              int* dev_p);                            /* v9+ */
ncclResult_t net_set_attr(net_t* net, const ncclNetAttr_v12_t* attr); /* v11+ */

/* ---- collective networks (optional, same library). Found independently of the net version.
 * net_collnet: NULL when the library has none, its init failed or it has no devices (that
 * disables collnet only). The calls mirror ncclCollNet_v12_t with the same adaptations. ---- */
typedef struct collnet collnet_t;
/* Opened on the first call (not to be raced on one net_t), closed by net_close. */
collnet_t* net_collnet(net_t* net);
int collnet_version(const collnet_t* cn);
int collnet_ndev(const collnet_t* cn);
ncclResult_t collnet_props(collnet_t* cn, int dev, ncclNetProperties_v12_t* props_p);
const char* collnet_name(const collnet_t* cn);

/* Old versions carry smaller integers: registrations of 2 GiB or more (v6/v7), allreduce counts
 * and SGE pieces above INT_MAX / UINT32_MAX (v6..v8) are refused with ncclInvalidUsage;
 * iallgather/ireducescatter need v8+; regMrDmaBuf and makeVDevice may be missing. */
ncclResult_t collnet_listen(collnet_t* cn, int dev, void* handle, void** listen_comm_p);
/* handles: nranks listen handles, one per rank. Non-blocking: *coll_comm_p NULL = call again. */
ncclResult_t collnet_connect(collnet_t* cn, void* handles[], int nranks, int rank,
                             void* listen_comm, void** coll_comm_p);
ncclResult_t collnet_reduce_support(collnet_t* cn, ncclDataType_t type, ncclRedOp_t op,
                                    int* supported_p);
ncclResult_t collnet_reg_mr(collnet_t* cn, void* coll_comm, void* data, size_t size, int type,
                            void** mh_p);
ncclResult_t collnet_reg_mr_dmabuf(collnet_t* cn, void* coll_comm, void* data, size_t size,
                                   int type, uint64_t offset, int fd, void** mh_p);
ncclResult_t collnet_dereg_mr(collnet_t* cn, void* coll_comm, void* mh);
ncclResult_t collnet_iallreduce(collnet_t* cn, void* coll_comm, void* send_data, void* recv_data,
                                size_t count, ncclDataType_t type, ncclRedOp_t op, void* send_mh,
                                void* recv_mh, void** req_p);
ncclResult_t collnet_iallgather(collnet_t* cn, void* coll_comm, void* send_data, int nrecv_parts,
                                ncclNetSGE_v12_t* recv_parts, size_t bytes_per_rank,
                                size_t window_offset, size_t window_bytes, void* send_mh,
                                void** req_p);
ncclResult_t collnet_ireducescatter(collnet_t* cn, void* coll_comm, int nsend_parts,
                                    ncclNetSGE_v12_t* send_parts, void* recv_data,
                                    size_t bytes_per_rank, size_t window_offset,
                                    size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                    void* recv_mh, void** req_p);
ncclResult_t collnet_iflush(collnet_t* cn, void* coll_comm, void* data, int size, void* mh,
                            void** req_p);
ncclResult_t collnet_test(collnet_t* cn, void* req, int* done_p, int* size_p);
ncclResult_t collnet_close_coll(collnet_t* cn, void* coll_comm);
ncclResult_t collnet_close_listen(collnet_t* cn, void* listen_comm);

#endif
