/* libmasteraff: the report a child sends its parent, down the channel
 * it inherited, when it pins itself; written by the child and read by the
 * master (channel.c). Pure: no process state. */
#ifndef MASTERAFF_REPORT_H
#define MASTERAFF_REPORT_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#define MA_REPORT_MAGIC 0x4646414du /* "MAFF" */
#define MA_REPORT_VERSION 1
#define MA_REPORT_SIZE (16 + sizeof(cpu_set_t))

struct ma_report {
    uint64_t sent_ns; /* CLOCK_MONOTONIC when the child had pinned */
    cpu_set_t mask;   /* the child's mask after its pin */
};

/* Writes r into buf (MA_REPORT_SIZE bytes). */
void ma_report_encode(const struct ma_report *r, unsigned char *buf);

/* Decodes len bytes from an untrusted child. Returns 0, or -1 with errno
 * EBADMSG for anything but a well-formed report of a non-empty mask. */
int ma_report_decode(const void *buf, size_t len, struct ma_report *out);

#endif
