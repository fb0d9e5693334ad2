/*
 * onnx_unpack.h - the one way teexec turns protobuf bytes into a message:
 * the wire pre-scan (wire_scan.h), then protobuf-c's unpack through an
 * allocator that refuses to hand out more than a byte budget.
 *
 * The budget is TX_UNPACK_BUDGET_FACTOR (8) x the input size + 64 MiB.
 * Payload bytes unpack 1:1 (raw_data is copied), packed varints at most 8:1
 * (a one-byte varint becomes an int64), and small messages cost their C
 * struct (up to ~250 bytes for 2 bytes on the wire). Measured on the
 * libonnx-testdata models: at most 3.5x for every model over 2 KiB (tiny
 * ones are covered by the 64 MiB). A crafted file of millions of empty
 * sub-messages is refused with TEEXEC_ERR_LIMIT instead of exhausting RAM.
 *
 * Ownership: *out is freed with protobuf_c_message_free_unpacked(msg, NULL).
 * Thread-safety: reentrant.
 */
#ifndef TEEXEC_FORMAT_ONNX_UNPACK_H
#define TEEXEC_FORMAT_ONNX_UNPACK_H

#include "base/status.h"

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#define TX_UNPACK_BUDGET_FACTOR 8
#define TX_UNPACK_BUDGET_SLACK ((uint64_t)64 << 20)

/* The unpack byte budget for an input of `size` bytes. */
uint64_t tx_unpack_budget(size_t size);

/* Pre-scans and unpacks `size` bytes as `desc`. `limits` must be resolved. */
teexec_status *tx_protobuf_unpack(const ProtobufCMessageDescriptor *desc, const void *data,
                                  size_t size, const teexec_load_options *limits,
                                  ProtobufCMessage **out) TX_NODISCARD;

#endif
