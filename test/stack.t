#!/usr/bin/env bash
# The library reads nginx's configuration in its constructor, on nginx's
# main thread, before nginx has run: under a small stack limit (ulimit -s)
# it must need little more than nginx itself. For one file and for 8 nested
# includes (the reader's bound), the smallest limit nginx alone starts
# under is found in 4 KiB steps; with the library nginx must start under
# that limit plus 16 KiB, three times out of three, placed at start: the
# kernel puts the stack's top at a random offset of up to 8 KiB, and the
# library's own frames may take 8 KiB more (its buffers are static or on
# the heap; before they were, it needed 48 KiB where nginx alone needed
# 12-16). Past the bound, nginx starts and the library says why it did
# not place it. A master that a limit ends after its forks leaves its
# workers on the port: stop_nginx ends them too.
. "$(dirname "$0")/lib.sh"
PORT=18233
MARGIN=16

make_twopkg
write_conf "10 01"

# nest N: $T/top.conf, N files deep: N-1 includes down to nginx.conf's text.
nest() {
    local prev=$T/body.conf i
    cp "$T/nginx.conf" "$T/body.conf"
    for ((i = 1; i < $1; i++)); do
        echo "include $prev;" >"$T/inc$i.conf"
        prev=$T/inc$i.conf
    done
    cp "$prev" "$T/top.conf"
}

# up: the daemonized master has its two workers. A stack too small for
# nginx ends it at any point of its start, before or after it wrote its pid
# file: its end is waited for as well as its workers, never a time.
up() {
    local m
    wait_for '[ -s "$T/nginx.pid" ] || ! pgrep -f -- "$T/top.conf" >/dev/null'
    m=$(master_pid)
    [ -n "$m" ] || return 1
    wait_for "gone $m || [ \$(workers | wc -w) -eq 2 ]"
    ! gone "$m" && [ "$(workers | wc -w)" -eq 2 ]
}

# starts KIB [VAR=VALUE...]: nginx starts under ulimit -s KIB (and stops).
starts() {
    local limit=$1 rc
    shift
    rm -f "$T/nginx.pid"
    : >"$T/error.log"
    (ulimit -s "$limit" && exec env "$@" "$NGINX" -c "$T/top.conf") 2>"$T/stderr"
    rc=$?
    [ $rc -eq 0 ] && up
    rc=$?
    stop_nginx
    return $rc
}

# lives_on KIB [VAR=VALUE...]: nginx started under ulimit -s KIB respawns
# worker 0 and reloads, and its master is still there.
lives_on() {
    local limit=$1 m old rc=1
    shift
    rm -f "$T/nginx.pid"
    (ulimit -s "$limit" && exec env "$@" "$NGINX" -c "$T/top.conf") 2>"$T/stderr" &&
        up || { stop_nginx; return 1; }
    m=$(master_pid)
    old=$(workers)
    kill -9 "${old%% *}"
    wait_for "[ \$(workers | wc -w) -eq 2 ] && ! workers | grep -qw ${old%% *}" && {
        old=$(workers)
        kill -HUP "$m"
        wait_new_workers "$old"
        kill -0 "$m"
    }
    rc=$?
    stop_nginx
    return $rc
}

# starts_thrice KIB [VAR=VALUE...]
starts_thrice() {
    starts "$@" && starts "$@" && starts "$@"
}

# smallest_alone: the smallest limit, in 4 KiB steps, nginx alone starts under.
smallest_alone() {
    local k
    for ((k = 8; k <= 256; k += 4)); do
        starts $k LD_PRELOAD= && { echo $k; return; }
    done
    echo none
}

# The clean-up the search relies on: a master killed behind its workers.
nest 1
rm -f "$T/nginx.pid"
env LD_PRELOAD= "$NGINX" -c "$T/top.conf" 2>"$T/stderr" && up
m=$(master_pid)
kill -9 "$m"
wait_for "gone $m"
stop_nginx
starts 8192 LD_PRELOAD=
ok $? "the workers of a master that died are ended: the next nginx binds the port and starts"

with_lib=(LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_LOG=debug)
for files in 1 8; do
    nest $files
    alone=$(smallest_alone)
    diag "$files file(s): nginx alone starts under ulimit -s $alone"
    [ "$alone" != none ] || { ok 1 "$files file(s): nginx alone starts under some limit"; continue; }
    limit=$((alone + MARGIN))
    starts_thrice $limit "${with_lib[@]}"
    ok $? "$files file(s): with the library nginx starts under ulimit -s $limit, three times"
    grep -q "masteraff: master .* placed at start on CPUs 1" "$T/error.log" "$T/stderr"
    ok $? "$files file(s): and the master is placed at start"
    lives_on $limit "${with_lib[@]}"
    ok $? "$files file(s): under that limit the master lives through a respawn and a reload (the decisions its forks make)"
done

nest 9
alone=$(smallest_alone)
[ "$alone" != none ] || alone=256
limit=$((alone + MARGIN))
starts_thrice $limit "${with_lib[@]}"
ok $? "9 files, past the reader's bound: nginx starts under ulimit -s $limit, three times"
grep -q "masteraff: no placement at start: .*include depth over 8" "$T/stderr" "$T/error.log" || cat "$T/stderr" | sed "s/^/# /" >&2; grep -q "masteraff: no placement at start: .*include depth over 8" "$T/stderr" "$T/error.log"
ok $? "and the library says why it did not place the master"

done_testing
