/* hostile junk reap|sleep, hostile liar: a master whose children attack it
 * through the one channel they all share (run it with
 * MASTERAFF_PROGRAMS=hostile and a sysfs tree where CPUs 0 and 1 are two
 * packages).
 *
 * The library has no thread in the master: it reads the channel only at
 * the master's forks, at its reaps (waitpid with SIGCHLD at its default
 * disposition) and in its sleep (sigsuspend). So this master waits the
 * way a real one does, in one of those, and never in a plain sleep:
 *
 *   reap   a loop of waitpid(-1, WNOHANG) and a 10 ms nanosleep, with no
 *          SIGCHLD handler (uWSGI's way);
 *   sleep  sigsuspend with SIGCHLD and SIGALRM blocked otherwise, a
 *          SIGCHLD handler that reaps, and a 10 ms interval timer that
 *          wakes it to look at its conditions (nginx's way, but for the
 *          timer).
 *
 * junk: one burst of children. Child 0 is an honest worker that pins
 *   itself to CPU 1. The others are attackers. Every child first checks
 *   that it holds exactly one socket: the master's children's end (a file
 *   the master holds), shut for reading, whose peer is a socket of the
 *   master's. Once the master follows child 0, the attackers are let go
 *   (all children share the channel's buffer: a flood started earlier
 *   could fill it before child 0's report is in). They send garbage, a
 *   bad version, an empty mask, a truncated, an oversized and a huge
 *   message, an empty datagram, a valid report carrying 64 descriptors, a
 *   valid report for CPUs the master does not have, 1,000,000 junk
 *   messages, 1,000,000 valid reports; one is killed while it writes, one
 *   closes its socket and lives on, one has a grandchild (not the
 *   master's child) send a valid report on the end it inherited. The
 *   master checks that it holds two sockets of the library's whatever the
 *   number of its children, that it reads all the attackers sent and
 *   keeps none of the descriptors passed, that the reaps give it its
 *   children's true exit statuses, that it follows child 0 all along, then
 *   that a later honest worker 0 (pinned to CPU 0) is followed. It prints
 *   "ok - ..." / "not ok - ..." lines, "kind KIND PID" for each child (and
 *   "kind grandchild PID" for the impostor's), "cpu_us N": its own CPU
 *   time (getrusage RUSAGE_SELF) from the attackers' start until it has
 *   read all they sent, the library's reading included, and
 *   "flood_cpu_us N" and "flood_wall_us N": its CPU time and the time that
 *   passed while they sent.
 *
 * liar: a master that sleeps in sigsuspend (nginx's way, no timer). Child
 *   0 is a liar, child 1 an honest worker on CPU 1. The liar reports CPUs
 *   0,2-1023 at once, CPUs 5-1023 on SIGUSR1, and on SIGUSR2 really pins
 *   itself to CPU 1. Prints "ready MASTER LIAR HONEST", then sleeps until
 *   SIGTERM, when it kills and reaps both; the caller checks. */
#define _GNU_SOURCE
#include "../report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

#define FLOOD 1000000
/* A bound for a wait that will never end, never a guess at how long an
 * event takes: a busy machine may take seconds for what an idle one does
 * at once. */
#define PATIENCE_S 120

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- sockets, as the kernel sees them ---- */

/* What sock_diag says of the AF_UNIX socket with inode ino. */
struct unix_info {
    unsigned peer;     /* its peer's inode, 0 for none */
    unsigned shutdown; /* RCV_SHUTDOWN 1, SEND_SHUTDOWN 2 */
    unsigned queued;   /* the length of the first datagram it holds */
};

static int unix_info(ino_t ino, struct unix_info *out)
{
    struct {
        struct nlmsghdr h;
        struct unix_diag_req r;
    } req = {
        .h = {.nlmsg_len = sizeof req, .nlmsg_type = SOCK_DIAG_BY_FAMILY,
              .nlmsg_flags = NLM_F_REQUEST},
        .r = {.sdiag_family = AF_UNIX, .udiag_ino = (unsigned)ino,
              .udiag_states = ~0u,
              .udiag_show = UDIAG_SHOW_PEER | UDIAG_SHOW_RQLEN,
              .udiag_cookie = {INET_DIAG_NOCOOKIE, INET_DIAG_NOCOOKIE}},
    };
    union {
        char buf[8192];
        struct nlmsghdr align;
    } u;
    struct nlmsghdr *h = &u.align;
    struct unix_diag_msg *m;
    struct rtattr *a;
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    ssize_t n = -1;
    int len;

    if (nl >= 0 && send(nl, &req, sizeof req, 0) == (ssize_t)sizeof req)
        n = recv(nl, u.buf, sizeof u.buf, 0);
    if (nl >= 0)
        close(nl);
    if (n < (ssize_t)NLMSG_LENGTH(sizeof *m) || !NLMSG_OK(h, n) ||
        h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
        return -1;
    memset(out, 0, sizeof *out);
    m = NLMSG_DATA(h);
    len = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
    for (a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        if (a->rta_type == UNIX_DIAG_PEER)
            memcpy(&out->peer, RTA_DATA(a), sizeof out->peer);
        else if (a->rta_type == UNIX_DIAG_SHUTDOWN)
            out->shutdown = *(unsigned char *)RTA_DATA(a);
        else if (a->rta_type == UNIX_DIAG_RQLEN)
            memcpy(&out->queued, RTA_DATA(a), sizeof out->queued);
    }
    return 0;
}

static ino_t inode_of(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

/* Whether process pid holds the socket with inode ino. */
static bool holds_socket(pid_t pid, ino_t ino)
{
    char dir[64], link[64], want[64];
    DIR *d;
    struct dirent *de;
    bool found = false;
    snprintf(dir, sizeof dir, "/proc/%d/fd", (int)pid);
    snprintf(want, sizeof want, "socket:[%lu]", (unsigned long)ino);
    if (!(d = opendir(dir)))
        return false;
    while (!found && (de = readdir(d))) {
        ssize_t len;
        len = readlinkat(dirfd(d), de->d_name, link, sizeof link - 1);
        if (len > 0) {
            link[len] = '\0';
            found = strcmp(link, want) == 0;
        }
    }
    closedir(d);
    return found;
}

static int passes_credentials(int fd, int want)
{
    int on = 0;
    socklen_t len = sizeof on;
    return is_unix_dgram(fd, 0) &&
           getsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, &len) == 0 &&
           !on == !want;
}

/* The master's sockets of the library's: AF_UNIX datagram sockets, its
 * reading end the one that asks for the senders' credentials. */
struct pair {
    int n; /* how many AF_UNIX datagram sockets the master holds */
    int reading, children; /* their descriptors, or -1 */
};

static struct pair library_sockets(void)
{
    struct pair p = {.reading = -1, .children = -1};
    p.n = fds_matching(is_unix_dgram, 0, NULL);
    if (fds_matching(passes_credentials, 1, &p.reading) != 1)
        p.reading = -1;
    if (fds_matching(passes_credentials, 0, &p.children) != 1)
        p.children = -1;
    return p;
}

/* ---- the children's side ---- */

/* The one socket a child holds, or -1 after a "not ok" line saying what is
 * wrong with it: it must be the master's children's end (a file the
 * master holds), shut for reading, its peer a socket of the master's. */
static int own_socket(const char *kind)
{
    struct unix_info info = {0};
    int fd = -1, n = sockets_of_type(0, &fd);
    pid_t parent = getppid();
    if (n != 1 || !is_unix_dgram(fd, 0)) {
        printf("not ok - %s child %d holds %d sockets, not the one channel "
               "end\n", kind, (int)getpid(), n);
        return -1;
    }
    if (unix_info(inode_of(fd), &info) < 0 || !(info.shutdown & 1) ||
        !info.peer || !holds_socket(parent, inode_of(fd)) ||
        !holds_socket(parent, info.peer)) {
        printf("not ok - %s child %d: its socket is not its parent's "
               "children's end shut for reading, with a peer of its "
               "parent's (shutdown %u, peer %u)\n", kind, (int)getpid(),
               info.shutdown, info.peer);
        return -1;
    }
    return fd;
}

/* A report as ma_report_encode writes it, with any version and mask. */
static void forge(unsigned char *buf, uint16_t version, const cpu_set_t *mask)
{
    uint32_t magic = MA_REPORT_MAGIC;
    uint16_t size = sizeof(cpu_set_t);
    uint64_t ns = 1;
    memcpy(buf, &magic, 4);
    memcpy(buf + 4, &version, 2);
    memcpy(buf + 6, &size, 2);
    memcpy(buf + 8, &ns, 8);
    memcpy(buf + 16, mask, sizeof *mask);
}

static void cpus(cpu_set_t *set, int lo, int hi)
{
    for (int c = lo; c <= hi; c++)
        CPU_SET(c, set);
}

static int pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return sched_setaffinity(0, sizeof one, &one);
}

static int send_one(int ch, const void *buf, size_t len)
{
    return send(ch, buf, len, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Sends n messages without ever waiting, ignoring every error. Returns how
 * many the kernel took. */
static long flood(int ch, const void *buf, size_t len, long n)
{
    long sent = 0;
    for (long i = 0; i < n; i++)
        if (send(ch, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)len)
            sent++;
    return sent;
}

/* A grandchild of the master's, made without the library's fork (which
 * would close the children's end in it): it sends a valid report for CPU
 * 0 on the end it inherited. Returns its exit status. */
static int impostor(int ch, const unsigned char *report)
{
    int status;
    pid_t pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(send_one(ch, report, MA_REPORT_SIZE) < 0);
    if (pid < 0)
        return -1;
    printf("kind grandchild %d\n", (int)pid);
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status)
               ? WEXITSTATUS(status) : -1;
}

/* Passes 64 descriptors of /dev/null along with a valid report. */
static int pass_descriptors(int ch, unsigned char *msg)
{
    int fds[64];
    union {
        char buf[CMSG_SPACE(sizeof fds)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {msg, MA_REPORT_SIZE};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                        .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    for (int i = 0; i < 64; i++)
        fds[i] = open("/dev/null", O_RDONLY);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cm), fds, sizeof fds);
    return sendmsg(ch, &mh, MSG_NOSIGNAL) == (ssize_t)MA_REPORT_SIZE ? 0 : -1;
}

/* The master's word to its children, and theirs to it: the attackers
 * wait for go and end to read end of file (the master closes their other
 * ends), and write a byte on done once they have sent what they send. */
static int go[2] = {-1, -1}, end[2] = {-1, -1}, done[2] = {-1, -1};

static void wait_for_eof(int fd)
{
    char c;
    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
}

static void say_done(void)
{
    if (write(done[1], "x", 1) != 1)
        _exit(1);
}

/* An attacker sends, says it is done, and lives on until the master has
 * read what it sent: a report read after its sender's death is dropped
 * unread, and the line that names a misbehaving child would depend on
 * the timing. */
static void attack(const char *kind)
{
    unsigned char msg[MA_REPORT_SIZE], big[MA_REPORT_SIZE + 1000];
    static unsigned char huge[200000];
    cpu_set_t set;
    int ch = own_socket(kind), rc = 0;

    if (ch < 0)
        _exit(1);
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    srand((unsigned)getpid());
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)rand();
    wait_for_eof(go[0]);

    if (strcmp(kind, "garbage") == 0) {
        rc = send_one(ch, msg, sizeof msg);
    } else if (strcmp(kind, "badversion") == 0) {
        forge(msg, MA_REPORT_VERSION + 1, &set);
        rc = send_one(ch, msg, sizeof msg);
    } else if (strcmp(kind, "emptymask") == 0) {
        CPU_ZERO(&set);
        forge(msg, MA_REPORT_VERSION, &set);
        rc = send_one(ch, msg, sizeof msg);
    } else if (strcmp(kind, "truncated") == 0) {
        forge(msg, MA_REPORT_VERSION, &set);
        rc = send_one(ch, msg, 20);
    } else if (strcmp(kind, "oversized") == 0) {
        forge(big, MA_REPORT_VERSION, &set);
        rc = send_one(ch, big, sizeof big);
    } else if (strcmp(kind, "huge") == 0) {
        /* As big as the socket takes. */
        size_t len = sizeof huge;
        forge(huge, MA_REPORT_VERSION, &set);
        while ((rc = send_one(ch, huge, len)) < 0 && errno == EMSGSIZE)
            len /= 2;
    } else if (strcmp(kind, "empty") == 0) {
        rc = send(ch, msg, 0, MSG_NOSIGNAL) == 0 ? 0 : -1;
    } else if (strcmp(kind, "fdpass") == 0) {
        /* A valid report, with 64 descriptors the master must not keep. */
        forge(msg, MA_REPORT_VERSION, &set);
        rc = pass_descriptors(ch, msg);
    } else if (strcmp(kind, "liar") == 0) {
        CPU_ZERO(&set);
        cpus(&set, 2, CPU_SETSIZE - 1);
        forge(msg, MA_REPORT_VERSION, &set);
        rc = send_one(ch, msg, sizeof msg);
    } else if (strcmp(kind, "impostor") == 0) {
        forge(msg, MA_REPORT_VERSION, &set);
        rc = impostor(ch, msg) == 0 ? 0 : -1;
    } else if (strcmp(kind, "junkflood") == 0) {
        long n = flood(ch, msg, sizeof msg, FLOOD);
        printf("# junkflood: the kernel took %ld of %d junk messages\n", n,
               FLOOD);
    } else if (strcmp(kind, "validflood") == 0) {
        long n;
        forge(msg, MA_REPORT_VERSION, &set);
        n = flood(ch, msg, sizeof msg, FLOOD);
        printf("# validflood: the kernel took %ld of %d valid reports\n", n,
               FLOOD);
    } else if (strcmp(kind, "killed") == 0) {
        /* Writes until killed, waiting for room: the master kills it once
         * it has started. */
        forge(big, MA_REPORT_VERSION, &set);
        for (long i = 0;; i++) {
            send(ch, i % 2 ? big : msg, i % 2 ? sizeof big : sizeof msg,
                 MSG_NOSIGNAL);
            if (i == 10)
                say_done();
        }
    } else if (strcmp(kind, "closer") == 0) {
        /* Lives on without its socket until killed. */
        close(ch);
        say_done();
        for (;;)
            pause();
    }
    if (rc < 0)
        printf("# %s: send failed: %s\n", kind, strerror(errno));
    say_done();
    wait_for_eof(end[0]);
    _exit(rc < 0);
}

/* ---- the master's side: how it waits ---- */

enum style { REAP, SLEEP };
static enum style style;
static sigset_t sleep_mask; /* the mask sigsuspend waits with */

/* The master's children and how they ended, written by the reaps (in the
 * SIGCHLD handler for the sleep style). */
#define MAX_KIDS 32
static struct {
    pid_t pid;
    int status;
    volatile sig_atomic_t reaped;
} kids[MAX_KIDS];
static int n_kids;

/* Async-signal-safe. */
static void reap_all(void)
{
    pid_t pid;
    int status;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        for (int i = 0; i < n_kids; i++)
            if (kids[i].pid == pid) {
                kids[i].status = status;
                kids[i].reaped = 1;
            }
}

static void on_child(int sig)
{
    int e = errno;
    (void)sig;
    reap_all();
    errno = e;
}

static void on_wake(int sig)
{
    (void)sig;
}

/* The sleep style: SIGCHLD, SIGALRM and SIGIO come only in sigsuspend, as
 * nginx takes its signals. */
static void setup_sleep(void)
{
    struct sigaction sa = {.sa_flags = SA_RESTART};
    sigset_t these;
    sigemptyset(&these);
    sigaddset(&these, SIGCHLD);
    sigaddset(&these, SIGALRM);
    sigaddset(&these, SIGIO);
    sigprocmask(SIG_BLOCK, &these, &sleep_mask);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_child;
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = on_wake;
    sigaction(SIGALRM, &sa, NULL);
    sigaction(SIGIO, &sa, NULL);
}

/* The sleep style looks at what has no event of its own (where the
 * library moved it, what is left in its channel) every 10 ms of a timer;
 * while the attackers send, it wakes only when one says it is done
 * (SIGIO) or dies: the library's reading in its sleep is then all the
 * work it does. */
static void ticking(bool on)
{
    struct itimerval tick = {{0, on ? 10000 : 0}, {0, on ? 10000 : 0}};
    if (style == SLEEP)
        setitimer(ITIMER_REAL, &tick, NULL);
}

static void wake_on_input(int fd)
{
    if (style == SLEEP && (fcntl(fd, F_SETOWN, getpid()) < 0 ||
                           fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0))
        check(0, "SIGIO on the attackers' pipe: %s", strerror(errno));
}

/* One turn of the master's wait: where the library does its work. */
static void tend(void)
{
    if (style == SLEEP) {
        sigsuspend(&sleep_mask);
    } else {
        reap_all();
        sleep_ms(10);
    }
}

/* Tends until cond(arg) holds; false after PATIENCE_S. */
static bool wait_until(bool (*cond)(long), long arg)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (cond(arg))
            return true;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > PATIENCE_S)
            return false;
        tend();
    }
}

/* ---- the master's side: what it looks at ---- */

/* set as the kernel's cpulist ("0-3,8"). */
static void cpulist(const cpu_set_t *set, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int c = 0; c < CPU_SETSIZE && used < len; c++) {
        int lo = c;
        if (!CPU_ISSET(c, set))
            continue;
        while (c + 1 < CPU_SETSIZE && CPU_ISSET(c + 1, set))
            c++;
        used += (size_t)snprintf(buf + used, len - used,
                                 lo == c ? "%s%d" : "%s%d-%d",
                                 used ? "," : "", lo, c);
    }
}

/* The mask all threads share as a cpulist, or "mixed". */
static const char *master_cpus(char *buf, size_t len)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    cpu_set_t first, m;
    int n = 0;
    snprintf(buf, len, "?");
    if (!d)
        return buf;
    while ((de = readdir(d))) {
        pid_t tid = atoi(de->d_name);
        /* The system call: the library shows a master it moved its
         * original mask through sched_getaffinity. */
        CPU_ZERO(&m);
        if (tid <= 0 || syscall(SYS_sched_getaffinity, tid, sizeof m, &m) < 0)
            continue;
        if (n++ == 0)
            first = m;
        else if (!CPU_EQUAL(&first, &m)) {
            closedir(d);
            snprintf(buf, len, "mixed");
            return buf;
        }
    }
    closedir(d);
    if (n)
        cpulist(&first, buf, len);
    return buf;
}

static bool master_on(long cpu)
{
    char buf[4096], want[16];
    snprintf(want, sizeof want, "%ld", cpu);
    return strcmp(master_cpus(buf, sizeof buf), want) == 0;
}

static int is_devnull(int fd, int unused)
{
    char path[64], target[64];
    ssize_t len;
    (void)unused;
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    len = readlink(path, target, sizeof target - 1);
    if (len <= 0)
        return 0;
    target[len] = '\0';
    return strcmp(target, "/dev/null") == 0;
}

/* Descriptors of /dev/null: what the fdpass child sends. */
static int devnulls(void)
{
    return fds_matching(is_devnull, 0, NULL);
}

/* What is still queued on the master's reading end: the length of its
 * first datagram, 0 when the library has read them all; -1 unknown. */
static long queued(void)
{
    struct pair p = library_sockets();
    struct unix_info info;
    if (p.reading < 0 || unix_info(inode_of(p.reading), &info) < 0)
        return -1;
    return info.queued;
}

/* The library read every datagram, and closed the descriptors passed. */
static bool drained(long nulls)
{
    return queued() == 0 && devnulls() <= nulls;
}

static bool reaped(long i)
{
    return kids[i].reaped;
}

static long n_done;

/* Whether n attackers said they are done. */
static bool all_done(long n)
{
    struct pollfd p = {done[0], POLLIN, 0};
    char c;
    while (n_done < n && poll(&p, 1, 0) == 1 && read(done[0], &c, 1) == 1)
        n_done++;
    return n_done >= n;
}

static void close_end(int *fd)
{
    close(*fd);
    *fd = -1;
}

/* The master holds two sockets of the library's, peers of each other: its
 * reading end, and the children's end, shut for reading. */
static void check_pair(const char *when)
{
    struct pair p = library_sockets();
    struct unix_info r, c;
    bool known = p.reading >= 0 && p.children >= 0 &&
                 unix_info(inode_of(p.reading), &r) == 0 &&
                 unix_info(inode_of(p.children), &c) == 0;
    check(p.n == 2 && known && r.peer == inode_of(p.children) &&
              c.peer == inode_of(p.reading) && (c.shutdown & 1),
          "%s, the master holds 2 sockets of the library's (%d): its reading "
          "end, which takes the senders' credentials, and the children's end, "
          "shut for reading (%s), peers of each other (%s)", when, p.n,
          known && (c.shutdown & 1) ? "yes" : "no",
          known && r.peer == inode_of(p.children) &&
                  c.peer == inode_of(p.reading) ? "yes" : "no");
}

/* ---- the master's side: its children ---- */

/* Forks child number n_kids: an honest worker on cpu (after the check of
 * its socket), or the attacker kind when cpu < 0. */
static pid_t spawn(const char *kind, int cpu)
{
    pid_t pid = fork();
    if (pid < 0) {
        check(0, "fork of %s: %s", kind, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (go[1] >= 0)
            close(go[1]);
        if (end[1] >= 0)
            close(end[1]);
        if (cpu < 0)
            attack(kind);
        if (own_socket(kind) < 0 || pin(cpu) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    kids[n_kids].pid = pid;
    kids[n_kids].reaped = 0;
    n_kids++;
    return pid;
}

/* Reaps child i; returns its status, or -1 when it did not end (then it
 * is killed). */
static int reap(int i)
{
    if (wait_until(reaped, i))
        return kids[i].status;
    kill(kids[i].pid, SIGKILL);
    wait_until(reaped, i);
    return -1;
}

static const char *const kinds[] = {
    "garbage", "badversion", "emptymask", "truncated", "oversized", "huge",
    "empty", "fdpass", "liar", "impostor", "junkflood", "validflood",
    "killed", "closer",
};
#define NKINDS (sizeof kinds / sizeof *kinds)

static long wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

static long cpu_us(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L +
           ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

static bool is_kind(int i, const char *kind)
{
    return i > 0 && strcmp(kinds[i - 1], kind) == 0;
}

static int mode_junk(void)
{
    int honest = 0, w0, w1, nulls, status, ok;
    struct pair before = library_sockets();
    char buf[4096];
    long started, started_wall, flood_cpu, flood_wall;

    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(end, O_CLOEXEC) < 0 ||
        pipe2(done, O_CLOEXEC) < 0)
        return 2;
    wake_on_input(done[0]);
    ticking(true);
    nulls = devnulls();
    check(before.n == 0, "before its first fork the master holds no socket "
          "of the library's (%d)", before.n);

    /* One burst, with nothing read between its forks (a read would open
     * a generation): the honest worker 0, then the attackers. */
    spawn("honest", 1);
    for (size_t i = 0; i < NKINDS; i++)
        spawn(kinds[i], -1);
    for (int i = 0; i < n_kids; i++)
        printf("kind %s %d\n", i == honest ? "honest" : kinds[i - 1],
               (int)kids[i].pid);
    snprintf(buf, sizeof buf, "with %d children", n_kids);
    check_pair(buf);

    ok = wait_until(master_on, 1);
    check(ok, "the master follows the honest worker 0 to CPU 1 (all threads: "
          "%s)", master_cpus(buf, sizeof buf));

    started = cpu_us();
    started_wall = wall_us();
    ticking(false);
    close_end(&go[1]);
    ok = wait_until(all_done, NKINDS);
    flood_cpu = cpu_us() - started;
    flood_wall = wall_us() - started_wall;
    ticking(true);
    check(ok, "the attackers sent all they send (%ld of %zu said so)", n_done,
          NKINDS);
    for (int i = 1; i < n_kids; i++)
        if (is_kind(i, "killed"))
            kill(kids[i].pid, SIGKILL);
    ok = wait_until(drained, nulls);
    check(ok, "the master reads all the attackers sent (first datagram "
          "left: %ld bytes) and keeps none of the descriptors passed (%d of "
          "/dev/null, want %d)", queued(), devnulls(), nulls);
    printf("cpu_us %ld\nflood_cpu_us %ld\nflood_wall_us %ld\n",
           cpu_us() - started, flood_cpu, flood_wall);

    close_end(&end[1]);
    for (int i = 1; i < n_kids; i++)
        if (is_kind(i, "closer"))
            kill(kids[i].pid, SIGKILL);
    for (int i = 1; i < n_kids; i++) {
        bool killed = is_kind(i, "killed") || is_kind(i, "closer");
        status = reap(i);
        check(killed ? status != -1 && WIFSIGNALED(status) &&
                           WTERMSIG(status) == SIGKILL
                     : status != -1 && WIFEXITED(status) &&
                           WEXITSTATUS(status) == 0,
              "the %s child %s (status 0x%x)", kinds[i - 1],
              killed ? "is killed" : "sent all it meant to and exits 0",
              status);
    }
    check(master_on(1), "after the attacks the master is still on CPU 1 (all "
          "threads: %s)", master_cpus(buf, sizeof buf));
    check(kill(kids[honest].pid, 0) == 0, "the honest worker 0 still lives");
    check_pair("after the attacks");

    /* Its real children are still tracked: the next workers are followed. */
    kill(kids[honest].pid, SIGKILL);
    reap(honest);
    w0 = n_kids;
    spawn("honest", 0);
    w1 = n_kids;
    spawn("honest", 1);
    printf("kind later0 %d\nkind later1 %d\n", (int)kids[w0].pid,
           (int)kids[w1].pid);
    ok = wait_until(master_on, 0);
    check(ok, "a later honest worker 0 on CPU 0 is followed (all threads: %s)",
          master_cpus(buf, sizeof buf));
    kill(kids[w0].pid, SIGKILL);
    kill(kids[w1].pid, SIGKILL);
    reap(w0);
    reap(w1);
    check_pair("with no child left");
    return failures != 0;
}

static void liar(void)
{
    unsigned char msg[MA_REPORT_SIZE];
    cpu_set_t set;
    sigset_t both;
    int ch = own_socket("liar"), sig;

    sigemptyset(&both);
    sigaddset(&both, SIGUSR1);
    sigaddset(&both, SIGUSR2);
    sigprocmask(SIG_BLOCK, &both, NULL);
    if (ch < 0)
        _exit(1);
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    cpus(&set, 2, CPU_SETSIZE - 1);
    forge(msg, MA_REPORT_VERSION, &set);
    send_one(ch, msg, sizeof msg);
    for (;;) {
        if (sigwait(&both, &sig) != 0)
            continue;
        if (sig == SIGUSR1) {
            CPU_ZERO(&set);
            cpus(&set, 5, CPU_SETSIZE - 1);
            forge(msg, MA_REPORT_VERSION, &set);
            send_one(ch, msg, sizeof msg);
        } else {
            pin(1);
        }
    }
}

static volatile sig_atomic_t stop;
static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

/* Sleeps in sigsuspend with SIGTERM let in there only, as nginx sleeps:
 * the library reads the liar's reports in that sleep. */
static int mode_liar(void)
{
    sigset_t open;
    pid_t l, h;
    handle_in_sleep_only(SIGTERM, on_term, &open);
    l = fork();
    if (l == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        liar();
    }
    kids[n_kids++].pid = l;
    h = spawn("honest", 1);
    printf("ready %d %d %d\n", (int)getpid(), (int)l, (int)h);
    while (!stop)
        sigsuspend(&open);
    kill(l, SIGKILL);
    kill(h, SIGKILL);
    reap(0);
    reap(1);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    const char *how = argc > 2 ? argv[2] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_DFL);
    if (strcmp(mode, "junk") == 0 &&
        (strcmp(how, "reap") == 0 || strcmp(how, "sleep") == 0)) {
        style = strcmp(how, "sleep") == 0 ? SLEEP : REAP;
        if (style == SLEEP)
            setup_sleep();
        return mode_junk();
    }
    if (strcmp(mode, "liar") == 0)
        return mode_liar();
    fprintf(stderr, "usage: %s junk reap|sleep | liar\n", argv[0]);
    return 2;
}
