/*
 * dpro-optimize: what-if search over operator fusion, gradient bucket sizes,
 * recomputation and gradient accumulation, on the replay of a job's traces.
 *
 * Exit status: 0 ok, 1 bad input (no traces, unreadable, nothing to simulate), 2 usage.
 */
#define PR_FMT "dpro-optimize"
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "dpro_log.h"
#include "dprotrace.h"
#include "json_writer.h"
#include "optimizer/memest.h"
#include "optimizer/partition.h"
#include "optimizer/search.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "replay/chrome.h"
#include "replay/replay.h"

static void
usage(FILE *f)
{
    fprintf(f, "usage: dpro-optimize DIR [options]\n"
               "Searches what-if strategies on the replay of the traces in DIR and prints the\n"
               "baseline and the best strategies: what to change, predicted iteration time,\n"
               "speedup and peak memory.\n\n"
               "  -m, --memory-budget SIZE  peak memory allowed per rank (e.g. 800M, 16G)\n"
               "      --memory-margin F     share of the budget kept free for allocator\n"
               "                            fragmentation the estimate does not see (0.05)\n"
               "  -s, --strategies LIST     fusion,tensor,memory (default: all)\n"
               "  -k, --top K               strategies listed (default 5)\n"
               "  -j, --json                machine-readable output (keys: baseline_iter_us,\n"
               "                            strategies[kind, description, knobs,\n"
               "                            predicted_iter_us, predicted_speedup,\n"
               "                            peak_memory_bytes], ...)\n"
               "  -c, --chrome FILE         simulated timeline of the best strategy\n"
               "      --seed N              random seed of the search (default 1)\n"
               "  -b, --budget-s S          stop the search after S seconds (default 10)\n"
               "      --max-evals N         simulations at most (default 2000)\n"
               "      --batch B             per-rank batch of the profiled run (states the\n"
               "                            micro-batch of gradient accumulation)\n"
               "  -n, --iterations N        steady iterations to compare (default: all)\n"
               "  -w, --warmup N            skip the iterations before iteration N\n"
               "                            (default: detected, as dpro-replay)\n"
               "      --job ID              only the traces of job ID\n"
               "      --short-kernel-us US  fusion candidates: kernels at most US long (50)\n"
               "      --kernel-fixed-us US  fixed cost per kernel when not fitted (3)\n"
               "      --recompute-keep F    share of a recomputed layer's activations kept\n"
               "                            (0.125)\n"
               "      --what-if ARGS        evaluate one plan given as ddp-sim options\n"
               "                            (\"--bucket-mb 25 --fuse-small --recompute 0-3\")\n"
               "                            instead of searching\n"
               "  -q, --quiet               no progress line\n"
               "  -h, --help                this help\n"
               "  -V, --version             version\n");
}

/* Parses "800M", "16G", "1.5GiB", "123456" into bytes (binary units). Returns 0 or -1. */
static int
parse_size(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1048576.0;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1073741824.0;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1099511627776.0;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    *out = (int64_t)(v * mul);
    return 0;
}

static int
parse_families(const char *s, unsigned *out)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *out = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "fusion"))
            *out |= STRATEGY_FUSION;
        else if (!strcmp(t, "tensor"))
            *out |= STRATEGY_TENSOR;
        else if (!strcmp(t, "memory"))
            *out |= STRATEGY_MEMORY;
        else if (!strcmp(t, "all"))
            *out |= STRATEGY_ALL;
        else
            return -1;
    }
    return *out ? 0 : -1;
}

static int
parse_long(const char *s, long lo, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo)
        return -1;
    *out = v;
    return 0;
}

static int
parse_double(const char *s, double lo, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < lo)
        return -1;
    *out = v;
    return 0;
}

/* Window [*t0, *t1) of the first iteration marked in rank jr's trace (NVTX ranges or
 * iteration markers named like iterations), graph clock; *t0 = -1 when there is none. */
static void
first_iteration_window(const job_rank *jr, int64_t off, int64_t origin, int64_t *t0, int64_t *t1)
{
    *t0 = -1;
    *t1 = INT64_MAX;
    int key0 = -1;
    for (size_t i = 0; i < jr->n_events; i++) {
        const dpro_event *e = &jr->events[i];
        if (e->kind != DPRO_KIND_MARKER ||
            (e->subkind != DPRO_MARK_RANGE && e->subkind != DPRO_MARK_ITERATION))
            continue;
        int key = 0;
        if (e->subkind == DPRO_MARK_RANGE &&
            !iter_text_is_iteration(dpro_reader_string(jr->reader, e->name), &key))
            continue;
        if (key0 >= 0 && key != key0)
            continue;
        int64_t t = (int64_t)e->start_ns + off - origin;
        if (*t0 < 0 || t < *t0) {
            if (*t0 >= 0)
                *t1 = *t0;
            *t0 = t;
            key0 = key;
        } else if (t > *t0 && t < *t1) {
            *t1 = t;
        }
    }
}

/* Memory estimate of the rank with the largest measured peak; *mem_rank receives it.
 * Returns 1 when one was built, 0 when no rank has allocation events, -1 when out of
 * memory. */
static int
estimate_memory(const replay *rp, memest *best, int32_t *mem_rank)
{
    memset(best, 0, sizeof *best);
    *mem_rank = -1;
    for (int32_t r = 0; r < rp->job.n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        if (!jr->reader)
            continue;
        memest_phases ph;
        int64_t off = rp->align.offset_ns && r < rp->align.n_ranks ? rp->align.offset_ns[r] : 0;
        int64_t t0, t1;
        first_iteration_window(jr, off, rp->time_origin, &t0, &t1);
        if (workload_memory_phases(&rp->graph, r, t0, t1, &ph) != 0)
            continue;
        size_t n = 0;
        for (size_t i = 0; i < jr->n_events; i++)
            n += jr->events[i].kind == DPRO_KIND_MEMORY;
        if (n == 0)
            continue;
        memest_event *ev = malloc(n * sizeof *ev);
        if (!ev)
            return -1;
        size_t k = 0;
        for (size_t i = 0; i < jr->n_events; i++) {
            const dpro_event *e = &jr->events[i];
            if (e->kind != DPRO_KIND_MEMORY ||
                (e->value != DPRO_MEMSPACE_DEVICE && e->value != DPRO_MEMSPACE_ASYNC_POOL))
                continue;
            ev[k].t_ns = (int64_t)e->start_ns + off - rp->time_origin;
            ev[k].op = (int)e->subkind;
            ev[k].bytes = (int64_t)e->bytes;
            ev[k].address = e->address;
            ev[k].thread = e->thread;
            k++;
        }
        memest m;
        int rc = memest_build(ev, k, &ph, &m);
        free(ev);
        if (rc != 0)
            return -1;
        pr_dbg("rank %d: %zu allocation events, first iteration [%lld, %lld), backward "
               "[%lld, %lld]: peak %lld, static %lld, optimizer %lld, other %lld, %d activations",
               r, k, (long long)ph.iter_start, (long long)ph.iter_end, (long long)ph.bwd_start,
               (long long)ph.bwd_end, (long long)m.peak_bytes, (long long)m.static_bytes,
               (long long)m.optimizer_bytes, (long long)m.other_bytes, m.n_layers);
        if (m.peak_bytes > best->peak_bytes) {
            memest_free(best);
            *best = m;
            *mem_rank = r;
        } else {
            memest_free(&m);
        }
    }
    return *mem_rank >= 0;
}

/* The kernel executions of every rank with launch dims, for the fit of the per-kernel
 * fixed cost (workload_fit_fixed_cost): one key per (rank, kernel name). Returns the
 * count, or -1 when out of memory (*out NULL). */
static ssize_t
kernel_samples(const replay *rp, workload_kernel_sample **out)
{
    size_t n = 0, k = 0;
    *out = NULL;
    for (int32_t r = 0; r < rp->job.n_ranks; r++)
        for (size_t i = 0; i < rp->job.ranks[r].n_events; i++)
            n += rp->job.ranks[r].events[i].kind == DPRO_KIND_KERNEL;
    workload_kernel_sample *s = malloc(sizeof *s * (n ? n : 1));
    if (!s)
        return -1;
    for (int32_t r = 0; r < rp->job.n_ranks; r++) {
        const job_rank *jr = &rp->job.ranks[r];
        for (size_t i = 0; i < jr->n_events; i++) {
            const dpro_event *e = &jr->events[i];
            double threads = (double)e->grid[0] * e->grid[1] * e->grid[2] * e->block[0] *
                             e->block[1] * e->block[2];
            if (e->kind != DPRO_KIND_KERNEL || threads <= 0 || e->end_ns < e->start_ns)
                continue;
            s[k].key = (uint64_t)(uint32_t)r << 32 | e->name;
            s[k].threads = threads;
            s[k].dur_ns = (int64_t)(e->end_ns - e->start_ns);
            k++;
        }
    }
    *out = s;
    return (ssize_t)k;
}

/* Whether the per-kernel fixed cost in use is the shortest kernel's duration rather than
 * the fitted value or the prior, which were longer (workload.c caps it). */
static int
fixed_capped(const workload *w, const workload_options *wo)
{
    double want =
        w->fusion.fixed_fit.names > 0 ? w->fusion.fixed_fit.c0_ns : wo->kernel_fixed_us * 1000.0;
    return w->fusion.kernel_fixed_ns < want - 0.5;
}

static void
print_bytes(FILE *f, int64_t b)
{
    if (b < 0)
        fprintf(f, "%12s", "unknown");
    else
        fprintf(f, "%9.1f MiB", (double)b / 1048576.0);
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"memory-budget", required_argument, NULL, 'm'},
        {"strategies", required_argument, NULL, 's'},
        {"top", required_argument, NULL, 'k'},
        {"json", no_argument, NULL, 'j'},
        {"chrome", required_argument, NULL, 'c'},
        {"seed", required_argument, NULL, 1},
        {"budget-s", required_argument, NULL, 'b'},
        {"max-evals", required_argument, NULL, 2},
        {"batch", required_argument, NULL, 3},
        {"iterations", required_argument, NULL, 'n'},
        {"job", required_argument, NULL, 4},
        {"short-kernel-us", required_argument, NULL, 5},
        {"kernel-fixed-us", required_argument, NULL, 6},
        {"recompute-keep", required_argument, NULL, 7},
        {"warmup", required_argument, NULL, 'w'},
        {"what-if", required_argument, NULL, 8},
        {"memory-margin", required_argument, NULL, 9},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    search_options so;
    memset(&so, 0, sizeof so);
    so.seed = 1;
    so.budget_s = 10;
    so.top_k = 5;
    so.families = STRATEGY_ALL;
    so.memory_margin = 0.05;
    workload_options wo;
    workload_default_options(&wo);
    replay_options ro;
    memset(&ro, 0, sizeof ro);
    ro.warmup = -1;
    int json = 0, quiet = 0;
    const char *chrome = NULL, *what_if = NULL;
    long lv;
    int c;
    while ((c = getopt_long(argc, argv, "m:s:k:jc:b:n:w:qhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'm':
            if (parse_size(optarg, &so.memory_budget) != 0 || so.memory_budget <= 0) {
                fprintf(stderr, "dpro-optimize: bad --memory-budget '%s'\n", optarg);
                return 2;
            }
            break;
        case 's':
            if (parse_families(optarg, &so.families) != 0) {
                fprintf(stderr, "dpro-optimize: --strategies takes fusion,tensor,memory\n");
                return 2;
            }
            break;
        case 'k':
            if (parse_long(optarg, 1, &lv) != 0 || lv > 100) {
                fprintf(stderr, "dpro-optimize: bad --top '%s'\n", optarg);
                return 2;
            }
            so.top_k = (int32_t)lv;
            break;
        case 'j':
            json = 1;
            break;
        case 'c':
            chrome = optarg;
            break;
        case 1:
            if (parse_long(optarg, 0, &lv) != 0) {
                fprintf(stderr, "dpro-optimize: bad --seed '%s'\n", optarg);
                return 2;
            }
            so.seed = (uint64_t)lv;
            break;
        case 'b':
            if (parse_double(optarg, 0.001, &so.budget_s) != 0) {
                fprintf(stderr, "dpro-optimize: bad --budget-s '%s'\n", optarg);
                return 2;
            }
            break;
        case 2:
            if (parse_long(optarg, 1, &lv) != 0) {
                fprintf(stderr, "dpro-optimize: bad --max-evals '%s'\n", optarg);
                return 2;
            }
            so.max_evals = lv;
            break;
        case 3:
            if (parse_long(optarg, 1, &lv) != 0 || lv > 1 << 30) {
                fprintf(stderr, "dpro-optimize: bad --batch '%s'\n", optarg);
                return 2;
            }
            so.batch = (int32_t)lv;
            break;
        case 'n':
            if (parse_long(optarg, 1, &lv) != 0 || lv > 1 << 30) {
                fprintf(stderr, "dpro-optimize: bad --iterations '%s'\n", optarg);
                return 2;
            }
            ro.iterations = (int32_t)lv;
            break;
        case 'w':
            if (parse_long(optarg, 0, &lv) != 0 || lv > 1 << 30) {
                fprintf(stderr, "dpro-optimize: bad --warmup '%s'\n", optarg);
                return 2;
            }
            ro.warmup = (int32_t)lv;
            break;
        case 8:
            what_if = optarg;
            break;
        case 9:
            if (parse_double(optarg, 0, &so.memory_margin) != 0 || so.memory_margin >= 1) {
                fprintf(stderr, "dpro-optimize: bad --memory-margin '%s'\n", optarg);
                return 2;
            }
            break;
        case 4:
            ro.job_id = optarg;
            break;
        case 5:
            if (parse_double(optarg, 0, &wo.short_kernel_us) != 0) {
                fprintf(stderr, "dpro-optimize: bad --short-kernel-us '%s'\n", optarg);
                return 2;
            }
            break;
        case 6:
            if (parse_double(optarg, 0, &wo.kernel_fixed_us) != 0) {
                fprintf(stderr, "dpro-optimize: bad --kernel-fixed-us '%s'\n", optarg);
                return 2;
            }
            break;
        case 7:
            if (parse_double(optarg, 0.001, &wo.recompute_keep) != 0 || wo.recompute_keep > 1) {
                fprintf(stderr, "dpro-optimize: bad --recompute-keep '%s'\n", optarg);
                return 2;
            }
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("dpro-optimize %s\n", PACKAGE_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc) {
        usage(stderr);
        return 2;
    }
    so.progress = !quiet && isatty(2);

    char err[512];
    replay rp;
    if (replay_open(argv[optind], &ro, &rp, err, sizeof err) < 0) {
        fprintf(stderr, "dpro-optimize: %s\n", err);
        return 1;
    }
    int status = 1;
    dfg work;
    int have_work = 0;
    workload w;
    memset(&w, 0, sizeof w);
    sim_result base, best_sim;
    memset(&base, 0, sizeof base);
    memset(&best_sim, 0, sizeof best_sim);
    search_result sr;
    memset(&sr, 0, sizeof sr);
    memest mem;
    int32_t mem_rank = -1;

    if (rp.iter_last < rp.iter_first) {
        fprintf(stderr, "dpro-optimize: no steady iterations to compare in %s\n", argv[optind]);
        goto out;
    }
    if (dfg_finalize(&rp.graph) != 0 || estimate_memory(&rp, &mem, &mem_rank) < 0)
        goto oom;
    if (dfg_clone(&work, &rp.graph) != 0)
        goto oom;
    have_work = 1;
    ssize_t nks = kernel_samples(&rp, &wo.kernel_samples);
    if (nks < 0)
        goto oom;
    wo.n_kernel_samples = (size_t)nks;
    int wrc = workload_analyze(&w, &work, &base, rp.iter_first, rp.iter_last, &rp.model,
                               mem_rank >= 0 ? &mem : NULL, mem_rank, &wo);
    free(wo.kernel_samples);
    wo.kernel_samples = NULL;
    if (wrc != 0)
        goto oom;
    if (w.base_iter_ns <= 0) {
        fprintf(stderr, "dpro-optimize: the compared iterations cannot be simulated\n");
        goto out;
    }
    if (what_if) {
        strategy_plan wp;
        if (framework_default()->parse_args(what_if, &wp) != 0) {
            fprintf(stderr, "dpro-optimize: bad --what-if '%s'\n", what_if);
            status = 2;
            goto out;
        }
        /* the baseline and this one plan, through the same reporting */
        so.max_evals = 1;
        if (search_run(&w, &so, &sr) != 0)
            goto out;
        free(sr.top);
        sr.top = calloc(1, sizeof *sr.top);
        if (!sr.top)
            goto oom;
        sr.top[0].plan = wp;
        if (strategy_evaluate(&w, &wp, &best_sim, &sr.top[0].eval) != 0)
            goto out;
        sr.top[0].feasible =
            so.memory_budget <= 0 || (double)sr.top[0].eval.peak_bytes <=
                                         (double)so.memory_budget * (1.0 - so.memory_margin);
        sr.n_top = 1;
        sr.evaluations++;
    } else if (search_run(&w, &so, &sr) != 0) {
        fprintf(stderr, "dpro-optimize: the search failed (out of memory, or the baseline "
                        "cannot be simulated)\n");
        goto out;
    }
    if (chrome) {
        /* search_run left the working graph on the best plan; a plan that splits the
         * all-reduces is simulated on a transformed copy of it */
        dfg part;
        dfg *tl = w.g; /* the working graph, or its capture copy */
        if (sr.n_top > 0 && partition_splits(&w, &sr.top[0].plan)) {
            if (partition_build(&w, &sr.top[0].plan, &part, NULL) != 0)
                goto oom;
            tl = &part;
        }
        FILE *f = fopen(chrome, "w");
        chrome_options co = {1, -1, -1};
        int bad =
            !f || sim_run(tl, &best_sim) != 0 || chrome_export(&rp, tl, &best_sim, &co, f) != 0;
        if (tl == &part)
            dfg_free(&part);
        if (bad) {
            fprintf(stderr, "dpro-optimize: cannot write %s\n", chrome);
            if (f)
                fclose(f);
            goto out;
        }
        if (fclose(f) != 0) {
            fprintf(stderr, "dpro-optimize: cannot write %s\n", chrome);
            goto out;
        }
    }

    double base_us = sr.baseline.eval.iter_ns / 1000.0;
    double evals_per_s = sr.elapsed_s > 0 ? (double)sr.evaluations / sr.elapsed_s : 0;
    if (json) {
        json_writer jw;
        char buf[2048];
        json_init(&jw, stdout, 0);
        json_begin_object(&jw);
        json_kv_double(&jw, "baseline_iter_us", base_us);
        json_kv_double(&jw, "replayed_iter_us", w.measured_iter_ns / 1000.0);
        json_key(&jw, "baseline_peak_memory_bytes");
        if (sr.baseline.eval.peak_bytes >= 0)
            json_int(&jw, sr.baseline.eval.peak_bytes);
        else
            json_null(&jw);
        json_key(&jw, "memory_budget_bytes");
        if (so.memory_budget > 0)
            json_int(&jw, so.memory_budget);
        else
            json_null(&jw);
        json_kv_bool(&jw, "baseline_fits_budget", sr.baseline.feasible);
        json_kv_int(&jw, "ranks", rp.graph.n_ranks);
        json_kv_int(&jw, "iterations", rp.iter_last - rp.iter_first + 1);
        json_kv_int(&jw, "evaluations", sr.evaluations);
        json_kv_int(&jw, "proposals", sr.proposals);
        json_kv_double(&jw, "search_s", sr.elapsed_s);
        json_kv_double(&jw, "evaluations_per_s", evals_per_s);
        json_kv_bool(&jw, "cut_by_budget", sr.cut_by_budget);
        json_kv_int(&jw, "seed", (int64_t)so.seed);
        json_key(&jw, "critical_path_share");
        json_begin_object(&jw);
        json_kv_double(&jw, "host", sr.cp_host);
        json_kv_double(&jw, "short_kernels", sr.cp_short_kernels);
        json_kv_double(&jw, "collectives", sr.cp_collectives);
        json_kv_double(&jw, "other", sr.cp_other);
        json_end_object(&jw);
        json_key(&jw, "models");
        json_begin_object(&jw);
        json_kv_double(&jw, "kernel_fixed_us", w.fusion.kernel_fixed_ns / 1000.0);
        json_kv_string(&jw, "kernel_fixed_source", w.fusion.fixed_fit.names > 0 ? "fit" : "prior");
        json_kv_int(&jw, "kernel_fixed_names", w.fusion.fixed_fit.names);
        json_kv_bool(&jw, "kernel_fixed_capped", fixed_capped(&w, &wo));
        json_kv_string(&jw, "partition_bytes",
                       w.buckets.layer_grad ? "gradient_sizes" : "backward_time");
        json_kv_int(&jw, "fusion_chains", w.fusion.n_chains);
        json_kv_int(&jw, "bucket_units", w.buckets.n_units);
        json_kv_int(&jw, "layers", w.layers.n_layers);
        json_kv_int(&jw, "recompute_sites", w.layers.n_sites);
        json_kv_int(&jw, "repaired_event_edges", rp.repaired_edges);
        json_kv_int(&jw, "capture_unqueued_edges", w.capture.unqueued);
        if (w.buckets.n_units > 0 && w.buckets.coll_op < COSTMODEL_OPS) {
            const costmodel_fit *fit = rp.model.op[w.buckets.coll_op].fitted
                                           ? &rp.model.op[w.buckets.coll_op]
                                           : &rp.model.all;
            json_kv_double(&jw, "collective_alpha_us", fit->alpha_ns / 1000.0);
            json_kv_double(&jw, "collective_beta_gbps", fit->beta_bpns);
        }
        json_end_object(&jw);
        json_key(&jw, "unavailable");
        json_begin_object(&jw);
        if (w.fusion.why[0])
            json_kv_string(&jw, "fusion", w.fusion.why);
        if (w.buckets.why[0])
            json_kv_string(&jw, "tensor", w.buckets.why);
        if (w.layers.why[0])
            json_kv_string(&jw, "memory", w.layers.why);
        json_end_object(&jw);
        json_key(&jw, "strategies");
        json_begin_array(&jw);
        for (int32_t i = 0; i < sr.n_top; i++) {
            const search_candidate *sc = &sr.top[i];
            json_begin_object(&jw);
            strategy_kind(&w, &sc->plan, buf, sizeof buf);
            json_kv_string(&jw, "kind", buf);
            strategy_describe(&w, &sc->plan, buf, sizeof buf);
            json_kv_string(&jw, "description", buf);
            json_key(&jw, "knobs");
            strategy_write_knobs(&w, &sc->plan, so.batch, framework_default(), &jw);
            json_kv_double(&jw, "predicted_iter_us", sc->eval.iter_ns / 1000.0);
            json_kv_double(&jw, "predicted_speedup", sr.baseline.eval.iter_ns / sc->eval.iter_ns);
            json_key(&jw, "peak_memory_bytes");
            if (sc->eval.peak_bytes >= 0)
                json_int(&jw, sc->eval.peak_bytes);
            else
                json_null(&jw);
            json_end_object(&jw);
        }
        json_end_array(&jw);
        json_end_object(&jw);
        fputc('\n', stdout);
    } else {
        char buf[2048];
        printf("job %s: %d ranks, %d iterations compared; replayed %.1f us per iteration\n",
               rp.job.job_id ? rp.job.job_id : "?", rp.graph.n_ranks,
               rp.iter_last - rp.iter_first + 1, w.measured_iter_ns / 1000.0);
        printf("baseline: %.1f us per iteration, peak memory ", base_us);
        print_bytes(stdout, sr.baseline.eval.peak_bytes);
        if (so.memory_budget > 0) {
            printf(" (budget ");
            print_bytes(stdout, so.memory_budget);
            printf(sr.baseline.feasible ? ": fits)" : ": does NOT fit)");
        }
        printf("\ncritical path: host %.0f%%, short kernels %.0f%%, collectives %.0f%%, "
               "other %.0f%%\n",
               100 * sr.cp_host, 100 * sr.cp_short_kernels, 100 * sr.cp_collectives,
               100 * sr.cp_other);
        if (w.fusion.why[0])
            printf("operator fusion unavailable: %s\n", w.fusion.why);
        else if (w.fusion.fixed_fit.names > 0)
            printf("per-kernel fixed cost: %.2f us, fitted on the launch sizes of %d (rank, "
                   "kernel name) pairs%s\n",
                   w.fusion.kernel_fixed_ns / 1000.0, w.fusion.fixed_fit.names,
                   fixed_capped(&w, &wo) ? " (capped at the shortest kernel)" : "");
        else
            printf("per-kernel fixed cost: %.2f us, the prior (--kernel-fixed-us; no kernel "
                   "name with %d launch sizes to fit)%s\n",
                   w.fusion.kernel_fixed_ns / 1000.0, WORKLOAD_FIT_MIN_SIZES,
                   fixed_capped(&w, &wo) ? ", capped at the shortest kernel" : "");
        if (w.buckets.why[0])
            printf("tensor fusion unavailable: %s\n", w.buckets.why);
        else if (w.buckets.n_units > 0 && w.buckets.layer_grad)
            printf("tensor partition: gradient sizes of %d layers from the allocation trace\n",
                   w.layers.n_layers);
        else if (w.buckets.n_units > 0)
            printf("tensor partition: bytes ready in proportion to backward kernel time (%s)\n",
                   w.buckets.grad_why);
        if (w.layers.why[0])
            printf("recomputation unavailable: %s\n", w.layers.why);
        printf("search: %lld evaluations in %.2f s (%.0f/s)%s\n\n", (long long)sr.evaluations,
               sr.elapsed_s, evals_per_s, sr.cut_by_budget ? ", cut by --budget-s" : "");
        if (sr.n_top == 0)
            printf("no strategy predicted to do better%s.\n",
                   so.memory_budget > 0 ? " within the memory budget" : "");
        for (int32_t i = 0; i < sr.n_top; i++) {
            const search_candidate *sc = &sr.top[i];
            strategy_kind(&w, &sc->plan, buf, sizeof buf);
            printf("%d. %s: %.1f us (%.3fx), peak memory ", i + 1, buf, sc->eval.iter_ns / 1000.0,
                   sr.baseline.eval.iter_ns / sc->eval.iter_ns);
            print_bytes(stdout, sc->eval.peak_bytes);
            strategy_describe(&w, &sc->plan, buf, sizeof buf);
            printf("\n   %s\n", buf);
            if (sc->plan.accum_k > 1)
                printf("   each extra micro-batch: device %.1f us, host %.1f us\n",
                       sc->eval.micro_device_ns / 1000.0, sc->eval.micro_host_ns / 1000.0);
            framework_default()->format_args(&sc->plan, so.batch, buf, sizeof buf);
            printf("   %s: %s\n", framework_default()->name, buf);
        }
    }
    status = 0;
    goto out;
oom:
    fprintf(stderr, "dpro-optimize: out of memory\n");
out:
    search_result_free(&sr);
    sim_result_free(&base);
    sim_result_free(&best_sim);
    workload_free(&w);
    if (have_work)
        dfg_free(&work);
    replay_close(&rp);
    return status;
}
