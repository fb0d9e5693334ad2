/*
 * onnx_load.h - reading an ONNX ModelProto with explicit budgets.
 *
 * Loading is two passes over the bytes: a wire-format pre-scan driven by
 * protobuf-c's message descriptors (nesting depth, repeated-field counts,
 * declared lengths against the buffer, wire types against the schema, ranks,
 * attribute counts) and only then protobuf-c's unpack, whose allocations are
 * capped by a byte budget. Structural checks that need the unpacked message
 * (negative dims, element-count overflow, data types) follow. A model over a
 * budget is refused with TEEXEC_ERR_LIMIT naming the budget; malformed bytes
 * give TEEXEC_ERR_BAD_MODEL.
 *
 * Ownership: *out from the load functions is owned by the caller and freed
 * with tx_onnx_file_free(). The protobuf message, the path strings and the
 * external-data mappings all belong to the tx_onnx_file.
 * Thread-safety: loading is thread-safe; a loaded tx_onnx_file may be read
 * from several threads, except that reading external data (tensor_proto.h)
 * maps files lazily and is serialized internally by a mutex.
 */
#ifndef TEEXEC_FORMAT_ONNX_LOAD_H
#define TEEXEC_FORMAT_ONNX_LOAD_H

#include "base/status.h"
#include "onnx.pb-c.h"

#include <stddef.h>
#include <stdint.h>

typedef struct tx_external_cache tx_external_cache; /* private to external_data.c */

/* Tensor bytes a derived model keeps beside its serialized proto
 * (exec/model_lower.c: the lowering's new initializers, such as weights
 * stored transposed or merged), referenced as external data whose
 * location is TX_SIDE_LOCATION. A lowered copy of any size then
 * serializes far under protobuf's 2 GiB, and its bytes never touch a
 * file. Only a file that holds side data resolves that location from it;
 * in any other model it is an ordinary (relative) file name. */
#define TX_SIDE_LOCATION "*teexec-side-data*"

typedef struct tx_side_data {
    uint8_t *data; /* malloc'd */
    size_t size, cap;
} tx_side_data;

/* Appends n bytes (at an offset aligned to 64 bytes, written to *offset). */
teexec_status *tx_side_append(tx_side_data *s, const void *bytes, size_t n,
                              size_t *offset) TX_NODISCARD;
void tx_side_free(tx_side_data *s);
/* Writes the bytes to `path` atomically (format/atomic_write.h): a model's
 * external data file. */
teexec_status *tx_side_write_file(const tx_side_data *s, const char *path) TX_NODISCARD;

typedef struct tx_onnx_file {
    Onnx__ModelProto *model;        /* the unpacked model; never NULL */
    char *path;                     /* file path, NULL when loaded from memory */
    char *base_dir;                 /* external data root; NULL refuses external data */
    teexec_load_options limits;     /* budgets in force (defaults filled in) */
    tx_external_cache *external;    /* mapped external files, lazily */
    tx_side_data side;              /* a derived model's side data (owned; empty otherwise) */
} tx_onnx_file;

/* Copies `in` (NULL allowed) to `out`, replacing zeros with defaults and
 * clamping values above the hard maxima (e.g. rank <= TX_MAX_RANK). */
void tx_load_options_resolve(const teexec_load_options *in, teexec_load_options *out);

teexec_status *tx_onnx_load_file(const char *path, const teexec_load_options *options,
                                 tx_onnx_file **out) TX_NODISCARD;

/* base_dir may be NULL (then any external data reference is an error when
 * the tensor is read). The bytes are not referenced after return. */
teexec_status *tx_onnx_load_memory(const void *data, size_t size, const char *base_dir,
                                   const teexec_load_options *options,
                                   tx_onnx_file **out) TX_NODISCARD;

void tx_onnx_file_free(tx_onnx_file *file);

#endif
