/* Prints what the library predicts for an nginx command line:
 *
 *   test/predict [-a] [-n NCPU] [-x EXECUTABLE] -- NGINX-ARGUMENTS...
 *
 * "place CPULIST" or "none: REASON", then "files N: NAMES". NCPU defaults
 * to the online CPUs, the executable to /usr/sbin/nginx. With -a, the
 * prediction is intersected with this process's own mask, as the kernel
 * does with the CPUs a process may run on (and the library with the
 * master's original mask). */
#define _GNU_SOURCE
#include "affinity.h"
#include "nginxconf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const char *exe = "/usr/sbin/nginx";
    struct ma_ngx_prediction p;
    char list[8192];
    int i = 1, own = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-a") == 0)
            own = 1;
        else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            ncpu = atol(argv[++i]);
        else if (strcmp(argv[i], "-x") == 0 && i + 1 < argc)
            exe = argv[++i];
    }
    if (i >= argc || strcmp(argv[i], "--") != 0) {
        fprintf(stderr, "usage: %s [-n NCPU] [-x EXE] -- NGINX-ARGS...\n",
                argv[0]);
        return 2;
    }
    /* nginx's argv[0] is the program, as after "--". */
    argv[i] = (char *)exe;
    ma_ngx_predict(argc - i, argv + i, exe, ncpu, &p);
    if (p.place && own) {
        cpu_set_t mask;
        if (sched_getaffinity(0, sizeof mask, &mask) != 0)
            return 1;
        CPU_AND(&p.worker0, &p.worker0, &mask);
        if (CPU_COUNT(&p.worker0) == 0) {
            p.place = 0;
            snprintf(p.reason, sizeof p.reason, "outside this process's mask");
        }
    }
    if (p.place) {
        ma_cpulist_format(&p.worker0, list, sizeof list);
        printf("place %s\n", list);
    } else {
        printf("none: %s\n", p.reason);
    }
    printf("files %u: %s\n", p.n_files, p.files);
    return 0;
}
