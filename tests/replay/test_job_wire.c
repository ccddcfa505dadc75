/* test_job_wire: the compact form in which a rank's events and signature travel to
 * process 0 under shared reading (replay/job_share.c, job_share_wire_pack and _unpack)
 * gives back every field of every event and every signature row, bit for bit: random
 * events (each field zero or not at random, small and full-width values, negative
 * signed fields, starts out of order, ends before starts, correlations going back),
 * random signature rows (structures repeated and new, negative and extreme times); what
 * is cut short or has bytes left over is refused; and an event holding a few small
 * fields costs a few bytes, not its 160. A rank held compact as process 0 keeps one it
 * received (job_rank.wire) expands to the same events, bit for bit, gives them back and
 * expands again, keeps them once held (job_rank_hold), and a cut form does not expand.
 * The byte writer under them and libdprotrace's packed readers (common/bytes.h) gives
 * back each field it wrote, and a read past the end fails, a text's too. The classes'
 * spreads (job_fold_env_pack and _unpack, written with it too) come back field for field
 * in the messages' layout, and what is damaged is refused. A rank's reader as it travels
 * to process 0 (job_share_pack_reader) answers every meta key read of a loaded rank
 * (job_rank_meta: the one list, job_meta_names) as the reader that opened the file,
 * and carries no other. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/bytes.h"
#include "dprotrace.h"
#include "replay/hmap.h"
#include "replay/job_int.h"
#include "tests/unit/testutil.h"

static uint64_t lcg = 88172645463325252ull;

static uint64_t
rnd(void)
{
    lcg ^= lcg << 13;
    lcg ^= lcg >> 7;
    lcg ^= lcg << 17;
    return lcg;
}

/* Zero half the time; else a value of 1 to 64 random bits. */
static uint64_t
field(void)
{
    if (rnd() & 1)
        return 0;
    int bits = 1 + (int)(rnd() % 64);
    return bits == 64 ? rnd() : rnd() & ((1ull << bits) - 1);
}

static void
random_event(job_event *e)
{
    uint64_t *w64[] = {&e->start_ns, &e->end_ns,  &e->correlation, &e->stream, &e->object,
                       &e->bytes,    &e->address, &e->comm,        &e->seq,    &e->count};
    uint32_t *w32[] = {&e->kind,     &e->subkind,    &e->thread,   &e->name,    &e->name2,
                       &e->device,   &e->shared_mem, &e->grid[0],  &e->grid[1], &e->grid[2],
                       &e->block[0], &e->block[1],   &e->block[2], &e->dtype,   &e->redop};
    for (size_t k = 0; k < sizeof w64 / sizeof w64[0]; k++)
        *w64[k] = field();
    for (size_t k = 0; k < sizeof w32 / sizeof w32[0]; k++)
        *w32[k] = (uint32_t)field();
    e->value = (int64_t)field();
    e->result = (int32_t)field();
    e->peer = rnd() & 1 ? -1 : (int32_t)field();
}

/* Packs (ev, n, s), unpacks, and checks that all came back bit for bit and that every
 * shorter prefix (of the first 200 bytes) and one byte more are refused. */
static void
roundtrip(const job_event *ev, size_t n, const job_fold_sig *s)
{
    unsigned char *p = NULL;
    size_t len = 0, got_n = 0;
    job_event *got = NULL;
    job_fold_sig *gs = NULL;
    REQUIRE(job_share_wire_pack(ev, n, s, &p, &len) == 0 && p);
    CHECK_EQ(job_share_wire_unpack(p, len, &got, &got_n, &gs), 0);
    CHECK_EQ_U(got_n, n);
    CHECK(n == 0 ? got == NULL : got && memcmp(got, ev, n * sizeof *ev) == 0);
    CHECK((s == NULL) == (gs == NULL));
    if (s && gs) {
        CHECK(gs->n == s->n && gs->hash == s->hash && gs->tol == s->tol &&
              gs->unfoldable == s->unfoldable);
        CHECK(s->n == 0 || (memcmp(gs->h, s->h, s->n * sizeof *s->h) == 0 &&
                            memcmp(gs->rs, s->rs, s->n * sizeof *s->rs) == 0 &&
                            memcmp(gs->re, s->re, s->n * sizeof *s->re) == 0));
        job_fold_sig_free(gs);
    }
    free(gs);
    free(got);
    int refused = 1;
    for (size_t cut = 0; cut < len && cut < 200; cut++) {
        gs = NULL;
        got = NULL;
        refused &= job_share_wire_unpack(p, cut, &got, &got_n, &gs) == DPRO_ERR_CORRUPT && !got &&
                   !gs && got_n == 0;
    }
    CHECK(refused);
    unsigned char *more = malloc(len + 1);
    REQUIRE(more);
    memcpy(more, p, len);
    more[len] = 0;
    CHECK_EQ(job_share_wire_unpack(more, len + 1, &got, &got_n, &gs), DPRO_ERR_CORRUPT);
    free(more);
    free(p);
}

/* The rank of n events ev held compact, expanded, given back, expanded again, held. */
static void
compact_rank(const job_event *ev, size_t n)
{
    unsigned char *p = NULL;
    size_t len = 0;
    REQUIRE(job_share_wire_pack(ev, n, NULL, &p, &len) == 0);
    job_rank jr = {.wire = p, .wire_len = len / 2, .n_events = n};
    CHECK(job_rank_expand(&jr) != 0 && !jr.events); /* cut short */
    jr.wire_len = len;
    for (int pass = 0; pass < 2; pass++) {
        CHECK(job_rank_expand(&jr) == 0);
        CHECK(jr.events && memcmp(jr.events, ev, n * sizeof *ev) == 0);
        CHECK(job_rank_expand(&jr) == 0); /* expanded already: the same array */
        job_rank_compact(&jr);
        CHECK(!jr.events && jr.wire == p && jr.n_events == n);
    }
    CHECK(job_rank_expand(&jr) == 0);
    job_rank_hold(&jr);
    CHECK(!jr.wire && jr.events && memcmp(jr.events, ev, n * sizeof *ev) == 0);
    job_rank_compact(&jr); /* held expanded: kept */
    CHECK(jr.events != NULL);
    free(jr.events);
}

/* common/bytes.h: fixed-size fields, varints (one byte to ten), texts (NULL, empty,
 * longer) and raw bytes read back as written, to the last byte; a read past the end fails
 * (a text whose length runs past it too, a varint over 64 bits, a count over the bytes
 * left) and a failed write hands nothing out. */
static void
test_bytes(void)
{
    static const uint64_t vs[] = {0, 1, 127, 128, 16383, 16384, UINT64_MAX};
    bytes b = {0};
    unsigned char *p = NULL;
    size_t len = 0;
    bytes_put_i64(&b, INT64_MIN);
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
        bytes_put_varint(&b, vs[i]);
    bytes_put_text(&b, NULL);
    bytes_put_text(&b, "");
    bytes_put_text(&b, "kernel<float>");
    bytes_put(&b, "raw", 3);
    REQUIRE(bytes_take(&b, &p, &len) == 0 && p);
    CHECK(len == 8 + 1 + 1 + 1 + 2 + 2 + 3 + 10 + 1 + 1 + 1 + 13 + 3);
    bytes r = {.p = p, .n = len};
    CHECK(bytes_get_i64(&r) == INT64_MIN);
    for (size_t i = 0; i < sizeof vs / sizeof *vs; i++)
        CHECK(bytes_get_varint(&r) == vs[i]);
    char *t0 = bytes_get_text(&r), *t1 = bytes_get_text(&r), *t2 = bytes_get_text(&r);
    CHECK(!t0 && t1 && !*t1 && t2 && !strcmp(t2, "kernel<float>"));
    char raw[3];
    bytes_get(&r, raw, 3);
    CHECK(!r.fail && r.at == len && !memcmp(raw, "raw", 3));
    bytes_get(&r, raw, 1);
    CHECK(r.fail && !r.nomem);
    free(t1);
    free(t2);
    /* a text of 13 bytes cut to 5: its length runs past the end */
    size_t at = 8 + 1 + 1 + 1 + 2 + 2 + 3 + 10 + 1 + 1;
    bytes cut = {.p = p, .n = at + 5, .at = at};
    CHECK(!bytes_get_text(&cut) && cut.fail && !cut.nomem);
    unsigned char over[11];
    memset(over, 0xff, sizeof over);
    bytes v = {.p = over, .n = sizeof over};
    CHECK(bytes_get_varint(&v) == 0 && v.fail); /* over 64 bits */
    over[9] = 0x7f;                             /* ten bytes, the tenth's bits past 64 */
    bytes v10 = {.p = over, .n = sizeof over};
    CHECK(bytes_get_varint(&v10) == 0 && v10.fail);
    over[9] = 0x01; /* ten bytes: UINT64_MAX */
    bytes v64 = {.p = over, .n = sizeof over};
    CHECK(bytes_get_varint(&v64) == UINT64_MAX && !v64.fail && v64.at == 10);
    bytes c = {.p = p + 8 + 3, .n = 2}; /* the count 128, one byte left after it */
    CHECK(bytes_get_count(&c) == 0 && c.fail);
    free(p);
    bytes w = {.fail = 1};
    bytes_put(&w, "x", 1);
    CHECK(bytes_take(&w, &p, &len) == -1 && !p && len == 0);
    /* a length past what memory can hold (as a wrong size computed would be): memory
     * ends, nothing is copied (n + len wraps; the capacity's doubling would too) */
    static const char src[16];
    bytes h = {0};
    bytes_put(&h, src, sizeof src);
    bytes_put(&h, src, SIZE_MAX - 8);
    CHECK(h.fail && h.nomem && h.n == sizeof src);
    bytes h2 = {0};
    bytes_put(&h2, src, SIZE_MAX / 2 + 2);
    CHECK(h2.fail && h2.nomem && h2.n == 0);
    CHECK(bytes_take(&h, &p, &len) == -1 && bytes_take(&h2, &p, &len) == -1);
}

/* One spread with members m over n rows, random times; cmp at most m. */
static fold_env
random_env(int32_t rep, int32_t m, size_t n)
{
    fold_env e = {.rep = rep, .members = m, .n = n};
    e.cmp = malloc((n + 1) * sizeof *e.cmp);
    e.lo = malloc((3 * n + 1) * sizeof *e.lo);
    e.hi = malloc((3 * n + 1) * sizeof *e.hi);
    REQUIRE(e.cmp && e.lo && e.hi);
    for (size_t i = 0; i < n; i++)
        e.cmp[i] = (int32_t)(rnd() % (uint64_t)(m + 1));
    for (size_t i = 0; i < 3 * n; i++) {
        e.lo[i] = (int64_t)field() * (rnd() & 1 ? -1 : 1);
        e.hi[i] = (int64_t)field();
    }
    return e;
}

/* Whether job_fold_env_unpack refuses the len bytes at p, keeping nothing. */
static int
env_refused(const unsigned char *p, size_t len)
{
    fold_env sentinel, *got = &sentinel;
    int32_t n = -1;
    hmap by_rep = {0};
    REQUIRE(hmap_init(&by_rep, 16) == 0);
    int refused = job_fold_env_unpack(p, len, &got, &n, &by_rep) == DPRO_ERR_CORRUPT && !got &&
                  n == 0 && hmap_get(&by_rep, 4, -1) < 0;
    for (int32_t k = 0; got && got != &sentinel && k < n; k++) /* taken: free it */
        job_fold_env_free(&got[k]);
    if (got != &sentinel)
        free(got);
    hmap_free(&by_rep);
    return refused;
}

/* job_fold_env_pack and _unpack (replay/job_share_fold.c): the spreads with members, in
 * their order, field for field, in the messages' layout (their count; each one's rep,
 * members and row count, then its rows: cmp, lo, hi; fixed-size fields in the host's
 * layout); cut short at any length, a byte left over, more members comparing than the
 * class has, or one representative twice: refused, nothing kept. */
static void
test_env_pack(void)
{
    fold_env env[4] = {random_env(4, 2, 300), random_env(5, 0, 2), random_env(9, 3, 0),
                       random_env(11, 1000, 7)};
    fold_reps reps = {.n = 4, .env = env};
    unsigned char *p = NULL;
    size_t len = 0, row = sizeof(int32_t) + 6 * sizeof(int64_t), head = 16;
    REQUIRE(job_fold_env_pack(&reps, &p, &len) == 0 && p);
    CHECK_EQ_U(len, 4 + 3 * head + 307 * row);
    int32_t count = 0, rep = 0, members = 0;
    uint64_t rows = 0;
    memcpy(&count, p, 4);
    memcpy(&rep, p + 4, 4);
    memcpy(&members, p + 8, 4);
    memcpy(&rows, p + 12, 8);
    CHECK(count == 3 && rep == 4 && members == 2 && rows == 300);
    CHECK(memcmp(p + 20, env[0].cmp, 300 * 4) == 0 &&
          memcmp(p + 20 + 1200, env[0].lo, 900 * 8) == 0 &&
          memcmp(p + 20 + 1200 + 7200, env[0].hi, 900 * 8) == 0);
    memcpy(&rep, p + 4 + head + 300 * row, 4); /* the next one with members: rank 9's */
    CHECK(rep == 9);
    fold_env *got = NULL;
    int32_t n = 0;
    hmap by_rep = {0};
    REQUIRE(hmap_init(&by_rep, 16) == 0);
    CHECK(job_fold_env_unpack(p, len, &got, &n, &by_rep) == 0 && got && n == 3);
    static const int from[3] = {0, 2, 3};
    for (int32_t k = 0; got && k < n && k < 3; k++) {
        const fold_env *w = &env[from[k]], *g = &got[k];
        CHECK(g->rep == w->rep && g->members == w->members && g->n == w->n && g->gidx == -1 &&
              g->by_spread == -2 && hmap_get(&by_rep, (uint64_t)w->rep, -1) == k);
        CHECK(memcmp(g->cmp, w->cmp, w->n * sizeof *w->cmp) == 0 &&
              memcmp(g->lo, w->lo, 3 * w->n * sizeof *w->lo) == 0 &&
              memcmp(g->hi, w->hi, 3 * w->n * sizeof *w->hi) == 0);
    }
    for (int32_t k = 0; k < n; k++)
        job_fold_env_free(&got[k]);
    free(got);
    hmap_free(&by_rep);
    int cut_refused = 1;
    for (size_t cut = 0; cut < len; cut++)
        cut_refused &= env_refused(p, cut);
    CHECK(cut_refused);
    unsigned char *q = malloc(len + 1);
    REQUIRE(q);
    memcpy(q, p, len);
    q[len] = 0;
    CHECK(env_refused(q, len + 1)); /* a byte left over */
    int32_t over = 3;
    memcpy(q + 4 + 3 * head + 300 * row, &over, 4); /* rank 11's first row: 3 of 1000 */
    CHECK(!env_refused(q, len));
    over = 1001;
    memcpy(q + 4 + 3 * head + 300 * row, &over, 4);
    CHECK(env_refused(q, len)); /* 1001 of 1000 compare */
    memcpy(q, p, len);
    rep = 4;
    memcpy(q + 4 + head + 300 * row, &rep, 4);
    CHECK(env_refused(q, len)); /* rank 4's class twice */
    memcpy(q, p, len);
    members = 0;
    memcpy(q + 8, &members, 4);
    CHECK(env_refused(q, len)); /* a class without members is never sent */
    free(q);
    free(p);
    fold_reps none = {.n = 4, .env = NULL};
    REQUIRE(job_fold_env_pack(&none, &p, &len) == 0);
    CHECK(len == 4 && p && memcmp(p, &(int32_t){0}, 4) == 0);
    free(p);
    for (int k = 0; k < 4; k++)
        job_fold_env_free(&env[k]);
}

/* The meta keys a rank's reader carries to process 0 (job_share_pack_reader): each one
 * read of a loaded rank (job_meta_key, the keys job_rank_meta answers), the same value
 * as the reader that opened the file; and none of the others the trace holds. */
static void
test_meta_keys(void)
{
    static const char *const all[] = {
        DPRO_META_SOURCE,      DPRO_META_HOST,          DPRO_META_PID,
        DPRO_META_RANK,        DPRO_META_LOCAL_RANK,    DPRO_META_WORLD_SIZE,
        DPRO_META_JOB_ID,      DPRO_META_COMMAND,       DPRO_META_HOST_CPUS,
        DPRO_META_CPU_SAMPLES, DPRO_META_HOST_CPU_LIST, DPRO_META_HOST_CPU_LIST_END};
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char dir[256], path[300], err[256], value[64];
    snprintf(dir, sizeof dir, "%s/dpro-test-job-wire-XXXXXX", base);
    REQUIRE(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/rank0.dpro", dir);
    dpro_writer *w = NULL;
    REQUIRE(dpro_writer_open(path, NULL, &w, err, sizeof err) == DPRO_OK);
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        snprintf(value, sizeof value, "%zu", 40 + i); /* a number: the _int readers too */
        CHECK(dpro_writer_set_meta(w, all[i], value) == DPRO_OK);
    }
    CHECK(dpro_writer_close(w) == DPRO_OK);
    job_rank local = {0}, sent = {0};
    REQUIRE(dpro_reader_open(path, &local.reader, err, sizeof err) == DPRO_OK);
    dpro_reader_detach(local.reader);
    uint8_t *p = NULL;
    size_t len = 0;
    REQUIRE(job_share_pack_reader(local.reader, NULL, &p, &len) == DPRO_OK);
    REQUIRE(dpro_reader_unpack(p, len, path, NULL, &sent.reader, err, sizeof err) == DPRO_OK);
    int n_keys = 0;
    for (int k = 0; k < JOB_META_KEYS; k++) {
        const char *a = job_rank_meta(&local, (job_meta_key)k);
        const char *b = job_rank_meta(&sent, (job_meta_key)k);
        CHECK(a && b && !strcmp(a, b));
        CHECK(job_rank_meta_int(&sent, (job_meta_key)k, -1) >= 40);
        n_keys += a != NULL;
    }
    CHECK(n_keys == JOB_META_KEYS && job_meta_names[JOB_META_KEYS] == NULL);
    int others = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        int listed = 0;
        for (int k = 0; k < JOB_META_KEYS; k++)
            listed |= !strcmp(all[i], job_meta_names[k]);
        others += !listed && dpro_reader_meta(sent.reader, all[i]) != NULL;
    }
    CHECK(others == 0);
    CHECK(!job_rank_meta(&sent, JOB_META_KEYS) && !job_rank_meta(&(job_rank){0}, JOB_META_HOST));
    free(p);
    dpro_reader_close(local.reader);
    dpro_reader_close(sent.reader);
    unlink(path);
    rmdir(dir);
}

/* A spread made by job_fold_env_add from signatures that start before the window on some
 * rows (rs < 0: only the structure counts there) packs those rows as zeros, whatever the
 * heap held before (malloc's perturbation, or ASan's fill, marks what it hands out), so that
 * the message is the same bytes on every run and carries nothing of the heap. */
static void
test_env_rows_unset(void)
{
    enum { ROWS = 64 };
    int64_t rs[ROWS], re[ROWS];
    uint64_t h[ROWS];
    for (int i = 0; i < ROWS; i++) {
        h[i] = (uint64_t)i;
        rs[i] = i % 4 == 0 ? -1 : 1000 * i;
        re[i] = rs[i] + 10;
    }
    job_fold_sig s = {.n = ROWS, .h = h, .rs = rs, .re = re, .tol = 5};
    fold_env e = {0};
#ifdef M_PERTURB
    /* glibc's malloc takes it; under ASan mallopt is refused (returns 0), and ASan's own
     * allocator fills what it hands out (malloc_fill_byte, up to 4 KiB by default) */
    (void)mallopt(M_PERTURB, 0x5a);
#endif
    REQUIRE(job_fold_env_add(&e, 3, &s) == 0 && job_fold_env_add(&e, 3, &s) == 0);
#ifdef M_PERTURB
    mallopt(M_PERTURB, 0);
#endif
    fold_reps reps = {.n = 1, .env = &e};
    unsigned char *p = NULL;
    size_t len = 0;
    REQUIRE(job_fold_env_pack(&reps, &p, &len) == 0);
    size_t lo = 4 + 16 + ROWS * sizeof(int32_t), hi = lo + 3 * ROWS * sizeof(int64_t);
    int unset_zero = 1, set_kept = 1;
    for (int i = 0; i < ROWS; i++) {
        int64_t v[6];
        memcpy(v, p + lo + 3 * (size_t)i * 8, 24);
        memcpy(v + 3, p + hi + 3 * (size_t)i * 8, 24);
        for (int k = 0; k < 6; k++) {
            if (rs[i] < 0)
                unset_zero &= v[k] == 0;
            else
                set_kept &= v[k] == (k % 3 == 0 ? rs[i] : k % 3 == 1 ? re[i] : 10);
        }
    }
    CHECK(e.members == 2 && unset_zero && set_kept);
    free(p);
    job_fold_env_free(&e);
}

int
main(void)
{
    enum { N = 5000 };
    job_event *ev = calloc(N, sizeof *ev); /* calloc: the padding compares equal */
    REQUIRE(ev);
    for (size_t i = 0; i < N; i++)
        random_event(&ev[i]);
    roundtrip(ev, N, NULL);
    roundtrip(ev, 1, NULL);
    roundtrip(NULL, 0, NULL);

    job_fold_sig s = {.n = N, .hash = rnd(), .tol = 1234.5, .unfoldable = 1};
    s.h = malloc(N * sizeof *s.h);
    s.rs = malloc(N * sizeof *s.rs);
    s.re = malloc(N * sizeof *s.re);
    REQUIRE(s.h && s.rs && s.re);
    uint64_t pool[7];
    for (int k = 0; k < 7; k++)
        pool[k] = rnd();
    for (size_t i = 0; i < N; i++) {
        s.h[i] = rnd() % 4 ? pool[rnd() % 7] : rnd();
        s.rs[i] = (int64_t)field() * (rnd() & 1 ? -1 : 1);
        s.re[i] = i % 100 == 0 ? INT64_MIN : (int64_t)field();
    }
    roundtrip(ev, N, &s);
    job_fold_sig empty = {.hash = 7};
    roundtrip(ev, 3, &empty);

    /* a kernel's few small fields: a few bytes */
    job_event k[100];
    memset(k, 0, sizeof k);
    for (int i = 0; i < 100; i++) {
        k[i].kind = DPRO_KIND_KERNEL;
        k[i].start_ns = 1000000000ull + 5000ull * (uint64_t)i;
        k[i].end_ns = k[i].start_ns + 3000;
        k[i].correlation = 100 + (uint64_t)i;
        k[i].stream = 7;
        k[i].name = 12;
    }
    unsigned char *p = NULL;
    size_t len = 0;
    REQUIRE(job_share_wire_pack(k, 100, NULL, &p, &len) == 0);
    printf("100 kernels of 6 small fields: %zu bytes (%zu loaded)\n", len, sizeof k);
    CHECK(len < 100 * 12);
    free(p);
    roundtrip(k, 100, NULL);
    compact_rank(ev, N);
    compact_rank(k, 100);
    job_fold_sig_free(&s);
    free(ev);
    test_bytes();
    test_env_pack();
    test_env_rows_unset();
    test_meta_keys();
    return tests_done();
}
