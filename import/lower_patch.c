/*
 * lower_patch.c - tx_lower_patch_conv (import/lower.h): a patch-embedding
 * Conv -> a te.ops Linear (+ Bias) over the image's patches.
 *
 * The form (a ViT's patch embedding, both exporters): Conv(x [b, c, H, W],
 * w [o, c, kh, kw], [bias [o]]) with strides = kernel, no padding, no
 * dilation, one group, and H, W whole multiples of kh, kw. Every output
 * pixel is then the dot product of one non-overlapping patch with a row of
 * w, so the Conv is
 *     p = Reshape(Transpose(Reshape(x, [b, c, H/kh, kh, W/kw, kw]),
 *                           (0, 2, 4, 1, 3, 5)), [b, P, c*kh*kw])   P = H/kh * W/kw
 *     y = Linear(p, w as [o, c*kh*kw]) [+ Bias]                    [b, P, o]
 * and the layout the graph expects comes back with Transpose(0, 2, 1) and a
 * Reshape to [b, o, H/kh, W/kw]; when the Conv's only reader is the usual
 * Reshape to [b, o, P] followed by Transpose(0, 2, 1) (flatten(2) then
 * transpose(1, 2)), those two are dropped instead and the Linear writes
 * their result directly.
 *
 * The weight keeps its name and its bytes (w's rows, row-major over c, kh,
 * kw, are exactly the Linear's [o, c*kh*kw] rows); the Linear records
 * weight_source, weight_layout "NK" and weight_shape [o, c, kh, kw], so
 * tx_param_sources / tx_param_to_original give its gradient back in the
 * Conv's shape, and bias_source on the Bias.
 *
 * Declined with a note: any other Conv (padding, dilation, groups, strides
 * that are not the kernel, an image that is not whole patches, a weight
 * that is not an initializer read by this Conv alone, shapes that cannot
 * be derived).
 */
#include "import/lower.h"
#include "import/lower_match.h"
#include "import/lower_shape.h"

#include "format/te_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PATTERN "Linear(patch Conv)"

typedef struct patch_plan {
    const char *x, *w, *bias, *out;
    int64_t b, c, h, wd, o, kh, kw;
    int64_t tail_reshape, tail_transpose; /* -1 when the layout is rebuilt */
} patch_plan;

static bool ints_all(const tx_rw_attr *a, int64_t v)
{
    for (size_t i = 0; i < a->n_ints; i++)
        if (a->ints[i] != v) return false;
    return true;
}

/* The Reshape(conv, [b, o, P]) -> Transpose(0, 2, 1) after the Conv. */
static void find_tail(tx_rw_graph *g, patch_plan *p)
{
    p->tail_reshape = p->tail_transpose = -1;
    int64_t ri = tx_lm_sole_reader(g, p->out);
    tx_rw_node *rs = tx_lm_node(g, ri);
    if (!tx_lm_is(rs, "", "Reshape") || rs->n_inputs != 2 || strcmp(rs->inputs[0], p->out)) return;
    tx_shape sh;
    bool known = false;
    teexec_status *st = tx_lower_shape_of(g, rs->outputs[0], &sh, &known);
    if (st) {
        teexec_status_destroy(st);
        return;
    }
    int64_t patches = (p->h / p->kh) * (p->wd / p->kw);
    if (!known || sh.rank != 3 || sh.dims[0] != p->b || sh.dims[1] != p->o ||
        sh.dims[2] != patches)
        return;
    int64_t ti = tx_lm_sole_reader(g, rs->outputs[0]);
    tx_rw_node *tn = tx_lm_node(g, ti);
    const tx_rw_attr *perm = tn ? tx_rw_get_attr(g, (size_t)ti, "perm") : NULL;
    if (!tx_lm_is(tn, "", "Transpose") || !perm || perm->type != TX_IR_ATTR_INTS ||
        perm->n_ints != 3 || perm->ints[0] != 0 || perm->ints[1] != 2 || perm->ints[2] != 1)
        return;
    p->tail_reshape = ri;
    p->tail_transpose = ti;
}

/* NULL when Conv node i lowers (p filled), else why not. */
static const char *analyze(tx_rw_graph *g, size_t i, patch_plan *p, char *why, size_t whysz)
{
    memset(p, 0, sizeof *p);
    tx_rw_node *n = tx_lm_node(g, (int64_t)i);
    if (n->n_inputs < 2 || n->n_outputs != 1 || !n->inputs[0][0] || !n->inputs[1][0])
        return "a Conv without its data and weight";
    p->x = n->inputs[0];
    p->w = n->inputs[1];
    p->bias = n->n_inputs > 2 && n->inputs[2][0] ? n->inputs[2] : NULL;
    p->out = n->outputs[0];
    if (!tx_lm_is_param(g, p->w)) return "the weight is not an initializer";
    tx_rw_value_type wt;
    if (!tx_rw_value_type_of(g, p->w, &wt) || wt.rank != 4 || !tx_dtype_is_real(wt.dtype))
        return "the weight is not a 4-D float tensor (only 2-D patch Convs are lowered)";
    if (tx_lm_sole_reader(g, p->w) != (int64_t)i)
        return "the weight is read by other nodes too (its layout changes here)";
    p->o = wt.dims[0];
    p->kh = wt.dims[2];
    p->kw = wt.dims[3];
    const tx_rw_attr *a;
    if ((a = tx_rw_get_attr(g, i, "group")) && (a->type != TX_IR_ATTR_INT || a->i != 1))
        return "a grouped Conv";
    if ((a = tx_rw_get_attr(g, i, "auto_pad")) &&
        (a->type != TX_IR_ATTR_STRING || (strcmp(a->s, "NOTSET") && strcmp(a->s, "VALID"))))
        return "auto_pad pads the image";
    if ((a = tx_rw_get_attr(g, i, "pads")) && (a->type != TX_IR_ATTR_INTS || !ints_all(a, 0)))
        return "the Conv pads the image";
    if ((a = tx_rw_get_attr(g, i, "dilations")) &&
        (a->type != TX_IR_ATTR_INTS || !ints_all(a, 1)))
        return "a dilated Conv";
    a = tx_rw_get_attr(g, i, "strides");
    int64_t sh = 1, sw = 1;
    if (a) {
        if (a->type != TX_IR_ATTR_INTS || a->n_ints != 2) return "strides are not 2-D";
        sh = a->ints[0];
        sw = a->ints[1];
    }
    if (sh != p->kh || sw != p->kw) {
        snprintf(why, whysz, "strides [%lld, %lld] are not the kernel [%lld, %lld] (patches "
                 "overlap or leave gaps)", (long long)sh, (long long)sw, (long long)p->kh,
                 (long long)p->kw);
        return why;
    }
    if ((a = tx_rw_get_attr(g, i, "kernel_shape")) &&
        (a->type != TX_IR_ATTR_INTS || a->n_ints != 2 || a->ints[0] != p->kh ||
         a->ints[1] != p->kw))
        return "kernel_shape disagrees with the weight";
    tx_shape xs;
    bool known = false;
    teexec_dtype xdt;
    teexec_status *st = tx_lower_type_of(g, p->x, &xdt, &xs, &known);
    if (st) {
        teexec_status_destroy(st);
        known = false;
    }
    if (!known || xs.rank != 4) return "the image's shape [b, c, H, W] cannot be derived";
    p->b = xs.dims[0];
    p->c = xs.dims[1];
    p->h = xs.dims[2];
    p->wd = xs.dims[3];
    if (p->c != wt.dims[1]) return "the weight's input channels differ from the image's";
    if (xdt != TEEXEC_DTYPE_UNDEFINED && xdt != wt.dtype) return "image and weight types differ";
    if (p->kh < 1 || p->kw < 1 || p->h % p->kh || p->wd % p->kw) {
        snprintf(why, whysz, "the image [%lld, %lld] is not a whole number of [%lld, %lld] patches",
                 (long long)p->h, (long long)p->wd, (long long)p->kh, (long long)p->kw);
        return why;
    }
    if (p->bias) {
        tx_rw_value_type bt;
        if (!tx_lm_is_param(g, p->bias) || !tx_rw_value_type_of(g, p->bias, &bt) ||
            bt.rank != 1 || bt.dims[0] != p->o || bt.dtype != wt.dtype)
            return "the bias is not an [o] initializer";
    }
    find_tail(g, p);
    return NULL;
}

/* The weight [o, c, kh, kw] as [o, c*kh*kw] under its own name. */
static teexec_status *flatten_weight(tx_rw_graph *g, const char *w)
{
    tx_tensor t;
    if (!tx_rw_constant(g, w, &t))
        return tx_error(TEEXEC_ERR_BAD_MODEL, "patch Conv weight \"%s\" cannot be decoded", w);
    int64_t dims[2] = {t.dims[0], t.dims[1] * t.dims[2] * t.dims[3]};
    t.rank = 2;
    t.dims[0] = dims[0];
    t.dims[1] = dims[1];
    teexec_status *st = tx_rw_set_initializer(g, w, &t);
    tx_tensor_release(&t);
    return st;
}

static teexec_status *rewrite(tx_rw_graph *g, size_t i, const patch_plan *p, tx_lower_report *r)
{
    teexec_status *st = NULL;
    tx_rw_node *conv = tx_lm_node(g, (int64_t)i);
    char *name = tx_lm_strdup(conv->name && conv->name[0] ? conv->name : "patch_conv");
    char *x = tx_lm_strdup(p->x), *w = tx_lm_strdup(p->w);
    char *bias = p->bias ? tx_lm_strdup(p->bias) : NULL;
    const char *final_v = p->tail_transpose >= 0
                              ? tx_lm_node(g, p->tail_transpose)->outputs[0] : p->out;
    char *out = tx_lm_strdup(final_v);
    char *a = NULL, *bt = NULL, *patches = NULL, *lin_out = NULL, *y = NULL;
    if (!name || !x || !w || !out || (p->bias && !bias)) {
        st = tx_oom();
        goto done;
    }
    tx_rw_remove_node(g, i);
    if (p->tail_transpose >= 0) {
        tx_rw_remove_node(g, (size_t)p->tail_reshape);
        tx_rw_remove_node(g, (size_t)p->tail_transpose);
    }
    int64_t ph = p->h / p->kh, pw = p->wd / p->kw, k = p->c * p->kh * p->kw;
    const int64_t d6[6] = {p->b, p->c, ph, p->kh, pw, p->kw};
    const int64_t perm6[6] = {0, 2, 4, 1, 3, 5};
    const int64_t d3[3] = {p->b, ph * pw, k};
    char hint[512];
    snprintf(hint, sizeof hint, "%s/patches", name);
    if ((st = tx_lm_add_reshape(g, x, d6, 6, hint, NULL, &a))) goto done;
    if ((st = tx_lm_add_transpose(g, a, perm6, 6, hint, NULL, &bt))) goto done;
    if ((st = tx_lm_add_reshape(g, bt, d3, 3, hint, NULL, &patches))) goto done;
    if ((st = flatten_weight(g, w))) goto done;

    /* the Linear's (and Bias's) output: the final value, or a fresh one
     * when the Conv's layout is rebuilt after */
    bool direct = p->tail_transpose >= 0;
    snprintf(hint, sizeof hint, "%s/linear_out", name);
    lin_out = tx_lm_strdup(direct && !bias ? out : tx_rw_fresh_name(g, hint));
    if (!lin_out) {
        st = tx_oom();
        goto done;
    }
    const char *lin_in[2] = {patches, w};
    const char *lo[1] = {lin_out};
    size_t li = 0;
    const char *lname = tx_rw_fresh_name(g, name);
    if (!lname) {
        st = tx_oom();
        goto done;
    }
    if ((st = tx_rw_add_node(g, "Linear", TX_TE_DOMAIN, lname, lin_in, 2, lo, 1, &li))) goto done;
    const int64_t wshape[4] = {p->o, p->c, p->kh, p->kw};
    if ((st = tx_rw_set_string(g, li, "weight_source", w)) ||
        (st = tx_rw_set_string(g, li, "weight_layout", "NK")) ||
        (st = tx_rw_set_ints(g, li, "weight_shape", wshape, 4)))
        goto done;
    y = tx_lm_strdup(lin_out);
    if (!y) {
        st = tx_oom();
        goto done;
    }
    if (bias) {
        free(y);
        snprintf(hint, sizeof hint, "%s/bias_out", name);
        y = tx_lm_strdup(direct ? out : tx_rw_fresh_name(g, hint));
        snprintf(hint, sizeof hint, "%s/Bias", name);
        const char *bname = y ? tx_rw_fresh_name(g, hint) : NULL;
        if (!bname) {
            st = tx_oom();
            goto done;
        }
        const char *b_in[2] = {lin_out, bias}, *b_out[1] = {y};
        size_t bi = 0;
        if ((st = tx_rw_add_node(g, "Bias", TX_TE_DOMAIN, bname, b_in, 2, b_out, 1, &bi)) ||
            (st = tx_rw_set_string(g, bi, "bias_source", bias)))
            goto done;
    }
    if (!direct) {
        /* [b, P, o] -> [b, o, P] -> [b, o, H/kh, W/kw], the Conv's output */
        const int64_t perm3[3] = {0, 2, 1};
        const int64_t d4[4] = {p->b, p->o, ph, pw};
        char *t = NULL;
        snprintf(hint, sizeof hint, "%s/layout", name);
        if ((st = tx_lm_add_transpose(g, y, perm3, 3, hint, NULL, &t))) goto done;
        st = tx_lm_add_reshape(g, t, d4, 4, hint, out, NULL);
        free(t);
        if (st) goto done;
    }
    st = tx_lower_note_add(r, PATTERN, name, true, NULL);
done:
    free(name);
    free(x);
    free(w);
    free(bias);
    free(out);
    free(a);
    free(bt);
    free(patches);
    free(lin_out);
    free(y);
    return st;
}

teexec_status *tx_lower_patch_conv(tx_rw_graph *g, tx_lower_report *r)
{
    size_t count = tx_rw_node_count(g); /* nodes added here are never Convs */
    for (size_t i = 0; i < count; i++) {
        tx_rw_node *n = tx_lm_node(g, (int64_t)i);
        if (!tx_lm_is(n, "", "Conv")) continue;
        patch_plan p;
        char why[256];
        const char *no = analyze(g, i, &p, why, sizeof why);
        TX_TRY(no ? tx_lower_note_add(r, PATTERN, n->name, false, no) : rewrite(g, i, &p, r));
    }
    return NULL;
}
