/*
 * tensor_proto.h - TensorProto payloads <-> host tensors (base/tensor.h).
 *
 * Decoding accepts every data type 1..26 from raw_data, from the typed
 * fields (float_data, int32_data, int64_data, double_data, uint64_data,
 * string_data; FP16/BF16/FP8/E8M0 as bit patterns in int32_data, 4-bit
 * types two per int32_data entry) and from external data, and checks the
 * payload length against the dims exactly. A tensor with zero elements may
 * have no payload.
 *
 * Ownership: the decoded tensor owns its buffer (release with
 * tx_tensor_release). Thread-safety: as for the tx_onnx_file it reads.
 */
#ifndef TEEXEC_FORMAT_TENSOR_PROTO_H
#define TEEXEC_FORMAT_TENSOR_PROTO_H

#include "base/tensor.h"
#include "format/onnx_load.h"

/* Decodes `tp` into `out`. `file` supplies the external-data root and the
 * budgets; it may be NULL for tensors that cannot have external data (then
 * default budgets apply and external data is refused). Errors name the
 * tensor. */
teexec_status *tx_tensor_from_proto(const Onnx__TensorProto *tp, const tx_onnx_file *file,
                                    tx_tensor *out) TX_NODISCARD;

/* Parses a serialized TensorProto (a test_data_set .pb file) with the same
 * pre-scan and budgets as a model. Free with tx_tensor_proto_free. */
teexec_status *tx_tensor_proto_parse(const void *data, size_t size,
                                     const teexec_load_options *options,
                                     Onnx__TensorProto **out) TX_NODISCARD;
void tx_tensor_proto_free(Onnx__TensorProto *tp);

/* Parses and decodes a serialized TensorProto in one step (no external
 * data; default budgets), so callers outside format/ never hold the
 * protobuf struct. *out is owned by the caller (tx_tensor_release); on
 * failure it is zeroed. */
teexec_status *tx_tensor_from_proto_bytes(const void *data, size_t size,
                                          tx_tensor *out) TX_NODISCARD;

/* Serializes a host tensor as a TensorProto with raw_data (name may be NULL).
 * *out_bytes is malloc'd and owned by the caller. */
teexec_status *tx_tensor_to_proto_bytes(const tx_tensor *t, const char *name,
                                        uint8_t **out_bytes, size_t *out_size) TX_NODISCARD;

/* External data files referenced by the model's tensors (main graph, nested
 * graphs, Constant attributes, functions): one entry per distinct location. */
typedef struct tx_external_stat {
    char *location;
    uint64_t bytes;
    uint64_t tensors;
} tx_external_stat;

/* *out is a malloc'd array of *count entries (free with tx_external_stats_free).
 * Reads only the external_data keys, never the files. */
teexec_status *tx_external_stats(const tx_onnx_file *file, tx_external_stat **out,
                                 size_t *count) TX_NODISCARD;
void tx_external_stats_free(tx_external_stat *stats, size_t count);

#endif
