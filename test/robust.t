#!/usr/bin/env bash
# Never break the program, round two: what real masters do (unmap a zone
# while the library moves its pages, fork from two threads at once, vfork,
# close every descriptor and take the library's numbers back for files or
# sockets of their own, set their own mask) leaves them running and
# followed as they should be. test/robust.c says what each mode does.
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

relay "vforkexec" robust vforkexec
relay "vforksetsid" robust vforksetsid

# One line says the library stops following, once, however the program
# next gives it the chance to look (its fork, its reap, its sleep).
closed_line() {
    is "$(err_lines | grep -c "\[warn\] .*masteraff: the program closed the library's channel: .*; process [0-9]* will not follow its children")" 1 \
        "$1: one warn line says the library stops following"
}

relay "closefrom" robust closefrom
closed_line closefrom

for how in fork reap sleep; do
    relay "ownsock-$how" robust "ownsock-$how"
    closed_line "ownsock-$how"
done

relay "ownmask" robust ownmask
is "$(err_lines | grep -c "\[notice\] .*masteraff: master [0-9]* is on CPUs 0, not the CPUs 1 it was given: its mask was set by the program or an administrator")" 1 \
    "ownmask: one line says the master's own mask is taken for its own"

relay "policy" robust policy

# touchup: the master sleeps in sigsuspend, and nothing but SIGUSR1 wakes
# it; each SIGUSR1 goes once the line it waits for is there.
touchups() { err_lines | grep -c 'after its later forks'; }
robust touchup MASTERAFF_LOG=info >"$T/touchup.out" &
tp=$!
bg_pids+=("$tp")
wait_for "grep -q '^ready' '$T/touchup.out'"
read -r _ tm <"$T/touchup.out"
bg_pids+=("$tm")
wait_for '[ "$(touchups)" -ge 1 ]'
ok $? "touchup: the pages move again after the follow, at the sleep's timeout"
kill -USR1 "$tm"
wait_for '[ "$(touchups)" -ge 2 ]'
ok $? "touchup: and after the later fork, with no other event"
kill -USR1 "$tm"
wait "$tp"
relay "touchup" sh -c 'cat "$1"; exit "$2"' touchup "$T/touchup.out" "$?"
is "$(touchups)" 2 "touchup: two touch-ups, no more"

# A master reads back the mask it started with, as without the library.
relay "tengine" robust tengine

done_testing
