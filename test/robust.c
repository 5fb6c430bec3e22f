/* robust MODE: a target master that does what real programs do and the
 * library must survive (run it with MASTERAFF_PROGRAMS=robust and a fake
 * tree in which CPUs 0 and 1 are two packages on node 0). Each mode prints
 * "ok - ..." / "not ok - ..." lines and exits 0 when all passed.
 *
 *   unmap    worker 0 re-pins between CPU 0 and 1 every 10 ms (and is
 *            respawned after a few pins) while the main thread maps, fills
 *            and unmaps 64 MiB of shared anonymous memory, for 3 s: the
 *            master must not die while the library moves its pages.
 *   forkrace two threads fork at once, 10 times; each child then forks
 *            once itself, becoming a master: its listener thread must not
 *            spin (it would wait forever for a fork its parent made).
 *   follow   worker 0 pins itself to CPU 1: the master follows within 2 s.
 *            The program holds 96 KiB of static TLS, which glibc puts on
 *            every thread's stack, the library's listener's too.
 *   vforkexec  after following worker 0, the master vforks a child that
 *            execs true through execvp; a child forked after that must
 *            not inherit the master's preferred memory node.
 *   vforksetsid  worker 0 vforks a child that calls setsid and exits, then
 *            pins itself: the master must still follow it.
 *   closefrom  after its first fork, the master closes every descriptor
 *            above 2 and opens a log (fd 3); its next child must find its
 *            fd 3 open, and so must the master after that fork.
 *   ownepoll after its first fork, the master closes every descriptor
 *            above 2, makes its own epoll set and eventfd (which take the
 *            library's numbers) and forks again: its set must hold only
 *            its own entry, under its own data, and its eventfd count only
 *            what it wrote.
 *   ownset   the same, but the master closes only the library's set and
 *            eventfd (fds 3 and 4): worker 0's channel stays open, and
 *            the program's set under the library's number does not hold
 *            it.
 *   ownmask  once the master follows worker 0 to CPU 1, it pins itself to
 *            CPU 0: sched_getaffinity must say CPU 0 (not the mask it
 *            started with), its next child must start on CPU 0, and the
 *            master must stay there when worker 0 pins again.
 *   policy   worker 0 re-pins between CPU 1 and 0 while the master forks in
 *            a loop, so that some follows are decided inside fork by the
 *            main thread: once it prefers worker 0's node it must keep it.
 *   touchup  (MASTERAFF_LOG=info) the master follows worker 0, then after
 *            0.6 s forks a child that never pins, then waits 0.6 s: the
 *            caller counts two "after its later forks" lines.
 *   tengine  assigns worker CPUs from the master's own affinity
 *            (sched_getaffinity), as a server deriving "auto" from it
 *            would (a Tengine branch's "auto_online_cpu"), worker n on the
 *            n-th allowed CPU counted from the last: two workers, then,
 *            once the master followed worker 0, two more (a reload) from
 *            a fresh read: both generations must get the same CPUs.
 */
#define _GNU_SOURCE
#include "helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* From <numaif.h>, which the test does not need. */
#define MPOL_DEFAULT_MODE 0
#define MPOL_PREFERRED_MODE 1

/* Thread-local buffers as large programs have them: the listener thread's
 * stack must hold a copy. */
__thread char tls_buffer[96 * 1024];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* A child that dies with its parent and runs body. */
static pid_t spawn(void (*body)(void))
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        body();
        _exit(0);
    }
    return pid;
}

static void repinning_worker(void)
{
    for (int i = 0; i < 8; i++) {
        pin_to(i % 2);
        usleep(10000);
    }
}

static int mode_unmap(void)
{
    const size_t size = 64 << 20;
    /* A bound for a hang only: the rounds are counted, never timed, so
     * that a busy machine runs as many as an idle one. */
    double end = now_s() + 120;
    pid_t worker = spawn(repinning_worker);
    unsigned maps = 0, respawns = 0;

    while ((maps <= 10 || respawns <= 3) && now_s() < end) {
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        memset(p, 1, size);
        munmap(p, size);
        maps++;
        if (waitpid(worker, NULL, WNOHANG) == worker) {
            worker = spawn(repinning_worker);
            respawns++;
        }
    }
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    check(maps > 10 && respawns > 3,
          "the master lived through %u unmaps of 64 MiB while worker 0 "
          "re-pinned (%u respawns)", maps, respawns);
    return failures != 0;
}

/* CPU time, in clock ticks, of this process's thread named name, or -1. */
static long thread_ticks(const char *name)
{
    char path[64], buf[512];
    long ticks = -1;
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        FILE *f;
        unsigned long ut, st;
        char comm[32];
        snprintf(path, sizeof path, "/proc/self/task/%.16s/stat", de->d_name);
        if (de->d_name[0] == '.' || !(f = fopen(path, "r")))
            continue;
        if (fgets(buf, sizeof buf, f) &&
            sscanf(buf, "%*d (%31[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u "
                   "%*u %*u %lu %lu", comm, &ut, &st) == 3 &&
            strcmp(comm, name) == 0)
            ticks = (long)(ut + st);
        fclose(f);
    }
    if (d)
        closedir(d);
    return ticks;
}

/* A child of the race: becomes a master by forking once, then reports
 * through its exit status whether its listener spun for 300 ms. */
static void master_of_one(void)
{
    pid_t pid = fork();
    long ticks;
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    usleep(300000);
    ticks = thread_ticks("masteraff");
    _exit(ticks < 0 ? 3 : ticks > sysconf(_SC_CLK_TCK) / 10 ? 1 : 0);
}

static pthread_barrier_t both;
static int spun, unknown;

static void *racer(void *arg)
{
    (void)arg;
    for (int round = 0; round < 10; round++) {
        int status, code;
        pid_t pid;
        pthread_barrier_wait(&both);
        pid = fork();
        if (pid == 0)
            master_of_one();
        waitpid(pid, &status, 0);
        code = WEXITSTATUS(status);
        if (code)
            __atomic_add_fetch(code == 1 ? &spun : &unknown, 1,
                               __ATOMIC_RELAXED);
    }
    return NULL;
}

static int mode_forkrace(void)
{
    pthread_t t[2];
    pthread_barrier_init(&both, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, racer, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    check(unknown == 0, "each child found its listener thread (%d did not)",
          unknown);
    check(spun == 0, "no child's listener spun (%d of 20 did)", spun);
    return failures != 0;
}

/* The kernel's word: the library shows a master it moved its original
 * mask through sched_getaffinity. */
static bool runs_on(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    return syscall(SYS_sched_getaffinity, 0, sizeof set, &set) > 0 &&
           CPU_COUNT(&set) == 1 && CPU_ISSET(cpu, &set);
}

static bool wait_until_on(int cpu)
{
    for (int i = 0; i < 200 && !runs_on(cpu); i++)
        usleep(10000);
    return runs_on(cpu);
}

static void pinned_worker(void)
{
    pin_to(1);
    pause();
}

static int mode_follow(void)
{
    pid_t worker;
    *(volatile char *)tls_buffer = 1;
    worker = spawn(pinned_worker);
    check(wait_until_on(1), "the master follows worker 0 to CPU 1");
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

static int policy_mode(void)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 8 * sizeof(long), NULL,
                0UL) < 0)
        return -1;
    return mode;
}

/* A child that exits with 0 when its memory policy is the default. */
static void default_policy_child(void)
{
    _exit(policy_mode() == MPOL_DEFAULT_MODE ? 0 : 1);
}

static int exit_status_of(pid_t pid)
{
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int mode_vforkexec(void)
{
    char *const args[] = {"true", NULL};
    pid_t worker = spawn(pinned_worker), pid;
    check(wait_until_on(1), "the master follows worker 0 to CPU 1");
    exit_status_of(spawn(default_policy_child));
    check(policy_mode() == MPOL_PREFERRED_MODE,
          "its main thread prefers worker 0's node after a fork");
    pid = vfork();
    if (pid == 0) {
        execvp("true", args);
        _exit(127);
    }
    check(exit_status_of(pid) == 0, "a vfork child execs true");
    check(exit_status_of(spawn(default_policy_child)) == 0,
          "a child forked after it starts with the default memory policy");
    check(policy_mode() == MPOL_PREFERRED_MODE,
          "and the master still prefers worker 0's node");
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

static void detaching_worker(void)
{
    pid_t pid = vfork();
    if (pid == 0) {
        setsid();
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    pinned_worker();
}

static int mode_vforksetsid(void)
{
    pid_t worker = spawn(detaching_worker);
    check(wait_until_on(1), "the master follows worker 0, whose vfork child "
          "called setsid, to CPU 1");
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

static void fd3_child(void)
{
    _exit(fcntl(3, F_GETFD) == 0 ? 0 : 1);
}

static int mode_closefrom(void)
{
    pid_t worker = spawn(pinned_worker);
    int fd;
    check(wait_until_on(1), "the master follows worker 0 to CPU 1");
    for (fd = 3; fd < 1024; fd++)
        close(fd);
    fd = open("/dev/null", O_WRONLY); /* the program's log, no close-on-exec */
    check(fd == 3, "the master's log is fd 3 (%d)", fd);
    check(exit_status_of(spawn(fd3_child)) == 0,
          "its next child finds fd 3 open");
    check(fcntl(3, F_GETFD) == 0, "and so does the master");
    check(exit_status_of(spawn(fd3_child)) == 0,
          "and the child after that one");
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

static void quiet_child(void)
{
    _exit(0);
}

/* The entries /proc/self/fdinfo lists in epoll set fd, or -1. */
static int set_entries(int fd)
{
    char path[64], line[256];
    int n = 0;
    FILE *f;
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    if (!(f = fopen(path, "re")))
        return -1;
    while (fgets(line, sizeof line, f))
        n += strncmp(line, "tfd:", 4) == 0;
    fclose(f);
    return n;
}

/* The program closes descriptors 3 to last - 1 (the library's set and
 * eventfd are 3 and 4, worker 0's channel 5), then makes its own set and
 * eventfd, which take the library's numbers, as the library did. */
static int own_set_after_closing(int last)
{
    pid_t worker = spawn(pinned_worker);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 42}, got[4];
    uint64_t one = 1, count = 0;
    int set, efd, n;
    check(wait_until_on(1), "the master follows worker 0 to CPU 1");
    for (int fd = 3; fd < last; fd++)
        close(fd);
    set = epoll_create1(EPOLL_CLOEXEC);
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    check(set == 3 && efd == 4, "the program's epoll set and eventfd are "
          "fds 3 and 4, the library's numbers (%d, %d)", set, efd);
    check(epoll_ctl(set, EPOLL_CTL_ADD, efd, &ev) == 0,
          "the program adds its eventfd to its set");
    exit_status_of(spawn(quiet_child));
    check(set_entries(set) == 1, "after the next fork its set holds one "
          "entry (%d)", set_entries(set));
    n = epoll_wait(set, got, 4, 0);
    check(n == 0, "and nothing is ready before the program writes (%d)", n);
    check(write(efd, &one, sizeof one) == sizeof one, "the program writes 1");
    n = epoll_wait(set, got, 4, 1000);
    check(n == 1 && got[0].data.u64 == 42 && got[0].events == EPOLLIN,
          "its set says its own event: one, data 42, EPOLLIN (%d, %llu, %#x)",
          n, n > 0 ? (unsigned long long)got[0].data.u64 : 0ULL,
          n > 0 ? got[0].events : 0);
    if (read(efd, &count, sizeof count) != sizeof count)
        count = 0;
    check(count == 1, "its eventfd holds what it wrote, 1 (%llu)",
          (unsigned long long)count);
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

static int mode_ownepoll(void)
{
    return own_set_after_closing(1024);
}

/* Worker 0's channel stays open, and the program's set does not hold it. */
static int mode_ownset(void)
{
    return own_set_after_closing(5);
}

/* The mask sched_getaffinity gives, as a CPU number, or -1 for several. */
static int read_back_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) < 0 || CPU_COUNT(&set) != 1)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            return c;
    return -1;
}

static void on_cpu0_child(void)
{
    _exit(runs_on(0) ? 0 : 1);
}

static void repinning_to_1(void)
{
    pin_to(1);
    usleep(300000);
    pin_to(1);
    pause();
}

static int mode_ownmask(void)
{
    pid_t worker = spawn(repinning_to_1);
    check(wait_until_on(1), "the master follows worker 0 to CPU 1");
    check(pin_to(0) == 0, "the master pins itself to CPU 0");
    check(read_back_cpu() == 0, "sched_getaffinity says CPU 0 (%d)",
          read_back_cpu());
    check(exit_status_of(spawn(on_cpu0_child)) == 0,
          "its next child starts on CPU 0");
    usleep(500000); /* worker 0 pins again meanwhile */
    check(runs_on(0), "the master stays on CPU 0 after worker 0 pins again");
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

static void alternating_worker(void)
{
    for (int i = 0; i < 12; i++) {
        pin_to(1 - i % 2);
        usleep(20000);
    }
    pause();
}

/* Forks without waiting, so that the main thread keeps the CPU it shares
 * with the listener and often reads worker 0's report itself. */
static int mode_policy(void)
{
    pid_t worker = spawn(alternating_worker);
    double end = now_s() + 0.4;
    unsigned forks = 0, lost = 0;
    bool preferred = false;
    while (now_s() < end) {
        if (fork() == 0)
            _exit(0);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        forks++;
        if (policy_mode() == MPOL_PREFERRED_MODE)
            preferred = true;
        else if (preferred)
            lost++;
    }
    check(preferred, "the master's main thread took worker 0's node");
    check(lost == 0, "and kept it through %u forks while worker 0 re-pinned "
          "(lost it after %u)", forks, lost);
    kill(worker, SIGKILL);
    while (wait(NULL) > 0)
        ;
    return failures != 0;
}

static void idle_child(void)
{
    pause();
}

static int mode_touchup(void)
{
    pid_t worker = spawn(pinned_worker), idle;
    check(wait_until_on(1), "the master follows worker 0 to CPU 1");
    usleep(600000);
    idle = spawn(idle_child);
    usleep(600000);
    kill(idle, SIGKILL);
    kill(worker, SIGKILL);
    waitpid(idle, NULL, 0);
    waitpid(worker, NULL, 0);
    return failures != 0;
}

/* An auto from the master's affinity: worker n on the n-th CPU of it,
 * counted from the last, read when the workers are forked. */
static void auto_workers(pid_t w[2], int cpus[2])
{
    cpu_set_t set;
    int allowed[CPU_SETSIZE], n = 0;
    sched_getaffinity(0, sizeof set, &set);
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (CPU_ISSET(c, &set))
            allowed[n++] = c;
    for (int i = 0; i < 2; i++) {
        cpus[i] = allowed[i % n];
        w[i] = fork();
        if (w[i] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            pin_to(cpus[i]);
            pause();
            _exit(0);
        }
    }
}

static int mode_tengine(void)
{
    pid_t first[2], second[2];
    int cpus1[2], cpus2[2];
    auto_workers(first, cpus1);
    check(wait_until_on(cpus1[0]), "the master follows worker 0 to CPU %d",
          cpus1[0]);
    auto_workers(second, cpus2);
    check(cpus1[0] == cpus2[0] && cpus1[1] == cpus2[1],
          "a reload after the move assigns the same CPUs (%d %d, then %d %d)",
          cpus1[0], cpus1[1], cpus2[0], cpus2[1]);
    for (int i = 0; i < 2; i++) {
        kill(first[i], SIGKILL);
        kill(second[i], SIGKILL);
    }
    while (wait(NULL) > 0)
        ;
    return failures != 0;
}

static const struct {
    const char *name;
    int (*run)(void);
} modes[] = {
    {"unmap", mode_unmap},         {"forkrace", mode_forkrace},
    {"follow", mode_follow},       {"vforkexec", mode_vforkexec},
    {"vforksetsid", mode_vforksetsid}, {"closefrom", mode_closefrom},
    {"ownepoll", mode_ownepoll},     {"ownset", mode_ownset},
    {"ownmask", mode_ownmask},
    {"policy", mode_policy},       {"touchup", mode_touchup},
    {"tengine", mode_tengine},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc == 2 && i < sizeof modes / sizeof *modes; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return modes[i].run();
    fprintf(stderr, "usage: robust unmap|forkrace|follow|vforkexec|"
            "vforksetsid|closefrom|ownepoll|ownmask|policy|touchup|tengine\n");
    return 2;
}


