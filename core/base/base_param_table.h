/*
 * The one table of every environment knob Choir reads: name (without the NCCL_ prefix where it has
 * one), type, default, one-line help. It feeds the getters (base_param.c), choir-info --params and
 * the README's knob list. Add a knob here, nowhere else.
 *
 * PARAM_INT(id, env name, default, help)   64-bit signed integer
 * PARAM_STR(id, env name, default, help)   string; NULL default means unset
 *
 * Defaults of -1 mean "decided by the library at run time" where the help says so.
 */
PARAM_STR(DEBUG, "NCCL_DEBUG", NULL,
          "log level: VERSION, WARN, INFO or TRACE (unset: nothing but errors returned to the caller)")
PARAM_STR(DEBUG_SUBSYS, "NCCL_DEBUG_SUBSYS", "INIT,BOOTSTRAP,ENV",
          "comma list of subsystems logged at INFO/TRACE (INIT,COLL,P2P,SHM,NET,GRAPH,TUNING,ENV,"
          "ALLOC,CALL,PROXY,NVLS,BOOTSTRAP,REG,PROFILE,RAS,DESTROY,ALLOC_HOST or ALL); ^ excludes")
PARAM_STR(DEBUG_FILE, "NCCL_DEBUG_FILE", NULL,
          "write the log to this file instead of stdout; %h is the host name, %p the process id")
PARAM_STR(CONF_FILE, "NCCL_CONF_FILE", NULL,
          "file of KEY=VALUE lines applied to the environment at first use (default ~/.nccl.conf, "
          "then /etc/nccl.conf); the environment wins")
PARAM_STR(NET_PLUGIN, "NCCL_NET_PLUGIN", NULL,
          "net plugins to try, comma separated: a path, a file name, or NAME for "
          "libnccl-net-NAME.so; none disables external net plugins")
PARAM_STR(TUNER_PLUGIN, "NCCL_TUNER_PLUGIN", NULL,
          "tuner plugin: a path, a file name, or NAME for libnccl-tuner-NAME.so; none disables")
PARAM_STR(PROFILER_PLUGIN, "NCCL_PROFILER_PLUGIN", NULL,
          "profiler plugin: a path, a file name, or NAME for libnccl-profiler-NAME.so; none "
          "disables")
PARAM_STR(NET, "NCCL_NET", NULL,
          "use only the net plugin whose table name matches (case-insensitive), e.g. Socket or IB")
PARAM_INT(CUMEM_ENABLE, "NCCL_CUMEM_ENABLE", 1,
          "1: ncclMemAlloc uses cuMem allocations (mappable by peers, exportable); 0: cudaMalloc")
/* communicator configuration: each overrides the matching ncclConfig_t field when set */
PARAM_INT(COMM_BLOCKING, "NCCL_COMM_BLOCKING", -1,
          "1: blocking communicator calls, 0: non-blocking (ncclInProgress); overrides "
          "config.blocking")
PARAM_INT(CGA_CLUSTER_SIZE, "NCCL_CGA_CLUSTER_SIZE", -1,
          "CUDA thread-block cluster size for the kernels, 0..8; overrides config.cgaClusterSize")
PARAM_INT(MIN_CTAS, "NCCL_MIN_CTAS", -1,
          "fewest CTAs (channels) per collective; overrides config.minCTAs")
PARAM_INT(MAX_CTAS, "NCCL_MAX_CTAS", -1,
          "most CTAs (channels) per collective, at most 64; overrides config.maxCTAs")
PARAM_INT(COMM_SPLIT_SHARE_RESOURCES, "NCCL_COMM_SPLIT_SHARE_RESOURCES", -1,
          "1: communicators from ncclCommSplit share the parent's resources; overrides "
          "config.splitShare")
PARAM_INT(CTA_POLICY, "NCCL_CTA_POLICY", -1,
          "CTA policy flags (0 default, 1 efficiency, 2 zero); overrides config.CTAPolicy")
PARAM_INT(COLLNET_ENABLE, "NCCL_COLLNET_ENABLE", -1,
          "1: allow CollNet algorithms; overrides config.collnetEnable")
PARAM_INT(NCHANNELS_PER_NET_PEER, "NCCL_NCHANNELS_PER_NET_PEER", -1,
          "channels per network peer for point-to-point; overrides config.nChannelsPerNetPeer")
PARAM_STR(PLUGIN_DIR, "CHOIR_PLUGIN_DIR", NULL,
          "directory holding Choir's own plugins (default: choir/ next to libnccl.so.2, or "
          "plugins/ in a build tree)")
PARAM_INT(RANKS_SHARE_GPU, "CHOIR_RANKS_SHARE_GPU", 0,
          "1: ranks of one communicator may share a GPU (testing several ranks on one GPU; "
          "their CTAs are capped so that all fit on it; several processes need MPS); 0: two ranks "
          "on one GPU are an error, as in NCCL")
PARAM_STR(HOSTID, "NCCL_HOSTID", NULL,
          "this process's host identity (default: host name and boot id): processes with "
          "different values are on different hosts as far as transports are concerned")
/* bootstrap and sockets */
PARAM_STR(SOCKET_IFNAME, "NCCL_SOCKET_IFNAME", NULL,
          "interfaces for bootstrap sockets: comma-separated name prefixes; ^ excludes them, = "
          "makes them exact names (e.g. eth, =eth0, ^docker,lo, ^=docker0); unset: ib*, then any "
          "but docker* and lo, then docker*, then lo")
PARAM_STR(SOCKET_FAMILY, "NCCL_SOCKET_FAMILY", NULL,
          "address family for bootstrap sockets: AF_INET or AF_INET6 (unset: either, IPv4 first)")
PARAM_STR(COMM_ID, "NCCL_COMM_ID", NULL,
          "host:port or [ipv6]:port of the bootstrap root; ncclGetUniqueId then returns the same "
          "id in every process and rank 0 starts the root inside ncclCommInitRank")
PARAM_INT(SOCKET_RETRY_CNT, "NCCL_SOCKET_RETRY_CNT", 34,
          "times a refused or timed-out socket connection is retried")
PARAM_INT(SOCKET_RETRY_SLEEP_MSEC, "NCCL_SOCKET_RETRY_SLEEP_MSEC", 100,
          "sleep before connection retry i is i times this many milliseconds")
PARAM_INT(BOOTSTRAP_TIMEOUT, "CHOIR_BOOTSTRAP_TIMEOUT", 300,
          "seconds any bootstrap step (rendezvous, all-gather, barrier, send/recv, split) waits for "
          "a peer or the root before failing with an error naming it")
PARAM_INT(PEER_TIMEOUT, "CHOIR_PEER_TIMEOUT", 30,
          "seconds without a heartbeat from a neighbouring rank before a communicator fails, "
          "naming it (a stopped or hung process, a host or network down); 0 turns this check "
          "off (a rank whose process ends is noticed at once either way)")
/* topology and graph search */
PARAM_STR(TOPO_FILE, "NCCL_TOPO_FILE", NULL,
          "load the system topology from this XML file (NCCL's format) instead of detecting it; "
          "detected GPUs and NICs missing from the file are added")
PARAM_STR(TOPO_DUMP_FILE, "NCCL_TOPO_DUMP_FILE", NULL,
          "write the detected topology to this XML file (NCCL's format) at communicator creation")
PARAM_INT(TOPO_DUMP_FILE_RANK, "NCCL_TOPO_DUMP_FILE_RANK", 0,
          "the rank that writes NCCL_TOPO_DUMP_FILE")
PARAM_STR(P2P_LEVEL, "NCCL_P2P_LEVEL", NULL,
          "farthest path for peer-to-peer between GPUs: LOC, NVL, PIX, PXB, PHB or SYS (or legacy "
          "0..4); unset: SYS, but PXB on ARM and Intel/Zhaoxin x86 CPUs; NVLink always")
PARAM_INT(P2P_DISABLE, "NCCL_P2P_DISABLE", 0,
          "1: never use peer-to-peer between GPUs (shared host memory or the network instead)")
PARAM_INT(SHM_DISABLE, "NCCL_SHM_DISABLE", 0,
          "1: never use the shared-memory transport between processes of one host")
PARAM_INT(NET_DISABLE_INTRA, "NCCL_NET_DISABLE_INTRA", 0,
          "1: never use the network between GPUs of one host (fail instead when p2p and shm are "
          "both off); 0: fall back to the network, as NCCL does")
PARAM_STR(NET_GDR_LEVEL, "NCCL_NET_GDR_LEVEL", NULL,
          "farthest path between NIC and GPU for GPUDirect RDMA: LOC, PIX, PXB, PHB or SYS (or "
          "legacy 0..4); unset: PXB")
PARAM_INT(NET_GDR_READ, "NCCL_NET_GDR_READ", -1,
          "1: send from GPU memory directly (GPUDirect read) when GDR is allowed; 0: stage sends "
          "in host memory; -1: decided by the topology")
PARAM_INT(NET_GDR, "CHOIR_NET_GDR", 0,
          "1: put network buffers in GPU memory (GPUDirect RDMA) where the plugin takes CUDA "
          "pointers and NCCL_NET_GDR_LEVEL allows; 0: always stage in host memory (experimental: "
          "not yet validated on GPUs)")
PARAM_STR(RINGS, "NCCL_RINGS", NULL,
          "ring orders to use instead of searching: rings separated by |, ranks by spaces or "
          "dashes (e.g. \"0 1 2 3|3 2 1 0\"); one channel per ring")
PARAM_INT(MIN_NCHANNELS, "NCCL_MIN_NCHANNELS", -1,
          "fewest channels the graph search may return (default: the search's own result)")
PARAM_INT(MAX_NCHANNELS, "NCCL_MAX_NCHANNELS", -1,
          "most channels the graph search may return, at most 64 (default: no extra limit)")
/* data path */
PARAM_INT(BUFFSIZE, "NCCL_BUFFSIZE", 4194304,
          "bytes of each ring connection's receive buffer (8 slots); a multiple of 128 KiB is best")
PARAM_INT(LL_BUFFSIZE, "NCCL_LL_BUFFSIZE", 524288,
          "bytes of each ring connection's LL buffer (8 slots of 16-byte lines, half of it data)")
PARAM_INT(LL128_BUFFSIZE, "NCCL_LL128_BUFFSIZE", 4915200,
          "bytes of each ring connection's LL128 buffer (8 slots of 128-byte lines, 120 bytes of "
          "each data)")
PARAM_STR(ALGO, "NCCL_ALGO", NULL,
          "algorithms the plan may use: a list (ring,tree), ^ to exclude, or per collective "
          "(allreduce:tree,ring;broadcast:ring); Choir runs Ring, Tree (AllReduce, Simple and "
          "LL; made across hosts, or on one when this names it for AllReduce) and OneShot/TwoShot "
          "within a node (NCCL's other names parse; a setting that leaves none of these fails "
          "with a message)")
PARAM_STR(PROTO, "NCCL_PROTO", NULL,
          "protocols the plan may use: LL, LL128, Simple as a list, ^ to exclude, or per "
          "collective (allreduce:LL,Simple;allgather:^LL128)")
PARAM_INT(ONESHOT, "CHOIR_ONESHOT", 1,
          "1: where every pair of ranks is p2p (one node, at most 8 ranks), make the OneShot "
          "AllReduce's direct connections (CHOIR_DIRECT_CTAS per peer and direction, each an LL "
          "buffer of NCCL_LL_BUFFSIZE bytes) with the ring, so the plan may choose OneShot; 0: "
          "never")
PARAM_INT(DIRECT_CTAS, "CHOIR_DIRECT_CTAS", 16,
          "CTAs the OneShot and TwoShot algorithms may use at most, 1..16 (larger values are "
          "taken as 16; the same on every rank): a direct connection per CTA, peer and direction "
          "is made with the ring")
PARAM_INT(SYM_KERNELS, "CHOIR_SYM_KERNELS", 0,
          "AllReduce, AllGather and ReduceScatter whose buffers that other ranks read or write lie "
          "in NCCL_WIN_COLL_SYMMETRIC windows (ncclCommWindowRegister) of a team that holds every "
          "rank, with the direct connections (CHOIR_ONESHOT): 0, as any other buffers; 1, the Sym "
          "kernels where the model chose anything but OneShot (each rank reads and writes every "
          "rank's window directly, no copy through a connection; AllReduce: SymTwoShot); 2, the "
          "Sym kernels at every size (for tests). Not premulsum. The same on every rank, and every "
          "rank's buffers in windows")
PARAM_INT(AGG_MAX, "CHOIR_AGG_MAX", 64,
          "most collectives of one group that run in one kernel launch, 1..64 (1: one launch per "
          "collective; larger values are taken as 64); consecutive collectives of a group with "
          "the same kernel (protocol, operator and type) share a launch")
PARAM_INT(RING_SPREAD, "CHOIR_RING_SPREAD", 1,
          "1: the ring collectives of one launch that use fewer channels than the ring has start "
          "on channels of their own (one after the other, wrapping around), so that they run side "
          "by side; 0: every one starts on channel 0 and they run one after the other")
PARAM_INT(GROUP_PLAN, "CHOIR_GROUP_PLAN", 1,
          "1: consecutive alike collectives of a group (AllReduce, AllGather or ReduceScatter "
          "with one operator and type, sizes within 4x of each other) are planned "
          "together, as NCCL does: the model chooses for their bytes together, and when it "
          "chooses the ring or OneShot they all take it, the ring's channels shared by bytes; "
          "0: each is planned alone")
PARAM_INT(P2P_NVL_CHUNKSIZE, "NCCL_P2P_NVL_CHUNKSIZE", 524288,
          "slot size in bytes of send/recv connections over NVLink")
PARAM_STR(PROXY_TRACE, "CHOIR_PROXY_TRACE", NULL,
          "file prefix: each proxy thread records when it hands slots to the net plugin and when "
          "they complete, and writes PREFIX.RANK.PID at communicator destruction (tuning aid)")
PARAM_INT(LOCAL_REGISTER, "NCCL_LOCAL_REGISTER", 1,
          "1: ncclCommRegister records buffers and returns a handle; 0: it returns a NULL handle "
          "(Choir's data path does not read registered buffers in place yet either way)")
PARAM_INT(P2P_PCI_CHUNKSIZE, "NCCL_P2P_PCI_CHUNKSIZE", 131072,
          "slot size in bytes of send/recv connections over PCIe or shared memory")
PARAM_INT(MAX_P2P_NCHANNELS, "NCCL_MAX_P2P_NCHANNELS", -1,
          "most connections (CTAs) per peer and direction for send/recv, at most 32 (default: "
          "decided from the link)")
