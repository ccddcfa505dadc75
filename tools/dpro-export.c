/*
 * dpro-export: write a job's measured (or simulated) timeline as a Chrome trace that
 * ui.perfetto.dev and chrome://tracing open.
 *
 * Exit status: 0 ok, 1 bad input (a trace file not read whole unless --partial, an
 * --iterations window past the traces' iterations) or FILE refused or not written, 2 usage.
 */
#define PR_FMT "dpro-export"
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dpro_log.h"
#include "json_writer.h"
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
               "flows, collectives linked across ranks, NVTX ranges, memory counters, the\n"
               "threads' CPU and runqueue shares.\n\n"
               "  -o, --chrome FILE      output file ('-' for stdout): a new file, never an\n"
               "                         input trace or a symbolic link\n"
               "  -s, --simulated        the simulated timeline instead of the measured one\n"
               "  -k, --kineto           event for event, as the PyTorch profiler writes it: one\n"
               "                         rank's trace (--rank N where DIR holds several), its op\n"
               "                         arguments, flows and memory events kept (what an\n"
               "                         imported Kineto trace carries comes back)\n"
               "  -r, --rank N           with --kineto: the trace of rank N\n"
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

/* ---- --kineto: the events of one trace file as Kineto writes them ----------------------- */

/* Writes ns as microseconds with three decimals (Kineto's "ts" and "dur"). */
static void
put_us(FILE *f, uint64_t ns)
{
    fprintf(f, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static void
put_str(FILE *f, const char *s)
{
    fputc('"', f);
    json_escape(f, s, strlen(s));
    fputc('"', f);
}

/* The members of a stored args object text ("{...}", written by the importer) after the
 * ones already written (*n of them). */
static void
put_args_text(FILE *f, const char *text, int *n)
{
    size_t len = strlen(text);
    if (len < 3 || text[0] != '{' || text[len - 1] != '}')
        return;
    fprintf(f, "%s%.*s", *n ? "," : "", (int)(len - 2), text + 1);
    (*n)++;
}

/* The value text after "key": in a stored args object text, or NULL. The importer keeps
 * there what a field could not hold (a stream of -1, a bandwidth that is not bytes over
 * duration): that text wins over the field. */
static const char *
kept_arg(const dpro_reader *r, const dpro_event *e, const char *key)
{
    if (!e->args)
        return NULL;
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(dpro_reader_string(r, e->args), pat);
    return p ? p + strlen(pat) : NULL;
}

#define ARG_U(key, v) fprintf(f, "%s\"" key "\":%" PRIu64, n++ ? "," : "", (uint64_t)(v))
#define ARG_I(key, v) fprintf(f, "%s\"" key "\":%" PRId64, n++ ? "," : "", (int64_t)(v))
/* a generated argument, unless the stored text has it */
#define GEN_U(key, v)                                                                              \
    if (!kept_arg(r, e, key))                                                                      \
    ARG_U(key, v)
#define GEN_I(key, v)                                                                              \
    if (!kept_arg(r, e, key))                                                                      \
    ARG_I(key, v)

/* The ids, shapes, dtypes and other arguments an imported event carries. */
static int
put_common_args(FILE *f, const dpro_reader *r, const dpro_event *e, int n)
{
    if (e->has & DPRO_HAS_EXTERNAL_ID)
        ARG_U("External id", e->external_id);
    if (e->has & DPRO_HAS_RECORD_ID)
        ARG_U("Record function id", e->record_id);
    if (e->has & DPRO_HAS_SEQ_NR)
        ARG_U("Sequence number", e->seq_nr);
    if (e->has & DPRO_HAS_FWD_THREAD)
        ARG_U("Fwd thread id", e->fwd_thread);
    if (e->has & DPRO_HAS_EV_IDX)
        ARG_U("Ev Idx", e->ev_idx);
    if (e->shapes)
        fprintf(f, "%s\"Input Dims\":%s", n++ ? "," : "", dpro_reader_string(r, e->shapes));
    if (e->dtypes)
        fprintf(f, "%s\"Input type\":%s", n++ ? "," : "", dpro_reader_string(r, e->dtypes));
    if (e->args)
        put_args_text(f, dpro_reader_string(r, e->args), &n);
    /* the execution trace's host graph (dpro-import et) */
    if (e->has & DPRO_HAS_ET_ID)
        ARG_U("ET id", e->et_id);
    if (e->has & DPRO_HAS_ET_PARENT)
        ARG_U("ET parent", e->et_parent);
    if (e->et_deps)
        fprintf(f, "%s\"ET deps\":%s", n++ ? "," : "", dpro_reader_string(r, e->et_deps));
    return n;
}

/* The head of an event: phase, category, name, pid, tid, ts. */
static void
put_head(FILE *f, int *first, char ph, const char *cat, const char *name, int64_t pid, uint64_t tid,
         uint64_t ts)
{
    fprintf(f, "%s\n{\"ph\":\"%c\",\"cat\":", *first ? "" : ",", ph);
    *first = 0;
    put_str(f, cat);
    fputs(",\"name\":", f);
    put_str(f, name);
    /* a host thread id past 2^31 was written negative (see the importer) */
    if (tid > INT32_MAX && tid <= UINT32_MAX)
        fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId32 ",\"ts\":", pid, (int32_t)(uint32_t)tid);
    else
        fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRIu64 ",\"ts\":", pid, tid);
    put_us(f, ts);
}

/* put_head of a complete event on a row given as a signed number. */
static void
put_head_signed(FILE *f, int *first, const char *cat, const char *name, int64_t pid, int64_t tid,
                uint64_t ts)
{
    fprintf(f, "%s\n{\"ph\":\"X\",\"cat\":", *first ? "" : ",");
    *first = 0;
    put_str(f, cat);
    fputs(",\"name\":", f);
    put_str(f, name);
    fprintf(f, ",\"pid\":%" PRId64 ",\"tid\":%" PRId64 ",\"ts\":", pid, tid);
    put_us(f, ts);
}

/* One event; COLLECTIVE events (derived from the kernels, which carry their arguments)
 * are not written. */
static void
put_event(FILE *f, const dpro_reader *r, const dpro_event *e, int64_t pid, int *first)
{
    const char *name = dpro_reader_string(r, e->name), *name2 = dpro_reader_string(r, e->name2);
    uint64_t dur = e->end_ns > e->start_ns ? e->end_ns - e->start_ns : 0;
    int n = 0;
    switch (e->kind) {
    case DPRO_KIND_API:
        put_head(f, first, 'X', e->subkind == DPRO_API_DRIVER ? "cuda_driver" : "cuda_runtime",
                 name, pid, e->thread, e->start_ns);
        break;
    case DPRO_KIND_KERNEL:
        put_head(f, first, 'X', "kernel", name, e->device, e->stream, e->start_ns);
        break;
    case DPRO_KIND_MEMCPY:
    case DPRO_KIND_MEMSET:
        put_head(f, first, 'X', e->kind == DPRO_KIND_MEMCPY ? "gpu_memcpy" : "gpu_memset", name,
                 e->device, e->stream, e->start_ns);
        break;
    case DPRO_KIND_SYNC: {
        /* a sync on no stream (-1, kept in the args text) has that as its row */
        const char *st = kept_arg(r, e, "stream");
        if (e->has & DPRO_HAS_ROW)
            put_head(f, first, 'X', "cuda_sync", name, e->device, e->address, e->start_ns);
        else if (st && *st == '-')
            put_head_signed(f, first, "cuda_sync", name, e->device, strtoll(st, NULL, 10),
                            e->start_ns);
        else
            put_head(f, first, 'X', "cuda_sync", name, e->device, e->stream, e->start_ns);
        break;
    }
    case DPRO_KIND_MEMORY:
        put_head(f, first, 'i', "cpu_instant_event", "[memory]", pid, e->thread, e->start_ns);
        fputs(",\"s\":\"t\",\"args\":{", f);
        if (e->has & DPRO_HAS_TOTALS) {
            ARG_U("Total Reserved", e->total_reserved);
            ARG_U("Total Allocated", e->total_allocated);
        }
        ARG_I("Bytes", e->subkind == DPRO_MEM_FREE ? -(int64_t)e->bytes : (int64_t)e->bytes);
        ARG_U("Addr", e->address);
        ARG_U("Device Id", e->device);
        ARG_I("Device Type", e->value == DPRO_MEMSPACE_HOST ? 0 : 1);
        put_common_args(f, r, e, n);
        fputs("}}", f);
        return;
    case DPRO_KIND_MARKER:
        if (e->subkind == DPRO_MARK_INSTANT) {
            put_head(f, first, 'i', *name2 && strcmp(name2, "instant") ? name2 : "instant", name,
                     pid, e->thread, e->start_ns);
            fputs(",\"s\":\"t\"", f);
            if (e->has || e->args || e->shapes || e->dtypes || e->et_deps) {
                fputs(",\"args\":{", f);
                put_common_args(f, r, e, 0);
                fputc('}', f);
            }
            fputc('}', f);
            return;
        }
        if (*name2 && strcmp(name2, "gpu_user_annotation") == 0)
            put_head(f, first, 'X', name2, name, e->device, e->stream, e->start_ns);
        else
            put_head(f, first, 'X', *name2 ? name2 : "user_annotation", name, pid, e->thread,
                     e->start_ns);
        break;
    case DPRO_KIND_FLOW:
        put_head(f, first,
                 e->subkind == DPRO_FLOW_START    ? 's'
                 : e->subkind == DPRO_FLOW_FINISH ? 'f'
                                                  : 't',
                 name2, name, e->value, e->thread, e->start_ns);
        fprintf(f, ",\"id\":%" PRIu64 "%s}", e->correlation,
                e->has & DPRO_HAS_BP_ENCLOSING ? ",\"bp\":\"e\"" : "");
        return;
    default:
        return;
    }
    fputs(",\"dur\":", f);
    put_us(f, dur);
    fputs(",\"args\":{", f);
    n = put_common_args(f, r, e, 0);
    switch (e->kind) {
    case DPRO_KIND_API:
        if (e->correlation)
            GEN_U("correlation", e->correlation);
        break;
    case DPRO_KIND_KERNEL:
        GEN_U("device", e->device);
        GEN_U("stream", e->stream);
        if (e->correlation)
            GEN_U("correlation", e->correlation);
        if (e->grid[0]) { /* a launch configuration was recorded (ROCm's kernels have none) */
            fprintf(f, "%s\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u]", n++ ? "," : "", e->grid[0],
                    e->grid[1], e->grid[2], e->block[0], e->block[1], e->block[2]);
            GEN_U("shared memory", e->shared_mem);
        }
        break;
    case DPRO_KIND_MEMCPY:
    case DPRO_KIND_MEMSET:
        GEN_U("device", e->device);
        GEN_U("stream", e->stream);
        if (e->correlation)
            GEN_U("correlation", e->correlation);
        GEN_U("bytes", e->bytes);
        if (dur && !kept_arg(r, e, "memory bandwidth (GB/s)")) /* bytes per ns: GB/s */
            fprintf(f, "%s\"memory bandwidth (GB/s)\":%.17g", n++ ? "," : "",
                    (double)e->bytes / (double)dur);
        break;
    case DPRO_KIND_SYNC:
        GEN_U("device", e->device);
        if (!(e->has & DPRO_HAS_ROW))
            GEN_U("stream", e->stream);
        if (e->correlation)
            GEN_U("correlation", e->correlation);
        if (e->peer >= 0)
            GEN_I("wait_on_stream", e->peer);
        if (e->peer >= 0 || e->object)
            GEN_U("wait_on_cuda_event_id", e->object);
        if (e->value > 0)
            GEN_I("wait_on_cuda_event_record_corr_id", e->value);
        break;
    default:
        break;
    }
    fputs("}}", f);
}

/* An op joined to an execution trace (dpro-import et): its node id, where it starts, and
 * its data dependencies (et_deps' string id, 0: none). */
typedef struct et_op {
    uint64_t id, start_ns;
    uint32_t thread, deps;
} et_op;

/* The ops of one export with an execution-trace id, in trace order, gathered during the
 * export's one pass; their flows are written after it. */
typedef struct et_ops {
    et_op *op;
    size_t n, cap;
} et_ops;

static int
cmp_et_op(const void *a, const void *b)
{
    uint64_t x = ((const et_op *)a)->id, y = ((const et_op *)b)->id;
    return x < y ? -1 : x > y;
}

/* Keeps e in *ops when it carries an execution-trace id. Returns 0, or 1 with an error
 * printed. */
static int
et_ops_add(et_ops *ops, const dpro_event *e)
{
    if (!(e->has & DPRO_HAS_ET_ID))
        return 0;
    if (ops->n == ops->cap) {
        size_t cap = ops->cap ? 2 * ops->cap : 1024;
        et_op *x = realloc(ops->op, cap * sizeof(*x));
        if (!x) {
            pr_err("out of memory");
            return 1;
        }
        ops->op = x;
        ops->cap = cap;
    }
    ops->op[ops->n++] =
        (et_op){.id = e->et_id, .start_ns = e->start_ns, .thread = e->thread, .deps = e->et_deps};
    return 0;
}

/* Writes a flow of category et_data from the op that produced each of e's data
 * dependencies (et_deps: distances of node ids) to e; sorted holds every op by id; ids
 * from *next_id. */
static void
put_et_flows(FILE *f, const dpro_reader *r, const et_op *e, const et_op *sorted, size_t n,
             int64_t pid, int *first, uint64_t *next_id)
{
    const char *p = dpro_reader_string(r, e->deps);
    while (*p) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        char *end;
        uint64_t d = strtoull(p, &end, 10);
        p = end;
        et_op key = {.id = e->id - d};
        const et_op *from =
            d <= e->id ? bsearch(&key, sorted, n, sizeof(*sorted), cmp_et_op) : NULL;
        if (!from)
            continue; /* a producer outside the Kineto trace's window */
        put_head(f, first, 's', "et_data", "data dependency", pid, from->thread, from->start_ns);
        fprintf(f, ",\"id\":%" PRIu64 "}", *next_id);
        put_head(f, first, 'f', "et_data", "data dependency", pid, e->thread, e->start_ns);
        fprintf(f, ",\"id\":%" PRIu64 ",\"bp\":\"e\"}", (*next_id)++);
    }
}

/* Writes the flows of the execution trace's data dependencies of ops (in trace order),
 * with ids above any Kineto flow's. Returns 0, or 1 with an error printed. */
static int
put_et_all_flows(FILE *f, const dpro_reader *r, const et_ops *ops, int64_t pid, int *first)
{
    uint64_t flow_id = 1ull << 48;
    et_op *sorted;
    if (ops->n == 0)
        return 0;
    sorted = malloc(ops->n * sizeof(*sorted));
    if (!sorted) {
        pr_err("out of memory");
        return 1;
    }
    memcpy(sorted, ops->op, ops->n * sizeof(*sorted));
    qsort(sorted, ops->n, sizeof(*sorted), cmp_et_op);
    for (size_t i = 0; i < ops->n; i++)
        if (ops->op[i].deps)
            put_et_flows(f, r, &ops->op[i], sorted, ops->n, pid, first, &flow_id);
    free(sorted);
    return 0;
}

/* Writes the trace at path as Kineto JSON to f. Returns 0, or 1 with an error printed. */
static int
export_kineto(const char *path, FILE *f)
{
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    char err[DPRO_ERRBUF_SIZE];
    int rc = 0, first = 1;
    if (dpro_reader_open(path, &r, err, sizeof err) != DPRO_OK) {
        pr_err("%s", err);
        return 1;
    }
    int64_t pid = dpro_reader_meta_int(r, DPRO_META_PID, 0);
    fputs("{\"schemaVersion\":1,", f);
    fprintf(f, "\"distributedInfo\":{\"rank\":%" PRId64 ",\"world_size\":%" PRId64 "},",
            dpro_reader_meta_int(r, DPRO_META_RANK, 0),
            dpro_reader_meta_int(r, DPRO_META_WORLD_SIZE, 1));
    const dpro_device_info *dev;
    size_t nd = dpro_reader_devices(r, &dev);
    fputs("\"deviceProperties\":[", f);
    for (size_t i = 0; i < nd; i++) {
        fprintf(f, "%s{\"id\":%u,\"name\":", i ? "," : "", dev[i].id);
        put_str(f, dev[i].name ? dev[i].name : "");
        fprintf(f,
                ",\"totalGlobalMem\":%" PRIu64 ",\"computeMajor\":%u,\"computeMinor\":%u,"
                "\"numSms\":%u,\"clockRate\":%u}",
                dev[i].total_memory, dev[i].cc_major, dev[i].cc_minor, dev[i].sm_count,
                dev[i].clock_khz);
    }
    fputs("],\"traceEvents\":[", f);
    const dpro_thread_info *th;
    size_t nt = dpro_reader_threads(r, &th);
    for (size_t i = 0; i < nt; i++) {
        fprintf(f,
                "%s\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%" PRId64 ",\"tid\":%u,"
                "\"args\":{\"name\":",
                first ? "" : ",", pid, th[i].tid);
        put_str(f, th[i].name ? th[i].name : "");
        fputs("}}", f);
        first = 0;
    }
    /* the execution trace's data dependencies become flows between the ops' slices,
     * written after the events */
    et_ops ops = {0};
    if (dpro_iter_open(r, &it) != DPRO_OK) {
        pr_err("%s", dpro_reader_errmsg(r));
        rc = 1;
    }
    while (rc == 0) {
        dpro_event e;
        int got = dpro_iter_next(it, &e);
        if (got == 0)
            break;
        if (got < 0) {
            pr_err("%s", dpro_reader_errmsg(r));
            rc = 1;
            break;
        }
        put_event(f, r, &e, pid, &first);
        rc = et_ops_add(&ops, &e);
    }
    if (rc == 0)
        rc = put_et_all_flows(f, r, &ops, pid, &first);
    fputs("\n]}\n", f);
    free(ops.op);
    dpro_iter_close(it);
    dpro_reader_close(r);
    return rc;
}

/* The trace file of --kineto under dir: the only one, or rank's (rank >= 0). Returns a
 * malloc'd path, or NULL with an error printed. */
static char *
kineto_source(const char *dir, long rank)
{
    char **files = NULL, err[DPRO_ERRBUF_SIZE], *out = NULL;
    size_t nfiles = 0, hits = 0;
    const char *paths[1] = {dir};
    if (dpro_list_traces(paths, 1, &files, &nfiles, err, sizeof err) != DPRO_OK) {
        pr_err("%s", err);
        return NULL;
    }
    for (size_t i = 0; i < nfiles; i++) {
        int take = rank < 0;
        if (rank >= 0) {
            dpro_reader *r = NULL;
            if (dpro_reader_open(files[i], &r, err, sizeof err) == DPRO_OK)
                take = dpro_reader_meta_int(r, DPRO_META_RANK, -1) == rank;
            dpro_reader_close(r);
        }
        if (take && hits++ == 0)
            out = strdup(files[i]);
    }
    if (hits != 1) {
        if (rank >= 0)
            pr_err("%s: %zu traces of rank %ld; --kineto writes one", dir, hits, rank);
        else
            pr_err("%s holds %zu traces; --kineto writes one: choose it with --rank N", dir, hits);
        free(out);
        out = NULL;
    }
    dpro_free_paths(files, nfiles);
    return out;
}

/* What the command line asks for. */
typedef struct export_args {
    const char *dir, *out;
    chrome_options co;
    replay_options ro;
    int force, partial, kineto;
    long rank;
} export_args;

/* Parses argv into a. Returns -1 to go on, or the exit status (0 after --help or
 * --version, 2 on a usage error, said on stderr). */
static int
parse_args(int argc, char **argv, export_args *a)
{
    static const struct option longopts[] = {
        {"chrome", required_argument, NULL, 'o'},
        {"simulated", no_argument, NULL, 's'},
        {"kineto", no_argument, NULL, 'k'},
        {"rank", required_argument, NULL, 'r'},
        {"iterations", required_argument, NULL, 'i'},
        {"job", required_argument, NULL, 'J'},
        {"force", no_argument, NULL, 'f'},
        {"partial", no_argument, NULL, 'P'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    int rc = -1, c;
    while (rc < 0 && (c = getopt_long(argc, argv, "o:ski:r:fhV", longopts, NULL)) != -1) {
        char *end;
        switch (c) {
        case 'o':
            a->out = optarg;
            break;
        case 's':
            a->co.simulated = 1;
            break;
        case 'k':
            a->kineto = 1;
            break;
        case 'r':
            a->rank = strtol(optarg, &end, 10);
            if (*end || end == optarg || a->rank < 0) {
                pr_err("--rank wants a rank number, not '%s'", optarg);
                rc = 2;
            }
            break;
        case 'i': {
            long first = strtol(optarg, &end, 10), last = first;
            if (*end == '-')
                last = strtol(end + 1, &end, 10);
            if (*end || first < 0 || last < first || end == optarg) {
                pr_err("--iterations wants A-B (e.g. 3-5), not '%s'", optarg);
                rc = 2;
            }
            a->co.iter_first = (int32_t)first;
            a->co.iter_last = (int32_t)last;
            break;
        }
        case 'J':
            a->ro.job_id = optarg;
            break;
        case 'f':
            a->force = 1;
            break;
        case 'P':
            a->partial = 1;
            break;
        case 'h':
            usage(stdout);
            rc = 0;
            break;
        case 'V':
            printf("dpro-export (dpro) %s\n", PACKAGE_VERSION);
            rc = 0;
            break;
        default:
            usage(stderr);
            rc = 2;
        }
    }
    if (rc < 0 && (optind + 1 != argc || !a->out)) {
        usage(stderr);
        rc = 2;
    }
    if (rc < 0)
        a->dir = argv[optind];
    if (rc < 0 && a->kineto && (a->co.simulated || a->co.iter_first >= 0 || a->ro.job_id)) {
        pr_err("--kineto writes a trace as it was recorded: not with --simulated, "
               "--iterations or --job");
        rc = 2;
    }
    if (rc < 0 && !a->kineto && a->rank >= 0) {
        pr_err("--rank goes with --kineto");
        rc = 2;
    }
    return rc;
}

/* --kineto: one rank's trace written back as Kineto JSON. Returns the exit status. */
static int
run_kineto(const export_args *a)
{
    int to_stdout = strcmp(a->out, "-") == 0, status = 1;
    char *src = kineto_source(a->dir, a->rank);
    if (src && (to_stdout || inputs_check_output(a->dir, a->out, a->force) == 0)) {
        FILE *f = to_stdout ? stdout : inputs_open_output(a->dir, a->out, a->force);
        if (f) {
            status = export_kineto(src, f);
            if (f != stdout && fclose(f) != 0)
                status = 1;
            if (status)
                pr_err("writing %s failed", a->out);
        }
    }
    free(src);
    return status;
}

/* Whether the Chrome trace's estimated size allows writing it (over WARN_BYTES: only with
 * --force, said either way; no estimate, out of memory: not at all, said). */
static int
size_allowed(replay *rp, const export_args *a)
{
    uint64_t est = 0;
    if (chrome_estimate_bytes(rp, &rp->graph, &rp->sim, &a->co, &est) != 0) {
        pr_err("out of memory estimating the trace's size");
        return 0;
    }
    if (est <= WARN_BYTES)
        return 1;
    int32_t nit = rp->iters && rp->job.n_ranks > 0 ? rp->iters[0].n - 1 : 0;
    dpro_log(a->force ? DPRO_LOG_WARN : DPRO_LOG_ERROR, PR_FMT,
             "the trace would be about %llu MB, too large for a browser to "
             "open comfortably; choose a window, e.g. --iterations %d-%d (of %d)%s",
             (unsigned long long)(est >> 20), rp->iter_first, rp->iter_first + 1, nit,
             a->force ? "; writing anyway (--force)" : ", or pass --force");
    return a->force;
}

/* The Chrome trace of the job (measured, or simulated). Returns the exit status. */
static int
run_chrome(export_args *a)
{
    int to_stdout = strcmp(a->out, "-") == 0, status = 1;
    replay rp;
    char err[2048];
    if (replay_open(a->dir, &a->ro, &rp, err, sizeof err) != 0) {
        pr_err("%s", err);
        return 1;
    }
    if (inputs_check_read(&rp, a->dir, a->partial) != 0 || check_window(&rp, &a->co) != 0 ||
        (!to_stdout && inputs_check_output(a->dir, a->out, a->force) != 0))
        goto out;
    if (a->co.simulated && replay_simulate(&rp) != 0) {
        pr_err("out of memory simulating");
        goto out;
    }
    if (!size_allowed(&rp, a))
        goto out;
    FILE *f = to_stdout ? stdout : inputs_open_output(a->dir, a->out, a->force);
    if (f) {
        status = chrome_export(&rp, &rp.graph, a->co.simulated ? &rp.sim : NULL, &a->co, f) != 0;
        if (f != stdout && fclose(f) != 0)
            status = 1;
        if (status)
            pr_err("writing %s failed", a->out);
    }
out:
    replay_close(&rp);
    return status;
}

int
main(int argc, char **argv)
{
    export_args a = {.co = {0, -1, -1}, .rank = -1};
    a.ro.warmup = -1;
    dpro_log_set_program(argv[0]);
    int rc = parse_args(argc, argv, &a);
    if (rc < 0)
        rc = a.kineto ? run_kineto(&a) : run_chrome(&a);
    return rc;
}
