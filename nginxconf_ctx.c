/* libmasteraff: what the parts of the configuration reader lean on, as
 * nginx's modules lean on src/core/ngx_conf_file.c: the reason a reading
 * stopped (ngx_conf_log_error's first word wins here), full names
 * (ngx_get_full_name) and nginx's read buffer (ngx_conf_read_token's
 * refill), which the Lua module's reader shares with nginx's. */
#define _GNU_SOURCE
#include "nginxconf_private.h"

#include <stdarg.h>
#include <stdio.h>

bool fail(struct ctx *c, const char *fmt, ...)
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

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

/* nginx's buffer, read on once the reading has reached its end: what is
 * kept from `keep` on moves to its start, and the rest of the buffer is
 * filled from the file. */
void refill(struct lexer *lx, size_t keep)
{
    lx->last = min_size(lx->size, keep + NGX_CONF_BUFFER);
}

/* Paths as ngx_get_full_name makes them: absolute, or after the prefix. */
bool full_name(struct ctx *c, const char *prefix, const char *name, char *out,
               size_t len)
{
    int n = snprintf(out, len, "%s%s", name[0] == '/' ? "" : prefix, name);
    if (n < 0 || (size_t)n >= len)
        return fail(c, "path too long: %.64s...", name);
    return true;
}
