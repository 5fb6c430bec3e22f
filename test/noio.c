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

/* The mode argument, present only when the flags create a file (a GNU
 * statement expression: va_start must run in the variadic function). */
#define MODE_ARG(flags)                                                   \
    ({                                                                    \
        va_list ap_;                                                      \
        mode_t mode_ = 0;                                                 \
        va_start(ap_, flags);                                             \
        if ((flags) & (O_CREAT | O_TMPFILE))                              \
            mode_ = (mode_t)va_arg(ap_, int);                             \
        va_end(ap_);                                                      \
        mode_;                                                            \
    })

int open(const char *path, int flags, ...)
{
    return open_unless_hidden("openat", AT_FDCWD, path, flags, MODE_ARG(flags));
}

int open64(const char *path, int flags, ...)
{
    return open_unless_hidden("openat64", AT_FDCWD, path, flags,
                              MODE_ARG(flags));
}

int openat(int dirfd, const char *path, int flags, ...)
{
    return open_unless_hidden("openat", dirfd, path, flags, MODE_ARG(flags));
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    return open_unless_hidden("openat64", dirfd, path, flags, MODE_ARG(flags));
}
