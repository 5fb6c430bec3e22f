/* libmasteraff: what the library's own files share. Nothing here is
 * exported: the library is built with hidden visibility. */
#ifndef MASTERAFF_INTERNAL_H
#define MASTERAFF_INTERNAL_H

#include "affinity.h"

#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* stat and fstat by the system call itself: glibc's carry a symbol
 * version of their own (GLIBC_2.33), which every program the library is
 * preloaded in would pay to check at load. */
static inline int ma_stat(const char *path, struct stat *st)
{
    return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, 0);
}

static inline int ma_fstat(int fd, struct stat *st)
{
    return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
}

/* Opens a file to read only if it is a regular file, without waiting
 * (a FIFO or a device is refused with EINVAL). Returns the descriptor,
 * close-on-exec, or -1 with errno. */
int ma_open_regular(const char *path);

/* One entry of the getdents64 system call's buffer, as the kernel lays it
 * out. The call itself, not libc's getdents64: musl declares its own with
 * struct dirent, and from 1.2.4 only under _LARGEFILE64_SOURCE. */
struct ma_dirent {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static inline ssize_t ma_getdents(int fd, void *buf, size_t len)
{
    return (ssize_t)syscall(SYS_getdents64, fd, buf, len);
}

/* Gives the heap's free pages back to the kernel where libc has a call
 * for it: glibc's malloc_trim. musl has none. */
static inline void ma_trim_heap(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

enum ma_log_level {
    MA_LOG_ERROR,
    MA_LOG_WARN,
    MA_LOG_NOTICE,
    MA_LOG_INFO,
    MA_LOG_DEBUG,
};

/* The configuration, read once when the library loads. */
struct ma_config {
    bool active; /* a target program, with every setting valid */
    bool bad;    /* a target program with a bad setting: inert */
    enum ma_scope scope;
    bool migrate;
    bool dry_run;
    bool early; /* place the master at start, from nginx's configuration */
    bool auto_cpuset; /* "worker_cpu_affinity auto" within the allowed CPUs */
    enum ma_log_level log_level;
    char sysfs[PATH_MAX];
    /* Kept across nginx's binary upgrade, which scrubs the environment:
     * the executable and the variables the library was loaded with. */
    char exe[PATH_MAX];
    char carried[9][PATH_MAX + 32];
    int n_carried;
};

extern struct ma_config ma_cfg;

/* Whether this program is one the library acts in: its executable's name
 * matches MASTERAFF_PROGRAMS, and it is not set-user-ID. Fills ma_cfg.exe. */
bool ma_config_target(void);

/* Reads the other MASTERAFF_* variables of a target: ma_cfg.active says
 * whether they are all valid. */
void ma_config_load(void);

/* In an inert target, at each fork: says the first bad value's line again
 * once stderr is another file than at load (nginx's error.log). */
void ma_config_say_again(void);

/* Whether the executable is of the nginx family (whatever
 * MASTERAFF_PROGRAMS says): the programs whose configuration the library
 * can read. */
bool ma_config_nginx_family(void);

/* One line on stderr, in the shape of nginx's error log. */
void ma_log(enum ma_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The master's place at start, decided before main() from the command
 * line and the configuration nginx will read (early.c). */
struct ma_early {
    bool place;
    cpu_set_t worker0; /* worker 0's CPUs, all it will pin itself to */
    cpu_set_t target;  /* their scope units, within the original mask */
    int node;          /* node of worker 0's first CPU, or -1 */
    char units[512];
    char why[400];     /* why not; with place, where the mask is set */
    unsigned n_files;  /* configuration files read, and their names */
    char files[1024];
};

/* Fills *e for an nginx-family program started as argv with the mask
 * original. argv NULL: the command line is read from /proc/self/cmdline. */
void ma_early_decide(int argc, char **argv, const cpu_set_t *original,
                     struct ma_early *e);

/* When the library loads in a master that may move memory: notes its own
 * directory and owner, which a copy of libnuma beside it is judged by. */
void ma_memory_locate_library(void);

/* At start, in the main thread: later allocations prefer node, unless the
 * user chose a policy. Returns the log line's account of it. */
const char *ma_memory_prefer_at_start(int node);

/* Moves the master's memory to the node of the leader's first CPU, as the
 * configuration says, and returns the log line's account of it. */
const char *ma_memory_follow(const cpu_set_t *leader);

/* The master went back to its original mask: so does its memory policy. */
void ma_memory_restore(void);

/* In the master's main thread before each fork: takes the memory policy
 * decided by ma_memory_follow (a thread can only set its own). */
void ma_memory_prefork(void);

/* Drops that policy, which a child (between fork and its return) would not
 * have had without the library, and forgets it. Async-signal-safe. */
void ma_memory_drop_policy(void);

/* Around an exec of the master's, or of its vfork child which shares its
 * memory: the thread leaves the policy, and takes it back if the exec
 * fails. Async-signal-safe, and they write no state. */
void ma_memory_leave_policy(void);
void ma_memory_resume_policy(void);

#endif
