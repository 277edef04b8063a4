/* What a rank's bootstrap reads from connections to its listening socket
 * (core/bootstrap/bootstrap_net.c): the input is written into a real TCP connection to the
 * listener of rank 1 of 4 (tag FUZZ_TAG), which then makes progress rounds as a thread waiting for
 * a message would, until the connection is read to its end or dropped. Whatever arrives, the
 * reader must not crash, and what it queues must be well-formed: a message from an identified
 * rank of this bootstrap, of a kind ranks send, with its declared size. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_internal.h"
#include "fuzz_util.h"

#define FUZZ_TAG 0x5eed5eed5eed5eedull
#define FUZZ_JOIN_TAG 0x10151015ull

static bootstrap_t* bs;

static void fuzz_setup(void) {
  sock_addr_t lo;
  memset(&lo, 0, sizeof(lo));
  lo.sin.sin_family = AF_INET;
  lo.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bs_create(1, 4, FUZZ_TAG, NULL, &lo, &bs) != ncclSuccess) abort();
  /* As while bootstrap_init waits for its root: a ROOT_REPLY with this tag is accepted. */
  bs->join_tag = FUZZ_JOIN_TAG;
}

/* Back to the state after creation: no queued messages, no connection known. */
static void fuzz_reset(void) {
  for (bs_msg_t* m = bs->head; m != NULL;) {
    bs_msg_t* next = m->next;
    FUZZ_ASSERT((m->peer >= 0 && m->peer < bs->nranks && m->peer != bs->rank) ||
                m->peer == bs->nranks);
    if (m->peer == bs->nranks)
      FUZZ_ASSERT(m->kind == BS_MSG_ROOT_REPLY && m->tag == FUZZ_JOIN_TAG);
    else
      FUZZ_ASSERT(m->kind == BS_MSG_USER || m->kind == BS_MSG_COLL || m->kind == BS_MSG_SPLIT ||
                  m->kind == BS_MSG_WATCH);
    FUZZ_ASSERT(m->size <= BS_MAX_PAYLOAD);
    free(m);
    m = next;
  }
  bs->head = NULL;
  bs->tailp = &bs->head;
  memset(bs->in_from, 0, (size_t)bs->nranks * sizeof(*bs->in_from));
  memset(bs->peer_gone, 0, (size_t)bs->nranks + 1);
  memset(bs->peer_gone_err, 0, ((size_t)bs->nranks + 1) * sizeof(*bs->peer_gone_err));
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (bs == NULL) fuzz_setup();
  int fd = fuzz_loopback_socket();
  if (fd < 0) abort();
  if (fuzz_connect(fd, &bs->listener.addr.sa, sizeof(bs->listener.addr.sin)) != 0) {
    perror("fuzz-bootstrap-rank: connect to the bootstrap's listener");
    abort();
  }
  /* Write while the bootstrap reads (the input may exceed the socket buffers), then end the
   * stream so that the reader sees the end of whatever it was reading. */
  size_t off = 0;
  bool seen = false, shut = false;
  for (int round = 0; round < 100000; round++) {
    if (off < size) {
      ssize_t n = send(fd, data + off, size - off, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) off += (size_t)n;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) off = size; /* dropped by the reader */
    }
    if (off == size && !shut) {
      shutdown(fd, SHUT_WR);
      shut = true;
    }
    if (bs_progress_once(bs, 1) != ncclSuccess) break;
    if (bs->nins > 0) seen = true;
    if (seen && bs->nins == 0 && shut) break; /* read to its end (or dropped) and freed */
  }
  FUZZ_ASSERT(bs->nins == 0);
  close(fd);
  fuzz_reset();
  return 0;
}
