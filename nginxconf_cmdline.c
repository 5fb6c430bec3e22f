/* libmasteraff: nginx's command line, as nginx's start reads it:
 * ngx_get_options (-p -c -g, and the options after which nginx starts no
 * server: -t -T -v -V -h -s) and ngx_process_options (the prefix, the
 * configuration file, the directory its includes are relative to) of
 * src/core/nginx.c. */
#define _GNU_SOURCE
#include "nginxconf_private.h"

#include <stdio.h>
#include <string.h>

/* The value of -p -c -g -s -e: the rest of the word, or the next one. */
static const char *option_value(int argc, char *const argv[], int *i,
                                const char *rest)
{
    if (*rest)
        return rest;
    if (*i + 1 < argc && argv[*i + 1]) {
        (*i)++;
        return argv[*i];
    }
    return NULL;
}

static const char *signal_name_check(const char *s)
{
    if (strcmp(s, "stop") && strcmp(s, "quit") && strcmp(s, "reopen") &&
        strcmp(s, "reload"))
        return "nginx -s: invalid signal";
    return "nginx -s: a signal, not a server start";
}

/* One option word; returns false at the first one that ends the start. */
static bool option_word(int argc, char *const argv[], int *i,
                        struct options *o)
{
    const char *p = argv[*i];
    if (!p || *p++ != '-') {
        o->not_server = "nginx: invalid option";
        return false;
    }
    while (*p) {
        const char *v;
        switch (*p++) {
        case '?':
        case 'h':
        case 'v':
        case 'V':
        case 't':
        case 'T':
            o->not_server = "not a server start";
            o->option = p[-1];
            return false;
        case 'q':
            continue;
        case 'p':
        case 'e':
        case 'c':
        case 'g':
        case 's':
            v = option_value(argc, argv, i, p);
            if (!v) {
                o->not_server = "nginx: an option lacks its value";
                return false;
            }
            if (p[-1] == 'p')
                o->prefix = v;
            else if (p[-1] == 'c')
                o->conf = v;
            else if (p[-1] == 'g')
                o->params = v;
            else if (p[-1] == 's') {
                o->not_server = signal_name_check(v);
                return false;
            }
            return true;
        default:
            o->not_server = "nginx: invalid option";
            return false;
        }
    }
    return true;
}

/* nginx reads on after -t, -v or -s, but whatever follows, it starts no
 * server: the first of them, or of the errors, is the reason. */
void parse_options(int argc, char *const argv[], struct options *o)
{
    for (int i = 1; i < argc; i++)
        if (!option_word(argc, argv, &i, o))
            return;
}

/* ngx_process_options: the prefix, the configuration file's full name,
 * and the conf prefix that includes are relative to (the directory of
 * that file). */
bool locate_conf(struct ctx *c, const struct options *o)
{
    char *prefix = c->prefix, *compiled_prefix = c->compiled_prefix,
         *compiled_conf = c->compiled_conf, *conf_file = c->conf_file;
    const char *conf = o->conf;
    bool compiled = !conf || (!o->prefix && conf[0] != '/');
    char *slash;
    size_t len;
    if (compiled && !compiled_paths(c, compiled_prefix, compiled_conf))
        return false;
    if (o->prefix) {
        len = strlen(o->prefix);
        if (len + 2 > PATH_MAX)
            return fail(c, "-p: path too long");
        snprintf(prefix, PATH_MAX, "%s%s", o->prefix,
                 len && o->prefix[len - 1] != '/' ? "/" : "");
    } else if (compiled) {
        strcpy(prefix, compiled_prefix);
    }
    if (!conf)
        conf = compiled_conf;
    if (!full_name(c, prefix, conf, conf_file, PATH_MAX))
        return false;
    slash = strrchr(conf_file, '/');
    if (slash && slash > conf_file) {
        snprintf(c->conf_prefix, sizeof c->conf_prefix, "%.*s",
                 (int)(slash - conf_file + 1), conf_file);
    } else if (o->prefix) {
        strcpy(c->conf_prefix, prefix);
    } else {
        return fail(c, "\"%s\": no directory for includes", conf_file);
    }
    return true;
}
