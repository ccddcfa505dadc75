/*
 * clock.c: hot-path stamps from the TSC and their conversion to CLOCK_MONOTONIC ns.
 */
#include "config.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* ---- TSC stamps ---------------------------------------------------------------------------
 * mono(stamp) = ns_a + (stamp - tsc_a) * ns_per_tick. (tsc_a, ns_a) is re-taken at every
 * drain, so records (at most a drain interval old) are converted close to an anchor; the
 * slope is measured over a baseline of about a second (re-based every second), so NTP
 * slewing of CLOCK_MONOTONIC is followed and reading jitter weighs little. */
struct coll_tsc_map coll_tsc;

/* Takes a (TSC, CLOCK_MONOTONIC) pair, the tightest of three. */
static void
coll_tsc_pair(uint64_t *tsc, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 3; i++) {
        uint64_t a = coll_now(), t = coll_stamp(), b = coll_now();
        if (b - a < best) {
            best = b - a;
            *tsc = t;
            *ns = a + (b - a) / 2;
        }
    }
}

/* Decides whether hooks stamp with the TSC (DPRO_CLOCK=tsc|monotonic, default: the TSC
 * when the kernel's clocksource is the TSC) and takes the first anchor. */
void
coll_tsc_init(void)
{
    coll_use_tsc = 0;
#if defined(__x86_64__)
    const char *mode = getenv("DPRO_CLOCK");
    int want = 0;
    if (mode && *mode && strcmp(mode, "tsc") && strcmp(mode, "auto") && strcmp(mode, "monotonic")) {
        coll_warn("DPRO_CLOCK=%s is none of tsc, monotonic, auto; using auto", mode);
        mode = NULL;
    }
    if (mode && !strcmp(mode, "tsc")) {
        want = 1;
    } else if (!mode || !strcmp(mode, "auto") || !*mode) {
        char src[32] = "";
        int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                      O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = read(fd, src, sizeof src - 1);
            close(fd);
            src[n > 0 ? n : 0] = '\0';
        }
        want = strncmp(src, "tsc", 3) == 0;
    }
    coll_use_tsc = want;
    if (want) {
        coll_tsc_pair(&coll_tsc.tsc_b, &coll_tsc.ns_b);
        coll_tsc.tsc_a = coll_tsc.tsc_b;
        coll_tsc.ns_a = coll_tsc.ns_b;
        coll_tsc.ns_per_tick = 0;
    }
#endif
}

/* Re-anchors the TSC map (background thread, before each drain). */
void
coll_tsc_anchor(void)
{
    if (!coll_use_tsc)
        return;
    uint64_t tsc, ns;
    coll_tsc_pair(&tsc, &ns);
    if (tsc > coll_tsc.tsc_b && ns > coll_tsc.ns_b + 1000000)
        coll_tsc.ns_per_tick = (double)(ns - coll_tsc.ns_b) / (double)(tsc - coll_tsc.tsc_b);
    coll_tsc.tsc_a = tsc;
    coll_tsc.ns_a = ns;
    if (ns > coll_tsc.ns_b + 2000000000ull) {
        coll_tsc.tsc_b = tsc;
        coll_tsc.ns_b = ns;
    }
}

uint64_t
coll_stamp_to_ns_first(uint64_t stamp)
{
    /* No slope yet (less than 1 ms since start): measure one now. */
    uint64_t t = coll_tsc.tsc_b, n = coll_tsc.ns_b;
    struct timespec ms = {0, 2000000};
    nanosleep(&ms, NULL);
    coll_tsc_anchor();
    if (coll_tsc.ns_per_tick == 0 && coll_tsc.tsc_a > t)
        coll_tsc.ns_per_tick = (double)(coll_tsc.ns_a - n) / (double)(coll_tsc.tsc_a - t);
    if (coll_tsc.ns_per_tick == 0)
        return coll_tsc.ns_a; /* still no slope: the map of slope 0 */
    return coll_stamp_to_ns(stamp);
}
