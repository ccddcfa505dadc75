/*
 * test_optimizer_fsdp: the FSDP strategies (strategy.h: keep unsharded, prefetch) on a
 * hand-made FSDP job, and their absence on a DDP-like one.
 *   - the job: per iteration the main thread launches, for each of 3 blocks, the block's
 *     all-gather (its own stream) and its forward kernel (the compute stream, waiting for
 *     the all-gather); the backward thread re-gathers each block in reverse, runs its
 *     backward kernel and reduce-scatters its gradient; the host takes 300 us between
 *     the launches (host-bound, as a Python loop), so the forward's all-gathers wait for
 *     their launch; each all-gather's launch is followed by a poll of its event
 *     (cudaEventQuery, 50 us), neither counted nor priced as an unshard's work;
 *   - recognition: 3 all-gathers in the forward and 3 in the backward, 3 reduce-scatters,
 *     the gathered bytes (1 + 2 + 3 MiB less the largest);
 *   - accumulation's memory: what of the first step's segments does not shrink with the
 *     micro-batch (the gathered parameters, the gradient being reduced) and the unsharded
 *     gradients held between micro-batches, from the collectives' bytes;
 *   - keep unsharded: the backward's all-gathers and their launches cost nothing, the
 *     forward's stay, the iteration is shorter; where the copy-out follows a kernel's
 *     launch (a prefetched all-gather), the compute stream's wait for it and its poll go
 *     too;
 *   - reshard (on the job without the backward's all-gathers, 2 ranks sharing the
 *     collectives): each rank's backward pays its own forward unshards' host time once,
 *     the Python before each unshard's first call included, each call at most at the
 *     backward thread's median for its name, and the transfers
 *     that the previous span's calls or compute do not hide;
 *     where the closing synchronize waits after the device work it waits for (work the
 *     trace does not show), that wait grows with the re-gathers' bytes;
 *   - prefetch: the forward's all-gathers but the first are ready as early, relative to
 *     their launch, as their launch came after the previous one's, the reduce-scatters
 *     between the backward's all-gathers not; on this host-bound job, each all-gather
 *     ending before its copy-out's launch, the iteration does not change;
 *   - accumulation's micro-batch (FSDP2's set_requires_gradient_sync(False)): on the job
 *     with each reduce-scatter's copy-in (a copy from host, an event record, a
 *     concatenation kernel, launched by the backward thread before the reduce-scatter), the
 *     copy-in is the synchronised micro-batch's alone: the micro-batch prices the forward's
 *     and backward's ops without it, its launches and host time; the copy-out copies of the
 *     forward's unshards stay; the batch's copy before the forward's first all-gather
 *     counts, its call and the host time before it halved (2 micro-batches); the
 *     optimizer's kernel launched by the main thread before the first all-gather does not;
 *   - and what it adds that the trace does not run: per unit an element-wise add over its
 *     unsharded gradient at the trace's element-wise kernels' bytes per ns, its launch at
 *     the backward thread's median; the forward's event calls again in every micro-batch,
 *     and the host's work before the forward's polls (not the polls); the host's return
 *     from the backward thread to the main thread before the closing synchronize;
 *   - a DDP-like job (all-reduces only) has no FSDP strategy: it is unavailable and the
 *     search's plans never use it; PyTorch DDP's and ddp-sim's profiles do not express it;
 *   - folded ranks (dpro-optimize's default): 2 alike ranks folded into one class give the
 *     explicit job's counts, bytes, medians and predictions, and so do unequal classes
 *     (3 + 1 and 3 + 2 + 1 ranks, the smaller classes slower and making more calls an
 *     unshard), each class weighed by its ranks.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/framework.h"
#include "optimizer/search.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/optimizer/optjobs.h"
#include "tests/unit/testutil.h"

#define BLOCKS 3
#define ITERS 4
#define MIB_B (1 << 20)
/* build_fsdp_job's flags */
#define JOB_REGATHER 1      /* the backward re-gathers each unit (reshard_after_forward=True) */
#define JOB_COPY_IN 2       /* each reduce-scatter's copy-in before its launch */
#define JOB_INPUT 4         /* the batch's copy before the forward (1 ms making it, then 5 us) */
#define JOB_WAITS 8         /* the closing synchronize returns 900 us after the device work */
#define JOB_ADDS 16         /* an element-wise kernel (ELEMWISE_ADD, 43 us) in each backward */
#define JOB_EVENTS 32       /* an event record after each forward all-gather's launch */
#define JOB_OPTIM 64        /* an optimizer kernel (80 us) on the main thread before the forward */
#define JOB_HOURS 128       /* the closing synchronize returns 3 hours after the device work */
#define JOB_POLL_WORK 256   /* the host works 200 us more before each poll of the forward */
#define JOB_RETURN 512      /* the closing synchronize woken by the backward's last call */
#define JOB_RETURN_LAG 1024 /* and 150 us after it, not at once */
#define JOB_PREFETCHED                                                                             \
    2048 /* each re-gather's copy-out after a kernel launch, a stream wait                         \
            and a poll (FSDP2's implicit backward prefetch) */
/* PyTorch's float add: 4 elements a thread of each of its 3 tensors, 48 bytes */
#define ELEMWISE_ADD                                                                               \
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_15CUDAFunctor_addIfEESt5arrayIPcLm3EELb" \
    "0EEEviT0_T1_"

typedef struct fsdp_job_ids {
    int32_t fwd_ag[ITERS][BLOCKS], bwd_ag[ITERS][BLOCKS];     /* participants */
    int32_t fwd_out[ITERS][BLOCKS], bwd_out[ITERS][BLOCKS];   /* copy-outs' kernels */
    int32_t bwd_wait[ITERS][BLOCKS], bwd_kern[ITERS][BLOCKS]; /* JOB_PREFETCHED's calls */
    int32_t bwd_rs[ITERS][BLOCKS];                            /* reduce-scatters */
} fsdp_job_ids;

/* A host call on thread t taking 5 us, 300 us after the previous one. */
static int32_t
call(dfg *g, int32_t t, int32_t name)
{
    int32_t h = dfg_add_node(g, DFG_HOST, t, name);
    g->dur[h] = 5 * US;
    g->gap[h] = 300 * US;
    return h;
}

/* A device op on stream s launched by h (2 us launch latency). */
static int32_t
device(dfg *g, int32_t s, int32_t h, int kind, int32_t name, int64_t dur)
{
    int32_t d = dfg_add_node(g, kind, s, name);
    g->dur[d] = dur;
    g->launch[d] = h;
    dfg_set_lat(g, d, 2 * US);
    return d;
}

/* A collective of op on stream s launched by a new call on thread t, joining group *grp
 * (a new one when *grp < 0). */
static int32_t
collective(dfg *g, int32_t t, int32_t s, int op, int64_t bytes, uint64_t seq, int64_t dur,
           int32_t *grp)
{
    int32_t h = call(
        g, t, dfg_intern(g, op == DPRO_COLL_ALLGATHER ? "ncclAllGather" : "ncclReduceScatter"));
    int32_t c = device(g, s, h, DFG_KERNEL, dfg_intern(g, "ncclDevKernel"), 0);
    if (*grp < 0)
        *grp = dfg_add_group(g, op, g->n_ranks > 2 ? g->n_ranks : 2, bytes, 7, seq, dur);
    dfg_set_group(g, c, *grp);
    return c;
}

/* A unit's copy-out on thread t after all-gather participant ag: a copy and a kernel
 * (10 and 20 us) on the compute stream cs, the copy waiting for the all-gather. Returns
 * the kernel. */
static int32_t
copy_out(dfg *g, int32_t t, int32_t cs, int32_t ag)
{
    int32_t cp = device(g, cs, call(g, t, dfg_intern(g, "cudaMemcpyAsync")), DFG_MEMCPY,
                        dfg_intern(g, "memcpy"), 10 * US);
    if (dfg_add_edge(g, ag, cp) != 0)
        return -1;
    return device(g, cs, call(g, t, dfg_intern(g, "cudaLaunchKernel")), DFG_KERNEL,
                  dfg_intern(g, "split_with_sizes_copy"), 20 * US);
}

/* A poll of the all-gather's event after its launch on thread t: 50 us, 10 us after the
 * launch (a wait: the count depends on the device's lag), or 210 us with `work`. */
static void
poll(dfg *g, int32_t t, int work)
{
    int32_t h = call(g, t, dfg_intern(g, "cudaEventQuery"));
    g->dur[h] = 50 * US;
    g->gap[h] = (work ? 210 : 10) * US;
}

/* One rank's threads and streams. */
typedef struct fsdp_rank {
    int32_t mt, bt, cs, as, rs, last;
    int32_t bounds[ITERS + 1];
} fsdp_rank;

#define MAX_RANKS 6

/* Stretches rank r's host calls' gaps and device ops' durations to pct % (a slower rank). */
static int
slow_rank(dfg *g, int32_t r, int pct)
{
    int rc = 0;
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++) {
        if (dfg_rank(g, n) != r)
            continue;
        if (g->kind[n] == DFG_HOST)
            rc = dfg_set_gap(g, n, dfg_gap(g, n) * pct / 100);
        else
            rc = dfg_set_dur(g, n, dfg_dur(g, n) * pct / 100);
    }
    return rc;
}

/* The job of the file's comment on n_ranks ranks (at most MAX_RANKS; rank 0's
 * participants into *ids), its collectives shared by the ranks, into *g (finalized), with
 * measured starts from its own simulation; flags JOB_*: without JOB_REGATHER the backward
 * gathers nothing (reshard_after_forward=False); pct (may be NULL): per rank, its host
 * gaps and device durations in % of the others' (slow_rank; 100 or 0: as they are);
 * prefetched (may be NULL): per rank, 1 where its re-gathers are JOB_PREFETCHED's whatever
 * flags say. Returns 0 or -1. */
static int
build_fsdp_job_slow(dfg *g, fsdp_job_ids *ids, int flags, int32_t n_ranks, const int *pct,
                    const int *prefetched)
{
    if (n_ranks > MAX_RANKS || dfg_init(g, n_ranks) != 0)
        return -1;
    fsdp_rank rk[MAX_RANKS];
    for (int32_t r = 0; r < n_ranks; r++) {
        rk[r].mt = dfg_add_resource(g, DFG_RES_THREAD, r, 1, dfg_intern(g, "main"));
        rk[r].bt = dfg_add_resource(g, DFG_RES_THREAD, r, 2, dfg_intern(g, "autograd"));
        rk[r].cs = dfg_add_resource(g, DFG_RES_STREAM, r, 7, dfg_intern(g, "stream 7"));
        rk[r].as = dfg_add_resource(g, DFG_RES_STREAM, r, 8, dfg_intern(g, "stream 8"));
        rk[r].rs = dfg_add_resource(g, DFG_RES_STREAM, r, 9, dfg_intern(g, "stream 9"));
        rk[r].last = -1;
    }
    int32_t nm_launch = dfg_intern(g, "cudaLaunchKernel"), nm_k = dfg_intern(g, "gemm");
    int32_t nm_sync = dfg_intern(g, "cudaDeviceSynchronize");
    uint64_t seq = 0;
    int rc = 0;
    for (int it = 0; it <= ITERS && rc == 0; it++) {
        for (int32_t r = 0; r < n_ranks; r++) {
            int32_t b0 = call(g, rk[r].mt, nm_sync);
            rk[r].bounds[it] = b0;
            g->flags[b0] |= DFG_F_BLOCKING;
            g->dur[b0] = (flags & JOB_WAITS) ? 900 * US : g->dur[b0];
            if (flags & JOB_HOURS)
                rc |= dfg_set_dur(g, b0, (int64_t)3 * 3600 * 1000000000);
            if (rk[r].last >= 0)
                rc |= dfg_add_edge(g, rk[r].last, b0);
            if (rk[r].last >= 0 && (flags & JOB_RETURN))
                rc |= dfg_add_wakeup(g, g->launch[rk[r].last], b0,
                                     (flags & JOB_RETURN_LAG) ? 150 * US : 0);
        }
        if (it == ITERS)
            break;
        int32_t k[MAX_RANKS], first_bwd[MAX_RANKS];
        for (int32_t r = 0; r < n_ranks; r++)
            k[r] = first_bwd[r] = -1;
        for (int32_t r = 0; (flags & JOB_OPTIM) && r < n_ranks; r++)
            device(g, rk[r].cs, call(g, rk[r].mt, nm_launch), DFG_KERNEL,
                   dfg_intern(g, "multi_tensor_apply_kernel"), 80 * US);
        for (int32_t r = 0; (flags & JOB_INPUT) && r < n_ranks; r++) {
            int32_t h = call(g, rk[r].mt, dfg_intern(g, "cudaMemcpyAsync"));
            g->gap[h] = 1000 * US;
            device(g, rk[r].cs, h, DFG_MEMCPY, dfg_intern(g, "memcpy HtoD"), 50 * US);
        }
        for (int b = 0; b < BLOCKS; b++) {
            int32_t grp = -1;
            for (int32_t r = 0; r < n_ranks; r++) {
                int32_t ag = collective(g, rk[r].mt, rk[r].as, DPRO_COLL_ALLGATHER,
                                        (int64_t)(b + 1) * MIB_B, seq, 400 * US, &grp);
                if (flags & JOB_EVENTS)
                    call(g, rk[r].mt, dfg_intern(g, "cudaEventRecordWithFlags"));
                poll(g, rk[r].mt, flags & JOB_POLL_WORK);
                int32_t out = copy_out(g, rk[r].mt, rk[r].cs, ag);
                k[r] =
                    device(g, rk[r].cs, call(g, rk[r].mt, nm_launch), DFG_KERNEL, nm_k, 100 * US);
                rc |= out < 0;
                if (r == 0)
                    ids->fwd_ag[it][b] = ag, ids->fwd_out[it][b] = out;
            }
            seq++;
        }
        for (int b = BLOCKS - 1; b >= 0; b--) {
            int32_t ag_grp = -1, rs_grp = -1;
            for (int32_t r = 0; r < n_ranks; r++) {
                int32_t ag = -1, bt = rk[r].bt, cs = rk[r].cs;
                if (flags & JOB_REGATHER) {
                    ag = collective(g, bt, rk[r].as, DPRO_COLL_ALLGATHER, (int64_t)(b + 1) * MIB_B,
                                    seq, 400 * US, &ag_grp);
                    first_bwd[r] = first_bwd[r] < 0 ? g->launch[ag] : first_bwd[r];
                    poll(g, bt, 0);
                    int32_t wait = -1, kern = -1;
                    if ((flags & JOB_PREFETCHED) || (prefetched && prefetched[r])) {
                        kern = call(g, bt, nm_launch);
                        device(g, cs, kern, DFG_KERNEL, dfg_intern(g, "fill"), 10 * US);
                        wait = call(g, bt, dfg_intern(g, "cudaStreamWaitEvent"));
                        poll(g, bt, 0);
                    }
                    int32_t out = copy_out(g, bt, cs, ag);
                    rc |= out < 0;
                    if (r == 0)
                        ids->bwd_out[it][b] = out, ids->bwd_wait[it][b] = wait,
                        ids->bwd_kern[it][b] = kern;
                }
                int32_t kb = device(g, cs, call(g, bt, nm_launch), DFG_KERNEL, nm_k, 200 * US);
                first_bwd[r] = first_bwd[r] < 0 ? g->launch[kb] : first_bwd[r];
                if (flags & JOB_ADDS)
                    device(g, cs, call(g, bt, nm_launch), DFG_KERNEL, dfg_intern(g, ELEMWISE_ADD),
                           43 * US);
                if (flags & JOB_COPY_IN) {
                    device(g, cs, call(g, bt, dfg_intern(g, "cudaMemcpyAsync")), DFG_MEMCPY,
                           dfg_intern(g, "memcpy HtoD"), 5 * US);
                    call(g, bt, dfg_intern(g, "cudaEventRecordWithFlags"));
                    kb = device(g, cs, call(g, bt, nm_launch), DFG_KERNEL,
                                dfg_intern(g, "chunk_cat"), 10 * US);
                }
                rk[r].last = collective(g, bt, rk[r].rs, DPRO_COLL_REDUCESCATTER,
                                        (int64_t)(b + 1) * MIB_B, seq + 1, 300 * US, &rs_grp);
                rc |= dfg_add_edge(g, kb, rk[r].last);
                if (r == 0)
                    ids->bwd_ag[it][b] = ag, ids->bwd_rs[it][b] = rk[r].last;
            }
            seq += 2;
        }
        for (int32_t r = 0; r < n_ranks; r++)
            rc |= dfg_add_wakeup(g, g->launch[k[r]], first_bwd[r], 20 * US);
    }
    for (int32_t r = 0; rc == 0 && r < n_ranks; r++)
        rc = dfg_set_iterations(g, r, rk[r].bounds, ITERS + 1);
    for (int32_t r = 0; rc == 0 && pct && r < n_ranks; r++)
        rc = pct[r] > 0 && pct[r] != 100 ? slow_rank(g, r, pct[r]) : 0;
    if (rc == 0)
        rc = dfg_finalize(g);
    sim_result res;
    memset(&res, 0, sizeof res);
    if (rc == 0)
        rc = sim_run(g, &res);
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++) {
        g->mstart[n] = res.start[n];
        g->mlen[n] = (uint32_t)(res.end[n] - res.start[n]);
    }
    sim_result_free(&res);
    return rc;
}

/* build_fsdp_job_slow with alike ranks. */
static int
build_fsdp_job(dfg *g, fsdp_job_ids *ids, int flags, int32_t n_ranks)
{
    return build_fsdp_job_slow(g, ids, flags, n_ranks, NULL, NULL);
}

/* Plan p's kind and its options in PyTorch FSDP's terms. */
static void
check_terms(const workload *w, const strategy_plan *p, const char *kind, const char *args)
{
    char buf[1024];
    strategy_kind(w, p, buf, sizeof buf);
    CHECK(!strcmp(buf, kind));
    framework_torch_fsdp.format_args(p, 0, buf, sizeof buf);
    CHECK(!strcmp(buf, args));
}

static void
test_fsdp_strategies(void)
{
    dfg g;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job(&g, &ids, JOB_REGATHER, 1) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    CHECK(strategy_fsdp_available(&w));
    CHECK_EQ_U(w.fsdp.n_fwd, BLOCKS);
    CHECK_EQ_U(w.fsdp.n_bwd, BLOCKS);
    CHECK_EQ_U(w.fsdp.n_rs, BLOCKS);
    CHECK_EQ_U(w.fsdp.gathered_bytes, 3 * MIB_B); /* 1 + 2 + 3 MiB, less the largest */
    /* accumulation: the forward's all-gathers (6 MiB) and the reduce-scatters' inputs
     * (6 MiB), the largest of each 3 MiB; the trace reshards, so of the gathered parameters
     * the largest unit's does not shrink (3 MiB), with the gradient being reduced (3 MiB):
     * 6 MiB less 6/2 MiB, and every unit's unsharded gradient held (6 MiB) */
    CHECK_EQ_U(w.fsdp.unit_bytes[WL_FSDP_BYTES_GATHER], 6 * MIB_B);
    CHECK_EQ_U(w.fsdp.unit_bytes[WL_FSDP_BYTES_GATHER_MAX], 3 * MIB_B);
    CHECK_EQ_U(w.fsdp.unit_bytes[WL_FSDP_BYTES_GRAD], 6 * MIB_B);
    CHECK_EQ_U(w.fsdp.unit_bytes[WL_FSDP_BYTES_GRAD_MAX], 3 * MIB_B);
    CHECK_EQ_U(workload_fsdp_accum_bytes(&w, 2, 100 * MIB_B), (3 + 6) * MIB_B);
    CHECK_EQ_U(workload_fsdp_accum_bytes(&w, 4, 100 * MIB_B), (6 - 6 / 4.0 + 6) * MIB_B);
    /* no more than the activations lost stays fixed: 4 MiB of them, 2 of it given back */
    CHECK_EQ_U(workload_fsdp_accum_bytes(&w, 2, 4 * MIB_B), (2 + 6) * MIB_B);
    CHECK_EQ_U(workload_fsdp_accum_bytes(&w, 1, 100 * MIB_B), 0);
    double base = w.base_iter_ns;
    CHECK(base > 0);

    strategy_plan p;
    strategy_eval e;
    strategy_plan_baseline(&p);
    p.fsdp_keep = 1;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    for (int b = 0; b < BLOCKS; b++) {
        int32_t fa = ids.fwd_ag[1][b], ba = ids.bwd_ag[1][b];
        int32_t fo = ids.fwd_out[1][b], bo = ids.bwd_out[1][b];
        CHECK(g.grp_dur[dfg_group(&g, ba)] == 0 && dfg_dur(&g, g.launch[ba]) == 0);
        CHECK(g.grp_dur[dfg_group(&g, fa)] == 400 * US && dfg_dur(&g, g.launch[fa]) == 5 * US);
        /* the backward's copy-out goes with its all-gather (the copy and the kernel, their
         * calls); the forward's stays */
        CHECK(dfg_dur(&g, bo) == 0 && dfg_dur(&g, g.launch[bo]) == 0);
        CHECK(dfg_dur(&g, dfg_prev_on_res(&g, bo)) == 0);
        CHECK(dfg_dur(&g, fo) == 20 * US && dfg_dur(&g, g.launch[fo]) == 5 * US);
        /* the reduce-scatter launched between two re-gathers is no unshard's: it stays */
        int32_t rs = ids.bwd_rs[1][b];
        CHECK(w.fsdp.gather_ops[rs] < 0 && dfg_dur(&g, g.launch[rs]) == 5 * US);
    }
    /* per iteration and rank: each backward unshard's launch, the copy-out's two calls (not
     * its poll) */
    CHECK(fabs(w.fsdp.keep_calls - 3 * BLOCKS) < 1e-9);
    /* resharding: offered only where the backward does not re-gather */
    CHECK(!strategy_fsdp_reshard_available(&w));
    /* the backward's three 400 us all-gathers, and their launches, leave the critical path */
    CHECK(e.iter_ns < base - 1000 * US);
    check_terms(&w, &p, "fsdp_no_reshard", "reshard_after_forward=False");
    strategy_plan q;
    CHECK(framework_torch_fsdp.parse_args("reshard_after_forward=False prefetch=1", &q) == 0);
    CHECK(q.fsdp_keep == 1 && q.prefetch == 1);

    strategy_plan_baseline(&p);
    p.prefetch = 1;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    for (int b = 0; b < BLOCKS; b++) {
        int32_t fa = ids.fwd_ag[1][b];
        int64_t early =
            b == 0 ? 0 : g.mstart[g.launch[fa]] - g.mstart[g.launch[ids.fwd_ag[1][b - 1]]];
        CHECK(early >= 0 && (b == 0 || early >= 600 * US));
        CHECK(dfg_lat(&g, fa) == 2 * US - early);
        CHECK(g.grp_dur[dfg_group(&g, fa)] == 400 * US);
        /* a reduce-scatter launched between two all-gathers is no unshard: not issued
         * earlier */
        CHECK(dfg_lat(&g, ids.bwd_rs[1][b]) == 2 * US);
    }
    /* each all-gather (400 us) ends before its copy-out's launch (610 us after its own):
     * nothing to gain, nothing lost */
    CHECK(e.iter_ns <= base + 1 * US);

    search_options so;
    search_result sr;
    memset(&so, 0, sizeof so);
    so.seed = 1;
    so.max_evals = 40;
    so.families = STRATEGY_FSDP;
    REQUIRE(search_run(&w, &so, &sr) == 0);
    CHECK(sr.n_top >= 1 && (sr.top[0].plan.fsdp_keep || sr.top[0].plan.prefetch));
    search_result_free(&sr);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* Keeping the parameters on the job whose re-gathers' copy-outs come after a kernel's
 * launch, as where FSDP2 prefetched the all-gather: the compute stream's wait for the
 * all-gather's event (a stream wait and a poll right before the copy-out) goes with the
 * re-gather (on fsdp_train.py's poor-prefetch baseline 0.4-0.7 ms of host time a unit,
 * absent from the run that keeps the parameters); the kernel's launch before them stays. */
static void
test_fsdp_keep_prefetched(void)
{
    dfg g;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job(&g, &ids, JOB_REGATHER | JOB_PREFETCHED, 1) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    REQUIRE(strategy_fsdp_available(&w));
    /* per unit the launch, the stream wait and the copy-out's two calls (not the polls) */
    CHECK(fabs(w.fsdp.keep_calls - 4 * BLOCKS) < 1e-9);
    strategy_plan p;
    strategy_plan_baseline(&p);
    p.fsdp_keep = 1;
    REQUIRE(strategy_apply(&w, &p) == 0);
    for (int it = 0; it < ITERS; it++)
        for (int b = 0; b < BLOCKS; b++) {
            int32_t wait = ids.bwd_wait[it][b], poll_call = g.next_on_res[wait];
            int32_t q = dfg_group(&g, ids.bwd_ag[it][b]);
            CHECK(w.fsdp.gather_ops[wait] == q && w.fsdp.gather_ops[poll_call] == q);
            CHECK(dfg_dur(w.g, wait) == 0 && dfg_gap(w.g, wait) == 0);
            CHECK(dfg_dur(w.g, poll_call) == 0 && dfg_gap(w.g, poll_call) == 0);
            CHECK(w.fsdp.gather_ops[ids.bwd_kern[it][b]] < 0);
            CHECK(dfg_dur(w.g, ids.bwd_kern[it][b]) == 5 * US);
        }
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The job without the backward's all-gathers (reshard_after_forward=False): resharding
 * after the forward is offered, each unit gathered again before its backward as the
 * forward gathers it. */
static void
test_fsdp_reshard(void)
{
    dfg g;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job(&g, &ids, 0, 2) == 0);
    /* a stall of 5 ms in one forward unshard of rank 0 (the copy-out's kernel launch of
     * block 1 in iteration 2): not the price of that unit's re-gather */
    int32_t stall = g.launch[ids.fwd_out[2][1]];
    REQUIRE(dfg_set_dur(&g, stall, dfg_dur(&g, stall) + 5000 * US) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    CHECK(strategy_fsdp_available(&w) && strategy_fsdp_reshard_available(&w));
    CHECK_EQ_U(w.fsdp.n_fwd, BLOCKS);
    CHECK_EQ_U(w.fsdp.n_bwd, 0);
    CHECK_EQ_U(w.fsdp.n_regather, BLOCKS);
    CHECK_EQ_U(w.fsdp.gathered_bytes, 3 * MIB_B);
    /* accumulation on a trace that keeps the parameters: every unit's (6 MiB) and the
     * gradient being reduced (3 MiB) do not shrink, the unsharded gradients (6 MiB) held */
    CHECK_EQ_U(workload_fsdp_accum_bytes(&w, 2, 100 * MIB_B), (9 - 4.5 + 6) * MIB_B);
    /* per unit: the all-gather's launch and the copy-out's two calls, not the poll */
    CHECK(fabs(w.fsdp.regather_calls - 3 * BLOCKS) < 1e-9);
    double base = w.base_iter_ns;
    strategy_plan p;
    strategy_eval e;
    strategy_plan_baseline(&p);
    p.fsdp_reshard = 1;
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    /* each unit's calls on each rank's backward thread, which the host-bound backward pays
     * in full: the launch, the copy-out's two calls and the 300 us before each (3 x 305
     * us; the 300 us before the launch too, FSDP's unshard Python, which the re-gather runs
     * again) and the 10 us before the poll, not the poll itself (a wait): at least 3 x 925
     * us */
    CHECK(e.iter_ns >= base + 3 * 925 * US - 1 && e.iter_ns < base + 3 * 925 * US + 1000 * US);
    int64_t added = 0;
    for (int32_t n = 0; n < g.n_nodes; n++)
        added += w.fsdp.regather_ns[n];
    /* all iterations, per rank (each pays its own unshards, not the two ranks' together)
     * and unit (the medians over the forwards, the stall left out): host 925 us, copy-out 30 us and
     * the transfer (400 us) but what the previous span hides: the first gathered unit (FSDP2's
     * root) and the last are re-gathered in the first span (nothing hidden), the middle one in
     * the second, issued at the first span's start and hidden by the longer of its calls (330
     * us: its kernel's launch 20 us after the forward's end and 5 us long, the reduce-scatter's
     * launch 300 us later and 5 us long) and its compute (the 200 us backward kernel) */
    CHECK_EQ_U(added, 2 * (int64_t)ITERS * (3 * 955 + 2 * 400 + 70) * US);
    check_terms(&w, &p, "fsdp_reshard", "reshard_after_forward=True");
    strategy_plan q;
    CHECK(framework_torch_fsdp.parse_args("reshard_after_forward=True", &q) == 0);
    CHECK(q.fsdp_reshard == 1 && q.fsdp_keep == 0);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The launch of rank r's participant in the group of rank 0's participant ag (rank 1's
 * follows rank 0's in the group). */
static int32_t
participant_launch(const dfg *g, int32_t ag, int32_t r)
{
    int32_t h = g->launch[ag];
    for (int32_t c = 0; r == 1 && c < g->n_nodes; c++)
        if (c != ag && g->kind[c] == DFG_COLL && dfg_group(g, c) == dfg_group(g, ag))
            h = g->launch[c];
    return h;
}

/* The time resharding adds to g's job (its regather_ns summed over the nodes), then g
 * freed. */
static int64_t
regather_total(dfg *g)
{
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    REQUIRE(strategy_fsdp_reshard_available(&w));
    int64_t added = 0;
    for (int32_t n = 0; n < g->n_nodes; n++)
        added += w.fsdp.regather_ns[n];
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(g);
    return added;
}

/* The re-gathers' host price on the job with an event record after each forward
 * all-gather's launch and each reduce-scatter's copy-in (an event record on the backward
 * thread, 5 us), the forward's records taking 800 us in every iteration (on tests/simgpu
 * FSDP2's record behind the copy-in's launch waits for the device's lock there, 0.4-0.8
 * ms, the backward's 1-16 us): each re-gathered call is priced at most at the backward
 * thread's median for its name, so the re-gathers cost what they cost with 5 us records;
 * a call whose name the backward thread never makes (the all-gather's launch) keeps its
 * forward price. */
static int64_t
regather_added(int64_t record_us, int64_t launch_us)
{
    dfg g;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job(&g, &ids, JOB_EVENTS | JOB_COPY_IN, 2) == 0);
    for (int it = 0; it < ITERS; it++)
        for (int b = 0; b < BLOCKS; b++)
            for (int32_t r = 0; r < 2; r++) {
                int32_t h = participant_launch(&g, ids.fwd_ag[it][b], r);
                REQUIRE(dfg_set_dur(&g, h, launch_us * US) == 0);
                REQUIRE(dfg_set_dur(&g, g.next_on_res[h], record_us * US) == 0);
            }
    return regather_total(&g);
}

static void
test_fsdp_reshard_call_price(void)
{
    int64_t plain = regather_added(5, 5);
    CHECK(plain > 0);
    CHECK_EQ_U(regather_added(800, 5), plain);
    /* the launch's 45 us more, per unit, iteration and rank */
    CHECK_EQ_U(regather_added(800, 50), plain + 2 * ITERS * BLOCKS * 45 * US);
}

/* The re-gathers' added time where each step's forward starts loop_us later after the
 * previous step's last call (the training loop's Python and data loading, before the first
 * unit's first unshard call on each rank). */
static int64_t
regather_after_loop(int64_t loop_us)
{
    dfg g;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job(&g, &ids, 0, 2) == 0);
    for (int it = 0; it < ITERS; it++)
        for (int32_t r = 0; r < 2; r++) {
            int32_t h = participant_launch(&g, ids.fwd_ag[it][0], r);
            REQUIRE(dfg_set_gap(&g, h, dfg_gap(&g, h) + loop_us * US) == 0);
        }
    return regather_total(&g);
}

/* No re-gather in the backward runs the loop's time before a forward's first unshard
 * again: the first unit's Python is priced at the other units' (300 us each here), so a
 * 5 ms loop gap adds nothing to the re-gathers (it added 5 ms per iteration and rank when
 * the first unit kept its own gap). */
static void
test_fsdp_reshard_loop_gap(void)
{
    int64_t plain = regather_after_loop(0);
    CHECK(plain > 0);
    CHECK_EQ_U(regather_after_loop(5000), plain);
}

/* Resharding on the job whose closing synchronize waits 900 us after the device work it
 * waits for (work the trace does not show: on tests/simgpu the collectives' data, moved by
 * the host's CPU): that wait grows with the bytes the re-gathers add. */
static void
test_fsdp_reshard_wait(void)
{
    int64_t iter[2];
    for (int wait = 0; wait < 2; wait++) {
        dfg g;
        fsdp_job_ids ids;
        REQUIRE(build_fsdp_job(&g, &ids, wait ? JOB_WAITS : 0, 2) == 0);
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
        REQUIRE(strategy_fsdp_reshard_available(&w));
        int64_t added = 0, calls = 0;
        for (int32_t n = 0; n < g.n_nodes; n++) {
            added += w.fsdp.sync_wait_ns[n];
            calls += w.fsdp.sync_wait_ns[n] > 0;
            CHECK(w.fsdp.sync_wait_ns[n] == 0 || (g.flags[n] & DFG_F_BLOCKING));
        }
        /* per rank and iteration the closing synchronize: before it each rank's inputs are
         * 3 MiB of all-gathers (its shards of 1 + 2 + 3 MiB) and 6 MiB of reduce-scatters;
         * resharding gathers the 3 MiB again, a third more of the wait after the device
         * work: 300 us (5 us / 3 without the wait) */
        int64_t per = wait ? 300 * US : 5 * US / 3;
        CHECK_EQ_U(calls, 2 * ITERS);
        CHECK(llabs(added - 2 * ITERS * per) <= 2 * ITERS * 2);
        strategy_plan p;
        strategy_eval e;
        strategy_plan_baseline(&p);
        p.fsdp_reshard = 1;
        REQUIRE(strategy_evaluate(&w, &p, &res, &e) == 0);
        iter[wait] = (int64_t)(e.iter_ns - w.base_iter_ns);
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
    /* the iteration grows by the unshards' host time and, with the wait, 300 us more */
    CHECK(llabs(iter[1] - iter[0] - 300 * US) < 5 * US);
}

/* A closing synchronize of 3 hours (a hostile or broken trace): its wait a byte is taken
 * whole, not wrapped in the product with the femtoseconds (1.08e13 ns x 1e6 passes
 * INT64_MAX), and each call's added wait is the field's most, never negative or none. */
static void
test_fsdp_reshard_hours(void)
{
    dfg g;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job(&g, &ids, JOB_HOURS, 2) == 0);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
    int64_t calls = 0, most = 0;
    for (int32_t n = 0; n < g.n_nodes; n++) {
        calls += w.fsdp.sync_wait_ns[n] > 0;
        most += w.fsdp.sync_wait_ns[n] == INT32_MAX;
    }
    CHECK_EQ_U(calls, 2 * ITERS);
    CHECK_EQ_U(most, 2 * ITERS);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The micro-batch of accumulation on the job without and with the reduce-scatters'
 * copy-in, the batch's copy and the optimizer's kernel before the forward: the copy-in
 * and the optimizer are the synchronised micro-batch's alone, the batch's copy takes half
 * its host time. */
static void
test_fsdp_accumulation(void)
{
    double launches[2], host[2], device_ns[2];
    for (int with = 0; with < 2; with++) {
        dfg g;
        fsdp_job_ids ids;
        REQUIRE(build_fsdp_job(&g, &ids, with ? JOB_COPY_IN | JOB_INPUT | JOB_OPTIM : 0, 2) == 0);
        workload w;
        sim_result res;
        memset(&res, 0, sizeof res);
        REQUIRE(workload_analyze(&w, &g, &res, 1, 2, NULL, NULL, -1, NULL) == 0);
        CHECK(strategy_fsdp_available(&w) && w.buckets.micro != NULL);
        int32_t marked = 0, input = 0;
        for (int32_t n = 0; w.buckets.micro && n < g.n_nodes; n++)
            if (w.buckets.micro[n] == WL_MICRO_SYNC_ONLY && w.iter[n] >= w.iter_first &&
                w.iter[n] <= w.iter_last)
                marked += (g.kind[n] == DFG_MEMCPY) + 100 * (g.kind[n] == DFG_KERNEL);
        for (int32_t n = 0; w.buckets.micro && n < g.n_nodes; n++)
            input += w.buckets.micro[n] == WL_MICRO_INPUT && w.iter[n] >= w.iter_first &&
                     w.iter[n] <= w.iter_last;
        /* per compared iteration, rank and block: the copy and the concatenation; per
         * iteration and rank the optimizer's kernel before the forward */
        int32_t n_it = w.iter_last - w.iter_first + 1;
        CHECK_EQ_U(marked, with ? 101 * 2 * BLOCKS * n_it + 100 * 2 * n_it : 0);
        CHECK_EQ_U(input, with ? 2 * n_it : 0);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 2;
        strategy_eval ev;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev) == 0);
        launches[with] = ev.micro_launches;
        host[with] = ev.micro_host_ns;
        device_ns[with] = ev.micro_device_ns;
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
    /* per iteration and rank at least each block's backward kernel */
    CHECK(launches[0] >= BLOCKS);
    CHECK(fabs(launches[1] - launches[0] - 1) < 1e-9);
    CHECK(fabs(host[1] - host[0] - (1000 + 5) * US / 2.0) < 1);
    CHECK(host[0] > 0 && device_ns[0] > 0);
}

/* The job with JOB_COPY_IN and JOB_ADDS analysed into *w (res, g the caller frees), the
 * element-wise kernels' launch sizes given as kernel samples (100,000 threads: 4.8 MB)
 * when `threads`; with metadata (meta[0], meta[1] bytes: meta NULL none), each forward
 * copy-out's copy moves meta[0] bytes (split_with_sizes_copy's metadata from host) and each
 * reduce-scatter's copy-in's copy (the job's only copies from host) meta[1] (_chunk_cat's),
 * and both kernels' grids are 10 x 1 x 1 blocks of 128 threads. Returns 0 or -1. */
static int
analyze_adds_job(workload *w, dfg *g, sim_result *res, int flags, int threads, const int64_t *meta)
{
    fsdp_job_ids ids;
    memset(res, 0, sizeof *res);
    if (build_fsdp_job(g, &ids, flags | JOB_COPY_IN | JOB_ADDS, 2) != 0)
        return -1;
    workload_kernel_sample *s = calloc((size_t)g->n_nodes + 1, sizeof *s);
    size_t n = 0;
    int rc = s ? 0 : -1;
    for (int32_t d = 0; s && d < g->n_nodes; d++) {
        const char *nm = dfg_name(g, g->name[d]);
        workload_kernel_sample k = {.key = (uint64_t)g->name[d],
                                    .dur_ns = dfg_dur(g, d),
                                    .rank = dfg_rank(g, d),
                                    .t_ns = g->mstart[d],
                                    .stream = g->res_id[g->res[d]],
                                    .event = (uint64_t)d};
        int add = g->kind[d] == DFG_KERNEL && threads && !strcmp(nm, ELEMWISE_ADD);
        int split = g->kind[d] == DFG_KERNEL && meta &&
                    (!strcmp(nm, "split_with_sizes_copy") || !strcmp(nm, "chunk_cat"));
        k.threads = add ? 100000 : 1280;
        k.grid_x = split ? 10 : 0;
        if (add || split)
            s[n++] = k;
        if (meta && g->kind[d] == DFG_MEMCPY && !strcmp(nm, "memcpy"))
            rc |= dfg_set_bytes(g, d, meta[0]);
        if (meta && g->kind[d] == DFG_MEMCPY && !strcmp(nm, "memcpy HtoD"))
            rc |= dfg_set_bytes(g, d, meta[1]);
    }
    workload_options o;
    workload_default_options(&o);
    o.kernel_samples = s;
    o.n_kernel_samples = n;
    if (rc == 0)
        rc = workload_analyze(w, g, res, 1, 2, NULL, NULL, -1, &o);
    free(s);
    return rc;
}

/* The parameters (w.fsdp.n_params) analyze_adds_job's job shows with metadata meta. */
static int32_t
adds_job_params(const int64_t *meta)
{
    dfg g;
    workload w;
    sim_result res;
    int32_t n = analyze_adds_job(&w, &g, &res, 0, 1, meta) == 0 ? w.fsdp.n_params : -1;
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
    return n;
}

/* PyTorch makes one add a parameter (autograd's accumulation into each gradient), not one
 * a unit: where each forward copy-out's metadata from host shows its parameters (4 x 4 +
 * 1 + 10 words: 4 parameters a unit, 10 blocks) and each reduce-scatter's copy-in's as
 * many (6 x 4 + 2 + 10 words), the micro-batch prices 12 adds' fixed costs and launches
 * (3 units of 4), the bytes unchanged; metadata of another layout (one word more) counts
 * nothing, and the adds stay one a unit; so do copy-ins that show 3 parameters a unit, and
 * forward metadata of more parameters than its kernel has blocks (13 x 4 + 1 + 10 words,
 * the copy-ins as many). Then 200 sizes drawn at random for either copy (8 to 4,096
 * bytes, the other copy's the real one; the real sizes left out): none is taken for
 * parameters (the size alone fit 1 in 32). */
static void
test_fsdp_accumulation_params(void)
{
    const int64_t metas[6][2] = {{0, 0},
                                 {8 * (4 * 4 + 1 + 10), 8 * (6 * 4 + 2 + 10)},
                                 {8 * (4 * 4 + 1 + 10 + 1), 8 * (6 * 4 + 2 + 10)},
                                 {8 * (4 * 4 + 1 + 10), 8 * (6 * 3 + 2 + 10)},
                                 {8 * (4 * 13 + 1 + 10), 8 * (6 * 13 + 2 + 10)},
                                 {8 * (4 * 4 + 1 + 10), 8 * (6 * 4 + 2 + 10 + 1)}};
    double device_ns[3], host_ns[3], launches[3];
    for (int i = 0; i < 6; i++) {
        dfg g;
        workload w;
        sim_result res;
        REQUIRE(analyze_adds_job(&w, &g, &res, 0, 1, i ? metas[i] : NULL) == 0);
        CHECK_EQ_U(w.fsdp.n_params, i == 1 ? 4 * BLOCKS : 0);
        CHECK_EQ_U(w.fsdp.n_adds, i == 1 ? 4 * BLOCKS : BLOCKS);
        CHECK(fabs(w.fsdp.accum_host_ns - w.fsdp.n_adds * 305.0 * US) < 1);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 2;
        strategy_eval ev;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev) == 0);
        if (i < 3)
            device_ns[i] = ev.micro_device_ns, host_ns[i] = ev.micro_host_ns,
            launches[i] = ev.micro_launches;
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
    double c0 = 3.0 * US; /* the fixed cost's prior */
    CHECK(fabs(device_ns[1] - device_ns[0] - 3 * BLOCKS * c0) < 1);
    CHECK(fabs(host_ns[1] - host_ns[0] - 3 * BLOCKS * 305.0 * US) < 1);
    CHECK(fabs(launches[1] - launches[0] - 3 * BLOCKS) < 1e-9);
    CHECK(device_ns[2] == device_ns[0] && host_ns[2] == host_ns[0]);
    uint64_t rs = 32;
    int taken = 0;
    for (int k = 0; k < 200; k++) {
        rs = rs * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t meta[2] = {metas[1][0], metas[1][1]};
        meta[k % 2] = 8 + (int64_t)(rs >> 33) % 4089;
        if (meta[k % 2] != metas[1][k % 2])
            taken += adds_job_params(meta) != 0;
    }
    CHECK_EQ_U(taken, 0);
}

/* The micro-batch without synchronisation under FSDP2 adds what the trace does not run:
 * per unit an element-wise add over its unsharded gradient (the reduce-scatter's input,
 * 1 + 2 + 3 MiB a step), read twice and written once at the trace's element-wise rate
 * (4.8 MB in 43 - 3 us: 120 bytes per ns) after a fixed cost (3 us, the prior), launched
 * as the backward thread's median launch (5 us after 300); and it makes the forward's
 * event calls again (305 us each). */
static void
test_fsdp_accumulation_adds(void)
{
    double device_ns[2], launches = 0, host[2];
    for (int i = 0; i < 3; i++) {
        dfg g;
        workload w;
        sim_result res;
        REQUIRE(analyze_adds_job(&w, &g, &res, i == 2 ? JOB_EVENTS : 0, i > 0, NULL) == 0);
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 2;
        strategy_eval ev;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev) == 0);
        if (i < 2)
            device_ns[i] = ev.micro_device_ns;
        if (i > 0)
            host[i - 1] = ev.micro_host_ns;
        if (i == 1) {
            CHECK(fabs(w.fsdp.accum_bytes_per_ns - 120) < 1e-9);
            CHECK(fabs(w.fsdp.accum_host_ns - BLOCKS * 305.0 * US) < 1);
            /* the micro-batch's device ops per rank and iteration, and the adds */
            int32_t n_it = w.iter_last - w.iter_first + 1;
            for (int32_t d = 0; d < g.n_nodes; d++) {
                int role = w.buckets.micro ? w.buckets.micro[d] : WL_MICRO_PHASE;
                if (w.iter[d] >= w.iter_first && w.iter[d] <= w.iter_last &&
                    (role == WL_MICRO_FORWARD || role == WL_MICRO_INPUT ||
                     (role == WL_MICRO_PHASE &&
                      (w.phase[d] == WL_FORWARD || w.phase[d] == WL_BACKWARD))))
                    launches += 1.0 / (2 * n_it);
            }
            CHECK(fabs(ev.micro_launches - launches - BLOCKS) < 1e-9);
        }
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
    /* the adds' bytes, on top of their fixed costs (there without a known rate too) */
    CHECK(fabs(device_ns[1] - device_ns[0] - 3.0 * 6 * MIB_B / 120) < 1);
    CHECK(device_ns[0] > BLOCKS * 3.0 * US);
    CHECK(fabs(host[1] - host[0] - BLOCKS * 305.0 * US) < 1);
}

/* The micro-batch without synchronisation makes the forward's unshards again, the host's
 * work before their polls too: 200 us more before each of the forward's polls add 200 us
 * a unit to the micro-batch's host time, the polls themselves (50 us) nothing. */
static void
test_fsdp_accumulation_polls(void)
{
    double host[2];
    for (int i = 0; i < 2; i++) {
        dfg g;
        workload w;
        sim_result res;
        REQUIRE(analyze_adds_job(&w, &g, &res, i ? JOB_POLL_WORK : 0, 1, NULL) == 0);
        int32_t gaps = 0;
        for (int32_t x = 0; w.buckets.micro && x < g.n_nodes; x++)
            gaps += w.buckets.micro[x] == WL_MICRO_GAP && w.iter[x] >= w.iter_first &&
                    w.iter[x] <= w.iter_last;
        /* one poll per unit, rank and compared iteration */
        CHECK_EQ_U(gaps, BLOCKS * 2 * (w.iter_last - w.iter_first + 1));
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 2;
        strategy_eval ev;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev) == 0);
        host[i] = ev.micro_host_ns;
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
    CHECK(fabs(host[1] - host[0] - BLOCKS * 200.0 * US) < 1);
}

/* Each micro-batch without synchronisation ends with the host's return from the backward
 * thread to the main thread: where the closing synchronize starts 150 us after the
 * backward thread's last call rather than at once, the micro-batch's host time grows by
 * 150 us; where it starts while the backward runs, nothing is learnt. */
static void
test_fsdp_accumulation_return(void)
{
    double host[2];
    int64_t ret[2];
    for (int i = 0; i < 2; i++) {
        dfg g;
        workload w;
        sim_result res;
        REQUIRE(analyze_adds_job(&w, &g, &res, JOB_RETURN | (i ? JOB_RETURN_LAG : 0), 1, NULL) ==
                0);
        ret[i] = w.fsdp.return_ns;
        strategy_plan p;
        strategy_plan_baseline(&p);
        p.accum_k = 2;
        strategy_eval ev;
        REQUIRE(strategy_evaluate(&w, &p, &res, &ev) == 0);
        host[i] = ev.micro_host_ns;
        workload_free(&w);
        sim_result_free(&res);
        dfg_free(&g);
    }
    CHECK_EQ_U(ret[0], 0);
    CHECK_EQ_U(ret[1], 150 * US);
    CHECK(fabs(host[1] - host[0] - 150.0 * US) < 1);
    dfg g;
    workload w;
    sim_result res;
    REQUIRE(analyze_adds_job(&w, &g, &res, 0, 1, NULL) == 0);
    CHECK_EQ_U(w.fsdp.return_ns, 0);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* A DDP-like job: all-reduces, no all-gather. */
static void
test_not_for_ddp(void)
{
    dfg g;
    REQUIRE(synth_job(&g, 40, 4) == 0);
    costmodel m;
    fit_model(&m);
    workload w;
    sim_result res;
    memset(&res, 0, sizeof res);
    REQUIRE(workload_analyze(&w, &g, &res, 0, 1, &m, NULL, -1, NULL) == 0);
    CHECK(!strategy_fsdp_available(&w));
    CHECK(w.fsdp.why[0] != 0);
    CHECK_EQ_U(workload_fsdp_accum_bytes(&w, 2, 100 * MIB_B), 0);
    strategy_plan p;
    strategy_eval e, b;
    strategy_plan_baseline(&p);
    CHECK(strategy_evaluate(&w, &p, &res, &b) == 0);
    p.fsdp_keep = p.prefetch = 1; /* asked anyway: changes nothing */
    CHECK(strategy_evaluate(&w, &p, &res, &e) == 0);
    CHECK(fabs(e.iter_ns - b.iter_ns) < 1);
    search_options so;
    search_result sr;
    memset(&so, 0, sizeof so);
    so.seed = 1;
    so.max_evals = 60;
    REQUIRE(search_run(&w, &so, &sr) == 0);
    for (int32_t i = 0; i < sr.n_top; i++)
        CHECK(!sr.top[i].plan.fsdp_keep && !sr.top[i].plan.prefetch);
    search_result_free(&sr);
    CHECK(!(framework_torch_ddp.families & STRATEGY_FSDP));
    CHECK(!(framework_ddp_sim.families & STRATEGY_FSDP));
    CHECK(framework_torch_fsdp.families & STRATEGY_FSDP);
    workload_free(&w);
    sim_result_free(&res);
    dfg_free(&g);
}

/* The FSDP figures of a job of n_ranks ranks (pct, prefetched: build_fsdp_job_slow), explicit
 * and with
 * its ranks folded into the classes rep[] of weight[] ranks (dfg_fold, as dpro-optimize's
 * default): a folded rank has no nodes of its own, so the per-rank counts and medians are
 * its representative's, weighed by its class's ranks (class_rows), not halved or pulled
 * to 0 by a rank without rows; the keep-unsharded (flags with JOB_REGATHER) or reshard
 * (without) prediction the same within 0.5 %, and the advice (whether it beats the
 * baseline) the same; the explicit job's keep_calls that (unless negative). */
static void
check_fsdp_folded(int flags, int32_t n_ranks, const int *pct, const int *prefetched,
                  const int32_t *rep, const int32_t *weight, double keep_calls)
{
    dfg g, src, folded;
    fsdp_job_ids ids;
    REQUIRE(build_fsdp_job_slow(&g, &ids, flags, n_ranks, pct, prefetched) == 0);
    REQUIRE(build_fsdp_job_slow(&src, &ids, flags, n_ranks, pct, prefetched) == 0);
    REQUIRE(dfg_finalize(&src) == 0);
    REQUIRE(dfg_fold(&folded, &src, rep, weight, NULL) == 0);
    dfg_free(&src);
    REQUIRE(dfg_finalize(&folded) == 0);
    workload we, wf;
    sim_result re, rf;
    memset(&re, 0, sizeof re);
    memset(&rf, 0, sizeof rf);
    REQUIRE(workload_analyze(&we, &g, &re, 1, 2, NULL, NULL, -1, NULL) == 0);
    REQUIRE(workload_analyze(&wf, &folded, &rf, 1, 2, NULL, NULL, -1, NULL) == 0);
    CHECK(strategy_fsdp_available(&wf));
    CHECK_EQ_U(wf.fsdp.n_fwd, we.fsdp.n_fwd);
    CHECK_EQ_U(wf.fsdp.n_bwd, we.fsdp.n_bwd);
    CHECK_EQ_U(wf.fsdp.n_rs, we.fsdp.n_rs);
    CHECK_EQ_U(wf.fsdp.n_regather, we.fsdp.n_regather);
    CHECK_EQ_U(wf.fsdp.n_params, we.fsdp.n_params);
    CHECK_EQ_U(wf.fsdp.gathered_bytes, we.fsdp.gathered_bytes);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_U(wf.fsdp.unit_bytes[k], we.fsdp.unit_bytes[k]);
    CHECK(keep_calls < 0 || fabs(we.fsdp.keep_calls - keep_calls) < 1e-9);
    CHECK(fabs(wf.fsdp.keep_calls - we.fsdp.keep_calls) < 1e-9);
    CHECK(fabs(wf.fsdp.regather_calls - we.fsdp.regather_calls) < 1e-9);
    CHECK(fabs(wf.base_iter_ns - we.base_iter_ns) <= 0.005 * we.base_iter_ns);
    strategy_plan p;
    strategy_eval ee, ef;
    strategy_plan_baseline(&p);
    if (flags & JOB_REGATHER)
        p.fsdp_keep = 1;
    else
        p.fsdp_reshard = 1;
    CHECK(strategy_evaluate(&we, &p, &re, &ee) == 0);
    CHECK(strategy_evaluate(&wf, &p, &rf, &ef) == 0);
    CHECK(ee.iter_ns < we.base_iter_ns || !(flags & JOB_REGATHER));
    CHECK(fabs(ef.iter_ns - ee.iter_ns) <= 0.005 * ee.iter_ns);
    CHECK((ef.iter_ns < wf.base_iter_ns) == (ee.iter_ns < we.base_iter_ns));
    workload_free(&we);
    workload_free(&wf);
    sim_result_free(&re);
    sim_result_free(&rf);
    dfg_free(&g);
    dfg_free(&folded);
}

static void
test_fsdp_folded(void)
{
    const int32_t rep[2] = {0, 0}, weight[2] = {2, 0};
    check_fsdp_folded(JOB_REGATHER | JOB_COPY_IN | JOB_ADDS, 2, NULL, NULL, rep, weight,
                      3 * BLOCKS);
    check_fsdp_folded(0, 2, NULL, NULL, rep, weight, 0);
}

/* Folded classes of unequal ranks: 3 alike ranks and a slower one (its host gaps and
 * device times at 150 %), and 3 + 2 + 1 ranks (at 100, 125 and 150 %). With re-gathers the
 * slower ranks re-gather as JOB_PREFETCHED does (a kernel launch and a stream wait more in
 * each unshard: 12 calls an iteration where the others make 9), so that the medians over
 * the ranks (9 of 3 + 1 ranks, 10.5 of 3 + 2 + 1) are not those over the classes (10.5,
 * 12). */
static void
test_fsdp_folded_unequal(void)
{
    const int pct4[4] = {100, 100, 100, 150}, pre4[4] = {0, 0, 0, 1};
    const int32_t rep4[4] = {0, 0, 0, 3}, weight4[4] = {3, 0, 0, 1};
    const int pct6[6] = {100, 100, 100, 125, 125, 150}, pre6[6] = {0, 0, 0, 1, 1, 1};
    const int32_t rep6[6] = {0, 0, 0, 3, 3, 5}, weight6[6] = {3, 0, 0, 2, 0, 1};
    for (int with = 0; with < 2; with++) {
        int flags = with ? JOB_REGATHER | JOB_COPY_IN | JOB_ADDS : 0;
        check_fsdp_folded(flags, 4, pct4, with ? pre4 : NULL, rep4, weight4, with ? 9 : 0);
        check_fsdp_folded(flags, 6, pct6, with ? pre6 : NULL, rep6, weight6, with ? 10.5 : 0);
    }
}

int
main(void)
{
    test_fsdp_strategies();
    test_fsdp_keep_prefetched();
    test_fsdp_reshard();
    test_fsdp_reshard_call_price();
    test_fsdp_reshard_loop_gap();
    test_fsdp_reshard_wait();
    test_fsdp_reshard_hours();
    test_fsdp_accumulation();
    test_fsdp_accumulation_adds();
    test_fsdp_accumulation_params();
    test_fsdp_accumulation_polls();
    test_fsdp_accumulation_return();
    test_not_for_ddp();
    test_fsdp_folded();
    test_fsdp_folded_unequal();
    return tests_done();
}
