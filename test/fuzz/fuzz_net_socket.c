/* net-socket's receive side (plugins/net-socket): what a peer writes to a listener, hellos
 * first, then the control stream (an 8-byte size per message, small messages inline) and the
 * data sockets. Each input opens a listener on loopback and 1 to 4 raw connections to it, writes
 * one chunk of the input into each (a chunk that starts with the plugin's magic gets the
 * listener's real id, so that the fuzzer gets past the first check), then accepts and, if a
 * connection forms, receives until the request completes or fails. Nothing may crash, hang or
 * report more bytes than were posted.
 *
 * Input: [k-1 (low 2 bits)] [receive size, 3 bytes LE] then k times [u16 length LE][bytes].
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "nsk.h"

static char rbuf[1 << 20];

static double fuzz_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool inited;
  if (!inited) {
    setenv("NCCL_SOCKET_IFNAME", "lo", 1);
    if (nsk_init(NULL) != ncclSuccess || nsk_g.ndev < 1) abort();
    inited = true;
  }
  if (size < 4) return 0;
  const int k = 1 + (data[0] & 3);
  size_t want = (size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16;
  if (want > sizeof(rbuf)) want = sizeof(rbuf);
  data += 4;
  size -= 4;

  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listen = NULL;
  if (nsk_listen(0, handle, &listen) != ncclSuccess) abort();
  nsk_handle_t h;
  memcpy(&h, handle, sizeof(h));
  int fds[4];
  for (int i = 0; i < k; i++) {
    fds[i] = fuzz_loopback_socket(); /* the listener is on lo (NCCL_SOCKET_IFNAME), IPv4 */
    if (fds[i] < 0 || fuzz_connect(fds[i], &h.addr.sa, sock_addr_len(&h.addr)) != 0) {
      perror("fuzz-net-socket: connect to the listener");
      abort();
    }
    size_t len = 0;
    if (size >= 2) {
      len = (size_t)data[0] | (size_t)data[1] << 8;
      data += 2;
      size -= 2;
    }
    if (len > size) len = size;
    uint8_t* chunk = malloc(len + 1);
    if (chunk == NULL) abort();
    memcpy(chunk, data, len);
    data += len;
    size -= len;
    uint64_t magic = NSK_MAGIC;
    if (len >= 16 && memcmp(chunk, &magic, 8) == 0) memcpy(chunk + 8, &h.listen_id, 8);
    /* Loopback takes a chunk of up to 64 KiB whole, before anyone reads. */
    for (size_t off = 0; off < len;) {
      ssize_t n = send(fds[i], chunk + off, len - off, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += (size_t)n;
    }
    free(chunk);
    shutdown(fds[i], SHUT_WR);
  }

  void* comm = NULL;
  for (int round = 0; round < 4 && comm == NULL; round++)
    if (nsk_accept(listen, &comm) != ncclSuccess) break;
  if (comm != NULL) {
    const double end = fuzz_now() + 0.5;
    for (int msg = 0; msg < 4; msg++) {
      void* buf = rbuf;
      void* req = NULL;
      if (nsk_irecv(comm, 1, &buf, &want, NULL, &req) != ncclSuccess || req == NULL) break;
      int done = 0, got = -1;
      ncclResult_t res = ncclSuccess;
      while (!done && res == ncclSuccess && fuzz_now() < end) {
        res = nsk_test(req, &done, &got);
        if (!done) sched_yield();
      }
      if (res != ncclSuccess || !done) break; /* failed (a closed peer, a lie) or starved */
      FUZZ_ASSERT(got >= 0 && (size_t)got <= want);
    }
    nsk_close_recv(comm);
  }
  for (int i = 0; i < k; i++) close(fds[i]);
  nsk_close_listen(listen);
  return 0;
}
