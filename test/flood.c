/* A test-only preload, loaded before the library: a process that pins
 * itself to exactly the CPU FLOOD_CPU names then floods the library's
 * channel (the one datagram socket it holds) with well-formed reports of
 * all CPUs for FLOOD_SECONDS, as fast as it can, never waiting: a broken
 * or hostile worker. It writes "flooded N" to FLOOD_FILE when done. With
 * FLOOD_FIRST=1 the other processes' pins wait until the flood has begun
 * (FLOOD_FILE.started), so that their reports find the channel full. The
 * settings are read at load: nginx gives its workers an environment of
 * its own. */
#define _GNU_SOURCE
#include "../report.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef int setaffinity_fn(pid_t, size_t, const cpu_set_t *);

static int flood_cpu = -1, seconds = 3, first;
static char file[4096], started[4200];

__attribute__((constructor)) static void read_settings(void)
{
    const char *cpu = getenv("FLOOD_CPU"), *s = getenv("FLOOD_SECONDS"),
               *f = getenv("FLOOD_FILE");
    if (cpu)
        flood_cpu = atoi(cpu);
    if (s)
        seconds = atoi(s);
    if (f && strlen(f) < sizeof file)
        strcpy(file, f);
    snprintf(started, sizeof started, "%s.started", file);
    first = getenv("FLOOD_FIRST") != NULL;
}

/* Waits, 10 s at most, for the flood to have begun, and a little more
 * for the channel to be full. */
static void after_flood_began(void)
{
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 1000 && access(started, F_OK) < 0; i++)
        nanosleep(&tick, NULL);
    tick.tv_nsec = 200 * 1000 * 1000;
    nanosleep(&tick, NULL);
}

/* The library's channel: the one AF_UNIX datagram socket. */
static int channel(void)
{
    int fd, type, domain, found = -1;
    socklen_t len;
    for (fd = 3; fd < 1024; fd++) {
        len = sizeof type;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
            continue;
        len = sizeof domain;
        if (type == SOCK_DGRAM &&
            getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 &&
            domain == AF_UNIX)
            found = fd;
    }
    return found;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void flood(void)
{
    struct ma_report r = {0};
    unsigned char msg[MA_REPORT_SIZE];
    long sent = 0;
    int fd = channel(), out;
    double end = now() + seconds;
    char line[64];
    for (int c = 0; c < CPU_SETSIZE; c++)
        CPU_SET(c, &r.mask);
    ma_report_encode(&r, msg);
    out = open(started, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (out >= 0)
        close(out);
    while (fd >= 0 && now() < end)
        if (send(fd, msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
            sent++;
    out = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (out >= 0 &&
        write(out, line, (size_t)snprintf(line, sizeof line, "flooded %ld\n",
                                          sent)) < 0)
        sent = -1;
    if (out >= 0)
        close(out);
}

int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    setaffinity_fn *next =
        (setaffinity_fn *)dlsym(RTLD_NEXT, "sched_setaffinity");
    bool flooder = flood_cpu >= 0 && CPU_COUNT_S(size, mask) == 1 &&
                   CPU_ISSET_S((size_t)flood_cpu, size, mask);
    int rc, e;
    if (first && !flooder)
        after_flood_began();
    rc = next(pid, size, mask);
    e = errno;
    if (rc == 0 && flooder)
        flood();
    errno = e;
    return rc;
}
