/*
 * Choir perf tools: main() of one benchmark binary. The build compiles this file once per
 * collective with -DPERF_COLL=PERF_<COLLECTIVE>.
 */
#include "perf.h"

#ifndef PERF_COLL
#error "build with -DPERF_COLL=PERF_ALL_REDUCE (or another enum perf_coll_id value)"
#endif

int main(int argc, char** argv) { return perf_main(PERF_COLL, argc, argv); }
