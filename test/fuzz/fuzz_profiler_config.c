/* Choir's trace profiler: CHOIR_PROFILER_EVENTS, the event-type list. */
#include "fuzz_util.h"
#include "prof.h"

static void fuzz_log(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  uint32_t a = prof_config_parse_events(s, fuzz_log);
  uint32_t b = prof_config_parse_events(s, NULL);
  FUZZ_ASSERT(a == b);
  free(s);
  return 0;
}
