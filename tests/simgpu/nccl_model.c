/* nccl_model.c: NCCL as the world runs it (world.h).  The algorithm and protocol are chosen
 * the way NCCL's tuner chooses them (src/graph/tuning.cc of NVIDIA/nccl: for each of ring
 * and tree x LL, LL128, Simple a latency and a bus bandwidth, the time latency + size /
 * bandwidth, the lowest wins); the constants below are the tuner's defaults.  What the
 * collective then really takes is the same structure with the world's hidden figures:
 * achieved link bandwidth, per-protocol efficiency, a latency scale, and a bandwidth that
 * ramps up with the message size (channels in use, pipeline fill). */
#include <math.h>
#include <string.h>

#include "world.h"

/* NCCL's tuner defaults (microseconds, GB/s): [algo tree, ring][proto LL, LL128, Simple]. */
static const double k_base_lat[2][3] = {{6.8, 14.0, 8.4}, {6.6, 14.0, 8.4}};
static const double k_hw_nvlink[2][3] = {{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}};
static const double k_hw_net[2][3] = {{5.0, 8.5, 14.0}, {2.7, 4.0, 14.0}};
/* [arch Ampere, Hopper][nodes 1, 2, >2]; beyond one node LL's cap is the CPU's (Intel). */
static const double k_ll_max[2][3] = {{87.7, 39.0, 20.4}, {141.0, 39.0, 20.4}};
static const double k_ring_ll128_ch[2] = {20.0, 36.7};
static const double k_tree_ch[2][3] = {{24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};
static const double k_tree_ll128_ch[2][3] = {{20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
/* Bytes per rank and channel below which NCCL uses fewer channels (the true ramp). */
static const double k_chunk_min[3] = {4096, 16384, 65536};

const char *
simgpu_algo_name(int algo)
{
    return algo == SIMGPU_ALGO_TREE ? "TREE" : "RING";
}

const char *
simgpu_proto_name(int proto)
{
    return proto == SIMGPU_PROTO_LL ? "LL" : proto == SIMGPU_PROTO_LL128 ? "LL128" : "SIMPLE";
}

static int
log2i(int n)
{
    int l = 0;
    while (n > 1) {
        n >>= 1;
        l++;
    }
    return l;
}

static int
coll_steps(int coll, int n)
{
    if (coll == SIMGPU_COLL_ALLREDUCE)
        return 2 * (n - 1);
    if (coll == SIMGPU_COLL_ALLGATHER || coll == SIMGPU_COLL_REDUCESCATTER)
        return n - 1;
    return n;
}

/* Bus bandwidth of (algo, proto) over a link of `link` GB/s with nch channels. */
static double
bus_bw(int a, int p, int coll, double link, int nch, int nnodes, int arch)
{
    int i2 = nnodes <= 2 ? nnodes - 1 : 2;
    double bw = link, llmax = k_ll_max[arch][i2];
    if (a == SIMGPU_ALGO_RING && p == SIMGPU_PROTO_LL)
        bw = fmin(llmax, bw * 0.5);
    if (a == SIMGPU_ALGO_RING && p == SIMGPU_PROTO_LL128)
        bw = fmin(bw * 0.92, nch * k_ring_ll128_ch[arch]);
    if (a == SIMGPU_ALGO_TREE && coll == SIMGPU_COLL_ALLREDUCE)
        bw = fmin(bw * 0.92, nch * k_tree_ch[arch][i2]);
    if (a == SIMGPU_ALGO_TREE && p == SIMGPU_PROTO_LL)
        bw = fmin(bw / 3.8, llmax);
    if (a == SIMGPU_ALGO_TREE && p == SIMGPU_PROTO_LL128)
        bw = fmin(bw * (nnodes == 1 ? 7.0 / 9.0 : 120.0 / 128.0), nch * k_tree_ll128_ch[arch][i2]);
    return bw;
}

/* The latency of (algo, proto), us: the tuner's, or (truth) with the NVLink hops at the
 * profile's NVLink latency (the tuner's constants assume 0.6 us). */
static double
tuner_lat(const struct simgpu_world *w, int a, int p, int coll, int n, int nnodes, int truth)
{
    int nsteps = coll_steps(coll, n), ppn = n / nnodes;
    double lat = k_base_lat[a][p],
           intra = k_hw_nvlink[a][p] * (truth ? w->prof->nvlink_lat_us / 0.6 : 1.0);
    double inter = (ppn == 1 ? k_hw_net[SIMGPU_ALGO_TREE][p] : k_hw_net[a][p]) + w->prof->ib_lat_us;
    if (p == SIMGPU_PROTO_SIMPLE)
        inter += w->prof->ib_lat_us; /* the flush */
    if (a == SIMGPU_ALGO_TREE) {
        lat += 2 * ((ppn - 1) * intra + log2i(nnodes) * inter);
    } else if (coll == SIMGPU_COLL_BROADCAST || coll == SIMGPU_COLL_REDUCE) {
        lat += nsteps * (nnodes > 1 ? k_hw_net[a][p] : intra);
    } else if (nnodes > 1) {
        /* Inter-node rings pay the network's post overhead at every step too. */
        double overhead = p == SIMGPU_PROTO_SIMPLE ? 3.0 : 1.0;
        int ninter = coll == SIMGPU_COLL_ALLREDUCE ? 2 * (nnodes - 1) : nnodes - 1;
        lat += (nsteps - ninter) * fmax(intra, overhead) + ninter * inter;
    } else {
        lat += nsteps * intra;
    }
    return lat;
}

/* Algorithm bandwidth from bus bandwidth.  Trees fall short of their model at medium
 * sizes (NCCL corrects its tuner with a table, lowest between 64 KiB and 2 MiB): here a
 * dip of per-protocol depth centred on 512 KiB. */
static double
alg_bw(int a, int p, int coll, double busbw, int n, uint64_t bytes)
{
    static const double depth[3] = {0.6, 0.4, 0.5};
    double x;
    if (a == SIMGPU_ALGO_RING)
        return busbw * n / coll_steps(coll, n);
    x = (log2((double)bytes + 1) - 19.0) / 3.0;
    return busbw * 0.5 * (1 - depth[p] * exp(-x * x));
}

/* What the world really delivers for (a, p), given the tuner's latency (us). */
static void
true_time(const struct simgpu_world *w, int a, int p, int coll, uint64_t bytes, int n, int nnodes,
          double link, double lat_us, struct simgpu_nccl_plan *pl)
{
    double eff = nnodes > 1 ? w->ib_eff : w->link_eff;
    double busbw = bus_bw(a, p, coll, link * eff, w->nchannels, nnodes, w->prof->arch);
    double used = (double)bytes / ((double)n * k_chunk_min[p]);
    double bw;
    if (used > w->nchannels)
        used = w->nchannels;
    if (used < 1)
        used = 1;
    /* A channel drives more than its share of the link: a quarter of the channels fill it. */
    busbw *= w->proto_eff[p] * fmin(1.0, 4 * used / w->nchannels);
    bw = alg_bw(a, p, coll, busbw, n, bytes) * (double)bytes / ((double)bytes + w->fill_bytes);
    pl->lat_ns = lat_us * w->lat_scale * 1000;
    pl->time_ns = pl->lat_ns + (bw > 0 ? (double)bytes / bw : 0);
}

/* Point to point: NCCL's LL up to 16 KiB (NCCL_P2P_LL_THRESHOLD), else Simple, over
 * NVLink within a node and the NIC across. */
static void
p2p_plan(const struct simgpu_world *w, uint64_t bytes, int same_node, struct simgpu_nccl_plan *pl)
{
    int p = bytes <= 16384 ? SIMGPU_PROTO_LL : SIMGPU_PROTO_SIMPLE;
    double plink = same_node ? w->prof->nvlink_gbps : w->prof->ib_gbps;
    double hw = same_node ? k_hw_nvlink[SIMGPU_ALGO_RING][p] * w->prof->nvlink_lat_us / 0.6
                          : k_hw_net[SIMGPU_ALGO_RING][p] + w->prof->ib_lat_us;
    double bw = plink * (same_node ? w->link_eff : w->ib_eff) * w->proto_eff[p] *
                (p == SIMGPU_PROTO_LL ? 0.5 : 1.0);
    pl->proto = p;
    pl->nsteps = 1;
    pl->tuner_ns = (k_base_lat[SIMGPU_ALGO_RING][p] + hw) * 1000 + (double)bytes / plink;
    pl->lat_ns = (k_base_lat[SIMGPU_ALGO_RING][p] + hw) * w->lat_scale * 1000;
    pl->time_ns = pl->lat_ns + (bytes ? ((double)bytes + w->fill_bytes) / bw : 0);
}

/* A collective on n > 1 ranks over nnodes nodes: the tuner's pick, then the truth. */
static void
coll_plan(const struct simgpu_world *w, int coll, uint64_t bytes, int n, int nnodes,
          struct simgpu_nccl_plan *pl)
{
    double link = nnodes > 1 ? w->prof->ib_gbps : w->prof->nvlink_gbps, best = -1;
    for (int a = SIMGPU_ALGO_TREE; a <= SIMGPU_ALGO_RING; a++) {
        if (a == SIMGPU_ALGO_TREE && coll != SIMGPU_COLL_ALLREDUCE)
            continue;
        for (int p = SIMGPU_PROTO_LL; p <= SIMGPU_PROTO_SIMPLE; p++) {
            double busbw = bus_bw(a, p, coll, link, w->nchannels, nnodes, w->prof->arch);
            double lat = tuner_lat(w, a, p, coll, n, nnodes, 0);
            double t = lat * 1000 + (double)bytes / alg_bw(a, p, coll, busbw, n, bytes);
            if (best < 0 || t < best) {
                best = t;
                pl->algo = a;
                pl->proto = p;
            }
        }
    }
    pl->tuner_ns = best;
    pl->nsteps = pl->algo == SIMGPU_ALGO_RING               ? coll_steps(coll, n)
                 : 2 * (n / nnodes - 1 + log2i(nnodes)) > 0 ? 2 * (n / nnodes - 1 + log2i(nnodes))
                                                            : 1;
    true_time(w, pl->algo, pl->proto, coll, bytes, n, nnodes, link,
              tuner_lat(w, pl->algo, pl->proto, coll, n, nnodes, 1), pl);
}

void
simgpu_nccl_plan(const struct simgpu_world *w, int coll, uint64_t bytes, int nranks, int same_node,
                 struct simgpu_nccl_plan *pl)
{
    int n = nranks > 0 ? nranks : 1, gpn = w->gpus_per_node, nnodes = (n + gpn - 1) / gpn;
    memset(pl, 0, sizeof(*pl));
    pl->nnodes = nnodes;
    pl->algo = SIMGPU_ALGO_RING;
    pl->proto = SIMGPU_PROTO_SIMPLE;
    if (coll == SIMGPU_COLL_P2P) {
        p2p_plan(w, bytes, same_node, pl);
    } else if (n == 1) {
        /* One rank: a local copy of the buffer. */
        pl->nsteps = 1;
        pl->lat_ns = pl->tuner_ns = 2000 * w->lat_scale;
        pl->time_ns = pl->lat_ns + (double)bytes / (w->prof->hbm_gbps * w->eff_mem / 2);
    } else {
        coll_plan(w, coll, bytes, n, nnodes, pl);
    }
}

double
simgpu_nccl_exit_early_ns(const struct simgpu_world *w, const struct simgpu_nccl_plan *p, int rank,
                          int nranks, uint64_t seq)
{
    double step = p->nsteps > 0 ? p->time_ns / p->nsteps : 0, early = 0;
    double room = 0.9 * (p->time_ns - p->lat_ns);
    uint64_t n = nranks > 1 ? (uint64_t)nranks : 1;
    int k = (int)(((uint64_t)rank + n - seq % n) % n); /* place in this instance's rotation */
    if (nranks <= 1 || p->nsteps < 1) {
        early = 0; /* nobody to wait for: one instant */
    } else if (p->algo == SIMGPU_ALGO_RING) {
        /* The last step's data goes round the ring: rank k of the rotation gets it k steps
         * after the first. */
        early = w->skew_frac * step * (double)(nranks - 1 - k) / (nranks - 1);
    } else {
        /* The tree's broadcast phase reaches the leaves last. */
        int levels = log2i(nranks) > 0 ? log2i(nranks) : 1;
        early = w->skew_frac * step * (double)(levels - log2i(k + 1)) / levels;
    }
    if (early > room)
        early = room > 0 ? room : 0;
    return early;
}
