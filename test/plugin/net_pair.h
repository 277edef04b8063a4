/*
 * For the tests that drive a v12 net plugin directly (test_net_socket.c, test_net_gdrshim.c):
 * the monotonic clock and a connected pair on device 0 of the same process. Include after
 * check.h; the includer defines `net` (the table) and `ctx` (its init context) before.
 */
#ifndef CHOIR_TEST_NET_PAIR_H
#define CHOIR_TEST_NET_PAIR_H

#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "nccl_net.h"

static inline double net_pair_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Listen on device 0, then connect and accept in turn (neither blocks) until both are up or
 * hang_s passes; the listener is closed. False (with a failed check) when they did not come up. */
static inline bool net_pair_connect(const ncclNet_v12_t* n, void* c, double hang_s, void** s_p,
                                    void** r_p) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  memset(handle, 0, sizeof(handle));
  void* l = NULL;
  *s_p = *r_p = NULL;
  CHECK_EQ_INT(n->listen(c, 0, handle, &l), ncclSuccess);
  if (l == NULL) return false;
  ncclNetDeviceHandle_v12_t* dh = NULL;
  const double t0 = net_pair_now_s();
  bool ok = true;
  while ((*s_p == NULL || *r_p == NULL) && ok) {
    if (*s_p == NULL) ok = n->connect(c, 0, handle, s_p, &dh) == ncclSuccess;
    if (ok && *r_p == NULL) ok = n->accept(l, r_p, &dh) == ncclSuccess;
    if (net_pair_now_s() - t0 > hang_s) ok = false;
  }
  CHECK_MSG(ok, "connect/accept did not complete");
  CHECK_EQ_INT(n->closeListen(l), ncclSuccess);
  return ok;
}

#endif
