#!/usr/bin/env bash
# uWSGI, chosen with MASTERAFF_PROGRAMS: its master follows worker 1, the
# first worker it forks, on a fake sysfs tree where CPU 0 and CPU 1 are two
# packages. uWSGI's --cpu-affinity N gives worker W the N CPUs from
# (W - 1) * N on, modulo the number of CPUs (uwsgi_set_cpu_affinity in
# core/utils.c): with N = 1, worker 1 pins to CPU 0, worker 2 to CPU 1.
# Debian's uwsgi-core serves without a language plugin through its internal
# routing (--route-run return:200). The executable is /usr/bin/uwsgi-core
# (/usr/bin/uwsgi is an alternatives symlink to it), and the patterns match
# that file name, the basename of /proc/self/exe.
UWSGI=/usr/bin/uwsgi-core
if [ ! -x "$UWSGI" ]; then
    echo "1..0 # SKIP no $UWSGI (apt-get install uwsgi-core)"
    exit 0
fi
# lib.sh wants an nginx to exist; uWSGI stands in for it here.
NGINX=$UWSGI
. "$(dirname "$0")/lib.sh"
PORT=18403
[ "$(nproc)" -ge 2 ] || skip_all "fewer than 2 CPUs"
trap 'exit 1' INT TERM HUP PIPE

# lib.sh's cleanup, and the uWSGI master if one is left.
uwsgi_cleanup() {
    stop_uwsgi
    rm -rf "$T"
}
trap uwsgi_cleanup EXIT

make_twopkg
uwsgi_pid() { cat "$T/uwsgi.pid" 2>/dev/null; }
log_pid() { # log_pid WHAT N: the pid of the Nth (default last) "WHAT (pid: P" in the log
    sed -n "s/.*$1 (\(new \)\{0,1\}pid: \([0-9]*\).*/\2/p" "$T/uwsgi.log" | tail -n "+${2:-1}" |
        { if [ -n "${2:-}" ]; then head -1; else tail -1; fi; }
}

# start_uwsgi [PROGRAM] [VAR=VALUE...]: uWSGI's master, 2 workers pinned
# by --cpu-affinity 1 and a mule (a child that never pins), in the
# background, logging to $T/uwsgi.log (stderr included).
start_uwsgi() {
    local program=$UWSGI
    [[ ${1:-} == /* ]] && { program=$1; shift; }
    : >"$T/uwsgi.log"
    env "$@" "$program" --master --processes 2 --cpu-affinity 1 --mules 1 \
        --http-socket "127.0.0.1:$PORT" --route-run 'return:200' \
        --pidfile "$T/uwsgi.pid" --logto "$T/uwsgi.log" --die-on-term \
        >/dev/null 2>&1 &
    wait_for '[ -n "$(uwsgi_pid)" ] && [ -n "$(log_pid "uWSGI worker 2")" ] && [ -n "$(log_pid "uWSGI mule 1")" ]'
}

stop_uwsgi() {
    local m
    m=$(uwsgi_pid)
    [ -n "$m" ] || return 0
    kill -INT "$m" 2>/dev/null
    wait_for "! kill -0 $m 2>/dev/null" || kill -9 "$m" 2>/dev/null
    wait "$m" 2>/dev/null
    rm -f "$T/uwsgi.pid"
}

# Waits until worker 1 and worker 2 have pinned themselves to CPUs 0 and 1.
wait_uwsgi_pinned() {
    wait_for "[ \"\$(cpus_of \$(log_pid 'uWSGI worker 1'))\" = 0 ] && [ \"\$(cpus_of \$(log_pid 'uWSGI worker 2'))\" = 1 ]"
}

uwsgi_serves() {
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/")" = 200 ]
}

# ---- without the library: the baseline ----

start_uwsgi
ok $? "uWSGI starts: master, 2 workers, a mule"
m=$(uwsgi_pid)
wait_uwsgi_pinned
ok $? "--cpu-affinity 1: worker 1 pins to CPU 0, worker 2 to CPU 1"
orig=$(cpus_of "$m")
threads=$(threads_of "$m")
is "$orig" 0-1 "without the library the master stays on CPUs 0-1"
# What makes the library's channel known: uWSGI alone holds no datagram socket.
is "$(library_sockets "$m" | wc -l)" 0 "without the library the master holds no datagram socket"
uwsgi_serves
ok $? "uWSGI serves without a language plugin (--route-run return:200)"
stop_uwsgi

# ---- the library with its default programs: uWSGI is not a target ----

start_uwsgi LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys"
m=$(uwsgi_pid)
wait_uwsgi_pinned
# A master the library followed would have its channel, a datagram
# socket pair, from the first fork on, before any worker pinned.
is "$(library_sockets "$m" | wc -l)" 0 "library, default MASTERAFF_PROGRAMS: no socket of the library's in uWSGI's master"
is "$(cpus_of "$m")" "$orig" "library, default MASTERAFF_PROGRAMS: uWSGI's master is left alone"
is "$(grep -c "masteraff:" "$T/uwsgi.log")" 0 "and the library says nothing"
stop_uwsgi

# 'uwsgi' alone does not match the executable's name, uwsgi-core.
start_uwsgi LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_PROGRAMS=uwsgi
m=$(uwsgi_pid)
wait_uwsgi_pinned
is "$(library_sockets "$m" | wc -l)" 0 "MASTERAFF_PROGRAMS=uwsgi: no socket of the library's in uWSGI's master"
is "$(cpus_of "$m")" "$orig" "MASTERAFF_PROGRAMS=uwsgi does not match uwsgi-core: the master is left alone"
stop_uwsgi

# ---- MASTERAFF_PROGRAMS='uwsgi*': the master follows worker 1 ----

# Started through the /usr/bin/uwsgi symlink when there is one: the name
# that counts is the executable's.
via=$UWSGI
[ -x /usr/bin/uwsgi ] && [ "$(readlink -f /usr/bin/uwsgi)" = "$UWSGI" ] && via=/usr/bin/uwsgi
start_uwsgi "$via" LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_PROGRAMS='uwsgi*'
ok $? "uWSGI starts with the library, as $via"
m=$(uwsgi_pid)
w1=$(log_pid "uWSGI worker 1")
mule=$(log_pid "uWSGI mule 1")
wait_uwsgi_pinned
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "MASTERAFF_PROGRAMS='uwsgi*': the master follows worker 1 (CPU 0) to package 0"
is "$(channel_faults "$m")" "" "MASTERAFF_PROGRAMS='uwsgi*': the master holds the library's pair, each worker and the mule the end they send on"
is "$(threads_of "$m")" "$threads" "MASTERAFF_PROGRAMS='uwsgi*': and as many threads as without the library"
grep -q "masteraff: master $m -> CPUs 0 (package 0), following worker $w1 on CPU 0 " "$T/uwsgi.log"
ok $? "the log line names worker 1" || grep "masteraff:" "$T/uwsgi.log" | sed 's/^/#   /'
is "$(cpus_of "$mule")" "$orig" "the mule, which never pins, keeps the original mask"
uwsgi_serves
ok $? "uWSGI serves with the library"

# uWSGI respawns a dead worker 1 with the same CPU: the master stays.
kill -9 "$w1"
wait_for "[ -n \"\$(log_pid 'uWSGI worker 1' 2)\" ] || grep -q 'Respawned uWSGI worker 1' $T/uwsgi.log"
n1=$(log_pid "uWSGI worker 1")
[ "$n1" != "$w1" ]
ok $? "worker 1 is respawned ($w1 -> $n1)"
# The library's decision on the new worker 1's pin is its line.
wait_for "grep -q 'masteraff: master $m stays on CPUs 0: worker $n1 now leads' '$T/uwsgi.log'"
ok $? "the library says the respawned worker 1 leads, where the master is"
is "$(cpus_of "$m")" 0 "after worker 1's respawn the master stays on CPU 0"
is "$(grep -c "masteraff: master $m ->" "$T/uwsgi.log")" 1 "and the library says nothing new"

# SIGHUP: uWSGI reloads by re-executing its own binary in the master (same
# pid), then forks new workers and a new mule.
kill -HUP "$m"
wait_for "[ -n \"\$(log_pid 'uWSGI mule 1' 2)\" ]"
mule2=$(log_pid "uWSGI mule 1")
[ "$mule2" != "$mule" ] && kill -0 "$m" 2>/dev/null
ok $? "SIGHUP: the master ($m) re-executes itself and forks a new mule ($mule2)"
wait_uwsgi_pinned
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "after the reload the master is with worker 1 on CPU 0"
grep -q libmasteraff "/proc/$m/maps"
ok $? "the re-executed master has the library again"
is "$(channel_faults "$m")" "" "and one pair of the library's, its children their end: the old image's closed on exec"
uwsgi_serves
ok $? "uWSGI serves after the reload"
# A child forked after the reload starts with the mask the master had before
# the library moved it, as without the library: the master re-executed
# itself while moved, and the new image must not take CPU 0 for its
# original mask.
is "$(cpus_of "$mule2")" "$orig" "after the reload the new mule starts with the original mask"
stop_uwsgi
! kill -0 "$m" 2>/dev/null && ! pgrep -P "$m" >/dev/null
ok $? "SIGINT stops uWSGI, no process is left"
done_testing
