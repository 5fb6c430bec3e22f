/* masteraff status: whether libmasteraff is loaded in a master, and the
 * settings it read there.
 *
 * The settings are the master's environment at exec, but nginx writes its
 * process title over that block (so /proc/PID/environ then holds the title
 * and zeros) after copying the strings to its heap. Where the block is
 * intact it is read; else the variables are looked for in the master's
 * [heap] through /proc/PID/mem, which takes the right to ptrace it (root). */
#define _GNU_SOURCE
#include "status.h"
#include "loadable.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const var_names[N_VARS] = {
    "MASTERAFF_SCOPE", "MASTERAFF_MIGRATE", "MASTERAFF_PROGRAMS",
    "MASTERAFF_LOG",   "MASTERAFF_DRY_RUN", "MASTERAFF_SYSFS",
    "MASTERAFF_EARLY", "MASTERAFF_AUTO"};

/* The library's defaults (config.c). */
static const char *const var_defaults[N_VARS] = {
    "package", "on", "nginx*,openresty*,angie*,freenginx*,tengine*",
    "notice",  "0",  "/sys", "on", "off"};

/* An environment larger than this is not read whole: it is not one that
 * a service manager gives nginx. */
#define ENVIRON_MAX (1 << 20)
/* The heap is searched up to this far: nginx copies its environment there
 * early, before it reads its configuration. */
#define HEAP_SEARCH_MAX (64ul << 20)
/* The longest value taken from memory. */
#define VALUE_MAX 4096

const char *setting(const struct library *lib, int var)
{
    return lib->value[var] ? lib->value[var] : var_defaults[var];
}

/* Whether the file mapped at path is the library name, in any version
 * ("libnuma.so.1.0.0"), perhaps deleted since ("... (deleted)"). */
static bool is_library_file(const char *path, const char *name)
{
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    size_t len = strlen(name);
    return strncmp(base, name, len) == 0 &&
           (base[len] == '\0' || base[len] == '.' || base[len] == ' ');
}

/* The master's [heap], where nginx copied its environment. */
struct heap {
    bool found;
    unsigned long start, end;
};

/* One pass over pid's maps: the paths of the first mappings of
 * libmasteraff and libnuma, and the [heap]. */
static void read_maps(pid_t pid, struct library *lib, struct heap *heap)
{
    char path[64], *line = NULL;
    size_t cap = 0;
    FILE *f;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    f = fopen(path, "re");
    if (!f) {
        lib->maps_error = errno;
        return;
    }
    while (!(lib->path && lib->numa && heap->found) &&
           getline(&line, &cap, f) > 0) {
        char *file = strchr(line, '/');
        if (!heap->found && strstr(line, " [heap]"))
            heap->found =
                sscanf(line, "%lx-%lx", &heap->start, &heap->end) == 2;
        if (!file)
            continue;
        file[strcspn(file, "\n")] = '\0';
        if (!lib->path && is_library_file(file, LIBRARY_NAME))
            lib->path = xstrdup(file);
        else if (!lib->numa && is_library_file(file, "libnuma.so"))
            lib->numa = xstrdup(file);
    }
    free(line);
    fclose(f);
}

/* Takes a "NAME=value" entry when NAME is one of the library's. */
static void take_entry(struct library *lib, const char *entry)
{
    for (int v = 0; v < N_VARS; v++) {
        size_t len = strlen(var_names[v]);
        if (strncmp(entry, var_names[v], len) == 0 && entry[len] == '=' &&
            !lib->value[v])
            lib->value[v] = xstrdup(entry + len + 1);
    }
}

/* Whether buf holds NAME=value entries back to back, as an untouched
 * environment does; a process title over it leaves a run of zeros. */
static bool environ_intact(const char *buf, size_t n)
{
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        size_t name = strspn(buf + i, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "abcdefghijklmnopqrstuvwxyz0123456789_");
        if (name == 0 || buf[i + name] != '=')
            return false;
    }
    return true;
}

/* 1: read from an intact /proc/PID/environ; 0: it is not intact; -1 with
 * errno: it cannot be read. */
static int read_environ(pid_t pid, struct library *lib)
{
    char *buf = malloc(ENVIRON_MAX);
    ssize_t n;
    int intact;
    if (!buf)
        out_of_memory();
    n = read_proc(pid, "environ", buf, ENVIRON_MAX);
    intact = n >= 0 && environ_intact(buf, (size_t)n);
    for (ssize_t i = 0; intact && i < n; i += (ssize_t)strlen(buf + i) + 1)
        take_entry(lib, buf + i);
    free(buf);
    return n < 0 ? -1 : intact;
}

/* Takes the entry that starts at addr in mem, if it ends within VALUE_MAX. */
static void take_entry_at(int mem, unsigned long addr, struct library *lib)
{
    char entry[VALUE_MAX];
    ssize_t n = pread(mem, entry, sizeof entry, (off_t)addr);
    if (n > 0 && memchr(entry, '\0', (size_t)n))
        take_entry(lib, entry);
}

/* Every "\0MASTERAFF_" in [start, end): the first of each name wins (the
 * environment's copy, allocated before anything nginx reads). */
static int search_heap(int mem, unsigned long start, unsigned long end,
                       struct library *lib)
{
    static char chunk[1 << 20];
    static const char key[] = "\0MASTERAFF_";
    const size_t key_len = sizeof key - 1, step = sizeof chunk - key_len;
    for (unsigned long at = start; at < end; at += step) {
        size_t want = end - at < sizeof chunk ? end - at : sizeof chunk;
        ssize_t n = pread(mem, chunk, want, (off_t)at);
        char *p = chunk;
        if (n < 0)
            return -1;
        while ((p = memmem(p, (size_t)n - (size_t)(p - chunk), key, key_len))) {
            take_entry_at(mem, at + (unsigned long)(p - chunk) + 1, lib);
            p++;
        }
        if ((size_t)n < want)
            break;
    }
    return 0;
}

static int read_heap(pid_t pid, const struct heap *heap, struct library *lib)
{
    unsigned long end = heap->end;
    char path[64];
    int mem, rc;
    if (!heap->found) {
        errno = lib->maps_error ? lib->maps_error : ENOENT;
        return -1;
    }
    if (end - heap->start > HEAP_SEARCH_MAX)
        end = heap->start + HEAP_SEARCH_MAX;
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    mem = open(path, O_RDONLY | O_CLOEXEC);
    if (mem < 0)
        return -1;
    rc = search_heap(mem, heap->start, end, lib);
    close(mem);
    return rc;
}

static void read_settings(pid_t pid, const struct heap *heap,
                          struct library *lib)
{
    int rc = read_environ(pid, lib);
    if (rc == 1) {
        lib->settings_from = "environ";
        return;
    }
    if (rc == 0 && read_heap(pid, heap, lib) == 0) {
        lib->settings_from = "memory";
        return;
    }
    lib->settings_error = errno;
}

/* Why the library in pid would not load the copy of libnuma beside it,
 * by its rule (loadable.c), reading the master's files as it sees them. */
static void judge_numa_copy(pid_t pid, struct library *lib)
{
    char root[64], why[PATH_MAX + 128], *dir, *file;
    struct stat st;
    snprintf(root, sizeof root, "/proc/%d/root", (int)pid);
    file = xasprintf("%s%s", root, lib->path);
    dir = xstrdup(lib->path);
    *strrchr(dir, '/') = '\0';
    /* The mapped file's path, as maps gives it: without symbolic links. */
    if (!strstr(lib->path, " (deleted)") && stat(file, &st) == 0 &&
        ma_loadable(root, *dir ? dir : "/", "libnuma.so.1", st.st_uid, why,
                    sizeof why) == 1)
        lib->numa_refused = xstrdup(why);
    free(file);
    free(dir);
}

void read_library(pid_t pid, struct library *lib)
{
    struct heap heap = {0};
    memset(lib, 0, sizeof *lib);
    read_maps(pid, lib, &heap);
    if (lib->path && !lib->numa)
        judge_numa_copy(pid, lib);
    read_settings(pid, &heap, lib);
}
