/*
 * File descriptors between the processes of one host: a datagram Unix socket per (key, rank) in
 * the abstract namespace (no file to clean up; gone with its last descriptor), messages carrying
 * one descriptor (SCM_RIGHTS) and a small header. Symmetric windows use it to hand cuMem
 * allocations' exported descriptors to the local peers: legacy CUDA IPC cannot export cuMem
 * memory.
 *
 * A receiver takes only well-formed messages of its own key: anything else is counted, its
 * descriptor closed, and the wait goes on. A sender retries while the peer's socket is not bound
 * yet or its queue is full, until the deadline, then names the peer.
 */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base.h"

#define IPCSOCK_MAGIC 0x63686f6972697063ull /* "choiripc" */

typedef struct {
  uint64_t magic;
  uint64_t key;
  uint64_t tag;
  int32_t rank;
  int32_t pad;
} ipcsock_msg_t;

/* The abstract address of (key, rank): a NUL, then the name. Returns the address length. */
static socklen_t ipcsock_addr(struct sockaddr_un* a, uint64_t key, int rank) {
  memset(a, 0, sizeof(*a));
  a->sun_family = AF_UNIX;
  int n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "choir-ipc-%016llx-%d",
                   (unsigned long long)key, rank);
  return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

static int64_t ipcsock_ms_left(const struct timespec* t0, int timeout_ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  int64_t el = (int64_t)(t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
  return (int64_t)timeout_ms - el;
}

ncclResult_t ipcsock_open(ipcsock_t* s, uint64_t key, int rank) {
  s->fd = -1;
  s->key = key;
  s->rank = rank;
  s->dropped = 0;
  if (rank < 0) {
    WARN("ipc socket: rank %d is negative", rank);
    return ncclInvalidArgument;
  }
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    WARN("ipc socket of rank %d: socket(AF_UNIX) failed: %s", rank, strerror(errno));
    return ncclSystemError;
  }
  struct sockaddr_un a;
  socklen_t len = ipcsock_addr(&a, key, rank);
  if (bind(fd, (struct sockaddr*)&a, len) != 0) {
    int e = errno;
    close(fd);
    if (e == EADDRINUSE) {
      WARN("ipc socket: rank %d of communicator %016llx is already open in this host's network "
           "namespace (another process or communicator with the same rank and id?)",
           rank, (unsigned long long)key);
      return ncclInvalidUsage;
    }
    WARN("ipc socket of rank %d: bind failed: %s", rank, strerror(e));
    return ncclSystemError;
  }
  s->fd = fd;
  return ncclSuccess;
}

void ipcsock_close(ipcsock_t* s) {
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
}

ncclResult_t ipcsock_send_fd(ipcsock_t* s, int peer, int fd, uint64_t tag, int timeout_ms) {
  if (s->fd < 0 || peer < 0 || fd < 0) {
    WARN("ipc socket: send of descriptor %d to rank %d on a %s socket", fd, peer,
         s->fd < 0 ? "closed" : "open");
    return ncclInvalidArgument;
  }
  ipcsock_msg_t m = {.magic = IPCSOCK_MAGIC, .key = s->key, .tag = tag, .rank = s->rank};
  struct sockaddr_un a;
  socklen_t alen = ipcsock_addr(&a, s->key, peer);
  union {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
  } ctl;
  memset(&ctl, 0, sizeof(ctl));
  struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
  struct msghdr h = {.msg_name = &a, .msg_namelen = alen, .msg_iov = &iov, .msg_iovlen = 1,
                     .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf)};
  struct cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c), &fd, sizeof(int));
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    if (sendmsg(s->fd, &h, MSG_NOSIGNAL) == (ssize_t)sizeof(m)) return ncclSuccess;
    int e = errno;
    /* Not bound yet (ECONNREFUSED, ENOENT) or its queue full (EAGAIN): the peer may be late. */
    if (e != ECONNREFUSED && e != ENOENT && e != EAGAIN && e != EWOULDBLOCK && e != EINTR) {
      WARN("ipc socket: rank %d could not send a descriptor to rank %d: %s", s->rank, peer,
           strerror(e));
      return ncclSystemError;
    }
    if (ipcsock_ms_left(&t0, timeout_ms) <= 0) {
      WARN("ipc socket: rank %d could not send a descriptor to local rank %d within %d ms (%s): "
           "is that process alive and in this communicator?",
           s->rank, peer, timeout_ms, e == EAGAIN || e == EWOULDBLOCK ? "its queue stayed full"
                                                                      : "it has no socket");
      return ncclRemoteError;
    }
    struct timespec nap = {0, 200 * 1000};
    nanosleep(&nap, NULL);
  }
}

ncclResult_t ipcsock_recv_fd(ipcsock_t* s, int* peer_p, int* fd_p, uint64_t* tag_p,
                             int timeout_ms) {
  *fd_p = -1;
  if (s->fd < 0) {
    WARN("ipc socket: receive on a closed socket");
    return ncclInvalidArgument;
  }
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    ipcsock_msg_t m;
    union {
      char buf[CMSG_SPACE(4 * sizeof(int))];
      struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
    struct msghdr h = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                       .msg_controllen = sizeof(ctl.buf)};
    ssize_t n = recvmsg(s->fd, &h, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      int e = errno;
      if (e != EAGAIN && e != EWOULDBLOCK && e != EINTR) {
        WARN("ipc socket: rank %d: recvmsg failed: %s", s->rank, strerror(e));
        return ncclSystemError;
      }
      int64_t left = ipcsock_ms_left(&t0, timeout_ms);
      if (left <= 0) {
        WARN("ipc socket: rank %d received no descriptor from its local peers within %d ms "
             "(a peer died or is not registering the same windows)", s->rank, timeout_ms);
        return ncclRemoteError;
      }
      struct pollfd p = {.fd = s->fd, .events = POLLIN};
      poll(&p, 1, left > 100 ? 100 : (int)left);
      continue;
    }
    /* Every descriptor that came is ours to close unless the message is taken. */
    int got = -1, extra = 0;
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&h); c != NULL; c = CMSG_NXTHDR(&h, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; i++) {
        int d;
        memcpy(&d, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (got < 0) got = d;
        else {
          close(d);
          extra++;
        }
      }
    }
    int ok = n == (ssize_t)sizeof(m) && !(h.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) &&
             m.magic == IPCSOCK_MAGIC && m.key == s->key && m.rank >= 0 && got >= 0 &&
             extra == 0;
    if (!ok) {
      if (got >= 0) close(got);
      s->dropped++;
      WARN("ipc socket: rank %d dropped a malformed message (%zd bytes, %s descriptor)", s->rank,
           n, got >= 0 ? "with a" : "no");
      if (ipcsock_ms_left(&t0, timeout_ms) <= 0) {
        WARN("ipc socket: rank %d received only malformed messages within %d ms", s->rank,
             timeout_ms);
        return ncclRemoteError;
      }
      continue;
    }
    *peer_p = m.rank;
    *tag_p = m.tag;
    *fd_p = got;
    return ncclSuccess;
  }
}
