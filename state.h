/* libmasteraff: what the interposers (shim.c), the master's decisions
 * (decide.c), its channel (channel.c), its sleep (sleep.c) and its reaps
 * (reaps.c) share: the process's role, its children, its descriptors, the
 * real definitions, and the lock.
 *
 * The master has no thread of the library's: everything the library does
 * in it runs on the program's own threads, at its forks, in its sleep
 * (sigsuspend) and at its affinity calls. The lock only keeps two threads
 * of a program that has several (and forks from more than one) out of each
 * other's way; whoever holds it blocks every signal, so that no handler of
 * the program's can come back into the library on the same thread. fork()
 * holds it across the real fork; the child, which has one thread, finds it
 * unlocked. */
#ifndef MASTERAFF_STATE_H
#define MASTERAFF_STATE_H

#include "affinity.h"
#include "brood.h"
#include "internal.h"

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef pid_t fork_fn(void);
typedef int sched_setaffinity_fn(pid_t, size_t, const cpu_set_t *);
typedef int sched_getaffinity_fn(pid_t, size_t, cpu_set_t *);
typedef int pthread_setaffinity_np_fn(pthread_t, size_t, const cpu_set_t *);
typedef int execve_fn(const char *, char *const[], char *const[]);
typedef pid_t setsid_fn(void);
typedef int execvp_fn(const char *, char *const[]);
typedef int sigsuspend_fn(const sigset_t *);
typedef pid_t wait4_fn(pid_t, int *, int, struct rusage *);
typedef int waitid_fn(idtype_t, id_t, siginfo_t *, int);

/* The definitions the program would call without the library. */
struct ma_real {
    void *fork, *sched_setaffinity, *sched_getaffinity,
        *pthread_setaffinity_np, *execve, *setsid, *execvp, *sigsuspend,
        *wait4, *waitid;
};
extern struct ma_real real;

void *ma_next_definition(void **slot, const char *name);

#define REAL(name) ((name##_fn *)ma_next_definition(&real.name, #name))

/* A descriptor the library made, and which file it is: the program may
 * close the number and get it back for a file of its own. Each of the
 * library's descriptors is a socket, whose inode no other file shares. */
struct owned_fd {
    int fd; /* or -1 */
    dev_t dev;
    ino_t ino;
};

#define NO_FD {.fd = -1}

/* What this process is to the library. Reset in every child. A vfork
 * child shares it with its parent, and must leave it alone. */
struct ma_self {
    pid_t pid;         /* the process it describes */
    struct owned_fd report; /* the end of its parent's channel it reports on */
    pid_t parent;      /* who the channel leads to */
    bool gave_up;      /* could not become a master; logged once */
    struct owned_fd channel; /* a master's end, which it reads */
    struct owned_fd children_end; /* the end its children inherit */
    bool sleeper;      /* it waits for work in sigsuspend (nginx) */
    unsigned wakes;    /* its returns from sigsuspend so far */
    unsigned forked_in_wake; /* the wake-up of its last fork, plus 1 */
    cpu_set_t original;
    cpu_set_t placed;  /* the mask the master was last given */
    cpu_set_t asked;   /* the mask last asked of the kernel for its threads,
                          which the kernel keeps within a changed cpuset */
    cpu_set_t cpuset;  /* its cpuset's CPUs when the library last looked;
                          empty before the first look (a cpuset never is) */
    cpu_set_t handled; /* the leader mask last followed or refused */
    bool start_pending; /* placed at start, worker 0 not seen yet */
    bool mask_taken;    /* the program or an administrator set the master's
                           mask: the library no longer moves it */
};
extern struct ma_self self;

/* A master's children, and which one it follows. */
extern struct ma_brood brood;

/* The placement made at start, for nginx's daemon child, which carries on
 * as the master, and for the line worker 0's pin confirms it in. */
struct ma_start {
    pid_t pid; /* the process placed, or 0 */
    cpu_set_t worker0, target;
    int node;
    char units[512];
    uint64_t at_ns;
};
extern struct ma_start start;

/* The units of the master's CPUs, read as workers need them. */
extern struct ma_topology topology;

static inline bool is_master(void)
{
    return self.channel.fd >= 0;
}

/* False in a vfork child, which runs on its parent's memory. */
static inline bool in_own_process(void)
{
    return getpid() == self.pid;
}

static inline bool moved(void)
{
    return !CPU_EQUAL(&self.placed, &self.original);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* ---- state.c: the lock, and descriptors closed only while their number
 * is still ours. The descriptor calls are async-signal-safe: they run in
 * children between fork and return. */

/* Takes the lock with every signal blocked; *old gets the mask to give
 * back to ma_unlock. */
void ma_lock(sigset_t *old);
void ma_unlock(const sigset_t *old);
/* In a child between fork and return: the lock is free again. */
void ma_lock_after_fork(void);

void ma_close_keeping_errno(int fd);
struct owned_fd ma_own(int fd);
bool ma_is_ours(const struct owned_fd *o);
void ma_release(struct owned_fd *o);

/* Closes what is still ours of the master's descriptors. */
void ma_stop_being_master(void);

/* Whether the master's descriptors are still the library's; if not, it
 * stops being a master, and says so. */
bool ma_still_master(void);

/* The mask to ask the kernel for, to put a thread back on the original
 * mask. Async-signal-safe. */
void ma_original_request(cpu_set_t *out);

/* Says once why this process will not follow its children. */
void ma_give_up(const char *what, int err);

/* ---- decide.c: the master's decisions and their log lines ---- */

/* Before main(): places an nginx master where worker 0 will be. */
void ma_place_at_start(int argc, char **argv);

/* Acts on the leader choice after any event. */
void ma_apply_decision(void);

/* Whether the library ever asked the kernel for this process's mask (in
 * it, or in the parent it was forked from). Async-signal-safe. */
bool ma_library_asked(void);

/* After a fork: the touch-up of the pages its copies dirtied, and, for the
 * first child of a start or reload, the check that a child pinned. */
void ma_plan_touch_up(void);
void ma_plan_pin_check(const struct ma_place *place);
/* Whether the master's mask is still the library's: a cpuset change
 * (cpuset, the CPUs just read, or NULL when unknown) is followed, a mask
 * the program or an administrator set is taken. */
void ma_check_own_mask(const cpu_set_t *cpuset);

/* The timed decisions that are due. */
void ma_run_due_decisions(void);

/* The earliest time a decision is due, or 0 for none. */
uint64_t ma_decisions_due(void);

/* In a child between fork and return: forgets the parent's plans.
 * Async-signal-safe. */
void ma_decisions_forget(void);

/* ---- cpuset.c: the CPUs of the process's cpuset ---- */

/* Reads them. Returns 0, or -1 when they cannot be read (no cgroup file
 * system, no cpuset controller). *reads, if not NULL, is set to the read
 * system calls it made. */
int ma_cpuset_cpus(cpu_set_t *out, unsigned *reads);

/* Whether the kernel keeps a mask a thread asked for within its cpuset
 * when the cpuset's CPUs change (Linux 6.2 and later), rather than giving
 * the thread all of them. */
bool ma_kernel_keeps_requests(void);

/* ---- channel.c: the one channel all of a master's children report on */

/* At the master's first fork: makes it. Returns 0, or -1 with errno. */
int ma_channel_open(void);

/* In a child that pinned itself: tells its parent its new mask. */
void ma_channel_report(void);

/* In a child about to execute a program: tells its parent to follow it no
 * more. Async-signal-safe. */
void ma_channel_farewell(void);

/* Reads at most budget reports and hands each to the brood and the
 * decisions. Returns how many it read. */
unsigned ma_channel_read(unsigned budget);

/* ---- reaps.c: the children the program collected (waitpid & co) ---- */

/* Async-signal-safe: in the interposed wait functions, which nginx calls
 * from its SIGCHLD handler. Notes pid as reaped. */
void ma_reaps_note(pid_t pid);

/* Hands each reap noted since the last call to the brood: the deaths of
 * its children. Returns how many. */
unsigned ma_reaps_collect(void);

/* ---- sleep.c: the master's sleep ---- */

/* The interposed sigsuspend of a master: waits for a signal as sigsuspend
 * does, and reads the channel meanwhile. */
int ma_sleep(const sigset_t *mask);

/* The events of a wake-up or a fork: reaps, then reports. */
void ma_take_events(unsigned budget);

#endif
