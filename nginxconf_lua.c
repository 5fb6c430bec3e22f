/* libmasteraff: OpenResty's Lua blocks in nginx's configuration, as the
 * Lua module (lua-nginx-module) reads them: ngx_http_lua_conf_lua_block_parse
 * and ngx_http_lua_conf_read_lua_token of src/ngx_http_lua_directive.c,
 * over ngx_http_lua_lex of src/ngx_http_lua_lex.c.
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
#define _GNU_SOURCE
#include "nginxconf_private.h"

#include <stdint.h>
#include <string.h>

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
bool lua_block(struct ctx *c, struct lexer *lx)
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

bool is_lua_block(const struct directive *d)
{
    static const char suffix[] = "_by_lua_block";
    size_t n = d->len[0], s = sizeof suffix - 1;
    return n > s && strcmp(d->w[0] + n - s, suffix) == 0;
}
