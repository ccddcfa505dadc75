/* job_share.c: shared reading, the processes' exchanges (see job.h, job_options.share).
 *
 * Two messages: the first pass's results, every rank's to every process (share->gather),
 * and each rank's read, one message a rank to process 0 (share->send0, share->recv), with
 * what process 0 would otherwise take from its events, taken where they were read (its
 * clock alignment samples and iterations: put_taken). Both are flat bytes in this
 * process's layout (the processes of one job run the same build on the same
 * architecture), but for a rank's events and a folded rank's signature rows, which
 * travel compact (job_wire.c: what each holds, not its loaded bytes; a
 * cheap decoding). A process other than 0 holds its share's reads (folded ranks'
 * signatures included) until process 0 takes them at the end of the reading:
 * zlib-compressed from its wave's classification (job_share_pack), inflated just before
 * it is sent, so that process 0, whose work is serial, need not inflate them. */
#define PR_FMT "replay"
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "build.h"
#include "dpro_log.h"
#include "dprotrace.h"
#include "hmap.h"
#include "job_int.h"
#include "job_wire.h"
#include "replay.h" /* replay_rank_align_samples: taken where the rank's events are */

/* What failed and what was told: the status, its text, the warnings in order. */
static void
put_outcome(bytes *b, const rank_task *t)
{
    bytes_put_i64(b, t->rc);
    bytes_put_text(b, t->err);
    bytes_put_i64(b, (int64_t)t->n_msg);
    for (size_t k = 0; k < t->n_msg; k++)
        bytes_put_text(b, t->msg[k]);
    bytes_put_i64(b, (int64_t)t->jr->bad_batches);
}

/* Replaces t's outcome with the one put_outcome wrote. */
static void
get_outcome(bytes *b, rank_task *t)
{
    for (size_t k = 0; k < t->n_msg; k++)
        free(t->msg[k]);
    free(t->msg);
    free(t->err);
    t->rc = (int)bytes_get_i64(b);
    t->err = bytes_get_text(b);
    int64_t m = bytes_get_i64(b);
    t->n_msg = 0;
    t->msg = m > 0 && (uint64_t)m <= b->n - b->at ? calloc((size_t)m, sizeof *t->msg) : NULL;
    if (m > 0 && !t->msg)
        b->fail = 1;
    for (int64_t k = 0; !b->fail && k < m; k++)
        if ((t->msg[t->n_msg] = bytes_get_text(b)))
            t->n_msg++;
    t->jr->bad_batches = (uint64_t)bytes_get_i64(b);
}

/* What opening file o gave, as job_share_opened hands it over. */
static void
put_opened(bytes *b, const opened *o)
{
    bytes_put_i64(b, o->ok);
    bytes_put_i64(b, o->newer);
    bytes_put_text(b, o->why);
    bytes_put_i64(b, o->ended_early);
    bytes_put_text(b, o->warnings);
    bytes_put_i64(b, o->rank);
    bytes_put_i64(b, o->world);
    bytes_put_text(b, o->job_id);
}

/* Replaces o's outcome (o not opened here) with the one put_opened wrote. */
static void
get_opened(bytes *b, opened *o)
{
    job_opened_free(o);
    o->ok = (int)bytes_get_i64(b);
    o->newer = (int)bytes_get_i64(b);
    o->why = bytes_get_text(b);
    o->ended_early = (int)bytes_get_i64(b);
    o->warnings = bytes_get_text(b);
    o->rank = bytes_get_i64(b);
    o->world = bytes_get_i64(b);
    o->job_id = bytes_get_text(b);
    if ((o->ok && !o->job_id) || (!o->ok && !o->why))
        b->fail = 1; /* what put_opened writes always has them */
}

void
job_opened_free(opened *o)
{
    dpro_reader_close(o->r);
    free(o->why);
    free(o->warnings);
    free(o->job_id);
    *o = (opened){0};
}

int
job_share_opened(const job_share *sh, opened *o, const size_t *order, int32_t n, int32_t lo,
                 int32_t hi)
{
    bytes out = {0}, in = {0};
    void *all = NULL;
    size_t all_len = 0;
    for (int32_t k = lo; n > 0 && k < hi; k++)
        put_opened(&out, &o[order[k]]);
    /* every process takes part even when out of memory here (an empty share), and fails
     * afterwards on reading what it lacks */
    int rc = sh->gather(sh->ctx, out.p, out.fail || n == 0 ? 0 : out.n, &all, &all_len) != 0 ||
                     out.fail || n == 0
                 ? DPRO_ERR_NOMEM
                 : 0;
    in.p = all;
    in.n = all_len;
    for (int32_t k = 0; rc == 0 && k < n; k++) {
        opened x = {0};
        get_opened(&in, k >= lo && k < hi ? &x : &o[order[k]]); /* this process's own: kept */
        job_opened_free(&x);
        if (in.fail)
            rc = DPRO_ERR_NOMEM;
    }
    free(out.p);
    free(all);
    return rc;
}

int
job_share_bounds(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi)
{
    bytes out = {0}, in = {0};
    void *all = NULL;
    size_t all_len = 0;
    for (int32_t i = lo; i < hi; i++) {
        put_outcome(&out, &t[i]);
        bytes_put_i64(&out, t[i].method);
        bytes_put_i64(&out, t[i].nb);
        bytes_put(&out, t[i].bstart, (size_t)(t[i].nb > 0 ? t[i].nb : 0) * sizeof *t[i].bstart);
        bytes_put(&out, t[i].bend, (size_t)(t[i].nb > 0 ? t[i].nb : 0) * sizeof *t[i].bend);
        bytes_put_i64(&out, t[i].quiet_damage);
    }
    /* every process takes part even when out of memory here (an empty share), and fails
     * afterwards on reading what it lacks */
    int rc = sh->gather(sh->ctx, out.p, out.fail ? 0 : out.n, &all, &all_len) != 0 || out.fail
                 ? DPRO_ERR_NOMEM
                 : 0;
    in.p = all;
    in.n = all_len;
    for (int32_t i = 0; rc == 0 && i < n; i++) {
        rank_task x = {.jr = t[i].jr}, *d = i >= lo && i < hi ? &x : &t[i];
        job_rank keep = *t[i].jr; /* this process's own ranks keep their reads */
        get_outcome(&in, d);
        d->method = (int)bytes_get_i64(&in);
        d->nb = (int32_t)bytes_get_i64(&in);
        if (d->nb < 0 || (uint64_t)d->nb > in.n)
            in.fail = 1;
        free(d->bstart);
        free(d->bend);
        d->bstart = bytes_get_array(&in, in.fail ? 0 : (size_t)d->nb, sizeof *d->bstart);
        d->bend = bytes_get_array(&in, in.fail ? 0 : (size_t)d->nb, sizeof *d->bend);
        d->quiet_damage = (int)bytes_get_i64(&in);
        if (d == &x) {
            *t[i].jr = keep;
            x.jr = NULL;
            for (size_t k = 0; k < x.n_msg; k++)
                free(x.msg[k]);
            free(x.msg);
            free(x.err);
            free(x.bstart);
            free(x.bend);
        }
        if (in.fail)
            rc = DPRO_ERR_NOMEM;
    }
    free(out.p);
    free(all);
    return rc;
}

/* The bytes of one clock alignment sample as put_samples writes it: its fields, not the
 * padding after rank, which is never set (the message would carry uninitialised bytes). */
#define SAMPLE_BYTES (2 * sizeof(uint64_t) + sizeof(int32_t) + sizeof(int64_t))

/* Appends the n samples at s to b, field by field (SAMPLE_BYTES each). */
static void
put_samples(bytes *b, const align_sample *s, size_t n)
{
    for (size_t k = 0; k < n && !b->fail; k++) {
        bytes_put(b, &s[k].comm, sizeof s[k].comm);
        bytes_put(b, &s[k].seq, sizeof s[k].seq);
        bytes_put(b, &s[k].rank, sizeof s[k].rank);
        bytes_put(b, &s[k].end_ns, sizeof s[k].end_ns);
    }
}

/* The n samples put_samples wrote, read from b into a malloc'd array (NULL for none, or
 * with b->fail when they run past the end or memory ends). */
static align_sample *
get_samples(bytes *b, size_t n)
{
    align_sample *s =
        b->fail || n == 0 || n > (b->n - b->at) / SAMPLE_BYTES ? NULL : calloc(n, sizeof *s);
    if (n > 0 && !s)
        b->fail = 1;
    for (size_t k = 0; s && k < n; k++) {
        bytes_get(b, &s[k].comm, sizeof s[k].comm);
        bytes_get(b, &s[k].seq, sizeof s[k].seq);
        bytes_get(b, &s[k].rank, sizeof s[k].rank);
        bytes_get(b, &s[k].end_ns, sizeof s[k].end_ns);
    }
    return s;
}

/* What process 0 would take from jr's events, taken here from those sent: the clock
 * alignment samples, and the iterations where no load's cut placed them (job_rank.align,
 * job_rank.iters). */
static void
put_taken(bytes *b, const job_rank *jr)
{
    job_align_part a;
    replay_rank_iters it = {0};
    int with_iters = !jr->bounds;
    if (replay_rank_align_samples(jr, jr->rank, &a) != 0 ||
        (with_iters && replay_rank_iterations(jr, &it) != 0))
        b->fail = 1;
    bytes_put_i64(b, (int64_t)a.n);
    bytes_put_i64(b, a.from_dev);
    bytes_put_i64(b, a.from_host);
    put_samples(b, a.s, a.n);
    bytes_put_i64(b, with_iters);
    if (with_iters) {
        bytes_put_i64(b, it.method);
        bytes_put_i64(b, it.n);
        bytes_put_i64(b, (int64_t)it.period);
        bytes_put_i64(b, it.step != NULL);
        bytes_put(b, it.event_index, (size_t)it.n * sizeof *it.event_index);
        bytes_put(b, it.step, it.step ? (size_t)it.n * sizeof *it.step : 0);
    }
    free(a.s);
    replay_rank_iters_free(&it);
}

/* Takes into jr what put_taken wrote (what jr held of it replaced). */
static void
get_taken(bytes *b, job_rank *jr)
{
    job_rank_forget(jr);
    job_align_part *a = b->fail ? NULL : calloc(1, sizeof *a);
    int64_t na = bytes_get_i64(b);
    if (!a || na < 0 || (uint64_t)na > b->n)
        b->fail = 1;
    if (a) {
        a->from_dev = (int32_t)bytes_get_i64(b);
        a->from_host = (int32_t)bytes_get_i64(b);
        a->s = get_samples(b, b->fail ? 0 : (size_t)na);
        a->n = a->s ? (size_t)na : 0;
        jr->align = a;
    }
    int with_iters = bytes_get_i64(b) != 0;
    replay_rank_iters *it = with_iters && !b->fail ? calloc(1, sizeof *it) : NULL;
    if (with_iters && !it)
        b->fail = 1;
    if (it) {
        it->method = (int)bytes_get_i64(b);
        int64_t ni = bytes_get_i64(b);
        it->period = (size_t)bytes_get_i64(b);
        int with_step = bytes_get_i64(b) != 0;
        if (ni < 0 || (uint64_t)ni > b->n)
            b->fail = 1;
        it->event_index = bytes_get_array(b, b->fail ? 0 : (size_t)ni, sizeof *it->event_index);
        it->step =
            with_step ? bytes_get_array(b, b->fail ? 0 : (size_t)ni, sizeof *it->step) : NULL;
        it->n = it->event_index && (!with_step || it->step) ? (int32_t)ni : 0;
        jr->iters = it;
    }
}

/* One rank's read, as the owner sends it to process 0, with what was taken here from the
 * events sent (put_taken). */
static void
put_rank(bytes *b, const rank_task *t)
{
    const job_rank *jr = t->jr;
    put_outcome(b, t);
    bytes_put_i64(b, (int64_t)t->in_file);
    bytes_put_i64(b, (int64_t)t->loaded);
    bytes_put_i64(b, t->windowed);
    bytes_put_i64(b, t->window_ok);
    bytes_put_i64(b, (int64_t)jr->dropped);
    bytes_put_i64(b, jr->folded ? jr->fold_rep : -1); /* its signature stays until asked for */
    job_wire_put_events(b, jr->events, jr->n_events);
    put_taken(b, jr);
}

/* What process 0 received of the other processes' reads, for the log: the messages'
 * bytes; the events and the bytes they took there; the classes' spreads' bytes. */
typedef struct received {
    uint64_t bytes, events, ev_bytes, env_bytes;
} received;

/* Keeps the events get_events just read from b (from at) compact in jr->wire, their
 * expanded copy given back. Sets b->fail when out of memory. */
static void
keep_compact(bytes *b, size_t at, job_rank *jr)
{
    jr->wire_has_first_op = build_first_op(jr->events, jr->n_events, &jr->wire_first_op);
    jr->wire_len = b->at - at;
    jr->wire = b->fail ? NULL : malloc(jr->wire_len);
    if (jr->wire)
        memcpy(jr->wire, b->p + at, jr->wire_len);
    else
        b->fail = 1;
    free(jr->events);
    jr->events = NULL;
}

/* Takes one rank's read from b into t (what process 0 knew of it replaced), counting it
 * in *rv; its events kept compact (job_rank.wire) when not folding (!fold) or folded on
 * its process (read by the graph's passes, one rank at a time), and the load's cut does
 * not place its iterations here. */
static void
get_rank(bytes *b, rank_task *t, received *rv, int fold)
{
    job_rank *jr = t->jr;
    get_outcome(b, t);
    t->in_file = (uint64_t)bytes_get_i64(b);
    t->loaded = (uint64_t)bytes_get_i64(b);
    t->windowed = (int)bytes_get_i64(b);
    t->window_ok = (int)bytes_get_i64(b);
    jr->dropped = (uint64_t)bytes_get_i64(b);
    t->local_rep = (int32_t)bytes_get_i64(b);
    free(jr->events);
    size_t at = b->at;
    jr->events =
        job_wire_get_events(b, &jr->n_events); /* read whole: a damaged message fails here */
    if ((!fold || t->local_rep >= 0) && !t->bpos && jr->events)
        keep_compact(b, at, jr);
    rv->ev_bytes += b->at - at;
    rv->events += jr->n_events;
    get_taken(b, jr);
}

int
job_rank_hold_compact(job_rank *jr)
{
    bytes b = {0};
    job_wire_put_events(&b, jr->events, jr->n_events);
    int rc = b.fail ? DPRO_ERR_NOMEM : 0;
    if (rc == 0) {
        unsigned char *fit = realloc(b.p, b.n > 0 ? b.n : 1);
        jr->wire_has_first_op = build_first_op(jr->events, jr->n_events, &jr->wire_first_op);
        jr->wire = fit ? fit : b.p;
        jr->wire_len = b.n;
        b.p = NULL;
        free(jr->events);
        jr->events = NULL;
    }
    free(b.p);
    return rc;
}

int
job_rank_expand(job_rank *jr)
{
    size_t n = 0;
    bytes b = {.p = jr->wire, .n = jr->wire_len};
    int rc = 0;
    if (jr->wire && !jr->events) {
        jr->events = job_wire_get_events(&b, &n); /* read once whole when received */
        if (jr->events && n != jr->n_events) {
            free(jr->events); /* not this rank's: never */
            jr->events = NULL;
        }
        rc = jr->events ? 0 : -1;
    }
    return rc;
}

void
job_rank_hold(job_rank *jr)
{
    if (jr->events) {
        free(jr->wire);
        jr->wire = NULL;
        jr->wire_len = 0;
    }
}

void
job_rank_compact(job_rank *jr)
{
    if (jr->wire) {
        free(jr->events);
        jr->events = NULL;
    }
}

void
job_share_close_others(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi)
{
    for (int32_t i = 0; sh && sh->me != 0 && i < n; i++) {
        if (i >= lo && i < hi)
            continue;
        dpro_reader_close(t[i].jr->reader);
        t[i].jr->reader = NULL;
        t[i].jr->host = NULL; /* was the reader's meta */
    }
}

/* The zlib level of packed reads: the fastest; the signatures' repeated structure and
 * small times shrink most at any level. */
#define PACK_LEVEL 1

/* b's bytes zlib-compressed into *z (malloc'd, *zlen bytes: their size first). Returns
 * 0 or DPRO_ERR_NOMEM (*z NULL). */
static int
deflate_bytes(const bytes *b, unsigned char **z, size_t *zlen)
{
    uLongf n = b->fail ? 0 : compressBound((uLong)b->n);
    uint64_t raw = b->n;
    unsigned char *p = b->fail || b->n > (size_t)UINT32_MAX ? NULL : malloc(sizeof raw + n);
    int rc = p ? 0 : DPRO_ERR_NOMEM;
    if (rc == 0 && compress2(p + sizeof raw, &n, b->p, (uLong)b->n, PACK_LEVEL) != Z_OK)
        rc = DPRO_ERR_NOMEM; /* the bound was given: only memory can fail */
    if (rc == 0) {
        memcpy(p, &raw, sizeof raw);
        unsigned char *shrunk = realloc(p, sizeof raw + n);
        *z = shrunk ? shrunk : p;
        *zlen = sizeof raw + n;
    } else {
        free(p);
        *z = NULL;
        *zlen = 0;
    }
    return rc;
}

int
job_share_pack(job *j, rank_task *t)
{
    bytes b = {0}, sb = {0};
    unsigned char *z = NULL, *sz = NULL;
    size_t zlen = 0, szlen = 0;
    put_rank(&b, t);
    if (t->sig)
        job_wire_put_sig(&sb, t->sig);
    int rc = deflate_bytes(&b, &z, &zlen);
    if (rc == 0 && t->sig)
        rc = deflate_bytes(&sb, &sz, &szlen);
    if (rc == 0) {
        free(t->packed);
        free(t->sig_packed);
        t->packed = z;
        t->packed_len = zlen;
        t->sig_packed = sz;
        t->sig_packed_len = szlen;
        j->share_packed += zlen + szlen;
        j->share_unpacked += b.n + sb.n;
        free(t->jr->events); /* packed */
        t->jr->events = NULL;
        t->jr->n_events = 0;
        if (t->sig)
            job_fold_sig_free(t->sig);
        free(t->sig);
        t->sig = NULL;
    } else {
        free(z);
    }
    free(b.p);
    free(sb.p);
    return rc;
}

/* Unpacks into *out a read job_share_pack packed (buf, len). Returns 0, or -1 (out of
 * memory, or not what it packed). */
static int
unpack(const unsigned char *buf, size_t len, bytes *out)
{
    uint64_t raw = 0;
    *out = (bytes){0};
    if (len >= sizeof raw)
        memcpy(&raw, buf, sizeof raw);
    uLongf got = (uLongf)raw;
    int ok = len >= sizeof raw && raw <= (uint64_t)UINT32_MAX &&
             (out->p = malloc(raw > 0 ? (size_t)raw : 1)) != NULL &&
             uncompress(out->p, &got, buf + sizeof raw, (uLong)(len - sizeof raw)) == Z_OK &&
             got == raw;
    if (ok) {
        out->n = (size_t)raw;
    } else {
        free(out->p);
        out->p = NULL;
    }
    return ok ? 0 : -1;
}

int
job_share_sig_bytes(const rank_task *t, unsigned char **out, size_t *len)
{
    bytes b = {0};
    if (t->sig_packed && unpack(t->sig_packed, t->sig_packed_len, &b) != 0)
        b.fail = 1;
    else if (!t->sig_packed)
        job_wire_put_sig(&b, t->sig);
    return bytes_take(&b, out, len) == 0 ? 0 : DPRO_ERR_NOMEM;
}

job_fold_sig *
job_share_sig_take(const unsigned char *p, size_t len, int *bad)
{
    bytes b = {.p = (unsigned char *)p, .n = len};
    job_fold_sig *s = job_wire_get_sig(&b);
    *bad = b.fail || b.at != len;
    if (*bad && s) {
        job_fold_sig_free(s);
        free(s);
        s = NULL;
    }
    return s;
}

/* On a process other than 0, folding: hands process 0 the signatures of t it asks for
 * until it asks for none (-1). Returns 0 or DPRO_ERR_NOMEM. */
static int
serve_sigs(const job_share *sh, rank_task *t, int32_t lo, int32_t hi)
{
    int rc = 0;
    int64_t what = 0;
    while (rc == 0 && (rc = sh->asked(sh->ctx, &what) == 0 ? 0 : DPRO_ERR_NOMEM) == 0 &&
           what >= 0) {
        unsigned char *p = NULL;
        size_t len = 0;
        static const rank_task none = {0};
        rc = job_share_sig_bytes(what >= lo && what < hi ? &t[what] : &none, &p, &len);
        if (rc == 0 && (len > (size_t)INT32_MAX || sh->send0(sh->ctx, p, len) != 0))
            rc = DPRO_ERR_NOMEM;
        free(p);
    }
    for (int32_t i = lo; i < hi; i++) {
        free(t[i].sig_packed); /* process 0 asks no more */
        t[i].sig_packed = NULL;
    }
    return rc;
}

/* On a process other than 0: sends process 0 its classes' spreads (folding: reps), its
 * ranks t[lo, hi), then the signatures process 0 asks for. Returns 0 or a dpro_status. */
static int
send_reads(const job_share *sh, rank_task *t, int32_t lo, int32_t hi, const fold_reps *reps)
{
    bytes env = {0};
    unsigned char *z = NULL;
    size_t zlen = 0;
    int rc = reps ? job_fold_env_pack(reps, &env.p, &env.n) : 0;
    if (rc == 0 && reps)
        rc = deflate_bytes(&env, &z, &zlen); /* rows of small, repeated times */
    if (rc == 0 && reps && (zlen > (size_t)INT32_MAX || sh->send0(sh->ctx, z, zlen) != 0))
        rc = DPRO_ERR_NOMEM;
    free(env.p);
    free(z);
    for (int32_t i = lo; rc == 0 && i < hi; i++) {
        bytes b = {0};
        if (t[i].packed && unpack(t[i].packed, t[i].packed_len, &b) != 0)
            b.fail = 1; /* unpacked here, on a process that waits for process 0 anyway */
        else if (!t[i].packed)
            put_rank(&b, &t[i]);
        if (b.fail || b.n > (size_t)INT32_MAX || sh->send0(sh->ctx, b.p, b.n) != 0)
            rc = DPRO_ERR_NOMEM;
        free(b.p);
        free(t[i].packed); /* handed over */
        t[i].packed = NULL;
        free(t[i].jr->events);
        t[i].jr->events = NULL;
        t[i].jr->n_events = 0;
    }
    if (rc == 0 && reps)
        rc = serve_sigs(sh, t, lo, hi);
    return rc;
}

/* On process 0: takes process p's reads into t[plo, phi) (folding: its classes' spreads
 * first, then each rank classified against reps, in rank order), counting them in *rv.
 * Returns 0 or a dpro_status. */
static int
take_reads(job *j, const job_share *sh, int p, rank_task *t, int32_t plo, int32_t phi,
           fold_reps *reps, const job_options *o, received *rv)
{
    fold_env *envs = NULL;
    int32_t n_env = 0;
    hmap by_rep = {0};
    int rc = hmap_init(&by_rep, 16) == 0 ? 0 : DPRO_ERR_NOMEM;
    for (int32_t i = reps ? plo - 1 : plo; rc == 0 && i < phi; i++) {
        bytes b = {0};
        void *buf = NULL;
        if (sh->recv(sh->ctx, p, &buf, &b.n) != 0)
            rc = DPRO_ERR_NOMEM;
        b.p = buf;
        rv->bytes += b.n;
        if (rc == 0 && i < plo) { /* the spreads, compressed */
            bytes env = {0};
            rv->env_bytes += b.n;
            rc = unpack(b.p, b.n, &env) == 0
                     ? job_fold_env_unpack(env.p, env.n, &envs, &n_env, &by_rep)
                     : DPRO_ERR_CORRUPT;
            free(env.p);
        } else if (rc == 0) {
            get_rank(&b, &t[i], rv, reps != NULL);
        }
        if (rc == 0 && b.fail)
            rc = DPRO_ERR_NOMEM;
        free(buf);
    }
    for (int32_t i = plo; rc == 0 && reps && i < phi; i++)
        rc = job_share_classify(j, sh, p, t, i, reps, envs, &by_rep, o);
    if (rc == 0 && reps && sh->ask(sh->ctx, p, -1) != 0)
        rc = DPRO_ERR_NOMEM;
    for (int32_t k = 0; k < n_env; k++)
        job_fold_env_free(&envs[k]);
    free(envs);
    hmap_free(&by_rep);
    return rc;
}

int
job_share_collect(job *j, const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi,
                  fold_reps *reps, const job_options *o)
{
    int rc = sh->me != 0 ? send_reads(sh, t, lo, hi, reps) : 0;
    received rv = {0};
    for (int p = 1; sh->me == 0 && rc == 0 && p < sh->nprocs; p++) {
        int32_t plo, phi;
        job_share_range(&(job_share){.me = p, .nprocs = sh->nprocs}, n, &plo, &phi);
        rc = take_reads(j, sh, p, t, plo, phi, reps, o, &rv);
    }
    if (sh->me == 0 && rc == 0 && sh->nprocs > 1)
        pr_info("received the other processes' reads: %llu bytes, their %llu events in %llu "
                "(%llu as loaded), their signatures' %llu rows in %llu (%llu as held); their "
                "classes' spreads in %llu: %d folded ranks classed by their class's spread, %d "
                "by their signature",
                (unsigned long long)(rv.bytes + j->share_sig_bytes), (unsigned long long)rv.events,
                (unsigned long long)rv.ev_bytes,
                (unsigned long long)(rv.events * sizeof(job_event)),
                (unsigned long long)j->share_sig_rows, (unsigned long long)j->share_sig_bytes,
                (unsigned long long)(j->share_sig_rows * (sizeof(uint64_t) + 2 * sizeof(int64_t))),
                (unsigned long long)rv.env_bytes, j->share_by_spread, j->share_sig_asked);
    return rc;
}

int
job_share_pack_reader(const dpro_reader *r, const dpro_reader *prev, uint8_t **out, size_t *len)
{
    return dpro_reader_pack(r, prev, job_meta_names, out, len);
}

/* Process p other than 0: sends process 0 the readers of the present ranks whose files
 * it opened, in rank order, in one message (each reader's packed length, then its bytes:
 * job_share_pack_reader's, the strings as the previous reader's where they are
 * its; an empty message when it cannot pack them, then fails). Returns 0 or
 * DPRO_ERR_NOMEM. */
static int
send_readers(const job *j, const job_share *sh)
{
    bytes b = {0};
    const dpro_reader *prev = NULL;
    for (int32_t r = 0; !b.fail && r < j->n_ranks; r++) {
        const job_rank *jr = &j->ranks[r];
        uint8_t *p = NULL;
        size_t len = 0;
        if (!jr->path || !jr->reader)
            continue;
        if (job_share_pack_reader(jr->reader, prev, &p, &len) != DPRO_OK)
            b.fail = 1;
        bytes_put_i64(&b, (int64_t)len);
        bytes_put(&b, p, len);
        free(p);
        prev = jr->reader;
    }
    int rc = sh->send0(sh->ctx, b.p, b.fail ? 0 : b.n) != 0 || b.fail ? DPRO_ERR_NOMEM : 0;
    free(b.p);
    return rc;
}

/* What process 0 received of the others' readers, for the log: their count, the
 * messages' bytes, the readers sharing the strings of the one before. */
typedef struct readers_got {
    uint64_t bytes;
    int32_t n, shared;
} readers_got;

/* Process 0: takes process p's readers (its message, what send_readers wrote) as those of
 * the present ranks without one whose file p opened (proc), in rank order, and counts
 * the files of its own share of the ranks among them (opened again to read their events).
 * Returns 0 or a dpro_status (errbuf says why). */
static int
take_readers(job *j, const job_share *sh, int p, const int32_t *proc, readers_got *got,
             char *errbuf, size_t errlen)
{
    int rc = 0;
    int32_t lo, hi, k = 0;
    bytes b = {0};
    void *all = NULL;
    dpro_reader *prev = NULL; /* the one before in p's message */
    job_share_range(sh, j->n_present, &lo, &hi);
    if (sh->recv(sh->ctx, p, &all, &b.n) != 0) {
        snprintf(errbuf, errlen, "out of memory");
        rc = DPRO_ERR_NOMEM;
    }
    b.p = all;
    for (int32_t r = 0; rc == 0 && r < j->n_ranks; r++) {
        job_rank *jr = &j->ranks[r];
        int32_t at = k; /* its index among the present ranks */
        k += jr->path != NULL;
        if (!jr->path || jr->reader || proc[r] != p)
            continue;
        int64_t len = bytes_get_i64(&b);
        if (b.fail || len <= 0 || (uint64_t)len > b.n - b.at) {
            snprintf(errbuf, errlen, "%s: process %d could not send its reader", jr->path, p);
            rc = DPRO_ERR_NOMEM;
        } else {
            rc = dpro_reader_unpack(b.p + b.at, (size_t)len, jr->path, prev, &jr->reader, errbuf,
                                    errlen);
            b.at += (size_t)len;
        }
        got->n += rc == 0;
        got->shared += rc == 0 && dpro_reader_shares_strings(jr->reader, prev);
        j->files_opened += rc == 0 && at >= lo && at < hi;
        if (rc == 0) {
            jr->host = job_rank_meta(jr, JOB_META_HOST);
            prev = jr->reader;
        }
    }
    if (rc == 0 && b.at != b.n) {
        snprintf(errbuf, errlen, "process %d sent readers of other ranks than it opened", p);
        rc = DPRO_ERR_CORRUPT;
    }
    got->bytes += b.n;
    free(all);
    return rc;
}

int
job_share_readers(job *j, const listing *l, const job_share *sh, char *errbuf, size_t errlen)
{
    int rc = 0;
    int32_t *proc = sh->me == 0 ? calloc((size_t)j->n_ranks + 1, sizeof *proc) : NULL;
    if (sh->me != 0)
        rc = send_readers(j, sh);
    else if (!proc)
        rc = DPRO_ERR_NOMEM;
    if (rc != 0)
        snprintf(errbuf, errlen, "out of memory");
    for (size_t i = 0; proc && i < l->nfiles; i++) /* the files place_ranks placed */
        if (l->o[i].ok && strcmp(l->o[i].job_id, l->want) == 0)
            proc[l->o[i].rank] = l->o[i].proc;
    readers_got got = {0};
    for (int p = 1; rc == 0 && sh->me == 0 && p < sh->nprocs; p++)
        rc = take_readers(j, sh, p, proc, &got, errbuf, errlen);
    for (int32_t r = 0; rc == 0 && sh->me == 0 && r < j->n_ranks; r++)
        if (j->ranks[r].path && !j->ranks[r].reader) {
            snprintf(errbuf, errlen, "%s: no process sent its reader", j->ranks[r].path);
            rc = DPRO_ERR_CORRUPT;
        }
    if (rc == 0 && sh->me == 0 && sh->nprocs > 1)
        pr_info("received %d trace readers from the other processes (their files not opened "
                "here): %llu bytes; %d of them share the strings of the one before",
                got.n, (unsigned long long)got.bytes, got.shared);
    free(proc);
    return rc;
}
