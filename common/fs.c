/* fs.c: file-system helpers (see fs.h). */
#include "fs.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

int
dpro_mkdir_p(const char *path, mode_t mode)
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
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, mode) != 0) {
        if (errno != EEXIST || stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            if (errno == EEXIST)
                errno = ENOTDIR;
            return -1;
        }
    }
    return 0;
}
