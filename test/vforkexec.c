/* vforkexec LIB execve|execvp: while another thread is inside
 * dlopen(LIB), whose constructor blocks (test/blockinit.c, for 10 s at
 * most), the main thread vforks and its child calls setsid and execs true.
 * A preloaded library that looked a symbol up in that child would wait
 * for the dynamic linker's lock, and the vfork with it. Exits 0 when the
 * exec came through at once and true exited 0. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int ready[2], go[2];

static void *load(void *lib)
{
    void *h = dlopen(lib, RTLD_NOW);
    char c = 0;
    if (!h) {
        fprintf(stderr, "vforkexec: %s\n", dlerror());
        if (write(ready[1], &c, 1) != 1)
            abort();
    }
    return h;
}

static void set_fd(const char *name, int fd)
{
    char v[16];
    snprintf(v, sizeof v, "%d", fd);
    setenv(name, v, 1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The child of vfork: setsid, then the exec asked for. */
static void exec_true(const char *call)
{
    char *const args[] = {"true", NULL};
    setsid();
    if (strcmp(call, "execvp") == 0)
        execvp("true", args);
    else
        execve("/bin/true", args, environ);
    _exit(127);
}

int main(int argc, char **argv)
{
    int status = -1;
    double took;
    void *h;
    pthread_t t;
    pid_t pid;
    char c = 0;

    if (argc != 3 || pipe(ready) < 0 || pipe(go) < 0)
        return 2;
    set_fd("BLOCKINIT_READY", ready[1]);
    set_fd("BLOCKINIT_GO", go[0]);
    if (pthread_create(&t, NULL, load, argv[1]) != 0 ||
        read(ready[0], &c, 1) != 1)
        return 2;
    /* The other thread is now in the library's constructor, with the
     * dynamic linker's lock held (unless dlopen failed: checked below). */
    took = now_s();
    pid = vfork();
    if (pid == 0)
        exec_true(argv[2]);
    took = now_s() - took;
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (write(go[1], &c, 1) != 1 || pthread_join(t, &h) != 0 || !h)
        return 2;
    printf("the vfork child's %s came through in %.3f s, status %d\n",
           argv[2], took, status);
    return status == 0 && took < 5 ? 0 : 1;
}
