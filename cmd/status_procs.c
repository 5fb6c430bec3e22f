/* masteraff status: the master and its children, as /proc shows them. */
#define _GNU_SOURCE
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

ssize_t read_proc(pid_t pid, const char *name, char *buf, size_t len)
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
    p->titled = true;
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

int read_process(struct proc *p, pid_t pid)
{
    p->pid = pid;
    return read_role(p) < 0 || read_cpus(p) < 0 ? -1 : 0;
}

pid_t parent_of(pid_t pid)
{
    pid_t ppid;
    unsigned long long start;
    return read_stat(pid, &ppid, &start) == 0 ? ppid : -1;
}

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

void add_master(struct table *t, pid_t pid)
{
    struct proc *p = new_proc(t, pid, 0);
    if (read_process(p, pid) < 0) {
        if (errno == ENOENT)
            fail_not_running("process %d is not running", (int)pid);
        fail(EXIT_RUNTIME, "process %d: %s", (int)pid, strerror(errno));
    }
    t->n++;
}

static void add_child(struct table *t, pid_t pid, unsigned long long start)
{
    struct proc *p = new_proc(t, pid, start);
    if (read_process(p, pid) == 0)
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
void add_children(struct table *t, pid_t master)
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

