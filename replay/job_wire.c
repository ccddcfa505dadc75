/* job_wire.c: the compact parts of shared reading's messages (job_wire.h): a rank's
 * events and a folded rank's signature rows as varints, what each holds rather than its
 * loaded bytes, and the two alone (job_share_wire_pack, job_share_wire_unpack). */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "hmap.h"
#include "job_int.h"
#include "job_wire.h"
#include "varint.h"

/* The events of a rank's read travel compact (job_wire_put_events): each event a varint mask of
 * its nonzero fields, then those fields as LEB128 varints, in ev_fields' order; the
 * start as its difference from the event before, the end from its own start, the
 * correlation from the one before (zigzag-coded), so that an event of the loaded 160
 * bytes costs what it holds (most fields are zero for any one kind of event). */
typedef struct ev_field {
    uint16_t off;
    uint8_t size; /* 4 or 8 */
} ev_field;

#define EV_FIELD(m)                                                                                \
    {                                                                                              \
        offsetof(job_event, m), sizeof(((job_event *)0)->m)                                        \
    }

/* The fields after the three coded as differences (start, end, correlation), those a
 * kernel or an API call holds first, so that their mask takes two bytes. */
static const ev_field ev_fields[] = {
    EV_FIELD(kind),       EV_FIELD(name),     EV_FIELD(stream),   EV_FIELD(device),
    EV_FIELD(thread),     EV_FIELD(grid[0]),  EV_FIELD(grid[1]),  EV_FIELD(grid[2]),
    EV_FIELD(block[0]),   EV_FIELD(block[1]), EV_FIELD(block[2]), EV_FIELD(subkind),
    EV_FIELD(shared_mem), EV_FIELD(bytes),    EV_FIELD(address),  EV_FIELD(object),
    EV_FIELD(comm),       EV_FIELD(seq),      EV_FIELD(count),    EV_FIELD(value),
    EV_FIELD(name2),      EV_FIELD(result),   EV_FIELD(dtype),    EV_FIELD(redop),
    EV_FIELD(peer)};

#define EV_N_DIFF 3
#define EV_N (EV_N_DIFF + (int)(sizeof ev_fields / sizeof ev_fields[0]))

/* The n events ev, compact (see ev_field): their count, then each event. */
void
job_wire_put_events(bytes *b, const job_event *ev, size_t n)
{
    uint8_t buf[(EV_N + 1) * DPRO_VARINT_MAX];
    uint64_t prev_start = 0, prev_corr = 0;
    bytes_put_i64(b, (int64_t)n);
    for (size_t i = 0; i < n && !b->fail; i++) {
        const job_event *e = &ev[i];
        uint64_t v[EV_N], mask = 0;
        v[0] = zigzag((int64_t)(e->start_ns - prev_start));
        v[1] = zigzag((int64_t)(e->end_ns - e->start_ns));
        v[2] = zigzag((int64_t)(e->correlation - prev_corr));
        for (int k = EV_N_DIFF; k < EV_N; k++) {
            const ev_field *f = &ev_fields[k - EV_N_DIFF];
            uint32_t w;
            if (f->size == 8) {
                memcpy(&v[k], (const char *)e + f->off, 8);
            } else {
                memcpy(&w, (const char *)e + f->off, 4);
                v[k] = w;
            }
        }
        for (int k = 0; k < EV_N; k++)
            mask |= (uint64_t)(v[k] != 0) << k;
        uint8_t *q = dpro_put_varint(buf, mask);
        for (int k = 0; k < EV_N; k++)
            if (v[k])
                q = dpro_put_varint(q, v[k]);
        bytes_put(b, buf, (size_t)(q - buf));
        prev_start = e->start_ns;
        prev_corr = e->correlation;
    }
}

/* The events job_wire_put_events wrote, malloc'd (NULL for none; b->fail when they do not fit
 * or memory ends), their count in *n. */
job_event *
job_wire_get_events(bytes *b, size_t *n)
{
    int64_t ne = bytes_get_i64(b);
    *n = 0;
    /* an event is at least its mask's byte */
    if (ne < 0 || (ne > 0 && (uint64_t)ne > b->n - b->at))
        b->fail = 1;
    job_event *ev = b->fail || ne == 0 ? NULL : calloc((size_t)ne, sizeof *ev);
    uint64_t prev_start = 0, prev_corr = 0;
    if (ne > 0 && !ev)
        b->fail = 1;
    for (int64_t i = 0; ev && i < ne && !b->fail; i++) {
        job_event *e = &ev[i];
        uint64_t v[EV_N] = {0}, mask = bytes_get_varint(b);
        if (mask >> EV_N)
            b->fail = 1; /* not what put_events writes */
        for (int k = 0; k < EV_N; k++)
            if (mask >> k & 1)
                v[k] = bytes_get_varint(b);
        e->start_ns = prev_start + (uint64_t)unzigzag(v[0]);
        e->end_ns = e->start_ns + (uint64_t)unzigzag(v[1]);
        e->correlation = prev_corr + (uint64_t)unzigzag(v[2]);
        for (int k = EV_N_DIFF; k < EV_N; k++) {
            const ev_field *f = &ev_fields[k - EV_N_DIFF];
            uint32_t w = (uint32_t)v[k];
            if (f->size == 8)
                memcpy((char *)e + f->off, &v[k], 8);
            else
                memcpy((char *)e + f->off, &w, 4);
        }
        prev_start = e->start_ns;
        prev_corr = e->correlation;
    }
    if (b->fail) {
        free(ev);
        ev = NULL;
    } else {
        *n = (size_t)ne;
    }
    return ev;
}

/* A signature's rows (h, rs, re: s->n of them), compact: each row's structure as 0 and
 * its 8 bytes when first met in the rank, else 1 + the number of the distinct structure
 * met before (a rank repeats a few structures every iteration), then its start as its
 * difference from the row before and its end from its start (zigzag varints). */
static void
put_sig_rows(bytes *b, const job_fold_sig *s)
{
    uint8_t buf[3 * DPRO_VARINT_MAX + 8];
    hmap seen = {0};
    int32_t n_seen = 0;
    int64_t prev = 0;
    if (hmap_init(&seen, 64) != 0)
        b->fail = 1;
    for (size_t i = 0; i < s->n && !b->fail; i++) {
        int32_t k = hmap_get(&seen, s->h[i], -1);
        uint8_t *q = dpro_put_varint(buf, (uint64_t)(k + 1));
        if (k < 0) {
            memcpy(q, &s->h[i], 8);
            q += 8;
            if (hmap_put(&seen, s->h[i], n_seen++) != 0)
                b->fail = 1;
        }
        q = dpro_put_varint(q, zigzag((int64_t)((uint64_t)s->rs[i] - (uint64_t)prev)));
        q = dpro_put_varint(q, zigzag((int64_t)((uint64_t)s->re[i] - (uint64_t)s->rs[i])));
        bytes_put(b, buf, (size_t)(q - buf));
        prev = s->rs[i];
    }
    hmap_free(&seen);
}

/* Takes into s (s->n set) the rows put_sig_rows wrote (b->fail when they do not fit or
 * memory ends). */
static void
get_sig_rows(bytes *b, job_fold_sig *s)
{
    int ok = !b->fail && s->n > 0 && s->n <= (b->n - b->at) / 3; /* 3 bytes a row at least */
    s->h = ok ? malloc(s->n * sizeof *s->h) : NULL;
    s->rs = ok ? malloc(s->n * sizeof *s->rs) : NULL;
    s->re = ok ? malloc(s->n * sizeof *s->re) : NULL;
    uint64_t *distinct = ok ? malloc(s->n * sizeof *distinct) : NULL;
    size_t n_distinct = 0;
    int64_t prev = 0;
    if (s->n > 0 && (!s->h || !s->rs || !s->re || !distinct))
        b->fail = 1;
    for (size_t i = 0; i < s->n && !b->fail; i++) {
        uint64_t k = bytes_get_varint(b);
        if (k == 0 && n_distinct < s->n) {
            bytes_get(b, &distinct[n_distinct], 8);
            s->h[i] = distinct[n_distinct++];
        } else if (k > 0 && k <= n_distinct) {
            s->h[i] = distinct[k - 1];
        } else {
            b->fail = 1; /* not what put_sig_rows writes */
        }
        s->rs[i] = (int64_t)((uint64_t)prev + (uint64_t)unzigzag(bytes_get_varint(b)));
        s->re[i] = (int64_t)((uint64_t)s->rs[i] + (uint64_t)unzigzag(bytes_get_varint(b)));
        prev = s->rs[i];
    }
    free(distinct);
}

/* A folded rank's signature, or none (s NULL): whether there is one, then its header
 * (n, hash, tol, unfoldable) and its rows (put_sig_rows). */
void
job_wire_put_sig(bytes *b, const job_fold_sig *s)
{
    bytes_put_i64(b, s != NULL);
    if (s) {
        bytes_put_i64(b, (int64_t)s->n);
        bytes_put_i64(b, (int64_t)s->hash);
        bytes_put(b, &s->tol, sizeof s->tol);
        bytes_put_i64(b, s->unfoldable);
        put_sig_rows(b, s);
    }
}

/* The signature job_wire_put_sig wrote, malloc'd (free with job_fold_sig_free, then free), or
 * NULL: none, or b->fail. */
job_fold_sig *
job_wire_get_sig(bytes *b)
{
    job_fold_sig *s = NULL;
    if (bytes_get_i64(b) && !b->fail && !(s = calloc(1, sizeof *s)))
        b->fail = 1;
    if (s) {
        s->n = (size_t)bytes_get_i64(b);
        s->hash = (uint64_t)bytes_get_i64(b);
        bytes_get(b, &s->tol, sizeof s->tol);
        s->unfoldable = (int)bytes_get_i64(b);
        get_sig_rows(b, s);
    }
    if (s && b->fail) {
        job_fold_sig_free(s);
        free(s);
        s = NULL;
    }
    return s;
}

int
job_share_wire_pack(const job_event *ev, size_t n, const job_fold_sig *s, unsigned char **out,
                    size_t *len)
{
    bytes b = {0};
    job_wire_put_events(&b, ev, n);
    job_wire_put_sig(&b, s);
    return bytes_take(&b, out, len) == 0 ? 0 : DPRO_ERR_NOMEM;
}

int
job_share_wire_unpack(const unsigned char *p, size_t len, job_event **ev, size_t *n,
                      job_fold_sig **s)
{
    bytes b = {.p = (unsigned char *)p, .n = len};
    *ev = job_wire_get_events(&b, n);
    *s = b.fail ? NULL : job_wire_get_sig(&b);
    int rc = b.fail || b.at != len ? DPRO_ERR_CORRUPT : 0;
    if (rc != 0) {
        free(*ev);
        *ev = NULL;
        *n = 0;
        if (*s)
            job_fold_sig_free(*s);
        free(*s);
        *s = NULL;
    }
    return rc;
}
