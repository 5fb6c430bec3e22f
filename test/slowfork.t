#!/usr/bin/env bash
# The leader rule on a busy machine: every CPU taken by a hog at nginx's
# priority, and every fork of the master delayed 0-300 ms at random
# (test/slowfork.so, loaded before the library), so that the forks of one
# burst come hundreds of milliseconds apart and a respawn long after the
# death it replaces. nginx with 4 workers on the fake two-package tree:
# worker 0 alone on CPU 1, workers 1-3 on CPU 0. Each round: start, kill -9
# of worker 0, a reload with a new mask, and a kill of worker 0 with a
# reload at once; the master must make no wrong move.
#
# SLOWFORK_ROUNDS rounds (default 3 in make check; 20 for the full run:
# SLOWFORK_ROUNDS=20 prove -v test/slowfork.t). SLOWFORK_HOGS=0 leaves the
# CPUs idle.
. "$(dirname "$0")/lib.sh"
PORT=18093
ROUNDS=${SLOWFORK_ROUNDS:-3}
SLOW=$SRCDIR/test/slowfork.so

[ -f "$SLOW" ] || { echo "Bail out! $SLOW is not built (make test/slowfork.so)"; exit 1; }
command -v taskset >/dev/null || skip_all "no taskset"
taskset -c 0,1 true 2>/dev/null || skip_all "CPUs 0 and 1 are not both available here"

make_twopkg

start_slow() {
    env LD_PRELOAD="$SLOW $LIB" MASTERAFF_SYSFS="$T/sys" \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
}

# The one worker alone on CPU $1 when all 4 have pinned and no other
# (exiting) worker is left, else nothing.
leader_on() {
    local p c on=() others=0
    for p in $(workers); do
        c=$(cpus_of "$p")
        case $c in
        "$1") on+=("$p") ;;
        0 | 1) others=$((others + 1)) ;;
        *) return 1 ;;
        esac
    done
    [ "${#on[@]}" -eq 1 ] && [ "$others" -eq 3 ] && echo "${on[0]}"
}

# check_step STEP WANT-CPUS WANT-MOVES LINE: the master's place, its moves
# so far, and the line that says it went or stayed for the right worker; a
# failure shows the library's lines.
check_step() {
    local step=$1 want=$2 nmoves=$3 line=$4 good=0
    [ "$(cpus_of "$m")" = "$want" ] && [ "$(moves)" -eq "$nmoves" ] &&
        grep -q "$line" "$T/error.log" || good=1
    ok $good "round $round, $step: master on CPU $want, $nmoves move(s) in all, for worker $w0"
    if [ $good -ne 0 ]; then
        wrong=$((wrong + 1))
        diag "master on $(cpus_of "$m"), $(moves) move(s); the library said:"
        grep 'masteraff:' "$T/error.log" | sed 's/^/#   /'
    fi
}

hogs=()
if [ "${SLOWFORK_HOGS:-1}" != 0 ]; then
    for cpu in 0 1; do
        taskset -c "$cpu" sh -c 'while :; do :; done' &
        disown $!
        hogs+=($!)
        bg_pids+=($!)
    done
    diag "CPU hogs ${hogs[*]} on CPUs 0 and 1"
fi

wrong=0
for ((round = 1; round <= ROUNDS; round++)); do
    write_conf "10 01 01 01" "" 4
    : >"$T/error.log"
    start_slow
    ok $? "round $round: nginx starts with forks slowed"
    wait_for '[ -n "$(master_pid)" ]'
    m=$(master_pid)

    # start: placed at start on CPU 1 for worker 0, confirmed by its pin
    wait_for 'w0=$(leader_on 1)'
    line="master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1"
    wait_for 'grep -q "$line" "$T/error.log"'
    check_step "start" 1 0 "$line"

    # kill -9 of worker 0: its respawn pins to CPU 1, the master stays
    old=$w0
    kill -9 "$w0"
    wait_for 'w0=$(leader_on 1) && [ "$w0" != "$old" ]'
    line="master $m stays on CPUs 1: worker $w0 now leads"
    wait_for 'grep -q "$line" "$T/error.log"'
    check_step "worker 0 killed and respawned" 1 0 "$line"

    # a reload with worker 0 alone on CPU 0: followed once the old are gone
    write_conf "01 10 10 10" "" 4
    kill -HUP "$m"
    wait_for 'w0=$(leader_on 0)'
    line="master $m -> CPUs 0 (package 0), following worker $w0 on CPU 0"
    wait_for 'grep -q "$line" "$T/error.log"'
    check_step "reload with a new mask" 0 1 "$line"

    # kill -9 of worker 0 and a reload at once, back to worker 0 on CPU 1
    write_conf "10 01 01 01" "" 4
    old=$w0
    kill -9 "$w0"
    kill -HUP "$m"
    wait_for 'w0=$(leader_on 1)'
    line="master $m -> CPUs 1 (package 1), following worker $w0 on CPU 1"
    wait_for 'grep -q "$line" "$T/error.log"'
    check_step "worker 0 killed and a reload at once" 1 2 "$line"

    stop_nginx
done
diag "steps with a wrong place or move: $wrong of $((ROUNDS * 4)) ($ROUNDS rounds)"
for p in "${hogs[@]}"; do
    kill -9 "$p" 2>/dev/null
done
done_testing
