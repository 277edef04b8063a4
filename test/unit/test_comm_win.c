/* The window agreement rules (core/comm/comm_win.c: comm_win_agree) on descriptions of many
 * ranks and hosts: the plan each rank derives, and each refusal naming the ranks behind it. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "comm.h"

#define MAGIC 0x63686f697277696eull
#define GIB (1ull << 30)

/* n ranks, hosts of `per_host` consecutive ranks, each registering 1 MiB at offset 0 of a 2 MiB
 * allocation, registration #1. */
static void descs(comm_win_desc_t* d, int n, int per_host) {
  for (int r = 0; r < n; r++)
    d[r] = (comm_win_desc_t){.magic = MAGIC, .seq = 0, .size = 1 << 20, .offset = 0,
                             .mapped = 2 << 20, .host_hash = 100 + (uint64_t)(r / per_host),
                             .err = COMM_WIN_OK, .rank = r};
}

static char why[320];

static void case_plans(void) {
  comm_win_desc_t d[16];
  comm_win_plan_t p;
  /* One host of 4: every rank is in the LSA team, stride one 4 GiB unit. */
  descs(d, 4, 4);
  for (int me = 0; me < 4; me++) {
    CHECK_EQ_INT(comm_win_agree(d, 4, me, &p, why, sizeof(why)), ncclSuccess);
    CHECK_EQ_INT(p.nlsa, 4);
    CHECK_EQ_INT(p.lsa_rank, me);
    CHECK_TRUE(p.stride == 4 * GIB);
    CHECK_EQ_INT(p.lsa_ranks[3], 3);
  }
  /* 16 ranks on 4 hosts of 4: rank 9 is LSA rank 1 of ranks 8..11. */
  descs(d, 16, 4);
  CHECK_EQ_INT(comm_win_agree(d, 16, 9, &p, why, sizeof(why)), ncclSuccess);
  CHECK_EQ_INT(p.nlsa, 4);
  CHECK_EQ_INT(p.lsa_rank, 1);
  CHECK_EQ_INT(p.lsa_ranks[0], 8);
  CHECK_EQ_INT(p.lsa_ranks[3], 11);
  /* The stride covers the largest allocation of the host, in 4 GiB units; offsets may differ
   * between hosts. */
  d[10].mapped = 5 * GIB;
  d[0].offset = d[1].offset = d[2].offset = d[3].offset = 8192;
  CHECK_EQ_INT(comm_win_agree(d, 16, 9, &p, why, sizeof(why)), ncclSuccess);
  CHECK_TRUE(p.stride == 8 * GIB);
  CHECK_TRUE(p.offset == 0);
  CHECK_EQ_INT(comm_win_agree(d, 16, 2, &p, why, sizeof(why)), ncclSuccess);
  CHECK_TRUE(p.stride == 4 * GIB);
  CHECK_TRUE(p.offset == 8192);
  /* Exactly 4 GiB needs one unit. */
  descs(d, 2, 2);
  d[1].mapped = 4 * GIB;
  CHECK_EQ_INT(comm_win_agree(d, 2, 0, &p, why, sizeof(why)), ncclSuccess);
  CHECK_TRUE(p.stride == 4 * GIB);
  /* Hosts interleaved (ranks 0, 2 on one host, 1, 3 on another): NCCL's LSA team is each rank
   * alone. */
  descs(d, 4, 4);
  d[1].host_hash = d[3].host_hash = 7;
  CHECK_EQ_INT(comm_win_agree(d, 4, 3, &p, why, sizeof(why)), ncclSuccess);
  CHECK_EQ_INT(p.nlsa, 1);
  CHECK_EQ_INT(p.lsa_rank, 0);
  CHECK_EQ_INT(p.lsa_ranks[0], 3);
  /* Hosts of 4 and 2 ranks: blocks of 2. */
  descs(d, 6, 4);
  CHECK_EQ_INT(comm_win_agree(d, 6, 3, &p, why, sizeof(why)), ncclSuccess);
  CHECK_EQ_INT(p.nlsa, 2);
  CHECK_EQ_INT(p.lsa_rank, 1);
  CHECK_EQ_INT(p.lsa_ranks[0], 2);
}

static void expect(const comm_win_desc_t* d, int n, int me, ncclResult_t want, const char* msg) {
  comm_win_plan_t p;
  ncclResult_t got = comm_win_agree(d, n, me, &p, why, sizeof(why));
  CHECK_MSG(got == want, "rank %d: %d, want %d (%s)", me, (int)got, (int)want, why);
  CHECK_MSG(strstr(why, msg) != NULL, "rank %d: \"%s\" lacks \"%s\"", me, why, msg);
}

static void case_refusals(void) {
  comm_win_desc_t d[8];
  /* A rank that cannot register: every rank is told which and why; for itself it is its
   * argument, for the others the usage. */
  descs(d, 4, 4);
  d[2].err = COMM_WIN_MISALIGNED;
  expect(d, 4, 2, ncclInvalidArgument, "rank 2 cannot register its window: its buffer is not at "
                                       "a 4 KiB boundary");
  expect(d, 4, 0, ncclInvalidUsage, "rank 2 cannot register");
  for (int e = COMM_WIN_NOT_MEMALLOC; e <= COMM_WIN_NULL; e++)
    CHECK_TRUE(strcmp(comm_win_err_str(e), comm_win_err_str(99)) != 0);
  /* Sizes, counts. */
  descs(d, 4, 4);
  d[3].size = 2 << 20;
  expect(d, 4, 0, ncclInvalidUsage, "rank 3 registers 2097152 bytes and rank 0 1048576");
  /* winFlags: SymTwoShot reads peers' copies at this rank's offset, which only symmetric
   * windows promise, so all or none. */
  descs(d, 4, 4);
  d[0].flags = d[1].flags = d[3].flags = NCCL_WIN_COLL_SYMMETRIC;
  expect(d, 4, 3, ncclInvalidUsage, "rank 2 registers its window with winFlags 0 and rank 0 "
                                    "with 0x1");
  d[2].flags = NCCL_WIN_COLL_SYMMETRIC;
  CHECK_EQ_INT(comm_win_agree(d, 4, 3, &(comm_win_plan_t){0}, why, sizeof(why)), ncclSuccess);
  descs(d, 4, 4);
  d[1].seq = 1;
  expect(d, 4, 1, ncclInvalidUsage, "rank 1 is at its window registration #2 while rank 0 is "
                                    "at #1");
  /* Offsets on one host (not across hosts: case_plans). */
  descs(d, 8, 4);
  d[6].offset = 4096;
  expect(d, 8, 5, ncclInvalidUsage, "ranks 4 and 6 of one host");
  comm_win_plan_t p;
  CHECK_EQ_INT(comm_win_agree(d, 8, 1, &p, why, sizeof(why)), ncclSuccess);
  /* A malformed description. */
  descs(d, 4, 4);
  d[1].magic = 0;
  expect(d, 4, 0, ncclInternalError, "rank 1 sent a malformed window description");
  descs(d, 4, 4);
  d[3].rank = 2;
  expect(d, 4, 0, ncclInternalError, "rank 3 sent a malformed");
}

static void case_too_many(void) {
  static comm_win_desc_t d[COMM_WIN_MAX_LSA + 1];
  descs(d, COMM_WIN_MAX_LSA + 1, COMM_WIN_MAX_LSA + 1);
  expect(d, COMM_WIN_MAX_LSA + 1, 0, ncclInvalidUsage, "ranks on one host; windows support");
  comm_win_plan_t p;
  CHECK_EQ_INT(comm_win_agree(d, COMM_WIN_MAX_LSA, 0, &p, why, sizeof(why)), ncclSuccess);
}

/* The resource window of a device communicator: LSA barriers first (3 + LSA size words each),
 * then each buffer at its alignment (128 bytes at least), handles in 128-byte units, the whole
 * rounded to 4 KiB. */
static void case_layout(void) {
  ncclDevCommRequirements_t r;
  comm_devcomm_layout_t l;
  memset(&r, 0, sizeof(r));
  CHECK_EQ_INT(comm_devcomm_layout(&r, 4, &l), ncclSuccess);
  CHECK_TRUE(l.bytes == 4096);
  CHECK_EQ_INT(l.nres, 0);
  r.lsaBarrierCount = 3; /* 3 * (3 + 4) words = 84 bytes */
  ncclDevResourceRequirements_t a, b, c;
  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  memset(&c, 0, sizeof(c));
  ncclDevResourceHandle_t ha = 77, hb = 77;
  a.bufferSize = 1000;
  a.bufferAlign = 8;
  a.outBufferHandle = &ha;
  b.bufferSize = 5000;
  b.bufferAlign = 4096;
  b.outBufferHandle = &hb;
  c.bufferSize = 1;
  a.next = &b;
  b.next = &c;
  r.resourceRequirementsList = &a;
  CHECK_EQ_INT(comm_devcomm_layout(&r, 4, &l), ncclSuccess);
  CHECK_EQ_INT(l.lsa_barrier.nBarriers, 3);
  CHECK_EQ_INT((int)l.lsa_barrier.bufHandle, 0);
  CHECK_EQ_INT(l.nres, 3);
  CHECK_EQ_INT((int)l.res_handles[0], 1);  /* 84 bytes -> 128 */
  CHECK_EQ_INT((int)l.res_handles[1], 32); /* 128 + 1000 -> 4096 */
  CHECK_EQ_INT((int)l.res_handles[2], 72); /* 4096 + 5000 = 9096 -> 9216 */
  CHECK_TRUE(l.bytes == 12288);
  /* The pure layout writes no handle. */
  CHECK_EQ_INT((int)ha, 77);
  CHECK_EQ_INT((int)hb, 77);
  /* More than handles can address. */
  c.bufferSize = (size_t)UINT32_MAX * 128;
  CHECK_EQ_INT(comm_devcomm_layout(&r, 4, &l), ncclInvalidArgument);
}

int main(void) {
  case_layout();
  case_plans();
  case_refusals();
  case_too_many();
  return check_finish("comm-win");
}
