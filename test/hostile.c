/* hostile junk|liar: a master whose children attack it through their
 * channels (run it with MASTERAFF_PROGRAMS=hostile and a sysfs tree where
 * CPUs 0 and 1 are two packages).
 *
 * junk: one burst of children. Child 0 is an honest worker that pins itself
 *   to CPU 1. The others find their channel (the only SOCK_SEQPACKET
 *   descriptor they have) and send garbage, a bad version, an empty mask, a
 *   truncated, an oversized and a huge message, an empty message, a valid
 *   report carrying 64 descriptors, a valid report for CPUs the master does
 *   not have, 1,000,000 junk messages, 1,000,000 valid reports; one is
 *   killed while it writes, one closes its channel and lives on. The master
 *   checks that it follows child 0 all along, that it keeps no channel of
 *   theirs and none of the passed descriptors once they are gone, then that
 *   a later honest worker 0 (pinned to CPU 0) is still followed. It prints "ok - ..." / "not ok - ..." lines,
 *   "kind KIND PID" for each child, and "cpu_us N": its own CPU time
 *   (getrusage RUSAGE_SELF, all threads: the library's listener included).
 *
 * liar: child 0 is a liar, child 1 an honest worker on CPU 1. The liar
 *   reports CPUs 0,2-1023 at once, CPUs 5-1023 on SIGUSR1, and on SIGUSR2
 *   really pins itself to CPU 1. Prints "ready MASTER LIAR HONEST", then
 *   sleeps until SIGTERM, when it kills and reaps both; the caller checks. */
#define _GNU_SOURCE
#include "../report.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "helpers.h"

#define FLOOD 1000000


static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- the children's side ---- */

/* The library's channel: the only SOCK_SEQPACKET descriptor. */
static int channel(void)
{
    int fd = -1;
    return sockets_of_type(SOCK_SEQPACKET, &fd) == 1 ? fd : -1;
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

static void attack(const char *kind, int sync_fd)
{
    unsigned char msg[MA_REPORT_SIZE], big[MA_REPORT_SIZE + 1000];
    static unsigned char huge[200000];
    cpu_set_t set;
    int ch = channel(), rc = 0;

    if (ch < 0) {
        printf("not ok - %s child %d has no channel\n", kind, (int)getpid());
        _exit(1);
    }
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    srand((unsigned)getpid());
    for (size_t i = 0; i < sizeof msg; i++)
        msg[i] = (unsigned char)rand();

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
        int fds[64];
        union {
            char buf[CMSG_SPACE(sizeof fds)];
            struct cmsghdr align;
        } u;
        struct iovec iov = {msg, sizeof msg};
        struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                            .msg_control = u.buf,
                            .msg_controllen = sizeof u.buf};
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        for (int i = 0; i < 64; i++)
            fds[i] = open("/dev/null", O_RDONLY);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof fds);
        memcpy(CMSG_DATA(cm), fds, sizeof fds);
        forge(msg, MA_REPORT_VERSION, &set);
        rc = sendmsg(ch, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof msg ? 0 : -1;
    } else if (strcmp(kind, "liar") == 0) {
        CPU_ZERO(&set);
        cpus(&set, 2, CPU_SETSIZE - 1);
        forge(msg, MA_REPORT_VERSION, &set);
        rc = send_one(ch, msg, sizeof msg);
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
        /* Writes until killed: the master kills it once it has started. */
        forge(big, MA_REPORT_VERSION, &set);
        for (long i = 0;; i++) {
            send(ch, i % 2 ? big : msg, i % 2 ? sizeof big : sizeof msg,
                 MSG_NOSIGNAL);
            if (i == 10 && write(sync_fd, "x", 1) != 1)
                _exit(1);
        }
    } else if (strcmp(kind, "closer") == 0) {
        close(ch);
        for (;;)
            pause();
    }
    if (rc < 0)
        printf("# %s: send failed: %s\n", kind, strerror(errno));
    _exit(0);
}

/* ---- the master's side ---- */

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

static int wait_master_on(const char *want, int secs)
{
    char buf[4096];
    for (int i = 0; i < secs * 100; i++) {
        if (strcmp(master_cpus(buf, sizeof buf), want) == 0)
            return 1;
        sleep_ms(10);
    }
    return 0;
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

/* Waits until the master has `want` channels and no more /dev/null
 * descriptors than `nulls`. */
static int wait_fds(int want, int nulls, int secs)
{
    for (int i = 0; i < secs * 100; i++) {
        if (seqpacket_fds() == want && devnulls() <= nulls)
            return 1;
        sleep_ms(10);
    }
    return 0;
}

static pid_t spawn(const char *kind, int cpu, int sync_fd)
{
    pid_t pid = fork();
    if (pid < 0) {
        check(0, "fork of %s: %s", kind, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (cpu < 0)
            attack(kind, sync_fd);
        if (pin(cpu) < 0)
            _exit(1);
        for (;;)
            pause();
    }
    return pid;
}

/* Reaps pid within secs; returns its status, or -1 (then it is killed). */
static int reap(pid_t pid, int secs)
{
    int status;
    for (int i = 0; i < secs * 100; i++) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        if (r < 0)
            return -1;
        sleep_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

static const char *const kinds[] = {
    "garbage", "badversion", "emptymask", "truncated", "oversized", "huge",
    "empty", "fdpass", "liar", "junkflood", "validflood", "killed", "closer",
};
#define NKINDS (sizeof kinds / sizeof *kinds)

static int mode_junk(void)
{
    pid_t honest, kids[NKINDS], w0, w1;
    int sync[2], nulls, status, ok;
    char buf[4096], c;
    struct rusage ru;

    if (pipe2(sync, O_CLOEXEC) < 0)
        return 2;
    nulls = devnulls();

    /* One burst: the honest worker 0, then the attackers. */
    honest = spawn("honest", 1, -1);
    for (size_t i = 0; i < NKINDS; i++)
        kids[i] = spawn(kinds[i], -1, sync[1]);
    printf("kind honest %d\n", (int)honest);
    for (size_t i = 0; i < NKINDS; i++)
        printf("kind %s %d\n", kinds[i], (int)kids[i]);

    ok = wait_master_on("1", 10);
    check(ok, "the master follows the honest worker 0 to CPU 1 (all threads: %s)",
          master_cpus(buf, sizeof buf));

    for (size_t i = 0; i < NKINDS; i++) {
        if (strcmp(kinds[i], "killed") == 0) {
            if (read(sync[0], &c, 1) == 1)
                kill(kids[i], SIGKILL);
        } else if (strcmp(kinds[i], "closer") == 0) {
            sleep_ms(50);
            kill(kids[i], SIGKILL);
        }
    }
    for (size_t i = 0; i < NKINDS; i++) {
        int want_killed = strcmp(kinds[i], "killed") == 0 ||
                          strcmp(kinds[i], "closer") == 0;
        status = reap(kids[i], 120);
        check(want_killed ? status != -1 && WIFSIGNALED(status)
                          : status != -1 && WIFEXITED(status) &&
                                WEXITSTATUS(status) == 0,
              "the %s child ends as it should (status 0x%x)", kinds[i],
              status);
    }

    ok = wait_fds(1, nulls, 10);
    check(ok, "no descriptor left over from the attackers: %d channels (want "
          "1, worker 0's), %d descriptors of /dev/null (want %d)",
          seqpacket_fds(), devnulls(), nulls);
    check(strcmp(master_cpus(buf, sizeof buf), "1") == 0,
          "after the attacks the master is still on CPU 1 (all threads: %s)",
          buf);
    check(kill(honest, 0) == 0, "the honest worker 0 still lives");

    getrusage(RUSAGE_SELF, &ru);
    printf("cpu_us %ld\n", (long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) *
                                   1000000L +
                               ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);

    /* Its real children are still tracked: the next workers are followed. */
    kill(honest, SIGKILL);
    reap(honest, 10);
    w0 = spawn("honest", 0, -1);
    w1 = spawn("honest", 1, -1);
    printf("kind later0 %d\nkind later1 %d\n", (int)w0, (int)w1);
    ok = wait_master_on("0", 10);
    check(ok, "a later honest worker 0 on CPU 0 is followed (all threads: %s)",
          master_cpus(buf, sizeof buf));
    kill(w0, SIGKILL);
    kill(w1, SIGKILL);
    reap(w0, 10);
    reap(w1, 10);
    ok = wait_fds(0, nulls, 10);
    check(ok, "with no child left, no channel is left: %d", seqpacket_fds());
    return failures != 0;
}

static void liar(void)
{
    unsigned char msg[MA_REPORT_SIZE];
    cpu_set_t set;
    sigset_t both;
    int ch = channel(), sig;

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

static int mode_liar(void)
{
    pid_t l = fork(), h;
    if (l == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        liar();
    }
    h = spawn("honest", 1, -1);
    signal(SIGTERM, on_term);
    printf("ready %d %d %d\n", (int)getpid(), (int)l, (int)h);
    while (!stop)
        pause();
    kill(l, SIGKILL);
    kill(h, SIGKILL);
    reap(l, 10);
    reap(h, 10);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_DFL);
    if (strcmp(mode, "junk") == 0)
        return mode_junk();
    if (strcmp(mode, "liar") == 0)
        return mode_liar();
    fprintf(stderr, "usage: %s junk|liar\n", argv[0]);
    return 2;
}
