/* libmasteraff: the master's sleep. nginx's master (and every server of
 * its family) waits for work in sigsuspend with its signals blocked
 * otherwise: there the library listens, with no thread of its own. The
 * interposed sigsuspend of a master waits in ppoll on the channel with the
 * program's mask: a signal runs the program's handler and the call
 * returns, as sigsuspend returns, -1 with EINTR; a report is handled in
 * ordinary context and the wait goes on, so the program never sees a
 * wake-up that is not its own. ppoll, unlike epoll_pwait, goes on waiting
 * after SIGSTOP and SIGCONT, as sigsuspend does. The timed decisions are
 * the wait's timeout.
 *
 * A readable channel would keep ppoll from delivering a pending signal:
 * after each batch of reports the wait lets pending signals in first. A
 * batch that fills its budget (a child flooding the channel) leaves the
 * channel unwatched for a while, so that the master does not spin.
 *
 * Masters that never sleep there (uWSGI waits in epoll_wait) are served
 * at their forks and their reaps (shim.c). */
#define _GNU_SOURCE
#include "forkmark.h"
#include "state.h"

#include <errno.h>
#include <poll.h>

#define WAKE_BUDGET 256
#define FLOOD_PAUSE_NS (50 * 1000 * 1000ULL)

static uint64_t unwatched_until;

void ma_take_events(unsigned budget)
{
    if (ma_reaps_collect())
        ma_apply_decision();
    ma_channel_read(budget);
}

/* The wait's timeout: until the next timed decision, or the end of a
 * pause in watching the channel. NULL: none. */
static struct timespec *timeout_for(uint64_t due, struct timespec *ts)
{
    uint64_t now = now_ns(), left;
    if (unwatched_until && (!due || unwatched_until < due))
        due = unwatched_until;
    if (!due)
        return NULL;
    left = due > now ? due - now : 0;
    ts->tv_sec = (time_t)(left / 1000000000ULL);
    ts->tv_nsec = (long)(left % 1000000000ULL);
    return ts;
}

/* Sets the wait up, under the lock: the decisions that are due first.
 * Returns false when the master stopped being one (the program closed the
 * channel): the program's own sigsuspend is called instead. */
static bool prepare_wait(struct pollfd *p, struct timespec **timeout,
                         struct timespec *ts)
{
    self.sleeper = true;
    if (!is_master() || !ma_still_master())
        return false;
    ma_run_due_decisions();
    if (unwatched_until && now_ns() >= unwatched_until)
        unwatched_until = 0;
    p->fd = unwatched_until ? -1 : self.channel.fd;
    p->events = POLLIN;
    *timeout = timeout_for(ma_decisions_due(), ts);
    return true;
}

/* A wake-up of the program's: the deaths its handlers reaped, what
 * children said, and the master's own mask, which may have changed while
 * it slept (a cpuset, taskset -p). */
static void woke(void)
{
    cpu_set_t cpuset;
    bool known = ma_cpuset_cpus(&cpuset, NULL) == 0;
    self.wakes++;
    /* A handler of the program's may have closed every descriptor. */
    if (!is_master() || !ma_still_master())
        return;
    ma_brood_settle(&brood);
    ma_check_own_mask(known ? &cpuset : NULL);
    ma_take_events(WAKE_BUDGET);
    ma_run_due_decisions();
    /* What nginx reads from here on tells a reload from a respawn. */
    if (ma_brood_respawn_open(&brood))
        ma_fork_returned();
}

/* Reads what the channel holds. Returns whether it read anything. */
static bool read_reports(void)
{
    sigset_t old;
    unsigned n;
    ma_lock(&old);
    n = ma_channel_read(WAKE_BUDGET);
    /* Full, or readable with nothing to read (an error): not watched for
     * a while, rather than read again at once. */
    if (n == WAKE_BUDGET || n == 0)
        unwatched_until = now_ns() + FLOOD_PAUSE_NS;
    ma_unlock(&old);
    return n > 0;
}

/* Waits with the program's mask, never holding the lock: a handler may
 * fork, and another thread may. Once reports were read, the signals
 * pending that the mask lets in run first (a readable channel would keep
 * ppoll from delivering them). Returns 0 on a signal, -1 when the
 * program's own sigsuspend is to be called. */
static int wait_for_signal(const sigset_t *mask)
{
    static const struct timespec zero;
    bool let_in = false;
    for (;;) {
        struct pollfd p;
        struct timespec ts, *timeout;
        sigset_t old;
        bool ok;
        int rc;
        ma_lock(&old);
        ok = prepare_wait(&p, &timeout, &ts);
        ma_unlock(&old);
        if (!ok)
            return -1;
        rc = let_in ? ppoll(NULL, 0, &zero, mask)
                    : ppoll(&p, 1, timeout, mask);
        if (rc < 0)
            return errno == EINTR ? 0 : -1;
        let_in = !let_in && rc > 0 && read_reports();
    }
}

int ma_sleep(const sigset_t *mask)
{
    sigset_t old;
    int e = errno;
    if (wait_for_signal(mask) < 0) {
        errno = e;
        return REAL(sigsuspend)(mask);
    }
    ma_lock(&old);
    woke();
    ma_unlock(&old);
    errno = EINTR;
    return -1;
}
