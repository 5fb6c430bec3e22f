/* pagenodes PID: where a process's memory lives, per NUMA node.
 *
 *   shared node0=12 node3=3400 total=3412
 *   private node3=210 total=210
 *
 * shared: the resident pages of its anonymous shared memory (nginx's zones),
 * counted in the objects themselves, reached through /proc/PID/map_files:
 * the process's own page tables usually map none of them. private: its
 * anonymous pages as /proc/PID/numa_maps counts them. Run as root. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_NODES 64

static long shared[MAX_NODES], private_[MAX_NODES];

static void print(const char *what, const long *count)
{
    long total = 0;
    printf("%s", what);
    for (int n = 0; n < MAX_NODES; n++)
        if (count[n]) {
            printf(" node%d=%ld", n, count[n]);
            total += count[n];
        }
    printf(" total=%ld\n", total);
}

/* Maps the object behind one mapping and asks where its resident pages are. */
static void count_object(int pid, unsigned long start, unsigned long end,
                         unsigned long offset)
{
    char path[128];
    long page = sysconf(_SC_PAGESIZE);
    size_t len = end - start, pages = len / (size_t)page;
    unsigned char *vec = malloc(pages);
    void **addr = malloc(pages * sizeof *addr);
    int *status = malloc(pages * sizeof *status);
    size_t n = 0;
    char *map;
    int fd;

    snprintf(path, sizeof path, "/proc/%d/map_files/%lx-%lx", pid, start, end);
    fd = open(path, O_RDONLY);
    if (fd < 0 || !vec || !addr || !status) {
        perror(path);
        exit(1);
    }
    map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, (off_t)offset);
    if (map == MAP_FAILED || mincore(map, len, vec) < 0) {
        perror("mmap/mincore");
        exit(1);
    }
    for (size_t i = 0; i < pages; i++)
        if (vec[i] & 1) {
            addr[n] = map + i * (size_t)page;
            (void)*(volatile char *)addr[n++];
        }
    if (n && syscall(SYS_move_pages, 0, n, addr, NULL, status, 0) < 0) {
        perror("move_pages");
        exit(1);
    }
    for (size_t i = 0; i < n; i++)
        if (status[i] >= 0 && status[i] < MAX_NODES)
            shared[status[i]]++;
    munmap(map, len);
    close(fd);
    free(vec);
    free(addr);
    free(status);
}

static void count_shared(int pid)
{
    char path[64], line[4096];
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/maps", pid);
    f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end, offset;
        char perms[8], file[4096] = "";
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %4095[^\n]", &start, &end,
                   perms, &offset, file) < 4)
            continue;
        if (perms[3] == 's' && (strncmp(file, "/dev/zero", 9) == 0 ||
                                strncmp(file, "/SYSV", 5) == 0))
            count_object(pid, start, end, offset);
    }
    fclose(f);
}

/* numa_maps: "7f.. default anon=3 dirty=3 N0=3 kernelpagesize_kB=4". */
static void count_private(int pid)
{
    char path[64], line[8192];
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/numa_maps", pid);
    f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(1);
    }
    while (fgets(line, sizeof line, f)) {
        char *tok, *save;
        if (!strstr(line, " anon=") || strstr(line, "/dev/zero"))
            continue;
        for (tok = strtok_r(line, " \n", &save); tok;
             tok = strtok_r(NULL, " \n", &save)) {
            int node;
            long count;
            if (sscanf(tok, "N%d=%ld", &node, &count) == 2 && node >= 0 &&
                node < MAX_NODES)
                private_[node] += count;
        }
    }
    fclose(f);
}

int main(int argc, char **argv)
{
    int pid;
    if (argc != 2 || (pid = atoi(argv[1])) <= 0) {
        fprintf(stderr, "usage: pagenodes PID\n");
        return 2;
    }
    count_shared(pid);
    count_private(pid);
    print("shared", shared);
    print("private", private_);
    return 0;
}
