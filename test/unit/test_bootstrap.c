/*
 * Bootstrap (core/bootstrap): rendezvous, all-gather, barrier, tagged messages and split, across
 * processes and threads, with one or several unique ids and with NCCL_COMM_ID; and the failures
 * that must end in a clear error within the timeout instead of a hang: a root that never comes
 * up, a rank that never joins, a peer that dies, strangers writing garbage, aborts.
 *
 *   test-bootstrap GROUP    GROUP: procs, threads, scalable, faults, garbage, commid, watch
 */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_internal.h" /* white-box: forge ids and root messages */
#include "fork_case.h"

#include "rank_expect.h"
#include "thread_wait.h"

static double now_s(void) { return (double)sock_clock_ns() / 1e9; }

/* ---- What every rank checks ----------------------------------------------------------------- */

typedef struct {
  int32_t rank;
  int32_t sq;
  uint64_t mark;
} slot_t;

static int check_child(bootstrap_t* c, const int* members, int m, int my_index) {
  int bad = 0;
  EXPECT(bootstrap_rank(c) == my_index);
  EXPECT(bootstrap_nranks(c) == m);
  int* all = calloc((size_t)m, sizeof(int));
  for (int i = 0; i < m; i++) all[i] = -1;
  all[my_index] = members[my_index];
  EXPECT(bootstrap_allgather(c, all, sizeof(int)) == ncclSuccess);
  for (int i = 0; i < m; i++) EXPECT(all[i] == members[i]);
  EXPECT(bootstrap_barrier(c) == ncclSuccess);
  if (m > 1) {
    int next = (my_index + 1) % m, prev = (my_index - 1 + m) % m, v = members[my_index], w = -1;
    EXPECT(bootstrap_send(c, next, 5, &v, sizeof(v)) == ncclSuccess);
    EXPECT(bootstrap_recv(c, prev, 5, &w, sizeof(w)) == ncclSuccess);
    EXPECT(w == members[prev]);
  }
  free(all);
  return bad;
}

/* Split `bs` into the group of ranks sharing key(rank) with this one, and check the child. */
static int check_split(bootstrap_t* bs, uint64_t tag, int (*key)(int r, int n), bootstrap_t** c_p) {
  int bad = 0;
  int r = bootstrap_rank(bs), n = bootstrap_nranks(bs);
  int* members = calloc((size_t)n, sizeof(int));
  int m = 0, me = -1;
  for (int i = 0; i < n; i++) {
    if (key(i, n) != key(r, n)) continue;
    if (i == r) me = m;
    members[m++] = i;
  }
  bootstrap_t* c = NULL;
  EXPECT(bootstrap_split(bs, tag, members, m, me, NULL, &c) == ncclSuccess);
  if (c != NULL) bad += check_child(c, members, m, me);
  free(members);
  *c_p = c;
  return bad;
}

static int key_half(int r, int n) { return r < n / 2; }
static int key_parity(int r, int n) {
  (void)n;
  return r % 2;
}

static int rank_checks(bootstrap_t* bs, bool split) {
  int bad = 0;
  int r = bootstrap_rank(bs), n = bootstrap_nranks(bs);
  t_rank = r;
  /* All-gather: every slot, from every rank. */
  slot_t* s = malloc((size_t)n * sizeof(*s));
  memset(s, 0xee, (size_t)n * sizeof(*s));
  s[r] = (slot_t){r, r * r + 1, 0xc0ffee00ull + (uint64_t)r};
  EXPECT(bootstrap_allgather(bs, s, sizeof(*s)) == ncclSuccess);
  for (int i = 0; i < n; i++)
    EXPECT(s[i].rank == i && s[i].sq == i * i + 1 && s[i].mark == 0xc0ffee00ull + (uint64_t)i);
  /* An odd slot size, right after: the sequence keeps collectives apart. */
  unsigned char* b = calloc((size_t)n, 13);
  for (int k = 0; k < 13; k++) b[r * 13 + k] = (unsigned char)((r * 13 + k) ^ 0x5a);
  EXPECT(bootstrap_allgather(bs, b, 13) == ncclSuccess);
  for (int i = 0; i < n * 13; i++) EXPECT(b[i] == (unsigned char)(i ^ 0x5a));
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  /* Messages received in another order than sent, from two peers. */
  if (n > 1) {
    int next = (r + 1) % n, prev = (r - 1 + n) % n;
    for (int t = 1; t <= 3; t++) {
      int v[2] = {r, t};
      EXPECT(bootstrap_send(bs, next, t, v, sizeof(v)) == ncclSuccess);
    }
    int v7[2] = {r, 7};
    EXPECT(bootstrap_send(bs, prev, 7, v7, sizeof(v7)) == ncclSuccess);
    int order[3] = {3, 1, 2};
    for (int i = 0; i < 3; i++) {
      int w[2] = {-1, -1};
      EXPECT(bootstrap_recv(bs, prev, order[i], w, sizeof(w)) == ncclSuccess);
      EXPECT(w[0] == prev && w[1] == order[i]);
    }
    int w7[2] = {-1, -1};
    EXPECT(bootstrap_recv(bs, next, 7, w7, sizeof(w7)) == ncclSuccess);
    EXPECT(w7[0] == next && w7[1] == 7);
  }
  /* To oneself. */
  uint64_t x = 0x1234 + (uint64_t)r, y = 0;
  EXPECT(bootstrap_send(bs, r, 42, &x, sizeof(x)) == ncclSuccess);
  EXPECT(bootstrap_recv(bs, r, 42, &y, sizeof(y)) == ncclSuccess);
  EXPECT(y == x);
  /* Split into halves and into odd/even, both alive at once, and the parent still works. */
  if (split) {
    bootstrap_t *h = NULL, *p = NULL;
    bad += check_split(bs, 0x100, key_half, &h);
    bad += check_split(bs, 0x200, key_parity, &p);
    EXPECT(bootstrap_allgather(bs, s, sizeof(*s)) == ncclSuccess);
    for (int i = 0; i < n; i++) EXPECT(s[i].rank == i);
    EXPECT(bootstrap_close(h) == ncclSuccess);
    EXPECT(bootstrap_close(p) == ncclSuccess);
    EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  }
  free(b);
  free(s);
  return bad;
}

/* ---- Processes and threads ------------------------------------------------------------------ */

/* Everything a rank process needs; it travels as one hex-encoded argument. */
typedef struct {
  int nranks;
  int nids;
  bool split;
  double max_s;           /* failing ranks: the failure must come within this time */
  int expect_below;       /* failing ranks below this one expect `expect`, the others... */
  char expect[128];       /* (text their error must contain) */
  char expect_other[128]; /* ...`expect_other` */
  ncclUniqueId ids[8];
  int victim; /* watch cases: the rank that goes away, and how (watch_action_t) */
  int action;
} job_t;

typedef int (*rank_fn_t)(int rank, job_t* j);
static rank_fn_t rank_fn_by_name(const char* name);

/*
 * Run the rank function `fn` as ranks 0..n-1 (or as the n ranks listed), each in a process of its
 * own; returns how many failed. Each is a fresh process: fork, then at once exec this binary
 * again, so that no rank inherits a lock that another thread of this process (a root service)
 * held at the fork; sanitizer runtimes do not survive that. A rank that hangs is killed by its
 * alarm, so a hang fails the test instead of blocking it.
 */
static int run_ranks(const char* fn, const job_t* j, int n, const int* ranks) {
  char hex[2 * sizeof(job_t) + 1];
  const unsigned char* b = (const unsigned char*)j;
  for (size_t i = 0; i < sizeof(job_t); i++) sprintf(hex + 2 * i, "%02x", b[i]);
  char(*rank_s)[16] = calloc((size_t)n, 16);
  pid_t* pids = calloc((size_t)n, sizeof(pid_t));
  for (int i = 0; i < n; i++) snprintf(rank_s[i], 16, "%d", ranks ? ranks[i] : i);
  fflush(stdout);
  fflush(stderr);
  for (int i = 0; i < n; i++) {
    pids[i] = fork();
    if (pids[i] == 0) {
      execl("/proc/self/exe", "test-bootstrap", "--rank", fn, rank_s[i], hex, (char*)NULL);
      _exit(127);
    }
  }
  int failed = 0;
  for (int i = 0; i < n; i++) {
    int st = 0;
    waitpid(pids[i], &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      fprintf(stderr, "rank %s (pid %d) failed: status 0x%x\n", rank_s[i], (int)pids[i], st);
      failed++;
    }
  }
  free(pids);
  free(rank_s);
  return failed;
}

static int run_procs(int n, const char* fn, const job_t* j) { return run_ranks(fn, j, n, NULL); }

/* main() of a rank process: test-bootstrap --rank FN RANK HEXJOB */
static int rank_main(const char* fn, const char* rank_s, const char* hex) {
  job_t j;
  unsigned char* b = (unsigned char*)&j;
  if (strlen(hex) != 2 * sizeof(job_t) || rank_fn_by_name(fn) == NULL) return 2;
  for (size_t i = 0; i < sizeof(job_t); i++) sscanf(hex + 2 * i, "%2hhx", &b[i]);
  alarm(30);
  t_rank = atoi(rank_s);
  int bad = rank_fn_by_name(fn)(t_rank, &j);
  fflush(stdout);
  fflush(stderr);
  return bad == 0 && check_failures_ == 0 ? 0 : 1;
}

static int job_rank(int rank, job_t* j) {
  int bad = 0;
  t_rank = rank;
  bootstrap_t* bs = NULL;
  ncclResult_t res = bootstrap_init(j->ids, j->nids, rank, j->nranks, NULL, &bs);
  EXPECT(res == ncclSuccess);
  if (res != ncclSuccess) return bad;
  EXPECT(bootstrap_rank(bs) == rank && bootstrap_nranks(bs) == j->nranks);
  bad += rank_checks(bs, j->split);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

static void job_ids(job_t* j, int nranks, int nids, bool split) {
  memset(j, 0, sizeof(*j));
  j->nranks = nranks;
  j->nids = nids;
  j->split = split;
  for (int i = 0; i < nids; i++) CHECK_EQ_INT(bootstrap_get_unique_id(&j->ids[i]), ncclSuccess);
}

/* Root services end by themselves once their rendezvous is served (or given up). */
static void check_roots_end(void) {
  for (int i = 0; i < 400 && bootstrap_roots_running() > 0; i++) usleep(5000);
  CHECK_EQ_INT(bootstrap_roots_running(), 0);
}

static void run_job(int nranks, int nids, bool split) {
  job_t j;
  job_ids(&j, nranks, nids, split);
  double t0 = now_s();
  CHECK_EQ_INT(run_procs(nranks, "job", &j), 0);
  printf("%d processes, %d unique id(s)%s: %.0f ms\n", nranks, nids, split ? ", with splits" : "",
         (now_s() - t0) * 1e3);
  check_roots_end();
}

/* Two ranks: size mismatch, large messages both ways at once, two threads per rank on one
 * bootstrap. */
typedef struct {
  bootstrap_t* bs;
  int k;
  int bad;
} pair_thread_t;

static void* pair_thread(void* arg) {
  pair_thread_t* p = arg;
  int bad = 0;
  int r = bootstrap_rank(p->bs), peer = 1 - r;
  t_rank = r;
  size_t size = (2u << 20) + (size_t)p->k;
  char* out = malloc(size);
  char* in = malloc(size);
  for (size_t i = 0; i < size; i++) out[i] = (char)(i * 3 + (size_t)r + (size_t)p->k);
  EXPECT(bootstrap_send(p->bs, peer, 20 + p->k, out, size) == ncclSuccess);
  EXPECT(bootstrap_recv(p->bs, peer, 20 + p->k, in, size) == ncclSuccess);
  for (size_t i = 0; i < size; i += 4099)
    EXPECT(in[i] == (char)(i * 3 + (size_t)peer + (size_t)p->k));
  free(in);
  free(out);
  p->bad = bad;
  return NULL;
}

static int pair_rank(int rank, job_t* j) {
  int bad = 0;
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(j->ids, 1, rank, 2, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad;
  int peer = 1 - rank;
  /* Sizes must match: the error names both. */
  char m16[16] = {0}, m8[8];
  if (rank == 0) {
    EXPECT(bootstrap_send(bs, peer, 9, m16, sizeof(m16)) == ncclSuccess);
  } else {
    err_clear_last();
    EXPECT(bootstrap_recv(bs, peer, 9, m8, sizeof(m8)) == ncclInternalError);
    EXPECT(strstr(err_last(), "has 16 bytes, but the receiver expected 8 bytes") != NULL);
    EXPECT(strstr(err_last(), "the message with tag 9 from rank 0 (") != NULL);
  }
  /* 16 MB each way, both sending first: far beyond the socket buffers. */
  size_t big = 16u << 20;
  char* out = malloc(big);
  char* in = malloc(big);
  for (size_t i = 0; i < big; i++) out[i] = (char)(i * 7 + (size_t)rank);
  EXPECT(bootstrap_send(bs, peer, 10, out, big) == ncclSuccess);
  EXPECT(bootstrap_recv(bs, peer, 10, in, big) == ncclSuccess);
  for (size_t i = 0; i < big; i += 997) EXPECT(in[i] == (char)(i * 7 + (size_t)peer));
  free(in);
  free(out);
  /* Two threads of each rank on the same bootstrap, same peer, at once. */
  pair_thread_t pt[2] = {{bs, 0, 0}, {bs, 1, 0}};
  pthread_t th[2];
  for (int k = 0; k < 2; k++) pthread_create(&th[k], NULL, pair_thread, &pt[k]);
  for (int k = 0; k < 2; k++) {
    pthread_join(th[k], NULL);
    bad += pt[k].bad;
  }
  bad += rank_checks(bs, true);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

static void case_procs_2(void) {
  job_t j;
  job_ids(&j, 2, 1, true);
  CHECK_EQ_INT(run_procs(2, "pair", &j), 0);
  check_roots_end();
}

static void case_procs_8(void) { run_job(8, 1, true); }

static void case_procs_64(void) {
  double t0 = now_s();
  run_job(64, 1, true);
  /* Generous: the point is "not seconds per rank"; sanitizer builds are slower. */
  CHECK_TRUE(now_s() - t0 < 20.0);
}

static void case_procs_lo(void) {
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  run_job(4, 1, true);
}

static void case_procs_ipv6(void) {
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  sock_if_t i;
  if (sock_if_bootstrap(&i) != ncclSuccess) {
    CHECK_SKIPPED("procs_ipv6: no IPv6 loopback address here");
    return;
  }
  CHECK_EQ_INT(i.addr.sa.sa_family, AF_INET6);
  run_job(4, 1, true);
}

typedef struct {
  job_t* j;
  int rank;
  int bad;
} thread_job_t;

static void* thread_rank(void* arg) {
  thread_job_t* t = arg;
  t->bad = job_rank(t->rank, t->j);
  return NULL;
}

static void case_threads(void) {
  /* 8 ranks as threads of this process, and two more communicators of 4 ranks (one with two
   * ids) at the same time. */
  job_t a, b, c;
  job_ids(&a, 8, 1, true);
  job_ids(&b, 4, 1, true);
  job_ids(&c, 4, 2, true);
  thread_job_t t[16];
  pthread_t th[16];
  int n = 0;
  for (int r = 0; r < 8; r++) t[n++] = (thread_job_t){&a, r, 0};
  for (int r = 0; r < 4; r++) t[n++] = (thread_job_t){&b, r, 0};
  for (int r = 0; r < 4; r++) t[n++] = (thread_job_t){&c, r, 0};
  double t0 = now_s();
  for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, thread_rank, &t[i]);
  for (int i = 0; i < n; i++) {
    pthread_join(th[i], NULL);
    CHECK_EQ_INT(t[i].bad, 0);
  }
  printf("16 threads in 3 communicators: %.0f ms\n", (now_s() - t0) * 1e3);
  check_roots_end();
}

static void case_single_rank(void) {
  job_t j;
  job_ids(&j, 1, 1, true);
  CHECK_EQ_INT(job_rank(0, &j), 0);
  check_roots_end();
}

static void case_scalable_8(void) { run_job(8, 3, true); }
static void case_scalable_64(void) { run_job(64, 4, true); }
static void case_scalable_all_roots(void) { run_job(5, 5, true); } /* one rank per root */

/* ---- Faults --------------------------------------------------------------------------------- */

/* A loopback port nobody listens on. */
static int closed_port(int family) {
  sock_addr_t a;
  memset(&a, 0, sizeof(a));
  if (family == AF_INET6) {
    a.sin6.sin6_family = AF_INET6;
    a.sin6.sin6_addr = in6addr_loopback;
  } else {
    a.sin.sin_family = AF_INET;
    a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  sock_t l;
  if (sock_listen(&a, "probe", &l) != ncclSuccess) return 0;
  int port = ntohs(family == AF_INET6 ? l.addr.sin6.sin6_port : l.addr.sin.sin_port);
  sock_close(&l);
  return port;
}

static void case_root_never_up(void) {
  /* An id whose root is gone: the connection is refused until the timeout. */
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "1", 1);
  bs_id_t v;
  memset(&v, 0, sizeof(v));
  v.magic = BS_ID_MAGIC;
  v.version = BS_ID_VERSION;
  v.tag = 77;
  v.root.sin.sin_family = AF_INET;
  v.root.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int port = closed_port(AF_INET);
  v.root.sin.sin_port = htons((uint16_t)port);
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, &v, sizeof(v));
  bootstrap_t* bs = NULL;
  err_clear_last();
  double t0 = now_s();
  CHECK_EQ_INT(bootstrap_init(&id, 1, 0, 2, NULL, &bs), ncclRemoteError);
  double el = now_s() - t0;
  CHECK_TRUE(bs == NULL);
  CHECK_TRUE(el >= 0.9 && el < 2.0);
  char want[96];
  snprintf(want, sizeof(want), "connecting to bootstrap root (127.0.0.1:%d): timed out after 1 s",
           port);
  CHECK_CONTAINS(err_last(), want);
}

static void case_root_refused_fast(void) {
  /* With few retries the error comes before the timeout, and says why. */
  setenv("NCCL_SOCKET_RETRY_CNT", "2", 1);
  setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "10", 1);
  char env[64];
  int port = closed_port(AF_INET);
  snprintf(env, sizeof(env), "127.0.0.1:%d", port);
  setenv("NCCL_COMM_ID", env, 1);
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  CHECK_EQ_INT(bootstrap_roots_running(), 0); /* with NCCL_COMM_ID, rank 0 starts the root */
  bootstrap_t* bs = NULL;
  err_clear_last();
  double t0 = now_s();
  CHECK_EQ_INT(bootstrap_init(&id, 1, 1, 2, NULL, &bs), ncclRemoteError); /* rank 1: no root */
  CHECK_TRUE(now_s() - t0 < 1.0);
  CHECK_CONTAINS(err_last(), "after 3 attempt(s): Connection refused");
  CHECK_CONTAINS(err_last(), env);
}

static void case_bad_id(void) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  bootstrap_t* bs = NULL;
  err_clear_last();
  CHECK_EQ_INT(bootstrap_init(&id, 1, 0, 2, NULL, &bs), ncclInvalidArgument);
  CHECK_CONTAINS(err_last(), "unique id 0 is not a Choir unique id");
  CHECK_EQ_INT(bootstrap_init(&id, 1, 2, 2, NULL, &bs), ncclInvalidArgument);
  CHECK_EQ_INT(bootstrap_init(&id, 3, 0, 2, NULL, &bs), ncclInvalidArgument);
  sock_addr_t a;
  CHECK_EQ_INT(bootstrap_id_root(&id, &a), ncclInvalidArgument);
}

/* Ranks that must fail init with ncclRemoteError, quickly and with the expected reason. */
static int failing_rank(int rank, job_t* j) {
  int bad = 0;
  const char* expect = rank < j->expect_below ? j->expect : j->expect_other;
  bootstrap_t* bs = NULL;
  err_clear_last();
  double t0 = now_s();
  ncclResult_t res = bootstrap_init(j->ids, j->nids, rank, j->nranks, NULL, &bs);
  double el = now_s() - t0;
  EXPECT(res == ncclRemoteError);
  EXPECT(el < j->max_s);
  EXPECT(strstr(err_last(), expect) != NULL);
  if (strstr(err_last(), expect) == NULL) fprintf(stderr, "  error was: %s\n", err_last());
  return bad;
}

static void case_rank_never_joins(void) {
  /* 4 ranks expected, 3 come: the root gives up after the timeout and tells the 3 which rank
   * never came. */
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "1", 1);
  job_t j;
  job_ids(&j, 4, 1, false);
  j.max_s = 2.5;
  j.expect_below = 4;
  snprintf(j.expect, sizeof(j.expect), "rank 3 never joined (3 of 4 ranks of this root did)");
  double t0 = now_s();
  CHECK_EQ_INT(run_procs(3, "failing", &j), 0);
  CHECK_TRUE(now_s() - t0 < 3.0);
  check_roots_end();
}

static void case_rank_never_joins_scalable(void) {
  /* Same with two roots: rank 1 (root 0) never comes; root 1's ranks hear that the ring of roots
   * failed. */
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "1", 1);
  job_t j;
  job_ids(&j, 4, 2, false);
  j.max_s = 2.5;
  j.expect_below = 2;
  snprintf(j.expect, sizeof(j.expect), "rank 1 never joined");
  snprintf(j.expect_other, sizeof(j.expect_other), "the exchange between the 2 roots failed");
  int ranks[3] = {0, 2, 3};
  CHECK_EQ_INT(run_ranks("failing", &j, 3, ranks), 0);
  check_roots_end();
}

static int dying_rank(int rank, job_t* j) {
  int bad = 0;
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(j->ids, 1, rank, j->nranks, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad;
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  if (rank == 2) _exit(0); /* dies between two collectives, without closing anything */
  slot_t* s = calloc((size_t)j->nranks, sizeof(*s));
  err_clear_last();
  double t0 = now_s();
  ncclResult_t res = bootstrap_allgather(bs, s, sizeof(*s));
  double el = now_s() - t0;
  EXPECT(res == ncclRemoteError);
  EXPECT(el < 3.0); /* the timeout is 2 s; a closed connection is seen at once */
  /* Rank 1 receives from rank 2 at the first step; the others may blame a rank that failed
   * because of it, but always name one. */
  EXPECT(strstr(err_last(), rank == 1 ? "rank 2 (" : "rank ") != NULL);
  if (rank == 1) EXPECT(strstr(err_last(), "closed its connection") != NULL);
  fprintf(stderr, "[rank %d] after %.0f ms: %s\n", rank, el * 1e3, err_last());
  EXPECT(bootstrap_close(bs) == ncclSuccess); /* the others then see this rank leave too */
  free(s);
  return bad;
}

static void case_peer_dies(void) {
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "2", 1);
  job_t j;
  job_ids(&j, 4, 1, false);
  double t0 = now_s();
  CHECK_EQ_INT(run_procs(4, "dying", &j), 0);
  CHECK_TRUE(now_s() - t0 < 4.0);
}

typedef struct {
  bootstrap_t* bs;
  ncclUniqueId* id;
  int rank;
  volatile uint32_t* flag;
  ncclResult_t res;
  double elapsed;
  pid_t tid; /* the thread's id, published when it starts (atomic) */
} abort_arg_t;

/* The id of a thread started with abort_arg_t, once it has published it. */
static pid_t wait_tid(abort_arg_t* a) {
  pid_t t;
  while ((t = __atomic_load_n(&a->tid, __ATOMIC_ACQUIRE)) == 0) sched_yield();
  return t;
}

static void* init_thread(void* arg) {
  abort_arg_t* a = arg;
  __atomic_store_n(&a->tid, thread_self_id(), __ATOMIC_RELEASE);
  a->res = bootstrap_init(a->id, 1, a->rank, 2, a->flag, &a->bs);
  return NULL;
}

static void* recv_thread(void* arg) {
  abort_arg_t* a = arg;
  __atomic_store_n(&a->tid, thread_self_id(), __ATOMIC_RELEASE);
  int x;
  double t0 = now_s();
  a->res = bootstrap_recv(a->bs, 1 - a->rank, 99, &x, sizeof(x));
  a->elapsed = now_s() - t0;
  return NULL;
}

static void case_abort_and_timeout(void) {
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "1", 1);
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  volatile uint32_t flags[2] = {0, 0};
  abort_arg_t a[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    a[r] = (abort_arg_t){NULL, &id, r, &flags[r], ncclInternalError, 0, 0};
    pthread_create(&th[r], NULL, init_thread, &a[r]);
  }
  for (int r = 0; r < 2; r++) {
    pthread_join(th[r], NULL);
    CHECK_EQ_INT(a[r].res, ncclSuccess);
  }
  if (a[0].bs == NULL || a[1].bs == NULL) return;
  /* A receive that nothing will satisfy, aborted from another thread once it waits: returns
   * promptly. */
  a[0].tid = 0;
  pthread_create(&th[0], NULL, recv_thread, &a[0]);
  CHECK_TRUE(thread_wait_in_poll(wait_tid(&a[0]), 5.0));
  __atomic_store_n(&flags[0], 1, __ATOMIC_RELEASE);
  pthread_join(th[0], NULL);
  CHECK_EQ_INT(a[0].res, ncclInternalError);
  CHECK_TRUE(a[0].elapsed < 0.5);
  /* The same without abort: the timeout, naming the peer that did not send. */
  err_clear_last();
  recv_thread(&a[1]);
  CHECK_EQ_INT(a[1].res, ncclRemoteError);
  CHECK_TRUE(a[1].elapsed >= 0.95 && a[1].elapsed < 2.0);
  CHECK_CONTAINS(err_last(), "timed out after 1 s waiting for rank 0 (");
  CHECK_CONTAINS(err_last(), "the message with tag 99");
  CHECK_EQ_INT(bootstrap_close(a[0].bs), ncclSuccess); /* safe after an abort */
  CHECK_EQ_INT(bootstrap_close(a[1].bs), ncclSuccess);
}

static void case_abort_init(void) {
  /* Rank 0 of 2 waits at the root for a rank that never comes; abort ends the wait. */
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  volatile uint32_t flag = 0;
  abort_arg_t a = {NULL, &id, 0, &flag, ncclSuccess, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, init_thread, &a);
  /* Once it waits (for the root's answer, or to connect), the abort must end the wait. */
  CHECK_TRUE(thread_wait_in_poll(wait_tid(&a), 5.0));
  double t0 = now_s();
  __atomic_store_n(&flag, 1, __ATOMIC_RELEASE);
  pthread_join(th, NULL);
  CHECK_EQ_INT(a.res, ncclInternalError);
  CHECK_TRUE(a.bs == NULL);
  CHECK_TRUE(now_s() - t0 < 0.5);
}

/* ---- Garbage -------------------------------------------------------------------------------- */

static int raw_connect(const sock_addr_t* a) {
  int fd = socket(a->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, &a->sa, sock_addr_len(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static void raw_write(const sock_addr_t* a, const void* data, size_t size) {
  int fd = raw_connect(a);
  CHECK_TRUE(fd >= 0);
  if (fd < 0) return;
  CHECK_EQ_INT(send(fd, data, size, MSG_NOSIGNAL), (long long)size);
  /* Then wait until the root has read it and dropped the connection (end of file, or a reset),
   * rather than for some time. */
  shutdown(fd, SHUT_WR);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  char sink[256];
  double limit = now_s() + 5.0;
  int closed = 0;
  while (!closed && now_s() < limit) {
    if (poll(&p, 1, 100) > 0) closed = read(fd, sink, sizeof(sink)) <= 0;
  }
  CHECK_MSG(closed, "the root kept a connection that sent it garbage for 5 s");
  close(fd);
}

/* Wait (bounded) for this process's last error to mention `text`. */
static bool saw_error(const char* text) {
  for (int i = 0; i < 400; i++) {
    if (strstr(err_last(), text) != NULL) return true;
    usleep(5000);
  }
  fprintf(stderr, "expected an error containing \"%s\"; last error: \"%s\"\n", text, err_last());
  return false;
}

static void case_garbage_root(void) {
  job_t j;
  job_ids(&j, 4, 1, false);
  sock_addr_t root;
  CHECK_EQ_INT(bootstrap_id_root(&j.ids[0], &root), ncclSuccess);
  bs_id_t v;
  memcpy(&v, j.ids[0].internal, sizeof(v));
  /* One that connects and says nothing, held open during the whole rendezvous. */
  int silent = raw_connect(&root);
  CHECK_TRUE(silent >= 0);
  /* Bytes that are not our protocol. */
  err_clear_last();
  static const char http[] = "GET / HTTP/1.0\r\nHost: choir\r\n\r\n"; /* > one header */
  raw_write(&root, http, sizeof(http) - 1);
  CHECK_TRUE(saw_error("not a bootstrap message"));
  /* Our magic, but not a join. */
  bs_hdr_t h = {BS_WIRE_MAGIC, BS_MSG_USER, 0, v.tag, 0};
  err_clear_last();
  raw_write(&root, &h, sizeof(h));
  CHECK_TRUE(saw_error("not a request to join"));
  /* A join with an impossible size. */
  h = (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_JOIN, 0, v.tag, 1ull << 40};
  err_clear_last();
  raw_write(&root, &h, sizeof(h));
  CHECK_TRUE(saw_error("not a request to join"));
  /* A join for another id. */
  struct {
    bs_hdr_t h;
    bs_join_t j;
  } msg;
  memset(&msg, 0, sizeof(msg));
  msg.h = (bs_hdr_t){BS_WIRE_MAGIC, BS_MSG_JOIN, 0, v.tag ^ 1, sizeof(bs_join_t)};
  err_clear_last();
  raw_write(&root, &msg, sizeof(msg));
  CHECK_TRUE(saw_error("it holds a different unique id"));
  /* The right id, but nonsense: refused, and the sender is told why. */
  msg.h.tag = v.tag;
  msg.j.rank = 9;
  msg.j.nranks = 4;
  msg.j.nids = 1;
  msg.j.addr = root;
  int fd = raw_connect(&root);
  CHECK_TRUE(fd >= 0);
  err_clear_last();
  CHECK_EQ_INT(send(fd, &msg, sizeof(msg), MSG_NOSIGNAL), (long long)sizeof(msg));
  CHECK_TRUE(saw_error("its request is inconsistent (rank 9 of 4"));
  struct {
    bs_hdr_t h;
    bs_reply_t r;
    char text[64];
  } reply;
  memset(&reply, 0, sizeof(reply));
  CHECK_TRUE(read(fd, &reply, sizeof(reply)) > (ssize_t)sizeof(bs_hdr_t));
  CHECK_TRUE(reply.h.kind == BS_MSG_ROOT_REPLY && reply.r.status != 0);
  close(fd);
  /* A truncated header, then close. */
  raw_write(&root, &h, 5);
  /* The real rendezvous still works. */
  CHECK_EQ_INT(run_procs(4, "job", &j), 0);
  check_roots_end();
  close(silent);
}

/* Rank 0 writes garbage to rank 1's listening socket; rank 1 must drop it and carry on. */
static int garbage_rank(int rank, job_t* j) {
  int bad = 0;
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(j->ids, 1, rank, 2, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad;
  const sock_addr_t* target = bootstrap_peer_addr(bs, 1);
  bs_hdr_t hdrs[3] = {
      {0x12345678u, BS_MSG_CONN, 0, 0, sizeof(bs_conn_t)},        /* not our magic */
      {BS_WIRE_MAGIC, BS_MSG_CONN, 0, 0x5555, sizeof(bs_conn_t)}, /* another bootstrap */
      {BS_WIRE_MAGIC, BS_MSG_USER, 0, 3, 1ull << 50},             /* no introduction */
  };
  const char* expect[4] = {"not a bootstrap message", "opened with an unexpected message",
                           "opened with an unexpected message",
                           "connections have not said who they are"};
  int silent = -1;
  if (rank == 0) silent = raw_connect(target); /* open and silent throughout */
  /* Last, a crowd of silent connections: past nranks + 64 the oldest are dropped. */
  enum { CROWD = 2 + 64 + 4 };
  int crowd[CROWD];
  for (int g = 0; g < 4; g++) {
    /* Rank 1 forgets earlier errors before rank 0 writes anything. */
    if (rank == 1) err_clear_last();
    EXPECT(bootstrap_barrier(bs) == ncclSuccess);
    if (rank == 0 && g == 3) {
      for (int i = 0; i < CROWD; i++) crowd[i] = raw_connect(target);
    } else if (rank == 0) {
      int fd = raw_connect(target);
      EXPECT(fd >= 0);
      if (fd >= 0) {
        EXPECT(send(fd, &hdrs[g], sizeof(hdrs[g]), MSG_NOSIGNAL) == (ssize_t)sizeof(hdrs[g]));
        close(fd);
      }
    }
    /* Keep both ranks busy until rank 1 has seen and dropped it. */
    int seen[2] = {0, 0};
    for (int i = 0; i < 2000; i++) {
      seen[0] = seen[1] = 0;
      seen[rank] = rank == 0 || strstr(err_last(), expect[g]) != NULL;
      /* Rank 1 learns of the garbage only inside the all-gathers: connections are read while a
       * rank waits. */
      EXPECT(bootstrap_allgather(bs, seen, sizeof(int)) == ncclSuccess);
      if (seen[1]) break;
    }
    EXPECT(seen[1]);
  }
  bad += rank_checks(bs, true);
  if (rank == 0)
    for (int i = 0; i < CROWD; i++)
      if (crowd[i] >= 0) close(crowd[i]);
  if (silent >= 0) close(silent);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

static void case_garbage_rank(void) {
  job_t j;
  job_ids(&j, 2, 1, false);
  CHECK_EQ_INT(run_procs(2, "garbage", &j), 0);
}

/* ---- NCCL_COMM_ID --------------------------------------------------------------------------- */

static int comm_id_rank(int rank, job_t* j) {
  int bad = 0;
  /* Every process computes the id from the environment: no broadcast needed. */
  ncclUniqueId id;
  EXPECT(bootstrap_get_unique_id(&id) == ncclSuccess);
  EXPECT(memcmp(&id, &j->ids[0], sizeof(id)) == 0);
  for (int round = 0; round < 2; round++) { /* a second communicator on the same address */
    bootstrap_t* bs = NULL;
    EXPECT(bootstrap_init(&id, 1, rank, j->nranks, NULL, &bs) == ncclSuccess);
    if (bs == NULL) return bad;
    bad += rank_checks(bs, round == 0);
    EXPECT(bootstrap_close(bs) == ncclSuccess);
  }
  return bad;
}

static void run_comm_id(int family) {
  int port = closed_port(family);
  if (port == 0) {
    CHECK_SKIPPED("NCCL_COMM_ID over %s: no loopback address",
                  family == AF_INET6 ? "IPv6" : "IPv4");
    return;
  }
  char env[64];
  snprintf(env, sizeof(env), family == AF_INET6 ? "[::1]:%d" : "127.0.0.1:%d", port);
  setenv("NCCL_COMM_ID", env, 1);
  job_t c;
  memset(&c, 0, sizeof(c));
  c.nranks = 4;
  CHECK_EQ_INT(bootstrap_get_unique_id(&c.ids[0]), ncclSuccess);
  CHECK_EQ_INT(bootstrap_roots_running(), 0);
  sock_addr_t a;
  CHECK_EQ_INT(bootstrap_id_root(&c.ids[0], &a), ncclSuccess);
  char s[SOCK_ADDR_STRLEN];
  CHECK_EQ_STR(sock_addr_str(&a, s, sizeof(s)), env);
  CHECK_EQ_INT(run_procs(4, "comm_id", &c), 0);
  /* And a single rank, which needs no root at all. */
  bootstrap_t* bs = NULL;
  CHECK_EQ_INT(bootstrap_init(&c.ids[0], 1, 0, 1, NULL, &bs), ncclSuccess);
  CHECK_EQ_INT(bootstrap_roots_running(), 0);
  CHECK_EQ_INT(bootstrap_barrier(bs), ncclSuccess);
  CHECK_EQ_INT(bootstrap_close(bs), ncclSuccess);
}

static void case_comm_id_v4(void) { run_comm_id(AF_INET); }
static void case_comm_id_v6(void) { run_comm_id(AF_INET6); }

/* ---- Liveness (bootstrap_watch_*) ---------------------------------------------------------- */

/* What the victim of a watch case does once every rank watches. */
typedef enum {
  WATCH_KILL = 1, /* SIGKILL: its sockets close at once -> EXITED */
  WATCH_STOP,     /* SIGSTOP: it stays connected but silent -> SILENT after CHOIR_PEER_TIMEOUT */
  WATCH_DESTROY,  /* bootstrap_watch_stop(DESTROY) -> LEFT */
  WATCH_ABORT,    /* bootstrap_watch_stop(ABORT) -> ABORTED */
  WATCH_EXIT,     /* exit(0) with the watch open: the atexit goodbye -> QUIT */
  WATCH_NONE,     /* nobody goes: quiet ranks stay alive past the timeout */
} watch_action_t;

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int self;
  int nranks;
  int n;
  bootstrap_peer_report_t r[64];
  double at[64];
} watch_log_t;

static void watch_record(void* ctx, const bootstrap_peer_report_t* r) {
  watch_log_t* l = ctx;
  pthread_mutex_lock(&l->lock);
  if (l->n < 64) {
    l->r[l->n] = *r;
    l->at[l->n] = now_s();
    l->n++;
  }
  pthread_cond_broadcast(&l->cond);
  pthread_mutex_unlock(&l->lock);
}

/* What a rank's goodbye says of it here: 100 + rank collectives, busy on odd ranks, and as the
 * rank whose failure made it leave, the next rank on odd ranks (none on even ones). */
static void watch_state(void* ctx, uint64_t* colls_p, int* busy_p, int* cause_p) {
  const watch_log_t* l = ctx;
  *colls_p = 100 + (uint64_t)l->self;
  *busy_p = l->self % 2;
  *cause_p = l->self % 2 ? (l->self + 1) % l->nranks : -1;
}

static const bootstrap_watch_ops_t watch_test_ops = {watch_record, watch_state};

/* Wait until the log has an event about `rank` (up to max_s); its index, or -1. */
static int watch_wait(watch_log_t* l, int rank, double max_s) {
  double end = now_s() + max_s;
  pthread_mutex_lock(&l->lock);
  int found = -1;
  while (found < 0) {
    for (int i = 0; i < l->n && found < 0; i++)
      if (l->r[i].rank == rank) found = i;
    if (found >= 0 || now_s() >= end) break;
    pthread_mutex_unlock(&l->lock);
    usleep(2000);
    pthread_mutex_lock(&l->lock);
  }
  pthread_mutex_unlock(&l->lock);
  return found;
}

static int watch_rank(int rank, job_t* j) {
  int bad = 0;
  bootstrap_t* bs = NULL;
  EXPECT(bootstrap_init(j->ids, 1, rank, j->nranks, NULL, &bs) == ncclSuccess);
  if (bs == NULL) return bad;
  watch_log_t log = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, rank, j->nranks, 0, {{0}}, {0}};
  bootstrap_watch_t* w = NULL;
  EXPECT(bootstrap_watch_start(bs, &watch_test_ops, &log, &w) == ncclSuccess);
  EXPECT(w != NULL);
  EXPECT(bootstrap_barrier(bs) == ncclSuccess);
  const int v = j->victim, n = j->nranks;
  if (rank == v) {
    switch (j->action) {
      case WATCH_KILL: raise(SIGKILL); break;
      case WATCH_STOP: raise(SIGSTOP); break; /* the runner kills it once the others are done */
      case WATCH_DESTROY: bootstrap_watch_stop(w, BOOTSTRAP_LEAVE_DESTROY); break;
      case WATCH_ABORT: bootstrap_watch_stop(w, BOOTSTRAP_LEAVE_ABORT); break;
      case WATCH_EXIT: fflush(NULL); exit(0);
      default: break;
    }
    if (j->action == WATCH_DESTROY || j->action == WATCH_ABORT) {
      EXPECT(bootstrap_close(bs) == ncclSuccess);
      return bad;
    }
  }
  const double t0 = now_s();
  if (j->action == WATCH_NONE) {
    /* Twice the timeout of silence on the bootstrap: the heartbeats keep everyone alive. */
    usleep((useconds_t)(2 * j->max_s * 1e6));
    /* Only goodbyes: ranks that finished their wait first may already have left. */
    pthread_mutex_lock(&log.lock);
    for (int k = 0; k < log.n; k++)
      EXPECT_MSG(log.r[k].event == BOOTSTRAP_PEER_LEFT, "rank %d: event %d", log.r[k].rank,
                 log.r[k].event);
    pthread_mutex_unlock(&log.lock);
  } else {
    static const int want[] = {0,
                               BOOTSTRAP_PEER_EXITED,
                               BOOTSTRAP_PEER_SILENT,
                               BOOTSTRAP_PEER_LEFT,
                               BOOTSTRAP_PEER_ABORTED,
                               BOOTSTRAP_PEER_QUIT};
    int i = watch_wait(&log, v, j->max_s);
    EXPECT_MSG(i >= 0, "no event about rank %d within %.1f s", v, j->max_s);
    if (i >= 0) {
      const bootstrap_peer_report_t* r = &log.r[i];
      EXPECT_MSG(r->event == want[j->action], "event %d, expected %d", r->event,
                 want[j->action]);
      /* First seen by one of the victim's neighbours, then passed around the ring. */
      const int prev = (v + n - 1) % n, next = (v + 1) % n;
      EXPECT(r->reporter == prev || r->reporter == next);
      EXPECT(bootstrap_watch_event(w, v) == want[j->action]);
      /* A goodbye carries what the victim said of itself (watch_state), around the ring too; of
       * a rank that is just gone nothing is known. */
      if (j->action == WATCH_KILL || j->action == WATCH_STOP)
        EXPECT(r->colls == 0 && r->busy == 1 && r->cause == -1);
      else
        EXPECT_MSG(r->colls == 100u + (uint64_t)v && r->busy == v % 2 &&
                       r->cause == (v % 2 ? (v + 1) % n : -1),
                   "colls %llu busy %d cause %d", (unsigned long long)r->colls, r->busy,
                   r->cause);
      fprintf(stderr, "[rank %d] rank %d: event %d after %.0f ms, seen by rank %d\n", rank, v,
              r->event, (log.at[i] - t0) * 1e3, r->reporter);
    }
    /* Nothing about anyone else, but that they left: the survivors end at their own pace. */
    pthread_mutex_lock(&log.lock);
    for (int k = 0; k < log.n; k++)
      EXPECT_MSG(log.r[k].rank == v || log.r[k].event == BOOTSTRAP_PEER_LEFT,
                 "an event about rank %d (%d)", log.r[k].rank, log.r[k].event);
    pthread_mutex_unlock(&log.lock);
  }
  bootstrap_watch_stop(w, BOOTSTRAP_LEAVE_DESTROY);
  EXPECT(bootstrap_close(bs) == ncclSuccess);
  return bad;
}

/* n ranks in processes; the victim may die or stop, which is its success. A stopped victim is
 * killed once the others are done. */
static void run_watch(int n, int victim, watch_action_t action, double max_s) {
  job_t j;
  job_ids(&j, n, 1, false);
  j.victim = victim;
  j.action = action;
  j.max_s = max_s;
  char hex[2 * sizeof(job_t) + 1], rank_s[64][16];
  for (size_t i = 0; i < sizeof(job_t); i++) sprintf(hex + 2 * i, "%02x", ((unsigned char*)&j)[i]);
  pid_t pids[64];
  fflush(NULL);
  for (int r = 0; r < n; r++) {
    snprintf(rank_s[r], sizeof(rank_s[r]), "%d", r);
    if ((pids[r] = fork()) == 0) {
      execl("/proc/self/exe", "test-bootstrap", "--rank", "watch", rank_s[r], hex, (char*)NULL);
      _exit(127);
    }
  }
  const double t0 = now_s();
  for (int r = 0; r < n; r++) {
    if (r == victim) continue;
    int st = 0;
    waitpid(pids[r], &st, 0);
    CHECK_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  int st = 0;
  if (victim >= 0) {
    if (action == WATCH_STOP) kill(pids[victim], SIGKILL);
    waitpid(pids[victim], &st, 0);
    if (action == WATCH_KILL || action == WATCH_STOP)
      CHECK_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    else
      CHECK_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  printf("%d ranks, rank %d action %d: %.0f ms\n", n, victim, (int)action, (now_s() - t0) * 1e3);
  check_roots_end();
}

/* A killed rank is seen at once (its sockets close), by every rank within a second. */
static void case_watch_kill(void) { run_watch(5, 2, WATCH_KILL, 1.0); }
static void case_watch_kill_pair(void) { run_watch(2, 0, WATCH_KILL, 1.0); }
/* A stopped rank: within the timeout (2 s) and one heartbeat interval (0.5 s). */
static void case_watch_stop(void) {
  setenv("CHOIR_PEER_TIMEOUT", "2", 1);
  run_watch(4, 3, WATCH_STOP, 3.0);
}
static void case_watch_goodbyes(void) {
  run_watch(3, 1, WATCH_DESTROY, 1.0);
  run_watch(4, 0, WATCH_ABORT, 1.0);
  run_watch(4, 2, WATCH_EXIT, 1.0);
}
/* Quiet ranks stay alive: 4 s of nothing on the bootstrap with a 2 s timeout (heartbeats every
 * 0.5 s, so a loaded machine has room). */
static void case_watch_quiet(void) {
  setenv("CHOIR_PEER_TIMEOUT", "2", 1);
  run_watch(3, -1, WATCH_NONE, 2.0);
}

/* ---- Groups --------------------------------------------------------------------------------- */

typedef struct {
  const char* name;
  void (*fn)(void);
} case_t;

static const struct {
  const char* group;
  case_t cases[8];
} groups[] = {
    {"procs",
     {{"procs_2", case_procs_2},
      {"procs_8", case_procs_8},
      {"procs_64", case_procs_64},
      {"procs_lo", case_procs_lo},
      {"procs_ipv6", case_procs_ipv6}}},
    {"threads",
     {{"threads", case_threads},
      {"single_rank", case_single_rank},
      {"abort_and_timeout", case_abort_and_timeout},
      {"abort_init", case_abort_init}}},
    {"scalable",
     {{"scalable_8", case_scalable_8},
      {"scalable_64", case_scalable_64},
      {"scalable_all_roots", case_scalable_all_roots}}},
    {"faults",
     {{"root_never_up", case_root_never_up},
      {"root_refused_fast", case_root_refused_fast},
      {"bad_id", case_bad_id},
      {"rank_never_joins", case_rank_never_joins},
      {"rank_never_joins_scalable", case_rank_never_joins_scalable},
      {"peer_dies", case_peer_dies}}},
    {"garbage", {{"garbage_root", case_garbage_root}, {"garbage_rank", case_garbage_rank}}},
    {"commid", {{"comm_id_v4", case_comm_id_v4}, {"comm_id_v6", case_comm_id_v6}}},
    {"watch",
     {{"watch_kill", case_watch_kill},
      {"watch_kill_pair", case_watch_kill_pair},
      {"watch_stop", case_watch_stop},
      {"watch_goodbyes", case_watch_goodbyes},
      {"watch_quiet", case_watch_quiet}}},
};

static rank_fn_t rank_fn_by_name(const char* name) {
  static const struct {
    const char* name;
    rank_fn_t fn;
  } fns[] = {{"job", job_rank},     {"pair", pair_rank},       {"failing", failing_rank},
             {"dying", dying_rank}, {"garbage", garbage_rank}, {"comm_id", comm_id_rank},
             {"watch", watch_rank}};
  for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
    if (strcmp(name, fns[i].name) == 0) return fns[i].fn;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc == 5 && strcmp(argv[1], "--rank") == 0) return rank_main(argv[2], argv[3], argv[4]);
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "20", 1); /* cases that test timeouts set their own */
  const char* group = argc > 1 ? argv[1] : NULL;
  for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
    if (group != NULL && strcmp(group, groups[g].group) != 0) continue;
    for (int c = 0; c < 8 && groups[g].cases[c].name != NULL; c++) {
      double t0 = now_s();
      fork_case(groups[g].cases[c].name, groups[g].cases[c].fn);
      printf("case %s: %.0f ms\n", groups[g].cases[c].name, (now_s() - t0) * 1e3);
    }
  }
  return check_finish(group != NULL ? group : "bootstrap");
}
