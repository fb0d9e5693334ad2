/* coverage.c - FLOPs and nodes inside te.ops groups (coverage.h). */
#include "planner/coverage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const movement_std[] = {
    "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Shape", "Size",
    "Concat", "Split", "Slice", "Gather", "GatherND", "GatherElements", "Expand", "Tile",
    "Cast", "CastLike", "Constant", "ConstantOfShape", "Range", "Pad", "Dropout", "Trilu",
    "ScatterND", "ScatterElements", "SplitToSequence", "DepthToSpace", "SpaceToDepth",
};
static const char *const movement_te[] = {
    "Reshape", "Identity", "MakeExtraOutput", "Embedding", "AllGather", "ReduceScatter",
    "Quantize",
};

bool tx_op_is_data_movement(const char *domain, const char *op_type)
{
    bool te = domain && strcmp(domain, "te.ops") == 0;
    if (domain && domain[0] && !te) return false;
    const char *const *list = te ? movement_te : movement_std;
    size_t n = te ? sizeof movement_te / sizeof *movement_te
                  : sizeof movement_std / sizeof *movement_std;
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], op_type) == 0) return true;
    return false;
}

static const tx_infer_value *val_of(const tx_ir_node *n, size_t slot, bool output,
                                    const tx_infer_value *vals, size_t n_vals)
{
    size_t count = output ? n->n_outputs : n->n_inputs;
    if (slot >= count) return NULL;
    int32_t v = output ? n->outputs[slot] : n->inputs[slot];
    if (v < 0 || (size_t)v >= n_vals || !vals[v].shape_known) return NULL;
    return &vals[v];
}

static bool numel(const tx_infer_value *v, double *out)
{
    uint64_t ne;
    if (!v || tx_shape_numel(&v->shape, &ne)) return false;
    *out = (double)ne;
    return true;
}

static bool is(const tx_ir_node *n, const char *domain, const char *op)
{
    return strcmp(n->domain, domain) == 0 && strcmp(n->op_type, op) == 0;
}

bool tx_node_flops(const tx_ir_node *n, const tx_infer_value *vals, size_t n_vals, double *out)
{
    *out = 0;
    if (tx_op_is_data_movement(n->domain, n->op_type)) return true;
    const tx_infer_value *y = val_of(n, 0, true, vals, n_vals);
    double ny;
    if (!numel(y, &ny)) return false;
    if (is(n, "te.ops", "Linear") || is(n, "te.ops", "GroupedLinear")) {
        /* weight [N, K]: the first parameter after the extra inputs */
        const tx_infer_value *x = val_of(n, 0, false, vals, n_vals);
        double nx;
        if (!numel(x, &nx) || x->shape.rank < 1) return false;
        double k = (double)x->shape.dims[x->shape.rank - 1];
        *out = 2.0 * ny * k;
        return true;
    }
    if (is(n, "", "MatMul")) {
        const tx_infer_value *a = val_of(n, 0, false, vals, n_vals);
        if (!a || a->shape.rank < 1) return false;
        *out = 2.0 * ny * (double)a->shape.dims[a->shape.rank - 1];
        return true;
    }
    if (is(n, "", "Gemm")) {
        const tx_infer_value *a = val_of(n, 0, false, vals, n_vals);
        if (!a || a->shape.rank != 2) return false;
        int64_t trans_a = 0;
        const tx_ir_attr *t = tx_ir_attr_find(n, "transA");
        if (t && t->type == TX_IR_ATTR_INT) trans_a = t->i;
        *out = 2.0 * ny * (double)a->shape.dims[trans_a ? 0 : 1];
        return true;
    }
    if (is(n, "te.ops", "DotProductAttention") || is(n, "", "Attention")) {
        const tx_infer_value *q = val_of(n, 0, false, vals, n_vals),
                             *k = val_of(n, 1, false, vals, n_vals);
        double nq;
        if (!numel(q, &nq) || !k || k->shape.rank < 3) return false;
        int64_t skv;
        if (n->domain[0]) {
            const tx_ir_attr *f = tx_ir_attr_find(n, "qkv_format");
            bool sbhd = f && f->type == TX_IR_ATTR_STRING && strcmp(f->s, "sbhd") == 0;
            skv = k->shape.dims[sbhd ? 0 : 1];
        } else {
            skv = k->shape.rank == 4 ? k->shape.dims[2] : k->shape.dims[1];
        }
        *out = 4.0 * nq * (double)skv;
        return true;
    }
    if (is(n, "", "Conv")) {
        const tx_infer_value *w = val_of(n, 1, false, vals, n_vals);
        if (!w || w->shape.rank < 3) return false;
        double per = 1;
        for (int32_t d = 1; d < w->shape.rank; d++) per *= (double)w->shape.dims[d];
        *out = 2.0 * ny * per;
        return true;
    }
    *out = ny;
    return true;
}

static int row_cmp(const void *a, const void *b)
{
    const tx_coverage_row *x = a, *y = b;
    if (x->flops != y->flops) return x->flops < y->flops ? 1 : -1;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    return strcmp(x->op, y->op);
}

void tx_plan_coverage_free(tx_plan_coverage *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n_left; i++) free(c->left[i].op);
    free(c->left);
    memset(c, 0, sizeof *c);
}

teexec_status *tx_plan_coverage_compute(const tx_fuser_plan *p, const tx_ir_graph *g,
                                        const tx_infer_value *vals, size_t n_vals,
                                        tx_plan_coverage *out)
{
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    for (size_t gi = 0; gi < p->n_groups; gi++) {
        const tx_plan_group *grp = &p->groups[gi];
        for (int32_t k = 0; k < grp->n_nodes; k++) {
            const tx_ir_node *n = &g->nodes[grp->nodes[k]];
            double f = 0;
            if (!tx_node_flops(n, vals, n_vals, &f)) out->unknown++;
            out->nodes_total++;
            out->flops_total += f;
            if (grp->kind == TX_GROUP_CHAIN) {
                out->nodes_te++;
                out->flops_te += f;
                continue;
            }
            char name[160];
            if (n->domain[0]) snprintf(name, sizeof name, "%s:%s", n->domain, n->op_type);
            else snprintf(name, sizeof name, "%s", n->op_type);
            size_t r = 0;
            while (r < out->n_left && strcmp(out->left[r].op, name) != 0) r++;
            if (r == out->n_left) {
                if (out->n_left == cap) {
                    size_t nc = cap ? 2 * cap : 16;
                    tx_coverage_row *nr = realloc(out->left, nc * sizeof *nr);
                    if (!nr) {
                        tx_plan_coverage_free(out);
                        return tx_oom();
                    }
                    out->left = nr;
                    cap = nc;
                }
                char *dup = strdup(name);
                if (!dup) {
                    tx_plan_coverage_free(out);
                    return tx_oom();
                }
                out->left[out->n_left++] =
                    (tx_coverage_row){dup, 0, 0.0, grp->nodes[k],
                                      tx_op_is_data_movement(n->domain, n->op_type)};
            }
            out->left[r].count++;
            out->left[r].flops += f;
        }
    }
    if (out->n_left) qsort(out->left, out->n_left, sizeof *out->left, row_cmp);
    return NULL;
}
