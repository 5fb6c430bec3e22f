/* nginx's "worker_cpu_affinity auto" within the allowed CPUs
 * (ma_auto_cpu): which CPU a worker asking for one of auto's gets. */
#define _GNU_SOURCE
#include "affinity.h"
#include "test/tap.h"

static cpu_set_t set(const char *list)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    if (*list && ma_cpulist_parse(list, &s) < 0)
        ok(0, "test list '%s' parses", list);
    return s;
}

static int mapped(const char *auto_cpus, const char *allowed,
                  const char *asked)
{
    cpu_set_t a = set(auto_cpus), b = set(allowed), c = set(asked);
    return ma_auto_cpu(&a, &b, &c);
}

/* Workers 0..n-1 ask for auto's CPUs in nginx's order, wrapping; want is
 * the CPUs they get, as a list in worker order ("24,25,26,27,24"). */
static void workers_get(const char *auto_cpus, const char *allowed, int n,
                        const char *want)
{
    cpu_set_t a = set(auto_cpus), b = set(allowed), one;
    int count = CPU_COUNT(&a);
    char got[4096] = "", *p = got;
    for (int i = 0; i < n; i++) {
        int r = i % count, cpu = -1, c;
        for (c = 0; c < CPU_SETSIZE && r >= 0; c++)
            if (CPU_ISSET(c, &a) && r-- == 0)
                cpu = c;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        p += snprintf(p, sizeof got - (size_t)(p - got), "%s%d", i ? "," : "",
                      ma_auto_cpu(&a, &b, &one));
    }
    is_str(got, want, "auto %s, allowed %s, %d workers: %s", auto_cpus,
           allowed, n, want);
}

int main(void)
{
    /* A pod given CPUs 24-27 on a 64-CPU machine. */
    workers_get("0-63", "24-27", 6, "24,25,26,27,24,25");
    ok(mapped("0-63", "24-27", "24") == 24 && mapped("0-63", "24-27", "63") == 27,
       "workers 24 and 63 of 64 get the allowed CPUs of their rank");
    /* Fewer allowed CPUs than workers: wrapping, as nginx wraps. */
    workers_get("0-1", "1", 2, "1,1");
    workers_get("0-3", "1-3", 4, "1,2,3,1");
    /* Some of auto's CPUs allowed: all mapped, none piled up. */
    workers_get("0-3", "1,3", 4, "1,3,1,3");
    /* auto with a mask (worker_cpu_affinity auto 10101010). */
    workers_get("1,3,5,7", "4-5", 4, "4,5,4,5");
    /* More workers than auto's CPUs: worker i asks for what worker i-n
     * did, and gets what it got (a limit in docs/design.md). */
    workers_get("0-3", "8-11", 6, "8,9,10,11,8,9");
    workers_get("0-3", "8-10", 6, "8,9,10,8,8,9");

    ok(mapped("0-3", "0-3", "0") == -1, "auto's CPUs all allowed: nginx's own");
    ok(mapped("0-1", "0-3", "1") == -1, "allowed wider than auto's: nginx's own");
    ok(mapped("0-3", "2-3", "0-1") == -1, "a mask of two CPUs is not auto's");
    ok(mapped("0-3", "4-5", "6") == -1, "a CPU that auto does not deal out");
    ok(mapped("0-3", "", "0") == -1, "no allowed CPU: nothing to map into");
    ok(mapped("0-3", "4", "") == -1, "an empty mask asked");
    ok(mapped("", "4", "0") == -1, "no auto CPUs");
    return done_testing();
}
