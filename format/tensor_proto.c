/* tensor_proto.c - TensorProto payload decoding and encoding. */
#include "format/tensor_proto.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "format/external_data.h"
#include "format/model_check.h"
#include "format/onnx_unpack.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The typed field each data type is stored in when raw_data is absent
 * (onnx.proto TensorProto comments; reference onnx-format.md 3.4). */
typedef enum typed_field {
    F_FLOAT, F_INT32, F_STRING, F_INT64, F_DOUBLE, F_UINT64, F_COUNT
} typed_field;

static const char *const field_names[F_COUNT] = {"float_data", "int32_data", "string_data",
                                                 "int64_data", "double_data", "uint64_data"};

static typed_field field_for(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_FLOAT: case TEEXEC_DTYPE_COMPLEX64: return F_FLOAT;
    case TEEXEC_DTYPE_DOUBLE: case TEEXEC_DTYPE_COMPLEX128: return F_DOUBLE;
    case TEEXEC_DTYPE_INT64: return F_INT64;
    case TEEXEC_DTYPE_UINT32: case TEEXEC_DTYPE_UINT64: return F_UINT64;
    case TEEXEC_DTYPE_STRING: return F_STRING;
    default: return F_INT32;
    }
}

static size_t field_count(const Onnx__TensorProto *tp, typed_field f)
{
    switch (f) {
    case F_FLOAT: return tp->n_float_data;
    case F_INT32: return tp->n_int32_data;
    case F_STRING: return tp->n_string_data;
    case F_INT64: return tp->n_int64_data;
    case F_DOUBLE: return tp->n_double_data;
    case F_UINT64: return tp->n_uint64_data;
    default: return 0;
    }
}

/* Entries the typed field must hold for numel elements. */
static uint64_t typed_count(teexec_dtype dt, uint64_t numel)
{
    unsigned bits = teexec_dtype_bits(dt);
    if (dt == TEEXEC_DTYPE_COMPLEX64 || dt == TEEXEC_DTYPE_COMPLEX128) return numel * 2;
    if (bits == 4) return numel / 2 + numel % 2;       /* two per int32_data entry */
    if (bits == 2) return numel / 4 + (numel % 4 != 0); /* four per entry */
    return numel;
}

static bool host_is_big_endian(void)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return true;
#else
    return false;
#endif
}

/* raw_data and external bytes are little-endian; swap components in place
 * on a big-endian host. */
static void le_to_host(teexec_dtype dt, uint8_t *p, size_t nbytes)
{
    if (!host_is_big_endian()) return;
    size_t w = tx_dtype_elem_size(dt);
    if (dt == TEEXEC_DTYPE_COMPLEX64 || dt == TEEXEC_DTYPE_COMPLEX128) w /= 2;
    if (w < 2) return;
    for (size_t i = 0; i + w <= nbytes; i += w)
        for (size_t a = 0, b = w - 1; a < b; a++, b--) {
            uint8_t t = p[i + a];
            p[i + a] = p[i + b];
            p[i + b] = t;
        }
}

static void normalize_bool(tx_tensor *t)
{
    if (t->dtype != TEEXEC_DTYPE_BOOL) return;
    uint8_t *b = t->data;
    for (size_t i = 0; i < t->nbytes; i++) b[i] = b[i] != 0;
}

static teexec_status *from_int32(const Onnx__TensorProto *tp, tx_tensor *t, const char *what)
{
    const int32_t *v = tp->int32_data;
    size_t n = tp->n_int32_data;
    int64_t lo, hi;
    size_t w; /* bytes written per entry */
    switch (t->dtype) {
    case TEEXEC_DTYPE_INT32: memcpy(t->data, v, n * 4); return NULL;
    case TEEXEC_DTYPE_INT16: lo = INT16_MIN, hi = INT16_MAX, w = 2; break;
    case TEEXEC_DTYPE_UINT16: lo = 0, hi = UINT16_MAX, w = 2; break;
    /* (b)float16 bit patterns: unsigned per the spec, sign-extended by some writers. */
    case TEEXEC_DTYPE_FLOAT16: case TEEXEC_DTYPE_BFLOAT16: lo = INT16_MIN, hi = UINT16_MAX, w = 2; break;
    case TEEXEC_DTYPE_INT8: lo = INT8_MIN, hi = INT8_MAX, w = 1; break;
    case TEEXEC_DTYPE_UINT8: lo = 0, hi = UINT8_MAX, w = 1; break;
    case TEEXEC_DTYPE_BOOL: lo = INT32_MIN, hi = INT32_MAX, w = 1; break;
    default: /* FP8, E8M0 bit patterns; 4- and 2-bit types one packed byte per entry */
        lo = INT8_MIN, hi = UINT8_MAX, w = 1;
        break;
    }
    uint8_t *d = t->data;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > hi)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "%s: int32_data[%zu] = %d is out of range for %s",
                            what, i, (int)v[i], teexec_dtype_name(t->dtype));
        if (w == 2) {
            uint16_t u = (uint16_t)v[i];
            memcpy(d + 2 * i, &u, 2);
        } else if (t->dtype == TEEXEC_DTYPE_BOOL) {
            d[i] = v[i] != 0;
        } else {
            d[i] = (uint8_t)v[i];
        }
    }
    return NULL;
}

static teexec_status *from_typed(const Onnx__TensorProto *tp, typed_field f, tx_tensor *t,
                                 const char *what)
{
    switch (f) {
    case F_FLOAT: memcpy(t->data, tp->float_data, tp->n_float_data * sizeof(float)); return NULL;
    case F_DOUBLE: memcpy(t->data, tp->double_data, tp->n_double_data * sizeof(double)); return NULL;
    case F_INT64: memcpy(t->data, tp->int64_data, tp->n_int64_data * sizeof(int64_t)); return NULL;
    case F_UINT64:
        if (t->dtype == TEEXEC_DTYPE_UINT64) {
            memcpy(t->data, tp->uint64_data, tp->n_uint64_data * sizeof(uint64_t));
        } else {
            uint32_t *d = t->data;
            for (size_t i = 0; i < tp->n_uint64_data; i++) {
                if (tp->uint64_data[i] > UINT32_MAX)
                    return tx_error(TEEXEC_ERR_BAD_MODEL,
                                    "%s: uint64_data[%zu] = %llu is out of range for uint32", what,
                                    i, (unsigned long long)tp->uint64_data[i]);
                d[i] = (uint32_t)tp->uint64_data[i];
            }
        }
        return NULL;
    case F_STRING: {
        char **d = t->data;
        for (size_t i = 0; i < tp->n_string_data; i++) {
            const ProtobufCBinaryData *b = &tp->string_data[i];
            if (b->len && memchr(b->data, 0, b->len))
                return tx_error(TEEXEC_ERR_UNSUPPORTED,
                                "%s: string_data[%zu] contains a NUL byte", what, i);
            d[i] = malloc(b->len + 1);
            if (!d[i]) return tx_oom();
            if (b->len) memcpy(d[i], b->data, b->len);
            d[i][b->len] = 0;
        }
        return NULL;
    }
    case F_INT32: return from_int32(tp, t, what);
    default: return tx_error(TEEXEC_ERR_INTERNAL, "bad typed field");
    }
}

static teexec_status *decode(const Onnx__TensorProto *tp, const tx_onnx_file *file,
                             const teexec_load_options *lim, const char *what, tx_tensor *out)
{
    TX_TRY(tx_tensor_proto_check(tp, lim, true, what));
    teexec_dtype dt = (teexec_dtype)tp->data_type;
    int32_t rank = (int32_t)tp->n_dims;
    uint64_t numel;
    if (!tx_dims_product(tp->dims, tp->n_dims, &numel))
        return tx_error(TEEXEC_ERR_INTERNAL, "%s: dims passed the check but not the product", what);
    uint64_t expected = 0;
    if (dt != TEEXEC_DTYPE_STRING) {
        int ok;
        expected = tx_dtype_storage_bytes(dt, numel, &ok);
        if (!ok)
            return tx_error(TEEXEC_ERR_LIMIT, "%s: byte size of %llu elements overflows", what,
                            (unsigned long long)numel);
    }

    bool external = tp->has_data_location && tp->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    if (tp->has_data_location && !external &&
        tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__DEFAULT)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "%s: unknown data_location %d", what,
                        (int)tp->data_location);
    if (tp->n_external_data && !external)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "%s has external_data keys but data_location is not EXTERNAL", what);
    int n_typed = 0;
    typed_field present = F_COUNT;
    for (int f = 0; f < F_COUNT; f++) {
        if (field_count(tp, (typed_field)f)) {
            n_typed++;
            present = (typed_field)f;
        }
    }
    typed_field want = field_for(dt);
    if (n_typed > 1)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "%s has values in more than one typed field", what);
    if (n_typed && present != want)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "%s: %s holds %s values; %s is the field for that type",
                        what, field_names[present], teexec_dtype_name(dt), field_names[want]);
    if ((external && (tp->has_raw_data || n_typed)) || (tp->has_raw_data && n_typed))
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "%s has more than one payload (raw_data, typed values, external data)",
                        what);
    if (dt == TEEXEC_DTYPE_STRING && (external || tp->has_raw_data))
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "%s: string tensors keep their values in string_data only", what);

    tx_external_ref ref;
    bool side = false;
    if (external) {
        TX_TRY(tx_status_prefix(tx_external_parse(tp, &ref), "%s", what));
        side = file && file->side.data && strcmp(ref.location, TX_SIDE_LOCATION) == 0;
        uint64_t end;
        if (side && ((ref.has_length && ref.length != expected) ||
                     !tx_add_u64(ref.offset, expected, &end) || end > file->side.size))
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "%s: side data range offset %llu + %llu bytes is outside its %zu "
                            "bytes", what, (unsigned long long)ref.offset,
                            (unsigned long long)expected, file->side.size);
        /* side data (a derived model's own bytes, onnx_load.h) is checked
         * above; a file's bytes are proved to exist before allocating */
        if (!side && (!file || !file->base_dir))
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "%s uses external data ('%.200s'), but the model was loaded without "
                            "a folder for external data",
                            what, ref.location);
        if (!side)
            TX_TRY(tx_status_prefix(tx_external_read(file->external, file->base_dir, &ref,
                                                     expected, lim->max_external_bytes, NULL),
                                    "%s", what));
    } else if (tp->has_raw_data) {
        if (tp->raw_data.len != expected)
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "%s: raw_data has %zu bytes, but its dims and type (%s) need %llu",
                            what, tp->raw_data.len, teexec_dtype_name(dt),
                            (unsigned long long)expected);
    } else if (n_typed) {
        uint64_t need = typed_count(dt, numel);
        if (field_count(tp, want) != need)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "%s: %s has %zu values, but its dims need %llu",
                            what, field_names[want], field_count(tp, want),
                            (unsigned long long)need);
    } else if (numel) {
        return tx_error(TEEXEC_ERR_BAD_MODEL, "%s has no data for its %llu elements", what,
                        (unsigned long long)numel);
    }

    TX_TRY(tx_tensor_alloc(out, dt, rank, tp->dims));
    teexec_status *st = NULL;
    if (side) {
        if (expected) memcpy(out->data, file->side.data + ref.offset, (size_t)expected);
        le_to_host(dt, out->data, out->nbytes);
    } else if (external) {
        st = tx_status_prefix(tx_external_read(file->external, file->base_dir, &ref, expected,
                                               lim->max_external_bytes, out->data),
                              "%s", what);
        if (!st) le_to_host(dt, out->data, out->nbytes);
    } else if (tp->has_raw_data) {
        if (expected) memcpy(out->data, tp->raw_data.data, (size_t)expected);
        le_to_host(dt, out->data, out->nbytes);
    } else if (n_typed) {
        st = from_typed(tp, want, out, what);
    }
    if (st) {
        tx_tensor_release(out);
        return st;
    }
    normalize_bool(out);
    return NULL;
}

teexec_status *tx_tensor_from_proto(const Onnx__TensorProto *tp, const tx_onnx_file *file,
                                    tx_tensor *out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out is NULL");
    memset(out, 0, sizeof(*out));
    if (!tp) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tensor is NULL");
    teexec_load_options lim;
    if (file)
        lim = file->limits;
    else
        tx_load_options_resolve(NULL, &lim);
    char what[300];
    snprintf(what, sizeof what, "tensor '%.200s'", tp->name ? tp->name : "");
    teexec_status *st = decode(tp, file, &lim, what, out);
    if (st) memset(out, 0, sizeof(*out));
    return tx_status_with_file(st, file ? file->path : NULL);
}

teexec_status *tx_tensor_proto_parse(const void *data, size_t size,
                                     const teexec_load_options *options, Onnx__TensorProto **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out is NULL");
    *out = NULL;
    if (!data && size) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "data is NULL");
    teexec_load_options lim;
    tx_load_options_resolve(options, &lim);
    if (size > lim.max_file_bytes)
        return tx_error(TEEXEC_ERR_LIMIT,
                        "the tensor file is %zu bytes, over the file size budget "
                        "(max_file_bytes = %llu)",
                        size, (unsigned long long)lim.max_file_bytes);
    ProtobufCMessage *msg;
    TX_TRY(tx_protobuf_unpack(&onnx__tensor_proto__descriptor, size ? data : "", size, &lim, &msg));
    Onnx__TensorProto *tp = (Onnx__TensorProto *)msg;
    char what[300];
    snprintf(what, sizeof what, "tensor '%.200s'", tp->name ? tp->name : "");
    teexec_status *st = tx_tensor_proto_check(tp, &lim, false, what);
    if (st) {
        protobuf_c_message_free_unpacked(msg, NULL);
        return st;
    }
    *out = tp;
    return NULL;
}

void tx_tensor_proto_free(Onnx__TensorProto *tp)
{
    if (tp) protobuf_c_message_free_unpacked(&tp->base, NULL);
}

teexec_status *tx_tensor_from_proto_bytes(const void *data, size_t size, tx_tensor *out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "out is NULL");
    memset(out, 0, sizeof(*out));
    Onnx__TensorProto *tp = NULL;
    TX_TRY(tx_tensor_proto_parse(data, size, NULL, &tp));
    teexec_status *st = tx_tensor_from_proto(tp, NULL, out);
    tx_tensor_proto_free(tp);
    return st;
}

teexec_status *tx_tensor_to_proto_bytes(const tx_tensor *t, const char *name,
                                        uint8_t **out_bytes, size_t *out_size)
{
    if (!out_bytes || !out_size) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "NULL out");
    *out_bytes = NULL;
    *out_size = 0;
    if (!t || !tx_dtype_valid((int)t->dtype) || t->rank < 0 || t->rank > TX_MAX_RANK)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "not a valid tensor");
    Onnx__TensorProto tp = ONNX__TENSOR_PROTO__INIT;
    tp.n_dims = (size_t)t->rank;
    tp.dims = (int64_t *)t->dims;
    tp.has_data_type = 1;
    tp.data_type = (int32_t)t->dtype;
    tp.name = (char *)name;
    ProtobufCBinaryData *strings = NULL;
    uint8_t *swapped = NULL;
    if (t->dtype == TEEXEC_DTYPE_STRING) {
        if (t->numel > SIZE_MAX / sizeof(*strings)) return tx_oom();
        strings = malloc(sizeof(*strings) * (t->numel ? t->numel : 1));
        if (!strings) return tx_oom();
        char *const *s = t->data;
        for (uint64_t i = 0; i < t->numel; i++) {
            strings[i].data = (uint8_t *)(s[i] ? s[i] : "");
            strings[i].len = strlen((const char *)strings[i].data);
        }
        tp.n_string_data = (size_t)t->numel;
        tp.string_data = strings;
    } else {
        tp.has_raw_data = 1;
        tp.raw_data.len = t->nbytes;
        tp.raw_data.data = t->data;
        if (host_is_big_endian() && t->nbytes) {
            swapped = malloc(t->nbytes);
            if (!swapped) return tx_oom();
            memcpy(swapped, t->data, t->nbytes);
            le_to_host(t->dtype, swapped, t->nbytes); /* the swap is its own inverse */
            tp.raw_data.data = swapped;
        }
    }
    size_t n = onnx__tensor_proto__get_packed_size(&tp);
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        free(strings);
        free(swapped);
        return tx_oom();
    }
    size_t w = onnx__tensor_proto__pack(&tp, buf);
    free(strings);
    free(swapped);
    if (w != n) {
        free(buf);
        return tx_error(TEEXEC_ERR_INTERNAL, "packed %zu bytes, expected %zu", w, n);
    }
    *out_bytes = buf;
    *out_size = n;
    return NULL;
}

/* --- external data statistics --- */

typedef struct stats_ctx {
    tx_external_stat *v;
    size_t n, cap;
} stats_ctx;

static teexec_status *stats_visit(void *ctx, const Onnx__TensorProto *tp, const tx_tensor_site *site)
{
    stats_ctx *c = ctx;
    if (!tp->has_data_location || tp->data_location != ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return NULL;
    char what[512];
    tx_tensor_site_describe(tp, site, what, sizeof what);
    tx_external_ref ref;
    TX_TRY(tx_status_prefix(tx_external_parse(tp, &ref), "%s", what));
    uint64_t bytes = ref.length;
    if (!ref.has_length) {
        uint64_t numel;
        int ok = tx_dims_product(tp->dims, tp->n_dims, &numel);
        bytes = ok ? tx_dtype_storage_bytes((teexec_dtype)tp->data_type, numel, &ok) : 0;
        if (!ok) bytes = 0;
    }
    for (size_t i = 0; i < c->n; i++) {
        if (!strcmp(c->v[i].location, ref.location)) {
            if (!tx_add_u64(c->v[i].bytes, bytes, &c->v[i].bytes)) c->v[i].bytes = UINT64_MAX;
            c->v[i].tensors++;
            return NULL;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        tx_external_stat *nv = realloc(c->v, cap * sizeof(*nv));
        if (!nv) return tx_oom();
        c->v = nv;
        c->cap = cap;
    }
    size_t len = strlen(ref.location) + 1;
    char *loc = malloc(len);
    if (!loc) return tx_oom();
    memcpy(loc, ref.location, len);
    c->v[c->n++] = (tx_external_stat){loc, bytes, 1};
    return NULL;
}

teexec_status *tx_external_stats(const tx_onnx_file *file, tx_external_stat **out, size_t *count)
{
    if (!out || !count) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "NULL out");
    *out = NULL;
    *count = 0;
    if (!file || !file->model) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "no model");
    stats_ctx c = {NULL, 0, 0};
    teexec_status *st = tx_model_for_each_tensor(file->model, stats_visit, &c);
    if (st) {
        tx_external_stats_free(c.v, c.n);
        return tx_status_with_file(st, file->path);
    }
    *out = c.v;
    *count = c.n;
    return NULL;
}

void tx_external_stats_free(tx_external_stat *stats, size_t count)
{
    if (!stats) return;
    for (size_t i = 0; i < count; i++) free(stats[i].location);
    free(stats);
}
