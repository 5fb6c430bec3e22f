/* masteraff [OPTION]... COMMAND: runs COMMAND (nginx) with libmasteraff
 * preloaded and the library's settings in its environment. */
#define _GNU_SOURCE
#include "cli.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct option run_options[] = {
    {"scope", required_argument, NULL, OPT_SCOPE},
    {"no-migrate", no_argument, NULL, OPT_NO_MIGRATE},
    {"no-early", no_argument, NULL, OPT_NO_EARLY},
    {"auto-cpuset", no_argument, NULL, OPT_AUTO_CPUSET},
    {"dry-run", no_argument, NULL, OPT_DRY_RUN},
    {"log", required_argument, NULL, OPT_LOG},
    {"sysfs", required_argument, NULL, OPT_SYSFS},
    {"library", required_argument, NULL, OPT_LIBRARY},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

static const char *checked_scope(const char *v)
{
    enum ma_scope scope;
    if (ma_scope_parse(v, &scope) < 0)
        fail(EXIT_USAGE, "bad --scope '%s' (accepted: %s)", shortened(v),
             ma_scope_choices());
    return v;
}

/* The library's levels (config.c), checked here so that a typo fails
 * before the command runs rather than leave the library inert. */
static const char *checked_level(const char *v)
{
    static const char *const levels[] = {"error", "warn", "notice", "info",
                                         "debug"};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        if (strcmp(v, levels[i]) == 0)
            return v;
    fail(EXIT_USAGE,
         "bad --log '%s' (accepted: error, warn, notice, info, debug)",
         shortened(v));
}

/* The library takes only an absolute root. */
static const char *checked_sysfs(const char *v)
{
    if (v[0] != '/')
        fail(EXIT_USAGE, "bad --sysfs '%s' (accepted: an absolute path)",
             shortened(v));
    if (access(v, X_OK) < 0)
        fail(EXIT_RUNTIME, "--sysfs %s: %s", shortened(v), strerror(errno));
    return v;
}

/* ---- running a command ---- */

struct run_settings {
    const char *scope, *log, *sysfs, *library;
    bool no_migrate, no_early, auto_cpuset, dry_run;
};

static bool library_beside_executable(char *path)
{
    char exe[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return false;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash || (size_t)(slash - exe) + sizeof "/" LIBRARY_NAME > sizeof exe)
        return false;
    strcpy(slash + 1, LIBRARY_NAME);
    return realpath(exe, path) != NULL;
}

#ifdef LIBDIR
#define INSTALLED_LIBRARY LIBDIR "/" LIBRARY_NAME
#define NOR_INSTALLED " nor as " INSTALLED_LIBRARY
#else
#define INSTALLED_LIBRARY NULL
#define NOR_INSTALLED ""
#endif

static bool installed_library(char *path)
{
    return INSTALLED_LIBRARY && realpath(INSTALLED_LIBRARY, path) != NULL;
}

/* The ELF header's first fields, the same in 32 and 64 bits. */
struct elf_start {
    unsigned char ident[EI_NIDENT];
    uint16_t type;
    uint16_t machine;
};

static bool read_elf_start(const char *path, struct elf_start *h)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    bool ok = fd >= 0 && read(fd, h, sizeof *h) == (ssize_t)sizeof *h &&
              memcmp(h->ident, ELFMAG, SELFMAG) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Whether the dynamic section of a mapped ELF file of this program's class
 * has DF_1_PIE: a position-independent executable is ET_DYN too, and
 * ld.so refuses to preload it. */
static bool dynamic_says_pie(const unsigned char *map, size_t size)
{
    const ElfW(Ehdr) *eh = (const void *)map;
    if (size < sizeof *eh || eh->e_phoff > size ||
        eh->e_phnum > (size - eh->e_phoff) / sizeof(ElfW(Phdr)))
        return false;
    for (size_t i = 0; i < eh->e_phnum; i++) {
        const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(map + eh->e_phoff) + i;
        if (ph->p_type != PT_DYNAMIC || ph->p_offset > size)
            continue;
        for (size_t j = 0; j < (size - ph->p_offset) / sizeof(ElfW(Dyn)); j++) {
            const ElfW(Dyn) *d = (const ElfW(Dyn) *)(map + ph->p_offset) + j;
            if (d->d_tag == DT_NULL)
                break;
            if (d->d_tag == DT_FLAGS_1 && (d->d_un.d_val & DF_1_PIE))
                return true;
        }
    }
    return false;
}

static bool is_pie(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    void *map = MAP_FAILED;
    bool pie = false;
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0)
        map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
        pie = dynamic_says_pie(map, (size_t)st.st_size);
        munmap(map, (size_t)st.st_size);
    }
    if (fd >= 0)
        close(fd);
    return pie;
}

/* ld.so ignores, with one line on stderr, a preload it cannot load, and
 * the command runs without the library: what it cannot load must fail
 * here. It must be an ELF shared object of this program's class and
 * machine (not dlopen'ed: that would run its constructors here). */
static void check_shared_object(const char *path)
{
    struct elf_start lib, self;
    if (!read_elf_start(path, &lib) || lib.type != ET_DYN)
        fail(EXIT_RUNTIME, "library %s: not an ELF shared object",
             shortened(path));
    if (read_elf_start("/proc/self/exe", &self) &&
        (lib.ident[EI_CLASS] != self.ident[EI_CLASS] ||
         lib.ident[EI_DATA] != self.ident[EI_DATA] ||
         lib.machine != self.machine))
        fail(EXIT_RUNTIME,
             "library %s: an ELF shared object for another architecture",
             shortened(path));
    if (is_pie(path))
        fail(EXIT_RUNTIME, "library %s: an executable, not a shared object",
             shortened(path));
}

/* The library to preload, as an absolute path: ld.so would resolve a
 * relative one against the directory of whatever execs later (nginx's
 * binary upgrade). A build tree's masteraff uses the library built beside
 * it, even when another one is installed. */
static void find_library(const char *option, char *path)
{
    const char *given = option ? option : getenv("MASTERAFF_LIBRARY");
    if (given && *given) {
        if (!realpath(given, path))
            fail(EXIT_RUNTIME, "library %s: %s", shortened(given),
                 strerror(errno));
    } else if (!library_beside_executable(path) && !installed_library(path)) {
        fail(EXIT_RUNTIME,
             "cannot find " LIBRARY_NAME " beside this program" NOR_INSTALLED
             "; give its path with --library or MASTERAFF_LIBRARY");
    }
    if (strpbrk(path, ": "))
        fail(EXIT_RUNTIME,
             "library %s: LD_PRELOAD cannot hold a path with ':' or ' '",
             shortened(path));
    check_shared_object(path);
}

static bool names_our_library(const char *entry)
{
    const char *slash = strrchr(entry, '/'), *base = slash ? slash + 1 : entry;
    size_t len = strlen(LIBRARY_NAME);
    return strncmp(base, LIBRARY_NAME, len) == 0 &&
           (base[len] == '\0' || base[len] == '.');
}

/* Ours first, then the existing entries (ld.so splits on ':' and ' ').
 * A libmasteraff already listed is dropped, this copy or another: two
 * copies would both interpose fork. */
static char *preload_list(const char *ours, const char *existing)
{
    size_t cap = strlen(ours) + (existing ? strlen(existing) : 0) + 2;
    char *list = malloc(cap), *copy, *entry, *save;
    if (!list)
        out_of_memory();
    strcpy(list, ours);
    if (!existing)
        return list;
    copy = xstrdup(existing);
    for (entry = strtok_r(copy, ": ", &save); entry;
         entry = strtok_r(NULL, ": ", &save))
        if (!names_our_library(entry)) {
            strcat(list, ":");
            strcat(list, entry);
        }
    free(copy);
    return list;
}

/* NULL leaves the variable as the caller's environment has it. */
static void set_variable(const char *name, const char *value)
{
    if (value && setenv(name, value, 1) < 0)
        fail(EXIT_RUNTIME, "cannot set %s: %s", name, strerror(errno));
}

static void export_settings(const struct run_settings *s)
{
    char library[PATH_MAX];
    find_library(s->library, library);
    set_variable("LD_PRELOAD", preload_list(library, getenv("LD_PRELOAD")));
    set_variable("MASTERAFF_SCOPE", s->scope);
    set_variable("MASTERAFF_LOG", s->log);
    set_variable("MASTERAFF_SYSFS", s->sysfs);
    set_variable("MASTERAFF_MIGRATE", s->no_migrate ? "off" : NULL);
    set_variable("MASTERAFF_EARLY", s->no_early ? "off" : NULL);
    set_variable("MASTERAFF_AUTO", s->auto_cpuset ? "cpuset" : NULL);
    set_variable("MASTERAFF_DRY_RUN", s->dry_run ? "1" : NULL);
}

static _Noreturn void exec_command(char **argv)
{
    int e;
    execvp(argv[0], argv);
    e = errno;
    fail(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN, "cannot run %s: %s",
         shortened(argv[0]), strerror(e));
}

/* Whether a word without a slash names an executable on $PATH, as execvp
 * would find it. */
static bool on_path(const char *word)
{
    const char *path = getenv("PATH");
    char *dirs = xstrdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin"),
         *dir, *save;
    bool found = false;
    for (dir = strtok_r(dirs, ":", &save); dir && !found;
         dir = strtok_r(NULL, ":", &save)) {
        char *file = xasprintf("%s/%s", dir, word);
        found = access(file, X_OK) == 0;
        free(file);
    }
    free(dirs);
    return found;
}

/* "masteraff stats" is a mistyped subcommand more often than a program:
 * a bare word that is no program on $PATH is refused as one, unless "--"
 * said that a command follows. */
static void check_command_word(char **argv, int at)
{
    const char *word = argv[at];
    if (strcmp(argv[at - 1], "--") == 0 || strchr(word, '/') || on_path(word))
        return;
    fail(EXIT_USAGE,
         "unknown command '%s' (commands: status, topology; or a program to "
         "run, such as nginx, found on PATH or given after --)",
         shortened(word));
}

_Noreturn void run_command(int argc, char **argv)
{
    struct run_settings s = {0};
    int c;
    /* "+": the command's own options are not ours. */
    while ((c = getopt_long(argc, argv, "+hV", run_options, NULL)) != -1)
        switch (c) {
        case OPT_SCOPE:
            s.scope = checked_scope(optarg);
            break;
        case OPT_LOG:
            s.log = checked_level(optarg);
            break;
        case OPT_SYSFS:
            s.sysfs = checked_sysfs(optarg);
            break;
        case OPT_LIBRARY:
            s.library = optarg;
            break;
        case OPT_NO_MIGRATE:
            s.no_migrate = true;
            break;
        case OPT_NO_EARLY:
            s.no_early = true;
            break;
        case OPT_AUTO_CPUSET:
            s.auto_cpuset = true;
            break;
        case OPT_DRY_RUN:
            s.dry_run = true;
            break;
        default:
            common_option(c);
        }
    if (optind == argc)
        fail(EXIT_USAGE, "no command to run");
    check_command_word(argv, optind);
    export_settings(&s);
    exec_command(argv + optind);
}

