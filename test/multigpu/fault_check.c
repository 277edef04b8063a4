/*
 * A rank that dies or stops in the middle of an operation, on GPUs: what the survivors see.
 *
 *   fault_check [-n RANKS] [-g GPUS] [--reps N] [--bytes B] [--op allreduce|sendrecv]
 *               [--how kill|stop] [--when op|init] [--bound-ms MS]
 *
 * Each repetition starts RANKS rank processes (one GPU each, or sharing the GPUs round-robin when
 * there are fewer: CHOIR_RANKS_SHARE_GPU=1, and then MPS must be on). The victim is the last
 * rank. With --when op (the default) every rank creates one communicator and loops on an
 * operation of B bytes (default 1 MiB): a float sum all-reduce, or with --op sendrecv a send to
 * the next rank and a receive from the previous one in one group; the victim launches its 6th
 * and then kills itself (SIGKILL) or stops (SIGSTOP) without waiting for it, so that the others
 * are inside that operation or the next. Every survivor waits for its stream while polling
 * ncclCommGetAsyncError, as PyTorch's watchdog does; it must see ncclRemoteError (or
 * ncclSystemError) within the bound after the victim's end, with ncclGetLastError naming the
 * victim's rank; then ncclCommAbort must return within 5 s and its stream drain within 5 s after
 * that (the kernels give up). With --when init the victim dies or stops while ncclCommInitRank
 * runs (20 ms into it), and every survivor's ncclCommInitRank must fail within the bound.
 * Bounds (default --bound-ms): a killed process 3000 ms (Choir sees a dead process at once
 * through its connections); a stopped one CHOIR_PEER_TIMEOUT + 3 s (this program sets 5 s unless
 * it is set); during creation CHOIR_BOOTSTRAP_TIMEOUT + 3 s (set to 10 s unless set). A survivor
 * that does not finish within 60 s is a hang: it is killed and counted; a stopped victim is
 * killed once the survivors are done. The transport follows the environment (NCCL_P2P_DISABLE,
 * NCCL_SHM_DISABLE, the net plugin): the device script runs it over p2p, shm and the network.
 *
 * Prints one line per repetition and a summary; exit 0 when every repetition held, 1 otherwise,
 * 77 (skipped, with the reason) without a GPU or, for processes sharing a GPU, without MPS.
 * Works against any NCCL: with NVIDIA's, survivors usually hang (it has no liveness check).
 */
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "nccl.h"

#define FC_MAX_RANKS 16
#define FC_HANG_S 60.0
#define FC_VICTIM_ITER 5

enum { FC_ALLREDUCE, FC_SENDRECV };
enum { FC_KILL, FC_STOP };
enum { FC_WHEN_OP, FC_WHEN_INIT };

/* What every process of a run knows (it travels as "n:ngpus:bytes:op:how:when"). */
typedef struct {
  int n, ngpus;
  size_t bytes;
  int op, how, when;
} fc_cfg_t;

/* What a survivor reports. */
typedef struct {
  int done;           /* 1 once the survivor wrote its result */
  int async;          /* what ncclCommGetAsyncError said (ncclSuccess: it never failed) */
  int abort_res;      /* ncclCommAbort's result */
  int stream_drained; /* the stream completed (or failed) after the abort */
  int cuda_err;       /* a CUDA error seen on the stream (0 none) */
  int iters;          /* all-reduces that completed */
  int pid;            /* the survivor's process (to match the MPS server's log) */
  double detect_s, abort_s, drain_s; /* detection time (CLOCK_REALTIME); abort and drain */
  double abort_at;                   /* CLOCK_REALTIME when ncclCommAbort was called */
  char msg[240];                     /* ncclGetLastError after the detection */
} fc_result_t;

/* Shared by the parent and every rank of a repetition (a file mapped by all of them). */
typedef struct {
  double death_s; /* CLOCK_REALTIME of the victim's kill, 0 until then */
  fc_result_t r[FC_MAX_RANKS];
} fc_shared_t;

static double fc_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void fc_sleep_us(long us) {
  struct timespec t = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&t, NULL);
}

/* The victim's end: the parent measures from the time it writes first. */
static void fc_victim_end(fc_shared_t* sh, int how) {
  sh->death_s = fc_now(); /* the parent reads it after this process is gone */
  fflush(NULL);
  raise(how == FC_STOP ? SIGSTOP : SIGKILL);
  for (;;) pause(); /* stopped: the parent kills it */
}

typedef struct {
  fc_shared_t* sh;
  int how;
} fc_victim_arg_t;

static void* fc_victim_thread(void* p) {
  const fc_victim_arg_t* a = p;
  fc_sleep_us(20 * 1000);
  fc_victim_end(a->sh, a->how);
  return NULL;
}

/* One operation of the loop, on stream. */
static ncclResult_t fc_op(const fc_cfg_t* c, ncclComm_t comm, int rank, const float* buf,
                          float* out, cudaStream_t stream) {
  const size_t count = c->bytes / sizeof(float);
  if (c->op == FC_ALLREDUCE) return ncclAllReduce(buf, out, count, ncclFloat, ncclSum, comm, stream);
  ncclResult_t r1, r2, r3;
  r1 = ncclGroupStart();
  r2 = ncclSend(buf, count, ncclFloat, (rank + 1) % c->n, comm, stream);
  r3 = ncclRecv(out, count, ncclFloat, (rank + c->n - 1) % c->n, comm, stream);
  ncclResult_t r4 = ncclGroupEnd();
  return r1 != ncclSuccess ? r1 : r2 != ncclSuccess ? r2 : r3 != ncclSuccess ? r3 : r4;
}

/* One rank: returns the process's exit status (the victim never returns). */
static int fc_rank(fc_shared_t* sh, const ncclUniqueId* id, int rank, const fc_cfg_t* c) {
  if (cudaSetDevice(rank % c->ngpus) != cudaSuccess) return 2;
  const int victim = c->n - 1;
  fc_result_t* me = &sh->r[rank];
  me->pid = (int)getpid();
  me->async = ncclSuccess;
  if (rank == victim && c->when == FC_WHEN_INIT) {
    static fc_victim_arg_t a;
    a = (fc_victim_arg_t){sh, c->how};
    pthread_t t;
    if (pthread_create(&t, NULL, fc_victim_thread, &a) != 0) return 2;
  }
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclCommInitRank(&comm, c->n, *id, rank);
  if (res != ncclSuccess) {
    me->async = res;
    me->detect_s = fc_now();
    snprintf(me->msg, sizeof(me->msg), "%s", ncclGetLastError(NULL));
    me->abort_res = ncclSuccess;
    me->stream_drained = 1; /* nothing was launched */
    __atomic_store_n(&me->done, 1, __ATOMIC_RELEASE);
    return 0;
  }
  float *buf = NULL, *out = NULL;
  cudaStream_t stream = NULL;
  if (cudaMalloc((void**)&buf, c->bytes) != cudaSuccess ||
      cudaMalloc((void**)&out, c->bytes) != cudaSuccess ||
      cudaMemset(buf, 0, c->bytes) != cudaSuccess ||
      cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess)
    return 2;
  for (int it = 0;; it++) {
    res = fc_op(c, comm, rank, buf, out, stream);
    if (rank == victim && c->when == FC_WHEN_OP && it == FC_VICTIM_ITER) fc_victim_end(sh, c->how);
    if (res != ncclSuccess) {
      /* Refused at the call: the communicator already knows. */
      me->async = res;
      me->detect_s = fc_now();
      break;
    }
    /* Wait as a watchdog does: the stream, or the communicator's error. */
    cudaError_t e;
    ncclResult_t async = ncclSuccess;
    while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady) {
      ncclCommGetAsyncError(comm, &async);
      if (async != ncclSuccess && async != ncclInProgress) break;
      fc_sleep_us(100);
    }
    if (e != cudaSuccess && e != cudaErrorNotReady) {
      me->cuda_err = (int)e;
      me->detect_s = fc_now();
      me->async = ncclUnhandledCudaError;
      break;
    }
    if (async != ncclSuccess && async != ncclInProgress) {
      me->async = async;
      me->detect_s = fc_now();
      break;
    }
    me->iters = it + 1;
  }
  snprintf(me->msg, sizeof(me->msg), "%s", ncclGetLastError(comm));
  double t0 = fc_now();
  me->abort_at = t0;
  me->abort_res = ncclCommAbort(comm);
  me->abort_s = fc_now() - t0;
  /* The kernels gave up: the stream ends (well or with an error) soon. */
  t0 = fc_now();
  cudaError_t e;
  while ((e = cudaStreamQuery(stream)) == cudaErrorNotReady && fc_now() - t0 < 10)
    fc_sleep_us(1000);
  me->drain_s = fc_now() - t0;
  me->stream_drained = e != cudaErrorNotReady;
  if (e != cudaSuccess && e != cudaErrorNotReady && me->cuda_err == 0) me->cuda_err = (int)e;
  __atomic_store_n(&me->done, 1, __ATOMIC_RELEASE); /* after everything else it wrote */
  /* FAULT_CHECK_LINGER_MS: stay a while before exiting (does anything of the communicator
   * outlive its abort until the process ends?). */
  const char* linger = getenv("FAULT_CHECK_LINGER_MS");
  if (linger != NULL) fc_sleep_us((long)atoi(linger) * 1000);
  return 0;
}

static void fc_hex(const ncclUniqueId* id, char* hex) {
  for (size_t i = 0; i < sizeof(id->internal); i++)
    sprintf(hex + 2 * i, "%02x", (unsigned char)id->internal[i]);
}

static int fc_unhex(const char* hex, ncclUniqueId* id) {
  if (strlen(hex) != 2 * sizeof(id->internal)) return -1;
  for (size_t i = 0; i < sizeof(id->internal); i++) {
    unsigned v = 0;
    if (sscanf(hex + 2 * i, "%2x", &v) != 1) return -1;
    id->internal[i] = (char)v;
  }
  return 0;
}

/* One repetition: 0 when it held. */
static int fc_rep(const char* self, int rep, const fc_cfg_t* c, double bound_ms,
                  double* worst_detect, double* worst_abort) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  char hex[2 * sizeof(id.internal) + 1], args[96];
  fc_hex(&id, hex);
  /* The ranks exec this program again (no CUDA state crosses a fork), so the shared results
   * live in a file that each maps. */
  char path[] = "/tmp/choir-fault-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0 || ftruncate(fd, sizeof(fc_shared_t)) != 0) return 1;
  fc_shared_t* sh = mmap(NULL, sizeof(fc_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (sh == MAP_FAILED) return 1;
  memset(sh, 0, sizeof(*sh));
  snprintf(args, sizeof(args), "%d:%d:%zu:%d:%d:%d", c->n, c->ngpus, c->bytes, c->op, c->how,
           c->when);
  const int n = c->n, victim = n - 1;
  pid_t pids[FC_MAX_RANKS];
  fflush(NULL);
  for (int r = 0; r < n; r++) {
    char rank_s[16];
    snprintf(rank_s, sizeof(rank_s), "%d", r);
    if ((pids[r] = fork()) == 0) {
      execl(self, self, "--rank", rank_s, args, hex, path, (char*)NULL);
      _exit(127);
    }
  }
  /* Wait for the survivors within FC_HANG_S (stragglers are hangs), then for the victim, which
   * a stop leaves alive until it is killed here. */
  const double start = fc_now();
  int left = n - 1, hangs = 0, bad = 0;
  int status[FC_MAX_RANKS];
  int reaped[FC_MAX_RANKS] = {0};
  while (left > 0) {
    for (int r = 0; r < victim; r++) {
      if (reaped[r]) continue;
      if (waitpid(pids[r], &status[r], WNOHANG) == pids[r]) {
        reaped[r] = 1;
        left--;
      }
    }
    if (left > 0 && fc_now() - start > FC_HANG_S) {
      for (int r = 0; r < victim; r++)
        if (!reaped[r]) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], &status[r], 0);
          reaped[r] = 1;
          hangs++;
          printf("rep %d: rank %d hung (no result after %.0f s)\n", rep, r, FC_HANG_S);
        }
      left = 0;
    }
    fc_sleep_us(10000);
  }
  kill(pids[victim], SIGKILL);
  waitpid(pids[victim], &status[victim], 0);
  if (!WIFSIGNALED(status[victim]) || WTERMSIG(status[victim]) != SIGKILL || sh->death_s == 0) {
    printf("rep %d: the victim (rank %d) did not end as planned (status 0x%x)\n", rep, victim,
           status[victim]);
    bad++;
  }
  double rep_detect = 0, rep_abort = 0;
  char name[32];
  snprintf(name, sizeof(name), "rank %d", victim);
  for (int r = 0; r < victim; r++) {
    const fc_result_t* x = &sh->r[r];
    if (!x->done) {
      printf("rep %d: rank %d left no result (status 0x%x)\n", rep, r, status[r]);
      bad++;
      continue;
    }
    const double detect_ms = (x->detect_s - sh->death_s) * 1e3;
    /* Creation that fails reports the rendezvous' error, whatever it is; later, the peer's. */
    const int ok_err = c->when == FC_WHEN_INIT ? x->async != ncclSuccess
                                               : x->async == ncclRemoteError ||
                                                     x->async == ncclSystemError;
    const int ok = ok_err && sh->death_s > 0 && detect_ms <= bound_ms &&
                   (c->when == FC_WHEN_INIT || strstr(x->msg, name)) &&
                   x->abort_res == ncclSuccess && x->abort_s < 5.0 && x->stream_drained &&
                   x->drain_s < 5.0;
    if (getenv("FAULT_CHECK_VERBOSE")) {
      /* Wall-clock times (seconds within the minute), to match the MPS server's log. */
      const double m0 = 60.0 * (double)(long)(sh->death_s / 60.0);
      printf("rep %d: rank %d (pid %d): victim gone at %.3f, detected %.3f, abort %.3f..%.3f, "
             "drained %.3f\n",
             rep, r, x->pid, sh->death_s - m0, x->detect_s - m0, x->abort_at - m0,
             x->abort_at + x->abort_s - m0, x->abort_at + x->abort_s + x->drain_s - m0);
    }
    if (!ok || getenv("FAULT_CHECK_VERBOSE"))
      printf(
          "rep %d: rank %d (pid %d): error %d after %.0f ms (%d operations done), abort %d in "
          "%.0f ms, stream %s in %.0f ms (CUDA error %d): %s\n",
          rep, r, x->pid, x->async, detect_ms, x->iters, x->abort_res, x->abort_s * 1e3,
          x->stream_drained ? "drained" : "STUCK", x->drain_s * 1e3, x->cuda_err, x->msg);
    bad += !ok;
    if (detect_ms > rep_detect) rep_detect = detect_ms;
    if (x->abort_s * 1e3 > rep_abort) rep_abort = x->abort_s * 1e3;
  }
  printf("rep %d: %d survivors, slowest detection %.0f ms, slowest abort %.0f ms, victim pid %d%s\n",
         rep, victim, rep_detect, rep_abort, (int)pids[victim], bad || hangs ? " FAILED" : "");
  if (rep_detect > *worst_detect) *worst_detect = rep_detect;
  if (rep_abort > *worst_abort) *worst_abort = rep_abort;
  munmap(sh, sizeof(fc_shared_t));
  unlink(path);
  return bad + hangs;
}

static int fc_pick(const char* v, const char* a, const char* b) {
  return strcmp(v, a) == 0 ? 0 : strcmp(v, b) == 0 ? 1 : -1;
}

int main(int argc, char** argv) {
  if (argc == 6 && strcmp(argv[1], "--rank") == 0) {
    fc_cfg_t c;
    ncclUniqueId id;
    if (sscanf(argv[3], "%d:%d:%zu:%d:%d:%d", &c.n, &c.ngpus, &c.bytes, &c.op, &c.how,
               &c.when) != 6 ||
        fc_unhex(argv[4], &id) != 0)
      return 2;
    int fd = open(argv[5], O_RDWR);
    fc_shared_t* sh =
        fd < 0 ? MAP_FAILED
               : mmap(NULL, sizeof(fc_shared_t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (sh == MAP_FAILED) return 2;
    close(fd);
    alarm((unsigned)FC_HANG_S + 30);
    return fc_rank(sh, &id, atoi(argv[2]), &c);
  }
  fc_cfg_t c = {.n = 3, .ngpus = 0, .bytes = 1 << 20, .op = FC_ALLREDUCE, .how = FC_KILL,
                .when = FC_WHEN_OP};
  int reps = 20;
  double bound_ms = 0;
  for (int i = 1; i < argc; i += 2) { /* every option takes a value */
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = v != NULL;
    if (ok && strcmp(argv[i], "-n") == 0)
      c.n = atoi(v);
    else if (ok && strcmp(argv[i], "-g") == 0)
      c.ngpus = atoi(v);
    else if (ok && strcmp(argv[i], "--reps") == 0)
      reps = atoi(v);
    else if (ok && strcmp(argv[i], "--bytes") == 0)
      c.bytes = (size_t)atoll(v);
    else if (ok && strcmp(argv[i], "--bound-ms") == 0)
      bound_ms = atof(v);
    else if (ok && strcmp(argv[i], "--op") == 0)
      ok = (c.op = fc_pick(v, "allreduce", "sendrecv")) >= 0;
    else if (ok && strcmp(argv[i], "--how") == 0)
      ok = (c.how = fc_pick(v, "kill", "stop")) >= 0;
    else if (ok && strcmp(argv[i], "--when") == 0)
      ok = (c.when = fc_pick(v, "op", "init")) >= 0;
    else
      ok = 0;
    if (!ok) {
      fprintf(stderr,
              "usage: %s [-n RANKS] [-g GPUS] [--reps N] [--bytes B] [--op allreduce|sendrecv] "
              "[--how kill|stop] [--when op|init] [--bound-ms MS]\n",
              argv[0]);
      return 2;
    }
  }
  if (c.n < 2 || c.n > FC_MAX_RANKS || c.bytes < sizeof(float) || reps < 1) {
    fprintf(stderr, "fault_check: -n must be 2..%d, --bytes at least 4, --reps at least 1\n",
            FC_MAX_RANKS);
    return 2;
  }
  /* The device count comes from a child: the parent must not start CUDA before it forks. */
  int pfd[2];
  if (pipe(pfd) != 0) return 2;
  pid_t probe = fork();
  if (probe == 0) {
    int v[2] = {0, 0};
    if (cudaGetDeviceCount(&v[0]) != cudaSuccess) v[0] = 0;
    if (v[0] > 0 && cudaDeviceGetAttribute(&v[1], cudaDevAttrMpsEnabled, 0) != cudaSuccess)
      v[1] = 0;
    (void)!write(pfd[1], v, sizeof(v));
    _exit(0);
  }
  int v[2] = {0, 0};
  close(pfd[1]);
  (void)!read(pfd[0], v, sizeof(v));
  close(pfd[0]);
  waitpid(probe, NULL, 0);
  const int count = v[0], mps = v[1];
  if (count == 0) {
    printf("fault_check: skipped: no GPU\n");
    return 77;
  }
  if (c.ngpus <= 0 || c.ngpus > count) c.ngpus = count < c.n ? count : c.n;
  if (c.ngpus < c.n) {
    if (!mps) {
      printf(
          "fault_check: skipped: %d ranks on %d GPU(s) share GPUs, which needs MPS "
          "(nvidia-cuda-mps-control -d, or mps_start from test/gpu-mps.sh)\n",
          c.n, c.ngpus);
      return 77;
    }
    setenv("CHOIR_RANKS_SHARE_GPU", "1", 0);
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("CHOIR_PEER_TIMEOUT", "5", 0);
  setenv("CHOIR_BOOTSTRAP_TIMEOUT", "10", 0);
  if (bound_ms <= 0)
    bound_ms = c.when == FC_WHEN_INIT ? 1000.0 * atof(getenv("CHOIR_BOOTSTRAP_TIMEOUT")) + 3000
               : c.how == FC_STOP     ? 1000.0 * atof(getenv("CHOIR_PEER_TIMEOUT")) + 3000
                                      : 3000;
  printf("fault_check: %d ranks on %d GPU(s), %zu-byte %s, rank %d %s %s, %d repetitions, "
         "detection bound %.0f ms, transport: %s\n",
         c.n, c.ngpus, c.bytes, c.op == FC_ALLREDUCE ? "all-reduces" : "send/recv rings",
         c.n - 1, c.how == FC_KILL ? "killed" : "stopped",
         c.when == FC_WHEN_INIT ? "during ncclCommInitRank" : "in its 6th operation", reps,
         bound_ms,
         getenv("NCCL_SHM_DISABLE") && getenv("NCCL_P2P_DISABLE") ? "net"
         : getenv("NCCL_P2P_DISABLE")                             ? "shm"
                                                                  : "p2p");
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (len <= 0) return 2;
  self[len] = '\0';
  int failed = 0;
  double worst_detect = 0, worst_abort = 0;
  for (int rep = 0; rep < reps; rep++)
    failed += fc_rep(self, rep, &c, bound_ms, &worst_detect, &worst_abort) != 0;
  printf("fault_check: %d of %d repetitions held; slowest detection %.0f ms, slowest abort %.0f "
         "ms\n",
         reps - failed, reps, worst_detect, worst_abort);
  return failed ? 1 : 0;
}
