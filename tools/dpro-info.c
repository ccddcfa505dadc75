/*
 * dpro-info: what a set of traces holds: ranks, hosts, events by kind, time span, bytes
 * on disk, bytes per event, dropped events; with --kernels, where the device time goes.
 *
 *   dpro-info DIR|FILE... [--json] [--quick] [--kernels[=K]]
 *
 * Counts by kind need the events decoded; that is done unless --quick is given, in which
 * case only the batches table is read. --kernels uses the same pass over the events: device
 * time by category (compute, communication, memcpy, memset) and the K kernel names that
 * take the most, per file and over all files. Exit codes: 0 ok, 1 bad input, 2 usage.
 */
#include "config.h"
#include "dprotrace.h"
#include "json_writer.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NKINDS (DPRO_KIND_MAX_KNOWN + 1)
#define KERNELS_DEFAULT_TOP 10
#define KERNELS_MAX_TOP 1000000
#define SHORT_NAME_MAX 80

/* Device time of one kernel name, or of one category of device operations. */
typedef struct kstat {
    const char *name; /* full kernel name, owned by a reader; NULL for categories */
    uint64_t count, total_ns, min_ns, max_ns;
    int comm; /* name is an NCCL kernel (set when the name is first met) */
} kstat;

enum { KCAT_COMPUTE, KCAT_COMM, KCAT_MEMCPY, KCAT_MEMSET, KCAT_COUNT };
static const char *const kcat_names[KCAT_COUNT] = {"compute", "communication", "memcpy", "memset"};

/* Where the device time of one file (or of all files) goes. */
typedef struct kbreakdown {
    kstat cat[KCAT_COUNT];
    kstat *names; /* kernels by name, most device time first; malloc'd */
    size_t nnames;
} kbreakdown;

typedef struct file_info {
    const char *path;
    const char *host;
    int64_t rank, world, pid;
    const char *source;
    dpro_trace_summary sum;
    uint64_t by_kind[NKINDS]; /* [0]: unknown kinds */
    uint64_t decoded, bad_batches;
    char err[512];
    int failed;
    kbreakdown kern; /* with --kernels */
} file_info;

static void
usage(FILE *out)
{
    fprintf(out,
            "usage: dpro-info [--json] [--quick] [--kernels[=K]] DIR|FILE...\n"
            "  Summarise dpro traces: ranks, hosts, events by kind, time span,\n"
            "  bytes on disk and per event, dropped events.\n"
            "  --json         machine-readable output (keys: ranks, events, events_by_kind,\n"
            "                 bytes, bytes_per_event, dropped, files; kernels)\n"
            "  --quick        do not decode events (no counts by kind)\n"
            "  --kernels[=K]  kernel breakdown per file and over all files: device time\n"
            "                 by category (compute, communication, memcpy, memset) and\n"
            "                 the K kernel names with the most device time (default %d)\n"
            "  --help, --version\n",
            KERNELS_DEFAULT_TOP);
}

/* Adds one duration to s. */
static void
kstat_add(kstat *s, uint64_t ns)
{
    if (s->count == 0 || ns < s->min_ns)
        s->min_ns = ns;
    if (ns > s->max_ns)
        s->max_ns = ns;
    s->count++;
    s->total_ns += ns;
}

/* Folds b into a (a->name is kept). */
static void
kstat_merge(kstat *a, const kstat *b)
{
    if (!b->count)
        return;
    if (a->count == 0 || b->min_ns < a->min_ns)
        a->min_ns = b->min_ns;
    if (b->max_ns > a->max_ns)
        a->max_ns = b->max_ns;
    a->count += b->count;
    a->total_ns += b->total_ns;
}

/* Whether a kernel name is an NCCL kernel ("nccl" anywhere, any case, as HTA decides). */
static int
is_comm_kernel(const char *name)
{
    for (const char *p = name; *p; p++)
        if (tolower((unsigned char)p[0]) == 'n' && tolower((unsigned char)p[1]) == 'c' &&
            tolower((unsigned char)p[2]) == 'c' && tolower((unsigned char)p[3]) == 'l')
            return 1;
    return 0;
}

/* Orders kernel stats by device time, most first; ties by name. */
static int
kstat_cmp_total(const void *a, const void *b)
{
    const kstat *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int
kstat_cmp_name(const void *a, const void *b)
{
    return strcmp(((const kstat *)a)->name, ((const kstat *)b)->name);
}

/* Per-file accumulation: kernels by string id (ids above the reader's count are taken as
 * 0, the empty name, which is what dpro_reader_string gives for them). */
typedef struct kcollect {
    kbreakdown *out;
    kstat *by_id; /* nstrings + 1 entries */
    uint32_t nstrings;
} kcollect;

/* Starts collecting the breakdown of r into out; returns 0, or -1 out of memory. */
static int
kcollect_init(kcollect *kc, dpro_reader *r, kbreakdown *out)
{
    kc->out = out;
    kc->nstrings = dpro_reader_string_count(r);
    kc->by_id = calloc((size_t)kc->nstrings + 1, sizeof *kc->by_id);
    if (!kc->by_id)
        return -1;
    for (uint32_t id = 0; id <= kc->nstrings; id++) {
        kc->by_id[id].name = dpro_reader_string(r, id);
        kc->by_id[id].comm = -1; /* not classified yet */
    }
    return 0;
}

/* Counts one event (device operations only; others are ignored). */
static void
kcollect_event(kcollect *kc, const dpro_event *ev)
{
    uint64_t ns = ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
    switch (ev->kind) {
    case DPRO_KIND_KERNEL: {
        kstat *s = &kc->by_id[ev->name <= kc->nstrings ? ev->name : 0];
        if (s->comm < 0)
            s->comm = is_comm_kernel(s->name);
        kstat_add(s, ns);
        kstat_add(&kc->out->cat[s->comm ? KCAT_COMM : KCAT_COMPUTE], ns);
        break;
    }
    case DPRO_KIND_MEMCPY:
        kstat_add(&kc->out->cat[KCAT_MEMCPY], ns);
        break;
    case DPRO_KIND_MEMSET:
        kstat_add(&kc->out->cat[KCAT_MEMSET], ns);
        break;
    default:
        break;
    }
}

/* Ends the collection: out->names gets the kernels met, most device time first. Returns 0,
 * or -1 out of memory. Frees kc's own memory either way. */
static int
kcollect_finish(kcollect *kc)
{
    size_t n = 0;
    for (uint32_t id = 0; id <= kc->nstrings; id++)
        n += kc->by_id[id].count != 0;
    kc->out->names = malloc((n ? n : 1) * sizeof *kc->out->names);
    if (!kc->out->names) {
        free(kc->by_id);
        return -1;
    }
    n = 0;
    for (uint32_t id = 0; id <= kc->nstrings; id++)
        if (kc->by_id[id].count)
            kc->out->names[n++] = kc->by_id[id];
    kc->out->nnames = n;
    qsort(kc->out->names, n, sizeof *kc->out->names, kstat_cmp_total);
    free(kc->by_id);
    kc->by_id = NULL;
    return 0;
}

/* Merges the breakdowns of the files that were read into all (names from several files
 * joined by their text). Returns 0, or -1 out of memory. */
static int
kbreakdown_merge(kbreakdown *all, const file_info *fi, size_t nfiles)
{
    size_t n = 0, m = 0;
    memset(all, 0, sizeof *all);
    for (size_t i = 0; i < nfiles; i++)
        if (!fi[i].failed)
            n += fi[i].kern.nnames;
    all->names = malloc((n ? n : 1) * sizeof *all->names);
    if (!all->names)
        return -1;
    for (size_t i = 0; i < nfiles; i++) {
        if (fi[i].failed)
            continue;
        for (int c = 0; c < KCAT_COUNT; c++)
            kstat_merge(&all->cat[c], &fi[i].kern.cat[c]);
        memcpy(all->names + m, fi[i].kern.names, fi[i].kern.nnames * sizeof *all->names);
        m += fi[i].kern.nnames;
    }
    qsort(all->names, n, sizeof *all->names, kstat_cmp_name);
    m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && strcmp(all->names[m - 1].name, all->names[i].name) == 0)
            kstat_merge(&all->names[m - 1], &all->names[i]);
        else
            all->names[m++] = all->names[i];
    }
    all->nnames = m;
    qsort(all->names, m, sizeof *all->names, kstat_cmp_total);
    return 0;
}

/* Summed device time of a breakdown (all categories). */
static uint64_t
kbreakdown_device_ns(const kbreakdown *k, uint64_t *ops)
{
    uint64_t ns = 0, n = 0;
    for (int c = 0; c < KCAT_COUNT; c++) {
        ns += k->cat[c].total_ns;
        n += k->cat[c].count;
    }
    if (ops)
        *ops = n;
    return ns;
}

/* Whether s[0..n) is a non-empty C identifier. */
static int
is_identifier(const char *s, size_t n)
{
    if (!n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_')
            return 0;
    return 1;
}

/*
 * Writes a short form of a C++ kernel name into buf (len bytes; at most SHORT_NAME_MAX
 * characters, longer ones cut with "..."), as Holistic Trace Analysis shortens names: the
 * return type, template arguments, the parameter list and whatever follows it are dropped,
 * and "(anonymous namespace)::" with them; "void at::native::elementwise_kernel<128, 2,
 * F>(int, F)" gives "at::native::elementwise_kernel". With targs != 0 the first template
 * argument list is kept, one level deep and without namespaces ("<128, 2, F>";
 * "cudnn::bn_kernel<float, 32, ns::Op<...> >" gives "cudnn::bn_kernel<float, 32, Op<...>>"),
 * to tell apart instances of one template. A name that shortens to nothing is kept whole;
 * the empty name is shown as "(unnamed)". Returns buf.
 */
static char *
short_kernel_name(const char *name, int targs, char *buf, size_t len)
{
    static const char anon[] = "(anonymous namespace)::";
    char stack[64], *tmp;
    size_t depth = 0, o = 0, tok = 0, nlen = strlen(name);
    int lists = 0;  /* template lists opened at depth 0 so far */
    int inlist = 0; /* inside the first one, and keeping it */

    if (!*name) {
        snprintf(buf, len, "(unnamed)");
        return buf;
    }
    tmp = malloc(3 * nlen + 4); /* "<>" may become "<...>", "," become ", " */
    if (!tmp) {
        snprintf(buf, len, "%.*s", SHORT_NAME_MAX, name);
        return buf;
    }
    for (size_t i = 0; i < nlen; i++) {
        char c = name[i];
        if (strncmp(name + i, anon, sizeof anon - 1) == 0) {
            i += sizeof anon - 2;
            continue;
        }
        if (c == '-' && name[i + 1] == '>') { /* "->" is not a bracket */
            if (depth == 0 || (depth == 1 && inlist)) {
                tmp[o++] = c;
                tmp[o++] = '>';
            }
            i++;
            continue;
        }
        if (c == '<' || c == '(' || (c == '{' && depth)) {
            if (depth == 0 && c == '(' && o == 0)
                break; /* a name that starts with a parameter list: nothing to keep */
            if (depth == sizeof stack)
                break;
            if (depth == 0 && c == '<' && targs && ++lists == 1) {
                inlist = 1;
                tmp[o++] = c;
                tok = o;
            } else if (depth == 1 && inlist) {
                tmp[o++] = c;
                memcpy(tmp + o, "...", 3);
                o += 3;
            }
            stack[depth++] = c;
            continue;
        }
        if (depth && (c == '>' || c == ')' || c == '}') &&
            stack[depth - 1] == (c == '>'   ? '<'
                                 : c == ')' ? '('
                                            : '{')) {
            depth--;
            if (inlist && depth <= 1) {
                while (o && tmp[o - 1] == ' ')
                    o--;
                tmp[o++] = c;
                if (depth == 0)
                    inlist = 0;
            }
            if (depth == 0 && c == ')')
                break; /* the end of the parameter list: what follows is not the name */
            continue;
        }
        if (depth == 0) {
            if (c == ' ') {
                o = 0; /* what came before was the return type */
                lists = 0;
                continue;
            }
            tmp[o++] = c;
        } else if (depth == 1 && inlist) {
            if (c == ':' && name[i + 1] == ':' && is_identifier(tmp + tok, o - tok)) {
                o = tok; /* drop a namespace (not the scope of a function or template) */
                i++;
                continue;
            }
            if (c == ' ' && (tmp[o - 1] == ' ' || tmp[o - 1] == '<'))
                continue;
            tmp[o++] = c;
            if (c == ',')
                tmp[o++] = ' ';
            if (c == ',' || c == ' ')
                tok = o;
        }
    }
    while (o && tmp[o - 1] == ' ')
        o--;
    tmp[o] = '\0';
    if (!o)
        snprintf(tmp, nlen + 4, "%s", name);
    if (strlen(tmp) > SHORT_NAME_MAX)
        snprintf(buf, len, "%.*s...", SHORT_NAME_MAX - 3, tmp);
    else
        snprintf(buf, len, "%s", tmp);
    free(tmp);
    return buf;
}

/* Reads one file into fi (with kernels != 0, its kernel breakdown too); returns 0, or 1
 * when the file is bad (fi->err says why). */
static int
inspect(file_info *fi, dpro_reader **keep, int quick, int kernels)
{
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    dpro_event ev;
    kcollect kc;
    int rc = dpro_reader_open(fi->path, &r, fi->err, sizeof fi->err);
    if (rc != DPRO_OK) {
        fi->failed = 1;
        return 1;
    }
    *keep = r;
    fi->host = dpro_reader_meta(r, DPRO_META_HOST);
    fi->source = dpro_reader_meta(r, DPRO_META_SOURCE);
    fi->rank = dpro_reader_meta_int(r, DPRO_META_RANK, -1);
    fi->world = dpro_reader_meta_int(r, DPRO_META_WORLD_SIZE, -1);
    fi->pid = dpro_reader_meta_int(r, DPRO_META_PID, -1);
    if (dpro_reader_summary(r, &fi->sum) != DPRO_OK) {
        snprintf(fi->err, sizeof fi->err, "%s", dpro_reader_errmsg(r));
        fi->failed = 1;
        return 1;
    }
    if (quick)
        return 0;
    if (kernels && kcollect_init(&kc, r, &fi->kern) != 0) {
        snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
        return 1;
    }
    if (dpro_iter_open(r, &it) != DPRO_OK) {
        snprintf(fi->err, sizeof fi->err, "%s", dpro_reader_errmsg(r));
        fi->failed = 1;
        if (kernels)
            kcollect_finish(&kc);
        return 1;
    }
    for (;;) {
        rc = dpro_iter_next(it, &ev);
        if (rc == 0)
            break;
        if (rc < 0) {
            fprintf(stderr, "dpro-info: %s\n", dpro_reader_errmsg(r));
            continue;
        }
        fi->by_kind[ev.kind < NKINDS ? ev.kind : 0]++;
        fi->decoded++;
        if (kernels)
            kcollect_event(&kc, &ev);
    }
    fi->bad_batches = dpro_iter_bad_batches(it);
    dpro_iter_close(it);
    if (kernels && kcollect_finish(&kc) != 0) {
        snprintf(fi->err, sizeof fi->err, "%s: out of memory", fi->path);
        fi->failed = 1;
        return 1;
    }
    return fi->bad_batches ? 1 : 0;
}

static void
human_bytes(char *buf, size_t len, uint64_t b)
{
    if (b >= (1ull << 30))
        snprintf(buf, len, "%.2f GiB", b / (double)(1ull << 30));
    else if (b >= (1ull << 20))
        snprintf(buf, len, "%.2f MiB", b / (double)(1ull << 20));
    else if (b >= (1ull << 10))
        snprintf(buf, len, "%.1f KiB", b / 1024.0);
    else
        snprintf(buf, len, "%" PRIu64 " B", b);
}

static double
share_pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Writes one breakdown as a JSON object's members: device time, categories, top kernels. */
static void
json_kbreakdown(json_writer *w, const kbreakdown *k, size_t top)
{
    char sbuf[SHORT_NAME_MAX + 8];
    uint64_t ops, dev = kbreakdown_device_ns(k, &ops);
    json_kv_double(w, "device_us", dev / 1e3);
    json_kv_uint(w, "device_ops", ops);
    json_key(w, "categories");
    json_begin_object(w);
    for (int c = 0; c < KCAT_COUNT; c++) {
        json_key(w, kcat_names[c]);
        json_begin_object(w);
        json_kv_uint(w, "count", k->cat[c].count);
        json_kv_double(w, "us", k->cat[c].total_ns / 1e3);
        json_kv_double(w, "share_pct", share_pct(k->cat[c].total_ns, dev));
        json_end_object(w);
    }
    json_end_object(w);
    json_kv_uint(w, "kernel_names", k->nnames);
    json_key(w, "top_kernels");
    json_begin_array(w);
    for (size_t i = 0; i < k->nnames && i < top; i++) {
        const kstat *s = &k->names[i];
        json_begin_object(w);
        json_kv_string(w, "name", s->name);
        json_kv_string(w, "short_name", short_kernel_name(s->name, 0, sbuf, sizeof sbuf));
        json_kv_bool(w, "communication", s->comm > 0);
        json_kv_uint(w, "count", s->count);
        json_kv_double(w, "total_us", s->total_ns / 1e3);
        json_kv_double(w, "mean_us", s->total_ns / 1e3 / (double)s->count);
        json_kv_double(w, "min_us", s->min_ns / 1e3);
        json_kv_double(w, "max_us", s->max_ns / 1e3);
        json_kv_double(w, "share_pct", share_pct(s->total_ns, dev));
        json_end_object(w);
    }
    json_end_array(w);
}

typedef struct shown_name {
    char text[SHORT_NAME_MAX + 8];
    size_t row;
} shown_name;

static int
shown_name_cmp(const void *a, const void *b)
{
    return strcmp(((const shown_name *)a)->text, ((const shown_name *)b)->text);
}

/* Prints one breakdown as text under a heading line. Kernel names are shortened; rows
 * whose short names would be alike get their template arguments too. */
static void
print_kbreakdown(const char *title, const kbreakdown *k, size_t top)
{
    uint64_t ops, dev = kbreakdown_device_ns(k, &ops);
    size_t n = k->nnames < top ? k->nnames : top;
    shown_name *names = NULL, *byrow = NULL;

    printf("\n%s: device time %.3f ms in %" PRIu64 " operations\n", title, dev / 1e6, ops);
    printf("  %-14s %10s %12s %7s\n", "category", "count", "total ms", "share");
    for (int c = 0; c < KCAT_COUNT; c++)
        printf("  %-14s %10" PRIu64 " %12.3f %6.1f%%\n", kcat_names[c], k->cat[c].count,
               k->cat[c].total_ns / 1e6, share_pct(k->cat[c].total_ns, dev));
    if (!n) {
        printf("  no kernels\n");
        return;
    }
    names = malloc(n * sizeof *names);
    byrow = malloc(n * sizeof *byrow);
    if (!names || !byrow) {
        fprintf(stderr, "dpro-info: out of memory\n");
        free(names);
        free(byrow);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        short_kernel_name(k->names[i].name, 0, names[i].text, sizeof names[i].text);
        names[i].row = i;
    }
    qsort(names, n, sizeof *names, shown_name_cmp);
    for (size_t i = 0; i < n; i++) {
        int alike = (i > 0 && strcmp(names[i - 1].text, names[i].text) == 0) ||
                    (i + 1 < n && strcmp(names[i + 1].text, names[i].text) == 0);
        size_t row = names[i].row;
        if (alike)
            short_kernel_name(k->names[row].name, 1, byrow[row].text, sizeof byrow[row].text);
        else
            memcpy(byrow[row].text, names[i].text, sizeof byrow[row].text);
    }
    printf("  top %zu of %zu kernel names by device time:\n", n, k->nnames);
    printf("  %10s %12s %10s %10s %10s %7s  %s\n", "count", "total ms", "mean us", "min us",
           "max us", "share", "name");
    for (size_t i = 0; i < n; i++) {
        const kstat *s = &k->names[i];
        printf("  %10" PRIu64 " %12.3f %10.2f %10.2f %10.2f %6.1f%%  %s\n", s->count,
               s->total_ns / 1e6, s->total_ns / 1e3 / (double)s->count, s->min_ns / 1e3,
               s->max_ns / 1e3, share_pct(s->total_ns, dev), byrow[i].text);
    }
    free(names);
    free(byrow);
}

/* Parses the K of --kernels=K (1..KERNELS_MAX_TOP); returns 0, or -1 if it is not one. */
static int
parse_top(const char *arg, size_t *top)
{
    char *end;
    unsigned long long v;
    if (!arg) {
        *top = KERNELS_DEFAULT_TOP;
        return 0;
    }
    if (!isdigit((unsigned char)arg[0]))
        return -1;
    errno = 0;
    v = strtoull(arg, &end, 10);
    if (errno || *end || v < 1 || v > KERNELS_MAX_TOP)
        return -1;
    *top = (size_t)v;
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, 0, 'j'},          {"quick", no_argument, 0, 'q'},
        {"kernels", optional_argument, 0, 'k'}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0}};
    int json = 0, quick = 0, kernels = 0, c, status = 0;
    size_t top = KERNELS_DEFAULT_TOP, nok = 0;
    kbreakdown all = {0};
    char **files = NULL, err[512];
    size_t nfiles = 0;
    file_info *fi;
    dpro_reader **readers;
    uint64_t events = 0, bytes = 0, dropped = 0, by_kind[NKINDS] = {0}, first = UINT64_MAX,
             last = 0;

    while ((c = getopt_long(argc, argv, "jqhV", opts, NULL)) != -1) {
        switch (c) {
        case 'j':
            json = 1;
            break;
        case 'q':
            quick = 1;
            break;
        case 'k':
            kernels = 1;
            if (parse_top(optarg, &top) != 0) {
                fprintf(stderr, "dpro-info: --kernels=%s: K must be a whole number from 1 to %d\n",
                        optarg, KERNELS_MAX_TOP);
                usage(stderr);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        case 'V':
            printf("dpro-info %s (trace schema %d.%d)\n", PACKAGE_VERSION, DPRO_SCHEMA_MAJOR,
                   DPRO_SCHEMA_MINOR);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return 2;
    }
    if (kernels && quick) {
        fprintf(stderr, "dpro-info: --kernels needs the events decoded: not with --quick\n");
        usage(stderr);
        return 2;
    }
    if (dpro_list_traces((const char *const *)argv + optind, (size_t)(argc - optind), &files,
                         &nfiles, err, sizeof err) != DPRO_OK) {
        fprintf(stderr, "dpro-info: %s\n", err);
        return 1;
    }
    fi = calloc(nfiles, sizeof *fi);
    readers = calloc(nfiles, sizeof *readers);
    if (!fi || !readers) {
        fprintf(stderr, "dpro-info: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nfiles; i++) {
        fi[i].path = files[i];
        if (inspect(&fi[i], &readers[i], quick, kernels))
            status = 1;
        if (fi[i].failed) {
            fprintf(stderr, "dpro-info: %s\n", fi[i].err);
            continue;
        }
        events += fi[i].sum.events;
        bytes += fi[i].sum.file_bytes;
        dropped += fi[i].sum.dropped;
        for (int k = 0; k < NKINDS; k++)
            by_kind[k] += fi[i].by_kind[k];
        if (fi[i].sum.events && fi[i].sum.first_ns < first)
            first = fi[i].sum.first_ns;
        if (fi[i].sum.last_ns > last)
            last = fi[i].sum.last_ns;
        nok++;
    }
    if (first == UINT64_MAX)
        first = last = 0;
    if (kernels && kbreakdown_merge(&all, fi, nfiles) != 0) {
        fprintf(stderr, "dpro-info: out of memory\n");
        return 1;
    }

    if (json) {
        json_writer w;
        json_init(&w, stdout, 1);
        json_begin_object(&w);
        json_kv_uint(&w, "ranks", nok);
        json_kv_uint(&w, "events", events);
        json_key(&w, "events_by_kind");
        json_begin_object(&w);
        if (!quick)
            for (int k = 1; k < NKINDS; k++)
                json_kv_uint(&w, dpro_kind_name((uint32_t)k), by_kind[k]);
        if (!quick && by_kind[0])
            json_kv_uint(&w, "unknown", by_kind[0]);
        json_end_object(&w);
        json_kv_uint(&w, "bytes", bytes);
        json_kv_double(&w, "bytes_per_event", events ? (double)bytes / events : 0.0);
        json_kv_uint(&w, "dropped", dropped);
        json_kv_uint(&w, "span_ns", last - first);
        json_key(&w, "files");
        json_begin_array(&w);
        for (size_t i = 0; i < nfiles; i++) {
            json_begin_object(&w);
            json_kv_string(&w, "path", fi[i].path);
            if (fi[i].failed) {
                json_kv_string(&w, "error", fi[i].err);
                json_end_object(&w);
                continue;
            }
            json_kv_int(&w, "rank", fi[i].rank);
            json_kv_int(&w, "world_size", fi[i].world);
            json_kv_string(&w, "host", fi[i].host ? fi[i].host : "");
            json_kv_int(&w, "pid", fi[i].pid);
            json_kv_string(&w, "source", fi[i].source ? fi[i].source : "");
            json_kv_uint(&w, "events", fi[i].sum.events);
            json_kv_uint(&w, "batches", fi[i].sum.batches);
            json_kv_uint(&w, "bytes", fi[i].sum.file_bytes);
            json_kv_uint(&w, "event_bytes", fi[i].sum.event_bytes);
            json_kv_uint(&w, "dropped", fi[i].sum.dropped);
            json_kv_uint(&w, "bad_batches", fi[i].bad_batches);
            json_kv_uint(&w, "first_ns", fi[i].sum.first_ns);
            json_kv_uint(&w, "last_ns", fi[i].sum.last_ns);
            json_end_object(&w);
        }
        json_end_array(&w);
        if (kernels) {
            json_key(&w, "kernels");
            json_begin_object(&w);
            json_kv_uint(&w, "top", top);
            json_key(&w, "per_rank");
            json_begin_array(&w);
            for (size_t i = 0; i < nfiles; i++) {
                if (fi[i].failed)
                    continue;
                json_begin_object(&w);
                json_kv_string(&w, "path", fi[i].path);
                json_kv_int(&w, "rank", fi[i].rank);
                json_kbreakdown(&w, &fi[i].kern, top);
                json_end_object(&w);
            }
            json_end_array(&w);
            json_key(&w, "all");
            json_begin_object(&w);
            json_kv_uint(&w, "files", nok);
            json_kbreakdown(&w, &all, top);
            json_end_object(&w);
            json_end_object(&w);
        }
        json_end_object(&w);
    } else {
        char b1[32];
        printf("%-8s %-16s %8s %12s %10s %10s %8s  %s\n", "rank", "host", "pid", "events", "bytes",
               "span(ms)", "dropped", "file");
        for (size_t i = 0; i < nfiles; i++) {
            if (fi[i].failed) {
                printf("%-8s %-16s %8s %12s %10s %10s %8s  %s (error)\n", "?", "?", "?", "?", "?",
                       "?", "?", fi[i].path);
                continue;
            }
            human_bytes(b1, sizeof b1, fi[i].sum.file_bytes);
            printf("%-8" PRId64 " %-16.16s %8" PRId64 " %12" PRIu64 " %10s %10.1f %8" PRIu64
                   "  %s\n",
                   fi[i].rank, fi[i].host ? fi[i].host : "-", fi[i].pid, fi[i].sum.events, b1,
                   (fi[i].sum.last_ns - fi[i].sum.first_ns) / 1e6, fi[i].sum.dropped, fi[i].path);
        }
        human_bytes(b1, sizeof b1, bytes);
        printf("\n%zu trace file(s), %" PRIu64 " events, %s on disk, %.2f bytes/event, "
               "%" PRIu64 " dropped, span %.3f s\n",
               nfiles, events, b1, events ? (double)bytes / events : 0.0, dropped,
               (last - first) / 1e9);
        if (!quick) {
            printf("events by kind:");
            for (int k = 1; k < NKINDS; k++)
                if (by_kind[k])
                    printf(" %s=%" PRIu64, dpro_kind_name((uint32_t)k), by_kind[k]);
            if (by_kind[0])
                printf(" unknown=%" PRIu64, by_kind[0]);
            printf("\n");
        }
        if (dropped)
            printf("warning: %" PRIu64 " events were dropped by the collector (buffers full)\n",
                   dropped);
        for (size_t i = 0; kernels && i < nfiles; i++) {
            char title[600];
            if (fi[i].failed)
                continue;
            snprintf(title, sizeof title, "kernel breakdown, rank %" PRId64 " (%s)", fi[i].rank,
                     fi[i].path);
            print_kbreakdown(title, &fi[i].kern, top);
        }
        if (kernels && nok > 1) {
            char title[64];
            snprintf(title, sizeof title, "kernel breakdown, all ranks (%zu files)", nok);
            print_kbreakdown(title, &all, top);
        }
    }
    for (size_t i = 0; i < nfiles; i++) {
        free(fi[i].kern.names);
        dpro_reader_close(readers[i]);
    }
    free(all.names);
    free(readers);
    free(fi);
    dpro_free_paths(files, nfiles);
    return status;
}
