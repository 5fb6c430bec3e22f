#!/usr/bin/env bash
# A respawn is known from its death, whatever the master read before: a
# reload nginx refused (a configuration with an error) reads files and
# forks nothing, a reopen (USR1) forks nothing, and the kernel may keep no
# per-thread I/O counts (test/noio.so hides /proc/*/io): the master's
# wake-ups tell a respawn from a reload, its reads only where both could
# come in one wake-up. The cache manager, which never pins, is killed
# first, then worker 1, then worker 0: each respawn keeps its place and the
# master stays on worker 0's package. A reload after the cache loader's
# exit is still told from a respawn.
#
# nginx on the fake two-package tree, worker_cpu_affinity 01 10 (worker 0
# on CPU 0, worker 1 on CPU 1) and a cache (a manager and a loader).
. "$(dirname "$0")/lib.sh"
PORT=18421
NOIO=$SRCDIR/test/noio.so

[ -f "$NOIO" ] || { echo "Bail out! $NOIO is not built (make test/noio.so)"; exit 1; }
make_twopkg

lib_lines() { grep -a 'masteraff: ' "$T/error.log" "$T/stderr" 2>/dev/null; }

# The library's lines written since mark_log.
mark_log() { mark=$(wc -l <"$T/error.log"); }
since_mark() { tail -n +$((mark + 1)) "$T/error.log" | grep -a 'masteraff: '; }

# The one worker on CPU $1, the one child in ROLE.
worker_on() {
    local p
    for p in $(workers); do
        [ "$(cpus_of "$p")" = "$1" ] && echo "$p"
    done
}
only_child() { children_of "$(master_pid)" "$1"; }

# Waits for two workers pinned, worker 0 on CPU $1 and worker 1 on the
# other, no other worker left; sets m, w0 and w1.
wait_settled() {
    local other=$((1 - $1))
    wait_for "[ \$(workers | wc -w) -eq 2 ] && [ -n \"\$(worker_on $1)\" ] && [ -n \"\$(worker_on $other)\" ]"
    m=$(master_pid)
    w0=$(worker_on "$1")
    w1=$(worker_on "$other")
}

# A reload nginx refuses: the configuration gets a line it does not know,
# the master reads it, says [emerg], forks nothing; then the good file is
# put back (unread until the next reload).
refused_reload() {
    local emergs
    emergs=$(grep -c '\[emerg\]' "$T/error.log")
    cp "$T/nginx.conf" "$T/good.conf"
    echo "no_such_directive on;" >>"$T/nginx.conf"
    kill -HUP "$m"
    wait_for "[ \$(grep -c '\\[emerg\\]' '$T/error.log') -gt $emergs ]"
    ok $? "$1: the reload is refused"
    mv "$T/good.conf" "$T/nginx.conf"
}

# A good reload to worker_cpu_affinity $1, whose worker 0 is on CPU $2:
# once the old workers are gone, the master follows the new worker 0.
good_reload() {
    local old
    old=$(workers)
    write_conf "$1"
    kill -HUP "$m"
    wait_for "[ \$(new_workers '$old' | wc -w) -eq 2 ] && [ \$(workers | wc -w) -eq 2 ]"
    wait_settled "$2"
    wait_for "[ \"\$(cpus_of $m)\" = $2 ]"
    is "$(cpus_of "$m")" "$2" "$3: a reload to $1 moves the master to the new worker 0's CPU $2"
}

# Kills the cache manager, then worker 1, then worker 0, each once the
# previous one's respawn is there; worker 0 is on CPU $1. The master must
# say that the respawned worker 0 leads, move nowhere, and stay on CPU $1.
kill_three() {
    local what=$1 cpu=$2 other=$((1 - $2)) cm
    mark_log
    cm=$(only_child "cache manager")
    kill -9 "$cm"
    wait_for "[ -n \"\$(only_child 'cache manager')\" ] && [ \"\$(only_child 'cache manager')\" != $cm ]"
    ok $? "$what: the cache manager is respawned"
    kill -9 "$w1"
    wait_for "[ -n \"\$(worker_on $other)\" ] && [ \"\$(worker_on $other)\" != $w1 ]"
    ok $? "$what: worker 1 is respawned on CPU $other"
    kill -9 "$w0"
    wait_for "[ -n \"\$(worker_on $cpu)\" ] && [ \"\$(worker_on $cpu)\" != $w0 ]"
    ok $? "$what: worker 0 is respawned on CPU $cpu"
    wait_settled "$cpu"
    wait_for "since_mark | grep -qE 'worker $w0 now leads|master $m -> '"
    since_mark | grep -q "\[notice\] .*masteraff: master $m stays on CPUs $cpu: worker $w0 now leads, on CPU $cpu"
    ok $? "$what: a line says the respawned worker 0 leads"
    ! since_mark | grep -q "master $m -> "
    ok $? "$what: the master does not move"
    is "$(cpus_of "$m")" "$cpu" "$what: the master stays on worker 0's CPU $cpu"
    [ $tap_failed -eq 0 ] || since_mark | sed 's/^/# /'
}

# Kills the cache loader (nginx never respawns it) and waits until the
# master has collected it.
loader_exits() {
    local l
    l=$(only_child "cache loader")
    [ -n "$l" ] && kill -9 "$l"
    wait_for "[ -z \"\$(only_child 'cache loader')\" ]"
    ok $? "$1: the cache loader is gone"
}

# restart [PRELOAD]: a new nginx, with PRELOAD loaded before the library.
restart() {
    fresh
    write_conf "01 10"
    LIB="${1:+$1 }$LIB" start_nginx
    wait_settled 0
}

# The issue's sequence: placed at start, a refused reload, three deaths.
restart
wait_for "lib_lines | grep -q 'master $m stays on CPUs 0 (package 0), placed there at start'"
ok $? "start: the master is placed at start on CPU 0 and confirmed"
refused_reload "refused reload"
kill_three "refused reload, then the cache manager, worker 1, worker 0 killed" 0

# The loader's exit, a good reload, a refused one, a reopen, three deaths,
# then a good reload after all.
restart
loader_exits "loader exit"
good_reload "10 01" 1 "loader exit, then a good reload"
refused_reload "then a refused reload"
kill -USR1 "$m"
kill_three "loader exit, good reload, refused reload, USR1, three deaths" 1
good_reload "01 10" 0 "and a good reload after them"
kill_three "after that reload, three deaths" 0

# A refused reload, then a good one, then three deaths.
restart
refused_reload "refused reload"
good_reload "10 01" 1 "refused reload, then a good one"
kill_three "refused reload, good reload, three deaths" 1

# No per-thread I/O counts: the first respawn asks for them, and says once
# that it cannot have them.
restart "$NOIO"
kill_three "no I/O counts, the cache manager, worker 1, worker 0 killed" 0
is "$(lib_lines | grep -c "master $m cannot count its reads (/proc/thread-self/io: No such file or directory)")" 1 \
    "no I/O counts: one line says the reads cannot be counted"
kill -USR1 "$m"
kill_three "no I/O counts, USR1, three deaths" 0
loader_exits "no I/O counts, loader exit"
good_reload "10 01" 1 "no I/O counts, loader exit, then a good reload"
refused_reload "no I/O counts, refused reload"
kill_three "no I/O counts, refused reload, three deaths" 1
is "$(lib_lines | grep -c "cannot count its reads")" 1 "and says it once"

! lib_lines | grep -qE '\[(error|crit|alert|emerg)\]'
ok $? "no library line above warn"
[ $tap_failed -eq 0 ] || lib_lines | sed 's/^/# /'
done_testing
