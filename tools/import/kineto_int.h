/*
 * kineto_int.h: what the files of the Kineto importer share (kineto.c: the public API,
 * errors and the meta keys; kineto_parse.c: the yajl callbacks; kineto_keys.h: key
 * matching; kineto_map.c: mapping one event; kineto_coll.c: collectives). Not for
 * other importers: the generic pieces are json_squeeze.h, json_num.h, join.h and
 * handoff.h.
 *
 * yajl calls us back token by token. A small stack of contexts says where we are (top
 * object, traceEvents array, one event, its args, distributedInfo, deviceProperties); the
 * fields of the current event are gathered in k->ev and the event is mapped when its
 * object closes, since Chrome traces put keys in any order. Containers we do not need are
 * skipped by depth counting. Numbers reach us as text (yajl_number) and are parsed by
 * json_num.h: timestamps without floating point.
 *
 * Input: what feed gets is cut into chunks of KIN_PIECE bytes; each is first copied
 * without the whitespace that separates nothing (json_squeeze.h), and yajl parses the
 * copy. An error position in the copy is mapped back to the chunk before the byte offset
 * and the line are reported.
 *
 * Output: mapped events go to the current batch of k->out (handoff.h), names interned
 * there; a full batch goes to the writer thread.
 */
#ifndef DPRO_IMPORT_KINETO_INT_H
#define DPRO_IMPORT_KINETO_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "handoff.h"
#include "import_kineto.h"
#include "join.h"
#include "json_squeeze.h"

#define KIN_MAX_DEPTH 16           /* contexts tracked; deeper containers are skipped */
#define KIN_MAX_STRING (16u << 20) /* longest event name kept */
#define KIN_SMALL_STR 128          /* dtype, collective name, sync kind, ... */
#define KIN_RANKS_STR 8192         /* "Process Group Ranks" text kept */
#define KIN_MAX_REASONS 128        /* distinct unmapped reasons counted */
#define KIN_MAX_STREAMS 65536
#define KIN_MAX_COMMS 4096
#define KIN_CHUNK (256u << 10)       /* bytes read from the file at a time */
#define KIN_PIECE (64u << 10)        /* bytes squeezed, then given to yajl_parse, at a time */
#define KIN_CARRY_MAX (4u << 20)     /* the largest piece gathered in a long token */
#define KIN_MAX_ARGS_TEXT (1u << 20) /* JSON text of one event's args kept (kin_event.rest) */
#define KIN_MAX_SEGS 64              /* args members tracked one by one; the rest are kept */
#define KIN_CAP_DEPTH 32             /* containers nested in an argument value */
/* Text in which no token ends (a string or number that long) is refused once this much of
 * it has been parsed: at most KIN_CARRY_MAX past it is read. */
#define KIN_MAX_TOKEN (16u << 20)
/* Bounds of what an import writes, so that the readers' int64 arithmetic cannot overflow:
 * times (ts, ts + dur) at most 2^62 ns (the year 2116 in Unix time; a clock shift or a
 * difference of two such times still fits), bytes and element counts at most 2^50 (1 PiB:
 * 13 bits left for scaling by ranks, steps or units). Beyond them the input is refused. */
#define KIN_MAX_TIME_NS (UINT64_C(1) << 62)
#define KIN_MAX_BYTES (UINT64_C(1) << 50)
/* Length to show of a token in a message (tokens are not NUL-terminated). */
#define KIN_SHOW(l) ((int)((l) < 40 ? (l) : 40))

/* ---- where the parser is -------------------------------------------------------------- */

enum kin_ctx {
    CTX_ROOT,     /* before the top-level value */
    CTX_TOP,      /* the top-level object */
    CTX_EVENTS,   /* traceEvents (or a top-level array) */
    CTX_EVENT,    /* one trace event */
    CTX_ARGS,     /* its args */
    CTX_ARGARRAY, /* grid or block inside args */
    CTX_DIST,     /* distributedInfo */
    CTX_DEVPROPS, /* deviceProperties */
    CTX_DEV,      /* one device of deviceProperties */
    CTX_DONE,     /* after the top-level value */
};

/* Keys we look at; one enum for all contexts (a key is matched in its context only). */
enum kin_key {
    K_NONE = 0,
    /* top */
    K_TRACE_EVENTS,
    K_DIST_INFO,
    K_DEV_PROPS,
    K_TRACE_ID,
    K_HOST_NAME,
    K_BASE_TIME,
    K_TRACE_NAME,
    K_SCHEMA_VERSION,
    /* event */
    K_PH,
    K_CAT,
    K_NAME,
    K_PID,
    K_TID,
    K_TS,
    K_DUR,
    K_ID,
    K_BP,
    K_ARGS,
    /* args */
    A_EXTERNAL_ID,
    A_CORRELATION,
    A_DEVICE,
    A_STREAM,
    A_GRID,
    A_BLOCK,
    A_SHARED_MEM,
    A_BYTES,
    A_COLL_NAME,
    A_IN_NELEMS,
    A_OUT_NELEMS,
    A_GROUP_SIZE,
    A_DTYPE,
    A_PG_NAME,
    A_PG_ID,
    A_PG_RANKS,
    A_SEQ,
    A_SYNC_KIND,
    A_WAIT_STREAM,
    A_WAIT_RECORD_CORR,
    A_WAIT_EVENT_ID,
    A_MNAME,
    A_DEVICE_TYPE,
    A_DEVICE_ID,
    A_ADDR,
    A_MEM_BYTES,
    A_RECORD_ID,
    A_SEQ_NR,
    A_FWD_THREAD,
    A_EV_IDX,
    A_INPUT_DIMS,
    A_INPUT_TYPE,
    A_TOTAL_ALLOC,
    A_TOTAL_RESV,
    A_BANDWIDTH,
    /* distributedInfo */
    D_RANK,
    D_WORLD_SIZE,
    D_NCCL_VERSION,
    D_BACKEND,
    /* deviceProperties[i] */
    P_ID,
    P_NAME,
    P_TOTAL_MEM,
    P_CC_MAJOR,
    P_CC_MINOR,
    P_NUM_SMS,
    P_CLOCK_RATE,
};

/* Kineto categories we map (CAT_OTHER: any other, kept as text for the counters). */
enum kin_cat {
    CAT_NONE = 0,
    CAT_OTHER,
    CAT_CPU_OP,
    CAT_USER_ANN,
    CAT_GPU_USER_ANN,
    CAT_RUNTIME,
    CAT_DRIVER,
    CAT_KERNEL,
    CAT_MEMCPY,
    CAT_MEMSET,
    CAT_SYNC,
    CAT_AC2G,
    CAT_FWDBWD,
    CAT_PYTHON,
    CAT_TRACE,
    CAT_OPERATOR, /* PyTorch 1.8-1.9: host ops and ranges, ProfilerStep#N among them */
};

/* Arguments seen in the current event (bits of kin_event.have). */
enum kin_have {
    H_TS = 1u << 0,
    H_DUR = 1u << 1,
    H_PID = 1u << 2,
    H_TID = 1u << 3,
    H_NAME = 1u << 4,
    H_EXTERNAL_ID = 1u << 5,
    H_CORRELATION = 1u << 6,
    H_DEVICE = 1u << 7,
    H_STREAM = 1u << 8,
    H_BYTES = 1u << 9,
    H_IN_NELEMS = 1u << 10,
    H_OUT_NELEMS = 1u << 11,
    H_GROUP_SIZE = 1u << 12,
    H_SEQ = 1u << 13,
    H_WAIT_STREAM = 1u << 14,
    H_WAIT_RECORD = 1u << 15,
    H_WAIT_EVENT = 1u << 16,
    H_DEVICE_TYPE = 1u << 17,
    H_DEVICE_ID = 1u << 18,
    H_ADDR = 1u << 19,
    H_MEM_BYTES = 1u << 20,
    H_PG = 1u << 21,
    H_SHARED_MEM = 1u << 22,
    H_PH = 1u << 23,
    H_RECORD_ID = 1u << 24,
    H_SEQ_NR = 1u << 25,
    H_FWD_THREAD = 1u << 26,
    H_EV_IDX = 1u << 27,
    H_TOTAL_ALLOC = 1u << 28,
    H_TOTAL_RESV = 1u << 29,
    H_FLOW_ID = 1u << 30,
    H_BP_E = 1u << 31,
};

/* One member of an event's args as kept in kin_event.rest: "key":value, from start to
 * the next member's start (or the end of rest); the value from vstart. */
typedef struct kin_seg {
    int key; /* enum kin_key, K_NONE for a key we do not read */
    uint32_t start, vstart;
    int synth; /* an integer argument read into its kin_event field: no text kept, it is
                  written from the field if no dpro_event field takes it */
} kin_seg;

typedef struct kin_str {
    char buf[KIN_SMALL_STR];
    size_t len;
} kin_str;

/* The fields of one trace event, gathered until its object closes. */
typedef struct kin_event {
    uint32_t have;
    char ph;
    int cat;
    kin_str cat_text; /* for CAT_OTHER */
    const char *name; /* NUL-terminated: an interned text or name_buf */
    size_t name_len;
    uint64_t name_hash; /* imp_str_hash of the name */
    uint32_t name_id;   /* its interned id, 0 if not interned yet */
    char *name_buf;     /* k-owned growable buffer for names not interned yet */
    size_t name_cap;
    int64_t pid, tid;
    int pid_is_text, tid_is_text;
    uint64_t ts_ns, dur_ns;
    int64_t external_id, correlation, device, stream, shared_mem, bytes;
    int64_t in_nelems, out_nelems, group_size, seq;
    int64_t wait_stream, wait_record, wait_event;
    int64_t device_type, device_id, addr, mem_bytes;
    int64_t record_id, seq_nr, fwd_thread, ev_idx, total_alloc, total_resv, flow_id;
    uint32_t grid[3], block[3];
    int arr_key, arr_idx; /* which of grid/block is open, next index */
    kin_str coll_name, dtype, pg, sync_kind, mname;
    char *pg_ranks; /* k-owned, KIN_RANKS_STR */
    size_t pg_ranks_len;
    int pg_ranks_cut;
    int dur_negative;
    /* Every member of args as JSON text, so that what no field holds is kept (see
     * kin_args_fill): members back to back, no separators; strings escaped anew. */
    char *rest; /* k-owned, KIN_MAX_ARGS_TEXT + 64 */
    size_t rest_len;
    kin_seg seg[KIN_MAX_SEGS];
    int nseg;
    int rest_bad;                     /* cut or too deep: no args text for this event */
    int cap_nest;                     /* containers open inside the current argument value */
    uint8_t cap_array[KIN_CAP_DEPTH]; /* each an array (else an object) */
    uint8_t cap_first[KIN_CAP_DEPTH]; /* nothing written in it yet */
} kin_event;

/* A slot of the correlation join window. */

typedef struct kin_coll {
    dpro_event ev;
    uint64_t kstart; /* the kernel's start: device order */
    int has_seq;
    int need_op;    /* the kernel does not say the operation (SendRecv, Generic): the host
                     * range its launch lies in may (kin_crange) */
    int sendrecv;   /* a SendRecv kernel: a send unless a range says more */
    int has_count;  /* ev.count is known */
    uint32_t redop; /* the reduction the kernel's name says */
    int64_t range;  /* the kin_crange it was given its operation by, -1 none */
    int drop;       /* merged into another, or of no known operation: not written */
} kin_coll;

/* A host range that names a collective (record_param_comms with a "Collective name",
 * nccl:all_to_all, c10d::alltoall_base_, ...): on its thread, the launches inside it
 * belong to that collective. */
typedef struct kin_crange {
    uint32_t thread;
    uint64_t start, end;
    uint32_t op, dtype;
    int64_t count; /* -1: not said */
    int64_t seq;   /* its "Seq" (c10d's number on the process group), -1: not said */
} kin_crange;

typedef struct kin_stream {
    uint64_t id;
    uint32_t device;
    char *name;
} kin_stream;

typedef struct kin_comm {
    uint64_t hash;
    int64_t size;
    uint32_t device;
    char *ranks; /* "Process Group Ranks" text, may be NULL */
} kin_comm;

typedef struct kin_reason {
    char name[64];
    uint64_t count;
} kin_reason;

struct kineto_importer {
    dpro_writer *w;
    kineto_options opt;
    yajl_handle yh;
    int status; /* first error, DPRO_OK if none */
    char errmsg[512];
    int finished;

    /* input position. A chunk is a piece of at most KIN_PIECE bytes of what feed got; yajl
     * parses its squeezed copy (text), positions in which are mapped back to chunk. */
    uint64_t chunk_off;  /* JSON bytes before the current chunk */
    uint64_t chunk_line; /* newlines before the current chunk */
    const unsigned char *chunk;
    size_t chunk_len;
    size_t text_len;           /* bytes of the chunk's squeezed copy (chunk_len if none) */
    int squeeze;               /* KINETO_SQUEEZE_* level in use (not AUTO) */
    imp_squeeze_fn squeeze_fn; /* NULL: OFF */
    imp_sq sq, sq_chunk;       /* squeeze state now, and where the current chunk began */
    unsigned char *sqbuf;      /* sqbuf_cap + IMP_PIECE_SLACK: the squeezed chunk */
    size_t sqbuf_cap;
    int yajl_stepped_back; /* yajl's error position is the start of a token */

    /* A long token. yajl keeps the start of a token that runs past the end of the text it
     * was given, and lexes it again from there with the next text: with KIN_PIECE pieces,
     * work quadratic in the token's length. So once KIN_PIECE bytes passed without a
     * callback (ncb unchanged), the next pieces are gathered into carry, each as long as
     * the token so far (tok_run; at most KIN_CARRY_MAX): yajl's work stays linear. */
    uint64_t ncb;         /* yajl callbacks so far */
    uint64_t tok_run;     /* squeezed bytes parsed since a piece last had a callback */
    unsigned char *carry; /* input gathered, not yet parsed */
    size_t carry_len, carry_cap;

    /* parser state */
    int ctx[KIN_MAX_DEPTH];
    int key[KIN_MAX_DEPTH];
    int depth;      /* ctx[depth] is the innermost tracked container */
    uint64_t skip;  /* depth of skipped containers below it */
    int saw_events; /* traceEvents met */
    int saw_nodes;  /* a top-level "nodes" key met (a PyTorch execution trace) */
    kin_event ev;

    /* device being read from deviceProperties */
    dpro_device_info dev;
    kin_str dev_name;

    /* what the file says about itself */
    int64_t rank, world_size, pid;
    int have_rank, have_world_size;
    kin_str nccl_version, backend, trace_id, host, trace_name, process_name;
    int64_t base_time_ns;
    int have_base_time;
    int64_t schema_version;

    /* interned constants */
    uint32_t s_cpu_op, s_user_ann, s_gpu_user_ann, s_python, s_instant;

    imp_join join; /* launches and device ops waiting for each other */

    /* side tables */
    kin_coll *colls;
    size_t ncolls, colls_cap;
    kin_stream *streams;
    size_t nstreams, streams_cap, last_stream;
    kin_comm *comms;
    size_t ncomms;
    kin_crange *cranges;
    size_t ncranges, cranges_cap;
    kin_reason reasons[KIN_MAX_REASONS];
    size_t nreasons;

    /* names, batches and the writer thread; out.events_out counts the events emitted */
    imp_out out;

    /* figures */
    uint64_t events_in, unmapped;
    uint64_t device_ops;  /* kernels, copies and sets mapped */
    uint64_t first_ts_ns; /* the earliest start of an event mapped (UINT64_MAX: none) */
};

/* ---- kineto.c: errors and counters ---------------------------------------------------- */

/* Records the first error with the current position (file, byte offset, line); returns 0
 * (yajl: stop). */
int kin_fail(kineto_importer *k, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Error of the writer: keeps its message. Returns 0. */
int kin_fail_writer(kineto_importer *k, int rc);

/* Error rc of k->out (its message in k->out.err), recorded as ours. Returns rc. */
int kin_fail_out(kineto_importer *k, int rc);

/* Counts n occurrences of reason (e.g. "unmapped.flow_fwdbwd"): meta import.<reason>. */
void kin_count(kineto_importer *k, const char *reason, uint64_t n);

/* An event that is not mapped: counted under unmapped.<what><detail>. */
void kin_unmapped(kineto_importer *k, const char *what, const char *detail, size_t dlen);

/* Copies s[0..len) into d, cut to its buffer. */
static inline void
kin_str_set(kin_str *d, const unsigned char *s, size_t len)
{
    if (len >= sizeof(d->buf))
        len = sizeof(d->buf) - 1;
    memcpy(d->buf, s, len);
    d->buf[len] = '\0';
    d->len = len;
}

/* ---- output (handoff.h), errors recorded as ours ---------------------------------------- */

static inline int
kin_emit(kineto_importer *k, const dpro_event *ev)
{
    int rc = imp_out_emit(&k->out, ev);
    return rc == DPRO_OK ? rc : kin_fail_out(k, rc);
}

/* A thread name (IMP_SIDE_THREAD) or device record (IMP_SIDE_DEVICE), with the current
 * batch. Returns DPRO_OK or the writer's error. */
static inline int
kin_emit_side(kineto_importer *k, int what, uint32_t tid, const dpro_device_info *dev,
              const char *name, size_t len)
{
    int rc = imp_out_side(&k->out, what, tid, dev, name, len);
    return rc == DPRO_OK ? rc : kin_fail_out(k, rc);
}

/* Id of s[0..len) (hash h, len > 0), interned on first sight. Returns DPRO_OK or fails. */
static inline int
kin_intern_h(kineto_importer *k, const char *s, size_t len, uint64_t h, uint32_t *id)
{
    int rc = imp_out_intern_h(&k->out, s, len, h, id);
    return rc == DPRO_OK ? rc : kin_fail_out(k, rc);
}

/* Id of the current event's name (looked up when it was read). */
static inline int
kin_intern_name(kineto_importer *k, kin_event *e, uint32_t *id)
{
    *id = e->name_id;
    if (e->name_len == 0 || e->name_id)
        return DPRO_OK;
    int rc = kin_intern_h(k, e->name, e->name_len, e->name_hash, id);
    e->name_id = *id;
    return rc;
}

/* ---- kineto_args.c: the args text of an event ----------------------------------------- */

/* Capture hooks, called by every yajl callback before anything else (kineto_parse.c):
 * they write the token into k->ev.rest when it belongs to an argument value. */
void kin_cap_key(kineto_importer *k, const unsigned char *s, size_t l, int key);
void kin_cap_scalar(kineto_importer *k, const char *text, size_t l, int is_string);
void kin_cap_open(kineto_importer *k, int array);
void kin_cap_close(kineto_importer *k);

/* Keys of k->ev's args that ev's fields hold, as a mask over enum kin_key values below 64
 * (KIN_KEYBIT). */
#define KIN_KEYBIT(key) (UINT64_C(1) << (key))

/* The number under key in e's args (a member kept in e->rest): 0 with *v set, -1 when
 * there is none or it is not a plain number. */
int kin_args_double(const kin_event *e, int key, double *v);

/* Fills ev's minor-2 fields from e: the ids (has bits), shapes and dtypes (interned JSON
 * text of "Input Dims" and "Input type"), and args: the members whose key is not in
 * taken, as one interned JSON object text (0 if none). Returns DPRO_OK or fails. */
int kin_args_fill(kineto_importer *k, kin_event *e, dpro_event *ev, uint64_t taken);

/* ---- kineto_map.c --------------------------------------------------------------------- */

/* Maps the event whose object just closed (k->ev). Returns 0 or -1 (k->status says why). */
int kin_map_event(kineto_importer *k);

/* Appends what is still held: launches waiting in the join window, the collectives.
 * Returns DPRO_OK or the first error. */
int kin_drain(kineto_importer *k);

/* The stream table entry of (id, device), created on first sight; NULL past
 * KIN_MAX_STREAMS (counted) or out of memory (k->status set). */
kin_stream *kin_stream_get(kineto_importer *k, uint64_t id, uint32_t device);

/* ---- kineto_coll.c -------------------------------------------------------------------- */

/* Builds the collective of an NCCL kernel e (kern: its mapped event; times: the kernel's
 * until its launch joins). *index receives its index in k->colls, -1 if none was made.
 * Returns DPRO_OK, DPRO_ERR_LIMIT (a count past KIN_MAX_BYTES) or DPRO_ERR_NOMEM
 * (recorded). */
int kin_add_collective(kineto_importer *k, const kin_event *e, const dpro_event *kern,
                       int64_t *index);

/* Notes the host range e (mapped as m: times, thread) if its name or arguments name a
 * collective (record_param_comms with "Collective name"; nccl:<op>; c10d::<op>): a
 * kernel launched inside it that does not say its operation takes the range's. Returns
 * DPRO_OK or DPRO_ERR_NOMEM (recorded). */
int kin_note_comm_range(kineto_importer *k, const kin_event *e, const dpro_event *m);

/* Numbers the collectives per communicator in device order (the order NCCL requires every
 * rank to issue them in) and appends them. Returns DPRO_OK or the first error. */
int kin_flush_collectives(kineto_importer *k);

/* ---- kineto_parse.c ------------------------------------------------------------------- */

/* Where an integer argument of e goes: *dst, its kin_have bit, its key's text. Returns 0,
 * or -1 for a key that is not an integer argument. */
int kin_int_slot(kin_event *e, int key, int64_t **dst, uint32_t *bit, const char **what);

/* The yajl callbacks; their context is the importer. */
extern const yajl_callbacks kin_callbacks;

#endif /* DPRO_IMPORT_KINETO_INT_H */
