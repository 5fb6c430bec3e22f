/* masteraff status: the master and its children as /proc shows them, the
 * library's presence and settings in the master, and the verdict. */
#ifndef MASTERAFF_STATUS_H
#define MASTERAFF_STATUS_H

#include "cli.h"
#include "pages.h"

#include <sys/types.h>

enum { COL_PID, COL_ROLE, COL_CPUS, COL_PACKAGES, COL_NODES, COL_PRIVATE,
       COL_SHARED, N_COLS };

struct proc {
    pid_t pid;
    unsigned long long start; /* clock ticks after boot: fork order */
    char role[64];
    bool titled;  /* the role comes from an nginx-style process title */
    bool worker;  /* an nginx worker */
    bool exiting; /* one from before a reload, shutting down */
    bool pinned;  /* allowed fewer CPUs than the master's original mask */
    cpu_set_t cpus;
    char *units; /* its CPUs' units at the configured scope */
    struct ma_pages *pages;
    char *col[N_COLS];
};

struct table {
    struct proc *procs; /* the master, then its children in fork order */
    size_t n, cap;
};

/* Reads /proc/PID/NAME into buf, terminated. Returns its length, or -1. */
ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len);

/* The parent of pid, or -1. */
pid_t parent_of(pid_t pid);

/* Reads pid's role and CPUs into *p; -1 with errno when it cannot (it may
 * have just exited). */
int read_process(struct proc *p, pid_t pid);

/* The master, failing when it cannot be read, then its children. */
void add_master(struct table *t, pid_t pid);
void add_children(struct table *t, pid_t master);

/* The library's variables, in this order everywhere. */
enum { VAR_SCOPE, VAR_MIGRATE, VAR_PROGRAMS, VAR_LOG, VAR_DRY_RUN, VAR_SYSFS,
       VAR_EARLY, VAR_AUTO, N_VARS };
extern const char *const var_names[N_VARS];

struct library {
    int maps_error; /* errno when /proc/PID/maps cannot be read, else 0 */
    char *path;     /* libmasteraff mapped in the master; NULL: none */
    char *numa;     /* the libnuma mapped there, the system's or the copy
                       beside the library; NULL: none */
    char *numa_refused; /* with none mapped, why the library would not
                           load the copy beside it; NULL: no such copy, or
                           one it would load */
    char *value[N_VARS]; /* as the master's environment set them; NULL: unset */
    const char *settings_from; /* "environ", "memory"; NULL: not readable */
    int settings_error;        /* why not */
};

/* Whether the library is mapped in pid, and the settings it read there. */
void read_library(pid_t pid, struct library *lib);

/* A variable's value for the master: its own, else the library's default. */
const char *setting(const struct library *lib, int var);

enum level { LEVEL_OK, LEVEL_WARNING, LEVEL_CRITICAL, LEVEL_UNKNOWN };

#define MAX_REASONS 16

struct verdict {
    enum level level; /* the worst of the reasons' */
    int with_worker0; /* the master within worker 0's units: 1, 0, or -1
                         when no worker pinned */
    /* The master's counted pages on worker 0's node, and in all; total 0
     * when they are not known (not counted, node unknown, none). */
    unsigned long pages_on_worker0_node, pages_total;
    size_t n;
    struct {
        enum level level;
        char *text;
    } reason[MAX_REASONS];
};

/* "ok", "warning", "critical", "unknown". */
const char *level_name(enum level level);

/* The units at scope that hold cpus, as "package 1" or "nodes 0,1", their
 * CPUs in *covered (empty when the topology cannot be read). */
char *units_of(const cpu_set_t *cpus, enum ma_scope scope, cpu_set_t *covered);

/* The master's original mask, as well as status can know it. */
void original_mask(const struct table *t, cpu_set_t *out);

/* Marks the workers allowed fewer CPUs than the original mask. */
void mark_pinned(struct table *t, const cpu_set_t *original);

/* The verdict on the master (t->procs[0]) against worker 0, at scope. */
void judge(const struct table *t, const struct library *lib,
           enum ma_scope scope, const cpu_set_t *original, struct verdict *v);

/* Writes text to f: each ASCII byte through ascii(), which escapes it as
 * the format wants, UTF-8 sequences as they are, and every other byte (a
 * process title may hold anything) as replacement, U+FFFD in the format. */
void put_utf8(FILE *f, const char *text, void (*ascii)(FILE *, int),
              const char *replacement);

/* The whole status as one JSON object on stdout. */
void print_json(const struct table *t, const struct library *lib,
                const char *scope, const struct verdict *v);

/* The status in Prometheus' text format goes to stdout, or with to_file
 * to a textfile: path (a directory, or a file ending in .prom), NULL for
 * DEFAULT_TEXTFILE_DIR. From then on a failure is written there too. */
void prometheus_output(bool to_file, const char *path);
void print_prometheus(const struct table *t, const struct library *lib,
                      const struct verdict *v);

#endif
