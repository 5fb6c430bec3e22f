/* libmasteraff: cpulists, topology and scopes (see affinity.h). */
#define _GNU_SOURCE
#include "affinity.h"
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- cpulists ---- */

static const char *parse_cpu_number(const char *p, int *out)
{
    long v = 0;
    if (*p < '0' || *p > '9') {
        errno = EINVAL;
        return NULL;
    }
    for (; *p >= '0' && *p <= '9'; p++) {
        v = v * 10 + (*p - '0');
        if (v >= MA_MAX_CPUS) {
            errno = ERANGE;
            return NULL;
        }
    }
    *out = (int)v;
    return p;
}

static const char *parse_cpu_range(const char *p, cpu_set_t *set)
{
    int lo, hi;
    p = parse_cpu_number(p, &lo);
    if (!p)
        return NULL;
    hi = lo;
    if (*p == '-') {
        p = parse_cpu_number(p + 1, &hi);
        if (!p)
            return NULL;
        if (hi < lo) {
            errno = EINVAL;
            return NULL;
        }
    }
    for (int c = lo; c <= hi; c++)
        CPU_SET(c, set);
    return p;
}

int ma_cpulist_parse(const char *s, cpu_set_t *out)
{
    cpu_set_t set;
    const char *p = s;
    CPU_ZERO(&set);
    if (!s) {
        errno = EINVAL;
        return -1;
    }
    for (;;) {
        p = parse_cpu_range(p, &set);
        if (!p)
            return -1;
        if (*p != ',')
            break;
        p++;
    }
    if (*p == '\n')
        p++;
    if (*p != '\0') {
        errno = EINVAL;
        return -1;
    }
    *out = set;
    return 0;
}

int ma_cpulist_format(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    int c = 0;
    if (len == 0) {
        errno = ENOSPC;
        return -1;
    }
    buf[0] = '\0';
    if (CPU_COUNT(set) == 0)
        return snprintf(buf, len, "none") < (int)len ? 4 : (errno = ENOSPC, -1);
    while (c < MA_MAX_CPUS) {
        int lo, n;
        if (!CPU_ISSET(c, set)) {
            c++;
            continue;
        }
        lo = c;
        while (c + 1 < MA_MAX_CPUS && CPU_ISSET(c + 1, set))
            c++;
        n = lo == c ? snprintf(buf + used, len - used, "%s%d",
                               used ? "," : "", lo)
                    : snprintf(buf + used, len - used, "%s%d-%d",
                               used ? "," : "", lo, c);
        if (n < 0 || (size_t)n >= len - used) {
            errno = ENOSPC;
            return -1;
        }
        used += (size_t)n;
        c++;
    }
    return (int)used;
}

const char *ma_cpulist_text(const cpu_set_t *set, char *buf, size_t len)
{
    ma_cpulist_format(set, buf, len);
    return buf;
}

int ma_cpuset_first(const cpu_set_t *set)
{
    for (int c = 0; c < MA_MAX_CPUS; c++)
        if (CPU_ISSET(c, set))
            return c;
    return -1;
}

static int nth_cpu(const cpu_set_t *set, int n)
{
    for (int c = 0; c < MA_MAX_CPUS; c++)
        if (CPU_ISSET(c, set) && n-- == 0)
            return c;
    return -1;
}

static int rank_of(const cpu_set_t *set, int cpu)
{
    int r = 0;
    for (int c = 0; c < cpu; c++)
        r += CPU_ISSET(c, set) ? 1 : 0;
    return r;
}

int ma_auto_cpu(const cpu_set_t *auto_cpus, const cpu_set_t *allowed,
                const cpu_set_t *asked)
{
    cpu_set_t inside;
    int cpu, n = CPU_COUNT(allowed);
    CPU_AND(&inside, auto_cpus, allowed);
    if (n == 0 || CPU_EQUAL(&inside, auto_cpus) || CPU_COUNT(asked) != 1)
        return -1;
    cpu = ma_cpuset_first(asked);
    if (!CPU_ISSET(cpu, auto_cpus))
        return -1;
    return nth_cpu(allowed, rank_of(auto_cpus, cpu) % n);
}

/* ---- scopes ---- */

static const char *const scope_names[MA_SCOPE_COUNT] = {
    [MA_SCOPE_WORKER] = "worker",   [MA_SCOPE_CPU] = "cpu",
    [MA_SCOPE_CORE] = "core",       [MA_SCOPE_CLUSTER] = "cluster",
    [MA_SCOPE_LLC] = "llc",         [MA_SCOPE_DIE] = "die",
    [MA_SCOPE_NODE] = "node",       [MA_SCOPE_PACKAGE] = "package",
};

int ma_scope_parse(const char *name, enum ma_scope *out)
{
    for (int i = 0; i < MA_SCOPE_COUNT; i++)
        if (name && strcmp(name, scope_names[i]) == 0) {
            *out = (enum ma_scope)i;
            return 0;
        }
    return -1;
}

const char *ma_scope_name(enum ma_scope scope)
{
    return scope < MA_SCOPE_COUNT ? scope_names[scope] : "?";
}

const char *ma_scope_choices(void)
{
    return "package, die, node, llc, cluster, core, cpu, worker";
}

/* ---- sysfs ---- */

/* sysfs attributes are regular files. Anything else under the root (a
 * FIFO, which would block the open or the read with no writer; a device,
 * which opening can make act) is refused before it is opened, and the
 * open itself never waits: the start runs it before main(), the listener
 * under the lock every fork takes. */
int ma_open_regular(const char *path)
{
    struct stat st;
    int fd;
    if (ma_stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        errno = EINVAL;
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -1;
    if (ma_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

/* Reads a small sysfs file into buf. Returns 0, or -1 with errno (ENODATA
 * for an empty file). */
static int read_sysfs(char *buf, size_t len, const char *root,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int read_sysfs(char *buf, size_t len, const char *root,
                      const char *fmt, ...)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof path, "%s/", root);
    va_list ap;
    ssize_t got;
    int fd;

    va_start(ap, fmt);
    n += vsnprintf(path + n, sizeof path - (size_t)n, fmt, ap);
    va_end(ap);
    if ((size_t)n >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = ma_open_regular(path);
    if (fd < 0)
        return -1;
    got = read(fd, buf, len - 1);
    if (got < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    close(fd);
    if (got == 0) {
        errno = ENODATA;
        return -1;
    }
    buf[got] = '\0';
    return 0;
}

/* The longest cpulist file read: "0,2,4,..." up to CPU_SETSIZE. */
#define CPULIST_MAX 8192

/* A cpulist file under root at path: its buffer on the heap, not the
 * stack, which the placement at start shares with a program that has not
 * yet run. Returns 0, or -1 with errno. */
static int read_cpulist_file(const char *root, const char *path,
                             cpu_set_t *out)
{
    char *buf = malloc(CPULIST_MAX);
    int rc, e;
    if (!buf)
        return -1;
    rc = read_sysfs(buf, CPULIST_MAX, root, "%s", path);
    if (rc == 0)
        rc = ma_cpulist_parse(buf, out);
    e = errno;
    free(buf);
    errno = e;
    return rc;
}

/* A cpulist file that must hold `cpu`: anything else is garbage. */
static int read_cpu_cpulist(const char *root, int cpu, cpu_set_t *out,
                            const char *file)
{
    char path[64 + NAME_MAX];
    snprintf(path, sizeof path, "devices/system/cpu/cpu%d/%s", cpu, file);
    if (read_cpulist_file(root, path, out) < 0)
        return -1;
    if (!CPU_ISSET(cpu, out)) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

static int read_cpu_int(const char *root, int cpu, const char *file, int *out)
{
    char buf[64], *end;
    long v;
    if (read_sysfs(buf, sizeof buf, root, "devices/system/cpu/cpu%d/%s", cpu,
                   file) < 0)
        return -1;
    errno = 0;
    v = strtol(buf, &end, 10);
    if (end == buf || (*end != '\n' && *end != '\0') || errno ||
        v < INT_MIN || v > INT_MAX) {
        errno = EINVAL;
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Reads a topology level from the first file that exists (new name, then
 * the older kernels' one). */
static int read_level(const char *root, int cpu, const char *list,
                      const char *old_list, const char *id_file,
                      struct ma_unit *u)
{
    if (read_cpu_cpulist(root, cpu, &u->cpus, list) < 0 &&
        (!old_list || errno != ENOENT ||
         read_cpu_cpulist(root, cpu, &u->cpus, old_list) < 0))
        return -1;
    if (read_cpu_int(root, cpu, id_file, &u->id) < 0)
        u->id = ma_cpuset_first(&u->cpus);
    return 0;
}

static int read_package(const char *root, int cpu, struct ma_unit *u)
{
    u->level = MA_SCOPE_PACKAGE;
    return read_level(root, cpu, "topology/package_cpus_list",
                      "topology/core_siblings_list",
                      "topology/physical_package_id", u);
}

static int read_core(const char *root, int cpu, struct ma_unit *u)
{
    u->level = MA_SCOPE_CORE;
    return read_level(root, cpu, "topology/core_cpus_list",
                      "topology/thread_siblings_list", "topology/core_id", u);
}

/* The last-level cache: the highest-level data or unified cache. */
static int read_llc(const char *root, int cpu, struct ma_unit *u)
{
    int best_level = -1;
    u->level = MA_SCOPE_LLC;
    for (int i = 0; i < 16; i++) {
        char type[32], file[64];
        int level;
        cpu_set_t cpus;
        snprintf(file, sizeof file, "cache/index%d/level", i);
        if (read_cpu_int(root, cpu, file, &level) < 0)
            continue;
        if (read_sysfs(type, sizeof type, root,
                       "devices/system/cpu/cpu%d/cache/index%d/type", cpu,
                       i) == 0 &&
            strncmp(type, "Instruction", 11) == 0)
            continue;
        snprintf(file, sizeof file, "cache/index%d/shared_cpu_list", i);
        if (level > best_level &&
            read_cpu_cpulist(root, cpu, &cpus, file) == 0) {
            best_level = level;
            u->cpus = cpus;
        }
    }
    if (best_level < 0) {
        errno = ENOENT;
        return -1;
    }
    u->id = ma_cpuset_first(&u->cpus);
    return 0;
}

static int read_node(const char *root, int cpu, struct ma_unit *u)
{
    char path[64];
    int node = ma_node_of_cpu(root, cpu);
    u->level = MA_SCOPE_NODE;
    if (node < 0)
        return -1;
    snprintf(path, sizeof path, "devices/system/node/node%d/cpulist", node);
    if (read_cpulist_file(root, path, &u->cpus) < 0)
        return -1;
    u->id = node;
    return 0;
}

/* A level that only repeats its narrower neighbour says nothing. */
static bool same_cpus(const struct ma_unit *a, const struct ma_unit *b)
{
    return CPU_EQUAL(&a->cpus, &b->cpus);
}

static int read_cluster(const char *root, int cpu, struct ma_unit *u)
{
    struct ma_unit core;
    u->level = MA_SCOPE_CLUSTER;
    if (read_level(root, cpu, "topology/cluster_cpus_list", NULL,
                   "topology/cluster_id", u) < 0)
        return -1;
    if (CPU_COUNT(&u->cpus) == 1 ||
        (read_core(root, cpu, &core) == 0 && same_cpus(u, &core))) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

static int read_die(const char *root, int cpu, struct ma_unit *u)
{
    struct ma_unit pkg;
    u->level = MA_SCOPE_DIE;
    if (read_level(root, cpu, "topology/die_cpus_list", NULL,
                   "topology/die_id", u) < 0)
        return -1;
    if (read_package(root, cpu, &pkg) == 0 && same_cpus(u, &pkg)) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

static int cpu_exists(const char *root, int cpu)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d", root, cpu) >=
        (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return access(path, F_OK);
}

int ma_unit_of(const char *root, enum ma_scope level, int cpu,
               struct ma_unit *out)
{
    struct ma_unit u;
    if (cpu < 0 || cpu >= MA_MAX_CPUS) {
        errno = EINVAL;
        return -1;
    }
    if (cpu_exists(root, cpu) < 0)
        return -1;
    switch (level) {
    case MA_SCOPE_WORKER:
    case MA_SCOPE_CPU:
        u.level = level;
        u.id = cpu;
        CPU_ZERO(&u.cpus);
        CPU_SET(cpu, &u.cpus);
        break;
    case MA_SCOPE_CORE:
        if (read_core(root, cpu, &u) < 0)
            return -1;
        break;
    case MA_SCOPE_CLUSTER:
        if (read_cluster(root, cpu, &u) == 0)
            break;
        return ma_unit_of(root, MA_SCOPE_LLC, cpu, out);
    case MA_SCOPE_LLC:
        if (read_llc(root, cpu, &u) == 0)
            break;
        return ma_unit_of(root, MA_SCOPE_DIE, cpu, out);
    case MA_SCOPE_DIE:
        if (read_die(root, cpu, &u) == 0)
            break;
        return ma_unit_of(root, MA_SCOPE_PACKAGE, cpu, out);
    case MA_SCOPE_NODE:
        if (read_node(root, cpu, &u) == 0)
            break;
        return ma_unit_of(root, MA_SCOPE_PACKAGE, cpu, out);
    case MA_SCOPE_PACKAGE:
        if (read_package(root, cpu, &u) < 0)
            return -1;
        break;
    default:
        errno = EINVAL;
        return -1;
    }
    *out = u;
    return 0;
}

static bool unit_listed(const struct ma_unit *units, size_t n,
                        const struct ma_unit *u)
{
    for (size_t i = 0; i < n; i++)
        if (units[i].level == u->level && same_cpus(&units[i], u))
            return true;
    return false;
}

/* The unit at scope holding cpu: from known when it was read there, else
 * read below root. */
static int unit_at(const char *root, enum ma_scope scope,
                   const struct ma_topology *known, int cpu,
                   struct ma_unit *out)
{
    if (known && known->scope == scope && CPU_ISSET(cpu, &known->read)) {
        *out = known->units[cpu];
        return 0;
    }
    return ma_unit_of(root, scope, cpu, out);
}

int ma_scope_expand(const char *root, enum ma_scope scope,
                    const struct ma_topology *known, const cpu_set_t *leader,
                    cpu_set_t *out, struct ma_unit *units, size_t max_units,
                    size_t *n_units)
{
    cpu_set_t all;
    size_t n = 0;
    CPU_ZERO(&all);
    *n_units = 0;
    if (CPU_COUNT(leader) == 0) {
        errno = EINVAL;
        return -1;
    }
    if (scope == MA_SCOPE_WORKER) {
        if (max_units > 0) {
            units[0].level = MA_SCOPE_WORKER;
            units[0].id = ma_cpuset_first(leader);
            units[0].cpus = *leader;
            n = 1;
        }
        *out = *leader;
        *n_units = n;
        return 0;
    }
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        struct ma_unit u;
        if (!CPU_ISSET(c, leader))
            continue;
        if (CPU_ISSET(c, &all))
            continue;
        if (unit_at(root, scope, known, c, &u) < 0)
            return -1;
        CPU_OR(&all, &all, &u.cpus);
        if (n < max_units && !unit_listed(units, n, &u))
            units[n++] = u;
    }
    *out = all;
    *n_units = n;
    return 0;
}

int ma_place_for(const char *root, enum ma_scope scope,
                 const struct ma_topology *known, const cpu_set_t *lead,
                 const cpu_set_t *original, cpu_set_t *target, char *units,
                 size_t len)
{
    struct ma_unit u[16];
    size_t n;
    if (ma_scope_expand(root, scope, known, lead, target, u, 16, &n) < 0)
        return -1;
    ma_units_describe(u, n, units, len);
    CPU_AND(target, target, original);
    return 0;
}

void ma_topology_init(struct ma_topology *t, enum ma_scope scope)
{
    t->scope = scope;
    CPU_ZERO(&t->read);
}

/* Every CPU's own unit, not one CPU's unit for all it holds: a CPU inside
 * another's unit may read differently (the cluster of a hybrid part's
 * E-core, where a P-core's falls back to the LLC; a CPU that is gone). */
int ma_topology_read(const char *root, const cpu_set_t *cpus,
                     struct ma_topology *t)
{
    int err = 0;
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        if (!CPU_ISSET(c, cpus))
            continue;
        if (ma_unit_of(root, t->scope, c, &t->units[c]) == 0)
            CPU_SET(c, &t->read);
        else if (!err)
            err = errno;
    }
    if (!err)
        return 0;
    errno = err;
    return -1;
}

/* Units at levels with numeric ids read as "package 0"; the others are
 * named by their CPUs. */
static bool level_has_id(enum ma_scope level)
{
    return level == MA_SCOPE_PACKAGE || level == MA_SCOPE_DIE ||
           level == MA_SCOPE_NODE || level == MA_SCOPE_CLUSTER ||
           level == MA_SCOPE_CORE || level == MA_SCOPE_CPU;
}

static size_t append(char *buf, size_t len, size_t used, const char *s)
{
    int n;
    if (used >= len)
        return used;
    n = snprintf(buf + used, len - used, "%s", s);
    return n < 0 ? used : used + (size_t)n;
}

static size_t describe_one(const struct ma_unit *u, bool first_of_level,
                           bool plural, char *buf, size_t len, size_t used)
{
    char item[4200];
    if (level_has_id(u->level)) {
        if (first_of_level)
            snprintf(item, sizeof item, "%s%s %d",
                     u->level == MA_SCOPE_CPU ? "CPU" : ma_scope_name(u->level),
                     plural ? "s" : "", u->id);
        else
            snprintf(item, sizeof item, ",%d", u->id);
    } else {
        char cpus[4096];
        ma_cpulist_format(&u->cpus, cpus, sizeof cpus);
        if (u->level == MA_SCOPE_WORKER)
            snprintf(item, sizeof item, "worker's CPUs");
        else if (first_of_level)
            snprintf(item, sizeof item, "llc%s %s", plural ? "s" : "", cpus);
        else
            snprintf(item, sizeof item, " + %s", cpus);
    }
    return append(buf, len, used, item);
}

const char *ma_units_describe(const struct ma_unit *units, size_t n,
                              char *buf, size_t len)
{
    size_t used = 0;
    if (len == 0)
        return buf;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        bool first = i == 0 || units[i - 1].level != units[i].level;
        bool plural = first && i + 1 < n && units[i + 1].level == units[i].level;
        if (first && i > 0)
            used = append(buf, len, used, ", ");
        used = describe_one(&units[i], first, plural, buf, len, used);
    }
    return buf;
}

int ma_node_of_cpu(const char *root, int cpu)
{
    char path[PATH_MAX];
    DIR *dir;
    struct dirent *de;
    int found = -1, err = ENOENT;

    if (snprintf(path, sizeof path, "%s/devices/system/node", root) >=
        (int)sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    dir = opendir(path);
    if (!dir)
        return -1;
    while (found < 0 && (de = readdir(dir))) {
        char file[64], *end;
        cpu_set_t cpus;
        long node;
        if (strncmp(de->d_name, "node", 4) != 0)
            continue;
        node = strtol(de->d_name + 4, &end, 10);
        if (end == de->d_name + 4 || *end || node < 0 || node > INT_MAX)
            continue;
        snprintf(file, sizeof file, "devices/system/node/node%ld/cpulist",
                 node);
        if (read_cpulist_file(root, file, &cpus) < 0) {
            if (errno != ENOENT && errno != EINVAL)
                err = errno;
        } else if (CPU_ISSET(cpu, &cpus))
            found = (int)node;
    }
    closedir(dir);
    errno = err;
    return found;
}

int ma_node_of_worker(const char *root, const cpu_set_t *worker)
{
    return ma_node_of_cpu(root, ma_cpuset_first(worker));
}
