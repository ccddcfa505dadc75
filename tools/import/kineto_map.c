/*
 * kineto_map.c: one Kineto trace event -> dpro events (the mapping of import_kineto.h):
 * launches joined to their device operations through the correlation join window
 * (join.h), kernels, copies, sets, syncs, markers, instants and metadata.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_num.h"
#include "kineto_keys.h"

/* An event of zeros to start from: copying it takes ten vector moves, where "= {0}" on
 * the stack gave rep stos, which costs more for 160 bytes. */
static const dpro_event kin_no_event;

/* Lets the oldest slot of the join window go: a held launch is emitted without its device
 * op (counted under why). */
static int
kin_join_evict(kineto_importer *k, const char *why)
{
    imp_slot *s = imp_join_oldest(&k->join);
    int rc = DPRO_OK;
    if (s->state == IMP_SLOT_LAUNCH) {
        kin_count(k, why, 1);
        rc = kin_emit(k, &s->ev);
    } else if (s->state == IMP_SLOT_DEVICE) {
        kin_count(k, "unjoined.device_op", 1);
    }
    imp_join_drop_oldest(&k->join);
    return rc;
}

/* Takes a new slot for corr (the window's oldest goes if it is full). */
static int
kin_join_insert(kineto_importer *k, uint64_t corr, imp_slot **out)
{
    int rc = DPRO_OK;
    if (imp_join_full(&k->join))
        rc = kin_join_evict(k, "unjoined.window");
    *out = imp_join_insert(&k->join, corr);
    return rc;
}

/* See kineto_int.h. */
int
kin_drain(kineto_importer *k)
{
    int rc = DPRO_OK;
    while (k->join.used && rc == DPRO_OK)
        rc = kin_join_evict(k, "unjoined.launch");
    if (rc == DPRO_OK)
        rc = kin_flush_collectives(k);
    return rc;
}

/* See kineto_int.h. */
kin_stream *
kin_stream_get(kineto_importer *k, uint64_t id, uint32_t device)
{
    if (k->last_stream < k->nstreams && k->streams[k->last_stream].id == id &&
        k->streams[k->last_stream].device == device)
        return &k->streams[k->last_stream];
    for (size_t i = 0; i < k->nstreams; i++) {
        if (k->streams[i].id == id && k->streams[i].device == device) {
            k->last_stream = i;
            return &k->streams[i];
        }
    }
    if (k->nstreams == KIN_MAX_STREAMS) {
        kin_count(k, "approx.streams_overflow", 1);
        return NULL;
    }
    if (k->nstreams == k->streams_cap) {
        size_t cap = k->streams_cap ? k->streams_cap * 2 : 16;
        kin_stream *n = realloc(k->streams, cap * sizeof(*n));
        if (!n)
            return kin_fail(k, DPRO_ERR_NOMEM, "out of memory (streams)"), NULL;
        k->streams = n;
        k->streams_cap = cap;
    }
    kin_stream *s = &k->streams[k->nstreams];
    s->id = id;
    s->device = device;
    s->name = NULL;
    k->last_stream = k->nstreams++;
    return s;
}

static int
kin_name_has(const kin_event *e, const char *needle)
{
    return e->name_len && strstr(e->name, needle) != NULL;
}

static uint64_t
kin_stream_of(const kin_event *e)
{
    if ((e->have & H_STREAM) && e->stream >= 0)
        return (uint64_t)e->stream;
    if ((e->have & H_TID) && e->tid >= 0)
        return (uint64_t)e->tid;
    return 0;
}

static uint32_t
kin_device_of(const kin_event *e)
{
    if ((e->have & H_DEVICE) && e->device >= 0)
        return (uint32_t)e->device;
    if ((e->have & H_PID) && !e->pid_is_text && e->pid >= 0 && e->pid <= UINT32_MAX)
        return (uint32_t)e->pid;
    return 0;
}

static uint32_t
kin_thread_of(const kin_event *e)
{
    if ((e->have & H_TID) && e->tid > 0 && e->tid <= UINT32_MAX)
        return (uint32_t)e->tid;
    /* a thread id Kineto wrote as a negative 32-bit number: its two's complement (Linux
     * thread ids stay below 2^22, so export knows to write it back negative) */
    if ((e->have & H_TID) && e->tid < 0 && e->tid >= INT32_MIN)
        return (uint32_t)(int32_t)e->tid;
    return 0;
}

/* Checks ts (and dur for complete events) and fills start/end. Returns 0 or fails. */
static int
kin_times(kineto_importer *k, kin_event *e, dpro_event *ev, int need_dur)
{
    if (!(e->have & H_TS))
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "%s event \"%.80s\" has no \"ts\"",
                        e->cat == CAT_OTHER ? e->cat_text.buf : kin_cat_names[e->cat],
                        e->name_len ? e->name : ""),
               -1;
    if (need_dur && !(e->have & H_DUR))
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "complete event \"%.80s\" has no \"dur\"",
                        e->name_len ? e->name : ""),
               -1;
    if (e->dur_negative) {
        kin_count(k, "fixed.negative_dur", 1);
        e->dur_ns = 0;
    }
    if (e->ts_ns > KIN_MAX_TIME_NS || e->dur_ns > KIN_MAX_TIME_NS - e->ts_ns)
        return kin_fail(k, DPRO_ERR_LIMIT,
                        "ts + dur is out of range (%llu + %llu ns: past 2^62 ns, the year 2116)",
                        (unsigned long long)e->ts_ns, (unsigned long long)e->dur_ns),
               -1;
    ev->start_ns = e->ts_ns;
    ev->end_ns = e->ts_ns + e->dur_ns;
    if (e->ts_ns < k->first_ts_ns)
        k->first_ts_ns = e->ts_ns;
    if (!(e->have & H_PID) || e->pid_is_text)
        return 0;
    /* the host pid: from the first host-side event */
    if (k->pid == 0 && (e->cat == CAT_CPU_OP || e->cat == CAT_RUNTIME || e->cat == CAT_DRIVER ||
                        e->cat == CAT_USER_ANN || e->cat == CAT_OPERATOR))
        k->pid = e->pid;
    return 0;
}

static int
kin_map_api(kineto_importer *k, kin_event *e)
{
    dpro_event ev = kin_no_event;
    if (kin_times(k, e, &ev, 1) < 0)
        return -1;
    ev.kind = DPRO_KIND_API;
    ev.subkind = e->cat == CAT_DRIVER ? DPRO_API_DRIVER : DPRO_API_RUNTIME;
    ev.thread = kin_thread_of(e);
    if (kin_intern_name(k, e, &ev.name) != DPRO_OK)
        return -1;
    int has_corr = (e->have & H_CORRELATION) && e->correlation > 0;
    if (kin_args_fill(k, e, &ev, has_corr ? KIN_KEYBIT(A_CORRELATION) : 0) != DPRO_OK)
        return -1;
    if (!has_corr)
        return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
    ev.correlation = (uint64_t)e->correlation;
    imp_slot *s = imp_join_find(&k->join, ev.correlation);
    if (s && s->state == IMP_SLOT_DEVICE) {
        ev.name2 = s->kname;
        ev.stream = s->stream;
        ev.bytes = s->bytes;
        if (s->coll >= 0) {
            dpro_event *c = &k->colls[s->coll].ev;
            c->start_ns = ev.start_ns;
            c->end_ns = ev.end_ns;
            c->thread = ev.thread;
            c->value = DPRO_COLL_TIMING_HOST; /* the launch call's times now */
        }
        imp_join_remove(&k->join, s);
        return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
    }
    if (s && s->state == IMP_SLOT_LAUNCH) {
        /* the same correlation twice: let the first go */
        kin_count(k, "unjoined.duplicate_correlation", 1);
        if (kin_emit(k, &s->ev) != DPRO_OK)
            return -1;
        imp_join_remove(&k->join, s);
    }
    if (kin_name_has(e, "Launch") || kin_name_has(e, "Memcpy") || kin_name_has(e, "Memset")) {
        if (kin_join_insert(k, ev.correlation, &s) != DPRO_OK)
            return -1;
        s->state = IMP_SLOT_LAUNCH;
        s->ev = ev;
        /* the bytes the call says (ROCm's copies: their device records may lack them) */
        s->bytes = (e->have & H_BYTES) && e->bytes > 0 ? (uint64_t)e->bytes : 0;
        return 0;
    }
    return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
}

/* kernel, gpu_memcpy, gpu_memset */
static int
kin_map_device_op(kineto_importer *k, kin_event *e)
{
    dpro_event ev = kin_no_event;
    if (kin_times(k, e, &ev, 1) < 0)
        return -1;
    ev.device = kin_device_of(e);
    ev.stream = kin_stream_of(e);
    if ((e->have & H_CORRELATION) && e->correlation > 0)
        ev.correlation = (uint64_t)e->correlation;
    if (kin_intern_name(k, e, &ev.name) != DPRO_OK)
        return -1;
    if (!kin_stream_get(k, ev.stream, ev.device) && k->status != DPRO_OK)
        return -1;
    int64_t coll = -1;
    if (e->cat == CAT_KERNEL) {
        ev.kind = DPRO_KIND_KERNEL;
        for (int i = 0; i < 3; i++) {
            ev.grid[i] = e->grid[i];
            ev.block[i] = e->block[i];
        }
        if ((e->have & H_SHARED_MEM) && e->shared_mem >= 0 && e->shared_mem <= UINT32_MAX)
            ev.shared_mem = (uint32_t)e->shared_mem;
        if ((e->name_len >= 4 && memcmp(e->name, "nccl", 4) == 0) || e->coll_name.len) {
            if (kin_add_collective(k, e, &ev, &coll) != DPRO_OK)
                return -1;
        }
    } else {
        ev.kind = e->cat == CAT_MEMCPY ? DPRO_KIND_MEMCPY : DPRO_KIND_MEMSET;
        if ((e->have & H_BYTES) && e->bytes >= 0)
            ev.bytes = (uint64_t)e->bytes;
        if (ev.bytes > KIN_MAX_BYTES)
            return kin_fail(k, DPRO_ERR_LIMIT, "\"bytes\": %llu is out of range (over 2^50)",
                            (unsigned long long)ev.bytes),
                   -1;
        if (e->cat == CAT_MEMCPY) {
            static const struct {
                const char *tok;
                uint32_t kind;
            } kinds[] = {{"HtoD", DPRO_COPY_H2D}, {"DtoH", DPRO_COPY_D2H}, {"DtoD", DPRO_COPY_D2D},
                         {"HtoH", DPRO_COPY_H2H}, {"PtoP", DPRO_COPY_P2P}, {"Peer", DPRO_COPY_P2P},
                         {"HtoA", DPRO_COPY_H2D}, {"AtoH", DPRO_COPY_D2H}, {"AtoD", DPRO_COPY_D2D},
                         {"DtoA", DPRO_COPY_D2D}, {"AtoA", DPRO_COPY_D2D}};
            ev.subkind = DPRO_COPY_DEFAULT;
            size_t t;
            for (t = 0; t < sizeof(kinds) / sizeof(kinds[0]); t++) {
                if (kin_name_has(e, kinds[t].tok)) {
                    ev.subkind = kinds[t].kind;
                    break;
                }
            }
            if (t == sizeof(kinds) / sizeof(kinds[0]))
                kin_count(k, "approx.copy_kind", 1);
        }
    }
    imp_slot *s = ev.correlation ? imp_join_find(&k->join, ev.correlation) : NULL;
    if (s && s->state == IMP_SLOT_LAUNCH && ev.kind != DPRO_KIND_KERNEL && ev.bytes == 0 &&
        s->bytes <= KIN_MAX_BYTES)
        ev.bytes = s->bytes; /* a copy or set whose record lacks its size: its call's */
    /* the arguments the fields hold; the bandwidth of a copy or set, when it is its bytes
     * over its duration (newer Kinetos), is computed again by export */
    uint64_t taken = 0;
    if (ev.correlation)
        taken |= KIN_KEYBIT(A_CORRELATION);
    if ((e->have & H_DEVICE) && e->device >= 0 && (uint64_t)e->device == ev.device)
        taken |= KIN_KEYBIT(A_DEVICE);
    if ((e->have & H_STREAM) && e->stream >= 0)
        taken |= KIN_KEYBIT(A_STREAM);
    if (ev.kind == DPRO_KIND_KERNEL) {
        taken |= KIN_KEYBIT(A_GRID) | KIN_KEYBIT(A_BLOCK);
        if ((e->have & H_SHARED_MEM) && (uint64_t)e->shared_mem == ev.shared_mem)
            taken |= KIN_KEYBIT(A_SHARED_MEM);
    } else {
        double bw;
        if (kin_args_double(e, A_BANDWIDTH, &bw) == 0 && ev.end_ns > ev.start_ns &&
            bw == (double)ev.bytes / (double)(ev.end_ns - ev.start_ns))
            taken |= KIN_KEYBIT(A_BANDWIDTH);
        if ((e->have & H_BYTES) && e->bytes >= 0 && (uint64_t)e->bytes == ev.bytes)
            taken |= KIN_KEYBIT(A_BYTES);
    }
    if (kin_args_fill(k, e, &ev, taken) != DPRO_OK)
        return -1;
    if (kin_emit(k, &ev) != DPRO_OK)
        return -1;
    k->device_ops++;
    if (ev.correlation == 0)
        return 0;
    if (s && s->state == IMP_SLOT_LAUNCH) {
        dpro_event api = s->ev;
        if (ev.kind == DPRO_KIND_KERNEL)
            api.name2 = ev.name;
        api.stream = ev.stream;
        api.bytes = ev.bytes;
        if (coll >= 0) {
            dpro_event *c = &k->colls[coll].ev;
            c->start_ns = api.start_ns;
            c->end_ns = api.end_ns;
            c->thread = api.thread;
            c->value = DPRO_COLL_TIMING_HOST; /* the launch call's times now */
        }
        imp_join_remove(&k->join, s);
        return kin_emit(k, &api) == DPRO_OK ? 0 : -1;
    }
    if (s)
        return 0; /* a graph launch: its first device op took the join */
    if (kin_join_insert(k, ev.correlation, &s) != DPRO_OK)
        return -1;
    s->state = IMP_SLOT_DEVICE;
    s->kname = ev.kind == DPRO_KIND_KERNEL ? ev.name : 0;
    s->stream = ev.stream;
    s->bytes = ev.bytes;
    s->coll = coll;
    return 0;
}

static int
kin_map_sync(kineto_importer *k, kin_event *e)
{
    dpro_event ev = kin_no_event;
    if (kin_times(k, e, &ev, 1) < 0)
        return -1;
    ev.kind = DPRO_KIND_SYNC;
    const char *kind = e->sync_kind.len ? e->sync_kind.buf : (e->name_len ? e->name : "");
    if (strstr(kind, "Wait Event"))
        ev.subkind = DPRO_SYNC_STREAM_WAIT_EVENT;
    else if (strstr(kind, "Event Sync"))
        ev.subkind = DPRO_SYNC_EVENT_SYNCHRONIZE;
    else if (strstr(kind, "Stream Sync"))
        ev.subkind = DPRO_SYNC_STREAM_SYNCHRONIZE;
    else if (strstr(kind, "Context Sync"))
        ev.subkind = DPRO_SYNC_CONTEXT_SYNCHRONIZE;
    else
        kin_count(k, "approx.sync_kind", 1);
    ev.device = kin_device_of(e);
    ev.stream = (e->have & H_STREAM) && e->stream >= 0 ? (uint64_t)e->stream : 0;
    if (!(e->have & H_STREAM) && (e->have & H_TID) && e->tid >= 0) {
        ev.has |= DPRO_HAS_ROW; /* no stream said: the row it was drawn on */
        ev.address = (uint64_t)e->tid;
    }
    if ((e->have & H_CORRELATION) && e->correlation > 0)
        ev.correlation = (uint64_t)e->correlation;
    if ((e->have & H_WAIT_EVENT) && e->wait_event >= 0)
        ev.object = (uint64_t)e->wait_event;
    if ((e->have & H_WAIT_RECORD) && e->wait_record > 0)
        ev.value = e->wait_record;
    ev.peer = (e->have & H_WAIT_STREAM) && e->wait_stream >= 0 && e->wait_stream <= INT32_MAX
                  ? (int32_t)e->wait_stream
                  : -1;
    if (kin_intern_name(k, e, &ev.name) != DPRO_OK)
        return -1;
    uint64_t taken = 0;
    if (ev.correlation)
        taken |= KIN_KEYBIT(A_CORRELATION);
    if ((e->have & H_DEVICE) && e->device >= 0 && (uint64_t)e->device == ev.device)
        taken |= KIN_KEYBIT(A_DEVICE);
    if ((e->have & H_STREAM) && e->stream >= 0)
        taken |= KIN_KEYBIT(A_STREAM);
    if ((e->have & H_WAIT_EVENT) && e->wait_event >= 0)
        taken |= KIN_KEYBIT(A_WAIT_EVENT_ID);
    if ((e->have & H_WAIT_RECORD) && e->wait_record > 0)
        taken |= KIN_KEYBIT(A_WAIT_RECORD_CORR);
    if (ev.peer >= 0)
        taken |= KIN_KEYBIT(A_WAIT_STREAM);
    if (kin_args_fill(k, e, &ev, taken) != DPRO_OK)
        return -1;
    if (ev.stream && !kin_stream_get(k, ev.stream, ev.device) && k->status != DPRO_OK)
        return -1;
    return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
}

/* cpu_op, user_annotation, gpu_user_annotation, python_function */
static int
kin_map_marker(kineto_importer *k, kin_event *e)
{
    dpro_event ev = kin_no_event;
    if (kin_times(k, e, &ev, 1) < 0)
        return -1;
    ev.kind = DPRO_KIND_MARKER;
    ev.subkind = DPRO_MARK_RANGE;
    ev.thread = kin_thread_of(e);
    int64_t step = -1;
    if ((e->cat == CAT_USER_ANN || e->cat == CAT_OPERATOR) && e->name_len > 13 &&
        memcmp(e->name, "ProfilerStep#", 13) == 0 &&
        imp_parse_i64(e->name + 13, e->name_len - 13, &step) < 0)
        step = -1;
    switch (e->cat) {
    case CAT_CPU_OP:
        ev.subkind = DPRO_MARK_CPU_OP;
        ev.name2 = k->s_cpu_op;
        break;
    case CAT_OPERATOR:
        /* PyTorch 1.8-1.9 wrote ops and record_function ranges alike: ops as cpu_op, the
         * steps as the user_annotation later versions make them */
        ev.subkind = step >= 0 ? DPRO_MARK_ITERATION : DPRO_MARK_CPU_OP;
        ev.value = step >= 0 ? step : 0;
        ev.name2 = step >= 0 ? k->s_user_ann : k->s_cpu_op;
        break;
    case CAT_USER_ANN:
        ev.name2 = k->s_user_ann;
        if (step >= 0) {
            ev.subkind = DPRO_MARK_ITERATION;
            ev.value = step;
        }
        break;
    case CAT_GPU_USER_ANN:
        ev.name2 = k->s_gpu_user_ann;
        ev.thread = 0;
        ev.device = kin_device_of(e);
        ev.stream = kin_stream_of(e);
        break;
    default:
        ev.name2 = k->s_python;
        break;
    }
    if (kin_intern_name(k, e, &ev.name) != DPRO_OK)
        return -1;
    if (e->cat != CAT_GPU_USER_ANN && e->cat != CAT_PYTHON &&
        kin_note_comm_range(k, e, &ev) != DPRO_OK)
        return -1;
    if (kin_args_fill(k, e, &ev, 0) != DPRO_OK)
        return -1;
    return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
}

static int
kin_map_instant(kineto_importer *k, kin_event *e)
{
    dpro_event ev = kin_no_event;
    if (kin_times(k, e, &ev, 0) < 0)
        return -1;
    ev.end_ns = ev.start_ns;
    if (e->name_len == 8 && memcmp(e->name, "[memory]", 8) == 0) {
        /* Device Type: c10 DeviceType, 0 = CPU, 1 = CUDA (ROCm's too) */
        if (!(e->have & H_DEVICE_TYPE) || (e->device_type != 1 && e->device_type != 0)) {
            kin_unmapped(k, "memory_", "device_type", 11);
            return 0;
        }
        ev.kind = DPRO_KIND_MEMORY;
        ev.thread = kin_thread_of(e);
        ev.device = (e->have & H_DEVICE_ID) && e->device_id >= 0 ? (uint32_t)e->device_id : 0;
        ev.value = e->device_type == 1 ? DPRO_MEMSPACE_DEVICE : DPRO_MEMSPACE_HOST;
        uint64_t taken = KIN_KEYBIT(A_DEVICE_TYPE) | KIN_KEYBIT(A_ADDR) | KIN_KEYBIT(A_MEM_BYTES);
        if ((e->have & H_DEVICE_ID) && e->device_id >= 0)
            taken |= KIN_KEYBIT(A_DEVICE_ID);
        if ((e->have & H_TOTAL_ALLOC) && (e->have & H_TOTAL_RESV) && e->total_alloc >= 0 &&
            e->total_resv >= 0) {
            ev.has |= DPRO_HAS_TOTALS;
            ev.total_allocated = (uint64_t)e->total_alloc;
            ev.total_reserved = (uint64_t)e->total_resv;
            taken |= KIN_KEYBIT(A_TOTAL_ALLOC) | KIN_KEYBIT(A_TOTAL_RESV);
        }
        if (kin_args_fill(k, e, &ev, taken) != DPRO_OK)
            return -1;
        ev.address = (e->have & H_ADDR) ? (uint64_t)e->addr : 0;
        int64_t b = (e->have & H_MEM_BYTES) ? e->mem_bytes : 0;
        ev.subkind = b < 0 ? DPRO_MEM_FREE : DPRO_MEM_ALLOC;
        ev.bytes = b < 0 ? (uint64_t)0 - (uint64_t)b : (uint64_t)b;
        if (ev.bytes > KIN_MAX_BYTES)
            return kin_fail(k, DPRO_ERR_LIMIT, "\"Bytes\": %lld is out of range (over 2^50)",
                            (long long)b),
                   -1;
        return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
    }
    ev.kind = DPRO_KIND_MARKER;
    ev.subkind = DPRO_MARK_INSTANT;
    ev.thread = kin_thread_of(e);
    ev.name2 = k->s_instant;
    if (kin_intern_name(k, e, &ev.name) != DPRO_OK)
        return -1;
    if (kin_args_fill(k, e, &ev, 0) != DPRO_OK)
        return -1;
    return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
}

/* ph s, f, t: one end of a flow arrow (ac2g: launch -> kernel, fwdbwd: forward op ->
 * backward op), kept as it was drawn. */
static int
kin_map_flow(kineto_importer *k, kin_event *e)
{
    dpro_event ev = kin_no_event;
    if (kin_times(k, e, &ev, 0) < 0)
        return -1;
    ev.end_ns = ev.start_ns;
    ev.kind = DPRO_KIND_FLOW;
    ev.subkind = e->ph == 's' ? DPRO_FLOW_START : e->ph == 'f' ? DPRO_FLOW_FINISH : DPRO_FLOW_STEP;
    ev.thread = kin_thread_of(e);
    ev.value = (e->have & H_PID) ? e->pid : 0;
    ev.correlation = (e->have & H_FLOW_ID) ? (uint64_t)e->flow_id : 0;
    if (e->have & H_BP_E)
        ev.has |= DPRO_HAS_BP_ENCLOSING;
    const char *cat = e->cat == CAT_OTHER ? e->cat_text.buf : kin_cat_names[e->cat];
    size_t clen = e->cat == CAT_OTHER ? e->cat_text.len : strlen(cat);
    if (clen && kin_intern_h(k, cat, clen, imp_str_hash(cat, clen), &ev.name2) != DPRO_OK)
        return -1;
    if (kin_intern_name(k, e, &ev.name) != DPRO_OK)
        return -1;
    if (kin_args_fill(k, e, &ev, 0) != DPRO_OK)
        return -1;
    return kin_emit(k, &ev) == DPRO_OK ? 0 : -1;
}

/* ph "M": thread and stream names, process name. */
static int
kin_map_metadata(kineto_importer *k, kin_event *e)
{
    if (e->name_len == 11 && memcmp(e->name, "thread_name", 11) == 0 && e->mname.len) {
        /* "stream 7 " on a GPU pid names a stream; anything else a host thread */
        const char *n = e->mname.buf;
        size_t len = e->mname.len;
        while (len && n[len - 1] == ' ')
            len--;
        if (len > 7 && memcmp(n, "stream ", 7) == 0) {
            uint64_t id = kin_stream_of(e);
            kin_stream *s = kin_stream_get(k, id, kin_device_of(e));
            /* Kineto's default "stream N" says nothing the id does not: keep only
             * names that add something ("stream 7 (compute)") */
            char dflt[32];
            int dl = snprintf(dflt, sizeof(dflt), "stream %llu", (unsigned long long)id);
            if (s && !(dl == (int)len && memcmp(dflt, n, len) == 0)) {
                free(s->name);
                s->name = strndup(n, len);
            }
            return 0;
        }
        if ((e->have & H_TID) &&
            kin_emit_side(k, IMP_SIDE_THREAD, kin_thread_of(e), NULL, n, len) != DPRO_OK)
            return -1;
        return 0;
    }
    if (e->name_len == 12 && memcmp(e->name, "process_name", 12) == 0) {
        if (!k->process_name.len && e->mname.len)
            kin_str_set(&k->process_name, (const unsigned char *)e->mname.buf, e->mname.len);
        return 0;
    }
    /* sort indices and labels only order the viewer's rows */
    return 0;
}

/* See kineto_int.h. */
int
kin_map_event(kineto_importer *k)
{
    kin_event *e = &k->ev;
    k->events_in++;
    if (!(e->have & H_PH))
        return kin_fail(k, DPRO_ERR_NOT_TRACE, "trace event without \"ph\""), -1;
    switch (e->ph) {
    case 'X':
        switch (e->cat) {
        case CAT_RUNTIME:
        case CAT_DRIVER:
            return kin_map_api(k, e);
        case CAT_KERNEL:
        case CAT_MEMCPY:
        case CAT_MEMSET:
            return kin_map_device_op(k, e);
        case CAT_SYNC:
            return kin_map_sync(k, e);
        case CAT_CPU_OP:
        case CAT_USER_ANN:
        case CAT_GPU_USER_ANN:
        case CAT_PYTHON:
        case CAT_OPERATOR:
            return kin_map_marker(k, e);
        case CAT_TRACE:
            kin_unmapped(k, "profiler_span", "", 0);
            return 0;
        case CAT_NONE:
            kin_unmapped(k, "cat_none", "", 0);
            return 0;
        case CAT_OTHER:
            kin_unmapped(k, "cat_", e->cat_text.buf, e->cat_text.len);
            return 0;
        default:
            kin_unmapped(k, "cat_", kin_cat_names[e->cat], strlen(kin_cat_names[e->cat]));
            return 0;
        }
    case 'i':
    case 'I':
        return kin_map_instant(k, e);
    case 's':
    case 'f':
    case 't':
        if (e->cat == CAT_AC2G)
            kin_count(k, "flows.ac2g", 1); /* the id is the correlation both ends carry */
        return kin_map_flow(k, e);
    case 'M':
        k->events_in--; /* metadata, not an event */
        return kin_map_metadata(k, e);
    default: {
        char ph[2] = {e->ph, 0};
        kin_unmapped(k, "ph_", ph, 1);
        return 0;
    }
    }
}
