/* net-ucx's reading of UCX_NET_DEVICES, UCX_TLS and its knob values: first line the value,
 * second a device or transport name. */
#include "fuzz_util.h"
#include "nux_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  char* name = fuzz_split(s);
  (void)nux_netdev_selected(s, name);
  (void)nux_netdev_named(s, name);
  (void)nux_tls_selected(s, name);
  for (int i = 0; i < nux_knob_count; i++) {
    int v = 0;
    if (nux_knob_parse(&nux_knob_table[i], s, &v))
      FUZZ_ASSERT(v >= nux_knob_table[i].lo && v <= nux_knob_table[i].hi);
  }
  free(s);
  return 0;
}
