/* masteraff: where a process's resident pages are (see pages.h). */
#define _GNU_SOURCE
#include "pages.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHUNK 4096 /* pages per mincore() and move_pages() call */

/* What failed last in this process's count, for the error's reader. */
static const char *failed_step;

static int fail(const char *step)
{
    failed_step = step;
    return -1;
}

/* Asks the kernel where the resident pages among n pages at `at` are. */
static int count_chunk(char *at, size_t n, size_t page, unsigned long *node)
{
    unsigned char vec[CHUNK];
    void *addr[CHUNK];
    int status[CHUNK];
    size_t k = 0;

    if (mincore(at, n * page, vec) < 0)
        return fail("mincore");
    /* move_pages() only sees pages our page tables map: reading a resident
     * page of shared memory maps it, and allocates nothing. */
    for (size_t i = 0; i < n; i++)
        if (vec[i] & 1) {
            addr[k] = at + i * page;
            (void)*(volatile char *)addr[k++];
        }
    if (k && syscall(SYS_move_pages, 0, k, addr, NULL, status, 0) < 0)
        return fail("move_pages");
    for (size_t i = 0; i < k; i++)
        if (status[i] >= 0 && status[i] < MA_PAGES_MAX_NODES)
            node[status[i]]++;
    return 0;
}

/* Anonymous shared memory cannot be truncated, so reading any page of our
 * own mapping of it cannot fault with SIGBUS. */
static int count_mapped_object(int fd, size_t len, off_t offset,
                               unsigned long *node)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pages = len / page;
    char *map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, offset);
    int rc = 0;

    if (map == MAP_FAILED)
        return fail("mmap");
    for (size_t done = 0; rc == 0 && done < pages; done += CHUNK)
        rc = count_chunk(map + done * page,
                         pages - done < CHUNK ? pages - done : CHUNK, page,
                         node);
    munmap(map, len);
    return rc;
}

/* The object behind one mapping of pid, reached through map_files: the
 * pages live there whether or not pid's page tables map them. */
static int count_object(pid_t pid, unsigned long start, unsigned long end,
                        unsigned long offset, unsigned long *node)
{
    char path[96];
    int fd, rc;

    snprintf(path, sizeof path, "/proc/%d/map_files/%lx-%lx", (int)pid, start,
             end);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        /* ENOENT: the mapping went away since maps was read. */
        return errno == ENOENT ? 0 : fail("map_files");
    rc = count_mapped_object(fd, end - start, (off_t)offset, node);
    close(fd);
    return rc;
}

/* nginx's zones ("/dev/zero (deleted)": MAP_SHARED|MAP_ANONYMOUS) and
 * System V segments. */
static int count_shared_mapping(pid_t pid, const char *line,
                                unsigned long *node)
{
    unsigned long start, end, offset;
    char perms[8], file[4096] = "";

    if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095[^\n]", &start, &end, perms,
               &offset, file) < 4)
        return 0;
    if (perms[3] != 's' || (strncmp(file, "/dev/zero", 9) != 0 &&
                            strncmp(file, "/SYSV", 5) != 0))
        return 0;
    return count_object(pid, start, end, offset, node);
}

static FILE *open_proc(pid_t pid, const char *what)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    return fopen(path, "re");
}

static int count_shared(pid_t pid, unsigned long *node)
{
    FILE *f = open_proc(pid, "maps");
    char *line = NULL;
    size_t cap = 0;
    int err = 0;

    if (!f)
        return fail("maps");
    while (!err && getline(&line, &cap, f) > 0)
        if (count_shared_mapping(pid, line, node) < 0)
            err = errno;
    if (!err && ferror(f)) {
        err = errno;
        fail("maps");
    }
    free(line);
    fclose(f);
    errno = err;
    return err ? -1 : 0;
}

/* Adds the "N3=400" fields of one numa_maps line. */
static void add_node_fields(char *line, unsigned long *node)
{
    char *save, *tok;
    for (tok = strtok_r(line, " \n", &save); tok;
         tok = strtok_r(NULL, " \n", &save)) {
        int n;
        unsigned long count;
        if (sscanf(tok, "N%d=%lu", &n, &count) == 2 && n >= 0 &&
            n < MA_PAGES_MAX_NODES)
            node[n] += count;
    }
}

/* Shared anonymous memory holds no anonymous pages (the kernel keeps them
 * as shmem), so the lines with "anon=" are private mappings. */
static int count_private(pid_t pid, unsigned long *node)
{
    FILE *f = open_proc(pid, "numa_maps");
    char *line = NULL;
    size_t cap = 0;
    int err;

    if (!f)
        return fail("numa_maps");
    while (getline(&line, &cap, f) > 0)
        if (strstr(line, " anon="))
            add_node_fields(line, node);
    /* numa_maps is generated as it is read: errors come from the reads. */
    err = ferror(f) ? errno : 0;
    if (err)
        fail("numa_maps");
    free(line);
    fclose(f);
    errno = err;
    return err ? -1 : 0;
}

static void count_kind(pid_t pid, struct ma_node_pages *p,
                       int (*count)(pid_t, unsigned long *))
{
    memset(p, 0, sizeof *p);
    if (count(pid, p->node) < 0) {
        int e = errno;
        memset(p, 0, sizeof *p);
        p->error = e;
        p->failed = failed_step;
    }
}

void ma_pages_count(pid_t pid, struct ma_pages *out)
{
    count_kind(pid, &out->priv, count_private);
    count_kind(pid, &out->shared, count_shared);
}

unsigned long ma_pages_total(const struct ma_node_pages *p)
{
    unsigned long total = 0;
    for (int n = 0; n < MA_PAGES_MAX_NODES; n++)
        total += p->node[n];
    return total;
}
