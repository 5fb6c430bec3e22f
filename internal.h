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
};

extern struct ma_config ma_cfg;

/* Reads the MASTERAFF_* variables. symbols_ok says whether the real
 * functions were found; without them the library stays inert. */
void ma_config_load(bool symbols_ok);

/* One line on stderr, in the shape of nginx's error log. */
void ma_log(enum ma_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Moves the master's memory to the node of the leader's first CPU, as the
 * configuration says, and returns the log line's account of it. */
const char *ma_memory_follow(const cpu_set_t *leader);

#endif
