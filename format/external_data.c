/* external_data.c - external tensor data: location rules, safe open, mmap cache. */
#define _GNU_SOURCE /* O_NOFOLLOW, O_DIRECTORY, O_CLOEXEC, AT_SYMLINK_NOFOLLOW */
#include "format/external_data.h"

#include "base/checked.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct ext_entry {
    char *base_dir;
    char *location;
    uint8_t *map;   /* NULL for an empty file or when not mappable */
    int fd;         /* kept open only when not mapped */
    uint64_t size;
} ext_entry;

struct tx_external_cache {
    pthread_mutex_t mu;
    ext_entry *entries;
    size_t n, cap;
    uint64_t total_bytes; /* sizes of the distinct files opened */
};

teexec_status *tx_external_parse_u64(const char *text, const char *key, uint64_t *out)
{
    if (!text || !*text)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "external data key '%s' is empty", key);
    uint64_t v = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9')
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "external data key '%s' is not a non-negative decimal number: '%.40s'",
                            key, text);
        if (!tx_mul_u64(v, 10, &v) || !tx_add_u64(v, (uint64_t)(*c - '0'), &v))
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "external data key '%s' overflows 64 bits: '%.40s'", key, text);
    }
    *out = v;
    return NULL;
}

teexec_status *tx_external_check_location(const char *loc)
{
    if (!loc || !*loc)
        return tx_error(TEEXEC_ERR_BAD_MODEL, "external data location is empty");
    if (loc[0] == '/')
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data location '%.200s' is an absolute path; it must be "
                        "relative to the model's folder",
                        loc);
    if (strchr(loc, '\\'))
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data location '%.200s' contains a backslash", loc);
    const char *c = loc;
    for (;;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 0)
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "external data location '%.200s' has an empty path component", loc);
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return tx_error(TEEXEC_ERR_BAD_MODEL,
                            "external data location '%.200s' contains '..'; it must stay inside "
                            "the model's folder",
                            loc);
        if (!slash) break;
        c = slash + 1;
    }
    return NULL;
}

teexec_status *tx_external_parse(const Onnx__TensorProto *tp, tx_external_ref *out)
{
    memset(out, 0, sizeof(*out));
    const char *offset = NULL, *length = NULL;
    bool seen_loc = false, seen_checksum = false, seen_basepath = false;
    for (size_t i = 0; i < tp->n_external_data; i++) {
        const Onnx__StringStringEntryProto *kv = tp->external_data[i];
        const char *k = kv->key ? kv->key : "";
        const char *v = kv->value ? kv->value : "";
        bool *seen = NULL;
        bool dummy;
        if (!strcmp(k, "location")) {
            seen = &seen_loc;
            out->location = v;
        } else if (!strcmp(k, "offset")) {
            seen = &dummy;
            dummy = offset != NULL;
            offset = v;
        } else if (!strcmp(k, "length")) {
            seen = &dummy;
            dummy = length != NULL;
            length = v;
        } else if (!strcmp(k, "checksum")) {
            seen = &seen_checksum;
        } else if (!strcmp(k, "basepath")) {
            seen = &seen_basepath;
        } else {
            continue; /* unknown keys are ignored, as ONNX does */
        }
        if (*seen)
            return tx_error(TEEXEC_ERR_BAD_MODEL, "external data key '%s' is given twice", k);
        *seen = true;
    }
    if (!seen_loc) return tx_error(TEEXEC_ERR_BAD_MODEL, "external data has no 'location' key");
    TX_TRY(tx_external_check_location(out->location));
    if (offset) TX_TRY(tx_external_parse_u64(offset, "offset", &out->offset));
    if (length) {
        TX_TRY(tx_external_parse_u64(length, "length", &out->length));
        out->has_length = true;
    }
    return NULL;
}

teexec_status *tx_external_cache_new(tx_external_cache **out)
{
    *out = NULL;
    tx_external_cache *c = calloc(1, sizeof(*c));
    if (!c) return tx_oom();
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return tx_error(TEEXEC_ERR_INTERNAL, "cannot create a mutex");
    }
    *out = c;
    return NULL;
}

void tx_external_cache_free(tx_external_cache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) {
        ext_entry *e = &c->entries[i];
        if (e->map) munmap(e->map, (size_t)e->size);
        if (e->fd >= 0) close(e->fd);
        free(e->base_dir);
        free(e->location);
    }
    free(c->entries);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* Why opening `comp` under dirfd failed, as a status. */
static teexec_status *open_error(int dirfd, const char *comp, int err, const char *loc,
                                 bool want_dir)
{
    struct stat sb;
    if (err == ELOOP ||
        (fstatat(dirfd, comp, &sb, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(sb.st_mode)))
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data location '%.200s': '%.200s' is a symbolic link, which is "
                        "refused",
                        loc, comp);
    if (err == ENOENT)
        return tx_error(TEEXEC_ERR_IO,
                        "external data file '%.200s' not found (no '%.200s' in the model's folder)",
                        loc, comp);
    if (err == ENOTDIR && want_dir)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data location '%.200s': '%.200s' is not a folder", loc, comp);
    return tx_error(TEEXEC_ERR_IO, "cannot open external data file '%.200s': %s", loc,
                    strerror(err));
}

/* Opens location below base_dir without following any symlink. */
static teexec_status *open_beneath(const char *base_dir, const char *loc, int *out_fd)
{
    *out_fd = -1;
    size_t n = strlen(loc) + 1;
    char *path = malloc(n);
    if (!path) return tx_oom();
    memcpy(path, loc, n);
    int dirfd = open(base_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        int e = errno;
        free(path);
        return tx_error(TEEXEC_ERR_IO, "cannot open the external data folder '%.200s': %s",
                        base_dir, strerror(e));
    }
    teexec_status *st = NULL;
    char *comp = path;
    for (;;) {
        char *slash = strchr(comp, '/');
        if (slash) *slash = 0;
        bool last = !slash;
        if (!last && !strcmp(comp, ".")) {
            comp = slash + 1;
            continue;
        }
        int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
        /* O_NONBLOCK: a FIFO must be refused, not waited on. */
        flags |= last ? (O_NONBLOCK | O_NOCTTY) : O_DIRECTORY;
        int fd = openat(dirfd, comp, flags);
        if (fd < 0) {
            st = open_error(dirfd, comp, errno, loc, !last);
            break;
        }
        close(dirfd);
        dirfd = fd;
        if (last) break;
        comp = slash + 1;
    }
    free(path);
    if (st) {
        close(dirfd);
        return st;
    }
    struct stat sb;
    if (fstat(dirfd, &sb) != 0) {
        int e = errno;
        close(dirfd);
        return tx_error(TEEXEC_ERR_IO, "cannot stat external data file '%.200s': %s", loc,
                        strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(dirfd);
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data location '%.200s' is not a regular file", loc);
    }
    if (sb.st_nlink != 1) {
        close(dirfd);
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data file '%.200s' has %llu hard links; hard-linked files are "
                        "refused",
                        loc, (unsigned long long)sb.st_nlink);
    }
    *out_fd = dirfd;
    return NULL;
}

/* Finds or opens the entry for (base_dir, loc). Called with the mutex held. */
static teexec_status *get_entry(tx_external_cache *c, const char *base_dir, const char *loc,
                                uint64_t max_total, ext_entry **out)
{
    for (size_t i = 0; i < c->n; i++) {
        if (!strcmp(c->entries[i].location, loc) && !strcmp(c->entries[i].base_dir, base_dir)) {
            *out = &c->entries[i];
            return NULL;
        }
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        ext_entry *ne = realloc(c->entries, cap * sizeof(*ne));
        if (!ne) return tx_oom();
        c->entries = ne;
        c->cap = cap;
    }
    int fd;
    TX_TRY(open_beneath(base_dir, loc, &fd));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tx_error(TEEXEC_ERR_IO, "cannot stat '%.200s': %s", loc, strerror(e));
    }
    uint64_t size = (uint64_t)sb.st_size, total;
    if (!tx_add_u64(c->total_bytes, size, &total) || total > max_total) {
        close(fd);
        return tx_error(TEEXEC_ERR_LIMIT,
                        "external data file '%.200s' (%llu bytes) takes the model over the "
                        "external data budget (max_external_bytes = %llu)",
                        loc, (unsigned long long)size, (unsigned long long)max_total);
    }
    if (size > SIZE_MAX / 2) {
        close(fd);
        return tx_error(TEEXEC_ERR_LIMIT, "external data file '%.200s' is too large", loc);
    }
    ext_entry e = {NULL, NULL, NULL, -1, size};
    size_t bl = strlen(base_dir) + 1, ll = strlen(loc) + 1;
    e.base_dir = malloc(bl);
    e.location = malloc(ll);
    if (!e.base_dir || !e.location) {
        free(e.base_dir);
        free(e.location);
        close(fd);
        return tx_oom();
    }
    memcpy(e.base_dir, base_dir, bl);
    memcpy(e.location, loc, ll);
    if (size) {
        void *m = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) e.map = m;
    }
    if (e.map || !size)
        close(fd);
    else
        e.fd = fd;
    c->total_bytes = total;
    c->entries[c->n] = e;
    *out = &c->entries[c->n++];
    return NULL;
}

static teexec_status *pread_all(int fd, void *dst, uint64_t len, uint64_t off, const char *loc)
{
    uint8_t *d = dst;
    while (len) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : (size_t)len;
        ssize_t r = pread(fd, d, chunk, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return tx_error(TEEXEC_ERR_IO, "cannot read external data file '%.200s': %s", loc,
                            r < 0 ? strerror(errno) : "unexpected end of file");
        d += r;
        len -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return NULL;
}

teexec_status *tx_external_read(tx_external_cache *cache, const char *base_dir,
                                const tx_external_ref *ref, uint64_t expected,
                                uint64_t max_external_bytes, void *dst)
{
    if (!base_dir || !cache)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "the tensor uses external data ('%.200s'), but the model was not loaded "
                        "from a folder that could hold it",
                        ref->location ? ref->location : "");
    TX_TRY(tx_external_check_location(ref->location));
    if (ref->has_length && ref->length != expected)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data length %llu does not match the %llu bytes the tensor's "
                        "dims and type need",
                        (unsigned long long)ref->length, (unsigned long long)expected);
    if (pthread_mutex_lock(&cache->mu) != 0)
        return tx_error(TEEXEC_ERR_INTERNAL, "cannot lock the external data cache");
    ext_entry *e = NULL;
    teexec_status *st = get_entry(cache, base_dir, ref->location, max_external_bytes, &e);
    /* Copy the entry: another thread may grow the array once unlocked. The
     * mapping and descriptor themselves live until the cache is freed. */
    ext_entry ent = st ? (ext_entry){0} : *e;
    pthread_mutex_unlock(&cache->mu);
    if (st) return st;
    uint64_t end;
    if (ref->offset > ent.size)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data offset %llu is past the end of '%.200s' (%llu bytes)",
                        (unsigned long long)ref->offset, ref->location,
                        (unsigned long long)ent.size);
    if (!ref->has_length && ent.size - ref->offset != expected)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data '%.200s' has %llu bytes after offset %llu, but the "
                        "tensor needs %llu (no 'length' key)",
                        ref->location, (unsigned long long)(ent.size - ref->offset),
                        (unsigned long long)ref->offset, (unsigned long long)expected);
    if (!tx_add_u64(ref->offset, expected, &end) || end > ent.size)
        return tx_error(TEEXEC_ERR_BAD_MODEL,
                        "external data range offset %llu + length %llu runs past the end of "
                        "'%.200s' (%llu bytes)",
                        (unsigned long long)ref->offset, (unsigned long long)expected,
                        ref->location, (unsigned long long)ent.size);
    if (!expected || !dst) return NULL; /* dst NULL: validate only */
    if (ent.map) {
        memcpy(dst, ent.map + ref->offset, (size_t)expected);
        return NULL;
    }
    return pread_all(ent.fd, dst, expected, ref->offset, ref->location);
}

teexec_status *tx_external_data_names(const char *path, char **data_path, char **location)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t n = strlen(path) + 6, nb = strlen(base) + 6;
    *data_path = malloc(n);
    *location = malloc(nb);
    if (!*data_path || !*location) {
        free(*data_path);
        free(*location);
        *data_path = *location = NULL;
        return tx_oom();
    }
    snprintf(*data_path, n, "%s.data", path);
    snprintf(*location, nb, "%s.data", base);
    teexec_status *st = tx_external_check_location(*location);
    if (st) {
        free(*data_path);
        free(*location);
        *data_path = *location = NULL;
    }
    return st;
}
