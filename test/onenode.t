#!/usr/bin/env bash
# One rule for worker 0's node, at start and after: nginx started under a
# narrower mask than worker 0's (taskset -c 1, systemd's CPUAffinity=: a
# start mask does not bind the workers' sched_setaffinity), on one package
# of two nodes (CPU 0 on node 0, CPU 1 on node 1). Worker 0 pins to all
# of its mask; the start's debug line says so, and the node the start
# prefers is the node the memory follows to when worker 0 pins. The master
# stays within its own mask, and the line that confirms worker 0's pin
# says it was placed there at start, though that is its whole mask.
. "$(dirname "$0")/lib.sh"
PORT=18237
command -v taskset >/dev/null || skip_all "no taskset"
taskset -c 0,1 true 2>/dev/null || skip_all "CPUs 0 and 1 are not both available here"

"$SRCDIR/test/mktree" twonode "$T/sys"

# start_under AFFINITY: nginx under taskset -c 1, with the library.
start_under() {
    write_conf "$1"
    : >"$T/error.log"
    taskset -c 1 env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_LOG=debug \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
    wait_workers
    m=$(master_pid)
}

for run in "11 11:0-1:0" "10 01:1:1"; do
    IFS=: read -r affinity w0cpus node <<<"$run"
    start_under "$affinity"
    wait_for "grep -q 'masteraff: master $m .*for worker' '$T/error.log'"
    lines=$(cat "$T/stderr" "$T/error.log" | grep 'masteraff: ')
    grep -q "worker 0 will pin to CPUs $w0cpus (" <<<"$lines"
    ok $? "$affinity under taskset -c 1: the start says worker 0 will pin to CPUs $w0cpus"
    start_node=$(sed -n 's/.*masteraff: master [0-9]* placed at start on CPUs .*; memory \(cannot \)\{0,1\}prefers\{0,1\} node \([0-9]*\).*/\2/p' <<<"$lines")
    follow_node=$(grep "masteraff: master $m .*for worker" <<<"$lines" | sed -n 's/.*memory not moved to node \([0-9]*\).*/\1/p; s/.*moved [0-9]* pages to node \([0-9]*\).*/\1/p' | head -1)
    is "$start_node $follow_node" "$node $node" "$affinity under taskset -c 1: node $node at start and when worker 0 pins"
    is "$(cpus_of "$m")" 1 "$affinity under taskset -c 1: the master stays within its own CPU 1"
    grep -q "masteraff: master $m stays on CPUs 1 (package 0), placed there at start for worker [0-9]* on CPUs\{0,1\} $w0cpus, confirmed" <<<"$lines"
    ok $? "$affinity under taskset -c 1: worker 0's pin confirms the placement at start"
    [ "$tap_failed" -eq 0 ] || sed 's/^/#   /' <<<"$lines"
    stop_nginx
done
done_testing
