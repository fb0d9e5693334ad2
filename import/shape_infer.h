/*
 * shape_infer.h - per-node shape and type inference for the standard ONNX
 * ops teexec runs (the issue-3 op list), with data-dependent shapes.
 *
 * Inference sees each input as a dtype, a shape (known or not) and, where
 * the caller knows it, the input's constant value (an initializer, a
 * Constant, a folded Shape->Gather->Concat chain, or at run time the actual
 * tensor). Ops whose output shape depends on input values (Reshape, Slice,
 * Range, ConstantOfShape, Expand, Tile, Squeeze/Unsqueeze/ReduceX/Split
 * with axes as an input, TopK's K) use that value; without it, the output
 * shape is reported unknown (shape_known false) rather than guessed, and the
 * caller infers again once values are available.
 *
 * Shape, Size and Constant also produce their output value (they need only
 * shapes or attributes), so the caller can fold the integer subgraphs that
 * PyTorch exports around Reshape.
 *
 * Ownership: an output's `value` tensor, when has_value is set, is owned by
 * the tx_infer_value; release with tx_infer_value_clear(). Input values are
 * borrowed. Thread-safety: pure over its arguments.
 */
#ifndef TEEXEC_IMPORT_SHAPE_INFER_H
#define TEEXEC_IMPORT_SHAPE_INFER_H

#include "base/shape.h"
#include "base/tensor.h"
#include "import/ir.h"

#include <stdbool.h>

typedef struct tx_infer_value {
    teexec_dtype dtype;     /* UNDEFINED when not known */
    bool shape_known;
    tx_shape shape;
    /* The value when known. For inputs: borrowed pointer (may be NULL).
     * For outputs of Shape/Size/Constant: points at `owned`. */
    const tx_tensor *value;
    tx_tensor owned;
} tx_infer_value;

/* Resets v, releasing an owned value. Accepts NULL. */
void tx_infer_value_clear(tx_infer_value *v);

/* True when `op_type` in `domain` at `opset` is an op this inference (and
 * the CPU backend) knows; used to list every unsupported op of a model. */
bool tx_infer_op_known(const char *domain, const char *op_type, int64_t opset);

/* Infers node->n_outputs outputs from node->n_inputs inputs. inputs[i] is
 * NULL for an omitted optional input; outputs[j] must be zeroed by the
 * caller (omitted outputs are filled anyway and may be ignored). `file`
 * decodes Constant attributes (may be NULL). Errors name the node and say
 * which rule the inputs break. */
teexec_status *tx_infer_node(const tx_ir_node *node, const tx_onnx_file *file,
                             const tx_infer_value *const *inputs,
                             tx_infer_value *outputs) TX_NODISCARD;

/* Reads an integer tensor (INT32 or INT64, any rank) as int64 values into
 * a malloc'd array (*out, *count); *out is NULL when count is 0. */
teexec_status *tx_tensor_read_ints(const tx_tensor *t, int64_t **out,
                                   size_t *count) TX_NODISCARD;

/* Reads the first element of a numeric scalar-like tensor as a double
 * (float, double, fp16, bf16, int8..int64, uint8..uint64, bool). */
teexec_status *tx_tensor_read_scalar(const tx_tensor *t, double *out) TX_NODISCARD;

/* ---- helpers the CPU handlers share with inference (same rules at plan
 * and run time) */

/* Split: the size of each of node->n_outputs outputs along the axis
 * (`split` attribute before opset 13, the optional input `split_input`
 * from 13, equal parts or opset 18's num_outputs otherwise). */
teexec_status *tx_split_sizes(const tx_ir_node *n, const tx_tensor *split_input,
                              const tx_shape *in, int32_t *axis_out,
                              int64_t *sizes) TX_NODISCARD;

/* Slice: attributes before opset 10, else vals[0..3] = starts, ends, axes,
 * steps (NULL when absent). Writes per-axis first index/step and the output
 * shape as tx_shape_slice does. */
teexec_status *tx_slice_params(const tx_ir_node *n, const tx_tensor *const *vals,
                               const tx_shape *in, int64_t *eff_start, int64_t *eff_step,
                               tx_shape *out) TX_NODISCARD;

/* Conv: the geometry a node gives inputs X [N, C, D...] and W [M, C/group,
 * K...]: auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID) resolved into
 * explicit pads (nsp begins, then nsp ends), strides and dilations
 * defaulted, kernel_shape checked against W, and the output shape. */
typedef struct tx_conv_geom {
    int32_t nsp; /* spatial dims */
    int64_t group;
    int64_t strides[TX_MAX_RANK], dilations[TX_MAX_RANK], pads[2 * TX_MAX_RANK];
    tx_shape out;
} tx_conv_geom;

teexec_status *tx_conv_geometry(const tx_ir_node *n, const tx_shape *x, const tx_shape *w,
                                tx_conv_geom *g) TX_NODISCARD;

/* Einsum equations: every label (letters, and one label per ellipsis dim)
 * is numbered; each input dim and output dim names its label. */
#define TX_EINSUM_MAX_INPUTS 8
#define TX_EINSUM_MAX_LABELS (52 + TX_MAX_RANK)
typedef struct tx_einsum {
    int n_inputs;
    int n_labels;                   /* letter labels */
    int ell_rank;                   /* dims the ellipsis stands for */
    int letter_index[128];
    int in_rank[TX_EINSUM_MAX_INPUTS];
    int in_labels[TX_EINSUM_MAX_INPUTS][TX_MAX_RANK];
    int out_rank;
    int out_labels[TX_MAX_RANK];
    int64_t label_dim[TX_EINSUM_MAX_LABELS];
} tx_einsum;

teexec_status *tx_einsum_parse(const tx_ir_node *n, size_t n_in,
                               const tx_shape *const *shapes, tx_einsum *e) TX_NODISCARD;

#endif
