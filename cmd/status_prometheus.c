/* masteraff status --prometheus, --textfile: the status in Prometheus' text
 * exposition format, one sample per fact, for node_exporter's textfile
 * collector. Names start with masteraff_, sizes are in bytes, the
 * library's settings are the labels of masteraff_library_info. A master
 * that cannot be read is said as well (masteraff_up 0, verdict unknown):
 * a fleet sees a dead nginx instead of a file that stopped changing. */
#define _GNU_SOURCE
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TEXTFILE_NAME "masteraff.prom"

/* The textfile written, or NULL: the exposition goes to stdout. */
static const char *textfile;

static void metric(FILE *f, const char *name, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

static void label_ascii(FILE *f, int c)
{
    if (c == '"' || c == '\\')
        fprintf(f, "\\%c", c);
    else if (c == '\n')
        fputs("\\n", f);
    else
        putc(c, f);
}

/* A label's value: backslash, double quote and newline escaped, as the
 * format wants; bytes that are not UTF-8 become U+FFFD. */
static void label_value(FILE *f, const char *text)
{
    putc('"', f);
    put_utf8(f, text, label_ascii, "\xef\xbf\xbd");
    putc('"', f);
}

static void verdict_samples(FILE *f, enum level level)
{
    metric(f, "masteraff_verdict",
           "1 for masteraff status's verdict, 0 for the other three");
    for (enum level l = LEVEL_OK; l <= LEVEL_UNKNOWN; l++)
        fprintf(f, "masteraff_verdict{verdict=\"%s\"} %d\n", level_name(l),
                l == level);
    metric(f, "masteraff_verdict_code",
           "The verdict as a monitoring plugin's exit status: 0 ok, "
           "1 warning, 2 critical, 3 unknown");
    fprintf(f, "masteraff_verdict_code %d\n", (int)level);
}

static void up_sample(FILE *f, bool up)
{
    metric(f, "masteraff_up",
           "1 when the master was found and read, 0 when not (not running, "
           "no pid file, not a master)");
    fprintf(f, "masteraff_up %d\n", up);
}

static void library_samples(FILE *f, const struct library *lib)
{
    if (!lib->maps_error) {
        metric(f, "masteraff_library_loaded",
               "1 when libmasteraff is mapped in the master");
        fprintf(f, "masteraff_library_loaded %d\n", lib->path != NULL);
    }
    metric(f, "masteraff_library_info",
           "The library's path in the master and the settings it read "
           "there (MASTERAFF_* in lower case, without the prefix)");
    fputs("masteraff_library_info{path=", f);
    label_value(f, lib->path ? lib->path : "");
    fputs(",settings_from=", f);
    label_value(f, lib->settings_from ? lib->settings_from : "defaults");
    for (int v = 0; v < N_VARS; v++) {
        fputc(',', f);
        for (const char *c = var_names[v] + strlen("MASTERAFF_"); *c; c++)
            fputc(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c, f);
        fputc('=', f);
        label_value(f, setting(lib, v));
    }
    fputs("} 1\n", f);
}

static void process_samples(FILE *f, const struct table *t,
                            const struct verdict *v)
{
    size_t workers = 0, pinned = 0;
    for (size_t i = 1; i < t->n; i++) {
        workers += t->procs[i].worker;
        pinned += t->procs[i].pinned;
    }
    metric(f, "masteraff_master_pid", "The master's process id");
    fprintf(f, "masteraff_master_pid %d\n", (int)t->procs[0].pid);
    metric(f, "masteraff_workers", "The master's worker processes");
    fprintf(f, "masteraff_workers %zu\n", workers);
    metric(f, "masteraff_workers_pinned",
           "Workers allowed fewer CPUs than the master's original mask "
           "(worker_cpu_affinity)");
    fprintf(f, "masteraff_workers_pinned %zu\n", pinned);
    if (v->with_worker0 < 0)
        return; /* no worker 0 that pinned: nothing to be with */
    metric(f, "masteraff_master_with_worker0",
           "1 when the master's CPUs lie within the scope units of worker "
           "0's CPUs");
    fprintf(f, "masteraff_master_with_worker0 %d\n", v->with_worker0);
}

static void memory_samples(FILE *f, const struct proc *master,
                           const struct verdict *v)
{
    static const char *const kinds[] = {"private", "shared"};
    const struct ma_node_pages *pages[] = {&master->pages->priv,
                                           &master->pages->shared};
    unsigned long page_size = (unsigned long)sysconf(_SC_PAGESIZE);

    metric(f, "masteraff_master_memory_counted",
           "1 when the master's resident pages of this kind could be "
           "counted per node (see masteraff status for why not)");
    for (int k = 0; k < 2; k++)
        fprintf(f, "masteraff_master_memory_counted{kind=\"%s\"} %d\n",
                kinds[k], pages[k]->error == 0);
    metric(f, "masteraff_master_memory_bytes",
           "The master's resident memory per NUMA node: private, and "
           "shared (nginx's zones)");
    for (int k = 0; k < 2; k++)
        for (int n = 0; !pages[k]->error && n < MA_PAGES_MAX_NODES; n++)
            if (pages[k]->node[n])
                fprintf(f,
                        "masteraff_master_memory_bytes{kind=\"%s\",node="
                        "\"%d\"} %lu\n",
                        kinds[k], n, pages[k]->node[n] * page_size);
    if (v->pages_total == 0)
        return;
    metric(f, "masteraff_master_memory_worker0_node_ratio",
           "The share of the master's resident pages on worker 0's node");
    fprintf(f, "masteraff_master_memory_worker0_node_ratio %.4f\n",
            (double)v->pages_on_worker0_node / (double)v->pages_total);
}

/* Writes text to path through a temporary file beside it, renamed over
 * it: a reader sees the old file or the new one, never a part. The
 * temporary name starts with a dot and does not end in .prom, so the
 * collector never reads it. */
static int write_atomically(const char *path, const char *text, size_t len)
{
    const char *slash = strrchr(path, '/');
    char *tmp = slash ? xasprintf("%.*s/.%s.XXXXXX", (int)(slash - path),
                                  path, slash + 1)
                      : xasprintf(".%s.XXXXXX", path);
    int fd = mkostemp(tmp, O_CLOEXEC), err = 0;
    size_t done = 0;

    if (fd < 0) {
        err = errno;
        free(tmp);
        return err;
    }
    while (!err && done < len) {
        ssize_t n = write(fd, text + done, len - done);
        if (n < 0 && errno != EINTR)
            err = errno;
        done += n > 0 ? (size_t)n : 0;
    }
    /* mkostemp makes it 0600: the collector runs as another user. */
    if (!err && (fchmod(fd, 0644) < 0 || fsync(fd) < 0))
        err = errno;
    if (close(fd) < 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) < 0)
        err = errno;
    if (err)
        unlink(tmp);
    free(tmp);
    return err;
}

/* The exposition, to stdout or the textfile. */
static void emit(char *text, size_t len)
{
    int err = 0;
    if (textfile)
        err = write_atomically(textfile, text, len);
    else
        fwrite(text, 1, len, stdout);
    free(text);
    if (err) {
        failure_report = NULL;
        fail(EXIT_RUNTIME, "cannot write %s: %s", shortened(textfile),
             strerror(err));
    }
}

/* What a failure leaves: the master is down, the reason a comment (its
 * values are shortened already, with no line break). */
static void expose_failure(const char *message)
{
    char *text;
    size_t len;
    FILE *f = xopen_memstream(&text, &len);
    fprintf(f, "# %s: %s\n", me, message);
    up_sample(f, false);
    verdict_samples(f, LEVEL_UNKNOWN);
    xclose_memstream(f);
    emit(text, len);
}

void print_prometheus(const struct table *t, const struct library *lib,
                      const struct verdict *v)
{
    char *text;
    size_t len;
    FILE *f = xopen_memstream(&text, &len);
    up_sample(f, true);
    verdict_samples(f, v->level);
    library_samples(f, lib);
    process_samples(f, t, v);
    memory_samples(f, &t->procs[0], v);
    xclose_memstream(f);
    emit(text, len);
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

static bool is_directory(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

void prometheus_output(bool to_file, const char *path)
{
    failure_report = expose_failure;
    if (!to_file)
        return;
    if (!path)
        textfile = DEFAULT_TEXTFILE_DIR "/" TEXTFILE_NAME;
    else if (!*path)
        fail(EXIT_USAGE, "--textfile= names no directory or file");
    else if (is_directory(path))
        textfile = xasprintf("%s/" TEXTFILE_NAME, path);
    else if (ends_with(path, ".prom"))
        textfile = path;
    else
        fail(EXIT_USAGE,
             "--textfile=%s: not a directory, nor a file name ending in "
             ".prom (the only files node_exporter's textfile collector "
             "reads)",
             shortened(path));
}
