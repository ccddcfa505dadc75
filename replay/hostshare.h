/*
 * hostshare.h: ranks sharing a host's CPUs (prefix hostshare_), the host-share model of
 * --what-if-ranks (docs/models.md, "Ranks sharing a host's CPUs").
 *
 * What the collector records of each rank's host (meta rows host_cpus, host_cpu_list,
 * cpu_samples, host; docs/format.md) gives, per rank, its CPU demand: the CPU seconds its process
 * used per second over the compared iterations (its host threads, the framework's, the
 * driver's, the communication library's proxies); the graph gives the share of that
 * window during which its host threads work (the union of its host calls' own durations
 * and the framework time before them). Data-parallel ranks work on the host at the same
 * moments (they leave the same collective and run the same steps), so what a host must
 * serve is their burst demand, demand / busy share, at once: a host's load is the sum of
 * its ranks' burst demands over its cores (the CPUs its ranks may run on: the union of
 * their sets, so ranks bound to a core each still count the host's cores), and above 1 its
 * ranks' host work runs that much slower. Putting K ranks on a host at N ranks makes its
 * load K x its traced ranks' mean burst demand / its cores; each traced rank's host time
 * (the host calls' own durations and the framework time between them) then scales by
 * max(1, load at N) / max(1, traced load).
 */
#ifndef DPRO_REPLAY_HOSTSHARE_H
#define DPRO_REPLAY_HOSTSHARE_H

#include <stddef.h>
#include <stdint.h>

#include "replay.h"

/* The most CPU ids a host_cpu_list may name, ids 0 .. HOSTSHARE_CPU_MAX - 1: Linux's largest
 * NR_CPUS (CONFIG_MAXSMP). */
#define HOSTSHARE_CPU_MAX 8192

/* One host's CPUs as its ranks' traces tell them: the union of their host_cpu_list sets,
 * and the most host_cpus of any (what older traces give). Zeroed before the first
 * hostshare_cpus_add. */
typedef struct hostshare_cpus {
    uint64_t set[HOSTSHARE_CPU_MAX / 64]; /* the union of the ranks' lists */
    int64_t most;                         /* the most host_cpus of the ranks */
    int32_t ranks;                        /* ranks added */
    int32_t listed;                       /* ... of them with a usable host_cpu_list */
} hostshare_cpus;

typedef struct hostshare {
    int known;               /* 1: every present rank's demand and host cores are known */
    int32_t n_ranks;         /* entries of the arrays below (the job's world) */
    double *demand;          /* per rank: CPU s per s over its window; < 0: unknown/absent */
    double *cores;           /* per rank: its host's CPUs (host_cpus below) */
    int32_t *host;           /* per rank: its host's index (the host meta row), -1: absent */
    double *factor;          /* per rank: its host time's scale (hostshare_at; 1 before) */
    double *busy;            /* per rank: the share of its window its host threads work
                              * (0: unknown; its burst demand is then its demand) */
    int32_t n_hosts;         /* hosts of the present ranks */
    double *host_cpus;       /* per host: its CPUs, the count of the union of its ranks'
                              * host_cpu_list sets when each has a usable one, else the
                              * most host_cpus of its ranks (older traces) */
    int32_t hosts_listed;    /* hosts whose CPUs are their ranks' lists' union */
    char cpus_note[256];     /* a host_cpu_list not used (file, what is wrong), or "" */
    int32_t per_host_traced; /* the most traced ranks on one host */
    int32_t per_host_to;     /* ranks per host at the what-if's rank count (hostshare_at) */
    double mean_demand;      /* over the present ranks */
    double mean_busy;        /* over the present ranks */
    double load_traced;      /* the most loaded host's load in the trace */
    double load_to;          /* ... at the what-if's rank count (hostshare_at) */
    double factor_max;       /* the largest entry of factor */
    double *stall;           /* the traced stalls, ns (thread_stalls), in no order */
    int32_t *stall_node;     /* ... each one's host node (rp's graph) */
    size_t n_stall, cap_stall;
    double stall_window_ns; /* the compared windows' length, summed over the present ranks */
    double slice_ns;        /* a timeslice (hostshare_slice) */
    int slice_learned;      /* hostshare_slice's rc: 1 the median of the traced stalls within
                             * the base slice, 2 of fewer with the base slice one more, 0 the
                             * base slice */
    size_t n_stall_long;    /* traced stalls over the base slice: the machine's other work */
    double stall_p;         /* at n_to: the chance a rank's arrival is stalled (hostshare_at) */
    double stall_ns;        /* ... and the longest stall, the stall uniform up to it */
    char why[256];          /* when !known: what is missing, and where */
} hostshare;

/* Parses s, Linux's cpulist text ("0-3,8-11": ids and ranges a-b, a <= b, comma-separated,
 * each id below HOSTSHARE_CPU_MAX), into set (HOSTSHARE_CPU_MAX bits, cleared first).
 * Returns the CPUs named (at least 1), or -1 when s is NULL, empty or malformed, with why
 * (n bytes) saying what is wrong; set is then empty. */
int hostshare_parse_cpu_list(const char *s, uint64_t *set, char *why, size_t n);

/* Adds a rank's host_cpus count and host_cpu_list text (list NULL: its trace has none, an
 * older collector) to its host's h. Returns 0, or -1 when list is present but unusable:
 * malformed (hostshare_parse_cpu_list) or naming another count than count (> 0); why (n
 * bytes) says what, and the host's CPUs are then its ranks' most count. */
int hostshare_cpus_add(hostshare_cpus *h, int64_t count, const char *list, char *why, size_t n);

/* The host's CPUs: the count of the union of its ranks' lists when every rank added had a
 * usable one, else the most host_cpus of its ranks (0 when none). */
int64_t hostshare_cpus_count(const hostshare_cpus *h);

/* A host node's time over the median of its place, from which it is a stall: a thread
 * that lost its core for a timeslice (Linux's shortest base slice is 0.75 ms). */
#define HOSTSHARE_STALL_MIN_NS 500e3
/* Fewest traced stalls within the base slice the timeslice is their median from (fewer
 * count with the base slice: hostshare_slice). */
#define HOSTSHARE_STALL_MIN_COUNT 8

/* The scheduler's base slice on a host of `cores` CPUs, ns: Linux's sched_base_slice
 * scaling, 0.75 ms x (1 + log2 of the CPUs, at most 8), so 0.75 ms on 1 CPU, 1.5 ms on 2,
 * 3 ms from 8 on (below 1 CPU: 1). */
double hostshare_base_slice_ns(double cores);

/* The timeslice from n traced stalls (ns, any order; stall is not changed) on hosts of at
 * most `cores` CPUs, in *slice_ns: the (upper) median of the k stalls at or below the base
 * slice (hostshare_base_slice_ns) when k >= HOSTSHARE_STALL_MIN_COUNT; from 2 to fewer,
 * the median of those k and the base slice counted as one more value (the scheduler's
 * own setting as a prior worth one stall: with few stalls the estimate sits at most one
 * rank above their upper median, toward the base slice, and never above it); else (0 or
 * 1) the base slice. A thread that waits while others run their slices waits about one; a stall
 * longer than the base slice is the machine's other work holding the core (a thread bound
 * to that core cannot move off it and waits as long as that work, tens of ms), not a
 * timeslice: *n_long counts those. Returns 1 when *slice_ns is the stalls' median, 2 when
 * it is the median of fewer with the base slice, 0 when it is the base slice, -1 out of
 * memory (*slice_ns the base slice, *n_long 0). */
int hostshare_slice(const double *stall, size_t n, double cores, double *slice_ns, size_t *n_long);

/* Measures each present rank's CPU demand over its compared iterations (rp simulated:
 * replay_iteration_times) from its trace's cpu_samples, and its host and its host's CPUs
 * (hostshare_cpus_count over the host's ranks; hs->cpus_note says when a list was not
 * used); and its
 * host threads' stalls (calls over the median of their place by HOSTSHARE_STALL_MIN_NS),
 * taken out of its busy share, and from them the timeslice (hs->slice_ns, hostshare_slice). Returns
 * 0 (hs->known 0 and hs->why saying what was missing when a present rank's trace lacks
 * the rows or they do not cover half its window: a trace of an older collector), -1 out
 * of memory, -2 when a trace's cpu_samples is malformed (hs->why names the file and the
 * sample). hostshare_free frees hs in every case. */
int hostshare_measure(const replay *rp, hostshare *hs);

/* The factors at n_to ranks with per_host of them on each host (0: the traced layout,
 * every host keeping its ranks), the hosts having their traced cores. Each factor is
 * max(1, load at n_to) / max(1, traced load) of its rank's host. And the stalls at n_to
 * (the most loaded host's): a thread at load L > 1 runs a timeslice (hs->slice_ns) in
 * every L, its core taken for L - 1 slices between, so at a random moment (a rank
 * reaching a collective) it waits with probability 1 - 1/L, for the rest of its off
 * slices: uniform up to (L - 1) slices. With the traced load L' (1 when below) already in
 * the traced arrivals, hs->stall_p is 1 - L'/L and hs->stall_ns (L - L') slices (0, 0
 * when L <= L'). Returns 0, or -1 when per_host is below 0 or above n_to, or hs is not
 * known. */
int hostshare_at(hostshare *hs, int32_t per_host, int32_t n_to);

/* Scales every host node's duration and gap in g (a copy of the measured graph: the same
 * nodes) by its rank's factor (g's ranks are rp's: a folded class by its
 * representative's), all but the traced stalls: a node with a stall x keeps x as traced and
 * its work, the rest, scaled (a stall is the scheduler's time for other threads, which
 * the factor already gives the work; stretched, a host hiccup of the machine's other
 * load would count factor times in the mean). Returns the nodes changed, or -1 when a
 * duration overflows. */
int64_t hostshare_apply(const hostshare *hs, dfg *g);

void hostshare_free(hostshare *hs);

#endif
