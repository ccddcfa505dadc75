/*
 * hostshare.h: ranks sharing a host's CPUs (prefix hostshare_), the host-share model of
 * --what-if-ranks (docs/models.md, "Ranks sharing a host's CPUs").
 *
 * What the collector records of each rank's host (meta rows host_cpus, cpu_samples,
 * host; docs/format.md) gives, per rank, its CPU demand: the CPU seconds its process
 * used per second over the compared iterations (its host threads, the framework's, the
 * driver's, the communication library's proxies); the graph gives the share of that
 * window during which its host threads work (the union of its host calls' own durations
 * and the framework time before them). Data-parallel ranks work on the host at the same
 * moments (they leave the same collective and run the same steps), so what a host must
 * serve is their burst demand, demand / busy share, at once: a host's load is the sum of
 * its ranks' burst demands over its cores (the CPUs its ranks may run on), and above 1 its
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

typedef struct hostshare {
    int known;               /* 1: every present rank's demand and host cores are known */
    int32_t n_ranks;         /* entries of the arrays below (the job's world) */
    double *demand;          /* per rank: CPU s per s over its window; < 0: unknown/absent */
    double *cores;           /* per rank: its host's cores (the most any of its ranks has) */
    int32_t *host;           /* per rank: its host's index (the host meta row), -1: absent */
    double *factor;          /* per rank: its host time's scale (hostshare_at; 1 before) */
    double *busy;            /* per rank: the share of its window its host threads work
                              * (0: unknown; its burst demand is then its demand) */
    int32_t n_hosts;         /* hosts of the present ranks */
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
    double slice_ns;        /* a timeslice: the traced stalls' median, or the default */
    int slice_learned;      /* 1: slice_ns is the traced stalls' median */
    double stall_p;         /* at n_to: the chance a rank's arrival is stalled (hostshare_at) */
    double stall_ns;        /* ... and the longest stall, the stall uniform up to it */
    char why[256];          /* when !known: what is missing, and where */
} hostshare;

/* A host node's time over the median of its place, from which it is a stall: a thread
 * that lost its core for a timeslice (Linux's shortest base slice is 0.75 ms). */
#define HOSTSHARE_STALL_MIN_NS 500e3
/* Fewest traced stalls the timeslice is learned from. */
#define HOSTSHARE_STALL_MIN_COUNT 8

/* Measures each present rank's CPU demand over its compared iterations (rp simulated:
 * replay_iteration_times) from its trace's cpu_samples, and its host and cores; and its
 * host threads' stalls (calls over the median of their place by HOSTSHARE_STALL_MIN_NS),
 * taken out of its busy share, and from them the timeslice (hs->slice_ns). Returns
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
