/*
 * choir-info: what this Choir build is and what it would do here. Prints the version, the build
 * configuration, the plugins it finds, and every knob with its value and help.
 *   choir-info            everything
 *   choir-info --params   only the knobs
 *   choir-info --plugins  only the plugins
 *   choir-info --markdown the knob reference, docs/knobs.md (defaults only: the same everywhere)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "choir_config.h"
#include "nccl.h"
#include "plugin.h"

extern char** environ;

static void info_version(void) {
  int code = 0;
  ncclGetVersion(&code);
  Dl_info lib;
  const char* path = dladdr((const void*)ncclGetVersion, &lib) && lib.dli_fname ? lib.dli_fname
                                                                               : "?";
  printf("Choir %s, NCCL API %s (ncclGetVersion: %d) in %s\n", CHOIR_VERSION,
         CHOIR_NCCL_API_VERSION, code, path);
  printf("build: %s, CUDA %s, architectures sm_%s, kernel instances: %s\n", CHOIR_BUILDTYPE,
         CHOIR_CUDA_VERSION, CHOIR_CUDA_ARCHS, CHOIR_KERNEL_SUBSET);
}

static const plugin_kind_t* const info_kinds[] = {&plugin_kind_net, &plugin_kind_collnet,
                                                  &plugin_kind_tuner, &plugin_kind_profiler};

/* Every plugin library in Choir's plugin directory, with the tables each one exports. The
 * libraries stay loaded until the tool exits (no plugin_close): unloading one also unloads its
 * dependencies (UCX, libfabric, rdma-core), whose constructors allocated memory that nothing
 * could reach any more, and LeakSanitizer reports that as leaked. */
static void info_plugins(void) {
  const char* dir = plugin_dir();
  printf("\nplugin directory: %s\n", dir[0] ? dir : "(not found)");
  DIR* d = dir[0] ? opendir(dir) : NULL;
  int found = 0;
  struct dirent* e;
  while (d != NULL && (e = readdir(d)) != NULL) {
    if (strncmp(e->d_name, "libnccl-", 8) != 0 || strstr(e->d_name, ".so") == NULL) continue;
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    for (size_t k = 0; k < sizeof(info_kinds) / sizeof(info_kinds[0]); k++) {
      plugin_lib_t lib;
      if (plugin_open(info_kinds[k], path, false, &lib) != ncclSuccess) continue;
      printf("  %-32s %-9s '%s' %s%d\n", e->d_name, info_kinds[k]->name, lib.table_name,
             info_kinds[k]->symbol_prefix, lib.version);
      found++;
    }
  }
  if (d != NULL) closedir(d);
  if (found == 0) printf("  (no plugin tables found)\n");

  printf("selection from the environment:\n");
  static const struct {
    const plugin_kind_t* kind;
    param_id_t param;
  } sel[] = {{&plugin_kind_net, PARAM_NET_PLUGIN},
             {&plugin_kind_tuner, PARAM_TUNER_PLUGIN},
             {&plugin_kind_profiler, PARAM_PROFILER_PLUGIN}};
  for (size_t i = 0; i < sizeof(sel) / sizeof(sel[0]); i++) {
    char specs[PLUGIN_MAX_SPECS][PLUGIN_SPEC_MAX];
    int n = 0;
    bool named = false;
    const char* value = param_str(sel[i].param);
    if (plugin_specs(sel[i].kind, value, specs, PLUGIN_MAX_SPECS, &n, &named) != ncclSuccess) {
      printf("  %-9s %s: invalid (%s)\n", sel[i].kind->name, param_desc(sel[i].param)->env,
             err_last());
      continue;
    }
    printf("  %-9s %s=%s:", sel[i].kind->name, param_desc(sel[i].param)->env,
           value ? value : "(unset)");
    if (n == 0) printf(" none");
    for (int s = 0; s < n; s++) {
      plugin_lib_t lib;
      if (plugin_open(sel[i].kind, specs[s], named, &lib) == ncclSuccess) {
        printf(" %s -> %s (%s%d)", specs[s], lib.path, sel[i].kind->symbol_prefix, lib.version);
      } else {
        printf(" %s -> not loadable", specs[s]);
      }
    }
    printf("\n");
  }
}

static bool info_is_known(const char* name, size_t len) {
  for (int i = 0; i < PARAM_COUNT; i++) {
    const char* env = param_desc((param_id_t)i)->env;
    if (strlen(env) == len && strncmp(env, name, len) == 0) return true;
  }
  return false;
}

static void info_params(void) {
  printf("\nknobs (value, then default and help):\n");
  for (int i = 0; i < PARAM_COUNT; i++) {
    const param_desc_t* d = param_desc((param_id_t)i);
    char value[256], def[128];
    if (d->type == PARAM_TYPE_INT) {
      snprintf(value, sizeof(value), "%lld", (long long)param_int((param_id_t)i));
      snprintf(def, sizeof(def), "%lld", (long long)d->def_int);
    } else {
      const char* v = param_str((param_id_t)i);
      snprintf(value, sizeof(value), "%s", v ? v : "(unset)");
      snprintf(def, sizeof(def), "%s", d->def_str ? d->def_str : "unset");
    }
    printf("  %-22s = %-20s %s\n  %-22s   default %s: %s\n", d->env, value,
           param_is_set((param_id_t)i) ? "(set)" : "", "", def, d->help);
  }
  /* NCCL_* variables in the environment that Choir does not read: often a drop-in surprise. */
  int unknown = 0;
  for (char** e = environ; *e != NULL; e++) {
    if (strncmp(*e, "NCCL_", 5) != 0) continue;
    const char* eq = strchr(*e, '=');
    size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
    if (info_is_known(*e, len)) continue;
    if (unknown++ == 0) printf("\nset but not read by this version of Choir:\n");
    printf("  %s\n", *e);
  }
}

/* Markdown table cells: '|' would end the cell. */
static void md_cell(const char* s) {
  for (; *s; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

static void info_markdown(void) {
  printf("# Knobs\n\n");
  printf("Every environment variable Choir's core reads, with its default. Generated by\n"
         "`choir-info --markdown` from the core's parameter table (`core/base/base_param_table.h`);\n"
         "a test keeps this file identical to that output. Variables can also be set in\n"
         "`NCCL_CONF_FILE` (default `~/.nccl.conf`, then `/etc/nccl.conf`); the environment wins.\n"
         "`choir-info --params` shows the values in effect. The plugins' own variables are in their\n"
         "READMEs (`plugins/*/README.md`).\n\n");
  printf("| Variable | Default | What it does |\n|---|---|---|\n");
  for (int i = 0; i < PARAM_COUNT; i++) {
    const param_desc_t* d = param_desc((param_id_t)i);
    printf("| `%s` | ", d->env);
    if (d->type == PARAM_TYPE_INT) {
      printf("%lld", (long long)d->def_int);
    } else if (d->def_str != NULL) {
      printf("`");
      md_cell(d->def_str);
      printf("`");
    } else {
      printf("unset");
    }
    printf(" | ");
    md_cell(d->help);
    printf(" |\n");
  }
}

int main(int argc, char** argv) {
  bool params = true, plugins = true, version = true;
  if (argc == 2 && strcmp(argv[1], "--markdown") == 0) {
    info_markdown();
    return 0;
  }
  if (argc > 1) {
    params = plugins = version = false;
    for (int i = 1; i < argc; i++) {
      if (strcmp(argv[i], "--params") == 0) {
        params = true;
      } else if (strcmp(argv[i], "--plugins") == 0) {
        plugins = true;
      } else if (strcmp(argv[i], "--version") == 0) {
        version = true;
      } else {
        fprintf(stderr, "choir-info: unknown option '%s' (use --params, --plugins, --version, or "
                "--markdown alone)\n",
                argv[i]);
        return 2;
      }
    }
  }
  /* Look for plugins next to the libnccl.so.2 this tool runs with, not next to the tool. */
  plugin_dir_set_anchor((const void*)ncclGetVersion);
  if (version) info_version();
  if (plugins) info_plugins();
  if (params) info_params();
  return 0;
}
