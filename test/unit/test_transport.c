/*
 * core/transport on the CPU. The CUDA calls are replaced (transport_set_cuda_ops) by a fake in
 * which "device memory" is host shared memory and an "IPC handle" names it, so that the whole
 * exchange runs here: p2p between threads (raw pointers) and between processes (handles), shm
 * between threads and processes, and every failure both ends must agree on. What the fake cannot
 * show (real peer mappings, cudaHostRegister) the multigpu test transport-gpu checks on GPUs.
 *
 *   test-transport GROUP   GROUP: rules, wire, shm, threads, procs, faults, knobs
 */
#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../plugin/net_gdr_shim.h" /* the GPUDirect shim's counters */
#include "fork_case.h"
#include "transport_internal.h" /* white-box: the rule, the wire, the fake CUDA */

#include "rank_expect.h"

/* ---- Fake CUDA ------------------------------------------------------------------------------ */

#define FAKE_NDEV 8
#define FAKE_MAX_SEGS 512

static __thread int fake_dev;
static int fake_access = 1;            /* what can_access_peer answers */
static unsigned fake_invisible;        /* devices (bit mask) this process does not see */
static __thread int fake_fail_alloc;   /* the next dev_alloc of this thread fails */
static __thread int fake_fail_register; /* the n-th next host_register of this thread fails */
static atomic_int fake_live_dev, fake_live_ipc, fake_live_reg, fake_enable_calls;
static atomic_uint fake_counter;

/* cudaMalloc promises 256-byte alignment only: fake allocations (and their IPC mappings) start
 * 256 bytes into a page, so that the transport's own alignment and offsets are exercised. */
#define FAKE_SKEW 256

typedef struct {
  void* ptr;        /* what the fake handed out */
  void* map;        /* the mapping behind it (ptr - FAKE_SKEW) */
  size_t map_bytes;
  char name[64]; /* dev_alloc: the segment standing for the allocation; "" for an IPC mapping */
} fake_seg_t;
static fake_seg_t fake_segs[FAKE_MAX_SEGS];
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t fake_bus_id(int dev) { return (int64_t)(0x18 + dev) << 12; }

static void fake_track(void* map, size_t map_bytes, const char* name) {
  pthread_mutex_lock(&fake_lock);
  for (int i = 0; i < FAKE_MAX_SEGS; i++) {
    if (fake_segs[i].ptr != NULL) continue;
    fake_segs[i].ptr = (char*)map + FAKE_SKEW;
    fake_segs[i].map = map;
    fake_segs[i].map_bytes = map_bytes;
    sys_strlcpy(fake_segs[i].name, name, sizeof(fake_segs[i].name));
    break;
  }
  pthread_mutex_unlock(&fake_lock);
}

/* Forget ptr; returns its entry (copied) or an empty one. */
static fake_seg_t fake_untrack(void* ptr) {
  fake_seg_t s = {0};
  pthread_mutex_lock(&fake_lock);
  for (int i = 0; i < FAKE_MAX_SEGS; i++) {
    if (fake_segs[i].ptr != ptr) continue;
    s = fake_segs[i];
    memset(&fake_segs[i], 0, sizeof(fake_segs[i]));
    break;
  }
  pthread_mutex_unlock(&fake_lock);
  return s;
}

static ncclResult_t fake_get_device(int* dev_p) {
  *dev_p = fake_dev;
  return ncclSuccess;
}
static ncclResult_t fake_set_device(int dev) {
  if (dev < 0 || dev >= FAKE_NDEV) return ncclUnhandledCudaError;
  fake_dev = dev;
  return ncclSuccess;
}
static ncclResult_t fake_device_by_bus_id(int64_t bus_id, int* dev_p) {
  int dev = (int)(bus_id >> 12) - 0x18;
  *dev_p = dev >= 0 && dev < FAKE_NDEV && !(fake_invisible & (1u << dev)) ? dev : -1;
  return ncclSuccess;
}
static ncclResult_t fake_can_access_peer(int dev, int peer_dev, int* can_p) {
  *can_p = dev != peer_dev && fake_access;
  return ncclSuccess;
}
static ncclResult_t fake_enable_peer_access(int peer_dev) {
  if (peer_dev == fake_dev) return ncclUnhandledCudaError; /* as CUDA: not to oneself */
  atomic_fetch_add(&fake_enable_calls, 1);
  return ncclSuccess;
}
static ncclResult_t fake_dev_alloc(size_t bytes, void** ptr_p) {
  if (fake_fail_alloc) {
    fake_fail_alloc = 0;
    WARN("fake CUDA: dev_alloc of %zu bytes fails as the test asked", bytes);
    return ncclUnhandledCudaError;
  }
  char name[64];
  snprintf(name, sizeof(name), "/choirfake-%d-%u", (int)getpid(),
           atomic_fetch_add(&fake_counter, 1u));
  int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0 && errno == EEXIST) {
    /* Only a process with this pid names segments so: a killed rank of an earlier run whose pid
     * came round again. Its segment is garbage. */
    shm_unlink(name);
    fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
  }
  if (fd < 0) return ncclSystemError;
  size_t map_bytes = bytes + FAKE_SKEW;
  if (ftruncate(fd, (off_t)map_bytes) != 0) {
    close(fd);
    shm_unlink(name);
    return ncclSystemError;
  }
  void* p = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    shm_unlink(name);
    return ncclSystemError;
  }
  fake_track(p, map_bytes, name);
  atomic_fetch_add(&fake_live_dev, 1);
  *ptr_p = (char*)p + FAKE_SKEW;
  return ncclSuccess;
}
static void fake_dev_free(void* ptr) {
  fake_seg_t s = fake_untrack(ptr);
  if (s.ptr == NULL) {
    fprintf(stderr, "fake CUDA: dev_free of unknown pointer %p\n", ptr);
    abort();
  }
  munmap(s.map, s.map_bytes);
  shm_unlink(s.name);
  atomic_fetch_sub(&fake_live_dev, 1);
}
static ncclResult_t fake_ipc_get(void* ptr, unsigned char handle[64]) {
  memset(handle, 0, 64);
  pthread_mutex_lock(&fake_lock);
  int found = 0;
  for (int i = 0; i < FAKE_MAX_SEGS && !found; i++) {
    if (fake_segs[i].ptr != ptr || fake_segs[i].name[0] == '\0') continue;
    memcpy(handle, fake_segs[i].name, strlen(fake_segs[i].name) + 1);
    found = 1;
  }
  pthread_mutex_unlock(&fake_lock);
  return found ? ncclSuccess : ncclUnhandledCudaError;
}
static ncclResult_t fake_ipc_open(const unsigned char handle[64], void** ptr_p) {
  char name[64];
  memcpy(name, handle, 64);
  name[63] = '\0';
  /* As CUDA: a process cannot open its own handles. */
  char own[32];
  snprintf(own, sizeof(own), "/choirfake-%d-", (int)getpid());
  if (strncmp(name, own, strlen(own)) == 0) {
    WARN("fake CUDA: ipc_open of this process's own allocation %s", name);
    return ncclUnhandledCudaError;
  }
  int fd = shm_open(name, O_RDWR, 0);
  if (fd < 0) return ncclUnhandledCudaError;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return ncclUnhandledCudaError;
  }
  void* p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return ncclUnhandledCudaError;
  fake_track(p, (size_t)st.st_size, "");
  atomic_fetch_add(&fake_live_ipc, 1);
  *ptr_p = (char*)p + FAKE_SKEW;
  return ncclSuccess;
}
static void fake_ipc_close(void* ptr) {
  fake_seg_t s = fake_untrack(ptr);
  if (s.ptr == NULL) {
    fprintf(stderr, "fake CUDA: ipc_close of unknown pointer %p\n", ptr);
    abort();
  }
  munmap(s.map, s.map_bytes);
  atomic_fetch_sub(&fake_live_ipc, 1);
}
static ncclResult_t fake_host_register(void* ptr, size_t bytes, void** dev_ptr_p) {
  (void)bytes;
  if (fake_fail_register > 0 && --fake_fail_register == 0) {
    WARN("fake CUDA: host_register fails as the test asked");
    return ncclUnhandledCudaError;
  }
  atomic_fetch_add(&fake_live_reg, 1);
  *dev_ptr_p = ptr; /* with UVA the device address of mapped host memory is the host's */
  return ncclSuccess;
}
static void fake_host_unregister(void* ptr) {
  (void)ptr;
  atomic_fetch_sub(&fake_live_reg, 1);
}

static const transport_cuda_ops_t fake_ops = {
    .get_device = fake_get_device,
    .set_device = fake_set_device,
    .device_by_bus_id = fake_device_by_bus_id,
    .can_access_peer = fake_can_access_peer,
    .enable_peer_access = fake_enable_peer_access,
    .dev_alloc = fake_dev_alloc,
    .dev_free = fake_dev_free,
    .ipc_get = fake_ipc_get,
    .ipc_open = fake_ipc_open,
    .ipc_close = fake_ipc_close,
    .host_register = fake_host_register,
    .host_unregister = fake_host_unregister,
};

static int fake_live(void) {
  return atomic_load(&fake_live_dev) + atomic_load(&fake_live_ipc) + atomic_load(&fake_live_reg);
}

/* Names in /dev/shm starting with prefix; with remove, each is unlinked as well. */
static int shm_names_at(const char* prefix, bool remove) {
  DIR* d = opendir("/dev/shm");
  if (d == NULL) return 0;
  int n = 0;
  struct dirent* e;
  char name[300];
  while ((e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
    n++;
    snprintf(name, sizeof(name), "/%s", e->d_name);
    if (remove) shm_unlink(name);
  }
  closedir(d);
  return n;
}
static int shm_names(const char* prefix) { return shm_names_at(prefix, false); }

/* Removes the fake's segments of process pid ("choirfake-<pid>-"). */
static void fake_unlink_pid(pid_t pid) {
  char prefix[32];
  snprintf(prefix, sizeof(prefix), "choirfake-%d-", (int)pid);
  shm_names_at(prefix, true);
}

/* Segments this process's transports left named ("choir-<pid>-"). */
static int own_shm_names(void) {
  char prefix[32];
  snprintf(prefix, sizeof(prefix), "choir-%d-", (int)getpid());
  return shm_names(prefix);
}

/* ---- Rules ---------------------------------------------------------------------------------- */

static void case_rule(void) {
  /* same_host, p2p_disable, policy_allows, peer_access, shm_disable, net_intra_disable */
  CHECK_EQ_INT(transport_kind_rule(0, 0, 1, 1, 0, 0), KERN_TRANSPORT_NET);
  CHECK_EQ_INT(transport_kind_rule(0, 1, 0, 0, 1, 0), KERN_TRANSPORT_NET);
  CHECK_EQ_INT(transport_kind_rule(1, 0, 1, 1, 0, 0), KERN_TRANSPORT_P2P);
  CHECK_EQ_INT(transport_kind_rule(1, 0, 1, 1, 1, 0), KERN_TRANSPORT_P2P);
  CHECK_EQ_INT(transport_kind_rule(1, 1, 1, 1, 0, 0), KERN_TRANSPORT_SHM);
  CHECK_EQ_INT(transport_kind_rule(1, 0, 0, 1, 0, 0), KERN_TRANSPORT_SHM);
  CHECK_EQ_INT(transport_kind_rule(1, 0, 1, 0, 0, 0), KERN_TRANSPORT_SHM);
  CHECK_EQ_INT(transport_kind_rule(1, 1, 1, 1, 1, 0), KERN_TRANSPORT_NET);
  CHECK_EQ_INT(transport_kind_rule(1, 1, 1, 1, 1, 1), KERN_TRANSPORT_NONE);
  CHECK_EQ_INT(transport_kind_rule(1, 0, 1, 0, 1, 0), KERN_TRANSPORT_NET);
  CHECK_EQ_INT(transport_kind_rule(1, 0, 1, 0, 1, 1), KERN_TRANSPORT_NONE);
  CHECK_EQ_STR(transport_kind_name(KERN_TRANSPORT_P2P), "P2P");
  CHECK_EQ_STR(transport_kind_name(KERN_TRANSPORT_SHM), "SHM");
  CHECK_EQ_STR(transport_kind_name(KERN_TRANSPORT_NET), "NET");
  CHECK_EQ_STR(transport_kind_name(KERN_TRANSPORT_NONE), "none");
}

static int policy_calls;
static int policy_last_peer = -1;
/* Allows p2p with even peers only. */
static int policy_even(void* ctx, int peer, int* use_read_p) {
  CHECK_TRUE(ctx == (void*)&policy_calls);
  CHECK_TRUE(use_read_p != NULL);
  policy_calls++;
  policy_last_peer = peer;
  return peer % 2 == 0;
}

/* transport_kind on one rank of a made-up 6-rank host: rank 0 on GPU 0. */
static void case_kind(void) {
  transport_set_cuda_ops(&fake_ops);
  ncclUniqueId id;
  bootstrap_t* bs = NULL;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  CHECK_EQ_INT(bootstrap_init(&id, 1, 0, 1, NULL, &bs), ncclSuccess);
  transport_peer_t peers[6];
  for (int r = 0; r < 6; r++)
    peers[r] = (transport_peer_t){sys_host_hash(), sys_pid_hash(), fake_bus_id(r), r, getpid()};
  peers[3].bus_id = fake_bus_id(0); /* rank 3 shares GPU 0 */
  peers[5].host_hash ^= 1;          /* rank 5 on another host */
  fake_invisible = 1u << 4;         /* rank 4's GPU is hidden here */
  transport_t* t = NULL;
  /* Without policy: p2p wherever peer access works, shm where the GPU is hidden. */
  CHECK_EQ_INT(transport_create(bs, 0, 6, 0, peers, NULL, NULL, NULL, &t), ncclSuccess);
  CHECK_EQ_INT(transport_kind(t, 0), KERN_TRANSPORT_NONE); /* oneself */
  CHECK_EQ_INT(transport_kind(t, 1), KERN_TRANSPORT_P2P);
  CHECK_EQ_INT(transport_kind(t, 3), KERN_TRANSPORT_P2P); /* same GPU */
  CHECK_EQ_INT(transport_kind(t, 4), KERN_TRANSPORT_SHM);
  CHECK_EQ_INT(transport_kind(t, 5), KERN_TRANSPORT_NET);
  CHECK_EQ_INT(transport_kind(t, 6), KERN_TRANSPORT_NONE); /* not a rank */
  transport_destroy(t);
  /* No peer access at all: shm between GPUs, still p2p on one GPU. */
  fake_access = 0;
  CHECK_EQ_INT(transport_create(bs, 0, 6, 0, peers, NULL, NULL, NULL, &t), ncclSuccess);
  CHECK_EQ_INT(transport_kind(t, 1), KERN_TRANSPORT_SHM);
  CHECK_EQ_INT(transport_kind(t, 3), KERN_TRANSPORT_P2P);
  transport_destroy(t);
  fake_access = 1;
  /* The policy decides where it is asked; it is not asked about another host. */
  CHECK_EQ_INT(transport_create(bs, 0, 6, 0, peers, NULL, policy_even, &policy_calls, &t),
               ncclSuccess);
  CHECK_EQ_INT(transport_kind(t, 1), KERN_TRANSPORT_SHM);
  CHECK_EQ_INT(policy_last_peer, 1);
  CHECK_EQ_INT(transport_kind(t, 2), KERN_TRANSPORT_P2P);
  CHECK_EQ_INT(transport_kind(t, 2), KERN_TRANSPORT_P2P); /* decided once */
  CHECK_EQ_INT(policy_calls, 2);
  CHECK_EQ_INT(transport_kind(t, 5), KERN_TRANSPORT_NET);
  CHECK_EQ_INT(policy_calls, 2);
  uint64_t dev = 1, host = 1;
  transport_mem_usage(t, &dev, &host);
  CHECK_EQ_INT(dev, 0);
  CHECK_EQ_INT(host, 0);
  transport_destroy(t);
  transport_destroy(NULL);
  CHECK_EQ_INT(transport_create(bs, 6, 6, 0, peers, NULL, NULL, NULL, &t), ncclInternalError);
  CHECK_EQ_INT(bootstrap_close(bs), ncclSuccess);
}

/* NCCL_P2P_DISABLE and NCCL_SHM_DISABLE (read once per process: one case each). */
static void kind_knobs(kern_transport_t want_peer1) {
  transport_set_cuda_ops(&fake_ops);
  ncclUniqueId id;
  bootstrap_t* bs = NULL;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  CHECK_EQ_INT(bootstrap_init(&id, 1, 0, 1, NULL, &bs), ncclSuccess);
  transport_peer_t peers[3];
  for (int r = 0; r < 3; r++)
    peers[r] = (transport_peer_t){sys_host_hash(), sys_pid_hash(), fake_bus_id(r), r, getpid()};
  peers[2].host_hash ^= 1;
  transport_t* t = NULL;
  CHECK_EQ_INT(transport_create(bs, 0, 3, 0, peers, NULL, NULL, NULL, &t), ncclSuccess);
  CHECK_EQ_INT(transport_kind(t, 1), want_peer1);
  CHECK_EQ_INT(transport_kind(t, 2), KERN_TRANSPORT_NET);
  transport_destroy(t);
  CHECK_EQ_INT(bootstrap_close(bs), ncclSuccess);
}
static void case_knob_p2p_off(void) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  kind_knobs(KERN_TRANSPORT_SHM);
}
static void case_knob_shm_off(void) {
  setenv("NCCL_SHM_DISABLE", "1", 1);
  kind_knobs(KERN_TRANSPORT_P2P);
}
/* Both off: the network within the host, as NCCL does. */
static void case_knob_both_off(void) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  kind_knobs(KERN_TRANSPORT_NET);
}

/* ---- Wire ----------------------------------------------------------------------------------- */

static void conn_set(transport_wire_conn_t* c, int id, int is_send, uint32_t slot) {
  memset(c, 0, sizeof(*c));
  c->id = id;
  c->is_send = is_send;
  c->slot_bytes[KERN_PROTO_SIMPLE] = slot;
}

/* A request with a slot per protocol (0: not made). */
static transport_req_t req_make(int peer, int is_send, int id, uint32_t ll, uint32_t ll128,
                                uint32_t simple, kern_conn_t* out) {
  return (transport_req_t){.peer = peer, .is_send = is_send, .id = id,
                           .slot_bytes = {[KERN_PROTO_LL] = ll, [KERN_PROTO_LL128] = ll128,
                                          [KERN_PROTO_SIMPLE] = simple},
                           .out = out};
}
static transport_req_t req_simple(int peer, int is_send, int id, uint32_t simple,
                                  kern_conn_t* out) {
  return req_make(peer, is_send, id, 0, 0, simple, out);
}

static void case_layout(void) {
  /* Rank A: receives ids 0,1 (slots 4096, 48), sends id 0. */
  transport_wire_conn_t c[3];
  conn_set(&c[0], 0, 0, 4096);
  conn_set(&c[1], 1, 0, 48);
  conn_set(&c[2], 0, 1, 4096);
  uint64_t bytes = transport_wire_layout(KERN_TRANSPORT_P2P, c, 3);
  CHECK_EQ_INT(bytes % TRANSPORT_BUFF_ALIGN, 0);
  CHECK_EQ_INT(c[0].off_buff[KERN_PROTO_SIMPLE] % TRANSPORT_BUFF_ALIGN, 0);
  CHECK_EQ_INT(c[1].off_buff[KERN_PROTO_SIMPLE] % TRANSPORT_BUFF_ALIGN, 0);
  CHECK_TRUE(c[1].off_buff[KERN_PROTO_SIMPLE] >= c[0].off_buff[KERN_PROTO_SIMPLE] + KERN_NSLOTS * 4096u);
  CHECK_TRUE(c[0].off_tail >= c[1].off_buff[KERN_PROTO_SIMPLE] + KERN_NSLOTS * 48u);
  /* Protocols not asked for get no buffer. */
  CHECK_TRUE(c[0].off_buff[KERN_PROTO_LL] == TRANSPORT_OFF_NONE &&
             c[0].off_buff[KERN_PROTO_LL128] == TRANSPORT_OFF_NONE);
  /* p2p: receive ends host buff + tail, the send end the head. */
  CHECK_TRUE(c[0].off_head == TRANSPORT_OFF_NONE && c[1].off_head == TRANSPORT_OFF_NONE);
  CHECK_TRUE(c[2].off_buff[KERN_PROTO_SIMPLE] == TRANSPORT_OFF_NONE &&
             c[2].off_tail == TRANSPORT_OFF_NONE);
  uint64_t lines[3] = {c[0].off_tail, c[1].off_tail, c[2].off_head};
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(lines[i] % TRANSPORT_LINE, 0);
    CHECK_TRUE(lines[i] + TRANSPORT_LINE <= bytes);
    for (int k = 0; k < i; k++) CHECK_TRUE(lines[i] != lines[k]);
  }
  /* shm: receive ends host all three, the send end nothing. */
  bytes = transport_wire_layout(KERN_TRANSPORT_SHM, c, 3);
  CHECK_EQ_INT(bytes % TRANSPORT_BUFF_ALIGN, 0);
  CHECK_TRUE(c[0].off_head != TRANSPORT_OFF_NONE && c[1].off_head != TRANSPORT_OFF_NONE);
  CHECK_TRUE(c[0].off_head != c[0].off_tail && c[1].off_head != c[0].off_head);
  CHECK_TRUE(c[1].off_head + TRANSPORT_LINE <= bytes);
  CHECK_TRUE(c[2].off_buff[KERN_PROTO_SIMPLE] == TRANSPORT_OFF_NONE &&
             c[2].off_head == TRANSPORT_OFF_NONE);
  /* Only send ends: an shm sender hosts nothing. */
  CHECK_EQ_INT(transport_wire_layout(KERN_TRANSPORT_SHM, &c[2], 1), 0);
  CHECK_EQ_INT(transport_wire_layout(KERN_TRANSPORT_P2P, &c[2], 1), TRANSPORT_BUFF_ALIGN);
}

/* Per-protocol buffers: which protocols get their own buffer per kind, where the shared ones
 * point, and that the block holds every buffer once, none overlapping. */
static void case_layout_protos(void) {
  CHECK_EQ_INT(transport_shared_protos(KERN_TRANSPORT_P2P), 0);
  CHECK_EQ_INT(transport_shared_protos(KERN_TRANSPORT_SHM), 1u << KERN_PROTO_LL128);
  CHECK_EQ_INT(transport_shared_protos(KERN_TRANSPORT_NET),
               1u << KERN_PROTO_LL | 1u << KERN_PROTO_LL128);
  const uint32_t ll = 8192, ll128 = 76800, simple = 65536;
  for (int kind = KERN_TRANSPORT_P2P; kind <= KERN_TRANSPORT_SHM; kind++) {
    /* Two receive ends with all three protocols, one with SIMPLE and LL128 only, a send end. */
    transport_wire_conn_t c[4];
    for (int i = 0; i < 4; i++) conn_set(&c[i], i, i == 3, simple);
    c[0].slot_bytes[KERN_PROTO_LL] = c[1].slot_bytes[KERN_PROTO_LL] = ll;
    c[0].slot_bytes[KERN_PROTO_LL128] = c[1].slot_bytes[KERN_PROTO_LL128] = ll128;
    c[2].slot_bytes[KERN_PROTO_LL128] = ll128;
    uint64_t bytes = transport_wire_layout((kern_transport_t)kind, c, 4);
    const int shared128 = kind == KERN_TRANSPORT_SHM;
    uint64_t own = 0; /* bytes of buffers of their own */
    uint64_t lo[12], hi[12];
    int nb = 0;
    for (int i = 0; i < 3; i++) {
      for (int p = 0; p < KERN_PROTO_NUM; p++) {
        const uint64_t off = c[i].off_buff[p];
        if (c[i].slot_bytes[p] == 0) {
          CHECK_MSG(off == TRANSPORT_OFF_NONE, "kind %d conn %d proto %d: not made", kind, i, p);
          continue;
        }
        if (p == KERN_PROTO_LL128 && shared128) {
          CHECK_MSG(off == c[i].off_buff[KERN_PROTO_SIMPLE], "shm LL128 shares SIMPLE's buffer");
          continue;
        }
        CHECK_MSG(off % TRANSPORT_BUFF_ALIGN == 0, "kind %d conn %d proto %d aligned", kind, i, p);
        lo[nb] = off;
        hi[nb++] = off + (uint64_t)KERN_NSLOTS * c[i].slot_bytes[p];
        own += (uint64_t)KERN_NSLOTS * c[i].slot_bytes[p];
        CHECK_TRUE(off + (uint64_t)KERN_NSLOTS * c[i].slot_bytes[p] <= c[0].off_tail);
      }
    }
    for (int a = 0; a < nb; a++)
      for (int b = 0; b < a; b++)
        CHECK_MSG(hi[a] <= lo[b] || hi[b] <= lo[a], "kind %d: buffers %d and %d overlap", kind,
                  a, b);
    CHECK_TRUE(bytes >= own);
    CHECK_EQ_INT(own, KERN_NSLOTS * (uint64_t)(3 * simple + 2 * ll + (shared128 ? 0 : 3 * ll128)));
    for (int p = 0; p < KERN_PROTO_NUM; p++)
      CHECK_TRUE(c[3].off_buff[p] == TRANSPORT_OFF_NONE);
  }
  /* The effective slots: a shared protocol takes SIMPLE's, 0 stays 0. */
  uint32_t req[KERN_PROTO_NUM] = {[KERN_PROTO_LL] = ll, [KERN_PROTO_LL128] = ll128,
                                  [KERN_PROTO_SIMPLE] = simple};
  uint32_t eff[KERN_PROTO_NUM];
  transport_slots_effective(KERN_TRANSPORT_P2P, req, eff);
  CHECK_TRUE(eff[KERN_PROTO_LL] == ll && eff[KERN_PROTO_LL128] == ll128 &&
             eff[KERN_PROTO_SIMPLE] == simple);
  transport_slots_effective(KERN_TRANSPORT_SHM, req, eff);
  CHECK_TRUE(eff[KERN_PROTO_LL] == ll && eff[KERN_PROTO_LL128] == simple);
  transport_slots_effective(KERN_TRANSPORT_NET, req, eff);
  CHECK_TRUE(eff[KERN_PROTO_LL] == simple && eff[KERN_PROTO_LL128] == simple);
  req[KERN_PROTO_LL] = 0;
  transport_slots_effective(KERN_TRANSPORT_NET, req, eff);
  CHECK_TRUE(eff[KERN_PROTO_LL] == 0 && eff[KERN_PROTO_LL128] == simple);
  CHECK_EQ_STR(kern_proto_name(KERN_PROTO_LL), "LL");
  CHECK_EQ_STR(kern_proto_name(KERN_PROTO_LL128), "LL128");
  CHECK_EQ_STR(kern_proto_name(KERN_PROTO_SIMPLE), "Simple");
}

/* A matching pair of messages: rank 0 sends ids 0,1 and receives id 0 from rank 1. */
typedef struct {
  transport_wire_hdr_t h[2];
  transport_wire_conn_t c[2][3];
} wire_pair_t;

static void wire_pair(wire_pair_t* w, kern_transport_t kind) {
  memset(w, 0, sizeof(*w));
  conn_set(&w->c[0][0], 0, 0, 1024);
  conn_set(&w->c[0][1], 0, 1, 1024);
  conn_set(&w->c[0][2], 1, 1, 2048);
  /* rank 1 lists its mirror in another order */
  conn_set(&w->c[1][0], 1, 0, 2048);
  conn_set(&w->c[1][1], 0, 0, 1024);
  conn_set(&w->c[1][2], 0, 1, 1024);
  for (int r = 0; r < 2; r++) {
    transport_wire_hdr_t* h = &w->h[r];
    h->magic = TRANSPORT_WIRE_MAGIC;
    h->rank = r;
    h->peer = 1 - r;
    h->kind = kind;
    h->nconns = 3;
    h->block_bytes = transport_wire_layout(kind, w->c[r], 3);
    h->has_block = h->block_bytes != 0;
  }
}

static ncclResult_t wire_check_from(const wire_pair_t* w, int r, int* match) {
  err_clear_last();
  return transport_wire_check(r, 1 - r, &w->h[r], w->c[r], &w->h[1 - r], w->c[1 - r], match);
}

/* shm's LL128 lives in the Simple buffer: a sender checks it against Simple's slots, not the
 * larger slots it asked for (NCCL's default LL128 slot, 614400, exceeds Simple's 524288: every
 * ring connection over shm failed with "garbled message" before). */
static void case_wire_shm_ll128(void) {
  wire_pair_t w;
  int match[3];
  wire_pair(&w, KERN_TRANSPORT_SHM);
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 3; i++) w.c[r][i].slot_bytes[KERN_PROTO_LL128] = 8192;
    w.h[r].block_bytes = transport_wire_layout(KERN_TRANSPORT_SHM, w.c[r], 3);
  }
  for (int r = 0; r < 2; r++) CHECK_EQ_INT(wire_check_from(&w, r, match), ncclSuccess);
}

static void case_wire(void) {
  wire_pair_t w;
  int match[3];
  for (int kind = KERN_TRANSPORT_P2P; kind <= KERN_TRANSPORT_SHM; kind++) {
    wire_pair(&w, (kern_transport_t)kind);
    CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclSuccess);
    CHECK_EQ_INT(match[0], 2);
    CHECK_EQ_INT(match[1], 1);
    CHECK_EQ_INT(match[2], 0);
    CHECK_EQ_INT(wire_check_from(&w, 1, match), ncclSuccess);
    CHECK_EQ_INT(match[0], 2);
    CHECK_EQ_INT(match[1], 1);
    CHECK_EQ_INT(match[2], 0);
  }
  /* Each mismatch fails on both sides, with a message naming it. */
  struct {
    const char* what;
    void (*edit)(wire_pair_t* w);
    ncclResult_t want;
    const char* text;
  } cases[] = {
      {"kind", NULL, ncclInternalError, "rank 0 chose P2P for its connections with rank 1, "
                                        "but rank 1 chose SHM"},
      {"count", NULL, ncclInternalError, "connects 3 end(s) with rank 1 in this call, but rank "
                                         "1 connects 2"},
      {"id", NULL, ncclInternalError, "no receive end with id 1 for rank 0"},
      {"direction", NULL, ncclInternalError, "do not mirror"},
      {"slot", NULL, ncclInternalError, "Simple slot_bytes 2048 on rank 0, 4096 on rank 1"},
      {"slot LL", NULL, ncclInternalError, "LL slot_bytes 0 on rank 0, 1024 on rank 1"},
      {"slot LL128", NULL, ncclInternalError, "LL128 slot_bytes 2048 on rank 0, 4096 on rank 1"},
      {"net", NULL, ncclSuccess, ""}, /* net ends point at nothing of the peer's */
      {"none", NULL, ncclInvalidUsage, "NCCL_SHM_DISABLE"},
  };
  for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
    for (int r = 0; r < 2; r++) {
      wire_pair(&w, KERN_TRANSPORT_P2P);
      switch (k) {
        case 0: w.h[1].kind = KERN_TRANSPORT_SHM; break;
        case 1: w.h[1].nconns = 2; w.h[0].nconns = 3; break;
        case 2: w.c[1][0].id = 7; break;
        case 3: w.c[1][0].is_send = 1; break;
        case 4: w.c[1][0].slot_bytes[KERN_PROTO_SIMPLE] = 4096; break;
        case 5: w.c[1][0].slot_bytes[KERN_PROTO_LL] = 1024; break;
        case 6:
          w.c[0][2].slot_bytes[KERN_PROTO_LL128] = 2048;
          w.c[1][0].slot_bytes[KERN_PROTO_LL128] = 4096;
          break;
        case 7: w.h[0].kind = w.h[1].kind = KERN_TRANSPORT_NET; break;
        case 8: w.h[0].kind = w.h[1].kind = KERN_TRANSPORT_NONE; break;
      }
      if (k == 1 && r == 1) continue; /* rank 1 would read 3 entries it does not have */
      ncclResult_t res = wire_check_from(&w, r, match);
      CHECK_MSG(res == cases[k].want, "%s, seen from rank %d: %d", cases[k].what, r, res);
      if (r == 0) CHECK_CONTAINS(err_last(), cases[k].text);
    }
  }
  /* The peer's own failure is reported as such. */
  wire_pair(&w, KERN_TRANSPORT_SHM);
  w.h[1].status = TRANSPORT_STATUS_FAILED;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclRemoteError);
  CHECK_CONTAINS(err_last(), "rank 1 could not set up its side");
  /* Garbage: magic, addressee, offsets outside the block or misaligned, missing block. */
  wire_pair(&w, KERN_TRANSPORT_P2P);
  w.h[1].magic ^= 1;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "garbled");
  wire_pair(&w, KERN_TRANSPORT_P2P);
  w.h[1].peer = 2;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  wire_pair(&w, KERN_TRANSPORT_P2P);
  w.c[1][1].off_buff[KERN_PROTO_SIMPLE] = w.h[1].block_bytes - 16; /* 8 slots do not fit */
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "Simple buffer of connection 0");
  /* Every buffer a send end points at is checked: an LL buffer outside the block. Rank 0's
   * send end with id 0 meets rank 1's receive end with id 0 (w.c[1][1]). */
  wire_pair(&w, KERN_TRANSPORT_P2P);
  w.c[0][1].slot_bytes[KERN_PROTO_LL] = w.c[1][1].slot_bytes[KERN_PROTO_LL] = 1024;
  w.h[1].block_bytes = transport_wire_layout(KERN_TRANSPORT_P2P, w.c[1], 3);
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclSuccess);
  CHECK_TRUE(w.c[1][1].off_buff[KERN_PROTO_LL] != w.c[1][1].off_buff[KERN_PROTO_SIMPLE]);
  w.c[1][1].off_buff[KERN_PROTO_LL] = w.h[1].block_bytes - 1024;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "LL buffer of connection 0");
  w.c[1][1].off_buff[KERN_PROTO_LL] = TRANSPORT_OFF_NONE;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "LL buffer of connection 0");
  wire_pair(&w, KERN_TRANSPORT_P2P);
  w.c[1][0].off_tail += 4;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "tail of connection 1");
  wire_pair(&w, KERN_TRANSPORT_P2P);
  w.c[1][2].off_head = TRANSPORT_OFF_NONE; /* rank 1's send end must host a head in p2p */
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "head of connection 0");
  wire_pair(&w, KERN_TRANSPORT_SHM);
  w.h[1].has_block = 0;
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclInternalError);
  CHECK_CONTAINS(err_last(), "does not host");
  /* shm: a receive end needs nothing from the sender, which hosts nothing. */
  wire_pair(&w, KERN_TRANSPORT_SHM);
  for (int i = 0; i < 3; i++) conn_set(&w.c[0][i], i, 0, 1024);
  for (int i = 0; i < 3; i++) conn_set(&w.c[1][i], i, 1, 1024);
  w.h[0].block_bytes = transport_wire_layout(KERN_TRANSPORT_SHM, w.c[0], 3);
  w.h[1].block_bytes = transport_wire_layout(KERN_TRANSPORT_SHM, w.c[1], 3);
  w.h[1].has_block = 0;
  CHECK_EQ_INT(w.h[1].block_bytes, 0);
  CHECK_EQ_INT(wire_check_from(&w, 0, match), ncclSuccess);
  CHECK_EQ_INT(wire_check_from(&w, 1, match), ncclSuccess);
}

/* ---- Shared memory segments across processes ------------------------------------------------ */

static void case_shm_segments(void) {
  transport_set_cuda_ops(&fake_ops);
  transport_res_t* r = NULL;
  size_t bytes = 3 * 4096;
  CHECK_EQ_INT(transport_shm_create(bytes, &r), ncclSuccess);
  if (r == NULL) return;
  CHECK_TRUE(r->created && r->named && !r->registered);
  char prefix[40];
  snprintf(prefix, sizeof(prefix), "/choir-%d-", (int)getpid());
  CHECK_TRUE(strncmp(r->name, prefix, strlen(prefix)) == 0);
  unsigned char* p = (unsigned char*)r->ptr;
  size_t zero = 0;
  for (size_t i = 0; i < bytes; i++) zero += p[i] == 0;
  CHECK_EQ_INT(zero, bytes);
  for (size_t i = 0; i < bytes; i++) p[i] = (unsigned char)(i * 13 + 1);
  /* Another process opens it by name, checks, and answers in the last byte. */
  pid_t pid = fork();
  if (pid == 0) {
    transport_res_t* o = NULL;
    int ok = transport_shm_open(r->name, bytes, &o) == ncclSuccess;
    if (ok) {
      unsigned char* q = (unsigned char*)o->ptr;
      for (size_t i = 0; i + 1 < bytes; i++) ok &= q[i] == (unsigned char)(i * 13 + 1);
      q[bytes - 1] = ok ? 0xa5 : 0x5a;
      ok &= !o->created && !o->named;
      transport_res_release(o);
    }
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK_EQ_INT(p[bytes - 1], 0xa5);
  /* Too small for what the peer announces: refused. */
  transport_res_t* o = NULL;
  CHECK_EQ_INT(transport_shm_open(r->name, bytes + 1, &o), ncclInternalError);
  /* Registration is a step of its own, undone on release. */
  void* dev = NULL;
  CHECK_EQ_INT(transport_shm_register(r, &dev), ncclSuccess);
  CHECK_TRUE(dev == r->ptr && r->registered);
  CHECK_EQ_INT(atomic_load(&fake_live_reg), 1);
  /* After the unlink the name is gone, the mapping stays. */
  char name[TRANSPORT_SHM_NAME_MAX];
  sys_strlcpy(name, r->name, sizeof(name));
  transport_shm_unlink(r);
  CHECK_TRUE(!r->named);
  CHECK_EQ_INT(transport_shm_open(name, bytes, &o), ncclSystemError);
  CHECK_CONTAINS(err_last(), name);
  CHECK_EQ_INT(p[0], 1);
  transport_res_release(r);
  CHECK_EQ_INT(atomic_load(&fake_live_reg), 0);
  /* Names are never reused, even within a process. */
  transport_res_t *a = NULL, *b = NULL;
  CHECK_EQ_INT(transport_shm_create(4096, &a), ncclSuccess);
  CHECK_EQ_INT(transport_shm_create(4096, &b), ncclSuccess);
  if (a != NULL && b != NULL) CHECK_TRUE(strcmp(a->name, b->name) != 0);
  CHECK_EQ_INT(own_shm_names(), 2);
  transport_res_release(a); /* a created, still named segment is unlinked on release */
  transport_res_release(b);
  CHECK_EQ_INT(own_shm_names(), 0);
}

/* ---- Connecting ranks ----------------------------------------------------------------------- */

/* Everything a rank needs; travels to rank processes as one hex argument. */
typedef struct {
  int nranks;
  int policy;   /* 1: the policy allows p2p; 0: it refuses it */
  int kind;     /* the kern_transport_t every connection must get */
  int nchan;    /* ring connections per direction */
  int npairs;   /* all-pairs connections per peer and direction */
  int body;     /* what a rank process runs: 0 rank_run, 1 net_death_rank, 2 net_oversize_rank */
  int killed;   /* the rank whose process dies by SIGKILL on purpose (-1: none) */
  ncclUniqueId id;
} job_t;

static int net_death_rank(int rank, const job_t* j);
static int net_oversize_rank(int rank, const job_t* j);

static int policy_allow(void* ctx, int peer, int* use_read_p) {
  (void)peer;
  (void)use_read_p;
  return *(const int*)ctx;
}

/* The byte every connection's buffer of protocol p carries at offset i, and the counters. */
static unsigned char pattern(int src, int dst, int call, int id, int p, size_t i) {
  return (unsigned char)(src * 37 + dst * 11 + call * 101 + id * 7 + p * 53 + i * 3 + (i >> 9));
}
static uint64_t tail_value(int src, int dst, int call, int id) {
  return 0x7a11000000000000ull | (uint64_t)src << 32 | (uint64_t)dst << 16 |
         (uint64_t)(call * 64 + id);
}
static uint64_t head_value(int src, int dst, int call, int id) {
  return ~tail_value(src, dst, call, id);
}

/* Protocol p of c has a buffer of its own (not SIMPLE's). */
static int own_buffer(const kern_conn_t* c, int p) {
  return c->buff[p] != NULL && (p == KERN_PROTO_SIMPLE || c->buff[p] != c->buff[KERN_PROTO_SIMPLE]);
}

/* One end's buffers as the contract wants them for its kind: made iff asked, the slot sizes
 * (a shared protocol has SIMPLE's), aliasing and tail_sync per kind, zeroed. */
static int prove_buffers(const transport_req_t* q, int kind) {
  int bad = 0;
  const kern_conn_t* c = q->out;
  /* The contract, written out here rather than asked of the transport. */
  const uint32_t shared = kind == KERN_TRANSPORT_SHM   ? 1u << KERN_PROTO_LL128
                          : kind == KERN_TRANSPORT_NET ? 1u << KERN_PROTO_LL | 1u << KERN_PROTO_LL128
                                                       : 0;
  uint32_t want_sync = 0;
  for (int p = 0; p < KERN_PROTO_NUM; p++) {
    const uint32_t asked = q->slot_bytes[p];
    const int sh = p != KERN_PROTO_SIMPLE && (shared >> p & 1u);
    EXPECT((c->buff[p] != NULL) == (asked != 0));
    EXPECT(c->slot_bytes[p] == (asked == 0 ? 0 : sh ? q->slot_bytes[KERN_PROTO_SIMPLE] : asked));
    if (asked == 0 || c->buff[p] == NULL) continue;
    if (sh) {
      EXPECT(c->buff[p] == c->buff[KERN_PROTO_SIMPLE]);
      want_sync |= 1u << p;
    } else {
      EXPECT(own_buffer(c, p));
      /* Net slots in GPU memory (GPUDirect) have cudaMalloc's alignment only. */
      EXPECT((uintptr_t)c->buff[p] % (kind == KERN_TRANSPORT_NET ? 128 : TRANSPORT_BUFF_ALIGN) == 0);
      /* Zeroed at creation: LL and LL128 flags start at 1, so zero is never a valid line. */
      size_t nonzero = 0, bytes = (size_t)KERN_NSLOTS * c->slot_bytes[p];
      for (size_t k = 0; k < bytes; k++) nonzero += c->buff[p][k] != 0;
      EXPECT(nonzero == 0);
    }
  }
  EXPECT(c->tail_sync == want_sync);
  /* Own buffers of one end do not overlap. */
  for (int p = 0; p < KERN_PROTO_NUM; p++)
    for (int r = 0; r < p; r++) {
      if (!own_buffer(c, p) || !own_buffer(c, r)) continue;
      const char *a0 = c->buff[p], *a1 = a0 + (size_t)KERN_NSLOTS * c->slot_bytes[p];
      const char *b0 = c->buff[r], *b1 = b0 + (size_t)KERN_NSLOTS * c->slot_bytes[r];
      EXPECT(a1 <= b0 || b1 <= a0);
    }
  return bad;
}

/* Prove a connect: every send end writes each of its buffers and its tail through its own
 * pointers, every receive end finds them through its own; then heads the other way. A pattern
 * per protocol shows that the buffers are distinct and that nothing else overlaps them. */
static int prove(bootstrap_t* bs, int rank, transport_req_t* reqs, int n, int call, int kind) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    kern_conn_t* c = reqs[i].out;
    EXPECT(c->connected == 1);
    EXPECT((int)c->transport == kind);
    EXPECT(c->step == 0);
    EXPECT(c->buff[KERN_PROTO_SIMPLE] != NULL && c->tail != NULL && c->head != NULL);
    EXPECT((uintptr_t)c->tail % TRANSPORT_LINE == 0 && (uintptr_t)c->head % TRANSPORT_LINE == 0);
    if (!c->connected || !c->buff[KERN_PROTO_SIMPLE] || !c->tail || !c->head) return bad;
    bad += prove_buffers(&reqs[i], kind);
    /* Zeroed at creation. */
    EXPECT(*c->tail == 0 && *c->head == 0);
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  for (int i = 0; i < n; i++) {
    if (!reqs[i].is_send) continue;
    kern_conn_t* c = reqs[i].out;
    for (int p = 0; p < KERN_PROTO_NUM; p++) {
      if (!own_buffer(c, p)) continue;
      size_t bytes = (size_t)KERN_NSLOTS * c->slot_bytes[p];
      for (size_t k = 0; k < bytes; k++)
        c->buff[p][k] = (char)pattern(rank, reqs[i].peer, call, reqs[i].id, p, k);
    }
    *c->tail = tail_value(rank, reqs[i].peer, call, reqs[i].id);
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  for (int i = 0; i < n; i++) {
    if (reqs[i].is_send) continue;
    kern_conn_t* c = reqs[i].out;
    for (int p = 0; p < KERN_PROTO_NUM; p++) {
      if (!own_buffer(c, p)) continue;
      size_t bytes = (size_t)KERN_NSLOTS * c->slot_bytes[p], wrong = 0;
      for (size_t k = 0; k < bytes; k++)
        wrong += (unsigned char)c->buff[p][k] != pattern(reqs[i].peer, rank, call, reqs[i].id, p, k);
      EXPECT(wrong == 0);
    }
    EXPECT(*c->tail == tail_value(reqs[i].peer, rank, call, reqs[i].id));
    *c->head = head_value(reqs[i].peer, rank, call, reqs[i].id);
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  for (int i = 0; i < n; i++) {
    if (!reqs[i].is_send) continue;
    kern_conn_t* c = reqs[i].out;
    EXPECT(*c->head == head_value(rank, reqs[i].peer, call, reqs[i].id));
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  return bad;
}

/* The bytes a connect of reqs[0..n) makes this rank hold, by the transport's own layout: per
 * peer, p2p one device block (plus the alignment slack), shm one host segment when receiving. */
static void expected_bytes(int kind, const transport_req_t* reqs, int n, int nranks,
                           uint64_t* dev_p, uint64_t* host_p) {
  transport_wire_conn_t* c = calloc((size_t)n, sizeof(*c));
  for (int peer = 0; peer < nranks; peer++) {
    int m = 0;
    for (int i = 0; i < n; i++) {
      if (reqs[i].peer != peer) continue;
      c[m].id = reqs[i].id;
      c[m].is_send = reqs[i].is_send;
      memcpy(c[m].slot_bytes, reqs[i].slot_bytes, sizeof(c[m].slot_bytes));
      m++;
    }
    if (m == 0) continue;
    uint64_t b = transport_wire_layout((kern_transport_t)kind, c, m);
    if (kind == KERN_TRANSPORT_P2P) *dev_p += b + TRANSPORT_BUFF_ALIGN;
    else *host_p += b;
  }
  free(c);
}

/* Slots of the ring call: every protocol, each its own size (LL128's a whole number of lines). */
#define RING_LL 1024u
#define RING_LL128 1536u
#define RING_SIMPLE 4096u

static int rank_run(int rank, const job_t* j) {
  int bad = 0;
  t_rank = rank;
  fake_dev = rank;
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(&j->id, 1, rank, j->nranks, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad;
  int n = j->nranks;
  transport_peer_t* peers = calloc((size_t)n, sizeof(*peers));
  peers[rank] = (transport_peer_t){sys_host_hash(), sys_pid_hash(), fake_bus_id(rank), rank,
                                   getpid()};
  EXPECT(bootstrap_allgather(bs, peers, sizeof(*peers)) == ncclSuccess);
  transport_t* t = NULL;
  int allow = j->policy;
  EXPECT(transport_create(bs, rank, n, rank, peers, NULL, policy_allow, &allow, &t) ==
         ncclSuccess);
  int kind = j->kind;
  for (int p = 0; p < n; p++)
    if (p != rank) EXPECT((int)transport_kind(t, p) == kind);

  /* Call 1, a ring: send to next, receive from prev (with 2 ranks, the same peer). */
  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  int nring = 2 * j->nchan;
  transport_req_t* ring = calloc((size_t)nring, sizeof(*ring));
  kern_conn_t* ring_out = calloc((size_t)nring, sizeof(*ring_out));
  for (int c = 0; c < j->nchan; c++) {
    ring[2 * c] = req_make(next, 1, c, RING_LL, RING_LL128, RING_SIMPLE, &ring_out[2 * c]);
    ring[2 * c + 1] = req_make(prev, 0, c, RING_LL, RING_LL128, RING_SIMPLE, &ring_out[2 * c + 1]);
  }
  EXPECT(transport_connect(t, ring, nring, 1) == ncclSuccess);
  bad += prove(bs, rank, ring, nring, 1, kind);

  /* Call 2, all pairs, in a scrambled order, with a slot size of its own. */
  int npair = 2 * (n - 1) * j->npairs, k = 0;
  transport_req_t* pairs = calloc((size_t)npair, sizeof(*pairs));
  kern_conn_t* pair_out = calloc((size_t)npair, sizeof(*pair_out));
  for (int c = j->npairs - 1; c >= 0; c--) {
    for (int d = 1; d < n; d++) {
      int p = (rank + d) % n;
      pairs[k] = req_simple(p, 0, c, 1024, &pair_out[k]);
      k++;
      pairs[k] = req_simple(p, 1, c, 1024, &pair_out[k]);
      k++;
    }
  }
  EXPECT(transport_connect(t, pairs, npair, 2) == ncclSuccess);
  bad += prove(bs, rank, pairs, npair, 2, kind);

  /* Every buffer counted, each once: exactly the blocks of the layout, which holds each
   * receive end's buffers of their own (shm: LL128 in SIMPLE's). */
  uint64_t dev = 0, host = 0, want_dev = 0, want_host = 0;
  transport_mem_usage(t, &dev, &host);
  expected_bytes(kind, ring, nring, n, &want_dev, &want_host);
  expected_bytes(kind, pairs, npair, n, &want_dev, &want_host);
  EXPECT(dev == want_dev && host == want_host);
  const uint64_t per_ring_recv =
      (uint64_t)KERN_NSLOTS *
      (RING_SIMPLE + RING_LL + (kind == KERN_TRANSPORT_P2P ? RING_LL128 : 0));
  const uint64_t floor = (uint64_t)j->nchan * per_ring_recv +
                         (uint64_t)(n - 1) * j->npairs * KERN_NSLOTS * 1024;
  EXPECT((kind == KERN_TRANSPORT_P2P ? dev : host) >= floor);
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  transport_destroy(t);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  free(ring);
  free(ring_out);
  free(pairs);
  free(pair_out);
  free(peers);
  return bad;
}

typedef struct {
  const job_t* j;
  int rank;
  int bad;
  int (*body)(int rank, const job_t* j);
} thread_job_t;

static void* thread_rank(void* arg) {
  thread_job_t* t = (thread_job_t*)arg;
  t->bad = t->body(t->rank, t->j);
  return NULL;
}

/* One thread per rank running body; every rank must finish without a failed EXPECT. */
static void run_rank_threads(const job_t* j, int (*body)(int rank, const job_t* j)) {
  thread_job_t t[8];
  pthread_t th[8];
  for (int r = 0; r < j->nranks; r++) {
    t[r] = (thread_job_t){j, r, 0, body};
    pthread_create(&th[r], NULL, thread_rank, &t[r]);
  }
  for (int r = 0; r < j->nranks; r++) {
    pthread_join(th[r], NULL);
    CHECK_EQ_INT(t[r].bad, 0);
  }
}

static void job_make(job_t* j, int nranks, int policy, int nchan, int npairs) {
  memset(j, 0, sizeof(*j));
  j->nranks = nranks;
  j->policy = policy;
  j->kind = policy ? KERN_TRANSPORT_P2P : KERN_TRANSPORT_SHM;
  j->nchan = nchan;
  j->npairs = npairs;
  j->killed = -1;
  CHECK_EQ_INT(bootstrap_get_unique_id(&j->id), ncclSuccess);
}

static void run_threads(int nranks, int policy) {
  transport_set_cuda_ops(&fake_ops);
  job_t j;
  job_make(&j, nranks, policy, 3, 2);
  run_rank_threads(&j, rank_run);
  CHECK_EQ_INT(fake_live(), 0);
  CHECK_EQ_INT(own_shm_names(), 0);
  /* Same process: raw pointers and peer access, never an IPC handle. */
  if (policy) CHECK_TRUE(atomic_load(&fake_enable_calls) > 0);
}

static void case_threads_p2p_2(void) { run_threads(2, 1); }
static void case_threads_p2p_4(void) { run_threads(4, 1); }
static void case_threads_shm_2(void) { run_threads(2, 0); }
static void case_threads_shm_4(void) { run_threads(4, 0); }

/* Rank processes: fork, then exec this binary again (no inherited locks of other threads). */
static int run_procs(const job_t* j) {
  char hex[2 * sizeof(job_t) + 1];
  const unsigned char* b = (const unsigned char*)j;
  for (size_t i = 0; i < sizeof(job_t); i++) sprintf(hex + 2 * i, "%02x", b[i]);
  pid_t pids[8];
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < j->nranks; r++) {
    char rank_s[16];
    snprintf(rank_s, sizeof(rank_s), "%d", r);
    pids[r] = fork();
    if (pids[r] == 0) {
      execl("/proc/self/exe", "test-transport", "--rank", rank_s, hex, (char*)NULL);
      _exit(127);
    }
  }
  int failed = 0;
  for (int r = 0; r < j->nranks; r++) {
    int st = 0;
    waitpid(pids[r], &st, 0);
    if (r == j->killed) fake_unlink_pid(pids[r]); /* it could not remove its own names */
    if (r == j->killed ? !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL
                       : !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %d (pid %d) failed: status 0x%x\n", r, (int)pids[r], st);
      failed++;
    }
  }
  return failed;
}

static int rank_main(const char* rank_s, const char* hex) {
  job_t j;
  unsigned char* b = (unsigned char*)&j;
  if (strlen(hex) != 2 * sizeof(job_t)) return 2;
  for (size_t i = 0; i < sizeof(job_t); i++) sscanf(hex + 2 * i, "%2hhx", &b[i]);
  alarm(60);
  transport_set_cuda_ops(&fake_ops);
  int rank = atoi(rank_s);
  int bad = j.body == 1   ? net_death_rank(rank, &j)
            : j.body == 2 ? net_oversize_rank(rank, &j)
                          : rank_run(rank, &j);
  t_rank = rank;
  /* One process per rank: everything is released, and the names were gone at once. */
  EXPECT(fake_live() == 0);
  EXPECT(own_shm_names() == 0);
  EXPECT(atomic_load(&fake_enable_calls) == 0);
  fflush(stdout);
  fflush(stderr);
  return bad == 0 && check_failures_ == 0 ? 0 : 1;
}

static void run_procs_case(int nranks, int policy) {
  job_t j;
  job_make(&j, nranks, policy, 2, 2);
  CHECK_EQ_INT(run_procs(&j), 0);
}

static void case_procs_p2p_2(void) { run_procs_case(2, 1); }
static void case_procs_p2p_3(void) { run_procs_case(3, 1); }
static void case_procs_shm_2(void) { run_procs_case(2, 0); }
static void case_procs_shm_3(void) { run_procs_case(3, 0); }

/* ---- Failures both ends agree on ------------------------------------------------------------ */

typedef enum {
  F_ID,         /* rank 1 receives on another id */
  F_COUNT,      /* rank 0 asks for one end more */
  F_SLOT,       /* slot sizes differ */
  F_SLOT_LL,    /* rank 1 makes LL on a connection, rank 0 does not */
  F_SLOT_LL128, /* LL128 slot sizes differ */
  F_SAME_DIR,   /* both send */
  F_KIND,       /* rank 0 allows p2p, rank 1 does not */
  F_NET,        /* another host */
  F_ALLOC,      /* rank 1 cannot allocate its side (before round 1) */
  F_MAP,        /* rank 0 cannot map rank 1's segment (round 2 tells rank 1) */
  F_COUNT_ALL
} fault_t;

typedef struct {
  fault_t fault;
  ncclUniqueId id;
  int rank;
  ncclResult_t res;
  char msg[512];
  int bad;
} fault_job_t;

static void* fault_rank(void* arg) {
  fault_job_t* f = (fault_job_t*)arg;
  int bad = 0, rank = f->rank, peer = 1 - rank;
  t_rank = rank;
  fake_dev = rank;
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(&f->id, 1, rank, 2, NULL, &bs) == ncclSuccess);
  if (bs == NULL) {
    f->bad = bad;
    return NULL;
  }
  transport_peer_t peers[2];
  for (int r = 0; r < 2; r++)
    peers[r] = (transport_peer_t){sys_host_hash(), sys_pid_hash(), fake_bus_id(r), r, getpid()};
  if (f->fault == F_NET) peers[1].host_hash ^= 0x100;
  int allow = f->fault == F_MAP ? 0 : f->fault == F_KIND ? rank == 0 : 1;
  transport_t* t = NULL;
  EXPECT(transport_create(bs, rank, 2, rank, peers, NULL, policy_allow, &allow, &t) ==
         ncclSuccess);
  kern_conn_t out[3];
  memset(out, 0xab, sizeof(out));
  transport_req_t reqs[3];
  int n = 2;
  /* The healthy pair: rank 0 sends id 0 and receives id 1; rank 1 the mirror. */
  reqs[0] = req_simple(peer, rank == 0, 0, 2048, &out[0]);
  reqs[1] = req_simple(peer, rank != 0, 1, 2048, &out[1]);
  if (f->fault == F_ID && rank == 1) reqs[1].id = 5;
  if (f->fault == F_COUNT && rank == 0) reqs[n++] = req_simple(peer, 1, 9, 2048, &out[2]);
  if (f->fault == F_SLOT && rank == 1) reqs[0].slot_bytes[KERN_PROTO_SIMPLE] = 4096;
  if (f->fault == F_SLOT_LL && rank == 1) reqs[1].slot_bytes[KERN_PROTO_LL] = 1024;
  if (f->fault == F_SLOT_LL128) reqs[0].slot_bytes[KERN_PROTO_LL128] = rank == 0 ? 1280 : 2560;
  if (f->fault == F_SAME_DIR) reqs[0].is_send = 1, reqs[1].is_send = 1, reqs[1].id = 0;
  if (f->fault == F_SAME_DIR) n = 1;
  if (f->fault == F_ALLOC && rank == 1) fake_fail_alloc = 1;
  if (f->fault == F_MAP && rank == 0) fake_fail_register = 2; /* its own, then rank 1's */
  err_clear_last();
  f->res = transport_connect(t, reqs, n, 3);
  sys_strlcpy(f->msg, err_last(), sizeof(f->msg));
  /* Nothing handed out, nothing kept. */
  unsigned char ab[sizeof(out)];
  memset(ab, 0xab, sizeof(ab));
  EXPECT(memcmp(out, ab, sizeof(out)) == 0);
  uint64_t dev = 1, host = 1;
  transport_mem_usage(t, &dev, &host);
  EXPECT(dev == 0 && host == 0);
  /* The bootstrap is still in step: a message with the same tag goes through. */
  int v = 40 + rank, w = -1;
  EXPECT(bootstrap_send(bs, peer, 3, &v, sizeof(v)) == ncclSuccess);
  EXPECT(bootstrap_recv(bs, peer, 3, &w, sizeof(w)) == ncclSuccess);
  EXPECT(w == 40 + peer);
  transport_destroy(t);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  f->bad = bad;
  return NULL;
}

static void run_fault(fault_t fault, ncclResult_t want0, const char* text0, ncclResult_t want1,
                      const char* text1) {
  transport_set_cuda_ops(&fake_ops);
  fault_job_t f[2];
  pthread_t th[2];
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  for (int r = 0; r < 2; r++) {
    memset(&f[r], 0, sizeof(f[r]));
    f[r].fault = fault;
    f[r].id = id;
    f[r].rank = r;
    pthread_create(&th[r], NULL, fault_rank, &f[r]);
  }
  for (int r = 0; r < 2; r++) {
    pthread_join(th[r], NULL);
    CHECK_EQ_INT(f[r].bad, 0);
  }
  CHECK_MSG(f[0].res == want0, "fault %d: rank 0 returned %d, expected %d", fault, f[0].res,
            want0);
  CHECK_MSG(f[1].res == want1, "fault %d: rank 1 returned %d, expected %d", fault, f[1].res,
            want1);
  CHECK_CONTAINS(f[0].msg, text0);
  CHECK_CONTAINS(f[1].msg, text1);
  CHECK_EQ_INT(fake_live(), 0);
  CHECK_EQ_INT(own_shm_names(), 0);
}

static void case_fault_id(void) {
  run_fault(F_ID, ncclInternalError, "do not mirror", ncclInternalError, "do not mirror");
}
static void case_fault_count(void) {
  run_fault(F_COUNT, ncclInternalError, "rank 0 connects 3 end(s) with rank 1",
            ncclInternalError, "rank 1 connects 2 end(s) with rank 0");
}
static void case_fault_slot(void) {
  run_fault(F_SLOT, ncclInternalError, "Simple slot_bytes 2048 on rank 0, 4096 on rank 1",
            ncclInternalError, "Simple slot_bytes 4096 on rank 1, 2048 on rank 0");
}
/* Both ends must agree on every protocol, a protocol made on one end only included. */
static void case_fault_slot_ll(void) {
  run_fault(F_SLOT_LL, ncclInternalError, "connection 1 between rank 0 and rank 1: LL slot_bytes 0 on rank 0, 1024 on rank 1",
            ncclInternalError, "LL slot_bytes 1024 on rank 1, 0 on rank 0");
}
static void case_fault_slot_ll128(void) {
  run_fault(F_SLOT_LL128, ncclInternalError, "LL128 slot_bytes 1280 on rank 0, 2560 on rank 1",
            ncclInternalError, "LL128 slot_bytes 2560 on rank 1, 1280 on rank 0");
}
static void case_fault_same_dir(void) {
  run_fault(F_SAME_DIR, ncclInternalError, "has no receive end with id 0", ncclInternalError,
            "has no receive end with id 0");
}
static void case_fault_kind(void) {
  run_fault(F_KIND, ncclInternalError, "rank 0 chose P2P for its connections with rank 1, but "
            "rank 1 chose SHM", ncclInternalError, "rank 1 chose SHM");
}
/* Another host and no net plugin to be had: both ranks say so. */
static void case_fault_net(void) {
  setenv("NCCL_NET_PLUGIN", "none", 1);
  setenv("CHOIR_PLUGIN_DIR", "/nonexistent", 1);
  run_fault(F_NET, ncclInvalidUsage, "no usable net plugin", ncclInvalidUsage,
            "no usable net plugin");
}
static void case_fault_alloc(void) {
  run_fault(F_ALLOC, ncclRemoteError, "rank 1 could not set up its side", ncclUnhandledCudaError,
            "fails as the test asked");
}
static void case_fault_map(void) {
  run_fault(F_MAP, ncclUnhandledCudaError, "host_register fails as the test asked",
            ncclRemoteError, "rank 0 failed to connect with rank 1");
}

/* A request the core should never make: refused before anything is sent. */
static void case_fault_requests(void) {
  transport_set_cuda_ops(&fake_ops);
  ncclUniqueId id;
  bootstrap_t* bs = NULL;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  CHECK_EQ_INT(bootstrap_init(&id, 1, 0, 1, NULL, &bs), ncclSuccess);
  transport_peer_t peers[2];
  for (int r = 0; r < 2; r++)
    peers[r] = (transport_peer_t){sys_host_hash(), sys_pid_hash(), fake_bus_id(r), r, getpid()};
  transport_t* t = NULL;
  /* A 2-rank transport over a 1-rank bootstrap: nothing here may reach the wire. */
  CHECK_EQ_INT(transport_create(bs, 0, 2, 0, peers, NULL, NULL, NULL, &t), ncclSuccess);
  kern_conn_t out[2];
  transport_req_t r[2] = {req_simple(1, 1, 0, 1024, &out[0]), req_simple(1, 1, 0, 1024, &out[1])};
  CHECK_EQ_INT(transport_connect(t, r, 2, 1), ncclInternalError);
  CHECK_CONTAINS(err_last(), "asks twice for the send end with id 0 for rank 1");
  transport_req_t bad[] = {req_simple(0, 1, 0, 1024, &out[0]),
                           req_simple(2, 1, 0, 1024, &out[0]),
                           req_simple(1, 2, 0, 1024, &out[0]),
                           req_simple(1, 1, 0, 1000, &out[0]),
                           req_simple(1, 1, 0, 1040, &out[0]), /* a multiple of 16, not 128 */
                           req_simple(1, 1, 0, 0, &out[0]),
                           req_make(1, 1, 0, 1024, 0, 0, &out[0]), /* LL without SIMPLE */
                           req_make(1, 1, 0, 1040, 0, 1024, &out[0]),
                           req_make(1, 1, 0, 0, 120, 1024, &out[0]),
                           req_simple(1, 1, 0, 1024, NULL)};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    CHECK_EQ_INT(transport_connect(t, &bad[i], 1, 1), ncclInternalError);
    CHECK_CONTAINS(err_last(), "is invalid");
  }
  CHECK_EQ_INT(transport_connect(t, NULL, 0, 1), ncclSuccess);
  CHECK_EQ_INT(fake_live(), 0);
  transport_destroy(t);
  CHECK_EQ_INT(bootstrap_close(bs), ncclSuccess);
}

/* NCCL_P2P_DISABLE=1 makes connections between GPUs with peer access go through shm. */
static void case_knob_connect_shm(void) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  transport_set_cuda_ops(&fake_ops);
  job_t j;
  job_make(&j, 2, 1, 1, 1);
  j.kind = KERN_TRANSPORT_SHM; /* the policy allows p2p: the knob alone makes it shm */
  run_rank_threads(&j, rank_run);
  CHECK_EQ_INT(fake_live(), 0);
}

/* Every transport off (the network within the host too): both ranks fail with the knobs named. */
static void case_knob_connect_none(void) {
  setenv("NCCL_P2P_DISABLE", "1", 1);
  setenv("NCCL_SHM_DISABLE", "1", 1);
  setenv("NCCL_NET_DISABLE_INTRA", "1", 1);
  run_fault(F_ID, ncclInvalidUsage, "NCCL_NET_DISABLE_INTRA=1", ncclInvalidUsage,
            "NCCL_P2P_DISABLE=1");
}

static double now_s(void);

/* ---- net: two ranks on "different hosts" through Choir's net-socket over loopback ---------- */

/* CHOIR_TEST_NET_GDR=1: the plugin is the GPUDirect shim and the topology lets every end use
 * GPU memory (meson's transport-net-gdr); otherwise every end must stage in host memory. */
static int net_expect_gdr(void) {
  const char* s = getenv("CHOIR_TEST_NET_GDR");
  return s != NULL && atoi(s) == 1;
}

#define NET_STEPS (3 * KERN_NSLOTS + 5)
#define NET_CHANNELS 3
#define NET_SLOT 4096u
/* The ring's slot at the default NCCL_BUFFSIZE (4 MiB over KERN_NSLOTS slots). */
#define NET_BIG_SLOT (512u * 1024u)
#define NET_LAUNCHES 64

/* Channels 0 and 1 have small slots: each step travels inline on net-socket's control socket
 * (up to CHOIR_SOCKET_INLINE, 16 KiB). Channel 2 has the ring's slot, so that its steps take
 * the data sockets, one or several pieces (net-socket cuts at 64 KiB), up to a full slot. */
static uint32_t net_slot(int c) { return c < 2 ? NET_SLOT : NET_BIG_SLOT; }

/* Bytes of step s on channel c: every size from 0 to a full slot shows up; on the big channel,
 * each step in turn: both sides of the inline limit, one piece, several pieces, a full slot. */
static uint32_t net_step_bytes(int c, uint64_t s) {
  const uint32_t slot = net_slot(c);
  if (slot == NET_BIG_SLOT) {
    static const uint32_t big[8] = {16385, 1, 16384, 65537, 131073, 262147, 0, NET_BIG_SLOT};
    return big[s % 8];
  }
  uint64_t v = (s * 977 + (uint64_t)c * 131) % (slot + 1);
  return s % 5 == 4 ? slot : (uint32_t)v;
}

/* Profiled runs (CHOIR_TEST_PROF=1): steps per announced op. */
#define NET_PROF_OP 7
static int net_profiled(void) {
  const char* s = getenv("CHOIR_TEST_PROF");
  return s != NULL && atoi(s) == 1;
}

/* How long a phase may wait for its steps: CHOIR_TEST_NET_WAIT_S seconds (default 30; the
 * planted-bug test, which expects a stall, shortens it). */
static double net_wait_s(void) {
  const char* s = getenv("CHOIR_TEST_NET_WAIT_S");
  return s != NULL && atof(s) > 0 ? atof(s) : 30.0;
}

/* Received steps that carried bytes, both ranks: with GPUDirect, each needs one flush. */
static uint64_t net_nonzero_recvs;

/* The kernel's side of one step: fill send slot s of channel c (from rank to its peer) with its
 * pattern, its size, then the tail. */
static void net_publish(kern_conn_t* sc, int rank, uint64_t s, int c) {
  char* slot = sc->buff[KERN_PROTO_SIMPLE] + (s % KERN_NSLOTS) * net_slot(c);
  const uint32_t bytes = net_step_bytes(c, s);
  for (uint32_t k = 0; k < bytes; k++) slot[k] = (char)pattern(rank, 1 - rank, (int)s, c, KERN_PROTO_SIMPLE, k);
  __atomic_store_n(&sc->sizes[s % KERN_NSLOTS], bytes, __ATOMIC_RELAXED);
  __atomic_store_n(sc->tail, s + 1, __ATOMIC_RELEASE);
}

/* And of the receive: check receive slot r of channel c (from the peer to rank), count it, then
 * hand the slot back (head). Returns the wrong bytes. */
static size_t net_consume(kern_conn_t* rc, int rank, uint64_t r, int c) {
  const char* slot = rc->buff[KERN_PROTO_SIMPLE] + (r % KERN_NSLOTS) * net_slot(c);
  const uint32_t bytes = net_step_bytes(c, r);
  size_t wrong = 0;
  for (uint32_t k = 0; k < bytes; k++)
    wrong += (unsigned char)slot[k] != pattern(1 - rank, rank, (int)r, c, KERN_PROTO_SIMPLE, k);
  if (bytes > 0) __atomic_fetch_add(&net_nonzero_recvs, 1, __ATOMIC_RELAXED);
  __atomic_store_n(rc->head, r + 1, __ATOMIC_RELEASE);
  return wrong;
}

/* The kernels' part, played by this thread, until every channel has sent and received `upto`
 * steps: fill send slots (data, size, tail) as head allows, drain receive slots as tail says,
 * count wrong bytes. False at the deadline. */
static int net_move(kern_conn_t* out, int rank, uint64_t* sent, uint64_t* got, uint64_t upto,
                    double deadline, size_t* wrong) {
  for (;;) {
    int done = 1;
    for (int c = 0; c < NET_CHANNELS; c++) {
      kern_conn_t* sc = &out[2 * c];
      kern_conn_t* rc = &out[2 * c + 1];
      uint64_t s = sent[c];
      if (s < upto && __atomic_load_n(sc->head, __ATOMIC_ACQUIRE) + KERN_NSLOTS >= s + 1) {
        net_publish(sc, rank, s, c);
        sent[c]++;
      }
      uint64_t r = got[c];
      if (r < upto && __atomic_load_n(rc->tail, __ATOMIC_ACQUIRE) >= r + 1) {
        *wrong += net_consume(rc, rank, r, c);
        got[c]++;
      }
      done &= sent[c] == upto && got[c] == upto;
    }
    if (done) return 1;
    if (now_s() > deadline) return 0;
  }
}

/* Steps rank 1 has received in the send-only launches (both ranks are threads of this process). */
static int net_delivered;

/* One rank: connections to the other rank, then net_move in one launch, the proxy idle after it,
 * and many short launches; the proxy thread moves the slots through the plugin in between. */
/* What both net cases start with: rank's bootstrap (NULL on failure), the two ranks' peer
 * entries on "hosts" of their own (so that they connect through the network), and a transport
 * with the net plugin, whose kernel abort flag is *kabort. Returns the failed expectations. */
static int net_setup(int rank, const job_t* j, uint64_t comm_id, uint32_t* kabort,
                     bootstrap_t** bs_p, transport_t** t_p) {
  int bad = 0;
  t_rank = rank;
  fake_dev = rank;
  *bs_p = NULL;
  *t_p = NULL;
  EXPECT(bootstrap_init(&j->id, 1, rank, 2, NULL, bs_p) == ncclSuccess);
  if (*bs_p == NULL) return bad;
  transport_peer_t peers[2];
  peers[rank] = (transport_peer_t){sys_host_hash() ^ (uint64_t)(rank + 1), sys_pid_hash(),
                                   fake_bus_id(rank), rank, getpid()};
  EXPECT(bootstrap_allgather(*bs_p, peers, sizeof(peers[0])) == ncclSuccess);
  EXPECT(transport_create(*bs_p, rank, 2, rank, peers, NULL, NULL, NULL, t_p) == ncclSuccess);
  EXPECT(transport_set_net(*t_p, NULL, comm_id, -1, kabort) == ncclSuccess);
  return bad;
}

static int net_rank(int rank, const job_t* j) {
  bootstrap_t* bs = NULL;
  transport_t* t = NULL;
  uint32_t kabort = 0;
  int bad = net_setup(rank, j, 0xc401, &kabort, &bs, &t);
  if (bs == NULL) return bad;
  EXPECT(transport_kind(t, 1 - rank) == KERN_TRANSPORT_NET);
  /* Profiled: the profiler before the first connection (the proxy takes it when made). */
  prof_t* prof = NULL;
  if (net_profiled()) {
    prof_create(0xc401, NULL, 2, 2, rank, &prof);
    EXPECT(prof != NULL);
    transport_prof_attach(t, prof);
  }
  transport_req_t reqs[2 * NET_CHANNELS];
  kern_conn_t out[2 * NET_CHANNELS];
  /* Channel 0 SIMPLE only, channel 1 every protocol (LL asked smaller: it shares SIMPLE's
   * slots all the same), channel 2 (the big one) SIMPLE and LL. */
  for (int c = 0; c < NET_CHANNELS; c++) {
    const uint32_t ll = c == 0 ? 0 : 1024, ll128 = c == 1 ? 2048 : 0;
    reqs[2 * c] = req_make(1 - rank, 1, c, ll, ll128, net_slot(c), &out[2 * c]);
    reqs[2 * c + 1] = req_make(1 - rank, 0, c, ll, ll128, net_slot(c), &out[2 * c + 1]);
  }
  ncclResult_t res = transport_connect(t, reqs, 2 * NET_CHANNELS, 1);
  EXPECT(res == ncclSuccess);
  if (res != ncclSuccess) goto out;
  uint64_t want_host = 0;
  for (int i = 0; i < 2 * NET_CHANNELS; i++) {
    EXPECT(out[i].connected == 1 && out[i].transport == KERN_TRANSPORT_NET);
    EXPECT(reqs[i].is_send ? out[i].sizes != NULL : out[i].sizes == NULL);
    /* LL and LL128 in the SIMPLE buffer, with tail_sync. */
    bad += prove_buffers(&reqs[i], KERN_TRANSPORT_NET);
    const uint64_t lines = ((uint64_t)KERN_NSLOTS * reqs[i].slot_bytes[KERN_PROTO_SIMPLE] +
                            TRANSPORT_LINE - 1) / TRANSPORT_LINE * TRANSPORT_LINE +
                           3 * TRANSPORT_LINE;
    want_host += (lines + TRANSPORT_BUFF_ALIGN - 1) / TRANSPORT_BUFF_ALIGN * TRANSPORT_BUFF_ALIGN;
  }
  /* The protocols cost no memory of their own: one block per end, as with SIMPLE alone. */
  if (!net_expect_gdr()) {
    uint64_t dev = 1, host = 0;
    transport_mem_usage(t, &dev, &host);
    EXPECT_MSG(dev == 0 && host == want_host, "net: %llu device and %llu host bytes, expected 0 "
               "and %llu", (unsigned long long)dev, (unsigned long long)host,
               (unsigned long long)want_host);
  }
  EXPECT(t->proxy != NULL);
  /* Profiled (CHOIR_TEST_PROF=1, a mock profiler as NCCL_PROFILER_PLUGIN): the first launch's
   * NET_STEPS steps of every end announced in ops of NET_PROF_OP steps (the last one shorter),
   * for the proxy's ProxyOp and ProxyStep events; the later launches announce nothing. */
  if (prof != NULL)
    for (int i = 0; i < 2 * NET_CHANNELS; i++)
      for (int s0 = 0; s0 < NET_STEPS; s0 += NET_PROF_OP)
        transport_prof_op(t, &out[i], NULL,
                          NET_STEPS - s0 < NET_PROF_OP ? NET_STEPS - s0 : NET_PROF_OP,
                          (int)net_slot(i / 2), i / 2);
  proxy_launch_begin(t->proxy);
  uint64_t sent[NET_CHANNELS] = {0}, got[NET_CHANNELS] = {0};
  size_t wrong = 0;
  net_move(out, rank, sent, got, NET_STEPS, now_s() + net_wait_s(), &wrong);
  proxy_launch_end(t->proxy);
  for (int c = 0; c < NET_CHANNELS; c++)
    EXPECT_MSG(sent[c] == NET_STEPS && got[c] == NET_STEPS,
               "channel %d: %llu steps sent, %llu received of %d", c,
               (unsigned long long)sent[c], (unsigned long long)got[c], NET_STEPS);
  EXPECT(wrong == 0);
  EXPECT(transport_async_error(t, NULL, 0, NULL) == ncclSuccess && kabort == 0);
  /* The proxy sleeps once the launch is over and every send is out. */
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  {
    uint64_t s0 = proxy_sweeps(t->proxy);
    struct timespec ms = {0, 50 * 1000 * 1000};
    nanosleep(&ms, NULL);
    uint64_t s1 = proxy_sweeps(t->proxy);
    nanosleep(&ms, NULL);
    EXPECT_MSG(proxy_sweeps(t->proxy) - s1 <= 1, "proxy idle but sweeping: %llu then %llu sweeps",
               (unsigned long long)(s1 - s0), (unsigned long long)(proxy_sweeps(t->proxy) - s1));
  }
  /* A launch whose kernel never started (an error between the mark and the launch): abandoning
   * it drops the active count at once, or the proxy would sweep forever for a kernel that is
   * not there (what enqueue's error paths call). */
  EXPECT(proxy_active(t->proxy) == 0);
  EXPECT(transport_launch_begin(t, NULL, 0) == ncclSuccess);
  EXPECT(proxy_active(t->proxy) == 1);
  transport_launch_abandon(t, NULL, 0);
  EXPECT(proxy_active(t->proxy) == 0);
  /* Many short launches of one step each, some after a pause long enough for the proxy to fall
   * asleep: a launch mark that failed to wake it would leave its step undelivered. */
  {
    int launches = 0;
    for (; launches < NET_LAUNCHES; launches++) {
      if (launches % 8 == 0) {
        struct timespec pause = {0, 3 * 1000 * 1000};
        nanosleep(&pause, NULL);
      }
      proxy_launch_begin(t->proxy);
      const double wait = net_wait_s() < 10 ? net_wait_s() : 10;
      int ok = net_move(out, rank, sent, got, NET_STEPS + launches + 1, now_s() + wait, &wrong);
      proxy_launch_end(t->proxy);
      if (!ok) break;
    }
    EXPECT_MSG(launches == NET_LAUNCHES, "launch %d of %d: its steps did not arrive in time",
               launches + 1, NET_LAUNCHES);
    EXPECT(wrong == 0);
  }
  /* Send-only launches: rank 0 publishes one step and ends at once, then waits outside any
   * launch until rank 1 (in one long launch) has it. A proxy that read the tail before the
   * launch's end and the active count after it would sleep on the step, and rank 1 would wait. */
  {
    EXPECT(bootstrap_barrier(bs) == ncclSuccess);
    kern_conn_t* sc = &out[0];
    kern_conn_t* rc = &out[1];
    const uint64_t first = NET_STEPS + NET_LAUNCHES;
    int k = 0;
    if (rank == 0) {
      for (; k < NET_LAUNCHES; k++) {
        const uint64_t s = first + (uint64_t)k;
        const double deadline = now_s() + 2;
        while (__atomic_load_n(sc->head, __ATOMIC_ACQUIRE) + KERN_NSLOTS < s + 1 &&
               now_s() < deadline) {
        }
        proxy_launch_begin(t->proxy);
        /* Publish while the proxy sweeps (not while it wakes): that is when the race can bite. */
        const uint64_t swept = proxy_sweeps(t->proxy);
        while (proxy_sweeps(t->proxy) < swept + 3 && now_s() < deadline) {
        }
        net_publish(sc, 0, s, 0);
        proxy_launch_end(t->proxy);
        while (__atomic_load_n(&net_delivered, __ATOMIC_ACQUIRE) < k + 1 && now_s() < deadline) {
        }
        if (__atomic_load_n(&net_delivered, __ATOMIC_ACQUIRE) < k + 1) break;
      }
      EXPECT_MSG(k == NET_LAUNCHES, "send-only launch %d of %d: rank 1 did not get its step in 2 s",
                 k + 1, NET_LAUNCHES);
    } else {
      proxy_launch_begin(t->proxy);
      const double deadline = now_s() + 30;
      for (; k < NET_LAUNCHES && now_s() < deadline;) {
        const uint64_t r = first + (uint64_t)k;
        if (__atomic_load_n(rc->tail, __ATOMIC_ACQUIRE) < r + 1) continue;
        wrong += net_consume(rc, 1, r, 0);
        __atomic_store_n(&net_delivered, ++k, __ATOMIC_RELEASE);
      }
      proxy_launch_end(t->proxy);
      EXPECT_MSG(k == NET_LAUNCHES, "rank 1 got %d of %d send-only steps", k, NET_LAUNCHES);
    }
    EXPECT(wrong == 0);
  }
  uint64_t dev = 1, host = 0;
  transport_mem_usage(t, &dev, &host);
  uint64_t slots = 0;
  for (int c = 0; c < NET_CHANNELS; c++) slots += 2ull * KERN_NSLOTS * net_slot(c);
  if (net_expect_gdr()) /* the slots in (fake) GPU memory, only the counters in host memory */
    EXPECT_MSG(dev == slots && host < slots, "GPUDirect: %llu device bytes, %llu host bytes",
               (unsigned long long)dev, (unsigned long long)host);
  else
    EXPECT(dev == 0 && host >= slots);
out:
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  transport_destroy(t);
  prof_destroy(prof); /* after the proxy: its last events are in */
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

/* The mock profiler's log of a profiled net_loop (mock_profiler.c's format), per rank: every
 * announced op became one ProxyOp event (channel, peer, steps, direction as announced), ended
 * once, with exactly its steps as ProxyStep children, each ended once; every end's ops together
 * cover NET_STEPS steps; net-socket's own socket event under every ProxyStep. */
static void net_prof_check(const char* log) {
  FILE* f = fopen(log, "r");
  CHECK_TRUE(f != NULL);
  if (f == NULL) return;
  enum { MAXE = 16384 };
  static long id[MAXE], parent[MAXE];
  static int type[MAXE], rank_of[MAXE], stops[MAXE], a[MAXE], b[MAXE], nsteps[MAXE], dir[MAXE];
  static unsigned states[MAXE]; /* bit s: state s recorded */
  int n = 0, bad_stop = 0;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    long i, p;
    int ty, rk, k = 0;
    if (sscanf(line, "S %ld %d %ld %d %n", &i, &ty, &p, &rk, &k) == 4 && n < MAXE) {
      id[n] = i;
      type[n] = ty;
      parent[n] = p;
      rank_of[n] = rk;
      stops[n] = 0;
      a[n] = b[n] = nsteps[n] = dir[n] = -1;
      states[n] = 0;
      if (ty == 8) sscanf(line + k, "%d %d %d %d", &a[n], &b[n], &nsteps[n], &dir[n]);
      if (ty == 128) sscanf(line + k, "%x", (unsigned*)&a[n]); /* NetPlugin: its id */
      n++;
    } else if (sscanf(line, "R %ld %d", &i, &ty) == 2) {
      for (int e = n - 1; e >= 0; e--)
        if (id[e] == i) {
          if (ty >= 0 && ty < 32) states[e] |= 1u << ty;
          break;
        }
    } else if (sscanf(line, "E %ld", &i) == 1) {
      int found = 0;
      for (int e = n - 1; e >= 0 && !found; e--)
        if (id[e] == i) stops[e]++, found = 1;
      bad_stop += !found;
    }
  }
  fclose(f);
  CHECK_EQ_INT(bad_stop, 0);
  for (int r = 0; r < 2; r++) {
    int ops = 0, steps_in_ops = 0;
    int per_end[2 * NET_CHANNELS] = {0};
    for (int e = 0; e < n; e++) {
      if (rank_of[e] != r) continue;
      CHECK_MSG(stops[e] == 1, "rank %d: event %ld (type 0x%x) ended %d times", r, id[e], type[e],
                stops[e]);
      if (type[e] != 8) continue; /* ncclProfileProxyOp */
      ops++;
      int children = 0;
      for (int s = 0; s < n; s++) children += type[s] == 16 && parent[s] == id[e];
      CHECK_MSG(children == nsteps[e], "rank %d: ProxyOp %ld of %d steps has %d ProxySteps", r,
                id[e], nsteps[e], children);
      CHECK_MSG(a[e] >= 0 && a[e] < NET_CHANNELS && b[e] == 1 - r && (dir[e] == 0 || dir[e] == 1),
                "rank %d: ProxyOp %ld: channel %d peer %d isSend %d", r, id[e], a[e], b[e], dir[e]);
      if (a[e] >= 0 && a[e] < NET_CHANNELS && (dir[e] == 0 || dir[e] == 1))
        per_end[2 * a[e] + (1 - dir[e])] += nsteps[e];
      steps_in_ops += children;
    }
    /* net-socket reports one socket event per request: one under every ProxyStep. */
    int steps = 0, netev = 0;
    for (int e = 0; e < n; e++) {
      if (rank_of[e] != r) continue;
      steps += type[e] == 16;
      if (type[e] != 128) continue;
      netev++;
      int ptype = 0;
      for (int q = 0; q < n; q++)
        if (id[q] == parent[e]) ptype = type[q];
      CHECK_MSG(ptype == 16 && a[e] == (int)(NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER),
                "rank %d: NetPlugin event %ld: id 0x%x, parent of type 0x%x", r, id[e], a[e], ptype);
    }
    /* NetPlugin events exist from v3 on (CHOIR_TEST_PROF_V: the mock's version). */
    const char* pv = getenv("CHOIR_TEST_PROF_V");
    const int with_net = pv == NULL || atoi(pv) >= 3;
    CHECK_MSG(steps > 0 && netev == (with_net ? steps : 0),
              "rank %d: %d NetPlugin events for %d ProxySteps (profiler v%s)", r, netev, steps,
              pv ? pv : "6");
    /* The proxy thread's ProxyCtrl: one, moving data and sleeping between the test's phases. */
    int ctrls = 0;
    unsigned ctrl_states = 0;
    for (int e = 0; e < n; e++)
      if (rank_of[e] == r && type[e] == 32) ctrls++, ctrl_states |= states[e];
    const unsigned want_ctrl = 1u << ncclProfilerProxyCtrlActive | 1u << ncclProfilerProxyCtrlSleep |
                               1u << ncclProfilerProxyCtrlWakeup;
    CHECK_MSG(ctrls == 1 && (ctrl_states & want_ctrl) == want_ctrl,
              "rank %d: %d ProxyCtrl events, states 0x%x (Active, Sleep, Wakeup expected)", r,
              ctrls, ctrl_states);
    const int ops_per_end = (NET_STEPS + NET_PROF_OP - 1) / NET_PROF_OP;
    CHECK_MSG(ops == 2 * NET_CHANNELS * ops_per_end, "rank %d: %d ProxyOp events, expected %d", r,
              ops, 2 * NET_CHANNELS * ops_per_end);
    CHECK_EQ_INT(steps_in_ops, 2 * NET_CHANNELS * NET_STEPS);
    for (int i = 0; i < 2 * NET_CHANNELS; i++)
      CHECK_MSG(per_end[i] == NET_STEPS, "rank %d end %d: ops cover %d steps, not %d", r, i,
                per_end[i], NET_STEPS);
  }
  printf("net: profiled: %d events in the mock's log\n", n);
}

static void case_net_loop(void) {
  transport_set_cuda_ops(&fake_ops);
  char prof_log[128];
  snprintf(prof_log, sizeof(prof_log), "/tmp/choir-test-net-prof-%d.log", (int)getpid());
  if (net_profiled()) {
    unlink(prof_log);
    setenv("MOCK_PROF_LOG", prof_log, 1);
  }
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    /* Without Choir's net-socket there is nothing to connect through. */
    printf("net: set CHOIR_PLUGIN_DIR to the folder of libnccl-net-socket.so (meson does)\n");
    exit(77);
  }
  /* Through the GPUDirect shim, hold it loaded past the transports, for its counters. */
  const char* plugin = getenv("NCCL_NET_PLUGIN");
  const int through_shim = plugin != NULL && strstr(plugin, "gdrshim") != NULL;
  void* shim = through_shim ? dlopen(plugin, RTLD_NOW | RTLD_LOCAL) : NULL;
  CHECK_TRUE(!through_shim || shim != NULL);
  job_t j;
  job_make(&j, 2, 0, 0, 0);
  run_rank_threads(&j, net_rank);
  CHECK_EQ_INT(fake_live(), 0);
  if (net_profiled()) {
    net_prof_check(prof_log);
    unlink(prof_log);
  }
  /* Through the GPUDirect shim (test/plugin/net_gdr_shim.c), its counters show what the
   * transport asked of it: with GPUDirect every end registered as CUDA memory and one flush per
   * receive that carried bytes; without (the path beyond NCCL_NET_GDR_LEVEL) neither. */
  if (!through_shim) {
    CHECK_TRUE(!net_expect_gdr()); /* GPUDirect is tested through the shim only */
    return;
  }
  if (shim == NULL) return;
  void (*stats)(uint64_t*) = (void (*)(uint64_t*))dlsym(shim, "choir_gdrshim_stats");
  CHECK_TRUE(stats != NULL);
  if (stats != NULL) {
    uint64_t st[GDRSHIM_NSTATS];
    stats(st);
    const int gdr = net_expect_gdr();
    CHECK_EQ_INT(st[GDRSHIM_CUDA_REGS], gdr ? 2 * 2 * NET_CHANNELS : 0);
    CHECK_EQ_INT(st[GDRSHIM_FLUSHES], gdr ? __atomic_load_n(&net_nonzero_recvs, __ATOMIC_RELAXED) : 0);
    CHECK_TRUE(!gdr || net_nonzero_recvs > 0);
  }
  dlclose(shim);
}

/* A peer that dies while a launch moves data through the proxy: rank 1 is killed once both are
 * connected (before it could say anything); rank 0's proxy sees its connections fail, raises the
 * kernels' abort flag and reports the error within seconds, and the transport then tears down
 * within 5 s: no hang anywhere. */
static int net_death_rank(int rank, const job_t* j) {
  bootstrap_t* bs = NULL;
  transport_t* t = NULL;
  uint32_t kabort = 0;
  int bad = net_setup(rank, j, 0xc402, &kabort, &bs, &t);
  if (bs == NULL) return bad;
  transport_req_t reqs[2];
  kern_conn_t out[2];
  reqs[0] = req_make(1 - rank, 1, 0, 0, 0, NET_SLOT, &out[0]);
  reqs[1] = req_make(1 - rank, 0, 0, 0, 0, NET_SLOT, &out[1]);
  ncclResult_t res = transport_connect(t, reqs, 2, 1);
  EXPECT(res == ncclSuccess);
  if (res == ncclSuccess) {
    EXPECT(bootstrap_barrier(bs) == ncclSuccess);
    /* The kernels' part on both ranks: steps both ways (contents unchecked), as long as the
     * abort flag is down; rank 1 is killed in the middle, after 200 steps each way. */
    proxy_launch_begin(t->proxy);
    const double t0 = now_s();
    uint64_t sent = 0, got = 0, kill_at = rank == 1 ? 200 : UINT64_MAX;
    while (__atomic_load_n(&kabort, __ATOMIC_ACQUIRE) == 0 && now_s() - t0 < 10) {
      if (sent >= kill_at && got >= kill_at) {
        fflush(NULL);
        raise(SIGKILL);
      }
      if (sent < __atomic_load_n(out[0].head, __ATOMIC_ACQUIRE) + KERN_NSLOTS) {
        char* slot = out[0].buff[KERN_PROTO_SIMPLE] + (sent % KERN_NSLOTS) * NET_SLOT;
        memset(slot, 0x5a, NET_SLOT);
        __atomic_store_n(&out[0].sizes[sent % KERN_NSLOTS], NET_SLOT, __ATOMIC_RELAXED);
        __atomic_store_n(out[0].tail, ++sent, __ATOMIC_RELEASE);
      }
      if (got < __atomic_load_n(out[1].tail, __ATOMIC_ACQUIRE))
        __atomic_store_n(out[1].head, ++got, __ATOMIC_RELEASE);
    }
    const double el = now_s() - t0;
    char why[512];
    int why_peer = -2;
    const ncclResult_t async = transport_async_error(t, why, sizeof(why), &why_peer);
    printf("[rank %d] peer killed: abort flag after %.0f ms (%llu steps out, %llu in), error %d\n",
           rank, el * 1e3, (unsigned long long)sent, (unsigned long long)got, (int)async);
    EXPECT_MSG(kabort != 0 && el < 3.0, "the abort flag is %u after %.1f s", kabort, el);
    /* It died mid-stream: it had taken 200 of this rank's steps (its own may still have been
     * in its proxy's hands). */
    EXPECT(sent >= 200);
    EXPECT(async == ncclRemoteError || async == ncclSystemError);
    /* What failed names the connection and the rank on its other end. */
    EXPECT_MSG(why_peer == 1 && strstr(why, "with rank 1") != NULL, "peer %d: '%s'", why_peer,
               why);
    proxy_launch_end(t->proxy);
  }
  const double td = now_s();
  transport_destroy(t);
  EXPECT(now_s() - td < 5.0);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

static void case_net_death(void) {
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    printf("net: set CHOIR_PLUGIN_DIR to the folder of libnccl-net-socket.so (meson does)\n");
    exit(77);
  }
  job_t j;
  job_make(&j, 2, 0, 0, 0);
  j.body = 1;
  j.killed = 1;
  CHECK_EQ_INT(run_procs(&j), 0);
}

/* A slot larger than the plugin's largest message (net-socket: 2 GiB - 4 KiB): both ranks refuse
 * the connection with the knobs and the limit named, before any buffer is allocated. */
static int net_oversize_rank(int rank, const job_t* j) {
  bootstrap_t* bs = NULL;
  transport_t* t = NULL;
  uint32_t kabort = 0;
  int bad = net_setup(rank, j, 0xc403, &kabort, &bs, &t);
  if (bs == NULL) return bad;
  transport_req_t reqs[2];
  kern_conn_t out[2];
  const uint32_t slot = 0x80000000u; /* 2 GiB */
  reqs[0] = req_make(1 - rank, 1, 0, 0, 0, slot, &out[0]);
  reqs[1] = req_make(1 - rank, 0, 0, 0, 0, slot, &out[1]);
  EXPECT(transport_connect(t, reqs, 2, 1) == ncclInvalidUsage);
  const char* why = err_last();
  EXPECT_MSG(why != NULL && strstr(why, "maxP2pBytes 2147479552") != NULL &&
                 strstr(why, "NCCL_BUFFSIZE") != NULL,
             "the error: '%s'", why ? why : "(none)");
  EXPECT(fake_live() == 0);
  transport_destroy(t);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

static void case_net_oversize(void) {
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    printf("net: set CHOIR_PLUGIN_DIR to the folder of libnccl-net-socket.so (meson does)\n");
    exit(77);
  }
  job_t j;
  job_make(&j, 2, 0, 0, 0);
  j.body = 2;
  CHECK_EQ_INT(run_procs(&j), 0);
}

/* ---- net: many ranks, tiny steps, the proxies falling asleep between launches ---------------- */

/* A gather's shape through the network, as coll_check's 8 ranks over net run it: every rank but
 * the root sends one small step to the root per launch, the root takes one from each, and a ring
 * of steps between neighbours runs beside it; launches are short, some after a pause long
 * enough for every proxy to sleep. 8 ranks are threads of this process, each on a "host" of its
 * own (so that all of them connect through net-socket), each with its own proxy. */
#define GS_RANKS 8
#define GS_LAUNCHES 1500
#define GS_SLOT 4096u

static uint32_t gs_bytes(int src, uint64_t s) { return (uint32_t)((s * 7 + (uint64_t)src) % 65); }

static void gs_publish(kern_conn_t* sc, int src, int dst, int id, uint64_t s) {
  char* slot = sc->buff[KERN_PROTO_SIMPLE] + (s % KERN_NSLOTS) * GS_SLOT;
  const uint32_t bytes = gs_bytes(src, s);
  for (uint32_t k = 0; k < bytes; k++)
    slot[k] = (char)pattern(src, dst, (int)s, id, KERN_PROTO_SIMPLE, k);
  __atomic_store_n(&sc->sizes[s % KERN_NSLOTS], bytes, __ATOMIC_RELAXED);
  __atomic_store_n(sc->tail, s + 1, __ATOMIC_RELEASE);
}

static size_t gs_consume(kern_conn_t* rc, int src, int dst, int id, uint64_t s) {
  const char* slot = rc->buff[KERN_PROTO_SIMPLE] + (s % KERN_NSLOTS) * GS_SLOT;
  size_t wrong = 0;
  for (uint32_t k = 0; k < gs_bytes(src, s); k++)
    wrong += (unsigned char)slot[k] != pattern(src, dst, (int)s, id, KERN_PROTO_SIMPLE, k);
  __atomic_store_n(rc->head, s + 1, __ATOMIC_RELEASE);
  return wrong;
}

/* Waits until *p reaches v (or the deadline): false at the deadline. */
static int gs_wait(const uint64_t* p, uint64_t v, double deadline) {
  while (__atomic_load_n(p, __ATOMIC_ACQUIRE) < v) {
    if (now_s() > deadline) return 0;
    sched_yield();
  }
  return 1;
}

static int net_gather_rank(int rank, const job_t* j) {
  const int n = j->nranks, root = 0, next = (rank + 1) % n, prev = (rank + n - 1) % n;
  int bad = 0;
  t_rank = rank;
  fake_dev = rank;
  bootstrap_t* bs = NULL;
  transport_t* t = NULL;
  uint32_t kabort = 0;
  EXPECT(bootstrap_init(&j->id, 1, rank, n, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad;
  transport_peer_t peers[GS_RANKS];
  peers[rank] = (transport_peer_t){sys_host_hash() ^ (uint64_t)(rank + 1), sys_pid_hash(),
                                   fake_bus_id(rank), rank, getpid()};
  EXPECT(bootstrap_allgather(bs, peers, sizeof(peers[0])) == ncclSuccess);
  EXPECT(transport_create(bs, rank, n, rank, peers, NULL, NULL, NULL, &t) == ncclSuccess);
  if (t == NULL) {
    EXPECT(bootstrap_close(bs) == ncclSuccess);
    return bad + 1;
  }
  EXPECT(transport_set_net(t, NULL, 0xc402, -1, &kabort) == ncclSuccess);
  /* Ends: [0] send to next and [1] receive from prev (id 0, the ring); then (id 1) a send to the
   * root, or at the root a receive from every other rank at [2 + src]. */
  transport_req_t reqs[2 + GS_RANKS];
  kern_conn_t out[2 + GS_RANKS];
  memset(out, 0, sizeof(out));
  int nreq = 0;
  reqs[nreq++] = req_simple(next, 1, 0, GS_SLOT, &out[0]);
  reqs[nreq++] = req_simple(prev, 0, 0, GS_SLOT, &out[1]);
  if (rank != root)
    reqs[nreq++] = req_simple(root, 1, 1, GS_SLOT, &out[2]);
  else
    for (int src = 1; src < n; src++) reqs[nreq++] = req_simple(src, 0, 1, GS_SLOT, &out[2 + src]);
  ncclResult_t res = transport_connect(t, reqs, nreq, 1);
  EXPECT(res == ncclSuccess);
  size_t wrong = 0;
  int launches = 0;
  if (res == ncclSuccess) {
    unsigned seed = 0x9e37u + (unsigned)rank;
    for (; launches < GS_LAUNCHES; launches++) {
      const uint64_t s = (uint64_t)launches;
      /* Every 50th launch, a pause of 2-4 ms: the proxies go to sleep and must wake. */
      if (launches % 50 == 49) {
        struct timespec pause = {0, (long)(2 + rand_r(&seed) % 3) * 1000 * 1000};
        nanosleep(&pause, NULL);
      }
      const double deadline = now_s() + 10;
      proxy_launch_begin(t->proxy);
      int ok = gs_wait(out[0].head, s + 1 > KERN_NSLOTS ? s + 1 - KERN_NSLOTS : 0, deadline);
      if (ok) gs_publish(&out[0], rank, next, 0, s);
      if (ok && rank != root) {
        ok = gs_wait(out[2].head, s + 1 > KERN_NSLOTS ? s + 1 - KERN_NSLOTS : 0, deadline);
        if (ok) gs_publish(&out[2], rank, root, 1, s);
      }
      if (ok && rank == root)
        for (int src = 1; src < n && ok; src++) {
          ok = gs_wait(out[2 + src].tail, s + 1, deadline);
          if (ok) wrong += gs_consume(&out[2 + src], src, root, 1, s);
        }
      if (ok) ok = gs_wait(out[1].tail, s + 1, deadline);
      if (ok) wrong += gs_consume(&out[1], prev, rank, 0, s);
      proxy_launch_end(t->proxy);
      if (!ok) {
        fprintf(stderr, "rank %d: launch %d: a step did not arrive within 10 s (ring send head "
                "%llu, ring receive tail %llu)\n", rank, launches,
                (unsigned long long)__atomic_load_n(out[0].head, __ATOMIC_ACQUIRE),
                (unsigned long long)__atomic_load_n(out[1].tail, __ATOMIC_ACQUIRE));
        break;
      }
    }
  }
  EXPECT_MSG(launches == GS_LAUNCHES, "rank %d: %d of %d launches", rank, launches, GS_LAUNCHES);
  EXPECT(wrong == 0);
  EXPECT(transport_async_error(t, NULL, 0, NULL) == ncclSuccess && kabort == 0);
  /* Every send out before anyone tears down. */
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  transport_destroy(t);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

static void case_net_gather(void) {
  transport_set_cuda_ops(&fake_ops);
  if (getenv("CHOIR_PLUGIN_DIR") == NULL) {
    printf("net: set CHOIR_PLUGIN_DIR to the folder of libnccl-net-socket.so (meson does)\n");
    exit(77);
  }
  job_t j;
  job_make(&j, GS_RANKS, 0, 0, 0);
  const double t0 = now_s();
  run_rank_threads(&j, net_gather_rank);
  CHECK_EQ_INT(fake_live(), 0);
  printf("net: gather-8: %d launches of %d ranks in %.2f s\n", GS_LAUNCHES, GS_RANKS,
         now_s() - t0);
}

/* ---- NIC placement -------------------------------------------------------------------------- */

/* transport_net_nearest on a topology file: each GPU gets the NIC ports in its own switch, in
 * device order, whatever order the plugin lists them in. */
static void case_place_nearest(void) {
  /* test/data/topo/two-nic-switches.xml: GPU 0 shares a switch with both ports of NIC mlx5_0/2,
   * GPU 1 with mlx5_1. */
  const char* topo = getenv("CHOIR_TEST_TOPO_FILE");
  CHECK_TRUE(topo != NULL);
  if (topo == NULL) return;
  setenv("NCCL_TOPO_FILE", topo, 1);
  const topo_nic_props_t nics[3] = {
      {.name = "mlx5_0", .guid = 0x12, .speed_mbps = 200000, .port = 2, .gdr = 1},
      {.name = "mlx5_1", .guid = 0x34, .speed_mbps = 200000, .port = 1, .gdr = 1},
      {.name = "mlx5_2", .guid = 0x12, .speed_mbps = 200000, .port = 1, .gdr = 1}};
  const topo_rank_info_t gpu0 = {.rank = 0, .cuda_dev = 0, .bus_id = topo_busid_parse("0000:11:00.0")};
  const topo_rank_info_t gpu1 = {.rank = 1, .cuda_dev = 1, .bus_id = topo_busid_parse("0000:21:00.0")};
  int devs[8], n = -1, type = -1;
  uint8_t gdr[3][2];
  memset(gdr, 0xff, sizeof(gdr));
  CHECK_EQ_INT(transport_net_nearest(&gpu0, nics, 3, devs, 8, &n, &type, gdr), ncclSuccess);
  CHECK_EQ_INT(n, 2);
  if (n == 2) {
    CHECK_EQ_INT(devs[0], 0);
    CHECK_EQ_INT(devs[1], 2);
  }
  CHECK_EQ_INT(type, TOPO_PATH_PIX);
  /* GPUDirect RDMA: both ways with the NIC in GPU 0's switch (PIX, within the default PXB; sm90
   * reads by default); not with the other switch's NIC (through the CPU: PHB). */
  for (int d = 0; d < 3; d++)
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(gdr[d][k], d == 1 ? 0 : 1);
  CHECK_EQ_INT(transport_net_nearest(&gpu1, nics, 3, devs, 8, &n, &type, NULL), ncclSuccess);
  CHECK_EQ_INT(n, 1);
  CHECK_EQ_INT(devs[0], 1);
  /* A plugin without CUDA pointers: no GPUDirect, whatever the path. */
  topo_nic_props_t host_only[3];
  memcpy(host_only, nics, sizeof(host_only));
  for (int d = 0; d < 3; d++) host_only[d].gdr = 0;
  CHECK_EQ_INT(transport_net_nearest(&gpu0, host_only, 3, devs, 8, &n, &type, gdr), ncclSuccess);
  for (int d = 0; d < 3; d++)
    for (int k = 0; k < 2; k++) CHECK_EQ_INT(gdr[d][k], 0);
}

/* ---- main ----------------------------------------------------------------------------------- */

typedef struct {
  const char* name;
  void (*fn)(void);
} case_t;

static const struct {
  const char* group;
  case_t cases[12];
} groups[] = {
    {"rules", {{"rule", case_rule}, {"kind", case_kind}}},
    {"wire",
     {{"layout", case_layout},
      {"layout-protos", case_layout_protos},
      {"wire", case_wire},
      {"wire-shm-ll128", case_wire_shm_ll128}}},
    {"shm", {{"segments", case_shm_segments}}},
    {"threads",
     {{"p2p-2", case_threads_p2p_2},
      {"p2p-4", case_threads_p2p_4},
      {"shm-2", case_threads_shm_2},
      {"shm-4", case_threads_shm_4}}},
    {"procs",
     {{"p2p-2", case_procs_p2p_2},
      {"p2p-3", case_procs_p2p_3},
      {"shm-2", case_procs_shm_2},
      {"shm-3", case_procs_shm_3}}},
    {"faults",
     {{"id", case_fault_id},
      {"count", case_fault_count},
      {"slot", case_fault_slot},
      {"slot-ll", case_fault_slot_ll},
      {"slot-ll128", case_fault_slot_ll128},
      {"same-dir", case_fault_same_dir},
      {"kind", case_fault_kind},
      {"net", case_fault_net},
      {"alloc", case_fault_alloc},
      {"map", case_fault_map},
      {"requests", case_fault_requests}}},
    {"knobs",
     {{"p2p-off", case_knob_p2p_off},
      {"shm-off", case_knob_shm_off},
      {"both-off", case_knob_both_off},
      {"connect-shm", case_knob_connect_shm},
      {"connect-none", case_knob_connect_none}}},
    {"net", {{"loop-2", case_net_loop}, {"peer-death", case_net_death},
             {"oversize-slot", case_net_oversize}, {"gather-8", case_net_gather}}},
    {"place", {{"nearest", case_place_nearest}}},
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--rank") == 0) return rank_main(argv[2], argv[3]);
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "20", 1);
  unsetenv("NCCL_P2P_DISABLE");
  unsetenv("NCCL_SHM_DISABLE");
  const char* group = argc > 1 ? argv[1] : NULL;
  for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
    if (group != NULL && strcmp(group, groups[g].group) != 0) continue;
    for (int c = 0; c < 10 && groups[g].cases[c].name != NULL; c++) {
      double t0 = now_s();
      fork_case(groups[g].cases[c].name, groups[g].cases[c].fn);
      printf("case %s: %.0f ms\n", groups[g].cases[c].name, (now_s() - t0) * 1e3);
    }
  }
  return check_finish(group != NULL ? group : "transport");
}
