/*
 * te_schema.h - the TE operation domain ("te.ops", version 1): one static
 * table entry per basic op, the single source of truth for what an op takes
 * and gives (main input, extra inputs, parameters, main output, extra
 * outputs, the op's own saved tensors "aux"), its attributes with types and
 * defaults, its shape/type rule, its forward and backward formulas (as text
 * for the docs), its saved-context schema (exactly what its backward reads)
 * and its quantizer slots. docs/te-ops.md is generated from this table
 * (te_schema_doc.c); the importer, the planner and every backend read it.
 *
 * The math lives elsewhere (kernels/cpu/te_*.c for the CPU backend; this
 * layer knows no devices). Op ids index both this table and each backend's
 * implementation table.
 *
 * Ownership: every schema, port and string returned is static and lives for
 * the whole process. Thread-safety: the table is immutable; all functions
 * are pure and thread-safe.
 */
#ifndef TEEXEC_FORMAT_TE_SCHEMA_H
#define TEEXEC_FORMAT_TE_SCHEMA_H

#include "base/dtype.h"
#include "base/shape.h"
#include "base/status.h"

#include <stdbool.h>
#include <stdint.h>

#define TX_TE_DOMAIN "te.ops"
#define TX_TE_DOMAIN_VERSION 1
/* Reserved for the planner's fuser-group functions (FunctionProtos whose
 * bodies are te.ops nodes); no op of this table lives there. */
#define TX_TE_FUSED_DOMAIN "te.fused"

/* Upper bounds on the fixed-size arrays below. */
#define TX_TE_MAX_EXTRA 8 /* extra inputs, extra outputs, aux tensors */
#define TX_TE_MAX_ATTRS 8
#define TX_TE_MAX_SAVED 8 /* saved entries in a schema (PARAMS_ALL counts once) */

typedef enum tx_te_op_id {
    TX_TE_LINEAR,
    TX_TE_BIAS,
    TX_TE_LAYER_NORM,
    TX_TE_RMS_NORM,
    TX_TE_L2_NORMALIZATION,
    TX_TE_GELU,
    TX_TE_QGELU,
    TX_TE_RELU,
    TX_TE_SRELU,
    TX_TE_SILU,
    TX_TE_GLU,
    TX_TE_GEGLU,
    TX_TE_QGEGLU,
    TX_TE_REGLU,
    TX_TE_SREGLU,
    TX_TE_SWIGLU,
    TX_TE_CLAMPED_SWIGLU,
    TX_TE_SCALED_SWIGLU,
    TX_TE_SCALED_SRELU,
    TX_TE_SITUGLU,
    TX_TE_SCALED_SITUGLU,
    TX_TE_SCALED_CLAMPED_QGEGLU,
    TX_TE_DROPOUT,
    TX_TE_QUANTIZE,
    TX_TE_RESHAPE,
    TX_TE_IDENTITY,
    TX_TE_CONSTANT_SCALE,
    TX_TE_ADD_EXTRA_INPUT,
    TX_TE_MAKE_EXTRA_OUTPUT,
    TX_TE_GROUPED_LINEAR,
    TX_TE_DOT_PRODUCT_ATTENTION,
    TX_TE_ROTARY_EMBEDDING,
    TX_TE_EMBEDDING,
    TX_TE_ALL_GATHER,
    TX_TE_ALL_REDUCE,
    TX_TE_REDUCE_SCATTER,
    TX_TE_OP_COUNT
} tx_te_op_id;

/* ---- attributes ---------------------------------------------------- */

typedef enum tx_te_attr_type {
    TX_TE_ATTR_INT,    /* int64 */
    TX_TE_ATTR_FLOAT,  /* stored as double; ONNX float attribute */
    TX_TE_ATTR_ENUM,   /* an ONNX string attribute from a fixed list; value = index */
    TX_TE_ATTR_INTS    /* int64 list */
} tx_te_attr_type;

/* One attribute value. Which field is meaningful follows the schema's type
 * (ENUM uses i: the index into the choices). ints is borrowed from whoever
 * built the value (the IR node, a test), never owned here. */
typedef struct tx_te_attr_value {
    int64_t i;
    double f;
    const int64_t *ints;
    int32_t n_ints;
} tx_te_attr_value;

typedef struct tx_te_attr_schema {
    const char *name;
    tx_te_attr_type type;
    bool required;        /* no default: a node must set it */
    int64_t def_i;        /* INT / ENUM default */
    double def_f;         /* FLOAT default */
    const char *choices;  /* ENUM: "tanh|none" (index 0 first) */
    const char *doc;
} tx_te_attr_schema;

/* ---- tensors an op takes and gives --------------------------------- */

enum {
    TX_TE_PORT_OPTIONAL = 1u << 0, /* may be absent (NULL in the args) */
    TX_TE_PORT_NO_GRAD = 1u << 1,  /* integer / constant: no gradient flows */
    TX_TE_PORT_PER_GROUP = 1u << 2 /* one per group (GroupedLinear parameters) */
};

typedef struct tx_te_port {
    const char *name;
    const char *type;  /* "T" (float32|float16|bfloat16|float64), "int64", ... */
    const char *shape; /* for the docs, e.g. "[N, K]" */
    unsigned flags;
    const char *doc;
} tx_te_port;

/* ---- saved context -------------------------------------------------- */

/* Where a saved tensor comes from. Inputs, parameters and the output are
 * saved by reference by setup_context; AUX tensors are written by the
 * forward itself. PARAMS_ALL stands for every parameter in order (the
 * variadic GroupedLinear) and expands to n_params entries. */
typedef enum tx_te_src {
    TX_TE_SRC_INPUT,
    TX_TE_SRC_EXTRA_INPUT,
    TX_TE_SRC_PARAM,
    TX_TE_SRC_PARAMS_ALL,
    TX_TE_SRC_OUTPUT,
    TX_TE_SRC_AUX
} tx_te_src;

/* Which gradients need a saved entry: a planner that needs none of them
 * need not keep it (e.g. Linear's x when the weight is frozen). */
enum {
    TX_TE_FOR_DX = 1u << 0,     /* grad of the main input */
    TX_TE_FOR_DPARAMS = 1u << 1,
    TX_TE_FOR_DEXTRA = 1u << 2, /* grads of extra inputs */
    TX_TE_FOR_ALL = 7u
};

typedef struct tx_te_saved_schema {
    const char *name;
    tx_te_src src;
    int index;          /* which extra input / param / aux; 0 otherwise */
    unsigned needed_for;
} tx_te_saved_schema;

/* ---- quantizer slots ------------------------------------------------ */

typedef enum tx_te_qmode { TX_TE_QMODE_FORWARD, TX_TE_QMODE_BACKWARD } tx_te_qmode;
typedef enum tx_te_qrole { TX_TE_QROLE_INPUT, TX_TE_QROLE_WEIGHT, TX_TE_QROLE_GRAD_OUTPUT } tx_te_qrole;

typedef struct tx_te_quantizer_slot {
    tx_te_qmode mode;
    tx_te_qrole role;
    const char *what; /* the tensor it quantizes, e.g. "x", "weight_g" */
} tx_te_quantizer_slot;

/* ---- shape / type rule ---------------------------------------------- */

/* dtype + shape of a value, no data. */
typedef struct tx_te_tinfo {
    teexec_dtype dtype;
    tx_shape shape;
} tx_te_tinfo;

typedef struct tx_te_infer_in {
    const tx_te_attr_value *attrs;   /* schema order, defaults filled in */
    const tx_te_tinfo *input;
    const tx_te_tinfo *const *extra_inputs; /* NULL entries: absent optional */
    int n_extra_inputs;
    const tx_te_tinfo *const *params;
    int n_params;
} tx_te_infer_in;

typedef struct tx_te_infer_out {
    tx_te_tinfo output;
    tx_te_tinfo extra_outputs[TX_TE_MAX_EXTRA];
    tx_te_tinfo aux[TX_TE_MAX_EXTRA];
} tx_te_infer_out;

typedef teexec_status *(*tx_te_infer_fn)(const tx_te_infer_in *in, tx_te_infer_out *out);

/* ---- op classes ------------------------------------------------------ */

/* What an op is, for every pass that treats a family of ops alike (the
 * planner's matchers, the executors' dispatch, the backends' activation
 * tables): they ask the table, so a new op of a family is its table entry
 * plus its math, not an edit of each pass. */
enum {
    TX_TE_CLASS_ACTIVATION = 1u << 0, /* elementwise on x: y = f(x), or gated (below) */
    TX_TE_CLASS_GATED = 1u << 1,      /* x = [a | b] on the last dim (TE's order: a is the
                                         gate); y = f(a)·up(b), half x's width */
    TX_TE_CLASS_ROW_SCALED = 1u << 2, /* extra input 0 "scales" [rows]: y is scaled per row and
                                         the backward gives dscales */
    TX_TE_CLASS_NORM = 1u << 3        /* LayerNorm / RMSNorm: per-row normalisation with a
                                         weight and saved row statistics */
};

/* An activation's scalar function f (of the gate a, when gated). Backends
 * index their (f, f') tables by it. */
typedef enum tx_te_act_fn {
    TX_TE_ACT_NONE = 0, /* not an activation */
    TX_TE_ACT_GELU,     /* tanh or erf form, by attribute approximate (TX_TE_A_GELU_APPROX) */
    TX_TE_ACT_QGELU,    /* x·σ(alpha·x), alpha 1.702 (CLAMP: attribute alpha) */
    TX_TE_ACT_RELU,
    TX_TE_ACT_SRELU,
    TX_TE_ACT_SILU,
    TX_TE_ACT_SIGMOID,  /* GLU's gate */
    TX_TE_ACT_SITU,     /* β1·tanh(x/β1)·σ(x), β1 = attribute beta1 (TX_TE_A_SITU_BETA1) */
    TX_TE_ACT_FN_COUNT
} tx_te_act_fn;

/* How a gated activation bounds its halves before y = f(ã)·b̃. */
typedef enum tx_te_act_cap {
    TX_TE_CAP_NONE = 0, /* ã = a, b̃ = b */
    TX_TE_CAP_CLAMP,    /* ã = min(a, limit), b̃ = clamp(b, ±limit) + offset; attributes at
                           TX_TE_A_CLAMP_* (ClampedSwiGLU) */
    TX_TE_CAP_SOFTCAP   /* ã = a, b̃ = β2·tanh(b/β2); β2 = attribute beta2 (SiTU) */
} tx_te_act_cap;

/* ---- the op --------------------------------------------------------- */

typedef struct tx_te_op_schema {
    tx_te_op_id id;
    const char *name;       /* op_type in domain te.ops */
    const char *summary;
    tx_te_port input;
    const tx_te_port *extra_inputs;
    int n_extra_inputs;
    const tx_te_port *params; /* PER_GROUP params repeat num_groups times, grouped by port */
    int n_params;
    tx_te_port output;
    const tx_te_port *extra_outputs;
    int n_extra_outputs;
    const tx_te_port *aux;
    int n_aux;
    const tx_te_attr_schema *attrs;
    int n_attrs;
    const tx_te_saved_schema *saved;
    int n_saved;
    const tx_te_quantizer_slot *quantizers;
    int n_quantizers;
    const char *shape_rule; /* text */
    const char *forward;    /* text */
    const char *backward;   /* text */
    tx_te_infer_fn infer;
    unsigned op_class;      /* TX_TE_CLASS_* bits; 0 for ops of no family */
    tx_te_act_fn act_fn;    /* activations: f; TX_TE_ACT_NONE otherwise */
    tx_te_act_cap act_cap;  /* gated activations: the bound on the halves */
} tx_te_op_schema;

/* The schema of an op id; NULL when out of range. */
const tx_te_op_schema *tx_te_schema(tx_te_op_id id);
/* By op_type name (exact, case-sensitive); NULL when unknown. */
const tx_te_op_schema *tx_te_schema_find(const char *name);

/* True when op id has every TX_TE_CLASS_* bit of `classes` (false for an
 * id out of range). */
bool tx_te_op_is(tx_te_op_id id, unsigned classes);
/* Activations with no row scale: what the unscaled activation fusions take. */
bool tx_te_op_is_unscaled_act(tx_te_op_id id);
/* Plain elementwise activations y = f(x): not gated, not row-scaled. */
bool tx_te_op_is_elementwise_act(tx_te_op_id id);

/* Index of a named attribute in a schema; -1 when absent. */
int tx_te_attr_index(const tx_te_op_schema *s, const char *name);
/* Fills out[0..n_attrs-1] with the defaults (required ones zeroed). */
void tx_te_attr_defaults(const tx_te_op_schema *s, tx_te_attr_value *out);
/* ENUM: the index of `text` among the choices, -1 when not one of them. */
int tx_te_attr_enum_index(const tx_te_attr_schema *a, const char *text);
/* ENUM: the name of choice `index` written into buf; returns buf ("" when out of range). */
const char *tx_te_attr_enum_name(const tx_te_attr_schema *a, int64_t index, char *buf, size_t size);

/* Number of parameter tensors a node with these attributes has: n_params,
 * or for PER_GROUP ports, num_groups per port. */
teexec_status *tx_te_param_count(const tx_te_op_schema *s, const tx_te_attr_value *attrs,
                                 int *out) TX_NODISCARD;

/* Checks counts (extra inputs incl. optional ones, params) and float/integer
 * types, then runs the op's rule. Errors name the op. */
teexec_status *tx_te_infer(const tx_te_op_schema *s, const tx_te_infer_in *in,
                           tx_te_infer_out *out) TX_NODISCARD;

/* The "T" of the ports is tx_dtype_is_real (base/dtype.h); the dtype of
 * saved statistics is tx_dtype_stat (base/dtype.h). */

/* The spec as text: markdown (docs/te-ops.md) or a compact table. A new
 * malloc'd NUL-terminated string in *out (free() it). */
teexec_status *tx_te_schema_markdown(char **out) TX_NODISCARD;
teexec_status *tx_te_schema_table(char **out) TX_NODISCARD;

/* Attribute indices, named so implementations read attrs[...] safely; a
 * test checks them against the table's names. */
enum { TX_TE_A_NORM_EPS = 0, TX_TE_A_NORM_ZCG = 1 };                   /* LayerNorm, RMSNorm */
enum { TX_TE_A_L2_EPS = 0 };
enum { TX_TE_A_GELU_APPROX = 0 };                                       /* GELU, GEGLU: 0 tanh, 1 none */
enum { TX_TE_A_CLAMP_LIMIT = 0, TX_TE_A_CLAMP_ALPHA = 1, TX_TE_A_CLAMP_OFFSET = 2 };
enum { TX_TE_A_SITU_BETA1 = 0, TX_TE_A_SITU_BETA2 = 1 };               /* SiTUGLU, ScaledSiTUGLU */
enum { TX_TE_A_DROPOUT_P = 0, TX_TE_A_DROPOUT_SEED = 1 };
enum { TX_TE_A_COMM_WORLD = 0 };                                        /* AllGather, ReduceScatter */
enum { TX_TE_A_QUANTIZE_FORWARD = 0, TX_TE_A_QUANTIZE_BACKWARD = 1 };
enum { TX_TE_A_RESHAPE_SHAPE = 0 };
enum { TX_TE_A_SCALE = 0 };                                             /* ConstantScale */
enum { TX_TE_A_GL_NUM_GROUPS = 0, TX_TE_A_GL_BIAS = 1 };                /* GroupedLinear */
enum { TX_TE_A_DPA_HEADS = 0, TX_TE_A_DPA_KV_HEADS = 1, TX_TE_A_DPA_CAUSAL = 2,
       TX_TE_A_DPA_SCALE = 3, TX_TE_A_DPA_LAYOUT = 4 };
/* DotProductAttention's extra inputs; the cache mode is k_cache present. */
enum { TX_TE_DPA_IN_K = 0, TX_TE_DPA_IN_V = 1, TX_TE_DPA_IN_MASK = 2, TX_TE_DPA_IN_K_CACHE = 3,
       TX_TE_DPA_IN_V_CACHE = 4, TX_TE_DPA_IN_CACHE_LEN = 5,
       TX_TE_DPA_N_IN = 6 /* the schema's extra-input count */ };

/* DotProductAttention's cache mode, the one shape/type rule the schema's
 * inference, the CPU kernel and the CUDA preparation share: q [b, s, h, d]
 * bshd, the new k [b, s, h_kv, d] and v [b, s, h_kv, d_v] (the queries'
 * own tokens), k_cache [B, cap, h_kv, d] and v_cache [B, cap, h_kv, d_v]
 * with B >= b and cap >= s in k's dtype, cache_len int64 [b], no mask.
 * A NULL shape is an absent input. */
typedef struct tx_te_dpa_cache_shapes {
    const tx_te_tinfo *q, *k, *v, *mask, *k_cache, *v_cache, *cache_len;
    int64_t layout;
} tx_te_dpa_cache_shapes;
teexec_status *tx_te_dpa_cache_check(const tx_te_dpa_cache_shapes *c) TX_NODISCARD;

enum { TX_TE_A_ROPE_LAYOUT = 0, TX_TE_A_ROPE_INTERLEAVED = 1, TX_TE_A_ROPE_BASE = 2,
       TX_TE_A_ROPE_DIM = 3 };
enum { TX_TE_LAYOUT_BSHD = 0, TX_TE_LAYOUT_SBHD = 1 };
enum { TX_TE_GELU_TANH = 0, TX_TE_GELU_ERF = 1 };

#endif
