/* kernels.c: where a trace's device time goes, by category and by kernel name (see
 * kernels.h). */
#define PR_FMT "kernels"
#include "config.h"

#include "kernels.h"

#include <ctype.h>
#include <setjmp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpro_log.h"

const char *const kernels_category_names[KERNELS_NCAT] = {"compute", "communication", "memcpy",
                                                          "memset"};
/* Adds one duration to s. */
static void
kstat_add(kernels_stat *s, uint64_t ns)
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
kstat_merge(kernels_stat *a, const kernels_stat *b)
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

/* Orders kernel stats by device time, most first; ties by name. */
static int
kstat_cmp_total(const void *a, const void *b)
{
    const kernels_stat *x = a, *y = b;
    if (x->total_ns != y->total_ns)
        return x->total_ns > y->total_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int
kstat_cmp_name(const void *a, const void *b)
{
    return strcmp(((const kernels_stat *)a)->name, ((const kernels_stat *)b)->name);
}

/* Starts collecting the breakdown of r into out; returns 0, or -1 out of memory. */
int
kernels_collect_init(kernels_collect *kc, dpro_reader *r, kernels_breakdown *out)
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
void
kernels_collect_event(kernels_collect *kc, const dpro_event *ev)
{
    uint64_t ns = ev->end_ns > ev->start_ns ? ev->end_ns - ev->start_ns : 0;
    switch (ev->kind) {
    case DPRO_KIND_KERNEL: {
        kernels_stat *s = &kc->by_id[ev->name <= kc->nstrings ? ev->name : 0];
        if (s->comm < 0)
            s->comm = dpro_kernel_is_comm(s->name);
        kstat_add(s, ns);
        kstat_add(&kc->out->cat[s->comm ? KERNELS_COMM : KERNELS_COMPUTE], ns);
        break;
    }
    case DPRO_KIND_MEMCPY:
        kstat_add(&kc->out->cat[KERNELS_MEMCPY], ns);
        break;
    case DPRO_KIND_MEMSET:
        kstat_add(&kc->out->cat[KERNELS_MEMSET], ns);
        break;
    default:
        break;
    }
}

/* Ends the collection: out->names gets the kernels met, most device time first. Returns 0,
 * or -1 out of memory. Frees kc's own memory either way. */
int
kernels_collect_finish(kernels_collect *kc)
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

/* Merges n breakdowns into all (see kernels.h). */
int
kernels_merge(kernels_breakdown *all, const kernels_breakdown *const *parts, size_t n_parts)
{
    size_t n = 0, m = 0;
    memset(all, 0, sizeof *all);
    for (size_t i = 0; i < n_parts; i++)
        n += parts[i]->nnames;
    all->names = malloc((n ? n : 1) * sizeof *all->names);
    if (!all->names)
        return -1;
    for (size_t i = 0; i < n_parts; i++) {
        for (int c = 0; c < KERNELS_NCAT; c++)
            kstat_merge(&all->cat[c], &parts[i]->cat[c]);
        memcpy(all->names + m, parts[i]->names, parts[i]->nnames * sizeof *all->names);
        m += parts[i]->nnames;
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

void
kernels_breakdown_free(kernels_breakdown *k)
{
    free(k->names);
    k->names = NULL;
    k->nnames = 0;
}

/* Summed device time of a breakdown (all categories). */
uint64_t
kernels_device_ns(const kernels_breakdown *k, uint64_t *ops)
{
    uint64_t ns = 0, n = 0;
    for (int c = 0; c < KERNELS_NCAT; c++) {
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

/* Whether s (not empty) is only white space, which a report would show as nothing. */
static int
is_blank(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return *s == '\0';
}

/* The bracket that closes the opening one c ('<', '(' or '{'). */
static char
closing(char c)
{
    return c == '<' ? '>' : c == '(' ? ')' : '}';
}

#ifdef HAVE_DEMANGLE_CALLBACK
/* GCC's demangler (libsupc++), extern "C": it writes the demangled name in pieces to
 * write(piece, n, opaque), allocating nothing itself; returns 0 when name was demangled. */
int __gcclibcxx_demangle_callback(const char *name, void (*write)(const char *, size_t, void *),
                                  void *opaque);

/* The demangler's output so far, at most cap bytes; over jumps out of the demangler (which
 * holds no resources of its own: its tables are on its stack). */
typedef struct {
    char *buf;
    size_t len, cap;
    jmp_buf over;
} demangle_sink;

static void
demangle_put(const char *piece, size_t n, void *opaque)
{
    demangle_sink *k = opaque;
    if (n >= k->cap - k->len)
        longjmp(k->over, 1);
    memcpy(k->buf + k->len, piece, n);
    k->len += n;
    k->buf[k->len] = 0;
}

char *
kernels_demangle(const char *name)
{
    /* volatile: read after longjmp */
    demangle_sink *volatile k = NULL;
    char *volatile d = NULL;
    size_t len = strlen(name);
    if (name[0] != '_' || name[1] != 'Z' || len > KERNELS_DEMANGLE_IN_MAX)
        return NULL;
    k = malloc(sizeof *k);
    if (k)
        *k = (demangle_sink){.buf = malloc(KERNELS_DEMANGLE_OUT_MAX),
                             .cap = KERNELS_DEMANGLE_OUT_MAX};
    if (k && k->buf && !setjmp(k->over) &&
        __gcclibcxx_demangle_callback(name, demangle_put, k) == 0 && k->len > 0) {
        d = realloc(k->buf, k->len + 1);
        if (!d)
            d = k->buf;
        k->buf = NULL;
    }
    if (k)
        free(k->buf);
    free(k);
    return d;
}
#else
char *
kernels_demangle(const char *name)
{
    (void)name;
    return NULL;
}
#endif

/* Short form of a C++ kernel name, as written (see kernels_short_name). */
static char *
shorten(const char *name, int targs, char *buf, size_t len)
{
    static const char anon[] = "(anonymous namespace)::";
    char stack[64], *tmp;
    size_t depth = 0, o = 0, tok = 0, nlen = strlen(name);
    int lists = 0;  /* template lists opened at depth 0 so far */
    int inlist = 0; /* inside the first one, and keeping it */

    if (!*name || is_blank(name)) {
        snprintf(buf, len, *name ? "(blank name)" : "(unnamed)");
        return buf;
    }
    tmp = malloc(3 * nlen + 4); /* "<>" may become "<...>", "," become ", " */
    if (!tmp) {
        snprintf(buf, len, "%.*s", KERNELS_SHORT_NAME_MAX, name);
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
    for (; inlist && depth > 0; depth--) /* a kept list the name left open: closed */
        if (depth <= 2)
            tmp[o++] = closing(stack[depth - 1]);
    tmp[o] = '\0';
    if (!o)
        snprintf(tmp, nlen + 4, "%s", name);
    if (strlen(tmp) > KERNELS_SHORT_NAME_MAX)
        snprintf(buf, len, "%.*s...", KERNELS_SHORT_NAME_MAX - 3, tmp);
    else
        snprintf(buf, len, "%s", tmp);
    free(tmp);
    return buf;
}

char *
kernels_short_name(const char *name, int targs, char *buf, size_t len)
{
    char *d = kernels_demangle(name);
    shorten(d ? d : name, targs, buf, len);
    free(d);
    return buf;
}

char *
kernels_display_name(const char *name, char *buf, size_t len)
{
    char *d = kernels_demangle(name);
    const char *s = d ? d : name;
    if (*s && !is_blank(s) && strlen(s) <= KERNELS_DISPLAY_WHOLE_MAX)
        snprintf(buf, len, "%s", s);
    else if (strlen(shorten(s, 1, buf, len)) >= KERNELS_SHORT_NAME_MAX) /* cut: no templates */
        shorten(s, 0, buf, len);
    free(d);
    return buf;
}

static double
share_pct(uint64_t part, uint64_t whole)
{
    return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

/* Writes one breakdown as a JSON object's members: device time, categories, top kernels. */
void
kernels_write_json(json_writer *w, const kernels_breakdown *k, size_t top)
{
    char sbuf[KERNELS_SHORT_NAME_MAX + 8];
    uint64_t ops, dev = kernels_device_ns(k, &ops);
    json_kv_double(w, "device_us", dev / 1e3);
    json_kv_uint(w, "device_ops", ops);
    json_key(w, "categories");
    json_begin_object(w);
    for (int c = 0; c < KERNELS_NCAT; c++) {
        json_key(w, kernels_category_names[c]);
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
        const kernels_stat *s = &k->names[i];
        json_begin_object(w);
        json_kv_string(w, "name", s->name);
        json_kv_string(w, "short_name", kernels_short_name(s->name, 0, sbuf, sizeof sbuf));
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
    const char *text; /* out[row].text */
    size_t row;
} shown_name;

/* By text, then row. */
static int
shown_name_cmp(const void *pa, const void *pb)
{
    const shown_name *a = pa, *b = pb;
    int c = strcmp(a->text, b->text);
    return c ? c : (a->row > b->row) - (a->row < b->row);
}

/* Writes over out[row] the name as shown again, with more of it (kernels_short_names'
 * template arguments). */
typedef void (*name_retry_fn)(const char *name, kernels_name_buf *out);

static void
short_with_targs(const char *name, kernels_name_buf *out)
{
    kernels_short_name(name, 1, out->text, sizeof out->text);
}

/* Whether out[row]'s text is shown by a row of out[0..n) of another name than names[row]. */
static int
text_taken(const char *const *names, size_t n, const kernels_name_buf *out, size_t row)
{
    int taken = 0;
    for (size_t r = 0; !taken && r < n; r++)
        taken = r != row && strcmp(out[r].text, out[row].text) == 0 &&
                strcmp(names[r], names[row]) != 0;
    return taken;
}

/* Numbers the rows sn[i..j) (one text, different names) of out: the first row of each of
 * their names gets the base text with " [k]" (cut to make room), k from 1 in row order,
 * skipping a k whose text another name's row shows; later rows of that name copy it. */
static void
number_run(const char *const *names, size_t n, kernels_name_buf *out, const shown_name *sn,
           size_t i, size_t j)
{
    char base[sizeof out->text];
    memcpy(base, out[sn[i].row].text, sizeof base);
    size_t k = 0;
    for (size_t m = i; m < j; m++) {
        kernels_name_buf *o = &out[sn[m].row];
        size_t first = i;
        while (first < m && strcmp(names[sn[first].row], names[sn[m].row]) != 0)
            first++;
        if (first < m) {
            memcpy(o->text, out[sn[first].row].text, sizeof o->text);
            continue;
        }
        do {
            char sfx[32];
            int w = snprintf(sfx, sizeof sfx, " [%zu]", ++k);
            snprintf(o->text, sizeof o->text, "%.*s%s", (int)sizeof o->text - 1 - w, base, sfx);
        } while (text_taken(names, n, out, sn[m].row));
    }
}

/* Rows of out[0..n) (the shown names of names[0..n)) that show one text for different
 * names: with retry (may be NULL) each is written again by retry; those still alike then
 * get " [k]", k numbering the run's different names from 1 in row order (the text cut to
 * make room; a k whose text another kernel's row shows is skipped, so that different
 * names never show one text). Returns 0, or -1 out of memory (out then as it was). */
static int
distinguish(const char *const *names, size_t n, kernels_name_buf *out, name_retry_fn retry)
{
    shown_name *sn = malloc((n ? n : 1) * sizeof *sn);
    int rc = sn ? 0 : -1;
    for (int pass = retry ? 0 : 1; rc == 0 && pass < 2; pass++) {
        for (size_t i = 0; i < n; i++)
            sn[i] = (shown_name){out[i].text, i};
        qsort(sn, n, sizeof *sn, shown_name_cmp);
        for (size_t i = 0, j; i < n; i = j) {
            int alike = 0; /* the run holds two different names */
            for (j = i + 1; j < n && strcmp(sn[j].text, sn[i].text) == 0; j++)
                alike |= strcmp(names[sn[j].row], names[sn[i].row]) != 0;
            for (size_t m = i; pass == 0 && alike && m < j; m++)
                retry(names[sn[m].row], &out[sn[m].row]);
            if (pass == 1 && alike)
                number_run(names, n, out, sn, i, j);
        }
    }
    free(sn);
    return rc;
}

/* Short names as shown, with template arguments where alike (see kernels.h). */
int
kernels_short_names(const char *const *names, size_t n, kernels_name_buf *out)
{
    for (size_t i = 0; i < n; i++)
        kernels_short_name(names[i], 0, out[i].text, sizeof out[i].text);
    return distinguish(names, n, out, short_with_targs);
}

int
kernels_display_names(const char *const *names, size_t n, kernels_name_buf *out)
{
    for (size_t i = 0; i < n; i++)
        kernels_display_name(names[i], out[i].text, sizeof out[i].text);
    return distinguish(names, n, out, NULL);
}

/* Prints one breakdown as text under a heading line. Kernel names are shortened; rows
 * whose short names would be alike get their template arguments too. */
void
kernels_print(FILE *out, const char *title, const kernels_breakdown *k, size_t top)
{
    uint64_t ops, dev = kernels_device_ns(k, &ops);
    size_t n = k->nnames < top ? k->nnames : top;
    const char **names = NULL;
    kernels_name_buf *byrow = NULL;

    fprintf(out, "\n%s: device time %.3f ms in %" PRIu64 " operations\n", title, dev / 1e6, ops);
    fprintf(out, "  %-14s %10s %12s %7s\n", "category", "count", "total ms", "share");
    for (int c = 0; c < KERNELS_NCAT; c++)
        fprintf(out, "  %-14s %10" PRIu64 " %12.3f %6.1f%%\n", kernels_category_names[c],
                k->cat[c].count, k->cat[c].total_ns / 1e6, share_pct(k->cat[c].total_ns, dev));
    if (!n) {
        fprintf(out, "  no kernels\n");
        return;
    }
    names = malloc(n * sizeof *names);
    byrow = malloc(n * sizeof *byrow);
    if (names)
        for (size_t i = 0; i < n; i++)
            names[i] = k->names[i].name;
    if (!names || !byrow || kernels_short_names(names, n, byrow) != 0) {
        pr_err("out of memory");
        free(names);
        free(byrow);
        return;
    }
    fprintf(out, "  top %zu of %zu kernel names by device time:\n", n, k->nnames);
    fprintf(out, "  %10s %12s %10s %10s %10s %7s  %s\n", "count", "total ms", "mean us", "min us",
            "max us", "share", "name");
    for (size_t i = 0; i < n; i++) {
        const kernels_stat *s = &k->names[i];
        fprintf(out, "  %10" PRIu64 " %12.3f %10.2f %10.2f %10.2f %6.1f%%  %s\n", s->count,
                s->total_ns / 1e6, s->total_ns / 1e3 / (double)s->count, s->min_ns / 1e3,
                s->max_ns / 1e3, share_pct(s->total_ns, dev), byrow[i].text);
    }
    free(names);
    free(byrow);
}
