/* job_share_order.c: which process reads which files and ranks in a shared reading (see
 * job.h and job_int.h: job_share_file_order, job_share_range). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "job_int.h"

/* A file name and its place in the listing, as job_share_file_order sorts them. */
typedef struct named {
    const char *name;
    size_t i;
} named;

static int
named_cmp(const void *x, const void *y)
{
    const named *a = x, *b = y;
    int rc = strverscmp(a->name, b->name); /* digits as numbers: rank2 before rank10 */
    return rc != 0 ? rc : (a->i > b->i) - (a->i < b->i);
}

size_t *
job_share_file_order(char *const *files, size_t n)
{
    named *v = malloc((n + 1) * sizeof *v);
    size_t *order = malloc((n + 1) * sizeof *order);
    for (size_t i = 0; v && order && i < n; i++)
        v[i] = (named){files[i], i};
    if (v && order)
        qsort(v, n, sizeof *v, named_cmp);
    for (size_t k = 0; v && order && k < n; k++)
        order[k] = v[k].i;
    if (!v) {
        free(order);
        order = NULL;
    }
    free(v);
    return order;
}

void
job_share_range(const job_share *sh, int32_t n, int32_t *lo, int32_t *hi)
{
    int64_t p = sh->me, np = sh->nprocs;
    /* k * np / n == p: from ceil(p * n / np) to ceil((p + 1) * n / np) */
    *lo = (int32_t)((p * n + np - 1) / np);
    *hi = (int32_t)(((p + 1) * n + np - 1) / np);
}
