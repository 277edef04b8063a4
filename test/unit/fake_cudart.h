/*
 * The CUDA runtime calls of the data path's device setup, one-rank operations and teardown,
 * emulated for CPU tests (fake_cudart.c). The test program is linked with --wrap for each of
 * them (fake_cudart_wrap in test/unit/meson.build), so that the core's libraries call these
 * whether the CUDA runtime is linked shared or static. Device memory is host memory; nothing
 * runs: copies between user buffers and kernel launches are only counted (a launch writes the
 * profiler's kernel-channel timestamps where its work has records, and a collective batch's
 * works are noted), host functions run at once.
 * The counters change atomically: data paths of several threads use them.
 */
#ifndef CHOIR_TEST_FAKE_CUDART_H
#define CHOIR_TEST_FAKE_CUDART_H

#include <stddef.h>

#define FAKE_WORKS_MAX 512

typedef struct {
  int streams, events, dev_allocs, host_allocs; /* alive now */
  int event_creations; /* calls so far */
  int fail_event;      /* fail the event creation with this number (1-based); 0: none */
  int copies;          /* device-to-device copies (between the user's buffers) */
  size_t copied;       /* their bytes */
  int launches;        /* kernel launches */
  int timed_ctas;      /* CTAs whose profiler timestamps a launch wrote (kernels.h) */
  int batches;         /* launches of collective batches (kernels.h: kern_coll_batch_t) */
  int stream_waits;    /* cudaStreamWaitEvent calls so far */
  int batch_works;     /* their works, all batches together */
  /* recvbuff of each work of those batches in launch order, the first FAKE_WORKS_MAX (with
   * several threads launching, in the order the launches reached the fake) */
  void* batch_recv[FAKE_WORKS_MAX];
  int batch_algo[FAKE_WORKS_MAX]; /* and its algorithm (kern_coll_work_t.algo) */
  int batch_ch0[FAKE_WORKS_MAX];  /* its first channel (channel0) */
  int batch_nch[FAKE_WORKS_MAX];  /* and its channel count (nchannels) */
  int batch_run[FAKE_WORKS_MAX];  /* and its run (OneShot AllReduce in a batch of 2 or more) */
} fake_cudart_t;

extern fake_cudart_t fake_cudart;

#endif
