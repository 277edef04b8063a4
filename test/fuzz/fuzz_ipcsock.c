/* What a rank's descriptor socket reads (core/base/base_ipcsock.c): any local process may send
 * it a datagram. The first input byte says how many descriptors travel with the rest (0, 1 or 2);
 * the rest is the datagram. A taken message must be a whole, well-formed one with exactly one
 * descriptor; anything else is dropped. No descriptor may leak either way. */
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#include "base.h"
#include "fuzz_util.h"
#include "raw_dgram.h"

#define FUZZ_KEY 0x1234ull /* the seed corpus's messages carry it */

static ipcsock_t fz_sock;
static int fz_raw = -1;
static struct sockaddr_un fz_addr;
static socklen_t fz_addr_len;

static int fz_lowest_free_fd(void) {
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) close(fd);
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (fz_raw < 0) {
    /* The receiving socket's name depends on the pid: replays and fuzzing workers never meet. */
    if (ipcsock_open(&fz_sock, FUZZ_KEY ^ ((uint64_t)getpid() << 20), 0) != ncclSuccess) abort();
    fz_sock.key = FUZZ_KEY; /* what it accepts; its name stays per process */
    fz_raw = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fz_raw < 0) abort();
    socklen_t len = sizeof(fz_addr);
    if (getsockname(fz_sock.fd, (struct sockaddr*)&fz_addr, &len) != 0) abort();
    fz_addr_len = len;
  }
  if (size == 0) return 0;
  const int before = fz_lowest_free_fd();
  const int nfd = data[0] % 3;
  int fds[2] = {open("/dev/null", O_RDONLY | O_CLOEXEC), open("/dev/null", O_RDONLY | O_CLOEXEC)};
  const int sent = raw_dgram_send(fz_raw, &fz_addr, fz_addr_len, data + 1, size - 1, fds, nfd,
                                  MSG_DONTWAIT) >= 0;
  close(fds[0]);
  close(fds[1]);
  int from = -1, fd = -1;
  uint64_t tag = 0;
  const int dropped = fz_sock.dropped;
  ncclResult_t res = ipcsock_recv_fd(&fz_sock, &from, &fd, &tag, 0);
  if (res == ncclSuccess) {
    /* Only a whole message of this key with one descriptor is taken. */
    FUZZ_ASSERT(sent && nfd == 1 && fd >= 0 && from >= 0 && size - 1 == 32);
    close(fd);
  } else {
    FUZZ_ASSERT(res == ncclRemoteError && fd == -1);
    FUZZ_ASSERT(!sent || fz_sock.dropped == dropped + 1 || size - 1 == 0);
  }
  FUZZ_ASSERT(fz_lowest_free_fd() == before);
  return 0;
}
