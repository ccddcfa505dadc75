/* pool.c: the parallel for-loop of pool.h. */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

int
dpro_pool_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

int
dpro_pool_threads(int jobs, int n)
{
    int t = jobs > 0 ? jobs : dpro_pool_cpus();
    if (t > n)
        t = n;
    if (t > DPRO_POOL_MAX_THREADS)
        t = DPRO_POOL_MAX_THREADS;
    return t < 1 ? 1 : t;
}

/* The loop the threads share. */
typedef struct pool {
    int n;
    void (*fn)(void *ctx, int i);
    void *ctx;
    atomic_int next;
} pool;

static void *
pool_worker(void *arg)
{
    pool *p = arg;
    for (int i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        p->fn(p->ctx, i);
    return NULL;
}

void
dpro_pool_run(int n, int threads, void (*fn)(void *ctx, int i), void *ctx)
{
    pool p = {.n = n, .fn = fn, .ctx = ctx};
    pthread_t th[DPRO_POOL_MAX_THREADS];
    int started = 0;
    atomic_init(&p.next, 0);
    for (int i = 1; i < threads && i < n && i < DPRO_POOL_MAX_THREADS; i++)
        if (pthread_create(&th[started], NULL, pool_worker, &p) == 0)
            started++;
    pool_worker(&p);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
}
