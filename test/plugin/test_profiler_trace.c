/*
 * The trace profiler (plugins/profiler, libnccl-profiler-trace.so), driven the way a core drives
 * it: every exported version with its own descriptor layout (v4's uint8_t type, v5, v6 with
 * copy-engine events), a realistic event tree (group > coll > proxy op > proxy step > net plugin,
 * kernel channels, API events) from several threads for several communicators at once; the
 * activation mask written at init; the Chrome trace it writes (parsed here, and by python3's json
 * module when given), with names, args and nesting; the event cap; disabled events; the flush at
 * exit; loading through Choir's own loader; the exported symbols.
 *
 * Usage: test-profiler-trace <plugin.so> [python3] [nm]   (an empty or missing tool skips its part)
 * The traces are written to a fresh folder under $TMPDIR, removed on success unless
 * CHOIR_TEST_KEEP_TRACES is set.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "nccl_profiler.h"
#include "plugin.h"

static const char* lib_path;
static const char* python_path;
static const char* nm_path;
static char tmp_dir[256];

/* ---- a logger that keeps what the plugin says ---------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[1 << 16];
static size_t log_len;
static int log_warns;

static void test_logger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                        const char* fmt, ...) {
  (void)flags, (void)file, (void)line;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&log_lock);
  if (level == NCCL_LOG_WARN) log_warns++;
  int n = snprintf(log_buf + log_len, sizeof(log_buf) - log_len, "%s %s\n",
                   level == NCCL_LOG_WARN ? "WARN" : "INFO", msg);
  if (n > 0 && log_len + (size_t)n < sizeof(log_buf)) log_len += (size_t)n;
  pthread_mutex_unlock(&log_lock);
}

static void log_clear(void) {
  pthread_mutex_lock(&log_lock);
  log_len = 0;
  log_buf[0] = '\0';
  log_warns = 0;
  pthread_mutex_unlock(&log_lock);
}

/* ---- a small JSON parser (the test must not trust the writer it checks) -------------------- */

enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ };

typedef struct jv {
  int t;
  char* s; /* string value, or the text of a number */
  bool b;
  int n;        /* elements or members */
  struct jv* v; /* n values */
  char** k;     /* n keys (objects) */
} jv_t;

typedef struct {
  const char* p;
  const char* end;
  const char* err;
} jp_t;

static void jws(jp_t* j) {
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t')) j->p++;
}

static void jfree(jv_t* v) {
  free(v->s);
  for (int i = 0; i < v->n; i++) {
    jfree(&v->v[i]);
    if (v->k != NULL) free(v->k[i]);
  }
  free(v->v);
  free(v->k);
  memset(v, 0, sizeof(*v));
}

static void jutf8(char* out, size_t* n, unsigned cp) {
  if (cp < 0x80) {
    out[(*n)++] = (char)cp;
  } else if (cp < 0x800) {
    out[(*n)++] = (char)(0xc0 | (cp >> 6));
    out[(*n)++] = (char)(0x80 | (cp & 0x3f));
  } else {
    out[(*n)++] = (char)(0xe0 | (cp >> 12));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[(*n)++] = (char)(0x80 | (cp & 0x3f));
  }
}

static char* jstring(jp_t* j) {
  if (j->p >= j->end || *j->p != '"') return j->err = "expected string", NULL;
  j->p++;
  size_t cap = 16, n = 0;
  char* out = malloc(cap);
  while (out != NULL) {
    if (j->p >= j->end) break;
    if (n + 4 >= cap) {
      char* grown = realloc(out, cap *= 2);
      if (grown == NULL) break;
      out = grown;
    }
    unsigned char c = (unsigned char)*j->p++;
    if (c == '"') {
      out[n] = '\0';
      return out;
    }
    if (c < 0x20) break;
    if (c != '\\') {
      out[n++] = (char)c;
      continue;
    }
    if (j->p >= j->end) break;
    c = (unsigned char)*j->p++;
    const char* simple = strchr("\"\\/bfnrt", c);
    if (c != '\0' && simple != NULL) {
      out[n++] = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
    } else if (c == 'u' && j->end - j->p >= 4) {
      unsigned cp = 0;
      for (int i = 0; i < 4; i++) {
        char h = *j->p++;
        cp = cp * 16 + (unsigned)(h >= '0' && h <= '9'   ? h - '0'
                                  : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                  : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                         : 99);
      }
      if (cp > 0xffff) break;
      jutf8(out, &n, cp);
    } else {
      break;
    }
  }
  free(out);
  j->err = "bad string";
  return NULL;
}

static bool jvalue(jp_t* j, jv_t* v, int depth);

static bool jcontainer(jp_t* j, jv_t* v, int depth, bool obj) {
  char close = obj ? '}' : ']';
  v->t = obj ? J_OBJ : J_ARR;
  j->p++;
  jws(j);
  if (j->p < j->end && *j->p == close) {
    j->p++;
    return true;
  }
  int cap = 0;
  for (;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 8;
      jv_t* nv = realloc(v->v, (size_t)cap * sizeof(*nv));
      if (nv == NULL) return j->err = "out of memory", false;
      v->v = nv;
      if (obj) {
        char** nk = realloc(v->k, (size_t)cap * sizeof(*nk));
        if (nk == NULL) return j->err = "out of memory", false;
        v->k = nk;
      }
    }
    jws(j);
    if (obj) {
      char* key = jstring(j);
      if (key == NULL) return false;
      v->k[v->n] = key;
      jws(j);
      if (j->p >= j->end || *j->p != ':') {
        free(key);
        return j->err = "expected ':'", false;
      }
      j->p++;
    }
    memset(&v->v[v->n], 0, sizeof(v->v[0]));
    if (!jvalue(j, &v->v[v->n], depth + 1)) {
      if (obj) free(v->k[v->n]);
      jfree(&v->v[v->n]);
      return false;
    }
    v->n++;
    jws(j);
    if (j->p < j->end && *j->p == ',') {
      j->p++;
      continue;
    }
    if (j->p < j->end && *j->p == close) {
      j->p++;
      return true;
    }
    return j->err = obj ? "expected ',' or '}'" : "expected ',' or ']'", false;
  }
}

static bool jvalue(jp_t* j, jv_t* v, int depth) {
  memset(v, 0, sizeof(*v));
  if (depth > 64) return j->err = "too deep", false;
  jws(j);
  if (j->p >= j->end) return j->err = "unexpected end", false;
  char c = *j->p;
  if (c == '{' || c == '[') return jcontainer(j, v, depth, c == '{');
  if (c == '"') {
    v->t = J_STR;
    return (v->s = jstring(j)) != NULL;
  }
  if (j->end - j->p >= 4 && strncmp(j->p, "null", 4) == 0) return j->p += 4, v->t = J_NULL, true;
  if (j->end - j->p >= 4 && strncmp(j->p, "true", 4) == 0)
    return j->p += 4, v->t = J_BOOL, v->b = true, true;
  if (j->end - j->p >= 5 && strncmp(j->p, "false", 5) == 0) return j->p += 5, v->t = J_BOOL, true;
  /* number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
  const char* s = j->p;
  if (*j->p == '-') j->p++;
  if (j->p >= j->end || *j->p < '0' || *j->p > '9') return j->err = "bad value", false;
  if (*j->p == '0') {
    j->p++;
  } else {
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  }
  if (j->p < j->end && *j->p == '.') {
    j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return j->err = "bad fraction", false;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  }
  if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
    j->p++;
    if (j->p < j->end && (*j->p == '+' || *j->p == '-')) j->p++;
    if (j->p >= j->end || *j->p < '0' || *j->p > '9') return j->err = "bad exponent", false;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') j->p++;
  }
  v->t = J_NUM;
  v->s = strndup(s, (size_t)(j->p - s));
  return v->s != NULL;
}

static bool jparse(const char* text, size_t len, jv_t* root, const char** err_p) {
  jp_t j = {text, text + len, NULL};
  bool ok = jvalue(&j, root, 0);
  if (ok) {
    jws(&j);
    if (j.p != j.end) ok = false, j.err = "trailing characters";
  }
  if (!ok) {
    jfree(root);
    *err_p = j.err;
  }
  return ok;
}

static const jv_t* jget(const jv_t* o, const char* key) {
  if (o == NULL || o->t != J_OBJ) return NULL;
  for (int i = 0; i < o->n; i++)
    if (strcmp(o->k[i], key) == 0) return &o->v[i];
  return NULL;
}

static const char* jstr(const jv_t* o, const char* key) {
  const jv_t* v = jget(o, key);
  return v != NULL && v->t == J_STR ? v->s : NULL;
}

static long long jint(const jv_t* o, const char* key, long long dflt) {
  const jv_t* v = jget(o, key);
  return v != NULL && v->t == J_NUM ? strtoll(v->s, NULL, 10) : dflt;
}

static int jbool(const jv_t* o, const char* key) {
  const jv_t* v = jget(o, key);
  return v != NULL && v->t == J_BOOL ? v->b : -1;
}

/* A microsecond value as written ("123.456"), in exact nanoseconds. */
static uint64_t jns(const jv_t* o, const char* key) {
  const jv_t* v = jget(o, key);
  if (v == NULL || v->t != J_NUM) return UINT64_MAX;
  char* end;
  uint64_t us = strtoull(v->s, &end, 10), frac = 0;
  int digits = 0;
  if (*end == '.')
    for (end++; *end >= '0' && *end <= '9' && digits < 3; end++, digits++)
      frac = frac * 10 + (uint64_t)(*end - '0');
  for (; digits < 3; digits++) frac *= 10;
  return us * 1000 + frac;
}

/* ---- a parsed trace ------------------------------------------------------------------------ */

typedef struct {
  const char *name, *cat, *ph, *comm;
  uint64_t ts, dur;
  long long tid, id, parent;
  const jv_t* args;
} tev_t;

typedef struct {
  jv_t root;
  tev_t* ev;
  int n;
  char* text;
} trace_t;

static char* read_file(const char* path, size_t* len_p) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* buf = malloc((size_t)len + 1);
  if (buf != NULL && fread(buf, 1, (size_t)len, f) != (size_t)len) {
    free(buf);
    buf = NULL;
  }
  if (buf != NULL) buf[len] = '\0';
  fclose(f);
  *len_p = (size_t)len;
  return buf;
}

static void trace_free(trace_t* t) {
  jfree(&t->root);
  free(t->ev);
  free(t->text);
  memset(t, 0, sizeof(*t));
}

static bool trace_load(const char* path, trace_t* t) {
  memset(t, 0, sizeof(*t));
  size_t len;
  t->text = read_file(path, &len);
  if (t->text == NULL) {
    fprintf(stderr, "cannot read %s: %s\n", path, strerror(errno));
    return false;
  }
  const char* err = NULL;
  if (!jparse(t->text, len, &t->root, &err)) {
    fprintf(stderr, "%s is not JSON: %s\n", path, err);
    trace_free(t);
    return false;
  }
  const jv_t* evs = jget(&t->root, "traceEvents");
  if (evs == NULL || evs->t != J_ARR) {
    fprintf(stderr, "%s has no traceEvents array\n", path);
    trace_free(t);
    return false;
  }
  t->ev = calloc((size_t)evs->n + 1, sizeof(*t->ev));
  for (int i = 0; i < evs->n; i++) {
    const jv_t* e = &evs->v[i];
    tev_t* o = &t->ev[t->n++];
    o->name = jstr(e, "name");
    o->cat = jstr(e, "cat");
    o->ph = jstr(e, "ph");
    o->ts = jns(e, "ts");
    o->dur = jns(e, "dur");
    o->tid = jint(e, "tid", -1);
    o->args = jget(e, "args");
    o->comm = jstr(o->args, "comm");
    o->id = jint(o->args, "id", -1);
    o->parent = jint(o->args, "parent", -1);
  }
  return true;
}

static bool is_x(const tev_t* e) { return e->ph != NULL && strcmp(e->ph, "X") == 0; }

static bool same(const char* a, const char* b) { return a != NULL && b != NULL && !strcmp(a, b); }

/* The slice (an event, not a phase) of communicator `comm` with args.id == id. */
static const tev_t* trace_find(const trace_t* t, const char* comm, long long id) {
  for (int i = 0; i < t->n; i++) {
    const tev_t* e = &t->ev[i];
    if (is_x(e) && e->id == id && same(e->comm, comm) && e->cat != NULL &&
        strstr(e->cat, "State") == NULL)
      return e;
  }
  return NULL;
}

static int trace_count(const trace_t* t, const char* comm, const char* cat, const char* name) {
  int n = 0;
  for (int i = 0; i < t->n; i++) {
    const tev_t* e = &t->ev[i];
    if (!is_x(e) || !same(e->comm, comm)) continue;
    if (cat != NULL && !same(e->cat, cat)) continue;
    if (name != NULL && !same(e->name, name)) continue;
    n++;
  }
  return n;
}

static const tev_t* trace_comm_info(const trace_t* t, const char* comm) {
  for (int i = 0; i < t->n; i++)
    if (same(t->ev[i].cat, "Comm") && same(t->ev[i].comm, comm)) return &t->ev[i];
  return NULL;
}

static bool contains(const tev_t* outer, const tev_t* inner) {
  return inner->ts >= outer->ts && inner->ts + inner->dur <= outer->ts + outer->dur;
}

static int cmp_nest(const void* pa, const void* pb) {
  const tev_t *a = *(const tev_t*const*)pa, *b = *(const tev_t*const*)pb;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
  if (a->dur != b->dur) return a->dur > b->dur ? -1 : 1;
  return 0;
}

/* Every lane's X slices nest properly: what Chrome and Perfetto need to draw them. Also every
 * lane used by a slice is named. Returns the number of violations. */
static int trace_check_lanes(const trace_t* t) {
  const tev_t** xs = calloc((size_t)t->n + 1, sizeof(*xs));
  int nx = 0, bad = 0;
  for (int i = 0; i < t->n; i++)
    if (is_x(&t->ev[i])) xs[nx++] = &t->ev[i];
  qsort(xs, (size_t)nx, sizeof(*xs), cmp_nest);
  const tev_t* stack[64];
  int depth = 0;
  for (int i = 0; i < nx; i++) {
    if (i == 0 || xs[i]->tid != xs[i - 1]->tid) {
      depth = 0;
      bool named = false;
      for (int j = 0; j < t->n && !named; j++)
        named = same(t->ev[j].ph, "M") && same(t->ev[j].name, "thread_name") &&
                t->ev[j].tid == xs[i]->tid;
      if (!named) {
        fprintf(stderr, "lane %lld has no thread_name\n", xs[i]->tid);
        bad++;
      }
    }
    while (depth > 0 && stack[depth - 1]->ts + stack[depth - 1]->dur <= xs[i]->ts) depth--;
    if (depth > 0 && !contains(stack[depth - 1], xs[i])) {
      if (bad++ < 5)
        fprintf(stderr, "lane %lld: '%s' [%llu +%llu] overlaps '%s' [%llu +%llu]\n", xs[i]->tid,
                xs[i]->name, (unsigned long long)xs[i]->ts, (unsigned long long)xs[i]->dur,
                stack[depth - 1]->name, (unsigned long long)stack[depth - 1]->ts,
                (unsigned long long)stack[depth - 1]->dur);
      continue;
    }
    if (depth < 64) stack[depth++] = xs[i];
  }
  free(xs);
  return bad;
}

/* python3's json module agrees that the file is JSON (when python3 was given). */
static void check_python_json(const char* path) {
  if (python_path == NULL || python_path[0] == '\0') return;
  pid_t pid = fork();
  if (pid == 0) {
    execlp(python_path, python_path, "-c", "import json,sys; json.load(open(sys.argv[1]))", path,
           (char*)NULL);
    _exit(127);
  }
  int status = 0;
  CHECK_TRUE(pid > 0 && waitpid(pid, &status, 0) == pid);
  CHECK_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- driving the plugin: one superset descriptor, converted to each version's layout ------- */

typedef struct {
  int version;
  const void* table;
} drv_t;

static drv_t drv[7]; /* by version: 4, 5, 6 */

/* The test's states carry every argument; each version gets its own union. */
typedef struct {
  size_t trans_size;
  int appended;
  void* data;
  uint64_t ptimer;
} targs_t;

static void to_v4(ncclProfilerEventDescr_v4_t* d, const ncclProfilerEventDescr_v6_t* s) {
  memset(d, 0xa5, sizeof(*d)); /* a plugin reading `type` as 64 bits sees garbage */
  d->type = (uint8_t)s->type;
  d->parentObj = s->parentObj;
  d->rank = s->rank;
  switch (s->type) {
    case ncclProfileColl:
      d->coll.seqNumber = s->coll.seqNumber;
      d->coll.func = s->coll.func;
      d->coll.sendBuff = s->coll.sendBuff;
      d->coll.recvBuff = s->coll.recvBuff;
      d->coll.count = s->coll.count;
      d->coll.root = s->coll.root;
      d->coll.datatype = s->coll.datatype;
      d->coll.nChannels = s->coll.nChannels;
      d->coll.nWarps = s->coll.nWarps;
      d->coll.algo = s->coll.algo;
      d->coll.proto = s->coll.proto;
      break;
    case ncclProfileP2p:
      d->p2p.func = s->p2p.func;
      d->p2p.buff = s->p2p.buff;
      d->p2p.datatype = s->p2p.datatype;
      d->p2p.count = s->p2p.count;
      d->p2p.peer = s->p2p.peer;
      d->p2p.nChannels = s->p2p.nChannels;
      break;
    case ncclProfileProxyOp:
      d->proxyOp.pid = s->proxyOp.pid;
      d->proxyOp.channelId = s->proxyOp.channelId;
      d->proxyOp.peer = s->proxyOp.peer;
      d->proxyOp.nSteps = s->proxyOp.nSteps;
      d->proxyOp.chunkSize = s->proxyOp.chunkSize;
      d->proxyOp.isSend = s->proxyOp.isSend;
      break;
    case ncclProfileProxyStep: d->proxyStep.step = s->proxyStep.step; break;
    case ncclProfileKernelCh:
      d->kernelCh.channelId = s->kernelCh.channelId;
      d->kernelCh.pTimer = s->kernelCh.pTimer;
      break;
    case ncclProfileNetPlugin:
      d->netPlugin.id = s->netPlugin.id;
      d->netPlugin.data = s->netPlugin.data;
      break;
    default: break;
  }
}

static void to_v5(ncclProfilerEventDescr_v5_t* d, const ncclProfilerEventDescr_v6_t* s) {
  memset(d, 0xa5, sizeof(*d));
  d->type = s->type;
  d->parentObj = s->parentObj;
  d->rank = s->rank;
  switch (s->type) {
    case ncclProfileGroupApi:
      d->groupApi.graphCaptured = s->groupApi.graphCaptured;
      d->groupApi.groupDepth = s->groupApi.groupDepth;
      break;
    case ncclProfileCollApi:
      d->collApi.func = s->collApi.func;
      d->collApi.count = s->collApi.count;
      d->collApi.datatype = s->collApi.datatype;
      d->collApi.root = s->collApi.root;
      d->collApi.stream = s->collApi.stream;
      d->collApi.graphCaptured = s->collApi.graphCaptured;
      break;
    case ncclProfileP2pApi:
      d->p2pApi.func = s->p2pApi.func;
      d->p2pApi.count = s->p2pApi.count;
      d->p2pApi.datatype = s->p2pApi.datatype;
      d->p2pApi.stream = s->p2pApi.stream;
      d->p2pApi.graphCaptured = s->p2pApi.graphCaptured;
      break;
    case ncclProfileKernelLaunch: d->kernelLaunch.stream = s->kernelLaunch.stream; break;
    case ncclProfileColl:
      d->coll.seqNumber = s->coll.seqNumber;
      d->coll.func = s->coll.func;
      d->coll.sendBuff = s->coll.sendBuff;
      d->coll.recvBuff = s->coll.recvBuff;
      d->coll.count = s->coll.count;
      d->coll.root = s->coll.root;
      d->coll.datatype = s->coll.datatype;
      d->coll.nChannels = s->coll.nChannels;
      d->coll.nWarps = s->coll.nWarps;
      d->coll.algo = s->coll.algo;
      d->coll.proto = s->coll.proto;
      d->coll.parentGroup = s->coll.parentGroup;
      break;
    case ncclProfileP2p:
      d->p2p.func = s->p2p.func;
      d->p2p.buff = s->p2p.buff;
      d->p2p.datatype = s->p2p.datatype;
      d->p2p.count = s->p2p.count;
      d->p2p.peer = s->p2p.peer;
      d->p2p.nChannels = s->p2p.nChannels;
      d->p2p.parentGroup = s->p2p.parentGroup;
      break;
    case ncclProfileProxyOp:
      d->proxyOp.pid = s->proxyOp.pid;
      d->proxyOp.channelId = s->proxyOp.channelId;
      d->proxyOp.peer = s->proxyOp.peer;
      d->proxyOp.nSteps = s->proxyOp.nSteps;
      d->proxyOp.chunkSize = s->proxyOp.chunkSize;
      d->proxyOp.isSend = s->proxyOp.isSend;
      break;
    case ncclProfileProxyStep: d->proxyStep.step = s->proxyStep.step; break;
    case ncclProfileKernelCh:
      d->kernelCh.channelId = s->kernelCh.channelId;
      d->kernelCh.pTimer = s->kernelCh.pTimer;
      break;
    case ncclProfileNetPlugin:
      d->netPlugin.id = s->netPlugin.id;
      d->netPlugin.data = s->netPlugin.data;
      break;
    default: break;
  }
}

static ncclResult_t drv_init(const drv_t* d, void** ctx, uint64_t comm_id, int* mask,
                             const char* name, int nnodes, int nranks, int rank) {
  switch (d->version) {
    case 4:
      return ((const ncclProfiler_v4_t*)d->table)
          ->init(ctx, mask, name, comm_id, nnodes, nranks, rank, test_logger);
    case 5:
      return ((const ncclProfiler_v5_t*)d->table)
          ->init(ctx, comm_id, mask, name, nnodes, nranks, rank, test_logger);
    default:
      return ((const ncclProfiler_v6_t*)d->table)
          ->init(ctx, comm_id, mask, name, nnodes, nranks, rank, test_logger);
  }
}

static void* drv_start(const drv_t* d, void* ctx, const ncclProfilerEventDescr_v6_t* s) {
  void* h = (void*)0x1; /* the plugin must always write the handle */
  switch (d->version) {
    case 4: {
      ncclProfilerEventDescr_v4_t d4;
      to_v4(&d4, s);
      ((const ncclProfiler_v4_t*)d->table)->startEvent(ctx, &h, &d4);
      memset(&d4, 0x5a, sizeof(d4)); /* the descriptor is only valid during the call */
      break;
    }
    case 5: {
      ncclProfilerEventDescr_v5_t d5;
      to_v5(&d5, s);
      ((const ncclProfiler_v5_t*)d->table)->startEvent(ctx, &h, &d5);
      memset(&d5, 0x5a, sizeof(d5));
      break;
    }
    default: {
      ncclProfilerEventDescr_v6_t d6 = *s;
      ((const ncclProfiler_v6_t*)d->table)->startEvent(ctx, &h, &d6);
      memset(&d6, 0x5a, sizeof(d6));
      break;
    }
  }
  return h;
}

static void drv_stop(const drv_t* d, void* h) {
  if (h == NULL) return; /* as the core: no calls for events the plugin did not track */
  ((const ncclProfiler_v6_t*)d->table)->stopEvent(h); /* same signature in every version */
}

static void drv_state(const drv_t* d, void* h, ncclProfilerEventState_t state, const targs_t* a) {
  if (h == NULL) return;
  if (d->version == 4) {
    ncclProfilerEventStateArgs_v4_t a4;
    memset(&a4, 0, sizeof(a4));
    if (state == ncclProfilerNetPluginUpdate)
      a4.netPlugin.data = a->data;
    else if (state == ncclProfilerKernelChStop)
      a4.kernelCh.pTimer = a->ptimer;
    else if (state >= ncclProfilerProxyCtrlIdle && state <= ncclProfilerProxyCtrlAppendEnd)
      a4.proxyCtrl.appendedProxyOps = a->appended;
    else
      a4.proxyStep.transSize = a->trans_size;
    ((const ncclProfiler_v4_t*)d->table)->recordEventState(h, state, &a4);
  } else {
    ncclProfilerEventStateArgs_v5_t a5;
    memset(&a5, 0, sizeof(a5));
    if (state == ncclProfilerNetPluginUpdate)
      a5.netPlugin.data = a->data;
    else if (state == ncclProfilerKernelChStop)
      a5.kernelCh.pTimer = a->ptimer;
    else if (state >= ncclProfilerProxyCtrlIdle && state <= ncclProfilerProxyCtrlAppendEnd)
      a5.proxyCtrl.appendedProxyOps = a->appended;
    else
      a5.proxyStep.transSize = a->trans_size;
    if (d->version == 5)
      ((const ncclProfiler_v5_t*)d->table)->recordEventState(h, state, &a5);
    else
      ((const ncclProfiler_v6_t*)d->table)->recordEventState(h, state, &a5);
  }
}

static void drv_finalize(const drv_t* d, void* ctx) {
  ((const ncclProfiler_v6_t*)d->table)->finalize(ctx); /* same signature in every version */
}

static ncclProfilerEventDescr_v6_t desc(uint64_t type, void* parent, int rank) {
  ncclProfilerEventDescr_v6_t d;
  memset(&d, 0, sizeof(d));
  d.type = type;
  d.parentObj = parent;
  d.rank = rank;
  return d;
}

/* ---- the simulated communicator ------------------------------------------------------------ */

#define SIM_ITERS 6
#define SIM_CHANNELS 4
#define SIM_STEPS 4
#define SIM_PROXY_THREADS 2
#define SIM_COUNT 1024
#define SIM_CHUNK 65536

typedef struct {
  const drv_t* drv;
  void* ctx;
  int rank;
  void* coll; /* the collective the proxy threads work for */
  int tidx;
  atomic_int nulls; /* enabled events that got no handle: must stay 0 */
} sim_t;

typedef struct {
  sim_t* sim;
  int tidx;
} sim_worker_t;

/* Strings handed to the plugin live in buffers overwritten after the call: it must copy. */
static void* start_coll(sim_t* s, void* parent, void* group, int seq) {
  char func[32] = "AllReduce", dtype[32] = "ncclFloat32", algo[32] = "RING", proto[32] = "SIMPLE";
  ncclProfilerEventDescr_v6_t d = desc(ncclProfileColl, parent, s->rank);
  d.coll.seqNumber = (uint64_t)seq;
  d.coll.func = func;
  d.coll.sendBuff = (void*)0x1000;
  d.coll.recvBuff = (void*)0x2000;
  d.coll.count = SIM_COUNT;
  d.coll.root = 0;
  d.coll.datatype = dtype;
  d.coll.nChannels = SIM_CHANNELS;
  d.coll.nWarps = 16;
  d.coll.algo = algo;
  d.coll.proto = proto;
  d.coll.parentGroup = group;
  void* h = drv_start(s->drv, s->ctx, &d);
  strcpy(func, "XXXX"), strcpy(dtype, "XXXX"), strcpy(algo, "XXXX"), strcpy(proto, "XXXX");
  return h;
}

static void* sim_proxy(void* arg) {
  sim_worker_t* w = arg;
  sim_t* s = w->sim;
  const drv_t* dv = s->drv;
  targs_t a = {0};
  void* ctrl = drv_start(dv, s->ctx, &(ncclProfilerEventDescr_v6_t){.type = ncclProfileProxyCtrl});
  a.appended = SIM_CHANNELS / SIM_PROXY_THREADS;
  drv_state(dv, ctrl, ncclProfilerProxyCtrlAppend, &a);
  drv_stop(dv, ctrl);
  for (int c = w->tidx; c < SIM_CHANNELS; c += SIM_PROXY_THREADS) {
    int is_send = c % 2 == 0;
    ncclProfilerEventDescr_v6_t d = desc(ncclProfileProxyOp, s->coll, s->rank);
    d.proxyOp.pid = getpid();
    d.proxyOp.channelId = (uint8_t)c;
    d.proxyOp.peer = (s->rank + 1) % 2;
    d.proxyOp.nSteps = SIM_STEPS;
    d.proxyOp.chunkSize = SIM_CHUNK;
    d.proxyOp.isSend = is_send;
    void* op = drv_start(dv, s->ctx, &d);
    if (op == NULL) atomic_fetch_add(&s->nulls, 1);
    drv_state(dv, op, ncclProfilerProxyOpInProgress_v4, &a);
    for (int st = 0; st < SIM_STEPS; st++) {
      d = desc(ncclProfileProxyStep, op, s->rank);
      d.proxyStep.step = st;
      void* step = drv_start(dv, s->ctx, &d);
      if (step == NULL) atomic_fetch_add(&s->nulls, 1);
      a.trans_size = 0;
      if (is_send) {
        drv_state(dv, step, ncclProfilerProxyStepSendGPUWait, &a);
        drv_state(dv, step, ncclProfilerProxyStepSendPeerWait_v4, &a);
        a.trans_size = SIM_CHUNK;
        drv_state(dv, step, ncclProfilerProxyStepSendWait, &a);
      } else {
        drv_state(dv, step, ncclProfilerProxyStepRecvWait, &a);
        a.trans_size = SIM_CHUNK;
        drv_state(dv, step, ncclProfilerProxyStepRecvFlushWait, &a);
        drv_state(dv, step, ncclProfilerProxyStepRecvGPUWait, &a);
      }
      /* The socket plugin's payload, rewritten after each call like the plugin's own struct. */
      ncclProfilerNetSockDescr_v1_t sock = {.type = ncclProfileSocket};
      sock.sock.fd = 40 + c;
      sock.sock.op = is_send;
      sock.sock.length = 0;
      d = desc(ncclProfileNetPlugin, step, s->rank);
      d.netPlugin.id = NCCL_PROFILER_NET_TYPE_SOCK | NCCL_PROFILER_NET_SOCKET_VER;
      d.netPlugin.data = &sock;
      void* net = drv_start(dv, s->ctx, &d);
      if (net == NULL) atomic_fetch_add(&s->nulls, 1);
      sock.sock.length = SIM_CHUNK;
      a.data = &sock;
      drv_state(dv, net, ncclProfilerNetPluginUpdate, &a);
      memset(&sock, 0, sizeof(sock));
      drv_stop(dv, net);
      drv_stop(dv, step);
    }
    drv_stop(dv, op);

    d = desc(ncclProfileKernelCh, s->coll, s->rank);
    d.kernelCh.channelId = (uint8_t)c;
    d.kernelCh.pTimer = 1000000 + (uint64_t)c;
    void* kch = drv_start(dv, s->ctx, &d);
    if (kch == NULL) atomic_fetch_add(&s->nulls, 1);
    a.ptimer = 1003000 + (uint64_t)c;
    drv_state(dv, kch, ncclProfilerKernelChStop, &a);
    drv_stop(dv, kch);
  }
  return NULL;
}

static void* sim_comm(void* arg) {
  sim_t* s = arg;
  const drv_t* dv = s->drv;
  int v = dv->version;
  targs_t none = {0};
  for (int it = 0; it < SIM_ITERS; it++) {
    void* gapi = NULL;
    ncclProfilerEventDescr_v6_t d;
    if (v >= 5) {
      d = desc(ncclProfileGroupApi, NULL, s->rank);
      d.groupApi.groupDepth = 1;
      gapi = drv_start(dv, s->ctx, &d);
      drv_state(dv, gapi, ncclProfilerGroupStartApiStop, &none);
    }
    void* capi = NULL;
    if (v >= 5) {
      char func[16] = "AllReduce";
      d = desc(ncclProfileCollApi, gapi, s->rank);
      d.collApi.func = func;
      d.collApi.count = SIM_COUNT;
      d.collApi.datatype = "ncclFloat32";
      d.collApi.root = 0;
      d.collApi.stream = (void*)0x5000;
      capi = drv_start(dv, s->ctx, &d);
      strcpy(func, "XXXX");
    }
    void* group = drv_start(
        dv, s->ctx, &(ncclProfilerEventDescr_v6_t){.type = ncclProfileGroup, .parentObj = gapi});
    /* v4 nests Coll/P2p under the Group; v5+ under the API event, with the Group beside. */
    void* coll = start_coll(s, v >= 5 ? capi : group, group, it);
    drv_stop(dv, coll);
    drv_stop(dv, capi);

    void* papi = NULL;
    if (v >= 5) {
      d = desc(ncclProfileP2pApi, gapi, s->rank);
      d.p2pApi.func = "Send";
      d.p2pApi.count = 256;
      d.p2pApi.datatype = "ncclInt8";
      d.p2pApi.stream = (void*)0x5000;
      papi = drv_start(dv, s->ctx, &d);
    }
    d = desc(ncclProfileP2p, v >= 5 ? papi : group, s->rank);
    d.p2p.func = "Send";
    d.p2p.buff = (void*)0x3000;
    d.p2p.datatype = "ncclInt8";
    d.p2p.count = 256;
    d.p2p.peer = 1;
    d.p2p.nChannels = 1;
    d.p2p.parentGroup = group;
    void* p2p = drv_start(dv, s->ctx, &d);
    drv_stop(dv, p2p);
    drv_stop(dv, papi);
    if (coll == NULL || p2p == NULL || group == NULL || (v >= 5 && (gapi == NULL || capi == NULL)))
      atomic_fetch_add(&s->nulls, 1);

    /* The proxy threads run while the application thread finishes the group. */
    s->coll = coll;
    pthread_t th[SIM_PROXY_THREADS];
    sim_worker_t w[SIM_PROXY_THREADS];
    for (int t = 0; t < SIM_PROXY_THREADS; t++) {
      w[t] = (sim_worker_t){s, t};
      pthread_create(&th[t], NULL, sim_proxy, &w[t]);
    }
    drv_state(dv, gapi, ncclProfilerGroupEndApiStart, &none);
    if (v >= 5) {
      d = desc(ncclProfileKernelLaunch, gapi, s->rank);
      d.kernelLaunch.stream = (void*)0x5000;
      drv_stop(dv, drv_start(dv, s->ctx, &d));
    }
    drv_stop(dv, group);
    drv_stop(dv, gapi);
    if (v >= 6) {
      char func[16] = "AllGather";
      d = desc(ncclProfileCeColl, NULL, s->rank);
      d.ceColl.seqNumber = (uint64_t)it;
      d.ceColl.func = func;
      d.ceColl.count = 4096;
      d.ceColl.datatype = "ncclBfloat16";
      d.ceColl.root = -1;
      d.ceColl.syncStrategy = "barrier";
      d.ceColl.batchSize = 2;
      d.ceColl.numBatches = 1;
      d.ceColl.ceSeqNum = 7;
      void* ce = drv_start(dv, s->ctx, &d);
      strcpy(func, "XXXX");
      d = desc(ncclProfileCeSync, ce, s->rank);
      d.ceCollSync.isComplete = true;
      d.ceCollSync.nRanks = 2;
      drv_stop(dv, drv_start(dv, s->ctx, &d));
      d = desc(ncclProfileCeBatch, ce, s->rank);
      d.ceCollBatch.numOps = 2;
      d.ceCollBatch.totalBytes = 8192;
      d.ceCollBatch.useIntraSync = true;
      drv_stop(dv, drv_start(dv, s->ctx, &d));
      drv_stop(dv, ce);
      if (ce == NULL) atomic_fetch_add(&s->nulls, 1);
    }
    for (int t = 0; t < SIM_PROXY_THREADS; t++) pthread_join(th[t], NULL);
  }
  return NULL;
}

/* ---- checks on one simulated communicator's trace ------------------------------------------ */

static void check_sim_trace(const trace_t* t, const char* comm, int version) {
  int per_iter_ops = SIM_CHANNELS, per_iter_steps = SIM_CHANNELS * SIM_STEPS;
  CHECK_EQ_INT(trace_count(t, comm, "Group", "Group"), SIM_ITERS);
  CHECK_EQ_INT(trace_count(t, comm, "Coll", "AllReduce"), SIM_ITERS);
  CHECK_EQ_INT(trace_count(t, comm, "P2p", "Send"), SIM_ITERS);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyOp", NULL), SIM_ITERS * per_iter_ops);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyOp", "ProxyOp Send"), SIM_ITERS * per_iter_ops / 2);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyStep", NULL), SIM_ITERS * per_iter_steps);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyStep", "ProxyStep Recv"), SIM_ITERS * per_iter_steps / 2);
  CHECK_EQ_INT(trace_count(t, comm, "NetPlugin", "NetPlugin Socket"), SIM_ITERS * per_iter_steps);
  CHECK_EQ_INT(trace_count(t, comm, "KernelCh", "KernelCh"), SIM_ITERS * SIM_CHANNELS);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyCtrl", "ProxyCtrl"), SIM_ITERS * SIM_PROXY_THREADS);
  /* States as nested phase slices. */
  CHECK_EQ_INT(trace_count(t, comm, "ProxyStepState", "SendGPUWait"),
               SIM_ITERS * per_iter_steps / 2);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyStepState", "SendPeerWait"),
               SIM_ITERS * per_iter_steps / 2);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyStepState", "RecvFlushWait"),
               SIM_ITERS * per_iter_steps / 2);
  CHECK_EQ_INT(trace_count(t, comm, "ProxyCtrlState", "Append"), SIM_ITERS * SIM_PROXY_THREADS);
  int api = version >= 5 ? SIM_ITERS : 0;
  CHECK_EQ_INT(trace_count(t, comm, "GroupApi", "ncclGroup"), api);
  CHECK_EQ_INT(trace_count(t, comm, "CollApi", "ncclAllReduce"), api);
  CHECK_EQ_INT(trace_count(t, comm, "P2pApi", "ncclSend"), api);
  CHECK_EQ_INT(trace_count(t, comm, "KernelLaunch", "KernelLaunch"), api);
  CHECK_EQ_INT(trace_count(t, comm, "GroupApiState", "ncclGroupStart"), api);
  CHECK_EQ_INT(trace_count(t, comm, "GroupApiState", "ncclGroupEnd"), api);
  int ce = version >= 6 ? SIM_ITERS : 0;
  CHECK_EQ_INT(trace_count(t, comm, "CeColl", "CE AllGather"), ce);
  CHECK_EQ_INT(trace_count(t, comm, "CeSync", "CeSync"), ce);
  CHECK_EQ_INT(trace_count(t, comm, "CeBatch", "CeBatch"), ce);

  bool seqs[SIM_ITERS] = {false};
  int checked_coll = 0, checked_step = 0, checked_net = 0, checked_kch = 0, checked_api = 0,
      checked_ce = 0;
  for (int i = 0; i < t->n; i++) {
    const tev_t* e = &t->ev[i];
    if (!is_x(e) || !same(e->comm, comm)) continue;
    const tev_t* parent = e->parent >= 0 ? trace_find(t, comm, e->parent) : NULL;
    if (same(e->cat, "Coll")) {
      CHECK_EQ_STR(jstr(e->args, "algo"), "RING");
      CHECK_EQ_STR(jstr(e->args, "proto"), "SIMPLE");
      CHECK_EQ_STR(jstr(e->args, "datatype"), "ncclFloat32");
      CHECK_EQ_INT(jint(e->args, "count", -1), SIM_COUNT);
      CHECK_EQ_INT(jint(e->args, "nChannels", -1), SIM_CHANNELS);
      CHECK_EQ_INT(jint(e->args, "nWarps", -1), 16);
      long long seq = jint(e->args, "seq", -1);
      CHECK_TRUE(seq >= 0 && seq < SIM_ITERS && !seqs[seq]);
      if (seq >= 0 && seq < SIM_ITERS) seqs[seq] = true;
      CHECK_TRUE(parent != NULL && same(parent->cat, version >= 5 ? "CollApi" : "Group"));
      if (version >= 5) {
        const tev_t* g = trace_find(t, comm, jint(e->args, "group", -1));
        CHECK_TRUE(g != NULL && same(g->cat, "Group"));
        /* The API call encloses the enqueue, on the API lane. */
        CHECK_TRUE(parent != NULL && contains(parent, e));
      }
      checked_coll++;
    } else if (same(e->cat, "ProxyOp")) {
      CHECK_TRUE(parent != NULL && same(parent->cat, "Coll"));
      CHECK_EQ_INT(jint(e->args, "nSteps", -1), SIM_STEPS);
      CHECK_EQ_INT(jint(e->args, "chunkSize", -1), SIM_CHUNK);
      CHECK_EQ_INT(jint(e->args, "pid", -1), getpid());
      CHECK_EQ_INT(jbool(e->args, "send") == 1, strcmp(e->name, "ProxyOp Send") == 0);
    } else if (same(e->cat, "ProxyStep")) {
      /* Nested in its op: same lane, inside its interval; same channel. */
      CHECK_TRUE(parent != NULL && same(parent->cat, "ProxyOp"));
      if (parent != NULL) {
        CHECK_EQ_INT(e->tid, parent->tid);
        CHECK_TRUE(contains(parent, e));
        CHECK_EQ_INT(jint(e->args, "channel", -1), jint(parent->args, "channel", -2));
      }
      CHECK_EQ_INT(jint(e->args, "transSize", -1), SIM_CHUNK);
      CHECK_TRUE(jint(e->args, "step", -1) >= 0 && jint(e->args, "step", -1) < SIM_STEPS);
      checked_step++;
    } else if (same(e->cat, "NetPlugin")) {
      CHECK_TRUE(parent != NULL && same(parent->cat, "ProxyStep"));
      if (parent != NULL) {
        CHECK_EQ_INT(e->tid, parent->tid);
        CHECK_TRUE(contains(parent, e));
      }
      CHECK_EQ_INT(jint(e->args, "length", -1), SIM_CHUNK); /* from the update */
      CHECK_EQ_INT(jint(e->args, "updates", -1), 1);
      CHECK_TRUE(jint(e->args, "fd", -1) >= 40 && jint(e->args, "fd", -1) < 40 + SIM_CHANNELS);
      checked_net++;
    } else if (same(e->cat, "KernelCh")) {
      CHECK_TRUE(parent != NULL && same(parent->cat, "Coll"));
      long long ch = jint(e->args, "channel", -1);
      CHECK_EQ_INT(jint(e->args, "gpuStart", -1), 1000000 + ch);
      CHECK_EQ_INT(jint(e->args, "gpuStop", -1), 1003000 + ch);
      checked_kch++;
    } else if (same(e->cat, "CollApi")) {
      CHECK_TRUE(parent != NULL && same(parent->cat, "GroupApi"));
      if (parent != NULL) CHECK_EQ_INT(e->tid, parent->tid);
      CHECK_EQ_STR(jstr(e->args, "datatype"), "ncclFloat32");
      CHECK_EQ_STR(jstr(e->args, "stream"), "0x5000");
      checked_api++;
    } else if (same(e->cat, "CeSync") || same(e->cat, "CeBatch")) {
      CHECK_TRUE(parent != NULL && same(parent->cat, "CeColl"));
      if (same(e->cat, "CeSync")) {
        CHECK_EQ_INT(jbool(e->args, "isComplete"), 1);
        CHECK_EQ_INT(jint(e->args, "nRanks", -1), 2);
      } else {
        CHECK_EQ_INT(jint(e->args, "totalBytes", -1), 8192);
      }
      checked_ce++;
    } else if (same(e->cat, "CeColl")) {
      CHECK_EQ_STR(jstr(e->args, "syncStrategy"), "barrier");
      CHECK_EQ_STR(jstr(e->args, "datatype"), "ncclBfloat16");
      CHECK_EQ_INT(jint(e->args, "ceSeqNum", -1), 7);
    } else if (same(e->cat, "ProxyStepState")) {
      /* A phase sits inside its step, on its lane. */
      const tev_t* owner = trace_find(t, comm, e->id);
      CHECK_TRUE(owner != NULL && same(owner->cat, "ProxyStep") && owner->tid == e->tid &&
                 contains(owner, e));
    }
    CHECK_TRUE(jint(e->args, "incomplete", 0) == 0 && jget(e->args, "incomplete") == NULL);
  }
  CHECK_EQ_INT(checked_coll, SIM_ITERS);
  CHECK_TRUE(checked_step > 0 && checked_net > 0 && checked_kch > 0);
  CHECK_EQ_INT(checked_api, api);
  CHECK_EQ_INT(checked_ce, 2 * ce);
}

static void make_path(char* buf, size_t size, const char* name) {
  snprintf(buf, size, "%s/%s", tmp_dir, name);
}

static void comm_str(char* buf, size_t size, uint64_t id) {
  snprintf(buf, size, "0x%016llx", (unsigned long long)id);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_symbols(void) {
  static const char* const want[] = {"ncclProfiler_v4", "ncclProfiler_v5", "ncclProfiler_v6"};
  for (int v = 4; v <= 6; v++) {
    CHECK_TRUE(drv[v].table != NULL);
    if (drv[v].table != NULL) CHECK_EQ_STR(*(const char* const*)drv[v].table, "choir-trace");
  }
  if (nm_path == NULL || nm_path[0] == '\0') {
    printf("nm not given: exported-symbol check skipped\n");
    return;
  }
  char cmd[1024];
  snprintf(cmd, sizeof(cmd), "'%s' -D --defined-only '%s'", nm_path, lib_path);
  FILE* p = popen(cmd, "r");
  CHECK_TRUE(p != NULL);
  if (p == NULL) return;
  char line[512];
  int found = 0, other = 0;
  while (fgets(line, sizeof(line), p) != NULL) {
    char addr[64], kind[8], name[256];
    if (sscanf(line, "%63s %7s %255s", addr, kind, name) != 3) continue;
    bool known = false;
    for (int i = 0; i < 3; i++) known = known || strcmp(name, want[i]) == 0;
    if (known) {
      found++;
    } else {
      other++;
      fprintf(stderr, "unexpected exported symbol: %s", line);
    }
  }
  CHECK_EQ_INT(pclose(p), 0);
  CHECK_EQ_INT(found, 3);
  CHECK_EQ_INT(other, 0);
}

static int init_mask(int version, const char* events) {
  if (events != NULL)
    setenv("CHOIR_PROFILER_EVENTS", events, 1);
  else
    unsetenv("CHOIR_PROFILER_EVENTS");
  char path[512];
  make_path(path, sizeof(path), "mask.json");
  setenv("CHOIR_PROFILER_FILE", path, 1);
  int mask = -1;
  void* ctx = NULL;
  CHECK_EQ_INT(drv_init(&drv[version], &ctx, 0x77, &mask, "mask", 1, 1, 0), ncclSuccess);
  if (ctx != NULL) drv_finalize(&drv[version], ctx);
  unsetenv("CHOIR_PROFILER_EVENTS");
  return mask;
}

static void test_mask(void) {
  const int dflt5 = ncclProfileGroup | ncclProfileColl | ncclProfileP2p | ncclProfileKernelCh |
                    ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                    ncclProfileKernelLaunch;
  CHECK_EQ_INT(init_mask(6, NULL), dflt5);
  CHECK_EQ_INT(init_mask(5, NULL), dflt5);
  CHECK_EQ_INT(init_mask(4, NULL), dflt5 & 0xff); /* v4 knows no API events */
  CHECK_EQ_INT(init_mask(6, "all"), 0x7fff);
  CHECK_EQ_INT(init_mask(5, "all"), 0xfff);
  CHECK_EQ_INT(init_mask(4, "all"), 0xff);
  CHECK_EQ_INT(init_mask(6, "coll,ProxyStep"), ncclProfileColl | ncclProfileProxyStep);
  CHECK_EQ_INT(init_mask(6, "default,^kernelch,^api"),
               ncclProfileGroup | ncclProfileColl | ncclProfileP2p);
  CHECK_EQ_INT(init_mask(6, "0x12"), 0x12);
  CHECK_EQ_INT(init_mask(6, "net+ce"), ncclProfileProxyOp | ncclProfileProxyStep |
                                           ncclProfileNetPlugin | ncclProfileCeColl |
                                           ncclProfileCeSync | ncclProfileCeBatch);
  CHECK_EQ_INT(init_mask(6, "none"), 0);
  log_clear();
  CHECK_EQ_INT(init_mask(6, "coll,bogus"), ncclProfileColl);
  CHECK_CONTAINS(log_buf, "unknown event 'bogus'");
  /* The init line names the communicator, the ABI version and the mask. */
  CHECK_CONTAINS(log_buf, "INFO PROFILER/Trace: comm mask (0x0000000000000077) rank 0/1: abi v6");
}

/* Two communicators at once (v6 and v5) plus a v4 one, each with its application thread and
 * proxy threads, all writing one file; finalized one by one, the file stays valid JSON and
 * keeps the communicators finalized before. */
static void test_tree(void) {
  char path[512];
  make_path(path, sizeof(path), "tree-%h-%p.json");
  setenv("CHOIR_PROFILER_FILE", path, 1);
  setenv("CHOIR_PROFILER_EVENTS", "all", 1);
  const int versions[3] = {6, 5, 4};
  const uint64_t ids[3] = {0x6666000000000006ull, 0x5555000000000005ull, 0x4444000000000004ull};
  /* v4 takes the name and hash in its own argument order; a quote and a backslash in a name
   * must come out as valid JSON. */
  const char* names[3] = {"tp0", "dp\"1\\", "v4comm"};
  sim_t sims[3];
  int masks[3];
  for (int c = 0; c < 3; c++) {
    memset(&sims[c], 0, sizeof(sims[c]));
    sims[c].drv = &drv[versions[c]];
    sims[c].rank = c;
    CHECK_EQ_INT(drv_init(sims[c].drv, &sims[c].ctx, ids[c], &masks[c], names[c], 2, 8, c),
                 ncclSuccess);
  }
  unsetenv("CHOIR_PROFILER_EVENTS");
  pthread_t th[3];
  for (int c = 0; c < 3; c++) pthread_create(&th[c], NULL, sim_comm, &sims[c]);
  for (int c = 0; c < 3; c++) pthread_join(th[c], NULL);
  for (int c = 0; c < 3; c++) CHECK_EQ_INT(atomic_load(&sims[c].nulls), 0);

  char file[600], host[256] = "unknown";
  gethostname(host, sizeof(host) - 1);
  char* dot = strchr(host, '.');
  if (dot != NULL && dot != host) *dot = '\0';
  snprintf(file, sizeof(file), "%s/tree-%s-%d.json", tmp_dir, host, (int)getpid());
  char comm[3][32];
  for (int c = 0; c < 3; c++) comm_str(comm[c], sizeof(comm[c]), ids[c]);

  for (int c = 0; c < 3; c++) {
    drv_finalize(sims[c].drv, sims[c].ctx);
    trace_t t;
    CHECK_TRUE(trace_load(file, &t));
    if (t.n == 0) continue;
    for (int k = 0; k <= c; k++) {
      const tev_t* info = trace_comm_info(&t, comm[k]);
      CHECK_TRUE(info != NULL);
      if (info == NULL) continue;
      CHECK_EQ_INT(jint(info->args, "abi", -1), versions[k]);
      CHECK_EQ_INT(jint(info->args, "dropped", -1), 0);
      CHECK_EQ_INT(jint(info->args, "rank", -1), k);
      CHECK_EQ_INT(jint(info->args, "nranks", -1), 8);
      CHECK_EQ_INT(jint(info->args, "nNodes", -1), 2);
      CHECK_EQ_STR(jstr(info->args, "name"), names[k]);
      CHECK_TRUE(jint(info->args, "events", -1) > 0);
      CHECK_EQ_INT(trace_count(&t, comm[k], "Coll", "AllReduce"), SIM_ITERS);
    }
    for (int k = c + 1; k < 3; k++) CHECK_TRUE(trace_comm_info(&t, comm[k]) == NULL);
    CHECK_EQ_INT(trace_check_lanes(&t), 0);
    if (c == 2) {
      for (int k = 0; k < 3; k++) check_sim_trace(&t, comm[k], versions[k]);
      /* Lanes are named after the communicator. */
      bool named = false;
      for (int i = 0; i < t.n && !named; i++)
        named = same(t.ev[i].name, "thread_name") &&
                same(jstr(t.ev[i].args, "name"), "dp\"1\\ r1 proxy ch 2 send");
      CHECK_TRUE(named);
      const jv_t* other = jget(&t.root, "otherData");
      CHECK_EQ_STR(jstr(other, "clock"), "monotonic");
      CHECK_EQ_INT(jint(other, "pid", -1), getpid());
    }
    trace_free(&t);
    check_python_json(file);
  }
  CHECK_EQ_INT(masks[0], 0x7fff);
  CHECK_EQ_INT(masks[1], 0xfff);
  CHECK_EQ_INT(masks[2], 0xff);
}

/* Disabled events get NULL handles and take no slot: with room for exactly the enabled ones,
 * nothing is dropped. */
static void test_disabled(void) {
  char path[512];
  make_path(path, sizeof(path), "disabled.json");
  setenv("CHOIR_PROFILER_FILE", path, 1);
  setenv("CHOIR_PROFILER_EVENTS", "coll,kernelch", 1);
  setenv("CHOIR_PROFILER_MAX_EVENTS", "4", 1);
  for (int v = 4; v <= 6; v++) {
    const drv_t* dv = &drv[v];
    void* ctx = NULL;
    int mask = 0;
    uint64_t id = 0xd15a000000000000ull | (uint64_t)v;
    CHECK_EQ_INT(drv_init(dv, &ctx, id, &mask, "disabled", 1, 1, 0), ncclSuccess);
    CHECK_EQ_INT(mask, ncclProfileColl | ncclProfileKernelCh);
    int nonnull = 0;
    static const uint64_t off[] = {
        ncclProfileGroup,        ncclProfileP2p,       ncclProfileProxyOp,  ncclProfileProxyStep,
        ncclProfileProxyCtrl,    ncclProfileNetPlugin, ncclProfileGroupApi, ncclProfileCollApi,
        ncclProfileKernelLaunch, ncclProfileCeColl};
    for (int rep = 0; rep < 100; rep++)
      for (size_t k = 0; k < sizeof(off) / sizeof(off[0]); k++) {
        if (off[k] > 0xff && v == 4) continue; /* not expressible in a v4 descriptor */
        if (off[k] >= ncclProfileCeColl && v == 5) continue;
        ncclProfilerEventDescr_v6_t d = desc(off[k], NULL, 0);
        nonnull += drv_start(dv, ctx, &d) != NULL;
      }
    /* Types that are not one bit, or unknown to the version, are not tracked either. */
    ncclProfilerEventDescr_v6_t bad = desc(ncclProfileColl | ncclProfileKernelCh, NULL, 0);
    nonnull += drv_start(dv, ctx, &bad) != NULL;
    bad = desc(0, NULL, 0);
    nonnull += drv_start(dv, ctx, &bad) != NULL;
    if (v == 5) {
      bad = desc(ncclProfileCeColl, NULL, 0);
      nonnull += drv_start(dv, ctx, &bad) != NULL;
    }
    CHECK_EQ_INT(nonnull, 0);
    int on = 0;
    for (int k = 0; k < 2; k++) {
      ncclProfilerEventDescr_v6_t d = desc(ncclProfileColl, NULL, 0);
      d.coll.func = "Broadcast";
      void* h = drv_start(dv, ctx, &d);
      on += h != NULL;
      d = desc(ncclProfileKernelCh, h, 0);
      void* k2 = drv_start(dv, ctx, &d);
      on += k2 != NULL;
      drv_stop(dv, k2);
      drv_stop(dv, h);
    }
    CHECK_EQ_INT(on, 4);
    log_clear();
    drv_finalize(dv, ctx);
    CHECK_EQ_INT(log_warns, 0);
    trace_t t;
    CHECK_TRUE(trace_load(path, &t));
    char comm[32];
    comm_str(comm, sizeof(comm), id);
    const tev_t* info = trace_comm_info(&t, comm);
    CHECK_TRUE(info != NULL);
    if (info != NULL) {
      CHECK_EQ_INT(jint(info->args, "events", -1), 4);
      CHECK_EQ_INT(jint(info->args, "dropped", -1), 0);
    }
    CHECK_EQ_INT(trace_count(&t, comm, NULL, NULL), 4);
    CHECK_EQ_INT(trace_count(&t, comm, "Coll", "Broadcast"), 2);
    trace_free(&t);
  }
  unsetenv("CHOIR_PROFILER_EVENTS");
  unsetenv("CHOIR_PROFILER_MAX_EVENTS");
}

typedef struct {
  const drv_t* drv;
  void* ctx;
  void* handles[64];
  int got;
} cap_worker_t;

static void* cap_thread(void* arg) {
  cap_worker_t* w = arg;
  for (int i = 0; i < 64; i++) {
    ncclProfilerEventDescr_v6_t d = desc(ncclProfileColl, NULL, 0);
    d.coll.func = "AllReduce";
    w->handles[i] = drv_start(w->drv, w->ctx, &d);
    w->got += w->handles[i] != NULL;
  }
  for (int i = 0; i < 64; i++) drv_stop(w->drv, w->handles[i]);
  return NULL;
}

#define RACE_THREADS 4
#define RACE_EVENTS 20000

typedef struct {
  const drv_t* drv;
  void* ctx;
  pthread_barrier_t* go;
  void** handles;
} race_worker_t;

static void* race_thread(void* arg) {
  race_worker_t* w = arg;
  pthread_barrier_wait(w->go);
  for (int i = 0; i < RACE_EVENTS; i++) {
    ncclProfilerEventDescr_v6_t d = desc(ncclProfileKernelCh, NULL, 0);
    d.kernelCh.channelId = (uint8_t)(i % 8);
    w->handles[i] = drv_start(w->drv, w->ctx, &d);
    drv_stop(w->drv, w->handles[i]);
  }
  return NULL;
}

static int cmp_ptr(const void* a, const void* b) {
  uintptr_t x = (uintptr_t) * (void*const*)a, y = (uintptr_t) * (void*const*)b;
  return x < y ? -1 : x > y;
}

/* Threads claiming slots of one communicator at the same moment never share one. */
static void test_claim_race(void) {
  char path[512];
  make_path(path, sizeof(path), "race.json");
  setenv("CHOIR_PROFILER_FILE", path, 1);
  const drv_t* dv = &drv[6];
  void* ctx = NULL;
  int mask = 0;
  CHECK_EQ_INT(drv_init(dv, &ctx, 0x9ace, &mask, "race", 1, 1, 0), ncclSuccess);
  void** handles = calloc(RACE_THREADS * RACE_EVENTS, sizeof(*handles));
  pthread_barrier_t go;
  pthread_barrier_init(&go, NULL, RACE_THREADS);
  pthread_t th[RACE_THREADS];
  race_worker_t w[RACE_THREADS];
  for (int i = 0; i < RACE_THREADS; i++) {
    w[i] = (race_worker_t){dv, ctx, &go, handles + (size_t)i * RACE_EVENTS};
    pthread_create(&th[i], NULL, race_thread, &w[i]);
  }
  for (int i = 0; i < RACE_THREADS; i++) pthread_join(th[i], NULL);
  pthread_barrier_destroy(&go);
  qsort(handles, RACE_THREADS * RACE_EVENTS, sizeof(*handles), cmp_ptr);
  int nulls = 0, dups = 0;
  for (int i = 0; i < RACE_THREADS * RACE_EVENTS; i++) {
    nulls += handles[i] == NULL;
    dups += i > 0 && handles[i] != NULL && handles[i] == handles[i - 1];
  }
  CHECK_EQ_INT(nulls, 0);
  CHECK_EQ_INT(dups, 0);
  free(handles);
  drv_finalize(dv, ctx);
  trace_t t;
  CHECK_TRUE(trace_load(path, &t));
  const tev_t* info = trace_comm_info(&t, "0x0000000000009ace");
  CHECK_TRUE(info != NULL);
  if (info != NULL) CHECK_EQ_INT(jint(info->args, "events", -1), RACE_THREADS * RACE_EVENTS);
  CHECK_EQ_INT(trace_count(&t, "0x0000000000009ace", "KernelCh", NULL), RACE_THREADS * RACE_EVENTS);
  CHECK_EQ_INT(trace_check_lanes(&t), 0);
  trace_free(&t);
}

/* The pool is fixed: past the cap, events are refused (NULL), counted and reported. */
static void test_cap(void) {
  char path[512];
  make_path(path, sizeof(path), "cap.json");
  setenv("CHOIR_PROFILER_FILE", path, 1);
  setenv("CHOIR_PROFILER_MAX_EVENTS", "100", 1);
  const drv_t* dv = &drv[6];
  void* ctx = NULL;
  int mask = 0;
  CHECK_EQ_INT(drv_init(dv, &ctx, 0xcafe, &mask, "capped", 1, 1, 0), ncclSuccess);
  cap_worker_t w[4];
  pthread_t th[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (cap_worker_t){.drv = dv, .ctx = ctx};
    pthread_create(&th[i], NULL, cap_thread, &w[i]);
  }
  int got = 0;
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    got += w[i].got;
  }
  CHECK_EQ_INT(got, 100);
  /* Every handle is distinct. */
  int dup = 0;
  for (int i = 0; i < 4 * 64; i++)
    for (int j = i + 1; j < 4 * 64; j++) {
      void* a = w[i / 64].handles[i % 64];
      dup += a != NULL && a == w[j / 64].handles[j % 64];
    }
  CHECK_EQ_INT(dup, 0);
  log_clear();
  drv_finalize(dv, ctx);
  CHECK_EQ_INT(log_warns, 1);
  CHECK_CONTAINS(log_buf, "156 events dropped, the limit of 100 was reached");
  trace_t t;
  CHECK_TRUE(trace_load(path, &t));
  const tev_t* info = trace_comm_info(&t, "0x000000000000cafe");
  CHECK_TRUE(info != NULL);
  if (info != NULL) {
    CHECK_EQ_INT(jint(info->args, "events", -1), 100);
    CHECK_EQ_INT(jint(info->args, "dropped", -1), 156);
    CHECK_EQ_INT(jint(info->args, "cap", -1), 100);
  }
  CHECK_EQ_INT(trace_count(&t, "0x000000000000cafe", "Coll", "AllReduce"), 100);
  trace_free(&t);
  check_python_json(path);
  /* A bad value warns and falls back to the default. */
  setenv("CHOIR_PROFILER_MAX_EVENTS", "lots", 1);
  log_clear();
  CHECK_EQ_INT(drv_init(dv, &ctx, 0xcaff, &mask, "capped", 1, 1, 0), ncclSuccess);
  CHECK_CONTAINS(log_buf, "CHOIR_PROFILER_MAX_EVENTS='lots' is not a count");
  drv_finalize(dv, ctx);
  unsetenv("CHOIR_PROFILER_MAX_EVENTS");
}

/* Events stopped after their parent, a parent from another process (PXN), an event never
 * stopped, more states than are kept: all safe, all in the trace. */
/* A v6 context of communicator comm_id recording every event into the trace file `name` (its
 * path in path[512]), with one collective started and stopped (enqueued: what hangs under it
 * comes later). */
static void* v6_ctx_with_coll(const char* name, uint64_t comm_id, char* path, void** coll_p) {
  make_path(path, 512, name);
  setenv("CHOIR_PROFILER_FILE", path, 1);
  setenv("CHOIR_PROFILER_EVENTS", "all", 1);
  void* ctx = NULL;
  int mask = 0;
  CHECK_EQ_INT(drv_init(&drv[5], &ctx, comm_id, &mask, NULL, 1, 1, 0), ncclSuccess);
  *coll_p = start_coll(&(sim_t){.drv = &drv[5], .ctx = ctx}, NULL, NULL, 0);
  drv_stop(&drv[5], *coll_p);
  return ctx;
}

static void test_edges(void) {
  char path[512];
  const drv_t* dv = &drv[5];
  void* coll;
  void* ctx = v6_ctx_with_coll("edges.json", 0xed9e, path, &coll);
  ncclProfilerEventDescr_v6_t d = desc(ncclProfileProxyOp, coll, 0);
  d.proxyOp.pid = getpid();
  void* op = drv_start(dv, ctx, &d);
  /* An op from another process (PXN): its parent pointer belongs to that process, even when it
   * happens to look like one of ours, and is neither dereferenced nor linked. */
  d = desc(ncclProfileProxyOp, coll, 0);
  d.proxyOp.pid = getpid() + 1;
  d.proxyOp.channelId = 3;
  void* pxn = drv_start(dv, ctx, &d);
  d = desc(ncclProfileProxyStep, op, 0);
  void* step = drv_start(dv, ctx, &d);
  targs_t a = {.trans_size = 8};
  for (int k = 0; k < 6; k++) drv_state(dv, step, ncclProfilerProxyStepSendWait, &a);
  drv_stop(dv, op); /* parent stopped before its child */
  drv_stop(dv, step);
  drv_stop(dv, pxn);
  d = desc(ncclProfileKernelCh, coll, 0);
  void* open = drv_start(dv, ctx, &d); /* never stopped */
  CHECK_TRUE(coll && op && pxn && step && open);
  drv_finalize(dv, ctx);
  trace_t t;
  CHECK_TRUE(trace_load(path, &t));
  const char* comm = "0x000000000000ed9e";
  CHECK_EQ_INT(trace_count(&t, comm, NULL, NULL), 5 + 4); /* 5 events and the step's 4 phases */
  for (int i = 0; i < t.n; i++) {
    const tev_t* e = &t.ev[i];
    if (!is_x(e) || !same(e->comm, comm)) continue;
    if (same(e->cat, "ProxyOp") && jint(e->args, "channel", -1) == 3)
      CHECK_TRUE(jget(e->args, "parent") == NULL);
    if (same(e->cat, "ProxyStep")) CHECK_EQ_INT(jint(e->args, "statesDropped", -1), 2);
    if (same(e->cat, "KernelCh")) CHECK_EQ_INT(jbool(e->args, "incomplete"), 1);
  }
  /* Unnamed communicators are labelled by their id. */
  bool labelled = false;
  for (int i = 0; i < t.n; i++)
    labelled = labelled || (same(t.ev[i].name, "thread_name") &&
                            same(jstr(t.ev[i].args, "name"), "comm 00000000 r0 enqueue"));
  CHECK_TRUE(labelled);
  CHECK_EQ_INT(trace_check_lanes(&t), 0);
  trace_free(&t);
  unsetenv("CHOIR_PROFILER_EVENTS");
}

/* Kernel channels are drawn over their GPU times, on the trace's clock: the GPU timer's offset
 * is taken from the channel read soonest after it stopped (its slice ends at its report), the
 * others keep their distance to it; a channel whose GPU times fall before the clock's origin
 * keeps its host times. */
static void test_kernel_ch_gpu_time(void) {
  char path[512];
  const drv_t* dv = &drv[5];
  void* coll;
  void* ctx = v6_ctx_with_coll("kch.json", 0x6c4, path, &coll);
  struct timespec mono;
  clock_gettime(CLOCK_MONOTONIC, &mono);
  const uint64_t mono_ns = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
  /* A GPU timer far from the host's clocks: channel 0 ran 7 us, channel 1 7 us starting 1 ms
   * before channel 0 (both reported now); channel 2's times lie before the trace's origin. */
  const uint64_t gpu = 4000000000000000000ull;
  const uint64_t start[3] = {gpu, gpu - 1000000u, 5000u};
  for (int c = 0; c < 3; c++) {
    ncclProfilerEventDescr_v6_t d = desc(ncclProfileKernelCh, coll, 0);
    d.kernelCh.channelId = (uint8_t)c;
    d.kernelCh.pTimer = start[c];
    void* k = drv_start(dv, ctx, &d);
    targs_t a = {.ptimer = d.kernelCh.pTimer + 7000u};
    drv_state(dv, k, ncclProfilerKernelChStop, &a);
    drv_stop(dv, k);
  }
  drv_finalize(dv, ctx);
  trace_t t;
  CHECK_TRUE(trace_load(path, &t));
  uint64_t ts[3] = {0, 0, 0}, dur[3] = {0, 0, 0};
  int seen = 0;
  for (int i = 0; i < t.n; i++) {
    const tev_t* e = &t.ev[i];
    const long long ch = jint(e->args, "channel", -1);
    if (!is_x(e) || !same(e->cat, "KernelCh") || ch < 0 || ch > 2) continue;
    seen++;
    ts[ch] = e->ts;
    dur[ch] = e->dur;
  }
  CHECK_EQ_INT(seen, 3);
  CHECK_EQ_INT((long long)dur[0], 7000);
  CHECK_EQ_INT((long long)dur[1], 7000);
  CHECK_EQ_INT((long long)(ts[0] - ts[1]), 1000000);
  /* Channel 0, reported first after its stop, ends at its report: after this test's start. */
  CHECK_MSG(ts[0] + dur[0] >= mono_ns, "KernelCh 0 ends at %llu, before the test began (%llu)",
            (unsigned long long)(ts[0] + dur[0]), (unsigned long long)mono_ns);
  CHECK_MSG(dur[2] < 7000 && ts[2] >= mono_ns, "KernelCh 2 keeps its host times (ts %llu, dur "
            "%llu)", (unsigned long long)ts[2], (unsigned long long)dur[2]);
  CHECK_EQ_INT(trace_check_lanes(&t), 0);
  trace_free(&t);
  unsetenv("CHOIR_PROFILER_EVENTS");
}

/* A communicator the process never finalizes is written at exit; a forked child does not write
 * its parent's communicators; CHOIR_PROFILER_FLUSH_AT_EXIT=0 turns the flush off. */
static void test_exit_flush(void) {
  char parent_path[512];
  make_path(parent_path, sizeof(parent_path), "parent.json");
  setenv("CHOIR_PROFILER_FILE", parent_path, 1);
  void* pctx = NULL;
  int mask = 0;
  CHECK_EQ_INT(drv_init(&drv[6], &pctx, 0x9a7e, &mask, "parent", 1, 1, 0), ncclSuccess);
  drv_stop(&drv[6],
           drv_start(&drv[6], pctx, &(ncclProfilerEventDescr_v6_t){.type = ncclProfileGroup}));

  for (int flush = 1; flush >= 0; flush--) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      char child_path[512];
      make_path(child_path, sizeof(child_path), "child-%p.json");
      setenv("CHOIR_PROFILER_FILE", child_path, 1);
      setenv("CHOIR_PROFILER_FLUSH_AT_EXIT", flush ? "1" : "0", 1);
      void* ctx = NULL;
      int m = 0;
      if (drv_init(&drv[6], &ctx, 0xc41d, &m, "child", 1, 1, 0) != ncclSuccess) _exit(3);
      void* g = drv_start(&drv[6], ctx, &(ncclProfilerEventDescr_v6_t){.type = ncclProfileGroup});
      drv_stop(&drv[6], g);
      drv_start(&drv[6], ctx, &(ncclProfilerEventDescr_v6_t){.type = ncclProfileGroup});
      exit(0); /* no finalize */
    }
    int status = 0;
    CHECK_TRUE(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char child_file[512];
    snprintf(child_file, sizeof(child_file), "%s/child-%d.json", tmp_dir, (int)pid);
    struct stat st;
    if (!flush) {
      CHECK_TRUE(stat(child_file, &st) != 0);
      continue;
    }
    trace_t t;
    CHECK_TRUE(trace_load(child_file, &t));
    CHECK_EQ_INT(trace_count(&t, "0x000000000000c41d", "Group", "Group"), 2);
    int incomplete = 0;
    for (int i = 0; i < t.n; i++) incomplete += jbool(t.ev[i].args, "incomplete") == 1;
    CHECK_EQ_INT(incomplete, 1);
    CHECK_TRUE(trace_comm_info(&t, "0x0000000000009a7e") == NULL);
    trace_free(&t);
    check_python_json(child_file);
  }
  unsetenv("CHOIR_PROFILER_FLUSH_AT_EXIT");
  struct stat st;
  CHECK_TRUE(stat(parent_path, &st) != 0); /* the children did not write it */
  drv_finalize(&drv[6], pctx);
  trace_t t;
  CHECK_TRUE(trace_load(parent_path, &t));
  CHECK_EQ_INT(trace_count(&t, "0x0000000000009a7e", "Group", "Group"), 1);
  trace_free(&t);
}

/* The core unloads the profiler between communicators; the next load appends to the same file
 * rather than truncating what earlier communicators wrote. */
static void test_reload(void) {
  char path[512];
  make_path(path, sizeof(path), "reload.json");
  setenv("CHOIR_PROFILER_FILE", path, 1);
  for (int round = 0; round < 2; round++) {
    void* h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
    CHECK_TRUE(h != NULL);
    if (h == NULL) return;
    drv_t d = {5, dlsym(h, "ncclProfiler_v5")};
    void* ctx = NULL;
    int mask = 0;
    CHECK_EQ_INT(drv_init(&d, &ctx, 0x1000 + (uint64_t)round, &mask, "reload", 1, 1, 0),
                 ncclSuccess);
    drv_stop(&d, drv_start(&d, ctx, &(ncclProfilerEventDescr_v6_t){.type = ncclProfileGroup}));
    drv_finalize(&d, ctx);
    dlclose(h);
  }
  trace_t t;
  CHECK_TRUE(trace_load(path, &t));
  CHECK_EQ_INT(trace_count(&t, "0x0000000000001000", "Group", NULL), 1);
  CHECK_EQ_INT(trace_count(&t, "0x0000000000001001", "Group", NULL), 1);
  trace_free(&t);
}

/* Choir's own loader finds the library at v6, by path and by its short name. */
static void test_loader(void) {
  plugin_lib_t lib;
  CHECK_EQ_INT(plugin_open(&plugin_kind_profiler, lib_path, true, &lib), ncclSuccess);
  CHECK_EQ_INT(lib.version, 6);
  CHECK_EQ_STR(lib.table_name, "choir-trace");
  plugin_close(&lib);
  const char* dir = getenv("CHOIR_PLUGIN_DIR");
  if (dir != NULL && dir[0] != '\0') {
    CHECK_EQ_INT(plugin_open(&plugin_kind_profiler, "trace", true, &lib), ncclSuccess);
    CHECK_EQ_INT(lib.version, 6);
    CHECK_CONTAINS(lib.path, "libnccl-profiler-trace.so");
    plugin_close(&lib);
  }
}

static void remove_tmp(void) {
  DIR* d = opendir(tmp_dir);
  if (d == NULL) return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[600];
    snprintf(p, sizeof(p), "%s/%s", tmp_dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(tmp_dir);
}

int main(int argc, char** argv) {
  lib_path = argc > 1 ? argv[1] : getenv("CHOIR_PROFILER_TRACE_LIB");
  python_path = argc > 2 ? argv[2] : NULL;
  nm_path = argc > 3 ? argv[3] : NULL;
  if (lib_path == NULL) {
    fprintf(stderr, "usage: %s <libnccl-profiler-trace.so> [python3] [nm]\n", argv[0]);
    return 1;
  }
  const char* tmp = getenv("TMPDIR");
  snprintf(tmp_dir, sizeof(tmp_dir), "%s/choir-prof-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (mkdtemp(tmp_dir) == NULL) {
    perror("mkdtemp");
    return 1;
  }
  void* h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", lib_path, dlerror());
    return 1;
  }
  for (int v = 4; v <= 6; v++) {
    char sym[32];
    snprintf(sym, sizeof(sym), "ncclProfiler_v%d", v);
    drv[v] = (drv_t){v, dlsym(h, sym)};
    if (drv[v].table == NULL) {
      fprintf(stderr, "%s does not export %s\n", lib_path, sym);
      return 1;
    }
  }
  unsetenv("CHOIR_PROFILER_EVENTS");
  unsetenv("CHOIR_PROFILER_MAX_EVENTS");
  unsetenv("CHOIR_PROFILER_CLOCK");
  unsetenv("CHOIR_PROFILER_FLUSH_AT_EXIT");

  test_symbols();
  test_mask();
  test_tree();
  test_disabled();
  test_cap();
  test_claim_race();
  test_edges();
  test_kernel_ch_gpu_time();
  test_exit_flush();
  /* Drop our reference: the reload below is then a real unload and load as far as the dynamic
   * loader is concerned (the library's -z nodelete keeps it mapped). */
  dlclose(h);
  for (int v = 4; v <= 6; v++) drv[v].table = NULL;
  test_reload();
  test_loader();

  int rc = check_finish("profiler-trace");
  if (rc == 0 && getenv("CHOIR_TEST_KEEP_TRACES") == NULL)
    remove_tmp();
  else
    fprintf(stderr, "traces kept in %s\n", tmp_dir);
  return rc;
}
