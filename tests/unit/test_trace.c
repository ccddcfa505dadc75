/*
 * test_trace.c: unit tests of libdprotrace's files: writer/reader round trip (and a reader
 * detached: its file closed, its tables kept), batches merged
 * in time order, string interning, the page size and tables left out, every corruption
 * case, schema-version refusal, files that are not traces, readers running while a
 * writer appends, events filled in place (dpro_writer_next_event), and what a detached
 * reader holds (its rows; its message buffer from its first failure). The codec's own
 * tests are test_trace_codec.c and test_trace_launch.c.
 */
#include "dprotrace.h"
#include "testutil.h"
#include "trace_testlib.h"

#include <dirent.h>
#include <malloc.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static void
path_in_tmp(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", tmpdir, name);
}

/* Writes n random events (sorted by start) plus metadata into path. */
static void
write_trace(const char *path, dpro_event *ev, size_t n, uint32_t batch_events)
{
    dpro_writer *w = NULL;
    dpro_writer_options o = {.batch_events = batch_events, .replace = 1};
    char err[256];
    uint32_t id;
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_set_meta(w, DPRO_META_HOST, "node-a") == DPRO_OK);
    CHECK(dpro_writer_set_meta_int(w, DPRO_META_RANK, 3) == DPRO_OK);
    for (int i = 1; i <= 49; i++) {
        char s[64];
        snprintf(s, sizeof s, "void kernel_%d<float, 4>(\"x\")", i);
        CHECK(dpro_writer_intern(w, s, &id) == DPRO_OK);
        CHECK_EQ_U(id, (uint32_t)i);
    }
    dpro_device_info dev = {.id = 0,
                            .name = "SimGPU H200",
                            .sm_count = 132,
                            .total_memory = 141ull << 30,
                            .clock_khz = 1980000,
                            .cc_major = 9,
                            .cc_minor = 0};
    CHECK(dpro_writer_add_device(w, &dev) == DPRO_OK);
    dpro_stream_info st = {
        .id = 0x7f0000001001ull, .device = 0, .flags = 1, .priority = -1, .name = "comm"};
    CHECK(dpro_writer_add_stream(w, &st) == DPRO_OK);
    dpro_comm_info cm = {.hash = 0xfeedfacecafebeefull, .handle = 77, .rank = 3, .size = 8};
    CHECK(dpro_writer_add_comm(w, &cm) == DPRO_OK);
    CHECK(dpro_writer_add_thread(w, 1000, "main") == DPRO_OK);
    uint32_t frames[3] = {1, 2, 3};
    CHECK(dpro_writer_add_stack(w, 5, frames, 3) == DPRO_OK);
    CHECK(dpro_writer_add_drops(w, 1000, "ring full", 5) == DPRO_OK);
    CHECK(dpro_writer_add_drops(w, 1000, "ring full", 7) == DPRO_OK);
    for (size_t i = 0; i < n; i++)
        CHECK(dpro_writer_append(w, &ev[i]) == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);
}

/* The number of this process's open file descriptors (-1 if unknown). */
static int
open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static void
test_file_roundtrip(void)
{
    char path[512], err[256];
    uint64_t seed = 7, clock = 5000000;
    size_t n = 20000;
    dpro_event *ev = calloc(n, sizeof *ev), got;
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    for (size_t i = 0; i < n; i++)
        random_event(&seed, &ev[i], &clock, 0);
    path_in_tmp(path, sizeof path, "roundtrip.dpro");
    write_trace(path, ev, n, 1000);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    if (!r)
        return;
    CHECK(!strcmp(dpro_reader_meta(r, DPRO_META_HOST), "node-a"));
    CHECK(dpro_reader_meta_int(r, DPRO_META_RANK, -1) == 3);
    CHECK(dpro_reader_meta_int(r, "no such key", -9) == -9);
    CHECK(!strcmp(dpro_reader_string(r, 4), "void kernel_4<float, 4>(\"x\")"));
    CHECK(!strcmp(dpro_reader_string(r, 0), ""));
    CHECK(!strcmp(dpro_reader_string(r, 999), ""));
    const dpro_device_info *d;
    CHECK(dpro_reader_devices(r, &d) == 1 && d[0].sm_count == 132 &&
          !strcmp(d[0].name, "SimGPU H200"));
    const dpro_stream_info *s;
    CHECK(dpro_reader_streams(r, &s) == 1 && s[0].priority == -1 && !strcmp(s[0].name, "comm"));
    const dpro_comm_info *c;
    CHECK(dpro_reader_comms(r, &c) == 1 && c[0].hash == 0xfeedfacecafebeefull && c[0].size == 8);
    const dpro_thread_info *t;
    CHECK(dpro_reader_threads(r, &t) == 1 && !strcmp(t[0].name, "main"));
    const uint32_t *frames;
    CHECK(dpro_reader_stack(r, 5, &frames) == 3 && frames[2] == 3);
    dpro_trace_summary sum;
    CHECK(dpro_reader_summary(r, &sum) == DPRO_OK);
    CHECK_EQ_U(sum.events, n);
    CHECK_EQ_U(sum.batches, 20);
    CHECK_EQ_U(sum.dropped, 12);
    CHECK_EQ_U(sum.first_ns, ev[0].start_ns);
    CHECK(sum.file_bytes > 0);
    /* events come back in start order, all of them, equal to what went in */
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    size_t k = 0, equal = 0, ordered = 1;
    uint64_t prev = 0;
    int rc;
    while ((rc = dpro_iter_next(it, &got)) == 1) {
        if (got.start_ns < prev)
            ordered = 0;
        prev = got.start_ns;
        /* starts are strictly increasing in the input except for equal clocks */
        if (k < n && event_equal(&got, &ev[k]))
            equal++;
        k++;
    }
    CHECK(rc == 0);
    CHECK_EQ_U(k, n);
    CHECK(ordered);
    CHECK(equal > n * 99 / 100); /* same-start events of different kinds may swap */
    dpro_iter_close(it);
    /* detached: no open file, the tables stay, reading events is refused */
    int open_before = open_fds();
    dpro_reader_detach(r);
    CHECK(open_fds() < open_before);
    CHECK(!strcmp(dpro_reader_meta(r, DPRO_META_HOST), "node-a"));
    CHECK(!strcmp(dpro_reader_string(r, 4), "void kernel_4<float, 4>(\"x\")"));
    CHECK(dpro_reader_devices(r, &d) == 1 && !strcmp(d[0].name, "SimGPU H200"));
    CHECK(dpro_reader_threads(r, &t) == 1 && !strcmp(t[0].name, "main"));
    CHECK(dpro_reader_stack(r, 5, &frames) == 3 && frames[2] == 3);
    it = NULL;
    CHECK(dpro_iter_open(r, &it) == DPRO_ERR_ARG && it == NULL);
    CHECK(strstr(dpro_reader_errmsg(r), "detached") != NULL);
    CHECK(dpro_reader_summary(r, &sum) == DPRO_ERR_ARG);
    dpro_reader_detach(r); /* twice is fine */
    dpro_reader_detach(NULL);
    dpro_reader_close(r);
    free(ev);
}

/* Batches written out of time order (many threads) still iterate in time order. */
static void
test_merge_order(void)
{
    char path[512], err[256];
    dpro_writer *w;
    dpro_writer_options o = {.batch_events = 100, .replace = 1};
    dpro_reader *r;
    dpro_iter *it;
    dpro_event e;
    path_in_tmp(path, sizeof path, "merge.dpro");
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    /* three interleaved producers whose events arrive producer by producer */
    for (int p = 0; p < 3; p++)
        for (int i = 0; i < 1000; i++) {
            memset(&e, 0, sizeof e);
            e.kind = DPRO_KIND_KERNEL;
            e.start_ns = 1000000 + (uint64_t)i * 30 + (uint64_t)p * 10;
            e.end_ns = e.start_ns + 5;
            e.stream = (uint64_t)p;
            CHECK(dpro_writer_append(w, &e) == DPRO_OK);
        }
    CHECK(dpro_writer_close(w) == DPRO_OK);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    uint64_t prev = 0, n = 0, ordered = 1;
    while (dpro_iter_next(it, &e) == 1) {
        ordered &= e.start_ns >= prev;
        prev = e.start_ns;
        n++;
    }
    CHECK(ordered);
    CHECK_EQ_U(n, 3000);
    dpro_iter_close(it);
    dpro_reader_close(r);
}

static void
test_interning(void)
{
    char path[512], err[256];
    dpro_writer *w;
    dpro_reader *r;
    uint32_t a, b, c, id;
    path_in_tmp(path, sizeof path, "intern.dpro");
    REQUIRE(dpro_writer_open(path, NULL, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_intern(w, "cudaLaunchKernel", &a) == DPRO_OK);
    CHECK(dpro_writer_intern(w, "cudaMemcpyAsync", &b) == DPRO_OK);
    CHECK(dpro_writer_intern(w, "cudaLaunchKernel", &c) == DPRO_OK);
    CHECK(a == c && a != b && a != 0);
    CHECK(dpro_writer_intern_len(w, "cudaLaunchKernelExC", 16, &c) == DPRO_OK);
    CHECK(a == c);
    CHECK(dpro_writer_intern(w, "", &c) == DPRO_OK && c != a);
    for (int i = 0; i < 20000; i++) { /* forces table and arena growth */
        char s[32];
        snprintf(s, sizeof s, "k%d", i);
        CHECK(dpro_writer_intern(w, s, &id) == DPRO_OK);
        if (i == 12345)
            c = id;
    }
    CHECK(dpro_writer_intern(w, "k12345", &id) == DPRO_OK && id == c);
    CHECK(dpro_writer_intern(w, "cudaMemcpyAsync", &id) == DPRO_OK && id == b);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    CHECK(!strcmp(dpro_reader_string(r, c), "k12345"));
    CHECK(!strcmp(dpro_reader_string(r, a), "cudaLaunchKernel"));
    CHECK_EQ_U(dpro_reader_string_count(r), 20003);
    dpro_reader_close(r);
}

static void
sql(const char *path, const char *stmt)
{
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, stmt, NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
}

/* Returns the integer result of a one-value query on path's database, -1 on error. */
static int64_t
sql_int(const char *path, const char *query)
{
    sqlite3 *db;
    sqlite3_stmt *st = NULL;
    int64_t v = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, query, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* The page_size option, and tables that get no row are left out of the file. */
static void
test_page_size_and_lazy_tables(void)
{
    static const char *count_small_tables =
        "SELECT count(*) FROM sqlite_schema WHERE name IN "
        "('devices','threads','streams','communicators','stacks','drops')";
    char path[512], err[256];
    dpro_writer *w = NULL;
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    dpro_writer_options o = {.page_size = 512, .replace = 1};
    dpro_event e = {.kind = DPRO_KIND_KERNEL, .stream = 7, .start_ns = 1000, .end_ns = 2000}, got;
    dpro_trace_summary sum;
    const dpro_device_info *devs;
    const dpro_thread_info *thr;

    path_in_tmp(path, sizeof path, "small.dpro");
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    CHECK(dpro_writer_append(w, &e) == DPRO_OK);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    CHECK_EQ_U(sql_int(path, "PRAGMA page_size"), 512);
    CHECK_EQ_U(sql_int(path, count_small_tables), 0);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    if (r) {
        CHECK(dpro_reader_summary(r, &sum) == DPRO_OK);
        CHECK_EQ_U(sum.events, 1);
        CHECK_EQ_U(sum.dropped, 0);
        CHECK_EQ_U(dpro_reader_devices(r, &devs), 0);
        CHECK_EQ_U(dpro_reader_threads(r, &thr), 0);
        REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
        CHECK(dpro_iter_next(it, &got) == 1 && event_equal(&got, &e));
        CHECK(dpro_iter_next(it, &got) == 0);
        dpro_iter_close(it);
        dpro_reader_close(r);
    }
    /* page sizes SQLite does not take are refused before anything is created */
    static const uint32_t bad[] = {256, 1000, 131072};
    path_in_tmp(path, sizeof path, "badpage.dpro");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        o.page_size = bad[i];
        CHECK(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_ERR_ARG && !w);
    }
    CHECK(access(path, F_OK) != 0);
    /* the default page size; each small table appears with its first row */
    path_in_tmp(path, sizeof path, "tables.dpro");
    write_trace(path, &e, 1, 0);
    CHECK_EQ_U(sql_int(path, "PRAGMA page_size"), 1024);
    CHECK_EQ_U(sql_int(path, count_small_tables), 6);
}

static void
test_bad_files(void)
{
    char path[512], err[512];
    dpro_reader *r = NULL;
    FILE *f;

    /* missing */
    path_in_tmp(path, sizeof path, "missing.dpro");
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_IO && !r);
    CHECK(strstr(err, "missing.dpro") != NULL);
    /* a text file */
    path_in_tmp(path, sizeof path, "text.dpro");
    f = fopen(path, "w");
    fputs("this is not a database, just some words long enough for a header...\n", f);
    fclose(f);
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_NOT_TRACE && !r);
    CHECK(strstr(err, "text.dpro") != NULL);
    /* an SQLite database of something else */
    path_in_tmp(path, sizeof path, "other.dpro");
    sql(path, "CREATE TABLE t(x); INSERT INTO t VALUES(1);");
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_NOT_TRACE && !r);
    /* a directory of no traces */
    {
        char **files;
        size_t n;
        const char *p;
        char sub[512];
        path_in_tmp(sub, sizeof sub, "emptydir");
        mkdir(sub, 0755);
        p = sub;
        CHECK(dpro_list_traces(&p, 1, &files, &n, err, sizeof err) == DPRO_ERR_NOT_TRACE);
        CHECK(strstr(err, "emptydir") != NULL);
    }
    /* newer schema major version */
    {
        dpro_event e = {.kind = DPRO_KIND_KERNEL, .start_ns = 1, .end_ns = 2};
        path_in_tmp(path, sizeof path, "newer.dpro");
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE meta SET value='99' WHERE key='schema_major'");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_VERSION && !r);
        CHECK(strstr(err, "99") != NULL && strstr(err, "newer.dpro") != NULL);
        /* a damaged string block is named, not a crash */
        path_in_tmp(path, sizeof path, "badstrings.dpro");
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE string_blocks SET data = substr(data, 1, 5)");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_CORRUPT && !r);
        CHECK(strstr(err, "badstrings.dpro") != NULL && strstr(err, "string block") != NULL);
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE string_blocks SET count = count + 5");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_CORRUPT && !r);
        write_trace(path, &e, 1, 0);
        sql(path, "UPDATE string_blocks SET raw_size = 1000000000");
        CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_ERR_CORRUPT && !r);
        path_in_tmp(path, sizeof path, "newer.dpro");
        /* a newer minor version is fine */
        sql(path, "UPDATE meta SET value='1' WHERE key='schema_major';"
                  "UPDATE meta SET value='7' WHERE key='schema_minor';");
        REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
        dpro_reader_close(r);
    }
}

/* Damaged batches are reported with file and batch; intact ones stay readable. */
static void
test_damaged_batches(void)
{
    char path[512], err[512];
    uint64_t seed = 99, clock = 100;
    size_t n = 5000;
    dpro_event *ev = calloc(n, sizeof *ev), e;
    dpro_reader *r;
    dpro_iter *it;
    for (size_t i = 0; i < n; i++)
        random_event(&seed, &ev[i], &clock, 0);
    path_in_tmp(path, sizeof path, "damaged.dpro");
    write_trace(path, ev, n, 500); /* 10 batches */
    sql(path, "UPDATE batches SET data = substr(data, 1, length(data)/2) WHERE id = 3;"
              "UPDATE batches SET raw_size = raw_size * 1000 WHERE id = 5;"
              "UPDATE batches SET count = 7 WHERE id = 7;"
              "UPDATE batches SET raw_size = 10 WHERE id = 8;");
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    size_t good = 0, errors = 0;
    int rc, named = 0;
    while ((rc = dpro_iter_next(it, &e)) != 0) {
        if (rc == 1) {
            good++;
        } else {
            errors++;
            named += strstr(dpro_reader_errmsg(r), "damaged.dpro") != NULL &&
                     strstr(dpro_reader_errmsg(r), "batch ") != NULL;
        }
    }
    CHECK_EQ_U(errors, 4);
    CHECK_EQ_U(named, 4);
    CHECK_EQ_U(good, n - 4 * 500);
    CHECK_EQ_U(dpro_iter_bad_batches(it), 4);
    dpro_iter_close(it);
    dpro_reader_close(r);
    free(ev);
}

/* Readers open, iterate and close while another process appends and flushes. The writer
 * is the child's own, opened after the fork (an open SQLite connection must not cross a
 * fork, and a copy in the parent would be one the parent can neither close nor free); the
 * child says through a pipe when its first flush has made the file readable. */
static void
test_concurrent_readers(void)
{
    char path[512], err[512];
    int ready[2];
    pid_t pid;
    path_in_tmp(path, sizeof path, "concurrent.dpro");
    REQUIRE(pipe(ready) == 0);
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        uint64_t seed = 5, clock = 0;
        dpro_writer *w = NULL;
        char opened;
        close(ready[0]);
        opened = dpro_writer_open(path, NULL, &w, err, sizeof err) == DPRO_OK &&
                 dpro_writer_flush(w) == DPRO_OK;
        if (!opened)
            fprintf(stderr, "concurrent writer: %s\n", w ? dpro_writer_errmsg(w) : err);
        if (write(ready[1], &opened, 1) != 1 || !opened)
            _exit(2);
        close(ready[1]);
        for (int b = 0; b < 200; b++) {
            for (int i = 0; i < 200; i++) {
                dpro_event e;
                char s[32];
                random_event(&seed, &e, &clock, 0);
                snprintf(s, sizeof s, "name-%d", b * 200 + i); /* new strings each batch */
                dpro_writer_intern(w, s, &e.name);
                dpro_writer_append(w, &e);
            }
            dpro_writer_flush(w);
        }
        _exit(dpro_writer_close(w) == DPRO_OK ? 0 : 1);
    }
    char opened = 0;
    close(ready[1]);
    CHECK(read(ready[0], &opened, 1) == 1 && opened == 1);
    close(ready[0]);
    int reads = 0, consistent = 0, status;
    uint64_t last_count = 0;
    for (;;) {
        int done = waitpid(pid, &status, WNOHANG) == pid;
        dpro_reader *r;
        dpro_iter *it;
        dpro_event e;
        dpro_trace_summary sum;
        if (dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK) {
            uint64_t n = 0, names_ok = 1;
            int rc;
            dpro_reader_summary(r, &sum);
            dpro_iter_open(r, &it);
            while ((rc = dpro_iter_next(it, &e)) == 1) {
                n++;
                names_ok &=
                    e.name <= dpro_reader_string_count(r) && *dpro_reader_string(r, e.name) != 0;
            }
            reads++;
            consistent += rc == 0 && n == sum.events && names_ok && n >= last_count;
            last_count = n;
            dpro_iter_close(it);
            dpro_reader_close(r);
        }
        if (done)
            break;
    }
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(reads > 1);
    CHECK_EQ_U(consistent, reads);
    CHECK_EQ_U(last_count, 40000);
}

/* Events filled in place (dpro_writer_next_event / dpro_writer_keep_event), mixed with
 * copied appends, interning and rows: the slot comes zeroed even after a slot filled and
 * not kept, batches fill and commit, a bad time is refused, and the file holds exactly
 * the kept events in order. */
static void
test_next_event(void)
{
    char path[512], err[256];
    uint64_t seed = 11, clock = 1000000;
    enum { N = 50 };
    dpro_event want[N], got, *slot = NULL, zero;
    dpro_writer *w = NULL;
    dpro_reader *r = NULL;
    dpro_iter *it = NULL;
    dpro_writer_options o = {.batch_events = 8, .replace = 1};
    uint32_t id = 0;
    int rc;
    memset(&zero, 0, sizeof zero);
    for (int i = 0; i < N; i++)
        random_event(&seed, &want[i], &clock, 0);
    path_in_tmp(path, sizeof path, "next_event.dpro");
    REQUIRE(dpro_writer_open(path, &o, &w, err, sizeof err) == DPRO_OK);
    for (int i = 1; i <= 49; i++) { /* the names random events use */
        char text[32];
        snprintf(text, sizeof text, "kernel_%d", i);
        CHECK(dpro_writer_intern(w, text, &id) == DPRO_OK);
    }
    CHECK(dpro_writer_next_event(NULL, &slot) == DPRO_ERR_ARG && slot == NULL);
    CHECK(dpro_writer_next_event(w, NULL) == DPRO_ERR_ARG);
    CHECK(dpro_writer_keep_event(NULL) == DPRO_ERR_ARG);
    CHECK(dpro_writer_keep_event(w) == DPRO_ERR_ARG); /* nothing handed out */
    for (int i = 0; i < N; i++) {
        if (i % 5 == 4) { /* a copied append among them */
            CHECK(dpro_writer_append(w, &want[i]) == DPRO_OK);
            continue;
        }
        if (i % 7 == 3) { /* filled, not kept: the next slot is zero again */
            REQUIRE(dpro_writer_next_event(w, &slot) == DPRO_OK && slot != NULL);
            memset(slot, 0xa5, sizeof *slot);
        }
        if (i % 11 == 6) { /* a time past INT64_MAX: refused, not kept */
            REQUIRE(dpro_writer_next_event(w, &slot) == DPRO_OK);
            *slot = want[i];
            slot->end_ns = (uint64_t)INT64_MAX + 1;
            CHECK(dpro_writer_keep_event(w) == DPRO_ERR_ARG);
            CHECK(strstr(dpro_writer_errmsg(w), "2^63-1") != NULL);
            slot->end_ns = want[i].end_ns; /* mended too late: no longer handed out */
            CHECK(dpro_writer_keep_event(w) == DPRO_ERR_ARG);
        }
        REQUIRE(dpro_writer_next_event(w, &slot) == DPRO_OK && slot != NULL);
        CHECK(event_equal(slot, &zero));
        /* rows and strings while the slot is out leave it alone */
        CHECK(dpro_writer_intern(w, "kernel_7", &id) == DPRO_OK && id == 7);
        CHECK(dpro_writer_add_thread(w, 1000 + (uint32_t)i, "t") == DPRO_OK);
        *slot = want[i];
        CHECK(dpro_writer_keep_event(w) == DPRO_OK);
    }
    /* a flush with a slot out discards the slot, with events to commit or none */
    REQUIRE(dpro_writer_next_event(w, &slot) == DPRO_OK);
    *slot = want[0];
    CHECK(dpro_writer_flush(w) == DPRO_OK);
    CHECK(dpro_writer_keep_event(w) == DPRO_ERR_ARG);
    REQUIRE(dpro_writer_next_event(w, &slot) == DPRO_OK);
    *slot = want[0];
    CHECK(dpro_writer_flush(w) == DPRO_OK);
    CHECK(dpro_writer_keep_event(w) == DPRO_ERR_ARG);
    CHECK_EQ_U(dpro_writer_events(w), N);
    CHECK(dpro_writer_close(w) == DPRO_OK);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    REQUIRE(dpro_iter_open(r, &it) == DPRO_OK);
    size_t k = 0, equal = 0;
    while ((rc = dpro_iter_next(it, &got)) == 1) {
        if (k < N && event_equal(&got, &want[k]))
            equal++;
        k++;
    }
    CHECK(rc == 0);
    CHECK_EQ_U(k, N);
    CHECK_EQ_U(equal, N);
    dpro_iter_close(it);
    dpro_reader_close(r);
}

/* Whether mallinfo2 sees this build's heap: not under a sanitizer's own allocator (gcc
 * says so with __SANITIZE_*, clang with __has_feature). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define HEAP_SEEN 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define HEAP_SEEN 0
#endif
#endif
#ifndef HEAP_SEEN
#define HEAP_SEEN 1
#endif

/* What a detached reader holds: its rows, no room for more in its arrays, and no error
 * message buffer (DPRO_ERRBUF_SIZE bytes) until its first failure: process 0 of
 * dpro-replay --mpi holds a detached reader a rank, 16,384 of them, that never fail.
 * Measured as the heap in use (mallinfo2) over 64 readers (HEAP_SEEN, and not under
 * valgrind, whose allocator mallinfo2 does not see: test_trace_leaks.sh sets
 * DPRO_TEST_UNDER_VALGRIND). */
static void
test_detached_heap(void)
{
    char path[512], err[256];
    enum { N_READERS = 64 };
    dpro_reader *r[N_READERS] = {NULL};
    path_in_tmp(path, sizeof path, "no_events.dpro");
    write_trace(path, NULL, 0, 1000);
    REQUIRE(dpro_reader_open(path, &r[0], err, sizeof err) == DPRO_OK);
    dpro_reader_close(r[0]); /* SQLite's one-time state allocated before the count */
    size_t before = mallinfo2().uordblks;
    for (int k = 0; k < N_READERS; k++) {
        REQUIRE(dpro_reader_open(path, &r[k], err, sizeof err) == DPRO_OK);
        dpro_reader_detach(r[k]);
    }
    /* its 49 strings (1.5 KB) and their pointers, 8 meta rows, one row a table: 3.4 KB
     * with glibc; 5.9 KB with the arrays' room for more, 11 KB with the message buffer */
    size_t held = (mallinfo2().uordblks - before) / N_READERS;
    CHECK(!strcmp(dpro_reader_errmsg(r[0]), "")); /* no failure yet */
    before = mallinfo2().uordblks;
    for (int k = 0; k < N_READERS; k++) {
        dpro_iter *it = NULL;
        CHECK(dpro_iter_open(r[k], &it) == DPRO_ERR_ARG); /* detached: refused */
    }
    size_t added = mallinfo2().uordblks - before;
    CHECK(strstr(dpro_reader_errmsg(r[1]), "no_events.dpro: detached") != NULL);
    dpro_iter *it = NULL;
    before = mallinfo2().uordblks;
    CHECK(dpro_iter_open(r[2], &it) == DPRO_ERR_ARG); /* a second failure: the same buffer */
    size_t again = mallinfo2().uordblks - before;
    if (HEAP_SEEN && !getenv("DPRO_TEST_UNDER_VALGRIND")) {
        CHECK(held < 4096);
        CHECK(added / N_READERS >= DPRO_ERRBUF_SIZE);
        CHECK(again == 0);
    }
    for (int k = 0; k < N_READERS; k++)
        dpro_reader_close(r[k]);
}

/* Two readers answer alike: meta, strings, tables, stacks, warnings, an early end. */
static void
check_same_reader(const dpro_reader *a, const dpro_reader *b)
{
    static const char *keys[] = {DPRO_META_HOST,   DPRO_META_RANK, DPRO_META_WORLD_SIZE,
                                 DPRO_META_JOB_ID, "schema_major", "complete"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++) {
        const char *x = dpro_reader_meta(a, keys[k]), *y = dpro_reader_meta(b, keys[k]);
        CHECK((!x && !y) || (x && y && !strcmp(x, y)));
    }
    CHECK(dpro_reader_string_count(a) == dpro_reader_string_count(b));
    for (uint32_t i = 0; i <= dpro_reader_string_count(a) + 1; i++)
        CHECK(!strcmp(dpro_reader_string(a, i), dpro_reader_string(b, i)));
    const dpro_device_info *da, *db;
    const dpro_stream_info *sa, *sb;
    const dpro_comm_info *ca, *cb;
    const dpro_thread_info *ta, *tb;
    size_t nd = dpro_reader_devices(a, &da), ns = dpro_reader_streams(a, &sa);
    size_t nc = dpro_reader_comms(a, &ca), nt = dpro_reader_threads(a, &ta);
    REQUIRE(nd == dpro_reader_devices(b, &db) && nd > 0);
    REQUIRE(ns == dpro_reader_streams(b, &sb) && ns > 0);
    REQUIRE(nc == dpro_reader_comms(b, &cb) && nc > 0);
    REQUIRE(nt == dpro_reader_threads(b, &tb) && nt > 0);
    for (size_t i = 0; i < nd; i++)
        CHECK(da[i].id == db[i].id && !strcmp(da[i].name, db[i].name) &&
              da[i].sm_count == db[i].sm_count && da[i].total_memory == db[i].total_memory &&
              da[i].clock_khz == db[i].clock_khz && da[i].cc_major == db[i].cc_major &&
              da[i].cc_minor == db[i].cc_minor);
    for (size_t i = 0; i < ns; i++)
        CHECK(sa[i].id == sb[i].id && sa[i].device == sb[i].device && sa[i].flags == sb[i].flags &&
              sa[i].priority == sb[i].priority && !sa[i].name == !sb[i].name &&
              (!sa[i].name || !strcmp(sa[i].name, sb[i].name)));
    for (size_t i = 0; i < nc; i++)
        CHECK(ca[i].hash == cb[i].hash && ca[i].parent_hash == cb[i].parent_hash &&
              ca[i].handle == cb[i].handle && ca[i].rank == cb[i].rank &&
              ca[i].size == cb[i].size && ca[i].device == cb[i].device);
    for (size_t i = 0; i < nt; i++)
        CHECK(ta[i].tid == tb[i].tid && !strcmp(ta[i].name, tb[i].name));
    const uint32_t *fa, *fb;
    size_t nf = dpro_reader_stack(a, 5, &fa);
    CHECK(nf == 3 && dpro_reader_stack(b, 5, &fb) == nf && !memcmp(fa, fb, nf * sizeof *fa));
    CHECK(dpro_reader_stack(b, 6, &fb) == 0);
    CHECK(!strcmp(dpro_reader_warnings(a), dpro_reader_warnings(b)));
    CHECK(dpro_reader_ended_early(a) == dpro_reader_ended_early(b));
}

/* A detached reader packed (dpro_reader_pack) and unpacked elsewhere answers as the one
 * that opened the file, and is detached; a reader not detached is refused; the bytes cut
 * short anywhere, or with a byte more, are refused (DPRO_ERR_CORRUPT), nothing kept. */
static void
test_reader_pack(void)
{
    char path[512], err[256];
    dpro_reader *r = NULL, *u = NULL;
    uint8_t *p = NULL;
    size_t len = 0;
    path_in_tmp(path, sizeof path, "packed.dpro");
    write_trace(path, NULL, 0, 1000);
    REQUIRE(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    CHECK(dpro_reader_pack(r, NULL, NULL, &p, &len) == DPRO_ERR_ARG && !p); /* not detached */
    dpro_reader_detach(r);
    REQUIRE(dpro_reader_pack(r, NULL, NULL, &p, &len) == DPRO_OK && p && len > 0);
    REQUIRE(dpro_reader_unpack(p, len, path, NULL, &u, err, sizeof err) == DPRO_OK);
    check_same_reader(r, u);
    CHECK(!strcmp(dpro_reader_path(u), path));
    dpro_iter *it = NULL;
    CHECK(dpro_iter_open(u, &it) == DPRO_ERR_ARG && !it); /* detached */
    dpro_reader_close(u);
    for (size_t cut = 0; cut < len; cut++) {
        u = (dpro_reader *)1;
        CHECK(dpro_reader_unpack(p, cut, path, NULL, &u, err, sizeof err) == DPRO_ERR_CORRUPT &&
              !u);
    }
    CHECK(strstr(err, "packed.dpro: ") != NULL);
    uint8_t *more = malloc(len + 1);
    REQUIRE(more);
    memcpy(more, p, len);
    more[len] = 0;
    CHECK(dpro_reader_unpack(more, len + 1, path, NULL, &u, err, sizeof err) == DPRO_ERR_CORRUPT &&
          !u);
    free(more);
    free(p);
    dpro_reader_close(r);
}

/* A detached reader of path, or of a trace holding one string alone (path NULL, written
 * at other). */
static dpro_reader *
detached_reader(const char *path, const char *other)
{
    char err[256];
    dpro_reader *r = NULL;
    if (!path) {
        dpro_writer *w = NULL;
        dpro_writer_options o = {.replace = 1};
        uint32_t id;
        REQUIRE(dpro_writer_open(other, &o, &w, err, sizeof err) == DPRO_OK);
        CHECK(dpro_writer_intern(w, "another kernel", &id) == DPRO_OK);
        CHECK(dpro_writer_add_thread(w, 1, "main") == DPRO_OK);
        REQUIRE(dpro_writer_close(w) == DPRO_OK);
    }
    REQUIRE(dpro_reader_open(path ? path : other, &r, err, sizeof err) == DPRO_OK);
    dpro_reader_detach(r);
    return r;
}

/* The pack's two cuts: the meta keys kept (the others answer NULL), and the strings of a
 * reader the receiver holds (like), which travel as a mark alone: the reader unpacked
 * shares like's copy, which stays valid when like is closed first; unpacked without like
 * they are refused; a like whose strings differ is not used. */
static void
test_reader_pack_cuts(void)
{
    char path[512], other[512], err[256];
    static const char *const keep[] = {DPRO_META_HOST, NULL};
    uint8_t *p = NULL, *full = NULL, *q = NULL;
    size_t len = 0, full_len = 0, q_len = 0;
    dpro_reader *u = NULL, *u2 = NULL, *uo = NULL, *open_r = NULL;
    path_in_tmp(path, sizeof path, "cuts.dpro");
    path_in_tmp(other, sizeof other, "cuts-other.dpro");
    write_trace(path, NULL, 0, 1000);
    dpro_reader *r = detached_reader(path, NULL), *r2 = detached_reader(path, NULL);
    dpro_reader *ro = detached_reader(NULL, other);
    REQUIRE(dpro_reader_pack(r, NULL, keep, &p, &len) == DPRO_OK);
    REQUIRE(dpro_reader_unpack(p, len, path, NULL, &u, err, sizeof err) == DPRO_OK);
    CHECK(!strcmp(dpro_reader_meta(u, DPRO_META_HOST), "node-a"));
    CHECK(dpro_reader_meta(r, DPRO_META_RANK) && !dpro_reader_meta(u, DPRO_META_RANK));
    CHECK(dpro_reader_string_count(u) == 49 &&
          !strcmp(dpro_reader_string(u, 49), dpro_reader_string(r, 49)));
    free(p);
    REQUIRE(dpro_reader_pack(r2, NULL, NULL, &full, &full_len) == DPRO_OK);
    REQUIRE(dpro_reader_pack(r2, r, NULL, &p, &len) == DPRO_OK);
    CHECK(len + 49 * 28 < full_len); /* 49 texts of 28 bytes or more left out */
    u2 = (dpro_reader *)1;
    CHECK(dpro_reader_unpack(p, len, path, NULL, &u2, err, sizeof err) == DPRO_ERR_CORRUPT && !u2);
    REQUIRE(dpro_reader_unpack(p, len, path, u, &u2, err, sizeof err) == DPRO_OK);
    CHECK(dpro_reader_shares_strings(u, u2) && dpro_reader_shares_strings(u2, u));
    CHECK(!dpro_reader_shares_strings(r, u) && !dpro_reader_shares_strings(u, NULL));
    dpro_reader_close(u);
    check_same_reader(r2, u2); /* like closed first: the strings still held */
    REQUIRE(dpro_reader_pack(ro, r, NULL, &q, &q_len) == DPRO_OK);
    REQUIRE(dpro_reader_unpack(q, q_len, other, u2, &uo, err, sizeof err) == DPRO_OK);
    CHECK(!dpro_reader_shares_strings(uo, u2) && dpro_reader_string_count(uo) == 1 &&
          !strcmp(dpro_reader_string(uo, 1), "another kernel"));
    REQUIRE(dpro_reader_open(path, &open_r, err, sizeof err) == DPRO_OK);
    free(q);
    CHECK(dpro_reader_pack(r, open_r, NULL, &q, &q_len) == DPRO_ERR_ARG && !q); /* not detached */
    dpro_reader_close(open_r);
    dpro_reader_close(uo);
    dpro_reader_close(u2);
    dpro_reader_close(ro);
    dpro_reader_close(r2);
    dpro_reader_close(r);
    free(p);
    free(full);
}

int
main(void)
{
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmpdir, sizeof tmpdir, "%s/dpro-test-trace-XXXXXX", base);
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 99;
    }
    test_file_roundtrip();
    test_page_size_and_lazy_tables();
    test_merge_order();
    test_interning();
    test_bad_files();
    test_damaged_batches();
    test_concurrent_readers();
    test_next_event();
    test_detached_heap();
    test_reader_pack();
    test_reader_pack_cuts();
    {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (!tests_failed && system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return tests_done();
}
