/* libmasteraff: the master's memory follows the leader's node. */
#define _GNU_SOURCE
#include "internal.h"

const char *ma_memory_follow(const cpu_set_t *leader)
{
    (void)leader;
    return ma_cfg.migrate ? "memory not moved (no migration in this build)"
                          : "memory not moved (MASTERAFF_MIGRATE=off)";
}
