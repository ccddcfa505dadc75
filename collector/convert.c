/*
 * convert.c: turning records into dpro events on the writer thread: interning, kernel
 * names, allocation sizes, collectives, the background thread's maps.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- background thread ----------------------------------------------------------------- */

_Atomic uint64_t coll_writer_errors;

uint32_t
coll_intern(dpro_writer *w, const char *text)
{
    uint32_t id = 0;
    if (w == NULL || text == NULL || *text == '\0')
        return 0;
    if (dpro_writer_intern(w, text, &id) != DPRO_OK)
        return 0;
    return id;
}

/* Stops recording after an output error (warned once). */
void
coll_output_failed(dpro_writer *w, const char *what)
{
    if (coll_bg.failed)
        return;
    coll_bg.failed = 1;
    coll_warn("%s failed: %s; recording stops", what, w ? dpro_writer_errmsg(w) : "");
    atomic_store(&coll_recording, 0);
}

dpro_event coll_scratch_event;

dpro_event *
coll_event_scratch(void)
{
    memset(&coll_scratch_event, 0, sizeof coll_scratch_event);
    return &coll_scratch_event;
}

typedef int (*coll_func_get_name_fn)(const char **name, const void *fn);

/* Returns the string id of the kernel a launch record names (0 if unknown). */
static uint32_t
coll_kernel_name(dpro_writer *w, const struct coll_rec *r, const unsigned char *cont,
                 size_t cont_len)
{
    static void *slot_rt, *slot_drv;
    uint64_t fn = r->a0;
    if (fn == 0)
        return 0;
    uint64_t key = fn ^ ((uint64_t)(r->flags & (COLL_REC_HANDLE | COLL_REC_CUFUNC)) << 56);
    uint64_t *v = coll_umap_find(&coll_bg.names, key, 1);
    char buf[COLL_KNAME_MAX + 1];
    if ((r->flags & COLL_REC_TEXT) && r->a4 > 0 && cont_len > 0) {
        /* the name the application's thread resolved when it first saw the handle */
        size_t len = r->a4 < cont_len ? (size_t)r->a4 : cont_len;
        if (len > COLL_KNAME_MAX)
            len = COLL_KNAME_MAX;
        memcpy(buf, cont, len);
        buf[len] = '\0';
        uint32_t id = coll_intern(w, buf);
        if (v && id)
            *v = id;
        return id;
    }
    if (v && *v)
        return (uint32_t)*v;
    const char *name = NULL;
    if (r->flags & COLL_REC_CUFUNC) {
        coll_func_get_name_fn f =
            (coll_func_get_name_fn)coll_real(COLL_LIB_CUDA, "cuFuncGetName", &slot_drv);
        if (f == NULL || f(&name, (const void *)(uintptr_t)fn) != 0)
            name = NULL;
    } else {
        if (r->flags & COLL_REC_HANDLE) {
            uint64_t host = coll_map_get(&coll_kernel_map, fn);
            if (host)
                fn = host;
        }
        Dl_info info;
        if (dladdr((const void *)(uintptr_t)fn, &info) && info.dli_sname &&
            info.dli_saddr == (void *)(uintptr_t)fn)
            name = info.dli_sname;
        if (name == NULL) {
            coll_func_get_name_fn f =
                (coll_func_get_name_fn)coll_real(COLL_LIB_CUDART, "cudaFuncGetName", &slot_rt);
            if (f == NULL || f(&name, (const void *)(uintptr_t)fn) != 0)
                name = NULL;
        }
    }
    if (name == NULL) {
        snprintf(buf, sizeof buf, "kernel@%#llx", (unsigned long long)fn);
        name = buf;
    }
    uint32_t id = coll_intern(w, name);
    if (v)
        *v = id;
    return id;
}

/* Returns the bytes of count elements of an ncclDataType_t (0 for an unknown type). */
static uint64_t
coll_nccl_bytes(uint64_t count, uint32_t dtype)
{
    return count * dpro_nccl_dtype_size(dtype);
}

/* Maps a collective API to its dpro_coll_op. */
static uint32_t
coll_coll_op(uint16_t api)
{
    switch (api) {
    case COLL_API_ncclAllReduce:
        return DPRO_COLL_ALLREDUCE;
    case COLL_API_ncclBroadcast:
    case COLL_API_ncclBcast:
        return DPRO_COLL_BROADCAST;
    case COLL_API_ncclReduce:
        return DPRO_COLL_REDUCE;
    case COLL_API_ncclAllGather:
        return DPRO_COLL_ALLGATHER;
    case COLL_API_ncclReduceScatter:
        return DPRO_COLL_REDUCESCATTER;
    case COLL_API_ncclAlltoAll:
        return DPRO_COLL_ALLTOALL;
    case COLL_API_ncclSend:
        return DPRO_COLL_SEND;
    case COLL_API_ncclRecv:
        return DPRO_COLL_RECV;
    default:
        return 0;
    }
}

/* The dpro_api_class of every API (libdprotrace's one classification, from its name),
 * filled once at load, before any thread can convert a record: readers need no flag, no
 * lock and no atomic. */
static uint8_t coll_api_classes[COLL_API_COUNT];

__attribute__((constructor)) static void
coll_api_classes_init(void)
{
    for (int i = 0; i < COLL_API_COUNT; i++)
        coll_api_classes[i] = (uint8_t)dpro_api_classify(coll_api_table[i].name);
}

/* Returns the dpro_api_class of an API. */
static dpro_api_class
coll_api_class(uint16_t api)
{
    return api < COLL_API_COUNT ? (dpro_api_class)coll_api_classes[api] : DPRO_API_CLASS_OTHER;
}

/* Fills and appends the memory event of a successful allocation or free. */
static void
coll_convert_memory(dpro_writer *w, const struct coll_rec *r, dpro_event *ev)
{
    uint64_t *size = r->a0 ? coll_umap_find(&coll_bg.allocs, r->a0, r->u1 == DPRO_MEM_ALLOC) : NULL;
    if (size && r->u1 == DPRO_MEM_ALLOC) {
        *size = r->a2;
    } else if (size) {
        ev->bytes = *size; /* the size of what is freed, when we saw it allocated */
        coll_umap_remove(&coll_bg.allocs, r->a0); /* the map holds live allocations only */
    }
    ev->kind = DPRO_KIND_MEMORY;
    ev->subkind = r->u1;
    if (r->u1 == DPRO_MEM_ALLOC)
        ev->bytes = r->a2;
    ev->address = r->a0;
    ev->value = r->u0;
    ev->device = r->u2;
    ev->correlation = 0;
    coll_event_keep(w, ev);
}

/* Fills and appends the event of a collective. */
static void
coll_convert_collective(dpro_writer *w, const struct coll_rec *r, dpro_event *ev)
{
    ev->kind = DPRO_KIND_COLLECTIVE;
    ev->subkind = coll_coll_op(r->api);
    ev->comm = r->a0;
    ev->seq = r->a1;
    ev->count = r->a2;
    ev->address = r->a3;
    ev->dtype = r->u0;
    ev->redop = r->u1;
    ev->peer = (int32_t)r->u2;
    ev->device = r->u3;
    ev->bytes = coll_nccl_bytes(r->a2, r->u0);
    coll_event_keep(w, ev);
}

/* Fills the fields of an NCCL API event (communicator calls, groups, gather/scatter) and
 * writes the row of a communicator created. */
static void
coll_convert_nccl_api(dpro_writer *w, const struct coll_rec *r, dpro_event *ev)
{
    ev->comm = r->a1;
    if (r->api >= COLL_API_ncclCommInitRank && r->api <= COLL_API_ncclCommSplit && r->result == 0 &&
        r->a1) {
        dpro_comm_info ci = {.hash = r->a1,
                             .parent_hash = r->a2,
                             .handle = r->a0,
                             .rank = (int32_t)r->u0,
                             .size = (int32_t)r->u1,
                             .device = r->u2};
        dpro_writer_add_comm(w, &ci);
    }
    if (r->api != COLL_API_ncclGroupEnd)
        ev->correlation =
            r->api == COLL_API_ncclGather || r->api == COLL_API_ncclScatter ? r->corr : 0;
    if (r->api == COLL_API_ncclGather || r->api == COLL_API_ncclScatter) {
        ev->count = r->a2;
        ev->dtype = r->u0;
        ev->peer = (int32_t)r->u2;
        ev->bytes = coll_nccl_bytes(r->a2, r->u0);
    }
}

/* Fills the API-specific fields of an API event (launch geometry, copy sizes, objects),
 * writing the row of a stream created. */
static void
coll_convert_api_fields(dpro_writer *w, const struct coll_rec *r, const unsigned char *cont,
                        size_t cont_len, dpro_event *ev)
{
    const struct coll_api_info *info = &coll_api_table[r->api];
    dpro_api_class cls = coll_api_class(r->api);
    if (cls == DPRO_API_CLASS_LAUNCH) {
        ev->name2 = coll_kernel_name(w, r, cont, cont_len);
        ev->grid[0] = (uint32_t)r->a1;
        ev->grid[1] = (uint32_t)(r->a1 >> 32);
        ev->grid[2] = (uint32_t)r->a2;
        ev->block[0] = (uint32_t)(r->a2 >> 32);
        ev->block[1] = (uint32_t)r->a3;
        ev->block[2] = (uint32_t)(r->a3 >> 32);
        ev->shared_mem = r->u0;
    } else if (cls == DPRO_API_CLASS_GRAPH_LAUNCH) {
        ev->object = r->a0;
    } else if (cls == DPRO_API_CLASS_MEMCPY || cls == DPRO_API_CLASS_MEMCPY_ASYNC) {
        ev->address = r->a0;
        ev->bytes = r->a2;
        ev->value = r->u0; /* cudaMemcpyKind */
    } else if (cls == DPRO_API_CLASS_MEMSET || cls == DPRO_API_CLASS_MEMSET_ASYNC) {
        ev->address = r->a0;
        ev->bytes = r->a2;
    } else if (info->kind == DPRO_KIND_MEMORY) {
        ev->address = r->a0;
        ev->bytes = r->a2;
        ev->device = r->u2;
        ev->correlation = 0;
    } else if (r->api >= COLL_API_cudaStreamCreate &&
               r->api <= COLL_API_cudaStreamCreateWithPriority) {
        if (r->result == 0) {
            dpro_stream_info si = {.id = r->stream,
                                   .device = r->u2,
                                   .flags = r->u0,
                                   .priority = (int32_t)r->u1,
                                   .name = NULL};
            dpro_writer_add_stream(w, &si);
        }
        ev->correlation = 0;
    } else if ((r->api >= COLL_API_cudaEventCreate && r->api <= COLL_API_cudaEventQuery) ||
               r->api == COLL_API_cudaStreamWaitEvent ||
               r->api == COLL_API_cudaStreamWaitEvent_ptsz) {
        ev->object = r->a0;
        ev->value = r->u0;
    } else if (info->domain == DPRO_API_NCCL) {
        coll_convert_nccl_api(w, r, ev);
    } else {
        /* synchronisation calls */
        ev->correlation = r->corr;
    }
}

/* Turns one record (and its continuation bytes) into events. */
void
coll_convert(dpro_writer *w, const struct coll_rec *r, uint32_t tid, const unsigned char *cont,
             size_t cont_len)
{
    if (r->api == COLL_API_NONE || r->api >= COLL_API_COUNT)
        return;
    const struct coll_api_info *info = &coll_api_table[r->api];
    if (info->kind == DPRO_KIND_MARKER) {
        uint32_t len = (r->flags & COLL_REC_TEXT) ? (uint32_t)r->a4 : 0;
        if (len > cont_len)
            len = (uint32_t)cont_len;
        nvtxi_convert(w, r, tid, (const char *)cont, len);
        return;
    }
    dpro_event *ev = coll_event_next(w);
    ev->start_ns = coll_stamp_to_ns(r->start);
    ev->end_ns = coll_stamp_to_ns(r->end);
    ev->thread = tid;
    ev->result = r->result;
    ev->stream = r->stream;
    ev->correlation = r->corr;
    if ((r->flags & COLL_REC_FRAMES) && r->a4 > 0) {
        uint32_t n = (uint32_t)r->a4;
        if (n * sizeof(uintptr_t) > cont_len)
            n = (uint32_t)(cont_len / sizeof(uintptr_t));
        uintptr_t frames[COLL_STACK_MAX];
        memcpy(frames, cont, n * sizeof(uintptr_t));
        ev->stack = stk_intern(w, frames, n);
    }
    if (coll_bg.api_names[r->api] == 0)
        coll_bg.api_names[r->api] = coll_intern(w, info->name);
    uint32_t api_name = coll_bg.api_names[r->api];

    if (info->kind == DPRO_KIND_MEMORY && r->result == 0) {
        coll_convert_memory(w, r, ev);
        return;
    }
    if (info->kind == DPRO_KIND_COLLECTIVE) {
        ev->name = api_name;
        coll_convert_collective(w, r, ev);
        return;
    }
    ev->kind = DPRO_KIND_API;
    ev->subkind = info->domain;
    ev->name = api_name;
    coll_convert_api_fields(w, r, cont, cont_len, ev);
    coll_event_keep(w, ev);
}
