/* A planted bug, only for proving that run_fuzzer.sh finds and reports crashes: aborts on inputs
 * that start with "CHOIR!". fuzz-catches-planted must fail. */
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 6 && data[0] == 'C' && data[1] == 'H' && data[2] == 'O' && data[3] == 'I' &&
      data[4] == 'R' && data[5] == '!')
    abort();
  return 0;
}
