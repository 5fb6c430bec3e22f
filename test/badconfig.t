#!/usr/bin/env bash
# A bad MASTERAFF_* value: one line on stderr naming the variable, the value
# and the accepted values; nginx starts and serves; the library stays inert.
# Good values, and a dry run, for comparison.
. "$(dirname "$0")/lib.sh"
PORT=18085

make_twopkg
write_conf "10 01"

# run_nginx VAR=VALUE...: starts nginx with the library and those variables,
# waits for the workers to pin themselves; sets m, w0, w1.
run_nginx() {
    : >"$T/error.log"
    (
        for kv in "$@"; do export "$kv"; done
        start_nginx
    )
    ok $? "$*: nginx starts"
    wait_pinned_workers
    ok $? "$*: the workers pin themselves to CPUs 1 and 0"
    serves
    ok $? "$*: nginx serves"
}

# bad VAR VALUE ACCEPTED...: a bad value is refused, as one line on stderr.
bad() {
    local var=$1 val=$2 a line lines missing=""
    shift 2
    run_nginx "$var=$val"
    # An active library makes its channel, a datagram socket pair, at the
    # master's first fork, before any worker pins: none now means it never
    # will.
    is "$(library_sockets "$m" | wc -l)" 0 "$var=\"$val\": the master holds no socket of the library's"
    is "$(cpus_of "$m")" 0-1 "$var=\"$val\": master not moved"
    is "$(grep -c masteraff "$T/error.log")" 1 "$var=\"$val\": error.log has the line too, once"
    is "$(grep -c "masteraff: .*$var=\"$val\" is not valid" "$T/error.log")" 1 \
        "$var=\"$val\": and it is that line"
    lines=$(wc -l <"$T/stderr")
    line=$(head -1 "$T/stderr")
    is "$lines" 1 "$var=\"$val\": one line on stderr"
    case $line in
    *"$var=\"$val\""*) ok 0 "$var=\"$val\": the line names the variable and the value" ;;
    *) ok 1 "$var=\"$val\": the line names the variable and the value" ;;
    esac
    case $line in
    *masteraff*) ok 0 "$var=\"$val\": the line says who complains" ;;
    *) ok 1 "$var=\"$val\": the line says who complains" ;;
    esac
    for a in "$@"; do
        case ${line#*"$var=\"$val\""} in *"$a"*) ;; *) missing="$missing $a" ;; esac
    done
    is "$missing" "" "$var=\"$val\": the line gives the accepted values ($*)"
    [ "$lines" = 1 ] || sed 's/^/#   stderr: /' "$T/stderr"
    stop_nginx
}

bad MASTERAFF_SCOPE chip package die node llc cluster core cpu worker
bad MASTERAFF_MIGRATE yes on off
bad MASTERAFF_PROGRAMS '' pattern
bad MASTERAFF_PROGRAMS 'nginx,,x' pattern
bad MASTERAFF_PROGRAMS 'a/b' pattern
bad MASTERAFF_LOG loud error warn notice info debug
bad MASTERAFF_DRY_RUN 2 1
bad MASTERAFF_SYSFS relative/path absolute
bad MASTERAFF_EARLY maybe on off

# ---- good values: the master moves ----

run_nginx MASTERAFF_SCOPE=package MASTERAFF_MIGRATE=off 'MASTERAFF_PROGRAMS=nginx*,uwsgi' \
    MASTERAFF_LOG=notice MASTERAFF_DRY_RUN=0 MASTERAFF_SYSFS="$T/sys" MASTERAFF_AUTO=off
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "a good value for every variable: master follows worker 0 to CPU 1"
is "$(cat "$T/stderr")" "" "a good value for every variable: nothing on stderr"
is "$(channel_faults "$m")" "" "a good value for every variable: the master holds the library's channel, each child its end"
is "$(threads_of "$m")" 1 "a good value for every variable: the master runs one thread, as nginx alone"
grep -q "masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0" "$T/error.log"
ok $? "a good value for every variable: error.log has the line for the placement at start"
stop_nginx

run_nginx MASTERAFF_SCOPE=worker MASTERAFF_LOG=debug
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "MASTERAFF_SCOPE=worker MASTERAFF_LOG=debug: master follows worker 0 to CPU 1"
ok "$([ -s "$T/stderr" ]; echo $?)" "MASTERAFF_LOG=debug: debug lines on stderr"
is "$(grep -vc '\[debug\] [0-9]*#[0-9]*: masteraff: ' "$T/stderr")" 0 \
    "MASTERAFF_LOG=debug: nothing else on stderr"
grep -v '\[debug\] [0-9]*#[0-9]*: masteraff: ' "$T/stderr" | sed 's/^/#   stderr: /'
grep -q "masteraff: master $m stays on CPUs 1 (worker's CPUs), placed there at start for worker $w0" "$T/error.log"
ok $? "MASTERAFF_SCOPE=worker: error.log has the line for the placement at start"
stop_nginx

# ---- a dry run: decide and log, change nothing ----

run_nginx MASTERAFF_DRY_RUN=1
wait_for 'grep -q "dry run:" "$T/error.log"'
grep -q "masteraff: dry run: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0" "$T/error.log"
ok $? "MASTERAFF_DRY_RUN=1: error.log has a 'dry run:' line for the placement at start"
sleep 0.3
is "$(cpus_of "$m")" 0-1 "MASTERAFF_DRY_RUN=1: master not moved"
is "$(cat "$T/stderr")" "" "MASTERAFF_DRY_RUN=1: nothing on stderr"
stop_nginx

done_testing
