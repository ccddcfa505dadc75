/*
 * test_fidelity_unit: the typical-duration replay and the perturbation check (fidelity.c)
 * on a hand-made graph with known answers.
 *
 * One rank, four steps k = 0..3: the host waits 10 us, launches kernel k (the call takes
 * 5 us, the kernel starts 3 us after the call began and runs d[k]), then synchronises
 * (2 us after the launch returns; the call returns 1 us after the kernel ends). The
 * synchronisations close the iterations, so iterations 0..2 hold steps 1..3, each
 * 14 us + d[k] long. With d = 50, 100, 400, 100 us the measured mean is 214 us; the
 * typical replay (median kernel 100 us) predicts 114 us, with means 214 us.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay/build.h"
#include "replay/dfg.h"
#include "replay/replay.h"
#include "replay/sim.h"
#include "tests/unit/testutil.h"

#define US 1000

enum { STEPS = 4 };

/* Builds the graph described above into *g (timing fitted from the measured times). */
static void
make_graph(dfg *g)
{
    static const int64_t d[STEPS] = {50 * US, 100 * US, 400 * US, 100 * US};
    REQUIRE(dfg_init(g, 1) == 0);
    int32_t th = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, 0);
    int32_t st = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, 0);
    int32_t nl = dfg_intern(g, "cudaLaunchKernel"), ns = dfg_intern(g, "cudaDeviceSynchronize");
    int32_t nk = dfg_intern(g, "kern");
    REQUIRE(th >= 0 && st >= 0 && nl > 0 && ns > 0 && nk > 0);
    int32_t sync[STEPS];
    int64_t t = 0;
    for (int k = 0; k < STEPS; k++) {
        int32_t l = dfg_add_node(g, DFG_HOST, th, nl);
        int32_t y = dfg_add_node(g, DFG_HOST, th, ns);
        int32_t x = dfg_add_node(g, DFG_KERNEL, st, nk);
        REQUIRE(l >= 0 && y >= 0 && x >= 0);
        g->mstart[l] = t + 10 * US;
        dfg_set_mend(g, l, g->mstart[l] + 5 * US);
        g->launch[x] = l;
        g->mstart[x] = g->mstart[l] + 3 * US;
        dfg_set_mend(g, x, g->mstart[x] + d[k]);
        g->mstart[y] = dfg_mend(g, l) + 2 * US;
        dfg_set_mend(g, y, dfg_mend(g, x) + 1 * US);
        g->flags[y] |= DFG_F_BLOCKING;
        REQUIRE(dfg_add_edge(g, x, y) == 0);
        sync[k] = y;
        t = dfg_mend(g, y);
    }
    REQUIRE(dfg_set_iterations(g, 0, sync, STEPS) == 0);
    REQUIRE(build_derive_timing(g) == 0);
}

/* A replay around a hand-made graph: no job (every rank counts as present). */
static void
make_replay(replay *rp, int32_t first, int32_t last)
{
    memset(rp, 0, sizeof *rp);
    make_graph(&rp->graph);
    rp->iter_first = first;
    rp->iter_last = last;
}

static int
near(double a, double b)
{
    return fabs(a - b) < 1e-6 * (fabs(b) + 1);
}

static void
test_typical(void)
{
    replay rp;
    make_replay(&rp, 0, 2);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(near(replay_predict(&rp, &rp.graph, &r), 214.0 * US)); /* the exact replay */
    replay_typical t;
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.iterations, 3);
    CHECK_EQ(t.nodes, 9);
    CHECK_EQ(t.matched, 9);
    CHECK(near(t.measured_us, 214.0));
    CHECK(near(t.predicted_us, 114.0));
    CHECK(near(t.error_pct, -100.0 * 100.0 / 214.0));
    CHECK(near(t.mean_predicted_us, 214.0));
    sim_result_free(&r);
    dfg_free(&rp.graph);

    /* one compared iteration: the typical replay is the exact one */
    make_replay(&rp, 1, 1);
    CHECK(replay_typical_replay(&rp, &t) == 0);
    CHECK_EQ(t.iterations, 1);
    CHECK(near(t.measured_us, 414.0));
    CHECK(near(t.predicted_us, 414.0));
    dfg_free(&rp.graph);
}

static void
test_perturbation(void)
{
    replay rp;
    make_replay(&rp, 0, 2);
    CHECK_EQ(replay_scale_class(&rp.graph, dfg_intern(&rp.graph, "kern"), -1), -1);
    replay_perturbation p;
    CHECK(replay_perturb(&rp, 5, 0.5, &p) == 0);
    REQUIRE(p.n == 1);
    CHECK(near(p.baseline_us, 214.0));
    CHECK(near(p.baseline_stale_us, 0));
    CHECK(!strcmp(dfg_name(&rp.graph, p.cls[0].name), "kern"));
    CHECK_EQ(p.cls[0].count, 3);
    CHECK(near(p.cls[0].total_us, 200.0));
    CHECK(near(p.cls[0].predicted_us, 114.0)); /* saves all it gives back: on the path */
    /* without it the synchronisation waits for nothing: 10 + 5 + 2 + 1 us */
    CHECK(near(p.cls[0].without_us, 18.0));
    CHECK(near(p.cls[0].stale_wait_us, 0));
    replay_perturbation_free(&p);

    /* without its edges the synchronisations keep their measured waits: the replay of the
     * trace still matches, the prediction does not move, and the waits go stale. Each
     * one's own cost is what it took after its kernel ended, 1 us: step 2 ends 404 us
     * after its launch instead of 3 + 200 + 1, steps 1 and 3 at 104 instead of 3 + 50 + 1:
     * 300 us over 3 iterations, all the time the class gave back. */
    CHECK_EQ(replay_drop_edges(&rp.graph, 1.0), STEPS);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(near(replay_predict(&rp, &rp.graph, &r), 214.0 * US));
    CHECK(replay_perturb(&rp, 5, 0.5, &p) == 0);
    REQUIRE(p.n == 1);
    CHECK(near(p.cls[0].predicted_us, 214.0));
    CHECK(near(p.cls[0].stale_wait_us, 100.0));
    replay_perturbation_free(&p);
    sim_result_free(&r);
    dfg_free(&rp.graph);
}

int
main(void)
{
    test_typical();
    test_perturbation();
    return tests_done();
}
