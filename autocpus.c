/* libmasteraff: "worker_cpu_affinity auto" within the allowed CPUs
 * (MASTERAFF_AUTO=cpuset).
 *
 * nginx's auto deals out CPUs 0..n-1, n from
 * sysconf(_SC_NPROCESSORS_ONLN) (or the CPUs of the mask that follows
 * "auto"), worker i the i-th, wrapping (ngx_get_cpu_affinity). In a
 * container whose cpuset lacks some of them the kernel refuses those
 * pins, and the workers run unpinned or pile onto the few allowed CPUs.
 * With the setting, when auto's CPUs are not all within the CPUs a worker
 * starts on (its mask before the pin, which the kernel keeps within the
 * cpuset), the worker that asks for auto's CPU of rank r gets the allowed
 * CPU of rank r, wrapping: worker i the i-th allowed CPU, whenever there
 * are no more workers than auto's CPUs (worker_processes auto).
 *
 * Only a configuration that says auto is mapped: a mask written out
 * (worker_cpu_affinity 0101 ...) never is. Which one the workers run is
 * read where nginx reads it: at start (early.c's prediction) and again,
 * by the master, before the first fork after a reload, from the command
 * line kept at start. The children inherit the answer across fork; the
 * generation's first child says the mapping when it pins. */
#define _GNU_SOURCE
#include "autocpus.h"
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* What this process's children inherit. */
static struct {
    bool automatic; /* the configuration says "worker_cpu_affinity auto" */
    cpu_set_t cpus; /* the CPUs auto deals out */
    bool first;     /* a child: the first fork of its generation */
} gen_auto;

/* The command line nginx started with: nginx writes its process title
 * over argv, and a reload reads the same configuration. */
static struct {
    int argc;
    char **argv;
} kept;

static void keep_command_line(int argc, char *const argv[])
{
    size_t len = 0;
    char *text;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    kept.argv = calloc((size_t)argc + 1, sizeof *kept.argv);
    text = malloc(len ? len : 1);
    if (!kept.argv || !text) {
        free(kept.argv);
        free(text);
        kept.argv = NULL;
        return;
    }
    for (int i = 0; i < argc; i++) {
        kept.argv[i] = strcpy(text, argv[i]);
        text += strlen(argv[i]) + 1;
    }
    kept.argc = argc;
}

static void take_prediction(const struct ma_ngx_prediction *p)
{
    gen_auto.automatic = p->place && CPU_COUNT(&p->auto_cpus) > 0;
    gen_auto.cpus = p->auto_cpus;
}

void ma_auto_at_start(int argc, char *const argv[], const cpu_set_t *original,
                      struct ma_ngx_prediction *p)
{
    static char text[2][4096];
    size_t len = strlen(p->reason);
    int cpu;
    if (!ma_cfg.auto_cpuset)
        return;
    keep_command_line(argc, argv);
    take_prediction(p);
    if (!gen_auto.automatic ||
        (cpu = ma_auto_cpu(&p->auto_cpus, original, &p->worker0)) < 0)
        return;
    CPU_ZERO(&p->worker0);
    CPU_SET(cpu, &p->worker0);
    snprintf(p->reason + len, sizeof p->reason - len,
             "; auto's CPUs %s mapped into the cpuset %s",
             ma_cpulist_text(&p->auto_cpus, text[0], sizeof text[0]),
             ma_cpulist_text(original, text[1], sizeof text[1]));
}

void ma_auto_open_generation(bool reload)
{
    static struct ma_ngx_prediction p;
    static char text[4096];
    if (!ma_cfg.auto_cpuset || !reload || !kept.argv)
        return;
    ma_ngx_predict(kept.argc, kept.argv, ma_cfg.exe,
                   sysconf(_SC_NPROCESSORS_ONLN), &p);
    take_prediction(&p);
    if (gen_auto.automatic)
        ma_log(MA_LOG_DEBUG, "the configuration re-read says "
               "worker_cpu_affinity auto, CPUs %s",
               ma_cpulist_text(&gen_auto.cpus, text, sizeof text));
    else
        ma_log(MA_LOG_DEBUG, "the configuration re-read does not say "
               "worker_cpu_affinity auto (%s)", p.reason);
}

void ma_auto_forked(const struct ma_place *place)
{
    gen_auto.first = place->opened;
}

static void say_mapping(const cpu_set_t *allowed, int asked, int given)
{
    static char text[2][4096];
    gen_auto.first = false;
    ma_log(MA_LOG_NOTICE, "%sworker_cpu_affinity auto mapped into the cpuset "
           "%s (auto's CPUs %s are not all in it): worker %d asked for CPU "
           "%d, %s CPU %d; each worker the allowed CPU of its rank",
           ma_cfg.dry_run ? "dry run: " : "",
           ma_cpulist_text(allowed, text[0], sizeof text[0]),
           ma_cpulist_text(&gen_auto.cpus, text[1], sizeof text[1]), getpid(),
           asked, ma_cfg.dry_run ? "would get" : "gets", given);
}

/* nginx asks with sizeof(cpu_set_t): another size is not nginx's call. */
bool ma_auto_mapped(size_t size, const cpu_set_t *asked, cpu_set_t *mapped)
{
    cpu_set_t allowed;
    int e = errno, cpu;
    if (!ma_cfg.active || !ma_cfg.auto_cpuset || !gen_auto.automatic ||
        size != sizeof(cpu_set_t) || !self.parent || is_master() ||
        !in_own_process() ||
        REAL(sched_getaffinity)(0, sizeof allowed, &allowed) < 0) {
        errno = e;
        return false;
    }
    cpu = ma_auto_cpu(&gen_auto.cpus, &allowed, asked);
    if (cpu >= 0 && gen_auto.first)
        say_mapping(&allowed, ma_cpuset_first(asked), cpu);
    errno = e;
    if (cpu < 0 || ma_cfg.dry_run)
        return false;
    CPU_ZERO(mapped);
    CPU_SET(cpu, mapped);
    return true;
}
