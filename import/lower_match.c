/*
 * lower_match.c - structural helpers for the lowering patterns (see
 * lower_match.h).
 */
#include "import/lower_match.h"

#include <float.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void tx_lm_set_add(tx_lm_set *s, size_t node)
{
    if (tx_lm_set_has(s, node)) return;
    if (s->n == TX_LM_MAX_NODES) {
        s->overflow = true;
        return;
    }
    s->idx[s->n++] = node;
}

bool tx_lm_set_has(const tx_lm_set *s, size_t node)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->idx[i] == node) return true;
    return false;
}

size_t tx_lm_set_first(const tx_lm_set *s)
{
    size_t f = s->idx[0];
    for (size_t i = 1; i < s->n; i++)
        if (s->idx[i] < f) f = s->idx[i];
    return f;
}

tx_rw_node *tx_lm_node(tx_rw_graph *g, int64_t index)
{
    if (index < 0) return NULL;
    tx_rw_node *n = tx_rw_node_at(g, (size_t)index);
    return n && !n->dead ? n : NULL;
}

bool tx_lm_is(const tx_rw_node *n, const char *domain, const char *op_type)
{
    if (!n || n->dead) return false;
    const char *d = n->domain ? n->domain : "";
    if (strcmp(d, "ai.onnx") == 0) d = "";
    return strcmp(d, domain) == 0 && strcmp(n->op_type, op_type) == 0;
}

int64_t tx_lm_producer_op(tx_rw_graph *g, const char *value, const char *domain,
                          const char *op_type)
{
    if (!value || !*value) return -1;
    int64_t p = tx_rw_producer(g, value, NULL);
    return tx_lm_is(tx_lm_node(g, p), domain, op_type) ? p : -1;
}

int64_t tx_lm_sole_reader(tx_rw_graph *g, const char *value)
{
    if (tx_rw_is_graph_output(g, value)) return -1;
    size_t n = 0;
    const tx_ir_use *u = tx_rw_consumers(g, value, &n);
    if (n == 0) return -1;
    for (size_t i = 1; i < n; i++)
        if (u[i].node != u[0].node) return -1;
    return u[0].node;
}

size_t tx_lm_reader_count(tx_rw_graph *g, const char *value)
{
    size_t n = 0, distinct = 0;
    const tx_ir_use *u = tx_rw_consumers(g, value, &n);
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++) seen = u[j].node == u[i].node;
        if (!seen) distinct++;
    }
    return distinct;
}

bool tx_lm_reads_only_within(tx_rw_graph *g, const char *value, const tx_lm_set *s)
{
    if (tx_rw_is_graph_output(g, value)) return false;
    size_t n = 0;
    const tx_ir_use *u = tx_rw_consumers(g, value, &n);
    for (size_t i = 0; i < n; i++)
        if (!tx_lm_set_has(s, (size_t)u[i].node)) return false;
    return true;
}

const char *tx_lm_other_input(const tx_rw_node *n, const char *value)
{
    if (!n || n->n_inputs != 2 || !value) return NULL;
    if (strcmp(n->inputs[0], value) == 0) return n->inputs[1];
    if (strcmp(n->inputs[1], value) == 0) return n->inputs[0];
    return NULL;
}

bool tx_lm_close(double got, double want)
{
    /* Exporters round the exact constant to float32 (half an ulp), and
     * some write it with 7-8 significant digits: 4 ulps covers both. */
    double tol = 4.0 * (double)FLT_EPSILON * fabs(want);
    if (tol == 0.0) tol = (double)FLT_MIN;
    return isfinite(got) && fabs(got - want) <= tol;
}

bool tx_lm_scalar_is(tx_rw_graph *g, const char *value, double want)
{
    double v;
    if (!value || !*value || !tx_rw_scalar(g, value, &v)) return false;
    return tx_lm_close(v, want);
}

int tx_lm_scalar_operand(tx_rw_graph *g, const tx_rw_node *n, double *value)
{
    if (!n || n->n_inputs != 2) return -1;
    for (int k = 0; k < 2; k++)
        if (*n->inputs[k] && tx_rw_scalar(g, n->inputs[k], value)) return k;
    return -1;
}

static bool axes_are_last(const int64_t *axes, size_t n, int32_t rank)
{
    if (n != 1) return false;
    if (axes[0] == -1) return true;
    return rank > 0 && axes[0] == rank - 1;
}

bool tx_lm_reduces_last_axis_keepdims(tx_rw_graph *g, size_t node, const char *x)
{
    const tx_rw_attr *kd = tx_rw_get_attr(g, node, "keepdims");
    if (kd && (kd->type != TX_IR_ATTR_INT || kd->i != 1)) return false;
    tx_rw_value_type vt;
    int32_t rank = x && tx_rw_value_type_of(g, x, &vt) ? vt.rank : -1;

    const tx_rw_attr *a = tx_rw_get_attr(g, node, "axes");
    if (a) return a->type == TX_IR_ATTR_INTS && axes_are_last(a->ints, a->n_ints, rank);

    tx_rw_node *n = tx_lm_node(g, (int64_t)node);
    if (!n || n->n_inputs < 2 || !*n->inputs[1]) return false; /* all axes */
    tx_tensor t;
    if (!tx_rw_constant(g, n->inputs[1], &t)) return false;
    bool ok = false;
    if (t.numel == 1 && t.dtype == TEEXEC_DTYPE_INT64)
        ok = axes_are_last((const int64_t *)t.data, 1, rank);
    tx_tensor_release(&t);
    return ok;
}

bool tx_lm_is_param(tx_rw_graph *g, const char *value)
{
    return value && *value && tx_rw_is_initializer(g, value) && !tx_rw_is_graph_input(g, value);
}

void tx_lm_remove_all(tx_rw_graph *g, const tx_lm_set *s)
{
    for (size_t i = 0; i < s->n; i++) tx_rw_remove_node(g, s->idx[i]);
}

char *tx_lm_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* The output name of a new node: `out`, or a fresh one from hint + suffix. */
static char *out_name(tx_rw_graph *g, const char *hint, const char *suffix, const char *out)
{
    if (out) return tx_lm_strdup(out);
    char nm[512];
    snprintf(nm, sizeof nm, "%s%s", hint, suffix);
    return tx_lm_strdup(tx_rw_fresh_name(g, nm));
}

teexec_status *tx_lm_add_transpose(tx_rw_graph *g, const char *in, const int64_t *perm,
                                   size_t n, const char *hint, const char *out, char **made)
{
    if (made) *made = NULL;
    char *o = out_name(g, hint, "_transposed", out);
    char nm[512];
    snprintf(nm, sizeof nm, "%s/Transpose", hint);
    const char *node = o ? tx_rw_fresh_name(g, nm) : NULL;
    size_t idx = 0;
    const char *ins[1] = {in}, *outs[1] = {o};
    teexec_status *st = node ? tx_rw_add_node(g, "Transpose", "", node, ins, 1, outs, 1, &idx)
                             : tx_oom();
    if (!st) st = tx_rw_set_ints(g, idx, "perm", perm, n);
    if (st || !made) free(o);
    else *made = o;
    return st;
}

teexec_status *tx_lm_add_reshape(tx_rw_graph *g, const char *in, const int64_t *dims, size_t n,
                                 const char *hint, const char *out, char **made)
{
    if (made) *made = NULL;
    tx_tensor shape;
    int64_t len = (int64_t)n;
    TX_TRY(tx_tensor_alloc(&shape, TEEXEC_DTYPE_INT64, 1, &len));
    memcpy(shape.data, dims, n * sizeof *dims);
    char *sname = out_name(g, hint, "_shape", NULL);
    teexec_status *st = sname ? tx_rw_set_initializer(g, sname, &shape) : tx_oom();
    tx_tensor_release(&shape);
    char *o = st ? NULL : out_name(g, hint, "_reshaped", out);
    if (!st && !o) st = tx_oom();
    char nm[512];
    snprintf(nm, sizeof nm, "%s/Reshape", hint);
    const char *node = st ? NULL : tx_rw_fresh_name(g, nm);
    if (!st && !node) st = tx_oom();
    const char *ins[2] = {in, sname}, *outs[1] = {o};
    if (!st) st = tx_rw_add_node(g, "Reshape", "", node, ins, 2, outs, 1, NULL);
    free(sname);
    if (st || !made) free(o);
    else *made = o;
    return st;
}
