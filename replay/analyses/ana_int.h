/*
 * ana_int.h: what the analyses of analyses.h share: the records kept from the pass over
 * the events, the joins made from them, and the computed results. Internal to
 * replay/analyses/.
 */
#ifndef DPRO_REPLAY_ANA_INT_H
#define DPRO_REPLAY_ANA_INT_H

#include "analyses.h"
#include "replay/hmap.h"
#include "replay/kernels.h"

#include <stddef.h>
#include <stdint.h>

/* A host API call kept: those that may launch device work (joined by correlation). */
typedef struct ana_api {
    uint64_t start, end, corr;
    uint32_t thread;
    uint8_t cls; /* dpro_api_class */
} ana_api;

/* A device operation (kernel, memcpy, memset). */
typedef struct ana_op {
    uint64_t start, end, corr, stream, bytes;
    uint32_t name;
    uint8_t kind, subkind;
    int32_t api; /* index into apis of its launch call, -1 if none */
} ana_op;

/* A host range: a cpu_op or a user annotation. */
typedef struct ana_range {
    uint64_t start, end;
    uint32_t thread, name;
    uint8_t cpu_op; /* 1: cpu_op, 0: annotation */
} ana_range;

/* A stream waiting for an op of another stream: the wait call (its correlation) on
 * stream, for the last op launched on rec_stream before the event record corr_rec. */
typedef struct ana_wait {
    uint64_t stream, corr_wait, rec_stream, corr_rec;
} ana_wait;

/* An event record (collector traces: the call's stream and event handle). */
typedef struct ana_record {
    uint64_t object, stream, corr;
    uint32_t thread;
} ana_record;

/* A sort key: k1, k2, k3, then idx (ana_sort_keys). */
typedef struct ana_key {
    uint64_t k1, k2, k3;
    int32_t idx;
} ana_key;

/* Summary of a set of int64 values. */
typedef struct ana_summary {
    uint64_t count;
    double mean;
    int64_t p50, p95, max;
} ana_summary;

/* Launch statistics of one kernel name (name 0 and all = 1: over all kernels). */
typedef struct ana_launch_row {
    uint32_t name;
    const char *text; /* its text */
    ana_summary cpu, delay;
} ana_launch_row;

typedef struct ana_outlier {
    int32_t op;     /* index into ops */
    uint8_t delay;  /* 1: in launch delay, 0: in CPU duration */
    int64_t value;  /* ns */
    int64_t median; /* of its kernel name */
} ana_outlier;

typedef struct ana_launch_result {
    ana_launch_row all;
    ana_launch_row *rows; /* most launches first, then by name */
    size_t nrows;
    ana_outlier *outliers; /* largest value over median first */
    size_t noutliers;
    uint64_t cpu_outliers, delay_outliers, unlaunched_kernels, other_launched;
} ana_launch_result;

typedef struct ana_idle_row {
    uint64_t stream;
    uint64_t ops, span_ns, busy_ns, host_ns, kernel_ns, other_ns, gaps;
} ana_idle_row;

typedef struct ana_idle_result {
    ana_idle_row *rows; /* by stream id */
    size_t nrows;
    ana_idle_row all; /* sums; stream 0 */
} ana_idle_result;

typedef struct ana_mem_row {
    uint8_t kind;      /* DPRO_KIND_MEMCPY or DPRO_KIND_MEMSET */
    uint8_t subkind;   /* copy kind */
    uint8_t memory;    /* ANA_MEM_* */
    int8_t size_class; /* -1: 0 bytes; k: [4^k, 4^(k+1)); 99: all sizes */
    uint64_t count, bytes, ns;
} ana_mem_row;

enum { ANA_MEM_UNKNOWN, ANA_MEM_PINNED, ANA_MEM_PAGEABLE, ANA_MEM_MANAGED, ANA_MEM_DEVICE };
#define ANA_SIZE_ALL 99

typedef struct ana_mem_result {
    ana_mem_row *rows; /* by kind, copy kind, memory, size class (all sizes first) */
    size_t nrows;
} ana_mem_result;

typedef struct ana_kname {
    uint32_t name;
    uint64_t count, ns;
} ana_kname;

typedef struct ana_op_row {
    uint32_t name;
    const char *text; /* its text */
    uint64_t instances, host_ns, launches, dev_ops, dev_ns, kernel_names;
    double delay_sum_ns;               /* summed launch delays of its device ops */
    ana_kname kernels[ANA_OP_KERNELS]; /* most device time first */
} ana_op_row;

typedef struct ana_ops_result {
    ana_op_row *ops, *anns; /* most device time first, then by name */
    size_t nops, nanns;
    uint64_t dev_ops, dev_ns;                                /* all device ops */
    uint64_t op_dev_ops, op_dev_ns, ann_dev_ops, ann_dev_ns; /* of those, charged */
} ana_ops_result;

typedef struct ana_queue_row {
    uint64_t stream, ops, max_len, window_ns;
    double mean_len;
    uint64_t blocked_calls, blocked_ns;
} ana_queue_row;

typedef struct ana_queue_result {
    int32_t depth, per_stream, long_calls, explained;
    int64_t launch_cost_ns, long_ns;
    uint64_t blocked_calls, blocked_ns;
    ana_queue_row *rows; /* by stream id */
    size_t nrows;
} ana_queue_result;

typedef struct ana_seq_row {
    uint8_t n;
    uint32_t names[ANA_SEQ_MAX];
    const char *text[ANA_SEQ_MAX]; /* their texts (set in the result rows only) */
    uint64_t count, ns;
} ana_seq_row;

typedef struct ana_seq_result {
    ana_seq_row *rows[ANA_SEQ_MAX + 1]; /* [n]: the top n-grams, most frequent first */
    size_t nrows[ANA_SEQ_MAX + 1], distinct[ANA_SEQ_MAX + 1];
    uint64_t dev_ns; /* device time of all device ops */
} ana_seq_result;

struct ana_collect {
    dpro_reader *r;
    ana_options o;
    ana_api *apis;
    size_t napis, capis;
    ana_op *ops;
    size_t nops, cops;
    ana_range *ranges;
    size_t nranges, cranges;
    ana_wait *waits;
    size_t nwaits, cwaits;
    ana_record *records;
    size_t nrecords, crecords;
    uint32_t id_user_ann, id_python; /* string ids of those name2 texts, 0 if absent */
    hmap record_of;                  /* event handle -> index into records (latest) */
    int record_of_ok;
    int32_t *by_stream;   /* ops sorted by stream, then start */
    int32_t *by_corr;     /* ops sorted by stream, then correlation */
    size_t *stream_first; /* nstreams + 1 offsets into by_stream */
    uint64_t *stream_ids;
    size_t nstreams;
    ana_launch_result launch;
    ana_idle_result idle;
    ana_mem_result mem;
    ana_ops_result opsr;
    ana_queue_result queue;
    ana_seq_result seq;
};

/* Sorts k[0..n) by k1, k2, k3, idx. */
void ana_sort_keys(ana_key *k, size_t n);

/* Grows *arr (element size sz, *cap elements) to hold one more than n. Returns 0 or -1. */
int ana_grow(void **arr, size_t *cap, size_t n, size_t sz);

/* Summary of v[0..n) (sorted in place); percentiles by nearest rank: the value at
 * position ceil(p n / 100) of the sorted values. */
void ana_summarise(int64_t *v, size_t n, ana_summary *s);

/* Share in percent (0 when whole is 0). */
double ana_pct(double part, double whole);

/* The index of the op among positions [lo, hi) of by_corr (one stream) with the
 * largest correlation below corr, or -1 (ops without a correlation are passed over). */
int32_t ana_last_before(const ana_collect *c, size_t lo, size_t hi, uint64_t corr);

/* The position of stream id s in stream_ids, or -1. */
ptrdiff_t ana_stream_index(const ana_collect *c, uint64_t s);

/* The short names of the kernels ids[0..n) of c's trace as a table shows them
 * (kernels_short_names: template arguments where two are alike), malloc'd; NULL out of
 * memory (said on stderr). */
kernels_name_buf *ana_short_names(const ana_collect *c, const uint32_t *ids, size_t n);

/* Name of a copy kind ("HtoD", ...) and of a memory (ANA_MEM_*). */
const char *ana_copy_kind_name(unsigned subkind);
const char *ana_memory_name(unsigned memory);

/* Each analysis X (one file each): ana_X_compute fills its result in c from the records
 * and joins of the pass (after ana_collect_finish's joins; returns 0, or -1 out of
 * memory, leaving a partial result that ana_collect_free frees); ana_X_json writes its
 * members into the open JSON object (keys in analyses.h); ana_X_print writes its text
 * table; ana_X_free (where there is one) frees its result and zeroes it. */
int ana_launch_compute(ana_collect *c);
void ana_launch_json(json_writer *w, const ana_collect *c);
void ana_launch_print(FILE *out, const ana_collect *c);
void ana_launch_free(ana_launch_result *l);

int ana_idle_compute(ana_collect *c);
void ana_idle_json(json_writer *w, const ana_collect *c);
void ana_idle_print(FILE *out, const ana_collect *c);

int ana_mem_compute(ana_collect *c);
void ana_mem_json(json_writer *w, const ana_collect *c);
void ana_mem_print(FILE *out, const ana_collect *c);

int ana_ops_compute(ana_collect *c);
void ana_ops_json(json_writer *w, const ana_collect *c);
void ana_ops_print(FILE *out, const ana_collect *c);
void ana_ops_free(ana_ops_result *o);

int ana_queue_compute(ana_collect *c);
void ana_queue_json(json_writer *w, const ana_collect *c);
void ana_queue_print(FILE *out, const ana_collect *c);

int ana_seq_compute(ana_collect *c);
void ana_seq_json(json_writer *w, const ana_collect *c);
void ana_seq_print(FILE *out, const ana_collect *c);
void ana_seq_free(ana_seq_result *s);

#endif
