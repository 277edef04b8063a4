/*
 * Collective-network plugins (ncclCollNet v6..v12) as the core sees them: found in the net
 * plugin's library at their own version, initialized per communicator (emulated for v6..v10 as
 * for net), and driven through the v12 contract. A collnet that is absent, fails to initialize,
 * has no devices or a table unusable with devices disables collnet only.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_net_priv.h"

struct collnet {
  plugin_lib_t lib;
  void* ctx;       /* v11+ */
  bool shared_ref; /* v6..v10 */
  int ndev;
};

#define CN_T(v) ((const ncclCollNet_v##v##_t*)cn->lib.table)
#define CN_SAME(f)                       \
  (cn->lib.version == 6    ? CN_T(6)->f  \
   : cn->lib.version == 7  ? CN_T(7)->f  \
   : cn->lib.version == 8  ? CN_T(8)->f  \
   : cn->lib.version == 9  ? CN_T(9)->f  \
   : cn->lib.version == 10 ? CN_T(10)->f \
   : cn->lib.version == 11 ? CN_T(11)->f \
                           : CN_T(12)->f)
#define CN_CALL(cn, entry, call)                                                             \
  do {                                                                                       \
    ncclResult_t r_ = (call);                                                                \
    if (r_ != ncclSuccess) return net_call_failed("COLLNET", collnet_name(cn), (entry), r_); \
  } while (0)

/* Table slots per version, for the check made once the plugin reports devices. */
static const char* const collnet_slots_v6[] = {
    "name",       "init",          "devices", "getProperties", "listen",
    "connect",    "reduceSupport", "regMr",   "regMrDmaBuf",   "deregMr",
    "iallreduce", "iflush",        "test",    "closeColl",     "closeListen"};
static const char* const collnet_slots_v11[] = {
    "name",       "init",          "devices",        "getProperties", "listen",
    "connect",    "reduceSupport", "regMr",          "regMrDmaBuf",   "deregMr",
    "iallreduce", "iallgather",    "ireducescatter", "iflush",        "test",
    "closeColl",  "closeListen",   "makeVDevice",    "finalize"};
_Static_assert(sizeof(collnet_slots_v6) == sizeof(ncclCollNet_v6_t), "collnet v6 slots");
_Static_assert(sizeof(collnet_slots_v11) == sizeof(ncclCollNet_v12_t), "collnet v12 slots");

static bool collnet_check(const collnet_t* cn, char* why, size_t why_size) {
  int v = cn->lib.version;
  if (v <= 7) {
    static const int opt[] = {8}; /* regMrDmaBuf */
    return plugin_check_slots(cn->lib.table, sizeof(ncclCollNet_v6_t), collnet_slots_v6, opt, 1,
                              why, why_size);
  }
  /* v8 adds iallgather/ireducescatter, v9 makeVDevice, v11 finalize: prefixes of the v11 list. */
  static const int opt[] = {8, 17}; /* regMrDmaBuf, makeVDevice */
  size_t size = v == 8    ? sizeof(ncclCollNet_v8_t)
                : v <= 10 ? sizeof(ncclCollNet_v10_t)
                          : sizeof(ncclCollNet_v12_t);
  return plugin_check_slots(cn->lib.table, size, collnet_slots_v11, opt, 2, why, why_size);
}

static ncclResult_t collnet_init_once(const void* table, void* arg) {
  switch (*(const int*)arg) {
    case 6: return ((const ncclCollNet_v6_t*)table)->init(log_plugin_logger);
    case 7: return ((const ncclCollNet_v7_t*)table)->init(log_plugin_logger);
    case 8: return ((const ncclCollNet_v8_t*)table)->init(log_plugin_logger);
    case 9: return ((const ncclCollNet_v9_t*)table)->init(log_plugin_logger);
    default: return ((const ncclCollNet_v10_t*)table)->init(log_plugin_logger);
  }
}

static ncclResult_t collnet_open(net_t* net, collnet_t** cn_p) {
  collnet_t* cn = calloc(1, sizeof(*cn));
  if (cn == NULL) {
    WARN("COLLNET/Plugin: out of memory");
    return ncclSystemError;
  }
  ncclResult_t res = plugin_open_in(&plugin_kind_collnet, &net->lib, &cn->lib);
  if (res != ncclSuccess) goto err_free;
  int v = cn->lib.version;
  if (v == 11)
    res = CN_T(11)->init(&cn->ctx, net->comm_id, log_plugin_logger);
  else if (v >= 12)
    res = CN_T(12)->init(&cn->ctx, net->comm_id, log_plugin_logger);
  else
    res = net_shared_acquire(cn->lib.table, collnet_init_once, &cn->lib.version);
  if (res != ncclSuccess) {
    INFO(NCCL_INIT | NCCL_NET, "COLLNET/Plugin: init of %s (v%d) failed: %s; collnet disabled",
         collnet_name(cn), v, err_string(res));
    goto err_close;
  }
  cn->shared_ref = v <= 10;
  int ndev = 0;
  res = CN_SAME(devices)(&ndev);
  char why[256] = "";
  if (res != ncclSuccess || ndev <= 0) {
    INFO(NCCL_INIT | NCCL_NET, "COLLNET/Plugin: %s (v%d) has no devices%s; collnet disabled",
         collnet_name(cn), v, res != ncclSuccess ? " (devices() failed)" : "");
    goto err_fini;
  }
  if (!collnet_check(cn, why, sizeof(why))) {
    WARN("COLLNET/Plugin: rejecting %s (v%d) from %s: %s; collnet disabled", collnet_name(cn), v,
         cn->lib.path, why);
    goto err_fini;
  }
  cn->ndev = ndev;
  INFO(NCCL_INIT | NCCL_NET, "COLLNET/Plugin: using %s (v%d, %d devices)", collnet_name(cn), v,
       ndev);
  *cn_p = cn;
  return ncclSuccess;
err_fini:
  res = ncclInvalidUsage;
  if (v >= 11)
    (void)(v == 11 ? CN_T(11)->finalize : CN_T(12)->finalize)(cn->ctx);
  else
    net_shared_release(cn->lib.table);
err_close:
  plugin_close(&cn->lib);
err_free:
  free(cn);
  return res;
}

collnet_t* net_collnet(net_t* net) {
  if (!net->collnet_tried) {
    net->collnet_tried = true;
    if (collnet_open(net, &net->collnet) != ncclSuccess) net->collnet = NULL;
  }
  return net->collnet;
}

void collnet_close(collnet_t* cn) {
  if (cn == NULL) return;
  int v = cn->lib.version;
  if (v >= 11) {
    ncclResult_t res = (v == 11 ? CN_T(11)->finalize : CN_T(12)->finalize)(cn->ctx);
    if (res != ncclSuccess) (void)net_call_failed("COLLNET", collnet_name(cn), "finalize", res);
  } else if (cn->shared_ref) {
    net_shared_release(cn->lib.table);
  }
  plugin_close(&cn->lib);
  free(cn);
}

int collnet_version(const collnet_t* cn) { return cn->lib.version; }
int collnet_ndev(const collnet_t* cn) { return cn->ndev; }
const char* collnet_name(const collnet_t* cn) { return cn->lib.table_name; }

ncclResult_t collnet_props(collnet_t* cn, int dev, ncclNetProperties_v12_t* props_p) {
  net_props_any_t raw;
  memset(&raw, 0, sizeof(raw));
  ncclResult_t res;
  switch (cn->lib.version) {
    case 6: res = CN_T(6)->getProperties(dev, &raw.v6); break;
    case 7: res = CN_T(7)->getProperties(dev, &raw.v7); break;
    case 8: res = CN_T(8)->getProperties(dev, &raw.v8); break;
    case 9: res = CN_T(9)->getProperties(dev, &raw.v9); break;
    case 10: res = CN_T(10)->getProperties(dev, &raw.v10); break;
    case 11: res = CN_T(11)->getProperties(dev, &raw.v11); break;
    default: res = CN_T(12)->getProperties(dev, &raw.v12); break;
  }
  if (res != ncclSuccess) return net_call_failed("COLLNET", collnet_name(cn), "getProperties", res);
  return net_props_convert(collnet_name(cn), cn->lib.version, dev, &raw, props_p);
}

ncclResult_t collnet_listen(collnet_t* cn, int dev, void* handle, void** listen_comm_p) {
  void* comm = NULL;
  switch (cn->lib.version) {
    case 6: CN_CALL(cn, "listen", CN_T(6)->listen(dev, handle, &comm)); break;
    case 7: CN_CALL(cn, "listen", CN_T(7)->listen(dev, handle, &comm)); break;
    case 8: CN_CALL(cn, "listen", CN_T(8)->listen(dev, handle, &comm)); break;
    case 9: CN_CALL(cn, "listen", CN_T(9)->listen(dev, handle, &comm)); break;
    case 10: CN_CALL(cn, "listen", CN_T(10)->listen(dev, handle, &comm)); break;
    case 11: CN_CALL(cn, "listen", CN_T(11)->listen(cn->ctx, dev, handle, &comm)); break;
    default: CN_CALL(cn, "listen", CN_T(12)->listen(cn->ctx, dev, handle, &comm));
  }
  *listen_comm_p = comm;
  return ncclSuccess;
}

ncclResult_t collnet_connect(collnet_t* cn, void* handles[], int nranks, int rank,
                             void* listen_comm, void** coll_comm_p) {
  void* comm = NULL;
  CN_CALL(cn, "connect", CN_SAME(connect)(handles, nranks, rank, listen_comm, &comm));
  *coll_comm_p = comm;
  return ncclSuccess;
}

ncclResult_t collnet_reduce_support(collnet_t* cn, ncclDataType_t type, ncclRedOp_t op,
                                    int* supported_p) {
  int supported = 0;
  CN_CALL(cn, "reduceSupport", CN_SAME(reduceSupport)(type, op, &supported));
  *supported_p = supported;
  return ncclSuccess;
}

ncclResult_t collnet_reg_mr(collnet_t* cn, void* coll_comm, void* data, size_t size, int type,
                            void** mh_p) {
  void* mh = NULL;
  int v = cn->lib.version;
  if (v <= 7) {
    if (size > (size_t)INT_MAX) {
      WARN(
          "COLLNET/Plugin: cannot register %zu bytes with plugin %s: v%d registers at most %d "
          "bytes",
          size, collnet_name(cn), v, INT_MAX);
      return ncclInvalidUsage;
    }
    CN_CALL(cn, "regMr",
            (v == 6 ? CN_T(6)->regMr : CN_T(7)->regMr)(coll_comm, data, (int)size, type, &mh));
  } else {
    CN_CALL(cn, "regMr",
            (v == 8    ? CN_T(8)->regMr
             : v == 9  ? CN_T(9)->regMr
             : v == 10 ? CN_T(10)->regMr
             : v == 11 ? CN_T(11)->regMr
                       : CN_T(12)->regMr)(coll_comm, data, size, type, &mh));
  }
  *mh_p = mh;
  return ncclSuccess;
}

ncclResult_t collnet_reg_mr_dmabuf(collnet_t* cn, void* coll_comm, void* data, size_t size,
                                   int type, uint64_t offset, int fd, void** mh_p) {
  if (CN_SAME(regMrDmaBuf) == NULL)
    return net_unsupported("COLLNET", collnet_name(cn), cn->lib.version, "regMrDmaBuf");
  void* mh = NULL;
  CN_CALL(cn, "regMrDmaBuf", CN_SAME(regMrDmaBuf)(coll_comm, data, size, type, offset, fd, &mh));
  *mh_p = mh;
  return ncclSuccess;
}

ncclResult_t collnet_dereg_mr(collnet_t* cn, void* coll_comm, void* mh) {
  CN_CALL(cn, "deregMr", CN_SAME(deregMr)(coll_comm, mh));
  return ncclSuccess;
}

ncclResult_t collnet_iallreduce(collnet_t* cn, void* coll_comm, void* send_data, void* recv_data,
                                size_t count, ncclDataType_t type, ncclRedOp_t op, void* send_mh,
                                void* recv_mh, void** req_p) {
  void* req = NULL;
  int v = cn->lib.version;
  if (v <= 8) {
    if (count > (size_t)INT_MAX) {
      WARN("COLLNET/Plugin: cannot reduce %zu elements with plugin %s: v%d takes at most %d", count,
           collnet_name(cn), v, INT_MAX);
      return ncclInvalidUsage;
    }
    CN_CALL(cn, "iallreduce",
            (v == 6   ? CN_T(6)->iallreduce
             : v == 7 ? CN_T(7)->iallreduce
                      : CN_T(8)->iallreduce)(coll_comm, send_data, recv_data, (int)count, type, op,
                                             send_mh, recv_mh, &req));
  } else {
    CN_CALL(cn, "iallreduce",
            (v == 9    ? CN_T(9)->iallreduce
             : v == 10 ? CN_T(10)->iallreduce
             : v == 11 ? CN_T(11)->iallreduce
                       : CN_T(12)->iallreduce)(coll_comm, send_data, recv_data, count, type, op,
                                               send_mh, recv_mh, &req));
  }
  *req_p = req;
  return ncclSuccess;
}

/* Copy the v12 scatter-gather list into the version's own layout (allocated; *out_p to free). */
#define CN_SGE_COPY(ver, sizetype, max, out, in, n)                                        \
  do {                                                                                     \
    ncclNetSGE_v##ver##_t* o_ = calloc((size_t)(n) > 0 ? (size_t)(n) : 1, sizeof(*o_));    \
    if (o_ == NULL) {                                                                      \
      WARN("COLLNET/Plugin: out of memory");                                               \
      return ncclSystemError;                                                              \
    }                                                                                      \
    for (int i_ = 0; i_ < (n); i_++) {                                                     \
      if ((in)[i_].size > (max)) {                                                         \
        WARN("COLLNET/Plugin: piece %d of %zu bytes is too large for plugin %s (v%d)", i_, \
             (in)[i_].size, collnet_name(cn), cn->lib.version);                            \
        free(o_);                                                                          \
        return ncclInvalidUsage;                                                           \
      }                                                                                    \
      o_[i_].mhandle = (in)[i_].mhandle;                                                   \
      o_[i_].address = (in)[i_].address;                                                   \
      o_[i_].size = (sizetype)(in)[i_].size;                                               \
    }                                                                                      \
    (out) = o_;                                                                            \
  } while (0)

ncclResult_t collnet_iallgather(collnet_t* cn, void* coll_comm, void* send_data, int nrecv_parts,
                                ncclNetSGE_v12_t* recv_parts, size_t bytes_per_rank,
                                size_t window_offset, size_t window_bytes, void* send_mh,
                                void** req_p) {
  int v = cn->lib.version;
  if (v < 8) return net_unsupported("COLLNET", collnet_name(cn), v, "iallgather");
  void* req = NULL;
  ncclResult_t res;
#define CN_AG(ver, sizetype, max)                                                         \
  do {                                                                                    \
    ncclNetSGE_v##ver##_t* parts;                                                         \
    CN_SGE_COPY(ver, sizetype, max, parts, recv_parts, nrecv_parts);                      \
    res = CN_T(ver)->iallgather(coll_comm, send_data, nrecv_parts, parts, bytes_per_rank, \
                                window_offset, window_bytes, send_mh, &req);              \
    free(parts);                                                                          \
  } while (0)
  switch (v) {
    case 8: CN_AG(8, uint32_t, (size_t)UINT32_MAX); break;
    case 9: CN_AG(9, size_t, SIZE_MAX); break;
    case 10: CN_AG(10, size_t, SIZE_MAX); break;
    case 11: CN_AG(11, size_t, SIZE_MAX); break;
    default:
      res = CN_T(12)->iallgather(coll_comm, send_data, nrecv_parts, recv_parts, bytes_per_rank,
                                 window_offset, window_bytes, send_mh, &req);
  }
#undef CN_AG
  if (res != ncclSuccess) return net_call_failed("COLLNET", collnet_name(cn), "iallgather", res);
  *req_p = req;
  return ncclSuccess;
}

ncclResult_t collnet_ireducescatter(collnet_t* cn, void* coll_comm, int nsend_parts,
                                    ncclNetSGE_v12_t* send_parts, void* recv_data,
                                    size_t bytes_per_rank, size_t window_offset,
                                    size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                    void* recv_mh, void** req_p) {
  int v = cn->lib.version;
  if (v < 8) return net_unsupported("COLLNET", collnet_name(cn), v, "ireducescatter");
  void* req = NULL;
  ncclResult_t res;
#define CN_RS(ver, sizetype, max)                                                             \
  do {                                                                                        \
    ncclNetSGE_v##ver##_t* parts;                                                             \
    CN_SGE_COPY(ver, sizetype, max, parts, send_parts, nsend_parts);                          \
    res = CN_T(ver)->ireducescatter(coll_comm, nsend_parts, parts, recv_data, bytes_per_rank, \
                                    window_offset, window_bytes, type, op, recv_mh, &req);    \
    free(parts);                                                                              \
  } while (0)
  switch (v) {
    case 8: CN_RS(8, uint32_t, (size_t)UINT32_MAX); break;
    case 9: CN_RS(9, size_t, SIZE_MAX); break;
    case 10: CN_RS(10, size_t, SIZE_MAX); break;
    case 11: CN_RS(11, size_t, SIZE_MAX); break;
    default:
      res = CN_T(12)->ireducescatter(coll_comm, nsend_parts, send_parts, recv_data, bytes_per_rank,
                                     window_offset, window_bytes, type, op, recv_mh, &req);
  }
#undef CN_RS
  if (res != ncclSuccess)
    return net_call_failed("COLLNET", collnet_name(cn), "ireducescatter", res);
  *req_p = req;
  return ncclSuccess;
}

ncclResult_t collnet_iflush(collnet_t* cn, void* coll_comm, void* data, int size, void* mh,
                            void** req_p) {
  void* req = NULL;
  CN_CALL(cn, "iflush", CN_SAME(iflush)(coll_comm, data, size, mh, &req));
  *req_p = req;
  return ncclSuccess;
}

ncclResult_t collnet_test(collnet_t* cn, void* req, int* done_p, int* size_p) {
  int done = 0;
  CN_CALL(cn, "test", CN_SAME(test)(req, &done, size_p));
  *done_p = done;
  return ncclSuccess;
}

ncclResult_t collnet_close_coll(collnet_t* cn, void* coll_comm) {
  CN_CALL(cn, "closeColl", CN_SAME(closeColl)(coll_comm));
  return ncclSuccess;
}

ncclResult_t collnet_close_listen(collnet_t* cn, void* listen_comm) {
  CN_CALL(cn, "closeListen", CN_SAME(closeListen)(listen_comm));
  return ncclSuccess;
}
