/* Small system helpers shared by the core. */
#include <ctype.h>
#include <stdio.h>
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

uint64_t sys_hash(const void* data, size_t size) {
  const unsigned char* p = (const unsigned char*)data;
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return sys_hash_mix(h, size);
}

uint64_t sys_hash_mix(uint64_t h, uint64_t v) {
  /* splitmix64 finalizer over the combination: cheap and well spread. */
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t sys_host_hash(void) {
  /* NCCL_HOSTID replaces the whole identity, as in NCCL: tests and containers use it to split
   * one machine into "hosts" (or to join containers that share a kernel). */
  const char* id = param_str(PARAM_HOSTID);
  if (id != NULL && id[0] != '\0') return sys_hash(id, strlen(id));
  char buf[512];
  size_t n = sys_strlcpy(buf, sys_hostname(), sizeof(buf));
  /* Two containers may share a host name; the boot id tells different kernels apart. */
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f != NULL) {
    if (n < sizeof(buf) && fgets(buf + n, (int)(sizeof(buf) - n), f) == NULL) buf[n] = '\0';
    fclose(f);
  }
  return sys_hash(buf, strlen(buf));
}

uint64_t sys_pid_hash(void) { return sys_hash_mix(sys_host_hash(), (uint64_t)getpid()); }

ncclResult_t mem_calloc(void** ptr_p, size_t nmemb, size_t size) {
  void* p = calloc(nmemb, size);
  if (p == NULL && nmemb != 0 && size != 0) {
    WARN("out of host memory: calloc of %zu x %zu bytes failed", nmemb, size);
    return ncclSystemError;
  }
  *ptr_p = p;
  return ncclSuccess;
}

static int sys_gcd(int a, int b) {
  while (b != 0) {
    const int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int sys_lsa_block(const uint64_t* host_hash, size_t stride, int nranks) {
  int size = 0, run = 1;
  const char* at = (const char*)host_hash;
  for (int r = 1; r < nranks; r++) {
    if (*(const uint64_t*)(at + (size_t)r * stride) ==
        *(const uint64_t*)(at + (size_t)(r - 1) * stride)) {
      run++;
    } else {
      size = sys_gcd(size, run);
      run = 1;
    }
  }
  return sys_gcd(size, run);
}
