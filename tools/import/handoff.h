/*
 * handoff.h: the importers' output: mapped events, in batches, to a dpro_writer on a
 * writer thread of its own (or on the caller's).
 *
 * The parsing thread (the caller's) fills a batch of IMP_BATCH_EVENTS events, with the
 * names first seen in it and the thread and device records, and hands each full batch to
 * the writer thread (IMP_BATCH_BUFFERS batches in flight; one mutex and condition variable
 * handoff per batch). The writer thread interns the names, appends the events and writes
 * the records, so encoding, zlib and SQLite run beside the parser.
 *
 * Names are interned here, in a table of the parser's whose ids are handed out in the order
 * the writer will hand out its own (the writer's intern table is not thread-safe and its
 * flush reads it); each batch lists the names first seen in it. The writer thread maps
 * those ids to the writer's (equal unless the caller interned strings before). Events refer
 * to a name only in a batch at or after the one that introduced it, so the writer always
 * knows it. The text of an interned name never moves: events being gathered may point at
 * it.
 *
 * Between imp_out_init and the return of imp_out_finish (or imp_out_free) the caller must
 * not use the writer. Functions returning a status other than DPRO_OK leave the message in
 * o->err (a writer failure is seen when the parser next hands over a batch, or by
 * imp_out_finish: up to IMP_BATCH_BUFFERS batches after the failing event).
 */
#ifndef DPRO_IMPORT_HANDOFF_H
#define DPRO_IMPORT_HANDOFF_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dprotrace.h"

#define IMP_BATCH_EVENTS 4096u   /* events per batch handed to the writer thread */
#define IMP_BATCH_BUFFERS 4u     /* batches: one being filled, the others queued or written */
#define IMP_BATCH_STRS 4096u     /* new names per batch (more: handed over early) */
#define IMP_BATCH_SIDE 256u      /* thread and device records per batch */
#define IMP_SIDE_NAME 128        /* bytes of a record's name, with its NUL */
#define IMP_SBLOCK (64u << 10)   /* bytes of a block of interned name text */
#define IMP_WRITER_BATCH 16384u  /* events per writer batch (imp_writer_options) */
#define IMP_ENDGAME_EVENTS 6144u /* events left when the writer flushes once more */

/* Interned name text, in blocks that never move (the writer thread reads them). */
typedef struct imp_sblock {
    struct imp_sblock *next;
    size_t used, cap;
    char data[];
} imp_sblock;

/* A slot of the name table. */
typedef struct imp_sent {
    uint64_t hash;
    const char *text; /* in an imp_sblock, NUL-terminated */
    uint32_t len;
    uint32_t id; /* 0: empty slot */
} imp_sent;

/* A name first seen in a batch. */
typedef struct imp_newstr {
    const char *text;
    uint32_t len, id;
} imp_newstr;

/* A thread name or a device, written by the writer thread with its batch. */
enum { IMP_SIDE_THREAD, IMP_SIDE_DEVICE };
typedef struct imp_side {
    int what;
    uint32_t tid;         /* IMP_SIDE_THREAD */
    dpro_device_info dev; /* IMP_SIDE_DEVICE (name: the name below) */
    char name[IMP_SIDE_NAME];
} imp_side;

/* What the parser hands to the writer thread. */
typedef struct imp_batch {
    dpro_event *ev;   /* IMP_BATCH_EVENTS */
    imp_newstr *strs; /* IMP_BATCH_STRS */
    imp_side *side;   /* IMP_BATCH_SIDE */
    uint32_t nev, nstrs, nside;
    int flush; /* flush the writer after this batch (near the end of the input) */
} imp_batch;

typedef struct imp_out {
    dpro_writer *w;  /* NULL: batches are dropped when full */
    const char *err; /* message of the last failure returned */

    /* names (parser side) */
    imp_sent *stab;
    size_t stab_mask;    /* slots - 1 (a power of two) */
    uint32_t nstrings;   /* ids 1..nstrings are taken */
    imp_sblock *sblocks; /* the newest first */

    /* batches and the writer thread. mu guards fullq, freeq, wstop, wabort, werr and wmsg
     * while the thread runs; cur and the name table are the parser's, remap the writer
     * thread's. */
    imp_batch bufs[IMP_BATCH_BUFFERS];
    unsigned nbufs; /* batches allocated: IMP_BATCH_BUFFERS, or 1 unthreaded */
    imp_batch *cur; /* being filled by the parser */
    int threaded;   /* the writer thread runs */
    int sync_ready; /* mu and the condition variables are initialized */
    pthread_t wthread;
    pthread_mutex_t mu;
    pthread_cond_t cv_full;              /* a batch was queued, or wstop */
    pthread_cond_t cv_free;              /* a batch was given back */
    imp_batch *fullq[IMP_BATCH_BUFFERS]; /* FIFO of batches to write */
    unsigned full_head, full_n;
    imp_batch *freeq[IMP_BATCH_BUFFERS];
    unsigned free_n;
    int wstop;       /* no more batches will come */
    int wabort;      /* drop queued batches unwritten */
    int werr;        /* first error of the writer, DPRO_OK if none */
    char wmsg[384];  /* its message */
    uint32_t *remap; /* our name id -> the writer's */
    size_t remap_cap;

    /* the input, for the flush before the last batch (the caller's to set; 0: unknown) */
    uint64_t in_total, in_pos; /* bytes of the file, read of it so far */
    int endgame;               /* the flush before the last batch was decided on */
    uint32_t wpending;         /* events handed over since the writer's last flush */

    uint64_t events_out; /* events emitted */
} imp_out;

/* Sets up o to append to w (not owned; may be NULL to map without writing: batches are
 * then dropped when full). With a writer and want_thread, starts the writer thread (if the
 * system cannot start one, batches are written on the calling thread instead). Returns
 * DPRO_OK or DPRO_ERR_NOMEM; either way imp_out_free releases o. */
int imp_out_init(imp_out *o, dpro_writer *w, int want_thread);

/* Hands the current batch over and takes an empty one: to the writer thread (waiting for a
 * free batch if all are queued), or written here, or dropped (no writer). Knowing
 * o->in_total and o->in_pos, asks the writer for one extra flush when about
 * IMP_ENDGAME_EVENTS are left by the rate so far, so that the last batch, encoded after the
 * parse, is short; not when the writer holds fewer than that many. Returns DPRO_OK, or the
 * writer's first error. */
int imp_out_handoff(imp_out *o);

/* Hands over the last batch and joins the writer thread; the writer is the caller's again.
 * Returns DPRO_OK or the writer's first error. Call once. */
int imp_out_finish(imp_out *o);

/* Drops batches not yet written (if imp_out_finish was not called), joins the thread and
 * frees o's memory. The writer is not touched. */
void imp_out_free(imp_out *o);

/* Appends *ev (its name and name2: ids from imp_out_intern) to the current batch. Returns
 * DPRO_OK or a hand-off's error. */
static inline int
imp_out_emit(imp_out *o, const dpro_event *ev)
{
    imp_batch *b = o->cur;
    o->events_out++;
    b->ev[b->nev++] = *ev;
    return b->nev == IMP_BATCH_EVENTS ? imp_out_handoff(o) : DPRO_OK;
}

/* A thread name (what IMP_SIDE_THREAD, tid) or device record (IMP_SIDE_DEVICE, *dev),
 * named name[0..len) (cut to IMP_SIDE_NAME - 1 bytes), written with the current batch.
 * Returns DPRO_OK or a hand-off's error. */
int imp_out_side(imp_out *o, int what, uint32_t tid, const dpro_device_info *dev, const char *name,
                 size_t len);

/* Hash of a name for the name table (eight bytes a step: names are long). */
static inline uint64_t
imp_str_hash(const char *s, size_t n)
{
    const uint64_t m = 0x9E3779B97F4A7C15ULL;
    uint64_t h = (uint64_t)n * m;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * m;
        h ^= h >> 32;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * m;
    }
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    return h ^ (h >> 32);
}

/* The table slot of the name s[0..len) (hash h, imp_str_hash), or NULL if not interned. */
static inline const imp_sent *
imp_out_find(const imp_out *o, const char *s, size_t len, uint64_t h)
{
    for (size_t p = h & o->stab_mask;; p = (p + 1) & o->stab_mask) {
        const imp_sent *e = &o->stab[p];
        if (e->id == 0)
            return NULL;
        if (e->hash == h && e->len == len && memcmp(e->text, s, len) == 0)
            return e;
    }
}

/* Id of s[0..len) (hash h; len > 0), interned on first sight: the text is copied to a
 * block and listed in the current batch for the writer. Returns DPRO_OK, DPRO_ERR_LIMIT
 * (too many names), DPRO_ERR_NOMEM or a hand-off's error. */
int imp_out_intern_h(imp_out *o, const char *s, size_t len, uint64_t h, uint32_t *id);

/* Id of s[0..len); 0 for the empty string. Returns as imp_out_intern_h. */
int imp_out_intern(imp_out *o, const char *s, size_t len, uint32_t *id);

/* Fills *o with the writer options imports use: exclusive create, zlib level 6, 512-byte
 * pages and batches of IMP_WRITER_BATCH events. */
void imp_writer_options(dpro_writer_options *o);

#endif /* DPRO_IMPORT_HANDOFF_H */
