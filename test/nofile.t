#!/usr/bin/env bash
# A descriptor limit as nginx has it with many workers: with `ulimit -n` just
# above what nginx alone needs for a reload (a socketpair per worker, old
# and new at once), so low that the library's channels cannot all fit,
# nginx starts, serves and reloads exactly as without the library; one line
# says from which child on the library stopped following, and why, and the
# master still follows the new worker 0. Twice, with 24 descriptors of room
# above nginx's need: with 64 workers that is more than the library keeps
# free after each fork (1/32 of the limit, at least 8); with 256 it is less
# (33), and the new worker 0's channel is kept down to 8 free descriptors.
#
# NOFILE_WORKERS workers in the first case (default 64: the property is a
# ratio of descriptors to workers, the same at 1,024; scripts/scale runs
# the full size).
. "$(dirname "$0")/lib.sh"
PORT=18101

make_twopkg

bad_lines() { grep -E '\[(alert|emerg|crit)\]' "$T/error.log"; }

# under_limit start_nginx|start_nginx_without: starts, serves, reloads under
# the limit; sets m, old and new_set.
under_limit() {
    : >"$T/error.log"
    (ulimit -n "$LIMIT" && "$1")
    ok $? "$1, ulimit -n $LIMIT: nginx starts"
    wait_for "settled_workers $N"
    ok $? "$1: $N workers pinned"
    serves
    ok $? "$1: nginx serves"
    m=$(master_pid)
    old=$(pgrep -P "$m" | tr '\n' ' ')
    kill -HUP "$m"
    wait_for "settled_workers $N '$old'"
    ok $? "$1: a reload brings $N new pinned workers and the old ones are gone"
    new_set=$(children_but "$old" | tr '\n' ' ')
    serves
    ok $? "$1: nginx serves after the reload"
    bad_lines | sed 's/^/# /'
    ! bad_lines >/dev/null
    ok $? "$1: no [alert], [crit] or [emerg] (nginx's own socketpair() failed is one)"
}

# limit_case N ROOM: N workers, ulimit -n twice what nginx alone holds
# once started (its socketpair per worker, twice over in a reload) and ROOM
# more for the new cycle.
limit_case() {
    N=$1
    write_many_conf "$N" "10 01"
    start_nginx_without
    wait_for "settled_workers $N"
    ok $? "without a limit, nginx alone starts $N workers"
    alone=$(fd_count "$(master_pid)")
    stop_nginx
    LIMIT=$((2 * alone + $2))
    diag "nginx alone holds $alone descriptors with $N workers; ulimit -n $LIMIT:" \
        "$2 above nginx's need, the library keeps $((LIMIT / 32 > 8 ? LIMIT / 32 : 8)) free"

    under_limit start_nginx_without
    fds_alone=$(fd_count "$m")
    stop_nginx

    under_limit start_nginx
    said=$(grep 'masteraff: master [0-9]* stops following its children at child' "$T/error.log")
    is "$(echo "$said" | grep -c .)" 1 "one line says the library stopped following"
    diag "${said#*masteraff: }"
    child=$(echo "$said" | sed -n 's/.* at child \([0-9]*\) of the latest start or reload (pid \([0-9]*\),.*/\1 \2/p')
    read -r rank pid <<<"$child"
    [ -n "$rank" ] && [ "$rank" -gt 0 ] && [ "$rank" -lt "$N" ]
    ok $? "it names a child of the reload after worker 0, by rank ($rank) and pid"
    case " $new_set " in *" $pid "*) true ;; *) false ;; esac
    ok $? "the pid it names ($pid) is a worker of the reload"
    echo "$said" | grep -q "too few descriptors left for the program (soft RLIMIT_NOFILE $LIMIT, of which the library keeps $((LIMIT / 32 > 8 ? LIMIT / 32 : 8)) free after each fork, 8 for the first child's channel"
    ok $? "it says why: the limit and what the library keeps free"
    wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
    is "$(cpus_of "$m")" 1 "the master is on worker 0's package after the reload"
    wait_for "grep -q 'masteraff: master $m stays on CPUs 1: worker [0-9]* now leads' '$T/error.log'"
    lead=$(sed -n "s/.*masteraff: master $m stays on CPUs 1: worker \([0-9]*\) now leads.*/\1/p" "$T/error.log")
    case " $new_set " in *" $lead "*) [ "$(cpus_of "$lead")" = 1 ] ;; *) false ;; esac
    ok $? "it follows the new worker 0 (the reload's one worker on CPU 1: ${lead:-none})"
    wait_for "[ \$(fd_count $m) -le $((fds_alone + N + 3)) ]"
    ok $? "the master holds at most one descriptor per worker and 3 more than nginx alone ($(fd_count "$m") against $fds_alone)"
    stop_nginx
}

limit_case "${NOFILE_WORKERS:-64}" 24
limit_case 256 24

done_testing
