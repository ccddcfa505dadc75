/*
 * json_squeeze.c: the whitespace pre-pass of the JSON importers (json_squeeze.h): a byte at
 * a time (the reference), SSSE3 (pshufb compaction) and AVX-512 (VBMI2 compress), picked
 * by what the CPU has.
 */
#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define IMP_X86 1
#endif

#include "json_squeeze.h"

/* Sixteen bytes as one vector (GCC and clang vector extensions: SSE2 on x86-64, NEON on
 * ARM, plain code elsewhere). */
typedef unsigned char imp_u8x16 __attribute__((vector_size(16)));

/* Newlines in p[0..n): the line of an error position. Sixteen bytes at a time, since this
 * runs over every byte of the input: per-lane counters (a compare gives -1 per match)
 * summed every 255 steps, before a lane can wrap. */
uint64_t
imp_count_lines(const unsigned char *p, size_t n)
{
    const imp_u8x16 nl = (imp_u8x16){0} + '\n';
    uint64_t lines = 0;
    size_t i = 0;
    while (i + 16 <= n) {
        imp_u8x16 acc = {0};
        for (int r = 0; r < 255 && i + 16 <= n; r++, i += 16) {
            imp_u8x16 v;
            memcpy(&v, p + i, 16);
            acc -= (imp_u8x16)(v == nl);
        }
        for (int j = 0; j < 16; j++)
            lines += acc[j];
    }
    for (; i < n; i++)
        lines += p[i] == '\n';
    return lines;
}

/* Whitespace as the pre-pass knows it (yajl also skips \v and \f: those it sees). */
#define IMP_IS_WS(c) ((c) == ' ' || (c) == '\n' || (c) == '\r' || (c) == '\t')

/* After these, outside a string, whitespace separates nothing: each is a token of its own,
 * or ends one (a closing quote). */
static int
imp_is_sep(unsigned c)
{
    return c == ',' || c == ':' || c == '{' || c == '}' || c == '[' || c == ']' || c == '"';
}

/* The reference: a byte at a time. Also the tails and the blocks with a backslash of the
 * SIMD levels, and the way back from a squeezed position (imp_squeeze_unmap). */
static size_t
imp_squeeze_scalar(imp_sq *st, const unsigned char *in, size_t n, unsigned char *out,
                   uint64_t *lines)
{
    unsigned in_str = st->in_str, esc = st->esc, drop = st->drop;
    size_t o = 0;
    uint64_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned c = in[i];
        nl += c == '\n';
        if (in_str) {
            out[o++] = (unsigned char)c;
            if (esc)
                esc = 0;
            else if (c == '\\')
                esc = 1;
            else if (c == '"')
                in_str = 0, drop = 1;
        } else if (IMP_IS_WS(c)) {
            if (!drop)
                out[o++] = (unsigned char)c;
        } else {
            out[o++] = (unsigned char)c;
            in_str = c == '"';
            drop = imp_is_sep(c);
        }
    }
    st->in_str = in_str;
    st->esc = esc;
    st->drop = drop;
    *lines += nl;
    return o;
}

/* Offset in the chunk in[0..n) (squeezed from state st) of a position pos of its squeezed
 * text. yajl stands after a token (it consumes whitespace only with the token after it):
 * just after the byte that became byte pos - 1. But where yajl steps back to the start of
 * the token it rejects (at_next), the whitespace before that token is behind it: at the
 * byte that became byte pos. */
size_t
imp_squeeze_unmap(imp_sq st, const unsigned char *in, size_t n, size_t pos, int at_next)
{
    unsigned char one[IMP_PIECE_SLACK];
    uint64_t lines = 0;
    size_t done = 0;
    if (pos == 0 && !at_next)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (imp_squeeze_scalar(&st, in + i, 1, one, &lines)) {
            if (at_next && done == pos)
                return i;
            if (++done == pos && !at_next)
                return i + 1;
        }
    return n;
}

#ifdef IMP_X86
/* The bit logic of a 64-byte block without a backslash (and not after one), from its masks:
 * quotes, whitespace, separators (imp_is_sep), all bit i for byte i. Returns the bytes to
 * keep and updates *st as imp_squeeze_scalar would. */
static inline uint64_t
imp_squeeze_bits(imp_sq *st, uint64_t q, uint64_t ws, uint64_t sep)
{
    uint64_t inside = q; /* bit i: byte i opens or is inside a string (the closer is not) */
    inside ^= inside << 1;
    inside ^= inside << 2;
    inside ^= inside << 4;
    inside ^= inside << 8;
    inside ^= inside << 16;
    inside ^= inside << 32;
    if (st->in_str)
        inside = ~inside;
    uint64_t w = ws & ~inside;
    /* runs of w that follow a separator (or start the block after one) are dropped: the
     * carry of the addition runs through such a run, clearing it */
    uint64_t start = ((sep << 1) | st->drop) & w;
    uint64_t dropped = w & ~(start + w);
    st->in_str = (unsigned)(inside >> 63);
    st->drop = (unsigned)((dropped | sep) >> 63);
    return ~dropped;
}

/* Byte indexes of the set bits of an 8-bit mask, packed low (SSSE3 level), and popcounts. */
static uint64_t imp_shuf8[256];
static unsigned char imp_pop8[256];
static pthread_once_t imp_tables_once = PTHREAD_ONCE_INIT;

static void
imp_tables_init(void)
{
    for (unsigned m = 0; m < 256; m++) {
        uint64_t idx = 0;
        unsigned n = 0;
        for (unsigned b = 0; b < 8; b++)
            if (m & (1u << b))
                idx |= (uint64_t)b << (8 * n++);
        imp_shuf8[m] = idx;
        imp_pop8[m] = (unsigned char)n;
    }
}

/* Masks of 64 bytes with SSSE3: whitespace and separators by two pshufb lookups (on the
 * low and the high nibble: the classes' bits must meet), quotes by a compare; whether
 * there is a backslash; newlines counted into *nl. */
__attribute__((target("ssse3,popcnt"))) static inline void
imp_masks64_ssse3(const unsigned char *p, __m128i v[4], uint64_t *q, uint64_t *ws, uint64_t *sep,
                  int *bs, uint64_t *nl)
{
    /* bit 0: space; 1: \t \n \r; 2: " ,; 3: :; 4: [ ] { } */
    const __m128i lo_tab = _mm_setr_epi8(1, 0, 4, 0, 0, 0, 0, 0, 0, 2, 2 | 8, 16, 4, 2 | 16, 0, 0);
    const __m128i hi_tab = _mm_setr_epi8(2, 0, 1 | 4, 8, 0, 16, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m128i low4 = _mm_set1_epi8(0x0f), zero = _mm_setzero_si128();
    __m128i anybs = zero, nls = zero;
    uint64_t mq = 0, mws = 0, msep = 0;
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++) {
        __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * j));
        __m128i cls =
            _mm_and_si128(_mm_shuffle_epi8(lo_tab, _mm_and_si128(x, low4)),
                          _mm_shuffle_epi8(hi_tab, _mm_and_si128(_mm_srli_epi16(x, 4), low4)));
        unsigned notws =
            (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_and_si128(cls, _mm_set1_epi8(3)), zero));
        unsigned notsep = (unsigned)_mm_movemask_epi8(
            _mm_cmpeq_epi8(_mm_and_si128(cls, _mm_set1_epi8(4 | 8 | 16)), zero));
        mq |= (uint64_t)(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')))
              << (16 * j);
        mws |= (uint64_t)(~notws & 0xffffu) << (16 * j);
        msep |= (uint64_t)(~notsep & 0xffffu) << (16 * j);
        anybs = _mm_or_si128(anybs, _mm_cmpeq_epi8(x, _mm_set1_epi8('\\')));
        nls = _mm_sub_epi8(nls, _mm_cmpeq_epi8(x, _mm_set1_epi8('\n')));
        v[j] = x;
    }
    nls = _mm_sad_epu8(nls, zero);
    *nl += (uint64_t)_mm_cvtsi128_si64(nls) +
           (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(nls, nls));
    *q = mq;
    *ws = mws;
    *sep = msep;
    *bs = _mm_movemask_epi8(anybs) != 0;
}

/* SSSE3 masks, pshufb compaction eight bytes at a time (x86-64-v2: SSSE3, POPCNT). */
__attribute__((target("ssse3,popcnt"))) static size_t
imp_squeeze_ssse3(imp_sq *st, const unsigned char *in, size_t n, unsigned char *out,
                  uint64_t *lines)
{
    size_t i = 0, o = 0;
    uint64_t nl = 0;
    imp_sq s = *st; /* a local copy: the stores to out cannot alias it */
    while (i + 64 <= n) {
        __m128i v[4];
        uint64_t q, ws, sep, nl64 = 0;
        int bs;
        imp_masks64_ssse3(in + i, v, &q, &ws, &sep, &bs, &nl64);
        if (bs || s.esc) {
            o += imp_squeeze_scalar(&s, in + i, 64, out + o, lines);
            i += 64;
            continue;
        }
        nl += nl64;
        uint64_t keep = imp_squeeze_bits(&s, q, ws, sep);
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            unsigned lo = (unsigned)(keep >> (16 * j)) & 0xff;
            unsigned hi = (unsigned)(keep >> (16 * j + 8)) & 0xff;
            __m128i idx = _mm_set_epi64x((long long)(imp_shuf8[hi] + 0x0808080808080808ULL),
                                         (long long)imp_shuf8[lo]);
            __m128i c = _mm_shuffle_epi8(v[j], idx);
            _mm_storel_epi64((__m128i *)(out + o), c);
            o += imp_pop8[lo];
            _mm_storel_epi64((__m128i *)(out + o), _mm_unpackhi_epi64(c, c));
            o += imp_pop8[hi];
        }
        i += 64;
    }
    *lines += nl;
    o += imp_squeeze_scalar(&s, in + i, n - i, out + o, lines);
    *st = s;
    return o;
}

/* AVX-512 BW masks, VBMI2 compress: 64 bytes at a time. */
__attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"))) static size_t
imp_squeeze_avx512(imp_sq *st, const unsigned char *in, size_t n, unsigned char *out,
                   uint64_t *lines)
{
    size_t i = 0, o = 0;
    uint64_t nl = 0;
    imp_sq s = *st; /* a local copy: the stores to out cannot alias it */
    const __m512i cq = _mm512_set1_epi8('"'), cbs = _mm512_set1_epi8('\\');
    const __m512i cnl = _mm512_set1_epi8('\n'), csp = _mm512_set1_epi8(' ');
    const __m512i ccr = _mm512_set1_epi8('\r'), ctab = _mm512_set1_epi8('\t');
    const __m512i c20 = _mm512_set1_epi8(0x20), clb = _mm512_set1_epi8('{');
    const __m512i crb = _mm512_set1_epi8('}'), ccomma = _mm512_set1_epi8(',');
    const __m512i ccolon = _mm512_set1_epi8(':');
    while (i + 64 <= n) {
        __m512i v = _mm512_loadu_si512((const void *)(in + i));
        uint64_t bs = _mm512_cmpeq_epi8_mask(v, cbs);
        if (bs || s.esc) {
            o += imp_squeeze_scalar(&s, in + i, 64, out + o, lines);
            i += 64;
            continue;
        }
        uint64_t q = _mm512_cmpeq_epi8_mask(v, cq);
        uint64_t nlm = _mm512_cmpeq_epi8_mask(v, cnl);
        uint64_t ws = nlm | _mm512_cmpeq_epi8_mask(v, csp) | _mm512_cmpeq_epi8_mask(v, ccr) |
                      _mm512_cmpeq_epi8_mask(v, ctab);
        __m512i lower = _mm512_or_si512(v, c20);
        uint64_t sep = q | _mm512_cmpeq_epi8_mask(lower, clb) | _mm512_cmpeq_epi8_mask(lower, crb) |
                       _mm512_cmpeq_epi8_mask(v, ccomma) | _mm512_cmpeq_epi8_mask(v, ccolon);
        nl += (uint64_t)_mm_popcnt_u64(nlm);
        uint64_t keep = imp_squeeze_bits(&s, q, ws, sep);
        _mm512_storeu_si512((void *)(out + o), _mm512_maskz_compress_epi8(keep, v));
        o += (size_t)_mm_popcnt_u64(keep);
        i += 64;
    }
    *lines += nl;
    o += imp_squeeze_scalar(&s, in + i, n - i, out + o, lines);
    *st = s;
    return o;
}
#endif

/* See json_squeeze.h. */
imp_squeeze_fn
imp_squeeze_pick(int *level)
{
    int want = *level == IMP_SQUEEZE_AUTO ? IMP_SQUEEZE_AVX512 : *level;
    if (want == IMP_SQUEEZE_OFF || want < IMP_SQUEEZE_AUTO || want > IMP_SQUEEZE_AVX512) {
        *level = IMP_SQUEEZE_OFF;
        return NULL;
    }
#ifdef IMP_X86
    __builtin_cpu_init();
    if (want >= IMP_SQUEEZE_AVX512 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi2") &&
        __builtin_cpu_supports("popcnt")) {
        *level = IMP_SQUEEZE_AVX512;
        return imp_squeeze_avx512;
    }
    if (want >= IMP_SQUEEZE_SSSE3 && __builtin_cpu_supports("ssse3") &&
        __builtin_cpu_supports("popcnt")) {
        pthread_once(&imp_tables_once, imp_tables_init);
        *level = IMP_SQUEEZE_SSSE3;
        return imp_squeeze_ssse3;
    }
#endif
    if (*level == IMP_SQUEEZE_AUTO) { /* a byte at a time costs more than it saves yajl */
        *level = IMP_SQUEEZE_OFF;
        return NULL;
    }
    *level = IMP_SQUEEZE_SCALAR;
    return imp_squeeze_scalar;
}
