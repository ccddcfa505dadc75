/*
 * test_dfg_memory: the replay graph's bytes per node and per edge (dfg_memory), on a
 * synthetic 8-rank job (tests/replay/synth.h) after dfg_finalize, against the figures
 * docs/models.md states ("Memory per node"): the node's stored fields (one array each,
 * replay/dfg.h) sum to at most NODE_STORED bytes, and a finalized node costs at most
 * NODE_BYTES, an edge at most EDGE_BYTES. A field added to the node, or slack the
 * finalize stops giving back, fails here; lower the bounds when the node shrinks (issue 16's
 * goal, 48 bytes a node, is met). The finalized graph's lists read through their accessors
 * as the plain arrays would: each group's participants (dfg_next_in_group, dfg_group), each
 * host's launches (dfg_launched_first, whose host slot is the lat array's), each node's
 * successors (dfg_succ_first), and the participants' lists through the block index of
 * grp_part, also once entries join it below them. Two more figures of the explicit replay's
 * peak: a loaded event (job_event) takes at most EVENT_BYTES, and the typical replay's view
 * of the graph (dfg_timing_view) owns only the timings, shares the rest, and simulates as a
 * whole copy with the same timings does, a duration and a gap past 32 bits included; reset
 * (dfg_timing_view_reset), it reads and simulates as the graph in the arrays it had, a
 * wait at the collectives set on it gone. And
 * what the compact node moved out of its arrays reads back exactly: measured ends past a 32-bit
 * length from the start (4.29 s, or before the start), durations and gaps past 32 bits
 * (4.29 s, or negative) from their side tables, through a clone, a merge and a removal;
 * bytes set out of node order;
 * the previous node on a resource after an insertion and a removal.
 */
#include <stdio.h>
#include <string.h>

#include "replay/dfg.h"
#include "replay/job.h"
#include "replay/sim.h"
#include "tests/replay/synth.h"

#define NODE_STORED 42 /* bytes a node holds in the per-node arrays */
#define NODE_BYTES 44.5
#define EDGE_BYTES 12.0
#define EVENT_BYTES 160 /* sizeof(job_event) */

/* The timing view of g against a whole copy, both with every duration doubled and node 0's
 * duration and node 1's gap made 5 s longer (past 32 bits): its own arrays are the four timings,
 * src's stay as they were, and the two simulations agree node for node. Returns 0, or 1 with the
 * failure told. */
static int
check_timing_view(dfg *g)
{
    dfg v, c;
    sim_result rv, rc;
    memset(&rv, 0, sizeof rv);
    memset(&rc, 0, sizeof rc);
    if (dfg_timing_view(&v, g) != 0 || dfg_clone(&c, g) != 0) {
        fprintf(stderr, "FAIL: dfg_timing_view or dfg_clone\n");
        return 1;
    }
    int fail = !(v.dur != g->dur && v.gap != g->gap && v.lat != g->lat && v.grp_dur != g->grp_dur &&
                 v.res == g->res && v.succ == g->succ && v.mlen == g->mlen && v.finalized);
    int64_t before = dfg_dur(g, 0);
    for (int32_t n = 0; n < g->n_nodes; n++) {
        int64_t d = 2 * dfg_dur(g, n) + (n == 0 ? 5000000000LL : 0);
        fail |= dfg_set_dur(&v, n, d) != 0 || dfg_set_dur(&c, n, d) != 0;
    }
    int64_t gap1 = dfg_gap(g, 1) + 5000000000LL;
    fail |= dfg_set_gap(&v, 1, gap1) != 0 || dfg_set_gap(&c, 1, gap1) != 0;
    fail |= dfg_dur(g, 0) != before || g->dur_wide.n != 0 || v.dur_wide.n != 1 ||
            dfg_dur(&v, 0) != 2 * before + 5000000000LL || g->gap_wide.n != 0 ||
            v.gap_wide.n != 1 || dfg_gap(&v, 1) != gap1;
    if (sim_run(&v, &rv) != 0 || sim_run(&c, &rc) != 0)
        fail = 1;
    for (int32_t n = 0; !fail && n < g->n_nodes; n++)
        fail = rv.start[n] != rc.start[n] || rv.end[n] != rc.end[n] || rv.crit[n] != rc.crit[n];
    fail |= rv.makespan != rc.makespan || rv.makespan <= 0;
    if (fail)
        fprintf(stderr, "FAIL: the timing view shares or simulates otherwise than a copy\n");
    sim_result_free(&rv);
    sim_result_free(&rc);
    dfg_timing_view_free(&v);
    dfg_free(&c);
    return fail;
}

/* A timing view reset (dfg_timing_view_reset) after every timing was written, a duration
 * and a gap past 32 bits among them, and a wait at the collectives: its arrays stay where they
 * were, its timings read as g's again, and a second simulation into the same result gives g's own,
 * node for node. Returns 0, or 1 with the failure told. */
static int
check_timing_view_reset(dfg *g)
{
    dfg v;
    sim_result rg, rv;
    memset(&rg, 0, sizeof rg);
    memset(&rv, 0, sizeof rv);
    if (dfg_timing_view(&v, g) != 0 || sim_run(g, &rg) != 0) {
        fprintf(stderr, "FAIL: dfg_timing_view or sim_run\n");
        return 1;
    }
    const void *arrays[4] = {v.dur, v.gap, v.lat, v.grp_dur};
    int fail = 0;
    for (int32_t n = 0; n < g->n_nodes; n++) {
        fail |= dfg_set_dur(&v, n, 3 * dfg_dur(g, n) + (n == 2 ? 6000000000LL : 1)) != 0;
        fail |= dfg_set_gap(&v, n, dfg_gap(g, n) + (n == 3 ? 7000000000LL : 5)) != 0;
        dfg_set_lat(&v, n, dfg_lat(g, n) + 7);
    }
    for (int32_t q = 0; q < g->n_groups; q++)
        v.grp_dur[q] += 11;
    v.grp_wait_ns = 123456; /* a wait at the collectives, as the typical replay's */
    v.grp_wait_nranks = g->n_ranks;
    fail |= v.dur_wide.n != 1 || v.gap_wide.n != 1 || sim_run(&v, &rv) != 0 ||
            rv.makespan == rg.makespan;
    fail |= dfg_timing_view_reset(&v, g) != 0;
    fail |= arrays[0] != v.dur || arrays[1] != v.gap || arrays[2] != v.lat ||
            arrays[3] != v.grp_dur || v.dur_wide.n != g->dur_wide.n ||
            v.gap_wide.n != g->gap_wide.n || v.grp_wait_ns != g->grp_wait_ns ||
            v.grp_wait_nranks != g->grp_wait_nranks;
    for (int32_t n = 0; !fail && n < g->n_nodes; n++)
        fail = dfg_dur(&v, n) != dfg_dur(g, n) || dfg_gap(&v, n) != dfg_gap(g, n) ||
               dfg_lat(&v, n) != dfg_lat(g, n);
    for (int32_t q = 0; !fail && q < g->n_groups; q++)
        fail = v.grp_dur[q] != g->grp_dur[q];
    fail |= sim_run(&v, &rv) != 0;
    for (int32_t n = 0; !fail && n < g->n_nodes; n++)
        fail = rv.start[n] != rg.start[n] || rv.end[n] != rg.end[n] || rv.crit[n] != rg.crit[n];
    fail |= rv.makespan != rg.makespan;
    if (fail)
        fprintf(stderr, "FAIL: a reset timing view moves or reads otherwise than its graph\n");
    sim_result_free(&rg);
    sim_result_free(&rv);
    dfg_timing_view_free(&v);
    return fail;
}

/* g's lists (see the header) against a scan of its nodes and edges. Returns 0, or 1 with the
 * failure told. */
static int
check_lists(const dfg *g)
{
    int fail = 0;
    int32_t seen = 0, launches = 0;
    int64_t succs = 0;
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t c = 0;
        for (int32_t p = g->grp_first[q]; p >= 0 && !fail; p = dfg_next_in_group(g, p), c++)
            fail = dfg_group(g, p) != q || g->kind[p] != DFG_COLL;
        fail |= c != g->grp_members[q];
        seen += c;
    }
    for (int32_t n = 0; n < g->n_nodes && !fail; n++) {
        seen -= dfg_group(g, n) >= 0;
        int32_t prev = -1, c = 0;
        for (int32_t i = dfg_launched_first(g, n); i >= 0; i = dfg_launched_next(g, n, i), c++) {
            fail |= g->launch[g->launched[i]] != n || g->launched[i] <= prev;
            prev = g->launched[i];
        }
        fail |= c != dfg_launched_count(g, n) || (g->kind[n] == DFG_HOST && dfg_lat(g, n) != 0);
        launches += c;
        int64_t e = dfg_succ_first(g, n);
        fail |= e > 0 && e <= g->n_edges && g->esrc[e - 1] >= n;
        for (; dfg_succ_more(g, n, e); e++, succs++)
            fail |= g->succ[e] != g->edst[e];
    }
    for (int32_t n = 0; n < g->n_nodes; n++)
        launches -= g->launch[n] >= 0;
    fail |= seen != 0 || launches != 0 || succs != g->n_edges || g->n_groups == 0 ||
            g->n_launched == 0 || g->n_edges == 0;
    if (fail)
        fprintf(stderr, "FAIL: a group, launch or successor list reads otherwise\n");
    return fail;
}

/* Two hosts launching three kernels and one, interleaved: each host's list holds its own, in
 * node order, and a host's latency reads 0. Returns 0, or 1 with the failure told. */
static int
check_launch_lists(void)
{
    dfg g;
    int fail = dfg_init(&g, 1) != 0;
    int32_t th = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, 0);
    int32_t st = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, 0);
    int32_t h[2] = {dfg_add_node(&g, DFG_HOST, th, 0), dfg_add_node(&g, DFG_HOST, th, 0)}, k[4];
    for (int i = 0; i < 4 && !fail; i++) {
        k[i] = dfg_add_node(&g, DFG_KERNEL, st, 0);
        fail = k[i] < 0;
        if (!fail) {
            g.launch[k[i]] = h[i == 2];
            dfg_set_lat(&g, k[i], 100 + i);
        }
    }
    fail |= dfg_finalize(&g) != 0 || dfg_launched_count(&g, h[0]) != 3 ||
            dfg_launched_count(&g, h[1]) != 1 || dfg_launched_count(&g, k[0]) != 0;
    int32_t want[3] = {k[0], k[1], k[3]}, c = 0;
    for (int32_t i = dfg_launched_first(&g, h[0]); !fail && i >= 0;
         i = dfg_launched_next(&g, h[0], i))
        fail = c > 2 || g.launched[i] != want[c++];
    fail |= dfg_lat(&g, h[0]) != 0 || dfg_lat(&g, k[3]) != 103 ||
            g.launched[dfg_launched_first(&g, h[1])] != k[2];
    if (fail)
        fprintf(stderr, "FAIL: a host's launched list reads otherwise\n");
    dfg_free(&g);
    return fail;
}

/* The side tables and the walked previous node (see the header). Returns 0, or 1 with the
 * failure told. */
static int
check_side_tables(void)
{
    dfg g, c;
    int64_t lens[5] = {5000000000LL, (int64_t)UINT32_MAX - 1, -1, (int64_t)UINT32_MAX, 0};
    int32_t n[5];
    int fail = dfg_init(&g, 1) != 0;
    int32_t res = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, 0);
    for (int k = 0; k < 5 && !fail; k++) {
        n[k] = dfg_add_node(&g, DFG_KERNEL, res, 0);
        g.mstart[n[k]] = 1000 + k;
        fail = n[k] < 0 || dfg_set_mend(&g, n[k], 1000 + k + lens[k]) != 0 ||
               dfg_set_dur(&g, n[k], lens[k]) != 0 || dfg_set_gap(&g, n[k], lens[k]) != 0;
    }
    fail |= dfg_set_bytes(&g, n[3], 30) != 0 || dfg_set_bytes(&g, n[1], 10) != 0 ||
            dfg_set_bytes(&g, n[2], 0) != 0;
    fail |= g.mend_wide.n != 3 || g.bytes.n != 2 || g.mlen[n[1]] != UINT32_MAX - 1 ||
            g.dur_wide.n != 3 || g.dur[n[1]] != UINT32_MAX - 1 || g.gap_wide.n != 3 ||
            g.gap[n[1]] != UINT32_MAX - 1;
    fail |= dfg_clone(&c, &g) != 0;
    for (int k = 0; k < 5 && !fail; k++)
        fail = dfg_mend(&g, n[k]) != 1000 + k + lens[k] ||
               dfg_mend(&c, n[k]) != dfg_mend(&g, n[k]) || dfg_dur(&g, n[k]) != lens[k] ||
               dfg_dur(&c, n[k]) != lens[k] || dfg_gap(&g, n[k]) != lens[k] ||
               dfg_gap(&c, n[k]) != lens[k];
    fail |= dfg_bytes(&c, n[1]) != 10 || dfg_bytes(&c, n[3]) != 30 || dfg_bytes(&c, n[0]) != 0;
    /* n[4] ends where it starts: merged with n[0], it takes n[0]'s wide end and duration;
     * n[0]'s gap passes to n[1], past 32 bits with n[1]'s own */
    fail |= dfg_merge_nodes(&c, n[4], n[0]) != 0 || dfg_mend(&c, n[4]) != 1000 + lens[0] ||
            dfg_dur(&c, n[4]) != lens[0] || dfg_gap(&c, n[1]) != lens[0] + lens[1];
    int32_t x = dfg_insert_before(&c, n[2], DFG_KERNEL, 0, 5);
    fail |= x < 0 || dfg_prev_on_res(&c, n[2]) != x || dfg_prev_on_res(&c, x) != n[1] ||
            dfg_prev_on_res(&c, n[1]) != -1 || dfg_remove_node(&c, x) != 0 ||
            dfg_prev_on_res(&c, n[2]) != n[1] || dfg_prev_on_res(&c, x) != -1;
    if (fail)
        fprintf(stderr, "FAIL: a side table or the previous node reads back otherwise\n");
    dfg_free(&c);
    dfg_free(&g);
    return fail;
}

/* Whether every participant of g's groups reads its own group and the lists hold
 * grp_members nodes each. */
static int
groups_read_back(const dfg *g)
{
    int ok = 1;
    for (int32_t q = 0; q < g->n_groups && ok; q++) {
        int32_t c = 0;
        for (int32_t p = g->grp_first[q]; p >= 0 && ok; p = dfg_next_in_group(g, p), c++)
            ok = dfg_group(g, p) == q && c < g->n_nodes;
        ok &= c == g->grp_members[q];
    }
    return ok;
}

/* Participants in several blocks of 64 nodes, some blocks sparse, one ending with them, one
 * all of them (grp_part's block index, part_blk, and the bounds dfg_part_entry draws from a
 * node's place in its block): their lists read back after finalize, and still after entries
 * join the table below them (a reserved point-to-point op) in the finalized graph, which
 * shifts the entries the index points at. Returns 0, or 1 with the failure told. */
static int
check_group_index(void)
{
    dfg g;
    int fail = dfg_init(&g, 1) != 0;
    int32_t st = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, 0);
    int32_t q[2] = {dfg_add_group(&g, 0, 2, 8, 1, 1, 10), dfg_add_group(&g, 0, 2, 8, 1, 2, 10)};
    /* sparse below node 300, every node from there (as a tensor partition appends them):
     * block 4 ends with participants, block 5 holds nothing else */
    for (int32_t i = 0; i < 384 && !fail; i++) {
        int32_t n = dfg_add_node(&g, DFG_KERNEL, st, 0);
        fail = n < 0 || ((i % 37 == 36 || i >= 300) && dfg_set_group(&g, n, q[i % 2]) != 0);
    }
    fail |= dfg_finalize(&g) != 0 || !groups_read_back(&g) || g.grp_part.n != 92;
    fail |= dfg_group_reserve(&g, 3) != 0 || dfg_group_reserve(&g, 5) != 0 || g.grp_part.n != 94 ||
            dfg_group(&g, 3) != -1 || !groups_read_back(&g);
    fail |= dfg_finalize(&g) != 0 || !groups_read_back(&g);
    if (fail)
        fprintf(stderr, "FAIL: a group's list reads otherwise through the block index\n");
    dfg_free(&g);
    return fail;
}

int
main(void)
{
    dfg g;
    synth_params p;
    synth_defaults(&p);
    p.ranks = 8;
    p.iterations = 3;
    p.ops_per_iter = 400;
    p.buckets = 8;
    int fail = 0;
    if (synth_dfg(&p, &g) != 0 || dfg_finalize(&g) != 0) {
        fprintf(stderr, "FAIL: building the synthetic job\n");
        return 1;
    }
    size_t stored = sizeof *g.kind + sizeof *g.flags + sizeof *g.res + sizeof *g.name +
                    sizeof *g.dur + sizeof *g.gap + sizeof *g.lat + sizeof *g.launch +
                    sizeof *g.next_on_res + sizeof *g.mstart + sizeof *g.mlen;
    double nb = 0, eb = 0;
    dfg_memory(&g, &nb, &eb);
    printf("%d nodes, %lld edges: %zu bytes stored a node, %.1f bytes a node, %.1f an edge\n",
           g.n_nodes, (long long)g.n_edges, stored, nb, eb);
    if (stored > NODE_STORED) {
        fprintf(stderr, "FAIL: %zu bytes stored a node, at most %d\n", stored, NODE_STORED);
        fail = 1;
    }
    if (nb < (double)stored || nb > NODE_BYTES) {
        fprintf(stderr, "FAIL: %.1f bytes a node, from %zu to %.0f expected\n", nb, stored,
                NODE_BYTES);
        fail = 1;
    }
    if (eb <= 0 || eb > EDGE_BYTES) {
        fprintf(stderr, "FAIL: %.1f bytes an edge, at most %.0f expected\n", eb, EDGE_BYTES);
        fail = 1;
    }
    printf("a loaded event: %zu bytes\n", sizeof(job_event));
    if (sizeof(job_event) > EVENT_BYTES) {
        fprintf(stderr, "FAIL: a loaded event takes %zu bytes, at most %d\n", sizeof(job_event),
                EVENT_BYTES);
        fail = 1;
    }
    fail |= check_lists(&g);
    fail |= check_launch_lists();
    fail |= check_timing_view(&g);
    fail |= check_timing_view_reset(&g);
    fail |= check_side_tables();
    fail |= check_group_index();
    dfg_free(&g);
    return fail;
}
