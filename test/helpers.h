/* Shared by the C programs the shell tests drive (errnos, orphan, hostile,
 * secure): a TAP-like check line, and the count of the library's channels
 * a process holds. */
#ifndef MASTERAFF_TEST_HELPERS_H
#define MASTERAFF_TEST_HELPERS_H

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

static int failures;

__attribute__((format(printf, 2, 3))) static inline void
check(int cond, const char *fmt, ...)
{
    va_list ap;
    printf("%s - ", cond ? "ok" : "not ok");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
    if (!cond)
        failures++;
}

/* This process's sockets of a type (0: any), the last one found in *last
 * when last is not NULL; -1 when /proc cannot be read. */
static inline int sockets_of_type(int want, int *last)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d))) {
        int fd = atoi(de->d_name), type;
        socklen_t len = sizeof type;
        if (de->d_name[0] != '.' && fd != dirfd(d) &&
            getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
            (want == 0 || type == want)) {
            if (last)
                *last = fd;
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The library's channels are this process's SOCK_SEQPACKET descriptors. */
static inline int seqpacket_fds(void)
{
    return sockets_of_type(SOCK_SEQPACKET, NULL);
}

#endif
