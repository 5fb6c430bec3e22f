/* nonuma PROGRAM [ARG...]: runs PROGRAM where the NUMA system calls fail
 * with EPERM, as they do in a Docker container under the default seccomp
 * profile without CAP_SYS_NICE. There, mbind, get_mempolicy,
 * set_mempolicy and set_mempolicy_home_node are allowed only with
 * CAP_SYS_NICE, and move_pages and migrate_pages not at all; the profile's
 * default action answers EPERM. This does the same for those six calls
 * and allows everything else.
 *
 * The filter is a classic BPF program installed with seccomp(2)
 * (SECCOMP_SET_MODE_FILTER) after prctl(PR_SET_NO_NEW_PRIVS), so that it
 * needs no privilege; it is inherited across fork and execve, so nginx's
 * master and workers all run under it. It checks the audit architecture
 * first: a call made under another ABI than the one this was built for
 * (i386 under x86_64, say) kills the process rather than slip past with
 * other system call numbers. x32 calls share x86_64's audit architecture
 * and are refused by their own numbers.
 *
 * Built for x86_64 and aarch64 (test/vm.t, test/vm-arm64.t build it for
 * the guests); the numbers come from the target's <sys/syscall.h>. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "nonuma: x86_64 and aarch64 only"
#endif

#ifndef SECCOMP_RET_KILL_PROCESS
#define SECCOMP_RET_KILL_PROCESS 0x80000000U
#endif
/* Linux 5.17; the same number on every architecture. */
#ifndef SYS_set_mempolicy_home_node
#define SYS_set_mempolicy_home_node 450
#endif

static const unsigned int refused[] = {
    SYS_mbind,         SYS_get_mempolicy, SYS_set_mempolicy,
    SYS_migrate_pages, SYS_move_pages,    SYS_set_mempolicy_home_node,
};
#define N_REFUSED (sizeof refused / sizeof refused[0])

#ifdef __x86_64__
#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000U
#endif
#define N_NUMBERS (2 * N_REFUSED) /* and their x32 twins */
#else
#define N_NUMBERS N_REFUSED
#endif

int main(int argc, char **argv)
{
    /* load arch; kill unless native; load nr; one test per number;
     * allow; refuse. */
    struct sock_filter prog[4 + N_NUMBERS + 2];
    size_t n = 0, i;

    if (argc < 2) {
        fprintf(stderr, "usage: nonuma PROGRAM [ARG...]\n");
        return 2;
    }
    prog[n++] = (struct sock_filter)BPF_STMT(
        BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
    prog[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
                                             NATIVE_ARCH, 1, 0);
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                             SECCOMP_RET_KILL_PROCESS);
    prog[n++] = (struct sock_filter)BPF_STMT(
        BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    for (i = 0; i < N_NUMBERS; i++) {
        unsigned int nr = refused[i % N_REFUSED];
#ifdef __x86_64__
        if (i >= N_REFUSED)
            nr |= __X32_SYSCALL_BIT;
#endif
        /* A match jumps over the remaining tests and the allow. */
        prog[n++] = (struct sock_filter)BPF_JUMP(
            BPF_JMP | BPF_JEQ | BPF_K, nr,
            (unsigned char)(N_NUMBERS - 1 - i + 1), 0);
    }
    prog[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K,
                                             SECCOMP_RET_ALLOW);
    prog[n++] = (struct sock_filter)BPF_STMT(
        BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA));

    struct sock_fprog fprog = {.len = (unsigned short)n, .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        fprintf(stderr, "nonuma: PR_SET_NO_NEW_PRIVS: %s\n", strerror(errno));
        return 126;
    }
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0) {
        fprintf(stderr, "nonuma: seccomp: %s\n", strerror(errno));
        return 126;
    }
    execvp(argv[1], argv + 1);
    fprintf(stderr, "nonuma: %s: %s\n", argv[1], strerror(errno));
    return 127;
}
