/* libmasteraff: the interposition. Each exported function, what it adds
 * to the real one, and where the work goes.
 *
 * fork() in a target program gives each child a SOCK_SEQPACKET channel to
 * its parent; the parent becomes a master, with an epoll set and a
 * listener thread (listener.c) that hands what children say to the
 * decisions (decide.c). A child that pins itself (sched_setaffinity or
 * pthread_setaffinity_np on itself) sends its new mask there. A master the
 * library moved reads back its original mask (sched_getaffinity).
 *
 * setsid() drops the channel of a child that detaches from its parent
 * (nginx's daemon fork); the exec functions keep the library across nginx's
 * binary upgrade and give a moved master's new image its original mask.
 *
 * fork() holds the lock (state.h) across the real fork; what runs in the
 * child between fork and its return is async-signal-safe.
 */
#define _GNU_SOURCE
#include "autocpus.h"
#include "forkmark.h"
#include "report.h"
#include "state.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* The channel made for one fork, before it happens. */
struct prefork {
    struct owned_fd master_end, child_end;
    struct ma_place place;
    const char *no_channel; /* why the child gets none, or NULL */
};

/* What a child calls between fork (or vfork) and exec, where a lookup
 * could wait for the dynamic linker's lock held by another thread of the
 * parent: looked up at load in every program. */
static void resolve_for_children(void)
{
    REAL(execve);
    REAL(execvp);
    REAL(setsid);
}

/* A target's children also restore their mask and report their pins
 * between fork and exec. */
static bool resolve_for_target(void)
{
    bool required = REAL(fork) && REAL(sched_setaffinity) &&
                    REAL(sched_getaffinity);
    /* The others answer ENOSYS when they are missing, as libc would. */
    REAL(pthread_setaffinity_np);
    return required;
}

static void load_target(void)
{
    self.pid = getpid();
    if (!resolve_for_target()) {
        ma_log(MA_LOG_ERROR, "fork, sched_setaffinity or sched_getaffinity "
               "not found after libmasteraff; it stays inert");
        return;
    }
    ma_config_load();
}

static void load(void)
{
    resolve_for_children();
    if (ma_config_target())
        load_target();
}

static void init(int argc, char **argv)
{
    pthread_once(&load_once, load);
    /* errno only here: binding it would cost every other program. */
    if (ma_cfg.active) {
        int e = errno;
        ma_place_at_start(argc, argv);
        errno = e;
    }
}

#ifdef __GLIBC__
/* glibc calls a constructor with main's arguments: the command line that
 * says which configuration nginx will read. */
__attribute__((constructor)) static void masteraff_init(int argc, char **argv,
                                                        char **envp)
{
    (void)envp;
    init(argc, argv);
}
#else
/* musl calls it with none: no argv, and the command line is read from
 * /proc/self/cmdline. */
__attribute__((constructor)) static void masteraff_init(void)
{
    init(0, NULL);
}
#endif

/* The first interposed call may come before the constructor (from another
 * library's): loading then must not touch the caller's errno. */
static void ensure_loaded(void)
{
    int e = errno;
    pthread_once(&load_once, load);
    errno = e;
}

static bool pins_itself(pid_t pid)
{
    return pid == 0 || pid == getpid() || pid == gettid();
}

static void report_pin(void)
{
    struct ma_report r;
    unsigned char msg[MA_REPORT_SIZE];
    if (REAL(sched_getaffinity)(0, sizeof r.mask, &r.mask) < 0)
        return;
    r.sent_ns = now_ns();
    ma_report_encode(&r, msg);
    /* The parent may be gone or not reading: never block, never SIGPIPE. */
    if (send(self.report.fd, msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) <
            0 &&
        errno != EAGAIN) {
        ma_log(MA_LOG_WARN, "process %d pinned itself, but its parent %d "
               "cannot be told (%s); nothing follows it", getpid(),
               self.parent, strerror(errno));
        ma_release(&self.report);
    }
}

/* A successful pin is worth a report only in a child with a channel: any
 * other program does not even ask whether it pinned itself. A vfork child
 * of that child is not the one its parent knows. */
static bool may_report(int rc)
{
    return rc == 0 && ma_cfg.active && ma_is_ours(&self.report) &&
           in_own_process();
}

static void report_pin_keeping_errno(void)
{
    int e = errno;
    report_pin();
    errno = e;
}

/* A master whose main thread's mask is no longer the library's takes it
 * for its own, unless a change of its cpuset explains it (decide.c). The
 * cpuset is read before the lock; the check is made under it: the
 * listener may be moving the master just then. */
static bool master_mask_checked(void)
{
    int e = errno;
    cpu_set_t cpuset;
    unsigned reads;
    bool known;
    if (!ma_cfg.active || !in_own_process() || !is_master())
        return false;
    known = ma_cpuset_cpus(&cpuset, &reads) == 0;
    pthread_mutex_lock(&lock);
    ma_not_the_programs_reads(reads);
    if (is_master())
        ma_check_own_mask(known ? &cpuset : NULL);
    errno = e;
    return true;
}

static void notice_own_mask(void)
{
    if (master_mask_checked())
        pthread_mutex_unlock(&lock);
}

EXPORT int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    sched_setaffinity_fn *next;
    cpu_set_t mapped;
    int rc;
    ensure_loaded();
    if (!(next = REAL(sched_setaffinity))) {
        errno = ENOSYS;
        return -1;
    }
    if (pins_itself(pid) && ma_auto_mapped(size, mask, &mapped))
        mask = &mapped;
    rc = next(pid, size, mask);
    if (may_report(rc) && pins_itself(pid))
        report_pin_keeping_errno();
    if (rc == 0 && pins_itself(pid))
        notice_own_mask();
    return rc;
}

EXPORT int pthread_setaffinity_np(pthread_t thread, size_t size,
                                  const cpu_set_t *mask)
{
    pthread_setaffinity_np_fn *next;
    int rc;
    ensure_loaded();
    if (!(next = REAL(pthread_setaffinity_np)))
        return ENOSYS;
    rc = next(thread, size, mask);
    if (may_report(rc) && pthread_equal(thread, pthread_self()))
        report_pin_keeping_errno();
    if (rc == 0 && pthread_equal(thread, pthread_self()))
        notice_own_mask();
    return rc;
}

/* A master the library moved reads back the mask it started with: forks
 * such as Tengine derive their "auto" worker masks from it, and must
 * assign them as they would without the library. */
static void original_mask_into(size_t size, cpu_set_t *mask)
{
    size_t n = size < sizeof self.original ? size : sizeof self.original;
    memcpy(mask, &self.original, n);
}

EXPORT int sched_getaffinity(pid_t pid, size_t size, cpu_set_t *mask)
{
    sched_getaffinity_fn *next;
    int rc;
    bool locked;
    ensure_loaded();
    if (!(next = REAL(sched_getaffinity))) {
        errno = ENOSYS;
        return -1;
    }
    rc = next(pid, size, mask);
    if (rc != 0 || !ma_cfg.active || !pins_itself(pid) || !in_own_process())
        return rc;
    locked = master_mask_checked();
    /* The mask the library gave is replaced by the one it started with;
     * one it did not give is the master's own, read as it is. */
    if (moved())
        original_mask_into(size, mask);
    if (locked)
        pthread_mutex_unlock(&lock);
    return rc;
}

/* A channel to a parent that is gone is of no use: nginx's daemon fork
 * leaves the master's parent dead at once. */
static void drop_orphan_channel(void)
{
    if (self.report.fd >= 0 && getppid() != self.parent)
        ma_release(&self.report);
}

static bool make_wake_fd(void)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = MA_WAKE_MARK};
    self.wake = ma_own(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    return self.wake.fd >= 0 &&
           epoll_ctl(self.epoll.fd, EPOLL_CTL_ADD, self.wake.fd, &ev) == 0;
}

/* The first fork makes a master: its original mask, its epoll set and the
 * eventfd that wakes its listener. The listener thread comes after the fork,
 * in the parent only: a thread created before it would leave glibc's
 * thread signal handlers installed in a child that itself never has one. */
static bool become_master(void)
{
    if (is_master() || self.gave_up)
        return is_master();
    /* A master placed at start knows its original mask already. */
    if (!self.start_pending) {
        if (REAL(sched_getaffinity)(0, sizeof self.original,
                                    &self.original) < 0) {
            ma_give_up("cannot read its own affinity", errno);
            return false;
        }
        self.placed = self.asked = self.original;
    }
    CPU_ZERO(&self.handled);
    self.epoll = ma_own(epoll_create1(EPOLL_CLOEXEC));
    if (self.epoll.fd < 0) {
        ma_give_up("cannot create its epoll set", errno);
        return false;
    }
    if (!make_wake_fd()) {
        int e = errno;
        ma_stop_being_master();
        ma_give_up("cannot create its eventfd", e);
        return false;
    }
    /* Its descriptors are told from the program's by /proc/self/fdinfo. */
    if (!ma_epoll_is_ours()) {
        ma_close_keeping_errno(self.epoll.fd);
        ma_close_keeping_errno(self.wake.fd);
        self.epoll.fd = self.wake.fd = -1;
        ma_give_up("cannot read its epoll set's /proc/self/fdinfo", ENOENT);
        return false;
    }
    ma_brood_init(&brood);
    return true;
}

/* Whether the master's descriptors are still the library's. */
static bool still_master(void)
{
    if (ma_epoll_is_ours())
        return true;
    ma_stop_being_master();
    ma_give_up("the program closed the library's descriptors", EBADF);
    return false;
}

/* Said once per start or reload, at its first child without a channel:
 * nginx forks them in order, so the later ones have none either, but for
 * those forked after the old children's exits gave descriptors back. */
static void warn_no_channel(const struct prefork *pf, pid_t pid)
{
    if (!pf->no_channel || pid <= 0 || self.warned_gen == pf->place.gen)
        return;
    self.warned_gen = pf->place.gen;
    ma_log(MA_LOG_WARN, "master %d stops following its children at child %u "
           "of the latest start or reload (pid %d, counting from 0 as nginx "
           "numbers its workers): %s; the children from it on get no channel "
           "and cannot be followed", getpid(), pf->place.rank, pid,
           pf->no_channel);
}

/* The program needs descriptors for each child too (nginx: a socketpair
 * per worker, twice as many during a reload), and must never run out
 * because of the library: after each fork's channel, a few descriptors
 * (1/32 of the soft limit, at least MIN_FREE: the listener opens up to
 * three files for a moment) must stay free below the limit, or the library
 * gives up this channel and then closes others. Numbers
 * are given lowest first, so every number below the channel's is taken. */
#define MIN_FREE 8L

static long descriptors_missing(const int sv[2], struct rlimit *lim,
                                long *reserve)
{
    long top = sv[0] > sv[1] ? sv[0] : sv[1];
    if (getrlimit(RLIMIT_NOFILE, lim) < 0 || lim->rlim_cur == RLIM_INFINITY ||
        lim->rlim_cur > (rlim_t)INT_MAX)
        return 0;
    *reserve = (long)lim->rlim_cur / 32 > MIN_FREE ? (long)lim->rlim_cur / 32
                                                   : MIN_FREE;
    return *reserve - ((long)lim->rlim_cur - 1 - top);
}

/* Closes the channels the leader choice can best do without, until
 * `missing` descriptors are free again; returns how many it closed. The
 * newest generation's first child, whom the master will follow, goes
 * last, and only while fewer than MIN_FREE would be free: `spare` of the
 * missing may stay missing for it. So where the room nginx leaves is less
 * than the reserve (a limit just above its need, hundreds of workers), the
 * master still follows the new worker 0. */
static long yield_descriptors(long missing, long spare)
{
    struct ma_child *c;
    long closed = 0;
    while (closed < missing && (c = ma_brood_least_needed(&brood))) {
        if (ma_brood_newest_first(&brood, c) && closed >= missing - spare)
            break;
        ma_stop_listening(c);
        ma_brood_forget(&brood, c);
        closed++;
    }
    ma_apply_decision();
    return closed;
}

/* A generation's first child keeps its new channel when closing others
 * leaves MIN_FREE descriptors free; sets how many were closed. */
static bool room_for_first_child(struct ma_place place, long missing,
                                 long reserve, long *closed)
{
    *closed = 0;
    if (place.rank != 0)
        return false;
    *closed = yield_descriptors(missing, 0);
    return *closed >= missing - (reserve - MIN_FREE);
}

/* Gives the descriptors of a channel just made back, and more if the
 * program lacks them; says why in the child's warning. */
static const char *too_few_descriptors(const int sv[2], long missing,
                                       long closed, const struct rlimit *lim,
                                       long reserve)
{
    static char why[240];
    close(sv[0]);
    close(sv[1]);
    closed += yield_descriptors(missing - closed - 2, reserve - MIN_FREE);
    snprintf(why, sizeof why, "too few descriptors left for the program "
             "(soft RLIMIT_NOFILE %ld, of which the library keeps %ld free "
             "after each fork, %ld for the first child's channel; %ld other "
             "channel%s closed)", (long)lim->rlim_cur, reserve, MIN_FREE,
             closed, closed == 1 ? "" : "s");
    return why;
}

/* Whether the program has collected child pid's exit status (nginx reaps
 * a dead worker before it forks the replacement). Looks without reaping:
 * the status and SIGCHLD stay the program's. */
static bool reaped(pid_t pid)
{
    siginfo_t si = {0};
    return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0 &&
           errno == ECHILD;
}

static struct prefork prepare_fork(uint64_t asked_ns, bool reread,
                                   const cpu_set_t *cpuset)
{
    struct prefork pf = {.master_end = NO_FD, .child_end = NO_FD};
    struct rlimit lim;
    long missing, reserve = 0, closed;
    int sv[2];
    drop_orphan_channel();
    if (!become_master() || !still_master())
        return pf;
    ma_check_own_mask(cpuset);
    ma_drain_channels();
    ma_memory_prefork();
    ma_brood_check_reaped(&brood, reaped);
    pf.place = ma_brood_place(&brood, reread, asked_ns);
    if (pf.place.opened)
        ma_auto_open_generation(reread);
    if (brood.n >= MA_MAX_CHILDREN) {
        static char full[80];
        snprintf(full, sizeof full, "it has %d children with a channel, as "
                 "many as the library follows", MA_MAX_CHILDREN);
        pf.no_channel = full;
        return pf;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        pf.no_channel = strerror(errno);
        return pf;
    }
    missing = descriptors_missing(sv, &lim, &reserve);
    if (missing > 0 &&
        !room_for_first_child(pf.place, missing, reserve, &closed)) {
        pf.no_channel = too_few_descriptors(sv, missing, closed, &lim, reserve);
        return pf;
    }
    pf.master_end = ma_own(sv[0]);
    pf.child_end = ma_own(sv[1]);
    return pf;
}

static void start_listening(void)
{
    int rc;
    if (self.listening || !is_master())
        return;
    rc = ma_start_listener();
    if (rc == 0) {
        self.listening = true;
        return;
    }
    ma_stop_being_master();
    ma_give_up("cannot start its listener thread", rc);
}

static bool listen_to(const struct owned_fd *channel, pid_t pid,
                      struct ma_place place)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = channel->fd};
    struct ma_child *c = ma_brood_add(&brood, pid, channel->fd, place);
    if (!c)
        return false;
    c->fd_dev = channel->dev;
    c->fd_ino = channel->ino;
    if (epoll_ctl(self.epoll.fd, EPOLL_CTL_ADD, channel->fd, &ev) == 0)
        return true;
    ma_brood_forget(&brood, c);
    return false;
}

static void after_fork_in_parent(struct prefork *pf, pid_t pid)
{
    warn_no_channel(pf, pid);
    ma_release(&pf->child_end);
    start_listening();
    if (pid < 0 || pf->master_end.fd < 0 || !is_master() ||
        !listen_to(&pf->master_end, pid, pf->place))
        ma_release(&pf->master_end);
    else
        ma_plan_pin_check(&pf->place);
    ma_plan_touch_up();
}

/* Runs in the child between fork and its return: async-signal-safe only.
 * The child keeps nothing of the master's but its own channel, and closes
 * only what is still the library's. */
static void after_fork_in_child(struct prefork *pf)
{
    static const pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
    /* The parent's pid, not getppid(): nginx's daemon parent may have
     * exited already. */
    self.parent = self.pid;
    self.pid = getpid();
    /* A master's fork checked its descriptors (prepare_fork). */
    if (is_master())
        ma_stop_being_master_after_fork();
    ma_release(&self.report);
    ma_release(&pf->master_end);
    if (moved())
        REAL(sched_setaffinity)(0, sizeof self.original, &self.original);
    ma_memory_drop_policy();
    ma_auto_forked(&pf->place);
    ma_cpuset_after_fork();
    self.report = pf->child_end;
    self.listening = false;
    self.gave_up = false;
    self.warned_gen = 0;
    self.placed = self.asked = self.original;
    self.start_pending = false;
    self.mask_taken = false;
    listener_tid = 0;
    ma_decisions_forget();
    /* Another thread of the parent may have been waiting for the lock:
     * nobody waits for it in this child. */
    forks_waiting = 0;
    memcpy(&lock, &unlocked, sizeof lock);
}

EXPORT pid_t fork(void)
{
    struct prefork pf;
    int saved_errno = errno;
    uint64_t asked;
    struct ma_fork_mark called;
    cpu_set_t cpuset;
    bool cpuset_known;
    fork_fn *next;
    pid_t pid;

    ensure_loaded();
    if (!(next = REAL(fork))) {
        errno = ENOSYS;
        return -1;
    }
    if (!ma_cfg.active) {
        if (ma_cfg.bad)
            ma_config_say_again();
        return next();
    }
    /* Taken before the library does anything: what it reads is not the
     * program's. */
    asked = now_ns();
    called = ma_fork_mark_now();
    /* Its reads come after the mark: not counted as the program's. */
    cpuset_known = ma_cpuset_cpus(&cpuset, NULL) == 0;
    ma_lock_for_fork();
    pf = prepare_fork(asked, ma_reread_since(&called),
                      cpuset_known ? &cpuset : NULL);
    errno = saved_errno;
    pid = next();
    saved_errno = errno;
    if (pid == 0) {
        after_fork_in_child(&pf);
        errno = saved_errno;
        return 0;
    }
    after_fork_in_parent(&pf, pid);
    ma_fork_returned();
    pthread_mutex_unlock(&lock);
    errno = saved_errno;
    return pid;
}

/* ---- daemons ---- */

/* nginx's daemon fork: the child that detaches carries on as the master,
 * in the place its parent was given at start (children start with the
 * original mask, as they would without the library). */
static void carry_on_as_master(void)
{
    if (!start.pid || self.parent != start.pid || is_master())
        return;
    if (!ma_cfg.dry_run &&
        REAL(sched_setaffinity)(0, sizeof start.target, &start.target) < 0)
        return;
    self.placed = start.target;
    if (!ma_cfg.dry_run)
        self.asked = start.target;
    self.start_pending = true;
    start.pid = getpid();
    ma_memory_prefer_at_start(start.node);
}

/* A child that makes itself a session leader is detaching from its parent
 * (nginx's daemon fork): it will not be a worker of that parent, and the
 * channel would only stay open for nothing. */
EXPORT pid_t setsid(void)
{
    setsid_fn *next;
    pid_t rc;
    ensure_loaded();
    if (!(next = REAL(setsid))) {
        errno = ENOSYS;
        return -1;
    }
    rc = next();
    if (rc >= 0 && in_own_process()) {
        ma_release(&self.report);
        carry_on_as_master();
    }
    return rc;
}

/* ---- nginx's binary upgrade ---- */

static bool has_variable(char *const envp[], const char *assignment)
{
    size_t name_len = strcspn(assignment, "=") + 1;
    for (size_t i = 0; envp && envp[i]; i++)
        if (strncmp(envp[i], assignment, name_len) == 0)
            return true;
    return false;
}

static size_t count_variables(char *const envp[])
{
    size_t n = 0;
    while (envp && envp[n])
        n++;
    return n;
}

/* nginx's USR2 re-executes its own binary from a child of the master with
 * a scrubbed environment: the new master keeps the library and its
 * settings. Runs in a child between fork and exec: async-signal-safe. */
static int execve_carrying(const char *path, char *const argv[],
                           char *const envp[])
{
    size_t n = count_variables(envp), k = 0;
    char *env[n + (size_t)ma_cfg.n_carried + 1];
    for (size_t i = 0; i < n; i++)
        env[k++] = envp[i];
    for (int i = 0; i < ma_cfg.n_carried; i++)
        if (!has_variable(envp, ma_cfg.carried[i]))
            env[k++] = ma_cfg.carried[i];
    env[k] = NULL;
    return REAL(execve)(path, argv, env);
}

/* Whether path (nginx passes its argv[0]) is the program we were loaded
 * in, by whatever name (a symlink, a path relative to where nginx
 * started): the file now at our executable's path, which an upgrade
 * replaces. stat is async-signal-safe. */
static bool same_program(const char *path)
{
    struct stat a, b;
    int e = errno;
    bool same = path && ma_stat(path, &a) == 0 && ma_stat(ma_cfg.exe, &b) == 0 &&
                a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    errno = e;
    return same;
}

/* A master that re-executes itself in place (uWSGI's reload) would take
 * the mask it was moved to for its original one: the new image starts
 * where the program started. If exec fails the master is put back. The
 * caller may be a vfork child sharing the master's memory: only its own
 * thread's mask and policy change, no bookkeeping. */
static bool leave_placement(void)
{
    if (!ma_cfg.active || !moved())
        return false;
    REAL(sched_setaffinity)(0, sizeof self.original, &self.original);
    ma_memory_leave_policy();
    return true;
}

static int resume_placement(int rc)
{
    int e = errno;
    REAL(sched_setaffinity)(0, sizeof self.placed, &self.placed);
    ma_memory_resume_policy();
    errno = e;
    return rc;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    /* No pthread_once here: execve runs between fork and exec, where only
     * async-signal-safe calls belong. Only a call that comes before the
     * library is loaded (from another library's constructor, while the
     * program has one thread) looks execve up here. */
    execve_fn *next = REAL(execve);
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    if (ma_cfg.active && self.report.fd >= 0 && same_program(path))
        return execve_carrying(path, argv, envp);
    if (leave_placement())
        return resume_placement(next(path, argv, envp));
    return next(path, argv, envp);
}

/* glibc's execv and execvp reach the kernel without our execve. */
EXPORT int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

EXPORT int execvp(const char *file, char *const argv[])
{
    execvp_fn *next;
    ensure_loaded();
    if (!(next = REAL(execvp))) {
        errno = ENOSYS;
        return -1;
    }
    if (leave_placement())
        return resume_placement(next(file, argv));
    return next(file, argv);
}

