/* einsum.c - Einsum by direct summation.
 *
 * The equation is parsed into labels ('a'-'z', 'A'-'Z', and one label per
 * ellipsis dim). Every label gets a size and, per input, a stride (the sum
 * of the strides of the dims carrying it, which is what a repeated label -
 * a diagonal - means; 0 where the input lacks it or broadcasts it). The
 * output is walked in order, and for each element the summed labels are
 * walked with an odometer, multiplying one element of every input. Inputs
 * are converted once to double (floats) or int64 (integers).
 *
 * This covers batch matmul, transposes, inner/outer products, traces and
 * sums over axes. It is O(product of all label sizes): fine for the small
 * einsums exported models contain, not a GEMM replacement. */
#include "kernels/cpu/ops.h"

#include "kernels/cpu/kcommon.h"

#include <stdlib.h>
#include <string.h>

#define N_LETTERS 52
#define MAX_LABELS (N_LETTERS + TX_MAX_RANK)
#define MAX_INPUTS 64

typedef struct einsum_plan {
    size_t n;
    int nlabels;                    /* labels in use, output ones first    */
    int order[MAX_LABELS];          /* label ids in walk order             */
    int nout;                       /* the first nout of order are outputs */
    int64_t size[MAX_LABELS];       /* by label id                         */
    int64_t stride[MAX_INPUTS][MAX_LABELS]; /* by input, label id          */
    int32_t out_rank;
    int64_t out_dims[TX_MAX_RANK];
} einsum_plan;

static int letter_id(char c)
{
    if (c >= 'a' && c <= 'z') return c - 'a';
    if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
    return -1;
}

/* ASCII order of letter ids, for the implicit output (uppercase first). */
static int ascii_of(int id)
{
    return id < 26 ? 'a' + id : 'A' + (id - 26);
}

/* One term: its labels with ELL (-2) standing for the ellipsis. */
#define ELL (-2)
typedef struct term {
    int labels[TX_MAX_RANK + 1];
    int count;
    bool has_ellipsis;
} term;

static teexec_status *unsupported(const char *eq, const char *why)
{
    return tx_error(TEEXEC_ERR_UNSUPPORTED, "Einsum: equation \"%s\" is not supported (%s)", eq,
                    why);
}

static teexec_status *parse_term(const char *eq, const char *s, size_t len, term *t)
{
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < len;) {
        if (s[i] == ' ') {
            i++;
            continue;
        }
        if (s[i] == '.') {
            if (i + 2 >= len || s[i + 1] != '.' || s[i + 2] != '.' || t->has_ellipsis)
                return unsupported(eq, "malformed ellipsis");
            if (t->count > TX_MAX_RANK) return unsupported(eq, "too many labels");
            t->labels[t->count++] = ELL;
            t->has_ellipsis = true;
            i += 3;
            continue;
        }
        int id = letter_id(s[i]);
        if (id < 0) return unsupported(eq, "labels must be letters");
        if (t->count > TX_MAX_RANK) return unsupported(eq, "too many labels");
        t->labels[t->count++] = id;
        i++;
    }
    return NULL;
}

static teexec_status *make_plan(const char *eq, size_t n, const tx_tensor *const *inputs,
                                einsum_plan *p)
{
    if (!eq) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Einsum: no equation");
    if (n == 0 || !inputs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "Einsum: needs at least one input");
    if (n > MAX_INPUTS) return unsupported(eq, "too many inputs");
    memset(p, 0, sizeof(*p));
    p->n = n;
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);

    /* split the left-hand side at commas */
    term terms[MAX_INPUTS];
    size_t nt = 0, startpos = 0;
    for (size_t i = 0; i <= lhs_len; i++) {
        if (i == lhs_len || eq[i] == ',') {
            if (nt == n)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Einsum: equation \"%s\" has more terms than the %zu inputs", eq,
                                n);
            TX_TRY(parse_term(eq, eq + startpos, i - startpos, &terms[nt]));
            nt++;
            startpos = i + 1;
        }
    }
    if (nt != n)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "Einsum: equation \"%s\" has %zu terms for %zu inputs", eq, nt, n);

    /* sizes; ellipsis dims are right-aligned across inputs */
    int32_t ell_rank = 0;
    int32_t ell_count[MAX_INPUTS];
    for (size_t k = 0; k < n; k++) {
        TX_TRY(tx_check_tensor("Einsum", "input", inputs[k]));
        if (inputs[k]->dtype != inputs[0]->dtype)
            return tx_err_dtype_mismatch("Einsum", "an input", inputs[k]->dtype,
                                         inputs[0]->dtype);
        int32_t letters = terms[k].count - (terms[k].has_ellipsis ? 1 : 0);
        int32_t e = inputs[k]->rank - letters;
        if (e < 0 || (!terms[k].has_ellipsis && e != 0))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "Einsum: term %zu of \"%s\" has %d labels for rank %d", k, eq,
                            (int)letters, (int)inputs[k]->rank);
        ell_count[k] = e;
        if (e > ell_rank) ell_rank = e;
    }
    for (int i = 0; i < MAX_LABELS; i++) p->size[i] = -1;
    int64_t own_st[TX_MAX_RANK];
    for (size_t k = 0; k < n; k++) {
        tx_shape s = tx_shape_of(inputs[k]);
        tx_shape_strides(&s, own_st);
        int32_t dim = 0;
        for (int t = 0; t < terms[k].count; t++) {
            int lab = terms[k].labels[t];
            int nd = lab == ELL ? ell_count[k] : 1;
            for (int q = 0; q < nd; q++, dim++) {
                int id = lab == ELL ? N_LETTERS + (ell_rank - ell_count[k]) + q : lab;
                int64_t d = s.dims[dim];
                if (d == 1 && lab == ELL) continue; /* broadcast: stride stays 0 */
                if (p->size[id] < 0 || (lab == ELL && p->size[id] == 1)) {
                    p->size[id] = d;
                } else if (p->size[id] != d) {
                    if (lab == ELL)
                        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                        "Einsum: ellipsis dims of \"%s\" do not broadcast", eq);
                    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                    "Einsum: label '%c' has sizes %lld and %lld", ascii_of(id),
                                    (long long)p->size[id], (long long)d);
                }
                p->stride[k][id] += own_st[dim];
            }
        }
    }
    for (int i = 0; i < ell_rank; i++)
        if (p->size[N_LETTERS + i] < 0) p->size[N_LETTERS + i] = 1;

    /* output labels */
    bool is_out[MAX_LABELS] = {false};
    int nout = 0;
    if (arrow) {
        term out;
        TX_TRY(parse_term(eq, arrow + 2, strlen(arrow + 2), &out));
        for (int t = 0; t < out.count; t++) {
            int lab = out.labels[t];
            if (lab == ELL) {
                for (int i = 0; i < ell_rank; i++) {
                    p->order[nout++] = N_LETTERS + i;
                    is_out[N_LETTERS + i] = true;
                }
                continue;
            }
            if (p->size[lab] < 0)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Einsum: output label '%c' of \"%s\" is in no input", ascii_of(lab),
                                eq);
            if (is_out[lab])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "Einsum: output label '%c' of \"%s\" repeats", ascii_of(lab), eq);
            is_out[lab] = true;
            p->order[nout++] = lab;
        }
    } else {
        int occurrences[N_LETTERS] = {0};
        for (size_t k = 0; k < n; k++)
            for (int t = 0; t < terms[k].count; t++)
                if (terms[k].labels[t] != ELL) occurrences[terms[k].labels[t]]++;
        for (int i = 0; i < ell_rank; i++) {
            p->order[nout++] = N_LETTERS + i;
            is_out[N_LETTERS + i] = true;
        }
        for (int c = 'A'; c <= 'z'; c++) {
            int id = letter_id((char)c);
            if (id >= 0 && occurrences[id] == 1) {
                p->order[nout++] = id;
                is_out[id] = true;
            }
        }
    }
    if (nout > TX_MAX_RANK) return unsupported(eq, "output rank over the limit");
    p->nout = nout;
    p->nlabels = nout;
    for (int id = 0; id < MAX_LABELS; id++)
        if (p->size[id] >= 0 && !is_out[id]) p->order[p->nlabels++] = id;
    p->out_rank = nout;
    for (int i = 0; i < nout; i++) p->out_dims[i] = p->size[p->order[i]];
    return NULL;
}

teexec_status *tx_cpu_einsum_shape(const char *equation, size_t n,
                                   const tx_tensor *const *inputs, int32_t *rank, int64_t *dims)
{
    einsum_plan *p = malloc(sizeof(*p));
    if (!p) return tx_oom();
    teexec_status *st = make_plan(equation, n, inputs, p);
    if (!st) {
        *rank = p->out_rank;
        memcpy(dims, p->out_dims, sizeof(int64_t) * (size_t)p->out_rank);
    }
    free(p);
    return st;
}

teexec_status *tx_cpu_einsum(const char *equation, size_t n, const tx_tensor *const *inputs,
                             tx_tensor *y)
{
    einsum_plan *p = malloc(sizeof(*p));
    if (!p) return tx_oom();
    teexec_status *st = make_plan(equation, n, inputs, p);
    teexec_dtype dt = st ? TEEXEC_DTYPE_UNDEFINED : inputs[0]->dtype;
    tx_kclass kc = tx_kclass_of(dt);
    if (!st && !(tx_kc_is_float(kc) || kc == TX_KC_I64 || kc == TX_KC_U64))
        st = tx_err_dtype("Einsum", dt);
    tx_shape ys;
    if (!st) {
        ys.rank = p->out_rank;
        memcpy(ys.dims, p->out_dims, sizeof(ys.dims));
        st = tx_check_output("Einsum", y, dt, &ys);
    }
    if (st) {
        free(p);
        return st;
    }
    bool fl = tx_kc_is_float(kc);
    void *vals[MAX_INPUTS] = {NULL};
    for (size_t k = 0; k < n && !st; k++) {
        vals[k] = malloc(inputs[k]->numel * 8 + 8);
        if (!vals[k]) {
            st = tx_oom();
            break;
        }
        if (fl)
            tx_load_f64(dt, inputs[k]->data, 0, inputs[k]->numel, vals[k]);
        else
            tx_load_i64(dt, inputs[k]->data, 0, inputs[k]->numel, vals[k]);
    }
    void *outv = st ? NULL : malloc(y->numel * 8 + 8);
    if (!st && !outv) st = tx_oom();
    if (!st) {
        int L = p->nlabels, nout = p->nout;
        int64_t idx[MAX_LABELS] = {0}, off[MAX_INPUTS] = {0};
        bool empty_sum = false;
        for (int l = nout; l < L; l++)
            if (p->size[p->order[l]] == 0) empty_sum = true;
        for (uint64_t o = 0; o < y->numel; o++) {
            /* the summed labels start at 0: off holds the output part only */
            double accd = 0.0;
            uint64_t acci = 0;
            if (!empty_sum) {
                for (;;) {
                    if (fl) {
                        double prod = 1.0;
                        for (size_t k = 0; k < n; k++) prod *= ((double *)vals[k])[off[k]];
                        accd += prod;
                    } else {
                        uint64_t prod = 1;
                        for (size_t k = 0; k < n; k++)
                            prod *= (uint64_t)((int64_t *)vals[k])[off[k]];
                        acci += prod;
                    }
                    int l = L - 1;
                    for (; l >= nout; l--) {
                        int id = p->order[l];
                        idx[l]++;
                        for (size_t k = 0; k < n; k++) off[k] += p->stride[k][id];
                        if (idx[l] < p->size[id]) break;
                        for (size_t k = 0; k < n; k++) off[k] -= p->stride[k][id] * p->size[id];
                        idx[l] = 0;
                    }
                    if (l < nout) break;
                }
            }
            if (fl)
                ((double *)outv)[o] = accd;
            else
                ((int64_t *)outv)[o] = (int64_t)acci;
            /* next output element */
            for (int l = nout - 1; l >= 0; l--) {
                int id = p->order[l];
                idx[l]++;
                for (size_t k = 0; k < n; k++) off[k] += p->stride[k][id];
                if (idx[l] < p->size[id]) break;
                for (size_t k = 0; k < n; k++) off[k] -= p->stride[k][id] * p->size[id];
                idx[l] = 0;
            }
        }
        if (!fl) {
            tx_store_i64(dt, y->data, 0, y->numel, outv);
        } else if (kc == TX_KC_F64) {
            tx_store_f64(dt, y->data, 0, y->numel, outv);
        } else {
            float fb[TX_BLOCK];
            const double *d = outv;
            for (size_t i = 0; i < y->numel; i += TX_BLOCK) {
                size_t m = y->numel - i < TX_BLOCK ? y->numel - i : TX_BLOCK;
                for (size_t j = 0; j < m; j++) fb[j] = (float)d[i + j];
                tx_store_f32(dt, y->data, i, m, fb);
            }
        }
    }
    free(outv);
    for (size_t k = 0; k < n; k++) free(vals[k]);
    free(p);
    return st;
}
