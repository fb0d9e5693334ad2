/* generate.c - the generator (teexec.h, "Generation"): token histories per
 * sequence, the two ways of running a decoder (recompute the whole
 * sequence, or feed the new tokens with the KV cache of the last run), and
 * the step that samples one token per sequence (exec/sampler.h).
 *
 * It drives its session through the public API only, so it runs on any
 * device the session does. Every run builds its inputs into fresh
 * tensors and changes the generator's state only after the run succeeded:
 * a failed run or a refused call leaves everything as it was.
 *
 * The KV cache is laid out in columns shared by the batch. A run appends T
 * columns; each row puts its new tokens right-aligned in them and masks the
 * rest (attention_mask 0), position_ids counting that row's own tokens.
 * Rewinding masks the columns of the tokens it drops and cuts the columns
 * no row still uses, so a row's history may hold masked holes; masked
 * columns contribute exactly zero to attention, which is why recompute and
 * KV mode agree.
 *
 * Past buckets: every new past length is a new input shape for the
 * session (a plan; on CUDA an executor). The cache is therefore kept (and
 * fed) at a capacity of a multiple of past_bucket columns, those past the
 * history masked, and only the new tokens' columns of the presents are
 * copied into it, so the decode steps within a bucket repeat one shape and
 * a step copies nothing but its own new k/v on the host. This needs attention_mask (to mask the padding) and position_ids
 * (a model counting positions from the past's length would count it).
 *
 * On a CUDA session (with past buckets and one layout for every k/v) the
 * cache stays on the device: the past is fed as device tensors and the
 * presents are written into device tensors the generator binds
 * (teexec_session_run_into), all of them views into two device blocks
 * (exec/kv_block.h), so a step copies only the new columns of every layer
 * in one device row copy, and only the ids, mask, positions and logits
 * cross to the host. Otherwise the cache is host tensors (the session's
 * outputs, fed back as inputs), which a CUDA session copies both ways.
 *
 * Ownership: the generator owns its session, tensors and buffers; the model
 * is borrowed and must outlive it. Thread-safety: one thread at a time. */
#include "teexec/teexec.h"

#include "base/status.h"
#include "exec/kv_block.h"
#include "exec/sampler.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GEN_DEFAULT_MAX_LENGTH 4096
#define GEN_DEFAULT_PAST_BUCKET 64

typedef struct gen_seq {
    int64_t *ids;
    size_t len;
    size_t cached;  /* KV: the first `cached` tokens have k/v in the cache */
    size_t *col;    /* KV: the cache column of each cached token */
    bool logits_ok; /* g->logits row is this sequence's current last logits */
} gen_seq;

/* One past_key_values.N.{key,value} input and its present output. */
typedef struct kv_entry {
    const char *past;    /* model-owned name */
    const char *present; /* model-owned name */
    teexec_dtype dtype;
    int64_t heads, head_dim;
} kv_entry;

typedef struct in_slot {
    const char *name; /* NULL when the model has no such input */
    teexec_dtype dtype;
    int64_t fixed_batch, fixed_len; /* -1 when symbolic */
} in_slot;

struct teexec_generator {
    teexec_session *session;
    teexec_generate_mode mode;
    size_t max_batch, max_length;
    int64_t pad_id;
    size_t past_bucket; /* KV: the past fed is padded to a multiple (1: none) */
    tx_sampling sampling;
    in_slot ids, mask, pos;
    const char *logits_name;
    size_t vocab;
    size_t n_kv;
    kv_entry *kv;
    /* KV state: cache[i] is [cache_batch, heads, capacity, head_dim] or
     * NULL; columns [0, cols) hold the history (masked holes included),
     * the rest are zeros or stale columns a rewind dropped, all masked */
    teexec_tensor **cache;
    size_t cache_batch, cols;
    /* the cache on the device (kv_device): the history in dcache (its cols
     * the capacity, g->cache unused), the last run's presents in dpresent,
     * kept while their shape repeats (a decode step's does) */
    bool kv_device;
    /* a model in DotProductAttention's cache mode (teexec convert
     * --kv-cache): the session keeps the caches (state inputs); each run
     * feeds cache_len, a row's new tokens left-aligned at its own length */
    bool state_kv;
    const char *cache_len_name;
    size_t state_batch, state_cap;
    tx_kv_layout kv_layout;
    tx_kv_block dcache, dpresent;
    uint8_t *colmask; /* max_batch rows of max_length: 1 = the row's token */
    gen_seq *seq;
    float *logits; /* max_batch x vocab */
    tx_sampler_ws ws;
    uint64_t runs;
};

void teexec_generator_options_init(teexec_generator_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof(*o));
    o->device = TEEXEC_DEVICE_AUTO;
    o->dtype = TEEXEC_DTYPE_UNDEFINED;
    o->mode = TEEXEC_GENERATE_AUTO;
    o->max_batch = 1;
    o->top_p = 1.0;
}

/* ---- model recognition -------------------------------------------------- */

static bool int_like(teexec_dtype dt)
{
    return dt == TEEXEC_DTYPE_INT64 || dt == TEEXEC_DTYPE_INT32;
}

static teexec_status *take_slot(in_slot *slot, const teexec_value_info *v, bool mask)
{
    if (v->rank != 2)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "input \"%s\" has rank %d; the generator needs "
                        "[batch, seq]", v->name, (int)v->rank);
    bool ok = int_like(v->dtype) ||
              (mask && (v->dtype == TEEXEC_DTYPE_BOOL || v->dtype == TEEXEC_DTYPE_FLOAT));
    if (!ok)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "input \"%s\" is %s; the generator fills int64 "
                        "or int32%s", v->name, teexec_dtype_name(v->dtype),
                        mask ? " (or bool, float)" : "");
    slot->name = v->name;
    slot->dtype = v->dtype;
    slot->fixed_batch = v->dims[0];
    slot->fixed_len = v->dims[1];
    return NULL;
}

/* "past_key_values.N.key" -> (N, 0), ".value" -> (N, 1). */
static bool parse_kv_name(const char *name, const char *prefix, long *layer, int *which)
{
    size_t pl = strlen(prefix);
    if (strncmp(name, prefix, pl) != 0) return false;
    const char *p = name + pl;
    if (*p < '0' || *p > '9') return false;
    char *end = NULL;
    errno = 0;
    long n = strtol(p, &end, 10);
    if (errno || !end) return false;
    if (strcmp(end, ".key") == 0) *which = 0;
    else if (strcmp(end, ".value") == 0) *which = 1;
    else return false;
    *layer = n;
    return true;
}

static teexec_status *recognize(teexec_generator *g, const teexec_model *m)
{
    size_t n_in = teexec_model_input_count(m), n_out = teexec_model_output_count(m);
    g->kv = calloc(n_in ? n_in : 1, sizeof(*g->kv));
    if (!g->kv) return tx_oom();
    for (size_t i = 0; i < n_in; i++) {
        const teexec_value_info *v = teexec_model_input(m, i);
        long layer = 0;
        int which = 0;
        if (strcmp(v->name, "input_ids") == 0) {
            TX_TRY(take_slot(&g->ids, v, false));
        } else if (strcmp(v->name, "attention_mask") == 0) {
            TX_TRY(take_slot(&g->mask, v, true));
        } else if (strcmp(v->name, "position_ids") == 0) {
            TX_TRY(take_slot(&g->pos, v, false));
        } else if (strcmp(v->name, "cache_len") == 0) {
            if (v->rank != 1 || v->dtype != TEEXEC_DTYPE_INT64)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "input \"cache_len\" must be int64 "
                                "[batch]");
            g->cache_len_name = v->name;
        } else if (parse_kv_name(v->name, "kv_cache.", &layer, &which)) {
            /* the session's state: [B, capacity, h_kv, d] */
            if (v->rank != 4 || v->dims[0] < 1 || v->dims[1] < 1)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "state input \"%s\" must be [batch, "
                                "capacity, kv_heads, head_dim] with every dim fixed", v->name);
            size_t b = (size_t)v->dims[0], c = (size_t)v->dims[1];
            if (g->state_cap && (b != g->state_batch || c != g->state_cap))
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "state input \"%s\" is [%zu, %zu, ...]; "
                                "another is [%zu, %zu, ...]", v->name, b, c, g->state_batch,
                                g->state_cap);
            g->state_batch = b;
            g->state_cap = c;
        } else if (parse_kv_name(v->name, "past_key_values.", &layer, &which)) {
            if (v->rank != 4 || v->dims[1] < 0 || v->dims[3] < 0)
                return tx_error(TEEXEC_ERR_UNSUPPORTED,
                                "input \"%s\" must be [batch, kv_heads, past, head_dim] with "
                                "kv_heads and head_dim declared", v->name);
            if (v->dtype != TEEXEC_DTYPE_FLOAT && v->dtype != TEEXEC_DTYPE_FLOAT16 &&
                v->dtype != TEEXEC_DTYPE_BFLOAT16)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "input \"%s\" is %s, not a float type",
                                v->name, teexec_dtype_name(v->dtype));
            kv_entry *e = &g->kv[g->n_kv++];
            e->past = v->name;
            e->dtype = v->dtype;
            e->heads = v->dims[1];
            e->head_dim = v->dims[3];
            for (size_t o = 0; o < n_out && !e->present; o++) {
                const char *on = teexec_model_output(m, o)->name;
                long ol = 0;
                int ow = 0;
                if (parse_kv_name(on, "present.", &ol, &ow) && ol == layer && ow == which)
                    e->present = on;
            }
            if (!e->present)
                return tx_error(TEEXEC_ERR_UNSUPPORTED, "input \"%s\" has no output "
                                "\"present.%ld.%s\"", v->name, layer, which ? "value" : "key");
        } else {
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "input \"%s\" is not one the generator fills (input_ids, "
                            "attention_mask, position_ids, past_key_values.N.key/value, or "
                            "cache_len with kv_cache.N.key/value state)", v->name);
        }
    }
    if (g->state_cap || g->cache_len_name) {
        if (!g->state_cap || !g->cache_len_name || g->n_kv || g->mask.name || !g->pos.name)
            return tx_error(TEEXEC_ERR_UNSUPPORTED,
                            "a cache-mode model (teexec convert --kv-cache) has cache_len, "
                            "kv_cache.N.key/value and position_ids inputs, and no past or "
                            "attention_mask");
        g->state_kv = true;
    }
    if (!g->ids.name)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "the model has no input \"input_ids\"");
    for (size_t o = 0; o < n_out; o++) {
        const teexec_value_info *v = teexec_model_output(m, o);
        if (strcmp(v->name, "logits") != 0) continue;
        if (v->rank != 3)
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "output \"logits\" has rank %d, not 3 "
                            "([batch, seq, vocab])", (int)v->rank);
        g->logits_name = v->name;
        if (v->dims[2] > 0) g->vocab = (size_t)v->dims[2];
    }
    if (!g->logits_name)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "the model has no output \"logits\"");
    return NULL;
}

/* ---- create / destroy --------------------------------------------------- */

static teexec_status *make_session(teexec_generator *g, const teexec_model *m,
                                   const teexec_generator_options *o)
{
    teexec_session_options *so = NULL;
    TX_TRY(teexec_session_options_create(&so));
    teexec_status *st = teexec_session_options_set_device(so, o->device);
    if (!st && o->threads) st = teexec_session_options_set_threads(so, o->threads);
    if (!st && o->recipe) st = teexec_session_options_set_recipe(so, o->recipe);
    if (!st && o->dtype != TEEXEC_DTYPE_UNDEFINED) st = teexec_session_options_set_dtype(so, o->dtype);
    /* without past buckets every KV step has a new past length, and every
     * recompute step of a model without a fixed length a new sequence
     * length: a new input shape each, so a CUDA graph captured per shape
     * would never be replayed (CPU sessions ignore the setting) */
    bool shapes_repeat = g->state_kv                          ? true
                         : g->mode == TEEXEC_GENERATE_KV_CACHE ? g->past_bucket > 1
                                                               : g->ids.fixed_len >= 0;
    if (!st && !shapes_repeat) st = teexec_session_options_set_cuda_graphs(so, 0);
    if (!st && o->profile) st = teexec_session_options_set_profile(so, 1);
    if (!st) st = teexec_session_create(m, so, &g->session);
    teexec_session_options_destroy(so);
    return st;
}

/* The cache stays on the device when the session runs on CUDA, the past
 * is bucketed (a capacity that repeats: the blocks are reused) and every
 * k/v has one layout (one row copy serves every layer). */
static void choose_kv_device(teexec_generator *g)
{
    if (g->mode != TEEXEC_GENERATE_KV_CACHE || g->past_bucket <= 1 || !g->n_kv ||
        strcmp(teexec_session_device_name(g->session), "cuda") != 0)
        return;
    for (size_t i = 1; i < g->n_kv; i++)
        if (g->kv[i].dtype != g->kv[0].dtype || g->kv[i].heads != g->kv[0].heads ||
            g->kv[i].head_dim != g->kv[0].head_dim)
            return;
    g->kv_device = true;
    g->kv_layout = (tx_kv_layout){.n = g->n_kv, .dtype = g->kv[0].dtype,
                                  .heads = g->kv[0].heads, .head_dim = g->kv[0].head_dim};
}

void teexec_generator_destroy(teexec_generator *g)
{
    if (!g) return;
    for (size_t i = 0; g->cache && i < g->n_kv; i++) teexec_tensor_destroy(g->cache[i]);
    free(g->cache);
    tx_kv_block_free(&g->dcache);
    tx_kv_block_free(&g->dpresent);
    for (size_t r = 0; g->seq && r < g->max_batch; r++) {
        free(g->seq[r].ids);
        free(g->seq[r].col);
    }
    free(g->seq);
    free(g->colmask);
    free(g->logits);
    free(g->kv);
    tx_sampler_ws_free(&g->ws);
    teexec_session_destroy(g->session);
    free(g);
}

static teexec_status *create(teexec_generator *g, const teexec_model *model,
                             const teexec_generator_options *o)
{
    if (o->mode != TEEXEC_GENERATE_AUTO && o->mode != TEEXEC_GENERATE_RECOMPUTE &&
        o->mode != TEEXEC_GENERATE_KV_CACHE)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "unknown generate mode %d", (int)o->mode);
    if (o->max_batch == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "max_batch must be >= 1");
    g->sampling.temperature = o->temperature;
    g->sampling.top_k = o->top_k;
    g->sampling.top_p = o->top_p;
    g->sampling.seed = o->seed;
    TX_TRY(tx_sampling_check(&g->sampling));
    if (o->pad_id < 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "pad_id must be >= 0");
    g->pad_id = o->pad_id;
    TX_TRY(recognize(g, model));
    if (g->vocab && (uint64_t)g->pad_id >= g->vocab)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "pad_id %lld is outside the vocabulary of "
                        "%zu", (long long)g->pad_id, g->vocab);
    g->mode = o->mode;
    if (g->mode == TEEXEC_GENERATE_AUTO)
        g->mode = g->n_kv || g->state_kv ? TEEXEC_GENERATE_KV_CACHE : TEEXEC_GENERATE_RECOMPUTE;
    if (g->state_kv && g->mode != TEEXEC_GENERATE_KV_CACHE)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "a cache-mode model runs with its KV cache; it "
                        "cannot recompute");
    if (g->state_kv) {
        if (o->max_batch > g->state_batch)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "max_batch %zu is larger than the "
                            "model's cache batch of %zu (teexec convert --kv-cache B,C)",
                            o->max_batch, g->state_batch);
        if (o->max_length > g->state_cap)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "max_length %zu is longer than the "
                            "model's cache capacity of %zu", o->max_length, g->state_cap);
    }
    if (g->mode == TEEXEC_GENERATE_KV_CACHE && !g->n_kv && !g->state_kv)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "KV-cache mode needs past_key_values.N.key/value "
                        "inputs; the model has none (use recompute)");
    if (g->mode == TEEXEC_GENERATE_KV_CACHE && g->ids.fixed_len >= 0)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "KV-cache mode feeds a varying number of tokens, "
                        "but input_ids has a fixed seq dim of %lld", (long long)g->ids.fixed_len);
    if (g->mode == TEEXEC_GENERATE_KV_CACHE && !g->state_kv) {
        /* padding the past with masked columns needs the mask, and the
         * positions given (a model that counts them from the past's length
         * would count the padding) */
        bool can_pad = g->mask.name && g->pos.name;
        if (o->past_bucket > 1 && !can_pad)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "past_bucket %zu needs attention_mask and "
                            "position_ids inputs; the model lacks %s", o->past_bucket,
                            g->mask.name ? "position_ids" : "attention_mask");
        g->past_bucket = o->past_bucket ? o->past_bucket : can_pad ? GEN_DEFAULT_PAST_BUCKET : 1;
    }
    g->max_batch = o->max_batch;
    if (g->ids.fixed_batch >= 0 && g->max_batch > (size_t)g->ids.fixed_batch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "max_batch %zu is larger than the model's "
                        "fixed batch of %lld", g->max_batch, (long long)g->ids.fixed_batch);
    bool fixed_seq = g->mode == TEEXEC_GENERATE_RECOMPUTE && g->ids.fixed_len >= 0;
    g->max_length = o->max_length ? o->max_length
                    : g->state_kv ? g->state_cap
                    : fixed_seq   ? (size_t)g->ids.fixed_len
                                  : GEN_DEFAULT_MAX_LENGTH;
    if (fixed_seq && g->max_length > (size_t)g->ids.fixed_len)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "max_length %zu is longer than the model's "
                        "fixed sequence of %lld", g->max_length, (long long)g->ids.fixed_len);
    if (g->max_length > (size_t)INT32_MAX)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "max_length %zu is too large", g->max_length);
    g->seq = calloc(g->max_batch, sizeof(*g->seq));
    if (!g->seq) return tx_oom();
    if (g->mode == TEEXEC_GENERATE_KV_CACHE) {
        if (g->max_length > SIZE_MAX / g->max_batch) return tx_oom();
        g->colmask = calloc(g->max_batch * g->max_length, 1);
        g->cache = calloc(g->n_kv, sizeof(*g->cache));
        if (!g->colmask || !g->cache) return tx_oom();
    }
    TX_TRY(make_session(g, model, o));
    choose_kv_device(g);
    return NULL;
}

teexec_status *teexec_generator_create(const teexec_model *model,
                                       const teexec_generator_options *options,
                                       teexec_generator **out)
{
    if (out) *out = NULL;
    if (!model || !out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "model or out is NULL");
    teexec_generator_options defaults;
    teexec_generator_options_init(&defaults);
    teexec_generator *g = calloc(1, sizeof(*g));
    if (!g) return tx_oom();
    teexec_status *st = create(g, model, options ? options : &defaults);
    if (st) {
        teexec_generator_destroy(g);
        return st;
    }
    *out = g;
    return NULL;
}

/* ---- accessors ---------------------------------------------------------- */

size_t teexec_generator_batch(const teexec_generator *g)
{
    if (!g) return 0;
    size_t b = 0;
    for (size_t r = 0; r < g->max_batch; r++)
        if (g->seq[r].len) b = r + 1;
    return b;
}

size_t teexec_generator_vocab_size(const teexec_generator *g) { return g ? g->vocab : 0; }

teexec_generate_mode teexec_generator_mode(const teexec_generator *g)
{
    return g ? g->mode : TEEXEC_GENERATE_AUTO;
}

const teexec_session *teexec_generator_session(const teexec_generator *g)
{
    return g ? g->session : NULL;
}

const char *teexec_generator_device_name(const teexec_generator *g)
{
    return g ? teexec_session_device_name(g->session) : "cpu";
}

uint64_t teexec_generator_run_count(const teexec_generator *g) { return g ? g->runs : 0; }

teexec_status *teexec_generator_tokens(const teexec_generator *g, size_t sequence,
                                       const int64_t **out_ids, size_t *out_count)
{
    if (out_ids) *out_ids = NULL;
    if (out_count) *out_count = 0;
    if (!g || !out_ids || !out_count)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "generator or out pointers are NULL");
    if (sequence >= g->max_batch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "sequence %zu is outside the batch "
                        "(max_batch %zu)", sequence, g->max_batch);
    *out_ids = g->seq[sequence].ids;
    *out_count = g->seq[sequence].len;
    return NULL;
}

teexec_status *teexec_generator_logits(const teexec_generator *g, size_t sequence, float *out,
                                       size_t count)
{
    if (!g || !out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "generator or out is NULL");
    if (sequence >= g->max_batch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "sequence %zu is outside the batch "
                        "(max_batch %zu)", sequence, g->max_batch);
    if (!g->seq[sequence].logits_ok)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "sequence %zu has no current logits (run "
                        "teexec_generator_compute after appending)", sequence);
    if (count < g->vocab)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "room for %zu logits; the vocabulary has %zu",
                        count, g->vocab);
    memcpy(out, g->logits + sequence * g->vocab, g->vocab * sizeof(float));
    return NULL;
}

/* ---- append ------------------------------------------------------------- */

/* Cache columns the next KV run needs when row `extra_row` gains `extra`
 * tokens (extra_row = SIZE_MAX: every row gains `extra`). */
static size_t kv_columns_needed(const teexec_generator *g, size_t extra_row, size_t extra)
{
    if (g->state_kv) {
        /* every row of a run writes its t_run positions from its length */
        size_t t = 0, c = 0;
        for (size_t r = 0; r < g->max_batch; r++) {
            bool gains = extra_row == SIZE_MAX ? g->seq[r].len > 0 : extra_row == r;
            size_t p = g->seq[r].len - g->seq[r].cached + (gains ? extra : 0);
            if (p > t) t = p;
        }
        for (size_t r = 0; r < g->max_batch; r++) {
            bool active = g->seq[r].len > 0 || extra_row == r;
            if (active && g->seq[r].cached > c) c = g->seq[r].cached;
        }
        return c + t;
    }
    size_t t = 0;
    for (size_t r = 0; r < g->max_batch; r++) {
        if (extra_row == SIZE_MAX && !g->seq[r].len) continue;
        size_t p = g->seq[r].len - g->seq[r].cached;
        if (extra_row == SIZE_MAX || extra_row == r) p += extra;
        if (p > t) t = p;
    }
    return g->cols + t;
}

static teexec_status *check_fits(const teexec_generator *g, size_t row, size_t extra)
{
    if (g->mode == TEEXEC_GENERATE_KV_CACHE) {
        size_t need = kv_columns_needed(g, row, extra);
        if (need > g->max_length)
            return tx_error(TEEXEC_ERR_LIMIT, "%zu more token%s would need %zu cache columns; "
                            "max_length is %zu", extra, extra == 1 ? "" : "s", need,
                            g->max_length);
        return NULL;
    }
    for (size_t r = 0; r < g->max_batch; r++) {
        if (row != SIZE_MAX && r != row) continue;
        if (row == SIZE_MAX && !g->seq[r].len) continue;
        if (g->seq[r].len + extra > g->max_length)
            return tx_error(TEEXEC_ERR_LIMIT, "sequence %zu would hold %zu tokens; max_length is "
                            "%zu", r, g->seq[r].len + extra, g->max_length);
    }
    return NULL;
}

static teexec_status *seq_push(gen_seq *s, const int64_t *ids, size_t count, size_t max_length)
{
    if (!s->ids) {
        s->ids = malloc(max_length * sizeof(*s->ids));
        s->col = malloc(max_length * sizeof(*s->col));
        if (!s->ids || !s->col) return tx_oom();
    }
    memcpy(s->ids + s->len, ids, count * sizeof(*ids));
    s->len += count;
    s->logits_ok = false;
    return NULL;
}

teexec_status *teexec_generator_append(teexec_generator *g, size_t sequence, const int64_t *ids,
                                       size_t count)
{
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "generator is NULL");
    if (sequence >= g->max_batch)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "sequence %zu is outside the batch "
                        "(max_batch %zu)", sequence, g->max_batch);
    if (count == 0) return NULL;
    if (!ids) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "ids is NULL");
    for (size_t i = 0; i < count; i++) {
        if (ids[i] < 0 || (g->vocab && (uint64_t)ids[i] >= g->vocab))
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "token id %lld (position %zu) is outside "
                            "the vocabulary [0, %zu)", (long long)ids[i], i, g->vocab);
        if (!g->vocab && g->ids.dtype == TEEXEC_DTYPE_INT32 && ids[i] > INT32_MAX)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "token id %lld does not fit input_ids "
                            "(int32)", (long long)ids[i]);
    }
    if (count > g->max_length)
        return tx_error(TEEXEC_ERR_LIMIT, "%zu tokens are more than max_length %zu", count,
                        g->max_length);
    TX_TRY(check_fits(g, sequence, count));
    return seq_push(&g->seq[sequence], ids, count, g->max_length);
}

/* ---- tensors ------------------------------------------------------------ */

/* A [rows, cols] tensor of `dt` from int64 values (bool: v != 0). */
static teexec_status *int_tensor(teexec_dtype dt, size_t rows, size_t cols, const int64_t *v,
                                 teexec_tensor **out)
{
    int64_t dims[2] = {(int64_t)rows, (int64_t)cols};
    TX_TRY(teexec_tensor_create(dt, 2, dims, out));
    void *d = teexec_tensor_data(*out);
    size_t n = rows * cols;
    for (size_t i = 0; i < n; i++) {
        switch (dt) {
        case TEEXEC_DTYPE_INT64: ((int64_t *)d)[i] = v[i]; break;
        case TEEXEC_DTYPE_INT32: ((int32_t *)d)[i] = (int32_t)v[i]; break;
        case TEEXEC_DTYPE_BOOL: ((uint8_t *)d)[i] = v[i] != 0; break;
        case TEEXEC_DTYPE_FLOAT: ((float *)d)[i] = (float)v[i]; break;
        default: break;
        }
    }
    return NULL;
}

static size_t elem_bytes(teexec_dtype dt) { return teexec_dtype_bits(dt) / 8; }

/* Copies row r, position t of logits [B, T, V] (any float dtype) into
 * g->logits row `dst`, learning the vocabulary on the first run. */
static teexec_status *logits_as_float(teexec_generator *g, teexec_tensor *lt,
                                      teexec_tensor **out_f)
{
    *out_f = NULL;
    if (teexec_tensor_rank(lt) != 3)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "logits came back with rank %d, not 3",
                        (int)teexec_tensor_rank(lt));
    int64_t v = teexec_tensor_dims(lt)[2];
    if (v <= 0 || (g->vocab && (size_t)v != g->vocab))
        return tx_error(TEEXEC_ERR_BAD_MODEL, "logits have %lld entries per token; expected %zu",
                        (long long)v, g->vocab);
    if (!g->logits) {
        if (g->max_batch > SIZE_MAX / sizeof(float) / (size_t)v) return tx_oom();
        g->logits = calloc(g->max_batch * (size_t)v, sizeof(float));
        if (!g->logits) return tx_oom();
    }
    g->vocab = (size_t)v;
    if (teexec_tensor_dtype(lt) == TEEXEC_DTYPE_FLOAT) return NULL;
    return teexec_tensor_cast(lt, TEEXEC_DTYPE_FLOAT, out_f);
}

/* The logits tensor's row for `row`'s last token at run position `t` of
 * `t_run` positions (an output of [B, 1, V] holds only the last). */
static teexec_status *logits_row(const teexec_generator *g, const teexec_tensor *lf, size_t row,
                                 size_t t, size_t t_run, const float **out)
{
    const int64_t *d = teexec_tensor_dims(lf);
    size_t t_out = (size_t)d[1];
    if ((size_t)d[0] <= row || t_out == 0 || t_out > t_run || t + t_out < t_run)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "logits [%lld, %lld, %lld] do not cover row %zu, "
                        "position %zu of %zu", (long long)d[0], (long long)d[1], (long long)d[2],
                        row, t, t_run);
    size_t tt = t - (t_run - t_out);
    *out = (const float *)teexec_tensor_data_const(lf) + (row * t_out + tt) * g->vocab;
    return NULL;
}

static void destroy_all(teexec_tensor **t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        teexec_tensor_destroy(t[i]);
        t[i] = NULL;
    }
}

/* A zero past [batch, heads, cols, head_dim]: cols 0 is the empty past of
 * a first step (of recompute mode, or KV mode without buckets). */
static teexec_status *zero_past(const kv_entry *e, size_t batch, size_t cols, teexec_tensor **out)
{
    int64_t dims[4] = {(int64_t)batch, e->heads, (int64_t)cols, e->head_dim};
    return teexec_tensor_create(e->dtype, 4, dims, out);
}

/* ---- recompute ---------------------------------------------------------- */

static teexec_status *recompute_run(teexec_generator *g, size_t batch)
{
    size_t b_run = g->ids.fixed_batch >= 0 ? (size_t)g->ids.fixed_batch : batch;
    size_t t_run = 0;
    for (size_t r = 0; r < batch; r++)
        if (g->seq[r].len > t_run) t_run = g->seq[r].len;
    if (g->ids.fixed_len >= 0) t_run = (size_t)g->ids.fixed_len;
    size_t n = b_run * t_run, n_in = 0;
    int64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    int64_t *mask = malloc((n ? n : 1) * sizeof(*mask));
    int64_t *pos = malloc((n ? n : 1) * sizeof(*pos));
    size_t n_slots = 3 + g->n_kv;
    const char **names = calloc(n_slots, sizeof(*names));
    teexec_tensor **ins = calloc(n_slots, sizeof(*ins));
    teexec_tensor *out = NULL, *lf = NULL;
    teexec_status *st = (!ids || !mask || !pos || !names || !ins) ? tx_oom() : NULL;
    if (st) goto done;
    /* tokens first, padding after: a causal model's logits at a token do
     * not depend on what follows it, so no mask is needed for the padding
     * (one is still given when the model takes it) */
    for (size_t r = 0; r < b_run; r++) {
        size_t len = r < batch ? g->seq[r].len : 0;
        for (size_t t = 0; t < t_run; t++) {
            bool real = t < len;
            ids[r * t_run + t] = real ? g->seq[r].ids[t] : g->pad_id;
            mask[r * t_run + t] = real;
            pos[r * t_run + t] = real ? (int64_t)t : 0;
        }
    }
    names[n_in] = g->ids.name;
    st = int_tensor(g->ids.dtype, b_run, t_run, ids, &ins[n_in++]);
    if (!st && g->mask.name) {
        names[n_in] = g->mask.name;
        st = int_tensor(g->mask.dtype, b_run, t_run, mask, &ins[n_in++]);
    }
    if (!st && g->pos.name) {
        names[n_in] = g->pos.name;
        st = int_tensor(g->pos.dtype, b_run, t_run, pos, &ins[n_in++]);
    }
    for (size_t i = 0; !st && i < g->n_kv; i++) {
        names[n_in] = g->kv[i].past;
        st = zero_past(&g->kv[i], b_run, 0, &ins[n_in++]);
    }
    if (!st)
        st = teexec_session_run(g->session, n_in, names, (const teexec_tensor *const *)ins, 1,
                                &g->logits_name, &out);
    if (!st) st = logits_as_float(g, out, &lf);
    const teexec_tensor *l = lf ? lf : out;
    for (size_t r = 0; !st && r < batch; r++) {
        if (!g->seq[r].len) continue;
        const float *row = NULL;
        st = logits_row(g, l, r, g->seq[r].len - 1, t_run, &row);
        if (!st) memcpy(g->logits + r * g->vocab, row, g->vocab * sizeof(float));
    }
    if (!st) {
        for (size_t r = 0; r < batch; r++) g->seq[r].logits_ok = g->seq[r].len > 0;
        g->runs++;
    }
done:
    if (ins) destroy_all(ins, n_in);
    teexec_tensor_destroy(out);
    teexec_tensor_destroy(lf);
    free(ins);
    free(names);
    free(ids);
    free(mask);
    free(pos);
    return st;
}

/* ---- KV cache ----------------------------------------------------------- */

/* A copy of cache tensor `t` [b0, h, c0, d] as [b1, h, c1, d]: rows and
 * columns past the old ones zero, those past the new ones dropped. */
static teexec_status *cache_resize(const teexec_tensor *t, size_t b1, size_t c1,
                                   teexec_tensor **out)
{
    const int64_t *d = teexec_tensor_dims(t);
    size_t b0 = (size_t)d[0], h = (size_t)d[1], c0 = (size_t)d[2], hd = (size_t)d[3];
    size_t es = elem_bytes(teexec_tensor_dtype(t));
    int64_t nd[4] = {(int64_t)b1, (int64_t)h, (int64_t)c1, (int64_t)hd};
    TX_TRY(teexec_tensor_create(teexec_tensor_dtype(t), 4, nd, out));
    const uint8_t *src = teexec_tensor_data_const(t);
    uint8_t *dst = teexec_tensor_data(*out);
    size_t keep_c = c0 < c1 ? c0 : c1, row = hd * es;
    for (size_t b = 0; b < b0 && b < b1; b++)
        for (size_t k = 0; k < h; k++)
            memcpy(dst + ((b * h + k) * c1) * row, src + ((b * h + k) * c0) * row, keep_c * row);
    return NULL;
}

/* Copies columns [from, from + n) of present `src` [b, h, *, d] into
 * columns [at, at + n) of cache `dst` [b, h, *, d]: the new tokens' k/v,
 * appended in place (no other column is touched). */
static void cache_append(teexec_tensor *dst, size_t at, const teexec_tensor *src, size_t from,
                         size_t n)
{
    const int64_t *dd = teexec_tensor_dims(dst), *sd = teexec_tensor_dims(src);
    size_t bh = (size_t)dd[0] * (size_t)dd[1], cd = (size_t)dd[2], cs = (size_t)sd[2];
    size_t row = (size_t)dd[3] * elem_bytes(teexec_tensor_dtype(dst));
    uint8_t *d = teexec_tensor_data(dst);
    const uint8_t *sp = teexec_tensor_data_const(src);
    for (size_t k = 0; k < bh; k++) memcpy(d + (k * cd + at) * row, sp + (k * cs + from) * row, n * row);
}

/* With past buckets, the capacity the cache is kept (and fed) at to hold
 * `cols` columns: past_bucket, doubled until it holds them, at most
 * max_length rounded up to a bucket. Doubling keeps the shapes a long
 * generation brings the session (each a plan, on CUDA an executor to
 * build and capture) to a handful, at the price of attending over at most
 * twice the columns needed, all masked. */
static size_t bucket_cols(const teexec_generator *g, size_t cols)
{
    size_t pb = g->past_bucket;
    size_t top = (g->max_length + pb - 1) / pb * pb, c = pb;
    while (c < cols && c < top) c *= 2;
    return c > top ? top : c;
}

static size_t cache_capacity(const teexec_generator *g)
{
    if (g->kv_device) return g->dcache.base ? g->dcache.cols : 0;
    return g->cache[0] ? (size_t)teexec_tensor_dims(g->cache[0])[2] : 0;
}

/* Rows of different lengths share columns only through attention_mask. */
static teexec_status *kv_check_unpadded(const teexec_generator *g, size_t batch, size_t t_run)
{
    if (g->mask.name) return NULL;
    for (size_t r = 0; r < batch; r++) {
        const gen_seq *s = &g->seq[r];
        bool holes = s->len - s->cached != t_run;
        for (size_t c = 0; c < g->cols && !holes; c++) holes = !g->colmask[r * g->max_length + c];
        if (holes)
            return tx_error(TEEXEC_ERR_UNSUPPORTED, "sequences of different lengths (or a rewind "
                            "that leaves one shorter) need an attention_mask input to mask the "
                            "padding; the model has none");
    }
    return NULL;
}

/* Logits for every row with new tokens (checked before anything changes). */
static teexec_status *check_rows(const teexec_generator *g, size_t batch, const teexec_tensor *l,
                                 size_t t_run)
{
    for (size_t r = 0; r < batch; r++) {
        const float *row = NULL;
        if (g->seq[r].len > g->seq[r].cached) TX_TRY(logits_row(g, l, r, t_run - 1, t_run, &row));
    }
    return NULL;
}

/* A KV run succeeded: each row's last logits, and its new tokens' cache
 * columns (right-aligned in the run's t_run columns from c0). */
static void commit_rows(teexec_generator *g, size_t batch, const teexec_tensor *l, size_t t_run,
                        size_t c0)
{
    for (size_t r = 0; r < batch; r++) {
        gen_seq *s = &g->seq[r];
        size_t p = s->len - s->cached, lead = t_run - p;
        if (!p) continue;
        const float *row = NULL;
        (void)logits_row(g, l, r, t_run - 1, t_run, &row);
        memcpy(g->logits + r * g->vocab, row, g->vocab * sizeof(float));
        for (size_t j = 0; j < p; j++) {
            s->col[s->cached + j] = c0 + lead + j;
            g->colmask[r * g->max_length + c0 + lead + j] = 1;
        }
        s->cached = s->len;
        s->logits_ok = true;
    }
}

/* The device half of a KV run (g->kv_device): the past fed from the
 * device cache (first remade at b_run rows and capacity cp when it is not
 * that), the presents written into g->dpresent (remade when their shape
 * changes), then the t_run new columns of every layer copied into the
 * cache at c0. ins[0..n_in) are the ids, mask and positions. g's cache
 * and rows change only once everything succeeded; the caller updates the
 * counts. */
static teexec_status *kv_device_run(teexec_generator *g, size_t batch, size_t t_run, size_t c0,
                                    size_t cp, size_t b_run, size_t n_in, const char **names,
                                    teexec_tensor *const *ins)
{
    const tx_kv_layout *lay = &g->kv_layout;
    size_t cr = cp + t_run, n_run = n_in + g->n_kv;
    tx_kv_block fed = {0}, pres = {0};
    const teexec_tensor **run_in = calloc(n_run, sizeof(*run_in));
    teexec_tensor **outs = calloc(1 + g->n_kv, sizeof(*outs));
    const char **out_names = calloc(1 + g->n_kv, sizeof(*out_names));
    teexec_tensor *lf = NULL;
    teexec_status *st = (!run_in || !outs || !out_names) ? tx_oom() : NULL;
    bool new_fed = !g->dcache.base || g->dcache.batch != b_run || g->dcache.cols != cp;
    if (!st && new_fed) st = tx_kv_block_make(lay, b_run, cp, &g->dcache, &fed);
    tx_kv_block *past = new_fed ? &fed : &g->dcache;
    bool new_pres = !g->dpresent.base || g->dpresent.batch != b_run || g->dpresent.cols != cr;
    if (!st && new_pres) st = tx_kv_block_make(lay, b_run, cr, NULL, &pres);
    const tx_kv_block *present = new_pres ? &pres : &g->dpresent;
    if (!st) {
        for (size_t i = 0; i < n_in; i++) run_in[i] = ins[i];
        out_names[0] = g->logits_name; /* outs[0] NULL: a new host tensor */
        for (size_t i = 0; i < g->n_kv; i++) {
            names[n_in + i] = g->kv[i].past;
            run_in[n_in + i] = past->views[i];
            out_names[1 + i] = g->kv[i].present;
            outs[1 + i] = present->views[i];
        }
        st = teexec_session_run_into(g->session, NULL, n_run, names,
                                     (const teexec_tensor *const *)run_in, 1 + g->n_kv, out_names,
                                     outs);
    }
    if (!st) st = logits_as_float(g, outs[0], &lf);
    const teexec_tensor *l = lf ? lf : outs[0];
    if (!st) st = check_rows(g, batch, l, t_run);
    /* the new columns into the cache as fed */
    if (!st) st = tx_kv_block_copy_cols(lay, past, c0, present, cp, t_run);
    if (!st) {
        commit_rows(g, batch, l, t_run, c0);
        if (new_fed) {
            tx_kv_block_free(&g->dcache);
            g->dcache = fed;
            memset(&fed, 0, sizeof(fed));
        }
        if (new_pres) {
            tx_kv_block_free(&g->dpresent);
            g->dpresent = pres;
            memset(&pres, 0, sizeof(pres));
        }
    }
    tx_kv_block_free(&fed);
    tx_kv_block_free(&pres);
    teexec_tensor_destroy(lf);
    if (outs) teexec_tensor_destroy(outs[0]); /* the presents are views */
    free(outs);
    free(out_names);
    free(run_in);
    return st;
}

static teexec_status *kv_run(teexec_generator *g, size_t batch)
{
    size_t t_run = 0;
    for (size_t r = 0; r < batch; r++) {
        size_t p = g->seq[r].len - g->seq[r].cached;
        if (p > t_run) t_run = p;
    }
    size_t c0 = g->cols, c1 = c0 + t_run;
    if (c1 > g->max_length)
        return tx_error(TEEXEC_ERR_LIMIT, "the run needs %zu cache columns; max_length is %zu", c1,
                        g->max_length);
    TX_TRY(kv_check_unpadded(g, batch, t_run));
    /* the past as fed: with buckets the cache at its capacity, the c0
     * columns padded (masked) to the capacity that also holds the run's new
     * ones (c1), so consecutive decode steps bring the session the same
     * shapes and a run never outgrows its cache (even the first run gets
     * one masked bucket rather than an empty past: no zero-sized tensors
     * for the backend); only the new tokens' columns of the presents are
     * kept, appended in place. Without, exactly the c0 columns. */
    bool buckets = g->past_bucket > 1;
    size_t cp = buckets ? bucket_cols(g, c1) : c0, cr = cp + t_run;
    size_t b_run = g->ids.fixed_batch >= 0 ? (size_t)g->ids.fixed_batch : batch;
    if (g->cache_batch > b_run) b_run = g->cache_batch;
    size_t n_slots = 3 + g->n_kv, n_in = 0;
    int64_t *ids = malloc(b_run * t_run * sizeof(*ids));
    int64_t *pos = malloc(b_run * t_run * sizeof(*pos));
    int64_t *mask = malloc(b_run * cr * sizeof(*mask));
    const char **names = calloc(n_slots, sizeof(*names));
    teexec_tensor **ins = calloc(n_slots, sizeof(*ins));
    teexec_tensor **owned = calloc(g->n_kv, sizeof(*owned)); /* resized/empty pasts */
    const char **out_names = calloc(1 + g->n_kv, sizeof(*out_names));
    teexec_tensor **outs = calloc(1 + g->n_kv, sizeof(*outs));
    teexec_tensor *lf = NULL;
    teexec_status *st = (!ids || !pos || !mask || !names || !ins || !owned || !out_names || !outs)
                            ? tx_oom() : NULL;
    if (st) goto done;
    for (size_t r = 0; r < b_run; r++) {
        /* rows past the batch (a fixed batch dim, or rows rewound to
         * nothing) are all padding */
        const gen_seq *s = r < batch ? &g->seq[r] : NULL;
        size_t p = s ? s->len - s->cached : 0, lead = t_run - p;
        for (size_t c = 0; c < cp; c++)
            mask[r * cr + c] = c < c0 && r < g->max_batch && g->colmask[r * g->max_length + c];
        for (size_t t = 0; t < t_run; t++) {
            bool real = t >= lead;
            size_t tok = real ? s->cached + (t - lead) : 0;
            ids[r * t_run + t] = real ? s->ids[tok] : g->pad_id;
            pos[r * t_run + t] = real ? (int64_t)tok : 0;
            mask[r * cr + cp + t] = real;
        }
    }
    names[n_in] = g->ids.name;
    st = int_tensor(g->ids.dtype, b_run, t_run, ids, &ins[n_in++]);
    if (!st && g->mask.name) {
        names[n_in] = g->mask.name;
        st = int_tensor(g->mask.dtype, b_run, cr, mask, &ins[n_in++]);
    }
    if (!st && g->pos.name) {
        names[n_in] = g->pos.name;
        st = int_tensor(g->pos.dtype, b_run, t_run, pos, &ins[n_in++]);
    }
    if (!st && g->kv_device) {
        st = kv_device_run(g, batch, t_run, c0, cp, b_run, n_in, names, ins);
        if (!st) {
            g->cache_batch = b_run;
            g->cols = c1;
            g->runs++;
        }
        goto done;
    }
    size_t first_past = n_in;
    for (size_t i = 0; !st && i < g->n_kv; i++) {
        /* the seam: host tensors here; device-resident ones would be
         * passed through unchanged */
        if (!g->cache[i]) st = zero_past(&g->kv[i], b_run, cp, &owned[i]);
        else if (g->cache_batch < b_run || cache_capacity(g) != cp)
            st = cache_resize(g->cache[i], b_run, cp, &owned[i]);
        names[n_in++] = g->kv[i].past;
    }
    out_names[0] = g->logits_name;
    for (size_t i = 0; i < g->n_kv; i++) out_names[1 + i] = g->kv[i].present;
    if (!st) {
        const teexec_tensor **run_in = (const teexec_tensor **)ins;
        for (size_t i = 0; i < g->n_kv; i++)
            run_in[first_past + i] = owned[i] ? owned[i] : g->cache[i];
        st = teexec_session_run(g->session, n_in, names, (const teexec_tensor *const *)run_in,
                                1 + g->n_kv, out_names, outs);
        for (size_t i = 0; i < g->n_kv; i++) ins[first_past + i] = NULL; /* not ours to free */
    }
    for (size_t i = 0; !st && i < g->n_kv; i++) {
        const int64_t *d = teexec_tensor_dims(outs[1 + i]);
        if (teexec_tensor_rank(outs[1 + i]) != 4 || (size_t)d[0] != b_run ||
            d[1] != g->kv[i].heads || (size_t)d[2] != cr || d[3] != g->kv[i].head_dim ||
            teexec_tensor_dtype(outs[1 + i]) != g->kv[i].dtype)
            st = tx_error(TEEXEC_ERR_BAD_MODEL, "output \"%s\" is not [%zu, %lld, %zu, %lld] %s "
                          "(the past plus the new tokens)", g->kv[i].present, b_run,
                          (long long)g->kv[i].heads, cr, (long long)g->kv[i].head_dim,
                          teexec_dtype_name(g->kv[i].dtype));
    }
    if (!st) st = logits_as_float(g, outs[0], &lf);
    const teexec_tensor *l = lf ? lf : outs[0];
    /* check every row before changing anything */
    if (!st) st = check_rows(g, batch, l, t_run);
    if (st) goto done;
    commit_rows(g, batch, l, t_run, c0);
    /* the caches to keep: without buckets the presents themselves; with
     * them the past as fed, the new columns appended */
    for (size_t i = 0; i < g->n_kv; i++) {
        teexec_tensor *keep;
        if (!buckets) {
            keep = outs[1 + i];
            outs[1 + i] = NULL;
        } else {
            keep = owned[i] ? owned[i] : g->cache[i];
            if (keep == owned[i]) owned[i] = NULL;
            cache_append(keep, c0, outs[1 + i], cp, t_run);
        }
        if (keep != g->cache[i]) teexec_tensor_destroy(g->cache[i]);
        g->cache[i] = keep;
    }
    g->cache_batch = b_run;
    g->cols = c1;
    g->runs++;
done:
    if (ins) destroy_all(ins, n_in);
    if (owned) destroy_all(owned, g->n_kv);
    if (outs) destroy_all(outs, 1 + g->n_kv);
    teexec_tensor_destroy(lf);
    free(outs);
    free(out_names);
    free(owned);
    free(ins);
    free(names);
    free(ids);
    free(pos);
    free(mask);
    return st;
}

/* ---- the cache mode (session state) ------------------------------------ */

/* One run of a cache-mode model: every row's pending tokens (those not yet
 * in the cache) left-aligned in t_run positions at its own cache length,
 * padding after them (its k/v land past the row's length, where the next
 * run writes before anything reads: cache_len bounds every read). */
static teexec_status *state_run(teexec_generator *g, size_t batch)
{
    size_t t_run = 0;
    for (size_t r = 0; r < batch; r++) {
        size_t p = g->seq[r].len - g->seq[r].cached;
        if (p > t_run) t_run = p;
    }
    /* every row of the run writes t_run positions from its own length, a
     * row with nothing pending too (its padding lands past its length):
     * the row holding the most cached tokens is the one that overflows */
    if (kv_columns_needed(g, SIZE_MAX, 0) > g->state_cap) {
        size_t worst = 0;
        for (size_t r = 1; r < batch; r++)
            if (g->seq[r].cached > g->seq[worst].cached) worst = r;
        return tx_error(TEEXEC_ERR_LIMIT,
                        "sequence %zu holds %zu cached tokens; this run writes %zu positions "
                        "after each sequence's, past the cache's capacity of %zu (teexec "
                        "convert --kv-cache B,C: a larger C, or rewind the sequence)",
                        worst, g->seq[worst].cached, t_run, g->state_cap);
    }
    size_t n = batch * t_run;
    int64_t *ids = malloc((n ? n : 1) * sizeof(*ids));
    int64_t *pos = malloc((n ? n : 1) * sizeof(*pos));
    int64_t *lens = malloc((batch ? batch : 1) * sizeof(*lens)); /* cache_len */
    teexec_tensor *ins[3] = {NULL, NULL, NULL}, *out = NULL, *lf = NULL;
    const char *names[3] = {g->ids.name, g->pos.name, g->cache_len_name};
    teexec_status *st = (!ids || !pos || !lens) ? tx_oom() : NULL;
    for (size_t r = 0; !st && r < batch; r++) {
        const gen_seq *s = &g->seq[r];
        lens[r] = (int64_t)s->cached;
        for (size_t t = 0; t < t_run; t++) {
            bool real = s->cached + t < s->len;
            ids[r * t_run + t] = real ? s->ids[s->cached + t] : g->pad_id;
            pos[r * t_run + t] = (int64_t)(s->cached + t);
        }
    }
    if (!st) st = int_tensor(g->ids.dtype, batch, t_run, ids, &ins[0]);
    if (!st) st = int_tensor(g->pos.dtype, batch, t_run, pos, &ins[1]);
    int64_t lens_dim = (int64_t)batch;
    if (!st)
        st = teexec_tensor_create_copy(TEEXEC_DTYPE_INT64, 1, &lens_dim, lens,
                                       batch * sizeof(*lens), &ins[2]);
    if (!st)
        st = teexec_session_run(g->session, 3, names, (const teexec_tensor *const *)ins, 1,
                                &g->logits_name, &out);
    if (!st) st = logits_as_float(g, out, &lf);
    const teexec_tensor *l = lf ? lf : out;
    /* each computed row's logits at its last new token; the rows count as
     * cached only once all of them are in */
    for (size_t r = 0; !st && r < batch; r++) {
        size_t p = g->seq[r].len - g->seq[r].cached;
        const float *row = NULL;
        if (p) st = logits_row(g, l, r, p - 1, t_run, &row);
        if (row) memcpy(g->logits + r * g->vocab, row, g->vocab * sizeof(float));
    }
    for (size_t r = 0; !st && r < batch; r++) {
        gen_seq *s = &g->seq[r];
        if (s->len == s->cached) continue;
        s->cached = s->len;
        s->logits_ok = true;
    }
    if (!st) g->runs++;
    destroy_all(ins, 3);
    teexec_tensor_destroy(out);
    teexec_tensor_destroy(lf);
    free(ids);
    free(pos);
    free(lens);
    return st;
}

/* ---- compute / step / rewind -------------------------------------------- */

teexec_status *teexec_generator_compute(teexec_generator *g)
{
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "generator is NULL");
    size_t batch = teexec_generator_batch(g);
    bool stale = false;
    for (size_t r = 0; r < batch; r++) stale |= g->seq[r].len && !g->seq[r].logits_ok;
    if (!stale) return NULL;
    if (g->state_kv) return state_run(g, batch);
    return g->mode == TEEXEC_GENERATE_KV_CACHE ? kv_run(g, batch) : recompute_run(g, batch);
}

teexec_status *teexec_generator_step(teexec_generator *g, int64_t *out_ids, size_t n_ids)
{
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "generator is NULL");
    size_t batch = teexec_generator_batch(g);
    if (batch == 0) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no sequence has a token yet");
    if (n_ids < batch || !out_ids)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "room for %zu ids; the batch has %zu rows",
                        out_ids ? n_ids : 0, batch);
    for (size_t r = 0; r < batch; r++)
        if (!g->seq[r].len)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "sequence %zu has no tokens (rows below "
                            "the highest used one must have a prompt)", r);
    /* the token each row gains must fit after the pending ones ran */
    if (g->mode == TEEXEC_GENERATE_KV_CACHE) {
        size_t need = kv_columns_needed(g, SIZE_MAX, 0) + 1;
        if (need > g->max_length)
            return tx_error(TEEXEC_ERR_LIMIT, "a step would need %zu cache columns; max_length "
                            "is %zu", need, g->max_length);
    } else {
        TX_TRY(check_fits(g, SIZE_MAX, 1));
    }
    TX_TRY(teexec_generator_compute(g));
    int64_t *next = malloc(batch * sizeof(*next));
    if (!next) return tx_oom();
    for (size_t r = 0; r < batch; r++) {
        teexec_status *st = tx_sample(&g->sampling, g->logits + r * g->vocab, g->vocab, r,
                                      g->seq[r].len, &g->ws, &next[r]);
        if (st) {
            free(next);
            return tx_status_prefix(st, "sequence %zu", r);
        }
    }
    for (size_t r = 0; r < batch; r++) {
        teexec_status *st = seq_push(&g->seq[r], &next[r], 1, g->max_length);
        if (st) { /* only the first push of a row allocates; rows have tokens */
            free(next);
            return st;
        }
        out_ids[r] = next[r];
    }
    free(next);
    return NULL;
}

teexec_status *teexec_generator_rewind(teexec_generator *g, size_t length)
{
    if (!g) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "generator is NULL");
    if (g->mode != TEEXEC_GENERATE_KV_CACHE || g->state_kv) {
        /* the cache mode's rows hold what cache_len says: the last kept
         * token runs again, over the cache kept before it */
        for (size_t r = 0; r < g->max_batch; r++) {
            if (g->seq[r].len <= length) continue;
            size_t nl = length ? length - 1 : 0;
            if (g->seq[r].cached > nl) g->seq[r].cached = nl;
            g->seq[r].len = length;
            g->seq[r].logits_ok = false;
        }
        return NULL;
    }
    /* the columns still used after the cut, to size the new cache first:
     * failing there must change nothing */
    size_t keep_cols = 0;
    for (size_t r = 0; r < g->max_batch; r++) {
        const gen_seq *s = &g->seq[r];
        size_t cached = s->cached;
        if (s->len > length) {
            size_t nl = length ? length - 1 : 0; /* the last kept token runs again */
            if (cached > nl) cached = nl;
        }
        if (cached && s->col[cached - 1] + 1 > keep_cols) keep_cols = s->col[cached - 1] + 1;
    }
    teexec_tensor **cut = calloc(g->n_kv ? g->n_kv : 1, sizeof(*cut));
    if (!cut) return tx_oom();
    /* with buckets the capacity stays (the dropped columns are masked and
     * later overwritten); without, the cache is cut to what is kept */
    bool cut_needed = g->past_bucket <= 1 && keep_cols && keep_cols < g->cols;
    for (size_t i = 0; cut_needed && i < g->n_kv; i++) {
        teexec_status *st = cache_resize(g->cache[i], g->cache_batch, keep_cols, &cut[i]);
        if (st) {
            destroy_all(cut, g->n_kv);
            free(cut);
            return st;
        }
    }
    for (size_t r = 0; r < g->max_batch; r++) {
        gen_seq *s = &g->seq[r];
        if (s->len <= length) continue;
        size_t nl = length ? length - 1 : 0;
        for (size_t j = nl; j < s->cached; j++) g->colmask[r * g->max_length + s->col[j]] = 0;
        if (s->cached > nl) s->cached = nl;
        s->len = length;
        s->logits_ok = false;
    }
    for (size_t i = 0; i < g->n_kv; i++) {
        if (keep_cols == 0) {
            teexec_tensor_destroy(g->cache[i]);
            g->cache[i] = NULL;
        } else if (cut[i]) {
            teexec_tensor_destroy(g->cache[i]);
            g->cache[i] = cut[i];
        }
    }
    free(cut);
    if (keep_cols == 0) tx_kv_block_free(&g->dcache);
    if (keep_cols == 0) g->cache_batch = 0;
    for (size_t r = 0; r < g->max_batch && keep_cols < g->cols; r++)
        memset(g->colmask + r * g->max_length + keep_cols, 0, g->cols - keep_cols);
    g->cols = keep_cols;
    return NULL;
}
