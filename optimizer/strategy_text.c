/*
 * strategy_text.c: a plan as text: its description in a report, its knobs as the job's own
 * settings (JSON), and the layer lists the command line gives (see strategy.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/strategy.h"
#include "optimizer/partition.h"
#include "replay/kernels.h"

#define MIB 1048576.0

/* "3-5,9" for the recomputed layers. */
void
strategy_layer_list(const strategy_plan *p, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
    for (int32_t l = 0; l < STRATEGY_MAX_LAYERS && o + 16 < len; l++) {
        if (!strategy_recomputes(p, l))
            continue;
        int32_t e = l;
        while (e + 1 < STRATEGY_MAX_LAYERS && strategy_recomputes(p, e + 1))
            e++;
        if (e > l)
            o += (size_t)snprintf(buf + o, len - o, "%s%d-%d", o ? "," : "", l, e);
        else
            o += (size_t)snprintf(buf + o, len - o, "%s%d", o ? "," : "", l);
        l = e;
    }
}

void
strategy_kind(const workload *w, const strategy_plan *p, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
#define ADD(s) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? "+" : "", s)
    if (p->bucket_cap >= 0)
        ADD(w && partition_splits(&w->buckets, p) ? "tensor_partition" : "tensor_fusion");
    if (p->fuse)
        ADD("operator_fusion");
    if (p->cuda_graph)
        ADD("cuda_graph");
    if (strategy_n_recomputed(p) > 0)
        ADD("recompute");
    if (p->accum_k > 1)
        ADD("grad_accumulation");
    if (p->fsdp_keep)
        ADD("fsdp_no_reshard");
    if (p->fsdp_reshard)
        ADD("fsdp_reshard");
    if (p->prefetch)
        ADD("fsdp_prefetch");
#undef ADD
    if (!o)
        snprintf(buf, len, "baseline");
}

/* The name ids of the first kernels of the fusion chains, each once, in chain order, at
 * most max of them into ids; returns how many. */
static int
chain_name_ids(const workload *w, int32_t *ids, int max)
{
    int ns = 0;
    for (int32_t c = 0; c < w->fusion.n_chains && ns < max; c++) {
        int32_t id = w->g->name[w->fusion.chain_node[w->fusion.chain_off[c]]];
        int dup = 0;
        for (int i = 0; i < ns; i++)
            dup |= ids[i] == id;
        if (!dup)
            ids[ns++] = id;
    }
    return ns;
}

/* Distinct kernel names inside the fusion chains, comma-separated, as reports show them
 * (kernels_display_name). */
static void
chain_names(const workload *w, char *buf, size_t len)
{
    char nb[KERNELS_SHORT_NAME_MAX + 8];
    size_t o = 0;
    int32_t ids[8];
    int ns = chain_name_ids(w, ids, 8);
    buf[0] = 0;
    for (int i = 0; i < ns; i++)
        o += (size_t)snprintf(buf + o, o < len ? len - o : 0, "%s%s", o ? ", " : "",
                              kernels_display_name(dfg_name(w->g, ids[i]), nb, sizeof nb));
}

void
strategy_describe(const workload *w, const strategy_plan *p, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
#define PUT(...) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__)
    if (p->bucket_cap >= 0) {
        int32_t nb = strategy_bucket_count(w, p);
        PUT(partition_splits(&w->buckets, p)
                ? "%ssplit the gradients into buckets of %g MiB (first bucket %g MiB) that start "
                  "during the backward as their gradients become ready: %d all-reduces per "
                  "iteration instead of %d"
                : "%sregroup gradients into buckets of %g MiB (first bucket %g MiB): %d "
                  "all-reduces per iteration instead of %d",
            o ? "; " : "", strategy_bucket_caps_mb[p->bucket_cap],
            strategy_bucket_caps_mb[p->first_cap >= 0 ? p->first_cap : p->bucket_cap], nb,
            w->buckets.n_units);
    }
    if (p->fuse) {
        char names[1024];
        chain_names(w, names, sizeof names);
        int64_t per_iter = w->iter_last >= w->iter_first && w->g->n_ranks > 0
                               ? (w->fusion.chain_kernels - w->fusion.n_chains)
                               : 0;
        if (w->fusion.compiled)
            PUT("%sfuse the forward's and backward's runs of non-GEMM device ops between "
                "GEMMs (%d runs), one kernel per reduction (%d fused kernels, led by %s): "
                "%lld fewer launches in the trace",
                o ? "; " : "", w->fusion.compiled_runs, w->fusion.n_chains, names,
                (long long)per_iter);
        else
            PUT("%sfuse %d chains of short kernels launched back to back (%s) into one kernel "
                "each: %lld fewer launches in the trace",
                o ? "; " : "", w->fusion.n_chains, names, (long long)per_iter);
    }
    if (p->cuda_graph) {
        double calls, host_ns, thread_ns;
        workload_capture_removed(w, &calls, &host_ns, &thread_ns);
        PUT("%scapture %s in a CUDA graph: %.0f host calls and %.3f ms of host time (the calls "
            "and the framework's CPU time before each) per iteration and rank leave the host, "
            "of %.3f ms on its threads",
            o ? "; " : "",
            w->opt.capture_scope == WL_CAPTURE_COMPUTE
                ? "the forward and backward compute (the calls that launch only forward or "
                  "backward kernels; collectives, the optimizer step and the host work outside "
                  "those launches stay)"
            : workload_has_collectives(w->g)
                ? "the training step (every kernel and collective launch, the event calls, "
                  "the backward thread)"
                : "the training step (every kernel launch, the event calls, the backward "
                  "thread)",
            calls, host_ns / 1e6, thread_ns / 1e6);
    }
    if (strategy_n_recomputed(p) > 0) {
        char list[512];
        strategy_layer_list(p, list, sizeof list);
        PUT("%srecompute the forward of layers %s during the backward (checkpoint their input)",
            o ? "; " : "", list);
    }
    if (p->accum_k > 1)
        PUT(workload_has_collectives(w->g)
                ? "%saccumulate gradients over %d micro-batches of 1/%d of the batch: the "
                  "gradient all-reduces, and the waits on other ranks at them, once per %d "
                  "micro-batches"
                : "%saccumulate gradients over %d micro-batches of 1/%d of the batch: the "
                  "optimizer step once per %d micro-batches",
            o ? "; " : "", p->accum_k, p->accum_k, p->accum_k);
    if (p->fsdp_keep)
        PUT("%skeep the parameters unsharded from the forward to the backward: the backward's "
            "%d all-gathers per iteration are gone, with their copy-outs and %.0f host calls "
            "of the backward thread, the peak memory grows by %.1f MiB",
            o ? "; " : "", w->fsdp.n_bwd, w->fsdp.keep_calls, (double)w->fsdp.gathered_bytes / MIB);
    if (p->fsdp_reshard)
        PUT("%sreshard the parameters after the forward: the backward gathers the %d units "
            "again, as the forward does (their transfers, copy-in, copy-out and %.0f host "
            "calls per iteration), the peak memory drops by %.1f MiB",
            o ? "; " : "", w->fsdp.n_regather, w->fsdp.regather_calls,
            (double)w->fsdp.gathered_bytes / MIB);
    if (p->prefetch)
        PUT("%sissue each unit's all-gather one unit ahead, while the previous unit computes "
            "(%d in the forward, %d in the backward per iteration)",
            o ? "; " : "", w->fsdp.n_fwd, p->fsdp_keep ? 0 : w->fsdp.n_bwd);
#undef PUT
    if (!o)
        snprintf(buf, len, "baseline: change nothing");
}

void
strategy_write_knobs(const workload *w, const strategy_plan *p, int32_t batch,
                     const framework_profile *fw, json_writer *jw)
{
    char buf[1024];
    json_begin_object(jw);
    if (p->bucket_cap >= 0) {
        json_kv_double(jw, "bucket_cap_mb", strategy_bucket_caps_mb[p->bucket_cap]);
        json_kv_double(jw, "first_bucket_cap_mb",
                       strategy_bucket_caps_mb[p->first_cap >= 0 ? p->first_cap : p->bucket_cap]);
        int64_t bytes[64];
        int32_t nb = strategy_bucket_bytes(w, p, bytes, 64);
        json_kv_int(jw, "buckets", nb);
        json_key(jw, "bucket_bytes");
        json_begin_array(jw);
        for (int32_t b = 0; b < nb && b < 64; b++)
            json_int(jw, bytes[b]);
        json_end_array(jw);
    }
    if (p->fuse)
        json_kv_bool(jw, "fuse_small", 1);
    /* the kernels of same-name chains, as the trace spells them (a profiler's demangled
     * names or CUPTI's mangled ones); torch.compile's fused kernels are Inductor's own */
    if (p->fuse && !w->fusion.compiled) {
        json_key(jw, "fused_kernels");
        json_begin_array(jw);
        int32_t ids[16];
        int ns = chain_name_ids(w, ids, 16);
        for (int i = 0; i < ns; i++)
            json_string(jw, dfg_name(w->g, ids[i]));
        json_end_array(jw);
    }
    if (p->cuda_graph)
        json_kv_bool(jw, "cuda_graph", 1);
    if (strategy_n_recomputed(p) > 0) {
        strategy_layer_list(p, buf, sizeof buf);
        json_kv_string(jw, "recompute", buf);
    }
    if (p->accum_k > 1) {
        json_kv_int(jw, "accum_steps", p->accum_k);
        if (batch > 0)
            json_kv_int(jw, "batch", batch / p->accum_k);
        else
            json_kv_string(jw, "batch", "divide the per-rank batch by accum_steps");
        if (w->fsdp.accum_dev_ns > 0)
            json_kv_int(jw, "accumulation_adds", w->fsdp.n_adds);
    }
    if (p->fsdp_keep || p->fsdp_reshard)
        json_kv_bool(jw, "reshard_after_forward", p->fsdp_reshard);
    if (p->fsdp_keep)
        json_kv_double(jw, "backward_calls_removed", w->fsdp.keep_calls);
    if (p->fsdp_reshard)
        json_kv_double(jw, "backward_calls_added", w->fsdp.regather_calls);
    if (p->prefetch)
        json_kv_int(jw, "prefetch", 1);
    if (fw->args_key) {
        fw->format_args(p, batch, buf, sizeof buf);
        json_kv_string(jw, fw->args_key, buf);
    }
    if (fw->write_knobs)
        fw->write_knobs(w, p, batch, jw);
    json_end_object(jw);
}

int
strategy_parse_layer_list(const char *list, strategy_plan *p)
{
    char buf[1024], *save = NULL;
    int rc = 0;
    snprintf(buf, sizeof buf, "%s", list);
    for (char *r = strtok_r(buf, ",", &save); r && rc == 0; r = strtok_r(NULL, ",", &save)) {
        int a, b, n = 0;
        if (sscanf(r, "%d-%d%n", &a, &b, &n) != 2 || r[n]) {
            n = 0;
            if (sscanf(r, "%d%n", &a, &n) != 1 || r[n])
                rc = -1;
            b = a;
        }
        if (rc == 0 && (a < 0 || b < a || b >= STRATEGY_MAX_LAYERS))
            rc = -1;
        for (int l = a; rc == 0 && l <= b; l++)
            strategy_set_recompute(p, l, 1);
    }
    return rc;
}
