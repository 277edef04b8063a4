/*
 * The generic plugin loader: name resolution, dlopen, versioned symbol lookup newest to oldest,
 * table validation, one log line per outcome.
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plugin.h"

static char plugin_dir_path[PATH_MAX];
static pthread_once_t plugin_dir_once = PTHREAD_ONCE_INIT;

static bool plugin_is_dir(const char* path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static const void* plugin_dir_anchor;

void plugin_dir_set_anchor(const void* addr) { plugin_dir_anchor = addr; }

static void plugin_dir_init(void) {
  const char* env = param_str(PARAM_PLUGIN_DIR);
  if (env != NULL) {
    sys_strlcpy(plugin_dir_path, env, sizeof(plugin_dir_path));
    return;
  }
  /* The directory of the object this code is linked into: libnccl.so.2 in production. */
  Dl_info info;
  const void* anchor = plugin_dir_anchor ? plugin_dir_anchor : (const void*)plugin_dir_init;
  if (dladdr(anchor, &info) == 0 || info.dli_fname == NULL) return;
  char base[PATH_MAX];
  if (realpath(info.dli_fname, base) == NULL) sys_strlcpy(base, info.dli_fname, sizeof(base));
  char* slash = strrchr(base, '/');
  if (slash == NULL) return;
  *slash = '\0';
  static const char* const subdirs[] = {"choir", "plugins"};
  for (size_t i = 0; i < sizeof(subdirs) / sizeof(subdirs[0]); i++) {
    char cand[PATH_MAX];
    if (snprintf(cand, sizeof(cand), "%s/%s", base, subdirs[i]) >= (int)sizeof(cand)) continue;
    if (plugin_is_dir(cand)) {
      sys_strlcpy(plugin_dir_path, cand, sizeof(plugin_dir_path));
      return;
    }
  }
}

const char* plugin_dir(void) {
  pthread_once(&plugin_dir_once, plugin_dir_init);
  return plugin_dir_path;
}

static bool plugin_is_lib_file_name(const char* s) {
  size_t n = strlen(s);
  return n > 6 && strncmp(s, "lib", 3) == 0 && strcmp(s + n - 3, ".so") == 0;
}

/* Accumulates the outcome of the attempts for one name, for a single message at the end. */
typedef struct {
  char not_found[1024];
  char other[1024];
} plugin_attempts_t;

static void plugin_note(char* buf, size_t size, const char* text) {
  size_t len = strlen(buf);
  if (len + 3 >= size) return;
  snprintf(buf + len, size - len, "%s%s", len ? "; " : "", text);
}

static void* plugin_try_dlopen(const char* file, plugin_attempts_t* att) {
  void* h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (h != NULL) return h;
  const char* err = dlerror();
  if (err == NULL) err = "unknown dlopen error";
  if (strstr(err, "No such file") != NULL || strstr(err, "cannot open shared object") != NULL)
    plugin_note(att->not_found, sizeof(att->not_found), file);
  else
    plugin_note(att->other, sizeof(att->other), err);
  return NULL;
}

static void* plugin_resolve(const plugin_kind_t* kind, const char* spec, plugin_attempts_t* att) {
  if (sys_strcasecmp(spec, "STATIC_PLUGIN") == 0) return dlopen(NULL, RTLD_NOW | RTLD_LOCAL);
  if (strchr(spec, '/') != NULL) return plugin_try_dlopen(spec, att);

  const char* dir = plugin_dir();
  char path[PATH_MAX];
  void* h = plugin_try_dlopen(spec, att);
  if (h == NULL && dir[0] != '\0' && snprintf(path, sizeof(path), "%s/%s", dir, spec) < PATH_MAX)
    h = plugin_try_dlopen(path, att);
  if (h != NULL || plugin_is_lib_file_name(spec)) return h;

  char name[PATH_MAX];
  if (snprintf(name, sizeof(name), "%s-%s.so", kind->lib_prefix, spec) >= (int)sizeof(name))
    return NULL;
  if (dir[0] != '\0' && snprintf(path, sizeof(path), "%s/%s", dir, name) < PATH_MAX)
    h = plugin_try_dlopen(path, att);
  if (h == NULL) h = plugin_try_dlopen(name, att);
  return h;
}

static void plugin_handle_path(void* handle, char* out, size_t size) {
  struct link_map* lm = NULL;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 && lm != NULL && lm->l_name != NULL &&
      lm->l_name[0] != '\0')
    sys_strlcpy(out, lm->l_name, size);
  else
    sys_strlcpy(out, "(main program)", size);
}

/* Report at WARN when the user asked for it (and keep it for ncclGetLastError), else at INFO. */
#define PLUGIN_REPORT(user_named, ...)                       \
  do {                                                       \
    if (user_named)                                          \
      WARN(__VA_ARGS__);                                     \
    else                                                     \
      INFO(NCCL_INIT | NCCL_ENV, __VA_ARGS__);               \
  } while (0)

static ncclResult_t plugin_find_table(const plugin_kind_t* kind, void* handle, const char* path,
                                      bool user_named, plugin_lib_t* lib_p) {
  for (int i = 0; kind->versions[i] != 0; i++) {
    char sym[128];
    snprintf(sym, sizeof(sym), "%s%d", kind->symbol_prefix, kind->versions[i]);
    const void* table = dlsym(handle, sym);
    if (table == NULL) continue;
    char why[256] = "";
    if (!kind->validate(table, kind->versions[i], why, sizeof(why))) {
      /* A malformed table is a broken plugin, whoever asked for it: always loud. */
      WARN("%s/Plugin: rejecting %s in %s: %s", kind->log_tag, sym, path, why);
      return ncclInvalidUsage;
    }
    lib_p->handle = handle;
    lib_p->version = kind->versions[i];
    lib_p->table = table;
    lib_p->table_name = *(const char* const*)table;
    sys_strlcpy(lib_p->path, path, sizeof(lib_p->path));
    INFO(NCCL_INIT | NCCL_ENV, "%s/Plugin: loaded %s '%s' from %s", kind->log_tag, sym,
         lib_p->table_name, path);
    return ncclSuccess;
  }
  /* Say whether the library is too old or simply not of this kind. */
  int oldest = kind->versions[0];
  for (int i = 0; kind->versions[i] != 0; i++) oldest = kind->versions[i];
  for (int v = oldest - 1; v >= 1; v--) {
    char sym[128];
    snprintf(sym, sizeof(sym), "%s%d", kind->symbol_prefix, v);
    if (dlsym(handle, sym) != NULL) {
      PLUGIN_REPORT(user_named,
                    "%s/Plugin: %s exports only %s, older than the oldest version Choir accepts "
                    "(%s%d)",
                    kind->log_tag, path, sym, kind->symbol_prefix, oldest);
      return ncclInvalidUsage;
    }
  }
  PLUGIN_REPORT(user_named, "%s/Plugin: %s has no %s%d..%d symbol: not a %s plugin",
                kind->log_tag, path, kind->symbol_prefix, kind->versions[0], oldest, kind->name);
  return ncclInvalidUsage;
}

ncclResult_t plugin_open(const plugin_kind_t* kind, const char* spec, bool user_named,
                         plugin_lib_t* lib_p) {
  plugin_attempts_t att = {{0}, {0}};
  void* handle = plugin_resolve(kind, spec, &att);
  if (handle == NULL) {
    if (att.other[0] != '\0')
      PLUGIN_REPORT(user_named, "%s/Plugin: could not load '%s': %s", kind->log_tag, spec,
                    att.other);
    else
      PLUGIN_REPORT(user_named, "%s/Plugin: could not find '%s' (tried: %s)", kind->log_tag,
                    spec, att.not_found);
    return ncclInvalidUsage;
  }
  char path[PATH_MAX];
  plugin_handle_path(handle, path, sizeof(path));
  plugin_lib_t lib;
  memset(&lib, 0, sizeof(lib));
  ncclResult_t res = plugin_find_table(kind, handle, path, user_named, &lib);
  if (res != ncclSuccess) {
    dlclose(handle);
    return res;
  }
  *lib_p = lib;
  return ncclSuccess;
}

ncclResult_t plugin_open_in(const plugin_kind_t* kind, const plugin_lib_t* host,
                            plugin_lib_t* lib_p) {
  void* handle = dlopen(host->path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (handle == NULL) {
    INFO(NCCL_INIT, "%s/Plugin: %s is no longer loaded", kind->log_tag, host->path);
    return ncclInvalidUsage;
  }
  plugin_lib_t lib;
  memset(&lib, 0, sizeof(lib));
  ncclResult_t res = plugin_find_table(kind, handle, host->path, false, &lib);
  if (res != ncclSuccess) {
    dlclose(handle);
    return res;
  }
  *lib_p = lib;
  return ncclSuccess;
}

void plugin_close(plugin_lib_t* lib) {
  if (lib->handle != NULL) dlclose(lib->handle);
  memset(lib, 0, sizeof(*lib));
}

ncclResult_t plugin_specs(const plugin_kind_t* kind, const char* value,
                          char specs[][PLUGIN_SPEC_MAX], int max_specs, int* nspecs_p,
                          bool* user_named_p) {
  int n = 0;
  if (value == NULL || value[0] == '\0') {
    snprintf(specs[n++], PLUGIN_SPEC_MAX, "%s.so", kind->lib_prefix);
    *user_named_p = false;
    *nspecs_p = n;
    return ncclSuccess;
  }
  *user_named_p = true;
  if (sys_strcasecmp(value, "none") == 0) {
    *nspecs_p = 0;
    return ncclSuccess;
  }
  char buf[4096];
  if (sys_strlcpy(buf, value, sizeof(buf)) >= sizeof(buf)) {
    WARN("%s/Plugin: plugin list '%.64s...' is longer than %zu characters", kind->log_tag, value,
         sizeof(buf) - 1);
    return ncclInvalidArgument;
  }
  /* Only the net kind takes a list; for the others a comma is part of the name. */
  const char* delims = kind == &plugin_kind_net ? "," : "";
  char* save = NULL;
  for (char* tok = strtok_r(buf, delims, &save); tok; tok = strtok_r(NULL, delims, &save)) {
    while (*tok == ' ') tok++;
    if (*tok == '\0') continue;
    if (n == max_specs) {
      WARN("%s/Plugin: more than %d plugins listed in '%s'", kind->log_tag, max_specs, value);
      return ncclInvalidArgument;
    }
    if (sys_strlcpy(specs[n], tok, PLUGIN_SPEC_MAX) >= PLUGIN_SPEC_MAX) {
      WARN("%s/Plugin: plugin name '%.64s...' is longer than %d characters", kind->log_tag, tok,
           PLUGIN_SPEC_MAX - 1);
      return ncclInvalidArgument;
    }
    n++;
  }
  *nspecs_p = n;
  return ncclSuccess;
}

bool plugin_check_slots(const void* table, size_t table_size, const char* const* slot_names,
                        const int* optional, int noptional, char* why, size_t why_size) {
  const void* const* slots = (const void* const*)table;
  size_t nslots = table_size / sizeof(void*);
  for (size_t i = 0; i < nslots; i++) {
    if (slots[i] != NULL) continue;
    bool opt = false;
    for (int k = 0; k < noptional; k++) opt |= (size_t)optional[k] == i;
    if (!opt) {
      snprintf(why, why_size, "required entry '%s' is NULL", slot_names[i]);
      return false;
    }
  }
  const char* name = (const char*)slots[0];
  if (name[0] == '\0') {
    snprintf(why, why_size, "the table's name is empty");
    return false;
  }
  return true;
}
