/* Private to core/topo: helpers shared by its files. */
#ifndef CHOIR_TOPO_INTERNAL_H
#define CHOIR_TOPO_INTERNAL_H

#include "topo.h"

/* arch ("x86_64", "aarch64", "ppc64le") and vendor ("GenuineIntel", ...) strings as enums. */
void topo_cpu_kind_parse(const char* arch, const char* vendor, topo_cpu_arch_t* arch_p,
                         topo_cpu_vendor_t* vendor_p);

#endif
