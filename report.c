/* libmasteraff: the report's wire format (see report.h). */
#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <string.h>

void ma_report_encode(const struct ma_report *r, unsigned char *buf)
{
    uint32_t magic = MA_REPORT_MAGIC;
    uint16_t version = MA_REPORT_VERSION, size = sizeof(cpu_set_t);
    memcpy(buf, &magic, 4);
    memcpy(buf + 4, &version, 2);
    memcpy(buf + 6, &size, 2);
    memcpy(buf + 8, &r->sent_ns, 8);
    memcpy(buf + 16, &r->mask, sizeof(cpu_set_t));
}

int ma_report_decode(const void *buf, size_t len, struct ma_report *out)
{
    const unsigned char *p = buf;
    uint32_t magic;
    uint16_t version, size;
    struct ma_report r;

    if (!buf || len != MA_REPORT_SIZE)
        goto bad;
    memcpy(&magic, p, 4);
    memcpy(&version, p + 4, 2);
    memcpy(&size, p + 6, 2);
    if (magic != MA_REPORT_MAGIC || version != MA_REPORT_VERSION ||
        size != sizeof(cpu_set_t))
        goto bad;
    memcpy(&r.sent_ns, p + 8, 8);
    memcpy(&r.mask, p + 16, sizeof(cpu_set_t));
    if (CPU_COUNT(&r.mask) == 0)
        goto bad;
    *out = r;
    return 0;
bad:
    errno = EBADMSG;
    return -1;
}

