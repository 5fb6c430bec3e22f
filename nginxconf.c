/* libmasteraff: worker 0's CPUs from nginx's configuration (see
 * nginxconf.h). Each rule below mirrors a named function of nginx 1.18 to
 * 1.31, freenginx, Angie and Tengine, which agree on all of it but the
 * compiled-in defaults, or of OpenResty's Lua module for its blocks. */
#define _GNU_SOURCE
#include "internal.h"
#include "nginxconf.h"

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

enum token {
    TOK_MORE,  /* (inside the tokenizer) read on */
    TOK_ERROR,
    TOK_END,   /* a directive ended by ';' */
    TOK_BLOCK, /* a directive ended by '{' */
    TOK_CLOSE, /* '}' */
    TOK_EOF,
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

/* ---- messages and the list of files ---- */

__attribute__((format(printf, 2, 3))) static void
set_reason(struct ma_ngx_prediction *out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->reason, sizeof out->reason, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static bool fail(struct ctx *c,
                                                       const char *fmt, ...)
{
    va_list ap;
    size_t n = 0;
    if (c->failed)
        return false;
    c->failed = true;
    if (c->file && c->lx && c->lx->bounded)
        n = (size_t)snprintf(c->out->reason, sizeof c->out->reason, "%s:%u: ",
                             c->file, c->lx->line);
    else if (c->file)
        n = (size_t)snprintf(c->out->reason, sizeof c->out->reason, "%s: ",
                             c->file);
    if (n >= sizeof c->out->reason)
        return false;
    va_start(ap, fmt);
    vsnprintf(c->out->reason + n, sizeof c->out->reason - n, fmt, ap);
    va_end(ap);
    return false;
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

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* nginx's buffer, read on once the reading has reached its end: what is
 * kept from `keep` on moves to its start, and the rest of the buffer is
 * filled from the file. */
static void refill(struct lexer *lx, size_t keep)
{
    lx->last = min_size(lx->size, keep + NGX_CONF_BUFFER);
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

/* ---- OpenResty's Lua blocks: ngx_http_lua_conf_lua_block_parse ----
 *
 * The Lua module reads a *_by_lua_block body itself, from just after its
 * '{', with a lexer that searches nginx's buffer for the leftmost of, by
 * priority: '{', '}', an opening long bracket "[=*[", a long comment
 * "--[=*[", a closing long bracket "]=*]", a line comment "--[^\n]*", and
 * strings "..." and '...' that hold no newline and in which a backslash
 * takes the next character (not a newline). A long bracket ends at the
 * first closing one of its level within the buffer. The braces found count
 * the block's depth; the others are only passed over. This is Lua's syntax
 * as that lexer sees it, not as Lua does ("\z" and a backslash before a
 * newline end no string there), and so it is read here. */

enum lua_kind {
    LUA_NONE,  /* nothing in what the buffer holds */
    LUA_OPEN,  /* '{' */
    LUA_CLOSE, /* '}' */
    LUA_OTHER, /* a string, a comment, a long bracket */
    LUA_UNCLOSED, /* a long bracket not closed within the buffer */
    LUA_ERROR, /* nginx stops: the reason is in the lexer */
};

/* A failed string of each quote, for a linear search: a quote of the same
 * kind inside it is escaped there, so a string opened by it fails at the
 * same place. Valid while the buffer ends where it did, or always when the
 * string failed before the end. */
struct lua_failed {
    size_t until, last;
};

struct lua_lexer {
    struct lua_failed dq, sq;
    const char *error; /* nginx's reason to stop */
};

/* A long bracket's level at s[t] ('[' or ']' then '='s then the same
 * bracket), with its end in *end; -1 when there is none before last. */
static long lua_bracket(const char *s, size_t t, size_t last, size_t *end)
{
    size_t i = t + 1;
    while (i < last && s[i] == '=')
        i++;
    if (i >= last || s[i] != s[t])
        return -1;
    *end = i + 1;
    return (long)(i - t - 1);
}

/* The end of the first closing long bracket of the level, from `from` to
 * last, or 0 (ngx_http_lua_strlstrn over the buffer). */
static size_t lua_bracket_close(const char *s, size_t from, size_t last,
                                long level)
{
    for (size_t i = from; i < last; i++) {
        size_t end = 0;
        long l;
        if (s[i] != ']')
            continue;
        l = lua_bracket(s, i, last, &end);
        if (l == level)
            return end;
        while (i + 1 < last && s[i + 1] == '=')
            i++;
    }
    return 0;
}

/* The end of the string opened by the quote at s[t], or 0 when it fails
 * there; failures are remembered in f. */
static size_t lua_string(const char *s, size_t t, size_t last,
                         struct lua_failed *f)
{
    size_t i = t + 1;
    if (t < f->until && (f->last == SIZE_MAX || f->last == last))
        return 0;
    while (i < last && s[i] != '\n') {
        if (s[i] == s[t])
            return i + 1;
        if (s[i] != '\\')
            i++;
        else if (i + 1 < last && s[i + 1] != '\n')
            i += 2;
        else
            break;
    }
    f->until = i;
    f->last = i >= last || (s[i] == '\\' && i + 1 >= last) ? last : SIZE_MAX;
    return 0;
}

/* "--" at s[t]: a long comment, else a line comment to the newline or to
 * the end of the buffer. */
static enum lua_kind lua_comment(const char *s, size_t t, size_t last,
                                 size_t *end)
{
    size_t open;
    long level;
    if (t + 2 < last && s[t + 2] == '[' &&
        (level = lua_bracket(s, t + 2, last, &open)) >= 0) {
        *end = lua_bracket_close(s, open, last, level);
        return *end ? LUA_OTHER : LUA_UNCLOSED;
    }
    for (*end = t + 2; *end < last && s[*end] != '\n'; (*end)++)
        ;
    return LUA_OTHER;
}

/* ngx_http_lua_lex over the buffer from pos: the leftmost token, its end
 * in *end. */
static enum lua_kind lua_search(struct lua_lexer *ll, const char *s,
                                size_t pos, size_t last, size_t *end)
{
    for (size_t t = pos; t < last; t++) {
        size_t open;
        long level;
        switch (s[t]) {
        case '{':
        case '}':
            *end = t + 1;
            return s[t] == '{' ? LUA_OPEN : LUA_CLOSE;
        case '[':
            if ((level = lua_bracket(s, t, last, &open)) < 0)
                break;
            *end = lua_bracket_close(s, open, last, level);
            return *end ? LUA_OTHER : LUA_UNCLOSED;
        case ']':
            if (lua_bracket(s, t, last, end) < 0)
                break;
            return LUA_OTHER;
        case '-':
            if (t + 1 < last && s[t + 1] == '-')
                return lua_comment(s, t, last, end);
            break;
        case '"':
        case '\'':
            *end = lua_string(s, t, last, s[t] == '"' ? &ll->dq : &ll->sq);
            if (*end)
                return LUA_OTHER;
            break;
        }
    }
    return LUA_NONE;
}

static void lua_advance(struct lexer *lx, size_t to)
{
    for (; lx->pos < to; lx->pos++)
        lx->line += lx->buf[lx->pos] == '\n';
}

static enum lua_kind lua_error(struct lua_lexer *ll, const char *why)
{
    ll->error = why;
    return LUA_ERROR;
}

/* One token as ngx_http_lua_conf_read_lua_token reads it, through nginx's
 * buffer: read on when less than half of it is left; when nothing is
 * found, what was searched is kept but not searched again. */
static enum lua_kind lua_token(struct lexer *lx, struct lua_lexer *ll)
{
    static const char eof[] = "unexpected end of file, expecting "
                              "terminating characters for lua code block",
                      too_long[] = "too long lua code block";
    size_t start = lx->pos, end;
    enum lua_kind k;
    for (;;) {
        if (lx->pos >= lx->last || (lx->last - lx->pos < NGX_CONF_BUFFER / 2 &&
                                    lx->last < lx->size)) {
            if (lx->last >= lx->size)
                return lua_error(ll, eof);
            if (lx->last - start == NGX_CONF_BUFFER)
                return lua_error(ll, too_long);
            refill(lx, start);
        }
        k = lua_search(ll, lx->buf, lx->pos, lx->last, &end);
        if (k == LUA_UNCLOSED)
            return lua_error(ll, "Lua code block missing the closing long "
                                 "bracket");
        if (k != LUA_NONE) {
            lua_advance(lx, end);
            return k;
        }
        if (lx->last >= lx->size)
            return lua_error(ll, eof);
        if (lx->last - lx->pos == NGX_CONF_BUFFER)
            return lua_error(ll, too_long);
        start = lx->pos;
        lua_advance(lx, lx->last);
        refill(lx, start);
    }
}

/* The body of a Lua block, up to the '}' that closes it; what nginx
 * would stop at is a doubt. */
static bool lua_block(struct ctx *c, struct lexer *lx)
{
    struct lua_lexer ll = {{0, 0}, {0, 0}, NULL};
    unsigned line = lx->line;
    size_t level = 1;
    while (level) {
        switch (lua_token(lx, &ll)) {
        case LUA_OPEN:
            level++;
            break;
        case LUA_CLOSE:
            level--;
            break;
        case LUA_OTHER:
            break;
        default:
            return fail(c, "%s (\"%s\" at line %u)", ll.error, c->d.w[0],
                        line);
        }
    }
    return true;
}

static bool is_lua_block(const struct directive *d)
{
    static const char suffix[] = "_by_lua_block";
    size_t n = d->len[0], s = sizeof suffix - 1;
    return n > s && strcmp(d->w[0] + n - s, suffix) == 0;
}

/* ---- directives of the main context ---- */

static bool parse_file(struct ctx *c, const char *path);

static bool is_directive(const struct directive *d, const char *name)
{
    return strcmp(d->w[0], name) == 0;
}

/* Paths as ngx_get_full_name makes them: absolute, or after the prefix. */
static bool full_name(struct ctx *c, const char *prefix, const char *name,
                      char *out, size_t len)
{
    int n = snprintf(out, len, "%s%s", name[0] == '/' ? "" : prefix, name);
    if (n < 0 || (size_t)n >= len)
        return fail(c, "path too long: %.64s...", name);
    return true;
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

/* ---- the command line: ngx_get_options, ngx_process_options ---- */

struct options {
    const char *prefix, *conf, *params;
    const char *not_server; /* why this invocation starts no server */
    char option;            /* the option that said so */
};

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
static void parse_options(int argc, char *const argv[], struct options *o)
{
    for (int i = 1; i < argc; i++)
        if (!option_word(argc, argv, &i, o))
            return;
}

/* ---- the executable: "nginx -V"'s configure arguments, and the fork ---- */

#define CONFIGURE_MAX 16384

enum { TAG_CONFIGURE, TAG_ANGIE, TAG_TENGINE, N_TAGS };

/* What "nginx -V" and "-v" print: the configure arguments, and the
 * version lines of the forks whose rules differ from nginx's. */
static const char *const exe_tags[N_TAGS] = {
    "configure arguments:",
    "Angie version: Angie/",
    "Tengine version: Tengine/",
};
#define TAG_MAX 32

/* Offset of the configure arguments' tag in the file, or -1. Reads in
 * chunks that overlap by the tag's length, so a tag across two chunks is
 * found. */
static off_t find_configure(int fd, off_t size)
{
    enum { CHUNK = 65536 };
    const char *tag = exe_tags[TAG_CONFIGURE];
    size_t len = strlen(tag);
    char *buf = malloc(TAG_MAX + CHUNK);
    off_t at = 0, found = -1;
    size_t carry = 0;
    while (buf && found < 0 && at < size) {
        ssize_t n = pread(fd, buf + carry, CHUNK, at);
        size_t have;
        char *hit;
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have = carry + (size_t)n;
        hit = memmem(buf, have, tag, len);
        if (hit)
            found = at - (off_t)carry + (hit - buf);
        at += n;
        carry = have < len - 1 ? have : len - 1;
        memmove(buf, buf + have - carry, carry);
    }
    free(buf);
    return found;
}

/* The forks' version lines: ngx_show_version_info prints them with the
 * configure arguments, and the compiler keeps one function's strings
 * together (about 2 KB apart in Angie's and Tengine's builds), so they
 * are looked for around that tag only. */
static void find_forks(int fd, off_t configure, off_t found[N_TAGS])
{
    enum { WINDOW = 32768 };
    off_t from = configure > WINDOW ? configure - WINDOW : 0;
    char *buf = malloc(2 * WINDOW);
    ssize_t n;
    found[TAG_ANGIE] = found[TAG_TENGINE] = -1;
    while (buf && (n = pread(fd, buf, 2 * WINDOW, from)) < 0 && errno == EINTR)
        ;
    for (int i = TAG_ANGIE; buf && n > 0 && i < N_TAGS; i++) {
        char *hit = memmem(buf, (size_t)n, exe_tags[i], strlen(exe_tags[i]));
        if (hit)
            found[i] = from + (hit - buf);
    }
    free(buf);
}

/* Tengine's version after its tag, as major * 1000 + minor; 1 when it
 * cannot be read (taken as an old one). */
static int tengine_version(int fd, off_t tag)
{
    char v[16] = "";
    unsigned major = 0, minor = 0;
    ssize_t n = pread(fd, v, sizeof v - 1,
                      tag + (off_t)strlen(exe_tags[TAG_TENGINE]));
    if (n <= 0 || sscanf(v, "%3u.%3u", &major, &minor) != 2)
        return 1;
    return (int)(major * 1000 + minor);
}

/* Opens the executable and finds its tags; -1 when it cannot be read,
 * said when `say`. */
static int scan_exe(struct ctx *c, off_t found[N_TAGS], bool say)
{
    struct stat st;
    int fd = c->exe ? open(c->exe, O_RDONLY | O_CLOEXEC | O_NOCTTY |
                                       O_NONBLOCK)
                    : -1;
    c->scanned = true;
    if (fd < 0) {
        if (say)
            fail(c, "the executable cannot be read for its compiled-in "
                    "paths");
        return -1;
    }
    if (ma_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        st.st_size > MA_NGX_MAX_EXE_BYTES) {
        if (say)
            fail(c, "%s: not a regular file within %ld bytes", c->exe,
                 MA_NGX_MAX_EXE_BYTES);
        close(fd);
        return -1;
    }
    found[TAG_CONFIGURE] = find_configure(fd, st.st_size);
    find_forks(fd, found[TAG_CONFIGURE], found);
    c->angie = found[TAG_ANGIE] >= 0;
    c->tengine = found[TAG_TENGINE] >= 0
                     ? tengine_version(fd, found[TAG_TENGINE])
                     : 0;
    return fd;
}

/* One word of the configure arguments, as auto/options quotes it: a value
 * with spaces is in single quotes. Returns the end of the word. */
static const char *configure_word(const char *p, char *out, size_t len,
                                  bool *fits)
{
    size_t n = 0;
    bool q = false;
    *fits = true;
    for (; *p && (q || *p != ' '); p++) {
        if (*p == '\'') {
            q = !q;
            continue;
        }
        if (n + 1 < len)
            out[n++] = *p;
        else
            *fits = false;
    }
    out[n] = '\0';
    return p;
}

/* NGX_PREFIX and NGX_CONF_PATH as auto/options and auto/configure make
 * them from the arguments: defaults /usr/local/nginx and conf/nginx.conf
 * (Angie's configure: /usr/local/angie and conf/angie.conf; Tengine and
 * freenginx keep nginx's), an empty --prefix= for none (the working
 * directory). */
static bool configure_paths(struct ctx *c, const char *args, char *prefix,
                            char *conf)
{
    char word[PATH_MAX + 32];
    const char *value;
    bool fits;
    strcpy(prefix, c->angie ? "/usr/local/angie" : "/usr/local/nginx");
    strcpy(conf, c->angie ? "conf/angie.conf" : "conf/nginx.conf");
    for (const char *p = args; *p;) {
        if (*p == ' ') {
            p++;
            continue;
        }
        p = configure_word(p, word, sizeof word, &fits);
        if (strncmp(word, "--prefix=", 9) && strncmp(word, "--conf-path=", 12))
            continue;
        value = word + (word[2] == 'p' ? 9 : 12);
        if (!fits || strlen(value) + 2 > PATH_MAX)
            return fail(c, "compiled-in path too long");
        strcpy(word[2] == 'p' ? prefix : conf, value);
    }
    if (prefix[0])
        strcat(prefix, "/");
    return true;
}

/* Reads the configure arguments out of the executable. */
static bool compiled_paths(struct ctx *c, char *prefix, char *conf)
{
    off_t found[N_TAGS];
    char *args = NULL;
    ssize_t n = -1;
    bool good = false;
    int fd = scan_exe(c, found, true);
    if (fd < 0)
        return false;
    if (found[TAG_CONFIGURE] < 0)
        fail(c, "%s: no \"%s\" string", c->exe, exe_tags[TAG_CONFIGURE]);
    else if (!(args = malloc(CONFIGURE_MAX + 1)))
        fail(c, "out of memory");
    else if ((n = pread(fd, args, CONFIGURE_MAX,
                        found[TAG_CONFIGURE] +
                            (off_t)strlen(exe_tags[TAG_CONFIGURE]))) < 0)
        fail(c, "%s: read failed", c->exe);
    close(fd);
    if (n >= 0) {
        char *end;
        args[n] = '\0';
        end = strchr(args, '\n');
        if (!end || (args[0] != '\n' && args[0] != ' '))
            fail(c, "%s: configure arguments not understood", c->exe);
        else {
            *end = '\0';
            good = configure_paths(c, args, prefix, conf);
        }
    }
    free(args);
    return good;
}

/* ngx_process_options: the prefix, the configuration file's full name,
 * and the conf prefix that includes are relative to (the directory of
 * that file). */
static bool locate_conf(struct ctx *c, const struct options *o)
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

/* "auto" is nginx's rule in freenginx, Angie, and Tengine since 2.3
 * (ngx_get_cpu_affinity is the same in each). Tengine before 2.3 had its
 * own, from the last CPU down; only the executable tells, and one that
 * cannot be read is taken for nginx. */
static bool old_tengine_auto(struct ctx *c)
{
    off_t found[N_TAGS];
    if (!c->automatic)
        return false;
    if (!c->scanned) {
        int fd = scan_exe(c, found, false);
        if (fd >= 0)
            close(fd);
    }
    return c->tengine && c->tengine < 2003;
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
