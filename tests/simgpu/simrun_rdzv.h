/* simrun_rdzv.h: out-of-band exchange of a small blob (an ncclUniqueId) between
 * the ranks started by simrun, as real jobs do through torch's TCPStore.  Rank 0
 * writes the blob to $SIMRUN_RDZV_FILE (atomically, by rename); the other ranks
 * wait for the file and read it.  Header-only so that jobs need no simgpu library. */
#ifndef SIMRUN_RDZV_H
#define SIMRUN_RDZV_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Shares `len` bytes of `buf` from rank 0 to every rank.  Rank 0's buf must be
 * filled; the others' is overwritten.  Waits at most `timeout_s` seconds.
 * Returns 0, or -1 (no SIMRUN_RDZV_FILE, I/O error, timeout). */
static inline int
simrun_rdzv_share(int rank, void *buf, size_t len, double timeout_s)
{
    const char *path = getenv("SIMRUN_RDZV_FILE");
    char tmp[4096];
    FILE *f;
    struct timespec nap = {0, 2000000};
    double waited = 0;
    if (!path || !*path)
        return -1;
    if (rank == 0) {
        snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
        f = fopen(tmp, "wb");
        if (!f)
            return -1;
        if (fwrite(buf, 1, len, f) != len) {
            fclose(f);
            return -1;
        }
        if (fclose(f) != 0 || rename(tmp, path) != 0)
            return -1;
        return 0;
    }
    for (;;) {
        f = fopen(path, "rb");
        if (f) {
            size_t got = fread(buf, 1, len, f);
            fclose(f);
            if (got == len)
                return 0;
        }
        if (waited > timeout_s)
            return -1;
        nanosleep(&nap, NULL);
        waited += 0.002;
    }
}

#endif /* SIMRUN_RDZV_H */
