/*
 * Bootstrap misuse (issue 17): two processes or threads claiming the same rank number. The
 * rendezvous can never complete, so every rank must fail within seconds with
 * ncclInvalidUsage and a message naming the rank claimed twice: the ranks that joined are told
 * at once, the second claimant is refused, and ranks that come later are refused with the same
 * reason. Before the fix only the second claimant heard of it; every other rank waited the whole
 * bootstrap timeout.
 *
 *   test-bootstrap-misuse [CASE]   CASE: threads, late, procs, scalable, scalable_gather
 *                                  (default: all)
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap_internal.h"
#include "fork_case.h"

/* A bootstrap timeout of 10 s (main): "at once" is well below it. */
#define QUICK_S 4.0

static double now_s(void) { return (double)sock_clock_ns() / 1e9; }

typedef struct {
  const ncclUniqueId* ids;
  int nids, rank, nranks;
  ncclResult_t res;
  double secs;
  char msg[1024];
} claim_t;

static void* claim_thread(void* p) {
  claim_t* c = (claim_t*)p;
  bootstrap_t* bs = NULL;
  double t0 = now_s();
  c->res = bootstrap_init(c->ids, c->nids, c->rank, c->nranks, NULL, &bs);
  c->secs = now_s() - t0;
  snprintf(c->msg, sizeof(c->msg), "%s", err_last());
  if (bs != NULL) bootstrap_close(bs);
  return NULL;
}

/* Claim `ranks` (n of them) at once, each from a thread; every claim must fail quickly with
 * ncclInvalidUsage and a message containing want[i] (want[i] NULL: `want_all`). */
static void claim_all(const ncclUniqueId* ids, int nids, int nranks, const int* ranks, int n,
                      const char* want_all, const char* const* want) {
  claim_t c[16];
  pthread_t t[16];
  for (int i = 0; i < n; i++) {
    c[i] = (claim_t){ids, nids, ranks[i], nranks, ncclSuccess, 0, ""};
    pthread_create(&t[i], NULL, claim_thread, &c[i]);
  }
  for (int i = 0; i < n; i++) {
    pthread_join(t[i], NULL);
    const char* w = want != NULL && want[i] != NULL ? want[i] : want_all;
    CHECK_MSG(c[i].res != ncclSuccess, "claim %d (rank %d) succeeded", i, c[i].rank);
    CHECK_MSG(c[i].secs < QUICK_S, "claim %d (rank %d) failed after %.1f s", i, c[i].rank,
              c[i].secs);
    CHECK_MSG(strstr(c[i].msg, w) != NULL, "claim %d (rank %d): \"%s\" does not contain \"%s\"", i,
              c[i].rank, c[i].msg, w);
    if (want == NULL || want[i] == NULL) CHECK_EQ_INT(c[i].res, ncclInvalidUsage);
  }
}

/* The root service ends once every rank of its group was told (bounded wait). */
static void check_roots_end(void) {
  double t0 = now_s();
  while (bootstrap_roots_running() > 0 && now_s() - t0 < QUICK_S) usleep(5000);
  CHECK_EQ_INT(bootstrap_roots_running(), 0);
}

/* Ranks 0, 0 and 1 of 3, as threads: rank 2 never comes, so the rendezvous cannot complete
 * before the second claim of rank 0 arrives. */
static void case_threads(void) {
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  const int ranks[] = {0, 0, 1};
  claim_all(&id, 1, 3, ranks, 3, "rank 0 of 3 was claimed twice", NULL);
}

/* After the failure, a rank that comes late is refused at once with the same reason; once every
 * rank has been told, the root service ends. */
static void case_late(void) {
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  const int first[] = {2, 2, 0};
  claim_all(&id, 1, 4, first, 3, "rank 2 of 4 was claimed twice", NULL);
  const int late[] = {1, 3};
  claim_all(&id, 1, 4, late, 2, "rank 2 of 4 was claimed twice", NULL);
  check_roots_end();
}

/* Processes: each claim a process of its own (fork, then exec this program at once, as the
 * bootstrap tests do: the root service thread of this process must not be forked). */
static int proc_main(const char* rank_s, const char* hex) {
  ncclUniqueId id;
  for (size_t i = 0; i < sizeof(id); i++)
    sscanf(hex + 2 * i, "%2hhx", (unsigned char*)&id.internal[i]);
  alarm(30);
  claim_t c = {&id, 1, atoi(rank_s), 3, ncclSuccess, 0, ""};
  claim_thread(&c);
  int ok = c.res == ncclInvalidUsage && c.secs < QUICK_S &&
           strstr(c.msg, "rank 1 of 3 was claimed twice") != NULL;
  if (!ok)
    fprintf(stderr, "[pid %d rank %d] result %d after %.1f s: %s\n", (int)getpid(), c.rank,
            (int)c.res, c.secs, c.msg);
  return ok ? 0 : 1;
}

static void case_procs(void) {
  ncclUniqueId id;
  CHECK_EQ_INT(bootstrap_get_unique_id(&id), ncclSuccess);
  char hex[2 * sizeof(id) + 1];
  for (size_t i = 0; i < sizeof(id); i++)
    sprintf(hex + 2 * i, "%02x", (unsigned char)id.internal[i]);
  const char* ranks[] = {"1", "1", "0"};
  pid_t pids[3];
  fflush(NULL);
  for (int i = 0; i < 3; i++) {
    pids[i] = fork();
    if (pids[i] == 0) {
      execl("/proc/self/exe", "test-bootstrap-misuse", "--claim", ranks[i], hex, (char*)NULL);
      _exit(127);
    }
  }
  for (int i = 0; i < 3; i++) {
    int st = 0;
    waitpid(pids[i], &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "process %d (rank %s): status 0x%x", i,
              ranks[i], st);
  }
}

/* Two roots: the root of the claimed rank tells its ranks why, and the next root of the ring,
 * which tells its own. Here root 1 has all its ranks (2 and 3) and waits in the exchange between
 * the roots when it hears; in scalable_gather rank 3 never comes, so root 1 is still gathering. */
static void case_scalable(void) {
  ncclUniqueId ids[2];
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(bootstrap_get_unique_id(&ids[i]), ncclSuccess);
  const int ranks[] = {0, 0, 2, 3};
  claim_all(ids, 2, 4, ranks, 4, "rank 0 of 4 was claimed twice", NULL);
}

static void case_scalable_gather(void) {
  ncclUniqueId ids[2];
  for (int i = 0; i < 2; i++) CHECK_EQ_INT(bootstrap_get_unique_id(&ids[i]), ncclSuccess);
  const int ranks[] = {0, 0, 2};
  claim_all(ids, 2, 4, ranks, 3, "rank 0 of 4 was claimed twice", NULL);
}

static const struct {
  const char* name;
  void (*fn)(void);
} cases[] = {
    {"threads", case_threads},
    {"late", case_late},
    {"procs", case_procs},
    {"scalable", case_scalable},
    {"scalable_gather", case_scalable_gather},
};

int main(int argc, char** argv) {
  if (argc == 4 && strcmp(argv[1], "--claim") == 0) return proc_main(argv[2], argv[3]);
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "10", 1);
  const char* only = argc > 1 ? argv[1] : NULL;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (only != NULL && strcmp(only, cases[i].name) != 0) continue;
    double t0 = now_s();
    fork_case(cases[i].name, cases[i].fn);
    printf("case %s: %.0f ms\n", cases[i].name, (now_s() - t0) * 1e3);
  }
  return check_finish("bootstrap-misuse");
}
