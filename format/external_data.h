/*
 * external_data.h - reading TensorProto external data safely.
 *
 * A tensor's `external_data` keys name a file relative to the model's
 * folder. The rules, after ONNX's own external-data CVEs (../ traversal,
 * symlinks, hard links):
 *   - `location` is relative, non-empty, has no NUL, no backslash, no ".."
 *     component and no empty component ("a//b", trailing "/"); "." is
 *     ignored;
 *   - the file is opened component by component from a descriptor of the
 *     base folder with openat(O_NOFOLLOW), so a symlink anywhere on the path
 *     is refused, and must be a regular file with st_nlink == 1;
 *   - `offset` and `length` are strict decimal (digits only, no sign, no
 *     overflow) and offset + length must lie inside the file;
 *   - the bytes of all distinct files mapped stay within
 *     max_external_bytes.
 * Keys other than location/offset/length/checksum/basepath are ignored (as
 * ONNX does); a repeated key is an error. The checksum is not verified.
 *
 * Files are mmap'd once per location and kept in a tx_external_cache until
 * the cache is freed (files that cannot be mapped are read with pread).
 *
 * Ownership: the cache owns its mappings; tx_external_read copies into the
 * caller's buffer. Thread-safety: a cache may be used from several threads;
 * a mutex serializes lookups and mapping.
 */
#ifndef TEEXEC_FORMAT_EXTERNAL_DATA_H
#define TEEXEC_FORMAT_EXTERNAL_DATA_H

#include "base/status.h"
#include "format/onnx_load.h"

#include <stdbool.h>
#include <stdint.h>

/* Parsed external_data keys; strings point into the TensorProto. */
typedef struct tx_external_ref {
    const char *location;
    uint64_t offset;
    uint64_t length;
    bool has_length;
} tx_external_ref;

/* Parses and validates the keys of `tp` (location syntax included). */
teexec_status *tx_external_parse(const Onnx__TensorProto *tp, tx_external_ref *out) TX_NODISCARD;

/* Checks the syntax rules for `location` alone. */
teexec_status *tx_external_check_location(const char *location) TX_NODISCARD;

/* Parses a strict non-negative decimal; `key` names it in errors. */
teexec_status *tx_external_parse_u64(const char *text, const char *key,
                                     uint64_t *out) TX_NODISCARD;

/* For a model written to `path` with its weights beside it: the data file
 * "<path>.data" and its location as the model names it ("<file name>.data",
 * checked as above). Both malloc'd (the caller frees); NULL on failure. */
teexec_status *tx_external_data_names(const char *path, char **data_path,
                                      char **location) TX_NODISCARD;

teexec_status *tx_external_cache_new(tx_external_cache **out) TX_NODISCARD;
void tx_external_cache_free(tx_external_cache *cache);

/* Copies the tensor's bytes into dst, which holds exactly `expected` bytes.
 * Refuses a `length` other than `expected`, or (without `length`) a file
 * remainder other than `expected`. base_dir NULL refuses. */
teexec_status *tx_external_read(tx_external_cache *cache, const char *base_dir,
                                const tx_external_ref *ref, uint64_t expected,
                                uint64_t max_external_bytes, void *dst) TX_NODISCARD;

#endif
