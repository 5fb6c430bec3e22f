/* The leader choice over made-up fork, pin and death sequences, in the
 * order nginx makes them; the times say when, and must not matter. */
#define _GNU_SOURCE
#include "affinity.h"
#include "brood.h"
#include "test/tap.h"

#define MS (1000 * 1000ULL)

static struct ma_brood b;

/* The place the last fork was given. */
static struct ma_place last_place;

static void forked(pid_t pid, bool reread, uint64_t t_ms)
{
    last_place = ma_brood_place(&b, reread, t_ms * MS);
    ma_brood_add(&b, pid, last_place);
}

/* A fork with nothing read since the previous one: the next of a burst,
 * or a respawn. */
static void fork_at(pid_t pid, uint64_t t_ms)
{
    forked(pid, false, t_ms);
}

/* The first fork after the master read its configuration again. */
static void reload_at(pid_t pid, uint64_t t_ms)
{
    forked(pid, true, t_ms);
}

static void pin_at(pid_t pid, int cpu, uint64_t t_ms)
{
    struct ma_report r = {.sent_ns = t_ms * MS};
    CPU_ZERO(&r.mask);
    CPU_SET(cpu, &r.mask);
    ma_brood_pinned(&b, ma_brood_find_pid(&b, pid), &r);
}

/* A child dies and the master reaps it, as nginx does at once. */
static void die_at(pid_t pid, uint64_t t_ms)
{
    (void)t_ms;
    ma_brood_died(&b, ma_brood_find_pid(&b, pid));
}

/* The master wakes: the deaths it did not replace stay so. */
static void wake(void)
{
    ma_brood_settle(&b);
}

/* "follow PID on CPU", "hold on CPU", "restore", "wait" or "nothing". */
static const char *decide_at(uint64_t t_ms)
{
    static char buf[64];
    switch (ma_brood_decide(&b, t_ms * MS)) {
    case MA_FOLLOW:
        if (b.lead_pid)
            snprintf(buf, sizeof buf, "follow %d on %d", b.lead_pid,
                     ma_cpuset_first(&b.lead_mask));
        else
            snprintf(buf, sizeof buf, "hold on %d",
                     ma_cpuset_first(&b.lead_mask));
        return buf;
    case MA_RESTORE:
        return "restore";
    case MA_WAIT:
        return "wait";
    case MA_HOLD:
        return "nothing";
    }
    return "?";
}

static void place_is(pid_t pid, unsigned gen, unsigned rank, const char *what)
{
    struct ma_child *c = ma_brood_find_pid(&b, pid);
    ok(c && c->gen == gen && c->rank == rank, "%s: generation %u rank %u",
       what, gen, rank);
    if (c && (c->gen != gen || c->rank != rank))
        printf("#   got generation %u rank %u\n", c->gen, c->rank);
}

/* nginx at start: workers 10 and 11, cache manager 12, loader 13. */
static void start(void)
{
    ma_brood_init(&b);
    fork_at(10, 0);
    fork_at(11, 1);
    fork_at(12, 2);
    fork_at(13, 3);
}

/* nginx started with worker_cpu_affinity 10 01, both workers pinned. */
static void start_pinned(void)
{
    start();
    pin_at(10, 1, 5);
    pin_at(11, 0, 5);
    decide_at(6);
}

static void test_start(void)
{
    start();
    is_str(decide_at(4), "nothing", "nothing to follow before a pin");
    pin_at(11, 0, 5);
    is_str(decide_at(5), "wait", "worker 1 pinned first: wait for worker 0");
    ok(b.wait_until == 3000 * MS, "until 3 s after worker 0's fork");
    pin_at(10, 1, 6);
    is_str(decide_at(6), "follow 10 on 1", "then follow worker 0");
    place_is(13, 1, 3, "the loader is in the first burst");

    start();
    pin_at(11, 0, 5);
    is_str(decide_at(5), "wait", "worker 0 has not pinned");
    is_str(decide_at(2999), "wait", "still waiting for it 3 s later, less 1 ms");
    is_str(decide_at(3001), "follow 11 on 0",
           "a worker 0 that never pins is given up 3 s after its fork");
    pin_at(10, 1, 3050);
    is_str(decide_at(3050), "follow 10 on 1",
           "and followed when it pins after all");

    start();
    is_str(decide_at(200), "nothing", "no pin at all: nothing");
}

static void test_respawn(void)
{
    start_pinned();
    die_at(10, 1000);
    is_str(decide_at(1000), "hold on 1",
           "worker 0 dead: hold its CPU, do not follow worker 1");
    fork_at(20, 1001);
    place_is(20, 1, 0, "the replacement takes worker 0's place");
    is_str(decide_at(1002), "hold on 1", "still holding before it pins");
    pin_at(20, 1, 1003);
    is_str(decide_at(1003), "follow 20 on 1", "the new worker 0 leads");

    die_at(11, 2000);
    fork_at(21, 2000);
    place_is(21, 1, 1, "a respawned worker 1 takes rank 1");
    pin_at(21, 0, 2001);
    is_str(decide_at(2001), "follow 20 on 1", "and does not lead");

    /* worker_processes 1: nothing else pinned while worker 0 is dead */
    ma_brood_init(&b);
    fork_at(10, 0);
    fork_at(12, 1);
    pin_at(10, 1, 2);
    decide_at(2);
    die_at(10, 500);
    is_str(decide_at(500), "hold on 1",
           "single worker dead: hold, do not go back to the original mask");
    fork_at(30, 501);
    pin_at(30, 1, 502);
    is_str(decide_at(502), "follow 30 on 1", "its replacement leads");

    start();
    pin_at(10, 1, 5);
    decide_at(5);
    die_at(10, 1000);
    is_str(decide_at(60000), "hold on 1",
           "a minute later the dead worker 0's place is still held");
    fork_at(40, 60000);
    place_is(40, 1, 0, "a fork long after a death is its respawn all the same");
}

/* A reload: new workers 20 (CPU 0) and 21 (CPU 1) forked at 5000 ms while
 * the old ones (10 on CPU 1, 11 on CPU 0) are alive. */
static void reload(void)
{
    start_pinned();
    reload_at(20, 5000);
    fork_at(21, 5000);
    fork_at(22, 5001);
    pin_at(20, 0, 5002);
    pin_at(21, 1, 5002);
}

static void test_reload(void)
{
    reload();
    place_is(20, 2, 0, "the reload's first fork opens generation 2");
    is_str(decide_at(5003), "follow 10 on 1",
           "old workers alive: keep following the old worker 0");
    die_at(10, 5100);
    is_str(decide_at(5100), "hold on 1",
           "old worker 0 gone first: hold while old worker 1 lives");
    die_at(11, 5101);
    is_str(decide_at(5101), "follow 20 on 0",
           "old workers gone: follow the new worker 0");

    reload();
    die_at(11, 5100);
    is_str(decide_at(5100), "follow 10 on 1", "old worker 1 gone first");
    die_at(10, 5101);
    is_str(decide_at(5101), "follow 20 on 0",
           "then old worker 0: follow the new worker 0, not the new worker 1 "
           "that has its mask");

    reload();
    die_at(10, 5100);
    die_at(11, 5101);
    decide_at(5101);
    reload_at(30, 5400);
    place_is(30, 3, 0,
             "a reload soon after old workers died opens a new generation");
}


/* A child dies, nginx respawns it at once, and 20 ms later a reload forks
 * new workers 30 (CPU 0) and 31 (CPU 1), a cache manager and a loader. */
static void death_then_reload(pid_t dead, pid_t respawned)
{
    start_pinned();
    die_at(dead, 1000);
    fork_at(respawned, 1001);
    if (dead == 10)
        pin_at(respawned, 1, 1002);
    if (dead == 11)
        pin_at(respawned, 0, 1002);
    decide_at(1002);
    reload_at(30, 1021);
    fork_at(31, 1021);
    fork_at(32, 1022);
    fork_at(33, 1022);
    pin_at(30, 0, 1023);
    pin_at(31, 1, 1023);
}

/* The old generation's children exit in any order: once they are all
 * gone the master follows the new worker 0. */
static void old_ones_leave(const pid_t *old, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (ma_brood_find_pid(&b, old[i]))
            die_at(old[i], 1200 + i);
        decide_at(1200 + i);
    }
    is_str(decide_at(1300), "follow 30 on 0", what);
}

static void test_reload_after_death(void)
{
    const pid_t old[] = {11, 12, 13, 10, 20};

    death_then_reload(11, 20);
    place_is(20, 1, 1, "worker 1 killed: its respawn takes rank 1");
    place_is(30, 2, 0, "a reload 20 ms later opens generation 2");
    place_is(31, 2, 1, "and its burst stays in it");
    is_str(decide_at(1024), "follow 10 on 1", "old worker 0 still leads");
    old_ones_leave(old, 5, "worker 1 killed, then a reload: the new worker 0 "
                           "leads once the old ones are gone");

    death_then_reload(10, 20);
    place_is(20, 1, 0, "worker 0 killed: its respawn takes rank 0");
    place_is(30, 2, 0, "a reload 20 ms later opens generation 2");
    is_str(decide_at(1024), "follow 20 on 1", "the respawned worker 0 leads");
    old_ones_leave(old, 5, "worker 0 killed, then a reload: the new worker 0 "
                           "leads once the old ones are gone");

    death_then_reload(12, 20);
    place_is(20, 1, 2, "cache manager killed: its respawn takes rank 2");
    place_is(30, 2, 0, "a reload 20 ms later opens generation 2");
    old_ones_leave(old, 5, "cache manager killed, then a reload: the new "
                           "worker 0 leads once the old ones are gone");
}

/* The loader exits on its own (no respawn); later a reload. Its first
 * fork comes after the master read its configuration: no respawn of the
 * loader, however soon. */
static void test_reload_after_loader_exit(void)
{
    const pid_t old[] = {11, 12, 10};

    start_pinned();
    die_at(13, 60000);
    reload_at(30, 60001);
    place_is(30, 1, 3, "the reload's first fork, right after the loader's "
             "exit, is taken for its respawn at first");
    ok(last_place.respawn && !last_place.opened, "and opens nothing");
    fork_at(31, 60400);
    ok(last_place.opened && !last_place.respawn,
       "the second fork, 400 ms later, finds no death: it opened generation 2");
    place_is(30, 2, 0, "the first fork is generation 2's rank 0");
    place_is(31, 2, 1, "the second its rank 1");
    fork_at(32, 60401);
    fork_at(33, 60900);
    ok(!last_place.opened, "the next forks open nothing");
    place_is(33, 2, 3, "the burst stays in generation 2");
    pin_at(31, 1, 60950);
    pin_at(30, 0, 61000);
    is_str(decide_at(61000), "follow 10 on 1", "old worker 0 still leads");
    for (size_t i = 0; i < 3; i++)
        die_at(old[i], 61200 + i);
    is_str(decide_at(61300), "follow 30 on 0",
           "old ones gone: the new worker 0 leads");

    start_pinned();
    die_at(13, 60000);
    reload_at(30, 60100);
    fork_at(31, 60100);
    die_at(10, 60200);
    die_at(11, 60201);
    die_at(12, 60202);
    is_str(decide_at(60300), "wait",
           "a reload that removes the affinity soon after the loader's exit: "
           "its worker 0 is waited for");
    is_str(decide_at(63100), "restore",
           "and given up 3 s after its fork: back to the original mask");

    start_pinned();
    die_at(13, 60000);
    fork_at(30, 60100);
    place_is(30, 1, 3, "a fork with nothing read since the last one after "
             "the loader's exit takes its place");
}

/* A worker that nginx does not respawn (it failed fatally), then a reload:
 * its first fork is taken for a respawn of the worker, and the second,
 * with nothing read in between, shows it opened a burst. */
static void test_reload_after_unreplaced_worker(void)
{
    start_pinned();
    die_at(11, 30000);
    reload_at(30, 40000);
    place_is(30, 1, 1, "the reload's first fork is taken for worker 1's "
             "respawn at first");
    ok(last_place.respawn && !last_place.opened, "a respawn opens nothing");
    fork_at(31, 40300);
    ok(last_place.opened, "the second fork is the one that opened generation 2");
    place_is(30, 2, 0, "the second fork shows it opened generation 2");
    place_is(31, 2, 1, "the second fork is its rank 1");
    fork_at(32, 40600);
    place_is(32, 2, 2, "and the burst goes on in generation 2");
    pin_at(30, 0, 40700);
    pin_at(31, 1, 40700);
    is_str(decide_at(40700), "follow 10 on 1", "old worker 0 still leads");
    die_at(10, 40800);
    die_at(12, 40801);
    die_at(13, 40802);
    is_str(decide_at(40802), "follow 30 on 0",
           "old ones gone: the new worker 0 leads");
}

static void test_affinity_removed(void)
{
    start_pinned();
    reload_at(20, 5000);
    fork_at(21, 5000);
    die_at(10, 5100);
    is_str(decide_at(5100), "hold on 1", "one old worker left: hold");
    die_at(11, 5101);
    is_str(decide_at(5101), "wait",
           "no pinned worker, a newer generation lives: wait for its worker 0");
    ok(b.wait_until == 8000 * MS, "until 3 s after the new worker 0's fork");
    is_str(decide_at(7999), "wait", "still waiting 1 ms before");
    is_str(decide_at(8000), "restore",
           "the new worker 0 given up on: original mask");
    is_str(decide_at(8001), "nothing", "and stays there");
}

/* A busy machine: the old workers are gone before the new ones run. */
static void test_reload_busy(void)
{
    start_pinned();
    reload_at(20, 5000);
    fork_at(21, 5000);
    fork_at(22, 5001);
    die_at(10, 5100);
    die_at(11, 5101);
    is_str(decide_at(5101), "wait",
           "old workers gone before the new ones pinned: wait");
    pin_at(21, 1, 5400);
    is_str(decide_at(5400), "wait", "new worker 1 pinned: wait for worker 0");
    pin_at(20, 0, 5500);
    is_str(decide_at(5500), "follow 20 on 0",
           "then follow the new worker 0, never back to the original mask");

    start_pinned();
    reload_at(20, 5000);
    fork_at(21, 5000);
    die_at(10, 5100);
    die_at(11, 5101);
    die_at(20, 5200);
    is_str(decide_at(5200), "wait",
           "the new worker 0 died unpinned: wait for its respawn");
    wake();
    is_str(decide_at(5300), "restore", "none came in the wake-up that "
           "reaped it (a fatal exit): no one is left to wait for");
}

static void test_loader_exit(void)
{
    start();
    pin_at(10, 1, 5);
    decide_at(5);
    die_at(13, 60000);
    is_str(decide_at(60000), "follow 10 on 1", "the loader's exit changes nothing");
    reload_at(20, 62000);
    fork_at(21, 62000);
    place_is(20, 2, 0, "a reload after the loader's exit is a new generation");
    place_is(21, 2, 1, "its second fork too");
}

/* nginx with 4 workers (worker 0 on CPU 1, the others on CPU 0), a cache
 * manager and a loader, its forks 300 ms apart: a busy machine. */
static void slow_start(void)
{
    ma_brood_init(&b);
    for (pid_t p = 10; p < 16; p++)
        fork_at(p, (uint64_t)(p - 10) * 300);
}

static void test_slow_forks(void)
{
    slow_start();
    place_is(13, 1, 3, "forks 300 ms apart still make one burst");
    place_is(15, 1, 5, "the loader too");
    pin_at(12, 0, 700);
    pin_at(11, 0, 800);
    is_str(decide_at(800), "wait", "workers 1 and 2 pinned first: wait");
    pin_at(10, 1, 2000);
    is_str(decide_at(2000), "follow 10 on 1",
           "worker 0, pinned 2 s after its fork, leads");
    pin_at(13, 0, 2100);
    is_str(decide_at(2100), "follow 10 on 1", "worker 3 changes nothing");

    die_at(10, 10000);
    is_str(decide_at(10000), "hold on 1", "worker 0 killed: hold its CPU");
    fork_at(20, 10300);
    place_is(20, 1, 0, "its replacement, 300 ms after the death, takes "
             "worker 0's place");
    is_str(decide_at(11000), "hold on 1", "still holding before it pins");
    pin_at(20, 1, 11500);
    is_str(decide_at(11500), "follow 20 on 1", "the new worker 0 leads");

    /* A reload whose forks are slow, worker 0 now alone on CPU 0. */
    reload_at(30, 20000);
    for (pid_t p = 31; p < 36; p++)
        fork_at(p, 20000 + (uint64_t)(p - 30) * 300);
    place_is(35, 2, 5, "a slow reload's forks make one generation");
    pin_at(31, 1, 21700);
    pin_at(30, 0, 21800);
    const pid_t old[] = {20, 11, 12, 13, 14, 15};
    for (size_t i = 0; i < 6; i++) {
        die_at(old[i], 22000 + (uint64_t)i * 300);
        is_str(decide_at(22000 + i * 300), i < 3 ? "hold on 1" : "follow 30 on 0",
               i < 3 ? "an old worker left: hold" : "old workers gone: "
               "follow the new worker 0");
    }
}

/* Worker 0 killed, and a reload at once: nginx reaps and respawns it, then
 * reads its configuration and forks the new workers. */
static void test_kill_then_reload(void)
{
    slow_start();
    pin_at(10, 1, 1600);
    pin_at(11, 0, 1600);
    decide_at(1600);
    die_at(10, 5000);
    fork_at(20, 5300);
    place_is(20, 1, 0, "the respawn takes worker 0's place");
    reload_at(30, 5600);
    fork_at(31, 5900);
    place_is(30, 2, 0, "the reload's first fork, after the respawn, opens "
             "generation 2");
    place_is(31, 2, 1, "the next is its rank 1");
    place_is(20, 1, 0, "and the respawn keeps its place");
    pin_at(31, 1, 6000);
    pin_at(30, 0, 6100);
    pin_at(20, 1, 6200);
    is_str(decide_at(6200), "follow 20 on 1", "the respawned worker 0 leads");
    const pid_t old[] = {11, 12, 13, 14, 15, 20};
    for (size_t i = 0; i < 6; i++)
        die_at(old[i], 6300 + i);
    is_str(decide_at(6400), "follow 30 on 0", "old ones gone: follow the new "
           "worker 0");

    /* The reload first, then the death: nginx does not replace an old
     * worker once the reload has told them to quit. */
    slow_start();
    pin_at(10, 1, 1600);
    decide_at(1600);
    reload_at(30, 5000);
    die_at(10, 5100);
    fork_at(31, 5300);
    place_is(31, 2, 1, "an old worker's death during a reload is not "
             "replaced by the reload's fork");
}

/* nginx refills its slots in order, and a generation's slots follow its
 * ranks: of two deaths, the lower rank is replaced first, whether or not
 * it had pinned, and whatever the order of the reaps. */
static void test_lowest_rank_first(void)
{
    start_pinned();
    die_at(11, 990);
    die_at(10, 1001);
    fork_at(20, 1000);
    place_is(20, 1, 0, "of two deaths reaped, worker 0 is replaced first");

    /* A respawned worker 0 that has not pinned yet (a busy machine) dies
     * with worker 1: the replacement of slot 0 comes first. */
    start_pinned();
    die_at(10, 1000);
    fork_at(20, 1001);
    die_at(11, 1100);
    die_at(20, 1100);
    fork_at(30, 1101);
    fork_at(31, 1102);
    place_is(30, 1, 0, "worker 0 unpinned and worker 1 dead together: the "
             "first replacement is worker 0");
    place_is(31, 1, 1, "the second worker 1");
    pin_at(31, 0, 1103);
    is_str(decide_at(1103), "hold on 1", "the new worker 1 pins first: worker "
           "0's CPU is held");
    pin_at(30, 1, 1104);
    is_str(decide_at(1104), "follow 30 on 1", "the new worker 0 leads");
}

/* A master that sleeps in sigsuspend (nginx): each wake-up settles the
 * deaths it did not replace, and its first fork after a wake-up, not a
 * respawn, opens a generation. */
static void test_sleeper(void)
{
    /* The cache loader exits; a minute later a reload to one worker and
     * no cache forks a single child. */
    start_pinned();
    wake();
    die_at(13, 60000);
    wake();
    reload_at(30, 120000);
    place_is(30, 2, 0, "a reload in a later wake-up than the loader's exit "
             "opens generation 2");
    ok(last_place.opened && !last_place.respawn, "its fork is no respawn");
    pin_at(30, 0, 120001);
    die_at(10, 120100);
    die_at(11, 120101);
    die_at(12, 120102);
    is_str(decide_at(120102), "follow 30 on 0", "the old workers gone, the "
           "lone new worker 0 leads");

    /* The same with two workers and a cache: the burst stays together. */
    start_pinned();
    wake();
    die_at(13, 60000);
    wake();
    reload_at(30, 120000);
    fork_at(31, 120300);
    fork_at(32, 120600);
    place_is(30, 2, 0, "after the loader's exit the reload's forks are "
             "generation 2's: rank 0");
    place_is(31, 2, 1, "rank 1, though 300 ms later (a busy machine)");
    place_is(32, 2, 2, "rank 2");

    /* A refused reload (a wake-up that forks nothing), then the cache
     * manager, worker 1 and worker 0 killed, each reaped in a wake-up of
     * its own and replaced in it. */
    start_pinned();
    wake();
    wake();
    die_at(12, 1000);
    reload_at(20, 1001);
    place_is(20, 1, 2, "the cache manager's respawn keeps its place");
    wake();
    die_at(11, 2000);
    reload_at(21, 2001);
    place_is(21, 1, 1, "worker 1's respawn keeps its place");
    wake();
    die_at(10, 3000);
    reload_at(22, 3001);
    place_is(22, 1, 0, "worker 0's respawn keeps its place");
    pin_at(21, 0, 3002);
    pin_at(22, 1, 3003);
    is_str(decide_at(6000), "follow 22 on 1", "the respawned worker 0 leads");
}

/* The sequence a loaded machine made of respawns.t without I/O counts,
 * when the voluntary context switches of nginx's thread stood in for its
 * reads: the thread waited for the library's lock between two forks of a
 * reload, the second fork opened a generation of its own, and once the
 * old workers were gone the master followed a respawned worker 1. A
 * master that sleeps tells a burst by its wake-ups: a wait inside one
 * changes nothing. */
static void test_busy_reload_then_deaths(void)
{
    start_pinned();
    wake();
    die_at(13, 60000);
    wake();
    reload_at(30, 61000);
    fork_at(31, 61400);
    fork_at(32, 61401);
    fork_at(33, 61402);
    place_is(31, 2, 1, "a reload's second fork after a wait is its rank 1");
    pin_at(30, 1, 61500);
    pin_at(31, 0, 61500);
    for (pid_t p = 10; p <= 12; p++)
        die_at(p, 61600);
    is_str(decide_at(61600), "follow 30 on 1", "the old workers gone, the new "
           "worker 0 leads");
    wake(); /* a refused reload */
    wake();
    die_at(32, 70000);
    reload_at(40, 70001);
    place_is(40, 2, 2, "the cache manager's respawn");
    wake();
    die_at(31, 71000);
    reload_at(41, 71001);
    place_is(41, 2, 1, "worker 1's respawn");
    pin_at(41, 0, 71002);
    is_str(decide_at(71002), "follow 30 on 1", "worker 0 leads still");
    wake();
    die_at(30, 72000);
    reload_at(42, 72001);
    place_is(42, 2, 0, "worker 0's respawn");
    pin_at(42, 1, 72002);
    is_str(decide_at(72002), "follow 42 on 1", "the respawned worker 0 leads "
           "on CPU 1: the master never moves");
}

/* What the master read before a death does not make its respawn a
 * reload: a reload nginx refused (a configuration with an error), a
 * reopen of its logs (USR1), or, where the kernel keeps no per-thread I/O
 * counts, the sleep before every respawn all count as read at the next
 * fork. The cache manager, which never pins, keeps its place too. */
static void refused_reload_then_deaths(bool read_before_each)
{
    start_pinned();
    die_at(12, 1000);
    forked(20, true, 1001);
    place_is(20, 1, 2, "the cache manager's respawn after files were read "
             "keeps its place");
    ok(last_place.respawn && !last_place.opened, "and opens nothing");
    die_at(11, 2000);
    forked(21, read_before_each, 2001);
    place_is(21, 1, 1, "worker 1's respawn keeps its place");
    die_at(10, 2100);
    forked(22, read_before_each, 2101);
    place_is(22, 1, 0, "worker 0's respawn keeps its place");
    pin_at(21, 0, 2102);
    is_str(decide_at(2102), "hold on 1", "worker 1 pinned first: hold worker "
           "0's CPU");
    pin_at(22, 1, 2103);
    is_str(decide_at(6000), "follow 22 on 1", "the respawned worker 0 leads, "
           "also after 3 s with the cache manager unpinned");
}

static void test_read_before_death(void)
{
    refused_reload_then_deaths(false);
    refused_reload_then_deaths(true);

    /* A refused reload, a respawn, then a reload nginx takes. */
    start_pinned();
    die_at(12, 1000);
    forked(20, true, 1001);
    reload_at(30, 5000);
    fork_at(31, 5000);
    place_is(30, 2, 0, "a good reload after a refused one and a respawn "
             "opens generation 2");
    place_is(31, 2, 1, "and its burst stays in it");
    place_is(20, 1, 2, "the respawn keeps its place");
}

/* Two deaths nginx does not replace (the loader's exit, a worker's fatal
 * exit), then a reload: its first two forks are taken for their respawns,
 * the third, finding no death, shows all three are one burst. */
static void test_two_unreplaced_deaths(void)
{
    start_pinned();
    die_at(13, 30000);
    die_at(11, 31000);
    reload_at(30, 40000);
    place_is(30, 1, 1, "the first fork is taken for worker 1's respawn");
    fork_at(31, 40001);
    place_is(31, 1, 3, "the second for the loader's");
    fork_at(32, 40002);
    ok(last_place.opened, "the third finds no death: it opened generation 2");
    place_is(30, 2, 0, "the first fork is generation 2's rank 0");
    place_is(31, 2, 1, "the second its rank 1");
    place_is(32, 2, 2, "the third its rank 2");
    fork_at(33, 40003);
    place_is(33, 2, 3, "and the burst goes on");

    /* Two children killed at once: nginx reaps both, then respawns both
     * with nothing read in between. */
    start_pinned();
    die_at(12, 1000);
    die_at(10, 1000);
    fork_at(20, 1001);
    fork_at(21, 1002);
    place_is(20, 1, 0, "of worker 0 and the cache manager, worker 0 first");
    place_is(21, 1, 2, "then the cache manager, in its own place");
}

static void test_forget(void)
{
    start();
    pin_at(10, 1, 5);
    decide_at(5);
    ma_brood_forget(&b, ma_brood_find_pid(&b, 11));
    ok(ma_brood_find_pid(&b, 11) == NULL, "a forgotten child is gone");
    fork_at(20, 6);
    place_is(20, 1, 4, "and its place is not taken by a respawn");
}

/* Reloads faster than the old workers leave, as reloads.t's fifty in a
 * row on a busy machine: generation 2 loses its worker 0 before
 * generation 1 is gone. Its worker 1 is no worker 0: the master goes on to
 * generation 3's. */
static void test_overlapping_reloads(void)
{
    start_pinned();
    reload_at(20, 1000);
    fork_at(21, 1000);
    pin_at(20, 1, 1001);
    pin_at(21, 0, 1001);
    is_str(decide_at(1001), "follow 10 on 1", "two generations: the old "
           "worker 0 leads");
    reload_at(30, 1100);
    fork_at(31, 1100);
    pin_at(30, 1, 1101);
    pin_at(31, 0, 1101);
    die_at(10, 1102);
    die_at(20, 1102);
    is_str(decide_at(1102), "hold on 1", "both older worker 0s gone, "
           "worker 1s alive: hold worker 0's place");
    die_at(11, 1103);
    is_str(decide_at(1103), "follow 30 on 1", "generation 1 gone: generation "
           "2, without its worker 0, is passed over for generation 3's");
    die_at(21, 1104);
    is_str(decide_at(1104), "follow 30 on 1", "generation 2 gone: no change");

    start_pinned();
    reload_at(20, 1000);
    fork_at(21, 1000);
    pin_at(20, 1, 1001);
    pin_at(21, 0, 1001);
    decide_at(1001);
    reload_at(30, 1100);
    fork_at(31, 1100);
    die_at(20, 1102);
    die_at(10, 1102);
    die_at(11, 1103);
    is_str(decide_at(1103), "wait", "generation 3 not pinned yet: wait for "
           "its worker 0 rather than follow generation 2's worker 1");
    pin_at(31, 0, 1104);
    is_str(decide_at(1104), "wait", "its worker 1 pinned first: wait on");
    pin_at(30, 1, 1105);
    is_str(decide_at(1105), "follow 30 on 1", "then its worker 0");

    start_pinned();
    reload_at(20, 1000);
    fork_at(21, 1000);
    pin_at(20, 1, 1001);
    pin_at(21, 0, 1001);
    decide_at(1001);
    reload_at(30, 1100);
    fork_at(31, 1100);
    die_at(20, 1102);
    die_at(10, 1102);
    die_at(11, 1103);
    is_str(decide_at(1100 + 3001), "restore", "a generation 3 that never "
           "pins: back to the original mask, not to generation 2's worker 1");
}

/* The start's children (workers 10 and 11, cache manager 12, loader 13)
 * all exit, as a reload tells them to. */
static void start_gone_at(uint64_t t_ms)
{
    for (pid_t pid = 10; pid <= 13; pid++)
        die_at(pid, t_ms);
}

/* A reload whose workers are slow to pin; the old ones leave; the new
 * worker 0 dies before it pinned, and nginx respawns it in the wake-up
 * that reaped it (the scenario fuzzer, seed 600002). */
static void test_new_first_dies_unpinned(void)
{
    start_pinned();
    reload_at(20, 1000);
    fork_at(21, 1000);
    fork_at(22, 1000);
    start_gone_at(1001);
    is_str(decide_at(1002), "wait", "old workers gone, the new ones not "
           "pinned: wait for worker 0");
    die_at(20, 1500);
    is_str(decide_at(1500), "wait", "the new worker 0 dies unpinned: wait "
           "for its respawn, not back to the original mask");
    fork_at(23, 1500);
    place_is(23, 2, 0, "its respawn");
    is_str(decide_at(1501), "wait", "the respawn not pinned yet: wait on");
    pin_at(23, 1, 1502);
    is_str(decide_at(1502), "follow 23 on 1", "then follow it");

    /* The same with the new worker 1 pinned (seed 1000111). */
    start_pinned();
    reload_at(20, 1000);
    fork_at(21, 1000);
    start_gone_at(1001);
    pin_at(21, 1, 1002);
    is_str(decide_at(1002), "wait", "the new worker 1 pinned first: wait "
           "for worker 0");
    die_at(20, 1500);
    is_str(decide_at(1500), "wait", "the new worker 0 dies unpinned: wait "
           "for its respawn, not follow worker 1");
    fork_at(23, 1500);
    is_str(decide_at(1501), "wait", "the respawn not pinned yet: wait on");
    pin_at(23, 0, 1502);
    is_str(decide_at(1502), "follow 23 on 0", "then follow it");
}

static void test_full(void)
{
    struct ma_place p = {.gen = 1, .rank = 0};
    int added = 0;
    ma_brood_init(&b);
    for (int i = 0; i < MA_MAX_CHILDREN + 5; i++)
        added += ma_brood_add(&b, 100 + i, p) != NULL;
    ok(added == MA_MAX_CHILDREN, "the table holds %d children, no more",
       MA_MAX_CHILDREN);
    ok(ma_brood_find_pid(&b, 100 + MA_MAX_CHILDREN - 1) != NULL &&
           ma_brood_find_pid(&b, 100 + MA_MAX_CHILDREN) == NULL,
       "and finds them by pid");
}

int main(void)
{
    test_start();
    test_respawn();
    test_reload();
    test_affinity_removed();
    test_reload_busy();
    test_reload_after_death();
    test_reload_after_loader_exit();
    test_loader_exit();
    test_reload_after_unreplaced_worker();
    test_slow_forks();
    test_kill_then_reload();
    test_lowest_rank_first();
    test_sleeper();
    test_busy_reload_then_deaths();
    test_read_before_death();
    test_two_unreplaced_deaths();
    test_forget();
    test_overlapping_reloads();
    test_new_first_dies_unpinned();
    test_full();
    return done_testing();
}
