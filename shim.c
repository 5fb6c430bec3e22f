/* libmasteraff: the interposition.
 *
 * fork() in a target program gives each child a SOCK_SEQPACKET channel to
 * its parent. A child that pins itself (sched_setaffinity or
 * pthread_setaffinity_np on itself) sends its new mask there. The parent,
 * now a master, listens with one helper thread that blocks every signal; on
 * a report it picks the leader (affinity.c) and re-pins all of its own
 * threads, since a worker that dropped its privileges cannot.
 *
 * setsid() drops the channel of a child that detaches from its parent
 * (nginx's daemon fork); the exec functions keep the library across nginx's
 * binary upgrade and give a moved master's new image its original mask.
 *
 * Lock discipline: the helper thread does all its libc work (logging,
 * reading sysfs and /proc, localtime) while holding `lock`, and fork()
 * holds `lock` across the real fork, so a child never inherits a libc lock
 * or a descriptor taken by the helper.
 */
#define _GNU_SOURCE
#include "affinity.h"
#include "internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef pid_t fork_fn(void);
typedef int sched_setaffinity_fn(pid_t, size_t, const cpu_set_t *);
typedef int sched_getaffinity_fn(pid_t, size_t, cpu_set_t *);
typedef int pthread_setaffinity_np_fn(pthread_t, size_t, const cpu_set_t *);
typedef int execve_fn(const char *, char *const[], char *const[]);
typedef pid_t setsid_fn(void);
typedef int execvp_fn(const char *, char *const[]);

/* The definitions the program would call without the library. */
static struct {
    void *fork, *sched_setaffinity, *sched_getaffinity,
        *pthread_setaffinity_np, *execve, *setsid, *execvp;
} real;

/* Marks a slot whose symbol was looked up and not found. */
#define NOT_FOUND ((void *)&real)

/* The next definition of name, looked up once. A program the library
 * leaves alone looks up fork and the affinity functions when it first
 * calls them, so that it pays for no lookup it does not need; if another
 * thread is inside dlopen just then, that first call waits for it. */
static void *next_definition(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f ? f : NOT_FOUND, __ATOMIC_RELEASE);
    }
    return f == NOT_FOUND ? NULL : f;
}

#define REAL(name) ((name##_fn *)next_definition(&real.name, #name))

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

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
static struct {
    pid_t pid;         /* the process it describes */
    struct owned_fd report; /* channel to the parent */
    pid_t parent;      /* who the channel leads to */
    bool listening;    /* its listener thread runs */
    bool gave_up;      /* could not become a master; logged once */
    bool warned_channel;
    struct owned_fd epoll; /* a master's set of channels to its children */
    struct owned_fd wake; /* an eventfd in that set: a fork wakes the listener */
    cpu_set_t original;
    cpu_set_t placed;  /* the mask the master was last given */
    cpu_set_t handled; /* the leader mask last followed or refused */
    bool start_pending; /* placed at start, worker 0 not seen yet */
} self = {.report = NO_FD, .epoll = NO_FD, .wake = NO_FD};

static struct ma_brood brood;

/* The placement made at start, for nginx's daemon child, which carries on
 * as the master, and for the line worker 0's pin confirms it in. */
static struct {
    pid_t pid; /* the process placed, or 0 */
    cpu_set_t worker0, target;
    int node;
    char units[512];
    uint64_t at_ns;
} start;

/* The units of the master's own CPUs, read when it starts listening, so
 * that following a worker reads no file. What could not be read then is
 * read, and its failure said, when a worker needs it. */
static struct ma_topology topology;

static bool is_master(void)
{
    return self.epoll.fd >= 0;
}

/* False in a vfork child, which runs on its parent's memory. */
static bool in_own_process(void)
{
    return getpid() == self.pid;
}

static bool moved(void)
{
    return !CPU_EQUAL(&self.placed, &self.original);
}

/* The channel made for one fork, before it happens. */
struct prefork {
    struct owned_fd master_end, child_end;
    struct ma_place place;
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

static void place_at_start(int argc, char **argv);

/* glibc calls a constructor with main's arguments: the command line that
 * says which configuration nginx will read. */
__attribute__((constructor)) static void masteraff_init(int argc, char **argv,
                                                        char **envp)
{
    (void)envp;
    pthread_once(&load_once, load);
    /* errno only here: binding it would cost every other program. */
    if (ma_cfg.active) {
        int e = errno;
        place_at_start(argc, argv);
        errno = e;
    }
}

/* The first interposed call may come before the constructor (from another
 * library's): loading then must not touch the caller's errno. */
static void ensure_loaded(void)
{
    int e = errno;
    pthread_once(&load_once, load);
    errno = e;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void close_keeping_errno(int fd)
{
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
}

/* ---- descriptors: closed only while their number is still ours ----
 * Async-signal-safe: they run in children between fork and return. */

static struct owned_fd own(int fd)
{
    struct owned_fd o = {.fd = fd};
    struct stat st;
    if (fd >= 0 && ma_fstat(fd, &st) == 0) {
        o.dev = st.st_dev;
        o.ino = st.st_ino;
    }
    return o;
}

static bool same_file(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    int e = errno;
    bool same = fd >= 0 && ma_fstat(fd, &st) == 0 && st.st_dev == dev &&
                st.st_ino == ino;
    errno = e;
    return same;
}

static bool is_ours(const struct owned_fd *o)
{
    return same_file(o->fd, o->dev, o->ino);
}

static void release(struct owned_fd *o)
{
    if (is_ours(o))
        close_keeping_errno(o->fd);
    o->fd = -1;
}

/* Every epoll set shares one inode, and so does every eventfd, so fstat
 * cannot tell them apart: ours are the set that holds our eventfd under
 * its number, which EPOLL_CTL_MOD finds there and nowhere else (a set
 * keys its entries by file and number). One system call, at every fork.
 * MOD rather than ADD: a set of the program's is not touched even for a
 * moment. */
static bool epoll_is_ours(void)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = self.wake.fd};
    int e = errno;
    bool ours = self.epoll.fd >= 0 && self.wake.fd >= 0 &&
                epoll_ctl(self.epoll.fd, EPOLL_CTL_MOD, ev.data.fd, &ev) == 0;
    errno = e;
    return ours;
}

/* ---- the child's side ---- */

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
        release(&self.report);
    }
}

/* A successful pin is worth a report only in a child with a channel: any
 * other program does not even ask whether it pinned itself. A vfork child
 * of that child is not the one its parent knows. */
static bool may_report(int rc)
{
    return rc == 0 && ma_cfg.active && is_ours(&self.report) &&
           in_own_process();
}

static void report_pin_keeping_errno(void)
{
    int e = errno;
    report_pin();
    errno = e;
}

EXPORT int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    sched_setaffinity_fn *next;
    int rc;
    ensure_loaded();
    if (!(next = REAL(sched_setaffinity))) {
        errno = ENOSYS;
        return -1;
    }
    rc = next(pid, size, mask);
    if (may_report(rc) && pins_itself(pid))
        report_pin_keeping_errno();
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
    ensure_loaded();
    if (!(next = REAL(sched_getaffinity))) {
        errno = ENOSYS;
        return -1;
    }
    rc = next(pid, size, mask);
    if (rc == 0 && ma_cfg.active && moved() && pins_itself(pid) &&
        in_own_process())
        original_mask_into(size, mask);
    return rc;
}

/* ---- the master's side: placing itself ---- */

/* Gives mask to the threads listed in one getdents64 buffer. */
static int place_listed_threads(const char *buf, ssize_t len,
                                const cpu_set_t *mask)
{
    int rc = 0;
    for (ssize_t off = 0; off < len;) {
        const struct dirent64 *de = (const struct dirent64 *)(buf + off);
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid > 0 && REAL(sched_setaffinity)(tid, sizeof *mask, mask) < 0 &&
            errno != ESRCH)
            rc = -1;
        off += de->d_reclen;
    }
    return rc;
}

/* sched_setaffinity changes one thread: give the mask to every thread.
 * getdents64 rather than readdir: the listener's first malloc would make
 * it an arena while the master waits to follow. */
static int place_all_threads(const cpu_set_t *mask)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char buf[4096] __attribute__((aligned(8)));
    ssize_t len;
    int rc = 0;

    if (fd < 0)
        return REAL(sched_setaffinity)(getpid(), sizeof *mask, mask) |
               REAL(sched_setaffinity)(0, sizeof *mask, mask);
    while ((len = getdents64(fd, buf, sizeof buf)) > 0)
        rc |= place_listed_threads(buf, len, mask);
    close(fd);
    return rc;
}

static void log_restored(void)
{
    char cpus[4096];
    ma_log(MA_LOG_NOTICE,
           "master %d -> CPUs %s (its original mask), no pinned worker left "
           "to follow",
           getpid(), ma_cpulist_text(&self.original, cpus, sizeof cpus));
}

/* " after 85us": from the leader's pin to the master's, or "" when the
 * leader is a held slot whose process is gone. */
static void time_since_pin(char *buf, size_t len)
{
    const struct ma_child *c = ma_brood_find_pid(&brood, brood.lead_pid);
    uint64_t now = now_ns();
    buf[0] = '\0';
    /* The time is the child's word: one from before its fork is a lie. */
    if (c && c->pinned_ns >= c->forked_ns && now >= c->pinned_ns)
        snprintf(buf, len, " after %lluus",
                 (unsigned long long)((now - c->pinned_ns) / 1000));
}

/* How the line tells the master's move: "->" and "following", "stays
 * on" and "already there for" or "placed there at start for". */
struct move_words {
    const char *verb, *relation;
};

static void log_followed(const cpu_set_t *target, const char *units,
                         struct move_words w, const char *after,
                         const char *memory)
{
    char cpus[4096], lead[4096];
    ma_log(MA_LOG_NOTICE, "%smaster %d %s CPUs %s (%s), %s worker %d on CPU%s "
           "%s%s; %s",
           ma_cfg.dry_run ? "dry run: " : "", getpid(), w.verb,
           ma_cpulist_text(target, cpus, sizeof cpus), units, w.relation,
           brood.lead_pid, CPU_COUNT(&brood.lead_mask) > 1 ? "s" : "",
           ma_cpulist_text(&brood.lead_mask, lead, sizeof lead), after, memory);
}

/* Moves the master to target, or says why not. Returns 0 when placed. */
static int place_master(const cpu_set_t *target)
{
    char cpus[4096];
    if (!ma_cfg.dry_run && place_all_threads(target) < 0) {
        ma_log(MA_LOG_WARN, "could not move master %d to CPUs %s: %s; "
               "skipped", getpid(), ma_cpulist_text(target, cpus, sizeof cpus),
               strerror(errno));
        return -1;
    }
    self.placed = *target;
    return 0;
}

/* The leader's scope, clamped to the original mask. Returns 0, or -1 after
 * saying why the master stays. */
static int follow_target(cpu_set_t *target, char *units, size_t len)
{
    cpu_set_t lead;
    char cpus[4096], orig[4096];

    /* A worker's word is clamped to the master's CPUs before anything is
     * read about them. */
    CPU_AND(&lead, &brood.lead_mask, &self.original);
    if (CPU_COUNT(&lead) == 0) {
        ma_log(MA_LOG_WARN, "worker %d is on CPUs %s, outside master %d's "
               "CPUs %s; master not moved", brood.lead_pid,
               ma_cpulist_text(&brood.lead_mask, cpus, sizeof cpus), getpid(),
               ma_cpulist_text(&self.original, orig, sizeof orig));
        return -1;
    }
    if (ma_place_for(ma_cfg.sysfs, ma_cfg.scope, &topology, &lead,
                     &self.original, target, units, len) < 0) {
        ma_log(MA_LOG_WARN, "cannot read the %s of CPUs %s under %s: %s; "
               "master %d not moved", ma_scope_name(ma_cfg.scope),
               ma_cpulist_text(&lead, cpus, sizeof cpus), ma_cfg.sysfs,
               strerror(errno), getpid());
        return -1;
    }
    return 0;
}

/* Each fork of a moved master gives it fresh copies of the pages it
 * writes next (copy-on-write), allocated where its memory policy says, not
 * where its memory was moved: once a burst of forks is over, the pages are
 * moved again. */
#define TOUCH_UP_NS (200 * 1000 * 1000ULL)
static uint64_t touch_up_at;

/* The listener may be asleep with no timeout: a newly planned touch-up
 * wakes it. */
static void wake_listener(void)
{
    uint64_t one = 1;
    if (write(self.wake.fd, &one, sizeof one) < 0)
        return;
}

static void plan_touch_up(void)
{
    bool planned = touch_up_at != 0;
    if (!(ma_cfg.migrate && !ma_cfg.dry_run && brood.following))
        return;
    touch_up_at = now_ns() + TOUCH_UP_NS;
    if (!planned)
        wake_listener();
}

static void touch_up_if_due(void)
{
    if (!touch_up_at || now_ns() < touch_up_at)
        return;
    touch_up_at = 0;
    if (brood.following)
        ma_log(MA_LOG_INFO, "master %d after its later forks: %s", getpid(),
               ma_memory_follow(&brood.lead_mask));
}

static void restore(void)
{
    CPU_ZERO(&self.handled);
    if (moved() && place_master(&self.original) < 0)
        return;
    ma_memory_restore();
    log_restored();
}

/* " after 85us", or for the placement at start, since when it waited. */
static void confirmation_time(char *buf, size_t len)
{
    snprintf(buf, len, ", confirmed %llums after the start",
             (unsigned long long)((now_ns() - start.at_ns) / 1000000));
}

/* Worker 0 pinned elsewhere than the configuration said: say where the
 * master had been placed, so that the surprise can be explained. */
static void note_missed_start(char *buf, size_t len)
{
    char cpus[4096], lead[4096];
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, ", not where it was placed at start "
             "(CPUs %s, %s, for worker 0 on CPUs %s)",
             ma_cpulist_text(&start.target, cpus, sizeof cpus), start.units,
             ma_cpulist_text(&start.worker0, lead, sizeof lead));
}

static struct move_words words_for(bool stays)
{
    if (!stays)
        return (struct move_words){"->", "following"};
    if (self.start_pending && moved())
        return (struct move_words){"stays on", "placed there at start for"};
    return (struct move_words){"stays on", "already there for"};
}

/* A leader on new CPUs is said even when the master is already on its
 * unit (placed there at start, a cpuset, or worker 0 moved to the other
 * node of the package): its memory may have to move all the same. */
static void follow(const cpu_set_t *target, const char *units)
{
    char after[9000];
    bool stays = CPU_EQUAL(target, &self.placed);
    if (!stays && place_master(target) < 0)
        return;
    if (stays && self.start_pending && moved())
        confirmation_time(after, sizeof after);
    else
        time_since_pin(after, sizeof after);
    if (!stays && self.start_pending)
        note_missed_start(after, sizeof after);
    log_followed(target, units, words_for(stays), after,
                 ma_memory_follow(&brood.lead_mask));
    self.start_pending = false;
    plan_touch_up();
}

static void log_start_decision(const struct ma_early *e)
{
    char cpus[4096];
    if (e->n_files)
        ma_log(MA_LOG_DEBUG, "read %u configuration file%s: %s", e->n_files,
               e->n_files > 1 ? "s" : "", e->files);
    if (!e->place)
        ma_log(MA_LOG_DEBUG, "no placement at start: %s", e->why);
    else
        ma_log(MA_LOG_DEBUG, "worker 0 will pin to CPUs %s (%s)",
               ma_cpulist_text(&e->worker0, cpus, sizeof cpus), e->why);
}

/* The pages the decision dirtied before the master was placed, on the node
 * it started on: the heap it freed, which nginx's mallocs would reuse, and
 * the stack below the frames in use, which nginx's calls would. Given back, they
 * are touched anew where the master now runs. Below the main thread's
 * stack lies the kernel's guard gap (1 MiB): the range holds nothing but
 * stack no frame uses. */
#define SCRATCH_STACK (256 * 1024)

/* Not inlined: its callers' frames, locals included, all lie above its
 * own, and nothing below it but what madvise's call itself uses. */
__attribute__((noinline)) static void give_back_scratch(void)
{
    char here;
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t top = ((uintptr_t)&here - 4096) & ~(uintptr_t)(page - 1);
    malloc_trim(0);
    /* Only the main thread's stack has the guard gap below it. */
    if (gettid() == getpid())
        madvise((void *)(top - SCRATCH_STACK), SCRATCH_STACK, MADV_DONTNEED);
}

/* Before main(): the master goes where worker 0 will be, so that nginx's
 * first touch of its zones and sockets is there. Other targets (uWSGI)
 * have no configuration the library reads: they only follow. The line that says so in
 * error.log comes when worker 0 confirms it (stderr is still the terminal
 * here). */
static void place_at_start(int argc, char **argv)
{
    struct ma_early e;
    cpu_set_t original;
    char cpus[4096];

    if (is_master() || !ma_config_nginx_family() ||
        REAL(sched_getaffinity)(0, sizeof original, &original) < 0)
        return;
    ma_early_decide(argc, argv, &original, &e);
    log_start_decision(&e);
    if (!e.place)
        return;
    if (!ma_cfg.dry_run && place_all_threads(&e.target) < 0) {
        ma_log(MA_LOG_DEBUG, "no placement at start: CPUs %s refused (%s)",
               ma_cpulist_text(&e.target, cpus, sizeof cpus), strerror(errno));
        place_all_threads(&original);
        return;
    }
    self.original = original;
    self.placed = e.target;
    self.start_pending = true;
    start.pid = getpid();
    start.worker0 = e.worker0;
    start.target = e.target;
    start.node = e.node;
    start.at_ns = now_ns();
    snprintf(start.units, sizeof start.units, "%s", e.units);
    give_back_scratch();
    ma_log(MA_LOG_DEBUG, "%smaster %d placed at start on CPUs %s (%s); %s",
           ma_cfg.dry_run ? "dry run: " : "", getpid(),
           ma_cpulist_text(&e.target, cpus, sizeof cpus), e.units,
           ma_memory_prefer_at_start(e.node));
}

/* The leader's process as the log last named it: a death of worker 0, or
 * a new leader on the same CPUs (a respawn), changes nothing but is said. */
static pid_t said_pid;

static void say_same_place(void)
{
    char cpus[4096], lead[4096];
    if (brood.lead_pid == said_pid)
        return;
    ma_cpulist_text(&self.placed, cpus, sizeof cpus);
    if (brood.lead_pid == 0)
        ma_log(MA_LOG_INFO, "master %d stays on CPUs %s: worker %d, which it "
               "follows, is gone; its place is held for a respawn",
               getpid(), cpus, said_pid);
    else
        ma_log(MA_LOG_NOTICE, "master %d stays on CPUs %s: worker %d now "
               "leads, on CPU%s %s as the worker before it", getpid(), cpus,
               brood.lead_pid, CPU_COUNT(&brood.lead_mask) > 1 ? "s" : "",
               ma_cpulist_text(&brood.lead_mask, lead, sizeof lead));
    said_pid = brood.lead_pid;
}

/* Children that never pin (nginx without worker_cpu_affinity) leave the
 * master nothing to follow: said once for each start or reload, a while
 * after the fork that opened its generation. */
#define PIN_WAIT_NS (3000 * 1000 * 1000ULL)
static uint64_t pin_check_at;
static unsigned pin_check_gen;

static void plan_pin_check(const struct ma_place *place)
{
    if (!place->opened)
        return;
    pin_check_at = now_ns() + PIN_WAIT_NS;
    pin_check_gen = place->gen;
    wake_listener();
}

/* Placed at start for a worker 0 that does not pin: back where the
 * master started. */
static void leave_start_placement(void)
{
    char cpus[4096], lead[4096];
    self.start_pending = false;
    if (place_master(&self.original) < 0)
        return;
    ma_memory_restore();
    ma_log(MA_LOG_NOTICE, "master %d -> CPUs %s (its original mask): none of "
           "its children pinned itself within %llu s, though the "
           "configuration said worker 0 would, on CPUs %s",
           getpid(), ma_cpulist_text(&self.original, cpus, sizeof cpus),
           PIN_WAIT_NS / 1000000000ULL,
           ma_cpulist_text(&start.worker0, lead, sizeof lead));
}

static void check_pins_if_due(void)
{
    if (!pin_check_at || now_ns() < pin_check_at)
        return;
    pin_check_at = 0;
    if (ma_brood_gen_pinned(&brood, pin_check_gen))
        return;
    if (self.start_pending)
        return leave_start_placement();
    ma_log(MA_LOG_NOTICE, "master %d: none of its children pinned itself "
           "within %llu s of their fork; nothing to follow (worker 0 pins "
           "itself only with worker_cpu_affinity)", getpid(),
           PIN_WAIT_NS / 1000000000ULL);
}

/* Acts on the leader choice after any event. */
static void apply_decision(void)
{
    cpu_set_t target;
    char units[512];

    switch (ma_brood_decide(&brood, now_ns())) {
    case MA_HOLD:
    case MA_WAIT:
        return;
    case MA_RESTORE:
        return restore();
    case MA_FOLLOW:
        /* Most events (a death, a sibling's pin, a fork) leave the leader's
         * mask as it was: it was followed, or refused and said, already. */
        if (CPU_EQUAL(&brood.lead_mask, &self.handled))
            return say_same_place();
        self.handled = brood.lead_mask;
        said_pid = brood.lead_pid;
        if (follow_target(&target, units, sizeof units) == 0)
            follow(&target, units);
        return;
    }
}

/* ---- the master's side: its children's channels ---- */

static bool channel_is_ours(const struct ma_child *c)
{
    return same_file(c->fd, c->fd_dev, c->fd_ino);
}

static void stop_listening(struct ma_child *c)
{
    if (!channel_is_ours(c))
        return;
    epoll_ctl(self.epoll.fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
}

static void child_gone(struct ma_child *c)
{
    stop_listening(c);
    ma_brood_died(&brood, c);
    apply_decision();
}

static void child_misbehaved(struct ma_child *c, const char *what)
{
    ma_log(MA_LOG_WARN, "child %d %s; no longer listening to it", c->pid,
           what);
    stop_listening(c);
    ma_brood_forget(&brood, c);
    apply_decision();
}

/* recv() reads 0 bytes both at the end of the channel and for an empty
 * message; only the end says the child is gone. */
static bool channel_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
}

/* Reads what one child sent. Each read costs a syscall, so a child gets a
 * bounded number of them before it is dropped (MA_MAX_REPORTS). */
static void read_channel(int fd)
{
    struct ma_child *c = ma_brood_find_fd(&brood, fd);
    unsigned char buf[MA_REPORT_SIZE + 1];
    struct ma_report r;
    ssize_t n;

    while (c) {
        n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n == 0 && !channel_closed(fd))
            return child_misbehaved(c, "sent an empty message");
        if (n <= 0)
            return child_gone(c);
        if (ma_report_decode(buf, (size_t)n, &r) < 0)
            return child_misbehaved(c, "sent a malformed report");
        if (c->reports >= MA_MAX_REPORTS)
            return child_misbehaved(c, "keeps reporting");
        ma_brood_pinned(&brood, c, &r);
        apply_decision();
        c = ma_brood_find_fd(&brood, fd);
    }
}

static void read_ready(const struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++)
        read_channel(ev[i].data.fd);
}

/* Before a fork: what children said (or their deaths) up to now, all of
 * it: a death the program has reaped is known before the fork that may
 * replace it. */
static void drain_channels(void)
{
    struct epoll_event ev[32];
    int n, rounds = MA_MAX_CHILDREN / 32 + 2;
    do {
        n = epoll_wait(self.epoll.fd, ev, 32, 0);
        read_ready(ev, n);
    } while (n == 32 && --rounds > 0);
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

/* The earlier of two times, 0 standing for none. */
static uint64_t earlier(uint64_t a, uint64_t b)
{
    if (!a || !b)
        return a ? a : b;
    return a < b ? a : b;
}

/* Milliseconds until the earliest of a deferred decision, a touch-up and a
 * check for pins, or -1 for none. */
static int listener_timeout(void)
{
    uint64_t now = now_ns(),
             due = earlier(earlier(brood.wait_until, touch_up_at), pin_check_at);
    if (!due)
        return -1;
    if (due <= now)
        return 0;
    return (int)((due - now + 999999) / 1000000);
}

/* Forks waiting for the lock, which the listener's read-ahead lets pass:
 * a mutex just unlocked goes to whoever asks first, often its unlocker. */
static int forks_waiting;

static void lock_for_fork(void)
{
    __atomic_add_fetch(&forks_waiting, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    __atomic_sub_fetch(&forks_waiting, 1, __ATOMIC_RELAXED);
}

/* One CPU at a time (a large machine takes a while), letting the master's
 * forks go first; a worker that pins meanwhile has its unit read then. */
static void read_topology(void)
{
    cpu_set_t one;
    if (ma_cfg.scope == MA_SCOPE_WORKER)
        return;
    pthread_mutex_lock(&lock);
    ma_topology_init(&topology, ma_cfg.scope);
    pthread_mutex_unlock(&lock);
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        if (!CPU_ISSET(c, &self.original))
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        while (__atomic_load_n(&forks_waiting, __ATOMIC_RELAXED))
            sched_yield();
        pthread_mutex_lock(&lock);
        ma_topology_read(ma_cfg.sysfs, &one, &topology);
        pthread_mutex_unlock(&lock);
    }
}

static void give_up(const char *what, int err)
{
    self.gave_up = true;
    ma_log(MA_LOG_WARN, "%s: %s; process %d will not follow its children",
           what, strerror(err), getpid());
}

/* A channel to a parent that is gone is of no use: nginx's daemon fork
 * leaves the master's parent dead at once. */
static void drop_orphan_channel(void)
{
    if (self.report.fd >= 0 && getppid() != self.parent)
        release(&self.report);
}

static bool make_wake_fd(void)
{
    struct epoll_event ev = {.events = EPOLLIN};
    self.wake = own(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    ev.data.fd = self.wake.fd;
    return self.wake.fd >= 0 &&
           epoll_ctl(self.epoll.fd, EPOLL_CTL_ADD, self.wake.fd, &ev) == 0;
}

/* Closes what is still ours of the master's descriptors: the program may
 * have closed them (all descriptors above 2, say) and reused the numbers. */
static void stop_being_master(void)
{
    for (size_t i = 0; i < brood.n; i++)
        if (channel_is_ours(&brood.kids[i]))
            close_keeping_errno(brood.kids[i].fd);
    brood.n = 0;
    if (epoll_is_ours())
        close_keeping_errno(self.epoll.fd);
    self.epoll.fd = -1;
    release(&self.wake);
}

/* What wakes the listener's epoll_wait is read by it alone: a fork's own
 * look at the channels leaves it, so the wake-up is not lost. */
static void drain_wake(void)
{
    uint64_t n;
    if (read(self.wake.fd, &n, sizeof n) < 0)
        return;
}

/* Under the lock: a log line could take a libc lock a fork would copy. */
static void stop_listener(int err)
{
    bool closed = !epoll_is_ours();
    self.listening = false;
    stop_being_master();
    if (closed)
        give_up("the program closed the library's descriptors", EBADF);
    else
        give_up("stopped listening to children", err);
}

static void *listener(void *arg)
{
    struct epoll_event ev[32];
    int timeout = -1;
    (void)arg;
    read_topology();
    for (;;) {
        int n = epoll_wait(self.epoll.fd, ev, 32, timeout);
        int err = n < 0 && errno != EINTR ? errno : 0;
        pthread_mutex_lock(&lock);
        if (!is_master()) { /* a fork found the descriptors gone */
            self.listening = false;
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        if (err || !epoll_is_ours()) {
            stop_listener(err ? err : EBADF);
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        drain_wake();
        read_ready(ev, n);
        if (n == 0)
            apply_decision();
        touch_up_if_due();
        check_pins_if_due();
        timeout = listener_timeout();
        pthread_mutex_unlock(&lock);
    }
}

/* A thread that must never take a signal meant for the program. Its
 * stack also holds the program's static TLS, which glibc puts there. */
#define LISTENER_STACK (256 * 1024)

static int start_listener(void)
{
    pthread_t t;
    pthread_attr_t attr;
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, LISTENER_STACK);
    rc = pthread_create(&t, &attr, listener, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_setname_np(t, "masteraff");
    return rc;
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
            give_up("cannot read its own affinity", errno);
            return false;
        }
        self.placed = self.original;
    }
    CPU_ZERO(&self.handled);
    self.epoll = own(epoll_create1(EPOLL_CLOEXEC));
    if (self.epoll.fd < 0) {
        give_up("cannot create its epoll set", errno);
        return false;
    }
    if (!make_wake_fd()) {
        int e = errno;
        stop_being_master();
        give_up("cannot create its eventfd", e);
        return false;
    }
    ma_brood_init(&brood);
    return true;
}

/* Whether the master's descriptors are still the library's. */
static bool still_master(void)
{
    if (epoll_is_ours())
        return true;
    stop_being_master();
    give_up("the program closed the library's descriptors", EBADF);
    return false;
}

static void warn_no_channel(const char *why)
{
    if (self.warned_channel)
        return;
    self.warned_channel = true;
    ma_log(MA_LOG_WARN, "a child of %d gets no channel (%s); it cannot be "
           "followed", getpid(), why);
}

/* The program needs descriptors for each child too (nginx: a socketpair
 * per worker, twice as many during a reload), and must never run out
 * because of the library: after each fork's channel, a few descriptors
 * (1/32 of the soft limit, at least 8: the listener opens up to three
 * files for a moment) must stay free below the limit, or the library
 * gives up this channel and then closes others. Numbers
 * are given lowest first, so every number below the channel's is taken. */
static long descriptors_missing(const int sv[2])
{
    struct rlimit lim;
    long top = sv[0] > sv[1] ? sv[0] : sv[1], reserve;
    if (getrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_cur == RLIM_INFINITY ||
        lim.rlim_cur > (rlim_t)INT_MAX)
        return 0;
    reserve = (long)lim.rlim_cur / 32 > 8 ? (long)lim.rlim_cur / 32 : 8;
    return reserve - ((long)lim.rlim_cur - 1 - top);
}

/* Closes the channels the leader choice can best do without, until
 * `missing` descriptors are free again. */
static void yield_descriptors(long missing)
{
    struct ma_child *c;
    while (missing-- > 0 && (c = ma_brood_least_needed(&brood))) {
        stop_listening(c);
        ma_brood_forget(&brood, c);
    }
    apply_decision();
}

static struct prefork prepare_fork(uint64_t asked_ns, bool reread)
{
    struct prefork pf = {.master_end = NO_FD, .child_end = NO_FD};
    long missing;
    int sv[2];
    drop_orphan_channel();
    if (!become_master() || !still_master())
        return pf;
    drain_channels();
    ma_memory_prefork();
    ma_brood_check_reaped(&brood, reaped);
    pf.place = ma_brood_place(&brood, reread, asked_ns);
    if (brood.n >= MA_MAX_CHILDREN) {
        warn_no_channel("too many children");
        return pf;
    }
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        warn_no_channel(strerror(errno));
        return pf;
    }
    missing = descriptors_missing(sv);
    if (missing > 0) {
        close(sv[0]);
        close(sv[1]);
        yield_descriptors(missing - 2);
        warn_no_channel("too few descriptors left for the program");
        return pf;
    }
    pf.master_end = own(sv[0]);
    pf.child_end = own(sv[1]);
    return pf;
}

static void start_listening(void)
{
    int rc;
    if (self.listening || !is_master())
        return;
    rc = start_listener();
    if (rc == 0) {
        self.listening = true;
        return;
    }
    stop_being_master();
    give_up("cannot start its listener thread", rc);
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
    release(&pf->child_end);
    start_listening();
    if (pid < 0 || pf->master_end.fd < 0 || !is_master() ||
        !listen_to(&pf->master_end, pid, pf->place))
        release(&pf->master_end);
    else
        plan_pin_check(&pf->place);
    plan_touch_up();
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
    if (is_master())
        stop_being_master();
    release(&self.report);
    release(&pf->master_end);
    if (moved())
        REAL(sched_setaffinity)(0, sizeof self.original, &self.original);
    ma_memory_drop_policy();
    self.report = pf->child_end;
    self.listening = false;
    self.gave_up = false;
    self.warned_channel = false;
    self.placed = self.original;
    self.start_pending = false;
    said_pid = 0;
    pin_check_at = 0;
    touch_up_at = 0;
    /* Another thread of the parent may have been waiting for the lock:
     * nobody waits for it in this child. */
    forks_waiting = 0;
    memcpy(&lock, &unlocked, sizeof lock);
}

/* What tells a new burst of forks from the next fork of the same burst:
 * the read system calls the forking thread made in between (the kernel's
 * syscr). nginx re-reads its configuration before it forks a reload's
 * workers, and reads nothing between two forks of a burst, however long
 * it waits for a CPU. Where the kernel does not say, the times the thread
 * waited (voluntary context switches: nginx sleeps in sigsuspend between
 * bursts) stand in. */
struct fork_mark {
    pid_t tid;
    long long reads, waits; /* so far, or -1 */
};

static struct fork_mark last_fork; /* when the last fork returned */

/* This thread's read system calls so far, or -1. The one read() here
 * counts too, after the figure it returns. */
static long long reads_so_far(void)
{
    char buf[512], *at;
    ssize_t n;
    int fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    at = strstr(buf, "syscr: ");
    return at ? strtoll(at + 7, NULL, 10) : -1;
}

static long long waits_so_far(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : -1;
}

static struct fork_mark fork_mark_now(void)
{
    struct fork_mark m = {gettid(), -1, waits_so_far()};
    m.reads = reads_so_far();
    return m;
}

/* Whether the thread read a file (or, not knowing, waited) between the
 * last fork's return and `now`, when this one was called. The read that
 * took the last figure is not the program's. A fork from another thread
 * than the last one is counted in the same burst, as forks of threads
 * that run at once. */
static bool reread_since(const struct fork_mark *now)
{
    if (last_fork.tid != now->tid)
        return false;
    if (now->reads >= 0 && last_fork.reads >= 0)
        return now->reads > last_fork.reads + 1;
    return now->waits > last_fork.waits;
}

EXPORT pid_t fork(void)
{
    struct prefork pf;
    int saved_errno = errno;
    uint64_t asked;
    struct fork_mark called;
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
    called = fork_mark_now();
    lock_for_fork();
    pf = prepare_fork(asked, reread_since(&called));
    errno = saved_errno;
    pid = next();
    saved_errno = errno;
    if (pid == 0) {
        after_fork_in_child(&pf);
        errno = saved_errno;
        return 0;
    }
    after_fork_in_parent(&pf, pid);
    last_fork = fork_mark_now();
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
        release(&self.report);
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
