/* The unique id (core/bootstrap): 128 bytes that arrive from another process (MPI broadcast,
 * a file, torch's store) and are decoded by every rank. An accepted id must hold a usable root
 * address; a refused one must not be half-written. */
#include <string.h>

#include "bootstrap_internal.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ncclUniqueId id;
  memset(&id, 0, sizeof(id));
  memcpy(id.internal, data, size < sizeof(id.internal) ? size : sizeof(id.internal));
  bs_id_t v;
  memset(&v, 0xa5, sizeof(v));
  bs_id_t untouched = v;
  if (bs_id_decode(&id, 0, &v) == ncclSuccess) {
    FUZZ_ASSERT(v.magic == BS_ID_MAGIC && v.version == BS_ID_VERSION);
    FUZZ_ASSERT(sock_addr_valid(&v.root, false));
    char a[SOCK_ADDR_STRLEN];
    FUZZ_ASSERT(sock_addr_str(&v.root, a, sizeof(a))[0] != '\0');
    sock_addr_t r;
    FUZZ_ASSERT(bootstrap_id_root(&id, &r) == ncclSuccess && sock_addr_equal(&r, &v.root));
  } else {
    FUZZ_ASSERT(memcmp(&v, &untouched, sizeof(v)) == 0);
  }
  return 0;
}
