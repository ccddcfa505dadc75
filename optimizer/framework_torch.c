/* framework_torch.c: the PyTorch profiles, DDP, FSDP and no wrapper (see framework.h). */
#include "optimizer/framework.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/strategy.h"

/* DDP's bucket_cap_mb default. Its first bucket is 1 MiB (dist._DEFAULT_FIRST_BUCKET_BYTES)
 * only when bucket_cap_mb is left out; given, bucket_cap_mb caps the first bucket too
 * (torch/nn/parallel/distributed.py: first_bucket_bytes_cap; every plan sets it). */
#define TORCH_DDP_BUCKET_MB 25

/* Which wrapper a profile stands for. */
enum { TORCH_PLAIN = 0, TORCH_DDP = 1, TORCH_FSDP = 2 };

static int
torch_wrapper(const framework_profile *fw)
{
    return fw == &framework_torch_ddp    ? TORCH_DDP
           : fw == &framework_torch_fsdp ? TORCH_FSDP
                                         : TORCH_PLAIN;
}

/* The plan as PyTorch options: the capture is torch.cuda.graph (the whole step) under DDP,
 * torch.compile's mode=reduce-overhead (the compiled forward and backward) elsewhere. */
static void
torch_format_args_as(const framework_profile *fw, const strategy_plan *p, int32_t batch, char *buf,
                     size_t len)
{
    size_t o = 0;
    buf[0] = 0;
#define PUT(...) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__)
    if (p->bucket_cap >= 0)
        PUT("%sbucket_cap_mb=%g", o ? " " : "", strategy_bucket_caps_mb[p->bucket_cap]);
    if (p->fuse)
        PUT("%storch.compile", o ? " " : "");
    if (p->cuda_graph)
        PUT("%s%s", o ? " " : "",
            torch_wrapper(fw) == TORCH_DDP ? "torch.cuda.graph" : "mode=reduce-overhead");
    if (strategy_n_recomputed(p) > 0) {
        char list[512];
        strategy_layer_list(p, list, sizeof list);
        PUT("%scheckpoint=%s", o ? " " : "", list);
    }
    if (p->accum_k > 1) {
        PUT("%sno_sync=%d", o ? " " : "", p->accum_k);
        if (batch > 0)
            PUT(" micro_batch=%d", batch / p->accum_k);
    }
    if (p->fsdp_keep || p->fsdp_reshard)
        PUT("%sreshard_after_forward=%s", o ? " " : "", p->fsdp_reshard ? "True" : "False");
    if (p->prefetch)
        PUT("%sprefetch=1", o ? " " : "");
#undef PUT
}

/* The options of torch_format_args_as, the bucket cap capping DDP's first bucket too. Under DDP
 * the capture is torch.cuda.graph only: mode=reduce-overhead captures another region (the
 * compiled forward and backward, not DDP's all-reduces), which DDP's capture plan does not
 * predict. */
static int
torch_parse_args_as(const framework_profile *fw, const char *args, strategy_plan *p)
{
    char buf[1024], *save = NULL;
    int rc = 0;
    strategy_plan_baseline(p);
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok_r(buf, " ", &save); t && rc == 0; t = strtok_r(NULL, " ", &save)) {
        char *v = strchr(t, '=');
        char *end = NULL;
        if (v)
            *v++ = 0;
        if (!strcmp(t, "torch.compile") && !v)
            p->fuse = 1;
        else if (!strcmp(t, "mode") && v && !strcmp(v, "reduce-overhead"))
            rc = torch_wrapper(fw) == TORCH_DDP ? -1 : (p->cuda_graph = 1, 0);
        else if (!strcmp(t, "torch.cuda.graph") && !v)
            p->cuda_graph = 1;
        else if (!strcmp(t, "bucket_cap_mb") && v) {
            double mb = strtod(v, &end);
            if (*end || !(mb > 0))
                rc = -1;
            else {
                p->bucket_cap = (int8_t)framework_nearest_cap(mb);
                p->first_cap = p->bucket_cap;
            }
        } else if (!strcmp(t, "checkpoint") && v)
            rc = strategy_parse_layer_list(v, p);
        else if (!strcmp(t, "no_sync") && v) {
            long k = strtol(v, &end, 10);
            if (*end || k < 1 || k > 255)
                rc = -1;
            else
                p->accum_k = (uint8_t)k;
        } else if (!strcmp(t, "reshard_after_forward") && v &&
                   (!strcmp(v, "False") || !strcmp(v, "True")))
            p->fsdp_keep = !(p->fsdp_reshard = !strcmp(v, "True"));
        else if (!strcmp(t, "prefetch") && v && (!strcmp(v, "0") || !strcmp(v, "1")))
            p->prefetch = (uint8_t)(v[0] == '1');
        else if (strcmp(t, "micro_batch") != 0 || !v)
            rc = -1;
    }
    return rc;
}

/* The advice, one line per change, in PyTorch's terms. */
static void
torch_advise_as(const framework_profile *fw, const workload *w, const strategy_plan *p,
                int32_t batch, char *buf, size_t len)
{
    int wrap = torch_wrapper(fw), coll = workload_has_collectives(w->g);
    size_t o = 0;
    buf[0] = 0;
#define PUT(...) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__)
    if (p->bucket_cap >= 0)
        PUT("%sDDP(model, bucket_cap_mb=%g): gradients all-reduced in %d buckets instead of "
            "%d (the first bucket too takes the cap: DDP keeps its 1 MiB first bucket only "
            "when bucket_cap_mb is left out)",
            o ? "\n" : "", strategy_bucket_caps_mb[p->bucket_cap], strategy_bucket_count(w, p),
            w->buckets.n_units);
    int compiled_graph = p->cuda_graph && wrap != TORCH_DDP; /* mode="reduce-overhead" */
    if (p->fuse || compiled_graph)
        PUT("%smodel = torch.compile(model%s): %s", o ? "\n" : "",
            compiled_graph ? ", mode=\"reduce-overhead\"" : "",
            compiled_graph ? "the compiled forward and backward run as CUDA graphs (or capture "
                             "them with torch.cuda.graph); the host calls that launch them and "
                             "the Python between those launches are gone, the collectives, the "
                             "optimizer step and the rest of the loop stay"
                           : "Inductor fuses the forward's and backward's pointwise, "
                             "normalisation and reduction kernels between the GEMMs (one kernel "
                             "per reduction); the launches and the Python it saves are the "
                             "prediction's");
    if (p->cuda_graph && wrap == TORCH_DDP)
        PUT("%swith torch.cuda.graph(g): the whole step (forward, backward%s, optimizer.step()) "
            "captured once and replayed each step (PyTorch's whole-network capture with DDP: "
            "TORCH_NCCL_ASYNC_ERROR_HANDLING=0 before init_process_group, DDP built on a side "
            "stream, 11 eager steps before the capture); its kernel%s launches, the backward "
            "thread's work and the Python between them leave the host, the copy of each batch "
            "into the captured input and the synchronisation after the replay stay",
            o ? "\n" : "", coll ? " with DDP's all-reduces" : "", coll ? " and NCCL" : "");
    if (strategy_n_recomputed(p) > 0) {
        char list[512];
        strategy_layer_list(p, list, sizeof list);
        PUT("%s%s around the modules of layers %s, in forward order (the trace names no "
            "modules: layers are told apart by their activation allocations)",
            o ? "\n" : "",
            wrap == TORCH_FSDP ? "apply_activation_checkpointing (or torch.utils.checkpoint)"
                               : "torch.utils.checkpoint.checkpoint",
            list);
    }
    if (p->accum_k > 1) {
        char mb[64];
        if (batch > 0)
            snprintf(mb, sizeof mb, "%d", batch / p->accum_k);
        else
            snprintf(mb, sizeof mb, "1/%d of the batch", p->accum_k);
        if (wrap == TORCH_PLAIN || !coll) /* no gradient sync to skip */
            PUT("%s%d micro-batches of %s per optimizer.step()", o ? "\n" : "", p->accum_k, mb);
        else
            PUT("%s%d micro-batches of %s per optimizer.step(), the first %d under %s: only "
                "the last one's backward %s the gradients",
                o ? "\n" : "", p->accum_k, mb, p->accum_k - 1,
                wrap == TORCH_FSDP ? "model.no_sync() (fully_shard: "
                                     "model.set_requires_gradient_sync(False))"
                                   : "with model.no_sync()",
                wrap == TORCH_FSDP ? "reduce-scatters" : "all-reduces");
    }
    if (p->fsdp_keep)
        PUT("%storch.distributed.fsdp.fully_shard(block, reshard_after_forward=False) for every "
            "block (FSDP1: "
            "sharding_strategy=ShardingStrategy.SHARD_GRAD_OP): the parameters stay gathered "
            "from the forward to the backward, whose %d all-gathers per iteration go; the peak "
            "memory grows by about %.1f MiB",
            o ? "\n" : "", w->fsdp.n_bwd, (double)w->fsdp.gathered_bytes / 1048576.0);
    if (p->fsdp_reshard)
        PUT("%storch.distributed.fsdp.fully_shard(block, reshard_after_forward=True) for every "
            "block (FSDP1: sharding_strategy=ShardingStrategy.FULL_SHARD): each block's "
            "parameters are freed after its forward and gathered again in the backward (%d "
            "more all-gathers per iteration); the peak memory drops by about %.1f MiB",
            o ? "\n" : "", w->fsdp.n_regather, (double)w->fsdp.gathered_bytes / 1048576.0);
    if (p->prefetch)
        PUT("%son the torch.distributed.fsdp.FSDPModule blocks, "
            "blocks[i].set_modules_to_forward_prefetch([blocks[i + 1]]) and "
            "blocks[i].set_modules_to_backward_prefetch([blocks[i - 1]]) (FSDP1: "
            "forward_prefetch=True, "
            "backward_prefetch=BackwardPrefetch.BACKWARD_PRE): each block's all-gather is issued "
            "while the block before it computes",
            o ? "\n" : "");
#undef PUT
}

/* The knobs by their PyTorch names. */
static void
torch_knobs_as(const framework_profile *fw, const workload *w, const strategy_plan *p,
               int32_t batch, json_writer *jw)
{
    if (p->bucket_cap >= 0) {
        json_key(jw, "DistributedDataParallel");
        json_begin_object(jw);
        json_kv_double(jw, "bucket_cap_mb", strategy_bucket_caps_mb[p->bucket_cap]);
        json_kv_string(jw, "first_bucket", "bucket_cap_mb (DDP's 1 MiB only without it)");
        json_end_object(jw);
    }
    int ddp_graph = p->cuda_graph && torch_wrapper(fw) == TORCH_DDP;
    if (p->fuse || (p->cuda_graph && !ddp_graph)) {
        json_key(jw, "torch.compile");
        json_begin_object(jw);
        json_kv_string(jw, "mode", p->cuda_graph && !ddp_graph ? "reduce-overhead" : "default");
        if (p->cuda_graph && !ddp_graph)
            json_kv_string(jw, "captured", "the compiled forward and backward");
        json_end_object(jw);
    }
    if (ddp_graph) {
        json_key(jw, "torch.cuda.graph");
        json_begin_object(jw);
        json_kv_string(jw, "captured",
                       workload_has_collectives(w->g)
                           ? "the whole step: forward, backward with DDP's all-reduces, "
                             "optimizer.step()"
                           : "the whole step: forward, backward, optimizer.step()");
        json_end_object(jw);
    }
    if (strategy_n_recomputed(p) > 0) {
        char list[512];
        strategy_layer_list(p, list, sizeof list);
        json_key(jw, "torch.utils.checkpoint");
        json_begin_object(jw);
        json_kv_string(jw, "layers", list);
        json_kv_string(jw, "modules", "by layer index: the trace names no modules");
        json_end_object(jw);
    }
    if (p->accum_k > 1) {
        json_key(jw, torch_wrapper(fw) == TORCH_PLAIN ? "accumulation" : "no_sync");
        json_begin_object(jw);
        json_kv_int(jw, "micro_batches", p->accum_k);
        if (batch > 0)
            json_kv_int(jw, "micro_batch", batch / p->accum_k);
        json_end_object(jw);
    }
    if (p->fsdp_keep || p->prefetch || p->fsdp_reshard) {
        json_key(jw, "fully_shard");
        json_begin_object(jw);
        if (p->fsdp_keep || p->fsdp_reshard)
            json_kv_bool(jw, "reshard_after_forward", p->fsdp_reshard);
        if (p->prefetch) {
            json_kv_string(jw, "set_modules_to_forward_prefetch", "[blocks[i + 1]]");
            json_kv_string(jw, "set_modules_to_backward_prefetch", "[blocks[i - 1]]");
        }
        json_end_object(jw);
    }
}

static void
ddp_format(const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    torch_format_args_as(&framework_torch_ddp, p, batch, buf, len);
}

static void
torch_format(const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    torch_format_args_as(&framework_torch, p, batch, buf, len);
}

static int
ddp_parse(const char *args, strategy_plan *p)
{
    return torch_parse_args_as(&framework_torch_ddp, args, p);
}

static int
torch_parse(const char *args, strategy_plan *p)
{
    return torch_parse_args_as(&framework_torch, args, p);
}

static void
ddp_advise(const workload *w, const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    torch_advise_as(&framework_torch_ddp, w, p, batch, buf, len);
}

static void
fsdp_advise(const workload *w, const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    torch_advise_as(&framework_torch_fsdp, w, p, batch, buf, len);
}

static void
plain_advise(const workload *w, const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    torch_advise_as(&framework_torch, w, p, batch, buf, len);
}

static void
ddp_knobs(const workload *w, const strategy_plan *p, int32_t batch, json_writer *jw)
{
    torch_knobs_as(&framework_torch_ddp, w, p, batch, jw);
}

static void
fsdp_knobs(const workload *w, const strategy_plan *p, int32_t batch, json_writer *jw)
{
    torch_knobs_as(&framework_torch_fsdp, w, p, batch, jw);
}

static void
plain_knobs(const workload *w, const strategy_plan *p, int32_t batch, json_writer *jw)
{
    torch_knobs_as(&framework_torch, w, p, batch, jw);
}

const framework_profile framework_torch_ddp = {
    .name = "pytorch-ddp",
    .title = "PyTorch DDP",
    .args_key = "torch_args",
    .default_bucket_mb = TORCH_DDP_BUCKET_MB,
    .first_bucket_follows = 1,
    .families = STRATEGY_FUSION | STRATEGY_TENSOR | STRATEGY_MEMORY,
    .can_capture = 1,
    .capture_scope = WL_CAPTURE_STEP, /* torch.cuda.graph of the step, DDP's all-reduces in */
    .fusion_scope = WL_FUSE_COMPILED, /* torch.compile(model): Inductor */
    .cannot = "a first bucket of another size than the others (bucket_cap_mb caps both) and "
              "torch.compile's mode=reduce-overhead (its graphs leave DDP's all-reduces out: "
              "the capture advised is the whole step's, torch.cuda.graph)",
    .cannot_alone = "torch.compile's mode=reduce-overhead (the capture advised is the whole "
                    "step's, torch.cuda.graph)",
    .format_args = ddp_format,
    .parse_args = ddp_parse,
    .advise = ddp_advise,
    .write_knobs = ddp_knobs,
};

const framework_profile framework_torch_fsdp = {
    .name = "pytorch-fsdp",
    .title = "PyTorch FSDP",
    .args_key = "torch_args",
    .families = STRATEGY_FUSION | STRATEGY_MEMORY | STRATEGY_FSDP,
    .can_capture = 0,
    .capture_scope = WL_CAPTURE_COMPUTE,
    .fusion_scope = WL_FUSE_COMPILED,
    .cannot = "bucket caps (FSDP's all-gathers and reduce-scatters follow its wrapping, "
              "auto_wrap_policy, not a bucket size) and CUDA-graph capture (FSDP issues its "
              "collectives and frees its parameters from hooks between the kernels)",
    .format_args = torch_format,
    .parse_args = torch_parse,
    .advise = fsdp_advise,
    .write_knobs = fsdp_knobs,
};

const framework_profile framework_torch = {
    .name = "pytorch",
    .title = "PyTorch",
    .args_key = "torch_args",
    .families = STRATEGY_FUSION | STRATEGY_MEMORY,
    .can_capture = 1,
    .capture_scope = WL_CAPTURE_COMPUTE,
    .fusion_scope = WL_FUSE_COMPILED,
    .cannot = "bucket caps (no DDP in the trace)",
    .cannot_alone = "", /* without collectives, no bucket to cap */
    .format_args = torch_format,
    .parse_args = torch_parse,
    .advise = plain_advise,
    .write_knobs = plain_knobs,
};
