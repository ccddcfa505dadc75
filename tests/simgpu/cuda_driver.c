/* cuda_driver.c: the libcuda.so.1 subset of the simulated device: init, device
 * queries, the primary context, module functions by name, cuLaunchKernel and
 * cuLaunchKernelEx (JIT compilers such as Triton launch there), error strings.
 * CUstream and cudaStream_t are the same handles; CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD have the runtime's values.
 *
 * Contract of every exported cu* function: the CUDA driver documentation.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#include "cuda_driver_api.h"

#define FUNC_MAGIC 0x46554e43U

/* A CUfunction handle: a name, and the registry key launches use. */
struct CUfunc_st {
    uint32_t magic;
    char *name;
    struct CUfunc_st *next;
};

static struct CUfunc_st *g_funcs;
static pthread_mutex_t g_funcs_lock = PTHREAD_MUTEX_INITIALIZER;

/* Declared by cuda.h only in per-thread mode. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                     unsigned int gridDimZ, unsigned int blockDimX,
                                     unsigned int blockDimY, unsigned int blockDimZ,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra);
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                       void **kernelParams, void **extra);
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream);

CUresult CUDAAPI
cuInit(unsigned int Flags)
{
    DRV_ENTER(cuInit, Flags);
    simgpu_init();
    if (Flags)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    simgpu_driver_mark_init();
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuDriverGetVersion(int *driverVersion)
{
    DRV_ENTER(cuDriverGetVersion, driverVersion);
    if (!driverVersion)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    *driverVersion = CUDA_VERSION;
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuDeviceGetCount(int *count)
{
    DRV_ENTER(cuDeviceGetCount, count);
    NEED_INIT();
    if (!count)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    *count = simgpu_cfg.device_count;
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuDeviceGet(CUdevice *device, int ordinal)
{
    DRV_ENTER(cuDeviceGet, device, ordinal);
    NEED_INIT();
    if (!device)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    if (ordinal < 0 || ordinal >= simgpu_cfg.device_count)
        DRV_EXIT(CUDA_ERROR_INVALID_DEVICE);
    *device = ordinal;
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuDeviceGetName(char *name, int len, CUdevice dev)
{
    struct cudaDeviceProp p;
    DRV_ENTER(cuDeviceGetName, name, len, dev);
    NEED_INIT();
    if (!name || len <= 0)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= simgpu_cfg.device_count)
        DRV_EXIT(CUDA_ERROR_INVALID_DEVICE);
    simgpu_device_props(&p, dev);
    snprintf(name, (size_t)len, "%s", p.name);
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    DRV_ENTER(cuDeviceGetAttribute, pi, attrib, dev);
    NEED_INIT();
    if (!pi)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    /* CUdevice_attribute and cudaDeviceAttr share their numbering. */
    DRV_EXIT(cu_result_of(simgpu_device_attr(pi, (enum cudaDeviceAttr)attrib, dev)));
}

static int
ctx_device(CUcontext ctx)
{
    for (int d = 0; d < simgpu_cfg.device_count; d++)
        if (simgpu_context(d) == ctx)
            return d;
    return -1;
}

CUresult CUDAAPI
cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    DRV_ENTER(cuDevicePrimaryCtxRetain, pctx, dev);
    NEED_INIT();
    if (!pctx)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    if (dev < 0 || dev >= simgpu_cfg.device_count)
        DRV_EXIT(CUDA_ERROR_INVALID_DEVICE);
    *pctx = simgpu_context(dev);
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuDevicePrimaryCtxRelease(CUdevice dev)
{
    DRV_ENTER(cuDevicePrimaryCtxRelease_v2, dev);
    NEED_INIT();
    DRV_EXIT(dev < 0 || dev >= simgpu_cfg.device_count ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS);
}

CUresult CUDAAPI
cuCtxGetCurrent(CUcontext *pctx)
{
    DRV_ENTER(cuCtxGetCurrent, pctx);
    NEED_INIT();
    if (!pctx)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    *pctx = simgpu_context(simgpu_current_device());
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuCtxSetCurrent(CUcontext ctx)
{
    int d;
    DRV_ENTER(cuCtxSetCurrent, ctx);
    NEED_INIT();
    if (!ctx)
        DRV_EXIT(CUDA_SUCCESS);
    d = ctx_device(ctx);
    DRV_EXIT(d < 0 ? CUDA_ERROR_INVALID_CONTEXT : cu_result_of(simgpu_set_device(d)));
}

CUresult CUDAAPI
cuCtxGetDevice(CUdevice *device)
{
    DRV_ENTER(cuCtxGetDevice, device);
    NEED_INIT();
    if (!device)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    *device = simgpu_current_device();
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuCtxSynchronize(void)
{
    struct simgpu_api api__;
    simgpu_api_enter(&api__, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize,
                     "cuCtxSynchronize", NULL, NULL);
    NEED_INIT();
    DRV_EXIT(cu_result_of(simgpu_device_sync()));
}

static CUresult
stream_sync_impl(CUstream h, int ptds)
{
    struct simgpu_stream *s;
    cudaError_t rc = simgpu_stream_resolve((cudaStream_t)h, ptds, &s);
    return cu_result_of(rc != cudaSuccess ? rc : simgpu_stream_sync(s));
}

CUresult CUDAAPI
cuStreamSynchronize(CUstream hStream)
{
    DRV_ENTER(cuStreamSynchronize, hStream);
    NEED_INIT();
    DRV_EXIT(stream_sync_impl(hStream, 0));
}

CUresult CUDAAPI
cuStreamSynchronize_ptsz(CUstream hStream)
{
    DRV_ENTER(cuStreamSynchronize_ptsz, hStream);
    NEED_INIT();
    DRV_EXIT(stream_sync_impl(hStream, 1));
}

/* ---- functions and launches ------------------------------------------------------ */
CUresult CUDAAPI
cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    struct CUfunc_st *f;
    DRV_ENTER(cuModuleGetFunction, hfunc, hmod, name);
    NEED_INIT();
    if (!hfunc || !name)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    if (hmod) {
        /* a loaded module: its kernels only */
        struct simgpu_module *m = simgpu_module_lookup(hmod);
        struct simgpu_kernel *k = NULL;
        cudaError_t rc = m ? simgpu_module_kernel(m, name, &k) : cudaErrorInvalidResourceHandle;
        if (rc == cudaSuccess)
            *hfunc = (CUfunction)k;
        DRV_EXIT(cu_result_of(rc));
    }
    /* NULL: the implicit module of JIT kernels (Triton-like launches by name) */
    pthread_mutex_lock(&g_funcs_lock);
    for (f = g_funcs; f && strcmp(f->name, name); f = f->next)
        ;
    if (!f) {
        f = calloc(1, sizeof(*f));
        if (f && !(f->name = strdup(name))) {
            free(f);
            f = NULL;
        }
        if (f) {
            f->magic = FUNC_MAGIC;
            f->next = g_funcs;
            g_funcs = f;
        }
    }
    pthread_mutex_unlock(&g_funcs_lock);
    if (!f)
        DRV_EXIT(CUDA_ERROR_OUT_OF_MEMORY);
    *hfunc = f;
    DRV_EXIT(CUDA_SUCCESS);
}

/* Unloads the module: its functions' handles become invalid (cuFuncGetName answers
 * CUDA_ERROR_INVALID_HANDLE, as for a JIT module a real driver has unloaded). A loaded
 * module (cuModuleLoadData) goes alone; NULL is the implicit module of the functions
 * cuModuleGetFunction made by name. The handles' memory is kept (a stale handle must stay
 * readable for the check). */
CUresult CUDAAPI
cuModuleUnload(CUmodule hmod)
{
    DRV_ENTER(cuModuleUnload, hmod);
    NEED_INIT();
    if (hmod) {
        struct simgpu_module *m = simgpu_module_lookup(hmod);
        DRV_EXIT(m ? cu_result_of(simgpu_module_unload(m)) : CUDA_ERROR_INVALID_HANDLE);
    }
    pthread_mutex_lock(&g_funcs_lock);
    for (struct CUfunc_st *f = g_funcs; f; f = f->next)
        f->magic = 0;
    g_funcs = NULL;
    pthread_mutex_unlock(&g_funcs_lock);
    DRV_EXIT(CUDA_SUCCESS);
}

/* The name of a function handle: a loaded or registered kernel's, or one made by name. */
static const char *
func_name(CUfunction f)
{
    struct simgpu_kernel *k = simgpu_kernel_handle(f);
    if (k)
        return k->name;
    return f && f->magic == FUNC_MAGIC ? f->name : NULL;
}

/* Name and duration of what a launch names (a kernel handle: by its host stub when it has
 * one, so that a job's registration of the stub holds). */
static void
drv_kernel_lookup(CUfunction f, const char **name, uint64_t *dur)
{
    struct simgpu_kernel *k = simgpu_kernel_handle(f);
    if (k)
        simgpu_kernel_lookup(k->stub ? k->stub : (const void *)k, k->name, name, dur);
    else if (!simgpu_kernel_stale(f)) /* an unloaded kernel gets no name: its launch fails */
        simgpu_kernel_lookup(f, func_name(f), name, dur);
}

CUresult CUDAAPI
cuFuncGetName(const char **name, CUfunction hfunc)
{
    DRV_ENTER(cuFuncGetName, name, hfunc);
    NEED_INIT();
    /* SIMGPU_FUNC_NAME_DELAY_MS: a slow name lookup (a real driver's can be), for tests of
     * what waits on it. */
    uint64_t delay = simgpu_env_whole("SIMGPU_FUNC_NAME_DELAY_MS", 0, 1000000, 0);
    if (delay > 0) {
        struct timespec ts = {(time_t)(delay / 1000), (long)(delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!name || !hfunc)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    *name = func_name(hfunc);
    if (!*name && !simgpu_kernel_stale(hfunc))
        *name = simgpu_kernel_name(hfunc);
    DRV_EXIT(*name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE);
}

/* Whether a block fits kernel f (threads per block, dynamic shared memory), as the runtime
 * checks its launches (rt_kernel_fits); any other handle fits. */
static CUresult
kernel_fits(CUfunction f, uint64_t threads, unsigned shmem)
{
    struct simgpu_kernel *k = simgpu_kernel_handle(f);
    struct simgpu_kernel_info info;
    if (!k)
        return simgpu_kernel_stale(f) ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
    simgpu_kernel_info(k, &info);
    if (threads > (uint64_t)info.max_threads)
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    if (shmem > (unsigned)simgpu_kernel_max_dyn_shmem(k, &info))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* The packed arguments of a launch's `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER and
 * CU_LAUNCH_PARAM_BUFFER_SIZE before CU_LAUNCH_PARAM_END) into l; none when a key is
 * unknown or either is missing. */
static void
extra_buffer(void **extra, struct simgpu_launch_args *l)
{
    const void *buf = NULL;
    const size_t *bytes = NULL;
    for (int i = 0; extra && i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            bytes = extra[i + 1];
        else
            return;
    }
    if (buf && bytes) {
        l->buf = buf;
        l->buf_bytes = *bytes;
    }
}

static CUresult
launch_impl(CUfunction f, const char *name, uint64_t dur, unsigned gx, unsigned gy, unsigned gz,
            unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream h, int ptds,
            void **params, void **extra)
{
    struct simgpu_stream *s;
    struct simgpu_op *op;
    struct simgpu_launch_args l = {0};
    cudaError_t rc = simgpu_sticky_error();
    CUresult fit;
    if (!simgpu_driver_is_init())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (rc != cudaSuccess)
        return cu_result_of(rc);
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    fit = kernel_fits(f, (uint64_t)bx * by * bz, shmem);
    if (fit != CUDA_SUCCESS)
        return fit;
    rc = simgpu_stream_resolve((cudaStream_t)h, ptds, &s);
    if (rc != cudaSuccess)
        return cu_result_of(rc);
    op = simgpu_op_new(SIMGPU_OP_KERNEL);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.kernel.name = name;
    op->u.kernel.dur_ns = dur;
    op->u.kernel.grid.x = gx;
    op->u.kernel.grid.y = gy;
    op->u.kernel.grid.z = gz;
    op->u.kernel.block.x = bx;
    op->u.kernel.block.y = by;
    op->u.kernel.block.z = bz;
    op->u.kernel.shmem = shmem;
    op->u.kernel.has_work = simgpu_take_next_work(&op->u.kernel.work);
    l.blocks = (uint64_t)gx * gy * gz;
    l.threads = l.blocks * bx * by * bz;
    l.params = params;
    extra_buffer(extra, &l);
    if (!op->u.kernel.has_work)
        op->u.kernel.has_work = simgpu_named_work(f, name, &l, &op->u.kernel.work);
    simgpu_host_launch(1.0);
    return cu_result_of(simgpu_enqueue(s, op));
}

CUresult CUDAAPI
cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
               unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
               unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (f)
        drv_kernel_lookup(f, &name, &dur);
    DRV_ENTER_SYM(cuLaunchKernel, name, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                  blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
    DRV_EXIT(f ? launch_impl(f, name, dur, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                             blockDimZ, sharedMemBytes, hStream, 0, kernelParams, extra)
               : CUDA_ERROR_INVALID_HANDLE);
}

CUresult CUDAAPI
cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                    unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                    unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                    void **kernelParams, void **extra)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (f)
        drv_kernel_lookup(f, &name, &dur);
    DRV_ENTER_SYM(cuLaunchKernel_ptsz, name, f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                  blockDimZ, sharedMemBytes, hStream, kernelParams, extra);
    DRV_EXIT(f ? launch_impl(f, name, dur, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                             blockDimZ, sharedMemBytes, hStream, 1, kernelParams, extra)
               : CUDA_ERROR_INVALID_HANDLE);
}

/* A cooperative launch is a launch here: like the other driver launches, the grid's
 * residency is not checked. */
CUresult CUDAAPI
cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                          unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                          unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                          void **kernelParams)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (f)
        drv_kernel_lookup(f, &name, &dur);
    DRV_ENTER_SYM(cuLaunchCooperativeKernel, name, f, gridDimX, gridDimY, gridDimZ, blockDimX,
                  blockDimY, blockDimZ, sharedMemBytes, hStream, kernelParams);
    DRV_EXIT(f ? launch_impl(f, name, dur, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY,
                             blockDimZ, sharedMemBytes, hStream, 0, kernelParams, NULL)
               : CUDA_ERROR_INVALID_HANDLE);
}

static CUresult
launch_ex_impl(const CUlaunchConfig *c, CUfunction f, const char *name, uint64_t dur, int ptds,
               void **params, void **extra)
{
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    if (!name)
        return CUDA_ERROR_INVALID_HANDLE;
    return launch_impl(f, name, dur, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                       c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream, ptds, params,
                       extra);
}

CUresult CUDAAPI
cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (f)
        drv_kernel_lookup(f, &name, &dur);
    DRV_ENTER_SYM(cuLaunchKernelEx, name, config, f, kernelParams, extra);
    DRV_EXIT(launch_ex_impl(config, f, name, dur, 0, kernelParams, extra));
}

CUresult CUDAAPI
cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    const char *name = NULL;
    uint64_t dur = 0;
    simgpu_init();
    if (f)
        drv_kernel_lookup(f, &name, &dur);
    DRV_ENTER_SYM(cuLaunchKernelEx_ptsz, name, config, f, kernelParams, extra);
    DRV_EXIT(launch_ex_impl(config, f, name, dur, 1, kernelParams, extra));
}

/* ---- modules and libraries --------------------------------------------------------- */
static CUresult
load_impl(void **out, const void *image, size_t bytes)
{
    struct simgpu_module *m;
    cudaError_t rc;
    if (!out || !image)
        return CUDA_ERROR_INVALID_VALUE;
    rc = simgpu_module_load(image, bytes, 0, &m);
    if (rc == cudaErrorInvalidKernelImage)
        return CUDA_ERROR_INVALID_IMAGE;
    if (rc == cudaSuccess)
        *out = m;
    return cu_result_of(rc);
}

/* Loads the image in file `path`. */
static CUresult
load_file_impl(void **out, const char *path)
{
    FILE *f;
    char *buf = NULL;
    long n = -1;
    CUresult rc;
    if (!out || !path)
        return CUDA_ERROR_INVALID_VALUE;
    f = fopen(path, "rb");
    if (!f)
        return CUDA_ERROR_FILE_NOT_FOUND;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0)
        buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) == (size_t)n) {
        buf[n] = '\0'; /* PTX is read as a string */
        rc = load_impl(out, buf, (size_t)n);
    } else {
        rc = buf ? CUDA_ERROR_FILE_NOT_FOUND : CUDA_ERROR_INVALID_IMAGE;
    }
    free(buf);
    fclose(f);
    return rc;
}

CUresult CUDAAPI
cuModuleLoad(CUmodule *module, const char *fname)
{
    DRV_ENTER(cuModuleLoad, module, fname);
    NEED_INIT();
    DRV_EXIT(load_file_impl((void **)module, fname));
}

CUresult CUDAAPI
cuModuleLoadData(CUmodule *module, const void *image)
{
    DRV_ENTER(cuModuleLoadData, module, image);
    NEED_INIT();
    DRV_EXIT(load_impl((void **)module, image, 0));
}

CUresult CUDAAPI
cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                   CUjit_option *options, void **optionValues)
{
    DRV_ENTER(cuModuleLoadDataEx, module, image, numOptions, options, optionValues);
    NEED_INIT();
    /* JIT options change nothing of what the simulated device does */
    DRV_EXIT(load_impl((void **)module, image, 0));
}

CUresult CUDAAPI
cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    DRV_ENTER(cuModuleLoadFatBinary, module, fatCubin);
    NEED_INIT();
    DRV_EXIT(load_impl((void **)module, fatCubin, 0));
}

CUresult CUDAAPI
cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    struct simgpu_module *m;
    DRV_ENTER(cuModuleGetFunctionCount, count, mod);
    NEED_INIT();
    if (!count)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    m = simgpu_module_lookup(mod);
    if (!m)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    *count = (unsigned)simgpu_module_kernel_count(m);
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                  void **jitOptionsValues, unsigned int numJitOptions,
                  CUlibraryOption *libraryOptions, void **libraryOptionValues,
                  unsigned int numLibraryOptions)
{
    DRV_ENTER(cuLibraryLoadData, library, code, jitOptions, jitOptionsValues, numJitOptions,
              libraryOptions, libraryOptionValues, numLibraryOptions);
    NEED_INIT();
    DRV_EXIT(load_impl((void **)library, code, 0));
}

CUresult CUDAAPI
cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                      void **jitOptionsValues, unsigned int numJitOptions,
                      CUlibraryOption *libraryOptions, void **libraryOptionValues,
                      unsigned int numLibraryOptions)
{
    DRV_ENTER(cuLibraryLoadFromFile, library, fileName, jitOptions, jitOptionsValues, numJitOptions,
              libraryOptions, libraryOptionValues, numLibraryOptions);
    NEED_INIT();
    DRV_EXIT(load_file_impl((void **)library, fileName));
}

CUresult CUDAAPI
cuLibraryUnload(CUlibrary library)
{
    struct simgpu_module *m;
    DRV_ENTER(cuLibraryUnload, library);
    NEED_INIT();
    m = simgpu_module_lookup(library);
    DRV_EXIT(m ? cu_result_of(simgpu_module_unload(m)) : CUDA_ERROR_INVALID_HANDLE);
}

CUresult CUDAAPI
cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    struct simgpu_module *m;
    struct simgpu_kernel *k = NULL;
    cudaError_t rc;
    DRV_ENTER(cuLibraryGetKernel, pKernel, library, name);
    NEED_INIT();
    if (!pKernel || !name)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    m = simgpu_module_lookup(library);
    rc = m ? simgpu_module_kernel(m, name, &k) : cudaErrorInvalidResourceHandle;
    if (rc == cudaSuccess)
        *pKernel = (CUkernel)k;
    DRV_EXIT(rc == cudaErrorSymbolNotFound ? CUDA_ERROR_NOT_FOUND : cu_result_of(rc));
}

CUresult CUDAAPI
cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    struct simgpu_module *m;
    DRV_ENTER(cuLibraryGetKernelCount, count, lib);
    NEED_INIT();
    if (!count)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    m = simgpu_module_lookup(lib);
    if (!m)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    *count = (unsigned)simgpu_module_kernel_count(m);
    DRV_EXIT(CUDA_SUCCESS);
}

/* A library and its module are one object here. */
CUresult CUDAAPI
cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
    struct simgpu_module *m;
    DRV_ENTER(cuLibraryGetModule, pMod, library);
    NEED_INIT();
    if (!pMod)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    m = simgpu_module_lookup(library);
    if (!m)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    *pMod = (CUmodule)m;
    DRV_EXIT(CUDA_SUCCESS);
}

/* A kernel and its function in the current context are one object here. */
CUresult CUDAAPI
cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    struct simgpu_kernel *k;
    DRV_ENTER(cuKernelGetFunction, pFunc, kernel);
    NEED_INIT();
    if (!pFunc)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    k = simgpu_kernel_handle(kernel);
    if (!k)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    *pFunc = (CUfunction)k;
    DRV_EXIT(CUDA_SUCCESS);
}

CUresult CUDAAPI
cuKernelGetName(const char **name, CUkernel hfunc)
{
    struct simgpu_kernel *k;
    DRV_ENTER(cuKernelGetName, name, hfunc);
    NEED_INIT();
    if (!name)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    k = simgpu_kernel_handle(hfunc);
    if (!k)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    *name = k->name;
    DRV_EXIT(CUDA_SUCCESS);
}

/* One CUfunction_attribute of k, from what cudaFuncGetAttributes reports. */
static CUresult
func_attr(int *pi, CUfunction_attribute attrib, struct simgpu_kernel *k)
{
    struct cudaFuncAttributes a;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    simgpu_kernel_attrs(k, &a);
    switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
        *pi = a.maxThreadsPerBlock;
        break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
        *pi = (int)a.sharedSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
        *pi = (int)a.constSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
        *pi = (int)a.localSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
        *pi = a.numRegs;
        break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
        *pi = a.ptxVersion;
        break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
        *pi = a.binaryVersion;
        break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
        *pi = a.cacheModeCA;
        break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        *pi = a.maxDynamicSharedSizeBytes;
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        *pi = a.preferredShmemCarveout;
        break;
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
        *pi = a.nonPortableClusterSizeAllowed;
        break;
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        *pi = a.clusterSchedulingPolicyPreference;
        break;
    default:
        simgpu_say_unsupported("cuFuncGetAttribute(cluster attributes)");
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    DRV_ENTER(cuFuncGetAttribute, pi, attrib, hfunc);
    NEED_INIT();
    DRV_EXIT(func_attr(pi, attrib, simgpu_kernel_handle(hfunc)));
}

CUresult CUDAAPI
cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    DRV_ENTER(cuKernelGetAttribute, pi, attrib, kernel, dev);
    NEED_INIT();
    if (dev < 0 || dev >= simgpu_cfg.device_count)
        DRV_EXIT(CUDA_ERROR_INVALID_DEVICE);
    DRV_EXIT(func_attr(pi, attrib, simgpu_kernel_handle(kernel)));
}

CUresult CUDAAPI
cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    struct simgpu_kernel *k;
    struct cudaDeviceProp p;
    DRV_ENTER(cuFuncSetAttribute, hfunc, attrib, value);
    NEED_INIT();
    k = simgpu_kernel_handle(hfunc);
    if (!k)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    simgpu_device_props(&p, simgpu_current_device());
    if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        struct cudaFuncAttributes a;
        simgpu_kernel_attrs(k, &a);
        if (value < 0 || (size_t)value + a.sharedSizeBytes > p.sharedMemPerBlockOptin)
            DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
        k->max_dyn_shmem = value;
        DRV_EXIT(CUDA_SUCCESS);
    }
    if (attrib == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT) {
        if (value < -1 || value > 100)
            DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
        k->carveout = value;
        DRV_EXIT(CUDA_SUCCESS);
    }
    simgpu_say_unsupported("cuFuncSetAttribute(other than dynamic shared memory, carveout)");
    DRV_EXIT(CUDA_ERROR_NOT_SUPPORTED);
}

CUresult CUDAAPI
cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    struct simgpu_kernel *k;
    DRV_ENTER(cuFuncSetCacheConfig, hfunc, config);
    NEED_INIT();
    k = simgpu_kernel_handle(hfunc);
    if (!k)
        DRV_EXIT(CUDA_ERROR_INVALID_HANDLE);
    if ((int)config < (int)CU_FUNC_CACHE_PREFER_NONE ||
        (int)config > (int)CU_FUNC_CACHE_PREFER_EQUAL)
        DRV_EXIT(CUDA_ERROR_INVALID_VALUE);
    k->cache_config = (int)config;
    DRV_EXIT(CUDA_SUCCESS);
}

static CUresult
occupancy_impl(int *numBlocks, CUfunction func, int blockSize, size_t dyn, unsigned flags)
{
    struct simgpu_kernel *k;
    struct simgpu_kernel_info info;
    if (!numBlocks || blockSize <= 0 ||
        (flags != CU_OCCUPANCY_DEFAULT && flags != CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE))
        return CUDA_ERROR_INVALID_VALUE;
    k = simgpu_kernel_handle(func);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    simgpu_kernel_info(k, &info);
    *numBlocks = simgpu_kernel_occupancy(&info, blockSize, dyn);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI
cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func, int blockSize,
                                            size_t dynamicSMemSize)
{
    DRV_ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessor, numBlocks, func, blockSize,
              dynamicSMemSize);
    NEED_INIT();
    DRV_EXIT(occupancy_impl(numBlocks, func, blockSize, dynamicSMemSize, 0));
}

CUresult CUDAAPI
cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func, int blockSize,
                                                     size_t dynamicSMemSize, unsigned int flags)
{
    DRV_ENTER(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, numBlocks, func, blockSize,
              dynamicSMemSize, flags);
    NEED_INIT();
    DRV_EXIT(occupancy_impl(numBlocks, func, blockSize, dynamicSMemSize, flags));
}

/* ---- errors ------------------------------------------------------------------------ */
struct cu_err {
    CUresult code;
    const char *name, *text;
};

static const struct cu_err g_cu_errs[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
     "too many resources requested for launch"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

CUresult CUDAAPI
cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof(g_cu_errs) / sizeof(g_cu_errs[0]); i++)
        if (g_cu_errs[i].code == error) {
            *pStr = g_cu_errs[i].text;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI
cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof(g_cu_errs) / sizeof(g_cu_errs[0]); i++)
        if (g_cu_errs[i].code == error) {
            *pStr = g_cu_errs[i].name;
            return CUDA_SUCCESS;
        }
    *pStr = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
