/*
 * loss.c - MSE and softmax cross-entropy with their gradients (loss.h).
 */
#include "kernels/cpu/loss.h"

#include "base/dtype.h"
#include "base/shape.h"
#include "kernels/cpu/te_common.h"

#include <math.h>
#include <stdlib.h>

static teexec_status *check_float(const char *op, const char *what, const tx_tensor *t)
{
    if (!t || !t->data)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s is missing", op, what);
    if (!tx_dtype_is_real(t->dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: %s has type %s, expected float32, float16, bfloat16 or float64", op,
                        what, teexec_dtype_name(t->dtype));
    return NULL;
}

static teexec_status *check_same_shape(const char *op, const char *what, const tx_tensor *t,
                                       const tx_tensor *like)
{
    tx_shape s = tx_shape_of(like);
    if (tx_tensor_has_shape(t, &s)) return NULL;
    char b1[160], b2[160];
    tx_shape g = tx_shape_of(t);
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: %s has shape %s, expected %s", op, what,
                    tx_shape_str(&g, b1, sizeof b1), tx_shape_str(&s, b2, sizeof b2));
}

teexec_status *tx_loss_mse(const tx_tensor *pred, const tx_tensor *target,
                           tx_loss_reduction reduction, double *loss, tx_tensor *grad)
{
    static const char *op = "mse loss";
    TX_TRY(check_float(op, "prediction", pred));
    TX_TRY(check_float(op, "target", target));
    TX_TRY(check_same_shape(op, "target", target, pred));
    if (grad) {
        TX_TRY(check_float(op, "gradient", grad));
        TX_TRY(check_same_shape(op, "gradient", grad, pred));
    }
    double *p = NULL, *t = NULL;
    teexec_status *st = tx_te_load_f64(pred, &p);
    if (!st) st = tx_te_load_f64(target, &t);
    if (!st) {
        uint64_t n = pred->numel;
        double div = reduction == TX_LOSS_MEAN ? (double)n : 1.0;
        double sum = 0.0;
        for (uint64_t i = 0; i < n; i++) {
            double d = p[i] - t[i];
            sum += d * d;
            p[i] = 2.0 * d / div; /* reuse p for the gradient */
        }
        *loss = reduction == TX_LOSS_MEAN ? (n ? sum / (double)n : NAN) : sum;
        if (grad) tx_te_store_f64(grad, p);
    }
    free(p);
    free(t);
    return st;
}

teexec_status *tx_loss_cross_entropy(const tx_tensor *logits, const tx_tensor *labels,
                                     int64_t ignore_index, tx_loss_reduction reduction,
                                     double *loss, tx_tensor *grad, uint64_t *n_counted)
{
    static const char *op = "cross-entropy loss";
    TX_TRY(check_float(op, "logits", logits));
    if (logits->rank < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: logits must have a class dim", op);
    if (!labels || !labels->data ||
        (labels->dtype != TEEXEC_DTYPE_INT64 && labels->dtype != TEEXEC_DTYPE_INT32))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "%s: labels must be int64 or int32", op);
    tx_shape ls = tx_shape_of(logits);
    ls.rank--;
    if (!tx_tensor_has_shape(labels, &ls)) {
        char b1[160], b2[160];
        tx_shape g = tx_shape_of(labels), l = tx_shape_of(logits);
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "%s: labels %s must have the shape of logits %s without the class dim",
                        op, tx_shape_str(&g, b1, sizeof b1), tx_shape_str(&l, b2, sizeof b2));
    }
    if (grad) {
        TX_TRY(check_float(op, "gradient", grad));
        TX_TRY(check_same_shape(op, "gradient", grad, logits));
    }
    int64_t c = logits->dims[logits->rank - 1];
    uint64_t rows = labels->numel;
    double *z = NULL;
    TX_TRY(tx_te_load_f64(logits, &z));
    uint64_t counted = 0;
    double sum = 0.0;
    for (uint64_t r = 0; r < rows; r++) {
        int64_t y = labels->dtype == TEEXEC_DTYPE_INT64 ? ((const int64_t *)labels->data)[r]
                                                        : ((const int32_t *)labels->data)[r];
        double *zr = z + r * (uint64_t)c;
        if (y == ignore_index) {
            for (int64_t j = 0; j < c; j++) zr[j] = 0.0;
            continue;
        }
        if (y < 0 || y >= c) {
            free(z);
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "%s: label %lld at position %llu is outside [0, %lld) and is not "
                            "the ignore index %lld", op, (long long)y, (unsigned long long)r,
                            (long long)c, (long long)ignore_index);
        }
        double mx = -INFINITY;
        for (int64_t j = 0; j < c; j++) mx = zr[j] > mx ? zr[j] : mx;
        double se = 0.0;
        for (int64_t j = 0; j < c; j++) se += exp(zr[j] - mx);
        double lse = mx + log(se);
        sum += lse - zr[y];
        counted++;
        for (int64_t j = 0; j < c; j++) zr[j] = exp(zr[j] - lse) - (j == y ? 1.0 : 0.0);
    }
    double div = reduction == TX_LOSS_MEAN ? (double)counted : 1.0;
    *loss = reduction == TX_LOSS_MEAN ? (counted ? sum / div : NAN) : sum;
    if (n_counted) *n_counted = counted;
    if (grad) {
        if (counted && div != 1.0)
            for (uint64_t i = 0; i < logits->numel; i++) z[i] /= div;
        tx_te_store_f64(grad, z);
    }
    free(z);
    return NULL;
}
