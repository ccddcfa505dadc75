/*
 * bench_import_kineto: speed and size of the Kineto importer on the shared real traces.
 *
 *   bench_import_kineto [DIR]   (default: $top_srcdir/../shared/traces/kineto, else the
 *                                source tree's ../shared/traces/kineto)
 *
 *   bench_import_kineto --once parse|full|inline FILE
 *                               one import of FILE (plain JSON), for valgrind --tool=callgrind
 *                               or perf: parse and map only, full import with the writer
 *                               thread, full import on one thread
 *
 * The biggest .json.gz of DIR is decompressed to /tmp, then imported from there three ways,
 * five times each: parse and map only (no writer: all the parsing thread does, the batches
 * are dropped), the full import into a dpro trace with its writer thread (the parser on one
 * core, encoding, zlib and SQLite on another), and the full import on one thread. For each:
 * the best wall time and MB/s of JSON over it, and the best CPU time of the whole process
 * (all threads) in CPU-seconds per MB and in MB per CPU-second: the per-core figure, which
 * the writer thread does not flatter. The parsing thread's own CPU time is shown apart, and
 * the kernel's part of the process's CPU time and its minor page faults (getrusage): the
 * buffers an import allocates are faulted in afresh each time.
 * Then, for every file of DIR, the size of its dpro trace against the gzip'd JSON
 * ($DPRO_BENCH_ZLIB_LEVEL, if set, replaces the importer's zlib level, to weigh the size
 * against the writer's CPU time; $DPRO_BENCH_SQUEEZE, a KINETO_SQUEEZE_* number, the
 * whitespace pre-pass). Exit 77
 * (skip) if DIR is missing.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "dprotrace.h"
#include "import_kineto.h"

#ifndef DPRO_SRCDIR
#define DPRO_SRCDIR "."
#endif

static double
clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* What one import cost. */
typedef struct cost {
    double wall;   /* seconds */
    double cpu;    /* CPU-seconds of the process: every thread */
    double parser; /* CPU-seconds of the calling (parsing) thread */
    double sys;    /* of cpu, in the kernel (getrusage: system time of the process) */
    long faults;   /* minor page faults of the process */
} cost;

/* System CPU-seconds and minor page faults of the process so far. */
static void
usage_now(double *sys, long *faults)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    *faults = ru.ru_minflt;
}

enum { MODE_PARSE, MODE_FULL, MODE_INLINE };

static long long
file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* Decompresses src to dst. Returns the bytes written, -1 on error. */
static long long
gunzip(const char *src, const char *dst)
{
    gzFile in = gzopen(src, "rb");
    FILE *out = fopen(dst, "wb");
    long long total = -1;
    if (in && out) {
        char buf[1 << 16];
        int n;
        total = 0;
        while ((n = gzread(in, buf, sizeof(buf))) > 0) {
            if (fwrite(buf, 1, (size_t)n, out) != (size_t)n) {
                total = -1;
                break;
            }
            total += n;
        }
        if (n < 0)
            total = -1;
    }
    if (in)
        gzclose(in);
    if (out && fclose(out) != 0)
        total = -1;
    return total;
}

/* Imports path into out (NULL: no writer) on the writer thread, or on this one if
 * inline_writer. Returns 0 and fills *c (writer open excluded, close included), or -1;
 * *res gets the result. */
static int
import_once(const char *path, const char *out, int inline_writer, kineto_result *res, cost *c)
{
    dpro_writer *w = NULL;
    char err[512];
    if (out) {
        dpro_writer_options o;
        kineto_writer_options(&o);
        const char *lv = getenv("DPRO_BENCH_ZLIB_LEVEL"); /* trying other trade-offs */
        if (lv && *lv)
            o.zlib_level = atoi(lv);
        unlink(out);
        if (dpro_writer_open(out, &o, &w, err, sizeof(err)) != DPRO_OK) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
    }
    const char *sq = getenv("DPRO_BENCH_SQUEEZE"); /* a KINETO_SQUEEZE_* level */
    kineto_options ko = {.source_file = path,
                         .file_count = 1,
                         .inline_writer = inline_writer,
                         .squeeze = sq && *sq ? atoi(sq) : KINETO_SQUEEZE_AUTO};
    kineto_importer *k;
    double w0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    double p0 = clock_s(CLOCK_THREAD_CPUTIME_ID), s0;
    long f0;
    usage_now(&s0, &f0);
    if (kineto_importer_new(w, &ko, &k) != DPRO_OK) {
        dpro_writer_close(w);
        return -1;
    }
    int rc = kineto_import_path(k, path);
    int crc = w ? dpro_writer_close(w) : DPRO_OK;
    kineto_importer_result(k, res);
    if (rc != DPRO_OK || crc != DPRO_OK)
        fprintf(stderr, "%s\n", kineto_importer_errmsg(k));
    kineto_importer_free(k); /* the writer thread, if any, was joined by finish */
    c->wall = clock_s(CLOCK_MONOTONIC) - w0;
    c->cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    c->parser = clock_s(CLOCK_THREAD_CPUTIME_ID) - p0;
    usage_now(&c->sys, &c->faults);
    c->sys -= s0;
    c->faults -= f0;
    return rc == DPRO_OK && crc == DPRO_OK ? 0 : -1;
}

/* Best of 5 imports of json in mode (wall, CPU and parser CPU each at its minimum). */
static int
best_of_5(const char *json, const char *out, int mode, kineto_result *res, cost *best)
{
    best->wall = best->cpu = best->parser = best->sys = 1e30;
    best->faults = -1;
    for (int i = 0; i < 5; i++) {
        cost c;
        if (import_once(json, mode == MODE_PARSE ? NULL : out, mode == MODE_INLINE, res, &c) < 0)
            return -1;
        if (c.wall < best->wall)
            best->wall = c.wall;
        if (c.cpu < best->cpu)
            best->cpu = c.cpu;
        if (c.parser < best->parser)
            best->parser = c.parser;
        if (c.sys < best->sys)
            best->sys = c.sys;
        if (best->faults < 0 || c.faults < best->faults)
            best->faults = c.faults;
    }
    return 0;
}

static void
print_cost(const char *what, const cost *c, double mb)
{
    printf("%-44s %7.3f %7.0f %7.3f %8.2f %8.0f %7.3f %7.3f %7ld\n", what, c->wall, mb / c->wall,
           c->cpu, c->cpu * 1e3 / mb, mb / c->cpu, c->parser, c->sys, c->faults);
}

int
main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--once") == 0) {
        kineto_result r;
        const char *mode = argv[2];
        int parse = strcmp(mode, "parse") == 0, inl = strcmp(mode, "inline") == 0;
        if (!parse && !inl && strcmp(mode, "full") != 0) {
            fprintf(stderr, "usage: bench_import_kineto --once parse|full|inline FILE\n");
            return 2;
        }
        char out[] = "/tmp/dpro-bench-once-XXXXXX";
        if (!mkdtemp(out))
            return 1;
        char o[64];
        snprintf(o, sizeof(o), "%s/out.dpro", out);
        cost c;
        int rc = import_once(argv[3], parse ? NULL : o, inl, &r, &c);
        unlink(o);
        rmdir(out);
        printf("%s %s: %llu JSON bytes, %.3f s wall, %.3f CPU-s (parser thread %.3f, system "
               "%.3f, %ld minor faults)\n",
               mode, argv[3], (unsigned long long)r.bytes_in, c.wall, c.cpu, c.parser, c.sys,
               c.faults);
        return rc < 0;
    }
    char dir[4096];
    const char *top = getenv("top_srcdir");
    if (argc > 1)
        snprintf(dir, sizeof(dir), "%s", argv[1]);
    else
        snprintf(dir, sizeof(dir), "%s/../shared/traces/kineto", top ? top : DPRO_SRCDIR);
    DIR *d = opendir(dir);
    if (!d) {
        printf("bench_import_kineto: %s not found: skipped\n", dir);
        return 77;
    }
    char names[64][256];
    int n = 0, biggest = -1;
    long long best_size = -1;
    struct dirent *de;
    while ((de = readdir(d)) && n < 64) {
        size_t l = strlen(de->d_name);
        if (l < 8 || strcmp(de->d_name + l - 8, ".json.gz") != 0 || l >= sizeof(names[0]))
            continue;
        snprintf(names[n], sizeof(names[n]), "%s", de->d_name);
        char p[8448];
        snprintf(p, sizeof(p), "%.4095s/%.255s", dir, names[n]);
        if (file_size(p) > best_size) {
            best_size = file_size(p);
            biggest = n;
        }
        n++;
    }
    closedir(d);
    if (biggest < 0) {
        printf("bench_import_kineto: no .json.gz in %s: skipped\n", dir);
        return 77;
    }
    char tmpdir[] = "/tmp/dpro-bench-import-XXXXXX";
    if (!mkdtemp(tmpdir))
        return 1;
    char src[8448], json[128], out[128];
    snprintf(src, sizeof(src), "%.4095s/%.255s", dir, names[biggest]);
    snprintf(json, sizeof(json), "%s/trace.json", tmpdir);
    snprintf(out, sizeof(out), "%s/out.dpro", tmpdir);
    long long json_bytes = gunzip(src, json);
    if (json_bytes <= 0) {
        fprintf(stderr, "cannot decompress %s\n", src);
        return 1;
    }
    kineto_result res;
    cost parse, full, inl;
    if (best_of_5(json, out, MODE_PARSE, &res, &parse) < 0 ||
        best_of_5(json, out, MODE_FULL, &res, &full) < 0 ||
        best_of_5(json, out, MODE_INLINE, &res, &inl) < 0)
        return 1;
    double mb = (double)json_bytes / 1e6;
    printf("file %s: %.1f MB of JSON, %llu trace events -> %llu dpro events\n", names[biggest], mb,
           (unsigned long long)res.events_in, (unsigned long long)res.events_out);
    printf("best of 5 each; MB = 10^6 bytes of JSON (decompressed, read from /tmp)\n");
    kineto_importer *q;
    const char *sq = getenv("DPRO_BENCH_SQUEEZE");
    kineto_options qo = {.squeeze = sq && *sq ? atoi(sq) : KINETO_SQUEEZE_AUTO};
    if (kineto_importer_new(NULL, &qo, &q) == DPRO_OK) {
        static const char *levels[] = {"auto", "off", "scalar", "ssse3", "avx512"};
        int l = kineto_importer_squeeze(q);
        printf("whitespace pre-pass: %s\n", l >= 0 && l <= 4 ? levels[l] : "?");
        kineto_importer_free(q);
    }
    printf("%-44s %7s %7s %7s %8s %8s %7s %7s %7s\n", "", "wall s", "MB/s", "CPU s", "CPU ms",
           "MB per", "parser", "sys", "minor");
    printf("%-44s %7s %7s %7s %8s %8s %7s %7s %7s\n", "", "", "wall", "(all)", "per MB", "CPU-s",
           "CPU s", "CPU s", "faults");
    print_cost("parse+map, no writer (1 thread)", &parse, mb);
    print_cost("full import, writer thread (2 threads)", &full, mb);
    print_cost("full import, inline writer (1 thread)", &inl, mb);

    printf("\n%-40s %10s %10s %8s %10s %8s %7s\n", "file", "gz bytes", "gz B/ev", "events",
           "dpro bytes", "dpro B/ev", "gz/dpro");
    for (int i = 0; i < n; i++) {
        snprintf(src, sizeof(src), "%.4095s/%.255s", dir, names[i]);
        cost c;
        if (import_once(src, out, 0, &res, &c) < 0)
            return 1;
        long long gz = file_size(src), dp = file_size(out);
        printf("%-40s %10lld %10.1f %8llu %10lld %8.1f %6.1fx\n", names[i], gz,
               (double)gz / (double)res.events_in, (unsigned long long)res.events_in, dp,
               (double)dp / (double)res.events_in, (double)gz / (double)dp);
    }
    printf("(B/ev: bytes per trace event of the JSON; gz/dpro: how many times smaller the "
           "dpro trace is)\n");
    unlink(out);
    unlink(json);
    rmdir(tmpdir);
    return 0;
}
