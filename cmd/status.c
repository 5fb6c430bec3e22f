/* masteraff status: where a master, its children and their memory are,
 * whether the library is loaded in the master and with which settings,
 * and a verdict on whether the master is with worker 0 (status_verdict.c),
 * as a table, as JSON (status_json.c), as a monitoring plugin's line or
 * in Prometheus' text format (status_prometheus.c). */
#define _GNU_SOURCE
#include "status.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const char *const headers[N_COLS] = {
    "PID", "ROLE", "CPUS", "PACKAGES", "NODES", "PRIVATE", "SHARED"};

/* ---- the processes' columns ---- */

/* "private=node0:12,node3:400", "private=none", or "private=?" when the
 * pages cannot be counted. */
static char *page_column(const char *kind, const struct ma_node_pages *pages)
{
    char *text;
    size_t len;
    FILE *f = xopen_memstream(&text, &len);
    const char *sep = "";
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
    xclose_memstream(f);
    return text;
}

static void fill_columns(struct proc *p, enum ma_scope scope)
{
    char cpus[8192];
    cpu_set_t covered;
    p->pages = malloc(sizeof *p->pages);
    if (!p->pages)
        out_of_memory();
    ma_pages_count(p->pid, p->pages);
    ma_cpulist_format(&p->cpus, cpus, sizeof cpus);
    p->col[COL_PID] = xasprintf("%d", (int)p->pid);
    p->col[COL_ROLE] = xstrdup(p->role);
    p->col[COL_CPUS] = xstrdup(cpus);
    p->col[COL_PACKAGES] = id_list(&p->cpus, package_of);
    p->col[COL_NODES] = id_list(&p->cpus, node_of);
    p->col[COL_PRIVATE] = page_column("private", &p->pages->priv);
    p->col[COL_SHARED] = page_column("shared", &p->pages->shared);
    p->units = units_of(&p->cpus, scope, &covered);
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


/* ---- output ---- */

/* Whether dir (its length len) is one the loader searches by default, as
 * glibc's (with Debian's multiarch directories) and musl's do: a libnuma
 * there is the system's, even beside a library installed there too. */
static bool system_library_dir(const char *dir, size_t len)
{
    static const char *const roots[] = {"/lib", "/usr/lib", "/usr/local/lib",
                                        "/lib64", "/usr/lib64"};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        size_t n = strlen(roots[i]);
        if (len < n || strncmp(dir, roots[i], n) != 0)
            continue;
        if (len == n)
            return true;
        /* One multiarch level below: "/usr/lib/x86_64-linux-gnu". */
        if (dir[n] == '/' && !memchr(dir + n + 1, '/', len - n - 1) &&
            memmem(dir + n, len - n, "-linux-", 7))
            return true;
    }
    return false;
}

/* Which libnuma the library opened: the system's (the loader found it),
 * or the copy in its own directory (an image without libnuma), which the
 * library opens only when the system has none. */
static void print_numa(const struct library *lib)
{
    const char *slash = strrchr(lib->path, '/');
    const char *numa_slash = lib->numa ? strrchr(lib->numa, '/') : NULL;
    size_t dir = slash ? (size_t)(slash - lib->path) + 1 : 0;
    if (!lib->numa && lib->numa_refused)
        printf("libnuma: not loaded; the copy beside the library would not "
               "be: %s\n", lib->numa_refused);
    else if (!lib->numa)
        printf("libnuma: not loaded (no memory moved yet, or none found)\n");
    else if (numa_slash &&
             system_library_dir(lib->numa, (size_t)(numa_slash - lib->numa)))
        printf("libnuma: %s, the system's\n", lib->numa);
    else if (dir && strncmp(lib->numa, lib->path, dir) == 0 &&
             !strchr(lib->numa + dir, '/'))
        printf("libnuma: %s, beside the library\n", lib->numa);
    else
        printf("libnuma: %s, the system's (found by the loader's search)\n",
               lib->numa);
}

static void print_library(const struct library *lib)
{
    const char *sep = "";
    if (lib->maps_error)
        printf("library: cannot tell (%s)\n", strerror(lib->maps_error));
    else
        printf("library: %s\n", lib->path ? lib->path : "not loaded");
    if (lib->path)
        print_numa(lib);
    printf("settings: ");
    for (int var = 0; var < N_VARS; var++)
        if (lib->value[var]) {
            printf("%s%s=%s", sep, var_names[var], shortened(lib->value[var]));
            sep = " ";
        }
    if (lib->settings_from)
        printf("%s(%s from the master's %s)\n", sep,
               *sep ? "the others default; read" : "the defaults; none set",
               strcmp(lib->settings_from, "environ") == 0
                   ? "environment"
                   : "copy of its environment in memory");
    else
        printf("the defaults, as far as status can tell (the master's "
               "environment: %s%s)\n",
               strerror(lib->settings_error),
               lib->settings_error == EACCES ? "; run as root" : "");
}

/* "reason; reason; ..." */
static void print_reasons(const struct verdict *v)
{
    for (size_t i = 0; i < v->n; i++)
        printf("%s%s", i ? "; " : "", v->reason[i].text);
}

static void print_text(const struct table *t, const struct library *lib,
                       const struct verdict *v)
{
    print_table(t);
    print_library(lib);
    printf("%s: ", level_name(v->level));
    print_reasons(v);
    putchar('\n');
}

/* The monitoring-plugin line: "MASTERAFF OK - reasons". */
static void print_plugin_line(const struct verdict *v)
{
    static const char *const words[] = {"OK", "WARNING", "CRITICAL",
                                        "UNKNOWN"};
    printf("MASTERAFF %s - ", words[v->level]);
    print_reasons(v);
    putchar('\n');
}

/* ---- the command ---- */

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

/* Who a pid file speaks for: nginx's, or any other master's. */
static const char *whose(const char *path)
{
    return strcmp(path, DEFAULT_PIDFILE) == 0 ? "nginx" : "the master";
}

static pid_t pid_from_file(const char *path)
{
    char buf[64];
    FILE *f = fopen(path, "re");
    size_t n;
    int err;
    pid_t pid;

    if (!f && errno == ENOENT)
        fail_not_running("%s is not running: no pid file %s (give the "
                         "master's pid, or its pid file if it is elsewhere)",
                         whose(path), shortened(path));
    if (!f)
        fail(EXIT_RUNTIME, "cannot read pid file %s: %s", shortened(path),
             strerror(errno));
    n = fread(buf, 1, sizeof buf - 1, f);
    err = ferror(f) ? errno : 0;
    fclose(f);
    if (err)
        fail(EXIT_RUNTIME, "cannot read pid file %s: %s", shortened(path),
             strerror(err));
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (!parse_pid(buf, &pid))
        fail(EXIT_RUNTIME, "pid file %s does not hold a pid", shortened(path));
    if (kill(pid, 0) < 0 && errno == ESRCH)
        fail_not_running("%s is not running: its pid file %s names process "
                         "%d, which has exited",
                         whose(path), shortened(path), (int)pid);
    return pid;
}

/* A word of digits is a pid; anything else names a pid file. */
static pid_t target_pid(const char *arg)
{
    pid_t pid;
    if (strspn(arg, "0123456789") != strlen(arg))
        return pid_from_file(arg);
    if (!parse_pid(arg, &pid))
        fail(EXIT_USAGE, "bad pid '%s' (accepted: 1 to %d)", shortened(arg),
             INT_MAX);
    return pid;
}

/* An nginx master by its title, one with worker children, or one the
 * library is loaded in that has children (another pre-fork server). */
static bool looks_like_master(const struct table *t, const struct library *lib)
{
    if (t->procs[0].titled && strcmp(t->procs[0].role, "master") == 0)
        return true;
    for (size_t i = 1; i < t->n; i++)
        if (t->procs[i].worker)
            return true;
    return lib->path && t->n > 1;
}

/* Refuses what is not a master, pointing a worker's caller to its master. */
static void refuse_non_master(const struct table *t, const struct library *lib)
{
    const struct proc *p = &t->procs[0];
    struct proc parent = {0};
    pid_t ppid;
    if (looks_like_master(t, lib))
        return;
    ppid = parent_of(p->pid);
    if (ppid > 0 && read_process(&parent, ppid) == 0 && parent.titled &&
        strcmp(parent.role, "master") == 0)
        fail(EXIT_RUNTIME,
             "process %d is a %s process, not a master: its master is %d "
             "(masteraff status %d)",
             (int)p->pid, shortened(p->role), (int)ppid, (int)ppid);
    fail(EXIT_RUNTIME,
         "process %d (%s) is not a master: no worker process among its "
         "children",
         (int)p->pid, shortened(p->role));
}

/* --sysfs, else the caller's $MASTERAFF_SYSFS, else the master's. */
static const char *choose_sysfs(const char *option, const struct library *lib)
{
    const char *caller = getenv("MASTERAFF_SYSFS");
    if (option)
        return option;
    if (caller && *caller)
        return caller;
    return setting(lib, VAR_SYSFS);
}

static enum ma_scope master_scope(const struct library *lib)
{
    enum ma_scope scope;
    return ma_scope_parse(setting(lib, VAR_SCOPE), &scope) == 0
               ? scope
               : MA_SCOPE_PACKAGE;
}

static const struct option status_options[] = {
    {"sysfs", required_argument, NULL, OPT_SYSFS},
    {"json", no_argument, NULL, OPT_JSON},
    {"check", no_argument, NULL, OPT_CHECK},
    {"prometheus", no_argument, NULL, OPT_PROMETHEUS},
    {"textfile", optional_argument, NULL, OPT_TEXTFILE},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

struct status_settings {
    const char *sysfs, *target, *textfile;
    bool json, check, prometheus, to_textfile;
};

static void parse_status_options(int argc, char **argv,
                                 struct status_settings *s)
{
    int c;
    while ((c = getopt_long(argc, argv, "hV", status_options, NULL)) != -1)
        switch (c) {
        case OPT_SYSFS:
            s->sysfs = optarg;
            break;
        case OPT_JSON:
            s->json = true;
            break;
        case OPT_CHECK:
            s->check = plugin_mode = true;
            break;
        case OPT_PROMETHEUS:
            s->prometheus = true;
            break;
        case OPT_TEXTFILE:
            s->prometheus = s->to_textfile = true;
            s->textfile = optarg;
            break;
        default:
            common_option(c);
        }
    if (argc - optind > 1)
        fail(EXIT_USAGE, "unexpected argument '%s'",
             shortened(argv[optind + 1]));
    if (s->prometheus && (s->json || s->check))
        fail(EXIT_USAGE, "%s goes with neither --json nor --check",
             s->to_textfile ? "--textfile" : "--prometheus");
    s->target = optind < argc ? argv[optind] : DEFAULT_PIDFILE;
    if (s->prometheus)
        prometheus_output(s->to_textfile, s->textfile);
}

int status_command(int argc, char **argv)
{
    static struct table t;
    static struct library lib;
    static struct verdict v;
    struct status_settings s = {0};
    enum ma_scope scope;
    cpu_set_t online, original;
    pid_t pid;

    parse_status_options(argc, argv, &s);
    pid = target_pid(s.target);
    add_master(&t, pid);
    read_library(pid, &lib);
    add_children(&t, pid);
    refuse_non_master(&t, &lib);

    sysfs_root = choose_sysfs(s.sysfs, &lib);
    online_cpus(&online);
    scope = master_scope(&lib);
    for (size_t i = 0; i < t.n; i++)
        fill_columns(&t.procs[i], scope);
    original_mask(&t, &original);
    mark_pinned(&t, &original);
    judge(&t, &lib, scope, &original, &v);

    if (s.json)
        print_json(&t, &lib, ma_scope_name(scope), &v);
    else if (s.check)
        print_plugin_line(&v);
    else if (s.prometheus)
        print_prometheus(&t, &lib, &v);
    else
        print_text(&t, &lib, &v);
    return s.check ? (int)v.level : 0;
}
