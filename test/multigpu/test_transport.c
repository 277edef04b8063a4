/*
 * core/transport on real GPUs: ranks connect a ring and all pairs, then prove every connection
 * end to end: the send end's GPU writes the buffer and the tail through its kern_conn_t (peer- or
 * host-mapped), the receive end finds them in its own view (cudaMemcpy and a kernel), and its GPU
 * writes the head back to the sender. Configurations: threads of one process and one process per
 * GPU, 2 GPUs and CHOIR_TEST_NDEV (default: all), p2p and NCCL_P2P_DISABLE=1 (shm). Each runs in
 * a process of its own, since knobs are read once per process. Skipped (exit 77) without 2 GPUs.
 *
 *   test-transport-gpu                          every configuration, then a summary
 *   test-transport-gpu --config MODE N          one configuration (MODE: threads or procs)
 *   test-transport-gpu --rank RANK N HEXID      one rank process of a procs configuration
 */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "test_transport_kern.h"
#include "transport.h"

#include "rank_expect.h"
#define EXPECT_CUDA(call)                                                                       \
  do {                                                                                          \
    cudaError_t e_ = (call);                                                                    \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "[rank %d pid %d] %s:%d: %s failed: %s\n", t_rank, (int)getpid(),         \
              __FILE__, __LINE__, #call, cudaGetErrorString(e_));                               \
      bad++;                                                                                    \
    }                                                                                           \
  } while (0)

#define RING_CHANNELS 2
#define RING_SLOT (64u << 10)
#define PAIR_CHANNELS 2
#define PAIR_SLOT (16u << 10)

static uint32_t seed_of(int src, int dst, int call, int id) {
  return (uint32_t)(src * 1000003 + dst * 10007 + call * 101 + id * 7 + 1);
}
static uint64_t tail_value(int src, int dst, int call, int id) {
  return 0x7a11000000000000ull | (uint64_t)src << 32 | (uint64_t)dst << 16 |
         (uint64_t)(call * 64 + id);
}
static uint64_t head_value(int src, int dst, int call, int id) {
  return ~tail_value(src, dst, call, id);
}

/* Each end checks its kern_conn_t, then the three phases, separated by barriers. */
static int prove(bootstrap_t* bs, int rank, const transport_req_t* reqs, int n, int call,
                 int kind) {
  int bad = 0;
  for (int i = 0; i < n; i++) {
    const kern_conn_t* c = reqs[i].out;
    EXPECT(c->connected == 1);
    EXPECT((int)c->transport == kind);
    EXPECT(c->slot_bytes[KERN_PROTO_SIMPLE] == reqs[i].slot_bytes[KERN_PROTO_SIMPLE]);
    EXPECT(c->step == 0);
    EXPECT(c->buff[KERN_PROTO_SIMPLE] != NULL && c->tail != NULL && c->head != NULL);
    EXPECT((uintptr_t)c->buff[KERN_PROTO_SIMPLE] % 4096 == 0);
    EXPECT((uintptr_t)c->tail % 128 == 0 && (uintptr_t)c->head % 128 == 0);
    if (!c->connected || c->buff[KERN_PROTO_SIMPLE] == NULL || c->tail == NULL || c->head == NULL) return bad;
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  /* 1. Send ends: this GPU writes the peer's buffer and tail. */
  for (int i = 0; i < n; i++) {
    if (!reqs[i].is_send) continue;
    const kern_conn_t* c = reqs[i].out;
    int peer = reqs[i].peer, id = reqs[i].id;
    EXPECT_CUDA(tt_write(c->buff[KERN_PROTO_SIMPLE], (size_t)KERN_NSLOTS * c->slot_bytes[KERN_PROTO_SIMPLE],
                         seed_of(rank, peer, call, id), c->tail,
                         tail_value(rank, peer, call, id)));
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  /* 2. Receive ends: the data is there (host copy and this GPU's view); this GPU writes the
   * sender's head. */
  for (int i = 0; i < n; i++) {
    if (reqs[i].is_send) continue;
    const kern_conn_t* c = reqs[i].out;
    int peer = reqs[i].peer, id = reqs[i].id;
    size_t bytes = (size_t)KERN_NSLOTS * c->slot_bytes[KERN_PROTO_SIMPLE];
    uint32_t seed = seed_of(peer, rank, call, id);
    unsigned char* host = malloc(bytes);
    uint64_t tail = 0;
    EXPECT_CUDA(cudaMemcpy(host, c->buff[KERN_PROTO_SIMPLE], bytes, cudaMemcpyDefault));
    EXPECT_CUDA(cudaMemcpy(&tail, c->tail, sizeof(tail), cudaMemcpyDefault));
    size_t wrong = 0;
    for (size_t k = 0; k < bytes; k++) wrong += host[k] != tt_pattern(seed, k);
    EXPECT(wrong == 0);
    EXPECT(tail == tail_value(peer, rank, call, id));
    free(host);
    unsigned long long kwrong = 1;
    uint64_t ktail = 0;
    EXPECT_CUDA(tt_check(c->buff[KERN_PROTO_SIMPLE], bytes, seed, c->tail, &kwrong, &ktail));
    EXPECT(kwrong == 0);
    EXPECT(ktail == tail_value(peer, rank, call, id));
    EXPECT_CUDA(tt_write(NULL, 0, 0, c->head, head_value(peer, rank, call, id)));
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  /* 3. Send ends: the head came back. */
  for (int i = 0; i < n; i++) {
    if (!reqs[i].is_send) continue;
    const kern_conn_t* c = reqs[i].out;
    uint64_t head = 0;
    EXPECT_CUDA(cudaMemcpy(&head, c->head, sizeof(head), cudaMemcpyDefault));
    EXPECT(head == head_value(rank, reqs[i].peer, call, reqs[i].id));
  }
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  return bad;
}

static int rank_run(int rank, int n, const ncclUniqueId* id) {
  int bad = 0;
  t_rank = rank;
  int dev = rank;
  EXPECT_CUDA(cudaSetDevice(dev));
  log_set_thread_device(dev);
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(id, 1, rank, n, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad + 1;
  transport_peer_t* peers = calloc((size_t)n, sizeof(*peers));
  int64_t bus = 0;
  EXPECT(cuda_bus_id(dev, &bus) == ncclSuccess);
  peers[rank] = (transport_peer_t){sys_host_hash(), sys_pid_hash(), bus, dev, getpid()};
  EXPECT(bootstrap_allgather(bs, peers, sizeof(*peers)) == ncclSuccess);
  transport_t* t = NULL;
  EXPECT(transport_create(bs, rank, n, dev, peers, NULL, NULL, NULL, &t) == ncclSuccess);
  if (t == NULL) return bad + 1;

  /* Every pair must use one kind: p2p where both GPUs reach each other, shm otherwise and
   * always with NCCL_P2P_DISABLE=1. */
  const char* off = getenv("NCCL_P2P_DISABLE");
  int p2p_off = off != NULL && atoi(off) == 1;
  int kind = -1;
  for (int p = 0; p < n; p++) {
    if (p == rank) continue;
    int a = 0, b = 0;
    cudaDeviceCanAccessPeer(&a, dev, p);
    cudaDeviceCanAccessPeer(&b, p, dev);
    int want = !p2p_off && a && b ? KERN_TRANSPORT_P2P : KERN_TRANSPORT_SHM;
    EXPECT((int)transport_kind(t, p) == want);
    if (kind < 0) kind = want;
    /* The proof below takes one kind per configuration; a mixed machine reports it. */
    EXPECT(want == kind);
  }

  int next = (rank + 1) % n, prev = (rank + n - 1) % n;
  transport_req_t ring[2 * RING_CHANNELS];
  kern_conn_t ring_out[2 * RING_CHANNELS];
  for (int c = 0; c < RING_CHANNELS; c++) {
    ring[2 * c] = (transport_req_t){.peer = next, .is_send = 1, .id = c,
                                    .slot_bytes = {[KERN_PROTO_SIMPLE] = RING_SLOT},
                                    .out = &ring_out[2 * c]};
    ring[2 * c + 1] = (transport_req_t){.peer = prev, .is_send = 0, .id = c,
                                        .slot_bytes = {[KERN_PROTO_SIMPLE] = RING_SLOT},
                                        .out = &ring_out[2 * c + 1]};
  }
  EXPECT(transport_connect(t, ring, 2 * RING_CHANNELS, 1) == ncclSuccess);
  bad += prove(bs, rank, ring, 2 * RING_CHANNELS, 1, kind);

  int npair = 2 * (n - 1) * PAIR_CHANNELS, k = 0;
  transport_req_t* pairs = calloc((size_t)npair, sizeof(*pairs));
  kern_conn_t* pair_out = calloc((size_t)npair, sizeof(*pair_out));
  for (int d = 1; d < n; d++) {
    for (int c = 0; c < PAIR_CHANNELS; c++) {
      int p = (rank + d) % n;
      pairs[k] = (transport_req_t){.peer = p, .is_send = 1, .id = c,
                                   .slot_bytes = {[KERN_PROTO_SIMPLE] = PAIR_SLOT},
                                   .out = &pair_out[k]};
      k++;
      pairs[k] = (transport_req_t){.peer = p, .is_send = 0, .id = c,
                                   .slot_bytes = {[KERN_PROTO_SIMPLE] = PAIR_SLOT},
                                   .out = &pair_out[k]};
      k++;
    }
  }
  EXPECT(transport_connect(t, pairs, npair, 2) == ncclSuccess);
  bad += prove(bs, rank, pairs, npair, 2, kind);

  uint64_t dev_bytes = 0, host_bytes = 0;
  transport_mem_usage(t, &dev_bytes, &host_bytes);
  uint64_t want = (uint64_t)KERN_NSLOTS *
                  (RING_CHANNELS * RING_SLOT + (uint64_t)(n - 1) * PAIR_CHANNELS * PAIR_SLOT);
  if (kind == KERN_TRANSPORT_P2P) {
    EXPECT(dev_bytes >= want && host_bytes == 0);
  } else {
    EXPECT(host_bytes >= want && dev_bytes == 0);
  }
  if (rank == 0)
    printf("  rank 0: %d ring + %d all-pairs connection ends via %s; %llu B device, %llu B "
           "shared host memory\n",
           2 * RING_CHANNELS, npair, transport_kind_name((kern_transport_t)kind),
           (unsigned long long)dev_bytes, (unsigned long long)host_bytes);
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  transport_destroy(t);
  /* Destroy released everything without leaving a CUDA error behind. */
  EXPECT_CUDA(cudaDeviceSynchronize());
  EXPECT_CUDA(cudaGetLastError());
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  free(pairs);
  free(pair_out);
  free(peers);
  return bad;
}

/* ---- Configurations --------------------------------------------------------------------- */

typedef struct {
  int rank, n;
  const ncclUniqueId* id;
  int bad;
} thread_job_t;

static void* thread_rank(void* arg) {
  thread_job_t* j = (thread_job_t*)arg;
  j->bad = rank_run(j->rank, j->n, j->id);
  return NULL;
}

static int spawn_wait(char* const argv[], const char* what) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "%s (pid %d) failed: status 0x%x\n", what, (int)pid, st);
    return 1;
  }
  return 0;
}

static int config_main(const char* mode, int n) {
  alarm(240);
  ncclUniqueId id;
  if (bootstrap_get_unique_id(&id) != ncclSuccess) return 1;
  int failed = 0;
  if (strcmp(mode, "threads") == 0) {
    thread_job_t j[64];
    pthread_t th[64];
    for (int r = 0; r < n; r++) {
      j[r] = (thread_job_t){r, n, &id, 0};
      pthread_create(&th[r], NULL, thread_rank, &j[r]);
    }
    for (int r = 0; r < n; r++) {
      pthread_join(th[r], NULL);
      failed += j[r].bad != 0;
    }
  } else {
    char hex[2 * sizeof(id) + 1], n_s[16], rank_s[64][16];
    const unsigned char* b = (const unsigned char*)&id;
    for (size_t i = 0; i < sizeof(id); i++) sprintf(hex + 2 * i, "%02x", b[i]);
    snprintf(n_s, sizeof(n_s), "%d", n);
    pid_t pids[64];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < n; r++) {
      snprintf(rank_s[r], sizeof(rank_s[r]), "%d", r);
      pids[r] = fork();
      if (pids[r] == 0) {
        execl("/proc/self/exe", "test-transport-gpu", "--rank", rank_s[r], n_s, hex,
              (char*)NULL);
        _exit(127);
      }
    }
    for (int r = 0; r < n; r++) {
      int st = 0;
      waitpid(pids[r], &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "rank %d (pid %d) failed: status 0x%x\n", r, (int)pids[r], st);
        failed++;
      }
    }
  }
  fflush(stdout);
  return failed == 0 ? 0 : 1;
}

static int rank_main(int rank, int n, const char* hex) {
  alarm(240);
  ncclUniqueId id;
  unsigned char* b = (unsigned char*)&id;
  if (strlen(hex) != 2 * sizeof(id)) return 2;
  for (size_t i = 0; i < sizeof(id); i++) sscanf(hex + 2 * i, "%2hhx", &b[i]);
  int bad = rank_run(rank, n, &id);
  fflush(stdout);
  return bad == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--config") == 0) return config_main(argv[2], atoi(argv[3]));
  if (argc == 5 && strcmp(argv[1], "--rank") == 0)
    return rank_main(atoi(argv[2]), atoi(argv[3]), argv[4]);

  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    printf("skipped: no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    return CHECK_SKIP;
  }
  if (ndev < 2) {
    printf("skipped: transport-gpu needs 2 GPUs, this machine shows %d\n", ndev);
    return CHECK_SKIP;
  }
  int nmax = ndev;
  const char* s = getenv("CHOIR_TEST_NDEV");
  if (s != NULL && atoi(s) >= 2 && atoi(s) <= ndev) nmax = atoi(s);
  if (nmax > 64) nmax = 64;
  const char* modes[2] = {"threads", "procs"};
  int sizes[2] = {2, nmax};
  int nsizes = nmax > 2 ? 2 : 1;
  int runs = 0, passed = 0;
  char summary[16][96];
  for (int shm = 0; shm < 2; shm++) {
    if (shm) setenv("NCCL_P2P_DISABLE", "1", 1);
    for (int m = 0; m < 2; m++) {
      for (int z = 0; z < nsizes; z++) {
        char n_s[16], what[80];
        snprintf(n_s, sizeof(n_s), "%d", sizes[z]);
        snprintf(what, sizeof(what), "%-7s %2d GPUs %s", modes[m], sizes[z],
                 shm ? "NCCL_P2P_DISABLE=1" : "default (p2p)");
        printf("transport-gpu: %s\n", what);
        char* args[] = {"test-transport-gpu", "--config", (char*)modes[m], n_s, NULL};
        int ok = spawn_wait(args, what) == 0;
        snprintf(summary[runs], sizeof(summary[runs]), "%s: %s", what, ok ? "ok" : "FAILED");
        runs++;
        passed += ok;
      }
    }
  }
  printf("transport-gpu summary (%d GPUs visible):\n", ndev);
  for (int i = 0; i < runs; i++) printf("  %s\n", summary[i]);
  printf("transport-gpu: %d/%d configurations passed\n", passed, runs);
  return passed == runs ? 0 : 1;
}
