/*
 * te_misc.c - the TE ops that move or scale values without other math, CPU:
 * Identity, Quantize (identity without a recipe: the recipe's quantizers
 * run in the quantizer kernels, not here), the communication ops AllGather,
 * AllReduce, ReduceScatter (over the thread's tensor-parallel group,
 * te_collective.h; the identity without one), Reshape, ConstantScale,
 * AddExtraInput and MakeExtraOutput.
 */
#include "kernels/cpu/te_collective.h"
#include "kernels/cpu/te_common.h"
#include "kernels/cpu/te_impl.h"

#include <stdlib.h>
#include <string.h>

/* dst = src·s (+ add·1 when add is given), one rounding at the store. */
static teexec_status *scale_add(const tx_tensor *src, double s, const tx_tensor *add, tx_tensor *dst)
{
    uint64_t n = src->numel;
    if (src->dtype == TEEXEC_DTYPE_DOUBLE) {
        double *b = NULL, *c = NULL;
        TX_TRY(tx_te_load_f64(src, &b));
        teexec_status *st = add ? tx_te_load_f64(add, &c) : NULL;
        if (!st) {
            for (uint64_t i = 0; i < n; i++) b[i] = b[i] * s + (c ? c[i] : 0.0);
            tx_te_store_f64(dst, b);
        }
        free(b);
        free(c);
        return st;
    }
    float *b = NULL, *c = NULL;
    TX_TRY(tx_te_load_f32(src, &b));
    teexec_status *st = add ? tx_te_load_f32(add, &c) : NULL;
    if (!st) {
        float fs = (float)s;
        for (uint64_t i = 0; i < n; i++) b[i] = (fs == 1.0f ? b[i] : b[i] * fs) + (c ? c[i] : 0.0f);
        tx_te_store_f32(dst, b);
    }
    free(b);
    free(c);
    return st;
}

static teexec_status *same_shape(tx_te_op_id op, const char *what, const tx_tensor *t,
                                 const tx_tensor *like)
{
    tx_shape s = tx_shape_of(like);
    return tx_te_check_real_shape(op, what, t, &s);
}

teexec_status *tx_te_cpu_passthrough_fwd(const tx_te_fwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "x", a->input));
    TX_TRY(same_shape(a->op, "y", a->output, a->input));
    tx_te_convert_copy(a->output, a->input);
    return NULL;
}

teexec_status *tx_te_cpu_passthrough_bwd(const tx_te_bwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "dy", a->grad_output));
    if (!a->grad_input) return NULL;
    TX_TRY(same_shape(a->op, "dx", a->grad_input, a->grad_output));
    tx_te_convert_copy(a->grad_input, a->grad_output);
    return NULL;
}

/* Communication ops. AllReduce sums y = x over the thread's group (the
 * identity without one); its backward is dx = dy (TE's row-parallel
 * output: every rank holds the whole gradient already). AllGather and
 * ReduceScatter run over world_size ranks (their attribute, which shape
 * inference read), which must be the bound group's size (1 and no group:
 * the identity; a mismatch is refused rather than guessed). Tensors of float, double or bfloat16; sums in the group's
 * order. Their backward over more than one rank is not wired (no trainer
 * binds a tensor-parallel group yet): refused. */
static teexec_status *comm_dtype(const tx_te_fwd_args *a, const char *name, int world)
{
    teexec_dtype dt = a->input->dtype;
    if (dt != TEEXEC_DTYPE_FLOAT && dt != TEEXEC_DTYPE_DOUBLE && dt != TEEXEC_DTYPE_BFLOAT16)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "te.ops %s over %d ranks: dtype %s (float, double or bfloat16 only)", name,
                        world, teexec_dtype_name(dt));
    if (a->output->dtype != dt)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: y's dtype differs from x's", name);
    return NULL;
}

static int64_t attr_world(const tx_te_fwd_args *a)
{
    return a->op == TX_TE_ALL_REDUCE ? 0 : a->attrs[TX_TE_A_COMM_WORLD].i;
}

teexec_status *tx_te_cpu_collective_fwd(const tx_te_fwd_args *a)
{
    const tx_te_collective *g = tx_te_collective_current();
    const char *name = tx_te_schema(a->op)->name;
    int64_t w = attr_world(a); /* 0: AllReduce, the group's size */
    int have = g->world < 2 || !g->all_reduce ? 1 : g->world;
    if (have == 1 && w <= 1) return tx_te_cpu_passthrough_fwd(a);
    if (w >= 1 && have != w)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops %s: world_size=%lld, but the run's tensor-parallel group has %d "
                        "rank%s (teexec_session_options_set_comm)",
                        name, (long long)w, have, have == 1 ? "" : "s");
    TX_TRY(tx_te_check_real(a->op, "x", a->input));
    TX_TRY(tx_te_check_real(a->op, "y", a->output));
    TX_TRY(comm_dtype(a, name, g->world));
    teexec_status *st;
    if (a->op == TX_TE_ALL_REDUCE) {
        TX_TRY(same_shape(a->op, "y", a->output, a->input));
        if (a->output->data != a->input->data)
            memcpy(a->output->data, a->input->data, a->input->nbytes);
        st = g->all_reduce(g->ctx, a->input->dtype, a->output->data, (size_t)a->output->numel);
    } else if (a->op == TX_TE_ALL_GATHER) {
        if (a->output->numel != a->input->numel * (uint64_t)g->world)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: y is not %d times x", name,
                            g->world);
        st = g->all_gather(g->ctx, a->input->dtype, a->input->data, a->output->data,
                           (size_t)a->input->numel);
    } else {
        if (a->input->numel != a->output->numel * (uint64_t)g->world)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops %s: x is not %d times y", name,
                            g->world);
        st = g->reduce_scatter(g->ctx, a->input->dtype, a->input->data, a->output->data,
                               (size_t)a->output->numel);
    }
    return tx_status_prefix(st, "te.ops %s", name);
}

teexec_status *tx_te_cpu_collective_bwd(const tx_te_bwd_args *a)
{
    int64_t w = a->op == TX_TE_ALL_REDUCE ? 1 : a->attrs[TX_TE_A_COMM_WORLD].i;
    if (w > 1)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "te.ops %s backward over %lld ranks is not supported yet",
                        tx_te_schema(a->op)->name, (long long)w);
    return tx_te_cpu_passthrough_bwd(a);
}

teexec_status *tx_te_cpu_reshape_fwd(const tx_te_fwd_args *a)
{
    const tx_te_attr_value *sv = &a->attrs[TX_TE_A_RESHAPE_SHAPE];
    TX_TRY(tx_te_check_real(a->op, "x", a->input));
    tx_shape in = tx_shape_of(a->input), out;
    teexec_status *st = tx_shape_reshape(&in, sv->ints, (size_t)sv->n_ints, true, &out);
    if (st) return tx_status_prefix(st, "te.ops Reshape");
    TX_TRY(tx_te_check_real_shape(a->op, "y", a->output, &out));
    tx_te_convert_copy(a->output, a->input);
    return NULL;
}

teexec_status *tx_te_cpu_reshape_bwd(const tx_te_bwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "dy", a->grad_output));
    if (!a->grad_input) return NULL;
    TX_TRY(tx_te_check_real(a->op, "dx", a->grad_input));
    if (a->grad_input->numel != a->grad_output->numel)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops Reshape: dx has %llu elements, dy %llu",
                        (unsigned long long)a->grad_input->numel,
                        (unsigned long long)a->grad_output->numel);
    tx_te_convert_copy(a->grad_input, a->grad_output);
    return NULL;
}

teexec_status *tx_te_cpu_constant_scale_fwd(const tx_te_fwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "x", a->input));
    TX_TRY(same_shape(a->op, "y", a->output, a->input));
    return scale_add(a->input, a->attrs[TX_TE_A_SCALE].f, NULL, a->output);
}

teexec_status *tx_te_cpu_constant_scale_bwd(const tx_te_bwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "dy", a->grad_output));
    if (!a->grad_input) return NULL;
    TX_TRY(same_shape(a->op, "dx", a->grad_input, a->grad_output));
    return scale_add(a->grad_output, a->attrs[TX_TE_A_SCALE].f, NULL, a->grad_input);
}

teexec_status *tx_te_cpu_add_extra_input_fwd(const tx_te_fwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "x", a->input));
    if (a->n_extra_inputs < 1)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "te.ops AddExtraInput: the extra input is missing");
    TX_TRY(same_shape(a->op, "extra input", a->extra_inputs[0], a->input));
    TX_TRY(same_shape(a->op, "y", a->output, a->input));
    return scale_add(a->input, 1.0, a->extra_inputs[0], a->output);
}

teexec_status *tx_te_cpu_add_extra_input_bwd(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output;
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    tx_tensor *de = a->n_grad_extra_inputs > 0 ? a->grad_extra_inputs[0] : NULL;
    if (a->grad_input) TX_TRY(same_shape(a->op, "dx", a->grad_input, dy));
    if (de) TX_TRY(same_shape(a->op, "dextra", de, dy));
    if (a->grad_input) tx_te_convert_copy(a->grad_input, dy);
    if (de) tx_te_convert_copy(de, dy);
    return NULL;
}

teexec_status *tx_te_cpu_make_extra_output_fwd(const tx_te_fwd_args *a)
{
    TX_TRY(tx_te_check_real(a->op, "x", a->input));
    TX_TRY(same_shape(a->op, "y", a->output, a->input));
    if (a->n_extra_outputs < 1 || !a->extra_outputs[0])
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "te.ops MakeExtraOutput: the extra output is missing");
    TX_TRY(same_shape(a->op, "extra output", a->extra_outputs[0], a->input));
    tx_te_convert_copy(a->output, a->input);
    tx_te_convert_copy(a->extra_outputs[0], a->input);
    return NULL;
}

teexec_status *tx_te_cpu_make_extra_output_bwd(const tx_te_bwd_args *a)
{
    const tx_tensor *dy = a->grad_output;
    TX_TRY(tx_te_check_real(a->op, "dy", dy));
    const tx_tensor *de = a->n_grad_extra_outputs > 0 ? a->grad_extra_outputs[0] : NULL;
    if (de) TX_TRY(same_shape(a->op, "dextra", de, dy));
    if (!a->grad_input) return NULL;
    TX_TRY(same_shape(a->op, "dx", a->grad_input, dy));
    if (!de) {
        tx_te_convert_copy(a->grad_input, dy);
        return NULL;
    }
    return scale_add(dy, 1.0, de, a->grad_input);
}
