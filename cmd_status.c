/* masteraff status: where a master, its children and their memory are,
 * and whether the master is with worker 0. */
#define _GNU_SOURCE
#include "cli.h"
#include "pages.h"

#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int status_command(int argc, char **argv)
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

