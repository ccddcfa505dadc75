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

/* Triton kernels (README.md, "Triton kernels"): a launch names its class, the grid and block
 * its size, never its operands (their count, dtype and lengths are the kernel's arguments,
 * which the device does not read).  Each thread of a memory-class kernel moves 4 fp32
 * elements (one 16-byte vector access) three times (two loads, one store): 48 bytes; a
 * template (triton_tem_, Inductor's GEMM) computes 32 outputs per thread over K = 256 at
 * fp32 (2 FLOPs each) and moves the same 48 bytes. */
#define TRITON_BYTES_PER_THREAD 48.0
#define TRITON_TEM_FLOPS_PER_THREAD (2.0 * 32 * 256)

int
simgpu_triton_work(const void *func, const char *name, uint64_t threads, struct simgpu_work *w)
{
    struct kentry *e;
    int registered;
    if (!name || strncmp(name, "triton_", 7))
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
    w->dtype = SIMGPU_FP32;
    w->bytes = TRITON_BYTES_PER_THREAD * (double)threads;
    w->kclass = SIMGPU_CLASS_MEMORY;
    if (!strncmp(name, "triton_tem_", 11)) {
        w->kclass = SIMGPU_CLASS_COMPUTE;
        w->flops = TRITON_TEM_FLOPS_PER_THREAD * (double)threads;
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
