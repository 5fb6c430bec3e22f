/* libmasteraff: what nginx's executable says of itself, read from its
 * file: the configure arguments and the forks' version lines that
 * ngx_show_version_info (src/core/nginx.c) prints for "nginx -V", and the
 * compiled-in NGX_PREFIX and NGX_CONF_PATH that auto/options and
 * auto/configure make of those arguments (Angie's differ), and Tengine's
 * version, whose "worker_cpu_affinity auto" had its own rule before 2.3. */
#define _GNU_SOURCE
#include "internal.h"
#include "nginxconf_private.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
bool compiled_paths(struct ctx *c, char *prefix, char *conf)
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

/* "auto" is nginx's rule in freenginx, Angie, and Tengine since 2.3
 * (ngx_get_cpu_affinity is the same in each). Tengine before 2.3 had its
 * own, from the last CPU down; only the executable tells, and one that
 * cannot be read is taken for nginx. */
bool old_tengine_auto(struct ctx *c)
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
