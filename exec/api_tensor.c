/* api_tensor.c - the public teexec_tensor API: create, access, load, save, cast. */
#include "exec/tensor_internal.h"

#include "base/dtype.h"
#include "exec/device_mem.h"
#include "format/atomic_write.h"
#include "format/npy.h"
#include "format/tensor_proto.h"
#include "kernels/cpu/convert.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Public tensors hold numbers only: STRING tensors would need per-element
 * ownership rules the C API does not define. */
static teexec_status *check_dtype(teexec_dtype dtype)
{
    if (!tx_dtype_valid((int)dtype))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
    if (dtype == TEEXEC_DTYPE_STRING)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "string tensors are not supported");
    return NULL;
}

teexec_status *tx_tensor_to_public(tx_tensor *t, teexec_tensor **out)
{
    teexec_tensor *p = calloc(1, sizeof(*p));
    if (!p) return tx_oom();
    p->t = *t;
    memset(t, 0, sizeof(*t));
    *out = p;
    return NULL;
}

teexec_status *tx_tensor_to_public_device(tx_tensor *t, int device,
                                          void (*dev_free)(int device, void *ptr),
                                          teexec_tensor **out)
{
    teexec_tensor *p = calloc(1, sizeof(*p));
    if (!p) return tx_oom();
    p->t = *t;
    p->t.owns_data = false; /* never host-freed */
    p->on_device = true;
    p->device = device;
    p->dev_free = dev_free;
    memset(t, 0, sizeof(*t));
    *out = p;
    return NULL;
}

teexec_status *tx_tensor_host_only(const teexec_tensor *t, const char *what)
{
    if (!t || !t->on_device) return NULL;
    return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                    "%s is a CUDA device tensor; this call reads host tensors only "
                    "(teexec_tensor_to_host copies one)", what);
}

/* A device tensor of this shape over `data` (borrowed) or over new device
 * memory (data NULL). */
static teexec_status *make_device(teexec_dtype dtype, int32_t rank, const int64_t *dims,
                                  void *data, size_t data_bytes, teexec_tensor **out_tensor)
{
    if (!out_tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out_tensor = NULL;
    TX_TRY(check_dtype(dtype));
    if (rank > 0 && !dims)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dims is NULL for rank %d", (int)rank);
    /* the shape's checks and size, without a host buffer */
    tx_tensor t;
    char probe;
    TX_TRY(tx_tensor_wrap(&t, dtype, rank, dims, &probe));
    if (data && data_bytes != t.nbytes)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "data is %zu bytes but a %s tensor of this shape needs %zu", data_bytes,
                        teexec_dtype_name(dtype), t.nbytes);
    int device = 0;
    void *ptr = data;
    if (data) TX_TRY(tx_device_check_pointer(data, &device));
    else TX_TRY(tx_device_alloc(t.nbytes, &device, &ptr));
    t.data = ptr;
    t.owns_data = false;
    teexec_status *st = tx_tensor_to_public_device(&t, device, data ? NULL : tx_device_free,
                                                   out_tensor);
    if (st && !data) tx_device_free(device, ptr);
    return st;
}

teexec_status *teexec_tensor_create_device(teexec_dtype dtype, int32_t rank, const int64_t *dims,
                                           teexec_tensor **out_tensor)
{
    return make_device(dtype, rank, dims, NULL, 0, out_tensor);
}

teexec_status *teexec_tensor_create_device_borrowed(teexec_dtype dtype, int32_t rank,
                                                    const int64_t *dims, void *device_data,
                                                    size_t data_bytes, teexec_tensor **out_tensor)
{
    if (!device_data) {
        if (out_tensor) *out_tensor = NULL;
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "device_data is NULL");
    }
    return make_device(dtype, rank, dims, device_data, data_bytes, out_tensor);
}

teexec_device teexec_tensor_device(const teexec_tensor *tensor)
{
    return tensor && tensor->on_device ? TEEXEC_DEVICE_CUDA : TEEXEC_DEVICE_CPU;
}

teexec_status *teexec_tensor_to_host(const teexec_tensor *tensor, teexec_tensor **out_tensor)
{
    if (!out_tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out_tensor = NULL;
    if (!tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor is NULL");
    tx_tensor t;
    TX_TRY(tx_tensor_alloc(&t, tensor->t.dtype, tensor->t.rank, tensor->t.dims));
    teexec_status *st = NULL;
    if (tensor->on_device) st = tx_device_to_host(t.data, tensor->t.data, t.nbytes);
    else if (t.nbytes) memcpy(t.data, tensor->t.data, t.nbytes);
    if (!st) st = tx_tensor_to_public(&t, out_tensor);
    if (st) tx_tensor_release(&t);
    return st;
}

static teexec_status *make(teexec_dtype dtype, int32_t rank, const int64_t *dims,
                           const void *copy_from, void *borrow, size_t data_bytes,
                           int check_bytes, teexec_tensor **out_tensor)
{
    if (!out_tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out_tensor = NULL;
    TX_TRY(check_dtype(dtype));
    if (rank > 0 && !dims)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "dims is NULL for rank %d", (int)rank);
    tx_tensor t;
    if (borrow) {
        TX_TRY(tx_tensor_wrap(&t, dtype, rank, dims, borrow));
    } else {
        TX_TRY(tx_tensor_alloc(&t, dtype, rank, dims));
    }
    if (check_bytes && data_bytes != t.nbytes) {
        size_t want = t.nbytes;
        tx_tensor_release(&t);
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                        "data is %zu bytes but a %s tensor of this shape needs %zu",
                        data_bytes, teexec_dtype_name(dtype), want);
    }
    if (copy_from && t.nbytes) memcpy(t.data, copy_from, t.nbytes);
    teexec_status *st = tx_tensor_to_public(&t, out_tensor);
    if (st) tx_tensor_release(&t);
    return st;
}

teexec_status *teexec_tensor_create(teexec_dtype dtype, int32_t rank, const int64_t *dims,
                                    teexec_tensor **out_tensor)
{
    return make(dtype, rank, dims, NULL, NULL, 0, 0, out_tensor);
}

teexec_status *teexec_tensor_create_copy(teexec_dtype dtype, int32_t rank,
                                         const int64_t *dims, const void *data,
                                         size_t data_bytes, teexec_tensor **out_tensor)
{
    if (!data && data_bytes)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "data is NULL");
    return make(dtype, rank, dims, data, NULL, data_bytes, 1, out_tensor);
}

teexec_status *teexec_tensor_create_borrowed(teexec_dtype dtype, int32_t rank,
                                             const int64_t *dims, void *data,
                                             size_t data_bytes, teexec_tensor **out_tensor)
{
    if (!data) {
        if (out_tensor) *out_tensor = NULL;
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "data is NULL");
    }
    return make(dtype, rank, dims, NULL, data, data_bytes, 1, out_tensor);
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Reads a whole file, refusing anything over the default model budget. */
static teexec_status *read_all(const char *path, void **out, size_t *out_size)
{
    *out = NULL;
    *out_size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        fclose(f);
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "not a regular file");
    }
    teexec_load_options lim;
    tx_load_options_resolve(NULL, &lim);
    if ((uint64_t)sb.st_size > lim.max_file_bytes) {
        fclose(f);
        return tx_status_new(TEEXEC_ERR_LIMIT, path, NULL,
                             "file of %lld bytes is over the limit of %llu bytes",
                             (long long)sb.st_size, (unsigned long long)lim.max_file_bytes);
    }
    size_t n = (size_t)sb.st_size;
    void *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return tx_oom();
    }
    if (n && fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "read failed");
    }
    fclose(f);
    *out = buf;
    *out_size = n;
    return NULL;
}

teexec_status *teexec_tensor_load_file(const char *path, teexec_tensor **out_tensor)
{
    if (!out_tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out_tensor = NULL;
    if (!path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "path is NULL");
    tx_tensor t;
    memset(&t, 0, sizeof(t));
    if (has_suffix(path, ".npy")) {
        TX_TRY(tx_npy_read_file(path, 0, &t));
    } else if (has_suffix(path, ".pb")) {
        void *bytes;
        size_t size;
        TX_TRY(read_all(path, &bytes, &size));
        teexec_status *st = tx_tensor_from_proto_bytes(bytes, size, &t);
        free(bytes);
        if (st) return tx_status_with_file(st, path);
    } else {
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, path, NULL,
                             "unknown tensor file type (expected .npy or .pb)");
    }
    if (t.dtype == TEEXEC_DTYPE_STRING) {
        tx_tensor_release(&t);
        return tx_status_new(TEEXEC_ERR_UNSUPPORTED, path, NULL,
                             "string tensors are not supported");
    }
    teexec_status *st = tx_tensor_to_public(&t, out_tensor);
    if (st) tx_tensor_release(&t);
    return st;
}

teexec_status *teexec_tensor_save_file(const teexec_tensor *tensor, const char *path,
                                       const char *name)
{
    if (!tensor || !path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor or path is NULL");
    TX_TRY(tx_tensor_host_only(tensor, "the tensor to save"));
    if (has_suffix(path, ".npy")) return tx_npy_write_file(path, &tensor->t, NULL);
    if (has_suffix(path, ".pb")) {
        uint8_t *bytes = NULL;
        size_t size = 0;
        TX_TRY(tx_tensor_to_proto_bytes(&tensor->t, name, &bytes, &size));
        const void *pieces[1] = {bytes};
        size_t sizes[1] = {size};
        teexec_status *st = tx_write_file_atomic(path, 1, pieces, sizes);
        free(bytes);
        return st;
    }
    return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, path, NULL,
                         "unknown tensor file type (expected .npy or .pb)");
}

teexec_status *teexec_tensor_cast(const teexec_tensor *tensor, teexec_dtype dtype,
                                  teexec_tensor **out_tensor)
{
    if (!out_tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out_tensor is NULL");
    *out_tensor = NULL;
    if (!tensor) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor is NULL");
    TX_TRY(check_dtype(dtype));
    TX_TRY(tx_tensor_host_only(tensor, "the tensor to cast"));
    tx_tensor t;
    TX_TRY(tx_tensor_alloc(&t, dtype, tensor->t.rank, tensor->t.dims));
    teexec_status *st = tx_convert(tensor->t.data, tensor->t.dtype, t.data, dtype, t.numel, NULL);
    if (!st) st = tx_tensor_to_public(&t, out_tensor);
    if (st) tx_tensor_release(&t);
    return st;
}

teexec_dtype teexec_tensor_dtype(const teexec_tensor *tensor) { return tensor->t.dtype; }
int32_t teexec_tensor_rank(const teexec_tensor *tensor) { return tensor->t.rank; }
const int64_t *teexec_tensor_dims(const teexec_tensor *tensor) { return tensor->t.dims; }
uint64_t teexec_tensor_element_count(const teexec_tensor *tensor) { return tensor->t.numel; }
size_t teexec_tensor_byte_size(const teexec_tensor *tensor) { return tensor->t.nbytes; }
void *teexec_tensor_data(teexec_tensor *tensor) { return tensor->t.data; }
const void *teexec_tensor_data_const(const teexec_tensor *tensor) { return tensor->t.data; }

void teexec_tensor_destroy(teexec_tensor *tensor)
{
    if (!tensor) return;
    if (tensor->on_device) {
        if (tensor->dev_free) tensor->dev_free(tensor->device, tensor->t.data);
        tensor->t.data = NULL;
    }
    tx_tensor_release(&tensor->t);
    free(tensor);
}
