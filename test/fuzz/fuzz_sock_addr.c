/* Socket address strings (core/base): NCCL_COMM_ID's "host:port" and "[ipv6]:port". Hosts are
 * resolved as numbers only (AI_NUMERICHOST), so that the fuzzer never waits for DNS; names take
 * the same path up to getaddrinfo. An accepted address must be IPv4 or IPv6 with a port, and
 * print as something that parses back to itself. */
#include <netdb.h>
#include <string.h>

#include "base.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  sock_addr_t a;
  if (sock_addr_parse_flags(s, AI_NUMERICHOST, &a) == ncclSuccess) {
    FUZZ_ASSERT(sock_addr_valid(&a, false));
    char text[SOCK_ADDR_STRLEN];
    sock_addr_str(&a, text, sizeof(text));
    sock_addr_t b;
    /* A scoped IPv6 address prints its scope by number, which parses back the same. */
    FUZZ_ASSERT(sock_addr_parse_flags(text, AI_NUMERICHOST, &b) == ncclSuccess);
    FUZZ_ASSERT(sock_addr_equal(&a, &b));
  }
  free(s);
  return 0;
}
