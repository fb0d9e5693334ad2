/* train.c - the CPU training engine behind teexec_trainer_*: the training
 * fuser plan (CHAIN groups through the group executor, exec/group_exec.h,
 * under the recipe), forward keeping
 * every value, loss, reverse-topological backward walk, optimizer step. */
#include "exec/train_internal.h"
#include "exec/train_schedule.h"

#include "base/log.h"
#include "base/shape.h"
#include "exec/cpu_ops.h"
#include "exec/cpu_te_ops.h"
#include "exec/cuda/cuda_executor.h"
#include "exec/session_cuda.h"
#include "exec/model_internal.h"
#include "exec/op_gaps.h"
#include "exec/prepare.h"
#include "exec/session_groups.h"
#include "exec/run_options.h"
#include "exec/tensor_internal.h"
#include "exec/train_dp.h"
#include "exec/trainable.h"
#include "format/model_save.h"
#include "format/tensor_proto.h"
#include "import/shape_infer.h"
#include "kernels/cpu/convert.h"
#include "kernels/cpu/loss.h"
#include "kernels/cpu/optim.h"
#include "planner/plan_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct tx_param {
    int32_t value;       /* graph value index */
    tx_tensor data;      /* current value, owned, the initializer's dtype */
    tx_optim_slot slot;
} tx_param;

struct teexec_trainer {
    /* What trains: the user's model's lowered copy (exec/prepare.h); g and
     * every value index below belong to it. */
    const teexec_model *model;
    /* The user's model: file names in messages, the initializer names the
     * parameter and gradient getters answer to, and what save writes. */
    const teexec_model *user_model;
    const tx_prepared *prep;       /* NULL when the user's model is a lowered copy */
    const tx_ir_graph *g;
    teexec_train_options opt;
    char *loss_output_name;
    char *freeze;            /* the options' freeze list, copied */
    int32_t loss_value;
    tx_optim_config ocfg;
    tx_op_fn *fns;           /* per node */
    tx_bwd_fn *bwd;          /* per node; NULL = no backward needed */
    bool *req;               /* per value: carries a gradient */
    bool *reach;             /* per value: reaches the loss */
    tx_tensor *init;         /* per value: decoded non-trainable initializer */
    int32_t *param_of;       /* per value: index into params, or -1 */
    tx_param *params;
    size_t n_params;
    int32_t *grad_inputs;    /* float model inputs that get a gradient */
    size_t n_grad_inputs;
    /* The user's initializer names that hold a trainable parameter (into
     * the user's IR), in the user's initializer order. */
    const char **user_params;
    size_t n_user_params;
    /* state of the last step */
    tx_tensor *vals;         /* per value: owned forward values of the step */
    double **grads;          /* per value */
    tx_tensor (*aux)[TX_TE_MAX_EXTRA]; /* per node: te.ops aux (saved context) */
    int *n_aux;              /* per node */
    uint64_t n_steps;        /* steps begun, for tx_train_rng_offset */
    uint64_t n_updates;      /* optimizer updates made: the schedule's step index */
    bool stepped;
    /* CUDA trainers: the executor (made at creation when the inputs'
     * shapes are declared, else at the first step) as the one payload of
     * the trainer's plan cache (planner/plan_cache.h, capacity 1: the
     * optimizer state lives with the executor, so another set of shapes is
     * refused rather than planned), its input shapes, and the key scratch
     * (one value per graph value, the inputs' dtype and shape set). */
    bool cuda;
    char *recipe;
    tx_plan_cache *gpu_cache;
    tx_cuda_executor *gpu;       /* borrowed from gpu_cache */
    tx_shape *gpu_shapes;
    tx_infer_value *gpu_key;
    bool params_synced;      /* params[] hold the device's current values */
    /* CPU trainers run the training fuser plan (device cpu, the recipe,
     * training): CHAIN groups through the group executor forward and
     * backward, every other node with its kernel and backward rule. The
     * plan is for plan_shapes (the inputs' shapes; rebuilt when they
     * change), made at creation when every input's dims are declared. */
    tx_recipe rcp;
    tx_fuser_plan *fplan;
    tx_shape *plan_shapes;   /* per graph input */
    tx_sgroup *sg;           /* per fuser group */
    int8_t *role;            /* per node: 1 starts a group-executor group, -1 inside one */
    tx_group_run **runs;        /* per group: the step's forward run (its saved contexts) */
    tx_group_config gcfg;       /* the step's group config (the runs borrow it) */
    const tx_tensor **cur;   /* per value: scratch for binding a group */
    tx_delayed_state delayed; /* fp8-delayed: one per trainer, rolled after each step */
    bool has_delayed;
    bool no_plan;            /* tx_trainer_debug_node_by_node */
    tx_run_kernel *trace;    /* the last step's group kernels (tx_trainer_last_kernels) */
    size_t n_trace, cap_trace;
    tx_dp *dp;               /* data parallel rank (train_dp.h); NULL = one rank */
};

static teexec_status *list_user_params(teexec_trainer *t) TX_NODISCARD;
static teexec_status *ensure_plan(teexec_trainer *t, bool *ok) TX_NODISCARD;
static void free_plan(teexec_trainer *t);

uint64_t tx_train_rng_offset(uint64_t seed, uint64_t step, uint64_t n_nodes, uint64_t node)
{
    /* splitmix64's finalizer: nearby seeds get unrelated bases */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return z + step * n_nodes + node; /* mod 2^64 */
}

static bool slot_diff(const tx_ir_node *n, size_t k)
{
    return tx_te_domain(n->domain) ? tx_te_slot_differentiable(n, k)
                                   : tx_bwd_slot_differentiable(n->op_type, k);
}

static bool is_float(teexec_dtype d)
{
    return d == TEEXEC_DTYPE_FLOAT || d == TEEXEC_DTYPE_DOUBLE || d == TEEXEC_DTYPE_FLOAT16 ||
           d == TEEXEC_DTYPE_BFLOAT16;
}

void teexec_train_options_init(teexec_train_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->loss = TEEXEC_LOSS_MSE;
    o->ignore_index = -100;
    o->optimizer = TEEXEC_OPTIMIZER_ADAMW;
    o->lr = 1e-3;
    o->weight_decay = 0.01;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->device = TEEXEC_DEVICE_AUTO;
    o->deterministic = tx_env_deterministic();
    o->cuda_graphs = 1;
    o->dp_bucket_mb = 25.0;
}

static void free_runs(teexec_trainer *t)
{
    if (!t->runs || !t->fplan) return;
    for (size_t k = 0; k < t->fplan->n_groups; k++) {
        tx_group_run_free(t->runs[k]);
        t->runs[k] = NULL;
    }
}

static void free_plan(teexec_trainer *t)
{
    free_runs(t);
    if (t->sg && t->fplan)
        for (size_t k = 0; k < t->fplan->n_groups; k++) tx_sgroup_free(&t->sg[k]);
    free(t->sg);
    free(t->role);
    free(t->runs);
    t->sg = NULL;
    t->role = NULL;
    t->runs = NULL;
    tx_fuser_plan_free(t->fplan);
    t->fplan = NULL;
}

static void clear_step(teexec_trainer *t)
{
    free_runs(t); /* they borrow the step's values */
    if (t->aux && t->n_aux)
        for (size_t i = 0; i < t->g->n_nodes; i++) {
            for (int j = 0; j < t->n_aux[i]; j++) tx_tensor_release(&t->aux[i][j]);
            t->n_aux[i] = 0;
        }
    if (!t->vals) return;
    for (size_t v = 0; v < t->g->n_values; v++) {
        tx_tensor_release(&t->vals[v]);
        free(t->grads[v]);
        t->grads[v] = NULL;
    }
}

void teexec_trainer_destroy(teexec_trainer *t)
{
    if (!t) return;
    clear_step(t);
    if (t->init)
        for (size_t v = 0; v < t->g->n_values; v++) tx_tensor_release(&t->init[v]);
    for (size_t i = 0; i < t->n_params; i++) {
        tx_tensor_release(&t->params[i].data);
        tx_optim_slot_release(&t->params[i].slot);
    }
    tx_dp_destroy(t->dp);
    free(t->params);
    free(t->init);
    free(t->vals);
    free(t->grads);
    free(t->aux);
    free(t->n_aux);
    free(t->fns);
    free(t->bwd);
    free(t->req);
    free(t->reach);
    free(t->param_of);
    free(t->grad_inputs);
    free(t->user_params);
    free(t->loss_output_name);
    free(t->freeze);
    tx_plan_cache_free(t->gpu_cache);
    free(t->gpu_shapes);
    free(t->gpu_key);
    free(t->recipe);
    free_plan(t);
    free(t->plan_shapes);
    free(t->cur);
    free(t->trace);
    if (t->has_delayed) tx_delayed_free(&t->delayed);
    free(t);
}

static const char *model_path(const teexec_trainer *t)
{
    return t->user_model->file ? t->user_model->file->path : NULL;
}

/* The current tensor of value v during a step: a parameter, a decoded
 * initializer, or a value the step computed/bound. */
static const tx_tensor *value_tensor(const teexec_trainer *t, int32_t v)
{
    if (v < 0) return NULL;
    if (t->param_of[v] >= 0) return &t->params[t->param_of[v]].data;
    if (t->init[v].data) return &t->init[v];
    return t->vals && t->vals[v].data ? &t->vals[v] : NULL;
}

/* ---- creation: dtypes, reachability, backward rules ---------------------- */

/* Inference pass over the graph: the dtype and shape of every value, from
 * the bound inputs (else their declared types and dims), the initializers
 * and inference. *out: nv entries (tx_infer_value_clear each, then free). */
static teexec_status *infer_values(teexec_trainer *t, tx_infer_value **out)
{
    const tx_ir_graph *g = t->g;
    size_t nv = g->n_values;
    tx_infer_value *iv = calloc(nv ? nv : 1, sizeof(*iv));
    *out = iv;
    if (!iv) return tx_oom();
    for (size_t v = 0; v < nv; v++) {
        const tx_ir_value *val = &g->values[v];
        iv[v].dtype = val->dtype;
        const tx_tensor *tt = value_tensor(t, (int32_t)v);
        if (tt) {
            iv[v].dtype = tt->dtype;
            iv[v].shape_known = true;
            iv[v].shape = tx_shape_of(tt);
            iv[v].value = tt;
        } else if (val->rank >= 0) {
            bool known = true;
            for (int32_t d = 0; d < val->rank; d++)
                if (val->dims[d] < 0) known = false;
            if (known && tx_shape_make(val->rank, val->dims, &iv[v].shape) == NULL)
                iv[v].shape_known = true;
        }
    }
    teexec_status *st = NULL;
    const tx_infer_value *pins[64];
    tx_infer_value outs[64];
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_ir_node *n = &g->nodes[i];
        if (n->n_inputs > 64 || n->n_outputs > 64) continue;
        for (size_t k = 0; k < n->n_inputs; k++)
            pins[k] = n->inputs[k] >= 0 ? &iv[n->inputs[k]] : NULL;
        memset(outs, 0, sizeof(outs[0]) * n->n_outputs);
        teexec_status *e = tx_exec_infer_node(n, t->model->file, pins, outs);
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t o = n->outputs[j];
            if (!e && o >= 0) {
                iv[o].dtype = outs[j].dtype;
                iv[o].shape_known = outs[j].shape_known;
                iv[o].shape = outs[j].shape;
                /* values (Shape/Constant outputs) are kept so Reshape can infer */
                if (outs[j].value == &outs[j].owned) {
                    iv[o].owned = outs[j].owned;
                    iv[o].value = &iv[o].owned;
                    memset(&outs[j].owned, 0, sizeof(outs[j].owned));
                    outs[j].value = NULL;
                }
            }
            tx_infer_value_clear(&outs[j]);
        }
        /* an inference failure here only loses type information; the
         * forward pass reports it with its real shapes */
        teexec_status_destroy(e);
    }
    return st;
}

static void infer_values_free(tx_infer_value *iv, size_t nv)
{
    if (!iv) return;
    for (size_t v = 0; v < nv; v++) tx_infer_value_clear(&iv[v]);
    free(iv);
}

/* Type-only use of infer_values: the dtype of every value. */
static teexec_status *infer_dtypes(teexec_trainer *t, teexec_dtype *dt)
{
    const tx_ir_graph *g = t->g;
    tx_infer_value *iv = NULL;
    teexec_status *st = infer_values(t, &iv);
    for (size_t v = 0; !st && v < g->n_values; v++)
        dt[v] = iv[v].dtype != TEEXEC_DTYPE_UNDEFINED ? iv[v].dtype : g->values[v].dtype;
    infer_values_free(iv, g->n_values);
    return st;
}

static teexec_status *analyse(teexec_trainer *t)
{
    const tx_ir_graph *g = t->g;
    size_t nv = g->n_values, nn = g->n_nodes;
    teexec_dtype *dt = malloc(sizeof(*dt) * (nv ? nv : 1));
    if (!dt) return tx_oom();
    teexec_status *st = infer_dtypes(t, dt);
    if (st) {
        free(dt);
        return st;
    }
    /* reach: backward from the loss output */
    t->reach[t->loss_value] = true;
    for (size_t i = nn; i-- > 0;) {
        const tx_ir_node *n = &g->nodes[i];
        bool on = false;
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0 && t->reach[n->outputs[j]]) on = true;
        if (!on) continue;
        for (size_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && slot_diff(n, k))
                t->reach[n->inputs[k]] = true;
    }
    /* sources: float initializers and float model inputs that reach the loss */
    for (size_t v = 0; v < nv; v++) {
        const tx_ir_value *val = &g->values[v];
        if (!t->reach[v] || !is_float(dt[v])) continue;
        if (val->flags & TX_IR_VALUE_INITIALIZER) {
            t->req[v] = tx_trainable_initializer(value_tensor(t, (int32_t)v), val->name, t->prep,
                                                 t->opt.freeze);
            if (t->req[v]) tx_trainable_note_shared_norm(g, (int32_t)v);
        } else if (val->flags & TX_IR_VALUE_GRAPH_INPUT) {
            t->req[v] = true;
            t->grad_inputs[t->n_grad_inputs++] = (int32_t)v;
        }
    }
    tx_op_gaps gaps = {0};
    for (size_t i = 0; i < nn && !st; i++) {
        const tx_ir_node *n = &g->nodes[i];
        bool any = false;
        for (size_t k = 0; k < n->n_inputs; k++)
            if (n->inputs[k] >= 0 && t->req[n->inputs[k]] &&
                slot_diff(n, k))
                any = true;
        if (!any) continue;
        bool out_reach = false;
        for (size_t j = 0; j < n->n_outputs; j++) {
            int32_t o = n->outputs[j];
            if (o >= 0 && is_float(dt[o])) {
                t->req[o] = true;
                if (t->reach[o]) out_reach = true;
            }
        }
        if (!out_reach) continue;
        t->bwd[i] = tx_te_domain(n->domain) ? tx_te_bwd_rule : tx_bwd_find(n->domain, n->op_type);
        if (!t->bwd[i]) {
            char what[512];
            snprintf(what, sizeof what,
                     "op %s (domain \"%s\") is on the path to the loss and has no backward rule",
                     n->op_type, n->domain);
            st = tx_op_gaps_add(&gaps, what, n->label);
        }
    }
    if (!st) st = tx_op_gaps_status(&gaps, TEEXEC_ERR_UNSUPPORTED, NULL);
    tx_op_gaps_free(&gaps);
    free(dt);
    return st;
}

/* ---- the CUDA trainer ---------------------------------------------------- */

/* Entry builder: the executor for the input shapes the key holds (every
 * graph input's, req->vals). */
static teexec_status *gpu_build(void *ctx, const tx_ir_graph *g, const tx_plan_request *req,
                                tx_fuser_plan **plan, void **payload)
{
    teexec_trainer *t = ctx;
    *plan = NULL; /* the executor plans inside itself */
    *payload = NULL;
    tx_cuda_executor_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.recipe = req->recipe;
    cfg.dtype = t->opt.dtype;
    cfg.training = true;
    cfg.deterministic = req->deterministic;
    cfg.cuda_graphs = t->opt.cuda_graphs != 0;
    cfg.profile = t->opt.profile != 0;
    cfg.train = &t->opt;
    size_t n = g->n_inputs;
    const char **names = calloc(n ? n : 1, sizeof(*names));
    tx_shape *shapes = calloc(n ? n : 1, sizeof(*shapes));
    if (!names || !shapes) {
        free(names);
        free(shapes);
        return tx_oom();
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = g->values[g->inputs[i]].name;
        shapes[i] = req->vals[g->inputs[i]].shape;
    }
    cfg.n_inputs = n;
    cfg.input_names = names;
    cfg.input_shapes = shapes;
    tx_cuda_executor *gg = NULL;
    teexec_status *st = tx_cuda_executor_create(t->model, &cfg, &gg);
    free(names);
    free(shapes);
    TX_TRY(st);
    *payload = gg;
    return NULL;
}

static void gpu_entry_free(void *ctx, tx_fuser_plan *plan, void *payload)
{
    (void)ctx;
    (void)plan;
    tx_cuda_executor_destroy(payload);
}

/* Plans the executor for these shapes (every graph input's) through the
 * trainer's plan cache: key = (shapes, recipe, device, training,
 * determinism). Called once: later steps refuse other shapes. */
static teexec_status *gpu_create(teexec_trainer *t, const tx_shape *shapes)
{
    const tx_ir_graph *g = t->g;
    size_t n = g->n_inputs;
    if (!t->gpu_cache)
        TX_TRY(tx_plan_cache_create_entries(1, gpu_build, gpu_entry_free, t, &t->gpu_cache));
    if (!t->gpu_key && !(t->gpu_key = calloc(g->n_values ? g->n_values : 1, sizeof(*t->gpu_key))))
        return tx_oom();
    for (size_t i = 0; i < n; i++) {
        tx_infer_value *iv = &t->gpu_key[g->inputs[i]];
        iv->dtype = g->values[g->inputs[i]].dtype;
        iv->shape = shapes[i];
        iv->shape_known = true;
    }
    tx_plan_request req;
    memset(&req, 0, sizeof req);
    TX_TRY(tx_recipe_parse(t->opt.recipe ? t->opt.recipe : "none", &req.recipe));
    strcpy(req.device.name, "cuda");
    req.training = true;
    req.deterministic = t->opt.deterministic != 0;
    req.vals = t->gpu_key;
    req.n_vals = g->n_values;
    if (!t->gpu_shapes) {
        t->gpu_shapes = malloc((n ? n : 1) * sizeof(*t->gpu_shapes));
        if (!t->gpu_shapes) return tx_oom();
    }
    void *payload = NULL;
    TX_TRY(tx_plan_cache_lookup(t->gpu_cache, g, &req, NULL, &payload, NULL));
    t->gpu = payload;
    memcpy(t->gpu_shapes, shapes, n * sizeof(*shapes));
    return NULL;
}

uint64_t tx_trainer_plans_built(const teexec_trainer *t)
{
    return t ? tx_plan_cache_builds(t->gpu_cache) : 0;
}

/* With every input's dims declared, the device is planned now. */
static teexec_status *gpu_create_declared(teexec_trainer *t)
{
    const tx_ir_graph *g = t->g;
    tx_shape *shapes = calloc(g->n_inputs ? g->n_inputs : 1, sizeof(*shapes));
    if (!shapes) return tx_oom();
    for (size_t i = 0; i < g->n_inputs; i++) {
        const tx_ir_value *val = &g->values[g->inputs[i]];
        if (val->rank < 0) {
            free(shapes);
            return NULL;
        }
        shapes[i].rank = val->rank;
        for (int32_t d = 0; d < val->rank; d++) {
            if (val->dims[d] < 0) {
                free(shapes);
                return NULL; /* symbolic: planned at the first step */
            }
            shapes[i].dims[d] = val->dims[d];
        }
    }
    teexec_status *st = gpu_create(t, shapes);
    free(shapes);
    return st;
}

static teexec_status *gpu_step(teexec_trainer *t, size_t count, const char *const *names,
                               const teexec_tensor *const *tensors, double *out_loss)
{
    const tx_ir_graph *g = t->g;
    /* an NCCL rank's GPU (the executor runs on the thread's current device) */
    if (t->dp) TX_TRY(tx_comm_use_device(t->dp->comm));
    if (count == 0 && t->gpu) {
        /* the previous step's inputs and loss data, still on the device */
        if (t->dp) tx_cuda_executor_set_grad_hook(t->gpu, tx_dp_gpu_grads, t->dp);
        double l = NAN;
        teexec_status *st = tx_cuda_executor_step(t->gpu, NULL, NULL, &l);
        /* every rank joins the loss's all-reduce, whether it reads the loss or not */
        if (!st && t->dp) st = tx_dp_average_loss(t->dp, &l);
        if (!st && out_loss) *out_loss = l;
        if (!st) t->params_synced = false;
        return tx_status_with_file(st, model_path(t));
    }
    const char *lname = t->opt.loss == TEEXEC_LOSS_MSE ? "target" : "labels";
    const tx_tensor **in = calloc(g->n_inputs ? g->n_inputs : 1, sizeof(*in));
    tx_shape *shapes = calloc(g->n_inputs ? g->n_inputs : 1, sizeof(*shapes));
    const tx_tensor *label = NULL;
    teexec_status *st = (!in || !shapes) ? tx_oom() : NULL;
    for (size_t k = 0; k < count && !st; k++) {
        if (!names || !names[k] || !tensors || !tensors[k]) {
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor %zu or its name is NULL", k);
            break;
        }
        if (!strcmp(names[k], lname)) {
            label = &tensors[k]->t;
            continue;
        }
        size_t i = 0;
        while (i < g->n_inputs && strcmp(g->values[g->inputs[i]].name, names[k])) i++;
        if (i == g->n_inputs)
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the model has no input \"%s\"", names[k]);
        else in[i] = &tensors[k]->t;
    }
    for (size_t i = 0; i < g->n_inputs && !st; i++) {
        if (!in[i])
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input \"%s\" is not given",
                          g->values[g->inputs[i]].name);
        else shapes[i] = tx_shape_of(in[i]);
    }
    if (!st && !label)
        st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the %s loss needs a tensor \"%s\"",
                      t->opt.loss == TEEXEC_LOSS_MSE ? "mse" : "cross-entropy", lname);
    /* data parallel: this rank's rows of the global batch (copies) */
    tx_tensor *parts = NULL;
    if (!st && t->dp && !t->dp->local_batch) {
        parts = calloc(g->n_inputs ? g->n_inputs : 1, sizeof(*parts));
        tx_tensor **pp = calloc(g->n_inputs ? g->n_inputs : 1, sizeof(*pp));
        st = parts && pp ? NULL : tx_oom();
        for (size_t i = 0; i < g->n_inputs && !st; i++) {
            st = tx_tensor_clone(in[i], &parts[i]);
            pp[i] = &parts[i];
            in[i] = &parts[i];
        }
        if (!st) st = tx_dp_shard(t->dp, pp, g->n_inputs, &label);
        for (size_t i = 0; i < g->n_inputs && !st; i++) shapes[i] = tx_shape_of(in[i]);
        free(pp);
    }
    if (!st && t->gpu) {
        for (size_t i = 0; i < g->n_inputs && !st; i++)
            if (!tx_shape_equal(&t->gpu_shapes[i], &shapes[i]))
                st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                              "input \"%s\" changed shape; a CUDA trainer is planned for one "
                              "set of input shapes (its optimizer state lives with that plan)",
                              g->values[g->inputs[i]].name);
    }
    if (!st && !t->gpu) st = gpu_create(t, shapes);
    if (!st && t->dp) tx_cuda_executor_set_grad_hook(t->gpu, tx_dp_gpu_grads, t->dp);
    double l = NAN;
    if (!st) st = tx_cuda_executor_step(t->gpu, in, label, &l);
    if (!st && t->dp) st = tx_dp_average_loss(t->dp, &l);
    if (!st && out_loss) *out_loss = l;
    if (!st) {
        t->stepped = true;
        t->params_synced = false;
    }
    for (size_t i = 0; parts && i < g->n_inputs; i++) tx_tensor_release(&parts[i]);
    free(parts);
    free(in);
    free(shapes);
    return tx_status_with_file(st, model_path(t));
}

/* params[] <- the device's current values (for saving). */
static teexec_status *gpu_sync_params(teexec_trainer *t)
{
    if (!t->gpu || t->params_synced) return NULL;
    for (size_t i = 0; i < t->n_params; i++) {
        tx_param *p = &t->params[i];
        tx_tensor h;
        TX_TRY(tx_cuda_executor_param_lowered(t->gpu, t->g->values[p->value].name, &h));
        teexec_status *st = NULL;
        if (h.numel != p->data.numel)
            st = tx_error(TEEXEC_ERR_INTERNAL, "parameter \"%s\" changed size on the device",
                          t->g->values[p->value].name);
        else
            st = tx_convert(h.data, h.dtype, p->data.data, p->data.dtype, h.numel, NULL);
        tx_tensor_release(&h);
        TX_TRY(st);
    }
    t->params_synced = true;
    return NULL;
}

const char *teexec_trainer_device_name(const teexec_trainer *t)
{
    return t && t->cuda ? "cuda" : "cpu";
}

size_t teexec_trainer_device_bytes(const teexec_trainer *t)
{
    return t && t->cuda && t->gpu ? tx_cuda_executor_device_bytes(t->gpu) : 0;
}

teexec_status *teexec_trainer_profile(const teexec_trainer *t, char **out_text)
{
    if (!out_text) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_text is NULL");
    *out_text = NULL;
    if (!t || !t->cuda || !t->opt.profile)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "the trainer was not created with profiling on a CUDA device");
    if (!t->gpu) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "nothing has run yet");
    return tx_cuda_executor_profile(t->gpu, out_text);
}

/* Data parallelism (train_dp.h): the rank's state. The CPU trainer's
 * gradients are host memory: a "threads" group; the CUDA trainer's reach
 * the group through the executor's gradient hook (NCCL, or the host for a
 * "threads" group) and keep no ZeRO-1 sharding yet. With zero1 the
 * optimizer state of the parameters other ranks own is dropped. */
static teexec_status *dp_setup(teexec_trainer *t)
{
    TX_TRY(tx_dp_create(t->opt.comm, t->opt.dp_local_batch, t->opt.dp_bucket_mb, t->opt.zero1,
                        &t->dp));
    if (!t->dp) return NULL;
    if (!t->cuda && t->dp->comm->device_memory)
        return tx_error(TEEXEC_ERR_UNSUPPORTED,
                        "data parallel training on the CPU trainer needs a host communicator "
                        "(teexec_comm_create_threads), not %s",
                        t->dp->comm->vt->name);
    if (t->cuda) {
        if (t->dp->zero1)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "zero1 runs on the CPU trainer only so far (the CUDA trainer's "
                            "optimizer state lives in its executor)");
        return NULL;
    }
    size_t *bytes = malloc(sizeof(size_t) * (t->n_params ? t->n_params : 1));
    if (!bytes) return tx_oom();
    for (size_t i = 0; i < t->n_params; i++) bytes[i] = t->params[i].data.nbytes;
    teexec_status *st = tx_dp_partition(t->dp, bytes, t->n_params);
    free(bytes);
    for (size_t i = 0; i < t->n_params && !st; i++)
        if (!tx_dp_owns(t->dp, i)) tx_optim_slot_release(&t->params[i].slot);
    return st;
}

teexec_status *teexec_trainer_create(const teexec_model *model, const teexec_train_options *options,
                                     teexec_trainer **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_trainer is NULL");
    *out = NULL;
    if (!model) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model is NULL");
    const teexec_model *run = NULL;
    const tx_prepared *prep = NULL;
    TX_TRY(tx_status_with_file(tx_model_runnable(model, &run, &prep),
                               model->file ? model->file->path : NULL));
    teexec_trainer *t = calloc(1, sizeof(*t));
    if (!t) return tx_oom();
    t->user_model = model;
    t->prep = prep;
    t->model = run;
    t->g = run->ir->graph;
    if (options) t->opt = *options;
    else teexec_train_options_init(&t->opt);
    const tx_ir_graph *g = t->g;
    size_t nv = g->n_values ? g->n_values : 1, nn = g->n_nodes ? g->n_nodes : 1;
    teexec_status *st = NULL;
    t->fns = calloc(nn, sizeof(*t->fns));
    t->bwd = calloc(nn, sizeof(*t->bwd));
    t->req = calloc(nv, sizeof(*t->req));
    t->reach = calloc(nv, sizeof(*t->reach));
    t->init = calloc(nv, sizeof(*t->init));
    t->param_of = malloc(nv * sizeof(*t->param_of));
    t->vals = calloc(nv, sizeof(*t->vals));
    t->grads = calloc(nv, sizeof(*t->grads));
    t->aux = calloc(nn, sizeof(*t->aux));
    t->n_aux = calloc(nn, sizeof(*t->n_aux));
    t->grad_inputs = calloc(g->n_inputs ? g->n_inputs : 1, sizeof(*t->grad_inputs));
    t->params = calloc(g->n_initializers ? g->n_initializers : 1, sizeof(*t->params));
    if (!t->fns || !t->bwd || !t->req || !t->reach || !t->init || !t->param_of || !t->vals ||
        !t->grads || !t->aux || !t->n_aux || !t->grad_inputs || !t->params) {
        st = tx_oom();
        goto fail;
    }
    for (size_t v = 0; v < nv; v++) t->param_of[v] = -1;

    /* the loss output */
    if (g->n_outputs == 0) {
        st = tx_error(TEEXEC_ERR_BAD_MODEL, "the model has no outputs to train");
        goto fail;
    }
    t->loss_value = g->outputs[0];
    if (t->opt.loss_output) {
        t->loss_value = -1;
        for (size_t i = 0; i < g->n_outputs; i++)
            if (!strcmp(g->values[g->outputs[i]].name, t->opt.loss_output))
                t->loss_value = g->outputs[i];
        if (t->loss_value < 0) {
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the model has no output \"%s\"",
                          t->opt.loss_output);
            goto fail;
        }
        t->loss_output_name = strdup(t->opt.loss_output);
        if (!t->loss_output_name) {
            st = tx_oom();
            goto fail;
        }
        t->opt.loss_output = t->loss_output_name;
    }
    if (t->opt.freeze) {
        t->freeze = strdup(t->opt.freeze);
        if (!t->freeze) {
            st = tx_oom();
            goto fail;
        }
        t->opt.freeze = t->freeze;
    }
    if (t->opt.loss != TEEXEC_LOSS_MSE && t->opt.loss != TEEXEC_LOSS_CROSS_ENTROPY) {
        st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown loss %d", (int)t->opt.loss);
        goto fail;
    }
    /* optimizer */
    if (t->opt.optimizer == TEEXEC_OPTIMIZER_ADAMW) {
        t->ocfg = tx_optim_default(TX_OPTIM_ADAMW, t->opt.lr);
        t->ocfg.beta1 = t->opt.beta1;
        t->ocfg.beta2 = t->opt.beta2;
        t->ocfg.eps = t->opt.eps;
    } else if (t->opt.optimizer == TEEXEC_OPTIMIZER_SGD) {
        t->ocfg = tx_optim_default(TX_OPTIM_SGD, t->opt.lr);
        t->ocfg.momentum = t->opt.momentum;
    } else {
        st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown optimizer %d", (int)t->opt.optimizer);
        goto fail;
    }
    t->ocfg.weight_decay = t->opt.weight_decay;
    st = tx_optim_config_check(&t->ocfg);
    if (!st) st = tx_train_schedule_check(&t->opt);
    if (st) goto fail;

    /* kernels, every missing one listed at once (exec/op_gaps.h) */
    tx_op_gaps gaps = {0};
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_ir_node *n = &g->nodes[i];
        t->fns[i] = n->function >= 0            ? NULL
                    : tx_te_domain(n->domain) ? tx_cpu_te_op_find(n->op_type, n->opset)
                                              : tx_cpu_op_find(n->domain, n->op_type, n->opset);
        if (t->fns[i]) continue;
        char what[512];
        snprintf(what, sizeof what, "unsupported op %s (domain \"%s\", opset %lld)", n->op_type,
                 n->domain, (long long)n->opset);
        st = tx_op_gaps_add(&gaps, what, n->label);
    }
    if (!st) st = tx_op_gaps_status(&gaps, TEEXEC_ERR_UNSUPPORTED, model_path(t));
    tx_op_gaps_free(&gaps);
    if (st) goto fail;
    /* initializers: decoded once; float ones that reach the loss become
     * parameters after the analysis */
    for (size_t i = 0; i < g->n_initializers; i++) {
        int32_t v = g->initializers[i];
        const tx_ir_value *val = &g->values[v];
        if (!(val->flags & TX_IR_VALUE_INITIALIZER)) continue;
        st = tx_tensor_from_proto(val->initializer, run->file, &t->init[v]);
        if (st) goto fail;
    }
    st = analyse(t);
    if (st) goto fail;
    for (size_t i = 0; i < g->n_initializers; i++) {
        int32_t v = g->initializers[i];
        if (!t->req[v] || !t->init[v].data) continue;
        tx_param *p = &t->params[t->n_params];
        p->value = v;
        p->data = t->init[v];
        memset(&t->init[v], 0, sizeof(t->init[v]));
        t->param_of[v] = (int32_t)t->n_params++;
        st = tx_optim_slot_init(&p->slot, &t->ocfg, &p->data);
        if (st) goto fail;
    }
    st = list_user_params(t);
    if (st) goto fail;
    st = tx_resolve_device(t->opt.device, t->opt.recipe, t->opt.dtype, true, &t->cuda);
    if (st) goto fail;
    st = dp_setup(t);
    if (st) goto fail;
    st = tx_recipe_parse(t->opt.recipe ? t->opt.recipe : "none", &t->rcp);
    if (st) goto fail;
    if (t->opt.recipe) {
        t->recipe = strdup(t->opt.recipe);
        if (!t->recipe) {
            st = tx_oom();
            goto fail;
        }
        t->opt.recipe = t->recipe;
    }
    if (t->cuda) {
        /* a data parallel rank plans for its share of the batch, known at
         * the first step (the declared shapes are the global batch's) */
        st = t->dp ? tx_comm_use_device(t->dp->comm) : NULL;
        if (!st && !(t->dp && !t->dp->local_batch)) st = gpu_create_declared(t);
        if (st) goto fail;
    } else {
        bool planned; /* declared shapes: planned now, else at the first step */
        st = ensure_plan(t, &planned);
        if (st) goto fail;
    }
    *out = t;
    return NULL;
fail:
    teexec_trainer_destroy(t);
    return tx_status_with_file(st, model->file ? model->file->path : NULL);
}

/* ---- the training fuser plan -------------------------------------------- */

/* The inputs' shapes the plan is for: the bound tensors, else the declared
 * dims. False when one is unknown (symbolic dims before the first step). */
static bool input_shapes(const teexec_trainer *t, tx_shape *shapes)
{
    const tx_ir_graph *g = t->g;
    for (size_t i = 0; i < g->n_inputs; i++) {
        int32_t v = g->inputs[i];
        const tx_tensor *x = value_tensor(t, v);
        if (x) {
            shapes[i] = tx_shape_of(x);
            continue;
        }
        const tx_ir_value *val = &g->values[v];
        if (val->rank < 0 || val->rank > TX_MAX_RANK) return false;
        memset(&shapes[i], 0, sizeof shapes[i]);
        shapes[i].rank = val->rank;
        for (int32_t d = 0; d < val->rank; d++) {
            if (val->dims[d] < 0) return false;
            shapes[i].dims[d] = val->dims[d];
        }
    }
    return true;
}

/* Builds the plan for the inputs' current shapes unless it is built
 * already; ok = false when the shapes are not known yet. */
static teexec_status *ensure_plan(teexec_trainer *t, bool *ok)
{
    const tx_ir_graph *g = t->g;
    size_t ni = g->n_inputs ? g->n_inputs : 1;
    *ok = false;
    tx_shape *shapes = calloc(ni, sizeof(*shapes));
    if (!shapes) return tx_oom();
    if (!input_shapes(t, shapes)) {
        free(shapes);
        return NULL;
    }
    *ok = true;
    if (t->fplan) {
        bool same = true;
        for (size_t i = 0; i < g->n_inputs; i++)
            if (!tx_shape_equal(&shapes[i], &t->plan_shapes[i])) same = false;
        if (same) {
            free(shapes);
            return NULL;
        }
        free_plan(t);
    }
    free(t->plan_shapes);
    t->plan_shapes = shapes;
    tx_infer_value *iv = NULL;
    bool *need = calloc(ni, sizeof(*need));
    teexec_status *st = need ? infer_values(t, &iv) : tx_oom();
    size_t n_fed = 0;
    for (size_t i = 0; !st && i < g->n_inputs; i++) {
        int32_t v = g->inputs[i];
        if (g->values[v].flags & TX_IR_VALUE_INITIALIZER) continue;
        need[n_fed++] = t->req[v];
    }
    tx_plan_request req;
    memset(&req, 0, sizeof(req));
    req.recipe = t->rcp;
    if (!st) st = tx_device_caps_parse("cpu", &req.device);
    req.training = true;
    req.deterministic = t->opt.deterministic != 0;
    req.input_needs_grad = need;
    req.n_inputs = n_fed;
    req.vals = iv;
    req.n_vals = g->n_values;
    req.skip_memory = true; /* the trainer keeps every value of the step */
    if (!st) st = tx_fuser_plan_build(g, &req, &t->fplan);
    infer_values_free(iv, g->n_values);
    free(need);
    TX_TRY(st);
    const tx_fuser_plan *fp = t->fplan;
    size_t ng = fp->n_groups ? fp->n_groups : 1;
    t->sg = calloc(ng, sizeof(*t->sg));
    t->runs = calloc(ng, sizeof(*t->runs));
    t->role = calloc(g->n_nodes ? g->n_nodes : 1, sizeof(*t->role));
    if (!t->cur) t->cur = calloc(g->n_values ? g->n_values : 1, sizeof(*t->cur));
    if (!t->sg || !t->runs || !t->role || !t->cur) return tx_oom();
    for (size_t k = 0; k < fp->n_groups; k++) {
        const tx_plan_group *pg = &fp->groups[k];
        if (pg->kind != TX_GROUP_CHAIN) continue;
        tx_sgroup *sg = &t->sg[k];
        TX_TRY(tx_sgroup_prepare(g, NULL, pg, sg));
        if (!sg->gx) continue;
        /* the plan decides where the backward starts; every parameter's
         * grad is made (the trainer reads those it trains) */
        sg->grp.input_needs_grad = t->req[pg->main_input];
        sg->grp.has_first_backward = true;
        sg->grp.first_backward = pg->first_op_requiring_backward;
        for (int32_t j = 0; j < pg->n_nodes; j++) {
            sg->ops[j].params_need_grad = true;
            t->role[pg->nodes[j]] = j == 0 ? 1 : -1;
        }
    }
    return tx_sgroups_init_delayed(&t->rcp, fp, &t->delayed, &t->has_delayed);
}

static teexec_status *trace_add(teexec_trainer *t, int32_t group, tx_plan_kernel k)
{
    if (t->n_trace == t->cap_trace) {
        size_t cap = t->cap_trace ? 2 * t->cap_trace : 64;
        tx_run_kernel *n = realloc(t->trace, cap * sizeof(*n));
        if (!n) return tx_oom();
        t->trace = n;
        t->cap_trace = cap;
    }
    t->trace[t->n_trace++] = (tx_run_kernel){group, k};
    return NULL;
}

const tx_run_kernel *tx_trainer_last_kernels(const teexec_trainer *t, size_t *n,
                                             const tx_fuser_plan **plan)
{
    *n = t ? t->n_trace : 0;
    if (plan) *plan = t ? t->fplan : NULL;
    return t ? t->trace : NULL;
}

teexec_status *tx_trainer_cuda_kernels(const teexec_trainer *t, tx_run_kernel **out, size_t *n,
                                       size_t *n_forward, const tx_fuser_plan **plan)
{
    if (!t || !t->cuda || !t->gpu)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "no CUDA step yet: the kernels are those of the trainer's executor");
    return tx_cuda_executor_kernels(t->gpu, out, n, n_forward, plan);
}

teexec_status *tx_trainer_cuda_memory(const teexec_trainer *t, tx_cuda_memory_report *out)
{
    if (!t || !t->cuda || !t->gpu)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "no CUDA step yet: the memory is that of the trainer's executor");
    return tx_cuda_executor_memory(t->gpu, out);
}

teexec_status *tx_trainer_debug_node_by_node(teexec_trainer *t)
{
    if (!t || t->cuda) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "not a CPU trainer");
    if (t->rcp.kind != TX_RECIPE_NONE)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "node by node runs recipe none only");
    clear_step(t);
    free_plan(t);
    t->no_plan = true;
    return NULL;
}

/* Does the fork (output 1) of group node j leave the group? */
static bool fork_leaves(const tx_plan_group *pg, int32_t v)
{
    for (int32_t k = 0; k < pg->n_extra_outputs; k++)
        if (pg->extra_outputs[k] == v) return true;
    return false;
}

/* Forward of the group node `first` starts: its values leave into t->vals,
 * the run (saved contexts) stays for the backward. */
static teexec_status *group_forward(teexec_trainer *t, size_t first, uint64_t step)
{
    const tx_ir_graph *g = t->g;
    const tx_fuser_plan *fp = t->fplan;
    int32_t gid = fp->group_of_node[first];
    const tx_plan_group *pg = &fp->groups[gid];
    tx_sgroup *sg = &t->sg[gid];
    for (size_t v = 0; v < g->n_values; v++) t->cur[v] = value_tensor(t, (int32_t)v);
    TX_TRY(tx_sgroup_bind(g, pg, sg, t->cur));
    const tx_tensor *input = t->cur[pg->main_input];
    if (!input)
        return tx_error(TEEXEC_ERR_INTERNAL, "value \"%s\" was not computed",
                        g->values[pg->main_input].name);
    /* Dropout draws the stream the node-by-node trainer gives the node */
    for (int32_t j = 0; j < pg->n_nodes; j++) {
        sg->ops[j].has_rng_offset = true;
        sg->ops[j].rng_offset =
            tx_train_rng_offset(t->opt.seed, step, g->n_nodes, (uint64_t)pg->nodes[j]);
    }
    TX_TRY(tx_group_forward(&sg->grp, &t->gcfg, pg->forward, pg->n_forward, input, &t->runs[gid]));
    const tx_group_run *r = t->runs[gid];
    const tx_tensor *y = tx_group_output(r);
    if (!y) return tx_error(TEEXEC_ERR_INTERNAL, "a fuser group did not produce a value");
    TX_TRY(tx_tensor_clone(y, &t->vals[pg->main_output]));
    for (int32_t j = 0; j < pg->n_nodes; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        if (nd->n_outputs < 2 || nd->outputs[1] < 0 || !fork_leaves(pg, nd->outputs[1])) continue;
        const tx_tensor *x = tx_group_extra_output(r, j);
        if (!x) return tx_error(TEEXEC_ERR_INTERNAL, "a fuser group did not produce a fork");
        TX_TRY(tx_tensor_clone(x, &t->vals[nd->outputs[1]]));
    }
    for (int32_t k = 0; k < pg->n_forward; k++) TX_TRY(trace_add(t, gid, pg->forward[k]));
    return NULL;
}

/* grads[v] += x (any float dtype), when v carries a gradient. */
static teexec_status *grad_add(teexec_trainer *t, int32_t v, const tx_tensor *x);

/* The double grad of value v as a tensor of like's dtype and shape (zeros
 * when none reached it). */
static teexec_status *grad_as(const teexec_trainer *t, int32_t v, const tx_tensor *like,
                              tx_tensor *out)
{
    TX_TRY(tx_tensor_alloc(out, like->dtype, like->rank, like->dims));
    if (!t->grads[v]) {
        memset(out->data, 0, (size_t)out->nbytes);
        return NULL;
    }
    teexec_status *st =
        tx_convert(t->grads[v], TEEXEC_DTYPE_DOUBLE, out->data, out->dtype, out->numel, NULL);
    if (st) tx_tensor_release(out);
    return st;
}

/* Backward of the group node `first` starts, through the plan's backward
 * layout; its grads add into the trainer's buffers. */
static teexec_status *group_backward(teexec_trainer *t, size_t first)
{
    const tx_ir_graph *g = t->g;
    const tx_fuser_plan *fp = t->fplan;
    int32_t gid = fp->group_of_node[first];
    const tx_plan_group *pg = &fp->groups[gid];
    tx_sgroup *sg = &t->sg[gid];
    tx_group_run *r = t->runs[gid];
    if (!r || pg->first_op_requiring_backward >= pg->n_nodes) return NULL;
    bool any = t->grads[pg->main_output] != NULL;
    for (int32_t j = 0; j < pg->n_nodes; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        if (nd->n_outputs >= 2 && nd->outputs[1] >= 0 && t->grads[nd->outputs[1]]) any = true;
    }
    if (!any) return NULL;
    int32_t n = pg->n_nodes;
    tx_tensor dy = {0};
    tx_tensor *gx = calloc((size_t)n, sizeof(*gx));
    const tx_tensor **gxp = calloc((size_t)n, sizeof(*gxp));
    teexec_status *st = (!gx || !gxp) ? tx_oom() : NULL;
    if (!st) st = grad_as(t, pg->main_output, &t->vals[pg->main_output], &dy);
    for (int32_t j = 0; j < n && !st; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        if (nd->n_outputs < 2 || nd->outputs[1] < 0) continue;
        int32_t v = nd->outputs[1];
        if (!t->grads[v] || !t->vals[v].data) continue;
        st = grad_as(t, v, &t->vals[v], &gx[j]);
        if (!st) gxp[j] = &gx[j];
    }
    if (!st) st = tx_group_backward(r, pg->backward, pg->n_backward, &dy, gxp);
    if (!st) st = grad_add(t, pg->main_input, tx_group_grad_input(r));
    for (int32_t j = 0; j < n && !st; j++) {
        const tx_ir_node *nd = &g->nodes[pg->nodes[j]];
        const tx_te_node *d = &sg->dec[j];
        for (int q = 0; q < d->n_params && !st; q++) {
            size_t k = d->first_param + (size_t)q;
            int32_t v = k < nd->n_inputs ? nd->inputs[k] : -1;
            if (v >= 0) st = grad_add(t, v, tx_group_grad_param(r, j, q));
        }
        for (int e = 0; e < sg->ops[j].n_extra_inputs && !st; e++) {
            size_t k = 1 + (size_t)e;
            int32_t v = k < nd->n_inputs ? nd->inputs[k] : -1;
            if (v < 0 || sg->ops[j].channel_from[e] >= 0) continue;
            st = grad_add(t, v, tx_group_grad_extra_input(r, j, e));
        }
    }
    /* in execution order: the layout runs last kernel first */
    for (int32_t k = pg->n_backward; k-- > 0 && !st;) st = trace_add(t, gid, pg->backward[k]);
    tx_tensor_release(&dy);
    for (int32_t j = 0; gx && j < n; j++) tx_tensor_release(&gx[j]);
    free(gx);
    free(gxp);
    return st;
}

/* ---- one step ---------------------------------------------------------- */

static teexec_status *node_error(const tx_ir_node *n, teexec_status *st)
{
    if (!st || teexec_status_node(st)) return st;
    return tx_status_with_node(tx_status_prefix(st, "node \"%s\" (%s)", n->label, n->op_type),
                               n->label);
}

static teexec_status *forward(teexec_trainer *t)
{
    const tx_ir_graph *g = t->g;
    uint64_t step = t->n_steps++;
    size_t max_in = 1, max_out = 1;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_inputs > max_in) max_in = g->nodes[i].n_inputs;
        if (g->nodes[i].n_outputs > max_out) max_out = g->nodes[i].n_outputs;
    }
    tx_infer_value *pv = calloc(max_in, sizeof(*pv));
    const tx_infer_value **pins = calloc(max_in, sizeof(*pins));
    const tx_tensor **tins = calloc(max_in, sizeof(*tins));
    tx_infer_value *outs = calloc(max_out, sizeof(*outs));
    tx_tensor **touts = calloc(max_out, sizeof(*touts));
    teexec_status *st = NULL;
    if (!pv || !pins || !tins || !outs || !touts) st = tx_oom();
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        const tx_ir_node *n = &g->nodes[i];
        int role = t->role ? t->role[i] : 0;
        if (role < 0) continue; /* ran with its group */
        if (role > 0) {
            st = node_error(n, group_forward(t, i, step));
            continue;
        }
        for (size_t k = 0; k < n->n_inputs; k++) {
            const tx_tensor *x = value_tensor(t, n->inputs[k]);
            tins[k] = x;
            pins[k] = NULL;
            if (n->inputs[k] < 0) continue;
            if (!x) {
                st = tx_status_with_node(
                    tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "node \"%s\" (%s): input \"%s\" has no value",
                             n->label, n->op_type, g->values[n->inputs[k]].name),
                    n->label);
                break;
            }
            memset(&pv[k], 0, sizeof(pv[k]));
            pv[k].dtype = x->dtype;
            pv[k].shape_known = true;
            pv[k].shape = tx_shape_of(x);
            pv[k].value = x;
            pins[k] = &pv[k];
        }
        if (st) break;
        memset(outs, 0, sizeof(*outs) * n->n_outputs);
        st = tx_exec_infer_node(n, t->model->file, pins, outs);
        for (size_t j = 0; j < n->n_outputs && !st; j++) {
            int32_t o = n->outputs[j];
            touts[j] = NULL;
            if (o < 0) continue;
            if (!outs[j].shape_known)
                st = node_error(n, tx_error(TEEXEC_ERR_UNSUPPORTED, "output %zu has no known shape", j));
            else
                st = tx_tensor_alloc(&t->vals[o], outs[j].dtype, outs[j].shape.rank,
                                     outs[j].shape.dims);
            touts[j] = &t->vals[o];
        }
        for (size_t j = 0; j < n->n_outputs; j++) tx_infer_value_clear(&outs[j]);
        if (st) break;
        tx_op_call call = {n, t->model->file, n->n_inputs, tins, n->n_outputs, touts};
        /* te.ops nodes run with training semantics (Dropout drops) and keep
         * their aux tensors as the saved context backward reads */
        if (tx_te_domain(n->domain))
            st = tx_te_forward_train(&call, tx_train_rng_offset(t->opt.seed, step, g->n_nodes, i),
                                     t->aux[i], &t->n_aux[i]);
        else
            st = t->fns[i](&call);
        st = node_error(n, st);
    }
    free(pv);
    free(pins);
    free(tins);
    free(outs);
    free(touts);
    return st;
}

static teexec_status *to_f64(const tx_tensor *x, double **out)
{
    *out = NULL;
    if (!x || !tx_convert_supports(x->dtype) || x->dtype == TEEXEC_DTYPE_STRING) return NULL;
    double *d = malloc(sizeof(double) * (size_t)(x->numel ? x->numel : 1));
    if (!d) return tx_oom();
    teexec_status *st = tx_convert(x->data, x->dtype, d, TEEXEC_DTYPE_DOUBLE, x->numel, NULL);
    if (st) {
        free(d);
        return st;
    }
    *out = d;
    return NULL;
}

static teexec_status *grad_buf(teexec_trainer *t, int32_t v, uint64_t numel)
{
    if (t->grads[v]) return NULL;
    t->grads[v] = calloc((size_t)(numel ? numel : 1), sizeof(double));
    return t->grads[v] ? NULL : tx_oom();
}

static teexec_status *grad_add(teexec_trainer *t, int32_t v, const tx_tensor *x)
{
    if (v < 0 || !x || !t->req[v]) return NULL;
    double *d = NULL;
    TX_TRY(to_f64(x, &d));
    if (!d) return tx_error(TEEXEC_ERR_INTERNAL, "a group gradient is not numeric");
    teexec_status *st = grad_buf(t, v, x->numel);
    if (!st) {
        double *gv = t->grads[v];
        for (uint64_t e = 0; e < x->numel; e++) gv[e] += d[e];
    }
    free(d);
    return st;
}

static teexec_status *backward(teexec_trainer *t)
{
    const tx_ir_graph *g = t->g;
    teexec_status *st = NULL;
    for (size_t i = g->n_nodes; i-- > 0 && !st;) {
        int role = t->role ? t->role[i] : 0;
        if (role < 0) continue; /* its group's backward runs at the group's first node */
        if (role > 0) {
            st = node_error(&g->nodes[i], group_backward(t, i));
            continue;
        }
        if (!t->bwd[i]) continue;
        const tx_ir_node *n = &g->nodes[i];
        bool any = false;
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0 && t->grads[n->outputs[j]]) any = true;
        if (!any) continue;
        size_t ni = n->n_inputs, no = n->n_outputs;
        const tx_tensor **in = calloc(ni ? ni : 1, sizeof(*in));
        double **in64 = calloc(ni ? ni : 1, sizeof(*in64));
        double **gin = calloc(ni ? ni : 1, sizeof(*gin));
        const tx_tensor **out = calloc(no, sizeof(*out));
        double **out64 = calloc(no, sizeof(*out64));
        const double **gout = calloc(no, sizeof(*gout));
        if (!in || !in64 || !gin || !out || !out64 || !gout) st = tx_oom();
        for (size_t k = 0; k < ni && !st; k++) {
            int32_t v = n->inputs[k];
            in[k] = value_tensor(t, v);
            if (!in[k]) continue;
            st = to_f64(in[k], &in64[k]);
            if (!st && t->req[v] && slot_diff(n, k)) {
                st = grad_buf(t, v, in[k]->numel);
                gin[k] = t->grads[v];
            }
        }
        for (size_t j = 0; j < no && !st; j++) {
            int32_t o = n->outputs[j];
            if (o < 0) continue;
            out[j] = &t->vals[o];
            gout[j] = t->grads[o];
            st = to_f64(out[j], &out64[j]);
        }
        if (!st) {
            tx_bwd_call c = {.node = n, .file = t->model->file, .n_in = ni, .in = in,
                             .in64 = (const double *const *)in64, .n_out = no, .out = out,
                             .out64 = (const double *const *)out64, .gout = gout, .gin = gin};
            const tx_tensor *auxp[TX_TE_MAX_EXTRA] = {NULL};
            if (tx_te_domain(n->domain)) {
                for (int j = 0; j < t->n_aux[i]; j++) auxp[j] = &t->aux[i][j];
                c.aux = auxp;
                c.n_aux = t->n_aux[i];
                c.rng_offset = tx_train_rng_offset(t->opt.seed, t->n_steps - 1, g->n_nodes, i);
            }
            st = node_error(n, t->bwd[i](&c));
        }
        for (size_t k = 0; k < ni && in64; k++) free(in64[k]);
        for (size_t j = 0; j < no && out64; j++) free(out64[j]);
        free(in);
        free(in64);
        free(gin);
        free(out);
        free(out64);
        free(gout);
    }
    return st;
}

static teexec_status *bind(teexec_trainer *t, size_t count, const char *const *names,
                           const teexec_tensor *const *tensors, const tx_tensor **label)
{
    const tx_ir_graph *g = t->g;
    const char *lname = t->opt.loss == TEEXEC_LOSS_MSE ? "target" : "labels";
    *label = NULL;
    for (size_t i = 0; i < count; i++) {
        if (!names || !names[i] || !tensors || !tensors[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor %zu or its name is NULL", i);
        if (!strcmp(names[i], lname)) {
            *label = &tensors[i]->t;
            continue;
        }
        int32_t v = tx_ir_graph_find_value(g, names[i]);
        if (v < 0 || !(g->values[v].flags & TX_IR_VALUE_GRAPH_INPUT) ||
            (g->values[v].flags & TX_IR_VALUE_INITIALIZER))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the model has no input \"%s\"", names[i]);
        TX_TRY(tx_tensor_clone(&tensors[i]->t, &t->vals[v]));
    }
    for (size_t i = 0; i < g->n_inputs; i++) {
        int32_t v = g->inputs[i];
        if (!value_tensor(t, v))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input \"%s\" is not given",
                            g->values[v].name);
    }
    if (!*label) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "the %s loss needs a tensor \"%s\"",
                                 t->opt.loss == TEEXEC_LOSS_MSE ? "mse" : "cross-entropy", lname);
    return NULL;
}

static teexec_status *trainer_step(teexec_trainer *t, const teexec_run_options *ro, size_t count,
                                   const char *const *names, const teexec_tensor *const *tensors,
                                   double *out_loss);

teexec_status *teexec_trainer_step(teexec_trainer *t, size_t count, const char *const *names,
                                   const teexec_tensor *const *tensors, double *out_loss)
{
    return teexec_trainer_step_with(t, NULL, count, names, tensors, out_loss);
}

teexec_status *teexec_trainer_step_with(teexec_trainer *t, const teexec_run_options *ro,
                                        size_t count, const char *const *names,
                                        const teexec_tensor *const *tensors, double *out_loss)
{
    const char *prev = tx_run_begin(ro);
    teexec_status *st = NULL;
    /* trainers read host tensors only (device I/O is for sessions) */
    for (size_t k = 0; !st && tensors && k < count; k++)
        st = tx_tensor_host_only(tensors[k], names && names[k] ? names[k] : "a step's tensor");
    if (st && out_loss) *out_loss = NAN;
    if (!st) st = trainer_step(t, ro, count, names, tensors, out_loss);
    /* a rank that fails fails the group, so the others stop waiting */
    if (st && t && t->dp && teexec_status_code(st) != TEEXEC_ERR_COMM)
        teexec_comm_abort(t->dp->comm, teexec_status_message(st));
    return tx_run_end(ro, prev, st);
}

/* Cancel points of a CPU step: between its phases, never inside the
 * optimizer update, so a cancelled step leaves every parameter as it was. */
static teexec_status *check_step_cancel(const teexec_run_options *ro, const char *where)
{
    return tx_run_cancelled(ro) ? tx_run_cancelled_status(where, NULL) : NULL;
}

/* Data parallel steps (train_dp.h): this rank's share of the bound
 * batch; the gradients (every parameter's, zero where none flowed, so
 * every rank reduces the same buffers) averaged over the ranks; zero1's
 * all-gather of the updated parameters. */
static teexec_status *dp_shard(teexec_trainer *t, const tx_tensor **label)
{
    const tx_ir_graph *g = t->g;
    tx_tensor **vals = malloc(sizeof(*vals) * (g->n_inputs ? g->n_inputs : 1));
    if (!vals) return tx_oom();
    size_t n = 0;
    for (size_t i = 0; i < g->n_inputs; i++) {
        int32_t v = g->inputs[i];
        if (t->vals[v].data && !(g->values[v].flags & TX_IR_VALUE_INITIALIZER))
            vals[n++] = &t->vals[v];
    }
    teexec_status *st = tx_dp_shard(t->dp, vals, n, label);
    free(vals);
    return st;
}

static teexec_status *dp_reduce(teexec_trainer *t, double n_local, double *loss)
{
    double **g = malloc(sizeof(*g) * (t->n_params ? t->n_params : 1));
    uint64_t *numel = malloc(sizeof(*numel) * (t->n_params ? t->n_params : 1));
    teexec_status *st = g && numel ? NULL : tx_oom();
    for (size_t i = 0; i < t->n_params && !st; i++) {
        tx_param *p = &t->params[i];
        st = grad_buf(t, p->value, p->data.numel);
        g[i] = t->grads[p->value];
        numel[i] = p->data.numel;
    }
    if (!st) st = tx_dp_reduce(t->dp, n_local, loss, g, numel, t->n_params);
    free(g);
    free(numel);
    return st;
}

static teexec_status *dp_gather(teexec_trainer *t)
{
    tx_tensor **p = malloc(sizeof(*p) * (t->n_params ? t->n_params : 1));
    if (!p) return tx_oom();
    for (size_t i = 0; i < t->n_params; i++) p[i] = &t->params[i].data;
    teexec_status *st = tx_dp_gather_params(t->dp, p, t->n_params);
    free(p);
    return st;
}

static teexec_status *trainer_step(teexec_trainer *t, const teexec_run_options *ro, size_t count,
                                   const char *const *names, const teexec_tensor *const *tensors,
                                   double *out_loss)
{
    if (out_loss) *out_loss = NAN; /* out-parameters say nothing on failure */
    if (!t) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "trainer is NULL");
    TX_TRY(check_step_cancel(ro, "before the step started"));
    if (tx_log_enabled(TEEXEC_LOG_DEBUG))
        tx_log(TEEXEC_LOG_DEBUG, "trainer step started (%s)", teexec_trainer_device_name(t));
    /* one launch on the device (forward, backward, update): no later point */
    if (t->cuda) return gpu_step(t, count, names, tensors, out_loss);
    clear_step(t);
    t->stepped = false;
    const tx_tensor *label;
    TX_TRY(bind(t, count, names, tensors, &label));
    if (t->dp) TX_TRY(dp_shard(t, &label));
    bool planned = t->no_plan;
    if (!t->no_plan) TX_TRY(tx_status_with_file(ensure_plan(t, &planned), model_path(t)));
    if (!planned) return tx_error(TEEXEC_ERR_INTERNAL, "the step's input shapes are not known");
    t->n_trace = 0;
    memset(&t->gcfg, 0, sizeof(t->gcfg));
    t->gcfg.recipe = t->rcp;
    t->gcfg.quant = t->fplan ? t->fplan->quant : NULL;
    t->gcfg.n_quant = t->fplan ? t->fplan->n_quant : 0;
    t->gcfg.delayed = t->has_delayed ? &t->delayed : NULL;
    t->gcfg.seed = t->opt.seed; /* NVFP4 stochastic rounding: the seed and the step */
    t->gcfg.step = t->n_steps;
    t->gcfg.training = true;
    TX_TRY(tx_status_with_file(forward(t), model_path(t)));
    TX_TRY(check_step_cancel(ro, "after the forward"));
    const tx_tensor *pred = &t->vals[t->loss_value];
    tx_tensor lg;
    TX_TRY(tx_tensor_alloc(&lg, TEEXEC_DTYPE_DOUBLE, pred->rank, pred->dims));
    double loss = 0;
    uint64_t n_counted = pred->numel; /* the elements the mean is over */
    teexec_status *st =
        t->opt.loss == TEEXEC_LOSS_MSE
            ? tx_loss_mse(pred, label, TX_LOSS_MEAN, &loss, &lg)
            : tx_loss_cross_entropy(pred, label, t->opt.ignore_index, TX_LOSS_MEAN, &loss, &lg,
                                    &n_counted);
    if (st) {
        tx_tensor_release(&lg);
        return st;
    }
    /* the loss gradient becomes the output's gradient buffer */
    if (lg.owns_data) {
        t->grads[t->loss_value] = lg.data;
        lg.owns_data = false;
        lg.data = NULL;
    } else {
        tx_tensor_release(&lg);
        return tx_error(TEEXEC_ERR_INTERNAL, "loss gradient not owned");
    }
    TX_TRY(tx_status_with_file(backward(t), model_path(t)));
    TX_TRY(check_step_cancel(ro, "after the backward, before the optimizer update"));
    if (t->dp) TX_TRY(dp_reduce(t, (double)n_counted, &loss));
    t->ocfg.lr = tx_train_lr_at(&t->opt, (int64_t)t->n_updates);
    t->ocfg.grad_scale = 1.0;
    if (t->opt.clip_grad_norm > 0.0) {
        /* every rank holds every averaged gradient (zero1 included), so
         * each computes the same global norm */
        double ss = 0.0;
        for (size_t i = 0; i < t->n_params; i++) {
            tx_param *p = &t->params[i];
            TX_TRY(grad_buf(t, p->value, p->data.numel));
            const double *gv = t->grads[p->value];
            for (uint64_t k = 0; k < p->data.numel; k++) ss += gv[k] * gv[k];
        }
        t->ocfg.grad_scale = tx_train_clip_coef(t->opt.clip_grad_norm, sqrt(ss));
    }
    t->n_updates++;
    for (size_t i = 0; i < t->n_params; i++) {
        tx_param *p = &t->params[i];
        TX_TRY(grad_buf(t, p->value, p->data.numel));
        if (!tx_dp_owns(t->dp, i)) continue; /* zero1: its owner updates it */
        tx_tensor gt;
        TX_TRY(tx_tensor_wrap(&gt, TEEXEC_DTYPE_DOUBLE, p->data.rank, p->data.dims,
                              t->grads[p->value]));
        TX_TRY(tx_optim_step(&p->slot, &t->ocfg, &p->data, &gt));
    }
    if (t->dp && t->dp->zero1) TX_TRY(dp_gather(t));
    /* fp8-delayed: this step's amaxes roll into the scales of the next */
    if (t->has_delayed) tx_delayed_update(&t->delayed, NULL);
    t->stepped = true;
    if (out_loss) *out_loss = loss;
    return NULL;
}

/* ---- access ------------------------------------------------------------ */

/* The lowered value and the source mapping of a user-facing name: the
 * user's initializer name (through the preparation's sources) or a name of
 * the lowered graph itself (a graph input, an unchanged initializer).
 * *src is NULL when no remapping applies. */
static int32_t lowered_value(const teexec_trainer *t, const char *name, const tx_param_source **src)
{
    *src = tx_prepared_source(t->prep, name);
    if (*src && strcmp((*src)->lowered, name) == 0 && (*src)->rows < 0 && !(*src)->transposed &&
        (*src)->repeat <= 1 && (*src)->orig_rank == 0)
        *src = NULL; /* the same tensor under the same name */
    return tx_ir_graph_find_value(t->g, *src ? (*src)->lowered : name);
}

/* The user's initializers that hold a trainable parameter, in the user's
 * initializer order (built once, at creation). */
static teexec_status *list_user_params(teexec_trainer *t)
{
    const tx_ir_graph *ug = t->user_model->ir->graph;
    t->user_params = calloc(ug->n_initializers ? ug->n_initializers : 1, sizeof(*t->user_params));
    if (!t->user_params) return tx_oom();
    for (size_t i = 0; i < ug->n_initializers; i++) {
        const char *name = ug->values[ug->initializers[i]].name;
        const tx_param_source *src;
        int32_t v = lowered_value(t, name, &src);
        if (v >= 0 && t->param_of[v] >= 0) t->user_params[t->n_user_params++] = name;
    }
    return NULL;
}

size_t teexec_trainer_param_count(const teexec_trainer *t) { return t ? t->n_user_params : 0; }

const char *teexec_trainer_param_name(const teexec_trainer *t, size_t i)
{
    if (!t || i >= t->n_user_params) return NULL;
    return t->user_params[i];
}

/* A lowered tensor handed out under the user's name: remapped (rows of a
 * merged weight, transposed back) when the source says so. Consumes *low. */
static teexec_status *to_user_layout(const tx_param_source *src, tx_tensor *low,
                                     teexec_tensor **out)
{
    tx_tensor r;
    teexec_status *st = NULL;
    if (src) {
        st = tx_param_to_original(src, low, &r);
        tx_tensor_release(low);
        if (st) return st;
    } else {
        r = *low;
        memset(low, 0, sizeof *low);
    }
    st = tx_tensor_to_public(&r, out);
    if (st) tx_tensor_release(&r);
    return st;
}

teexec_status *teexec_trainer_grad(const teexec_trainer *t, const char *name, teexec_tensor **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out = NULL;
    if (!t || !name) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "trainer or name is NULL");
    if (!t->stepped) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no step has run yet");
    if (t->cuda) {
        tx_tensor h;
        TX_TRY(tx_cuda_executor_grad(t->gpu, name, &h));
        teexec_status *st = tx_tensor_to_public(&h, out);
        if (st) tx_tensor_release(&h);
        return st;
    }
    const tx_param_source *src;
    int32_t v = lowered_value(t, name, &src);
    const tx_tensor *like = v >= 0 ? value_tensor(t, v) : NULL;
    if (v < 0 || !t->req[v] || !like ||
        !(t->g->values[v].flags & (TX_IR_VALUE_INITIALIZER | TX_IR_VALUE_GRAPH_INPUT)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "\"%s\" has no gradient", name);
    tx_tensor r;
    TX_TRY(tx_tensor_alloc(&r, like->dtype, like->rank, like->dims));
    teexec_status *st = NULL;
    if (t->grads[v])
        st = tx_convert(t->grads[v], TEEXEC_DTYPE_DOUBLE, r.data, r.dtype, r.numel, NULL);
    if (st) {
        tx_tensor_release(&r);
        return st;
    }
    return to_user_layout(src, &r, out);
}

teexec_status *teexec_trainer_param(const teexec_trainer *t, const char *name, teexec_tensor **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out = NULL;
    if (!t || !name) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "trainer or name is NULL");
    const tx_param_source *src;
    int32_t v = lowered_value(t, name, &src);
    if (v < 0 || t->param_of[v] < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "\"%s\" is not a trainable initializer", name);
    if (t->gpu) TX_TRY(gpu_sync_params((teexec_trainer *)t));
    tx_tensor r;
    TX_TRY(tx_tensor_clone(&t->params[t->param_of[v]].data, &r));
    return to_user_layout(src, &r, out);
}

/* ---- saving ------------------------------------------------------------ */

/* The trained value of initializer `name` (in the original layout), or
 * NULL to keep the loaded one: tx_initializer_replace_fn for
 * tx_model_save_replacing, which packs the rest of the model as loaded. */
static teexec_status *trained_initializer(void *ctx, const char *name, const tx_tensor **out,
                                          tx_tensor *scratch)
{
    const teexec_trainer *t = ctx;
    const tx_param_source *src;
    int32_t v = lowered_value(t, name, &src);
    if (v < 0 || t->param_of[v] < 0) return NULL;
    const tx_tensor *d = &t->params[t->param_of[v]].data;
    if (src) {
        TX_TRY(tx_param_to_original(src, d, scratch));
        d = scratch;
    }
    *out = d;
    return NULL;
}

teexec_status *teexec_trainer_save_model(const teexec_trainer *t, const char *path)
{
    if (!t || !path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "trainer or path is NULL");
    /* data parallel: every rank holds the same parameters; rank 0 writes */
    if (t->dp && t->dp->rank != 0) return NULL;
    /* the trainer is logically const: syncing only refreshes its host copy */
    if (t->gpu) TX_TRY(gpu_sync_params((teexec_trainer *)t));
    return tx_model_save_replacing(t->user_model->file, path, trained_initializer, (void *)t);
}
