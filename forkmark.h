/* libmasteraff: what tells a new burst of forks from the next fork of
 * the same burst: the read system calls the forking thread made in
 * between (the kernel's syscr). nginx re-reads its configuration before it forks a reload's
 * workers, and reads nothing between two forks of a burst, however long
 * it waits for a CPU. Where the kernel does not say, the times the thread
 * waited (voluntary context switches: nginx sleeps in sigsuspend before
 * every reload and every respawn, not between two forks of a burst) stand
 * in. A respawn is known from its death, not from either. Used by the
 * fork interposer (shim.c), in a master, under the library's lock. */
#ifndef MASTERAFF_FORKMARK_H
#define MASTERAFF_FORKMARK_H

#include <stdbool.h>
#include <sys/types.h>

struct ma_fork_mark {
    pid_t tid;
    long long reads, waits; /* so far, or -1 */
    int reads_errno;        /* why reads is -1 */
};

/* This thread's counts now. */
struct ma_fork_mark ma_fork_mark_now(void);

/* Records the counts of the fork that just returned, in the parent. */
void ma_fork_returned(void);

/* Whether the thread read a file (or, not knowing, waited) between the
 * last fork's return and `now`, when this one was called. */
bool ma_reread_since(const struct ma_fork_mark *now);

/* Reads the library made in this thread since its last fork are not the
 * program's. */
void ma_not_the_programs_reads(unsigned reads);

#endif
