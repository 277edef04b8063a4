/*
 * nccl_device.h: NCCL 2.28's device API, written for Choir.
 *
 * Programs include this beside nccl.h to write their own kernels over a communicator: a device
 * communicator (ncclDevComm, from ncclDevCommCreate), symmetric windows (ncclWindow_t, from
 * ncclCommWindowRegister) whose peers' copies are reached by load/store (LSA: the ranks of one
 * host, in blocks of consecutive world ranks), teams of ranks, cooperative groups of threads, and
 * barriers between the ranks of a team.
 *
 * Applications inline this code, and programs compiled against NVIDIA's header run on Choir's
 * library: so every structure below has NVIDIA NCCL 2.28.9's layout (pinned at the end, and
 * compared field by field with NVIDIA's header by test/abi), and the memory that the device code
 * reads (window address arithmetic, the LSA barrier's words) follows NCCL's rules, which
 * Choir's ncclDevCommCreate lays out the same way.
 *
 * What Choir serves: LSA teams, window pointers, the LSA barrier over unicast memory. What it
 * does not: GPU-initiated networking (GIN) and NVLink multicast (multimem). ncclDevCommCreate
 * refuses requirements that need them (ncclInvalidUsage, naming the field), so no device
 * communicator that reaches a kernel has them; their types and calls exist so that programs
 * written for NVIDIA's header compile, and a kernel that calls them anyway stops with a trap
 * instead of touching memory that does not exist. The LL all-to-all session (ncclLLA2ASession)
 * is not provided; its host helpers are.
 *
 * Parts: C and C++ (host): the types, the host functions Choir exports, team arithmetic.
 * C++: team tags, ncclSymPtr. CUDA (__CUDACC__): cooperative groups, pointers, sessions.
 */
#ifndef CHOIR_NCCL_DEVICE_H_
#define CHOIR_NCCL_DEVICE_H_

/* Tells a build that it compiled against Choir's nccl_device.h (the tests check it). */
#define CHOIR_NCCL_DEVICE 1

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#include "nccl.h"

#if defined(__CUDACC__)
#include <cuda/atomic>
#define NCCL_DEVICE_INLINE __device__ __forceinline__
#define NCCL_HOST_DEVICE_INLINE __host__ __device__ __forceinline__
#elif defined(__cplusplus)
#define NCCL_DEVICE_INLINE inline
#define NCCL_HOST_DEVICE_INLINE inline
#else
#define NCCL_DEVICE_INLINE static inline
#define NCCL_HOST_DEVICE_INLINE static inline
#endif
#ifdef __cplusplus
#define NCCL_EXTERN_C extern "C"
#else
#define NCCL_EXTERN_C
#endif

/* ---- Types (C and C++) ------------------------------------------------------------------------ */

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclTeam ncclTeam_t;
typedef struct ncclMultimemHandle ncclMultimemHandle_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclTeamRequirements ncclTeamRequirements_t;

/* A resource buffer inside the communicator's resource window, in units of 128 bytes. */
typedef uint32_t ncclDevResourceHandle;
typedef ncclDevResourceHandle ncclDevResourceHandle_t;
typedef uint32_t ncclGinSignal_t;
typedef uint32_t ncclGinCounter_t;
typedef void* ncclGinWindow_t;
typedef struct ncclGinGpuCtx* ncclGinGpuCtx_t;

/* GIN contexts a device communicator holds at most. */
#define NCCL_GIN_MAX_CONTEXTS 4

typedef enum ncclGinSignalOp_t { ncclGinSignalInc = 0, ncclGinSignalAdd } ncclGinSignalOp_t;

/* The ranks rank0 + i * stride (i in [0, nRanks)) of the world; this rank is number `rank`. */
struct ncclTeam {
  int nRanks, rank, stride;
};

/* What ncclDevCommCreate must provide. Zero-initialize, then set what the kernels use. */
struct ncclDevCommRequirements {
  ncclDevResourceRequirements_t* resourceRequirementsList;
  ncclTeamRequirements_t* teamRequirementsList;
  bool lsaMultimem;          /* NVLink multicast on the LSA team (Choir: refused) */
  int barrierCount;          /* world barriers (LSA + GIN; Choir: refused when the world spans hosts) */
  int lsaBarrierCount;       /* barriers among the LSA team: devComm.lsaBarrier */
  int railGinBarrierCount;   /* rail-team GIN barriers (Choir: one-rank rail team only) */
  int lsaLLA2ABlockCount, lsaLLA2ASlotCount;
  bool ginForceEnable;       /* (Choir: refused) */
  int ginContextCount;       /* a hint; 0 for none */
  int ginSignalCount;        /* signals 0 .. n-1 (Choir: refused when non-zero) */
  int ginCounterCount;       /* counters 0 .. n-1 (Choir: refused when non-zero) */
};

/* One more buffer in the resource window (and GIN signals and counters), chained by `next`. */
struct ncclDevResourceRequirements {
  ncclDevResourceRequirements_t* next;
  size_t bufferSize, bufferAlign;
  ncclDevResourceHandle_t* outBufferHandle; /* written by ncclDevCommCreate when not NULL */
  int ginSignalCount;
  int ginCounterCount;
  ncclGinSignal_t* outGinSignalStart;
  ncclGinCounter_t* outGinCounterStart;
};

/* A team that needs its own multicast object (Choir: refused when multimem is set). */
struct ncclTeamRequirements {
  ncclTeamRequirements_t* next;
  ncclTeam_t team;
  bool multimem;
  ncclMultimemHandle_t* outMultimemHandle;
};

/* The device side of a window: the copy of LSA rank i starts at lsaFlatBase + i * stride4G * 4 GiB. */
struct ncclWindow_vidmem {
  void* winHost;      /* the library's host object */
  char* lsaFlatBase;  /* LSA rank 0's copy in this process's address space */
  int lsaRank;        /* this rank in the LSA team */
  int worldRank;      /* this rank in the world */
  uint32_t stride4G;  /* distance between consecutive LSA ranks' copies, in units of 4 GiB */
  uint32_t mcOffset4K;  /* offset in the multicast object, in units of 4 KiB */
  uint32_t ginOffset4K; /* offset in the GIN windows, in units of 4 KiB */
  ncclGinWindow_t ginWins[NCCL_GIN_MAX_CONTEXTS];
};

struct ncclMultimemHandle {
  void* mcBasePtr;
};

/* An LSA barrier's resource buffer holds 32-bit words: [0, n) the multicast epochs, [n, 2n) the
 * unicast epochs of barriers 0 .. n-1, [2n, 3n) their multicast inboxes, then for barrier b and
 * team peer p the unicast inbox word 3n + b * nRanks + p (what p last wrote). */
struct ncclLsaBarrierHandle {
  ncclDevResourceHandle_t bufHandle;
  int nBarriers;
};

struct ncclGinBarrierHandle {
  ncclGinSignal_t signal0;
  ncclDevResourceHandle_t bufHandle;
};

struct ncclLLA2AHandle {
  ncclDevResourceHandle_t bufHandle;
  uint32_t nSlots;
};

#ifdef __cplusplus
/* Windows registered on the communicator, for ncclFindWindow: 32 entries per table, chained. */
struct ncclDevCommWindowTable {
  struct Entry {
    uintptr_t base, size;
    ncclWindow_t window;
  } entries[32];
  struct ncclDevCommWindowTable* next;
};
#else
struct ncclDevCommWindowTable;
#endif

/* A device communicator: passed to kernels by value. */
struct ncclDevComm {
  int rank, nRanks;
  uint32_t nRanks_rcp32;  /* reciprocal of nRanks for fast division (NCCL's idivRcp32) */
  int lsaRank, lsaSize;
  uint32_t lsaSize_rcp32;
  struct ncclDevCommWindowTable* windowTable;
  ncclWindow_t resourceWindow;                      /* holds the resource buffers */
  struct ncclWindow_vidmem resourceWindow_inlined;  /* a copy of *resourceWindow */
  ncclMultimemHandle_t lsaMultimem;
  ncclLsaBarrierHandle_t lsaBarrier;                /* lsaBarrierCount barriers of the LSA team */
  ncclGinBarrierHandle_t railGinBarrier;
  uint8_t ginContextCount;
  uint8_t ginTypes[NCCL_GIN_MAX_CONTEXTS];
  void* ginHandles[NCCL_GIN_MAX_CONTEXTS];
  uint32_t ginSignalBase;
  int ginSignalCount;
  uint32_t ginCounterBase;
  int ginCounterCount;
  uint64_t* ginSignalShadows;
};

/* ---- Host functions (exported by libnccl) ----------------------------------------------------- */

/* Collective over the communicator (inside a group for several). Choir builds LSA device
 * communicators; GIN, multicast and world barriers across hosts are refused (ncclInvalidUsage). */
NCCL_EXTERN_C ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                             ncclDevComm_t* outDevComm);
NCCL_EXTERN_C ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);

NCCL_EXTERN_C ncclTeam_t ncclTeamWorld(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamLsa(ncclComm_t comm);
NCCL_EXTERN_C ncclTeam_t ncclTeamRail(ncclComm_t comm);
NCCL_EXTERN_C int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
NCCL_EXTERN_C int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

NCCL_EXTERN_C ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                                           ncclLsaBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team,
                                                           int nBarriers,
                                                           ncclGinBarrierHandle_t* outHandle,
                                                           ncclDevResourceRequirements_t* outReq);
NCCL_EXTERN_C int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
NCCL_EXTERN_C ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                                      ncclLLA2AHandle_t* outHandle,
                                                      ncclDevResourceRequirements_t* outReq);

/* ---- Team arithmetic (host and device) -------------------------------------------------------- */

/* Whether rank bRank of team b is also in team a (teams of one world, both containing this rank). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE bool ncclTeamRankIsMember(ncclTeam_t a, ncclTeam_t b,
                                                                int bRank) {
  const int worldDelta = (bRank - b.rank) * b.stride; /* from this rank, in world ranks */
  if (worldDelta % a.stride != 0) return false;
  const int aRank = a.rank + worldDelta / a.stride;
  return aRank >= 0 && aRank < a.nRanks;
}

/* Rank bRank of team b as a rank of team a (it must be a member: ncclTeamRankIsMember). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE int ncclTeamRankToTeam(ncclTeam_t a, ncclTeam_t b, int bRank) {
  return a.rank + (bRank - b.rank) * b.stride / a.stride;
}

/* The team of the innerSize consecutive members of parent that contains this rank. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamInnerFactor(ncclTeam_t parent,
                                                                     int innerSize) {
  ncclTeam_t t;
  t.nRanks = innerSize;
  t.rank = parent.rank % innerSize;
  t.stride = parent.stride;
  return t;
}

/* The team of parent's members at this rank's place in every block of innerSize. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE ncclTeam_t ncclTeamOuterFactor(ncclTeam_t parent,
                                                                     int innerSize) {
  ncclTeam_t t;
  t.nRanks = parent.nRanks / innerSize;
  t.rank = parent.rank / innerSize;
  t.stride = parent.stride * innerSize;
  return t;
}

/* The index'th rank (counting up from 0) of parent that is not in subset, as a rank of parent;
 * subset must be a subset of parent (its stride a multiple of parent's). */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE int ncclTeamRankInDifference(ncclTeam_t parent,
                                                                   ncclTeam_t subset, int index) {
  int step = subset.stride / parent.stride; /* parent ranks between subset members */
  int first = parent.rank - subset.rank * step; /* parent rank of subset member 0 */
  if (step < 0) {
    step = -step;
    first -= (subset.nRanks - 1) * step; /* the lowest member instead */
  }
  /* Below the lowest member: first ranks. Between members: step - 1 each. Then the rest. */
  if (index < first) return index;
  const int inside = index - first;
  const int gaps = (subset.nRanks - 1) * (step - 1);
  if (inside < gaps) return first + 1 + (inside / (step - 1)) * step + inside % (step - 1);
  return first + (subset.nRanks - 1) * step + 1 + (inside - gaps);
}

/* Byte offset of resource buffer h in the resource window. */
NCCL_EXTERN_C NCCL_HOST_DEVICE_INLINE size_t ncclGetResourceBufferOffset(ncclDevResourceHandle_t h) {
  return (size_t)h * 128;
}

#ifdef __cplusplus

/* ---- Teams of a device communicator (C++) ----------------------------------------------------- */

struct ncclTeamTagWorld {};
struct ncclTeamTagLsa {};
struct ncclTeamTagRail {};

NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamWorld(ncclDevComm const& comm) {
  ncclTeam t;
  t.nRanks = comm.nRanks;
  t.rank = comm.rank;
  t.stride = 1;
  return t;
}

NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamLsa(ncclDevComm const& comm) {
  ncclTeam t;
  t.nRanks = comm.lsaSize;
  t.rank = comm.lsaRank;
  t.stride = 1;
  return t;
}

/* The ranks at this rank's place in every LSA block. */
NCCL_HOST_DEVICE_INLINE ncclTeam ncclTeamRail(ncclDevComm const& comm) {
  ncclTeam t;
  t.nRanks = comm.nRanks / comm.lsaSize;
  t.rank = comm.rank / comm.lsaSize;
  t.stride = comm.lsaSize;
  return t;
}

NCCL_HOST_DEVICE_INLINE int ncclTeamRankToWorld(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.rank + (rank - team.rank) * team.stride;
}

NCCL_HOST_DEVICE_INLINE int ncclTeamRankToLsa(ncclDevComm const& comm, ncclTeam team, int rank) {
  return comm.lsaRank + (rank - team.rank) * team.stride;
}

/* ---- Symmetric pointers (C++) ----------------------------------------------------------------- */

/* An offset into a window: the same place in every rank's copy. Arithmetic is in elements of T. */
template <typename T>
struct ncclSymPtr {
  using ElementType = T;
  ncclWindow_t window;
  size_t offset;

  NCCL_HOST_DEVICE_INLINE constexpr ncclSymPtr(ncclWindow_t w = nullptr, size_t off = 0)
      : window(w), offset(off) {}
  template <typename U>
  NCCL_HOST_DEVICE_INLINE operator ncclSymPtr<U>() const {
    return ncclSymPtr<U>(window, offset);
  }
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr& operator+=(Int d) {
    offset += (size_t)((ptrdiff_t)d * (ptrdiff_t)sizeof(T));
    return *this;
  }
  template <typename Int>
  NCCL_HOST_DEVICE_INLINE ncclSymPtr& operator-=(Int d) {
    offset -= (size_t)((ptrdiff_t)d * (ptrdiff_t)sizeof(T));
    return *this;
  }
#if defined(__CUDACC__)
  NCCL_DEVICE_INLINE T* localPtr() const;
  NCCL_DEVICE_INLINE T* lsaPtr(int peer) const;
  NCCL_DEVICE_INLINE T* peerPtr(int peer) const;
  NCCL_DEVICE_INLINE T* peerPtr(ncclTeam team, int peer) const;
  NCCL_DEVICE_INLINE T* multimemPtr(ncclMultimemHandle mm) const;
  NCCL_DEVICE_INLINE T* lsaMultimemPtr(ncclDevComm const& comm) const;
#endif
};

template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator+(ncclSymPtr<T> p, Int d) {
  return p += d;
}
template <typename T, typename Int>
NCCL_HOST_DEVICE_INLINE ncclSymPtr<T> operator-(ncclSymPtr<T> p, Int d) {
  return p -= d;
}
template <typename T>
NCCL_HOST_DEVICE_INLINE ptrdiff_t operator-(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return ((ptrdiff_t)a.offset - (ptrdiff_t)b.offset) / (ptrdiff_t)sizeof(T);
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator==(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return a.window == b.window && a.offset == b.offset;
}
template <typename T>
NCCL_HOST_DEVICE_INLINE bool operator!=(ncclSymPtr<T> a, ncclSymPtr<T> b) {
  return !(a == b);
}

#endif /* __cplusplus */

#if defined(__CUDACC__)

/* ---- Cooperative groups (CUDA) ---------------------------------------------------------------- */

namespace choir_dev {
NCCL_DEVICE_INLINE int laneId() { return (int)(threadIdx.x & 31u); }
NCCL_DEVICE_INLINE uint32_t lanesBelow() { return (1u << laneId()) - 1u; }
}  // namespace choir_dev

/* An aligned group of n threads (n a power of two, at most 32) within one warp. */
template <int n>
struct ncclCoopTile {
  static_assert(n >= 1 && n <= 32 && (n & (n - 1)) == 0, "ncclCoopTile: a power of two up to 32");
  NCCL_DEVICE_INLINE int thread_rank() const { return choir_dev::laneId() & (n - 1); }
  NCCL_DEVICE_INLINE constexpr int size() const { return n; }
  NCCL_DEVICE_INLINE constexpr int num_threads() const { return n; }
  NCCL_DEVICE_INLINE uint32_t laneMask() const {
    const uint32_t bits = n == 32 ? 0xffffffffu : ((1u << n) - 1u);
    return bits << (choir_dev::laneId() & ~(n - 1));
  }
  NCCL_DEVICE_INLINE void sync() {
    if (n > 1) __syncwarp(laneMask());
  }
};
typedef ncclCoopTile<1> ncclCoopThread;
typedef ncclCoopTile<32> ncclCoopWarp;

/* The lanes of this warp set in lmask. */
struct ncclCoopLanes {
  uint32_t lmask;
  NCCL_DEVICE_INLINE constexpr ncclCoopLanes(uint32_t mask = 0xffffffffu) : lmask(mask) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return __popc(lmask & choir_dev::lanesBelow()); }
  NCCL_DEVICE_INLINE int size() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE int num_threads() const { return __popc(lmask); }
  NCCL_DEVICE_INLINE void sync() { __syncwarp(lmask); }
};

/* Warps warp0 .. warp0 + nWarps - 1 of the CTA, synchronized on named barrier 1 + id. */
struct ncclCoopWarpSpan {
  uint32_t warp0 : 8, nWarps : 8, id : 8;
  NCCL_DEVICE_INLINE constexpr ncclCoopWarpSpan(int w0, int nw, int barrierId)
      : warp0((uint32_t)w0), nWarps((uint32_t)nw), id((uint32_t)barrierId) {}
  NCCL_DEVICE_INLINE int thread_rank() const { return (int)threadIdx.x - 32 * (int)warp0; }
  NCCL_DEVICE_INLINE int size() const { return 32 * (int)nWarps; }
  NCCL_DEVICE_INLINE int num_threads() const { return 32 * (int)nWarps; }
  NCCL_DEVICE_INLINE void sync() { __barrier_sync_count(1 + id, 32 * nWarps); }
};

/* The whole CTA (one-dimensional blocks). */
struct ncclCoopCta {
  NCCL_DEVICE_INLINE int thread_rank() const { return (int)threadIdx.x; }
  NCCL_DEVICE_INLINE int size() const { return (int)blockDim.x; }
  NCCL_DEVICE_INLINE int num_threads() const { return (int)blockDim.x; }
  NCCL_DEVICE_INLINE void sync() { __syncthreads(); }
};

template <int n>
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopTile<n> coop) {
  return coop.laneMask();
}
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopLanes coop) { return coop.lmask; }
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopWarpSpan) { return 0xffffffffu; }
NCCL_DEVICE_INLINE uint32_t ncclCoopGetLaneMask(ncclCoopCta) { return 0xffffffffu; }

template <int n>
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopTile<n>) {
  return n == 1;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopLanes) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopWarpSpan) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopIsThread(ncclCoopCta) { return false; }

template <int n>
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopTile<n>) {
  return true;
}
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopLanes) { return true; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopWarpSpan) { return false; }
NCCL_DEVICE_INLINE constexpr bool ncclCoopWithinWarp(ncclCoopCta) { return false; }

/* The lanes of this warp that run this call together. */
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced() { return ncclCoopLanes(__activemask()); }
/* The part of coop within this warp: the whole warp for groups larger than one. */
template <typename Coop>
NCCL_DEVICE_INLINE ncclCoopWarp ncclCoopCoalesced(Coop) {
  return ncclCoopWarp();
}
NCCL_DEVICE_INLINE ncclCoopLanes ncclCoopCoalesced(ncclCoopLanes coop) { return coop; }
template <int n>
NCCL_DEVICE_INLINE ncclCoopTile<n> ncclCoopCoalesced(ncclCoopTile<n> coop) {
  return coop;
}

namespace choir_dev {
/* Moves value from lane src to every lane of mask (width: the shuffle's segment), 32 bits at a time. */
template <typename T>
NCCL_DEVICE_INLINE T shuffleValue(uint32_t mask, T value, int src, int width) {
  constexpr int words = (int)((sizeof(T) + 3) / 4);
  union {
    uint32_t w[words];
    T v;
  } u;
  u.v = value;
#pragma unroll
  for (int i = 0; i < words; i++) u.w[i] = __shfl_sync(mask, u.w[i], src, width);
  return u.v;
}
/* One 16-byte slot per named barrier (0 for the CTA, 1 + id for warp spans), for broadcasts. */
NCCL_DEVICE_INLINE ulonglong2* bcastSlot(int which) {
  __shared__ ulonglong2 slots[16];
  return &slots[which];
}
/* Across warps: the root stores value into slot `which`, every member reads it back after the
 * group's barrier. */
template <class Coop, typename T>
NCCL_DEVICE_INLINE T bcastShared(Coop coop, int which, T value, int root, bool entrySync) {
  static_assert(sizeof(T) <= sizeof(ulonglong2), "ncclCoopBcast: at most 16 bytes across warps");
  if (entrySync) coop.sync();
  if (coop.thread_rank() == root) *(T*)bcastSlot(which) = value;
  coop.sync();
  return *(T*)bcastSlot(which);
}
}  // namespace choir_dev

/* value as held by member `root` of coop, for every member (entrySync: first wait until every
 * member is done with the previous broadcast's slot; needed across warps only). */
template <int n, typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopTile<n>, T value, int root, bool entrySync = true) {
  (void)entrySync;
  return choir_dev::shuffleValue(0xffffffffu, value, root, n);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopLanes coop, T value, int root, bool entrySync = true) {
  (void)entrySync;
  /* The lane of the root'th set bit of the mask. */
  uint32_t m = coop.lmask;
  for (int i = 0; i < root; i++) m &= m - 1;
  return choir_dev::shuffleValue(coop.lmask, value, __ffs(m) - 1, 32);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopWarpSpan coop, T value, int root, bool entrySync = true) {
  return choir_dev::bcastShared(coop, 1 + (int)coop.id, value, root, entrySync);
}
template <typename T>
NCCL_DEVICE_INLINE T ncclCoopBcast(ncclCoopCta coop, T value, int root, bool entrySync = true) {
  return choir_dev::bcastShared(coop, 0, value, root, entrySync);
}

/* ---- Window pointers (CUDA) ------------------------------------------------------------------- */

namespace choir_dev {
/* LSA rank i's copy of window w, at offset. */
NCCL_DEVICE_INLINE void* lsaAddress(ncclWindow_t w, int i, size_t offset) {
  const char* base = w->lsaFlatBase;
  const size_t stride = (size_t)w->stride4G << 32;
  return (void*)(base + (size_t)i * stride + offset);
}
NCCL_DEVICE_INLINE void* resourceAddress(ncclDevComm const& comm, int i, ncclDevResourceHandle h) {
  const char* base = comm.resourceWindow_inlined.lsaFlatBase;
  const size_t stride = (size_t)comm.resourceWindow_inlined.stride4G << 32;
  return (void*)(base + (size_t)i * stride + ncclGetResourceBufferOffset(h));
}
/* GIN and multicast: never in a device communicator that Choir built (ncclDevCommCreate refuses
 * them); a kernel that asks anyway stops here. */
NCCL_DEVICE_INLINE void unserved() { __trap(); }
}  // namespace choir_dev

NCCL_DEVICE_INLINE void* ncclGetLsaPointer(ncclWindow_t w, size_t offset, int peer) {
  return choir_dev::lsaAddress(w, peer, offset);
}
NCCL_DEVICE_INLINE void* ncclGetLocalPointer(ncclWindow_t w, size_t offset) {
  return choir_dev::lsaAddress(w, w->lsaRank, offset);
}
/* World rank peer (which must be in this rank's LSA team). */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, int peer) {
  return choir_dev::lsaAddress(w, w->lsaRank + (peer - w->worldRank), offset);
}
/* Rank peer of team (whose members must be in this rank's LSA team). */
NCCL_DEVICE_INLINE void* ncclGetPeerPointer(ncclWindow_t w, size_t offset, ncclTeam team, int peer) {
  return choir_dev::lsaAddress(w, w->lsaRank + (peer - team.rank) * team.stride, offset);
}
NCCL_DEVICE_INLINE void* ncclGetMultimemPointer(ncclWindow_t w, size_t offset, ncclMultimemHandle mm) {
  return (void*)((char*)mm.mcBasePtr + (size_t)w->mcOffset4K * 4096 + offset);
}
NCCL_DEVICE_INLINE void* ncclGetLsaMultimemPointer(ncclWindow_t w, size_t offset,
                                                   ncclDevComm const& comm) {
  return ncclGetMultimemPointer(w, offset, comm.lsaMultimem);
}

NCCL_DEVICE_INLINE void* ncclGetResourceBufferLocalPointer(ncclDevComm const& comm,
                                                           ncclDevResourceHandle h) {
  return choir_dev::resourceAddress(comm, comm.lsaRank, h);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaPointer(ncclDevComm const& comm,
                                                         ncclDevResourceHandle h, int peer) {
  return choir_dev::resourceAddress(comm, peer, h);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferPeerPointer(ncclDevComm const& comm,
                                                          ncclDevResourceHandle h, ncclTeam team,
                                                          int peer) {
  return choir_dev::resourceAddress(comm, comm.lsaRank + (peer - team.rank) * team.stride, h);
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferMultimemPointer(ncclDevComm const& comm,
                                                              ncclDevResourceHandle h,
                                                              ncclMultimemHandle mm) {
  return (void*)((char*)mm.mcBasePtr + (size_t)comm.resourceWindow_inlined.mcOffset4K * 4096 +
                 ncclGetResourceBufferOffset(h));
}
NCCL_DEVICE_INLINE void* ncclGetResourceBufferLsaMultimemPointer(ncclDevComm const& comm,
                                                                 ncclDevResourceHandle h) {
  return ncclGetResourceBufferMultimemPointer(comm, h, comm.lsaMultimem);
}
NCCL_DEVICE_INLINE ncclSymPtr<char> ncclGetResourceBuffer(ncclDevComm const& comm,
                                                          ncclDevResourceHandle h) {
  return ncclSymPtr<char>(comm.resourceWindow, ncclGetResourceBufferOffset(h));
}

template <typename T>
NCCL_DEVICE_INLINE T* ncclSymPtr<T>::localPtr() const {
  return (T*)ncclGetLocalPointer(window, offset);
}
template <typename T>
NCCL_DEVICE_INLINE T* ncclSymPtr<T>::lsaPtr(int peer) const {
  return (T*)ncclGetLsaPointer(window, offset, peer);
}
template <typename T>
NCCL_DEVICE_INLINE T* ncclSymPtr<T>::peerPtr(int peer) const {
  return (T*)ncclGetPeerPointer(window, offset, peer);
}
template <typename T>
NCCL_DEVICE_INLINE T* ncclSymPtr<T>::peerPtr(ncclTeam team, int peer) const {
  return (T*)ncclGetPeerPointer(window, offset, team, peer);
}
template <typename T>
NCCL_DEVICE_INLINE T* ncclSymPtr<T>::multimemPtr(ncclMultimemHandle mm) const {
  return (T*)ncclGetMultimemPointer(window, offset, mm);
}
template <typename T>
NCCL_DEVICE_INLINE T* ncclSymPtr<T>::lsaMultimemPtr(ncclDevComm const& comm) const {
  return (T*)ncclGetLsaMultimemPointer(window, offset, comm);
}

/* The window registered on comm that holds ptr (NULL when none does). Every member of coop may
 * call it with its own pointer. */
template <typename Coop>
NCCL_DEVICE_INLINE ncclWindow_t ncclFindWindow(Coop, ncclDevComm const& comm, void const* ptr) {
  const uintptr_t p = (uintptr_t)ptr;
  for (const ncclDevCommWindowTable* t = comm.windowTable; t != nullptr; t = t->next) {
    for (int i = 0; i < 32; i++) {
      const ncclDevCommWindowTable::Entry& e = t->entries[i];
      if (e.window != nullptr && e.size != 0 && p - e.base < e.size) return e.window;
    }
  }
  return nullptr;
}

/* ---- LSA barrier (CUDA) ----------------------------------------------------------------------- */

namespace choir_dev {
/* The release part of a memory order (for a store), and the acquire part (for a load). */
NCCL_DEVICE_INLINE cuda::memory_order releasePart(cuda::memory_order o) {
  if (o == cuda::memory_order_seq_cst) return cuda::memory_order_seq_cst;
  if (o == cuda::memory_order_release || o == cuda::memory_order_acq_rel)
    return cuda::memory_order_release;
  return cuda::memory_order_relaxed;
}
NCCL_DEVICE_INLINE cuda::memory_order acquirePart(cuda::memory_order o) {
  if (o == cuda::memory_order_seq_cst) return cuda::memory_order_seq_cst;
  if (o == cuda::memory_order_acquire || o == cuda::memory_order_acq_rel ||
      o == cuda::memory_order_consume)
    return cuda::memory_order_acquire;
  return cuda::memory_order_relaxed;
}
/* Whether counter `got` has reached `want`, counting modulo 2^32. */
NCCL_DEVICE_INLINE bool reached(uint32_t got, uint32_t want) { return got - want < 0x80000000u; }
}  // namespace choir_dev

/* One use of barrier `index` of an LSA barrier handle by the members of team, each arriving with
 * coop. Every team member must open a session on the same barrier; sessions of one barrier follow
 * one another (the epoch is kept in the buffer between them). A barrier round: each member writes
 * epoch + 1 into its slot of every other member's inbox, then waits until its own inbox holds at
 * least epoch + 1 from every other member. */
template <typename Coop>
struct ncclLsaBarrierSession {
  Coop coop;
  ncclDevComm const& comm;
  ncclTeam team;
  ncclLsaBarrierHandle handle;
  int index;
  bool multimem;
  ncclMultimemHandle mmHandle;
  uint32_t epoch;

  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop c, ncclDevComm const& dc, ncclTeam tm,
                                           ncclLsaBarrierHandle h, uint32_t idx,
                                           bool mm = false, ncclMultimemHandle mmh = {})
      : coop(c), comm(dc), team(tm), handle(h), index((int)idx), multimem(mm), mmHandle(mmh),
        epoch(0) {
    if (multimem) choir_dev::unserved();
    epoch = words()[handle.nBarriers + index];
  }
  NCCL_DEVICE_INLINE ncclLsaBarrierSession(Coop c, ncclDevComm const& dc, ncclTeamTagLsa,
                                           uint32_t idx, bool mm = false)
      : ncclLsaBarrierSession(c, dc, ncclTeamLsa(dc), dc.lsaBarrier, idx, mm, dc.lsaMultimem) {}
  ncclLsaBarrierSession(ncclLsaBarrierSession const&) = delete;
  /* Keeps the epoch for the barrier's next session. */
  NCCL_DEVICE_INLINE ~ncclLsaBarrierSession() {
    if (coop.thread_rank() == 0) words()[handle.nBarriers + index] = epoch;
    coop.sync();
  }

  /* Tells every other member that this one is here (order: what the stores release). */
  NCCL_DEVICE_INLINE void arrive(Coop, cuda::memory_order order) {
    coop.sync();
    const cuda::memory_order o = choir_dev::releasePart(order);
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      const int peer = i < team.rank ? i : i + 1;
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> slot(*inbox(peer, team.rank));
      slot.store(epoch + 1, o);
    }
  }
  /* Waits until every other member arrived (order: what the loads acquire). */
  NCCL_DEVICE_INLINE void wait(Coop, cuda::memory_order order) {
    const cuda::memory_order o = choir_dev::acquirePart(order);
    for (int i = coop.thread_rank(); i < team.nRanks - 1; i += coop.size()) {
      const int peer = i < team.rank ? i : i + 1;
      cuda::atomic_ref<uint32_t, cuda::thread_scope_system> slot(*inbox(team.rank, peer));
      while (!choir_dev::reached(slot.load(o), epoch + 1)) {
      }
    }
    epoch += 1;
    coop.sync();
  }
  NCCL_DEVICE_INLINE void sync(Coop c, cuda::memory_order order) {
    arrive(c, order);
    wait(c, order);
  }

 private:
  /* This rank's words of the barrier buffer. */
  NCCL_DEVICE_INLINE uint32_t* words() const {
    return (uint32_t*)ncclGetResourceBufferLocalPointer(comm, handle.bufHandle);
  }
  /* In member owner's buffer, the word that member `from` writes for this barrier. */
  NCCL_DEVICE_INLINE uint32_t* inbox(int owner, int from) const {
    uint32_t* w = (uint32_t*)ncclGetResourceBufferPeerPointer(comm, handle.bufHandle, team, owner);
    return w + 3 * handle.nBarriers + index * team.nRanks + from;
  }
};

/* ---- GPU-initiated networking (CUDA): declared, not served ------------------------------------ */

/* Choir's ncclDevCommCreate refuses every GIN requirement, so a device communicator from Choir
 * has no GIN context; these exist so that programs written for NVIDIA's header compile. */
struct ncclGinDescriptorSmem;
struct ncclGin_None {};
struct ncclGin_SignalAdd {
  ncclGinSignal_t signal;
  uint64_t value;
};
struct ncclGin_SignalInc {
  ncclGinSignal_t signal;
};
struct ncclGin_CounterInc {
  ncclGinCounter_t counter;
};
struct ncclGin_DescriptorSmem {
  ncclGinDescriptorSmem* descriptor;
};
enum class ncclGinFenceLevel { Relaxed };

#define NCCL_GIN_BACKEND_MASK_ALL 0xffffffffu

template <unsigned backendMask>
struct ncclGin_BackendMask {
  ncclDevComm const& comm;
  uint32_t nContexts : 8, contextId : 8, _ginBackend : 8;
  void* _ginHandle;
  uint64_t* _signalShadows;

  NCCL_DEVICE_INLINE ncclGin_BackendMask(ncclDevComm const& dc, int contextIndex)
      : comm(dc), nContexts(dc.ginContextCount), contextId((uint32_t)contextIndex),
        _ginBackend(0), _ginHandle(nullptr), _signalShadows(dc.ginSignalShadows) {
    choir_dev::unserved();
  }
  template <typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void put(ncclTeam, int, ncclWindow_t, size_t, ncclWindow_t, size_t, size_t,
                              RemoteAction = ncclGin_None{}, LocalAction = ncclGin_None{},
                              Coop = ncclCoopThread{}, DescriptorSmem = ncclGin_None{},
                              cuda::thread_scope = cuda::thread_scope_thread,
                              cuda::thread_scope = cuda::thread_scope_device) const {
    choir_dev::unserved();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename LocalAction = ncclGin_None,
            typename Coop = ncclCoopThread, typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void put(ncclTeam, int, ncclSymPtr<T>, ncclSymPtr<T>, size_t,
                              RemoteAction = ncclGin_None{}, LocalAction = ncclGin_None{},
                              Coop = ncclCoopThread{}, DescriptorSmem = ncclGin_None{},
                              cuda::thread_scope = cuda::thread_scope_thread,
                              cuda::thread_scope = cuda::thread_scope_device) const {
    choir_dev::unserved();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam, int, ncclWindow_t, size_t, T,
                                   RemoteAction = ncclGin_None{}, Coop = ncclCoopThread{},
                                   DescriptorSmem = ncclGin_None{},
                                   cuda::thread_scope = cuda::thread_scope_thread,
                                   cuda::thread_scope = cuda::thread_scope_device) const {
    choir_dev::unserved();
  }
  template <typename T, typename RemoteAction = ncclGin_None, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void putValue(ncclTeam, int, ncclSymPtr<T>, T, RemoteAction = ncclGin_None{},
                                   Coop = ncclCoopThread{}, DescriptorSmem = ncclGin_None{},
                                   cuda::thread_scope = cuda::thread_scope_thread,
                                   cuda::thread_scope = cuda::thread_scope_device) const {
    choir_dev::unserved();
  }
  template <typename RemoteAction, typename Coop = ncclCoopThread,
            typename DescriptorSmem = ncclGin_None>
  NCCL_DEVICE_INLINE void signal(ncclTeam, int, RemoteAction, Coop = ncclCoopThread(),
                                 DescriptorSmem = ncclGin_None{},
                                 cuda::thread_scope = cuda::thread_scope_thread,
                                 cuda::thread_scope = cuda::thread_scope_device) const {
    choir_dev::unserved();
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void flush(Coop, cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
  }
  NCCL_DEVICE_INLINE uint64_t readCounter(ncclGinCounter_t, int = 56,
                                          cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
    return 0;
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitCounter(Coop, ncclGinCounter_t, uint64_t, int = 56,
                                      cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
  }
  NCCL_DEVICE_INLINE uint64_t* getSignalShadowPtr(ncclGinSignal_t) const {
    choir_dev::unserved();
    return nullptr;
  }
  NCCL_DEVICE_INLINE void increaseSignalShadow(ncclGinSignal_t, uint64_t) const {
    choir_dev::unserved();
  }
  NCCL_DEVICE_INLINE uint64_t readSignal(ncclGinSignal_t, int = 64,
                                         cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
    return 0;
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignal(Coop, ncclGinSignal_t, uint64_t, int = 64,
                                     cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
  }
  template <typename Coop>
  NCCL_DEVICE_INLINE void waitSignalMeetShadow(Coop, ncclGinSignal_t, int = 64,
                                               cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
  }
  template <typename Coop, typename Uint>
  NCCL_DEVICE_INLINE void waitSignalFollowShadow(Coop, ncclGinSignal_t, Uint, Uint*, Uint*, int = 64,
                                                 cuda::memory_order = cuda::memory_order_acquire) const {
    choir_dev::unserved();
  }
  NCCL_DEVICE_INLINE void resetCounter(ncclGinCounter_t) const { choir_dev::unserved(); }
  NCCL_DEVICE_INLINE void resetSignal(ncclGinSignal_t) const { choir_dev::unserved(); }
};
using ncclGin = ncclGin_BackendMask<NCCL_GIN_BACKEND_MASK_ALL>;

template <typename Coop>
struct ncclBarrierSession;

/* A GIN barrier among a team (the rail team by default): not served. */
template <typename Coop>
struct ncclGinBarrierSession {
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop, ncclGin, ncclTeam, ncclGinBarrierHandle, uint32_t) {
    choir_dev::unserved();
  }
  NCCL_DEVICE_INLINE ncclGinBarrierSession(Coop, ncclGin, ncclTeamTagRail, uint32_t) {
    choir_dev::unserved();
  }
  ncclGinBarrierSession(ncclGinBarrierSession const&) = delete;
  NCCL_DEVICE_INLINE void sync(Coop, cuda::memory_order, ncclGinFenceLevel) { choir_dev::unserved(); }

 private:
  friend struct ncclBarrierSession<Coop>;
  NCCL_DEVICE_INLINE ncclGinBarrierSession() {}
};

/* A barrier of an inner LSA team and an outer GIN team. Choir serves the LSA team alone
 * (ncclTeamTagLsa); the constructors that take a GIN context stop with a trap. */
template <typename Coop>
struct ncclBarrierSession {
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeam innerTeam, ncclTeam, ncclGin gin,
                                        ncclLsaBarrierHandle innerHandle, ncclGinBarrierHandle,
                                        uint32_t index, bool multimem = false,
                                        ncclMultimemHandle innerMm = {})
      : hasGin(true),
        lsa(coop, gin.comm, innerTeam, innerHandle, index, multimem, innerMm) {}
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagWorld, ncclGin gin, uint32_t index,
                                        bool multimem = false)
      : hasGin(true),
        lsa(coop, gin.comm, ncclTeamLsa(gin.comm), gin.comm.lsaBarrier, index, multimem,
            gin.comm.lsaMultimem) {}
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagLsa, ncclDevComm const& comm,
                                        uint32_t index, bool multimem = false)
      : hasGin(false),
        lsa(coop, comm, ncclTeamLsa(comm), comm.lsaBarrier, index, multimem, comm.lsaMultimem) {}
  NCCL_DEVICE_INLINE ncclBarrierSession(Coop coop, ncclTeamTagRail, ncclGin gin, uint32_t index)
      : hasGin(true), lsa(coop, gin.comm, ncclTeamLsa(gin.comm), gin.comm.lsaBarrier, index) {}
  ncclBarrierSession(ncclBarrierSession const&) = delete;

  NCCL_DEVICE_INLINE ncclLsaBarrierSession<Coop>& lsaBarrier() { return lsa; }
  NCCL_DEVICE_INLINE ncclGinBarrierSession<Coop>& ginBarrier() {
    choir_dev::unserved();
    return gin_;
  }
  NCCL_DEVICE_INLINE void sync(Coop coop, cuda::memory_order order, ncclGinFenceLevel) {
    if (hasGin) choir_dev::unserved();
    lsa.sync(coop, order);
  }

 private:
  bool hasGin; /* constructed with a GIN context (never true with Choir's device communicators:
                * constructing the ncclGin already trapped) */
  ncclLsaBarrierSession<Coop> lsa;
  ncclGinBarrierSession<Coop> gin_;
};

#endif /* __CUDACC__ */

/* ---- NCCL 2.28.9's layouts (LP64) ------------------------------------------------------------- */

#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L)
#if UINTPTR_MAX == 0xffffffffffffffffu
#ifdef __cplusplus
#define CHOIR_DEV_PIN(cond, what) static_assert(cond, what)
#else
#define CHOIR_DEV_PIN(cond, what) _Static_assert(cond, what)
#endif
CHOIR_DEV_PIN(sizeof(struct ncclTeam) == 12, "ncclTeam: 12 bytes in NCCL 2.28.9");
CHOIR_DEV_PIN(sizeof(struct ncclDevCommRequirements) == 56,
              "ncclDevCommRequirements: 56 bytes in NCCL 2.28.9");
CHOIR_DEV_PIN(sizeof(struct ncclDevResourceRequirements) == 56,
              "ncclDevResourceRequirements: 56 bytes in NCCL 2.28.9");
CHOIR_DEV_PIN(sizeof(struct ncclWindow_vidmem) == 72, "ncclWindow_vidmem: 72 bytes in NCCL 2.28.9");
CHOIR_DEV_PIN(sizeof(struct ncclLsaBarrierHandle) == 8 && sizeof(struct ncclGinBarrierHandle) == 8 &&
                  sizeof(struct ncclLLA2AHandle) == 8,
              "barrier and LL all-to-all handles: 8 bytes in NCCL 2.28.9");
CHOIR_DEV_PIN(sizeof(struct ncclDevComm) == 200, "ncclDevComm: 200 bytes in NCCL 2.28.9");
CHOIR_DEV_PIN(offsetof(struct ncclDevComm, resourceWindow_inlined) == 40 &&
                  offsetof(struct ncclDevComm, lsaBarrier) == 120 &&
                  offsetof(struct ncclDevComm, ginHandles) == 144 &&
                  offsetof(struct ncclDevComm, ginSignalShadows) == 192,
              "ncclDevComm field offsets of NCCL 2.28.9");
#undef CHOIR_DEV_PIN
#endif
#endif

#endif /* CHOIR_NCCL_DEVICE_H_ */
