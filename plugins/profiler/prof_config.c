/*
 * The plugin's own knobs (CHOIR_PROFILER_*), read with getenv at each communicator's init, and the
 * names of event kinds and states used in the trace. README.md documents every knob.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "prof.h"

#define PROF_DEFAULT_PATH "choir-trace-%h-%p.json"
#define PROF_DEFAULT_MAX_EVENTS (256u * 1024u)
#define PROF_MAX_MAX_EVENTS (16u * 1024u * 1024u)

static const char* const prof_kind_names[PROF_K_COUNT] = {
    "Group",     "Coll",         "P2p",       "ProxyOp",  "ProxyStep",
    "ProxyCtrl", "KernelCh",     "NetPlugin", "GroupApi", "CollApi",
    "P2pApi",    "KernelLaunch", "CeColl",    "CeSync",   "CeBatch"};

const char* prof_kind_name(int kind) {
  return kind >= 0 && kind < PROF_K_COUNT ? prof_kind_names[kind] : "Unknown";
}

const char* prof_state_name(int state) {
  switch (state) {
    case ncclProfilerProxyOpSendPosted: return "SendPosted";
    case ncclProfilerProxyOpSendRemFifoWait: return "SendRemFifoWait";
    case ncclProfilerProxyOpSendTransmitted: return "SendTransmitted";
    case ncclProfilerProxyOpSendDone: return "SendDone";
    case ncclProfilerProxyOpRecvPosted: return "RecvPosted";
    case ncclProfilerProxyOpRecvReceived: return "RecvReceived";
    case ncclProfilerProxyOpRecvTransmitted: return "RecvTransmitted";
    case ncclProfilerProxyOpRecvDone: return "RecvDone";
    case ncclProfilerProxyOpInProgress_v4: return "InProgress";
    case ncclProfilerProxyStepSendGPUWait: return "SendGPUWait";
    case ncclProfilerProxyStepSendPeerWait_v4: return "SendPeerWait";
    case ncclProfilerProxyStepSendWait: return "SendWait";
    case ncclProfilerProxyStepRecvWait: return "RecvWait";
    case ncclProfilerProxyStepRecvFlushWait: return "RecvFlushWait";
    case ncclProfilerProxyStepRecvGPUWait: return "RecvGPUWait";
    case ncclProfilerProxyCtrlIdle: return "Idle";
    case ncclProfilerProxyCtrlActive: return "Active";
    case ncclProfilerProxyCtrlSleep: return "Sleep";
    case ncclProfilerProxyCtrlWakeup: return "Wakeup";
    case ncclProfilerProxyCtrlAppend: return "Append";
    case ncclProfilerProxyCtrlAppendEnd: return "AppendEnd";
    case ncclProfilerNetPluginUpdate: return "NetPluginUpdate";
    case ncclProfilerKernelChStop: return "KernelChStop";
    case ncclProfilerGroupStartApiStop: return "GroupStartApiStop";
    case ncclProfilerGroupEndApiStart: return "GroupEndApiStart";
    case ncclProfilerCeCollStart: return "CeCollStart";
    case ncclProfilerCeCollComplete: return "CeCollComplete";
    case ncclProfilerCeSyncStart: return "CeSyncStart";
    case ncclProfilerCeSyncComplete: return "CeSyncComplete";
    case ncclProfilerCeBatchStart: return "CeBatchStart";
    case ncclProfilerCeBatchComplete: return "CeBatchComplete";
    default: return "Unknown";
  }
}

/* Names accepted in CHOIR_PROFILER_EVENTS besides the kind names (matched without case). */
static const struct {
  const char* name;
  uint32_t bits;
} prof_presets[] = {
    {"none", 0},
    {"default", PROF_MASK_DEFAULT},
    {"all", PROF_TYPES_V6},
    {"api", ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi | ncclProfileKernelLaunch},
    {"proxy", ncclProfileProxyOp | ncclProfileProxyStep},
    {"net", ncclProfileProxyOp | ncclProfileProxyStep | ncclProfileNetPlugin},
    {"ce", ncclProfileCeColl | ncclProfileCeSync | ncclProfileCeBatch},
};

static bool prof_lookup_event(const char* tok, uint32_t* bits_p) {
  for (int k = 0; k < PROF_K_COUNT; k++) {
    if (strcasecmp(tok, prof_kind_names[k]) == 0) {
      *bits_p = 1u << k;
      return true;
    }
  }
  for (size_t i = 0; i < sizeof(prof_presets) / sizeof(prof_presets[0]); i++) {
    if (strcasecmp(tok, prof_presets[i].name) == 0) {
      *bits_p = prof_presets[i].bits;
      return true;
    }
  }
  char* end;
  errno = 0;
  unsigned long v = strtoul(tok, &end, 0);
  if (errno == 0 && end != tok && *end == '\0' && isdigit((unsigned char)tok[0]) &&
      v <= PROF_TYPES_V6) {
    *bits_p = (uint32_t)v;
    return true;
  }
  return false;
}

uint32_t prof_config_parse_events(const char* text, ncclDebugLogger_t log) {
  uint32_t mask = 0;
  char buf[512];
  if (strlen(text) >= sizeof(buf)) {
    if (log != NULL)
      log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
          "PROFILER/Trace: CHOIR_PROFILER_EVENTS is longer than %zu characters; using 'default'",
          sizeof(buf) - 1);
    return PROF_MASK_DEFAULT;
  }
  memcpy(buf, text, strlen(text) + 1);
  char* save = NULL;
  for (char* tok = strtok_r(buf, ",|+ \t", &save); tok != NULL;
       tok = strtok_r(NULL, ",|+ \t", &save)) {
    bool remove = tok[0] == '^';
    uint32_t bits;
    if (!prof_lookup_event(tok + remove, &bits)) {
      if (log != NULL)
        log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
            "PROFILER/Trace: CHOIR_PROFILER_EVENTS: unknown event '%s' ignored (names: "
            "group,coll,p2p,proxyop,proxystep,proxyctrl,kernelch,netplugin,groupapi,collapi,"
            "p2papi,kernellaunch,cecoll,cesync,cebatch; sets: none,default,all,api,proxy,net,ce; "
            "or a number)",
            tok);
      continue;
    }
    mask = remove ? (mask & ~bits) : (mask | bits);
  }
  return mask;
}

static uint64_t prof_parse_count(const char* text, uint64_t dflt, ncclDebugLogger_t log) {
  char* end;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 10);
  if (errno == 0 && end != text && text[0] != '-') {
    if (*end == 'k' || *end == 'K') {
      v *= 1024, end++;
    } else if (*end == 'm' || *end == 'M') {
      v *= 1024 * 1024, end++;
    }
    if (*end == '\0' && v >= 1 && v <= PROF_MAX_MAX_EVENTS) return v;
  }
  if (log != NULL)
    log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
        "PROFILER/Trace: CHOIR_PROFILER_MAX_EVENTS='%s' is not a count from 1 to %u (k and M "
        "suffixes allowed); using %llu",
        text, PROF_MAX_MAX_EVENTS, (unsigned long long)dflt);
  return dflt;
}

/* Expands %h (host name up to the first dot), %p (pid) and %% into an absolute path. */
static bool prof_expand_path(const char* pattern, char* out, size_t size) {
  char host[256] = "unknown";
  if (gethostname(host, sizeof(host) - 1) == 0) {
    host[sizeof(host) - 1] = '\0';
    char* dot = strchr(host, '.');
    if (dot != NULL && dot != host) *dot = '\0';
  }
  size_t n = 0;
  if (pattern[0] != '/') {
    if (getcwd(out, size) == NULL) return false;
    n = strlen(out);
    if (n + 1 >= size) return false;
    if (n == 0 || out[n - 1] != '/') out[n++] = '/';
  }
  for (const char* p = pattern; *p != '\0'; p++) {
    char piece[64];
    const char* add = piece;
    if (p[0] == '%' && p[1] == 'h') {
      add = host, p++;
    } else if (p[0] == '%' && p[1] == 'p') {
      snprintf(piece, sizeof(piece), "%ld", (long)getpid());
      p++;
    } else if (p[0] == '%' && p[1] == '%') {
      piece[0] = '%', piece[1] = '\0';
      p++;
    } else {
      piece[0] = *p, piece[1] = '\0';
    }
    size_t len = strlen(add);
    if (n + len >= size) return false;
    memcpy(out + n, add, len);
    n += len;
  }
  out[n] = '\0';
  return true;
}

void prof_config_load(prof_config_t* cfg, ncclDebugLogger_t log) {
  const char* v = getenv("CHOIR_PROFILER_EVENTS");
  cfg->mask = (v != NULL && v[0] != '\0') ? prof_config_parse_events(v, log) : PROF_MASK_DEFAULT;

  v = getenv("CHOIR_PROFILER_MAX_EVENTS");
  cfg->max_events = (v != NULL && v[0] != '\0') ? prof_parse_count(v, PROF_DEFAULT_MAX_EVENTS, log)
                                                : PROF_DEFAULT_MAX_EVENTS;

  v = getenv("CHOIR_PROFILER_FILE");
  const char* pattern = (v != NULL && v[0] != '\0') ? v : PROF_DEFAULT_PATH;
  if (!prof_expand_path(pattern, cfg->path, sizeof(cfg->path))) {
    if (log != NULL)
      log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
          "PROFILER/Trace: CHOIR_PROFILER_FILE='%s' does not expand to a usable path; using '%s'",
          pattern, PROF_DEFAULT_PATH);
    if (!prof_expand_path(PROF_DEFAULT_PATH, cfg->path, sizeof(cfg->path)))
      snprintf(cfg->path, sizeof(cfg->path), "/tmp/choir-trace-%ld.json", (long)getpid());
  }

  v = getenv("CHOIR_PROFILER_CLOCK");
  cfg->clock = CLOCK_MONOTONIC;
  if (v != NULL && strcasecmp(v, "realtime") == 0) {
    cfg->clock = CLOCK_REALTIME;
  } else if (v != NULL && v[0] != '\0' && strcasecmp(v, "monotonic") != 0 && log != NULL) {
    log(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
        "PROFILER/Trace: CHOIR_PROFILER_CLOCK='%s' is neither 'monotonic' nor 'realtime'; using "
        "monotonic",
        v);
  }

  v = getenv("CHOIR_PROFILER_FLUSH_AT_EXIT");
  cfg->flush_at_exit = !(v != NULL && (strcmp(v, "0") == 0 || strcasecmp(v, "no") == 0 ||
                                       strcasecmp(v, "false") == 0));
}
