/* A library whose constructor blocks: dlopen() of it holds the dynamic
 * linker's lock until BLOCKINIT_GO (a descriptor) can be read. It says it
 * has started by writing to BLOCKINIT_READY. See test/vforkexec.c. */
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void block(void)
{
    const char *ready = getenv("BLOCKINIT_READY"), *go = getenv("BLOCKINIT_GO");
    char c = 0;
    if (!ready || !go)
        return;
    if (write(atoi(ready), &c, 1) != 1 || read(atoi(go), &c, 1) != 1)
        return;
}
