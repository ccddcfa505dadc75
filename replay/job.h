/*
 * job.h: a job as a directory of per-rank traces (prefix job_).
 *
 * job_load lists the traces (dpro_list_traces), reads each one's meta and events and
 * orders them by rank. It tells the user, in plain words, what is wrong with the set:
 * two jobs mixed in one directory (different job_id or world_size: refused unless a
 * job id is chosen), a rank missing, a rank twice, a world size that does not match,
 * damaged batches, dropped events. Problems that still leave an honest partial answer
 * (a missing rank, damage) are warnings recorded in job->diag; the others fail.
 *
 * Ranks are read in parallel (job_options.jobs threads, one rank at a time each); what
 * is loaded and every warning, in rank order, are the same for any number of threads.
 * A trace's file is open only while a pass reads it (at most `jobs` at a time): the
 * loaded ranks keep detached readers, so a job may have more ranks than the process may
 * open files.
 *
 * The window: a caller that compares a bounded number of iterations (job_options.
 * iterations > 0) needs only their time span. job_load then reads each rank twice: a
 * first pass over the whole trace keeps only the markers and finds the
 * iteration boundaries there as the replay does (replay_detect_iterations); from them it
 * chooses the compared iterations as the replay would (warm-up given or detected on the
 * marker ends, then `iterations` of them), and the second pass reads, through the
 * format's batch time index (dpro_iter_open_range), only the events from the start of
 * the marker of the boundary before the compared iterations (one iteration of margin)
 * to the end of the marker of the last compared boundary (with job_options.from_start, for
 * traces with allocations: from the trace's start). The window is taken only
 * when every present rank's iterations come from markers (ITER_MARKER, ITER_RANGE), it
 * leaves something out, and the boundaries found again in the loaded events are the
 * same ones; otherwise every event is loaded. j->iter_skipped and j->window_warmup tell
 * the caller how the window's iterations map onto the whole trace's.
 *
 * Folding while reading (job_options.fold, without max_events): the first pass is made
 * (with or without a window) so that the compared iterations are known, and the ranks
 * are read in waves of `jobs`; after each wave, in rank order, every rank read is
 * compared with the representatives so far (job_fold.h: its events' structure and, over
 * the compared iterations, timing); a rank alike one becomes folded into it (folded,
 * fold_rep) and keeps only what the replay needs of it (job_fold_reduce), the others
 * become representatives. Peak memory is then the representatives' events and one
 * wave's, not every rank's. Without markers the first pass scans the kernel period too
 * (period.h) and the cut shared across ranks is agreed from the per-rank scans before the
 * second pass (job_period_agree), each rank's boundaries then placed in its events
 * (job_rank.bounds) and kept by the reduction; no window is taken then. Nothing is folded
 * when a rank's iterations come from neither (no markers, no period), or when a window
 * does not fit (every event is then read anew).
 * The classes depend on rank order only, not on the number of threads.
 *
 * Shared reading (job_options.share, `dpro-replay --mpi`): P processes call job_load
 * alike; each lists the traces and opens its share of the files (file k of m with
 * k * P / m == p, the names ordered with their numbers compared as numbers, so that
 * rank<R>-... files are shared as their ranks are) for their meta; what opening each gave (rank,
 * world size, job id, an early end, the reader's warnings, or why it did not open)
 * is handed to every process (share->gather), so that the placement and the warnings
 * are the same everywhere. Process 0, which builds the graph from every rank's meta,
 * strings and tables, then receives from each other process the readers of the present
 * ranks whose files it opened (dpro_reader_pack: one message a process, in rank order), so
 * that no process opens a file outside its shares. Each reads the events of its
 * share only, the present ranks k (in rank order, n of them) with k * P / n == p. The
 * first pass's kernel periods (without markers: job_period_share, their kernel names as
 * text) and then its boundaries are handed
 * to every process (share->gather), so that each agrees the same cut and chooses the
 * same window and compared iterations; each folds its share while reading against its own
 * representatives, keeping a folded rank's signature; whether every window fits is
 * agreed (share->min). Then each process sends process 0 its classes' spreads (per
 * event of a representative, the least and greatest times of the ranks folded into it)
 * and its ranks, one message a rank in rank order (the events, reduced or whole, what the
 * read said; a folded rank names its representative, its signature stays), and process
 * 0 classifies them in rank order again against the representatives so far, by the same
 * rule and in the same order as the single process: a folded rank by its class's spread
 * where the spread decides for every member (job_fold_env_verdict), else by its
 * signature, which process 0 asks of its process (share->ask); a rank folded on its
 * process and alike none of them is read again there (alike is not transitive: rare). Process 0
 * then holds what the single process's job_load holds and reports the same warnings (the others
 * record theirs silently: job.quiet); on the others job_load returns 0 with their ranks' events
 * handed over (the job holds the readers alone).
 */
#ifndef DPRO_REPLAY_JOB_H
#define DPRO_REPLAY_JOB_H

#include <stddef.h>
#include <stdint.h>

#include "align.h"
#include "dprotrace.h"

/* A loaded event: the fields of dpro_event (schemas/dprotrace.h; same names, types and
 * meanings) that the replay, the folding, the analyses and the optimizer's profile read,
 * 160 bytes against dpro_event's 248: the loaded events are the largest part of an
 * explicit replay's peak (docs/models.md, "Memory per node"). A field added to the
 * format is read by the replay only once it is added here (job_event_of, job_read.c). */
typedef struct job_event {
    uint64_t start_ns, end_ns;
    uint64_t correlation;
    uint64_t stream;
    uint64_t object;
    uint64_t bytes;
    uint64_t address;
    uint64_t comm, seq, count;
    int64_t value;
    uint32_t kind, subkind;
    uint32_t thread;
    uint32_t name, name2;
    uint32_t device;
    int32_t result;
    uint32_t shared_mem;
    uint32_t grid[3], block[3];
    uint32_t dtype, redop;
    int32_t peer;
} job_event;

/* One rank's clock alignment samples (align.h), as the replay takes them from its events
 * (replay_rank_align_samples): every collective's and single send/recv's device end,
 * and how many came from device records and from host calls. */
typedef struct job_align_part {
    align_sample *s; /* malloc'd, n of them */
    size_t n;
    int32_t from_dev, from_host;
} job_align_part;

typedef struct job_rank {
    int32_t rank;
    char *path;
    dpro_reader *reader; /* detached (dpro_reader_detach: no open file): the rank's meta,
                          * strings and tables live in it */
    job_event *events;   /* all events, in start-time order */
    size_t n_events;
    const char *host;
    const char *job_id;
    int32_t world_size;
    uint64_t bad_batches;
    uint64_t dropped;
    int folded;       /* 1: alike rank fold_rep, reduced while read (see below) */
    int32_t fold_rep; /* with folded: the representative rank */
    size_t *bounds;   /* iterations from the kernel period, cut while loading (see below):
                       * the event closing each, n_bounds of them; NULL: not cut */
    int32_t n_bounds;
    size_t period; /* with bounds: kernels per iteration */
    /* shared reading, process 0, a rank another process read: what was taken there from
     * the events it sent, so that process 0 need not take it from them (malloc'd; NULL:
     * taken here). Dropped when the rank's events change here (job_rank_forget). */
    job_align_part *align;           /* its clock alignment samples */
    struct replay_rank_iters *iters; /* its iterations (replay_rank_iterations), sent
                                      * only when no load's cut (bounds) placed them */
    /* A rank folded while read (the single process, process 0 of a shared reading) and,
     * on process 0, a rank another process read keep their events compact (n_events of
     * them, wire_len bytes: the form shared reading's messages carry, job_wire.h), and
     * `events` holds them expanded only while a pass reads them (job_rank_expand, then
     * job_rank_compact): every rank's 160-byte events are never held at once. NULL: the
     * events are held expanded. */
    unsigned char *wire;
    size_t wire_len;
    uint64_t wire_first_op; /* with wire: the start of its first op (build_first_op), */
    int wire_has_first_op;  /* when it has one */
} job_rank;

typedef struct job {
    job_rank *ranks; /* indexed by rank: ranks[r].reader == NULL when rank r is missing */
    int32_t n_ranks; /* world size (or the highest rank + 1) */
    int32_t n_present;
    char *job_id;
    char **diag; /* warnings, in order (also printed with pr_warn) */
    size_t n_diag;
    int32_t iter_skipped;       /* iteration boundaries of the whole traces before the loaded
                                 * window (0 when loaded whole) */
    int32_t window_warmup;      /* when a window was loaded: the warm-up, in
                                 * replay_options.warmup's meaning, that makes the window's
                                 * compared iterations those of the whole traces; -1: the
                                 * traces were loaded whole */
    uint64_t events_in_files;   /* events the present ranks' traces hold */
    uint64_t events_loaded;     /* of those, the events loaded */
    int32_t n_folded;           /* ranks folded while read (job_rank.folded) */
    uint64_t events_kept;       /* events kept after the folded ranks' reduction */
    int quiet;                  /* job_warn records without printing (shared reading: a
                                 * process other than 0) */
    int32_t share_lo, share_hi; /* shared reading: the present ranks this process read
                                 * (indices in rank order, [lo, hi)) */
    uint64_t share_packed;      /* shared reading, a process other than 0: bytes of its
                                 * reads held compressed until sent (folding while read) */
    uint64_t share_unpacked;    /* and their size unpacked */
    int32_t share_by_spread;    /* shared reading, process 0: received folded ranks classed
                                 * by their class's spread (job_fold_env_verdict) */
    int32_t share_sig_asked;    /* and those whose signature it asked for */
    uint64_t share_sig_rows;    /* the rows of the signatures asked for */
    uint64_t share_sig_bytes;   /* and the bytes they took */
    int32_t files_opened;       /* shared reading: the trace files this process opened (its
                                 * share of the listing's and the ranks' it reads) */
    size_t untrimmed;           /* bytes freed since the heap was last trimmed (job_trim) */
} job;

/* How the processes of a shared reading talk (see above; mpi_sim.h gives MPI's). Each
 * function returns 0, or -1 when out of memory or the transport fails. */
typedef struct job_share {
    int me, nprocs; /* this process, the process count */
    void *ctx;
    /* Every process's buf (len bytes), concatenated in process order, into *all
     * (malloc'd, *all_len bytes); every process calls it. */
    int (*gather)(void *ctx, const void *buf, size_t len, void **all, size_t *all_len);
    /* The smallest v over every process, into *out; every process calls it. */
    int (*min)(void *ctx, int v, int *out);
    /* On a process other than 0: hands buf to process 0 (blocks until taken). */
    int (*send0)(void *ctx, const void *buf, size_t len);
    /* On process 0: the next buffer process `from` sent, into *buf (malloc'd). */
    int (*recv)(void *ctx, int from, void **buf, size_t *len);
    /* On process 0: asks process `to` for what `what` names (a rank's signature; -1:
     * nothing more); the answer comes through recv. */
    int (*ask)(void *ctx, int to, int64_t what);
    /* On a process other than 0: the next thing process 0 asks for, into *what. */
    int (*asked)(void *ctx, int64_t *what);
} job_share;

/* Most threads job_load starts (the default is the number of CPUs, up to this). */
#define JOB_MAX_JOBS 16

typedef struct job_options {
    const char *job_id;     /* load only traces of this job (NULL: the directory must hold one) */
    size_t max_events;      /* per rank, 0: no limit (events past it are dropped with a warning;
                             * no window is taken then) */
    int jobs;               /* threads reading ranks; 0: the number of CPUs, at most
                             * JOB_MAX_JOBS */
    int32_t iterations;     /* > 0: the caller compares this many steady iterations; only their
                             * window is loaded (see above). 0: every event */
    int32_t warmup;         /* with iterations > 0: replay_options.warmup (-1: detected) */
    int full;               /* non-zero: every event, even with iterations > 0 */
    int from_start;         /* non-zero: where any rank's trace holds allocations
                             * (DPRO_KIND_MEMORY; under shared reading: always) every
                             * rank's window starts at the trace's start, not at the
                             * boundary before the compared iterations: the first
                             * iteration and what comes before it are loaded too, the
                             * optimizer's memory estimate reading them (it still ends
                             * with the compared iterations; a window whose first
                             * compared iteration is the first starts at the trace's
                             * start whatever this says) */
    int fold;               /* non-zero: fold alike ranks while reading (see above) */
    const job_share *share; /* NULL: this process reads every rank; else shared reading
                             * (see above) */
} job_options;

/* The meta keys read of a loaded rank (job_rank_meta), by the replay, the optimizer and
 * the commands: the one list of them. Under shared reading they are the only ones a
 * rank's reader carries to process 0 from the process that opened its file
 * (job_share.c), so a key read through job_rank_meta arrives there; the rank, world
 * size and job id, read as the files are opened, travel with the files' outcomes. */
typedef enum job_meta_key {
    JOB_META_HOST,              /* job_rank.host: hostshare.c, the report */
    JOB_META_SOURCE,            /* a legacy import (build.c) */
    JOB_META_HOST_CPUS,         /* the host-share model (hostshare.c) */
    JOB_META_CPU_SAMPLES,       /* its samples (hostshare.c) */
    JOB_META_COMMAND,           /* the framework (optimizer/framework_detect.c) */
    JOB_META_HOST_CPU_LIST,     /* the host-share model: which CPUs (hostshare.c) */
    JOB_META_HOST_CPU_LIST_END, /* ... which CPUs at the end, where the job rebound itself */
    JOB_META_KEYS               /* their count */
} job_meta_key;

/* job.c: the names of the meta keys, in job_meta_key's order, then NULL (for
 * dpro_reader_pack's meta_keys). */
extern const char *const job_meta_names[JOB_META_KEYS + 1];

/* Rank jr's meta value of key k (jr's reader holds it), or NULL: jr has no reader, its
 * trace has no such meta, or k is not a job_meta_key. */
const char *job_rank_meta(const job_rank *jr, job_meta_key k);

/* The meta keys read of a loaded rank only by the measured Chrome export (dpro-export,
 * one process), not carried to process 0 under --mpi: a rank's thread_sched can be
 * megabytes. A reader from another process has none of them. */
typedef enum job_local_meta_key {
    JOB_LOCAL_META_THREAD_SCHED, /* the threads' scheduler samples (chrome.c) */
    JOB_LOCAL_META_KEYS          /* their count */
} job_local_meta_key;

/* job.c: their names, in job_local_meta_key's order, then NULL. */
extern const char *const job_local_meta_names[JOB_LOCAL_META_KEYS + 1];

/* Rank jr's meta value of local key k, or NULL: jr has no reader, its trace (or, under
 * --mpi, the reader process 0 received) has no such meta, or k is not a
 * job_local_meta_key. */
const char *job_rank_meta_local(const job_rank *jr, job_local_meta_key k);

/* Rank jr's meta value of key k as an integer, or dflt (absent or not a number, as
 * dpro_reader_meta_int). */
int64_t job_rank_meta_int(const job_rank *jr, job_meta_key k, int64_t dflt);

/* Loads the traces under path (a directory or one file). opts may be NULL (every event,
 * threads as CPUs). On failure returns a dpro_status < 0 and writes what is wrong into
 * errbuf; on success returns 0 and *j must be freed with job_free. */
int job_load(const char *path, const job_options *opts, job *j, char *errbuf, size_t errlen);

void job_free(job *j);

/* Frees what *a holds and a itself (a may be NULL). Cannot fail. */
void job_align_part_free(job_align_part *a);

/* Drops what another process took from jr's events (jr->align, jr->iters): for a caller
 * that replaces or reduces them. Cannot fail. */
void job_rank_forget(job_rank *jr);

/* Makes jr->events hold rank jr's events: expanded from their compact form when they
 * are held so (jr->wire) and not expanded yet; else nothing to do. Returns 0, or -1 out
 * of memory. */
int job_rank_expand(job_rank *jr);

/* Gives back the expanded events of a rank held compact (jr->wire), for a pass done
 * reading them (job_rank_expand makes them again); a rank held expanded keeps them.
 * Cannot fail. */
void job_rank_compact(job_rank *jr);

/* Holds rank jr's events expanded from now on when they are (their compact form given
 * back): for a caller that reads them on. Cannot fail. */
void job_rank_hold(job_rank *jr);

/* Keeps of rank jr's loaded events only the markers (iteration markers, host ranges) and
 * the memory events, in order, and gives the others' memory back (job_trim on j). For a
 * caller that has built its graph and reads the events no further but for those (the
 * critical path's host ranges, the Chrome export's ranges and memory counters:
 * replay_options.release_events). Event indexes taken before it no longer hold. Cannot
 * fail. */
void job_rank_keep_ranges(job *j, job_rank *jr);

/* Counts freed bytes in j and, once 16 MiB of them await it, gives the heap's free pages
 * back to the system (malloc_trim, where glibc has it): memory freed in the reading
 * threads' arenas is not reused by the main thread's allocations. Cannot fail. */
void job_trim(job *j, size_t freed);

/* Records a warning in j->diag and prints it. */
void job_warn(job *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
