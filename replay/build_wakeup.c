/* build_wakeup.c: wake-ups between host threads (build_infer_wakeups, see build.h). */
#define PR_FMT "replay"
#include "build_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Wake-ups between the host threads of a rank (see build.h). A call is taken as woken
 * when its gap on its thread is at least WAKE_MIN_GAP_NS and WAKE_GAP_FACTOR times the
 * thread's median gap (a wait, not framework time between calls), and a call on
 * another thread of the rank ended within that gap: the latest such call is its
 * waker, provided it ended in the gap's last WAKE_LAG_NUM/WAKE_LAG_DEN (or at most
 * WAKE_MAX_LAG_NS before the call). The bound is loose on purpose: on an oversubscribed
 * host a woken thread may wait milliseconds to be scheduled (docs/models.md: on
 * tests/simgpu, more than half of a wait); it keeps a thread that computed through most
 * of its gap from being tied to a call that ended early in it.
 * Device operations are not taken as wakers: a thread that waits for the device does so
 * in a synchronisation call, which its edges already order. */
#define WAKE_MIN_GAP_NS 50000
#define WAKE_GAP_FACTOR 8
#define WAKE_MAX_LAG_NS 100000
#define WAKE_LAG_NUM 3
#define WAKE_LAG_DEN 4

typedef struct end_ref {
    int64_t end;
    int32_t node;
} end_ref;

static int
cmp_end_ref(const void *pa, const void *pb)
{
    const end_ref *a = pa, *b = pb;
    if (a->end != b->end)
        return (a->end > b->end) - (a->end < b->end);
    return (a->node > b->node) - (a->node < b->node);
}

int
build_infer_wakeups(dfg *g)
{
    size_t per_thread = 1, per_rank = 1;
    build_res_nodes_max(g, DFG_RES_THREAD, -1, &per_thread, &per_rank);
    end_ref *byend = malloc(per_rank * sizeof *byend);
    int64_t *gaps = malloc(per_thread * sizeof *gaps);
    int64_t *med = malloc((size_t)(g->n_res > 0 ? g->n_res : 1) * sizeof *med);
    /* the calls' previous calls as measured: a wake-up node added before a call below
     * changes only that call's, which is read before */
    int32_t *prev = dfg_prev_table(g);
    int rc = -1;
    if (!byend || !gaps || !med || !prev)
        goto out;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        size_t nh = 0;
        int32_t threads = 0;
        for (int32_t q = 0; q < g->n_res; q++) {
            if (g->res_rank[q] != r || g->res_kind[q] != DFG_RES_THREAD)
                continue;
            threads++;
            size_t k = 0;
            for (int32_t h = g->res_first[q]; h >= 0; h = g->next_on_res[h]) {
                byend[nh].end = dfg_mend(g, h);
                byend[nh++].node = h;
                if (prev[h] >= 0)
                    gaps[k++] = g->mstart[h] - dfg_mend(g, prev[h]);
            }
            if (k > 0) {
                qsort(gaps, k, sizeof *gaps, cmp_i64);
                med[q] = gaps[k / 2] > 0 ? gaps[k / 2] : 0;
            } else {
                med[q] = 0;
            }
        }
        if (threads < 2)
            continue;
        qsort(byend, nh, sizeof *byend, cmp_end_ref);
        for (size_t x = 0; x < nh; x++) {
            int32_t h = byend[x].node;
            int32_t q = g->res[h], p = prev[h];
            int64_t prev_end = p >= 0 ? dfg_mend(g, p) : 0;
            int64_t gap = g->mstart[h] - prev_end;
            if (gap < WAKE_MIN_GAP_NS || gap < WAKE_GAP_FACTOR * med[q])
                continue;
            /* latest call of another thread ending in (prev_end, start] */
            size_t lo = 0, hi = nh; /* first index with end > start */
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (byend[mid].end <= g->mstart[h])
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int32_t waker = -1;
            for (size_t k = lo; k-- > 0;) {
                int32_t w = byend[k].node;
                if (byend[k].end <= prev_end)
                    break;
                if (g->res[w] != q) {
                    waker = w;
                    break;
                }
            }
            if (waker < 0)
                continue;
            int64_t lag = g->mstart[h] - dfg_mend(g, waker);
            int64_t max_lag = gap / WAKE_LAG_DEN * WAKE_LAG_NUM;
            if (max_lag < WAKE_MAX_LAG_NS)
                max_lag = WAKE_MAX_LAG_NS;
            if (lag > max_lag)
                continue;
            if (dfg_add_wakeup(g, waker, h, lag) != 0)
                goto out;
        }
    }
    rc = 0;
out:
    free(byend);
    free(gaps);
    free(med);
    free(prev);
    return rc;
}
