/*
 * dpro-diff: two traces (or two iteration windows) compared: framework ops, annotations,
 * API calls, kernels, copies, sets and collectives added, removed, faster and slower, by
 * count and time, the largest change first (replay/diff.h says how).
 *
 *   dpro-diff A B [--json] [--top K]      A, B: DIR|FILE, or DIR|FILE@N, DIR|FILE@N-M
 *
 * Exit codes: 0 ok (differences or not), 1 bad input, 2 usage.
 */
#include "config.h"
#include "dprotrace.h"
#define PR_FMT "dpro-diff"
#include "dpro_log.h"
#include "json_writer.h"
#include "replay/diff.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIFF_DEFAULT_TOP 20

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: dpro-diff [--json] [--top K] A B\n"
            "  Compares two sets of traces by cpu_op, annotation, api call, kernel, memcpy,\n"
            "  memset and collective name: count and total time on each side, each name\n"
            "  added, removed, slower, faster or unchanged, the largest change of time\n"
            "  first. A and B: a trace file or a directory of them (ranks summed), each\n"
            "  optionally narrowed to iterations: PATH@N (the events starting within\n"
            "  ProfilerStep#N) or PATH@N-M (ProfilerStep#N to #M; figures per iteration).\n"
            "  --json         machine-readable output (keys: a, b {spec, path, files, events,\n"
            "                 first_step, last_step, iterations}; totals [{class, a_count,\n"
            "                 b_count, a_us, b_us, delta_us}]; summary {added, removed,\n"
            "                 slower, faster, unchanged}; changes [{class, name, status,\n"
            "                 a_count, b_count, a_us, b_us, delta_us, delta_pct}])\n"
            "  -t, --top K    changed names listed (default %d; 0: all)\n"
            "  --help, --version\n\n"
            "Exit status: 0 ok (whether or not the traces differ); 1 bad input (no trace,\n"
            "a damaged batch, an iteration a file does not hold); 2 usage.\n",
            DIFF_DEFAULT_TOP);
}

/* Parses argv; returns -1 to go on, else the exit status. */
static int
parse_args(int argc, char **argv, int *json, size_t *top)
{
    static const struct option opts[] = {{"json", no_argument, 0, 'j'},
                                         {"top", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {"version", no_argument, 0, 'V'},
                                         {0, 0, 0, 0}};
    int c;
    *json = 0;
    *top = DIFF_DEFAULT_TOP;
    while ((c = getopt_long(argc, argv, "jt:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            *json = 1;
            break;
        case 't': {
            char *end = NULL;
            errno = 0;
            long long k = strtoll(optarg, &end, 10);
            if (end == optarg || *end || errno || k < 0) {
                pr_err("--top %s: K must be a whole number, 0 or more", optarg);
                usage(stderr);
                return 2;
            }
            *top = (size_t)k;
            break;
        }
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("dpro-diff %s (trace schema %d.%d)\n", PACKAGE_VERSION, DPRO_SCHEMA_MAJOR,
                   DPRO_SCHEMA_MINOR);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 2) {
        pr_err("two traces to compare, A and B");
        usage(stderr);
        return 2;
    }
    return -1;
}

int
main(int argc, char **argv)
{
    int json, status;
    size_t top;
    diff_side a, b;
    diff_result d;
    char err[DPRO_ERRBUF_SIZE];

    dpro_log_set_program(argv[0]);
    status = parse_args(argc, argv, &json, &top);
    if (status >= 0)
        return status;
    memset(&b, 0, sizeof b);
    memset(&d, 0, sizeof d);
    status = diff_side_load(argv[optind], &a, err, sizeof err);
    if (status == 0)
        status = diff_side_load(argv[optind + 1], &b, err, sizeof err);
    if (status == 0 && diff_compute(&a, &b, &d) != 0) {
        snprintf(err, sizeof err, "out of memory");
        status = -1;
    }
    if (status != 0) {
        pr_err("%s", err);
    } else if (json) {
        json_writer w;
        json_init(&w, stdout, 1);
        diff_write_json(&w, &a, &b, &d, top);
        fputc('\n', stdout);
    } else {
        diff_print(stdout, &a, &b, &d, top);
    }
    diff_result_free(&d);
    diff_side_free(&a);
    diff_side_free(&b);
    return status != 0 ? 1 : 0;
}
