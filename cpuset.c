/* libmasteraff: the CPUs of the master's cpuset. They change under a
 * running master (docker update --cpuset-cpus, systemctl set-property
 * AllowedCPUs=, a kubelet's CPU manager, CPU hotplug), and the kernel then
 * rewrites the mask of every task in it: decide.c tells such a rewrite
 * from a mask the program or an administrator set by what is read here.
 *
 * Read from the cgroup file system, in a master only, under the library's
 * lock: /proc/self/cpuset names the cgroup, /proc/self/mountinfo
 * where its hierarchy is mounted (cgroup v1 with the cpuset controller,
 * else cgroup2), and the cgroup's cpuset.effective_cpus (v1) or
 * cpuset.cpus.effective (v2, from the nearest cgroup that has it) its CPUs.
 * Regular files only, opened without waiting. The buffers are static, kept
 * to one reader at a time by the lock. */
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

/* Where the hierarchy of the cpuset controller is mounted, looked up once. */
static struct {
    bool looked, found, v2;
    char root[PATH_MAX];  /* the hierarchy's directory mounted there */
    char point[PATH_MAX]; /* the mount point */
} hierarchy;

static char text[16384];
static char path[3 * PATH_MAX];
static unsigned reads_made;

/* Reads a small file into text. Returns its length, or -1 with errno. */
static ssize_t read_small(const char *file)
{
    ssize_t n;
    int fd = ma_open_regular(file);
    if (fd < 0)
        return -1;
    n = read(fd, text, sizeof text - 1);
    reads_made++;
    ma_close_keeping_errno(fd);
    if (n < 0)
        return -1;
    text[n] = '\0';
    return n;
}

/* mountinfo writes a space, a tab, a newline and a backslash in a path as
 * \ooo: the path back, into out. */
static void unescape(const char *s, size_t len, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < len && k + 1 < size; k++) {
        if (s[i] == '\\' && i + 3 < len && s[i + 1] >= '0' &&
            s[i + 1] <= '3') {
            out[k] = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
                            (s[i + 3] - '0'));
            i += 4;
        } else {
            out[k] = s[i++];
        }
    }
    out[k] = '\0';
}

/* The n-th space-separated field of line (from 0): its start and length. */
static const char *field(const char *line, int n, size_t *len)
{
    while (n-- > 0 && line) {
        line = strchr(line, ' ');
        line = line ? line + 1 : NULL;
    }
    if (line)
        *len = strcspn(line, " ");
    return line;
}

static bool has_option(const char *options, size_t len, const char *name)
{
    size_t n = strlen(name);
    for (const char *o = options; o < options + len;) {
        size_t l = strcspn(o, ",");
        if (l > len - (size_t)(o - options))
            l = len - (size_t)(o - options);
        if (l == n && strncmp(o, name, n) == 0)
            return true;
        o += l + 1;
    }
    return false;
}

/* One line of mountinfo: "36 25 0:31 ROOT POINT OPTIONS [TAGS] - FSTYPE
 * SOURCE SUPER-OPTIONS". A cgroup v1 mount with the cpuset controller is
 * the one (the controller is then on no cgroup2 hierarchy); the first
 * cgroup2 mount stands in until one is found. */
static bool take_mount(const char *line)
{
    const char *sep = strstr(line, " - "), *root, *point, *type, *opts;
    size_t root_len, point_len, type_len, opts_len;
    bool v1;
    if (!sep || !(root = field(line, 3, &root_len)) ||
        !(point = field(line, 4, &point_len)) ||
        !(type = field(sep + 3, 0, &type_len)) ||
        !(opts = field(sep + 3, 2, &opts_len)))
        return false;
    v1 = type_len == 6 && strncmp(type, "cgroup", 6) == 0 &&
         has_option(opts, opts_len, "cpuset");
    if (!v1 && !(type_len == 7 && strncmp(type, "cgroup2", 7) == 0 &&
                 !hierarchy.found))
        return false;
    unescape(root, root_len, hierarchy.root, sizeof hierarchy.root);
    unescape(point, point_len, hierarchy.point, sizeof hierarchy.point);
    hierarchy.found = true;
    hierarchy.v2 = !v1;
    return v1;
}

/* Reads mountinfo a chunk at a time, any number of lines long. */
static void find_hierarchy(void)
{
    size_t kept = 0;
    ssize_t n;
    char *line, *nl;
    bool done = false;
    int fd = ma_open_regular("/proc/self/mountinfo");

    hierarchy.looked = true;
    if (fd < 0)
        return;
    while (!done && (n = read(fd, text + kept, sizeof text - 1 - kept)) > 0) {
        reads_made++;
        text[kept + (size_t)n] = '\0';
        for (line = text; !done && (nl = strchr(line, '\n')); line = nl + 1) {
            *nl = '\0';
            done = take_mount(line);
        }
        kept = strlen(line);
        if (kept == sizeof text - 1) /* a line longer than a path allows */
            kept = 0;
        memmove(text, line, kept);
    }
    ma_close_keeping_errno(fd);
}

/* The cgroup's directory under the mount point, from its path in the
 * hierarchy (/proc/self/cpuset), into path. False when the cgroup lies
 * outside what is mounted. */
static bool cgroup_directory(void)
{
    size_t root_len = strlen(hierarchy.root);
    const char *rel;
    if (read_small("/proc/self/cpuset") <= 0)
        return false;
    text[strcspn(text, "\n")] = '\0';
    if (strcmp(hierarchy.root, "/") == 0)
        rel = text;
    else if (strncmp(text, hierarchy.root, root_len) == 0 &&
             (text[root_len] == '/' || text[root_len] == '\0'))
        rel = text + root_len;
    else
        return false;
    return (size_t)snprintf(path, sizeof path, "%s%s", hierarchy.point,
                            strcmp(rel, "/") == 0 ? "" : rel) < sizeof path;
}

/* The CPUs file in directory path, or, on cgroup2, in the nearest cgroup
 * up to the mount point that has it (a cgroup whose parent does not
 * enable the controller has none: its CPUs are its parent's). */
static int read_cpus(cpu_set_t *out)
{
    size_t top = strlen(hierarchy.point), end = strlen(path);
    const char *name = hierarchy.v2 ? "/cpuset.cpus.effective"
                                     : "/cpuset.effective_cpus";
    for (;;) {
        if (end + strlen(name) >= sizeof path)
            return -1;
        strcpy(path + end, name);
        if (read_small(path) > 0)
            return ma_cpulist_parse(text, out);
        if (!hierarchy.v2 || errno != ENOENT || end <= top)
            return -1;
        path[end] = '\0';
        end = (size_t)(strrchr(path, '/') - path);
        if (end < top)
            end = top;
    }
}

int ma_cpuset_cpus(cpu_set_t *out, unsigned *reads)
{
    int rc = -1, e = errno;
    reads_made = 0;
    if (!hierarchy.looked)
        find_hierarchy();
    if (hierarchy.found && cgroup_directory())
        rc = read_cpus(out);
    if (rc == 0 && CPU_COUNT(out) == 0)
        rc = -1;
    if (reads)
        *reads = reads_made;
    errno = e;
    return rc;
}

/* Told by the kernel's release, read once: the behaviour itself shows
 * only when a cpuset changes, and changing one to see it takes a cgroup
 * file system that root may write, which a container does not have, and
 * a cgroup of the library's own in a hierarchy that a service manager
 * or a kubelet owns. A release that cannot be read is taken for a
 * current kernel. */
bool ma_kernel_keeps_requests(void)
{
    static int keeps = -1;
    struct utsname u;
    unsigned major, minor;
    if (keeps < 0)
        keeps = uname(&u) < 0 ||
                sscanf(u.release, "%u.%u", &major, &minor) != 2 ||
                major > 6 || (major == 6 && minor >= 2);
    return keeps;
}
