/*
 * Parameters: every knob is declared once in base_param_table.h. Values come from the environment,
 * which NCCL_CONF_FILE (or ~/.nccl.conf, then /etc/nccl.conf) fills first without overriding what
 * is already set. Each knob is read at its first use and kept from then on.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static const param_desc_t param_table[PARAM_COUNT] = {
#define PARAM_INT(id, env, def, help) [PARAM_##id] = {env, PARAM_TYPE_INT, def, NULL, help},
#define PARAM_STR(id, env, def, help) [PARAM_##id] = {env, PARAM_TYPE_STR, 0, def, help},
#include PARAM_TABLE_HEADER
#undef PARAM_INT
#undef PARAM_STR
};

typedef struct {
  int loaded; /* read with acquire semantics; set under param_lock */
  bool is_set;
  int64_t v_int;
  const char* v_str; /* strdup'ed, kept for the life of the process */
} param_value_t;

static param_value_t param_values[PARAM_COUNT];
static pthread_mutex_t param_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t param_conf_once = PTHREAD_ONCE_INIT;

const param_desc_t* param_desc(param_id_t id) { return &param_table[id]; }

static void param_trim(char** s) {
  while (**s == ' ' || **s == '\t') (*s)++;
  char* e = *s + strlen(*s);
  while (e > *s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r')) *--e = '\0';
}

bool param_conf_line(char* line, char** key_p, char** val_p) {
  char* s = line;
  param_trim(&s);
  if (s[0] == '\0' || s[0] == '#') return false;
  char* eq = strchr(s, '=');
  if (eq == NULL) return false;
  *eq = '\0';
  char* key = s;
  char* val = eq + 1;
  param_trim(&key);
  param_trim(&val);
  if (key[0] == '\0') return false;
  *key_p = key;
  *val_p = val;
  return true;
}

bool param_int_parse(const char* s, long long* out) {
  char* end = NULL;
  errno = 0;
  long long x = strtoll(s, &end, 0);
  while (end && (*end == ' ' || *end == '\t')) end++;
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = x;
  return true;
}

static void param_apply_conf_file(const char* path) {
  FILE* f = fopen(path, "r");
  if (f == NULL) return;
  char line[4096];
  while (fgets(line, sizeof(line), f) != NULL) {
    char *key, *val;
    if (param_conf_line(line, &key, &val)) setenv(key, val, 0); /* the environment wins */
  }
  fclose(f);
}

static void param_conf_once_fn(void) {
  const char* conf = getenv(param_table[PARAM_CONF_FILE].env);
  if (conf != NULL && conf[0] != '\0') {
    param_apply_conf_file(conf);
  } else {
    const char* home = getenv("HOME");
    if (home != NULL) {
      char path[4096];
      snprintf(path, sizeof(path), "%s/.nccl.conf", home);
      param_apply_conf_file(path);
    }
  }
  param_apply_conf_file("/etc/nccl.conf");
}

void param_load_conf_files(void) { pthread_once(&param_conf_once, param_conf_once_fn); }

static void param_load(param_id_t id) {
  param_value_t* v = &param_values[id];
  if (__atomic_load_n(&v->loaded, __ATOMIC_ACQUIRE)) return;
  param_load_conf_files();
  const param_desc_t* d = &param_table[id];
  const char* bad = NULL;
  pthread_mutex_lock(&param_lock);
  if (v->loaded) goto out_unlock;
  const char* env = getenv(d->env);
  v->v_int = d->def_int;
  v->v_str = d->def_str;
  if (env != NULL && env[0] != '\0') {
    if (d->type == PARAM_TYPE_INT) {
      long long x;
      if (!param_int_parse(env, &x)) {
        bad = env;
      } else {
        v->v_int = x;
        v->is_set = true;
      }
    } else {
      char* copy = strdup(env);
      if (copy != NULL) {
        v->v_str = copy;
        v->is_set = true;
      }
    }
  }
  __atomic_store_n(&v->loaded, 1, __ATOMIC_RELEASE);
out_unlock:
  pthread_mutex_unlock(&param_lock);
  if (bad != NULL)
    WARN("%s=%s is not an integer; using the default %lld", d->env, bad, (long long)d->def_int);
  else if (v->is_set && d->type == PARAM_TYPE_INT)
    INFO(NCCL_ENV, "%s set by environment to %lld", d->env, (long long)v->v_int);
  else if (v->is_set)
    INFO(NCCL_ENV, "%s set by environment to %s", d->env, v->v_str);
}

int64_t param_int(param_id_t id) {
  param_load(id);
  return param_values[id].v_int;
}

const char* param_str(param_id_t id) {
  param_load(id);
  return param_values[id].v_str;
}

bool param_is_set(param_id_t id) {
  param_load(id);
  return param_values[id].is_set;
}
