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
 * be the single simulation's; on the others the nodes they simulated. And the graph
 * handed from process 0 to the others (mpisim_share_graph) must arrive whole: its sizes,
 * arrays and names, and it must simulate as the original does.
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

/* Whether the n elements of size sz at a and b are equal (both NULL: equal). */
static int
same(const void *a, const void *b, size_t sz, int64_t n)
{
    return n <= 0 || (a && b && memcmp(a, b, sz * (size_t)n) == 0);
}

/* Hands g from process 0 to the others (mpisim_share_graph: every process built the same
 * g here, the others receive into an empty graph) and checks that what they received is
 * g, array for array and name for name; then the received graph, simulated alone and
 * distributed, must give g's single simulation (compare). */
static void
share(const char *name, dfg *g)
{
    dfg got;
    int64_t bytes = -1;
    if (me == 0)
        REQUIRE(dfg_clone(&got, g) == 0);
    else
        memset(&got, 0, sizeof got);
    REQUIRE(mpisim_share_graph(&got, &bytes) == 0);
    CHECK(bytes > (int64_t)g->n_nodes * 8);
    CHECK(got.n_nodes == g->n_nodes && got.n_edges == g->n_edges && got.n_res == g->n_res &&
          got.n_groups == g->n_groups && got.n_ranks == g->n_ranks &&
          got.n_iter_nodes == g->n_iter_nodes && !got.rank_rep == !g->rank_rep);
    int32_t nn = g->n_nodes, ng = g->n_groups;
    CHECK(same(got.kind, g->kind, 1, nn) && same(got.flags, g->flags, 1, nn) &&
          same(got.dur, g->dur, 4, nn) && same(got.gap, g->gap, 4, nn) &&
          same(got.lat, g->lat, 4, nn) && same(got.launch, g->launch, 4, nn) &&
          got.grp_part.n == g->grp_part.n &&
          same(got.grp_part.node, g->grp_part.node, 4, g->grp_part.n) &&
          same(got.grp_part.val, g->grp_part.val, 8, g->grp_part.n) &&
          same(got.mstart, g->mstart, 8, nn) && same(got.mlen, g->mlen, 4, nn) &&
          same(got.next_on_res, g->next_on_res, 4, nn) && got.dur_wide.n == g->dur_wide.n &&
          same(got.dur_wide.val, g->dur_wide.val, 8, g->dur_wide.n) &&
          got.gap_wide.n == g->gap_wide.n &&
          same(got.gap_wide.val, g->gap_wide.val, 8, g->gap_wide.n));
    CHECK(same(got.esrc, g->esrc, 4, g->n_edges) && same(got.edst, g->edst, 4, g->n_edges) &&
          same(got.res_rank, g->res_rank, 4, g->n_res) &&
          same(got.res_first, g->res_first, 4, g->n_res) && same(got.grp_dur, g->grp_dur, 8, ng) &&
          same(got.grp_nranks, g->grp_nranks, 4, ng) &&
          same(got.iter_off, g->iter_off, 4, g->n_ranks + 1) &&
          same(got.iter_node, g->iter_node, 4, g->n_iter_nodes) &&
          same(got.rank_weight, g->rank_weight, 4, g->rank_rep ? g->n_ranks : 0));
    int64_t names = 0;
    for (int32_t n = 0; n < nn; n++)
        names += strcmp(dfg_name(&got, got.name[n]), dfg_name(g, g->name[n])) != 0;
    CHECK_EQ(names, 0);
    CHECK_EQ(dfg_intern(&got, dfg_name(g, g->name[0])), g->name[0]); /* the hash travels too */
    if (me == 0)
        printf("%s: graph shared, %lld bytes to each process\n", name, (long long)bytes);
    compare(name, &got);
    dfg_free(&got);
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
    REQUIRE(synth_dfg(&p, &g) == 0);
    share("classes, shared", &g);
    dfg_free(&g);

    synth_defaults(&p);
    p.ranks = 8;
    p.straggler_factor = 1.4;
    REQUIRE(synth_dfg(&p, &g) == 0);
    share("straggler, shared", &g);
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
