/*
 * partition.c: tensor partition, buckets smaller than the trace's all-reduces (see
 * partition.h for the model).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/partition.h"
#include "replay/sim.h"

#define MIB 1048576.0

/* One bucket of the packing: it closes in unit `unit` once `pos` bytes of that unit are
 * ready (pos == the unit's bytes: at its end) and carries `bytes` bytes. */
typedef struct pchunk {
    int32_t unit;
    int64_t pos;
    int64_t bytes;
} pchunk;

static int
tensor_ready(const workload_buckets *bu, const strategy_plan *p)
{
    return p->bucket_cap >= 0 && p->bucket_cap < strategy_n_bucket_caps &&
           p->first_cap < strategy_n_bucket_caps && bu->n_units >= 1 && bu->model && !bu->why[0];
}

static int64_t
cap_bytes(int idx)
{
    return (int64_t)(strategy_bucket_caps_mb[idx] * MIB);
}

/* DDP's rule for one tensor of s bytes added to the open bucket (*cur bytes, capped at
 * *cap): 1 when the bucket closes with it (it reaches its cap or passes it), *cur then
 * back to 0 and *cap to next_cap; else 0. */
static int
ddp_add(int64_t *cur, int64_t *cap, int64_t next_cap, int64_t s)
{
    *cur += s;
    if (*cur < *cap)
        return 0;
    *cur = 0;
    *cap = next_cap;
    return 1;
}

int32_t
partition_ddp_buckets(const int64_t *sizes, int32_t n, int64_t first_cap, int64_t cap, int32_t *end)
{
    int64_t cur = 0, c = first_cap;
    int32_t nb = 0;
    for (int32_t i = 0; i < n; i++)
        if (ddp_add(&cur, &c, cap, sizes[i]) || i == n - 1) {
            if (end)
                end[nb] = i;
            nb++;
        }
    return nb;
}

/* Whether the packing knows the tensors DDP's buckets are made of: the parameters
 * (param_bytes) or, without them, the layers' gradients (grad_bytes; ddp-sim, one
 * tensor per layer). */
static int
whole_tensors(const workload_buckets *bu)
{
    return bu->param_bytes || (bu->grad_bytes && bu->unit_lo);
}

/* The number of tensors of unit u (whole_tensors). */
static int32_t
unit_tensors(const workload_buckets *bu, int32_t u)
{
    if (bu->param_bytes)
        return bu->unit_param_off[u + 1] - bu->unit_param_off[u];
    return (u == 0 ? bu->n_grad_layers : bu->unit_lo[u - 1]) - bu->unit_lo[u];
}

/* The bytes of tensor k of unit u in backward order (whole_tensors). */
static int64_t
tensor_bytes(const workload_buckets *bu, int32_t u, int32_t k)
{
    if (bu->param_bytes)
        return bu->param_bytes[bu->unit_param_off[u] + k];
    return bu->grad_bytes[(u == 0 ? bu->n_grad_layers : bu->unit_lo[u - 1]) - 1 - k];
}

/* The packing of partition.h into out (NULL: count only). Returns the number of
 * buckets; *splits (may be NULL) receives 1 when a unit is split. */
static int32_t
pack(const workload_buckets *bu, const strategy_plan *p, pchunk *out, int *splits)
{
    int64_t cap = cap_bytes(p->first_cap >= 0 ? p->first_cap : p->bucket_cap);
    int64_t next_cap = cap_bytes(p->bucket_cap);
    int64_t cur = 0;
    int32_t n = 0;
    int split = 0;
#define EMIT(u_, pos_, bytes_)                                                                     \
    do {                                                                                           \
        if (out) {                                                                                 \
            out[n].unit = (u_);                                                                    \
            out[n].pos = (pos_);                                                                   \
            out[n].bytes = (bytes_);                                                               \
        }                                                                                          \
        n++;                                                                                       \
    } while (0)
    for (int32_t u = 0; whole_tensors(bu) && u < bu->n_units; u++) {
        /* DDP's buckets of whole tensors: each closes after the tensor that fills it */
        int64_t pos = 0;
        int32_t nt = unit_tensors(bu, u);
        for (int32_t k = 0; k < nt; k++) {
            int64_t s = tensor_bytes(bu, u, k), bytes = cur + s;
            int last = k == nt - 1 && u == bu->n_units - 1;
            pos = k == nt - 1 ? bu->unit_bytes[u] : pos + s;
            if (ddp_add(&cur, &cap, next_cap, s) || last) {
                EMIT(u, pos, bytes);
                split |= pos < bu->unit_bytes[u];
            }
        }
    }
    for (int32_t u = 0; !whole_tensors(bu) && u < bu->n_units; u++) {
        int64_t b = bu->unit_bytes[u];
        int last = u == bu->n_units - 1;
        if (b <= cap) {
            cur += b;
            if (cur >= cap || last) {
                EMIT(u, b, cur);
                cur = 0;
                cap = next_cap;
            }
            continue;
        }
        split = 1;
        int64_t x = 0; /* bytes of u already in closed buckets */
        while (cur + (b - x) >= cap) {
            x += cap - cur;
            EMIT(u, x, cap);
            cur = 0;
            cap = next_cap;
        }
        cur += b - x;
        if (last && cur > 0)
            EMIT(u, b, cur);
    }
#undef EMIT
    if (splits)
        *splits = split;
    return n;
}

int
partition_splits(const workload_buckets *bu, const strategy_plan *p)
{
    int split = 0;
    if (!tensor_ready(bu, p))
        return 0;
    pack(bu, p, NULL, &split);
    return split;
}

/* ---- spans -------------------------------------------------------------------------------- */

/* An edge into a participant: its index in the graph's edge list and its source. */
typedef struct in_edge {
    int32_t dst, src;
    int64_t e;
} in_edge;

typedef struct layout {
    int32_t n_units, n_it;
    int32_t *part;         /* ((rank * n_it) + iteration) * n_units + unit -> participant, -1 */
    int32_t *gate;         /* per node: a participant's gating kernel, -1 */
    int32_t *span;         /* scratch: kernels of one span */
    double *cum;           /* scratch: cumulative baseline duration over the span */
    int32_t *prev;         /* per node: the previous node on its resource (dfg_prev_table) */
    int64_t *after_excess; /* per participant slot (group_hosts / 3): the bookkeeping an
                              added bucket brings after its hook block (typical_excess) */
    int64_t n_in;          /* the edges into the participants of the split groups, by */
    struct in_edge *in;    /* participant, then in edge order; NULL until copy_preds */
} layout;

static void
layout_free(layout *L)
{
    free(L->part);
    free(L->gate);
    free(L->span);
    free(L->cum);
    free(L->prev);
    free(L->after_excess);
    free(L->in);
    memset(L, 0, sizeof *L);
}

static int
alive(const dfg *g, int32_t n)
{
    return n >= 0 && !(g->flags[n] & DFG_F_REMOVED);
}

/* Participant of unit u on rank r in iteration it, or -1. */
static int32_t
participant(const layout *L, int32_t r, int32_t it, int32_t u)
{
    if (it < 0 || it >= L->n_it || u < 0 || u >= L->n_units)
        return -1;
    return L->part[((int64_t)r * L->n_it + it) * L->n_units + u];
}

/* A participant slot's bookkeeping after its hook block, by its thread. */
typedef struct slot_excess {
    int32_t res;    /* the thread of its collective call */
    int32_t slot;   /* group_hosts index / 3 */
    int64_t excess; /* the gap of the call after its block above after_gap, or 0 */
} slot_excess;

/* By thread. */
static int
slot_excess_cmp(const void *pa, const void *pb)
{
    const slot_excess *a = pa, *b = pb;
    return (a->res > b->res) - (a->res < b->res);
}

/* Fills out[j] (zeroed here, n_slots of them) for each participant slot j whose hook
 * block has an ordinary call after it (workload.h: block_after): how much longer that
 * call waits than the median gap of its name on its thread (after_gap), the process
 * group's and the reducer's bookkeeping after the collective call; at most the median of
 * that excess over the slots of its thread, so that a call that stalled (a loaded host)
 * does not lend its stall to every bucket tensor partition adds. Returns 0, -1 when out
 * of memory. */
static int
typical_excess(const dfg *g, const workload_buckets *bu, int32_t n_slots, int64_t *out)
{
    slot_excess *v = malloc(sizeof *v * (size_t)(n_slots + 1));
    int64_t *run = malloc(sizeof *run * (size_t)(n_slots + 1));
    int32_t n = 0;
    int rc = v && run ? 0 : -1;
    for (int32_t j = 0; rc == 0 && j < n_slots; j++) {
        int32_t h = bu->block_after ? bu->block_after[j] : -1, call = bu->group_hosts[3 * j];
        out[j] = 0;
        if (h >= 0 && call >= 0 && bu->after_gap[j] >= 0) {
            int64_t x = dfg_gap(g, h) - bu->after_gap[j];
            v[n++] = (slot_excess){g->res[call], j, x > 0 ? x : 0};
        }
    }
    if (rc == 0)
        qsort(v, (size_t)n, sizeof *v, slot_excess_cmp);
    for (int32_t a = 0, b; rc == 0 && a < n; a = b) {
        for (b = a; b < n && v[b].res == v[a].res; b++)
            run[b - a] = v[b].excess;
        int64_t med = (int64_t)sim_median_i64(run, b - a);
        for (int32_t i = a; i < b; i++)
            out[v[i].slot] = v[i].excess < med ? v[i].excess : med;
    }
    free(v);
    free(run);
    return rc;
}

/* Whether node d is a participant of a group whose unit the plan splits. */
static int
split_participant_node(const partition_input *in, int32_t d)
{
    int32_t q = d >= 0 && d < in->n_nodes ? dfg_group(in->g, d) : -1;
    return q >= 0 && q < in->n_groups && in->bu->group_unit[q] >= 0;
}

/* By participant, then by edge index. */
static int
in_edge_cmp(const void *pa, const void *pb)
{
    const in_edge *a = pa, *b = pb;
    if (a->dst != b->dst)
        return (a->dst > b->dst) - (a->dst < b->dst);
    return (a->e > b->e) - (a->e < b->e);
}

/* Fills L->in with the edges into the participants of the split groups, so that
 * copy_preds finds a participant's predecessors without a walk over every edge: one walk
 * per layout, made by the first participant without a gating kernel. Returns 0, -1 when
 * out of memory. */
static int
in_edges_build(const partition_input *in, layout *L)
{
    const dfg *g = in->g;
    int64_t n = 0;
    for (int64_t e = 0; e < g->n_edges; e++)
        n += split_participant_node(in, g->edst[e]);
    L->in = malloc(sizeof *L->in * (size_t)(n + 1));
    if (!L->in)
        return -1;
    for (int64_t e = 0; e < g->n_edges; e++)
        if (split_participant_node(in, g->edst[e]))
            L->in[L->n_in++] = (in_edge){g->edst[e], g->esrc[e], e};
    qsort(L->in, (size_t)L->n_in, sizeof *L->in, in_edge_cmp);
    return 0;
}

static int
layout_build(const partition_input *in, layout *L)
{
    const dfg *g = in->g;
    memset(L, 0, sizeof *L);
    L->n_units = in->bu->n_units;
    for (int32_t r = 0; r < g->n_ranks; r++) {
        const int32_t *bn;
        int32_t nb = dfg_iterations(g, r, &bn);
        if (nb > L->n_it)
            L->n_it = nb;
    }
    size_t np = (size_t)g->n_ranks * (size_t)L->n_it * (size_t)L->n_units;
    L->part = malloc(sizeof *L->part * (np + 1));
    L->gate = malloc(sizeof *L->gate * ((size_t)g->n_nodes + 1));
    L->span = malloc(sizeof *L->span * ((size_t)g->n_nodes + 1));
    L->cum = malloc(sizeof *L->cum * ((size_t)g->n_nodes + 1));
    L->prev = dfg_prev_table(g);
    int32_t n_slots = in->bu->group_hosts_off[in->n_groups] / 3;
    L->after_excess = malloc(sizeof *L->after_excess * (size_t)(n_slots + 1));
    if (!L->part || !L->gate || !L->span || !L->cum || !L->prev || !L->after_excess ||
        typical_excess(g, in->bu, n_slots, L->after_excess) != 0) {
        layout_free(L);
        return -1;
    }
    for (size_t i = 0; i < np; i++)
        L->part[i] = -1;
    for (int32_t n = 0; n < g->n_nodes; n++)
        L->gate[n] = -1;
    for (int32_t q = 0; q < g->n_groups && q < in->n_groups; q++) {
        int32_t u = in->bu->group_unit[q];
        if (u < 0)
            continue;
        for (int32_t c = g->grp_first[q]; c >= 0; c = dfg_next_in_group(g, c)) {
            int32_t it = c < in->n_nodes ? in->iter[c] : -1;
            if (alive(g, c) && it >= 0 && it < L->n_it)
                L->part[((int64_t)dfg_rank(g, c) * L->n_it + it) * L->n_units + u] = c;
        }
    }
    /* the gating kernel: the latest compute-stream kernel with an edge into the
     * participant */
    for (int64_t e = 0; e < g->n_edges; e++) {
        int32_t s = g->esrc[e], d = g->edst[e];
        if (d >= in->n_nodes || s >= in->n_nodes || !alive(g, s) || !alive(g, d))
            continue;
        if (g->kind[d] != DFG_COLL || dfg_group(g, d) < 0 ||
            in->bu->group_unit[dfg_group(g, d)] < 0)
            continue;
        if (g->kind[s] != DFG_KERNEL || !in->on_compute[s] || dfg_rank(g, s) != dfg_rank(g, d))
            continue;
        if (L->gate[d] < 0 || dfg_mend(g, s) > dfg_mend(g, L->gate[d]))
            L->gate[d] = s;
    }
    return 0;
}

/* The gradient-size weighting of a span of n kernels of unit u (partition.h): unit u's
 * layers (workload.h: unit_lo) run their backward one after the other in the span, the
 * last layer first, each over a share of the span's kernels proportional to its forward
 * kernels; a layer's gradient bytes are ready at the end of its last kernel. Fills
 * L->cum with the cumulative bytes; returns 0 (L->cum untouched) when the gradient
 * sizes are unknown. */
static int
span_by_gradients(const partition_input *in, layout *L, int32_t n, int32_t u)
{
    if (!in->bu->layer_grad || !in->bu->unit_lo || !in->layer_nfwd || u < 0 || u >= in->bu->n_units)
        return 0;
    int32_t hi = (u == 0 ? in->n_layers : in->bu->unit_lo[u - 1]) - 1, lo = in->bu->unit_lo[u];
    double tot_nf = 0, tot_b = 0;
    for (int32_t l = lo; l <= hi; l++) {
        tot_nf += in->layer_nfwd[l] > 0 ? in->layer_nfwd[l] : 1;
        tot_b += (double)in->bu->layer_grad[l];
    }
    if (hi < lo || tot_b <= 0)
        return 0;
    for (int32_t i = 0; i < n; i++)
        L->cum[i] = 0;
    double nf = 0;
    for (int32_t l = hi; l >= lo; l--) {
        nf += in->layer_nfwd[l] > 0 ? in->layer_nfwd[l] : 1;
        int32_t e = (int32_t)llround((double)n * nf / tot_nf) - 1;
        e = e < 0 ? 0 : e >= n ? n - 1 : e;
        L->cum[e] += (double)in->bu->layer_grad[l];
    }
    for (int32_t i = 1; i < n; i++)
        L->cum[i] += L->cum[i - 1];
    return 1;
}

/* The index in the span (n kernels, unit u) of the first of u's parameter copies (the
 * span's last k kernels of the gating kernel's name, u holding k parameters: see
 * span_by_params), -1 when the span holds fewer or the parameter sizes are unknown. */
static int32_t
copies_first(const partition_input *in, const layout *L, int32_t n, int32_t u)
{
    const workload_buckets *bu = in->bu;
    if (!bu->param_bytes || !bu->unit_param_off || n <= 0 || u < 0 || u >= bu->n_units)
        return -1;
    int32_t k = bu->unit_param_off[u + 1] - bu->unit_param_off[u];
    int32_t name = in->g->name[L->span[n - 1]], first = n, found = 0;
    while (found < k && first > 0)
        found += in->g->name[L->span[--first]] == name;
    return k > 0 && found == k ? first : -1;
}

/* The parameter-copy anchoring of a span of n kernels of unit u (partition.h: bytes):
 * with the parameter sizes (workload.h: param_bytes) DDP copies each parameter's gradient
 * into its bucket as the gradient becomes ready, and the gating kernel (the span's last)
 * is the copy of the unit's last parameter. When the span holds at least as many kernels
 * of the gating kernel's name as u has parameters (k), the last k of them are the
 * copies, in the order of the parameters (earlier ones of that name, e.g. the loss's
 * scaling at the backward's start, are not), and a parameter's bytes are ready at the
 * end of its copy. Fills L->cum with the cumulative bytes and returns 1; returns 0
 * (L->cum untouched) otherwise. */
static int
span_by_params(const partition_input *in, layout *L, int32_t n, int32_t u)
{
    int32_t first = copies_first(in, L, n, u);
    if (first < 0)
        return 0;
    int32_t lo = in->bu->unit_param_off[u], name = in->g->name[L->span[n - 1]];
    double c = 0;
    for (int32_t i = 0, j = lo; i < n; i++) {
        if (i >= first && in->g->name[L->span[i]] == name)
            c += (double)in->bu->param_bytes[j++];
        L->cum[i] = c;
    }
    return 1;
}

/* Fills L->span and L->cum with the span of participant c (partition.h); returns its
 * length (0: no gating kernel). *by_copies (may be NULL) receives 1 when the bytes are
 * placed by the parameters' copies (span_by_params). */
static int32_t
span_of(const partition_input *in, layout *L, int32_t c, int32_t u, int *by_copies)
{
    const dfg *g = in->g;
    int32_t k = L->gate[c];
    if (k < 0)
        return 0;
    int32_t r = dfg_rank(g, c), it = in->iter[c];
    int32_t prev = participant(L, r, it, u - 1);
    int32_t stop = prev >= 0 ? L->gate[prev] : -1;
    int bwd = in->phase[k] == WL_BACKWARD;
    int32_t n = 0;
    for (int32_t m = k; m >= 0 && m != stop; m = L->prev[m]) {
        if (m >= in->n_nodes || !alive(g, m) || g->kind[m] != DFG_KERNEL)
            continue;
        if (in->iter[m] != it || (bwd && in->phase[m] != WL_BACKWARD))
            break;
        L->span[n++] = m;
    }
    /* launch order, and the cumulative baseline durations */
    for (int32_t i = 0; i < n / 2; i++) {
        int32_t t = L->span[i];
        L->span[i] = L->span[n - 1 - i];
        L->span[n - 1 - i] = t;
    }
    int copies = n > 0 && span_by_params(in, L, n, u);
    if (by_copies)
        *by_copies = copies;
    if (copies || (n > 0 && bwd && span_by_gradients(in, L, n, u)))
        return n;
    double tot = 0;
    for (int32_t i = 0; i < n; i++) {
        double d = (double)in->base_dur[L->span[i]];
        tot += d > 0 ? d : 0;
        L->cum[i] = tot;
    }
    if (tot <= 0) /* no duration to weigh by: one share per kernel */
        for (int32_t i = 0; i < n; i++)
            L->cum[i] = (double)(i + 1);
    return n;
}

/* Index in the span (of length n, L->cum filled) of the kernel at whose end the byte at
 * fraction f of the unit is ready; -1 when the span is empty. */
static int32_t
ready_index(const layout *L, int32_t n, double f)
{
    if (n <= 0)
        return -1;
    double target = f * L->cum[n - 1] * (1.0 - 1e-12);
    int32_t lo = 0, hi = n - 1;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (L->cum[mid] >= target)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* ---- buckets per unit ---------------------------------------------------------------------- */

/* The buckets of plan p per unit, merged on the reference spans: unit u closes
 * mid_pos/mid_bytes[mid_off[u] .. mid_off[u+1]-1] inside its span, then end_bytes[u]
 * at its end (0: none, the unit is folded). */
typedef struct buckets {
    int32_t *mid_off;
    int64_t *mid_pos, *mid_bytes, *end_bytes;
    int32_t count;
} buckets;

static void
buckets_free(buckets *B)
{
    free(B->mid_off);
    free(B->mid_pos);
    free(B->mid_bytes);
    free(B->end_bytes);
    memset(B, 0, sizeof *B);
}

/* The reference participant of unit u: the first rank's, in the first compared
 * iteration that it has (-1 none). */
static int32_t
reference(const partition_input *in, const layout *L, int32_t u)
{
    for (int32_t it = in->iter_first; it < L->n_it; it++)
        for (int32_t r = 0; r < in->g->n_ranks; r++) {
            int32_t c = participant(L, r, it, u);
            if (c >= 0)
                return c;
        }
    return -1;
}

static int
buckets_build(const partition_input *in, const strategy_plan *p, layout *L, buckets *B)
{
    memset(B, 0, sizeof *B);
    int32_t n = pack(in->bu, p, NULL, NULL);
    pchunk *ch = malloc(sizeof *ch * ((size_t)n + 1));
    B->mid_off = calloc((size_t)in->bu->n_units + 1, sizeof *B->mid_off);
    B->mid_pos = malloc(sizeof *B->mid_pos * ((size_t)n + 1));
    B->mid_bytes = malloc(sizeof *B->mid_bytes * ((size_t)n + 1));
    B->end_bytes = calloc((size_t)in->bu->n_units + 1, sizeof *B->end_bytes);
    if (!ch || !B->mid_off || !B->mid_pos || !B->mid_bytes || !B->end_bytes) {
        free(ch);
        buckets_free(B);
        return -1;
    }
    pack(in->bu, p, ch, NULL);
    /* with the tensors' sizes every bucket is DDP's: none merged with another */
    int whole = whole_tensors(in->bu);
    int32_t nm = 0, i = 0;
    for (int32_t u = 0; u < in->bu->n_units; u++) {
        B->mid_off[u] = nm;
        int32_t ref = reference(in, L, u);
        int32_t len = ref >= 0 ? span_of(in, L, ref, u, NULL) : 0;
        int64_t b = in->bu->unit_bytes[u];
        int32_t last_idx = -1;
        for (; i < n && ch[i].unit == u; i++) {
            int32_t j =
                ch[i].pos >= b ? len - 1 : ready_index(L, len, (double)ch[i].pos / (double)b);
            if (ch[i].pos >= b || (!whole && (j < 0 || j == len - 1))) {
                B->end_bytes[u] += ch[i].bytes;
            } else if (!whole && j == last_idx) {
                B->mid_pos[nm - 1] = ch[i].pos;
                B->mid_bytes[nm - 1] += ch[i].bytes;
            } else {
                B->mid_pos[nm] = ch[i].pos;
                B->mid_bytes[nm] = ch[i].bytes;
                nm++;
                last_idx = j;
            }
        }
        B->count += nm - B->mid_off[u] + (B->end_bytes[u] > 0);
    }
    B->mid_off[in->bu->n_units] = nm;
    free(ch);
    return 0;
}

int32_t
partition_bucket_count(const partition_input *in, const strategy_plan *p)
{
    layout L;
    buckets B;
    if (!partition_splits(in->bu, p))
        return 0;
    if (layout_build(in, &L) != 0)
        return -1;
    int rc = buckets_build(in, p, &L, &B);
    layout_free(&L);
    if (rc != 0)
        return -1;
    int32_t n = B.count;
    buckets_free(&B);
    return n;
}

int32_t
partition_units_by_copies(const partition_input *in)
{
    layout L;
    if (layout_build(in, &L) != 0)
        return -1;
    int32_t n = 0;
    for (int32_t u = 0; u < in->bu->n_units; u++) {
        int32_t ref = reference(in, &L, u);
        int copies = 0;
        if (ref >= 0 && span_of(in, &L, ref, u, &copies) > 0)
            n += copies;
    }
    layout_free(&L);
    return n;
}

int
partition_mark_copies(const partition_input *in, uint8_t *mark)
{
    layout L;
    if (layout_build(in, &L) != 0)
        return -1;
    for (int32_t r = 0; r < in->g->n_ranks; r++)
        for (int32_t it = 0; it < L.n_it; it++)
            for (int32_t u = 0; u < L.n_units; u++) {
                int32_t c = participant(&L, r, it, u);
                int32_t n = c >= 0 ? span_of(in, &L, c, u, NULL) : 0;
                int32_t first = copies_first(in, &L, n, u);
                for (int32_t i = first; first >= 0 && i < n; i++)
                    if (in->g->name[L.span[i]] == in->g->name[L.span[n - 1]])
                        mark[L.span[i]] = WL_MICRO_SYNC_ONLY;
            }
    layout_free(&L);
    return 0;
}

int32_t
partition_bucket_bytes(const partition_input *in, const strategy_plan *p, int64_t *out, int32_t max)
{
    layout L;
    buckets B;
    int32_t n = 0;
    if (partition_splits(in->bu, p)) {
        n = layout_build(in, &L) == 0 ? 0 : -1;
        if (n == 0) {
            n = buckets_build(in, p, &L, &B) == 0 ? 0 : -1;
            layout_free(&L);
        }
        for (int32_t u = 0; n >= 0 && u < in->bu->n_units; u++) {
            for (int32_t m = B.mid_off[u]; m < B.mid_off[u + 1]; m++, n++)
                if (n < max)
                    out[n] = B.mid_bytes[m];
            if (B.end_bytes[u] > 0 && n++ < max)
                out[n - 1] = B.end_bytes[u];
        }
        if (n >= 0)
            buckets_free(&B);
    }
    return n;
}

/* ---- the transformed copy ------------------------------------------------------------------ */

/* The (record, wait, collective call) host nodes of participant c of group q, in call
 * order, into h[3] (-1 where absent), and their slots in in->bu->group_hosts into
 * slot[3]. */
static void
unit_hosts(const partition_input *in, int32_t q, int32_t c, int32_t h[3], int32_t slot[3])
{
    const dfg *g = in->g;
    h[0] = h[1] = h[2] = -1;
    for (int32_t i = in->bu->group_hosts_off[q]; i < in->bu->group_hosts_off[q + 1]; i += 3) {
        int32_t call = in->bu->group_hosts[i];
        if (call < 0 || call != g->launch[c])
            continue;
        slot[0] = i + 2;
        slot[1] = i + 1;
        slot[2] = i;
        h[0] = in->bu->group_hosts[i + 2];
        h[1] = in->bu->group_hosts[i + 1];
        h[2] = call;
        return;
    }
}

/* Makes the new participant n wait like participant c when no gating kernel is known:
 * a copy of c's edge predecessors, in the order of the source graph's edges (L->in,
 * built here the first time). Returns 0, -1 when out of memory. */
static int
copy_preds(const partition_input *in, layout *L, dfg *out, int32_t c, int32_t n)
{
    if (!L->in && in_edges_build(in, L) != 0)
        return -1;
    int64_t lo = 0, hi = L->n_in;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (L->in[mid].dst < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    int rc = 0;
    for (int64_t i = lo; rc == 0 && i < L->n_in && L->in[i].dst == c; i++)
        rc = dfg_add_edge(out, L->in[i].src, n);
    return rc;
}

/* Inserts after *ins (updated) copies of the other calls of the hook block (workload.h:
 * group_block) of group q's collective call `call`, each at its typical cost on its
 * thread (at most the call's own), in the block's order. */
static int
copy_block(const partition_input *in, int32_t q, int32_t call, dfg *out, int32_t *ins)
{
    const dfg *g = in->g;
    const workload_buckets *bu = in->bu;
    int rc = 0;
    for (int32_t i = bu->group_block_off[q]; rc == 0 && i < bu->group_block_off[q + 1]; i++) {
        int32_t h = bu->group_block[i];
        if (g->res[h] != g->res[call])
            continue;
        int64_t td = bu->block_dur[i], tg = bu->block_gap[i];
        int64_t dur = dfg_dur(g, h), gap = dfg_gap(g, h);
        int32_t nh =
            dfg_insert_after(out, *ins, DFG_HOST, g->name[h], td >= 0 && td < dur ? td : dur);
        if (nh < 0 || dfg_set_gap(out, nh, tg >= 0 && tg < gap ? tg : gap) != 0)
            rc = -1;
        else
            *ins = nh;
    }
    return rc;
}

/* Gives the call after *ins (the end of an added bucket's copied hook block) on its
 * thread the bookkeeping that follows participant slot j's hook block (layout:
 * after_excess), as folding a bucket takes it away. */
static int
copy_after_gap(const layout *L, int32_t j, dfg *out, int32_t ins)
{
    int32_t nx = out->next_on_res[ins];
    while (nx >= 0 && (out->flags[nx] & DFG_F_REMOVED))
        nx = out->next_on_res[nx];
    int64_t extra = L->after_excess[j];
    return nx >= 0 && extra > 0 ? dfg_set_gap(out, nx, dfg_gap(out, nx) + extra) : 0;
}

/* Inserts the buckets of unit u that close inside its span for participant c (group q,
 * new groups gbase..) into out. */
static int
split_participant(const partition_input *in, layout *L, const buckets *B, int32_t q, int32_t u,
                  int32_t c, int32_t gbase, const int32_t *prev, dfg *out)
{
    const dfg *g = in->g;
    int32_t len = span_of(in, L, c, u, NULL);
    int32_t hosts[3], slot[3];
    unit_hosts(in, q, c, hosts, slot);
    int32_t prev_k = -1, ins = -1;
    /* each bucket goes in right before c: after the node before c, which is c's in the
     * source unless an insertion moved it (then found by the walk) */
    int32_t before_c = prev[c];
    if (before_c < 0 ? dfg_has_prev(out, c) : out->next_on_res[before_c] != c)
        before_c = dfg_prev_on_res(out, c);
    int64_t b = in->bu->unit_bytes[u];
    for (int32_t m = B->mid_off[u]; m < B->mid_off[u + 1]; m++) {
        int32_t j = ready_index(L, len, (double)B->mid_pos[m] / (double)b);
        int32_t k = j >= 0 ? L->span[j] : -1;
        int32_t n = dfg_insert_between(out, before_c, c, DFG_COLL, g->name[c], 0);
        if (n < 0)
            return -1;
        before_c = n;
        if (dfg_set_group(out, n, gbase + (m - B->mid_off[u])) != 0 ||
            dfg_set_bytes(out, n, B->mid_bytes[m]) != 0)
            return -1;
        dfg_set_lat(out, n, dfg_lat(g, c));
        if (k >= 0 ? dfg_add_edge(out, k, n) != 0 : copy_preds(in, L, out, c, n) != 0)
            return -1;
        /* the hook's calls, right after the launch of the kernel that made the bytes */
        int32_t at = k >= 0 ? g->launch[k] : -1;
        out->launch[n] = at >= 0 ? at : g->launch[c];
        if (at < 0)
            continue;
        if (k != prev_k || ins < 0)
            ins = at;
        prev_k = k;
        for (int i = 0; i < 3; i++) {
            int32_t h = hosts[i];
            if (h < 0)
                continue;
            /* a copy costs what such a call typically costs on its thread, or what the
             * plan left of the unit's own call when that is less (a captured step's 0):
             * the unit's call may have waited (a full launch queue, a stalled host) */
            int64_t td = in->bu->host_dur[slot[i]], tg = in->bu->host_gap[slot[i]];
            int32_t nh = dfg_insert_after(out, ins, DFG_HOST, g->name[h],
                                          td >= 0 && td < dfg_dur(g, h) ? td : dfg_dur(g, h));
            if (nh < 0 ||
                dfg_set_gap(out, nh, tg >= 0 && tg < dfg_gap(g, h) ? tg : dfg_gap(g, h)) != 0)
                return -1;
            ins = nh;
            if (i == 2)
                out->launch[n] = nh;
        }
        if (hosts[2] >= 0 && (copy_block(in, q, hosts[2], out, &ins) != 0 ||
                              copy_after_gap(L, slot[2] / 3, out, ins) != 0))
            return -1;
    }
    return 0;
}

int
partition_build(const partition_input *in, const strategy_plan *p, dfg *out, int32_t *n_buckets)
{
    const dfg *g = in->g;
    layout L;
    buckets B;
    if (layout_build(in, &L) != 0) {
        dfg_free(out);
        return -1;
    }
    if (buckets_build(in, p, &L, &B) != 0) {
        layout_free(&L);
        dfg_free(out);
        return -1;
    }
    const int32_t *prev = L.prev; /* g's, as layout_build took it */
    if (dfg_copy(out, g) != 0) {
        dfg_free(out);
        buckets_free(&B);
        layout_free(&L);
        return -1;
    }
    /* room for every node the buckets add at once (a participant, its three host calls
     * and its hook block's copies each), not the doubling of one node at a time, and as
     * many edges (the participant's from its gating kernel and the calls' order; more
     * grow the arrays) */
    int64_t extra = 0;
    for (int32_t q = 0; q < g->n_groups && q < in->n_groups; q++) {
        int32_t u = in->bu->group_unit[q];
        int64_t each = u < 0
                           ? 0
                           : (int64_t)(B.mid_off[u + 1] - B.mid_off[u]) *
                                 (4 + in->bu->group_block_off[q + 1] - in->bu->group_block_off[q]);
        for (int32_t c = each > 0 ? g->grp_first[q] : -1; c >= 0; c = dfg_next_in_group(g, c))
            extra += each;
    }
    int rc = dfg_reserve(out, (int64_t)out->n_nodes + extra, out->n_edges + extra);
    for (int32_t q = 0; q < g->n_groups && q < in->n_groups && rc == 0; q++) {
        int32_t u = in->bu->group_unit[q];
        if (u < 0)
            continue;
        int32_t gbase = out->n_groups;
        for (int32_t m = B.mid_off[u]; m < B.mid_off[u + 1] && rc == 0; m++) {
            int32_t k = dfg_add_group(out, g->grp_op[q], g->grp_nranks[q], B.mid_bytes[m],
                                      g->grp_comm[q], g->grp_seq[q], -1);
            if (k < 0)
                rc = -1;
            else
                out->grp_dur[k] = costmodel_predict(in->bu->model, in->bu->coll_op,
                                                    in->bu->coll_nranks, B.mid_bytes[m]);
        }
        for (int32_t c = g->grp_first[q]; c >= 0 && rc == 0; c = dfg_next_in_group(g, c))
            if (alive(g, c) && c < in->n_nodes)
                rc = split_participant(in, &L, &B, q, u, c, gbase, prev, out);
        if (rc != 0)
            break;
        if (B.end_bytes[u] > 0) {
            out->grp_bytes[q] = B.end_bytes[u];
            out->grp_dur[q] = costmodel_predict(in->bu->model, in->bu->coll_op, in->bu->coll_nranks,
                                                B.end_bytes[u]);
            continue;
        }
        out->grp_dur[q] = 0;
        workload_drop_bucket_hosts(out, in->bu, q);
    }
    if (rc == 0 && workload_unhook_folded(out, in->bu, in->n_groups) < 0)
        rc = -1;
    if (n_buckets)
        *n_buckets = B.count;
    buckets_free(&B);
    layout_free(&L);
    if (rc != 0)
        dfg_free(out);
    return rc;
}
