/*
 * core/comm: user buffer registration (ncclCommRegister / ncclCommDeregister).
 *
 * NCCL's documented behaviour: a per-communicator registry of page-rounded address ranges, kept
 * sorted by start address. A buffer inside a range already registered shares that range's entry
 * (one more reference, the same handle); otherwise it gets an entry of its own. A handle is
 * released by as many deregistrations as registrations returned it; a handle this communicator
 * did not return (or has released) is an error. NCCL_LOCAL_REGISTER=0 turns registration off:
 * the handle is NULL, and deregistering NULL does nothing.
 *
 * Choir records registrations only: its data path does not read registered buffers in place yet
 * (no zero-copy); the README says so.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"

struct comm_reg {
  uintptr_t beg, end; /* page-rounded [beg, end) */
  int refs;
};

static uintptr_t reg_page(void) {
  long p = sysconf(_SC_PAGESIZE);
  return p > 0 ? (uintptr_t)p : 4096;
}

ncclResult_t comm_register(ncclComm_t comm, void* buff, size_t size, void** handle_p) {
  *handle_p = NULL;
  if (param_int(PARAM_LOCAL_REGISTER) == 0) {
    INFO(NCCL_REG, "ncclCommRegister: buffer %p of %zu bytes not registered (NCCL_LOCAL_REGISTER=0)",
         buff, size);
    return ncclSuccess;
  }
  if (buff == NULL) {
    WARN("ncclCommRegister: buff is NULL (size %zu): pass the buffer to register", size);
    return ncclInvalidArgument;
  }
  const uintptr_t page = reg_page(), start = (uintptr_t)buff;
  if (start > UINTPTR_MAX - page || size > UINTPTR_MAX - page - start) {
    WARN("ncclCommRegister: buff %p + size %zu runs past the end of the address space", buff, size);
    return ncclInvalidArgument;
  }
  const uintptr_t beg = start & ~(page - 1), end = (start + size + page - 1) & ~(page - 1);
  comm_regs_t* r = &comm->regs;
  ncclResult_t res = ncclSuccess;
  pthread_mutex_lock(&r->lock);
  int i = 0;
  for (; i < r->n && r->slots[i]->beg <= beg; i++) {
    if (r->slots[i]->end >= end) { /* covered: share the entry */
      r->slots[i]->refs++;
      *handle_p = r->slots[i];
      goto out;
    }
  }
  if (r->n == r->cap) {
    const int cap = r->cap < 32 ? 32 : 2 * r->cap;
    comm_reg_t** s = realloc(r->slots, (size_t)cap * sizeof(*s));
    if (s == NULL) goto oom;
    r->slots = s;
    r->cap = cap;
  }
  comm_reg_t* e = malloc(sizeof(*e));
  if (e == NULL) goto oom;
  *e = (comm_reg_t){.beg = beg, .end = end, .refs = 1};
  memmove(r->slots + i + 1, r->slots + i, (size_t)(r->n - i) * sizeof(*r->slots));
  r->slots[i] = e;
  r->n++;
  *handle_p = e;
  INFO(NCCL_REG, "ncclCommRegister: rank %d buffer %p of %zu bytes registered (pages %#lx-%#lx, %d "
       "registrations)", comm->rank, buff, size, (unsigned long)beg, (unsigned long)end, r->n);
  goto out;
oom:
  WARN("ncclCommRegister: out of memory recording buffer %p of %zu bytes", buff, size);
  res = ncclSystemError;
out:
  pthread_mutex_unlock(&r->lock);
  return res;
}

ncclResult_t comm_deregister(ncclComm_t comm, void* handle) {
  if (handle == NULL) return ncclSuccess;
  comm_regs_t* r = &comm->regs;
  pthread_mutex_lock(&r->lock);
  int i = 0;
  while (i < r->n && r->slots[i] != handle) i++;
  if (i == r->n) {
    pthread_mutex_unlock(&r->lock);
    WARN("ncclCommDeregister: handle %p was not returned by ncclCommRegister on this communicator "
         "(rank %d), or was released already: pass a handle of this communicator, once per "
         "registration", handle, comm->rank);
    return ncclInvalidUsage;
  }
  comm_reg_t* e = r->slots[i];
  if (--e->refs == 0) {
    memmove(r->slots + i, r->slots + i + 1, (size_t)(r->n - i - 1) * sizeof(*r->slots));
    r->n--;
    free(e);
  }
  pthread_mutex_unlock(&r->lock);
  return ncclSuccess;
}

int comm_registrations(ncclComm_t comm) {
  pthread_mutex_lock(&comm->regs.lock);
  const int n = comm->regs.n;
  pthread_mutex_unlock(&comm->regs.lock);
  return n;
}

void comm_regs_init(comm_regs_t* r) {
  memset(r, 0, sizeof(*r));
  pthread_mutex_init(&r->lock, NULL);
}

void comm_regs_free(ncclComm_t comm) {
  comm_regs_t* r = &comm->regs;
  if (r->n > 0)
    INFO(NCCL_REG, "rank %d: %d buffer registration(s) left at destroy, released with the "
         "communicator", comm->rank, r->n);
  for (int i = 0; i < r->n; i++) free(r->slots[i]);
  free(r->slots);
  pthread_mutex_destroy(&r->lock);
  memset(r, 0, sizeof(*r));
}
