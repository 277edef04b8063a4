/*
 * One properties filler per ABI version for mock_net.c: include with MOCK_PV defined to the
 * version. The values are distinctive so the test can tell what came from the plugin and what is
 * a loader default.
 */
#define MOCK_PROPS_FN(v) MOCK_CAT(mock_fill_props_v, v)
#define MOCK_PROPS_T(v) MOCK_CAT3(ncclNetProperties_v, v, _t)

static void MOCK_PROPS_FN(MOCK_PV)(int dev, MOCK_PROPS_T(MOCK_PV) * p) {
  memset(p, 0, sizeof(*p));
  p->name = (char*)"mockdev";
  p->pciPath = NULL;
  p->guid = 0x1000u + (uint64_t)dev;
  p->ptrSupport = NCCL_PTR_HOST;
  p->speed = MOCK_NET_SPEED;
  p->port = dev + 1;
  p->latency = 1.5f;
  p->maxComms = 1024;
  p->maxRecvs = MOCK_NET_MAX_RECVS;
#if MOCK_PV >= 7
  p->netDeviceType = NCCL_NET_DEVICE_HOST;
  p->netDeviceVersion = 3;
#endif
#if MOCK_PV >= 8
  p->regIsGlobal = 1;
#endif
#if MOCK_PV >= 9
  p->forceFlush = 1;
  p->vProps.ndevs = 1;
  p->vProps.devs[0] = dev;
  p->maxP2pBytes = MOCK_NET_MAX_P2P;
  p->maxCollBytes = MOCK_NET_MAX_COLL;
#endif
#if MOCK_PV >= 11
  p->maxMultiRequestSize = 4;
#endif
#if MOCK_PV >= 12
  p->railId = 3;
  p->planeId = 2;
#endif
}
