/* The ABI probes' output: one "key value" line per fact (compare_probes.py reads them). */
#ifndef CHOIR_TEST_ABI_PROBE_H
#define CHOIR_TEST_ABI_PROBE_H

#include <stddef.h>
#include <stdio.h>

#define P(key, expr) printf("%s %lld\n", key, (long long)(expr))
#define SIZE(t) P("sizeof(" #t ")", sizeof(t))
#define OFF(t, f) P("offsetof(" #t "," #f ")", offsetof(t, f))
#define VAL(v) P(#v, v)

#endif
