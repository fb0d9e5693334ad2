/*
 * npz.h - NumPy .npz archives (a zip of .npy members) <-> named host tensors.
 *
 * Reading parses the zip central directory (found through the end record,
 * ZIP64 end records and ZIP64 extra fields included) with every offset and
 * length checked against the file, cross-checks each member's local header,
 * and decodes stored (method 0) and deflated (method 8, raw deflate via
 * zlib) members, verifying each member's CRC-32 and exact uncompressed size.
 * Member `NAME.npy` becomes array `NAME`; folder entries (names ending in
 * '/', empty) are skipped; any other member, an encrypted member, a
 * duplicate name, an empty name or a name with control characters is an
 * error. Nothing is ever written to disk, so path components in names are
 * harmless and kept verbatim ("a/b.npy" -> "a/b"). The total uncompressed
 * size of all members is bounded by a budget before anything is inflated,
 * and a deflated member claiming more than deflate's 1032:1 maximum ratio is
 * refused, so a tiny file cannot make the reader allocate a huge buffer.
 *
 * Writing produces stored (uncompressed) members with CRC-32, ZIP64 records
 * where sizes or offsets need them, written atomically (format/atomic_write.h).
 * Tensors are stored per the .npy convention of format/npy.h (bfloat16/FP8
 * are upcast to float32).
 *
 * Errors: malformed archives TEEXEC_ERR_BAD_MODEL, encrypted or unknown
 * compression TEEXEC_ERR_UNSUPPORTED, budget TEEXEC_ERR_LIMIT, file access
 * TEEXEC_ERR_IO. Messages name the archive and the member.
 *
 * Ownership: *out from the readers is owned by the caller and freed with
 * tx_npz_free(); its names and tensors belong to it. Writers do not retain
 * their arguments.
 * Thread-safety: reentrant; a tx_npz may be read from several threads.
 */
#ifndef TEEXEC_FORMAT_NPZ_H
#define TEEXEC_FORMAT_NPZ_H

#include "base/tensor.h"

#include <stddef.h>
#include <stdint.h>

/* Default budget on the sum of uncompressed member sizes: 16 GiB. */
#define TX_NPZ_DEFAULT_MAX_BYTES (16ull << 30)
/* Most members an archive may list. */
#define TX_NPZ_MAX_MEMBERS 65536u

typedef struct tx_npz_array {
    char *name;       /* member name without ".npy" */
    tx_tensor tensor; /* owned */
} tx_npz_array;

typedef struct tx_npz {
    size_t count;
    tx_npz_array *arrays; /* in central-directory order */
} tx_npz;

/* Reads an .npz file. max_total_bytes bounds the sum of uncompressed member
 * sizes (0 = TX_NPZ_DEFAULT_MAX_BYTES). On failure *out is NULL. */
teexec_status *tx_npz_read_file(const char *path, uint64_t max_total_bytes,
                                tx_npz **out) TX_NODISCARD;

/* Reads an .npz image in memory. `name` (may be NULL) is used in errors.
 * `data` is not referenced after return. */
teexec_status *tx_npz_read_memory(const void *data, size_t size, const char *name,
                                  uint64_t max_total_bytes, tx_npz **out) TX_NODISCARD;

/* The array called `name`, or NULL. */
const tx_tensor *tx_npz_find(const tx_npz *npz, const char *name);

/* Frees an archive and its tensors. Accepts NULL. */
void tx_npz_free(tx_npz *npz);

/* Serialises `count` tensors as a stored-member .npz image into a malloc'd
 * buffer (*out, *out_size), member i named names[i] + ".npy". Names must be
 * non-empty, unique and free of control characters. */
teexec_status *tx_npz_encode(size_t count, const char *const *names,
                             const tx_tensor *const *tensors, void **out,
                             size_t *out_size) TX_NODISCARD;

/* tx_npz_encode, then an atomic write to `path`. */
teexec_status *tx_npz_write_file(const char *path, size_t count, const char *const *names,
                                 const tx_tensor *const *tensors) TX_NODISCARD;

#endif
