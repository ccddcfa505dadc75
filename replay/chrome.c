/* chrome.c: Chrome trace export (see chrome.h). */
#include "chrome.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hmap.h"
#include "json_writer.h"
#include "kernels.h"
#include "threadsched.h"

#define TID_ITER 1
#define TID_CP 2         /* the critical path's track */
#define TID_BASE 10      /* resource q has tid TID_BASE + q */
#define TID_NVTX 1000000 /* NVTX track of resource q: TID_NVTX + q */
/* The shortest interval between two scheduler samples given a share of its own (us). */
#define CHROME_SCHED_MIN_US 10000

typedef struct window {
    int64_t *t0, *t1; /* per rank */
} window;

static void
window_of(const replay *rp, const dfg *g, sim_timeline tl, const chrome_options *opt, window *w)
{
    for (int32_t r = 0; r < g->n_ranks; r++) {
        w->t0[r] = INT64_MIN;
        w->t1[r] = INT64_MAX;
        if (opt->iter_first < 0)
            continue;
        const int32_t *b;
        int32_t nb = dfg_iterations(g, r, &b);
        /* iteration N runs from the end of boundary N-1 to the end of boundary N */
        if (opt->iter_first >= 1 && opt->iter_first - 1 < nb && b[opt->iter_first - 1] >= 0)
            w->t0[r] = tl.end[b[opt->iter_first - 1]];
        if (opt->iter_last < nb && b[opt->iter_last] >= 0)
            w->t1[r] = tl.end[b[opt->iter_last]];
    }
}

static inline int
in_window(const window *w, int32_t r, int64_t t)
{
    return t >= w->t0[r] && t < w->t1[r];
}

static double
us(int64_t ns)
{
    return (double)ns / 1000.0;
}

static void
meta_event(json_writer *j, const char *what, int32_t pid, int64_t tid, const char *key,
           const char *sval, int64_t ival, int is_int)
{
    json_begin_object(j);
    json_kv_string(j, "ph", "M");
    json_kv_string(j, "name", what);
    json_kv_int(j, "pid", pid);
    json_kv_int(j, "tid", tid);
    json_key(j, "args");
    json_begin_object(j);
    if (is_int)
        json_kv_int(j, key, ival);
    else
        json_kv_string(j, key, sval);
    json_end_object(j);
    json_end_object(j);
}

static const char *
kind_cat(int k)
{
    switch (k) {
    case DFG_HOST:
        return "api";
    case DFG_KERNEL:
        return "kernel";
    case DFG_MEMCPY:
        return "memcpy";
    case DFG_MEMSET:
        return "memset";
    case DFG_COLL:
        return "collective";
    default:
        return "op";
    }
}

static void
flow(json_writer *j, const char *ph, uint64_t id, const char *cat, int32_t pid, int64_t tid,
     int64_t ts)
{
    json_begin_object(j);
    json_kv_string(j, "ph", ph);
    json_kv_uint(j, "id", id);
    json_kv_string(j, "cat", cat);
    json_kv_string(j, "name", cat);
    json_kv_int(j, "pid", pid);
    json_kv_int(j, "tid", tid);
    json_kv_double(j, "ts", us(ts));
    if (ph[0] == 'f')
        json_kv_string(j, "bp", "e");
    json_end_object(j);
}

/* Digits of v as json_double writes a whole number (a minus sign counted). */
static uint64_t
int_bytes(int64_t v)
{
    uint64_t n = v < 0 ? 2 : 1;
    for (uint64_t a = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v; a >= 10; a /= 10)
        n++;
    return n;
}

/* A time of ns nanoseconds as json_double writes it in microseconds (%.17g): a whole
 * number; a fraction of eighths exactly (.5, .25, .125 ...); else 17 significant digits
 * and a point, a leading "0." under 1 us. */
static uint64_t
time_bytes(int64_t ns)
{
    int64_t frac = ns % 1000 < 0 ? -(ns % 1000) : ns % 1000;
    if (frac == 0)
        return int_bytes(ns / 1000);
    if (frac % 125 == 0)
        return int_bytes(ns / 1000) + 1 + (frac % 500 == 0 ? 1 : frac % 250 == 0 ? 2 : 3);
    return ns > -1000 && ns < 1000 ? 19 : 18;
}

/* Bytes of v as json_double writes it. */
static uint64_t
double_bytes(double v)
{
    int n = !isfinite(v)                                ? 4
            : v == (double)(int64_t)v && fabs(v) < 1e15 ? snprintf(NULL, 0, "%lld", (long long)v)
                                                        : snprintf(NULL, 0, "%.17g", v);
    return n > 0 ? (uint64_t)n : 0;
}

/* Rank r's traced threads as the scheduler served them (meta thread_sched, measured
 * only): per thread, a counter track "thread TID (name)" with, for each interval between
 * two of its samples (at least CHROME_SCHED_MIN_US long: a shorter one joins the next) that
 * starts within w, the share of the interval the thread spent on
 * a CPU and runnable but waiting for one (%), at the interval's start (none for an
 * interval over which the time or either counter goes backwards). Writes them to j
 * (NULL: writes nothing) and adds their estimated size to *bytes. Returns 0, or -1 out of
 * memory; a trace without the row, or with a malformed one (dpro-info --threads says
 * where), gives no track. */
static int
export_thread_sched(const job_rank *jr, int32_t r, int64_t shift, const window *w, json_writer *j,
                    uint64_t *bytes)
{
    const char *text = job_rank_meta_local(jr, JOB_LOCAL_META_THREAD_SCHED);
    thread_sched_set set = {NULL, 0, NULL};
    int parsed = text ? thread_sched_parse(text, &set) : 0;
    const dpro_thread_info *names = NULL;
    size_t nnames = set.n ? dpro_reader_threads(jr->reader, &names) : 0;
    for (size_t k = 0; k < set.n; k++) {
        const thread_sched *th = &set.thread[k];
        const char *tname = NULL;
        for (size_t i = 0; i < nnames && !tname; i++)
            if (names[i].tid == th->tid)
                tname = names[i].name;
        char track[160];
        snprintf(track, sizeof track, "thread %u%s%s%s", th->tid, tname ? " (" : "",
                 tname ? tname : "", tname ? ")" : "");
        /* a: the interval's first sample; one shorter than CHROME_SCHED_MIN_US (the
         * collector's spacing; its last sample comes at any distance) joins the next:
         * schedstat moves a running thread's figures at the scheduler's ticks, so a share
         * over a shorter interval is mostly that lag */
        for (size_t i = 1, first = 0; i < th->n; i++) {
            const thread_sched_sample *a = &th->sample[first], *b = &th->sample[i];
            int64_t ts = a->t_us * 1000 + shift, dt = b->t_us - a->t_us;
            if (dt > 0 && dt < CHROME_SCHED_MIN_US)
                continue;
            first = i;
            /* time or a counter going backwards: no share to draw */
            if (dt <= 0 || b->cpu_us < a->cpu_us || b->wait_us < a->wait_us || !in_window(w, r, ts))
                continue;
            /* to 0.1 %: a sample's us do not resolve finer over 10 ms */
            double on = round(1000.0 * (double)(b->cpu_us - a->cpu_us) / (double)dt) / 10.0;
            double waiting = round(1000.0 * (double)(b->wait_us - a->wait_us) / (double)dt) / 10.0;
            /* the object below, its keys and punctuation 80 bytes with the comma after it */
            *bytes += 80 + strlen(track) + int_bytes(r) + time_bytes(ts) + double_bytes(on) +
                      double_bytes(waiting);
            if (!j)
                continue;
            json_begin_object(j);
            json_kv_string(j, "ph", "C");
            json_kv_string(j, "name", track);
            json_kv_int(j, "pid", r);
            json_kv_double(j, "ts", us(ts));
            json_key(j, "args");
            json_begin_object(j);
            json_kv_double(j, "on a CPU %", on);
            json_kv_double(j, "waiting for a CPU %", waiting);
            json_end_object(j);
            json_end_object(j);
        }
    }
    thread_sched_set_free(&set);
    return parsed == -1 ? -1 : 0;
}

/* NVTX ranges and memory counters from the events themselves, and the threads' scheduler
 * counters (measured only). */
static void
export_markers(const replay *rp, const dfg *g, const window *w, json_writer *j)
{
    const job *jb = &rp->job;
    for (int32_t r = 0; r < jb->n_ranks && r < g->n_ranks; r++) {
        const job_rank *jr = &jb->ranks[r];
        if (!jr->reader)
            continue;
        int64_t shift = (rp->align.offset_ns ? rp->align.offset_ns[r] : 0) - rp->time_origin;
        hmap thread_res, addr;
        if (hmap_init(&thread_res, 16) != 0)
            continue;
        if (hmap_init(&addr, 256) != 0) {
            hmap_free(&thread_res);
            continue;
        }
        for (int32_t q = 0; q < g->n_res; q++)
            if (g->res_rank[q] == r && g->res_kind[q] == DFG_RES_THREAD)
                hmap_put(&thread_res, g->res_id[q], q);
        int64_t *sizes = NULL;
        int32_t n_sizes = 0, cap_sizes = 0;
        int64_t in_use = 0;
        for (size_t i = 0; i < jr->n_events; i++) {
            const job_event *e = &jr->events[i];
            int64_t ts = (int64_t)e->start_ns + shift;
            if (e->kind == DPRO_KIND_MARKER && e->subkind == DPRO_MARK_RANGE) {
                int32_t q = hmap_get(&thread_res, e->thread, -1);
                if (!in_window(w, r, ts) || q < 0)
                    continue;
                int64_t te = e->end_ns > e->start_ns ? (int64_t)e->end_ns + shift : ts;
                json_begin_object(j);
                json_kv_string(j, "ph", "X");
                json_kv_string(j, "cat", "nvtx");
                json_kv_string(j, "name", dpro_reader_string(jr->reader, e->name));
                json_kv_int(j, "pid", r);
                json_kv_int(j, "tid", TID_NVTX + q);
                json_kv_double(j, "ts", us(ts));
                json_kv_double(j, "dur", us(te - ts));
                json_end_object(j);
            } else if (e->kind == DPRO_KIND_MEMORY && e->value == DPRO_MEMSPACE_DEVICE) {
                if (e->subkind == DPRO_MEM_ALLOC) {
                    in_use += (int64_t)e->bytes;
                    if (n_sizes == cap_sizes) {
                        int32_t c = cap_sizes ? cap_sizes * 2 : 256;
                        int64_t *x = realloc(sizes, (size_t)c * sizeof *x);
                        if (!x)
                            break;
                        sizes = x;
                        cap_sizes = c;
                    }
                    sizes[n_sizes] = (int64_t)e->bytes;
                    hmap_put(&addr, e->address, n_sizes++);
                } else if (e->subkind == DPRO_MEM_FREE) {
                    int32_t k = hmap_get(&addr, e->address, -1);
                    int64_t sz = e->bytes ? (int64_t)e->bytes : k >= 0 ? sizes[k] : 0;
                    in_use -= sz;
                    if (k >= 0)
                        hmap_put(&addr, e->address, -1);
                } else {
                    continue;
                }
                if (!in_window(w, r, ts))
                    continue;
                json_begin_object(j);
                json_kv_string(j, "ph", "C");
                json_kv_string(j, "name", "device memory in use");
                json_kv_int(j, "pid", r);
                json_kv_double(j, "ts", us(ts));
                json_key(j, "args");
                json_begin_object(j);
                json_kv_int(j, "bytes", in_use);
                json_end_object(j);
                json_end_object(j);
            }
        }
        free(sizes);
        hmap_free(&thread_res);
        hmap_free(&addr);
        uint64_t ignored = 0;
        (void)export_thread_sched(jr, r, shift, w, j, &ignored); /* none: as the rows above */
    }
}

/* Process and thread names and their order: a process per rank, a track for the
 * iterations, one per thread and stream, and (measured) one per thread's NVTX ranges. */
static void
export_metadata(const replay *rp, const dfg *g, int simulated, json_writer *j)
{
    for (int32_t r = 0; r < g->n_ranks; r++) {
        if (r < rp->job.n_ranks && !rp->job.ranks[r].reader)
            continue;
        char pname[200], folded[64] = "";
        const char *host = r < rp->job.n_ranks ? rp->job.ranks[r].host : NULL;
        if (dfg_rank_rep(g, r) != r) /* no tracks of its own: its class's are its own */
            snprintf(folded, sizeof folded, " [folded: as rank %d]", dfg_rank_rep(g, r));
        snprintf(pname, sizeof pname, "rank %d%s%s%s%s%s", r, host ? " (" : "", host ? host : "",
                 host ? ")" : "", simulated ? " [simulated]" : "", folded);
        meta_event(j, "process_name", r, 0, "name", pname, 0, 0);
        meta_event(j, "process_sort_index", r, 0, "sort_index", NULL, r, 1);
        meta_event(j, "thread_name", r, TID_ITER, "name", "iterations", 0, 0);
        meta_event(j, "thread_sort_index", r, TID_ITER, "sort_index", NULL, 0, 1);
    }
    for (int32_t q = 0; q < g->n_res; q++) {
        int32_t r = g->res_rank[q];
        meta_event(j, "thread_name", r, TID_BASE + q, "name", dfg_name(g, g->res_label[q]), 0, 0);
        meta_event(j, "thread_sort_index", r, TID_BASE + q, "sort_index", NULL,
                   (g->res_kind[q] == DFG_RES_THREAD ? 100 : 10000) + q, 1);
        if (g->res_kind[q] == DFG_RES_THREAD && !simulated) {
            char nm[200];
            snprintf(nm, sizeof nm, "NVTX %s", dfg_name(g, g->res_label[q]));
            meta_event(j, "thread_name", r, TID_NVTX + q, "name", nm, 0, 0);
            meta_event(j, "thread_sort_index", r, TID_NVTX + q, "sort_index", NULL, 50 + q, 1);
        }
    }
}

/* One slice per iteration of each rank, between consecutive boundaries. */
static void
export_iterations(const dfg *g, sim_timeline tl, const window *w, json_writer *j)
{
    for (int32_t r = 0; r < g->n_ranks; r++) {
        const int32_t *b;
        int32_t nb = dfg_iterations(g, r, &b);
        for (int32_t k = 0; k + 1 < nb; k++) {
            if (b[k] < 0 || b[k + 1] < 0 || tl.end[b[k]] < 0 || tl.end[b[k + 1]] < 0)
                continue;
            if (!in_window(w, r, tl.end[b[k]]))
                continue;
            char nm[64];
            snprintf(nm, sizeof nm, "iteration %d", k + 1);
            json_begin_object(j);
            json_kv_string(j, "ph", "X");
            json_kv_string(j, "cat", "iteration");
            json_kv_string(j, "name", nm);
            json_kv_int(j, "pid", r);
            json_kv_int(j, "tid", TID_ITER);
            json_kv_double(j, "ts", us(tl.end[b[k]]));
            json_kv_double(j, "dur", us(tl.end[b[k + 1]] - tl.end[b[k]]));
            json_end_object(j);
        }
    }
}

/* The critical path of s (on tl's timeline), a slice per piece, on its rank's process. */
/* The names kernels show in the export, by string id: shown[id] is the name of the
 * kernels named id as reports show them (kernels_display_names over the kernel names of
 * g's live nodes), NULL where no kernel has that name; it points into buf. */
typedef struct shown_kernels {
    const char **shown;
    uint32_t n; /* ids in shown */
    kernels_name_buf *buf;
} shown_kernels;

/* Fills *sk for g. Returns 0, or -1 out of memory (*sk then holds nothing to free). */
static int
shown_kernels_init(const dfg *g, shown_kernels *sk)
{
    uint32_t ns = g->strings.n > 0 ? g->strings.n : 1;
    int32_t *slot = malloc(ns * sizeof *slot), k = 0;
    const char **names = malloc(ns * sizeof *names);
    sk->shown = calloc(ns, sizeof *sk->shown);
    sk->n = ns;
    sk->buf = NULL;
    int rc = slot && names && sk->shown ? 0 : -1;
    for (uint32_t i = 0; rc == 0 && i < ns; i++)
        slot[i] = -1;
    for (int32_t n = 0; rc == 0 && n < g->n_nodes; n++) {
        int32_t id = g->name[n];
        if (g->kind[n] == DFG_KERNEL && !(g->flags[n] & DFG_F_REMOVED) && id >= 0 &&
            (uint32_t)id < ns && slot[id] < 0) {
            slot[id] = k;
            names[k++] = dfg_name(g, id);
        }
    }
    if (rc == 0 && (sk->buf = malloc((size_t)(k > 0 ? k : 1) * sizeof *sk->buf)) == NULL)
        rc = -1;
    if (rc == 0)
        rc = kernels_display_names(names, (size_t)k, sk->buf);
    for (uint32_t i = 0; rc == 0 && i < ns; i++)
        sk->shown[i] = slot[i] >= 0 ? sk->buf[slot[i]].text : NULL;
    if (rc != 0) {
        free(sk->shown);
        free(sk->buf);
        sk->shown = NULL;
        sk->buf = NULL;
    }
    free(slot);
    free(names);
    return rc;
}

/* Frees what shown_kernels_init allocated (sk zeroed, or filled by it). */
static void
shown_kernels_free(shown_kernels *sk)
{
    free(sk->shown);
    free(sk->buf);
}

/* The name node n of g shows: a kernel's as reports show it (sk), else as traced. */
static const char *
shown_name(const dfg *g, const shown_kernels *sk, int32_t n)
{
    int32_t id = g->name[n];
    const char *k =
        g->kind[n] == DFG_KERNEL && id >= 0 && (uint32_t)id < sk->n ? sk->shown[id] : NULL;
    return k ? k : dfg_name(g, g->name[n]);
}

static void
export_critical_path(const dfg *g, const shown_kernels *sk, const replay_summary *s,
                     const window *w, json_writer *j)
{
    int32_t r = s->cp_rank;
    if (r < 0 || !s->n_cp_pieces)
        return;
    meta_event(j, "thread_name", r, TID_CP, "name", "critical path", 0, 0);
    meta_event(j, "thread_sort_index", r, TID_CP, "sort_index", NULL, 1, 1);
    for (int32_t i = 0; i < s->n_cp_pieces; i++) {
        const replay_cp_piece *p = &s->cp_pieces[i];
        if (!in_window(w, r, p->start_ns))
            continue;
        json_begin_object(j);
        json_kv_string(j, "ph", "X");
        json_kv_string(j, "cat", "critical_path");
        const char *name =
            p->op ? (*p->op ? p->op : "(no op recorded)") : shown_name(g, sk, p->node);
        json_kv_string(j, "name", name);
        json_kv_int(j, "pid", r);
        json_kv_int(j, "tid", TID_CP);
        json_kv_double(j, "ts", us(p->start_ns));
        json_kv_double(j, "dur", us(p->dur_ns));
        json_key(j, "args");
        json_begin_object(j);
        json_kv_string(j, "class", replay_cp_class_name(p->cls));
        json_kv_int(j, "node", p->node);
        if (!p->op && strcmp(name, dfg_name(g, g->name[p->node])) != 0) /* as export_nodes */
            json_kv_string(j, "full_name", dfg_name(g, g->name[p->node]));
        json_end_object(j);
        json_end_object(j);
    }
}

/* One slice per node (collectives with their wait and transfer), and a flow from each
 * device op's launch call to it. */
static void
export_nodes(const dfg *g, const shown_kernels *sk, sim_timeline tl, const window *w,
             json_writer *j)
{
    for (int32_t n = 0; n < g->n_nodes; n++) {
        if ((g->flags[n] & DFG_F_REMOVED) || tl.start[n] < 0)
            continue;
        int32_t r = dfg_rank(g, n);
        if (!in_window(w, r, tl.start[n]))
            continue;
        json_begin_object(j);
        json_kv_string(j, "ph", "X");
        json_kv_string(j, "cat", kind_cat(g->kind[n]));
        const char *name = shown_name(g, sk, n), *traced = dfg_name(g, g->name[n]);
        json_kv_string(j, "name", name);
        json_kv_int(j, "pid", r);
        json_kv_int(j, "tid", TID_BASE + g->res[n]);
        json_kv_double(j, "ts", us(tl.start[n]));
        json_kv_double(j, "dur", us(tl.end[n] > tl.start[n] ? tl.end[n] - tl.start[n] : 0));
        json_key(j, "args");
        json_begin_object(j);
        if (strcmp(name, traced) != 0) /* a kernel shown otherwise: its name as traced */
            json_kv_string(j, "full_name", traced);
        int64_t moved = dfg_bytes(g, n);
        if (moved)
            json_kv_int(j, "bytes", moved);
        if (dfg_group(g, n) >= 0) {
            int32_t q = dfg_group(g, n);
            char hex[32];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)g->grp_comm[q]);
            json_kv_string(j, "comm", hex);
            json_kv_uint(j, "seq", g->grp_seq[q]);
            int64_t a = tl.grp_arrival[q];
            json_kv_double(j, "wait_us", us(a > tl.start[n] ? a - tl.start[n] : 0));
            json_kv_double(j, "transfer_us", us(tl.end[n] > a ? tl.end[n] - a : 0));
        }
        if (g->flags[n] & DFG_F_WAKEUP)
            json_kv_bool(j, "woken_by_thread", 1);
        json_kv_int(j, "node", n);
        json_end_object(j);
        json_end_object(j);
        int32_t l = g->launch[n];
        if (l >= 0 && tl.start[l] >= 0) {
            flow(j, "s", (uint64_t)n + 1, "launch", r, TID_BASE + g->res[l], tl.start[l]);
            flow(j, "f", (uint64_t)n + 1, "launch", r, TID_BASE + g->res[n], tl.start[n]);
        }
    }
}

/* Collectives across ranks: flows from the first member to each other one (send/recv
 * exchanges, category "p2p": from the sender of the exchange's first pair). */
static void
export_group_flows(const dfg *g, sim_timeline tl, const window *w, json_writer *j)
{
    for (int32_t q = 0; q < g->n_groups; q++) {
        int32_t f = g->grp_first[q];
        if (f < 0 || tl.start[f] < 0 || !in_window(w, dfg_rank(g, f), tl.start[f]))
            continue;
        const char *cat = g->grp_op[q] == DPRO_COLL_SEND ? "p2p" : "collective";
        uint32_t k = 0;
        for (int32_t p = dfg_next_in_group(g, f); p >= 0; p = dfg_next_in_group(g, p)) {
            if (tl.start[p] < 0)
                continue;
            uint64_t id = (1ULL << 40) + ((uint64_t)q << 12) + (k++ & 0xfff);
            flow(j, "s", id, cat, dfg_rank(g, f), TID_BASE + g->res[f], tl.start[f]);
            flow(j, "f", id, cat, dfg_rank(g, p), TID_BASE + g->res[p], tl.start[p]);
        }
    }
}

/* Wake-ups between host threads: flows from the waker's end to the woken call's start. */
static void
export_wakeups(const dfg *g, sim_timeline tl, const window *w, json_writer *j)
{
    for (int64_t e = 0; e < g->n_edges; e++) {
        int32_t a = g->esrc[e], b = g->edst[e];
        if (a < 0 || b < 0 || !(g->flags[b] & DFG_F_WAKEUP) || (g->flags[a] & DFG_F_REMOVED) ||
            (g->flags[b] & DFG_F_REMOVED) || tl.end[a] < 0 || tl.start[b] < 0 ||
            !in_window(w, dfg_rank(g, b), tl.start[b]))
            continue;
        uint64_t id = (2ULL << 40) + (uint64_t)e;
        /* inside the waker's slice, so that viewers bind the arrow to it */
        int64_t at = tl.end[a] > tl.start[a] ? tl.end[a] - 1 : tl.end[a];
        flow(j, "s", id, "wake-up", dfg_rank(g, a), TID_BASE + g->res[a], at);
        flow(j, "f", id, "wake-up", dfg_rank(g, b), TID_BASE + g->res[b], tl.start[b]);
    }
}

/* ---- the size estimate: what each part of chrome_export writes, in bytes, about ---- */

/* Node n's name in a slice: the name shown and, where it differs, args.full_name. */
static uint64_t
slice_name_bytes(const dfg *g, const shown_kernels *sk, int32_t n)
{
    const char *name = shown_name(g, sk, n), *traced = dfg_name(g, g->name[n]);
    return strlen(name) + (strcmp(name, traced) != 0 ? 15 + strlen(traced) : 0);
}

/* A node's slice (export_nodes: its keys, numbers and names), its launch flow and a
 * wake-up's flow (at its start). */
static uint64_t
estimate_node(const dfg *g, const shown_kernels *sk, sim_timeline tl, int32_t n)
{
    int64_t tid = int_bytes(TID_BASE + g->res[n]), pid = int_bytes(dfg_rank(g, n));
    int64_t dur = tl.end[n] > tl.start[n] ? tl.end[n] - tl.start[n] : 0;
    uint64_t bytes = 74 + strlen(kind_cat(g->kind[n])) + pid + tid + int_bytes(n) +
                     time_bytes(tl.start[n]) + time_bytes(dur) + slice_name_bytes(g, sk, n);
    if (dfg_bytes(g, n))
        bytes += 9 + int_bytes(dfg_bytes(g, n));
    if (dfg_group(g, n) >= 0)
        bytes += 100;                                     /* comm, seq, wait_us, transfer_us */
    if (g->launch[n] >= 0 && tl.start[g->launch[n]] >= 0) /* s at the launch, f here */
        bytes += 2 * 68 + 9 + 2 * (int_bytes(n + 1) + pid) + tid +
                 int_bytes(TID_BASE + g->res[g->launch[n]]) + time_bytes(tl.start[g->launch[n]]) +
                 time_bytes(tl.start[n]);
    if (g->flags[n] & DFG_F_WAKEUP)
        bytes += 23 + 2 * (68 + 14 + pid + tid + 18) + 9; /* woken_by_thread; 2 flows */
    return bytes;
}

/* The measured export's NVTX ranges, memory and scheduler counters (export_markers), added
 * to *bytes. Returns 0, or -1 out of memory. */
static int
estimate_markers(const replay *rp, const dfg *g, const window *w, uint64_t *bytes_out)
{
    uint64_t bytes = 0;
    int rc = 0;
    for (int32_t r = 0; rc == 0 && r < rp->job.n_ranks && r < g->n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        int64_t shift = (rp->align.offset_ns ? rp->align.offset_ns[r] : 0) - rp->time_origin;
        if (jr->reader)
            rc = export_thread_sched(jr, r, shift, w, NULL, &bytes);
        for (size_t i = 0; jr->reader && i < jr->n_events; i++) {
            const job_event *e = &jr->events[i];
            if (!in_window(w, r, (int64_t)e->start_ns + shift))
                continue;
            if (e->kind == DPRO_KIND_MARKER && e->subkind == DPRO_MARK_RANGE)
                bytes += 99 + strlen(dpro_reader_string(jr->reader, e->name));
            else if (e->kind == DPRO_KIND_MEMORY && e->value == DPRO_MEMSPACE_DEVICE &&
                     (e->subkind == DPRO_MEM_ALLOC || e->subkind == DPRO_MEM_FREE))
                bytes += 100;
        }
    }
    *bytes_out += rc == 0 ? bytes : 0;
    return rc;
}

/* The critical path's slices (export_critical_path). */
static uint64_t
estimate_critical_path(const dfg *g, const shown_kernels *sk, const replay_summary *s,
                       const window *w)
{
    uint64_t bytes = 0;
    for (int32_t i = 0; s->cp_rank >= 0 && i < s->n_cp_pieces; i++) {
        const replay_cp_piece *p = &s->cp_pieces[i];
        if (!in_window(w, s->cp_rank, p->start_ns))
            continue;
        bytes += 99 + int_bytes(s->cp_rank) + time_bytes(p->start_ns) + time_bytes(p->dur_ns) +
                 strlen(replay_cp_class_name(p->cls)) + int_bytes(p->node) +
                 (p->op ? strlen(p->op) + (*p->op ? 0 : 16) : slice_name_bytes(g, sk, p->node));
    }
    return bytes;
}

int
chrome_estimate_bytes(const replay *rp, const dfg *g, const sim_result *sim,
                      const chrome_options *opt, uint64_t *bytes)
{
    int rc = -1;
    int64_t *garr = malloc((size_t)(g->n_groups > 0 ? g->n_groups : 1) * sizeof *garr);
    window w = {malloc((size_t)(g->n_ranks + 1) * sizeof(int64_t)),
                malloc((size_t)(g->n_ranks + 1) * sizeof(int64_t))};
    int64_t *mend = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *mend);
    shown_kernels sk = {NULL, 0, NULL};
    *bytes = 0;
    if (garr && w.t0 && w.t1 && mend && shown_kernels_init(g, &sk) == 0) {
        int simulated = opt->simulated && sim;
        sim_timeline tl = simulated ? sim_timeline_of(sim) : sim_timeline_measured(g, garr, mend);
        window_of(rp, g, tl, opt, &w);
        *bytes = 300 * (uint64_t)g->n_ranks + 225 * (uint64_t)g->n_res; /* the metadata */
        for (int32_t n = 0; n < g->n_nodes; n++) {
            if ((g->flags[n] & DFG_F_REMOVED) || tl.start[n] < 0 ||
                !in_window(&w, dfg_rank(g, n), tl.start[n]))
                continue;
            *bytes += estimate_node(g, &sk, tl, n);
            if (dfg_group(g, n) >= 0 && g->grp_first[dfg_group(g, n)] != n)
                *bytes += 200; /* the flow from the group's first member */
        }
        for (int32_t r = 0; r < g->n_ranks; r++) { /* the iterations' slices */
            const int32_t *b;
            int32_t nb = dfg_iterations(g, r, &b);
            *bytes += nb > 1 ? 100 * (uint64_t)(nb - 1) : 0;
        }
        if (simulated && opt->cp)
            *bytes += estimate_critical_path(g, &sk, opt->cp, &w);
        rc = simulated ? 0 : estimate_markers(rp, g, &w, bytes);
        if (rc != 0)
            *bytes = 0;
    }
    shown_kernels_free(&sk);
    free(garr);
    free(mend);
    free(w.t0);
    free(w.t1);
    return rc;
}

int32_t
chrome_folded_ranks(const replay *rp, const dfg *g)
{
    int32_t n = 0;
    for (int32_t r = 0; r < g->n_ranks; r++)
        n += (r >= rp->job.n_ranks || rp->job.ranks[r].reader) && dfg_rank_rep(g, r) != r;
    return n;
}

int
chrome_export(const replay *rp, const dfg *g, const sim_result *sim, const chrome_options *opt,
              FILE *out)
{
    int rc = -1;
    int64_t *garr = malloc((size_t)(g->n_groups > 0 ? g->n_groups : 1) * sizeof *garr);
    window w = {malloc((size_t)(g->n_ranks + 1) * sizeof(int64_t)),
                malloc((size_t)(g->n_ranks + 1) * sizeof(int64_t))};
    int64_t *mend = malloc((size_t)(g->n_nodes > 0 ? g->n_nodes : 1) * sizeof *mend);
    shown_kernels sk = {NULL, 0, NULL};
    if (garr && w.t0 && w.t1 && mend && shown_kernels_init(g, &sk) == 0) {
        int simulated = opt->simulated && sim;
        sim_timeline tl = simulated ? sim_timeline_of(sim) : sim_timeline_measured(g, garr, mend);
        window_of(rp, g, tl, opt, &w);
        json_writer jw, *j = &jw;
        json_init(j, out, 0);
        json_begin_object(j);
        json_kv_string(j, "displayTimeUnit", "ns");
        json_key(j, "otherData");
        json_begin_object(j);
        json_kv_string(j, "producer", "dpro-export");
        json_kv_string(j, "timeline", simulated ? "simulated" : "measured");
        json_kv_string(j, "job_id", rp->job.job_id ? rp->job.job_id : "");
        int32_t folded = chrome_folded_ranks(rp, g);
        if (folded > 0) /* unfolded exports stay as they were */
            json_kv_int(j, "folded_ranks", folded);
        json_end_object(j);
        json_key(j, "traceEvents");
        json_begin_array(j);
        export_metadata(rp, g, simulated, j);
        export_iterations(g, tl, &w, j);
        export_nodes(g, &sk, tl, &w, j);
        export_group_flows(g, tl, &w, j);
        export_wakeups(g, tl, &w, j);
        if (simulated && opt->cp)
            export_critical_path(g, &sk, opt->cp, &w, j);
        if (!simulated)
            export_markers(rp, g, &w, j);
        json_end_array(j);
        json_end_object(j);
        fputc('\n', out);
        rc = ferror(out) ? -1 : 0;
    }
    shown_kernels_free(&sk);
    free(garr);
    free(mend);
    free(w.t0);
    free(w.t1);
    return rc;
}
