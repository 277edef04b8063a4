/*
 * For tests that point NCCL_DEBUG_FILE at log_path: log_text returns what the library has
 * written there so far (the first 128 KiB), for checking messages.
 */
#ifndef CHOIR_TEST_LOG_FILE_H
#define CHOIR_TEST_LOG_FILE_H

#include <stdio.h>

static char log_path[256];

static const char* log_text(void) {
  static char buf[1 << 17];
  FILE* f = fopen(log_path, "r");
  buf[0] = '\0';
  if (f != NULL) {
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
  }
  return buf;
}

#endif
