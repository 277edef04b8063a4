/* NCCL_TOPO_FILE: the topology XML parser (core/topo). An accepted document must survive a
 * write and a second parse. */
#include "fuzz_util.h"
#include "topo.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  topo_xml_node_t* root = NULL;
  if (topo_xml_parse((const char*)data, size, "fuzz.xml", &root) != ncclSuccess) return 0;
  char* text = NULL;
  size_t len = 0;
  FUZZ_ASSERT(topo_xml_write(root, &text, &len) == ncclSuccess);
  topo_xml_node_t* again = NULL;
  FUZZ_ASSERT(topo_xml_parse(text, len, "fuzz-rewritten.xml", &again) == ncclSuccess);
  topo_xml_free(again);
  free(text);
  topo_xml_free(root);
  return 0;
}
