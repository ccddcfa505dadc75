/*
 * test_chrome_estimate: chrome_estimate_bytes (dpro-export --chrome's size estimate, which
 * decides whether the export asks for --iterations) against the size of the export
 * itself, measured and simulated (with the critical path overlaid), within TOLERANCE_PCT.
 * Then fails each of the estimate's allocations in turn: it must say so.
 * test_chrome_estimate.py runs it on jobs whose kernels show other names than they were
 * traced under (args.full_name) and on jobs where they do not.
 *
 * usage: test_chrome_estimate DIR
 */
#include <stdio.h>
#include <stdlib.h>

#include "replay/chrome.h"
#include "replay/replay.h"
#include "tests/unit/testutil.h"

#define TOLERANCE_PCT 5.0

/* The allocator the library's objects call (linked with --wrap=malloc,calloc,realloc):
 * the real one, except that the fail_at-th call from arming on returns NULL. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
static int fail_at; /* 0: never fail; else the call (from 1) that fails */
static int calls;   /* calls since arming */
static int failed;  /* whether the armed failure happened */

/* Whether this allocation is the one armed to fail. */
static int
alloc_fails(void)
{
    if (fail_at == 0 || ++calls != fail_at)
        return 0;
    failed = 1;
    return 1;
}

void *
__wrap_malloc(size_t size)
{
    return alloc_fails() ? NULL : __real_malloc(size);
}

void *
__wrap_calloc(size_t n, size_t size)
{
    return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t size)
{
    return alloc_fails() ? NULL : __real_realloc(p, size);
}

/* Size in bytes of rp's Chrome export with co, or 0 when it failed. */
static size_t
export_bytes(const replay *rp, const chrome_options *co)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = f ? chrome_export(rp, &rp->graph, &rp->sim, co, f) : -1;
    if (f)
        fclose(f);
    free(text);
    return rc == 0 ? len : 0;
}

/* Checks the estimate of one export of rp (what: its name in the line printed). */
static void
check_estimate(const replay *rp, const chrome_options *co, const char *what)
{
    size_t real = export_bytes(rp, co);
    uint64_t est = 0;
    CHECK(chrome_estimate_bytes(rp, &rp->graph, &rp->sim, co, &est) == 0);
    double off = real ? 100.0 * ((double)est - (double)real) / (double)real : 100;
    printf("%s: estimate %llu bytes, export %zu bytes (%+.2f %%)\n", what, (unsigned long long)est,
           real, off);
    CHECK(real > 0);
    CHECK(off > -TOLERANCE_PCT && off < TOLERANCE_PCT);
}

/* Fails each allocation of the estimate in turn: the estimate then returns -1, or a size
 * when it did without (a kernel name shown as traced where demangling it found no
 * memory); never a size of 0 that would let a huge export through without a warning. */
static void
check_out_of_memory(const replay *rp, const chrome_options *co, const char *what)
{
    int hit = 0, ok = 1;
    for (int k = 1; k < 1000; k++) {
        fail_at = k;
        calls = failed = 0;
        uint64_t est = 1;
        int rc = chrome_estimate_bytes(rp, &rp->graph, &rp->sim, co, &est);
        fail_at = 0;
        if (!failed) {
            CHECK(rc == 0 && est > 0);
            break;
        }
        hit++;
        if (rc == -1 ? est != 0 : rc != 0 || est == 0) {
            printf("%s: allocation %d failed: returned %d, estimate %llu bytes\n", what, k, rc,
                   (unsigned long long)est);
            ok = 0;
        }
    }
    printf("%s: %d allocations of the estimate failed in turn\n", what, hit);
    CHECK(hit > 0);
    CHECK(ok);
}

int
main(int argc, char **argv)
{
    replay rp;
    replay_summary s;
    replay_options ro = {0};
    char err[DPRO_ERRBUF_SIZE];
    if (argc != 2) {
        fprintf(stderr, "usage: test_chrome_estimate DIR\n");
        return 2;
    }
    if (replay_open(argv[1], &ro, &rp, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", argv[1], err);
        return 1;
    }
    if (replay_simulate(&rp) != 0 || replay_summarize(&rp, &rp.graph, &rp.sim, &s) != 0) {
        fprintf(stderr, "%s: the replay failed\n", argv[1]);
        replay_close(&rp);
        return 1;
    }
    check_estimate(&rp, &(chrome_options){0, -1, -1, NULL}, "measured");
    check_estimate(&rp, &(chrome_options){1, -1, -1, &s}, "simulated, critical path");
    check_out_of_memory(&rp, &(chrome_options){0, -1, -1, NULL}, "measured, out of memory");
    check_out_of_memory(&rp, &(chrome_options){1, -1, -1, &s}, "simulated, out of memory");
    replay_summary_free(&s);
    replay_close(&rp);
    printf("%s: %d passed, %d failed\n", argv[1], tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}
