/*
 * Interface selection shared by the core and the plugins (see sock_if.h). libc only.
 */
#include "sock_if.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

void sock_if_spec_parse(const char* spec, sock_if_spec_t* s) {
  memset(s, 0, sizeof(*s));
  if (*spec == '^') {
    s->exclude = true;
    spec++;
  }
  if (*spec == '=') {
    s->exact = true;
    spec++;
  }
  while (*spec != '\0' && s->n < SOCK_IF_SPEC_MAX) {
    const char* end = strchr(spec, ',');
    size_t len = end ? (size_t)(end - spec) : strlen(spec);
    while (len > 0 && spec[0] == ' ') {
      spec++;
      len--;
    }
    while (len > 0 && spec[len - 1] == ' ') len--;
    if (len > 0 && len < sizeof(s->tok[0])) {
      memcpy(s->tok[s->n], spec, len);
      s->tok[s->n][len] = '\0';
      s->n++;
    }
    if (end == NULL) break;
    spec = end + 1;
  }
}

bool sock_if_spec_match(const sock_if_spec_t* s, const char* name) {
  bool hit = false;
  for (int i = 0; i < s->n && !hit; i++)
    hit =
        s->exact ? strcmp(name, s->tok[i]) == 0 : strncmp(name, s->tok[i], strlen(s->tok[i])) == 0;
  return s->exclude ? !hit : hit;
}

bool sock_if_usable(const struct ifaddrs* ifa, int family) {
  if (ifa->ifa_addr == NULL || ifa->ifa_name == NULL) return false;
  if (ifa->ifa_addr->sa_family != family) return false;
  if (!(ifa->ifa_flags & IFF_UP)) return false;
  if (strlen(ifa->ifa_name) >= SOCK_IFNAME_MAX) return false;
  if (family == AF_INET6 &&
      IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6*)(const void*)ifa->ifa_addr)->sin6_addr))
    return false;
  return true;
}

void sock_if_fill(const struct ifaddrs* ifa, sock_if_t* out) {
  memset(out, 0, sizeof(*out));
  snprintf(out->name, sizeof(out->name), "%s", ifa->ifa_name);
  if (ifa->ifa_addr->sa_family == AF_INET) {
    memcpy(&out->addr.sin, ifa->ifa_addr, sizeof(struct sockaddr_in));
    out->addr.sin.sin_port = 0;
  } else {
    memcpy(&out->addr.sin6, ifa->ifa_addr, sizeof(struct sockaddr_in6));
    out->addr.sin6.sin6_port = 0;
  }
}

static int sock_if_collect(const struct ifaddrs* list, const sock_if_spec_t* spec, int family,
                           sock_if_t* ifs, int max) {
  int fams[2] = {family == AF_UNSPEC ? AF_INET : family, family == AF_UNSPEC ? AF_INET6 : -1};
  int n = 0;
  for (int f = 0; f < 2 && fams[f] >= 0; f++) {
    for (const struct ifaddrs* ifa = list; ifa != NULL && n < max; ifa = ifa->ifa_next) {
      if (!sock_if_usable(ifa, fams[f]) || !sock_if_spec_match(spec, ifa->ifa_name)) continue;
      bool dup = false; /* one address per interface: the first of the preferred family */
      for (int i = 0; i < n && !dup; i++) dup = strcmp(ifs[i].name, ifa->ifa_name) == 0;
      if (!dup) sock_if_fill(ifa, &ifs[n++]);
    }
  }
  return n;
}

int sock_if_scan(const char* spec, int family, sock_if_t* ifs, int max, int* n_p) {
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) return errno != 0 ? errno : EIO;
  int n = 0;
  sock_if_spec_t s;
  if (spec != NULL) {
    sock_if_spec_parse(spec, &s);
    n = sock_if_collect(list, &s, family, ifs, max);
  } else {
    /* NCCL's documented default: ib* first, then anything but docker* and lo, then docker*,
     * then lo (loopback only when nothing else exists). */
    static const char* const order[] = {"ib", "^docker,lo", "docker", "lo"};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]) && n == 0; i++) {
      sock_if_spec_parse(order[i], &s);
      n = sock_if_collect(list, &s, family, ifs, max);
    }
  }
  freeifaddrs(list);
  *n_p = n;
  return 0;
}

const char* sock_addr_str(const sock_addr_t* addr, char* buf, size_t size) {
  char host[INET6_ADDRSTRLEN] = "?";
  switch (addr->sa.sa_family) {
    case AF_INET:
      inet_ntop(AF_INET, &addr->sin.sin_addr, host, sizeof(host));
      snprintf(buf, size, "%s:%u", host, (unsigned)ntohs(addr->sin.sin_port));
      break;
    case AF_INET6:
      inet_ntop(AF_INET6, &addr->sin6.sin6_addr, host, sizeof(host));
      if (addr->sin6.sin6_scope_id != 0)
        snprintf(buf, size, "[%s%%%u]:%u", host, (unsigned)addr->sin6.sin6_scope_id,
                 (unsigned)ntohs(addr->sin6.sin6_port));
      else
        snprintf(buf, size, "[%s]:%u", host, (unsigned)ntohs(addr->sin6.sin6_port));
      break;
    default: snprintf(buf, size, "(address family %d)", (int)addr->sa.sa_family); break;
  }
  return buf;
}

socklen_t sock_addr_len(const sock_addr_t* addr) {
  switch (addr->sa.sa_family) {
    case AF_INET: return sizeof(struct sockaddr_in);
    case AF_INET6: return sizeof(struct sockaddr_in6);
    default: return 0;
  }
}

int sock_msg_move(int fd, sock_msg_t* m, bool out) {
  while (m->done < m->len) {
    ssize_t r = out ? send(fd, m->buf + m->done, m->len - m->done, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : recv(fd, m->buf + m->done, m->len - m->done, MSG_DONTWAIT);
    if (r > 0) {
      m->done += (size_t)r;
      continue;
    }
    if (r == 0) return SOCK_MSG_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return SOCK_MSG_OK;
    return SOCK_MSG_ERROR;
  }
  return SOCK_MSG_OK;
}

bool sock_err_remote(int err) {
  return err == EPIPE || err == ECONNRESET || err == ENOTCONN || err == ETIMEDOUT ||
         err == ECONNREFUSED;
}

int sock_connect_start(const sock_addr_t* addr, int* fd_p, bool* connected, bool* remote) {
  *connected = false;
  *remote = false;
  int fd = socket(addr->sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  *fd_p = fd;
  if (fd < 0) return errno;
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (connect(fd, &addr->sa, sock_addr_len(addr)) == 0) {
    *connected = true;
    return 0;
  }
  if (errno == EINPROGRESS || errno == EINTR) return 0;
  int err = errno;
  close(fd);
  *fd_p = -1;
  *remote = true;
  return err;
}

int sock_connect_poll(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  if (poll(&p, 1, 0) <= 0) return 0;
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == EINPROGRESS || err == EALREADY) return 0;
  if (err != 0) {
    errno = err;
    return -1;
  }
  return 1;
}
