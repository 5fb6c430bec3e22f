/* libFuzzer target: ma_report_decode on what an untrusted child may send.
 *
 * Anything decodes or fails with EBADMSG, leaving *out alone. What decodes
 * is a non-empty mask, and encoding it gives back the very bytes received,
 * which decode again to the same report. */
#define _GNU_SOURCE
#include "report.h"
#include "check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    /* An exact-size heap copy, so ASan sees any read past the end. */
    unsigned char *buf = malloc(size ? size : 1);
    unsigned char out[MA_REPORT_SIZE];
    struct ma_report r, again, sentinel;
    int rc;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    memset(&sentinel, 0x5a, sizeof sentinel);
    r = sentinel;
    errno = 0;
    rc = ma_report_decode(buf, size, &r);
    if (rc < 0) {
        CHECK(rc == -1 && errno == EBADMSG);
        CHECK(memcmp(&r, &sentinel, sizeof r) == 0);
        free(buf);
        return 0;
    }
    CHECK(rc == 0);
    CHECK(size == MA_REPORT_SIZE);
    CHECK(CPU_COUNT(&r.mask) > 0);

    ma_report_encode(&r, out);
    CHECK(memcmp(out, buf, MA_REPORT_SIZE) == 0);
    CHECK(ma_report_decode(out, sizeof out, &again) == 0);
    CHECK(again.sent_ns == r.sent_ns);
    CHECK(CPU_EQUAL(&again.mask, &r.mask));

    /* One byte less or more is never a report. */
    CHECK(ma_report_decode(out, sizeof out - 1, &again) == -1);
    free(buf);
    return 0;
}
