/* run_profile.c - one run's profile rows and their table (run_profile.h). */
#include "exec/run_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void tx_run_profile_reset(tx_run_profile *p)
{
    p->n = 0;
    p->wall_ms = 0.0;
}

teexec_status *tx_run_profile_add(tx_run_profile *p, const char *name, int32_t group,
                                  bool backward, double ms)
{
    /* a run has as many rows as fuser groups and kernels (hundreds), and
     * a row is met once per group: the linear search stays cheap next to
     * the work it times */
    for (size_t i = p->n; i-- > 0;) {
        tx_run_profile_row *r = &p->rows[i];
        if (r->group == group && r->backward == backward && !strcmp(r->name, name)) {
            r->calls++;
            r->ms += ms;
            return NULL;
        }
    }
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        tx_run_profile_row *rows = realloc(p->rows, cap * sizeof *rows);
        if (!rows) return tx_oom();
        p->rows = rows;
        p->cap = cap;
    }
    tx_run_profile_row *r = &p->rows[p->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->group = group;
    r->backward = backward;
    r->calls = 1;
    r->ms = ms;
    return NULL;
}

void tx_run_profile_set_wall(tx_run_profile *p, double ms) { p->wall_ms = ms; }

teexec_status *tx_run_profile_text(const tx_run_profile *p, const char *device, const char *how,
                                   char **out_text)
{
    *out_text = NULL;
    double total = 0.0;
    for (size_t i = 0; i < p->n; i++) total += p->rows[i].ms;
    size_t cap = 512 + p->n * 160, len = 0;
    char *s = malloc(cap);
    if (!s) return tx_oom();
    len += (size_t)snprintf(s + len, cap - len, "run profile (%s, %s)\n", device, how);
    len += (size_t)snprintf(s + len, cap - len, "%-6s %-4s %-60s %8s %11s %9s %6s\n", "group",
                            "pass", "kernel", "calls", "total ms", "mean ms", "share");
    for (size_t i = 0; i < p->n; i++) {
        const tx_run_profile_row *r = &p->rows[i];
        char grp[16];
        if (r->group >= 0) snprintf(grp, sizeof grp, "%d", (int)r->group);
        else snprintf(grp, sizeof grp, "-");
        len += (size_t)snprintf(s + len, cap - len,
                                "%-6s %-4s %-60.60s %8llu %11.4f %9.4f %5.1f%%\n", grp,
                                r->backward ? "bwd" : "fwd", r->name,
                                (unsigned long long)r->calls, r->ms,
                                r->calls ? r->ms / (double)r->calls : 0.0,
                                total > 0 ? 100.0 * r->ms / total : 0.0);
    }
    snprintf(s + len, cap - len, "rows: %.4f ms; the run: %.4f ms\n", total, p->wall_ms);
    *out_text = s;
    return NULL;
}

teexec_status *tx_run_profile_copy(tx_run_profile *dst, const tx_run_profile *src)
{
    tx_run_profile c = {0};
    if (src->n) {
        c.rows = malloc(src->n * sizeof *c.rows);
        if (!c.rows) return tx_oom();
        memcpy(c.rows, src->rows, src->n * sizeof *c.rows);
    }
    c.n = c.cap = src->n;
    c.wall_ms = src->wall_ms;
    tx_run_profile_free(dst);
    *dst = c;
    return NULL;
}

void tx_run_profile_free(tx_run_profile *p)
{
    free(p->rows);
    memset(p, 0, sizeof *p);
}

double tx_run_profile_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}
