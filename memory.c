/* libmasteraff: the master's memory follows the leader's node.
 *
 * Pages are found by walking the master's mappings with mincore(), and
 * moved with libnuma's numa_move_pages(). nginx's shared zones need care:
 * the master's page tables usually map none of their pages (nginx touched
 * them before its daemon fork), and move_pages() only sees mapped pages, so
 * the resident pages of anonymous shared memory are read once to map them,
 * through process_vm_readv(): the program may unmap a zone meanwhile, and
 * the kernel then fails the read where a load of ours would fault.
 *
 * libnuma is opened with dlopen() in a master that migrates, so no other
 * process pays for it: the system's, else a copy in the library's own
 * directory (an image without libnuma, the library and the copy put there
 * by a Kubernetes init container), if no one but root and the library's
 * owner could have put it there (loadable.c). */
#define _GNU_SOURCE
#include "internal.h"
#include "loadable.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* From <numaif.h>, which the build does not need. */
#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1
#define MPOL_BIND 2
#define MPOL_MF_MOVE (1 << 1)
#define MPOL_MF_MOVE_ALL (1 << 2)

#define MAX_NODES 1024
#define LONG_BITS (8 * sizeof(unsigned long))
#define CHUNK 4096 /* pages per mincore() and move_pages() call */

static struct {
    bool tried;
    const char *error; /* why libnuma cannot be used, or NULL */
    bool beside;       /* the copy beside the library was opened */
    int (*available)(void);
    int (*max_node)(void);
    long (*move_pages)(int pid, unsigned long count, void **pages,
                       const int *nodes, int *status, int flags);
} numa;

/* A thread's memory policy can only be set by the thread itself, so the
 * master's main thread takes the preferred node at its next fork (nginx
 * forks at every reload and respawn). applied_node is the policy it has
 * from us, which its children must not inherit; -1 for none. */
static int preferred_node = -1;
static int applied_node = -1;

struct moved {
    unsigned long moved, left;
    int flags;
    int refused; /* errno of a move_pages() query refused, as a seccomp
                    filter does (podman's default profile, Docker's
                    without CAP_SYS_NICE) */
};

/* The library's own directory, without symbolic links, and the owner of
 * its file, as they were when it was loaded: what the copy of libnuma
 * beside it is judged by. Empty when the library was found without a
 * directory. */
static struct {
    char dir[PATH_MAX];
    uid_t owner;
} library;

/* At load, not at the first move: the owner that counts is that of the
 * file the loader mapped, not of one swapped in since by whoever owns the
 * directory. realpath allocates its buffer: glibc's fortified one, given
 * ours, would bind a symbol version (GLIBC_2.4) that no other call needs,
 * which every program the library is preloaded in would pay to check. */
void ma_memory_locate_library(void)
{
    Dl_info self;
    struct stat st;
    char *real, *slash;
    if (!dladdr((void *)ma_memory_locate_library, &self) ||
        !self.dli_fname || !strchr(self.dli_fname, '/') ||
        !(real = realpath(self.dli_fname, NULL)))
        return;
    if (ma_stat(real, &st) == 0) {
        slash = strrchr(real, '/');
        slash[slash == real] = '\0'; /* "/" keeps its slash */
        snprintf(library.dir, sizeof library.dir, "%s", real);
        library.owner = st.st_uid;
    }
    free(real);
}

/* DIR/libnuma.so.1 beside the library, and why it was not opened. */
static char numa_beside[PATH_MAX + 16];
static char numa_refused[PATH_MAX + 128];
static char numa_missing[sizeof numa_beside + sizeof numa_refused + 64];

/* The system's libnuma, else the copy beside the library, looked for only
 * then: most processes never open libnuma at all. */
static void *open_numa(void)
{
    void *h = dlopen("libnuma.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h || !library.dir[0])
        return h;
    snprintf(numa_beside, sizeof numa_beside, "%s/libnuma.so.1",
             library.dir[1] ? library.dir : "");
    if (ma_loadable("", library.dir, "libnuma.so.1", library.owner,
                    numa_refused, sizeof numa_refused) != 0)
        return NULL;
    h = dlopen(numa_beside, RTLD_NOW | RTLD_LOCAL);
    numa.beside = h != NULL;
    return h;
}

static void say_missing(void)
{
    if (numa_refused[0])
        snprintf(numa_missing, sizeof numa_missing, "libnuma.so.1 not found, "
                 "and %s not loaded: %s", numa_beside, numa_refused);
    else
        snprintf(numa_missing, sizeof numa_missing,
                 "libnuma.so.1 not found%s%s", numa_beside[0] ? ", nor " : "",
                 numa_beside);
    numa.error = numa_missing;
}

static bool load_numa(void)
{
    void *h;
    if (numa.tried)
        return numa.error == NULL;
    numa.tried = true;
    h = open_numa();
    if (!h) {
        say_missing();
        return false;
    }
    numa.available = (int (*)(void))dlsym(h, "numa_available");
    numa.max_node = (int (*)(void))dlsym(h, "numa_max_node");
    numa.move_pages = (long (*)(int, unsigned long, void **, const int *,
                                int *, int))dlsym(h, "numa_move_pages");
    if (!numa.available || !numa.max_node || !numa.move_pages)
        numa.error = "libnuma.so.1 lacks numa_move_pages";
    else if (numa.available() < 0)
        numa.error = "the kernel has no NUMA support";
    return numa.error == NULL;
}

static long get_mempolicy_of_thread(int *mode, unsigned long *mask)
{
    return syscall(SYS_get_mempolicy, mode, mask, MAX_NODES, NULL, 0UL);
}

static bool node_in(const unsigned long *mask, int node)
{
    return mask[node / LONG_BITS] & (1UL << (node % LONG_BITS));
}

/* The policy the user set, read once, before the library set any: the
 * main thread takes ours at its forks, and may itself be the one that
 * follows a worker (inside fork) and asks again later. */
static struct {
    bool read;
    int mode;
    unsigned long mask[MAX_NODES / LONG_BITS];
} user;

static int user_policy(const unsigned long **mask)
{
    if (!user.read) {
        user.read = true;
        if (get_mempolicy_of_thread(&user.mode, user.mask) < 0)
            user.mode = MPOL_DEFAULT;
        user.mode &= 0xff;
    }
    *mask = user.mask;
    return user.mode;
}

/* Anonymous shared memory: nginx's zones ("/dev/zero (deleted)" on
 * Linux's MAP_SHARED|MAP_ANONYMOUS) and System V segments. */
static bool anonymous_shared(const char *perms, const char *path)
{
    return perms[3] == 's' && (strncmp(path, "/dev/zero", 9) == 0 ||
                               strncmp(path, "/SYSV", 5) == 0);
}

/* Pages queued for one move_pages() call: each call drains every CPU's
 * LRU lists, so it pays to move many pages at once. */
static void *queue[CHUNK];
static unsigned long queued;

static void move_queued(int node, struct moved *m)
{
    static int nodes[CHUNK], before[CHUNK], after[CHUNK];
    unsigned long n = queued;
    queued = 0;
    for (unsigned long i = 0; i < n; i++)
        nodes[i] = node;
    if (n == 0)
        return;
    if (numa.move_pages(0, n, queue, NULL, before, 0) < 0) {
        m->refused = errno;
        return;
    }
    if (numa.move_pages(0, n, queue, nodes, after, m->flags) < 0 &&
        errno == EPERM && m->flags == MPOL_MF_MOVE_ALL) {
        /* Without CAP_SYS_NICE only pages no other process maps move. */
        m->flags = MPOL_MF_MOVE;
        numa.move_pages(0, n, queue, nodes, after, m->flags);
    }
    for (unsigned long i = 0; i < n; i++) {
        if (before[i] < 0)
            continue;
        if (after[i] == node && before[i] != node)
            m->moved++;
        else if (after[i] != node)
            m->left++;
    }
}

static void queue_page(void *page, int node, struct moved *m)
{
    queue[queued++] = page;
    if (queued == CHUNK)
        move_queued(node, m);
}

static size_t pages_in(char *at, char *end, long page)
{
    size_t left = (size_t)(end - at) / (size_t)page;
    return left < CHUNK ? left : CHUNK;
}

/* Maps the resident pages at pages[0..n) into our page tables, so that
 * move_pages() sees them, by reading one byte of each through the kernel:
 * the program may unmap the range at any moment (nginx drops zones on a
 * reload), and a page that is gone then is a page not moved, never a
 * fault in the master. Returns how many pages, from the first, were read. */
static size_t map_in(void **pages, size_t n)
{
    static struct iovec remote[CHUNK];
    static char sink[CHUNK];
    struct iovec local = {.iov_base = sink, .iov_len = n};
    ssize_t got = 0;
    for (size_t i = 0; i < n; i++)
        remote[i] = (struct iovec){.iov_base = pages[i], .iov_len = 1};
    /* The kernel takes at most IOV_MAX remote pieces per call. */
    for (size_t done = 0; done < n; done += (size_t)got) {
        size_t ask = n - done < IOV_MAX ? n - done : IOV_MAX;
        local.iov_base = sink + done;
        local.iov_len = ask;
        got = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, remote + done,
                      (unsigned long)ask, 0UL);
        if (got <= 0)
            return done;
        if ((size_t)got < ask)
            return done + (size_t)got;
    }
    return n;
}

/* Anonymous shared memory: its resident pages, by mincore(), which looks
 * at the object, not at our page tables. Pages of a mapping we may read
 * are mapped in first; the others only move where they are mapped. */
static void move_shared_range(char *start, char *end, bool readable, int node,
                              struct moved *m)
{
    static unsigned char vec[CHUNK];
    static void *resident[CHUNK];
    long page = sysconf(_SC_PAGESIZE);

    for (char *at = start; at < end; at += CHUNK * page) {
        size_t n = pages_in(at, end, page), k = 0;
        if (mincore(at, n * (size_t)page, vec) < 0)
            return;
        for (size_t i = 0; i < n; i++)
            if (vec[i] & 1)
                resident[k++] = at + i * (size_t)page;
        if (readable)
            k = map_in(resident, k);
        for (size_t i = 0; i < k; i++)
            queue_page(resident[i], node, m);
    }
}

#define PM_PRESENT (1ULL << 63)
#define PM_FILE (1ULL << 61)

/* A private mapping: its present anonymous pages, copy-on-write ones in
 * file mappings included (relocated data, RELRO), by /proc/self/pagemap.
 * Page cache pages of the files are every process's, and stay. */
static void move_private_range(int pagemap, char *start, char *end, int node,
                               struct moved *m)
{
    static uint64_t entries[CHUNK];
    long page = sysconf(_SC_PAGESIZE);

    for (char *at = start; at < end; at += CHUNK * page) {
        size_t n = pages_in(at, end, page);
        off_t off = (off_t)((uintptr_t)at / (uintptr_t)page * sizeof *entries);
        if (pread(pagemap, entries, n * sizeof *entries, off) !=
            (ssize_t)(n * sizeof *entries))
            return;
        for (size_t i = 0; i < n; i++)
            if ((entries[i] & PM_PRESENT) && !(entries[i] & PM_FILE))
                queue_page(at + i * (size_t)page, node, m);
    }
}

static void move_mapping(int pagemap, const char *line, int node,
                         struct moved *m)
{
    unsigned long start, end;
    char perms[8], path[4096] = "";
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %4095[^\n]", &start, &end,
               perms, path) < 3)
        return;
    /* vdso and friends are the kernel's; PROT_NONE is address space kept
     * in reserve (glibc's arenas), where nothing lives. */
    if (strncmp(path, "[v", 2) == 0 || strcmp(perms, "---p") == 0)
        return;
    if (perms[3] == 's') {
        if (anonymous_shared(perms, path))
            move_shared_range((char *)start, (char *)end, perms[0] == 'r',
                              node, m);
        return;
    }
    move_private_range(pagemap, (char *)start, (char *)end, node, m);
}

static int move_all_pages(int node, struct moved *m)
{
    FILE *maps = fopen("/proc/self/maps", "re");
    int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    char line[4096];
    if (!maps || pagemap < 0) {
        int e = errno;
        if (maps)
            fclose(maps);
        if (pagemap >= 0)
            close(pagemap);
        errno = e;
        return -1;
    }
    m->flags = MPOL_MF_MOVE_ALL;
    while (fgets(line, sizeof line, maps))
        move_mapping(pagemap, line, node, m);
    fclose(maps);
    close(pagemap);
    move_queued(node, m);
    return 0;
}

static uint64_t elapsed_us(const struct timespec *since)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)((now.tv_sec - since->tv_sec) * 1000000 +
                      (now.tv_nsec - since->tv_nsec) / 1000);
}

/* Why memory may not move to node, or NULL when it may. */
static const char *cannot_move(int node, char *buf, size_t len)
{
    const unsigned long *mask;
    if (!load_numa())
        return numa.error;
    if (node > numa.max_node()) {
        snprintf(buf, len, "node %d does not exist", node);
        return buf;
    }
    if (user_policy(&mask) == MPOL_BIND && !node_in(mask, node)) {
        snprintf(buf, len, "its memory policy binds it elsewhere");
        return buf;
    }
    return NULL;
}

/* Later allocations prefer the node, unless the user chose a policy. */
static void prefer_node(int node)
{
    const unsigned long *mask;
    preferred_node = user_policy(&mask) == MPOL_DEFAULT ? node : -1;
}

const char *ma_memory_follow(const cpu_set_t *leader)
{
    static char text[sizeof numa_missing + 256];
    char why[128];
    const char *no;
    struct timespec t0;
    struct moved m = {0};
    int node = ma_node_of_worker(ma_cfg.sysfs, leader);

    if (!ma_cfg.migrate)
        return "memory not moved (MASTERAFF_MIGRATE=off)";
    if (node < 0 && errno == ENOENT)
        return "memory not moved (no NUMA node found for the worker's CPU)";
    if (node < 0) {
        snprintf(text, sizeof text, "memory not moved (cannot read the NUMA "
                 "nodes under %s: %s)", ma_cfg.sysfs, strerror(errno));
        return text;
    }
    if (ma_cfg.dry_run) {
        snprintf(text, sizeof text, "memory would move to node %d", node);
        return text;
    }
    no = cannot_move(node, why, sizeof why);
    if (no) {
        snprintf(text, sizeof text, "memory not moved to node %d (%s)", node,
                 no);
        return text;
    }
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (move_all_pages(node, &m) < 0) {
        snprintf(text, sizeof text,
                 "memory not moved (cannot read /proc/self/maps or pagemap: "
                 "%s)",
                 strerror(errno));
        return text;
    }
    prefer_node(node);
    if (m.refused && !m.moved) {
        snprintf(text, sizeof text, "memory not moved to node %d (move_pages: "
                 "%s; a seccomp filter refuses it: Docker's default profile "
                 "without CAP_SYS_NICE, podman's always)", node,
                 strerror(m.refused));
        return text;
    }
    snprintf(text, sizeof text, "moved %lu pages to node %d in %lluus%s%s%s",
             m.moved, node, (unsigned long long)elapsed_us(&t0),
             numa.beside ? " (with " : "", numa.beside ? numa_beside : "",
             numa.beside ? ", beside the library)" : "");
    if (m.left)
        snprintf(text + strlen(text), sizeof text - strlen(text),
                 "; %lu pages stay elsewhere%s", m.left,
                 m.flags == MPOL_MF_MOVE ? " (shared, no CAP_SYS_NICE)" : "");
    return text;
}

void ma_memory_restore(void)
{
    preferred_node = -1;
}

static long set_policy(int node)
{
    unsigned long mask[MAX_NODES / LONG_BITS] = {0};
    if (node < 0)
        return syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0UL);
    mask[node / LONG_BITS] |= 1UL << (node % LONG_BITS);
    return syscall(SYS_set_mempolicy, MPOL_PREFERRED, mask,
                   (unsigned long)MAX_NODES);
}

void ma_memory_prefork(void)
{
    if (preferred_node != applied_node && set_policy(preferred_node) == 0)
        applied_node = preferred_node;
}

/* Async-signal-safe, and writes nothing: a vfork child may call it. */
void ma_memory_leave_policy(void)
{
    if (applied_node >= 0)
        set_policy(-1);
}

void ma_memory_resume_policy(void)
{
    if (applied_node >= 0)
        set_policy(applied_node);
}

/* Async-signal-safe: it runs between fork and its return in the child. */
void ma_memory_drop_policy(void)
{
    ma_memory_leave_policy();
    applied_node = -1;
    preferred_node = -1;
}

/* At start the main thread is the only one, and the one that touches
 * what nginx allocates: it takes the preferred node itself. */
const char *ma_memory_prefer_at_start(int node)
{
    static char text[128];
    const unsigned long *mask;
    if (!ma_cfg.migrate)
        return "memory left alone (MASTERAFF_MIGRATE=off)";
#ifndef __GLIBC__
    /* musl's loader keeps LD_LIBRARY_PATH as a pointer into the
     * environment's strings, which nginx overwrites with its process
     * title after main(): libnuma is opened now, while the path holds. */
    load_numa();
#endif
    if (node < 0)
        return "no NUMA node found for worker 0's CPU";
    if (user_policy(&mask) != MPOL_DEFAULT)
        return "memory policy left as the user set it";
    if (ma_cfg.dry_run) {
        snprintf(text, sizeof text, "memory would prefer node %d", node);
        return text;
    }
    prefer_node(node);
    ma_memory_prefork();
    if (applied_node != node) {
        snprintf(text, sizeof text, "memory cannot prefer node %d (%s)", node,
                 strerror(errno));
        preferred_node = -1;
        return text;
    }
    snprintf(text, sizeof text, "memory prefers node %d", node);
    return text;
}
