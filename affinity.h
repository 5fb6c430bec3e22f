/* libmasteraff: topology, scope and leader choice.
 *
 * Pure logic: no process state, no globals. Everything here is testable
 * with fake sysfs trees and made-up fork/pin/death sequences. */
#ifndef MASTERAFF_AFFINITY_H
#define MASTERAFF_AFFINITY_H

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The largest CPU number + 1 we handle: glibc's cpu_set_t, which is what
 * nginx and most programs hand to sched_setaffinity. */
#define MA_MAX_CPUS CPU_SETSIZE

/* nginx caps its process table at 1024 (NGX_MAX_PROCESSES). */
#define MA_MAX_CHILDREN 1024

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

/* ---- reports: what a child sends its parent when it pins itself ---- */

#define MA_REPORT_MAGIC 0x4646414du /* "MAFF" */
#define MA_REPORT_VERSION 1
#define MA_REPORT_SIZE (16 + sizeof(cpu_set_t))

struct ma_report {
    uint64_t sent_ns; /* CLOCK_MONOTONIC when the child had pinned */
    cpu_set_t mask;   /* the child's mask after its pin */
};

/* Writes r into buf (MA_REPORT_SIZE bytes). */
void ma_report_encode(const struct ma_report *r, unsigned char *buf);

/* Decodes len bytes from an untrusted child. Returns 0, or -1 with errno
 * EBADMSG for anything but a well-formed report of a non-empty mask. */
int ma_report_decode(const void *buf, size_t len, struct ma_report *out);

/* ---- the brood: a master's children, and which one it follows ----
 *
 * The rule goes by the order of what the master sees, never by the time
 * between: on a busy machine, or in a container stalled by its CPU quota,
 * two forks of one burst can come hundreds of milliseconds apart, and a
 * respawn long after the death it replaces.
 *
 * Children are grouped in generations (nginx: one start or reload each),
 * each ranked in fork order (worker 0 has rank 0). A fork is, in this
 * order:
 *
 * 1. a respawn, when a child of the newest generation has died and been
 *    reaped by the master, and no fork has replaced it yet: nginx reaps a
 *    dead worker before it forks the replacement, so a child whose end
 *    the master has not yet collected is never replaced by this fork. It
 *    takes the dead child's generation and rank: children that had pinned
 *    first, then the lowest rank. After a file read (see 2) only a child
 *    that had pinned is replaced: nginx's cache loader exits when done and
 *    is never replaced, and a reload's first fork is no respawn of it;
 * 2. the first of a new generation, when the forking thread read a file
 *    since the master's previous fork returned (nginx re-reads its
 *    configuration before it forks a reload's workers, and reads nothing
 *    between two forks of a burst), or at the master's first fork;
 * 3. the next of the newest generation's burst otherwise. But a respawn is
 *    one fork for one death: when such a fork follows one taken for a
 *    respawn with no file read in between, that one was no respawn but the
 *    first fork of a burst (a reload after a death nginx does not
 *    replace): both move into a new generation, it first.
 *
 * The leader slot is the lowest-ranked child that has pinned in the oldest
 * generation that still has a live pinned child: the master keeps following
 * the old workers until they are all gone, and a respawned worker 0 takes
 * its own place back. While the leader's process is dead, the master
 * holds on to its last mask as long as its generation has another pinned
 * child, or no newer generation lives. When no live child is pinned and a
 * newer generation than the followed one lives, the master returns to its
 * original mask.
 *
 * Workers pin themselves in whatever order the scheduler runs them. Rather
 * than follow worker 1 for a moment, the master waits for a lower-ranked
 * sibling that lives and has not pinned yet; the one time limit: it gives
 * up on it MA_GIVE_UP_NS after that sibling's fork (a worker 0 that cannot
 * pin itself). Holding a dead leader's slot is never given up by time. */

#define MA_GIVE_UP_NS (3000 * 1000 * 1000ULL)
#define MA_MAX_RECENT_DEATHS 64
/* A worker pins itself once or twice; a child that keeps reporting is
 * broken or hostile, and is no longer listened to. */
#define MA_MAX_REPORTS 16

struct ma_child {
    pid_t pid;
    int fd;            /* the master's end of this child's channel, or -1 */
    dev_t fd_dev;      /* which file fd is, set by the caller: the program */
    ino_t fd_ino;      /* may reuse the number once it closed ours */
    unsigned gen;
    unsigned rank;
    bool pinned;
    cpu_set_t mask;    /* the last mask it reported */
    unsigned reports;  /* valid reports so far */
    uint64_t forked_ns; /* when its fork was asked for: it cannot pin before */
    uint64_t pinned_ns; /* when it last pinned, by its own clock reading */
};

/* A child of the newest generation whose channel ended, not replaced yet. */
struct ma_death {
    pid_t pid;
    unsigned gen;
    unsigned rank;
    bool pinned; /* it had pinned itself */
    bool reaped; /* the master has collected its exit status */
};

struct ma_brood {
    struct ma_child kids[MA_MAX_CHILDREN];
    size_t n;
    unsigned newest_gen;    /* gen of the latest non-respawn fork; 0: none */
    unsigned next_rank;     /* next rank within newest_gen */
    struct ma_death deaths[MA_MAX_RECENT_DEATHS];
    size_t n_deaths;
    bool following;         /* a leader slot is set */
    unsigned lead_gen, lead_rank;
    cpu_set_t lead_mask;    /* last mask seen in the leader slot */
    pid_t lead_pid;         /* its process, or 0 while it is dead */
    uint64_t wait_until;    /* with MA_WAIT: when to decide again */
    pid_t respawn_pid;      /* the previous fork's child, if a respawn */
};

struct ma_place {
    unsigned gen, rank;
    uint64_t started_ns; /* when the fork was asked for */
    bool respawn;
    bool opened; /* the fork opened its generation (its first, or second
                    after a fork taken back from a respawn) */
};

enum ma_verdict {
    MA_HOLD,    /* change nothing */
    MA_FOLLOW,  /* follow lead_mask of lead_pid (or the held slot) */
    MA_RESTORE, /* back to the original mask */
    MA_WAIT,    /* decide again at wait_until, or at the next event */
};

void ma_brood_init(struct ma_brood *b);

/* Marks the deaths whose process is reaped (reaped(pid) true: its exit
 * status collected by the program). Call before ma_brood_place. */
void ma_brood_check_reaped(struct ma_brood *b, bool (*reaped)(pid_t));

/* Decides the generation and rank of a child about to be forked at now_ns;
 * reread: the forking thread read a file since the previous fork. Call
 * once per fork, before it. */
struct ma_place ma_brood_place(struct ma_brood *b, bool reread,
                               uint64_t now_ns);

/* Records a child whose fork returned. Returns its entry, or NULL when the
 * table is full. */
struct ma_child *ma_brood_add(struct ma_brood *b, pid_t pid, int fd,
                              struct ma_place place);

struct ma_child *ma_brood_find_fd(struct ma_brood *b, int fd);
struct ma_child *ma_brood_find_pid(struct ma_brood *b, pid_t pid);

/* A child reported that it pinned itself to mask. */
void ma_brood_pinned(struct ma_brood *b, struct ma_child *c,
                     const struct ma_report *r);

/* A child is gone (its channel closed). Removes it from the table. */
void ma_brood_died(struct ma_brood *b, struct ma_child *c);

/* Stops listening to a child that broke the protocol; unlike a death, this
 * is no cue for a respawn. Removes it from the table. */
void ma_brood_forget(struct ma_brood *b, struct ma_child *c);

/* Whether a live child of generation gen has pinned itself. */
bool ma_brood_gen_pinned(const struct ma_brood *b, unsigned gen);

/* The child whose channel the leader choice can best do without, or NULL
 * when there is none: higher ranks before first children (a child leads
 * only once every lower rank is gone), and within each, the oldest
 * generation first, so the newest generation's first child goes last. */
struct ma_child *ma_brood_least_needed(struct ma_brood *b);

/* Re-evaluates the leader after any of the events above. MA_FOLLOW means
 * b->lead_mask is the mask to follow, b->lead_pid its process (0 when held
 * from a dead one). The verdict does not say whether anything changed:
 * the caller compares the resulting placement with the current one. */
enum ma_verdict ma_brood_decide(struct ma_brood *b, uint64_t now_ns);

#endif
