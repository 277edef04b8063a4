/*
 * The C boundary of kernels/ without a GPU (suite unit, so CI runs it): kernels.h compiles as C11
 * here and as C++ in kern_header_cxx.cpp with the same layout; the instance table agrees with
 * kernel_subset; malformed launches and left-out instances fail with the documented
 * ncclResult_t and a message, before any CUDA call.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernels.h"
#include "nccl_common.h"
#include "ref.h"

size_t kern_header_cxx_args_size(void);
size_t kern_header_cxx_count_offset(void);

static kern_reduce_copy_args_t valid_args(void) {
  kern_reduce_copy_args_t a;
  memset(&a, 0, sizeof a);
  /* Never dereferenced: every case below fails its checks before a launch. */
  a.srcs[0] = (const void*)(uintptr_t)0x10000;
  a.dsts[0] = (void*)(uintptr_t)0x20000;
  a.count = 16;
  a.op = KERN_OP_SUM;
  a.type = ncclFloat32;
  a.nsrcs = 1;
  a.ndsts = 1;
  a.divisor = 1;
  return a;
}

static ncclResult_t launch(const kern_reduce_copy_args_t* a) {
  return kern_reduce_copy_launch(a, NULL);
}

int main(void) {
  /* Same layout from C and C++. */
  CHECK_EQ_INT(kern_header_cxx_args_size(), sizeof(kern_reduce_copy_args_t));
  CHECK_EQ_INT(kern_header_cxx_count_offset(), offsetof(kern_reduce_copy_args_t, count));

  /* Names, sizes, operator mapping. */
  for (int t = 0; t < ncclNumTypes; t++) {
    CHECK_EQ_INT(kern_type_size((ncclDataType_t)t), ref_type_size(t));
    CHECK_TRUE(strcmp(kern_type_name((ncclDataType_t)t), "?") != 0);
  }
  CHECK_EQ_INT(kern_type_size(ncclNumTypes), 0);
  CHECK_EQ_STR(kern_type_name(ncclNumTypes), "?");
  CHECK_EQ_STR(kern_type_name(ncclBfloat16), "bf16");
  CHECK_EQ_STR(kern_op_name(KERN_OP_PREMULSUM), "premulsum");
  CHECK_EQ_STR(kern_op_name(KERN_OP_NUM), "?");
  CHECK_EQ_INT(kern_op_from_nccl(ncclMax), KERN_OP_MAX);
  CHECK_EQ_INT(kern_op_from_nccl(ncclAvg), KERN_OP_AVG);
  CHECK_EQ_INT(kern_op_from_nccl((ncclRedOp_t)(ncclNumOps + 3)), KERN_OP_PREMULSUM);
  CHECK_EQ_INT(REF_PREMULSUM, KERN_OP_PREMULSUM);

  /* The table against kernel_subset: "all" builds everything; a filter leaves something out. */
  int built = 0;
  for (int op = 0; op < KERN_OP_NUM; op++)
    for (int t = 0; t < ncclNumTypes; t++)
      built += kern_instance_available((kern_op_t)op, (ncclDataType_t)t);
  CHECK_TRUE(kern_subset()[0] != '\0');
  if (strcmp(kern_subset(), "all") == 0)
    CHECK_EQ_INT(built, KERN_OP_NUM * ncclNumTypes);
  else
    CHECK_TRUE(built > 0 && built < KERN_OP_NUM * ncclNumTypes);
  CHECK_EQ_INT(kern_instance_available(KERN_OP_NUM, ncclFloat32), 0);
  CHECK_EQ_INT(kern_instance_available(KERN_OP_SUM, ncclNumTypes), 0);
  CHECK_EQ_INT(kern_instance_available((kern_op_t)-1, ncclFloat32), 0);

  /* Malformed arguments: ncclInvalidArgument with a message naming the culprit. */
  kern_reduce_copy_args_t a;
  CHECK_EQ_INT(launch(NULL), ncclInvalidArgument);
  a = valid_args();
  a.op = KERN_OP_NUM;
  CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "op 6");
  a = valid_args();
  a.type = ncclNumTypes;
  CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "type 12");
  a = valid_args();
  a.nsrcs = 0;
  CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
  a.nsrcs = KERN_RC_MAX_SRCS + 1;
  CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "nsrcs 9");
  a = valid_args();
  a.ndsts = 3;
  CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "ndsts 3");
  a = valid_args();
  a.op = KERN_OP_AVG;
  a.divisor = 0;
  CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "divisor");

  /* Pointer checks need a built instance; take the first one. */
  int op0 = -1, t0 = -1;
  for (int op = 0; op < KERN_OP_NUM && op0 < 0; op++)
    for (int t = 0; t < ncclNumTypes && op0 < 0; t++)
      if (kern_instance_available((kern_op_t)op, (ncclDataType_t)t) && ref_type_size(t) > 1) {
        op0 = op;
        t0 = t;
      }
  if (op0 >= 0) {
    a = valid_args();
    a.op = (kern_op_t)op0;
    a.type = (ncclDataType_t)t0;
    a.nsrcs = 2;
    CHECK_EQ_INT(launch(&a), ncclInvalidArgument); /* srcs[1] is NULL */
    CHECK_CONTAINS(kern_last_error(), "srcs[1]");
    a.srcs[1] = (const void*)(uintptr_t)0x30001; /* not element-aligned */
    CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
    CHECK_CONTAINS(kern_last_error(), "aligned");
    a.srcs[1] = (const void*)(uintptr_t)0x30000;
    a.ndsts = 2;
    CHECK_EQ_INT(launch(&a), ncclInvalidArgument);
    CHECK_CONTAINS(kern_last_error(), "dsts[1]");
    /* count 0: nothing to do, no pointer needed, no CUDA call made. */
    memset(a.srcs, 0, sizeof a.srcs);
    memset(a.dsts, 0, sizeof a.dsts);
    a.count = 0;
    CHECK_EQ_INT(launch(&a), ncclSuccess);
  }

  /* A left-out instance: ncclInvalidUsage naming it and the subset. */
  int missing = 0;
  for (int op = 0; op < KERN_OP_NUM && !missing; op++) {
    for (int t = 0; t < ncclNumTypes && !missing; t++) {
      if (kern_instance_available((kern_op_t)op, (ncclDataType_t)t)) continue;
      missing = 1;
      a = valid_args();
      a.op = (kern_op_t)op;
      a.type = (ncclDataType_t)t;
      CHECK_EQ_INT(launch(&a), ncclInvalidUsage);
      char want[128];
      snprintf(want, sizeof want, "kernel for %s/%s not built (kernel_subset=%s)",
               kern_op_name((kern_op_t)op), kern_type_name((ncclDataType_t)t), kern_subset());
      CHECK_EQ_STR(kern_last_error(), want);
    }
  }
  if (!missing)
    printf("kern-boundary: every instance built; the not-built path needs a subset build\n");

  /* The collective work's plan fields (algorithm, protocol, threads): each bad value fails with
   * ncclInvalidArgument and names itself, before any CUDA call; every protocol and every
   * multiple of 32 in 64..KERN_NTHREADS passes these checks (it then fails later, on the
   * uint8-only rule planted here, which proves the plan checks let it through). */
  kern_coll_work_t w;
  memset(&w, 0, sizeof w);
  w.comm = (kern_comm_t*)(uintptr_t)0x40000; /* never dereferenced by the host */
  w.coll = KERN_COLL_BROADCAST;
  w.type = ncclFloat32; /* Broadcast takes bytes: the last check, reached only by valid plans */
  w.nchannels = 1;
  w.chunk_bytes = 4096;
  w.algo = NCCL_ALGO_RING;
  w.proto = KERN_PROTO_LL;
  w.nthreads = 256;
  for (int p = 0; p < KERN_PROTO_NUM; p++) {
    w.proto = p;
    for (uint32_t nt = 64; nt <= KERN_NTHREADS; nt += 32) {
      w.nthreads = nt;
      CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
      CHECK_CONTAINS(kern_last_error(), "take bytes");
    }
  }
  w.nthreads = 256;
  w.proto = KERN_PROTO_NUM;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "proto 3");
  w.proto = -1;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "proto -1");
  w.proto = KERN_PROTO_SIMPLE;
  w.algo = NCCL_ALGO_COLLNET_DIRECT; /* not built */
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "algo 2 is not built");
  /* The tree runs AllReduce only (this work is a Broadcast). */
  w.algo = NCCL_ALGO_TREE;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "the tree runs AllReduce only (coll 0)");
  w.proto = KERN_PROTO_SIMPLE;
  w.algo = NCCL_ALGO_RING;
  const uint32_t bad_threads[] = {0, 32, 48, 65, 100, KERN_NTHREADS + 32, 1024};
  for (size_t i = 0; i < sizeof bad_threads / sizeof bad_threads[0]; i++) {
    w.nthreads = bad_threads[i];
    CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
    char want[64];
    snprintf(want, sizeof want, "nthreads %u", bad_threads[i]);
    CHECK_CONTAINS(kern_last_error(), want);
  }
  /* channel0: a ring work may start past channel 0 while its channels stay within the ring's;
   * no other algorithm may. */
  w.nthreads = 256;
  w.channel0 = 5;
  w.nchannels = KERN_MAX_CHANNELS - 5;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "take bytes"); /* past the channel checks */
  w.nchannels = KERN_MAX_CHANNELS - 4;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "channels 5..64 run past the 64 ring channels");
  w.nchannels = 1;
  w.channel0 = 65535;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "channels 65535..65535 run past");
  w.channel0 = 1;
  w.coll = KERN_COLL_ALLREDUCE;
  w.algo = NCCL_ALGO_TREE;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "channel0 1 with algo 0; only ring works start past channel 0");
  w.algo = KERN_ALGO_ONESHOT;
  w.proto = KERN_PROTO_LL;
  CHECK_EQ_INT(kern_coll_launch(&w, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "channel0 1 with algo 7");
  w.channel0 = 0;
  w.coll = KERN_COLL_BROADCAST;
  w.algo = NCCL_ALGO_RING;
  w.proto = KERN_PROTO_SIMPLE;

  /* Batches (kern_coll_batch_t): every work checked as one, named by its index; the works must
   * share one kernel and one communicator; nworks and the tag are checked first. All before any
   * CUDA call: the failures below never launch. */
  static kern_coll_batch_t b;
  memset(&b, 0, sizeof b);
  CHECK_EQ_INT(kern_coll_batch_launch(NULL, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "batch is NULL");
  w.nthreads = 256;
  w.proto = KERN_PROTO_SIMPLE;
  w.type = ncclUint8; /* a valid Broadcast from here on */
  b.nworks = 2;
  b.works[0] = b.works[1] = w;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "is not KERN_COLL_BATCH_TAG");
  b.tag = KERN_COLL_BATCH_TAG;
  b.nworks = 0;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "nworks 0 outside 1..64");
  b.nworks = KERN_COLL_BATCH_MAX + 1;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "nworks 65 outside");
  b.nworks = 3;
  b.works[2] = w;
  b.works[2].nthreads = 100;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "collective batch work 2: nthreads 100");
  b.works[2] = w;
  b.works[1].chunk_bytes = 8;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "collective batch work 1: chunk_bytes 8");
  b.works[1] = w;
  b.works[1].proto = KERN_PROTO_LL;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "work 1: proto LL differs from work 0's Simple");
  b.works[1] = w;
  b.works[2].comm = (kern_comm_t*)(uintptr_t)0x50000;
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "work 2: another communicator");
  b.works[2] = w;
  b.works[2].type = ncclFloat32; /* a Broadcast takes bytes */
  CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
  CHECK_CONTAINS(kern_last_error(), "collective batch work 2: Broadcast/AllGather take bytes");
  /* Reductions: with a built (op, type), a copy collective or another (op, type) in the batch
   * is refused, naming both; a left-out (op, type) is ncclInvalidUsage, as for one work. */
  int rop = -1, rt = -1, other_t = -1;
  for (int op = 0; op < KERN_OP_NUM && rop < 0; op++)
    for (int t = 0; t < ncclNumTypes && rop < 0; t++)
      if (kern_coll_available((kern_op_t)op, (ncclDataType_t)t)) rop = op, rt = t;
  for (int t = 0; t < ncclNumTypes && rop >= 0 && other_t < 0; t++)
    if (t != rt && kern_coll_available((kern_op_t)rop, (ncclDataType_t)t)) other_t = t;
  if (rop >= 0) {
    kern_coll_work_t r = w;
    r.coll = KERN_COLL_ALLREDUCE;
    r.op = rop;
    r.type = rt;
    r.divisor = 2;
    b.nworks = 2;
    b.works[0] = b.works[1] = r;
    b.works[1].coll = KERN_COLL_ALLGATHER;
    b.works[1].type = ncclUint8;
    CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
    CHECK_CONTAINS(kern_last_error(), "need different kernels (reduction and copy)");
    /* A tree AllReduce runs in the tree's kernel: never beside a ring work. */
    b.works[1] = r;
    b.works[1].algo = NCCL_ALGO_TREE;
    CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
    CHECK_CONTAINS(kern_last_error(), "work 1: algo 0 and work 0's 1 need different kernels (the tree has its own)");
    b.works[1] = r;
    b.works[1].coll = KERN_COLL_REDUCESCATTER; /* another reduction of the same kernel: fine */
    b.works[1].op = (rop + 1) % KERN_OP_NUM;
    ncclResult_t res = kern_coll_batch_launch(&b, NULL);
    if (kern_coll_available((kern_op_t)b.works[1].op, (ncclDataType_t)rt)) {
      CHECK_EQ_INT(res, ncclInvalidArgument);
      CHECK_CONTAINS(kern_last_error(), "one batch runs one kernel");
    } else {
      CHECK_EQ_INT(res, ncclInvalidUsage);
      CHECK_CONTAINS(kern_last_error(), "collective batch work 1 kernel for");
    }
    if (other_t >= 0) {
      b.works[1] = r;
      b.works[1].type = other_t;
      CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
      CHECK_CONTAINS(kern_last_error(), "one batch runs one kernel");
    }
    /* OneShot AllReduces that join into one run (kern_oneshot_joins) must share their CTAs. */
    b.works[0] = b.works[1] = r;
    for (int k = 0; k < 2; k++) {
      b.works[k].algo = KERN_ALGO_ONESHOT;
      b.works[k].proto = KERN_PROTO_LL;
      b.works[k].nchannels = 2 + k;
    }
    CHECK_EQ_INT(kern_coll_batch_launch(&b, NULL), ncclInvalidArgument);
    CHECK_CONTAINS(kern_last_error(),
                   "work 1: OneShot AllReduce on 3 CTAs after work 0's 2; the works of one "
                   "OneShot run share their CTAs");
  }
  return check_finish("kern-boundary");
}
