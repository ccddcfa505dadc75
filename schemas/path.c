/*
 * path.c: the names libdprotrace hands SQLite for a trace path (see trace_internal.h).
 *
 * SQLite's unix VFS refuses, with SQLITE_OPEN_NOFOLLOW, a path with a symbolic link in any
 * component (/scratch -> /lustre/...), and caps full path names at 512 bytes. The directory
 * of a trace is therefore resolved once (realpath), so that only a link at the file itself
 * is refused; where the resolved name is too long for SQLite, the directory is opened and
 * SQLite is given "/proc/self/fd/N/NAME" through the VFS "dpro-fd", the unix VFS whose
 * xFullPathname takes such a name as it is (the unix one would expand the link again).
 */
#include "dprotrace.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest name given to the unix VFS as is: under its 512-byte cap with room for the
 * "-journal", "-wal" and "-shm" names it derives. */
#define SQLITE_NAME_MAX 480
#define FD_PREFIX "/proc/self/fd/"

static sqlite3_vfs fd_vfs;
static int (*unix_full_pathname)(sqlite3_vfs *, const char *, int, char *);
static pthread_once_t fd_vfs_once = PTHREAD_ONCE_INIT;
static int fd_vfs_ok;

static int
fd_full_pathname(sqlite3_vfs *vfs, const char *name, int nout, char *out)
{
    int rc = SQLITE_OK;
    size_t n = strlen(name);
    if (strncmp(name, FD_PREFIX, strlen(FD_PREFIX)) != 0)
        rc = unix_full_pathname(vfs, name, nout, out);
    else if (n + 1 > (size_t)nout)
        rc = SQLITE_CANTOPEN;
    else
        memcpy(out, name, n + 1);
    return rc;
}

static void
fd_vfs_register(void)
{
    sqlite3_vfs *u = sqlite3_vfs_find("unix");
    if (u) {
        fd_vfs = *u;
        fd_vfs.pNext = NULL;
        fd_vfs.zName = "dpro-fd";
        unix_full_pathname = u->xFullPathname;
        fd_vfs.xFullPathname = fd_full_pathname;
        fd_vfs_ok = sqlite3_vfs_register(&fd_vfs, 0) == SQLITE_OK;
    }
}

int
dpro_path_resolve(const char *path, dpro_db_path *out, char *errbuf, size_t errlen)
{
    int rc = DPRO_OK;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = NULL, *real = NULL;
    size_t len;

    memset(out, 0, sizeof *out);
    out->dirfd = -1;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
        dpro_set_err(errbuf, errlen, "%s: not a file name", path);
        return DPRO_ERR_ARG;
    }
    if (strlen(path) >= PATH_MAX) {
        dpro_set_err(errbuf, errlen, "%s: %s", path, strerror(ENAMETOOLONG));
        return DPRO_ERR_IO;
    }
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    if (!dir)
        rc = DPRO_ERR_NOMEM;
    if (rc == DPRO_OK && !(real = realpath(dir, NULL))) {
        dpro_set_err(errbuf, errlen, "%s: directory %s: %s", path, dir, strerror(errno));
        rc = errno == ENOMEM ? DPRO_ERR_NOMEM : DPRO_ERR_IO;
    }
    if (rc == DPRO_OK) {
        len = strlen(real) + strlen(base) + 2;
        out->file = malloc(len);
        if (!out->file)
            rc = DPRO_ERR_NOMEM;
        else
            snprintf(out->file, len, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base);
    }
    if (rc == DPRO_OK && strlen(out->file) <= SQLITE_NAME_MAX) {
        out->sqlite_name = strdup(out->file);
        if (!out->sqlite_name)
            rc = DPRO_ERR_NOMEM;
    } else if (rc == DPRO_OK) {
        pthread_once(&fd_vfs_once, fd_vfs_register);
        out->dirfd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (out->dirfd < 0) {
            dpro_set_err(errbuf, errlen, "%s: directory %s: %s", path, real, strerror(errno));
            rc = DPRO_ERR_IO;
        } else if (!fd_vfs_ok || access(FD_PREFIX, X_OK) != 0) {
            dpro_set_err(errbuf, errlen,
                         "%s: the path is longer than SQLite takes (%d bytes) and /proc is "
                         "not available to shorten it",
                         path, SQLITE_NAME_MAX);
            rc = DPRO_ERR_IO;
        } else {
            len = strlen(FD_PREFIX) + 24 + strlen(base);
            out->sqlite_name = malloc(len);
            if (!out->sqlite_name)
                rc = DPRO_ERR_NOMEM;
            else
                snprintf(out->sqlite_name, len, FD_PREFIX "%d/%s", out->dirfd, base);
            out->vfs = "dpro-fd";
        }
    }
    if (rc == DPRO_ERR_NOMEM)
        dpro_set_err(errbuf, errlen, "%s: out of memory", path);
    free(dir);
    free(real);
    if (rc != DPRO_OK)
        dpro_path_free(out);
    return rc;
}

void
dpro_path_free(dpro_db_path *p)
{
    if (p->dirfd >= 0)
        close(p->dirfd);
    free(p->file);
    free(p->sqlite_name);
    memset(p, 0, sizeof *p);
    p->dirfd = -1;
}

char *
dpro_sqlite_uri(const char *name, const char *params)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(name);
    char *uri = malloc(5 + 3 * n + 1 + strlen(params) + 1), *o = uri;
    if (!uri)
        return NULL;
    memcpy(o, "file:", 5);
    o += 5;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("/._-~", c)) {
            *o++ = (char)c;
        } else {
            *o++ = '%';
            *o++ = hex[c >> 4];
            *o++ = hex[c & 15];
        }
    }
    if (*params) {
        *o++ = '?';
        strcpy(o, params);
    } else {
        *o = 0;
    }
    return uri;
}
