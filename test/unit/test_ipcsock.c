/* Descriptors between local processes (core/base/base_ipcsock.c): every rank hands every other
 * one a memfd, late peers, closed peers, strangers' messages, names already taken. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "fork_case.h"
#include "raw_dgram.h"

static uint64_t test_key(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return ((uint64_t)getpid() << 32) ^ (uint64_t)t.tv_nsec;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* A memfd of one page holding "from rank R tag T". */
static int page_fd(int rank, uint64_t tag) {
  int fd = memfd_create("choir-ipcsock-test", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, 4096) != 0) return -1;
  char* p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -1;
  snprintf(p, 4096, "from rank %d tag %llu", rank, (unsigned long long)tag);
  munmap(p, 4096);
  return fd;
}

/* 1 when fd maps the page that rank wrote for tag. */
static int page_is(int fd, int rank, uint64_t tag) {
  char want[64];
  snprintf(want, sizeof(want), "from rank %d tag %llu", rank, (unsigned long long)tag);
  char* p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return 0;
  int ok = strcmp(p, want) == 0;
  munmap(p, 4096);
  return ok;
}

/* Rank r of n: opens after delay_ms, sends its page to every other rank, receives theirs. Exit
 * status 0 when every page came once, from the right rank, with the right bytes. */
static int rank_exchange(uint64_t key, int r, int n, int delay_ms) {
  if (delay_ms > 0) usleep((useconds_t)delay_ms * 1000);
  ipcsock_t s;
  if (ipcsock_open(&s, key, r) != ncclSuccess) return 10;
  const uint64_t tag = 1000 + (uint64_t)r;
  int fd = page_fd(r, tag);
  if (fd < 0) return 11;
  for (int p = 0; p < n; p++)
    if (p != r && ipcsock_send_fd(&s, p, fd, tag, 5000) != ncclSuccess) return 12;
  close(fd);
  int seen[16] = {0};
  for (int k = 0; k < n - 1; k++) {
    int from = -1, got = -1;
    uint64_t t = 0;
    if (ipcsock_recv_fd(&s, &from, &got, &t, 5000) != ncclSuccess) return 13;
    if (from < 0 || from >= n || from == r || seen[from]++) return 14;
    if (t != 1000 + (uint64_t)from || !page_is(got, from, t)) return 15;
    close(got);
  }
  ipcsock_close(&s);
  return 0;
}

static void exchange(int n, int late_rank) {
  const uint64_t key = test_key();
  pid_t pid[16];
  for (int r = 0; r < n; r++) {
    pid[r] = fork();
    if (pid[r] == 0) _exit(rank_exchange(key, r, n, r == late_rank ? 300 : 0));
  }
  for (int r = 0; r < n; r++) {
    int st = 0;
    waitpid(pid[r], &st, 0);
    CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d of %d: status 0x%x", r, n, st);
  }
}

static void case_exchange_2(void) { exchange(2, -1); }
static void case_exchange_5(void) { exchange(5, -1); }
/* A peer that binds 300 ms after the others: they wait for it rather than fail. */
static void case_exchange_late(void) { exchange(4, 3); }

/* Nobody at the other end: the sender gives up at its deadline and names the peer; a receiver
 * that nobody sends to gives up at its own. */
static void case_deadlines(void) {
  ipcsock_t s;
  CHECK_EQ_INT(ipcsock_open(&s, test_key(), 0), ncclSuccess);
  int fd = page_fd(0, 1);
  err_clear_last();
  double t0 = now_ms();
  CHECK_EQ_INT(ipcsock_send_fd(&s, 7, fd, 1, 200), ncclRemoteError);
  double dt = now_ms() - t0;
  CHECK_MSG(dt >= 190 && dt < 2000, "send gave up after %.0f ms (200 asked)", dt);
  CHECK_CONTAINS(err_last(), "local rank 7");
  int from, got;
  uint64_t tag;
  t0 = now_ms();
  CHECK_EQ_INT(ipcsock_recv_fd(&s, &from, &got, &tag, 200), ncclRemoteError);
  dt = now_ms() - t0;
  CHECK_MSG(dt >= 190 && dt < 2000, "receive gave up after %.0f ms (200 asked)", dt);
  CHECK_EQ_INT(got, -1);
  close(fd);
  ipcsock_close(&s);
  /* Closed socket and bad arguments. */
  CHECK_EQ_INT(ipcsock_send_fd(&s, 1, 0, 1, 10), ncclInvalidArgument);
  CHECK_EQ_INT(ipcsock_recv_fd(&s, &from, &got, &tag, 10), ncclInvalidArgument);
  CHECK_EQ_INT(ipcsock_open(&s, 1, -1), ncclInvalidArgument);
}

/* The same (key, rank) twice is refused; another key or rank is not. */
static void case_name_taken(void) {
  const uint64_t key = test_key();
  ipcsock_t a, b, c, d;
  CHECK_EQ_INT(ipcsock_open(&a, key, 3), ncclSuccess);
  err_clear_last();
  CHECK_EQ_INT(ipcsock_open(&b, key, 3), ncclInvalidUsage);
  CHECK_CONTAINS(err_last(), "already open");
  CHECK_EQ_INT(b.fd, -1);
  CHECK_EQ_INT(ipcsock_open(&c, key + 1, 3), ncclSuccess);
  CHECK_EQ_INT(ipcsock_open(&d, key, 4), ncclSuccess);
  ipcsock_close(&a);
  /* Closed: the name is free again. */
  CHECK_EQ_INT(ipcsock_open(&b, key, 3), ncclSuccess);
  ipcsock_close(&b);
  ipcsock_close(&c);
  ipcsock_close(&d);
}

/* Raw datagrams to rank 0's name: too short, wrong magic, another key, no descriptor, two
 * descriptors. Each is dropped (its descriptors closed), and the good message after them is
 * received. */
static void case_strangers(void) {
  const uint64_t key = test_key();
  ipcsock_t s, peer;
  CHECK_EQ_INT(ipcsock_open(&s, key, 0), ncclSuccess);
  CHECK_EQ_INT(ipcsock_open(&peer, key, 1), ncclSuccess);
  int raw = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  CHECK_TRUE(raw >= 0);
  struct sockaddr_un a;
  socklen_t alen = sizeof(a);
  CHECK_TRUE(getsockname(s.fd, (struct sockaddr*)&a, &alen) == 0);
  struct {
    uint64_t magic, key, tag;
    int32_t rank, pad;
  } m = {0x63686f6972697063ull, key, 5, 1, 0};
  int fds[2] = {page_fd(9, 9), page_fd(9, 9)};
  const int nbad = 5;
  for (int i = 0; i < nbad; i++) {
    __typeof__(m) b = m;
    size_t blen = sizeof(b);
    int nfd = 1;
    if (i == 0) blen = 7;
    if (i == 1) b.magic ^= 1;
    if (i == 2) b.key ^= 1;
    if (i == 3) nfd = 0;
    if (i == 4) nfd = 2;
    CHECK_MSG(raw_dgram_send(raw, &a, alen, &b, blen, fds, nfd, 0) == (ssize_t)blen,
              "raw datagram %d: %s", i, strerror(errno));
  }
  int good = page_fd(1, 77);
  CHECK_EQ_INT(ipcsock_send_fd(&peer, 0, good, 77, 1000), ncclSuccess);
  int from = -1, got = -1;
  uint64_t tag = 0;
  CHECK_EQ_INT(ipcsock_recv_fd(&s, &from, &got, &tag, 1000), ncclSuccess);
  CHECK_EQ_INT(from, 1);
  CHECK_EQ_INT((int)tag, 77);
  CHECK_TRUE(page_is(got, 1, 77));
  CHECK_EQ_INT(s.dropped, nbad);
  close(got);
  close(good);
  close(fds[0]);
  close(fds[1]);
  close(raw);
  ipcsock_close(&s);
  ipcsock_close(&peer);
}

int main(void) {
  setenv("NCCL_CONF_FILE", "/nonexistent/choir.conf", 1);
  signal(SIGPIPE, SIG_IGN);
  fork_case("exchange_2", case_exchange_2);
  fork_case("exchange_5", case_exchange_5);
  fork_case("exchange_late", case_exchange_late);
  fork_case("deadlines", case_deadlines);
  fork_case("name_taken", case_name_taken);
  fork_case("strangers", case_strangers);
  return check_finish("ipcsock");
}
