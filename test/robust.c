/* robust MODE: a target master that does what real programs do and the
 * library must survive (run it with MASTERAFF_PROGRAMS=robust and a fake
 * tree in which CPUs 0 and 1 are two packages on node 0). Each mode prints
 * "ok - ..." / "not ok - ..." lines and exits 0 when all passed.
 *
 * The library has no thread in the master: it reads what the children say
 * only at the master's forks, at its reaps (waitpid & co, with SIGCHLD at
 * its default disposition) and in its sleep (sigsuspend). So a master here
 * that waits for the library to follow a child waits the way uWSGI does,
 * polling its worker with waitpid(WNOHANG) between short sleeps
 * (wait_until_on), and one that must take no signal sleeps in sigsuspend
 * as nginx does (touchup, ownsock sleep). A child's verdict is its exit
 * status, 42 for a pass: a status lost on the way (0) is no pass.
 *
 *   unmap    worker 0 re-pins between CPU 0 and 1 every 10 ms (and is
 *            respawned after a few pins) while another thread maps,
 *            fills and unmaps 64 MiB of shared anonymous memory: the
 *            master must not die while the library, at the main thread's
 *            reaps, moves its pages.
 *   forkrace two threads fork at once, 10 times; each child then forks
 *            once itself, becoming a master, and reaps its child: neither
 *            may hang on the library's lock, which the other thread held
 *            at the fork, and each must hold its own channel.
 *   vforkexec  after following worker 0, the master vforks a child that
 *            execs true through execvp; a child forked after that must
 *            not inherit the master's preferred memory node.
 *   vforksetsid  worker 0 vforks a child that calls setsid and exits, then
 *            pins itself: the master must still follow it.
 *   closefrom  after its first fork, the master closes every descriptor
 *            above 2 and opens a log (fd 3); its next child must find its
 *            fd 3 open, and so must the master after that fork.
 *   ownsock-fork, ownsock-reap, ownsock-sleep  after following worker 0,
 *            the master closes
 *            every descriptor above 2 and makes its own datagram socket
 *            pair, which takes the library's numbers (3 and 4), with a
 *            datagram of its own waiting in it; then it forks a child that
 *            pins itself (fork), or reaps (reap), or sleeps in sigsuspend
 *            (sleep): the library must see that the descriptors are no
 *            longer its own, and never read, write or close them.
 *   ownmask  once the master follows worker 0 to CPU 1, it pins itself to
 *            CPU 0: sched_getaffinity must say CPU 0 (not the mask it
 *            started with), its next child must start on CPU 0, and the
 *            master must stay there when worker 0 pins to CPU 0, then to
 *            CPU 1 again.
 *   policy   worker 0 re-pins between CPU 1 and 0 while the master forks in
 *            a loop, so that follows are decided inside its forks and its
 *            reaps: once it prefers worker 0's node it must keep it.
 *   touchup  (MASTERAFF_LOG=info) the master sleeps in sigsuspend, woken
 *            by nothing but SIGUSR1: it follows worker 0; on a first
 *            SIGUSR1 it forks a child that never pins; on a second it
 *            ends. It prints "ready PID" first; the caller sends each
 *            SIGUSR1 once it has seen a "after its later forks" line: the
 *            pages move again 0.2 s after the follow, and after the later
 *            fork, from the sleep's own timeout.
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
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* From <numaif.h>, which the test does not need. */
#define MPOL_DEFAULT_MODE 0
#define MPOL_PREFERRED_MODE 1

#define CHILD_OK 42

/* A bound for a wait that will never end, never a guess at how long an
 * event takes. */
#define PATIENCE_S 120

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

static int exit_status_of(pid_t pid)
{
    int status = -1;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
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

/* Polls worker (alive: waitpid returns 0) until the master runs on cpu:
 * the library acts at those reaps. */
static bool wait_until_on(int cpu, pid_t worker)
{
    double end = now_s() + PATIENCE_S;
    while (!runs_on(cpu) && now_s() < end) {
        waitpid(worker, NULL, WNOHANG);
        usleep(10000);
    }
    return runs_on(cpu);
}

static void pinned_worker(void)
{
    pin_to(1);
    for (;;)
        pause();
}

static void end_worker(pid_t worker)
{
    kill(worker, SIGKILL);
    waitpid(worker, NULL, 0);
}

/* ---- unmap ---- */

static volatile bool unmapping = true;
static unsigned maps;

static void *unmapper(void *arg)
{
    const size_t size = 64 << 20;
    (void)arg;
    while (unmapping) {
        char *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            break;
        memset(p, 1, size);
        munmap(p, size);
        __atomic_add_fetch(&maps, 1, __ATOMIC_RELAXED);
    }
    return NULL;
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
    /* A bound for a hang only: the rounds are counted, never timed, so
     * that a busy machine runs as many as an idle one. */
    double end = now_s() + PATIENCE_S;
    pid_t worker = spawn(repinning_worker);
    unsigned respawns = 0;
    pthread_t t;

    pthread_create(&t, NULL, unmapper, NULL);
    while ((__atomic_load_n(&maps, __ATOMIC_RELAXED) <= 10 || respawns <= 3) &&
           now_s() < end) {
        if (waitpid(worker, NULL, WNOHANG) == worker) {
            worker = spawn(repinning_worker);
            respawns++;
        }
        usleep(1000);
    }
    unmapping = false;
    pthread_join(t, NULL);
    end_worker(worker);
    check(maps > 10 && respawns > 3,
          "the master lived through %u unmaps of 64 MiB while worker 0 "
          "re-pinned (%u respawns)", maps, respawns);
    return failures != 0;
}

/* ---- forkrace ---- */

/* A child of the race: becomes a master by forking once, and reaps its
 * child. It holds 3 datagram sockets then: the end it reports on to its
 * parent, and its own channel's two. */
static void master_of_one(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(CHILD_OK);
    _exit(pid > 0 && exit_status_of(pid) == CHILD_OK && unix_dgrams() == 3
              ? CHILD_OK : 1);
}

/* The verdict of a child of the race. One that found the library's lock
 * held (by the thread that forked while it was born) would wait for it
 * for ever, with every signal blocked as the library holds its lock:
 * after PATIENCE_S it is killed. */
static int verdict_of(pid_t pid)
{
    double end = now_s() + PATIENCE_S;
    int status;
    while (now_s() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        if (r < 0)
            return -1;
        usleep(10000);
    }
    end_worker(pid);
    return -1;
}

static pthread_barrier_t both;
static int failed_children;

/* Both threads read the count after the same barrier: they stop at the
 * same round, and neither waits for the other at the next. */
static void *racer(void *arg)
{
    (void)arg;
    for (int round = 0; round < 10; round++) {
        pid_t pid;
        pthread_barrier_wait(&both);
        if (__atomic_load_n(&failed_children, __ATOMIC_RELAXED))
            break;
        pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            master_of_one();
        }
        if (verdict_of(pid) != CHILD_OK)
            __atomic_add_fetch(&failed_children, 1, __ATOMIC_RELAXED);
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
    check(failed_children == 0, "each of 20 children forked, reaped its own "
          "child and held its own channel (%d did not; the race stops at "
          "the first)", failed_children);
    return failures != 0;
}

/* ---- vforkexec, vforksetsid ---- */

static int policy_mode(void)
{
    int mode = -1;
    unsigned long mask[16] = {0};
    if (syscall(SYS_get_mempolicy, &mode, mask, 16 * 8 * sizeof(long), NULL,
                0UL) < 0)
        return -1;
    return mode;
}

/* A child that passes when its memory policy is the default. */
static void default_policy_child(void)
{
    _exit(policy_mode() == MPOL_DEFAULT_MODE ? CHILD_OK : 1);
}

static int mode_vforkexec(void)
{
    char *const args[] = {"true", NULL};
    pid_t worker = spawn(pinned_worker), pid;
    check(wait_until_on(1, worker), "the master follows worker 0 to CPU 1");
    exit_status_of(spawn(default_policy_child));
    check(policy_mode() == MPOL_PREFERRED_MODE,
          "its main thread prefers worker 0's node after a fork");
    pid = vfork();
    if (pid == 0) {
        execvp("true", args);
        _exit(127);
    }
    check(exit_status_of(pid) == 0, "a vfork child execs true");
    check(exit_status_of(spawn(default_policy_child)) == CHILD_OK,
          "a child forked after it starts with the default memory policy");
    check(policy_mode() == MPOL_PREFERRED_MODE,
          "and the master still prefers worker 0's node");
    end_worker(worker);
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
    check(wait_until_on(1, worker), "the master follows worker 0, whose "
          "vfork child called setsid, to CPU 1");
    end_worker(worker);
    return failures != 0;
}

/* ---- closefrom, ownsock ---- */

static void close_from_3(void)
{
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
}

static void fd3_child(void)
{
    _exit(fcntl(3, F_GETFD) == 0 ? CHILD_OK : 1);
}

static int mode_closefrom(void)
{
    pid_t worker = spawn(pinned_worker);
    int fd;
    check(wait_until_on(1, worker), "the master follows worker 0 to CPU 1");
    close_from_3();
    fd = open("/dev/null", O_WRONLY); /* the program's log, no close-on-exec */
    check(fd == 3, "the master's log is fd 3 (%d)", fd);
    check(exit_status_of(spawn(fd3_child)) == CHILD_OK,
          "its next child finds fd 3 open");
    check(fcntl(3, F_GETFD) == 0, "and so does the master");
    check(exit_status_of(spawn(fd3_child)) == CHILD_OK,
          "and the child after that one");
    end_worker(worker);
    return failures != 0;
}

/* A child of a master that no longer has a channel: its fds 3 and 4 are
 * the program's, which the library must not close in it, nor report its
 * pin on. */
static void own_pair_child(void)
{
    bool open_fds = fcntl(3, F_GETFD) >= 0 && fcntl(4, F_GETFD) >= 0;
    _exit(open_fds && pin_to(0) == 0 ? CHILD_OK : 1);
}

static void on_alarm(int sig)
{
    (void)sig;
}

/* Sleeps once in sigsuspend, until a timer's signal. */
static void sleep_once(void)
{
    struct itimerval once = {{0, 0}, {0, 10000}};
    sigset_t open;
    handle_in_sleep_only(SIGALRM, on_alarm, &open);
    setitimer(ITIMER_REAL, &once, NULL);
    sigsuspend(&open);
    sigprocmask(SIG_SETMASK, &open, NULL);
}

static int mode_ownsock(const char *how)
{
    pid_t worker = spawn(pinned_worker);
    char buf[64];
    ssize_t n;
    int sv[2];

    check(wait_until_on(1, worker), "the master follows worker 0 to CPU 1");
    close_from_3();
    check(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0 && sv[0] == 3 &&
              sv[1] == 4,
          "the program's datagram socket pair takes fds 3 and 4, the "
          "library's numbers");
    check(send(4, "mine", 4, 0) == 4, "the program sends itself a datagram");
    if (strcmp(how, "fork") == 0)
        check(exit_status_of(spawn(own_pair_child)) == CHILD_OK,
              "its next child finds fds 3 and 4 open, and pins itself");
    else if (strcmp(how, "reap") == 0)
        check(waitpid(worker, NULL, WNOHANG) == 0, "the master polls worker "
              "0, which lives");
    else
        sleep_once();
    n = recv(3, buf, sizeof buf, MSG_DONTWAIT);
    check(n == 4 && memcmp(buf, "mine", 4) == 0,
          "the program reads its own datagram back (%zd bytes)", n);
    n = recv(3, buf, sizeof buf, MSG_DONTWAIT);
    check(n < 0 && errno == EAGAIN, "and nothing else: no report reached "
          "it (%zd)", n);
    check(fcntl(3, F_GETFD) >= 0 && fcntl(4, F_GETFD) >= 0,
          "both its descriptors are still open");
    end_worker(worker);
    return failures != 0;
}

static int mode_ownsock_fork(void)
{
    return mode_ownsock("fork");
}

static int mode_ownsock_reap(void)
{
    return mode_ownsock("reap");
}

static int mode_ownsock_sleep(void)
{
    return mode_ownsock("sleep");
}

/* ---- ownmask ---- */

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
    _exit(runs_on(0) ? CHILD_OK : 1);
}

/* Worker 0 of ownmask: pins to CPU 1; once its parent closes the other
 * end of go, pins to CPU 0, then to CPU 1, and says so on done. */
static int go[2], done[2];

static void repinning_on_word(void)
{
    char c;
    close(go[1]);
    pin_to(1);
    if (read(go[0], &c, 1) != 0)
        _exit(1);
    pin_to(0);
    pin_to(1);
    if (write(done[1], "x", 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

static int mode_ownmask(void)
{
    pid_t worker;
    char c;
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0)
        return 2;
    worker = spawn(repinning_on_word);
    close(go[0]);
    check(wait_until_on(1, worker), "the master follows worker 0 to CPU 1");
    check(pin_to(0) == 0, "the master pins itself to CPU 0");
    check(read_back_cpu() == 0, "sched_getaffinity says CPU 0 (%d)",
          read_back_cpu());
    check(exit_status_of(spawn(on_cpu0_child)) == CHILD_OK,
          "its next child starts on CPU 0");
    close(go[1]);
    check(read(done[0], &c, 1) == 1, "worker 0 pins to CPU 0, then to CPU 1");
    /* Both reports were sent before worker 0 said so: this reap reads
     * them. */
    waitpid(worker, NULL, WNOHANG);
    check(runs_on(0), "the master stays on CPU 0 after worker 0 pins again");
    end_worker(worker);
    return failures != 0;
}

/* ---- policy ---- */

static void alternating_worker(void)
{
    close(done[0]);
    for (int i = 0; i < 12; i++) {
        pin_to(1 - i % 2);
        usleep(20000);
    }
    if (write(done[1], "x", 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

static bool readable(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) == 1;
}

/* Forks without waiting until worker 0 has re-pinned 12 times: the
 * library reads its reports inside those forks and reaps. Nothing is
 * read between the forks (that would open generations): worker 0 says it
 * is done on a pipe that is polled, not read. */
static int mode_policy(void)
{
    pid_t worker;
    double end = now_s() + PATIENCE_S;
    unsigned forks = 0, lost = 0;
    bool preferred = false;
    if (pipe2(done, O_CLOEXEC) < 0)
        return 2;
    worker = spawn(alternating_worker);
    close(done[1]);
    while (!readable(done[0]) && now_s() < end) {
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

/* ---- touchup ---- */

static volatile sig_atomic_t usr1s;

static void on_usr1(int sig)
{
    (void)sig;
    usr1s++;
}

static void idle_child(void)
{
    for (;;)
        pause();
}

/* Sleeps in sigsuspend until the n-th SIGUSR1: the library's timed work
 * comes from its sleep's timeout, as no other signal wakes it. */
static void sleep_until_usr1(int n, const sigset_t *open)
{
    while (usr1s < n)
        sigsuspend(open);
}

static int mode_touchup(void)
{
    sigset_t open;
    pid_t worker, idle;
    handle_in_sleep_only(SIGUSR1, on_usr1, &open);
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready %d\n", (int)getpid());
    worker = spawn(pinned_worker);
    sleep_until_usr1(1, &open);
    check(runs_on(1), "the master followed worker 0 to CPU 1 in its sleep");
    idle = spawn(idle_child);
    sleep_until_usr1(2, &open);
    end_worker(idle);
    end_worker(worker);
    return failures != 0;
}

/* ---- tengine ---- */

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
    check(wait_until_on(cpus1[0], first[0]),
          "the master follows worker 0 to CPU %d", cpus1[0]);
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
    {"unmap", mode_unmap},
    {"forkrace", mode_forkrace},
    {"vforkexec", mode_vforkexec},
    {"vforksetsid", mode_vforksetsid},
    {"closefrom", mode_closefrom},
    {"ownsock-fork", mode_ownsock_fork},
    {"ownsock-reap", mode_ownsock_reap},
    {"ownsock-sleep", mode_ownsock_sleep},
    {"ownmask", mode_ownmask},
    {"policy", mode_policy},
    {"touchup", mode_touchup},
    {"tengine", mode_tengine},
};

int main(int argc, char **argv)
{
    for (size_t i = 0; argc == 2 && i < sizeof modes / sizeof *modes; i++)
        if (strcmp(argv[1], modes[i].name) == 0)
            return modes[i].run();
    fprintf(stderr, "usage: robust unmap|forkrace|vforkexec|vforksetsid|"
            "closefrom|ownsock-fork|ownsock-reap|ownsock-sleep|ownmask|"
            "policy|touchup|tengine\n");
    return 2;
}
