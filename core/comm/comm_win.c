/*
 * Symmetric memory windows (ncclCommWindowRegister / ncclCommWindowDeregister).
 *
 * Registration is collective, and inside a group it waits for the group's end (a job). Each rank
 * registers a buffer inside an ncclMemAlloc (cuMem) allocation. The ranks first tell each other
 * what they register (an allgather of comm_win_desc_t): a rank that cannot register says why, so
 * that every rank fails together instead of waiting for it; sizes and registration counts must
 * agree, and the ranks of one host (the LSA team) must hold their buffers at the same offset in
 * their allocations. Then the ranks of one host hand each other their allocations as file
 * descriptors (base_ipcsock.c: legacy CUDA IPC cannot export cuMem memory) and each maps all of
 * them into one flat virtual range, LSA rank i at i * stride, stride a multiple of 4 GiB: the
 * layout nccl_device.h's inline pointer arithmetic reads from the window (lsaFlatBase, stride4G).
 *
 * The window handle is a device copy of struct ncclWindow_vidmem, as in NCCL: kernels read it.
 * Deregistration is local: each process unmaps its view; the memory lives until every process
 * that mapped it has let go, so a peer still deregistering is never hurt.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "enqueue.h"
#include "nccl_device.h"

#define WIN_MAGIC 0x63686f697277696eull /* "choirwin" */
#define WIN_STRIDE_UNIT (4ull << 30)
#define WIN_FD_TIMEOUT_MS 30000

struct comm_win {
  struct ncclWindow_vidmem* dev; /* the handle the user holds */
  struct ncclWindow_vidmem host; /* what dev holds */
  void* buff;
  size_t size;
  cumem_flat_t flat;
  comm_win_t* next;
};

struct comm_devcomm {
  ncclDevComm_t dev;             /* what the user got (a copy) */
  void* res_base;                /* the resource window's allocation */
  comm_win_t* res_win;
  struct ncclDevCommWindowTable* table; /* device memory: the windows known at creation */
  comm_devcomm_t* next;
};

const char* comm_win_err_str(int err) {
  switch (err) {
    case COMM_WIN_OK: return "no error";
    case COMM_WIN_NOT_MEMALLOC: return "its buffer is not inside an ncclMemAlloc allocation";
    case COMM_WIN_NOT_CUMEM:
      return "its buffer is an ncclMemAlloc allocation made with NCCL_CUMEM_ENABLE=0 (cudaMalloc); "
             "windows need cuMem allocations";
    case COMM_WIN_MISALIGNED: return "its buffer is not at a 4 KiB boundary of its allocation";
    case COMM_WIN_TOO_LONG: return "its buffer and size run past the end of its allocation";
    case COMM_WIN_EXPORT:
      return "its allocation cannot be exported as a file descriptor (driver or container "
             "without POSIX file descriptor handles)";
    case COMM_WIN_ZERO: return "it passed a size of 0";
    case COMM_WIN_NULL: return "its buffer is NULL (for a device communicator: its resource "
                               "window could not be allocated)";
    default: return "an unknown reason";
  }
}

/* ---- the agreement (pure: unit-tested on the CPU) ------------------------------------------ */

ncclResult_t comm_win_agree(const comm_win_desc_t* d, int n, int me, comm_win_plan_t* plan,
                            char* why, size_t whylen) {
  memset(plan, 0, sizeof(*plan));
  why[0] = '\0';
  for (int r = 0; r < n; r++) {
    if (d[r].magic != WIN_MAGIC || d[r].rank != r) {
      snprintf(why, whylen, "rank %d sent a malformed window description", r);
      return ncclInternalError;
    }
  }
  for (int r = 0; r < n; r++) {
    if (d[r].err != COMM_WIN_OK) {
      snprintf(why, whylen, "rank %d cannot register its window: %s", r,
               comm_win_err_str(d[r].err));
      return r == me ? ncclInvalidArgument : ncclInvalidUsage;
    }
  }
  for (int r = 1; r < n; r++) {
    if (d[r].seq != d[0].seq) {
      snprintf(why, whylen, "rank %d is at its window registration #%llu while rank 0 is at "
               "#%llu: every rank registers the same windows in the same order",
               r, (unsigned long long)d[r].seq + 1, (unsigned long long)d[0].seq + 1);
      return ncclInvalidUsage;
    }
    if (d[r].flags != d[0].flags) {
      snprintf(why, whylen, "rank %d registers its window with winFlags %#x and rank 0 with %#x: "
               "every rank passes the same winFlags (NCCL_WIN_COLL_SYMMETRIC on all or none)",
               r, (unsigned)d[r].flags, (unsigned)d[0].flags);
      return ncclInvalidUsage;
    }
    if (d[r].size != d[0].size) {
      snprintf(why, whylen, "rank %d registers %llu bytes and rank 0 %llu: every rank registers "
               "a buffer of the same size", r, (unsigned long long)d[r].size,
               (unsigned long long)d[0].size);
      return ncclInvalidUsage;
    }
  }
  /* The LSA team: NCCL's block of consecutive ranks of one host (ncclTeamLsa), whose index is
   * what device code multiplies the stride by. */
  const int lsa = sys_lsa_block(&d[0].host_hash, sizeof(d[0]), n);
  const int lo = me - me % lsa;
  uint64_t max_mapped = 0;
  int first = -1;
  for (int r = lo; r < lo + lsa; r++) {
    if (first < 0) first = r;
    if (d[r].offset != d[first].offset) {
      snprintf(why, whylen, "ranks %d and %d of one host hold their buffers at offsets %llu and "
               "%llu of their ncclMemAlloc allocations; they must be equal (allocate and "
               "register the same way on every rank)", first, r,
               (unsigned long long)d[first].offset, (unsigned long long)d[r].offset);
      return ncclInvalidUsage;
    }
    if (r == me) plan->lsa_rank = plan->nlsa;
    if (plan->nlsa < COMM_WIN_MAX_LSA) plan->lsa_ranks[plan->nlsa] = r;
    plan->nlsa++;
    if (d[r].mapped > max_mapped) max_mapped = d[r].mapped;
  }
  if (plan->nlsa > COMM_WIN_MAX_LSA) {
    snprintf(why, whylen, "%d ranks on one host; windows support at most %d", plan->nlsa,
             COMM_WIN_MAX_LSA);
    return ncclInvalidUsage;
  }
  plan->stride = (max_mapped + WIN_STRIDE_UNIT - 1) / WIN_STRIDE_UNIT * WIN_STRIDE_UNIT;
  if (plan->stride == 0) plan->stride = WIN_STRIDE_UNIT;
  plan->offset = d[me].offset;
  return ncclSuccess;
}

/* ---- registration ---------------------------------------------------------------------------- */

void comm_wins_init(comm_wins_t* w) {
  memset(w, 0, sizeof(*w));
  pthread_mutex_init(&w->lock, NULL);
  pthread_mutex_init(&w->run_lock, NULL);
  w->sock.fd = -1;
}

static void comm_win_free(comm_win_t* w) {
  if (w->dev != NULL) cudaFree(w->dev);
  cumem_flat_free(&w->flat);
  free(w);
}

static void comm_devcomm_free(comm_devcomm_t* d);

void comm_wins_free(ncclComm_t comm) {
  comm_wins_t* ws = &comm->wins;
  for (comm_devcomm_t *d = ws->devcomms, *next; d; d = next) {
    next = d->next;
    d->res_win = NULL; /* freed with the windows below */
    comm_devcomm_free(d);
  }
  int n = 0;
  for (comm_win_t *w = ws->head, *next; w; w = next) {
    next = w->next;
    comm_win_free(w); /* the data path, which knew of it, is gone already (comm_free) */
    n++;
  }
  if (n > 0)
    INFO(NCCL_REG, "rank %d: %d window(s) left at destroy, released with the communicator",
         comm->rank, n);
  ipcsock_close(&ws->sock);
  pthread_mutex_destroy(&ws->run_lock);
  pthread_mutex_destroy(&ws->lock);
  memset(ws, 0, sizeof(*ws));
  ws->sock.fd = -1;
}

/* This rank's description of the buffer it registers, and its allocation's descriptor (-1 when
 * it has none). */
static void comm_win_describe(ncclComm_t comm, void* buff, size_t size, int flags,
                              comm_win_desc_t* d, int* fd_p) {
  memset(d, 0, sizeof(*d));
  d->magic = WIN_MAGIC;
  d->flags = flags;
  d->rank = comm->rank;
  d->seq = comm->wins.seq;
  d->size = size;
  d->host_hash = comm->peers[comm->rank].host_hash;
  *fd_p = -1;
  void* base = NULL;
  size_t asked = 0, mapped = 0;
  bool cumem = false;
  if (buff == NULL) d->err = COMM_WIN_NULL;
  else if (size == 0) d->err = COMM_WIN_ZERO;
  else if (cumem_find(buff, &base, &asked, &cumem) != ncclSuccess) d->err = COMM_WIN_NOT_MEMALLOC;
  else if (!cumem) d->err = COMM_WIN_NOT_CUMEM;
  else if (((uintptr_t)buff - (uintptr_t)base) % 4096 != 0) d->err = COMM_WIN_MISALIGNED;
  else if ((uintptr_t)buff - (uintptr_t)base + size > asked) d->err = COMM_WIN_TOO_LONG;
  else if (cumem_export_fd(base, &mapped, fd_p) != ncclSuccess) d->err = COMM_WIN_EXPORT;
  d->offset = base != NULL ? (uint64_t)((uintptr_t)buff - (uintptr_t)base) : 0;
  d->mapped = mapped;
}

/* The descriptors of the other LSA ranks, into fds[lsa index] (own: own_fd, not duplicated). */
static ncclResult_t comm_win_swap_fds(ncclComm_t comm, const comm_win_plan_t* p, int own_fd,
                                      int* fds) {
  comm_wins_t* ws = &comm->wins;
  for (int i = 0; i < p->nlsa; i++) fds[i] = i == p->lsa_rank ? own_fd : -1;
  for (int i = 0; i < p->nlsa; i++) {
    if (i == p->lsa_rank) continue;
    CHECK(ipcsock_send_fd(&ws->sock, p->lsa_ranks[i], own_fd, ws->seq, WIN_FD_TIMEOUT_MS));
  }
  for (int k = 0; k < p->nlsa - 1; k++) {
    int from = -1, fd = -1;
    uint64_t tag = 0;
    CHECK(ipcsock_recv_fd(&ws->sock, &from, &fd, &tag, WIN_FD_TIMEOUT_MS));
    int i = 0;
    while (i < p->nlsa && p->lsa_ranks[i] != from) i++;
    if (i == p->nlsa || i == p->lsa_rank || fds[i] >= 0 || tag != ws->seq) {
      close(fd);
      WARN("ncclCommWindowRegister: rank %d got a window descriptor from rank %d for "
           "registration #%llu while at #%llu", comm->rank, from, (unsigned long long)tag + 1,
           (unsigned long long)ws->seq + 1);
      return ncclInternalError;
    }
    fds[i] = fd;
  }
  return ncclSuccess;
}

static ncclResult_t comm_win_build(ncclComm_t comm, void* buff, size_t size,
                                   const comm_win_plan_t* p, const comm_win_desc_t* d,
                                   int* fds, comm_win_t** win_p) {
  ncclResult_t res = ncclSuccess;
  comm_win_t* w = NULL;
  CHECK(MEM_CALLOC(&w, 1));
  CHECK_GOTO(cumem_flat_reserve(&w->flat, p->stride * (size_t)p->nlsa, p->nlsa), res, fail);
  for (int i = 0; i < p->nlsa; i++)
    CHECK_GOTO(cumem_flat_map(&w->flat, i, (size_t)i * p->stride, d[p->lsa_ranks[i]].mapped,
                              fds[i], comm->cuda_dev), res, fail);
  w->buff = buff;
  w->size = size;
  w->host.winHost = w;
  w->host.lsaFlatBase = (char*)w->flat.va + p->offset;
  w->host.lsaRank = p->lsa_rank;
  w->host.worldRank = comm->rank;
  w->host.stride4G = (uint32_t)(p->stride / WIN_STRIDE_UNIT);
  CHECK_GOTO(cuda_result(cudaMalloc((void**)&w->dev, sizeof(w->host)), "cudaMalloc"), res, fail);
  CHECK_GOTO(cuda_result(cudaMemcpy(w->dev, &w->host, sizeof(w->host), cudaMemcpyHostToDevice),
                         "cudaMemcpy"), res, fail);
  *win_p = w;
  return ncclSuccess;
fail:
  comm_win_free(w);
  return res;
}

ncclResult_t comm_win_register(ncclComm_t comm, void* buff, size_t size, int flags,
                               comm_win_t** win_p) {
  const char* f = "ncclCommWindowRegister";
  comm_wins_t* ws = &comm->wins;
  ncclResult_t res = ncclSuccess;
  comm_win_desc_t* all = NULL;
  int* fds = NULL;
  int own_fd = -1;
  char why[320];
  /* Registrations of one communicator run one at a time, in call order (the job queue's
   * run_lock): seq and the socket need no lock of their own; the list does (deregistration). */
  pthread_mutex_lock(&comm->bootstrap_lock);
  /* The socket is bound before the allgather: once that is done every peer can be sent to. */
  if (ws->sock.fd < 0) CHECK_GOTO(ipcsock_open(&ws->sock, comm->comm_hash, comm->rank), res, out);
  CHECK_GOTO(MEM_CALLOC(&all, (size_t)comm->nranks), res, out);
  comm_win_describe(comm, buff, size, flags, &all[comm->rank], &own_fd);
  CHECK_GOTO(bootstrap_allgather(comm->bootstrap, all, sizeof(*all)), res, out);
  comm_win_plan_t plan;
  res = comm_win_agree(all, comm->nranks, comm->rank, &plan, why, sizeof(why));
  if (res != ncclSuccess) {
    WARN("%s: rank %d, buffer %p of %zu bytes: %s", f, comm->rank, buff, size, why);
    goto out;
  }
  CHECK_GOTO(MEM_CALLOC(&fds, (size_t)plan.nlsa), res, out);
  res = comm_win_swap_fds(comm, &plan, own_fd, fds);
  if (res == ncclSuccess) res = comm_win_build(comm, buff, size, &plan, all, fds, win_p);
  for (int i = 0; i < plan.nlsa; i++)
    if (fds[i] >= 0 && fds[i] != own_fd) close(fds[i]);
  if (res != ncclSuccess) goto out;
  /* The data path may read and write a symmetric one directly (Sym kernels): every rank passes
   * buffers at the same offset of it, which NCCL_WIN_COLL_SYMMETRIC promises. */
  if (comm->dp != NULL && (flags & NCCL_WIN_COLL_SYMMETRIC))
    res = enqueue_comm_window_add(comm->dp, buff, size, (*win_p)->host.lsaFlatBase,
                                  (*win_p)->host.stride4G, plan.nlsa);
  if (res != ncclSuccess) {
    comm_win_free(*win_p);
    *win_p = NULL;
    goto out;
  }
  pthread_mutex_lock(&ws->lock);
  (*win_p)->next = ws->head;
  ws->head = *win_p;
  pthread_mutex_unlock(&ws->lock);
  INFO(NCCL_REG, "%s: rank %d buffer %p of %zu bytes: LSA rank %d of %d, flat base %p, stride "
       "%u x 4 GiB", f, comm->rank, buff, size, plan.lsa_rank, plan.nlsa,
       (void*)(*win_p)->host.lsaFlatBase, (*win_p)->host.stride4G);
out:
  ws->seq++; /* every rank counts the attempt, failed or not, alike */
  if (own_fd >= 0) close(own_fd);
  free(fds);
  free(all);
  pthread_mutex_unlock(&comm->bootstrap_lock);
  return res;
}

ncclResult_t comm_win_deregister(ncclComm_t comm, ncclWindow_t win) {
  comm_wins_t* ws = &comm->wins;
  pthread_mutex_lock(&ws->lock);
  comm_win_t** link = &ws->head;
  while (*link != NULL && (*link)->dev != (struct ncclWindow_vidmem*)win) link = &(*link)->next;
  comm_win_t* w = *link;
  if (w != NULL) *link = w->next;
  pthread_mutex_unlock(&ws->lock);
  if (w == NULL) {
    WARN("ncclCommWindowDeregister: window %p is not a registered window of this communicator "
         "(rank %d), or was deregistered already", (void*)win, comm->rank);
    return ncclInvalidArgument;
  }
  if (comm->dp != NULL) enqueue_comm_window_remove(comm->dp, w->host.lsaFlatBase);
  comm_win_free(w);
  return ncclSuccess;
}

/* ---- device communicators (LSA) ------------------------------------------------------------- */

/* NCCL's reciprocal for division by multiplication: floor(2^32 / x) in 32 bits. */
static uint32_t comm_rcp32(uint32_t x) { return x == 0 ? 0 : (uint32_t)((1ull << 32) / x); }

/* The resource window's layout; with `write`, each buffer's handle into its outBufferHandle. */
static ncclResult_t comm_devcomm_walk(const ncclDevCommRequirements_t* reqs, int lsa_size,
                                      comm_devcomm_layout_t* out, bool write) {
  memset(out, 0, sizeof(*out));
  size_t off = 0;
  /* The LSA barriers first: per barrier three words of state and an inbox word per LSA rank. */
  if (reqs->lsaBarrierCount > 0) {
    out->lsa_barrier.nBarriers = reqs->lsaBarrierCount;
    out->lsa_barrier.bufHandle = 0;
    off = (size_t)(3 + lsa_size) * (size_t)reqs->lsaBarrierCount * sizeof(uint32_t);
  }
  int k = 0;
  for (ncclDevResourceRequirements_t* r = reqs->resourceRequirementsList; r; r = r->next, k++) {
    const size_t align = r->bufferAlign > 128 ? r->bufferAlign : 128;
    off = (off + align - 1) / align * align;
    const ncclDevResourceHandle_t h = (ncclDevResourceHandle_t)(off / 128);
    if (k < COMM_DEVCOMM_SHOWN) out->res_handles[k] = h;
    if (write && r->outBufferHandle != NULL) *r->outBufferHandle = h;
    if (r->bufferSize > ((size_t)UINT32_MAX) * 128 - off) {
      WARN("ncclDevCommCreate: the resource buffers need more than %llu bytes (entry %d asks "
           "for %zu)", (unsigned long long)UINT32_MAX * 128, k, r->bufferSize);
      return ncclInvalidArgument;
    }
    off += r->bufferSize;
  }
  out->nres = k;
  out->bytes = off == 0 ? 4096 : (off + 4095) / 4096 * 4096;
  return ncclSuccess;
}

ncclResult_t comm_devcomm_layout(const ncclDevCommRequirements_t* reqs, int lsa_size,
                                 comm_devcomm_layout_t* out) {
  return comm_devcomm_walk(reqs, lsa_size, out, false);
}

/* The windows registered so far, as ncclFindWindow reads them: tables of 32, chained. */
static ncclResult_t comm_devcomm_table(ncclComm_t comm, struct ncclDevCommWindowTable** out) {
  comm_wins_t* ws = &comm->wins;
  *out = NULL;
  /* One device allocation holding every table; the host image first. */
  const size_t tab = 32 * 3 * sizeof(uintptr_t) + sizeof(void*);
  pthread_mutex_lock(&ws->lock);
  int n = 0;
  for (comm_win_t* w = ws->head; w; w = w->next) n++;
  const int ntab = n == 0 ? 1 : (n + 31) / 32;
  char* host = calloc((size_t)ntab, tab);
  int i = 0;
  for (comm_win_t* w = host != NULL ? ws->head : NULL; w; w = w->next, i++) {
    uintptr_t* e = (uintptr_t*)(host + (size_t)(i / 32) * tab) + 3 * (i % 32);
    e[0] = (uintptr_t)w->buff;
    e[1] = (uintptr_t)w->size;
    e[2] = (uintptr_t)w->dev;
  }
  pthread_mutex_unlock(&ws->lock);
  if (host == NULL) return ncclSystemError;
  char* dev = NULL;
  ncclResult_t res = cuda_result(cudaMalloc((void**)&dev, (size_t)ntab * tab), "cudaMalloc");
  if (res != ncclSuccess) {
    free(host);
    return res;
  }
  for (int t = 0; t + 1 < ntab; t++) {
    char* next = dev + (size_t)(t + 1) * tab;
    memcpy(host + (size_t)t * tab + 32 * 3 * sizeof(uintptr_t), &next, sizeof(next));
  }
  res = cuda_result(cudaMemcpy(dev, host, (size_t)ntab * tab, cudaMemcpyHostToDevice),
                    "cudaMemcpy");
  free(host);
  if (res != ncclSuccess) {
    cudaFree(dev);
    return res;
  }
  *out = (struct ncclDevCommWindowTable*)dev;
  return ncclSuccess;
}

static void comm_devcomm_free(comm_devcomm_t* d) {
  if (d->table != NULL) cudaFree(d->table);
  if (d->res_base != NULL) cumem_free(d->res_base);
  free(d);
}

/* Collective: the resource window (zeroed), the window table, the device communicator. */
static ncclResult_t comm_devcomm_create(ncclComm_t comm, const comm_devcomm_layout_t* l,
                                        ncclDevComm_t* out) {
  ncclResult_t res = ncclSuccess;
  comm_devcomm_t* d = NULL;
  CHECK(MEM_CALLOC(&d, 1));
  /* A failed allocation still joins the registration (a NULL buffer), which then fails on every
   * rank, naming this one. */
  if (cumem_alloc(&d->res_base, l->bytes) == ncclSuccess)
    res = cuda_result(cudaMemset(d->res_base, 0, l->bytes), "cudaMemset");
  else
    WARN("ncclDevCommCreate: rank %d could not allocate its %zu-byte resource window with cuMem",
         comm->rank, l->bytes);
  if (res == ncclSuccess)
    res = comm_win_register(comm, d->res_base, l->bytes, NCCL_WIN_DEFAULT, &d->res_win);
  if (res == ncclSuccess) res = comm_devcomm_table(comm, &d->table);
  if (res != ncclSuccess) {
    if (d->res_win != NULL) comm_win_deregister(comm, (ncclWindow_t)d->res_win->dev);
    d->res_win = NULL;
    comm_devcomm_free(d);
    return res;
  }
  const int lsa = sys_lsa_block(&comm->peers[0].host_hash, sizeof(comm->peers[0]), comm->nranks);
  ncclDevComm_t* c = &d->dev;
  memset(c, 0, sizeof(*c));
  c->rank = comm->rank;
  c->nRanks = comm->nranks;
  c->nRanks_rcp32 = comm_rcp32((uint32_t)comm->nranks);
  c->lsaRank = comm->rank % lsa;
  c->lsaSize = lsa;
  c->lsaSize_rcp32 = comm_rcp32((uint32_t)lsa);
  c->windowTable = d->table;
  c->resourceWindow = (ncclWindow_t)d->res_win->dev;
  c->resourceWindow_inlined = d->res_win->host;
  c->lsaBarrier = l->lsa_barrier;
  pthread_mutex_lock(&comm->wins.lock);
  d->next = comm->wins.devcomms;
  comm->wins.devcomms = d;
  pthread_mutex_unlock(&comm->wins.lock);
  *out = *c;
  INFO(NCCL_INIT, "ncclDevCommCreate: rank %d: LSA rank %d of %d, %zu resource bytes, %d LSA "
       "barrier(s)", comm->rank, c->lsaRank, c->lsaSize, l->bytes, l->lsa_barrier.nBarriers);
  return ncclSuccess;
}

ncclResult_t comm_devcomm_destroy(ncclComm_t comm, const ncclDevComm_t* dev) {
  comm_wins_t* ws = &comm->wins;
  pthread_mutex_lock(&ws->lock);
  comm_devcomm_t** link = &ws->devcomms;
  while (*link != NULL && (*link)->dev.resourceWindow != dev->resourceWindow) link = &(*link)->next;
  comm_devcomm_t* d = *link;
  if (d != NULL) *link = d->next;
  pthread_mutex_unlock(&ws->lock);
  if (d == NULL || dev->resourceWindow == NULL) {
    WARN("ncclDevCommDestroy: devComm %p was not created by ncclDevCommCreate on this "
         "communicator (rank %d), or was destroyed already", (const void*)dev, comm->rank);
    return ncclInvalidUsage;
  }
  ncclResult_t res = comm_win_deregister(comm, (ncclWindow_t)d->res_win->dev);
  comm_devcomm_free(d);
  return res;
}

/* ---- the API's jobs: now, or at the group's end, in call order per communicator -------------
 * Jobs of one group run on threads of their own, but two registrations of one communicator must
 * meet their peers' in the same order: each job joins its communicator's queue when submitted,
 * and whichever job runs first works the queue from its head until its own entry is done. */

typedef enum { WIN_JOB_REGISTER, WIN_JOB_DEVCOMM } win_job_kind_t;

struct win_job {
  group_job_t base;
  win_job_kind_t kind;
  ncclComm_t comm;
  void* buff;
  size_t size;
  int flags;
  ncclWindow_t* win_p;
  comm_win_t* win;
  comm_devcomm_layout_t layout;
  ncclDevComm_t* dev_p;
  ncclDevComm_t dev;
  bool done;
  ncclResult_t res;
  win_job_t* qnext;
};

static ncclResult_t win_job_run(group_job_t* job) {
  win_job_t* j = (win_job_t*)job;
  comm_wins_t* ws = &j->comm->wins;
  pthread_mutex_lock(&ws->run_lock);
  while (!j->done) {
    pthread_mutex_lock(&ws->lock);
    win_job_t* h = ws->q_head;
    if (h != NULL) {
      ws->q_head = h->qnext;
      if (ws->q_head == NULL) ws->q_tail = NULL;
    }
    pthread_mutex_unlock(&ws->lock);
    if (h == NULL) break; /* cannot happen: j is in the queue until done */
    h->res = h->kind == WIN_JOB_REGISTER
                 ? comm_win_register(h->comm, h->buff, h->size, h->flags, &h->win)
                 : comm_devcomm_create(h->comm, &h->layout, &h->dev);
    h->done = true;
  }
  pthread_mutex_unlock(&ws->run_lock);
  return j->done ? j->res : ncclInternalError;
}

static void win_job_complete(group_job_t* job, ncclResult_t res) {
  win_job_t* j = (win_job_t*)job;
  if (!j->done) {
    /* Never ran (the group failed first): out of the queue. */
    comm_wins_t* ws = &j->comm->wins;
    pthread_mutex_lock(&ws->lock);
    win_job_t** link = &ws->q_head;
    ws->q_tail = NULL;
    for (win_job_t* q = ws->q_head; q; q = q->qnext) {
      if (q == j) *link = q->qnext;
      else {
        link = &q->qnext;
        ws->q_tail = q;
      }
    }
    pthread_mutex_unlock(&ws->lock);
  }
  if (res == ncclSuccess && j->kind == WIN_JOB_REGISTER && j->win != NULL)
    *j->win_p = (ncclWindow_t)j->win->dev;
  if (res == ncclSuccess && j->kind == WIN_JOB_DEVCOMM) *j->dev_p = j->dev;
  free(j);
}

static ncclResult_t win_job_submit(win_job_t* j) {
  comm_wins_t* ws = &j->comm->wins;
  j->base.run = win_job_run;
  j->base.complete = win_job_complete;
  j->base.cuda_dev = j->comm->cuda_dev;
  j->base.nonblocking = !j->comm->config.blocking;
  pthread_mutex_lock(&ws->lock);
  if (ws->q_tail != NULL) ws->q_tail->qnext = j;
  else ws->q_head = j;
  ws->q_tail = j;
  pthread_mutex_unlock(&ws->lock);
  return enqueue_job_submit(&j->base);
}

ncclResult_t comm_win_submit(ncclComm_t comm, void* buff, size_t size, int flags,
                             ncclWindow_t* win_p) {
  win_job_t* j = NULL;
  CHECK(MEM_CALLOC(&j, 1));
  j->kind = WIN_JOB_REGISTER;
  j->comm = comm;
  j->buff = buff;
  j->size = size;
  j->flags = flags;
  j->win_p = win_p;
  *win_p = NULL;
  return win_job_submit(j);
}

ncclResult_t comm_devcomm_submit(ncclComm_t comm, const ncclDevCommRequirements_t* reqs,
                                 ncclDevComm_t* out) {
  win_job_t* j = NULL;
  CHECK(MEM_CALLOC(&j, 1));
  const int lsa = sys_lsa_block(&comm->peers[0].host_hash, sizeof(comm->peers[0]), comm->nranks);
  /* The handles are written now: kernels' launch parameters may be built before the group's
   * end. */
  ncclResult_t res = comm_devcomm_walk(reqs, lsa, &j->layout, true);
  if (res != ncclSuccess) {
    free(j);
    return res;
  }
  j->kind = WIN_JOB_DEVCOMM;
  j->comm = comm;
  j->dev_p = out;
  return win_job_submit(j);
}
