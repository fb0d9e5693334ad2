/*
 * model_save.h - writing a loaded model back to a file with some of its
 * main-graph initializers replaced (trained weights): everything else is
 * packed as loaded.
 *
 * The loaded file stays immutable: the writer packs a shallow copy of its
 * ModelProto and GraphProto whose initializer list points at fresh
 * TensorProtos for the replaced tensors and at the original ones otherwise,
 * then writes the bytes atomically (format/atomic_write.h).
 *
 * A model whose source keeps initializers as external data (whose
 * locations would not resolve from another folder), or that would pack to
 * more than protobuf's 2 GiB, is written in ONNX's external-data form
 * instead: those initializers and every one of 64 KiB and more go to
 * "<path>.data" beside it (written first, also atomically, named relative
 * to the model), so the saved model stands on its own.
 *
 * Ownership: the replacement callback's tensor is borrowed for the call
 * (or, when it fills `scratch`, released by the writer after encoding).
 * Thread-safety: reads `file` only; concurrent saves of one file are safe.
 */
#ifndef TEEXEC_FORMAT_MODEL_SAVE_H
#define TEEXEC_FORMAT_MODEL_SAVE_H

#include "base/status.h"
#include "base/tensor.h"
#include "format/onnx_load.h"

/* Asked once per main-graph initializer, in file order: set *out to the
 * tensor to store under `name` instead, or leave it NULL to keep the
 * loaded one. A tensor made for the call may be built in *scratch (zeroed
 * on entry), which the writer releases. */
typedef teexec_status *(*tx_initializer_replace_fn)(void *ctx, const char *name,
                                                    const tx_tensor **out, tx_tensor *scratch);

teexec_status *tx_model_save_replacing(const tx_onnx_file *file, const char *path,
                                       tx_initializer_replace_fn replace,
                                       void *ctx) TX_NODISCARD;

#endif
