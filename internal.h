/* libmasteraff: what the library's own files share. Nothing here is
 * exported: the library is built with hidden visibility. */
#ifndef MASTERAFF_INTERNAL_H
#define MASTERAFF_INTERNAL_H

#include "affinity.h"

#include <limits.h>
#include <stdbool.h>

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
    enum ma_scope scope;
    bool migrate;
    bool dry_run;
    enum ma_log_level log_level;
    char sysfs[PATH_MAX];
    /* Kept across nginx's binary upgrade, which scrubs the environment:
     * the executable and the variables the library was loaded with. */
    char exe[PATH_MAX];
    char carried[8][PATH_MAX + 32];
    int n_carried;
};

extern struct ma_config ma_cfg;

/* Whether this program is one the library acts in: its executable's name
 * matches MASTERAFF_PROGRAMS, and it is not set-user-ID. Fills ma_cfg.exe. */
bool ma_config_target(void);

/* Reads the other MASTERAFF_* variables of a target: ma_cfg.active says
 * whether they are all valid. */
void ma_config_load(void);

/* One line on stderr, in the shape of nginx's error log. */
void ma_log(enum ma_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

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
