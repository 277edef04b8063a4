/*
 * core/api: the exported nccl* functions and their pnccl* twins. Arguments are validated here,
 * once, with messages that name the argument, the value and the fix; then one call goes inward.
 */
#ifndef CHOIR_API_H
#define CHOIR_API_H

#include "base.h"
#include "choir_config.h"
#include "nccl.h"

/* Declare an exported function and its pnccl alias; the definition follows the macro. */
#define NCCL_API(ret, func, ...)                                                        \
  __attribute__((visibility("default"))) ret func(__VA_ARGS__);                        \
  __attribute__((visibility("default"), alias(#func))) ret p##func(__VA_ARGS__);       \
  ret func(__VA_ARGS__)

/* A feature Choir has not built yet: WARN naming the call and the feature, ncclInvalidUsage. */
ncclResult_t api_missing(const char* func, const char* feature);

/* Argument checks shared by the API files; each logs the problem and returns the result code. */
#define API_CHECK_PTR(func, ptr)                                                         \
  do {                                                                                   \
    if ((ptr) == NULL) {                                                                 \
      WARN("%s: argument '%s' is NULL; pass a valid pointer", (func), #ptr);            \
      return ncclInvalidArgument;                                                        \
    }                                                                                    \
  } while (0)

ncclResult_t api_check_datatype(const char* func, ncclDataType_t datatype);

#endif
