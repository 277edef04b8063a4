/*
 * The LL step rule of the direct connections (kernels.h: kern_ll_flag, kern_ll_line_at,
 * kern_ll_room), on host threads: n ranks run many OneShot calls back to back over connections
 * whose counters persist between calls, as kern_direct.cuh's open / room / put / poll / advance /
 * close do on the GPU (the step arithmetic is the kernel's own; the sequence around it is written
 * here after the kernel's). Calls span one or several steps; the sizes of a short sequence repeat,
 * as the replays of a CUDA graph do; ranks drift apart (yields at random points), so a slot is
 * often rewritten while a slower rank has not read it yet, and a line left by an earlier call
 * sits in the slot a later call polls. Every reduced value is checked: a stale line taken for a
 * current one would give a wrong sum. The same run with counters that restart at every call (an
 * epoch that does not carry over) must fail, so the check can catch what it is for.
 *
 *   test-ll-epochs
 */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "kernels.h"

#define RANKS_MAX 4
#define SLOT_BYTES 256 /* 16 lines of 16 bytes: 16 lines per step (8 data bytes each) */
#define CALLS 400
#define GRAPH_LEN 5     /* the repeating sequence of sizes */
#define GIVE_UP_SECONDS 20.0 /* a wait this long is a stuck rank (a correct run never waits it) */

/* One ordered pair's connection: the receiver's buffer and head, the two ends' counters. */
typedef struct {
  uint64_t buf[KERN_NSLOTS * SLOT_BYTES / 8]; /* 8-byte words: {x, flag} {y, flag} per line */
  uint64_t head;                              /* steps the receiver has read (atomic) */
  uint64_t sstep, head_seen;                  /* the send end's kern_conn_t fields */
  uint64_t rstep;                             /* the receive end's */
} conn_t;

typedef struct {
  int n;
  int carry; /* 1: counters carry over between calls (the rule); 0: they restart (broken) */
  conn_t conn[RANKS_MAX][RANKS_MAX]; /* [from][to] */
  long wrong[RANKS_MAX], stuck[RANKS_MAX];
} world_t;

typedef struct {
  world_t* w;
  int rank;
} arg_t;

static uint32_t value_of(int rank, int call, uint64_t line) {
  uint32_t v = (uint32_t)rank * 2654435761u ^ (uint32_t)call * 40503u ^ (uint32_t)line * 97u;
  return v ^ (v >> 13);
}

/* Lines of call c: the graph's sequence of sizes, 1 to 70 lines (up to 5 steps). */
static uint64_t lines_of(int call) {
  static const uint64_t seq[GRAPH_LEN] = {1, 16, 17, 70, 3};
  return seq[call % GRAPH_LEN];
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A spin of a wait that began at t0: yields now and then; 0 once GIVE_UP_SECONDS have passed. */
static int spin_on(long* spins, double t0) {
  if (++*spins % 64 == 0) sched_yield();
  return *spins % 4096 != 0 || now_s() - t0 < GIVE_UP_SECONDS;
}

static void maybe_yield(unsigned* seed) {
  if (rand_r(seed) % 4 == 0) sched_yield();
}

/* Poll one half-line (8 bytes: data, flag) until its flag is f; 0 when it never comes. */
static int poll_half(const uint64_t* at, uint32_t f, uint32_t* data) {
  const double t0 = now_s();
  long spins = 0;
  do {
    const uint64_t v = __atomic_load_n(at, __ATOMIC_ACQUIRE);
    if ((uint32_t)(v >> 32) == f) {
      *data = (uint32_t)v;
      return 1;
    }
  } while (spin_on(&spins, t0));
  return 0;
}

static void* rank_main(void* p) {
  const arg_t* a = (const arg_t*)p;
  world_t* w = a->w;
  const int me = a->rank, n = w->n;
  unsigned seed = 1234u + (unsigned)me;
  const uint64_t cap_lines = kern_proto_step_capacity(KERN_PROTO_LL, SLOT_BYTES) / 8;
  for (int call = 0; call < CALLS; call++) {
    /* open: each end's counters as the last kernel left them (or restarted: the broken mode) */
    uint64_t sstep[RANKS_MAX], head_seen[RANKS_MAX], rstep[RANKS_MAX];
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      conn_t* s = &w->conn[me][q];
      conn_t* r = &w->conn[q][me];
      sstep[q] = w->carry ? s->sstep : 0;
      head_seen[q] = w->carry ? s->head_seen : 0;
      rstep[q] = w->carry ? r->rstep : 0;
    }
    const uint64_t total = lines_of(call);
    for (uint64_t base = 0; base < total; base += cap_lines) {
      const uint64_t nl = total - base < cap_lines ? total - base : cap_lines;
      /* room on every send end */
      for (int q = 0; q < n; q++) {
        if (q == me) continue;
        conn_t* s = &w->conn[me][q];
        const double t0 = now_s();
        long spins = 0;
        while (!kern_ll_room(head_seen[q], sstep[q], 1)) {
          head_seen[q] = __atomic_load_n(&s->head, __ATOMIC_ACQUIRE);
          if (!spin_on(&spins, t0)) {
            w->stuck[me]++;
            return NULL;
          }
        }
      }
      maybe_yield(&seed);
      /* put: this rank's lines into every peer's buffer, each half with its flag */
      for (uint64_t l = 0; l < nl; l++) {
        const uint32_t x = value_of(me, call, base + l), y = ~x;
        for (int q = 0; q < n; q++) {
          if (q == me) continue;
          conn_t* s = &w->conn[me][q];
          const uint32_t f = kern_ll_flag(sstep[q]);
          uint64_t* at = &s->buf[kern_ll_line_at(sstep[q], SLOT_BYTES, l) / 8];
          __atomic_store_n(&at[0], (uint64_t)f << 32 | x, __ATOMIC_RELEASE);
          __atomic_store_n(&at[1], (uint64_t)f << 32 | y, __ATOMIC_RELEASE);
        }
      }
      maybe_yield(&seed);
      /* poll: every peer's lines of this step; the sums must be the call's */
      for (uint64_t l = 0; l < nl; l++) {
        uint32_t sx = value_of(me, call, base + l), sy = ~sx, want = sx;
        for (int q = 0; q < n; q++) {
          if (q == me) continue;
          const conn_t* r = &w->conn[q][me];
          const uint32_t f = kern_ll_flag(rstep[q]);
          const uint64_t* at = &r->buf[kern_ll_line_at(rstep[q], SLOT_BYTES, l) / 8];
          uint32_t x, y;
          if (!poll_half(&at[0], f, &x) || !poll_half(&at[1], f, &y)) {
            w->stuck[me]++;
            return NULL;
          }
          sx += x;
          sy += y;
          want += value_of(q, call, base + l);
        }
        uint32_t want_y = 0;
        for (int q = 0; q < n; q++) want_y += ~value_of(q, call, base + l);
        if (sx != want || sy != want_y) w->wrong[me]++;
      }
      /* advance: every line read, publish head; both ends move a step */
      for (int q = 0; q < n; q++) {
        if (q == me) continue;
        __atomic_store_n(&w->conn[q][me].head, rstep[q] + 1, __ATOMIC_RELEASE);
        rstep[q]++;
        sstep[q]++;
      }
    }
    /* close: the counters for the next kernel */
    for (int q = 0; q < n; q++) {
      if (q == me) continue;
      w->conn[me][q].sstep = sstep[q];
      w->conn[me][q].head_seen = head_seen[q];
      w->conn[q][me].rstep = rstep[q];
    }
  }
  return NULL;
}

/* Runs n ranks over fresh connections; the wrong sums and stuck ranks of all ranks. */
static void run(int n, int carry, long* wrong, long* stuck) {
  static world_t w;
  memset(&w, 0, sizeof(w));
  w.n = n;
  w.carry = carry;
  pthread_t th[RANKS_MAX];
  arg_t args[RANKS_MAX];
  for (int r = 0; r < n; r++) {
    args[r] = (arg_t){&w, r};
    pthread_create(&th[r], NULL, rank_main, &args[r]);
  }
  for (int r = 0; r < n; r++) pthread_join(th[r], NULL);
  *wrong = *stuck = 0;
  for (int r = 0; r < n; r++) {
    *wrong += w.wrong[r];
    *stuck += w.stuck[r];
  }
}

int main(void) {
  /* The rule's arithmetic: slots cycle, flags follow the step, room is KERN_NSLOTS steps. */
  CHECK_EQ_INT((int)kern_ll_flag(0), 1);
  CHECK_TRUE(kern_ll_flag(KERN_NSLOTS) != kern_ll_flag(0));
  CHECK_TRUE(kern_ll_line_at(KERN_NSLOTS + 2, SLOT_BYTES, 3) == kern_ll_line_at(2, SLOT_BYTES, 3));
  CHECK_TRUE(kern_ll_line_at(1, SLOT_BYTES, 0) == SLOT_BYTES);
  CHECK_TRUE(kern_ll_room(0, KERN_NSLOTS - 1, 1) && !kern_ll_room(0, KERN_NSLOTS, 1));
  CHECK_TRUE(kern_ll_room(5, 5 + KERN_NSLOTS - 2, 2) && !kern_ll_room(5, 5 + KERN_NSLOTS - 1, 2));
  /* Back-to-back calls and replays over carried counters: every sum right, nobody stuck. */
  for (int n = 2; n <= RANKS_MAX; n++) {
    long wrong, stuck;
    run(n, 1, &wrong, &stuck);
    CHECK_MSG(wrong == 0 && stuck == 0, "%d ranks, %d calls: %ld wrong sums, %ld stuck ranks", n,
              CALLS, wrong, stuck);
  }
  /* Counters that restart with every call: a line of the previous call has the flag the next
   * one polls for, so sums go wrong (or a rank waits on a head that went back): caught. */
  long wrong, stuck;
  run(2, 0, &wrong, &stuck);
  CHECK_MSG(wrong > 0 || stuck > 0, "restarting counters went unnoticed (%ld wrong, %ld stuck)",
            wrong, stuck);
  return check_finish("ll-epochs");
}
