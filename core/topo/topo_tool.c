/*
 * choir-topo: detect or load a topology, print the model, optionally dump the XML.
 *   choir-topo --detect [--dump FILE] [--sysfs DIR] [--cpuinfo FILE] [--no-nvml]
 *   choir-topo --load FILE [--dump FILE]
 * --detect takes every visible GPU as ranks 0..n-1 (no NICs: net plugins are not loaded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo.h"

static int usage(void) {
  fprintf(stderr,
          "usage: choir-topo --detect [--dump FILE] [--sysfs DIR] [--cpuinfo FILE] [--no-nvml]\n"
          "       choir-topo --load FILE [--dump FILE]\n");
  return 2;
}

int main(int argc, char** argv) {
  const char* load = NULL;
  const char* dump = NULL;
  bool detect = false;
  topo_detect_env_t env = {0};
  for (int i = 1; i < argc; i++) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--detect") == 0) detect = true;
    else if (strcmp(a, "--no-nvml") == 0) env.no_nvml = 1;
    else if (v != NULL && strcmp(a, "--load") == 0) load = argv[++i];
    else if (v != NULL && strcmp(a, "--dump") == 0) dump = argv[++i];
    else if (v != NULL && strcmp(a, "--sysfs") == 0) env.sysfs_root = argv[++i];
    else if (v != NULL && strcmp(a, "--cpuinfo") == 0) env.cpuinfo_path = argv[++i];
    else return usage();
  }
  if (detect == (load != NULL)) return usage();

  topo_xml_node_t* xml = NULL;
  if (load != NULL) {
    if (topo_xml_load(load, &xml) != ncclSuccess) {
      fprintf(stderr, "choir-topo: %s\n", err_last());
      return 1;
    }
  } else {
    int n = 0;
    if (cuda_device_count(&n) != ncclSuccess || n == 0) {
      fprintf(stderr, "choir-topo: no GPU visible (%s)\n", n == 0 ? "count 0" : err_last());
      return 1;
    }
    topo_rank_info_t* ranks = calloc((size_t)n, sizeof(*ranks));
    if (ranks == NULL) return 1;
    for (int d = 0; d < n; d++) {
      ranks[d].rank = d;
      ranks[d].cuda_dev = d;
      if (cuda_bus_id(d, &ranks[d].bus_id) != ncclSuccess) {
        fprintf(stderr, "choir-topo: %s\n", err_last());
        return 1;
      }
    }
    ncclResult_t r = topo_detect(&env, ranks, n, NULL, 0, &xml);
    free(ranks);
    if (r != ncclSuccess) {
      fprintf(stderr, "choir-topo: detection failed: %s\n", err_last());
      return 1;
    }
  }
  if (dump != NULL && topo_xml_dump(xml, dump) != ncclSuccess) {
    fprintf(stderr, "choir-topo: %s\n", err_last());
    topo_xml_free(xml);
    return 1;
  }
  topo_system_t* sys;
  if (topo_system_from_xml(xml, &sys) != ncclSuccess) {
    fprintf(stderr, "choir-topo: %s\n", err_last());
    return 1;
  }
  char* text;
  if (topo_system_format(sys, &text) != ncclSuccess) return 1;
  fputs(text, stdout);
  free(text);
  topo_system_free(sys);
  return 0;
}
