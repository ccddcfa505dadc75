/* cupti_clock.c: the client's clock in the simulated CUPTI's records: how the device maps
 * its CLOCK_MONOTONIC nanoseconds into the clock and units of the callback a client
 * registered (cuptiActivityRegisterTimestampCallback). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdint.h>

#include "simgpu_internal.h"

/* cuptiActivityRegisterTimestampCallback: record times are the client's clock, in its
 * units, as real CUPTI gives them (it interpolates the GPU's stamps into the callback's
 * clock): Kineto registers the TSC (getApproximateTime, ticks) and converts the records'
 * times itself. A clock that counts nanoseconds (CUPTI's contract for the callback; rate
 * within 2 % of 1) is mapped from CLOCK_MONOTONIC by an offset, measured at registration
 * from the tightest of a few bracketed samples: a rate fitted over a short interval would
 * be extrapolated over the whole run (10 ns of jitter over 2 ms is 5 us per second of run).
 * Another clock gets a rate too, fitted over 20 ms at registration and refitted from the
 * registration's sample to a fresh one every 50 ms or more (its error shrinks as the run
 * goes on). */
static CUpti_TimestampCallbackFunc _Atomic g_ts_cb; /* set after the mapping below */
static int64_t g_ts_offset;                         /* client ns - CLOCK_MONOTONIC ns */
static uint64_t g_ts_n0, g_ts_u0;                   /* registration: CLOCK_MONOTONIC, client */
static _Atomic double g_ts_rate;                    /* client units per ns; 0: nanoseconds */
static _Atomic uint64_t g_ts_refit_ns;              /* CLOCK_MONOTONIC of the last refit */
static pthread_mutex_t g_ts_lock = PTHREAD_MUTEX_INITIALIZER;

/* The tightest of 8 bracketed samples of cb: *n the CLOCK_MONOTONIC middle, *u the
 * client's value (a preempted sample has a wide bracket). */
static void
ts_sample(CUpti_TimestampCallbackFunc cb, uint64_t *n, uint64_t *u)
{
    uint64_t best = UINT64_MAX;
    *n = *u = 0;
    for (int i = 0; i < 8; i++) {
        uint64_t n0 = simgpu_now_ns(), v = cb(), n1 = simgpu_now_ns();
        if (n1 - n0 < best) {
            best = n1 - n0;
            *n = n0 + (n1 - n0) / 2;
            *u = v;
        }
    }
}

/* Refits the rate of a clock that is not nanoseconds from the registration's sample to a
 * fresh one, at most every 50 ms; the caller passes CLOCK_MONOTONIC now. */
static void
ts_refit(CUpti_TimestampCallbackFunc cb, uint64_t now)
{
    uint64_t n = 0, u = 0;
    if (now - atomic_load(&g_ts_refit_ns) < 50000000u || pthread_mutex_trylock(&g_ts_lock))
        return;
    if (now - atomic_load(&g_ts_refit_ns) >= 50000000u) {
        ts_sample(cb, &n, &u);
        if (n > g_ts_n0 && u > g_ts_u0)
            atomic_store(&g_ts_rate, (double)(u - g_ts_u0) / (double)(n - g_ts_n0));
        atomic_store(&g_ts_refit_ns, now);
    }
    pthread_mutex_unlock(&g_ts_lock);
}

uint64_t
simgpu_cupti_ts(uint64_t ns)
{
    uint64_t rc = ns;
    CUpti_TimestampCallbackFunc cb = atomic_load_explicit(&g_ts_cb, memory_order_acquire);
    double rate;
    if (!cb || !ns)
        return rc;
    rate = atomic_load_explicit(&g_ts_rate, memory_order_relaxed);
    if (rate == 0.0)
        return (uint64_t)((int64_t)ns + g_ts_offset);
    ts_refit(cb, simgpu_now_ns());
    rate = atomic_load_explicit(&g_ts_rate, memory_order_relaxed);
    return (uint64_t)((double)g_ts_u0 + ((double)(int64_t)(ns - g_ts_n0)) * rate);
}

CUptiResult
simgpu_cupti_timestamp_callback(CUpti_TimestampCallbackFunc cb)
{
    uint64_t n = 0, u = 0, n1 = 0, u1 = 0;
    double rate;
    if (!cb) {
        atomic_store(&g_ts_cb, NULL);
        return CUPTI_SUCCESS;
    }
    atomic_store(&g_ts_cb, NULL);
    ts_sample(cb, &n, &u);
    g_ts_offset = (int64_t)u - (int64_t)n;
    g_ts_n0 = n;
    g_ts_u0 = u;
    do /* 20 ms for a first rate */
        ts_sample(cb, &n1, &u1);
    while (n1 - g_ts_n0 < 20000000u);
    rate = u1 > g_ts_u0 ? (double)(u1 - g_ts_u0) / (double)(n1 - g_ts_n0) : 1.0;
    atomic_store(&g_ts_rate, rate > 0.98 && rate < 1.02 ? 0.0 : rate);
    atomic_store(&g_ts_refit_ns, n1);
    atomic_store_explicit(&g_ts_cb, cb, memory_order_release);
    return CUPTI_SUCCESS;
}
