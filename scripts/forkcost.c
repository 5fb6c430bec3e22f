/* forkcost N: forks N children one at a time, as a pre-fork master forks
 * its workers (they live until all are forked), and prints the median time
 * of fork() in the parent, in microseconds. Run with and without the
 * library preloaded to see what it adds to a fork. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    double *t = calloc((size_t)(n > 0 ? n : 1), sizeof *t);
    pid_t *kids = calloc((size_t)(n > 0 ? n : 1), sizeof *kids);
    if (n <= 0 || !t || !kids)
        return 2;
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        kids[i] = fork();
        if (kids[i] == 0) {
            pause();
            _exit(0);
        }
        t[i] = now_us() - t0;
        if (kids[i] < 0)
            return 1;
    }
    for (int i = 0; i < n; i++) {
        kill(kids[i], SIGTERM);
        waitpid(kids[i], NULL, 0);
    }
    qsort(t, (size_t)n, sizeof *t, by_value);
    printf("%.1f\n", t[n / 2]);
    free(t);
    free(kids);
    return 0;
}
