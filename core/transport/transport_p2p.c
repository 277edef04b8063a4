/*
 * The p2p transport: connections between GPUs of one host with peer access. The receive end
 * hosts the buffers (one per protocol made, LL and LL128 polled by their flags) and the tail in
 * its GPU memory (the sender's GPU writes both over NVLink or
 * PCIe, the receiver polls the tail locally); the send end hosts the head in its GPU memory
 * (written by the receiver's GPU, polled locally by the sender).
 *
 * Per connect call and peer, everything this rank hosts for that peer is one allocation, so the
 * peer opens one IPC handle per call rather than one per connection. Within one process the
 * raw device addresses are exchanged instead (IPC handles cannot be opened by the process that
 * made them) and peer access is enabled between the two devices.
 */
#include <stdlib.h>
#include <string.h>

#include "transport_internal.h"

ncclResult_t transport_p2p_host(transport_t* t, transport_group_t* g) {
  uint64_t bytes = transport_wire_layout(KERN_TRANSPORT_P2P, g->mine_c, g->n);
  transport_res_t* r = NULL;
  ncclResult_t res = ncclSuccess;
  /* cudaMalloc promises 256-byte alignment only: allocate one alignment unit more and start
   * the block at the first TRANSPORT_BUFF_ALIGN boundary (the offset travels with the handle). */
  CHECK(transport_res_dev((size_t)bytes + TRANSPORT_BUFF_ALIGN, &r));
  uintptr_t base = (uintptr_t)r->ptr;
  uintptr_t start = (base + TRANSPORT_BUFF_ALIGN - 1) & ~(uintptr_t)(TRANSPORT_BUFF_ALIGN - 1);
  g->mine.has_block = 1;
  g->mine.block_bytes = bytes;
  g->mine.block_ptr = (uint64_t)start;
  g->mine.block_offset = (uint64_t)(start - base);
  if (t->peers[g->peer].pid_hash != t->peers[t->rank].pid_hash)
    CHECK_GOTO(transport_cuda()->ipc_get(r->ptr, g->mine.ipc_handle), res, err_release);
  g->own = r;
  g->own_base = (char*)start;
  return ncclSuccess;
err_release:
  transport_res_release(r);
  return res;
}

ncclResult_t transport_p2p_map(transport_t* t, transport_group_t* g) {
  const transport_cuda_ops_t* cu = transport_cuda();
  bool same_process = t->peers[g->peer].pid_hash == t->peers[t->rank].pid_hash;
  if (g->theirs.pid_hash != t->peers[g->peer].pid_hash) {
    WARN("transport: rank %d describes itself as process %llx, the communicator knows it as "
         "%llx",
         g->peer, (unsigned long long)g->theirs.pid_hash,
         (unsigned long long)t->peers[g->peer].pid_hash);
    return ncclInternalError;
  }
  if (same_process) {
    int peer_dev = t->peer_devs[g->peer];
    /* The sender's GPU writes the receiver's buffer and tail, the receiver's GPU writes the
     * sender's head: each end needs access to the other's memory. */
    if (peer_dev != t->cuda_dev) CHECK(cu->enable_peer_access(peer_dev));
    g->peer_base = (char*)(uintptr_t)g->theirs.block_ptr;
  } else {
    if (g->theirs.block_offset >= TRANSPORT_BUFF_ALIGN) {
      WARN("transport: rank %d announced its block %llu bytes into its allocation (at most %u): "
           "garbled message",
           g->peer, (unsigned long long)g->theirs.block_offset, TRANSPORT_BUFF_ALIGN - 1);
      return ncclInternalError;
    }
    transport_res_t* r = NULL;
    ncclResult_t res = ncclSuccess;
    CHECK(MEM_CALLOC(&r, 1));
    r->kind = TRANSPORT_RES_IPC;
    res = cu->ipc_open(g->theirs.ipc_handle, &r->ptr);
    if (res != ncclSuccess) {
      WARN("transport: cannot open the IPC handle of rank %d (GPU %d) on GPU %d", g->peer,
           t->peers[g->peer].cuda_dev, t->cuda_dev);
      free(r);
      return res;
    }
    g->mapped = r;
    g->peer_base = (char*)r->ptr + g->theirs.block_offset;
  }
  for (int i = 0; i < g->n; i++) {
    const transport_wire_conn_t* m = &g->mine_c[i];
    const transport_wire_conn_t* p = &g->theirs_c[g->match[i]];
    kern_conn_t* c = &g->conns[i];
    memset(c, 0, sizeof(*c));
    if (m->is_send) {
      transport_conn_buffers(c, KERN_TRANSPORT_P2P, p, g->peer_base);
      c->tail = (uint64_t*)(g->peer_base + p->off_tail);
      c->head = (uint64_t*)(g->own_base + m->off_head);
    } else {
      transport_conn_buffers(c, KERN_TRANSPORT_P2P, m, g->own_base);
      c->tail = (uint64_t*)(g->own_base + m->off_tail);
      c->head = (uint64_t*)(g->peer_base + p->off_head);
    }
    c->transport = KERN_TRANSPORT_P2P;
    c->connected = 1;
  }
  return ncclSuccess;
}
