/* libmasteraff: worker 0's CPUs from nginx's configuration (see
 * nginxconf.h). This is nginx's reader: ngx_conf_read_token, ngx_conf_parse
 * and ngx_conf_include of src/core/ngx_conf_file.c, and the main context's
 * directives of src/core/nginx.c (ngx_set_worker_processes,
 * ngx_set_cpu_affinity, ngx_get_cpu_affinity), which nginx 1.18 to 1.31,
 * freenginx, Angie and Tengine agree on. ma_ngx_predict runs the parts as
 * nginx's start does: its command line (nginxconf_cmdline.c), what the
 * executable says (nginxconf_exe.c), this reader, with the Lua module's
 * for its blocks (nginxconf_lua.c). */
#define _GNU_SOURCE
#include "internal.h"
#include "nginxconf_private.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

enum token {
    TOK_MORE,  /* (inside the tokenizer) read on */
    TOK_ERROR,
    TOK_END,   /* a directive ended by ';' */
    TOK_BLOCK, /* a directive ended by '{' */
    TOK_CLOSE, /* '}' */
    TOK_EOF,
};

/* ---- messages and the list of files ---- */

__attribute__((format(printf, 2, 3))) static void
set_reason(struct ma_ngx_prediction *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
}

/* Adds a name to the list, or "..." once the list is full; room is kept
 * for it. */
static void note_file(struct ctx *c, const char *name)
{
    struct ma_ngx_prediction *out = c->out;
    size_t used = strlen(out->files), room = sizeof out->files;
    const char *sep = out->n_files ? ", " : "";
    out->n_files++;
    if (c->files_cut)
        return;
    if (used + strlen(sep) + strlen(name) + 6 <= room) {
        snprintf(out->files + used, room - used, "%s%s", sep, name);
    } else {
        snprintf(out->files + used, room - used, "%s...", sep);
        c->files_cut = true;
    }
}

/* ---- the tokenizer: ngx_conf_read_token over a buffer in memory ---- */

static bool is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n';
}

/* worker_cpu_affinity's check of one mask in ngx_set_cpu_affinity. */
static const char *mask_error(const char *s, size_t len)
{
    if (len > CPU_SETSIZE)
        return "\"worker_cpu_affinity\" supports up to 1024 CPUs only";
    for (size_t i = 0; i < len; i++)
        if (s[i] != ' ' && s[i] != '0' && s[i] != '1')
            return "invalid character in \"worker_cpu_affinity\"";
    return NULL;
}

/* A mask, rightmost bit CPU 0, spaces ignored; valid by mask_error. */
static void mask_parse(const char *s, size_t len, cpu_set_t *out)
{
    size_t bit = 0;
    CPU_ZERO(out);
    for (size_t i = len; i-- > 0;) {
        if (s[i] == ' ')
            continue;
        if (s[i] == '1')
            CPU_SET(bit, out);
        bit++;
    }
}

/* Every mask is checked as it comes, since only some words are kept. */
static void check_affinity_word(struct directive *d, const char *s,
                                size_t len)
{
    const char *err;
    if (d->n < 2 || d->bad || strcmp(d->w[0], "worker_cpu_affinity") != 0)
        return;
    if (d->n == 2 && len == 4 && memcmp(s, "auto", 4) == 0)
        return;
    err = mask_error(s, len);
    if (err)
        d->bad = err;
}

/* ngx_conf_read_token's copy of a word: \" \' \\ lose the backslash, \t
 * \r \n become the characters, any other backslash stays. */
static void push_word(struct directive *d, const char *src, size_t n)
{
    size_t slot = d->n < KEPT_WORDS - 1 ? d->n : KEPT_WORDS - 1;
    char *dst = d->w[slot];
    size_t len = 0;
    for (size_t i = 0; i < n; len++) {
        char ch = src[i];
        if (ch == '\\' && i + 1 < n) {
            char next = src[i + 1];
            if (next == '"' || next == '\'' || next == '\\') {
                i++;
                ch = next;
            } else if (next == 't' || next == 'r' || next == 'n') {
                i++;
                ch = next == 't' ? '\t' : next == 'r' ? '\r' : '\n';
            }
        }
        i++;
        if (len < WORD_MAX)
            dst[len] = ch;
        else
            d->too_long = true;
    }
    if (len > WORD_MAX)
        len = WORD_MAX;
    dst[len] = '\0';
    d->len[slot] = len;
    d->n++;
    check_affinity_word(d, dst, len);
}

static void directive_reset(struct directive *d)
{
    d->n = 0;
    d->too_long = false;
    d->bad = NULL;
}

struct lex_state {
    bool found, need_space, last_space, sharp_comment, variable, quoted,
        s_quoted, d_quoted;
};

static enum token lex_fail(struct ctx *c, const char *msg, char ch)
{
    if (ch)
        fail(c, "%s \"%c\"", msg, ch);
    else
        fail(c, "%s", msg);
    return TOK_ERROR;
}

static enum token lex_end_of_input(struct ctx *c, struct lexer *lx,
                                   const struct lex_state *st)
{
    if (c->d.n > 0 || !st->last_space)
        return lex_fail(c, lx->bounded
                               ? "unexpected end of file, expecting \";\" or \"}\""
                               : "unexpected end of parameter, expecting \";\"",
                        0);
    return TOK_EOF;
}

/* The first character of a word, or what comes between words. Returns
 * TOK_MORE to go on reading. */
static enum token lex_between(struct ctx *c, struct lexer *lx,
                              struct lex_state *st, char ch)
{
    lx->start = lx->pos - 1;
    if (is_space(ch))
        return TOK_MORE;
    switch (ch) {
    case ';':
    case '{':
        if (c->d.n == 0)
            return lex_fail(c, "unexpected", ch);
        return ch == '{' ? TOK_BLOCK : TOK_END;
    case '}':
        if (c->d.n != 0)
            return lex_fail(c, "unexpected", ch);
        return TOK_CLOSE;
    case '#':
        st->sharp_comment = true;
        return TOK_MORE;
    case '\\':
        st->quoted = true;
        break;
    case '"':
        lx->start++;
        st->d_quoted = true;
        break;
    case '\'':
        lx->start++;
        st->s_quoted = true;
        break;
    case '$':
        st->variable = true;
        break;
    }
    st->last_space = false;
    return TOK_MORE;
}

/* A character inside a word. Returns TOK_MORE to go on reading. */
static enum token lex_inside(struct ctx *c, struct lexer *lx,
                             struct lex_state *st, char ch)
{
    if (ch == '{' && st->variable)
        return TOK_MORE;
    st->variable = false;
    if (ch == '\\') {
        st->quoted = true;
        return TOK_MORE;
    }
    if (ch == '$') {
        st->variable = true;
        return TOK_MORE;
    }
    if (st->d_quoted) {
        if (ch == '"') {
            st->d_quoted = false;
            st->need_space = st->found = true;
        }
    } else if (st->s_quoted) {
        if (ch == '\'') {
            st->s_quoted = false;
            st->need_space = st->found = true;
        }
    } else if (is_space(ch) || ch == ';' || ch == '{') {
        st->last_space = st->found = true;
    }
    if (!st->found)
        return TOK_MORE;
    push_word(&c->d, lx->buf + lx->start, lx->pos - 1 - lx->start);
    st->found = false;
    if (ch == ';')
        return TOK_END;
    return ch == '{' ? TOK_BLOCK : TOK_MORE;
}

/* Reads one directive's words into c->d, as ngx_conf_read_token does. */
static enum token read_directive(struct ctx *c, struct lexer *lx)
{
    struct lex_state st = {.last_space = true};
    enum token t;
    directive_reset(&c->d);
    lx->start = lx->pos;
    for (;;) {
        char ch;
        if (lx->pos >= lx->size)
            return lex_end_of_input(c, lx, &st);
        if (lx->bounded && lx->pos - lx->start >= NGX_CONF_BUFFER)
            return lex_fail(c, "too long parameter", 0);
        if (lx->pos >= lx->last)
            refill(lx, lx->start);
        ch = lx->buf[lx->pos++];
        if (ch == '\n') {
            lx->line++;
            st.sharp_comment = false;
        }
        if (st.sharp_comment)
            continue;
        if (st.quoted) {
            st.quoted = false;
            continue;
        }
        if (st.need_space) {
            if (is_space(ch)) {
                st.last_space = true;
                st.need_space = false;
                continue;
            }
            if (ch == ';')
                return TOK_END;
            if (ch == '{')
                return TOK_BLOCK;
            if (ch != ')')
                return lex_fail(c, "unexpected", ch);
            st.last_space = true;
            st.need_space = false;
        }
        t = st.last_space ? lex_between(c, lx, &st, ch)
                          : lex_inside(c, lx, &st, ch);
        if (t != TOK_MORE)
            return t;
    }
}

/* ---- directives of the main context ---- */

static bool parse_file(struct ctx *c, const char *path);

static bool is_directive(const struct directive *d, const char *name)
{
    return strcmp(d->w[0], name) == 0;
}

/* ngx_conf_include: a pattern with * ? [ is a glob (sorted, matching
 * nothing is fine), anything else one file that must open. */
static bool include_path(struct ctx *c, const char *path)
{
    glob_t g;
    int rc;
    bool good = true;
    if (!strpbrk(path, "*?["))
        return parse_file(c, path);
    rc = glob(path, 0, NULL, &g);
    if (rc == GLOB_NOMATCH)
        return true;
    if (rc != 0)
        return fail(c, "glob \"%s\" failed", path);
    if (g.gl_pathc > MA_NGX_MAX_FILES)
        good = fail(c, "include \"%s\": over %d files", path,
                    MA_NGX_MAX_FILES);
    for (size_t i = 0; good && i < g.gl_pathc; i++)
        good = parse_file(c, g.gl_pathv[i]);
    globfree(&g);
    return good;
}

/* Each level of includes keeps its path on the heap: a few hundred bytes
 * of stack a level, not a page. */
static bool include(struct ctx *c, const char *name)
{
    char *path = malloc(PATH_MAX);
    bool good;
    if (!path)
        return fail(c, "out of memory");
    good = full_name(c, c->conf_prefix, name, path, PATH_MAX) &&
           include_path(c, path);
    free(path);
    return good;
}

/* ngx_conf_set_flag_slot */
static bool set_flag(struct ctx *c, int *flag)
{
    const struct directive *d = &c->d;
    if (d->n != 2)
        return fail(c, "invalid number of arguments in \"%s\"", d->w[0]);
    if (*flag != -1)
        return fail(c, "\"%s\" directive is duplicate", d->w[0]);
    if (strcasecmp(d->w[1], "on") == 0)
        *flag = 1;
    else if (strcasecmp(d->w[1], "off") == 0)
        *flag = 0;
    else
        return fail(c, "invalid value \"%s\" in \"%s\"", d->w[1], d->w[0]);
    return true;
}

/* ngx_set_worker_processes, with ngx_atoi's digits and overflow check. */
static bool set_workers(struct ctx *c)
{
    const struct directive *d = &c->d;
    long v = 0;
    if (d->n != 2)
        return fail(c, "invalid number of arguments in \"worker_processes\"");
    if (c->workers != -1)
        return fail(c, "\"worker_processes\" directive is duplicate");
    if (strcmp(d->w[1], "auto") == 0) {
        c->workers = c->ncpu;
        return true;
    }
    if (d->len[1] == 0)
        return fail(c, "invalid value in \"worker_processes\"");
    for (const char *p = d->w[1]; *p; p++) {
        if (*p < '0' || *p > '9' || v > (LONG_MAX - (*p - '0')) / 10)
            return fail(c, "invalid value in \"worker_processes\"");
        v = v * 10 + (*p - '0');
    }
    c->workers = v;
    return true;
}

/* auto: the first CPU of the auto mask (ngx_get_cpu_affinity); the default
 * mask holds the first ncpu CPUs. An empty mask pins nothing. */
static void affinity_auto(struct ctx *c, const struct directive *d)
{
    cpu_set_t mask;
    if (d->n == 3) {
        mask_parse(d->w[2], d->len[2], &mask);
    } else {
        CPU_ZERO(&mask);
        for (long i = 0; i < c->ncpu && i < CPU_SETSIZE; i++)
            CPU_SET(i, &mask);
    }
    c->out->auto_cpus = mask;
    CPU_ZERO(&c->w0);
    for (int i = 0; i < CPU_SETSIZE; i++) {
        if (CPU_ISSET(i, &mask)) {
            CPU_SET(i, &c->w0);
            c->w0_pins = true;
            return;
        }
    }
}

/* ngx_set_cpu_affinity; worker 0 takes the first mask. */
static bool set_affinity(struct ctx *c)
{
    const struct directive *d = &c->d;
    if (d->n < 2)
        return fail(c, "invalid number of arguments in "
                       "\"worker_cpu_affinity\"");
    if (c->affinity)
        return fail(c, "\"worker_cpu_affinity\" directive is duplicate");
    c->affinity = true;
    if (strcmp(d->w[1], "auto") == 0 && d->n > 3)
        return fail(c, "invalid number of arguments in "
                       "\"worker_cpu_affinity\"");
    if (d->bad)
        return fail(c, "%s", d->bad);
    if (c->lx->bounded)
        snprintf(c->affinity_at, sizeof c->affinity_at, "%s:%u", c->file,
                 c->lx->line);
    else
        snprintf(c->affinity_at, sizeof c->affinity_at, "%s", c->file);
    if (strcmp(d->w[1], "auto") == 0) {
        c->automatic = true;
        affinity_auto(c, d);
        return true;
    }
    mask_parse(d->w[1], d->len[1], &c->w0);
    c->w0_pins = CPU_COUNT(&c->w0) > 0;
    return true;
}

/* The directives that decide worker 0's mask; nginx's own check of any
 * other is left to nginx. */
static bool main_directive(struct ctx *c)
{
    struct directive *d = &c->d;
    if (!is_directive(d, "include") && !is_directive(d, "master_process") &&
        !is_directive(d, "worker_processes") &&
        !is_directive(d, "worker_cpu_affinity"))
        return true;
    if (d->too_long)
        return fail(c, "\"%s\": a word over %d bytes", d->w[0], WORD_MAX);
    if (is_directive(d, "include")) {
        char *name;
        bool good;
        if (d->n != 2)
            return fail(c, "invalid number of arguments in \"include\"");
        /* The included file's directives overwrite d. */
        if (!(name = strdup(d->w[1])))
            return fail(c, "out of memory");
        good = include(c, name);
        free(name);
        return good;
    }
    if (is_directive(d, "master_process"))
        return set_flag(c, &c->master);
    if (is_directive(d, "worker_processes"))
        return set_workers(c);
    return set_affinity(c);
}

/* A block is skipped, words and all, its braces balanced by nginx's own
 * tokenizer; a Lua block at any depth by the Lua module's. The directives
 * above are no blocks: nginx fails on them. */
static bool block_start(struct ctx *c, unsigned depth)
{
    const struct directive *d = &c->d;
    if (!depth &&
        (is_directive(d, "include") || is_directive(d, "master_process") ||
         is_directive(d, "worker_processes") ||
         is_directive(d, "worker_cpu_affinity")))
        return fail(c, "directive \"%s\" is not terminated by \";\"",
                    d->w[0]);
    return true;
}

/* ngx_conf_parse of one file (or of -g): blocks balance within it. */
static bool parse_text(struct ctx *c, struct lexer *lx)
{
    unsigned blocks = 0;
    for (;;) {
        switch (read_directive(c, lx)) {
        case TOK_ERROR:
        default:
            return false;
        case TOK_EOF:
            if (blocks)
                return fail(c, "unexpected end of file, expecting \"}\"");
            return true;
        case TOK_CLOSE:
            if (!blocks)
                return fail(c, "unexpected \"}\"");
            blocks--;
            break;
        case TOK_BLOCK:
            if (!lx->bounded)
                return fail(c, "block directives are not supported in -g");
            if (!block_start(c, blocks))
                return false;
            if (is_lua_block(&c->d)) {
                if (!lua_block(c, lx))
                    return false;
            } else {
                blocks++;
            }
            break;
        case TOK_END:
            if (!blocks && !main_directive(c))
                return false;
            break;
        }
    }
}

/* Parses text as the configuration named name, restoring the position of
 * the file that included it. */
static bool parse_as(struct ctx *c, const char *name, const char *buf,
                     size_t size, bool bounded)
{
    struct lexer lx = {.buf = buf, .size = size, .line = bounded ? 1 : 0,
                       .bounded = bounded};
    const char *outer_file = c->file;
    struct lexer *outer_lx = c->lx;
    bool good;
    c->file = name;
    c->lx = &lx;
    good = parse_text(c, &lx);
    c->file = outer_file;
    c->lx = outer_lx;
    return good;
}

static bool read_all(int fd, char *buf, size_t size)
{
    size_t got = 0;
    while (got < size) {
        ssize_t n = read(fd, buf + got, size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        got += (size_t)n;
    }
    return true;
}

/* The whole of a regular file within the bounds, or NULL (said). */
static char *load_file(struct ctx *c, const char *path, size_t *size)
{
    struct stat st;
    char *buf = NULL;
    int fd;
    /* Opening a device can act (a watchdog, a tape): look first. */
    if (ma_stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fail(c, "\"%s\" is not a regular file", path);
        return NULL;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        fail(c, "open \"%s\": %s", path, strerror(errno));
        return NULL;
    }
    if (ma_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        fail(c, "\"%s\" is not a regular file", path);
    else if (st.st_size > MA_NGX_MAX_FILE_BYTES)
        fail(c, "\"%s\" is over %ld bytes", path, MA_NGX_MAX_FILE_BYTES);
    else if (c->total + (size_t)st.st_size > MA_NGX_MAX_TOTAL_BYTES)
        fail(c, "configuration over %ld bytes", MA_NGX_MAX_TOTAL_BYTES);
    else if (!(buf = malloc((size_t)st.st_size + 1)))
        fail(c, "out of memory");
    else if (!read_all(fd, buf, (size_t)st.st_size)) {
        fail(c, "read \"%s\" failed", path);
        free(buf);
        buf = NULL;
    } else if (memchr(buf, '\0', (size_t)st.st_size)) {
        fail(c, "\"%s\" has a NUL byte", path);
        free(buf);
        buf = NULL;
    }
    close(fd);
    if (buf) {
        *size = (size_t)st.st_size;
        c->total += *size;
    }
    return buf;
}

static bool parse_file(struct ctx *c, const char *path)
{
    size_t size;
    char *buf;
    bool good;
    if (c->depth >= MA_NGX_MAX_DEPTH)
        return fail(c, "include depth over %d", MA_NGX_MAX_DEPTH);
    if (c->files >= MA_NGX_MAX_FILES)
        return fail(c, "over %d configuration files", MA_NGX_MAX_FILES);
    c->files++;
    buf = load_file(c, path, &size);
    if (!buf)
        return false;
    note_file(c, path);
    c->depth++;
    good = parse_as(c, path, buf, size, true);
    c->depth--;
    free(buf);
    return good;
}

/* ---- the verdict ---- */

static void decide(struct ctx *c)
{
    struct ma_ngx_prediction *out = c->out;
    if (c->master == 0)
        set_reason(out, "master_process off");
    else if (!c->affinity)
        set_reason(out, "no worker_cpu_affinity");
    else if (c->workers == 0)
        set_reason(out, "worker_processes 0");
    else if (!c->w0_pins)
        set_reason(out, "%s: worker 0's mask is empty", c->affinity_at);
    else {
        out->place = true;
        out->worker0 = c->w0;
        set_reason(out, "worker_cpu_affinity at %s",
                 c->affinity_at);
    }
}

static void predict(struct ctx *c, int argc, char *const argv[])
{
    struct options o = {0};
    parse_options(argc, argv, &o);
    if (o.option) {
        set_reason(c->out, "nginx -%c: %s",
                 o.option, o.not_server);
        return;
    }
    if (o.not_server) {
        set_reason(c->out, "%s", o.not_server);
        return;
    }
    if (!locate_conf(c, &o))
        return;
    /* ngx_init_cycle reads -g before the file. */
    if (o.params && !parse_as(c, "-g", o.params, strlen(o.params), false))
        return;
    if (!parse_file(c, c->conf_file))
        return;
    if (old_tengine_auto(c)) {
        set_reason(c->out, "%s: Tengine %d.%d assigns \"auto\" by its own "
                   "rule", c->affinity_at, c->tengine / 1000,
                   c->tengine % 1000);
        return;
    }
    decide(c);
}

void ma_ngx_predict(int argc, char *const argv[], const char *exe, long ncpu,
                    struct ma_ngx_prediction *out)
{
    int saved = errno;
    struct ctx *c = calloc(1, sizeof *c);
    memset(out, 0, sizeof *out);
    if (!c) {
        set_reason(out, "out of memory");
        errno = saved;
        return;
    }
    c->out = out;
    c->exe = exe;
    c->ncpu = ncpu < 1 ? 1 : ncpu;
    c->master = -1;
    c->workers = -1;
    predict(c, argc, argv);
    if (!out->place) {
        CPU_ZERO(&out->worker0);
        CPU_ZERO(&out->auto_cpus);
    }
    free(c);
    errno = saved;
}
