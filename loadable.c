/* libmasteraff: whether a file beside the library may be loaded into the
 * master. Where the directory can be written by another user (the
 * workers' user, a shared volume), a file put there after the start would
 * run its constructor in the root master at the next memory move. Only
 * what no one but root and the library's owner could have put or swapped
 * there is loaded.
 *
 * Shared by the library and the command (masteraff status), so that both
 * tell the same. The stat calls are the system call's: glibc's carry a
 * symbol version of their own (internal.h). */
#define _GNU_SOURCE
#include "loadable.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

static int lstat_path(const char *path, struct stat *st)
{
    return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st,
                        AT_SYMLINK_NOFOLLOW);
}

static bool on_read_only_mount(const char *path)
{
    struct statvfs fs;
    return statvfs(path, &fs) == 0 && (fs.f_flag & ST_RDONLY);
}

/* Whether another user than the owner may change what path holds: the
 * sticky bit counts where keep_entries, for a directory whose entries
 * only their owners may replace. */
static bool others_may_write(const char *path, const struct stat *st,
                             bool keep_entries)
{
    if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
        return false;
    if (keep_entries && (st->st_mode & S_ISVTX))
        return false;
    return !on_read_only_mount(path);
}

/* The reason path (shown as shown) may not be trusted, in why, or NULL. */
static const char *distrust(const char *path, const char *shown,
                            const struct stat *st, uid_t owner,
                            bool keep_entries, char *why, size_t len)
{
    if (S_ISLNK(st->st_mode))
        snprintf(why, len, "%s is a symbolic link", shown);
    else if (st->st_uid != 0 && st->st_uid != owner)
        snprintf(why, len, "%s is owned by uid %u, neither root nor the "
                 "library's owner", shown, (unsigned)st->st_uid);
    else if (others_may_write(path, st, keep_entries))
        snprintf(why, len, "%s is writable by other users than its owner "
                 "(mode %04o)", shown, (unsigned)(st->st_mode & 07777));
    else
        return NULL;
    return why;
}

/* Each directory from the one path names (under root, of length top)
 * up to /, cutting path as it goes. */
static int trusted_directories(char *path, size_t top, uid_t owner,
                               char *why, size_t len)
{
    struct stat st;
    bool holds_file = true;
    for (;;) {
        char *slash = strrchr(path + top, '/');
        if (lstat_path(path, &st) < 0)
            return -1;
        if (distrust(path, path + top, &st, owner, !holds_file, why, len))
            return 1;
        if (slash == path + top && !slash[1])
            return 0;
        /* The top keeps its slash: root itself, or /. */
        slash[slash == path + top] = '\0';
        holds_file = false;
    }
}

int ma_loadable(const char *root, const char *dir, const char *name,
                uid_t owner, char *why, size_t len)
{
    char path[PATH_MAX];
    size_t top = strlen(root);
    struct stat st;
    int n = snprintf(path, sizeof path, "%s%s/%s", root, dir, name);
    if (n < 0 || (size_t)n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (lstat_path(path, &st) < 0)
        return -1;
    if (distrust(path, path + top, &st, owner, false, why, len))
        return 1;
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, len, "%s is not a regular file", path + top);
        return 1;
    }
    path[n - strlen(name) - 1] = '\0';
    return trusted_directories(path, top, owner, why, len);
}
