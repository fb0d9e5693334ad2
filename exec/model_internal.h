/*
 * model_internal.h - the contents of a teexec_model (public handle).
 *
 * A loaded model is the tx_onnx_file (owning the unpacked ModelProto and any
 * mapped external data), the IR built over it, and the introspection tables
 * the public getters return, all computed once at load.
 *
 * Ownership: everything here is owned by the model and released by
 * teexec_model_destroy(); the IR points into `file`, so the IR is freed
 * first; `prepared` (its lowered copy) is released with it. Thread-safety: immutable after load; concurrent reads are fine
 * (reading external data through `file` is serialized by the loader), but
 * for `weights`, which locks itself.
 */
#ifndef TEEXEC_EXEC_MODEL_INTERNAL_H
#define TEEXEC_EXEC_MODEL_INTERNAL_H

#include "format/onnx_load.h"
#include "format/tensor_proto.h"
#include "import/ir.h"
#include "teexec/teexec.h"

struct teexec_model {
    tx_onnx_file *file;
    tx_ir_model *ir;

    teexec_opset *opsets;             size_t n_opsets;
    teexec_value_info *inputs;        size_t n_inputs;   /* graph inputs minus initializers */
    teexec_value_info *outputs;       size_t n_outputs;
    teexec_op_count *ops;             size_t n_ops;
    teexec_param_stats params;
    teexec_external_file *externals;  size_t n_externals;
    teexec_function_info *functions;  size_t n_functions;
    /* The loader's list the externals table points into (locations). All
     * other strings of the tables point into the IR. */
    tx_external_stat *external_stats; size_t n_external_stats;
    /* The lowered copy every executor runs (exec/prepare.h); NULL for a
     * model that is itself such a copy. */
    struct tx_prepared *prepared;
    /* The device copies of this model's initializers shared by its CUDA
     * executors (exec/weight_share.h): the one part that changes after
     * load, behind its own mutex. */
    struct tx_weight_share *weights;
};

/* Loads serialized bytes as a model that is a derived copy (a lowered or
 * inlined model): like teexec_model_load_memory, but not prepared again.
 * `side` (may be NULL) is the side data its tensors reference
 * (format/onnx_load.h): once the bytes parse, the model takes it over
 * and empties *side; the caller frees whatever is left. */
teexec_status *tx_model_load_derived(const void *data, size_t size, const char *base_dir,
                                     const teexec_load_options *limits, tx_side_data *side,
                                     teexec_model **out) TX_NODISCARD;

#endif
