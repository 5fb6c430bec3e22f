/* libFuzzer target: ma_ngx_predict on arbitrary configurations.
 *
 * The input is split at NUL bytes: the number of CPUs (the low bits of its
 * first byte; the high bit leaves out the fixed -p and -c), then a -g
 * parameter, the main configuration file, a second file it may include
 * (as b.conf, or with a glob) which also stands for the executable with
 * the compiled-in paths, both written into a private directory, and more
 * command-line words, one a line. Whatever they hold, the call returns, within the library's
 * bounds, with a terminated reason and file list, a non-empty mask only
 * when it places, errno and the descriptors as they were, and the same
 * answer a second time. */
#define _GNU_SOURCE
#include "nginxconf.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

/* The lowest free descriptor: a descriptor left open would take it. */
static int lowest_free_fd(void)
{
    int fd = dup(0);
    if (fd >= 0)
        close(fd);
    return fd;
}

static void write_file(const char *name, const unsigned char *data,
                       size_t size)
{
    char path[128];
    int fd;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, data, size) == (ssize_t)size);
    close(fd);
}

/* The next NUL-terminated part of the input, as a C string. */
static char *next_part(const unsigned char **p, const unsigned char *end,
                       size_t *len)
{
    const unsigned char *nul = memchr(*p, '\0', (size_t)(end - *p));
    size_t n = nul ? (size_t)(nul - *p) : (size_t)(end - *p);
    char *s = malloc(n + 1);
    CHECK(s);
    memcpy(s, *p, n);
    s[n] = '\0';
    *p += nul ? n + 1 : n;
    *len = n;
    return s;
}

static void remove_dir(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/nginx.conf", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/b.conf", dir);
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    const unsigned char *p = data, *end = data + size;
    struct ma_ngx_prediction out, again;
    char conf[128], exe[128], *params, *main_conf, *second, *words;
    size_t params_len, main_len, second_len, words_len;
    char *argv[16] = {"nginx", "-p", dir, "-c", "nginx.conf"};
    int argc = 5, fd;
    long ncpu;

    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/masteraff-fuzz-conf.XXXXXX");
        CHECK(mkdtemp(dir));
        atexit(remove_dir);
    }
    if (size == 0)
        return 0;
    ncpu = *p & 0x7f;
    if (*p++ & 0x80)
        argc = 1;
    params = next_part(&p, end, &params_len);
    main_conf = next_part(&p, end, &main_len);
    second = next_part(&p, end, &second_len);
    words = next_part(&p, end, &words_len);
    write_file("nginx.conf", (const unsigned char *)main_conf, main_len);
    write_file("b.conf", (const unsigned char *)second, second_len);
    if (params_len) {
        argv[argc++] = "-g";
        argv[argc++] = params;
    }
    for (char *w = words, *nl; words_len && argc < 15; w = nl + 1) {
        argv[argc++] = w;
        nl = strchr(w, '\n');
        if (!nl)
            break;
        *nl = '\0';
    }
    argv[argc] = NULL;
    snprintf(conf, sizeof conf, "%s/nginx.conf", dir);
    snprintf(exe, sizeof exe, "%s/b.conf", dir);

    fd = lowest_free_fd();
    errno = 1234;
    ma_ngx_predict(argc, argv, exe, ncpu, &out);
    CHECK(errno == 1234);
    CHECK(lowest_free_fd() == fd);
    CHECK(memchr(out.reason, '\0', sizeof out.reason));
    CHECK(memchr(out.files, '\0', sizeof out.files));
    CHECK(out.n_files <= MA_NGX_MAX_FILES);
    if (out.place)
        CHECK(CPU_COUNT(&out.worker0) > 0);
    else
        CHECK(CPU_COUNT(&out.worker0) == 0 && out.reason[0]);
    /* -g may include files, read before the main one; more words may
     * name another file. */
    if (out.n_files && !params_len && !words_len && argc == 5)
        CHECK(strncmp(out.files, conf, strlen(conf)) == 0);

    ma_ngx_predict(argc, argv, exe, ncpu, &again);
    CHECK(again.place == out.place);
    CHECK(CPU_EQUAL(&again.worker0, &out.worker0));
    CHECK(strcmp(again.reason, out.reason) == 0);

    free(params);
    free(main_conf);
    free(second);
    free(words);
    return 0;
}
