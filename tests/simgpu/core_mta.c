/* core_mta.c: the work of torch's multi_tensor_apply kernels (the foreach ops, fused
 * optimizers, clip_grad, FSDP2's foreach copies) from the tensor sizes in their argument.
 *
 * torch 2.15 built for CUDA 13 (aten/src/ATen/native/cuda/MultiTensorApply.cuh, the
 * CUDART_VERSION >= 13000 limits for 32 KiB of kernel arguments) launches
 * multi_tensor_apply_kernel<T, U, ArgTypes...>(T meta, U callable, ArgTypes... args) on
 * <<<blocks, 512>>>, the metadata passed by value as the first argument, T one of
 *
 *   TensorListMetadata<n>                addresses[n][MT], numel_for_tensor[MT] (int64),
 *                                        block_to_tensor[2240] (uint16), block_to_chunk[2240]
 *                                        (int32), start_tensor_this_launch (int32)
 *   TensorListScalarListMetadata<S, n>   addresses[n][MS], numel_for_tensor[MS],
 *                                        scalar_vals[MS] (S), block_to_tensor, block_to_chunk
 *   FusedOptimizerTensorListMetadata<n>  addresses[n][MT], numel_for_tensor[MT],
 *                                        state_steps_addresses[MT], block_to_tensor,
 *                                        block_to_chunk, start_tensor_this_launch
 *
 * with MT = depth_to_max_tensors[n - 1] = {770, 448, 336, 252, 210}, MS =
 * depth_to_max_tensors_scalarlist[n - 1] = {672, 448, 336, 252, 210} (S = c10::complex<double>
 * at depth 1 and 2: 504, 420).  Block b processes chunk block_to_chunk[b] of tensor
 * block_to_tensor[b]: min(kChunkSize, numel - chunk x kChunkSize) elements, kChunkSize 65536
 * (ForeachFunctors.cuh, fused_adam_utils.cuh).  multi_tensor_apply fills the blocks in order:
 * the first block's tensor is 0 (a tensor whose chunks did not fit the last launch moves to
 * slot 0), each next block is the next chunk of the same tensor or chunk 0 of the next. */
#include <stdio.h>
#include <string.h>

#include "simgpu_internal.h"

#define MTA_CHUNK 65536
#define MTA_MAX_BLOCKS 2240
#define MTA_THREAD_ELEMS (65536.0 / 512) /* the upper bound: a full chunk per 512-thread block */

enum mta_kind { MTA_TENSORS, MTA_SCALARS, MTA_FUSED };

/* Where a metadata struct keeps what the device reads, and its size. */
struct mta_layout {
    int depth, max_tensors;
    size_t numel_off, b2t_off, b2c_off, size;
};

/* A scalar type of TensorListScalarListMetadata: its mangled and demangled spellings. */
struct mta_scalar {
    const char *mangled, *demangled;
    size_t bytes;
};

static const struct mta_scalar mta_scalars[] = {
    {"N3c107complexIdEE", "c10::complex<double>", 16},
    {"N3c107complexIfEE", "c10::complex<float>", 8},
    {"f", "float", 4},
    {"d", "double", 8},
    {"l", "long", 8},
    {"x", "long long", 8},
    {"i", "int", 4},
    {"s", "short", 2},
    {"a", "signed char", 1},
    {"h", "unsigned char", 1},
    {"b", "bool", 1},
};

static _Atomic uint64_t g_mta_unknown;

uint64_t
simgpu_mta_unknown_launches(void)
{
    return atomic_load(&g_mta_unknown);
}

static size_t
align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

/* Fills *lay for metadata `kind` of `depth` tensor lists (1-5) whose scalars (kind
 * MTA_SCALARS) are `ssz` bytes, aligned to their size (c10::complex: alignas its size). */
static void
mta_layout_fill(enum mta_kind kind, int depth, size_t ssz, struct mta_layout *lay)
{
    static const int max_tensors[5] = {770, 448, 336, 252, 210};
    static const int max_scalarlist[5] = {672, 448, 336, 252, 210};
    static const int max_complex_double[2] = {504, 420};
    size_t off, mt;
    if (kind != MTA_SCALARS)
        mt = (size_t)max_tensors[depth - 1];
    else if (ssz == 16 && depth <= 2)
        mt = (size_t)max_complex_double[depth - 1];
    else
        mt = (size_t)max_scalarlist[depth - 1];
    lay->depth = depth;
    lay->max_tensors = (int)mt;
    lay->numel_off = (size_t)depth * mt * 8;
    off = lay->numel_off + mt * 8;
    if (kind == MTA_SCALARS)
        off = align_up(off, ssz) + mt * ssz;
    else if (kind == MTA_FUSED)
        off += mt * 8; /* state_steps_addresses */
    lay->b2t_off = align_up(off, 2);
    lay->b2c_off = align_up(lay->b2t_off + 2 * MTA_MAX_BLOCKS, 4);
    off = lay->b2c_off + 4 * MTA_MAX_BLOCKS + (kind == MTA_SCALARS ? 0 : 4);
    lay->size = align_up(off, kind == MTA_SCALARS && ssz > 8 ? ssz : 8);
}

/* The depth after a template's "Li" (mangled) or at p (demangled): 1-5, else 0. */
static int
mta_depth_at(const char *p, int mangled)
{
    if (mangled && strncmp(p, "Li", 2))
        return 0;
    p += mangled ? 2 : 0;
    return (*p >= '1' && *p <= '5' && (p[1] == (mangled ? 'E' : '>'))) ? *p - '0' : 0;
}

/* The scalar type at p of TensorListScalarListMetadata<S, n>: its bytes, and *next just past
 * it; 0 when no row knows it. */
static size_t
mta_scalar_at(const char *p, int mangled, const char **next)
{
    for (size_t i = 0; i < sizeof(mta_scalars) / sizeof(mta_scalars[0]); i++) {
        const char *s = mangled ? mta_scalars[i].mangled : mta_scalars[i].demangled;
        size_t n = strlen(s);
        if (!strncmp(p, s, n) && (mangled || !strncmp(p + n, ", ", 2))) {
            *next = p + n + (mangled ? 0 : 2);
            return mta_scalars[i].bytes;
        }
    }
    return 0;
}

/* The layout of the metadata type kernel `name` (mangled or demangled) takes: 1 and *lay,
 * else 0 (no metadata type of torch 2.15's, or a depth or scalar type it does not use). */
static int
mta_layout_of(const char *name, struct mta_layout *lay)
{
    const char *p, *q = NULL;
    int depth = 0, mangled = 1;
    size_t ssz = 0;
    enum mta_kind kind = MTA_TENSORS;
    if ((p = strstr(name, "32FusedOptimizerTensorListMetadataI")) != NULL) {
        kind = MTA_FUSED;
        depth = mta_depth_at(p + 35, 1);
    } else if ((p = strstr(name, "18TensorListMetadataI")) != NULL) {
        depth = mta_depth_at(p + 21, 1);
    } else if ((p = strstr(name, "28TensorListScalarListMetadataI")) != NULL) {
        kind = MTA_SCALARS;
        ssz = mta_scalar_at(p + 31, 1, &q);
    } else if ((p = strstr(name, "FusedOptimizerTensorListMetadata<")) != NULL) {
        mangled = 0;
        kind = MTA_FUSED;
        depth = mta_depth_at(p + 33, 0);
    } else if ((p = strstr(name, "TensorListMetadata<")) != NULL) {
        mangled = 0;
        depth = mta_depth_at(p + 19, 0);
    } else if ((p = strstr(name, "TensorListScalarListMetadata<")) != NULL) {
        mangled = 0;
        kind = MTA_SCALARS;
        ssz = mta_scalar_at(p + 29, 0, &q);
    }
    if (kind == MTA_SCALARS && ssz)
        depth = mta_depth_at(q, mangled);
    if (depth)
        mta_layout_fill(kind, depth, ssz, lay);
    return depth != 0;
}

/* The metadata the launch passes as its first argument, if it can hold layout `lay`: the
 * packed buffer must hold the metadata and the callable (at least a byte) after it, as must
 * the kernel's parameters where its image gives their size; else NULL. */
static const unsigned char *
mta_meta(const void *func, const struct mta_layout *lay, const struct simgpu_launch_args *l)
{
    struct simgpu_kernel *k = simgpu_kernel_resolve(func);
    struct simgpu_kernel_info info;
    if (k) {
        simgpu_kernel_info(k, &info);
        if (info.from_image && info.param_bytes > 0 && (size_t)info.param_bytes <= lay->size)
            return NULL;
    }
    if (l->buf)
        return l->buf_bytes > lay->size ? l->buf : NULL;
    return l->params && l->params[0] ? l->params[0] : NULL;
}

/* The elements the l->blocks blocks of a launch with metadata `meta` of layout `lay`
 * process, or -1 when the metadata is not what multi_tensor_apply writes (a block count over
 * its limit, a tensor index past its tensors or out of order, a chunk past its tensor). */
static double
mta_elements(const struct mta_layout *lay, const unsigned char *meta, uint64_t blocks)
{
    double elems = 0;
    uint16_t t, pt = 0;
    int32_t c, pc = 0;
    int64_t n;
    if (blocks > MTA_MAX_BLOCKS)
        return -1;
    for (uint64_t b = 0; b < blocks; b++, pt = t, pc = c) {
        memcpy(&t, meta + lay->b2t_off + 2 * b, sizeof(t));
        memcpy(&c, meta + lay->b2c_off + 4 * b, sizeof(c));
        if (t >= lay->max_tensors || c < 0 || (b == 0 && t != 0) ||
            (b > 0 && !(t == pt && c == pc + 1) && !(t == pt + 1 && c == 0)))
            return -1;
        memcpy(&n, meta + lay->numel_off + 8 * (size_t)t, sizeof(n));
        if (n <= (int64_t)c * MTA_CHUNK)
            return -1;
        n -= (int64_t)c * MTA_CHUNK;
        elems += (double)(n < MTA_CHUNK ? n : MTA_CHUNK);
    }
    return elems;
}

/* Accesses per element of `depth` tensor lists: every list read, the updated ones written
 * (Adam's 4: param, m, v of param, grad, m, v; AMSGrad's 5 also max v; otherwise the first):
 * 2 x depth - 1 from depth 4, depth + 1 below. */
static double
mta_accesses(int depth)
{
    return depth >= 4 ? 2.0 * depth - 1 : depth + 1.0;
}

double
simgpu_mta_bytes(const void *func, const char *name, const struct simgpu_launch_args *l, double esz)
{
    struct mta_layout lay;
    const unsigned char *meta;
    double elems = -1;
    int known = mta_layout_of(name, &lay);
    static atomic_int said;
    if (known && (meta = mta_meta(func, &lay, l)) != NULL)
        elems = mta_elements(&lay, meta, l->blocks);
    if (elems < 0) {
        atomic_fetch_add(&g_mta_unknown, 1);
        if (!atomic_exchange(&said, 1))
            fprintf(stderr,
                    "simgpu: a multi_tensor_apply launch without the metadata torch 2.15 lays "
                    "out (%s): timed as full chunks; simgpu_mta_unknown_launches counts them\n",
                    name);
        elems = MTA_THREAD_ELEMS * (double)l->threads;
    }
    return elems * esz * mta_accesses(known ? lay.depth : 2);
}
