/* deflate.c: dpro_deflate: whole buffers in the zlib format, with libdeflate or zlib. */
#include "config.h"
#include "dprotrace.h"
#include "trace_internal.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#ifdef HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif

/* ---- whole buffers in the zlib format: libdeflate when configure found it, else zlib ---- */

struct dpro_deflater {
    int level; /* the compressor's own level its state below was made for; 0: none yet */
    uint8_t *out;
    size_t out_cap;
#ifdef HAVE_LIBDEFLATE
    struct libdeflate_compressor *ld;
#else
    z_stream zs;
#endif
};

#ifdef HAVE_LIBDEFLATE
/* libdeflate's level for zlib's levels 1..9 in batches: the lowest whose output was no
 * larger than zlib's at that level on every shared Kineto trace (per batch) and on
 * bench_trace; 9 stays 9 (10-12, its near-optimal parser, is several times slower). */
static const int batch_level[10] = {0, 1, 3, 3, 5, 5, 5, 6, 7, 9};

/* String blocks (the writer compresses them at zlib level 6 only): on these small blocks
 * of names libdeflate 5 and 6 compress worse than zlib 6, and 7 about as well
 * (docs/models.md). */
#define TEXT_LEVEL 7

/* The level of the compressor for zlib level zl (1..9) and data of kind what. */
static int
deflater_level(int zl, enum dpro_deflate_data what)
{
    return what == DPRO_DEFLATE_TEXT ? TEXT_LEVEL : batch_level[zl];
}

/* Makes d's state for (its own) level level. */
static int
deflater_setup(dpro_deflater *d, int level)
{
    libdeflate_free_compressor(d->ld);
    d->level = 0;
    d->ld = libdeflate_alloc_compressor(level);
    if (!d->ld)
        return DPRO_ERR_NOMEM;
    d->level = level;
    return DPRO_OK;
}

/* Compresses len bytes at in into d->out (room checked by the caller); *outlen: its size. */
static int
deflater_run(dpro_deflater *d, const void *in, size_t len, size_t *outlen)
{
    *outlen = libdeflate_zlib_compress(d->ld, in, len, d->out, d->out_cap);
    return *outlen ? DPRO_OK : DPRO_ERR_NOMEM;
}

static size_t
deflater_bound(dpro_deflater *d, size_t len)
{
    return libdeflate_zlib_compress_bound(d->ld, len);
}

static void
deflater_end(dpro_deflater *d)
{
    libdeflate_free_compressor(d->ld);
}
#else
static int
deflater_level(int zl, enum dpro_deflate_data what)
{
    return zl;
}

static int
deflater_setup(dpro_deflater *d, int level)
{
    if (d->level)
        deflateEnd(&d->zs);
    d->level = 0;
    memset(&d->zs, 0, sizeof d->zs);
    if (deflateInit(&d->zs, level) != Z_OK)
        return DPRO_ERR_NOMEM;
    d->level = level;
    return DPRO_OK;
}

static int
deflater_run(dpro_deflater *d, const void *in, size_t len, size_t *outlen)
{
    if (len > UINT32_MAX || deflateReset(&d->zs) != Z_OK)
        return DPRO_ERR_NOMEM;
    d->zs.next_in = (Bytef *)in;
    d->zs.avail_in = (uInt)len;
    d->zs.next_out = d->out;
    d->zs.avail_out = (uInt)(d->out_cap < UINT32_MAX ? d->out_cap : UINT32_MAX);
    if (deflate(&d->zs, Z_FINISH) != Z_STREAM_END)
        return DPRO_ERR_NOMEM;
    *outlen = d->zs.total_out;
    return DPRO_OK;
}

static size_t
deflater_bound(dpro_deflater *d, size_t len)
{
    return compressBound(len);
}

static void
deflater_end(dpro_deflater *d)
{
    if (d->level)
        deflateEnd(&d->zs);
}
#endif

int
dpro_deflate(dpro_deflater **dp, enum dpro_deflate_data what, int zlib_level, const void *in,
             size_t len, const uint8_t **out, size_t *outlen)
{
    int rc = DPRO_OK;
    int level =
        deflater_level(zlib_level >= 1 && zlib_level <= 9 ? zlib_level : DPRO_ZLIB_DEFAULT, what);
    dpro_deflater *d = *dp;

    *out = NULL;
    *outlen = 0;
    if (!d && !(d = *dp = calloc(1, sizeof *d)))
        return DPRO_ERR_NOMEM;
    if (d->level != level)
        rc = deflater_setup(d, level);
    if (rc == DPRO_OK)
        rc = reserve(&d->out, &d->out_cap, deflater_bound(d, len));
    if (rc == DPRO_OK)
        rc = deflater_run(d, in, len, outlen);
    if (rc == DPRO_OK)
        *out = d->out;
    return rc;
}

void
dpro_deflater_free(dpro_deflater *d)
{
    if (!d)
        return;
    deflater_end(d);
    free(d->out);
    free(d);
}
