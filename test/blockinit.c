/* A library whose constructor blocks: dlopen() of it holds the dynamic
 * linker's lock until BLOCKINIT_GO (a descriptor) is readable, or for 10 s
 * at most, so that a test that fails still ends. It says it has started by
 * writing to BLOCKINIT_READY. See test/vforkexec.c. */
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void block(void)
{
    const char *ready = getenv("BLOCKINIT_READY"), *go = getenv("BLOCKINIT_GO");
    struct pollfd p = {.events = POLLIN};
    char c = 0;
    if (!ready || !go)
        return;
    p.fd = atoi(go);
    if (write(atoi(ready), &c, 1) == 1)
        poll(&p, 1, 10 * 1000);
}
