/*
 * dpro-export: write a job's measured (or simulated) timeline as a Chrome trace that
 * ui.perfetto.dev and chrome://tracing open.
 *
 * Exit status: 0 ok, 1 bad input (a trace file not read whole unless --partial, an
 * --iterations window past the traces' iterations) or FILE refused or not written, 2 usage.
 */
#define PR_FMT "dpro-export"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dpro_log.h"
#include "replay/chrome.h"
#include "replay/inputs.h"
#include "replay/replay.h"

#define WARN_BYTES (300ULL << 20)

static void
usage(FILE *f)
{
    fprintf(f, "usage: dpro-export DIR --chrome FILE [options]\n"
               "Writes the timeline of the traces in DIR as a Chrome trace (JSON object format):\n"
               "one process per rank, a track per host thread and per stream, launch -> kernel\n"
               "flows, collectives linked across ranks, NVTX ranges, memory counters.\n\n"
               "  -o, --chrome FILE      output file ('-' for stdout): a new file, never an\n"
               "                         input trace or a symbolic link\n"
               "  -s, --simulated        the simulated timeline instead of the measured one\n"
               "  -i, --iterations A-B   only iterations A to B (0-based; 'A' alone: one); an\n"
               "                         error past the last iteration of the traces\n"
               "      --job ID           only the traces of job ID\n"
               "  -f, --force            write even when the file would be very large, and\n"
               "                         over an existing file\n" INPUTS_HELP_PARTIAL
               "  -h, --help             this help\n"
               "  -V, --version          version\n\n" INPUTS_HELP_EXIT);
}

/* Whether the window of co (if any) lies within the iterations of every rank: iteration
 * N ends at boundary N, so a rank with n boundaries holds iterations 0 to n - 1 (what
 * follows the last boundary is no iteration), one without any iteration 0. Returns
 * 0, or 1 with an error naming the iterations there are. */
static int
check_window(const replay *rp, const chrome_options *co)
{
    int32_t held = INT32_MAX;
    int rc = 0;
    char arg[32];
    if (co->iter_first == co->iter_last)
        snprintf(arg, sizeof arg, "%d", co->iter_first);
    else
        snprintf(arg, sizeof arg, "%d-%d", co->iter_first, co->iter_last);
    for (int32_t r = 0; r < rp->graph.n_ranks && r < rp->job.n_ranks; r++) {
        const int32_t *b;
        int32_t nb = dfg_iterations(&rp->graph, r, &b);
        if (rp->job.ranks[r].reader && nb < held)
            held = nb;
    }
    if (held == INT32_MAX || held == 0)
        held = 1; /* no boundaries: the whole trace is iteration 0, as dpro-replay counts it */
    if (co->iter_first < 0) {
        rc = 0; /* no window: everything */
    } else if (co->iter_last >= held) {
        pr_err("--iterations %s: past the last iteration; the traces hold %d iteration(s), "
               "0 to %d",
               arg, held, held - 1);
        rc = 1;
    }
    return rc;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"chrome", required_argument, NULL, 'o'},
        {"simulated", no_argument, NULL, 's'},
        {"iterations", required_argument, NULL, 'i'},
        {"job", required_argument, NULL, 'J'},
        {"force", no_argument, NULL, 'f'},
        {"partial", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    const char *out = NULL;
    chrome_options co = {0, -1, -1};
    replay_options ro = {0};
    ro.warmup = -1;
    int force = 0, partial = 0, c;
    dpro_log_set_program(argv[0]);
    while ((c = getopt_long(argc, argv, "o:si:fhV", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case 's':
            co.simulated = 1;
            break;
        case 'i': {
            long a = strtol(optarg, &end, 10), b = a;
            if (*end == '-')
                b = strtol(end + 1, &end, 10);
            if (*end || a < 0 || b < a || end == optarg) {
                pr_err("--iterations wants A-B (e.g. 3-5), not '%s'", optarg);
                return 2;
            }
            co.iter_first = (int32_t)a;
            co.iter_last = (int32_t)b;
            break;
        }
        case 'J':
            ro.job_id = optarg;
            break;
        case 'f':
            force = 1;
            break;
        case 'P':
            partial = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("dpro-export (dpro) %s\n", PACKAGE_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind + 1 != argc || !out) {
        usage(stderr);
        return 2;
    }
    const char *dir = argv[optind];
    int to_stdout = strcmp(out, "-") == 0, status = 1;
    replay rp;
    char err[2048];
    if (replay_open(dir, &ro, &rp, err, sizeof err) != 0) {
        pr_err("%s", err);
        return 1;
    }
    if (inputs_check_read(&rp, dir, partial) != 0 || check_window(&rp, &co) != 0 ||
        (!to_stdout && inputs_check_output(dir, out, force) != 0))
        goto out;
    if (co.simulated && replay_simulate(&rp) != 0) {
        pr_err("out of memory simulating");
        goto out;
    }
    uint64_t est = chrome_estimate_bytes(&rp, &rp.graph, &rp.sim, &co);
    if (est > WARN_BYTES) {
        int32_t nit = rp.iters && rp.job.n_ranks > 0 ? rp.iters[0].n - 1 : 0;
        dpro_log(force ? DPRO_LOG_WARN : DPRO_LOG_ERROR, PR_FMT,
                 "the trace would be about %llu MB, too large for a browser to "
                 "open comfortably; choose a window, e.g. --iterations %d-%d (of %d)%s",
                 (unsigned long long)(est >> 20), rp.iter_first, rp.iter_first + 1, nit,
                 force ? "; writing anyway (--force)" : ", or pass --force");
        if (!force)
            goto out;
    }
    FILE *f = to_stdout ? stdout : inputs_open_output(dir, out, force);
    if (f) {
        status = chrome_export(&rp, &rp.graph, co.simulated ? &rp.sim : NULL, &co, f) != 0;
        if (f != stdout && fclose(f) != 0)
            status = 1;
        if (status)
            pr_err("writing %s failed", out);
    }
out:
    replay_close(&rp);
    return status;
}
