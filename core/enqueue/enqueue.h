/*
 * core/enqueue: from API call to kernel launch. For now it holds the group state (nesting per
 * thread); planning and launching arrive with the data path.
 */
#ifndef CHOIR_ENQUEUE_H
#define CHOIR_ENQUEUE_H

#include "base.h"
#include "nccl.h"

ncclResult_t enqueue_group_start(void);
/* Close one level; the outermost close launches what the group holds. With sim_info, plan only
 * and fill sim_info->estimatedTime instead of launching. */
ncclResult_t enqueue_group_end(ncclSimInfo_t* sim_info);
/* Nesting depth of the calling thread's group (0: not in a group). */
int enqueue_group_depth(void);

#endif
