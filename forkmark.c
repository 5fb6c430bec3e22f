/* libmasteraff: the counts that tell a new burst of forks from the next
 * fork of the same burst (see forkmark.h). */
#define _GNU_SOURCE
#include "forkmark.h"
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static struct ma_fork_mark last_fork; /* when the last fork returned */

/* This thread's read system calls so far, or -1 with errno. The one
 * read() here counts too, after the figure it returns. */
static long long reads_so_far(void)
{
    char buf[512], *at;
    ssize_t n;
    int fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) {
        errno = n < 0 ? errno : ENODATA;
        return -1;
    }
    buf[n] = '\0';
    at = strstr(buf, "syscr: ");
    if (!at) {
        errno = ENODATA;
        return -1;
    }
    return strtoll(at + 7, NULL, 10);
}

static long long waits_so_far(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? ru.ru_nvcsw : -1;
}

struct ma_fork_mark ma_fork_mark_now(void)
{
    struct ma_fork_mark m = {gettid(), -1, waits_so_far(), 0};
    m.reads = reads_so_far();
    m.reads_errno = m.reads < 0 ? errno : 0;
    return m;
}

/* Said once: without the reads, a respawn and a reload that nginx makes in
 * one wake-up (a worker killed as a reload comes) look like one burst. */
static void say_reads_unknown(int why)
{
    static bool said;
    if (said)
        return;
    said = true;
    ma_log(MA_LOG_NOTICE, "master %d cannot count its reads "
           "(/proc/thread-self/io: %s): a fork after a reaped death is still "
           "its respawn, but a respawn and a reload at once are taken for "
           "one reload", getpid(), strerror(why));
}

/* Whether the thread read a file between the last mark and `now`: 1 or
 * 0, or -1 where the reads cannot be counted. The read that took the last
 * figure is not the program's. A fork from another thread than the last
 * one is counted in the same burst, as forks of threads that run at
 * once. */
static int reads_between(const struct ma_fork_mark *now)
{
    if (last_fork.tid != now->tid)
        return 0;
    if (now->reads >= 0 && last_fork.reads >= 0)
        return now->reads > last_fork.reads + 1;
    say_reads_unknown(now->reads < 0 ? now->reads_errno
                                     : last_fork.reads_errno);
    return -1;
}

bool ma_reread_since(const struct ma_fork_mark *now)
{
    int read = reads_between(now);
    return read < 0 ? now->waits > last_fork.waits : read;
}

bool ma_read_since(const struct ma_fork_mark *now)
{
    return reads_between(now) > 0;
}

/* Reads the library made in this thread since its last fork (the cpuset,
 * when the master checks its mask) are not the program's. Under the
 * lock. */
void ma_not_the_programs_reads(unsigned reads)
{
    if (last_fork.tid == gettid() && last_fork.reads >= 0)
        last_fork.reads += reads;
}

void ma_fork_returned(void)
{
    last_fork = ma_fork_mark_now();
}
