/* A libnuma.so.1 for musl programs on this Debian machine, whose libnuma
 * is built against glibc (Alpine's numactl package has a musl one): the
 * three calls the library takes from libnuma, made as libnuma makes them.
 * test/musl.t builds it with musl-gcc so that a musl nginx shows the
 * library opening libnuma with musl's dlopen and moving pages with it. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int numa_available(void);
int numa_max_node(void);
long numa_move_pages(int pid, unsigned long count, void **pages,
                     const int *nodes, int *status, int flags);

int numa_available(void)
{
    return syscall(SYS_get_mempolicy, NULL, NULL, 0UL, NULL, 0UL) < 0 ? -1 : 0;
}

/* The highest N of /sys/devices/system/node/nodeN. */
int numa_max_node(void)
{
    DIR *d = opendir("/sys/devices/system/node");
    struct dirent *e;
    int max = 0;
    if (!d)
        return 0;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "node", 4) == 0 && atoi(e->d_name + 4) > max)
            max = atoi(e->d_name + 4);
    closedir(d);
    return max;
}

long numa_move_pages(int pid, unsigned long count, void **pages,
                     const int *nodes, int *status, int flags)
{
    return syscall(SYS_move_pages, pid, count, pages, nodes, status, flags);
}
