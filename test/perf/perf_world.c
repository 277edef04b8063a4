/*
 * Choir perf tools: processes and threads.
 *
 * - perf_world_single: one process.
 * - perf_launch: the built-in launcher for machines without MPI. The parent maps one shared block
 *   (MAP_SHARED | MAP_ANONYMOUS) before forking, so every child inherits it: a robust,
 *   process-shared mutex and condition variable, an arrival counter with a generation number
 *   (the barrier), per-process slots for reductions and gathers, and a broadcast area (the NCCL
 *   unique id). Waits use a timed condition wait and give up as soon as `aborted` is set, which
 *   the parent does when a child exits with an error or is killed, so that no process waits
 *   forever for a peer that is gone.
 * - perf_team: the threads of one process; the last thread to arrive performs the world
 *   operation for all of them.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"

#define PERF_SHM_VALS 8
#define PERF_SHM_BCAST 4096
#define PERF_SHM_GATHER 65536
#define PERF_GRACE_SECONDS 10

/* ---- Single process ---- */

/* CHOIR_TEST_HOSTS=H (H > 1): process p of n poses as host p * H / n (NCCL_HOSTID, as
 * coll_check does), set in the child before the library reads it. Ranks of one machine then
 * talk through the network between the "hosts", and NVIDIA's NCCL accepts processes of
 * different "hosts" that share a GPU. */
static void perf_pose_host(int p, int n) {
  const char* e = getenv("CHOIR_TEST_HOSTS");
  const int hosts = e != NULL ? atoi(e) : 0;
  if (hosts < 2) return;
  char id[64];
  snprintf(id, sizeof id, "perf-host-%d", p * hosts / n);
  setenv("NCCL_HOSTID", id, 1);
}

static int perf_single_allreduce(struct perf_world* w, double* v, int n, int op) {
  (void)w, (void)v, (void)n, (void)op;
  return 0;
}

static int perf_single_bcast(struct perf_world* w, void* buf, size_t len) {
  (void)w, (void)buf, (void)len;
  return 0;
}

static int perf_single_gather(struct perf_world* w, const void* mine, size_t each, void* all) {
  (void)w;
  memcpy(all, mine, each);
  return 0;
}

static void perf_single_fail(struct perf_world* w, int status) { (void)w, (void)status; }

static int perf_single_failed(struct perf_world* w) {
  (void)w;
  return 0;
}

static const struct perf_world_ops perf_single_ops = {
    perf_single_allreduce, perf_single_bcast,  perf_single_gather,
    perf_single_fail,      perf_single_failed,
};

void perf_world_single(struct perf_world* w) {
  w->nprocs = 1;
  w->proc = 0;
  w->local_rank = 0;
  w->local_nprocs = 1;
  w->ops = &perf_single_ops;
  w->impl = NULL;
}

/* ---- Ranks and GPUs ---- */

int perf_world_device(const struct perf_opts* o, int local_rank, int thread, int gpu) {
  int slot = (local_rank * o->nthreads + thread) * o->ngpus + gpu;
  return slot / o->ranks_per_gpu;
}

void perf_world_devices(const struct perf_opts* o, int local_rank, int* first, int* last) {
  *first = perf_world_device(o, local_rank, 0, 0);
  *last = perf_world_device(o, local_rank, o->nthreads - 1, o->ngpus - 1);
}

int perf_world_shares_gpu(const struct perf_opts* o, const struct perf_world* w) {
  /* Slots are consecutive per process: a GPU is shared with a neighbour exactly when a process
   * boundary falls inside a group of ranks_per_gpu slots. */
  int per_proc = o->nthreads * o->ngpus;
  int l = w->local_rank;
  int with_prev = l > 0 && (l * per_proc) % o->ranks_per_gpu != 0;
  int with_next = l + 1 < w->local_nprocs && ((l + 1) * per_proc) % o->ranks_per_gpu != 0;
  return with_prev || with_next;
}

/* ---- Shared-memory world of the launcher ---- */

struct perf_shm {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int nprocs;
  int arrived;
  unsigned generation;
  int aborted;
  double result[PERF_SHM_VALS];
  unsigned char bcast[PERF_SHM_BCAST];
  /* followed by nprocs value slots, then nprocs gather areas */
};

static double* perf_shm_slot(struct perf_shm* s, int proc) {
  return (double*)(s + 1) + (size_t)proc * PERF_SHM_VALS;
}

static unsigned char* perf_shm_area(struct perf_shm* s, int proc) {
  return (unsigned char*)(perf_shm_slot(s, s->nprocs)) + (size_t)proc * PERF_SHM_GATHER;
}

static size_t perf_shm_size(int nprocs) {
  return sizeof(struct perf_shm) +
         (size_t)nprocs * (PERF_SHM_VALS * sizeof(double) + PERF_SHM_GATHER);
}

static void perf_shm_lock(struct perf_shm* s) {
  if (pthread_mutex_lock(&s->mu) == EOWNERDEAD) {
    /* A process died inside the critical section: the state may be half-updated. */
    s->aborted = 1;
    pthread_mutex_consistent(&s->mu);
  }
}

/* Barrier under the lock. `last` runs in the process that arrives last, before anyone leaves.
 * Returns -1 when the world was aborted. */
static int perf_shm_barrier(struct perf_shm* s, void (*last)(struct perf_shm*, void*), void* arg) {
  unsigned gen = s->generation;
  if (s->aborted) return -1;
  if (++s->arrived == s->nprocs) {
    if (last) last(s, arg);
    s->arrived = 0;
    s->generation++;
    pthread_cond_broadcast(&s->cv);
    return 0;
  }
  while (s->generation == gen) {
    struct timespec ts;
    if (s->aborted) return -1;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 200 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) == EOWNERDEAD) {
      s->aborted = 1;
      pthread_mutex_consistent(&s->mu);
    }
  }
  return 0;
}

struct perf_shm_red {
  int n, op;
};

static void perf_shm_combine(struct perf_shm* s, void* arg) {
  const struct perf_shm_red* r = arg;
  for (int i = 0; i < r->n; i++) {
    double acc = perf_shm_slot(s, 0)[i];
    for (int p = 1; p < s->nprocs; p++) {
      double v = perf_shm_slot(s, p)[i];
      if (r->op == PERF_RED_SUM)
        acc += v;
      else if (r->op == PERF_RED_MIN)
        acc = v < acc ? v : acc;
      else
        acc = v > acc ? v : acc;
    }
    s->result[i] = acc;
  }
}

static int perf_shm_allreduce(struct perf_world* w, double* v, int n, int op) {
  struct perf_shm* s = w->impl;
  struct perf_shm_red r = {n, op};
  int rc;
  if (n > PERF_SHM_VALS) return -1;
  if (n > 0) memcpy(perf_shm_slot(s, w->proc), v, (size_t)n * sizeof(double));
  perf_shm_lock(s);
  rc = perf_shm_barrier(s, perf_shm_combine, &r);
  if (rc == 0 && n > 0) memcpy(v, s->result, (size_t)n * sizeof(double));
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int perf_shm_bcast(struct perf_world* w, void* buf, size_t len) {
  struct perf_shm* s = w->impl;
  int rc;
  if (len > PERF_SHM_BCAST) return -1;
  perf_shm_lock(s);
  if (w->proc == 0) memcpy(s->bcast, buf, len);
  rc = perf_shm_barrier(s, NULL, NULL);
  if (rc == 0 && w->proc != 0) memcpy(buf, s->bcast, len);
  /* Nobody may overwrite the area before everyone has read it. */
  if (rc == 0) rc = perf_shm_barrier(s, NULL, NULL);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static int perf_shm_gather(struct perf_world* w, const void* mine, size_t each, void* all) {
  struct perf_shm* s = w->impl;
  int rc;
  if (each > PERF_SHM_GATHER) return -1;
  memcpy(perf_shm_area(s, w->proc), mine, each);
  perf_shm_lock(s);
  rc = perf_shm_barrier(s, NULL, NULL);
  if (rc == 0 && w->proc == 0)
    for (int p = 0; p < s->nprocs; p++)
      memcpy((char*)all + (size_t)p * each, perf_shm_area(s, p), each);
  if (rc == 0) rc = perf_shm_barrier(s, NULL, NULL);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

static void perf_shm_abort(struct perf_shm* s) {
  perf_shm_lock(s);
  s->aborted = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static void perf_shm_fail(struct perf_world* w, int status) {
  (void)status;
  perf_shm_abort(w->impl);
}

static int perf_shm_failed(struct perf_world* w) {
  const volatile struct perf_shm* s = w->impl;
  return s->aborted; /* a racy read is fine: it only ever goes from 0 to 1 */
}

static const struct perf_world_ops perf_shm_ops = {
    perf_shm_allreduce, perf_shm_bcast, perf_shm_gather, perf_shm_fail, perf_shm_failed,
};

static int perf_shm_init(struct perf_shm* s, int nprocs) {
  pthread_mutexattr_t ma;
  pthread_condattr_t ca;
  memset(s, 0, sizeof *s);
  s->nprocs = nprocs;
  if (pthread_mutexattr_init(&ma)) return -1;
  pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
  int rc = pthread_mutex_init(&s->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  if (rc) return -1;
  if (pthread_condattr_init(&ca)) goto err_destroy_mutex;
  pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  rc = pthread_cond_init(&s->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc) goto err_destroy_mutex;
  return 0;

err_destroy_mutex:
  pthread_mutex_destroy(&s->mu);
  return -1;
}

static double perf_mono(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void perf_report_child(int proc, pid_t pid, int status) {
  if (WIFSIGNALED(status))
    fprintf(stderr, "perf launcher: process %d (pid %d) was killed by signal %d (%s)\n", proc,
            (int)pid, WTERMSIG(status), strsignal(WTERMSIG(status)));
}

int perf_launch(int nprocs, int (*fn)(struct perf_world* w, void* arg), void* arg) {
  size_t len = perf_shm_size(nprocs);
  struct perf_shm* s;
  pid_t* pids;
  int* done;
  pid_t parent = getpid();
  int result = 0, remaining = 0, stopping = 0;
  double deadline = 0.0;

  pids = calloc((size_t)nprocs, sizeof *pids);
  done = calloc((size_t)nprocs, sizeof *done);
  if (!pids || !done) {
    fprintf(stderr, "perf launcher: out of memory\n");
    result = PERF_EXIT_ERROR;
    goto out_free;
  }
  s = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) {
    fprintf(stderr, "perf launcher: mmap of %zu bytes failed: %s\n", len, strerror(errno));
    result = PERF_EXIT_ERROR;
    goto out_free;
  }
  if (perf_shm_init(s, nprocs)) {
    fprintf(stderr, "perf launcher: cannot create the process-shared mutex\n");
    result = PERF_EXIT_ERROR;
    goto out_unmap;
  }
  fflush(stdout);
  fflush(stderr);
  for (int p = 0; p < nprocs; p++) {
    pid_t pid = fork();
    if (pid == 0) {
      struct perf_world w = {nprocs, p, p, nprocs, &perf_shm_ops, s};
      /* Die with the launcher rather than run on alone. */
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(PERF_EXIT_ABORTED);
      perf_pose_host(p, nprocs);
      int rc = fn(&w, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(rc);
    }
    if (pid < 0) {
      fprintf(stderr, "perf launcher: fork of process %d failed: %s\n", p, strerror(errno));
      result = PERF_EXIT_ERROR;
      perf_shm_abort(s);
      stopping = 1;
      deadline = perf_mono() + PERF_GRACE_SECONDS;
      break;
    }
    pids[p] = pid;
    remaining++;
  }

  while (remaining > 0) {
    int status;
    pid_t pid = waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid == 0) {
      if (perf_mono() > deadline) {
        for (int p = 0; p < nprocs; p++)
          if (pids[p] && !done[p]) {
            fprintf(stderr, "perf launcher: process %d (pid %d) did not stop; killing it\n", p,
                    (int)pids[p]);
            kill(pids[p], SIGKILL);
          }
        deadline = perf_mono() + 3600.0; /* SIGKILL cannot be ignored: just reap */
      }
      usleep(50 * 1000);
      continue;
    }
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int p = 0;
    while (p < nprocs && pids[p] != pid) p++;
    if (p == nprocs) continue;
    done[p] = 1;
    remaining--;
    perf_report_child(p, pid, status);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : PERF_EXIT_ERROR;
    if (code != 0 && code != PERF_EXIT_ABORTED && result == 0) result = code;
    if (code != 0 && !stopping && remaining > 0) {
      if (WIFSIGNALED(status))
        fprintf(stderr, "perf launcher: stopping the other processes\n");
      else if (code != PERF_EXIT_SKIP)
        fprintf(stderr, "perf launcher: process %d exited with status %d; stopping the others\n", p,
                code);
      perf_shm_abort(s);
      stopping = 1;
      deadline = perf_mono() + PERF_GRACE_SECONDS;
    }
  }
  if (result == 0) {
    /* Only aborted children (the failing one vanished without a status we could read). */
    for (int p = 0; p < nprocs; p++)
      if (!done[p]) result = PERF_EXIT_ERROR;
  }
  pthread_cond_destroy(&s->cv);
  pthread_mutex_destroy(&s->mu);
out_unmap:
  munmap(s, len);
out_free:
  free(done);
  free(pids);
  return result;
}

/* ---- Thread team ---- */

struct perf_team {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int nthreads;
  int arrived;
  unsigned generation;
  int failed;
  double acc[PERF_SHM_VALS];
  double result[PERF_SHM_VALS];
  struct perf_world* w;
};

struct perf_team* perf_team_create(int nthreads, struct perf_world* w) {
  struct perf_team* t = calloc(1, sizeof *t);
  if (!t) return NULL;
  if (pthread_mutex_init(&t->mu, NULL)) goto err_free;
  if (pthread_cond_init(&t->cv, NULL)) goto err_destroy_mutex;
  t->nthreads = nthreads;
  t->w = w;
  return t;

err_destroy_mutex:
  pthread_mutex_destroy(&t->mu);
err_free:
  free(t);
  return NULL;
}

void perf_team_destroy(struct perf_team* t) {
  if (!t) return;
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

int perf_team_allreduce(struct perf_team* t, double* v, int n, int op) {
  int rc;
  if (n > PERF_SHM_VALS) return -1;
  pthread_mutex_lock(&t->mu);
  for (int i = 0; i < n; i++) {
    if (t->arrived == 0)
      t->acc[i] = v[i];
    else if (op == PERF_RED_SUM)
      t->acc[i] += v[i];
    else if (op == PERF_RED_MIN)
      t->acc[i] = v[i] < t->acc[i] ? v[i] : t->acc[i];
    else
      t->acc[i] = v[i] > t->acc[i] ? v[i] : t->acc[i];
  }
  unsigned gen = t->generation;
  if (++t->arrived == t->nthreads) {
    if (!t->failed && t->w->ops->allreduce(t->w, t->acc, n, op)) t->failed = 1;
    memcpy(t->result, t->acc, (size_t)n * sizeof(double));
    t->arrived = 0;
    t->generation++;
    pthread_cond_broadcast(&t->cv);
  } else {
    while (t->generation == gen) pthread_cond_wait(&t->cv, &t->mu);
  }
  rc = t->failed ? -1 : 0;
  if (n > 0) memcpy(v, t->result, (size_t)n * sizeof(double));
  pthread_mutex_unlock(&t->mu);
  return rc;
}
