/* mpi_sim.c: the replay's simulation as an MPI job (see mpi_sim.h). */
#define PR_FMT "mpi"
#include "config.h"

#include "mpi_sim.h"

#include "dpro_log.h"
#include "sim_int.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

/* One item of an exchange: a group's arrivals on the sending process, or the end of a
 * node whose edge successors other processes simulate. */
enum { MSG_GROUP = 1, MSG_EDGE = 2 };

typedef struct msg {
    int32_t kind;  /* MSG_GROUP or MSG_EDGE */
    int32_t id;    /* group (MSG_GROUP) or node (MSG_EDGE) */
    int32_t count; /* participants that arrived there (MSG_GROUP) */
    int32_t node;  /* the latest of them (MSG_GROUP) */
    int64_t t;     /* its arrival (MSG_GROUP) or the node's end (MSG_EDGE) */
} msg;

/* This process's share of the graph and the state of the exchanges. */
typedef struct part {
    int me, nprocs;
    uint8_t *own;       /* per rank */
    int32_t *grp_local; /* per group: participants here */
    uint8_t *remote_out;
    int32_t *grp_ready, *sent; /* sim_state's lists */
    int32_t *tally;            /* per group: arrivals reported over every process */
    int64_t *garr;             /* per group: the latest of them */
    int32_t *glast;            /* its node */
    msg *out, *in;             /* this round's items, handed out and received */
    size_t n_out, cap_in;
    int *counts, *displs; /* per process, in bytes */
} part;

int
mpisim_init(int *argc, char ***argv, int *me, int *nprocs)
{
    int rc = MPI_Init(argc, argv);
    if (rc != MPI_SUCCESS) {
        pr_err("MPI_Init failed (error %d): run under mpirun or srun", rc);
        return -1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, me);
    MPI_Comm_size(MPI_COMM_WORLD, nprocs);
    return 0;
}

void
mpisim_finalize(void)
{
    MPI_Finalize();
}

void
mpisim_abort(int status)
{
    MPI_Abort(MPI_COMM_WORLD, status);
    exit(status); /* MPI_Abort returns only where it cannot end the job */
}

int
mpisim_agree(int ok)
{
    int all = ok;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

static void
part_free(part *p)
{
    free(p->own);
    free(p->grp_local);
    free(p->remote_out);
    free(p->grp_ready);
    free(p->sent);
    free(p->tally);
    free(p->garr);
    free(p->glast);
    free(p->out);
    free(p->in);
    free(p->counts);
    free(p->displs);
    memset(p, 0, sizeof *p);
}

/* The process that simulates the k-th of n simulated ranks: contiguous shares. */
static int
owner_of(int32_t k, int32_t n, int nprocs)
{
    return (int)((int64_t)k * nprocs / (n > 0 ? n : 1));
}

/* Sets up p for g (finalized) on this process. Returns 0 or -1 (out of memory). */
static int
part_init(part *p, const dfg *g, mpisim_stats *st)
{
    size_t nn = (size_t)g->n_nodes + 1, ng = (size_t)g->n_groups + 1;
    p->own = calloc((size_t)g->n_ranks + 1, 1);
    p->grp_local = calloc(ng, sizeof *p->grp_local);
    p->remote_out = calloc(nn, 1);
    p->grp_ready = malloc(ng * sizeof *p->grp_ready);
    p->sent = malloc(nn * sizeof *p->sent);
    p->tally = calloc(ng, sizeof *p->tally);
    p->garr = malloc(ng * sizeof *p->garr);
    p->glast = malloc(ng * sizeof *p->glast);
    p->out = malloc((ng + nn) * sizeof *p->out); /* each group and node goes out once */
    p->counts = malloc((size_t)p->nprocs * sizeof *p->counts);
    p->displs = malloc((size_t)p->nprocs * sizeof *p->displs);
    if (!p->own || !p->grp_local || !p->remote_out || !p->grp_ready || !p->sent || !p->tally ||
        !p->garr || !p->glast || !p->out || !p->counts || !p->displs)
        return -1;
    /* the ranks with nodes (a folded graph's representatives) are shared out */
    uint8_t *has = p->own;
    for (int32_t q = 0; q < g->n_res; q++)
        if (g->res_first[q] >= 0)
            has[g->res_rank[q]] = 1;
    int32_t n_sim = 0, k = 0;
    for (int32_t r = 0; r < g->n_ranks; r++)
        n_sim += has[r];
    for (int32_t r = 0; r < g->n_ranks; r++) {
        if (!has[r])
            continue;
        has[r] = owner_of(k++, n_sim, p->nprocs) == p->me;
        st->ranks_here += has[r];
    }
    for (int32_t q = 0; q < g->n_groups; q++) {
        p->garr[q] = -1;
        p->glast[q] = -1;
    }
    for (int32_t n = 0; n < g->n_nodes; n++) {
        if ((g->flags[n] & DFG_F_REMOVED) || !p->own[dfg_rank(g, n)])
            continue;
        st->nodes_here++;
        if (dfg_group(g, n) >= 0)
            p->grp_local[dfg_group(g, n)]++;
        for (int64_t i = dfg_succ_first(g, n); dfg_succ_more(g, n, i); i++)
            if (!p->own[dfg_rank(g, g->succ[i])])
                p->remote_out[n] = 1;
    }
    return 0;
}

/* Runs this process's nodes as far as they go: groups whose participants are all here
 * start at once; those with participants elsewhere and the ends other processes wait
 * for are queued in p->out. */
static void
run_local(part *p, sim_state *s, mpisim_stats *st)
{
    const dfg *g = s->g;
    for (;;) {
        sim_drain(s);
        int local = 0;
        for (int32_t i = 0; i < s->n_grp_ready; i++) {
            int32_t q = s->grp_ready[i];
            if (p->grp_local[q] == g->grp_members[q]) {
                sim_release_group(s, q, s->r->grp_arrival[q], s->r->grp_last[q]);
                st->local_groups++;
                local = 1;
                continue;
            }
            p->out[p->n_out++] =
                (msg){MSG_GROUP, q, p->grp_local[q], s->r->grp_last[q], s->r->grp_arrival[q]};
        }
        s->n_grp_ready = 0;
        for (int32_t i = 0; i < s->n_sent; i++)
            p->out[p->n_out++] = (msg){MSG_EDGE, s->sent[i], 0, -1, s->r->end[s->sent[i]]};
        s->n_sent = 0;
        if (!local)
            return;
    }
}

/* Applies item m from process `from` of this round's exchange. */
static void
apply(part *p, sim_state *s, const msg *m, int from)
{
    const dfg *g = s->g;
    if (m->kind == MSG_EDGE) {
        if (from != p->me)
            sim_release_edge(s, m->id, m->t);
        return;
    }
    int32_t q = m->id;
    if (q < 0 || q >= g->n_groups)
        return;
    p->tally[q] += m->count;
    if (m->t > p->garr[q] || p->glast[q] < 0 || (m->t == p->garr[q] && m->node < p->glast[q])) {
        p->garr[q] = m->t;
        p->glast[q] = m->node;
    }
    if (p->tally[q] == g->grp_members[q] && p->grp_local[q] > 0)
        sim_release_group(s, q, p->garr[q], p->glast[q]);
}

/* One exchange: hands out p->out and applies what every process handed out. Returns
 * the number of items exchanged over all processes (0: nothing moves any more), or -1
 * when out of memory on any process. */
static int64_t
exchange(part *p, sim_state *s, mpisim_stats *st)
{
    int mine = (int)(p->n_out * sizeof(msg));
    MPI_Allgather(&mine, 1, MPI_INT, p->counts, 1, MPI_INT, MPI_COMM_WORLD);
    int64_t total = 0;
    for (int i = 0; i < p->nprocs; i++) {
        p->displs[i] = (int)total;
        total += p->counts[i];
    }
    if (total == 0)
        return 0;
    size_t items = (size_t)total / sizeof(msg);
    int ok = 1;
    if (items > p->cap_in) {
        msg *x = realloc(p->in, items * sizeof *x);
        if (x) {
            p->in = x;
            p->cap_in = items;
        } else
            ok = 0;
    }
    if (!mpisim_agree(ok))
        return -1;
    MPI_Allgatherv(p->out, mine, MPI_BYTE, p->in, p->counts, p->displs, MPI_BYTE, MPI_COMM_WORLD);
    p->n_out = 0;
    st->rounds++;
    for (int from = 0; from < p->nprocs; from++) {
        const msg *m = p->in + p->displs[from] / (int)sizeof(msg);
        size_t n = (size_t)p->counts[from] / sizeof(msg);
        for (size_t i = 0; i < n; i++) {
            if (m[i].kind == MSG_GROUP)
                st->group_msgs++;
            else
                st->edge_msgs++;
            apply(p, s, &m[i], from);
        }
    }
    return (int64_t)items;
}

/* Collects the whole timeline on process 0: each entry is -1 (or 0 for why) on the
 * processes that did not simulate it, so the maximum is the one that did. */
static void
gather(const dfg *g, sim_result *r, int me)
{
    struct {
        void *buf;
        int n;
        MPI_Datatype type;
    } a[] = {
        {r->start, g->n_nodes, MPI_INT64_T},        {r->end, g->n_nodes, MPI_INT64_T},
        {r->crit, g->n_nodes, MPI_INT32_T},         {r->why, g->n_nodes, MPI_UINT8_T},
        {r->grp_arrival, g->n_groups, MPI_INT64_T}, {r->grp_last, g->n_groups, MPI_INT32_T},
    };
    for (size_t i = 0; i < sizeof a / sizeof a[0]; i++) {
        if (a[i].n <= 0)
            continue;
        if (me == 0)
            MPI_Reduce(MPI_IN_PLACE, a[i].buf, a[i].n, a[i].type, MPI_MAX, 0, MPI_COMM_WORLD);
        else
            MPI_Reduce(a[i].buf, NULL, a[i].n, a[i].type, MPI_MAX, 0, MPI_COMM_WORLD);
    }
}

int
mpisim_run(dfg *g, sim_result *res, mpisim_stats *st)
{
    mpisim_stats local = {0};
    part p = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &p.me);
    MPI_Comm_size(MPI_COMM_WORLD, &p.nprocs);
    local.processes = p.nprocs;
    int ok = sim_prepare(g, res) == 0 && part_init(&p, g, &local) == 0;
    int rc = mpisim_agree(ok) ? 0 : -1;
    if (rc == 0) {
        /* groups whose participants all run elsewhere are never reported here as arrived
         * (grp_arrival keeps -1, which the gather relies on) */
        sim_state s = {.g = g,
                       .r = res,
                       .own = p.own,
                       .grp_local = p.grp_local,
                       .remote_out = p.remote_out,
                       .grp_ready = p.grp_ready,
                       .sent = p.sent};
        sim_begin(&s);
        int64_t moved;
        do {
            run_local(&p, &s, &local);
            moved = exchange(&p, &s, &local);
        } while (moved > 0);
        if (moved < 0)
            rc = -1;
    }
    if (rc == 0) {
        gather(g, res, p.me);
        sim_tally(g, res); /* on the other processes: over their own nodes */
        MPI_Allreduce(MPI_IN_PLACE, &local.local_groups, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
    }
    part_free(&p);
    if (st)
        *st = local;
    return rc;
}
