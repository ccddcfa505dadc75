/*
 * json_num.c: JSON integers and microsecond times from their text (json_num.h); the usual
 * shapes eight digits at a time, anything else digit by digit.
 */
#include <string.h>

#include "json_num.h"

static inline uint64_t
imp_load8(const char *s)
{
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

/* Whether the eight bytes of w (imp_load8) are all ASCII digits. */
static inline int
imp_is_digits8(uint64_t w)
{
    return (w & 0xF0F0F0F0F0F0F0F0ULL) == 0x3030303030303030ULL &&
           ((w + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) == 0x3030303030303030ULL;
}

/* The value of eight digits (imp_is_digits8), the first the most significant: three
 * multiply-and-shift steps pair them into 2, 4, then 8-digit numbers. */
static inline uint64_t
imp_digits8(uint64_t w)
{
    w -= 0x3030303030303030ULL;
    w = (w * 10 + (w >> 8)) & 0x00FF00FF00FF00FFULL;
    w = (w * 100 + (w >> 16)) & 0x0000FFFF0000FFFFULL;
    return (w * 10000 + (w >> 32)) & 0xFFFFFFFFULL;
}

/* See json_num.h. */
int
imp_parse_i64(const char *s, size_t len, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    if (len - 1 < 18 && s[0] != '-') {
        /* 1 to 18 digits: cannot overflow */
        for (; i < len; i++) {
            unsigned d = (unsigned)(s[i] - '0');
            if (d > 9)
                return -1;
            v = v * 10 + d;
        }
        *out = (int64_t)v;
        return 0;
    }
    if (i < len && s[i] == '-') {
        neg = 1;
        i++;
    }
    if (i == len)
        return -1;
    for (; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9)
            return -1;
        if (v > (UINT64_C(1) << 63) / 10)
            return -1;
        v = v * 10 + d;
    }
    if (neg) {
        if (v > (UINT64_C(1) << 63))
            return -1;
        *out = (int64_t)(0 - v);
    } else {
        if (v > (uint64_t)INT64_MAX)
            return -1;
        *out = (int64_t)v;
    }
    return 0;
}

/* See json_num.h. */
int
imp_parse_int_text(const char *s, size_t len, int64_t *out)
{
    int rc = -1;
    if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && len - 2 <= 16) {
        uint64_t v = 0;
        size_t i = 2;
        for (; i < len; i++) {
            unsigned char c = (unsigned char)s[i];
            unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                         : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                                : 16u;
            if (d > 15)
                break;
            v = v << 4 | d;
        }
        if (i == len && v <= (uint64_t)INT64_MAX) {
            *out = (int64_t)v;
            rc = 0;
        }
    } else if (len > 0) {
        rc = imp_parse_i64(s, len, out);
    }
    return rc;
}

/* imp_parse_us for any text (exponents, many digits). */
static int
imp_parse_us_general(const char *s, size_t len, uint64_t *ns)
{
    /* value = digits (int part, then fraction) x 10^exp microseconds; we want the
     * digits shifted by exp + 3 places, rounded half up on the first dropped digit. */
    size_t i = 0, int_begin, int_end, frac_begin, frac_end;
    long exp10 = 0;
    if (len == 0 || s[0] == '-')
        return -1;
    int_begin = i;
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++;
    int_end = i;
    frac_begin = frac_end = i;
    if (i < len && s[i] == '.') {
        frac_begin = ++i;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++;
        frac_end = i;
    }
    if (int_end == int_begin && frac_end == frac_begin)
        return -1;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        int eneg = 0;
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i == len)
            return -1;
        for (; i < len; i++) {
            unsigned d = (unsigned)(s[i] - '0');
            if (d > 9)
                return -1;
            if (exp10 < 100000)
                exp10 = exp10 * 10 + d;
        }
        if (eneg)
            exp10 = -exp10;
    }
    if (i != len)
        return -1;
    size_t nint = int_end - int_begin, nfrac = frac_end - frac_begin;
    size_t ndig = nint + nfrac;
    long point = (long)nint + exp10 + 3; /* digits before the nanosecond point */
    uint64_t v = 0;
    int any = 0;
    for (size_t d = 0; d < ndig; d++) {
        char c = d < nint ? s[int_begin + d] : s[frac_begin + d - nint];
        if (c != '0')
            any = 1;
    }
    if (!any) {
        *ns = 0;
        return 0;
    }
    if (point > 40)
        return -1;
    for (long d = 0; d < point; d++) {
        unsigned digit = 0;
        if (d < (long)ndig)
            digit =
                (unsigned)((size_t)d < nint ? s[int_begin + d] : s[frac_begin + d - nint]) - '0';
        if (v > (UINT64_MAX - digit) / 10)
            return -1;
        v = v * 10 + digit;
    }
    if (point >= 0 && point < (long)ndig) {
        size_t d = (size_t)point;
        char c = d < nint ? s[int_begin + d] : s[frac_begin + d - nint];
        if (c >= '5') {
            if (v == UINT64_MAX)
                return -1;
            v++;
        }
    }
    *ns = v;
    return 0;
}

/* See json_num.h. */
int
imp_parse_us(const char *s, size_t len, uint64_t *ns)
{
    /* The usual text, "1712195495505582.988": at most 16 integer digits (so that the
     * nanoseconds fit: 10^16 * 1000 < 2^64), an optional fraction, no exponent. Anything
     * else goes the general way, which gives the same value for these. */
    uint64_t v = 0, w;
    size_t i = 0;
    unsigned d;
    if (len >= 8 && imp_is_digits8(w = imp_load8(s))) { /* eight digits at a time */
        v = imp_digits8(w);
        i = 8;
        if (len >= 16 && imp_is_digits8(w = imp_load8(s + 8))) {
            v = v * 100000000u + imp_digits8(w);
            i = 16;
        }
    }
    while (i < len && i <= 16 && (d = (unsigned)(s[i] - '0')) <= 9) {
        v = v * 10 + d;
        i++;
    }
    if (i == 0 || i > 16)
        return imp_parse_us_general(s, len, ns);
    if (i == len) {
        *ns = v * 1000;
        return 0;
    }
    if (s[i] != '.')
        return imp_parse_us_general(s, len, ns);
    size_t f = ++i, nf = len - f;
    uint64_t frac = 0;
    unsigned up = 0;
    if (nf == 3) { /* the usual three: no rounding */
        unsigned d0 = (unsigned)(s[f] - '0'), d1 = (unsigned)(s[f + 1] - '0');
        unsigned d2 = (unsigned)(s[f + 2] - '0');
        if ((d0 > 9) | (d1 > 9) | (d2 > 9))
            return imp_parse_us_general(s, len, ns);
        *ns = v * 1000 + d0 * 100 + d1 * 10 + d2;
        return 0;
    }
    for (; i < len && (d = (unsigned)(s[i] - '0')) <= 9; i++) {
        if (i - f < 3)
            frac = frac * 10 + d;
        else if (i - f == 3)
            up = d >= 5; /* half up on the first dropped digit */
    }
    if (i != len || i == f)
        return imp_parse_us_general(s, len, ns);
    for (size_t n = i - f; n < 3; n++)
        frac *= 10;
    *ns = v * 1000 + frac + up;
    return 0;
}
