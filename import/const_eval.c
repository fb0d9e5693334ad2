/*
 * const_eval.c - small constant folding over a rewrite graph (see
 * const_eval.h). Ops understood: Constant and initializers, Identity, Cast,
 * Shape, ConstantOfShape, Gather, Unsqueeze, Squeeze, Reshape, Concat,
 * Slice, Split, Expand, Range, Trilu, Where, Not/Neg/Sqrt/Reciprocal/Abs/
 * Floor/Ceil, Add/Sub/Mul/Div/Pow/Equal/Less/Greater/LessOrEqual/
 * GreaterOrEqual/And/Or/Xor with NumPy broadcasting.
 *
 * Whether a value is integral (an int or bool tensor) is tracked because
 * integer Div truncates and Cast to an int type truncates; everything else
 * is the same arithmetic in double.
 */
#include "import/const_eval.h"

#include "import/lower_shape.h"

#include "base/checked.h"
#include "base/half.h"
#include "format/tensor_proto.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Deep enough for PyTorch's shape chains, shallow enough for the C stack;
 * the visit budget bounds the work on graphs that reuse a value many times
 * (evaluation is not memoized, so a crafted DAG could otherwise explode). */
#define CE_MAX_DEPTH 64
#define CE_MAX_VISITS 4096

typedef struct ce_ctx {
    int depth;
    int visits;
} ce_ctx;

typedef struct ce_val {
    tx_ce_value x;
    bool integral;
} ce_val;

void tx_ce_release(tx_ce_value *x)
{
    if (!x) return;
    free(x->v);
    memset(x, 0, sizeof *x);
}

static void cv_release(ce_val *c)
{
    tx_ce_release(&c->x);
    c->integral = false;
}

/* Shape check and allocation; *ok false (no status) when over the limits. */
static teexec_status *cv_alloc(ce_val *c, int32_t rank, const int64_t *dims, bool integral,
                               bool *ok)
{
    memset(c, 0, sizeof *c);
    *ok = false;
    if (rank < 0 || rank > TX_CE_MAX_RANK) return NULL;
    uint64_t n = 1;
    for (int32_t i = 0; i < rank; i++) {
        if (dims[i] < 0) return NULL;
        if (!tx_mul_u64(n, (uint64_t)dims[i], &n)) return NULL;
    }
    if (n > TX_CE_MAX_ELEMENTS) return NULL;
    c->x.v = calloc(n ? n : 1, sizeof(double));
    if (!c->x.v) return tx_oom();
    c->x.rank = rank;
    if (rank) memcpy(c->x.dims, dims, (size_t)rank * sizeof *dims);
    c->x.n = n;
    c->integral = integral;
    *ok = true;
    return NULL;
}

static bool dtype_integral(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_BOOL || (dt >= TEEXEC_DTYPE_UINT8 && dt <= TEEXEC_DTYPE_INT64 &&
                                       dt != TEEXEC_DTYPE_STRING) ||
           dt == TEEXEC_DTYPE_UINT32 || dt == TEEXEC_DTYPE_UINT64;
}

static teexec_status *from_tensor(const tx_tensor *t, ce_val *out, bool *ok)
{
    *ok = false;
    switch (t->dtype) {
    case TEEXEC_DTYPE_FLOAT: case TEEXEC_DTYPE_DOUBLE: case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_BFLOAT16: case TEEXEC_DTYPE_INT8: case TEEXEC_DTYPE_UINT8:
    case TEEXEC_DTYPE_INT16: case TEEXEC_DTYPE_UINT16: case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_UINT32: case TEEXEC_DTYPE_INT64: case TEEXEC_DTYPE_UINT64:
    case TEEXEC_DTYPE_BOOL: break;
    default: memset(out, 0, sizeof *out); return NULL;
    }
    TX_TRY(cv_alloc(out, t->rank, t->dims, dtype_integral(t->dtype), ok));
    if (!*ok) return NULL;
    for (uint64_t i = 0; i < t->numel; i++) {
        double d = 0;
        switch (t->dtype) {
        case TEEXEC_DTYPE_FLOAT: d = ((const float *)t->data)[i]; break;
        case TEEXEC_DTYPE_DOUBLE: d = ((const double *)t->data)[i]; break;
        case TEEXEC_DTYPE_FLOAT16: d = tx_f16_to_f32(((const uint16_t *)t->data)[i]); break;
        case TEEXEC_DTYPE_BFLOAT16: d = tx_bf16_to_f32(((const uint16_t *)t->data)[i]); break;
        case TEEXEC_DTYPE_INT8: d = ((const int8_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT8: d = ((const uint8_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_INT16: d = ((const int16_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT16: d = ((const uint16_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_INT32: d = ((const int32_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT32: d = ((const uint32_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_INT64: d = (double)((const int64_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_UINT64: d = (double)((const uint64_t *)t->data)[i]; break;
        case TEEXEC_DTYPE_BOOL: d = ((const uint8_t *)t->data)[i] ? 1.0 : 0.0; break;
        default: break;
        }
        out->x.v[i] = d;
    }
    return NULL;
}

/* Integral entries of a rank <= 1 value (shape / axes operands). */
static bool as_ints(const ce_val *c, int64_t *out, size_t cap, size_t *n)
{
    if (c->x.rank > 1 || c->x.n > cap) return false;
    for (uint64_t i = 0; i < c->x.n; i++) {
        double d = c->x.v[i];
        if (d != floor(d)) return false;
        /* INT64_MAX / INT64_MIN are Slice's "to the end" sentinels; other
         * values past 2^53 lost precision on the way into double */
        if (d >= 4611686018427387904.0) out[i] = INT64_MAX;
        else if (d <= -4611686018427387904.0) out[i] = INT64_MIN;
        else if (fabs(d) > 9007199254740992.0) return false;
        else out[i] = (int64_t)d;
    }
    *n = (size_t)c->x.n;
    return true;
}

static const tx_rw_attr *attr_of(const tx_rw_node *n, const char *name)
{
    for (size_t i = 0; i < n->n_attrs; i++)
        if (strcmp(n->attrs[i].name, name) == 0) return &n->attrs[i];
    return NULL;
}

static int64_t attr_int(const tx_rw_node *n, const char *name, int64_t def)
{
    const tx_rw_attr *a = attr_of(n, name);
    return a && a->type == TX_IR_ATTR_INT ? a->i : def;
}

static bool norm_axis(int64_t axis, int32_t rank, int32_t *out)
{
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    *out = (int32_t)axis;
    return true;
}

/* Row-major strides; broadcast dims (extent 1 against a larger output)
 * get stride 0 so one loop serves every operand. */
static void bstrides(const tx_ce_value *x, int32_t orank, const int64_t *odims, int64_t *st)
{
    int64_t s = 1;
    for (int32_t i = orank - 1; i >= 0; i--) {
        int32_t xi = i - (orank - x->rank);
        if (xi < 0) {
            st[i] = 0;
            continue;
        }
        st[i] = x->dims[xi] == 1 && odims[i] != 1 ? 0 : s;
        s *= x->dims[xi];
    }
}

static bool bshape(const tx_ce_value *const *xs, int nx, int32_t *orank, int64_t *odims)
{
    int32_t r = 0;
    for (int k = 0; k < nx; k++)
        if (xs[k]->rank > r) r = xs[k]->rank;
    for (int32_t i = 0; i < r; i++) {
        int64_t d = 1;
        for (int k = 0; k < nx; k++) {
            int32_t xi = i - (r - xs[k]->rank);
            if (xi < 0) continue;
            int64_t e = xs[k]->dims[xi];
            if (e == 1) continue;
            if (d != 1 && d != e) return false;
            d = e;
        }
        odims[i] = d;
    }
    *orank = r;
    return true;
}

/* Offsets of output element i in each operand. */
static void boffsets(uint64_t i, int32_t orank, const int64_t *odims, int64_t st[][TX_CE_MAX_RANK],
                     int nx, int64_t *off)
{
    for (int k = 0; k < nx; k++) off[k] = 0;
    for (int32_t d = orank - 1; d >= 0; d--) {
        int64_t c = (int64_t)(i % (uint64_t)odims[d]);
        i /= (uint64_t)odims[d];
        for (int k = 0; k < nx; k++) off[k] += c * st[k][d];
    }
}

static double binop(const char *op, double a, double b, bool integral)
{
    if (!strcmp(op, "Add")) return a + b;
    if (!strcmp(op, "Sub")) return a - b;
    if (!strcmp(op, "Mul")) return a * b;
    if (!strcmp(op, "Div")) return integral ? (b != 0 ? trunc(a / b) : 0) : a / b;
    if (!strcmp(op, "Pow")) return pow(a, b);
    if (!strcmp(op, "Equal")) return a == b;
    if (!strcmp(op, "Less")) return a < b;
    if (!strcmp(op, "Greater")) return a > b;
    if (!strcmp(op, "LessOrEqual")) return a <= b;
    if (!strcmp(op, "GreaterOrEqual")) return a >= b;
    if (!strcmp(op, "And")) return (a != 0) && (b != 0);
    if (!strcmp(op, "Or")) return (a != 0) || (b != 0);
    return (a != 0) != (b != 0); /* Xor */
}

static bool is_binop(const char *op)
{
    static const char *const ops[] = {"Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less",
                                      "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or",
                                      "Xor"};
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
        if (!strcmp(op, ops[i])) return true;
    return false;
}

static bool is_compare(const char *op)
{
    return !strcmp(op, "Equal") || !strcmp(op, "Less") || !strcmp(op, "Greater") ||
           !strcmp(op, "LessOrEqual") || !strcmp(op, "GreaterOrEqual") || !strcmp(op, "And") ||
           !strcmp(op, "Or") || !strcmp(op, "Xor");
}

static teexec_status *ev(tx_rw_graph *g, const char *value, ce_ctx *cx, ce_val *out, bool *ok);

/* Evaluates input `slot` of node n (absent -> *present false). */
static teexec_status *ev_in(tx_rw_graph *g, const tx_rw_node *n, size_t slot, ce_ctx *cx,
                            ce_val *out, bool *ok, bool *present)
{
    memset(out, 0, sizeof *out);
    *ok = false;
    bool has = slot < n->n_inputs && n->inputs[slot][0];
    if (present) *present = has;
    if (!has) return NULL;
    return ev(g, n->inputs[slot], cx, out, ok);
}

/* Strides of a row-major shape. */
static void rstrides(const tx_ce_value *x, int64_t *st)
{
    int64_t s = 1;
    for (int32_t i = x->rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= x->dims[i];
    }
}

static teexec_status *ev_node(tx_rw_graph *g, const tx_rw_node *n, size_t slot, ce_ctx *cx,
                              ce_val *out, bool *ok)
{
    const char *op = n->op_type;
    ce_val a = {0}, b = {0}, c = {0};
    bool oka = false, okb = false, okc = false, pres = false;
    teexec_status *st = NULL;
    *ok = false;
    memset(out, 0, sizeof *out);
    if (n->domain[0]) return NULL;

#define EVAL(slot_, v_, ok_, pres_)                                                    \
    do {                                                                               \
        st = ev_in(g, n, (slot_), cx, &(v_), &(ok_), (pres_));                      \
        if (st) goto done;                                                             \
    } while (0)

    if (!strcmp(op, "Identity")) {
        EVAL(0, a, oka, NULL);
        if (oka) {
            *out = a;
            memset(&a, 0, sizeof a);
            *ok = true;
        }
    } else if (!strcmp(op, "Cast")) {
        EVAL(0, a, oka, NULL);
        if (!oka) goto done;
        int64_t to = attr_int(n, "to", 0);
        bool integral = dtype_integral((teexec_dtype)to);
        for (uint64_t i = 0; i < a.x.n; i++) {
            double d = a.x.v[i];
            if (to == TEEXEC_DTYPE_BOOL) d = d != 0;
            else if (integral) d = trunc(d);
            else if (to == TEEXEC_DTYPE_FLOAT) d = (float)d;
            a.x.v[i] = d;
        }
        a.integral = integral;
        *out = a;
        memset(&a, 0, sizeof a);
        *ok = true;
    } else if (!strcmp(op, "Shape")) {
        int64_t dims[TX_MAX_RANK];
        int32_t rank = -1;
        EVAL(0, a, oka, NULL);
        if (oka) {
            rank = a.x.rank;
            memcpy(dims, a.x.dims, (size_t)rank * sizeof *dims);
        } else {
            /* a declared static type, else the shape lower_shape.h derives
             * (the TorchScript exporter's Shape of an activation, static
             * once the input shapes are) */
            tx_rw_value_type vt;
            bool declared = tx_rw_value_type_of(g, n->inputs[0], &vt) && vt.rank >= 0;
            for (int32_t i = 0; declared && i < vt.rank; i++) declared = vt.dims[i] >= 0;
            if (declared) {
                rank = vt.rank;
                memcpy(dims, vt.dims, (size_t)rank * sizeof *dims);
            } else {
                tx_shape sh;
                bool known = false;
                st = tx_lower_shape_of(g, n->inputs[0], &sh, &known);
                if (st || !known) goto done;
                rank = sh.rank;
                memcpy(dims, sh.dims, (size_t)rank * sizeof *dims);
            }
        }
        int64_t s = attr_int(n, "start", 0), e = attr_int(n, "end", rank);
        if (s < 0) s += rank;
        if (e < 0) e += rank;
        s = s < 0 ? 0 : (s > rank ? rank : s);
        e = e < 0 ? 0 : (e > rank ? rank : e);
        int64_t len = e > s ? e - s : 0;
        st = cv_alloc(out, 1, &len, true, ok);
        if (st || !*ok) goto done;
        for (int64_t i = 0; i < len; i++) out->x.v[i] = (double)dims[s + i];
    } else if (!strcmp(op, "ConstantOfShape")) {
        EVAL(0, a, oka, NULL);
        int64_t dims[TX_CE_MAX_RANK];
        size_t nd;
        if (!oka || !as_ints(&a, dims, TX_CE_MAX_RANK, &nd)) goto done;
        double fill = 0;
        bool integral = false;
        const tx_rw_attr *va = attr_of(n, "value");
        if (va && va->type == TX_IR_ATTR_TENSOR) {
            tx_tensor t = {0};
            ce_val f = {0};
            bool okf = false;
            if (va->t_owned.data) {
                st = from_tensor(&va->t_owned, &f, &okf);
            } else if (va->t_borrowed) {
                teexec_status *dec = tx_tensor_from_proto(va->t_borrowed, NULL, &t);
                if (dec) {
                    teexec_status_destroy(dec);
                    goto done;
                }
                st = from_tensor(&t, &f, &okf);
                tx_tensor_release(&t);
            }
            if (st) goto done;
            if (!okf || f.x.n != 1) {
                cv_release(&f);
                goto done;
            }
            fill = f.x.v[0];
            integral = f.integral;
            cv_release(&f);
        }
        st = cv_alloc(out, (int32_t)nd, dims, integral, ok);
        if (st || !*ok) goto done;
        for (uint64_t i = 0; i < out->x.n; i++) out->x.v[i] = fill;
    } else if (!strcmp(op, "Gather")) {
        EVAL(0, a, oka, NULL);
        EVAL(1, b, okb, NULL);
        int32_t axis;
        if (!oka || !okb || !b.integral || !norm_axis(attr_int(n, "axis", 0), a.x.rank, &axis))
            goto done;
        int32_t orank = a.x.rank - 1 + b.x.rank;
        if (orank > TX_CE_MAX_RANK) goto done;
        int64_t od[TX_CE_MAX_RANK];
        int32_t r = 0;
        for (int32_t i = 0; i < axis; i++) od[r++] = a.x.dims[i];
        for (int32_t i = 0; i < b.x.rank; i++) od[r++] = b.x.dims[i];
        for (int32_t i = axis + 1; i < a.x.rank; i++) od[r++] = a.x.dims[i];
        st = cv_alloc(out, orank, od, a.integral, ok);
        if (st || !*ok) goto done;
        int64_t outer = 1, inner = 1, ax = a.x.dims[axis];
        for (int32_t i = 0; i < axis; i++) outer *= a.x.dims[i];
        for (int32_t i = axis + 1; i < a.x.rank; i++) inner *= a.x.dims[i];
        uint64_t w = 0;
        for (int64_t o = 0; o < outer; o++)
            for (uint64_t j = 0; j < b.x.n; j++) {
                int64_t idx = (int64_t)b.x.v[j];
                if (idx < 0) idx += ax;
                if (idx < 0 || idx >= ax) {
                    cv_release(out);
                    *ok = false;
                    goto done;
                }
                for (int64_t k = 0; k < inner; k++)
                    out->x.v[w++] = a.x.v[(o * ax + idx) * inner + k];
            }
    } else if (!strcmp(op, "Unsqueeze") || !strcmp(op, "Squeeze")) {
        bool unsq = op[0] == 'U';
        EVAL(0, a, oka, NULL);
        if (!oka) goto done;
        int64_t axes[TX_CE_MAX_RANK];
        size_t na = 0;
        bool have_axes = false;
        EVAL(1, b, okb, &pres);
        if (pres) {
            if (!okb || !as_ints(&b, axes, TX_CE_MAX_RANK, &na)) goto done;
            have_axes = true;
        } else {
            const tx_rw_attr *ax = attr_of(n, "axes");
            if (ax && ax->type == TX_IR_ATTR_INTS && ax->n_ints <= TX_CE_MAX_RANK) {
                memcpy(axes, ax->ints, ax->n_ints * sizeof *axes);
                na = ax->n_ints;
                have_axes = true;
            }
        }
        if (unsq && !have_axes) goto done;
        int64_t od[TX_CE_MAX_RANK];
        int32_t orank = 0;
        if (unsq) {
            int32_t r = a.x.rank + (int32_t)na;
            if (r > TX_CE_MAX_RANK) goto done;
            bool mark[TX_CE_MAX_RANK] = {false};
            for (size_t i = 0; i < na; i++) {
                int32_t x;
                if (!norm_axis(axes[i], r, &x) || mark[x]) goto done;
                mark[x] = true;
            }
            int32_t k = 0;
            for (int32_t i = 0; i < r; i++) od[i] = mark[i] ? 1 : a.x.dims[k++];
            orank = r;
        } else {
            bool mark[TX_CE_MAX_RANK] = {false};
            for (size_t i = 0; i < na; i++) {
                int32_t x;
                if (!norm_axis(axes[i], a.x.rank, &x) || a.x.dims[x] != 1) goto done;
                mark[x] = true;
            }
            for (int32_t i = 0; i < a.x.rank; i++)
                if (!(have_axes ? mark[i] : a.x.dims[i] == 1)) od[orank++] = a.x.dims[i];
        }
        *out = a;
        memset(&a, 0, sizeof a);
        out->x.rank = orank;
        memcpy(out->x.dims, od, (size_t)orank * sizeof *od);
        *ok = true;
    } else if (!strcmp(op, "Reshape")) {
        EVAL(0, a, oka, NULL);
        EVAL(1, b, okb, NULL);
        int64_t sh[TX_CE_MAX_RANK];
        size_t ns;
        if (!oka || !okb || !as_ints(&b, sh, TX_CE_MAX_RANK, &ns)) goto done;
        bool allowzero = attr_int(n, "allowzero", 0) != 0;
        int64_t known = 1;
        int neg = -1;
        for (size_t i = 0; i < ns; i++) {
            if (sh[i] == 0 && !allowzero) {
                if ((int32_t)i >= a.x.rank) goto done;
                sh[i] = a.x.dims[i];
            }
            if (sh[i] == -1) {
                if (neg >= 0) goto done;
                neg = (int)i;
            } else if (sh[i] < 0) {
                goto done;
            } else {
                known *= sh[i];
            }
        }
        if (neg >= 0) {
            if (known == 0 || a.x.n % (uint64_t)known) goto done;
            sh[neg] = (int64_t)(a.x.n / (uint64_t)known);
        } else if ((uint64_t)known != a.x.n) {
            goto done;
        }
        *out = a;
        memset(&a, 0, sizeof a);
        out->x.rank = (int32_t)ns;
        memcpy(out->x.dims, sh, ns * sizeof *sh);
        *ok = true;
    } else if (!strcmp(op, "Flatten")) {
        /* [prod(dims[:axis]), prod(dims[axis:])]: the same values */
        EVAL(0, a, oka, NULL);
        if (!oka) goto done;
        int64_t axis = attr_int(n, "axis", 1);
        if (axis < 0) axis += a.x.rank;
        if (axis < 0 || axis > a.x.rank) goto done;
        int64_t lead = 1;
        for (int64_t i = 0; i < axis; i++) lead *= a.x.dims[i];
        *out = a;
        memset(&a, 0, sizeof a);
        out->x.rank = 2;
        out->x.dims[0] = lead;
        out->x.dims[1] = lead ? (int64_t)(out->x.n / (uint64_t)lead) : 0;
        *ok = true;
    } else if (!strcmp(op, "Concat")) {
        if (n->n_inputs < 1 || n->n_inputs > 64) goto done;
        ce_val parts[64];
        size_t np = 0;
        bool all = true;
        for (size_t i = 0; i < n->n_inputs && all; i++) {
            bool okp = false;
            st = ev_in(g, n, i, cx, &parts[np], &okp, NULL);
            if (st) {
                all = false;
                break;
            }
            if (!okp) all = false;
            else np++;
        }
        int32_t axis = 0;
        if (!st && all && np > 0 && norm_axis(attr_int(n, "axis", 0), parts[0].x.rank, &axis)) {
            int64_t od[TX_CE_MAX_RANK];
            memcpy(od, parts[0].x.dims, (size_t)parts[0].x.rank * sizeof *od);
            od[axis] = 0;
            bool fit = true, integral = true;
            for (size_t i = 0; i < np && fit; i++) {
                if (parts[i].x.rank != parts[0].x.rank) fit = false;
                for (int32_t d = 0; fit && d < parts[0].x.rank; d++)
                    if (d != axis && parts[i].x.dims[d] != parts[0].x.dims[d]) fit = false;
                if (fit) od[axis] += parts[i].x.dims[axis];
                integral = integral && parts[i].integral;
            }
            if (fit) st = cv_alloc(out, parts[0].x.rank, od, integral, ok);
            if (!st && *ok) {
                int64_t outer = 1, inner = 1;
                for (int32_t d = 0; d < axis; d++) outer *= od[d];
                for (int32_t d = axis + 1; d < parts[0].x.rank; d++) inner *= od[d];
                uint64_t w = 0;
                for (int64_t o = 0; o < outer; o++)
                    for (size_t i = 0; i < np; i++) {
                        int64_t len = parts[i].x.dims[axis] * inner;
                        memcpy(out->x.v + w, parts[i].x.v + o * len, (size_t)len * sizeof(double));
                        w += (uint64_t)len;
                    }
            }
        }
        for (size_t i = 0; i < np; i++) cv_release(&parts[i]);
    } else if (!strcmp(op, "Slice")) {
        EVAL(0, a, oka, NULL);
        if (!oka) goto done;
        int64_t s[TX_CE_MAX_RANK], e[TX_CE_MAX_RANK], ax[TX_CE_MAX_RANK], sp[TX_CE_MAX_RANK];
        size_t ns, ne, nax = 0, nsp = 0;
        ce_val v1 = {0}, v2 = {0}, v3 = {0}, v4 = {0};
        bool o1 = false, o2 = false, o3 = false, o4 = false, p3 = false, p4 = false;
        if ((st = ev_in(g, n, 1, cx, &v1, &o1, NULL)) == NULL &&
            (st = ev_in(g, n, 2, cx, &v2, &o2, NULL)) == NULL &&
            (st = ev_in(g, n, 3, cx, &v3, &o3, &p3)) == NULL)
            st = ev_in(g, n, 4, cx, &v4, &o4, &p4);
        bool good = !st && o1 && o2 && as_ints(&v1, s, TX_CE_MAX_RANK, &ns) &&
                    as_ints(&v2, e, TX_CE_MAX_RANK, &ne) && ns == ne &&
                    (!p3 || (o3 && as_ints(&v3, ax, TX_CE_MAX_RANK, &nax) && nax == ns)) &&
                    (!p4 || (o4 && as_ints(&v4, sp, TX_CE_MAX_RANK, &nsp) && nsp == ns));
        cv_release(&v1);
        cv_release(&v2);
        cv_release(&v3);
        cv_release(&v4);
        if (!good) goto done;
        int64_t lo[TX_CE_MAX_RANK], step[TX_CE_MAX_RANK], od[TX_CE_MAX_RANK];
        for (int32_t d = 0; d < a.x.rank; d++) {
            lo[d] = 0;
            step[d] = 1;
            od[d] = a.x.dims[d];
        }
        for (size_t i = 0; i < ns; i++) {
            int32_t d;
            if (!norm_axis(p3 ? ax[i] : (int64_t)i, a.x.rank, &d)) goto done;
            int64_t dim = a.x.dims[d], k = p4 ? sp[i] : 1;
            if (k == 0) goto done;
            int64_t b0 = s[i], e0 = e[i];
            if (b0 < 0) b0 += dim;
            if (e0 < 0) e0 += dim;
            if (k > 0) {
                b0 = b0 < 0 ? 0 : (b0 > dim ? dim : b0);
                e0 = e0 < 0 ? 0 : (e0 > dim ? dim : e0);
                od[d] = e0 > b0 ? (e0 - b0 + k - 1) / k : 0;
            } else {
                b0 = b0 < 0 ? -1 : (b0 > dim - 1 ? dim - 1 : b0);
                e0 = e0 < -1 ? -1 : (e0 > dim - 1 ? dim - 1 : e0);
                od[d] = b0 > e0 ? (b0 - e0 - k - 1) / -k : 0;
            }
            lo[d] = b0;
            step[d] = k;
        }
        st = cv_alloc(out, a.x.rank, od, a.integral, ok);
        if (st || !*ok) goto done;
        int64_t ist[TX_CE_MAX_RANK];
        rstrides(&a.x, ist);
        for (uint64_t i = 0; i < out->x.n; i++) {
            uint64_t r = i;
            int64_t off = 0;
            for (int32_t d = a.x.rank - 1; d >= 0; d--) {
                int64_t cidx = (int64_t)(r % (uint64_t)od[d]);
                r /= (uint64_t)od[d];
                off += (lo[d] + cidx * step[d]) * ist[d];
            }
            out->x.v[i] = a.x.v[off];
        }
    } else if (!strcmp(op, "Split")) {
        EVAL(0, a, oka, NULL);
        int32_t axis;
        if (!oka || !norm_axis(attr_int(n, "axis", 0), a.x.rank, &axis)) goto done;
        int64_t sizes[64];
        size_t nsz = 0;
        EVAL(1, b, okb, &pres);
        const tx_rw_attr *sa = attr_of(n, "split");
        if (pres) {
            if (!okb || !as_ints(&b, sizes, 64, &nsz)) goto done;
        } else if (sa && sa->type == TX_IR_ATTR_INTS && sa->n_ints <= 64) {
            memcpy(sizes, sa->ints, sa->n_ints * sizeof *sizes);
            nsz = sa->n_ints;
        } else {
            if (n->n_outputs == 0 || n->n_outputs > 64 || a.x.dims[axis] % (int64_t)n->n_outputs)
                goto done;
            nsz = n->n_outputs;
            for (size_t i = 0; i < nsz; i++) sizes[i] = a.x.dims[axis] / (int64_t)nsz;
        }
        if (slot >= nsz) goto done;
        int64_t start = 0, tot = 0;
        for (size_t i = 0; i < nsz; i++) {
            if (sizes[i] < 0) goto done;
            if (i < slot) start += sizes[i];
            tot += sizes[i];
        }
        if (tot != a.x.dims[axis]) goto done;
        int64_t od[TX_CE_MAX_RANK];
        memcpy(od, a.x.dims, (size_t)a.x.rank * sizeof *od);
        od[axis] = sizes[slot];
        st = cv_alloc(out, a.x.rank, od, a.integral, ok);
        if (st || !*ok) goto done;
        int64_t outer = 1, inner = 1;
        for (int32_t d = 0; d < axis; d++) outer *= od[d];
        for (int32_t d = axis + 1; d < a.x.rank; d++) inner *= od[d];
        uint64_t w = 0;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < sizes[slot] * inner; k++)
                out->x.v[w++] = a.x.v[(o * a.x.dims[axis] + start) * inner + k];
    } else if (!strcmp(op, "Expand")) {
        EVAL(0, a, oka, NULL);
        EVAL(1, b, okb, NULL);
        ce_val shp = {0};
        int64_t sh[TX_CE_MAX_RANK];
        size_t ns;
        if (!oka || !okb || !as_ints(&b, sh, TX_CE_MAX_RANK, &ns)) goto done;
        shp.x.rank = (int32_t)ns;
        memcpy(shp.x.dims, sh, ns * sizeof *sh);
        const tx_ce_value *xs[2] = {&a.x, &shp.x};
        int32_t orank;
        int64_t od[TX_CE_MAX_RANK];
        if (!bshape(xs, 2, &orank, od)) goto done;
        st = cv_alloc(out, orank, od, a.integral, ok);
        if (st || !*ok) goto done;
        int64_t bst[1][TX_CE_MAX_RANK], off[1];
        bstrides(&a.x, orank, od, bst[0]);
        for (uint64_t i = 0; i < out->x.n; i++) {
            boffsets(i, orank, od, bst, 1, off);
            out->x.v[i] = a.x.v[off[0]];
        }
    } else if (!strcmp(op, "Range")) {
        EVAL(0, a, oka, NULL);
        EVAL(1, b, okb, NULL);
        EVAL(2, c, okc, NULL);
        if (!oka || !okb || !okc || a.x.n != 1 || b.x.n != 1 || c.x.n != 1 || c.x.v[0] == 0)
            goto done;
        double cnt = ceil((b.x.v[0] - a.x.v[0]) / c.x.v[0]);
        if (!(cnt <= TX_CE_MAX_ELEMENTS)) goto done;
        int64_t len = cnt > 0 ? (int64_t)cnt : 0;
        st = cv_alloc(out, 1, &len, a.integral, ok);
        if (st || !*ok) goto done;
        for (int64_t i = 0; i < len; i++) out->x.v[i] = a.x.v[0] + (double)i * c.x.v[0];
    } else if (!strcmp(op, "Trilu")) {
        EVAL(0, a, oka, NULL);
        EVAL(1, b, okb, &pres);
        if (!oka || a.x.rank < 2 || (pres && (!okb || b.x.n != 1))) goto done;
        int64_t k = pres ? (int64_t)b.x.v[0] : 0;
        bool upper = attr_int(n, "upper", 1) != 0;
        int64_t rows = a.x.dims[a.x.rank - 2], cols = a.x.dims[a.x.rank - 1];
        for (uint64_t i = 0; i < a.x.n; i++) {
            int64_t j = (int64_t)(i % (uint64_t)cols), r = (int64_t)((i / (uint64_t)cols) %
                                                                     (uint64_t)rows);
            bool keep = upper ? j - r >= k : j - r <= k;
            if (!keep) a.x.v[i] = 0;
        }
        *out = a;
        memset(&a, 0, sizeof a);
        *ok = true;
    } else if (!strcmp(op, "Where") || is_binop(op)) {
        bool where = op[0] == 'W';
        EVAL(0, a, oka, NULL);
        EVAL(1, b, okb, NULL);
        if (where) EVAL(2, c, okc, NULL);
        if (!oka || !okb || (where && !okc)) goto done;
        const tx_ce_value *xs[3] = {&a.x, &b.x, &c.x};
        int nx = where ? 3 : 2;
        int32_t orank;
        int64_t od[TX_CE_MAX_RANK];
        if (!bshape(xs, nx, &orank, od)) goto done;
        bool integral = where ? (b.integral && c.integral)
                              : (is_compare(op) || (a.integral && b.integral));
        st = cv_alloc(out, orank, od, integral, ok);
        if (st || !*ok) goto done;
        int64_t bst[3][TX_CE_MAX_RANK], off[3];
        for (int k = 0; k < nx; k++) bstrides(xs[k], orank, od, bst[k]);
        for (uint64_t i = 0; i < out->x.n; i++) {
            boffsets(i, orank, od, bst, nx, off);
            if (where)
                out->x.v[i] = a.x.v[off[0]] != 0 ? b.x.v[off[1]] : c.x.v[off[2]];
            else
                out->x.v[i] = binop(op, a.x.v[off[0]], b.x.v[off[1]], a.integral && b.integral);
        }
    } else if (!strcmp(op, "Not") || !strcmp(op, "Neg") || !strcmp(op, "Sqrt") ||
               !strcmp(op, "Reciprocal") || !strcmp(op, "Abs") || !strcmp(op, "Floor") ||
               !strcmp(op, "Ceil")) {
        EVAL(0, a, oka, NULL);
        if (!oka) goto done;
        for (uint64_t i = 0; i < a.x.n; i++) {
            double d = a.x.v[i];
            switch (op[0]) {
            case 'N': d = op[1] == 'o' ? (d == 0) : -d; break;
            case 'S': d = sqrt(d); break;
            case 'R': d = 1.0 / d; break;
            case 'A': d = fabs(d); break;
            case 'F': d = floor(d); break;
            default: d = ceil(d); break;
            }
            a.x.v[i] = d;
        }
        if (!strcmp(op, "Sqrt") || !strcmp(op, "Reciprocal")) a.integral = false;
        *out = a;
        memset(&a, 0, sizeof a);
        *ok = true;
    }
#undef EVAL
done:
    cv_release(&a);
    cv_release(&b);
    cv_release(&c);
    if (st) {
        cv_release(out);
        *ok = false;
    }
    return st;
}

static teexec_status *ev(tx_rw_graph *g, const char *value, ce_ctx *cx, ce_val *out, bool *ok)
{
    memset(out, 0, sizeof *out);
    *ok = false;
    if (!value || !value[0] || cx->depth >= CE_MAX_DEPTH || cx->visits >= CE_MAX_VISITS)
        return NULL;
    cx->visits++;
    tx_tensor t;
    if (tx_rw_constant(g, value, &t)) {
        teexec_status *st = from_tensor(&t, out, ok);
        tx_tensor_release(&t);
        return st;
    }
    if (tx_rw_is_graph_input(g, value)) return NULL;
    size_t slot = 0;
    int64_t p = tx_rw_producer(g, value, &slot);
    if (p < 0) return NULL;
    const tx_rw_node *n = tx_rw_node_at(g, (size_t)p);
    if (!n || n->dead) return NULL;
    cx->depth++;
    teexec_status *st = ev_node(g, n, slot, cx, out, ok);
    cx->depth--;
    return st;
}

teexec_status *tx_ce_eval(tx_rw_graph *g, const char *value, tx_ce_value *out, bool *is_const)
{
    ce_val c;
    ce_ctx cx = {0, 0};
    teexec_status *st = ev(g, value, &cx, &c, is_const);
    *out = c.x;
    if (st || !*is_const) {
        tx_ce_release(out);
        *is_const = false;
    }
    return st;
}

bool tx_ce_ints(tx_rw_graph *g, const char *value, int64_t *out, size_t cap, size_t *n)
{
    ce_val c;
    bool ok = false;
    ce_ctx cx = {0, 0};
    teexec_status *st = ev(g, value, &cx, &c, &ok);
    if (st) {
        teexec_status_destroy(st);
        return false;
    }
    bool r = ok && as_ints(&c, out, cap, n);
    cv_release(&c);
    return r;
}
