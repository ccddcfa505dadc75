/*
 * cupti_share.h: CUPTI shared with a second activity client (cupti_share.c), for cupti.c.
 */
#ifndef DPRO_COLLECTOR_CUPTI_SHARE_H
#define DPRO_COLLECTOR_CUPTI_SHARE_H

#include <stdatomic.h>

#include <cupti.h>

#include "collector.h"

/* The latest correlation id the collector's CUPTI callback saw (at API entry). */
COLL_HIDDEN extern _Atomic uint32_t cupti_share_corr;

/* Notes correlation id corr seen at a call's entry (ids rise; threads race, the larger
 * stays). */
static inline void
cupti_share_saw(uint32_t corr)
{
    uint32_t last = atomic_load_explicit(&cupti_share_corr, memory_order_relaxed);
    while (corr > last &&
           !atomic_compare_exchange_weak_explicit(&cupti_share_corr, &last, corr,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

/* Sharing starts (unless DPRO_CUPTI_SHARE=0): lib is libcupti's handle; clock_callback says
 * that CUPTI stamps with the collector's clock, else stamp + offset is on it. Called once
 * CUPTI's activity is on. */
COLL_HIDDEN void cupti_share_init(void *lib, int clock_callback, int64_t offset);

/* The collector records activity kind itself: Kineto's disabling it is not passed on. */
COLL_HIDDEN void cupti_share_own(int kind);

/* Takes another client's buffer callbacks: CUPTI_SUCCESS when shared from now on, an error
 * when not sharing (the client is then CUPTI's, cupti=taken). */
COLL_HIDDEN CUptiResult cupti_share_register(CUpti_BuffersCallbackRequestFunc req,
                                             CUpti_BuffersCallbackCompleteFunc done);

/* Copies the records of buffer (CUPTI's completion of one of ours) that the other client
 * asked for into its buffers and hands them to it; CUPTI's thread, before we queue buffer. */
COLL_HIDDEN void cupti_share_deliver(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t valid,
                                     CUptiResult (*next_record)(uint8_t *, size_t,
                                                                CUpti_Activity **));

/* Writes the sharing's meta into the trace: its setting (DPRO_CUPTI_SHARE) at the start;
 * at the end (at_end), if it shared, cupti_shared*. */
COLL_HIDDEN void cupti_share_write_meta(dpro_writer *w, int at_end);

/* Forgets the sharing in a forked child. */
COLL_HIDDEN void cupti_share_forget(void);

#endif
