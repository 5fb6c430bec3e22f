/* vforkexec LIB execve|execvp: while another thread is inside
 * dlopen(LIB), whose constructor blocks (test/blockinit.c), the main
 * thread vforks and its child calls setsid and execs true. A preloaded
 * library that looked a symbol up in that child would wait for the dynamic
 * linker's lock, and the vfork with it. Exits 0 when the child's exec came
 * through and true exited 0; run it under timeout(1). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *load(void *lib)
{
    return dlopen(lib, RTLD_NOW);
}

static void set_fd(const char *name, int fd)
{
    char v[16];
    snprintf(v, sizeof v, "%d", fd);
    setenv(name, v, 1);
}

int main(int argc, char **argv)
{
    char *const args[] = {"true", NULL};
    int ready[2], go[2], status = -1;
    pthread_t t;
    pid_t pid;
    char c;

    if (argc != 3 || pipe(ready) < 0 || pipe(go) < 0)
        return 2;
    set_fd("BLOCKINIT_READY", ready[1]);
    set_fd("BLOCKINIT_GO", go[0]);
    if (pthread_create(&t, NULL, load, argv[1]) != 0 ||
        read(ready[0], &c, 1) != 1)
        return 2;
    /* The other thread is now in the library's constructor, with the
     * dynamic linker's lock held. */
    pid = vfork();
    if (pid == 0) {
        setsid();
        if (argv[2][4] == 'p')
            execvp("true", args);
        else
            execve("/bin/true", args, environ);
        _exit(127);
    }
    if (pid > 0)
        waitpid(pid, &status, 0);
    if (write(go[1], &c, 1) != 1 || pthread_join(t, NULL) != 0)
        return 2;
    printf("the vfork child's %s %s\n", argv[2],
           status == 0 ? "came through" : "failed");
    return status == 0 ? 0 : 1;
}
