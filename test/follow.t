#!/usr/bin/env bash
# The master follows worker 0's package, on a real nginx and a fake sysfs
# tree where CPU 0 and CPU 1 are two packages: following alone, without
# the placement at start (test/early.t).
. "$(dirname "$0")/lib.sh"
PORT=18081
export MASTERAFF_EARLY=off

make_twopkg
write_conf "10 01"
start_nginx
ok $? "nginx starts with the library"
wait_workers
m=$(master_pid)
read -r w0 w1 <<<"$(workers)"
wait_for '[ "$(cpus_of $m)" = 1 ]'
is "$(cpus_of "$m")" 1 "master follows worker 0 (CPU 1) to package 1"
is "$(cpus_of "$w0")" 1 "worker 0 is on CPU 1"
is "$(cpus_of "$w1")" 0 "worker 1 is on CPU 0"
cm=$(children_of "$m" "cache manager")
is "$(cpus_of "$cm")" 0-1 "the cache manager, forked after the move, keeps the original mask"
grep -q "masteraff: master $m -> CPUs 1 (package 1), following worker $w0 on CPU 1 after [0-9]*us" "$T/error.log"
ok $? "error.log has the line for the move"
is "$(grep -c "masteraff: master $m ->" "$T/error.log")" 1 "exactly one line for the start"
serves
ok $? "nginx serves"

kill -9 "$w0"
wait_for '[ "$(workers | wc -w)" -eq 2 ] && ! echo " $(workers) " | grep -q " $w0 "'
n0=$(workers | tr ' ' '\n' | grep -vx "$w1")
wait_for '[ "$(cpus_of $n0)" = 1 ]'
wait_for 'lib_lines | grep -q "worker $n0 now leads"'
is "$(cpus_of "$n0")" 1 "respawned worker 0 pins to CPU 1"
is "$(cpus_of "$m")" 1 "master stays on CPU 1 after worker 0 is killed and respawned"
is "$(grep -c "masteraff: master $m ->" "$T/error.log")" 1 "and moves no more"
grep -q "masteraff: master $m stays on CPUs 1: worker $n0 now leads, on CPU 1 as the worker before it" "$T/error.log"
ok $? "one line says the respawned worker 0 leads, and the master stays"

old="$(workers)"
write_conf "01 10"
kill -HUP "$m"
wait_for '[ "$(cpus_of $m)" = 0 ]'
is "$(cpus_of "$m")" 0 "reload with 01 10: master follows the new worker 0 to CPU 0"
for p in $old; do kill -0 "$p" 2>/dev/null && echo "# old worker $p still alive"; done
read -r n0 n1 <<<"$(workers)"
is "$(cpus_of "$n0") $(cpus_of "$n1")" "0 1" "new workers on CPUs 0 and 1"
grep -q "following worker $n0 on CPU 0" "$T/error.log"
ok $? "the log names the new worker 0"

write_conf ""
kill -HUP "$m"
wait_for '[ "$(cpus_of $m)" = 0-1 ]'
is "$(cpus_of "$m")" 0-1 "reload without worker_cpu_affinity: master back to its original mask"
grep -q "master $m -> CPUs 0-1 (its original mask)" "$T/error.log"
ok $? "the log says it went back"
serves
ok $? "nginx still serves"
done_testing
