/* masteraff status --json: one object, for monitoring and scripts. Every
 * string is escaped, and bytes that are not UTF-8 (a process title may hold
 * anything) become U+FFFD, so that any JSON parser takes the output. */
#define _GNU_SOURCE
#include "status.h"

#include <string.h>

/* The length of the UTF-8 sequence at s, or 0 when it is not one. */
static size_t utf8_length(const unsigned char *s)
{
    size_t len = s[0] >= 0xf0 && s[0] <= 0xf4   ? 4
                 : s[0] >= 0xe0                 ? 3
                 : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                                                : 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    return len;
}

void put_utf8(FILE *f, const char *text, void (*ascii)(FILE *, int),
              const char *replacement)
{
    const unsigned char *s = (const unsigned char *)text;
    while (*s) {
        size_t len;
        if (*s < 0x80)
            ascii(f, *s++);
        else if ((len = utf8_length(s)) > 0) {
            fwrite(s, 1, len, f);
            s += len;
        } else {
            fputs(replacement, f);
            s++;
        }
    }
}

static void json_ascii(FILE *f, int c)
{
    if (c == '"' || c == '\\')
        fprintf(f, "\\%c", c);
    else if (c < 0x20 || c == 0x7f)
        fprintf(f, "\\u%04x", c);
    else
        putc(c, f);
}

static void json_string(const char *text)
{
    putchar('"');
    put_utf8(stdout, text, json_ascii, "\\ufffd");
    putchar('"');
}

static void json_string_or_null(const char *text)
{
    if (text)
        json_string(text);
    else
        fputs("null", stdout);
}

static void json_key(const char *key)
{
    json_string(key);
    putchar(':');
}

static void json_bool(bool b)
{
    fputs(b ? "true" : "false", stdout);
}

/* {"0": 12, "3": 400}, or {"error": "Operation not permitted",
 * "failed": "map_files"}. */
static void json_node_pages(const struct ma_node_pages *pages)
{
    const char *sep = "";
    putchar('{');
    if (pages->error) {
        json_key("error");
        json_string(strerror(pages->error));
        printf(",\"failed\":");
        json_string(pages->failed ? pages->failed : "");
    }
    for (int n = 0; !pages->error && n < MA_PAGES_MAX_NODES; n++)
        if (pages->node[n]) {
            printf("%s\"%d\":%lu", sep, n, pages->node[n]);
            sep = ",";
        }
    putchar('}');
}

static void json_process(const struct proc *p)
{
    printf("{\"pid\":%d,", (int)p->pid);
    json_key("role");
    json_string(p->role);
    printf(",\"worker\":");
    json_bool(p->worker);
    printf(",\"exiting\":");
    json_bool(p->exiting);
    printf(",\"pinned\":");
    json_bool(p->pinned);
    static const struct { int col; const char *key; } cols[] = {
        {COL_CPUS, "cpus"}, {COL_PACKAGES, "packages"}, {COL_NODES, "nodes"}};
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) {
        putchar(',');
        json_key(cols[i].key);
        json_string(p->col[cols[i].col]);
    }
    printf(",\"units\":");
    json_string(p->units);
    printf(",\"pages\":{\"private\":");
    json_node_pages(&p->pages->priv);
    printf(",\"shared\":");
    json_node_pages(&p->pages->shared);
    printf("}}");
}

static void json_library(const struct library *lib)
{
    printf("{\"loaded\":");
    if (lib->maps_error)
        fputs("null", stdout);
    else
        json_bool(lib->path != NULL);
    printf(",\"path\":");
    json_string_or_null(lib->path);
    printf(",\"libnuma\":");
    json_string_or_null(lib->numa);
    printf(",\"libnuma_refused\":");
    json_string_or_null(lib->numa_refused);
    printf(",\"settings_from\":");
    json_string(lib->settings_from ? lib->settings_from : "defaults");
    printf(",\"settings\":{");
    for (int v = 0; v < N_VARS; v++) {
        printf("%s", v ? "," : "");
        json_key(var_names[v]);
        json_string(setting(lib, v));
    }
    putchar('}');
    if (lib->settings_error) {
        printf(",\"settings_error\":");
        json_string(strerror(lib->settings_error));
    }
    putchar('}');
}

void print_json(const struct table *t, const struct library *lib,
                const char *scope, const struct verdict *v)
{
    printf("{\"master\":%d,\"scope\":", (int)t->procs[0].pid);
    json_string(scope);
    printf(",\"sysfs\":");
    json_string(sysfs_root);
    printf(",\"library\":");
    json_library(lib);
    printf(",\"processes\":[");
    for (size_t i = 0; i < t->n; i++) {
        printf("%s", i ? "," : "");
        json_process(&t->procs[i]);
    }
    printf("],\"verdict\":");
    json_string(level_name(v->level));
    printf(",\"reasons\":[");
    for (size_t i = 0; i < v->n; i++) {
        printf("%s{\"level\":", i ? "," : "");
        json_string(level_name(v->reason[i].level));
        printf(",\"text\":");
        json_string(v->reason[i].text);
        putchar('}');
    }
    printf("]}\n");
}
