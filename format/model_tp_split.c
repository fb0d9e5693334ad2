/* model_tp_split.c - a tensor-parallel rank of a te.ops model
 * (model_tp_split.h). */
#include "format/model_tp_split.h"

#include "format/atomic_write.h"
#include "format/model_write.h"
#include "format/te_schema.h"
#include "format/tensor_proto.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TE_DOMAIN "te.ops"


static bool is_te(const Onnx__NodeProto *n, const char *op)
{
    return n->domain && !strcmp(n->domain, TE_DOMAIN) && n->op_type && !strcmp(n->op_type, op);
}

/* Nodes (and graph outputs) reading value `name`. */
static size_t readers(const Onnx__GraphProto *g, const char *name, size_t *only)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_node; i++)
        for (size_t k = 0; k < g->node[i]->n_input; k++)
            if (g->node[i]->input[k] && !strcmp(g->node[i]->input[k], name)) {
                n++;
                *only = i;
            }
    for (size_t i = 0; i < g->n_output; i++)
        if (g->output[i]->name && !strcmp(g->output[i]->name, name)) n += 2; /* never "only" */
    return n;
}

static int init_index(const Onnx__GraphProto *g, const char *name)
{
    for (size_t i = 0; i < g->n_initializer; i++)
        if (g->initializer[i]->name && !strcmp(g->initializer[i]->name, name)) return (int)i;
    return -1;
}

/* The node between the two Linears can stay where it is on a shard. */
static bool passes_shard(const Onnx__NodeProto *n)
{
    if (!n->domain || strcmp(n->domain, TE_DOMAIN)) return false;
    const tx_te_op_schema *s = tx_te_schema_find(n->op_type);
    if (!s) return false;
    return tx_te_op_is_elementwise_act(s->id) || s->id == TX_TE_DROPOUT ||
           s->id == TX_TE_IDENTITY || s->id == TX_TE_CONSTANT_SCALE || s->id == TX_TE_BIAS;
}

typedef struct split {
    size_t l1, l2;          /* node indices */
    int w1, w2;             /* initializer indices */
    int bias[16];           /* Bias initializers on the chain */
    int n_bias;
    size_t chain[32];       /* nodes strictly between */
    int n_chain;
} split;

/* The chain starting at Linear node i, when it splits (H % world == 0). */
static bool find_chain(const tx_onnx_file *file, const Onnx__GraphProto *g, size_t i, int world,
                       bool *used_init, split *sp)
{
    const Onnx__NodeProto *n = g->node[i];
    if (!is_te(n, "Linear") || n->n_input < 2 || n->n_output < 1) return false;
    size_t dummy;
    int w1 = init_index(g, n->input[1]);
    if (w1 < 0 || used_init[w1] || readers(g, n->input[1], &dummy) != 1) return false;
    const Onnx__TensorProto *t1 = g->initializer[w1];
    if (t1->n_dims != 2 || t1->dims[0] % world != 0) return false;
    int64_t h = t1->dims[0];
    memset(sp, 0, sizeof *sp);
    sp->l1 = i;
    sp->w1 = w1;
    const char *v = n->output[0];
    for (;;) {
        size_t c;
        if (!v || !*v || readers(g, v, &c) != 1) return false;
        const Onnx__NodeProto *m = g->node[c];
        if (is_te(m, "Linear") && m->n_input >= 2 && m->input[0] && !strcmp(m->input[0], v)) {
            int w2 = init_index(g, m->input[1]);
            if (w2 < 0 || w2 == w1 || used_init[w2] || readers(g, m->input[1], &dummy) != 1)
                return false;
            const Onnx__TensorProto *t2 = g->initializer[w2];
            if (t2->n_dims != 2 || t2->dims[1] != h || m->n_output < 1) return false;
            sp->l2 = c;
            sp->w2 = w2;
            (void)file;
            return true;
        }
        if (!passes_shard(m) || m->n_output != 1 || !m->input[0] || strcmp(m->input[0], v) ||
            sp->n_chain == 32)
            return false;
        if (is_te(m, "Bias")) {
            if (m->n_input < 2 || sp->n_bias == 16) return false;
            int b = init_index(g, m->input[1]);
            if (b < 0 || used_init[b] || readers(g, m->input[1], &dummy) != 1) return false;
            const Onnx__TensorProto *tb = g->initializer[b];
            if (tb->n_dims != 1 || tb->dims[0] != h) return false;
            sp->bias[sp->n_bias++] = b;
        } else if (m->n_input > 1) {
            return false; /* an extra input (e.g. a row scale) is not sharded here */
        }
        sp->chain[sp->n_chain++] = c;
        v = m->output[0];
    }
}

/* Rows [lo, hi) of dim 0 (rows = true) or columns [lo, hi) of dim 1 of t. */
static teexec_status *cut(const tx_tensor *t, bool rows, int64_t lo, int64_t hi, tx_tensor *out)
{
    int64_t dims[2] = {t->dims[0], t->rank > 1 ? t->dims[1] : 1};
    size_t es = tx_dtype_elem_size(t->dtype);
    if (!es || t->dtype == TEEXEC_DTYPE_STRING)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "tensor parallel split: a %s weight",
                        teexec_dtype_name(t->dtype));
    int64_t od[2] = {rows ? hi - lo : dims[0], rows ? dims[1] : hi - lo};
    TX_TRY(tx_tensor_alloc(out, t->dtype, t->rank, od));
    const char *src = t->data;
    char *dst = out->data;
    if (rows) {
        memcpy(dst, src + (size_t)lo * (size_t)dims[1] * es, (size_t)(hi - lo) * (size_t)dims[1] * es);
    } else {
        for (int64_t r = 0; r < dims[0]; r++)
            memcpy(dst + (size_t)r * (size_t)(hi - lo) * es,
                   src + ((size_t)r * (size_t)dims[1] + (size_t)lo) * es, (size_t)(hi - lo) * es);
    }
    return NULL;
}

static teexec_status *replace_init(tx_mw *w, const tx_onnx_file *file, Onnx__TensorProto **slot,
                                   bool rows, int world, int rank)
{
    tx_tensor t, part;
    memset(&t, 0, sizeof t);
    memset(&part, 0, sizeof part);
    TX_TRY(tx_tensor_from_proto(*slot, file, &t));
    int64_t whole = rows ? t.dims[0] : t.dims[1], share = whole / world;
    teexec_status *st = cut(&t, rows, share * rank, share * (rank + 1), &part);
    if (!st) st = tx_mw_tensor(w, (*slot)->name, &part, slot);
    tx_tensor_release(&t);
    tx_tensor_release(&part);
    return st;
}

teexec_status *tx_model_write_tp_rank(const tx_onnx_file *file, int world, int rank,
                                      const char *path, int *n_split)
{
    *n_split = 0;
    if (!file || !file->model || !file->model->graph || !path)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor parallel split: NULL argument");
    if (world < 2 || rank < 0 || rank >= world)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "tensor parallel split: rank %d of %d ranks", rank, world);
    const Onnx__ModelProto *mp = file->model;
    const Onnx__GraphProto *gp = mp->graph;
    tx_mw *w;
    TX_TRY(tx_mw_create(&w));
    teexec_status *st = NULL;
    size_t nn = gp->n_node, ni = gp->n_initializer;
    bool *used = tx_mw_array(w, ni ? ni : 1, sizeof(bool));
    bool *in_chain = tx_mw_array(w, nn ? nn : 1, sizeof(bool));
    int *ar_after = tx_mw_array(w, nn ? nn : 1, sizeof(int)); /* 1: AllReduce after node */
    Onnx__TensorProto **inits = tx_mw_array(w, ni ? ni : 1, sizeof(*inits));
    Onnx__NodeProto **nodes = tx_mw_array(w, 2 * nn + 1, sizeof(*nodes));
    if (!used || !in_chain || !ar_after || !inits || !nodes) st = tx_oom();
    for (size_t i = 0; i < ni && !st; i++) inits[i] = gp->initializer[i];
    /* the chains' intermediate value names, whose recorded shapes go */
    const char **dropped = st ? NULL : tx_mw_array(w, nn ? nn : 1, sizeof(char *));
    size_t n_dropped = 0;
    if (!st && !dropped) st = tx_oom();
    for (size_t i = 0; i < nn && !st; i++) {
        split sp;
        if (in_chain[i] || !find_chain(file, gp, i, world, used, &sp)) continue;
        used[sp.w1] = used[sp.w2] = true;
        st = replace_init(w, file, &inits[sp.w1], true, world, rank);
        if (!st) st = replace_init(w, file, &inits[sp.w2], false, world, rank);
        for (int b = 0; b < sp.n_bias && !st; b++) {
            used[sp.bias[b]] = true;
            st = replace_init(w, file, &inits[sp.bias[b]], true, world, rank);
        }
        in_chain[sp.l1] = in_chain[sp.l2] = true;
        dropped[n_dropped++] = gp->node[sp.l1]->output[0];
        for (int k = 0; k < sp.n_chain; k++) {
            in_chain[sp.chain[k]] = true;
            dropped[n_dropped++] = gp->node[sp.chain[k]]->output[0];
        }
        ar_after[sp.l2] = 1;
        (*n_split)++;
    }
    if (!st && *n_split == 0)
        st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                      "tensor parallel split: no te.ops Linear -> [Bias, activation]* -> Linear "
                      "chain in the main graph splits over %d ranks (a te.ops model is needed: "
                      "weights as initializers read once, the hidden size a multiple of %d)",
                      world, world);
    /* nodes: the loaded ones, the second Linears' outputs renamed to their
     * partial value and an AllReduce after each */
    size_t k = 0;
    for (size_t i = 0; i < nn && !st; i++) {
        const Onnx__NodeProto *n = gp->node[i];
        if (!ar_after[i]) {
            nodes[k++] = (Onnx__NodeProto *)n;
            continue;
        }
        Onnx__NodeProto *l2 = tx_mw_node(w), *ar = tx_mw_node(w);
        char **outs = tx_mw_array(w, n->n_output, sizeof(char *));
        char **ar_in = tx_mw_array(w, 1, sizeof(char *)), **ar_out = tx_mw_array(w, 1, sizeof(char *));
        size_t len = strlen(n->output[0]) + strlen(n->name ? n->name : "linear") + 32;
        char *partial = tx_mw_alloc(w, len), *ar_name = tx_mw_alloc(w, len);
        if (!l2 || !ar || !outs || !ar_in || !ar_out || !partial || !ar_name) {
            st = tx_oom();
            break;
        }
        *l2 = *n;
        snprintf(partial, len, "%s/tp_partial", n->output[0]);
        snprintf(ar_name, len, "%s/tp_all_reduce", n->name && *n->name ? n->name : n->output[0]);
        for (size_t j = 0; j < n->n_output; j++) outs[j] = n->output[j];
        outs[0] = partial;
        l2->output = outs;
        ar->name = ar_name;
        ar->op_type = tx_mw_strdup(w, "AllReduce");
        ar->domain = tx_mw_strdup(w, TE_DOMAIN);
        ar_in[0] = partial;
        ar_out[0] = n->output[0];
        ar->input = ar_in;
        ar->n_input = 1;
        ar->output = ar_out;
        ar->n_output = 1;
        if (!ar->op_type || !ar->domain) {
            st = tx_oom();
            break;
        }
        nodes[k++] = l2;
        nodes[k++] = ar;
    }
    Onnx__ValueInfoProto **vi = NULL;
    size_t n_vi = 0;
    if (!st) {
        vi = tx_mw_array(w, gp->n_value_info ? gp->n_value_info : 1, sizeof(*vi));
        if (!vi) st = tx_oom();
        for (size_t i = 0; i < gp->n_value_info && !st; i++) {
            bool drop = false;
            for (size_t d = 0; d < n_dropped && !drop; d++)
                drop = gp->value_info[i]->name && !strcmp(gp->value_info[i]->name, dropped[d]);
            if (!drop) vi[n_vi++] = gp->value_info[i];
        }
    }
    if (!st) {
        Onnx__GraphProto g2 = *gp;
        g2.node = nodes;
        g2.n_node = k;
        g2.initializer = inits;
        g2.value_info = vi;
        g2.n_value_info = n_vi;
        Onnx__ModelProto m2 = *mp;
        m2.graph = &g2;
        uint8_t *bytes = NULL;
        size_t len = 0;
        st = tx_mw_pack(&m2, &bytes, &len);
        if (!st) {
            const void *pieces[1] = {bytes};
            size_t sizes[1] = {len};
            st = tx_write_file_atomic(path, 1, pieces, sizes);
        }
        free(bytes);
    }
    tx_mw_free(w);
    return st;
}
