/*
 * test_optimizer_buckets: a bucket plan's all-reduces are DDP's buckets over the layers'
 * gradients when the trace gives their sizes only through the allocations (ddp-sim: one
 * tensor per layer, no copies back into the gradients).
 *   - the job: build_layer_job with the 14 layers of ddp-sim's resnet50 of 4 blocks
 *     (conv1, 3 blocks of 64 channels, one of 128, fc: 10,183,328 bytes of gradients)
 *     recorded with one bucket; the allocations are the gradients rounded as ddp-sim's
 *     caching allocator rounds them (512 B up to 1 MiB, 2 MiB above: fc's 8,196,000 B
 *     become 8 MiB);
 *   - the expected buckets: DDP's rule (torch's compute_bucket_assignment_by_size as the
 *     reducer rebuilds its buckets) worked by hand over the exact sizes in backward order:
 *     a bucket closes with the tensor that brings it to its cap or past it, the first at
 *     the first cap, the last with the last tensor; never a tensor split, never two
 *     buckets merged;
 *   - checked at caps of 0.1 to 5 MiB and first caps of 1 MiB: the count, in the plan's
 *     knobs and in the partitioned graph, and each bucket's bytes within 512 B (the
 *     allocations tell a gradient's size to its rounding; the excess goes to fc's block).
 * The packing by bytes before (buckets cut at the cap inside the unit, those ready at the
 * same kernel merged) made 4 buckets at 1 MiB (7 MiB, 1 MiB, 1 MiB, 0.7 MiB) where DDP
 * makes 3.
 * And under accumulation, the batch's copy after the gradients' zeroing when the
 * iteration opens with the zeroing (test_micro_input_after_zeroing).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/memest.h"
#include "optimizer/partition.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/optimizer/optjobs.h"
#include "tests/replay/synth.h"
#include "tests/unit/testutil.h"

#define NL 14
#define MAXB 16

/* The index of cap mb among strategy_bucket_caps_mb (exact), -1 when none. */
static int
cap_index(double mb)
{
    for (int i = 0; i < strategy_n_bucket_caps; i++)
        if (strategy_bucket_caps_mb[i] == mb)
            return i;
    return -1;
}

/* ddp-sim's caching allocator's block for a request of n bytes. */
static int64_t
ddp_sim_block(int64_t n)
{
    const int64_t M = 1 << 20;
    return n <= M ? (n + 511) & ~(int64_t)511 : (n + 2 * M - 1) & ~(2 * M - 1);
}

typedef struct bucket_case {
    double first_mb, cap_mb;
    int32_t n;
    int64_t bytes[MAXB]; /* backward order */
} bucket_case;

static void
check_case(workload *w, const bucket_case *c)
{
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = (int8_t)cap_index(c->cap_mb);
    p.first_cap = (int8_t)cap_index(c->first_mb);
    REQUIRE(p.bucket_cap >= 0 && p.first_cap >= 0);
    CHECK(partition_splits(&w->buckets, &p));
    CHECK_EQ_U(strategy_bucket_count(w, &p), c->n);
    int64_t out[MAXB];
    int32_t n = strategy_bucket_bytes(w, &p, out, MAXB);
    CHECK_EQ_U(n, c->n);
    for (int32_t b = 0; b < n && b < c->n; b++) {
        int64_t d = out[b] - c->bytes[b];
        CHECK(d >= -512 && d <= 512);
    }
    /* the partitioned graph holds as many all-reduces an iteration */
    strategy_apply(w, &p);
    partition_input pin;
    strategy_partition_input(w, &pin);
    dfg part = {0};
    int32_t nb = -1;
    CHECK(partition_build(&pin, &p, &part, &nb) == 0);
    CHECK_EQ_U(nb, c->n);
    dfg_free(&part);
}

/* The gradients of ddp-sim's resnet50 of 4 blocks in forward order (conv1, blocks 0-2 of
 * 64 channels, block 3 of 128, fc) into grad[NL], their blocks from ddp-sim's caching
 * allocator into alloc[NL]; returns the gradients' total bytes. */
static int64_t
resnet_grads(int64_t *grad, int64_t *alloc)
{
    int64_t total = 0;
    grad[0] = 37632;
    for (int b = 0; b < 4; b++) {
        int64_t c = b < 3 ? 64 : 128;
        grad[1 + 3 * b] = 4 * c * c * 4;
        grad[2 + 3 * b] = c * c * 9 * 4;
        grad[3 + 3 * b] = c * 4 * c * 4;
    }
    grad[NL - 1] = 2048 * 1000 * 4 + 4000;
    for (int l = 0; l < NL; l++) {
        alloc[l] = ddp_sim_block(grad[l]);
        total += grad[l];
    }
    return total;
}

static void
test_ddp_layer_buckets(void)
{
    const int64_t M = 1 << 20;
    int64_t grad[NL], alloc[NL], total = resnet_grads(grad, alloc);
    CHECK_EQ_U(total, 10183328);
    int64_t t_fwd[NL];
    dfg g, work;
    REQUIRE(build_layer_job(&g, 3, grad, NL, 0, t_fwd) == 0);
    costmodel m;
    fit_model(&m);
    memest mem;
    layer_memest(&mem, alloc, NL, t_fwd, ddp_sim_block(total));
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    CHECK(dfg_clone(&work, &g) == 0);
    REQUIRE(workload_analyze(&w, &work, &res, 1, 1, &m, &mem, 0, NULL) == 0);
    CHECK_EQ_U(w.buckets.n_units, 1);
    REQUIRE(w.buckets.layer_grad && w.buckets.grad_bytes && !w.buckets.param_bytes);
    CHECK_EQ_U(w.buckets.n_grad_layers, NL);
    int64_t sum = 0;
    for (int l = 0; l < NL; l++) {
        sum += w.buckets.grad_bytes[l];
        CHECK(w.buckets.grad_bytes[l] <= alloc[l] && w.buckets.grad_bytes[l] > alloc[l] - 2 * M);
    }
    CHECK_EQ_U(sum, total);
    const bucket_case cases[] = {
        {0.1,
         0.1,
         10,
         {8196000, 262144, 589824, 262144, 212992, 131072, 147456, 131072, 147456, 103168}},
        {0.25, 0.25, 8, {8196000, 262144, 589824, 262144, 278528, 278528, 278528, 37632}},
        {1, 0.5, 5, {8196000, 851968, 540672, 557056, 37632}},
        {1, 1, 3, {8196000, 1114112, 873216}},
        {5, 5, 2, {8196000, 1987328}},
        {1, 25, 2, {8196000, 1987328}}, /* DDP's default caps */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&w, &cases[i]);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&work);
    dfg_free(&g);
}

/* The batch's copy after the gradients' zeroing where the iteration opens with the
 * zeroing (zero_grad(); x = make().to(dev)): 2 ranks of 6 iterations of 400 kernels, 8
 * buckets of 1 MiB, DDP's copies back and zeroing, the first of each iteration's device
 * ops made a 4 MiB copy whose call comes 3 ms after the zeroing's last. The copy is the
 * batch's (WL_MICRO_INPUT), so at 2 micro-batches those 3 ms of host time take half in
 * the micro-batch (the host makes a batch half the size), not all of it. */
static void
test_micro_input_after_zeroing(void)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 6;
    sp.ops_per_iter = 400;
    sp.buckets = 8;
    sp.bucket_bytes = 1 << 20;
    sp.final_copies = sp.zero_grads = 1;
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_dfg(&sp, &g) == 0);
    int32_t n_c = 0, n_seen = 0, copy[12];
    for (int32_t d = 0; d < g.n_nodes; d++) /* the first kernel of each rank's iteration */
        if (g.kind[d] == DFG_KERNEL && g.launch[d] >= 0 && n_seen++ % 400 == 0 && n_c < 12) {
            g.kind[d] = DFG_MEMCPY;
            REQUIRE(dfg_set_bytes(&g, d, 4 << 20) == 0);
            copy[n_c++] = d;
        }
    REQUIRE(n_c == 2 * 6);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 5, &m, NULL, -1, NULL) == 0);
    REQUIRE(w.buckets.micro != NULL);
    for (int32_t i = 0; i < n_c; i++)
        CHECK(w.phase[copy[i]] == WL_FORWARD && w.buckets.micro[copy[i]] == WL_MICRO_INPUT);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.accum_k = 2;
    strategy_eval ev[2];
    const int64_t make_ns = 3000000;
    for (int run = 0; run < 2; run++) {
        for (int32_t i = 0; run > 0 && i < n_c; i++)
            w.base_gap[g.launch[copy[i]]] += make_ns;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev[run]) == 0);
    }
    CHECK(fabs(ev[1].micro_host_ns - ev[0].micro_host_ns - (double)make_ns / 2) < 1e3);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The iteration time predicted for buckets of cap `cap` (an index of
 * strategy_bucket_caps_mb) on a host-bound synthetic job of 2 ranks (2000 kernels of 2 us,
 * 6 us of host per launch) of 8 buckets of 1 MiB, each all-reduce call followed by 4 event
 * queries (ProcessGroupNCCL's hook block) and the call after them by after_ns more of gap,
 * and by stall_ns more after every 8th all-reduce of rank 0 (a stalled host); into
 * *n_buckets the plan's buckets. */
static int64_t
hook_after_plan(int64_t after_ns, int64_t stall_ns, int cap, int32_t *n_buckets)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.ops_per_iter = 2000;
    sp.buckets = 8;
    sp.bucket_bytes = 1 << 20;
    sp.kernel_ns = 2000;
    sp.hook_calls = 4;
    dfg g;
    costmodel m;
    fit_model(&m);
    REQUIRE(synth_dfg(&sp, &g) == 0);
    for (int32_t c = 0, n0 = 0; c < g.n_nodes; c++) {
        if (g.kind[c] != DFG_COLL || g.launch[c] < 0)
            continue;
        int32_t h = g.next_on_res[g.launch[c]];
        for (int32_t k = 0; k < sp.hook_calls && h >= 0; k++)
            h = g.next_on_res[h];
        int stalled = dfg_rank(&g, c) == 0 && n0++ % 8 == 2;
        if (h >= 0)
            REQUIRE(dfg_set_gap(&g, h, dfg_gap(&g, h) + after_ns + (stalled ? stall_ns : 0)) == 0);
    }
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = p.first_cap = (int8_t)cap;
    strategy_eval e;
    memset(&e, 0, sizeof e);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    *n_buckets = e.n_buckets;
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return e.iter_ns;
}

/* A folded bucket's host work after its hook block goes with it: the call after each
 * block (the next launch) waits 40 us more (the process group's and DDP's bookkeeping
 * after the collective call; the closed loop's tiny buckets: 56 us where the thread's
 * other calls wait 14). In the plan of one bucket that call takes the typical gap of its
 * name on its thread (workload.h: after_gap), so the 7 folded buckets keep none of the
 * 40 us: within 20 us of the same job without them, where the plan kept 7 x 40 = 280 us
 * more. Where the buckets stay (a 1 MiB cap: the job's 8) the gaps stay: 280 us (the last
 * bucket's next call is the closing synchronisation, off the host's path). A bucket that
 * tensor partition adds (a 0.5 MiB cap: 16, each unit in two) brings the bookkeeping of
 * its unit's with its copy of the hook block: the next call after it waits the 40 us
 * too, 560 us in all (the last unit's added bucket, too, closes off the host's path);
 * but no more than the thread's typical bookkeeping: where one unit's next call also
 * stalled 5 ms, the 16 buckets cost what the 8 do, the stall once. */
static void
test_hook_after(void)
{
    int32_t nb1, nb8, nb16, nb, one = strategy_n_bucket_caps - 1;
    const int64_t stall = 5000 * US;
    int64_t t0 = hook_after_plan(0, 0, one, &nb1), t40 = hook_after_plan(40 * US, 0, one, &nb);
    int64_t b0 = hook_after_plan(0, 0, 3, &nb8), b40 = hook_after_plan(40 * US, 0, 3, &nb);
    int64_t s0 = hook_after_plan(0, 0, 2, &nb16), s40 = hook_after_plan(40 * US, 0, 2, &nb);
    int64_t bst = hook_after_plan(40 * US, stall, 3, &nb) - b40;
    int64_t sst = hook_after_plan(40 * US, stall, 2, &nb) - s40;
    CHECK(nb1 == 1 && nb8 == 8 && nb16 == 16);
    CHECK(t40 >= t0 && t40 - t0 <= 20 * US);
    CHECK(b40 - b0 >= 260 * US && b40 - b0 <= 300 * US);
    CHECK(s40 - s0 >= 540 * US && s40 - s0 <= 580 * US);
    CHECK(bst > stall / 2 && sst > stall / 2 && sst - bst <= 100 * US);
    if (t40 - t0 > 20 * US || b40 - b0 < 260 * US || b40 - b0 > 300 * US || s40 - s0 < 540 * US ||
        s40 - s0 > 580 * US || sst - bst > 100 * US)
        fprintf(stderr,
                "one bucket: %lld ns with 40 us after each hook, %lld without; 8: %lld, %lld; "
                "16: %lld, %lld; the stalls cost 8 buckets %lld, 16 %lld\n",
                (long long)t40, (long long)t0, (long long)b40, (long long)b0, (long long)s40,
                (long long)s0, (long long)bst, (long long)sst);
}

/* Into g: a device-bound synthetic job of 2 ranks (400 kernels of 20 us a step, 6 us of host per
 * launch) recorded with 8 buckets of 1 MiB, where the compute stream waits for each bucket's
 * all-reduce 10 kernels after its call (the wait DDP's comm hook adds), and each rank's kernels
 * run 1.5 times longer in one half of the step: the first half on rank 0, on rank 1 the first half
 * too (alike) or the second (opposite). */
static void
folded_wait_job(dfg *g, int opposite)
{
    synth_params sp;
    synth_defaults(&sp);
    sp.ranks = 2;
    sp.iterations = 4;
    sp.ops_per_iter = 400;
    sp.buckets = 8;
    sp.bucket_bytes = 1 << 20;
    sp.kernel_ns = 20 * US;
    REQUIRE(synth_dfg(&sp, g) == 0);
    int32_t n = g->n_nodes, *kernel_of = malloc(sizeof *kernel_of * (size_t)n);
    REQUIRE(kernel_of != NULL);
    for (int32_t d = 0; d < n; d++)
        kernel_of[d] = -1;
    for (int32_t d = 0; d < n; d++)
        if (g->kind[d] == DFG_KERNEL && g->launch[d] >= 0)
            kernel_of[g->launch[d]] = d;
    for (int32_t c = 0; c < n; c++) {
        if (g->kind[c] != DFG_COLL || g->launch[c] < 0)
            continue;
        int32_t h = g->next_on_res[g->launch[c]], k = 0;
        for (; h >= 0 && (kernel_of[h] < 0 || ++k < 10); h = g->next_on_res[h])
            ;
        if (h >= 0)
            REQUIRE(dfg_add_edge(g, c, kernel_of[h]) == 0);
    }
    free(kernel_of);
    int32_t pos[2] = {0, 0};
    for (int32_t d = 0; d < n; d++) {
        if (g->kind[d] != DFG_KERNEL)
            continue;
        int32_t r = dfg_rank(g, d), i = pos[r]++ % sp.ops_per_iter;
        int slow = (i < sp.ops_per_iter / 2) != (r == 1 && opposite);
        if (slow)
            REQUIRE(dfg_set_dur(g, d, dfg_dur(g, d) * 3 / 2) == 0);
    }
}

/* Analyzes g (compared iterations 1-2, the model fitted into m, which w keeps pointing
 * at) into w and res, and sets p to the plan of one bucket. */
static void
one_bucket_plan(dfg *g, costmodel *m, workload *w, sim_result *res, strategy_plan *p)
{
    fit_model(m);
    memset(res, 0, sizeof *res);
    REQUIRE(workload_analyze(w, g, res, 1, 2, m, NULL, -1, NULL) == 0);
    strategy_plan_baseline(p);
    p->bucket_cap = p->first_cap = (int8_t)(strategy_n_bucket_caps - 1);
}

/* folded_wait_job's predicted iteration time for one bucket. */
static int64_t
folded_wait_plan(int opposite)
{
    dfg g;
    folded_wait_job(&g, opposite);
    workload w;
    sim_result res;
    strategy_plan p;
    costmodel m;
    one_bucket_plan(&g, &m, &w, &res, &p);
    strategy_eval e;
    memset(&e, 0, sizeof e);
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(e.n_buckets == 1);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return e.iter_ns;
}

/* A bucket folded into another takes its waits with it: in the plan of one bucket the
 * compute stream no longer waits in the backward for the all-reduces that are gone, so
 * ranks slow in opposite halves of the step do not meet at each of them: each rank's
 * stream runs its own kernels, and the step takes what it takes when the ranks are slow
 * alike (within 3 %; 10.75 ms either way). The zero-length all-reduces that the plan kept
 * for the folded buckets held each rank's stream until the other rank had reached them:
 * 12.47 ms a step against 10.75 ms alike. */
static void
test_folded_waits(void)
{
    int64_t alike = folded_wait_plan(0), opposite = folded_wait_plan(1);
    CHECK(alike > 0 && opposite > 0);
    CHECK(opposite <= alike + alike * 3 / 100);
    if (opposite > alike + alike * 3 / 100)
        fprintf(stderr,
                "one bucket: %lld ns a step with ranks slow in opposite halves, %lld alike\n",
                (long long)opposite, (long long)alike);
}

/* Whether g has the edge s -> d. */
static int
has_edge(const dfg *g, int32_t s, int32_t d)
{
    for (int64_t i = 0; i < g->n_edges; i++)
        if (g->esrc[i] == s && g->edst[i] == d)
            return 1;
    return 0;
}

/* Where a folded bucket's waits go (workload_unhook_folded), on folded_wait_job with, per
 * rank and iteration, an edge from the first bucket's all-reduce to the first kernel
 * launched after the last bucket's call (as DDP's copies back into the gradients wait):
 * in the plan of one bucket, whose all-reduce is the last one's, that kernel waits for the
 * last all-reduce, not the folded one; the comm hook's waits of the folded buckets (10
 * kernels after each call, launched before the last call) are gone; the last bucket's own
 * wait stays. */
static void
test_folded_waits_moved(void)
{
    dfg g;
    folded_wait_job(&g, 0);
    enum { NB = 8, MAXK = 64 };
    int32_t first[MAXK], last[MAXK], after[MAXK], hook[MAXK], n = 0;
    /* rank r's collectives in node order: bucket b of iteration i is the (i NB + b)-th */
    for (int32_t r = 0; r < g.n_ranks; r++) {
        int32_t k = 0;
        for (int32_t c = 0; c < g.n_nodes; c++) {
            if (g.kind[c] != DFG_COLL || dfg_rank(&g, c) != r)
                continue;
            if (k % NB == 0 && n < MAXK)
                first[n] = c;
            if (k % NB == 1 && n < MAXK)
                hook[n] = c;
            if (k % NB == NB - 1 && n < MAXK) {
                last[n] = c;
                after[n] = -1;
                for (int32_t h = g.next_on_res[g.launch[c]]; h >= 0 && after[n] < 0;
                     h = g.next_on_res[h])
                    for (int32_t d = 0; d < g.n_nodes && after[n] < 0; d++)
                        if (g.kind[d] == DFG_KERNEL && g.launch[d] == h)
                            after[n] = d;
                if (after[n] >= 0)
                    REQUIRE(dfg_add_edge(&g, first[n], after[n]) == 0);
                n++;
            }
            k++;
        }
    }
    REQUIRE(n >= 6);
    workload w;
    sim_result res;
    strategy_plan p;
    costmodel m;
    one_bucket_plan(&g, &m, &w, &res, &p);
    /* the synthetic job measured no times: its host calls in their order on each thread,
     * which is what the unhooking compares */
    for (int32_t q = 0; q < g.n_res; q++)
        for (int32_t h = g.res_kind[q] == DFG_RES_THREAD ? g.res_first[q] : -1, k = 0; h >= 0;
             h = g.next_on_res[h])
            g.mstart[h] = (int64_t)++k * US;
    REQUIRE(strategy_apply(&w, &p) == 0);
    dfg copy = {0}, *sg;
    int32_t nb = 0;
    REQUIRE(strategy_plan_graph(&w, &p, &copy, &sg, &nb) == 0);
    CHECK(sg == &copy && nb == 1);
    if (sg == &copy) {
        REQUIRE(dfg_finalize(sg) == 0);
        int moved = 0, own = 0, checked = 0, stray = 0;
        for (int32_t i = 0; i < n; i++) {
            checked += after[i] >= 0;
            moved += after[i] >= 0 && has_edge(sg, last[i], after[i]) &&
                     !has_edge(sg, first[i], after[i]);
            for (int64_t e = 0; e < sg->n_edges; e++) {
                int32_t s0 = sg->esrc[e], d0 = sg->edst[e];
                if (s0 < 0 || d0 < 0 || sg->kind[d0] != DFG_KERNEL || sg->res[d0] == sg->res[s0])
                    continue;
                own += s0 == last[i] && d0 != after[i];
                stray += s0 == hook[i] || (s0 == first[i] && d0 != after[i]);
            }
        }
        CHECK(checked >= 6 && moved == checked);
        if (moved != checked)
            fprintf(stderr, "moved %d of %d (n %d), own %d, stray %d\n", moved, checked, n, own,
                    stray);
        CHECK(own >= checked - 2); /* the last iteration's last wait may fall past the end */
        CHECK_EQ_U(stray, 0);
        dfg_free(&copy);
    }
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The sources of the edges into node d of g, sorted, into out (up to max); returns their
 * count. */
static int32_t
preds_sorted(const dfg *g, int32_t d, int32_t *out, int32_t max)
{
    int32_t n = 0;
    for (int64_t e = 0; e < g->n_edges; e++)
        if (g->edst[e] == d && n < max)
            out[n++] = g->esrc[e];
    for (int32_t i = 1; i < n; i++)
        for (int32_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
            int32_t t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* A bucket tensor partition adds to a participant without a gating kernel (no
 * compute-stream kernel of its rank with an edge into it: rank 1's, its kernels taken
 * off the compute stream here) waits as that participant waits: each added all-reduce
 * has exactly the edge predecessors of the participant it precedes on its stream
 * (partition.c: copy_preds, from the index of the edges into the participants). */
static void
test_ungated_participants(void)
{
    enum { MAXP = 64 };
    int64_t grad[NL], alloc[NL], total = resnet_grads(grad, alloc);
    int64_t t_fwd[NL];
    dfg g, work;
    REQUIRE(build_layer_job(&g, 3, grad, NL, 0, t_fwd) == 0);
    costmodel m;
    fit_model(&m);
    memest mem;
    layer_memest(&mem, alloc, NL, t_fwd, ddp_sim_block(total));
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(dfg_clone(&work, &g) == 0);
    REQUIRE(workload_analyze(&w, &work, &res, 1, 1, &m, &mem, 0, NULL) == 0);
    REQUIRE(g.n_ranks >= 2);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.bucket_cap = (int8_t)cap_index(0.25);
    p.first_cap = (int8_t)cap_index(0.25);
    REQUIRE(p.bucket_cap >= 0 && p.first_cap >= 0 && partition_splits(&w.buckets, &p));
    REQUIRE(strategy_apply(&w, &p) == 0);
    partition_input pin;
    strategy_partition_input(&w, &pin);
    uint8_t *onc = malloc((size_t)pin.n_nodes + 1);
    REQUIRE(onc);
    for (int32_t n = 0; n < pin.n_nodes; n++)
        onc[n] = pin.on_compute[n] && dfg_rank(pin.g, n) != 1;
    pin.on_compute = onc;
    dfg part = {0};
    int32_t nb = -1;
    REQUIRE(partition_build(&pin, &p, &part, &nb) == 0);
    CHECK_EQ_U(nb, 8);
    int32_t checked = 0, same = 0;
    for (int32_t n = pin.g->n_nodes; n < part.n_nodes; n++) {
        if (part.kind[n] != DFG_COLL || dfg_rank(&part, n) != 1)
            continue;
        int32_t c = part.next_on_res[n];
        while (c >= pin.g->n_nodes)
            c = part.next_on_res[c];
        REQUIRE(c >= 0 && pin.g->kind[c] == DFG_COLL);
        int32_t a[MAXP], b[MAXP];
        int32_t na = preds_sorted(&part, n, a, MAXP), nc = preds_sorted(pin.g, c, b, MAXP);
        checked++;
        same += na == nc && nc > 0 && memcmp(a, b, sizeof *a * (size_t)na) == 0;
    }
    CHECK(checked >= 3 * 7);
    CHECK_EQ_U(same, checked);
    dfg_free(&part);
    free(onc);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&work);
    dfg_free(&g);
}

int
main(void)
{
    test_ddp_layer_buckets();
    test_ungated_participants();
    test_micro_input_after_zeroing();
    test_hook_after();
    test_folded_waits();
    test_folded_waits_moved();
    return tests_done();
}
