/* onnx_load.c - ModelProto loading with budgets: pre-scan, capped unpack, checks. */
#include "format/onnx_load.h"

#include "base/checked.h"
#include "base/tensor.h"
#include "format/atomic_write.h"
#include "format/external_data.h"
#include "format/model_check.h"
#include "format/onnx_unpack.h"
#include "format/wire_scan.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The nesting budget's hard maximum: protobuf-c recurses once per message
 * level on unpack and free, so this bounds its stack use. */
#define TX_MAX_NESTING_HARD 64

void tx_load_options_resolve(const teexec_load_options *in, teexec_load_options *out)
{
    teexec_load_options o;
    if (in)
        o = *in;
    else
        memset(&o, 0, sizeof(o));
    if (!o.max_file_bytes) o.max_file_bytes = ((uint64_t)2 << 30) - 1;
    if (!o.max_external_bytes) o.max_external_bytes = (uint64_t)1 << 40;
    if (!o.max_tensor_count) o.max_tensor_count = 1000000;
    if (!o.max_tensor_elements) o.max_tensor_elements = (uint64_t)1 << 40;
    if (!o.max_rank || o.max_rank > TX_MAX_RANK) o.max_rank = TX_MAX_RANK;
    if (!o.max_attributes) o.max_attributes = 4096;
    if (!o.max_nesting_depth) o.max_nesting_depth = 32;
    if (o.max_nesting_depth > TX_MAX_NESTING_HARD) o.max_nesting_depth = TX_MAX_NESTING_HARD;
    if (!o.max_nodes) o.max_nodes = 10000000;
    /* protobuf-c refuses messages of 2 GiB or more. */
    if (o.max_file_bytes > (uint64_t)INT_MAX - 1) o.max_file_bytes = (uint64_t)INT_MAX - 1;
    *out = o;
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

teexec_status *tx_side_append(tx_side_data *s, const void *bytes, size_t n, size_t *offset)
{
    size_t at = (s->size + 63) & ~(size_t)63, end;
    if (at < s->size || !tx_add_size(at, n, &end)) return tx_oom();
    if (end > s->cap) {
        size_t cap = s->cap ? s->cap : ((size_t)1 << 20);
        while (cap < end) {
            if (cap > SIZE_MAX / 2) {
                cap = end;
                break;
            }
            cap *= 2;
        }
        uint8_t *nd = realloc(s->data, cap);
        if (!nd) return tx_oom();
        s->data = nd;
        s->cap = cap;
    }
    if (at > s->size) memset(s->data + s->size, 0, at - s->size);
    if (n) memcpy(s->data + at, bytes, n);
    s->size = end;
    *offset = at;
    return NULL;
}

teexec_status *tx_side_write_file(const tx_side_data *s, const char *path)
{
    const void *pieces[1] = {s->data ? (const void *)s->data : (const void *)""};
    size_t sizes[1] = {s->size};
    return tx_write_file_atomic(path, 1, pieces, sizes);
}

void tx_side_free(tx_side_data *s)
{
    if (!s) return;
    free(s->data);
    memset(s, 0, sizeof *s);
}

void tx_onnx_file_free(tx_onnx_file *file)
{
    if (!file) return;
    if (file->model) protobuf_c_message_free_unpacked(&file->model->base, NULL);
    tx_external_cache_free(file->external);
    tx_side_free(&file->side);
    free(file->path);
    free(file->base_dir);
    free(file);
}

static teexec_status *load_bytes(const void *data, size_t size, const char *path,
                                 const char *base_dir, const teexec_load_options *options,
                                 tx_onnx_file **out)
{
    *out = NULL;
    tx_onnx_file *f = calloc(1, sizeof(*f));
    if (!f) return tx_oom();
    tx_load_options_resolve(options, &f->limits);
    teexec_status *st = NULL;
    if ((path && !(f->path = dup_str(path))) || (base_dir && !(f->base_dir = dup_str(base_dir)))) {
        st = tx_oom();
        goto fail;
    }
    if (size > f->limits.max_file_bytes) {
        st = tx_error(TEEXEC_ERR_LIMIT,
                      "the model is %zu bytes, over the file size budget (max_file_bytes = %llu)",
                      size, (unsigned long long)f->limits.max_file_bytes);
        goto fail;
    }
    if (size == 0) {
        st = tx_error(TEEXEC_ERR_BAD_MODEL, "the model file is empty");
        goto fail;
    }
    ProtobufCMessage *msg = NULL;
    st = tx_protobuf_unpack(&onnx__model_proto__descriptor, data, size, &f->limits, &msg);
    if (st) goto fail;
    f->model = (Onnx__ModelProto *)msg;
    if ((st = tx_model_check(f->model, &f->limits))) goto fail;
    if ((st = tx_external_cache_new(&f->external))) goto fail;
    *out = f;
    return NULL;
fail:
    tx_onnx_file_free(f);
    return tx_status_with_file(st, path);
}

teexec_status *tx_onnx_load_memory(const void *data, size_t size, const char *base_dir,
                                   const teexec_load_options *options, tx_onnx_file **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!data && size) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "data is NULL");
    return load_bytes(data, size, NULL, base_dir, options, out);
}

/* The folder holding `path` ("." for a bare file name). */
static char *parent_dir(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_str(".");
    if (slash == path) return dup_str("/");
    size_t n = (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = 0;
    return d;
}

/* read() loop for files that cannot be mapped; stops at EOF or error. */
static teexec_status *read_all(int fd, uint8_t *buf, size_t size, const char *path)
{
    size_t done = 0;
    while (done < size) {
        ssize_t r = read(fd, buf + done, size - done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
            return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot read: %s", strerror(errno));
        if (r == 0)
            return tx_status_new(TEEXEC_ERR_IO, path, NULL, "the file shrank while being read");
        done += (size_t)r;
    }
    return NULL;
}

teexec_status *tx_onnx_load_file(const char *path, const teexec_load_options *options,
                                 tx_onnx_file **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!path || !*path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "empty model path");
    teexec_load_options lim;
    tx_load_options_resolve(options, &lim);

    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot open the model: %s",
                             strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot stat the model: %s", strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tx_status_new(TEEXEC_ERR_BAD_MODEL, path, NULL,
                             "the model is not a regular file");
    }
    if ((uint64_t)sb.st_size > lim.max_file_bytes) {
        close(fd);
        return tx_status_new(TEEXEC_ERR_LIMIT, path, NULL,
                             "the model is %lld bytes, over the file size budget "
                             "(max_file_bytes = %llu)",
                             (long long)sb.st_size, (unsigned long long)lim.max_file_bytes);
    }
    size_t size = (size_t)sb.st_size;
    char *dir = parent_dir(path);
    if (!dir) {
        close(fd);
        return tx_oom();
    }
    teexec_status *st;
    if (size == 0) {
        st = load_bytes("", 0, path, dir, &lim, out);
    } else {
        void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map != MAP_FAILED) {
            st = load_bytes(map, size, path, dir, &lim, out);
            munmap(map, size);
        } else {
            uint8_t *buf = malloc(size);
            if (!buf) {
                st = tx_oom();
            } else {
                st = read_all(fd, buf, size, path);
                if (!st) st = load_bytes(buf, size, path, dir, &lim, out);
                free(buf);
            }
        }
    }
    free(dir);
    close(fd);
    return st;
}
