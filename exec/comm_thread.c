/* comm_thread.c - the in-process thread backend of teexec_comm (comm.h):
 * world_size ranks share one hub (mutex, condition variable, the posted
 * buffers). A collective is two barriers: every rank posts its buffers and
 * waits for the others; each then computes its own result reading every
 * rank's send buffer in rank order (the same order on every rank, so the
 * same bits) into its private scratch; a second barrier guarantees nobody
 * still reads a send buffer when results are written, which makes
 * send == recv safe. Waits use CLOCK_MONOTONIC deadlines; the first
 * timeout or abort fails the hub for every rank. */
#include "exec/comm.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_ALL_REDUCE = 1, OP_ALL_GATHER, OP_REDUCE_SCATTER, OP_BARRIER };

static const char *op_name(int op)
{
    switch (op) {
    case OP_ALL_REDUCE: return "all_reduce_sum";
    case OP_ALL_GATHER: return "all_gather";
    case OP_REDUCE_SCATTER: return "reduce_scatter";
    default: return "barrier";
    }
}

typedef struct hub {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int world, timeout_ms, refs;
    int arrived;
    uint64_t gen;        /* barrier generation */
    bool failed;
    char reason[384];
    /* per rank, posted before the first barrier of a collective */
    const void **send;
    int *op;
    teexec_dtype *dt;
    size_t *count;
} hub;

typedef struct rank_state {
    hub *h;
    void *scratch;
    size_t scratch_bytes;
} rank_state;

/* Under h->mu. */
static void fail_locked(hub *h, const char *reason)
{
    if (!h->failed) {
        h->failed = true;
        snprintf(h->reason, sizeof h->reason, "%s", reason);
    }
    pthread_cond_broadcast(&h->cv);
}

static teexec_status *failed_status(const hub *h, int rank, const char *what)
{
    return tx_error(TEEXEC_ERR_COMM, "rank %d: %s failed: %s", rank, what, h->reason);
}

static void deadline_in(struct timespec *ts, int ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

/* Waits for every rank; fails the hub after the timeout. */
static teexec_status *wait_all(hub *h, int rank, const char *what)
{
    struct timespec dl;
    deadline_in(&dl, h->timeout_ms);
    pthread_mutex_lock(&h->mu);
    if (h->failed) {
        teexec_status *st = failed_status(h, rank, what);
        pthread_mutex_unlock(&h->mu);
        return st;
    }
    uint64_t my = h->gen;
    if (++h->arrived == h->world) {
        h->arrived = 0;
        h->gen++;
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
        return NULL;
    }
    while (h->gen == my && !h->failed) {
        int rc = pthread_cond_timedwait(&h->cv, &h->mu, &dl);
        if (rc == ETIMEDOUT && h->gen == my && !h->failed) {
            char why[200];
            snprintf(why, sizeof why,
                     "rank %d waited %d ms in %s for %d of %d ranks (a rank failed, hangs or "
                     "called another collective)",
                     rank, h->timeout_ms, what, h->world - h->arrived, h->world);
            fail_locked(h, why);
        }
    }
    teexec_status *st = h->gen == my ? failed_status(h, rank, what) : NULL;
    pthread_mutex_unlock(&h->mu);
    return st;
}

static void hub_fail(hub *h, const char *reason)
{
    pthread_mutex_lock(&h->mu);
    fail_locked(h, reason);
    pthread_mutex_unlock(&h->mu);
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even */
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* dst[i] = sum over q in 0..W-1 of src_q[off + i], in that order. */
static void sum_ranks(const hub *h, teexec_dtype dt, size_t off, size_t n, void *dst)
{
    if (dt == TEEXEC_DTYPE_DOUBLE) {
        double *d = dst;
        for (size_t i = 0; i < n; i++) {
            double a = ((const double *)h->send[0])[off + i];
            for (int q = 1; q < h->world; q++) a += ((const double *)h->send[q])[off + i];
            d[i] = a;
        }
    } else if (dt == TEEXEC_DTYPE_FLOAT) {
        float *d = dst;
        for (size_t i = 0; i < n; i++) {
            float a = ((const float *)h->send[0])[off + i];
            for (int q = 1; q < h->world; q++) a += ((const float *)h->send[q])[off + i];
            d[i] = a;
        }
    } else {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) {
            float a = from_bf16(((const uint16_t *)h->send[0])[off + i]);
            for (int q = 1; q < h->world; q++)
                a += from_bf16(((const uint16_t *)h->send[q])[off + i]);
            d[i] = to_bf16(a);
        }
    }
}

static teexec_status *scratch(rank_state *s, size_t bytes, void **out)
{
    if (bytes > s->scratch_bytes) {
        void *p = realloc(s->scratch, bytes);
        if (!p) return tx_oom();
        s->scratch = p;
        s->scratch_bytes = bytes;
    }
    *out = s->scratch;
    return NULL;
}

/* One collective: post, wait, check that every rank called the same one,
 * compute (into scratch or straight into recv), wait, copy out. */
static teexec_status *collective(teexec_comm *c, int op, teexec_dtype dt, const void *send,
                                 void *recv, size_t count)
{
    rank_state *s = c->state;
    hub *h = s->h;
    const char *what = op_name(op);
    pthread_mutex_lock(&h->mu);
    h->send[c->rank] = send;
    h->op[c->rank] = op;
    h->dt[c->rank] = dt;
    h->count[c->rank] = count;
    pthread_mutex_unlock(&h->mu);
    TX_TRY(wait_all(h, c->rank, what));
    /* Every rank reads the same posts, so every rank reaches the same
     * verdict; failing the hub as well stops the others' next call. */
    for (int q = 1; q < h->world; q++) {
        if (h->op[q] != h->op[0] || h->dt[q] != h->dt[0] || h->count[q] != h->count[0]) {
            char why[256];
            snprintf(why, sizeof why,
                     "mismatched collectives: rank 0 called %s (dtype %d, %zu elements), rank %d "
                     "called %s (dtype %d, %zu elements)",
                     op_name(h->op[0]), (int)h->dt[0], h->count[0], q, op_name(h->op[q]),
                     (int)h->dt[q], h->count[q]);
            hub_fail(h, why);
            return failed_status(h, c->rank, what);
        }
    }
    size_t es = tx_comm_dtype_size(dt);
    size_t n_out = op == OP_ALL_GATHER ? count * (size_t)h->world : count;
    void *tmp = NULL;
    teexec_status *st = op == OP_BARRIER ? NULL : scratch(s, n_out * es + 1, &tmp);
    if (st) {
        /* the others must not wait for this rank until the timeout */
        hub_fail(h, "a rank ran out of memory");
        return st;
    }
    if (op == OP_ALL_REDUCE) {
        sum_ranks(h, dt, 0, count, tmp);
    } else if (op == OP_REDUCE_SCATTER) {
        sum_ranks(h, dt, (size_t)c->rank * count, count, tmp);
    } else if (op == OP_ALL_GATHER) {
        for (int q = 0; q < h->world; q++)
            memcpy((char *)tmp + (size_t)q * count * es, h->send[q], count * es);
    }
    TX_TRY(wait_all(h, c->rank, what));
    if (tmp && n_out) memcpy(recv, tmp, n_out * es);
    return NULL;
}

static teexec_status *t_all_reduce(teexec_comm *c, teexec_dtype dt, const void *send, void *recv,
                                   size_t count)
{
    return collective(c, OP_ALL_REDUCE, dt, send, recv, count);
}

static teexec_status *t_all_gather(teexec_comm *c, teexec_dtype dt, const void *send, void *recv,
                                   size_t count)
{
    return collective(c, OP_ALL_GATHER, dt, send, recv, count);
}

static teexec_status *t_reduce_scatter(teexec_comm *c, teexec_dtype dt, const void *send,
                                       void *recv, size_t count)
{
    return collective(c, OP_REDUCE_SCATTER, dt, send, recv, count);
}

static teexec_status *t_barrier(teexec_comm *c)
{
    return collective(c, OP_BARRIER, TEEXEC_DTYPE_FLOAT, NULL, NULL, 0);
}

static void t_abort(teexec_comm *c, const char *reason)
{
    rank_state *s = c->state;
    char why[384];
    snprintf(why, sizeof why, "rank %d aborted: %s", c->rank, reason);
    hub_fail(s->h, why);
}

static void hub_free(hub *h)
{
    pthread_cond_destroy(&h->cv);
    pthread_mutex_destroy(&h->mu);
    free(h->send);
    free(h->op);
    free(h->dt);
    free(h->count);
    free(h);
}

static void t_destroy(teexec_comm *c)
{
    rank_state *s = c->state;
    hub *h = s->h;
    pthread_mutex_lock(&h->mu);
    bool last = --h->refs == 0;
    pthread_mutex_unlock(&h->mu);
    if (last) hub_free(h);
    free(s->scratch);
    free(s);
    free(c);
}

static const tx_comm_vtable thread_vt = {
    .name = "threads",
    .all_reduce_sum = t_all_reduce,
    .all_gather = t_all_gather,
    .reduce_scatter = t_reduce_scatter,
    .barrier = t_barrier,
    .fail_group = t_abort,
    .destroy = t_destroy,
};

teexec_status *tx_comm_threads_create(int world, int timeout_ms, teexec_comm **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "teexec_comm_create_threads: NULL out");
    if (world < 1 || world > 4096)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "teexec_comm_create_threads: world size %d (1..4096)", world);
    for (int i = 0; i < world; i++) out[i] = NULL;
    hub *h = calloc(1, sizeof *h);
    if (!h) return tx_oom();
    h->world = world;
    h->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
    h->send = calloc((size_t)world, sizeof *h->send);
    h->op = calloc((size_t)world, sizeof *h->op);
    h->dt = calloc((size_t)world, sizeof *h->dt);
    h->count = calloc((size_t)world, sizeof *h->count);
    pthread_condattr_t ca;
    bool cv_ok = false, mu_ok = pthread_mutex_init(&h->mu, NULL) == 0;
    if (pthread_condattr_init(&ca) == 0) {
        cv_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 &&
                pthread_cond_init(&h->cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!h->send || !h->op || !h->dt || !h->count || !mu_ok || !cv_ok) {
        if (mu_ok) pthread_mutex_destroy(&h->mu);
        if (cv_ok) pthread_cond_destroy(&h->cv);
        free(h->send);
        free(h->op);
        free(h->dt);
        free(h->count);
        free(h);
        return tx_error(TEEXEC_ERR_NO_MEMORY, "teexec_comm_create_threads: cannot set up the hub");
    }
    for (int i = 0; i < world; i++) {
        teexec_comm *c = calloc(1, sizeof *c);
        rank_state *s = calloc(1, sizeof *s);
        if (!c || !s) {
            free(c);
            free(s);
            for (int j = 0; j < i; j++) {
                t_destroy(out[j]);
                out[j] = NULL;
            }
            if (i == 0) hub_free(h);
            return tx_oom();
        }
        s->h = h;
        c->vt = &thread_vt;
        c->rank = i;
        c->world_size = world;
        c->state = s;
        h->refs++;
        out[i] = c;
    }
    return NULL;
}
