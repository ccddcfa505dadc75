/*
 * framework_detect.c: recognising the framework from the trace, the profiles by name, and
 * the framework-neutral profile for an unknown framework (see framework.h).
 */
#include "optimizer/framework.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dprotrace.h"
#include "optimizer/strategy.h"
#include "replay/job.h"
#include "replay/kernels.h"

int
framework_nearest_cap(double mb)
{
    int best = 0;
    for (int i = 1; i < strategy_n_bucket_caps; i++)
        if (fabs(log(strategy_bucket_caps_mb[i] / mb)) <
            fabs(log(strategy_bucket_caps_mb[best] / mb)))
            best = i;
    return best;
}

/* ---- the unknown framework: the kind of change, no knob ---------------------------- */

static void
unknown_advise(const workload *w, const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    size_t o = 0;
    (void)batch;
    buf[0] = 0;
#define PUT(...) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__)
    if (p->bucket_cap >= 0)
        PUT("%swhat sets the gradient bucket size: the %d gradient %ss of an iteration "
            "grouped into buckets of %g MiB",
            o ? "\n" : "", w->buckets.n_units,
            w->buckets.coll_op < DPRO_COLL_OP_COUNT ? dpro_coll_op_name(w->buckets.coll_op)
                                                    : "collective",
            strategy_bucket_caps_mb[p->bucket_cap]);
    if (p->fuse)
        PUT("%sa fused kernel (a compiler, or one hand-written kernel) for each chain of short "
            "kernels named above",
            o ? "\n" : "");
    if (p->cuda_graph)
        PUT("%sthe launches of the forward and backward kernels captured in a CUDA graph "
            "(cudaStreamBeginCapture ... cudaGraphLaunch) and replayed each iteration",
            o ? "\n" : "");
    if (strategy_n_recomputed(p) > 0) {
        char list[512];
        strategy_layer_list(p, list, sizeof list);
        PUT("%sactivation checkpointing of layers %s (by index in forward order, as their "
            "activation allocations tell them apart)",
            o ? "\n" : "", list);
    }
    if (p->accum_k > 1)
        PUT(workload_has_collectives(w->g)
                ? "%sgradient accumulation: %d micro-batches of 1/%d of the batch, the "
                  "gradients reduced after the last only"
                : "%sgradient accumulation: %d micro-batches of 1/%d of the batch per "
                  "optimizer step",
            o ? "\n" : "", p->accum_k, p->accum_k);
#undef PUT
}

const framework_profile framework_unknown = {
    .name = "unknown",
    .title = "any framework (none recognised)",
    .families = STRATEGY_FUSION | STRATEGY_TENSOR | STRATEGY_MEMORY,
    .can_capture = 1,
    .capture_scope = WL_CAPTURE_COMPUTE,
    .cannot = "framework options: none recognised, so the advice says what kind of change "
              "helps and names the kernels and collectives",
    .advise = unknown_advise,
};

static const framework_profile *const profiles[] = {
    &framework_ddp_sim, &framework_torch_ddp, &framework_torch_fsdp,
    &framework_torch,   &framework_unknown,
};

const char *
framework_cannot(const framework_profile *fw, int collectives)
{
    const char *c = collectives || !fw->cannot_alone ? fw->cannot : fw->cannot_alone;
    return c && *c ? c : NULL;
}

const framework_profile *
framework_by_name(const char *name)
{
    const framework_profile *fw = NULL;
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0] && !fw; i++)
        if (!strcmp(profiles[i]->name, name))
            fw = profiles[i];
    return fw;
}

/* ---- recognition ------------------------------------------------------------------- */

/* What a string of the trace says (bits). */
enum {
    S_DDP = 1,    /* a DDP marker: DistributedDataParallel.*, the reducer's ops */
    S_FSDP = 2,   /* an FSDP marker: FullyShardedDataParallel.*, FSDP::* */
    S_TORCH = 4,  /* a PyTorch operator or step marker: aten::*, ProfilerStep#* */
    S_NATIVE = 8, /* a PyTorch kernel: at::native:: in its name, demangled or not */
};

static unsigned
classify(const char *s)
{
    unsigned c = 0;
    if (!strncmp(s, "DistributedDataParallel", 23) || !strncmp(s, "torch.distributed.ddp.", 22) ||
        !strncmp(s, "torch::distributed::reducer", 27))
        c |= S_DDP;
    if (!strncmp(s, "FullyShardedDataParallel", 24) || !strncmp(s, "FSDP::", 6))
        c |= S_FSDP;
    if (!strncmp(s, "aten::", 6) || !strncmp(s, "ProfilerStep#", 13))
        c |= S_TORCH;
    if (strstr(s, "at::native::") || strstr(s, "_ZN2at6native")) /* demangled or not */
        c |= S_NATIVE;
    return c;
}

/* Counts over the job's traces. */
struct framework_evidence {
    int64_t ddp, fsdp, torch, native; /* markers (ddp, fsdp, torch) and kernels (native) */
    char ddp_ex[96], fsdp_ex[96], torch_ex[96], native_ex[96];
    int64_t coll[DPRO_COLL_OP_COUNT];
    char command[160]; /* the first rank's traced command, ddp-sim's when one is */
    int ddp_sim;
};

/* Counts one more s in *n; the first is the example ex (96 bytes), a kernel's name as
 * reports show it (kernels_display_name). */
static void
note(int64_t *n, char *ex, const char *s, int kernel)
{
    if ((*n)++ == 0 && kernel)
        kernels_display_name(s, ex, 96);
    else if (*n == 1)
        snprintf(ex, 96, "%s", s);
}

/* 1 when command (argv joined by spaces) runs the program ddp-sim (libtool's lt-ddp-sim). */
static int
is_ddp_sim(const char *command)
{
    size_t n = strcspn(command, " ");
    const char *base = command;
    for (const char *c = command; c < command + n; c++)
        if (*c == '/')
            base = c + 1;
    if (!strncmp(base, "lt-", 3))
        base += 3;
    return (size_t)(command + n - base) == 7 && !strncmp(base, "ddp-sim", 7);
}

int
framework_detect_rank(framework_evidence *ev, const job_rank *jr)
{
    uint32_t ns = dpro_reader_string_count(jr->reader);
    uint8_t *cls = calloc((size_t)ns + 1, 1);
    const char *cmd = job_rank_meta(jr, JOB_META_COMMAND);
    if (!cls)
        return -1;
    if (cmd && (!ev->command[0] || (is_ddp_sim(cmd) && !ev->ddp_sim)))
        snprintf(ev->command, sizeof ev->command, "%s", cmd);
    ev->ddp_sim |= cmd && is_ddp_sim(cmd);
    for (uint32_t i = 0; i < ns; i++) {
        const char *s = dpro_reader_string(jr->reader, i);
        cls[i] = s ? (uint8_t)classify(s) : 0;
    }
    for (size_t i = 0; i < jr->n_events; i++) {
        const job_event *e = &jr->events[i];
        unsigned c = e->name < ns ? cls[e->name] : 0;
        const char *s = c ? dpro_reader_string(jr->reader, e->name) : NULL;
        if (e->kind == DPRO_KIND_MARKER && (c & S_DDP))
            note(&ev->ddp, ev->ddp_ex, s, 0);
        if (e->kind == DPRO_KIND_MARKER && (c & S_FSDP))
            note(&ev->fsdp, ev->fsdp_ex, s, 0);
        if (e->kind == DPRO_KIND_MARKER && (c & S_TORCH))
            note(&ev->torch, ev->torch_ex, s, 0);
        if (e->kind == DPRO_KIND_KERNEL && (c & S_NATIVE))
            note(&ev->native, ev->native_ex, s, 1);
        if (e->kind == DPRO_KIND_COLLECTIVE && e->subkind < DPRO_COLL_OP_COUNT)
            ev->coll[e->subkind]++;
    }
    free(cls);
    return 0;
}

/* Appends the collectives of ev ("all-reduce 15, broadcast 6") to buf at *o. */
static void
put_collectives(const framework_evidence *ev, char *buf, size_t len, size_t *o)
{
    int any = 0;
    for (int op = 1; op < DPRO_COLL_OP_COUNT; op++) {
        if (!ev->coll[op])
            continue;
        *o += (size_t)snprintf(buf + *o, *o < len ? len - *o : 0, "%s%s %lld",
                               any ? ", " : "; collectives: ", dpro_coll_op_name((uint32_t)op),
                               (long long)ev->coll[op]);
        any = 1;
    }
    if (!any)
        *o += (size_t)snprintf(buf + *o, *o < len ? len - *o : 0, "; no collectives");
}

void
framework_decide(const framework_evidence *ev, framework_detection *out)
{
    char *b = out->evidence;
    size_t len = sizeof out->evidence, o = 0;
    int64_t ar = ev->coll[DPRO_COLL_ALLREDUCE], ag = ev->coll[DPRO_COLL_ALLGATHER],
            rs = ev->coll[DPRO_COLL_REDUCESCATTER];
    int torch = ev->torch > 0 || ev->native > 0;
#define PUT(...) o += (size_t)snprintf(b + o, o < len ? len - o : 0, __VA_ARGS__)
    out->fw = &framework_unknown;
    if (ev->ddp_sim) {
        out->fw = &framework_ddp_sim;
        PUT("traced command '%.100s' (the program ddp-sim)", ev->command);
    } else if (ev->fsdp > 0) {
        out->fw = &framework_torch_fsdp;
        PUT("%lld FSDP markers (%s)", (long long)ev->fsdp, ev->fsdp_ex);
    } else if (ev->ddp > 0) {
        out->fw = &framework_torch_ddp;
        PUT("%lld DDP markers (%s)", (long long)ev->ddp, ev->ddp_ex);
    } else if (torch && ag > 0 && rs > ar) {
        out->fw = &framework_torch_fsdp;
        PUT("PyTorch with all-gathers, and reduce-scatters more than all-reduces (FSDP's "
            "pattern; no FSDP markers in the trace)");
    } else if (torch && ar > 0 && rs == 0) {
        out->fw = &framework_torch_ddp;
        PUT("PyTorch with all-reduces and no reduce-scatter (DDP's pattern; no DDP markers in "
            "the trace)");
    } else if (torch) {
        out->fw = &framework_torch;
        PUT("PyTorch without DDP or FSDP markers or their collective pattern");
    } else
        PUT("no ddp-sim command, PyTorch markers or kernels");
    if (ev->torch > 0)
        PUT("; %lld PyTorch operator markers (%s)", (long long)ev->torch, ev->torch_ex);
    if (ev->native > 0)
        PUT("; %lld PyTorch kernels (%.60s...)", (long long)ev->native, ev->native_ex);
    put_collectives(ev, b, len, &o);
#undef PUT
}

framework_evidence *
framework_evidence_new(void)
{
    return calloc(1, sizeof(framework_evidence));
}
