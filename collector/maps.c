/*
 * maps.c: the lock-free maps hooks use on the application's threads: cudaStream_t to
 * CUPTI stream id, cudaKernel_t to host function.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>

#include "internal.h"

/* ---- lock-free maps used on the hot path (struct coll_map: internal.h) --------------- */

static struct coll_map coll_stream_map; /* cudaStream_t -> CUPTI stream id */
struct coll_map coll_kernel_map;        /* cudaKernel_t -> host function */
static struct coll_map coll_func_seen;  /* CUfunction -> 1 once a launch carried its name */

/* Returns the slot of key k, inserting it when insert is set; -1 when absent or full. */
static int
coll_map_slot(struct coll_map *m, uint64_t k, int insert)
{
    uint32_t i = coll_map_hash(k);
    for (uint32_t n = 0; n < COLL_MAP_SIZE; n++, i = (i + 1) & (COLL_MAP_SIZE - 1)) {
        uint64_t cur = atomic_load_explicit(&m->key[i], memory_order_acquire);
        if (cur == k)
            return (int)i;
        if (cur == 0) {
            if (!insert)
                return -1;
            uint64_t expect = 0;
            if (atomic_compare_exchange_strong(&m->key[i], &expect, k) || expect == k)
                return (int)i;
        }
    }
    return -1;
}

/* Returns the value of key k (0 if unknown). */
uint64_t
coll_map_get(struct coll_map *m, uint64_t k)
{
    int i = coll_map_slot(m, k, 0);
    return i < 0 ? 0 : atomic_load_explicit(&m->val[i], memory_order_acquire);
}

/* Sets the value of key k (ignored when the map is full). */
static void
coll_map_put(struct coll_map *m, uint64_t k, uint64_t v)
{
    int i = coll_map_slot(m, k, 1);
    if (i >= 0)
        atomic_store_explicit(&m->val[i], v, memory_order_release);
}

int
coll_func_first_sight(const void *f)
{
    int i = f ? coll_map_slot(&coll_func_seen, (uint64_t)(uintptr_t)f, 1) : -1;
    uint64_t expect = 0;
    return i >= 0 && atomic_compare_exchange_strong(&coll_func_seen.val[i], &expect, 1);
}

void
coll_kernel_handle_add(const void *handle, const void *host_fn)
{
    if (handle)
        coll_map_put(&coll_kernel_map, (uint64_t)(uintptr_t)handle, (uint64_t)(uintptr_t)host_fn);
}

typedef int (*coll_stream_get_id_fn)(const void *stream, unsigned long long *id);

/* Asks the runtime for the id of a stream; 0 when it cannot tell. */
static uint64_t
coll_stream_query(const void *stream, int ptsz)
{
    static void *slot, *slot_ptsz;
    coll_stream_get_id_fn fn = (coll_stream_get_id_fn)coll_real(
        COLL_LIB_CUDART, ptsz ? "cudaStreamGetId_ptsz" : "cudaStreamGetId",
        ptsz ? &slot_ptsz : &slot);
    unsigned long long id = 0;
    if (fn == NULL || fn(stream, &id) != 0)
        return 0;
    return id;
}

typedef int (*coll_get_device_fn)(int *device);

/* This thread's current device as cudaGetDevice last said, -1 when it must be asked again:
 * cudaSetDevice and the driver's context switches (hooks: coll_device_changed) reset it.
 * Asking on every launch on the legacy or per-thread handle cost about 3 ns, 8 % of an
 * intercepted launch on a do-nothing runtime (coll-bench's stream handles). */
static __thread int coll_device_seen __attribute__((tls_model("initial-exec"))) = -1;

void
coll_device_changed(void)
{
    coll_device_seen = -1;
}

/* Returns the current device (cudaGetDevice), 0 when it cannot tell. */
static uint32_t
coll_current_device(void)
{
    static void *slot;
    int dev = coll_device_seen;
    if (coll_likely(dev >= 0))
        return (uint32_t)dev;
    coll_get_device_fn fn = (coll_get_device_fn)coll_real(COLL_LIB_CUDART, "cudaGetDevice", &slot);
    if (fn == NULL || fn(&dev) != 0 || dev < 0)
        return 0; /* not kept: asked again once the runtime can tell */
    coll_device_seen = dev;
    return (uint32_t)dev;
}

/* The legacy (0, cudaStreamLegacy) and per-thread (2) handles name a different stream on
 * each device: their cache keys carry the device (pointers have no bits there). */
static inline int
coll_stream_special(uintptr_t h)
{
    return h <= 2;
}

static inline uint64_t
coll_stream_key(uintptr_t h, uint32_t device)
{
    uint64_t key = (uint64_t)h + 1; /* key 0 means empty */
    if (coll_stream_special(h))
        key |= (uint64_t)(device + 1) << 48;
    return key;
}

/* Counts coll_stream_forget's calls: a thread's cached stream (stream_last) is valid
 * while this has not moved since it was cached. */
static _Atomic uint32_t coll_stream_gen;

/* Caches id as the stream t's hooks named last (a created stream: h > 2). */
static inline void
coll_stream_remember(struct coll_thread *t, uintptr_t h, uint64_t id, uint32_t gen)
{
    t->stream_last = h;
    t->stream_last_id = id;
    t->stream_last_gen = gen;
}

uint64_t
coll_stream_id(struct coll_thread *t, const void *stream, int ptsz)
{
    uintptr_t h = (uintptr_t)stream;
    if (h == 0 && ptsz)
        h = 2; /* cudaStreamPerThread */
    uint32_t gen = atomic_load_explicit(&coll_stream_gen, memory_order_acquire);
    if (coll_likely(h == t->stream_last && gen == t->stream_last_gen && h > 2))
        return t->stream_last_id;
    int saved = errno;
    uint32_t device = 0;
    if (coll_stream_special(h)) {
        device = coll_current_device();
        t->device = device;
    }
    if (h == 2) {
        uint64_t id = device < COLL_PTDS_DEVICES ? t->ptds_stream[device] : 0;
        if (id == 0)
            id = coll_stream_query((const void *)2, 0);
        if (device < COLL_PTDS_DEVICES)
            t->ptds_stream[device] = id;
        errno = saved;
        return id ? id : h;
    }
    uint64_t key = coll_stream_key(h, device);
    uint64_t id = coll_map_get(&coll_stream_map, key);
    if (coll_likely(id != 0)) {
        errno = saved;
        if (h > 2)
            coll_stream_remember(t, h, id, gen);
        return id;
    }
    id = coll_stream_query(stream, 0);
    errno = saved;
    if (id == 0)
        return h;
    coll_map_put(&coll_stream_map, key, id);
    if (h > 2)
        coll_stream_remember(t, h, id, gen);
    return id;
}

uint64_t
coll_stream_id_known(struct coll_thread *t, const void *stream, int ptsz)
{
    uintptr_t h = (uintptr_t)stream;
    if (h == 0 && ptsz)
        h = 2;
    /* inside a CUPTI callback: the device this thread's hooks saw last */
    if (h == 2) {
        uint64_t id = t->device < COLL_PTDS_DEVICES ? t->ptds_stream[t->device] : 0;
        return id ? id : h;
    }
    uint64_t id = coll_map_get(&coll_stream_map, coll_stream_key(h, t->device));
    return id ? id : h;
}

void
coll_stream_forget(const void *stream)
{
    int i = coll_map_slot(&coll_stream_map, (uint64_t)(uintptr_t)stream + 1, 0);
    if (i >= 0)
        atomic_store_explicit(&coll_stream_map.val[i], 0, memory_order_release);
    /* after the removal: a lookup that read the old generation may have cached the old id */
    atomic_fetch_add_explicit(&coll_stream_gen, 1, memory_order_acq_rel);
}
