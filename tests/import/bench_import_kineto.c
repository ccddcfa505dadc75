/*
 * bench_import_kineto: speed and size of the Kineto importer on the shared real traces.
 *
 *   bench_import_kineto [DIR]   (default: $top_srcdir/../shared/traces/kineto, else the
 *                                source tree's ../shared/traces/kineto)
 *
 * The biggest .json.gz of DIR is decompressed to /tmp, then imported from there (best of 5)
 * twice: parse and map only (no writer), and the whole import into a dpro trace. Prints
 * MB/s of JSON per core (one thread). Then, for every file of DIR, the size of its dpro
 * trace against the gzip'd JSON. Exit 77 (skip) if DIR is missing.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

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

/* Imports path into out (NULL: no writer). Returns seconds, or -1; *res gets the result. */
static double
import_once(const char *path, const char *out, kineto_result *res)
{
    dpro_writer *w = NULL;
    char err[512];
    if (out) {
        dpro_writer_options o;
        kineto_writer_options(&o);
        unlink(out);
        if (dpro_writer_open(out, &o, &w, err, sizeof(err)) != DPRO_OK) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
    }
    kineto_options ko = {.source_file = path, .file_count = 1};
    kineto_importer *k;
    if (kineto_importer_new(w, &ko, &k) != DPRO_OK)
        return -1;
    double t0 = now_s();
    int rc = kineto_import_path(k, path);
    int crc = w ? dpro_writer_close(w) : DPRO_OK;
    double t = now_s() - t0;
    kineto_importer_result(k, res);
    if (rc != DPRO_OK || crc != DPRO_OK)
        fprintf(stderr, "%s\n", kineto_importer_errmsg(k));
    kineto_importer_free(k);
    return rc == DPRO_OK && crc == DPRO_OK ? t : -1;
}

int
main(int argc, char **argv)
{
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
    double parse = 1e30, full = 1e30;
    for (int i = 0; i < 5; i++) {
        double t = import_once(json, NULL, &res);
        if (t < 0)
            return 1;
        if (t < parse)
            parse = t;
        t = import_once(json, out, &res);
        if (t < 0)
            return 1;
        if (t < full)
            full = t;
    }
    double mb = (double)json_bytes / 1e6;
    printf("file %s: %.1f MB of JSON, %llu trace events -> %llu dpro events\n", names[biggest],
           mb, (unsigned long long)res.events_in, (unsigned long long)res.events_out);
    printf("parse+map (no writer): %.3f s, %.0f MB/s per core\n", parse, mb / parse);
    printf("full import (writer):  %.3f s, %.0f MB/s per core\n", full, mb / full);

    printf("\n%-40s %10s %10s %8s %10s %8s %7s\n", "file", "gz bytes", "gz B/ev", "events",
           "dpro bytes", "dpro B/ev", "gz/dpro");
    for (int i = 0; i < n; i++) {
        snprintf(src, sizeof(src), "%.4095s/%.255s", dir, names[i]);
        if (import_once(src, out, &res) < 0)
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
