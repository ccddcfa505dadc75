/* reader_internal.h: the reader's state, shared by reader.c, reader_open.c, reader_tables.c
 * and iter.c (not installed). */
#ifndef DPRO_READER_INTERNAL_H
#define DPRO_READER_INTERNAL_H

#include <sqlite3.h>
#include <stdint.h>

#include "dprotrace.h"

typedef struct meta_entry {
    char *key, *value;
} meta_entry;

typedef struct stack_entry {
    uint32_t id;
    uint32_t n;
    uint32_t *frames;
} stack_entry;

struct dpro_reader {
    sqlite3 *db;
    char *path;
    meta_entry *meta;
    size_t nmeta;
    char **strings; /* index = id, pointing into string_bufs; [0] unused */
    uint32_t nstrings;
    uint8_t **string_bufs; /* decompressed string blocks */
    size_t nstring_bufs;
    /* strings, string_bufs shared with other readers (dpro_reader_unpack's like): how many
     * readers hold them (malloc'd, shared, changed atomically); NULL: r's own */
    uint32_t *strings_refs;
    dpro_device_info *devices;
    size_t ndevices;
    dpro_stream_info *streams;
    size_t nstreams;
    dpro_comm_info *comms;
    size_t ncomms;
    dpro_thread_info *threads;
    size_t nthreads;
    stack_entry *stacks;
    size_t nstacks;
    int64_t max_batch_id;
    uint8_t *api_class; /* dpro_api_class of each string id, computed on first use */
    int dirfd;          /* the directory, when SQLite has it as /proc/self/fd/N/NAME; else -1 */
    int cut;            /* the file is shorter than its header says: pages are missing */
    int ended_early;    /* see dpro_reader_ended_early */
    int wal_unread;     /* a -wal lies beside it but could not be read (read-only media) */
    int immutable;      /* opened immutable: no locks, the file alone (no -wal) */
    char *warnings;     /* dpro_reader_warnings: malloc'd lines, NULL for none */
    /* the last failure's message (malloc'd at the first, DPRO_ERRBUF_SIZE bytes), NULL
     * before one: a job holds thousands of readers that never fail */
    char *errmsg;
    int errmsg_nomem; /* a failure's message could not be kept (out of memory) */
};

/* Testing only (tests/unit/test_trace_fold.c; NULL otherwise): called by a closing
 * reader's fold of a trace it read through its -wal (reader_open.c) with the trace's name
 * once it has looked whether the trace is marked complete, before it lets the trace go. */
extern void (*dpro_fold_test_hook)(const char *name, int complete);

/* Grows *arr (element size sz) so that index n fits. */
int dpro_grow(void **arr, size_t *cap, size_t n, size_t sz);

/* Sets r's message to "PATH: " and fmt with detail; returns rc. */
int dpro_reader_fail(dpro_reader *r, int rc, const char *fmt, const char *detail);

/* Adds a line "PATH: " and the printf'd text to r's warnings (nothing if out of memory). */
void dpro_reader_warn(dpro_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* reader_tables.c: each loads its part of the file into r inside the open's read
 * transaction; DPRO_OK or an error whose message r keeps (naming the table). */
int reader_load_meta(dpro_reader *r);
int reader_load_strings(dpro_reader *r);
int reader_load_tables(dpro_reader *r);

/* reader_tables.c: cuts the arrays the loads grew (room for more rows) to the rows read,
 * for a detached reader, which is held long and often one a rank. An array realloc cannot
 * cut stays as it was. */
void reader_fit_tables(dpro_reader *r);

/* Parses a schema version number: decimal digits only, at most 9 of them. Returns -1 for
 * anything else (a sign, blanks, letters, an empty text, an overflow). */
long reader_parse_version(const char *s);

#endif
