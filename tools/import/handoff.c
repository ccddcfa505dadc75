/*
 * handoff.c: the importers' output (handoff.h): the name table, the batches and the writer
 * thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handoff.h"

/* Writes batch b to the writer: its new names (recording the writer's ids in o->remap),
 * its thread and device records, then its events with their names mapped. Runs on the
 * writer thread (or the parser's when there is none). Returns DPRO_OK or the writer's
 * error, with the message in msg. */
static int
imp_write_batch(imp_out *o, imp_batch *b, char *msg, size_t msglen)
{
    dpro_writer *w = o->w;
    int rc = DPRO_OK;
    for (uint32_t i = 0; i < b->nstrs && rc == DPRO_OK; i++) {
        const imp_newstr *ns = &b->strs[i];
        if (ns->id >= o->remap_cap) {
            size_t cap = o->remap_cap * 2;
            while (cap <= ns->id)
                cap *= 2;
            uint32_t *r = realloc(o->remap, cap * sizeof(*r));
            if (!r) {
                snprintf(msg, msglen, "out of memory (string ids)");
                return DPRO_ERR_NOMEM;
            }
            o->remap = r;
            o->remap_cap = cap;
        }
        rc = dpro_writer_intern_len(w, ns->text, ns->len, &o->remap[ns->id]);
    }
    for (uint32_t i = 0; i < b->nside && rc == DPRO_OK; i++) {
        imp_side *sd = &b->side[i];
        if (sd->what == IMP_SIDE_THREAD) {
            rc = dpro_writer_add_thread(w, sd->tid, sd->name);
        } else {
            sd->dev.name = sd->name;
            rc = dpro_writer_add_device(w, &sd->dev);
        }
    }
    const uint32_t *remap = o->remap;
    for (uint32_t i = 0; i < b->nev && rc == DPRO_OK; i++) {
        dpro_event *ev = &b->ev[i];
        ev->name = remap[ev->name];
        ev->name2 = remap[ev->name2];
        rc = dpro_writer_append(w, ev);
    }
    if (rc == DPRO_OK && b->flush)
        rc = dpro_writer_flush(w);
    if (rc != DPRO_OK)
        snprintf(msg, msglen, "writing the trace: %s (%s)", dpro_status_str(rc),
                 dpro_writer_errmsg(w));
    return rc;
}

static void
imp_batch_reset(imp_batch *b)
{
    b->nev = b->nstrs = b->nside = 0;
    b->flush = 0;
}

/* The writer thread: writes queued batches in order and gives them back, until wstop and
 * the queue is empty. After an error (or wabort) batches are given back unwritten. */
static void *
imp_writer_main(void *arg)
{
    imp_out *o = arg;
    char msg[sizeof(o->wmsg)];
    pthread_mutex_lock(&o->mu);
    for (;;) {
        while (o->full_n == 0 && !o->wstop)
            pthread_cond_wait(&o->cv_full, &o->mu);
        if (o->full_n == 0)
            break;
        imp_batch *b = o->fullq[o->full_head];
        o->full_head = (o->full_head + 1) % IMP_BATCH_BUFFERS;
        o->full_n--;
        int skip = o->werr != DPRO_OK || o->wabort;
        pthread_mutex_unlock(&o->mu);
        int rc = skip ? DPRO_OK : imp_write_batch(o, b, msg, sizeof(msg));
        imp_batch_reset(b);
        pthread_mutex_lock(&o->mu);
        if (rc != DPRO_OK && o->werr == DPRO_OK) {
            o->werr = rc;
            memcpy(o->wmsg, msg, sizeof(o->wmsg));
        }
        o->freeq[o->free_n++] = b;
        pthread_cond_signal(&o->cv_free);
    }
    pthread_mutex_unlock(&o->mu);
    return NULL;
}

/* ---- output: the parser side -------------------------------------------------------------- */

/* Hands the current batch over and takes an empty one: to the writer thread (waiting for a
 * free batch if all are queued), or written here (inline_writer), or dropped (no writer).
 * Returns DPRO_OK, or the writer's first error, recorded as ours. */

int
imp_out_handoff(imp_out *o)
{
    imp_batch *b = o->cur;
    int werr;
    /* The writer's last batch is encoded after the parse has ended, so keep it short:
     * flush once more when about IMP_ENDGAME_EVENTS are left (fewer would cost more in
     * compression than they save in time). The events left are estimated from the
     * compressed bytes left, at the rate so far. But only if the writer holds at least as
     * many already: else the last batch is at most twice that anyway, and a small input
     * stays one batch and one block of strings (each batch and block costs bytes). */
    o->wpending += b->nev;
    if (o->wpending >= IMP_WRITER_BATCH) /* the writer flushed by itself */
        o->wpending -= IMP_WRITER_BATCH;
    if (!o->endgame && o->in_total && o->in_pos && o->in_pos <= o->in_total &&
        (double)(o->in_total - o->in_pos) * (double)o->events_out <
            (double)IMP_ENDGAME_EVENTS * (double)o->in_pos) {
        o->endgame = 1;
        if (o->wpending >= IMP_ENDGAME_EVENTS) {
            b->flush = 1;
            o->wpending = 0;
        }
    }
    if (o->threaded) {
        pthread_mutex_lock(&o->mu);
        o->fullq[(o->full_head + o->full_n) % IMP_BATCH_BUFFERS] = b;
        o->full_n++;
        pthread_cond_signal(&o->cv_full);
        while (o->free_n == 0)
            pthread_cond_wait(&o->cv_free, &o->mu);
        o->cur = o->freeq[--o->free_n];
        werr = o->werr;
        pthread_mutex_unlock(&o->mu);
    } else {
        if (o->w && o->werr == DPRO_OK)
            o->werr = imp_write_batch(o, b, o->wmsg, sizeof(o->wmsg));
        imp_batch_reset(b);
        werr = o->werr;
    }
    if (werr != DPRO_OK)
        o->err = o->wmsg;
    return werr;
}

int
imp_out_finish(imp_out *o)
{
    imp_batch *b = o->cur;
    if (b->nev || b->nstrs || b->nside)
        imp_out_handoff(o);
    if (o->threaded) {
        pthread_mutex_lock(&o->mu);
        o->wstop = 1;
        pthread_cond_signal(&o->cv_full);
        pthread_mutex_unlock(&o->mu);
        pthread_join(o->wthread, NULL);
        o->threaded = 0;
    }
    if (o->werr != DPRO_OK)
        o->err = o->wmsg;
    return o->werr;
}

int
imp_out_side(imp_out *o, int what, uint32_t tid, const dpro_device_info *dev, const char *name,
             size_t len)
{
    imp_batch *b = o->cur;
    imp_side *sd = &b->side[b->nside++];
    sd->what = what;
    sd->tid = tid;
    if (dev)
        sd->dev = *dev;
    if (len >= sizeof(sd->name))
        len = sizeof(sd->name) - 1;
    memcpy(sd->name, name, len);
    sd->name[len] = '\0';
    return b->nside == IMP_BATCH_SIDE ? imp_out_handoff(o) : DPRO_OK;
}

/* Doubles the name table. Returns DPRO_OK or DPRO_ERR_NOMEM. */
static int
imp_str_grow(imp_out *o)
{
    size_t n = (o->stab_mask + 1) * 2;
    imp_sent *t = calloc(n, sizeof(*t));
    if (!t)
        return DPRO_ERR_NOMEM;
    for (size_t i = 0; i <= o->stab_mask; i++) {
        if (!o->stab[i].id)
            continue;
        size_t p = o->stab[i].hash & (n - 1);
        while (t[p].id)
            p = (p + 1) & (n - 1);
        t[p] = o->stab[i];
    }
    free(o->stab);
    o->stab = t;
    o->stab_mask = n - 1;
    return DPRO_OK;
}

int
imp_out_intern_h(imp_out *o, const char *s, size_t len, uint64_t h, uint32_t *id)
{
    const imp_sent *e = imp_out_find(o, s, len, h);
    if (e) {
        *id = e->id;
        return DPRO_OK;
    }
    if (o->nstrings == UINT32_MAX - 1 || len > UINT32_MAX - 1) {
        o->err = "too many distinct names";
        return DPRO_ERR_LIMIT;
    }
    imp_sblock *blk = o->sblocks;
    if (!blk || blk->cap - blk->used < len + 1) {
        size_t cap = len + 1 > IMP_SBLOCK ? len + 1 : IMP_SBLOCK;
        blk = malloc(sizeof(*blk) + cap);
        if (!blk) {
            o->err = "out of memory (names)";
            return DPRO_ERR_NOMEM;
        }
        blk->used = 0;
        blk->cap = cap;
        blk->next = o->sblocks;
        o->sblocks = blk;
    }
    char *text = blk->data + blk->used;
    memcpy(text, s, len);
    text[len] = '\0';
    blk->used += len + 1;
    size_t p = h & o->stab_mask;
    while (o->stab[p].id)
        p = (p + 1) & o->stab_mask;
    imp_sent *slot = &o->stab[p];
    slot->hash = h;
    slot->text = text;
    slot->len = (uint32_t)len;
    slot->id = ++o->nstrings;
    *id = slot->id;
    if ((size_t)o->nstrings * 2 > o->stab_mask && imp_str_grow(o) != DPRO_OK) {
        o->err = "out of memory (names)";
        return DPRO_ERR_NOMEM;
    }
    imp_batch *b = o->cur;
    b->strs[b->nstrs++] = (imp_newstr){.text = text, .len = (uint32_t)len, .id = *id};
    return b->nstrs == IMP_BATCH_STRS ? imp_out_handoff(o) : DPRO_OK;
}

int
imp_out_intern(imp_out *o, const char *s, size_t len, uint32_t *id)
{
    *id = 0;
    if (len == 0)
        return DPRO_OK;
    return imp_out_intern_h(o, s, len, imp_str_hash(s, len), id);
}

/* Starts the writer thread (o->threaded says whether it runs). */
static void
imp_out_start_thread(imp_out *o)
{
    for (unsigned i = 1; i < o->nbufs; i++)
        o->freeq[o->free_n++] = &o->bufs[i];
    if (pthread_mutex_init(&o->mu, NULL) == 0) {
        if (pthread_cond_init(&o->cv_full, NULL) == 0) {
            if (pthread_cond_init(&o->cv_free, NULL) == 0) {
                o->sync_ready = 1;
            } else {
                pthread_cond_destroy(&o->cv_full);
                pthread_mutex_destroy(&o->mu);
            }
        } else {
            pthread_mutex_destroy(&o->mu);
        }
    }
    /* no thread (a system limit): the same work on this thread */
    o->threaded = o->sync_ready && pthread_create(&o->wthread, NULL, imp_writer_main, o) == 0;
}

int
imp_out_init(imp_out *o, dpro_writer *w, int want_thread)
{
    memset(o, 0, sizeof(*o));
    o->w = w;
    o->err = "";
    o->stab_mask = 1023;
    o->stab = calloc(o->stab_mask + 1, sizeof(*o->stab));
    /* a writer thread needs batches to queue; without one, one batch is refilled */
    want_thread = want_thread && w;
    o->nbufs = want_thread ? IMP_BATCH_BUFFERS : 1;
    int ok = o->stab != NULL;
    for (unsigned i = 0; ok && i < o->nbufs; i++) {
        imp_batch *b = &o->bufs[i];
        b->ev = malloc(IMP_BATCH_EVENTS * sizeof(*b->ev));
        b->strs = malloc(IMP_BATCH_STRS * sizeof(*b->strs));
        b->side = malloc(IMP_BATCH_SIDE * sizeof(*b->side));
        ok = b->ev && b->strs && b->side;
    }
    if (ok && w) {
        o->remap_cap = 1024;
        o->remap = calloc(o->remap_cap, sizeof(*o->remap)); /* remap[0] = 0: no name */
        ok = o->remap != NULL;
    }
    if (!ok) {
        o->err = "out of memory";
        return DPRO_ERR_NOMEM;
    }
    o->cur = &o->bufs[0];
    if (want_thread)
        imp_out_start_thread(o);
    return DPRO_OK;
}

void
imp_out_free(imp_out *o)
{
    if (o->threaded) {
        /* not finished: drop what is queued, let the thread end */
        pthread_mutex_lock(&o->mu);
        o->wabort = o->wstop = 1;
        pthread_cond_signal(&o->cv_full);
        pthread_mutex_unlock(&o->mu);
        pthread_join(o->wthread, NULL);
        o->threaded = 0;
    }
    if (o->sync_ready) {
        pthread_cond_destroy(&o->cv_free);
        pthread_cond_destroy(&o->cv_full);
        pthread_mutex_destroy(&o->mu);
        o->sync_ready = 0;
    }
    for (unsigned i = 0; i < IMP_BATCH_BUFFERS; i++) {
        free(o->bufs[i].ev);
        free(o->bufs[i].strs);
        free(o->bufs[i].side);
        o->bufs[i].ev = NULL;
        o->bufs[i].strs = NULL;
        o->bufs[i].side = NULL;
    }
    free(o->remap);
    o->remap = NULL;
    free(o->stab);
    o->stab = NULL;
    while (o->sblocks) {
        imp_sblock *next = o->sblocks->next;
        free(o->sblocks);
        o->sblocks = next;
    }
}

void
imp_writer_options(dpro_writer_options *o)
{
    memset(o, 0, sizeof(*o));
    o->exclusive_create = 1;
    /* level 6: the cheapest level that keeps the sampled 128-rank traces 4x smaller than
     * their gzip'd JSON (the measurement: docs/figures.md, Importer) */
    o->zlib_level = 6;
    o->batch_events = IMP_WRITER_BATCH;
    o->page_size = 512; /* imported traces are often small: the fixed pages dominate */
    /* one sync a trace, at its close: a small file's flushes waited on the disk 17 times
     * (an import interrupted by a crash is run again) */
    o->sync_at_close = 1;
}
