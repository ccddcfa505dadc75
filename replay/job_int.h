/* job_int.h: what the load's files (job.c, job_read.c, job_share*.c, job_iters.c,
 * job_fold.c) share (not installed). */
#ifndef DPRO_REPLAY_JOB_INT_H
#define DPRO_REPLAY_JOB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "job.h"
#include "job_fold.h"
#include "period.h"

/* One rank's load, done on a worker thread. Its warnings wait in msg until the phase is
 * over and are then recorded in rank order, so that they come out the same for any
 * number of threads. */
typedef struct rank_task {
    job_rank *jr;
    int rc;     /* 0 or a dpro_status */
    char *err;  /* what failed (malloc'd), with rc < 0 */
    char **msg; /* warnings, in the order met */
    size_t n_msg;
    uint64_t in_file; /* events the trace holds (its summary) */
    uint64_t loaded;  /* events read (before a fold's reduction) */
    /* the window's first pass: the iteration boundaries of the whole trace */
    int method;       /* enum iter_method */
    int32_t nb;       /* boundaries */
    uint64_t *bstart; /* start and end of each boundary's event */
    uint64_t *bend;
    int allocations; /* the first pass met an allocation or free (DPRO_KIND_MEMORY) */
    /* the window chosen (windowed != 0): events overlapping [t0, t1] are loaded, and
     * the boundaries b_first .. b_first + b_count - 1 must be found in them again */
    int windowed;
    uint64_t t0, t1;
    int32_t b_first, b_count;
    int window_ok; /* the loaded events show those boundaries */
    /* the compared iterations in the trace's clock (cmp_ni > 0: known), for folding */
    uint64_t cmp_t0, cmp_t1;
    int32_t cmp_ni;
    /* iterations from the kernel period (no markers), with scan_period: the first pass
     * scans the busiest stream (period), kept trimmed until the ranks' cut is agreed;
     * then nb boundaries as kernel positions (bpos) on stream bstream, their ends in
     * bend (no bstart: no window is taken), the period's length in bperiod */
    int scan_period;
    period_scan period;
    size_t *bpos;
    uint64_t bstream;
    size_t bperiod;
    int quiet_damage;      /* damaged batches were already counted and told (first pass) */
    job_fold_sig *sig;     /* shared reading: a rank folded on its process keeps its signature
                            * (malloc'd) for process 0's classification */
    unsigned char *packed; /* shared reading, a process other than 0: the rank's read as it
                            * goes to process 0, compressed (job_share_pack) */
    size_t packed_len;
    unsigned char *sig_packed; /* and a folded rank's signature apart, compressed: sent only
                                * when process 0 asks for it (job_share_collect) */
    size_t sig_packed_len;
    int32_t local_rep; /* process 0 of a shared reading: the rank a received rank was folded
                        * into on its process, -1: none */
} rank_task;

/* A listed trace file as the load found it: opened by this process (r), or in shared
 * reading by another (its outcome gathered, job_share_opened; r NULL). */
typedef struct opened {
    dpro_reader *r;   /* this process's reader (detached), or NULL: not opened here, not
                       * opened at all, or taken by a rank */
    const char *path; /* ok: the file (the listing's) */
    int ok;           /* it opened: rank, world and job_id below */
    int newer;        /* it did not, for a newer schema (refuses the load); else skipped */
    char *why;        /* not ok: what the reader said (malloc'd) */
    int ended_early;  /* ok: the trace ends early */
    char *warnings;   /* ok: the reader's warnings (malloc'd), or NULL */
    int64_t rank, world;
    char *job_id; /* ok: its job id (malloc'd; "" when the meta has none) */
    int32_t proc; /* shared reading: the process that opened it (its share of the files) */
} opened;

/* The trace files a load looks at: the listing and one entry per file. */
typedef struct listing {
    const char *path; /* what the caller named */
    char **files;
    size_t nfiles;
    opened *o;          /* one per file */
    size_t n_ok;        /* files opened */
    const char *want;   /* job_id of the job loaded */
    int64_t want_world; /* its world_size (-1: not said) */
} listing;

/* job_share.c: closes o's reader and frees what it holds. */
void job_opened_free(opened *o);

/* job_share.c: shared reading, after the ranks are placed (every process calls it): each
 * process other than 0 sends process 0 the reader of every present rank whose file it
 * opened (its share of the files, l), in rank order, in one message (dpro_reader_pack
 * each), and process 0 takes them as those ranks' readers
 * (dpro_reader_unpack; jr->host from it), so that it opens no file outside its own shares
 * (j->files_opened counts the files of its share of the ranks it will open to read them).
 * Returns 0, or a dpro_status with errbuf saying why (a process that cannot pack its
 * readers sends an empty message, which process 0 refuses). */
int job_share_readers(job *j, const listing *l, const job_share *sh, char *errbuf, size_t errlen);

/* job_share_order.c: the order in which the n listed files are shared out (shared reading):
 * their names with runs of digits compared as numbers (ties: the listing's order), so
 * that where the names carry the ranks (rank<R>-host-pid.dpro) a process's share of
 * the files is its share of the ranks. Returns the listing's indices in that order
 * (malloc'd, the caller frees), or NULL (out of memory). */
size_t *job_share_file_order(char *const *files, size_t n);

/* job_share.c: shared reading: hands this process's outcomes of opening the files
 * o[order[k]], k in [lo, hi) (job_share_range over n), to every process, into o[0, n)
 * (the others' without a reader). n 0: out of memory here (every process then fails).
 * Returns 0 or DPRO_ERR_NOMEM (on every process where the transport says so, or what
 * arrived does not hold). */
int job_share_opened(const job_share *sh, opened *o, const size_t *order, int32_t n, int32_t lo,
                     int32_t hi);

/* The spread of a class's folded ranks (its members, the representative not counted),
 * per event of the representative's signature: over the members that compare there (their
 * start at or after the window's, job_fold_alike), the least and greatest start, end and
 * duration (lo and hi: 3 a row, in that order). Enough to tell, for another signature p,
 * whether every member is alike p, none is, or it depends on the member
 * (job_fold_env_verdict). */
typedef struct fold_env {
    int32_t rep;       /* the representative's rank */
    int32_t members;   /* folded into it */
    int32_t gidx;      /* process 0: the index in its reps of the representative's class, -1 */
    int32_t by_spread; /* process 0: the class the spread puts every member in (-1: it does
                        * not decide; -2: not yet found) */
    size_t n;          /* rows */
    int32_t *cmp;      /* per row: members that compare there */
    int64_t *lo, *hi;
} fold_env;

/* The representatives of the classes so far: their signatures and ranks; on a process
 * other than 0 of a shared reading, each class's spread too (env, NULL otherwise). */
typedef struct fold_reps {
    job_fold_sig *sig;
    int32_t *rank;
    int32_t n;
    fold_env *env;
} fold_reps;

/* What job_fold_env_verdict finds. */
enum { JOB_FOLD_NONE = 0, JOB_FOLD_ALL = 1, JOB_FOLD_SOME = 2 };

/* job_share_fold.c: widens e (empty: rep's, made from s's rows) by member signature s.
 * Returns 0 or DPRO_ERR_NOMEM (e unchanged). */
int job_fold_env_add(fold_env *e, int32_t rep, const job_fold_sig *s);

/* job_share_fold.c: frees what e holds. Cannot fail. */
void job_fold_env_free(fold_env *e);

/* job_share_fold.c: whether the members of a class whose structure is st's (alike
 * requires it equal) and whose spread is e are alike representative p: JOB_FOLD_ALL
 * (every one), JOB_FOLD_NONE (not one) or JOB_FOLD_SOME (it depends on the member: their
 * signatures decide). Exact: job_fold_alike on each member would agree. */
int job_fold_env_verdict(const fold_env *e, const job_fold_sig *st, const job_fold_sig *p);

/* job_share_fold.c: the spreads reps->env[0, reps->n) with members, flat into *out
 * (malloc'd, *len bytes). Returns 0 or DPRO_ERR_NOMEM. */
int job_fold_env_pack(const fold_reps *reps, unsigned char **out, size_t *len);

/* job_share_fold.c: takes back what job_fold_env_pack wrote into *env (malloc'd, *n of
 * them, gidx -1, by_spread -2; free each with job_fold_env_free, then free) and by
 * representative's rank into by_rep (initialised by the caller). Returns 0 or
 * DPRO_ERR_CORRUPT (not what it wrote, or out of memory; nothing kept). */
int job_fold_env_unpack(const unsigned char *p, size_t len, fold_env **env, int32_t *n,
                        hmap *by_rep);

/* The kernels a first pass collects for the period scan (job_period_collect). */
typedef struct period_collect {
    int on; /* collecting: no markers that decide the iterations met so far */
    period_kernel *k;
    size_t n, cap;
    int32_t key_count[8]; /* ranges named like iterations, by naming pattern (iter.h) */
} period_collect;

/* job_iters.c: collects event e (of the trace read by r) into c while c->on: its kernels,
 * until a marker decides that the iterations come from markers (an iteration marker, or
 * two ranges of one naming pattern, as replay_detect_iterations decides), when what was
 * collected is freed and c->on cleared. Returns 0 or -1 (out of memory). */
int job_period_collect(period_collect *c, const dpro_reader *r, const dpro_event *e);

/* job_iters.c: the period of the kernels c collected from t's rank (found without
 * markers), scanned as the replay scans them (period.h) and kept trimmed in t->period,
 * t->method ITER_PERIOD when there is one (its cut waits for job_period_agree). Returns
 * 0 or DPRO_ERR_NOMEM. */
int job_period_scan(rank_task *t, const period_collect *c);

/* job_iters.c: the cut of the ranks whose iterations come from the kernel period, agreed
 * from the n tasks' first-pass scans as the replay agrees it from every rank's events
 * (period_match): each such task gets its boundaries (bpos, nb; bend and bstart, both
 * the boundaries' ends, where its scan holds the ends: a rank read here) and its scan is
 * freed. Returns 0 or DPRO_ERR_NOMEM. */
int job_period_agree(job *j, rank_task *t, int32_t n);

/* The texts of the kernel names in other processes' scans (job_period_share): pointers
 * (w) into the gathered bytes (buf), both owned. */
typedef struct period_words {
    void *buf;
    const char **w;
} period_words;

/* job_iters.c: shared reading: hands what the cut needs of every process's first-pass
 * scans (t[lo, hi): stream, stretch, one period's names as text and idle times, not the
 * ends) to every process, into t[0, n)'s period, so that each agrees the same cut
 * (job_period_agree) without the other ranks' readers; the ends of the boundaries then
 * travel with job_share_bounds. The other processes' scans name their kernels through
 * pw (zeroed before; freed with job_period_words_free, even on failure, once
 * job_period_agree has read them: the scans it leaves are not read again). Each
 * process's texts travel once however many of its ranks name them.
 * Returns 0 or DPRO_ERR_NOMEM (on every process where the transport says so). */
int job_period_share(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi,
                     period_words *pw);

/* job_iters.c: frees what job_period_share left in pw. */
void job_period_words_free(period_words *pw);

/* job_iters.c: shared reading, process 0: the boundaries of a rank another process read
 * (its events whole, or reduced around them), found by their ends (t->bend) among the
 * kernels of stream t->bstream, into jr->bounds. Returns 0, DPRO_ERR_NOMEM, or
 * DPRO_ERR_CORRUPT when the events do not show them. */
int job_period_place_ends(rank_task *t);

/* job_iters.c: the boundaries cut from the first pass (t->bpos: kernel positions on stream
 * t->bstream) as indices of the events the second pass read, into jr->bounds. Returns 0,
 * DPRO_ERR_NOMEM, or DPRO_ERR_CORRUPT when the events do not show them (the trace changed
 * between the passes: *missing is the first position not found). */
int job_period_place(rank_task *t, size_t *missing);

/* job_iters.c: chooses the window from the first pass (see job.h): the compared
 * iterations (compared_span, which also sets each task's cmp_t0, cmp_t1 and cmp_ni) and
 * one iteration before them; none when a rank's iterations come from the kernel period.
 * Sets each task's window and j->iter_skipped, j->window_warmup, and span[0..1] to the
 * first and last compared iteration, numbered as replay_summary.first_iteration. Returns
 * 1 when a window is taken, 0 when every event is to be loaded, -1 when out of memory. */
int job_choose_window(job *j, rank_task *t, int32_t n, const job_options *o, int32_t *span);

/* job_read.c: records t's failure (the text, formatted, replaces any before it in
 * t->err) and returns rc. */
int job_task_fail(rank_task *t, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* job_read.c: frees what t holds (not its rank). Cannot fail. */
void job_task_free(rank_task *t);

/* job_read.c: the first pass over one rank (its trace opened anew and detached again):
 * every event read, the markers' iteration boundaries found as the replay finds them,
 * else with t->scan_period the kernel period scanned (job_period_scan); damaged batches
 * counted and told. o is not read. Returns 0 or a dpro_status (job_task_fail). */
int job_scan_bounds(rank_task *t, const job_options *o);

/* job_read.c: the second pass (or the only one) over one rank (its trace opened anew and
 * detached again): its events (the window's only, t->windowed), the boundaries cut from
 * the first pass placed, a window checked to show them. Returns 0 or a dpro_status. */
int job_read_rank(rank_task *t, const job_options *o);

/* job_fold.c: the first of reps alike s (job_fold_alike), or -1. */
int32_t job_fold_find(const fold_reps *reps, const job_fold_sig *s);

/* job_fold.c: classifies t's rank, read whole, by its signature *s (taken: kept as a
 * representative's or freed): folded into the first of reps alike it (reduced), or a
 * representative. With keep, a folded rank's signature goes to t->sig. Returns 0 or
 * DPRO_ERR_NOMEM. */
int job_fold_classify(job *j, rank_task *t, job_fold_sig *s, fold_reps *reps, int keep);

/* job_share_order.c: the ranks sh's process reads of n, [*lo, *hi). */
void job_share_range(const job_share *sh, int32_t n, int32_t *lo, int32_t *hi);

/* job_share.c: on a process other than 0 of a shared reading, closes the readers it
 * opened of the ranks of t[0, n) outside its share [lo, hi) (their files were in its
 * share of the files: their meta went to every process); their events are read by their
 * own process and told by process 0. */
void job_share_close_others(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi);

/* job_share.c: packs t's read as it goes to process 0 (events, outcome, the rank it was
 * folded into), zlib-compressed, into t->packed, and its signature apart into
 * t->sig_packed, frees t's events and signature and counts the bytes in j->share_packed
 * and j->share_unpacked. Returns 0 or DPRO_ERR_NOMEM (t unchanged). */
int job_share_pack(job *j, rank_task *t);

/* job_wire.c: the events of a rank's read and its signature (s NULL: none), alone, in
 * the compact form its message to process 0 carries them (what each event and each
 * signature row holds, not its loaded bytes), into *out (malloc'd, *len bytes). Returns
 * 0 or DPRO_ERR_NOMEM (*out NULL). */
int job_share_wire_pack(const job_event *ev, size_t n, const job_fold_sig *s, unsigned char **out,
                        size_t *len);

/* job_wire.c: takes back what job_share_wire_pack wrote (p, len): the events into *ev
 * (malloc'd, *n of them; NULL for none), the signature into *s (malloc'd, free with
 * job_fold_sig_free then free; NULL for none). Returns 0 or DPRO_ERR_CORRUPT (not what it
 * wrote: cut short or bytes left over; or out of memory); all NULL then. */
int job_share_wire_unpack(const unsigned char *p, size_t len, job_event **ev, size_t *n,
                          job_fold_sig **s);

/* job_share.c: hands every process's first-pass results (t[lo, hi)) to every process,
 * into t[0, n). Returns 0 or DPRO_ERR_NOMEM (on every process where the transport
 * says so). */
int job_share_bounds(const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi);

/* job_share_fold.c: classifies on process 0 a rank another process read, as the single
 * process does: t[i], a rank folded there (local_rep) by its class's spread in envs (found
 * by representative in by_rep) where that decides, else by its signature, asked of its
 * process p (sh->ask); a rank folded there and alike none of reps is read again with o.
 * Returns 0 or a dpro_status. */
int job_share_classify(job *j, const job_share *sh, int p, rank_task *t, int32_t i, fold_reps *reps,
                       fold_env *envs, const hmap *by_rep, const job_options *o);

/* job_share.c: holds the events of jr, a rank folded while read (the single process,
 * process 0 of a shared reading), compact (jr->wire, as process 0 holds a received rank's;
 * the graph's passes expand them one rank at a time). Returns 0 or DPRO_ERR_NOMEM (jr
 * unchanged). */
int job_rank_hold_compact(job_rank *jr);

/* job_share.c: the signature process 0 asked of t (put as the wire carries it) into
 * *out (malloc'd, *len bytes): an empty signature when t has none. Returns 0 or
 * DPRO_ERR_NOMEM. */
int job_share_sig_bytes(const rank_task *t, unsigned char **out, size_t *len);

/* job_share.c: takes back the signature job_share_sig_bytes wrote (NULL: none or not
 * what it wrote; *bad set then). Free with job_fold_sig_free, then free. */
job_fold_sig *job_share_sig_take(const unsigned char *p, size_t len, int *bad);

/* job_share.c: detached reader r as it travels to process 0 from the process that
 * opened its file (dpro_reader_pack into *out, malloc'd, *len bytes): its meta cut to
 * the keys read of a loaded rank (job_meta_names), its strings a mark where they are
 * prev's. Returns dpro_reader_pack's status. */
int job_share_pack_reader(const dpro_reader *r, const dpro_reader *prev, uint8_t **out,
                          size_t *len);

/* job_share.c: the ranks read by the other processes, sent to process 0 and taken there
 * in rank order into t (classified against reps when folding: reps non-NULL; a rank to
 * read again is read with o). Returns 0 or a dpro_status. */
int job_share_collect(job *j, const job_share *sh, rank_task *t, int32_t n, int32_t lo, int32_t hi,
                      fold_reps *reps, const job_options *o);

#endif
