/* masteraff: runs a command (nginx) with libmasteraff preloaded; shows
 * where a master, its children and their memory are (status), and the
 * machine as the library sees it (topology). */
#define _GNU_SOURCE
#include "affinity.h"
#include "pages.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef VERSION
#define VERSION "0.1.0"
#endif

#define LIBRARY_NAME "libmasteraff.so"
#define DEFAULT_PIDFILE "/run/nginx.pid"

/* As env(1) and the shell: 126 found but cannot run, 127 not found. */
enum {
    EXIT_RUNTIME = 1,
    EXIT_USAGE = 2,
    EXIT_CANNOT_RUN = 126,
    EXIT_NOT_FOUND = 127,
};

static const char usage_text[] =
    "Usage: masteraff [OPTION]... [--] COMMAND [ARG]...\n"
    "       masteraff status [--sysfs DIR] [PID | PIDFILE]\n"
    "       masteraff topology [--sysfs DIR]\n"
    "\n"
    "Runs COMMAND (nginx) with libmasteraff preloaded: the master process\n"
    "follows worker 0 onto its package and moves its memory to worker 0's\n"
    "NUMA node.\n"
    "\n"
    "  --scope SCOPE    how far around worker 0's CPUs the master may run:\n"
    "                   package (default), die, node, llc, cluster, core,\n"
    "                   cpu, worker\n"
    "  --no-migrate     leave the master's memory where it is\n"
    "  --dry-run        decide and log, change nothing\n"
    "  --log LEVEL      error, warn, notice (default), info, debug\n"
    "  --sysfs DIR      read the topology below DIR (absolute) instead of /sys\n"
    "  --library PATH   the library to preload (default: $MASTERAFF_LIBRARY,\n"
    "                   else " LIBRARY_NAME " beside this program, else the\n"
    "                   installed one)\n"
    "  -h, --help       show this help and exit\n"
    "  -V, --version    show the version and exit\n"
    "\n"
    "status: the master (PID, the pid in PIDFILE, default " DEFAULT_PIDFILE
    ")\n"
    "and its children, one line each: pid, role, allowed CPUs, their packages\n"
    "and nodes, resident pages per node (private, and shared zones); then a\n"
    "verdict on whether the master and its memory are with worker 0.\n"
    "\n"
    "topology: packages, dies, nodes, LLCs, clusters and cores with their "
    "CPUs.\n"
    "\n"
    "status and topology read the topology below --sysfs DIR, else\n"
    "$MASTERAFF_SYSFS, else /sys.\n"
    "\n"
    "Exit status: 0 ok, 1 runtime error, 2 usage error, 126 COMMAND cannot\n"
    "run, 127 COMMAND not found; else COMMAND's own.\n";

/* Who speaks in messages, getopt's included (argv[0]): "masteraff", or
 * "masteraff status". */
static char program[] = "masteraff";
static const char *me = program;

static _Noreturn void fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static _Noreturn void fail(int status, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", me);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (status == EXIT_USAGE)
        fprintf(stderr, "Try 'masteraff --help' for more information.\n");
    exit(status);
}

static _Noreturn void out_of_memory(void)
{
    fail(EXIT_RUNTIME, "out of memory");
}

static char *xstrdup(const char *s)
{
    char *copy = strdup(s);
    if (!copy)
        out_of_memory();
    return copy;
}

static char *xasprintf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s;
    int n;
    va_start(ap, fmt);
    n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0)
        out_of_memory();
    return s;
}

/* ---- options ---- */

enum {
    OPT_SCOPE = 256,
    OPT_NO_MIGRATE,
    OPT_DRY_RUN,
    OPT_LOG,
    OPT_SYSFS,
    OPT_LIBRARY,
};

static const struct option run_options[] = {
    {"scope", required_argument, NULL, OPT_SCOPE},
    {"no-migrate", no_argument, NULL, OPT_NO_MIGRATE},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"log", required_argument, NULL, OPT_LOG},
    {"sysfs", required_argument, NULL, OPT_SYSFS},
    {"library", required_argument, NULL, OPT_LIBRARY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const struct option info_options[] = {
    {"sysfs", required_argument, NULL, OPT_SYSFS},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

/* -h, -V, and what getopt has already complained about. */
static _Noreturn void common_option(int c)
{
    if (c == 'h') {
        fputs(usage_text, stdout);
        exit(0);
    }
    if (c == 'V') {
        puts("masteraff " VERSION);
        exit(0);
    }
    fprintf(stderr, "Try 'masteraff --help' for more information.\n");
    exit(EXIT_USAGE);
}

static const char *checked_scope(const char *v)
{
    enum ma_scope scope;
    if (ma_scope_parse(v, &scope) < 0)
        fail(EXIT_USAGE, "bad --scope '%s' (accepted: %s)", v,
             ma_scope_choices());
    return v;
}

/* The library's levels (config.c), checked here so that a typo fails
 * before the command runs rather than leave the library inert. */
static const char *checked_level(const char *v)
{
    static const char *const levels[] = {"error", "warn", "notice", "info",
                                         "debug"};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        if (strcmp(v, levels[i]) == 0)
            return v;
    fail(EXIT_USAGE,
         "bad --log '%s' (accepted: error, warn, notice, info, debug)", v);
}

/* The library takes only an absolute root. */
static const char *checked_sysfs(const char *v)
{
    if (v[0] != '/')
        fail(EXIT_USAGE, "bad --sysfs '%s' (accepted: an absolute path)", v);
    if (access(v, X_OK) < 0)
        fail(EXIT_RUNTIME, "--sysfs %s: %s", v, strerror(errno));
    return v;
}

static const char *default_sysfs(void)
{
    const char *root = getenv("MASTERAFF_SYSFS");
    return root && *root ? root : "/sys";
}

/* ---- running a command ---- */

struct run_settings {
    const char *scope, *log, *sysfs, *library;
    bool no_migrate, dry_run;
};

static bool library_beside_executable(char *path)
{
    char exe[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash || (size_t)(slash - exe) + sizeof "/" LIBRARY_NAME > sizeof exe)
        return false;
    strcpy(slash + 1, LIBRARY_NAME);
    return realpath(exe, path) != NULL;
}

#ifdef LIBDIR
#define INSTALLED_LIBRARY LIBDIR "/" LIBRARY_NAME
#define NOR_INSTALLED " nor as " INSTALLED_LIBRARY
#else
#define INSTALLED_LIBRARY NULL
#define NOR_INSTALLED ""
#endif

static bool installed_library(char *path)
{
    return INSTALLED_LIBRARY && realpath(INSTALLED_LIBRARY, path) != NULL;
}

/* The library to preload, as an absolute path: ld.so would resolve a
 * relative one against the directory of whatever execs later (nginx's
 * binary upgrade). A build tree's masteraff uses the library built beside
 * it, even when another one is installed. */
static void find_library(const char *option, char *path)
{
    const char *given = option ? option : getenv("MASTERAFF_LIBRARY");
    if (given && *given) {
        if (!realpath(given, path))
            fail(EXIT_RUNTIME, "library %s: %s", given, strerror(errno));
    } else if (!library_beside_executable(path) && !installed_library(path)) {
        fail(EXIT_RUNTIME,
             "cannot find " LIBRARY_NAME " beside this program" NOR_INSTALLED
             "; give its path with --library or MASTERAFF_LIBRARY");
    }
    if (strpbrk(path, ": "))
        fail(EXIT_RUNTIME,
             "library %s: LD_PRELOAD cannot hold a path with ':' or ' '",
             path);
}

static bool names_our_library(const char *entry)
{
    const char *slash = strrchr(entry, '/'), *base = slash ? slash + 1 : entry;
    size_t len = strlen(LIBRARY_NAME);
    return strncmp(base, LIBRARY_NAME, len) == 0 &&
           (base[len] == '\0' || base[len] == '.');
}

/* Ours first, then the existing entries (ld.so splits on ':' and ' ').
 * A libmasteraff already listed is dropped, this copy or another: two
 * copies would both interpose fork. */
static char *preload_list(const char *ours, const char *existing)
{
    size_t cap = strlen(ours) + (existing ? strlen(existing) : 0) + 2;
    char *list = malloc(cap), *copy, *entry, *save;
    if (!list)
        out_of_memory();
    strcpy(list, ours);
    if (!existing)
        return list;
    copy = xstrdup(existing);
    for (entry = strtok_r(copy, ": ", &save); entry;
         entry = strtok_r(NULL, ": ", &save))
        if (!names_our_library(entry)) {
            strcat(list, ":");
            strcat(list, entry);
        }
    free(copy);
    return list;
}

/* NULL leaves the variable as the caller's environment has it. */
static void set_variable(const char *name, const char *value)
{
    if (value && setenv(name, value, 1) < 0)
        fail(EXIT_RUNTIME, "cannot set %s: %s", name, strerror(errno));
}

static void export_settings(const struct run_settings *s)
{
    char library[PATH_MAX];
    find_library(s->library, library);
    set_variable("LD_PRELOAD", preload_list(library, getenv("LD_PRELOAD")));
    set_variable("MASTERAFF_SCOPE", s->scope);
    set_variable("MASTERAFF_LOG", s->log);
    set_variable("MASTERAFF_SYSFS", s->sysfs);
    set_variable("MASTERAFF_MIGRATE", s->no_migrate ? "off" : NULL);
    set_variable("MASTERAFF_DRY_RUN", s->dry_run ? "1" : NULL);
}

static _Noreturn void exec_command(char **argv)
{
    int e;
    execvp(argv[0], argv);
    e = errno;
    fail(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN, "cannot run %s: %s",
         argv[0], strerror(e));
}

static _Noreturn void run_command(int argc, char **argv)
{
    struct run_settings s = {0};
    int c;
    /* "+": the command's own options are not ours. */
    while ((c = getopt_long(argc, argv, "+hV", run_options, NULL)) != -1)
        switch (c) {
        case OPT_SCOPE:
            s.scope = checked_scope(optarg);
            break;
        case OPT_LOG:
            s.log = checked_level(optarg);
            break;
        case OPT_SYSFS:
            s.sysfs = checked_sysfs(optarg);
            break;
        case OPT_LIBRARY:
            s.library = optarg;
            break;
        case OPT_NO_MIGRATE:
            s.no_migrate = true;
            break;
        case OPT_DRY_RUN:
            s.dry_run = true;
            break;
        default:
            common_option(c);
        }
    if (optind == argc)
        fail(EXIT_USAGE, "no command to run");
    export_settings(&s);
    exec_command(argv + optind);
}

/* ---- the topology, as the library sees it ---- */

static const char *sysfs_root;

/* Every process's CPU list is made of the same few CPUs: each is looked up
 * once. -1: not known under sysfs_root. */
static struct {
    bool looked[MA_MAX_CPUS];
    int package[MA_MAX_CPUS];
    int node[MA_MAX_CPUS];
} cpu_info;

static void look_up_cpu(int cpu)
{
    struct ma_unit u;
    if (cpu_info.looked[cpu])
        return;
    cpu_info.looked[cpu] = true;
    cpu_info.package[cpu] =
        ma_unit_of(sysfs_root, MA_SCOPE_PACKAGE, cpu, &u) == 0 ? u.id : -1;
    cpu_info.node[cpu] = ma_node_of_cpu(sysfs_root, cpu);
}

static int package_of(int cpu)
{
    look_up_cpu(cpu);
    return cpu_info.package[cpu];
}

static int node_of(int cpu)
{
    look_up_cpu(cpu);
    return cpu_info.node[cpu];
}

/* The ids of the packages or nodes of cpus, in *ids; false when some CPU's
 * cannot be read (or is out of cpu_set_t's range, which ids share). */
static bool ids_of(const cpu_set_t *cpus, int (*id_of)(int), cpu_set_t *ids)
{
    bool all = true;
    CPU_ZERO(ids);
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        int id;
        if (!CPU_ISSET(c, cpus))
            continue;
        id = id_of(c);
        if (id >= 0 && id < MA_MAX_CPUS)
            CPU_SET(id, ids);
        else
            all = false;
    }
    return all;
}

/* "0-1", with "?" for what cannot be read. */
static char *id_list(const cpu_set_t *cpus, int (*id_of)(int))
{
    char buf[8192];
    cpu_set_t ids;
    bool all = ids_of(cpus, id_of, &ids);
    if (CPU_COUNT(&ids) == 0)
        return xstrdup("?");
    ma_cpulist_format(&ids, buf, sizeof buf);
    return all ? xstrdup(buf) : xasprintf("%s,?", buf);
}

/* ---- status: one process ---- */

enum { COL_PID, COL_ROLE, COL_CPUS, COL_PACKAGES, COL_NODES, COL_PRIVATE,
       COL_SHARED, N_COLS };

static const char *const headers[N_COLS] = {
    "PID", "ROLE", "CPUS", "PACKAGES", "NODES", "PRIVATE", "SHARED"};

struct proc {
    pid_t pid;
    unsigned long long start; /* clock ticks after boot: fork order */
    char role[64];
    bool worker;  /* an nginx worker */
    bool exiting; /* one from before a reload, shutting down */
    cpu_set_t cpus;
    char *col[N_COLS];
};

/* Reads /proc/PID/NAME into buf, terminated. Returns its length, or -1. */
static ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len)
{
    char path[64];
    FILE *f;
    size_t n;
    int err;
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
    f = fopen(path, "re");
    if (!f)
        return -1;
    n = fread(buf, 1, len - 1, f);
    err = ferror(f) ? errno : 0;
    fclose(f);
    buf[n] = '\0';
    errno = err;
    return err ? -1 : (ssize_t)n;
}

/* The parent and start time from /proc/PID/stat. The command name in it
 * may hold spaces and parentheses: the fields are read after its last ')'. */
static int read_stat(pid_t pid, pid_t *ppid, unsigned long long *start)
{
    char buf[1024], *p;
    int parent;
    if (read_proc(pid, "stat", buf, sizeof buf) < 0)
        return -1;
    p = strrchr(buf, ')');
    if (!p || sscanf(p + 1,
                     " %*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u "
                     "%*d %*d %*d %*d %*d %*d %llu",
                     &parent, start) != 2) {
        errno = EPROTO;
        return -1;
    }
    *ppid = parent;
    return 0;
}

static int read_cpus(struct proc *p)
{
    char buf[8192], *line;
    if (read_proc(p->pid, "status", buf, sizeof buf) < 0)
        return -1;
    line = strstr(buf, "\nCpus_allowed_list:");
    if (!line) {
        errno = EPROTO;
        return -1;
    }
    line += strlen("\nCpus_allowed_list:");
    line += strspn(line, " \t");
    line[strcspn(line, "\n")] = '\0';
    return ma_cpulist_parse(line, &p->cpus);
}

/* A role is one column: "cache manager" becomes "cache-manager". */
static void set_role(struct proc *p, const char *text, size_t len)
{
    if (len >= sizeof p->role)
        len = sizeof p->role - 1;
    for (size_t i = 0; i < len; i++)
        p->role[i] = text[i] == ' ' || text[i] == '\t' ? '-' : text[i];
    p->role[len] = '\0';
}

/* nginx's process titles: "nginx: worker process", "nginx: master process
 * /usr/sbin/nginx -c ...", "nginx: worker process is shutting down"; its
 * forks put their own name before the colon. */
static bool role_from_title(struct proc *p, const char *title)
{
    const char *colon = strstr(title, ": "), *role, *end;
    if (!colon || colon == title || strcspn(title, " /") < (size_t)(colon - title))
        return false;
    role = colon + 2;
    end = strstr(role, " process");
    if (!end || end == role)
        return false;
    set_role(p, role, (size_t)(end - role));
    p->worker = strcmp(p->role, "worker") == 0;
    p->exiting = strncmp(end, " process is shutting down", 25) == 0;
    if (p->exiting)
        strncat(p->role, "(exiting)", sizeof p->role - strlen(p->role) - 1);
    return true;
}

static int read_role(struct proc *p)
{
    char buf[4096];
    ssize_t n = read_proc(p->pid, "cmdline", buf, sizeof buf);
    if (n < 0)
        return -1;
    for (ssize_t i = 0; i < n; i++)
        if (buf[i] == '\0')
            buf[i] = ' ';
    if (role_from_title(p, buf))
        return 0;
    if (read_proc(p->pid, "comm", buf, sizeof buf) < 0)
        return -1;
    set_role(p, buf, strcspn(buf, "\n"));
    if (!p->role[0])
        strcpy(p->role, "?");
    return 0;
}

/* "private=node0:12,node3:400", "private=none", or "private=?" when the
 * pages cannot be counted. */
static char *page_column(const char *kind, const struct ma_node_pages *pages)
{
    char *text;
    size_t len;
    FILE *f = open_memstream(&text, &len);
    const char *sep = "";
    if (!f)
        out_of_memory();
    fprintf(f, "%s=", kind);
    if (pages->error)
        fputs("?", f);
    else if (ma_pages_total(pages) == 0)
        fputs("none", f);
    for (int n = 0; !pages->error && n < MA_PAGES_MAX_NODES; n++)
        if (pages->node[n]) {
            fprintf(f, "%snode%d:%lu", sep, n, pages->node[n]);
            sep = ",";
        }
    if (fclose(f) != 0)
        out_of_memory();
    return text;
}

static void fill_columns(struct proc *p, struct ma_pages *pages)
{
    char cpus[8192];
    ma_cpulist_format(&p->cpus, cpus, sizeof cpus);
    ma_pages_count(p->pid, pages);
    p->col[COL_PID] = xasprintf("%d", (int)p->pid);
    p->col[COL_ROLE] = xstrdup(p->role);
    p->col[COL_CPUS] = xstrdup(cpus);
    p->col[COL_PACKAGES] = id_list(&p->cpus, package_of);
    p->col[COL_NODES] = id_list(&p->cpus, node_of);
    p->col[COL_PRIVATE] = page_column("private", &pages->priv);
    p->col[COL_SHARED] = page_column("shared", &pages->shared);
}

/* Returns 0, or -1 with errno when the process cannot be read (it may have
 * just exited). */
static int read_process(struct proc *p, struct ma_pages *pages)
{
    if (read_role(p) < 0 || read_cpus(p) < 0)
        return -1;
    fill_columns(p, pages);
    return 0;
}

/* ---- status: the table ---- */

struct table {
    struct proc *procs; /* the master, then its children in fork order */
    size_t n, cap;
    struct ma_pages master_pages;
};

static struct proc *new_proc(struct table *t, pid_t pid,
                             unsigned long long start)
{
    struct proc *p;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 16;
        t->procs = realloc(t->procs, t->cap * sizeof *t->procs);
        if (!t->procs)
            out_of_memory();
    }
    p = &t->procs[t->n];
    memset(p, 0, sizeof *p);
    p->pid = pid;
    p->start = start;
    return p;
}

static void add_master(struct table *t, pid_t pid)
{
    struct proc *p = new_proc(t, pid, 0);
    if (read_process(p, &t->master_pages) < 0)
        fail(EXIT_RUNTIME, "process %d: %s", (int)pid,
             errno == ENOENT ? "no such process" : strerror(errno));
    t->n++;
}

static void add_child(struct table *t, pid_t pid, unsigned long long start)
{
    static struct ma_pages pages;
    struct proc *p = new_proc(t, pid, start);
    if (read_process(p, &pages) == 0)
        t->n++;
}

static int by_fork_order(const void *a, const void *b)
{
    const struct proc *p = a, *q = b;
    if (p->start != q->start)
        return p->start < q->start ? -1 : 1;
    return (p->pid > q->pid) - (p->pid < q->pid);
}

/* Children of master, from every process's parent in /proc: pids wrap, so
 * fork order is the start time's. */
static void add_children(struct table *t, pid_t master)
{
    DIR *dir = opendir("/proc");
    struct dirent *de;
    if (!dir)
        fail(EXIT_RUNTIME, "/proc: %s", strerror(errno));
    while ((de = readdir(dir))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        pid_t ppid;
        unsigned long long start;
        if (*end || pid <= 0 || pid > INT_MAX)
            continue;
        if (read_stat((pid_t)pid, &ppid, &start) == 0 && ppid == master)
            add_child(t, (pid_t)pid, start);
    }
    closedir(dir);
    qsort(t->procs + 1, t->n - 1, sizeof *t->procs, by_fork_order);
}

static void print_table(const struct table *t)
{
    int width[N_COLS];
    for (int c = 0; c < N_COLS; c++)
        width[c] = (int)strlen(headers[c]);
    for (size_t i = 0; i < t->n; i++)
        for (int c = 0; c < N_COLS; c++)
            if ((int)strlen(t->procs[i].col[c]) > width[c])
                width[c] = (int)strlen(t->procs[i].col[c]);
    for (int c = 0; c < N_COLS; c++)
        printf("%-*s%s", c + 1 < N_COLS ? width[c] : 0, headers[c],
               c + 1 < N_COLS ? " " : "\n");
    for (size_t i = 0; i < t->n; i++)
        for (int c = 0; c < N_COLS; c++)
            printf("%-*s%s", c + 1 < N_COLS ? width[c] : 0,
                   t->procs[i].col[c], c + 1 < N_COLS ? " " : "\n");
}

/* ---- status: the verdict ---- */

/* Below this share of its pages on worker 0's node, the master's memory
 * has not followed: the rest is what cannot move (page cache in its
 * copy-on-write mappings, which numa_maps counts with them). */
#define MEMORY_FOLLOWED_PERCENT 90

/* The oldest worker: the library follows worker 0 of the oldest
 * generation, so after a reload the old worker 0 until it exits. */
static const struct proc *worker0(const struct table *t)
{
    for (size_t i = 1; i < t->n; i++)
        if (t->procs[i].worker)
            return &t->procs[i];
    return NULL;
}

/* A live worker forked after worker 0 but not with it: a respawn, which
 * status cannot tell from worker 0's own. */
static bool worker_respawned(const struct table *t, const struct proc *w0)
{
    unsigned long long burst = (unsigned long long)sysconf(_SC_CLK_TCK) / 20;
    for (size_t i = 1; i < t->n; i++)
        if (t->procs[i].worker && !t->procs[i].exiting &&
            t->procs[i].start > w0->start + burst)
            return true;
    return false;
}

/* "package 1", "packages 0-1", "packages ?". */
static char *units_text(const char *unit, const cpu_set_t *cpus,
                        int (*id_of)(int))
{
    cpu_set_t ids;
    char *list = id_list(cpus, id_of), *text;
    ids_of(cpus, id_of, &ids);
    text = xasprintf("%s%s %s", unit, CPU_COUNT(&ids) == 1 ? "" : "s", list);
    free(list);
    return text;
}

/* Whether every package of the master is one of worker 0's. */
static bool placement_verdict(const struct table *t, const struct proc *w0,
                              FILE *out)
{
    const struct proc *m = &t->procs[0];
    cpu_set_t mine, theirs, both;
    bool known = ids_of(&m->cpus, package_of, &mine);
    char *where = units_text("package", &m->cpus, package_of),
         *w0_where = units_text("package", &w0->cpus, package_of);
    bool ok;

    known &= ids_of(&w0->cpus, package_of, &theirs);
    CPU_AND(&both, &mine, &theirs);
    ok = known && CPU_EQUAL(&both, &mine);
    if (ok)
        fprintf(out, "master shares %s with worker 0 (pid %d%s)", where,
                (int)w0->pid, w0->exiting ? ", exiting" : "");
    else
        fprintf(out, "master on %s, worker 0 (pid %d%s) on %s%s", where,
                (int)w0->pid, w0->exiting ? ", exiting" : "", w0_where,
                worker_respawned(t, w0)
                    ? " (a worker was respawned: status takes the oldest "
                      "worker for worker 0)"
                    : "");
    free(where);
    free(w0_where);
    return ok;
}

/* Whether most of the master's pages are on worker 0's node. Memory that
 * cannot be counted gives no warning: it says why instead. */
static bool memory_verdict(const struct table *t, const struct proc *w0,
                           FILE *out)
{
    const struct ma_pages *mp = &t->master_pages;
    int node = node_of(ma_cpuset_first(&w0->cpus));
    int err = mp->priv.error ? mp->priv.error : mp->shared.error;
    unsigned long total, there;
    unsigned percent;

    if (err) {
        fprintf(out, "master's memory: not counted (%s%s)", strerror(err),
                err == EPERM || err == EACCES ? "; run as root" : "");
        return true;
    }
    if (node < 0 || node >= MA_PAGES_MAX_NODES) {
        fprintf(out, "master's memory: worker 0's node is not known under %s",
                sysfs_root);
        return true;
    }
    total = ma_pages_total(&mp->priv) + ma_pages_total(&mp->shared);
    there = mp->priv.node[node] + mp->shared.node[node];
    if (total == 0) {
        fprintf(out, "master's memory: no resident pages counted");
        return true;
    }
    percent = (unsigned)(100 * there / total);
    fprintf(out, "master's memory: %s%u%% on node %d, worker 0's node",
            percent < MEMORY_FOLLOWED_PERCENT ? "only " : "", percent, node);
    return percent >= MEMORY_FOLLOWED_PERCENT;
}

static void print_verdict(const struct table *t)
{
    const struct proc *w0 = worker0(t);
    char *text;
    size_t len;
    FILE *f;
    bool ok;

    if (!w0) {
        printf("warning: process %d has no worker process to follow\n",
               (int)t->procs[0].pid);
        return;
    }
    f = open_memstream(&text, &len);
    if (!f)
        out_of_memory();
    ok = placement_verdict(t, w0, f);
    fputs("; ", f);
    ok &= memory_verdict(t, w0, f);
    if (fclose(f) != 0)
        out_of_memory();
    printf("%s: %s\n", ok ? "ok" : "warning", text);
    free(text);
}

/* ---- status: the command ---- */

/* Digits only, 1 to INT_MAX. */
static bool parse_pid(const char *s, pid_t *out)
{
    char *end;
    long v;
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    v = strtol(s, &end, 10);
    if (*end || errno || v < 1 || v > INT_MAX)
        return false;
    *out = (pid_t)v;
    return true;
}

static pid_t pid_from_file(const char *path)
{
    char buf[64];
    FILE *f = fopen(path, "re");
    size_t n;
    int err;
    pid_t pid;

    if (!f)
        fail(EXIT_RUNTIME, "cannot read pid file %s: %s", path,
             strerror(errno));
    n = fread(buf, 1, sizeof buf - 1, f);
    err = ferror(f) ? errno : 0;
    fclose(f);
    if (err)
        fail(EXIT_RUNTIME, "cannot read pid file %s: %s", path, strerror(err));
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (!parse_pid(buf, &pid))
        fail(EXIT_RUNTIME, "pid file %s does not hold a pid", path);
    return pid;
}

/* A word of digits is a pid; anything else names a pid file. */
static pid_t target_pid(const char *arg)
{
    pid_t pid;
    if (strspn(arg, "0123456789") != strlen(arg))
        return pid_from_file(arg);
    if (!parse_pid(arg, &pid))
        fail(EXIT_USAGE, "bad pid '%s' (accepted: 1 to %d)", arg, INT_MAX);
    return pid;
}

/* Parses the options of status and topology; returns the positional
 * arguments' count, at most max_args. */
static int parse_info_options(int argc, char **argv, int max_args)
{
    int c;
    sysfs_root = default_sysfs();
    while ((c = getopt_long(argc, argv, "hV", info_options, NULL)) != -1) {
        if (c != OPT_SYSFS)
            common_option(c);
        sysfs_root = optarg;
    }
    if (argc - optind > max_args)
        fail(EXIT_USAGE, "unexpected argument '%s'", argv[optind + max_args]);
    return argc - optind;
}

static int status_command(int argc, char **argv)
{
    static struct table t;
    int n = parse_info_options(argc, argv, 1);
    pid_t pid = target_pid(n ? argv[optind] : DEFAULT_PIDFILE);

    add_master(&t, pid);
    add_children(&t, pid);
    print_table(&t);
    print_verdict(&t);
    return 0;
}

/* ---- topology ---- */

static const struct {
    enum ma_scope level;
    const char *why_absent; /* when it falls back to a wider level */
} levels[] = {
    {MA_SCOPE_PACKAGE, NULL},
    {MA_SCOPE_DIE, "not reported or same as package"},
    {MA_SCOPE_NODE, "no NUMA node information"},
    {MA_SCOPE_LLC, "no cache information"},
    {MA_SCOPE_CLUSTER, "not reported, or one per core"},
    {MA_SCOPE_CORE, NULL},
};

static bool cpu_directories(cpu_set_t *cpus)
{
    char path[PATH_MAX];
    DIR *dir;
    struct dirent *de;
    snprintf(path, sizeof path, "%s/devices/system/cpu", sysfs_root);
    dir = opendir(path);
    CPU_ZERO(cpus);
    if (!dir)
        return false;
    while ((de = readdir(dir))) {
        char *end;
        long cpu;
        if (strncmp(de->d_name, "cpu", 3) != 0 || de->d_name[3] < '0' ||
            de->d_name[3] > '9')
            continue;
        cpu = strtol(de->d_name + 3, &end, 10);
        if (!*end && cpu < MA_MAX_CPUS)
            CPU_SET((int)cpu, cpus);
    }
    closedir(dir);
    return CPU_COUNT(cpus) > 0;
}

/* The online CPUs, else every CPU directory (trees without the list). */
static void online_cpus(cpu_set_t *cpus)
{
    char path[PATH_MAX], buf[8192];
    FILE *f;
    size_t n = 0;
    snprintf(path, sizeof path, "%s/devices/system/cpu/online", sysfs_root);
    f = fopen(path, "re");
    if (f) {
        n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    if (ma_cpulist_parse(buf, cpus) == 0 || cpu_directories(cpus))
        return;
    fail(EXIT_RUNTIME, "no CPUs under %s/devices/system/cpu", sysfs_root);
}

static bool ids_repeat(const struct ma_unit *units, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            if (units[i].id == units[j].id)
                return true;
    return false;
}

static bool all_fell_back(const struct ma_unit *units, size_t n,
                          enum ma_scope level)
{
    for (size_t i = 0; i < n; i++)
        if (units[i].level == level || units[i].level != units[0].level)
            return false;
    return n > 0;
}

/* "core 0 in package 1: CPUs 1", the package when core ids repeat. */
static void print_unit(enum ma_scope level, const struct ma_unit *u,
                       bool qualify)
{
    char cpus[8192];
    ma_cpulist_format(&u->cpus, cpus, sizeof cpus);
    if (u->level != level)
        printf("%s: as %s for CPUs %s\n", ma_scope_name(level),
               ma_scope_name(u->level), cpus);
    else if (qualify)
        printf("%s %d in package %d: CPUs %s\n", ma_scope_name(level), u->id,
               package_of(ma_cpuset_first(&u->cpus)), cpus);
    else
        printf("%s %d: CPUs %s\n", ma_scope_name(level), u->id, cpus);
}

/* The distinct units of one level over the online CPUs. Returns false
 * after saying which CPUs' units cannot be read. */
static bool show_level(enum ma_scope level, const char *why_absent,
                       const cpu_set_t *online)
{
    static struct ma_unit units[MA_MAX_CPUS];
    cpu_set_t covered, failed;
    size_t n = 0;
    int err = 0;
    char list[8192];

    CPU_ZERO(&covered);
    CPU_ZERO(&failed);
    for (int c = 0; c < MA_MAX_CPUS; c++) {
        if (!CPU_ISSET(c, online) || CPU_ISSET(c, &covered))
            continue;
        if (ma_unit_of(sysfs_root, level, c, &units[n]) < 0) {
            err = errno;
            CPU_SET(c, &failed);
            continue;
        }
        CPU_OR(&covered, &covered, &units[n].cpus);
        n++;
    }
    if (all_fell_back(units, n, level))
        printf("%s: as %s (%s)\n", ma_scope_name(level),
               ma_scope_name(units[0].level), why_absent);
    else
        for (size_t i = 0; i < n; i++)
            print_unit(level, &units[i], ids_repeat(units, n));
    if (!err)
        return true;
    ma_cpulist_format(&failed, list, sizeof list);
    fprintf(stderr, "%s: cannot read the %s of CPUs %s under %s: %s\n", me,
            ma_scope_name(level), list, sysfs_root, strerror(err));
    return false;
}

static int topology_command(int argc, char **argv)
{
    cpu_set_t online;
    char list[8192];
    bool ok = true;

    parse_info_options(argc, argv, 0);
    online_cpus(&online);
    ma_cpulist_format(&online, list, sizeof list);
    printf("sysfs: %s\nCPUs: %s\n", sysfs_root, list);
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        ok &= show_level(levels[i].level, levels[i].why_absent, &online);
    return ok ? 0 : EXIT_RUNTIME;
}

/* ---- main ---- */

/* Runs a subcommand with argv[0] naming it, as getopt's messages do. */
static int subcommand(int (*command)(int, char **), int argc, char **argv)
{
    static char name[64];
    snprintf(name, sizeof name, "masteraff %s", argv[1]);
    me = name;
    argv[1] = name;
    return command(argc - 1, argv + 1);
}

int main(int argc, char **argv)
{
    argv[0] = program;
    if (argc > 1 && strcmp(argv[1], "status") == 0)
        return subcommand(status_command, argc, argv);
    if (argc > 1 && strcmp(argv[1], "topology") == 0)
        return subcommand(topology_command, argc, argv);
    run_command(argc, argv);
}
