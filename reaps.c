/* libmasteraff: the children the master has collected. nginx reaps its
 * children with waitpid inside its SIGCHLD handler, and forks the
 * replacement of a dead worker right after, in the same wake-up: a death
 * is known where the program itself learns of it, before the fork that
 * may replace it. The interposed wait functions (shim.c) note each pid
 * here, async-signal-safe; the notes are collected in ordinary context,
 * at the master's forks and after its sleep (sleep.c).
 *
 * A ring of pids, written by whichever thread or handler reaps, and read
 * under the lock. A writer that finds its slot still full (more reaps
 * than the ring holds between two collections) marks the overflow, and
 * the collection then asks the kernel which children are gone. */
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <sys/wait.h>

static pid_t ring[MA_MAX_CHILDREN];
static unsigned long written, collected;
static int overflowed;

void ma_reaps_note(pid_t pid)
{
    unsigned long i = __atomic_fetch_add(&written, 1, __ATOMIC_RELAXED);
    pid_t old = __atomic_exchange_n(&ring[i % MA_MAX_CHILDREN], pid,
                                    __ATOMIC_RELEASE);
    if (old)
        __atomic_store_n(&overflowed, 1, __ATOMIC_RELAXED);
}

static void child_reaped(pid_t pid)
{
    struct ma_child *c = ma_brood_find_pid(&brood, pid);
    if (c)
        ma_brood_died(&brood, c);
}

/* Whether the program has collected child pid's exit status: looks
 * without reaping, so the status stays the program's. */
static bool gone(pid_t pid)
{
    siginfo_t si = {0};
    return REAL(waitid)(P_PID, (id_t)pid, &si,
                        WEXITED | WNOHANG | WNOWAIT) < 0 &&
           errno == ECHILD;
}

/* Some notes were overwritten: every child is looked at. */
static unsigned collect_lost(void)
{
    unsigned n = 0;
    for (size_t i = 0; i < brood.n;) {
        if (gone(brood.kids[i].pid)) {
            ma_brood_died(&brood, &brood.kids[i]);
            n++;
        } else {
            i++;
        }
    }
    return n;
}

unsigned ma_reaps_collect(void)
{
    unsigned n = 0;
    int e = errno;
    while (collected < __atomic_load_n(&written, __ATOMIC_ACQUIRE)) {
        pid_t pid = __atomic_exchange_n(&ring[collected % MA_MAX_CHILDREN],
                                        0, __ATOMIC_ACQUIRE);
        if (!pid) /* its writer has not stored it yet */
            break;
        child_reaped(pid);
        collected++;
        n++;
    }
    if (__atomic_exchange_n(&overflowed, 0, __ATOMIC_RELAXED))
        n += collect_lost();
    errno = e;
    return n;
}
