/*
 * Mock plugin libraries for the loader tests, one source built many times with -D options:
 *   MOCK_NET=N, MOCK_COLLNET=N, MOCK_TUNER=N, MOCK_PROFILER=N   export that table at version N
 *   MOCK_NULL_SLOT=k                                            leave slot k of the table NULL
 *   MOCK_UNDEFINED                                              reference a symbol nobody defines
 * The loader only reads the table's slots (a name pointer followed by function pointers), so the
 * tables are built as slot arrays of the size each version has; the entries are never called.
 */
#include <stddef.h>

#define EXPORT __attribute__((visibility("default")))

__attribute__((unused)) static int mock_entry(void) { return 3; /* ncclInternalError, should anything ever call it */ }

#define E ((void*)mock_entry)
#define S2(x) #x
#define S(x) S2(x)
#define CAT3(a, b, c) a##b##c
#define SYM(prefix, v) CAT3(prefix, _v, v)

/* Slot counts per version, from the ABI headers (test/abi/plugin_layout.c pins them). */
#define NET_SLOTS(v) ((v) >= 11 ? 22 : (v) >= 9 ? 20 : (v) >= 7 ? 19 : 17)
#define COLLNET_SLOTS(v) ((v) >= 11 ? 19 : (v) >= 9 ? 18 : (v) >= 8 ? 17 : 15)
#define TUNER_SLOTS(v) ((v) >= 6 ? 5 : 4)
#define PROFILER_SLOTS 6

#define TABLE(prefix, v, n, label) \
  EXPORT void* SYM(prefix, v)[n] = {[0] = (void*)(label), [1 ...(n)-1] = E};

#ifdef MOCK_NET
TABLE(ncclNetPlugin, MOCK_NET, NET_SLOTS(MOCK_NET), "MockNet_v" S(MOCK_NET))
#ifdef MOCK_NULL_SLOT
__attribute__((constructor)) static void mock_null(void) {
  SYM(ncclNetPlugin, MOCK_NET)[MOCK_NULL_SLOT] = NULL;
}
#endif
#endif

#ifdef MOCK_NET2 /* a second net version in the same library */
TABLE(ncclNetPlugin, MOCK_NET2, NET_SLOTS(MOCK_NET2), "MockNet_v" S(MOCK_NET2))
#endif

#ifdef MOCK_COLLNET
TABLE(ncclCollNetPlugin, MOCK_COLLNET, COLLNET_SLOTS(MOCK_COLLNET),
      "MockCollNet_v" S(MOCK_COLLNET))
#endif

#ifdef MOCK_TUNER
TABLE(ncclTunerPlugin, MOCK_TUNER, TUNER_SLOTS(MOCK_TUNER), "MockTuner_v" S(MOCK_TUNER))
#if defined(MOCK_NULL_SLOT) && !defined(MOCK_NET)
__attribute__((constructor)) static void mock_null(void) {
  SYM(ncclTunerPlugin, MOCK_TUNER)[MOCK_NULL_SLOT] = NULL;
}
#endif
#endif

#ifdef MOCK_PROFILER
TABLE(ncclProfiler, MOCK_PROFILER, PROFILER_SLOTS, "MockProfiler_v" S(MOCK_PROFILER))
#endif

#ifdef MOCK_UNDEFINED
extern int choir_mock_symbol_nobody_defines(void);
EXPORT int mock_use_undefined(void) { return choir_mock_symbol_nobody_defines(); }
#endif

EXPORT int mock_plugin_marker;
