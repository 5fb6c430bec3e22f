/* libmasteraff: the master's listener. One thread, started after the
 * master's first fork, that blocks every signal (a process-directed signal
 * must reach the program's own threads) and waits in epoll on the
 * children's channels and the eventfd that wakes it. It reads each report
 * or death and hands it to the brood and the decisions (decide.c), and
 * runs the timed decisions when due. It reads the master's topology ahead,
 * one CPU at a time.
 *
 * It does all its libc work holding the lock, and lets forks waiting for
 * the lock go first. fork() drains the channels itself, under the lock,
 * so that a fork is placed knowing every death before it. */
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

void ma_stop_listening(struct ma_child *c)
{
    if (!ma_channel_is_ours(c))
        return;
    epoll_ctl(self.epoll.fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
}

static void child_gone(struct ma_child *c)
{
    ma_stop_listening(c);
    ma_brood_died(&brood, c);
    ma_apply_decision();
}

static void child_misbehaved(struct ma_child *c, const char *what)
{
    ma_log(MA_LOG_WARN, "child %d %s; no longer listening to it", c->pid,
           what);
    ma_stop_listening(c);
    ma_brood_forget(&brood, c);
    ma_apply_decision();
}

/* recv() reads 0 bytes both at the end of the channel and for an empty
 * message; only the end says the child is gone. */
static bool channel_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP));
}

/* Reads what one child sent. Each read costs a syscall, so a child gets a
 * bounded number of them before it is dropped (MA_MAX_REPORTS). */
static void read_channel(int fd)
{
    struct ma_child *c = ma_brood_find_fd(&brood, fd);
    unsigned char buf[MA_REPORT_SIZE + 1];
    struct ma_report r;
    ssize_t n;

    while (c) {
        n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        if (n == 0 && !channel_closed(fd))
            return child_misbehaved(c, "sent an empty message");
        if (n <= 0)
            return child_gone(c);
        if (ma_report_decode(buf, (size_t)n, &r) < 0)
            return child_misbehaved(c, "sent a malformed report");
        if (c->reports >= MA_MAX_REPORTS)
            return child_misbehaved(c, "keeps reporting");
        ma_brood_pinned(&brood, c, &r);
        ma_apply_decision();
        c = ma_brood_find_fd(&brood, fd);
    }
}

static void read_ready(const struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++)
        if (ev[i].data.u64 != MA_WAKE_MARK)
            read_channel(ev[i].data.fd);
}

/* Before a fork: what children said (or their deaths) up to now, all of
 * it: a death the program has reaped is known before the fork that may
 * replace it. */
void ma_drain_channels(void)
{
    struct epoll_event ev[32];
    int n, rounds = MA_MAX_CHILDREN / 32 + 2;
    do {
        n = epoll_wait(self.epoll.fd, ev, 32, 0);
        read_ready(ev, n);
    } while (n == 32 && --rounds > 0);
}

/* Milliseconds until the earliest of a deferred decision, a touch-up and a
 * check for pins, or -1 for none. */
static int listener_timeout(void)
{
    uint64_t now = now_ns(),
             due = ma_decisions_due();
    if (!due)
        return -1;
    if (due <= now)
        return 0;
    return (int)((due - now + 999999) / 1000000);
}

/* One CPU at a time (a large machine takes a while), letting the master's
 * forks go first; a worker that pins meanwhile has its unit read then. */
static void read_topology(void)
{
    cpu_set_t one;
    if (ma_cfg.scope == MA_SCOPE_WORKER)
        return;
    pthread_mutex_lock(&lock);
    ma_topology_init(&topology, ma_cfg.scope);
    pthread_mutex_unlock(&lock);
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        if (!CPU_ISSET(c, &self.original))
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        while (__atomic_load_n(&forks_waiting, __ATOMIC_RELAXED))
            sched_yield();
        pthread_mutex_lock(&lock);
        ma_topology_read(ma_cfg.sysfs, &one, &topology);
        pthread_mutex_unlock(&lock);
    }
}

/* What wakes the listener's epoll_wait is read by it alone: a fork's own
 * look at the channels leaves it, so the wake-up is not lost. */
static void drain_wake(void)
{
    uint64_t n;
    if (read(self.wake.fd, &n, sizeof n) < 0)
        return;
}

/* Under the lock: a log line could take a libc lock a fork would copy. */
static void stop_listener(int err)
{
    bool closed = !ma_epoll_is_ours();
    self.listening = false;
    ma_stop_being_master();
    if (closed)
        ma_give_up("the program closed the library's descriptors", EBADF);
    else
        ma_give_up("stopped listening to children", err);
}

static void *listener(void *arg)
{
    struct epoll_event ev[32];
    int timeout = -1;
    (void)arg;
    listener_tid = gettid();
    read_topology();
    for (;;) {
        int n = epoll_wait(self.epoll.fd, ev, 32, timeout);
        int err = n < 0 && errno != EINTR ? errno : 0;
        pthread_mutex_lock(&lock);
        if (!is_master()) { /* a fork found the descriptors gone */
            self.listening = false;
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        if (err || !ma_epoll_is_ours()) {
            stop_listener(err ? err : EBADF);
            pthread_mutex_unlock(&lock);
            return NULL;
        }
        drain_wake();
        read_ready(ev, n);
        if (n == 0)
            ma_apply_decision();
        ma_touch_up_if_due();
        ma_check_pins_if_due();
        timeout = listener_timeout();
        pthread_mutex_unlock(&lock);
    }
}

/* A thread that must never take a signal meant for the program. Its
 * stack also holds the program's static TLS, which glibc puts there. */
#define LISTENER_STACK (256 * 1024)

int ma_start_listener(void)
{
    pthread_t t;
    pthread_attr_t attr;
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, LISTENER_STACK);
    rc = pthread_create(&t, &attr, listener, NULL);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0)
        pthread_setname_np(t, "masteraff");
    return rc;
}
