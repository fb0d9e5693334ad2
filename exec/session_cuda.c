/* session_cuda.c - CUDA sessions: the public session API over the CUDA
 * executor (exec/cuda/cuda_executor.h), one executor per input-shape signature
 * (each new signature is planned, allocated and captured anew) kept as the
 * payloads of the session's plan cache (planner/plan_cache.h: at most
 * TX_MAX_CUDA_EXECUTORS, the one made longest ago dropped first), and the
 * session options that only CUDA sessions read. */
#include "exec/session_cuda.h"

#include "exec/cuda/cuda_executor.h"
#include "exec/device_mem.h"
#include "exec/prepare.h"
#include "exec/run_options.h"
#include "exec/tensor_internal.h"
#include "exec/weight_share.h"
#include "planner/plan_cache.h"

#include <stdlib.h>
#include <string.h>

/* ---- options ------------------------------------------------------------------ */

teexec_status *teexec_session_options_set_recipe(teexec_session_options *o, const char *recipe)
{
    if (!o || !recipe) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options or recipe is NULL");
    tx_recipe r;
    TX_TRY(tx_recipe_parse(recipe, &r));
    char *copy = strdup(recipe);
    if (!copy) return tx_oom();
    free(o->recipe);
    o->recipe = copy;
    return NULL;
}

teexec_status *teexec_session_options_set_deterministic(teexec_session_options *o, int on)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->deterministic = on != 0;
    return NULL;
}

teexec_status *teexec_session_options_set_cuda_graphs(teexec_session_options *o, int on)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->no_cuda_graphs = on == 0;
    return NULL;
}

teexec_status *teexec_session_options_set_profile(teexec_session_options *o, int on)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->profile = on != 0;
    return NULL;
}

teexec_status *teexec_session_options_set_cuda_stream(teexec_session_options *o, void *stream)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->cuda_stream = stream;
    return NULL;
}

teexec_status *teexec_session_options_set_device_memory_limit(teexec_session_options *o,
                                                             size_t bytes)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    o->device_memory_limit = bytes;
    return NULL;
}

teexec_status *teexec_session_options_set_dtype(teexec_session_options *o, teexec_dtype dtype)
{
    if (!o) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "options is NULL");
    if (dtype != TEEXEC_DTYPE_UNDEFINED && dtype != TEEXEC_DTYPE_FLOAT &&
        dtype != TEEXEC_DTYPE_BFLOAT16 && dtype != TEEXEC_DTYPE_FLOAT16)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "the compute dtype must be float, bfloat16 or float16, not %s",
                        teexec_dtype_name(dtype));
    o->dtype = dtype;
    return NULL;
}

bool tx_env_deterministic(void)
{
    const char *e = getenv("TEEXEC_DETERMINISTIC");
    return e && !strcmp(e, "1");
}

/* ---- device choice ----------------------------------------------------------- */

teexec_status *tx_resolve_device(teexec_device asked, const char *recipe, teexec_dtype dtype,
                                 bool cpu_recipes, bool *use_cuda)
{
    *use_cuda = false;
    bool quantized = false;
    if (recipe) {
        tx_recipe r;
        TX_TRY(tx_recipe_parse(recipe, &r));
        quantized = r.kind != TX_RECIPE_NONE;
    }
    switch (asked) {
    case TEEXEC_DEVICE_CPU:
        if (quantized && !cpu_recipes)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "recipe \"%s\" trains on the CUDA device only (CPU sessions run "
                            "every recipe; the CPU trainer runs none)", recipe);
        if (dtype != TEEXEC_DTYPE_UNDEFINED)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "casting the compute dtype is a CUDA option; the CPU runs the model's "
                            "own dtypes");
        return NULL;
    case TEEXEC_DEVICE_CUDA:
        if (!tx_gpu_built())
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "the CUDA backend is not available in this build (use --device cpu)");
        if (!tx_gpu_available())
            return tx_error(TEEXEC_ERR_DEVICE, "no usable CUDA device (use --device cpu)");
        *use_cuda = true;
        return NULL;
    default:
        *use_cuda = tx_gpu_available();
        if (!*use_cuda && ((quantized && !cpu_recipes) || dtype != TEEXEC_DTYPE_UNDEFINED))
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "no CUDA device: %s needs one",
                            dtype != TEEXEC_DTYPE_UNDEFINED ? "a compute dtype"
                                                            : "training under a recipe");
        return NULL;
    }
}

/* ---- sessions -------------------------------------------------------------------- */

static teexec_status *copy_options(teexec_session *s, const teexec_session_options *o)
{
    teexec_session_options *c = calloc(1, sizeof(*c));
    if (!c) return tx_oom();
    if (o) {
        c->device = o->device;
        c->deterministic = o->deterministic;
        c->no_cuda_graphs = o->no_cuda_graphs;
        c->profile = o->profile;
        c->dtype = o->dtype;
        c->cuda_stream = o->cuda_stream;
        c->device_memory_limit = o->device_memory_limit;
        if (o->recipe && !(c->recipe = strdup(o->recipe))) {
            free(c);
            return tx_oom();
        }
    } else {
        c->deterministic = tx_env_deterministic();
    }
    s->gpu_opts = c;
    return NULL;
}

/* Entry builder: the executor for the input shapes the key holds. The
 * entry has no planner plan of its own (the executor plans inside itself);
 * the session's options that shape it are fixed for the session, so the
 * per-session cache needs only the shapes, recipe and determinism keyed. */
static teexec_status *build_graph(void *ctx, const tx_ir_graph *ir, const tx_plan_request *req,
                                  tx_fuser_plan **plan, void **payload)
{
    teexec_session *s = ctx;
    (void)ir;
    *plan = NULL;
    *payload = NULL;
    const teexec_session_options *o = s->gpu_opts;
    tx_cuda_executor_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.recipe = req->recipe;
    cfg.dtype = o->dtype;
    cfg.deterministic = o->deterministic;
    cfg.cuda_graphs = !o->no_cuda_graphs;
    cfg.profile = o->profile;
    cfg.stream = o->cuda_stream;
    cfg.n_inputs = s->n_in;
    /* the limit covers the session: its other executors' own memory
     * counts, but for the one this insert will drop (the cache is full:
     * the oldest goes once the new one exists) */
    cfg.memory_limit = o->device_memory_limit;
    size_t first = s->n_gpu_live >= TX_MAX_CUDA_EXECUTORS ? 1 : 0;
    for (size_t i = first; i < s->n_gpu_live; i++)
        cfg.memory_held += tx_cuda_executor_device_bytes(s->gpu_live[i]);
    const char **names = calloc(s->n_in ? s->n_in : 1, sizeof(*names));
    tx_shape *shapes = calloc(s->n_in ? s->n_in : 1, sizeof(*shapes));
    if (!names || !shapes) {
        free(names);
        free(shapes);
        return tx_oom();
    }
    for (size_t i = 0; i < s->n_in; i++) {
        names[i] = s->g->values[s->in_vals[i]].name;
        shapes[i] = req->vals[s->in_vals[i]].shape;
    }
    cfg.input_names = names;
    cfg.input_shapes = shapes;
    cfg.input_storage = s->state.dev;
    cfg.input_storage_dtype = s->state.dev_dtype;
    tx_cuda_executor *g = NULL;
    teexec_status *st = tx_cuda_executor_create(s->model, &cfg, &g);
    free(names);
    free(shapes);
    TX_TRY(st);
    if (s->n_gpu_live == TX_MAX_CUDA_EXECUTORS + 1) {
        /* cannot happen: the cache drops one for every insert past its bound */
        tx_cuda_executor_destroy(g);
        return tx_error(TEEXEC_ERR_INTERNAL, "more CUDA executors than the cache holds");
    }
    s->gpu_live[s->n_gpu_live++] = g;
    *payload = g;
    return NULL;
}

static void free_graph(void *ctx, tx_fuser_plan *plan, void *payload)
{
    teexec_session *s = ctx;
    (void)plan;
    for (size_t i = 0; i < s->n_gpu_live; i++)
        if (s->gpu_live[i] == payload) {
            memmove(&s->gpu_live[i], &s->gpu_live[i + 1],
                    (s->n_gpu_live - i - 1) * sizeof(s->gpu_live[0]));
            s->n_gpu_live--;
            break;
        }
    if (s->last_gpu == payload) s->last_gpu = NULL;
    tx_cuda_executor_destroy(payload);
}

/* The executor for these input shapes (in_vals order; the dtypes are the
 * bound tensors'), from the cache or made now. */
static teexec_status *graph_for(teexec_session *s, const teexec_dtype *dts, const tx_shape *shapes,
                                tx_cuda_executor **out)
{
    tx_plan_request req;
    /* the session's recipe and determinism: those of the CUDA options */
    tx_session_key(s, dts, shapes, &req);
    memset(&req.device, 0, sizeof req.device);
    strcpy(req.device.name, "cuda");
    void *payload = NULL;
    TX_TRY(tx_plan_cache_lookup(s->gpu, s->g, &req, NULL, &payload, NULL));
    *out = payload;
    s->last_gpu = payload;
    return NULL;
}

teexec_status *tx_session_cuda_init(teexec_session *s, const teexec_session_options *o)
{
    s->cuda = true;
    TX_TRY(copy_options(s, o));
    TX_TRY(tx_session_state_alloc_device(&s->state, s->g, s->in_vals, s->gpu_opts->dtype));
    TX_TRY(tx_plan_cache_create_entries(TX_MAX_CUDA_EXECUTORS, build_graph, free_graph, s, &s->gpu));
    /* the declared shapes, when the CPU side could plan them, are planned
     * on the device now (not lazily on the first run) */
    if (!s->declared) return NULL;
    teexec_dtype *dts = calloc(s->n_in ? s->n_in : 1, sizeof(*dts));
    if (!dts) return tx_oom();
    for (size_t i = 0; i < s->n_in; i++) dts[i] = s->g->values[s->in_vals[i]].dtype;
    tx_cuda_executor *g = NULL;
    teexec_status *st = graph_for(s, dts, s->declared, &g);
    free(dts);
    return st;
}

void tx_session_cuda_free(teexec_session *s)
{
    tx_plan_cache_free(s->gpu);
    s->gpu = NULL;
    s->last_gpu = NULL;
    s->n_gpu_live = 0;
    if (s->gpu_opts) free(s->gpu_opts->recipe);
    free(s->gpu_opts);
    s->gpu_opts = NULL;
    free(s->cuda_poisoned);
    s->cuda_poisoned = NULL;
}

bool tx_session_cuda_poisoned(const teexec_session *s) { return s && s->cuda_poisoned; }

void tx_session_cuda_inject_device_fault(teexec_session *s)
{
    if (s) s->cuda_fault_next = true;
}

/* A device failure in a run: the session keeps why and refuses from now on. */
static teexec_status *poison(teexec_session *s, teexec_status *st)
{
    const char *why = teexec_status_message(st);
    free(s->cuda_poisoned);
    s->cuda_poisoned = strdup(why ? why : "a CUDA error");
    teexec_status *e = tx_error(TEEXEC_ERR_DEVICE,
                                "%s; this session is unusable now (destroy it and create another; "
                                "other sessions are not affected)",
                                why ? why : "a CUDA error");
    teexec_status_destroy(st);
    return e;
}

size_t tx_session_cuda_plan_count(const teexec_session *s) { return tx_plan_cache_size(s->gpu); }

teexec_status *tx_session_cuda_kernels(const teexec_session *s, tx_run_kernel **out, size_t *n,
                                       size_t *n_forward, const tx_fuser_plan **plan)
{
    if (!s || !s->last_gpu)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "no CUDA run yet: the kernels are those of the last run's executor");
    return tx_cuda_executor_kernels(s->last_gpu, out, n, n_forward, plan);
}

teexec_status *tx_session_cuda_memory(const teexec_session *s, tx_cuda_memory_report *out)
{
    if (!s || !s->last_gpu)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "no CUDA run yet: the memory is that of the last run's executor");
    return tx_cuda_executor_memory(s->last_gpu, out);
}

teexec_status *teexec_session_device_memory(const teexec_session *s, size_t *weight_bytes,
                                            size_t *own_bytes)
{
    if (weight_bytes) *weight_bytes = 0;
    if (own_bytes) *own_bytes = 0;
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");
    if (!s->cuda) return NULL; /* a CPU session holds no device memory */
    const struct tx_ws_lease *leases[TX_MAX_CUDA_EXECUTORS + 1];
    size_t own = 0;
    for (size_t i = 0; i < s->n_gpu_live; i++) {
        leases[i] = tx_cuda_executor_weights(s->gpu_live[i]);
        own += tx_cuda_executor_device_bytes(s->gpu_live[i]);
    }
    size_t w = 0;
    TX_TRY(tx_ws_leases_bytes(leases, s->n_gpu_live, &w));
    if (weight_bytes) *weight_bytes = w;
    if (own_bytes) *own_bytes = own;
    return NULL;
}

teexec_status *teexec_session_wait(teexec_session *s)
{
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");
    if (!s->cuda) return NULL; /* CPU runs return finished */
    for (size_t i = 0; i < s->n_gpu_live; i++) TX_TRY(tx_cuda_executor_wait(s->gpu_live[i]));
    return NULL;
}

uint64_t tx_session_cuda_host_copies(const teexec_session *s) { return s->cuda_host_copies; }

size_t teexec_model_device_weight_bytes(const teexec_model *model)
{
    if (!model) return 0;
    /* the copies belong to the model that runs: the lowered one */
    const teexec_model *run = model->prepared && model->prepared->lowered
                                  ? model->prepared->lowered
                                  : model;
    return tx_weight_share_bytes(run->weights, -1, NULL);
}

/* A second device buffer holding src's bytes (an output asked twice);
 * src was written in g's stream order, so g's work is waited for first. */
static teexec_status *device_clone(tx_cuda_executor *g, const teexec_tensor *src, tx_tensor *t)
{
    memset(t, 0, sizeof(*t));
    TX_TRY(tx_cuda_executor_wait(g));
    char probe;
    TX_TRY(tx_tensor_wrap(t, src->t.dtype, src->t.rank, src->t.dims, &probe));
    int dev = 0;
    void *p = NULL;
    TX_TRY(tx_device_alloc(t->nbytes, &dev, &p));
    teexec_status *st = tx_device_to_device(p, src->t.data, src->t.nbytes);
    if (st) {
        tx_device_free(dev, p);
        memset(t, 0, sizeof(*t));
        return st;
    }
    t->data = p;
    t->owns_data = false;
    return NULL;
}

/* The device addresses of the bound device outputs, per graph output
 * (into_k), for those whose dtype and shape this executor makes exactly;
 * the other bound ones come back like unbound outputs (the session checks
 * and copies them, or says why a device one cannot be written). *direct:
 * every requested output is such a device output or, with device outputs,
 * unbound: nothing is left to do on the host after the run. */
static teexec_status *bind_device_outputs(const teexec_session *s, tx_cuda_executor *g,
                                          size_t n_outputs, const int32_t *want,
                                          const size_t *slot, teexec_tensor *const *into,
                                          bool out_device, void **into_k, bool *direct)
{
    *direct = true;
    int dev = tx_cuda_executor_device(g);
    for (size_t j = 0; j < n_outputs; j++) {
        if (!into[j] || !into[j]->on_device) {
            *direct = *direct && !into[j] && out_device;
            continue;
        }
        if (into[j]->device != dev)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "output \"%s\" is bound to a tensor on CUDA device %d; the session "
                            "runs on device %d", s->g->values[want[j]].name, into[j]->device, dev);
        size_t k = slot[j];
        teexec_dtype dt;
        tx_shape sh;
        tx_cuda_executor_output_info(g, k, &dt, &sh);
        const tx_tensor *t = &into[j]->t;
        bool same = dt == t->dtype && sh.rank == t->rank;
        for (int32_t d = 0; same && d < sh.rank; d++) same = sh.dims[d] == t->dims[d];
        if (same) into_k[k] = t->data;
        else *direct = false; /* the session names the difference */
    }
    return NULL;
}

teexec_status *tx_session_cuda_run(teexec_session *s, const teexec_run_options *ro,
                                   const tx_tensor **bound, const int *in_device,
                                   size_t n_outputs, const int32_t *want,
                                   teexec_tensor *const *into, teexec_tensor **out)
{
    /* bound outputs: the device ones written in place; the others as
     * without binding (host, or device with device outputs) */
    tx_gpu_run_io io = {.out_device = tx_run_device_outputs(ro),
                        .stream = tx_run_cuda_stream(ro),
                        .no_sync = tx_run_no_sync(ro)};
    /* (with bound outputs, checked once they are matched to the executor's) */
    if (io.no_sync && n_outputs && !io.out_device && !into)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "a run that does not wait for the device (run options no_sync) must "
                        "leave its outputs on the device (run options device_outputs, or "
                        "outputs bound to device tensors)");

    if (s->cuda_poisoned)
        return tx_error(TEEXEC_ERR_DEVICE,
                        "this session is unusable: an earlier run failed on the device (%s); "
                        "destroy it and create another",
                        s->cuda_poisoned);
    tx_cuda_executor *g = NULL;
    if (!bound) {
        /* the previous run's inputs, still on the device */
        if (!s->last_gpu)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "no inputs given and no earlier run to take them from");
        g = s->last_gpu;
    } else {
        teexec_dtype *dts = calloc(s->n_in ? s->n_in : 1, sizeof(*dts));
        tx_shape *shapes = calloc(s->n_in ? s->n_in : 1, sizeof(*shapes));
        teexec_status *st = (!dts || !shapes) ? tx_oom() : NULL;
        for (size_t i = 0; !st && i < s->n_in; i++) {
            dts[i] = bound[i]->dtype;
            shapes[i] = tx_shape_of(bound[i]);
        }
        if (!st) st = graph_for(s, dts, shapes, &g);
        free(dts);
        free(shapes);
        TX_TRY(st);
    }
    /* device inputs: on the session's device, read there without a host copy */
    bool *in_dev = NULL;
    if (bound && in_device) {
        in_dev = calloc(s->n_in ? s->n_in : 1, sizeof(*in_dev));
        if (!in_dev) return tx_oom();
        for (size_t i = 0; i < s->n_in; i++) {
            if (in_device[i] < 0) continue;
            if (in_device[i] != tx_cuda_executor_device(g)) {
                teexec_status *e = tx_error(
                    TEEXEC_ERR_INVALID_ARGUMENT,
                    "input \"%s\" is on CUDA device %d; the session runs on device %d",
                    s->g->values[s->in_vals[i]].name, in_device[i], tx_cuda_executor_device(g));
                free(in_dev);
                return e;
            }
            in_dev[i] = true;
        }
    }
    io.in_device = in_dev;
    size_t no = tx_cuda_executor_output_count(g);
    tx_tensor *outs = calloc(no ? no : 1, sizeof(*outs));
    bool *mask = calloc(no ? no : 1, sizeof(*mask));
    size_t *slot = calloc(n_outputs ? n_outputs : 1, sizeof(*slot));
    void **into_k = into ? calloc(no ? no : 1, sizeof(*into_k)) : NULL;
    teexec_status *st = (!outs || !mask || !slot || (into && !into_k)) ? tx_oom() : NULL;
    for (size_t j = 0; !st && j < n_outputs; j++) {
        const char *name = s->g->values[want[j]].name;
        size_t k = 0;
        while (k < no && strcmp(tx_cuda_executor_output_name(g, k), name)) k++;
        if (k == no) st = tx_error(TEEXEC_ERR_INTERNAL, "output \"%s\" is not computed on the device", name);
        else {
            mask[k] = true;
            slot[j] = k;
        }
    }
    if (!st && into) {
        bool direct = true;
        st = bind_device_outputs(s, g, n_outputs, want, slot, into, io.out_device, into_k, &direct);
        /* no_sync leaves nothing to copy in on the host afterwards */
        if (!st && io.no_sync && n_outputs && !direct)
            st = tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                          "a run that does not wait for the device (run options no_sync) must "
                          "leave its outputs on the device (run options device_outputs, or "
                          "outputs bound to device tensors of exactly their dtype and shape)");
        io.out_into = into_k;
    }
    /* planning and capturing a new shape may take long: the last cancel
     * point before anything reaches the device (a captured graph's replay
     * cannot be interrupted; without graphs the executor checks again
     * before each kernel) */
    if (!st && tx_run_cancelled(ro))
        st = tx_run_cancelled_status("before launching the model on the CUDA device", NULL);
    if (!st) {
        tx_cuda_executor_set_run_options(g, ro);
        if (s->cuda_fault_next) {
            s->cuda_fault_next = false;
            st = tx_error(TEEXEC_ERR_DEVICE, "cuda kernel failed: injected fault (test seam)");
        } else {
            st = tx_cuda_executor_run(g, bound, &io, n_outputs ? outs : NULL, mask);
            /* the run's own profile, timed by its executor */
            if (!st && tx_run_profiled(ro)) st = tx_cuda_executor_run_profile(g, &s->run_prof_work);
        }
        tx_cuda_executor_set_run_options(g, NULL);
        s->cuda_host_copies += io.host_copies;
        if (st && teexec_status_code(st) == TEEXEC_ERR_DEVICE) st = poison(s, st);
    }
    int dev = tx_cuda_executor_device(g);
    for (size_t j = 0; !st && j < n_outputs; j++) {
        size_t k = slot[j];
        if (into_k && into_k[k]) continue; /* written into the caller's tensor */
        tx_tensor t;
        if (outs[k].data && (outs[k].owns_data || io.out_device)) {
            t = outs[k];
            memset(&outs[k], 0, sizeof(outs[k]));
        } else {
            /* asked for twice: the first request took the buffer */
            const teexec_tensor *src = NULL;
            for (size_t p = 0; p < j && !src; p++)
                if (want[p] == want[j]) src = out[p];
            if (!src) {
                st = tx_error(TEEXEC_ERR_INTERNAL, "output missing");
                break;
            }
            if (io.out_device) st = device_clone(g, src, &t);
            else st = tx_tensor_clone(&src->t, &t);
            if (st) break;
        }
        if (io.out_device) {
            st = tx_tensor_to_public_device(&t, dev, tx_device_free, &out[j]);
            if (st) tx_device_free(dev, t.data);
        } else {
            st = tx_tensor_to_public(&t, &out[j]);
            if (st) tx_tensor_release(&t);
        }
    }
    if (st && io.out_device) {
        /* device outputs not handed out yet (the caller's are released by
         * the session on failure) */
        for (size_t k = 0; outs && k < no; k++)
            if (outs[k].data) {
                tx_device_free(dev, outs[k].data);
                memset(&outs[k], 0, sizeof(outs[k]));
            }
    }
    for (size_t k = 0; outs && k < no; k++) tx_tensor_release(&outs[k]);
    free(into_k);
    free(in_dev);
    free(outs);
    free(mask);
    free(slot);
    return st;
}

teexec_status *teexec_session_profile(const teexec_session *s, char **out_text)
{
    if (!out_text) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_text is NULL");
    *out_text = NULL;
    if (!s) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "session is NULL");
    if (!s->cuda || !s->gpu_opts || !s->gpu_opts->profile)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "the session was not created with profiling on a CUDA device");
    if (!s->last_gpu) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "nothing has run yet");
    return tx_cuda_executor_profile(s->last_gpu, out_text);
}
