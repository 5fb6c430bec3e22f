/* The fuzz targets' assertion: a failed check is a finding, so it aborts
 * (libFuzzer keeps the input) with the condition and the line. */
#ifndef MASTERAFF_FUZZ_CHECK_H
#define MASTERAFF_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(cond)                                                          \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "check failed: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                         \
        }                                                                    \
    } while (0)

#endif
