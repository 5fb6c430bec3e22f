/* cpulists in the kernel's syntax, and the reports children send. */
#define _GNU_SOURCE
#include "affinity.h"
#include "report.h"
#include "test/tap.h"

#include <errno.h>

/* The input as a test name can show it: TAP names are one line. */
static const char *shown(const char *in)
{
    static char buf[256];
    size_t n = 0;
    for (; *in && n + 3 < sizeof buf; in++) {
        if (*in == '\n') {
            buf[n++] = '\\';
            buf[n++] = 'n';
        } else {
            buf[n++] = *in;
        }
    }
    buf[n] = '\0';
    return buf;
}

static void round_trip(const char *in, const char *want)
{
    cpu_set_t s;
    char buf[8192];
    ok(ma_cpulist_parse(in, &s) == 0, "parse '%s'", shown(in));
    ma_cpulist_format(&s, buf, sizeof buf);
    is_str(buf, want, "'%s' formats as '%s'", shown(in), want);
}

static void rejected(const char *in, int want_errno)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(7, &s);
    errno = 0;
    ok(ma_cpulist_parse(in, &s) == -1 && errno == want_errno,
       "'%s' is rejected with %s", shown(in), strerror(want_errno));
    ok(CPU_COUNT(&s) == 1 && CPU_ISSET(7, &s), "'%s' leaves the output alone",
       shown(in));
}

static void test_parse(void)
{
    round_trip("0", "0");
    round_trip("0-3,8,10-11", "0-3,8,10-11");
    round_trip("0-23\n", "0-23");
    round_trip("3,51", "3,51");
    round_trip("5,1,2,3", "1-3,5");
    round_trip("0-1023", "0-1023");
    round_trip("1023", "1023");
    round_trip("0,0,0-1", "0-1");
    rejected("", EINVAL);
    rejected("\n", EINVAL);
    rejected("0-", EINVAL);
    rejected("-1", EINVAL);
    rejected("5-3", EINVAL);
    rejected("x", EINVAL);
    rejected("1,,2", EINVAL);
    rejected("1,", EINVAL);
    rejected(" 1", EINVAL);
    rejected("1 ", EINVAL);
    rejected("1\n\n", EINVAL);
    rejected("0-3:2", EINVAL);
    rejected("1024", ERANGE);
    rejected("0-1024", ERANGE);
    rejected("99999999999999999999999", ERANGE);
    rejected("18446744073709551617", ERANGE);
    errno = 0;
    ok(ma_cpulist_parse(NULL, &(cpu_set_t){0}) == -1 && errno == EINVAL,
       "NULL is rejected");
}

static void test_format(void)
{
    cpu_set_t s;
    char buf[8];
    CPU_ZERO(&s);
    ma_cpulist_format(&s, buf, sizeof buf);
    is_str(buf, "none", "an empty set formats as 'none'");
    for (int c = 0; c < 20; c += 2)
        CPU_SET(c, &s);
    errno = 0;
    ok(ma_cpulist_format(&s, buf, sizeof buf) == -1 && errno == ENOSPC,
       "a list too long for the buffer is ENOSPC");
    ok(strlen(buf) < sizeof buf, "and the buffer stays terminated");
    ok(ma_cpuset_first(&s) == 0, "first CPU of 0,2,...");
    CPU_ZERO(&s);
    ok(ma_cpuset_first(&s) == -1, "first CPU of nothing is -1");
}

static void test_reports(void)
{
    struct ma_report r = {.sent_ns = 123456789}, back;
    unsigned char buf[MA_REPORT_SIZE + 8];
    CPU_ZERO(&r.mask);
    CPU_SET(5, &r.mask);
    ma_report_encode(&r, buf);
    ok(ma_report_decode(buf, MA_REPORT_SIZE, &back) == 0 &&
           back.sent_ns == r.sent_ns && CPU_EQUAL(&back.mask, &r.mask),
       "a report decodes to what was encoded");
    errno = 0;
    ok(ma_report_decode(buf, MA_REPORT_SIZE - 1, &back) == -1 &&
           errno == EBADMSG,
       "a truncated report is EBADMSG");
    ok(ma_report_decode(buf, MA_REPORT_SIZE + 1, &back) == -1,
       "an oversized report is refused");
    buf[0] ^= 1;
    ok(ma_report_decode(buf, MA_REPORT_SIZE, &back) == -1,
       "a report with a bad magic is refused");
    buf[0] ^= 1;
    buf[4] = 9;
    ok(ma_report_decode(buf, MA_REPORT_SIZE, &back) == -1,
       "a report of another version is refused");
    CPU_ZERO(&r.mask);
    ma_report_encode(&r, buf);
    ok(ma_report_decode(buf, MA_REPORT_SIZE, &back) == -1,
       "a report of an empty mask is refused");
    ok(ma_report_decode(NULL, 0, &back) == -1, "nothing is refused");
}

static void test_scopes(void)
{
    enum ma_scope s;
    const char *names[] = {"package", "die", "node", "llc", "cluster",
                           "core", "cpu", "worker"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        ok(ma_scope_parse(names[i], &s) == 0 &&
               strcmp(ma_scope_name(s), names[i]) == 0,
           "scope '%s' parses and names itself", names[i]);
    ok(ma_scope_parse("chip", &s) == -1, "scope 'chip' is refused");
    ok(ma_scope_parse("", &s) == -1, "scope '' is refused");
    ok(ma_scope_parse("Package", &s) == -1, "scopes are lower case");
}

int main(void)
{
    test_parse();
    test_format();
    test_reports();
    test_scopes();
    return done_testing();
}
