/*
 * dpro-optimize: what-if search over operator fusion, gradient bucket sizes,
 * recomputation and gradient accumulation, on the replay of a job's traces.
 *
 * Exit status: 0 ok, 1 bad input (no traces, a trace file not read whole unless --partial,
 * nothing to simulate, --chrome FILE refused or not written), 2 usage.
 *
 * With --mpi (mpirun -n P dpro-optimize --mpi DIR): every process reads its share of the
 * traces and holds the graph process 0 prepares (replay/mpi_open.h), the workload's
 * other inputs come from process 0 (optimizer/search_mpi.h), the search's simulations
 * are dealt out in rounds (search.h); process 0 prints the report, the others nothing.
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
#include "optimizer/framework.h"
#include "optimizer/memest.h"
#include "optimizer/profile.h"
#include "optimizer/search.h"
#include "optimizer/search_mpi.h"
#include "optimizer/strategy.h"
#include "optimizer/workload.h"
#include "replay/chrome.h"
#include "replay/inputs.h"
#include "replay/mpi_open.h"
#include "replay/mpi_sim.h"
#include "replay/replay.h"
#include "tools/dpro-optimize.h"

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
               "  -s, --strategies LIST     fusion,tensor,memory,fsdp (default: all); capture:\n"
               "                            of fusion, the CUDA-graph capture alone\n"
               "  -k, --top K               strategies listed (default 5)\n"
               "  -j, --json                machine-readable output (keys: baseline_iter_us,\n"
               "                            baseline_median_iter_us,\n"
               "                            baseline_typical_iter_us,\n"
               "                            baseline_steady_iter_us, set_aside, framework,\n"
               "                            rank_classes, screen (--no-fold),\n"
               "                            strategies[kind, description, advice, knobs,\n"
               "                            predicted_iter_us, predicted_median_iter_us,\n"
               "                            predicted_typical_iter_us,\n"
               "                            predicted_speedup, predicted_steady_iter_us,\n"
               "                            predicted_steady_speedup,\n"
               "                            peak_memory_bytes, with accumulation\n"
               "                            micro_batch_device_us, micro_batch_host_us],\n"
               "                            ...)\n"
               "  -c, --chrome FILE         simulated timeline of the best strategy (a new\n"
               "                            file; never an input trace or a symbolic link)\n"
               "  -f, --force               let --chrome write over an existing file\n"
               "      --seed N              random seed of the search (default 1)\n"
               "  -b, --budget-s S          stop the search after S seconds (default 10;\n"
               "                            the screen of --no-fold has its own S)\n"
               "      --max-evals N         simulations at most (default 2000)\n"
               "      --batch B             per-rank batch of the profiled run (states the\n"
               "                            micro-batch of gradient accumulation)\n"
               "  -n, --iterations N        steady iterations to compare (default: all); only\n"
               "                            their window is read, as dpro-replay reads it\n"
               "  -w, --warmup N            skip the iterations before iteration N\n"
               "                            (default: detected, as dpro-replay)\n"
               "      --job ID              only the traces of job ID\n"
               "      --jobs N              threads reading the rank traces (default: the\n"
               "                            CPUs, at most 16; the answer is the same for any N)\n"
               "      --no-fold             simulate every rank (default: alike ranks fold into\n"
               "                            weighted classes, each simulated once, as\n"
               "                            dpro-replay); the search screens its plans on\n"
               "                            the folded graph and simulates the best of them\n"
               "                            on every rank, whose times it reports\n"
               "      --full-search         with --no-fold: every plan of the search simulated\n"
               "                            on every rank (no screen; slower)\n"
               "      --short-kernel-us US  fusion candidates: kernels at most US long (50)\n"
               "      --kernel-fixed-us US  fixed cost per kernel when not fitted (3)\n"
               "      --collective-model M  piecewise (default), nearest or alpha-beta, as\n"
               "                            dpro-replay\n"
               "      --contention on|off   correct the plans for compute/communication\n"
               "                            contention measured in the trace (default off:\n"
               "                            its gain is not shown, docs/models.md)\n"
               "      --fusion-model M      hinge (default: each kernel name's time over its\n"
               "                            launch sizes) or fixed (one fixed cost per kernel)\n"
               "      --recompute-keep F    share of a recomputed layer's activations kept\n"
               "                            (0.125)\n"
               "      --framework NAME      advise for NAME instead of the framework the\n"
               "                            trace shows: pytorch-ddp, pytorch-fsdp, pytorch,\n"
               "                            ddp-sim or unknown\n"
               "      --what-if ARGS        evaluate one plan given as the framework's options\n"
               "                            instead of searching (PyTorch: \"bucket_cap_mb=25\n"
               "                            torch.compile checkpoint=0-3\"; ddp-sim:\n"
               "                            \"--bucket-mb 25 --fuse-small --recompute 0-3\")\n"
               "      --mpi                 run as an MPI job (mpirun -n P dpro-optimize --mpi\n"
               "                            DIR): P processes read shares of the traces and\n"
               "                            share the search's simulations; process 0 prints\n"
               "                            the report, the same as without --mpi (with\n"
               "                            --budget-s the search is cut at other points)\n"
               "  -q, --quiet               no progress line\n" INPUTS_HELP_PARTIAL
               "  -h, --help                this help\n"
               "  -V, --version             version\n\n" INPUTS_HELP_EXIT);
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

/* --strategies: the families in *out; *no_fuse 1 when the fusion family is asked for only
 * as "capture" (CUDA-graph capture without operator fusion). */
static int
parse_families(const char *s, unsigned *out, int *no_fuse)
{
    char buf[256];
    int fuse = 0, capture = 0;
    snprintf(buf, sizeof buf, "%s", s);
    *out = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "fusion") || !strcmp(t, "all"))
            fuse = 1;
        if (!strcmp(t, "capture"))
            capture = 1;
        if (!strcmp(t, "fusion") || !strcmp(t, "capture"))
            *out |= STRATEGY_FUSION;
        else if (!strcmp(t, "tensor"))
            *out |= STRATEGY_TENSOR;
        else if (!strcmp(t, "memory"))
            *out |= STRATEGY_MEMORY;
        else if (!strcmp(t, "fsdp"))
            *out |= STRATEGY_FSDP;
        else if (!strcmp(t, "all"))
            *out |= STRATEGY_ALL;
        else
            return -1;
    }
    *no_fuse = capture && !fuse;
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

static void
print_bytes(FILE *f, int64_t b)
{
    if (b < 0)
        fprintf(f, "%12s", "unknown");
    else
        fprintf(f, "%9.1f MiB", (double)b / 1048576.0);
}

/* Reports a bad option value; returns the usage exit status. */
static int
bad_value(const char *opt, const char *arg)
{
    pr_err("bad --%s '%s'", opt, arg);
    return 2;
}

/* What an option handler returns besides an exit status: go on, or the option is not its. */
enum { OPT_NEXT = -1, OPT_NOT_MINE = -2 };

/* The search's options (-m -s -k -b, --seed, --max-evals, --batch, --memory-margin).
 * Returns OPT_NEXT, OPT_NOT_MINE or the exit status. */
static int
parse_search_option(int c, const char *arg, search_options *so)
{
    long lv;
    int rc = OPT_NEXT;

    switch (c) {
    case 'm':
        if (parse_size(arg, &so->memory_budget) != 0 || so->memory_budget <= 0)
            rc = bad_value("memory-budget", arg);
        break;
    case 's':
        if (parse_families(arg, &so->families, &so->no_fuse) != 0) {
            pr_err("--strategies takes fusion,capture,tensor,memory,fsdp");
            rc = 2;
        }
        break;
    case 'k':
        if (parse_long(arg, 1, &lv) != 0 || lv > 100)
            rc = bad_value("top", arg);
        else
            so->top_k = (int32_t)lv;
        break;
    case 1:
        if (parse_long(arg, 0, &lv) != 0)
            rc = bad_value("seed", arg);
        else
            so->seed = (uint64_t)lv;
        break;
    case 'b':
        if (parse_double(arg, 0.001, &so->budget_s) != 0)
            rc = bad_value("budget-s", arg);
        break;
    case 2:
        if (parse_long(arg, 1, &lv) != 0)
            rc = bad_value("max-evals", arg);
        else
            so->max_evals = lv;
        break;
    case 3:
        if (parse_long(arg, 1, &lv) != 0 || lv > 1 << 30)
            rc = bad_value("batch", arg);
        else
            so->batch = (int32_t)lv;
        break;
    case 9:
        if (parse_double(arg, 0, &so->memory_margin) != 0 || so->memory_margin >= 1)
            rc = bad_value("memory-margin", arg);
        break;
    default:
        rc = OPT_NOT_MINE;
        break;
    }
    return rc;
}

/* The replay's options (-n -w, --job, --jobs, --collective-model, --no-fold).
 * Returns OPT_NEXT, OPT_NOT_MINE or the exit status. */
static int
parse_replay_option(int c, const char *arg, replay_options *ro)
{
    long lv;
    int rc = OPT_NEXT;

    switch (c) {
    case 'n':
        if (parse_long(arg, 1, &lv) != 0 || lv > 1 << 30)
            rc = bad_value("iterations", arg);
        else
            ro->iterations = (int32_t)lv;
        break;
    case 'w':
        if (parse_long(arg, 0, &lv) != 0 || lv > 1 << 30)
            rc = bad_value("warmup", arg);
        else
            ro->warmup = (int32_t)lv;
        break;
    case 4:
        ro->job_id = arg;
        break;
    case 11:
        if (parse_long(arg, 1, &lv) != 0 || lv > 1 << 20)
            rc = bad_value("jobs", arg);
        else
            ro->jobs = (int)lv;
        break;
    case 12:
        if (replay_collective_model_option(ro, arg) != 0)
            rc = bad_value("collective-model", arg);
        break;
    case 17:
        ro->fold = 0;
        break;
    default:
        rc = OPT_NOT_MINE;
        break;
    }
    return rc;
}

/* The workload models' options (--short-kernel-us, --kernel-fixed-us, --recompute-keep,
 * --fusion-model, --contention). Returns OPT_NEXT, OPT_NOT_MINE or the exit status. */
static int
parse_workload_option(int c, const char *arg, workload_options *wo)
{
    int rc = OPT_NEXT;

    switch (c) {
    case 5:
        if (parse_double(arg, 0, &wo->short_kernel_us) != 0)
            rc = bad_value("short-kernel-us", arg);
        break;
    case 6:
        if (parse_double(arg, 0, &wo->kernel_fixed_us) != 0)
            rc = bad_value("kernel-fixed-us", arg);
        break;
    case 7:
        if (parse_double(arg, 0.001, &wo->recompute_keep) != 0 || wo->recompute_keep > 1)
            rc = bad_value("recompute-keep", arg);
        break;
    case 13:
        if (strcmp(arg, "hinge") != 0 && strcmp(arg, "fixed") != 0)
            rc = bad_value("fusion-model", arg);
        else
            wo->fusion_fixed = strcmp(arg, "fixed") == 0;
        break;
    case 14:
        if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
            rc = bad_value("contention", arg);
        else
            wo->no_contention = strcmp(arg, "off") == 0;
        break;
    default:
        rc = OPT_NOT_MINE;
        break;
    }
    return rc;
}

/* The output and command options (-j -c -q -f -h -V, --what-if, --partial, --framework,
 * --mpi);
 * an unknown option prints the usage. Returns OPT_NEXT or the exit status. */
static int
parse_command_option(int c, const char *arg, args *a)
{
    int rc = OPT_NEXT;

    switch (c) {
    case 'j':
        a->json = 1;
        break;
    case 'c':
        a->chrome = arg;
        break;
    case 8:
        a->what_if = arg;
        break;
    case 'q':
        a->quiet = 1;
        break;
    case 'f':
        a->force = 1;
        break;
    case 10:
        a->partial = 1;
        break;
    case 18:
        a->full_search = 1;
        break;
    case 15:
        a->framework = framework_by_name(arg);
        if (!a->framework)
            rc = bad_value("framework", arg);
        break;
    case 16:
        if (!mpisim_built()) {
            pr_err("--mpi: this dpro-optimize was built without MPI (install libopenmpi-dev "
                   "and openmpi-bin, then configure and build again)");
            rc = 2;
        }
        a->mpi = 1;
        break;
    case 'h':
        usage(stdout);
        rc = 0;
        break;
    case 'V':
        printf("dpro-optimize %s\n", PACKAGE_VERSION);
        rc = 0;
        break;
    default:
        usage(stderr);
        rc = 2;
        break;
    }
    return rc;
}

/* Sets *a to the command's defaults. */
static void
default_args(args *a)
{
    search_options *so = &a->so;

    memset(a, 0, sizeof *a);
    so->seed = 1;
    so->budget_s = 10;
    so->top_k = 5;
    so->families = STRATEGY_ALL;
    so->memory_margin = 0.05;
    workload_default_options(&a->wo);
    a->ro.warmup = -1;
    /* with -n only the compared iterations' window is read, as dpro-replay reads it, but
     * from the trace's start where the traces hold allocations: the memory estimate reads
     * the first iteration and the allocations before it */
    a->ro.window_from_start = 1;
    a->ro.fold = 1; /* alike ranks simulated once, as one class with its weight */
}

/* Parses the command line into *a. Returns -1 to go on, or the exit status. */
static int
parse_args(int argc, char **argv, args *a)
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
        {"force", no_argument, NULL, 'f'},
        {"partial", no_argument, NULL, 10},
        {"jobs", required_argument, NULL, 11},
        {"collective-model", required_argument, NULL, 12},
        {"fusion-model", required_argument, NULL, 13},
        {"contention", required_argument, NULL, 14},
        {"framework", required_argument, NULL, 15},
        {"mpi", no_argument, NULL, 16},
        {"no-fold", no_argument, NULL, 17},
        {"full-search", no_argument, NULL, 18},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int rc = OPT_NEXT;
    int c;

    default_args(a);
    while (rc == OPT_NEXT &&
           (c = getopt_long(argc, argv, "m:s:k:jc:fb:n:w:qhV", longopts, NULL)) != -1) {
        rc = parse_search_option(c, optarg, &a->so);
        if (rc == OPT_NOT_MINE)
            rc = parse_replay_option(c, optarg, &a->ro);
        if (rc == OPT_NOT_MINE)
            rc = parse_workload_option(c, optarg, &a->wo);
        if (rc == OPT_NOT_MINE)
            rc = parse_command_option(c, optarg, a);
    }
    if (rc == OPT_NEXT && optind + 1 != argc) {
        usage(stderr);
        rc = 2;
    }
    if (rc == OPT_NEXT && a->full_search && a->ro.fold) {
        /* a folded run simulates its classes once each: there is no screen to turn off */
        pr_err("--full-search: only with --no-fold (it turns off the screen of the "
               "explicit search; a folded search has none)");
        rc = 2;
    }
    if (rc == OPT_NEXT) {
        a->so.progress = !a->quiet && isatty(2);
        a->dir = argv[optind];
    }
    return rc;
}

/* Sets what the search and the models take from the framework advised for, st->fw. */
static void
use_framework(args *a, const state *st)
{
    a->wo.capture_scope = st->fw->capture_scope;
    a->wo.fusion_scope = st->fw->fusion_scope;
    a->so.fw_families = st->fw->families;
    a->so.no_capture = !st->fw->can_capture;
    a->so.first_bucket_mb = st->fw->fixed_first_bucket_mb;
    a->so.first_bucket_follows = st->fw->first_bucket_follows;
}

/* Recognises the framework of st->rp's traces and advises for it, or for --framework.
 * Returns 0 or -1 out of memory. */
static int
choose_framework(args *a, state *st)
{
    if (!st->take.ev && !(st->take.ev = framework_evidence_new()))
        return -1; /* no rank was taken: nothing decides */
    framework_decide(st->take.ev, &st->det);
    st->fw = a->framework ? a->framework : st->det.fw;
    use_framework(a, st);
    return 0;
}

/* What the workload takes from the replay besides the graph, on the process that holds
 * the replay: the graph finalized, the memory estimate, the kernel samples. Returns 0, 1
 * (the message is printed) or -1 out of memory. */
static int
prepare(args *a, state *st)
{
    replay *rp = &st->rp;
    workload_options *wo = &a->wo;

    if (rp->iter_last < rp->iter_first) {
        pr_err("no steady iterations to compare in %s: no complete iteration (fewer than two "
               "iteration boundaries: no ProfilerStep or NVTX iteration markers, no repeating "
               "kernel sequence); the optimizer compares whole iterations: trace a few steps",
               a->dir);
        return 1;
    }
    if (dfg_finalize(&rp->graph) != 0 ||
        profile_estimate_memory(rp, &st->take, &st->mem, &st->mem_rank) < 0)
        return -1;
    size_t n = st->take.n_samples;
    workload_kernel_sample *s = realloc(st->take.samples, (n ? n : 1) * sizeof *s);
    if (!s)
        return -1;
    if (!st->take.samples)
        memset(s, 0, sizeof *s); /* broadcast as bytes with --mpi (search_mpi.c) */
    st->take.samples = NULL;
    wo->kernel_samples = s;
    wo->n_kernel_samples = n;
    profile_take_free(&st->take);
    return 0;
}

/* With --mpi: prepare on process 0, agreed, and its results handed to the others, which
 * take the framework process 0 advises for. Returns 0, 1 (said where it failed) or -1
 * out of memory. */
static int
prepare_shared(args *a, state *st, int me)
{
    char fw[SEARCHMPI_NAME_MAX] = "";
    int rc = me == 0 ? prepare(a, st) : 0;
    if (rc < 0)
        pr_err("out of memory");
    if (!mpisim_agree(rc == 0))
        return 1;
    if (me == 0)
        snprintf(fw, sizeof fw, "%s", st->fw->name);
    if (searchmpi_share_analysis(&st->rp, &st->mem, &st->mem_rank, &a->wo, fw) != 0)
        return -1;
    if (st->mem_rank < 0)
        memest_free(&st->mem);
    if (me != 0) {
        st->fw = framework_by_name(fw);
        if (!st->fw)
            return -1; /* process 0 named a profile it has: never */
        use_framework(a, st);
        if (dfg_finalize(&st->rp.graph) != 0)
            return -1;
    }
    return 0;
}

/* The screen of an explicit search (search.h, search_options.screen): the graph of
 * st->rp (prepared, explicit) folded into a copy, analysed and searched into st->screen,
 * then freed; a->so.screen then points at st->screen. Not made (and not an error) when
 * the folded graph would not be at most 1 / OPTIMIZE_SCREEN_SHRINK of the explicit one:
 * the screen would not pay for itself, or when its search fails (the full search then
 * runs). Returns 0, or -1 out of memory. */
static int
screen(args *a, state *st)
{
    replay *rp = &st->rp;
    dfg folded;
    workload sw;
    sim_result sbase;
    memest mem;
    search_options so = a->so;
    int rc = 0, have_fold = 0, have_w = 0;
    void *packed = NULL;
    size_t packed_len = 0;

    memset(&sbase, 0, sizeof sbase);
    memset(&mem, 0, sizeof mem);
    int32_t n_cls = replay_fold_copy(rp, &folded, OPTIMIZE_SCREEN_TOLERANCE);
    if (n_cls < 0)
        rc = -1;
    have_fold = n_cls >= 0 && n_cls < rp->job.n_present;
    if (have_fold && (int64_t)folded.n_nodes * OPTIMIZE_SCREEN_SHRINK > rp->graph.n_nodes)
        goto out; /* too little folds */
    /* the memory estimate is taken over by the analysis: the screen's is a copy */
    if (rc == 0 && have_fold && st->mem_rank >= 0 &&
        (memest_pack(&st->mem, &packed, &packed_len) != 0 ||
         memest_unpack(&mem, packed, packed_len) != 0))
        rc = -1;
    if (rc == 0 && have_fold) {
        have_w = 1;
        rc = workload_analyze(&sw, &folded, &sbase, rp->iter_first, rp->iter_last, &rp->model,
                              st->mem_rank >= 0 ? &mem : NULL, dfg_rank_rep(&folded, st->mem_rank),
                              &a->wo);
        sim_result_free(&sbase);
    }
    if (rc == 0 && have_w && sw.base_iter_ns > 0) {
        workload_trim(&sw);
        so.keep_evaluated = 1;
        so.progress = 0;
        if (search_run(&sw, &so, &st->screen) == 0)
            st->screen_classes = n_cls;
        else /* the screen cannot be searched: the full search runs (and says why) */
            search_result_free(&st->screen);
    }
out:
    if (have_w)
        workload_free(&sw);
    if (have_fold)
        dfg_free(&folded);
    memest_free(&mem);
    free(packed);
    a->so.screen = rc == 0 && st->screen_classes > 0 ? &st->screen : NULL;
    return rc;
}

/* Builds the workload of st->rp (prepared): the analysis of the working graph. Returns
 * 0, 1 (the message is printed) or -1 out of memory. */
static int
analyze(args *a, state *st)
{
    replay *rp = &st->rp;
    workload_options *wo = &a->wo;

    replay_take_graph(rp, &st->work); /* the working graph: the replay's is read no more */
    st->have_work = 1;
    int wrc = workload_analyze(&st->w, &st->work, &st->base, rp->iter_first, rp->iter_last,
                               &rp->model, st->mem_rank >= 0 ? &st->mem : NULL, st->mem_rank, wo);
    free(wo->kernel_samples);
    wo->kernel_samples = NULL;
    st->w.opt.kernel_samples = NULL; /* the analysis's copy of the options pointed at them */
    st->w.opt.n_kernel_samples = 0;
    sim_result_free(&st->base); /* the baseline's timeline: read by the analysis only */
    if (wrc != 0)
        return -1;
    if (st->w.base_iter_ns <= 0) {
        pr_err("the compared iterations cannot be simulated");
        return 1;
    }
    if (strategy_fusion_summary(&st->w, &st->chain_ns, &st->fused_ns) != 0)
        return -1;
    workload_trim(&st->w); /* what the search does not read, given back before it */
    return 0;
}

/* --what-if: the baseline and the one plan given, through the same reporting as a
 * search. Returns 0, 1 (failed), 2 (the plan does not parse) or -1 out of memory. */
static int
evaluate_what_if(args *a, state *st)
{
    search_options *so = &a->so;
    search_result *sr = &st->sr;
    strategy_plan wp;

    const framework_profile *fw = st->fw;

    if (!fw->parse_args) {
        pr_err("--what-if takes a framework's options, and %s is not one: name one with "
               "--framework",
               fw->name);
        return 2;
    }
    if (fw->parse_args(a->what_if, &wp) != 0) {
        pr_err("bad --what-if '%s' for %s", a->what_if, fw->name);
        return 2;
    }
    if ((strategy_plan_families(&wp) & ~fw->families) || (wp.cuda_graph && !fw->can_capture)) {
        pr_err("--what-if '%s': %s cannot express %s", a->what_if, fw->name,
               fw->cannot ? fw->cannot : "this plan");
        return 2;
    }
    so->max_evals = 1;
    if (search_run(&st->w, so, sr) != 0)
        return 1;
    free(sr->top);
    sr->top = calloc(1, sizeof *sr->top);
    if (!sr->top)
        return -1;
    sr->top[0].plan = wp;
    if (search_steady_ns(&st->w, sr, &wp, &st->best_sim, &sr->top[0].steady_ns) != 0 ||
        strategy_evaluate(&st->w, &wp, &st->best_sim, &sr->top[0].eval) != 0 ||
        strategy_evaluate_typical(&st->w, &wp, &st->best_sim, &sr->top[0].eval) != 0)
        return 1;
    sr->top[0].feasible =
        so->memory_budget <= 0 ||
        (double)sr->top[0].eval.peak_bytes <= (double)so->memory_budget * (1.0 - so->memory_margin);
    sr->n_top = 1;
    sr->evaluations++;
    return 0;
}

/* Writes the simulated timeline of the best plan to path. search_run left the working
 * graph on the best plan; a plan that splits or folds the all-reduces is simulated on a
 * transformed copy of it (strategy_plan_graph). Returns 0, 1 (the message is printed) or
 * -1 out of memory. */
static int
write_chrome(state *st, const args *a)
{
    const char *path = a->chrome;
    dfg *tl = st->w.g; /* the working graph, or its capture copy */
    /* the search's copy reused: no second transformed graph beside it */
    if (st->sr.n_top > 0 &&
        strategy_plan_graph(&st->w, &st->sr.top[0].plan, &st->w.plan_copy, &tl, NULL) != 0)
        return -1;
    FILE *f = inputs_open_output(a->dir, path, a->force);
    int opened = f != NULL;
    chrome_options co = {1, -1, -1, NULL};
    int bad = !f || sim_run(tl, &st->best_sim) != 0 ||
              chrome_export(&st->rp, tl, &st->best_sim, &co, f) != 0;
    if (opened && fclose(f) != 0)
        bad = 1;
    if (bad && opened)
        pr_err("cannot write %s", path);
    return bad;
}

/* The advice for plan p, one line per change, under the framework's title. */
static void
print_advice(const state *st, const strategy_plan *p, int32_t batch)
{
    char buf[4096];
    st->fw->advise(&st->w, p, batch, buf, sizeof buf);
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        printf("   %s: %s\n", st->fw->title, l);
    if (st->fw->args_key && st->fw != &framework_ddp_sim) {
        st->fw->format_args(p, batch, buf, sizeof buf);
        printf("   %s: %s\n", st->fw->args_key, buf);
    }
}

/* The framework advised for and why, and what it cannot express on a trace of graph g. */
static void
print_framework(const state *st, const dfg *g)
{
    if (st->fw == st->det.fw)
        printf("framework: %s, recognised from the trace: %s\n", st->fw->name, st->det.evidence);
    else
        printf("framework: %s (--framework; the trace shows %s: %s)\n", st->fw->name,
               st->det.fw->name, st->det.evidence);
    const char *cannot = framework_cannot(st->fw, workload_has_collectives(g));
    if (cannot)
        printf("%s cannot express: %s\n", st->fw->name, cannot);
}

/* The outlier iterations the search set aside (search.h), when there are any: which,
 * why, and the steady baseline the plans are ranked against. */
static void
print_set_aside(const search_result *sr)
{
    for (int32_t i = 0; i < sr->n_aside; i++) {
        const profile_outlier *o = &sr->aside[i];
        printf("set aside: compared iteration %d, an outlier (rank %d stalled: %.1f us against its "
               "median %.1f us, MAD %.1f us)\n",
               o->iteration, o->rank, o->iter_ns / 1000.0, o->median_ns / 1000.0,
               o->mad_ns / 1000.0);
    }
    if (sr->n_aside > 0)
        printf("steady state: the plans are ranked by the mean of the other iterations "
               "(baseline %.1f us); an outlier is over its rank's median by more than "
               "%.0f x 1.4826 x MAD and by more than %.0f %%\n",
               sr->baseline.steady_ns / 1000.0, PROFILE_OUTLIER_MADS, 100 * PROFILE_OUTLIER_SHARE);
}

int32_t
optimize_cmd_rank_classes(const state *st)
{
    int32_t classes = 0;
    for (int32_t r = 0; r < st->work.n_ranks; r++)
        classes += dfg_rank_rep(&st->work, r) == r && workload_rank_weight(&st->w, r) > 0;
    return classes;
}

static void
print_text(const args *a, const state *st)
{
    const search_result *sr = &st->sr;
    const workload *w = &st->w;
    const replay *rp = &st->rp;
    double base_us = sr->baseline.eval.iter_ns / 1000.0;
    double evals_per_s = sr->elapsed_s > 0 ? (double)sr->evaluations / sr->elapsed_s : 0;
    char buf[2048];
    printf("job %s: %d ranks, %d iterations compared; replayed %.1f us per iteration\n",
           rp->job.job_id ? rp->job.job_id : "?", st->work.n_ranks,
           rp->iter_last - rp->iter_first + 1, w->measured_iter_ns / 1000.0);
    int32_t classes = optimize_cmd_rank_classes(st);
    if (st->work.rank_rep && classes < rp->job.n_present)
        printf("rank classes: %d (alike ranks simulated once, each class by its weight; "
               "--no-fold: every rank)\n",
               classes);
    printf("baseline: %.1f us per iteration, peak memory ", base_us);
    print_bytes(stdout, sr->baseline.eval.peak_bytes);
    if (a->so.memory_budget > 0) {
        printf(" (budget ");
        print_bytes(stdout, a->so.memory_budget);
        printf(sr->baseline.feasible ? ": fits)" : ": does NOT fit)");
    }
    printf("\n");
    print_set_aside(sr);
    if (st->screen_classes > 0)
        printf("screened on %d rank classes: %lld plans simulated folded, %d of them again on "
               "every rank (margin %.2f%%, largest gap between the two %.3f%%)\n",
               st->screen_classes, (long long)sr->screen_evaluations, sr->screen_verified,
               100 * sr->screen_margin, 100 * sr->screen_gap);
    printf("critical path: host %.0f%%, short kernels %.0f%%, collectives %.0f%%, "
           "other %.0f%%\n",
           100 * sr->cp_host, 100 * sr->cp_short_kernels, 100 * sr->cp_collectives,
           100 * sr->cp_other);
    if (w->fusion.why[0])
        printf("operator fusion unavailable: %s\n", w->fusion.why);
    else if (w->fusion.fixed_fit.names > 0)
        printf("per-kernel fixed cost: %.2f us, fitted on the launch sizes of %d (rank, "
               "kernel name) pairs%s\n",
               w->fusion.kernel_fixed_ns / 1000.0, w->fusion.fixed_fit.names,
               optimize_cmd_fixed_capped(w, &a->wo) ? " (capped at the shortest kernel)" : "");
    else
        printf("per-kernel fixed cost: %.2f us, the prior (--kernel-fixed-us; no kernel "
               "name with %d launch sizes to fit)%s\n",
               w->fusion.kernel_fixed_ns / 1000.0, WORKLOAD_FIT_MIN_SIZES,
               optimize_cmd_fixed_capped(w, &a->wo) ? ", capped at the shortest kernel" : "");
    if (w->buckets.why[0])
        printf("tensor fusion unavailable: %s\n", w->buckets.why);
    else if (w->buckets.n_units > 0 && w->buckets.layer_grad)
        printf("tensor partition: gradient sizes of %d layers from the allocation trace\n",
               w->layers.n_layers);
    else if (w->buckets.n_units > 0)
        printf("tensor partition: bytes ready in proportion to backward kernel time (%s)\n",
               w->buckets.grad_why);
    int buckets =
        w->buckets.n_units > 0 && !w->buckets.why[0] && (st->fw->families & STRATEGY_TENSOR);
    if (buckets && w->buckets.param_bytes)
        printf("buckets: DDP's, of whole parameters (%d parameter sizes from the copies "
               "back into the gradients; %d of %d all-reduces' bytes placed in the backward "
               "by the copies into the buckets)\n",
               w->buckets.n_params, optimize_cmd_units_by_copies(w), w->buckets.n_units);
    else if (buckets && w->buckets.grad_bytes)
        printf("buckets: DDP's, of whole layers (%d gradient sizes from the allocation "
               "trace, one tensor per layer)\n",
               w->buckets.n_grad_layers);
    else if (buckets)
        printf("buckets: parameter sizes unknown, buckets cut at any byte (%s)\n",
               w->buckets.param_why);
    if (w->layers.why[0])
        printf("recomputation unavailable: %s\n", w->layers.why);
    printf("search: %lld evaluations in %.2f s (%.0f/s)%s\n\n", (long long)sr->evaluations,
           sr->elapsed_s, evals_per_s, sr->cut_by_budget ? ", cut by --budget-s" : "");
    if (sr->n_top == 0)
        printf("no strategy predicted to do better%s.\n",
               a->so.memory_budget > 0 ? " within the memory budget" : "");
    for (int32_t i = 0; i < sr->n_top; i++) {
        const search_candidate *sc = &sr->top[i];
        strategy_kind(w, &sc->plan, buf, sizeof buf);
        if (sr->n_aside > 0)
            printf("%d. %s: %.1f us steady (%.3fx), %.1f us mean of every iteration (%.3fx), "
                   "peak memory ",
                   i + 1, buf, sc->steady_ns / 1000.0, sr->baseline.steady_ns / sc->steady_ns,
                   sc->eval.iter_ns / 1000.0, sr->baseline.eval.iter_ns / sc->eval.iter_ns);
        else
            printf("%d. %s: %.1f us (%.3fx), peak memory ", i + 1, buf, sc->eval.iter_ns / 1000.0,
                   sr->baseline.eval.iter_ns / sc->eval.iter_ns);
        print_bytes(stdout, sc->eval.peak_bytes);
        strategy_describe(w, &sc->plan, buf, sizeof buf);
        printf("\n   %s\n", buf);
        if (sc->plan.accum_k > 1)
            printf("   each extra micro-batch: device %.1f us, host %.1f us, %.0f device "
                   "operations\n",
                   sc->eval.micro_device_ns / 1000.0, sc->eval.micro_host_ns / 1000.0,
                   sc->eval.micro_launches);
        print_advice(st, &sc->plan, a->so.batch);
    }
}

/* The command's state for the checks of the job (check_job). */
typedef struct checks {
    args *a;
    state *st;
} checks;

/* The checks of the job on the process that holds the replay (mpisim_check_fn; ctx: a
 * checks): the traces read whole unless --partial, the framework chosen (and said, first:
 * said even when the trace cannot be analysed), --chrome's file allowed. Returns 0 or 1
 * (said). */
static int
check_job(void *ctx, replay *rp)
{
    checks *c = ctx;
    int rc = inputs_check_read(rp, c->a->dir, c->a->partial);
    if (rc == 0)
        rc = choose_framework(c->a, c->st);
    if (rc == 0 && !c->a->json)
        print_framework(c->st, &rp->graph);
    if (rc == 0 && c->a->chrome)
        rc = inputs_check_output(c->a->dir, c->a->chrome, c->a->force);
    if (rc < 0)
        pr_err("out of memory");
    return rc ? 1 : 0;
}

/* Opens the job into st->rp (with --mpi as process me of nprocs, sh the transport of
 * the shared reading) and prepares what the workload takes from it. Returns 0, 1 (said)
 * or -1 out of memory. */
static int
open_job(args *a, state *st, int me, int nprocs, job_share *sh)
{
    char err[DPRO_ERRBUF_SIZE];
    checks c = {a, st};
    /* each rank's events are released as its part of the graph is built, once the
     * profile has taken what it reads of them */
    a->ro.release_events = 1;
    a->ro.take_events = profile_take_rank;
    a->ro.take_ctx = &st->take;
    if (a->mpi)
        return mpisim_open(a->dir, &a->ro, sh, me, nprocs, &st->rp, check_job, &c) == 0
                   ? prepare_shared(a, st, me)
                   : 1;
    if (replay_open(a->dir, &a->ro, &st->rp, err, sizeof err) < 0) {
        pr_err("%s", err);
        return 1;
    }
    int rc = check_job(&c, &st->rp);
    return rc == 0 ? prepare(a, st) : rc;
}

/* The search, with --mpi shared by the nprocs processes. Returns 0 or 1 (said); with
 * --mpi a failure ends every process (the others may wait for this one). */
static int
search(args *a, state *st, int me, int nprocs)
{
    search_par par;
    if (a->mpi) {
        searchmpi_par(&par, me, nprocs);
        a->so.par = &par;
    }
    int rc = search_run(&st->w, &a->so, &st->sr);
    a->so.par = NULL;
    if (rc != 0) {
        pr_err("the search failed (out of memory, or the baseline cannot be simulated)");
        if (a->mpi)
            mpisim_abort(1);
        return 1;
    }
    if (a->mpi)
        pr_info("search shared by %d MPI processes: %lld simulations here in %lld rounds, "
                "%lld evaluations in the search",
                nprocs, (long long)st->sr.simulated_here, (long long)st->sr.rounds,
                (long long)st->sr.evaluations);
    return 0;
}

int
main(int argc, char **argv)
{
    args a;
    state st;
    job_share sh;
    int rc, me = 0, nprocs = 1;

    dpro_log_set_program(argv[0]);
    rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.mpi && mpisim_init(&argc, &argv, &me, &nprocs) != 0)
        return 1;
    if (me != 0)
        a.so.progress = 0;
    memset(&st, 0, sizeof st);
    st.mem_rank = -1;
    rc = open_job(&a, &st, me, nprocs, &sh);
    if (rc == 0 && !a.ro.fold && !a.full_search && !a.mpi && !a.what_if)
        rc = screen(&a, &st);
    if (rc == 0)
        rc = analyze(&a, &st);
    if (a.mpi && !mpisim_agree(rc == 0) && rc == 0)
        rc = 1; /* another process failed (it said why) */
    if (rc == 0 && a.what_if)
        rc = evaluate_what_if(&a, &st);
    else if (rc == 0)
        rc = search(&a, &st, me, nprocs);
    if (rc == 0 && a.chrome && me == 0)
        rc = write_chrome(&st, &a);
    if (rc == 0 && me == 0) {
        if (a.json)
            optimize_cmd_print_json(&a, &st);
        else
            print_text(&a, &st);
    }
    if (rc < 0)
        pr_err("out of memory");
    profile_take_free(&st.take);
    search_result_free(&st.sr);
    search_result_free(&st.screen);
    sim_result_free(&st.base);
    sim_result_free(&st.best_sim);
    workload_free(&st.w);
    if (st.have_work)
        dfg_free(&st.work);
    replay_close(&st.rp);
    if (a.mpi)
        mpisim_finalize();
    return rc < 0 ? 1 : rc;
}
