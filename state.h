/* libmasteraff: what the interposers (shim.c), the master's decisions
 * (decide.c) and its listener (listener.c) share: the process's role, its
 * children, its descriptors, the real definitions, and the lock.
 *
 * The calls go one way: shim.c calls into decide.c and listener.c, the
 * listener hands each event to decide.c, and decide.c calls neither. All
 * three use state.c.
 *
 * The lock: the listener thread does all its libc work (logging, reading
 * sysfs and /proc, localtime) while holding `lock`, and fork() holds it
 * across the real fork, so a child never inherits a libc lock or a
 * descriptor taken by the listener. Everything below is read and written
 * under it, but in the child between fork and its return (which has one
 * thread) and before the first fork (which has no listener). */
#ifndef MASTERAFF_STATE_H
#define MASTERAFF_STATE_H

#include "affinity.h"
#include "brood.h"
#include "internal.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

typedef pid_t fork_fn(void);
typedef int sched_setaffinity_fn(pid_t, size_t, const cpu_set_t *);
typedef int sched_getaffinity_fn(pid_t, size_t, cpu_set_t *);
typedef int pthread_setaffinity_np_fn(pthread_t, size_t, const cpu_set_t *);
typedef int execve_fn(const char *, char *const[], char *const[]);
typedef pid_t setsid_fn(void);
typedef int execvp_fn(const char *, char *const[]);

/* The definitions the program would call without the library. */
struct ma_real {
    void *fork, *sched_setaffinity, *sched_getaffinity,
        *pthread_setaffinity_np, *execve, *setsid, *execvp;
};
extern struct ma_real real;

void *ma_next_definition(void **slot, const char *name);

#define REAL(name) ((name##_fn *)ma_next_definition(&real.name, #name))

/* A descriptor the library made, and which file it is: the program may
 * close the number and get it back for a file of its own. */
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
    struct owned_fd report; /* channel to the parent */
    pid_t parent;      /* who the channel leads to */
    bool listening;    /* its listener thread runs */
    bool gave_up;      /* could not become a master; logged once */
    unsigned warned_gen; /* the generation whose children got no channel,
                            said; 0: none */
    struct owned_fd epoll; /* a master's set of channels to its children */
    struct owned_fd wake; /* an eventfd in that set: a fork wakes the listener */
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

/* The units of the master's own CPUs, read when it starts listening, so
 * that following a worker reads no file. What could not be read then is
 * read, and its failure said, when a worker needs it. */
extern struct ma_topology topology;

extern pthread_mutex_t lock;

/* Forks waiting for the lock, which the listener's read-ahead lets pass:
 * a mutex just unlocked goes to whoever asks first, often its unlocker. */
extern int forks_waiting;

static inline bool is_master(void)
{
    return self.epoll.fd >= 0;
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

/* ---- state.c: descriptors, closed only while their number is still
 * ours. Async-signal-safe: they run in children between fork and return. */

void ma_close_keeping_errno(int fd);
struct owned_fd ma_own(int fd);
bool ma_same_file(int fd, dev_t dev, ino_t ino);
bool ma_is_ours(const struct owned_fd *o);
void ma_release(struct owned_fd *o);
/* The data of the eventfd's entry in the library's epoll set ("masteraf"):
 * no entry of the program's under the eventfd's number carries it. */
#define MA_WAKE_MARK 0x6d61737465726166ULL
bool ma_epoll_is_ours(void);
bool ma_channel_is_ours(const struct ma_child *c);

/* Closes what is still ours of the master's descriptors. */
void ma_stop_being_master(void);
/* The same in a child between fork and return, after the fork's check. */
void ma_stop_being_master_after_fork(void);

/* Says once why this process will not follow its children. */
void ma_give_up(const char *what, int err);

void ma_lock_for_fork(void);

/* Wakes the listener, which may be asleep with no timeout, to take a new
 * time into account. */
/* The listener thread's id, once it runs. */
extern pid_t listener_tid;
void ma_wake_listener(void);

/* ---- decide.c: the master's decisions and their log lines ---- */

/* Before main(): places an nginx master where worker 0 will be. */
void ma_place_at_start(int argc, char **argv);

/* Acts on the leader choice after any event. */
void ma_apply_decision(void);

/* After a fork: the touch-up of the pages its copies dirtied, and, for the
 * first child of a start or reload, the check that a child pinned. */
void ma_plan_touch_up(void);
void ma_plan_pin_check(const struct ma_place *place);
/* Whether the master's mask is still the library's: a cpuset change
 * (cpuset, the CPUs read outside the lock, or NULL when unknown) is
 * followed, a mask the program or an administrator set is taken. */
void ma_check_own_mask(const cpu_set_t *cpuset);

/* The timed decisions, when due. */
void ma_touch_up_if_due(void);
void ma_check_pins_if_due(void);

/* The earliest time a decision is due, or 0 for none. */
uint64_t ma_decisions_due(void);

/* In a child between fork and return: forgets the parent's plans.
 * Async-signal-safe. */
void ma_decisions_forget(void);

/* ---- cpuset.c: the CPUs of the process's cpuset ---- */

/* Reads them, outside the lock. Returns 0, or -1 when they cannot be
 * read (no cgroup file system, no cpuset controller). *reads, if not
 * NULL, is set to the read system calls it made. */
int ma_cpuset_cpus(cpu_set_t *out, unsigned *reads);

/* In a child between fork and return: the reader's mutex unlocked.
 * Async-signal-safe. */
void ma_cpuset_after_fork(void);

/* Whether the kernel keeps a mask a thread asked for within its cpuset
 * when the cpuset's CPUs change (Linux 6.2 and later), rather than giving
 * the thread all of them. */
bool ma_kernel_keeps_requests(void);

/* ---- listener.c: the thread that reads the children's channels ---- */

int ma_start_listener(void);

/* Before a fork: what children said (or their deaths) up to now. */
void ma_drain_channels(void);

/* No longer listens to child c: its channel is closed. */
void ma_stop_listening(struct ma_child *c);

#endif
