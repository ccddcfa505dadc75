/* job_wire.h: the compact parts of shared reading's messages (job_share.c), written and
 * read with common/bytes.h: the compact forms of a rank's events and a folded rank's
 * signature (job_wire.c; not installed). */
#ifndef DPRO_REPLAY_JOB_WIRE_H
#define DPRO_REPLAY_JOB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "bytes.h"
#include "job_int.h"

/* job_wire.c: the n events ev, compact (what each holds, not its loaded bytes): their
 * count, then each event. b->fail when memory ends. */
void job_wire_put_events(bytes *b, const job_event *ev, size_t n);

/* job_wire.c: the events job_wire_put_events wrote, malloc'd (NULL for none; b->fail when
 * they do not fit or memory ends), their count in *n. */
job_event *job_wire_get_events(bytes *b, size_t *n);

/* job_wire.c: a folded rank's signature, or none (s NULL), its rows compact. b->fail when
 * memory ends. */
void job_wire_put_sig(bytes *b, const job_fold_sig *s);

/* job_wire.c: the signature job_wire_put_sig wrote, malloc'd (free with job_fold_sig_free,
 * then free), or NULL: none, or b->fail. */
job_fold_sig *job_wire_get_sig(bytes *b);

#endif
