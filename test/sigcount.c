/* A test-only preload, loaded before the library: writes a line to the
 * file SIGCOUNT_FILE names at each return of the program's sigsuspend,
 * "own" when a signal handler of the program's ran during it, "stray"
 * when none did: a wake-up the program never asked for. It wraps each
 * handler the program installs with sigaction so as to count its runs.
 * The name is read at load: nginx gives its processes an environment of
 * its own. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int sigaction_fn(int, const struct sigaction *, struct sigaction *);
typedef int sigsuspend_fn(const sigset_t *);

static int out = -1;
static volatile sig_atomic_t handled;
static struct sigaction programs[_NSIG];

__attribute__((constructor)) static void open_count(void)
{
    const char *file = getenv("SIGCOUNT_FILE");
    if (file)
        out = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

static void counted(int sig, siginfo_t *si, void *uc)
{
    handled++;
    if (programs[sig].sa_flags & SA_SIGINFO)
        programs[sig].sa_sigaction(sig, si, uc);
    else
        programs[sig].sa_handler(sig);
}

static int is_handler(const struct sigaction *act)
{
    return (act->sa_flags & SA_SIGINFO) ||
           (act->sa_handler != SIG_DFL && act->sa_handler != SIG_IGN);
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    sigaction_fn *next = (sigaction_fn *)dlsym(RTLD_NEXT, "sigaction");
    struct sigaction wrapped;
    if (!act || sig <= 0 || sig >= _NSIG || !is_handler(act))
        return next(sig, act, old);
    programs[sig] = *act;
    wrapped = *act;
    wrapped.sa_sigaction = counted;
    wrapped.sa_flags |= SA_SIGINFO;
    return next(sig, &wrapped, old);
}

int sigsuspend(const sigset_t *mask)
{
    sigsuspend_fn *next = (sigsuspend_fn *)dlsym(RTLD_NEXT, "sigsuspend");
    sig_atomic_t before = handled;
    int rc = next(mask), e = errno;
    if (out >= 0 && write(out, handled != before ? "own\n" : "stray\n",
                          handled != before ? 4 : 6) < 0)
        out = -1;
    errno = e;
    return rc;
}
