/* Raw datagrams to a Unix datagram socket, with 0..2 descriptors attached (SCM_RIGHTS): what a
 * stranger or a fuzzer sends to a rank's descriptor socket (core/base/base_ipcsock.c). */
#ifndef CHOIR_TEST_RAW_DGRAM_H
#define CHOIR_TEST_RAW_DGRAM_H

#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

/* sendmsg of len bytes of buf and fds[0..nfd) (nfd 0, 1 or 2) from sock to the socket whose
 * address (as getsockname gives it) is addr/alen; sendmsg's result. */
static inline ssize_t raw_dgram_send(int sock, const struct sockaddr_un* addr, socklen_t alen,
                                     const void* buf, size_t len, const int* fds, int nfd,
                                     int flags) {
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct iovec iov = {.iov_base = (void*)buf, .iov_len = len};
  struct msghdr h = {.msg_name = (void*)addr, .msg_namelen = alen, .msg_iov = &iov,
                     .msg_iovlen = 1};
  if (nfd > 0) {
    h.msg_control = ctl.buf;
    h.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
    struct cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfd * sizeof(int));
  }
  return sendmsg(sock, &h, flags);
}

#endif
