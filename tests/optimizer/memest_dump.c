/*
 * memest_dump: prints, as one JSON object, every field of the memory estimate that
 * dpro-optimize builds from a job (profile_estimate_memory), the job read as
 * dpro-optimize reads it: `memest_dump DIR N W [full]` opens DIR with -n N -w W (N 0:
 * every iteration; W -1: detected) and dpro-optimize's other defaults (the window from
 * the trace's start where the traces hold allocations, alike ranks folded); with `full`
 * every event is read (replay_options.full_load) though N iterations are compared. Also
 * prints the events read ("events") and the compared iterations. For
 * test_memest_window.py, which compares the windowed estimate with the full read's.
 * Exits 0, 1 when the job cannot be opened or holds no allocations, 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/memest.h"
#include "optimizer/profile.h"
#include "replay/replay.h"

/* What the read takes from each rank's events: dpro-optimize's profile_take, and the
 * events a rank held before their release. */
typedef struct dump_take {
    profile_take tk;
    size_t events;
} dump_take;

/* replay_options.take_events: counts rank's events, then takes them as dpro-optimize does. */
static int
take_rank(void *ctx, const job_rank *jr, int32_t rank, int64_t shift_ns)
{
    dump_take *d = ctx;
    d->events += jr->n_events;
    return profile_take_rank(&d->tk, jr, rank, shift_ns);
}

/* Prints "key": [n values of v]. */
static void
print_array(const char *key, const int64_t *v, int32_t n)
{
    printf(", \"%s\": [", key);
    for (int32_t i = 0; i < n; i++)
        printf("%s%lld", i ? ", " : "", (long long)v[i]);
    printf("]");
}

int
main(int argc, char **argv)
{
    if (argc < 4 || argc > 5 || (argc == 5 && strcmp(argv[4], "full") != 0)) {
        fprintf(stderr, "usage: memest_dump DIR N W [full]\n");
        return 2;
    }
    replay_options ro;
    memset(&ro, 0, sizeof ro);
    ro.iterations = atoi(argv[2]);
    ro.warmup = atoi(argv[3]);
    ro.window_from_start = 1;
    ro.fold = 1;
    ro.full_load = argc == 5;
    dump_take d;
    memset(&d, 0, sizeof d);
    ro.release_events = 1; /* as dpro-optimize reads: each rank's events taken, then released */
    ro.take_events = take_rank;
    ro.take_ctx = &d;
    replay rp;
    char err[DPRO_ERRBUF_SIZE];
    if (replay_open(argv[1], &ro, &rp, err, sizeof err) < 0) {
        fprintf(stderr, "memest_dump: %s\n", err);
        profile_take_free(&d.tk);
        return 1;
    }
    memest m;
    int32_t rank = -1;
    int built = dfg_finalize(&rp.graph) == 0 ? profile_estimate_memory(&rp, &d.tk, &m, &rank) : -1;
    int rc = built > 0 ? 0 : 1;
    size_t events = d.events;
    if (rc == 0) {
        printf("{\"events\": %zu, \"rank\": %d, \"iter_first\": %d, \"iter_last\": %d, "
               "\"peak_bytes\": %lld, "
               "\"static_bytes\": %lld, \"optimizer_bytes\": %lld, \"backward_bytes\": %lld, "
               "\"other_bytes\": %lld, \"n_layers\": %d, \"n_static\": %d, \"segments\": %d, "
               "\"workspace_bytes\": %lld, \"n_held\": %d",
               events, rank, rp.iter_first, rp.iter_last, (long long)m.peak_bytes,
               (long long)m.static_bytes, (long long)m.optimizer_bytes, (long long)m.backward_bytes,
               (long long)m.other_bytes, m.n_layers, m.n_static, m.segments,
               (long long)m.workspace_bytes, m.n_held);
        print_array("act_bytes", m.act_bytes, m.n_layers);
        print_array("act_time", m.act_time, m.n_layers);
        print_array("static_each", m.static_each, m.n_static);
        print_array("held_bytes", m.held_bytes, m.n_held);
        printf("}\n");
        memest_free(&m);
    } else {
        fprintf(stderr, "memest_dump: %s of %s\n",
                built == 0 ? "no allocations, no memory estimate" : "out of memory", argv[1]);
    }
    profile_take_free(&d.tk);
    replay_close(&rp);
    return rc;
}
