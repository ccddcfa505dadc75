/* pool.h: a parallel for-loop over independent tasks, for the commands and libraries
 * that read or write many files at once (one file per task). */
#ifndef DPRO_POOL_H
#define DPRO_POOL_H

/* The most threads dpro_pool_run starts for one loop. */
#define DPRO_POOL_MAX_THREADS 256

/* Returns the number of online CPUs, at least 1. */
int dpro_pool_cpus(void);

/* Returns the threads to run n tasks with: jobs (0: dpro_pool_cpus()), at most n and
 * DPRO_POOL_MAX_THREADS, at least 1. */
int dpro_pool_threads(int jobs, int n);

/* Calls fn(ctx, i) once for each i in [0, n), on up to threads threads, the caller's
 * among them; each thread takes the lowest index not yet taken, so tasks start in index
 * order. With fewer threads than asked when one cannot be started (the others take its
 * share); with threads <= 1 everything runs on the caller's thread, in order. Returns when
 * every call has returned. fn must be safe to run concurrently on different i. */
void dpro_pool_run(int n, int threads, void (*fn)(void *ctx, int i), void *ctx);

#endif
