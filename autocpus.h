/* libmasteraff: "worker_cpu_affinity auto" within the allowed CPUs
 * (MASTERAFF_AUTO=cpuset). */
#ifndef MASTERAFF_AUTOCPUS_H
#define MASTERAFF_AUTOCPUS_H

#include "affinity.h"
#include "brood.h"
#include "nginxconf.h"

#include <stdbool.h>
#include <stddef.h>

/* Before main(), in a target started as argv (argc words): keeps the
 * command line for the reloads, takes whether the configuration says
 * auto from prediction p, and, where auto's CPUs are not all within
 * original (what the workers will start on), changes p's worker 0 to the
 * CPU it will be given. */
void ma_auto_at_start(int argc, char *const argv[], const cpu_set_t *original,
                      struct ma_ngx_prediction *p);

/* In the master before a fork that opens a generation: for a reload's
 * (reload), whether the configuration nginx re-read says auto. */
void ma_auto_open_generation(bool reload);

/* In the child between fork and return, with the place the fork was given.
 * Async-signal-safe. */
void ma_auto_forked(const struct ma_place *place);

/* In a child pinning itself (sched_setaffinity of size bytes): whether
 * the mask it asks for is one of auto's that is to be mapped, and then
 * the mask it gets instead. The generation's first child says so. errno
 * is kept. */
bool ma_auto_mapped(size_t size, const cpu_set_t *asked, cpu_set_t *mapped);

#endif
