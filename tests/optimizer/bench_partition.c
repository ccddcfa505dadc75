/*
 * bench_partition: the time of one tensor partition (partition_build) where participants
 * have no gating kernel, so that each bucket it adds copies its participant's waits
 * (partition.c: copy_preds). `bench_partition [LAYERS [ITERS]]` (400, 5): build_layer_job
 * with LAYERS layers of 256 KiB gradients and ITERS iterations, an edge into each device
 * op from the one before it on its stream (a recorded graph holds about as many edges as
 * device ops), rank 1's kernels taken off the compute stream (no gating kernel), the plan
 * of 1 MiB buckets. Prints the graph's size, the buckets, partition_build's wall time and
 * a hash of the new graph's edges (the same answer before and after a change).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dprotrace.h"
#include "optimizer/memest.h"
#include "optimizer/partition.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "tests/optimizer/optjobs.h"

#define GRAD_BYTES (256 * 1024)

/* Adds to g an edge into each device op from the device op before it on its stream, then
 * finalizes g. Returns 0 or -1. */
static int
add_stream_edges(dfg *g)
{
    int rc = 0;
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++) {
        int32_t p = g->kind[n] != DFG_HOST ? dfg_prev_on_res(g, n) : -1;
        if (p >= 0)
            rc = dfg_add_edge(g, p, n);
    }
    return rc == 0 ? dfg_finalize(g) : rc;
}

/* FNV-1a of g's edges in their order. */
static uint64_t
edges_hash(const dfg *g)
{
    uint64_t h = 1469598103934665603ULL;
    for (int64_t e = 0; e < g->n_edges; e++)
        h = (h ^ ((uint64_t)(uint32_t)g->esrc[e] << 32 | (uint32_t)g->edst[e])) * 1099511628211ULL;
    return h;
}

int
main(int argc, char **argv)
{
    int32_t nl = argc > 1 ? atoi(argv[1]) : 400;
    int iters = argc > 2 ? atoi(argv[2]) : 5;
    if (nl < 1 || iters < 3) {
        fprintf(stderr, "usage: bench_partition [LAYERS >= 1 [ITERS >= 3]]\n");
        return 2;
    }
    int64_t *grad = malloc(sizeof *grad * (size_t)nl), *t_fwd = malloc(sizeof *t_fwd * (size_t)nl);
    dfg g = {0}, work = {0}, part = {0};
    workload w;
    sim_result res;
    memest mem;
    costmodel m;
    strategy_plan p;
    partition_input pin;
    uint8_t *onc = NULL;
    int rc = grad && t_fwd ? 0 : 1, have_w = 0, analyzed = 0;
    memset(&res, 0, sizeof res);
    memset(&mem, 0, sizeof mem);
    for (int32_t l = 0; rc == 0 && l < nl; l++)
        grad[l] = GRAD_BYTES;
    if (rc == 0 && (build_layer_job(&g, iters, grad, nl, 0, t_fwd) != 0 ||
                    add_stream_edges(&g) != 0 || dfg_clone(&work, &g) != 0))
        rc = 1;
    if (rc == 0) {
        fit_model(&m);
        layer_memest(&mem, grad, nl, t_fwd, (int64_t)nl * GRAD_BYTES);
        analyzed = 1; /* the workload takes the estimate */
        rc = workload_analyze(&w, &work, &res, 1, iters - 1, &m, &mem, 0, NULL) == 0 ? 0 : 1;
        have_w = rc == 0;
    }
    if (rc == 0) {
        strategy_plan_baseline(&p);
        for (int i = 0; i < strategy_n_bucket_caps; i++)
            if (strategy_bucket_caps_mb[i] == 1)
                p.bucket_cap = p.first_cap = (int8_t)i;
        rc = partition_splits(&w.buckets, &p) && strategy_apply(&w, &p) == 0 ? 0 : 1;
    }
    if (rc == 0) {
        strategy_partition_input(&w, &pin);
        onc = malloc((size_t)pin.n_nodes + 1);
        rc = onc ? 0 : 1;
    }
    if (rc == 0) {
        for (int32_t n = 0; n < pin.n_nodes; n++)
            onc[n] = pin.on_compute[n] && dfg_rank(pin.g, n) != 1;
        pin.on_compute = onc;
        struct timespec a, b;
        int32_t nb = -1;
        clock_gettime(CLOCK_MONOTONIC, &a);
        rc = partition_build(&pin, &p, &part, &nb) == 0 ? 0 : 1;
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (rc == 0)
            printf("graph %d nodes, %lld edges; %d buckets an iteration; partition_build %.3f s; "
                   "new graph %d nodes, %lld edges, edges hash %016llx\n",
                   g.n_nodes, (long long)g.n_edges, nb,
                   (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9,
                   part.n_nodes, (long long)part.n_edges, (unsigned long long)edges_hash(&part));
    }
    if (rc != 0)
        fprintf(stderr, "bench_partition: the job or its partition failed\n");
    dfg_free(&part);
    free(onc);
    if (have_w)
        workload_free(&w);
    sim_result_free(&res);
    if (!analyzed)
        memest_free(&mem);
    dfg_free(&work);
    dfg_free(&g);
    free(grad);
    free(t_fwd);
    return rc;
}
