/* core_mem.c: the simulated device's memory (allocations, copies) and kernel registry. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>

#include "simgpu_internal.h"

struct simgpu_alloc {
    uintptr_t base;
    size_t bytes;
    int kind; /* CUPTI memory kind */
    int dev;
};

static struct simgpu_alloc *g_allocs;
static size_t g_nallocs, g_cap_allocs;
static __thread int t_next_dur_set;
static __thread uint64_t t_next_dur;

/* ---- memory ------------------------------------------------------------------------------ */
static struct simgpu_alloc *
alloc_find_locked(const void *p, int exact)
{
    uintptr_t a = (uintptr_t)p;
    for (size_t i = 0; i < g_nallocs; i++) {
        struct simgpu_alloc *e = &g_allocs[i];
        if (exact ? a == e->base : (a >= e->base && a < e->base + e->bytes + (e->bytes == 0)))
            return e;
    }
    return NULL;
}

static int
alloc_add_locked(void *p, size_t bytes, int kind)
{
    if (g_nallocs == g_cap_allocs) {
        size_t n = g_cap_allocs ? g_cap_allocs * 2 : 256;
        struct simgpu_alloc *na = realloc(g_allocs, n * sizeof(*na));
        if (!na)
            return -1;
        g_allocs = na;
        g_cap_allocs = n;
    }
    g_allocs[g_nallocs].base = (uintptr_t)p;
    g_allocs[g_nallocs].bytes = bytes;
    g_allocs[g_nallocs].kind = kind;
    g_allocs[g_nallocs].dev = t_dev;
    g_nallocs++;
    return 0;
}

/* Maps lazily backed memory: simulated buffers of gigabytes cost no RAM until
 * something writes to them. */
static void *
map_bytes(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static cudaError_t
alloc_common(void **p, size_t bytes, int kind, struct simgpu_stream *stream)
{
    struct simgpu_device *d;
    void *m;
    simgpu_init();
    if (!p)
        return cudaErrorInvalidValue;
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE && d->mem_in_use + bytes > simgpu_cfg.mem_bytes) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorMemoryAllocation;
    }
    pthread_mutex_unlock(&g_lock);
    m = map_bytes(bytes);
    if (!m)
        return cudaErrorMemoryAllocation;
    pthread_mutex_lock(&g_lock);
    if (alloc_add_locked(m, bytes, kind)) {
        pthread_mutex_unlock(&g_lock);
        munmap(m, bytes ? bytes : 1);
        return cudaErrorMemoryAllocation;
    }
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
        d->mem_in_use += bytes;
        if (d->mem_in_use > d->mem_peak)
            d->mem_peak = d->mem_in_use;
    }
    pthread_mutex_unlock(&g_lock);
    *p = m;
    simgpu_cupti_memory(1, m, bytes, kind, stream);
    return cudaSuccess;
}

static cudaError_t
free_common(void *p, int kind, struct simgpu_stream *stream)
{
    struct simgpu_alloc *e, rec;
    if (!p)
        return cudaSuccess;
    pthread_mutex_lock(&g_lock);
    e = alloc_find_locked(p, 1);
    if (!e || e->kind != kind) {
        pthread_mutex_unlock(&g_lock);
        return cudaErrorInvalidValue;
    }
    rec = *e;
    *e = g_allocs[--g_nallocs];
    if (kind == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE)
        g_dev[rec.dev].mem_in_use -= rec.bytes;
    pthread_mutex_unlock(&g_lock);
    simgpu_cupti_memory(0, p, rec.bytes, kind, stream);
    munmap(p, rec.bytes ? rec.bytes : 1);
    return cudaSuccess;
}

cudaError_t
simgpu_malloc(void **p, size_t bytes, struct simgpu_stream *stream)
{
    return alloc_common(p, bytes, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, stream);
}

cudaError_t
simgpu_free(void *p, struct simgpu_stream *stream)
{
    if (stream) {
        /* cudaFreeAsync: the memory is released when the stream reaches the free;
         * synchronising here is the conservative equivalent. */
        simgpu_stream_sync(stream);
    }
    return free_common(p, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, stream);
}

cudaError_t
simgpu_host_alloc(void **p, size_t bytes)
{
    return alloc_common(p, bytes, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, NULL);
}

cudaError_t
simgpu_host_free(void *p)
{
    return free_common(p, CUPTI_ACTIVITY_MEMORY_KIND_PINNED, NULL);
}

int
simgpu_memory_kind(const void *p)
{
    struct simgpu_alloc *e;
    int kind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    pthread_mutex_lock(&g_lock);
    e = alloc_find_locked(p, 0);
    if (e)
        kind = e->kind;
    pthread_mutex_unlock(&g_lock);
    return kind;
}

int
simgpu_memory_range(const void *p, void **base, size_t *bytes, int *dev)
{
    struct simgpu_alloc *e;
    int kind = -1;
    pthread_mutex_lock(&g_lock);
    e = alloc_find_locked(p, 0);
    if (e) {
        kind = e->kind;
        *base = (void *)e->base;
        *bytes = e->bytes;
        *dev = e->dev;
    }
    pthread_mutex_unlock(&g_lock);
    return kind;
}

void
simgpu_memory_usage(size_t *in_use, size_t *peak)
{
    struct simgpu_device *d;
    simgpu_init();
    pthread_mutex_lock(&g_lock);
    d = device_locked(t_dev);
    *in_use = d->mem_in_use;
    *peak = d->mem_peak;
    pthread_mutex_unlock(&g_lock);
}

struct simgpu_op *
simgpu_memset_op_new(void *dst, uint32_t value, size_t bytes, int word, int async)
{
    struct simgpu_op *op = simgpu_op_new(SIMGPU_OP_MEMSET);
    if (op) {
        op->u.memset.dst = dst;
        op->u.memset.value = value;
        op->u.memset.bytes = bytes;
        op->u.memset.word = word;
        op->u.memset.async = async;
        op->u.memset.cheap = bytes <= SIMGPU_INLINE_MEMSET_BYTES;
    }
    return op;
}

void
simgpu_memset_run(const struct simgpu_op *op)
{
    if (op->u.memset.word) {
        uint32_t *w = op->u.memset.dst;
        for (size_t i = 0; i < op->u.memset.bytes / 4; i++)
            w[i] = op->u.memset.value;
    } else if (op->u.memset.bytes) {
        memset(op->u.memset.dst, (int)(op->u.memset.value & 0xff), op->u.memset.bytes);
    }
}

struct simgpu_op *
simgpu_memcpy_op(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, int async)
{
    struct simgpu_op *op = simgpu_op_new(SIMGPU_OP_MEMCPY);
    int sk = simgpu_memory_kind(src), dk = simgpu_memory_kind(dst);
    int sdev = sk == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
        ddev = dk == CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    if (!op)
        return NULL;
    if (kind == cudaMemcpyHostToDevice) {
        sdev = 0;
        ddev = 1;
    } else if (kind == cudaMemcpyDeviceToHost) {
        sdev = 1;
        ddev = 0;
    } else if (kind == cudaMemcpyDeviceToDevice) {
        sdev = ddev = 1;
    } else if (kind == cudaMemcpyHostToHost) {
        sdev = ddev = 0;
    }
    op->u.memcpy.dst = dst;
    op->u.memcpy.src = src;
    op->u.memcpy.bytes = bytes;
    op->u.memcpy.src_kind = sk;
    op->u.memcpy.dst_kind = dk;
    op->u.memcpy.async = async;
    op->u.memcpy.copy_kind =
        sdev ? (ddev ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOD : CUPTI_ACTIVITY_MEMCPY_KIND_DTOH)
             : (ddev ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD : CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
    return op;
}

/* ---- kernel registry --------------------------------------------------------------------- */
struct kentry {
    const void *func; /* NULL for entries registered by name */
    char *name;
    uint64_t dur_ns;
    int has_dur;
    struct kentry *next;
};

#define KBUCKETS 1024
static struct kentry *g_kby_ptr[KBUCKETS], *g_kby_name[KBUCKETS];
static pthread_mutex_t g_klock = PTHREAD_MUTEX_INITIALIZER;

static unsigned
hash_ptr(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (unsigned)(x % KBUCKETS);
}

static unsigned
hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
    return (unsigned)(h % KBUCKETS);
}

static struct kentry *
kfind_ptr_locked(const void *func)
{
    for (struct kentry *e = g_kby_ptr[hash_ptr(func)]; e; e = e->next)
        if (e->func == func)
            return e;
    return NULL;
}

static struct kentry *
kfind_name_locked(const char *name)
{
    for (struct kentry *e = g_kby_name[hash_str(name)]; e; e = e->next)
        if (!strcmp(e->name, name))
            return e;
    return NULL;
}

static struct kentry *
kadd_ptr_locked(const void *func, const char *name, uint64_t dur, int has_dur)
{
    struct kentry *e = kfind_ptr_locked(func);
    char *n = strdup(name);
    if (!n)
        return NULL;
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e) {
            free(n);
            return NULL;
        }
        e->func = func;
        e->next = g_kby_ptr[hash_ptr(func)];
        g_kby_ptr[hash_ptr(func)] = e;
    }
    /* The old name string is kept: CUPTI records handed out may point at it. */
    e->name = n;
    e->dur_ns = dur;
    e->has_dur = has_dur;
    return e;
}

int
simgpu_register_kernel(const void *func, const char *name, uint64_t duration_ns)
{
    struct kentry *e;
    if (!func || !name)
        return -1;
    pthread_mutex_lock(&g_klock);
    e = kadd_ptr_locked(func, name, duration_ns, 1);
    pthread_mutex_unlock(&g_klock);
    return e ? 0 : -1;
}

void
simgpu_kernel_name_set(const void *func, const char *name)
{
    if (!func || !name)
        return;
    pthread_mutex_lock(&g_klock);
    if (!kfind_ptr_locked(func))
        kadd_ptr_locked(func, name, 0, 0);
    pthread_mutex_unlock(&g_klock);
}

int
simgpu_register_kernel_name(const char *name, uint64_t duration_ns)
{
    struct kentry *e;
    if (!name)
        return -1;
    pthread_mutex_lock(&g_klock);
    e = kfind_name_locked(name);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (e && !(e->name = strdup(name))) {
            free(e);
            e = NULL;
        }
        if (e) {
            e->next = g_kby_name[hash_str(name)];
            g_kby_name[hash_str(name)] = e;
        }
    }
    if (e) {
        e->dur_ns = duration_ns;
        e->has_dur = 1;
    }
    pthread_mutex_unlock(&g_klock);
    return e ? 0 : -1;
}

static __thread struct simgpu_work t_next_work;
static __thread int t_next_work_set;

void
simgpu_set_next_launch_work(const struct simgpu_work *w)
{
    if (w) {
        t_next_work = *w;
        t_next_work_set = 1;
    }
}

int
simgpu_take_next_work(struct simgpu_work *w)
{
    int had = t_next_work_set;
    if (had)
        *w = t_next_work;
    t_next_work_set = 0;
    return had;
}

/* The work of a kernel by its name and launch size (README.md, "Kernels named by their
 * class"): a launch names its class, the grid and block its size; its operands (their count,
 * dtype and lengths) are the kernel's arguments, which the device reads only for torch's
 * multi_tensor_apply kernels (core_mta.c), whose tensor sizes come by value.  Each other rule
 * is an estimate of the traffic a thread moves.
 *
 * Triton (Inductor's names): each thread of a memory-class kernel moves 4 fp32 elements (one
 * 16-byte vector access) three times (two loads, one store): 48 bytes; a template
 * (triton_tem_, Inductor's GEMM) computes 32 outputs per thread over K = 256 at fp32 (2 FLOPs
 * each) and moves the same 48 bytes. */
#define TRITON_BYTES_PER_THREAD 48.0
#define TRITON_TEM_FLOPS_PER_THREAD (2.0 * 32 * 256)

/* torch's eager kernels (at::native, mangled as __cudaRegisterFunction names them, or
 * demangled): elements a thread handles and the accesses per element, by class.  A launch of
 * at most TORCH_TINY_THREADS threads is latency class. */
#define TORCH_TINY_THREADS 256
#define TORCH_ELEMS 4.0         /* unrolled / norm / softmax / index / copy: 4 per thread */
#define TORCH_REDUCE_ELEMS 16.0 /* reduce_kernel: 4-wide vector loads unrolled 4 times */

/* Template argument `i` (0 the first) of the template named by `key`, when it is an integer
 * ("ILi4ELi2E" mangled, "<4, 2" demangled), else dflt. */
static double
tmpl_int(const char *name, const char *key, int i, double dflt)
{
    const char *p = strstr(name, key);
    int mangled;
    if (!p)
        return dflt;
    p += strlen(key);
    mangled = !strncmp(p, "ILi", 3);
    if (!mangled && *p != '<')
        return dflt;
    p += mangled ? 3 : 1;
    for (; i > 0; i--) {
        p += strspn(p, "0123456789");
        if (mangled ? strncmp(p, "ELi", 3) : strncmp(p, ", ", 2))
            return dflt;
        p += mangled ? 3 : 2;
    }
    return (*p >= '1' && *p <= '9') ? strtod(p, NULL) : dflt;
}

/* The element size of the kernel's dtype from its template arguments: c10::Half and
 * c10::BFloat16 2 bytes, double 8, else (float, or no dtype named) 4. */
static double
torch_dtype_bytes(const char *name, int *dtype)
{
    *dtype = SIMGPU_FP32;
    if (strstr(name, "BFloat16")) {
        *dtype = SIMGPU_BF16;
        return 2;
    }
    if (strstr(name, "Half")) {
        *dtype = SIMGPU_FP16;
        return 2;
    }
    return strstr(name, "double") ? 8 : 4;
}

/* The tensors an elementwise kernel reads and writes: N of its std::array<char*, N> of data
 * pointers ("St5arrayIPcLmNEE" mangled), else dflt. */
static double
torch_tensors(const char *name, double dflt)
{
    const char *p = strstr(name, "arrayIPcLm");
    if (p)
        return strtod(p + 10, NULL) > 0 ? strtod(p + 10, NULL) : dflt;
    p = strstr(name, "array<char*, ");
    return p && strtod(p + 13, NULL) > 0 ? strtod(p + 13, NULL) : dflt;
}

static int
has_any(const char *name, const char *const *keys)
{
    for (; *keys; keys++)
        if (strstr(name, *keys))
            return 1;
    return 0;
}

/* Bytes a thread of torch kernel `name` moves, 0 when no rule knows the name. */
static double
torch_thread_bytes(const char *name, double esz)
{
    static const char *const norm[] = {"layer_norm",
                                       "LayerNorm",
                                       "RowwiseMoments",
                                       "GammaBeta",
                                       "batch_norm",
                                       "BatchNorm",
                                       "group_norm",
                                       "GroupNorm",
                                       "rms_norm",
                                       "RMSNorm",
                                       "ComputeInternalGradients",
                                       "SoftMax",
                                       "softmax",
                                       "Softmax",
                                       NULL};
    static const char *const index[] = {"index",     "Index",     "scatter", "gather",
                                        "embedding", "Embedding", NULL};
    double elems = TORCH_ELEMS;
    if (has_any(name, norm)) /* x and dy (or y) read, dx (or y) written */
        return TORCH_ELEMS * esz * 3;
    if (strstr(name, "reduce_kernel")) /* the input read; one output per many inputs */
        return TORCH_REDUCE_ELEMS * esz;
    if (has_any(name, index)) /* an int64 index, the source read, the destination written */
        return TORCH_ELEMS * (8 + 2 * esz);
    if (strstr(name, "chunk_cat") || strstr(name, "split_with_sizes_copy"))
        return 2 * 16; /* FSDP2's copy-in / copy-out: 16-byte vectors read and written */
    if (strstr(name, "CatArrayBatchedCopy") || strstr(name, "transpose"))
        return TORCH_ELEMS * esz * 2;
    if (!strstr(name, "elementwise_kernel"))
        return 0;
    /* elementwise (copy, fill, unary, binary): vectorized_elementwise_kernel<vec> vec elements
     * a thread, elementwise_kernel<threads, items> items, unrolled_ 4; a copy reads one tensor
     * and writes one, others their std::array<char*, N> of N data pointers, else 3 */
    if (strstr(name, "vectorized_elementwise_kernel"))
        elems = tmpl_int(name, "vectorized_elementwise_kernel", 0, TORCH_ELEMS);
    else if (strstr(name, "18elementwise_kernel") || strstr(name, "::elementwise_kernel<"))
        elems = tmpl_int(name, "elementwise_kernel", 1, TORCH_ELEMS);
    return elems * esz * (strstr(name, "copy_kernel") ? 2 : torch_tensors(name, 3));
}

/* The torch rule: 1 and *w for an at::native kernel a rule knows, else 0.  A
 * multi_tensor_apply kernel's bytes are those of its tensors' elements (simgpu_mta_bytes). */
static int
torch_work(const void *func, const char *name, const struct simgpu_launch_args *l,
           struct simgpu_work *w)
{
    double esz, per;
    int mta = strstr(name, "multi_tensor_apply") != NULL;
    if (!strstr(name, "at6native") && !strstr(name, "at::native"))
        return 0;
    esz = torch_dtype_bytes(name, &w->dtype);
    per = mta ? esz : torch_thread_bytes(name, esz);
    if (per <= 0)
        return 0;
    w->kclass = l->threads <= TORCH_TINY_THREADS ? SIMGPU_CLASS_LATENCY : SIMGPU_CLASS_MEMORY;
    if (w->kclass == SIMGPU_CLASS_MEMORY)
        w->bytes = mta ? simgpu_mta_bytes(func, name, l, esz) : per * (double)l->threads;
    return 1;
}

int
simgpu_named_work(const void *func, const char *name, const struct simgpu_launch_args *l,
                  struct simgpu_work *w)
{
    struct kentry *e;
    int registered;
    if (!name)
        return 0;
    pthread_mutex_lock(&g_klock);
    e = kfind_ptr_locked(func);
    registered = e && e->has_dur;
    e = registered ? e : kfind_name_locked(name);
    registered = e && e->has_dur;
    pthread_mutex_unlock(&g_klock);
    if (registered)
        return 0;
    memset(w, 0, sizeof(*w));
    if (strncmp(name, "triton_", 7))
        return torch_work(func, name, l, w);
    w->dtype = SIMGPU_FP32;
    w->bytes = TRITON_BYTES_PER_THREAD * (double)l->threads;
    w->kclass = SIMGPU_CLASS_MEMORY;
    if (!strncmp(name, "triton_tem_", 11)) {
        w->kclass = SIMGPU_CLASS_COMPUTE;
        w->flops = TRITON_TEM_FLOPS_PER_THREAD * (double)l->threads;
    }
    return 1;
}

void
simgpu_set_next_launch_duration(uint64_t duration_ns)
{
    t_next_dur = duration_ns;
    t_next_dur_set = 1;
}

const char *
simgpu_kernel_name(const void *func)
{
    struct kentry *e;
    const char *name = NULL;
    Dl_info info;
    pthread_mutex_lock(&g_klock);
    e = kfind_ptr_locked(func);
    if (e) {
        name = e->name;
    } else if (func && dladdr(func, &info) && info.dli_sname && info.dli_saddr == func) {
        e = kadd_ptr_locked(func, info.dli_sname, 0, 0);
        name = e ? e->name : NULL;
    }
    pthread_mutex_unlock(&g_klock);
    return name;
}

void
simgpu_kernel_lookup(const void *func, const char *fallback_name, const char **name,
                     uint64_t *dur_ns)
{
    struct kentry *e;
    const char *n = simgpu_kernel_name(func);
    uint64_t dur = simgpu_cfg.default_kernel_ns;
    int have = 0;
    char buf[64];
    pthread_mutex_lock(&g_klock);
    e = kfind_ptr_locked(func);
    if (e && e->has_dur) {
        dur = e->dur_ns;
        have = 1;
    }
    if (!n && fallback_name)
        n = fallback_name;
    if (!n) {
        snprintf(buf, sizeof(buf), "simgpu_kernel_%p", func);
        e = kadd_ptr_locked(func, buf, 0, 0);
        n = e ? e->name : "simgpu_kernel";
    }
    if (!have) {
        struct kentry *ne = kfind_name_locked(n);
        if (ne && ne->has_dur)
            dur = ne->dur_ns;
    }
    pthread_mutex_unlock(&g_klock);
    if (t_next_dur_set) {
        dur = t_next_dur;
        t_next_dur_set = 0;
    }
    *name = n;
    *dur_ns = (uint64_t)((double)dur * simgpu_cfg.slowdown);
}
