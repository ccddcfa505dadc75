/*
 * inputs.h: the trace files a replaying command reads, and the two rules the commands
 * apply to them (prefix inputs_).
 *
 * Unread traces: a trace file under the command's path that could not be opened
 * (job_load skips it with a warning) or whose damaged batches were skipped leaves the
 * replay partial. inputs_check_read makes that an error unless the user asked for a
 * partial answer (--partial), so that a script never takes a partial replay for a whole
 * one.
 *
 * Output files: inputs_check_output / inputs_open_output apply dpro_output_check /
 * dpro_output_open (common/fs.h) with every trace file under the path, and its SQLite
 * side files (-wal, -shm, -journal), as the inputs not to write over.
 */
#ifndef DPRO_REPLAY_INPUTS_H
#define DPRO_REPLAY_INPUTS_H

#include <stdio.h>

#include "replay.h"

/* The rule as each command's --help states it: the --partial option, and the exit
 * status (after the command's own description of status 1). */
#define INPUTS_HELP_PARTIAL                                                                        \
    "      --partial          go on without the trace files that cannot be read whole\n"           \
    "                         (not a trace, unreadable, damaged batches); they are named\n"        \
    "                         in warnings\n"
#define INPUTS_HELP_EXIT                                                                           \
    "Exit status: 0 ok; 1 bad input (no readable trace, a trace file that could not be\n"          \
    "read whole, unless --partial; an output file refused or not written); 2 usage.\n"

/* Whether every trace file under path (the one replay_open read into rp) was read
 * whole. Returns 0 when it was, or when partial is set (the unread files have been named
 * in warnings); otherwise prints an error naming the unread files and the damaged ranks
 * and returns 1. Out of memory or a listing that fails also returns 1, with an error. */
int inputs_check_read(const replay *rp, const char *path, int partial);

/* Whether out may be written (see dpro_output_check), the inputs being the trace files
 * under path. Returns 0, or 1 with an error printed. */
int inputs_check_output(const char *path, const char *out, int force);

/* Opens out for writing (see dpro_output_open), the inputs being the trace files under
 * path. Returns the stream (fclose it), or NULL with an error printed. */
FILE *inputs_open_output(const char *path, const char *out, int force);

#endif
