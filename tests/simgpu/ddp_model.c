/* ddp_model.c: presets of ddp-sim shaped like ResNet-50, BERT-large and a stack
 * of GPT blocks.  Durations are of the order of an A100 at the reference batch;
 * parameter and activation sizes follow the real architectures (fp32). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddp_sim.h"

static struct ddp_layer
layer(const char *name, double fwd_us, int nmain, int nsmall, double small_us, uint64_t params,
      uint64_t acts)
{
    struct ddp_layer l;
    memset(&l, 0, sizeof(l));
    snprintf(l.name, sizeof(l.name), "%s", name);
    l.fwd_us = fwd_us;
    l.bwd_us = 2 * fwd_us;
    l.nmain = nmain;
    l.nsmall = nsmall;
    l.small_us = small_us;
    l.param_bytes = params;
    l.act_bytes = acts;
    return l;
}

/* ResNet-50 at batch 32: stem, 16 bottleneck blocks (3 convs each, in stages of
 * 3/4/6/3 blocks) and the classifier; ~25.5 M parameters. */
static int
resnet50(int blocks, struct ddp_model *m)
{
    static const int stage_blocks[4] = {3, 4, 6, 3};
    static const int width[4] = {64, 128, 256, 512};
    static const int hw[4] = {56, 28, 14, 7};
    int total = 0, n = 0, want;
    char name[32];
    for (int s = 0; s < 4; s++)
        total += stage_blocks[s];
    want = blocks > 0 ? blocks : total;
    m->layers = calloc((size_t)want * 3 + 2, sizeof(*m->layers));
    if (!m->layers)
        return -1;
    m->ref_batch = 32;
    m->layers[n++] = layer("conv1", 420, 1, 3, 18, 9408ULL * 4, 32ULL * 64 * 112 * 112 * 4);
    for (int b = 0; b < want; b++) {
        int s = 0, k = b % total, acc = 0;
        uint64_t c, in, acts;
        while (s < 3 && k >= acc + stage_blocks[s])
            acc += stage_blocks[s++];
        c = (uint64_t)width[s];
        in = 4 * c;
        acts = 32ULL * c * (uint64_t)hw[s] * (uint64_t)hw[s] * 4;
        snprintf(name, sizeof(name), "layer%d.%d.conv1", s + 1, k - acc);
        m->layers[n++] = layer(name, 380, 1, 2, 14, in * c * 4, acts);
        snprintf(name, sizeof(name), "layer%d.%d.conv2", s + 1, k - acc);
        m->layers[n++] = layer(name, 520, 1, 2, 14, c * c * 9 * 4, acts);
        snprintf(name, sizeof(name), "layer%d.%d.conv3", s + 1, k - acc);
        m->layers[n++] = layer(name, 400, 1, 3, 16, c * in * 4, acts * 4);
    }
    m->layers[n++] = layer("fc", 60, 1, 1, 6, 2048ULL * 1000 * 4 + 4000, 32ULL * 1000 * 4);
    m->nlayers = n;
    return 0;
}

/* A transformer encoder/decoder block of hidden size h, sequence s, batch b. */
static struct ddp_layer
block(const char *name, double fwd_us, uint64_t h, uint64_t s, uint64_t b)
{
    uint64_t params = (12 * h * h + 13 * h) * 4;
    uint64_t acts = b * s * h * 34 * 2 + 5 * b * 16 * s * s;
    return layer(name, fwd_us, 5, 7, 22, params, acts);
}

/* BERT-large at batch 8, sequence 512: embeddings, 24 blocks of hidden 1024,
 * the pooler/head; ~335 M parameters. */
static int
bert_large(int blocks, struct ddp_model *m)
{
    int want = blocks > 0 ? blocks : 24, n = 0;
    char name[32];
    m->layers = calloc((size_t)want + 2, sizeof(*m->layers));
    if (!m->layers)
        return -1;
    m->ref_batch = 8;
    m->layers[n++] = layer("embeddings", 90, 1, 4, 20, (30522ULL + 512 + 2) * 1024 * 4,
                           8ULL * 512 * 1024 * 4 * 3);
    for (int i = 0; i < want; i++) {
        snprintf(name, sizeof(name), "encoder.layer.%d", i);
        m->layers[n++] = block(name, 1500, 1024, 512, 8);
    }
    m->layers[n++] =
        layer("cls", 120, 1, 2, 10, (1024ULL * 1024 + 1024 * 2) * 4, 8ULL * 512 * 1024 * 4);
    m->nlayers = n;
    return 0;
}

/* A GPT block stack (GPT-2 medium shaped) at batch 8, sequence 1024, hidden
 * 1024; 12 blocks unless told otherwise. */
static int
gpt(int blocks, struct ddp_model *m)
{
    int want = blocks > 0 ? blocks : 12, n = 0;
    char name[32];
    m->layers = calloc((size_t)want + 2, sizeof(*m->layers));
    if (!m->layers)
        return -1;
    m->ref_batch = 8;
    m->layers[n++] =
        layer("wte", 60, 1, 2, 20, (50257ULL + 1024) * 1024 * 4, 8ULL * 1024 * 1024 * 4);
    for (int i = 0; i < want; i++) {
        snprintf(name, sizeof(name), "h.%d", i);
        m->layers[n++] = block(name, 2600, 1024, 1024, 8);
    }
    m->layers[n++] = layer("lm_head", 900, 1, 2, 30, 1024ULL * 2 * 4, 8ULL * 1024 * 50257 * 2);
    m->nlayers = n;
    return 0;
}

int
ddp_model_preset(const char *name, int layers, struct ddp_model *m)
{
    int rc;
    memset(m, 0, sizeof(*m));
    if (!strcmp(name, "resnet50"))
        rc = resnet50(layers, m);
    else if (!strcmp(name, "bert-large"))
        rc = bert_large(layers, m);
    else if (!strcmp(name, "gpt"))
        rc = gpt(layers, m);
    else
        return -1;
    if (rc == 0)
        snprintf(m->name, sizeof(m->name), "%s", name);
    return rc;
}

void
ddp_model_free(struct ddp_model *m)
{
    free(m->layers);
    m->layers = NULL;
    m->nlayers = 0;
}
