/* framework_ddp_sim.c: the ddp-sim profile (see framework.h). */
#include "optimizer/framework.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimizer/strategy.h"

#define DDP_SIM_BUCKET_MB 25 /* ddp-sim's --bucket-mb default, DDP's bucket_cap_mb */

static void
ddp_sim_format_args(const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = 0;
#define PUT(...) o += (size_t)snprintf(buf + o, o < len ? len - o : 0, __VA_ARGS__)
    if (p->bucket_cap >= 0)
        PUT("%s--bucket-mb %g --first-bucket-mb %g", o ? " " : "",
            strategy_bucket_caps_mb[p->bucket_cap],
            strategy_bucket_caps_mb[p->first_cap >= 0 ? p->first_cap : p->bucket_cap]);
    if (p->fuse)
        PUT("%s--fuse-small", o ? " " : "");
    if (p->cuda_graph)
        PUT("%s--cuda-graph", o ? " " : "");
    if (strategy_n_recomputed(p) > 0) {
        char list[512];
        strategy_layer_list(p, list, sizeof list);
        PUT("%s--recompute %s", o ? " " : "", list);
    }
    if (p->accum_k > 1) {
        PUT("%s--accum-steps %d", o ? " " : "", p->accum_k);
        if (batch > 0)
            PUT(" --batch %d", batch / p->accum_k);
    }
#undef PUT
}

static int
ddp_sim_parse_args(const char *args, strategy_plan *p)
{
    char buf[1024], *save = NULL;
    strategy_plan_baseline(p);
    snprintf(buf, sizeof buf, "%s", args);
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *v = NULL;
        int takes = !strcmp(t, "--bucket-mb") || !strcmp(t, "--first-bucket-mb") ||
                    !strcmp(t, "--recompute") || !strcmp(t, "--accum-steps") ||
                    !strcmp(t, "--batch");
        if (takes && !(v = strtok_r(NULL, " ", &save)))
            return -1;
        if (!strcmp(t, "--fuse-small"))
            p->fuse = 1;
        else if (!strcmp(t, "--cuda-graph"))
            p->cuda_graph = 1;
        else if (!strcmp(t, "--bucket-mb") || !strcmp(t, "--first-bucket-mb")) {
            double mb = atof(v);
            if (mb <= 0)
                return -1;
            if (t[2] == 'b') {
                p->bucket_cap = (int8_t)framework_nearest_cap(mb);
                if (p->first_cap < 0)
                    p->first_cap = p->bucket_cap;
            } else {
                p->first_cap = (int8_t)framework_nearest_cap(mb);
                if (p->bucket_cap < 0)
                    p->bucket_cap = (int8_t)framework_nearest_cap(DDP_SIM_BUCKET_MB);
            }
        } else if (!strcmp(t, "--accum-steps")) {
            int k = atoi(v);
            if (k < 1 || k > 255)
                return -1;
            p->accum_k = (uint8_t)k;
        } else if (!strcmp(t, "--recompute")) {
            if (strategy_parse_layer_list(v, p) != 0)
                return -1;
        } else if (strcmp(t, "--batch") != 0)
            return -1;
    }
    return 0;
}

/* ddp-sim's advice is its options. */
static void
ddp_sim_advise(const workload *w, const strategy_plan *p, int32_t batch, char *buf, size_t len)
{
    (void)w;
    ddp_sim_format_args(p, batch, buf, len);
}

const framework_profile framework_ddp_sim = {
    .name = "ddp-sim",
    .title = "ddp-sim",
    .args_key = "ddp_sim_args",
    .default_bucket_mb = DDP_SIM_BUCKET_MB,
    .families = STRATEGY_FUSION | STRATEGY_TENSOR | STRATEGY_MEMORY,
    .can_capture = 1,
    .capture_scope = WL_CAPTURE_STEP,  /* --cuda-graph captures the step with its all-reduces */
    .fusion_scope = WL_FUSE_SAME_NAME, /* --fuse-small */
    .format_args = ddp_sim_format_args,
    .parse_args = ddp_sim_parse_args,
    .advise = ddp_sim_advise,
};
