/* A minimal TAP producer for the C unit tests (run by prove). */
#ifndef MASTERAFF_TAP_H
#define MASTERAFF_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 2, 3))) static int ok(int cond, const char *fmt,
                                                    ...)
{
    va_list ap;
    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond)
        tap_failed++;
    return cond;
}

__attribute__((format(printf, 3, 4))) static int is_str(const char *got,
                                                        const char *want,
                                                        const char *fmt, ...)
{
    va_list ap;
    int cond = got && want && strcmp(got, want) == 0;
    printf("%sok %d - ", cond ? "" : "not ", ++tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (!cond) {
        printf("#   got:  '%s'\n#   want: '%s'\n", got ? got : "(null)",
               want ? want : "(null)");
        tap_failed++;
    }
    return cond;
}

static int done_testing(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif
