/* dpro-optimize-json.c: dpro-optimize's --json report (see dpro-optimize.h). */
#include <stdio.h>

#include "json_writer.h"
#include "optimizer/partition.h"
#include "optimizer/strategy.h"
#include "tools/dpro-optimize.h"

int
optimize_cmd_fixed_capped(const workload *w, const workload_options *wo)
{
    double want =
        w->fusion.fixed_fit.names > 0 ? w->fusion.fixed_fit.c0_ns : wo->kernel_fixed_us * 1000.0;
    return w->fusion.kernel_fixed_ns < want - 0.5;
}

int32_t
optimize_cmd_units_by_copies(const workload *w)
{
    if (!w->buckets.param_bytes || w->buckets.n_units <= 0 || w->buckets.why[0])
        return 0;
    partition_input in;
    strategy_partition_input(w, &in);
    return partition_units_by_copies(&in);
}

/* A plan's buckets priced in a protocol the trace never ran (costmodel_regime_at). */
static void
unseen_json(json_writer *jw, const workload *w, const strategy_plan *p)
{
    costmodel_regime r;
    int32_t k = strategy_unseen_buckets(w, p, &r);
    if (k > 0) {
        json_key(jw, "unseen_protocol");
        json_begin_object(jw);
        json_kv_int(jw, "buckets", k);
        json_kv_string(jw, "protocol", costmodel_proto_name(r.proto));
        json_kv_string(jw, "measured_protocol", costmodel_proto_name(r.measured_proto));
        json_kv_double(jw, "alpha_us", r.alpha_ns / 1000.0);
        json_kv_double(jw, "bandwidth_GBps", r.beta_bpns);
        json_end_object(jw);
    }
}

/* dpro-optimize --json's "models": what each model was fitted on and its parameters. */
static void
models_json(json_writer *jw, const args *a, const state *st)
{
    const workload *w = &st->w;
    const replay *rp = &st->rp;
    json_key(jw, "models");
    json_begin_object(jw);
    json_kv_double(jw, "kernel_fixed_us", w->fusion.kernel_fixed_ns / 1000.0);
    json_kv_string(jw, "kernel_fixed_source", w->fusion.fixed_fit.names > 0 ? "fit" : "prior");
    json_kv_int(jw, "kernel_fixed_names", w->fusion.fixed_fit.names);
    json_kv_bool(jw, "kernel_fixed_capped", optimize_cmd_fixed_capped(w, &a->wo));
    int32_t by_copies = optimize_cmd_units_by_copies(w);
    json_kv_string(jw, "partition_bytes",
                   by_copies > 0 && by_copies == w->buckets.n_units ? "parameter_copies"
                   : w->buckets.layer_grad                          ? "gradient_sizes"
                                                                    : "backward_time");
    json_kv_int(jw, "partition_units_by_copies", by_copies > 0 ? by_copies : 0);
    json_kv_int(jw, "bucket_params", w->buckets.param_bytes ? w->buckets.n_params : 0);
    json_kv_int(jw, "fusion_chains", w->fusion.n_chains);
    json_kv_string(jw, "fusion_model",
                   w->fusion.compiled    ? "compiled"
                   : w->opt.fusion_fixed ? "fixed"
                                         : "hinge");
    json_kv_int(jw, "kernel_hinge_names", w->fusion.n_hinges);
    json_kv_int(jw, "fusion_chains_hinge", w->fusion.chains_by_hinge);
    json_kv_string(jw, "contention_correction", w->opt.no_contention ? "off" : "on");
    json_kv_double(jw, "contention_compute_factor",
                   w->contention.comp.fitted ? w->contention.comp.k : 0);
    json_kv_double(jw, "contention_communication_factor",
                   w->contention.comm.fitted ? w->contention.comm.k : 0);
    json_kv_double(jw, "fusion_chain_kernels_us", st->chain_ns / 1000.0);
    json_kv_double(jw, "fusion_fused_kernels_us", st->fused_ns / 1000.0);
    json_kv_int(jw, "bucket_units", w->buckets.n_units);
    json_kv_int(jw, "layers", w->layers.n_layers);
    json_kv_int(jw, "recompute_sites", w->layers.n_sites);
    json_kv_double(jw, "weight_floor_gbps", w->layers.weight_ns ? w->layers.weight_bw : 0);
    json_kv_double(jw, "weight_floor_us", workload_weight_floor_ns(w) / 1000.0);
    json_kv_int(jw, "repaired_event_edges", rp->repaired_edges);
    json_kv_int(jw, "capture_unqueued_edges", w->capture.unqueued);
    if (w->buckets.n_units > 0 && w->buckets.coll_op < COSTMODEL_OPS) {
        const costmodel_fit *fit = rp->model.op[w->buckets.coll_op].fitted
                                       ? &rp->model.op[w->buckets.coll_op]
                                       : &rp->model.all;
        json_kv_double(jw, "collective_alpha_us", fit->alpha_ns / 1000.0);
        json_kv_double(jw, "collective_beta_gbps", fit->beta_bpns);
        json_kv_string(jw, "collective_model",
                       rp->model.piecewise && fit->n_segs > 0 ? "piecewise" : "alpha-beta");
        json_kv_int(jw, "collective_segments", fit->n_segs);
        json_kv_int(jw, "collective_sizes", fit->n_sizes);
    }
    json_end_object(jw);
}

/* dpro-optimize --json's "set_aside": the outlier iterations of the profile the search
 * ranked the plans without (search.h), and the rule that found them. */
static void
set_aside_json(json_writer *jw, const search_result *sr)
{
    char rule[160];
    snprintf(rule, sizeof rule,
             "over its rank's median iteration by more than %.0f x 1.4826 x MAD and by more "
             "than %.0f %%, in at most %.0f %% of the iterations",
             PROFILE_OUTLIER_MADS, 100 * PROFILE_OUTLIER_SHARE, 100 * PROFILE_OUTLIER_MAX_SHARE);
    json_key(jw, "set_aside");
    json_begin_object(jw);
    json_kv_string(jw, "rule", rule);
    json_key(jw, "iterations");
    json_begin_array(jw);
    for (int32_t i = 0; i < sr->n_aside; i++) {
        const profile_outlier *o = &sr->aside[i];
        json_begin_object(jw);
        json_kv_int(jw, "iteration", o->iteration);
        json_kv_int(jw, "rank", o->rank);
        json_kv_double(jw, "iter_us", o->iter_ns / 1000.0);
        json_kv_double(jw, "median_iter_us", o->median_ns / 1000.0);
        json_kv_double(jw, "mad_us", o->mad_ns / 1000.0);
        json_end_object(jw);
    }
    json_end_array(jw);
    json_end_object(jw);
}

void
optimize_cmd_print_json(const args *a, const state *st)
{
    const search_result *sr = &st->sr;
    const workload *w = &st->w;
    const replay *rp = &st->rp;
    double base_us = sr->baseline.eval.iter_ns / 1000.0;
    double evals_per_s = sr->elapsed_s > 0 ? (double)sr->evaluations / sr->elapsed_s : 0;
    json_writer jw;
    char buf[2048];
    json_init(&jw, stdout, 0);
    json_begin_object(&jw);
    json_kv_double(&jw, "baseline_iter_us", base_us);
    json_kv_double(&jw, "baseline_median_iter_us", sr->baseline.eval.median_ns / 1000.0);
    json_kv_double(&jw, "baseline_typical_iter_us", sr->baseline.eval.typical_ns / 1000.0);
    json_kv_double(&jw, "baseline_steady_iter_us", sr->baseline.steady_ns / 1000.0);
    set_aside_json(&jw, sr);
    json_key(&jw, "framework");
    json_begin_object(&jw);
    json_kv_string(&jw, "name", st->fw->name);
    json_kv_string(&jw, "detected", st->det.fw->name);
    json_kv_string(&jw, "evidence", st->det.evidence);
    json_kv_string(&jw, "capture_scope",
                   !st->fw->can_capture                          ? "none"
                   : st->fw->capture_scope == WL_CAPTURE_COMPUTE ? "forward_backward_compute"
                                                                 : "step");
    json_key(&jw, "cannot_express");
    const char *cannot = framework_cannot(st->fw, workload_has_collectives(w->g));
    if (cannot)
        json_string(&jw, cannot);
    else
        json_null(&jw);
    json_end_object(&jw);
    json_kv_double(&jw, "replayed_iter_us", w->measured_iter_ns / 1000.0);
    json_key(&jw, "baseline_peak_memory_bytes");
    if (sr->baseline.eval.peak_bytes >= 0)
        json_int(&jw, sr->baseline.eval.peak_bytes);
    else
        json_null(&jw);
    json_key(&jw, "memory_budget_bytes");
    if (a->so.memory_budget > 0)
        json_int(&jw, a->so.memory_budget);
    else
        json_null(&jw);
    json_kv_bool(&jw, "baseline_fits_budget", sr->baseline.feasible);
    json_kv_int(&jw, "ranks", st->work.n_ranks);
    json_kv_int(&jw, "rank_classes", optimize_cmd_rank_classes(st));
    json_kv_int(&jw, "iterations", rp->iter_last - rp->iter_first + 1);
    json_kv_int(&jw, "evaluations", sr->evaluations);
    json_kv_int(&jw, "proposals", sr->proposals);
    json_kv_double(&jw, "search_s", sr->elapsed_s);
    json_kv_double(&jw, "evaluations_per_s", evals_per_s);
    json_kv_bool(&jw, "cut_by_budget", sr->cut_by_budget);
    json_key(&jw, "screen");
    if (st->screen_classes > 0) {
        json_begin_object(&jw);
        json_kv_int(&jw, "rank_classes", st->screen_classes);
        json_kv_int(&jw, "evaluations", sr->screen_evaluations);
        json_kv_int(&jw, "verified", sr->screen_verified);
        json_kv_double(&jw, "margin_pct", 100 * sr->screen_margin);
        json_kv_double(&jw, "largest_gap_pct", 100 * sr->screen_gap);
        json_end_object(&jw);
    } else {
        json_null(&jw);
    }
    json_kv_int(&jw, "seed", (int64_t)a->so.seed);
    json_key(&jw, "critical_path_share");
    json_begin_object(&jw);
    json_kv_double(&jw, "host", sr->cp_host);
    json_kv_double(&jw, "short_kernels", sr->cp_short_kernels);
    json_kv_double(&jw, "collectives", sr->cp_collectives);
    json_kv_double(&jw, "other", sr->cp_other);
    json_end_object(&jw);
    models_json(&jw, a, st);
    json_key(&jw, "unavailable");
    json_begin_object(&jw);
    if (w->fusion.why[0])
        json_kv_string(&jw, "fusion", w->fusion.why);
    if (w->buckets.why[0])
        json_kv_string(&jw, "tensor", w->buckets.why);
    if (w->layers.why[0])
        json_kv_string(&jw, "memory", w->layers.why);
    if (w->fsdp.why[0])
        json_kv_string(&jw, "fsdp", w->fsdp.why);
    if (w->layers.weight_why[0])
        json_kv_string(&jw, "weight_floor", w->layers.weight_why);
    json_end_object(&jw);
    json_key(&jw, "strategies");
    json_begin_array(&jw);
    for (int32_t i = 0; i < sr->n_top; i++) {
        const search_candidate *sc = &sr->top[i];
        json_begin_object(&jw);
        strategy_kind(w, &sc->plan, buf, sizeof buf);
        json_kv_string(&jw, "kind", buf);
        strategy_describe(w, &sc->plan, buf, sizeof buf);
        json_kv_string(&jw, "description", buf);
        json_key(&jw, "knobs");
        strategy_write_knobs(w, &sc->plan, a->so.batch, st->fw, &jw);
        st->fw->advise(w, &sc->plan, a->so.batch, buf, sizeof buf);
        json_kv_string(&jw, "advice", buf);
        json_kv_double(&jw, "predicted_iter_us", sc->eval.iter_ns / 1000.0);
        json_kv_double(&jw, "predicted_median_iter_us", sc->eval.median_ns / 1000.0);
        json_kv_double(&jw, "predicted_typical_iter_us", sc->eval.typical_ns / 1000.0);
        json_kv_double(&jw, "predicted_speedup", sr->baseline.eval.iter_ns / sc->eval.iter_ns);
        json_kv_double(&jw, "predicted_steady_iter_us", sc->steady_ns / 1000.0);
        json_kv_double(&jw, "predicted_steady_speedup", sr->baseline.steady_ns / sc->steady_ns);
        unseen_json(&jw, w, &sc->plan);
        json_key(&jw, "peak_memory_bytes");
        if (sc->eval.peak_bytes >= 0)
            json_int(&jw, sc->eval.peak_bytes);
        else
            json_null(&jw);
        if (sc->plan.accum_k > 1) {
            /* the k - 1 micro-batches without the all-reduces: what each one costs */
            json_kv_double(&jw, "micro_batch_device_us", sc->eval.micro_device_ns / 1000.0);
            json_kv_double(&jw, "micro_batch_host_us", sc->eval.micro_host_ns / 1000.0);
            json_kv_double(&jw, "micro_batch_launches", sc->eval.micro_launches);
        }
        json_end_object(&jw);
    }
    json_end_array(&jw);
    json_end_object(&jw);
    fputc('\n', stdout);
}
