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
nearest_cap(double mb)
{
    int best = 0;
    for (int i = 1; i < strategy_n_bucket_caps; i++)
        if (fabs(log(strategy_bucket_caps_mb[i] / mb)) <
            fabs(log(strategy_bucket_caps_mb[best] / mb)))
            best = i;
    return best;
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
                p->bucket_cap = (int8_t)nearest_cap(mb);
                if (p->first_cap < 0)
                    p->first_cap = p->bucket_cap;
            } else {
                p->first_cap = (int8_t)nearest_cap(mb);
                if (p->bucket_cap < 0)
                    p->bucket_cap = (int8_t)nearest_cap(DDP_SIM_BUCKET_MB);
            }
        } else if (!strcmp(t, "--accum-steps")) {
            int k = atoi(v);
            if (k < 1 || k > 255)
                return -1;
            p->accum_k = (uint8_t)k;
        } else if (!strcmp(t, "--recompute")) {
            char *s2 = NULL;
            for (char *r = strtok_r(v, ",", &s2); r; r = strtok_r(NULL, ",", &s2)) {
                int a, b;
                if (sscanf(r, "%d-%d", &a, &b) != 2) {
                    if (sscanf(r, "%d", &a) != 1)
                        return -1;
                    b = a;
                }
                for (int l = a; l <= b; l++)
                    strategy_set_recompute(p, l, 1);
            }
        } else if (strcmp(t, "--batch") != 0)
            return -1;
    }
    return 0;
}

const framework_profile framework_ddp_sim = {
    .name = "ddp-sim",
    .args_key = "ddp_sim_args",
    .default_bucket_mb = DDP_SIM_BUCKET_MB,
    .format_args = ddp_sim_format_args,
    .parse_args = ddp_sim_parse_args,
};

const framework_profile *
framework_default(void)
{
    return &framework_ddp_sim;
}
