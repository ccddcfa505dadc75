/*
 * synccount: an LD_PRELOAD shim for the importer's tests. Counts the process's fsync and
 * fdatasync calls, those of files (SQLite's syncs of a trace and its -wal) apart from those
 * of directories (the importer's sync of its output directory), and at exit writes the two
 * counts, files then directories, one a line, to the file named by SYNCCOUNT_OUT. Every
 * call goes on to the C library's, but a directory's when SYNCCOUNT_FAIL_DIRS is set: that
 * one fails with EIO, without syncing (the importer's error path).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h> /* the prototypes of fsync and fdatasync */

static atomic_long file_syncs, dir_syncs;

typedef int (*sync_fn)(int);

static int
forward(const char *name, int fd)
{
    sync_fn real = (sync_fn)dlsym(RTLD_NEXT, name);
    struct stat st;
    int dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
    atomic_fetch_add(dir ? &dir_syncs : &file_syncs, 1);
    if (dir && getenv("SYNCCOUNT_FAIL_DIRS")) {
        errno = EIO;
        return -1;
    }
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
        fprintf(f, "%ld\n%ld\n", (long)atomic_load(&file_syncs), (long)atomic_load(&dir_syncs));
        fclose(f);
    }
}
