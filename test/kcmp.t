#!/usr/bin/env bash
# What a master's forks cost the library in system calls, whatever the
# number of children: it makes one channel (a datagram socket pair) for its
# whole life, and tells its descriptors from the program's by their inode
# (fstat), never by asking the kernel to compare files (kcmp, which
# Docker's seccomp profile refuses) nor by reading /proc/self/fdinfo (a
# line per entry, written out at each read). strace counts those calls
# across a start and a reload of N workers; test/robust.t (the ownsock and
# closefrom modes) shows the inode check at work when the program closes
# every descriptor and takes the numbers back.
. "$(dirname "$0")/lib.sh"
PORT=18800
N=32
command -v strace >/dev/null || skip_all "no strace"
command -v ss >/dev/null || skip_all "no ss (the channel's ends are read from it)"

make_twopkg

# nginx with the library under strace: N workers with worker 0 on CPU 1,
# then a reload with worker 0 on CPU 0; the trace in $T/trace.
write_many_conf "$N" "10 01"
strace -f -qq -o "$T/trace" -e trace=openat,kcmp,socketpair \
    env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
    "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr" &
tracer=$!
bg_pids+=("$tracer")
wait_for "settled_workers $N"
ok $? "$N workers pinned"
m=$(master_pid)
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the master is on worker 0's CPU 1"
is "$(channel_faults "$m")" "" "the master holds its channel's two ends, each of its $N children the end it sends on"
old=$(pgrep -P "$m" | tr '\n' ' ')
write_many_conf "$N" "01 10"
kill -HUP "$m"
wait_for "settled_workers $N '$old'"
ok $? "after a reload, $N new workers pinned and the old ones gone"
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "the master follows the new worker 0 to CPU 0"
is "$(channel_faults "$m")" "" "the same channel serves the new workers"
serves
ok $? "nginx serves"
stop_nginx
wait "$tracer"
! lib_lines | grep -q "will not follow"
ok $? "the library never took its descriptors for the program's"

is "$(grep -c 'kcmp(' "$T/trace")" 0 "no kcmp call, in any process"
is "$(grep -c 'openat(.*"/proc/[^"]*/fdinfo' "$T/trace")" 0 "no fdinfo read, in any process"
# nginx's own channels are stream pairs; the pre-daemon parent of the
# master makes one datagram pair at its daemon fork, the master one. Each
# line starts with the caller's pid (padded to 5 columns).
dgram_pairs() { # dgram_pairs [PID]: the datagram pairs made (by PID)
    awk -v p="${1:-}" '/socketpair\(AF_UNIX, SOCK_DGRAM/ && (p == "" || $1 == p)' \
        "$T/trace" | wc -l
}
is "$(dgram_pairs "$m")" 1 \
    "the master makes one datagram socket pair for a start and a reload of $N workers each"
is "$(dgram_pairs)" 2 \
    "and nginx's daemon fork one, in the process that exits: none in the workers"

done_testing
