#!/usr/bin/env bash
# Placement at start: before main(), the library reads the configuration
# nginx will read, places the master where worker 0 will be, and says so
# in error.log when worker 0 confirms it. In doubt it does not, and says
# why at debug level. On a fake tree where CPU 0 and CPU 1 are two
# packages, and on this machine's own (one package).
. "$(dirname "$0")/lib.sh"
PORT=18221
make_twopkg

lib_stderr() { grep -a 'masteraff: ' "$T/stderr"; }

# ---- placed at start, confirmed by worker 0 ----
write_conf "10 01"
MASTERAFF_LOG=debug start_nginx
wait_pinned_workers
ok $? "the workers pin themselves to CPUs 1 and 0"
lib_stderr | grep -q "\[debug\] .*masteraff: read 1 configuration file: $T/nginx.conf$"
ok $? "at load, a debug line names the configuration read"
lib_stderr | grep -q "\[debug\] .*masteraff: worker 0 will pin to CPUs 1 (worker_cpu_affinity at $T/nginx.conf:2)"
ok $? "and the prediction, with where the mask is set"
lib_stderr | grep -q "\[debug\] .*masteraff: master [0-9]* placed at start on CPUs 1 (package 1); memory prefers node 0"
ok $? "and the placement"
wait_for "lib_lines | grep -q 'placed there at start'"
lib_lines | grep -q "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed [0-9]*ms after the start; "
ok $? "error.log: worker 0 confirmed the placement at start"
is "$(lib_lines | grep -c 'master [0-9]* ->')" 0 "no move after the start"
is "$(cpus_of "$m")" 1 "the master is on CPU 1"
is "$(cpus_of "$(children_of "$m" "cache manager")")" 0-1 "the cache manager starts with the original mask"
fresh

# ---- switched off: following only ----
MASTERAFF_EARLY=off MASTERAFF_LOG=debug start_nginx
wait_pinned_workers
lib_stderr | grep -q "no placement at start: MASTERAFF_EARLY=off"
ok $? "MASTERAFF_EARLY=off: a debug line says so"
wait_for "lib_lines | grep -q 'master $m -> CPUs 1'"
lib_lines | grep -q "\[notice\] .*masteraff: master $m -> CPUs 1 (package 1), following worker $w0 on CPU 1"
ok $? "MASTERAFF_EARLY=off: the master follows worker 0 when it pins"
fresh

# ---- doubt: no placement, one debug line ----
write_conf "10 01" "master_process off;"
MASTERAFF_LOG=debug start_nginx
wait_for "[ -s $T/nginx.pid ]"
lib_stderr | grep -q "no placement at start: master_process off"
ok $? "master_process off: no placement, and the debug line says why"
is "$(cpus_of "$(master_pid)")" 0-1 "master_process off: the process keeps its mask"
fresh

write_conf "10 01"
out=$(env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_LOG=debug "$NGINX" -t -c "$T/nginx.conf" 2>&1)
is "$?" 0 "nginx -t: exit 0"
grep -q "no placement at start: nginx -t: not a server start" <<<"$out"
ok $? "nginx -t: no placement, and the debug line says why"
! grep -q "placed at start" <<<"$out"
ok $? "nginx -t: nothing placed"

MASTERAFF_LOG=debug taskset -c 0 env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
    "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
wait_workers
m=$(master_pid)
lib_stderr | grep -q "no placement at start: worker 0's CPUs 1 are outside the master's CPUs 0"
ok $? "started on CPU 0 only: worker 0's CPU 1 is outside its mask, no placement"
wait_for "lib_lines | grep -q 'outside master'"
is "$(cpus_of "$m")" 0 "and the master keeps CPU 0"
fresh

# ---- nothing to follow ----
write_conf ""
MASTERAFF_LOG=debug start_nginx
wait_workers
m=$(master_pid)
lib_stderr | grep -q "no placement at start: .*worker_cpu_affinity"
ok $? "no worker_cpu_affinity: no placement, and the debug line says why"
wait_for "lib_lines | grep -q 'nothing to follow'"
lib_lines | grep -q "\[notice\] .*masteraff: master $m: none of its children pinned itself within 3 s of their fork; nothing to follow (worker 0 pins itself only with worker_cpu_affinity)"
ok $? "error.log: a notice says there is nothing to follow, and why"
is "$(lib_lines | grep -c 'nothing to follow')" 1 "said once"
fresh

# ---- this machine's own topology: one package ----
write_conf "10 01"
MASTERAFF_SYSFS=/sys start_nginx
wait_pinned_workers
wait_for "lib_lines | grep -q 'master $m stays on'"
lib_lines | grep -q "\[notice\] .*masteraff: master $m stays on CPUs $(cpus_of "$m") (package 0), placed there at start for worker $w0 on CPU 1, confirmed"
ok $? "one package: error.log says worker 0's pin confirms the placement at start (its whole mask)"
fresh

done_testing
