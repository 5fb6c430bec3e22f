#!/usr/bin/env bash
# A compromised worker cannot harm the master: garbage, truncated, oversized,
# endless and lying messages on its channel are rejected or clamped, cost
# the master little, and leave it following its honest worker 0. And a
# secure-execution process (AT_SECURE) ignores the MASTERAFF_* variables.
#
# Needs the helper programs: make test/hostile test/secure
. "$(dirname "$0")/lib.sh"

# The master's CPU time for the whole junk run (all of its threads, the
# library's listener included), with 1,000,000 junk messages and 1,000,000
# valid reports thrown at it: under 1 s.
CPU_BOUND_US=1000000

need_programs hostile secure

make_twopkg

thread_cpus() {
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^Cpus_allowed_list/ {print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//'
}
err_lines() { grep 'masteraff: ' "$T/err"; }
has_line() { err_lines | grep -q -- "$1"; }

# relay PREFIX COMMAND...: passes the program's "ok - ..." / "not ok - ..."
# lines on as TAP; "cpu_us N" and "kind KIND PID" are kept in $T/relayed.
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

hostile() { # hostile MODE, with the library; stderr in $T/err
    env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS=hostile MASTERAFF_SYSFS="$T/sys" \
        "$SRCDIR/test/hostile" "$@" 2>"$T/err"
}

# ---- junk: garbage, truncated, oversized, endless, killed, lying ----

relay junk hostile junk
pid_of() { awk -v k="$1" '$1 == "kind" && $2 == k {print $3}' "$T/relayed"; }
cpu=$(awk '$1 == "cpu_us" {print $2}' "$T/relayed")
diag "master CPU time for the junk run (1,000,000 junk messages, 1,000,000 valid reports, 13 attackers): ${cpu:-?} us"
[ -n "$cpu" ] && [ "$cpu" -lt "$CPU_BOUND_US" ]
ok $? "the master's CPU time stays under $CPU_BOUND_US us (${cpu:-?} us)"

master=$(err_lines | sed -n 's/.*masteraff: master \([0-9]*\) -> CPUs.*/\1/p' | head -1)
is "$(err_lines | grep -c "master $master -> CPUs 1 (package 1), following worker $(pid_of honest) on CPU 1")" 1 \
    "one line for following the honest worker 0"
is "$(err_lines | grep -c "master $master -> CPUs 0 (package 0), following worker $(pid_of later0) on CPU 0")" 1 \
    "one line for following the later worker 0"
is "$(err_lines | grep -c "master $master -> ")" 2 "and no other move"
[ "$tap_failed" -eq 0 ] || { diag "the junk run's children and lines:"; sed 's/^/#   /' "$T/relayed" "$T/err"; }
for kind in garbage badversion emptymask truncated oversized huge junkflood killed; do
    is "$(err_lines | grep -c "child $(pid_of $kind) sent a malformed report; no longer listening to it")" 1 \
        "$kind: one warn line, the child is dropped"
done
is "$(err_lines | grep -c "child $(pid_of validflood) keeps reporting; no longer listening to it")" 1 \
    "validflood: one warn line, the child is dropped"
! err_lines | grep -q '2-1023'
ok $? "liar: its report for CPUs 2-1023 (it is not worker 0) is never acted on, not even in a line"
for kind in empty fdpass closer; do
    n=$(err_lines | grep -c "child $(pid_of $kind) ")
    [ "$n" -le 1 ]
    ok $? "$kind: at most one line ($n)"
done
! err_lines | grep -qE '\[(error|crit|alert|emerg)\]'
ok $? "no line above warn"

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
is "$(echo $out)" "at_secure 0 thread yes channel yes" "not secure: the library is active (thread, channel)"
has_line "loaded in $T/secure/plain"
ok $? "not secure: it says it loaded"
out=$(secure plain MASTERAFF_SCOPE=bogus)
has_line 'MASTERAFF_SCOPE="bogus" is not valid'
ok $? "not secure: a bad value is reported"
out=$(secure setgid)
if [ "$(echo "$out" | head -1)" != "at_secure 1" ]; then
    ok 0 "secure execution # SKIP a set-group-ID binary in $T does not get AT_SECURE here (nosuid?)"
else
    is "$(echo $out)" "at_secure 1 thread no channel no" "set-group-ID (AT_SECURE): inert, no thread, no channel"
    is "$(err_lines | wc -l)" 0 "set-group-ID: not a line, though MASTERAFF_LOG=debug"
    out=$(secure setgid MASTERAFF_SCOPE=bogus)
    is "$(echo $out) / $(err_lines | wc -l) lines" "at_secure 1 thread no channel no / 0 lines" \
        "set-group-ID: the variables are not even read (MASTERAFF_SCOPE=bogus is not reported)"
fi

done_testing
