/* masteraff: what its commands share. */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *me = "masteraff";

bool plugin_mode;

void (*failure_report)(const char *message);

/* Hands the failure's text to failure_report, once: it may fail itself. */
static void report_failure(const char *fmt, va_list ap)
{
    void (*report)(const char *) = failure_report;
    char *message;
    failure_report = NULL;
    if (vasprintf(&message, fmt, ap) < 0)
        return;
    report(message);
    free(message);
}

/* Says the failure on stderr, or as the plugin line "MASTERAFF WORD - ..."
 * with plugin_status under --check, and exits. */
static _Noreturn void vfail(int status, const char *word, int plugin_status,
                            const char *fmt, va_list ap)
{
    va_list again;
    if (plugin_mode) {
        printf("MASTERAFF %s - %s: ", word, me);
        vprintf(fmt, ap);
        putchar('\n');
        exit(plugin_status);
    }
    va_copy(again, ap);
    fprintf(stderr, "%s: ", me);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    if (status == EXIT_USAGE)
        fprintf(stderr, "Try 'masteraff --help' for more information.\n");
    else if (failure_report)
        report_failure(fmt, again);
    va_end(again);
    exit(status);
}

_Noreturn void fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(status, "UNKNOWN", EXIT_PLUGIN_UNKNOWN, fmt, ap);
}

/* A master that is not running is what a monitoring plugin reports as
 * critical (as check_procs does), not a plugin that cannot tell. */
_Noreturn void fail_not_running(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(EXIT_RUNTIME, "CRITICAL", EXIT_PLUGIN_CRITICAL, fmt, ap);
}

_Noreturn void out_of_memory(void)
{
    fail(EXIT_RUNTIME, "out of memory");
}

char *xstrdup(const char *s)
{
    char *copy = strdup(s);
    if (!copy)
        out_of_memory();
    return copy;
}

char *xasprintf(const char *fmt, ...)
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

FILE *xopen_memstream(char **text, size_t *len)
{
    FILE *f = open_memstream(text, len);
    if (!f)
        out_of_memory();
    return f;
}

void xclose_memstream(FILE *f)
{
    if (fclose(f) != 0)
        out_of_memory();
}

_Noreturn void common_option(int c)
{
    if (c == 'h') {
        fputs(usage_text, stdout);
        exit(0);
    }
    if (c == 'V') {
        puts("masteraff " VERSION);
        exit(0);
    }
    if (plugin_mode) {
        printf("MASTERAFF UNKNOWN - %s: bad arguments\n", me);
        exit(EXIT_PLUGIN_UNKNOWN);
    }
    fprintf(stderr, "Try 'masteraff --help' for more information.\n");
    exit(EXIT_USAGE);
}

/* Longer values are someone's mistake (or a 100 KB argument): the start
 * is enough to recognise it. */
#define ECHO_MAX 64

const char *shortened(const char *s)
{
    size_t len = strlen(s), keep = len > ECHO_MAX ? ECHO_MAX : len;
    char *copy;
    bool clean = true;
    for (size_t i = 0; i < keep; i++)
        clean &= (unsigned char)s[i] >= 0x20 && s[i] != 0x7f;
    if (clean && len == keep)
        return s;
    copy = xasprintf("%.*s%s", (int)keep, s, len > keep ? "..." : "");
    for (size_t i = 0; i < keep; i++)
        if ((unsigned char)copy[i] < 0x20 || copy[i] == 0x7f)
            copy[i] = '?';
    return copy;
}


/* ---- the topology, as the library sees it ---- */

const char *sysfs_root;

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

int package_of(int cpu)
{
    look_up_cpu(cpu);
    return cpu_info.package[cpu];
}

int node_of(int cpu)
{
    look_up_cpu(cpu);
    return cpu_info.node[cpu];
}

/* The ids of the packages or nodes of cpus, in *ids; false when some CPU's
 * cannot be read (or is out of cpu_set_t's range, which ids share). */
bool ids_of(const cpu_set_t *cpus, int (*id_of)(int), cpu_set_t *ids)
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
char *id_list(const cpu_set_t *cpus, int (*id_of)(int))
{
    char buf[8192];
    cpu_set_t ids;
    bool all = ids_of(cpus, id_of, &ids);
    if (CPU_COUNT(&ids) == 0)
        return xstrdup("?");
    ma_cpulist_format(&ids, buf, sizeof buf);
    return all ? xstrdup(buf) : xasprintf("%s,?", buf);
}

/* Parses the options of status and topology; returns the positional
 * arguments' count, at most max_args. */
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
void online_cpus(cpu_set_t *cpus)
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
    fail(EXIT_RUNTIME, "no CPUs under %s/devices/system/cpu",
         shortened(sysfs_root));
}

