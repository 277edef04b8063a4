/*
 * libibverbs, opened at run time. net-ib never links it: on a machine without rdma-core the
 * plugin still loads, and reports no devices with one INFO line saying why.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nib.h"

nib_verbs_t nib_v;

static pthread_once_t nib_verbs_once = PTHREAD_ONCE_INIT;
static const char* nib_verbs_why = "not opened";
static bool nib_verbs_ok;
static char nib_verbs_err[256];

#define NIB_SYM(field, sym, required)                                            \
  do {                                                                           \
    *(void**)&nib_v.field = dlsym(nib_v.lib, sym);                               \
    if (nib_v.field == NULL && (required)) {                                     \
      snprintf(nib_verbs_err, sizeof(nib_verbs_err), "%s has no %s", name, sym); \
      nib_verbs_why = nib_verbs_err;                                             \
      return;                                                                    \
    }                                                                            \
  } while (0)

static void nib_verbs_load(void) {
  const char* name = getenv("CHOIR_IB_LIBVERBS");
  if (name == NULL || name[0] == '\0') name = "libibverbs.so.1";
  nib_v.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (nib_v.lib == NULL) {
    const char* e = dlerror();
    snprintf(nib_verbs_err, sizeof(nib_verbs_err), "%s could not be opened (%s)", name,
             e != NULL ? e : "?");
    nib_verbs_why = nib_verbs_err;
    return;
  }
  NIB_SYM(get_device_list, "ibv_get_device_list", true);
  NIB_SYM(free_device_list, "ibv_free_device_list", true);
  NIB_SYM(get_device_name, "ibv_get_device_name", true);
  NIB_SYM(get_device_guid, "ibv_get_device_guid", true);
  NIB_SYM(open_device, "ibv_open_device", true);
  NIB_SYM(close_device, "ibv_close_device", true);
  NIB_SYM(query_device, "ibv_query_device", true);
  NIB_SYM(query_port, "ibv_query_port", true);
  NIB_SYM(query_gid, "ibv_query_gid", true);
  NIB_SYM(query_gid_ex, "_ibv_query_gid_ex", false);
  NIB_SYM(alloc_pd, "ibv_alloc_pd", true);
  NIB_SYM(dealloc_pd, "ibv_dealloc_pd", true);
  NIB_SYM(reg_mr, "ibv_reg_mr", true);
  NIB_SYM(dereg_mr, "ibv_dereg_mr", true);
  NIB_SYM(create_cq, "ibv_create_cq", true);
  NIB_SYM(destroy_cq, "ibv_destroy_cq", true);
  NIB_SYM(create_qp, "ibv_create_qp", true);
  NIB_SYM(modify_qp, "ibv_modify_qp", true);
  NIB_SYM(destroy_qp, "ibv_destroy_qp", true);
  NIB_SYM(get_async_event, "ibv_get_async_event", true);
  NIB_SYM(ack_async_event, "ibv_ack_async_event", true);
  NIB_SYM(wc_status_str, "ibv_wc_status_str", true);
  NIB_SYM(event_type_str, "ibv_event_type_str", true);
  nib_verbs_ok = true;
  nib_verbs_why = NULL;
}

bool nib_verbs_open(const char** why) {
  pthread_once(&nib_verbs_once, nib_verbs_load);
  if (why != NULL) *why = nib_verbs_why;
  return nib_verbs_ok;
}

int nib_query_port(struct ibv_context* ctx, uint8_t port, struct ibv_port_attr* attr) {
  memset(attr, 0, sizeof(*attr));
  struct verbs_context* vctx = verbs_get_ctx_op(ctx, query_port);
  if (vctx != NULL) return vctx->query_port(ctx, port, attr, sizeof(*attr));
  return nib_v.query_port(ctx, port, (struct _compat_ibv_port_attr*)attr);
}
