/*
 * synccount: an LD_PRELOAD shim for the importer's tests. Counts the process's fsync and
 * fdatasync calls (SQLite's syncs of a trace and its -wal) and, at exit, writes the count
 * to the file named by SYNCCOUNT_OUT. Every call goes on to the C library's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h> /* the prototypes of fsync and fdatasync */

static atomic_long syncs;

typedef int (*sync_fn)(int);

static int
forward(const char *name, int fd)
{
    sync_fn real = (sync_fn)dlsym(RTLD_NEXT, name);
    atomic_fetch_add(&syncs, 1);
    return real ? real(fd) : -1;
}

int
fsync(int fd)
{
    return forward("fsync", fd);
}

int
fdatasync(int fd)
{
    return forward("fdatasync", fd);
}

__attribute__((destructor)) static void
synccount_report(void)
{
    const char *out = getenv("SYNCCOUNT_OUT");
    FILE *f = out && *out ? fopen(out, "w") : NULL;
    if (f) {
        fprintf(f, "%ld\n", (long)atomic_load(&syncs));
        fclose(f);
    }
}
