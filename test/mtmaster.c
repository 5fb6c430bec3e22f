/* mtmaster: a multi-threaded master, for the library's sake (run it with
 * MASTERAFF_PROGRAMS=mtmaster).
 *
 * The main thread blocks SIGUSR1, SIGCHLD and SIGALRM, starts 3 threads
 * (which keep them blocked), then installs handlers and a 100 ms interval
 * timer. It forks 2 children: child 0 pins itself to CPU 1 with
 * pthread_setaffinity_np, child 1 to CPU 0 with sched_setaffinity; both
 * then sleep until killed. It prints
 *
 *     ready MASTER CHILD0 CHILD1
 *
 * and waits for SIGUSR1 and SIGCHLD (the caller sends SIGUSR1 and kills a
 * child), up to 60 s, in sigsuspend with the three unblocked, as nginx's
 * master waits: the only place where the main thread takes signals, and
 * where the library, which has no thread, reads what the children say.
 * The timer's ticks wake it to see a handler run by another thread. Then
 * it prints which thread ran each handler:
 *
 *     SIGUSR1 main|thread TID
 *     SIGCHLD main|thread TID
 *
 * kills and reaps its children, and exits 0 when both went to the main
 * thread. Children die with it (PR_SET_PDEATHSIG). */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t usr1_tid, chld_tid;

static void on_usr1(int sig)
{
    (void)sig;
    usr1_tid = (sig_atomic_t)syscall(SYS_gettid);
}

static void on_chld(int sig)
{
    (void)sig;
    chld_tid = (sig_atomic_t)syscall(SYS_gettid);
}

static void on_tick(int sig)
{
    (void)sig;
}

static void *idle(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static pid_t child(int cpu, int how)
{
    pid_t pid = fork();
    cpu_set_t one;
    int rc;

    if (pid != 0)
        return pid;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    rc = how ? sched_setaffinity(0, sizeof one, &one)
             : pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    if (rc != 0) {
        fprintf(stderr, "mtmaster: child cannot pin itself to CPU %d\n", cpu);
        _exit(1);
    }
    for (;;)
        pause();
}

int main(void)
{
    sigset_t these, none;
    struct sigaction sa;
    struct itimerval tick = {{0, 100000}, {0, 100000}};
    pthread_t t[3];
    pid_t c0, c1, me = getpid();

    setvbuf(stdout, NULL, _IOLBF, 0);
    sigemptyset(&these);
    sigaddset(&these, SIGUSR1);
    sigaddset(&these, SIGCHLD);
    sigaddset(&these, SIGALRM);
    sigemptyset(&none);
    pthread_sigmask(SIG_BLOCK, &these, NULL);
    for (int i = 0; i < 3; i++)
        if (pthread_create(&t[i], NULL, idle, NULL) != 0) {
            fprintf(stderr, "mtmaster: pthread_create failed\n");
            return 2;
        }

    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_chld;
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = on_tick;
    sigaction(SIGALRM, &sa, NULL);
    setitimer(ITIMER_REAL, &tick, NULL);

    c0 = child(1, 0);
    c1 = child(0, 1);
    if (c0 < 0 || c1 < 0) {
        fprintf(stderr, "mtmaster: fork failed: %s\n", strerror(errno));
        return 2;
    }
    printf("ready %d %d %d\n", (int)me, (int)c0, (int)c1);

    for (int i = 0; i < 600 && !(usr1_tid && chld_tid); i++)
        sigsuspend(&none);
    printf("SIGUSR1 %s %d\n", usr1_tid == me ? "main" : "thread", (int)usr1_tid);
    printf("SIGCHLD %s %d\n", chld_tid == me ? "main" : "thread", (int)chld_tid);
    kill(c0, SIGKILL);
    kill(c1, SIGKILL);
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    return !(usr1_tid == me && chld_tid == me);
}
