/* A test-only preload, loaded before the library: while the file
 * HOLDPIN_FILE names exists, sched_setaffinity waits for it to be removed
 * before it pins. nginx's workers pin themselves as they start, so a reload
 * made while the file exists has new workers that have not run yet, as on
 * a machine whose CPUs are all taken, for as long as the test needs. After
 * 60 s they pin all the same, so that a failing test still ends. The name
 * is read at load: nginx gives its workers an environment of its own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef int setaffinity_fn(pid_t, size_t, const cpu_set_t *);

static char hold_file[4096];

__attribute__((constructor)) static void read_name(void)
{
    const char *file = getenv("HOLDPIN_FILE");
    if (file && strlen(file) < sizeof hold_file)
        strcpy(hold_file, file);
}

static void wait_for_release(const char *file)
{
    struct stat st;
    struct timespec tick = {.tv_nsec = 10 * 1000 * 1000};
    for (int i = 0; i < 6000 && stat(file, &st) == 0; i++)
        nanosleep(&tick, NULL);
}

int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t *mask)
{
    static setaffinity_fn *next;
    int saved = errno;
    if (hold_file[0])
        wait_for_release(hold_file);
    if (!next)
        next = (setaffinity_fn *)dlsym(RTLD_NEXT, "sched_setaffinity");
    errno = saved;
    return next(pid, size, mask);
}
