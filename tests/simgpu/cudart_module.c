/* cudart_module.c: libcudart.so.13's side of nvcc's host code (fat-binary and function
 * registration, the <<<>>> call configuration, __cudaGetKernel / __cudaLaunchKernel),
 * runtime libraries (cudaLibrary*), kernel attributes and occupancy.
 *
 * What nvcc of CUDA 13 emits (crt/host_runtime.h): a constructor calls
 * __cudaRegisterFatBinary(&__fatDeviceText), then __cudaRegisterFunction(handle, stub,
 * deviceFun, deviceName, ...) per kernel (deviceName: the mangled device name, what CUPTI
 * reports), __cudaRegisterVar / __cudaRegisterManagedVar per variable,
 * __cudaRegisterFatBinaryEnd; an atexit handler __cudaUnregisterFatBinary.  `k<<<g, b, s,
 * st>>>(args)` is __cudaPushCallConfiguration(g, b, s, st), then the host stub:
 * __cudaGetKernel(&handle, stub) once, __cudaPopCallConfiguration, __cudaLaunchKernel.
 *
 * Contract of every exported function: the CUDA runtime documentation (the __cuda* ones:
 * the declarations in crt/host_runtime.h and crt/device_functions.h).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda_runtime_api.h>
#undef __CUDA_API_VERSION_INTERNAL

#define SIMGPU_CUDART_INTERNAL
#include "simgpu_internal.h"

/* Parameter structs of the CUDA 13 entry points whose callback ids CUPTI has but whose
 * structs its generated headers lack: the arguments in order. */
typedef struct {
    void *fatCubin;
} __cudaRegisterFatBinary_v13000_params;
typedef struct {
    void **fatCubinHandle;
} __cudaRegisterFatBinaryEnd_v13000_params;
typedef struct {
    void **fatCubinHandle;
} __cudaUnregisterFatBinary_v13000_params;
typedef struct {
    void **fatCubinHandle;
    const char *hostFun;
    char *deviceFun;
    const char *deviceName;
    int thread_limit;
    uint3 *tid, *bid;
    dim3 *bDim, *gDim;
    int *wSize;
} __cudaRegisterFunction_v13000_params;
typedef struct {
    void **fatCubinHandle;
    char *hostVar;
    char *deviceAddress;
    const char *deviceName;
    int ext;
    size_t size;
    int constant, global;
} __cudaRegisterVar_v13000_params;
typedef struct {
    void **fatCubinHandle;
    void **hostVarPtrAddress;
    char *deviceAddress;
    const char *deviceName;
    int ext;
    size_t size;
    int constant, global;
} __cudaRegisterManagedVar_v13000_params;
typedef struct {
    void **fatCubinHandle;
} __cudaInitModule_v13000_params;
typedef struct {
    dim3 gridDim, blockDim;
    size_t sharedMem;
    struct CUstream_st *stream;
} __cudaPushCallConfiguration_v13000_params;
typedef struct {
    dim3 *gridDim, *blockDim;
    size_t *sharedMem;
    void *stream;
} __cudaPopCallConfiguration_v13000_params;
typedef struct {
    cudaKernel_t *kernel;
    const void *func;
} __cudaGetKernel_v13000_params;
typedef struct {
    cudaKernel_t kernel;
    dim3 gridDim, blockDim;
    void **args;
    size_t sharedMem;
    cudaStream_t stream;
} __cudaLaunchKernel_v13000_params;
typedef __cudaLaunchKernel_v13000_params __cudaLaunchKernel_ptsz_v13000_params;
/* cudaOccupancyMaxActiveBlocksPerMultiprocessor keeps its 6.0 callback id */
typedef cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6050_params
    cudaOccupancyMaxActiveBlocksPerMultiprocessor_v6000_params;

/* Declared by crt/ headers only when compiling CUDA C++. */
void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void **fatCubinHandle);
void CUDARTAPI __cudaUnregisterFatBinary(void **fatCubinHandle);
void CUDARTAPI __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                                      const char *deviceName, int thread_limit, uint3 *tid,
                                      uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void CUDARTAPI __cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress,
                                 const char *deviceName, int ext, size_t size, int constant,
                                 int global);
void CUDARTAPI __cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress,
                                        char *deviceAddress, const char *deviceName, int ext,
                                        size_t size, int constant, int global);
char CUDARTAPI __cudaInitModule(void **fatCubinHandle);
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                                               struct CUstream_st *stream);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem,
                                                 void *stream);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t CUDARTAPI __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                         void **args, size_t sharedMem, cudaStream_t stream);
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim,
                                              void **args, size_t sharedMem, cudaStream_t stream);

#define SHMEM_RESERVED_PER_BLOCK 1024
#define SHMEM_GRANULE 128

void
rt_kernel_lookup(const void *func, const char **name, uint64_t *dur)
{
    struct simgpu_kernel *k = simgpu_kernel_resolve(func);
    if (!k && simgpu_kernel_stale(func))
        return; /* an unloaded kernel gets no name: its launch fails */
    if (!k)
        simgpu_kernel_lookup(func, NULL, name, dur);
    else if (k->stub)
        /* by the stub: a job's simgpu_register_kernel(stub, ...) keeps its name and time */
        simgpu_kernel_lookup(k->stub, k->name, name, dur);
    else
        simgpu_kernel_lookup(k, k->name, name, dur);
}

/* ---- registration ------------------------------------------------------------------ */
void **CUDARTAPI
__cudaRegisterFatBinary(void *fatCubin)
{
    struct simgpu_module *m = NULL;
    cudaError_t rc;
    simgpu_init();
    RT_ENTER(__cudaRegisterFatBinary, v13000, fatCubin);
    rc = simgpu_module_load(fatCubin, 0, 1, &m);
    if (rc != cudaSuccess)
        fprintf(stderr, "simgpu: __cudaRegisterFatBinary: %s\n", cudaGetErrorString(rc));
    rt_exit(&api__, rc);
    /* the handle the host code passes back; NULL makes every later call fail */
    return (void **)m;
}

void CUDARTAPI
__cudaRegisterFatBinaryEnd(void **fatCubinHandle)
{
    RT_ENTER(__cudaRegisterFatBinaryEnd, v13000, fatCubinHandle);
    rt_exit(&api__,
            simgpu_module_lookup(fatCubinHandle) ? cudaSuccess : cudaErrorInvalidResourceHandle);
}

void CUDARTAPI
__cudaUnregisterFatBinary(void **fatCubinHandle)
{
    struct simgpu_module *m;
    RT_ENTER(__cudaUnregisterFatBinary, v13000, fatCubinHandle);
    m = simgpu_module_lookup(fatCubinHandle);
    rt_exit(&api__, m ? simgpu_module_unload(m) : cudaErrorInvalidResourceHandle);
}

void CUDARTAPI
__cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
                       const char *deviceName, int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim,
                       dim3 *gDim, int *wSize)
{
    struct simgpu_module *m;
    const char *name = deviceName ? deviceName : deviceFun;
    cudaError_t rc;
    RT_ENTER(__cudaRegisterFunction, v13000, fatCubinHandle, hostFun, deviceFun, deviceName,
             thread_limit, tid, bid, bDim, gDim, wSize);
    m = simgpu_module_lookup(fatCubinHandle);
    if (!m)
        rc = cudaErrorInvalidResourceHandle;
    else if (!hostFun || !name)
        rc = cudaErrorInvalidValue;
    else
        rc = simgpu_module_register_function(m, hostFun, name);
    if (rc != cudaSuccess)
        fprintf(stderr, "simgpu: __cudaRegisterFunction(%s): %s\n", name ? name : "(null)",
                cudaGetErrorString(rc));
    rt_exit(&api__, rc);
}

void CUDARTAPI
__cudaRegisterVar(void **fatCubinHandle, char *hostVar, char *deviceAddress, const char *deviceName,
                  int ext, size_t size, int constant, int global)
{
    cudaError_t rc;
    RT_ENTER(__cudaRegisterVar, v13000, fatCubinHandle, hostVar, deviceAddress, deviceName, ext,
             size, constant, global);
    if (!simgpu_module_lookup(fatCubinHandle))
        rc = cudaErrorInvalidResourceHandle;
    else if (!hostVar)
        rc = cudaErrorInvalidValue;
    else
        rc = rt_symbol_add(hostVar, deviceName ? deviceName : deviceAddress, size, NULL);
    rt_exit(&api__, rc);
}

void CUDARTAPI
__cudaRegisterManagedVar(void **fatCubinHandle, void **hostVarPtrAddress, char *deviceAddress,
                         const char *deviceName, int ext, size_t size, int constant, int global)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(__cudaRegisterManagedVar, v13000, fatCubinHandle, hostVarPtrAddress, deviceAddress,
             deviceName, ext, size, constant, global);
    if (!simgpu_module_lookup(fatCubinHandle))
        rc = cudaErrorInvalidResourceHandle;
    else if (!hostVarPtrAddress)
        rc = cudaErrorInvalidValue;
    else if (!(*hostVarPtrAddress = calloc(1, size ? size : 1)))
        rc = cudaErrorMemoryAllocation;
    else /* host code names the variable by the memory itself (*hostVarPtrAddress) */
        rc = rt_symbol_add(*hostVarPtrAddress, deviceName, size, *hostVarPtrAddress);
    /* host code reaches the variable through *hostVarPtrAddress: zeroed memory (the
     * image's initial value is not read) */
    rt_exit(&api__, rc);
}

char CUDARTAPI
__cudaInitModule(void **fatCubinHandle)
{
    int ok;
    RT_ENTER(__cudaInitModule, v13000, fatCubinHandle);
    ok = simgpu_module_lookup(fatCubinHandle) != NULL;
    rt_exit(&api__, ok ? cudaSuccess : cudaErrorInvalidResourceHandle);
    return (char)ok;
}

/* ---- <<<>>> ------------------------------------------------------------------------- */
#define CONFIG_STACK 16
struct call_config {
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
};
static __thread struct call_config t_configs[CONFIG_STACK];
static __thread int t_nconfigs;

unsigned CUDARTAPI
__cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem,
                            struct CUstream_st *stream)
{
    cudaError_t rc = cudaSuccess;
    RT_ENTER(__cudaPushCallConfiguration, v13000, gridDim, blockDim, sharedMem, stream);
    if (t_nconfigs >= CONFIG_STACK) {
        rc = cudaErrorInvalidConfiguration;
    } else {
        struct call_config *c = &t_configs[t_nconfigs++];
        c->grid = gridDim;
        c->block = blockDim;
        c->shmem = sharedMem;
        c->stream = stream;
    }
    rt_exit(&api__, rc);
    return rc == cudaSuccess ? 0 : 1;
}

cudaError_t CUDARTAPI
__cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream)
{
    const struct call_config *c;
    RT_ENTER(__cudaPopCallConfiguration, v13000, gridDim, blockDim, sharedMem, stream);
    if (t_nconfigs <= 0)
        RT_EXIT(cudaErrorMissingConfiguration);
    if (!gridDim || !blockDim || !sharedMem || !stream)
        RT_EXIT(cudaErrorInvalidValue);
    c = &t_configs[--t_nconfigs];
    *gridDim = c->grid;
    *blockDim = c->block;
    *sharedMem = c->shmem;
    *(cudaStream_t *)stream = c->stream;
    RT_EXIT(cudaSuccess);
}

static cudaError_t
get_kernel_impl(cudaKernel_t *kernel, const void *func)
{
    struct simgpu_kernel *k;
    if (!kernel || !func)
        return cudaErrorInvalidValue;
    k = simgpu_kernel_resolve(func);
    if (!k)
        return cudaErrorInvalidDeviceFunction;
    *kernel = (cudaKernel_t)k;
    return cudaSuccess;
}

cudaError_t CUDARTAPI
__cudaGetKernel(cudaKernel_t *kernel, const void *func)
{
    simgpu_init();
    RT_ENTER(__cudaGetKernel, v13000, kernel, func);
    RT_EXIT(get_kernel_impl(kernel, func));
}

cudaError_t CUDARTAPI
cudaGetKernel(cudaKernel_t *kernelPtr, const void *entryFuncAddr)
{
    simgpu_init();
    RT_ENTER(cudaGetKernel, v12000, kernelPtr, entryFuncAddr);
    RT_EXIT(get_kernel_impl(kernelPtr, entryFuncAddr));
}

cudaError_t
rt_kernel_fits(const void *func, dim3 block, size_t shmem)
{
    struct simgpu_kernel *k = func ? simgpu_kernel_resolve(func) : NULL;
    struct simgpu_kernel_info info;
    if (!k)
        return simgpu_kernel_stale(func) ? cudaErrorInvalidResourceHandle : cudaSuccess;
    simgpu_kernel_info(k, &info);
    if ((uint64_t)block.x * block.y * block.z > (uint64_t)info.max_threads)
        return cudaErrorLaunchOutOfResources;
    if (shmem > (size_t)simgpu_kernel_max_dyn_shmem(k, &info))
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

static cudaError_t
klaunch_impl(struct simgpu_kernel *k, const char *name, uint64_t dur, dim3 grid, dim3 block,
             size_t shmem, cudaStream_t stream, int ptds, void **args)
{
    if (!k)
        return cudaErrorInvalidResourceHandle;
    return rt_launch(k, name, dur, grid, block, shmem, stream, ptds, args);
}

cudaError_t CUDARTAPI
__cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                   cudaStream_t stream)
{
    struct simgpu_kernel *k;
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    k = simgpu_kernel_handle(kernel);
    if (k)
        rt_kernel_lookup(k, &name, &dur);
    RT_ENTER_SYM(__cudaLaunchKernel, v13000, name, kernel, gridDim, blockDim, args, sharedMem,
                 stream);
    RT_EXIT(klaunch_impl(k, name, dur, gridDim, blockDim, sharedMem, stream, 0, args));
}

cudaError_t CUDARTAPI
__cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args,
                        size_t sharedMem, cudaStream_t stream)
{
    struct simgpu_kernel *k;
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    k = simgpu_kernel_handle(kernel);
    if (k)
        rt_kernel_lookup(k, &name, &dur);
    RT_ENTER_SYM(__cudaLaunchKernel_ptsz, v13000, name, kernel, gridDim, blockDim, args, sharedMem,
                 stream);
    RT_EXIT(klaunch_impl(k, name, dur, gridDim, blockDim, sharedMem, stream, 1, args));
}

/* ---- libraries ---------------------------------------------------------------------- */
cudaError_t CUDARTAPI
cudaLibraryLoadData(cudaLibrary_t *library, const void *code, enum cudaJitOption *jitOptions,
                    void **jitOptionsValues, unsigned int numJitOptions,
                    enum cudaLibraryOption *libraryOptions, void **libraryOptionValues,
                    unsigned int numLibraryOptions)
{
    struct simgpu_module *m;
    cudaError_t rc;
    simgpu_init();
    RT_ENTER(cudaLibraryLoadData, v12060, library, code, jitOptions, jitOptionsValues,
             numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
    if (!library || !code)
        RT_EXIT(cudaErrorInvalidValue);
    /* JIT and library options change nothing of what a simulated device does */
    rc = simgpu_module_load(code, 0, 0, &m);
    if (rc == cudaSuccess)
        *library = (cudaLibrary_t)m;
    RT_EXIT(rc);
}

/* Reads a whole file into memory (NULL when it cannot). */
static void *
read_file(const char *path, size_t *bytes)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n + 1)) != NULL) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
            free(buf);
            buf = NULL;
        } else {
            buf[n] = '\0'; /* PTX text is read as a string */
            *bytes = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

cudaError_t CUDARTAPI
cudaLibraryLoadFromFile(cudaLibrary_t *library, const char *fileName,
                        enum cudaJitOption *jitOptions, void **jitOptionsValues,
                        unsigned int numJitOptions, enum cudaLibraryOption *libraryOptions,
                        void **libraryOptionValues, unsigned int numLibraryOptions)
{
    struct simgpu_module *m;
    cudaError_t rc;
    size_t bytes = 0;
    void *code;
    simgpu_init();
    RT_ENTER(cudaLibraryLoadFromFile, v12060, library, fileName, jitOptions, jitOptionsValues,
             numJitOptions, libraryOptions, libraryOptionValues, numLibraryOptions);
    if (!library || !fileName)
        RT_EXIT(cudaErrorInvalidValue);
    code = read_file(fileName, &bytes);
    if (!code)
        RT_EXIT(cudaErrorFileNotFound);
    rc = simgpu_module_load(code, bytes, 0, &m);
    free(code);
    if (rc == cudaSuccess)
        *library = (cudaLibrary_t)m;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaLibraryUnload(cudaLibrary_t library)
{
    struct simgpu_module *m;
    RT_ENTER(cudaLibraryUnload, v12060, library);
    m = simgpu_module_lookup(library);
    RT_EXIT(m ? simgpu_module_unload(m) : cudaErrorInvalidResourceHandle);
}

cudaError_t CUDARTAPI
cudaLibraryGetKernel(cudaKernel_t *pKernel, cudaLibrary_t library, const char *name)
{
    struct simgpu_module *m;
    struct simgpu_kernel *k;
    cudaError_t rc;
    RT_ENTER(cudaLibraryGetKernel, v12060, pKernel, library, name);
    if (!pKernel || !name)
        RT_EXIT(cudaErrorInvalidValue);
    m = simgpu_module_lookup(library);
    if (!m)
        RT_EXIT(cudaErrorInvalidResourceHandle);
    rc = simgpu_module_kernel(m, name, &k);
    if (rc == cudaSuccess)
        *pKernel = (cudaKernel_t)k;
    RT_EXIT(rc);
}

cudaError_t CUDARTAPI
cudaLibraryGetKernelCount(unsigned int *count, cudaLibrary_t lib)
{
    struct simgpu_module *m;
    RT_ENTER(cudaLibraryGetKernelCount, v12060, count, lib);
    if (!count)
        RT_EXIT(cudaErrorInvalidValue);
    m = simgpu_module_lookup(lib);
    if (!m)
        RT_EXIT(cudaErrorInvalidResourceHandle);
    *count = (unsigned)simgpu_module_kernel_count(m);
    RT_EXIT(cudaSuccess);
}

cudaError_t CUDARTAPI
cudaLibraryEnumerateKernels(cudaKernel_t *kernels, unsigned int numKernels, cudaLibrary_t lib)
{
    struct simgpu_module *m;
    RT_ENTER(cudaLibraryEnumerateKernels, v12060, kernels, numKernels, lib);
    if (!kernels)
        RT_EXIT(cudaErrorInvalidValue);
    m = simgpu_module_lookup(lib);
    if (!m)
        RT_EXIT(cudaErrorInvalidResourceHandle);
    for (unsigned i = 0; i < numKernels; i++)
        kernels[i] = (cudaKernel_t)simgpu_module_kernel_at(m, (int)i);
    RT_EXIT(cudaSuccess);
}

/* ---- attributes and occupancy --------------------------------------------------------- */

/* The kernel a runtime call names, with its figures; NULL when func is no kernel. */
static struct simgpu_kernel *
kernel_with_info(const void *func, struct simgpu_kernel_info *info)
{
    struct simgpu_kernel *k = func ? simgpu_kernel_resolve(func) : NULL;
    if (k)
        simgpu_kernel_info(k, info);
    return k;
}

static cudaError_t
func_attrs_impl(struct cudaFuncAttributes *attr, const void *func)
{
    struct simgpu_kernel *k;
    if (!attr)
        return cudaErrorInvalidValue;
    k = func ? simgpu_kernel_resolve(func) : NULL;
    if (!k)
        return cudaErrorInvalidDeviceFunction;
    simgpu_kernel_attrs(k, attr);
    return cudaSuccess;
}

cudaError_t CUDARTAPI
cudaFuncGetAttributes(struct cudaFuncAttributes *attr, const void *func)
{
    RT_ENTER(cudaFuncGetAttributes, v3020, attr, func);
    RT_EXIT(func_attrs_impl(attr, func));
}

static cudaError_t
set_attr_impl(struct simgpu_kernel *k, enum cudaFuncAttribute attr, int value)
{
    struct cudaDeviceProp p;
    struct simgpu_kernel_info info;
    if (!k)
        return cudaErrorInvalidDeviceFunction;
    simgpu_kernel_info(k, &info);
    simgpu_device_props(&p, simgpu_current_device());
    switch (attr) {
    case cudaFuncAttributeMaxDynamicSharedMemorySize:
        if (value < 0 || (size_t)value + (size_t)info.shared_bytes > p.sharedMemPerBlockOptin)
            return cudaErrorInvalidValue;
        k->max_dyn_shmem = value;
        return cudaSuccess;
    case cudaFuncAttributePreferredSharedMemoryCarveout:
        if (value < -1 || value > 100)
            return cudaErrorInvalidValue;
        k->carveout = value;
        return cudaSuccess;
    case cudaFuncAttributeNonPortableClusterSizeAllowed:
        if (value != 0 && value != 1)
            return cudaErrorInvalidValue;
        k->nonportable_cluster = value;
        return cudaSuccess;
    case cudaFuncAttributeClusterSchedulingPolicyPreference:
        if (value < 0 || value > 2)
            return cudaErrorInvalidValue;
        k->cluster_pref = value;
        return cudaSuccess;
    case cudaFuncAttributeRequiredClusterWidth:
    case cudaFuncAttributeRequiredClusterHeight:
    case cudaFuncAttributeRequiredClusterDepth:
    case cudaFuncAttributeClusterDimMustBeSet:
        simgpu_say_unsupported("cudaFuncSetAttribute(cluster dimensions)");
        return cudaErrorNotSupported;
    default:
        return cudaErrorInvalidValue;
    }
}

cudaError_t CUDARTAPI
cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    RT_ENTER(cudaFuncSetAttribute, v9000, func, attr, value);
    RT_EXIT(set_attr_impl(func ? simgpu_kernel_resolve(func) : NULL, attr, value));
}

cudaError_t CUDARTAPI
cudaKernelSetAttributeForDevice(cudaKernel_t kernel, enum cudaFuncAttribute attr, int value,
                                int device)
{
    RT_ENTER(cudaKernelSetAttributeForDevice, v12060, kernel, attr, value, device);
    if (device < 0 || device >= simgpu_cfg.device_count)
        RT_EXIT(cudaErrorInvalidDevice);
    /* one setting for every device: the simulated devices are identical */
    RT_EXIT(set_attr_impl(simgpu_kernel_handle(kernel), attr, value));
}

cudaError_t CUDARTAPI
cudaFuncSetCacheConfig(const void *func, enum cudaFuncCache cacheConfig)
{
    struct simgpu_kernel *k;
    RT_ENTER(cudaFuncSetCacheConfig, v3020, func, cacheConfig);
    k = func ? simgpu_kernel_resolve(func) : NULL;
    if (!k)
        RT_EXIT(cudaErrorInvalidDeviceFunction);
    if ((int)cacheConfig < (int)cudaFuncCachePreferNone ||
        (int)cacheConfig > (int)cudaFuncCachePreferEqual)
        RT_EXIT(cudaErrorInvalidValue);
    k->cache_config = (int)cacheConfig;
    RT_EXIT(cudaSuccess);
}

static cudaError_t
occupancy_impl(int *numBlocks, const void *func, int blockSize, size_t dyn, unsigned flags)
{
    struct simgpu_kernel_info info;
    if (!numBlocks || blockSize <= 0 ||
        (flags != cudaOccupancyDefault && flags != cudaOccupancyDisableCachingOverride))
        return cudaErrorInvalidValue;
    if (!kernel_with_info(func, &info))
        return cudaErrorInvalidDeviceFunction;
    *numBlocks = simgpu_kernel_occupancy(&info, blockSize, dyn);
    return cudaSuccess;
}

cudaError_t
rt_occupancy(int *numBlocks, const void *func, int blockSize, size_t dyn)
{
    return occupancy_impl(numBlocks, func, blockSize, dyn, 0);
}

cudaError_t CUDARTAPI
cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, const void *func, int blockSize,
                                              size_t dynamicSMemSize)
{
    RT_ENTER(cudaOccupancyMaxActiveBlocksPerMultiprocessor, v6000, numBlocks, func, blockSize,
             dynamicSMemSize);
    RT_EXIT(occupancy_impl(numBlocks, func, blockSize, dynamicSMemSize, 0));
}

cudaError_t CUDARTAPI
cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, const void *func,
                                                       int blockSize, size_t dynamicSMemSize,
                                                       unsigned int flags)
{
    RT_ENTER(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, v7000, numBlocks, func,
             blockSize, dynamicSMemSize, flags);
    RT_EXIT(occupancy_impl(numBlocks, func, blockSize, dynamicSMemSize, flags));
}

static cudaError_t
avail_smem_impl(size_t *dyn, const void *func, int numBlocks, int blockSize)
{
    struct simgpu_kernel_info info;
    struct simgpu_kernel *k;
    struct cudaDeviceProp p;
    size_t per_block, lim;
    if (!dyn || numBlocks <= 0 || blockSize <= 0)
        return cudaErrorInvalidValue;
    k = kernel_with_info(func, &info);
    if (!k)
        return cudaErrorInvalidDeviceFunction;
    *dyn = 0;
    if (simgpu_kernel_occupancy(&info, blockSize, 0) < numBlocks)
        return cudaSuccess; /* not even without dynamic shared memory */
    simgpu_device_props(&p, simgpu_current_device());
    per_block = p.sharedMemPerMultiprocessor / (size_t)numBlocks / SHMEM_GRANULE * SHMEM_GRANULE;
    if (per_block > SHMEM_RESERVED_PER_BLOCK + (size_t)info.shared_bytes)
        *dyn = per_block - SHMEM_RESERVED_PER_BLOCK - (size_t)info.shared_bytes;
    lim = (size_t)simgpu_kernel_max_dyn_shmem(k, &info);
    if (*dyn > lim)
        *dyn = lim;
    return cudaSuccess;
}

cudaError_t CUDARTAPI
cudaOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, const void *func, int numBlocks,
                                          int blockSize)
{
    RT_ENTER(cudaOccupancyAvailableDynamicSMemPerBlock, v10200, dynamicSmemSize, func, numBlocks,
             blockSize);
    RT_EXIT(avail_smem_impl(dynamicSmemSize, func, numBlocks, blockSize));
}
