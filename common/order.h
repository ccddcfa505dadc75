/* common/order.h: qsort/bsearch comparators of plain numbers, ascending. One definition
 * for every part that sorts int32_t, int64_t, uint64_t or double values. */
#ifndef DPRO_COMMON_ORDER_H
#define DPRO_COMMON_ORDER_H

#include <stdint.h>

/* Ascending order of the int32_t values at pa and pb: -1, 0 or 1. */
static inline int
order_i32(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* Ascending order of the int64_t values at pa and pb: -1, 0 or 1. */
static inline int
order_i64(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

/* Ascending order of the uint64_t values at pa and pb: -1, 0 or 1. */
static inline int
order_u64(const void *pa, const void *pb)
{
    uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;
    return (a > b) - (a < b);
}

/* Ascending order of the double values at pa and pb (NaN compares equal to everything):
 * -1, 0 or 1. */
static inline int
order_double(const void *pa, const void *pb)
{
    double a = *(const double *)pa, b = *(const double *)pb;
    return (a > b) - (a < b);
}

#endif
