/* masteraff topology: the machine as the library sees it. */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- topology ---- */

static const struct {
    enum ma_scope level;
    const char *why_absent; /* when it falls back to a wider level */
} levels[] = {
    {MA_SCOPE_PACKAGE, NULL},
    {MA_SCOPE_DIE, "not reported or same as package"},
    {MA_SCOPE_NODE, "no NUMA node information"},
    {MA_SCOPE_LLC, "no cache information"},
    {MA_SCOPE_CLUSTER, "not reported, or one per core"},
    {MA_SCOPE_CORE, NULL},
};

static bool ids_repeat(const struct ma_unit *units, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (units[i].id == units[j].id)
                return true;
    return false;
}

static bool all_fell_back(const struct ma_unit *units, size_t n,
                          enum ma_scope level)
{
    for (size_t i = 0; i < n; i++)
        if (units[i].level == level || units[i].level != units[0].level)
            return false;
    return n > 0;
}

/* "core 0 in package 1: CPUs 1", the package when core ids repeat. */
static void print_unit(enum ma_scope level, const struct ma_unit *u,
                       bool qualify)
{
    char cpus[8192];
    ma_cpulist_format(&u->cpus, cpus, sizeof cpus);
    if (u->level != level)
        printf("%s: as %s for CPUs %s\n", ma_scope_name(level),
               ma_scope_name(u->level), cpus);
    else if (qualify)
        printf("%s %d in package %d: CPUs %s\n", ma_scope_name(level), u->id,
               package_of(ma_cpuset_first(&u->cpus)), cpus);
    else
        printf("%s %d: CPUs %s\n", ma_scope_name(level), u->id, cpus);
}

/* The distinct units of one level over the online CPUs. Returns false
 * after saying which CPUs' units cannot be read. */
static bool show_level(enum ma_scope level, const char *why_absent,
                       const cpu_set_t *online)
{
    static struct ma_unit units[MA_MAX_CPUS];
    cpu_set_t covered, failed;
    size_t n = 0;
    int err = 0;
    char list[8192];

    CPU_ZERO(&covered);
    CPU_ZERO(&failed);
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        if (!CPU_ISSET(c, online) || CPU_ISSET(c, &covered))
            continue;
        if (ma_unit_of(sysfs_root, level, c, &units[n]) < 0) {
            err = errno;
            CPU_SET(c, &failed);
            continue;
        }
        CPU_OR(&covered, &covered, &units[n].cpus);
        n++;
    }
    if (all_fell_back(units, n, level))
        printf("%s: as %s (%s)\n", ma_scope_name(level),
               ma_scope_name(units[0].level), why_absent);
    else
        for (size_t i = 0; i < n; i++)
            print_unit(level, &units[i], ids_repeat(units, n));
    if (!err)
        return true;
    ma_cpulist_format(&failed, list, sizeof list);
    fprintf(stderr, "%s: cannot read the %s of CPUs %s under %s: %s\n", me,
            ma_scope_name(level), list, shortened(sysfs_root), strerror(err));
    return false;
}

static const struct option topology_options[] = {
    {"sysfs", required_argument, NULL, OPT_SYSFS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* --sysfs, else $MASTERAFF_SYSFS, else /sys; no other argument. */
static void parse_topology_options(int argc, char **argv)
{
    const char *root = getenv("MASTERAFF_SYSFS");
    int c;
    sysfs_root = root && *root ? root : "/sys";
    while ((c = getopt_long(argc, argv, "hV", topology_options, NULL)) != -1) {
        if (c != OPT_SYSFS)
            common_option(c);
        sysfs_root = optarg;
    }
    if (optind < argc)
        fail(EXIT_USAGE, "unexpected argument '%s'", shortened(argv[optind]));
}

int topology_command(int argc, char **argv)
{
    cpu_set_t online;
    char list[8192];
    bool ok = true;

    parse_topology_options(argc, argv);
    online_cpus(&online);
    ma_cpulist_format(&online, list, sizeof list);
    printf("sysfs: %s\nCPUs: %s\n", sysfs_root, list);
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        ok &= show_level(levels[i].level, levels[i].why_absent, &online);
    return ok ? 0 : EXIT_RUNTIME;
}

