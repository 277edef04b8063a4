/*
 * What the functional mock net plugins (mock_net.c) record about how they were called, read by
 * test_net_adapt.c through the exported mock_net_stats() of the library under test.
 */
#ifndef CHOIR_TEST_MOCK_NET_H
#define CHOIR_TEST_MOCK_NET_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int version;            /* net table version the library exports */
  int init_calls;         /* net init calls: one-time for v6..v10, per communicator for v11+ */
  int finalize_calls;     /* v11+ */
  int live_ctx;           /* v11+: contexts not yet finalized */
  int logger_given;       /* the last init got a logger */
  int prof_given;         /* the last v10+ init got a profiler callback */
  int last_traffic_class; /* seen at connect (v10: its config; v11+: from the ctx) */
  uint64_t last_comm_id;  /* v11+ init */
  int irecv_calls;
  int hint_seen; /* irecv calls whose *request was NCCL_NET_OPTIONAL_RECV_COMPLETION */
  size_t last_reg_size;
  size_t last_dmabuf_size;
  size_t last_send_size;
  int flush_calls;
  int coll_init_calls;
  int coll_finalize_calls;
  size_t coll_last_count;
  size_t coll_last_reg_size;
  int coll_last_nparts;
  size_t coll_last_part_size;
} mock_net_stats_t;

mock_net_stats_t* mock_net_stats(void);
typedef mock_net_stats_t* (*mock_net_stats_fn)(void);
#define MOCK_NET_STATS_SYMBOL "mock_net_stats"

#define MOCK_NET_NDEV 2
#define MOCK_NET_SPEED 100000
#define MOCK_NET_MAX_P2P (8ULL << 30)
#define MOCK_NET_MAX_COLL (4ULL << 30)
#define MOCK_NET_MAX_RECVS 8

#endif
