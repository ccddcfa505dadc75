/*
 * diff.h: two traces compared, as `dpro-diff A B` shows it (prefix diff_).
 *
 * A side is a trace file or a directory of them (dpro_list_traces: every rank summed),
 * optionally narrowed to iterations: SPEC@N (the events that start within the
 * ProfilerStep#N / iteration-N marker of each file) or SPEC@N-M (from the start of
 * marker N to the end of marker M). A spec that names an existing path is always a path,
 * '@' or not. Every file of a windowed side must hold those iteration markers.
 *
 * Each side is summarised per (class, name): the number of events and their total time
 * (end - start; for device operations their device time, for cpu_ops and annotations
 * their inclusive host time). Classes: cpu_op (framework operators), annotation (user
 * annotations and NVTX ranges on a host thread, Kineto's python_function excepted;
 * iteration markers are not counted), api (CUDA/HIP/NCCL host calls), kernel, memcpy,
 * memset (device operations, kernels by full name, copies and sets by their record's
 * name), collective (collector collective records, by operation). A windowed side's
 * figures are per iteration (totals divided by the window's iterations), so windows of
 * different lengths compare; whole traces count as one.
 *
 * The diff joins the two summaries on (class, name): a row is added (only in B),
 * removed (only in A), slower (more time in B), faster (less) or unchanged (the same
 * count and time). Rows are sorted by the absolute change of time, largest first (ties:
 * class, then name), unchanged rows last.
 *
 *   diff_side a, b;  diff_result d;
 *   diff_side_load("A@3", &a, err, sizeof err); diff_side_load("B", &b, ...);
 *   diff_compute(&a, &b, &d);
 *   diff_write_json(w, &a, &b, &d) / diff_print(stdout, &a, &b, &d, top)
 *   diff_result_free(&d); diff_side_free(&a); diff_side_free(&b);
 *
 * JSON (stable keys; times in microseconds; per iteration for a windowed side):
 *   a, b           {spec, path, files, events (counted), first_step, last_step (-1 for a
 *                  whole trace), iterations}
 *   totals         [{class, a_count, b_count, a_us, b_us, delta_us}] per class
 *   summary        {added, removed, slower, faster, unchanged} (rows)
 *   changes        [{class, name, status, a_count, b_count, a_us, b_us, delta_us,
 *                  delta_pct (of a_us; null when a_us is 0)}], changed rows only, sorted
 *                  as above (the top K when a limit is given)
 */
#ifndef DPRO_REPLAY_DIFF_H
#define DPRO_REPLAY_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "json_writer.h"

enum diff_class {
    DIFF_CPU_OP = 0,
    DIFF_ANNOTATION = 1,
    DIFF_API = 2,
    DIFF_KERNEL = 3,
    DIFF_MEMCPY = 4,
    DIFF_MEMSET = 5,
    DIFF_COLLECTIVE = 6,
    DIFF_NCLASSES = 7,
};

enum diff_status {
    DIFF_ADDED = 0,
    DIFF_REMOVED = 1,
    DIFF_SLOWER = 2,
    DIFF_FASTER = 3,
    DIFF_UNCHANGED = 4,
    DIFF_NSTATUS = 5,
};

/* One (class, name) of a side: events and their total time, ns (whole window). */
typedef struct diff_entry {
    int cls;
    char *name;
    int64_t count;
    int64_t total_ns;
} diff_entry;

typedef struct diff_side {
    char *spec;                    /* as given */
    char *path;                    /* the path part */
    int64_t first_step, last_step; /* the window's iteration markers, -1 whole traces */
    size_t files;
    uint64_t events; /* events counted */
    diff_entry *e;   /* sorted by class, then name; names unique per class */
    size_t n;
} diff_side;

typedef struct diff_row {
    int cls;
    const char *name; /* points into a side */
    int status;       /* enum diff_status */
    double a_count, b_count;
    double a_us, b_us; /* per iteration for a windowed side */
} diff_row;

typedef struct diff_result {
    diff_row *rows; /* sorted (see above) */
    size_t n;
    size_t by_status[DIFF_NSTATUS];
    double a_count[DIFF_NCLASSES], b_count[DIFF_NCLASSES];
    double a_us[DIFF_NCLASSES], b_us[DIFF_NCLASSES];
} diff_result;

/* Name of a class ("cpu_op", "kernel", ...) or of a status ("added", ...); "unknown" out
 * of range. */
const char *diff_class_name(int cls);
const char *diff_status_name(int status);

/* Reads the side named by spec (see above) into *out (diff_side_free, also after a
 * failure). Returns 0, or 1 on bad input (errbuf names the file and what is wrong: no
 * trace, a damaged batch, a missing iteration, a bad window), -1 out of memory. */
int diff_side_load(const char *spec, diff_side *out, char *errbuf, size_t errlen);

void diff_side_free(diff_side *s);

/* Iterations a side's figures are divided by (1 for a whole trace). */
int64_t diff_side_iterations(const diff_side *s);

/* Compares a with b into *out (diff_result_free). Returns 0 or -1 (out of memory). */
int diff_compute(const diff_side *a, const diff_side *b, diff_result *out);

void diff_result_free(diff_result *d);

/* Writes the diff as one JSON object (the keys above); top > 0 limits changes to the
 * first top rows. */
void diff_write_json(json_writer *w, const diff_side *a, const diff_side *b, const diff_result *d,
                     size_t top);

/* Prints the diff as text: the sides, the totals per class, the summary and the first
 * top changed rows (top 0: all); "no differences" when nothing changed. */
void diff_print(FILE *out, const diff_side *a, const diff_side *b, const diff_result *d,
                size_t top);

#endif
