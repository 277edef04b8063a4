/* What a bootstrap root reads from a connection (core/bootstrap/bootstrap_root.c): a header,
 * then a JOIN from a rank or a ROOT_JOIN from the previous root. Whatever a JOIN says, once the
 * root finds it consistent, the rank it names must be one the root serves, at an index inside
 * the arrays the root allocates from it; a ROOT_JOIN's sender must be a root of the ring. */
#include <string.h>

#include "bootstrap_internal.h"
#include "fuzz_util.h"

#define FUZZ_ROOT_TAG 0x0123456789abcdefull

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bs_hdr_t h;
  if (size < sizeof(h)) return 0;
  memcpy(&h, data, sizeof(h));
  data += sizeof(h);
  size -= sizeof(h);
  /* Half the inputs speak to this root's tag, so that the body checks are reached. */
  if (size > 0 && (data[0] & 1)) h.tag = FUZZ_ROOT_TAG;
  if (bs_root_hdr_problem(&h, FUZZ_ROOT_TAG) != NULL) return 0;
  FUZZ_ASSERT(h.magic == BS_WIRE_MAGIC && h.tag == FUZZ_ROOT_TAG);
  if (size < h.size) return 0;
  if (h.kind == BS_MSG_JOIN) {
    bs_join_t j;
    memcpy(&j, data, sizeof(j));
    if (!bs_join_consistent(&j)) return 0;
    const int first = bs_group_first(j.root_index, j.nids, j.nranks);
    const int count = bs_group_first(j.root_index + 1, j.nids, j.nranks) - first;
    FUZZ_ASSERT(count >= 1 && first >= 0 && first + count <= j.nranks);
    FUZZ_ASSERT(j.rank >= first && j.rank - first < count);
    FUZZ_ASSERT(j.nranks <= BS_MAX_RANKS);
    FUZZ_ASSERT(sock_addr_valid(&j.addr, false));
  } else {
    FUZZ_ASSERT(h.kind == BS_MSG_ROOT_JOIN);
    bs_root_join_t j;
    memcpy(&j, data, sizeof(j));
    if (!bs_root_join_consistent(&j)) return 0;
    FUZZ_ASSERT(j.from_index >= 0 && j.from_index < j.nids && j.nids >= 2);
  }
  return 0;
}
