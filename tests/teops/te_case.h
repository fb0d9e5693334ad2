/*
 * te_case.h - test harness for the TE op implementations: one op instance
 * (attributes, input, extra inputs, parameters) that can run forward and
 * backward through the CPU registry, evaluate a fixed random linear loss
 * of all its outputs, and check its backward against central finite
 * differences. Tests only; cmocka asserts on failure. Not thread-safe.
 */
#ifndef TEEXEC_TESTS_TEOPS_TE_CASE_H
#define TEEXEC_TESTS_TEOPS_TE_CASE_H

#include "base/tensor.h"
#include "format/te_schema.h"
#include "kernels/cpu/te_args.h"

#include <stdbool.h>
#include <stdint.h>

#define TC_MAX_PARAMS 16

typedef struct te_case {
    tx_te_op_id op;
    const tx_te_op_schema *s;
    tx_te_attr_value attrs[TX_TE_MAX_ATTRS];
    int64_t ints[TX_MAX_RANK]; /* storage for an INTS attribute */
    tx_tensor in;
    tx_tensor ex[TX_TE_MAX_EXTRA];
    bool ex_present[TX_TE_MAX_EXTRA];
    tx_tensor par[TC_MAX_PARAMS];
    int n_par;
    bool training;
    uint64_t rng_offset;
    /* results of the last tc_forward */
    tx_tensor out, xo[TX_TE_MAX_EXTRA], aux[TX_TE_MAX_EXTRA];
    /* loss weights (one per element of out / xo[j]), made on first use */
    double *wy, *wx[TX_TE_MAX_EXTRA];
} te_case;

void tc_init(te_case *c, tx_te_op_id op);
void tc_free(te_case *c);

/* Allocates t with dtype/shape and fills it with uniform values in [lo, hi)
 * from seed (rounded to dt). */
void tc_fill(tx_tensor *t, teexec_dtype dt, int rank, const int64_t *dims, uint64_t seed,
             double lo, double hi);
/* Element i of a float tensor as double, and writing one (rounded to dt). */
double tc_get(const tx_tensor *t, uint64_t i);
void tc_set(tx_tensor *t, uint64_t i, double v);

/* Infers and allocates the outputs, then runs the forward. */
teexec_status *tc_forward(te_case *c);
/* The loss sum(wy·y) + sum_j sum(wx_j·extra_j) of a fresh forward. */
double tc_loss(te_case *c);

/* Runs forward + backward with dy = wy, dextra_j = wx_j and checks every
 * gradient (main input if float, extra inputs that take grads, parameters)
 * against central differences: ||analytic - fd|| <= tol·max(||fd||, 1e-3). */
void tc_gradcheck(te_case *c, double tol);

/* A copy of c (attributes, inputs, parameters) with every float tensor
 * converted to dt. */
void tc_clone_as(const te_case *c, te_case *dst, teexec_dtype dt);
/* Rounds every float tensor of c (FP64) to values representable in dt. */
void tc_round_to(te_case *c, teexec_dtype dt);

/* Asserts |got - want| <= atol + rtol·|want| elementwise (any float dtypes). */
void tc_assert_close(const tx_tensor *got, const tx_tensor *want, double rtol, double atol,
                     const char *what);

#endif
