/* libmasteraff: the master's decisions. Placing the master at start from
 * nginx's configuration; following the leader the brood chooses (brood.c),
 * holding its place or going back to the original mask; the touch-up of
 * the pages later forks dirtied and the check that a start or reload
 * pinned anything; and the one log line each of them says.
 *
 * Called with the lock held, on the program's own thread: at its forks,
 * in its sleep (sleep.c) with each event read, and at its affinity calls.
 * It calls neither the interposers nor the channel; a newly planned time
 * is the sleep's next timeout.
 *
 * The texts of the lines are built in static buffers, which the lock
 * keeps to one decision at a time: the program's main thread may have a
 * stack of only a few pages (ulimit -s). */
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Gives mask to the threads listed in one ma_getdents buffer. */
static int place_listed_threads(const char *buf, ssize_t len,
                                const cpu_set_t *mask)
{
    int rc = 0;
    for (ssize_t off = 0; off < len;) {
        const struct ma_dirent *de = (const struct ma_dirent *)(buf + off);
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid > 0 && REAL(sched_setaffinity)(tid, sizeof *mask, mask) < 0 &&
            errno != ESRCH)
            rc = -1;
        off += de->d_reclen;
    }
    return rc;
}

/* sched_setaffinity changes one thread: give the mask to every thread.
 * getdents64 rather than readdir: no allocation in a process that is
 * about to fork. */
static int place_all_threads(const cpu_set_t *mask)
{
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    static char buf[4096] __attribute__((aligned(8)));
    ssize_t len;
    int rc = 0;

    if (fd < 0)
        return REAL(sched_setaffinity)(getpid(), sizeof *mask, mask) |
               REAL(sched_setaffinity)(0, sizeof *mask, mask);
    while ((len = ma_getdents(fd, buf, sizeof buf)) > 0)
        rc |= place_listed_threads(buf, len, mask);
    close(fd);
    return rc;
}

static void log_restored(bool was_there)
{
    static char cpus[4096];
    ma_log(MA_LOG_NOTICE,
           "master %d %s CPUs %s (its original mask), no pinned worker left "
           "to follow", getpid(), was_there ? "stays on" : "->",
           ma_cpulist_text(&self.original, cpus, sizeof cpus));
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
    static char cpus[4096], lead[4096];
    ma_log(MA_LOG_NOTICE, "%smaster %d %s CPUs %s (%s), %s worker %d on CPU%s "
           "%s%s; %s",
           ma_cfg.dry_run ? "dry run: " : "", getpid(), w.verb,
           ma_cpulist_text(target, cpus, sizeof cpus), units, w.relation,
           brood.lead_pid, CPU_COUNT(&brood.lead_mask) > 1 ? "s" : "",
           ma_cpulist_text(&brood.lead_mask, lead, sizeof lead), after, memory);
}

/* Whether the library asked the kernel for the master's mask (in this
 * process, or in the parent it was forked from): since Linux 6.2 the
 * kernel remembers that request, self.asked, as the master's own and
 * keeps it within a changed cpuset. Until then the mask it remembers, if
 * any, is the program's, of which the library knows the original mask. */
static bool asked_kernel;

static void record_request(const cpu_set_t *mask)
{
    self.asked = *mask;
    asked_kernel = true;
}

bool ma_library_asked(void)
{
    return asked_kernel;
}

/* Moves the master to target, or says why not. Returns 0 when placed. */
static int place_master(const cpu_set_t *target)
{
    static char cpus[4096];
    cpu_set_t request = *target;
    if (CPU_EQUAL(target, &self.original))
        ma_original_request(&request);
    if (!ma_cfg.dry_run && place_all_threads(&request) < 0) {
        ma_log(MA_LOG_WARN, "could not move master %d to CPUs %s: %s; "
               "skipped", getpid(), ma_cpulist_text(target, cpus, sizeof cpus),
               strerror(errno));
        return -1;
    }
    self.placed = *target;
    if (!ma_cfg.dry_run)
        record_request(&request);
    return 0;
}

/* The leader's scope, clamped to the original mask. Returns 0, or -1 after
 * saying why the master stays. */
static int follow_target(cpu_set_t *target, char *units, size_t len)
{
    cpu_set_t lead;
    static char cpus[4096], orig[4096];

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

void ma_plan_touch_up(void)
{
    if (!(ma_cfg.migrate && !ma_cfg.dry_run && brood.following))
        return;
    touch_up_at = now_ns() + TOUCH_UP_NS;
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

/* Back to the original mask: asked of the kernel also where the master
 * is there already, if the library ever asked for another (a placement at
 * start on the whole start mask): the kernel would keep that request. */
static void restore(void)
{
    bool was_there = !moved();
    CPU_ZERO(&self.handled);
    if ((!was_there || asked_kernel) && place_master(&self.original) < 0)
        return;
    ma_memory_restore();
    log_restored(was_there);
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
    static char cpus[4096], lead[4096];
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
    if (self.start_pending)
        return (struct move_words){"stays on", "placed there at start for"};
    return (struct move_words){"stays on", "already there for"};
}

/* A leader on new CPUs is said even when the master is already on its
 * unit (placed there at start, a cpuset, or worker 0 moved to the other
 * node of the package): its memory may have to move all the same. */
static void follow(const cpu_set_t *target, const char *units)
{
    static char after[9000];
    bool stays = CPU_EQUAL(target, &self.placed);
    if (!stays && place_master(target) < 0)
        return;
    if (stays && self.start_pending)
        confirmation_time(after, sizeof after);
    else
        time_since_pin(after, sizeof after);
    if (!stays && self.start_pending)
        note_missed_start(after, sizeof after);
    log_followed(target, units, words_for(stays), after,
                 ma_memory_follow(&brood.lead_mask));
    self.start_pending = false;
    ma_plan_touch_up();
}

/* What the placement at start names: static, as it runs once, in the
 * constructor, before the program, under whatever stack limit it has. */
static char start_cpus[4096];
static struct ma_early start_decision;

static void log_start_decision(const struct ma_early *e)
{
    if (e->n_files)
        ma_log(MA_LOG_DEBUG, "read %u configuration file%s: %s", e->n_files,
               e->n_files > 1 ? "s" : "", e->files);
    if (!e->place)
        ma_log(MA_LOG_DEBUG, "no placement at start: %s", e->why);
    else
        ma_log(MA_LOG_DEBUG, "worker 0 will pin to CPUs %s (%s)",
               ma_cpulist_text(&e->worker0, start_cpus, sizeof start_cpus),
               e->why);
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
    ma_trim_heap();
    /* Only the main thread's stack has the guard gap below it. */
    if (gettid() == getpid())
        madvise((void *)(top - SCRATCH_STACK), SCRATCH_STACK, MADV_DONTNEED);
}

/* Before main(): the master goes where worker 0 will be, so that nginx's
 * first touch of its zones and sockets is there. Other targets (uWSGI)
 * have no configuration the library reads: they only follow. The line that says so in
 * error.log comes when worker 0 confirms it (stderr is still the terminal
 * here). */
void ma_place_at_start(int argc, char **argv)
{
    struct ma_early *e = &start_decision;
    cpu_set_t original;

    if (is_master() || !ma_config_nginx_family() ||
        REAL(sched_getaffinity)(0, sizeof original, &original) < 0)
        return;
    ma_early_decide(argc, argv, &original, e);
    log_start_decision(e);
    if (!e->place)
        return;
    if (!ma_cfg.dry_run && place_all_threads(&e->target) < 0) {
        ma_log(MA_LOG_DEBUG, "no placement at start: CPUs %s refused (%s)",
               ma_cpulist_text(&e->target, start_cpus, sizeof start_cpus),
               strerror(errno));
        place_all_threads(&original);
        return;
    }
    self.original = original;
    self.placed = e->target;
    self.asked = original;
    if (!ma_cfg.dry_run)
        record_request(&e->target);
    self.start_pending = true;
    start.pid = getpid();
    start.worker0 = e->worker0;
    start.target = e->target;
    start.node = e->node;
    start.at_ns = now_ns();
    snprintf(start.units, sizeof start.units, "%.*s",
             (int)sizeof start.units - 1, e->units);
    give_back_scratch();
    ma_log(MA_LOG_DEBUG, "%smaster %d placed at start on CPUs %s (%s); %s",
           ma_cfg.dry_run ? "dry run: " : "", getpid(),
           ma_cpulist_text(&e->target, start_cpus, sizeof start_cpus),
           e->units,
           ma_memory_prefer_at_start(e->node));
}

/* The leader's process as the log last named it: a death of worker 0, or
 * a new leader on the same CPUs (a respawn), changes nothing but is said. */
static pid_t said_pid;

static void say_same_place(void)
{
    static char cpus[4096], lead[4096];
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

void ma_plan_pin_check(const struct ma_place *place)
{
    if (!place->opened)
        return;
    pin_check_at = now_ns() + PIN_WAIT_NS;
    pin_check_gen = place->gen;
}

/* Placed at start for a worker 0 that does not pin: back where the
 * master started. */
static void leave_start_placement(void)
{
    static char cpus[4096], lead[4096];
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
    /* Children that all executed other programs (nginx's binary upgrade)
     * were never workers. */
    if (ma_brood_gen_pinned(&brood, pin_check_gen) ||
        !ma_brood_gen_lives(&brood, pin_check_gen))
        return;
    if (self.start_pending)
        return leave_start_placement();
    ma_log(MA_LOG_NOTICE, "master %d: none of its children pinned itself "
           "within %llu s of their fork; nothing to follow (worker 0 pins "
           "itself only with worker_cpu_affinity)", getpid(),
           PIN_WAIT_NS / 1000000000ULL);
}

/* The master's main thread is not on the mask the library gave it: the
 * program set its own, or an administrator did (taskset -p). That mask is
 * the master's from now on: sched_getaffinity reads it, its children
 * inherit it, and the library moves the master, and its memory, no more:
 * an explicit mask wins over following worker 0. */
static void take_own_mask(const cpu_set_t *now, const char *why)
{
    static char cpus[4096], given[4096];
    ma_log(MA_LOG_NOTICE, "master %d is on CPUs %s, not the CPUs %s it was "
           "given: its mask was set by the program or an administrator%s, "
           "and the library no longer moves it or its memory", getpid(),
           ma_cpulist_text(now, cpus, sizeof cpus),
           ma_cpulist_text(&self.placed, given, sizeof given), why);
    self.original = self.placed = self.asked = *now;
    /* The kernel keeps that request, someone else's, for the master and
     * the children it forks: nothing of the library's is left to undo. */
    asked_kernel = false;
    self.mask_taken = true;
    self.start_pending = false;
    touch_up_at = 0;
    ma_memory_restore();
}

static bool within(const cpu_set_t *a, const cpu_set_t *b)
{
    cpu_set_t both;
    CPU_AND(&both, a, b);
    return CPU_EQUAL(&both, a);
}

/* Whether mask is what the kernel makes of the master's when its cpuset's
 * CPUs become cpus: the mask last asked for, within them, or all of them
 * when none of it is left; kernels before 6.2 give all of them always.
 * The mask last asked for is the library's, or else the program's, which
 * the library knows only through its original mask: then either may be
 * the kernel's. All of the CPUs, where this kernel would have kept the
 * library's request, is someone's request (taskset -p). */
static bool rewritten_by_kernel(const cpu_set_t *mask, const cpu_set_t *cpus)
{
    cpu_set_t kept;
    CPU_AND(&kept, &self.asked, cpus);
    if (CPU_COUNT(&kept) > 0 && CPU_EQUAL(mask, &kept))
        return true;
    return CPU_EQUAL(mask, cpus) &&
           !(asked_kernel && CPU_COUNT(&kept) > 0 &&
             ma_kernel_keeps_requests());
}

/* The original mask once the cpuset's CPUs are cpus, as the kernel would
 * have made it for the master without the library: all of them for a
 * master that had all of the old ones, else what is left of its narrower
 * mask, or all of them when nothing is. */
static void original_within(const cpu_set_t *cpus)
{
    cpu_set_t kept;
    CPU_AND(&kept, &self.original, cpus);
    if (CPU_EQUAL(&self.original, &self.cpuset) || CPU_COUNT(&kept) == 0)
        self.original = *cpus;
    else
        self.original = kept;
}

/* The worker the master goes by within its new original mask: worker 0
 * as the configuration says, for a placement at start it has not
 * confirmed, else the leader it follows, else none. */
static const cpu_set_t *worker_gone_by(void)
{
    if (self.start_pending)
        return &start.worker0;
    if (brood.following && CPU_COUNT(&self.handled) > 0)
        return &brood.lead_mask;
    return NULL;
}

/* A kernel that keeps each task's request within a changed cpuset gives
 * a pinned child back the CPUs it asked for that a widened cpuset now
 * has (a worker that asked for CPUs 0-1 in a cpuset of CPU 1 runs on
 * both once it is widened): a mask that grew so replaces its report. A
 * mask that shrank with the cpuset leaves the report, which says where
 * nginx pinned the child; an older kernel gives every task all the CPUs
 * of the new cpuset, which says nothing of that: the reports stand. */
static void reread_pinned_masks(void)
{
    cpu_set_t now, kept;
    if (!ma_kernel_keeps_requests())
        return;
    for (size_t i = 0; i < brood.n; i++) {
        struct ma_child *c = &brood.kids[i];
        if (!c->pinned ||
            REAL(sched_getaffinity)(c->pid, sizeof now, &now) < 0)
            continue;
        CPU_AND(&kept, &now, &c->mask);
        if (!CPU_EQUAL(&kept, &c->mask))
            continue;
        c->mask = now;
        if (brood.following && c->pid == brood.lead_pid)
            brood.lead_mask = now;
    }
}

/* Where the master goes once the cpuset changed, and the words that say
 * it: worker's unit within the new original mask, or the mask itself.
 * Returns whether it goes by the worker. */
static bool cpuset_target(const cpu_set_t *worker, cpu_set_t *target,
                          char *says, size_t len)
{
    static char lead[4096];
    char units[512];
    cpu_set_t in;

    *target = self.original;
    if (!worker) {
        snprintf(says, len, "(its original mask), with no worker to follow");
        return false;
    }
    ma_cpulist_text(worker, lead, sizeof lead);
    CPU_AND(&in, worker, &self.original);
    if (CPU_COUNT(&in) == 0) {
        snprintf(says, len, "(its original mask): worker %d's CPUs %s are "
                 "outside it", self.start_pending ? 0 : brood.lead_pid, lead);
        return false;
    }
    if (ma_place_for(ma_cfg.sysfs, ma_cfg.scope, &topology, &in,
                     &self.original, target, units, sizeof units) < 0) {
        *target = self.original;
        snprintf(says, len, "(its original mask): cannot read the %s of "
                 "CPUs %s under %s", ma_scope_name(ma_cfg.scope), lead,
                 ma_cfg.sysfs);
        return false;
    }
    if (self.start_pending)
        snprintf(says, len, "(%s), placed there at start for worker 0 on "
                 "CPUs %s", units, lead);
    else
        snprintf(says, len, "(%s), following worker %d on CPUs %s", units,
                 brood.lead_pid, lead);
    return true;
}

/* A master that follows worker 0 within the new CPUs takes its memory
 * there (a shrink may have sent it back to its original mask, and its
 * memory policy with it); one that can no longer follow drops the policy.
 * Returns the line's account of it. */
static const char *memory_after_cpuset(const cpu_set_t *worker,
                                       bool goes_by_worker)
{
    static char text[4096];
    text[0] = '\0';
    if (worker && !goes_by_worker)
        ma_memory_restore();
    else if (goes_by_worker && !self.start_pending)
        snprintf(text, sizeof text, "; %s",
                 ma_memory_follow(&brood.lead_mask));
    return text;
}

/* The kernel rewrote the master's mask (now) because its cpuset's CPUs
 * changed to cpus: not the program's doing. Those CPUs bound its original
 * mask from now on, and the master is placed within them as before. */
static void follow_cpuset(const cpu_set_t *cpus, const cpu_set_t *now)
{
    static char set[4096], was[4096], orig[4096], where[4096], says[9000];
    const cpu_set_t *worker;
    cpu_set_t target;
    bool stays, goes_by_worker;

    ma_cpulist_text(&self.cpuset, was, sizeof was);
    /* While the library has asked the kernel for nothing, the kernel's
     * mask is the program's own, as the kernel left it. A request of the
     * library's, even one for the original mask, is kept by the kernel in
     * the program's stead: the original mask is then worked out. */
    if (!asked_kernel)
        self.original = *now;
    else
        original_within(cpus);
    self.cpuset = *cpus;
    if (!ma_cfg.dry_run)
        self.placed = *now;
    reread_pinned_masks();
    worker = worker_gone_by();
    goes_by_worker = cpuset_target(worker, &target, says, sizeof says);
    stays = CPU_EQUAL(&target, &self.placed);
    if (!stays && place_master(&target) < 0)
        return;
    if (worker == &brood.lead_mask)
        self.handled = brood.lead_mask;
    if (self.start_pending)
        start.target = target;
    ma_log(MA_LOG_NOTICE, "%smaster %d: the cpuset changed to %s (was %s): "
           "its original mask is CPUs %s now; master %s CPUs %s %s%s",
           ma_cfg.dry_run ? "dry run: " : "", getpid(),
           ma_cpulist_text(cpus, set, sizeof set), was,
           ma_cpulist_text(&self.original, orig, sizeof orig),
           stays ? "stays on" : "->",
           ma_cpulist_text(&target, where, sizeof where), says,
           memory_after_cpuset(worker, goes_by_worker));
}

/* A mask of the master's that the library did not give is either the
 * kernel's, rewritten because the cpuset's CPUs changed since the library
 * last looked, or the program's or an administrator's. */
void ma_check_own_mask(const cpu_set_t *cpuset)
{
    static char why[4200], set[4096];
    cpu_set_t now;
    if (self.mask_taken ||
        REAL(sched_getaffinity)(getpid(), sizeof now, &now) < 0)
        return;
    why[0] = '\0';
    if (cpuset && !CPU_EQUAL(cpuset, &self.cpuset)) {
        /* Outside the cpuset, the mask is one the kernel has yet to
         * rewrite: looked at again next time. */
        if (!within(&now, cpuset))
            return;
        if (CPU_COUNT(&self.cpuset) == 0) /* the first look */
            self.cpuset = *cpuset;
        else if (rewritten_by_kernel(&now, cpuset))
            return follow_cpuset(cpuset, &now);
        else if (CPU_EQUAL(&now, cpuset))
            snprintf(why, sizeof why, " (all of its changed cpuset, where "
                     "this kernel keeps the CPUs %s the library asked for)",
                     ma_cpulist_text(&self.asked, set, sizeof set));
    }
    /* A dry run gives no mask: it only says which. */
    if (ma_cfg.dry_run || CPU_EQUAL(&now, &self.placed))
        return;
    take_own_mask(&now, why);
}

/* Acts on the leader choice after any event. */
void ma_apply_decision(void)
{
    cpu_set_t target;
    char units[512];

    if (self.mask_taken)
        return;
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

/* The earlier of two times, 0 standing for none. */
static uint64_t earlier(uint64_t a, uint64_t b)
{
    if (!a || !b)
        return a ? a : b;
    return a < b ? a : b;
}

void ma_run_due_decisions(void)
{
    if (brood.wait_until && now_ns() >= brood.wait_until)
        ma_apply_decision();
    touch_up_if_due();
    check_pins_if_due();
}

uint64_t ma_decisions_due(void)
{
    return earlier(earlier(brood.wait_until, touch_up_at), pin_check_at);
}

void ma_decisions_forget(void)
{
    said_pid = 0;
    pin_check_at = 0;
    touch_up_at = 0;
}
