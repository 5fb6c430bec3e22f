/* libmasteraff: where the master goes at start.
 *
 * Before main(), in an nginx that will start a server, worker 0's CPUs
 * are read from the configuration nginx is about to read (nginxconf.c),
 * and the master's place is decided as following would decide it: the
 * scope units holding those CPUs, within the master's original mask.
 * shim.c then places the master at once, so that what nginx allocates
 * next (shared zones, listening sockets, the configuration its workers
 * inherit) is first touched on worker 0's chip. Any doubt: no placement,
 * and the master follows worker 0 when it pins, as without this. */
#define _GNU_SOURCE
#include "internal.h"
#include "nginxconf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
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

/* The scope units of worker 0's CPUs, as following would take them. */
static void decide_target(const cpu_set_t *original, struct ma_early *e)
{
    char cpus[4096];

    if (ma_place_for(ma_cfg.sysfs, ma_cfg.scope, NULL, &e->worker0, original,
                     &e->target, e->units, sizeof e->units) < 0) {
        doubt(e, "cannot read the %s of CPUs %s under %s: %s",
              ma_scope_name(ma_cfg.scope),
              ma_cpulist_text(&e->worker0, cpus, sizeof cpus), ma_cfg.sysfs,
              strerror(errno));
        return;
    }
    e->node = ma_node_of_cpu(ma_cfg.sysfs, ma_cpuset_first(&e->worker0));
    e->place = true;
}

static void decide_from_prediction(const struct ma_ngx_prediction *p,
                                   const cpu_set_t *original,
                                   struct ma_early *e)
{
    char cpus[4096], orig[4096];
    if (!p->place)
        return doubt(e, "%s", p->reason);
    CPU_AND(&e->worker0, &p->worker0, original);
    if (CPU_COUNT(&e->worker0) == 0)
        return doubt(e, "worker 0's CPUs %s are outside the master's CPUs %s",
                     ma_cpulist_text(&p->worker0, cpus, sizeof cpus),
                     ma_cpulist_text(original, orig, sizeof orig));
    snprintf(e->why, sizeof e->why, "%s", p->reason);
    decide_target(original, e);
}

void ma_early_decide(int argc, char **argv, const cpu_set_t *original,
                     struct ma_early *e)
{
    struct ma_ngx_prediction p;
    memset(e, 0, sizeof *e);
    e->node = -1;
    if (!ma_cfg.early)
        return doubt(e, "MASTERAFF_EARLY=off");
    if (argc < 1 || !argv)
        return doubt(e, "no command line");
    ma_ngx_predict(argc, argv, ma_cfg.exe, sysconf(_SC_NPROCESSORS_ONLN), &p);
    e->n_files = p.n_files;
    snprintf(e->files, sizeof e->files, "%s", p.files);
    decide_from_prediction(&p, original, e);
}
