/*
 * analyses.h: the trace analyses Holistic Trace Analysis users expect (prefix ana_), as
 * `dpro-info --launch --idle --memcpy --ops --queue --sequences` shows them, computed
 * over one trace (one rank) from one pass over its events:
 *
 *   launch     per kernel launch (a kernel joined by correlation id to a launch call of
 *              class DPRO_API_CLASS_LAUNCH): the call's CPU duration and the launch delay
 *              (kernel start minus the call's end); count, mean, p50, p95 and max per
 *              kernel name and over all kernels; outliers listed (ANA_OUTLIER_* below).
 *   idle       per stream: span (first device op start to last end), busy (the union of
 *              its device ops), idle = span - busy, each gap between ops split into host
 *              wait (from the previous op's end until the next op's launch call ended:
 *              nothing was queued), kernel wait (then until the op on another stream it
 *              waits for through a stream-wait event ended) and other (the rest: launch
 *              latency, unknown causes; a gap before an op with no launch call is other).
 *              A wait (Kineto's "Stream Wait Event" sync record, or a collector's
 *              cudaStreamWaitEvent with its event handle matched to the last
 *              cudaEventRecord of that handle) holds the first op launched on its stream
 *              after it (correlation order) for the last op launched on the recording
 *              stream before the record.
 *   memcpy     copies and sets by kind (HtoD, DtoH, DtoD, ...), memory (pinned, pageable,
 *              device, managed, unknown: from the record's name, as Kineto writes it) and
 *              size class (powers of 4 bytes: [4^k, 4^(k+1)), 0 bytes alone): count,
 *              bytes, device time, bandwidth (bytes / device time).
 *   ops        each device op whose launch call has a cpu_op around it on its host thread
 *              is charged to the innermost one (the latest starting, then the shortest);
 *              per op name: instances, host time, launch calls, device ops, device time,
 *              mean launch delay and its kernels; likewise for user annotations (host
 *              ranges that are not cpu_ops: Kineto user_annotation, NVTX ranges).
 *   queue      per stream, the launch queue's length over time (an op counts from the
 *              start of its launch call until it ends): max and time-weighted mean over
 *              [first enqueue, last end]; the queue depth Q inferred as the replay does
 *              (replay/build.h, build_launch_queue: same thresholds), and the time launch
 *              calls were held by a full queue (from the call's start until the op Q
 *              places earlier in its queue ended, when that was within the call).
 *   sequences  n-grams (n = 2..4) of kernel names on one stream (kernels in start order,
 *              broken by a copy or a set between them; windows overlap), most frequent
 *              first: count, device time of their kernels and its share of the trace's
 *              device time (all device ops).
 *
 * JSON (ana_write_json; stable keys; times in microseconds, _us; shares in percent, _pct):
 *   launch     launches, unlaunched_kernels (no launch call joined), other_launched
 *              (joined to another call: graph launches, copies), cpu{mean_us, p50_us,
 *              p95_us, max_us}, delay{same}, outlier_rule, cpu_outliers, delay_outliers,
 *              kernel_names, kernels[{name, short_name, count, cpu{}, delay{}}] (most
 *              launches first), outliers[{name, what: "cpu" | "delay", us, median_us,
 *              start_us (kernel start), correlation}] (largest excess over the median first)
 *   idle       waits, all{ROW}, streams[{stream, ROW}]; ROW: ops, gaps, span_us, busy_us,
 *              idle_us, idle_pct (of span), host_wait_us, kernel_wait_us, other_us,
 *              host_wait_pct, kernel_wait_pct, other_pct (of idle)
 *   memcpy     kinds[{op: "memcpy" | "memset", kind: "HtoD" | "DtoH" | "DtoD" | "HtoH" |
 *              "PtoP" | "Default" | "memset", memory: "pinned" | "pageable" | "managed" |
 *              "device" | "unknown", count, bytes, us, gb_per_s, sizes[{size_min, size_max
 *              (the class [min, max) in bytes; 0 bytes: [0, 1)), count, bytes, us,
 *              gb_per_s}]}]
 *   ops        device_ops, device_us (all device ops), charged{cpu_op{device_ops,
 *              device_us}, annotation{same}}, op_names, annotation_names, cpu_ops[OP],
 *              annotations[OP] (most device time first); OP: name, instances, host_us,
 *              launches, device_ops, device_us, device_pct, launch_delay_mean_us,
 *              kernel_names, kernels[{name, short_name, count, device_us}] (up to
 *              ANA_OP_KERNELS, most device time first)
 *   queue      depth (0: no full queue seen), scope: "stream" | "device" | "none",
 *              long_calls, explained, launch_cost_us, long_us, blocked_calls, blocked_us,
 *              streams[{stream, ops (launched), max_len, mean_len, window_us,
 *              blocked_calls, blocked_us}]
 *   sequences  device_us, by_length[{n, distinct, top[{names[n], short_names[n], count,
 *              device_us, share_pct}]}] for n = 2..ANA_SEQ_MAX (most frequent first)
 *
 *   ana_collect *c;
 *   ana_collect_new(reader, &opts, &c);
 *   ana_collect_event(c, &ev);        for each decoded event, in the iterator's order
 *   ana_collect_finish(c);            computes the analyses asked for
 *   ana_write_json(w, c) / ana_print(stdout, title, c)
 *   ana_collect_free(c);
 *
 * Names point into the reader's string table: keep the reader open while c is used.
 */
#ifndef DPRO_REPLAY_ANALYSES_H
#define DPRO_REPLAY_ANALYSES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dprotrace.h"
#include "json_writer.h"

/* Which analyses (ana_options.which). */
enum {
    ANA_LAUNCH = 1u << 0,
    ANA_IDLE = 1u << 1,
    ANA_MEMCPY = 1u << 2,
    ANA_OPS = 1u << 3,
    ANA_QUEUE = 1u << 4,
    ANA_SEQUENCES = 1u << 5,
    ANA_ALL = (1u << 6) - 1,
};

/* A launch is an outlier in its CPU duration when it took more than ANA_OUTLIER_FACTOR
 * times the median of its kernel name and more than ANA_OUTLIER_CPU_MIN_NS (HTA's
 * runtime cutoff); in its launch delay likewise with ANA_OUTLIER_DELAY_MIN_NS (HTA's
 * launch delay cutoff). */
#define ANA_OUTLIER_FACTOR 10
#define ANA_OUTLIER_CPU_MIN_NS 50000
#define ANA_OUTLIER_DELAY_MIN_NS 100000
/* Kernels listed per cpu_op or annotation name. */
#define ANA_OP_KERNELS 5
/* Longest kernel sequence counted. */
#define ANA_SEQ_MAX 4

typedef struct ana_options {
    unsigned which;    /* ANA_* bits */
    size_t top_launch; /* kernel names and outliers listed by launch */
    size_t top_ops;    /* cpu_op and annotation names listed by ops */
    size_t top_seq;    /* sequences listed per length */
} ana_options;

typedef struct ana_collect ana_collect;

/* Starts the analyses o->which of the trace of r. Returns 0 with *out set (free with
 * ana_collect_free), or -1 out of memory. */
int ana_collect_new(dpro_reader *r, const ana_options *o, ana_collect **out);

/* Takes one event of that trace (events of no interest are ignored). Returns 0, or -1
 * out of memory (c is then unusable but for ana_collect_free). */
int ana_collect_event(ana_collect *c, const dpro_event *ev);

/* Computes the analyses from what was collected. Returns 0, or -1 out of memory. */
int ana_collect_finish(ana_collect *c);

/* Writes the analyses asked for as members of the JSON object open in w: launch, idle,
 * memcpy, ops, queue, sequences, each an object with the keys listed above. */
void ana_write_json(json_writer *w, const ana_collect *c);

/* Prints the analyses asked for as text on out, each under a heading that starts with
 * title. */
void ana_print(FILE *out, const char *title, const ana_collect *c);

/* Frees c (NULL is fine). */
void ana_collect_free(ana_collect *c);

#endif
