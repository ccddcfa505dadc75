/*
 * test_trace_fold: a trace is one self-contained file once its writer has closed it, even
 * when a reader held it through its -wal across that close, so that copying the .dpro
 * alone loses nothing. A child process writes a trace and closes it when the parent says;
 * the parent, the reader, holds the trace across the close in three ways:
 *   0. its read-only connection open while the writer closes (the writer cannot fold the
 *      -wal: the reader's close must);
 *   1. and 2. its close's look whether the trace is complete held open (a hook in the
 *      library, dpro_fold_test_hook) while the writer marks it complete and closes, at the
 *      close's first look, or at a second look after a first that found it not complete.
 * Afterwards no -wal or -shm lies beside the trace, and the .dpro alone reads whole.
 * (Before the fix, a look that found the trace not complete let the writer mark it and
 * give up folding while it held it, then closed without folding: 1 left the -wal with a
 * close that looked once, 2 with one that looked twice.) Links the static library: the
 * hook is not exported.
 */
#include "dprotrace.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern void (*dpro_fold_test_hook)(const char *name, int complete);

enum { EVENTS = 300 };

/* What parent and child share: the child's progress and the parent's go. */
typedef struct shared {
    int flushed; /* child: the trace has its events in the -wal */
    int go;      /* parent: close the writer now */
    int closed;  /* child: dpro_writer_close returned */
} shared;

static shared *sh;
static int hold_at_look; /* the look (1, 2) during which the writer closes; 0: none */
static int looks;

static void
sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits up to ms for *flag; returns it. */
static int
wait_for(volatile int *flag, long ms)
{
    for (long t = 0; !__atomic_load_n(flag, __ATOMIC_SEQ_CST) && t < ms; t++)
        sleep_ms(1);
    return __atomic_load_n(flag, __ATOMIC_SEQ_CST);
}

/* The child: writes EVENTS events, flushed, then closes the trace when told. */
static void
writer_child(const char *path)
{
    char err[DPRO_ERRBUF_SIZE];
    dpro_writer *w = NULL;
    int rc = dpro_writer_open(path, NULL, &w, err, sizeof err);
    for (size_t i = 0; rc == DPRO_OK && i < EVENTS; i++) {
        dpro_event e;
        memset(&e, 0, sizeof e);
        e.kind = DPRO_KIND_KERNEL;
        e.start_ns = 1000000 + (uint64_t)i * 1000;
        e.end_ns = e.start_ns + 500;
        e.stream = 7;
        rc = dpro_writer_append(w, &e);
    }
    if (rc == DPRO_OK)
        rc = dpro_writer_flush(w);
    __atomic_store_n(&sh->flushed, 1, __ATOMIC_SEQ_CST);
    wait_for(&sh->go, 30000);
    if (dpro_writer_close(w) != DPRO_OK)
        rc = DPRO_ERR_IO;
    __atomic_store_n(&sh->closed, 1, __ATOMIC_SEQ_CST);
    _exit(rc == DPRO_OK ? 0 : 1);
}

/* The hook: at look hold_at_look, lets the writer close and gives it a second to do so
 * while this look holds the trace. */
static void
hold_look(const char *name, int complete)
{
    (void)name;
    (void)complete;
    if (++looks == hold_at_look) {
        __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
        wait_for(&sh->closed, 1000);
    }
}

static int
exists(const char *path, const char *suffix)
{
    char p[600];
    snprintf(p, sizeof p, "%s%s", path, suffix);
    return access(p, F_OK) == 0;
}

/* One case (see the top). */
static void
test_hold(const char *dir, int how)
{
    char path[512], err[DPRO_ERRBUF_SIZE];
    dpro_reader *r = NULL;
    dpro_trace_summary s;
    snprintf(path, sizeof path, "%s/t%d.dpro", dir, how);
    memset(sh, 0, sizeof *sh);
    looks = 0;
    hold_at_look = how;
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0)
        writer_child(path);
    REQUIRE(wait_for(&sh->flushed, 30000));
    REQUIRE(exists(path, "-wal"));
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    CHECK(r && dpro_reader_summary(r, &s) == DPRO_OK && s.events == EVENTS);
    CHECK(r && dpro_reader_ended_early(r)); /* not closed yet */
    if (how == 0) {
        __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
        CHECK(wait_for(&sh->closed, 30000));
        CHECK(exists(path, "-wal")); /* the writer could not fold it: the reader holds it */
    }
    dpro_fold_test_hook = hold_look;
    dpro_reader_close(r);
    dpro_fold_test_hook = NULL;
    __atomic_store_n(&sh->go, 1, __ATOMIC_SEQ_CST);
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (how > 0)
        CHECK(looks >= 1);
    int left = exists(path, "-wal") || exists(path, "-shm");
    if (left)
        fprintf(stderr, "test_trace_fold: case %d: a -wal or -shm left (%d looks)\n", how, looks);
    CHECK(!left);
    /* the file alone: whole */
    r = NULL;
    CHECK(dpro_reader_open(path, &r, err, sizeof err) == DPRO_OK);
    CHECK(r && dpro_reader_summary(r, &s) == DPRO_OK && s.events == EVENTS);
    CHECK(r && !dpro_reader_ended_early(r));
    dpro_reader_close(r);
    unlink(path);
}

int
main(void)
{
    char dir[] = "/tmp/dpro-fold-XXXXXX";
    REQUIRE(mkdtemp(dir) != NULL);
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sh != MAP_FAILED);
    for (int how = 0; how < 3; how++)
        test_hold(dir, how);
    rmdir(dir);
    return tests_done();
}
