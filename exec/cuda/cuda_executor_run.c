/* cuda_executor_run.c - running the CUDA executor (cuda_executor.h): forward, loss,
 * backward, optimizer, CUDA-graph capture and replay, the profile, results
 * and parameters by the user's names. */
#include "exec/cuda/cuda_executor_internal.h"
#include "exec/device_budget.h"
#include "exec/weight_share.h"

#include "exec/cuda/te_cuda_linear.h"
#include "exec/run_options.h"
#include "exec/train_internal.h"
#include "exec/train_schedule.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/loss_mse.h"
#include "kernels/cuda/xent.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- profile ------------------------------------------------------------------- */

static prof_row *prof_find(tx_cuda_executor *g, const char *name, int32_t group, bool bwd)
{
    for (size_t i = 0; i < g->n_prof; i++)
        if (g->prof[i].group == group && g->prof[i].backward == bwd &&
            !strcmp(g->prof[i].name, name))
            return &g->prof[i];
    prof_row *np = realloc(g->prof, (g->n_prof + 1) * sizeof(*np));
    if (!np) return NULL;
    g->prof = np;
    prof_row *r = &g->prof[g->n_prof++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->group = group;
    r->backward = bwd;
    return r;
}

/* Whether this call times its kernels: the session-wide profile, or this
 * run's own (run options set_profile). */
static bool profiling(const tx_cuda_executor *g) { return g->cfg.profile || g->run_prof_on; }

static teexec_status *prof_begin(tx_cuda_executor *g)
{
    if (!profiling(g)) return NULL;
    CU(cudaEventRecord(g->ev[0], g->stream), "profile event");
    return NULL;
}

static teexec_status *prof_end(tx_cuda_executor *g, const char *name, int32_t group, bool bwd)
{
    if (!profiling(g)) return NULL;
    CU(cudaEventRecord(g->ev[1], g->stream), "profile event");
    CU(cudaEventSynchronize(g->ev[1]), "profile event");
    float ms = 0.0f;
    CU(cudaEventElapsedTime(&ms, g->ev[0], g->ev[1]), "profile event");
    if (g->run_prof_on) TX_TRY(tx_run_profile_add(&g->run_prof, name, group, bwd, ms));
    if (!g->cfg.profile) return NULL;
    prof_row *r = prof_find(g, name, group, bwd);
    if (!r) return tx_oom();
    r->calls++;
    r->ms += ms;
    if (g->calls_done == 0) {
        r->first_calls++;
        r->first_ms += ms;
    }
    return NULL;
}

static int32_t group_of(const tx_cuda_executor *g, int32_t node)
{
    return g->fplan && g->fplan->group_of_node ? g->fplan->group_of_node[node] : -1;
}

static void kernel_name(const tx_cuda_executor *g, const cx_node *n, bool bwd, char *buf, size_t size)
{
    int32_t f = bwd ? n->bwd_fused : n->fwd_fused;
    if (f >= 0) {
        const cx_fused *gf = &g->fused[f];
        const tx_fusion_info *fi = tx_fusion_info_of(gf->fusion);
        const char *fname = fi ? fi->name : "fused";
        snprintf(buf, size, "%s(%s..)", fname, g->nodes[gf->nodes[0]].ir->label);
        return;
    }
    if (bwd && n->dgelu_act >= 0) {
        snprintf(buf, size, "Linear+dGELU+dBias epilogue(%s..)", n->ir->label);
        return;
    }
    snprintf(buf, size, "%s(%s)", n->ir->op_type, n->ir->label);
}

/* ---- running -------------------------------------------------------------------- */

static teexec_status *add_acc(tx_cuda_executor *g, cx_node *n)
{
    if (!n->acc) return NULL;
    for (size_t k = 0; k < n->ir->n_inputs; k++) {
        if (!n->acc[k].data) continue;
        cx_value *gv = &g->vals[n->ir->inputs[k]];
        TX_TRY(tx_cuda_add(gv->grad.data, gv->grad.dtype, n->acc[k].data, n->acc[k].dtype,
                           gv->grad.data, gv->grad.dtype, (size_t)gv->grad.numel, g->stream));
    }
    return NULL;
}

/* A cancel point of an uncaptured run: the cancel asked for by the run
 * options, once the kernels already queued have finished (nothing of this
 * run is left running when the caller gets the status). */
static teexec_status *check_cancel(tx_cuda_executor *g, const tx_ir_node *before)
{
    if (g->capturing || !tx_run_cancelled(g->run_opts)) return NULL;
    CU(cudaStreamSynchronize(g->stream), "finishing a cancelled run");
    if (!before) return tx_run_cancelled_status("before launching the CUDA graph", NULL);
    char where[256];
    snprintf(where, sizeof where, "on the CUDA device before node \"%s\" (%s)", before->label,
             before->op_type);
    return tx_run_cancelled_status(where, before->label);
}

/* TEEXEC_CUDA_POISON_DEAD: before a kernel at step `step`, every buffer
 * whose lifetime ended before it is filled with 0xFF (NaN). No kernel ran
 * between that end and this one, so nothing of a later buffer sharing the
 * bytes has been written yet. */
static teexec_status *poison_before(tx_cuda_executor *g, int32_t step)
{
    for (; g->poison_next < g->n_poison && g->poison[g->poison_next].after < step; g->poison_next++) {
        const cx_poison *p = &g->poison[g->poison_next];
        CU(cudaMemsetAsync(p->ptr, 0xFF, p->bytes, g->stream), "poisoning a dead buffer");
    }
    return NULL;
}

static teexec_status *run_forward(tx_cuda_executor *g)
{
    uint64_t step = g->steps;
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_FOLDED || n->fwd_covered || n->te_alias) continue;
        TX_TRY(check_cancel(g, n->ir));
        TX_TRY(poison_before(g, n->fstep));
        if (g->cfg.training) n->fa.rng_offset = tx_train_rng_offset(g->topt.seed, step, g->n_nodes, i);
        char name[128];
        if (profiling(g)) kernel_name(g, n, false, name, sizeof name);
        TX_TRY(prof_begin(g));
        teexec_status *st = NULL;
        if (n->fwd_fused >= 0) {
            cx_fused *gf = &g->fused[n->fwd_fused];
            const tx_te_fwd_args *as[8];
            void *states[8];
            for (int32_t j = 0; j < gf->n; j++) {
                cx_node *m = &g->nodes[gf->nodes[j]];
                if (g->cfg.training) m->fa.rng_offset = tx_train_rng_offset(g->topt.seed, step, g->n_nodes, (uint64_t)gf->nodes[j]);
                as[j] = &m->fa;
                states[j] = m->state;
            }
            st = tx_cuda_fused_forward(gf->f, as, states, g->scratch, &g->env);
        } else if (n->kind == GN_TE) {
            st = tx_cuda_te_forward(n->te, &n->fa, n->state, g->scratch, &g->env);
        } else {
            st = tx_cuda_std_forward(n->std, n->s_in, n->s_out, g->scratch, g->stream);
        }
        TX_TRY(node_err(n->ir, st));
        TX_TRY(prof_end(g, name, group_of(g, n->index), false));
    }
    return NULL;
}

static teexec_status *zero_grads(tx_cuda_executor *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        cx_node *n = &g->nodes[i];
        if (n->zero_gout0)
            CU(cudaMemsetAsync(n->gout[0]->data, 0, tensor_bytes(n->gout[0]), g->stream),
               "zeroing a gradient");
    }
    return NULL;
}

/* A Linear's backward with the GELU and Bias before it in its dgrad's
 * epilogue (the plan's BackwardLinearDGeluBias, bound by bind_dgelu_epilogues
 * in cuda_executor_build.c). */
static teexec_status *linear_dgelu_backward(tx_cuda_executor *g, cx_node *n)
{
    cx_node *act = &g->nodes[n->dgelu_act], *bias = &g->nodes[n->dgelu_bias];
    const tx_cuda_linear *l = tx_cuda_te_node_priv(n->te);
    tx_cuda_linear_bwd b;
    TX_TRY(tx_cuda_linear_bwd_args(l, &n->ba, &b));
    const tx_te_bwd_args *ba = &bias->ba;
    b.dx = ba->grad_input->data;
    b.dx_dt = ba->grad_input->dtype;
    b.dgelu_pre = act->ba.saved[0]->data;
    b.dbias = ba->grad_params[0]->data;
    TX_TRY(tx_cuda_linear_backward(l, &b, n->state, g->scratch, &g->env));
    TX_TRY(add_acc(g, n));
    return add_acc(g, bias);
}

static teexec_status *run_backward(tx_cuda_executor *g)
{
    TX_TRY(zero_grads(g));
    for (size_t i = g->n_nodes; i-- > 0;) {
        cx_node *n = &g->nodes[i];
        if (n->kind == GN_FOLDED || !n->needs_bwd || n->bwd_covered) continue;
        TX_TRY(poison_before(g, n->bstep));
        char name[128];
        if (profiling(g)) kernel_name(g, n, true, name, sizeof name);
        TX_TRY(prof_begin(g));
        teexec_status *st = NULL;
        if (n->bwd_fused >= 0) {
            cx_fused *gf = &g->fused[n->bwd_fused];
            const tx_te_bwd_args *as[8];
            void *states[8];
            for (int32_t j = 0; j < gf->n; j++) {
                cx_node *m = &g->nodes[gf->nodes[j]];
                as[j] = &m->ba;
                states[j] = m->state;
            }
            st = tx_cuda_fused_backward(gf->f, as, states, g->scratch, &g->env);
            for (int32_t j = gf->n; j-- > 0 && !st;) st = add_acc(g, &g->nodes[gf->nodes[j]]);
        } else if (n->dgelu_act >= 0) {
            st = linear_dgelu_backward(g, n);
        } else if (n->kind == GN_TE) {
            st = tx_cuda_te_backward(n->te, &n->ba, n->state, g->scratch, &g->env);
            if (!st) st = add_acc(g, n);
        } else {
            st = tx_cuda_std_backward(n->std, n->s_in, (const tx_tensor *const *)n->s_out,
                                      n->s_gout, n->s_gin, g->scratch, g->stream);
            if (!st) st = add_acc(g, n);
        }
        TX_TRY(node_err(n->ir, st));
        TX_TRY(prof_end(g, name, group_of(g, n->index), true));
    }
    return NULL;
}

static teexec_status *run_loss(tx_cuda_executor *g)
{
    cx_value *lv = &g->vals[g->loss_value];
    size_t n = (size_t)lv->dev.numel;
    if (g->topt.loss == TEEXEC_LOSS_MSE)
        return tx_cuda_mse(lv->dev.data, lv->dev.dtype, g->target, n, lv->grad.data,
                           lv->grad.dtype, g->loss_partials, g->loss_dev, g->stream);
    size_t classes = lv->dev.rank ? (size_t)lv->dev.dims[lv->dev.rank - 1] : 1;
    tx_cuda_xent_args a = {.rows = classes ? n / classes : 0, .classes = classes,
                           .logits = lv->dev.data, .logits_dtype = lv->dev.dtype,
                           .labels = (const int64_t *)g->target,
                           .ignore_index = g->topt.ignore_index, .dlogits = lv->grad.data,
                           .dlogits_dtype = lv->grad.dtype, .loss = g->xent_loss,
                           .workspace = g->xent_ws};
    return tx_cuda_xent(&a, g->stream);
}

/* What one launch covers: inference forward, or forward + loss + backward. */
static teexec_status *run_body(tx_cuda_executor *g)
{
    g->poison_next = 0;
    TX_TRY(run_forward(g));
    if (!g->cfg.training) return NULL;
    TX_TRY(poison_before(g, g->loss_step));
    TX_TRY(prof_begin(g));
    TX_TRY(run_loss(g));
    TX_TRY(prof_end(g, "loss", -1, false));
    return run_backward(g);
}

static teexec_status *launch(tx_cuda_executor *g)
{
    if (g->calls_done == 0 && tx_gemm_lt_tuning(g->gemm)) {
        /* GEMM autotuning times candidates, which capture cannot: the
         * first call runs uncaptured (gemm_lt.h), the next one captures
         * (the profile leaves that call out) */
        return run_body(g);
    }
    /* a profiled call times kernel by kernel, which a replay cannot */
    if (!g->cfg.cuda_graphs || !g->graph_ok || profiling(g)) return run_body(g);
    if (!g->graph_exec) {
        cudaGraph_t graph = NULL;
        CU(cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal), "graph capture");
        g->capturing = true;
        teexec_status *st = run_body(g);
        g->capturing = false;
        cudaError_t e = cudaStreamEndCapture(g->stream, &graph);
        if (st) {
            if (graph) cudaGraphDestroy(graph);
            return st;
        }
        if (e != cudaSuccess) return cuda_err(e, "graph capture");
        e = cudaGraphInstantiate(&g->graph_exec, graph, 0);
        cudaGraphDestroy(graph);
        if (e != cudaSuccess) {
            g->graph_exec = NULL;
            return cuda_err(e, "graph instantiate");
        }
    }
    /* the capture (first call) may take long: the last point to stop */
    TX_TRY(check_cancel(g, NULL));
    CU(cudaGraphLaunch(g->graph_exec, g->stream), "graph launch");
    return NULL;
}

/* in_device (may be NULL): per input, its data is a device address: copied
 * (or converted) on the device, never through the host. *copies counts
 * the host-to-device copies made. */
/* DotProductAttention's cache mode bounds each row's cache length on the
 * device only by skipping writes past the capacity, so a host cache_len is
 * checked here, before anything is uploaded: 0 <= cache_len[r] and
 * cache_len[r] + s_q <= capacity, as the CPU kernel checks it (a wrong
 * length would attend over the wrong keys, silently). One given in device
 * memory is the caller's to keep in range (docs/cuda-backend.md). */
static teexec_status *check_cache_lengths(const tx_cuda_executor *g, const tx_tensor *const *inputs,
                                          const bool *in_device)
{
    for (size_t c = 0; c < g->n_cache_checks; c++) {
        const struct gx_cache_check *k = &g->cache_checks[c];
        const tx_tensor *t = inputs[k->input];
        if ((in_device && in_device[k->input]) || !t || t->dtype != TEEXEC_DTYPE_INT64 || !t->data)
            continue;
        const int64_t *len = t->data;
        for (uint64_t r = 0; r < t->numel; r++)
            if (len[r] < 0 || len[r] > k->capacity - k->s_q)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "input \"%s\": cache_len[%lld] = %lld with %lld new tokens "
                                "does not fit op %s's cache capacity of %lld",
                                g->ir->values[g->in_values[k->input]].name, (long long)r,
                                (long long)len[r], (long long)k->s_q, k->node,
                                (long long)k->capacity);
    }
    return NULL;
}

static teexec_status *upload_inputs(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                    const bool *in_device, uint64_t *copies)
{
    TX_TRY(check_cache_lengths(g, inputs, in_device));
    for (size_t i = 0; i < g->n_in; i++) {
        cx_value *gv = &g->vals[g->in_values[i]];
        const tx_tensor *t = inputs[i];
        /* state lives in its own storage, written by its op alone */
        if (g->cfg.input_storage && g->cfg.input_storage[i]) continue;
        if (!t) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input %zu missing", i);
        tx_shape a = tx_shape_of(t), b = tx_shape_of(&gv->dev);
        if (t->dtype != gv->model_dtype || !tx_shape_equal(&a, &b)) {
            char x[96], y[96];
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "input \"%s\" is %s; the CUDA plan was made for %s[...] %s",
                            g->ir->values[g->in_values[i]].name, tx_tensor_describe(t, x, sizeof x),
                            teexec_dtype_name(gv->model_dtype),
                            tx_tensor_describe(&gv->dev, y, sizeof y));
        }
        bool dev = in_device && in_device[i];
        if (dev && !g->staging[i]) {
            CU(cudaMemcpyAsync(gv->dev.data, t->data, t->nbytes, cudaMemcpyDeviceToDevice,
                               g->stream),
               "copying a device input");
            continue;
        }
        if (dev) {
            /* converted straight from the caller's buffer */
            TX_TRY(tx_cuda_convert(t->data, t->dtype, gv->dev.data, gv->dev.dtype,
                                   (size_t)t->numel, g->stream));
            continue;
        }
        (*copies)++;
        if (!g->staging[i]) {
            CU(cudaMemcpyAsync(gv->dev.data, t->data, t->nbytes, cudaMemcpyHostToDevice, g->stream),
               "uploading an input");
            continue;
        }
        CU(cudaMemcpyAsync(g->staging[i], t->data, t->nbytes, cudaMemcpyHostToDevice, g->stream),
           "uploading an input");
        TX_TRY(tx_cuda_convert(g->staging[i], t->dtype, gv->dev.data, gv->dev.dtype,
                               (size_t)t->numel, g->stream));
    }
    return NULL;
}

/* A graph output as device memory of want_dtype: `into` (the caller's,
 * exactly its size: tx_cuda_executor_output_info), or NULL: new memory
 * (stream-ordered: the buffer is allocated, filled and usable in g's
 * stream order; freed with cudaFree, tx_device_free). A value known on the
 * host goes up from it. */
static teexec_status *device_output(tx_cuda_executor *g, const cx_value *gv, void *into, tx_tensor *out,
                                    uint64_t *copies)
{
    memset(out, 0, sizeof *out);
    const tx_tensor *src = gv->host && !gv->produced ? gv->host : &gv->dev;
    teexec_dtype want = gv->model_dtype;
    char probe;
    TX_TRY(tx_tensor_wrap(out, want, src->rank, src->dims, &probe));
    void *p = into;
    cudaError_t e = into ? cudaSuccess : cudaMallocAsync(&p, out->nbytes ? out->nbytes : 1, g->stream);
    if (e != cudaSuccess) {
        memset(out, 0, sizeof *out);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            return tx_device_alloc_failed(out->nbytes, "cuda executor: a device output",
                                          cudaGetErrorString(e));
        }
        return cuda_err(e, "allocating a device output");
    }
    teexec_status *st = NULL;
    if (src == gv->host) {
        (*copies)++;
        e = cudaMemcpyAsync(p, src->data, out->nbytes, cudaMemcpyHostToDevice, g->stream);
        if (e != cudaSuccess) st = cuda_err(e, "uploading a constant output");
    } else if (src->dtype == want) {
        e = cudaMemcpyAsync(p, src->data, out->nbytes, cudaMemcpyDeviceToDevice, g->stream);
        if (e != cudaSuccess) st = cuda_err(e, "copying a device output");
    } else {
        st = tx_cuda_convert(src->data, src->dtype, p, want, (size_t)src->numel, g->stream);
    }
    if (st) {
        if (!into) cudaFreeAsync(p, g->stream);
        memset(out, 0, sizeof *out);
        return st;
    }
    out->data = into ? NULL : p; /* a bound output is the caller's already */
    out->owns_data = false;
    return NULL;
}

/* Orders g's stream after the work queued so far on the caller's. */
static teexec_status *join_caller(tx_cuda_executor *g, cudaStream_t caller)
{
    for (int k = 0; k < 2; k++)
        if (!g->io_ev[k])
            CU(cudaEventCreateWithFlags(&g->io_ev[k], cudaEventDisableTiming), "a stream event");
    CU(cudaEventRecord(g->io_ev[0], caller), "ordering after the caller's stream");
    CU(cudaStreamWaitEvent(g->stream, g->io_ev[0], 0), "ordering after the caller's stream");
    return NULL;
}

/* And the caller's stream after everything queued on g's. */
static teexec_status *rejoin_caller(tx_cuda_executor *g, cudaStream_t caller)
{
    CU(cudaEventRecord(g->io_ev[1], g->stream), "ordering the caller's stream after the run");
    CU(cudaStreamWaitEvent(caller, g->io_ev[1], 0), "ordering the caller's stream after the run");
    return NULL;
}

/* A device tensor to a new host tensor of want_dtype. A conversion goes
 * through `staging` (want_dtype bytes on the device; NULL: a temporary,
 * for the rare parameter reads). */
static teexec_status *download(tx_cuda_executor *g, const tx_tensor *dev, teexec_dtype want_dtype,
                               void *staging, tx_tensor *out)
{
    memset(out, 0, sizeof *out);
    TX_TRY(tx_tensor_alloc(out, want_dtype, dev->rank, dev->dims));
    teexec_status *st = NULL;
    if (dev->dtype == want_dtype) {
        cudaError_t e = cudaMemcpyAsync(out->data, dev->data, out->nbytes, cudaMemcpyDeviceToHost,
                                        g->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
        if (e != cudaSuccess) st = cuda_err(e, "downloading a result");
    } else {
        void *tmp = staging;
        cudaError_t e = staging ? cudaSuccess : cudaMalloc(&tmp, out->nbytes ? out->nbytes : 1);
        if (e != cudaSuccess) st = cuda_err(e, "staging a result");
        if (!st) st = tx_cuda_convert(dev->data, dev->dtype, tmp, want_dtype, (size_t)dev->numel,
                                      g->stream);
        if (!st) {
            e = cudaMemcpyAsync(out->data, tmp, out->nbytes, cudaMemcpyDeviceToHost, g->stream);
            if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
            if (e != cudaSuccess) st = cuda_err(e, "downloading a result");
        }
        if (tmp && !staging) cudaFree(tmp);
    }
    if (st) tx_tensor_release(out);
    return st;
}

static teexec_status *run_launched(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                   tx_gpu_run_io *io, tx_tensor *outputs, const bool *want,
                                   cudaStream_t caller);

teexec_status *tx_cuda_executor_run(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                tx_gpu_run_io *io, tx_tensor *outputs, const bool *want)
{
    tx_gpu_run_io none = {0};
    if (!io) io = &none;
    io->host_copies = 0;
    const tx_ir_graph *ir = g->ir;
    bool fetch = false;
    /* outputs to hand back on the host side (a bound one is written on the device) */
    for (size_t j = 0; outputs && j < ir->n_outputs; j++)
        fetch = fetch || ((!want || want[j]) && !(io->out_into && io->out_into[j]));
    if (io->no_sync && fetch && !io->out_device)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "a run that does not wait for the device must leave its outputs on the "
                        "device (host outputs are only there once it has finished)");
    cudaStream_t caller = (cudaStream_t)io->stream;
    if (caller == g->stream) caller = NULL; /* the session's stream is the caller's already */
    if (caller) TX_TRY(join_caller(g, caller));
    /* this run's own profile (run options set_profile): rows of this run
     * only, the run launched uncaptured (launch) */
    if (tx_run_profiled(g->run_opts)) {
        /* an executor made without the session-wide profile has no timing
         * events yet */
        if (!g->ev[0]) CU(cudaEventCreate(&g->ev[0]), "profile events");
        if (!g->ev[1]) CU(cudaEventCreate(&g->ev[1]), "profile events");
        tx_run_profile_reset(&g->run_prof);
        g->run_prof_on = true;
    }
    teexec_status *st = run_launched(g, inputs, io, outputs, want, caller);
    g->run_prof_on = false;
    return st;
}

static teexec_status *run_launched(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                   tx_gpu_run_io *io, tx_tensor *outputs, const bool *want,
                                   cudaStream_t caller)
{
    const tx_ir_graph *ir = g->ir;
    if (inputs) {
        TX_TRY(upload_inputs(g, inputs, io->in_device, &io->host_copies));
        g->inputs_bound = true;
    } else if (!g->inputs_bound) {
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no inputs given and none from an earlier run");
    }
    TX_TRY(launch(g));
    for (size_t j = 0; outputs && j < ir->n_outputs; j++) {
        memset(&outputs[j], 0, sizeof outputs[j]);
        if (want && !want[j]) continue;
        int32_t o = ir->outputs[j];
        cx_value *gv = &g->vals[o];
        teexec_status *st = NULL;
        if (io->out_into && io->out_into[j])
            st = device_output(g, gv, io->out_into[j], &outputs[j], &io->host_copies);
        else if (io->out_device) st = device_output(g, gv, NULL, &outputs[j], &io->host_copies);
        else if (gv->host && !gv->produced) st = tx_tensor_clone(gv->host, &outputs[j]);
        else {
            io->host_copies++;
            st = download(g, &gv->dev, gv->model_dtype, g->out_staging[j], &outputs[j]);
        }
        if (st) {
            for (size_t k = 0; k < j; k++) {
                if (io->out_device && outputs[k].data) cudaFreeAsync(outputs[k].data, g->stream);
                else tx_tensor_release(&outputs[k]);
                memset(&outputs[k], 0, sizeof outputs[k]);
            }
            return st;
        }
    }
    if (caller) TX_TRY(rejoin_caller(g, caller));
    g->calls_done++;
    /* the call returns when the work is done, fetched or not, unless asked
     * not to wait */
    if (!io->no_sync) CU(cudaStreamSynchronize(g->stream), "running the model");
    return NULL;
}

teexec_status *tx_cuda_executor_run_profile(const tx_cuda_executor *g, tx_run_profile *out)
{
    return tx_run_profile_copy(out, &g->run_prof);
}

teexec_status *tx_cuda_executor_wait(tx_cuda_executor *g)
{
    CU(cudaStreamSynchronize(g->stream), "waiting for the model's runs");
    return NULL;
}

int tx_cuda_executor_device(const tx_cuda_executor *g) { return g->device; }

static teexec_status *update_delayed(tx_cuda_executor *g)
{
    if (!g->n_delayed) return NULL;
    float *h = malloc(2 * g->n_delayed * sizeof(float));
    if (!h) return tx_oom();
    cudaError_t e = cudaMemcpyAsync(h, g->delayed_dev, 2 * g->n_delayed * sizeof(float),
                                    cudaMemcpyDeviceToHost, g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    if (e != cudaSuccess) {
        free(h);
        return cuda_err(e, "reading amaxes");
    }
    for (uint32_t i = 0; i < g->n_delayed; i++) tx_delayed_record_amax(&g->delayed, i, h[g->n_delayed + i]);
    tx_delayed_update(&g->delayed, NULL);
    for (uint32_t i = 0; i < g->n_delayed; i++) h[i] = tx_delayed_scale(&g->delayed, i);
    e = cudaMemcpyAsync(g->delayed_dev, h, g->n_delayed * sizeof(float), cudaMemcpyHostToDevice,
                        g->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
    free(h);
    if (e != cudaSuccess) return cuda_err(e, "writing scales");
    return NULL;
}

void tx_cuda_executor_set_grad_hook(tx_cuda_executor *g, tx_gpu_grad_hook fn, void *ctx)
{
    g->grad_hook = fn;
    g->grad_hook_ctx = ctx;
}

/* Data parallel: the step's gradients handed to the hook, which averages
 * them over the ranks in place before the optimizer launch reads them. */
static teexec_status *reduce_grads(tx_cuda_executor *g)
{
    size_t n = g->n_params;
    void **grads = calloc(n ? n : 1, sizeof(*grads));
    uint64_t *numel = calloc(n ? n : 1, sizeof(*numel));
    teexec_dtype *dts = calloc(n ? n : 1, sizeof(*dts));
    teexec_status *st = grads && numel && dts ? NULL : tx_oom();
    for (size_t p = 0; p < n && !st; p++) {
        const cx_value *gv = &g->vals[g->params[p].value];
        grads[p] = gv->grad.data;
        numel[p] = gv->grad.numel;
        dts[p] = gv->grad.dtype;
    }
    if (!st) st = g->grad_hook(g->grad_hook_ctx, (void *)g->stream, n, grads, numel, dts);
    free(grads);
    free(numel);
    free(dts);
    return st;
}

teexec_status *tx_cuda_executor_step(tx_cuda_executor *g, const tx_tensor *const *inputs,
                                 const tx_tensor *loss_data, double *loss)
{
    if (!g->cfg.training)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the CUDA graph was made for inference");
    cx_value *lv = &g->vals[g->loss_value];
    if (!loss_data && !g->target_bound)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the step needs the loss's %s",
                        g->topt.loss == TEEXEC_LOSS_MSE ? "\"target\"" : "\"labels\"");
    if (!inputs && !g->inputs_bound)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no inputs given and none from an earlier step");
    /* the loss's data, as the kernels read it (NULL: the earlier step's,
     * still on the device) */
    if (!loss_data) {
        /* nothing to upload */
    } else if (g->topt.loss == TEEXEC_LOSS_MSE) {
        if (loss_data->numel != lv->dev.numel)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "\"target\" has %llu elements; the output \"%s\" has %llu",
                            (unsigned long long)loss_data->numel,
                            g->ir->values[g->loss_value].name, (unsigned long long)lv->dev.numel);
        float *tmp = malloc((size_t)loss_data->numel * sizeof(float) + 1);
        if (!tmp) return tx_oom();
        teexec_status *st = tx_convert(loss_data->data, loss_data->dtype, tmp, TEEXEC_DTYPE_FLOAT,
                                       loss_data->numel, NULL);
        if (!st) {
            cudaError_t e = cudaMemcpyAsync(g->target, tmp, (size_t)loss_data->numel * sizeof(float),
                                            cudaMemcpyHostToDevice, g->stream);
            if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
            if (e != cudaSuccess) st = cuda_err(e, "uploading the target");
        }
        free(tmp);
        TX_TRY(st);
    } else {
        size_t classes = lv->dev.rank ? (size_t)lv->dev.dims[lv->dev.rank - 1] : 1;
        size_t rows = classes ? (size_t)lv->dev.numel / classes : 0;
        if (loss_data->numel != rows ||
            (loss_data->dtype != TEEXEC_DTYPE_INT64 && loss_data->dtype != TEEXEC_DTYPE_INT32))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "\"labels\" must be %zu int64 values (one per row of the logits)", rows);
        int64_t *tmp = malloc(rows * sizeof(int64_t) + 1);
        if (!tmp) return tx_oom();
        for (size_t r = 0; r < rows; r++)
            tmp[r] = loss_data->dtype == TEEXEC_DTYPE_INT64 ? ((const int64_t *)loss_data->data)[r]
                                                            : ((const int32_t *)loss_data->data)[r];
        cudaError_t e = cudaMemcpyAsync(g->target, tmp, rows * sizeof(int64_t),
                                        cudaMemcpyHostToDevice, g->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g->stream);
        free(tmp);
        if (e != cudaSuccess) return cuda_err(e, "uploading the labels");
    }
    if (loss_data) g->target_bound = true;
    if (inputs) {
        uint64_t copies = 0;
        TX_TRY(upload_inputs(g, inputs, NULL, &copies));
        g->inputs_bound = true;
    }
    g->env.step = g->steps;
    TX_TRY(launch(g));
    if (g->grad_hook) TX_TRY(reduce_grads(g));
    g->steps++;
    /* the optimizer: step-dependent scalars travel by value, so it runs
     * outside the captured graph (one launch) */
    if (g->n_params) {
        tx_cuda_optim_step_args oa = {.kind = g->topt.optimizer == TEEXEC_OPTIMIZER_ADAMW
                                                  ? TX_CUDA_OPTIM_ADAMW
                                                  : TX_CUDA_OPTIM_SGD,
                                      .lr = tx_train_lr_at(&g->topt, (int64_t)g->steps - 1),
                                      .weight_decay = g->topt.weight_decay,
                                      .momentum = g->topt.momentum, .beta1 = g->topt.beta1,
                                      .beta2 = g->topt.beta2, .eps = g->topt.eps,
                                      .step = (int64_t)g->steps};
        TX_TRY(prof_begin(g));
        if (g->topt.clip_grad_norm > 0.0) {
            TX_TRY(tx_cuda_grad_clip_coef(g->opt_dev, g->n_params, g->opt_blocks,
                                          g->topt.clip_grad_norm, g->clip_partials, g->clip_coef,
                                          g->stream));
            oa.grad_scale = g->clip_coef;
        }
        TX_TRY(tx_cuda_optim_step(&oa, g->opt_dev, g->n_params, g->opt_blocks, g->stream));
        TX_TRY(prof_end(g, "optimizer", -1, false));
    }
    TX_TRY(update_delayed(g));
    double l = 0.0;
    if (g->topt.loss == TEEXEC_LOSS_MSE) {
        CU(cudaMemcpyAsync(&l, g->loss_dev, sizeof(double), cudaMemcpyDeviceToHost, g->stream),
           "reading the loss");
    } else {
        float lf = 0.0f;
        CU(cudaMemcpyAsync(&lf, g->xent_loss, sizeof(float), cudaMemcpyDeviceToHost, g->stream),
           "reading the loss");
        CU(cudaStreamSynchronize(g->stream), "step");
        l = lf;
    }
    CU(cudaStreamSynchronize(g->stream), "step");
    g->stepped = true;
    if (loss) *loss = l;
    g->calls_done++;
    return NULL;
}

/* ---- parameters by the user's names ---------------------------------------------- */

void tx_cuda_executor_set_run_options(tx_cuda_executor *g, const teexec_run_options *ro)
{
    g->run_opts = ro;
}

size_t tx_cuda_executor_output_count(const tx_cuda_executor *g) { return g->ir->n_outputs; }

void tx_cuda_executor_output_info(const tx_cuda_executor *g, size_t j, teexec_dtype *dtype,
                              tx_shape *shape)
{
    const cx_value *gv = &g->vals[g->ir->outputs[j]];
    const tx_tensor *src = gv->host && !gv->produced ? gv->host : &gv->dev;
    *dtype = gv->model_dtype;
    *shape = tx_shape_of(src);
}

const char *tx_cuda_executor_output_name(const tx_cuda_executor *g, size_t j)
{
    return j < g->ir->n_outputs ? g->ir->values[g->ir->outputs[j]].name : NULL;
}

const char *tx_cuda_executor_graphs_off_reason(const tx_cuda_executor *g)
{
    if (!g->cfg.cuda_graphs) return NULL;
    if (g->cfg.profile) return "profiling times every kernel on its own";
    return g->graph_ok ? NULL : g->graph_off_why;
}

/* raw: `name` is the lowered model's parameter, handed out in its layout;
 * else the user's name, which may be a lowered parameter's part (merged,
 * transposed, repeated) and comes back in the user's layout. */
static teexec_status *param_tensor(const tx_cuda_executor *g, const char *name, bool grad, bool raw,
                                   tx_tensor *out)
{
    memset(out, 0, sizeof *out);
    const tx_param_source *src = NULL;
    for (size_t i = 0; !raw && i < g->n_sources; i++)
        if (!strcmp(g->sources[i].original, name)) src = &g->sources[i];
    const char *lname = src ? src->lowered : name;
    for (size_t p = 0; p < g->n_params; p++) {
        const cx_param *gp = &g->params[p];
        if (strcmp(gp->name, lname)) continue;
        if (grad && !g->stepped)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no step has run yet");
        const cx_value *gv = &g->vals[gp->value];
        tx_tensor dev;
        if (grad) dev = gv->grad;
        else {
            dev = gv->dev;
            dev.data = gp->master;
            dev.dtype = TEEXEC_DTYPE_FLOAT;
        }
        tx_tensor low;
        TX_TRY(download((tx_cuda_executor *)g, &dev, gv->model_dtype, NULL, &low));
        if (!src) {
            *out = low;
            return NULL;
        }
        teexec_status *st = tx_param_to_original(src, &low, out);
        tx_tensor_release(&low);
        return st;
    }
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "\"%s\" is not a trainable parameter", name);
}

teexec_status *tx_cuda_executor_param(const tx_cuda_executor *g, const char *name, tx_tensor *out)
{
    return param_tensor(g, name, false, false, out);
}

teexec_status *tx_cuda_executor_param_lowered(const tx_cuda_executor *g, const char *name, tx_tensor *out)
{
    return param_tensor(g, name, false, true, out);
}

teexec_status *tx_cuda_executor_grad(const tx_cuda_executor *g, const char *name, tx_tensor *out)
{
    return param_tensor(g, name, true, false, out);
}

size_t tx_cuda_executor_device_bytes(const tx_cuda_executor *g) { return g->arena_bytes + g->delayed_bytes; }
const struct tx_ws_lease *tx_cuda_executor_weights(const tx_cuda_executor *g) { return g->weights; }

teexec_status *tx_cuda_executor_profile(const tx_cuda_executor *g, char **out_text)
{
    *out_text = NULL;
    if (!g->cfg.profile)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "profiling was not enabled");
    /* the first call's one-time costs are left out once there are more */
    bool skip_first = g->calls_done > 1;
    double total = 0.0;
    for (size_t i = 0; i < g->n_prof; i++)
        total += g->prof[i].ms - (skip_first ? g->prof[i].first_ms : 0.0);
    size_t cap = 512 + g->n_prof * 200, len = 0;
    char *s = malloc(cap);
    if (!s) return tx_oom();
    len += (size_t)snprintf(s + len, cap - len, "%s\n",
                            skip_first ? "(the first call, with its one-time setup, is left out)"
                                       : "(one call: includes one-time setup)");
    len += (size_t)snprintf(s + len, cap - len, "%-6s %-4s %-60s %8s %11s %9s %6s\n", "group",
                            "pass", "kernel", "calls", "total ms", "mean ms", "share");
    /* per group subtotal rows follow each group's kernels */
    for (size_t i = 0; i < g->n_prof; i++) {
        prof_row r0 = g->prof[i];
        if (skip_first) {
            r0.calls -= r0.first_calls;
            r0.ms -= r0.first_ms;
        }
        const prof_row *r = &r0;
        char grp[16];
        if (r->group >= 0) snprintf(grp, sizeof grp, "%d", (int)r->group);
        else snprintf(grp, sizeof grp, "-");
        len += (size_t)snprintf(s + len, cap - len, "%-6s %-4s %-60.60s %8llu %11.3f %9.4f %5.1f%%\n",
                                grp, r->backward ? "bwd" : "fwd", r->name,
                                (unsigned long long)r->calls, r->ms,
                                r->calls ? r->ms / (double)r->calls : 0.0,
                                total > 0 ? 100.0 * r->ms / total : 0.0);
    }
    size_t ng = g->fplan ? g->fplan->n_groups : 0;
    for (size_t gi = 0; gi < ng && len + 200 < cap; gi++) {
        double ms = 0.0;
        for (size_t i = 0; i < g->n_prof; i++)
            if (g->prof[i].group == (int32_t)gi)
                ms += g->prof[i].ms - (skip_first ? g->prof[i].first_ms : 0.0);
        if (ms == 0.0) continue;
        len += (size_t)snprintf(s + len, cap - len, "group %-4zu total %44s %11.3f %15s %5.1f%%\n",
                                gi, "", ms, "", total > 0 ? 100.0 * ms / total : 0.0);
    }
    len += (size_t)snprintf(s + len, cap - len, "all kernels: %.3f ms\n", total);
    /* what this executor (one input shape) cost to set up, once */
    double setup = 0.0;
    for (int i = 0; i < GX_SETUP_PHASES; i++) setup += g->setup_ms[i];
    len += (size_t)snprintf(s + len, cap - len, "executor setup: %.1f ms (", setup);
    for (int i = 0; i < GX_SETUP_PHASES; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%s %.1f", i ? ", " : "", gx_setup_phase(i),
                                g->setup_ms[i]);
    /* a profile exists only for a profiled executor, which never captures */
    len += (size_t)snprintf(s + len, cap - len,
                            "); profiled runs are not captured in a CUDA graph\n");
    len += (size_t)snprintf(s + len, cap - len,
                            "device arena: %.1f MiB (%.1f MiB if no two buffers shared memory)\n",
                            (double)g->arena_bytes / 1048576.0,
                            (double)g->arena_unshared_bytes / 1048576.0);
    if (g->weights)
        len += (size_t)snprintf(s + len, cap - len,
                                "shared weights: %.1f MiB (one copy for every session of the model)\n",
                                (double)tx_ws_lease_bytes(g->weights) / 1048576.0);
    /* the plan's fusions that do not run, with why (the planner's and the
     * GPU's: a fusion the GPU has no kernel for runs unfused) */
    size_t nd = g->fplan ? g->fplan->n_declines : 0;
    if (nd) {
        size_t need = len + 64;
        for (size_t i = 0; i < nd; i++)
            need += 64 + (g->fplan->declines[i].reason ? strlen(g->fplan->declines[i].reason) : 0);
        if (need > cap) {
            char *ns = realloc(s, need);
            if (!ns) {
                free(s);
                return tx_oom();
            }
            s = ns;
            cap = need;
        }
        len += (size_t)snprintf(s + len, cap - len, "fusions not used: %zu\n", nd);
        for (size_t i = 0; i < nd; i++) {
            const tx_plan_decline *d = &g->fplan->declines[i];
            const tx_fusion_info *fi = tx_fusion_info_of(d->fusion);
            len += (size_t)snprintf(s + len, cap - len, "  group %d: %s: %s\n", (int)d->group,
                                    fi ? fi->name : "?", d->reason ? d->reason : "");
        }
    }
    *out_text = s;
    return NULL;
}

