/* Helpers shared by the fuzz targets: inputs as C strings, a silent logger. */
#ifndef CHOIR_FUZZ_UTIL_H
#define CHOIR_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A NUL-terminated copy of data (embedded NULs end the string early, as C callers would). */
static inline char* fuzz_cstr(const uint8_t* data, size_t size) {
  char* s = malloc(size + 1);
  if (s == NULL) abort();
  memcpy(s, data, size);
  s[size] = '\0';
  return s;
}

/* Splits s at the first newline: s becomes the first line, the rest is returned ("" if none). */
static inline char* fuzz_split(char* s) {
  char* nl = strchr(s, '\n');
  if (nl == NULL) return s + strlen(s);
  *nl = '\0';
  return nl + 1;
}

/* A bug the target itself detects (a round trip that does not hold): crash, so the engine
 * keeps the input. */
#define FUZZ_ASSERT(cond) \
  do {                    \
    if (!(cond)) abort(); \
  } while (0)

#endif
