/*
 * dpro-replay.h: what dpro-replay's option parsing and its printers share (the command is
 * dpro-replay.c; its --json writer is dpro-replay-json.c).
 */
#ifndef DPRO_TOOLS_DPRO_REPLAY_H
#define DPRO_TOOLS_DPRO_REPLAY_H

#include <stdint.h>

#include "replay/hostshare.h"
#include "replay/replay.h"

/* What the command was asked. */
typedef struct args {
    replay_options ro;
    int as_json, show_cp, top, force, partial;
    int quiet; /* -q: only the final figure (or the JSON), and errors */
    int mpi;   /* --mpi */
    const char *chrome;
    double kscale;                         /* --what-if-scale-kernels, 0: none */
    const char *kclass;                    /* --what-if-class, NULL: every kernel */
    int32_t slow_gpu_rank, slow_host_rank; /* --what-if-slow-rank/-host, -1: none */
    double slow_gpu, slow_host;            /* their factors (1: none) */
    int32_t ranks_to;                      /* --what-if-ranks, 0: none */
    int32_t per_host;                      /* --what-if-ranks-per-host, 0: as traced */
    double net_gbps, net_hop_us;           /* --what-if-network, 0: not given */
    int32_t perturb_top;                   /* --perturb, 0: no check */
    const char *dir;
} args;

/* --what-if-ranks across nodes: the traced job's hosts, the nodes at N ranks, and whether
 * the network between them was priced (--what-if-network). */
typedef struct whatif_nodes {
    int32_t traced, to;
    int priced;
} whatif_nodes;

/* One replay's figures, as the printers take them. */
typedef struct report {
    const replay *rp;
    const replay_summary *s;
    const replay_summary *ws; /* the what-if's, when have_whatif */
    int have_whatif;
    const replay_typical *typ; /* the typical-duration replay, when have_typical */
    int have_typical;
    const replay_perturbation *pt; /* --perturb, when have_perturb */
    int have_perturb;
    const hostshare *hs; /* --what-if-ranks: the host-share model (hs->known: applied) */
    const args *a;
    int64_t rank_wait_ns; /* --what-if-ranks: the wait more ranks add (replay_rank_wait) */
    whatif_nodes nodes;   /* --what-if-ranks: the node layout */
} report;

/* The name of a critical-path entry's kind (api, kernel, memcpy, memset, collective). */
const char *replay_cmd_kind_name(int k);

/* What --what-if-ranks assumes and cannot know with model m, sentence k (from 0; NULL after
 * the last). */
const char *replay_cmd_ranks_assumed(const costmodel *m, int k);

/* How the collective model m knows NCCL's algorithm and protocol: names (1) or assumed. */
const char *replay_cmd_coll_algorithm(const costmodel *m);
const char *replay_cmd_coll_protocol(const costmodel *m);

/* The text line of the host-share model hs of --what-if-ranks into buf (size n). */
void replay_cmd_host_share_line(const hostshare *hs, char *buf, size_t n);

/* Writes the --json report of rep on stdout. */
void replay_cmd_print_json(const report *rep);

#endif
