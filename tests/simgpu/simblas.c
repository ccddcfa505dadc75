/* simblas.c: a BLAS operation of the cuBLAS / cuBLASLt stand-ins as a kernel on the
 * simulated device (see simblas.h).  Its time is the device's: the work (FLOPs at the
 * dtype's peak, bytes of device memory) goes to the physics in force through
 * simgpu_set_next_launch_work, and the kernel is launched through the runtime, so that
 * CUPTI, the collector and graph capture see it as any other launch.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simblas.h"
#include "simgpu_internal.h"

#define MAX_NAMES 1024

/* One byte per kernel name: its address is the host-stub key of the kernel registry. */
static const unsigned char g_stub[MAX_NAMES];
static char *g_names[MAX_NAMES];
static int g_nnames;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

#define MAX_SAID 512
static const char *g_said[MAX_SAID];
static int g_nsaid;

size_t
simblas_type_size(cudaDataType t)
{
    size_t rc;
    switch (t) {
    case CUDA_R_8I:
    case CUDA_R_8U:
    case CUDA_R_8F_E4M3:
    case CUDA_R_8F_E5M2:
        rc = 1;
        break;
    case CUDA_R_16F:
    case CUDA_R_16BF:
        rc = 2;
        break;
    case CUDA_R_32F:
    case CUDA_R_32I:
    case CUDA_C_16F:
    case CUDA_C_16BF:
        rc = 4;
        break;
    case CUDA_R_64F:
    case CUDA_C_32F:
        rc = 8;
        break;
    case CUDA_C_64F:
        rc = 16;
        break;
    default:
        rc = 0;
        break;
    }
    return rc;
}

static int
is_complex(cudaDataType t)
{
    return t == CUDA_C_16F || t == CUDA_C_16BF || t == CUDA_C_32F || t == CUDA_C_64F;
}

/* A short type name as cuBLAS kernel names spell it. */
static const char *
type_tag(cudaDataType t)
{
    switch (t) {
    case CUDA_R_16F:
        return "f16";
    case CUDA_R_16BF:
        return "bf16";
    case CUDA_R_32F:
        return "f32";
    case CUDA_R_64F:
        return "f64";
    case CUDA_C_32F:
        return "c32";
    case CUDA_C_64F:
        return "c64";
    case CUDA_R_8F_E4M3:
        return "e4m3";
    case CUDA_R_8F_E5M2:
        return "e5m2";
    case CUDA_R_8I:
        return "i8";
    case CUDA_R_32I:
        return "i32";
    default:
        return "x";
    }
}

int
simblas_sm_count(void)
{
    struct cudaDeviceProp p;
    simgpu_init();
    simgpu_device_props(&p, simgpu_current_device());
    return p.multiProcessorCount > 0 ? p.multiProcessorCount : 1;
}

static int
cc_major(void)
{
    struct cudaDeviceProp p;
    simgpu_init();
    simgpu_device_props(&p, simgpu_current_device());
    return p.major;
}

/* The registry key of kernel `name` (registered on first use); NULL when the table is
 * full. */
static const void *
stub_of(const char *name)
{
    const void *rc = NULL;
    int i;
    pthread_mutex_lock(&g_mu);
    for (i = 0; i < g_nnames; i++)
        if (strcmp(g_names[i], name) == 0) {
            rc = &g_stub[i];
            break;
        }
    if (!rc && g_nnames < MAX_NAMES) {
        char *copy = strdup(name);
        if (copy && simgpu_register_kernel(&g_stub[g_nnames], copy, 0) == 0) {
            g_names[g_nnames] = copy;
            rc = &g_stub[g_nnames++];
        } else {
            free(copy);
        }
    }
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* The kernel name cuBLAS would launch for op on an architecture of compute capability
 * `major` (the patterns of cuBLAS 12/13 kernels in profiles: sm90_xmma_gemm_* on Hopper,
 * ampere_* on Ampere; gemv2N/gemv2T_kernel, geam_kernel, axpy/dot/scal kernels). */
static void
kernel_name(char *buf, size_t len, const struct simblas_op *op, int major, int tm, int tn)
{
    const char *a = type_tag(op->a), *c = type_tag(op->c);
    const char *fam = op->family ? op->family : "gemm";
    if (op->level == 3 && strcmp(fam, "gemm") == 0) {
        if (major >= 9)
            snprintf(buf, len,
                     "sm90_xmma_gemm_%s%s_%sf32_f32_%c%c_n_tilesize%dx%dx%d_warpgroupsize1x1x1_"
                     "execute_segment_k_off_kernel__5x_cublas",
                     op->tensor && op->a == CUDA_R_32F ? "tf32" : a,
                     op->tensor && op->b == CUDA_R_32F ? "tf32" : type_tag(op->b), c, op->ta,
                     op->tb, tm, tn, op->tensor ? 64 : 8);
        else if (op->tensor && (op->a == CUDA_R_16F || op->a == CUDA_R_16BF))
            snprintf(buf, len, "ampere_%s_s16816gemm_%s_%dx%d_ldg8_f2f_stages_32x5_%c%c",
                     op->a == CUDA_R_16F ? "fp16" : "bf16", op->a == CUDA_R_16F ? "fp16" : "bf16",
                     tm, tn, op->ta, op->tb);
        else if (op->tensor)
            snprintf(buf, len, "ampere_s1688tf32gemm_%dx%d_ldg8_stages_32x3_%c%c", tm, tn, op->ta,
                     op->tb);
        else
            snprintf(buf, len, "ampere_%cgemm_%dx%d_%c%c",
                     op->a == CUDA_R_64F   ? 'd'
                     : op->a == CUDA_C_32F ? 'c'
                     : op->a == CUDA_C_64F ? 'z'
                                           : 's',
                     tm, tn, op->ta, op->tb);
    } else if (op->level == 2) {
        snprintf(buf, len, "gemv2%c_kernel_val<%s, %s, 128, 16, 4, 4>", op->ta == 'n' ? 'N' : 'T',
                 a, c);
    } else {
        snprintf(buf, len, "%s_kernel<%s, %s>", fam, a, c);
    }
}

cudaError_t
simblas_launch(const struct simblas_op *op, cudaStream_t stream)
{
    cudaError_t rc = cudaSuccess;
    struct simgpu_work w;
    char name[256];
    const void *stub;
    double m = (double)op->m, n = (double)op->n, k = (double)op->k, batch = (double)op->batch;
    double sa = (double)simblas_type_size(op->a), sb = (double)simblas_type_size(op->b);
    double sc = (double)simblas_type_size(op->c), flops, bytes, tiles, blocks;
    int tm = 128, tn = 128, major = cc_major();
    dim3 grid = {1, 1, 1}, block = {256, 1, 1};

    if (op->m <= 0 || op->n <= 0 || op->batch <= 0)
        return cudaSuccess;
    if (op->level == 3) {
        flops = 2.0 * m * n * k * batch;
        bytes = (m * k * sa + k * n * sb + m * n * sc * (op->reads_c ? 2 : 1)) * batch;
        if (op->m < 128 || op->n < 128)
            tm = tn = 64;
        tiles = ceil(m / tm) * ceil(n / tn);
        if (major >= 9)
            block.x = 384; /* a producer and two consumer warp groups */
    } else if (op->level == 2) {
        flops = 2.0 * m * n * batch;
        bytes = (m * n * sa + (op->ta == 'n' ? n : m) * sb +
                 (op->ta == 'n' ? m : n) * sc * (op->reads_c ? 2 : 1)) *
                batch;
        tiles = ceil((op->ta == 'n' ? m : n) / 128.0);
        block.x = 128;
    } else {
        flops = 2.0 * m * n * batch;
        bytes = (m * n * sa + m * n * sc * (op->reads_c ? 2 : 1)) * batch;
        tiles = ceil(m * n / 1024.0);
    }
    /* Complex arithmetic: 4 real multiply-adds per complex one.  fp64 runs at half the
     * fp32 rate on these parts (A100 9.7 of 19.5, H100 33.5 of 66.9 TFLOP/s without
     * tensor cores), 8-bit types at twice the fp16 rate: the device knows four dtypes,
     * so their FLOPs are scaled onto fp32 and fp16. */
    if (is_complex(op->a))
        flops *= 4;
    w.kclass = op->level == 3 ? SIMGPU_CLASS_COMPUTE : SIMGPU_CLASS_MEMORY;
    if (op->a == CUDA_R_64F || op->a == CUDA_C_64F) {
        w.dtype = SIMGPU_FP32;
        flops *= 2;
    } else if (op->tensor && (op->a == CUDA_R_16F || op->a == CUDA_C_16F)) {
        w.dtype = SIMGPU_FP16;
    } else if (op->tensor && (op->a == CUDA_R_16BF || op->a == CUDA_C_16BF)) {
        w.dtype = SIMGPU_BF16;
    } else if (op->tensor && sa == 1) {
        w.dtype = SIMGPU_FP16;
        flops /= 2;
    } else if (op->tensor) {
        w.dtype = SIMGPU_TF32;
    } else {
        w.dtype = SIMGPU_FP32;
    }
    w.flops = flops;
    w.bytes = bytes + op->extra_bytes;
    blocks = tiles * batch;
    if (blocks > 2147483647.0)
        blocks = 2147483647.0;
    if (batch <= 65535 && tiles * 65535 < 2147483647.0) {
        grid.x = (unsigned)tiles;
        grid.z = (unsigned)batch;
    } else {
        grid.x = (unsigned)blocks;
    }
    kernel_name(name, sizeof(name), op, major, tm, tn);
    stub = stub_of(name);
    if (!stub)
        stub = stub_of("simblas_kernel");
    if (!stub)
        return cudaErrorMemoryAllocation;
    simgpu_set_next_launch_work(&w);
    rc = cudaLaunchKernel(stub, grid, block, NULL, 0, stream);
    if (rc != cudaSuccess)
        (void)simgpu_take_next_work(&w); /* not left for the thread's next launch */
    return rc;
}

void
simblas_unsupported(const char *lib, const char *fn, const char *status)
{
    int i, said = 0;
    pthread_mutex_lock(&g_mu);
    for (i = 0; i < g_nsaid; i++)
        if (g_said[i] == fn || strcmp(g_said[i], fn) == 0)
            said = 1;
    if (!said && g_nsaid < MAX_SAID)
        g_said[g_nsaid++] = fn;
    pthread_mutex_unlock(&g_mu);
    if (!said)
        fprintf(stderr, "simgpu: %s: %s is not simulated (returns %s)\n", lib, fn, status);
}
