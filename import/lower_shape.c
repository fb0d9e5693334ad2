/*
 * lower_shape.c - static shapes of rewrite-graph values (see
 * lower_shape.h), answered by the value-typing pass (infer_graph.h) over
 * the graph's IR view (rewrite_view.h): the same rules the planner and
 * the executors type values with, so a lowering decision and the plan
 * never disagree about a shape.
 */
#include "import/lower_shape.h"

#include "import/rewrite_view.h"

#include <string.h>

teexec_status *tx_lower_shape_of(tx_rw_graph *g, const char *value, tx_shape *out, bool *known)
{
    teexec_dtype dt;
    return tx_lower_type_of(g, value, &dt, out, known);
}

/* The typing pass's answer for one value: its dtype and, when
 * *shape_known, its shape (dims -1 where not fixed). */
static teexec_status *infer_value(tx_rw_graph *g, const char *value, teexec_dtype *dtype,
                                  tx_shape *shape, bool *shape_known)
{
    *dtype = TEEXEC_DTYPE_UNDEFINED;
    *shape_known = false;
    tx_rw_view *v = NULL;
    TX_TRY(tx_rw_view_build(g, &v));
    /* values of small constants flow on, so Reshape / Expand / Slice
     * arguments computed from shapes are known */
    teexec_status *st = tx_rw_view_infer(v, TX_INFER_VALUE_MAX);
    int32_t id = st ? -1 : tx_rw_view_find(v, value);
    if (id >= 0) {
        *dtype = v->vals[id].dtype;
        *shape_known = v->vals[id].shape_known;
        if (*shape_known) *shape = v->vals[id].shape;
    }
    tx_rw_view_free(v);
    return st;
}

teexec_status *tx_lower_type_of(tx_rw_graph *g, const char *value, teexec_dtype *dtype,
                                tx_shape *out, bool *known)
{
    *known = false;
    tx_shape s;
    bool shape_known = false;
    TX_TRY(infer_value(g, value, dtype, &s, &shape_known));
    bool fixed = shape_known;
    for (int32_t d = 0; fixed && d < s.rank; d++) fixed = s.dims[d] >= 0;
    if (fixed) {
        *out = s;
        *known = true;
    }
    return NULL;
}

teexec_status *tx_lower_symbolic_shape_of(tx_rw_graph *g, const char *value, tx_shape *out,
                                          const char *params[TX_MAX_RANK], bool *known,
                                          teexec_dtype *dtype)
{
    *known = false;
    memset(out, 0, sizeof *out);
    for (int d = 0; d < TX_MAX_RANK; d++) params[d] = NULL;
    teexec_dtype dt;
    bool inferred = false;
    TX_TRY(infer_value(g, value, &dt, out, &inferred));
    if (dtype) *dtype = dt;
    *known = inferred;
    /* the declared type fills what the pass could not tell; a declared
     * rank that disagrees with the inferred one is not trusted */
    tx_rw_value_type vt;
    if (!tx_rw_value_type_of(g, value, &vt) || vt.rank < 0 || vt.rank > TX_MAX_RANK ||
        (inferred && vt.rank != out->rank))
        return NULL;
    if (!inferred) {
        out->rank = vt.rank;
        for (int32_t d = 0; d < vt.rank; d++) out->dims[d] = -1;
        *known = true;
    }
    for (int32_t d = 0; d < out->rank; d++) {
        if (out->dims[d] >= 0) continue;
        if (vt.dims[d] >= 0) out->dims[d] = vt.dims[d];
        else if (vt.dim_params[d] && vt.dim_params[d][0]) params[d] = vt.dim_params[d];
    }
    return NULL;
}

teexec_status *tx_lower_same_shape(tx_rw_graph *g, const char *a, const char *b, bool *known,
                                   bool *same)
{
    *known = *same = false;
    tx_shape sa, sb;
    const char *pa[TX_MAX_RANK], *pb[TX_MAX_RANK];
    bool ka = false, kb = false;
    TX_TRY(tx_lower_symbolic_shape_of(g, a, &sa, pa, &ka, NULL));
    TX_TRY(tx_lower_symbolic_shape_of(g, b, &sb, pb, &kb, NULL));
    if (!ka || !kb) return NULL;
    for (int32_t d = 0; d < sa.rank; d++)
        if (sa.dims[d] < 0 && !pa[d]) return NULL;
    for (int32_t d = 0; d < sb.rank; d++)
        if (sb.dims[d] < 0 && !pb[d]) return NULL;
    *known = true;
    if (sa.rank != sb.rank) return NULL;
    for (int32_t d = 0; d < sa.rank; d++) {
        bool fixed = sa.dims[d] >= 0 && sb.dims[d] >= 0 && sa.dims[d] == sb.dims[d];
        bool named = sa.dims[d] < 0 && sb.dims[d] < 0 && strcmp(pa[d], pb[d]) == 0;
        if (!fixed && !named) return NULL;
    }
    *same = true;
    return NULL;
}
