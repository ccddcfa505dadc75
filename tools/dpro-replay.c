/*
 * dpro-replay: replay a job's traces and compare the simulated iteration time with the
 * measured one; breakdown, critical path, stragglers, clock offsets.
 *
 * Exit status: 0 ok, 1 bad input (no traces, two jobs, a trace file not read whole unless
 * --partial, --chrome FILE refused or not written, --what-if-class naming no kernel,
 * --what-if-slow-rank/-host naming a rank without operations, --what-if-ranks on a job of one
 * rank), 2 usage.
 *
 * TEST ONLY: DPRO_TEST_DROP_EDGES=F in the environment drops the fraction F (0 < F <= 1)
 * of the graph's dependency edges before the timing fit (replay_drop_edges), for the test
 * that the perturbation check fails on a graph missing edges. Never set it for figures.
 */
#define PR_FMT "dpro-replay"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "dpro_log.h"
#include "json_writer.h"
#include "replay/chrome.h"
#include "replay/contention.h"
#include "replay/inputs.h"
#include "replay/kernels.h"
#include "replay/mpi_open.h"
#include "replay/mpi_sim.h"
#include "replay/replay.h"
#include "tools/dpro-replay.h"

static void
usage(FILE *f)
{
    fprintf(f, "usage: dpro-replay DIR [options]\n"
               "Replays the per-rank traces in DIR as one dataflow graph and compares the\n"
               "simulated iteration time with the measured one.\n\n"
               "  -n, --iterations N     compare N steady iterations (default: all steady)\n"
               "  -j, --json             machine-readable output (keys: ranks, iterations,\n"
               "                         measured_iter_us, simulated_iter_us,\n"
               "                         simulated_median_iter_us, error_pct,\n"
               "                         breakdown, critical_path, per_rank, p2p,\n"
               "                         typical_replay, rank_classes, ...)\n"
               "  -c, --chrome FILE      also write the simulated timeline as a Chrome trace\n"
               "                         (a new file; never an input trace or a symbolic link),\n"
               "                         the critical path overlaid as a track of its rank\n"
               "  -f, --force            let --chrome write over an existing file\n"
               "  -p, --critical-path    the critical path's composition by what ran (cpu_op,\n"
               "                         annotation, host_other, api, launch_delay,\n"
               "                         stream_gap, kernel, memcpy, memset, collective,\n"
               "                         wait_rank) and its top entries; --json key\n"
               "                         critical_path{rank, length_us, composition{CLASS_us},\n"
               "                         top[{name, kind, class, time_us, count}]}\n"
               "  -t, --top K            how many critical-path entries (default 10)\n"
               "  -q, --quiet            print only the final figure, the simulated iteration\n"
               "                         time (the what-if's when one is asked), or the\n"
               "                         --json output; no warnings, errors only\n"
               "  -w, --warmup N         skip the iterations before iteration N (iteration k\n"
               "                         ends at the end of marker k; default: detected)\n"
               "      --job ID           replay only the traces of job ID\n"
               "      --jobs N           threads reading the rank traces (default: the CPUs,\n"
               "                         at most 16; the answer is the same for any N)\n"
               "      --no-fold          simulate every rank (default: alike ranks fold into\n"
               "                         classes simulated once, as they are read when the\n"
               "                         iterations come from markers; --json key\n"
               "                         rank_classes)\n"
               "      --measured-collectives  collectives and send/recv exchanges take their\n"
               "                         measured transfer time instead of the fitted cost\n"
               "                         model's\n"
               "      --collective-model M  piecewise (default: per size range, the\n"
               "                         regime changes found in the trace; a size outside\n"
               "                         them in the protocol NCCL's tuner picks there),\n"
               "                         nearest (piecewise, a size outside them on the\n"
               "                         nearest range's line) or alpha-beta (one latency\n"
               "                         and bandwidth per operation)\n"
               "      --what-if-scale-kernels F  also predict the iteration time if every kernel\n"
               "                         took F times as long (0.5: a device twice as fast;\n"
               "                         collectives, copies and host time "
               "unchanged)\n"
               "      --what-if-class NAME  scale only the kernels named NAME (the full name,\n"
               "                         as dpro-info --kernels lists it)\n"
               "      --what-if-slow-rank R:F  also predict the iteration if rank R's GPU were\n"
               "                         F times as slow (its kernels x F; every rank is then\n"
               "                         simulated, no folding); the others wait for it\n"
               "      --what-if-slow-host R:F  the same for rank R's host: its API calls and\n"
               "                         the time between them x F\n"
               "      --what-if-ranks N  also predict the iteration on N ranks, the same work\n"
               "                         per rank (data parallel, weak scaling): collectives\n"
               "                         over all ranks repriced at N (latency grown as NCCL's\n"
               "                         ring latency, bandwidth term x the ring traffic\n"
               "                         factor), every measured rank\n"
               "                         standing for N/ranks of them (docs/models.md);\n"
               "                         its host time scaled by the CPU its host's ranks\n"
               "                         want over the cores the trace recorded\n"
               "      --what-if-ranks-per-host K  K of the N ranks on each host (default:\n"
               "                         as traced, each host keeping its ranks)\n"
               "      --what-if-network GBPS[:US]  the network between nodes when the N ranks\n"
               "                         span more nodes than the trace (one): the bus\n"
               "                         bandwidth nccl-tests report across two nodes,\n"
               "                         GB/s, and the latency each crossing adds, us:\n"
               "                         half the small sizes' time across two nodes less\n"
               "                         within one (default 0); without it the network\n"
               "                         is not predicted (said)\n"
               "                         The what-ifs given combine into one prediction.\n"
               "      --perturb N        the perturbation check: shorten each of the N kernel\n"
               "                         names with the most time, one at a time, to half,\n"
               "                         and report the prediction, the bounds the\n"
               "                         dependencies set and the stale waits\n"
               "      --mpi              run as an MPI job (mpirun -n P dpro-replay --mpi DIR):\n"
               "                         P processes simulate shares of the ranks, synchronised\n"
               "                         at collectives; process 0 prints the report, the\n"
               "                         same as without --mpi\n" INPUTS_HELP_PARTIAL
               "  -h, --help             this help\n"
               "  -V, --version          version\n\n" INPUTS_HELP_EXIT);
}

static void
print_bd(const char *label, const sim_breakdown *b)
{
    double w = b->window > 0 ? (double)b->window : 1;
    printf("  %-10s compute %9.1f us (%4.1f%%)  comm %9.1f us  overlap %9.1f us  "
           "wait-ranks %9.1f us (%4.1f%%)  host-idle %9.1f us (%4.1f%%)\n",
           label, b->compute / 1e3, 100.0 * b->compute / w, b->communication / 1e3,
           b->overlap / 1e3, b->wait_ranks / 1e3, 100.0 * b->wait_ranks / w, b->host_idle / 1e3,
           100.0 * b->host_idle / w);
}

/* Parses "RANK:FACTOR" (simrun --straggler's form) into *rank and *factor. Returns 0, or
 * -1 when s is not that. */
static int
parse_rank_factor(const char *s, int32_t *rank, double *factor)
{
    char *end;
    long r = strtol(s, &end, 10);
    int rc = end != s && *end == ':' && r >= 0 && r < INT32_MAX ? 0 : -1;
    if (rc == 0) {
        *rank = (int32_t)r;
        *factor = strtod(end + 1, &end);
        rc = *end || !(*factor > 0) || *factor > 1e6 ? -1 : 0;
    }
    return rc;
}

/* Parses the what-if option c (getopt_long's value; --perturb too) and its argument into
 * *a. Returns 0, or -1 when the argument is bad (said). */
static int
parse_what_if(int c, const char *optarg, args *a)
{
    char *end;
    int rc = 0, no_us = 0;
    switch (c) {
    case 'K':
        a->kscale = strtod(optarg, &end);
        if (*end || !(a->kscale > 0) || a->kscale > 1e6) {
            pr_err("--what-if-scale-kernels wants a factor > 0, not '%s'", optarg);
            rc = -1;
        }
        break;
    case 'C':
        a->kclass = optarg;
        break;
    case 'S':
    case 'H':
        if (parse_rank_factor(optarg, c == 'S' ? &a->slow_gpu_rank : &a->slow_host_rank,
                              c == 'S' ? &a->slow_gpu : &a->slow_host) != 0) {
            pr_err("--what-if-slow-%s wants RANK:FACTOR (a rank >= 0, a factor > 0), not '%s'",
                   c == 'S' ? "rank" : "host", optarg);
            rc = -1;
        }
        a->ro.fold = 0; /* the slowed rank must stand for itself */
        break;
    case 'X':
        a->perturb_top = (int32_t)strtol(optarg, &end, 10);
        if (*end || a->perturb_top <= 0 || a->perturb_top > 1000) {
            pr_err("--perturb wants a number of kernel names from 1 to 1000, not '%s'", optarg);
            rc = -1;
        }
        break;
    case 'N':
        a->net_gbps = strtod(optarg, &end);
        a->net_hop_us = 0;
        if (*end == ':') {
            const char *us = end + 1;
            a->net_hop_us = strtod(us, &end);
            no_us = end == us; /* a colon and no latency after it */
        }
        if (no_us || *end || !(a->net_gbps > 0) || a->net_gbps > 1e6 || !(a->net_hop_us >= 0) ||
            a->net_hop_us > 1e6) {
            pr_err("--what-if-network wants GBPS[:US] (a bandwidth > 0 and a latency >= 0), "
                   "not '%s'",
                   optarg);
            rc = -1;
        }
        break;
    case 'Q':
        a->per_host = (int32_t)strtol(optarg, &end, 10);
        if (*end || a->per_host < 1 || a->per_host > 1 << 20) {
            pr_err("--what-if-ranks-per-host wants a rank count from 1 to 1048576, not '%s'",
                   optarg);
            rc = -1;
        }
        break;
    default: /* 'R' */
        a->ranks_to = (int32_t)strtol(optarg, &end, 10);
        if (*end || a->ranks_to < 2 || a->ranks_to > 1 << 20) {
            pr_err("--what-if-ranks wants a rank count from 2 to 1048576, not '%s'", optarg);
            rc = -1;
        }
        break;
    }
    return rc;
}

/* The what-if options that need another: 0, or -1 when one lacks it (said). */
static int
check_what_ifs(const args *a)
{
    int rc = 0;
    if (a->per_host > 0 && (a->ranks_to <= 0 || a->per_host > a->ranks_to)) {
        pr_err("--what-if-ranks-per-host wants --what-if-ranks N too, and at most N ranks per "
               "host");
        rc = -1;
    } else if (a->net_gbps > 0 && a->ranks_to <= 0) {
        pr_err("--what-if-network wants --what-if-ranks N too");
        rc = -1;
    } else if (a->kclass && !(a->kscale > 0)) {
        pr_err("--what-if-class wants --what-if-scale-kernels too");
        rc = -1;
    }
    return rc;
}

/* DPRO_TEST_DROP_EDGES (tests only): the fraction of the graph's edges dropped, into
 * a->ro.drop_edges. Returns 0, or -1 when it is not a fraction in (0, 1] (said). */
static int
test_drop_edges(args *a)
{
    const char *drop = getenv("DPRO_TEST_DROP_EDGES");
    int rc = 0;
    if (drop && *drop) {
        char *end;
        a->ro.drop_edges = strtod(drop, &end);
        if (*end || !(a->ro.drop_edges > 0 && a->ro.drop_edges <= 1)) {
            pr_err("DPRO_TEST_DROP_EDGES wants a fraction in (0, 1], not '%s'", drop);
            rc = -1;
        }
    }
    return rc;
}

/* Parses the command line into *a. Returns -1 to go on, or the exit status. */
static int
parse_args(int argc, char **argv, args *a)
{
    static const struct option longopts[] = {
        {"iterations", required_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},
        {"chrome", required_argument, NULL, 'c'},
        {"critical-path", no_argument, NULL, 'p'},
        {"top", required_argument, NULL, 't'},
        {"quiet", no_argument, NULL, 'q'},
        {"job", required_argument, NULL, 'J'},
        {"jobs", required_argument, NULL, 'T'},
        {"measured-collectives", no_argument, NULL, 'M'},
        {"collective-model", required_argument, NULL, 'G'},
        {"warmup", required_argument, NULL, 'w'},
        {"what-if-scale-kernels", required_argument, NULL, 'K'},
        {"what-if-class", required_argument, NULL, 'C'},
        {"what-if-slow-rank", required_argument, NULL, 'S'},
        {"what-if-slow-host", required_argument, NULL, 'H'},
        {"what-if-ranks", required_argument, NULL, 'R'},
        {"what-if-ranks-per-host", required_argument, NULL, 'Q'},
        {"what-if-network", required_argument, NULL, 'N'},
        {"perturb", required_argument, NULL, 'X'},
        {"force", no_argument, NULL, 'f'},
        {"partial", no_argument, NULL, 'P'},
        {"no-fold", no_argument, NULL, 'F'},
        {"mpi", no_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int c;
    memset(a, 0, sizeof *a);
    a->ro.warmup = -1;
    a->ro.fold = 1;
    a->top = 10;
    a->slow_gpu_rank = a->slow_host_rank = -1;
    a->slow_gpu = a->slow_host = 1;
    while ((c = getopt_long(argc, argv, "n:jc:fpt:qw:hV", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'n':
            a->ro.iterations = (int32_t)strtol(optarg, &end, 10);
            if (*end || a->ro.iterations <= 0) {
                pr_err("--iterations wants a positive number, not '%s'", optarg);
                return 2;
            }
            break;
        case 'j':
            a->as_json = 1;
            break;
        case 'c':
            a->chrome = optarg;
            break;
        case 'p':
            a->show_cp = 1;
            break;
        case 'f':
            a->force = 1;
            break;
        case 'P':
            a->partial = 1;
            break;
        case 'F':
            a->ro.fold = 0;
            break;
        case 'm':
            if (!mpisim_built()) {
                pr_err("--mpi: this dpro-replay was built without MPI (install libopenmpi-dev "
                       "and openmpi-bin, then configure and build again)");
                return 2;
            }
            a->mpi = 1;
            break;
        case 't':
            a->top = (int)strtol(optarg, &end, 10);
            if (*end || a->top <= 0) {
                pr_err("--top wants a positive number");
                return 2;
            }
            break;
        case 'J':
            a->ro.job_id = optarg;
            break;
        case 'T':
            a->ro.jobs = (int)strtol(optarg, &end, 10);
            if (*end || a->ro.jobs <= 0) {
                pr_err("--jobs wants a positive number, not '%s'", optarg);
                return 2;
            }
            break;
        case 'M':
            a->ro.coll_duration = REPLAY_COLL_MEASURED;
            break;
        case 'G':
            if (replay_collective_model_option(&a->ro, optarg) != 0) {
                pr_err("--collective-model takes piecewise, nearest or alpha-beta, not '%s'",
                       optarg);
                return 2;
            }
            break;
        case 'w':
            a->ro.warmup = (int32_t)strtol(optarg, &end, 10);
            if (*end || a->ro.warmup < 0) {
                pr_err("--warmup wants a number >= 0");
                return 2;
            }
            break;
        case 'K':
        case 'C':
        case 'S':
        case 'H':
        case 'R':
        case 'Q':
        case 'N':
        case 'X':
            if (parse_what_if(c, optarg, a) != 0)
                return 2;
            break;
        case 'q':
            a->quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("dpro-replay (dpro) %s\n", PACKAGE_VERSION);
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
    if (check_what_ifs(a) != 0 || test_drop_edges(a) != 0)
        return 2;
    a->dir = argv[optind];
    return -1;
}

/* With --what-if-ranks: measures the host-share model into *hs and scales g's host time
 * by it at a->ranks_to ranks (a->per_host on a host), or says once why there is none.
 * Returns 0, -1 out of memory, -5 when a trace's CPU samples are malformed (said). */
static int
host_share(replay *rp, const args *a, hostshare *hs, dfg *g)
{
    int rc = hostshare_measure(rp, hs);
    if (rc == -2) {
        pr_err("%s", hs->why);
        rc = -5;
    } else if (rc == 0 && !hs->known) {
        job_warn(&rp->job,
                 "no host-share model at %d ranks (%s): each rank keeps its traced "
                 "host time",
                 a->ranks_to, hs->why);
    } else if (rc == 0) {
        if (hs->cpus_note[0])
            job_warn(&rp->job, "%s", hs->cpus_note);
        rc =
            hostshare_at(hs, a->per_host, a->ranks_to) == 0 && hostshare_apply(hs, g) >= 0 ? 0 : -1;
    }
    return rc;
}

/* The node layout of --what-if-ranks into *nl: the traced job's hosts, the nodes of a->ranks_to
 * ranks (a->per_host a node, else the most traced ranks on a host), and, when the trace is
 * of one node and the N ranks span several, the network between them priced into g's
 * collectives (replay_scale_ranks_nodes, a->net_gbps given) or said to be missing. Returns
 * 0, or -5 when that network is too slow to price (said). */
static int
node_layout(replay *rp, const args *a, dfg *g, whatif_nodes *nl)
{
    int32_t most = 0;
    nl->traced = replay_job_hosts(&rp->job, &most);
    int32_t k = a->per_host > 0 ? a->per_host : most;
    nl->to = k > 0 ? (a->ranks_to + k - 1) / k : 0;
    int rc = 0;
    nl->priced = 0;
    if (nl->traced == 1 && nl->to > 1 && a->net_gbps > 0) {
        nl->priced = replay_scale_ranks_nodes(&rp->model, g, rp->job.n_ranks, a->ranks_to, nl->to,
                                              a->net_gbps, a->net_hop_us * 1e3) >= 0;
        if (!nl->priced) {
            pr_err("%s: --what-if-network %g GB/s: the collectives would take longer than the "
                   "replay computes with",
                   a->dir, a->net_gbps);
            rc = -5;
        }
    } else if (nl->traced == 1 && nl->to > 1)
        job_warn(&rp->job,
                 "%d ranks span %d nodes of %d: the network between nodes is not in a trace of "
                 "one node and is not predicted (the collectives keep the traced node's "
                 "bandwidth; --what-if-network GBPS[:US] gives it)",
                 a->ranks_to, nl->to, k);
    else if (a->net_gbps > 0)
        job_warn(&rp->job, "--what-if-network unused: %s",
                 nl->traced > 1    ? "the trace spans nodes, its collectives' model has the network"
                 : nl->traced == 0 ? "no trace records its host, so the nodes are not known"
                                   : "the ranks stay on one node");
    return rc;
}

/* The waits the what-if's n_to ranks add at the collectives of g
 * (replay_rank_wait_stalled, with the stalls of hs when it is known), learned from rp's
 * compared iterations (rank 0's window), in *wait_ns. Returns 0, or -1 out of memory. */
static int
rank_wait(const replay *rp, dfg *g, int32_t n_to, const hostshare *hs, int64_t *wait_ns)
{
    int64_t w = 0, w0, w1;
    *wait_ns = 0;
    if (replay_compared_window(rp, &w0, &w1) == 0)
        w = replay_rank_wait_stalled(g, rp->job.n_ranks, n_to, w0, w1, hs->known ? hs->stall_p : 0,
                                     hs->known ? hs->stall_ns : 0);
    if (w > 0)
        *wait_ns = w;
    return w == -2 ? -1 : 0;
}

/* The what-ifs asked (--what-if-scale-kernels, --what-if-slow-rank/-host, --what-if-ranks),
 * applied together to a copy of the graph and simulated over the same iterations into
 * *ws (*hs: the host-share model of --what-if-ranks; *wait_ns: the wait its ranks add at
 * each collective). Returns 1 when *ws holds it, 0 when
 * it does not cover them, -1 out of memory, -2 when no kernel is named a->kclass, -3 when
 * a slowed rank has no operations in the graph, -4 when the job has one rank (no
 * collective to extrapolate from), -5 when a trace's CPU samples are malformed or the
 * network given is too slow to price (said). */
static int
what_if(replay *rp, const args *a, replay_summary *ws, hostshare *hs, int64_t *wait_ns,
        whatif_nodes *nl)
{
    dfg copy;
    sim_result wres;
    int rc = 0;
    memset(&wres, 0, sizeof wres);
    if (dfg_clone(&copy, &rp->graph) != 0)
        return -1;
    if (a->kscale > 0 && !a->kclass) {
        replay_scale_kernels(&copy, a->kscale);
    } else if (a->kscale > 0) {
        int32_t name = dfg_intern(&copy, a->kclass);
        rc = name < 0 ? -1 : replay_scale_class(&copy, name, a->kscale) <= 0 ? -2 : 0;
    }
    if (rc == 0 && a->slow_gpu_rank >= 0 &&
        replay_slow_rank(&copy, a->slow_gpu_rank, a->slow_gpu, 1) <= 0)
        rc = -3;
    if (rc == 0 && a->slow_host_rank >= 0 &&
        replay_slow_rank(&copy, a->slow_host_rank, 1, a->slow_host) <= 0)
        rc = -3;
    if (rc == 0 && a->ranks_to > 0 &&
        replay_scale_ranks(&rp->model, &copy, rp->job.n_ranks, a->ranks_to) < 0)
        rc = -4;
    if (rc == 0 && a->ranks_to > 0)
        rc = node_layout(rp, a, &copy, nl);
    if (rc == 0 && a->ranks_to > 0)
        rc = host_share(rp, a, hs, &copy);
    if (rc == 0 && a->ranks_to > 0)
        rc = rank_wait(rp, &copy, a->ranks_to, hs, wait_ns);
    if (rc == 0 &&
        (replay_predict(rp, &copy, &wres) < 0 || replay_summarize(rp, &copy, &wres, ws) != 0))
        job_warn(&rp->job, "the what-if simulation does not cover the compared iterations");
    else if (rc == 0)
        rc = 1;
    sim_result_free(&wres);
    dfg_free(&copy);
    return rc;
}

/* The perturbation check's rows, one a kernel name, as reports show names
 * (kernels_display_names: different kernels that would show one name numbered). */
static void
print_perturb_rows(const dfg *g, const replay_perturbation *p)
{
    const char **names = malloc((size_t)(p->n > 0 ? p->n : 1) * sizeof *names);
    kernels_name_buf *shown = malloc((size_t)(p->n > 0 ? p->n : 1) * sizeof *shown);
    if (!names || !shown) {
        pr_err("out of memory");
        p = NULL;
    }
    for (int32_t k = 0; p && k < p->n; k++)
        names[k] = dfg_name(g, p->cls[k].name);
    if (p)
        kernels_display_names(names, (size_t)p->n, shown); /* plain names if out of memory */
    for (int32_t k = 0; p && k < p->n; k++) {
        const replay_perturb_class *c = &p->cls[k];
        printf("%12.1f %12.1f %14.1f %14.1f %10.1f  %s\n", p->baseline_us - c->predicted_us,
               (1 - p->scale) * c->total_us, c->predicted_us, c->without_us, c->stale_wait_us,
               shown[k].text);
    }
    free(names);
    free(shown);
}

/* The critical path's first `top` entries, one a row; a node's name as reports show
 * kernels (kernels_display_names over the rows' node names: different kernels that would
 * show one name numbered), a cpu_op's or annotation's as recorded. */
static void
print_cp_rows(const dfg *g, const replay_summary *s, int top)
{
    int32_t n = s->n_cp < top ? s->n_cp : top, k = 0;
    const char **names = malloc((size_t)(n > 0 ? n : 1) * sizeof *names);
    kernels_name_buf *shown = malloc((size_t)(n > 0 ? n : 1) * sizeof *shown);
    int32_t *slot = malloc((size_t)(n > 0 ? n : 1) * sizeof *slot);
    if (!names || !shown || !slot) {
        pr_err("out of memory");
        n = 0;
    }
    for (int32_t i = 0; i < n; i++) {
        slot[i] = s->cp[i].op ? -1 : k;
        if (!s->cp[i].op)
            names[k++] = dfg_name(g, s->cp[i].name);
    }
    if (n > 0)
        kernels_display_names(names, (size_t)k, shown); /* plain names if out of memory */
    for (int32_t i = 0; i < n; i++) {
        const replay_cp_entry *e = &s->cp[i];
        const char *nm = e->op ? (*e->op ? e->op : "(no op recorded)") : shown[slot[i]].text;
        printf("  %10.1f us %5.1f%%  %-12s x%-5d %s\n", e->total_ns / 1e3,
               s->cp_length_ns ? 100.0 * e->total_ns / s->cp_length_ns : 0,
               replay_cp_class_name(e->cls), e->count, nm);
    }
    free(names);
    free(shown);
    free(slot);
}

/* The what-if's part of the text report: what was changed, the predicted iteration and
 * breakdown, and with --what-if-ranks what the prediction assumes. */
static void
print_text_whatif(const report *rep)
{
    const replay *rp = rep->rp;
    const replay_summary *s = rep->s, *ws = rep->ws;
    const double kscale = rep->a->kscale;
    char buf[KERNELS_SHORT_NAME_MAX + 8];
    const args *a = rep->a;
    printf("\nwhat-if,");
    if (a->kclass)
        printf(" the kernels named %s x %g;", kernels_short_name(a->kclass, 1, buf, sizeof buf),
               kscale);
    else if (kscale > 0)
        printf(" every kernel x %g;", kscale);
    if (a->slow_gpu_rank >= 0)
        printf(" rank %d's kernels x %g;", a->slow_gpu_rank, a->slow_gpu);
    if (a->slow_host_rank >= 0)
        printf(" rank %d's host time x %g;", a->slow_host_rank, a->slow_host);
    if (a->ranks_to > 0)
        printf(" %d ranks instead of %d;", a->ranks_to, rp->job.n_ranks);
    printf(" iteration %.1f us (simulated as measured %.1f us, speedup %.3f)\n", ws->simulated_us,
           s->simulated_us, ws->simulated_us > 0 ? s->simulated_us / ws->simulated_us : 0);
    print_bd("predicted", &ws->simulated_bd);
    for (int k = 0; a->ranks_to > 0 && replay_cmd_ranks_assumed(&rp->model, k); k++)
        printf("  assumed: %s\n", replay_cmd_ranks_assumed(&rp->model, k));
    if (a->ranks_to > 0 && rep->hs->known) {
        char line[512];
        replay_cmd_host_share_line(rep->hs, line, sizeof line);
        printf("  host share: %s\n", line);
    }
    if (a->ranks_to > 0)
        printf("  waits at %d ranks: each collective +%.1f us (the latest of %d jittering "
               "and stalled arrivals, learned from the trace's)\n",
               a->ranks_to, (double)rep->rank_wait_ns / 1e3, a->ranks_to);
    if (a->ranks_to > 0 && rep->nodes.priced)
        printf("  network: %d nodes (the trace's %d), %g GB/s and +%g us a crossing "
               "(--what-if-network)\n",
               rep->nodes.to, rep->nodes.traced, a->net_gbps, a->net_hop_us);
}

static void
print_text(const report *rep)
{
    const replay *rp = rep->rp;
    const replay_summary *s = rep->s;
    const dfg *g = &rp->graph;
    const int have_whatif = rep->have_whatif, show_cp = rep->a->show_cp, top = rep->a->top;
    int64_t nodes, edges;
    int32_t groups, classes = 0;
    dfg_job_sizes(g, &nodes, &edges, &groups);
    printf("job %s: %d of %d ranks, %lld nodes, %lld edges, %d collectives\n",
           rp->job.job_id && *rp->job.job_id ? rp->job.job_id : "(no id)", rp->job.n_present,
           rp->job.n_ranks, (long long)nodes, (long long)edges, groups);
    for (int32_t r = 0; r < g->n_ranks; r++)
        classes += dfg_rank_rep(g, r) == r && dfg_rank_weight(g, r) > 0 &&
                   (r >= rp->job.n_ranks || rp->job.ranks[r].reader);
    if (g->rank_rep && classes < rp->job.n_present)
        printf("rank classes: %d (alike ranks simulated once: %d nodes; %d ranks folded while "
               "read; --no-fold: every rank)\n",
               classes, g->n_nodes, rp->job.n_folded);
    if (rp->iter_last < rp->iter_first)
        printf("iterations compared: none found; the whole trace is compared as one\n");
    else
        printf("iterations compared: %d (from iteration %d; warm-up skipped)\n", s->iterations,
               s->first_iteration);
    if (rp->p2p.ends > 0 || rp->p2p.no_peer > 0)
        printf("send/recv: %lld transfer ends, %lld matched with their peer into %d "
               "exchanges, %lld unmatched, %lld without a peer (measured durations)\n",
               (long long)rp->p2p.ends, (long long)rp->p2p.matched, rp->p2p.groups,
               (long long)rp->p2p.unmatched, (long long)rp->p2p.no_peer);
    printf("\n%-6s %14s %14s %8s %12s %14s\n", "rank", "measured us", "simulated us", "error",
           "clock us", "others wait us");
    for (int32_t r = 0; r < s->n_ranks; r++) {
        replay_rank_summary *q = &s->rank[r];
        if (!q->present)
            continue;
        printf("%-6d %14.1f %14.1f %7.2f%% %12.1f%s %14.1f\n", r, q->measured_us, q->simulated_us,
               q->error_pct, q->clock_offset_us, q->clock_aligned ? " " : "?",
               q->straggler_blame_us);
    }
    printf("%-6s %14.1f %14.1f %7.2f%%\n", "all", s->measured_us, s->simulated_us, s->error_pct);
    if (rep->have_typical && rep->typ->iterations > 1) {
        printf("typical-duration replay (each operation's median over the %d compared "
               "iterations; %lld of %lld operations found in every one; the ranks' wait at "
               "each collective %.1f us): %.1f us, error %.2f%% against the measured mean "
               "(the medians alone: %.1f us, %.2f%%; with means instead: %.1f us, %.2f%%)\n",
               rep->typ->iterations, (long long)rep->typ->matched, (long long)rep->typ->nodes,
               (double)rep->typ->rank_wait_ns / 1e3, rep->typ->predicted_us, rep->typ->error_pct,
               rep->typ->medians_only_predicted_us, rep->typ->medians_only_error_pct,
               rep->typ->mean_predicted_us, rep->typ->mean_error_pct);
        if (rep->typ->drawn_samples > 0)
            printf("drawn replay (each rank's iterations' own values, their order drawn per rank; "
                   "mean of %d samples, %.1f to %.1f us): %.1f us, error %.2f%% against the "
                   "measured mean\n",
                   rep->typ->drawn_samples, rep->typ->drawn_min_us, rep->typ->drawn_max_us,
                   rep->typ->drawn_predicted_us, rep->typ->drawn_error_pct);
        else if (rep->typ->drawn_absent)
            printf("drawn replay: none (%s)\n", rep->typ->drawn_absent);
    } else if (rep->have_typical)
        printf("typical-duration replay: one compared iteration, so it is the exact replay\n");
    printf("\nbreakdown per iteration (mean over ranks):\n");
    print_bd("measured", &s->measured_bd);
    print_bd("simulated", &s->simulated_bd);
    printf("\nclock alignment: %s, residual median %.2f us, max %.2f us%s\n",
           rp->align_source == 1   ? "from collective device ends"
           : rp->align_source == 2 ? "from collective host call ends (approximate)"
                                   : "none (no collectives)",
           rp->align.residual_median_us, rp->align.residual_max_us,
           rp->align.n_unaligned ? " (some ranks unaligned: '?')" : "");
    int any = 0;
    for (int32_t r = 0; r < s->n_ranks; r++) {
        replay_rank_summary *q = &s->rank[r];
        if (q->present && q->straggler_blame_us > REPLAY_STRAGGLER_SHARE * s->measured_us &&
            q->straggler_blame_us > REPLAY_STRAGGLER_MIN_US) {
            if (!any)
                printf("\nstragglers (the others wait for them):\n");
            any = 1;
            printf("  rank %d: others wait %.1f us per iteration; last to arrive at %d "
                   "collectives\n",
                   r, q->straggler_blame_us, q->last_arrivals);
        }
    }
    if (!any)
        printf("\nstragglers: none (no rank makes the others wait more than 2%%)\n");
    if (have_whatif)
        print_text_whatif(rep);
    if (rep->have_perturb) {
        const replay_perturbation *p = rep->pt;
        printf("\nperturbation check: each kernel name alone x %g (iteration %.1f us, stale "
               "waits %.1f us)\n%12s %12s %14s %14s %10s  %s\n",
               p->scale, p->baseline_us, p->baseline_stale_us, "saving us", "max saving",
               "predicted us", "without us", "stale us", "kernel");
        print_perturb_rows(g, p);
    }
    if (show_cp) {
        printf("\ncritical path of the last compared iteration (ends on rank %d, %.1f us):\n",
               s->cp_rank, s->cp_length_ns / 1e3);
        printf("  composition:");
        for (int c = 0, k = 0; c < REPLAY_CP_NCLASSES; c++) {
            if (!s->cp_class_ns[c])
                continue;
            printf("%s %s %.1f us (%.1f%%)", k++ ? "," : "", replay_cp_class_name(c),
                   s->cp_class_ns[c] / 1e3,
                   s->cp_length_ns ? 100.0 * s->cp_class_ns[c] / s->cp_length_ns : 0);
        }
        printf("\n");
        print_cp_rows(g, s, top);
    }
}

/* -q: the final figure alone, the simulated iteration time (the what-if's when one was
 * asked and covers the compared iterations). */
static void
print_quiet(const report *rep)
{
    if (rep->have_whatif > 0)
        printf("what-if iteration %.1f us\n", rep->ws->simulated_us);
    else
        printf("simulated iteration %.1f us\n", rep->s->simulated_us);
}

/* Writes the simulated timeline to path (a file that inputs_open_output allows), with the
 * critical path of s (the summary of that simulation) overlaid. Returns 0, or 1 when it
 * could not. */
static int
write_chrome(replay *rp, const replay_summary *s, const args *a)
{
    const char *path = a->chrome;
    int status = 0;
    FILE *f = inputs_open_output(a->dir, path, a->force);
    chrome_options co = {1, -1, -1, s};
    if (!f)
        status = 1;
    else if (chrome_export(rp, &rp->graph, &rp->sim, &co, f) != 0) {
        pr_err("cannot write %s", path);
        status = 1;
    }
    int32_t folded = chrome_folded_ranks(rp, &rp->graph);
    if (status == 0 && folded > 0)
        pr_warn("%s: %d of %d ranks are folded into alike ranks' classes and have no tracks "
                "of their own (their timeline is their representative's); --no-fold writes "
                "every rank",
                path, folded, rp->job.n_present);
    if (f && fclose(f) != 0)
        status = 1;
    return status;
}

/* With DPRO_LOG=info: this process's peak resident size so far, after step (where the
 * memory of a run goes, docs/figures.md). */
static void
log_peak(int me, const char *step)
{
    struct rusage ru;
    if (dpro_log_level() >= DPRO_LOG_INFO && getrusage(RUSAGE_SELF, &ru) == 0)
        pr_info("process %d: peak %.1f MiB after %s", me, (double)ru.ru_maxrss / 1024.0, step);
}

/* The checks of the replay before it is simulated (mpisim_check_fn; ctx: the args): the
 * traces read whole unless --partial, --chrome's file allowed. Returns 0, or 1 (said). */
static int
check_replay(void *ctx, replay *rp)
{
    const args *a = ctx;
    return inputs_check_read(rp, a->dir, a->partial) == 0 &&
                   (!a->chrome || inputs_check_output(a->dir, a->chrome, a->force) == 0)
               ? 0
               : 1;
}

/* Simulates rp->graph into rp->sim: in this process, or with --mpi over every process of
 * the MPI job (mpi_sim.h; process 0 then holds the whole timeline). Returns 0, or -1
 * (out of memory, said; with --mpi on every process). */
static int
simulate(replay *rp, const args *a)
{
    if (!a->mpi) {
        if (replay_simulate(rp) == 0)
            return 0;
        pr_err("out of memory simulating");
        return -1;
    }
    mpisim_stats st;
    if (mpisim_run(&rp->graph, &rp->sim, &st) != 0) {
        pr_err("out of memory simulating");
        return -1;
    }
    sim_result_trim(&rp->sim); /* as replay_simulate: the result is kept, the scratch not */
    rp->simulated = 1;
    pr_info("simulated by %d MPI processes: %d ranks and %lld nodes here, %lld exchanges, "
            "%lld group arrivals and %lld edge ends exchanged, %lld groups on one process",
            st.processes, st.ranks_here, (long long)st.nodes_here, (long long)st.rounds,
            (long long)st.group_msgs, (long long)st.edge_msgs, (long long)st.local_groups);
    return 0;
}

int
main(int argc, char **argv)
{
    args a;
    replay rp;
    replay_summary s, ws;
    replay_typical typ;
    replay_perturbation pt;
    hostshare hs;
    char err[2048];
    int status = 1;

    dpro_log_set_program(argv[0]);
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0)
        return rc;
    if (a.quiet)
        dpro_log_set_level(DPRO_LOG_ERROR);
    int me = 0, nprocs = 1;
    if (a.mpi && mpisim_init(&argc, &argv, &me, &nprocs) != 0)
        return 1;
    memset(&s, 0, sizeof s);
    memset(&ws, 0, sizeof ws);
    memset(&pt, 0, sizeof pt);
    memset(&hs, 0, sizeof hs);
    memset(&rp, 0, sizeof rp);
    a.ro.release_events = 1; /* nothing below reads an event once the graph is built */
    /* with --mpi, every process reads its share of the traces, process 0 gathers them,
     * builds the graph and hands it out */
    job_share sh;
    int ok;
    if (a.mpi)
        ok = mpisim_open(a.dir, &a.ro, &sh, me, nprocs, &rp, check_replay, &a) == 0;
    else if (!(ok = replay_open(a.dir, &a.ro, &rp, err, sizeof err) == 0))
        pr_err("%s", err);
    else
        ok = check_replay(&a, &rp) == 0;
    if (!ok)
        goto out;
    log_peak(me, "the graph");
    int simulated = simulate(&rp, &a) == 0;
    log_peak(me, "the simulation");
    if (!simulated || me != 0) {
        status = me != 0 ? 0 : 1;
        goto out;
    }
    if (replay_summarize(&rp, &rp.graph, &rp.sim, &s) != 0) {
        pr_err("out of memory");
        goto out;
    }
    log_peak(me, "the summary");
    if (rp.sim.n_unfinished > 0)
        job_warn(&rp.job,
                 "%d operations could not be simulated (circular dependencies, e.g. around "
                 "'%s'); the simulated times are partial",
                 rp.sim.n_unfinished, dfg_name(&rp.graph, rp.graph.name[rp.sim.first_unfinished]));
    report rep = {&rp, &s, &ws, 0, &typ, 0, &pt, 0, &hs, &a, 0, {0, 0, 0}};
    if ((a.kscale > 0 || a.slow_gpu_rank >= 0 || a.slow_host_rank >= 0 || a.ranks_to > 0) &&
        (rep.have_whatif = what_if(&rp, &a, &ws, &hs, &rep.rank_wait_ns, &rep.nodes)) < 0) {
        if (rep.have_whatif == -2)
            pr_err("%s: no kernel is named '%s' (--what-if-class)", a.dir, a.kclass);
        else if (rep.have_whatif == -4)
            pr_err("%s: --what-if-ranks wants a job of at least 2 ranks (this one has %d)", a.dir,
                   rp.job.n_ranks);
        else if (rep.have_whatif == -5)
            ; /* said */
        else if (rep.have_whatif == -3)
            pr_err("%s: rank %d has no operations in the trace (--what-if-slow-%s; ranks 0 to "
                   "%d)",
                   a.dir, a.slow_gpu_rank >= 0 ? a.slow_gpu_rank : a.slow_host_rank,
                   a.slow_gpu_rank >= 0 ? "rank" : "host", rp.job.n_ranks - 1);
        else
            pr_err("out of memory");
        goto out;
    }
    log_peak(me, "the what-ifs");
    /* the report reads of the exact timeline only the iterations' ends once summarized;
     * --chrome writes all of it. -q without --json prints neither the typical replay nor
     * the perturbation check, so their simulations are not run. */
    int printed = !a.quiet || a.as_json;
    memset(&typ, 0, sizeof typ);
    if ((!a.chrome && replay_release_timeline(&rp) != 0) ||
        (printed && (rc = replay_typical_replay(&rp, &typ)) < 0) ||
        (printed && a.perturb_top > 0 && (rc = replay_perturb(&rp, a.perturb_top, 0.5, &pt)) < 0)) {
        pr_err("out of memory");
        goto out;
    }
    log_peak(me, "the typical replay (and --perturb)");
    rep.have_typical = typ.iterations > 0 && typ.predicted_us > 0;
    rep.have_perturb = printed && a.perturb_top > 0 && rc == 0;
    if (printed && a.perturb_top > 0 && !rep.have_perturb)
        job_warn(&rp.job, "the perturbation check's simulations do not cover the compared "
                          "iterations");
    if (a.as_json)
        replay_cmd_print_json(&rep);
    else if (a.quiet)
        print_quiet(&rep);
    else
        print_text(&rep);
    log_peak(me, "the report");
    status = a.chrome ? write_chrome(&rp, &s, &a) : 0;
out:
    hostshare_free(&hs);
    replay_perturbation_free(&pt);
    replay_summary_free(&ws);
    replay_summary_free(&s);
    replay_close(&rp);
    if (a.mpi)
        mpisim_finalize();
    return status;
}
