/* libmasteraff: the leader rule. A master's children (its brood), and
 * which one it follows, from the order of its forks, its children's pins
 * and their deaths.
 *
 * Pure logic: no process state, no globals. Everything here is testable
 * with made-up fork/pin/death sequences (test/t_brood.c). */
#ifndef MASTERAFF_BROOD_H
#define MASTERAFF_BROOD_H

#include "report.h"

#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* nginx caps its process table at 1024 (NGX_MAX_PROCESSES). */
#define MA_MAX_CHILDREN 1024

/* The rule goes by the order of what the master sees, never by the time
 * between: on a busy machine, or in a container stalled by its CPU quota,
 * two forks of one burst can come hundreds of milliseconds apart, and a
 * respawn long after the death it replaces.
 *
 * A death is a child the master reaped (collected its exit status):
 * nginx reaps a dead child in its SIGCHLD handler, and forks its
 * replacement right after, with nothing read in between.
 *
 * Children are grouped in generations (nginx: one start or reload each),
 * each ranked in fork order (worker 0 has rank 0). A fork is, in this
 * order:
 *
 * 1. a respawn, when a child of the newest generation was reaped and no
 *    fork has replaced it yet. It takes the dead child's generation and
 *    rank, pinned or not (the cache manager never pins, and keeps its
 *    place): the lowest rank first, as nginx refills its process slots in
 *    order, and a generation's slots follow its ranks;
 * 2. the first of a new generation, when the caller says the master read
 *    its configuration since its previous fork (reread), or at the
 *    master's first fork;
 * 3. the next of the newest generation's burst otherwise. But a respawn is
 *    one fork for one death, and nginx forks nothing after its respawns
 *    without reading: a fork that finds no death to replace, with nothing
 *    read since forks taken for respawns (the run), shows those were the
 *    first forks of a burst (a reload after deaths nginx does not
 *    replace: the cache loader's exit, a worker's fatal exit). They all
 *    move into a new generation, in fork order, and this fork follows.
 *
 * The caller tells a new burst by what the master did in between. A
 * master that sleeps in sigsuspend (nginx) does all of a start's or a
 * reload's forks within one wake-up, and replaces a child in the wake-up
 * that reaped it, before a reload's forks: its first fork after a wake-up
 * is reread, and each wake-up settles the deaths and respawns before it
 * (ma_brood_woke). Where the master read files since a reap, or since a
 * respawn, that death is not replaced and that respawn was one (the caller
 * settles them too); where the kernel keeps no I/O counts, a respawn and a
 * reload in one wake-up look like one burst, and the respawned child is
 * counted in the reload's generation. Other masters (uWSGI) count the
 * files their forking thread read between forks.
 *
 * The leader slot is the lowest-ranked child that has pinned in the oldest
 * generation that still has a live pinned child: the master keeps following
 * the old workers until they are all gone, and a respawned worker 0 takes
 * its own place back. A generation that lost its worker 0 for good (dead,
 * no respawn waiting) is passed over unless the slot is in it already:
 * reloads faster than the old workers leave make generations that are on
 * their way out before the slot reaches them, and their worker 1 is no
 * worker 0. While the leader's process is dead, the master
 * holds on to its last mask as long as its generation has another pinned
 * child, or no newer generation lives. When no live child is pinned and a
 * newer generation than the followed one lives, the master waits for that
 * generation's worker 0 (on a busy machine the old workers can be gone
 * before it runs), or for its respawn when it died before it pinned, and
 * returns to its original mask once it is given up (a death the wake-up
 * did not replace is given up at once).
 *
 * Workers pin themselves in whatever order the scheduler runs them. Rather
 * than follow worker 1 for a moment, the master waits for a lower-ranked
 * sibling that lives and has not pinned yet, or for the respawn of one
 * that died before it pinned; the one time limit: it gives up on it, as
 * on a newer generation's worker 0, MA_GIVE_UP_NS after its fork (a
 * worker 0 that cannot pin itself, or a reload that removed
 * worker_cpu_affinity), or after the last decision while its respawn is
 * due. Holding a dead leader's slot is never given up by time otherwise. */

#define MA_GIVE_UP_NS (3000 * 1000 * 1000ULL)
#define MA_MAX_RECENT_DEATHS 64
/* A worker pins itself once or twice; a child that keeps reporting is
 * broken or hostile, and is no longer listened to. */
#define MA_MAX_REPORTS 16

struct ma_child {
    pid_t pid;
    unsigned gen;
    unsigned rank;
    bool pinned;
    cpu_set_t mask;    /* the last mask it reported */
    unsigned reports;  /* valid reports so far */
    uint64_t forked_ns; /* when its fork was asked for: it cannot pin before */
    uint64_t pinned_ns; /* when it last pinned, by its own clock reading */
};

/* A child of the newest generation the master reaped, not replaced yet. */
struct ma_death {
    pid_t pid;
    unsigned gen;
    unsigned rank;
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
    /* The children taken for respawns since the forking thread last read
     * a file (the current run of forks), in fork order. */
    pid_t run_respawns[MA_MAX_RECENT_DEATHS];
    size_t n_run_respawns;
};

struct ma_place {
    unsigned gen, rank;
    uint64_t started_ns; /* when the fork was asked for */
    bool respawn;
    bool opened; /* the fork opened its generation (its first, or the one
                    after forks taken back from respawns) */
};

enum ma_verdict {
    MA_HOLD,    /* change nothing */
    MA_FOLLOW,  /* follow lead_mask of lead_pid (or the held slot) */
    MA_RESTORE, /* back to the original mask */
    MA_WAIT,    /* decide again at wait_until, or at the next event */
};

void ma_brood_init(struct ma_brood *b);

/* The master woke from its sleep, or read files since a reap or a
 * respawn: the deaths before are not replaced, and the forks taken for
 * respawns were respawns. */
void ma_brood_settle(struct ma_brood *b);

/* Whether a death waits for its respawn, or forks were taken for
 * respawns since the master last read: a fork then asks whether it read. */
bool ma_brood_respawn_open(const struct ma_brood *b);

/* Decides the generation and rank of a child about to be forked at now_ns;
 * reread: the forking thread read a file since the previous fork. Call
 * once per fork, before it. */
struct ma_place ma_brood_place(struct ma_brood *b, bool reread,
                               uint64_t now_ns);

/* Records a child whose fork returned. Returns its entry, or NULL when the
 * table is full. */
struct ma_child *ma_brood_add(struct ma_brood *b, pid_t pid,
                              struct ma_place place);

struct ma_child *ma_brood_find_pid(struct ma_brood *b, pid_t pid);

/* A child reported that it pinned itself to mask. */
void ma_brood_pinned(struct ma_brood *b, struct ma_child *c,
                     const struct ma_report *r);

/* The master reaped a child. Removes it from the table. */
void ma_brood_died(struct ma_brood *b, struct ma_child *c);

/* Stops listening to a child that broke the protocol; unlike a death, this
 * is no cue for a respawn. Removes it from the table. */
void ma_brood_forget(struct ma_brood *b, struct ma_child *c);

/* Whether a live child of generation gen has pinned itself. */
bool ma_brood_gen_pinned(const struct ma_brood *b, unsigned gen);

/* Whether a child of generation gen, or of a newer one, lives. */
bool ma_brood_gen_lives(const struct ma_brood *b, unsigned gen);

/* Re-evaluates the leader after any of the events above. MA_FOLLOW means
 * b->lead_mask is the mask to follow, b->lead_pid its process (0 when held
 * from a dead one). The verdict does not say whether anything changed:
 * the caller compares the resulting placement with the current one. */
enum ma_verdict ma_brood_decide(struct ma_brood *b, uint64_t now_ns);

#endif
