/* libmasteraff: what the parts of the nginx configuration reader share,
 * and nothing else uses: the start (early.c) goes through nginxconf.h.
 *
 *   nginxconf.c          nginx's reader and the verdict: ma_ngx_predict
 *   nginxconf_lua.c      the Lua module's reader of *_by_lua_block bodies
 *   nginxconf_cmdline.c  nginx's command line, and where its conf is
 *   nginxconf_exe.c      what the executable says: paths, Angie, Tengine
 *   nginxconf_ctx.c      what they all lean on: the reason, full names and
 *                        nginx's read buffer
 *
 * The parts call one another only through the functions below, downwards:
 * nginxconf.c calls the others, the command line calls the executable's
 * paths, and every part uses nginxconf_ctx.c's services as nginx's modules
 * use ngx_conf_file.c's: the reason (fail), full names (full_name) and,
 * for the Lua reader, the buffer (refill). */
#ifndef MASTERAFF_NGINXCONF_PRIVATE_H
#define MASTERAFF_NGINXCONF_PRIVATE_H

#include "nginxconf.h"

#include <limits.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>

/* ngx_conf_read_token reads a file through a buffer of NGX_CONF_BUFFER
 * bytes, and a token (or comment) that does not fit in it is an error. */
#define NGX_CONF_BUFFER 4096
/* The longest word kept: longer ones only fit in -g, where a long value
 * of a directive that matters would be a doubt anyway. */
#define WORD_MAX NGX_CONF_BUFFER
/* Words kept of a directive: its name and two arguments; the others pass
 * through a last slot, only to be checked. */
#define KEPT_WORDS 4

struct directive {
    size_t n; /* words read */
    char w[KEPT_WORDS][WORD_MAX + 1];
    size_t len[KEPT_WORDS];
    bool too_long;   /* some kept word did not fit */
    const char *bad; /* why worker_cpu_affinity's masks are invalid */
};

struct lexer {
    const char *buf;
    size_t size, pos, start;
    size_t last; /* the end of what nginx's buffer holds of the file: the
                    Lua reader sees no further */
    unsigned line;
    bool bounded; /* a file, read through nginx's buffer; not -g */
};

struct ctx {
    struct ma_ngx_prediction *out;
    long ncpu;
    char conf_prefix[PATH_MAX];
    const char *file; /* being read, for messages */
    struct lexer *lx;
    unsigned depth, files;
    size_t total;
    bool files_cut; /* the list of files ends in "..." */
    bool failed;
    const char *exe;  /* the executable, read only when needed */
    bool scanned;     /* the executable's tags were looked for */
    bool angie;       /* the executable is Angie's */
    int tengine;      /* Tengine's version (major * 1000 + minor), or 0 */
    int master;       /* master_process: -1 unset, 0 off, 1 on */
    long workers;     /* worker_processes: -1 unset */
    bool affinity;    /* worker_cpu_affinity seen */
    bool w0_pins;     /* nginx will call sched_setaffinity in worker 0 */
    bool automatic;   /* worker_cpu_affinity auto */
    cpu_set_t w0;
    char affinity_at[PATH_MAX + 16];
    struct directive d;
    /* The paths the start needs, here rather than on the stack: the
     * library reads the configuration in its constructor, on nginx's main
     * thread, before nginx has run, under whatever stack limit it has. */
    char conf_file[PATH_MAX], prefix[PATH_MAX], compiled_prefix[PATH_MAX],
        compiled_conf[PATH_MAX];
};

struct options {
    const char *prefix, *conf, *params;
    const char *not_server; /* why this invocation starts no server */
    char option;            /* the option that said so */
};

/* nginxconf_ctx.c */

/* Says why there is no placement, where the reading stopped; the first
 * reason wins. Returns false, for "return fail(...)". */
__attribute__((format(printf, 2, 3))) bool fail(struct ctx *c,
                                                const char *fmt, ...);

/* Paths as ngx_get_full_name makes them: absolute, or after the prefix. */
bool full_name(struct ctx *c, const char *prefix, const char *name,
               char *out, size_t len);

/* Reads on in nginx's buffer, keeping what is from `keep` on. */
void refill(struct lexer *lx, size_t keep);

/* nginxconf_lua.c */

/* Whether the directive's body is Lua: a name ending in _by_lua_block. */
bool is_lua_block(const struct directive *d);

/* Reads a Lua block's body after its '{' up to the '}' that closes it. */
bool lua_block(struct ctx *c, struct lexer *lx);

/* nginxconf_cmdline.c */

/* The options of argv; o->not_server says why it starts no server. */
void parse_options(int argc, char *const argv[], struct options *o);

/* Fills the configuration file's name and the prefix of its includes. */
bool locate_conf(struct ctx *c, const struct options *o);

/* nginxconf_exe.c */

/* The compiled-in prefix and configuration file of the executable. */
bool compiled_paths(struct ctx *c, char *prefix, char *conf);

/* Whether "worker_cpu_affinity auto" is an old Tengine's own rule. */
bool old_tengine_auto(struct ctx *c);

#endif
