/* diff.c: two traces compared by operation and kernel (diff.h). */
#include "diff.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dprotrace.h"
#include "hmap.h"
#include "kernels.h"

const char *
diff_class_name(int cls)
{
    static const char *const names[DIFF_NCLASSES] = {
        "cpu_op", "annotation", "api", "kernel", "memcpy", "memset", "collective",
    };
    return cls >= 0 && cls < DIFF_NCLASSES ? names[cls] : "unknown";
}

const char *
diff_status_name(int status)
{
    static const char *const names[DIFF_NSTATUS] = {"added", "removed", "slower", "faster",
                                                    "unchanged"};
    return status >= 0 && status < DIFF_NSTATUS ? names[status] : "unknown";
}

/* Splits spec into s->path and the window. Returns 0, or 1 (errbuf says why). */
static int
parse_spec(const char *spec, diff_side *s, char *errbuf, size_t errlen)
{
    struct stat st;
    const char *at = strrchr(spec, '@');
    s->first_step = s->last_step = -1;
    if (stat(spec, &st) == 0 || !at) {
        s->path = strdup(spec);
        return s->path ? 0 : -1;
    }
    char *end = NULL;
    errno = 0;
    long long n = strtoll(at + 1, &end, 10), m = n;
    int ok = end != at + 1 && errno == 0 && n >= 0;
    if (ok && *end == '-') {
        const char *p = end + 1;
        m = strtoll(p, &end, 10);
        ok = end != p && errno == 0 && m >= n;
    }
    if (!ok || *end) {
        snprintf(errbuf, errlen,
                 "%s: no such trace, and '%s' is not an iteration window (@N or @N-M, "
                 "N <= M)",
                 spec, at);
        return 1;
    }
    s->path = strndup(spec, (size_t)(at - spec));
    s->first_step = n;
    s->last_step = m;
    return s->path ? 0 : -1;
}

/* Class of an event, or -1 when it is not counted. python_function: that string's id. */
static int
event_class(const dpro_event *e, uint32_t python_function)
{
    switch (e->kind) {
    case DPRO_KIND_API:
        return DIFF_API;
    case DPRO_KIND_KERNEL:
        return DIFF_KERNEL;
    case DPRO_KIND_MEMCPY:
        return DIFF_MEMCPY;
    case DPRO_KIND_MEMSET:
        return DIFF_MEMSET;
    case DPRO_KIND_COLLECTIVE:
        return DIFF_COLLECTIVE;
    case DPRO_KIND_MARKER:
        if (e->subkind == DPRO_MARK_CPU_OP)
            return DIFF_CPU_OP;
        if (e->subkind == DPRO_MARK_RANGE && e->thread != 0 &&
            !(python_function && e->name2 == python_function))
            return DIFF_ANNOTATION;
        return -1;
    default:
        return -1;
    }
}

/* Per-file tallies: [class][string id] (collectives: [op]). */
typedef struct tally {
    int64_t count, ns;
} tally;

typedef struct file_ctx {
    dpro_reader *r;
    const char *path;
    uint32_t nstr;
    tally *t;                           /* DIFF_NCLASSES x nstr */
    tally coll[DPRO_COLL_OP_COUNT + 1]; /* by operation; [0] unknown ones */
    uint32_t python_function;
} file_ctx;

/* Time window [*t0, *t1) of iteration markers first..last of the file. Returns 0, or 1
 * (errbuf says which marker is missing). */
static int
find_window(file_ctx *f, const diff_side *s, uint64_t *t0, uint64_t *t1, char *errbuf,
            size_t errlen)
{
    dpro_iter *it = NULL;
    dpro_event ev;
    int have0 = 0, have1 = 0, rc;
    if (dpro_iter_open(f->r, &it) != DPRO_OK) {
        snprintf(errbuf, errlen, "%s", dpro_reader_errmsg(f->r));
        return 1;
    }
    while ((rc = dpro_iter_next(it, &ev)) != 0) {
        if (rc < 0)
            break;
        if (ev.kind != DPRO_KIND_MARKER || ev.subkind != DPRO_MARK_ITERATION)
            continue;
        if (ev.value == s->first_step && !have0) {
            *t0 = ev.start_ns;
            have0 = 1;
        }
        if (ev.value == s->last_step) {
            *t1 = ev.end_ns > ev.start_ns ? ev.end_ns : ev.start_ns;
            have1 = 1;
        }
    }
    if (rc < 0)
        snprintf(errbuf, errlen, "%s", dpro_reader_errmsg(f->r));
    else if (!have0 || !have1)
        snprintf(errbuf, errlen, "%s: no iteration marker %" PRId64 " (ProfilerStep#%" PRId64 ")",
                 f->path, have0 ? s->last_step : s->first_step,
                 have0 ? s->last_step : s->first_step);
    else if (*t1 <= *t0)
        snprintf(errbuf, errlen,
                 "%s: iteration %" PRId64 " ends before iteration %" PRId64 " starts", f->path,
                 s->last_step, s->first_step);
    dpro_iter_close(it);
    return rc < 0 || !have0 || !have1 || *t1 <= *t0 ? 1 : 0;
}

/* Whether API call e launches device work (kernels, copies, sets). */
static int
launches(file_ctx *f, const dpro_event *e)
{
    switch (dpro_reader_api_class(f->r, e->name)) {
    case DPRO_API_CLASS_LAUNCH:
    case DPRO_API_CLASS_GRAPH_LAUNCH:
    case DPRO_API_CLASS_MEMCPY:
    case DPRO_API_CLASS_MEMCPY_ASYNC:
    case DPRO_API_CLASS_MEMSET:
    case DPRO_API_CLASS_MEMSET_ASYNC:
        return 1;
    default:
        return 0;
    }
}

/* Whether event e of a windowed side [t0, t1) is in its window: a host event by its
 * start, a device op by its launch call's (launched: correlation -> 1 for calls in the
 * window, 2 once a device op of it was seen, 3 for calls outside; *pending: calls in the
 * window whose device op is still to come), a device op that no call of the trace
 * launched by its own start. Returns 1, 0, or -1 out of memory. */
static int
in_window(file_ctx *f, const dpro_event *e, uint64_t t0, uint64_t t1, hmap *launched,
          int64_t *pending)
{
    int inside = e->start_ns >= t0 && e->start_ns < t1;
    if (e->kind == DPRO_KIND_API && e->correlation && launches(f, e)) {
        if (hmap_put(launched, e->correlation, inside ? 1 : 3) != 0)
            return -1;
        *pending += inside;
    }
    if ((e->kind != DPRO_KIND_KERNEL && e->kind != DPRO_KIND_MEMCPY &&
         e->kind != DPRO_KIND_MEMSET) ||
        !e->correlation)
        return inside;
    int32_t v = hmap_get(launched, e->correlation, 0);
    if (v == 1) {
        (*pending)--;
        if (hmap_put(launched, e->correlation, 2) != 0)
            return -1;
    }
    return v == 0 ? inside : v != 3;
}

/* Tallies the file's events (for a windowed side those in_window). Returns 0, 1 on a
 * damaged batch (errbuf) or -1. */
static int
tally_events(file_ctx *f, diff_side *s, char *errbuf, size_t errlen)
{
    uint64_t t0 = 0, t1 = UINT64_MAX;
    dpro_iter *it = NULL;
    dpro_event ev;
    hmap launched;
    int64_t pending = 0;
    int win = s->first_step >= 0;
    int rc = hmap_init(&launched, win ? 4096 : 1) != 0 ? -1 : 0;
    if (rc == 0 && win)
        rc = find_window(f, s, &t0, &t1, errbuf, errlen);
    /* from the start (the calls before the window launch device ops in it), on past the
     * window for the device ops launched in it */
    if (rc == 0 && dpro_iter_open(f->r, &it) != DPRO_OK) {
        snprintf(errbuf, errlen, "%s", dpro_reader_errmsg(f->r));
        rc = 1;
    }
    while (rc == 0) {
        int k = dpro_iter_next(it, &ev);
        if (k == 0 || (win && ev.start_ns >= t1 && pending <= 0))
            break;
        if (k < 0) {
            snprintf(errbuf, errlen, "%s", dpro_reader_errmsg(f->r));
            rc = 1;
            break;
        }
        int cls = event_class(&ev, f->python_function);
        int in = cls < 0 ? 0 : win ? in_window(f, &ev, t0, t1, &launched, &pending) : 1;
        if (in < 0)
            rc = -1;
        if (in <= 0)
            continue;
        int64_t d = ev.end_ns > ev.start_ns ? (int64_t)(ev.end_ns - ev.start_ns) : 0;
        tally *t;
        if (cls == DIFF_COLLECTIVE)
            t = &f->coll[ev.subkind <= DPRO_COLL_OP_COUNT ? ev.subkind : 0];
        else
            t = &f->t[(size_t)cls * f->nstr + (ev.name < f->nstr ? ev.name : 0)];
        t->count++;
        t->ns += d;
        s->events++;
    }
    dpro_iter_close(it);
    hmap_free(&launched);
    return rc;
}

/* Appends (cls, name) with t to s. Returns 0 or -1. */
static int
add_entry(diff_side *s, size_t *cap, int cls, const char *name, const tally *t)
{
    if (s->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        diff_entry *x = realloc(s->e, nc * sizeof *x);
        if (!x)
            return -1;
        s->e = x;
        *cap = nc;
    }
    char *nm = strdup(name);
    if (!nm)
        return -1;
    s->e[s->n++] = (diff_entry){cls, nm, t->count, t->ns};
    return 0;
}

/* Moves the file's tallies into s's entries. Returns 0 or -1. */
static int
file_entries(file_ctx *f, diff_side *s, size_t *cap)
{
    int rc = 0;
    for (int cls = 0; cls < DIFF_NCLASSES && rc == 0; cls++) {
        if (cls == DIFF_COLLECTIVE) {
            for (uint32_t op = 0; op <= DPRO_COLL_OP_COUNT && rc == 0; op++)
                if (f->coll[op].count)
                    rc = add_entry(s, cap, cls, dpro_coll_op_name(op), &f->coll[op]);
            continue;
        }
        for (uint32_t id = 0; id < f->nstr && rc == 0; id++) {
            const tally *t = &f->t[(size_t)cls * f->nstr + id];
            if (!t->count)
                continue;
            const char *nm = id ? dpro_reader_string(f->r, id) : NULL;
            if (!nm || !*nm)
                nm = diff_class_name(cls); /* a record without a name */
            rc = add_entry(s, cap, cls, nm, t);
        }
    }
    return rc;
}

static int
cmp_entry(const void *pa, const void *pb)
{
    const diff_entry *a = pa, *b = pb;
    if (a->cls != b->cls)
        return a->cls - b->cls;
    return strcmp(a->name, b->name);
}

/* Sorts s's entries and sums those of the same (class, name) (several files). */
static void
merge_entries(diff_side *s)
{
    if (s->n > 1)
        qsort(s->e, s->n, sizeof *s->e, cmp_entry);
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (k > 0 && cmp_entry(&s->e[k - 1], &s->e[i]) == 0) {
            s->e[k - 1].count += s->e[i].count;
            s->e[k - 1].total_ns += s->e[i].total_ns;
            free(s->e[i].name);
            continue;
        }
        s->e[k++] = s->e[i];
    }
    s->n = k;
}

/* Reads one file into s. Returns 0, 1 (bad input, errbuf) or -1. */
static int
load_file(const char *path, diff_side *s, size_t *cap, char *errbuf, size_t errlen)
{
    file_ctx f;
    memset(&f, 0, sizeof f);
    f.path = path;
    int rc = dpro_reader_open(path, &f.r, errbuf, errlen) == DPRO_OK ? 0 : 1;
    if (rc == 0) {
        f.nstr = dpro_reader_string_count(f.r);
        if (f.nstr == 0)
            f.nstr = 1;
        f.t = calloc((size_t)DIFF_NCLASSES * f.nstr, sizeof *f.t);
        if (!f.t)
            rc = -1;
        for (uint32_t i = 1; rc == 0 && i < f.nstr && !f.python_function; i++) {
            const char *x = dpro_reader_string(f.r, i);
            if (x && strcmp(x, "python_function") == 0)
                f.python_function = i;
        }
    }
    if (rc == 0)
        rc = tally_events(&f, s, errbuf, errlen);
    if (rc == 0)
        rc = file_entries(&f, s, cap);
    free(f.t);
    dpro_reader_close(f.r);
    return rc;
}

int
diff_side_load(const char *spec, diff_side *out, char *errbuf, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char **files = NULL;
    size_t nfiles = 0, cap = 0;
    out->spec = strdup(spec);
    int rc = out->spec ? parse_spec(spec, out, errbuf, errlen) : -1;
    if (rc == 0 && dpro_list_traces((const char *const *)&out->path, 1, &files, &nfiles, errbuf,
                                    errlen) != DPRO_OK)
        rc = 1;
    for (size_t i = 0; rc == 0 && i < nfiles; i++)
        rc = load_file(files[i], out, &cap, errbuf, errlen);
    if (rc == 0)
        merge_entries(out);
    out->files = nfiles;
    if (files)
        dpro_free_paths(files, nfiles);
    if (rc < 0)
        snprintf(errbuf, errlen, "%s: out of memory", spec);
    return rc;
}

void
diff_side_free(diff_side *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->e[i].name);
    free(s->e);
    free(s->spec);
    free(s->path);
    memset(s, 0, sizeof *s);
}

int64_t
diff_side_iterations(const diff_side *s)
{
    return s->first_step >= 0 ? s->last_step - s->first_step + 1 : 1;
}

/* ---- the comparison ------------------------------------------------------------------- */

static double
abs_delta(const diff_row *r)
{
    double d = r->b_us - r->a_us;
    return d < 0 ? -d : d;
}

static int
cmp_row(const void *pa, const void *pb)
{
    const diff_row *a = pa, *b = pb;
    int ua = a->status == DIFF_UNCHANGED, ub = b->status == DIFF_UNCHANGED;
    if (ua != ub)
        return ua - ub;
    double da = abs_delta(a), db = abs_delta(b);
    if (da != db)
        return (da < db) - (da > db);
    if (a->cls != b->cls)
        return a->cls - b->cls;
    return strcmp(a->name, b->name);
}

/* Status of a row from the whole-window tallies (ea or eb NULL: absent on that side),
 * ia and ib the sides' iterations: time compared per iteration in exact integers. */
static int
row_status(const diff_entry *ea, const diff_entry *eb, int64_t ia, int64_t ib)
{
    if (!ea)
        return DIFF_ADDED;
    if (!eb)
        return DIFF_REMOVED;
    __int128 ta = (__int128)ea->total_ns * ib, tb = (__int128)eb->total_ns * ia;
    __int128 ca = (__int128)ea->count * ib, cb = (__int128)eb->count * ia;
    if (tb != ta)
        return tb > ta ? DIFF_SLOWER : DIFF_FASTER;
    if (cb != ca)
        return cb > ca ? DIFF_SLOWER : DIFF_FASTER; /* the same time in more (fewer) events */
    return DIFF_UNCHANGED;
}

int
diff_compute(const diff_side *a, const diff_side *b, diff_result *out)
{
    memset(out, 0, sizeof *out);
    out->rows = malloc((a->n + b->n + 1) * sizeof *out->rows);
    if (!out->rows)
        return -1;
    int64_t ia = diff_side_iterations(a), ib = diff_side_iterations(b);
    size_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        int c = i >= a->n ? 1 : j >= b->n ? -1 : cmp_entry(&a->e[i], &b->e[j]);
        const diff_entry *ea = c <= 0 ? &a->e[i++] : NULL;
        const diff_entry *eb = c >= 0 ? &b->e[j++] : NULL;
        const diff_entry *any = ea ? ea : eb;
        diff_row *r = &out->rows[out->n++];
        r->cls = any->cls;
        r->name = any->name;
        r->status = row_status(ea, eb, ia, ib);
        r->a_count = ea ? (double)ea->count / (double)ia : 0;
        r->b_count = eb ? (double)eb->count / (double)ib : 0;
        r->a_us = ea ? (double)ea->total_ns / 1000.0 / (double)ia : 0;
        r->b_us = eb ? (double)eb->total_ns / 1000.0 / (double)ib : 0;
        out->by_status[r->status]++;
        out->a_count[r->cls] += r->a_count;
        out->b_count[r->cls] += r->b_count;
        out->a_us[r->cls] += r->a_us;
        out->b_us[r->cls] += r->b_us;
    }
    if (out->n > 1)
        qsort(out->rows, out->n, sizeof *out->rows, cmp_row);
    return 0;
}

void
diff_result_free(diff_result *d)
{
    free(d->rows);
    memset(d, 0, sizeof *d);
}

/* ---- output ------------------------------------------------------------------------------ */

static void
side_json(json_writer *w, const char *key, const diff_side *s)
{
    json_key(w, key);
    json_begin_object(w);
    json_kv_string(w, "spec", s->spec);
    json_kv_string(w, "path", s->path);
    json_kv_uint(w, "files", s->files);
    json_kv_uint(w, "events", s->events);
    json_kv_int(w, "first_step", s->first_step);
    json_kv_int(w, "last_step", s->last_step);
    json_kv_int(w, "iterations", diff_side_iterations(s));
    json_end_object(w);
}

void
diff_write_json(json_writer *w, const diff_side *a, const diff_side *b, const diff_result *d,
                size_t top)
{
    json_begin_object(w);
    side_json(w, "a", a);
    side_json(w, "b", b);
    json_key(w, "totals");
    json_begin_array(w);
    for (int c = 0; c < DIFF_NCLASSES; c++) {
        json_begin_object(w);
        json_kv_string(w, "class", diff_class_name(c));
        json_kv_double(w, "a_count", d->a_count[c]);
        json_kv_double(w, "b_count", d->b_count[c]);
        json_kv_double(w, "a_us", d->a_us[c]);
        json_kv_double(w, "b_us", d->b_us[c]);
        json_kv_double(w, "delta_us", d->b_us[c] - d->a_us[c]);
        json_end_object(w);
    }
    json_end_array(w);
    json_key(w, "summary");
    json_begin_object(w);
    for (int s = 0; s < DIFF_NSTATUS; s++)
        json_kv_uint(w, diff_status_name(s), d->by_status[s]);
    json_end_object(w);
    json_key(w, "changes");
    json_begin_array(w);
    for (size_t i = 0; i < d->n && (!top || i < top); i++) {
        const diff_row *r = &d->rows[i];
        if (r->status == DIFF_UNCHANGED)
            break;
        json_begin_object(w);
        json_kv_string(w, "class", diff_class_name(r->cls));
        json_kv_string(w, "name", r->name);
        json_kv_string(w, "status", diff_status_name(r->status));
        json_kv_double(w, "a_count", r->a_count);
        json_kv_double(w, "b_count", r->b_count);
        json_kv_double(w, "a_us", r->a_us);
        json_kv_double(w, "b_us", r->b_us);
        json_kv_double(w, "delta_us", r->b_us - r->a_us);
        json_key(w, "delta_pct");
        if (r->a_us > 0)
            json_double(w, 100.0 * (r->b_us - r->a_us) / r->a_us);
        else
            json_null(w);
        json_end_object(w);
    }
    json_end_array(w);
    json_end_object(w);
}

static void
side_print(FILE *out, const char *label, const diff_side *s)
{
    fprintf(out, "%s: %s, %zu file(s), %" PRIu64 " events", label, s->path, s->files, s->events);
    if (s->first_step >= 0)
        fprintf(out, ", iterations %" PRId64 "-%" PRId64 " (figures per iteration)", s->first_step,
                s->last_step);
    fprintf(out, "\n");
}

/* The names rows[0..n) show: a kernel row's as reports show kernels (kernels_display_names
 * over the kernel rows, different kernels that would show one name numbered), at its row;
 * malloc'd (the caller frees), or NULL out of memory (the rows then show their raw names). */
static kernels_name_buf *
shown_kernel_names(const diff_row *rows, size_t n)
{
    kernels_name_buf *out = malloc((n ? n : 1) * sizeof *out);
    kernels_name_buf *shown = malloc((n ? n : 1) * sizeof *shown);
    const char **names = malloc((n ? n : 1) * sizeof *names);
    size_t k = 0;
    for (size_t i = 0; out && shown && names && i < n; i++)
        if (rows[i].cls == DIFF_KERNEL)
            names[k++] = rows[i].name;
    int rc = out && shown && names ? kernels_display_names(names, k, shown) : -1;
    for (size_t i = 0, m = 0; rc == 0 && i < n; i++)
        if (rows[i].cls == DIFF_KERNEL)
            out[i] = shown[m++];
    if (rc != 0) {
        free(out);
        out = NULL;
    }
    free(shown);
    free(names);
    return out;
}

void
diff_print(FILE *out, const diff_side *a, const diff_side *b, const diff_result *d, size_t top)
{
    side_print(out, "A", a);
    side_print(out, "B", b);
    fprintf(out, "\n%-11s %12s %12s %14s %14s %14s\n", "class", "A count", "B count", "A us",
            "B us", "delta us");
    for (int c = 0; c < DIFF_NCLASSES; c++)
        if (d->a_count[c] || d->b_count[c])
            fprintf(out, "%-11s %12.1f %12.1f %14.1f %14.1f %+14.1f\n", diff_class_name(c),
                    d->a_count[c], d->b_count[c], d->a_us[c], d->b_us[c], d->b_us[c] - d->a_us[c]);
    size_t changed = d->n - d->by_status[DIFF_UNCHANGED];
    fprintf(out, "\n%zu names: %zu added, %zu removed, %zu slower, %zu faster, %zu unchanged\n",
            d->n, d->by_status[DIFF_ADDED], d->by_status[DIFF_REMOVED], d->by_status[DIFF_SLOWER],
            d->by_status[DIFF_FASTER], d->by_status[DIFF_UNCHANGED]);
    if (!changed) {
        fprintf(out, "no differences\n");
        return;
    }
    size_t shown = top && top < changed ? top : changed;
    kernels_name_buf *kn = shown_kernel_names(d->rows, shown);
    fprintf(out, "\n%14s %8s %12s %12s %10s %10s  %-9s %-11s %s\n", "delta us", "delta %", "A us",
            "B us", "A count", "B count", "status", "class", "name");
    for (size_t i = 0; i < shown; i++) {
        const diff_row *r = &d->rows[i];
        char pct[16] = "-";
        if (r->a_us > 0)
            snprintf(pct, sizeof pct, "%+.1f", 100.0 * (r->b_us - r->a_us) / r->a_us);
        fprintf(out, "%+14.1f %8s %12.1f %12.1f %10.1f %10.1f  %-9s %-11s %s\n", r->b_us - r->a_us,
                pct, r->a_us, r->b_us, r->a_count, r->b_count, diff_status_name(r->status),
                diff_class_name(r->cls), kn && r->cls == DIFF_KERNEL ? kn[i].text : r->name);
    }
    free(kn);
    if (top && changed > top)
        fprintf(out, "(%zu more changed; --top 0 lists all)\n", changed - top);
}
