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
PARAM_STR(PLUGIN_DIR, "CHOIR_PLUGIN_DIR", NULL,
          "directory holding Choir's own plugins (default: choir/ next to libnccl.so.2, or "
          "plugins/ in a build tree)")
