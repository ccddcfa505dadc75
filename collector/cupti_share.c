/*
 * cupti_share.c: CUPTI shared with a second activity client (torch.profiler's Kineto) that
 * starts after the collector, so that one run is traced by both, each with every device
 * record of the kinds it asked for.
 *
 * CUPTI has one activity client and one timestamp callback. The collector stays that
 * client: we interpose the calls with which Kineto takes CUPTI (cuptiActivityRegister-
 * Callbacks, cuptiActivityRegisterTimestampCallback, cuptiActivityEnable/Disable,
 * cuptiGetTimestamp) and keep its buffer callbacks, its clock and the kinds it enabled to
 * ourselves. Each buffer CUPTI completes for us is, on CUPTI's thread and before we queue
 * it, copied record by record (the kinds Kineto enabled, within the time it had them
 * enabled) into buffers Kineto hands us through its buffer-requested callback and handed
 * back through its buffer-completed one. A flush by Kineto (cuptiActivityFlushAll, which we
 * pass on) completes our buffers in the flushing thread, so the copies reach Kineto before
 * its flush returns, as its own records would. Kinds Kineto enables and we do not record
 * are enabled in CUPTI for it and disabled when it disables them; kinds we record stay
 * enabled whatever Kineto does. Kineto's callbacks run with no lock of ours held (they may
 * call CUPTI, which may deliver again in the same thread, or register again); once the
 * process exits nothing more goes to Kineto (its objects are static, destroyed at exit).
 *
 * Clock. CUPTI keeps stamping with the collector's clock (CLOCK_MONOTONIC, the clock of
 * every host event of every rank in the trace); the copies are converted to Kineto's clock
 * (the TSC ticks it registers). That way round, because the collector's trace must stay on
 * the clock its host events and the other ranks share, and an error of the conversion then
 * stays in Kineto's copy. Kineto's clock is an unknown unit, so the conversion is linear:
 * an anchor pair (our clock, Kineto's) read together at Kineto's registration and another
 * at each delivery, at least SHARE_FIT_NS after it, give the rate; a record's time t maps
 * to k1 + (t - m1) * rate from the latest pair. Without a timestamp callback from Kineto,
 * the copies keep CUPTI's stamps, as CUPTI itself would hand them. cuptiGetTimestamp
 * answers Kineto's clock once it registered one, as CUPTI does for its client.
 *
 * Only the kinds whose record layout the collector was built for are copied (their time
 * fields are converted); Kineto's enabling another kind is answered CUPTI_ERROR_NOT_SUPPORTED
 * (said once). CUPTI's callback API (cuptiSubscribe) has one subscriber too: the collector
 * keeps it, Kineto's cuptiSubscribe fails as it does today and Kineto goes on without its
 * CUPTI callbacks (it records without them).
 *
 * DPRO_CUPTI_SHARE=0, a collector without CUPTI activity or a clock of Kineto's that does
 * not advance: Kineto takes CUPTI (cupti=taken, cupti.c), said once.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cupti.h>

#include "cupti_share.h"
#include "internal.h"

#define SHARE_FIT_NS 10000000 /* the shortest span the clock rate is fitted over */
#define SHARE_KINDS 128       /* activity kinds tracked (CUPTI_ACTIVITY_KIND_COUNT is less) */
#define SHARE_WINDOWS 8       /* Kineto's latest windows of a kind kept (profiler windows) */

enum share_mode { SHARE_UNDECIDED, SHARE_ON, SHARE_OFF };

_Atomic uint32_t cupti_share_corr;

static struct {
    _Atomic int mode;
    /* CUPTI's own entry points (the library's, not our interposed ones) */
    CUptiResult (*enable)(CUpti_ActivityKind);
    CUptiResult (*disable)(CUpti_ActivityKind);
    CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);
    CUptiResult (*get_timestamp)(uint64_t *);
    int clock_callback;   /* CUPTI stamps with our clock; else stamps + offset are ours */
    int64_t cupti_offset; /* CUPTI stamp + offset = our clock, without clock_callback */
    /* Kineto's side */
    _Atomic(CUpti_BuffersCallbackRequestFunc) requested;
    _Atomic(CUpti_BuffersCallbackCompleteFunc) completed;
    _Atomic(CUpti_TimestampCallbackFunc) clock;
    /* Kineto's windows of a kind: the records of the calls made while it had the kind
     * enabled, by correlation id (the work of a call made before its disabling is
     * recorded, as CUPTI records it: the device runs behind the host). 1 + the last id
     * seen when it enabled the kind (0: never), 1 + the last id when it disabled it (0:
     * enabled now); the latest SHARE_WINDOWS windows, window[kind] the current one's slot,
     * so that the records of a window closed just before the next one opens, delivered
     * later, still go to Kineto. */
    _Atomic uint64_t on[SHARE_KINDS][SHARE_WINDOWS], off[SHARE_KINDS][SHARE_WINDOWS];
    _Atomic unsigned window[SHARE_KINDS];
    _Atomic unsigned char own[SHARE_KINDS]; /* the collector records the kind itself */
    _Atomic uint64_t since;                 /* when Kineto registered its buffers */
    /* the process exits: Kineto's objects may be destroyed, nothing more goes to it */
    _Atomic int exiting;
    _Atomic uint64_t records, lost; /* copies handed over, copies Kineto had no room for */
    /* the clock fit, under fit_lock */
    pthread_mutex_t fit_lock;
    uint64_t m0, k0, m1, k1;
    double rate;
    atomic_flag said_kind, said_lost;
} share = {.fit_lock = PTHREAD_MUTEX_INITIALIZER,
           .said_kind = ATOMIC_FLAG_INIT,
           .said_lost = ATOMIC_FLAG_INIT};

/* The buffer of Kineto's we hold, as CUPTI holds one of its client's (Kineto flushes only
 * while it has a buffer out): deliveries fill it, then hand it over and take another. */
static pthread_mutex_t share_out_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUpti_BuffersCallbackCompleteFunc owner; /* whose buffer it is (its completed callback) */
    uint8_t *buf;
    size_t size, start, used; /* start: the first record's offset (8-aligned) */
    size_t max, count;        /* the most records Kineto wants in it (0: any), those in it */
} share_out;

void
cupti_share_init(void *lib, int clock_callback, int64_t offset)
{
    *(void **)&share.enable = dlsym(lib, "cuptiActivityEnable");
    *(void **)&share.disable = dlsym(lib, "cuptiActivityDisable");
    *(void **)&share.register_timestamp = dlsym(lib, "cuptiActivityRegisterTimestampCallback");
    *(void **)&share.get_timestamp = dlsym(lib, "cuptiGetTimestamp");
    share.clock_callback = clock_callback;
    share.cupti_offset = offset;
    int on = coll_env_bool("DPRO_CUPTI_SHARE", 1) && share.enable && share.disable;
    atomic_store(&share.mode, on ? SHARE_ON : SHARE_OFF);
}

void
cupti_share_own(int kind)
{
    if (kind > 0 && kind < SHARE_KINDS)
        atomic_store(&share.own[kind], 1);
}

void
cupti_share_forget(void)
{
    atomic_store(&share.mode, SHARE_UNDECIDED);
    atomic_store(&share.requested, NULL);
    atomic_store(&share.completed, NULL);
    atomic_store(&share.clock, NULL);
    atomic_store(&share.since, 0);
    atomic_store(&share.exiting, 0);
    pthread_mutex_init(&share.fit_lock, NULL);
    pthread_mutex_init(&share_out_lock, NULL);
    memset(&share_out, 0, sizeof share_out);
}

/* Gives up sharing (Kineto takes CUPTI): its clock, if it gave one, goes to CUPTI. */
static void
share_give_up(void)
{
    int expected = SHARE_ON;
    if (!atomic_compare_exchange_strong(&share.mode, &expected, SHARE_OFF))
        return;
    CUpti_TimestampCallbackFunc clock = atomic_load(&share.clock);
    if (clock && share.register_timestamp)
        share.register_timestamp(clock);
}

/* Reads our clock and Kineto's together: the pair with the shortest gap of a few. */
static void
share_anchor(CUpti_TimestampCallbackFunc clock, uint64_t *m, uint64_t *k)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = coll_now(), c = clock(), b = coll_now();
        if (b - a < best) {
            best = b - a;
            *m = a + (b - a) / 2;
            *k = c;
        }
    }
}

/* ---- the interposed calls ----------------------------------------------------------------- */

/* The next definition of name after ours (libcupti's), looked up once into *slot. */
static void *
share_next(void **slot, const char *name)
{
    void *p = atomic_load((void *_Atomic *)slot);
    if (p == NULL) {
        p = dlsym(RTLD_NEXT, name);
        atomic_store((void *_Atomic *)slot, p);
    }
    return p;
}

COLL_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp);
COLL_EXPORT CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc funcTimestamp)
{
    static void *next;
    int saved = errno;
    if (atomic_load(&share.mode) == SHARE_ON && funcTimestamp) {
        uint64_t m0 = 0, k0 = 0, m1 = 0, k1 = 0;
        share_anchor(funcTimestamp, &m0, &k0);
        /* a coarse clock (microseconds, a slow counter) may read the same twice in a row:
         * wait for it to step, SHARE_FIT_NS at most, once */
        for (int i = 0; i == 0 || (k1 <= k0 && m1 - m0 < SHARE_FIT_NS); i++) {
            struct timespec step = {0, 20000};
            if (i)
                nanosleep(&step, NULL);
            share_anchor(funcTimestamp, &m1, &k1);
        }
        if (k1 > k0 && m1 > m0) {
            pthread_mutex_lock(&share.fit_lock);
            share.m0 = share.m1 = m1;
            share.k0 = share.k1 = k1;
            share.rate = (double)(k1 - k0) / (double)(m1 - m0); /* refitted at delivery */
            atomic_store(&share.clock, funcTimestamp);
            pthread_mutex_unlock(&share.fit_lock);
            errno = saved;
            return CUPTI_SUCCESS;
        }
        coll_warn("the clock torch.profiler gives CUPTI does not advance: not sharing CUPTI");
        share_give_up();
    }
    CUptiResult (*real)(CUpti_TimestampCallbackFunc) =
        share.register_timestamp ? share.register_timestamp
                                 : (CUptiResult(*)(CUpti_TimestampCallbackFunc))share_next(
                                       &next, "cuptiActivityRegisterTimestampCallback");
    CUptiResult rc = real ? real(funcTimestamp) : CUPTI_ERROR_NOT_INITIALIZED;
    errno = saved;
    return rc;
}

/* The size of a's record (0: a kind whose layout the collector does not know), its time
 * fields (times, ntimes) and its correlation id (NULL: none). */
static size_t share_layout(CUpti_Activity *a, uint64_t *times[5], int *ntimes, uint32_t **corr);

/* Takes a buffer of the newly registered client's to hold (below). */
static void share_hold(void);

/* atexit, registered once Kineto has registered (after its static objects were built, so
 * before they are destroyed): the collector's last flush, later, keeps Kineto's copies. */
static void
share_exit(void)
{
    atomic_store(&share.exiting, 1);
}

CUptiResult
cupti_share_register(CUpti_BuffersCallbackRequestFunc req, CUpti_BuffersCallbackCompleteFunc done)
{
    if (atomic_load(&share.mode) != SHARE_ON || req == NULL || done == NULL)
        return CUPTI_ERROR_NOT_INITIALIZED;
    atomic_store(&share.requested, req);
    atomic_store(&share.completed, done);
    share_hold();
    uint64_t expected = 0;
    static atomic_flag at_exit = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&at_exit))
        atexit(share_exit);
    if (atomic_compare_exchange_strong(&share.since, &expected, coll_now()))
        coll_warn("CUPTI is shared with another tool (torch.profiler?) from now on: it gets "
                  "copies of the device records of the kinds it enables, the collector keeps "
                  "all of its own");
    return CUPTI_SUCCESS;
}

/* Opens a window of kind for Kineto (from the next call on); one open already stays. */
static void
share_window_open(int kind)
{
    unsigned w = atomic_load(&share.window[kind]);
    if (atomic_load(&share.on[kind][w]) && !atomic_load(&share.off[kind][w]))
        return;
    /* the next slot, emptied before it opens: a delivery reading it meanwhile sees no window
     * or the new one */
    w = (w + 1) % SHARE_WINDOWS;
    atomic_store(&share.on[kind][w], 0);
    atomic_store(&share.off[kind][w], 0);
    atomic_store(&share.on[kind][w], 1 + (uint64_t)atomic_load(&cupti_share_corr));
    atomic_store(&share.window[kind], w);
}

COLL_EXPORT CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind);
COLL_EXPORT CUptiResult CUPTIAPI
cuptiActivityEnable(CUpti_ActivityKind kind)
{
    static void *next;
    int saved = errno;
    CUptiResult rc = CUPTI_SUCCESS;
    CUpti_Activity probe = {.kind = kind};
    uint64_t *times[5];
    uint32_t *corr;
    int n;
    if (atomic_load(&share.mode) != SHARE_ON) {
        CUptiResult (*real)(CUpti_ActivityKind) =
            share.enable
                ? share.enable
                : (CUptiResult(*)(CUpti_ActivityKind))share_next(&next, "cuptiActivityEnable");
        rc = real ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
    } else if ((unsigned)kind >= SHARE_KINDS || share_layout(&probe, times, &n, &corr) == 0) {
        if (!atomic_flag_test_and_set(&share.said_kind))
            coll_warn("CUPTI is shared: activity kind %d, whose records the collector cannot "
                      "convert, is not enabled for the other tool",
                      (int)kind);
        rc = CUPTI_ERROR_NOT_SUPPORTED;
    } else {
        if (!atomic_load(&share.own[kind]))
            rc = share.enable(kind);
        if (rc == CUPTI_SUCCESS)
            share_window_open(kind);
    }
    errno = saved;
    return rc;
}

COLL_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind);
COLL_EXPORT CUptiResult CUPTIAPI
cuptiActivityDisable(CUpti_ActivityKind kind)
{
    static void *next;
    int saved = errno;
    CUptiResult rc = CUPTI_SUCCESS;
    if (atomic_load(&share.mode) != SHARE_ON || (unsigned)kind >= SHARE_KINDS) {
        CUptiResult (*real)(CUpti_ActivityKind) =
            share.disable
                ? share.disable
                : (CUptiResult(*)(CUpti_ActivityKind))share_next(&next, "cuptiActivityDisable");
        rc = real ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
    } else {
        unsigned w = atomic_load(&share.window[kind]);
        if (atomic_load(&share.on[kind][w]) && !atomic_load(&share.off[kind][w]))
            atomic_store(&share.off[kind][w], 1 + (uint64_t)atomic_load(&cupti_share_corr));
        if (!atomic_load(&share.own[kind]))
            rc = share.disable(kind);
    }
    errno = saved;
    return rc;
}

COLL_EXPORT CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t *timestamp);
COLL_EXPORT CUptiResult CUPTIAPI
cuptiGetTimestamp(uint64_t *timestamp)
{
    static void *next;
    CUpti_TimestampCallbackFunc clock = atomic_load(&share.clock);
    if (clock && timestamp && atomic_load(&share.mode) == SHARE_ON) {
        *timestamp = clock();
        return CUPTI_SUCCESS;
    }
    CUptiResult (*real)(uint64_t *) =
        share.get_timestamp ? share.get_timestamp
                            : (CUptiResult(*)(uint64_t *))share_next(&next, "cuptiGetTimestamp");
    return real ? real(timestamp) : CUPTI_ERROR_NOT_INITIALIZED;
}

/* ---- the copies --------------------------------------------------------------------------- */

static size_t
share_layout(CUpti_Activity *a, uint64_t *times[5], int *ntimes, uint32_t **corr)
{
    *ntimes = 0;
    *corr = NULL;
    switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)a;
        times[0] = &k->start, times[1] = &k->end, times[2] = &k->completed;
        times[3] = &k->queued, times[4] = &k->submitted;
        *ntimes = 5;
        *corr = &k->correlationId;
        return sizeof *k;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)a;
        times[0] = &m->start, times[1] = &m->end, *ntimes = 2;
        *corr = &m->correlationId;
        return sizeof *m;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        CUpti_ActivityMemset4 *m = (CUpti_ActivityMemset4 *)a;
        times[0] = &m->start, times[1] = &m->end, *ntimes = 2;
        *corr = &m->correlationId;
        return sizeof *m;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
        CUpti_ActivityAPI *r = (CUpti_ActivityAPI *)a;
        times[0] = &r->start, times[1] = &r->end, *ntimes = 2;
        *corr = &r->correlationId;
        return sizeof *r;
    }
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        CUpti_ActivitySynchronization2 *s = (CUpti_ActivitySynchronization2 *)a;
        times[0] = &s->start, times[1] = &s->end, *ntimes = 2;
        *corr = &s->correlationId;
        return sizeof *s;
    }
    case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        CUpti_ActivityOverhead3 *o = (CUpti_ActivityOverhead3 *)a;
        times[0] = &o->start, times[1] = &o->end, *ntimes = 2;
        *corr = &o->correlationId;
        return sizeof *o;
    }
    case CUPTI_ACTIVITY_KIND_MEMORY2: {
        CUpti_ActivityMemory4 *m = (CUpti_ActivityMemory4 *)a;
        times[0] = &m->timestamp, *ntimes = 1;
        return sizeof *m;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        CUpti_ActivityExternalCorrelation *x = (CUpti_ActivityExternalCorrelation *)a;
        *corr = &x->correlationId;
        return sizeof *x;
    }
    case CUPTI_ACTIVITY_KIND_DEVICE:
        return sizeof(CUpti_ActivityDevice5);
    default:
        return 0;
    }
}

/* The map from CUPTI's stamps to Kineto's clock for one delivery: k = k1 + (t - m1) * rate
 * on our clock t (rate 1, no shift without Kineto's clock). Refits the rate from the
 * registration's pair to a pair read now, waiting for SHARE_FIT_NS to have passed since the
 * registration (once: deliveries come later than that but for a flush right at the start). */
struct share_map {
    int convert;
    uint64_t m1, k1;
    double rate;
};

static struct share_map
share_fit(void)
{
    struct share_map map = {0};
    if (atomic_load(&share.clock) == NULL)
        return map;
    /* the clock and its anchors together: Kineto may register another clock meanwhile */
    pthread_mutex_lock(&share.fit_lock);
    CUpti_TimestampCallbackFunc clock = atomic_load(&share.clock);
    uint64_t since = coll_now() - share.m0;
    if (since < SHARE_FIT_NS) {
        struct timespec ts = {0, (long)(SHARE_FIT_NS - since)};
        nanosleep(&ts, NULL);
    }
    uint64_t m = 0, k = 0;
    share_anchor(clock, &m, &k);
    if (m > share.m0 && k > share.k0) {
        share.m1 = m;
        share.k1 = k;
        share.rate = (double)(k - share.k0) / (double)(m - share.m0);
    }
    map.convert = 1;
    map.m1 = share.m1;
    map.k1 = share.k1;
    map.rate = share.rate;
    pthread_mutex_unlock(&share.fit_lock);
    return map;
}

/* CUPTI's stamp t on our clock. */
static inline uint64_t
share_ours(uint64_t t)
{
    return share.clock_callback ? t : (uint64_t)((int64_t)t + share.cupti_offset);
}

/* Should Kineto get a record of kind with correlation id *corr (NULL: none)? */
static int
share_wanted(int kind, const uint32_t *corr)
{
    if (corr == NULL) { /* no call to place it: while the kind is on */
        unsigned w = atomic_load(&share.window[kind]);
        return !atomic_load(&share.off[kind][w]) && atomic_load(&share.on[kind][w]);
    }
    for (int w = 0; w < SHARE_WINDOWS; w++) {
        /* off first: share_window_open empties on before off */
        uint64_t off = atomic_load(&share.off[kind][w]), on = atomic_load(&share.on[kind][w]);
        if (on && *corr >= on && (off == 0 || *corr < off))
            return 1;
    }
    return 0;
}

/* Converts the copy's time fields to Kineto's clock. */
static void
share_convert(const struct share_map *map, uint64_t *times[5], int ntimes)
{
    for (int i = 0; i < ntimes; i++) {
        uint64_t t = *times[i];
        if (t == (uint64_t)CUPTI_TIMESTAMP_UNKNOWN || t == UINT64_MAX || !map->convert)
            continue;
        double d = (double)((int64_t)share_ours(t) - (int64_t)map->m1) * map->rate;
        if (d > 0x1p62 || d < -0x1p62) /* no time of this run: left as CUPTI gave it */
            continue;
        *times[i] = (uint64_t)((int64_t)map->k1 + (int64_t)(d < 0 ? d - 0.5 : d + 0.5));
    }
}

/* Hands the held buffer (if any) to its owner. Under share_out_lock, which Kineto's
 * callbacks run without (they may call CUPTI, which may deliver again in this thread), so
 * that share_out may have changed when this returns. */
static void
share_complete(CUcontext ctx, uint32_t stream)
{
    if (share_out.buf == NULL)
        return;
    CUpti_BuffersCallbackCompleteFunc owner = share_out.owner;
    uint8_t *buf = share_out.buf;
    size_t size = share_out.size, valid = share_out.used > share_out.start ? share_out.used : 0;
    memset(&share_out, 0, sizeof share_out);
    pthread_mutex_unlock(&share_out_lock);
    owner(ctx, stream, buf, size, valid);
    pthread_mutex_lock(&share_out_lock);
}

/* Is there a held buffer with room for a record of bytes more (0: any buffer)? Under
 * share_out_lock. */
static int
share_fits(size_t bytes)
{
    return share_out.buf && share_out.used + bytes <= share_out.size &&
           (bytes == 0 || share_out.max == 0 || share_out.count < share_out.max);
}

/* Makes room for bytes more in the held buffer (handing a full one over, taking a new one
 * from Kineto); 0 if Kineto gives none. Under share_out_lock, dropped around Kineto's
 * callbacks (share_complete). */
static int
share_room(size_t bytes, CUcontext ctx, uint32_t stream)
{
    CUpti_BuffersCallbackCompleteFunc done = atomic_load(&share.completed);
    if (share_out.buf && share_out.owner == done && share_fits(bytes))
        return 1;
    if (share_out.buf && (share_out.owner != done || share_out.used > share_out.start))
        share_complete(ctx, stream);
    if (share_out.buf == NULL && done && !atomic_load(&share.exiting)) {
        CUpti_BuffersCallbackRequestFunc requested = atomic_load(&share.requested);
        uint8_t *b = NULL;
        size_t size = 0, max_records = 0;
        pthread_mutex_unlock(&share_out_lock);
        requested(&b, &size, &max_records);
        pthread_mutex_lock(&share_out_lock);
        if (b && share_out.buf == NULL) {
            share_out.owner = done;
            share_out.buf = b;
            share_out.size = size;
            share_out.max = max_records;
            share_out.start = share_out.used = (8 - ((uintptr_t)b & 7)) & 7;
            if (share_out.start > size) /* too small to align: nothing fits */
                share_out.start = share_out.used = size;
        } else if (b) { /* another thread took one meanwhile: this one goes back empty */
            pthread_mutex_unlock(&share_out_lock);
            done(ctx, stream, b, size, 0);
            pthread_mutex_lock(&share_out_lock);
        }
    }
    return share_fits(bytes);
}

/* Hands back a held buffer of a former registration's. */
static void
share_hold(void)
{
    pthread_mutex_lock(&share_out_lock);
    share_room(0, NULL, 0);
    pthread_mutex_unlock(&share_out_lock);
}

/* Copies record rec, spanning span bytes in CUPTI's buffer, into the held buffer if Kineto
 * asked for it; 1 copied, 0 not asked for, -1 no room. Under share_out_lock. */
static int
share_copy(CUpti_Activity *rec, size_t span, const struct share_map *map, CUcontext ctx,
           uint32_t stream)
{
    uint64_t *times[5];
    uint32_t *corr;
    int n;
    if ((unsigned)rec->kind >= SHARE_KINDS)
        return 0;
    /* the layout we know must fit in what CUPTI spaced the record by, which is what is
     * copied (the size CUPTI's cuptiActivityGetNextRecord will step by in Kineto's buffer) */
    size_t size = share_layout(rec, times, &n, &corr);
    if (size == 0 || span < size || !share_wanted(rec->kind, corr))
        return 0;
    size_t padded = (span + 7) & ~(size_t)7; /* the next copy 8-aligned */
    if (!share_room(padded, ctx, stream))
        return -1;
    CUpti_Activity *copy = (CUpti_Activity *)(share_out.buf + share_out.used);
    memcpy(copy, rec, span);
    memset((uint8_t *)copy + span, 0, padded - span);
    share_layout(copy, times, &n, &corr);
    share_convert(map, times, n);
    share_out.used += padded;
    share_out.count++;
    return 1;
}

void
cupti_share_deliver(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t valid,
                    CUptiResult (*next_record)(uint8_t *, size_t, CUpti_Activity **))
{
    if (atomic_load(&share.mode) != SHARE_ON || atomic_load(&share.requested) == NULL ||
        atomic_load(&share.exiting) || buffer == NULL || valid == 0)
        return;
    struct share_map map = share_fit();
    uint64_t copied = 0, lost = 0;
    CUpti_Activity *rec = NULL, *prev = NULL;
    pthread_mutex_lock(&share_out_lock);
    for (;;) {
        int more = next_record(buffer, valid, &rec) == CUPTI_SUCCESS;
        if (prev) { /* a record's span: to the next one, the last one's to the end */
            uint8_t *end = more ? (uint8_t *)rec : buffer + valid;
            int r = share_copy(prev, (size_t)(end - (uint8_t *)prev), &map, ctx, stream);
            copied += r > 0;
            lost += r < 0;
        }
        if (!more)
            break;
        prev = rec;
    }
    if (copied) { /* hand the copies over now, hold a new buffer */
        share_complete(ctx, stream);
        share_room(0, ctx, stream);
    }
    pthread_mutex_unlock(&share_out_lock);
    atomic_fetch_add(&share.records, copied);
    if (lost) {
        atomic_fetch_add(&share.lost, lost);
        if (!atomic_flag_test_and_set(&share.said_lost))
            coll_warn("CUPTI is shared: no room for %llu records in the other tool's buffers "
                      "(none given, or too small): not copied, counted in cupti_shared_lost",
                      (unsigned long long)lost);
    }
}

void
cupti_share_write_meta(dpro_writer *w, int at_end)
{
    if (!at_end) {
        dpro_writer_set_meta_int(w, "setting.DPRO_CUPTI_SHARE",
                                 coll_env_bool("DPRO_CUPTI_SHARE", 1));
        return;
    }
    uint64_t since = atomic_load(&share.since);
    if (since == 0)
        return;
    dpro_writer_set_meta(w, "cupti_shared", atomic_load(&share.clock) ? "clock" : "stamps");
    dpro_writer_set_meta_int(w, "cupti_shared_ns", (int64_t)since);
    dpro_writer_set_meta_int(w, "cupti_shared_records", (int64_t)atomic_load(&share.records));
    dpro_writer_set_meta_int(w, "cupti_shared_lost", (int64_t)atomic_load(&share.lost));
    if (atomic_load(&share.clock)) {
        char rate[32];
        pthread_mutex_lock(&share.fit_lock);
        snprintf(rate, sizeof rate, "%.9f", share.rate);
        pthread_mutex_unlock(&share.fit_lock);
        dpro_writer_set_meta(w, "cupti_shared_clock_rate", rate);
    }
}
