/* libmasteraff: the read system calls a master's forking thread made
 * (the kernel's syscr). nginx re-reads its configuration before it forks
 * a reload's workers, and reads nothing between a reap and the respawn
 * that replaces it, or between two forks of a burst, however long it
 * waits for a CPU. A master that sleeps in sigsuspend is asked only where
 * a reap or a respawn leaves that open (shim.c); another, at every fork,
 * where the times its thread waited (voluntary context switches) stand in
 * when the kernel does not say. Used in a master, under the library's
 * lock. */
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

/* Records the counts now: a fork that just returned, in the parent, or
 * the wake-up of a master that reaped. */
void ma_fork_returned(void);

/* Whether the thread read a file (or, not knowing, waited) between the
 * last mark and `now`, when this fork was called. */
bool ma_reread_since(const struct ma_fork_mark *now);

/* The same from the reads alone: false where they cannot be counted. */
bool ma_read_since(const struct ma_fork_mark *now);

/* Reads the library made in this thread since its last fork are not the
 * program's. */
void ma_not_the_programs_reads(unsigned reads);

#endif
