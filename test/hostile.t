#!/usr/bin/env bash
# A compromised worker cannot harm the master: garbage, truncated, oversized,
# endless, passed descriptors and lying messages on the channel all its
# children share are rejected or clamped, cost the master little, and leave
# it following its honest worker 0, whether it reads them at its reaps or
# in its sleep. And a secure-execution process (AT_SECURE) ignores the
# MASTERAFF_* variables.
#
# Needs the helper programs: make test/hostile test/secure
. "$(dirname "$0")/lib.sh"

# The master's CPU time from the attackers' start until it has read all
# they sent (1,000,000 junk messages and 1,000,000 valid reports among
# them), its own waiting and the library's reading: under 0.25 s (0.02 to
# 0.06 s measured, every CPU busy or not; a library that reads a flood as
# fast as it comes took 0.45 to 0.8 s). And while they send, under 5% of
# the time they take: the library reads at most 64 reports at a reap, and
# in its sleep at most 256 before it leaves the channel for 50 ms (1 to 2%
# measured; 7 to 15% for a library that does not).
CPU_BOUND_US=250000
FLOOD_PERCENT=5

need_programs hostile secure

make_twopkg

thread_cpus() {
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^Cpus_allowed_list/ {print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
err_lines() { grep 'masteraff: ' "$T/err"; }
has_line() { err_lines | grep -q -- "$1"; }

# relay PREFIX COMMAND...: passes the program's "ok - ..." / "not ok - ..."
# lines on as TAP; the others ("kind KIND PID", the CPU times) are kept in
# $T/relayed.
relay() {
    local prefix=$1 line n=0 rc
    shift
    : >"$T/relayed"
    while IFS= read -r line; do
        case $line in
        "ok - "*) ok 0 "$prefix: ${line#ok - }"; n=$((n + 1)) ;;
        "not ok - "*) ok 1 "$prefix: ${line#not ok - }"; n=$((n + 1)) ;;
        rc=*) rc=${line#rc=} ;;
        "# "*) diag "$prefix: ${line#\# }" ;;
        *) echo "$line" >>"$T/relayed" ;;
        esac
    done < <("$@"; echo "rc=$?")
    [ "$rc" = 0 ] && [ "$n" -gt 0 ]
    ok $? "$prefix: exits 0 after $n checks (status $rc)"
}

# hostile MODE..., with the library; stderr in $T/err. A master whose sleep
# never gave its signals back would wait for ever: the timeout ends it, and
# its status fails the run.
hostile() {
    env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS=hostile MASTERAFF_SYSFS="$T/sys" \
        timeout -s KILL 600 "$SRCDIR/test/hostile" "$@" 2>"$T/err"
}

# ---- junk: garbage, truncated, oversized, endless, killed, lying ----

pid_of() { awk -v k="$1" '$1 == "kind" && $2 == k {print $3}' "$T/relayed"; }
lines_of() { err_lines | grep -c "child $(pid_of "$1") "; }

# junk reap|sleep: the master reads its channel at its reaps (a waitpid
# loop, no SIGCHLD handler) or in its sleep (sigsuspend).
junk() {
    local how=$1 cpu fcpu fwall master
    relay "junk, $how" hostile junk "$how"
    cpu=$(awk '$1 == "cpu_us" {print $2}' "$T/relayed")
    fcpu=$(awk '$1 == "flood_cpu_us" {print $2}' "$T/relayed")
    fwall=$(awk '$1 == "flood_wall_us" {print $2}' "$T/relayed")
    diag "junk, $how: master CPU time for the attacks (1,000,000 junk messages, 1,000,000 valid reports, 14 attackers): ${cpu:-?} us; while they sent: ${fcpu:-?} us in ${fwall:-?} us"
    [ -n "$cpu" ] && [ "$cpu" -lt "$CPU_BOUND_US" ]
    ok $? "junk, $how: the master's CPU time stays under $CPU_BOUND_US us (${cpu:-?} us)"
    [ -n "$fcpu" ] && [ -n "$fwall" ] && [ $((fcpu * 100)) -lt $((fwall * FLOOD_PERCENT)) ]
    ok $? "junk, $how: while the attackers send, the master takes under $FLOOD_PERCENT% of a CPU (${fcpu:-?} us in ${fwall:-?} us)"

    master=$(err_lines | sed -n 's/.*masteraff: master \([0-9]*\) -> CPUs.*/\1/p' | head -1)
    is "$(err_lines | grep -c "master $master -> CPUs 1 (package 1), following worker $(pid_of honest) on CPU 1")" 1 \
        "junk, $how: one line for following the honest worker 0"
    is "$(err_lines | grep -c "master $master -> CPUs 0 (package 0), following worker $(pid_of later0) on CPU 0")" 1 \
        "junk, $how: one line for following the later worker 0"
    is "$(err_lines | grep -c "master $master -> ")" 2 "junk, $how: and no other move"
    # Each attacker lives until the master has read all it sent: each
    # misbehaviour is named, once.
    for kind in garbage badversion emptymask truncated oversized huge junkflood; do
        is "$(err_lines | grep -c "child $(pid_of $kind) sent a malformed report; no longer listening to it")" 1 \
            "junk, $how: $kind: one warn line, the child is dropped"
    done
    is "$(err_lines | grep -c "child $(pid_of validflood) keeps reporting; no longer listening to it")" 1 \
        "junk, $how: validflood: one warn line, the child is dropped"
    ! err_lines | grep -q '2-1023'
    ok $? "junk, $how: liar: its report for CPUs 2-1023 (it is not worker 0) is never acted on, not even in a line"
    # A valid report from a child that is not worker 0 says nothing; an
    # empty datagram is how a child about to execute a program leaves
    # (nginx's binary upgrade), said at debug level; the closer sends
    # nothing; the grandchild is no child of the master's.
    for kind in fdpass liar empty closer impostor grandchild; do
        is "$(lines_of $kind)" 0 "junk, $how: $kind: no line names it"
    done
    # Killed while it writes, maybe before the master read its first
    # message: the master never reads a dead child's reports.
    [ "$(lines_of killed)" -le 1 ]
    ok $? "junk, $how: killed: at most one line ($(lines_of killed))"
    ! err_lines | grep -qE '\[(error|crit|alert|emerg)\]'
    ok $? "junk, $how: no line above warn"
    [ "$tap_failed" -eq 0 ] || { diag "the junk run's children and lines:"; sed 's/^/#   /' "$T/relayed" "$T/err"; }
}
junk reap
junk sleep

# ---- liar: worker 0 reports CPUs outside the master's mask ----

# liar SCOPE: runs hostile liar in the background; sets m (master), l (the
# lying worker 0), h (an honest worker 1 on CPU 1).
liar() {
    : >"$T/liar.out"
    MASTERAFF_SCOPE=$1 hostile liar >"$T/liar.out" &
    bg_pids+=($!)
    wait_for "grep -q '^ready' '$T/liar.out'"
    read -r _ m l h <"$T/liar.out"
    bg_pids+=("$m" "$l" "$h")
}
end_liar() {
    kill "$m"
    wait_for "! kill -0 $m 2>/dev/null && ! kill -0 $l 2>/dev/null && ! kill -0 $h 2>/dev/null"
    ok $? "$1: the master and its children are gone"
}

# Scope worker: the master's mask is the leader's mask, clamped.
liar worker
ok $? "worker scope: started (master $m, liar $l, honest $h)"
wait_for "[ \"\$(thread_cpus $m)\" = 0 ]"
is "$(thread_cpus "$m")" 0 "worker scope: the liar claims CPUs 0,2-1023; every thread of the master on CPU 0"
wait_for 'has_line "master $m -> CPUs"'
err_lines | grep -q "master $m -> CPUs 0 (worker's CPUs), following worker $l on CPUs 0,2-1023"
ok $? "worker scope: the log line shows the clamped mask (CPUs 0)"
kill -USR1 "$l"
wait_for 'has_line "worker $l is on CPUs 5-1023, outside master $m"'
ok $? "worker scope: the liar claims CPUs 5-1023 only: a warn line says they are outside the master's"
is "$(thread_cpus "$m")" 0 "worker scope: the master stays on CPU 0"
kill -USR2 "$l"
wait_for "[ \"\$(thread_cpus $m)\" = 1 ]"
is "$(thread_cpus "$m")" 1 "worker scope: the liar really pins itself to CPU 1: the master follows"
end_liar "worker scope"

# Scope package: the claim is clamped to the master's CPUs before any
# topology is read, so CPUs that do not exist are never looked up.
liar package
ok $? "package scope: started (master $m, liar $l, honest $h)"
wait_for "[ \"\$(thread_cpus $m)\" = 0 ]"
is "$(thread_cpus "$m")" 0 "package scope: the liar claims CPUs 0,2-1023: the master goes to CPU 0's package only"
err_lines | grep -q "master $m -> CPUs 0 (package 0), following worker $l on CPUs 0,2-1023"
ok $? "package scope: the log line shows package 0 alone"
kill -USR1 "$l"
wait_for 'has_line "worker $l is on CPUs 5-1023, outside master $m"'
ok $? "package scope: the liar claims CPUs 5-1023: a warn line says they are outside the master's"
is "$(thread_cpus "$m")" 0 "package scope: the master stays where it was"
kill -USR2 "$l"
wait_for "[ \"\$(thread_cpus $m)\" = 1 ]"
is "$(thread_cpus "$m")" 1 "package scope: the liar really pins itself to CPU 1: the master follows"
end_liar "package scope"

# ---- secure execution: the variables are ignored ----
#
# The dynamic loader ignores an LD_PRELOAD path in a secure-execution
# process, so test/secure loads the library with dlopen (allowed there) and
# forks with the library's fork(). A set-group-ID copy whose group is not
# ours runs with AT_SECURE=1, even for root.

mkdir -p "$T/secure"
cp "$SRCDIR/test/secure" "$T/secure/plain"
cp "$SRCDIR/test/secure" "$T/secure/setgid"
chgrp daemon "$T/secure/setgid" && chmod g+s "$T/secure/setgid"
secure() { # secure plain|setgid [VAR=VALUE...]
    local how=$1
    shift
    env MASTERAFF_PROGRAMS='plain,setgid' MASTERAFF_LOG=debug \
        MASTERAFF_SYSFS="$T/sys" "$@" "$T/secure/$how" "$LIB" 2>"$T/err"
}
out=$(secure plain)
is "$(echo $out)" "at_secure 0 threads 1 sockets 2 channel yes" \
    "not secure: the library is active (no thread, its channel's two ends in the master, one in the child)"
has_line "loaded in $T/secure/plain"
ok $? "not secure: it says it loaded"
out=$(secure plain MASTERAFF_SCOPE=bogus)
has_line 'MASTERAFF_SCOPE="bogus" is not valid'
ok $? "not secure: a bad value is reported"
out=$(secure setgid)
if [ "$(echo "$out" | head -1)" != "at_secure 1" ]; then
    ok 0 "secure execution # SKIP a set-group-ID binary in $T does not get AT_SECURE here (nosuid?)"
else
    is "$(echo $out)" "at_secure 1 threads 1 sockets 0 channel no" "set-group-ID (AT_SECURE): inert, no channel"
    is "$(err_lines | wc -l)" 0 "set-group-ID: not a line, though MASTERAFF_LOG=debug"
    out=$(secure setgid MASTERAFF_SCOPE=bogus)
    is "$(echo $out) / $(err_lines | wc -l) lines" "at_secure 1 threads 1 sockets 0 channel no / 0 lines" \
        "set-group-ID: the variables are not even read (MASTERAFF_SCOPE=bogus is not reported)"
fi

done_testing
