/*
 * lower.h - lowering of standard ONNX subgraphs (as PyTorch's exporters
 * write them) into TE basic ops (domain te.ops), over a rewrite graph
 * (import/rewrite.h). Patterns match by structure and constant values,
 * never by node names; anything not lowered stays a standard op.
 *
 * Passes, in the order tx_lower runs them (each its own file):
 *   lower_unbroadcast.c an initializer whose dim-0 slices are equal (a
 *                      parameter the exporter repeated over the batch) ->
 *                      its first slice, broadcast back where needed
 *   lower_attention.c  scaled-dot-product attention subgraphs and the Attention
 *                      op -> DotProductAttention
 *   lower_rope.c       x*cos + rotate_half(x)*sin with constant tables -> RotaryEmbedding
 *   lower_layout.c     Transposes that undo each other (the two passes above
 *                      add them around [b, h, s, d] operands) removed
 *   lower_norm.c       LayerNormalization and its decomposed forms -> LayerNorm;
 *                      RMSNormalization and x*rsqrt(mean(x^2)+eps)*w forms -> RMSNorm
 *   lower_embed.c      Gather on a float [V, D] initializer -> Embedding
 *   lower_linear.c     MatMul / Gemm (+Add) with a constant weight -> Linear (+Bias);
 *                      lower_patch.c: a patch-embedding Conv -> Linear
 *   lower_act.c        erf / tanh GELU formulas and the Gelu op -> GELU; Relu ->
 *                      ReLU; x*Sigmoid(x) -> SiLU; SiLU(a)*b -> SwiGLU,
 *                      GELU(a)*b -> GEGLU, ReLU(a)*b -> ReGLU (the two
 *                      Linears merged when they read the same input); a
 *                      scalar Mul of a te.ops output -> ConstantScale
 *   lower_quant.c      Q->DQ pairs on a Linear's operands -> annotation attributes
 *   lower_residual.c   residual Add -> AddExtraInput; fan-out -> MakeExtraOutput
 *
 * What a lowered node remembers of the user's model (attributes outside the
 * te.ops schema, ignored by the kernels, kept by the converter):
 *   Linear:  weight_source  the original initializer name(s), "a" or "a,b"
 *                           when two Linears were merged (rows concatenated)
 *            weight_layout  "NK" (as TE stores it) or "KN" (the original was
 *                           the transpose: MatMul's [K, N])
 *            weight_split   INTS: rows of each source when merged
 *            weight_shape   INTS: the original's shape when it was not 2-D
 *                           (a patch Conv's [o, c, kh, kw], flattened to
 *                           [o, c*kh*kw] with the same bytes)
 *            quant_input, quant_weight, quant_grad_output
 *                           format annotations from Q/DQ pairs (tx_qann
 *                           names: "fp8-tensor", "mxfp8", "nvfp4", "blocked",
 *                           "other") or "none" to keep high precision
 *   Bias:    bias_source, bias_split (same meaning)
 *   Embedding: weight_source, the table's own name
 * The lowered weight keeps the original initializer's name when it is not
 * merged (transposed in place when its layout was KN); a merged weight gets
 * a fresh name.
 *
 * Tied LM heads: both exporters write a tied head's weight as its own
 * initializer, bitwise the embedding table's transpose (MatMul's [K, N]) or
 * the table itself (Gemm transB=1). The head's Linear then reads the table
 * (the Embedding's weight, one initializer for both uses, as in the user's
 * model) with weight_source naming the head's copy, which is dropped, and
 * weight_layout saying how it related to the table ("KN": its transpose).
 * tx_param_sources maps that copy to the table (transposed), so its
 * gradient is the table's, which is the tied parameter's whole gradient
 * (what PyTorch reports under each name), and the table maps to itself.
 *
 * Ownership: the report is malloc'd, freed with tx_lower_report_free.
 * Thread-safety: a pass edits only the graph it is given.
 */
#ifndef TEEXEC_IMPORT_LOWER_H
#define TEEXEC_IMPORT_LOWER_H

#include "import/rewrite.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct tx_lower_options {
    bool unbroadcast, attention, rope, norms, linear, activations, quant, residual, embedding,
        layout;
} tx_lower_options;

/* Every pass on. */
void tx_lower_options_default(tx_lower_options *o);

/* One pattern found: lowered, or recognized but left as standard ops with
 * the reason (for `teexec plan --explain` and `teexec convert`'s summary). */
typedef struct tx_lower_note {
    char *pattern;   /* "Linear", "GELU(tanh)", "DotProductAttention", ... */
    char *node;      /* the anchor node's name (first node of the match) */
    bool lowered;
    char *reason;    /* NULL when lowered */
} tx_lower_note;

typedef struct tx_lower_report {
    tx_lower_note *notes;
    size_t n_notes, cap_notes;
} tx_lower_report;

void tx_lower_report_free(tx_lower_report *r);
/* Adds a note (copies the strings; reason may be NULL). */
teexec_status *tx_lower_note_add(tx_lower_report *r, const char *pattern, const char *node,
                                 bool lowered, const char *reason) TX_NODISCARD;

/* Runs the passes `o` enables (NULL = all) over g. *report (may be NULL)
 * gets what was found. Lowering a graph already in te.ops changes nothing. */
teexec_status *tx_lower(tx_rw_graph *g, const tx_lower_options *o,
                        tx_lower_report **report) TX_NODISCARD;

/* The passes, for tests and for tx_lower. Each appends its notes to r. */
teexec_status *tx_lower_unbroadcast(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_attention(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_rope(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_norms(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_linear(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
/* Part of the linear pass: patch-embedding Convs -> Linear (lower_patch.c). */
teexec_status *tx_lower_patch_conv(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_activations(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_embedding(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_layout(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_quant(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;
teexec_status *tx_lower_residual(tx_rw_graph *g, tx_lower_report *r) TX_NODISCARD;

/* Not one of tx_lower's passes: `teexec convert --kv-cache` runs it on a
 * lowered decoder with past_key_values inputs (lower_kv_cache.c): its
 * attention in DotProductAttention's cache mode, the caches state inputs
 * [batch, capacity, h_kv, d]. On an error the graph is half edited:
 * discard it. */
teexec_status *tx_lower_kv_cache(tx_rw_graph *g, int64_t batch, int64_t capacity,
                                 tx_lower_report *r) TX_NODISCARD;

/* ---- mapping lowered parameters back to the user's initializers ---------- */

#define TX_PARAM_MAX_RANK 8

/* One original initializer and where it lives in a lowered model. */
typedef struct tx_param_source {
    char *original;     /* the user's initializer name */
    char *lowered;      /* the lowered model's initializer holding it */
    bool transposed;    /* original = transpose of the lowered rows */
    int64_t row_offset; /* first row in `lowered` (merged weights) */
    int64_t rows;       /* rows of `lowered` that belong to it; -1 = all */
    int32_t orig_rank;  /* > 0: the original's shape (weight_shape), the
                           selected (transposed) rows reshaped to it */
    int64_t orig_dims[TX_PARAM_MAX_RANK];
    /* original = `repeat` copies of the (selected, transposed) lowered
     * tensor along dim 0, whose dim 0 is 1 (lower_unbroadcast.c); 1 = none.
     * Set by the caller that knows the user's shapes (exec/prepare.c). */
    int64_t repeat;
} tx_param_source;

/* Reads the weight_source / bias_source annotations of a lowered model's
 * te.ops nodes; initializers without annotations map to themselves.
 * *out malloc'd; free with tx_param_sources_free. */
teexec_status *tx_param_sources(const tx_ir_graph *lowered, tx_param_source **out,
                                size_t *n) TX_NODISCARD;
void tx_param_sources_free(tx_param_source *s, size_t n);

/* The gradient (or value) of `src->original` from the lowered tensor t:
 * rows selected, transposed back when needed, repeated over dim 0 when the
 * exporter had repeated it (the one parameter's value, or its gradient, in
 * every copy). *out allocated (release). */
teexec_status *tx_param_to_original(const tx_param_source *src, const tx_tensor *t,
                                    tx_tensor *out) TX_NODISCARD;

#endif
