/* ops.c: device work by the cpu_op and the user annotation around its launch call
 * (analyses.h). */
#include "ana_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "replay/kernels.h"

/* Per name accumulation (indexed by string id). */
typedef struct name_acc {
    uint64_t instances, host_ns, launches, dev_ops, dev_ns;
    double delay_sum;
} name_acc;

/* A device op charged to a name: for the kernel lists. */
typedef struct charge {
    uint32_t owner, kname;
    uint64_t ns;
} charge;

static int
cmp_charge(const void *pa, const void *pb)
{
    const charge *a = pa, *b = pb;
    if (a->owner != b->owner)
        return a->owner < b->owner ? -1 : 1;
    return (a->kname > b->kname) - (a->kname < b->kname);
}

static int
cmp_op_row(const void *pa, const void *pb)
{
    const ana_op_row *a = pa, *b = pb;
    if (a->dev_ns != b->dev_ns)
        return a->dev_ns > b->dev_ns ? -1 : 1;
    if (a->instances != b->instances)
        return a->instances > b->instances ? -1 : 1;
    return strcmp(a->text, b->text);
}

/* Fills idx[0..n) with 0..n-1 sorted by keys (thread, start, UINT64_MAX - end: the
 * enclosing range first) of the ranges (apis NULL) or of the apis (ranges NULL).
 * k: scratch of n keys. */
static void
order(const ana_range *ranges, const ana_api *apis, size_t n, ana_key *k, int32_t *idx)
{
    for (size_t i = 0; i < n; i++)
        k[i] = ranges ? (ana_key){ranges[i].thread, ranges[i].start, UINT64_MAX - ranges[i].end,
                                  (int32_t)i}
                      : (ana_key){apis[i].thread, apis[i].start, 0, (int32_t)i};
    ana_sort_keys(k, n);
    for (size_t i = 0; i < n; i++)
        idx[i] = k[i].idx;
}

/* For each API call, the innermost cpu_op (owner[2 i]) and annotation (owner[2 i + 1])
 * around its start on its thread (the open range that started last: ranges in order of
 * start, the enclosing one first, then in trace order), as range indices, -1 for none.
 * rs, as: scratch of nranges and napis entries; stk: of 2 nranges. Returns 0 or -1. */
static int
enclose(const ana_collect *c, int32_t *owner, int32_t *rs, int32_t *as, int32_t *stk)
{
    size_t nr = c->nranges, na = c->napis, ri = 0;
    int32_t *st[2] = {stk, stk + nr};
    size_t sn[2] = {0, 0};
    uint32_t thread = 0;
    ana_key *k = malloc((nr > na ? nr : na ? na : 1) * sizeof *k);
    if (!k)
        return -1;
    order(c->ranges, NULL, nr, k, rs);
    order(NULL, c->apis, na, k, as);
    free(k);
    for (size_t ai = 0; ai < na; ai++) {
        const ana_api *a = &c->apis[as[ai]];
        if (ai == 0 || a->thread != thread) {
            thread = a->thread;
            sn[0] = sn[1] = 0;
            while (ri < nr && c->ranges[rs[ri]].thread < thread)
                ri++;
        }
        /* the ranges of this thread that start by the call's start */
        while (ri < nr && c->ranges[rs[ri]].thread == thread &&
               c->ranges[rs[ri]].start <= a->start) {
            const ana_range *g = &c->ranges[rs[ri]];
            int s = g->cpu_op ? 0 : 1;
            while (sn[s] && c->ranges[st[s][sn[s] - 1]].end < g->start)
                sn[s]--;
            st[s][sn[s]++] = rs[ri++];
        }
        for (int s = 0; s < 2; s++) {
            while (sn[s] && c->ranges[st[s][sn[s] - 1]].end < a->start)
                sn[s]--;
            owner[2 * (size_t)as[ai] + (size_t)s] = sn[s] ? st[s][sn[s] - 1] : -1;
        }
    }
    return 0;
}

/* Fills rows (*n of them) from the names with instances or device ops, each with its
 * top kernels from the charges ch[0..nch) (sorted by owner and kernel). Returns 0 or -1. */
static int
make_rows(const ana_collect *c, const name_acc *acc, uint32_t nstr, const charge *ch, size_t nch,
          ana_op_row **rows, size_t *n)
{
    size_t m = 0, k = 0;
    for (uint32_t id = 0; id <= nstr; id++)
        m += acc[id].instances || acc[id].dev_ops;
    *rows = calloc(m ? m : 1, sizeof **rows);
    *n = 0;
    if (!*rows)
        return -1;
    for (uint32_t id = 0; id <= nstr; id++) {
        if (!acc[id].instances && !acc[id].dev_ops)
            continue;
        ana_op_row *r = &(*rows)[(*n)++];
        r->name = id;
        r->text = dpro_reader_string(c->r, id);
        r->instances = acc[id].instances;
        r->host_ns = acc[id].host_ns;
        r->launches = acc[id].launches;
        r->dev_ops = acc[id].dev_ops;
        r->dev_ns = acc[id].dev_ns;
        r->delay_sum_ns = acc[id].delay_sum;
        while (k < nch && ch[k].owner < id)
            k++;
        /* the kernels of this name, grouped; keep the ANA_OP_KERNELS with most time */
        size_t nk = 0;
        while (k < nch && ch[k].owner == id) {
            ana_kname kn = {ch[k].kname, 0, 0};
            for (; k < nch && ch[k].owner == id && ch[k].kname == kn.name; k++) {
                kn.count++;
                kn.ns += ch[k].ns;
            }
            r->kernel_names++;
            size_t pos = nk < ANA_OP_KERNELS ? nk++ : ANA_OP_KERNELS;
            while (pos > 0 && r->kernels[pos - 1].ns < kn.ns) {
                if (pos < ANA_OP_KERNELS)
                    r->kernels[pos] = r->kernels[pos - 1];
                pos--;
            }
            if (pos < ANA_OP_KERNELS)
                r->kernels[pos] = kn;
        }
    }
    qsort(*rows, *n, sizeof **rows, cmp_op_row);
    return 0;
}

int
ana_ops_compute(ana_collect *c)
{
    ana_ops_result *res = &c->opsr;
    uint32_t nstr = dpro_reader_string_count(c->r);
    size_t nr = c->nranges, na = c->napis;
    int32_t *owner = malloc((na ? 2 * na : 1) * sizeof *owner);
    int32_t *rs = malloc((nr ? nr : 1) * sizeof *rs), *as = malloc((na ? na : 1) * sizeof *as);
    int32_t *stk = malloc((nr ? 2 * nr : 1) * sizeof *stk);
    name_acc *acc[2] = {calloc((size_t)nstr + 1, sizeof(name_acc)),
                        calloc((size_t)nstr + 1, sizeof(name_acc))};
    charge *ch[2] = {malloc((c->nops ? c->nops : 1) * sizeof(charge)),
                     malloc((c->nops ? c->nops : 1) * sizeof(charge))};
    uint8_t *counted = calloc(na ? na : 1, 1);
    size_t nch[2] = {0, 0};
    int rc = owner && rs && as && stk && acc[0] && acc[1] && ch[0] && ch[1] && counted ? 0 : -1;
    if (rc == 0) {
        rc = enclose(c, owner, rs, as, stk);
    }
    if (rc == 0) {
        for (size_t i = 0; i < nr; i++) {
            const ana_range *g = &c->ranges[i];
            name_acc *x = &acc[g->cpu_op ? 0 : 1][g->name <= nstr ? g->name : 0];
            x->instances++;
            x->host_ns += g->end - g->start;
        }
        for (size_t i = 0; i < c->nops; i++) {
            const ana_op *o = &c->ops[i];
            uint64_t ns = o->end - o->start;
            res->dev_ops++;
            res->dev_ns += ns;
            if (o->api < 0)
                continue;
            const ana_api *a = &c->apis[o->api];
            for (int s = 0; s < 2; s++) {
                int32_t g = owner[2 * (size_t)o->api + (size_t)s];
                if (g < 0)
                    continue;
                uint32_t id = c->ranges[g].name <= nstr ? c->ranges[g].name : 0;
                name_acc *x = &acc[s][id];
                x->dev_ops++;
                x->dev_ns += ns;
                x->delay_sum += (double)((int64_t)o->start - (int64_t)a->end);
                if (!(counted[o->api] & (1u << s))) {
                    counted[o->api] |= (uint8_t)(1u << s);
                    x->launches++;
                }
                ch[s][nch[s]++] = (charge){id, o->name, ns};
                if (s == 0) {
                    res->op_dev_ops++;
                    res->op_dev_ns += ns;
                } else {
                    res->ann_dev_ops++;
                    res->ann_dev_ns += ns;
                }
            }
        }
        qsort(ch[0], nch[0], sizeof(charge), cmp_charge);
        qsort(ch[1], nch[1], sizeof(charge), cmp_charge);
        rc = make_rows(c, acc[0], nstr, ch[0], nch[0], &res->ops, &res->nops);
    }
    if (rc == 0)
        rc = make_rows(c, acc[1], nstr, ch[1], nch[1], &res->anns, &res->nanns);
    free(owner);
    free(rs);
    free(as);
    free(stk);
    free(acc[0]);
    free(acc[1]);
    free(ch[0]);
    free(ch[1]);
    free(counted);
    return rc;
}

void
ana_ops_free(ana_ops_result *o)
{
    free(o->ops);
    free(o->anns);
    memset(o, 0, sizeof *o);
}

static void
rows_json(json_writer *w, const ana_collect *c, const char *key, const ana_op_row *rows, size_t n)
{
    const ana_ops_result *res = &c->opsr;
    char sbuf[KERNELS_SHORT_NAME_MAX + 8];
    json_key(w, key);
    json_begin_array(w);
    for (size_t i = 0; i < n && i < c->o.top_ops; i++) {
        const ana_op_row *r = &rows[i];
        json_begin_object(w);
        json_kv_string(w, "name", dpro_reader_string(c->r, r->name));
        json_kv_uint(w, "instances", r->instances);
        json_kv_double(w, "host_us", (double)r->host_ns / 1e3);
        json_kv_uint(w, "launches", r->launches);
        json_kv_uint(w, "device_ops", r->dev_ops);
        json_kv_double(w, "device_us", (double)r->dev_ns / 1e3);
        json_kv_double(w, "device_pct", ana_pct((double)r->dev_ns, (double)res->dev_ns));
        json_kv_double(w, "launch_delay_mean_us",
                       r->dev_ops ? r->delay_sum_ns / 1e3 / (double)r->dev_ops : 0.0);
        json_kv_uint(w, "kernel_names", r->kernel_names);
        json_key(w, "kernels");
        json_begin_array(w);
        for (size_t k = 0; k < ANA_OP_KERNELS && k < r->kernel_names; k++) {
            const char *kn = dpro_reader_string(c->r, r->kernels[k].name);
            json_begin_object(w);
            json_kv_string(w, "name", kn);
            json_kv_string(w, "short_name", kernels_short_name(kn, 0, sbuf, sizeof sbuf));
            json_kv_uint(w, "count", r->kernels[k].count);
            json_kv_double(w, "device_us", (double)r->kernels[k].ns / 1e3);
            json_end_object(w);
        }
        json_end_array(w);
        json_end_object(w);
    }
    json_end_array(w);
}

/* Members: device_ops, device_us (all device ops), charged{cpu_op{device_ops, device_us},
 * annotation{...}}, op_names, annotation_names, cpu_ops[top rows], annotations[top rows];
 * a row: name, instances, host_us, launches, device_ops, device_us, device_pct,
 * launch_delay_mean_us, kernel_names, kernels[up to ANA_OP_KERNELS: name, short_name,
 * count, device_us]. */
void
ana_ops_json(json_writer *w, const ana_collect *c)
{
    const ana_ops_result *res = &c->opsr;
    json_kv_uint(w, "device_ops", res->dev_ops);
    json_kv_double(w, "device_us", (double)res->dev_ns / 1e3);
    json_key(w, "charged");
    json_begin_object(w);
    json_key(w, "cpu_op");
    json_begin_object(w);
    json_kv_uint(w, "device_ops", res->op_dev_ops);
    json_kv_double(w, "device_us", (double)res->op_dev_ns / 1e3);
    json_end_object(w);
    json_key(w, "annotation");
    json_begin_object(w);
    json_kv_uint(w, "device_ops", res->ann_dev_ops);
    json_kv_double(w, "device_us", (double)res->ann_dev_ns / 1e3);
    json_end_object(w);
    json_end_object(w);
    json_kv_uint(w, "op_names", res->nops);
    json_kv_uint(w, "annotation_names", res->nanns);
    rows_json(w, c, "cpu_ops", res->ops, res->nops);
    rows_json(w, c, "annotations", res->anns, res->nanns);
}

static void
rows_print(FILE *out, const ana_collect *c, const char *what, const ana_op_row *rows, size_t n,
           uint64_t charged_ops, uint64_t charged_ns)
{
    const ana_ops_result *res = &c->opsr;
    size_t shown = n < c->o.top_ops ? n : c->o.top_ops, nk = 0;
    uint32_t *ids = malloc((shown ? shown : 1) * ANA_OP_KERNELS * sizeof *ids);
    kernels_name_buf *sn = NULL;
    for (size_t i = 0; ids && i < shown; i++)
        for (size_t k = 0; k < ANA_OP_KERNELS && k < rows[i].kernel_names; k++)
            ids[nk++] = rows[i].kernels[k].name;
    sn = ids ? ana_short_names(c, ids, nk) : NULL;
    free(ids);
    if (!sn)
        return;
    nk = 0;
    fprintf(out,
            "  %s: %" PRIu64 " of %" PRIu64 " device ops (%.1f%% of device time) launched "
            "inside one; top %zu of %zu names by device time:\n",
            what, charged_ops, res->dev_ops, ana_pct((double)charged_ns, (double)res->dev_ns),
            shown, n);
    fprintf(out, "  %9s %12s %9s %12s %6s %10s  %s\n", "instances", "host ms", "dev ops",
            "device ms", "share", "delay us", "name / its kernels");
    for (size_t i = 0; i < shown; i++) {
        const ana_op_row *r = &rows[i];
        fprintf(out, "  %9" PRIu64 " %12.3f %9" PRIu64 " %12.3f %5.1f%% %10.2f  %s\n", r->instances,
                r->host_ns / 1e6, r->dev_ops, r->dev_ns / 1e6,
                ana_pct((double)r->dev_ns, (double)res->dev_ns),
                r->dev_ops ? r->delay_sum_ns / 1e3 / (double)r->dev_ops : 0.0,
                dpro_reader_string(c->r, r->name));
        for (size_t k = 0; k < ANA_OP_KERNELS && k < r->kernel_names; k++)
            fprintf(out, "  %9s %12s %9" PRIu64 " %12.3f %6s %10s    %s\n", "", "",
                    r->kernels[k].count, r->kernels[k].ns / 1e6, "", "", sn[nk++].text);
    }
    free(sn);
}

void
ana_ops_print(FILE *out, const ana_collect *c)
{
    const ana_ops_result *res = &c->opsr;
    rows_print(out, c, "cpu_ops", res->ops, res->nops, res->op_dev_ops, res->op_dev_ns);
    rows_print(out, c, "annotations", res->anns, res->nanns, res->ann_dev_ops, res->ann_dev_ns);
}
