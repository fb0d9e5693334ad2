/* npz.c - .npz (zip of .npy) reading with bounds-checked zip parsing, and a
 * stored-member writer. */
#include "format/npz.h"

#include "base/checked.h"
#include "format/atomic_write.h"
#include "format/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define SIG_LOCAL 0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD 0x06054b50u
#define SIG_EOCD64 0x06064b50u
#define SIG_LOCATOR64 0x07064b50u

#define EOCD_SIZE 22u
#define EOCD64_SIZE 56u
#define LOCATOR64_SIZE 20u
#define CENTRAL_SIZE 46u
#define LOCAL_SIZE 30u

#define BAD(name, ...) tx_status_new(TEEXEC_ERR_BAD_MODEL, (name), NULL, __VA_ARGS__)

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* One member as the central directory describes it. */
typedef struct member {
    const uint8_t *name; /* not NUL-terminated; points into the archive */
    size_t name_len;
    uint16_t flags;
    uint16_t method;
    uint32_t crc;
    uint64_t csize;
    uint64_t usize;
    uint64_t local_off;
} member;

/* ------------------------------------------------------------------ */
/* Central directory                                                   */
/* ------------------------------------------------------------------ */

typedef struct cd_loc {
    uint64_t entries;
    uint64_t offset;
    uint64_t size;
    uint64_t end_limit; /* members and the directory must end before this */
} cd_loc;

static teexec_status *find_central_directory(const uint8_t *d, size_t size, const char *name,
                                             cd_loc *loc)
{
    if (size < EOCD_SIZE) return BAD(name, "not a zip archive (too short for an end record)");
    /* The end record is followed only by its comment (at most 65535 bytes);
     * require the comment to end exactly at the end of the file, so a stray
     * signature inside the comment is not taken for the record. */
    size_t lowest = size - EOCD_SIZE > 65535u ? size - EOCD_SIZE - 65535u : 0;
    size_t pos = size - EOCD_SIZE;
    for (;;) {
        if (rd32(d + pos) == SIG_EOCD && pos + EOCD_SIZE + rd16(d + pos + 20) == size) break;
        if (pos == lowest)
            return BAD(name, "not a zip archive (no end-of-central-directory record)");
        pos--;
    }
    const uint8_t *e = d + pos;
    uint16_t disk = rd16(e + 4), cd_disk = rd16(e + 6);
    uint16_t n_disk = rd16(e + 8), n_total = rd16(e + 10);
    uint32_t cd_size = rd32(e + 12), cd_off = rd32(e + 16);
    loc->entries = n_total;
    loc->size = cd_size;
    loc->offset = cd_off;
    loc->end_limit = pos;
    bool zip64 = n_total == 0xffff || n_disk == 0xffff || cd_size == 0xffffffffu ||
                 cd_off == 0xffffffffu || disk == 0xffff || cd_disk == 0xffff;
    if (zip64) {
        if (pos < LOCATOR64_SIZE || rd32(d + pos - LOCATOR64_SIZE) != SIG_LOCATOR64)
            return BAD(name, "zip end record needs ZIP64 but has no ZIP64 locator");
        const uint8_t *l = d + pos - LOCATOR64_SIZE;
        uint64_t off64 = rd64(l + 8);
        if (rd32(l + 4) != 0 || rd32(l + 16) > 1)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, name, NULL,
                                 "multi-disk zip archives are not supported");
        if (off64 > pos - LOCATOR64_SIZE || pos - LOCATOR64_SIZE - off64 < EOCD64_SIZE)
            return BAD(name, "ZIP64 end record offset is out of bounds");
        const uint8_t *z = d + off64;
        if (rd32(z) != SIG_EOCD64) return BAD(name, "bad ZIP64 end record signature");
        disk = rd32(z + 16) ? 1 : 0;
        cd_disk = rd32(z + 20) ? 1 : 0;
        uint64_t e_disk = rd64(z + 24);
        loc->entries = rd64(z + 32);
        loc->size = rd64(z + 40);
        loc->offset = rd64(z + 48);
        loc->end_limit = off64;
        if (e_disk != loc->entries) disk = 1;
    } else if (n_disk != n_total) {
        disk = 1;
    }
    if (disk != 0 || cd_disk != 0)
        return tx_status_new(TEEXEC_ERR_UNSUPPORTED, name, NULL,
                             "multi-disk zip archives are not supported");
    uint64_t cd_end;
    if (!tx_add_u64(loc->offset, loc->size, &cd_end) || cd_end > loc->end_limit)
        return BAD(name, "zip central directory (offset %llu, %llu bytes) runs past its end "
                         "record: truncated or corrupt archive",
                   (unsigned long long)loc->offset, (unsigned long long)loc->size);
    if (loc->entries > TX_NPZ_MAX_MEMBERS)
        return tx_status_new(TEEXEC_ERR_LIMIT, name, NULL,
                             "zip archive lists %llu members, over the limit of %u",
                             (unsigned long long)loc->entries, TX_NPZ_MAX_MEMBERS);
    if (loc->entries > loc->size / CENTRAL_SIZE)
        return BAD(name, "zip central directory of %llu bytes cannot hold %llu entries",
                   (unsigned long long)loc->size, (unsigned long long)loc->entries);
    return NULL;
}

/* Applies a ZIP64 extended-information extra field: 64-bit values replace
 * the 32-bit fields that hold 0xFFFFFFFF, in the order usize, csize, offset. */
static teexec_status *apply_zip64_extra(const uint8_t *x, size_t xlen, member *m,
                                        const char *name)
{
    bool need_u = m->usize == 0xffffffffu, need_c = m->csize == 0xffffffffu,
         need_o = m->local_off == 0xffffffffu;
    size_t p = 0;
    while (p + 4 <= xlen) {
        uint16_t id = rd16(x + p), len = rd16(x + p + 2);
        if (len > xlen - p - 4) return BAD(name, "zip extra field runs past its entry");
        if (id == 0x0001) {
            const uint8_t *f = x + p + 4;
            size_t q = 0;
            if (need_u) {
                if (q + 8 > len) break;
                m->usize = rd64(f + q);
                q += 8;
                need_u = false;
            }
            if (need_c) {
                if (q + 8 > len) break;
                m->csize = rd64(f + q);
                q += 8;
                need_c = false;
            }
            if (need_o) {
                if (q + 8 > len) break;
                m->local_off = rd64(f + q);
                need_o = false;
            }
        }
        p += 4 + (size_t)len;
    }
    if (need_u || need_c || need_o)
        return BAD(name, "zip member '%.*s' needs a ZIP64 extra field that is missing or short",
                   (int)m->name_len, (const char *)m->name);
    return NULL;
}

static bool name_is_folder(const member *m)
{
    return m->name_len > 0 && m->name[m->name_len - 1] == '/' && m->usize == 0;
}

static teexec_status *check_member_name(const member *m, const char *name)
{
    for (size_t i = 0; i < m->name_len; i++)
        if (m->name[i] < 0x20 || m->name[i] == 0x7f)
            return BAD(name, "zip member name has a control character (byte %zu)", i);
    if (m->name_len <= 4 || memcmp(m->name + m->name_len - 4, ".npy", 4) != 0)
        return BAD(name, "zip member '%.*s' is not an .npy array (name must be NAME.npy)",
                   (int)m->name_len, (const char *)m->name);
    return NULL;
}

static teexec_status *read_central_directory(const uint8_t *d, const cd_loc *loc,
                                             const char *name, member *ms, size_t *count)
{
    const uint8_t *p = d + loc->offset;
    const uint8_t *end = p + loc->size;
    size_t n = 0;
    for (uint64_t i = 0; i < loc->entries; i++) {
        if ((size_t)(end - p) < CENTRAL_SIZE || rd32(p) != SIG_CENTRAL)
            return BAD(name, "zip central directory entry %llu is truncated or has a bad "
                             "signature", (unsigned long long)i);
        member m = {0};
        m.flags = rd16(p + 8);
        m.method = rd16(p + 10);
        m.crc = rd32(p + 16);
        m.csize = rd32(p + 20);
        m.usize = rd32(p + 24);
        size_t nlen = rd16(p + 28), xlen = rd16(p + 30), clen = rd16(p + 32);
        uint16_t disk = rd16(p + 34);
        m.local_off = rd32(p + 42);
        if ((size_t)(end - p) - CENTRAL_SIZE < nlen + xlen + clen)
            return BAD(name, "zip central directory entry %llu runs past the directory",
                       (unsigned long long)i);
        m.name = p + CENTRAL_SIZE;
        m.name_len = nlen;
        TX_TRY(apply_zip64_extra(p + CENTRAL_SIZE + nlen, xlen, &m, name));
        if (disk != 0 && disk != 0xffff)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, name, NULL,
                                 "multi-disk zip archives are not supported");
        p += CENTRAL_SIZE + nlen + xlen + clen;

        if (m.flags & 0x41u || m.method == 99)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, name, NULL,
                                 "zip member '%.*s' is encrypted", (int)m.name_len,
                                 (const char *)m.name);
        if (name_is_folder(&m)) continue;
        if (m.method != 0 && m.method != 8)
            return tx_status_new(TEEXEC_ERR_UNSUPPORTED, name, NULL,
                                 "zip member '%.*s' uses compression method %u (only stored "
                                 "and deflated are supported)",
                                 (int)m.name_len, (const char *)m.name, m.method);
        if (m.method == 0 && m.csize != m.usize)
            return BAD(name, "stored zip member '%.*s' has different compressed (%llu) and "
                             "uncompressed (%llu) sizes",
                       (int)m.name_len, (const char *)m.name, (unsigned long long)m.csize,
                       (unsigned long long)m.usize);
        /* Deflate cannot expand more than 1032:1; a larger claim would only
         * make us allocate a huge output buffer for a tiny member. */
        if (m.method == 8 && m.usize / 1032u > m.csize + 1)
            return BAD(name, "zip member '%.*s' claims %llu bytes from %llu compressed, more "
                             "than deflate can produce",
                       (int)m.name_len, (const char *)m.name, (unsigned long long)m.usize,
                       (unsigned long long)m.csize);
        TX_TRY(check_member_name(&m, name));
        ms[n++] = m;
    }
    if (p != end)
        return BAD(name, "zip central directory has %zu bytes after its last entry",
                   (size_t)(end - p));
    *count = n;
    return NULL;
}

/* ------------------------------------------------------------------ */
/* Member data                                                         */
/* ------------------------------------------------------------------ */

/* Finds the member's data through its local header, which must agree with
 * the central directory and lie before it. */
static teexec_status *locate_data(const uint8_t *d, const cd_loc *loc, const member *m,
                                  const char *name, const uint8_t **data)
{
    uint64_t lim = loc->offset; /* member data precedes the central directory */
    if (m->local_off > lim || lim - m->local_off < LOCAL_SIZE)
        return BAD(name, "zip member '%.*s': local header offset %llu is out of bounds",
                   (int)m->name_len, (const char *)m->name,
                   (unsigned long long)m->local_off);
    const uint8_t *h = d + m->local_off;
    if (rd32(h) != SIG_LOCAL)
        return BAD(name, "zip member '%.*s': bad local header signature", (int)m->name_len,
                   (const char *)m->name);
    uint16_t flags = rd16(h + 6), method = rd16(h + 8);
    size_t nlen = rd16(h + 26), xlen = rd16(h + 28);
    if ((flags & 1u) || method != m->method)
        return BAD(name, "zip member '%.*s': local header disagrees with the central directory",
                   (int)m->name_len, (const char *)m->name);
    uint64_t start = m->local_off + LOCAL_SIZE + nlen + xlen, stop;
    if (start > lim || !tx_add_u64(start, m->csize, &stop) || stop > lim)
        return BAD(name, "zip member '%.*s': data (%llu bytes) runs past the end of the "
                         "member area: truncated archive",
                   (int)m->name_len, (const char *)m->name, (unsigned long long)m->csize);
    if (nlen != m->name_len || memcmp(h + LOCAL_SIZE, m->name, nlen) != 0)
        return BAD(name, "zip member '%.*s': local header names a different file",
                   (int)m->name_len, (const char *)m->name);
    *data = d + start;
    return NULL;
}

static teexec_status *inflate_member(const uint8_t *src, uint64_t csize, uint8_t *dst,
                                     uint64_t usize, const member *m, const char *name)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return tx_oom();
    uint64_t in_left = csize, out_left = usize;
    const uint8_t *in = src;
    uint8_t *out = dst;
    uint8_t spill[1]; /* detects output beyond the declared size */
    int rc = Z_OK;
    teexec_status *st = NULL;
    while (rc != Z_STREAM_END) {
        if (zs.avail_in == 0 && in_left > 0) {
            uInt chunk = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
            zs.next_in = (Bytef *)(uintptr_t)in;
            zs.avail_in = chunk;
            in += chunk;
            in_left -= chunk;
        }
        if (zs.avail_out == 0) {
            if (out_left > 0) {
                uInt chunk = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
                zs.next_out = out;
                zs.avail_out = chunk;
                out += chunk;
                out_left -= chunk;
            } else {
                zs.next_out = spill;
                zs.avail_out = sizeof spill;
            }
        }
        uInt before_out = zs.avail_out;
        uInt before_in = zs.avail_in;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (zs.next_out == spill + 1) {
            st = BAD(name, "zip member '%.*s' inflates to more than its declared %llu bytes",
                     (int)m->name_len, (const char *)m->name, (unsigned long long)usize);
            break;
        }
        if (rc == Z_STREAM_END) break;
        if (rc != Z_OK && rc != Z_BUF_ERROR) {
            st = BAD(name, "zip member '%.*s': corrupt deflate data (%s)", (int)m->name_len,
                     (const char *)m->name, zs.msg ? zs.msg : "zlib error");
            break;
        }
        if (zs.avail_in == 0 && in_left == 0 && before_out == zs.avail_out &&
            before_in == zs.avail_in) {
            st = BAD(name, "zip member '%.*s': deflate data ends early (truncated)",
                     (int)m->name_len, (const char *)m->name);
            break;
        }
    }
    if (!st && (zs.total_out != usize || zs.avail_in != 0 || in_left != 0))
        st = BAD(name, "zip member '%.*s': deflate stream gives %llu bytes from %llu, the "
                       "directory says %llu from %llu",
                 (int)m->name_len, (const char *)m->name, (unsigned long long)zs.total_out,
                 (unsigned long long)(csize - in_left - zs.avail_in),
                 (unsigned long long)usize, (unsigned long long)csize);
    inflateEnd(&zs);
    return st;
}

static uint32_t crc32_u64(const uint8_t *p, uint64_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    while (n > 0) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, p, chunk);
        p += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

static teexec_status *decode_member(const uint8_t *d, const cd_loc *loc, const member *m,
                                    const char *name, tx_npz_array *arr)
{
    const uint8_t *data = NULL;
    TX_TRY(locate_data(d, loc, m, name, &data));
    if (m->usize > SIZE_MAX / 2)
        return tx_status_new(TEEXEC_ERR_LIMIT, name, NULL, "zip member too large");
    const uint8_t *raw = data;
    uint8_t *buf = NULL;
    if (m->method == 8) {
        buf = malloc(m->usize ? (size_t)m->usize : 1);
        if (!buf) return tx_oom();
        teexec_status *st = inflate_member(data, m->csize, buf, m->usize, m, name);
        if (st) {
            free(buf);
            return st;
        }
        raw = buf;
    }
    teexec_status *st = NULL;
    uint32_t crc = crc32_u64(raw, m->usize);
    if (crc != m->crc) {
        st = BAD(name, "zip member '%.*s' fails its CRC-32 check (0x%08x, expected 0x%08x): "
                       "corrupt archive",
                 (int)m->name_len, (const char *)m->name, crc, m->crc);
        goto out;
    }
    /* Errors inside the member name "archive:member". */
    size_t label_len = strlen(name ? name : "npz") + 1 + m->name_len + 1;
    char *label = malloc(label_len);
    if (!label) {
        st = tx_oom();
        goto out;
    }
    snprintf(label, label_len, "%s:%.*s", name ? name : "npz", (int)m->name_len,
             (const char *)m->name);
    st = tx_npy_read_memory(raw, (size_t)m->usize, label, 0, &arr->tensor);
    free(label);
out:
    free(buf);
    return st;
}

/* ------------------------------------------------------------------ */
/* Archive                                                             */
/* ------------------------------------------------------------------ */

static int cmp_names(const void *a, const void *b)
{
    const tx_npz_array *x = *(const tx_npz_array *const *)a;
    const tx_npz_array *y = *(const tx_npz_array *const *)b;
    return strcmp(x->name, y->name);
}

static teexec_status *check_duplicates(const tx_npz *npz, const char *name)
{
    if (npz->count < 2) return NULL;
    const tx_npz_array **v = malloc(npz->count * sizeof *v);
    if (!v) return tx_oom();
    for (size_t i = 0; i < npz->count; i++) v[i] = &npz->arrays[i];
    qsort(v, npz->count, sizeof *v, cmp_names);
    teexec_status *st = NULL;
    for (size_t i = 1; i < npz->count && !st; i++)
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            st = BAD(name, "npz archive has two arrays named '%s'", v[i]->name);
    free(v);
    return st;
}

void tx_npz_free(tx_npz *npz)
{
    if (!npz) return;
    for (size_t i = 0; i < npz->count; i++) {
        free(npz->arrays[i].name);
        tx_tensor_release(&npz->arrays[i].tensor);
    }
    free(npz->arrays);
    free(npz);
}

const tx_tensor *tx_npz_find(const tx_npz *npz, const char *name)
{
    if (!npz || !name) return NULL;
    for (size_t i = 0; i < npz->count; i++)
        if (strcmp(npz->arrays[i].name, name) == 0) return &npz->arrays[i].tensor;
    return NULL;
}

teexec_status *tx_npz_read_memory(const void *data, size_t size, const char *name,
                                  uint64_t max_total_bytes, tx_npz **out)
{
    if (!out) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npz_read_memory: out is NULL");
    *out = NULL;
    if (!data && size) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npz_read_memory: no data");
    if (!max_total_bytes) max_total_bytes = TX_NPZ_DEFAULT_MAX_BYTES;
    const uint8_t *d = data;
    cd_loc loc = {0};
    TX_TRY(find_central_directory(d, size, name, &loc));

    member *ms = malloc((loc.entries ? (size_t)loc.entries : 1) * sizeof *ms);
    tx_npz *npz = calloc(1, sizeof *npz);
    if (!ms || !npz) {
        free(ms);
        free(npz);
        return tx_oom();
    }
    size_t n = 0;
    teexec_status *st = read_central_directory(d, &loc, name, ms, &n);
    if (st) goto fail;

    /* The budget is checked on the declared sizes before inflating
     * anything: a zip bomb is refused up front, and inflate never writes
     * past a declared size. */
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!tx_add_u64(total, ms[i].usize, &total) || total > max_total_bytes) {
            st = tx_status_new(TEEXEC_ERR_LIMIT, name, NULL,
                               "npz archive's members inflate to more than the budget of "
                               "%llu bytes", (unsigned long long)max_total_bytes);
            goto fail;
        }
    }
    npz->arrays = calloc(n ? n : 1, sizeof *npz->arrays);
    if (!npz->arrays) {
        st = tx_oom();
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        tx_npz_array *a = &npz->arrays[i];
        size_t alen = ms[i].name_len - 4;
        a->name = malloc(alen + 1);
        if (!a->name) {
            st = tx_oom();
            goto fail;
        }
        memcpy(a->name, ms[i].name, alen);
        a->name[alen] = '\0';
        npz->count = i + 1;
        if ((st = decode_member(d, &loc, &ms[i], name, a))) goto fail;
    }
    if ((st = check_duplicates(npz, name))) goto fail;
    free(ms);
    *out = npz;
    return NULL;
fail:
    free(ms);
    tx_npz_free(npz);
    return st;
}

teexec_status *tx_npz_read_file(const char *path, uint64_t max_total_bytes, tx_npz **out)
{
    if (!out || !path) return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npz_read_file: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int err = errno;
        close(fd);
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "%s",
                             !S_ISREG(sb.st_mode) ? "not a regular file" : strerror(err));
    }
    if ((uint64_t)sb.st_size > SIZE_MAX / 2) {
        close(fd);
        return tx_status_new(TEEXEC_ERR_LIMIT, path, NULL, "file too large");
    }
    size_t size = (size_t)sb.st_size;
    if (size == 0) {
        close(fd);
        return BAD(path, "not a zip archive (empty file)");
    }
    /* Mapped read-only: stored members are parsed in place and only the
     * members' decoded tensors take memory. */
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (map == MAP_FAILED)
        return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot map: %s", strerror(err));
    teexec_status *st = tx_npz_read_memory(map, size, path, max_total_bytes, out);
    munmap(map, size);
    return st;
}

/* ------------------------------------------------------------------ */
/* Writer                                                              */
/* ------------------------------------------------------------------ */

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void wr32(uint8_t *p, uint32_t v)
{
    wr16(p, (uint16_t)v);
    wr16(p + 2, (uint16_t)(v >> 16));
}
static void wr64(uint8_t *p, uint64_t v)
{
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

typedef struct out_member {
    void *npy;
    size_t npy_size;
    size_t name_len;
    uint32_t crc;
    uint64_t offset;
} out_member;

/* Growable output buffer; `failed` latches allocation/overflow failures so
 * appends can be chained and checked once. */
typedef struct obuf {
    uint8_t *p;
    size_t len, cap;
    bool failed;
} obuf;

static uint8_t *ob_reserve(obuf *b, size_t n)
{
    if (b->failed) return NULL;
    size_t need;
    if (!tx_add_size(b->len, n, &need)) {
        b->failed = true;
        return NULL;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < need) {
            if (!tx_mul_size(cap, 2, &cap)) {
                cap = need;
                break;
            }
        }
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->failed = true;
            return NULL;
        }
        b->p = q;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len = need;
    return at;
}

static void ob_put(obuf *b, const void *src, size_t n)
{
    uint8_t *at = ob_reserve(b, n);
    if (at && n) memcpy(at, src, n);
}

static teexec_status *check_out_name(const char *nm, size_t i)
{
    if (!nm || !*nm)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "npz array %zu has an empty name", i);
    size_t len = strlen(nm);
    if (len > 65000)
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "npz array name is too long");
    for (size_t k = 0; k < len; k++)
        if ((unsigned char)nm[k] < 0x20 || nm[k] == 0x7f)
            return tx_error(TEEXEC_ERR_INVALID_ARGUMENT,
                            "npz array name has a control character");
    return NULL;
}

#define ZIP_DOS_DATE 0x0021u /* 1980-01-01: fixed, so output is reproducible */

static void write_archive(obuf *b, size_t count, const char *const *names, out_member *om)
{
    for (size_t i = 0; i < count; i++) {
        uint64_t sz = om[i].npy_size;
        bool big = sz >= 0xffffffffu;
        om[i].offset = b->len;
        uint8_t *h = ob_reserve(b, LOCAL_SIZE);
        if (!h) return;
        wr32(h, SIG_LOCAL);
        wr16(h + 4, big ? 45 : 20);
        wr16(h + 6, 0);
        wr16(h + 8, 0);
        wr16(h + 10, 0);
        wr16(h + 12, ZIP_DOS_DATE);
        wr32(h + 14, om[i].crc);
        wr32(h + 18, big ? 0xffffffffu : (uint32_t)sz);
        wr32(h + 22, big ? 0xffffffffu : (uint32_t)sz);
        wr16(h + 26, (uint16_t)(om[i].name_len + 4));
        wr16(h + 28, big ? 20 : 0);
        ob_put(b, names[i], om[i].name_len);
        ob_put(b, ".npy", 4);
        if (big) {
            uint8_t x[20];
            wr16(x, 1);
            wr16(x + 2, 16);
            wr64(x + 4, sz);
            wr64(x + 12, sz);
            ob_put(b, x, sizeof x);
        }
        ob_put(b, om[i].npy, om[i].npy_size);
    }
    uint64_t cd_off = b->len;
    for (size_t i = 0; i < count; i++) {
        uint64_t sz = om[i].npy_size;
        bool big = sz >= 0xffffffffu, far = om[i].offset >= 0xffffffffu;
        uint8_t x[28];
        size_t xl = 0;
        if (big || far) {
            wr16(x, 1);
            xl = 4;
            if (big) {
                wr64(x + xl, sz);
                wr64(x + xl + 8, sz);
                xl += 16;
            }
            if (far) {
                wr64(x + xl, om[i].offset);
                xl += 8;
            }
            wr16(x + 2, (uint16_t)(xl - 4));
        }
        uint8_t *c = ob_reserve(b, CENTRAL_SIZE);
        if (!c) return;
        memset(c, 0, CENTRAL_SIZE);
        wr32(c, SIG_CENTRAL);
        wr16(c + 4, 45);
        wr16(c + 6, (big || far) ? 45 : 20);
        wr16(c + 14, ZIP_DOS_DATE);
        wr32(c + 16, om[i].crc);
        wr32(c + 20, big ? 0xffffffffu : (uint32_t)sz);
        wr32(c + 24, big ? 0xffffffffu : (uint32_t)sz);
        wr16(c + 28, (uint16_t)(om[i].name_len + 4));
        wr16(c + 30, (uint16_t)xl);
        wr32(c + 38, 0644u << 16); /* unix mode in the high half */
        wr32(c + 42, far ? 0xffffffffu : (uint32_t)om[i].offset);
        ob_put(b, names[i], om[i].name_len);
        ob_put(b, ".npy", 4);
        ob_put(b, x, xl);
    }
    uint64_t cd_size = b->len - cd_off;
    bool z64 = count >= 0xffff || cd_off >= 0xffffffffu || cd_size >= 0xffffffffu;
    if (z64) {
        uint64_t z_off = b->len;
        uint8_t *z = ob_reserve(b, EOCD64_SIZE + LOCATOR64_SIZE);
        if (!z) return;
        memset(z, 0, EOCD64_SIZE + LOCATOR64_SIZE);
        wr32(z, SIG_EOCD64);
        wr64(z + 4, EOCD64_SIZE - 12);
        wr16(z + 12, 45);
        wr16(z + 14, 45);
        wr64(z + 24, count);
        wr64(z + 32, count);
        wr64(z + 40, cd_size);
        wr64(z + 48, cd_off);
        uint8_t *l = z + EOCD64_SIZE;
        wr32(l, SIG_LOCATOR64);
        wr64(l + 8, z_off);
        wr32(l + 16, 1);
    }
    uint8_t *e = ob_reserve(b, EOCD_SIZE);
    if (!e) return;
    memset(e, 0, EOCD_SIZE);
    wr32(e, SIG_EOCD);
    wr16(e + 8, z64 ? 0xffff : (uint16_t)count);
    wr16(e + 10, z64 ? 0xffff : (uint16_t)count);
    wr32(e + 12, z64 ? 0xffffffffu : (uint32_t)cd_size);
    wr32(e + 16, z64 ? 0xffffffffu : (uint32_t)cd_off);
}

teexec_status *tx_npz_encode(size_t count, const char *const *names,
                             const tx_tensor *const *tensors, void **out, size_t *out_size)
{
    if (!out || !out_size || (count && (!names || !tensors)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_npz_encode: bad arguments");
    *out = NULL;
    *out_size = 0;
    if (count > TX_NPZ_MAX_MEMBERS)
        return tx_error(TEEXEC_ERR_LIMIT, "npz with %zu arrays is over the limit of %u", count,
                        TX_NPZ_MAX_MEMBERS);
    for (size_t i = 0; i < count; i++) {
        TX_TRY(check_out_name(names[i], i));
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "npz array name '%s' is used twice",
                                names[i]);
    }
    out_member *om = calloc(count ? count : 1, sizeof *om);
    if (!om) return tx_oom();
    teexec_status *st = NULL;
    for (size_t i = 0; i < count && !st; i++) {
        st = tx_npy_encode(tensors[i], &om[i].npy, &om[i].npy_size);
        if (st) {
            st = tx_status_prefix(st, "npz array '%s'", names[i]);
            break;
        }
        om[i].name_len = strlen(names[i]);
        om[i].crc = crc32_u64(om[i].npy, om[i].npy_size);
    }
    obuf b = {0};
    if (!st) {
        write_archive(&b, count, names, om);
        if (b.failed) st = tx_oom();
    }
    for (size_t i = 0; i < count; i++) free(om[i].npy);
    free(om);
    if (st) {
        free(b.p);
        return st;
    }
    *out = b.p;
    *out_size = b.len;
    return NULL;
}

teexec_status *tx_npz_write_file(const char *path, size_t count, const char *const *names,
                                 const tx_tensor *const *tensors)
{
    void *buf;
    size_t size;
    teexec_status *st = tx_npz_encode(count, names, tensors, &buf, &size);
    if (st) return tx_status_with_file(st, path);
    const void *pieces[1] = {buf};
    st = tx_write_file_atomic(path, 1, pieces, &size);
    free(buf);
    return st;
}
