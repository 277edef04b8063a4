/*
 * ncclConfig_t -> comm_config_t. Read the caller's `size` bytes only, check the magic, ignore the
 * fields the caller's header version did not have, fill defaults, let the environment override
 * (as NCCL does), then validate every field with a message that names it.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"

/* Most CTAs (channels) a collective may use. */
#define COMM_MAX_CHANNELS 64
#define COMM_MAX_CGA_CLUSTER_SIZE 8
#define COMM_CONFIG_MAGIC 0xcafebeefu

static const comm_config_t comm_config_defaults = {
    .blocking = 1,
    .cga_cluster_size = 4,
    .min_ctas = 1,
    .max_ctas = COMM_MAX_CHANNELS,
    .net_name = NULL,
    .split_share = 0,
    .traffic_class = -1,
    .comm_name = NULL,
    .collnet_enable = 0,
    .cta_policy = NCCL_CTA_POLICY_DEFAULT,
    .shrink_share = 0,
    .nvls_ctas = 16,
    .nchannels_per_net_peer = -1,
    .nvlink_centric_sched = 0,
};

void comm_config_free(comm_config_t* c) {
  free(c->net_name);
  free(c->comm_name);
  c->net_name = c->comm_name = NULL;
}

static ncclResult_t comm_strdup(const char* s, char** out_p) {
  if (s == NULL) {
    *out_p = NULL;
    return ncclSuccess;
  }
  char* d = strdup(s);
  if (d == NULL) {
    WARN("out of host memory copying a configuration string");
    return ncclSystemError;
  }
  *out_p = d;
  return ncclSuccess;
}

ncclResult_t comm_config_copy(const comm_config_t* src, comm_config_t* dst_p) {
  comm_config_t c = *src;
  c.net_name = c.comm_name = NULL;
  if (comm_strdup(src->net_name, &c.net_name) != ncclSuccess ||
      comm_strdup(src->comm_name, &c.comm_name) != ncclSuccess) {
    comm_config_free(&c);
    return ncclSystemError;
  }
  *dst_p = c;
  return ncclSuccess;
}

/* An environment override of an integer field: the knob's value when set (saturated to int: the
 * messages show the value as given), else the field's. */
static void comm_env_override(param_id_t id, int* field) {
  if (!param_is_set(id)) return;
  int64_t v = param_int(id);
  *field = v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
}

/* No environment knob overrides the field. */
#define COMM_NO_ENV PARAM_COUNT

/* Names a field's value for a message, as the caller set it: "config.minCTAs = 8", or, when its
 * knob `env` overrode it, "NCCL_MIN_CTAS=8 (from the environment, overriding config.minCTAs)":
 * a caller who passed no config must learn which variable to fix. */
static const char* comm_value_str(char* buf, size_t size, const char* field, param_id_t env,
                                  int v) {
  if (env != COMM_NO_ENV && param_is_set(env))
    snprintf(buf, size, "%s=%lld (from the environment, overriding config.%s)",
             param_desc(env)->env, (long long)param_int(env), field);
  else
    snprintf(buf, size, "config.%s = %d", field, v);
  return buf;
}

static ncclResult_t comm_check_range(const char* func, const char* field, param_id_t env, int v,
                                     int lo, int hi) {
  if (v >= lo && v <= hi) return ncclSuccess;
  char what[192];
  bool from_env = env != COMM_NO_ENV && param_is_set(env);
  WARN("%s: %s is invalid; it must be in [%d, %d] (%s for the default)", func,
       comm_value_str(what, sizeof(what), field, env, v), lo, hi,
       from_env ? "unset the variable" : "or NCCL_CONFIG_UNDEF_INT");
  return ncclInvalidArgument;
}

ncclResult_t comm_config_build(const char* func, const ncclConfig_t* user,
                               const comm_config_t* inherit, comm_config_t* out_p) {
  if (user == NULL && inherit != NULL) return comm_config_copy(inherit, out_p);

  /* Start from an all-undefined config; take only what the caller's header had. */
  ncclConfig_t in = NCCL_CONFIG_INITIALIZER;
  if (user != NULL) {
    size_t size = user->size;
    if (user->magic != COMM_CONFIG_MAGIC) {
      WARN("%s: config was not initialized with NCCL_CONFIG_INITIALIZER (magic 0x%x, expected "
           "0x%x)", func, user->magic, COMM_CONFIG_MAGIC);
      return ncclInvalidArgument;
    }
    if (size < offsetof(ncclConfig_t, blocking) || size > (1u << 16)) {
      WARN("%s: config.size = %zu is invalid; set it with NCCL_CONFIG_INITIALIZER", func, size);
      return ncclInvalidArgument;
    }
    memcpy(&in, user, size < sizeof(in) ? size : sizeof(in));
    in.size = sizeof(in);
    /* Fields newer than the caller's header are garbage to us, whatever its size says. */
    unsigned v = user->version;
    if (v < NCCL_VERSION(2, 14, 0)) in.blocking = NCCL_CONFIG_UNDEF_INT;
    if (v < NCCL_VERSION(2, 17, 0)) {
      in.cgaClusterSize = in.minCTAs = in.maxCTAs = NCCL_CONFIG_UNDEF_INT;
      in.netName = NCCL_CONFIG_UNDEF_PTR;
    }
    if (v < NCCL_VERSION(2, 25, 0)) in.trafficClass = NCCL_CONFIG_UNDEF_INT;
    if (v < NCCL_VERSION(2, 27, 0))
      in.collnetEnable = in.CTAPolicy = in.shrinkShare = in.nvlsCTAs = NCCL_CONFIG_UNDEF_INT;
    if (v < NCCL_VERSION(2, 28, 0)) in.nChannelsPerNetPeer = in.nvlinkCentricSched = NCCL_CONFIG_UNDEF_INT;
  }

  comm_config_t c = comm_config_defaults;
#define TAKE(dst, src) \
  if ((src) != NCCL_CONFIG_UNDEF_INT) c.dst = (src)
  TAKE(blocking, in.blocking);
  TAKE(cga_cluster_size, in.cgaClusterSize);
  TAKE(min_ctas, in.minCTAs);
  TAKE(max_ctas, in.maxCTAs);
  TAKE(split_share, in.splitShare);
  TAKE(traffic_class, in.trafficClass);
  TAKE(collnet_enable, in.collnetEnable);
  TAKE(cta_policy, in.CTAPolicy);
  TAKE(shrink_share, in.shrinkShare);
  TAKE(nvls_ctas, in.nvlsCTAs);
  TAKE(nchannels_per_net_peer, in.nChannelsPerNetPeer);
  TAKE(nvlink_centric_sched, in.nvlinkCentricSched);
#undef TAKE

  /* The environment overrides the configuration, as in NCCL. */
  comm_env_override(PARAM_COMM_BLOCKING, &c.blocking);
  comm_env_override(PARAM_CGA_CLUSTER_SIZE, &c.cga_cluster_size);
  comm_env_override(PARAM_MIN_CTAS, &c.min_ctas);
  comm_env_override(PARAM_MAX_CTAS, &c.max_ctas);
  comm_env_override(PARAM_COMM_SPLIT_SHARE_RESOURCES, &c.split_share);
  comm_env_override(PARAM_CTA_POLICY, &c.cta_policy);
  comm_env_override(PARAM_COLLNET_ENABLE, &c.collnet_enable);
  comm_env_override(PARAM_NCHANNELS_PER_NET_PEER, &c.nchannels_per_net_peer);
  const char* net = param_str(PARAM_NET) ? param_str(PARAM_NET) : in.netName;

  char what[192], what2[192];
  if (c.max_ctas > COMM_MAX_CHANNELS) {
    INFO(NCCL_INIT, "%s: %s is above Choir's %d channels; using %d", func,
         comm_value_str(what, sizeof(what), "maxCTAs", PARAM_MAX_CTAS, c.max_ctas),
         COMM_MAX_CHANNELS, COMM_MAX_CHANNELS);
    c.max_ctas = COMM_MAX_CHANNELS;
  }
  CHECK(comm_check_range(func, "blocking", PARAM_COMM_BLOCKING, c.blocking, 0, 1));
  CHECK(comm_check_range(func, "cgaClusterSize", PARAM_CGA_CLUSTER_SIZE, c.cga_cluster_size, 0,
                         COMM_MAX_CGA_CLUSTER_SIZE));
  CHECK(comm_check_range(func, "minCTAs", PARAM_MIN_CTAS, c.min_ctas, 1, COMM_MAX_CHANNELS));
  CHECK(comm_check_range(func, "maxCTAs", PARAM_MAX_CTAS, c.max_ctas, 1, COMM_MAX_CHANNELS));
  if (c.min_ctas > c.max_ctas) {
    WARN("%s: %s is larger than %s", func,
         comm_value_str(what, sizeof(what), "minCTAs", PARAM_MIN_CTAS, c.min_ctas),
         comm_value_str(what2, sizeof(what2), "maxCTAs", PARAM_MAX_CTAS, c.max_ctas));
    return ncclInvalidArgument;
  }
  CHECK(
      comm_check_range(func, "splitShare", PARAM_COMM_SPLIT_SHARE_RESOURCES, c.split_share, 0, 1));
  CHECK(comm_check_range(func, "collnetEnable", PARAM_COLLNET_ENABLE, c.collnet_enable, 0, 1));
  CHECK(comm_check_range(func, "CTAPolicy", PARAM_CTA_POLICY, c.cta_policy, 0,
                         NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO));
  CHECK(comm_check_range(func, "shrinkShare", COMM_NO_ENV, c.shrink_share, 0, 1));
  CHECK(comm_check_range(func, "nvlsCTAs", COMM_NO_ENV, c.nvls_ctas, 1, COMM_MAX_CHANNELS));
  if (c.nchannels_per_net_peer != -1)
    CHECK(comm_check_range(func, "nChannelsPerNetPeer", PARAM_NCHANNELS_PER_NET_PEER,
                           c.nchannels_per_net_peer, 1, COMM_MAX_CHANNELS));
  CHECK(comm_check_range(func, "nvlinkCentricSched", COMM_NO_ENV, c.nvlink_centric_sched, 0, 1));
  if (c.traffic_class < -1) {
    WARN("%s: config.trafficClass = %d is invalid; use a non-negative class or "
         "NCCL_CONFIG_UNDEF_INT", func, c.traffic_class);
    return ncclInvalidArgument;
  }

  if (comm_strdup(net, &c.net_name) != ncclSuccess ||
      comm_strdup(in.commName, &c.comm_name) != ncclSuccess) {
    comm_config_free(&c);
    return ncclSystemError;
  }
  *out_p = c;
  return ncclSuccess;
}

ncclResult_t comm_config_check_net(const comm_config_t* c) {
  /* No name: nothing to check, and no plugin is opened (creation time matters). */
  if (c->net_name == NULL) return ncclSuccess;
  return transport_net_check_name(c->net_name);
}
