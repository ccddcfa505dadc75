/*
 * internal.h: what the collector's process-wide machinery shares between its files (not
 * for hooks, which use collector.h only). Everything here is hidden.
 *
 *   core.c       settings (DPRO_*), warnings, the load-time constructor
 *   real.c       real-function lookup (coll_real)
 *   maps.c       lock-free maps of the hot path: stream ids, kernel handles
 *   ring.c       per-thread state and rings, the ring registry
 *   clock.c      TSC stamps and their conversion to CLOCK_MONOTONIC
 *   output.c     the trace file: its name, directory and meta rows
 *   convert.c    records -> dpro events (writer thread)
 *   umap.c       the writer thread's growing maps (coll_umap)
 *   writer.c     the writer thread: drain, flush, finish; exit
 *   lifecycle.c  SIGTERM, fork, exec
 *   cpuuse.c     the host's CPUs and the process's CPU time (meta rows at the finish)
 *   threadsched.c  per traced thread, its schedstat samples (meta thread_sched)
 */
#ifndef DPRO_COLLECTOR_INTERNAL_H
#define DPRO_COLLECTOR_INTERNAL_H

#include <pthread.h>
#include <sys/types.h>

#include "collector.h"

/* ---- core.c ------------------------------------------------------------------------- */

/* Prints one line "dpro-collector: ..." on stderr (no allocation, one write). */
COLL_HIDDEN void coll_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Returns the integer value of env variable name, or dflt when unset or not a number. */
COLL_HIDDEN long coll_env_long(const char *name, long dflt);

/* Returns 0 for "0", "no", "off", "false", 1 for other values, dflt when unset. */
COLL_HIDDEN int coll_env_bool(const char *name, int dflt);

/* DPRO_TEST_CLOCK_OFFSET_NS (testing only): signed ns added to every timestamp this
 * process writes (events and the monotonic halves of the clock anchors), as if its
 * CLOCK_MONOTONIC were skewed; lets the replay's clock alignment be tested on one host. */
COLL_HIDDEN extern int64_t coll_test_clock_offset_ns;

/* The trace's clock now, us: CLOCK_MONOTONIC with the test offset, as the writer's samples
 * (cpu_samples, thread_sched) stamp it. */
static inline int64_t
coll_sample_now_us(void)
{
    return (int64_t)(coll_now() / 1000) + coll_test_clock_offset_ns / 1000;
}

/* DPRO_TEST_DRAIN_PAUSE_MS (testing only): while the process has no trace file yet, the
 * writer thread waits this long after each look that finds no record, before its drain:
 * widens the moment in which a thread's first record may come in (test-hardening.py). */
COLL_HIDDEN extern uint32_t coll_test_drain_pause_ms;
COLL_HIDDEN extern long coll_test_start_fails;
COLL_HIDDEN extern uint32_t coll_test_finish_pause_ms;
COLL_HIDDEN extern uint32_t coll_test_cupti_queue_max;

/* DPRO_OUTPUT does not fit coll_cfg.output: the process records nothing. */
COLL_HIDDEN extern int coll_output_too_long;

/* ---- maps.c ------------------------------------------------------------------------- */

/* Lock-free map of the hot path: open addressing over a fixed array; keys are inserted once
 * by CAS and never removed; values may be overwritten (0 means unknown). Full map: lookups
 * miss, nothing breaks. */
#define COLL_MAP_SIZE 4096

struct coll_map {
    _Atomic uint64_t key[COLL_MAP_SIZE];
    _Atomic uint64_t val[COLL_MAP_SIZE];
};

COLL_HIDDEN extern struct coll_map coll_kernel_map; /* cudaKernel_t -> host function */

/* Mixes a key's 64 bits for slot indices of any size: the first half of murmur3's
 * finaliser, three operations, since the hooks' lookups run it. */
static inline uint64_t
coll_mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* Mixes a key into a slot index of a COLL_MAP_SIZE map. */
static inline uint32_t
coll_map_hash(uint64_t k)
{
    return (uint32_t)coll_mix64(k) & (COLL_MAP_SIZE - 1);
}

/* Returns the value of key k (0 if unknown). */
COLL_HIDDEN uint64_t coll_map_get(struct coll_map *m, uint64_t k);

/* ---- ring.c ------------------------------------------------------------------------- */

/* 0: may create its state; 1: creating it now; 2: never records (exited, background). */
COLL_HIDDEN extern __thread int coll_tls_state __attribute__((tls_model("initial-exec")));

COLL_HIDDEN extern pthread_mutex_t coll_registry_lock;
COLL_HIDDEN extern struct coll_ring *coll_rings; /* under coll_registry_lock */
COLL_HIDDEN extern pthread_key_t coll_thread_key;
COLL_HIDDEN extern int coll_key_ok;
COLL_HIDDEN extern pid_t coll_pid; /* the process the state belongs to */

/* Called when a recording thread exits: its ring is drained, then freed, by the
 * background thread. */
COLL_HIDDEN void coll_thread_exit(void *arg);

/* ---- clock.c ------------------------------------------------------------------------ */

/* Decides whether hooks stamp with the TSC (DPRO_CLOCK=tsc|monotonic, default: the TSC
 * when the kernel's clocksource is the TSC) and takes the first anchor. */
COLL_HIDDEN void coll_tsc_init(void);

/* Re-anchors the TSC map (background thread, before each drain). */
COLL_HIDDEN void coll_tsc_anchor(void);

/* ---- output.c ----------------------------------------------------------------------- */

COLL_HIDDEN extern uint64_t coll_anchor_realtime_ns, coll_anchor_monotonic_ns;

/* Takes a (CLOCK_REALTIME, CLOCK_MONOTONIC) pair. */
COLL_HIDDEN void coll_anchor(uint64_t *realtime, uint64_t *monotonic);

/* Opens this process's trace file; NULL (warned once) when it cannot. */
COLL_HIDDEN dpro_writer *coll_open_output(void);

/* ---- cpuuse.c ----------------------------------------------------------------------- */

/* Reads the CPUs the process (its main thread) may run on, for host_cpus and
 * host_cpu_list: at load time (core.c's constructor; one sched_getaffinity, which never
 * blocks), and again from coll_cpu_reset in a forked child. */
COLL_HIDDEN void coll_cpu_note_affinity(void);

/* Forgets the samples (a new writer thread: the process's start, a forked child's) and
 * takes the first; in a forked child, reads its CPUs (coll_cpu_note_affinity). Writer
 * thread only, as are the two below. */
COLL_HIDDEN void coll_cpu_reset(void);

/* Samples the process's CPU time against CLOCK_MONOTONIC; unless force, only when the
 * last kept sample is old enough (the spacing grows as the samples fill up). */
COLL_HIDDEN void coll_cpu_sample(int force);

/* Writes the meta rows host_cpus (the CPUs the process may run on, as read at its start),
 * host_cpu_list (which ones, "0-3,8-11"), host_cpu_list_end (the process's CPUs read now,
 * only where they differ from the start's) and cpu_samples
 * ("T:C,T:C,...": CLOCK_MONOTONIC us, the process's CPU time us), a last sample taken. */
COLL_HIDDEN void coll_cpu_write_meta(dpro_writer *w);

/* ---- threadsched.c ------------------------------------------------------------------ */

/* Forgets the threads followed and their samples (a new writer thread). Writer thread
 * only, as are the two below. */
COLL_HIDDEN void coll_sched_reset(void);

/* Reads each traced thread's schedstat (time on a CPU, time waiting on a runqueue,
 * timeslices), each reading stamped with its own time (CLOCK_MONOTONIC us), unless the
 * last round was under 10 ms before t_us (force: always); a thread's sample is kept unless
 * it comes sooner than its kept samples' spacing (force: always). Called by
 * coll_cpu_sample when it takes a sample. About one open, read and close per thread. */
COLL_HIDDEN void coll_sched_sample(int64_t t_us, int force);

/* Writes the meta rows thread_sched ("TID=T:R:W:S,...;TID=...": us, us, us, count) and
 * thread_sched_dropped (threads not followed), each only when it has something. */
COLL_HIDDEN void coll_sched_write_meta(dpro_writer *w);

/* ---- convert.c / writer.c ----------------------------------------------------------- */

/* The background thread's own state (rebuilt in a forked child). */
struct coll_bg_state {
    dpro_writer *w;
    int failed;              /* the output failed: nothing more is written */
    struct coll_umap names;  /* function pointer (+flag bits) -> string id */
    struct coll_umap allocs; /* live allocation address -> size (sizes of frees) */
    struct coll_umap knames; /* CUPTI kernel name address -> struct cupti_kname * (cupti.c) */
    uint32_t api_names[COLL_API_COUNT];
};
COLL_HIDDEN extern struct coll_bg_state coll_bg;

/* What coll_event_next hands out with no writer or after an output error: the conversion
 * fills it as it would a slot of the batch, and coll_event_keep drops it. */
COLL_HIDDEN extern dpro_event coll_scratch_event;

/* Returns coll_scratch_event, zeroed. */
COLL_HIDDEN dpro_event *coll_event_scratch(void);

/* Stops recording after an output error (warned once). */
COLL_HIDDEN void coll_output_failed(dpro_writer *w, const char *what);

/* Returns the event to fill for the next append, zeroed: the writer's own next slot
 * (dpro_writer_next_event: no copy), or coll_scratch_event with no writer or after an
 * output error (a failed dpro_writer_next_event stops recording). Between this and
 * coll_event_keep the caller may intern and add rows on w, nothing else. Inline, as is
 * coll_event_keep: they run for every event. Background thread only. */
static inline dpro_event *
coll_event_next(dpro_writer *w)
{
    dpro_event *ev = NULL;
    if (w != NULL && !coll_bg.failed && dpro_writer_next_event(w, &ev) != DPRO_OK)
        coll_output_failed(w, "writing the trace");
    return ev ? ev : coll_event_scratch();
}

/* Appends the event coll_event_next returned, as filled (shifted by the tests' clock
 * offset); on a write error stops recording. */
static inline void
coll_event_keep(dpro_writer *w, dpro_event *ev)
{
    if (ev == &coll_scratch_event)
        return;
    if (coll_test_clock_offset_ns != 0) {
        ev->start_ns = (uint64_t)((int64_t)ev->start_ns + coll_test_clock_offset_ns);
        ev->end_ns = (uint64_t)((int64_t)ev->end_ns + coll_test_clock_offset_ns);
    }
    if (dpro_writer_keep_event(w) != DPRO_OK)
        coll_output_failed(w, "writing the trace");
}

/* Turns one record (and its continuation bytes) into events. */
COLL_HIDDEN void coll_convert(dpro_writer *w, const struct coll_rec *r, uint32_t tid,
                              const unsigned char *cont, size_t cont_len);

/* Held by the writer thread while it works (opening the file, draining, converting, SQLite,
 * zlib, malloc), released while it sleeps: fork takes it so that the child is never born
 * with one of those libraries' locks held by a thread it does not have. */
COLL_HIDDEN extern pthread_mutex_t coll_work_lock;
/* Forks waiting for coll_work_lock (coll_fork_prepare): while any waits, the writer thread
 * takes up no new piece of work, so that a loaded host's writer, which takes the lock again
 * 1 ms after releasing it (DPRO_DRAIN_MS=1), cannot keep a fork from it past its 5 s. */
COLL_HIDDEN extern _Atomic int coll_forks_waiting;

/* Writer-thread synchronisation (writer.c). */
COLL_HIDDEN extern pthread_mutex_t coll_bg_lock;
COLL_HIDDEN extern pthread_cond_t coll_bg_done;
COLL_HIDDEN extern int coll_bg_running;        /* under coll_bg_lock */
COLL_HIDDEN extern int coll_bg_mode;           /* under coll_bg_lock: writer.c */
COLL_HIDDEN extern uint64_t coll_flush_asked;  /* under coll_bg_lock: flush requests */
COLL_HIDDEN extern uint64_t coll_flush_served; /* under coll_bg_lock */
COLL_HIDDEN extern _Atomic int coll_bg_stop;   /* ask the thread to finish and close */
COLL_HIDDEN extern _Atomic int coll_bg_finished;
/* Set by the writer thread once past its start (its runtime's set-up and its own, which
 * allocate), cleared before one is created: coll_fork_prepare waits for it. */
COLL_HIDDEN extern _Atomic int coll_bg_started;
COLL_HIDDEN extern _Atomic int coll_sigterm_flag;
COLL_HIDDEN extern pthread_once_t coll_process_once;

/* (Re)initialises coll_bg_wake so that its timed waits use CLOCK_MONOTONIC. */
COLL_HIDDEN void coll_wake_init(void);

/* Once per process (and again in a forked child): CUPTI, the exit handler. */
COLL_HIDDEN void coll_process_start(void);

/* Starts the background thread if it is not running. */
COLL_HIDDEN void coll_bg_ensure(void);

/* ---- lifecycle.c -------------------------------------------------------------------- */

/* Installs the SIGTERM flush handler, unless the job already handles SIGTERM. */
COLL_HIDDEN void coll_install_sigterm(void);

/* atfork handlers. */
COLL_HIDDEN void coll_fork_prepare(void);
COLL_HIDDEN void coll_fork_parent(void);
COLL_HIDDEN void coll_fork_child(void);

/* Resolves the real exec* functions (load time: never in a vfork child). */
COLL_HIDDEN void coll_exec_resolve(void);

#endif /* DPRO_COLLECTOR_INTERNAL_H */
