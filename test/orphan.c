/* orphan dead|stopped [channel]: a child pins itself when its parent cannot
 * hear it. Prints "ok - WHAT" / "not ok - WHAT: DETAIL" lines (from the
 * child: the caller waits for its stdout to close); exit status 1 if any
 * failed.
 *
 *   dead     the parent exits right after fork(); the child pins once its
 *            parent is gone (nginx's daemon fork does this).
 *   stopped  the child stops its parent (SIGSTOP) and pins 20,000 times,
 *            then lets it go on: the parent's socket buffer fills up; no
 *            call may block (one that did would be ended by alarm(120)).
 *
 * Every pin must return 0 with errno unchanged, and no SIGPIPE may be
 * raised (its default action would kill the child). With "channel", the
 * child also checks that it holds the end of its parent's channel it
 * reports on (its one AF_UNIX datagram socket: the library is loaded and
 * active), so that the send path is really taken; and the stopped
 * parent, once it has reaped the child (in a blocking waitpid, before the
 * library reads what the child said), that it holds its channel's two
 * ends, no more: its one channel serves all its children, however many
 * reports one of them sent or lost. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define MARK 4242


static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits for cond(pid); false after 10 s, which only bounds a wait for
 * what will never come. */
static int wait_until(int (*cond)(pid_t), pid_t pid)
{
    for (int i = 0; i < 1000; i++) {
        if (cond(pid))
            return 1;
        sleep_ms(10);
    }
    return 0;
}

static pid_t first_parent;
static int reparented(pid_t unused)
{
    (void)unused;
    return getppid() != first_parent;
}

static int stopped(pid_t pid)
{
    char path[64], buf[512], *p;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return 0;
    p = fgets(buf, sizeof buf, f);
    fclose(f);
    p = p ? strrchr(buf, ')') : NULL;
    return p && p[1] == ' ' && p[2] == 'T';
}

/* Pins itself n times, alternately to all its CPUs and to the one it runs
 * on (no migration: cheap even on a loaded machine); counts the failures. */
static int pin_many(long n, const char *how)
{
    cpu_set_t all, one;
    int bad = 0;
    sched_getaffinity(0, sizeof all, &all);
    for (long i = 0; i < n; i++) {
        int rc, e, cpu = sched_getcpu();
        CPU_ZERO(&one);
        CPU_SET(cpu >= 0 ? cpu : 0, &one);
        errno = MARK;
        if (i % 2)
            rc = pthread_setaffinity_np(pthread_self(), sizeof all, &all);
        else
            rc = sched_setaffinity(0, sizeof one, &one);
        e = errno;
        if (rc != 0 || e != MARK) {
            if (bad++ < 3)
                check(0, "%s pin %ld: rc %d errno %d", how, i, rc, e);
        }
    }
    sched_setaffinity(0, sizeof all, &all);
    return bad;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "dead";
    int want_channel = argc > 2 && strcmp(argv[2], "channel") == 0;
    pid_t pid;

    if (strcmp(mode, "dead") != 0 && strcmp(mode, "stopped") != 0) {
        fprintf(stderr, "usage: %s dead|stopped [channel]\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_DFL);
    first_parent = getpid();
    pid = fork();
    if (pid < 0) {
        check(0, "fork: %s", strerror(errno));
        return 1;
    }
    if (pid > 0) {
        int status;
        if (strcmp(mode, "dead") == 0)
            return 0; /* gone at once: the child is an orphan */
        if (waitpid(pid, &status, 0) != pid)
            return 1;
        if (want_channel)
            check(unix_dgrams() == 2, "the parent holds its channel's two "
                  "ends, no more (%d AF_UNIX datagram sockets)",
                  unix_dgrams());
        if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            check(0, "the child ends with status 0x%x", status);
        return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }

    /* A send that blocked would end here, visibly: the child is killed
     * and its last lines are missing. */
    alarm(120);
    if (want_channel)
        check(unix_dgrams() == 1, "the child holds the end it reports on to "
              "its parent (%d AF_UNIX datagram sockets)", unix_dgrams());
    if (strcmp(mode, "dead") == 0) {
        int gone = wait_until(reparented, 0);
        check(gone, "the parent %d is gone (parent now %d)",
              (int)first_parent, (int)getppid());
        check(pin_many(4, "orphan") == 0,
              "pins after the parent is gone return 0, errno unchanged");
        check(1, "the orphan survived its pins (no SIGPIPE)");
    } else {
        pid_t parent = getppid();
        struct timespec t0, t1;
        double secs;
        kill(parent, SIGSTOP);
        check(wait_until(stopped, parent), "the parent %d is stopped",
              (int)parent);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        check(pin_many(20000, "stopped") == 0,
              "20000 pins while the parent is stopped return 0, errno "
              "unchanged, and none blocks");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
        printf("# 20000 pins in %.2f s\n", secs);
        kill(parent, SIGCONT);
    }
    return failures != 0;
}
