/* libmasteraff: cpulists, topology and scopes.
 *
 * Pure logic: no process state, no globals. Everything here is testable
 * with fake sysfs trees. The leader rule is in brood.h, the reports a
 * child sends in report.h. */
#ifndef MASTERAFF_AFFINITY_H
#define MASTERAFF_AFFINITY_H

#include <sched.h>
#include <stddef.h>

/* The largest CPU number + 1 we handle: glibc's cpu_set_t, which is what
 * nginx and most programs hand to sched_setaffinity. */
#define MA_MAX_CPUS CPU_SETSIZE

/* ---- cpulists: the kernel's "0-3,8,10-11" syntax ---- */

/* Parses s (a trailing newline is allowed) into *out. Returns 0, or -1 with
 * errno EINVAL (syntax) or ERANGE (a CPU >= MA_MAX_CPUS). *out is only
 * written on success. An empty list is EINVAL. */
int ma_cpulist_parse(const char *s, cpu_set_t *out);

/* Writes set as a cpulist into buf. Returns the length, or -1 with errno
 * ENOSPC when buf is too small (buf then holds a truncated, terminated
 * list). An empty set is written as "none". */
int ma_cpulist_format(const cpu_set_t *set, char *buf, size_t len);

/* ma_cpulist_format for a log line: returns buf. */
const char *ma_cpulist_text(const cpu_set_t *set, char *buf, size_t len);

/* The first CPU in set, or -1 when it is empty. */
int ma_cpuset_first(const cpu_set_t *set);

/* nginx's "worker_cpu_affinity auto" within the allowed CPUs: for asked,
 * one of the CPUs auto deals out (auto_cpus, worker i the i-th, wrapping),
 * the allowed CPU of the same rank, wrapping. -1 when asked is not one of
 * auto's CPUs, or when auto's CPUs are all allowed (nginx's rule works),
 * or none is. */
int ma_auto_cpu(const cpu_set_t *auto_cpus, const cpu_set_t *allowed,
                const cpu_set_t *asked);

/* ---- scopes and topology ---- */

enum ma_scope {
    MA_SCOPE_WORKER, /* exactly the leader's CPUs */
    MA_SCOPE_CPU,
    MA_SCOPE_CORE,
    MA_SCOPE_CLUSTER,
    MA_SCOPE_LLC,
    MA_SCOPE_DIE,
    MA_SCOPE_NODE,
    MA_SCOPE_PACKAGE,
    MA_SCOPE_COUNT
};

/* Returns 0 and sets *out, or -1 for an unknown name. */
int ma_scope_parse(const char *name, enum ma_scope *out);
const char *ma_scope_name(enum ma_scope scope);
/* "package, die, node, llc, cluster, core, cpu, worker" */
const char *ma_scope_choices(void);

/* One topology unit: its level (after fallback), its id and its CPUs. */
struct ma_unit {
    enum ma_scope level;
    int id; /* package/die/cluster/core id, node number, or for llc and cpu
               the first CPU of the unit */
    cpu_set_t cpus;
};

/* Finds the unit at `level` that holds `cpu`, reading sysfs below `root`
 * (normally "/sys"). A level that the kernel does not report, or reports as
 * degenerate (a cluster that is just the core, a die that is the whole
 * package), falls back to the next wider one: cluster -> llc -> die ->
 * package, and node -> package. Returns 0, or -1 with errno set when the
 * topology of that CPU cannot be read at all. */
int ma_unit_of(const char *root, enum ma_scope level, int cpu,
               struct ma_unit *out);

/* Each CPU's own unit at one scope, read ahead of need. */
struct ma_topology {
    enum ma_scope scope;
    cpu_set_t read; /* the CPUs whose unit is in units[cpu] */
    struct ma_unit units[MA_MAX_CPUS];
};

/* Empties t, for units at `scope`. */
void ma_topology_init(struct ma_topology *t, enum ma_scope scope);

/* Reads into t the unit of each CPU of `cpus`. Returns 0, or -1 with errno
 * as ma_unit_of for the first CPU whose unit cannot be read (the others
 * are kept). */
int ma_topology_read(const char *root, const cpu_set_t *cpus,
                     struct ma_topology *t);

/* The scope expansion: union of the units at `scope` holding each CPU of
 * `leader`. Units found are appended to units[] (at most max_units, distinct
 * ones only) and counted in *n_units. Returns 0, or -1 with errno when some
 * CPU's topology cannot be read; a CPU inside a unit already found is not
 * looked up again, nor one whose unit `known` holds (may be NULL). */
int ma_scope_expand(const char *root, enum ma_scope scope,
                    const struct ma_topology *known, const cpu_set_t *leader,
                    cpu_set_t *out, struct ma_unit *units, size_t max_units,
                    size_t *n_units);

/* The master's place for a leader on CPUs lead (within original): the
 * union of their units at `scope`, within original, into *target, and
 * those units described into units. Returns 0, or -1 with errno as
 * ma_scope_expand. */
int ma_place_for(const char *root, enum ma_scope scope,
                 const struct ma_topology *known, const cpu_set_t *lead,
                 const cpu_set_t *original, cpu_set_t *target, char *units,
                 size_t len);

/* Describes the units as "package 0", "packages 0,1", "node 3", "CPU 30",
 * "CPUs 2,60", "llc 24-47" into buf; returns buf. */
const char *ma_units_describe(const struct ma_unit *units, size_t n,
                              char *buf, size_t len);

/* Node number of `cpu` from the node directories under root, or -1 with
 * errno: ENOENT when no node holds it, or why the nodes could not be read
 * (EMFILE, say). */
int ma_node_of_cpu(const char *root, int cpu);
/* The node a worker's memory belongs on: its first CPU's. One rule for the
 * placement at start and for following. */
int ma_node_of_worker(const char *root, const cpu_set_t *worker);

#endif
