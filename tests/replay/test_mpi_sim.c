/*
 * test_mpi_sim: the distributed simulation (replay/mpi_sim.h) against the single one, node
 * for node, run under mpirun (test_replay_mpi.py starts it with 1 to 4 processes).
 *
 * Graphs: synthetic data-parallel jobs (tests/replay/synth.h) of 8 ranks, alike (ties
 * between ranks: every rank's kernels take the same times) and with a straggler, one
 * with fewer ranks simulated than the job has (a folded job's shape), and one with edges
 * and wake-ups between ranks, which cross processes (the edge ends a round hands out).
 * On process 0 every node's start, end, binding dependency and cause, every group's last
 * arrival and its participant, the makespan, the last node and the unfinished count must
 * be the single simulation's; on the others the nodes they simulated.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "replay/dfg.h"
#include "replay/mpi_sim.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

static int me, nprocs;

/* Adds edges and wake-ups from rank r's host calls to rank r + 1's later host calls
 * (the one k + 40 places later on its first thread): dependencies across processes. */
static void
cross_rank_edges(dfg *g)
{
    REQUIRE(dfg_finalize(g) == 0);
    for (int32_t r = 0; r + 1 < g->n_ranks; r++) {
        int32_t a = -1, b = -1;
        for (int32_t q = 0; q < g->n_res && (a < 0 || b < 0); q++) {
            if (g->res_kind[q] != DFG_RES_THREAD)
                continue;
            if (g->res_rank[q] == r && a < 0)
                a = g->res_first[q];
            if (g->res_rank[q] == r + 1 && b < 0)
                b = g->res_first[q];
        }
        REQUIRE(a >= 0 && b >= 0);
        for (int32_t k = 0; k < 300; k++) {
            a = g->next_on_res[a];
            b = g->next_on_res[b];
            if (a < 0 || b < 0)
                break;
            int32_t later = b;
            for (int32_t s = 0; s < 40 && g->next_on_res[later] >= 0; s++)
                later = g->next_on_res[later];
            if (k % 25 == 3)
                REQUIRE(dfg_add_edge(g, a, later) == 0);
            if (k % 60 == 7 && !(g->flags[later] & DFG_F_WAKEUP))
                REQUIRE(dfg_add_wakeup(g, a, later, 1500) == 0);
        }
    }
}

/* Simulates g alone and distributed and compares the two. */
static void
compare(const char *name, dfg *g)
{
    dfg copy;
    REQUIRE(dfg_clone(&copy, g) == 0);
    sim_result one = {0}, many = {0};
    mpisim_stats st;
    REQUIRE(sim_run(&copy, &one) == 0);
    REQUIRE(mpisim_run(g, &many, &st) == 0);
    REQUIRE(one.n_nodes == many.n_nodes && one.n_groups == many.n_groups);
    int64_t differ = 0, here = 0;
    for (int32_t n = 0; n < one.n_nodes; n++) {
        if (me != 0 && many.end[n] < 0)
            continue; /* simulated elsewhere */
        here++;
        if (one.start[n] != many.start[n] || one.end[n] != many.end[n] ||
            one.crit[n] != many.crit[n] || one.why[n] != many.why[n]) {
            if (differ++ < 5)
                fprintf(stderr,
                        "%s: process %d: node %d: start %lld/%lld end %lld/%lld crit %d/%d "
                        "why %d/%d\n",
                        name, me, n, (long long)one.start[n], (long long)many.start[n],
                        (long long)one.end[n], (long long)many.end[n], one.crit[n], many.crit[n],
                        one.why[n], many.why[n]);
        }
    }
    CHECK_EQ(differ, 0);
    if (me == 0) {
        int64_t gdiff = 0;
        for (int32_t q = 0; q < one.n_groups; q++)
            gdiff +=
                one.grp_arrival[q] != many.grp_arrival[q] || one.grp_last[q] != many.grp_last[q];
        CHECK_EQ(gdiff, 0);
        CHECK_EQ(many.makespan, one.makespan);
        CHECK_EQ(many.last_node, one.last_node);
        CHECK_EQ(many.n_unfinished, one.n_unfinished);
        CHECK_EQ(one.n_unfinished, 0);
        CHECK(one.makespan > 0);
        printf("%s: %d nodes, %d groups, makespan %lld ns; %d processes, %lld exchanges, "
               "%lld group arrivals, %lld edge ends\n",
               name, one.n_nodes, one.n_groups, (long long)one.makespan, st.processes,
               (long long)st.rounds, (long long)st.group_msgs, (long long)st.edge_msgs);
    }
    if (st.ranks_here > 0)
        CHECK(here > 0);
    CHECK_EQ(st.processes, nprocs);
    sim_result_free(&one);
    sim_result_free(&many);
    dfg_free(&copy);
}

int
main(int argc, char **argv)
{
    if (mpisim_init(&argc, &argv, &me, &nprocs) != 0)
        return 1;
    synth_params p;
    dfg g;

    synth_defaults(&p);
    p.ranks = 8;
    p.iterations = 3;
    REQUIRE(synth_dfg(&p, &g) == 0);
    compare("alike", &g);
    dfg_free(&g);

    synth_defaults(&p);
    p.ranks = 8;
    p.straggler_factor = 1.4;
    REQUIRE(synth_dfg(&p, &g) == 0);
    compare("straggler", &g);
    dfg_free(&g);

    synth_defaults(&p);
    p.ranks = 64;
    p.classes = 5;
    REQUIRE(synth_dfg(&p, &g) == 0);
    compare("classes", &g);
    dfg_free(&g);

    synth_defaults(&p);
    p.ranks = 6;
    p.seed = 11;
    REQUIRE(synth_dfg(&p, &g) == 0);
    cross_rank_edges(&g);
    compare("cross-rank edges", &g);
    dfg_free(&g);

    int failed = tests_failed, any = 0;
    MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (me == 0)
        tests_done();
    mpisim_finalize();
    return any ? 1 : 0;
}
