/* libmasteraff: the state the interposers, the decisions and the
 * listener share (state.h says what each part owns and the lock), and the
 * descriptors the library makes: closed only while their number is still
 * the library's. */
#define _GNU_SOURCE
#include "state.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

struct ma_real real;
struct ma_self self = {.report = NO_FD, .epoll = NO_FD, .wake = NO_FD};
struct ma_brood brood;
struct ma_start start;
struct ma_topology topology;
pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
int forks_waiting;

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

/* Every epoll set shares one inode, and so does every eventfd, so fstat
 * cannot tell them apart: ours are the set that holds our eventfd under
 * its number, which EPOLL_CTL_MOD finds there and nowhere else (a set
 * keys its entries by file and number). One system call, at every fork.
 * MOD rather than ADD: a set of the program's is not touched even for a
 * moment. */
bool ma_epoll_is_ours(void)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = self.wake.fd};
    int e = errno;
    bool ours = self.epoll.fd >= 0 && self.wake.fd >= 0 &&
                epoll_ctl(self.epoll.fd, EPOLL_CTL_MOD, ev.data.fd, &ev) == 0;
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

/* Closes what is still ours of the master's descriptors: the program may
 * have closed them (all descriptors above 2, say) and reused the numbers. */
void ma_stop_being_master(void)
{
    for (size_t i = 0; i < brood.n; i++)
        if (ma_channel_is_ours(&brood.kids[i]))
            ma_close_keeping_errno(brood.kids[i].fd);
    brood.n = 0;
    if (ma_epoll_is_ours())
        ma_close_keeping_errno(self.epoll.fd);
    self.epoll.fd = -1;
    ma_release(&self.wake);
}

void ma_wake_listener(void)
{
    uint64_t one = 1;
    if (write(self.wake.fd, &one, sizeof one) < 0)
        return;
}
