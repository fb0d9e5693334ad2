/* parallel.c - fork-join loop (parallel.h) on POSIX threads. */
#include "base/parallel.h"

#include <pthread.h>
#include <stdbool.h>

typedef struct chunk {
    tx_parallel_fn fn;
    void *ctx;
    size_t begin, end;
    int worker;
    teexec_status *st;
} chunk;

static void *run_chunk(void *arg)
{
    chunk *c = arg;
    c->st = c->fn(c->ctx, c->begin, c->end, c->worker);
    return NULL;
}

teexec_status *tx_parallel_for(size_t n, int threads, tx_parallel_fn fn, void *ctx)
{
    if (threads > TX_PARALLEL_MAX_THREADS) threads = TX_PARALLEL_MAX_THREADS;
    if ((size_t)threads > n) threads = (int)n;
    if (threads < 2) return fn(ctx, 0, n, 0);
    chunk c[TX_PARALLEL_MAX_THREADS];
    pthread_t tid[TX_PARALLEL_MAX_THREADS];
    bool started[TX_PARALLEL_MAX_THREADS] = {false};
    for (int w = 0; w < threads; w++) {
        /* balanced: the first n % threads chunks get one item more */
        size_t base = n / (size_t)threads, extra = n % (size_t)threads, uw = (size_t)w;
        c[w] = (chunk){fn, ctx, uw * base + (uw < extra ? uw : extra), 0, w, NULL};
        c[w].end = c[w].begin + base + (uw < extra ? 1 : 0);
    }
    for (int w = 1; w < threads; w++)
        started[w] = pthread_create(&tid[w], NULL, run_chunk, &c[w]) == 0;
    run_chunk(&c[0]);
    for (int w = 1; w < threads; w++) {
        if (started[w]) pthread_join(tid[w], NULL);
        else run_chunk(&c[w]); /* could not start it: the caller runs it */
    }
    teexec_status *st = NULL;
    for (int w = 0; w < threads; w++) {
        if (!st) st = c[w].st;
        else if (c[w].st) teexec_status_destroy(c[w].st);
    }
    return st;
}
