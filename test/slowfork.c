/* A test-only preload, loaded before the library: every fork waits a
 * random 0-300 ms first, as a master does that waits for a CPU on a busy
 * machine or for its container's next CPU quota period. Forks of one burst
 * come hundreds of milliseconds apart, and a respawn long after the death
 * it replaces. SLOWFORK_MAX_MS sets the bound (default 300). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

typedef pid_t fork_fn(void);

static unsigned max_ms(void)
{
    const char *s = getenv("SLOWFORK_MAX_MS");
    return s && *s ? (unsigned)atoi(s) : 300;
}

/* A seed of its own per process: the clock's nanoseconds and the pid. */
static unsigned random_ms(void)
{
    static unsigned seed;
    struct timespec now;
    unsigned bound = max_ms();
    if (!seed) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        seed = (unsigned)now.tv_nsec ^ ((unsigned)getpid() << 16);
    }
    return bound ? (unsigned)rand_r(&seed) % (bound + 1) : 0;
}

pid_t fork(void)
{
    static fork_fn *next;
    int saved = errno;
    unsigned ms = random_ms();
    struct timespec wait = {.tv_sec = ms / 1000,
                            .tv_nsec = (long)(ms % 1000) * 1000000L};
    if (!next)
        next = (fork_fn *)dlsym(RTLD_NEXT, "fork");
    while (nanosleep(&wait, &wait) < 0 && errno == EINTR)
        ;
    errno = saved;
    return next();
}
