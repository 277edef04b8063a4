/*
 * Choir perf tools: host-side declarations shared by the benchmark binaries (*_perf) and their
 * unit tests. Nothing here needs CUDA or NCCL; perf_run.c is the only file that calls them.
 *
 * Modules
 *   perf_opts.c   command line (nccl-tests options), type and operator names
 *   perf_coll.c   the nine collectives: buffer sizes, bandwidth formulas, expected results
 *   perf_fmt.c    text output (nccl-tests format) and JSON output
 *   perf_world.c  processes: single process, the fork launcher (-p N) with its shared-memory
 *                 rendezvous, and thread teams inside a process
 *   perf_world_mpi.c  the same interface over MPI (the *_perf_mpi binaries)
 *   perf_run.c    the benchmark itself (CUDA, NCCL, timing, checking, watchdog)
 */
#ifndef CHOIR_PERF_H
#define CHOIR_PERF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "perf_gen.h"

/* Exit statuses of the binaries. */
#define PERF_EXIT_OK 0
#define PERF_EXIT_WRONG 1   /* some element was wrong */
#define PERF_EXIT_USAGE 2   /* bad command line */
#define PERF_EXIT_ERROR 3   /* a CUDA, NCCL or system call failed */
#define PERF_EXIT_TIMEOUT 4 /* -T expired */
#define PERF_EXIT_ABORTED 5 /* stopped because another process failed */
#define PERF_EXIT_SKIP 77   /* no (or not enough) CUDA devices */

#define PERF_MAX_PROCS 1024

/* ---- Collectives (perf_coll.c) ---- */

enum perf_coll_id {
  PERF_ALL_REDUCE = 0,
  PERF_ALL_GATHER,
  PERF_REDUCE_SCATTER,
  PERF_BROADCAST,
  PERF_REDUCE,
  PERF_SENDRECV,
  PERF_ALLTOALL,
  PERF_GATHER,
  PERF_SCATTER,
  PERF_NCOLLS
};

struct perf_coll {
  const char* name; /* "all_reduce"; the binary is <name>_perf */
  int reduces;      /* takes a reduction operator (-o) */
  int rooted;       /* takes a root (-r) */
  int inplace_ok;   /* in-place results are defined (and checked) */
};

extern const struct perf_coll perf_colls[PERF_NCOLLS];

/* Per-rank element counts of one collective at one size, as nccl-tests derives them. */
struct perf_counts {
  size_t send_count;   /* elements in each rank's send buffer */
  size_t recv_count;   /* elements in each rank's receive buffer */
  size_t param_count;  /* the count argument of the NCCL call */
  size_t send_inplace; /* in place: sendbuff = recvbuff + rank * send_inplace elements */
  size_t recv_inplace; /* in place: recvbuff = recvbuff + rank * recv_inplace elements */
};

/* Counts for `count` elements (the -b..-e size divided by the element size) over nranks ranks. */
void perf_coll_counts(int coll, size_t count, int nranks, struct perf_counts* c);

/* busbw = algbw * factor. */
double perf_coll_busbw_factor(int coll, int nranks);

/* algbw and busbw in GB/s (1e9 bytes) for one call of param_count elements taking sec seconds. */
void perf_coll_bw(int coll, size_t param_count, size_t elt_size, int nranks, double sec,
                  double* algbw, double* busbw);

/* Whether rank's send buffer feeds the collective (broadcast and scatter: only the root's). */
int perf_coll_has_input(int coll, int rank, int root);

/* How rank's output is defined; returns 0 when that rank has no output to check (non-root ranks
 * of reduce and gather). */
int perf_coll_expect(int coll, int rank, int nranks, int root, const struct perf_counts* c,
                     struct perf_expect* x);

/* ---- Options (perf_opts.c) ---- */

struct perf_opts {
  int nthreads;      /* -t */
  int ngpus;         /* -g, GPUs per thread */
  int nprocs;        /* -p, processes forked by the built-in launcher */
  size_t min_bytes;  /* -b */
  size_t max_bytes;  /* -e */
  size_t step_bytes; /* -i */
  int step_factor;   /* -f (1: add step_bytes) */
  int iters;         /* -n */
  int warmup;        /* -w */
  int agg;           /* -m */
  int check;         /* -c */
  int ntypes;        /* -d */
  int types[REF_NTYPES];
  int nops; /* -o */
  int ops[REF_NOPS];
  int root;          /* -r, -1 for all */
  int blocking;      /* -z */
  int graph;         /* -G */
  int average;       /* -a */
  int timeout;       /* -T, seconds, 0 = none */
  const char* json;  /* -J */
  int cuda_malloc;   /* --cudamalloc: buffers from cudaMalloc instead of ncclMemAlloc */
  int local_register; /* -R: 0 none, 1 ncclCommRegister, 2 symmetric windows, as nccl-tests */
  int ranks_per_gpu; /* --ranks-per-gpu: local rank slot i uses device i / ranks_per_gpu */
  int help;          /* -h */
};

/* Parse argv. Returns 0, or PERF_EXIT_USAGE with a one-line message naming the option in err.
 * mpi_build: the *_perf_mpi binaries, where -p is not available. */
int perf_opts_parse(struct perf_opts* o, int argc, char** argv, int mpi_build, char* err,
                    size_t errlen);
void perf_opts_usage(FILE* f, const char* prog, int mpi_build);

/* "8", "64K", "1.5M", "8G" (binary units, as nccl-tests). Returns 0 or -1. */
int perf_parse_size(const char* s, size_t* out);

/* Type and operator names ("all" is handled by the parser). Return -1 when unknown. */
int perf_type_from_name(const char* s);
int perf_op_from_name(const char* s);

/* Operator name in the output's redop column ("mulsum" for premulsum, as nccl-tests). */
const char* perf_op_label(int op);

/* The sizes of the sweep, in order; returns how many (at most cap are stored). */
size_t perf_sizes(const struct perf_opts* o, size_t* out, size_t cap);

/* ---- Output (perf_fmt.c) ---- */

/* nccl-tests' number format: fixed point with 2, 1 or 0 decimals, else exponent, in width. */
void perf_fmt_num(char* buf, size_t len, double v, int width);

struct perf_devinfo {
  int rank;
  int pid;
  int device;
  unsigned pci_domain, pci_bus, pci_device;
  char host[64];
  char name[96];
};

struct perf_half {
  double time_us;
  double algbw;
  double busbw;
  int checked; /* 0: #wrong printed as N/A */
  int64_t nwrong;
};

struct perf_row {
  size_t bytes;
  size_t count;
  const char* type;
  const char* redop;
  int root;
  struct perf_half half[2]; /* out of place, in place */
};

void perf_fmt_config(FILE* f, const struct perf_opts* o, const char* prog, int header_version,
                     int lib_version, const char* lib_path);
void perf_fmt_devices(FILE* f, const struct perf_devinfo* d, int n);
void perf_fmt_table_header(FILE* f);
void perf_fmt_row(FILE* f, const struct perf_row* r);
void perf_fmt_footer(FILE* f, int nerrors, double avg_busbw, const char* prog);

/* JSON report (nccl-tests -J layout, see README.md). */
struct perf_json;
struct perf_json* perf_json_open(const char* path, char* err, size_t errlen);
void perf_json_begin(struct perf_json* j, int argc, char** argv, const struct perf_opts* o,
                     const char* prog, int nprocs, int nranks, int lib_version,
                     const char* lib_path, const struct perf_devinfo* d, int ndev);
void perf_json_row(struct perf_json* j, const struct perf_row* r, int iterations);
int perf_json_close(struct perf_json* j, int nerrors, double avg_busbw, const char* error);

/* ---- The benchmark (perf_run.c) ---- */

/* main() of the <coll>_perf binaries: parses the options, starts the processes (MPI, the
 * launcher, or just this one) and runs the sweep. Returns the exit status (PERF_EXIT_*). */
int perf_main(int coll, int argc, char** argv);

/* ---- Processes and threads (perf_world.c, perf_world_mpi.c) ---- */

enum { PERF_RED_SUM = 0, PERF_RED_MIN = 1, PERF_RED_MAX = 2 };

struct perf_world;

struct perf_world_ops {
  /* Element-wise reduction of v[0..n) over processes, result on all; n == 0 is a barrier. */
  int (*allreduce)(struct perf_world* w, double* v, int n, int op);
  /* Process 0's buf[0..len) to all. */
  int (*bcast)(struct perf_world* w, void* buf, size_t len);
  /* Every process's mine[0..each) to process 0's all[proc * each ...]. */
  int (*gather)(struct perf_world* w, const void* mine, size_t each, void* all);
  /* Tell the other processes that this one is going away because of an error (`status`: the
   * exit status it will have; with MPI, the whole job ends here with that status). */
  void (*fail)(struct perf_world* w, int status);
  /* Non-zero once another process has failed (cheap: polled while waiting for streams). */
  int (*failed)(struct perf_world* w);
};

struct perf_world {
  int nprocs;
  int proc;
  int local_rank;   /* index among the processes on this host: its GPUs start there */
  int local_nprocs; /* processes on this host */
  const struct perf_world_ops* ops;
  void* impl;
};

/*
 * Ranks and GPUs on a host. Every process has per_proc = -t x -g local rank slots, numbered
 * local_rank * per_proc + thread * ngpus + gpu across the host; slot i uses device
 * i / ranks_per_gpu. So -g 4 --ranks-per-gpu 4 is 4 ranks of one thread on GPU 0, -p 4
 * --ranks-per-gpu 4 four processes on GPU 0, -t 2 -g 2 --ranks-per-gpu 4 four ranks of two
 * threads on GPU 0.
 */
int perf_world_device(const struct perf_opts* o, int local_rank, int thread, int gpu);
/* This process's devices: first and last (inclusive). */
void perf_world_devices(const struct perf_opts* o, int local_rank, int* first, int* last);
/* Whether a GPU of this process also holds ranks of another process of the host (which needs
 * MPS for their kernels to run at the same time). */
int perf_world_shares_gpu(const struct perf_opts* o, const struct perf_world* w);

/* One process, nothing to share with. */
void perf_world_single(struct perf_world* w);

/*
 * The built-in launcher: forks nprocs processes (call it before any CUDA or NCCL call), each of
 * which runs fn(world, arg) with a world backed by a shared-memory block mapped before the fork,
 * and exits with its return value. The parent waits for them; when one fails (or is killed) it
 * tells the others to stop and, after a grace period, kills them. Returns, in the parent, the
 * first failure's status, PERF_EXIT_SKIP when every child skipped, else 0.
 */
int perf_launch(int nprocs, int (*fn)(struct perf_world* w, void* arg), void* arg);

/* MPI world (perf_world_mpi.c, *_perf_mpi binaries). */
int perf_world_mpi_init(struct perf_world* w, int* argc, char*** argv);
void perf_world_mpi_finalize(struct perf_world* w);

/* A team: the threads of one process, synchronised with each other and, through the world, with
 * the other processes' teams. */
struct perf_team;
struct perf_team* perf_team_create(int nthreads, struct perf_world* w);
void perf_team_destroy(struct perf_team* t);
/* Every thread calls it with its v[0..n) (n <= 8); on return v holds the reduction over all
 * threads of all processes. n == 0 is a barrier. Returns 0, or non-zero when the world failed. */
int perf_team_allreduce(struct perf_team* t, double* v, int n, int op);

#endif
