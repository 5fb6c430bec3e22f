/* The nginx configuration reader: worker 0's CPUs by nginx's rules, and
 * "no placement" with a reason for everything else, over trees written
 * into a temporary directory. Every call must leave the descriptors and
 * errno as they were. */
#define _GNU_SOURCE
#include "affinity.h"
#include "nginxconf.h"
#include "test/tap.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (!d)
        return -1;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* The path of name inside the test's directory (two rotating buffers). */
static const char *at(const char *name)
{
    static char buf[4][4096];
    static int i;
    char *p = buf[i++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void put_bytes(const char *name, const char *text, size_t len)
{
    const char *path = at(name);
    char parent[4096], *slash;
    FILE *f;
    snprintf(parent, sizeof parent, "%s", path);
    slash = strrchr(parent, '/');
    *slash = '\0';
    if (strlen(parent) > strlen(dir)) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", parent);
        if (system(cmd) != 0)
            abort();
    }
    f = fopen(path, "w");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0)
        abort();
}

static void put(const char *name, const char *text)
{
    put_bytes(name, text, strlen(text));
}

/* ma_ngx_predict on "nginx" and the words given (NULL-terminated), with
 * the executable exe; checks that no descriptor and no errno changed. */
static struct ma_ngx_prediction run_v(const char *exe, long ncpu, va_list ap)
{
    struct ma_ngx_prediction p;
    char *argv[32] = {"nginx"};
    int argc = 1, fds = fd_count();
    const char *w;
    while ((w = va_arg(ap, const char *)) && argc < 31)
        argv[argc++] = (char *)w;
    argv[argc] = NULL;
    errno = 4242;
    ma_ngx_predict(argc, argv, exe, ncpu, &p);
    if (errno != 4242 || fd_count() != fds)
        ok(0, "errno kept (%d) and no descriptor left (%d before, %d after)",
           errno, fds, fd_count());
    return p;
}

static struct ma_ngx_prediction run(long ncpu, ...)
{
    struct ma_ngx_prediction p;
    va_list ap;
    va_start(ap, ncpu);
    p = run_v(at("nginx-exe"), ncpu, ap);
    va_end(ap);
    return p;
}

static const char *cpus(const struct ma_ngx_prediction *p)
{
    static char buf[8192];
    if (!p->place)
        return "none";
    ma_cpulist_format(&p->worker0, buf, sizeof buf);
    return buf;
}

/* place WHAT CPULIST ARGS...: worker 0 predicted on CPULIST, 2 CPUs. */
#define place(what, want, ...)                                              \
    do {                                                                    \
        struct ma_ngx_prediction p_ = run(2, __VA_ARGS__, (char *)NULL);    \
        if (!is_str(cpus(&p_), want, "%s: worker 0 on %s", what, want))     \
            printf("#   reason: %s\n", p_.reason);                          \
    } while (0)

/* none WHAT REASON-PART ARGS...: no placement, and the reason says so. */
#define none(what, part, ...)                                               \
    do {                                                                    \
        struct ma_ngx_prediction p_ = run(2, __VA_ARGS__, (char *)NULL);    \
        ok(!p_.place && strstr(p_.reason, part) &&                          \
               CPU_COUNT(&p_.worker0) == 0,                                 \
           "%s: no placement, \"%s\"", what, part);                         \
        if (p_.place || !strstr(p_.reason, part))                           \
            printf("#   got: %s: %s\n", cpus(&p_), p_.reason);              \
    } while (0)

/* A main context with the lines given, and a usual http block. */
static void conf(const char *name, const char *main_lines)
{
    char text[8192];
    snprintf(text, sizeof text,
             "worker_processes 2;\n%s\nevents { worker_connections 64; }\n"
             "http {\n    server { listen 8080; location / { return 200 "
             "\"hi\"; } }\n}\n",
             main_lines);
    put(name, text);
}

static const char *c(void)
{
    return at("nginx.conf");
}

static void test_masks(void)
{
    conf("nginx.conf", "worker_cpu_affinity 01 10;");
    place("01 10", "0", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10 01;");
    place("10 01", "1", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 0110 1000 0001;");
    place("several CPUs in worker 0's mask", "1-2", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity \"1 0\" 01;");
    place("spaces in a mask are skipped", "1", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 00 01;");
    none("an empty mask for worker 0", "worker 0's mask is empty", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity \"\" 01;");
    none("a mask that is an empty string", "worker 0's mask is empty", "-c",
         c());
    conf("nginx.conf", "worker_cpu_affinity 01 012;");
    none("a non-binary character in a later mask", "invalid character",
         "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 0x1;");
    none("a hexadecimal mask", "invalid character", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 01 auto;");
    none("auto after a mask", "invalid character", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 01;\nworker_cpu_affinity 10;");
    none("a second worker_cpu_affinity", "duplicate", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity;");
    none("worker_cpu_affinity without a mask", "invalid number", "-c", c());
}

static void test_wide_masks(void)
{
    static char text[8192];
    char mask[2048];
    memset(mask, '0', 1024);
    mask[0] = '1';
    mask[1024] = '\0';
    snprintf(text, sizeof text, "worker_cpu_affinity %s;", mask);
    conf("nginx.conf", text);
    place("a mask of 1024 CPUs", "1023", "-c", c());
    mask[1024] = '0';
    mask[1025] = '\0';
    snprintf(text, sizeof text, "worker_cpu_affinity %s;", mask);
    conf("nginx.conf", text);
    none("a mask wider than CPU_SETSIZE", "up to 1024 CPUs", "-c", c());
    memset(mask, '0', 1030);
    mask[1030] = '\0';
    memset(mask, ' ', 10);
    mask[1029] = '1';
    snprintf(text, sizeof text, "worker_cpu_affinity \"%s\";", mask);
    conf("nginx.conf", text);
    none("a mask over 1024 characters counting spaces", "up to 1024 CPUs",
         "-c", c());
}

static void test_auto(void)
{
    struct ma_ngx_prediction p;
    conf("nginx.conf", "worker_cpu_affinity auto;");
    place("auto", "0", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity auto 1100;");
    place("auto 1100", "2", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity auto 0000;");
    none("auto with an empty mask", "worker 0's mask is empty", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity auto 01 10;");
    none("auto with two masks", "invalid number", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity auto 2;");
    none("auto with a bad mask", "invalid character", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity auto;");
    p = run(0, "-c", c(), (char *)NULL);
    is_str(cpus(&p), "0", "auto with no CPU count known: CPU 0, as nginx");
    conf("nginx.conf", "worker_cpu_affinity AUTO;");
    none("AUTO is not auto", "invalid character", "-c", c());
}

static void test_options(void)
{
    conf("nginx.conf", "worker_cpu_affinity 10 01;");
    none("-t", "nginx -t: not a server start", "-t", "-c", c());
    none("-T", "nginx -T", "-c", c(), "-T");
    none("-qt", "nginx -t", "-qt", "-c", c());
    none("-v", "nginx -v", "-v");
    none("-V", "nginx -V", "-V");
    none("-h", "nginx -h", "-h");
    none("-?", "nginx -?", "-?");
    none("-s reload", "a signal", "-s", "reload", "-c", c());
    none("-sstop", "a signal", "-sstop");
    none("-s with a bad signal", "invalid signal", "-s", "hup");
    none("a word that is not an option", "invalid option", "-c", c(), "x");
    none("an unknown option", "invalid option", "-x");
    none("-c without its file", "lacks its value", "-c");
    place("-q", "1", "-q", "-c", c());
    place("-e", "1", "-e", "stderr", "-c", c());
    {
        char joined[4200];
        snprintf(joined, sizeof joined, "-c%s", c());
        place("-cFILE", "1", joined);
    }
}

static void test_params(void)
{
    conf("nginx.conf", "");
    none("no worker_cpu_affinity", "no worker_cpu_affinity", "-c", c());
    place("-g", "1", "-c", c(), "-g", "worker_cpu_affinity 10 01;");
    {
        struct ma_ngx_prediction p = run(2, "-c", c(), "-g",
                                         "worker_cpu_affinity 10;",
                                         (char *)NULL);
        is_str(p.reason, "worker_cpu_affinity at -g", "the reason names -g");
    }
    place("-g with spaces and a comment", "0", "-c", c(), "-g",
          "  worker_cpu_affinity\n01; # 10");
    none("-g without ';'", "unexpected end of parameter", "-c", c(), "-g",
         "worker_cpu_affinity 10");
    none("-g with a block", "block directives are not supported in -g",
         "-c", c(), "-g", "events { }");
    none("-g master_process off", "master_process off", "-c", c(), "-g",
         "worker_cpu_affinity 10; master_process off;");
    conf("nginx.conf", "worker_cpu_affinity 01;");
    none("-g and the file both set it", "duplicate", "-c", c(), "-g",
         "worker_cpu_affinity 10;");
    put("inc/params.conf", "worker_cpu_affinity 10;");
    conf("nginx.conf", "");
    place("-g include, relative to the configuration's directory", "1", "-c",
          c(), "-g", "include inc/params.conf;");
}

static void test_prefix(void)
{
    put("pre/conf/nginx.conf", "include conf.d/*.conf;\nevents { }\n");
    put("pre/conf/conf.d/a.conf", "# nothing\n");
    put("pre/conf/conf.d/b.conf", "worker_cpu_affinity 10 01;\n");
    put("pre/conf/conf.d/c.conf.off", "worker_cpu_affinity 01;\n");
    place("-p with a relative -c, a relative glob", "1", "-p", at("pre"), "-c",
          "conf/nginx.conf");
    place("-p ending in /", "1", "-p", at("pre/"), "-c", "conf/nginx.conf");
    {
        char joined[4200];
        snprintf(joined, sizeof joined, "-p%s", at("pre"));
        place("-pPREFIX", "1", joined, "-c", "conf/nginx.conf");
    }
    put("pre/conf/nginx.conf", "include conf.d/none-*.conf;\n"
                               "include conf.d/b.conf;\n");
    place("a glob that matches nothing", "1", "-p", at("pre"), "-c",
          "conf/nginx.conf");
    put("pre/conf/nginx.conf", "include conf.d/missing.conf;\n");
    none("a missing include", "missing.conf", "-p", at("pre"), "-c",
         "conf/nginx.conf");
    put("pre/conf/nginx.conf", "include conf.d/*.conf;\n");
    put("pre/conf/conf.d/a.conf", "include conf.d/b.conf;\n");
    none("the same file by the glob and by an include", "duplicate", "-p",
         at("pre"), "-c", "conf/nginx.conf");
    put("pre/conf/conf.d/a.conf", "http { include conf.d/b.conf; }\n");
    place("an include inside a block is not followed", "1", "-p", at("pre"),
          "-c", "conf/nginx.conf");
    put("pre/conf/nginx.conf", "include;\n");
    none("include without a file", "invalid number", "-p", at("pre"), "-c",
         "conf/nginx.conf");
}

static void test_syntax(void)
{
    conf("nginx.conf", "# worker_cpu_affinity 01 10;\n"
                       "worker_cpu_affinity  # the first worker\n"
                       "    \"10\"\n    '01'\n;");
    place("comments, quotes, a directive over several lines", "1", "-c", c());
    conf("nginx.conf", "env \"X=\\\";worker_cpu_affinity 01;\";\n"
                       "env 'Y=\\';worker_cpu_affinity 01;';\n"
                       "worker_cpu_affinity 10 01;");
    place("escaped quotes keep ';' inside strings", "1", "-c", c());
    conf("nginx.conf", "env X=a\\;worker_cpu_affinity;\n"
                       "worker_cpu_affinity 10;");
    place("an escaped ';' outside quotes", "1", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10;\n"
                       "env ${worker_cpu_affinity}01;\n"
                       "stream { server { return \"}\"; } }\n"
                       "mail { # }\n}\n"
                       "thread_pool worker_cpu_affinity threads=2;");
    place("the name in variables, strings, comments, other blocks", "1", "-c",
          c());
    conf("nginx.conf", "worker_cpu_affinity 10;\n"
                       "env a#b;\n");
    place("'#' inside a word is no comment", "1", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10;\n}\n");
    none("an unexpected '}'", "unexpected \"}\"", "-c", c());
    put("nginx.conf", "worker_cpu_affinity 10;\nevents {\n");
    none("an unterminated block", "expecting \"}\"", "-c", c());
    put("nginx.conf", "worker_cpu_affinity 10;\nenv \"X;\n");
    none("an unterminated string", "unexpected end of file", "-c", c());
    put("nginx.conf", "worker_cpu_affinity 10");
    none("no ';' at the end", "unexpected end of file", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10 {\n}");
    none("worker_cpu_affinity as a block", "not terminated by \";\"", "-c",
         c());
    conf("nginx.conf", "worker_cpu_affinity \"10\"01;");
    none("no space after a quoted word", "unexpected \"0\"", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10;\n;");
    none("a lone ';'", "unexpected \";\"", "-c", c());
    put_bytes("nginx.conf", "worker_cpu_affinity 10;\n#\0\n", 27);
    none("a NUL byte", "NUL byte", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10;\nevents_x { worker_cpu_affinity 01; }");
    place("an unknown block is skipped", "1", "-c", c());
    put("nginx.conf", "worker_cpu_affinity 10;\r\nmaster_process\ton;\r\n");
    place("CR LF and tabs", "1", "-c", c());
}

/* nginx.conf with a Lua block in a location, another in http (each body
 * given), and worker_cpu_affinity after them: a body misread moves where
 * the http block ends, and the mask is lost. */
static void lua_conf(const char *http_body, const char *location_body)
{
    static char text[16384];
    snprintf(text, sizeof text,
             "worker_processes 2;\nevents { }\nhttp {\n"
             "    init_by_lua_block {%s}\n"
             "    server {\n        location / {\n"
             "            content_by_lua_block {%s}\n"
             "        }\n    }\n}\nworker_cpu_affinity 10 01;\n",
             http_body, location_body);
    put("nginx.conf", text);
}

/* lua WHAT BODY: a Lua block nginx reads to its end; the mask after it
 * is found. */
#define lua(what, body)                                                     \
    do {                                                                    \
        lua_conf(" ", body);                                                \
        place(what, "1", "-c", c());                                        \
    } while (0)

/* lua_none WHAT REASON-PART BODY: a Lua block nginx stops at. */
#define lua_none(what, part, body)                                          \
    do {                                                                    \
        lua_conf(" ", body);                                                \
        none(what, part, "-c", c());                                        \
    } while (0)

/* Each case here agrees with Debian's nginx 1.22 and its Lua module
 * 0.10.23 (nginx -t), as test/lua.t checks for some of them. */
static void test_lua(void)
{
    static char body[8192];
    char filler[6000];
    lua("an empty block", "");
    lua("nested table constructors", " local t = {a = {b = {}}, {1}} ");
    lua("a brace in single quotes", " local s = '}' ");
    lua("braces and ';' in double quotes", " local s = \"{;}}\" ");
    lua("an escaped quote in a string", " local s = \"\\\"}\" ");
    lua("an escaped backslash ends a string", " local s = '\\\\' ");
    lua("a long bracket string", " local s = [[ } ]] ");
    lua("a long bracket of level 2, ']]' inside",
        " local s = [==[ ]] } ]=] ]==] ");
    lua("a line comment", " -- } don't\n");
    lua("a long comment", " --[[ }\n } ]] ");
    lua("a long comment of level 1", " --[=[ ]] } ]=] ");
    lua("'--[=' without its '[' is a line comment", " --[= }\n");
    lua("a '\\z' in a string", " local s = \"a\\z\n   b\" ");
    lua("a quote inside a comment", " -- it's\n");
    lua("'[=' that opens nothing", " local x = a[=1] ");
    lua("nginx's '#' is no comment in Lua", " local n = #t ");
    lua("'$' and '{' are Lua's, not nginx's variables", " local v = \"${x}\" ");
    lua("CR LF line ends", " local a = 1\r\n local b = {}\r\n");
    lua_conf(" local cache = {} ", " ngx.say(cache[1]) ");
    place("a block in http and one in a location", "1", "-c", c());
    put("nginx.conf", "worker_processes 2;\nevents { }\nhttp { server {\n"
                      "set_by_lua_block $v { return \"}\" }\n"
                      "access_by_lua_block{return}\n"
                      "balancer_by_lua_block { } log_by_lua_block { }\n"
                      "} }\nworker_cpu_affinity 10 01;\n");
    place("set_by_lua_block with its variable, a block with no space", "1",
          "-c", c());
    put("nginx.conf", "worker_processes 2;\nevents { }\n"
                      "http { my_lua_block { a \"}\" b; } }\n"
                      "worker_cpu_affinity 10 01;\n");
    place("a name not ending in _by_lua_block: nginx's block", "1", "-c", c());

    lua_none("a string with a backslash before a newline ends there",
             "unexpected end of file", " local s = \"a\\\n}\" ");
    lua_none("a string with a newline is none: its '}' closes the block",
             "unexpected end of file", " local s = \"}\n\" ");
    lua_none("an unterminated block", "terminating characters",
             " local t = {{{{ ");
    lua_none("an unclosed long bracket", "closing long bracket",
             " local s = [==[ ]] ");
    lua_none("an unclosed long comment", "closing long bracket",
             " --[[ } ");

    /* nginx's buffer: the lexer sees 2048 to 4096 bytes from where it
     * is; a token longer than that is refused, and a line comment that
     * runs past it ends there. */
    memset(filler, 'x', sizeof filler - 1);
    filler[sizeof filler - 1] = '\0';
    snprintf(body, sizeof body, " %.3000s ", filler);
    lua("3000 bytes with no token", body);
    snprintf(body, sizeof body, " \"%.3000s\" ", filler);
    lua("a string of 3000 bytes", body);
    snprintf(body, sizeof body, " [[%.3000s]] ", filler);
    lua("a long bracket of 3000 bytes", body);
    snprintf(body, sizeof body, " %.5000s ", filler);
    lua_none("5000 bytes with no token", "too long lua code block", body);
    snprintf(body, sizeof body, " \"%.5000s\" ", filler);
    lua_none("a string of 5000 bytes", "too long lua code block", body);
    snprintf(body, sizeof body, " [[%.5000s]] ", filler);
    lua_none("a long bracket of 5000 bytes", "closing long bracket", body);
    snprintf(body, sizeof body, " --%.1000s }\n", filler);
    lua("a '}' in a comment line of 1000 bytes", body);
    snprintf(body, sizeof body, " --%.5000s }\n", filler);
    lua_none("a '}' in a comment line past the buffer closes the block",
             "unexpected \"}\"", body);
}

static void test_long_words(void)
{
    static char text[16384];
    char *p;
    p = text + sprintf(text, "worker_cpu_affinity 10;\n#");
    memset(p, 'x', 4094);
    strcpy(p + 4094, "\nevents { }\n");
    put("nginx.conf", text);
    place("a comment of 4095 characters", "1", "-c", c());
    p = text + sprintf(text, "worker_cpu_affinity 10;\n#");
    memset(p, 'x', 4095);
    strcpy(p + 4095, "\nevents { }\n");
    put("nginx.conf", text);
    none("a comment of 4096 characters", "too long parameter", "-c", c());
    p = text + sprintf(text, "worker_cpu_affinity 10;\nenv ");
    memset(p, 'x', 5000);
    strcpy(p + 5000, ";\n");
    put("nginx.conf", text);
    none("a word of 5000 characters", "too long parameter", "-c", c());
}

static void test_modes(void)
{
    conf("nginx.conf", "worker_cpu_affinity 10 01;\nmaster_process off;");
    none("master_process off", "master_process off", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10 01;\nmaster_process OFF;");
    none("master_process OFF", "master_process off", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10 01;\nmaster_process On;");
    place("master_process On", "1", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10 01;\nmaster_process maybe;");
    none("master_process maybe", "invalid value", "-c", c());
    conf("nginx.conf", "worker_cpu_affinity 10 01;\ndaemon off;");
    place("daemon off", "1", "-c", c());
    put("nginx.conf", "worker_processes 0;\nworker_cpu_affinity 10;");
    none("worker_processes 0", "worker_processes 0", "-c", c());
    put("nginx.conf", "worker_processes auto;\nworker_cpu_affinity 10;");
    place("worker_processes auto", "1", "-c", c());
    put("nginx.conf", "worker_processes two;\nworker_cpu_affinity 10;");
    none("worker_processes two", "invalid value", "-c", c());
    put("nginx.conf", "worker_processes 99999999999999999999999;\n"
                      "worker_cpu_affinity 10;");
    none("worker_processes past a long", "invalid value", "-c", c());
}

static void test_bad_files(void)
{
    char text[64];
    none("a missing configuration", "No such file", "-c", at("missing.conf"));
    mkdir(at("adir"), 0755);
    none("a directory as configuration", "not a regular file", "-c",
         at("adir"));
    none("a device as configuration", "not a regular file", "-c",
         "/dev/null");
    mkfifo(at("fifo"), 0644);
    none("a FIFO as configuration", "not a regular file", "-c", at("fifo"));
    put("loop.conf", "worker_cpu_affinity 10;\ninclude loop2.conf;\n");
    put("loop2.conf", "include loop2.conf;\n");
    none("an include loop", "include depth over 8", "-c", at("loop.conf"));
    put("fan.conf", "include fan/*.conf;\n");
    for (int i = 0; i < MA_NGX_MAX_FILES + 1; i++) {
        snprintf(text, sizeof text, "fan/%03d.conf", i);
        put(text, "# empty\n");
    }
    none("a glob over the file count", "over 64 files", "-c", at("fan.conf"));
    put("bomb.conf", "include bomb/*.conf;\n");
    for (int i = 0; i < 9; i++) {
        snprintf(text, sizeof text, "bomb/%d.conf", i);
        put(text, "include bomb/*.conf;\n");
    }
    none("a glob that includes itself", "include depth over 8", "-c",
         at("bomb.conf"));
}

static void test_big_files(void)
{
    size_t size = MA_NGX_MAX_FILE_BYTES + 1;
    char *big = malloc(size + 1);
    memset(big, '\n', size);
    memcpy(big, "worker_cpu_affinity 10;", 23);
    put_bytes("big.conf", big, size);
    none("a file over 1 MiB", "over 1048576 bytes", "-c", at("big.conf"));
    put_bytes("big.conf", big, size - 1);
    place("a file of exactly 1 MiB", "1", "-c", at("big.conf"));
    memset(big, '\n', size);
    put_bytes("part.conf", big, 1000 * 1000);
    put("total.conf", "worker_cpu_affinity 10;\ninclude part.conf;\n"
                      "include part.conf;\ninclude part.conf;\n"
                      "include part.conf;\ninclude part.conf;\n");
    none("files over 4 MiB together", "over 4194304 bytes", "-c",
         at("total.conf"));
    free(big);
}

static void test_files_listed(void)
{
    struct ma_ngx_prediction p;
    char text[64];
    put("list.conf", "worker_cpu_affinity 10;\ninclude list/*.conf;\n");
    for (int i = 0; i < 60; i++) {
        snprintf(text, sizeof text, "list/%02d.conf", i);
        put(text, "# empty\n");
    }
    p = run(2, "-c", at("list.conf"), (char *)NULL);
    ok(p.place && p.n_files == 61, "61 files read and counted (%u)",
       p.n_files);
    ok(strncmp(p.files, at("list.conf"), strlen(at("list.conf"))) == 0,
       "the list starts with the configuration file");
    ok(strlen(p.files) >= 3 &&
           strcmp(p.files + strlen(p.files) - 3, "...") == 0,
       "a list too long for its buffer ends in '...'");
    ok(strstr(p.reason, "list.conf:1") != NULL,
       "the reason says where worker_cpu_affinity is: %s", p.reason);
}

/* An executable with the string "nginx -V" prints, at offset `at`. */
static void fake_exe(const char *name, size_t at_offset, const char *args)
{
    size_t len = at_offset + strlen(args) + 64;
    char *buf = calloc(1, len);
    memcpy(buf + at_offset, args, strlen(args));
    put_bytes(name, buf, len);
    free(buf);
}

static struct ma_ngx_prediction run_exe(const char *exe, ...)
{
    struct ma_ngx_prediction p;
    va_list ap;
    va_start(ap, exe);
    p = run_v(exe, 2, ap);
    va_end(ap);
    return p;
}

static void test_compiled_paths(void)
{
    struct ma_ngx_prediction p;
    char args[8192];
    put("etc/nginx.conf", "worker_cpu_affinity 10;\ninclude inc/*.conf;\n");
    put("etc/inc/a.conf", "# included\n");
    snprintf(args, sizeof args,
             "configure arguments: --with-cc-opt='-g -O2 --prefix=/nope' "
             "--prefix=%s --conf-path=%s --with-debug\n",
             at("share"), at("etc/nginx.conf"));
    fake_exe("exe1", 5000, args);
    p = run_exe(at("exe1"), (char *)NULL);
    is_str(cpus(&p), "1", "no -c: the compiled-in --conf-path");
    ok(p.n_files == 2 && strstr(p.files, "etc/inc/a.conf"),
       "includes relative to its directory: %s", p.files);
    fake_exe("exe2", 65536 - 7, args);
    p = run_exe(at("exe2"), (char *)NULL);
    is_str(cpus(&p), "1", "the string across two chunks of the scan");

    put("share/conf/nginx.conf", "worker_cpu_affinity 01;\n");
    snprintf(args, sizeof args, "configure arguments: --prefix=%s\n",
             at("share"));
    fake_exe("exe3", 100, args);
    p = run_exe(at("exe3"), (char *)NULL);
    is_str(cpus(&p), "0", "no --conf-path: conf/nginx.conf in the prefix");
    put("share/rel.conf", "worker_cpu_affinity 10;\n");
    p = run_exe(at("exe3"), "-c", "rel.conf", (char *)NULL);
    is_str(cpus(&p), "1", "a relative -c: in the compiled-in prefix");
    put("other/conf/nginx.conf", "worker_cpu_affinity 10;\n");
    p = run_exe(at("exe3"), "-p", at("other"), (char *)NULL);
    is_str(cpus(&p), "1", "-p without -c: the compiled-in conf/nginx.conf "
                          "in that prefix");
    p = run_exe(at("exe1"), "-p", at("other"), (char *)NULL);
    is_str(cpus(&p), "1", "-p without -c: an absolute compiled-in "
                          "--conf-path stays");
    p = run_exe(at("no-exe"), "-p", at("other"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "compiled-in paths"),
       "-p without -c needs the compiled-in path: %s", p.reason);

    put("sp ace/nginx.conf", "worker_cpu_affinity 10;\n");
    snprintf(args, sizeof args,
             "configure arguments: --conf-path='%s' --prefix=\n",
             at("sp ace/nginx.conf"));
    fake_exe("exe4", 100, args);
    p = run_exe(at("exe4"), (char *)NULL);
    is_str(cpus(&p), "1", "a quoted --conf-path with a space");

    fake_exe("exe5", 100, "configure arguments:\n");
    p = run_exe(at("exe5"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "/usr/local/nginx/conf/nginx.conf"),
       "no arguments: nginx's defaults (%s)", p.reason);

    fake_exe("exe6", 100, "nothing here\n");
    p = run_exe(at("exe6"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "no \"configure arguments:\""),
       "an executable without the string: %s", p.reason);
    fake_exe("exe7", 100, "configure arguments:--prefix=/x");
    p = run_exe(at("exe7"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "not understood"),
       "a string of another shape: %s", p.reason);
    p = run_exe(at("no-exe"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "cannot be read"),
       "a missing executable: %s", p.reason);
    p = run_exe(NULL, (char *)NULL);
    ok(!p.place && strstr(p.reason, "cannot be read"),
       "no executable given: %s", p.reason);
    p = run_exe(NULL, "-c", at("etc/nginx.conf"), (char *)NULL);
    is_str(cpus(&p), "1", "an absolute -c needs no executable");
}

/* The forks' executables: Angie's own defaults, Tengine's "auto". */
static void test_forks(void)
{
    struct ma_ngx_prediction p;
    char args[8192];
    fake_exe("angie1", 70000, "Angie version: Angie/1.12.1\n"
                              "nginx version: nginx/1.31.2\n"
                              "configure arguments: --with-debug\n");
    p = run_exe(at("angie1"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "\"/usr/local/angie/conf/angie.conf\""),
       "Angie without --prefix or --conf-path: its own defaults (%s)",
       p.reason);
    put("angie/conf/angie.conf", "worker_cpu_affinity 10;\n");
    snprintf(args, sizeof args,
             "Angie version: Angie/1.12.1 (debug)\n"
             "configure arguments: --prefix=%s\n", at("angie"));
    fake_exe("angie2", 100, args);
    p = run_exe(at("angie2"), (char *)NULL);
    is_str(cpus(&p), "1", "Angie with --prefix: conf/angie.conf in it");
    put("angie-p/conf/angie.conf", "worker_cpu_affinity 01;\n");
    p = run_exe(at("angie1"), "-p", at("angie-p"), (char *)NULL);
    is_str(cpus(&p), "0", "Angie with -p: conf/angie.conf in that prefix");
    snprintf(args, sizeof args, "configure arguments: --prefix=%s\n",
             at("angie"));
    fake_exe("nginx-angie-prefix", 100, args);
    p = run_exe(at("nginx-angie-prefix"), (char *)NULL);
    ok(!p.place && strstr(p.reason, "angie/conf/nginx.conf\""),
       "nginx in the same prefix: conf/nginx.conf (%s)", p.reason);

    conf("nginx.conf", "worker_cpu_affinity auto;");
    fake_exe("tengine31", 100, "Tengine version: Tengine/3.1.0\n"
                               "configure arguments:\n");
    p = run_exe(at("tengine31"), "-c", c(), (char *)NULL);
    is_str(cpus(&p), "0", "Tengine 3.1 auto: nginx's rule, CPU 0 first");
    fake_exe("tengine23", 100, "Tengine version: Tengine/2.3.0\n"
                               "configure arguments:\n");
    p = run_exe(at("tengine23"), "-c", c(), (char *)NULL);
    is_str(cpus(&p), "0", "Tengine 2.3 auto: nginx's rule");
    fake_exe("tengine22", 100, "Tengine version: Tengine/2.2.2 "
                               "(nginx/1.8.1)\nconfigure arguments:\n");
    p = run_exe(at("tengine22"), "-c", c(), (char *)NULL);
    ok(!p.place && strstr(p.reason, "Tengine 2.2 assigns \"auto\" by its "
                                    "own rule"),
       "Tengine 2.2 auto: its own rule, not predicted (%s)", p.reason);
    conf("nginx.conf", "worker_cpu_affinity 10 01;");
    p = run_exe(at("tengine22"), "-c", c(), (char *)NULL);
    is_str(cpus(&p), "1", "Tengine 2.2 with masks: nginx's rule");
    conf("nginx.conf", "worker_cpu_affinity auto;");
    p = run_exe(at("no-exe"), "-c", c(), (char *)NULL);
    is_str(cpus(&p), "0", "auto with an executable that cannot be read: "
                          "nginx's rule");
}

/* Debian's nginx, when installed: its compiled-in configuration. */
static void test_system_nginx(void)
{
    struct ma_ngx_prediction p;
    if (access("/usr/sbin/nginx", R_OK) != 0 ||
        access("/etc/nginx/nginx.conf", R_OK) != 0) {
        ok(1, "# SKIP no Debian nginx here");
        return;
    }
    p = run_exe("/usr/sbin/nginx", (char *)NULL);
    ok(p.n_files >= 1 &&
           strncmp(p.files, "/etc/nginx/nginx.conf", 21) == 0,
       "/usr/sbin/nginx reads /etc/nginx/nginx.conf: %s (%s)", p.files,
       p.reason);
}

int main(void)
{
    int fds;
    snprintf(dir, sizeof dir, "/tmp/masteraff-nginxconf.XXXXXX");
    if (!mkdtemp(dir))
        return 1;
    fds = fd_count();
    test_masks();
    test_wide_masks();
    test_auto();
    test_options();
    test_params();
    test_prefix();
    test_syntax();
    test_lua();
    test_long_words();
    test_modes();
    test_bad_files();
    test_big_files();
    test_files_listed();
    test_compiled_paths();
    test_forks();
    test_system_nginx();
    ok(fd_count() == fds, "no descriptor left after all of it");
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            ok(0, "remove %s", dir);
    }
    return done_testing();
}
