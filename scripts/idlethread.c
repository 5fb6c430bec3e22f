/* idlethread: a preloaded library that starts one thread in each process
 * at that process's first fork, a thread that blocks every signal and
 * sleeps for good, and does nothing else. scripts/floor preloads it into
 * nginx to measure what a thread in the master costs by itself, whatever
 * the thread does: glibc takes its locks around every fork of a process
 * with threads, and the children keep its multi-threaded paths (the
 * cancellation steps around each blocking system call) for their life. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

typedef pid_t fork_fn(void);

static void *sleep_for_good(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void start_thread_once_per_process(void)
{
    static pid_t started_in;
    sigset_t all, old;
    pthread_t t;
    if (started_in == getpid())
        return;
    started_in = getpid();
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&t, NULL, sleep_for_good, NULL) == 0)
        pthread_detach(t);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

__attribute__((visibility("default"))) pid_t fork(void)
{
    static fork_fn *next;
    int e = errno;
    if (!next)
        next = (fork_fn *)dlsym(RTLD_NEXT, "fork");
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    start_thread_once_per_process();
    errno = e;
    return next();
}
