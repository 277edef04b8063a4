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

/* A TCP socket for connecting to a loopback listener, bound to a source address of 127/8 that
 * changes with every call: fuzzers open thousands of connections a second, and with one source
 * address the closed ones (TIME_WAIT) would use up the ephemeral ports within a minute. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>
static inline int fuzz_loopback_socket(void) {
  static uint32_t next = 0x7f000100u;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (++next >= 0x7ffffff0u) next = 0x7f000100u;
  struct sockaddr_in src;
  memset(&src, 0, sizeof(src));
  src.sin_family = AF_INET;
  src.sin_addr.s_addr = htonl(next);
  (void)bind(fd, (struct sockaddr*)&src, sizeof(src)); /* a failure leaves the usual source */
  return fd;
}

/* connect() that survives signals: libFuzzer's timeout alarm interrupts blocking calls, and an
 * interrupted connect goes on in the background; wait for it and take its result. 0 or -1. */
static inline int fuzz_connect(int fd, const struct sockaddr* addr, socklen_t len) {
  if (connect(fd, addr, len) == 0) return 0;
  if (errno != EINTR) return -1;
  struct pollfd p = {fd, POLLOUT, 0};
  while (poll(&p, 1, -1) < 0)
    if (errno != EINTR) return -1;
  int err = 0;
  socklen_t elen = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
    errno = err;
    return -1;
  }
  return 0;
}

#endif
