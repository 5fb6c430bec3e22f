#!/usr/bin/env bash
# The leader after a death: a reload that comes soon after a child died
# (killed, or the cache loader's own exit) is told from a respawn, and the
# master follows the new worker 0 once the old workers are gone. And a new
# worker 0 on another node of the master's own package is said, with its
# memory moved, though the master's CPUs do not change.
. "$(dirname "$0")/lib.sh"
PORT=18211
make_twopkg

lib_lines() { grep -a 'masteraff: ' "$T/error.log" "$T/stderr" 2>/dev/null; }

# The pid of the master's child in ROLE, the Nth of that role (from 1).
child_in_role() { children_of "$(master_pid)" "$1" | sed -n "${2:-1}p"; }

# kill_then_reload ROLE N AFFINITY CPUS: kills the Nth child in ROLE, and
# 20 ms later reloads with AFFINITY; the master must end on CPUS once the
# old workers are gone.
kill_then_reload() {
    local role=$1 n=$2 affinity=$3 want=$4 victim old
    wait_for "[ \$(workers | wc -w) -eq 2 ] && [ -n \"\$(child_in_role '$role' $n)\" ]"
    victim=$(child_in_role "$role" "$n")
    old=$(workers)
    write_conf "$affinity"
    kill -9 "$victim"
    sleep 0.02
    kill -HUP "$m"
    wait_for "[ \$(new_workers '$old' | wc -w) -eq 2 ] && [ \$(workers | wc -w) -eq 2 ]"
    wait_for "[ \"\$(cpus_of $m)\" = $want ]"
    is "$(cpus_of "$m")" "$want" "$role #$n killed, reload 20 ms later to ${affinity:-no affinity}: the master ends on $want"
}

write_conf "10 01"
start_nginx
wait_pinned_workers
for round in 1 2 3; do
    kill_then_reload worker 2 "01 10" 0
    kill_then_reload worker 1 "10 01" 1
done
kill_then_reload "cache manager" 1 "01 10" 0
kill_then_reload "cache loader" 1 "10 01" 1
kill_then_reload worker 2 "" 0-1
kill_then_reload worker 1 "01 10" 0
! lib_lines | grep -qE '\[(error|crit|alert|emerg)\]'
ok $? "no library line above warn"
stop_nginx

# One package, CPU 0 on node 0 and CPU 1 on node 1: the master's CPUs are
# the package's whoever worker 0 is, its memory follows worker 0's node.
rm -rf "$T/sys"
"$SRCDIR/test/mktree" twonode "$T/sys"
: >"$T/error.log"
write_conf "10 01"
start_nginx
wait_pinned_workers
wait_for "lib_lines | grep -q 'master $m stays on'"
lib_lines | grep -qE "\[notice\] .*masteraff: master $m stays on CPUs 0-1 \(package 0\), (already|placed) there (at start )?for worker $w0 on CPU 1.*; memory not moved to node 1 \(node 1 does not exist\)"
ok $? "worker 0 on node 1: a line says the master stays on the package, and why its memory stays"
write_conf "01 10"
reload_workers
wait_for "lib_lines | grep -q 'for worker $n0 '"
lib_lines | grep -q "\[notice\] .*masteraff: master $m stays on CPUs 0-1 (package 0), already there for worker $n0 on CPU 0.*; moved [0-9]* pages to node 0"
ok $? "reload moving worker 0 to node 0: a line says the memory moved to node 0"
[ $tap_failed -eq 0 ] || lib_lines | sed 's/^/# /'
done_testing
