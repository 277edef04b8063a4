/* NCCL_SOCKET_IFNAME syntax (common/sock_if): first line the spec, second an interface name. */
#include "fuzz_util.h"
#include "sock_if.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  char* name = fuzz_split(s);
  sock_if_spec_t spec;
  sock_if_spec_parse(s, &spec);
  FUZZ_ASSERT(spec.n >= 0 && spec.n <= SOCK_IF_SPEC_MAX);
  (void)sock_if_spec_match(&spec, name);
  free(s);
  return 0;
}
