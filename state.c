/* libmasteraff: the state the interposers, the decisions, the channel and
 * the sleep share (state.h says what each part owns and the lock), and
 * the descriptors the library makes: closed only while their number is
 * still the library's. */
#define _GNU_SOURCE
#include "state.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

struct ma_real real;
struct ma_self self = {.report = NO_FD, .channel = NO_FD,
                       .children_end = NO_FD};
struct ma_brood brood;
struct ma_start start;
struct ma_topology topology;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

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

void ma_lock(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, old);
    pthread_mutex_lock(&lock);
}

void ma_unlock(const sigset_t *old)
{
    pthread_mutex_unlock(&lock);
    pthread_sigmask(SIG_SETMASK, old, NULL);
}

void ma_lock_after_fork(void)
{
    static const pthread_mutex_t unlocked = PTHREAD_MUTEX_INITIALIZER;
    memcpy(&lock, &unlocked, sizeof lock);
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

bool ma_is_ours(const struct owned_fd *o)
{
    struct stat st;
    int e = errno;
    bool same = o->fd >= 0 && ma_fstat(o->fd, &st) == 0 &&
                st.st_dev == o->dev && st.st_ino == o->ino;
    errno = e;
    return same;
}

void ma_release(struct owned_fd *o)
{
    if (ma_is_ours(o))
        ma_close_keeping_errno(o->fd);
    o->fd = -1;
}

void ma_give_up(const char *what, int err)
{
    self.gave_up = true;
    ma_log(MA_LOG_WARN, "%s: %s; process %d will not follow its children",
           what, strerror(err), getpid());
}

void ma_stop_being_master(void)
{
    ma_release(&self.channel);
    ma_release(&self.children_end);
    brood.n = 0;
}

/* The program may have closed the library's descriptors (all those above
 * 2, say) and reused the numbers: nothing is read from them then. */
bool ma_still_master(void)
{
    if (ma_is_ours(&self.channel) && ma_is_ours(&self.children_end))
        return true;
    ma_stop_being_master();
    ma_give_up("the program closed the library's channel", EBADF);
    return false;
}

/* Since Linux 6.2 the kernel keeps the mask a thread asked for within its
 * cpuset when the cpuset's CPUs change. A process on all of its cpuset's
 * CPUs, as a program that never asked for a mask is, is put back there by
 * asking for every CPU: the kernel gives it its cpuset's, and all of a
 * widened cpuset's later, as to a program that never asked. One on fewer
 * CPUs (taskset at start) asks for them, as the program did. */
void ma_original_request(cpu_set_t *out)
{
    if (CPU_COUNT(&self.cpuset) > 0 && CPU_EQUAL(&self.original, &self.cpuset))
        memset(out, 0xff, sizeof *out);
    else
        *out = self.original;
}
