/*
 * lower_kv_cache.c - a lowered decoder with Hugging Face / Optimum KV
 * inputs turned into DotProductAttention's cache mode (docs/te-ops.md;
 * `teexec convert --kv-cache`), over a rewrite graph (import/rewrite.h).
 *
 * What it finds, for each te.ops DotProductAttention: its k (and v) is
 * Concat(past, new) along the sequence axis of [b, h_kv, s, d] tensors,
 * then Transposed to bshd, where `past` is a graph input
 * (past_key_values.N.key) and the Concat's output a graph output
 * (present.N.key); the attention is causal or masked by a mask computed
 * from an attention_mask input.
 *
 * What it writes: DotProductAttention reads the new k / v (transposed to
 * bshd) as k / v, the state inputs kv_cache.N.{key,value} [B, capacity,
 * h_kv, d] as k_cache / v_cache, and a new input cache_len [batch] int64,
 * with causal = 1 and no mask: a row's keys are its cache_len cached ones
 * and its new ones, each query seeing those at or before its position.
 * The past inputs, the presents and the attention_mask input go, with
 * everything only they fed (the mask's cone). position_ids stay.
 *
 * Declined with a status naming why (the graph then half edited, for
 * the caller to discard): no
 * attention of that form, a past read by anything but its Concat (a model
 * that counts positions from the past's length), an attention_mask still
 * read once the masks are gone, a past whose kv heads or head dim are
 * not fixed.
 *
 * Thread-safety: edits only the graph it is given.
 */
#include "import/lower.h"

#include "base/status.h"
#include "format/te_schema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOT_K (1 + TX_TE_DPA_IN_K)
#define SLOT_V (1 + TX_TE_DPA_IN_V)
#define SLOT_MASK (1 + TX_TE_DPA_IN_MASK)
#define SLOT_K_CACHE (1 + TX_TE_DPA_IN_K_CACHE)
#define SLOT_V_CACHE (1 + TX_TE_DPA_IN_V_CACHE)
#define SLOT_CACHE_LEN (1 + TX_TE_DPA_IN_CACHE_LEN)
#define N_SLOTS (1 + TX_TE_DPA_IN_CACHE_LEN + 1)

static bool is_op(const tx_rw_node *n, const char *domain, const char *op)
{
    return n && !n->dead && strcmp(n->domain, domain) == 0 && strcmp(n->op_type, op) == 0;
}

static bool perm_0213(const tx_rw_graph *g, size_t node)
{
    const tx_rw_attr *a = tx_rw_get_attr(g, node, "perm");
    return a && a->type == TX_IR_ATTR_INTS && a->n_ints == 4 && a->ints[0] == 0 &&
           a->ints[1] == 2 && a->ints[2] == 1 && a->ints[3] == 3;
}

/* One attention's k or v side: the Concat and its two inputs. */
typedef struct kv_side {
    const char *past, *fresh, *present; /* graph-owned names */
    bool repeated;                      /* read through a repeat of its kv heads */
    tx_rw_value_type type;              /* the past's declared type */
} kv_side;

/* value -> Transpose(0,2,1,3) -> Concat(axis 2 of 4, [past, fresh]) whose
 * output is a graph output and past a graph input. */
static bool match_side(tx_rw_graph *g, const char *value, kv_side *out, const char **why)
{
    size_t slot = 0;
    int64_t t = tx_rw_producer(g, value, &slot);
    tx_rw_node *tn = t >= 0 ? tx_rw_node_at(g, (size_t)t) : NULL;
    if (!is_op(tn, "", "Transpose") || !perm_0213(g, (size_t)t)) {
        *why = "its k / v is not a Transpose (0, 2, 1, 3) of a [b, h, s, d] tensor";
        return false;
    }
    const char *src = tn->inputs[0];
    /* GQA's repeat_kv left explicit: Reshape(Expand(Unsqueeze(kv, axis 2)))
     * repeats each kv head in turn, which is DotProductAttention's own
     * grouping (query head i reads kv head i / (h / h_kv)) */
    int64_t rs = tx_rw_producer(g, src, &slot);
    tx_rw_node *rn = rs >= 0 ? tx_rw_node_at(g, (size_t)rs) : NULL;
    if (is_op(rn, "", "Reshape")) {
        int64_t ex = tx_rw_producer(g, rn->inputs[0], &slot);
        tx_rw_node *en = ex >= 0 ? tx_rw_node_at(g, (size_t)ex) : NULL;
        int64_t us = en && is_op(en, "", "Expand") ? tx_rw_producer(g, en->inputs[0], &slot) : -1;
        tx_rw_node *un = us >= 0 ? tx_rw_node_at(g, (size_t)us) : NULL;
        tx_tensor axes = {0};
        bool axis2 = is_op(un, "", "Unsqueeze") && un->n_inputs == 2 &&
                     tx_rw_constant(g, un->inputs[1], &axes) && axes.numel == 1 &&
                     axes.dtype == TEEXEC_DTYPE_INT64 && ((const int64_t *)axes.data)[0] == 2;
        tx_tensor_release(&axes);
        if (!axis2) {
            *why = "its k / v is reshaped from something other than a repeat of kv heads";
            return false;
        }
        src = un->inputs[0];
        out->repeated = true;
    }
    int64_t c = tx_rw_producer(g, src, &slot);
    tx_rw_node *cn = c >= 0 ? tx_rw_node_at(g, (size_t)c) : NULL;
    const tx_rw_attr *ax = cn ? tx_rw_get_attr(g, (size_t)c, "axis") : NULL;
    if (!is_op(cn, "", "Concat") || cn->n_inputs != 2 || !ax || ax->type != TX_IR_ATTR_INT ||
        (ax->i != 2 && ax->i != -2)) {
        *why = "its k / v is not a Concat of a past and the new tokens along the sequence";
        return false;
    }
    if (!tx_rw_is_graph_input(g, cn->inputs[0]) || !tx_rw_is_graph_output(g, cn->outputs[0])) {
        *why = "its Concat does not read a past input and give a present output";
        return false;
    }
    if (!tx_rw_value_type_of(g, cn->inputs[0], &out->type) || out->type.rank != 4 ||
        out->type.dims[1] < 1 || out->type.dims[3] < 1 || !tx_dtype_is_real(out->type.dtype)) {
        *why = "its past has no declared float [batch, h_kv, past, d] type with fixed h_kv and d";
        return false;
    }
    out->past = cn->inputs[0];
    out->fresh = cn->inputs[1];
    out->present = cn->outputs[0];
    return true;
}

/* Whether the backward cone of `value` reads the graph input `input`. */
static bool reads_input(tx_rw_graph *g, const char *value, const char *input, size_t depth)
{
    if (!value || !*value || depth > 64) return false;
    if (strcmp(value, input) == 0) return true;
    size_t slot = 0;
    int64_t p = tx_rw_producer(g, value, &slot);
    if (p < 0) return false;
    tx_rw_node *n = tx_rw_node_at(g, (size_t)p);
    for (size_t k = 0; k < n->n_inputs; k++)
        if (reads_input(g, n->inputs[k], input, depth + 1)) return true;
    return false;
}

/* "past_key_values.3.key" -> "kv_cache.3.key"; other names get an index. */
static void state_name(const char *past, size_t layer, const char *which, char *buf, size_t n)
{
    static const char prefix[] = "past_key_values.";
    if (strncmp(past, prefix, sizeof prefix - 1) == 0)
        snprintf(buf, n, "kv_cache.%s", past + sizeof prefix - 1);
    else
        snprintf(buf, n, "kv_cache.%zu.%s", layer, which);
}

static teexec_status *set_inputs(tx_rw_node *n, const char *const *names)
{
    char **in = calloc(N_SLOTS, sizeof(*in));
    if (!in) return tx_oom();
    for (size_t k = 0; k < N_SLOTS; k++) {
        in[k] = strdup(names[k] ? names[k] : "");
        if (!in[k]) {
            for (size_t j = 0; j < k; j++) free(in[j]);
            free(in);
            return tx_oom();
        }
    }
    for (size_t k = 0; k < n->n_inputs; k++) free(n->inputs[k]);
    free(n->inputs);
    n->inputs = in;
    n->n_inputs = N_SLOTS;
    return NULL;
}

/* Adds a Transpose (0, 2, 1, 3) of `value`; *out gets its output. */
static teexec_status *to_bshd(tx_rw_graph *g, const char *value, const char **out)
{
    const char *o = tx_rw_fresh_name(g, "kv_new_bshd");
    if (!o) return tx_oom();
    const char *ins[1] = {value}, *outs[1] = {o};
    size_t idx = 0;
    TX_TRY(tx_rw_add_node(g, "Transpose", "", tx_rw_fresh_name(g, "kv_cache_transpose"), ins, 1,
                          outs, 1, &idx));
    static const int64_t perm[4] = {0, 2, 1, 3};
    TX_TRY(tx_rw_set_ints(g, idx, "perm", perm, 4));
    *out = o;
    return NULL;
}

/* A graph input other than the pasts whose dim 0 is the batch symbol
 * `param` (input_ids), or NULL. */
static const char *batch_source(tx_rw_graph *g, const char *param)
{
    static const char *const names[] = {"input_ids", "position_ids", "inputs_embeds"};
    for (size_t i = 0; param && i < sizeof names / sizeof names[0]; i++) {
        tx_rw_value_type t;
        if (tx_rw_is_graph_input(g, names[i]) && tx_rw_value_type_of(g, names[i], &t) &&
            t.rank >= 1 && t.dims[0] < 0 && t.dim_params[0] && strcmp(t.dim_params[0], param) == 0)
            return names[i];
    }
    return NULL;
}

/* Rewires every Shape of `past` that reads its batch dim alone ([start,
 * end) = [0, 1): exporters take the batch symbol from any tensor that has
 * it) to read the same dim of `source`. */
static teexec_status *shapes_from_source(tx_rw_graph *g, const char *past, const char *source)
{
    if (!source) return NULL;
    size_t nc = 0;
    const tx_ir_use *u = tx_rw_consumers(g, past, &nc);
    size_t *nodes = nc ? calloc(nc, sizeof(*nodes)) : NULL;
    if (nc && (!u || !nodes)) {
        free(nodes);
        return tx_oom();
    }
    for (size_t k = 0; k < nc; k++) nodes[k] = (size_t)u[k].node;
    teexec_status *st = NULL;
    for (size_t k = 0; k < nc && !st; k++) {
        tx_rw_node *n = tx_rw_node_at(g, nodes[k]);
        if (!is_op(n, "", "Shape") || n->n_inputs != 1) continue;
        const tx_rw_attr *a0 = tx_rw_get_attr(g, nodes[k], "start");
        const tx_rw_attr *a1 = tx_rw_get_attr(g, nodes[k], "end");
        int64_t start = a0 ? a0->i : 0, end = a1 ? a1->i : 4;
        if (start < 0) start += 4;
        if (end < 0) end += 4;
        if (start < 0) start = 0;
        if (end > 4) end = 4;
        if (start != 0 || end != 1) continue; /* more than the batch: left to the check */
        char *in = strdup(source);
        if (!in) {
            st = tx_oom();
            break;
        }
        free(n->inputs[0]);
        n->inputs[0] = in;
    }
    free(nodes);
    return st;
}

static teexec_status *declined(const char *node, const char *why)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED,
                    "--kv-cache: attention %s is not a KV-cache attention this conversion knows "
                    "(%s)", node, why);
}

teexec_status *tx_lower_kv_cache(tx_rw_graph *g, int64_t batch, int64_t capacity,
                                 tx_lower_report *r)
{
    if (batch < 1 || capacity < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "--kv-cache: batch %lld and capacity %lld must be at least 1",
                        (long long)batch, (long long)capacity);
    size_t layer = 0;
    const char *batch_param = NULL;
    char **dropped = NULL; /* past and present names, to remove at the end */
    size_t n_dropped = 0;
    teexec_status *st = NULL;
    const char *cache_len = "cache_len";
    if (tx_rw_is_graph_input(g, cache_len))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "--kv-cache: the model already has a cache_len input");
    size_t n_nodes = tx_rw_node_count(g);
    for (size_t i = 0; i < n_nodes && !st; i++) {
        tx_rw_node *n = tx_rw_node_at(g, i);
        if (!is_op(n, "te.ops", "DotProductAttention")) continue;
        const char *label = n->name && *n->name ? n->name : "(unnamed)";
        if (n->n_inputs > SLOT_K_CACHE) {
            st = declined(label, "it is in the cache mode already");
            break;
        }
        kv_side ks = {0}, vs = {0};
        const char *why = NULL;
        if (n->n_inputs <= SLOT_V || !match_side(g, n->inputs[SLOT_K], &ks, &why) ||
            !match_side(g, n->inputs[SLOT_V], &vs, &why)) {
            st = declined(label, why ? why : "no k and v");
            break;
        }
        const tx_rw_attr *causal = tx_rw_get_attr(g, i, "causal");
        bool has_mask = n->n_inputs > SLOT_MASK && n->inputs[SLOT_MASK][0];
        if (!(causal && causal->i) && !(has_mask && reads_input(g, n->inputs[SLOT_MASK],
                                                                "attention_mask", 0))) {
            st = declined(label, "neither causal nor masked from an attention_mask input");
            break;
        }
        if (ks.type.dims[0] >= 0 || !ks.type.dim_params[0]) {
            /* a fixed batch works too: keep it */
        } else if (!batch_param) {
            batch_param = ks.type.dim_params[0];
        }
        char kname[256], vname[256];
        state_name(ks.past, layer, "key", kname, sizeof kname);
        state_name(vs.past, layer, "value", vname, sizeof vname);
        tx_rw_value_type kt = ks.type, vt = vs.type;
        kt.dims[0] = vt.dims[0] = batch;
        kt.dims[1] = capacity;
        kt.dims[2] = ks.type.dims[1];
        kt.dims[3] = ks.type.dims[3];
        vt.dims[1] = capacity;
        vt.dims[2] = vs.type.dims[1];
        vt.dims[3] = vs.type.dims[3];
        for (int d = 0; d < TX_MAX_RANK; d++) kt.dim_params[d] = vt.dim_params[d] = NULL;
        const char *k_new = NULL, *v_new = NULL;
        st = tx_rw_add_input(g, kname, &kt);
        if (!st) st = tx_rw_add_input(g, vname, &vt);
        if (!st) st = to_bshd(g, ks.fresh, &k_new);
        if (!st) st = to_bshd(g, vs.fresh, &v_new);
        if (st) break;
        n = tx_rw_node_at(g, i); /* adding nodes may move the array */
        const char *ins[N_SLOTS] = {n->inputs[0], k_new, v_new, "", kname, vname, cache_len};
        char *q = strdup(n->inputs[0]);
        if (!q) {
            st = tx_oom();
            break;
        }
        ins[0] = q;
        st = set_inputs(n, ins);
        free(q);
        if (!st) st = tx_rw_set_int(g, i, "causal", 1);
        /* the kv heads are the cache's now (a repeat dropped): from k */
        if (!st && (ks.repeated || vs.repeated)) st = tx_rw_set_int(g, i, "num_gqa_groups", 0);
        /* the names outlive the removal of their io entries */
        char **nd = st ? NULL : realloc(dropped, (n_dropped + 4) * sizeof(*dropped));
        if (!st && !nd) st = tx_oom();
        if (st) break;
        dropped = nd;
        const char *names[4] = {ks.past, vs.past, ks.present, vs.present};
        for (int k = 0; k < 4 && !st; k++) {
            dropped[n_dropped] = strdup(names[k]);
            if (!dropped[n_dropped]) st = tx_oom();
            else n_dropped++;
        }
        if (!st) st = tx_lower_note_add(r, "KVCache", label, true, NULL);
        layer++;
    }
    if (!st && layer == 0)
        st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                      "--kv-cache: the model has no te.ops DotProductAttention over a past "
                      "key/value input (a decoder exported with past_key_values, lowered)");
    if (!st) {
        tx_rw_value_type lt;
        memset(&lt, 0, sizeof lt);
        lt.dtype = TEEXEC_DTYPE_INT64;
        lt.rank = 1;
        lt.dims[0] = -1;
        lt.dim_params[0] = (char *)(batch_param ? batch_param : "batch");
        char *param = strdup(lt.dim_params[0]);
        if (!param) st = tx_oom();
        lt.dim_params[0] = param;
        if (!st) st = tx_rw_add_input(g, cache_len, &lt);
        free(param);
    }
    /* the presents go first, so the Concats die with the mask cones */
    for (size_t k = 0; !st && k < n_dropped; k++) (void)tx_rw_remove_output(g, dropped[k]);
    if (!st) tx_rw_remove_unused_nodes(g, NULL);
    /* a Shape of a past that reads its batch dim reads input_ids' */
    const char *source = batch_source(g, batch_param);
    for (size_t l = 0; !st && l < layer; l++)
        for (size_t side = 0; side < 2 && !st; side++)
            st = shapes_from_source(g, dropped[4 * l + side], source);
    for (size_t k = 0; !st && k < n_dropped; k++) {
        if (!tx_rw_is_graph_input(g, dropped[k])) continue;
        size_t nc = 0;
        const tx_ir_use *u = tx_rw_consumers(g, dropped[k], &nc);
        const tx_rw_node *rn = nc && u ? tx_rw_node_at(g, (size_t)u[0].node) : NULL;
        if (nc)
            st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                          "--kv-cache: past input \"%s\" is still read besides its Concat, by "
                          "%s %s%s (a model that counts positions from the past's length needs "
                          "position_ids instead)", dropped[k], rn ? rn->op_type : "a node",
                          rn && rn->name ? rn->name : "", nc > 1 ? " and others" : "");
        else
            (void)tx_rw_remove_input(g, dropped[k]);
    }
    if (!st && tx_rw_is_graph_input(g, "attention_mask")) {
        size_t nc = 0;
        (void)tx_rw_consumers(g, "attention_mask", &nc);
        if (nc)
            st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                          "--kv-cache: attention_mask is still read by %zu node(s) once the "
                          "attention masks are gone; the cache form has no padding mask", nc);
        else
            (void)tx_rw_remove_input(g, "attention_mask");
    }
    for (size_t k = 0; k < n_dropped; k++) free(dropped[k]);
    free(dropped);
    return st;
}
