/* memcpy.c: memcpy and memset bandwidth per kind, memory and size class (analyses.h). */
#include "ana_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The memory a copy or set record's name says it used (Kineto: "Memcpy HtoD (Pinned ->
 * Device)", "Memset (Device)"): the first of Pinned, Pageable, Managed, Device in it. */
static uint8_t
memory_of(const char *name)
{
    if (strstr(name, "Pinned"))
        return ANA_MEM_PINNED;
    if (strstr(name, "Pageable"))
        return ANA_MEM_PAGEABLE;
    if (strstr(name, "Managed"))
        return ANA_MEM_MANAGED;
    if (strstr(name, "Device"))
        return ANA_MEM_DEVICE;
    return ANA_MEM_UNKNOWN;
}

/* -1 for 0 bytes, else k with 4^k <= bytes < 4^(k+1). */
static int8_t
size_class(uint64_t bytes)
{
    int8_t k = -1;
    while (bytes) {
        k++;
        bytes >>= 2;
    }
    return k;
}

/* 4^k, saturated at UINT64_MAX. */
static uint64_t
pow4(int k)
{
    return 2 * k >= 64 ? UINT64_MAX : 1ull << (2 * k);
}

static int
cmp_row(const void *pa, const void *pb)
{
    const ana_mem_row *a = pa, *b = pb;
    if (a->kind != b->kind)
        return a->kind < b->kind ? -1 : 1;
    if (a->subkind != b->subkind)
        return a->subkind < b->subkind ? -1 : 1;
    if (a->memory != b->memory)
        return a->memory < b->memory ? -1 : 1;
    /* all sizes first */
    int ca = a->size_class == ANA_SIZE_ALL ? -2 : a->size_class;
    int cb = b->size_class == ANA_SIZE_ALL ? -2 : b->size_class;
    return (ca > cb) - (ca < cb);
}

static int
same_key(const ana_mem_row *a, const ana_mem_row *b)
{
    return a->kind == b->kind && a->subkind == b->subkind && a->memory == b->memory &&
           a->size_class == b->size_class;
}

int
ana_mem_compute(ana_collect *c)
{
    ana_mem_result *m = &c->mem;
    uint32_t nstr = dpro_reader_string_count(c->r);
    uint8_t *mem_of = malloc((size_t)nstr + 1);
    size_t n = 0;
    for (size_t i = 0; i < c->nops; i++)
        n += c->ops[i].kind != DPRO_KIND_KERNEL;
    ana_mem_row *rows = malloc((n ? 2 * n : 1) * sizeof *rows);
    if (!mem_of || !rows) {
        free(mem_of);
        free(rows);
        return -1;
    }
    memset(mem_of, 0xff, (size_t)nstr + 1);
    n = 0;
    for (size_t i = 0; i < c->nops; i++) {
        const ana_op *o = &c->ops[i];
        uint32_t id = o->name <= nstr ? o->name : 0;
        if (o->kind == DPRO_KIND_KERNEL)
            continue;
        if (mem_of[id] == 0xff)
            mem_of[id] = memory_of(dpro_reader_string(c->r, id));
        ana_mem_row r = {o->kind,
                         o->kind == DPRO_KIND_MEMCPY ? o->subkind : 0,
                         mem_of[id],
                         size_class(o->bytes),
                         1,
                         o->bytes,
                         o->end - o->start};
        rows[n++] = r;
        r.size_class = ANA_SIZE_ALL;
        rows[n++] = r;
    }
    qsort(rows, n, sizeof *rows, cmp_row);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && same_key(&rows[k - 1], &rows[i])) {
            rows[k - 1].count += rows[i].count;
            rows[k - 1].bytes += rows[i].bytes;
            rows[k - 1].ns += rows[i].ns;
        } else {
            rows[k++] = rows[i];
        }
    }
    m->rows = rows;
    m->nrows = k;
    free(mem_of);
    return 0;
}

static const char *
kind_label(const ana_mem_row *r)
{
    return r->kind == DPRO_KIND_MEMSET ? "memset" : ana_copy_kind_name(r->subkind);
}

/* Bandwidth in GB/s (bytes per ns); 0 without device time. */
static double
gbps(const ana_mem_row *r)
{
    return r->ns ? (double)r->bytes / (double)r->ns : 0.0;
}

/* Members: kinds[{op ("memcpy" | "memset"), kind ("HtoD", ..., "memset"), memory
 * ("pinned", "pageable", "managed", "device", "unknown"), count, bytes, us, gb_per_s,
 * sizes[{size_min, size_max (bytes, the class [min, max); 0 bytes: 0, 1), count, bytes,
 * us, gb_per_s}]}]. */
void
ana_mem_json(json_writer *w, const ana_collect *c)
{
    const ana_mem_result *m = &c->mem;
    int open = 0;
    json_key(w, "kinds");
    json_begin_array(w);
    for (size_t i = 0; i < m->nrows; i++) {
        const ana_mem_row *r = &m->rows[i];
        if (r->size_class == ANA_SIZE_ALL) {
            if (open) {
                json_end_array(w);
                json_end_object(w);
            }
            json_begin_object(w);
            json_kv_string(w, "op", r->kind == DPRO_KIND_MEMSET ? "memset" : "memcpy");
            json_kv_string(w, "kind", kind_label(r));
            json_kv_string(w, "memory", ana_memory_name(r->memory));
        } else {
            json_begin_object(w);
            json_kv_uint(w, "size_min", r->size_class < 0 ? 0 : pow4(r->size_class));
            json_kv_uint(w, "size_max", r->size_class < 0 ? 1 : pow4(r->size_class + 1));
        }
        json_kv_uint(w, "count", r->count);
        json_kv_uint(w, "bytes", r->bytes);
        json_kv_double(w, "us", (double)r->ns / 1e3);
        json_kv_double(w, "gb_per_s", gbps(r));
        if (r->size_class == ANA_SIZE_ALL) {
            json_key(w, "sizes");
            json_begin_array(w);
            open = 1;
        } else {
            json_end_object(w);
        }
    }
    if (open) {
        json_end_array(w);
        json_end_object(w);
    }
    json_end_array(w);
}

/* Writes a byte count as "4 KiB" into buf. */
static const char *
size_label(uint64_t b, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (b >= 1024 && b % 1024 == 0 && u < 6) {
        b /= 1024;
        u++;
    }
    snprintf(buf, len, "%" PRIu64 " %s", b, units[u]);
    return buf;
}

void
ana_mem_print(FILE *out, const ana_collect *c)
{
    const ana_mem_result *m = &c->mem;
    char lo[32], hi[32], sz[72];
    if (!m->nrows) {
        fprintf(out, "  no copies or sets\n");
        return;
    }
    fprintf(out, "  %-8s %-9s %-21s %10s %14s %12s %10s\n", "kind", "memory", "size", "count",
            "bytes", "total ms", "GB/s");
    for (size_t i = 0; i < m->nrows; i++) {
        const ana_mem_row *r = &m->rows[i];
        if (r->size_class == ANA_SIZE_ALL)
            snprintf(sz, sizeof sz, "(all)");
        else if (r->size_class < 0)
            snprintf(sz, sizeof sz, "0 B");
        else
            snprintf(sz, sizeof sz, "%s - %s", size_label(pow4(r->size_class), lo, sizeof lo),
                     size_label(pow4(r->size_class + 1), hi, sizeof hi));
        fprintf(out, "  %-8s %-9s %-21s %10" PRIu64 " %14" PRIu64 " %12.3f %10.3f\n",
                r->size_class == ANA_SIZE_ALL ? kind_label(r) : "",
                r->size_class == ANA_SIZE_ALL ? ana_memory_name(r->memory) : "", sz, r->count,
                r->bytes, r->ns / 1e6, gbps(r));
    }
}
