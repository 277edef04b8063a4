/* Small system helpers shared by the core. */
#include <ctype.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"

static char sys_host[256];
static pthread_once_t sys_host_once = PTHREAD_ONCE_INIT;

static void sys_host_init(void) {
  if (gethostname(sys_host, sizeof(sys_host) - 1) != 0) sys_strlcpy(sys_host, "unknown", sizeof(sys_host));
  sys_host[sizeof(sys_host) - 1] = '\0';
  char* dot = strchr(sys_host, '.');
  if (dot) *dot = '\0';
}

const char* sys_hostname(void) {
  pthread_once(&sys_host_once, sys_host_init);
  return sys_host;
}

int sys_strcasecmp(const char* a, const char* b) {
  for (;; a++, b++) {
    int ca = tolower((unsigned char)*a), cb = tolower((unsigned char)*b);
    if (ca != cb || ca == 0) return ca - cb;
  }
}

size_t sys_strlcpy(char* dst, const char* src, size_t size) {
  size_t n = strlen(src);
  if (size > 0) {
    size_t c = n < size - 1 ? n : size - 1;
    memcpy(dst, src, c);
    dst[c] = '\0';
  }
  return n;
}

ncclResult_t mem_calloc(void** ptr_p, size_t nmemb, size_t size) {
  void* p = calloc(nmemb, size);
  if (p == NULL && nmemb != 0 && size != 0) {
    WARN("out of host memory: calloc of %zu x %zu bytes failed", nmemb, size);
    return ncclSystemError;
  }
  *ptr_p = p;
  return ncclSuccess;
}
