/* fs.h: small file-system helpers shared by the commands. */
#ifndef DPRO_FS_H
#define DPRO_FS_H

#include <sys/types.h>

/* Creates directory path and its missing parents (like mkdir -p) with mode. Returns 0,
 * or -1 with errno set (EEXIST is not an error when path is a directory). */
int dpro_mkdir_p(const char *path, mode_t mode);

#endif
