/* NCCL_ALGO / NCCL_PROTO with NCCL 2.24's per-collective syntax (core/tune). Parsing twice
 * gives the same answer. */
#include "fuzz_util.h"
#include "tune_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  const tune_knob_kind_t* kinds[2] = {&tune_knob_algo, &tune_knob_proto};
  for (int k = 0; k < 2; k++) {
    tune_knob_t a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    ncclResult_t ra = tune_knob_parse(kinds[k], s, &a);
    ncclResult_t rb = tune_knob_parse(kinds[k], s, &b);
    FUZZ_ASSERT(ra == rb);
    if (ra == ncclSuccess)
      FUZZ_ASSERT(memcmp(a.allow, b.allow, sizeof(a.allow)) == 0 && a.set == b.set);
  }
  free(s);
  return 0;
}
