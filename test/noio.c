/* A test-only preload, loaded before the library: the per-thread I/O
 * counts (/proc/.../io) cannot be opened, as on a kernel built without
 * CONFIG_TASK_IO_ACCOUNTING. Every other path opens as it would (open and
 * open64 through openat, as glibc's own open does). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdarg.h>
#include <sys/types.h>

typedef int openat_fn(int, const char *, int, ...);

static bool hidden(const char *path)
{
    return path && fnmatch("/proc/*/io", path, 0) == 0;
}

static int open_unless_hidden(const char *name, int dirfd, const char *path,
                              int flags, mode_t mode)
{
    openat_fn *next;
    if (hidden(path)) {
        errno = ENOENT;
        return -1;
    }
    next = (openat_fn *)dlsym(RTLD_NEXT, name);
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    return next(dirfd, path, flags, mode);
}

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & (O_CREAT | O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
}

int open(const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;
    va_start(ap, flags);
    mode = mode_arg(flags, ap);
    va_end(ap);
    return open_unless_hidden("openat", AT_FDCWD, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;
    va_start(ap, flags);
    mode = mode_arg(flags, ap);
    va_end(ap);
    return open_unless_hidden("openat64", AT_FDCWD, path, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;
    va_start(ap, flags);
    mode = mode_arg(flags, ap);
    va_end(ap);
    return open_unless_hidden("openat", dirfd, path, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    va_list ap;
    mode_t mode;
    va_start(ap, flags);
    mode = mode_arg(flags, ap);
    va_end(ap);
    return open_unless_hidden("openat64", dirfd, path, flags, mode);
}
