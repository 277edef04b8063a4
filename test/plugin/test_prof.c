/*
 * The profiler plugin in the core, on emulated devices (../unit/fake_cuda.c, fake_cudart.c):
 * mock profilers of every version (mock_profiler.c, libnccl-profiler-mockN.so) loaded through
 * NCCL_PROFILER_PLUGIN receive a well-formed event tree from one-rank communicators:
 *   v1 .. v6   init once per communicator and finalize after its last event; every start has one
 *              stop; a parent is started before its child; only the types the version can
 *              represent; Coll events for each collective in call order (seqNumber 0, 1, ...)
 *              with its func and datatype (numbers for v1), and the one-rank "plan" (no channels,
 *              algorithm and protocol NONE); P2p events for a send and a receive to itself; v5+:
 *              each Coll/P2p under its CollApi/P2pApi, each API event under a GroupApi with the
 *              group-start and group-end states, the AlltoAll's send and receive P2p events under
 *              its CollApi; v1..v4: Coll and P2p under a Group event; v3+: a KernelCh event per
 *              CTA launched, under its P2p event, with the GPU times (v4+) the launch wrote
 *   mask       the mask the plugin sets decides: Coll only gives Coll events only; 0 gives none
 *   failinit   an init that fails leaves the communicator working without the profiler: a WARN
 *              naming it (ncclGetLastError), the library unloaded, no event, no finalize
 *
 *   innet      no NCCL_PROFILER_PLUGIN: the profiler inside NCCL_NET_PLUGIN's library is used
 *   none       NCCL_PROFILER_PLUGIN=none: no profiler at all, not even that one
 *   trace      Choir's trace plugin writes a trace of that workload (Chrome JSON)
 *
 *   test-prof <dir of libnccl-profiler-mockN.so> <libnccl-profiler-trace.so or ""> [CASE]
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../unit/fake_cudart.h"
#include "fork_case.h"
#include "nccl.h"
#include "nccl_profiler.h"

static const char* mock_dir;
static int cur_version;

#define MAX_EVS 256

typedef struct {
  long id, parent;
  int type;
  char fields[256];
  int stops;
  int states[4];
  unsigned long long state_v[4];
  int nstates;
} ev_t;

typedef struct {
  ev_t ev[MAX_EVS];
  int nev;
  int inits, finals, bad_lines;
  int init_version;
  int events_after_final;
} trace_t;

static ev_t* trace_find(trace_t* t, long id) {
  for (int i = 0; i < t->nev; i++)
    if (t->ev[i].id == id) return &t->ev[i];
  return NULL;
}

static void trace_read(const char* path, trace_t* t) {
  memset(t, 0, sizeof(*t));
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    long id, parent;
    int type, rank, state, v, n;
    if (line[0] == 'I' && sscanf(line, "I %d", &v) == 1) {
      t->inits++;
      t->init_version = v;
    } else if (line[0] == 'F') {
      t->finals++;
    } else if (line[0] == 'S' && t->nev < MAX_EVS &&
               sscanf(line, "S %ld %d %ld %d %n", &id, &type, &parent, &rank, &n) == 4) {
      if (t->finals) t->events_after_final++;
      ev_t* e = &t->ev[t->nev++];
      e->id = id;
      e->type = type;
      e->parent = parent;
      snprintf(e->fields, sizeof(e->fields), "%s", line + n);
      e->fields[strcspn(e->fields, "\n")] = 0;
      /* A parent must have been started before. */
      CHECK_MSG(parent == 0 || trace_find(t, parent) != NULL,
                "v%d: event %ld (type 0x%x) has parent %ld, not started before it", cur_version,
                id, type, parent);
    } else if (line[0] == 'E' && sscanf(line, "E %ld", &id) == 1) {
      ev_t* e = trace_find(t, id);
      CHECK_MSG(e != NULL, "v%d: stop of event %ld never started", cur_version, id);
      if (e) e->stops++;
      if (t->finals) t->events_after_final++;
    } else if (line[0] == 'R' && sscanf(line, "R %ld %d", &id, &state) == 2) {
      unsigned long long sv = 0;
      (void)sscanf(line, "R %*d %*d %llu", &sv);
      ev_t* e = trace_find(t, id);
      CHECK_MSG(e != NULL && e->stops == 0, "v%d: state %d of event %ld not running",
                cur_version, state, id);
      if (e && e->nstates < 4) {
        e->state_v[e->nstates] = sv;
        e->states[e->nstates++] = state;
      }
    } else {
      t->bad_lines++;
    }
  }
  fclose(f);
}

static void log_path(char* buf, size_t n) {
  snprintf(buf, n, "/tmp/choir-test-prof-%d.log", (int)getpid());
  unlink(buf);
}

static void use_mock(int v, char* log, size_t n) {
  char lib[1024];
  snprintf(lib, sizeof(lib), "%s/libnccl-profiler-mock%d.so", mock_dir, v);
  setenv("NCCL_PROFILER_PLUGIN", lib, 1);
  log_path(log, n);
  setenv("MOCK_PROF_LOG", log, 1);
  cur_version = v;
}

/* The workload: one all-reduce alone, a group of three collectives, a send and a receive to
 * itself in a group, an AlltoAll alone, on a one-rank communicator; then destroy. */
static void workload(void) {
  ncclComm_t c;
  int dev = 0;
  CHECK_EQ_INT(ncclCommInitAll(&c, 1, &dev), ncclSuccess);
  static float a[256], b[256];
  cudaStream_t s = NULL;
  CHECK_EQ_INT(ncclAllReduce(a, b, 256, ncclFloat32, ncclSum, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclAllReduce(a, a, 64, ncclFloat32, ncclSum, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclBroadcast(a, b, 32, ncclInt8, 0, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclReduceScatter(a, b, 16, ncclFloat16, ncclMax, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  CHECK_EQ_INT(ncclGroupStart(), ncclSuccess);
  CHECK_EQ_INT(ncclSend(a, 8, ncclInt32, 0, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclRecv(b, 8, ncclInt32, 0, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclGroupEnd(), ncclSuccess);
  CHECK_EQ_INT(ncclAlltoAll(a, b, 8, ncclInt32, c, s), ncclSuccess);
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
}

static int count_type(const trace_t* t, int type) {
  int n = 0;
  for (int i = 0; i < t->nev; i++) n += t->ev[i].type == type;
  return n;
}

static void case_version(int v) {
  char log[256];
  use_mock(v, log, sizeof(log));
  workload();
  trace_t t;
  trace_read(log, &t);
  unlink(log);
  CHECK_EQ_INT(t.inits, 1);
  CHECK_EQ_INT(t.init_version, v);
  CHECK_EQ_INT(t.finals, 1);
  CHECK_EQ_INT(t.events_after_final, 0);
  CHECK_EQ_INT(t.bad_lines, 0);
  const int allowed = v >= 5 ? (ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                                ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                                ncclProfileKernelLaunch)
                             : (ncclProfileGroup | ncclProfileColl | ncclProfileP2p);
  const int allowed_kch = allowed | (v >= 3 ? ncclProfileKernelCh : 0);
  for (int i = 0; i < t.nev; i++) {
    ev_t* e = &t.ev[i];
    CHECK_MSG(e->stops == 1, "v%d: event %ld (type 0x%x) stopped %d times", v, e->id, e->type,
              e->stops);
    CHECK_MSG((e->type & allowed_kch) == e->type && e->type != 0,
              "v%d: event %ld of type 0x%x, which this version cannot represent", v, e->id,
              e->type);
  }
  /* The collectives in call order, with their names and the one-rank plan. */
  static const char* const want[] = {"AllReduce 256 ncclFloat32", "AllReduce 64 ncclFloat32",
                                     "Broadcast 32 ncclInt8", "ReduceScatter 16 ncclFloat16"};
  static const char* const want_v1[] = {"4 256 7", "4 64 7", "0 32 0", "3 16 6"};
  CHECK_EQ_INT(count_type(&t, ncclProfileColl), 4);
  int k = 0;
  for (int i = 0; i < t.nev; i++) {
    ev_t* e = &t.ev[i];
    if (e->type != ncclProfileColl) continue;
    char func[32] = "", algo[32] = "", proto[32] = "", dtype[32] = "";
    int nch = -1;
    size_t count = 0;
    unsigned long long seq = 99;
    int got = sscanf(e->fields, "%31s %31s %31s %d %zu %31s %llu", func, algo, proto, &nch, &count,
                     dtype, &seq);
    CHECK_MSG(got == 7, "v%d: Coll fields '%s'", v, e->fields);
    char have[128];
    snprintf(have, sizeof(have), "%s %zu %s", func, count, dtype);
    if (k < 4)
      CHECK_MSG(strcmp(have, v == 1 ? want_v1[k] : want[k]) == 0, "v%d: collective %d is '%s', "
                "expected '%s'", v, k, have, v == 1 ? want_v1[k] : want[k]);
    CHECK_MSG(seq == (unsigned long long)k, "v%d: collective %d has seqNumber %llu", v, k, seq);
    CHECK_MSG(nch == 0, "v%d: one rank runs no channel, the event says %d", v, nch);
    if (v == 1)
      CHECK_MSG(strcmp(algo, "255") == 0 && strcmp(proto, "255") == 0,
                "v1: one rank's algorithm and protocol are none (255), not %s/%s", algo, proto);
    else
      CHECK_MSG(strcmp(algo, "NONE") == 0 && strcmp(proto, "NONE") == 0,
                "v%d: one rank's algorithm and protocol are NONE, not %s/%s", v, algo, proto);
    /* The parent: the CollApi event of the same call (v5+), the Group event before. */
    ev_t* p = trace_find(&t, e->parent);
    if (v >= 5) {
      CHECK_MSG(p != NULL && p->type == ncclProfileCollApi &&
                    strncmp(p->fields, func, strlen(func)) == 0,
                "v%d: Coll %s has parent %ld (type 0x%x '%s'), not its CollApi", v, func,
                e->parent, p ? p->type : 0, p ? p->fields : "");
      ev_t* g = p ? trace_find(&t, p->parent) : NULL;
      CHECK_MSG(g != NULL && g->type == ncclProfileGroupApi,
                "v%d: CollApi %ld is not under a GroupApi", v, p ? p->id : 0);
    } else {
      CHECK_MSG(p != NULL && p->type == ncclProfileGroup, "v%d: Coll %s is not under a Group", v,
                func);
    }
    k++;
  }
  /* The send and the receive to itself, and the AlltoAll's send and receive. */
  CHECK_EQ_INT(count_type(&t, ncclProfileP2p), 4);
  for (int i = 0; i < t.nev; i++) {
    ev_t* e = &t.ev[i];
    if (e->type != ncclProfileP2p) continue;
    char func[32] = "", dtype[32] = "";
    int peer = -1;
    size_t count = 0;
    CHECK_MSG(sscanf(e->fields, "%31s %d %zu %31s", func, &peer, &count, dtype) == 4,
              "v%d: P2p fields '%s'", v, e->fields);
    CHECK_MSG(peer == 0 && count == 8, "v%d: P2p %s peer %d count %zu", v, func, peer, count);
    if (v >= 2)
      CHECK_MSG((!strcmp(func, "Send") || !strcmp(func, "Recv")) && !strcmp(dtype, "ncclInt32"),
                "v%d: P2p '%s'", v, e->fields);
    ev_t* p = trace_find(&t, e->parent);
    const bool a2a_parent = p != NULL && p->type == ncclProfileCollApi &&
                            strncmp(p->fields, "AlltoAll", 8) == 0;
    CHECK_MSG(p != NULL && (v >= 5 ? p->type == ncclProfileP2pApi || a2a_parent
                                   : p->type == ncclProfileGroup),
              "v%d: P2p %ld has parent of type 0x%x", v, e->id, p ? p->type : 0);
  }
  /* One KernelCh per CTA of each kernel launched (the send/recv to itself and the AlltoAll
   * copy: the emulated launches write the timestamps a kernel would), each under its P2p event
   * (a copy's is its send's), with the CTA's GPU start time (v4+) and a KernelChStop state with
   * its stop time; none before v3, whose events cannot say it, and then no launch has records. */
  const int nkch = count_type(&t, ncclProfileKernelCh);
  CHECK_EQ_INT(nkch, fake_cudart.timed_ctas);
  CHECK_MSG(v >= 3 ? nkch > 0 : nkch == 0, "v%d: %d KernelCh events", v, nkch);
  for (int i = 0; i < t.nev; i++) {
    ev_t* e = &t.ev[i];
    if (e->type != ncclProfileKernelCh) continue;
    int ch = -1;
    unsigned long long start = 0;
    CHECK_MSG(sscanf(e->fields, "%d %llu", &ch, &start) == 2, "v%d: KernelCh fields '%s'", v,
              e->fields);
    ev_t* p = trace_find(&t, e->parent);
    CHECK_MSG(p != NULL && p->type == ncclProfileP2p && strncmp(p->fields, "Send", 4) == 0,
              "v%d: KernelCh %ld is not under a Send P2p event", v, e->id);
    if (v >= 4) {
      CHECK_MSG(start >= 1000000ull && ch == (int)(start % 1000000ull),
                "v%d: KernelCh channel %d with pTimer %llu", v, ch, start);
      CHECK_MSG(e->nstates == 1 && e->states[0] == ncclProfilerKernelChStop &&
                    e->state_v[0] == start + 500,
                "v%d: KernelCh %ld: %d states (%d, pTimer %llu; start %llu)", v, e->id,
                e->nstates, e->states[0], e->state_v[0], start);
    } else {
      CHECK_MSG(e->nstates == 0, "v3: KernelCh %ld with a state v3 cannot represent", e->id);
    }
  }
  if (v >= 5) {
    /* Four groups (the lone calls are one each), each with its two states in order. */
    CHECK_EQ_INT(count_type(&t, ncclProfileGroupApi), 4);
    CHECK_EQ_INT(count_type(&t, ncclProfileCollApi), 5);
    CHECK_EQ_INT(count_type(&t, ncclProfileP2pApi), 2);
    for (int i = 0; i < t.nev; i++) {
      ev_t* e = &t.ev[i];
      if (e->type != ncclProfileGroupApi) continue;
      CHECK_MSG(e->nstates == 2 && e->states[0] == ncclProfilerGroupStartApiStop &&
                    e->states[1] == ncclProfilerGroupEndApiStart,
                "v%d: GroupApi %ld states: %d of them (%d, %d)", v, e->id, e->nstates,
                e->states[0], e->states[1]);
      CHECK_MSG(strcmp(e->fields, "1") == 0, "v%d: GroupApi depth '%s', expected 1", v,
                e->fields);
    }
  }
  printf("prof v%d: %d events checked\n", v, t.nev);
}

static void case_v1(void) { case_version(1); }
static void case_v2(void) { case_version(2); }
static void case_v3(void) { case_version(3); }
static void case_v4(void) { case_version(4); }
static void case_v5(void) { case_version(5); }
static void case_v6(void) { case_version(6); }

static void case_mask(void) {
  char log[256];
  use_mock(6, log, sizeof(log));
  char m[16];
  snprintf(m, sizeof(m), "%d", ncclProfileColl);
  setenv("MOCK_PROF_MASK", m, 1);
  workload();
  trace_t t;
  trace_read(log, &t);
  CHECK_EQ_INT(count_type(&t, ncclProfileColl), 4);
  CHECK_EQ_INT(t.nev, 4); /* nothing else */
  CHECK_EQ_INT(fake_cudart.timed_ctas, 0); /* KernelCh off: no launch carries records */
  for (int i = 0; i < t.nev; i++)
    CHECK_MSG(t.ev[i].parent == 0, "mask Coll only: event %ld has a parent (%ld) that the mask "
              "left out", t.ev[i].id, t.ev[i].parent);
  unlink(log);
  setenv("MOCK_PROF_MASK", "0", 1);
  use_mock(6, log, sizeof(log));
  workload();
  trace_read(log, &t);
  CHECK_EQ_INT(t.inits, 1);
  CHECK_EQ_INT(t.nev, 0);
  CHECK_EQ_INT(t.finals, 1);
  unlink(log);
}

/* Whether a library whose path ends in `name` is mapped in this process. */
static bool lib_mapped(const char* name) {
  FILE* f = fopen("/proc/self/maps", "r");
  if (f == NULL) return false;
  char line[1024];
  bool found = false;
  while (!found && fgets(line, sizeof(line), f)) found = strstr(line, name) != NULL;
  fclose(f);
  return found;
}

static void case_failinit(void) {
  char log[256];
  use_mock(5, log, sizeof(log));
  setenv("MOCK_PROF_FAIL_INIT", "1", 1);
  /* The communicator is made; the WARN names the profiler; the library is unloaded again. */
  ncclComm_t c;
  int dev = 0;
  CHECK_EQ_INT(ncclCommInitAll(&c, 1, &dev), ncclSuccess);
  const char* last = ncclGetLastError(c);
  CHECK_MSG(last != NULL && strstr(last, "init failed") != NULL && strstr(last, "mock-profiler"),
            "failinit: last error '%s'", last ? last : "(null)");
  CHECK_MSG(!lib_mapped("libnccl-profiler-mock5.so"),
            "failinit: the profiler whose init failed is still loaded");
  CHECK_EQ_INT(ncclCommDestroy(c), ncclSuccess);
  workload(); /* every call succeeds without the profiler */
  trace_t t;
  trace_read(log, &t);
  CHECK_EQ_INT(t.inits, 2); /* the communicator above, then the workload's */
  CHECK_EQ_INT(t.nev, 0);
  CHECK_EQ_INT(t.finals, 0);
  unlink(log);
}

/* NCCL_PROFILER_PLUGIN unset, NCCL_NET_PLUGIN naming a library that also holds a profiler
 * (libnccl-net-withprof.so: a mock net table and the v6 mock profiler): the core finds it there. */
static void case_innet(void) {
  char log[256], lib[1024];
  use_mock(6, log, sizeof(log));
  unsetenv("NCCL_PROFILER_PLUGIN");
  snprintf(lib, sizeof(lib), "%s/libnccl-net-withprof.so", mock_dir);
  setenv("NCCL_NET_PLUGIN", lib, 1);
  workload();
  trace_t t;
  trace_read(log, &t);
  CHECK_EQ_INT(t.inits, 1);
  CHECK_EQ_INT(t.finals, 1);
  CHECK_EQ_INT(count_type(&t, ncclProfileColl), 4);
  unlink(log);
}

/* NCCL_PROFILER_PLUGIN=none: not even the one inside the net plugin's library (a case of its
 * own: the knob is read once per process). */
static void case_none(void) {
  char log[256], lib[1024];
  use_mock(6, log, sizeof(log));
  setenv("NCCL_PROFILER_PLUGIN", "none", 1);
  snprintf(lib, sizeof(lib), "%s/libnccl-net-withprof.so", mock_dir);
  setenv("NCCL_NET_PLUGIN", lib, 1);
  workload();
  trace_t t;
  trace_read(log, &t);
  CHECK_EQ_INT(t.inits, 0);
  unlink(log);
}

/* Choir's own trace plugin (plugins/profiler) under Choir's core: it writes a Chrome trace that
 * holds the collectives and the send/receive, and whose brackets balance outside strings. */
static const char* trace_lib;

static void case_trace(void) {
  if (trace_lib == NULL || trace_lib[0] == '\0') {
    CHECK_SKIPPED("the trace plugin (plugins/profiler) is not built");
    return;
  }
  char out[256];
  snprintf(out, sizeof(out), "/tmp/choir-test-prof-trace-%d.json", (int)getpid());
  unlink(out);
  setenv("NCCL_PROFILER_PLUGIN", trace_lib, 1);
  setenv("CHOIR_PROFILER_FILE", out, 1);
  setenv("CHOIR_PROFILER_EVENTS", "all", 1);
  workload();
  FILE* f = fopen(out, "r");
  CHECK_MSG(f != NULL, "trace: %s was not written", out);
  if (f == NULL) return;
  /* The Chrome trace rules (test/tools/trace_check.py), when meson gives the checker. */
  const char* checker = getenv("CHOIR_TEST_TRACE_CHECK");
  if (checker != NULL && checker[0] != '\0') {
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s %s", checker, out);
    const int rc = system(cmd);
    CHECK_MSG(rc == 0, "trace: %s finds %s breaking the trace format (status %d)", checker, out,
              rc);
  }
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  unlink(out);
  buf[n] = 0;
  int depth = 0, bad = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    char ch = buf[i];
    if (in_str) {
      if (ch == '\\') i++;
      else if (ch == '"') in_str = false;
    } else if (ch == '"') {
      in_str = true;
    } else if (ch == '{' || ch == '[') {
      depth++;
    } else if (ch == '}' || ch == ']') {
      bad |= --depth < 0;
    }
  }
  CHECK_MSG(n > 0 && depth == 0 && !bad && !in_str, "trace: %zu bytes, brackets unbalanced", n);
  static const char* const want[] = {"\"traceEvents\"", "AllReduce", "Broadcast",
                                     "ReduceScatter", "Send", "Recv"};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    CHECK_MSG(strstr(buf, want[i]) != NULL, "trace: no %s in %s", want[i], out);
  printf("prof trace: %zu bytes of trace\n", n);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <dir of libnccl-profiler-mockN.so> <trace plugin or \"\"> [CASE]\n",
            argv[0]);
    return 2;
  }
  mock_dir = argv[1];
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  static const struct {
    const char* name;
    void (*fn)(void);
  } cases[] = {{"v1", case_v1},     {"v2", case_v2},     {"v3", case_v3},
               {"v4", case_v4},     {"v5", case_v5},     {"v6", case_v6},
               {"mask", case_mask}, {"failinit", case_failinit}, {"innet", case_innet},
               {"none", case_none},         {"trace", case_trace}};
  trace_lib = argc > 2 ? argv[2] : NULL;
  const char* only = argc > 3 ? argv[3] : NULL;
  int ran = 0;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    if (only != NULL && strcmp(only, cases[i].name) != 0) continue;
    fork_case(cases[i].name, cases[i].fn);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "test-prof: no case named %s\n", only);
    return 2;
  }
  return check_finish(only != NULL ? only : "prof");
}
