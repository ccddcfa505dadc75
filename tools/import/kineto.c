/*
 * kineto.c: PyTorch profiler (Kineto) Chrome-trace JSON -> dpro trace, streaming: the
 * public API of import_kineto.h (the importer's life, feeding yajl through the whitespace
 * pre-pass, the file reader, the tables and meta keys at the end) and the errors and
 * counters the other kineto_*.c files share (kineto_int.h says how they fit).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "fnv1a.h"
#include "json_num.h"
#include "kineto_int.h"
#include "order.h"

/* The public constants are the generic pieces' */
_Static_assert(KINETO_JOIN_WINDOW == IMP_JOIN_WINDOW, "join window");
_Static_assert(KINETO_BATCH_EVENTS == IMP_BATCH_EVENTS, "batch events");
_Static_assert(KINETO_BATCH_BUFFERS == IMP_BATCH_BUFFERS, "batch buffers");
_Static_assert((int)KINETO_SQUEEZE_AUTO == (int)IMP_SQUEEZE_AUTO &&
                   (int)KINETO_SQUEEZE_OFF == (int)IMP_SQUEEZE_OFF &&
                   (int)KINETO_SQUEEZE_SCALAR == (int)IMP_SQUEEZE_SCALAR &&
                   (int)KINETO_SQUEEZE_SSSE3 == (int)IMP_SQUEEZE_SSSE3 &&
                   (int)KINETO_SQUEEZE_AVX512 == (int)IMP_SQUEEZE_AVX512,
               "squeeze levels");

int
kineto_parse_us(const char *text, size_t len, uint64_t *ns)
{
    return imp_parse_us(text, len, ns);
}

/* See kineto_int.h. */
int
kin_fail(kineto_importer *k, int status, const char *fmt, ...)
{
    if (k->status != DPRO_OK)
        return 0;
    size_t in_chunk = k->yh && k->chunk ? yajl_get_bytes_consumed(k->yh) : 0;
    if (in_chunk > k->text_len)
        in_chunk = k->text_len;
    if (k->chunk && k->squeeze_fn) /* a position in the squeezed copy: back to the chunk */
        in_chunk =
            imp_squeeze_unmap(k->sq_chunk, k->chunk, k->chunk_len, in_chunk, k->yajl_stepped_back);
    uint64_t off = k->chunk_off + in_chunk;
    uint64_t line = k->chunk_line + 1 + (k->chunk ? imp_count_lines(k->chunk, in_chunk) : 0);
    char msg[384];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(k->errmsg, sizeof(k->errmsg), "%s: byte %llu, line %llu: %s",
             k->opt.source_file ? k->opt.source_file : "<input>", (unsigned long long)off,
             (unsigned long long)line, msg);
    k->status = status;
    return 0;
}

/* See kineto_int.h. */
int
kin_fail_writer(kineto_importer *k, int rc)
{
    return kin_fail(k, rc, "writing the trace: %s (%s)", dpro_status_str(rc),
                    k->w ? dpro_writer_errmsg(k->w) : "");
}

/* See kineto_int.h. */
int
kin_fail_out(kineto_importer *k, int rc)
{
    kin_fail(k, rc, "%s", k->out.err);
    return rc;
}

/* See kineto_int.h. */
void
kin_count(kineto_importer *k, const char *reason, uint64_t n)
{
    for (size_t i = 0; i < k->nreasons; i++) {
        if (strcmp(k->reasons[i].name, reason) == 0) {
            k->reasons[i].count += n;
            return;
        }
    }
    size_t i = k->nreasons;
    if (i == KIN_MAX_REASONS) {
        /* the last slot collects whatever did not get its own */
        k->reasons[KIN_MAX_REASONS - 1].count += n;
        return;
    }
    if (i == KIN_MAX_REASONS - 1)
        reason = "unmapped.other_reasons";
    snprintf(k->reasons[i].name, sizeof(k->reasons[i].name), "%s", reason);
    k->reasons[i].count = n;
    k->nreasons++;
}

/* See kineto_int.h. */
void
kin_unmapped(kineto_importer *k, const char *what, const char *detail, size_t dlen)
{
    char reason[64];
    int n = snprintf(reason, sizeof(reason), "unmapped.%s", what);
    for (size_t i = 0; i < dlen && n < (int)sizeof(reason) - 1; i++) {
        unsigned char c = (unsigned char)detail[i];
        /* meta keys stay plain: letters, digits, _ - . */
        reason[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                              c == '-' || c == '.'
                          ? (char)c
                          : '_';
    }
    reason[n] = '\0';
    kin_count(k, reason, 1);
    k->unmapped++;
}

/* ---- public API -------------------------------------------------------------------------- */

int
kineto_importer_new(dpro_writer *w, const kineto_options *opts, kineto_importer **out)
{
    *out = NULL;
    kineto_importer *k = calloc(1, sizeof(*k));
    if (!k)
        return DPRO_ERR_NOMEM;
    k->w = w;
    if (opts)
        k->opt = *opts;
    if (k->opt.file_count < 1)
        k->opt.file_count = 1;
    k->first_ts_ns = UINT64_MAX;
    k->ev.pg_ranks = malloc(KIN_RANKS_STR);
    k->ev.rest = malloc(2 * (size_t)KIN_MAX_ARGS_TEXT + 64); /* the members, then their join */
    k->ev.name = "";
    k->squeeze = k->opt.squeeze;
    k->squeeze_fn = imp_squeeze_pick(&k->squeeze);
    k->sq.drop = 1; /* whitespace before the top-level value separates nothing */
    if (k->squeeze_fn)
        k->sqbuf = malloc(KIN_PIECE + IMP_PIECE_SLACK);
    k->sqbuf_cap = KIN_PIECE;
    k->yh = yajl_alloc(&kin_callbacks, NULL, k);
    int ok = imp_join_init(&k->join) == DPRO_OK && k->ev.pg_ranks && k->ev.rest && k->yh &&
             (k->sqbuf || !k->squeeze_fn);
    ok = ok && imp_out_init(&k->out, w, !k->opt.inline_writer) == DPRO_OK;
    if (!ok) {
        kineto_importer_free(k);
        return DPRO_ERR_NOMEM;
    }
    /* names are interned as bytes; the JSON writer of export repairs bad UTF-8 */
    yajl_config(k->yh, yajl_dont_validate_strings, 1);
    k->ctx[0] = CTX_ROOT;
    static const struct {
        const char *text;
        size_t off;
    } consts[] = {
        {"cpu_op", offsetof(kineto_importer, s_cpu_op)},
        {"user_annotation", offsetof(kineto_importer, s_user_ann)},
        {"gpu_user_annotation", offsetof(kineto_importer, s_gpu_user_ann)},
        {"python_function", offsetof(kineto_importer, s_python)},
        {"instant", offsetof(kineto_importer, s_instant)},
    };
    for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++) {
        uint32_t *id = (uint32_t *)((char *)k + consts[i].off);
        int rc = imp_out_intern(&k->out, consts[i].text, strlen(consts[i].text), id);
        if (rc != DPRO_OK) {
            kineto_importer_free(k);
            return rc;
        }
    }
    *out = k;
    return DPRO_OK;
}

/* Turns a yajl status into ours, with the position and yajl's words. */
static int
kin_yajl_status(kineto_importer *k, yajl_status st, const unsigned char *buf, size_t len)
{
    if (st == yajl_status_ok)
        return DPRO_OK;
    if (st == yajl_status_client_canceled || k->status != DPRO_OK) {
        if (k->status == DPRO_OK)
            kin_fail(k, DPRO_ERR_NOT_TRACE, "parse stopped");
        return k->status;
    }
    unsigned char *msg = yajl_get_error(k->yh, 0, buf, len);
    char text[200];
    snprintf(text, sizeof(text), "%s", msg ? (const char *)msg : "invalid JSON");
    if (msg)
        yajl_free_error(k->yh, msg);
    size_t n = strlen(text);
    while (n && (text[n - 1] == '\n' || text[n - 1] == ' '))
        text[--n] = '\0';
    /* the one error after which yajl 2.1 steps back to the start of the rejected token */
    k->yajl_stepped_back = strstr(text, "after key and value, inside map") != NULL;
    return kin_fail(k, DPRO_ERR_NOT_TRACE, "invalid JSON: %s", text), k->status;
}

/* Parses one chunk of the input (a piece of what feed got, or the carry): squeezed first,
 * unless OFF. Counts the chunk into k->tok_run if no callback came during it; refuses text
 * in which no token ends past KIN_MAX_TOKEN. */
static int
kin_feed_chunk(kineto_importer *k, const unsigned char *buf, size_t len)
{
    const unsigned char *text = buf;
    uint64_t lines = 0, ncb = k->ncb;
    if (k->squeeze_fn && len > k->sqbuf_cap) {
        unsigned char *n = realloc(k->sqbuf, len + IMP_PIECE_SLACK);
        if (!n)
            return kin_fail(k, DPRO_ERR_NOMEM, "out of memory (input)"), k->status;
        k->sqbuf = n;
        k->sqbuf_cap = len;
    }
    k->chunk = buf;
    k->chunk_len = k->text_len = len;
    if (k->squeeze_fn) {
        k->sq_chunk = k->sq;
        k->text_len = k->squeeze_fn(&k->sq, buf, len, k->sqbuf, &lines);
        text = k->sqbuf;
    } else {
        lines = imp_count_lines(buf, len);
    }
    yajl_status st = k->text_len ? yajl_parse(k->yh, text, k->text_len) : yajl_status_ok;
    int rc = kin_yajl_status(k, st, text, k->text_len);
    if (rc == DPRO_OK) {
        k->chunk_line += lines;
        k->chunk_off += len;
        k->tok_run = k->ncb == ncb ? k->tok_run + k->text_len : 0;
    }
    k->chunk = NULL;
    k->chunk_len = k->text_len = 0;
    if (rc == DPRO_OK && k->tok_run > KIN_MAX_TOKEN) {
        kin_fail(k, DPRO_ERR_LIMIT,
                 "no JSON token ends in %u MiB: a string or number that long is refused",
                 KIN_MAX_TOKEN >> 20);
        rc = k->status;
    }
    return rc;
}

/* Parses the input gathered in the carry, if any. */
static int
kin_flush_carry(kineto_importer *k)
{
    size_t n = k->carry_len;
    if (n == 0 || k->status != DPRO_OK)
        return k->status;
    k->carry_len = 0;
    return kin_feed_chunk(k, k->carry, n);
}

/* Adds buf[0..len) to the carry (whose goal is goal bytes); parses it once it is full. */
static int
kin_carry_add(kineto_importer *k, const unsigned char *buf, size_t len, size_t goal)
{
    if (goal > k->carry_cap) {
        unsigned char *n = realloc(k->carry, goal);
        if (!n)
            return kin_fail(k, DPRO_ERR_NOMEM, "out of memory (input)"), k->status;
        k->carry = n;
        k->carry_cap = goal;
    }
    memcpy(k->carry + k->carry_len, buf, len);
    k->carry_len += len;
    return k->carry_len == goal ? kin_flush_carry(k) : DPRO_OK;
}

int
kineto_importer_feed(kineto_importer *k, const void *buf, size_t len)
{
    if (k->status != DPRO_OK || len == 0)
        return k->status;
    if (k->finished)
        return kin_fail(k, DPRO_ERR_ARG, "input after the end"), k->status;
    const unsigned char *p = buf;
    int rc = DPRO_OK;
    while (len && rc == DPRO_OK) {
        size_t n;
        if (k->tok_run < KIN_PIECE && k->carry_len == 0) {
            n = len < KIN_PIECE ? len : KIN_PIECE;
            rc = kin_feed_chunk(k, p, n);
        } else {
            /* in a long token (kineto_int.h): gather as much as yajl holds of it */
            uint64_t goal = k->tok_run > KIN_CARRY_MAX ? KIN_CARRY_MAX : k->tok_run;
            n = (size_t)goal - k->carry_len;
            if (n > len)
                n = len;
            rc = kin_carry_add(k, p, n, (size_t)goal);
        }
        p += n;
        len -= n;
    }
    return rc;
}

/* World size: distributedInfo's; a file that names its rank but no world size comes from
 * a job without torch.distributed (rank + 1); a file naming neither: the files imported
 * together. */
static int64_t
kin_world_size(const kineto_importer *k)
{
    if (k->have_world_size)
        return k->world_size;
    if (k->have_rank)
        return k->rank + 1;
    return k->opt.file_count;
}

/* The job id: the caller's, else "kineto-" and a hash of the world size and the identity
 * of the files imported together (kineto_options.files_id: two jobs of one configuration
 * imported separately differ; files of other world sizes imported with them differ too). */
static void
kin_job_id(const kineto_importer *k, char *out, size_t n)
{
    if (k->opt.job_id) {
        snprintf(out, n, "%s", k->opt.job_id);
        return;
    }
    char sig[64];
    int l = snprintf(sig, sizeof(sig), "world_size=%lld;files=%016llx",
                     (long long)kin_world_size(k), (unsigned long long)k->opt.files_id);
    size_t len = l < 0 ? 0 : (size_t)l < sizeof(sig) ? (size_t)l : sizeof(sig) - 1;
    snprintf(out, n, "kineto-%016llx", (unsigned long long)dpro_fnv1a(sig, len, DPRO_FNV1A_INIT));
}

uint64_t
kineto_file_identity(const char *path)
{
    uint64_t h = DPRO_FNV1A_INIT;
    unsigned char buf[1 << 16];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd < 0 ? -1 : 0;
    while (fd >= 0 && (got = read(fd, buf, sizeof buf)) != 0) {
        if (got > 0)
            h = dpro_fnv1a(buf, (size_t)got, h);
        else if (errno != EINTR)
            break;
    }
    if (fd >= 0)
        close(fd);
    if (got < 0)
        h = dpro_fnv1a(path, strlen(path), dpro_fnv1a("unreadable:", 11, DPRO_FNV1A_INIT));
    return h;
}

uint64_t
kineto_identity_combine(uint64_t *each, size_t n)
{
    qsort(each, n, sizeof *each, order_u64);
    uint64_t h = dpro_fnv1a(each, n * sizeof *each, DPRO_FNV1A_INIT);
    return h ? h : 1;
}

uint64_t
kineto_files_identity(const char *const *paths, size_t n)
{
    uint64_t *each = calloc(n ? n : 1, sizeof *each), h = DPRO_FNV1A_INIT;
    for (size_t i = 0; i < n; i++) {
        uint64_t f = kineto_file_identity(paths[i]);
        if (each)
            each[i] = f;
        else
            h ^= f; /* out of memory: still independent of the order */
    }
    if (each) {
        h = kineto_identity_combine(each, n);
        free(each);
    }
    return h ? h : 1;
}

/* Writes the side tables and the meta keys. */
static int
kin_write_tables(kineto_importer *k)
{
    dpro_writer *w = k->w;
    int rc = DPRO_OK;
    char buf[256];
    int64_t rank = k->have_rank ? k->rank : k->opt.file_index;
    for (size_t i = 0; i < k->nstreams && rc == DPRO_OK; i++) {
        dpro_stream_info si = {
            .id = k->streams[i].id, .device = k->streams[i].device, .name = k->streams[i].name};
        rc = dpro_writer_add_stream(w, &si);
    }
    for (size_t i = 0; i < k->ncomms && rc == DPRO_OK; i++) {
        kin_comm *c = &k->comms[i];
        dpro_comm_info ci = {.hash = c->hash,
                             .handle = c->hash,
                             .device = c->device,
                             .size = (int32_t)(c->size > 0 && c->size <= INT32_MAX ? c->size : 0),
                             .rank = (int32_t)rank};
        if (c->ranks) {
            /* "[0, 1, 5]": our rank's position in the group */
            const char *p = c->ranks;
            int32_t pos = 0;
            while (*p) {
                while (*p && (*p < '0' || *p > '9'))
                    p++;
                if (!*p)
                    break;
                long long r = strtoll(p, (char **)&p, 10);
                if (r == rank) {
                    ci.rank = pos;
                    break;
                }
                pos++;
            }
        }
        if (ci.size == 0)
            ci.size = (int32_t)kin_world_size(k);
        rc = dpro_writer_add_comm(w, &ci);
    }
    if (rc != DPRO_OK)
        return kin_fail_writer(k, rc), rc;
    kin_job_id(k, buf, sizeof(buf));
#define META(key, val)                                                                             \
    do {                                                                                           \
        if (rc == DPRO_OK)                                                                         \
            rc = dpro_writer_set_meta(w, key, val);                                                \
    } while (0)
#define META_INT(key, val)                                                                         \
    do {                                                                                           \
        if (rc == DPRO_OK)                                                                         \
            rc = dpro_writer_set_meta_int(w, key, val);                                            \
    } while (0)
    META(DPRO_META_SOURCE, "kineto-import");
    META("source_file", k->opt.source_file ? k->opt.source_file : "");
    META("clock", "kineto-us");
    META(DPRO_META_JOB_ID, buf);
    META(DPRO_META_HOST, k->host.len ? k->host.buf : "import");
    META_INT(DPRO_META_PID, k->pid);
    META_INT(DPRO_META_RANK, rank);
    META_INT(DPRO_META_WORLD_SIZE, kin_world_size(k));
    META("import.rank_source", k->have_rank ? "distributedInfo" : "file_order");
    META("import.world_size_source", k->have_world_size ? "distributedInfo"
                                     : k->have_rank     ? "rank"
                                                        : "file_count");
    if (k->nccl_version.len)
        META("nccl_version", k->nccl_version.buf);
    if (k->process_name.len)
        META("import.process_name", k->process_name.buf);
    if (k->trace_name.len)
        META("import.trace_name", k->trace_name.buf);
    if (k->trace_id.len)
        META("import.trace_id", k->trace_id.buf);
    if (k->have_base_time)
        META_INT("import.base_time_ns", k->base_time_ns);
    META_INT("import.kineto_schema_version", k->schema_version);
    META_INT("import.events_in", (int64_t)k->events_in);
    META_INT("import.events_out", (int64_t)k->out.events_out);
    META_INT("import.unmapped", (int64_t)k->unmapped);
    for (size_t i = 0; i < k->nreasons; i++) {
        char key[96];
        snprintf(key, sizeof(key), "import.%s", k->reasons[i].name);
        META_INT(key, (int64_t)k->reasons[i].count);
    }
    META_INT("import.partial", k->status != DPRO_OK);
    if (k->status != DPRO_OK)
        META("import.error", k->errmsg);
#undef META
#undef META_INT
    if (rc != DPRO_OK && k->status == DPRO_OK)
        kin_fail_writer(k, rc);
    return rc;
}

int
kineto_importer_finish(kineto_importer *k, int complete)
{
    if (k->finished)
        return k->status;
    kin_flush_carry(k); /* before finished: it is input */
    k->finished = 1;
    if (complete && k->status == DPRO_OK) {
        k->chunk = NULL;
        k->chunk_len = k->text_len = 0;
        yajl_status st = yajl_complete_parse(k->yh);
        if (k->chunk_off == 0)
            kin_fail(k, DPRO_ERR_NOT_TRACE, "not a trace: the input is empty");
        else if (kin_yajl_status(k, st, NULL, 0) == DPRO_OK) {
            if (k->ctx[0] != CTX_DONE)
                kin_fail(k, DPRO_ERR_NOT_TRACE, "not a trace: no JSON value");
            else if (!k->saw_events)
                kin_fail(k, DPRO_ERR_NOT_TRACE, "not a trace: no \"traceEvents\" array%s",
                         k->saw_nodes ? " (a \"nodes\" array: a PyTorch execution trace, which "
                                        "dpro-import et imports with its Kineto trace)"
                                      : "");
        }
    }
    int first = k->status;
    int rc = kin_drain(k);
    int orc = imp_out_finish(&k->out); /* the writer is ours again */
    if (orc != DPRO_OK)
        kin_fail_out(k, orc);
    if (rc == DPRO_OK)
        rc = orc;
    if (rc == DPRO_OK && k->w)
        rc = kin_write_tables(k);
    return first != DPRO_OK ? first : rc != DPRO_OK ? rc : k->status;
}

int
kineto_importer_squeeze(const kineto_importer *k)
{
    return k->squeeze;
}

const char *
kineto_importer_errmsg(const kineto_importer *k)
{
    return k->errmsg;
}

void
kineto_importer_result(const kineto_importer *k, kineto_result *res)
{
    memset(res, 0, sizeof(*res));
    res->rank = k->have_rank ? k->rank : k->opt.file_index;
    res->world_size = kin_world_size(k);
    res->pid = k->pid;
    res->host = k->host.len ? k->host.buf : NULL;
    res->events_in = k->events_in;
    res->events_out = k->out.events_out;
    res->device_ops = k->device_ops;
    res->unmapped = k->unmapped;
    res->bytes_in = k->chunk_off;
}

void
kineto_importer_print_unmapped(const kineto_importer *k, void *f)
{
    for (size_t i = 0; i < k->nreasons; i++)
        fprintf(f, "  %s: %llu\n", k->reasons[i].name, (unsigned long long)k->reasons[i].count);
}

/* Categories the importer knows and leaves out on purpose (profiler bookkeeping, host
 * ranges kept elsewhere): not reported as unknown. */
static int
kin_cat_known_unmapped(const char *name)
{
    static const char *const known[] = {"overhead", "cuda_profiler_range", "cpu_instant_event",
                                        "external_correlation"};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strcmp(name, known[i]) == 0)
            return 1;
    return 0;
}

size_t
kineto_importer_unknown_categories(const kineto_importer *k, char *buf, size_t len,
                                   uint64_t *events)
{
    static const char prefix[] = "unmapped.cat_";
    size_t ncat = 0, used = 0;
    uint64_t nev = 0;
    if (len)
        buf[0] = '\0';
    for (size_t i = 0; i < k->nreasons; i++) {
        const char *name = k->reasons[i].name;
        if (strncmp(name, prefix, sizeof(prefix) - 1) != 0 ||
            kin_cat_known_unmapped(name + sizeof(prefix) - 1))
            continue;
        nev += k->reasons[i].count;
        if (used < len) {
            int w = snprintf(buf + used, len - used, "%s%s (%llu)", ncat ? ", " : "",
                             name + sizeof(prefix) - 1, (unsigned long long)k->reasons[i].count);
            used = w < 0 ? len : used + (size_t)w;
        }
        ncat++;
    }
    if (events)
        *events = nev;
    return ncat;
}

void
kineto_importer_free(kineto_importer *k)
{
    if (!k)
        return;
    imp_out_free(&k->out); /* joins the writer thread first */
    if (k->yh)
        yajl_free(k->yh);
    imp_join_free(&k->join);
    free(k->colls);
    for (size_t i = 0; i < k->nstreams; i++)
        free(k->streams[i].name);
    free(k->streams);
    for (size_t i = 0; i < k->ncomms; i++)
        free(k->comms[i].ranks);
    free(k->comms);
    free(k->cranges);
    free(k->ev.name_buf);
    free(k->ev.pg_ranks);
    free(k->ev.rest);
    free(k->sqbuf);
    free(k->carry);
    free(k);
}

void
kineto_writer_options(dpro_writer_options *o)
{
    imp_writer_options(o);
}

int
kineto_import_path(kineto_importer *k, const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0)
        k->out.in_total = (uint64_t)st.st_size;
    /* A plain file is read as it is; zlib would copy it through its own buffer (its first
     * look at the file leaves it out of step with our reads). */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    unsigned char magic[2];
    int plain = fd >= 0 && pread(fd, magic, 2, 0) == 2 && !(magic[0] == 0x1f && magic[1] == 0x8b);
    gzFile gz = fd >= 0 && !plain ? gzdopen(fd, "rb") : NULL;
    if (fd < 0 || (!plain && !gz)) {
        snprintf(k->errmsg, sizeof(k->errmsg), "%s: cannot open: %s", path,
                 strerror(fd < 0 ? errno : ENOMEM));
        if (fd >= 0)
            close(fd);
        k->status = DPRO_ERR_IO;
        kineto_importer_finish(k, 0);
        return DPRO_ERR_IO;
    }
    /* zlib inflates straight into buf when a read asks for at least twice its buffer: one
     * copy of the input fewer */
    if (gz)
        gzbuffer(gz, KIN_CHUNK / 2);
    unsigned char *buf = malloc(KIN_CHUNK);
    int ok = buf != NULL;
    if (!buf)
        kin_fail(k, DPRO_ERR_NOMEM, "out of memory");
    while (ok && plain) {
        ssize_t n = read(fd, buf, KIN_CHUNK);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int e = errno;
            kin_flush_carry(k); /* the text before the error first */
            kin_fail(k, DPRO_ERR_IO, "read error: %s", strerror(e));
            ok = 0;
            break;
        }
        k->out.in_pos += (uint64_t)n;
        if (n == 0)
            break;
        if (kineto_importer_feed(k, buf, (size_t)n) != DPRO_OK)
            ok = 0;
    }
    while (ok && gz) {
        int n = gzread(gz, buf, KIN_CHUNK);
        z_off_t pos = gzoffset(gz); /* compressed bytes read */
        k->out.in_pos = pos > 0 ? (uint64_t)pos : 0;
        int zerr = Z_OK;
        const char *zmsg = gzerror(gz, &zerr);
        if (n > 0 && kineto_importer_feed(k, buf, (size_t)n) != DPRO_OK)
            ok = 0;
        if (ok && (n < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))) {
            /* zlib reports a cut-off stream as Z_BUF_ERROR at its end; the text before
             * the damage is parsed first */
            kin_flush_carry(k);
            kin_fail(k, DPRO_ERR_NOT_TRACE,
                     "damaged or truncated gzip data (compressed byte %lld): %s",
                     (long long)gzoffset(gz), zmsg ? zmsg : "read error");
            ok = 0;
        }
        if (n <= 0)
            break;
    }
    free(buf);
    if (gz)
        gzclose(gz); /* closes fd */
    else
        close(fd);
    return kineto_importer_finish(k, ok && k->status == DPRO_OK);
}

int
kineto_import_buffer(dpro_writer *w, const void *buf, size_t len, size_t chunk,
                     const kineto_options *opts, char *errbuf, size_t errlen)
{
    kineto_importer *k;
    int rc = kineto_importer_new(w, opts, &k);
    if (rc != DPRO_OK) {
        if (errbuf && errlen)
            snprintf(errbuf, errlen, "%s", dpro_status_str(rc));
        return rc;
    }
    const unsigned char *p = buf;
    if (chunk == 0)
        chunk = len;
    for (size_t off = 0; off < len && rc == DPRO_OK; off += chunk)
        rc = kineto_importer_feed(k, p + off, len - off < chunk ? len - off : chunk);
    rc = kineto_importer_finish(k, rc == DPRO_OK);
    if (errbuf && errlen)
        snprintf(errbuf, errlen, "%s", kineto_importer_errmsg(k));
    kineto_importer_free(k);
    return rc;
}
