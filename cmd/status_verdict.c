/* masteraff status: which workers pinned themselves, and the verdict on
 * the master against worker 0, at the master's own scope. */
#define _GNU_SOURCE
#include "status.h"

#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Below this share of its pages on worker 0's node, the master's memory
 * has not followed: the rest is what cannot move (page cache in its
 * copy-on-write mappings, which numa_maps counts with them). */
#define MEMORY_FOLLOWED_PERCENT 90

/* The units at scope that hold cpus, as "package 1" or "nodes 0,1", their
 * CPUs in *covered (empty when the topology cannot be read). */
char *units_of(const cpu_set_t *cpus, enum ma_scope scope, cpu_set_t *covered)
{
    static struct ma_unit units[MA_MAX_CPUS];
    char buf[8192];
    size_t n = 0;
    CPU_ZERO(covered);
    if (scope == MA_SCOPE_WORKER) {
        ma_cpulist_format(cpus, buf, sizeof buf);
        CPU_OR(covered, covered, cpus);
        return xasprintf("CPUs %s", buf);
    }
    if (ma_scope_expand(sysfs_root, scope, NULL, cpus, covered, units,
                        MA_MAX_CPUS, &n) < 0) {
        CPU_ZERO(covered);
        return xasprintf("%s ?", ma_scope_name(scope));
    }
    return xstrdup(ma_units_describe(units, n, buf, sizeof buf));
}

/* ---- which workers pinned themselves ---- */

/* Reads a CPU list file; false when it cannot. */
static bool read_cpulist(const char *path, cpu_set_t *cpus)
{
    char buf[8192];
    FILE *f = fopen(path, "re");
    size_t n;
    if (!f)
        return false;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return ma_cpulist_parse(buf, cpus) == 0;
}

/* The CPUs pid's cgroup allows (cgroup v2), from its own cgroup up to the
 * root: cpuset.cpus.effective exists only where the controller is on. */
static bool cgroup_cpus(pid_t pid, cpu_set_t *cpus)
{
    char buf[4096], path[PATH_MAX + 64], *dir;
    if (read_proc(pid, "cgroup", buf, sizeof buf) < 0 ||
        strncmp(buf, "0::", 3) != 0)
        return false;
    dir = buf + 3;
    dir[strcspn(dir, "\n")] = '\0';
    for (;;) {
        snprintf(path, sizeof path, "/sys/fs/cgroup%s/cpuset.cpus.effective",
                 strcmp(dir, "/") == 0 ? "" : dir);
        if (read_cpulist(path, cpus))
            return true;
        if (!strrchr(dir, '/') || strcmp(dir, "/") == 0)
            return false;
        *strrchr(dir, '/') = '\0';
        if (!*dir)
            strcpy(dir, "/");
    }
}

/* The master's original mask as status can know it: children that never
 * pin (cache manager, cache loader) start with it; without one, what the
 * master's cgroup allows, else every online CPU. The processes run on this
 * machine, so this is read under /sys whatever the topology's root. */
void original_mask(const struct table *t, cpu_set_t *out)
{
    bool found = false;
    CPU_ZERO(out);
    for (size_t i = 1; i < t->n; i++)
        if (!t->procs[i].worker) {
            CPU_OR(out, out, &t->procs[i].cpus);
            found = true;
        }
    if (!found && !cgroup_cpus(t->procs[0].pid, out) &&
        !read_cpulist("/sys/devices/system/cpu/online", out))
        CPU_OR(out, out, &t->procs[0].cpus);
}

static bool strict_subset(const cpu_set_t *a, const cpu_set_t *b)
{
    cpu_set_t both;
    CPU_AND(&both, a, b);
    return CPU_EQUAL(&both, a) && !CPU_EQUAL(a, b);
}

/* A worker pinned when it is allowed fewer CPUs than the original mask. */
void mark_pinned(struct table *t, const cpu_set_t *original)
{
    for (size_t i = 1; i < t->n; i++)
        t->procs[i].pinned = t->procs[i].worker &&
                             strict_subset(&t->procs[i].cpus, original);
}

static bool any_pinned(const struct table *t)
{
    for (size_t i = 1; i < t->n; i++)
        if (t->procs[i].pinned)
            return true;
    return false;
}

/* ---- the verdict ---- */

const char *level_name(enum level level)
{
    static const char *const names[] = {"ok", "warning", "critical",
                                        "unknown"};
    return names[level];
}

/* Critical outranks unknown: what is known to be wrong is said first. */
static int severity(enum level level)
{
    static const int rank[] = {0, 1, 3, 2};
    return rank[level];
}

static void add_reason(struct verdict *v, enum level level, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));

static void add_reason(struct verdict *v, enum level level, const char *fmt,
                       ...)
{
    va_list ap;
    char *text;
    if (v->n == MAX_REASONS)
        return;
    va_start(ap, fmt);
    if (vasprintf(&text, fmt, ap) < 0)
        out_of_memory();
    va_end(ap);
    v->reason[v->n].level = level;
    v->reason[v->n++].text = text;
    if (severity(level) > severity(v->level))
        v->level = level;
}

static void judge_library(pid_t pid, const struct library *lib,
                          struct verdict *v)
{
    if (lib->maps_error)
        add_reason(v, LEVEL_UNKNOWN,
                   "cannot tell whether the library is loaded: "
                   "/proc/%d/maps: %s%s",
                   (int)pid, strerror(lib->maps_error),
                   lib->maps_error == EACCES ? " (run as root)" : "");
    else if (!lib->path)
        add_reason(v, LEVEL_CRITICAL,
                   "libmasteraff is not loaded in the master (start nginx "
                   "with LD_PRELOAD naming the library, or through "
                   "masteraff)");
}

/* The executable's file name, as the library matches MASTERAFF_PROGRAMS. */
static bool program_matches(pid_t pid, const char *patterns)
{
    char link[64], exe[PATH_MAX], *list, *pattern, *save;
    const char *name;
    ssize_t n;
    bool match = false;
    snprintf(link, sizeof link, "/proc/%d/exe", (int)pid);
    n = readlink(link, exe, sizeof exe - 1);
    if (n <= 0)
        return true; /* cannot tell: the library's own line will say */
    exe[n] = '\0';
    list = xstrdup(patterns);
    name = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    for (pattern = strtok_r(list, ",", &save); pattern && !match;
         pattern = strtok_r(NULL, ",", &save))
        match = fnmatch(pattern, name, 0) == 0;
    free(list);
    return match;
}

/* A value the library refuses leaves it inert (config.c). */
static bool setting_valid(int var, const char *value)
{
    static const char *const levels[] = {"error", "warn", "notice", "info",
                                         "debug"};
    enum ma_scope scope;
    switch (var) {
    case VAR_SCOPE:
        return ma_scope_parse(value, &scope) == 0;
    case VAR_MIGRATE:
    case VAR_EARLY:
        return strcmp(value, "on") == 0 || strcmp(value, "off") == 0;
    case VAR_LOG:
        for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
            if (strcmp(value, levels[i]) == 0)
                return true;
        return false;
    case VAR_DRY_RUN:
        return strcmp(value, "1") == 0 || strcmp(value, "0") == 0;
    case VAR_SYSFS:
        return value[0] == '/';
    default:
        return true;
    }
}

static void judge_settings(pid_t pid, const struct library *lib,
                           struct verdict *v)
{
    if (!lib->path)
        return;
    for (int var = 0; var < N_VARS; var++)
        if (!setting_valid(var, setting(lib, var)))
            add_reason(v, LEVEL_CRITICAL,
                       "%s=\"%s\" is not valid: the library is inert",
                       var_names[var], shortened(setting(lib, var)));
    if (!program_matches(pid, setting(lib, VAR_PROGRAMS)))
        add_reason(v, LEVEL_CRITICAL,
                   "the master's executable does not match "
                   "MASTERAFF_PROGRAMS=\"%s\": the library is inert",
                   shortened(setting(lib, VAR_PROGRAMS)));
}

/* The oldest worker: the library follows worker 0 of the oldest
 * generation, so after a reload the old worker 0 until it exits. */
static const struct proc *worker0(const struct table *t)
{
    for (size_t i = 1; i < t->n; i++)
        if (t->procs[i].worker)
            return &t->procs[i];
    return NULL;
}

/* A live worker forked after worker 0 but not with it: a respawn, which
 * status cannot tell from worker 0's own. */
static bool worker_respawned(const struct table *t, const struct proc *w0)
{
    unsigned long long burst = (unsigned long long)sysconf(_SC_CLK_TCK) / 20;
    for (size_t i = 1; i < t->n; i++)
        if (t->procs[i].worker && !t->procs[i].exiting &&
            t->procs[i].start > w0->start + burst)
            return true;
    return false;
}

/* Whether cpus lie within the units (their CPUs: allowed), none known
 * being no answer. */
static bool within(const cpu_set_t *cpus, const cpu_set_t *allowed)
{
    cpu_set_t inside;
    CPU_AND(&inside, cpus, allowed);
    return CPU_COUNT(allowed) && CPU_EQUAL(&inside, cpus);
}

/* Whether the library would leave the master where it is: worker 0's
 * units share no CPU with the master's original mask. */
static bool beyond_original(const cpu_set_t *allowed, const cpu_set_t *original)
{
    cpu_set_t both;
    CPU_AND(&both, allowed, original);
    return CPU_COUNT(allowed) && CPU_COUNT(&both) == 0;
}

/* A master away from worker 0 is critical, but only a warning in a dry run
 * (the library changes nothing) and after a respawn (status may have
 * taken the wrong worker for worker 0). */
static void judge_away(bool dry_run, bool respawned, const char *where,
                       const struct proc *w0, const char *w0_units,
                       struct verdict *v)
{
    add_reason(v, dry_run || respawned ? LEVEL_WARNING : LEVEL_CRITICAL,
               "master on %s, worker 0 (pid %d%s) on %s%s%s", where,
               (int)w0->pid, w0->exiting ? ", exiting" : "", w0_units,
               respawned ? " (a worker was respawned: status takes the oldest "
                           "worker for worker 0)"
                         : "",
               dry_run ? " (MASTERAFF_DRY_RUN=1: the library changes nothing)"
                       : "");
}

/* Whether the master is inside the scope units that hold worker 0's CPUs,
 * as the library places it. */
static void judge_placement(const struct table *t, const struct proc *w0,
                            enum ma_scope scope, const struct library *lib,
                            const cpu_set_t *original, struct verdict *v)
{
    const struct proc *m = &t->procs[0];
    cpu_set_t allowed;
    char *w0_units = units_of(&w0->cpus, scope, &allowed);

    v->with_worker0 = within(&m->cpus, &allowed);
    if (v->with_worker0)
        add_reason(v, LEVEL_OK, "master shares %s with worker 0 (pid %d%s)",
                   m->units, (int)w0->pid, w0->exiting ? ", exiting" : "");
    else if (beyond_original(&allowed, original))
        add_reason(v, LEVEL_WARNING,
                   "worker 0 (pid %d%s) on %s, outside the master's original "
                   "CPUs: the master stays on %s",
                   (int)w0->pid, w0->exiting ? ", exiting" : "", w0_units,
                   m->units);
    else
        judge_away(strcmp(setting(lib, VAR_DRY_RUN), "1") == 0,
                   worker_respawned(t, w0), m->units, w0, w0_units, v);
    free(w0_units);
}

/* Whether most of the master's pages are on worker 0's node. Memory that
 * cannot be counted gives no warning: it says why instead. */
/* Why pages could not be counted, with what would let them be: the
 * capability or the system call a container withholds from its root. */
static const char *not_counted_why(const struct ma_node_pages *p, char *buf,
                                   size_t len)
{
    const char *step = p->failed ? p->failed : "?";
    const char *hint = "";

    if (p->error == EPERM && strcmp(step, "map_files") == 0)
        hint = "; opening /proc/PID/map_files takes CAP_SYS_ADMIN or "
               "CAP_CHECKPOINT_RESTORE in the host's user namespace, which "
               "a container's root has only when given them and sharing "
               "the host's: run it on the host";
    else if (p->error == EPERM && strcmp(step, "move_pages") == 0)
        hint = "; a seccomp filter refuses the system call (podman's default "
               "profile always, Docker's without CAP_SYS_NICE): run it on the "
               "host";
    else if (p->error == EPERM || p->error == EACCES)
        hint = "; run as root";
    snprintf(buf, len, "%s: %s%s", step, strerror(p->error), hint);
    return buf;
}

static void judge_memory(const struct table *t, const struct proc *w0,
                         const struct library *lib, struct verdict *v)
{
    const struct ma_pages *mp = t->procs[0].pages;
    int node = node_of(ma_cpuset_first(&w0->cpus));
    int err = mp->priv.error ? mp->priv.error : mp->shared.error;
    unsigned percent;
    char why[400];

    if (!err && node >= 0 && node < MA_PAGES_MAX_NODES) {
        v->pages_total =
            ma_pages_total(&mp->priv) + ma_pages_total(&mp->shared);
        v->pages_on_worker0_node = mp->priv.node[node] + mp->shared.node[node];
    }
    if (strcmp(setting(lib, VAR_MIGRATE), "off") == 0)
        add_reason(v, LEVEL_OK,
                   "master's memory: not moved (MASTERAFF_MIGRATE=off)");
    else if (err)
        add_reason(v, LEVEL_OK, "master's memory: not counted (%s)",
                   not_counted_why(mp->priv.error ? &mp->priv : &mp->shared,
                                   why, sizeof why));
    else if (node < 0 || node >= MA_PAGES_MAX_NODES)
        add_reason(v, LEVEL_OK,
                   "master's memory: worker 0's node is not known under %s",
                   shortened(sysfs_root));
    else if (v->pages_total == 0)
        add_reason(v, LEVEL_OK, "master's memory: no resident pages counted");
    else {
        percent =
            (unsigned)(100 * v->pages_on_worker0_node / v->pages_total);
        add_reason(v,
                   percent < MEMORY_FOLLOWED_PERCENT ? LEVEL_WARNING
                                                     : LEVEL_OK,
                   "master's memory: %s%u%% on node %d, worker 0's node",
                   percent < MEMORY_FOLLOWED_PERCENT ? "only " : "", percent,
                   node);
    }
}

void judge(const struct table *t, const struct library *lib,
                  enum ma_scope scope, const cpu_set_t *original,
                  struct verdict *v)
{
    const struct proc *w0 = worker0(t);
    v->with_worker0 = -1;
    judge_library(t->procs[0].pid, lib, v);
    judge_settings(t->procs[0].pid, lib, v);
    if (!w0)
        add_reason(v, LEVEL_WARNING,
                   "process %d has no worker process to follow",
                   (int)t->procs[0].pid);
    else if (!any_pinned(t))
        add_reason(v, LEVEL_WARNING,
                   "no worker pinned itself to CPUs: the library follows "
                   "worker 0's worker_cpu_affinity, and nginx.conf sets none");
    else {
        judge_placement(t, w0, scope, lib, original, v);
        judge_memory(t, w0, lib, v);
    }
}
