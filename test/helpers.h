/* Shared by the C programs the shell tests drive (errnos, orphan, hostile,
 * secure): a TAP-like check line, and the count of the library's channels
 * a process holds. */
#ifndef MASTERAFF_TEST_HELPERS_H
#define MASTERAFF_TEST_HELPERS_H

#include <dirent.h>
#include <signal.h>
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

/* This process's descriptors for which match(fd, arg) holds, the last one
 * found in *last when last is not NULL; -1 when /proc cannot be read. */
static inline int fds_matching(int (*match)(int fd, int arg), int arg,
                               int *last)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d))) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] != '.' && fd != dirfd(d) && match(fd, arg)) {
            if (last)
                *last = fd;
            n++;
        }
    }
    closedir(d);
    return n;
}

static inline int is_socket_of_type(int fd, int want)
{
    int type;
    socklen_t len = sizeof type;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
           (want == 0 || type == want);
}

/* This process's sockets of a type (0: any), as fds_matching. */
static inline int sockets_of_type(int want, int *last)
{
    return fds_matching(is_socket_of_type, want, last);
}

/* Blocks sig and gives it handler, as nginx does its signals: they run
 * in its sigsuspend only, with *open, the mask from before, let in. */
static inline void handle_in_sleep_only(int sig, void (*handler)(int),
                                        sigset_t *open)
{
    struct sigaction sa = {.sa_handler = handler};
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_BLOCK, &one, open);
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

/* Whether fd is an AF_UNIX datagram socket: the library's channel is
 * the only kind a process of the tests holds. */
static inline int is_unix_dgram(int fd, int unused)
{
    struct sockaddr_storage sa;
    socklen_t len = sizeof sa;
    (void)unused;
    return is_socket_of_type(fd, SOCK_DGRAM) &&
           getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
           sa.ss_family == AF_UNIX;
}

/* How many of them the process holds. */
static inline int unix_dgrams(void)
{
    return fds_matching(is_unix_dgram, 0, NULL);
}

#endif
