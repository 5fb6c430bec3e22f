/* libmasteraff: the leader rule (see brood.h). */
#define _GNU_SOURCE
#include "brood.h"

#include <limits.h>
#include <string.h>

void ma_brood_init(struct ma_brood *b)
{
    b->n = 0;
    b->newest_gen = 0;
    b->next_rank = 0;
    b->n_deaths = 0;
    b->following = false;
    b->lead_gen = b->lead_rank = 0;
    b->lead_pid = 0;
    b->wait_until = 0;
    b->n_run_respawns = 0;
    CPU_ZERO(&b->lead_mask);
}

static void drop_death(struct ma_brood *b, size_t i)
{
    memmove(&b->deaths[i], &b->deaths[i + 1],
            (b->n_deaths - i - 1) * sizeof b->deaths[0]);
    b->n_deaths--;
}

void ma_brood_settle(struct ma_brood *b)
{
    b->n_deaths = 0;
    b->n_run_respawns = 0;
}

bool ma_brood_respawn_open(const struct ma_brood *b)
{
    return b->n_deaths || b->n_run_respawns;
}

/* The death this fork replaces, or -1 when none waits for its respawn
 * (all are of the newest generation): the lowest rank, as nginx refills
 * its slots in order. */
static long respawned_death(const struct ma_brood *b)
{
    long best = -1;
    for (size_t i = 0; i < b->n_deaths; i++)
        if (best < 0 || b->deaths[i].rank < b->deaths[best].rank)
            best = (long)i;
    return best;
}

/* Moves the children the current run of forks took for respawns to the
 * head of the generation just opened, in fork order: the fork after them
 * shows they were the first of a burst. */
static void take_back_respawns(struct ma_brood *b)
{
    for (size_t i = 0; i < b->n_run_respawns; i++) {
        struct ma_child *c = ma_brood_find_pid(b, b->run_respawns[i]);
        if (!c)
            continue;
        c->gen = b->newest_gen;
        c->rank = b->next_rank++;
        if (b->following && b->lead_pid == c->pid) {
            b->lead_gen = c->gen;
            b->lead_rank = c->rank;
        }
    }
    b->n_run_respawns = 0;
}

static void open_generation(struct ma_brood *b)
{
    b->newest_gen++;
    b->next_rank = 0;
    b->n_deaths = 0;
}

struct ma_place ma_brood_place(struct ma_brood *b, bool reread,
                               uint64_t now_ns)
{
    struct ma_place p = {.started_ns = now_ns};
    long d = respawned_death(b);
    if (reread)
        b->n_run_respawns = 0;
    if (d >= 0) {
        p.gen = b->deaths[d].gen;
        p.rank = b->deaths[d].rank;
        p.respawn = true;
        drop_death(b, (size_t)d);
        return p;
    }
    if (b->newest_gen == 0 || reread || b->n_run_respawns) {
        open_generation(b);
        take_back_respawns(b);
        p.opened = true;
    }
    p.gen = b->newest_gen;
    p.rank = b->next_rank++;
    return p;
}

struct ma_child *ma_brood_add(struct ma_brood *b, pid_t pid,
                              struct ma_place place)
{
    struct ma_child *c;
    if (b->n >= MA_MAX_CHILDREN)
        return NULL;
    c = &b->kids[b->n++];
    c->pid = pid;
    c->gen = place.gen;
    c->rank = place.rank;
    c->pinned = false;
    c->reports = 0;
    c->forked_ns = place.started_ns;
    if (place.respawn && b->n_run_respawns < MA_MAX_RECENT_DEATHS)
        b->run_respawns[b->n_run_respawns++] = pid;
    c->pinned_ns = 0;
    CPU_ZERO(&c->mask);
    return c;
}

struct ma_child *ma_brood_find_pid(struct ma_brood *b, pid_t pid)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->kids[i].pid == pid)
            return &b->kids[i];
    return NULL;
}

void ma_brood_pinned(struct ma_brood *b, struct ma_child *c,
                     const struct ma_report *r)
{
    (void)b;
    c->pinned = true;
    c->mask = r->mask;
    c->pinned_ns = r->sent_ns;
    c->reports++;
}

void ma_brood_forget(struct ma_brood *b, struct ma_child *c)
{
    if (b->following && c->pid == b->lead_pid)
        b->lead_pid = 0;
    *c = b->kids[--b->n];
}

void ma_brood_died(struct ma_brood *b, struct ma_child *c)
{
    struct ma_death d = {c->pid, c->gen, c->rank};
    if (c->gen == b->newest_gen) {
        if (b->n_deaths == MA_MAX_RECENT_DEATHS)
            drop_death(b, 0);
        b->deaths[b->n_deaths++] = d;
    }
    ma_brood_forget(b, c);
}

bool ma_brood_gen_pinned(const struct ma_brood *b, unsigned gen)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->kids[i].gen == gen && b->kids[i].pinned)
            return true;
    return false;
}

/* The pinned child of the lowest rank in generation gen, or NULL. */
static struct ma_child *first_pinned_of(struct ma_brood *b, unsigned gen)
{
    struct ma_child *best = NULL;
    for (size_t i = 0; i < b->n; i++) {
        struct ma_child *c = &b->kids[i];
        if (c->pinned && c->gen == gen && (!best || c->rank < best->rank))
            best = c;
    }
    return best;
}

/* Whether a child of a generation from lo to hi, ranked below below_rank,
 * died and waits for its respawn. */
static bool respawn_due(const struct ma_brood *b, unsigned lo, unsigned hi,
                        unsigned below_rank)
{
    for (size_t i = 0; i < b->n_deaths; i++)
        if (b->deaths[i].gen >= lo && b->deaths[i].gen <= hi &&
            b->deaths[i].rank < below_rank)
            return true;
    return false;
}

/* Whether generation gen still has its worker 0: alive, or dead and
 * waiting for its respawn. */
static bool keeps_first(const struct ma_brood *b, unsigned gen)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->kids[i].gen == gen && b->kids[i].rank == 0)
            return true;
    return respawn_due(b, gen, gen, 1);
}

/* Whether the leader slot may be in generation gen: the one followed, or
 * one that still has its worker 0. A generation that lost it for good is
 * an older reload's, on its way out: its worker 1 is no worker 0. */
static bool may_lead(const struct ma_brood *b, unsigned gen)
{
    return (b->following && gen == b->lead_gen) || keeps_first(b, gen);
}

/* The oldest generation after `after` with a live pinned child, or 0. */
static unsigned next_pinned_gen(const struct ma_brood *b, unsigned after)
{
    unsigned gen = 0;
    for (size_t i = 0; i < b->n; i++) {
        const struct ma_child *c = &b->kids[i];
        if (c->pinned && c->gen > after && (gen == 0 || c->gen < gen))
            gen = c->gen;
    }
    return gen;
}

/* The oldest generation the slot may be in with a live pinned child, or
 * 0. Few generations live at once: the ones passed over are few. */
static unsigned oldest_pinned_gen(const struct ma_brood *b)
{
    unsigned gen = next_pinned_gen(b, 0);
    while (gen && !may_lead(b, gen))
        gen = next_pinned_gen(b, gen);
    return gen;
}

bool ma_brood_gen_lives(const struct ma_brood *b, unsigned gen)
{
    for (size_t i = 0; i < b->n; i++)
        if (b->kids[i].gen >= gen)
            return true;
    return false;
}

static void lead(struct ma_brood *b, const struct ma_child *c)
{
    b->following = true;
    b->lead_gen = c->gen;
    b->lead_rank = c->rank;
    b->lead_mask = c->mask;
    b->lead_pid = c->pid;
}

/* When a live child of a generation from lo to hi, ranked below
 * below_rank, has not pinned yet: the time until which to wait for it, or
 * 0 once it has been given up on. One that died before it pinned is
 * respawned in the wake-up that reaped it: its respawn is waited for as
 * long, in case nginx does not respawn it. */
static uint64_t wait_for_unpinned(const struct ma_brood *b, unsigned lo,
                                  unsigned hi, unsigned below_rank,
                                  uint64_t now_ns)
{
    uint64_t until = 0;
    if (respawn_due(b, lo, hi, below_rank))
        return now_ns + MA_GIVE_UP_NS;
    for (size_t i = 0; i < b->n; i++) {
        const struct ma_child *s = &b->kids[i];
        uint64_t t = s->forked_ns + MA_GIVE_UP_NS;
        if (s->gen >= lo && s->gen <= hi && s->rank < below_rank &&
            !s->pinned && t > now_ns && t > until)
            until = t;
    }
    return until;
}

/* A lower-ranked sibling of c that may still pin. */
static uint64_t wait_for_sibling(const struct ma_brood *b,
                                 const struct ma_child *c, uint64_t now_ns)
{
    return wait_for_unpinned(b, c->gen, c->gen, c->rank, now_ns);
}

/* A newer generation's worker 0 that may still pin: on a busy machine the
 * old workers can be gone before it runs. */
static uint64_t wait_for_newer_first(const struct ma_brood *b, uint64_t now_ns)
{
    return wait_for_unpinned(b, b->lead_gen + 1, UINT_MAX, 1, now_ns);
}

enum ma_verdict ma_brood_decide(struct ma_brood *b, uint64_t now_ns)
{
    unsigned gen = oldest_pinned_gen(b);
    struct ma_child *first;
    bool same_slot;

    b->wait_until = 0;
    if (gen == 0) {
        if (b->following && ma_brood_gen_lives(b, b->lead_gen + 1)) {
            b->wait_until = wait_for_newer_first(b, now_ns);
            if (b->wait_until)
                return MA_WAIT;
            b->following = false;
            b->lead_pid = 0;
            return MA_RESTORE;
        }
        return b->following ? MA_FOLLOW : MA_HOLD;
    }
    first = first_pinned_of(b, gen);
    same_slot = b->following && b->lead_gen == gen;
    if (same_slot && first->rank > b->lead_rank)
        return MA_FOLLOW;
    if (!(same_slot && first->rank == b->lead_rank)) {
        b->wait_until = wait_for_sibling(b, first, now_ns);
        if (b->wait_until)
            return MA_WAIT;
    }
    lead(b, first);
    return MA_FOLLOW;
}
