/* libmasteraff: configuration and log lines. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct ma_config ma_cfg = {
    .scope = MA_SCOPE_PACKAGE,
    .migrate = true,
    .early = true,
    .log_level = MA_LOG_NOTICE,
    .sysfs = "/sys",
};

static const char *const level_names[] = {"error", "warn", "notice", "info",
                                          "debug"};

/* A write to a pipe whose reader is gone raises SIGPIPE, which kills a
 * program that has not yet ignored it (nginx does from main() on). The
 * signal is blocked on this thread for the write, and the one the write
 * raised is taken back: unless one was pending already, which is the
 * program's (signals of a kind do not queue). */
static void write_without_signal(const char *line, size_t n)
{
    static const struct timespec now = {0, 0};
    sigset_t pipe_only, old, pending;
    bool was_pending;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
    if (write(STDERR_FILENO, line, n) < 0 && errno == EPIPE && !was_pending)
        sigtimedwait(&pipe_only, NULL, &now);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* One write, so the line is not interleaved with nginx's own; a log that
 * cannot be written now (a full pipe, a socket nobody reads) is dropped,
 * never waited for, and nothing the program should hear about. stderr's
 * file status flags are the program's: O_NONBLOCK is not ours to set.
 * A pipe that has room for a write of PIPE_BUF bytes takes one at once,
 * whole; another writer of the same pipe filling it between the poll and
 * the write is the one case left that can wait. */
static void write_line(char *line, size_t n)
{
    struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
    struct stat st;
    if (ma_fstat(STDERR_FILENO, &st) < 0)
        return;
    if (S_ISSOCK(st.st_mode)) {
        send(STDERR_FILENO, line, n, MSG_DONTWAIT | MSG_NOSIGNAL);
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT))
            return;
        if (n > PIPE_BUF) {
            n = PIPE_BUF;
            line[n - 1] = '\n';
        }
    }
    write_without_signal(line, n);
}

void ma_log(enum ma_log_level level, const char *fmt, ...)
{
    char line[8192];
    size_t n;
    time_t t = time(NULL);
    struct tm tm;
    va_list ap;
    int e = errno;

    if (level > ma_cfg.log_level)
        return;
    localtime_r(&t, &tm);
    n = strftime(line, sizeof line, "%Y/%m/%d %H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof line - n, " [%s] %d#%d: masteraff: ",
                          level_names[level], getpid(), gettid());
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - n - 1, fmt, ap);
    va_end(ap);
    n = strlen(line);
    line[n++] = '\n';
    write_line(line, n);
    errno = e;
}

/* The first bad value's line, said again once the program has pointed
 * stderr elsewhere: at load it is the terminal or the journal, and nginx
 * points it at error.log before it forks its workers. */
static struct {
    char line[512];
    dev_t dev;
    ino_t ino;
    bool said_again;
} bad;

/* A value is echoed whole only up to a point: it may be anything. */
#define ECHOED 64

static void bad_value(const char *var, const char *value, const char *accepted)
{
    char line[sizeof bad.line];
    struct stat st;
    snprintf(line, sizeof line,
             "%s=\"%.*s%s\" is not valid (accepted: %s); libmasteraff stays "
             "inert",
             var, ECHOED, value, strlen(value) > ECHOED ? "..." : "",
             accepted);
    ma_log(MA_LOG_ERROR, "%s", line);
    if (bad.line[0] || ma_fstat(STDERR_FILENO, &st) < 0)
        return;
    memcpy(bad.line, line, sizeof line);
    bad.dev = st.st_dev;
    bad.ino = st.st_ino;
}

void ma_config_say_again(void)
{
    struct stat st;
    if (!bad.line[0] || bad.said_again || ma_fstat(STDERR_FILENO, &st) < 0 ||
        (st.st_dev == bad.dev && st.st_ino == bad.ino))
        return;
    bad.said_again = true;
    ma_log(MA_LOG_ERROR, "%s", bad.line);
}

/* ---- the target programs ----
 *
 * This part runs in every program the library is preloaded in, so it calls
 * libc only where a short loop would not do: the first call of each libc
 * function costs a symbol lookup, which is most of what the library adds
 * to a program it leaves alone. */

#define DEFAULT_PROGRAMS "nginx*,openresty*,angie*,freenginx*,tengine*"

/* getenv, read from environ, which is still the one the program started
 * with. */
static const char *variable(const char *name)
{
    for (char **e = environ; e && *e; e++) {
        const char *n = name, *v = *e;
        while (*n && *n == *v)
            n++, v++;
        if (!*n && *v == '=')
            return v + 1;
    }
    return NULL;
}

static size_t pattern_length(const char *p)
{
    size_t len = 0;
    while (p[len] && p[len] != ',')
        len++;
    return len;
}

static bool patterns_valid(const char *list)
{
    const char *p = list;
    if (!*list)
        return false;
    for (;;) {
        size_t len = pattern_length(p);
        if (len == 0 || memchr(p, '/', len))
            return false;
        if (!p[len])
            return true;
        p += len + 1;
    }
}

static bool is_wildcard(char c)
{
    return c == '*' || c == '?' || c == '[' || c == '\\';
}

/* Longer than any file name: such a pattern matches nothing. */
#define MAX_PATTERN 256

static bool fnmatch_pattern(const char *p, size_t len, const char *name)
{
    char pattern[MAX_PATTERN];
    memcpy(pattern, p, len);
    pattern[len] = '\0';
    return fnmatch(pattern, name, 0) == 0;
}

/* Up to its first wildcard a pattern is literal, and most patterns
 * ("nginx*", "uwsgi") end there or with one '*': those need no fnmatch. */
static bool pattern_matches(const char *p, size_t len, const char *name)
{
    size_t i = 0;
    if (len >= MAX_PATTERN)
        return false;
    for (; i < len && !is_wildcard(p[i]); i++)
        if (p[i] != name[i])
            return false;
    if (i == len)
        return !name[i];
    if (p[i] == '*' && i + 1 == len)
        return true;
    return fnmatch_pattern(p, len, name);
}

static bool name_matches(const char *list, const char *name)
{
    const char *p = list;
    for (;;) {
        size_t len = pattern_length(p);
        if (pattern_matches(p, len, name))
            return true;
        if (!p[len])
            return false;
        p += len + 1;
    }
}

static bool ends_with(const char *s, size_t len, const char *suffix,
                      size_t suffix_len)
{
    if (len < suffix_len)
        return false;
    for (size_t i = 0; i < suffix_len; i++)
        if (s[len - suffix_len + i] != suffix[i])
            return false;
    return true;
}

static const char *file_name(const char *path)
{
    const char *name = path;
    for (const char *c = name; *c; c++)
        if (*c == '/')
            name = c + 1;
    return name;
}

/* The executable's file name: argv[0] may be anything. Without /proc,
 * argv[0]'s all the same: the path the program was started by would name
 * an interpreter after its script. buf gets the path (then argv[0], which
 * nginx also passes to exec for its binary upgrade). */
static const char *program_name(char *buf, size_t len)
{
    static const char deleted[] = " (deleted)";
    ssize_t n = readlink("/proc/self/exe", buf, len - 1);
    if (n <= 0) {
        snprintf(buf, len, "%s", program_invocation_name);
        return file_name(buf);
    }
    if (ends_with(buf, (size_t)n, deleted, sizeof deleted - 1))
        n -= (ssize_t)(sizeof deleted - 1);
    buf[n] = '\0';
    return file_name(buf);
}

/* With MASTERAFF_LOG=debug, why the library does nothing here. */
static bool say_not_target(const char *patterns)
{
    const char *level = variable("MASTERAFF_LOG");
    if (!level || strcmp(level, "debug") != 0)
        return false;
    ma_cfg.log_level = MA_LOG_DEBUG;
    ma_log(MA_LOG_DEBUG, "%s is not a target: its name does not match "
           "MASTERAFF_PROGRAMS (%s)", ma_cfg.exe, patterns);
    return false;
}

bool ma_config_nginx_family(void)
{
    return name_matches(DEFAULT_PROGRAMS, file_name(ma_cfg.exe));
}

bool ma_config_target(void)
{
    const char *programs = variable("MASTERAFF_PROGRAMS");
    const char *name = program_name(ma_cfg.exe, sizeof ma_cfg.exe);
    /* A set-user-ID program must not be steered by its caller's
     * environment. An nginx says it again in its error.log. */
    if (programs && !patterns_valid(programs)) {
        if (getauxval(AT_SECURE))
            return false;
        bad_value("MASTERAFF_PROGRAMS", programs,
                  "comma-separated shell patterns of executable file "
                  "names, such as nginx*,uwsgi, or *");
        ma_cfg.bad = name_matches(DEFAULT_PROGRAMS, name);
        return false;
    }
    if (!name_matches(programs ? programs : DEFAULT_PROGRAMS, name))
        return say_not_target(programs ? programs : DEFAULT_PROGRAMS);
    /* Not even MASTERAFF_LOG is read there. */
    return !getauxval(AT_SECURE);
}

/* ---- the settings ---- */

static bool parse_scope(const char *v)
{
    if (ma_scope_parse(v, &ma_cfg.scope) == 0)
        return true;
    bad_value("MASTERAFF_SCOPE", v, ma_scope_choices());
    return false;
}

/* A variable that takes "on" or "off". */
static bool parse_switch(const char *var, const char *v, bool *out)
{
    if (strcmp(v, "on") == 0 || strcmp(v, "off") == 0) {
        *out = strcmp(v, "on") == 0;
        return true;
    }
    bad_value(var, v, "on, off");
    return false;
}

static bool parse_migrate(const char *v)
{
    return parse_switch("MASTERAFF_MIGRATE", v, &ma_cfg.migrate);
}

static bool parse_early(const char *v)
{
    return parse_switch("MASTERAFF_EARLY", v, &ma_cfg.early);
}

/* Unlike the others, a bad MASTERAFF_AUTO leaves the library active:
 * said once, and nginx's own "auto" stays as it is. */
static bool parse_auto(const char *v)
{
    if (strcmp(v, "cpuset") == 0 || strcmp(v, "off") == 0) {
        ma_cfg.auto_cpuset = v[0] == 'c';
        return true;
    }
    ma_log(MA_LOG_WARN, "MASTERAFF_AUTO=\"%.*s%s\" is not valid (accepted: "
           "cpuset, off); ignored: worker_cpu_affinity auto is left as "
           "nginx makes it", ECHOED, v, strlen(v) > ECHOED ? "..." : "");
    return true;
}

static bool parse_log(const char *v)
{
    for (size_t i = 0; i < sizeof level_names / sizeof *level_names; i++)
        if (strcmp(v, level_names[i]) == 0) {
            ma_cfg.log_level = (enum ma_log_level)i;
            return true;
        }
    bad_value("MASTERAFF_LOG", v, "error, warn, notice, info, debug");
    return false;
}

static bool parse_dry_run(const char *v)
{
    if (strcmp(v, "1") == 0 || strcmp(v, "0") == 0) {
        ma_cfg.dry_run = v[0] == '1';
        return true;
    }
    bad_value("MASTERAFF_DRY_RUN", v, "1, 0");
    return false;
}

static bool parse_sysfs(const char *v)
{
    if (v[0] == '/' && strlen(v) < sizeof ma_cfg.sysfs) {
        strcpy(ma_cfg.sysfs, v);
        return true;
    }
    bad_value("MASTERAFF_SYSFS", v, "an absolute path");
    return false;
}

static void carry(const char *name)
{
    const char *v = variable(name);
    char *slot = ma_cfg.carried[ma_cfg.n_carried];
    if (v && (size_t)snprintf(slot, sizeof ma_cfg.carried[0], "%s=%s", name,
                              v) < sizeof ma_cfg.carried[0])
        ma_cfg.n_carried++;
}

static void carry_environment(void)
{
    static const char *const names[] = {
        "LD_PRELOAD",        "MASTERAFF_SCOPE",   "MASTERAFF_MIGRATE",
        "MASTERAFF_PROGRAMS", "MASTERAFF_LOG",    "MASTERAFF_DRY_RUN",
        "MASTERAFF_SYSFS",   "MASTERAFF_EARLY",   "MASTERAFF_AUTO"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        carry(names[i]);
}

static bool parse_var(const char *name, bool (*parse)(const char *))
{
    const char *v = variable(name);
    return !v || parse(v);
}

void ma_config_load(void)
{
    bool ok = true;
    ok &= parse_var("MASTERAFF_LOG", parse_log);
    ok &= parse_var("MASTERAFF_SCOPE", parse_scope);
    ok &= parse_var("MASTERAFF_MIGRATE", parse_migrate);
    ok &= parse_var("MASTERAFF_DRY_RUN", parse_dry_run);
    ok &= parse_var("MASTERAFF_SYSFS", parse_sysfs);
    ok &= parse_var("MASTERAFF_EARLY", parse_early);
    parse_var("MASTERAFF_AUTO", parse_auto);
    ma_cfg.active = ok;
    ma_cfg.bad = !ok;
    if (ok)
        carry_environment();
    if (ok && ma_cfg.migrate)
        ma_memory_locate_library();
    if (ok)
        ma_log(MA_LOG_DEBUG, "loaded in %s, scope %s, memory %s, early "
               "placement %s, auto %s%s",
               ma_cfg.exe, ma_scope_name(ma_cfg.scope),
               ma_cfg.migrate ? "on" : "off", ma_cfg.early ? "on" : "off",
               ma_cfg.auto_cpuset ? "within the allowed CPUs" : "as nginx's",
               ma_cfg.dry_run ? ", dry run" : "");
}
