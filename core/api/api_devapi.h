/*
 * core/api: the device API's host side that Choir has built so far (api_devapi.c): the exported
 * helpers of abi/nccl_device.h, and what the core and the tests need besides.
 */
#ifndef CHOIR_API_DEVAPI_H
#define CHOIR_API_DEVAPI_H

#include <stddef.h>
#include <stdint.h>

#include "api.h"

/* The device API's types and host functions, NCCL 2.28.9's layouts pinned there (and compared
 * with NVIDIA's header by test/abi). */
#include "nccl_device.h"


/* Some of the pnccl twins, for the tests (every one is exported: NCCL_API). */
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const* reqs,
                                ncclDevComm_t* outDevComm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
                                         ncclDevResourceRequirements_t* outReq);

#endif
