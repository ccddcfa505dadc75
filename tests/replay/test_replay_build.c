/*
 * test_replay_build: unit tests of the builder: its timing inference on hand-made measured
 * graphs (launch-queue backpressure, pure submission latency), checked by what-if
 * predictions against a reference model of the device; send/recv pairing by channel and
 * ordinal, grouped calls, refused pairs, and the events scan (grouped calls carried by
 * ncclGroupEnd's kernel, collective ordinals without send/recv); event dependencies
 * rebuilt from call order (build_repair_event_edges); device ops measured to start before
 * an op they wait for ended (build_count_early_starts).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "replay/build.h"
#include "replay/dfg.h"
#include "replay/job.h"
#include "replay/sim.h"
#include "tests/unit/testutil.h"

/* ---- builder timing inference, against a reference model ------------------------------- */

/* A reference single-stream device fed by one host thread: call k starts hgap after
 * call k-1 returned and returns cost after it started, or cost after op k-Q finished
 * when more than Q - 1 earlier ops are unfinished (Q = 0: an unbounded queue); op k
 * starts at max(end of op k-1 + dgap, call start + lat) and runs kdur[k]. Every
 * sync_every ops (0: never) the thread synchronises with the stream (a call that
 * returns cost after the last op ended), then waits wait_ns before going on. */
typedef struct refjob {
    int n, q, sync_every;
    int64_t cost, hgap, dgap, lat, wait_ns;
    const int64_t *kdur;
    /* out: per op its call's and its own times; per sync its call's */
    int64_t *ls, *le, *ds, *de, *ss, *se;
} refjob;

static void
ref_run(refjob *j)
{
    int64_t t = 0;
    int ns = 0;
    for (int k = 0; k < j->n; k++) {
        j->ls[k] = t + j->hgap;
        int64_t ready = j->ls[k];
        if (j->q > 0 && k >= j->q && j->de[k - j->q] > ready)
            ready = j->de[k - j->q];
        j->le[k] = ready + j->cost;
        int64_t s = j->ls[k] + j->lat;
        if (k > 0 && j->de[k - 1] + j->dgap > s)
            s = j->de[k - 1] + j->dgap;
        j->ds[k] = s;
        j->de[k] = s + j->kdur[k];
        t = j->le[k];
        if (j->sync_every > 0 && (k + 1) % j->sync_every == 0) {
            j->ss[ns] = t + j->hgap;
            j->se[ns] = (j->de[k] > j->ss[ns] ? j->de[k] : j->ss[ns]) + j->cost;
            t = j->se[ns++] + j->wait_ns;
        }
    }
}

/* The graph of a reference run with its measured times; host[k] / dev[k] receive the
 * nodes of op k, sync[i] those of the synchronisations. */
static void
ref_graph(const refjob *j, dfg *g, int32_t *host, int32_t *dev, int32_t *sync)
{
    REQUIRE(dfg_init(g, 1) == 0);
    int32_t T = dfg_add_resource(g, DFG_RES_THREAD, 0, 1, 0);
    int32_t S = dfg_add_resource(g, DFG_RES_STREAM, 0, 7, 0);
    int32_t nl = dfg_intern(g, "cudaLaunchKernel"), nk = dfg_intern(g, "k");
    int32_t ny = dfg_intern(g, "cudaStreamSynchronize");
    int ns = 0;
    for (int k = 0; k < j->n; k++) {
        int32_t h = dfg_add_node(g, DFG_HOST, T, nl);
        g->mstart[h] = j->ls[k];
        dfg_set_mend(g, h, j->le[k]);
        int32_t d = dfg_add_node(g, DFG_KERNEL, S, nk);
        g->mstart[d] = j->ds[k];
        dfg_set_mend(g, d, j->de[k]);
        g->launch[d] = h;
        host[k] = h;
        dev[k] = d;
        if (j->sync_every > 0 && (k + 1) % j->sync_every == 0) {
            int32_t y = dfg_add_node(g, DFG_HOST, T, ny);
            g->mstart[y] = j->ss[ns];
            dfg_set_mend(g, y, j->se[ns]);
            CHECK(dfg_add_edge(g, d, y) == 0);
            g->flags[y] |= DFG_F_BLOCKING;
            sync[ns++] = y;
        }
    }
}

static refjob
ref_alloc(int n)
{
    refjob j;
    memset(&j, 0, sizeof j);
    j.n = n;
    j.ls = calloc((size_t)n, sizeof *j.ls);
    j.le = calloc((size_t)n, sizeof *j.le);
    j.ds = calloc((size_t)n, sizeof *j.ds);
    j.de = calloc((size_t)n, sizeof *j.de);
    j.ss = calloc((size_t)n, sizeof *j.ss);
    j.se = calloc((size_t)n, sizeof *j.se);
    return j;
}

static void
ref_free(refjob *j)
{
    free(j->ls);
    free(j->le);
    free(j->ds);
    free(j->de);
    free(j->ss);
    free(j->se);
}

/* Launch-queue backpressure: a host far ahead of a device-bound stream, held back by a
 * queue of 100 ops. The builder must find Q = 100, give the held calls their normal cost,
 * replay the trace exactly, and predict the reference's timeline when the kernels take
 * half (the host follows the device) or twice as long; without the queue the host would
 * keep its measured call durations and a faster device would change nothing. */
static void
test_launch_queue(void)
{
    enum { N = 600, Q = 100 };
    int64_t kd[N], kd_half[N], kd_twice[N];
    for (int k = 0; k < N; k++) {
        kd[k] = 60000 + (k % 7) * 10000; /* 60-120 us kernels */
        kd_half[k] = kd[k] / 2;
        kd_twice[k] = kd[k] * 2;
    }
    refjob m = ref_alloc(N);
    m.q = Q;
    m.cost = 5000;
    m.hgap = 2000;
    m.dgap = 1500;
    m.lat = 7000;
    m.kdur = kd;
    ref_run(&m);
    CHECK(m.le[N - 1] - m.ls[N - 1] > 50000); /* the host is held back */
    dfg g;
    int32_t host[N], dev[N], sync[1];
    ref_graph(&m, &g, host, dev, sync);
    build_queue_info qi;
    CHECK(build_launch_queue(&g, 0, &qi) == 0);
    CHECK_EQ(qi.depth, Q);
    CHECK_EQ(qi.per_stream, 1);
    CHECK_EQ(qi.launch_cost_ns, 5000);
    int32_t waited = 0; /* calls the reference held: op k - Q unfinished at their start */
    for (int k = Q; k < N; k++)
        waited += m.de[k - Q] > m.ls[k];
    CHECK_EQ(qi.held, waited);
    CHECK(qi.long_calls > 0 && qi.explained == qi.long_calls);
    CHECK_EQ(qi.edges, N - Q);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(dfg_dur(&g, host[N - 1]), 5000); /* its normal cost, not the wait */
    CHECK((g.flags[host[N - 1]] & DFG_F_QUEUED) && !(g.flags[host[N - 1]] & DFG_F_BLOCKING));
    CHECK_EQ(build_submission_latency(&g, 0), 7000);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    int exact = 1;
    for (int k = 0; k < N; k++)
        exact &= r.end[host[k]] == m.le[k] && r.end[dev[k]] == m.de[k];
    CHECK(exact);
    /* what-ifs: kernels x 0.5 and x 2 against the reference */
    for (int w = 0; w < 2; w++) {
        const int64_t *kw = w == 0 ? kd_half : kd_twice;
        refjob x = ref_alloc(N);
        x.q = Q;
        x.cost = m.cost;
        x.hgap = m.hgap;
        x.dgap = m.dgap;
        x.lat = m.lat;
        x.kdur = kw;
        ref_run(&x);
        dfg c;
        REQUIRE(dfg_clone(&c, &g) == 0);
        for (int k = 0; k < N; k++)
            c.dur[dev[k]] = kw[k];
        CHECK(sim_run(&c, &r) == 0);
        int same = 1;
        for (int k = 0; k < N; k++)
            same &= r.end[host[k]] == x.le[k] && r.end[dev[k]] == x.de[k];
        CHECK(same);
        /* the host's last call follows the device: about half (twice) as late */
        double ratio = (double)r.end[host[N - 1]] / (double)m.le[N - 1];
        CHECK(w == 0 ? ratio < 0.55 : ratio > 1.9);
        dfg_free(&c);
        ref_free(&x);
    }
    dfg_free(&g);

    /* no backpressure: an unbounded queue, a few long calls for another reason (the first
     * launch of each kernel loads its module) -> no queue, no edges */
    refjob u = ref_alloc(N);
    u.cost = 5000;
    u.hgap = 2000;
    u.dgap = 1500;
    u.lat = 7000;
    u.kdur = kd;
    ref_run(&u);
    for (int k = 0; k < 20; k++)
        u.le[k * 30] += 300000;
    ref_graph(&u, &g, host, dev, sync);
    CHECK(build_launch_queue(&g, 0, &qi) == 0);
    CHECK_EQ(qi.depth, 0);
    CHECK_EQ(qi.edges, 0);
    CHECK_EQ(g.n_edges, 0);
    dfg_free(&g);
    ref_free(&u);
    ref_free(&m);
    sim_result_free(&r);
}

/* Pure submission latency: iterations of 10 launches onto a busy stream, closed by a
 * stream synchronisation; the device leaves 2 us between kernels (more than the builder's
 * idle threshold), so every op "starts on an idle stream" but only the first of each
 * iteration is launch-bound; the others waited behind their stream for up to 0.9 ms. The
 * latency must be the 7 us of submission, not the median queueing, so that a device
 * twice as fast is predicted as the reference runs it. */
static void
test_submission_latency(void)
{
    enum { N = 400, PER = 10 };
    int64_t kd[N], kd_half[N];
    for (int k = 0; k < N; k++) {
        kd[k] = 100000;
        kd_half[k] = 50000;
    }
    refjob m = ref_alloc(N);
    m.cost = 5000;
    m.hgap = 2000;
    m.dgap = 2000;
    m.lat = 7000;
    m.wait_ns = 20000;
    m.sync_every = PER;
    m.kdur = kd;
    ref_run(&m);
    dfg g;
    int32_t host[N], dev[N], sync[N / PER];
    ref_graph(&m, &g, host, dev, sync);
    build_queue_info qi;
    CHECK(build_launch_queue(&g, 0, &qi) == 0);
    CHECK_EQ(qi.depth, 0);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(build_submission_latency(&g, 0), 7000);
    CHECK_EQ(dfg_lat(&g, dev[N - 1]), 7000);
    CHECK_EQ(dfg_gap(&g, dev[N - 1]), 2000);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[sync[N / PER - 1]], m.se[N / PER - 1]);
    refjob x = ref_alloc(N);
    x.cost = m.cost;
    x.hgap = m.hgap;
    x.dgap = m.dgap;
    x.lat = m.lat;
    x.wait_ns = m.wait_ns;
    x.sync_every = PER;
    x.kdur = kd_half;
    ref_run(&x);
    for (int k = 0; k < N; k++)
        g.dur[dev[k]] = kd_half[k];
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.end[sync[N / PER - 1]], x.se[N / PER - 1]);
    CHECK((double)x.se[N / PER - 1] < 0.6 * (double)m.se[N / PER - 1]);
    sim_result_free(&r);
    dfg_free(&g);
    ref_free(&x);
    ref_free(&m);
}

/* A trace that contradicts its dependencies: op b on stream 2 waits for op a on stream 1
 * (an event record -> stream wait edge) yet is measured to start `lead` ns before a ends.
 * build_count_early_starts counts b when the lead is over its 1 us of clock resolution,
 * and the exact replay, which holds the wait, starts b at a's end, later than measured. */
static void
early_start_case(int64_t lead, int32_t want)
{
    dfg g;
    REQUIRE(dfg_init(&g, 2) == 0);
    int32_t T = dfg_add_resource(&g, DFG_RES_THREAD, 1, 1, 0);
    int32_t S1 = dfg_add_resource(&g, DFG_RES_STREAM, 1, 1, 0);
    int32_t S2 = dfg_add_resource(&g, DFG_RES_STREAM, 1, 2, 0);
    int32_t nl = dfg_intern(&g, "cudaLaunchKernel"), nk = dfg_intern(&g, "k");
    int32_t la = dfg_add_node(&g, DFG_HOST, T, nl), lb = dfg_add_node(&g, DFG_HOST, T, nl);
    int32_t a = dfg_add_node(&g, DFG_KERNEL, S1, nk), b = dfg_add_node(&g, DFG_KERNEL, S2, nk);
    g.mstart[la] = 1000;
    dfg_set_mend(&g, la, 6000);
    g.mstart[lb] = 7000;
    dfg_set_mend(&g, lb, 12000);
    g.mstart[a] = 20000;
    dfg_set_mend(&g, a, 10020000); /* 10 ms */
    g.mstart[b] = 10020000 - lead;
    dfg_set_mend(&g, b, 10020000 - lead + 1000000);
    g.launch[a] = la;
    g.launch[b] = lb;
    CHECK(dfg_add_edge(&g, a, b) == 0);
    CHECK(build_derive_timing(&g) == 0);
    int32_t counts[2] = {-1, -1};
    int64_t worst[2] = {-1, -1};
    CHECK(build_count_early_starts(&g, counts, worst, 2) == 0);
    CHECK_EQ(counts[0], 0);
    CHECK_EQ(counts[1], want);
    CHECK_EQ(worst[0], 0);
    CHECK_EQ(worst[1], want ? lead : 0);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.start[a], g.mstart[a]);
    CHECK(r.start[b] >= dfg_mend(&g, a));
    CHECK(!want || r.start[b] > g.mstart[b]);
    sim_result_free(&r);
    dfg_free(&g);
}

static void
test_early_starts(void)
{
    early_start_case(5000000, 1); /* 5 ms before the op it waits for ended */
    early_start_case(500, 0);     /* within the clock's resolution */
    early_start_case(-3000, 0);   /* 3 us after it: consistent */
}

/* ---- point-to-point matching -------------------------------------------------------------- */

static build_p2p_part
p2p_end(int32_t rank, int is_send, int32_t src, int32_t dst, uint64_t k, int64_t bytes,
        int32_t node)
{
    build_p2p_part x;
    memset(&x, 0, sizeof x);
    x.comm = 0xc0ffee;
    x.rank = rank;
    x.is_send = (uint8_t)is_send;
    x.src = src;
    x.dst = dst;
    x.ordinal = k;
    x.bytes = bytes;
    x.device = node;
    x.n_sharing = 1;
    x.node = node;
    return x;
}

/* A device op on stream res with measured times. */
static int32_t
p2p_op(dfg *g, int32_t res, int64_t t0, int64_t t1)
{
    int32_t n = dfg_add_node(g, DFG_KERNEL, res, dfg_intern(g, "ncclDevKernel_SendRecv"));
    g->mstart[n] = t0;
    dfg_set_mend(g, n, t1);
    g->dur[n] = t1 - t0;
    return n;
}

static void
test_p2p_match(void)
{
    /* pairs by ordinal per channel (0->1 twice, 1->2 once), one send whose peer has no
     * trace, one pair whose ends disagree on the size */
    dfg g;
    REQUIRE(dfg_init(&g, 3) == 0);
    int32_t s0 = dfg_add_resource(&g, DFG_RES_STREAM, 0, 1, 0);
    int32_t s1 = dfg_add_resource(&g, DFG_RES_STREAM, 1, 1, 0);
    int32_t s2 = dfg_add_resource(&g, DFG_RES_STREAM, 2, 1, 0);
    int32_t k0a = p2p_op(&g, s0, 0, 150000), k0b = p2p_op(&g, s0, 200000, 400000);
    int32_t r1a = p2p_op(&g, s1, 50000, 150000), s1a = p2p_op(&g, s1, 160000, 300000);
    int32_t r1b = p2p_op(&g, s1, 300000, 400000);
    int32_t r2 = p2p_op(&g, s2, 100000, 300000), u2 = p2p_op(&g, s2, 310000, 320000);
    build_p2p_part parts[] = {
        p2p_end(1, 0, 0, 1, 1, 1000, r1b), p2p_end(2, 1, 2, 5, 0, 64, u2),
        p2p_end(0, 1, 0, 1, 1, 1000, k0b), p2p_end(1, 1, 1, 2, 0, 2000, s1a),
        p2p_end(1, 0, 0, 1, 0, 1000, r1a), p2p_end(2, 0, 1, 2, 0, 2500, r2),
        p2p_end(0, 1, 0, 1, 0, 1000, k0a),
    };
    build_p2p_stats st;
    CHECK(build_match_p2p(&g, parts, sizeof parts / sizeof parts[0], &st) == 0);
    CHECK_EQ(st.ends, 7);
    CHECK_EQ(st.matched, 6);
    CHECK_EQ(st.unmatched, 1);
    CHECK(st.example.is_send && st.example.dst == 5 && st.example.rank == 2);
    CHECK_EQ(st.bytes_differ, 1);
    CHECK_EQ(st.groups, 3);
    CHECK_EQ(st.wide_groups, 0);
    CHECK_EQ(st.conflicts, 0);
    CHECK_EQ(g.n_groups, 3);
    int32_t qa = dfg_group(&g, k0a), qb = dfg_group(&g, k0b), qc = dfg_group(&g, s1a);
    CHECK(qa >= 0 && qb >= 0 && qc >= 0 && qa != qb && qb != qc && qa != qc);
    CHECK_EQ(dfg_group(&g, r1a), qa);
    CHECK_EQ(dfg_group(&g, r1b), qb);
    CHECK_EQ(dfg_group(&g, r2), qc);
    CHECK_EQ(dfg_group(&g, u2), -1);
    CHECK_EQ(g.kind[u2], DFG_KERNEL);
    CHECK_EQ(g.kind[k0a], DFG_COLL);
    CHECK_EQ(g.grp_first[qa], k0a); /* the sender leads */
    CHECK_EQ(g.grp_first[qc], s1a);
    CHECK_EQ(g.grp_op[qa], DPRO_COLL_SEND);
    CHECK_EQ(g.grp_nranks[qa], 2);
    CHECK_EQ(g.grp_bytes[qa], 1000);
    CHECK_EQ(g.grp_bytes[qc], 2500);
    CHECK_EQ(g.grp_seq[qb], 1);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(g.grp_members[qa], 2);
    CHECK_EQ(g.grp_mdur[qa], 100000); /* end 150 - last arrival 50 */
    CHECK_EQ(g.grp_mdur[qb], 100000);
    CHECK_EQ(g.grp_mdur[qc], 140000);
    sim_result r;
    memset(&r, 0, sizeof r);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    CHECK_EQ(r.grp_arrival[qa], 50000);
    CHECK_EQ(r.end[k0a], 150000);
    CHECK_EQ(r.end[r1a], 150000);
    CHECK_EQ(r.end[u2], 320000);
    /* the sender now waits for a late receiver, and the wait moves the next send */
    g.gap[r1a] = 250000;
    g.grp_dur[qa] = 100000;
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.grp_arrival[qa], 250000);
    CHECK_EQ(r.end[k0a], 350000);
    CHECK_EQ(r.end[r1a], 350000);
    CHECK(r.start[k0b] >= 350000);
    CHECK_EQ(r.why[k0a], SIM_CAUSE_GROUP); /* waited for its receiver */
    sim_result_free(&r);
    dfg_free(&g);

    /* a grouped exchange on rank 1 against two separate ops of rank 0: pairing both would
     * make rank 0's ops wait for each other; the second pair is refused */
    REQUIRE(dfg_init(&g, 2) == 0);
    s0 = dfg_add_resource(&g, DFG_RES_STREAM, 0, 1, 0);
    s1 = dfg_add_resource(&g, DFG_RES_STREAM, 1, 1, 0);
    int32_t a = p2p_op(&g, s0, 0, 100000), b = p2p_op(&g, s0, 100000, 200000);
    int32_t c = p2p_op(&g, s1, 0, 200000);
    build_p2p_part clash[] = {p2p_end(0, 1, 0, 1, 0, 10, a), p2p_end(0, 0, 1, 0, 0, 10, b),
                              p2p_end(1, 0, 0, 1, 0, 10, c), p2p_end(1, 1, 1, 0, 0, 10, c)};
    CHECK(build_match_p2p(&g, clash, 4, &st) == 0);
    CHECK_EQ(st.matched, 4);
    CHECK_EQ(st.conflicts, 1);
    CHECK_EQ(st.groups, 1);
    CHECK(dfg_group(&g, a) >= 0 && dfg_group(&g, a) == dfg_group(&g, c) && dfg_group(&g, b) < 0);
    CHECK(build_derive_timing(&g) == 0);
    CHECK(sim_run(&g, &r) == 0);
    CHECK_EQ(r.n_unfinished, 0);
    sim_result_free(&r);
    dfg_free(&g);

    /* a grouped ring of three (each op sends to the next rank and receives from the
     * previous one): one exchange of three ops, each moving both transfers */
    REQUIRE(dfg_init(&g, 3) == 0);
    int32_t ring[3];
    build_p2p_part rp[6];
    for (int32_t q = 0; q < 3; q++)
        ring[q] = p2p_op(&g, dfg_add_resource(&g, DFG_RES_STREAM, q, 1, 0), 1000 * q, 90000);
    for (int32_t q = 0; q < 3; q++) {
        rp[2 * q] = p2p_end(q, 1, q, (q + 1) % 3, 0, 100, ring[q]);
        rp[2 * q + 1] = p2p_end(q, 0, (q + 2) % 3, q, 0, 100, ring[q]);
    }
    CHECK(build_match_p2p(&g, rp, 6, &st) == 0);
    CHECK_EQ(st.groups, 1);
    CHECK_EQ(st.wide_groups, 1);
    CHECK_EQ(g.grp_nranks[0], 3);
    CHECK_EQ(g.grp_bytes[0], 200);
    CHECK(build_derive_timing(&g) == 0);
    CHECK_EQ(g.grp_mdur[0], 88000);
    dfg_free(&g);

    /* nothing to match */
    REQUIRE(dfg_init(&g, 1) == 0);
    CHECK(build_match_p2p(&g, NULL, 0, &st) == 0);
    CHECK_EQ(st.groups, 0);
    dfg_free(&g);
}

static void
test_p2p_scan(void)
{
    /* one rank's events: an all-reduce, an ungrouped send, a grouped send + recv carried by
     * the kernel ncclGroupEnd launched, a second all-reduce, and an imported SendRecv
     * without a peer */
    enum { C = 0xabc, T = 7, S = 5 };
    job_event ev[10];
    memset(ev, 0, sizeof ev);
    for (int i = 0; i < 10; i++) {
        ev[i].start_ns = (uint64_t)(1000 * i);
        ev[i].end_ns = (uint64_t)(1000 * i + 500);
        ev[i].thread = T;
        ev[i].stream = S;
    }
#define COLL_EV(i, op, sq, pr, corr)                                                               \
    (ev[i].kind = DPRO_KIND_COLLECTIVE, ev[i].subkind = (op), ev[i].comm = C, ev[i].seq = (sq),    \
     ev[i].peer = (pr), ev[i].correlation = (corr), ev[i].count = 10, ev[i].dtype = 7)
    COLL_EV(0, DPRO_COLL_ALLREDUCE, 0, -1, 1);
    ev[1].kind = DPRO_KIND_KERNEL, ev[1].correlation = 1, ev[1].thread = 0;
    COLL_EV(2, DPRO_COLL_SEND, 1, 1, 2);
    ev[3].kind = DPRO_KIND_KERNEL, ev[3].correlation = 2, ev[3].thread = 0;
    COLL_EV(4, DPRO_COLL_SEND, 2, 1, (1ULL << 40) | 5);
    COLL_EV(5, DPRO_COLL_RECV, 3, 2, (1ULL << 40) | 6);
    ev[6].kind = DPRO_KIND_API, ev[6].correlation = 3;
    ev[7].kind = DPRO_KIND_KERNEL, ev[7].correlation = 3, ev[7].thread = 0;
    COLL_EV(8, DPRO_COLL_ALLREDUCE, 4, -1, 4);
    COLL_EV(9, DPRO_COLL_RECV, 5, -1, 9);
#undef COLL_EV
    job_rank jr;
    memset(&jr, 0, sizeof jr);
    jr.events = ev;
    jr.n_events = 10;
    build_p2p p;
    CHECK(build_p2p_scan(&jr, 0, &p) == 0);
    CHECK_EQ(p.n, 3);
    CHECK_EQ(p.no_peer, 1);
    if (p.n == 3) {
        CHECK(p.part[0].is_send && p.part[0].src == 0 && p.part[0].dst == 1);
        CHECK_EQ(p.part[0].ordinal, 0);
        CHECK_EQ(p.part[0].device, 3);
        CHECK_EQ(p.part[0].n_sharing, 1);
        CHECK_EQ(p.part[0].bytes, 40);
        CHECK_EQ(p.part[1].ordinal, 1); /* the second send 0 -> 1 */
        CHECK_EQ(p.part[1].device, 7);  /* carried by ncclGroupEnd's kernel */
        CHECK_EQ(p.part[1].n_sharing, 2);
        CHECK(!p.part[2].is_send && p.part[2].src == 2 && p.part[2].dst == 0);
        CHECK_EQ(p.part[2].ordinal, 0);
        CHECK_EQ(p.part[2].device, 7);
    }
    /* collectives numbered without the send/recv calls */
    CHECK_EQ(build_coll_seq(&p, &ev[0]), 0);
    CHECK_EQ(build_coll_seq(&p, &ev[8]), 1);
    job_event other = ev[8];
    other.comm = C + 1;
    CHECK_EQ(build_coll_seq(&p, &other), 4);
    build_p2p_free(&p);
    /* a grouped call whose group launches onto another stream has no device op */
    ev[7].stream = S + 1;
    CHECK(build_p2p_scan(&jr, 0, &p) == 0);
    CHECK(p.n == 3 && p.part[1].device == -1 && p.part[2].device == -1);
    build_p2p_free(&p);
    CHECK(build_p2p_channel(C, 0, 1) != build_p2p_channel(C, 1, 0));
    CHECK(build_p2p_channel(C, 0, 1) != build_p2p_channel(C + 1, 0, 1));
    CHECK(build_p2p_channel(C, 0, 1) != C);
}

/* ---- event dependencies rebuilt from call order --------------------------------------- */

/* Appends host call `name` on thread T at *t (1 us long, 1 us apart). */
static int32_t
host_call(dfg *g, int32_t T, const char *name, int64_t *t)
{
    int32_t h = dfg_add_node(g, DFG_HOST, T, dfg_intern(g, name));
    g->mstart[h] = *t;
    dfg_set_mend(g, h, *t + 1000);
    *t += 2000;
    return h;
}

/* Appends device op `name` of kind `kind` on stream S, launched by h, at t0 (10 us). */
static int32_t
device_op(dfg *g, int kind, int32_t S, const char *name, int32_t h, int64_t t0)
{
    int32_t d = dfg_add_node(g, kind, S, dfg_intern(g, name));
    g->mstart[d] = t0;
    dfg_set_mend(g, d, t0 + 10000);
    g->launch[d] = h;
    return d;
}

static int
has_edge(const dfg *g, int32_t a, int32_t b)
{
    int found = 0;
    for (int64_t i = 0; i < g->n_edges && !found; i++)
        found = g->esrc[i] == a && g->edst[i] == b;
    return found;
}

/* A Kineto import of PyTorch DDP (runtime calls without streams or events, no
 * device-to-device edge): a gradient bucket's all-reduce, the NCCL stream's wait for the
 * compute stream and the compute stream's wait for the all-reduce separated from their
 * event records by calls that order nothing on the device, as torch 2.15 calls them; the
 * all-reduce waits for the bucket's last kernel, the copy out of the bucket for the
 * all-reduce. A wait whose last ordering call is a launch, not a record, gets no edge. */
static void
test_repair_event_edges(void)
{
    dfg g;
    REQUIRE(dfg_init(&g, 1) == 0);
    int32_t T = dfg_add_resource(&g, DFG_RES_THREAD, 0, 1, 0);
    int32_t S = dfg_add_resource(&g, DFG_RES_STREAM, 0, 7, 0);
    int32_t N = dfg_add_resource(&g, DFG_RES_STREAM, 0, 13, 0);
    int64_t t = 0;
    int32_t h = host_call(&g, T, "cudaLaunchKernel", &t);
    int32_t k0 = device_op(&g, DFG_KERNEL, S, "bwd", h, 100000);
    host_call(&g, T, "cudaEventRecordWithFlags", &t);
    host_call(&g, T, "cudaStreamIsCapturing", &t);
    host_call(&g, T, "cudaStreamWaitEvent", &t);
    host_call(&g, T, "cudaStreamIsCapturing", &t);
    host_call(&g, T, "cudaEventRecordWithFlags", &t);
    h = host_call(&g, T, "cuLaunchKernelEx", &t);
    int32_t c = device_op(&g, DFG_KERNEL, N, "ncclDevKernel_AllReduce", h, 120000);
    dfg_set_group(&g, c, dfg_add_group(&g, DPRO_COLL_ALLREDUCE, 1, 4096, 1, 0, 10000));
    host_call(&g, T, "cudaStreamIsCapturing", &t);
    host_call(&g, T, "cudaEventRecordWithFlags", &t);
    host_call(&g, T, "cudaEventQuery", &t);
    host_call(&g, T, "cudaStreamIsCapturing", &t);
    host_call(&g, T, "cudaStreamWaitEvent", &t);
    host_call(&g, T, "cudaEventRecord", &t);
    h = host_call(&g, T, "cudaMemcpyAsync", &t);
    int32_t m = device_op(&g, DFG_MEMCPY, S, "copy", h, 140000);
    h = host_call(&g, T, "cudaLaunchKernel", &t);
    device_op(&g, DFG_KERNEL, S, "opt", h, 160000);
    host_call(&g, T, "cudaStreamIsCapturing", &t);
    host_call(&g, T, "cudaStreamWaitEvent", &t);
    h = host_call(&g, T, "cudaLaunchKernel", &t);
    device_op(&g, DFG_KERNEL, S, "opt", h, 180000);
    CHECK(build_repair_event_edges(&g) == 2);
    CHECK(has_edge(&g, k0, c));
    CHECK(has_edge(&g, c, m));
    dfg_free(&g);
}

int
main(void)
{
    test_launch_queue();
    test_submission_latency();
    test_early_starts();
    test_p2p_match();
    test_p2p_scan();
    test_repair_event_edges();
    return tests_done();
}
