/*
 * topo-detect-gpu: detect the local machine (every visible GPU as ranks 0..n-1, real sysfs and
 * NVML), print the system, dump it, load the dump back, and check that the model is the same:
 * the same text, and for every GPU pair the same path type and NVLink count. Exit 77 without a
 * GPU. CHOIR_TOPO_EXPECT_NVL=N additionally requires every GPU to have N NVLinks and every pair
 * to be NVL (the nvidia-h200-x4 machine: 18).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "check.h"
#include "topo.h"

int main(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    printf("skipped: no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return CHECK_SKIP;
  }
  topo_rank_info_t* ranks = calloc((size_t)n, sizeof(*ranks));
  for (int d = 0; d < n; d++) {
    ranks[d].rank = d;
    ranks[d].cuda_dev = d;
    CHECK_EQ_INT(cuda_bus_id(d, &ranks[d].bus_id), ncclSuccess);
  }
  topo_xml_node_t* x = NULL;
  CHECK_EQ_INT(topo_detect(NULL, ranks, n, NULL, 0, &x), ncclSuccess);
  if (x == NULL) return check_finish("topo-detect-gpu");
  char tmp[] = "/tmp/choir-topo-gpu-XXXXXX";
  int fd = mkstemp(tmp);
  CHECK_TRUE(fd >= 0);
  close(fd);
  CHECK_EQ_INT(topo_xml_dump(x, tmp), ncclSuccess);
  char* xml_text = NULL;
  CHECK_EQ_INT(topo_xml_write(x, &xml_text, NULL), ncclSuccess);
  printf("%s", xml_text ? xml_text : "");
  topo_system_t* s = NULL;
  CHECK_EQ_INT(topo_system_from_xml(x, &s), ncclSuccess);
  topo_system_t* r = NULL;
  CHECK_EQ_INT(topo_system_from_xml_file(tmp, &r), ncclSuccess);
  unlink(tmp);
  if (s == NULL || r == NULL) return check_finish("topo-detect-gpu");
  char *a = NULL, *b = NULL;
  CHECK_EQ_INT(topo_system_format(s, &a), ncclSuccess);
  CHECK_EQ_INT(topo_system_format(r, &b), ncclSuccess);
  printf("%s", a ? a : "");
  CHECK_TRUE(a && b && strcmp(a, b) == 0);
  CHECK_EQ_INT(topo_gpu_count(s), n);
  CHECK_EQ_INT(topo_gpu_count(r), n);
  const char* expect = getenv("CHOIR_TOPO_EXPECT_NVL");
  int want = expect ? atoi(expect) : -1;
  for (int i = 0; i < n; i++) {
    int gi, ri;
    CHECK_EQ_INT(topo_rank_to_gpu(s, i, &gi), ncclSuccess);
    CHECK_EQ_INT(topo_rank_to_gpu(r, i, &ri), ncclSuccess);
    CHECK_EQ_INT(topo_gpu_nvlink_count(s, gi), topo_gpu_nvlink_count(r, ri));
    if (want >= 0) CHECK_EQ_INT(topo_gpu_nvlink_count(s, gi), want);
    for (int j = 0; j < n; j++) {
      int gj, rj;
      CHECK_EQ_INT(topo_rank_to_gpu(s, j, &gj), ncclSuccess);
      CHECK_EQ_INT(topo_rank_to_gpu(r, j, &rj), ncclSuccess);
      const topo_path_t* p = topo_path(s, TOPO_NODE_GPU, gi, TOPO_NODE_GPU, gj);
      const topo_path_t* q = topo_path(r, TOPO_NODE_GPU, ri, TOPO_NODE_GPU, rj);
      CHECK_EQ_INT(p->type, q->type);
      CHECK_EQ_INT(p->nhops, q->nhops);
      CHECK_MSG(p->bw == q->bw, "rank %d-%d bw %.1f vs %.1f after reload", i, j, (double)p->bw,
                (double)q->bw);
      if (want > 0 && i != j)
        CHECK_MSG(p->type == TOPO_PATH_NVL, "rank %d-%d path %s, expected NVL", i, j,
                  topo_path_type_name(p->type));
      printf("rank %d-%d: %s bw %.1f hops %d\n", i, j, topo_path_type_name(p->type),
             (double)p->bw, p->nhops);
    }
  }
  free(a);
  free(b);
  free(xml_text);
  free(ranks);
  topo_system_free(s);
  topo_system_free(r);
  return check_finish("topo-detect-gpu");
}
