/* libmasteraff: the state the interposers, the decisions and the
 * listener share (state.h says what each part owns and the lock), and the
 * descriptors the library makes: closed only while their number is still
 * the library's. */
#define _GNU_SOURCE
#include "state.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>

struct ma_real real;
struct ma_self self = {.report = NO_FD, .epoll = NO_FD, .wake = NO_FD};
struct ma_brood brood;
struct ma_start start;
struct ma_topology topology;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int forks_waiting;
pid_t listener_tid;

/* Marks a slot whose symbol was looked up and not found. */
#define NOT_FOUND ((void *)&real)

/* The next definition of name, looked up once. A program the library
 * leaves alone looks up fork and the affinity functions when it first
 * calls them, so that it pays for no lookup it does not need; if another
 * thread is inside dlopen just then, that first call waits for it. */
void *ma_next_definition(void **slot, const char *name)
{
    void *f = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        __atomic_store_n(slot, f ? f : NOT_FOUND, __ATOMIC_RELEASE);
    }
    return f == NOT_FOUND ? NULL : f;
}

void ma_close_keeping_errno(int fd)
{
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
}

struct owned_fd ma_own(int fd)
{
    struct owned_fd o = {.fd = fd};
    struct stat st;
    if (fd >= 0 && ma_fstat(fd, &st) == 0) {
        o.dev = st.st_dev;
        o.ino = st.st_ino;
    }
    return o;
}

bool ma_same_file(int fd, dev_t dev, ino_t ino)
{
    struct stat st;
    int e = errno;
    bool same = fd >= 0 && ma_fstat(fd, &st) == 0 && st.st_dev == dev &&
                st.st_ino == ino;
    errno = e;
    return same;
}

bool ma_is_ours(const struct owned_fd *o)
{
    return ma_same_file(o->fd, o->dev, o->ino);
}

void ma_release(struct owned_fd *o)
{
    if (ma_is_ours(o))
        ma_close_keeping_errno(o->fd);
    o->fd = -1;
}

/* The decimal digits of n, written backwards from end (which ends the
 * string); returns the first. */
static char *digits_before(char *end, unsigned n)
{
    do
        *--end = (char)('0' + n % 10);
    while (n /= 10);
    return end;
}

/* Whether one line of an epoll set's fdinfo ("tfd: 4 events: 19 data:
 * 6d61737465726166 ...") is the entry of descriptor fd under data. */
static bool is_entry(const char *line, int fd, uint64_t data)
{
    const char *at;
    if (strncmp(line, "tfd:", 4) != 0 || strtol(line + 4, NULL, 10) != fd)
        return false;
    at = strstr(line, "data:");
    return at && strtoull(at + 5, NULL, 16) == data;
}

/* Whether the set's fdinfo lists an entry of fd under data. Reads it a
 * chunk at a time, any number of entries long, with system calls and no
 * allocation: a fork's child calls it too. */
static bool set_holds(int set, int fd, uint64_t data)
{
    char path[48] = "/proc/self/fdinfo/", num[16] = "", buf[1024], *line, *nl;
    size_t kept = 0;
    ssize_t n;
    bool found = false;
    int info;

    strcat(path, digits_before(num + sizeof num - 1, (unsigned)set));
    if ((info = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return false;
    while (!found && (n = read(info, buf + kept, sizeof buf - 1 - kept)) > 0) {
        buf[kept + (size_t)n] = '\0';
        for (line = buf; !found && (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = '\0';
            found = is_entry(line, fd, data);
        }
        kept = strlen(line);
        if (kept == sizeof buf - 1) /* no entry line is that long */
            kept = 0;
        memmove(buf, line, kept);
    }
    close(info);
    return found;
}

/* kcmp(2)'s KCMP_EPOLL_TFD (Linux 4.13), declared here: musl's headers
 * leave the kernel's out. */
#define KCMP_EPOLL_TFD_ 7
struct kcmp_epoll_slot_ {
    uint32_t efd, tfd;
    uint64_t toff;
};

/* Whether set holds, under fd's number, the file that fd is now. False
 * too where kcmp is missing or refused (Docker's seccomp profile). */
static bool set_holds_file(int set, int fd)
{
    struct kcmp_epoll_slot_ slot = {.efd = (uint32_t)set,
                                    .tfd = (uint32_t)fd};
    pid_t me = getpid();
    return syscall(SYS_kcmp, me, me, KCMP_EPOLL_TFD_, fd, &slot) == 0;
}

/* The set's fdinfo has a line per channel, which the kernel writes out
 * at every read: the master reads it at each fork and each of its
 * listener's wake-ups, a cost that grows with the square of the workers.
 * A channel's socket shares its inode with no other file, so a set that
 * holds the newest one is the library's, and then so is the eventfd it
 * holds: two kcmp calls, whatever the number of channels. */
static bool set_holds_newest_channel(void)
{
    const struct ma_child *c = brood.n ? &brood.kids[brood.n - 1] : NULL;
    return c && ma_channel_is_ours(c) &&
           set_holds_file(self.epoll.fd, c->fd) &&
           set_holds_file(self.epoll.fd, self.wake.fd);
}

/* Every epoll set shares one inode, and so does every eventfd: fstat
 * cannot tell the library's from a program's that took their numbers
 * after closing them. The kernel lists a set's entries in its fdinfo: the
 * library's set is the one that holds the library's eventfd's number under
 * the library's mark (an entry goes when its file closes, so the number is
 * still that eventfd). Reading it modifies nothing of the program's. A
 * process without /proc cannot tell: the descriptors are not taken for the
 * library's. */
bool ma_epoll_is_ours(void)
{
    int e = errno;
    bool ours = self.epoll.fd >= 0 && self.wake.fd >= 0 &&
                (set_holds_newest_channel() ||
                 set_holds(self.epoll.fd, self.wake.fd, MA_WAKE_MARK));
    errno = e;
    return ours;
}

bool ma_channel_is_ours(const struct ma_child *c)
{
    return ma_same_file(c->fd, c->fd_dev, c->fd_ino);
}

void ma_lock_for_fork(void)
{
    __atomic_add_fetch(&forks_waiting, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock);
    __atomic_sub_fetch(&forks_waiting, 1, __ATOMIC_RELAXED);
}

void ma_give_up(const char *what, int err)
{
    self.gave_up = true;
    ma_log(MA_LOG_WARN, "%s: %s; process %d will not follow its children",
           what, strerror(err), getpid());
}

static void close_channels(void)
{
    for (size_t i = 0; i < brood.n; i++)
        if (ma_channel_is_ours(&brood.kids[i]))
            ma_close_keeping_errno(brood.kids[i].fd);
    brood.n = 0;
}

static void close_set(bool ours)
{
    if (ours) {
        ma_close_keeping_errno(self.epoll.fd);
        ma_close_keeping_errno(self.wake.fd);
    }
    self.epoll.fd = -1;
    self.wake.fd = -1;
}

/* Closes what is still ours of the master's descriptors: the program may
 * have closed them (all descriptors above 2, say) and reused the numbers.
 * The eventfd is the library's while its set holds it. */
void ma_stop_being_master(void)
{
    close_channels();
    close_set(ma_epoll_is_ours());
}

/* The same in a child of a master, whose fork found the set and the
 * eventfd the library's under the lock just before: the child need not
 * read the set's fdinfo again, one line per sibling (every child would,
 * a cost that grows with the square of the workers). */
void ma_stop_being_master_after_fork(void)
{
    close_channels();
    close_set(true);
}

/* The listener reckons its next timeout itself after each event: only
 * another thread (a fork's) wakes it. Nor may it write to the eventfd while
 * the program closes descriptors in another thread and takes the number. */
void ma_wake_listener(void)
{
    uint64_t one = 1;
    if (gettid() == listener_tid)
        return;
    if (write(self.wake.fd, &one, sizeof one) < 0)
        return;
}
