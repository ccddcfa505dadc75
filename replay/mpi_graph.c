/* mpi_graph.c: the replay's graph handed from MPI process 0 to the others (see mpi_sim.h,
 * mpisim_share_graph). */
#define PR_FMT "mpi"
#include "config.h"

#include "mpi_sim.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* The most bytes one MPI_Bcast carries (its count is an int). */
#define BCAST_CHUNK ((int64_t)1 << 30)

/* The sizes that say how long each array of the graph is, in the order they travel. */
enum {
    H_NODES,
    H_EDGES,
    H_RES,
    H_GROUPS,
    H_RANKS,
    H_ITER_NODES,
    H_JOB_NODES,
    H_JOB_EDGES,
    H_JOB_GROUPS,
    H_FOLDED,
    H_POOL,
    H_STRINGS,
    H_SLOTS,
    H_BYTES,
    H_MEND_WIDE,
    H_DUR_WIDE,
    H_GAP_WIDE,
    H_GRP_PART,
    H_LEAVE,
    H_LEAVE_CLASSES,
    H_COUNT
};

/* The most arrays list_arrays lists. */
#define GARRAYS 56

/* One array of the graph: its pointer, element size and length. */
typedef struct garray {
    void **p;
    size_t elem;
    int64_t n;
} garray;

/* Lists g's arrays into a (room for GARRAYS) from the sizes h. Returns how many. */
static int
list_arrays(dfg *g, const int64_t *h, garray *a)
{
    int k = 0;
#define A(f, len) a[k++] = (garray){(void **)&g->f, sizeof *g->f, (len)}
    A(kind, h[H_NODES]);
    A(flags, h[H_NODES]);
    A(res, h[H_NODES]);
    A(name, h[H_NODES]);
    A(dur, h[H_NODES]);
    A(gap, h[H_NODES]);
    A(lat, h[H_NODES]);
    A(launch, h[H_NODES]);
    A(next_on_res, h[H_NODES]);
    A(mstart, h[H_NODES]);
    A(mlen, h[H_NODES]);
    A(bytes.node, h[H_BYTES]);
    A(bytes.val, h[H_BYTES]);
    A(mend_wide.node, h[H_MEND_WIDE]);
    A(mend_wide.val, h[H_MEND_WIDE]);
    A(dur_wide.node, h[H_DUR_WIDE]);
    A(dur_wide.val, h[H_DUR_WIDE]);
    A(gap_wide.node, h[H_GAP_WIDE]);
    A(gap_wide.val, h[H_GAP_WIDE]);
    A(grp_part.node, h[H_GRP_PART]);
    A(grp_part.val, h[H_GRP_PART]);
    A(leave.node, h[H_LEAVE]);
    A(leave.val, h[H_LEAVE]);
    A(esrc, h[H_EDGES]);
    A(edst, h[H_EDGES]);
    A(res_kind, h[H_RES]);
    A(res_rank, h[H_RES]);
    A(res_id, h[H_RES]);
    A(res_first, h[H_RES]);
    A(res_last, h[H_RES]);
    A(res_label, h[H_RES]);
    A(grp_op, h[H_GROUPS]);
    A(grp_nranks, h[H_GROUPS]);
    A(grp_members, h[H_GROUPS]);
    A(grp_first, h[H_GROUPS]);
    A(grp_bytes, h[H_GROUPS]);
    A(grp_dur, h[H_GROUPS]);
    A(grp_mdur, h[H_GROUPS]);
    A(grp_comm, h[H_GROUPS]);
    A(grp_seq, h[H_GROUPS]);
    A(iter_off, h[H_RANKS] + 1);
    A(iter_node, h[H_ITER_NODES]);
    if (h[H_FOLDED]) {
        A(rank_rep, h[H_RANKS]);
        A(rank_weight, h[H_RANKS]);
        A(rank_apart, h[H_RANKS]);
    }
    A(strings.pool, h[H_POOL]);
    A(strings.offset, h[H_STRINGS]);
    A(strings.slots, h[H_SLOTS]);
#undef A
    return k;
}

/* Broadcasts n bytes at p from process 0, in pieces an int counts. */
static void
bcast_bytes(void *p, int64_t n)
{
    for (int64_t off = 0; off < n; off += BCAST_CHUNK) {
        int64_t k = n - off < BCAST_CHUNK ? n - off : BCAST_CHUNK;
        MPI_Bcast((char *)p + off, (int)k, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

/* On a receiving process: g's sizes from h, every array of a allocated (at least one
 * element). Returns 0 or -1 (out of memory). */
static int
receive_setup(dfg *g, const int64_t *h, garray *a, int n)
{
    int rc = 0;
    g->n_nodes = g->cap_nodes = (int32_t)h[H_NODES];
    g->n_edges = g->cap_edges = h[H_EDGES];
    g->bytes.n = g->bytes.cap = (int32_t)h[H_BYTES];
    g->mend_wide.n = g->mend_wide.cap = (int32_t)h[H_MEND_WIDE];
    g->dur_wide.n = g->dur_wide.cap = (int32_t)h[H_DUR_WIDE];
    g->gap_wide.n = g->gap_wide.cap = (int32_t)h[H_GAP_WIDE];
    g->grp_part.n = g->grp_part.cap = (int32_t)h[H_GRP_PART];
    g->leave.n = g->leave.cap = (int32_t)h[H_LEAVE];
    g->leave_classes = (int)h[H_LEAVE_CLASSES];
    g->n_res = g->cap_res = (int32_t)h[H_RES];
    g->n_groups = g->cap_groups = (int32_t)h[H_GROUPS];
    g->n_ranks = (int32_t)h[H_RANKS];
    g->n_iter_nodes = (int32_t)h[H_ITER_NODES];
    g->job_nodes = h[H_JOB_NODES];
    g->job_edges = h[H_JOB_EDGES];
    g->job_groups = (int32_t)h[H_JOB_GROUPS];
    g->strings.pool_len = g->strings.pool_cap = (size_t)h[H_POOL];
    g->strings.n = g->strings.cap = (uint32_t)h[H_STRINGS];
    g->strings.n_slots = (uint32_t)h[H_SLOTS];
    for (int i = 0; i < n; i++) {
        *a[i].p = malloc((size_t)(a[i].n > 0 ? a[i].n : 1) * a[i].elem);
        if (!*a[i].p)
            rc = -1;
    }
    return rc;
}

int
mpisim_share_graph(dfg *g, int64_t *bytes)
{
    int me;
    int64_t h[H_COUNT] = {0}, sent = 0;
    garray a[GARRAYS];
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (me == 0) {
        h[H_NODES] = g->n_nodes;
        h[H_EDGES] = g->n_edges;
        h[H_RES] = g->n_res;
        h[H_GROUPS] = g->n_groups;
        h[H_RANKS] = g->n_ranks;
        h[H_ITER_NODES] = g->n_iter_nodes;
        h[H_JOB_NODES] = g->job_nodes;
        h[H_JOB_EDGES] = g->job_edges;
        h[H_JOB_GROUPS] = g->job_groups;
        h[H_FOLDED] = g->rank_rep != NULL;
        h[H_POOL] = (int64_t)g->strings.pool_len;
        h[H_STRINGS] = g->strings.n;
        h[H_SLOTS] = g->strings.n_slots;
        h[H_BYTES] = g->bytes.n;
        h[H_MEND_WIDE] = g->mend_wide.n;
        h[H_DUR_WIDE] = g->dur_wide.n;
        h[H_GAP_WIDE] = g->gap_wide.n;
        h[H_GRP_PART] = g->grp_part.n;
        h[H_LEAVE] = g->leave.n;
        h[H_LEAVE_CLASSES] = g->leave_classes;
    }
    MPI_Bcast(h, H_COUNT, MPI_INT64_T, 0, MPI_COMM_WORLD);
    int n = list_arrays(g, h, a);
    int rc = me == 0 ? 0 : receive_setup(g, h, a, n);
    rc = mpisim_agree(rc == 0) ? 0 : -1;
    for (int i = 0; rc == 0 && i < n; i++) {
        bcast_bytes(*a[i].p, a[i].n * (int64_t)a[i].elem);
        sent += a[i].n * (int64_t)a[i].elem;
    }
    if (rc != 0 && me != 0) {
        dfg_free(g);
        memset(g, 0, sizeof *g);
    }
    if (bytes)
        *bytes = rc == 0 ? sent : 0;
    return rc;
}
