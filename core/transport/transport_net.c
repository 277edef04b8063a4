/*
 * The net halves of a connect: connection ends whose far side is reached through the net plugin
 * and driven by the proxy thread (core/proxy). Every end, send or receive, has its own block of
 * host memory the GPU maps: the KERN_NSLOTS-slot buffer, then one line each for tail, head and
 * the send end's size FIFO. LL and LL128, when made, share that buffer and synchronize through
 * tail (kern_conn_t.tail_sync): the proxy moves whole slots, sizes[] saying how many line bytes
 * the kernel wrote, so the proxy needs nothing per protocol. Nothing is mapped across ranks; what the peer needs is the 128-byte
 * listen handle of each receive end, sent after the body of round 1.
 *
 * Establishing: receive ends listen while hosting (before round 1); after round 1 every send
 * end connects to its peer's handle and every receive end accepts, all ends of the call polled
 * together (the plugin's calls do not block, and the peers do the same at the same time), until
 * all are up, the bootstrap timeout passes or the communicator is aborted. Then each end
 * registers its buffer. On success the ends go to the proxy, which owns their comms from then on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "transport_internal.h"

/* Lines after the buffer: tail, head, sizes. */
#define NET_LINES 3

/* The plugin's devices as the topology describes NICs. The strings point into props. */
static void net_nic_props(const ncclNetProperties_v12_t* p, topo_nic_props_t* nic) {
  *nic = (topo_nic_props_t){.name = p->name,
                            .pci_path = p->pciPath,
                            .guid = p->guid,
                            .speed_mbps = p->speed,
                            .port = p->port,
                            .latency_us = p->latency,
                            .max_comms = p->maxComms,
                            .gdr = (p->ptrSupport & NCCL_PTR_CUDA) != 0,
                            .coll = 0};
}

void transport_nics_free(topo_nic_props_t* nics, int n) {
  if (nics == NULL) return;
  for (int i = 0; i < n; i++) {
    free((char*)nics[i].name);
    free((char*)nics[i].pci_path);
  }
  free(nics);
}

ncclResult_t transport_net_nics(const char* net_name_, uint64_t comm_id, int traffic_class,
                                topo_nic_props_t** nics_p, int* n_p) {
  *nics_p = NULL;
  *n_p = 0;
  net_t* net = NULL;
  CHECK(net_select(net_name_, comm_id, traffic_class, &net));
  const int n = net_ndev(net);
  topo_nic_props_t* nics = NULL;
  ncclResult_t res = n > 0 ? MEM_CALLOC(&nics, (size_t)n) : ncclSuccess;
  for (int d = 0; d < n && res == ncclSuccess; d++) {
    ncclNetProperties_v12_t p;
    res = net_props(net, d, &p);
    if (res != ncclSuccess) break;
    net_nic_props(&p, &nics[d]);
    nics[d].name = strdup(p.name ? p.name : "");
    nics[d].pci_path = p.pciPath ? strdup(p.pciPath) : NULL;
    if (nics[d].name == NULL || (p.pciPath != NULL && nics[d].pci_path == NULL)) {
      WARN("net: out of memory describing network device %d", d);
      res = ncclSystemError;
    }
  }
  net_close(net);
  if (res != ncclSuccess) {
    transport_nics_free(nics, n);
    return res;
  }
  *nics_p = nics;
  *n_p = n;
  return ncclSuccess;
}

ncclResult_t transport_net_check_name(const char* net_name_) { return net_check_name(net_name_); }

ncclResult_t transport_net_nearest(const topo_rank_info_t* me, const topo_nic_props_t* nics,
                                   int nnics, int* devs, int max, int* n_p, int* type_p,
                                   uint8_t (*gdr)[2]) {
  topo_system_t* sys = NULL;
  /* my_rank -1: this partial view (one GPU) must not replace the NCCL_TOPO_DUMP_FILE dump. */
  CHECK(topo_system_build(NULL, me, 1, -1, nics, nnics, &sys));
  ncclResult_t res = topo_rank_nets(sys, me->rank, devs, max, n_p, type_p);
  if (gdr != NULL) memset(gdr, 0, (size_t)nnics * sizeof(*gdr));
  /* NET nodes are numbered by the topology; their id is the plugin's device index. */
  for (int i = 0; gdr != NULL && res == ncclSuccess && i < sys->count[TOPO_NODE_NET]; i++) {
    const int dev = (int)topo_node(sys, TOPO_NODE_NET, i)->id;
    if (dev < 0 || dev >= nnics) continue;
    int on = 0;
    for (int is_send = 0; is_send <= 1 && res == ncclSuccess; is_send++) {
      res = topo_net_gdr(sys, me->rank, i, is_send, &on);
      /* A topology file may call a NIC GDR-capable; the plugin's word (CUDA pointers) decides. */
      gdr[dev][is_send] = (uint8_t)(on && nics[dev].gdr);
    }
  }
  topo_system_free(sys);
  return res;
}

/* Which devices this rank's connections use: those nearest its GPU in this host's topology
 * (topo_rank_nets), spread over the connections by id; and, per device, whether its buffers may
 * be GPU memory (GPUDirect RDMA). Without a topology (detection failed, more devices than
 * TRANSPORT_MAX_NET_DEVS) every device in turn and no GPUDirect, with an INFO line. GPUDirect
 * is opt-in (CHOIR_NET_GDR=1); without it, a single device needs no topology. */
static void net_place(transport_t* t) {
  const int ndev = net_ndev(t->net);
  t->net_ndevs = 0;
  memset(t->net_gdr, 0, sizeof(t->net_gdr));
  if (ndev < 1) return;
  const char* why = NULL;
  ncclNetProperties_v12_t* props = calloc((size_t)ndev, sizeof(*props));
  topo_nic_props_t* nics = calloc((size_t)ndev, sizeof(*nics));
  const int want_gdr = param_int(PARAM_NET_GDR) == 1;
  int type = TOPO_PATH_DIS, cuda = 0;
  if (ndev > TRANSPORT_MAX_NET_DEVS) why = "too many devices";
  else if (props == NULL || nics == NULL) why = "out of memory";
  for (int d = 0; why == NULL && d < ndev; d++) {
    if (net_props(t->net, d, &props[d]) != ncclSuccess) why = "a device's properties failed";
    else net_nic_props(&props[d], &nics[d]);
    cuda |= why == NULL && nics[d].gdr;
  }
  if (why == NULL && cuda && !want_gdr)
    INFO(NCCL_INIT | NCCL_NET,
         "rank %d: the network plugin takes GPU memory; buffers stay in host memory "
         "(CHOIR_NET_GDR=1 turns GPU Direct RDMA on; experimental)",
         t->rank);
  if (why == NULL && ndev == 1 && !(cuda && want_gdr)) goto done; /* nothing to choose */
  if (why == NULL) {
    const topo_rank_info_t me = {.rank = t->rank, .cuda_dev = t->cuda_dev,
                                 .bus_id = t->peers[t->rank].bus_id};
    if (transport_net_nearest(&me, nics, ndev, t->net_devs, TRANSPORT_MAX_NET_DEVS,
                              &t->net_ndevs, &type, want_gdr ? t->net_gdr : NULL) != ncclSuccess)
      why = "no topology";
  }
  if (why != NULL) {
    t->net_ndevs = 0;
    memset(t->net_gdr, 0, sizeof(t->net_gdr));
    INFO(NCCL_INIT | NCCL_NET,
         "rank %d: %s; connections use all %d network devices in turn, buffers in host memory",
         t->rank, why, ndev);
  } else if (t->net_ndevs > 0) {
    char list[256] = "";
    size_t at = 0;
    for (int i = 0; i < t->net_ndevs && at < sizeof(list); i++)
      at += (size_t)snprintf(list + at, sizeof(list) - at, "%s%d (%s)", i ? ", " : "",
                             t->net_devs[i],
                             props[t->net_devs[i]].name ? props[t->net_devs[i]].name : "?");
    INFO(NCCL_INIT | NCCL_NET, "rank %d: network devices nearest GPU %d (%s): %s, of %d",
         t->rank, t->cuda_dev, topo_path_type_name(type), list, ndev);
  }
  for (int d = 0; why == NULL && want_gdr && d < ndev; d++)
    if (nics[d].gdr)
      INFO(NCCL_INIT | NCCL_NET, "rank %d: GPU Direct RDMA with network device %d (%s): %s",
           t->rank, d, props[d].name ? props[d].name : "?",
           t->net_gdr[d][0] ? (t->net_gdr[d][1] ? "receives and sends" : "receives only")
                            : "off (see NCCL_NET_GDR_LEVEL)");
done:
  free(nics);
  free(props);
}

ncclResult_t transport_net_ensure(transport_t* t) {
  if (t->proxy != NULL) return ncclSuccess;
  if (t->net == NULL) {
    CHECK(net_select(t->net_name, t->comm_id, t->traffic_class, &t->net));
    INFO(NCCL_INIT | NCCL_NET, "rank %d: network connections through %s (net plugin v%d, %s)",
         t->rank, net_name(t->net), net_version(t->net), net_lib_path(t->net));
    net_place(t);
  }
  return proxy_create(t->net, t->rank, t->abort_flag, t->kernel_abort, t->prof, &t->proxy);
}

/* Pinned, mapped host memory of bytes (zeroed): a TRANSPORT_RES_HOST. */
static ncclResult_t net_host_alloc(size_t bytes, transport_res_t** res_p, void** dev_p) {
  transport_res_t* r = NULL;
  CHECK(MEM_CALLOC(&r, 1));
  r->kind = TRANSPORT_RES_HOST;
  r->bytes = bytes;
  int err = posix_memalign(&r->ptr, TRANSPORT_BUFF_ALIGN, bytes);
  if (err != 0) {
    WARN("net: cannot allocate %zu bytes of host memory for a connection buffer", bytes);
    free(r);
    return ncclSystemError;
  }
  memset(r->ptr, 0, bytes);
  ncclResult_t res = transport_cuda()->host_register(r->ptr, bytes, dev_p);
  if (res != ncclSuccess) {
    free(r->ptr);
    free(r);
    return res;
  }
  r->registered = true;
  *res_p = r;
  return ncclSuccess;
}

/* Offset of line k (0 tail, 1 head, 2 sizes) in an end's block: after the slots. */
static uint64_t net_line(uint32_t slot_bytes, int k) {
  uint64_t b = (uint64_t)KERN_NSLOTS * slot_bytes;
  return (b + TRANSPORT_LINE - 1) / TRANSPORT_LINE * TRANSPORT_LINE + (uint64_t)k * TRANSPORT_LINE;
}

static uint64_t net_block_bytes(uint32_t slot_bytes) {
  uint64_t b = net_line(slot_bytes, NET_LINES);
  return (b + TRANSPORT_BUFF_ALIGN - 1) / TRANSPORT_BUFF_ALIGN * TRANSPORT_BUFF_ALIGN;
}

/* The slot size as the host block sees it: 0 when the slots live in GPU memory (gdr). */
static uint32_t net_host_slot(const transport_net_end_t* e, const transport_wire_conn_t* m) {
  return e->gdr ? 0 : m->slot_bytes[KERN_PROTO_SIMPLE];
}

ncclResult_t transport_net_host(transport_t* t, transport_group_t* g) {
  CHECK(transport_net_ensure(t));
  const int ndev = net_ndev(t->net);
  CHECK(MEM_CALLOC(&g->net_ends, (size_t)g->n));
  CHECK(MEM_CALLOC(&g->mine_handles, (size_t)g->n));
  for (int i = 0; i < g->n; i++) {
    transport_net_end_t* e = &g->net_ends[i];
    const transport_wire_conn_t* m = &g->mine_c[i];
    /* Channels spread over the NICs. */
    e->dev = t->net_ndevs > 0 ? t->net_devs[m->id % t->net_ndevs] : ndev > 0 ? m->id % ndev : 0;
    e->gdr = e->dev < TRANSPORT_MAX_NET_DEVS && t->net_gdr[e->dev][m->is_send ? 1 : 0];
    /* One slot is one plugin message: it must fit the device's largest. */
    ncclNetProperties_v12_t p;
    CHECK(net_props(t->net, e->dev, &p));
    if ((size_t)m->slot_bytes[KERN_PROTO_SIMPLE] > p.maxP2pBytes) {
      WARN("net: a connection slot of %u bytes (NCCL_BUFFSIZE / 8 for rings, "
           "NCCL_P2P_PCI_CHUNKSIZE for send/recv) exceeds the largest message of net device %d "
           "(%s, maxP2pBytes %zu): lower that variable or raise the plugin's limit",
           m->slot_bytes[KERN_PROTO_SIMPLE], e->dev, p.name ? p.name : "?", p.maxP2pBytes);
      return ncclInvalidUsage;
    }
    if (e->gdr)
      CHECK(transport_res_dev((size_t)KERN_NSLOTS * m->slot_bytes[KERN_PROTO_SIMPLE], &e->slots));
    void* dev = NULL;
    CHECK(net_host_alloc((size_t)net_block_bytes(net_host_slot(e, m)), &e->mem, &dev));
    e->dev_base = (char*)dev;
    if (!m->is_send) CHECK(net_listen(t->net, e->dev, g->mine_handles[i], &e->listen_comm));
  }
  return ncclSuccess;
}

/* Bounded wait between polls of connections that are not up yet. */
static void net_nap(void) {
  struct timespec ts = {0, 50 * 1000};
  nanosleep(&ts, NULL);
}

ncclResult_t transport_net_establish(transport_t* t, transport_group_t* groups, int ngroups) {
  const sock_deadline_t dl = sock_deadline(bootstrap_timeout_ms(), t->abort_flag);
  for (;;) {
    int pending = 0, progress = 0;
    for (int gi = 0; gi < ngroups; gi++) {
      transport_group_t* g = &groups[gi];
      if (g->kind != KERN_TRANSPORT_NET) continue;
      for (int i = 0; i < g->n; i++) {
        transport_net_end_t* e = &g->net_ends[i];
        if (e->comm != NULL) continue;
        if (g->mine_c[i].is_send)
          CHECK(net_connect(t->net, e->dev, g->theirs_handles[g->match[i]], &e->comm));
        else
          CHECK(net_accept(t->net, e->listen_comm, &e->comm));
        if (e->comm != NULL)
          progress = 1;
        else
          pending++;
      }
    }
    if (pending == 0) break;
    char what[96];
    snprintf(what, sizeof(what), "net: rank %d, setting up %d network connection(s)", t->rank,
             pending);
    CHECK(sock_deadline_check(&dl, what,
                              "(peers dead, or a firewall between the interfaces? see "
                              "NCCL_SOCKET_IFNAME; CHOIR_BOOTSTRAP_TIMEOUT sets the limit)"));
    if (!progress) net_nap();
  }
  /* Up: register the buffers, drop the listeners, describe the ends to the kernels. */
  for (int gi = 0; gi < ngroups; gi++) {
    transport_group_t* g = &groups[gi];
    if (g->kind != KERN_TRANSPORT_NET) continue;
    for (int i = 0; i < g->n; i++) {
      transport_net_end_t* e = &g->net_ends[i];
      const transport_wire_conn_t* m = &g->mine_c[i];
      if (e->listen_comm != NULL) {
        CHECK(net_close_listen(t->net, e->listen_comm));
        e->listen_comm = NULL;
      }
      /* The NIC moves the slots: GPU memory (gdr) or the front of the host block. */
      const uint32_t hs = net_host_slot(e, m);
      CHECK(net_reg_mr(t->net, e->comm, e->gdr ? e->slots->ptr : e->mem->ptr,
                       (size_t)KERN_NSLOTS * m->slot_bytes[KERN_PROTO_SIMPLE],
                       e->gdr ? NCCL_PTR_CUDA : NCCL_PTR_HOST, &e->mhandle));
      kern_conn_t* c = &g->conns[i];
      memset(c, 0, sizeof(*c));
      /* Every protocol made shares the slots (transport_shared_protos): offset 0 for each. */
      transport_wire_conn_t at = *m;
      for (int p = 0; p < KERN_PROTO_NUM; p++) at.off_buff[p] = 0;
      transport_conn_buffers(c, KERN_TRANSPORT_NET, &at,
                             e->gdr ? (char*)e->slots->ptr : e->dev_base);
      c->tail = (uint64_t*)(e->dev_base + net_line(hs, 0));
      c->head = (uint64_t*)(e->dev_base + net_line(hs, 1));
      c->sizes = m->is_send ? (uint32_t*)(e->dev_base + net_line(hs, 2)) : NULL;
      c->transport = KERN_TRANSPORT_NET;
      c->connected = 1;
    }
  }
  return ncclSuccess;
}

ncclResult_t transport_net_commit(transport_t* t, transport_group_t* g,
                                  const transport_req_t* reqs) {
  proxy_conn_t* pc = NULL;
  CHECK(MEM_CALLOC(&pc, (size_t)g->n));
  for (int i = 0; i < g->n; i++) {
    transport_net_end_t* e = &g->net_ends[i];
    const transport_wire_conn_t* m = &g->mine_c[i];
    char* host = (char*)e->mem->ptr;
    const uint32_t hs = net_host_slot(e, m);
    pc[i] = (proxy_conn_t){
        .is_send = m->is_send,
        .peer = g->peer,
        .id = m->id,
        .comm = e->comm,
        .mhandle = e->mhandle,
        .buff = e->gdr ? (char*)e->slots->ptr : host,
        .slot_bytes = m->slot_bytes[KERN_PROTO_SIMPLE],
        /* What the NIC wrote to GPU memory must be visible to the kernel before its tail. */
        .flush = e->gdr && !m->is_send,
        .tail = (uint64_t*)(host + net_line(hs, 0)),
        .head = (uint64_t*)(host + net_line(hs, 1)),
        .sizes = m->is_send ? (uint32_t*)(host + net_line(hs, 2)) : NULL,
        .key = reqs[g->req_idx[i]].key ? reqs[g->req_idx[i]].key
                                       : (const void*)reqs[g->req_idx[i]].out};
  }
  ncclResult_t res = proxy_add(t->proxy, pc, g->n);
  free(pc);
  if (res != ncclSuccess) return res;
  /* The proxy owns the comms now; the memory goes with the transport's other resources. */
  for (int i = 0; i < g->n; i++) {
    transport_net_end_t* e = &g->net_ends[i];
    e->comm = e->mhandle = NULL;
    transport_res_push(t, e->mem);
    transport_res_push(t, e->slots);
    e->mem = e->slots = NULL;
  }
  return ncclSuccess;
}

void transport_net_release(transport_t* t, transport_group_t* g) {
  if (g->net_ends == NULL) return;
  for (int i = 0; i < g->n; i++) {
    transport_net_end_t* e = &g->net_ends[i];
    if (e->mhandle != NULL) (void)net_dereg_mr(t->net, e->comm, e->mhandle);
    if (e->comm != NULL) {
      if (g->mine_c[i].is_send)
        (void)net_close_send(t->net, e->comm);
      else
        (void)net_close_recv(t->net, e->comm);
    }
    if (e->listen_comm != NULL) (void)net_close_listen(t->net, e->listen_comm);
    transport_res_release(e->mem);
    transport_res_release(e->slots);
    memset(e, 0, sizeof(*e));
  }
}
