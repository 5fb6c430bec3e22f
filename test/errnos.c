/* errnos [basic|emfile|forkfail|forkok]: the library must leave the program's
 * calls exactly as they are without it, errno included. Prints one line per
 * check, "ok - WHAT" or "not ok - WHAT: DETAIL"; exits 1 if any failed.
 * Every mode expects the same with and without the library.
 *
 *   basic     fork() in a parent, a child and a grandchild; the child pins
 *             itself (success and EINVAL), pins its parent, a missing pid
 *             (ESRCH), and uses pthread_setaffinity_np.
 *   emfile    the descriptor table is full but for one slot: fork() still
 *             works (the library's socketpair cannot), twice.
 *   forkfail  run under RLIMIT_NPROC=1 so that fork() fails: -1 with
 *             EAGAIN, and no socket left behind.
 *   forkok    run under RLIMIT_NPROC=2: fork() works (one child at a time);
 *             the library, which starts no thread, needs no more.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

#define MARK 4242 /* an errno value no call sets */


static const char *who = "parent";

/* errno after a call that succeeds must be MARK, as it was before. */
static void pins(void)
{
    cpu_set_t mine, none, other;
    int rc, e;

    CPU_ZERO(&none);
    if (sched_getaffinity(0, sizeof mine, &mine) < 0) {
        check(0, "%s: sched_getaffinity: %s", who, strerror(errno));
        return;
    }

    errno = MARK;
    rc = sched_setaffinity(0, sizeof mine, &mine);
    e = errno;
    check(rc == 0 && e == MARK,
          "%s: sched_setaffinity(0) succeeds, errno unchanged (rc %d errno %d)",
          who, rc, e);

    errno = MARK;
    rc = sched_setaffinity(getpid(), sizeof mine, &mine);
    e = errno;
    check(rc == 0 && e == MARK,
          "%s: sched_setaffinity(getpid()) succeeds, errno unchanged "
          "(rc %d errno %d)", who, rc, e);

    errno = MARK;
    rc = sched_setaffinity(0, sizeof none, &none);
    e = errno;
    check(rc == -1 && e == EINVAL,
          "%s: sched_setaffinity(0, empty mask) fails with EINVAL "
          "(rc %d errno %d)", who, rc, e);

    errno = MARK;
    rc = sched_setaffinity(0x3ffffff0, sizeof mine, &mine);
    e = errno;
    check(rc == -1 && e == ESRCH,
          "%s: sched_setaffinity(no such pid) fails with ESRCH "
          "(rc %d errno %d)", who, rc, e);

    /* Our own parent (the test's shell may be another user's). */
    if (strcmp(who, "parent") != 0 &&
        sched_getaffinity(getppid(), sizeof other, &other) == 0) {
        errno = MARK;
        rc = sched_setaffinity(getppid(), sizeof other, &other);
        e = errno;
        check(rc == 0 && e == MARK,
              "%s: sched_setaffinity(parent) succeeds, errno unchanged "
              "(rc %d errno %d)", who, rc, e);
    }

    errno = MARK;
    rc = pthread_setaffinity_np(pthread_self(), sizeof mine, &mine);
    e = errno;
    check(rc == 0 && e == MARK,
          "%s: pthread_setaffinity_np(self) succeeds, errno unchanged "
          "(rc %d errno %d)", who, rc, e);

    errno = MARK;
    rc = pthread_setaffinity_np(pthread_self(), sizeof none, &none);
    e = errno;
    check(rc == EINVAL && e == MARK,
          "%s: pthread_setaffinity_np(self, empty mask) returns EINVAL, "
          "errno unchanged (rc %d errno %d)", who, rc, e);
}

/* fork() whose child runs fn and exits with the number of its failures. */
static void forks(const char *child_name, void (*fn)(void))
{
    pid_t pid;
    int e, status;

    errno = MARK;
    pid = fork();
    e = errno;
    if (pid == 0) {
        who = child_name;
        failures = 0;
        check(e == MARK, "%s: errno in the child is unchanged (%d)", who, e);
        if (fn)
            fn();
        fflush(stdout);
        _exit(failures ? 1 : 0);
    }
    check(pid > 0 && e == MARK,
          "%s: fork() succeeds, errno unchanged (pid %d errno %d)", who,
          (int)pid, e);
    if (pid < 0)
        return;
    errno = MARK;
    if (waitpid(pid, &status, 0) != pid) {
        check(0, "%s: waitpid: %s", who, strerror(errno));
        return;
    }
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s: child %d exits cleanly (status 0x%x)", who, (int)pid, status);
}

static void grandchild(void)
{
    pins();
}

static void child(void)
{
    pins();
    forks("grandchild", grandchild);
    /* A child that has forked is a master itself: pins again. */
    pins();
}

static int open_sockets(void)
{
    return sockets_of_type(0, NULL);
}

static int mode_basic(void)
{
    forks("parent", NULL);
    forks("parent", child);
    pins();
    forks("parent", child);
    return failures != 0;
}

/* Fills the descriptor table but for one slot. */
static int mode_emfile(void)
{
    struct rlimit rl;
    int fd, last = -1;

    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
        check(0, "setrlimit: %s", strerror(errno));
        return 1;
    }
    while ((fd = dup(0)) >= 0)
        last = fd;
    check(errno == EMFILE, "the descriptor table is full (errno %d)", errno);
    close(last);
    forks("parent", child);
    forks("parent", child);
    pins();
    return failures != 0;
}

static int mode_forkfail(void)
{
    pid_t pid;
    int e, before = open_sockets(), after;

    for (int i = 0; i < 2; i++) {
        errno = MARK;
        pid = fork();
        e = errno;
        if (pid == 0)
            _exit(0);
        check(pid == -1 && e == EAGAIN,
              "fork() under RLIMIT_NPROC fails with EAGAIN (pid %d errno %d)",
              (int)pid, e);
        if (pid > 0)
            waitpid(pid, NULL, 0);
    }
    after = open_sockets();
    check(after == before,
          "no socket left behind by the failed forks (%d before, %d after)",
          before, after);
    pins();
    return failures != 0;
}

static int mode_forkok(void)
{
    forks("parent", NULL);
    forks("parent", NULL);
    pins();
    return failures != 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "basic") == 0)
        return mode_basic();
    if (strcmp(mode, "emfile") == 0)
        return mode_emfile();
    if (strcmp(mode, "forkfail") == 0)
        return mode_forkfail();
    if (strcmp(mode, "forkok") == 0)
        return mode_forkok();
    fprintf(stderr, "usage: %s [basic|emfile|forkfail|forkok]\n", argv[0]);
    return 2;
}
