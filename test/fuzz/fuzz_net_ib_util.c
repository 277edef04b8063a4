/* net-ib's NCCL_IB_HCA, NCCL_IB_ADDR_RANGE and knob values: first line the value, second a
 * device name (for the HCA match). */
#include <stdio.h>

#include "fuzz_util.h"
#include "nib_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  char* dev = fuzz_split(s);
  nib_hca_spec_t h;
  if (nib_hca_parse(s, &h)) {
    FUZZ_ASSERT(h.n >= 0 && h.n <= NIB_HCA_MAX);
    (void)nib_hca_match(&h, dev, 1);
  } else {
    FUZZ_ASSERT(h.n == 0);
  }
  nib_range_t r;
  if (nib_range_parse(s, &r) && r.set) FUZZ_ASSERT(r.len >= 0 && r.len <= 128);
  for (int i = 0; i < nib_knob_count; i++) {
    int v = 0;
    if (nib_knob_parse(&nib_knob_table[i], s, &v))
      FUZZ_ASSERT(v >= nib_knob_table[i].lo && v <= nib_knob_table[i].hi);
  }
  free(s);
  return 0;
}
