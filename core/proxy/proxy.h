/*
 * core/proxy: the host thread that moves a communicator's network connections forward for the
 * kernels. One proxy per communicator that has network connections, created with the first.
 *
 * A network connection end is a KERN_NSLOTS-slot buffer with tail/head counters, like every
 * other connection (kernels.h), but the far end is reached through the net plugin:
 *   send end:    the kernel fills slot i, writes its byte count to sizes[i % KERN_NSLOTS] and
 *                publishes tail = i + 1; the proxy hands the slot to isend and, once the plugin
 *                reports the send complete, publishes head = i + 1 (the slot is free again);
 *   receive end: the proxy posts an irecv for slot i once head (slots the kernel consumed)
 *                allows it, and publishes tail = i + 1 when the data is there (after a flush
 *                where the plugin or the topology needs one).
 * The counters live in host memory the GPU maps; the proxy reads them with acquire loads and
 * writes them with release stores.
 *
 * Idle: the thread sleeps on a condition variable whenever no kernel that may use the
 * connections is running and no send end has data left to hand over; the enqueue side marks
 * each such kernel with proxy_launch_begin/proxy_launch_end (host callbacks in the stream, so
 * CUDA-graph replays count too). While a kernel runs the thread polls.
 * Failure: a plugin error stops the proxy, records the error (proxy_error) and raises the
 * kernels' abort flag, so that kernels waiting for the network return instead of hanging.
 */
#ifndef CHOIR_PROXY_H
#define CHOIR_PROXY_H

#include <stdint.h>

#include "base.h"
#include "plugin.h"
#include "prof.h"

typedef struct proxy proxy_t;

/* One connection end handed to the proxy. Host addresses; the memory stays the caller's and
 * must outlive the proxy. comm and mhandle become the proxy's: proxy_destroy deregisters and
 * closes them. */
typedef struct proxy_conn {
  int is_send;
  int peer;            /* for messages */
  int id;              /* the connection's id with that peer (channel), for messages */
  void* comm;          /* net send comm (is_send) or receive comm */
  void* mhandle;       /* registration of buff with comm */
  char* buff;          /* KERN_NSLOTS * slot_bytes */
  uint32_t slot_bytes;
  int flush;           /* receive end in GPU memory: flush every received slot before tail */
  uint64_t* tail;
  uint64_t* head;
  uint32_t* sizes;     /* send end: KERN_NSLOTS byte counts written by the kernel */
  const void* key;     /* the caller's name for this end (proxy_prof_op), or NULL */
} proxy_conn_t;

/* net: the communicator's net plugin (outlives the proxy). kernel_abort: the flag the kernels
 * poll (host address), raised on a network error; comm_abort: the communicator's abort flag
 * (ncclCommAbort), which stops the proxy. prof: the communicator's profiler (core/prof; NULL:
 * none), for the events proxy_prof_op describes; it must outlive the proxy. */
ncclResult_t proxy_create(net_t* net, int rank, volatile uint32_t* comm_abort,
                          volatile uint32_t* kernel_abort, prof_t* prof, proxy_t** proxy_p);
/* Stop the thread, then deregister and close every connection end. Kernels using them must be
 * over. Safe with NULL. */
void proxy_destroy(proxy_t* proxy);

/* Take connection ends (n of them); the thread serves them from its next sweep. */
ncclResult_t proxy_add(proxy_t* proxy, const proxy_conn_t* conns, int n);

/* A kernel that may use the connections is about to run / has finished. Safe to call from a
 * CUDA host callback: no CUDA calls; begin takes a lock only to wake a sleeping thread. */
void proxy_launch_begin(proxy_t* proxy);
void proxy_launch_end(proxy_t* proxy);

/* Profiling (core/prof), with the profiler given at creation. proxy_prof_op: a launch about to
 * run moves nsteps steps through the end named key, for the event parent (a Coll or P2p event):
 * the thread reports a ProxyOp event (channel, peer, nsteps, chunk) from its first step's post to
 * its last step's completion, and a ProxyStep event per step (the net plugin's own events under
 * it), each op taking the next nsteps steps of the end in call order. Every launch through the
 * end must announce its steps while profiling, or later ops take the wrong steps; an end whose
 * queue of announced ops overflows stops reporting ops (INFO). Not for launches under CUDA-graph
 * capture. The thread itself reports one ProxyCtrl event from its first state to its end: Active
 * (a sweep moved data), Idle (sweeps without progress), Sleep and Wakeup (around waiting for a
 * launch). */
void proxy_prof_op(proxy_t* proxy, const void* key, void* parent, uint32_t nsteps, int chunk,
                   int channel);

/* The first failure (ncclSuccess: none); when msg is given, what failed and with which rank
 * ("the network receive connection 3 with rank 2: test of a receive failed (...)"; empty until
 * written, just after the error is), and that rank in *peer_p (-1 when unknown). */
ncclResult_t proxy_error(const proxy_t* proxy, char* msg, size_t size, int* peer_p);

/* For tests: launches begun and not ended, and sweeps made so far. */
int proxy_active(const proxy_t* proxy);
uint64_t proxy_sweeps(const proxy_t* proxy);

#endif
