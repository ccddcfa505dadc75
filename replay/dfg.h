/*
 * dfg.h: the global dataflow graph of a distributed job (prefix dfg_).
 *
 * Nodes are host API calls (one resource per host thread), device operations (one
 * resource per stream) and device participants of collectives, which belong to a
 * collective group spanning ranks. Storage is a struct of arrays indexed by int32 node
 * ids; no per-node allocation.
 *
 * Dependencies, and how the simulator (sim.h) reads them:
 *   - resource order: every resource runs its nodes in the order of the chain
 *     res_first -> next_on_res -> ...; a node follows the previous one on its resource
 *     after its gap (dfg_gap) in ns (host: measured framework time between calls; stream:
 *     the measured idle time between back-to-back device operations);
 *   - launch: a device node whose launch[n] >= 0 starts no earlier than lat[n] ns after
 *     its launching host node STARTED (a blocking call may wait for its own work);
 *   - edges (dfg_add_edge, CSR after dfg_finalize): finish-to-start. For a host node a
 *     predecessor delays its END (the call has begun and blocks: stream/event/device
 *     synchronisation, blocking memcpy); for a device node it delays its start (event
 *     record -> stream wait);
 *   - wake-up: a host node flagged DFG_F_WAKEUP was woken by another thread (its thread
 *     waited on a condition variable, a queue, a join): its edge predecessors (the calls
 *     that preceded the wake-up on other threads) delay its START instead of its end. It
 *     starts at max(end of the previous node on its thread, ends of its predecessors) +
 *     gap[n], gap[n] being the wake-up latency. A node is never both WAKEUP and BLOCKING
 *     or QUEUED (a woken blocking or queued call gets a zero-length WAKEUP node before
 *     it, see dfg_add_wakeup);
 *   - launch queue: a launch call flagged DFG_F_QUEUED has an edge from the device op
 *     that had to finish before its queue had room for it (build.h); the edge delays
 *     the call's end like a blocking call's, and the call's dur is its cost after the
 *     wait;
 *   - collective groups: each participant is ready when its own dependencies are met;
 *     the group starts its transfer when the last participant is ready and every
 *     participant ends grp_dur[g] ns later, less its share of the transfer it left before
 *     the last participant in the measurement (ranks leave a collective at different
 *     times), where the group was measured with every rank of its communicator (sim.c);
 *     in a graph of rank classes, the share of its class's last member to leave
 *     (dfg_fold).
 *
 * A node's duration (dfg_dur) is intrinsic: for a blocking host call, the time it took
 * after what it waited for had finished. The duration and the gap are stored as 32 bits,
 * and as a 64-bit value in a side table where they do not fit (under 0, or 4.29 s or
 * more): read them with dfg_dur and dfg_gap, write them with dfg_set_dur and dfg_set_gap.
 *
 * Times mstart/mend are the measured ones, aligned across ranks, in ns relative to the
 * job's earliest event (0 for nodes a transformation created). The end is stored as a
 * 32-bit length from the start, and as a 64-bit time in a side table where the length
 * does not fit (dfg_mend, dfg_set_mend): set mstart first, then the end.
 *
 * A host node has no launch latency: its lat slot holds where its launched devices begin
 * in the finalized launched list (a device needs no such slot), so read and write the
 * latency with dfg_lat and dfg_set_lat, and walk a host's launches with
 * dfg_launched_first and dfg_launched_next.
 *
 * Mutation (for the optimizer): dfg_clone, dfg_remove_node, dfg_merge_nodes,
 * dfg_insert_after, dfg_add_edge, dfg_merge_groups, dfg_set_dur, dfg_set_gap, dfg_set_lat,
 * plain stores into the grp_* arrays but grp_first (dfg_set_group, dfg_merge_groups). Any
 * structural change marks the graph unfinalized; sim_run finalizes it again (O(nodes + edges)).
 */
#ifndef DPRO_REPLAY_DFG_H
#define DPRO_REPLAY_DFG_H

#include <stddef.h>
#include <stdint.h>

enum dfg_node_kind {
    DFG_HOST = 1,   /* host API call (CUDA runtime/driver, NCCL host call) */
    DFG_KERNEL = 2, /* device kernel */
    DFG_MEMCPY = 3, /* device copy */
    DFG_MEMSET = 4, /* device memset */
    DFG_COLL = 5,   /* device participant of a collective group */
};

enum dfg_node_flag {
    DFG_F_REMOVED = 1,   /* removed by a transformation; skipped everywhere */
    DFG_F_BLOCKING = 2,  /* host call that waits for device work (has predecessors) */
    DFG_F_SYNTHETIC = 4, /* created by a transformation, no measured times */
    DFG_F_WAKEUP = 8,    /* host call woken by another thread: edges delay its start */
    DFG_F_QUEUED = 16,   /* launch call bound by a launch queue (build.h): its edges (from
                          * the op it must wait for to make room) delay its end, as a
                          * BLOCKING call's do, but it synchronises nothing */
};

/* Host calls whose edge predecessors delay their end rather than their start. */
#define DFG_F_END_EDGES (DFG_F_BLOCKING | DFG_F_QUEUED)

enum dfg_res_kind {
    DFG_RES_THREAD = 1,
    DFG_RES_STREAM = 2,
};

typedef struct dfg_strtab {
    char *pool;
    size_t pool_len, pool_cap;
    uint32_t *offset; /* id -> offset in pool; id 0 is "" */
    uint32_t n, cap;
    uint32_t *slots; /* open-addressing hash of ids */
    uint32_t n_slots;
} dfg_strtab;

/* A sparse per-node table of 64-bit values: the nodes that have one, ids ascending. */
typedef struct dfg_sparse {
    int32_t n, cap;
    int32_t *node;
    int64_t *val;
} dfg_sparse;

/* Index of node n in t, or -(insertion point) - 1 when n has no entry. Inline: the
 * simulator looks up dfg.leave in its loop (dfg_leave). */
static inline int32_t
dfg_sparse_find(const dfg_sparse *t, int32_t n)
{
    int32_t lo = 0, hi = t->n;
    if (hi > 0 && t->node[hi - 1] < n)
        lo = hi; /* the common case: n above every entry */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (t->node[mid] < n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->node[lo] == n ? lo : -lo - 1;
}

/* log2 of the nodes a block of dfg.succ_blk indexes the edges of. */
#define DFG_SUCC_SHIFT 6

/* dfg.mlen of a node whose measured end is in dfg.mend_wide: before its start, or 2^32 - 1
 * ns (4.29 s) or more after it. */
#define DFG_MLEN_WIDE UINT32_MAX

/* dfg.dur (dfg.gap) of a node whose duration (gap) is in dfg.dur_wide (dfg.gap_wide):
 * negative, or 2^32 - 1 ns (4.29 s) or more (dfg_field_get). */
#define DFG_FIELD_WIDE UINT32_MAX

typedef struct dfg {
    /* ---- nodes ---- */
    int32_t n_nodes, cap_nodes;
    uint8_t *kind;
    uint8_t *flags;
    int32_t *res;         /* resource of the node */
    int32_t *name;        /* string id (dfg_name) */
    uint32_t *dur;        /* intrinsic duration, ns, or DFG_FIELD_WIDE (dfg_dur, dfg_set_dur) */
    uint32_t *gap;        /* ns after the previous node on the resource (or after 0), or
                           * DFG_FIELD_WIDE (dfg_gap, dfg_set_gap) */
    int32_t *lat;         /* device: ns after its launch node started (dfg_lat); host: its
                           * launched list's first index, or -1 (dfg_launched_first) */
    int32_t *launch;      /* device: launching host node, or -1 */
    int32_t *next_on_res; /* the resource's order (the previous node: dfg_prev_on_res) */
    int64_t *mstart;      /* measured start, aligned, ns */
    uint32_t *mlen;       /* measured end - mstart, ns, or DFG_MLEN_WIDE (dfg_mend) */
    dfg_sparse mend_wide; /* the measured ends of the nodes whose mlen is DFG_MLEN_WIDE */
    dfg_sparse dur_wide;  /* the durations of the nodes whose dur is DFG_FIELD_WIDE */
    dfg_sparse gap_wide;  /* the gaps of the nodes whose gap is DFG_FIELD_WIDE */
    dfg_sparse grp_part;  /* each collective participant's group (high 32 bits, dfg_group)
                           * and next participant in its group's list (low 32 bits, -1
                           * ending it: dfg_next_in_group): the other nodes pay nothing */
    dfg_sparse bytes;     /* bytes moved or touched (copies, collectives), of the nodes
                           * that move data (dfg_bytes, dfg_set_bytes) */
    dfg_sparse leave;     /* a graph of rank classes (leave_classes): how long before its
                           * group's last participant each participant's class left in the
                           * measurement, its last member to leave, ns (dfg_fold; none: 0) */
    int leave_classes;    /* 1: the groups' early leavings are those of dfg.leave, the graph
                           * being folded; 0: each participant's own (dfg_group_last_mend) */

    /* ---- dependency edges (src finishes before dst; see above) ---- */
    int64_t n_edges, cap_edges;
    int32_t *esrc, *edst;

    /* ---- built by dfg_finalize ---- */
    int finalized;
    int32_t *succ_blk; /* (n_nodes >> DFG_SUCC_SHIFT) + 2: index of the first edge from each
                        * block of nodes, the edges sorted by source (dfg_succ_first; they
                        * must fit in int32) */
    int32_t *succ;     /* edst itself: the sorted edge list holds each node's successors in a
                        * row */
    int32_t *part_blk; /* (n_nodes >> DFG_SUCC_SHIFT) + 2: index in grp_part of the first
                        * entry of each block of nodes, so that a lookup (dfg_part_group,
                        * dfg_next_in_group) searches its block's entries only */
    int32_t *launched; /* the device nodes the host nodes launched, by host node: each
                        * host's in a row (dfg_launched_first, dfg_launched_next) */
    int32_t n_launched;

    /* ---- resources ---- */
    int32_t n_res, cap_res;
    uint8_t *res_kind;
    int32_t *res_rank;
    uint64_t *res_id; /* thread id or stream handle */
    int32_t *res_first, *res_last;
    int32_t *res_label; /* string id: thread name or "stream N" */

    /* ---- collective groups ---- */
    int32_t n_groups, cap_groups;
    uint8_t *grp_op;      /* enum dpro_coll_op */
    int32_t *grp_nranks;  /* ranks of the communicator (for the cost model) */
    int32_t *grp_members; /* participants present in the graph (dfg_finalize) */
    int32_t *grp_first;   /* first participant node */
    int64_t *grp_bytes;   /* payload bytes, as the cost model takes them */
    int64_t *grp_dur;     /* transfer time the simulator uses, ns */
    int64_t *grp_mdur;    /* measured transfer time (end - last arrival), ns; -1 none */
    uint64_t *grp_comm, *grp_seq;
    int64_t grp_wait_ns;     /* groups of grp_wait_nranks ranks start their transfer this
                              * long after their last arrival (replay_rank_wait) */
    int32_t grp_wait_nranks; /* 0: no such wait */

    /* ---- ranks ---- */
    int32_t n_ranks;    /* rank indices 0 .. n_ranks-1 (a missing rank has no nodes) */
    int32_t *iter_off;  /* n_ranks + 1: iteration boundary nodes of each rank */
    int32_t *iter_node; /* nodes whose END closes each iteration, in order */
    int32_t n_iter_nodes;

    /* ---- rank classes (dfg_fold; NULL when every rank is explicit) ---- */
    int32_t *rank_rep;            /* n_ranks: the representative whose nodes stand for rank r (r
                                   * itself for a representative and for an explicit rank); the
                                   * lowest rank of its class */
    int32_t *rank_weight;         /* n_ranks: ranks the class of representative r stands for (1 for
                                   * an explicit rank, 0 for a folded one or a missing one) */
    uint8_t *rank_apart;          /* n_ranks: why the class of representative r is a class of its
                                   * own (enum dfg_apart) */
    int64_t job_nodes, job_edges; /* sizes of the explicit graph a folded one was made of */
    int32_t job_groups;

    dfg_strtab strings;
} dfg;

/* Why a rank class stands apart from the classes of lower ranks (dfg.rank_apart). */
enum dfg_apart {
    DFG_APART_FIRST = 0,      /* the first class */
    DFG_APART_STRUCTURE = 1,  /* its operation sequence differs from every earlier class */
    DFG_APART_TIMING = 2,     /* same operations, times beyond the fold tolerance */
    DFG_APART_STRAGGLER = 3,  /* a straggler: never folded */
    DFG_APART_UNFOLDABLE = 4, /* its nodes depend on other ranks' nodes directly, or it
                               * has no measured window to be compared by */
};

/* Initialises an empty graph for n_ranks ranks. Returns 0, or -1 when out of memory
 * (the graph is then empty but valid for dfg_free). */
int dfg_init(dfg *g, int32_t n_ranks);

/* Frees everything the graph holds; g may be reused with dfg_init. */
void dfg_free(dfg *g);

/* Deep copy of src into dst (dst uninitialised). Returns 0 or -1 (out of memory; dst is
 * then freed). The copy is independent: transform it and simulate it without touching
 * src. */
int dfg_clone(dfg *dst, const dfg *src);

/* dfg_clone into dst, a graph dfg_clone or dfg_copy made (or zeroed), its node and edge
 * arrays reused (realloc to at least their present capacity: a copy made again and again,
 * one per evaluation, takes no fresh memory for them; the sparse side tables and the
 * string table are cloned afresh each time). Returns 0 or -1 (out of memory; dst is then
 * freed, and zeroed). */
int dfg_copy(dfg *dst, const dfg *src);

/* Makes *view a graph that shares finalized src's structure, names and measured times and
 * owns copies of its timings dur and gap (with their side tables), lat and grp_dur: a
 * replay of src with other timings (the typical-duration replay) at 12 bytes a node
 * instead of a whole dfg_clone. Only those timings may be written through view (dur and
 * gap with dfg_set_dur and dfg_set_gap), nothing may
 * change it structurally (sim_run reads it as it is, finalized), src must stay unchanged while view
 * lives, and view is freed with dfg_timing_view_free, never dfg_free. Returns 0, or -1 (out of
 * memory, or src not finalized; view is then empty). */
int dfg_timing_view(dfg *view, const dfg *src);

/* Gives view (dfg_timing_view of src, its timings written since) src's timings again, and its
 * wait at the collectives (grp_wait_ns, grp_wait_nranks), in
 * the memory view holds: one view made once and reset before each of several replays
 * takes no fresh memory for them. Returns 0, or -1 when out of memory (a side table of
 * wide values could not grow; view's timings are then partly src's, partly its own:
 * reset it again or free it). */
int dfg_timing_view_reset(dfg *view, const dfg *src);

/* Frees the timings view owns (dfg_timing_view) and empties it; src is untouched. */
void dfg_timing_view_free(dfg *view);

/* Interns text and returns its string id (>= 1), or -1 when out of memory. */
int32_t dfg_intern(dfg *g, const char *text);

/* Text of a string id ("" for 0 or an unknown id). Valid until the next dfg_intern. */
const char *dfg_name(const dfg *g, int32_t id);

/* Grows the node and edge arrays to exactly `nodes` nodes and `edges` edges in total
 * where they hold fewer (no regrowth, and no doubling's slack, when the size is known);
 * never shrinks them. Returns 0 or -1. */
int dfg_reserve(dfg *g, int64_t nodes, int64_t edges);

/* The node before n on its resource, -1 when n is the first or removed. Walks the
 * resource's chain from its first node: O(nodes before n); a pass over many nodes takes
 * dfg_prev_table instead. */
int32_t dfg_prev_on_res(const dfg *g, int32_t n);

/* Every node's previous node on its resource (dfg_prev_on_res), n_nodes entries (at least
 * one), in an array the caller frees; NULL when out of memory. O(nodes + resources). It
 * holds until the next structural change of g. */
int32_t *dfg_prev_table(const dfg *g);

/* The end of node n in a side table (dfg_mend when mlen[n] is DFG_MLEN_WIDE). */
int64_t dfg_mend_wide(const dfg *g, int32_t n);

/* In a graph of rank classes, how long before its group's last participant the class of
 * participant n left (its last member to leave), ns (dfg.leave; 0 when it has no entry). */
static inline int64_t
dfg_leave(const dfg *g, int32_t n)
{
    int32_t i = dfg_sparse_find(&g->leave, n);
    return i >= 0 ? g->leave.val[i] : 0;
}

/* Sets node n's measured end (after its measured start: mstart[n] must hold its final
 * value), as a 32-bit length when it is at most 4.29 s after the start, else in a side
 * table. Returns 0, or -1 when out of memory (the end is then unchanged). */
int dfg_set_mend(dfg *g, int32_t n, int64_t end);

/* The value of node n in side table t, 0 when it has none: the wide half of a 32-bit node
 * field (dfg_dur, dfg_gap). O(log of t's entries). */
int64_t dfg_wide_get(const dfg_sparse *t, int32_t n);

/* Sets the value of node n in side table t to v and field[n] to the field's mark of a wide
 * value, DFG_FIELD_WIDE (dfg_field_set). Returns 0, or -1 when out of memory (both
 * unchanged). */
int dfg_wide_set(uint32_t *field, dfg_sparse *t, int32_t n, int64_t v);

/* Every node's measured end (dfg_mend), n_nodes entries (at least one), in an array the
 * caller frees; NULL when out of memory. For the passes that take the measured times as
 * arrays (sim_timeline_measured, contention_overlaps). */
int64_t *dfg_mend_array(const dfg *g);

/* Bytes node n moves or touches (a copy, a memset, a collective), 0 for a node that moves
 * none. O(log of the nodes that move data). */
int64_t dfg_bytes(const dfg *g, int32_t n);

/* Sets the bytes node n moves. Appending in ascending node order costs O(1), a node below
 * the table's last one O(log + the entries after it). Returns 0, or -1 when out of memory
 * (n keeps its bytes). */
int dfg_set_bytes(dfg *g, int32_t n, int64_t bytes);

/* Adds a resource (host thread or stream) of a rank; label is a string id (0: none).
 * Returns its index, or -1 when out of memory. */
int32_t dfg_add_resource(dfg *g, int kind, int32_t rank, uint64_t id, int32_t label);

/* Appends a node at the end of resource res's order. All timing fields are zero, launch
 * and group -1; set launch directly, the others with their setters (dfg_set_dur,
 * dfg_set_lat, dfg_set_group, ...). Returns the node id, or -1 when out of memory. */
int32_t dfg_add_node(dfg *g, int kind, int32_t res, int32_t name);

/* Inserts a new node right after node `after` on after's resource (flag SYNTHETIC,
 * measured times copied from `after`'s end). Returns its id, or -1 when out of memory (a
 * node whose duration the side table could not take then stays, with duration 0). */
int32_t dfg_insert_after(dfg *g, int32_t after, int kind, int32_t name, int64_t dur);

/* Inserts a new node right before node `before` on its resource (flag SYNTHETIC,
 * measured start and end at before's measured start). Returns its id, or -1 as
 * dfg_insert_after. */
int32_t dfg_insert_before(dfg *g, int32_t before, int kind, int32_t name, int64_t dur);

/* dfg_insert_before where the caller knows prev, the node before `before` on its
 * resource (dfg_prev_on_res(g, before); -1 when `before` is the first): no walk of the
 * resource's chain, so that many insertions before one node cost O(1) each. Returns as
 * dfg_insert_before. */
int32_t dfg_insert_between(dfg *g, int32_t prev, int32_t before, int kind, int32_t name,
                           int64_t dur);

/* Makes host node h wait for the end of node waker (another thread's call) before it
 * starts, with a wake-up latency of `latency` ns: h gets the edge waker -> h and the
 * WAKEUP flag and its gap becomes the latency; a BLOCKING or QUEUED h instead gets a
 * zero-length WAKEUP node "(wake-up)" right before it, which takes the edge and the
 * latency (h's gap becomes 0). Returns 0 or -1 (out of memory, h not a host node). */
int dfg_add_wakeup(dfg *g, int32_t waker, int32_t h, int64_t latency);

/* Adds a finish-to-start edge src -> dst. Duplicates are harmless. Returns 0 or -1. */
int dfg_add_edge(dfg *g, int32_t src, int32_t dst);

/* Adds a collective group. Returns its index, or -1 when out of memory. grp_dur is set
 * to grp_mdur (when >= 0) until someone assigns a modelled duration. */
int32_t dfg_add_group(dfg *g, int op, int32_t nranks, int64_t bytes, uint64_t comm, uint64_t seq,
                      int64_t measured_dur);

/* Makes device node n a participant of group grp (kind becomes DFG_COLL), first in its list.
 * Returns 0, or -1 when out of memory (n is then unchanged). */
int dfg_set_group(dfg *g, int32_t n, int32_t grp);

/* Makes device node n ready to join a group later (dfg_set_group) at O(log) cost and without
 * allocating, as the nodes built in order are: a group formed after the graph (a matched
 * point-to-point transfer) joins nodes out of order. Returns 0 or -1 (out of memory). */
int dfg_group_reserve(dfg *g, int32_t n);

/* Node n's entry in grp_part (its group in the high 32 bits, its next participant in the
 * low), -1 (both -1) when it has none: a search of every entry (dfg_part_entry). */
int64_t dfg_part_entry_all(const dfg *g, int32_t n);

/* Removes node n: its edge predecessors become predecessors of its edge successors, and
 * so does the previous node on its resource (n's end implied that one's), devices it
 * launched are re-attached to the previous host node on its resource (or lose their
 * launch dependency), its gap is added to the next node's gap on the resource, and
 * iteration boundaries on it move to the previous node on the resource (the next one if
 * there is none). A WAKEUP node passes its wake-up (predecessors and flag) to the next
 * node on its thread (through a "(wake-up)" node when that one is BLOCKING or QUEUED).
 * Returns 0, or -1 when out of memory. */
int dfg_remove_node(dfg *g, int32_t n);

/* Merges node b into node a (same resource): a's duration becomes the sum of both
 * (callers then set the fused cost they model), b's edges and launched devices are
 * moved to a, and b is removed (a takes b's BLOCKING and QUEUED flags). When a is
 * WAKEUP and b BLOCKING or QUEUED, a's wake-up first moves to a "(wake-up)" node before
 * a; b's wake-up edges otherwise join a's edges as they are (they delay a's end, or its
 * start if a is WAKEUP). Returns 0, or -1
 * (different resources, removed nodes, out of memory). */
int dfg_merge_nodes(dfg *g, int32_t a, int32_t b);

/* Merges collective group b into group a: on every rank, b's participant is merged
 * into a's (dfg_merge_nodes) and the bytes are summed. grp_dur[a] is left for the
 * caller to re-estimate (costmodel_predict). Returns 0 or -1. */
int dfg_merge_groups(dfg *g, int32_t a, int32_t b);

/* Sets the iteration boundary nodes of rank r (copied): iteration i runs from the end
 * of nodes[i] to the end of nodes[i + 1] (e.g. the host synchronisation that closes
 * each training step). Returns 0 or -1. */
int dfg_set_iterations(dfg *g, int32_t r, const int32_t *nodes, int32_t n);

/* Number of iteration boundaries of rank r and a pointer to them (those of its
 * representative when r is folded: dfg_rank_rep). */
int32_t dfg_iterations(const dfg *g, int32_t r, const int32_t **nodes);

/* Device nodes host node h launched (dfg_launched_first); g must be finalized. */
int32_t dfg_launched_count(const dfg *g, int32_t h);

/* Builds the CSR successor lists, launched lists and group member counts; drops edges touching
 * removed nodes and duplicate edges, and gives the node and edge arrays' unused capacity back.
 * Idempotent. Returns 0 or -1 (out of memory, or more than INT32_MAX edges). */
int dfg_finalize(dfg *g);

/* Live (not removed) node count. */
int32_t dfg_live_nodes(const dfg *g);

/* Copies into dst (uninitialised) the nodes of the ranks r of src with rep[r] == r (the
 * representatives), with their resources, edges, iterations and the groups they join
 * (a group with none of them is dropped), node order kept; the other ranks keep no
 * nodes: rank r is then seen through its representative rep[r] (dfg_iterations and
 * dfg_rank_rep map it), which must be the lowest rank with that representative. weight
 * (n_ranks entries) and apart (enum dfg_apart, may be NULL) are copied into
 * dst->rank_weight and dst->rank_apart; dst->job_* take src's sizes. Each kept
 * participant of a group whose leavings src measured (dfg_group_last_mend) gets in
 * dst->leave how long before the group's last participant the last of its class's
 * members to leave left (at most the measured transfer): the members being alike, their
 * next operations take the same time, and the last of them is the one the next
 * collective waits for. src must be finalized. Returns 0 or -1 (out of memory; dst is
 * then freed). */
int dfg_fold(dfg *dst, const dfg *src, const int32_t *rep, const int32_t *weight,
             const uint8_t *apart);

/* Node, edge and group counts of the job's explicit graph: g's own when g is not folded,
 * else those of the graph it was folded from. g must be finalized. */
void dfg_job_sizes(const dfg *g, int64_t *nodes, int64_t *edges, int32_t *groups);

/* Bytes the graph's arrays hold (their allocated capacity): per node in *node_bytes
 * (the node arrays over n_nodes, the finalized CSR and launched lists included) and per
 * edge in *edge_bytes (the edge list and the successor lists over n_edges); either may
 * be NULL. For the benchmarks: the figure a compact node is judged by. */
void dfg_memory(const dfg *g, double *node_bytes, double *edge_bytes);

/* The rank whose nodes stand for rank r (r itself when g is not folded). */
static inline int32_t
dfg_rank_rep(const dfg *g, int32_t r)
{
    return g->rank_rep && r >= 0 && r < g->n_ranks ? g->rank_rep[r] : r;
}

/* Ranks that rank r's nodes stand for: 1 when g is not folded. */
static inline int32_t
dfg_rank_weight(const dfg *g, int32_t r)
{
    return g->rank_weight && r >= 0 && r < g->n_ranks ? g->rank_weight[r] : 1;
}

/* 1 when node n follows another node on its resource (dfg_prev_on_res(g, n) >= 0), in
 * O(1). */
static inline int
dfg_has_prev(const dfg *g, int32_t n)
{
    return !(g->flags[n] & DFG_F_REMOVED) && g->res_first[g->res[n]] != n;
}

/* Node n's measured end, ns (see dfg_set_mend). */
static inline int64_t
dfg_mend(const dfg *g, int32_t n)
{
    return g->mlen[n] != DFG_MLEN_WIDE ? g->mstart[n] + (int64_t)g->mlen[n] : dfg_mend_wide(g, n);
}

/* Node n's value of a 32-bit field with a side table t for the wide values (dur, gap). */
static inline int64_t
dfg_field_get(const uint32_t *field, const dfg_sparse *t, int32_t n)
{
    return field[n] != DFG_FIELD_WIDE ? (int64_t)field[n] : dfg_wide_get(t, n);
}

/* Sets node n's value v of such a field: as 32 bits when it is 0 to 2^32 - 2 (4.29 s in ns),
 * else in t (an entry left in t for n is then no longer read). A value in the 32-bit range
 * may also be stored into field[n] directly. Returns 0, or -1 when out of memory (the value
 * is then unchanged). */
static inline int
dfg_field_set(uint32_t *field, dfg_sparse *t, int32_t n, int64_t v)
{
    int rc = 0;
    if (v >= 0 && v < (int64_t)DFG_FIELD_WIDE)
        field[n] = (uint32_t)v;
    else
        rc = dfg_wide_set(field, t, n, v);
    return rc;
}

/* Node n's intrinsic duration, ns. */
static inline int64_t
dfg_dur(const dfg *g, int32_t n)
{
    return dfg_field_get(g->dur, &g->dur_wide, n);
}

/* Sets node n's duration (dfg_field_set). Returns 0, or -1 when out of memory. */
static inline int
dfg_set_dur(dfg *g, int32_t n, int64_t dur)
{
    return dfg_field_set(g->dur, &g->dur_wide, n, dur);
}

/* Node n's gap after the previous node on its resource, ns. */
static inline int64_t
dfg_gap(const dfg *g, int32_t n)
{
    return dfg_field_get(g->gap, &g->gap_wide, n);
}

/* Sets node n's gap (dfg_field_set). Returns 0, or -1 when out of memory. */
static inline int
dfg_set_gap(dfg *g, int32_t n, int64_t gap)
{
    return dfg_field_set(g->gap, &g->gap_wide, n, gap);
}

/* Device node n's latency after its launch node started, ns; 0 for a host node. */
static inline int32_t
dfg_lat(const dfg *g, int32_t n)
{
    return g->kind[n] != DFG_HOST ? g->lat[n] : 0;
}

/* Sets device node n's latency after its launch node started (a host node has none: its
 * slot is its launched list's, and the call leaves it). */
static inline void
dfg_set_lat(dfg *g, int32_t n, int32_t lat)
{
    if (g->kind[n] != DFG_HOST)
        g->lat[n] = lat;
}

/* Index in g->launched of the first device node that node h launched, -1 when it launched
 * none (or is not a host node). g must be finalized. */
static inline int32_t
dfg_launched_first(const dfg *g, int32_t h)
{
    return g->kind[h] == DFG_HOST ? g->lat[h] : -1;
}

/* The index after i (from dfg_launched_first or this) in host node h's launched list, -1
 * at its end: the list holds h's launches in a row, in node order. */
static inline int32_t
dfg_launched_next(const dfg *g, int32_t h, int32_t i)
{
    return i + 1 < g->n_launched && g->launch[g->launched[i + 1]] == h ? i + 1 : -1;
}

/* Index in g->succ of node n's first successor (g finalized): n's successors are succ[i] for
 * i from there while dfg_succ_more(g, n, i). O(log of the edges from n's block of nodes). */
static inline int64_t
dfg_succ_first(const dfg *g, int32_t n)
{
    int64_t lo = g->succ_blk[n >> DFG_SUCC_SHIFT], hi = g->succ_blk[(n >> DFG_SUCC_SHIFT) + 1];
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (g->esrc[mid] < n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether g->succ[i] is still a successor of node n (see dfg_succ_first). */
static inline int
dfg_succ_more(const dfg *g, int32_t n, int64_t i)
{
    return i < g->n_edges && g->esrc[i] == n;
}

/* Node n's entry in grp_part, -1 when it has none (dfg_part_entry_all). In a finalized graph,
 * a search of the entries of n's block of nodes (part_blk) that can hold n's: the block's
 * entries are distinct nodes in order, so n's is at most off entries after the block's first
 * and at least 2^DFG_SUCC_SHIFT - off before its end, off being n's place in the block. Inline:
 * the simulator looks up every participant it runs. */
static inline int64_t
dfg_part_entry(const dfg *g, int32_t n)
{
    int64_t e = -1;
    if (g->finalized) {
        int32_t b = n >> DFG_SUCC_SHIFT, off = n & ((1 << DFG_SUCC_SHIFT) - 1);
        int32_t lo = g->part_blk[b], hi = g->part_blk[b + 1];
        int32_t first = hi - (1 << DFG_SUCC_SHIFT) + off, last = lo + off + 1;
        lo = first > lo ? first : lo;
        hi = last < hi ? last : hi;
        while (lo < hi) {
            int32_t mid = lo + (hi - lo) / 2;
            if (g->grp_part.node[mid] < n)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < g->grp_part.n && g->grp_part.node[lo] == n)
            e = g->grp_part.val[lo];
    } else {
        e = dfg_part_entry_all(g, n);
    }
    return e;
}

/* The group of node n's entry in grp_part, -1 when it has none or is reserved
 * (dfg_group_reserve); dfg_group reads it for the nodes that can be participants only. */
static inline int32_t
dfg_part_group(const dfg *g, int32_t n)
{
    return (int32_t)(uint32_t)((uint64_t)dfg_part_entry(g, n) >> 32);
}

/* The participant after p in its group's list (from grp_first), -1 at its end. O(log of the
 * participants in p's block of nodes; of them all before finalize). */
static inline int32_t
dfg_next_in_group(const dfg *g, int32_t p)
{
    return (int32_t)(uint32_t)dfg_part_entry(g, p);
}

/* The measured end of group q's last participant to leave, or -1 where the group does
 * not give each participant's leaving: not measured (a group a transformation made), a
 * participant without a measured span, or not every rank of its communicator in the graph
 * (a graph of rank classes, a what-if's rank count). g must be finalized. Inline: the
 * simulator asks it of every group it runs. */
static inline int64_t
dfg_group_last_mend(const dfg *g, int32_t q)
{
    int64_t last = g->grp_mdur[q] <= 0 || g->grp_members[q] != g->grp_nranks[q] ? -2 : -1;
    for (int32_t p = g->grp_first[q]; p >= 0 && last >= -1; p = dfg_next_in_group(g, p)) {
        int64_t e = dfg_mend(g, p);
        last = e <= g->mstart[p] ? -2 : e > last ? e : last;
    }
    return last >= 0 ? last : -1;
}

/* Node n's collective group, -1 for a node that takes part in none. O(log of the
 * participants in n's block of nodes; of them all before finalize) for a DFG_COLL node, O(1)
 * for another: the simulator asks it of every device node. */
static inline int32_t
dfg_group(const dfg *g, int32_t n)
{
    return g->kind[n] == DFG_COLL ? dfg_part_group(g, n) : -1;
}

/* Rank of a node (through its resource). */
static inline int32_t
dfg_rank(const dfg *g, int32_t n)
{
    return g->res_rank[g->res[n]];
}

/* Whether group q of a graph of rank classes (dfg.leave_classes) still has the leavings
 * dfg_fold gave its participants: measured, and its participants' classes as many ranks
 * as its communicator (not so after a what-if's rank count). Returns 1 or 0. */
static inline int
dfg_group_leave_classes(const dfg *g, int32_t q)
{
    int64_t ranks = 0;
    for (int32_t p = g->grp_first[q]; p >= 0; p = dfg_next_in_group(g, p))
        ranks += dfg_rank_weight(g, dfg_rank(g, p));
    return g->grp_mdur[q] > 0 && ranks == g->grp_nranks[q];
}

#endif
