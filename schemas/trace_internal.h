/* trace_internal.h: helpers shared by the files of libdprotrace (not installed). */
#ifndef DPRO_TRACE_INTERNAL_H
#define DPRO_TRACE_INTERNAL_H

#include <stddef.h>

/* The schema (trace.sql), generated into trace_sql.c at build time. */
extern const char dpro_trace_sql[];

/* printf into errbuf (NULL or errlen 0: nothing). */
void dpro_set_err(char *errbuf, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A deflater compresses whole buffers into the zlib format (RFC 1950), with libdeflate
 * when configure found it (HAVE_LIBDEFLATE), else with zlib; it keeps its compressor state
 * and output buffer between calls. Not thread-safe. */
typedef struct dpro_deflater dpro_deflater;

/* What a deflater compresses: libdeflate's level for a zlib level differs between them. */
enum dpro_deflate_data {
    DPRO_DEFLATE_BATCH, /* protobuf batches */
    DPRO_DEFLATE_TEXT,  /* string blocks */
};

/* Compresses len bytes at in at zlib_level (1..9, else DPRO_ZLIB_DEFAULT; libdeflate maps
 * it to a level of its own, by what). *d (NULL at first) is made on the first call; use
 * one deflater for one kind of data. *out points into *d (valid until its next use) and
 * holds *outlen bytes. Returns DPRO_OK or DPRO_ERR_NOMEM. */
int dpro_deflate(dpro_deflater **d, enum dpro_deflate_data what, int zlib_level, const void *in,
                 size_t len, const unsigned char **out, size_t *outlen);
void dpro_deflater_free(dpro_deflater *d);

/* Grows a scratch buffer (*buf, *cap bytes; realloc'd, doubling from 4096) to at least need
 * bytes. Returns DPRO_OK or DPRO_ERR_NOMEM. */
__attribute__((visibility("hidden"))) int reserve(unsigned char **buf, size_t *cap, size_t need);

/* A codec keeps its scratch buffers and zlib states between batches (no page faults
 * from fresh large allocations on every batch). Not thread-safe: one per writer/iterator. */
typedef struct dpro_codec dpro_codec;
struct dpro_event;
dpro_codec *dpro_codec_new(void);
void dpro_codec_free(dpro_codec *c);

/* Like dpro_batch_encode, but *out points into the codec (valid until its next use). */
int dpro_codec_encode(dpro_codec *c, const struct dpro_event *events, size_t n, int zlib_level,
                      const unsigned char **out, size_t *outlen, size_t *rawlen);

/* Like dpro_batch_decode, but decodes into *events (capacity *cap events, grown with
 * realloc as needed; the caller owns and frees it). */
int dpro_codec_decode(dpro_codec *c, const unsigned char *data, size_t len, size_t rawlen,
                      struct dpro_event **events, size_t *cap, size_t *n, char *errbuf,
                      size_t errlen);

/* The names a trace path is opened under (path.c). file: the path with its directory
 * resolved (no symbolic link but possibly at the file itself), for the library's own
 * open/stat/unlink; sqlite_name and vfs (NULL: the default): what to give
 * sqlite3_open_v2, a name short enough for SQLite ("/proc/self/fd/N/NAME" through the
 * "dpro-fd" VFS when file is not, with dirfd the open directory; else -1). */
typedef struct dpro_db_path {
    char *file;
    char *sqlite_name;
    const char *vfs;
    int dirfd;
} dpro_db_path;

/* Fills *out for path (freed with dpro_path_free, also after a failure). Returns
 * DPRO_ERR_ARG for a path with no file name, DPRO_ERR_IO naming path and the reason when
 * its directory cannot be resolved, DPRO_ERR_NOMEM. */
int dpro_path_resolve(const char *path, dpro_db_path *out, char *errbuf, size_t errlen);
void dpro_path_free(dpro_db_path *p);

/* Returns a malloc'd SQLite URI "file:NAME?PARAMS" (params "" for none) with name
 * percent-encoded; NULL when out of memory. */
char *dpro_sqlite_uri(const char *name, const char *params);

/* The caller's dpro_event (size bytes, of any version: see ABI in dprotrace.h) to ours
 * (fields it lacks zero) and back (fields ours lacks zero). DPRO_EVENT_SIZE_MIN: the size
 * of version 2.0's dpro_event, the smallest a caller may have. */
#define DPRO_EVENT_SIZE_MIN (offsetof(struct dpro_event, value) + sizeof(int64_t))
void dpro_event_import(struct dpro_event *dst, const void *src, size_t size);
void dpro_event_export(void *dst, size_t size, const struct dpro_event *src);

/* The meta key the writer sets when it closes a trace (schema minor 1 and later). */
#define DPRO_META_COMPLETE "complete"

#endif
