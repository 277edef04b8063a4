/*
 * The shm transport: connections through host shared memory, for GPUs of one host without peer
 * access (or with NCCL_P2P_DISABLE=1).
 *
 * The receive end hosts everything: per connect call and peer, it creates one POSIX segment
 * holding, for every connection it receives on from that peer, the buffers (SIMPLE, and LL's
 * own when made; LL128 shares SIMPLE's with tail synchronization, since PCIe does not keep its
 * 128-byte stores whole), the tail and the head (each counter on its own line), maps it and registers it with CUDA (mapped, portable). The
 * send end opens the segment by name, maps and registers it likewise, so both ends' GPUs reach
 * the same host pages. Names carry the creator's pid, a counter and 64 random bits, and are
 * created with O_EXCL, so a stale or foreign segment is never reused.
 *
 * Unlink: the creator removes the name after the second round of the exchange, when the opener
 * has confirmed (or reported a failure): by then the opener has mapped the segment or given up.
 * Every error path of the creator unlinks too, so a connect leaves no name behind in /dev/shm.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "transport_internal.h"

static atomic_uint shm_counter;

static uint64_t shm_random(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) == (ssize_t)sizeof(r)) return r;
  /* No entropy yet (early boot): the clock still makes a clash with a live name unlikely, and
   * O_EXCL turns a clash into a retry. */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return sys_hash_mix((uint64_t)ts.tv_nsec, (uint64_t)ts.tv_sec ^ (uint64_t)getpid());
}

static ncclResult_t shm_map_fd(int fd, size_t bytes, const char* name, void** ptr_p) {
  void* p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    WARN("shm: mmap of %zu bytes of segment %s failed: %m", bytes, name);
    return ncclSystemError;
  }
  *ptr_p = p;
  return ncclSuccess;
}

ncclResult_t transport_shm_create(size_t bytes, transport_res_t** res_p) {
  ncclResult_t res = ncclSuccess;
  transport_res_t* r = NULL;
  CHECK(MEM_CALLOC(&r, 1));
  r->kind = TRANSPORT_RES_SHM;
  r->bytes = bytes;
  r->created = true;
  int fd = -1;
  for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
    snprintf(r->name, sizeof(r->name), "/choir-%d-%u-%016llx", (int)getpid(),
             atomic_fetch_add(&shm_counter, 1u), (unsigned long long)shm_random());
    fd = shm_open(r->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    WARN("shm: cannot create segment %s: %m (is /dev/shm mounted and writable?)", r->name);
    res = ncclSystemError;
    goto err_free;
  }
  r->named = true;
  /* posix_fallocate, not ftruncate: a full /dev/shm fails here instead of with SIGBUS on the
   * first touch. The pages start zeroed either way. */
  int e = posix_fallocate(fd, 0, (off_t)bytes);
  if (e != 0) {
    errno = e;
    WARN("shm: cannot allocate %zu bytes for segment %s: %m (is /dev/shm large enough? a "
         "container may need --shm-size)",
         bytes, r->name);
    res = ncclSystemError;
    goto err_close;
  }
  CHECK_GOTO(shm_map_fd(fd, bytes, r->name, &r->ptr), res, err_close);
  close(fd);
  *res_p = r;
  return ncclSuccess;
err_close:
  close(fd);
  shm_unlink(r->name);
err_free:
  free(r);
  return res;
}

ncclResult_t transport_shm_open(const char* name, size_t bytes, transport_res_t** res_p) {
  ncclResult_t res = ncclSuccess;
  transport_res_t* r = NULL;
  CHECK(MEM_CALLOC(&r, 1));
  r->kind = TRANSPORT_RES_SHM;
  r->bytes = bytes;
  sys_strlcpy(r->name, name, sizeof(r->name));
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) {
    WARN("shm: cannot open segment %s of the peer: %m", name);
    res = ncclSystemError;
    goto err_free;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    WARN("shm: fstat of segment %s failed: %m", name);
    res = ncclSystemError;
    goto err_close;
  }
  if ((uint64_t)st.st_size < (uint64_t)bytes) {
    WARN("shm: segment %s holds %lld bytes, the peer announced %zu", name,
         (long long)st.st_size, bytes);
    res = ncclInternalError;
    goto err_close;
  }
  CHECK_GOTO(shm_map_fd(fd, bytes, name, &r->ptr), res, err_close);
  close(fd);
  *res_p = r;
  return ncclSuccess;
err_close:
  close(fd);
err_free:
  free(r);
  return res;
}

void transport_shm_unlink(transport_res_t* r) {
  if (r == NULL || !r->named) return;
  if (shm_unlink(r->name) != 0 && errno != ENOENT)
    WARN("shm: cannot unlink segment %s: %m", r->name);
  r->named = false;
}

ncclResult_t transport_shm_register(transport_res_t* r, void** dev_ptr_p) {
  CHECK(transport_cuda()->host_register(r->ptr, r->bytes, dev_ptr_p));
  r->registered = true;
  return ncclSuccess;
}

/* ---- The shm halves of a connect -------------------------------------------------------- */

ncclResult_t transport_shm_host(transport_t* t, transport_group_t* g) {
  (void)t;
  uint64_t bytes = transport_wire_layout(KERN_TRANSPORT_SHM, g->mine_c, g->n);
  if (bytes == 0) return ncclSuccess; /* only send ends with this peer: it hosts them */
  transport_res_t* r = NULL;
  void* dev = NULL;
  ncclResult_t res = ncclSuccess;
  CHECK(transport_shm_create((size_t)bytes, &r));
  CHECK_GOTO(transport_shm_register(r, &dev), res, err_release);
  g->own = r;
  g->own_base = (char*)dev;
  g->mine.has_block = 1;
  g->mine.block_bytes = bytes;
  sys_strlcpy(g->mine.shm_name, r->name, sizeof(g->mine.shm_name));
  return ncclSuccess;
err_release:
  transport_res_release(r);
  return res;
}

/* Open and register the peer's segment (it hosts our send ends). */
static ncclResult_t shm_map_peer(transport_group_t* g) {
  char name[TRANSPORT_SHM_NAME_MAX];
  memcpy(name, g->theirs.shm_name, sizeof(name));
  name[sizeof(name) - 1] = '\0';
  if (name[0] != '/' || strchr(name + 1, '/') != NULL) {
    WARN("transport: rank %d sent an invalid shm segment name '%s'", g->peer, name);
    return ncclInternalError;
  }
  transport_res_t* r = NULL;
  void* dev = NULL;
  ncclResult_t res = ncclSuccess;
  CHECK(transport_shm_open(name, (size_t)g->theirs.block_bytes, &r));
  CHECK_GOTO(transport_shm_register(r, &dev), res, err_release);
  g->mapped = r;
  g->peer_base = (char*)dev;
  return ncclSuccess;
err_release:
  transport_res_release(r);
  return res;
}

ncclResult_t transport_shm_map(transport_t* t, transport_group_t* g) {
  (void)t;
  bool need_peer = false;
  for (int i = 0; i < g->n; i++) need_peer |= g->mine_c[i].is_send != 0;
  if (need_peer) CHECK(shm_map_peer(g));
  for (int i = 0; i < g->n; i++) {
    const transport_wire_conn_t* m = &g->mine_c[i];
    const transport_wire_conn_t* p = &g->theirs_c[g->match[i]];
    /* Every part lives in the receive end's segment: ours for a receive end, the peer's for a
     * send end. */
    const transport_wire_conn_t* host = m->is_send ? p : m;
    char* base = m->is_send ? g->peer_base : g->own_base;
    kern_conn_t* c = &g->conns[i];
    memset(c, 0, sizeof(*c));
    transport_conn_buffers(c, KERN_TRANSPORT_SHM, host, base);
    c->tail = (uint64_t*)(base + host->off_tail);
    c->head = (uint64_t*)(base + host->off_head);
    c->transport = KERN_TRANSPORT_SHM;
    c->connected = 1;
  }
  return ncclSuccess;
}
