/* libmasteraff: where the master goes at start.
 *
 * Before main(), in an nginx that will start a server, worker 0's CPUs
 * are read from the configuration nginx is about to read (nginxconf.c),
 * and the master's place is decided as following would decide it: the
 * scope units holding those CPUs, within the master's original mask.
 * decide.c then places the master at once, so that what nginx allocates
 * next (shared zones, listening sockets, the configuration its workers
 * inherit) is first touched on worker 0's chip. Any doubt: no placement,
 * and the master follows worker 0 when it pins, as without this. */
#define _GNU_SOURCE
#include "autocpus.h"
#include "internal.h"
#include "nginxconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void doubt(struct ma_early *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void doubt(struct ma_early *e, const char *fmt, ...)
{
    va_list ap;
    e->place = false;
    va_start(ap, fmt);
    vsnprintf(e->why, sizeof e->why, fmt, ap);
    va_end(ap);
}

/* The text of the CPU lists the decision names. Static, as what follows
 * runs once, in the constructor, on the main thread, before the program:
 * under whatever stack limit it was started with, which nginx alone may
 * need only a few pages of. */
static char cpus[4096], orig[4096];
static struct ma_ngx_prediction prediction;

/* The scope units of worker 0's CPUs within the master's, as following
 * would take them; the node of all of worker 0's CPUs, as following would
 * take it. */
static void decide_target(const cpu_set_t *within, const cpu_set_t *original,
                          struct ma_early *e)
{
    if (ma_place_for(ma_cfg.sysfs, ma_cfg.scope, NULL, within, original,
                     &e->target, e->units, sizeof e->units) < 0) {
        doubt(e, "cannot read the %s of CPUs %s under %s: %s",
              ma_scope_name(ma_cfg.scope),
              ma_cpulist_text(within, cpus, sizeof cpus), ma_cfg.sysfs,
              strerror(errno));
        return;
    }
    e->node = ma_node_of_worker(ma_cfg.sysfs, &e->worker0);
    e->place = true;
}

static void decide_from_prediction(const struct ma_ngx_prediction *p,
                                   const cpu_set_t *original,
                                   struct ma_early *e)
{
    cpu_set_t within;
    if (!p->place)
        return doubt(e, "%s", p->reason);
    /* Worker 0 gets its whole mask, whatever its master started under: a
     * start mask (taskset, systemd's CPUAffinity=) does not bind a child's
     * sched_setaffinity. The master is placed within its own. */
    e->worker0 = p->worker0;
    CPU_AND(&within, &p->worker0, original);
    if (CPU_COUNT(&within) == 0)
        return doubt(e, "worker 0's CPUs %s are outside the master's CPUs %s",
                     ma_cpulist_text(&p->worker0, cpus, sizeof cpus),
                     ma_cpulist_text(original, orig, sizeof orig));
    snprintf(e->why, sizeof e->why, "%s", p->reason);
    decide_target(&within, original, e);
}

static void decide_for_command_line(int argc, char **argv,
                                    const cpu_set_t *original,
                                    struct ma_early *e)
{
    struct ma_ngx_prediction *p = &prediction;
    if (argc < 1 || !argv)
        return doubt(e, "no command line");
    ma_ngx_predict(argc, argv, ma_cfg.exe, sysconf(_SC_NPROCESSORS_ONLN), p);
    ma_auto_at_start(argc, argv, original, p);
    e->n_files = p->n_files;
    snprintf(e->files, sizeof e->files, "%.*s", (int)sizeof e->files - 1,
             p->files);
    if (!ma_cfg.early)
        return doubt(e, "MASTERAFF_EARLY=off");
    decide_from_prediction(p, original, e);
}

/* nginx's command lines are a few words: a longer one is a doubt, not a
 * reading cut short. */
#define CMDLINE_MAX (128 * 1024)

/* The process's arguments from /proc/self/cmdline: allocated, as 128 KiB
 * has no place on the stack before main(). */
struct cmdline {
    char *text; /* the arguments, each ending in '\0' */
    char **argv;
    int argc;
};

static ssize_t read_all(int fd, char *buf, size_t len)
{
    size_t got = 0;
    ssize_t n;
    while (got < len && (n = read(fd, buf + got, len - got)) != 0) {
        if (n < 0 && errno != EINTR)
            return -1;
        got += n > 0 ? (size_t)n : 0;
    }
    return (ssize_t)got;
}

static void split_arguments(struct cmdline *c, size_t len)
{
    if (len == 0)
        return;
    for (size_t i = 0; i < len; i++)
        if (c->text[i] == '\0' || i == len - 1)
            c->argc++;
    c->argv = calloc((size_t)c->argc + 1, sizeof *c->argv);
    if (!c->argv)
        return;
    c->argv[0] = c->text;
    for (size_t i = 0, n = 1; i + 1 < len; i++)
        if (c->text[i] == '\0')
            c->argv[n++] = c->text + i + 1;
}

static const char cmdline_path[] = "/proc/self/cmdline";

static int cannot_read(struct cmdline *c, struct ma_early *e)
{
    doubt(e, "cannot read %s: %s", cmdline_path, strerror(errno));
    free(c->text);
    return -1;
}

/* Returns 0 with c filled, or -1 with the doubt said in e. */
static int read_cmdline(struct cmdline *c, struct ma_early *e)
{
    ssize_t len;
    int fd = -1;

    memset(c, 0, sizeof *c);
    c->text = malloc(CMDLINE_MAX + 1);
    if (!c->text || (fd = open(cmdline_path, O_RDONLY | O_CLOEXEC)) < 0)
        return cannot_read(c, e);
    len = read_all(fd, c->text, CMDLINE_MAX + 1);
    close(fd);
    if (len < 0)
        return cannot_read(c, e);
    if (len > CMDLINE_MAX) {
        doubt(e, "%s is longer than %d bytes", cmdline_path, CMDLINE_MAX);
        free(c->text);
        return -1;
    }
    c->text[len] = '\0';
    split_arguments(c, (size_t)len);
    if (len > 0 && !c->argv)
        return cannot_read(c, e);
    return 0;
}

/* A libc that calls constructors without arguments (musl): the command
 * line as the kernel keeps it, untouched before main(). */
static void decide_from_proc(const cpu_set_t *original, struct ma_early *e)
{
    struct cmdline c;
    if (read_cmdline(&c, e) < 0)
        return;
    decide_for_command_line(c.argc, c.argv, original, e);
    free(c.argv);
    free(c.text);
}

void ma_early_decide(int argc, char **argv, const cpu_set_t *original,
                     struct ma_early *e)
{
    memset(e, 0, sizeof *e);
    e->node = -1;
    /* MASTERAFF_AUTO=cpuset reads the configuration without it. */
    if (!ma_cfg.early && !ma_cfg.auto_cpuset)
        return doubt(e, "MASTERAFF_EARLY=off");
    if (!argv)
        return decide_from_proc(original, e);
    decide_for_command_line(argc, argv, original, e);
}
