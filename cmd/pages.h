/* masteraff: where a process's resident pages are, per NUMA node.
 *
 * Two kinds, counted apart:
 * - shared: the anonymous shared memory it maps (nginx's zones, shown as
 *   "/dev/zero (deleted)", and System V segments "/SYSV..."), counted in
 *   the objects themselves through /proc/PID/map_files. The process's own
 *   page tables usually map none of those pages (nginx touches its zones
 *   before its daemon fork), so numa_maps would miss them.
 * - private: what /proc/PID/numa_maps counts on the mappings that hold
 *   anonymous pages, the shared ones excepted.
 *
 * Opening map_files takes CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE) in
 * the initial user namespace, which a container's root lacks; numa_maps of
 * another user's process takes CAP_SYS_PTRACE; move_pages() may be refused
 * by a seccomp filter (podman's default profile refuses it, Docker's
 * without CAP_SYS_NICE). Run as root on the host for all three. */
#ifndef MASTERAFF_PAGES_H
#define MASTERAFF_PAGES_H

#include <sys/types.h>

/* The kernel's largest MAX_NUMNODES (CONFIG_NODES_SHIFT=10). */
#define MA_PAGES_MAX_NODES 1024

struct ma_node_pages {
    int error; /* 0, or the errno that kept these pages from being counted */
    const char *failed; /* with error, what failed: "maps", "numa_maps",
                           "map_files", "mmap", "mincore" or "move_pages" */
    unsigned long node[MA_PAGES_MAX_NODES];
};

struct ma_pages {
    struct ma_node_pages priv;
    struct ma_node_pages shared;
};

/* Counts pid's resident pages per node into *out. Each kind that cannot be
 * counted has its error set and its counts zero. */
void ma_pages_count(pid_t pid, struct ma_pages *out);

/* The sum over all nodes. */
unsigned long ma_pages_total(const struct ma_node_pages *p);

#endif
