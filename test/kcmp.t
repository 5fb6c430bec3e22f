#!/usr/bin/env bash
# How the master tells its epoll set from one the program made under the
# same number. With kcmp it asks the kernel about two entries, whatever
# the number of children: across a start and a reload of N workers it
# reads the set's fdinfo (a line per child, written out at each read) only
# while it has no channel yet. Where kcmp is refused (strace makes it fail
# with EPERM, as Docker's seccomp profile does), it reads the fdinfo as it
# did before, and the master still follows each new worker 0.
. "$(dirname "$0")/lib.sh"
PORT=18104
N=32
command -v strace >/dev/null || skip_all "no strace"

make_twopkg

# traced_run LABEL [STRACE-OPTIONS...]: nginx with the library under
# strace (openat and kcmp), N workers with worker 0 on CPU 1, then a
# reload with worker 0 on CPU 0; the trace in $T/trace.LABEL.
traced_run() {
    local label=$1 old m tracer
    shift
    write_many_conf "$N" "10 01"
    strace -f -qq -o "$T/trace.$label" -e trace=openat,kcmp "$@" \
        env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr" &
    tracer=$!
    wait_for "settled_workers $N"
    ok $? "$label: $N workers pinned"
    m=$(master_pid)
    wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
    is "$(cpus_of "$m")" 1 "$label: the master is on worker 0's CPU 1"
    old=$(pgrep -P "$m" | tr '\n' ' ')
    write_many_conf "$N" "01 10"
    kill -HUP "$m"
    wait_for "settled_workers $N '$old'"
    ok $? "$label: after a reload, $N new workers pinned and the old ones gone"
    wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
    is "$(cpus_of "$m")" 0 "$label: the master follows the new worker 0 to CPU 0"
    serves
    ok $? "$label: nginx serves"
    stop_nginx
    wait "$tracer"
    ! lib_lines | grep -q "will not follow"
    ok $? "$label: the library never took its descriptors for the program's"
    : >"$T/error.log"
}
fdinfo_reads() { grep -c 'openat(.*"/proc/self/fdinfo/' "$T/trace.$1"; }
kcmp_calls() { grep -c 'kcmp(' "$T/trace.$1"; }

# Before its first channel a master reads the fdinfo twice (the set just
# made, then the fork's check): once for nginx's daemon fork, once for
# its first worker.
traced_run kcmp
reads=$(fdinfo_reads kcmp)
[ "$reads" -le 4 ]
ok $? "kcmp: the set's fdinfo read $reads times, only before the first channel (at most 4; $((2 * N)) forks)"
[ "$(kcmp_calls kcmp)" -ge $((2 * N)) ]
ok $? "kcmp: at least two kcmp calls per worker forked ($(kcmp_calls kcmp))"

traced_run refused -e inject=kcmp:error=EPERM
reads=$(fdinfo_reads refused)
[ "$reads" -ge $((2 * N)) ]
ok $? "kcmp refused: the set's fdinfo is read instead, at each fork at least ($reads times, $((2 * N)) forks)"

done_testing
