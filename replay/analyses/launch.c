/* launch.c: launch statistics (analyses.h): per kernel launch, the CPU duration of its
 * launch call and its launch delay; summaries per kernel name; outliers. */
#include "ana_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "replay/kernels.h"

/* One kernel launch. */
typedef struct launch_sample {
    uint32_t name;
    int32_t op;
    int64_t cpu, delay;
} launch_sample;

static int
cmp_sample_name(const void *pa, const void *pb)
{
    const launch_sample *a = pa, *b = pb;
    if (a->name != b->name)
        return a->name < b->name ? -1 : 1;
    return (a->op > b->op) - (a->op < b->op);
}

static int
cmp_row(const void *pa, const void *pb)
{
    const ana_launch_row *a = pa, *b = pb;
    if (a->cpu.count != b->cpu.count)
        return a->cpu.count > b->cpu.count ? -1 : 1;
    return strcmp(a->text, b->text);
}

static int
cmp_outlier(const void *pa, const void *pb)
{
    const ana_outlier *a = pa, *b = pb;
    int64_t ea = a->value - a->median, eb = b->value - b->median;
    if (ea != eb)
        return ea > eb ? -1 : 1;
    if (a->op != b->op)
        return a->op < b->op ? -1 : 1;
    return (a->delay > b->delay) - (a->delay < b->delay);
}

/* Whether value is an outlier against the median of its kernel name. */
static int
is_outlier(int64_t value, int64_t median, int64_t floor_ns)
{
    if (value <= floor_ns)
        return 0;
    if (median <= 0)
        return 1;
    return median <= INT64_MAX / ANA_OUTLIER_FACTOR && value > ANA_OUTLIER_FACTOR * median;
}

/* Summaries of the launches s[0..n) (one name of c's trace) into row; outliers appended
 * to l (grown as needed). tmp holds n values. Returns 0 or -1. */
static int
summarise_name(const ana_collect *c, ana_launch_result *l, size_t *cap, const launch_sample *s,
               size_t n, int64_t *tmp, ana_launch_row *row)
{
    row->name = s[0].name;
    row->text = dpro_reader_string(c->r, s[0].name);
    for (size_t i = 0; i < n; i++)
        tmp[i] = s[i].cpu;
    ana_summarise(tmp, n, &row->cpu);
    for (size_t i = 0; i < n; i++)
        tmp[i] = s[i].delay;
    ana_summarise(tmp, n, &row->delay);
    for (size_t i = 0; i < n; i++) {
        int cpu_out = is_outlier(s[i].cpu, row->cpu.p50, ANA_OUTLIER_CPU_MIN_NS);
        int delay_out = is_outlier(s[i].delay, row->delay.p50, ANA_OUTLIER_DELAY_MIN_NS);
        for (int d = 0; d < 2; d++) {
            if (!(d ? delay_out : cpu_out))
                continue;
            if (ana_grow((void **)&l->outliers, cap, l->noutliers, sizeof *l->outliers) != 0)
                return -1;
            l->outliers[l->noutliers++] = (ana_outlier){
                s[i].op, (uint8_t)d, d ? s[i].delay : s[i].cpu, d ? row->delay.p50 : row->cpu.p50};
            if (d)
                l->delay_outliers++;
            else
                l->cpu_outliers++;
        }
    }
    return 0;
}

int
ana_launch_compute(ana_collect *c)
{
    ana_launch_result *l = &c->launch;
    launch_sample *s = malloc((c->nops ? c->nops : 1) * sizeof *s);
    int64_t *tmp = malloc((c->nops ? c->nops : 1) * sizeof *tmp);
    size_t n = 0, cap = 0;
    int rc = s && tmp ? 0 : -1;
    for (size_t i = 0; rc == 0 && i < c->nops; i++) {
        const ana_op *o = &c->ops[i];
        if (o->kind != DPRO_KIND_KERNEL)
            continue;
        if (o->api < 0) {
            l->unlaunched_kernels++;
            continue;
        }
        const ana_api *a = &c->apis[o->api];
        if (a->cls != DPRO_API_CLASS_LAUNCH) {
            l->other_launched++;
            continue;
        }
        s[n++] = (launch_sample){o->name, (int32_t)i, (int64_t)(a->end - a->start),
                                 (int64_t)o->start - (int64_t)a->end};
    }
    if (rc == 0) {
        for (size_t i = 0; i < n; i++)
            tmp[i] = s[i].cpu;
        ana_summarise(tmp, n, &l->all.cpu);
        for (size_t i = 0; i < n; i++)
            tmp[i] = s[i].delay;
        ana_summarise(tmp, n, &l->all.delay);
        qsort(s, n, sizeof *s, cmp_sample_name);
        size_t groups = 0;
        for (size_t i = 0; i < n; i++)
            groups += i == 0 || s[i].name != s[i - 1].name;
        l->rows = calloc(groups ? groups : 1, sizeof *l->rows);
        rc = l->rows ? 0 : -1;
    }
    for (size_t i = 0, j; rc == 0 && i < n; i = j) {
        for (j = i + 1; j < n && s[j].name == s[i].name; j++)
            ;
        rc = summarise_name(c, l, &cap, s + i, j - i, tmp, &l->rows[l->nrows++]);
    }
    if (rc == 0) {
        qsort(l->rows, l->nrows, sizeof *l->rows, cmp_row);
        if (l->noutliers)
            qsort(l->outliers, l->noutliers, sizeof *l->outliers, cmp_outlier);
    }
    free(s);
    free(tmp);
    return rc;
}

void
ana_launch_free(ana_launch_result *l)
{
    free(l->rows);
    free(l->outliers);
    memset(l, 0, sizeof *l);
}

static void
summary_json(json_writer *w, const char *key, const ana_summary *s)
{
    json_key(w, key);
    json_begin_object(w);
    json_kv_double(w, "mean_us", s->mean / 1e3);
    json_kv_double(w, "p50_us", (double)s->p50 / 1e3);
    json_kv_double(w, "p95_us", (double)s->p95 / 1e3);
    json_kv_double(w, "max_us", (double)s->max / 1e3);
    json_end_object(w);
}

/* Members: launches, unlaunched_kernels, other_launched, cpu{mean_us, p50_us, p95_us,
 * max_us}, delay{...}, outlier_rule, cpu_outliers, delay_outliers, kernel_names,
 * kernels[top rows: name, short_name, count, cpu{}, delay{}], outliers[top: name,
 * what ("cpu" | "delay"), us, median_us, start_us (kernel start, trace clock),
 * correlation]. */
void
ana_launch_json(json_writer *w, const ana_collect *c)
{
    const ana_launch_result *l = &c->launch;
    char sbuf[KERNELS_SHORT_NAME_MAX + 8], rule[160];
    json_kv_uint(w, "launches", l->all.cpu.count);
    json_kv_uint(w, "unlaunched_kernels", l->unlaunched_kernels);
    json_kv_uint(w, "other_launched", l->other_launched);
    summary_json(w, "cpu", &l->all.cpu);
    summary_json(w, "delay", &l->all.delay);
    snprintf(rule, sizeof rule,
             "value > %d x the median of its kernel name and > %d us (cpu), %d us (delay)",
             ANA_OUTLIER_FACTOR, ANA_OUTLIER_CPU_MIN_NS / 1000, ANA_OUTLIER_DELAY_MIN_NS / 1000);
    json_kv_string(w, "outlier_rule", rule);
    json_kv_uint(w, "cpu_outliers", l->cpu_outliers);
    json_kv_uint(w, "delay_outliers", l->delay_outliers);
    json_kv_uint(w, "kernel_names", l->nrows);
    json_key(w, "kernels");
    json_begin_array(w);
    for (size_t i = 0; i < l->nrows && i < c->o.top_launch; i++) {
        const ana_launch_row *r = &l->rows[i];
        const char *name = dpro_reader_string(c->r, r->name);
        json_begin_object(w);
        json_kv_string(w, "name", name);
        json_kv_string(w, "short_name", kernels_short_name(name, 0, sbuf, sizeof sbuf));
        json_kv_uint(w, "count", r->cpu.count);
        summary_json(w, "cpu", &r->cpu);
        summary_json(w, "delay", &r->delay);
        json_end_object(w);
    }
    json_end_array(w);
    json_key(w, "outliers");
    json_begin_array(w);
    for (size_t i = 0; i < l->noutliers && i < c->o.top_launch; i++) {
        const ana_outlier *x = &l->outliers[i];
        const ana_op *o = &c->ops[x->op];
        json_begin_object(w);
        json_kv_string(w, "name", dpro_reader_string(c->r, o->name));
        json_kv_string(w, "what", x->delay ? "delay" : "cpu");
        json_kv_double(w, "us", (double)x->value / 1e3);
        json_kv_double(w, "median_us", (double)x->median / 1e3);
        json_kv_double(w, "start_us", (double)o->start / 1e3);
        json_kv_uint(w, "correlation", o->corr);
        json_end_object(w);
    }
    json_end_array(w);
}

static void
summary_print(FILE *out, const ana_summary *s)
{
    fprintf(out, " %9.2f %9.2f %9.2f %10.2f", s->mean / 1e3, (double)s->p50 / 1e3,
            (double)s->p95 / 1e3, (double)s->max / 1e3);
}

void
ana_launch_print(FILE *out, const ana_collect *c)
{
    const ana_launch_result *l = &c->launch;
    size_t nr = l->nrows < c->o.top_launch ? l->nrows : c->o.top_launch;
    size_t no = l->noutliers < c->o.top_launch ? l->noutliers : c->o.top_launch;
    uint32_t *ids = malloc((nr + no ? nr + no : 1) * sizeof *ids);
    kernels_name_buf *sn = NULL;
    for (size_t i = 0; ids && i < nr; i++)
        ids[i] = l->rows[i].name;
    for (size_t i = 0; ids && i < no; i++)
        ids[nr + i] = c->ops[l->outliers[i].op].name;
    sn = ids ? ana_short_names(c, ids, nr + no) : NULL;
    free(ids);
    if (!sn)
        return;
    fprintf(out,
            "  %" PRIu64 " kernel launches (%" PRIu64 " kernels without a launch call, %" PRIu64
            " launched by other calls)\n",
            l->all.cpu.count, l->unlaunched_kernels, l->other_launched);
    if (!l->all.cpu.count) {
        free(sn);
        return;
    }
    fprintf(out, "  %8s | %-40s | %-40s |\n", "", "launch call CPU time, us", "launch delay, us");
    fprintf(out, "  %8s | %9s %9s %9s %10s | %9s %9s %9s %10s | %s\n", "launches", "mean", "p50",
            "p95", "max", "mean", "p50", "p95", "max", "kernel");
    fprintf(out, "  %8" PRIu64 " |", l->all.cpu.count);
    summary_print(out, &l->all.cpu);
    fprintf(out, " |");
    summary_print(out, &l->all.delay);
    fprintf(out, " | (all)\n");
    for (size_t i = 0; i < nr; i++) {
        const ana_launch_row *r = &l->rows[i];
        fprintf(out, "  %8" PRIu64 " |", r->cpu.count);
        summary_print(out, &r->cpu);
        fprintf(out, " |");
        summary_print(out, &r->delay);
        fprintf(out, " | %s\n", sn[i].text);
    }
    fprintf(out,
            "  outliers (over %dx the median of their kernel and over %d us CPU / %d us delay): "
            "%" PRIu64 " in CPU duration, %" PRIu64 " in launch delay\n",
            ANA_OUTLIER_FACTOR, ANA_OUTLIER_CPU_MIN_NS / 1000, ANA_OUTLIER_DELAY_MIN_NS / 1000,
            l->cpu_outliers, l->delay_outliers);
    for (size_t i = 0; i < no; i++) {
        const ana_outlier *x = &l->outliers[i];
        const ana_op *o = &c->ops[x->op];
        fprintf(out, "    %-5s %10.2f us (median %.2f) at %.3f us, correlation %" PRIu64 ": %s\n",
                x->delay ? "delay" : "cpu", (double)x->value / 1e3, (double)x->median / 1e3,
                (double)o->start / 1e3, o->corr, sn[nr + i].text);
    }
    free(sn);
}
