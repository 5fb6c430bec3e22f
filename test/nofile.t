#!/usr/bin/env bash
# A descriptor limit as nginx has it with many workers. For a reload nginx
# holds a socketpair per worker of both generations at once, nearly twice
# what it holds once started, and each new worker inherits them all. The
# library holds 2 descriptors in the master and 1 in each child, whatever
# the number of workers: its one channel. So a limit just above nginx's own
# need is enough: nginx starts, serves and reloads as without the library,
# no process holds more of the library's than those, and the master still
# follows the new worker 0.
#
# With NOFILE_WORKERS workers (default 64: the property is a count per
# process, the same at 1,024; scripts/scale runs the full size) the limit
# is 2 above the least one nginx alone reloads under, found by trying it
# lower and lower; with 256 (where each try is long) it is twice what
# nginx alone holds once started and 2 more.
. "$(dirname "$0")/lib.sh"
PORT=18101

make_twopkg

bad_lines() { grep -E '\[(alert|emerg|crit)\]' "$T/error.log"; }

# reload_under LIMIT start_nginx|start_nginx_without: starts nginx under the
# limit and reloads it; sets m, old (the start's children) and new_set (the
# reload's). Fails when either has not settled, or nginx said why not.
reload_under() {
    : >"$T/error.log"
    (ulimit -n "$1" && "$2") || return 1
    wait_for "settled_workers $N || bad_lines >/dev/null" || return 1
    m=$(master_pid)
    old=$(pgrep -P "$m" | tr '\n' ' ')
    kill -HUP "$m"
    wait_for "settled_workers $N '$old' || bad_lines >/dev/null" || return 1
    new_set=$(children_but "$old" | tr '\n' ' ')
    settled_workers "$N" "$old"
}

# Whether nginx alone reloads under LIMIT without a failure. A worker says
# so in its init, which may come after it pinned itself: error.log is read
# once nginx has stopped, every worker with it.
alone_reloads_under() {
    local settled
    reload_under "$1" start_nginx_without
    settled=$?
    stop_nginx
    [ "$settled" = 0 ] && ! bad_lines >/dev/null
}

# The reload's worker 0: the one on CPU 1 (worker_cpu_affinity 10 01 gives
# the other workers the last mask, CPU 0).
new_worker0() {
    local p
    for p in $new_set; do
        [ "$(cpus_of "$p")" = 1 ] && echo "$p"
    done
}

# limit_case N LIMIT-RULE: N workers under the limit the rule gives
# ("least": 2 above the least nginx alone reloads under; "twice": twice
# what nginx alone holds once started, and 2).
limit_case() {
    local rule=$2 l least
    N=$1
    write_many_conf "$N" "10 01"
    start_nginx_without
    wait_for "settled_workers $N"
    ok $? "without a limit, nginx alone starts $N workers"
    m=$(master_pid)
    alone=$(fd_count "$m")
    alone_threads=$(threads_of "$m")
    stop_nginx
    if [ "$rule" = least ]; then
        least=
        for ((l = 2 * alone + 2; l > alone; l--)); do
            alone_reloads_under "$l" || break
            least=$l
        done
        [ -n "$least" ]
        ok $? "nginx alone reloads under ulimit -n $((2 * alone + 2)) ($N workers, $alone descriptors once started)"
        LIMIT=$((${least:-$((2 * alone))} + 2))
        diag "the least limit nginx alone reloads $N workers under is $least ($alone descriptors once started); ulimit -n $LIMIT"
    else
        LIMIT=$((2 * alone + 2))
        diag "nginx alone holds $alone descriptors with $N workers; ulimit -n $LIMIT"
    fi

    for how in start_nginx_without start_nginx; do
        reload_under "$LIMIT" "$how"
        ok $? "$how, ulimit -n $LIMIT: nginx starts $N pinned workers, and a reload brings $N new ones and ends the old"
        serves
        ok $? "$how: nginx serves after the reload"
        # A master's count once the reload settled: the old workers'
        # channels are closed as nginx reaps them.
        if [ "$how" = start_nginx_without ]; then
            wait_for "[ \$(fd_count $m) -eq $alone ]"
            is "$(fd_count "$m")" "$alone" "$how: the master holds as many descriptors as at start"
            w0=$(new_worker0)
            worker0_alone=$(fd_count "$w0")
            is "$(library_sockets "$m" $new_set | wc -l)" 0 "$how: no process of nginx's holds a datagram socket"
        else
            wait_for "[ \$(fd_count $m) -eq $((alone + 2)) ]"
            is "$(fd_count "$m")" "$((alone + 2))" "$how: the master holds 2 descriptors more than nginx alone"
            is "$(channel_faults "$m")" "" "$how: those are the library's pair, and each of the $N workers holds one end of it, no more"
            is "$(threads_of "$m")" "$alone_threads" "$how: the master has as many threads as nginx alone"
            w0=$(new_worker0)
            is "$(fd_count "$w0")" "$((worker0_alone + 1))" "$how: the reload's worker 0 ($w0) holds 1 descriptor more than nginx alone's"
            wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
            is "$(cpus_of "$m")" 1 "$how: the master is on worker 0's package after the reload"
            wait_for "grep -q 'masteraff: master $m stays on CPUs 1: worker $w0 now leads' '$T/error.log'"
            ok $? "$how: it follows the new worker 0 ($w0)"
            grep -q "worker $w0 now leads" "$T/error.log" || grep 'masteraff:' "$T/error.log" | sed 's/^/#   /'
            grep -E '\[(warn|error)\].*masteraff:' "$T/error.log" | sed 's/^/# /'
            ! grep -qE '\[(warn|error)\].*masteraff:' "$T/error.log"
            ok $? "$how: the library has nothing to warn about"
        fi
        stop_nginx
        bad_lines | sed 's/^/# /'
        ! bad_lines >/dev/null
        ok $? "$how: no [alert], [crit] or [emerg] from the start to the stop (nginx's own socketpair() failed is one)"
    done
}

limit_case "${NOFILE_WORKERS:-64}" least
limit_case 256 twice

done_testing
