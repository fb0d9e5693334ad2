/*
 * model_write.h - building an ONNX ModelProto from parts and serializing it.
 *
 * The writer is an arena: every message, string and array made through it
 * belongs to the tx_mw and is freed with tx_mw_free, so a caller can build a
 * whole ModelProto (mixing in borrowed messages of a loaded file, which are
 * packed as they are and never freed here) without tracking each piece. The
 * format layer knows nothing about the IR or the rewrite graph: import/
 * (rewrite_emit.c) decides what goes into the model, this file how it is
 * encoded.
 *
 * Tensors are written with raw_data (little-endian, sub-byte types packed
 * as tensor.h stores them), strings with string_data. A ModelProto packs to
 * the wire format protobuf-c defines; the bytes load back through
 * tx_onnx_load_memory.
 *
 * Ownership: pointers returned by tx_mw_* live until tx_mw_free; the bytes
 * of tx_mw_pack are malloc'd and owned by the caller.
 * Thread-safety: a tx_mw is used by one thread at a time.
 */
#ifndef TEEXEC_FORMAT_MODEL_WRITE_H
#define TEEXEC_FORMAT_MODEL_WRITE_H

#include "base/status.h"
#include "base/tensor.h"
#include "format/onnx_load.h"
#include "onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tx_mw tx_mw;

teexec_status *tx_mw_create(tx_mw **out) TX_NODISCARD;
void tx_mw_free(tx_mw *w);

/* Zeroed memory owned by w; NULL when memory ran out (size 0 allowed). */
void *tx_mw_alloc(tx_mw *w, size_t size);
/* size * count, overflow-checked; NULL on overflow or no memory. */
void *tx_mw_array(tx_mw *w, size_t count, size_t size);
/* A copy of s (NULL -> NULL), owned by w. */
char *tx_mw_strdup(tx_mw *w, const char *s);

/* A TensorProto whose bytes go to `side` (onnx_load.h) instead of
 * raw_data: external data at `location` (TX_SIDE_LOCATION for a derived
 * model's side data, or the name of the data file the side bytes will be
 * written to), offset and length. Not for string tensors or sub-byte types
 * (those are written inline). */
teexec_status *tx_mw_tensor_side(tx_mw *w, const char *name, const tx_tensor *t,
                                 tx_side_data *side, const char *location,
                                 Onnx__TensorProto **out) TX_NODISCARD;

/* A TensorProto named `name` holding a copy of t. */
teexec_status *tx_mw_tensor(tx_mw *w, const char *name, const tx_tensor *t,
                            Onnx__TensorProto **out) TX_NODISCARD;

/* A ValueInfoProto with a tensor type: dtype (UNDEFINED = no element type),
 * rank (-1 = no shape), dims (-1 = unknown or symbolic) with dim_params
 * (may be NULL; entries NULL for none). */
teexec_status *tx_mw_value_info(tx_mw *w, const char *name, teexec_dtype dtype, int32_t rank,
                                const int64_t *dims, char *const *dim_params,
                                Onnx__ValueInfoProto **out) TX_NODISCARD;

/* An empty message of each kind, initialized (NULL when memory ran out). */
Onnx__ModelProto *tx_mw_model(tx_mw *w);
Onnx__GraphProto *tx_mw_graph(tx_mw *w);
Onnx__NodeProto *tx_mw_node(tx_mw *w);
Onnx__AttributeProto *tx_mw_attr(tx_mw *w);
Onnx__FunctionProto *tx_mw_function(tx_mw *w);
Onnx__OperatorSetIdProto *tx_mw_opset(tx_mw *w, const char *domain, int64_t version);

/* Serializes m into a malloc'd buffer (caller frees). */
teexec_status *tx_mw_pack(const Onnx__ModelProto *m, uint8_t **bytes, size_t *len) TX_NODISCARD;

#endif
