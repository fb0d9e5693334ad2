/* atomic_write.c - temp file in the same folder, fsync, rename, fsync folder. */
#include "format/atomic_write.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static teexec_status *io_error(const char *path, const char *step, int err)
{
    return tx_status_new(TEEXEC_ERR_IO, path, NULL, "cannot write: %s failed: %s", step,
                         strerror(err));
}

static int write_all(int fd, const void *data, size_t size)
{
    const unsigned char *p = data;
    while (size > 0) {
        size_t chunk = size > (1u << 30) ? (1u << 30) : size;
        ssize_t n = write(fd, p, chunk);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        p += n;
        size -= (size_t)n;
    }
    return 0;
}

/* Folder metadata must reach the disk too, or the rename itself can be lost
 * in a crash. Failure here is not fatal: the data is already durable and
 * some filesystems refuse fsync on folders. */
static void sync_folder(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fsync(fd);
    (void)close(fd);
}

teexec_status *tx_write_file_atomic(const char *path, size_t count,
                                    const void *const *data, const size_t *size)
{
    if (!path || !*path || (count > 0 && (!data || !size)))
        return tx_error(TEEXEC_ERR_INVALID_ARGUMENT, "tx_write_file_atomic: bad arguments");
    size_t plen = strlen(path);
    const char *slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base)
        return tx_status_new(TEEXEC_ERR_INVALID_ARGUMENT, path, NULL,
                             "cannot write: the path names a folder");

    /* "<dir>/.<base>.tmp-XXXXXX": hidden, same folder, same filesystem. */
    size_t tmp_size = plen + 16;
    char *tmp = malloc(tmp_size);
    char *dir = malloc(dir_len + 2);
    if (!tmp || !dir) {
        free(tmp);
        free(dir);
        return tx_oom();
    }
    if (slash) {
        memcpy(dir, path, dir_len);
        dir[dir_len] = '\0';
        if (dir_len == 0) strcpy(dir, "/");
        snprintf(tmp, tmp_size, "%.*s/.%s.tmp-XXXXXX", (int)dir_len, path, base);
    } else {
        strcpy(dir, ".");
        snprintf(tmp, tmp_size, ".%s.tmp-XXXXXX", base);
    }

    teexec_status *st = NULL;
    int fd = mkstemp(tmp);
    if (fd < 0) {
        st = io_error(path, "creating a temporary file", errno);
        goto out;
    }
    if (fchmod(fd, 0644) != 0) {
        st = io_error(path, "fchmod", errno);
        goto fail_open;
    }
    for (size_t i = 0; i < count; i++) {
        if (size[i] == 0) continue;
        int err = write_all(fd, data[i], size[i]);
        if (err) {
            st = io_error(path, "write", err);
            goto fail_open;
        }
    }
    if (fsync(fd) != 0) {
        st = io_error(path, "fsync", errno);
        goto fail_open;
    }
    if (close(fd) != 0) {
        fd = -1;
        st = io_error(path, "close", errno);
        goto fail_closed;
    }
    if (rename(tmp, path) != 0) {
        st = io_error(path, "rename", errno);
        goto fail_closed;
    }
    sync_folder(dir);
    goto out;

fail_open:
    (void)close(fd);
fail_closed:
    (void)unlink(tmp);
out:
    free(tmp);
    free(dir);
    return st;
}
