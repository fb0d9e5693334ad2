/* session_state.c - a session's state inputs (exec/session_state.h). */
#include "exec/session_state.h"

#include "base/checked.h"
#include "exec/device_mem.h"
#include "format/te_schema.h"

#include <stdlib.h>
#include <string.h>

/* The node inputs of a cache-mode DotProductAttention's caches: slot 0 is
 * q, the extra inputs follow. */
#define SLOT_K_CACHE (1 + TX_TE_DPA_IN_K_CACHE)
#define SLOT_V_CACHE (1 + TX_TE_DPA_IN_V_CACHE)

static bool is_dpa(const tx_ir_node *n)
{
    return strcmp(n->domain, "te.ops") == 0 && strcmp(n->op_type, "DotProductAttention") == 0;
}

/* Whether value v is read by some node as a cache (then every read must be). */
static teexec_status *classify(const tx_ir_graph *g, int32_t v, bool *state)
{
    const tx_ir_value *val = &g->values[v];
    size_t as_cache = 0;
    for (size_t k = 0; k < val->n_consumers; k++) {
        const tx_ir_use *u = &val->consumers[k];
        const tx_ir_node *n = &g->nodes[u->node];
        if (is_dpa(n) && (u->slot == SLOT_K_CACHE || u->slot == SLOT_V_CACHE)) as_cache++;
    }
    *state = as_cache > 0;
    if (!as_cache) return NULL;
    if (as_cache != val->n_consumers || (val->flags & TX_IR_VALUE_GRAPH_OUTPUT))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "input \"%s\" is a DotProductAttention KV cache (state the session keeps "
                        "and the op writes in place); it may feed nothing else", val->name);
    if (val->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "KV cache input \"%s\" needs a declared shape [B, capacity, h_kv, d]",
                        val->name);
    for (int32_t d = 0; d < val->rank; d++)
        if (val->dims[d] < 0)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "KV cache input \"%s\" has symbolic dim %d (\"%s\"): the session "
                            "allocates it once, so every dim must be fixed (teexec convert "
                            "--kv-cache sets them)", val->name, (int)d,
                            val->dim_params && val->dim_params[d] ? val->dim_params[d] : "?");
    if (!tx_dtype_is_real(val->dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "KV cache input \"%s\" is %s, not a float type", val->name,
                        teexec_dtype_name(val->dtype));
    return NULL;
}

teexec_status *tx_session_state_init(tx_session_state *st, const tx_ir_graph *g,
                                     const int32_t *in_vals, size_t n_in)
{
    memset(st, 0, sizeof(*st));
    st->device = -1;
    st->n_in = n_in;
    st->is_state = calloc(n_in ? n_in : 1, sizeof(*st->is_state));
    if (!st->is_state) return tx_oom();
    for (size_t i = 0; i < n_in; i++) {
        TX_TRY(classify(g, in_vals[i], &st->is_state[i]));
        if (st->is_state[i]) st->n++;
    }
    if (!st->n) return NULL;
    st->bound = calloc(n_in, sizeof(*st->bound));
    if (!st->bound) return tx_oom();
    return NULL;
}

teexec_status *tx_session_state_alloc_host(tx_session_state *st, const tx_ir_graph *g,
                                           const int32_t *in_vals)
{
    for (size_t i = 0; i < st->n_in; i++) {
        if (!st->is_state[i]) continue;
        const tx_ir_value *val = &g->values[in_vals[i]];
        TX_TRY(tx_tensor_alloc(&st->bound[i], val->dtype, (int)val->rank, val->dims)); /* zeroed */
        if (!tx_add_size(st->bytes, st->bound[i].nbytes, &st->bytes))
            return tx_error(TEEXEC_ERR_LIMIT, "KV cache sizes overflow");
    }
    return NULL;
}

teexec_status *tx_session_state_alloc_device(tx_session_state *st, const tx_ir_graph *g,
                                             const int32_t *in_vals, teexec_dtype compute)
{
    if (!st->n) return NULL;
    st->dev = calloc(st->n_in, sizeof(*st->dev));
    st->dev_dtype = calloc(st->n_in, sizeof(*st->dev_dtype));
    if (!st->dev || !st->dev_dtype) return tx_oom();
    for (size_t i = 0; i < st->n_in; i++) {
        if (!st->is_state[i]) continue;
        const tx_ir_value *val = &g->values[in_vals[i]];
        teexec_dtype dt = compute != TEEXEC_DTYPE_UNDEFINED ? compute : val->dtype;
        tx_tensor on_dev; /* the buffer's shape in the compute dtype: its size */
        TX_TRY(tx_tensor_wrap(&on_dev, dt, (int)val->rank, val->dims, NULL));
        size_t bytes = on_dev.nbytes;
        TX_TRY(tx_device_alloc(bytes, &st->device, &st->dev[i]));
        TX_TRY(tx_device_zero(st->dev[i], bytes));
        st->dev_dtype[i] = dt;
        /* what a run binds: the model's dtype and shape over that buffer */
        TX_TRY(tx_tensor_wrap(&st->bound[i], val->dtype, (int)val->rank, val->dims, st->dev[i]));
        if (!tx_add_size(st->bytes, bytes, &st->bytes))
            return tx_error(TEEXEC_ERR_LIMIT, "KV cache sizes overflow");
    }
    return NULL;
}

void tx_session_state_free(tx_session_state *st)
{
    if (!st) return;
    for (size_t i = 0; st->bound && i < st->n_in; i++) {
        if (st->dev && st->dev[i]) tx_device_free(st->device, st->dev[i]);
        else tx_tensor_release(&st->bound[i]);
    }
    free(st->bound);
    free(st->dev);
    free(st->dev_dtype);
    free(st->is_state);
    memset(st, 0, sizeof(*st));
}
