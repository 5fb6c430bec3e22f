#!/usr/bin/env bash
# Never break the program, round two: what real masters do (unmap a zone
# while the library moves its pages, fork from two threads at once, vfork,
# close every descriptor or only the library's set, keep large
# thread-local buffers) leaves them running and followed as they should be. test/robust.c says what each
# mode does.
#
# Needs the helper program: make test/robust
. "$(dirname "$0")/lib.sh"

need_programs robust
make_twopkg

robust() { # robust MODE [VAR=VALUE...]: with the library; stderr in $T/err
    local mode=$1
    shift
    env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS=robust MASTERAFF_SYSFS="$T/sys" \
        "$@" "$SRCDIR/test/robust" "$mode" 2>"$T/err"
}
err_lines() { grep 'masteraff: ' "$T/err"; }
no_line_above_warn() {
    ! err_lines | grep -qE '\[(error|crit|alert|emerg)\]'
    ok $? "$1: no line above warn"
}

# The crash needs pages to move: CPUs 0 and 1 are two CPUs of node 0.
relay "unmap" robust unmap MASTERAFF_SCOPE=cpu
is "$(err_lines | grep -c 'following worker')" "$(err_lines | grep -c 'moved [0-9]* pages')" \
    "unmap: each follow moved the master's pages (or said why not)"

relay "forkrace" robust forkrace
no_line_above_warn forkrace

relay "follow, 96 KiB of static TLS" robust follow
no_line_above_warn follow

relay "vforkexec" robust vforkexec
relay "vforksetsid" robust vforksetsid

relay "closefrom" robust closefrom
is "$(err_lines | grep -c "\[warn\] .*masteraff: the program closed the library's descriptors: .*; process [0-9]* will not follow its children")" 1 \
    "closefrom: one warn line says the library stops following"
err_lines | sed "s/^/# /"

relay "ownepoll" robust ownepoll
is "$(err_lines | grep -c "\[warn\] .*masteraff: the program closed the library's descriptors: .*; process [0-9]* will not follow its children")" 1 \
    "ownepoll: one warn line says the library stops following"

relay "ownset" robust ownset
is "$(err_lines | grep -c "\[warn\] .*masteraff: the program closed the library's descriptors: .*; process [0-9]* will not follow its children")" 1 \
    "ownset: one warn line says the library stops following"

relay "ownmask" robust ownmask
is "$(err_lines | grep -c "\[notice\] .*masteraff: master [0-9]* is on CPUs 0, not the CPUs 1 it was given: its mask was set by the program or an administrator")" 1 \
    "ownmask: one line says the master's own mask is taken for its own"

relay "policy" robust policy

relay "touchup" robust touchup MASTERAFF_LOG=info
is "$(err_lines | grep -c 'after its later forks')" 2 \
    "touchup: the pages move again after the follow, and after the later fork with no other event"

# A master reads back the mask it started with, as without the library.
relay "tengine" robust tengine

done_testing
