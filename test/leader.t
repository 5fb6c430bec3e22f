#!/usr/bin/env bash
# The leader after deaths the master reaped, in the sequences a review
# found the rule got wrong: nginx's wake-ups, not its reads, tell a reload
# from a respawn, and nginx refills its slots lowest first.
#
# - the cache loader exits; a minute later a reload to one worker and no
#   cache forks a single child: that child is the new worker 0, not the
#   loader's respawn, and the master follows it once the old workers are
#   gone;
# - the same with MASTERAFF_AUTO=cpuset under taskset -c 1: the reload to
#   "01 10" is not an auto configuration, and its masks are not mapped;
# - a respawned worker 0 that has not pinned yet dies together with
#   worker 1: the first replacement is worker 0, and the master stays on
#   worker 0's package.
#
# nginx on the fake two-package tree (CPU 0 and CPU 1 are two packages).
# test/holdpin.so keeps workers from pinning while a file exists; the
# master is stopped while both children die, so that it reaps them in one
# wake-up: each step waits for an event, never for a guessed time.
. "$(dirname "$0")/lib.sh"
PORT=18431
use_holdpin
make_twopkg

loader() { children_of "$(master_pid)" "cache loader"; }

# Kills the cache loader (nginx never respawns it) and waits until the
# master has reaped it.
loader_exits() {
    local l
    wait_for '[ -n "$(loader)" ]'
    l=$(loader)
    kill -9 "$l"
    wait_for "[ ! -e /proc/$l ]"
    ok $? "$1: the cache loader is gone, reaped by the master"
}

# conf_one AFFINITY: one worker, no cache.
conf_one() {
    conf_text "worker_cpu_affinity $1;" |
        sed 's/^worker_processes 2;/worker_processes 1;/' >"$T/nginx.conf"
}

# ---- the loader's exit, then a reload to one worker ----

write_conf "10 01"
start_nginx
wait_pinned_workers
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "10 01: the master is on worker 0's package, CPU 1"
loader_exits "10 01"
old=$(workers)
conf_one "01"
kill -HUP "$m"
wait_for "all_gone '$old' && [ \$(workers | wc -w) -eq 1 ] && [ \"\$(cpus_of \$(workers))\" = 0 ]"
ok $? "reload to one worker on CPU 0: the old workers are gone, the new one is on CPU 0"
n0=$(workers)
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "after the loader's exit, the reload's lone worker leads: the master follows it to CPU 0"
grep -qa "masteraff: master $m -> CPUs 0 (package 0), following worker $n0 " "$T/error.log"
ok $? "the line names the new worker 0" || lib_lines | sed 's/^/#   /'
! lib_lines | grep -q "its place is held for a respawn"
ok $? "no place held for a respawn of the loader"
fresh

# ---- MASTERAFF_AUTO=cpuset: the reload after the loader's exit ----

write_conf "auto"
taskset -c 1 env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_AUTO=cpuset \
    "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
wait_workers
m=$(master_pid)
read -r w0 w1 <<<"$(workers)"
wait_for "[ \"\$(cpus_of $w0)\" = 1 ] && [ \"\$(cpus_of $w1)\" = 1 ]"
ok $? "taskset -c 1, auto, MASTERAFF_AUTO=cpuset: both workers mapped onto CPU 1"
loader_exits "auto"
mapped=$(grep -ac "masteraff: worker_cpu_affinity auto mapped" "$T/error.log")
write_conf "01 10"
reload_workers
wait_for "[ \"\$(cpus_of $n0)\" = 0 ] && [ \"\$(cpus_of $n1)\" = 1 ]"
ok $? "after the loader's exit, a reload to 01 10 is not auto: worker 0 on CPU 0, worker 1 on CPU 1, as nginx says" ||
    diag "workers $n0 on $(cpus_of "$n0"), $n1 on $(cpus_of "$n1")"
is "$(grep -ac "masteraff: worker_cpu_affinity auto mapped" "$T/error.log")" "$mapped" \
    "and no new line says a mask was mapped"
fresh

# ---- worker 0, respawned and not pinned yet, dies with worker 1 ----

write_conf "10 01"
LIB="$HOLD $LIB" start_nginx
wait_pinned_workers
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
: >"$HOLDPIN_FILE"
kill -9 "$w0"
wait_for "[ -n \"\$(pgrep -P $m | grep -vxE '$w1|$(children_of "$m" "cache manager")|$(loader)' )\" ]"
r0=$(pgrep -P "$m" | grep -vxE "$w1|$(children_of "$m" "cache manager")|$(loader)")
is "$(cpus_of "$r0")" 0-1 "worker 0 killed: its respawn ($r0) has not pinned"
kill -STOP "$m"
kill -9 "$r0" "$w1"
wait_for "gone $r0 && gone $w1"
kill -CONT "$m"
wait_for "[ ! -e /proc/$r0 ] && [ ! -e /proc/$w1 ] && [ \$(pgrep -P $m | wc -l) -ge 4 ]"
ok $? "the master, stopped while both died, reaps them together and respawns two workers"
rm -f "$HOLDPIN_FILE"
wait_for "[ \$(workers | wc -w) -eq 2 ] && [ \"\$(cpus_of \$(workers | cut -d' ' -f1))\" = 1 ] && [ \"\$(cpus_of \$(workers | cut -d' ' -f2))\" = 0 ]"
ok $? "the respawns pin: worker 0 on CPU 1, worker 1 on CPU 0"
read -r n0 n1 <<<"$(workers)"
wait_for "lib_lines | grep -q 'worker $n0 now leads'"
ok $? "a line says the new worker 0 leads" || lib_lines | sed 's/^/#   /'
is "$(cpus_of "$m")" 1 "the master stays on worker 0's CPU 1"
is "$(moves)" 0 "no line moves it to the new worker 1's package"

done_testing
