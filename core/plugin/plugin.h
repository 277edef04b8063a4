/*
 * core/plugin: finding and opening plugin libraries and their versioned tables.
 *
 * One generic path serves every kind (net, collnet, tuner, profiler), and Choir's own plugins go
 * through it exactly like third-party ones. A kind is described by a plugin_kind_t: library
 * prefix, symbol prefix, accepted versions newest first, and a validator for its tables.
 *
 * Resolution of one name V (NCCL_<KIND>_PLUGIN entries, or the defaults):
 *   - V contains '/': that path only;
 *   - else V as given (the dynamic loader's search), then V in Choir's plugin directory,
 *     then, unless V already looks like lib*.so, lib<prefix>-V.so in Choir's plugin
 *     directory and through the dynamic loader's search.
 * Choir's plugin directory: CHOIR_PLUGIN_DIR, else choir/ next to libnccl.so.2 (installed
 * layout), else plugins/ next to it (build tree).
 */
#ifndef CHOIR_PLUGIN_H
#define CHOIR_PLUGIN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "base.h"

#define PLUGIN_MAX_VERSIONS 16
#define PLUGIN_MAX_SPECS 16
#define PLUGIN_SPEC_MAX 256

typedef struct plugin_kind {
  const char* name;          /* "net", for messages */
  const char* log_tag;       /* "NET", prefix of log lines */
  const char* lib_prefix;    /* "libnccl-net" */
  const char* symbol_prefix; /* "ncclNetPlugin_v" */
  int versions[PLUGIN_MAX_VERSIONS]; /* accepted, newest first, 0-terminated */
  /* Checks a table found under symbol_prefix<version>. On failure writes the reason to `why`. */
  bool (*validate)(const void* table, int version, char* why, size_t why_size);
} plugin_kind_t;

extern const plugin_kind_t plugin_kind_net;
extern const plugin_kind_t plugin_kind_collnet;
extern const plugin_kind_t plugin_kind_tuner;
extern const plugin_kind_t plugin_kind_profiler;

/* One opened library and the table found in it. */
typedef struct plugin_lib {
  void* handle;           /* our dlopen reference, released by plugin_close */
  char path[PATH_MAX];    /* the file the loader actually opened */
  int version;            /* version of the table found */
  const void* table;      /* the table, inside the library */
  const char* table_name; /* the table's own name field */
} plugin_lib_t;

/* Choir's own plugin directory, or "" when it cannot be determined. */
const char* plugin_dir(void);
/* Anchor the search for Choir's plugin directory at the object containing `addr` (default: the
 * object this code is linked into, libnccl.so.2). For tools linking the core statically. Must be
 * called before the first plugin_dir(). */
void plugin_dir_set_anchor(const void* addr);

/*
 * Open the library named `spec` (see the rules above) and find the newest accepted table of
 * `kind` in it. `user_named`: the user asked for this library, so failures are WARNings rather
 * than INFO. Returns ncclSuccess and fills *lib_p, or ncclInvalidUsage with the reason logged
 * (and stored for ncclGetLastError when user_named).
 */
ncclResult_t plugin_open(const plugin_kind_t* kind, const char* spec, bool user_named,
                         plugin_lib_t* lib_p);

/* Look for a table of `kind` in the library already opened as `host` (tuner or profiler inside a
 * net plugin; collnet next to net). Takes its own reference on the library. */
ncclResult_t plugin_open_in(const plugin_kind_t* kind, const plugin_lib_t* host,
                            plugin_lib_t* lib_p);

void plugin_close(plugin_lib_t* lib);

/*
 * The list of library names to try for a kind, from the environment value `value` (may be
 * NULL): a comma list for net, a single name otherwise. "none" (any case) gives an empty list.
 * Unset gives the default "lib<prefix>.so". user_named_p tells whether the user chose them.
 */
ncclResult_t plugin_specs(const plugin_kind_t* kind, const char* value,
                          char specs[][PLUGIN_SPEC_MAX], int max_specs, int* nspecs_p,
                          bool* user_named_p);

/* Generic table check: slot 0 (the name) and every slot not in `optional` must be non-NULL.
 * Tables of every kind are a name pointer followed by function pointers. */
bool plugin_check_slots(const void* table, size_t table_size, const char* const* slot_names,
                        const int* optional, int noptional, char* why, size_t why_size);

/* The net plugins' interface lives in its own header; the rest of the core reaches it here. */
#include "plugin_net.h"

#endif
