/*
 * Unit test of the perf tools' processes and threads (perf_world.c): the fork launcher's
 * shared-memory reductions, broadcast and gather, thread teams on top of it, and what happens
 * when a process fails, is killed or skips.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "perf.h"


#define NTHREADS 3
#define ROUNDS 300

struct team_arg {
  struct perf_team* team;
  struct perf_world* w;
  int thread;
  int bad;
};

static void* team_thread(void* p) {
  struct team_arg* a = p;
  int total = a->w->nprocs * NTHREADS;
  for (int r = 0; r < ROUNDS; r++) {
    int me = a->w->proc * NTHREADS + a->thread;
    double v[3] = {1.0, (double)me, (double)(me + r)};
    if (perf_team_allreduce(a->team, v, 3, PERF_RED_SUM)) a->bad++;
    if (v[0] != total || v[1] != total * (total - 1) / 2.0 ||
        v[2] != total * (total - 1) / 2.0 + (double)total * r)
      a->bad++;
    double m = me;
    if (perf_team_allreduce(a->team, &m, 1, r & 1 ? PERF_RED_MAX : PERF_RED_MIN)) a->bad++;
    if (m != (r & 1 ? total - 1 : 0)) a->bad++;
    if (perf_team_allreduce(a->team, NULL, 0, PERF_RED_SUM)) a->bad++;
  }
  return NULL;
}

/* Every process checks the collective operations; returns the number of wrong results. */
static int child_basic(struct perf_world* w, void* arg) {
  int bad = 0, n = w->nprocs;
  (void)arg;
  for (int r = 0; r < ROUNDS; r++) {
    double v[2] = {(double)w->proc, 1.0};
    if (w->ops->allreduce(w, v, 2, PERF_RED_SUM) || v[0] != n * (n - 1) / 2.0 || v[1] != n) bad++;
    double mn = w->proc + r, mx = w->proc + r;
    if (w->ops->allreduce(w, &mn, 1, PERF_RED_MIN) || mn != r) bad++;
    if (w->ops->allreduce(w, &mx, 1, PERF_RED_MAX) || mx != n - 1 + r) bad++;
  }
  char msg[64] = "";
  if (w->proc == 0) snprintf(msg, sizeof msg, "unique id %d", 1234);
  if (w->ops->bcast(w, msg, sizeof msg) || strcmp(msg, "unique id 1234")) bad++;
  int mine[2] = {w->proc, w->proc * 10}, all[2 * 8];
  if (w->ops->gather(w, mine, sizeof mine, all)) bad++;
  if (w->proc == 0)
    for (int p = 0; p < n; p++)
      if (all[2 * p] != p || all[2 * p + 1] != 10 * p) bad++;
  if (w->local_rank != w->proc || w->local_nprocs != n) bad++;

  struct perf_team* t = perf_team_create(NTHREADS, w);
  struct team_arg a[NTHREADS];
  pthread_t tid[NTHREADS];
  for (int i = 0; i < NTHREADS; i++) {
    a[i] = (struct team_arg){t, w, i, 0};
    pthread_create(&tid[i], NULL, team_thread, &a[i]);
  }
  for (int i = 0; i < NTHREADS; i++) {
    pthread_join(tid[i], NULL);
    bad += a[i].bad;
  }
  perf_team_destroy(t);
  return bad ? 1 : 0;
}

/* Process 2 fails at once; the others must leave their barriers instead of waiting for ever. */
static int child_one_fails(struct perf_world* w, void* arg) {
  (void)arg;
  if (w->proc == 2) return PERF_EXIT_ERROR;
  for (int r = 0; r < 1000000; r++)
    if (w->ops->allreduce(w, NULL, 0, PERF_RED_SUM)) return PERF_EXIT_ABORTED;
  return 0; /* never reached: process 2 does not arrive */
}

static int child_killed(struct perf_world* w, void* arg) {
  (void)arg;
  if (w->proc == 1) raise(SIGKILL);
  double v = 1;
  while (!w->ops->allreduce(w, &v, 1, PERF_RED_SUM)) {
  }
  return PERF_EXIT_ABORTED;
}

static int child_skip(struct perf_world* w, void* arg) {
  int* mode = arg;
  if (*mode == 0 || w->proc == 0) return PERF_EXIT_SKIP;
  /* Only process 0 skipped: the others wait for it in vain. */
  return w->ops->allreduce(w, NULL, 0, PERF_RED_SUM) ? PERF_EXIT_ABORTED : 0;
}

static int child_wrong(struct perf_world* w, void* arg) {
  (void)arg;
  if (w->ops->allreduce(w, NULL, 0, PERF_RED_SUM)) return PERF_EXIT_ABORTED;
  return w->proc == 3 ? PERF_EXIT_WRONG : 0;
}

static int child_failed_flag(struct perf_world* w, void* arg) {
  (void)arg;
  if (w->proc == 0) {
    /* Only process 0 raises the flag, so only it can check that the flag starts clear: another
     * process may start after the flag went up (that made this test flaky). */
    if (w->ops->failed(w)) return 10;
    w->ops->fail(w, PERF_EXIT_ERROR);
    return PERF_EXIT_ERROR;
  }
  /* The others see the flag without any barrier (this is what perf_wait polls). */
  for (int i = 0; i < 2000 && !w->ops->failed(w); i++) usleep(1000);
  return w->ops->failed(w) ? PERF_EXIT_ABORTED : 11;
}

/* Local rank slot i on device i / R, and which processes share a GPU (they need MPS). */
static void test_devices(void) {
  struct perf_opts o;
  memset(&o, 0, sizeof o);
  o.nthreads = 1, o.ngpus = 4, o.ranks_per_gpu = 4; /* -g 4 --ranks-per-gpu 4 */
  for (int g = 0; g < 4; g++)
    CHECK_MSG(perf_world_device(&o, 0, 0, g) == 0, "-g 4 --rpg 4: rank %d on GPU 0", g);
  int first, last;
  perf_world_devices(&o, 0, &first, &last);
  CHECK_MSG(first == 0 && last == 0, "-g 4 --rpg 4: devices %d..%d", first, last);
  struct perf_world w = {1, 0, 0, 1, NULL, NULL};
  CHECK_MSG(!perf_world_shares_gpu(&o, &w), "one process shares with nobody");

  o.ngpus = 1; /* -p 4 --ranks-per-gpu 4: every process on GPU 0, each shares it */
  for (int p = 0; p < 4; p++) {
    struct perf_world wp = {4, p, p, 4, NULL, NULL};
    CHECK_MSG(perf_world_device(&o, p, 0, 0) == 0, "-p 4 --rpg 4: process %d on GPU 0", p);
    CHECK_MSG(perf_world_shares_gpu(&o, &wp), "-p 4 --rpg 4: process %d shares GPU 0", p);
  }

  o.nthreads = 2, o.ngpus = 2; /* -t 2 -g 2 --ranks-per-gpu 4: four ranks of two threads, GPU 0 */
  for (int t = 0; t < 2; t++)
    for (int g = 0; g < 2; g++)
      CHECK_MSG(perf_world_device(&o, 0, t, g) == 0, "-t 2 -g 2 --rpg 4: thread %d gpu %d", t, g);
  /* ... and with -p 2, the second process's four ranks on GPU 1: no GPU shared between them. */
  struct perf_world w0 = {2, 0, 0, 2, NULL, NULL}, w1 = {2, 1, 1, 2, NULL, NULL};
  CHECK_MSG(perf_world_device(&o, 1, 0, 0) == 1 && perf_world_device(&o, 1, 1, 1) == 1,
            "-p 2 -t 2 -g 2 --rpg 4: process 1 on GPU 1");
  CHECK_MSG(!perf_world_shares_gpu(&o, &w0) && !perf_world_shares_gpu(&o, &w1),
            "-p 2 -t 2 -g 2 --rpg 4: no process shares a GPU");

  o.nthreads = 1, o.ngpus = 3, o.ranks_per_gpu = 2; /* -p 2 -g 3 --rpg 2: slots 0..5 */
  static const int want[2][3] = {{0, 0, 1}, {1, 2, 2}};
  for (int p = 0; p < 2; p++)
    for (int g = 0; g < 3; g++)
      CHECK_MSG(perf_world_device(&o, p, 0, g) == want[p][g], "-p 2 -g 3 --rpg 2: process %d gpu %d",
                p, g);
  perf_world_devices(&o, 1, &first, &last);
  CHECK_MSG(first == 1 && last == 2, "-p 2 -g 3 --rpg 2: process 1 on devices %d..%d", first, last);
  CHECK_MSG(perf_world_shares_gpu(&o, &w0) && perf_world_shares_gpu(&o, &w1),
            "-p 2 -g 3 --rpg 2: GPU 1 is shared by both processes");
  /* The last process on a host shares nothing after it; MPI: processes count per host. */
  struct perf_world alone = {8, 5, 0, 1, NULL, NULL};
  CHECK_MSG(!perf_world_shares_gpu(&o, &alone), "one process per host shares no GPU");

  o.ngpus = 2, o.ranks_per_gpu = 1; /* one GPU per rank, as before: process p from p * g on */
  CHECK_MSG(perf_world_device(&o, 3, 0, 1) == 7, "-p 4 -g 2: process 3's second GPU is 7");
  struct perf_world w3 = {4, 3, 3, 4, NULL, NULL};
  CHECK_MSG(!perf_world_shares_gpu(&o, &w3), "one rank per GPU shares nothing");
}

int main(void) {
  alarm(120); /* a hang is a failure, not a stuck CI job */
  test_devices();
  CHECK_MSG(perf_launch(4, child_basic, NULL) == 0, "four processes agree");
  CHECK_MSG(perf_launch(1, child_basic, NULL) == 0, "one process");
  CHECK_MSG(perf_launch(4, child_one_fails, NULL) == PERF_EXIT_ERROR,
        "a failing process fails the run and releases the others");
  CHECK_MSG(perf_launch(3, child_killed, NULL) == PERF_EXIT_ERROR, "a killed process fails the run");
  int all = 0, one = 1;
  CHECK_MSG(perf_launch(3, child_skip, &all) == PERF_EXIT_SKIP, "all skip: skipped");
  CHECK_MSG(perf_launch(3, child_skip, &one) == PERF_EXIT_SKIP, "one skips: skipped, nobody hangs");
  CHECK_MSG(perf_launch(4, child_wrong, NULL) == PERF_EXIT_WRONG, "wrong results propagate");
  CHECK_MSG(perf_launch(3, child_failed_flag, NULL) == PERF_EXIT_ERROR,
        "fail() is visible to failed()");

  struct perf_world w;
  perf_world_single(&w);
  CHECK_MSG(child_basic(&w, NULL) == 0, "single world");
  CHECK_MSG(w.ops->failed(&w) == 0, "single world never fails");
  return check_finish("perf-world");
}
