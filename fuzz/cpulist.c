/* libFuzzer target: ma_cpulist_parse on arbitrary text.
 *
 * What parses must format, and the formatted list must parse back to the
 * same set and format to the same text (the canonical form). What does not
 * parse must leave *out alone and say EINVAL or ERANGE. */
#define _GNU_SOURCE
#include "affinity.h"
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    /* An exact-size heap copy, so ASan sees any read past the NUL. */
    char *s = malloc(size + 1);
    cpu_set_t set, again, sentinel;
    char text[8192], text2[8192], tiny[8];
    int rc, n;

    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    memset(&sentinel, 0xa5, sizeof sentinel);
    set = sentinel;
    errno = 0;
    rc = ma_cpulist_parse(s, &set);
    if (rc < 0) {
        CHECK(rc == -1);
        CHECK(errno == EINVAL || errno == ERANGE);
        CHECK(memcmp(&set, &sentinel, sizeof set) == 0);
        free(s);
        return 0;
    }
    CHECK(rc == 0);
    CHECK(CPU_COUNT(&set) > 0);
    CHECK(ma_cpuset_first(&set) >= 0);

    /* 1024 CPUs written one by one take under 5,000 characters. */
    n = ma_cpulist_format(&set, text, sizeof text);
    CHECK(n > 0 && (size_t)n == strlen(text));
    CHECK(ma_cpulist_parse(text, &again) == 0);
    CHECK(CPU_EQUAL(&set, &again));
    CHECK(ma_cpulist_format(&again, text2, sizeof text2) == n);
    CHECK(strcmp(text, text2) == 0);

    /* The same list, terminated by a newline as sysfs writes it. */
    text[n] = '\n';
    text[n + 1] = '\0';
    CHECK(ma_cpulist_parse(text, &again) == 0 && CPU_EQUAL(&set, &again));

    /* Too small a buffer: ENOSPC and a terminated prefix, never overflow. */
    errno = 0;
    rc = ma_cpulist_format(&set, tiny, sizeof tiny);
    if (n < (int)sizeof tiny) {
        CHECK(rc == n);
    } else {
        CHECK(rc == -1 && errno == ENOSPC);
        CHECK(strlen(tiny) < sizeof tiny);
        CHECK(strncmp(tiny, text, strlen(tiny)) == 0);
    }
    free(s);
    return 0;
}
