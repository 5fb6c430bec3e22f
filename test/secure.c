/* secure LIB: loads LIB with dlopen, which works in a secure-execution
 * process (set-user-ID, set-group-ID, file capabilities: AT_SECURE), where
 * the dynamic loader ignores an LD_PRELOAD path. The library's constructor
 * reads its configuration then; this program forks with the library's own
 * fork() (dlsym) and prints what the library did:
 *
 *     at_secure 0|1
 *     threads N        this process's threads after the fork: 1, as the
 *                      library adds none to a master
 *     sockets N        its AF_UNIX datagram sockets after the fork: 2 for
 *                      a master (its channel's two ends), 0 for none
 *     channel yes|no   such a socket in the child (the end it reports on)
 *
 * Run it with MASTERAFF_PROGRAMS=secure and the library must act, unless
 * AT_SECURE is set: then it must ignore every MASTERAFF_* variable. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"

static int threads(void)
{
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    int n = 0;
    if (!d)
        return -1;
    while ((de = readdir(d)))
        n += de->d_name[0] != '.';
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    void *lib;
    pid_t (*lib_fork)(void);
    pid_t pid;
    int status;

    if (argc != 2) {
        fprintf(stderr, "usage: %s LIBRARY\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("at_secure %lu\n", getauxval(AT_SECURE));
    if (!(lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL))) {
        fprintf(stderr, "secure: %s\n", dlerror());
        return 2;
    }
    if (!(lib_fork = (pid_t(*)(void))dlsym(lib, "fork"))) {
        fprintf(stderr, "secure: no fork in %s\n", argv[1]);
        return 2;
    }
    pid = lib_fork();
    if (pid < 0) {
        perror("secure: fork");
        return 2;
    }
    if (pid == 0)
        _exit(unix_dgrams() > 0 ? 10 : 0);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        fprintf(stderr, "secure: the child did not exit\n");
        return 2;
    }
    printf("threads %d\n", threads());
    printf("sockets %d\n", unix_dgrams());
    printf("channel %s\n", WEXITSTATUS(status) == 10 ? "yes" : "no");
    return 0;
}
