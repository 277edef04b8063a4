/*
 * A functional mock tuner, built once per ABI version (-DMOCK_TUNER_V=2..6), for core/tune's
 * tests (test_tune_tuner.c). What it does comes from the environment, read at init:
 *   MOCK_TUNER_FORCE="algo,proto,channels"  each field a name (ring, tree, ..., ll, ll128,
 *       simple), a number of channels, or '-' (keep the core's). Both algorithm and protocol:
 *       that entry of the cost table set to 0.0, whether usable or not (a tuner that does not
 *       check; v2 returns them). One of them: every entry of the other algorithms (protocols)
 *       set to -1.0. "none": every entry set to -1.0.
 *   MOCK_TUNER_INIT_FAIL=1     init returns ncclInternalError
 *   MOCK_TUNER_COLL_FAIL=1     getCollInfo returns ncclInvalidArgument
 *   MOCK_TUNER_CHUNK=N         (v6) getChunkSize answers N
 *   MOCK_TUNER_BASE_LL=x       (v5, v6) init writes x into baseLatencies[Ring][LL]
 *   MOCK_TUNER_PCI_SIMPLE=x    (v5, v6) init writes x into hwLatencies[PCI][Ring][Simple]
 * What it saw is kept in mock_tuner_state (exported), which the test reads through dlsym.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "nccl_tuner.h"

#ifndef MOCK_TUNER_V
#error "MOCK_TUNER_V must be set"
#endif

typedef struct mock_tuner_state {
  int inits, finalizes, coll_calls, chunk_calls;
  size_t nranks, nnodes;
  uint64_t comm_id;
  int nch_in; /* *nChannels as getCollInfo received it */
  int num_algo, num_proto;
  float table_in[NCCL_NUM_ALGORITHMS][NCCL_NUM_PROTOCOLS]; /* the last table received */
  ncclTunerConstants_v5_t consts;                          /* as init received them (v5+) */
  ncclNvlDomainInfo_v5_t nvl;
  int chunk_algo, chunk_proto, chunk_nch;
  size_t chunk_in;
} mock_tuner_state_t;

__attribute__((visibility("default"))) mock_tuner_state_t mock_tuner_state;

typedef struct {
  int algo, proto, nch; /* -1: keep */
  int none;
  int coll_fail;
  long chunk;
} mock_ctx_t;

static int mock_find(const char* s, const char* const* names, int n) {
  for (int i = 0; i < n; i++)
    if (strcasecmp(s, names[i]) == 0) return i;
  return -1;
}

static ncclResult_t mock_init_common(void** ctx) {
  mock_tuner_state.inits++;
  const char* fail = getenv("MOCK_TUNER_INIT_FAIL");
  if (fail != NULL && atoi(fail) != 0) return ncclInternalError;
  mock_ctx_t* c = calloc(1, sizeof(*c));
  if (c == NULL) return ncclSystemError;
  c->algo = c->proto = c->nch = -1;
  const char* force = getenv("MOCK_TUNER_FORCE");
  if (force != NULL && strcmp(force, "none") == 0) {
    c->none = 1;
  } else if (force != NULL) {
    static const char* const algos[] = {"tree",     "ring", "collnetdirect", "collnetchain", "nvls",
                                        "nvlstree", "pat"};
    static const char* const protos[] = {"ll", "ll128", "simple"};
    char buf[128];
    strncpy(buf, force, sizeof(buf) - 1);
    buf[sizeof(buf) - 1] = '\0';
    char* save = NULL;
    char* a = strtok_r(buf, ",", &save);
    char* p = strtok_r(NULL, ",", &save);
    char* n = strtok_r(NULL, ",", &save);
    if (a != NULL && strcmp(a, "-") != 0) c->algo = mock_find(a, algos, 7);
    if (p != NULL && strcmp(p, "-") != 0) c->proto = mock_find(p, protos, 3);
    if (n != NULL && strcmp(n, "-") != 0) c->nch = atoi(n);
  }
  const char* cf = getenv("MOCK_TUNER_COLL_FAIL");
  c->coll_fail = cf != NULL && atoi(cf) != 0;
  const char* ch = getenv("MOCK_TUNER_CHUNK");
  c->chunk = ch != NULL ? atol(ch) : -1;
  *ctx = c;
  return ncclSuccess;
}

#if MOCK_TUNER_V >= 3
static ncclResult_t mock_table(void* context, ncclFunc_t coll, size_t nBytes, float** costs,
                               int numAlgo, int numProto, int* nChannels) {
  (void)coll;
  (void)nBytes;
  mock_ctx_t* c = context;
  mock_tuner_state.coll_calls++;
  mock_tuner_state.nch_in = *nChannels;
  mock_tuner_state.num_algo = numAlgo;
  mock_tuner_state.num_proto = numProto;
  float(*t)[NCCL_NUM_PROTOCOLS] = (float(*)[NCCL_NUM_PROTOCOLS])costs;
  memcpy(mock_tuner_state.table_in, t, sizeof(mock_tuner_state.table_in));
  if (c->coll_fail) return ncclInvalidArgument;
  for (int a = 0; a < numAlgo; a++)
    for (int p = 0; p < numProto; p++) {
      if (c->none)
        t[a][p] = -1.0f;
      else if (c->algo >= 0 && c->proto >= 0 && a == c->algo && p == c->proto)
        t[a][p] = 0.0f;
      else if (c->algo >= 0 && c->proto < 0 && a != c->algo)
        t[a][p] = -1.0f;
      else if (c->proto >= 0 && c->algo < 0 && p != c->proto)
        t[a][p] = -1.0f;
    }
  if (c->nch >= 0) *nChannels = c->nch;
  return ncclSuccess;
}
#endif

static ncclResult_t mock_finalize(void* context) {
  mock_tuner_state.finalizes++;
  free(context);
  return ncclSuccess;
}

#if MOCK_TUNER_V <= 4
static ncclResult_t mock_init_v2(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** ctx) {
  (void)log;
  mock_tuner_state.nranks = nRanks;
  mock_tuner_state.nnodes = nNodes;
  return mock_init_common(ctx);
}
#else
static ncclResult_t mock_init_v5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                                 ncclDebugLogger_t log, ncclNvlDomainInfo_v5_t* nvl,
                                 ncclTunerConstants_v5_t* consts) {
  (void)log;
  mock_tuner_state.nranks = nRanks;
  mock_tuner_state.nnodes = nNodes;
  mock_tuner_state.comm_id = commId;
  mock_tuner_state.nvl = *nvl;
  mock_tuner_state.consts = *consts;
  const char* base = getenv("MOCK_TUNER_BASE_LL");
  if (base != NULL) consts->baseLatencies[NCCL_ALGO_RING][NCCL_PROTO_LL] = atof(base);
  const char* pci = getenv("MOCK_TUNER_PCI_SIMPLE");
  if (pci != NULL) consts->hwLatencies[NCCL_HW_PCI][NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = atof(pci);
  return mock_init_common(ctx);
}
#endif

#if MOCK_TUNER_V == 2
static ncclResult_t mock_coll_v2(void* context, ncclFunc_t coll, size_t nBytes, int collNet,
                                 int nvls, int numPipeOps, int* algorithm, int* protocol,
                                 int* nChannels) {
  (void)coll;
  (void)nBytes;
  (void)collNet;
  (void)nvls;
  (void)numPipeOps;
  mock_ctx_t* c = context;
  mock_tuner_state.coll_calls++;
  mock_tuner_state.nch_in = *nChannels;
  if (c->coll_fail) return ncclInvalidArgument;
  if (c->algo >= 0) *algorithm = c->algo;
  if (c->proto >= 0) *protocol = c->proto;
  if (c->nch >= 0) *nChannels = c->nch;
  return ncclSuccess;
}
__attribute__((visibility("default")))
const ncclTuner_v2_t ncclTunerPlugin_v2 = {"MockFn_v2", mock_init_v2, mock_coll_v2, mock_finalize};
#elif MOCK_TUNER_V == 3
static ncclResult_t mock_coll_v3(void* context, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                 float** costs, int numAlgo, int numProto, int* nChannels) {
  (void)numPipeOps;
  return mock_table(context, coll, nBytes, costs, numAlgo, numProto, nChannels);
}
__attribute__((visibility("default")))
const ncclTuner_v3_t ncclTunerPlugin_v3 = {"MockFn_v3", mock_init_v2, mock_coll_v3, mock_finalize};
#else
static ncclResult_t mock_coll_v4(void* context, ncclFunc_t coll, size_t nBytes, int numPipeOps,
                                 float** costs, int numAlgo, int numProto, int regBuff,
                                 int* nChannels) {
  (void)numPipeOps;
  (void)regBuff;
  return mock_table(context, coll, nBytes, costs, numAlgo, numProto, nChannels);
}
#if MOCK_TUNER_V == 4
__attribute__((visibility("default")))
const ncclTuner_v4_t ncclTunerPlugin_v4 = {"MockFn_v4", mock_init_v2, mock_coll_v4, mock_finalize};
#elif MOCK_TUNER_V == 5
__attribute__((visibility("default")))
const ncclTuner_v5_t ncclTunerPlugin_v5 = {"MockFn_v5", mock_init_v5, mock_coll_v4, mock_finalize};
#else
static ncclResult_t mock_chunk(void* context, ncclFunc_t coll, size_t nBytes, int algo, int proto,
                               int nChannels, size_t* chunkSize) {
  (void)coll;
  (void)nBytes;
  mock_ctx_t* c = context;
  mock_tuner_state.chunk_calls++;
  mock_tuner_state.chunk_algo = algo;
  mock_tuner_state.chunk_proto = proto;
  mock_tuner_state.chunk_nch = nChannels;
  mock_tuner_state.chunk_in = *chunkSize;
  if (c->chunk >= 0) *chunkSize = (size_t)c->chunk;
  return ncclSuccess;
}
__attribute__((visibility("default"))) const ncclTuner_v6_t ncclTunerPlugin_v6 = {
    "MockFn_v6", mock_init_v5, mock_coll_v4, mock_finalize, mock_chunk};
#endif
#endif
