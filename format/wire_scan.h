/*
 * wire_scan.h - a bounded pre-scan of protobuf wire bytes before unpacking.
 *
 * protobuf-c's unpack recurses once per nested message with no depth limit,
 * trusts repeated-field counts for its allocations and accepts any string.
 * This scan walks the same bytes first, iteratively (an explicit frame stack,
 * no recursion), driven by the generated message descriptors, and refuses:
 *   - truncated or malformed varints, tags, lengths past their enclosing
 *     message or >= INT_MAX, field number 0, group and reserved wire types;
 *   - a wire type that does not match a known field's type (packed repeated
 *     scalars are accepted, as protobuf-c accepts them); unknown fields are
 *     skipped by wire type without being entered;
 *   - NUL bytes inside `string` fields (names and paths are used as C
 *     strings afterwards; bytes fields are exempt);
 *   - graphs nested in graphs or types nested in types deeper than
 *     max_nesting_depth (every recursive path of onnx.proto passes through
 *     GraphProto or TypeProto, so this bounds message depth too);
 *   - more TensorProtos than max_tensor_count, more NodeProtos than
 *     max_nodes, more attributes on one node (or one function) than
 *     max_attributes, more dims in one TensorProto / SparseTensorProto /
 *     TensorShapeProto than max_rank;
 *   - a repeated field whose element count would overflow protobuf-c's
 *     `size * count` allocation arithmetic;
 *   - a singular message field given twice, or two members of one oneof
 *     (protobuf-c would merge them, concatenating repeated fields past the
 *     counts above): TEEXEC_ERR_UNSUPPORTED, as no ONNX writer emits them.
 * Budget overruns return TEEXEC_ERR_LIMIT naming the budget; malformed bytes
 * return TEEXEC_ERR_BAD_MODEL with the byte offset and the field.
 *
 * Ownership: reads the caller's buffer only. Thread-safety: reentrant.
 */
#ifndef TEEXEC_FORMAT_WIRE_SCAN_H
#define TEEXEC_FORMAT_WIRE_SCAN_H

#include "base/status.h"

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

/* What the scan saw; used to size the unpack budget and for diagnostics. */
typedef struct tx_wire_stats {
    uint64_t messages;      /* every message entered, the root included */
    uint64_t tensors;       /* TensorProto messages */
    uint64_t nodes;         /* NodeProto messages */
    uint64_t unknown_fields;
    uint32_t max_depth;     /* deepest message nesting seen (root = 1) */
} tx_wire_stats;

/* Scans `size` bytes as a message of type `root`. `limits` must already be
 * resolved (tx_load_options_resolve). `stats` may be NULL. */
teexec_status *tx_wire_scan(const uint8_t *data, size_t size,
                            const ProtobufCMessageDescriptor *root,
                            const teexec_load_options *limits,
                            tx_wire_stats *stats) TX_NODISCARD;

/* Hard upper bound on message nesting for a given max_nesting_depth: the
 * frame stack is sized by it. */
uint32_t tx_wire_max_message_depth(uint32_t max_nesting_depth);

#endif
