#!/usr/bin/env bash
# A reload on a machine whose CPUs are all taken: the old workers are gone
# before the new worker 0 has run far enough to pin itself. The master
# holds its place until the new worker 0 pins and then moves once, to it,
# never back to its original mask in between; only a new worker 0 that has
# not pinned 3 s after its fork is given up on. test/holdpin.so, loaded
# before the library, keeps the new workers from pinning while a file
# exists, so each step waits for an event, never for a guessed time.
. "$(dirname "$0")/lib.sh"
PORT=18423
use_holdpin
make_twopkg

# The master's children held before their pin, in fork order: nginx names
# a worker only once it has pinned, so they still bear the master's title.
held() {
    local p
    for p in $(pgrep -P "$m" | sort -n); do
        grep -q "master process" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done | tr '\n' ' ' | sed 's/ $//'
}

# A reload with MASKS whose new workers wait before they pin; sets old
# (the workers before it) and n0 n1.
held_reload() {
    old=$(workers)
    write_conf "$1"
    : >"$HOLDPIN_FILE"
    kill -HUP "$m"
    wait_for '[ $(held | wc -w) -eq 2 ]'
    read -r n0 n1 <<<"$(held)"
}

# Waits for the old workers to exit, then has the master fork once more:
# nginx respawns a killed new worker 1, and the library reads every death
# before a fork, so the master has decided on the old workers' exits.
old_gone_and_known() {
    local p
    for p in $old; do
        wait_for "gone $p"
    done
    kill -9 "$n1"
    wait_for '[ $(held | wc -w) -eq 2 ] && ! held | grep -qw "$n1"'
}

write_conf "10 01"
LIB="$HOLD $LIB" start_nginx
ok $? "nginx starts with the library (and test/holdpin.so)"
wait_pinned_workers
wait_for "lib_lines | grep -q 'placed there at start'"
is "$(cpus_of "$m")" 1 "the master is placed at start on worker 0's CPU 1"

# ---- the new worker 0 pins after the old workers are gone ----

held_reload "01 10"
is "$(cpus_of "$n0") $(cpus_of "$n1")" "0-1 0-1" "reload: the new workers ($n0 $n1) have not pinned"
old_gone_and_known
is "$(workers)" "" "the old workers are gone"
is "$(cpus_of "$n0")" 0-1 "the new worker 0 has still not pinned"
is "$(cpus_of "$m")" 1 "the master holds its place: CPU 1"
is "$(moves)" 0 "no line moves it, to its original mask or elsewhere"
rm -f "$HOLDPIN_FILE"
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "the new worker 0 pins: the master follows it to CPU 0"
is "$(moves)" 1 "one move in all"
grep -q "masteraff: master $m -> CPUs 0 (package 0), following worker $n0 on CPU 0" "$T/error.log"
ok $? "and the line names the new worker 0"

# ---- a new worker 0 that does not pin within 3 s is given up on ----

: >"$T/error.log"
held_reload "10 01"
said_once "master $m -> CPUs 0-1 (its original mask), no pinned worker left to follow" \
    "the new worker 0 held past 3 s: the master goes back to its original mask"
is "$(cpus_of "$m")" 0-1 "it is on CPUs 0-1"
is "$(moves)" 1 "with one line"
rm -f "$HOLDPIN_FILE"
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the new worker 0 pins after all: the master follows it to CPU 1"
grep -q "masteraff: master $m -> CPUs 1 (package 1), following worker $n0 on CPU 1" "$T/error.log"
ok $? "and says so"

serves
ok $? "nginx serves"
stop_nginx
done_testing
