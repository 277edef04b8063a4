/*
 * The collnet part of mock_net.c, at version MOCK_CV: a one-rank "collective network" (allreduce
 * copies, allgather fills every piece with the send data) recording what it was called with.
 */
#define CV MOCK_CV
#define CPROPS_T MOCK_CAT3(ncclNetProperties_v, CV, _t)

typedef struct {
  int size;
} mock_creq_t;

static ncclResult_t mock_creq(int size, void** request) {
  mock_creq_t* r = calloc(1, sizeof(*r));
  if (r == NULL) return ncclSystemError;
  r->size = size;
  *request = r;
  return ncclSuccess;
}

#if CV <= 10
static ncclResult_t mock_cinit(ncclDebugLogger_t log) {
  (void)log;
  stats.coll_init_calls++;
  return ncclSuccess;
}
static ncclResult_t mock_clisten(int dev, void* handle, void** listen_comm) {
  return mock_listen_common(dev, handle, listen_comm);
}
#else
static ncclResult_t mock_cinit(void** ctx, uint64_t comm_id, ncclDebugLogger_t log) {
  (void)log;
  stats.coll_init_calls++;
  mock_ctx_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->comm_id = comm_id;
  *ctx = c;
  return ncclSuccess;
}
static ncclResult_t mock_cfinalize(void* ctx) {
  stats.coll_finalize_calls++;
  free(ctx);
  return ncclSuccess;
}
static ncclResult_t mock_clisten(void* ctx, int dev, void* handle, void** listen_comm) {
  (void)ctx;
  return mock_listen_common(dev, handle, listen_comm);
}
#endif

static ncclResult_t mock_cprops(int dev, CPROPS_T* props) {
  if (dev < 0 || dev >= MOCK_NET_NDEV) return ncclInvalidArgument;
  MOCK_CAT(mock_fill_props_v, CV)(dev, props);
  return ncclSuccess;
}

static ncclResult_t mock_cconnect(void* handles[], int nranks, int rank, void* listen_comm,
                                  void** coll_comm) {
  (void)handles, (void)listen_comm;
  if (nranks != 1 || rank != 0) return ncclInvalidArgument;
  *coll_comm = calloc(1, 16);
  return *coll_comm ? ncclSuccess : ncclSystemError;
}

static ncclResult_t mock_creduce_support(ncclDataType_t type, ncclRedOp_t op, int* supported) {
  *supported = type == ncclFloat32 && op == ncclSum;
  return ncclSuccess;
}

#if CV <= 7
static ncclResult_t mock_creg(void* comm, void* data, int size, int type, void** mh) {
  (void)comm, (void)data, (void)type;
  stats.coll_last_reg_size = (size_t)size;
  return mock_reg_common((size_t)size, mh);
}
#else
static ncclResult_t mock_creg(void* comm, void* data, size_t size, int type, void** mh) {
  (void)comm, (void)data, (void)type;
  stats.coll_last_reg_size = size;
  return mock_reg_common(size, mh);
}
#endif

#if CV <= 8
#define CCOUNT_T int
#else
#define CCOUNT_T size_t
#endif
static ncclResult_t mock_iallreduce(void* comm, void* send, void* recv, CCOUNT_T count,
                                    ncclDataType_t type, ncclRedOp_t op, void* smh, void* rmh,
                                    void** request) {
  (void)comm, (void)type, (void)op, (void)smh, (void)rmh;
  stats.coll_last_count = (size_t)count;
  /* Large counts only test what reaches the plugin: nothing to copy behind them. */
  if ((size_t)count <= 4096) memcpy(recv, send, (size_t)count * sizeof(float));
  return mock_creq((int)((size_t)count * sizeof(float)), request);
}

#if CV >= 8
#define SGE_T MOCK_CAT3(ncclNetSGE_v, CV, _t)
static ncclResult_t mock_iallgather(void* comm, void* send, int nparts, SGE_T* parts,
                                    size_t bytes_per_rank, size_t window_offset,
                                    size_t window_bytes, void* smh, void** request) {
  (void)comm, (void)bytes_per_rank, (void)window_offset, (void)window_bytes, (void)smh;
  stats.coll_last_nparts = nparts;
  stats.coll_last_part_size = nparts > 0 ? (size_t)parts[0].size : 0;
  for (int i = 0; i < nparts; i++) memcpy(parts[i].address, send, (size_t)parts[i].size);
  return mock_creq((int)window_bytes, request);
}
static ncclResult_t mock_ireducescatter(void* comm, int nparts, SGE_T* parts, void* recv,
                                        size_t bytes_per_rank, size_t window_offset,
                                        size_t window_bytes, ncclDataType_t type, ncclRedOp_t op,
                                        void* rmh, void** request) {
  (void)comm, (void)bytes_per_rank, (void)window_offset, (void)type, (void)op, (void)rmh;
  stats.coll_last_nparts = nparts;
  stats.coll_last_part_size = nparts > 0 ? (size_t)parts[0].size : 0;
  if (nparts > 0) memcpy(recv, parts[0].address, (size_t)parts[0].size);
  return mock_creq((int)window_bytes, request);
}
#endif

static ncclResult_t mock_ciflush(void* comm, void* data, int size, void* mh, void** request) {
  (void)comm, (void)data, (void)mh;
  stats.flush_calls++;
  return mock_creq(size, request);
}

static ncclResult_t mock_ctest(void* request, int* done, int* size) {
  mock_creq_t* r = request;
  *done = 1;
  if (size != NULL) *size = r->size;
  free(r);
  return ncclSuccess;
}

static ncclResult_t mock_cclose(void* comm) {
  free(comm);
  return ncclSuccess;
}

#if CV >= 9
#define CVPROPS_T MOCK_CAT3(ncclNetVDeviceProps_v, CV, _t)
static ncclResult_t mock_cmake_vdevice(int* d, CVPROPS_T* props) {
  (void)props;
  *d = MOCK_NET_NDEV;
  return ncclSuccess;
}
#endif

EXPORT const MOCK_CAT3(ncclCollNet_v, CV, _t) MOCK_CAT(ncclCollNetPlugin_v, CV) = {
    .name = "MockColl_v" MOCK_STR(CV),
    .init = mock_cinit,
    .devices = mock_devices,
    .getProperties = mock_cprops,
    .listen = mock_clisten,
    .connect = mock_cconnect,
    .reduceSupport = mock_creduce_support,
    .regMr = mock_creg,
    .regMrDmaBuf = OPT(mock_reg_dmabuf),
    .deregMr = mock_dereg,
    .iallreduce = mock_iallreduce,
#if CV >= 8
    .iallgather = mock_iallgather,
    .ireducescatter = mock_ireducescatter,
#endif
    .iflush = mock_ciflush,
    .test = mock_ctest,
    .closeColl = mock_cclose,
    .closeListen = mock_close_listen,
#if CV >= 9
    .makeVDevice = OPT(mock_cmake_vdevice),
#endif
#if CV >= 11
    .finalize = mock_cfinalize,
#endif
};
