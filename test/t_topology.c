/* Topology and scope expansion over fake sysfs trees (test/mktree). */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "affinity.h"
#include "tap.h"

#ifndef SRCDIR
#error "build with -DSRCDIR=\"/path/to/repo\""
#endif

static char tmpdir[PATH_MAX];

/* Runs a shell command; returns its exit status, or -1. */
static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
    char cmd[4 * PATH_MAX];
    va_list ap;
    int rc, n;

    va_start(ap, fmt);
    n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd)
        return -1;
    rc = system(cmd);
    return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/* Builds SHAPE into tmpdir/NAME; returns the path, or NULL. */
static const char *tree_as(const char *shape, const char *name)
{
    static char roots[32][sizeof tmpdir + 32];
    static int n;
    char *root;

    if (n == 32)
        abort();
    root = roots[n++];
    snprintf(root, sizeof roots[0], "%s/%s", tmpdir, name);
    if (!ok(run("'%s' '%s' '%s'", SRCDIR "/test/mktree", shape, root) == 0,
            "mktree %s %s", shape, name))
        return NULL;
    return root;
}

static const char *tree(const char *shape)
{
    return tree_as(shape, shape);
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* A set from a list of CPUs ended by -1. */
static cpu_set_t set_of(int cpu, ...)
{
    cpu_set_t s;
    va_list ap;

    CPU_ZERO(&s);
    va_start(ap, cpu);
    for (; cpu >= 0; cpu = va_arg(ap, int))
        CPU_SET(cpu, &s);
    va_end(ap);
    return s;
}

/* A set as a cpulist (rotating static buffers, so two fit in one printf). */
static const char *fmt(const cpu_set_t *s)
{
    static char bufs[4][1024];
    static int i;
    char *b = bufs[i++ % 4];

    if (ma_cpulist_format(s, b, sizeof bufs[0]) < 0)
        snprintf(b, sizeof bufs[0], "(format failed: %s)", strerror(errno));
    return b;
}

/* ma_unit_of(root, level, cpu) gives a unit of want_level / want_id with
 * the CPUs want_cpus. */
static void unit_is(const char *root, const char *shape, enum ma_scope level,
                    int cpu, enum ma_scope want_level, int want_id,
                    const char *want_cpus)
{
    struct ma_unit u;
    const char *lv = ma_scope_name(level);

    if (!root)
        return;
    memset(&u, 0, sizeof u);
    errno = 0;
    if (!ok(ma_unit_of(root, level, cpu, &u) == 0, "%s: %s of CPU %d found",
            shape, lv, cpu)) {
        printf("#   errno %d (%s)\n", errno, strerror(errno));
        return;
    }
    is_str(ma_scope_name(u.level), ma_scope_name(want_level),
           "%s: %s of CPU %d: level after fallback", shape, lv, cpu);
    if (!ok(u.id == want_id, "%s: %s of CPU %d: id %d", shape, lv, cpu,
            want_id))
        printf("#   got id %d\n", u.id);
    is_str(fmt(&u.cpus), want_cpus, "%s: %s of CPU %d: CPUs", shape, lv, cpu);
}

/* ma_scope_expand(root, scope, leader) gives want_cpus, made of want_units
 * units, described as want_desc (not checked when NULL). */
static void expand_is(const char *root, const char *shape,
                      enum ma_scope scope, cpu_set_t leader,
                      const char *want_cpus, size_t want_units,
                      const char *want_desc)
{
    struct ma_unit units[256];
    size_t n = 12345;
    cpu_set_t out;
    char desc[512], lead[1024];
    const char *sc = ma_scope_name(scope);

    if (!root)
        return;
    snprintf(lead, sizeof lead, "%s", fmt(&leader));
    CPU_ZERO(&out);
    errno = 0;
    if (!ok(ma_scope_expand(root, scope, NULL, &leader, &out, units, 256,
                            &n) == 0,
            "%s: %s scope of leader %s expands", shape, sc, lead)) {
        printf("#   errno %d (%s)\n", errno, strerror(errno));
        return;
    }
    is_str(fmt(&out), want_cpus, "%s: %s scope of leader %s: CPUs", shape, sc,
           lead);
    if (!ok(n == want_units, "%s: %s scope of leader %s: %zu unit(s)", shape,
            sc, lead, want_units))
        printf("#   got %zu\n", n);
    if (n > 256)
        return;
    ma_units_describe(units, n, desc, sizeof desc);
    if (want_desc)
        is_str(desc, want_desc, "%s: %s scope of leader %s: described", shape,
               sc, lead);
    else
        printf("# %s: %s scope of leader %s is described as '%s'\n", shape,
               sc, lead, desc);
}

static void node_is(const char *root, const char *shape, int cpu, int want)
{
    int got;

    if (!root)
        return;
    got = ma_node_of_cpu(root, cpu);
    if (!ok(got == want, "%s: CPU %d is in node %d", shape, cpu, want))
        printf("#   got %d\n", got);
}

static void test_kunpeng920(void)
{
    const char *s = "kunpeng920", *r = tree(s);

    unit_is(r, s, MA_SCOPE_PACKAGE, 30, MA_SCOPE_PACKAGE, 0, "0-47");
    unit_is(r, s, MA_SCOPE_DIE, 30, MA_SCOPE_PACKAGE, 0, "0-47");
    unit_is(r, s, MA_SCOPE_NODE, 30, MA_SCOPE_NODE, 1, "24-47");
    unit_is(r, s, MA_SCOPE_LLC, 30, MA_SCOPE_LLC, 24, "24-47");
    unit_is(r, s, MA_SCOPE_CLUSTER, 30, MA_SCOPE_CLUSTER, 7, "28-31");
    unit_is(r, s, MA_SCOPE_CORE, 30, MA_SCOPE_CORE, 30, "30");
    unit_is(r, s, MA_SCOPE_CPU, 30, MA_SCOPE_CPU, 30, "30");
    unit_is(r, s, MA_SCOPE_PACKAGE, 95, MA_SCOPE_PACKAGE, 1, "48-95");
    unit_is(r, s, MA_SCOPE_NODE, 95, MA_SCOPE_NODE, 3, "72-95");
    unit_is(r, s, MA_SCOPE_CLUSTER, 95, MA_SCOPE_CLUSTER, 23, "92-95");

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(30, -1), "0-47", 1, "package 0");
    expand_is(r, s, MA_SCOPE_DIE, set_of(30, -1), "0-47", 1, "package 0");
    expand_is(r, s, MA_SCOPE_NODE, set_of(30, -1), "24-47", 1, "node 1");
    expand_is(r, s, MA_SCOPE_LLC, set_of(30, -1), "24-47", 1, NULL);
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(30, -1), "28-31", 1, NULL);
    expand_is(r, s, MA_SCOPE_CORE, set_of(30, -1), "30", 1, NULL);
    expand_is(r, s, MA_SCOPE_CPU, set_of(30, -1), "30", 1, "CPU 30");
    expand_is(r, s, MA_SCOPE_WORKER, set_of(30, -1), "30", 1, NULL);

    /* a leader across both packages */
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(2, 60, -1), "0-95", 2,
              "packages 0,1");
    expand_is(r, s, MA_SCOPE_NODE, set_of(2, 60, -1), "0-23,48-71", 2, NULL);
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(2, 60, -1), "0-3,60-63", 2, NULL);
    expand_is(r, s, MA_SCOPE_WORKER, set_of(2, 60, -1), "2,60", 1, NULL);
    expand_is(r, s, MA_SCOPE_CPU, set_of(2, 60, -1), "2,60", 2, NULL);
    /* several CPUs of one unit give it once */
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(28, 29, 31, -1), "28-31", 1,
              NULL);
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(0, 24, 47, -1), "0-47", 1,
              "package 0");

    /* the worker scope is exactly the leader, nothing is added */
    {
        cpu_set_t all;
        CPU_ZERO(&all);
        for (int c = 0; c < 96; c++)
            CPU_SET(c, &all);
        expand_is(r, s, MA_SCOPE_WORKER, set_of(30, 31, 33, -1), "30-31,33",
                  1, NULL);
        expand_is(r, s, MA_SCOPE_LLC, all, "0-95", 4, NULL);
        expand_is(r, s, MA_SCOPE_CLUSTER, all, "0-95", 24, NULL);
        expand_is(r, s, MA_SCOPE_CORE, all, "0-95", 96, NULL);
    }

    node_is(r, s, 0, 0);
    node_is(r, s, 30, 1);
    node_is(r, s, 48, 2);
    node_is(r, s, 95, 3);
    node_is(r, s, 96, -1);
}

/* The same machine with a real Kunpeng's PPTT ids: packages 36 and 3420,
 * cluster ids that are offsets too, repeating nowhere. Units are told
 * apart by their CPUs, and named by the kernel's ids. */
static void test_kunpeng920_pptt(void)
{
    const char *s = "kunpeng920-pptt", *r = tree(s);

    unit_is(r, s, MA_SCOPE_PACKAGE, 30, MA_SCOPE_PACKAGE, 36, "0-47");
    unit_is(r, s, MA_SCOPE_PACKAGE, 60, MA_SCOPE_PACKAGE, 3420, "48-95");
    unit_is(r, s, MA_SCOPE_DIE, 60, MA_SCOPE_PACKAGE, 3420, "48-95");
    unit_is(r, s, MA_SCOPE_NODE, 60, MA_SCOPE_NODE, 2, "48-71");
    unit_is(r, s, MA_SCOPE_LLC, 60, MA_SCOPE_LLC, 48, "48-71");
    unit_is(r, s, MA_SCOPE_CLUSTER, 30, MA_SCOPE_CLUSTER, 36 + 20 + 60 * 7,
            "28-31");
    unit_is(r, s, MA_SCOPE_CLUSTER, 95, MA_SCOPE_CLUSTER, 3420 + 20 + 60 * 11,
            "92-95");
    unit_is(r, s, MA_SCOPE_CORE, 60, MA_SCOPE_CORE, 60, "60");

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(30, -1), "0-47", 1, "package 36");
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(60, -1), "48-95", 1,
              "package 3420");
    expand_is(r, s, MA_SCOPE_DIE, set_of(60, -1), "48-95", 1, "package 3420");
    expand_is(r, s, MA_SCOPE_NODE, set_of(60, -1), "48-71", 1, "node 2");
    expand_is(r, s, MA_SCOPE_LLC, set_of(60, -1), "48-71", 1, NULL);
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(60, -1), "60-63", 1, NULL);
    expand_is(r, s, MA_SCOPE_WORKER, set_of(60, -1), "60", 1, NULL);
    /* a leader across both packages: two units, both ids named */
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(2, 60, -1), "0-95", 2,
              "packages 36,3420");
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(2, 60, -1), "0-3,60-63", 2, NULL);
    /* several CPUs of one package, in different nodes: one unit */
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(48, 72, 95, -1), "48-95", 1,
              "package 3420");
}

static void test_intel2s(void)
{
    const char *s = "intel2s", *r = tree(s);

    unit_is(r, s, MA_SCOPE_PACKAGE, 3, MA_SCOPE_PACKAGE, 0, "0-23,48-71");
    unit_is(r, s, MA_SCOPE_CORE, 3, MA_SCOPE_CORE, 3, "3,51");
    unit_is(r, s, MA_SCOPE_CORE, 51, MA_SCOPE_CORE, 3, "3,51");
    unit_is(r, s, MA_SCOPE_CPU, 51, MA_SCOPE_CPU, 51, "51");
    /* cluster == core: degenerate, falls back to the llc */
    unit_is(r, s, MA_SCOPE_CLUSTER, 3, MA_SCOPE_LLC, 0, "0-23,48-71");
    unit_is(r, s, MA_SCOPE_LLC, 3, MA_SCOPE_LLC, 0, "0-23,48-71");
    /* die == package: degenerate */
    unit_is(r, s, MA_SCOPE_DIE, 3, MA_SCOPE_PACKAGE, 0, "0-23,48-71");
    unit_is(r, s, MA_SCOPE_NODE, 3, MA_SCOPE_NODE, 0, "0-23,48-71");
    /* package 1; core_id counts within the package, as on real x86 */
    unit_is(r, s, MA_SCOPE_PACKAGE, 75, MA_SCOPE_PACKAGE, 1, "24-47,72-95");
    unit_is(r, s, MA_SCOPE_CORE, 75, MA_SCOPE_CORE, 3, "27,75");
    unit_is(r, s, MA_SCOPE_LLC, 75, MA_SCOPE_LLC, 24, "24-47,72-95");
    unit_is(r, s, MA_SCOPE_NODE, 75, MA_SCOPE_NODE, 1, "24-47,72-95");

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(3, -1), "0-23,48-71", 1,
              "package 0");
    expand_is(r, s, MA_SCOPE_CORE, set_of(3, -1), "3,51", 1, NULL);
    expand_is(r, s, MA_SCOPE_CORE, set_of(3, 51, -1), "3,51", 1, NULL);
    expand_is(r, s, MA_SCOPE_NODE, set_of(3, -1), "0-23,48-71", 1, "node 0");
    expand_is(r, s, MA_SCOPE_NODE, set_of(27, -1), "24-47,72-95", 1,
              "node 1");
    expand_is(r, s, MA_SCOPE_WORKER, set_of(3, -1), "3", 1, NULL);
    /* core 3 of package 0 and core 3 of package 1 are two units, even
     * though their core_id is the same */
    expand_is(r, s, MA_SCOPE_CORE, set_of(3, 27, -1), "3,27,51,75", 2, NULL);
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(3, 75, -1), "0-95", 2,
              "packages 0,1");

    node_is(r, s, 3, 0);
    node_is(r, s, 51, 0);
    node_is(r, s, 27, 1);
    node_is(r, s, 75, 1);
}

static void test_epyc(const char *s, bool nps4)
{
    const char *r = tree(s);
    const char *node = nps4 ? "16-31,80-95" : "0-127";

    unit_is(r, s, MA_SCOPE_PACKAGE, 17, MA_SCOPE_PACKAGE, 0, "0-127");
    unit_is(r, s, MA_SCOPE_DIE, 17, MA_SCOPE_PACKAGE, 0, "0-127");
    unit_is(r, s, MA_SCOPE_LLC, 17, MA_SCOPE_LLC, 16, "16-19,80-83");
    unit_is(r, s, MA_SCOPE_LLC, 83, MA_SCOPE_LLC, 16, "16-19,80-83");
    unit_is(r, s, MA_SCOPE_CLUSTER, 17, MA_SCOPE_LLC, 16, "16-19,80-83");
    unit_is(r, s, MA_SCOPE_CORE, 17, MA_SCOPE_CORE, 17, "17,81");
    unit_is(r, s, MA_SCOPE_NODE, 17, MA_SCOPE_NODE, nps4 ? 1 : 0, node);

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(17, -1), "0-127", 1,
              "package 0");
    expand_is(r, s, MA_SCOPE_NODE, set_of(17, -1), node, 1,
              nps4 ? "node 1" : "node 0");
    expand_is(r, s, MA_SCOPE_LLC, set_of(17, 81, -1), "16-19,80-83", 1, NULL);
    expand_is(r, s, MA_SCOPE_LLC, set_of(17, 127, -1),
              "16-19,60-63,80-83,124-127", 2, NULL);
    if (nps4)
        expand_is(r, s, MA_SCOPE_NODE, set_of(0, 127, -1),
                  "0-15,48-79,112-127", 2, NULL);

    node_is(r, s, 17, nps4 ? 1 : 0);
    node_is(r, s, 81, nps4 ? 1 : 0);
    node_is(r, s, 64, 0);
    node_is(r, s, 127, nps4 ? 3 : 0);
}

static void test_thismachine(void)
{
    const char *s = "thismachine", *r = tree(s);

    unit_is(r, s, MA_SCOPE_PACKAGE, 1, MA_SCOPE_PACKAGE, 0, "0-1");
    /* cluster_id 65535, the cluster is the core: falls back to the llc */
    unit_is(r, s, MA_SCOPE_CLUSTER, 1, MA_SCOPE_LLC, 0, "0-1");
    unit_is(r, s, MA_SCOPE_LLC, 1, MA_SCOPE_LLC, 0, "0-1");
    unit_is(r, s, MA_SCOPE_DIE, 1, MA_SCOPE_PACKAGE, 0, "0-1");
    unit_is(r, s, MA_SCOPE_NODE, 1, MA_SCOPE_NODE, 0, "0-1");
    unit_is(r, s, MA_SCOPE_CORE, 1, MA_SCOPE_CORE, 1, "1");
    unit_is(r, s, MA_SCOPE_CPU, 1, MA_SCOPE_CPU, 1, "1");

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(1, -1), "0-1", 1, "package 0");
    expand_is(r, s, MA_SCOPE_NODE, set_of(1, -1), "0-1", 1, "node 0");
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(1, -1), "0-1", 1, NULL);
    expand_is(r, s, MA_SCOPE_CORE, set_of(0, 1, -1), "0-1", 2, NULL);
    expand_is(r, s, MA_SCOPE_WORKER, set_of(1, -1), "1", 1, NULL);

    node_is(r, s, 0, 0);
    node_is(r, s, 1, 0);
    node_is(r, s, 2, -1);
}

static void test_oldkernel(void)
{
    const char *s = "oldkernel", *r = tree(s);

    /* package from core_siblings_list, core from thread_siblings_list */
    unit_is(r, s, MA_SCOPE_PACKAGE, 5, MA_SCOPE_PACKAGE, 1, "4-7");
    unit_is(r, s, MA_SCOPE_CORE, 5, MA_SCOPE_CORE, 1, "5");
    unit_is(r, s, MA_SCOPE_DIE, 5, MA_SCOPE_PACKAGE, 1, "4-7");
    /* no cluster files: falls back to the llc */
    unit_is(r, s, MA_SCOPE_CLUSTER, 5, MA_SCOPE_LLC, 4, "4-7");
    unit_is(r, s, MA_SCOPE_LLC, 5, MA_SCOPE_LLC, 4, "4-7");
    unit_is(r, s, MA_SCOPE_NODE, 5, MA_SCOPE_NODE, 1, "4-7");

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(5, -1), "4-7", 1, "package 1");
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(0, 5, -1), "0-7", 2,
              "packages 0,1");
    /* core_id 1 in both packages: still two cores */
    expand_is(r, s, MA_SCOPE_CORE, set_of(1, 5, -1), "1,5", 2, NULL);

    node_is(r, s, 5, 1);
    node_is(r, s, 3, 0);
}

static void test_clusterpercpu(void)
{
    const char *s = "clusterpercpu", *r = tree(s);

    /* cluster == core: degenerate, the llc (here the package's CPUs) */
    unit_is(r, s, MA_SCOPE_CLUSTER, 5, MA_SCOPE_LLC, 4, "4-7");
    unit_is(r, s, MA_SCOPE_CORE, 5, MA_SCOPE_CORE, 5, "5");
    /* no die files (arm64): the package */
    unit_is(r, s, MA_SCOPE_DIE, 5, MA_SCOPE_PACKAGE, 1, "4-7");
    unit_is(r, s, MA_SCOPE_PACKAGE, 5, MA_SCOPE_PACKAGE, 1, "4-7");
    unit_is(r, s, MA_SCOPE_NODE, 5, MA_SCOPE_NODE, 1, "4-7");

    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(5, -1), "4-7", 1, NULL);
    expand_is(r, s, MA_SCOPE_CLUSTER, set_of(1, 5, -1), "0-7", 2, NULL);

    node_is(r, s, 5, 1);
    node_is(r, s, 0, 0);
}

static void test_twopkg(void)
{
    const char *s = "twopkg", *r = tree(s);

    unit_is(r, s, MA_SCOPE_PACKAGE, 0, MA_SCOPE_PACKAGE, 0, "0");
    unit_is(r, s, MA_SCOPE_PACKAGE, 1, MA_SCOPE_PACKAGE, 1, "1");
    unit_is(r, s, MA_SCOPE_DIE, 1, MA_SCOPE_PACKAGE, 1, "1");
    unit_is(r, s, MA_SCOPE_LLC, 1, MA_SCOPE_LLC, 1, "1");
    unit_is(r, s, MA_SCOPE_CLUSTER, 1, MA_SCOPE_LLC, 1, "1");
    unit_is(r, s, MA_SCOPE_CORE, 1, MA_SCOPE_CORE, 0, "1");
    unit_is(r, s, MA_SCOPE_NODE, 1, MA_SCOPE_NODE, 0, "0-1");

    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(0, -1), "0", 1, "package 0");
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(1, -1), "1", 1, "package 1");
    expand_is(r, s, MA_SCOPE_PACKAGE, set_of(0, 1, -1), "0-1", 2,
              "packages 0,1");
    expand_is(r, s, MA_SCOPE_NODE, set_of(1, -1), "0-1", 1, "node 0");
    expand_is(r, s, MA_SCOPE_LLC, set_of(0, 1, -1), "0-1", 2, NULL);
    /* both CPUs have core_id 0, in different packages */
    expand_is(r, s, MA_SCOPE_CORE, set_of(0, 1, -1), "0-1", 2, NULL);
    expand_is(r, s, MA_SCOPE_WORKER, set_of(1, -1), "1", 1, NULL);

    node_is(r, s, 0, 0);
    node_is(r, s, 1, 0);
}

static void unit_note(const char *root, const char *shape,
                      enum ma_scope level, int cpu);
static void expand_fails(const char *root, const char *shape,
                         enum ma_scope scope, cpu_set_t leader);

/* Out-of-range CPUs are errors, not crashes. */
static void test_bad_cpus(void)
{
    const char *s = "thismachine";
    char root[sizeof tmpdir + 32];
    struct ma_unit u;
    int cpus[] = {2, 1000, MA_MAX_CPUS, MA_MAX_CPUS + 1, -1, INT_MAX};

    snprintf(root, sizeof root, "%s/%s", tmpdir, s);
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++) {
        /* CPU 2 has no topology to read; the others don't fit a cpu_set_t,
         * so even the cpu level has no answer */
        int first = cpus[i] == 2 ? MA_SCOPE_CORE : MA_SCOPE_CPU;
        if (cpus[i] == 2)
            unit_note(root, s, MA_SCOPE_CPU, 2);
        for (int l = first; l < MA_SCOPE_COUNT; l++) {
            errno = 0;
            ok(ma_unit_of(root, l, cpus[i], &u) == -1 && errno != 0,
               "%s: %s of CPU %d: -1 with errno", s,
               ma_scope_name((enum ma_scope)l), cpus[i]);
        }
        node_is(root, s, cpus[i], -1);
    }
    /* a leader with a CPU the machine does not have */
    snprintf(root, sizeof root, "%s/kunpeng920", tmpdir);
    expand_fails(root, "kunpeng920", MA_SCOPE_PACKAGE, set_of(30, 100, -1));
    expand_fails(root, "kunpeng920", MA_SCOPE_CORE, set_of(30, 100, -1));
    /* a root that does not exist */
    errno = 0;
    ok(ma_unit_of("/nonexistent/sys", MA_SCOPE_PACKAGE, 0, &u) == -1 &&
           errno != 0,
       "no such root: -1 with errno");
    node_is("/nonexistent/sys", "no such root", 0, -1);
}

/* A ma_scope_expand that fails must not leave a result the caller would
 * take: the output set and the unit count are untouched or empty. */
static void expand_fails(const char *root, const char *shape,
                         enum ma_scope scope, cpu_set_t leader)
{
    struct ma_unit units[8];
    size_t n = 77;
    cpu_set_t out, sentinel = set_of(1000, -1);
    const char *sc = ma_scope_name(scope);
    char lead[64];

    snprintf(lead, sizeof lead, "%s", fmt(&leader));
    out = sentinel;
    errno = 0;
    if (!ok(ma_scope_expand(root, scope, NULL, &leader, &out, units, 8,
                            &n) == -1 &&
                errno != 0,
            "%s: %s scope of leader %s: -1 with errno", shape, sc, lead)) {
        printf("#   errno %d, out %s, %zu unit(s)\n", errno, fmt(&out), n);
        return;
    }
    printf("# %s: errno %d (%s)\n", shape, errno, strerror(errno));
    if (!ok(CPU_EQUAL(&out, &sentinel) || CPU_COUNT(&out) == 0,
            "%s: %s scope of leader %s: no partial set", shape, sc, lead))
        printf("#   out is %s\n", fmt(&out));
    if (!ok(n == 77 || n == 0, "%s: %s scope of leader %s: no partial units",
            shape, sc, lead))
        printf("#   n_units is %zu\n", n);
}

/* What an expansion gives where the header leaves the answer open. */
static void expand_note(const char *root, const char *shape,
                        enum ma_scope scope, cpu_set_t leader)
{
    struct ma_unit units[8];
    size_t n = 77;
    cpu_set_t out = set_of(1000, -1);
    char lead[64];
    int rc;

    snprintf(lead, sizeof lead, "%s", fmt(&leader));
    errno = 0;
    rc = ma_scope_expand(root, scope, NULL, &leader, &out, units, 8, &n);
    printf("# %s: %s scope of leader %s: rc %d errno %d", shape,
           ma_scope_name(scope), lead, rc, errno);
    if (rc == 0)
        printf(", CPUs %s, %zu unit(s)", fmt(&out), n);
    printf("\n");
}

/* ma_unit_of at `level` of `cpu` fails with errno set. */
static void unit_fails(const char *root, const char *shape,
                       enum ma_scope level, int cpu)
{
    struct ma_unit u;

    memset(&u, 0, sizeof u);
    errno = 0;
    if (!ok(ma_unit_of(root, level, cpu, &u) == -1 && errno != 0,
            "%s: %s of CPU %d: -1 with errno", shape, ma_scope_name(level),
            cpu))
        printf("#   errno %d, level %s, id %d, CPUs %s\n", errno,
               ma_scope_name(u.level), u.id, fmt(&u.cpus));
}

/* What a level gives where the header leaves the answer open. */
static void unit_note(const char *root, const char *shape,
                      enum ma_scope level, int cpu)
{
    struct ma_unit u;
    int rc;

    memset(&u, 0, sizeof u);
    errno = 0;
    rc = ma_unit_of(root, level, cpu, &u);
    printf("# %s: %s of CPU %d: rc %d errno %d", shape, ma_scope_name(level),
           cpu, rc, errno);
    if (rc == 0)
        printf(", level %s id %d CPUs %s", ma_scope_name(u.level), u.id,
               fmt(&u.cpus));
    printf("\n");
}

static void test_broken(void)
{
    static const enum ma_scope read_levels[] = {
        MA_SCOPE_CORE, MA_SCOPE_CLUSTER, MA_SCOPE_LLC,
        MA_SCOPE_DIE, MA_SCOPE_NODE, MA_SCOPE_PACKAGE,
    };
    const size_t nlev = sizeof read_levels / sizeof read_levels[0];
    const char *r;
    cpu_set_t both = set_of(0, 1, -1);

    /* nothing at all */
    if ((r = tree("broken-empty"))) {
        for (size_t i = 0; i < nlev; i++)
            unit_fails(r, "broken-empty", read_levels[i], 0);
        unit_note(r, "broken-empty", MA_SCOPE_CPU, 0);
        for (enum ma_scope sc = MA_SCOPE_CORE; sc < MA_SCOPE_COUNT; sc++)
            expand_fails(r, "broken-empty", sc, both);
        node_is(r, "broken-empty", 0, -1);
    }

    /* every file empty */
    if ((r = tree("broken-truncated"))) {
        for (size_t i = 0; i < nlev; i++)
            unit_fails(r, "broken-truncated", read_levels[i], 1);
        unit_note(r, "broken-truncated", MA_SCOPE_CPU, 1);
        for (enum ma_scope sc = MA_SCOPE_CORE; sc < MA_SCOPE_COUNT; sc++)
            expand_fails(r, "broken-truncated", sc, both);
        node_is(r, "broken-truncated", 1, -1);
    }

    /* package_cpus_list (and core_siblings_list) hold "x-y"; the other
     * levels are readable */
    if ((r = tree("broken-garbage"))) {
        unit_fails(r, "broken-garbage", MA_SCOPE_PACKAGE, 0);
        unit_fails(r, "broken-garbage", MA_SCOPE_PACKAGE, 1);
        expand_fails(r, "broken-garbage", MA_SCOPE_PACKAGE, both);
        expand_fails(r, "broken-garbage", MA_SCOPE_PACKAGE, set_of(1, -1));
        unit_is(r, "broken-garbage", MA_SCOPE_CORE, 1, MA_SCOPE_CORE, 1, "1");
        unit_is(r, "broken-garbage", MA_SCOPE_LLC, 1, MA_SCOPE_LLC, 0, "0-1");
        /* die: degenerate or not cannot be told without the package */
        unit_note(r, "broken-garbage", MA_SCOPE_DIE, 1);
        unit_note(r, "broken-garbage", MA_SCOPE_NODE, 1);
    }

    /* cpu1/ is gone; cpu0 and the node files are intact */
    if ((r = tree("broken-missing-cpu"))) {
        for (size_t i = 0; i < nlev; i++)
            if (read_levels[i] != MA_SCOPE_NODE)
                unit_fails(r, "broken-missing-cpu", read_levels[i], 1);
        /* node0/cpulist still lists CPU 1 */
        unit_note(r, "broken-missing-cpu", MA_SCOPE_NODE, 1);
        unit_note(r, "broken-missing-cpu", MA_SCOPE_CPU, 1);
        unit_is(r, "broken-missing-cpu", MA_SCOPE_PACKAGE, 0,
                MA_SCOPE_PACKAGE, 0, "0-1");
        for (enum ma_scope sc = MA_SCOPE_CORE; sc < MA_SCOPE_COUNT; sc++)
            expand_fails(r, "broken-missing-cpu", sc, set_of(1, -1));
        /* CPU 0 is found, then CPU 1 is not: no half result */
        expand_fails(r, "broken-missing-cpu", MA_SCOPE_CORE, both);
        /* At wider scopes CPU 0's unit already holds CPU 1, which then
         * need not be looked up: either answer is fine */
        for (enum ma_scope sc = MA_SCOPE_CLUSTER; sc < MA_SCOPE_COUNT; sc++)
            expand_note(r, "broken-missing-cpu", sc, both);
        expand_is(r, "broken-missing-cpu", MA_SCOPE_PACKAGE, set_of(0, -1),
                  "0-1", 1, "package 0");
    }
}

/* Two dies in a package: the die level is real. Without any cache
 * information the llc falls back to it. */
/* No NUMA node holds a CPU (ENOENT) is not the same as nodes that cannot
 * be read: the log line must name the real cause. */
static void test_node_errors(void)
{
    const char *r = tree("twonode");
    struct rlimit lim, tight;
    int got, err, lowest;

    if (!r)
        return;
    node_is(r, "twonode", 1, 1);
    errno = 0;
    got = ma_node_of_cpu(r, 5);
    ok(got == -1 && errno == ENOENT, "no node holds CPU 5: ENOENT (%d, %s)",
       got, strerror(errno));

    /* Room for the node directory, none for a node's cpulist. */
    lowest = dup(0);
    close(lowest);
    getrlimit(RLIMIT_NOFILE, &lim);
    tight = lim;
    tight.rlim_cur = (rlim_t)lowest + 1;
    setrlimit(RLIMIT_NOFILE, &tight);
    errno = 0;
    got = ma_node_of_cpu(r, 1);
    err = errno;
    setrlimit(RLIMIT_NOFILE, &lim);
    ok(got == -1 && err == EMFILE,
       "no descriptor to read a node's CPUs: EMFILE, not \"no node\" (%d, %s)",
       got, strerror(err));
}

static void test_multidie(void)
{
    const char *s = "multidie", *r = tree(s);

    unit_is(r, s, MA_SCOPE_DIE, 5, MA_SCOPE_DIE, 1, "4-7");
    unit_is(r, s, MA_SCOPE_PACKAGE, 5, MA_SCOPE_PACKAGE, 0, "0-7");
    unit_is(r, s, MA_SCOPE_LLC, 5, MA_SCOPE_LLC, 4, "4-7");
    unit_is(r, s, MA_SCOPE_CLUSTER, 5, MA_SCOPE_LLC, 4, "4-7");
    expand_is(r, s, MA_SCOPE_DIE, set_of(5, -1), "4-7", 1, NULL);
    expand_is(r, s, MA_SCOPE_DIE, set_of(0, 5, -1), "0-7", 2, NULL);
    node_is(r, s, 5, 0);

    s = "multidie-nocache";
    r = tree_as("multidie", s);
    if (r && !ok(run("rm -r '%s'/devices/system/cpu/cpu*/cache", r) == 0,
                 "%s: caches removed", s))
        r = NULL;
    unit_is(r, s, MA_SCOPE_LLC, 5, MA_SCOPE_DIE, 1, "4-7");
    unit_is(r, s, MA_SCOPE_CLUSTER, 5, MA_SCOPE_DIE, 1, "4-7");
    unit_is(r, s, MA_SCOPE_CORE, 5, MA_SCOPE_CORE, 5, "5");
}

/* max_units caps what is written to units[], not the expansion. */
static void test_max_units(void)
{
    char root[sizeof tmpdir + 32];
    struct ma_unit units[3];
    size_t n = 0;
    cpu_set_t out, leader = set_of(2, 60, -1);
    int rc;

    snprintf(root, sizeof root, "%s/kunpeng920", tmpdir);
    memset(units, 0xa5, sizeof units);
    rc = ma_scope_expand(root, MA_SCOPE_PACKAGE, NULL, &leader, &out, units,
                         1, &n);
    ok(rc == 0, "kunpeng920: package scope with max_units 1 succeeds");
    is_str(fmt(&out), "0-95", "kunpeng920: max_units 1: still the union");
    ok(units[1].id == (int)0xa5a5a5a5 && units[2].id == (int)0xa5a5a5a5,
       "kunpeng920: max_units 1: units[1] not written");
    printf("# kunpeng920: max_units 1: n_units %zu\n", n);

    n = 0;
    rc = ma_scope_expand(root, MA_SCOPE_PACKAGE, NULL, &leader, &out, units,
                         0, &n);
    ok(rc == 0, "kunpeng920: package scope with max_units 0 succeeds");
    is_str(fmt(&out), "0-95", "kunpeng920: max_units 0: still the union");
    printf("# kunpeng920: max_units 0: n_units %zu\n", n);
}

/* Expands leader with the units known in t (the tree may be gone):
 * want_cpus, or "" for a failure. */
static void known_is(const struct ma_topology *t, const char *root,
                     enum ma_scope scope, cpu_set_t leader,
                     const char *want_cpus, size_t want_units)
{
    struct ma_unit units[8];
    size_t n = 0;
    cpu_set_t out;
    char lead[1024];
    int rc;

    snprintf(lead, sizeof lead, "%s", fmt(&leader));
    CPU_ZERO(&out);
    rc = ma_scope_expand(root, scope, t, &leader, &out, units, 8, &n);
    if (!*want_cpus) {
        ok(rc == -1, "known units: %s scope of %s fails, as reading does",
           ma_scope_name(scope), lead);
        return;
    }
    ok(rc == 0 && n == want_units, "known units: %s scope of %s expands, "
       "%zu unit(s)", ma_scope_name(scope), lead, want_units);
    is_str(fmt(&out), want_cpus, "known units: %s scope of %s: CPUs",
           ma_scope_name(scope), lead);
}

/* A master reads the units of its own CPUs once; a worker's report is then
 * expanded without a file read, to what reading would have given. */
static void test_known(void)
{
    static struct ma_topology t;
    const char *r = tree_as("kunpeng920", "known");
    const char *m = tree_as("broken-missing-cpu", "known-missing");
    char gone[sizeof tmpdir + 32];
    cpu_set_t package0 = set_of(-1), cpus01;

    if (!r || !m)
        return;
    for (int c = 0; c < 48; c++)
        CPU_SET(c, &package0);
    ma_topology_init(&t, MA_SCOPE_CLUSTER);
    ok(ma_topology_read(r, &package0, &t) == 0 && CPU_COUNT(&t.read) == 48,
       "known units: the clusters of package 0's 48 CPUs are read");
    snprintf(gone, sizeof gone, "%s.gone", r);
    ok(rename(r, gone) == 0, "known units: the tree is moved away");

    known_is(&t, r, MA_SCOPE_CLUSTER, set_of(30, -1), "28-31", 1);
    known_is(&t, r, MA_SCOPE_CLUSTER, set_of(2, 40, -1), "0-3,40-43", 2);
    known_is(&t, r, MA_SCOPE_CLUSTER, set_of(60, -1), "", 0);
    known_is(&t, r, MA_SCOPE_PACKAGE, set_of(30, -1), "", 0);
    known_is(&t, r, MA_SCOPE_WORKER, set_of(30, -1), "30", 1);

    ma_topology_init(&t, MA_SCOPE_CLUSTER);
    ok(ma_topology_read(r, &package0, &t) == -1 && CPU_COUNT(&t.read) == 0,
       "known units: a tree that cannot be read gives none");
    ok(rename(gone, r) == 0, "known units: the tree is back");

    /* CPU 0's package lists CPU 1, whose directory is gone: CPU 1 is not
     * taken to be in it, it fails as reading it would. */
    ma_topology_init(&t, MA_SCOPE_PACKAGE);
    cpus01 = set_of(0, 1, -1);
    ok(ma_topology_read(m, &cpus01, &t) == -1 &&
           CPU_ISSET(0, &t.read) && !CPU_ISSET(1, &t.read),
       "known units: of CPUs 0 and 1 with cpu1/ gone, CPU 0's is read");
    known_is(&t, m, MA_SCOPE_PACKAGE, set_of(0, -1), "0-1", 1);
    known_is(&t, m, MA_SCOPE_PACKAGE, set_of(1, -1), "", 0);
}

/* ma_units_describe stays inside small buffers and handles no units. */
static void test_describe_small(void)
{
    struct ma_unit u[2];
    char buf[64];

    memset(u, 0, sizeof u);
    u[0].level = u[1].level = MA_SCOPE_PACKAGE;
    u[0].id = 0, u[1].id = 1;
    CPU_SET(0, &u[0].cpus);
    CPU_SET(1, &u[1].cpus);
    is_str(ma_units_describe(u, 2, buf, sizeof buf), "packages 0,1",
           "describe: two packages");
    for (size_t len = 1; len < 14; len++) {
        memset(buf, 'x', sizeof buf);
        ma_units_describe(u, 2, buf, len);
        ok(memchr(buf, '\0', len) && buf[len] == 'x',
           "describe: terminated within a buffer of %zu", len);
    }
    memset(buf, 'x', sizeof buf);
    is_str(ma_units_describe(u, 0, buf, sizeof buf), "",
           "describe: no units is the empty string");
}

/* The real /sys of the machine running the test, when it has one: every
 * level holds the CPU it was asked about. */
static void test_real_sys(void)
{
    if (access("/sys/devices/system/cpu/cpu0/topology", F_OK) < 0) {
        printf("# no /sys topology here, skipped\n");
        return;
    }
    for (int l = MA_SCOPE_CPU; l < MA_SCOPE_COUNT; l++) {
        struct ma_unit u;
        int rc = ma_unit_of("/sys", l, 0, &u);
        if (ok(rc == 0 && CPU_ISSET(0, &u.cpus), "/sys: %s of CPU 0 holds it",
               ma_scope_name((enum ma_scope)l)))
            printf("# /sys: %s of CPU 0: %s %d, CPUs %s\n",
                   ma_scope_name((enum ma_scope)l), ma_scope_name(u.level),
                   u.id, fmt(&u.cpus));
    }
}

/* Where the trees go: $TMPDIR, else /dev/shm when it is a roomy tmpfs
 * (the ~12000 small files take seconds to create on a disk), else /tmp. */
static const char *tmp_base(void)
{
    const char *t = getenv("TMPDIR");
    struct statvfs vfs;

    if (t && *t)
        return t;
    if (statvfs("/dev/shm", &vfs) == 0 &&
        (unsigned long long)vfs.f_bavail * vfs.f_frsize >= 256ULL << 20 &&
        access("/dev/shm", W_OK | X_OK) == 0)
        return "/dev/shm";
    return "/tmp";
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* system() output stays in order */
    snprintf(tmpdir, sizeof tmpdir, "%s/t_topology.XXXXXX", tmp_base());
    if (!mkdtemp(tmpdir)) {
        printf("Bail out! mkdtemp %s: %s\n", tmpdir, strerror(errno));
        return 1;
    }

    test_kunpeng920();
    test_kunpeng920_pptt();
    test_intel2s();
    test_epyc("epyc-nps1", false);
    test_epyc("epyc-nps4", true);
    test_thismachine();
    test_oldkernel();
    test_clusterpercpu();
    test_twopkg();
    test_node_errors();
    test_multidie();
    test_bad_cpus();
    test_broken();
    test_max_units();
    test_known();
    test_describe_small();
    test_real_sys();

    if (!getenv("KEEP_TREES"))
        nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    else
        printf("# trees kept in %s\n", tmpdir);
    return done_testing();
}
