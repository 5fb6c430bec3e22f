/* libmasteraff: the one channel a master's children report on. A datagram
 * socket pair made at the master's first fork: the master reads one end,
 * every child inherits the other and sends on it the mask it pinned
 * itself to. The kernel adds each sender's credentials, so a child cannot
 * speak for another, and a report from any other process (a worker's own
 * child) names no child of the master's. Nothing is ever sent to the
 * children's end: no sibling can read another's report.
 *
 * A child never waits: a full channel loses its report. The children
 * share one send buffer, sized for MA_MAX_CHILDREN reports where the
 * master may (CAP_NET_ADMIN), and the master reads at each fork and in
 * its sleep, so a start of 1,024 workers does not fill it; only a child
 * that floods it can, and its reports stop counting after
 * MA_MAX_REPORTS. Once one has, the reports of others may be lost: the
 * master asks the kernel where each generation's worker 0 that it has not
 * heard from runs. A child about to execute a program sends an empty
 * datagram: it is no worker. */
#define _GNU_SOURCE
#include "report.h"
#include "state.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

/* A report's datagram and its credentials take about this much of the
 * send buffer. */
#define REPORT_TRUESIZE 1024

static void size_send_buffer(int fd)
{
    int want = MA_MAX_CHILDREN * REPORT_TRUESIZE;
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) < 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
}

int ma_channel_open(void)
{
    int sv[2], on = 1;
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    if (setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &on, sizeof on) < 0 ||
        shutdown(sv[1], SHUT_RD) < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        errno = e;
        return -1;
    }
    size_send_buffer(sv[1]);
    self.channel = ma_own(sv[0]);
    self.children_end = ma_own(sv[1]);
    return 0;
}

/* A parent that is gone is told nothing more; a full channel may empty,
 * but is said once: a child that pins itself again and again (a stopped
 * master) would fill its error log. */
static void say_unreported(int err)
{
    static bool said_full;
    if (err == EAGAIN && said_full)
        return;
    ma_log(MA_LOG_WARN, "process %d pinned itself, but its parent %d cannot "
           "be told (%s); nothing follows it", getpid(), self.parent,
           err == EAGAIN ? "its channel is full" : strerror(err));
    if (err == EAGAIN)
        said_full = true;
    else
        ma_release(&self.report);
}

void ma_channel_report(void)
{
    struct ma_report r;
    unsigned char msg[MA_REPORT_SIZE];
    int e = errno;
    if (REAL(sched_getaffinity)(0, sizeof r.mask, &r.mask) < 0)
        goto out;
    r.sent_ns = now_ns();
    ma_report_encode(&r, msg);
    /* The parent may be gone or not reading: never block, never SIGPIPE. */
    if (send(self.report.fd, msg, sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL) !=
        (ssize_t)sizeof msg)
        say_unreported(errno);
out:
    errno = e;
}

/* An empty datagram: nothing a report could be mistaken for. */
void ma_channel_farewell(void)
{
    int e = errno;
    send(self.report.fd, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL);
    errno = e;
}

/* Descriptors a sender passed along are none of the master's business. */
static void close_passed_descriptors(struct msghdr *m)
{
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int fds[n];
        memcpy(fds, CMSG_DATA(c), sizeof fds);
        for (size_t i = 0; i < n; i++)
            close(fds[i]);
    }
}

static pid_t sender_of(struct msghdr *m)
{
    struct ucred cred;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            memcpy(&cred, CMSG_DATA(c), sizeof cred);
            return cred.pid;
        }
    return 0;
}

/* The child executes another program: it is not a worker, and its end
 * is no death nginx will replace. */
static void child_left(struct ma_child *c)
{
    ma_log(MA_LOG_DEBUG, "child %d executes another program; no longer "
           "followed", c->pid);
    ma_brood_forget(&brood, c);
    ma_apply_decision();
}

/* A child filled the channel: others' reports may have been lost. */
static bool flooded;

static void child_misbehaved(struct ma_child *c, const char *what)
{
    flooded = true;
    ma_log(MA_LOG_WARN, "child %d %s; no longer listening to it", c->pid,
           what);
    ma_brood_forget(&brood, c);
    ma_apply_decision();
}

/* One report, from child c: len bytes in buf. */
static void take_report(struct ma_child *c, const unsigned char *buf,
                        ssize_t len)
{
    struct ma_report r;
    if (len == 0)
        return child_left(c);
    if (ma_report_decode(buf, (size_t)len, &r) < 0)
        return child_misbehaved(c, "sent a malformed report");
    if (c->reports >= MA_MAX_REPORTS)
        return child_misbehaved(c, "keeps reporting");
    ma_brood_pinned(&brood, c, &r);
    ma_apply_decision();
}

/* Reads one datagram. Returns false when there is none. */
static bool read_one(void)
{
    unsigned char buf[MA_REPORT_SIZE + 1];
    union {
        char space[CMSG_SPACE(sizeof(struct ucred)) +
                   CMSG_SPACE(16 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = control.space,
                       .msg_controllen = sizeof control.space};
    struct ma_child *c;
    ssize_t n = recvmsg(self.channel.fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0)
        return false;
    close_passed_descriptors(&m);
    c = ma_brood_find_pid(&brood, sender_of(&m));
    if (c)
        take_report(c, buf, n);
    return true;
}

/* A worker pins itself once, and the kernel says to what: a worker 0
 * whose mask is no longer the one every child starts with has pinned,
 * reported or not. */
static void look_at_unheard(void)
{
    struct ma_report r;
    for (size_t i = 0; i < brood.n; i++) {
        struct ma_child *c = &brood.kids[i];
        if (c->pinned || c->rank != 0 ||
            REAL(sched_getaffinity)(c->pid, sizeof r.mask, &r.mask) < 0 ||
            CPU_EQUAL(&r.mask, &self.original))
            continue;
        r.sent_ns = now_ns();
        ma_brood_pinned(&brood, c, &r);
        ma_apply_decision();
    }
}

unsigned ma_channel_read(unsigned budget)
{
    unsigned n = 0;
    int e = errno;
    while (n < budget && read_one())
        n++;
    if (n == budget)
        flooded = true;
    if (flooded)
        look_at_unheard();
    errno = e;
    return n;
}
