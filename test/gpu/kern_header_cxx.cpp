/* kernels.h compiled as C++: its static assertions hold there too, and the layout seen from C++
 * is reported to the C side of kern_boundary_test.c for comparison. */
#include "kernels.h"

extern "C" size_t kern_header_cxx_args_size(void) { return sizeof(kern_reduce_copy_args_t); }
extern "C" size_t kern_header_cxx_count_offset(void) {
  return offsetof(kern_reduce_copy_args_t, count);
}
