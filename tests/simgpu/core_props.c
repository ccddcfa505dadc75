/* core_props.c: the simulated device's properties and attributes, as
 * cudaGetDeviceProperties and cudaDeviceGetAttribute report them (the world physics'
 * profile where it is in force). */
#include <stdio.h>
#include <string.h>

#include "simgpu_internal.h"

void
simgpu_device_props(struct cudaDeviceProp *p, int dev)
{
    const struct simgpu_profile *prof =
        simgpu_physics() == SIMGPU_PHYSICS_WORLD ? simgpu_world()->prof : NULL;
    memset(p, 0, sizeof(*p));
    if (prof)
        snprintf(p->name, sizeof(p->name), "simgpu %s (simulated)", prof->name);
    else
        snprintf(p->name, sizeof(p->name), "simgpu H100 (simulated)");
    for (int i = 0; i < 16; i++)
        p->uuid.bytes[i] = (char)(0x51 + i + dev);
    p->totalGlobalMem = simgpu_cfg.mem_bytes;
    p->sharedMemPerBlock = 49152;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->memPitch = 2147483647;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024;
    p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647;
    p->maxGridSize[1] = 65535;
    p->maxGridSize[2] = 65535;
    p->totalConstMem = 65536;
    p->major = 9;
    p->minor = 0;
    p->textureAlignment = 512;
    p->multiProcessorCount = 132;
    p->integrated = 0;
    p->canMapHostMemory = 1;
    p->concurrentKernels = 1;
    p->pciBusID = 0x18 + dev;
    p->asyncEngineCount = 2;
    p->unifiedAddressing = 1;
    p->memoryBusWidth = 5120;
    p->l2CacheSize = 52428800;
    p->maxThreadsPerMultiProcessor = 2048;
    p->sharedMemPerMultiprocessor = 233472;
    p->regsPerMultiprocessor = 65536;
    p->managedMemory = 1;
    p->multiGpuBoardGroupID = dev;
    p->sharedMemPerBlockOptin = 232448;
    if (prof) {
        p->major = prof->cc_major;
        p->minor = prof->cc_minor;
        p->multiProcessorCount = prof->sm_count;
        p->l2CacheSize = prof->l2_bytes;
        p->asyncEngineCount = prof->copy_engines;
    }
}

cudaError_t
simgpu_device_attr(int *value, enum cudaDeviceAttr attr, int dev)
{
    struct cudaDeviceProp p;
    if (dev < 0 || dev >= simgpu_cfg.device_count)
        return cudaErrorInvalidDevice;
    simgpu_device_props(&p, dev);
    switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock:
        *value = p.maxThreadsPerBlock;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlock:
        *value = (int)p.sharedMemPerBlock;
        break;
    case cudaDevAttrWarpSize:
        *value = p.warpSize;
        break;
    case cudaDevAttrMultiProcessorCount:
        *value = p.multiProcessorCount;
        break;
    case cudaDevAttrComputeCapabilityMajor:
        *value = p.major;
        break;
    case cudaDevAttrComputeCapabilityMinor:
        *value = p.minor;
        break;
    case cudaDevAttrConcurrentKernels:
        *value = 1;
        break;
    case cudaDevAttrPciBusId:
        *value = p.pciBusID;
        break;
    case cudaDevAttrPciDeviceId:
        *value = 0;
        break;
    case cudaDevAttrPciDomainId:
        *value = 0;
        break;
    case cudaDevAttrMaxThreadsPerMultiProcessor:
        *value = p.maxThreadsPerMultiProcessor;
        break;
    case cudaDevAttrL2CacheSize:
        *value = p.l2CacheSize;
        break;
    case cudaDevAttrGlobalMemoryBusWidth:
        *value = p.memoryBusWidth;
        break;
    case cudaDevAttrMemoryClockRate:
        *value = 2619000;
        break;
    case cudaDevAttrClockRate:
        *value = simgpu_physics() == SIMGPU_PHYSICS_WORLD
                     ? (int)(simgpu_world()->prof->clock_mhz * 1000)
                     : 1980000;
        break;
    case cudaDevAttrUnifiedAddressing:
        *value = 1;
        break;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor:
        *value = (int)p.sharedMemPerMultiprocessor;
        break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin:
        *value = (int)p.sharedMemPerBlockOptin;
        break;
    case cudaDevAttrMemoryPoolsSupported:
        *value = 1;
        break;
    case cudaDevAttrAsyncEngineCount:
        *value = p.asyncEngineCount;
        break;
    case cudaDevAttrIntegrated:
        *value = 0;
        break;
    case cudaDevAttrCanMapHostMemory:
        *value = 1;
        break;
    case cudaDevAttrManagedMemory:
        *value = 1;
        break;
    case cudaDevAttrMaxRegistersPerBlock:
        *value = p.regsPerBlock;
        break;
    case cudaDevAttrMaxRegistersPerMultiprocessor:
        *value = p.regsPerMultiprocessor;
        break;
    default:
        return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
