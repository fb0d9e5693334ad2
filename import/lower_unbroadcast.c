/*
 * lower_unbroadcast.c - tx_lower_unbroadcast: a parameter the exporter
 * repeated over the batch becomes one parameter again.
 *
 * For static shapes the dynamo exporter folds Expand(param, [b, ...]) into
 * an initializer: ViT's class token [1, 1, h] is stored as [b, 1, h], OPT's
 * position rows as [b, s, h]. Run as it is, the model computes the same
 * numbers, but a trainer would give every batch row its own copy to update,
 * and the copies would drift apart where PyTorch trains one tensor.
 *
 * A float initializer of rank >= 2 whose dim 0 is b > 1 and whose b slices
 * are bitwise equal is replaced, under the same name, by its first slice
 * ([1, ...]). Readers that broadcast it back by themselves -- Add, Sub, Mul,
 * Div whose other operand has the full shape -- read the slice directly;
 * otherwise one Expand(slice, [b, ...]) restores the full shape for every
 * reader. The gradient of the slice is the sum over the copies, which is
 * the gradient of the one parameter; exec/prepare.c records that the
 * user's initializer is the slice repeated b times (tx_param_source.repeat)
 * so parameters and gradients go back to the user's layout. Initializers
 * that are graph inputs (callers may override them) or graph outputs are
 * left alone. Running the pass again changes nothing.
 */
#include "import/lower.h"
#include "import/lower_shape.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN "Unbroadcast"

static bool float_dtype(teexec_dtype d)
{
    return d == TEEXEC_DTYPE_FLOAT || d == TEEXEC_DTYPE_DOUBLE || d == TEEXEC_DTYPE_FLOAT16 ||
           d == TEEXEC_DTYPE_BFLOAT16;
}

/* dims[0] copies of one slice, bitwise. */
static bool repeated_slices(const tx_tensor *t)
{
    if (t->rank < 2 || t->dims[0] < 2 || !float_dtype(t->dtype)) return false;
    size_t slice = t->nbytes / (size_t)t->dims[0];
    if (slice == 0 || slice * (size_t)t->dims[0] != t->nbytes) return false;
    const unsigned char *p = t->data;
    for (int64_t i = 1; i < t->dims[0]; i++)
        if (memcmp(p, p + (size_t)i * slice, slice) != 0) return false;
    return true;
}

/* Every reader broadcasts the [1, ...] slice back to the full shape by
 * itself: an elementwise arithmetic op whose other operand has it. */
static teexec_status *readers_broadcast(tx_rw_graph *g, const char *name, const tx_tensor *t,
                                        bool *all)
{
    *all = true;
    size_t nc = 0;
    const tx_ir_use *uses = tx_rw_consumers(g, name, &nc);
    /* copy: shape derivation may rebuild the consumer index */
    tx_ir_use *u = malloc((nc ? nc : 1) * sizeof *u);
    if (!u) return tx_oom();
    memcpy(u, uses, nc * sizeof *u);
    for (size_t k = 0; k < nc && *all; k++) {
        tx_rw_node *n = tx_rw_node_at(g, (size_t)u[k].node);
        bool ew = n && !n->domain[0] && n->n_inputs == 2 &&
                  (!strcmp(n->op_type, "Add") || !strcmp(n->op_type, "Sub") ||
                   !strcmp(n->op_type, "Mul") || !strcmp(n->op_type, "Div"));
        if (!ew) {
            *all = false;
            break;
        }
        const char *other = n->inputs[1 - u[k].slot];
        tx_shape os;
        bool known = false;
        teexec_status *st = tx_lower_shape_of(g, other, &os, &known);
        if (st) {
            free(u);
            return st;
        }
        if (!known || os.rank != t->rank || memcmp(os.dims, t->dims, sizeof(int64_t) * (size_t)t->rank))
            *all = false;
    }
    free(u);
    return NULL;
}

static teexec_status *unbroadcast(tx_rw_graph *g, const char *name, tx_lower_report *r)
{
    tx_tensor t;
    if (!tx_rw_constant(g, name, &t)) return NULL;
    teexec_status *st = NULL;
    if (!repeated_slices(&t)) goto done;
    bool direct = false;
    st = readers_broadcast(g, name, &t, &direct);
    if (st) goto done;
    int64_t dims[TX_MAX_RANK];
    memcpy(dims, t.dims, sizeof(int64_t) * (size_t)t.rank);
    int64_t copies = dims[0];
    dims[0] = 1;
    tx_tensor slice;
    st = tx_tensor_wrap(&slice, t.dtype, t.rank, dims, t.data);
    if (st) goto done;
    if (direct) {
        st = tx_rw_set_initializer(g, name, &slice);
    } else {
        /* readers move to a fresh value made by Expand(slice, full shape) */
        char hint[256];
        snprintf(hint, sizeof hint, "%s_expanded", name);
        char *full = strdup(tx_rw_fresh_name(g, hint));
        snprintf(hint, sizeof hint, "%s_shape", name);
        char *shape_name = full ? strdup(tx_rw_fresh_name(g, hint)) : NULL;
        if (!full || !shape_name) st = tx_oom();
        if (!st) st = tx_rw_replace_uses(g, name, full);
        if (!st) st = tx_rw_set_initializer(g, name, &slice);
        tx_tensor shape;
        memset(&shape, 0, sizeof shape);
        int64_t rank = t.rank;
        if (!st) st = tx_tensor_alloc(&shape, TEEXEC_DTYPE_INT64, 1, &rank);
        if (!st) {
            memcpy(shape.data, t.dims, sizeof(int64_t) * (size_t)t.rank);
            st = tx_rw_set_initializer(g, shape_name, &shape);
        }
        tx_tensor_release(&shape);
        if (!st) {
            const char *ins[2] = {name, shape_name};
            const char *outs[1] = {full};
            char node[300];
            snprintf(node, sizeof node, "%s/Unbroadcast", name);
            st = tx_rw_add_node(g, "Expand", "", node, ins, 2, outs, 1, NULL);
        }
        free(full);
        free(shape_name);
    }
    (void)copies;
    if (!st) st = tx_lower_note_add(r, PATTERN, name, true, NULL);
done:
    tx_tensor_release(&t);
    return st;
}

teexec_status *tx_lower_unbroadcast(tx_rw_graph *g, tx_lower_report *r)
{
    /* candidate names first: the edits below add nodes and initializers */
    size_t cap = 16, n = 0;
    char **names = malloc(cap * sizeof *names);
    if (!names) return tx_oom();
    teexec_status *st = NULL;
    for (size_t i = 0; i < tx_rw_node_count(g) && !st; i++) {
        tx_rw_node *nd = tx_rw_node_at(g, i);
        if (!nd || nd->dead) continue;
        for (size_t k = 0; k < nd->n_inputs && !st; k++) {
            const char *v = nd->inputs[k];
            if (!v[0] || !tx_rw_is_initializer(g, v) || tx_rw_is_graph_input(g, v) ||
                tx_rw_is_graph_output(g, v))
                continue;
            bool seen = false;
            for (size_t j = 0; j < n && !seen; j++) seen = !strcmp(names[j], v);
            if (seen) continue;
            if (n == cap) {
                char **nn = realloc(names, 2 * cap * sizeof *names);
                if (!nn) {
                    st = tx_oom();
                    break;
                }
                names = nn;
                cap *= 2;
            }
            names[n] = strdup(v);
            if (!names[n]) st = tx_oom();
            else n++;
        }
    }
    for (size_t j = 0; j < n && !st; j++) st = unbroadcast(g, names[j], r);
    for (size_t j = 0; j < n; j++) free(names[j]);
    free(names);
    return st;
}
