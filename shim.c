/* libmasteraff: the interposition. Each exported function, what it adds
 * to the real one, and where the work goes.
 *
 * fork() in a target program makes the parent a master, with one channel
 * (channel.c) that every child inherits: a child that pins itself
 * (sched_setaffinity or pthread_setaffinity_np on itself) sends its new
 * mask there. The master has no thread of the library's: it reads the
 * channel at each fork and in its own sleep (sigsuspend, sleep.c), learns
 * of its children's deaths where it reaps them (the wait functions,
 * reaps.c), and hands both to the decisions (decide.c). A master the
 * library moved reads back its original mask (sched_getaffinity).
 *
 * setsid() drops the channel of a child that detaches from its parent
 * (nginx's daemon fork); the exec functions keep the library across nginx's
 * binary upgrade and give a moved master's new image its original mask.
 *
 * fork() holds the lock (state.h) across the real fork; what runs in the
 * child between fork and its return is async-signal-safe, and so is what
 * the wait functions add, which nginx calls from its SIGCHLD handler.
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

/* Reports read at each fork, at most: a burst of forks reads what its
 * children said as they pin, and a flood costs a fork little. */
#define FORK_BUDGET 64

/* What a fork was given, before it happens. */
struct prefork {
    struct ma_place place;
    bool followed; /* the master follows the child: it has a channel and
                      a place in the table */
    bool made;     /* this fork made the process a master */
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

/* The wait functions run in signal handlers (nginx's SIGCHLD handler),
 * where a lookup could wait for a lock the handler interrupted: looked up
 * at load in every program. waitpid, wait and wait3 are wait4 in every
 * libc, and reach it here: one lookup for the four. */
static void resolve_waits(void)
{
    REAL(wait4);
    REAL(waitid);
}

/* A target's children also restore their mask and report their pins
 * between fork and exec, and its master sleeps in sigsuspend. */
static bool resolve_for_target(void)
{
    bool required = REAL(fork) && REAL(sched_setaffinity) &&
                    REAL(sched_getaffinity);
    /* The others answer ENOSYS when they are missing, as libc would. */
    REAL(pthread_setaffinity_np);
    REAL(sigsuspend);
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
    resolve_waits();
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

/* A successful pin is worth a report only in a child with a channel: any
 * other program does not even ask whether it pinned itself. A vfork child
 * of that child is not the one its parent knows. */
static bool may_report(int rc)
{
    return rc == 0 && ma_cfg.active && ma_is_ours(&self.report) &&
           in_own_process();
}

/* A master whose main thread's mask is no longer the library's takes it
 * for its own, unless a change of its cpuset explains it (decide.c).
 * Returns with the lock held (old: the mask to give back) when the
 * process is a master. */
static bool master_mask_checked(sigset_t *old)
{
    int e = errno;
    cpu_set_t cpuset;
    unsigned reads;
    if (!ma_cfg.active || !is_master() || !in_own_process())
        return false;
    ma_lock(old);
    if (is_master()) {
        bool known = ma_cpuset_cpus(&cpuset, &reads) == 0;
        ma_not_the_programs_reads(reads);
        ma_check_own_mask(known ? &cpuset : NULL);
    }
    errno = e;
    return true;
}

static void notice_own_mask(void)
{
    sigset_t old;
    if (master_mask_checked(&old))
        ma_unlock(&old);
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
        ma_channel_report();
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
        ma_channel_report();
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
    sigset_t old;
    ensure_loaded();
    if (!(next = REAL(sched_getaffinity))) {
        errno = ENOSYS;
        return -1;
    }
    rc = next(pid, size, mask);
    if (rc != 0 || !ma_cfg.active || !pins_itself(pid) || !in_own_process())
        return rc;
    locked = master_mask_checked(&old);
    /* The mask the library gave is replaced by the one it started with;
     * one it did not give is the master's own, read as it is. */
    if (moved())
        original_mask_into(size, mask);
    if (locked)
        ma_unlock(&old);
    return rc;
}

/* A channel to a parent that is gone is of no use: nginx's daemon fork
 * leaves the master's parent dead at once. */
static void drop_orphan_channel(void)
{
    if (self.report.fd >= 0 && getppid() != self.parent)
        ma_release(&self.report);
}

/* The first fork makes a master: its original mask and its channel. */
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
    if (ma_channel_open() < 0) {
        ma_give_up("cannot make its channel", errno);
        return false;
    }
    ma_brood_init(&brood);
    /* The nginx family waits in sigsuspend from its first burst on. */
    self.sleeper = ma_config_nginx_family();
    return true;
}

/* Said once per start or reload, at its first child the table has no room
 * for. */
static void warn_table_full(const struct prefork *pf, pid_t pid)
{
    static unsigned warned_gen;
    if (pf->followed || !is_master() || pid <= 0 ||
        warned_gen == pf->place.gen)
        return;
    warned_gen = pf->place.gen;
    ma_log(MA_LOG_WARN, "master %d stops following its children at child %u "
           "of the latest start or reload (pid %d, counting from 0 as nginx "
           "numbers its workers): it has %d children, as many as the library "
           "follows", getpid(), pf->place.rank, pid, MA_MAX_CHILDREN);
}

/* The files the master read matter to telling a new burst (forkmark.h)
 * only where a respawn is open, for a master that sleeps: its counts are
 * taken then only. */
static bool reads_matter(void)
{
    return !self.sleeper || ma_brood_respawn_open(&brood);
}

/* Whether this fork, if it is not a respawn, opens a generation. A master
 * that sleeps: its first fork since it woke, or one after it read files
 * since a reap or a respawn (which settles them). Another: one after its
 * thread read files since its last fork. */
static bool opens_burst(const struct ma_fork_mark *called)
{
    bool first = self.forked_in_wake != self.wakes + 1;
    if (!self.sleeper)
        return ma_reread_since(called);
    self.forked_in_wake = self.wakes + 1;
    if (ma_brood_respawn_open(&brood) && ma_read_since(called)) {
        ma_brood_settle(&brood);
        return true;
    }
    return first;
}

/* Before the real fork, under the lock: what the children said and who
 * died, then the child's place. */
static struct prefork prepare_fork(uint64_t asked_ns,
                                   const struct ma_fork_mark *called)
{
    struct prefork pf = {0};
    cpu_set_t cpuset;
    bool reread;
    drop_orphan_channel();
    pf.made = !is_master();
    if (!become_master() || !ma_still_master())
        return pf;
    /* Its mask, and the cpuset that explains a change of it: at each fork
     * of a master that does not sleep, at the first of each burst of one
     * that does (nginx forks a whole start or reload in one wake-up). */
    if (!self.sleeper || self.forked_in_wake != self.wakes + 1) {
        bool known = ma_cpuset_cpus(&cpuset, NULL) == 0;
        ma_check_own_mask(known ? &cpuset : NULL);
    }
    ma_take_events(FORK_BUDGET);
    ma_memory_prefork();
    reread = opens_burst(called);
    pf.place = ma_brood_place(&brood, reread, asked_ns);
    /* A generation after the first is a reload's, whose configuration
     * nginx read: also one opened by forks first taken for respawns,
     * where the reads could not be counted. */
    if (pf.place.opened)
        ma_auto_open_generation(pf.place.gen > 1);
    pf.followed = brood.n < MA_MAX_CHILDREN;
    return pf;
}

static void after_fork_in_parent(struct prefork *pf, pid_t pid)
{
    /* A first fork that failed leaves the process as it was: no
     * descriptor of the library's, and the next fork tries again. */
    if (pid < 0 && pf->made && is_master()) {
        ma_stop_being_master();
        return;
    }
    warn_table_full(pf, pid);
    if (pid > 0 && pf->followed && is_master() &&
        ma_brood_add(&brood, pid, pf->place))
        ma_plan_pin_check(&pf->place);
    ma_plan_touch_up();
    if (is_master() && reads_matter())
        ma_fork_returned();
}

/* This thread back on the original mask, as a child or an exec'd image
 * would be without the library; since Linux 6.2 also where it is there
 * already, if the library asked for another mask in its parent, which the
 * kernel keeps for the child too. Async-signal-safe. */
static void back_to_original(void)
{
    cpu_set_t request;
    ma_original_request(&request);
    REAL(sched_setaffinity)(0, sizeof request, &request);
}

/* Runs in the child between fork and its return: async-signal-safe only.
 * The child keeps nothing of the master's but the end it reports on, and
 * closes one descriptor of the library's, whatever the number of its
 * siblings: the master's end, which the fork found the library's. */
static void after_fork_in_child(struct prefork *pf, const sigset_t *old)
{
    /* The parent's pid, not getppid(): nginx's daemon parent may have
     * exited already. */
    self.parent = self.pid;
    self.pid = getpid();
    ma_release(&self.report);
    if (is_master()) {
        ma_close_keeping_errno(self.channel.fd);
        self.report = self.children_end;
    }
    self.channel.fd = self.children_end.fd = -1;
    if (moved() || ma_library_asked())
        back_to_original();
    ma_memory_drop_policy();
    ma_auto_forked(&pf->place);
    self.gave_up = false;
    self.sleeper = false;
    self.wakes = self.forked_in_wake = 0;
    self.placed = self.asked = self.original;
    self.start_pending = false;
    self.mask_taken = false;
    ma_decisions_forget();
    ma_lock_after_fork();
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

EXPORT pid_t fork(void)
{
    struct prefork pf;
    int saved_errno = errno;
    uint64_t asked;
    struct ma_fork_mark called = {0};
    sigset_t old;
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
    if (reads_matter())
        called = ma_fork_mark_now();
    ma_lock(&old);
    pf = prepare_fork(asked, &called);
    errno = saved_errno;
    pid = next();
    saved_errno = errno;
    if (pid == 0) {
        after_fork_in_child(&pf, &old);
        errno = saved_errno;
        return 0;
    }
    after_fork_in_parent(&pf, pid);
    ma_unlock(&old);
    errno = saved_errno;
    return pid;
}

/* ---- the master's sleep and its reaps ---- */

EXPORT int sigsuspend(const sigset_t *mask)
{
    sigsuspend_fn *next;
    ensure_loaded();
    if (!(next = REAL(sigsuspend))) {
        errno = ENOSYS;
        return -1;
    }
    if (!ma_cfg.active || !is_master() || !in_own_process())
        return next(mask);
    return ma_sleep(mask);
}

static bool notes_reaps(void)
{
    return ma_cfg.active && is_master() && in_own_process();
}

/* A master that does not sleep in sigsuspend (uWSGI polls waitpid in its
 * loop) is served at its reaps, where they cannot be inside a SIGCHLD
 * handler: the program has none. */
static void serve_at_reap(void)
{
    struct sigaction sa;
    sigset_t old;
    int e = errno;
    if (self.sleeper || sigaction(SIGCHLD, NULL, &sa) < 0 ||
        (sa.sa_flags & SA_SIGINFO) ||
        (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN)) {
        errno = e;
        return;
    }
    ma_lock(&old);
    if (is_master() && ma_still_master()) {
        ma_take_events(FORK_BUDGET);
        ma_run_due_decisions();
    }
    ma_unlock(&old);
    errno = e;
}

/* What a wait function returned: a child's end is noted, its stop or
 * continuation is not. Async-signal-safe. */
static void noted(pid_t pid, int status)
{
    if (pid > 0 && (WIFEXITED(status) || WIFSIGNALED(status)))
        ma_reaps_note(pid);
}

/* waitpid, wait, wait3 and wait4: libc's wait4, the status noted. */
static pid_t reaped_by_wait4(pid_t pid, int *status, int options,
                             struct rusage *usage)
{
    wait4_fn *next = REAL(wait4);
    int st = 0;
    pid_t rc;
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    if (!notes_reaps())
        return next(pid, status, options, usage);
    rc = next(pid, &st, options, usage);
    if (rc > 0 && status)
        *status = st;
    noted(rc, st);
    if (rc >= 0)
        serve_at_reap();
    return rc;
}

EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
    return reaped_by_wait4(pid, status, options, NULL);
}

EXPORT pid_t wait(int *status)
{
    return reaped_by_wait4(-1, status, 0, NULL);
}

EXPORT pid_t wait3(int *status, int options, struct rusage *usage)
{
    return reaped_by_wait4(-1, status, options, usage);
}

EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *usage)
{
    return reaped_by_wait4(pid, status, options, usage);
}

EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
    waitid_fn *next = REAL(waitid);
    int rc;
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    rc = next(idtype, id, info, options);
    if (rc == 0 && notes_reaps() && !(options & WNOWAIT) && info->si_pid > 0 &&
        (info->si_code == CLD_EXITED || info->si_code == CLD_KILLED ||
         info->si_code == CLD_DUMPED))
        ma_reaps_note(info->si_pid);
    return rc;
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
    back_to_original();
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

/* A child that executes a program (nginx's binary upgrade) is no worker
 * of its parent's: it says so, and is followed no more. */
static void say_exec(void)
{
    if (ma_cfg.active && self.report.fd >= 0 && in_own_process())
        ma_channel_farewell();
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
    say_exec();
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
    say_exec();
    if (leave_placement())
        return resume_placement(next(file, argv));
    return next(file, argv);
}

