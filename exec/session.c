/* session.c - sessions: preparation (kernels, and per input-shape
 * signature the value plan -- types and folding, exec/value_plan.h -- the
 * buffer plan and the fuser plan) and runs; the public session API. A
 * session runs the model's lowered copy (exec/prepare.h): the fuser plan's
 * CHAIN groups through the group executor, every other node by its own
 * kernel (exec/session_groups.h). */
#include "exec/session_cuda.h"
#include "exec/comm.h"
#include "exec/device_mem.h"
#include "exec/session_internal.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "exec/cpu_te_ops.h"
#include "exec/op_gaps.h"
#include "exec/prepare.h"
#include "exec/run_options.h"
#include "exec/session_groups.h"
#include "exec/tensor_internal.h"
#include "base/log.h"
#include "planner/plan_cache.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ----------------------------------------------------------- */

teexec_status *teexec_session_options_create(teexec_session_options **out_options)
{
    if (!out_options) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_options is NULL");
    *out_options = calloc(1, sizeof(**out_options));
    if (!*out_options) return tx_oom();
    (*out_options)->deterministic = tx_env_deterministic();
    return NULL;
}

void teexec_session_options_destroy(teexec_session_options *o)
{
    if (!o) return;
    free(o->recipe);
    for (size_t i = 0; i < o->n_dims; i++) free(o->dim_names[i]);
    free(o->dim_names);
    free(o->dim_values);
    tx_buckets_free(&o->buckets);
    free(o);
}

teexec_status *teexec_session_options_set_dim_multiple(teexec_session_options *o,
                                                       const char *dim_name, int64_t multiple)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    return tx_buckets_set_multiple(&o->buckets, dim_name, multiple);
}

teexec_status *teexec_session_options_set_dim_buckets(teexec_session_options *o,
                                                      const char *dim_name, const int64_t *sizes,
                                                      size_t n_sizes)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    return tx_buckets_set_sizes(&o->buckets, dim_name, sizes, n_sizes);
}

teexec_status *teexec_session_options_set_device(teexec_session_options *o, teexec_device d)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    if (d != TEEXEC_DEVICE_AUTO && d != TEEXEC_DEVICE_CPU && d != TEEXEC_DEVICE_CUDA)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown device %d", (int)d);
    o->device = d;
    return NULL;
}

teexec_status *teexec_session_options_set_threads(teexec_session_options *o, int threads)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    if (threads < 0 || threads > 4096)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "threads must be 0..4096, not %d", threads);
    o->threads = threads;
    return NULL;
}

teexec_status *teexec_session_options_set_dim(teexec_session_options *o, const char *name,
                                              int64_t value)
{
    if (!o || !name) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options or name is NULL");
    if (value < 0)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dim \"%s\" must be >= 0, not %lld", name,
                        (long long)value);
    for (size_t i = 0; i < o->n_dims; i++) {
        if (strcmp(o->dim_names[i], name) == 0) {
            o->dim_values[i] = value;
            return NULL;
        }
    }
    char **nn = realloc(o->dim_names, (o->n_dims + 1) * sizeof(*nn));
    if (!nn) return tx_oom();
    o->dim_names = nn;
    int64_t *nv = realloc(o->dim_values, (o->n_dims + 1) * sizeof(*nv));
    if (!nv) return tx_oom();
    o->dim_values = nv;
    char *copy = strdup(name);
    if (!copy) return tx_oom();
    o->dim_names[o->n_dims] = copy;
    o->dim_values[o->n_dims] = value;
    o->n_dims++;
    return NULL;
}

/* ---- plans ------------------------------------------------------------- */


static void plan_free(const teexec_session *s, tx_plan *p)
{
    if (!p) return;
    tx_value_plan_clear(&p->typed);
    free(p->offset);
    tx_sgroups_free(p);
    if (p->arena) s->be.vt->free(s->be.state, p->arena);
    free(p);
}

/* The user's file, for messages (the model that runs is its lowered copy,
 * loaded from memory). */
static const char *model_file(const teexec_session *s)
{
    return s->user_model->file ? s->user_model->file->path : NULL;
}

static teexec_status *storage_bytes(teexec_dtype dt, const tx_shape *sh, size_t *out)
{
    uint64_t ne;
    TX_TRY(tx_shape_numel(sh, &ne));
    int ok;
    uint64_t b = tx_dtype_storage_bytes(dt, ne, &ok);
    if (!ok || b > SIZE_MAX / 2)
        return tx_error(TEEXEC_ERR_LIMIT, "a %s tensor of %llu elements is too large",
                        teexec_dtype_name(dt), (unsigned long long)ne);
    *out = (size_t)b;
    return NULL;
}

typedef struct live_block {
    size_t off, size;
    int32_t value;
} live_block;

/* First-fit placement of every planned intermediate in one arena. */
static teexec_status *plan_buffers(teexec_session *s, tx_plan *p)
{
    const tx_ir_graph *g = s->g;
    size_t nv = g->n_values;
    p->offset = malloc((nv ? nv : 1) * sizeof(size_t));
    if (!p->offset) return tx_oom();
    for (size_t v = 0; v < nv; v++) p->offset[v] = SIZE_MAX;
    live_block *live = malloc((nv ? nv : 1) * sizeof(*live));
    if (!live) return tx_oom();
    size_t n_live = 0, top = 0;
    teexec_status *st = NULL;
    for (size_t i = 0; i < g->n_nodes && !st; i++) {
        if (p->typed.skip[i]) continue;
        const tx_ir_node *n = &g->nodes[i];
        for (size_t j = 0; j < n->n_outputs && !st; j++) {
            int32_t o = n->outputs[j];
            if (o < 0) continue;
            const tx_ir_value *val = &g->values[o];
            const tx_infer_value *iv = &p->typed.vals[o];
            if (!iv->shape_known || (val->flags & TX_IR_VALUE_GRAPH_OUTPUT)) continue;
            size_t bytes = 0;
            st = storage_bytes(iv->dtype, &iv->shape, &bytes);
            if (st) break;
            bytes = (bytes + 63) & ~(size_t)63;
            if (bytes == 0) bytes = 64;
            /* lowest gap between live blocks (sorted by offset) that fits */
            size_t off = 0, k = 0;
            for (; k < n_live; k++) {
                if (live[k].off >= off + bytes) break;
                if (live[k].off + live[k].size > off) off = live[k].off + live[k].size;
            }
            memmove(&live[k + 1], &live[k], (n_live - k) * sizeof(*live));
            live[k] = (live_block){off, bytes, o};
            n_live++;
            p->offset[o] = off;
            if (off + bytes > top) top = off + bytes;
        }
        /* release what dies here: values whose last reader is this node, and
         * outputs nobody reads */
        size_t w = 0;
        for (size_t k = 0; k < n_live; k++) {
            int32_t v = live[k].value;
            int64_t last = s->last_use[v];
            if (last <= (int64_t)i) continue;
            live[w++] = live[k];
        }
        n_live = w;
    }
    free(live);
    if (st) return st;
    p->arena_bytes = top;
    /* a CUDA session's plans (its executors run the model) need the
     * offsets' extent, not host memory for the activations */
    if (top && !s->plan_only) TX_TRY(s->be.vt->alloc(s->be.state, top, &p->arena));
    return NULL;
}

static teexec_status *make_plan(teexec_session *s, const teexec_dtype *dts, const tx_shape *shapes,
                                tx_plan **out)
{
    *out = NULL;
    tx_plan *p = calloc(1, sizeof(*p));
    if (!p) return tx_oom();
    /* types and folded values (exec/value_plan.h), then where the rest
     * lives and what runs: the fuser plan for these shapes (a CUDA
     * session's executors run, not this plan) */
    teexec_status *st = tx_value_plan_build(s->vp, dts, shapes, &p->typed);
    if (!st) st = plan_buffers(s, p);
    if (!st && !s->plan_only) st = tx_sgroups_build(s, p);
    if (st) {
        plan_free(s, p);
        return tx_status_with_file(st, model_file(s));
    }
    *out = p;
    return NULL;
}

/* ---- creation ---------------------------------------------------------- */

/* Resolves every node to a kernel; every node the backend cannot run is
 * listed in one status (exec/op_gaps.h). */
static teexec_status *resolve_kernels(teexec_session *s)
{
    const tx_ir_graph *g = s->g;
    s->fns = calloc(g->n_nodes ? g->n_nodes : 1, sizeof(*s->fns));
    if (!s->fns) return tx_oom();
    tx_op_gaps gaps = {0};
    teexec_status *fatal = NULL;
    for (size_t i = 0; i < g->n_nodes && !fatal; i++) {
        const tx_ir_node *n = &g->nodes[i];
        teexec_status *st = NULL;
        if (n->function >= 0)
            st = tx_error(TEEXEC_ERR_UNSUPPORTED, "unsupported op %s (domain \"%s\", opset %lld)",
                          n->op_type, n->domain, (long long)n->opset);
        else
            st = s->be.vt->prepare_node(s->be.state, n, &s->fns[i]);
        if (!st) continue;
        if (teexec_status_code(st) != TEEXEC_ERR_UNSUPPORTED) fatal = st;
        else {
            fatal = tx_op_gaps_add(&gaps, teexec_status_message(st), n->label);
            teexec_status_destroy(st);
        }
    }
    teexec_status *st = fatal ? fatal : tx_op_gaps_status(&gaps, TEEXEC_ERR_UNSUPPORTED, model_file(s));
    tx_op_gaps_free(&gaps);
    return st;
}

/* The planner (exec/value_plan.h: the inputs in the user's model's order,
 * the decoded initializers), each value's last reader and the run's
 * per-node scratch. */
static teexec_status *index_values(teexec_session *s)
{
    const tx_ir_graph *g = s->g;
    TX_TRY(tx_value_planner_create(s->model, s->user_model, 0, &s->vp));
    s->in_vals = s->vp->in_vals;
    s->n_in = s->vp->n_in;
    s->last_use = calloc(g->n_values ? g->n_values : 1, sizeof(int64_t));
    if (!s->last_use) return tx_oom();
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].n_inputs > s->max_in) s->max_in = g->nodes[i].n_inputs;
        if (g->nodes[i].n_outputs > s->max_out) s->max_out = g->nodes[i].n_outputs;
    }
    size_t mi = s->max_in + 1, mo = s->max_out + 1;
    s->sc_pins = calloc(mi, sizeof(*s->sc_pins));
    s->sc_in_vals = calloc(mi, sizeof(*s->sc_in_vals));
    s->sc_ins = calloc(mi, sizeof(*s->sc_ins));
    s->sc_outs = calloc(mo, sizeof(*s->sc_outs));
    s->sc_out_vals = calloc(mo, sizeof(*s->sc_out_vals));
    if (!s->sc_pins || !s->sc_in_vals || !s->sc_ins || !s->sc_outs || !s->sc_out_vals)
        return tx_oom();
    for (size_t v = 0; v < g->n_values; v++) {
        const tx_ir_value *val = &g->values[v];
        int64_t last = -1;
        for (size_t k = 0; k < val->n_consumers; k++)
            if (val->consumers[k].node > last) last = val->consumers[k].node;
        if (val->flags & TX_IR_VALUE_GRAPH_OUTPUT) last = (int64_t)g->n_nodes;
        s->last_use[v] = last;
    }
    return NULL;
}

static int64_t option_dim(const teexec_session_options *o, const char *name)
{
    if (o && name)
        for (size_t i = 0; i < o->n_dims; i++)
            if (strcmp(o->dim_names[i], name) == 0) return o->dim_values[i];
    return 1;
}

/* ---- the plan cache (planner/plan_cache.h) -------------------------------- */

/* Entry builder: the tx_plan for the input signature the key holds. */
static teexec_status *build_entry(void *ctx, const tx_ir_graph *g, const tx_plan_request *req,
                                  tx_fuser_plan **plan, void **payload)
{
    teexec_session *s = ctx;
    (void)g;
    *plan = NULL;
    *payload = NULL;
    teexec_dtype *dts = calloc(s->n_in ? s->n_in : 1, sizeof(*dts));
    tx_shape *shapes = calloc(s->n_in ? s->n_in : 1, sizeof(*shapes));
    teexec_status *st = (!dts || !shapes) ? tx_oom() : NULL;
    for (size_t i = 0; !st && i < s->n_in; i++) {
        const tx_infer_value *iv = &req->vals[s->in_vals[i]];
        dts[i] = iv->dtype;
        shapes[i] = iv->shape;
    }
    tx_plan *p = NULL;
    if (!st) st = make_plan(s, dts, shapes, &p);
    free(dts);
    free(shapes);
    TX_TRY(st);
    /* the entry's plan is the fuser plan, owned through the tx_plan (NULL
     * in a CUDA session: the payload is the entry) */
    *plan = p->fplan;
    *payload = p;
    return NULL;
}

static void free_entry(void *ctx, tx_fuser_plan *plan, void *payload)
{
    (void)plan; /* p->fplan, released with p */
    plan_free(ctx, payload);
}

void tx_session_key(teexec_session *s, const teexec_dtype *dts, const tx_shape *shapes,
                    tx_plan_request *req)
{
    for (size_t i = 0; dts && shapes && i < s->n_in; i++) {
        tx_infer_value *iv = &s->key_vals[s->in_vals[i]];
        iv->dtype = dts[i];
        iv->shape = shapes[i];
        iv->shape_known = true;
    }
    memset(req, 0, sizeof(*req));
    req->recipe = s->recipe;
    req->device = s->caps;
    req->training = false;
    req->deterministic = s->deterministic;
    req->vals = s->key_vals;
    req->n_vals = s->g->n_values;
}

uint64_t tx_session_plans_built(const teexec_session *s)
{
    if (!s) return 0;
    return tx_plan_cache_builds(s->cuda ? s->gpu : s->plans);
}

static teexec_status *plan_lookup(teexec_session *s, const tx_plan_request *req, tx_plan **out)
{
    void *payload = NULL;
    *out = NULL;
    TX_TRY(tx_plan_cache_lookup(s->plans, s->g, req, NULL, &payload, NULL));
    *out = payload;
    return NULL;
}

/* The plan for the declared input shapes, symbolic dims from the options. */
static teexec_status *initial_plan(teexec_session *s, const teexec_session_options *o)
{
    teexec_status *st0 = NULL;
    teexec_dtype *dts = calloc(s->n_in ? s->n_in : 1, sizeof(*dts));
    tx_shape *shapes = calloc(s->n_in ? s->n_in : 1, sizeof(*shapes));
    if (!shapes || !dts) {
        free(dts);
        free(shapes);
        return tx_oom();
    }
    for (size_t i = 0; i < s->n_in; i++) {
        const tx_ir_value *val = &s->g->values[s->in_vals[i]];
        if (val->rank < 0 || val->dtype == TEEXEC_DTYPE_UNDEFINED) {
            /* nothing declared to plan for: the first run plans */
            free(dts);
            free(shapes);
            return NULL;
        }
        dts[i] = val->dtype;
        shapes[i].rank = val->rank;
        for (int32_t d = 0; d < val->rank && !st0; d++) {
            shapes[i].dims[d] = val->dims[d] >= 0 ? val->dims[d]
                                                  : option_dim(o, val->dim_params[d]);
            /* the declared size's bucket is what runs */
            if (val->dims[d] < 0)
                st0 = tx_buckets_round(&s->buckets, val->dim_params[d], shapes[i].dims[d],
                                       &shapes[i].dims[d]);
        }
    }
    if (st0) {
        free(dts);
        free(shapes);
        return st0;
    }
    tx_plan_request req;
    tx_session_key(s, dts, shapes, &req);
    tx_plan *p;
    teexec_status *st = plan_lookup(s, &req, &p);
    free(dts);
    if (st) {
        free(shapes);
        return st;
    }
    s->declared = shapes; /* the CUDA executor's first signature */
    return NULL;
}

teexec_status *teexec_session_create(const teexec_model *model,
                                     const teexec_session_options *options,
                                     teexec_session **out_session)
{
    if (!out_session) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_session is NULL");
    *out_session = NULL;
    if (!model) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model is NULL");
    teexec_device dev = options ? options->device : TEEXEC_DEVICE_AUTO;
    bool use_cuda = false;
    TX_TRY(tx_resolve_device(dev, options ? options->recipe : NULL,
                             options ? options->dtype : TEEXEC_DTYPE_UNDEFINED, true, &use_cuda));
    const teexec_model *run = NULL;
    TX_TRY(tx_status_with_file(tx_model_runnable(model, &run, NULL),
                               model->file ? model->file->path : NULL));
    teexec_session *s = calloc(1, sizeof(*s));
    if (!s) return tx_oom();
    teexec_status *st = NULL;
    s->user_model = model;
    s->model = run;
    s->plan_only = use_cuda;
    s->g = run->ir->graph;
    s->comm = options ? options->comm : NULL;
    st = tx_comm_check_session(s->comm, use_cuda);
    if (!st && use_cuda) st = tx_comm_use_device(s->comm); /* an NCCL rank's GPU */
    if (st) {
        free(s);
        return st;
    }
    s->deterministic = options ? options->deterministic : tx_env_deterministic();
    st = tx_recipe_parse(options && options->recipe ? options->recipe : "none", &s->recipe);
    if (st) {
        free(s);
        return st;
    }
    s->be.vt = &tx_backend_cpu;
    tx_backend_config cfg = {.threads = options ? options->threads : 0};
    st = s->be.vt->create(&cfg, &s->be.state);
    if (st) {
        free(s);
        return st;
    }
    if (!st) st = resolve_kernels(s);
    if (!st) st = index_values(s);
    if (!st) st = tx_session_state_init(&s->state, s->g, s->in_vals, s->n_in);
    if (!st && !use_cuda) st = tx_session_state_alloc_host(&s->state, s->g, s->in_vals);
    if (!st && options) st = tx_buckets_copy(&options->buckets, &s->buckets);
    if (!st) st = tx_device_caps_parse("cpu", &s->caps);
    if (!st && !(s->key_vals = calloc(s->g->n_values ? s->g->n_values : 1, sizeof(*s->key_vals))))
        st = tx_oom();
    if (!st) st = tx_plan_cache_create_entries(TX_MAX_PLANS, build_entry, free_entry, s, &s->plans);
    if (!st) st = initial_plan(s, options);
    if (!st && use_cuda) st = tx_session_cuda_init(s, options);
    if (st) {
        teexec_session_destroy(s);
        return st;
    }
    *out_session = s;
    return NULL;
}

void teexec_session_destroy(teexec_session *s)
{
    if (!s) return;
    tx_session_cuda_free(s);
    tx_session_state_free(&s->state);
    tx_plan_cache_free(s->plans);
    free(s->key_vals);
    free(s->declared);
    tx_buckets_free(&s->buckets);
    tx_value_planner_destroy(s->vp);
    free(s->fns);
    free(s->last_use);
    free(s->sc_pins);
    free(s->sc_in_vals);
    free(s->sc_ins);
    free(s->sc_outs);
    free(s->sc_out_vals);
    free(s->trace);
    tx_run_profile_free(&s->run_prof);
    tx_run_profile_free(&s->run_prof_work);
    tx_block_cache_free(&s->blocks);
    if (s->has_delayed) tx_delayed_free(&s->delayed);
    if (s->be.vt && s->be.state) s->be.vt->destroy(s->be.state);
    free(s);
}

const char *teexec_session_device_name(const teexec_session *s)
{
    if (s && s->cuda) return "cuda";
    return s && s->be.vt ? s->be.vt->name : "none";
}

teexec_status *teexec_session_run_profile(const teexec_session *s, char **out_text)
{
    if (!out_text) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_text is NULL");
    *out_text = NULL;
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");
    if (!s->has_run_prof)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "no run of this session has asked for a profile (run options "
                        "set_profile) and succeeded");
    return tx_run_profile_text(&s->run_prof, teexec_session_device_name(s),
                               s->cuda ? "event time of each kernel; the run was launched "
                                         "kernel by kernel, not replayed as its CUDA graph"
                                       : "wall time of each fuser group and standard node",
                               out_text);
}

size_t teexec_session_plan_count(const teexec_session *s)
{
    if (s && s->cuda) return tx_session_cuda_plan_count(s);
    return s ? tx_plan_cache_size(s->plans) : 0;
}

/* ---- running ----------------------------------------------------------- */

/* Checks the given inputs against the model and binds symbolic dims; fills
 * bound[i] with the tensor for session input i and in_dev[i] with the CUDA
 * device its data is on (-1: host memory; a CPU session takes host
 * tensors only). */
static teexec_status *bind_inputs(teexec_session *s, size_t n_inputs, const char *const *names,
                                  const teexec_tensor *const *tensors, const tx_tensor **bound,
                                  int *in_dev)
{
    const teexec_model *m = s->user_model;
    for (size_t i = 0; i < s->n_in; i++) bound[i] = NULL;
    if (n_inputs && (!names || !tensors))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input_names or input_tensors is NULL");
    for (size_t k = 0; k < n_inputs; k++) {
        if (!names[k] || !tensors[k])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input %zu has a NULL name or tensor", k);
        size_t i = 0;
        while (i < s->n_in && strcmp(m->inputs[i].name, names[k]) != 0) i++;
        if (i == s->n_in) {
            /* list the valid names: the caller's most likely mistake */
            char list[512];
            size_t len = 0;
            list[0] = 0;
            for (size_t j = 0; j < s->n_in && len + 4 < sizeof(list); j++)
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s\"%s\"", j ? ", " : "",
                                        m->inputs[j].name);
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "\"%s\" is not an input of the model (inputs: %s)", names[k],
                            s->n_in ? list : "none");
        }
        if (bound[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input \"%s\" is given twice", names[k]);
        if (s->state.is_state[i])
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "input \"%s\" is a KV cache the session keeps between runs "
                            "(DotProductAttention's cache mode); leave it out and feed "
                            "cache_len instead", names[k]);
        if (tensors[k]->on_device && !s->cuda)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "input \"%s\" is a CUDA device tensor; a CPU session reads host "
                            "tensors (teexec_tensor_to_host copies one)", names[k]);
        bound[i] = &tensors[k]->t;
        in_dev[i] = tensors[k]->on_device ? tensors[k]->device : -1;
    }
    for (size_t i = 0; i < s->n_in; i++) {
        if (!s->state.is_state[i]) continue;
        bound[i] = &s->state.bound[i];
        in_dev[i] = s->state.dev ? s->state.device : -1;
    }
    for (size_t i = 0; i < s->n_in; i++) {
        const tx_ir_value *val = &s->g->values[s->in_vals[i]];
        const tx_tensor *t = bound[i];
        if (!t)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "input \"%s\" is missing", val->name);
        if (val->dtype != TEEXEC_DTYPE_UNDEFINED && t->dtype != val->dtype)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "input \"%s\" is %s but the model declares %s", val->name,
                            teexec_dtype_name(t->dtype), teexec_dtype_name(val->dtype));
        if (val->rank >= 0 && t->rank != val->rank)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "input \"%s\" has rank %d but the model declares rank %d", val->name,
                            (int)t->rank, (int)val->rank);
        for (int32_t d = 0; val->rank >= 0 && d < val->rank; d++) {
            if (val->dims[d] >= 0 && t->dims[d] != val->dims[d])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "input \"%s\" has %lld in dim %d but the model declares %lld",
                                val->name, (long long)t->dims[d], (int)d,
                                (long long)val->dims[d]);
            if (val->dims[d] >= 0 || !val->dim_params[d]) continue;
            /* the same symbolic name must bind to one value across inputs */
            for (size_t j = 0; j < i; j++) {
                const tx_ir_value *w = &s->g->values[s->in_vals[j]];
                for (int32_t e = 0; e < w->rank; e++)
                    if (w->dims[e] < 0 && w->dim_params[e] &&
                        strcmp(w->dim_params[e], val->dim_params[d]) == 0 &&
                        bound[j]->dims[e] != t->dims[d])
                        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                        "dim \"%s\" is %lld in input \"%s\" but %lld in input "
                                        "\"%s\"", val->dim_params[d], (long long)bound[j]->dims[e],
                                        w->name, (long long)t->dims[d], val->name);
            }
        }
    }
    return NULL;
}

/* A bucketed dim of this run: the size the caller gave and the one that
 * runs. */
typedef struct bucket_bind {
    const char *name;
    int64_t given, runs;
} bucket_bind;

/* Shape buckets (exec/shape_buckets.h): every input dim declared with a
 * bucketed symbolic name is padded up to its bucket (a new host tensor in
 * padded[i], which bound[i] then points at); bb gets each such dim that
 * changed (at most s->buckets.n). */
static teexec_status *pad_inputs(teexec_session *s, const tx_tensor **bound, const int *in_dev,
                                 tx_tensor *padded, bucket_bind *bb, size_t *n_bb)
{
    *n_bb = 0;
    for (size_t i = 0; i < s->n_in; i++) {
        const tx_ir_value *val = &s->g->values[s->in_vals[i]];
        for (int32_t d = 0; d < val->rank && d < bound[i]->rank; d++) {
            if (val->dims[d] >= 0 || !val->dim_params[d]) continue;
            int64_t v = bound[i]->dims[d], r = v;
            TX_TRY(tx_buckets_round(&s->buckets, val->dim_params[d], v, &r));
            if (r == v) continue;
            if (in_dev[i] >= 0)
                return tx_error(TEEXEC_ERR_UNSUPPORTED,
                                "input \"%s\": dim \"%s\" is %lld and its bucket %lld; shape "
                                "buckets pad host tensors only (give a device tensor at the "
                                "bucket's size)",
                                val->name, val->dim_params[d], (long long)v, (long long)r);
            tx_tensor t;
            TX_TRY(tx_tensor_pad_dim(bound[i], d, r, &t));
            tx_tensor_release(&padded[i]);
            padded[i] = t;
            bound[i] = &padded[i];
            size_t k = 0;
            while (k < *n_bb && strcmp(bb[k].name, val->dim_params[d])) k++;
            if (k == *n_bb && k < s->buckets.n) bb[(*n_bb)++] = (bucket_bind){val->dim_params[d], v, r};
        }
    }
    return NULL;
}

/* Outputs whose declared dims name a padded dim go back to the given size. */
static teexec_status *cut_outputs(teexec_session *s, const bucket_bind *bb, size_t n_bb,
                                  size_t n_outputs, const int32_t *want, teexec_tensor **out)
{
    for (size_t j = 0; j < n_outputs && n_bb; j++) {
        if (!out[j]) continue; /* written into a bound device tensor */
        const tx_ir_value *val = &s->g->values[want[j]];
        for (int32_t d = 0; d < val->rank && d < out[j]->t.rank; d++) {
            if (val->dims[d] >= 0 || !val->dim_params[d]) continue;
            for (size_t k = 0; k < n_bb; k++) {
                if (strcmp(bb[k].name, val->dim_params[d]) || out[j]->t.dims[d] != bb[k].runs)
                    continue;
                tx_tensor t;
                TX_TRY(tx_tensor_cut_dim(&out[j]->t, d, bb[k].given, &t));
                tx_tensor_release(&out[j]->t);
                out[j]->t = t;
            }
        }
    }
    return NULL;
}

static teexec_status *find_plan(teexec_session *s, const tx_tensor **bound, tx_plan **out)
{
    for (size_t i = 0; i < s->n_in; i++) {
        tx_infer_value *iv = &s->key_vals[s->in_vals[i]];
        iv->dtype = bound[i]->dtype;
        iv->shape = tx_shape_of(bound[i]);
        iv->shape_known = true;
    }
    tx_plan_request req;
    tx_session_key(s, NULL, NULL, &req);
    return plan_lookup(s, &req, out);
}

/* Infers a node's outputs at run time, when every input value is known. */
static teexec_status *infer_now(teexec_session *s, const tx_ir_node *n, const tx_tensor **ins,
                                tx_infer_value *outs)
{
    tx_infer_value *iv = s->sc_in_vals;
    const tx_infer_value **pins = s->sc_pins;
    for (size_t k = 0; k < n->n_inputs; k++) {
        pins[k] = NULL;
        if (!ins[k]) continue;
        memset(&iv[k], 0, sizeof(iv[k]));
        iv[k].dtype = ins[k]->dtype;
        iv[k].shape = tx_shape_of(ins[k]);
        iv[k].shape_known = true;
        iv[k].value = ins[k];
        pins[k] = &iv[k];
    }
    memset(outs, 0, n->n_outputs * sizeof(*outs));
    return tx_exec_infer_node(n, s->model->file, pins, outs);
}

/* The cancellation of a CPU run before node i: names the node and how far
 * the run got, so a caller sees where it stopped. */
static teexec_status *cancelled_at(const tx_ir_graph *g, size_t i)
{
    const tx_ir_node *n = &g->nodes[i];
    char where[256];
    snprintf(where, sizeof where, "before node \"%s\" (%s, node %zu of %zu)", n->label,
             n->op_type, i + 1, g->n_nodes);
    return tx_run_cancelled_status(where, n->label);
}

/* One row of a CPU run's own profile (run options set_profile): a fuser
 * group by its first node, or a standard node, with its wall time. */
static teexec_status *profile_step(teexec_session *s, const tx_plan *p, size_t i, bool group,
                                   double ms)
{
    const tx_ir_node *n = &s->g->nodes[i];
    int32_t gid = p->fplan && p->fplan->group_of_node ? p->fplan->group_of_node[i] : -1;
    char name[96];
    if (group && gid >= 0)
        snprintf(name, sizeof name, "fuser group of %d ops (%.60s..)",
                 (int)p->fplan->groups[gid].n_nodes, n->label);
    else
        snprintf(name, sizeof name, "%s(%.70s)", n->op_type, n->label);
    return tx_run_profile_add(&s->run_prof_work, name, gid, false, ms);
}

static teexec_status *execute(teexec_session *s, const teexec_run_options *ro, tx_plan *p,
                              const tx_tensor **bound, const tx_tensor **cur, tx_tensor *store)
{
    if (s->plan_only)
        return tx_error(TEEXEC_ERR_INTERNAL, "a CUDA session's CPU plan has no memory to run in");
    const tx_ir_graph *g = s->g;
    for (size_t v = 0; v < g->n_values; v++) cur[v] = p->typed.vals[v].value;
    for (size_t i = 0; i < s->n_in; i++) cur[s->in_vals[i]] = bound[i];
    const tx_tensor **ins = s->sc_ins;
    tx_tensor **outs = s->sc_outs;
    tx_infer_value *dyn = s->sc_out_vals;
    s->n_trace = 0;
    s->last_fplan = p->fplan;
    const bool prof = tx_run_profiled(ro);
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (p->typed.skip[i]) continue;
        int role = tx_sgroups_role(p, i);
        if (role < 0) continue;
        /* one atomic load per node or fuser group: the cancel point of a
         * CPU run */
        if (tx_run_cancelled(ro)) return cancelled_at(g, i);
        const double t0 = prof ? tx_run_profile_now_ms() : 0.0;
        if (role > 0) {
            TX_TRY(tx_sgroups_run(s, p, i, cur, store));
            if (prof) TX_TRY(profile_step(s, p, i, true, tx_run_profile_now_ms() - t0));
            continue;
        }
        TX_TRY(tx_sgroups_trace_node(s, p, i));
        const tx_ir_node *n = &g->nodes[i];
        bool need_infer = false;
        for (size_t k = 0; k < n->n_inputs; k++) {
            int32_t v = n->inputs[k];
            ins[k] = v >= 0 ? cur[v] : NULL;
            if (v >= 0 && !ins[k])
                return tx_error(TEEXEC_ERR_INTERNAL, "value \"%s\" was not computed",
                                g->values[v].name);
        }
        for (size_t j = 0; j < n->n_outputs; j++)
            if (n->outputs[j] >= 0 && !p->typed.vals[n->outputs[j]].shape_known) need_infer = true;
        if (need_infer) TX_TRY(infer_now(s, n, ins, dyn));
        teexec_status *st = NULL;
        for (size_t j = 0; j < n->n_outputs; j++) {
            outs[j] = NULL;
            int32_t o = n->outputs[j];
            if (o < 0 || st) continue;
            const tx_infer_value *iv = need_infer ? &dyn[j] : &p->typed.vals[o];
            tx_tensor *t = &store[o];
            if (p->offset[o] != SIZE_MAX && !need_infer) {
                st = tx_tensor_wrap(t, iv->dtype, iv->shape.rank, iv->shape.dims,
                                    (char *)p->arena + p->offset[o]);
            } else {
                st = tx_tensor_alloc(t, iv->dtype, iv->shape.rank, iv->shape.dims);
            }
            outs[j] = t;
            cur[o] = t;
        }
        if (need_infer)
            for (size_t j = 0; j < n->n_outputs; j++) tx_infer_value_clear(&dyn[j]);
        if (st) return st;
        tx_op_call call = {.node = n, .file = s->model->file, .n_in = n->n_inputs, .in = ins,
                           .n_out = n->n_outputs, .out = outs};
        TX_TRY(s->be.vt->run_node(s->be.state, s->fns[i], &call));
        if (prof) TX_TRY(profile_step(s, p, i, false, tx_run_profile_now_ms() - t0));
    }
    tx_sgroups_after_run(s);
    s->n_runs++;
    return NULL;
}

static teexec_status *session_run(teexec_session *s, const teexec_run_options *ro,
                                  size_t n_inputs, const char *const *input_names,
                                  const teexec_tensor *const *input_tensors, size_t n_outputs,
                                  const char *const *output_names, teexec_tensor **out_tensors,
                                  teexec_tensor *const *into);

teexec_status *teexec_session_run(teexec_session *s, size_t n_inputs,
                                  const char *const *input_names,
                                  const teexec_tensor *const *input_tensors, size_t n_outputs,
                                  const char *const *output_names, teexec_tensor **out_tensors)
{
    return teexec_session_run_with(s, NULL, n_inputs, input_names, input_tensors, n_outputs,
                                   output_names, out_tensors);
}

/* A run as the public entry points make it: the run options' tag around
 * it, the session's communicator bound for the te.ops collectives (and
 * its GPU current); into: NULL, or the bound outputs (run_into). `early`
 * (the caller's own argument check) fails the run before it starts. */
static teexec_status *run_entry(teexec_session *s, const teexec_run_options *ro,
                                teexec_status *early, size_t n_inputs,
                                const char *const *input_names,
                                const teexec_tensor *const *input_tensors, size_t n_outputs,
                                const char *const *output_names, teexec_tensor **out_tensors,
                                teexec_tensor *const *into)
{
    const char *prev = tx_run_begin(ro);
    teexec_comm *prev_comm = tx_comm_bind(s ? s->comm : NULL);
    /* a CPU run's freed large buffers serve its next run (no fresh pages) */
    const bool cache = s && !s->cuda;
    tx_block_cache *prev_cache = cache ? tx_block_cache_begin_run(&s->blocks) : NULL;
    teexec_status *st = early;
    if (!st && s && s->cuda) st = tx_comm_use_device(s->comm);
    if (!st)
        st = session_run(s, ro, n_inputs, input_names, input_tensors, n_outputs, output_names,
                         out_tensors, into);
    if (cache) tx_block_cache_end_run(prev_cache);
    tx_comm_bind(prev_comm);
    return tx_run_end(ro, prev, st);
}

teexec_status *teexec_session_run_with(teexec_session *s, const teexec_run_options *ro,
                                       size_t n_inputs, const char *const *input_names,
                                       const teexec_tensor *const *input_tensors,
                                       size_t n_outputs, const char *const *output_names,
                                       teexec_tensor **out_tensors)
{
    return run_entry(s, ro, NULL, n_inputs, input_names, input_tensors, n_outputs, output_names,
                     out_tensors, NULL);
}

teexec_status *teexec_session_run_into(teexec_session *s, const teexec_run_options *ro,
                                       size_t n_inputs, const char *const *input_names,
                                       const teexec_tensor *const *input_tensors,
                                       size_t n_outputs, const char *const *output_names,
                                       teexec_tensor **outputs)
{
    teexec_status *st = NULL;
    if (n_outputs && !outputs) st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "outputs is NULL");
    /* into: the bound entries (NULL: a new tensor is asked for); made: what
     * the run hands back, new tensors for the unbound outputs and the host
     * results copied into the bound host tensors */
    teexec_tensor **into = st ? NULL : calloc(n_outputs ? n_outputs : 1, sizeof(*into));
    teexec_tensor **made = st ? NULL : calloc(n_outputs ? n_outputs : 1, sizeof(*made));
    if (!st && (!into || !made)) st = tx_oom();
    for (size_t j = 0; !st && j < n_outputs; j++) into[j] = outputs[j];
    st = run_entry(s, ro, st, n_inputs, input_names, input_tensors, n_outputs, output_names, made,
                   into);
    for (size_t j = 0; !st && j < n_outputs; j++)
        if (!into[j]) {
            outputs[j] = made[j];
            made[j] = NULL;
        }
    for (size_t j = 0; made && j < n_outputs; j++) teexec_tensor_destroy(made[j]);
    free(made);
    free(into);
    return st;
}

/* Bound outputs (teexec_session_run_into): a non-NULL into[j] is the
 * caller's tensor of output want[j]'s dtype and dims, host memory or (a
 * CUDA session) its device. Checked before the run and again against what
 * it made (dims known only then) before any is written. */
static teexec_status *check_bound(const teexec_session *s, size_t n_outputs, const int32_t *want,
                                  teexec_tensor *const *into)
{
    for (size_t j = 0; j < n_outputs; j++) {
        const char *name = s->g->values[want[j]].name;
        for (size_t k = 0; k < j; k++) {
            if (!into[j] && !into[k]) continue;
            if (want[k] == want[j])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "output \"%s\" is asked for twice and bound; ask for it once",
                                name);
            if (into[k] == into[j])
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                "outputs \"%s\" and \"%s\" are bound to the same tensor",
                                s->g->values[want[k]].name, name);
        }
        if (into[j] && into[j]->on_device && !s->cuda)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "output \"%s\" is bound to a device tensor; this session runs on "
                            "the CPU and writes host tensors only", name);
    }
    return NULL;
}

/* Copies the results the run handed back for bound outputs (made[j]; NULL
 * where the executor wrote into[j] itself) into them, after checking every
 * one. made[j] is a device tensor under device outputs: then copied down. */
static teexec_status *fill_bound(const teexec_session *s, size_t n_outputs, const int32_t *want,
                                 teexec_tensor *const *made, teexec_tensor *const *into)
{
    for (size_t j = 0; j < n_outputs; j++) {
        if (!into[j] || !made[j]) continue;
        const tx_tensor *a = &made[j]->t, *b = &into[j]->t;
        const char *name = s->g->values[want[j]].name;
        if (a->dtype != b->dtype)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "output \"%s\" is %s; its bound tensor "
                            "is %s", name, teexec_dtype_name(a->dtype), teexec_dtype_name(b->dtype));
        bool same = a->rank == b->rank;
        for (int32_t d = 0; same && d < a->rank; d++) same = a->dims[d] == b->dims[d];
        if (!same) {
            char sa[96], sb[96];
            tx_shape sha = tx_shape_of(a), shb = tx_shape_of(b);
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "output \"%s\" has shape %s; its bound tensor is %s", name,
                            tx_shape_str(&sha, sa, sizeof sa), tx_shape_str(&shb, sb, sizeof sb));
        }
        /* the executor writes a bound device tensor itself unless the run's
         * shape was a bucket's, cut back on the host */
        if (into[j]->on_device)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "output \"%s\" ran padded to a shape bucket; the padding is cut on "
                            "the host only, so bind a host tensor (or run at the bucket's size)",
                            name);
    }
    for (size_t j = 0; j < n_outputs; j++) {
        if (!into[j] || !made[j] || !made[j]->t.nbytes) continue;
        if (made[j]->on_device)
            TX_TRY(tx_device_to_host(into[j]->t.data, made[j]->t.data, made[j]->t.nbytes));
        else memcpy(into[j]->t.data, made[j]->t.data, made[j]->t.nbytes);
    }
    return NULL;
}

static teexec_status *session_run(teexec_session *s, const teexec_run_options *ro,
                                  size_t n_inputs, const char *const *input_names,
                                  const teexec_tensor *const *input_tensors, size_t n_outputs,
                                  const char *const *output_names, teexec_tensor **out_tensors,
                                  teexec_tensor *const *into)
{
    if (out_tensors)
        for (size_t j = 0; j < n_outputs; j++) out_tensors[j] = NULL;
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");
    /* a run cancelled before it starts does no work at all */
    if (tx_run_cancelled(ro)) return tx_run_cancelled_status("before the run started", NULL);
    if (n_outputs && !out_tensors)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensors is NULL");
    const tx_ir_graph *g = s->g;
    if (!output_names && n_outputs != g->n_outputs)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "n_outputs is %zu but the model has %zu outputs", n_outputs, g->n_outputs);
    /* resolve the requested outputs first: a typo fails before any work */
    int32_t *want = calloc(n_outputs ? n_outputs : 1, sizeof(int32_t));
    if (!want) return tx_oom();
    for (size_t j = 0; j < n_outputs; j++) {
        if (!output_names) {
            want[j] = g->outputs[j];
            continue;
        }
        want[j] = -1;
        for (size_t k = 0; output_names[j] && k < g->n_outputs; k++)
            if (strcmp(g->values[g->outputs[k]].name, output_names[j]) == 0) want[j] = g->outputs[k];
        if (want[j] < 0) {
            teexec_status *st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                                         "\"%s\" is not an output of the model",
                                         output_names[j] ? output_names[j] : "(null)");
            free(want);
            return st;
        }
    }
    const tx_tensor **bound = calloc(s->n_in ? s->n_in : 1, sizeof(*bound));
    int *in_dev = calloc(s->n_in ? s->n_in : 1, sizeof(*in_dev));
    const tx_tensor **cur = calloc(g->n_values ? g->n_values : 1, sizeof(*cur));
    tx_tensor *store = calloc(g->n_values ? g->n_values : 1, sizeof(*store));
    teexec_status *st = (!bound || !in_dev || !cur || !store) ? tx_oom() : NULL;
    if (!st && into) st = check_bound(s, n_outputs, want, into);
    if (!st && !s->cuda && tx_run_device_outputs(ro))
        st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                      "device outputs (run options) need a CUDA session; this one runs on the CPU");
    /* a CUDA session called without inputs reruns on the previous ones,
     * which are still on the device */
    bool reuse = s->cuda && n_inputs == 0 && s->n_in > 0;
    if (!st && !reuse) st = bind_inputs(s, n_inputs, input_names, input_tensors, bound, in_dev);
    /* shape buckets: padded inputs, outputs cut back after the run */
    tx_tensor *padded = NULL;
    bucket_bind *bb = NULL;
    size_t n_bb = 0;
    if (!st && !reuse && s->buckets.n) {
        padded = calloc(s->n_in ? s->n_in : 1, sizeof(*padded));
        bb = calloc(s->buckets.n, sizeof(*bb));
        if (!padded || !bb) st = tx_oom();
        if (!st) st = pad_inputs(s, bound, in_dev, padded, bb, &n_bb);
        if (!st && n_bb && tx_run_device_outputs(ro))
            st = tx_error(TEEXEC_ERR_UNSUPPORTED,
                          "dim \"%s\" is %lld, padded to its bucket %lld: shape buckets cut "
                          "host outputs only (run without device outputs, or at the bucket's size)",
                          bb[0].name, (long long)bb[0].given, (long long)bb[0].runs);
    }
    /* the start of the work proper: what a log reader (or a test waiting
     * to cancel a run in flight) keys on */
    if (!st && tx_log_enabled(TEEXEC_LOG_DEBUG))
        tx_log(TEEXEC_LOG_DEBUG, "session run started (%s, %zu nodes)",
               teexec_session_device_name(s), g->n_nodes);
    const bool profiled = tx_run_profiled(ro);
    const double run_t0 = profiled ? tx_run_profile_now_ms() : 0.0;
    if (profiled) tx_run_profile_reset(&s->run_prof_work);
    if (!st && s->cuda)
        st = tx_session_cuda_run(s, ro, reuse ? NULL : bound, reuse ? NULL : in_dev, n_outputs,
                                 want, into, out_tensors);
    tx_plan *p = NULL;
    if (!st && !s->cuda) st = find_plan(s, bound, &p);
    if (!st && !s->cuda) st = execute(s, ro, p, bound, cur, store);
    for (size_t j = 0; !st && !s->cuda && j < n_outputs; j++) {
        int32_t v = want[j];
        tx_tensor t;
        if (store[v].data && store[v].owns_data) {
            /* hand the run's buffer over (a value listed twice is copied) */
            t = store[v];
            memset(&store[v], 0, sizeof(store[v]));
            cur[v] = NULL;
        } else {
            const tx_tensor *src = cur[v];
            for (size_t k = 0; !src && k < j; k++)
                if (want[k] == v) src = &out_tensors[k]->t;
            if (!src) {
                st = tx_error(TEEXEC_ERR_INTERNAL, "output \"%s\" was not computed",
                              g->values[v].name);
                break;
            }
            st = tx_tensor_clone(src, &t);
            if (st) break;
        }
        st = tx_tensor_to_public(&t, &out_tensors[j]);
        if (st) tx_tensor_release(&t);
    }
    if (!st && n_bb) st = cut_outputs(s, bb, n_bb, n_outputs, want, out_tensors);
    if (!st && into) st = fill_bound(s, n_outputs, want, out_tensors, into);
    if (!st && profiled) {
        /* the run's profile replaces the last one only when the run succeeded */
        tx_run_profile_set_wall(&s->run_prof_work, tx_run_profile_now_ms() - run_t0);
        tx_run_profile t = s->run_prof;
        s->run_prof = s->run_prof_work;
        s->run_prof_work = t;
        s->has_run_prof = true;
    }
    if (store)
        for (size_t v = 0; v < g->n_values; v++) tx_tensor_release(&store[v]);
    for (size_t i = 0; padded && i < s->n_in; i++) tx_tensor_release(&padded[i]);
    free(padded);
    free(bb);
    free(store);
    free(cur);
    free(bound);
    free(in_dev);
    free(want);
    if (st) {
        for (size_t j = 0; j < n_outputs; j++) {
            teexec_tensor_destroy(out_tensors[j]);
            out_tensors[j] = NULL;
        }
        return tx_status_with_file(st, model_file(s));
    }
    return NULL;
}
