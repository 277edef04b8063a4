/* tuner-default's rule file (NCCL's example-tuner CSV format), read from a memory file. */
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "tun.h"

static void fuzz_log(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("tuner-rules", 0);
  if (fd < 0) abort();
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) abort();
    done += (size_t)w;
  }
  char path[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  tun_config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  if (tun_config_read(path, fuzz_log, &cfg) == ncclSuccess) tun_config_free(&cfg);
  close(fd);
  return 0;
}
