/* npy.c - NumPy .npy reading (v1/v2/v3, strict header) and writing. */
#include "format/npy.h"

#include "base/checked.h"
#include "base/dtype.h"
#include "base/half.h"
#include "base/numfmt.h"
#include "format/atomic_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const unsigned char npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* What the header says, once validated. */
typedef struct npy_info {
    teexec_dtype dtype;
    unsigned itemsize;
    bool swap; /* big-endian payload */
    int32_t rank;
    int64_t dims[TX_MAX_RANK];
    uint64_t payload_bytes;
    size_t data_offset; /* where the payload starts in the file */
} npy_info;

#define BAD(name, ...) tx_status_new(TEEXEC_ERR_BAD_MODEL, (name), NULL, __VA_ARGS__)
#define UNSUP(name, ...) tx_status_new(TEEXEC_ERR_UNSUPPORTED, (name), NULL, __VA_ARGS__)

/* ------------------------------------------------------------------ */
/* Header dict parsing                                                 */
/* ------------------------------------------------------------------ */

/* A cursor over the header text. The text is a Python dict literal, but only
 * the tiny subset NumPy writes is accepted: evaluating anything more general
 * is how object arrays and code execution sneak in elsewhere. */
typedef struct cursor {
    const char *p;
    const char *end;
    const char *name;
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool accept(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

static char peek(cursor *c)
{
    skip_ws(c);
    return c->p < c->end ? *c->p : '\0';
}

/* A quoted string without escapes into buf (NUL-terminated). */
static teexec_status *parse_string(cursor *c, char *buf, size_t size, const char *what)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return BAD(c->name, "bad .npy header: expected a quoted %s", what);
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        unsigned char ch = (unsigned char)*c->p;
        if (ch == '\\' || ch < 0x20 || ch >= 0x7f)
            return BAD(c->name, "bad .npy header: unexpected character 0x%02x in a %s", ch,
                       what);
        if (n + 1 >= size)
            return BAD(c->name, "bad .npy header: %s is too long", what);
        buf[n++] = (char)ch;
        c->p++;
    }
    if (c->p >= c->end) return BAD(c->name, "bad .npy header: unterminated %s", what);
    c->p++;
    buf[n] = '\0';
    return NULL;
}

static teexec_status *parse_bool(cursor *c, bool *out)
{
    skip_ws(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        c->p += 4;
        *out = true;
    } else if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        c->p += 5;
        *out = false;
    } else {
        return BAD(c->name, "bad .npy header: 'fortran_order' must be True or False");
    }
    /* "Truex" is not a Python literal. */
    if (c->p < c->end && (*c->p == '_' || (*c->p >= 'a' && *c->p <= 'z') ||
                          (*c->p >= 'A' && *c->p <= 'Z') || (*c->p >= '0' && *c->p <= '9')))
        return BAD(c->name, "bad .npy header: 'fortran_order' must be True or False");
    return NULL;
}

static teexec_status *parse_dim(cursor *c, int64_t *out)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') {
        if (c->p < c->end && *c->p == '-')
            return BAD(c->name, "bad .npy header: negative dimension in 'shape'");
        return BAD(c->name, "bad .npy header: 'shape' must be a tuple of integers");
    }
    const char *start = c->p;
    uint64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        if (!tx_mul_u64(v, 10, &v) || !tx_add_u64(v, (uint64_t)(*c->p - '0'), &v) ||
            v > (uint64_t)INT64_MAX)
            return tx_status_new(TEEXEC_ERR_LIMIT, c->name, NULL,
                                 "bad .npy header: a dimension in 'shape' overflows int64");
        c->p++;
    }
    if (c->p - start > 1 && *start == '0')
        return BAD(c->name, "bad .npy header: dimension with a leading zero in 'shape'");
    if (c->p < c->end && (*c->p == 'L' || *c->p == 'l')) c->p++; /* Python 2 long */
    *out = (int64_t)v;
    return NULL;
}

/* A Python tuple of non-negative ints: "()", "(3,)", "(2, 3)", "(2, 3,)". */
static teexec_status *parse_shape(cursor *c, npy_info *info)
{
    if (!accept(c, '('))
        return BAD(c->name, "bad .npy header: 'shape' must be a tuple");
    info->rank = 0;
    bool trailing_comma = false;
    while (!accept(c, ')')) {
        if (info->rank >= TX_MAX_RANK)
            return tx_status_new(TEEXEC_ERR_LIMIT, c->name, NULL,
                                 "bad .npy header: rank is over the limit of %d", TX_MAX_RANK);
        TX_TRY(parse_dim(c, &info->dims[info->rank]));
        info->rank++;
        trailing_comma = accept(c, ',');
        if (!trailing_comma && peek(c) != ')')
            return BAD(c->name, "bad .npy header: 'shape' must be a tuple of integers");
    }
    /* "(3)" is the integer 3 in Python, not a tuple. */
    if (info->rank == 1 && !trailing_comma)
        return BAD(c->name, "bad .npy header: 'shape' (n) is not a tuple; NumPy writes (n,)");
    return NULL;
}

static teexec_status *parse_descr(const char *d, npy_info *info, const char *name)
{
    char order = '=';
    const char *s = d;
    if (*s == '<' || *s == '>' || *s == '|' || *s == '=') order = *s++;
    char kind = *s ? *s++ : '\0';
    unsigned size = 0;
    if (*s >= '1' && *s <= '9') {
        while (*s >= '0' && *s <= '9' && size < 1000) size = size * 10 + (unsigned)(*s++ - '0');
    }
    bool well_formed = *s == '\0';
    switch (kind) {
    case 'O':
        return UNSUP(name, "object arrays ('%s') are not supported: they hold Python objects, "
                           "not numbers; save the array with a numeric dtype", d);
    case 'V':
        return UNSUP(name, "structured/void dtype '%s' is not supported", d);
    case 'S': case 'U': case 'a':
        return UNSUP(name, "string dtype '%s' is not supported", d);
    case 'M': case 'm':
        return UNSUP(name, "datetime dtype '%s' is not supported", d);
    case 'c':
        return UNSUP(name, "complex dtype '%s' is not supported", d);
    default:
        break;
    }
    teexec_dtype dt = TEEXEC_DTYPE_UNDEFINED;
    if (well_formed) {
        if (kind == 'b' && size == 1) dt = TEEXEC_DTYPE_BOOL;
        else if (kind == 'i' && size == 1) dt = TEEXEC_DTYPE_INT8;
        else if (kind == 'i' && size == 2) dt = TEEXEC_DTYPE_INT16;
        else if (kind == 'i' && size == 4) dt = TEEXEC_DTYPE_INT32;
        else if (kind == 'i' && size == 8) dt = TEEXEC_DTYPE_INT64;
        else if (kind == 'u' && size == 1) dt = TEEXEC_DTYPE_UINT8;
        else if (kind == 'u' && size == 2) dt = TEEXEC_DTYPE_UINT16;
        else if (kind == 'u' && size == 4) dt = TEEXEC_DTYPE_UINT32;
        else if (kind == 'u' && size == 8) dt = TEEXEC_DTYPE_UINT64;
        else if (kind == 'f' && size == 2) dt = TEEXEC_DTYPE_FLOAT16;
        else if (kind == 'f' && size == 4) dt = TEEXEC_DTYPE_FLOAT;
        else if (kind == 'f' && size == 8) dt = TEEXEC_DTYPE_DOUBLE;
    }
    if (dt == TEEXEC_DTYPE_UNDEFINED)
        return UNSUP(name, "dtype '%s' is not supported (supported: b1 i1 i2 i4 i8 u1 u2 u4 u8 "
                           "f2 f4 f8)", d);
    info->dtype = dt;
    info->itemsize = size;
    info->swap = order == '>' && size > 1;
    return NULL;
}

static teexec_status *parse_header_dict(const char *text, size_t len, const char *name,
                                        npy_info *info)
{
    cursor c = {text, text + len, name};
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    char descr[64];
    if (!accept(&c, '{'))
        return BAD(name, "bad .npy header: it must be a dict literal starting with '{'");
    while (!accept(&c, '}')) {
        char key[32];
        TX_TRY(parse_string(&c, key, sizeof key, "key"));
        if (!accept(&c, ':')) return BAD(name, "bad .npy header: expected ':' after '%s'", key);
        if (strcmp(key, "descr") == 0) {
            if (have_descr) return BAD(name, "bad .npy header: duplicate key 'descr'");
            char ch = peek(&c);
            if (ch == '[' || ch == '{')
                return UNSUP(name, "structured dtypes are not supported (the 'descr' is a %s)",
                             ch == '[' ? "list of fields" : "dict");
            TX_TRY(parse_string(&c, descr, sizeof descr, "'descr'"));
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (have_order) return BAD(name, "bad .npy header: duplicate key 'fortran_order'");
            TX_TRY(parse_bool(&c, &fortran));
            have_order = true;
        } else if (strcmp(key, "shape") == 0) {
            if (have_shape) return BAD(name, "bad .npy header: duplicate key 'shape'");
            TX_TRY(parse_shape(&c, info));
            have_shape = true;
        } else {
            return BAD(name, "bad .npy header: unexpected key '%s'", key);
        }
        if (!accept(&c, ',')) {
            if (peek(&c) != '}') return BAD(name, "bad .npy header: expected ',' or '}'");
        }
    }
    skip_ws(&c);
    if (c.p != c.end)
        return BAD(name, "bad .npy header: unexpected text after the dict");
    if (!have_descr || !have_order || !have_shape)
        return BAD(name, "bad .npy header: missing key '%s'",
                   !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    TX_TRY(parse_descr(descr, info, name));
    if (fortran) {
        /* A 0-d or 1-d array is the same in both orders; NumPy writes False
         * for them, but accept what is unambiguous. */
        int nontrivial = 0;
        for (int32_t i = 0; i < info->rank; i++) nontrivial += info->dims[i] > 1;
        if (nontrivial > 1)
            return UNSUP(name, "Fortran-order (column-major) arrays are not supported; save a "
                               "C-order array (numpy.ascontiguousarray)");
    }
    return NULL;
}

/* Parses magic, version, header length and header from the first `avail`
 * bytes of a file of `total` bytes, and checks the payload length. */
static teexec_status *parse_prelude(const unsigned char *buf, size_t avail, uint64_t total,
                                    const char *name, uint64_t max_bytes, npy_info *info)
{
    memset(info, 0, sizeof(*info));
    if (avail < 10 || memcmp(buf, npy_magic, 6) != 0)
        return BAD(name, "not an .npy file (no \\x93NUMPY magic)");
    unsigned major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return UNSUP(name, ".npy format version %u.%u is not supported (1.0, 2.0, 3.0 are)",
                     major, minor);
    size_t prefix = major == 1 ? 10 : 12;
    if (avail < prefix) return BAD(name, "truncated .npy header");
    uint32_t hlen = major == 1 ? (uint32_t)buf[8] | (uint32_t)buf[9] << 8
                               : (uint32_t)buf[8] | (uint32_t)buf[9] << 8 |
                                     (uint32_t)buf[10] << 16 | (uint32_t)buf[11] << 24;
    if (hlen > TX_NPY_MAX_HEADER)
        return tx_status_new(TEEXEC_ERR_LIMIT, name, NULL,
                             ".npy header of %u bytes is over the limit of %u", hlen,
                             TX_NPY_MAX_HEADER);
    if (avail - prefix < hlen) return BAD(name, "truncated .npy header");
    TX_TRY(parse_header_dict((const char *)buf + prefix, hlen, name, info));
    info->data_offset = prefix + hlen;

    uint64_t numel;
    if (!tx_dims_product(info->dims, (size_t)info->rank, &numel) ||
        !tx_mul_u64(numel, info->itemsize, &info->payload_bytes))
        return tx_status_new(TEEXEC_ERR_LIMIT, name, NULL,
                             ".npy shape's element count overflows");
    if (max_bytes && info->payload_bytes > max_bytes)
        return tx_status_new(TEEXEC_ERR_LIMIT, name, NULL,
                             ".npy payload of %llu bytes is over the budget of %llu",
                             (unsigned long long)info->payload_bytes,
                             (unsigned long long)max_bytes);
    uint64_t have = total - info->data_offset;
    if (have < info->payload_bytes)
        return BAD(name, "truncated .npy payload: %llu bytes, the shape needs %llu",
                   (unsigned long long)have, (unsigned long long)info->payload_bytes);
    if (have > info->payload_bytes)
        return BAD(name, ".npy file has %llu bytes after the payload the shape describes",
                   (unsigned long long)(have - info->payload_bytes));
    return NULL;
}

/* Byte order and bool normalisation after the raw payload is in place. */
static void fix_payload(const npy_info *info, tx_tensor *t)
{
    unsigned char *p = t->data;
    if (info->swap) {
        size_t w = info->itemsize;
        for (uint64_t i = 0; i < t->numel; i++, p += w)
            for (size_t a = 0, b = w - 1; a < b; a++, b--) {
                unsigned char tmp = p[a];
                p[a] = p[b];
                p[b] = tmp;
            }
    } else if (info->dtype == TEEXEC_DTYPE_BOOL) {
        for (uint64_t i = 0; i < t->numel; i++) p[i] = p[i] != 0;
    }
}

teexec_status *tx_npy_read_memory(const void *data, size_t size, const char *name,
                                  uint64_t max_bytes, tx_tensor *out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npy_read_memory: out is NULL");
    memset(out, 0, sizeof(*out));
    if (!data && size) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npy_read_memory: no data");
    npy_info info;
    TX_TRY(parse_prelude(data, size, size, name, max_bytes, &info));
    teexec_status *st = tx_tensor_alloc(out, info.dtype, info.rank, info.dims);
    if (st) return tx_status_with_file(st, name);
    memcpy(out->data, (const unsigned char *)data + info.data_offset, out->nbytes);
    fix_payload(&info, out);
    return NULL;
}

static teexec_status *read_exact(int fd, void *buf, size_t size, const char *path)
{
    unsigned char *p = buf;
    while (size > 0) {
        size_t chunk = size > (1u << 30) ? (1u << 30) : size;
        ssize_t n = read(fd, p, chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            return tx_status_new(TEEXEC_ERR_IO, path, NULL, "read failed: %s", strerror(errno));
        }
        if (n == 0) return tx_status_new(TEEXEC_ERR_IO, path, NULL, "file shrank while reading");
        p += n;
        size -= (size_t)n;
    }
    return NULL;
}

teexec_status *tx_npy_read_file(const char *path, uint64_t max_bytes, tx_tensor *out)
{
    if (!out || !path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npy_read_file: NULL argument");
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot open: %s", strerror(errno));
    teexec_status *st = NULL;
    unsigned char *head = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        st = tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot stat: %s", strerror(errno));
        goto done;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = tx_status_new(TEEXEC_ERR_IO, path, NULL, "not a regular file");
        goto done;
    }
    uint64_t total = (uint64_t)sb.st_size;
    /* The prelude is at most 12 + TX_NPY_MAX_HEADER bytes: read that much,
     * then the payload straight into the tensor. */
    size_t head_size = total < 12 + (uint64_t)TX_NPY_MAX_HEADER ? (size_t)total
                                                                 : 12 + TX_NPY_MAX_HEADER;
    head = malloc(head_size ? head_size : 1);
    if (!head) {
        st = tx_oom();
        goto done;
    }
    if ((st = read_exact(fd, head, head_size, path))) goto done;
    npy_info info;
    if ((st = parse_prelude(head, head_size, total, path, max_bytes, &info))) goto done;
    if ((st = tx_tensor_alloc(out, info.dtype, info.rank, info.dims))) {
        st = tx_status_with_file(st, path);
        goto done;
    }
    /* Part of the payload may already be in `head`. */
    size_t in_head = head_size - info.data_offset;
    if (in_head > out->nbytes) in_head = out->nbytes; /* cannot happen: sizes checked */
    memcpy(out->data, head + info.data_offset, in_head);
    if ((st = read_exact(fd, (unsigned char *)out->data + in_head, out->nbytes - in_head, path))) {
        tx_tensor_release(out);
        goto done;
    }
    fix_payload(&info, out);
done:
    free(head);
    close(fd);
    return st;
}

/* ------------------------------------------------------------------ */
/* Writing                                                             */
/* ------------------------------------------------------------------ */

teexec_dtype tx_npy_stored_dtype(teexec_dtype dtype)
{
    switch (dtype) {
    case TEEXEC_DTYPE_BOOL:
    case TEEXEC_DTYPE_INT8:
    case TEEXEC_DTYPE_INT16:
    case TEEXEC_DTYPE_INT32:
    case TEEXEC_DTYPE_INT64:
    case TEEXEC_DTYPE_UINT8:
    case TEEXEC_DTYPE_UINT16:
    case TEEXEC_DTYPE_UINT32:
    case TEEXEC_DTYPE_UINT64:
    case TEEXEC_DTYPE_FLOAT16:
    case TEEXEC_DTYPE_FLOAT:
    case TEEXEC_DTYPE_DOUBLE:
        return dtype;
    case TEEXEC_DTYPE_BFLOAT16:
    case TEEXEC_DTYPE_FLOAT8E4M3FN:
    case TEEXEC_DTYPE_FLOAT8E4M3FNUZ:
    case TEEXEC_DTYPE_FLOAT8E5M2:
    case TEEXEC_DTYPE_FLOAT8E5M2FNUZ:
    case TEEXEC_DTYPE_FLOAT8E8M0:
    case TEEXEC_DTYPE_FLOAT4E2M1:
        return TEEXEC_DTYPE_FLOAT;
    case TEEXEC_DTYPE_INT4:
    case TEEXEC_DTYPE_INT2:
        return TEEXEC_DTYPE_INT8;
    case TEEXEC_DTYPE_UINT4:
    case TEEXEC_DTYPE_UINT2:
        return TEEXEC_DTYPE_UINT8;
    default:
        return TEEXEC_DTYPE_UNDEFINED;
    }
}

static const char *descr_of(teexec_dtype dt)
{
    switch (dt) {
    case TEEXEC_DTYPE_BOOL: return "|b1";
    case TEEXEC_DTYPE_INT8: return "|i1";
    case TEEXEC_DTYPE_INT16: return "<i2";
    case TEEXEC_DTYPE_INT32: return "<i4";
    case TEEXEC_DTYPE_INT64: return "<i8";
    case TEEXEC_DTYPE_UINT8: return "|u1";
    case TEEXEC_DTYPE_UINT16: return "<u2";
    case TEEXEC_DTYPE_UINT32: return "<u4";
    case TEEXEC_DTYPE_UINT64: return "<u8";
    case TEEXEC_DTYPE_FLOAT16: return "<f2";
    case TEEXEC_DTYPE_FLOAT: return "<f4";
    case TEEXEC_DTYPE_DOUBLE: return "<f8";
    default: return NULL;
    }
}

/* Converts a tensor whose dtype .npy cannot hold into its stored dtype
 * (exact). *out is a malloc'd buffer of t->numel elements of `stored`. */
static teexec_status *upcast(const tx_tensor *t, teexec_dtype stored, void **out, size_t *size)
{
    size_t esize = tx_dtype_elem_size(stored);
    size_t bytes;
    if (t->numel > SIZE_MAX || !tx_mul_size((size_t)t->numel, esize, &bytes))
        return tx_error(TEEXEC_ERR_LIMIT, "tensor too large to write as .npy");
    void *buf = malloc(bytes ? bytes : 1);
    if (!buf) return tx_oom();
    const uint8_t *src = t->data;
    float *f = buf;
    int8_t *i8 = buf;
    uint8_t *u8 = buf;
    for (uint64_t i = 0; i < t->numel; i++) {
        switch (t->dtype) {
        case TEEXEC_DTYPE_BFLOAT16: {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            f[i] = tx_bf16_to_f32(h);
            break;
        }
        case TEEXEC_DTYPE_FLOAT4E2M1:
            f[i] = tx_e2m1_to_f32((uint8_t)tx_subbyte_get(src, i, 4));
            break;
        case TEEXEC_DTYPE_INT4:
            i8[i] = (int8_t)tx_subbyte_sext(tx_subbyte_get(src, i, 4), 4);
            break;
        case TEEXEC_DTYPE_UINT4:
            u8[i] = (uint8_t)tx_subbyte_get(src, i, 4);
            break;
        case TEEXEC_DTYPE_INT2:
            i8[i] = (int8_t)tx_subbyte_sext(tx_subbyte_get(src, i, 2), 2);
            break;
        case TEEXEC_DTYPE_UINT2:
            u8[i] = (uint8_t)tx_subbyte_get(src, i, 2);
            break;
        default: /* the four FP8 types and E8M0 */
            f[i] = tx_fp8_to_f32(t->dtype, src[i]);
            break;
        }
    }
    *out = buf;
    *size = bytes;
    return NULL;
}

/* Builds the prelude (magic, version, length, padded dict) into buf. */
static teexec_status *build_prelude(teexec_dtype stored, const tx_tensor *t, char *buf,
                                    size_t cap, size_t *len)
{
    char dict[1200];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     descr_of(stored));
    for (int32_t i = 0; i < t->rank; i++)
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)t->dims[i]);
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", t->rank == 1 ? "," : "");
    if (n < 0 || (size_t)n >= sizeof dict)
        return tx_error(TEEXEC_ERR_INTERNAL, ".npy header does not fit its buffer");
    /* Total prelude a multiple of 64 so the payload is aligned, as NumPy
     * does; the dict ends with spaces and '\n'. Version 1.0 always fits here
     * (rank <= 32). */
    size_t total = 10 + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap) return tx_error(TEEXEC_ERR_INTERNAL, ".npy prelude too long");
    size_t hlen = total - 10;
    memcpy(buf, npy_magic, 6);
    buf[6] = 1;
    buf[7] = 0;
    buf[8] = (char)(hlen & 0xff);
    buf[9] = (char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)n);
    memset(buf + 10 + n, ' ', total - 10 - (size_t)n - 1);
    buf[total - 1] = '\n';
    *len = total;
    return NULL;
}

/* Prelude + payload pieces for `t`; *owned is a buffer to free (or NULL). */
static teexec_status *prepare(const tx_tensor *t, char *prelude, size_t cap, size_t *plen,
                              const void **payload, size_t *payload_size, void **owned,
                              teexec_dtype *stored_out)
{
    *owned = NULL;
    if (!t || (!t->data && t->nbytes))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "cannot write an empty tensor as .npy");
    teexec_dtype stored = tx_npy_stored_dtype(t->dtype);
    if (stored == TEEXEC_DTYPE_UNDEFINED)
        return tx_error(TEEXEC_ERR_UNSUPPORTED, "%s tensors cannot be written as .npy",
                        teexec_dtype_name(t->dtype));
    TX_TRY(build_prelude(stored, t, prelude, cap, plen));
    if (stored == t->dtype) {
        *payload = t->data;
        *payload_size = t->nbytes;
    } else {
        TX_TRY(upcast(t, stored, owned, payload_size));
        *payload = *owned;
    }
    if (stored_out) *stored_out = stored;
    return NULL;
}

#define PRELUDE_CAP 1280

teexec_status *tx_npy_encode(const tx_tensor *t, void **out, size_t *out_size)
{
    if (!out || !out_size) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npy_encode: NULL out");
    *out = NULL;
    *out_size = 0;
    char prelude[PRELUDE_CAP];
    size_t plen = 0, psize = 0;
    const void *payload = NULL;
    void *owned = NULL;
    TX_TRY(prepare(t, prelude, sizeof prelude, &plen, &payload, &psize, &owned, NULL));
    size_t total;
    unsigned char *buf = NULL;
    if (tx_add_size(plen, psize, &total)) buf = malloc(total);
    if (!buf) {
        free(owned);
        return tx_oom();
    }
    memcpy(buf, prelude, plen);
    if (psize) memcpy(buf + plen, payload, psize);
    free(owned);
    *out = buf;
    *out_size = total;
    return NULL;
}

teexec_status *tx_npy_write_file(const char *path, const tx_tensor *t, teexec_dtype *stored)
{
    char prelude[PRELUDE_CAP];
    size_t plen = 0, psize = 0;
    const void *payload = NULL;
    void *owned = NULL;
    teexec_status *st = prepare(t, prelude, sizeof prelude, &plen, &payload, &psize, &owned,
                                stored);
    if (st) return tx_status_with_file(st, path);
    const void *pieces[2] = {prelude, payload};
    size_t sizes[2] = {plen, psize};
    st = tx_write_file_atomic(path, 2, pieces, sizes);
    free(owned);
    return st;
}
