/* fs.h: small file-system helpers shared by the commands. */
#ifndef DPRO_FS_H
#define DPRO_FS_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/* Creates directory path and its missing parents (like mkdir -p) with mode. Returns 0,
 * or -1 with errno set (EEXIST is not an error when path is a directory). */
int dpro_mkdir_p(const char *path, mode_t mode);

/* dpro_mkdir_p, then the directory above each level it created synced (dpro_sync_dir), so
 * that the new levels survive a machine crash. Returns 0, or -1 with errno set. */
int dpro_mkdir_p_synced(const char *path, mode_t mode);

/* Syncs directory path's entries to disk (fsync of the directory), so that files created
 * or renamed in it survive a machine crash under their names. A file system that cannot
 * sync a directory (EINVAL) is not an error. Returns 0, or -1 with errno set. */
int dpro_sync_dir(const char *path);

/*
 * The file a command writes on request (--chrome FILE), made safe to name: it is never
 * one of the command's inputs (the same st_dev and st_ino as any of inputs[0..n_inputs),
 * a hard link included, even with force), never reached through a symbolic link at path
 * (O_NOFOLLOW), and an existing file is written over only with force. A new file gets
 * mode 0644 (less what the umask takes).
 *
 * dpro_output_check says whether dpro_output_open would refuse path, without creating
 * anything, so that a command can refuse before its work; dpro_output_open checks again
 * on the open file (O_CREAT|O_EXCL, or with force no O_EXCL and the file emptied only
 * after fstat shows it is not an input). Both return 0 / the stream, or -1 / NULL with
 * err saying why, naming path.
 */
int dpro_output_check(const char *path, int force, const char *const *inputs, size_t n_inputs,
                      char *err, size_t errlen);
FILE *dpro_output_open(const char *path, int force, const char *const *inputs, size_t n_inputs,
                       char *err, size_t errlen);

#endif
