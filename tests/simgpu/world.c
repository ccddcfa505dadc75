/* world.c: the device physics of tests/simgpu (see world.h): profiles of real GPUs, the
 * hidden parameters of a world drawn from a seed, kernel, copy and launch times, and the
 * spans of work on each device that contention is computed from.  NCCL's part is in
 * nccl_model.c. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simgpu_internal.h"

/* ---- profiles (figures and their sources: README.md, "Device profiles") --------------- */
static const struct simgpu_profile g_profiles[] = {
    {"a100",
     "NVIDIA A100-SXM4-80GB",
     8,
     0,
     108,
     {19.5, 156.0, 312.0, 312.0},
     2039.0,
     80.0,
     41943040,
     1410.0,
     300.0,
     0.7,
     32.0,
     25.0,
     2.5,
     4.0,
     2,
     0},
    {"h100",
     "NVIDIA H100 80GB HBM3",
     9,
     0,
     132,
     {66.9, 494.7, 989.4, 989.4},
     3350.0,
     80.0,
     52428800,
     1980.0,
     450.0,
     0.6,
     64.0,
     50.0,
     2.5,
     3.5,
     2,
     1},
    {"h200",
     "NVIDIA H200",
     9,
     0,
     132,
     {66.9, 494.7, 989.4, 989.4},
     4800.0,
     141.0,
     52428800,
     1980.0,
     450.0,
     0.6,
     64.0,
     50.0,
     2.5,
     3.5,
     2,
     1},
};

const struct simgpu_profile *
simgpu_profile_find(const char *key)
{
    const struct simgpu_profile *p = NULL;
    for (size_t i = 0; key && i < sizeof(g_profiles) / sizeof(g_profiles[0]) && !p; i++)
        if (!strcmp(g_profiles[i].key, key))
            p = &g_profiles[i];
    return p;
}

/* ---- counter-based random numbers ------------------------------------------------------- */
static uint64_t
mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t
simgpu_hash4(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

double
simgpu_u01(uint64_t h)
{
    return ((double)(h >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

double
simgpu_normal(uint64_t h)
{
    double u1 = simgpu_u01(h), u2 = simgpu_u01(mix64(h ^ 0x5bd1e995ULL));
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double
simgpu_lognormal(double sigma, uint64_t h)
{
    return sigma > 0 ? exp(sigma * simgpu_normal(h) - sigma * sigma / 2) : 1.0;
}

/* ---- drawing a world ---------------------------------------------------------------------- */
struct draw {
    uint64_t state;
};

static double
uni(struct draw *d, double lo, double hi)
{
    d->state = mix64(d->state);
    return lo + (hi - lo) * simgpu_u01(d->state);
}

void
simgpu_world_draw(struct simgpu_world *w, const struct simgpu_profile *prof, uint64_t seed,
                  int gpus_per_node)
{
    struct draw d = {mix64(seed ^ 0x776f726c64ULL)}; /* "world" */
    memset(w, 0, sizeof(*w));
    w->prof = prof;
    w->seed = seed;
    w->gpus_per_node = gpus_per_node > 0 ? gpus_per_node : 8;
    w->eff_fp32 = uni(&d, 0.55, 0.85);
    w->eff_tensor = uni(&d, 0.45, 0.80);
    w->eff_mem = uni(&d, 0.70, 0.92);
    w->kernel_overhead_ns = uni(&d, 1500, 3500);
    w->kernel_floor_ns = uni(&d, 2000, 5000);
    w->sigma[0] = uni(&d, 0.005, 0.02);
    w->sigma[SIMGPU_CLASS_COMPUTE] = uni(&d, 0.01, 0.04);
    w->sigma[SIMGPU_CLASS_MEMORY] = uni(&d, 0.02, 0.06);
    w->sigma[SIMGPU_CLASS_LATENCY] = uni(&d, 0.04, 0.12);
    w->straggle_prob = uni(&d, 0.0005, 0.003);
    w->straggle_factor = uni(&d, 1.3, 2.5);
    w->launch_factor = uni(&d, 0.8, 1.3);
    w->launch_sigma = uni(&d, 0.05, 0.20);
    w->launch_load_k = uni(&d, 0.2, 0.6);
    w->hiccup_prob = uni(&d, 0.0002, 0.002);
    w->hiccup_mean_us = uni(&d, 200, 2000);
    w->comp_by_comm = uni(&d, 0.05, 0.30);
    w->comm_by_comp = uni(&d, 0.05, 0.40);
    w->comp_by_comp = uni(&d, 0.6, 1.0);
    w->pcie_eff = uni(&d, 0.75, 0.90);
    w->pageable_factor = uni(&d, 0.30, 0.60);
    w->copy_lat_ns = uni(&d, 1500, 3000);
    w->pageable_lat_ns = uni(&d, 5000, 15000);
    w->nchannels = (int)uni(&d, 16, 33);
    w->link_eff = uni(&d, 0.72, 0.86);
    w->ib_eff = uni(&d, 0.80, 0.93);
    w->lat_scale = uni(&d, 0.8, 1.4);
    w->proto_eff[SIMGPU_PROTO_LL] = uni(&d, 0.80, 1.05);
    w->proto_eff[SIMGPU_PROTO_LL128] = uni(&d, 0.85, 1.05);
    w->proto_eff[SIMGPU_PROTO_SIMPLE] = uni(&d, 0.90, 1.05);
    w->fill_bytes = uni(&d, 1024, 8192);
    w->skew_frac = uni(&d, 0.3, 1.0);
    w->nccl_sigma = uni(&d, 0.01, 0.05);
}

/* ---- the physics in force (environment, read once) ---------------------------------------- */
static pthread_once_t g_world_once = PTHREAD_ONCE_INIT;
static enum simgpu_physics g_physics;
static struct simgpu_world g_world;
static uint64_t g_rank;

static void
world_init(void)
{
    const char *v = getenv("SIMGPU_PHYSICS");
    const char *pk = getenv("SIMGPU_PROFILE");
    const char *rv = getenv("RANK");
    const struct simgpu_profile *prof = simgpu_profile_find(pk && *pk ? pk : "h100");
    g_physics = SIMGPU_PHYSICS_WORLD;
    if (v && !strcmp(v, "simple"))
        g_physics = SIMGPU_PHYSICS_SIMPLE;
    else if (v && *v && strcmp(v, "world"))
        fprintf(stderr, "simgpu: SIMGPU_PHYSICS=%s is neither simple nor world: world\n", v);
    if (!prof) {
        fprintf(stderr, "simgpu: SIMGPU_PROFILE=%s unknown (a100, h100, h200): h100\n", pk);
        prof = simgpu_profile_find("h100");
    }
    simgpu_world_draw(&g_world, prof, simgpu_env_whole("SIMGPU_WORLD_SEED", 0, UINT64_MAX, 1),
                      (int)simgpu_env_whole("SIMGPU_GPUS_PER_NODE", 1, 1000000, 8));
    g_rank = rv && *rv ? strtoull(rv, NULL, 10) : 0;
}

enum simgpu_physics
simgpu_physics(void)
{
    pthread_once(&g_world_once, world_init);
    return g_physics;
}

const struct simgpu_world *
simgpu_world(void)
{
    pthread_once(&g_world_once, world_init);
    return &g_world;
}

/* ---- kernels ------------------------------------------------------------------------------- */
/* The simple physics' kernel time of work, ns. */
static double
simple_kernel_ns(const struct simgpu_work *work)
{
    double t = SIMGPU_SIMPLE_FIXED_NS;
    if (work->kclass == SIMGPU_CLASS_COMPUTE)
        t += work->flops / SIMGPU_SIMPLE_FLOPS_PER_NS;
    else if (work->kclass == SIMGPU_CLASS_MEMORY)
        t += work->bytes / SIMGPU_SIMPLE_BYTES_PER_NS;
    return t;
}

/* The roofline time of work on a grid of `blocks` blocks in world w, ns. */
static double
roofline_ns(const struct simgpu_world *w, const struct simgpu_work *work, uint64_t blocks)
{
    double t, tc, tm, sms, waves, util;
    int dt = work->dtype >= 0 && work->dtype < 4 ? work->dtype : SIMGPU_FP32;
    /* Roofline: the slower of the FLOPs at the dtype's peak times the world's efficiency
     * (and the grid's wave quantisation) and the bytes at the achieved HBM bandwidth. */
    sms = w->prof->sm_count;
    if (blocks < 1)
        blocks = 1;
    waves = ceil((double)blocks / sms);
    util = (double)blocks / (waves * sms);
    tc = work->flops /
         (w->prof->tflops[dt] * 1e3 * (dt == SIMGPU_FP32 ? w->eff_fp32 : w->eff_tensor) * util);
    tm = work->bytes / (w->prof->hbm_gbps * w->eff_mem * ((double)blocks < sms ? blocks / sms : 1));
    t = w->kernel_overhead_ns + (tc > tm ? tc : tm);
    return t > w->kernel_floor_ns ? t : w->kernel_floor_ns;
}

double
simgpu_kernel_base_ns(const struct simgpu_world *w, const struct simgpu_work *work, uint64_t blocks)
{
    return w ? roofline_ns(w, work, blocks) : simple_kernel_ns(work);
}

double
simgpu_kernel_noise(const struct simgpu_world *w, int kclass, uint64_t h)
{
    int c = kclass >= 0 && kclass < 4 ? kclass : 0;
    double f = simgpu_lognormal(w->sigma[c], h);
    if (simgpu_u01(mix64(h ^ 0x736c6f77ULL)) < w->straggle_prob) /* "slow" */
        f *= w->straggle_factor;
    return f;
}

/* ---- spans of work per device --------------------------------------------------------------- */
#define SPAN_RING 64
struct span {
    uint64_t t0, t1;
};
static struct {
    struct span s[SIMGPU_SPAN_NKINDS][SPAN_RING];
    unsigned next[SIMGPU_SPAN_NKINDS];
} g_spans[SIMGPU_MAX_DEVICES];
static pthread_mutex_t g_span_mu = PTHREAD_MUTEX_INITIALIZER;

static int
span_ok(int dev, int kind)
{
    return dev >= 0 && dev < SIMGPU_MAX_DEVICES && kind >= 0 && kind < SIMGPU_SPAN_NKINDS;
}

/* Covered fraction of [t0, t1] (see simgpu_span_cover); caller holds g_span_mu. */
static double
cover_locked(int dev, int kind, uint64_t t0, uint64_t t1, double cap)
{
    double f = 0;
    for (int i = 0; i < SPAN_RING && t1 > t0; i++) {
        const struct span *s = &g_spans[dev].s[kind][i];
        uint64_t a = s->t0 > t0 ? s->t0 : t0, b = s->t1 < t1 ? s->t1 : t1;
        if (s->t1 > s->t0 && b > a)
            f += (double)(b - a) / (double)(t1 - t0);
    }
    return f < cap ? f : cap;
}

/* Records [t0, t1]; returns its slot.  Caller holds g_span_mu. */
static int
add_locked(int dev, int kind, uint64_t t0, uint64_t t1)
{
    int slot = (int)(g_spans[dev].next[kind]++ % SPAN_RING);
    g_spans[dev].s[kind][slot].t0 = t0;
    g_spans[dev].s[kind][slot].t1 = t1;
    return slot;
}

double
simgpu_span_cover(int dev, int kind, uint64_t t0, uint64_t t1, double cap)
{
    double f = 0;
    if (span_ok(dev, kind)) {
        pthread_mutex_lock(&g_span_mu);
        f = cover_locked(dev, kind, t0, t1, cap);
        pthread_mutex_unlock(&g_span_mu);
    }
    return f;
}

int
simgpu_span_add(int dev, int kind, uint64_t t0, uint64_t t1)
{
    int slot = -1;
    if (span_ok(dev, kind)) {
        pthread_mutex_lock(&g_span_mu);
        slot = add_locked(dev, kind, t0, t1);
        pthread_mutex_unlock(&g_span_mu);
    }
    return slot;
}

double
simgpu_span_share(int dev, int kind, uint64_t t0, double d, double k, double cap)
{
    if (span_ok(dev, kind)) {
        pthread_mutex_lock(&g_span_mu);
        d *= 1 + k * cover_locked(dev, kind, t0, t0 + (uint64_t)d, cap);
        add_locked(dev, kind, t0, t0 + (uint64_t)d);
        pthread_mutex_unlock(&g_span_mu);
    }
    return d;
}

void
simgpu_span_end(int dev, int kind, int slot, uint64_t t1)
{
    if (!span_ok(dev, kind) || slot < 0 || slot >= SPAN_RING)
        return;
    pthread_mutex_lock(&g_span_mu);
    g_spans[dev].s[kind][slot].t1 = t1;
    pthread_mutex_unlock(&g_span_mu);
}

void
simgpu_span_reset(void)
{
    pthread_mutex_lock(&g_span_mu);
    memset(g_spans, 0, sizeof(g_spans));
    pthread_mutex_unlock(&g_span_mu);
}

uint64_t
simgpu_world_kernel_ns(const struct simgpu_work *work, int has_work, uint64_t job_ns,
                       uint64_t blocks, int dev, uint64_t key, uint64_t start)
{
    const struct simgpu_world *w = simgpu_world();
    int kclass = has_work ? work->kclass : 0;
    double d, f_comm;
    /* The job's own duration (a test of the device) already carries the slowdown. */
    d = has_work ? simgpu_kernel_base_ns(w, work, blocks) * simgpu_cfg.slowdown : (double)job_ns;
    d *= simgpu_kernel_noise(w, kclass, simgpu_hash4(w->seed, g_rank, (uint64_t)dev, key));
    /* Contention, from what is known to overlap when the kernel starts: communication
     * kernels share the SMs and the memory bandwidth, other kernels the whole device. */
    f_comm = simgpu_span_cover(dev, SIMGPU_SPAN_COMM, start, start + (uint64_t)d, 1.0);
    d *= 1 + w->comp_by_comm * f_comm;
    d = simgpu_span_share(dev, SIMGPU_SPAN_COMPUTE, start, d > 1 ? d : 1, w->comp_by_comp, 2.0);
    return (uint64_t)d;
}

/* ---- copies --------------------------------------------------------------------------------- */
/* The world physics' copy time (see simgpu_copy_ns). */
static uint64_t
world_copy_ns(size_t bytes, int copy_kind, int src_kind, int dst_kind, int dev, uint64_t key,
              uint64_t start)
{
    const struct simgpu_world *w = simgpu_world();
    double gbps, lat = w->copy_lat_ns, d;
    int pageable, span = -1;
    pageable = src_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE ||
               dst_kind == CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
    if (copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD) {
        gbps = w->prof->hbm_gbps * w->eff_mem / 2; /* read and write */
    } else if (copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOH) {
        gbps = 10;
    } else {
        gbps = w->prof->pcie_gbps * w->pcie_eff;
        if (pageable) { /* staged through a pinned buffer by the driver */
            gbps *= w->pageable_factor;
            lat += w->pageable_lat_ns;
        }
        span = copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? SIMGPU_SPAN_H2D : SIMGPU_SPAN_D2H;
    }
    d = lat + (double)bytes / gbps;
    d *= simgpu_lognormal(w->sigma[SIMGPU_CLASS_MEMORY],
                          simgpu_hash4(w->seed, g_rank, (uint64_t)dev, key));
    if (span >= 0) {
        /* One copy engine per direction: concurrent copies share its bandwidth. */
        d = simgpu_span_share(dev, span, start, d, 1.0, 4.0);
    }
    return (uint64_t)d;
}

uint64_t
simgpu_copy_ns(size_t bytes, int copy_kind, int src_kind, int dst_kind, int dev, uint64_t key,
               uint64_t start)
{
    double gbps =
        copy_kind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? simgpu_cfg.d2d_gbps : simgpu_cfg.h2d_gbps;
    return simgpu_physics() == SIMGPU_PHYSICS_SIMPLE
               ? 1500 + (uint64_t)((double)bytes / gbps)
               : world_copy_ns(bytes, copy_kind, src_kind, dst_kind, dev, key, start);
}

uint64_t
simgpu_memset_ns(size_t bytes)
{
    const struct simgpu_world *w = simgpu_world();
    return simgpu_physics() == SIMGPU_PHYSICS_SIMPLE
               ? 1000 + (uint64_t)((double)bytes / simgpu_cfg.d2d_gbps)
               : (uint64_t)(w->kernel_overhead_ns +
                            (double)bytes / (w->prof->hbm_gbps * w->eff_mem));
}

/* ---- host side of launches ------------------------------------------------------------------ */
static atomic_int g_launching;
static atomic_ullong g_launches;

/* The world physics' host side of a launch (see simgpu_host_launch). */
static void
world_launch(double frac)
{
    const struct simgpu_world *w = simgpu_world();
    uint64_t n, h;
    int others;
    double ns;
    others = atomic_fetch_add(&g_launching, 1);
    n = atomic_fetch_add(&g_launches, 1);
    h = simgpu_hash4(w->seed, g_rank, 0x6c61756e6368ULL, n); /* "launch" */
    /* Threads launching at once contend for the driver (its lock, the CPU). */
    ns = w->prof->launch_us * 1000 * frac * w->launch_factor * (1 + w->launch_load_k * others) *
         simgpu_lognormal(w->launch_sigma, h);
    simgpu_spin_ns((uint64_t)ns);
    if (simgpu_u01(mix64(h)) < w->hiccup_prob) {
        /* The host goes away for a while (page fault storm, a preempted thread, GC). */
        double us = -w->hiccup_mean_us * log(simgpu_u01(mix64(h ^ 0x68696363ULL)));
        struct timespec ts = {(time_t)(us / 1e6), (long)(fmod(us, 1e6) * 1000)};
        nanosleep(&ts, NULL);
    }
    atomic_fetch_sub(&g_launching, 1);
}

void
simgpu_host_launch(double frac)
{
    if (simgpu_physics() == SIMGPU_PHYSICS_SIMPLE)
        simgpu_spin_ns((uint64_t)((double)simgpu_cfg.launch_ns * frac));
    else
        world_launch(frac);
}
