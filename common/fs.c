/* fs.c: file-system helpers (see fs.h). */
#include "fs.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Syncs the directory holding the entry buf[0..end) names (buf[end] is '/' or the end):
 * "." for a relative name without '/', "/" for one under the root. Returns 0 or -1. */
static int
sync_parent(char *buf, size_t end)
{
    size_t cut = end;
    while (cut > 0 && buf[cut - 1] != '/')
        cut--;
    if (cut == 0)
        return dpro_sync_dir(".");
    char saved = buf[cut == 1 ? 1 : cut - 1];
    buf[cut == 1 ? 1 : cut - 1] = '\0';
    int rc = dpro_sync_dir(buf);
    buf[cut == 1 ? 1 : cut - 1] = saved;
    return rc;
}

/* dpro_mkdir_p, and with sync the directory above each level it created synced. */
static int
mkdir_levels(const char *path, mode_t mode, int sync)
{
    char buf[PATH_MAX];
    struct stat sb;
    size_t len = strlen(path);

    if (len == 0 || len >= sizeof buf) {
        errno = len ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        int made = mkdir(buf, mode) == 0;
        if (!made && errno != EEXIST)
            return -1;
        *p = '/';
        if (made && sync && sync_parent(buf, (size_t)(p - buf)) != 0)
            return -1;
    }
    if (mkdir(buf, mode) != 0) {
        if (errno != EEXIST || stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            if (errno == EEXIST)
                errno = ENOTDIR;
            return -1;
        }
    } else if (sync && sync_parent(buf, len) != 0) {
        return -1;
    }
    return 0;
}

int
dpro_mkdir_p(const char *path, mode_t mode)
{
    return mkdir_levels(path, mode, 0);
}

int
dpro_mkdir_p_synced(const char *path, mode_t mode)
{
    return mkdir_levels(path, mode, 1);
}

int
dpro_sync_dir(const char *path)
{
    int rc = -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        rc = fsync(fd) == 0 || errno == EINVAL ? 0 : -1;
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return rc;
}

/* Whether st is the file of one of inputs (inputs that cannot be stat'ed are not). */
static int
is_input(const struct stat *st, const char *const *inputs, size_t n_inputs)
{
    struct stat in;
    for (size_t i = 0; i < n_inputs; i++)
        if (stat(inputs[i], &in) == 0 && in.st_dev == st->st_dev && in.st_ino == st->st_ino)
            return 1;
    return 0;
}

int
dpro_output_check(const char *path, int force, const char *const *inputs, size_t n_inputs,
                  char *err, size_t errlen)
{
    struct stat st;
    int rc = 0;

    if (lstat(path, &st) != 0) {
        if (errno != ENOENT) {
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            rc = -1;
        }
    } else if (S_ISLNK(st.st_mode)) {
        snprintf(err, errlen, "%s is a symbolic link: not followed; name the file itself", path);
        rc = -1;
    } else if (is_input(&st, inputs, n_inputs)) {
        snprintf(err, errlen, "%s is one of the input traces: not written over", path);
        rc = -1;
    } else if (!force) {
        snprintf(err, errlen, "%s exists: pass --force to write over it", path);
        rc = -1;
    }
    return rc;
}

FILE *
dpro_output_open(const char *path, int force, const char *const *inputs, size_t n_inputs, char *err,
                 size_t errlen)
{
    struct stat st;
    FILE *f = NULL;
    int fd = -1;

    if (dpro_output_check(path, force, inputs, n_inputs, err, errlen) != 0)
        return NULL;
    fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (force ? 0 : O_EXCL), 0644);
    if (fd < 0) {
        if (errno == ELOOP)
            snprintf(err, errlen, "%s is a symbolic link: not followed; name the file itself",
                     path);
        else if (errno == EEXIST)
            snprintf(err, errlen, "%s exists: pass --force to write over it", path);
        else
            snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
    } else if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    } else if (is_input(&st, inputs, n_inputs)) {
        /* made an input between the check and the open: nothing was written */
        snprintf(err, errlen, "%s is one of the input traces: not written over", path);
    } else if (S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) {
        snprintf(err, errlen, "cannot empty %s: %s", path, strerror(errno));
    } else if (!(f = fdopen(fd, "w"))) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
    }
    if (!f && fd >= 0)
        close(fd);
    return f;
}
