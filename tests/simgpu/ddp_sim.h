/* ddp_sim.h: the model tables of ddp-sim, a DDP-like training job. */
#ifndef DDP_SIM_H
#define DDP_SIM_H

#include <stdint.h>

/* Kernel kinds: each is one kernel function (one name) on the device. */
enum ddp_kernel_kind {
    DDP_K_GEMM,        /* main compute of a layer (GEMM / convolution) */
    DDP_K_GEMM_DGRAD,  /* backward: gradient w.r.t. the input */
    DDP_K_GEMM_WGRAD,  /* backward: gradient w.r.t. the weights */
    DDP_K_ELEMENTWISE, /* small, memory-bound forward kernel (bias, activation, norm) */
    DDP_K_ELEMENTWISE_BWD,
    DDP_K_FUSED, /* several consecutive small kernels fused into one */
    DDP_K_FUSED_BWD,
    DDP_K_ADAM, /* optimizer step (multi-tensor apply) */
    DDP_K_LOSS,
    DDP_K_COUNT
};

/* One layer: durations at the model's reference batch size. */
struct ddp_layer {
    char name[32];
    double fwd_us;        /* all main forward kernels together */
    double bwd_us;        /* all main backward kernels together */
    int nmain;            /* main kernels in the forward (>= 1) */
    int nsmall;           /* small kernels in the forward (and as many backward) */
    double small_us;      /* duration of one small kernel */
    uint64_t param_bytes; /* fp32 parameters (= gradient bytes) */
    uint64_t act_bytes;   /* activations kept for the backward */
};

struct ddp_model {
    char name[32];
    int ref_batch;
    int nlayers;
    struct ddp_layer *layers; /* malloc'd; free with ddp_model_free */
};

/* Builds preset `name` ("resnet50", "bert-large", "gpt") into *m.  `layers` > 0
 * rescales the number of repeated layers (blocks).  Returns 0, or -1 for an
 * unknown name or no memory. */
int ddp_model_preset(const char *name, int layers, struct ddp_model *m);

/* Frees the layer table of *m. */
void ddp_model_free(struct ddp_model *m);

#endif /* DDP_SIM_H */
