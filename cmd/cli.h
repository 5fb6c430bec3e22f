/* masteraff: what its commands share (messages, allocation, the options
 * of status and topology, the topology lookups of both). */
#ifndef MASTERAFF_CLI_H
#define MASTERAFF_CLI_H

#include "affinity.h"

#include <stdbool.h>
#include <stdio.h>

#ifndef VERSION
#define VERSION "0.1.0"
#endif

#define LIBRARY_NAME "libmasteraff.so"
#define DEFAULT_PIDFILE "/run/nginx.pid"
/* Where Debian's prometheus-node-exporter reads its textfiles. */
#define DEFAULT_TEXTFILE_DIR "/var/lib/prometheus/node-exporter"

/* As env(1) and the shell: 126 found but cannot run, 127 not found. */
enum {
    EXIT_RUNTIME = 1,
    EXIT_USAGE = 2,
    EXIT_CANNOT_RUN = 126,
    EXIT_NOT_FOUND = 127,
};

enum {
    OPT_SCOPE = 256,
    OPT_NO_MIGRATE,
    OPT_NO_EARLY,
    OPT_AUTO_CPUSET,
    OPT_DRY_RUN,
    OPT_LOG,
    OPT_SYSFS,
    OPT_LIBRARY,
    OPT_JSON,
    OPT_CHECK,
    OPT_PROMETHEUS,
    OPT_TEXTFILE,
};

/* Exit statuses of a monitoring plugin (status --check): the master not
 * running, and a plugin that cannot tell. */
#define EXIT_PLUGIN_CRITICAL 2
#define EXIT_PLUGIN_UNKNOWN 3

extern const char usage_text[];

/* Who speaks in messages: "masteraff", or "masteraff status". */
extern const char *me;

/* Set by status --check: every failure is then the plugin line
 * "MASTERAFF UNKNOWN - ..." on stdout and exit status 3. */
extern bool plugin_mode;

/* Set by status --prometheus and --textfile: says a runtime failure in
 * that format too, before fail() exits. */
extern void (*failure_report)(const char *message);

_Noreturn void fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* fail() for a master that is not running: under --check the plugin line
 * is CRITICAL, with exit status 2. */
_Noreturn void fail_not_running(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
_Noreturn void out_of_memory(void);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A stream into memory: *text holds what was written, *len bytes and
 * terminated, once xclose_memstream has closed it. */
FILE *xopen_memstream(char **text, size_t *len);
void xclose_memstream(FILE *f);

/* s as it may be echoed in a message: control characters as '?', cut
 * after 64 bytes with "...". Returns s itself when it needs neither. */
const char *shortened(const char *s);

/* -h, -V, and what getopt has already complained about. */
_Noreturn void common_option(int c);

/* The topology root of status and topology. */
extern const char *sysfs_root;

/* Package and node of a CPU under sysfs_root, -1 when unknown. */
int package_of(int cpu);
int node_of(int cpu);

/* The ids of the packages or nodes of cpus, in *ids; false when some CPU's
 * cannot be read. */
bool ids_of(const cpu_set_t *cpus, int (*id_of)(int), cpu_set_t *ids);

/* "0-1", with "?" for what cannot be read. */
char *id_list(const cpu_set_t *cpus, int (*id_of)(int));

/* The online CPUs under sysfs_root; fails when there are none. */
void online_cpus(cpu_set_t *cpus);

_Noreturn void run_command(int argc, char **argv);
int status_command(int argc, char **argv);
int topology_command(int argc, char **argv);

#endif
