/*
 * Pins the layout of every plugin ABI table and struct (net and collnet v6..v12, tuner v2..v6,
 * profiler v1..v6, net-plugin profiler payloads) on LP64 x86-64: the size of each type and the
 * offset of each field, as NCCL's headers lay them out, plus the values of the ABI constants.
 * Every table entry's full function type is also pinned at compile time (SIG): a wrong parameter
 * type (say int instead of size_t) breaks the build with an incompatible-pointer diagnostic.
 *
 * Plain C, no framework: prints each mismatch, then one summary line; exit status 1 on any
 * mismatch, 77 (skipped) on a target that is not LP64.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl_net.h"
#include "nccl_profiler.h"
#include "nccl_tuner.h"

/* SIG and SAME_TYPE rely on this diagnostic: make it an error even without -Werror. */
#if defined(__GNUC__)
#pragma GCC diagnostic error "-Wincompatible-pointer-types"
#endif

static int n_checks;
static int n_failed;

static void check_eq(int line, const char* what, long long got, long long want) {
  n_checks++;
  if (got != want) {
    n_failed++;
    printf("plugin_layout: line %d: %s is %lld, expected %lld\n", line, what, got, want);
  }
}

#define CHECK(what, got, want) check_eq(__LINE__, what, (long long)(got), (long long)(want))
/* sizeof a type. */
#define SIZE(T, n) CHECK("sizeof(" #T ")", sizeof(T), n)
/* Offset of a field from the start of its type. */
#define OFF(T, f, n) CHECK("offsetof(" #T ", " #f ")", offsetof(T, f), n)
/* Offset and size of field f of member m (a struct inside the descriptor unions), relative to m. */
#define MOFF(T, m, f, n)                                              \
  CHECK("offsetof(" #T ", " #m "." #f ") - offsetof(" #T ", " #m ")", \
        offsetof(T, m.f) - offsetof(T, m), n)
#define MSIZE(T, m, n) CHECK("sizeof(" #T "." #m ")", sizeof(((T*)0)->m), n)
/* Table entry i: every entry, the leading name included, is one pointer wide. */
#define SLOT(T, f, i) OFF(T, f, (i)*8)
/* Value of a constant or enumerator. */
#define VAL(name, n) CHECK(#name, name, n)
/* Compile-time pin of an entry's function type: assigning a null pointer of type FT to the entry
 * draws an incompatible-pointer diagnostic, made an error above, unless the types agree. */
#define SIG(T, f, FT)                 \
  do {                                \
    (void)sizeof(((T*)0)->f = (FT)0); \
    n_checks++;                       \
  } while (0)
/* Compile-time pin that two type names denote compatible types. */
#define SAME_TYPE(A, B)            \
  do {                             \
    (void)sizeof(*(A**)0 = (B*)0); \
    n_checks++;                    \
  } while (0)

/* ---- Net: constants and shared types ---- */

static void check_net_common(void) {
  VAL(NCCL_NET_HANDLE_MAXSIZE, 128);
  VAL(NCCL_PTR_HOST, 0x1);
  VAL(NCCL_PTR_CUDA, 0x2);
  VAL(NCCL_PTR_DMABUF, 0x4);
  VAL(NCCL_NET_OPTIONAL_RECV_COMPLETION, 0x1);
  VAL(NCCL_NET_MULTI_REQUEST, 0x2);
  VAL(NCCL_NET_MAX_REQUESTS, 32);
  VAL(NCCL_NET_MAX_REQUESTS_V6, 8);
  VAL(NCCL_NET_MAX_PLUGINS, 16);
  VAL(NCCL_MAX_NET_SIZE_BYTES, 1099511627776LL);
  VAL(MAX_NET_SIZE, 1073741824LL);
  VAL(MAX_COLLNET_SIZE, 536870912LL);
  VAL(NCCL_NET_MR_FLAG_FORCE_SO, 1);
  VAL(NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET, 2);
  VAL(NCCL_NET_SIGNAL_OP_INC, 1);
  VAL(NCCL_NET_SIGNAL_OP_ADD, 2);
  VAL(NCCL_NET_MAX_DEVS_PER_NIC_V11, 4);
  VAL(NCCL_NET_MAX_DEVS_PER_NIC_V12, 8);
  VAL(NCCL_NET_MAX_DEVS_PER_NIC, 8);
  VAL(NCCL_NET_TRAFFIC_CLASS_UNDEF, -1);
  VAL(NCCL_NET_ATTR_UNDEF, -1);
  VAL(NCCL_NET_ID_UNDEF, -1);
  VAL(NCCL_NET_DEVICE_INVALID_VERSION, 0);
  VAL(NCCL_NET_MTU_SIZE, 4096);
  VAL(NCCL_NET_DEVICE_UNPACK_VERSION, 0x7);
  VAL(NCCL_NET_DEVICE_HOST, 0);
  VAL(NCCL_NET_DEVICE_UNPACK, 1);
  VAL(NCCL_NET_DEVICE_GIN_PROXY, 2);
  VAL(NCCL_NET_DEVICE_GIN_GDAKI, 3);
  VAL(NCCL_NET_DEVICE_GIN_GPI, 4);
  VAL(ncclProfilerNetEventStart, 0);
  VAL(ncclProfilerNetEventStop, 1);
  VAL(ncclProfilerNetEventUpdate, 2);
  VAL(ncclProfilerNetEventUpdateAndStop, 3);
  SIZE(ncclNetDeviceType, 4);

  SIZE(ncclNetDeviceHandle_v7_t, 32);
  OFF(ncclNetDeviceHandle_v7_t, netDeviceType, 0);
  OFF(ncclNetDeviceHandle_v7_t, netDeviceVersion, 4);
  OFF(ncclNetDeviceHandle_v7_t, handle, 8);
  OFF(ncclNetDeviceHandle_v7_t, size, 16);
  OFF(ncclNetDeviceHandle_v7_t, needsProxyProgress, 24);
  SAME_TYPE(ncclNetDeviceHandle_v7_t, ncclNetDeviceHandle_v8_t);
  SAME_TYPE(ncclNetDeviceHandle_v7_t, ncclNetDeviceHandle_v9_t);
  SAME_TYPE(ncclNetDeviceHandle_v7_t, ncclNetDeviceHandle_v10_t);
  SAME_TYPE(ncclNetDeviceHandle_v7_t, ncclNetDeviceHandle_v11_t);
  SAME_TYPE(ncclNetDeviceHandle_v7_t, ncclNetDeviceHandle_v12_t);
  SAME_TYPE(ncclNetDeviceHandle_v12_t, ncclNetDeviceHandle_t);

  /* The unversioned names are the newest version. */
  SAME_TYPE(ncclNet_t, ncclNet_v12_t);
  SAME_TYPE(ncclCollNet_t, ncclCollNet_v12_t);
  SAME_TYPE(ncclNetSGE_t, ncclNetSGE_v12_t);
  SAME_TYPE(ncclNetProperties_t, ncclNetProperties_v12_t);
  SAME_TYPE(ncclNetAttr_t, ncclNetAttr_v12_t);
  SAME_TYPE(ncclNetVDeviceProps_t, ncclNetVDeviceProps_v12_t);
  SAME_TYPE(ncclNetCommConfig_t, ncclNetCommConfig_v12_t);
  {
    /* NCCL_NET_ATTR_INIT leaves every field undefined. */
    ncclNetAttr_v12_t attr = NCCL_NET_ATTR_INIT;
    CHECK("NCCL_NET_ATTR_INIT sendCommAttr.maxConcurrentPeers",
          attr.sendCommAttr.maxConcurrentPeers, -1);
    CHECK("NCCL_NET_ATTR_INIT recvCommAttr.minFlowsPerPeer", attr.recvCommAttr.minFlowsPerPeer, -1);
    CHECK("NCCL_NET_ATTR_INIT proto", attr.proto, 0xffffffffu);
  }
}

/* ---- Net properties ---- */

static void check_net_properties(void) {
  SIZE(ncclNetProperties_v6_t, 48);
  OFF(ncclNetProperties_v6_t, name, 0);
  OFF(ncclNetProperties_v6_t, pciPath, 8);
  OFF(ncclNetProperties_v6_t, guid, 16);
  OFF(ncclNetProperties_v6_t, ptrSupport, 24);
  OFF(ncclNetProperties_v6_t, speed, 28);
  OFF(ncclNetProperties_v6_t, port, 32);
  OFF(ncclNetProperties_v6_t, latency, 36);
  OFF(ncclNetProperties_v6_t, maxComms, 40);
  OFF(ncclNetProperties_v6_t, maxRecvs, 44);

  SIZE(ncclNetProperties_v7_t, 56);
  OFF(ncclNetProperties_v7_t, name, 0);
  OFF(ncclNetProperties_v7_t, pciPath, 8);
  OFF(ncclNetProperties_v7_t, guid, 16);
  OFF(ncclNetProperties_v7_t, ptrSupport, 24);
  OFF(ncclNetProperties_v7_t, speed, 28);
  OFF(ncclNetProperties_v7_t, port, 32);
  OFF(ncclNetProperties_v7_t, latency, 36);
  OFF(ncclNetProperties_v7_t, maxComms, 40);
  OFF(ncclNetProperties_v7_t, maxRecvs, 44);
  OFF(ncclNetProperties_v7_t, netDeviceType, 48);
  OFF(ncclNetProperties_v7_t, netDeviceVersion, 52);

  SIZE(ncclNetProperties_v8_t, 64);
  OFF(ncclNetProperties_v8_t, name, 0);
  OFF(ncclNetProperties_v8_t, pciPath, 8);
  OFF(ncclNetProperties_v8_t, guid, 16);
  OFF(ncclNetProperties_v8_t, ptrSupport, 24);
  OFF(ncclNetProperties_v8_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v8_t, speed, 32);
  OFF(ncclNetProperties_v8_t, port, 36);
  OFF(ncclNetProperties_v8_t, latency, 40);
  OFF(ncclNetProperties_v8_t, maxComms, 44);
  OFF(ncclNetProperties_v8_t, maxRecvs, 48);
  OFF(ncclNetProperties_v8_t, netDeviceType, 52);
  OFF(ncclNetProperties_v8_t, netDeviceVersion, 56);

  SIZE(ncclNetVDeviceProps_v9_t, 20);
  OFF(ncclNetVDeviceProps_v9_t, ndevs, 0);
  OFF(ncclNetVDeviceProps_v9_t, devs, 4);
  MSIZE(ncclNetVDeviceProps_v9_t, devs, 16);
  SIZE(ncclNetProperties_v9_t, 104);
  OFF(ncclNetProperties_v9_t, name, 0);
  OFF(ncclNetProperties_v9_t, pciPath, 8);
  OFF(ncclNetProperties_v9_t, guid, 16);
  OFF(ncclNetProperties_v9_t, ptrSupport, 24);
  OFF(ncclNetProperties_v9_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v9_t, forceFlush, 32);
  OFF(ncclNetProperties_v9_t, speed, 36);
  OFF(ncclNetProperties_v9_t, port, 40);
  OFF(ncclNetProperties_v9_t, latency, 44);
  OFF(ncclNetProperties_v9_t, maxComms, 48);
  OFF(ncclNetProperties_v9_t, maxRecvs, 52);
  OFF(ncclNetProperties_v9_t, netDeviceType, 56);
  OFF(ncclNetProperties_v9_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v9_t, vProps, 64);
  OFF(ncclNetProperties_v9_t, maxP2pBytes, 88);
  OFF(ncclNetProperties_v9_t, maxCollBytes, 96);

  SIZE(ncclNetVDeviceProps_v10_t, 20);
  OFF(ncclNetVDeviceProps_v10_t, ndevs, 0);
  OFF(ncclNetVDeviceProps_v10_t, devs, 4);
  MSIZE(ncclNetVDeviceProps_v10_t, devs, 16);
  SIZE(ncclNetCommConfig_v10_t, 4);
  OFF(ncclNetCommConfig_v10_t, trafficClass, 0);
  SIZE(ncclNetProperties_v10_t, 104);
  OFF(ncclNetProperties_v10_t, name, 0);
  OFF(ncclNetProperties_v10_t, pciPath, 8);
  OFF(ncclNetProperties_v10_t, guid, 16);
  OFF(ncclNetProperties_v10_t, ptrSupport, 24);
  OFF(ncclNetProperties_v10_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v10_t, forceFlush, 32);
  OFF(ncclNetProperties_v10_t, speed, 36);
  OFF(ncclNetProperties_v10_t, port, 40);
  OFF(ncclNetProperties_v10_t, latency, 44);
  OFF(ncclNetProperties_v10_t, maxComms, 48);
  OFF(ncclNetProperties_v10_t, maxRecvs, 52);
  OFF(ncclNetProperties_v10_t, netDeviceType, 56);
  OFF(ncclNetProperties_v10_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v10_t, vProps, 64);
  OFF(ncclNetProperties_v10_t, maxP2pBytes, 88);
  OFF(ncclNetProperties_v10_t, maxCollBytes, 96);

  SIZE(ncclNetVDeviceProps_v11_t, 20);
  OFF(ncclNetVDeviceProps_v11_t, ndevs, 0);
  OFF(ncclNetVDeviceProps_v11_t, devs, 4);
  MSIZE(ncclNetVDeviceProps_v11_t, devs, 16);
  SIZE(ncclNetCommConfig_v11_t, 4);
  OFF(ncclNetCommConfig_v11_t, trafficClass, 0);
  SIZE(ncclNetProperties_v11_t, 112);
  OFF(ncclNetProperties_v11_t, name, 0);
  OFF(ncclNetProperties_v11_t, pciPath, 8);
  OFF(ncclNetProperties_v11_t, guid, 16);
  OFF(ncclNetProperties_v11_t, ptrSupport, 24);
  OFF(ncclNetProperties_v11_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v11_t, forceFlush, 32);
  OFF(ncclNetProperties_v11_t, speed, 36);
  OFF(ncclNetProperties_v11_t, port, 40);
  OFF(ncclNetProperties_v11_t, latency, 44);
  OFF(ncclNetProperties_v11_t, maxComms, 48);
  OFF(ncclNetProperties_v11_t, maxRecvs, 52);
  OFF(ncclNetProperties_v11_t, netDeviceType, 56);
  OFF(ncclNetProperties_v11_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v11_t, vProps, 64);
  OFF(ncclNetProperties_v11_t, maxP2pBytes, 88);
  OFF(ncclNetProperties_v11_t, maxCollBytes, 96);
  OFF(ncclNetProperties_v11_t, maxMultiRequestSize, 104);

  SIZE(ncclNetVDeviceProps_v12_t, 36);
  OFF(ncclNetVDeviceProps_v12_t, ndevs, 0);
  OFF(ncclNetVDeviceProps_v12_t, devs, 4);
  MSIZE(ncclNetVDeviceProps_v12_t, devs, 32);
  SIZE(ncclNetCommConfig_v12_t, 4);
  OFF(ncclNetCommConfig_v12_t, trafficClass, 0);
  SIZE(ncclNetProperties_v12_t, 128);
  OFF(ncclNetProperties_v12_t, name, 0);
  OFF(ncclNetProperties_v12_t, pciPath, 8);
  OFF(ncclNetProperties_v12_t, guid, 16);
  OFF(ncclNetProperties_v12_t, ptrSupport, 24);
  OFF(ncclNetProperties_v12_t, regIsGlobal, 28);
  OFF(ncclNetProperties_v12_t, forceFlush, 32);
  OFF(ncclNetProperties_v12_t, speed, 36);
  OFF(ncclNetProperties_v12_t, port, 40);
  OFF(ncclNetProperties_v12_t, latency, 44);
  OFF(ncclNetProperties_v12_t, maxComms, 48);
  OFF(ncclNetProperties_v12_t, maxRecvs, 52);
  OFF(ncclNetProperties_v12_t, netDeviceType, 56);
  OFF(ncclNetProperties_v12_t, netDeviceVersion, 60);
  OFF(ncclNetProperties_v12_t, vProps, 64);
  OFF(ncclNetProperties_v12_t, maxP2pBytes, 104);
  OFF(ncclNetProperties_v12_t, maxCollBytes, 112);
  OFF(ncclNetProperties_v12_t, maxMultiRequestSize, 120);
  OFF(ncclNetProperties_v12_t, railId, 124);
  OFF(ncclNetProperties_v12_t, planeId, 126);

  SIZE(ncclNetCommAttr_v11_t, 16);
  OFF(ncclNetCommAttr_v11_t, maxConcurrentPeers, 0);
  OFF(ncclNetCommAttr_v11_t, minConcurrentPeers, 4);
  OFF(ncclNetCommAttr_v11_t, maxFlowsPerPeer, 8);
  OFF(ncclNetCommAttr_v11_t, minFlowsPerPeer, 12);
  SIZE(ncclNetAttr_v11_t, 44);
  OFF(ncclNetAttr_v11_t, sendCommAttr, 0);
  OFF(ncclNetAttr_v11_t, recvCommAttr, 16);
  OFF(ncclNetAttr_v11_t, op, 32);
  OFF(ncclNetAttr_v11_t, algo, 36);
  OFF(ncclNetAttr_v11_t, proto, 40);
  SIZE(ncclNetCommAttr_v12_t, 16);
  OFF(ncclNetCommAttr_v12_t, maxConcurrentPeers, 0);
  OFF(ncclNetCommAttr_v12_t, minConcurrentPeers, 4);
  OFF(ncclNetCommAttr_v12_t, maxFlowsPerPeer, 8);
  OFF(ncclNetCommAttr_v12_t, minFlowsPerPeer, 12);
  SIZE(ncclNetAttr_v12_t, 44);
  OFF(ncclNetAttr_v12_t, sendCommAttr, 0);
  OFF(ncclNetAttr_v12_t, recvCommAttr, 16);
  OFF(ncclNetAttr_v12_t, op, 32);
  OFF(ncclNetAttr_v12_t, algo, 36);
  OFF(ncclNetAttr_v12_t, proto, 40);

  SIZE(ncclNetSGE_v8_t, 24);
  OFF(ncclNetSGE_v8_t, mhandle, 0);
  OFF(ncclNetSGE_v8_t, address, 8);
  OFF(ncclNetSGE_v8_t, size, 16);
  MSIZE(ncclNetSGE_v8_t, size, 4);
  SIZE(ncclNetSGE_v9_t, 24);
  OFF(ncclNetSGE_v9_t, mhandle, 0);
  OFF(ncclNetSGE_v9_t, address, 8);
  OFF(ncclNetSGE_v9_t, size, 16);
  MSIZE(ncclNetSGE_v9_t, size, 8);
  SIZE(ncclNetSGE_v10_t, 24);
  OFF(ncclNetSGE_v10_t, mhandle, 0);
  OFF(ncclNetSGE_v10_t, address, 8);
  OFF(ncclNetSGE_v10_t, size, 16);
  MSIZE(ncclNetSGE_v10_t, size, 8);
  SIZE(ncclNetSGE_v11_t, 24);
  OFF(ncclNetSGE_v11_t, mhandle, 0);
  OFF(ncclNetSGE_v11_t, address, 8);
  OFF(ncclNetSGE_v11_t, size, 16);
  MSIZE(ncclNetSGE_v11_t, size, 8);
  SIZE(ncclNetSGE_v12_t, 24);
  OFF(ncclNetSGE_v12_t, mhandle, 0);
  OFF(ncclNetSGE_v12_t, address, 8);
  OFF(ncclNetSGE_v12_t, size, 16);
  MSIZE(ncclNetSGE_v12_t, size, 8);
}

/* ---- Net tables ---- */

static void check_net_v6(void) {
  typedef ncclNet_v6_t T;
  SIZE(T, 136);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SIG(T, name, const char*);
  SIG(T, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v6_t*));
  SIG(T, listen, ncclResult_t(*)(int, void*, void**));
  SIG(T, connect, ncclResult_t(*)(int, void*, void**));
  SIG(T, accept, ncclResult_t(*)(void*, void**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, int, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, int, int, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, int*, int*, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
}

static void check_net_v7(void) {
  typedef ncclNet_v7_t T;
  SIZE(T, 152);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SLOT(T, getDeviceMr, 17);
  SLOT(T, irecvConsumed, 18);
  SIG(T, name, const char*);
  SIG(T, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v7_t*));
  SIG(T, listen, ncclResult_t(*)(int, void*, void**));
  SIG(T, connect, ncclResult_t(*)(int, void*, void**, ncclNetDeviceHandle_v7_t**));
  SIG(T, accept, ncclResult_t(*)(void*, void**, ncclNetDeviceHandle_v7_t**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, int, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, int, int, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, int*, int*, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
  SIG(T, getDeviceMr, ncclResult_t(*)(void*, void*, void**));
  SIG(T, irecvConsumed, ncclResult_t(*)(void*, int, void*));
}

static void check_net_v8(void) {
  typedef ncclNet_v8_t T;
  SIZE(T, 152);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SLOT(T, getDeviceMr, 17);
  SLOT(T, irecvConsumed, 18);
  SIG(T, name, const char*);
  SIG(T, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v8_t*));
  SIG(T, listen, ncclResult_t(*)(int, void*, void**));
  SIG(T, connect, ncclResult_t(*)(int, void*, void**, ncclNetDeviceHandle_v8_t**));
  SIG(T, accept, ncclResult_t(*)(void*, void**, ncclNetDeviceHandle_v8_t**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, int, int, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, int*, int*, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
  SIG(T, getDeviceMr, ncclResult_t(*)(void*, void*, void**));
  SIG(T, irecvConsumed, ncclResult_t(*)(void*, int, void*));
}

static void check_net_v9(void) {
  typedef ncclNet_v9_t T;
  SIZE(T, 160);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SLOT(T, getDeviceMr, 17);
  SLOT(T, irecvConsumed, 18);
  SLOT(T, makeVDevice, 19);
  SIG(T, name, const char*);
  SIG(T, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v9_t*));
  SIG(T, listen, ncclResult_t(*)(int, void*, void**));
  SIG(T, connect, ncclResult_t(*)(int, void*, void**, ncclNetDeviceHandle_v9_t**));
  SIG(T, accept, ncclResult_t(*)(void*, void**, ncclNetDeviceHandle_v9_t**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, size_t, int, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, size_t*, int*, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
  SIG(T, getDeviceMr, ncclResult_t(*)(void*, void*, void**));
  SIG(T, irecvConsumed, ncclResult_t(*)(void*, int, void*));
  SIG(T, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v9_t*));
}

static void check_net_v10(void) {
  typedef ncclNet_v10_t T;
  SIZE(T, 160);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SLOT(T, getDeviceMr, 17);
  SLOT(T, irecvConsumed, 18);
  SLOT(T, makeVDevice, 19);
  SIG(T, name, const char*);
  SIG(T, init, ncclResult_t(*)(ncclDebugLogger_t, ncclProfilerCallback_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v10_t*));
  SIG(T, listen, ncclResult_t(*)(int, void*, void**));
  SIG(T, connect,
      ncclResult_t(*)(int, ncclNetCommConfig_v10_t*, void*, void**, ncclNetDeviceHandle_v10_t**));
  SIG(T, accept, ncclResult_t(*)(void*, void**, ncclNetDeviceHandle_v10_t**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, size_t, int, void*, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, size_t*, int*, void**, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
  SIG(T, getDeviceMr, ncclResult_t(*)(void*, void*, void**));
  SIG(T, irecvConsumed, ncclResult_t(*)(void*, int, void*));
  SIG(T, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v10_t*));
}

static void check_net_v11(void) {
  typedef ncclNet_v11_t T;
  SIZE(T, 176);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SLOT(T, getDeviceMr, 17);
  SLOT(T, irecvConsumed, 18);
  SLOT(T, makeVDevice, 19);
  SLOT(T, finalize, 20);
  SLOT(T, setNetAttr, 21);
  SIG(T, name, const char*);
  SIG(T, init,
      ncclResult_t(*)(void**, uint64_t, ncclNetCommConfig_v11_t*, ncclDebugLogger_t,
                      ncclProfilerCallback_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v11_t*));
  SIG(T, listen, ncclResult_t(*)(void*, int, void*, void**));
  SIG(T, connect, ncclResult_t(*)(void*, int, void*, void**, ncclNetDeviceHandle_v11_t**));
  SIG(T, accept, ncclResult_t(*)(void*, void**, ncclNetDeviceHandle_v11_t**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, size_t, int, void*, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, size_t*, int*, void**, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
  SIG(T, getDeviceMr, ncclResult_t(*)(void*, void*, void**));
  SIG(T, irecvConsumed, ncclResult_t(*)(void*, int, void*));
  SIG(T, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v11_t*));
  SIG(T, finalize, ncclResult_t(*)(void*));
  SIG(T, setNetAttr, ncclResult_t(*)(void*, ncclNetAttr_v11_t*));
}

static void check_net_v12(void) {
  typedef ncclNet_v12_t T;
  SIZE(T, 176);
  SLOT(T, name, 0);
  SLOT(T, init, 1);
  SLOT(T, devices, 2);
  SLOT(T, getProperties, 3);
  SLOT(T, listen, 4);
  SLOT(T, connect, 5);
  SLOT(T, accept, 6);
  SLOT(T, regMr, 7);
  SLOT(T, regMrDmaBuf, 8);
  SLOT(T, deregMr, 9);
  SLOT(T, isend, 10);
  SLOT(T, irecv, 11);
  SLOT(T, iflush, 12);
  SLOT(T, test, 13);
  SLOT(T, closeSend, 14);
  SLOT(T, closeRecv, 15);
  SLOT(T, closeListen, 16);
  SLOT(T, getDeviceMr, 17);
  SLOT(T, irecvConsumed, 18);
  SLOT(T, makeVDevice, 19);
  SLOT(T, finalize, 20);
  SLOT(T, setNetAttr, 21);
  SIG(T, name, const char*);
  SIG(T, init,
      ncclResult_t(*)(void**, uint64_t, ncclNetCommConfig_v12_t*, ncclDebugLogger_t,
                      ncclProfilerCallback_t));
  SIG(T, devices, ncclResult_t(*)(int*));
  SIG(T, getProperties, ncclResult_t(*)(int, ncclNetProperties_v12_t*));
  SIG(T, listen, ncclResult_t(*)(void*, int, void*, void**));
  SIG(T, connect, ncclResult_t(*)(void*, int, void*, void**, ncclNetDeviceHandle_v12_t**));
  SIG(T, accept, ncclResult_t(*)(void*, void**, ncclNetDeviceHandle_v12_t**));
  SIG(T, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(T, regMrDmaBuf, ncclResult_t(*)(void*, void*, size_t, int, uint64_t, int, void**));
  SIG(T, deregMr, ncclResult_t(*)(void*, void*));
  SIG(T, isend, ncclResult_t(*)(void*, void*, size_t, int, void*, void*, void**));
  SIG(T, irecv, ncclResult_t(*)(void*, int, void**, size_t*, int*, void**, void**, void**));
  SIG(T, iflush, ncclResult_t(*)(void*, int, void**, int*, void**, void**));
  SIG(T, test, ncclResult_t(*)(void*, int*, int*));
  SIG(T, closeSend, ncclResult_t(*)(void*));
  SIG(T, closeRecv, ncclResult_t(*)(void*));
  SIG(T, closeListen, ncclResult_t(*)(void*));
  SIG(T, getDeviceMr, ncclResult_t(*)(void*, void*, void**));
  SIG(T, irecvConsumed, ncclResult_t(*)(void*, int, void*));
  SIG(T, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v12_t*));
  SIG(T, finalize, ncclResult_t(*)(void*));
  SIG(T, setNetAttr, ncclResult_t(*)(void*, ncclNetAttr_v12_t*));
}

/* ---- CollNet tables ---- */

/* Entries whose type never changed from v6 to v12. */
#define COLLNET_COMMON_SIGS(T)                                                               \
  do {                                                                                       \
    SIG(T, name, const char*);                                                               \
    SIG(T, devices, ncclResult_t (*)(int*));                                                 \
    SIG(T, connect, ncclResult_t (*)(void**, int, int, void*, void**));                      \
    SIG(T, reduceSupport, ncclResult_t (*)(ncclDataType_t, ncclRedOp_t, int*));              \
    SIG(T, regMrDmaBuf, ncclResult_t (*)(void*, void*, size_t, int, uint64_t, int, void**)); \
    SIG(T, deregMr, ncclResult_t (*)(void*, void*));                                         \
    SIG(T, iflush, ncclResult_t (*)(void*, void*, int, void*, void**));                      \
    SIG(T, test, ncclResult_t (*)(void*, int*, int*));                                       \
    SIG(T, closeColl, ncclResult_t (*)(void*));                                              \
    SIG(T, closeListen, ncclResult_t (*)(void*));                                            \
  } while (0)

static void check_collnet_v6_v7(void) {
  SIZE(ncclCollNet_v6_t, 120);
  SLOT(ncclCollNet_v6_t, name, 0);
  SLOT(ncclCollNet_v6_t, init, 1);
  SLOT(ncclCollNet_v6_t, devices, 2);
  SLOT(ncclCollNet_v6_t, getProperties, 3);
  SLOT(ncclCollNet_v6_t, listen, 4);
  SLOT(ncclCollNet_v6_t, connect, 5);
  SLOT(ncclCollNet_v6_t, reduceSupport, 6);
  SLOT(ncclCollNet_v6_t, regMr, 7);
  SLOT(ncclCollNet_v6_t, regMrDmaBuf, 8);
  SLOT(ncclCollNet_v6_t, deregMr, 9);
  SLOT(ncclCollNet_v6_t, iallreduce, 10);
  SLOT(ncclCollNet_v6_t, iflush, 11);
  SLOT(ncclCollNet_v6_t, test, 12);
  SLOT(ncclCollNet_v6_t, closeColl, 13);
  SLOT(ncclCollNet_v6_t, closeListen, 14);
  COLLNET_COMMON_SIGS(ncclCollNet_v6_t);
  SIG(ncclCollNet_v6_t, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(ncclCollNet_v6_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v6_t*));
  SIG(ncclCollNet_v6_t, listen, ncclResult_t(*)(int, void*, void**));
  SIG(ncclCollNet_v6_t, regMr, ncclResult_t(*)(void*, void*, int, int, void**));
  SIG(ncclCollNet_v6_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, int, ncclDataType_t, ncclRedOp_t, void*, void*, void**));

  SIZE(ncclCollNet_v7_t, 120);
  SLOT(ncclCollNet_v7_t, name, 0);
  SLOT(ncclCollNet_v7_t, init, 1);
  SLOT(ncclCollNet_v7_t, devices, 2);
  SLOT(ncclCollNet_v7_t, getProperties, 3);
  SLOT(ncclCollNet_v7_t, listen, 4);
  SLOT(ncclCollNet_v7_t, connect, 5);
  SLOT(ncclCollNet_v7_t, reduceSupport, 6);
  SLOT(ncclCollNet_v7_t, regMr, 7);
  SLOT(ncclCollNet_v7_t, regMrDmaBuf, 8);
  SLOT(ncclCollNet_v7_t, deregMr, 9);
  SLOT(ncclCollNet_v7_t, iallreduce, 10);
  SLOT(ncclCollNet_v7_t, iflush, 11);
  SLOT(ncclCollNet_v7_t, test, 12);
  SLOT(ncclCollNet_v7_t, closeColl, 13);
  SLOT(ncclCollNet_v7_t, closeListen, 14);
  COLLNET_COMMON_SIGS(ncclCollNet_v7_t);
  SIG(ncclCollNet_v7_t, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(ncclCollNet_v7_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v7_t*));
  SIG(ncclCollNet_v7_t, listen, ncclResult_t(*)(int, void*, void**));
  SIG(ncclCollNet_v7_t, regMr, ncclResult_t(*)(void*, void*, int, int, void**));
  SIG(ncclCollNet_v7_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, int, ncclDataType_t, ncclRedOp_t, void*, void*, void**));
}

/* Slots of the v8+ collnet table, which added iallgather and ireducescatter after iallreduce. */
#define COLLNET_V8_SLOTS(T)      \
  do {                           \
    SLOT(T, name, 0);            \
    SLOT(T, init, 1);            \
    SLOT(T, devices, 2);         \
    SLOT(T, getProperties, 3);   \
    SLOT(T, listen, 4);          \
    SLOT(T, connect, 5);         \
    SLOT(T, reduceSupport, 6);   \
    SLOT(T, regMr, 7);           \
    SLOT(T, regMrDmaBuf, 8);     \
    SLOT(T, deregMr, 9);         \
    SLOT(T, iallreduce, 10);     \
    SLOT(T, iallgather, 11);     \
    SLOT(T, ireducescatter, 12); \
    SLOT(T, iflush, 13);         \
    SLOT(T, test, 14);           \
    SLOT(T, closeColl, 15);      \
    SLOT(T, closeListen, 16);    \
  } while (0)

static void check_collnet_v8_v9_v10(void) {
  SIZE(ncclCollNet_v8_t, 136);
  COLLNET_V8_SLOTS(ncclCollNet_v8_t);
  COLLNET_COMMON_SIGS(ncclCollNet_v8_t);
  SIG(ncclCollNet_v8_t, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(ncclCollNet_v8_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v8_t*));
  SIG(ncclCollNet_v8_t, listen, ncclResult_t(*)(int, void*, void**));
  SIG(ncclCollNet_v8_t, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(ncclCollNet_v8_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, int, ncclDataType_t, ncclRedOp_t, void*, void*, void**));
  SIG(ncclCollNet_v8_t, iallgather,
      ncclResult_t(*)(void*, void*, int, ncclNetSGE_v8_t*, size_t, size_t, size_t, void*, void**));
  SIG(ncclCollNet_v8_t, ireducescatter,
      ncclResult_t(*)(void*, int, ncclNetSGE_v8_t*, void*, size_t, size_t, size_t, ncclDataType_t,
                      ncclRedOp_t, void*, void**));

  SIZE(ncclCollNet_v9_t, 144);
  COLLNET_V8_SLOTS(ncclCollNet_v9_t);
  SLOT(ncclCollNet_v9_t, makeVDevice, 17);
  COLLNET_COMMON_SIGS(ncclCollNet_v9_t);
  SIG(ncclCollNet_v9_t, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(ncclCollNet_v9_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v9_t*));
  SIG(ncclCollNet_v9_t, listen, ncclResult_t(*)(int, void*, void**));
  SIG(ncclCollNet_v9_t, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(ncclCollNet_v9_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, void*,
                      void**));
  SIG(ncclCollNet_v9_t, iallgather,
      ncclResult_t(*)(void*, void*, int, ncclNetSGE_v9_t*, size_t, size_t, size_t, void*, void**));
  SIG(ncclCollNet_v9_t, ireducescatter,
      ncclResult_t(*)(void*, int, ncclNetSGE_v9_t*, void*, size_t, size_t, size_t, ncclDataType_t,
                      ncclRedOp_t, void*, void**));
  SIG(ncclCollNet_v9_t, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v9_t*));

  SIZE(ncclCollNet_v10_t, 144);
  COLLNET_V8_SLOTS(ncclCollNet_v10_t);
  SLOT(ncclCollNet_v10_t, makeVDevice, 17);
  COLLNET_COMMON_SIGS(ncclCollNet_v10_t);
  SIG(ncclCollNet_v10_t, init, ncclResult_t(*)(ncclDebugLogger_t));
  SIG(ncclCollNet_v10_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v10_t*));
  SIG(ncclCollNet_v10_t, listen, ncclResult_t(*)(int, void*, void**));
  SIG(ncclCollNet_v10_t, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(ncclCollNet_v10_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, void*,
                      void**));
  SIG(ncclCollNet_v10_t, iallgather,
      ncclResult_t(*)(void*, void*, int, ncclNetSGE_v10_t*, size_t, size_t, size_t, void*, void**));
  SIG(ncclCollNet_v10_t, ireducescatter,
      ncclResult_t(*)(void*, int, ncclNetSGE_v10_t*, void*, size_t, size_t, size_t, ncclDataType_t,
                      ncclRedOp_t, void*, void**));
  SIG(ncclCollNet_v10_t, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v10_t*));
}

static void check_collnet_v11_v12(void) {
  SIZE(ncclCollNet_v11_t, 152);
  COLLNET_V8_SLOTS(ncclCollNet_v11_t);
  SLOT(ncclCollNet_v11_t, makeVDevice, 17);
  SLOT(ncclCollNet_v11_t, finalize, 18);
  COLLNET_COMMON_SIGS(ncclCollNet_v11_t);
  SIG(ncclCollNet_v11_t, init, ncclResult_t(*)(void**, uint64_t, ncclDebugLogger_t));
  SIG(ncclCollNet_v11_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v11_t*));
  SIG(ncclCollNet_v11_t, listen, ncclResult_t(*)(void*, int, void*, void**));
  SIG(ncclCollNet_v11_t, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(ncclCollNet_v11_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, void*,
                      void**));
  SIG(ncclCollNet_v11_t, iallgather,
      ncclResult_t(*)(void*, void*, int, ncclNetSGE_v11_t*, size_t, size_t, size_t, void*, void**));
  SIG(ncclCollNet_v11_t, ireducescatter,
      ncclResult_t(*)(void*, int, ncclNetSGE_v11_t*, void*, size_t, size_t, size_t, ncclDataType_t,
                      ncclRedOp_t, void*, void**));
  SIG(ncclCollNet_v11_t, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v11_t*));
  SIG(ncclCollNet_v11_t, finalize, ncclResult_t(*)(void*));

  SIZE(ncclCollNet_v12_t, 152);
  COLLNET_V8_SLOTS(ncclCollNet_v12_t);
  SLOT(ncclCollNet_v12_t, makeVDevice, 17);
  SLOT(ncclCollNet_v12_t, finalize, 18);
  COLLNET_COMMON_SIGS(ncclCollNet_v12_t);
  SIG(ncclCollNet_v12_t, init, ncclResult_t(*)(void**, uint64_t, ncclDebugLogger_t));
  SIG(ncclCollNet_v12_t, getProperties, ncclResult_t(*)(int, ncclNetProperties_v12_t*));
  SIG(ncclCollNet_v12_t, listen, ncclResult_t(*)(void*, int, void*, void**));
  SIG(ncclCollNet_v12_t, regMr, ncclResult_t(*)(void*, void*, size_t, int, void**));
  SIG(ncclCollNet_v12_t, iallreduce,
      ncclResult_t(*)(void*, void*, void*, size_t, ncclDataType_t, ncclRedOp_t, void*, void*,
                      void**));
  SIG(ncclCollNet_v12_t, iallgather,
      ncclResult_t(*)(void*, void*, int, ncclNetSGE_v12_t*, size_t, size_t, size_t, void*, void**));
  SIG(ncclCollNet_v12_t, ireducescatter,
      ncclResult_t(*)(void*, int, ncclNetSGE_v12_t*, void*, size_t, size_t, size_t, ncclDataType_t,
                      ncclRedOp_t, void*, void**));
  SIG(ncclCollNet_v12_t, makeVDevice, ncclResult_t(*)(int*, ncclNetVDeviceProps_v12_t*));
  SIG(ncclCollNet_v12_t, finalize, ncclResult_t(*)(void*));
}

/* ---- Tuner ---- */

static void check_tuner(void) {
  VAL(NCCL_NUM_ALGORITHMS_V5, 7);
  VAL(NCCL_NUM_PROTOCOLS_V5, 3);
  VAL(NCCL_NUM_HW_LINKS_V5, 3);
  VAL(NCCL_NUM_COMPCAPS_V5, 4);
  VAL(NCCL_NUM_TUNING_SCALES_V5, 3);
  VAL(NCCL_NUM_ALGORITHMS, 7);
  VAL(NCCL_NUM_PROTOCOLS, 3);
  VAL(NCCL_NUM_HW_LINKS, 3);
  VAL(NCCL_NUM_COMPCAPS, 4);
  VAL(NCCL_NUM_TUNING_SCALES, 3);
  VAL(NCCL_HW_NVLINK, 0);
  VAL(NCCL_HW_PCI, 1);
  VAL(NCCL_HW_NET, 2);
  VAL(NCCL_VOLTA_COMPCAP_IDX, 0);
  VAL(NCCL_AMPERE_COMPCAP_IDX, 1);
  VAL(NCCL_HOPPER_COMPCAP_IDX, 2);
  VAL(NCCL_BLACKWELL_COMPCAP_IDX, 3);
  VAL(NCCL_TUNING_SCALE_1NODE, 0);
  VAL(NCCL_TUNING_SCALE_2NODES, 1);
  VAL(NCCL_TUNING_SCALE_4NODES, 2);
  VAL(NCCL_TUNING_IGNORE, -1);
  VAL(NCCL_ALGO_PROTO_IGNORE, -1);

  SIZE(ncclNvlDomainInfo_v5_t, 12);
  OFF(ncclNvlDomainInfo_v5_t, nNvlDomains, 0);
  OFF(ncclNvlDomainInfo_v5_t, minRanksPerNvlDomain, 4);
  OFF(ncclNvlDomainInfo_v5_t, maxRanksPerNvlDomain, 8);

  SIZE(ncclTunerConstants_v5_t, 1152);
  OFF(ncclTunerConstants_v5_t, baseLatencies, 0);
  MSIZE(ncclTunerConstants_v5_t, baseLatencies, 168);
  OFF(ncclTunerConstants_v5_t, hwLatencies, 168);
  MSIZE(ncclTunerConstants_v5_t, hwLatencies, 504);
  OFF(ncclTunerConstants_v5_t, llMaxBws, 672);
  OFF(ncclTunerConstants_v5_t, perChMaxRingLL128Bws, 768);
  OFF(ncclTunerConstants_v5_t, perChMaxTreeLL128Bws, 864);
  OFF(ncclTunerConstants_v5_t, perChMaxTreeBws, 960);
  OFF(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws, 1056);
  MSIZE(ncclTunerConstants_v5_t, perChMaxNVLSTreeBws, 96);

  SAME_TYPE(ncclTunerConstants_v6_t, ncclTunerConstants_v5_t);
  SAME_TYPE(ncclNvlDomainInfo_v6_t, ncclNvlDomainInfo_v5_t);
  SAME_TYPE(ncclTuner_t, ncclTuner_v6_t);
  SAME_TYPE(ncclTunerConstants_t, ncclTunerConstants_v5_t);
  SAME_TYPE(ncclNvlDomainInfo_t, ncclNvlDomainInfo_v6_t);

  SIZE(ncclTuner_v2_t, 32);
  SLOT(ncclTuner_v2_t, name, 0);
  SLOT(ncclTuner_v2_t, init, 1);
  SLOT(ncclTuner_v2_t, getCollInfo, 2);
  SLOT(ncclTuner_v2_t, destroy, 3);
  SIG(ncclTuner_v2_t, name, const char*);
  SIG(ncclTuner_v2_t, init, ncclResult_t(*)(size_t, size_t, ncclDebugLogger_t, void**));
  SIG(ncclTuner_v2_t, getCollInfo,
      ncclResult_t(*)(void*, ncclFunc_t, size_t, int, int, int, int*, int*, int*));
  SIG(ncclTuner_v2_t, destroy, ncclResult_t(*)(void*));

  SIZE(ncclTuner_v3_t, 32);
  SLOT(ncclTuner_v3_t, name, 0);
  SLOT(ncclTuner_v3_t, init, 1);
  SLOT(ncclTuner_v3_t, getCollInfo, 2);
  SLOT(ncclTuner_v3_t, destroy, 3);
  SIG(ncclTuner_v3_t, name, const char*);
  SIG(ncclTuner_v3_t, init, ncclResult_t(*)(size_t, size_t, ncclDebugLogger_t, void**));
  SIG(ncclTuner_v3_t, getCollInfo,
      ncclResult_t(*)(void*, ncclFunc_t, size_t, int, float**, int, int, int*));
  SIG(ncclTuner_v3_t, destroy, ncclResult_t(*)(void*));

  SIZE(ncclTuner_v4_t, 32);
  SLOT(ncclTuner_v4_t, name, 0);
  SLOT(ncclTuner_v4_t, init, 1);
  SLOT(ncclTuner_v4_t, getCollInfo, 2);
  SLOT(ncclTuner_v4_t, destroy, 3);
  SIG(ncclTuner_v4_t, name, const char*);
  SIG(ncclTuner_v4_t, init, ncclResult_t(*)(size_t, size_t, ncclDebugLogger_t, void**));
  SIG(ncclTuner_v4_t, getCollInfo,
      ncclResult_t(*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*));
  SIG(ncclTuner_v4_t, destroy, ncclResult_t(*)(void*));

  SIZE(ncclTuner_v5_t, 32);
  SLOT(ncclTuner_v5_t, name, 0);
  SLOT(ncclTuner_v5_t, init, 1);
  SLOT(ncclTuner_v5_t, getCollInfo, 2);
  SLOT(ncclTuner_v5_t, finalize, 3);
  SIG(ncclTuner_v5_t, name, const char*);
  SIG(ncclTuner_v5_t, init,
      ncclResult_t(*)(void**, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v5_t*,
                      ncclTunerConstants_v5_t*));
  SIG(ncclTuner_v5_t, getCollInfo,
      ncclResult_t(*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*));
  SIG(ncclTuner_v5_t, finalize, ncclResult_t(*)(void*));

  SIZE(ncclTuner_v6_t, 40);
  SLOT(ncclTuner_v6_t, name, 0);
  SLOT(ncclTuner_v6_t, init, 1);
  SLOT(ncclTuner_v6_t, getCollInfo, 2);
  SLOT(ncclTuner_v6_t, finalize, 3);
  SLOT(ncclTuner_v6_t, getChunkSize, 4);
  SIG(ncclTuner_v6_t, name, const char*);
  SIG(ncclTuner_v6_t, init,
      ncclResult_t(*)(void**, uint64_t, size_t, size_t, ncclDebugLogger_t, ncclNvlDomainInfo_v5_t*,
                      ncclTunerConstants_v5_t*));
  SIG(ncclTuner_v6_t, getCollInfo,
      ncclResult_t(*)(void*, ncclFunc_t, size_t, int, float**, int, int, int, int*));
  SIG(ncclTuner_v6_t, finalize, ncclResult_t(*)(void*));
  SIG(ncclTuner_v6_t, getChunkSize,
      ncclResult_t(*)(void*, ncclFunc_t, size_t, int, int, int, size_t*));
}

/* ---- Profiler ---- */

static void check_profiler_common(void) {
  VAL(ncclProfileGroup, 0x1);
  VAL(ncclProfileColl, 0x2);
  VAL(ncclProfileP2p, 0x4);
  VAL(ncclProfileProxyOp, 0x8);
  VAL(ncclProfileProxyStep, 0x10);
  VAL(ncclProfileProxyCtrl, 0x20);
  VAL(ncclProfileKernelCh, 0x40);
  VAL(ncclProfileNetPlugin, 0x80);
  VAL(ncclProfileGroupApi, 0x100);
  VAL(ncclProfileCollApi, 0x200);
  VAL(ncclProfileP2pApi, 0x400);
  VAL(ncclProfileKernelLaunch, 0x800);
  VAL(ncclProfileCeColl, 0x1000);
  VAL(ncclProfileCeSync, 0x2000);
  VAL(ncclProfileCeBatch, 0x4000);

  SIZE(ncclProfilerEventState_t, 4);
  VAL(ncclProfilerProxyOpSendPosted, 0);
  VAL(ncclProfilerProxyOpSendRemFifoWait, 1);
  VAL(ncclProfilerProxyOpSendTransmitted, 2);
  VAL(ncclProfilerProxyOpSendDone, 3);
  VAL(ncclProfilerProxyOpRecvPosted, 4);
  VAL(ncclProfilerProxyOpRecvReceived, 5);
  VAL(ncclProfilerProxyOpRecvTransmitted, 6);
  VAL(ncclProfilerProxyOpRecvDone, 7);
  VAL(ncclProfilerProxyStepSendGPUWait, 8);
  VAL(ncclProfilerProxyStepSendWait, 9);
  VAL(ncclProfilerProxyStepRecvWait, 10);
  VAL(ncclProfilerProxyStepRecvFlushWait, 11);
  VAL(ncclProfilerProxyStepRecvGPUWait, 12);
  VAL(ncclProfilerProxyCtrlIdle, 13);
  VAL(ncclProfilerProxyCtrlActive, 14);
  VAL(ncclProfilerProxyCtrlSleep, 15);
  VAL(ncclProfilerProxyCtrlWakeup, 16);
  VAL(ncclProfilerProxyCtrlAppend, 17);
  VAL(ncclProfilerProxyCtrlAppendEnd, 18);
  VAL(ncclProfilerProxyOpInProgress_v4, 19);
  VAL(ncclProfilerProxyStepSendPeerWait_v4, 20);
  VAL(ncclProfilerNetPluginUpdate, 21);
  VAL(ncclProfilerKernelChStop, 22);
  VAL(ncclProfilerGroupStartApiStop, 23);
  VAL(ncclProfilerGroupEndApiStart, 24);
  VAL(ncclProfilerCeCollStart, 25);
  VAL(ncclProfilerCeCollComplete, 26);
  VAL(ncclProfilerCeSyncStart, 27);
  VAL(ncclProfilerCeSyncComplete, 28);
  VAL(ncclProfilerCeBatchStart, 29);
  VAL(ncclProfilerCeBatchComplete, 30);
  SAME_TYPE(ncclProfilerEventState_v1_t, ncclProfilerEventState_t);
  SAME_TYPE(ncclProfilerEventState_v2_t, ncclProfilerEventState_t);
  SAME_TYPE(ncclProfilerEventState_v3_t, ncclProfilerEventState_t);
  SAME_TYPE(ncclProfilerEventState_v4_t, ncclProfilerEventState_t);
  SAME_TYPE(ncclProfilerEventState_v5_t, ncclProfilerEventState_t);
  SAME_TYPE(ncclProfilerEventState_v6_t, ncclProfilerEventState_t);
  SIZE(ncclPid_t, 4);

  VAL(NCCL_PROFILER_NET_VER_BITS, 16);
  VAL(NCCL_PROFILER_NET_VER_MASK, 0xffffu);
  VAL(NCCL_PROFILER_NET_TYPE_MASK, 0xffff0000u);
  VAL(NCCL_PROFILER_NET_TYPE_IB, 0x10000);
  VAL(NCCL_PROFILER_NET_TYPE_SOCK, 0x20000);

  VAL(NCCL_PROFILER_NET_IB_VER, 1);
  VAL(ncclProfileQp, 1);
  SIZE(ncclProfilerNetIbDescr_v1_t, 40);
  OFF(ncclProfilerNetIbDescr_v1_t, type, 0);
  OFF(ncclProfilerNetIbDescr_v1_t, qp, 8);
  MSIZE(ncclProfilerNetIbDescr_v1_t, qp, 32);
  MOFF(ncclProfilerNetIbDescr_v1_t, qp, device, 0);
  MOFF(ncclProfilerNetIbDescr_v1_t, qp, wr_id, 8);
  MOFF(ncclProfilerNetIbDescr_v1_t, qp, opcode, 16);
  MOFF(ncclProfilerNetIbDescr_v1_t, qp, qpNum, 20);
  MOFF(ncclProfilerNetIbDescr_v1_t, qp, length, 24);

  VAL(NCCL_PROFILER_NET_SOCKET_VER, 1);
  VAL(ncclProfileSocket, 1);
  SIZE(ncclProfilerNetSockDescr_v1_t, 24);
  OFF(ncclProfilerNetSockDescr_v1_t, type, 0);
  OFF(ncclProfilerNetSockDescr_v1_t, sock, 8);
  MSIZE(ncclProfilerNetSockDescr_v1_t, sock, 16);
  MOFF(ncclProfilerNetSockDescr_v1_t, sock, fd, 0);
  MOFF(ncclProfilerNetSockDescr_v1_t, sock, op, 4);
  MOFF(ncclProfilerNetSockDescr_v1_t, sock, length, 8);

  SAME_TYPE(ncclProfiler_t, ncclProfiler_v6_t);
  SAME_TYPE(ncclProfilerEventDescr_t, ncclProfilerEventDescr_v6_t);
  SAME_TYPE(ncclProfilerEventStateArgs_t, ncclProfilerEventStateArgs_v6_t);
}

/* Descriptor header, identical in v1 .. v4 (uint8_t type) and v5 .. v6 (uint64_t type): the
 * union always starts at 24. */
#define DESCR_HEAD(T, typeBytes) \
  do {                           \
    OFF(T, type, 0);             \
    MSIZE(T, type, typeBytes);   \
    OFF(T, parentObj, 8);        \
    OFF(T, rank, 16);            \
  } while (0)

/* proxyOp and proxyStep members, unchanged from v1 to v6. */
#define DESCR_PROXY(T)               \
  do {                               \
    OFF(T, proxyOp, 24);             \
    MSIZE(T, proxyOp, 24);           \
    MOFF(T, proxyOp, pid, 0);        \
    MOFF(T, proxyOp, channelId, 4);  \
    MOFF(T, proxyOp, peer, 8);       \
    MOFF(T, proxyOp, nSteps, 12);    \
    MOFF(T, proxyOp, chunkSize, 16); \
    MOFF(T, proxyOp, isSend, 20);    \
    OFF(T, proxyStep, 24);           \
    MSIZE(T, proxyStep, 4);          \
    MOFF(T, proxyStep, step, 0);     \
  } while (0)

/* The profiler table, the same six slots in every version. */
#define PROFILER_SLOTS(T)                       \
  do {                                          \
    SIZE(T, 48);                                \
    SLOT(T, name, 0);                           \
    SLOT(T, init, 1);                           \
    SLOT(T, startEvent, 2);                     \
    SLOT(T, stopEvent, 3);                      \
    SLOT(T, recordEventState, 4);               \
    SLOT(T, finalize, 5);                       \
    SIG(T, name, const char*);                  \
    SIG(T, stopEvent, ncclResult_t (*)(void*)); \
    SIG(T, finalize, ncclResult_t (*)(void*));  \
  } while (0)

static void check_profiler_v1_v2_v3(void) {
  typedef ncclProfilerEventDescr_v1_t D1;
  SIZE(D1, 120);
  DESCR_HEAD(D1, 1);
  OFF(D1, coll, 24);
  MSIZE(D1, coll, 96);
  MOFF(D1, coll, name, 0);
  MOFF(D1, coll, commHash, 8);
  MOFF(D1, coll, seqNumber, 16);
  MOFF(D1, coll, func, 24);
  MSIZE(D1, coll.func, 1);
  MOFF(D1, coll, sendBuff, 32);
  MOFF(D1, coll, recvBuff, 40);
  MOFF(D1, coll, count, 48);
  MOFF(D1, coll, root, 56);
  MOFF(D1, coll, datatype, 60);
  MSIZE(D1, coll.datatype, 1);
  MOFF(D1, coll, op, 64);
  MOFF(D1, coll, trafficBytes, 72);
  MOFF(D1, coll, nMaxChannels, 80);
  MOFF(D1, coll, nWarps, 81);
  MOFF(D1, coll, algo, 82);
  MOFF(D1, coll, proto, 83);
  MOFF(D1, coll, isCollnet, 84);
  MOFF(D1, coll, isNvls, 88);
  OFF(D1, p2p, 24);
  MSIZE(D1, p2p, 56);
  MOFF(D1, p2p, name, 0);
  MOFF(D1, p2p, commHash, 8);
  MOFF(D1, p2p, func, 16);
  MOFF(D1, p2p, buff, 24);
  MOFF(D1, p2p, datatype, 32);
  MOFF(D1, p2p, count, 40);
  MOFF(D1, p2p, peer, 48);
  DESCR_PROXY(D1);

  typedef ncclProfilerEventDescr_v2_t D2;
  SIZE(D2, 128);
  DESCR_HEAD(D2, 1);
  OFF(D2, coll, 24);
  MSIZE(D2, coll, 104);
  MOFF(D2, coll, name, 0);
  MOFF(D2, coll, commHash, 8);
  MOFF(D2, coll, seqNumber, 16);
  MOFF(D2, coll, func, 24);
  MOFF(D2, coll, sendBuff, 32);
  MOFF(D2, coll, recvBuff, 40);
  MOFF(D2, coll, count, 48);
  MOFF(D2, coll, root, 56);
  MOFF(D2, coll, datatype, 64);
  MOFF(D2, coll, trafficBytes, 72);
  MOFF(D2, coll, nMaxChannels, 80);
  MOFF(D2, coll, nWarps, 81);
  MOFF(D2, coll, algo, 88);
  MOFF(D2, coll, proto, 96);
  OFF(D2, p2p, 24);
  MSIZE(D2, p2p, 56);
  MOFF(D2, p2p, name, 0);
  MOFF(D2, p2p, commHash, 8);
  MOFF(D2, p2p, func, 16);
  MOFF(D2, p2p, buff, 24);
  MOFF(D2, p2p, datatype, 32);
  MOFF(D2, p2p, count, 40);
  MOFF(D2, p2p, peer, 48);
  DESCR_PROXY(D2);

  typedef ncclProfilerEventDescr_v3_t D3;
  SIZE(D3, 120);
  DESCR_HEAD(D3, 1);
  OFF(D3, coll, 24);
  MSIZE(D3, coll, 96);
  MOFF(D3, coll, name, 0);
  MOFF(D3, coll, commHash, 8);
  MOFF(D3, coll, seqNumber, 16);
  MOFF(D3, coll, func, 24);
  MOFF(D3, coll, sendBuff, 32);
  MOFF(D3, coll, recvBuff, 40);
  MOFF(D3, coll, count, 48);
  MOFF(D3, coll, root, 56);
  MOFF(D3, coll, datatype, 64);
  MOFF(D3, coll, nMaxChannels, 72);
  MOFF(D3, coll, nWarps, 73);
  MOFF(D3, coll, algo, 80);
  MOFF(D3, coll, proto, 88);
  OFF(D3, p2p, 24);
  MSIZE(D3, p2p, 56);
  MOFF(D3, p2p, name, 0);
  MOFF(D3, p2p, commHash, 8);
  MOFF(D3, p2p, func, 16);
  MOFF(D3, p2p, buff, 24);
  MOFF(D3, p2p, datatype, 32);
  MOFF(D3, p2p, count, 40);
  MOFF(D3, p2p, peer, 48);
  DESCR_PROXY(D3);
  OFF(D3, kernelCh, 24);
  MSIZE(D3, kernelCh, 1);
  MOFF(D3, kernelCh, channelId, 0);
  OFF(D3, netPlugin, 24);
  MSIZE(D3, netPlugin, 16);
  MOFF(D3, netPlugin, id, 0);
  MOFF(D3, netPlugin, data, 8);

  SIZE(ncclProfilerEventStateArgs_v1_t, 16);
  OFF(ncclProfilerEventStateArgs_v1_t, proxyOp.transSize, 0);
  OFF(ncclProfilerEventStateArgs_v1_t, proxyOp.steps, 8);
  OFF(ncclProfilerEventStateArgs_v1_t, proxyCtrl.appendedProxyOps, 0);
  SIZE(ncclProfilerEventStateArgs_v2_t, 16);
  OFF(ncclProfilerEventStateArgs_v2_t, proxyOp.transSize, 0);
  OFF(ncclProfilerEventStateArgs_v2_t, proxyOp.steps, 8);
  OFF(ncclProfilerEventStateArgs_v2_t, proxyCtrl.appendedProxyOps, 0);
  SIZE(ncclProfilerEventStateArgs_v3_t, 16);
  OFF(ncclProfilerEventStateArgs_v3_t, proxyOp.transSize, 0);
  OFF(ncclProfilerEventStateArgs_v3_t, proxyOp.steps, 8);
  OFF(ncclProfilerEventStateArgs_v3_t, proxyCtrl.appendedProxyOps, 0);

  PROFILER_SLOTS(ncclProfiler_v1_t);
  SIG(ncclProfiler_v1_t, init, ncclResult_t(*)(void**, int*));
  SIG(ncclProfiler_v1_t, startEvent, ncclResult_t(*)(void*, void**, ncclProfilerEventDescr_v1_t*));
  SIG(ncclProfiler_v1_t, recordEventState,
      ncclResult_t(*)(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v1_t*));
  PROFILER_SLOTS(ncclProfiler_v2_t);
  SIG(ncclProfiler_v2_t, init, ncclResult_t(*)(void**, int*));
  SIG(ncclProfiler_v2_t, startEvent, ncclResult_t(*)(void*, void**, ncclProfilerEventDescr_v2_t*));
  SIG(ncclProfiler_v2_t, recordEventState,
      ncclResult_t(*)(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v2_t*));
  PROFILER_SLOTS(ncclProfiler_v3_t);
  SIG(ncclProfiler_v3_t, init, ncclResult_t(*)(void**, int*));
  SIG(ncclProfiler_v3_t, startEvent, ncclResult_t(*)(void*, void**, ncclProfilerEventDescr_v3_t*));
  SIG(ncclProfiler_v3_t, recordEventState,
      ncclResult_t(*)(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v3_t*));
}

/* v4 .. v6 coll / p2p / kernelCh / netPlugin members (v5 and v6 append parentGroup). */
#define DESCR_V4_MEMBERS(T)          \
  do {                               \
    OFF(T, coll, 24);                \
    MOFF(T, coll, seqNumber, 0);     \
    MOFF(T, coll, func, 8);          \
    MOFF(T, coll, sendBuff, 16);     \
    MOFF(T, coll, recvBuff, 24);     \
    MOFF(T, coll, count, 32);        \
    MOFF(T, coll, root, 40);         \
    MOFF(T, coll, datatype, 48);     \
    MOFF(T, coll, nChannels, 56);    \
    MOFF(T, coll, nWarps, 57);       \
    MOFF(T, coll, algo, 64);         \
    MOFF(T, coll, proto, 72);        \
    OFF(T, p2p, 24);                 \
    MOFF(T, p2p, func, 0);           \
    MOFF(T, p2p, buff, 8);           \
    MOFF(T, p2p, datatype, 16);      \
    MOFF(T, p2p, count, 24);         \
    MOFF(T, p2p, peer, 32);          \
    MOFF(T, p2p, nChannels, 36);     \
    OFF(T, kernelCh, 24);            \
    MSIZE(T, kernelCh, 16);          \
    MOFF(T, kernelCh, channelId, 0); \
    MOFF(T, kernelCh, pTimer, 8);    \
    OFF(T, netPlugin, 24);           \
    MSIZE(T, netPlugin, 16);         \
    MOFF(T, netPlugin, id, 0);       \
    MOFF(T, netPlugin, data, 8);     \
  } while (0)

/* v5 .. v6 API-level members and parentGroup. */
#define DESCR_V5_MEMBERS(T)              \
  do {                                   \
    MSIZE(T, coll, 88);                  \
    MOFF(T, coll, parentGroup, 80);      \
    MSIZE(T, p2p, 48);                   \
    MOFF(T, p2p, parentGroup, 40);       \
    OFF(T, groupApi, 24);                \
    MSIZE(T, groupApi, 8);               \
    MOFF(T, groupApi, graphCaptured, 0); \
    MOFF(T, groupApi, groupDepth, 4);    \
    OFF(T, collApi, 24);                 \
    MSIZE(T, collApi, 48);               \
    MOFF(T, collApi, func, 0);           \
    MOFF(T, collApi, count, 8);          \
    MOFF(T, collApi, datatype, 16);      \
    MOFF(T, collApi, root, 24);          \
    MOFF(T, collApi, stream, 32);        \
    MOFF(T, collApi, graphCaptured, 40); \
    OFF(T, p2pApi, 24);                  \
    MSIZE(T, p2pApi, 40);                \
    MOFF(T, p2pApi, func, 0);            \
    MOFF(T, p2pApi, count, 8);           \
    MOFF(T, p2pApi, datatype, 16);       \
    MOFF(T, p2pApi, stream, 24);         \
    MOFF(T, p2pApi, graphCaptured, 32);  \
    OFF(T, kernelLaunch, 24);            \
    MSIZE(T, kernelLaunch, 8);           \
    MOFF(T, kernelLaunch, stream, 0);    \
  } while (0)

/* State args of v4 .. v6: one 8-byte union. */
#define STATE_ARGS_V4(T)                   \
  do {                                     \
    SIZE(T, 8);                            \
    OFF(T, proxyStep.transSize, 0);        \
    MSIZE(T, proxyStep.transSize, 8);      \
    OFF(T, proxyCtrl.appendedProxyOps, 0); \
    OFF(T, netPlugin.data, 0);             \
    OFF(T, kernelCh.pTimer, 0);            \
    MSIZE(T, kernelCh.pTimer, 8);          \
  } while (0)

static void check_profiler_v4_v5_v6(void) {
  typedef ncclProfilerEventDescr_v4_t D4;
  SIZE(D4, 104);
  DESCR_HEAD(D4, 1);
  DESCR_V4_MEMBERS(D4);
  MSIZE(D4, coll, 80);
  MSIZE(D4, p2p, 40);
  DESCR_PROXY(D4);
  STATE_ARGS_V4(ncclProfilerEventStateArgs_v4_t);
  PROFILER_SLOTS(ncclProfiler_v4_t);
  SIG(ncclProfiler_v4_t, init,
      ncclResult_t(*)(void**, int*, const char*, uint64_t, int, int, int, ncclDebugLogger_t));
  SIG(ncclProfiler_v4_t, startEvent, ncclResult_t(*)(void*, void**, ncclProfilerEventDescr_v4_t*));
  SIG(ncclProfiler_v4_t, recordEventState,
      ncclResult_t(*)(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v4_t*));

  typedef ncclProfilerEventDescr_v5_t D5;
  SIZE(D5, 112);
  DESCR_HEAD(D5, 8);
  DESCR_V4_MEMBERS(D5);
  DESCR_V5_MEMBERS(D5);
  DESCR_PROXY(D5);
  STATE_ARGS_V4(ncclProfilerEventStateArgs_v5_t);
  PROFILER_SLOTS(ncclProfiler_v5_t);
  SIG(ncclProfiler_v5_t, init,
      ncclResult_t(*)(void**, uint64_t, int*, const char*, int, int, int, ncclDebugLogger_t));
  SIG(ncclProfiler_v5_t, startEvent, ncclResult_t(*)(void*, void**, ncclProfilerEventDescr_v5_t*));
  SIG(ncclProfiler_v5_t, recordEventState,
      ncclResult_t(*)(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v5_t*));

  typedef ncclProfilerEventDescr_v6_t D6;
  SIZE(D6, 112);
  DESCR_HEAD(D6, 8);
  DESCR_V4_MEMBERS(D6);
  DESCR_V5_MEMBERS(D6);
  DESCR_PROXY(D6);
  OFF(D6, ceColl, 24);
  MSIZE(D6, ceColl, 88);
  MOFF(D6, ceColl, seqNumber, 0);
  MOFF(D6, ceColl, func, 8);
  MOFF(D6, ceColl, sendBuff, 16);
  MOFF(D6, ceColl, recvBuff, 24);
  MOFF(D6, ceColl, count, 32);
  MOFF(D6, ceColl, root, 40);
  MOFF(D6, ceColl, datatype, 48);
  MOFF(D6, ceColl, syncStrategy, 56);
  MOFF(D6, ceColl, intraBatchSync, 64);
  MOFF(D6, ceColl, batchSize, 68);
  MOFF(D6, ceColl, numBatches, 72);
  MOFF(D6, ceColl, ceSeqNum, 76);
  MOFF(D6, ceColl, stream, 80);
  OFF(D6, ceCollSync, 24);
  MSIZE(D6, ceCollSync, 8);
  MOFF(D6, ceCollSync, isComplete, 0);
  MOFF(D6, ceCollSync, nRanks, 4);
  OFF(D6, ceCollBatch, 24);
  MSIZE(D6, ceCollBatch, 24);
  MOFF(D6, ceCollBatch, numOps, 0);
  MOFF(D6, ceCollBatch, totalBytes, 8);
  MOFF(D6, ceCollBatch, useIntraSync, 16);
  SAME_TYPE(ncclProfilerEventStateArgs_v6_t, ncclProfilerEventStateArgs_v5_t);
  STATE_ARGS_V4(ncclProfilerEventStateArgs_v6_t);
  PROFILER_SLOTS(ncclProfiler_v6_t);
  SIG(ncclProfiler_v6_t, init,
      ncclResult_t(*)(void**, uint64_t, int*, const char*, int, int, int, ncclDebugLogger_t));
  SIG(ncclProfiler_v6_t, startEvent, ncclResult_t(*)(void*, void**, ncclProfilerEventDescr_v6_t*));
  SIG(ncclProfiler_v6_t, recordEventState,
      ncclResult_t(*)(void*, ncclProfilerEventState_t, ncclProfilerEventStateArgs_v6_t*));
}

/* Where a uint64_t lands after a char: 8 on the targets the expected numbers are written for. */
struct align_probe {
  char c;
  uint64_t u;
};

int main(void) {
  if (sizeof(void*) != 8 || sizeof(long) != 8 || sizeof(int) != 4 ||
      offsetof(struct align_probe, u) != 8) {
    printf("plugin_layout: skipped, the expected layouts are for LP64 targets\n");
    return 77;
  }
  check_net_common();
  check_net_properties();
  check_net_v6();
  check_net_v7();
  check_net_v8();
  check_net_v9();
  check_net_v10();
  check_net_v11();
  check_net_v12();
  check_collnet_v6_v7();
  check_collnet_v8_v9_v10();
  check_collnet_v11_v12();
  check_tuner();
  check_profiler_common();
  check_profiler_v1_v2_v3();
  check_profiler_v4_v5_v6();
  if (n_failed) {
    printf("plugin_layout: %d of %d checks failed\n", n_failed, n_checks);
    return 1;
  }
  printf("plugin_layout: %d checks passed\n", n_checks);
  return 0;
}
