/* Sockets (core/base/base_socket.c): addresses, interface selection, bounded transfers. */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "fork_case.h"

static double now_s(void) { return (double)sock_clock_ns() / 1e9; }

static void case_addr_parse(void) {
  char buf[SOCK_ADDR_STRLEN];
  sock_addr_t a;
  CHECK_EQ_INT(sock_addr_parse("127.0.0.1:1234", &a), ncclSuccess);
  CHECK_EQ_STR(sock_addr_str(&a, buf, sizeof(buf)), "127.0.0.1:1234");
  CHECK_EQ_INT(sock_addr_len(&a), sizeof(struct sockaddr_in));
  CHECK_EQ_INT(sock_addr_parse("[::1]:80", &a), ncclSuccess);
  CHECK_EQ_STR(sock_addr_str(&a, buf, sizeof(buf)), "[::1]:80");
  CHECK_EQ_INT(sock_addr_len(&a), sizeof(struct sockaddr_in6));
  CHECK_TRUE(sock_addr_valid(&a, false));
  sock_addr_t b;
  CHECK_EQ_INT(sock_addr_parse("[0:0::1]:80", &b), ncclSuccess);
  CHECK_TRUE(sock_addr_equal(&a, &b));
  CHECK_EQ_INT(sock_addr_parse("localhost:5", &a), ncclSuccess);
  CHECK_TRUE(sock_addr_valid(&a, false));
  /* Malformed: each is rejected with a message saying what is expected. */
  const char* bad[] = {"127.0.0.1",     "[::1]80",     "::1:80", "1.2.3.4:0",
                       "1.2.3.4:99999", "1.2.3.4:12x", ":80"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    err_clear_last();
    CHECK_EQ_INT(sock_addr_parse(bad[i], &a), ncclInvalidArgument);
    CHECK_TRUE(err_last()[0] != '\0');
  }
  sock_addr_parse("::1:80", &a);
  CHECK_CONTAINS(err_last(), "in brackets");
  CHECK_TRUE(!sock_addr_valid(&(sock_addr_t){.sa = {.sa_family = AF_UNIX}}, true));
}

/* What getifaddrs says, to know what the selection may return on this machine. */
typedef struct {
  bool lo4, lo6, other4, other; /* lo with IPv4/IPv6; an up non-lo, non-docker interface */
  char other_name[SOCK_IFNAME_MAX];
} ifinfo_t;

static ifinfo_t if_probe(void) {
  ifinfo_t in;
  memset(&in, 0, sizeof(in));
  struct ifaddrs* list = NULL;
  if (getifaddrs(&list) != 0) return in;
  for (struct ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int f = i->ifa_addr->sa_family;
    if (f != AF_INET && f != AF_INET6) continue;
    if (f == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6*)(void*)i->ifa_addr)->sin6_addr))
      continue;
    if (strcmp(i->ifa_name, "lo") == 0) {
      in.lo4 |= f == AF_INET;
      in.lo6 |= f == AF_INET6;
    } else if (strncmp(i->ifa_name, "docker", 6) != 0 && strncmp(i->ifa_name, "lo", 2) != 0 &&
               strlen(i->ifa_name) < SOCK_IFNAME_MAX) {
      if (!in.other) sys_strlcpy(in.other_name, i->ifa_name, sizeof(in.other_name));
      in.other = true;
      in.other4 |= f == AF_INET;
    }
  }
  freeifaddrs(list);
  return in;
}

static bool if_has(const sock_if_t* ifs, int n, const char* name) {
  for (int i = 0; i < n; i++)
    if (strcmp(ifs[i].name, name) == 0) return true;
  return false;
}

static void case_if_list(void) {
  ifinfo_t in = if_probe();
  sock_if_t ifs[64];
  int n = -1;
  if (!in.lo4 && !in.lo6) {
    CHECK_SKIPPED("if_list: no loopback interface with an address here: the lo checks");
  } else {
    CHECK_EQ_INT(sock_if_list("lo", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(n >= 1 && if_has(ifs, n, "lo"));
    CHECK_EQ_INT(sock_if_list("=lo", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(n == 1 && strcmp(ifs[0].name, "lo") == 0);
    /* One address per interface, IPv4 first when both exist. */
    CHECK_EQ_INT(ifs[0].addr.sa.sa_family, in.lo4 ? AF_INET : AF_INET6);
    CHECK_EQ_INT(sock_if_list("=l", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_EQ_INT(n, 0); /* exact names: a prefix does not match */
    CHECK_EQ_INT(sock_if_list("l", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(if_has(ifs, n, "lo"));
    CHECK_EQ_INT(sock_if_list("^lo", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(!if_has(ifs, n, "lo"));
    CHECK_EQ_INT(sock_if_list("^=lo", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(!if_has(ifs, n, "lo"));
    CHECK_EQ_INT(sock_if_list(" nosuch , lo ", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(if_has(ifs, n, "lo")); /* blanks around list items are ignored */
    if (in.lo6) {
      CHECK_EQ_INT(sock_if_list("lo", AF_INET6, ifs, 64, &n), ncclSuccess);
      CHECK_TRUE(n == 1 && ifs[0].addr.sa.sa_family == AF_INET6);
      char buf[SOCK_ADDR_STRLEN];
      CHECK_EQ_STR(sock_addr_str(&ifs[0].addr, buf, sizeof(buf)), "[::1]:0");
    } else {
      CHECK_SKIPPED("if_list: lo has no IPv6 address: the AF_INET6 check");
    }
    if (in.lo4) {
      CHECK_EQ_INT(sock_if_list("lo", AF_INET, ifs, 64, &n), ncclSuccess);
      CHECK_TRUE(n == 1 && ifs[0].addr.sa.sa_family == AF_INET);
    }
  }
  CHECK_EQ_INT(sock_if_list("nosuchif", AF_UNSPEC, ifs, 64, &n), ncclSuccess);
  CHECK_EQ_INT(n, 0);
  /* The default order: loopback only when nothing else exists. */
  CHECK_EQ_INT(sock_if_list(NULL, AF_UNSPEC, ifs, 64, &n), ncclSuccess);
  if (in.other) {
    CHECK_TRUE(n >= 1 && !if_has(ifs, n, "lo"));
    CHECK_EQ_INT(sock_if_list(in.other_name, AF_UNSPEC, ifs, 64, &n), ncclSuccess);
    CHECK_TRUE(if_has(ifs, n, in.other_name));
    printf("if_list: default picks %s; lo is left out\n", ifs[0].name);
  } else {
    CHECK_TRUE(n == 0 || if_has(ifs, n, "lo"));
    CHECK_SKIPPED("if_list: only loopback here: the checks that need another interface");
  }
}

static void case_if_env_lo(void) {
  setenv("NCCL_SOCKET_IFNAME", "=lo", 1);
  sock_if_t i;
  CHECK_EQ_INT(sock_if_bootstrap(&i), ncclSuccess);
  CHECK_EQ_STR(i.name, "lo");
}

static void case_if_env_none(void) {
  setenv("NCCL_SOCKET_IFNAME", "=nosuchif0", 1);
  sock_if_t i;
  err_clear_last();
  CHECK_EQ_INT(sock_if_bootstrap(&i), ncclSystemError);
  CHECK_CONTAINS(err_last(), "NCCL_SOCKET_IFNAME==nosuchif0");
}

static void case_if_env_family(void) {
  if (!if_probe().lo6) {
    CHECK_SKIPPED("if_env_family: lo has no IPv6 address");
    return;
  }
  setenv("NCCL_SOCKET_IFNAME", "lo", 1);
  setenv("NCCL_SOCKET_FAMILY", "AF_INET6", 1);
  sock_if_t i;
  CHECK_EQ_INT(sock_if_bootstrap(&i), ncclSuccess);
  CHECK_EQ_INT(i.addr.sa.sa_family, AF_INET6);
}

static void case_if_env_default(void) {
  unsetenv("NCCL_SOCKET_IFNAME");
  unsetenv("NCCL_COMM_ID");
  ifinfo_t in = if_probe();
  sock_if_t i;
  CHECK_EQ_INT(sock_if_bootstrap(&i), ncclSuccess);
  if (in.other)
    CHECK_TRUE(strcmp(i.name, "lo") != 0);
  else
    CHECK_SKIPPED("if_env_default: only loopback here: the check that the default avoids lo");
}

static void case_if_env_comm_id(void) {
  /* Without NCCL_SOCKET_IFNAME, the interface on NCCL_COMM_ID's subnet wins. */
  if (!if_probe().lo4) {
    CHECK_SKIPPED("if_env_comm_id: lo has no IPv4 address");
    return;
  }
  unsetenv("NCCL_SOCKET_IFNAME");
  setenv("NCCL_COMM_ID", "127.0.0.1:6543", 1);
  sock_if_t i;
  CHECK_EQ_INT(sock_if_bootstrap(&i), ncclSuccess);
  CHECK_EQ_STR(i.name, "lo");
}

static void loopback(sock_addr_t* a) {
  memset(a, 0, sizeof(*a));
  a->sin.sin_family = AF_INET;
  a->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* A connected pair over loopback: *c is the connecting side, *s the accepted one. */
static void pair(sock_t* l, sock_t* c, sock_t* s) {
  sock_addr_t a;
  loopback(&a);
  CHECK_EQ_INT(sock_listen(&a, "test listener", l), ncclSuccess);
  CHECK_TRUE(l->addr.sin.sin_port != 0); /* an ephemeral port was chosen */
  sock_deadline_t dl = sock_deadline(2000, NULL);
  CHECK_EQ_INT(sock_connect(&l->addr, "test peer", true, &dl, c), ncclSuccess);
  s->fd = -1;
  for (int i = 0; i < 200 && s->fd < 0; i++) {
    CHECK_EQ_INT(sock_accept(l, s), ncclSuccess);
    if (s->fd < 0) usleep(1000);
  }
  CHECK_TRUE(s->fd >= 0);
}

static void* abort_later(void* arg) {
  usleep(100 * 1000);
  __atomic_store_n((volatile uint32_t*)arg, 1, __ATOMIC_RELEASE);
  return NULL;
}

typedef struct {
  sock_t* s;
  const char* out;
  char* in;
  size_t size;
  ncclResult_t res;
} xchg_t;

static void* xchg_thread(void* arg) {
  xchg_t* x = arg;
  sock_deadline_t dl = sock_deadline(5000, NULL);
  x->res = sock_exchange(x->s, x->out, x->size, x->s, x->in, x->size, &dl);
  return NULL;
}

static void case_transfers(void) {
  sock_t l, c, s;
  pair(&l, &c, &s);
  /* Bigger than any socket buffer, both ways at once: transfers loop over short reads and
   * writes, and neither side may stall on a full buffer while the other does the same. */
  size_t big = 8u << 20;
  char* out = malloc(big);
  char* in = malloc(big);
  char* out2 = malloc(big);
  char* in2 = malloc(big);
  for (size_t i = 0; i < big; i++) {
    out[i] = (char)(i * 131);
    out2[i] = (char)(i * 7 + 3);
  }
  sock_deadline_t dl = sock_deadline(5000, NULL);
  xchg_t x = {&s, out2, in, big, ncclInternalError};
  pthread_t th;
  pthread_create(&th, NULL, xchg_thread, &x);
  CHECK_EQ_INT(sock_exchange(&c, out, big, &c, in2, big, &dl), ncclSuccess);
  pthread_join(th, NULL);
  CHECK_EQ_INT(x.res, ncclSuccess);
  CHECK_TRUE(memcmp(in, out, big) == 0);
  CHECK_TRUE(memcmp(in2, out2, big) == 0);
  free(out2);
  free(in2);
  memset(in, 0, big);
  CHECK_EQ_INT(sock_send(&s, out, 1000, &dl), ncclSuccess);
  CHECK_EQ_INT(sock_recv(&c, in, 1000, &dl), ncclSuccess);
  CHECK_TRUE(memcmp(in, out, 1000) == 0);

  /* A silent peer: the timeout names the peer and the time. */
  err_clear_last();
  double t0 = now_s();
  sock_deadline_t shortdl = sock_deadline(300, NULL);
  CHECK_EQ_INT(sock_recv(&c, in, 10, &shortdl), ncclRemoteError);
  double el = now_s() - t0;
  CHECK_TRUE(el >= 0.29 && el < 1.5);
  CHECK_CONTAINS(err_last(), "receiving from test peer (127.0.0.1:");
  CHECK_CONTAINS(err_last(), "timed out after 0.3 s");

  /* Abort: returns promptly with ncclInternalError. */
  volatile uint32_t flag = 0;
  pthread_t t;
  pthread_create(&t, NULL, abort_later, (void*)&flag);
  sock_deadline_t longdl = sock_deadline(10000, &flag);
  t0 = now_s();
  CHECK_EQ_INT(sock_recv(&c, in, 10, &longdl), ncclInternalError);
  el = now_s() - t0;
  pthread_join(t, NULL);
  CHECK_TRUE(el < 0.5);
  CHECK_CONTAINS(err_last(), "aborted");

  /* The peer closes: ncclRemoteError that says so. */
  sock_close(&s);
  CHECK_EQ_INT(sock_recv(&c, in, 10, &dl), ncclRemoteError);
  CHECK_CONTAINS(err_last(), "closed by the peer");
  sock_close(&c);
  sock_close(&l);
  CHECK_TRUE(c.fd == -1 && l.fd == -1);
  free(in);
  free(out);
}

static void case_connect_refused(void) {
  /* A port nobody listens on: retries as configured, then a clear error. */
  setenv("NCCL_SOCKET_RETRY_CNT", "3", 1);
  setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "20", 1);
  sock_t l;
  sock_addr_t a;
  loopback(&a);
  CHECK_EQ_INT(sock_listen(&a, "tmp", &l), ncclSuccess);
  a = l.addr;
  sock_close(&l);
  sock_t c;
  sock_deadline_t dl = sock_deadline(5000, NULL);
  err_clear_last();
  double t0 = now_s();
  CHECK_EQ_INT(sock_connect(&a, "nobody", true, &dl, &c), ncclRemoteError);
  double el = now_s() - t0;
  /* Linear backoff: 20 + 40 + 60 ms. */
  CHECK_TRUE(el >= 0.115 && el < 1.0);
  CHECK_CONTAINS(err_last(), "connecting to nobody (127.0.0.1:");
  CHECK_CONTAINS(err_last(), "after 4 attempt(s): Connection refused");
  /* Without retries: at once. */
  t0 = now_s();
  CHECK_EQ_INT(sock_connect(&a, "nobody", false, &dl, &c), ncclRemoteError);
  CHECK_TRUE(now_s() - t0 < 0.1);
  CHECK_CONTAINS(err_last(), "after 1 attempt(s)");
}

static void case_connect_deadline(void) {
  setenv("NCCL_SOCKET_RETRY_CNT", "1000", 1);
  setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "50", 1);
  sock_t l, c;
  sock_addr_t a;
  loopback(&a);
  CHECK_EQ_INT(sock_listen(&a, "tmp", &l), ncclSuccess);
  a = l.addr;
  sock_close(&l);
  sock_deadline_t dl = sock_deadline(400, NULL);
  double t0 = now_s();
  err_clear_last();
  CHECK_EQ_INT(sock_connect(&a, "late root", true, &dl, &c), ncclRemoteError);
  double el = now_s() - t0;
  CHECK_TRUE(el >= 0.39 && el < 1.0);
  CHECK_CONTAINS(err_last(), "connecting to late root");
  CHECK_CONTAINS(err_last(), "timed out after 0.4 s");
}

int main(void) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  fork_case("addr_parse", case_addr_parse);
  fork_case("if_list", case_if_list);
  fork_case("if_env_lo", case_if_env_lo);
  fork_case("if_env_none", case_if_env_none);
  fork_case("if_env_family", case_if_env_family);
  fork_case("if_env_default", case_if_env_default);
  fork_case("if_env_comm_id", case_if_env_comm_id);
  fork_case("transfers", case_transfers);
  fork_case("connect_refused", case_connect_refused);
  fork_case("connect_deadline", case_connect_deadline);
  return check_finish("socket");
}
