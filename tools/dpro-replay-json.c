/* dpro-replay-json.c: dpro-replay's --json report (the keys are documented in
 * docs/commands.md). */
#include <stdio.h>

#include "json_writer.h"
#include "replay/contention.h"
#include "replay/kernels.h"
#include "replay/ncclname.h"
#include "tools/dpro-replay.h"

static void
bd_json(json_writer *j, const char *key, const sim_breakdown *b, double scale)
{
    json_key(j, key);
    json_begin_object(j);
    json_kv_double(j, "window_us", (double)b->window * scale / 1000.0);
    json_kv_double(j, "compute_us", (double)b->compute * scale / 1000.0);
    json_kv_double(j, "communication_us", (double)b->communication * scale / 1000.0);
    json_kv_double(j, "overlap_us", (double)b->overlap * scale / 1000.0);
    json_kv_double(j, "wait_other_ranks_us", (double)b->wait_ranks * scale / 1000.0);
    json_kv_double(j, "host_bound_idle_us", (double)b->host_idle * scale / 1000.0);
    json_end_object(j);
}

const char *
replay_cmd_kind_name(int k)
{
    static const char *names[] = {"?", "api", "kernel", "memcpy", "memset", "collective"};
    return k >= 0 && k <= 5 ? names[k] : "?";
}

const char *
replay_cmd_coll_algorithm(const costmodel *m)
{
    return m->named ? "from the kernel names (NCCL's algorithm by message size)"
                    : "assumed the ring: no NCCL kernel names in the trace";
}

const char *
replay_cmd_coll_protocol(const costmodel *m)
{
    return m->named ? "inferred: NCCL's tuner choice for the named algorithm at the model's "
                      "bandwidth (kernel names never tell the protocol)"
                    : "assumed by size: LL below 1 MiB, Simple from 1 MiB";
}

const char *
replay_cmd_ranks_assumed(const costmodel *m, int k)
{
    static const char *const s[] = {
        "each measured rank stands for N/ranks ranks of the larger job, with the same work "
        "(data parallel, the same batch per rank and the same model: the same payload per "
        "collective) and arriving at the collectives as it did, the latest of its N ranks "
        "later by what the traced ranks' arrival jitter and, when more ranks share a host's "
        "cores, their hosts' stalls give (the expected latest of N draws less that of the "
        "traced ranks)",
        NULL, /* the model's: below */
        "not known from the trace: the node layout at N ranks (slower links between nodes: "
        "priced only as --what-if-network gives them, NCCL's ring over the nodes), NCCL's "
        "algorithm and protocol at N (its trees across nodes), how the stalls of ranks "
        "sharing cores correlate; "
        "with one message size the latency cannot be told from the bandwidth and is scaled "
        "with it",
    };
    if (k == 1)
        return m->named
                   ? "collectives over all ranks: the fitted model's bandwidth term scaled by the "
                     "ring traffic factor (all-reduce 2(N-1)/N, all-gather and reduce-scatter "
                     "(N-1)/N), its latency grown as NCCL's tuner models it for the algorithm "
                     "the kernel names show at that size (ring: base + steps x hop over NVLink; "
                     "tree: base + 2 log2(ranks) x hop over the network, one rank per node) and "
                     "the protocol the tuner would pick at the trace's bandwidth (names never "
                     "tell it), in the size regime measured; smaller communicators keep their "
                     "size"
                   : "collectives over all ranks: the fitted model's bandwidth term scaled by the "
                     "ring traffic factor (all-reduce 2(N-1)/N, all-gather and reduce-scatter "
                     "(N-1)/N), its latency grown as NCCL's ring latency, base + steps x hop, "
                     "with the tuner's NVLink constants of LL below 1 MiB and Simple above (no "
                     "NCCL kernel names in the trace: algorithm and protocol assumed), in the "
                     "size regime measured; smaller communicators keep their size";
    return k >= 0 && k < 3 ? s[k] : NULL;
}

/* --json: typical_replay and, with --perturb, perturbation. */
static void
json_fidelity(json_writer *j, const report *rep)
{
    if (rep->have_typical) {
        const replay_typical *t = rep->typ;
        json_key(j, "typical_replay");
        json_begin_object(j);
        json_kv_int(j, "iterations", t->iterations);
        json_kv_int(j, "operations", t->nodes);
        json_kv_int(j, "operations_matched", t->matched);
        json_kv_double(j, "measured_iter_us", t->measured_us);
        json_kv_double(j, "predicted_iter_us", t->predicted_us);
        json_kv_double(j, "error_pct", t->error_pct);
        json_kv_double(j, "rank_wait_us", (double)t->rank_wait_ns / 1e3);
        json_kv_double(j, "medians_only_predicted_iter_us", t->medians_only_predicted_us);
        json_kv_double(j, "medians_only_error_pct", t->medians_only_error_pct);
        json_kv_double(j, "mean_predicted_iter_us", t->mean_predicted_us);
        json_kv_double(j, "mean_error_pct", t->mean_error_pct);
        json_kv_int(j, "drawn_samples", t->drawn_samples);
        json_kv_double(j, "drawn_predicted_iter_us", t->drawn_predicted_us);
        json_kv_double(j, "drawn_error_pct", t->drawn_error_pct);
        json_kv_double(j, "drawn_min_iter_us", t->drawn_min_us);
        json_kv_double(j, "drawn_max_iter_us", t->drawn_max_us);
        if (t->drawn_absent)
            json_kv_string(j, "drawn_absent", t->drawn_absent);
        json_end_object(j);
    }
    if (rep->have_perturb) {
        const replay_perturbation *p = rep->pt;
        const dfg *g = &rep->rp->graph;
        json_key(j, "perturbation");
        json_begin_object(j);
        json_kv_double(j, "scale", p->scale);
        json_kv_double(j, "baseline_iter_us", p->baseline_us);
        json_kv_double(j, "baseline_stale_wait_us", p->baseline_stale_us);
        json_key(j, "classes");
        json_begin_array(j);
        for (int32_t k = 0; k < p->n; k++) {
            const replay_perturb_class *c = &p->cls[k];
            json_begin_object(j);
            json_kv_string(j, "name", dfg_name(g, c->name));
            json_kv_int(j, "count", c->count);
            json_kv_double(j, "total_us", c->total_us);
            json_kv_double(j, "predicted_iter_us", c->predicted_us);
            json_kv_double(j, "saving_us", p->baseline_us - c->predicted_us);
            json_kv_double(j, "max_saving_us", (1 - p->scale) * c->total_us);
            json_kv_double(j, "without_class_iter_us", c->without_us);
            json_kv_double(j, "stale_wait_us", c->stale_wait_us);
            json_end_object(j);
        }
        json_end_array(j);
        json_end_object(j);
    }
}

/* --json: per_rank and stragglers. */
static void
json_ranks(json_writer *j, const report *rep)
{
    const replay *rp = rep->rp;
    const replay_summary *s = rep->s;
    json_key(j, "per_rank");
    json_begin_array(j);
    for (int32_t r = 0; r < s->n_ranks; r++) {
        replay_rank_summary *q = &s->rank[r];
        if (!q->present)
            continue;
        json_begin_object(j);
        json_kv_int(j, "rank", r);
        json_kv_double(j, "measured_iter_us", q->measured_us);
        json_kv_double(j, "simulated_iter_us", q->simulated_us);
        json_kv_double(j, "error_pct", q->error_pct);
        json_kv_double(j, "clock_offset_us", q->clock_offset_us);
        json_kv_double(j, "clock_residual_us", q->clock_residual_us);
        json_kv_bool(j, "clock_aligned", q->clock_aligned);
        json_kv_double(j, "others_waited_us_per_iter", q->straggler_blame_us);
        json_kv_int(j, "arrived_last", q->last_arrivals);
        json_kv_string(
            j, "iteration_method",
            (const char *[]){"none", "marker", "range", "kernel-period"}[rp->iters[r].method & 3]);
        json_kv_int(j, "warm_up_iterations", rp->iters[r].warm_up);
        json_key(j, "iteration_times");
        json_begin_array(j);
        for (int32_t k = rp->iter_first; k <= rp->iter_last; k++) {
            int64_t t0, t1, m, sim;
            if (replay_iteration_times(rp, r, k, &t0, &t1, &m, &sim) != 0)
                continue;
            json_begin_object(j);
            json_kv_int(j, "trace_start_ns", t0);
            json_kv_int(j, "trace_end_ns", t1);
            json_kv_double(j, "measured_us", (double)m / 1000.0);
            json_kv_double(j, "simulated_us", (double)sim / 1000.0);
            json_end_object(j);
        }
        json_end_array(j);
        json_key(j, "breakdown");
        json_begin_object(j);
        bd_json(j, "measured", &q->measured_bd,
                q->measured_bd.window > 0 && s->iterations ? 1.0 / s->iterations : 1.0);
        bd_json(j, "simulated", &q->simulated_bd,
                q->simulated_bd.window > 0 && s->iterations ? 1.0 / s->iterations : 1.0);
        json_end_object(j);
        json_end_object(j);
    }
    json_end_array(j);
    json_key(j, "stragglers");
    json_begin_array(j);
    for (int32_t r = 0; r < s->n_ranks; r++) {
        replay_rank_summary *q = &s->rank[r];
        if (q->present && q->straggler_blame_us > REPLAY_STRAGGLER_SHARE * s->measured_us &&
            q->straggler_blame_us > REPLAY_STRAGGLER_MIN_US) {
            json_begin_object(j);
            json_kv_int(j, "rank", r);
            json_kv_double(j, "others_waited_us_per_iter", q->straggler_blame_us);
            json_end_object(j);
        }
    }
    json_end_array(j);
}

void
replay_cmd_host_share_line(const hostshare *hs, char *buf, size_t n)
{
    double lo = 0, hi = 0;
    char cpus[64];
    for (int32_t k = 0; k < hs->n_hosts; k++) {
        lo = k == 0 || hs->host_cpus[k] < lo ? hs->host_cpus[k] : lo;
        hi = hs->host_cpus[k] > hi ? hs->host_cpus[k] : hi;
    }
    if (lo == hi)
        snprintf(cpus, sizeof cpus, "%.0f", hi);
    else
        snprintf(cpus, sizeof cpus, "%.0f-%.0f", lo, hi);
    char learned[80];
    if (hs->slice_learned == 1)
        snprintf(learned, sizeof learned, "the median of those within the base slice");
    else if (hs->slice_learned == 2)
        snprintf(learned, sizeof learned, "under %d within the base slice: their median with it",
                 HOSTSHARE_STALL_MIN_COUNT);
    else
        snprintf(learned, sizeof learned, "the base slice");
    snprintf(buf, n,
             "CPU demand %.2f per rank (traced mean), %d per host on %d host(s) of %s CPUs (%s) "
             "(load %.2f); %d per host: load %.2f, host time x %.3f at most; timeslice %.0f us "
             "(%s, %zu traced stalls, %zu of them over the base slice: other work), a rank "
             "stalled at %.0f %% of arrivals, up to %.0f us",
             hs->mean_demand, hs->per_host_traced, hs->n_hosts, cpus,
             hs->hosts_listed == hs->n_hosts ? "their ranks' CPU sets"
             : hs->hosts_listed > 0          ? "CPU sets or counts"
                                             : "the most any rank may use",
             hs->load_traced, hs->per_host_to, hs->load_to, hs->factor_max, hs->slice_ns / 1e3,
             learned, hs->n_stall, hs->n_stall_long, 100 * hs->stall_p, hs->stall_ns / 1e3);
}

/* --json: what_if.host_share {known, why | mean_demand, hosts, host_cpus (per host),
 * hosts_cpus_from_lists, cpus_note (a list not used), ranks_per_host_traced, load_traced,
 * ranks_per_host, load, host_time_scale, ...}. */
static void
json_host_share(json_writer *j, const hostshare *hs)
{
    json_key(j, "host_share");
    json_begin_object(j);
    json_kv_bool(j, "known", hs->known);
    if (!hs->known) {
        json_kv_string(j, "why", hs->why);
    } else {
        json_kv_double(j, "mean_demand", hs->mean_demand);
        json_kv_double(j, "mean_host_busy", hs->mean_busy);
        json_kv_int(j, "hosts", hs->n_hosts);
        json_key(j, "host_cpus");
        json_begin_array(j);
        for (int32_t k = 0; k < hs->n_hosts; k++)
            json_int(j, (int64_t)hs->host_cpus[k]);
        json_end_array(j);
        json_kv_int(j, "hosts_cpus_from_lists", hs->hosts_listed);
        if (hs->cpus_note[0])
            json_kv_string(j, "cpus_note", hs->cpus_note);
        json_kv_int(j, "ranks_per_host_traced", hs->per_host_traced);
        json_kv_double(j, "load_traced", hs->load_traced);
        json_kv_int(j, "ranks_per_host", hs->per_host_to);
        json_kv_double(j, "load", hs->load_to);
        json_kv_double(j, "host_time_scale", hs->factor_max);
        json_kv_int(j, "traced_stalls", (int64_t)hs->n_stall);
        json_kv_double(j, "traced_stalls_per_s",
                       hs->stall_window_ns > 0 ? (double)hs->n_stall / hs->stall_window_ns * 1e9
                                               : 0);
        json_kv_double(j, "timeslice_us", hs->slice_ns / 1e3);
        json_kv_bool(j, "timeslice_learned", hs->slice_learned);
        json_kv_int(j, "long_stalls", (int64_t)hs->n_stall_long);
        json_kv_double(j, "stall_share", hs->stall_p);
        json_kv_double(j, "stall_max_us", hs->stall_ns / 1e3);
    }
    json_end_object(j);
}

/* --json: clock, collective_model, what_if, diagnostics. */
static void
json_models(json_writer *j, const report *rep)
{
    const replay *rp = rep->rp;
    const replay_summary *ws = rep->ws;
    const int have_whatif = rep->have_whatif;
    const double kscale = rep->a->kscale;
    const replay_summary *s = rep->s;
    json_key(j, "clock");
    json_begin_object(j);
    json_kv_string(j, "source",
                   rp->align_source == 1   ? "collective device ends"
                   : rp->align_source == 2 ? "collective host call ends"
                                           : "none");
    json_kv_double(j, "residual_median_us", rp->align.residual_median_us);
    json_kv_double(j, "residual_max_us", rp->align.residual_max_us);
    json_kv_int(j, "unaligned_ranks", rp->align.n_unaligned);
    json_end_object(j);
    contention ct;
    if (contention_measure(&rp->graph, &ct) == 0) {
        const contention_fit *cf[2] = {&ct.comp, &ct.comm};
        const char *ck[2] = {"compute_by_communication", "communication_by_compute"};
        json_key(j, "contention");
        json_begin_object(j);
        for (int i = 0; i < 2; i++) {
            json_key(j, ck[i]);
            json_begin_object(j);
            json_kv_bool(j, "fitted", cf[i]->fitted);
            json_kv_double(j, "factor", cf[i]->k);
            json_kv_int(j, "samples", cf[i]->samples);
            json_kv_int(j, "informative", cf[i]->informative);
            json_kv_double(j, "mean_overlap", cf[i]->mean_f);
            json_end_object(j);
        }
        json_end_object(j);
    }
    json_kv_string(j, "collective_algorithm", replay_cmd_coll_algorithm(&rp->model));
    json_kv_string(j, "collective_protocol", replay_cmd_coll_protocol(&rp->model));
    json_key(j, "collective_model");
    json_begin_array(j);
    for (int op = 1; op < COSTMODEL_OPS; op++) {
        const costmodel_fit *f = &rp->model.op[op];
        if (!f->fitted)
            continue;
        json_begin_object(j);
        json_kv_string(j, "op", dpro_coll_op_name((uint32_t)op));
        json_kv_double(j, "alpha_us", f->alpha_ns / 1000.0);
        json_kv_double(j, "bandwidth_GBps", f->beta_bpns);
        json_kv_int(j, "samples", f->n_samples);
        json_kv_double(j, "mape_pct", f->mape);
        json_kv_string(j, "used",
                       rp->model.piecewise && f->n_segs > 0 ? "piecewise" : "alpha-beta");
        json_kv_int(j, "sizes", f->n_sizes);
        json_kv_double(j, "piecewise_mape_pct", f->pw_mape);
        json_kv_double(j, "size_noise_pct", 100.0 * f->noise_rel);
        json_key(j, "segments");
        json_begin_array(j);
        for (int32_t k = 0; k < f->n_segs; k++) {
            const costmodel_segment *sg = &f->seg[k];
            json_begin_object(j);
            json_kv_double(j, "from_bytes", sg->lo);
            json_kv_double(j, "to_bytes", sg->hi);
            json_kv_double(j, "alpha_us", sg->alpha_ns / 1000.0);
            json_kv_double(j, "bandwidth_GBps", sg->beta_bpns);
            json_kv_int(j, "sizes", sg->sizes);
            json_end_object(j);
        }
        json_end_array(j);
        json_key(j, "algorithms"); /* runs of sizes whose kernels named one algorithm */
        json_begin_array(j);
        for (int32_t k = 0; k < f->n_runs; k++) {
            json_begin_object(j);
            json_kv_double(j, "from_bytes", f->run[k].lo);
            json_kv_double(j, "to_bytes", f->run[k].hi);
            json_kv_string(j, "algorithm", ncclname_algo_name(f->run[k].algo));
            json_end_object(j);
        }
        json_end_array(j);
        json_end_object(j);
    }
    json_end_array(j);
    if (have_whatif) {
        json_key(j, "what_if");
        json_begin_object(j);
        const args *a = rep->a;
        if (kscale > 0)
            json_kv_double(j, "kernel_scale", kscale);
        if (a->kclass)
            json_kv_string(j, "kernel_class", a->kclass);
        for (int k = 0; k < 2; k++) {
            if ((k ? a->slow_host_rank : a->slow_gpu_rank) < 0)
                continue;
            json_key(j, k ? "slow_host" : "slow_rank");
            json_begin_object(j);
            json_kv_int(j, "rank", k ? a->slow_host_rank : a->slow_gpu_rank);
            json_kv_double(j, k ? "host_scale" : "kernel_scale", k ? a->slow_host : a->slow_gpu);
            json_end_object(j);
        }
        if (a->ranks_to > 0) {
            json_kv_int(j, "ranks", a->ranks_to);
            json_key(j, "assumed");
            json_begin_array(j);
            for (int k = 0; replay_cmd_ranks_assumed(&rp->model, k); k++)
                json_string(j, replay_cmd_ranks_assumed(&rp->model, k));
            json_end_array(j);
            json_host_share(j, rep->hs);
            json_kv_double(j, "rank_wait_us", (double)rep->rank_wait_ns / 1e3);
            json_key(j, "nodes");
            json_begin_object(j);
            json_kv_int(j, "traced", rep->nodes.traced);
            json_kv_int(j, "at_ranks", rep->nodes.to);
            json_kv_int(j, "network_priced", rep->nodes.priced);
            if (rep->nodes.priced) {
                json_kv_double(j, "network_gbps", a->net_gbps);
                json_kv_double(j, "network_hop_us", a->net_hop_us);
            }
            json_end_object(j);
        }
        json_kv_double(j, "predicted_iter_us", ws->simulated_us);
        json_kv_double(j, "predicted_median_iter_us", ws->simulated_median_us);
        json_kv_double(j, "speedup", ws->simulated_us > 0 ? s->simulated_us / ws->simulated_us : 0);
        json_key(j, "per_rank");
        json_begin_array(j);
        for (int32_t r = 0; r < ws->n_ranks; r++) {
            if (!ws->rank[r].present)
                continue;
            json_begin_object(j);
            json_kv_int(j, "rank", r);
            json_kv_double(j, "predicted_iter_us", ws->rank[r].simulated_us);
            json_end_object(j);
        }
        json_end_array(j);
        bd_json(j, "breakdown", &ws->simulated_bd, 1.0);
        json_end_object(j);
    }
    json_key(j, "diagnostics");
    json_begin_array(j);
    for (size_t i = 0; i < rp->job.n_diag; i++)
        json_string(j, rp->job.diag[i]);
    json_end_array(j);
}

/* --json: rank_classes, each {ranks, representative, weight, apart, read_folded}. */
static void
json_classes(json_writer *j, const replay *rp)
{
    const dfg *g = &rp->graph;
    json_key(j, "rank_classes");
    json_begin_array(j);
    for (int32_t p = 0; p < g->n_ranks; p++) {
        if ((p < rp->job.n_ranks && !rp->job.ranks[p].reader) || dfg_rank_rep(g, p) != p)
            continue;
        int32_t read_folded = 0;
        json_begin_object(j);
        json_key(j, "ranks");
        json_begin_array(j);
        for (int32_t r = p; r < g->n_ranks; r++)
            if (dfg_rank_rep(g, r) == p && (r >= rp->job.n_ranks || rp->job.ranks[r].reader)) {
                json_int(j, r);
                read_folded += r < rp->job.n_ranks && rp->job.ranks[r].folded;
            }
        json_end_array(j);
        json_kv_int(j, "representative", p);
        json_kv_int(j, "weight", dfg_rank_weight(g, p));
        json_kv_string(j, "apart",
                       g->rank_apart ? replay_apart_name(g->rank_apart[p]) : "not folded");
        json_kv_int(j, "read_folded", read_folded);
        json_end_object(j);
    }
    json_end_array(j);
}

void
replay_cmd_print_json(const report *rep)
{
    const replay *rp = rep->rp;
    const replay_summary *s = rep->s;
    const dfg *g = &rp->graph;
    const int top = rep->a->top;
    json_writer jw, *j = &jw;
    json_init(j, stdout, 1);
    json_begin_object(j);
    json_kv_int(j, "ranks", rp->job.n_present);
    json_kv_int(j, "world_size", rp->job.n_ranks);
    json_kv_string(j, "job_id", rp->job.job_id ? rp->job.job_id : "");
    json_kv_int(j, "iterations", s->iterations);
    json_kv_int(j, "first_iteration", s->first_iteration);
    json_kv_double(j, "measured_iter_us", s->measured_us);
    json_kv_double(j, "simulated_iter_us", s->simulated_us);
    json_kv_double(j, "simulated_median_iter_us", s->simulated_median_us);
    json_kv_double(j, "error_pct", s->error_pct);
    json_fidelity(j, rep);
    int64_t nodes, edges;
    int32_t groups;
    dfg_job_sizes(g, &nodes, &edges, &groups);
    json_kv_int(j, "nodes", nodes);
    json_kv_int(j, "edges", edges);
    json_kv_int(j, "collectives", groups);
    json_classes(j, rp);
    json_key(j, "p2p");
    json_begin_object(j);
    json_kv_int(j, "ends", rp->p2p.ends);
    json_kv_int(j, "matched", rp->p2p.matched);
    json_kv_int(j, "unmatched", rp->p2p.unmatched);
    json_kv_int(j, "no_peer", rp->p2p.no_peer);
    json_kv_int(j, "exchanges", rp->p2p.groups);
    json_kv_int(j, "wide_exchanges", rp->p2p.wide_groups);
    json_kv_int(j, "unmodelled_pairs", rp->p2p.conflicts + rp->p2p.no_device);
    json_end_object(j);
    json_kv_int(j, "unsimulated_nodes", rp->sim.n_unfinished);
    json_key(j, "breakdown");
    json_begin_object(j);
    bd_json(j, "measured", &s->measured_bd, 1.0);
    bd_json(j, "simulated", &s->simulated_bd, 1.0);
    json_end_object(j);
    json_key(j, "critical_path");
    json_begin_object(j);
    json_kv_int(j, "rank", s->cp_rank);
    json_kv_double(j, "length_us", (double)s->cp_length_ns / 1000.0);
    json_key(j, "composition");
    json_begin_object(j);
    for (int c = 0; c < REPLAY_CP_NCLASSES; c++) {
        char key[32];
        snprintf(key, sizeof key, "%s_us", replay_cp_class_name(c));
        json_kv_double(j, key, (double)s->cp_class_ns[c] / 1000.0);
    }
    json_end_object(j);
    json_key(j, "top");
    json_begin_array(j);
    for (int32_t i = 0; i < s->n_cp && i < top; i++) {
        json_begin_object(j);
        json_kv_string(j, "name", s->cp[i].op ? s->cp[i].op : dfg_name(g, s->cp[i].name));
        json_kv_string(j, "kind", replay_cmd_kind_name(s->cp[i].kind));
        json_kv_string(j, "class", replay_cp_class_name(s->cp[i].cls));
        json_kv_double(j, "time_us", (double)s->cp[i].total_ns / 1000.0);
        json_kv_int(j, "count", s->cp[i].count);
        json_end_object(j);
    }
    json_end_array(j);
    json_end_object(j);
    json_ranks(j, rep);
    json_models(j, rep);
    json_end_object(j);
}
