/* libFuzzer target: topology lookups on a damaged or hostile sysfs tree.
 *
 * The input fills the files of a small tree (MASTERAFF_SYSFS-style) in a
 * temporary directory:
 *
 *   byte 0        bits 0-1: CPUs in the tree - 1 (1..4)
 *                 bits 2-3: node directories (0..3)
 *                 bits 4-7: the leader's CPUs for ma_scope_expand (0: CPU 0)
 *   then fields separated by ';':
 *                 first one per node directory: nodeN/cpulist
 *                 then blocks of NFILES fields, one block per CPU (block
 *                 c % blocks for CPU c when there are fewer blocks than CPUs)
 *
 * A field "!" leaves its file out, as does a block cut short; "" is an
 * empty file. Then every ma_unit_of (all scopes, CPUs -1..5) and
 * ma_scope_expand must not crash, leak a descriptor, or return a unit
 * without the CPU asked for, or of a level narrower than asked; from units
 * read ahead by ma_topology_read it must give what reading gives. */
#define _GNU_SOURCE
#include "affinity.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static const char *const files[] = {
    "topology/package_cpus_list", "topology/core_siblings_list",
    "topology/physical_package_id", "topology/core_cpus_list",
    "topology/thread_siblings_list", "topology/core_id",
    "topology/cluster_cpus_list", "topology/cluster_id",
    "topology/die_cpus_list", "topology/die_id",
    "cache/index0/level", "cache/index0/type", "cache/index0/shared_cpu_list",
    "cache/index1/level", "cache/index1/type", "cache/index1/shared_cpu_list",
};
#define NFILES (sizeof files / sizeof *files)
#define MAX_FIELDS 128

static char root[64];
static int free_fd = -1;

static int remove_one(const char *path, const struct stat *st, int flag,
                      struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void mkdirs(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdirs(const char *fmt, ...)
{
    char path[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    for (char *p = path + strlen(root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

static void put(const char *path, const char *data, size_t len)
{
    int fd;
    if (len == 1 && data[0] == '!')
        return;
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        perror(path);
    CHECK(fd >= 0);
    CHECK(write(fd, data, len) == (ssize_t)len);
    close(fd);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(root, sizeof root, "%s/masteraff-fuzz.XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    CHECK(mkdtemp(root));
    return 0;
}

__attribute__((destructor)) static void cleanup(void)
{
    if (root[0])
        nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Where a unit found for `asked` may come from after fallback. */
static bool level_allowed(enum ma_scope asked, enum ma_scope got)
{
    switch (asked) {
    case MA_SCOPE_CLUSTER:
        return got == MA_SCOPE_CLUSTER || got == MA_SCOPE_LLC ||
               got == MA_SCOPE_DIE || got == MA_SCOPE_PACKAGE;
    case MA_SCOPE_LLC:
        return got == MA_SCOPE_LLC || got == MA_SCOPE_DIE ||
               got == MA_SCOPE_PACKAGE;
    case MA_SCOPE_DIE:
        return got == MA_SCOPE_DIE || got == MA_SCOPE_PACKAGE;
    case MA_SCOPE_NODE:
        return got == MA_SCOPE_NODE || got == MA_SCOPE_PACKAGE;
    default:
        return got == asked;
    }
}

static void build_tree(const unsigned char *data, size_t size, int ncpus,
                       int nnodes)
{
    const char *field[MAX_FIELDS];
    size_t len[MAX_FIELDS], nf = 0, blocks;
    const char *p = (const char *)data, *end = p + size;
    char path[4096];

    while (p <= end && nf < MAX_FIELDS) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *stop = semi ? semi : end;
        field[nf] = p;
        len[nf++] = (size_t)(stop - p);
        if (!semi)
            break;
        p = semi + 1;
    }
    if (size == 0)
        nf = 0;

    nftw(root, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    CHECK(mkdir(root, 0700) == 0);
    mkdirs("%s/devices/system/cpu", root);
    for (int n = 0; n < nnodes; n++) {
        mkdirs("%s/devices/system/node/node%d", root, n);
        snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist",
                 root, n);
        if ((size_t)n < nf)
            put(path, field[n], len[n]);
    }
    blocks = nf > (size_t)nnodes ? (nf - (size_t)nnodes + NFILES - 1) / NFILES
                                 : 0;
    for (int c = 0; c < ncpus; c++) {
        size_t first = (size_t)nnodes + (blocks ? (size_t)c % blocks : 0) * NFILES;
        mkdirs("%s/devices/system/cpu/cpu%d/topology", root, c);
        mkdirs("%s/devices/system/cpu/cpu%d/cache/index0", root, c);
        mkdirs("%s/devices/system/cpu/cpu%d/cache/index1", root, c);
        for (size_t f = 0; f < NFILES && blocks && first + f < nf; f++) {
            snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/%s",
                     root, c, files[f]);
            put(path, field[first + f], len[first + f]);
        }
    }
}

static void check_units(const cpu_set_t *out, const struct ma_unit *u,
                        size_t n)
{
    char desc[512], tiny[12];
    for (size_t i = 0; i < n; i++) {
        cpu_set_t both;
        CPU_AND(&both, &u[i].cpus, out);
        CHECK(CPU_EQUAL(&both, &u[i].cpus));
        CHECK(CPU_COUNT(&u[i].cpus) > 0);
        for (size_t j = 0; j < i; j++)
            CHECK(u[j].level != u[i].level ||
                  !CPU_EQUAL(&u[j].cpus, &u[i].cpus));
    }
    ma_units_describe(u, n, desc, sizeof desc);
    CHECK(strlen(desc) < sizeof desc);
    ma_units_describe(u, n, tiny, sizeof tiny);
    CHECK(strlen(tiny) < sizeof tiny);
}

/* The same expansion from the units of every CPU of the tree, read ahead
 * as a master does, gives what reading gives, whatever the tree. */
static void expand_known(const char *root, enum ma_scope scope, int ncpus,
                         const cpu_set_t *leader)
{
    static struct ma_topology known;
    struct ma_unit units[16], read_units[16];
    cpu_set_t all, out, read_out;
    size_t n, read_n;
    int rc;

    CPU_ZERO(&all);
    for (int c = 0; c < ncpus; c++)
        CPU_SET(c, &all);
    ma_topology_init(&known, scope);
    if (ma_topology_read(root, &all, &known) == 0)
        CHECK(CPU_EQUAL(&known.read, &all));
    rc = ma_scope_expand(root, scope, &known, leader, &out, units, 16, &n);
    CHECK(rc == ma_scope_expand(root, scope, NULL, leader, &read_out,
                                read_units, 16, &read_n));
    if (rc < 0)
        return;
    CHECK(CPU_EQUAL(&out, &read_out) && n == read_n);
    for (size_t i = 0; i < n; i++)
        CHECK(units[i].level == read_units[i].level &&
              units[i].id == read_units[i].id &&
              CPU_EQUAL(&units[i].cpus, &read_units[i].cpus));
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    int ncpus, nnodes, fd;
    cpu_set_t leader;

    if (size == 0)
        return 0;
    ncpus = 1 + (data[0] & 3);
    nnodes = (data[0] >> 2) & 3;
    CPU_ZERO(&leader);
    for (int c = 0; c < 4; c++)
        if (data[0] & (0x10 << c))
            CPU_SET(c, &leader);
    if (CPU_COUNT(&leader) == 0)
        CPU_SET(0, &leader);
    build_tree(data + 1, size - 1, ncpus, nnodes);

    for (int s = 0; s < MA_SCOPE_COUNT; s++) {
        struct ma_unit units[16], few[2];
        cpu_set_t out, both;
        size_t n;

        for (int cpu = -1; cpu <= 5; cpu++) {
            struct ma_unit u;
            errno = 0;
            if (ma_unit_of(root, (enum ma_scope)s, cpu, &u) < 0) {
                CHECK(errno != 0);
                continue;
            }
            CHECK(cpu >= 0 && cpu < ncpus);
            CHECK(CPU_ISSET(cpu, &u.cpus));
            CHECK(level_allowed((enum ma_scope)s, u.level));
        }
        errno = 0;
        if (ma_scope_expand(root, (enum ma_scope)s, NULL, &leader, &out,
                            units, 16, &n) == 0) {
            CPU_AND(&both, &out, &leader);
            CHECK(CPU_EQUAL(&both, &leader));
            CHECK(n >= 1 && n <= 16);
            check_units(&out, units, n);
            /* The same with room for fewer units than there are. */
            CHECK(ma_scope_expand(root, (enum ma_scope)s, NULL, &leader,
                                  &both, few, 2, &n) == 0);
            CHECK(CPU_EQUAL(&both, &out) && n <= 2);
            check_units(&out, few, n);
        } else {
            CHECK(errno != 0);
        }
        expand_known(root, (enum ma_scope)s, ncpus, &leader);
    }
    for (int cpu = 0; cpu <= 5; cpu++) {
        int node = ma_node_of_cpu(root, cpu);
        CHECK(node >= -1 && node < nnodes);
    }

    /* No descriptor left open by any path above. */
    fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (free_fd < 0)
        free_fd = fd;
    CHECK(fd == free_fd);
    close(fd);
    return 0;
}
