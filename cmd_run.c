/* masteraff [OPTION]... COMMAND: runs COMMAND (nginx) with libmasteraff
 * preloaded and the library's settings in its environment. */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct option run_options[] = {
    {"scope", required_argument, NULL, OPT_SCOPE},
    {"no-migrate", no_argument, NULL, OPT_NO_MIGRATE},
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
        fail(EXIT_USAGE, "bad --scope '%s' (accepted: %s)", v,
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
         "bad --log '%s' (accepted: error, warn, notice, info, debug)", v);
}

/* The library takes only an absolute root. */
static const char *checked_sysfs(const char *v)
{
    if (v[0] != '/')
        fail(EXIT_USAGE, "bad --sysfs '%s' (accepted: an absolute path)", v);
    if (access(v, X_OK) < 0)
        fail(EXIT_RUNTIME, "--sysfs %s: %s", v, strerror(errno));
    return v;
}

/* ---- running a command ---- */

struct run_settings {
    const char *scope, *log, *sysfs, *library;
    bool no_migrate, dry_run;
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

/* The library to preload, as an absolute path: ld.so would resolve a
 * relative one against the directory of whatever execs later (nginx's
 * binary upgrade). A build tree's masteraff uses the library built beside
 * it, even when another one is installed. */
static void find_library(const char *option, char *path)
{
    const char *given = option ? option : getenv("MASTERAFF_LIBRARY");
    if (given && *given) {
        if (!realpath(given, path))
            fail(EXIT_RUNTIME, "library %s: %s", given, strerror(errno));
    } else if (!library_beside_executable(path) && !installed_library(path)) {
        fail(EXIT_RUNTIME,
             "cannot find " LIBRARY_NAME " beside this program" NOR_INSTALLED
             "; give its path with --library or MASTERAFF_LIBRARY");
    }
    if (strpbrk(path, ": "))
        fail(EXIT_RUNTIME,
             "library %s: LD_PRELOAD cannot hold a path with ':' or ' '",
             path);
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
    set_variable("MASTERAFF_DRY_RUN", s->dry_run ? "1" : NULL);
}

static _Noreturn void exec_command(char **argv)
{
    int e;
    execvp(argv[0], argv);
    e = errno;
    fail(e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN, "cannot run %s: %s",
         argv[0], strerror(e));
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
        case OPT_DRY_RUN:
            s.dry_run = true;
            break;
        default:
            common_option(c);
        }
    if (optind == argc)
        fail(EXIT_USAGE, "no command to run");
    export_settings(&s);
    exec_command(argv + optind);
}

