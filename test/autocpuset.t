#!/usr/bin/env bash
# MASTERAFF_AUTO=cpuset: "worker_cpu_affinity auto" within the CPUs the
# workers may use. nginx's auto asks for CPUs 0..n-1 whatever the start
# mask or the cgroup cpuset; with the setting, a worker of an auto
# configuration whose CPUs are not all allowed gets the allowed CPU of its
# rank (wrapping), the placement at start predicts it, and the
# generation's first worker says so once. On the fake tree where CPU 0
# and CPU 1 are two packages (and ones where they are two nodes, and two of
# four nodes over two packages): first under taskset -c 1, then in a real
# cpuset of CPU 1, which refuses CPU 0, also after a reload that comes in
# the wake-up of a respawn where the I/O counts are hidden.
. "$(dirname "$0")/lib.sh"
PORT=18251
make_twopkg

mapped_lines() { grep -ac 'masteraff: worker_cpu_affinity auto mapped into the cpuset' "$T/error.log"; }

# start_on CPUS [VAR=VALUE...]: nginx with the library, started on CPUS.
start_on() {
    local cpus=$1
    shift
    taskset -c "$cpus" env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" "$@" \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
}

# A worker waiting in its event loop has pinned itself (or failed to).
settled() { [ -n "${1:-}" ] && grep -q epoll "/proc/$1/wchan" 2>/dev/null; }

# on W0 W1 CPUS0 CPUS1: workers W0 and W1, once settled, are on CPUS0 and
# CPUS1.
on() {
    wait_for "settled '$1' && settled '$2'" &&
        [ "$(cpus_of "$1")" = "$3" ] && [ "$(cpus_of "$2")" = "$4" ]
}

# Waits for the two workers, then checks that they are on CPUs $1 and $2;
# sets m, w0 and w1.
wait_workers_on() {
    wait_workers || return 1
    m=$(master_pid)
    read -r w0 w1 <<<"$(workers)"
    on "$w0" "$w1" "$1" "$2"
}

# ---- without the setting: nginx's auto, untouched ----
write_conf auto
start_on 1 MASTERAFF_LOG=debug
wait_workers_on 0 1
ok $? "without MASTERAFF_AUTO: started on CPU 1, worker 0 pins to CPU 0 and worker 1 to CPU 1, as nginx's auto says"
grep -q "no placement at start: worker 0's CPUs 0 are outside the master's CPUs 1" "$T/stderr"
ok $? "and no placement at start: worker 0's CPU is outside the master's mask"
wait_for "lib_lines | grep -q 'outside master'"
is "$(mapped_lines)" 0 "nothing mapped, nothing said of it"
fresh

# ---- with it: both workers within the start mask, worker 0 predicted ----
start_on 1 MASTERAFF_AUTO=cpuset MASTERAFF_LOG=debug
wait_workers_on 1 1
ok $? "MASTERAFF_AUTO=cpuset: worker 0 (asked CPU 0) and worker 1 (CPU 1, wrapping) are both on CPU 1"
grep -q "worker 0 will pin to CPUs 1 (worker_cpu_affinity at $T/nginx.conf:2; auto's CPUs 0-1 mapped into the cpuset 1)" "$T/stderr"
ok $? "the prediction at start is the mapped CPU, and says why"
grep -q "master [0-9]* placed at start on CPUs 1 (package 1)" "$T/stderr"
ok $? "the master is placed at start on the mapped CPU's package"
wait_for "lib_lines | grep -q 'placed there at start'"
lib_lines | grep -q "masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed"
ok $? "worker 0's pin confirms the placement at start"
lib_lines | grep -q "\[notice\] $w0#$w0: masteraff: worker_cpu_affinity auto mapped into the cpuset 1 (auto's CPUs 0-1 are not all in it): worker $w0 asked for CPU 0, gets CPU 1; each worker the allowed CPU of its rank"
ok $? "worker 0 says the mapping in error.log"
is "$(mapped_lines)" 1 "once for the start"
! grep -aq 'sched_setaffinity() failed' "$T/error.log"
ok $? "nginx saw its calls succeed"
is "$(cpus_of "$m")" 1 "the master is on CPU 1"

# ---- a respawn: mapped again, not said again ----
kill -9 "$w0"
wait_for "[ \$(new_workers '$w0 $w1' | wc -w) -eq 1 ]"
r=$(new_workers "$w0 $w1")
wait_for "settled $r"
grep -aq "$r#$r: sched_setaffinity(): using cpu #0" "$T/error.log" && [ "$(cpus_of "$r")" = 1 ]
ok $? "the respawned worker 0 asks for CPU 0 and is on CPU 1"
is "$(mapped_lines)" 1 "a respawn is no new generation: nothing said"

# ---- a reload: mapped and said once more ----
reload_workers
on "$n0" "$n1" 1 1
ok $? "after a reload both new workers are on CPU 1"
wait_for "[ \$(mapped_lines) -eq 2 ]"
ok $? "the reload's worker 0 says the mapping once"
lib_lines | grep -q "the configuration re-read says worker_cpu_affinity auto, CPUs 0-1"
ok $? "the master read the configuration again for the reload"

# ---- a reload to explicit masks: never mapped ----
write_conf "01 10"
reload_workers
on "$n0" "$n1" 0 1
ok $? "reloaded to worker_cpu_affinity 01 10: worker 0 on CPU 0, outside the start mask, as asked"
is "$(mapped_lines)" 2 "nothing more mapped"
lib_lines | grep -q "the configuration re-read does not say worker_cpu_affinity auto"
ok $? "the master read that the configuration no longer says auto"
fresh

# ---- explicit masks from the start ----
start_on 1 MASTERAFF_AUTO=cpuset
wait_workers_on 0 1
ok $? "worker_cpu_affinity 01 10 with MASTERAFF_AUTO=cpuset: worker 0 on CPU 0, as without it"
is "$(mapped_lines)" 0 "nothing mapped"
fresh

# ---- auto's CPUs all allowed: nothing to map ----
write_conf auto
start_on 0-1 MASTERAFF_AUTO=cpuset
wait_workers_on 0 1
ok $? "started on CPUs 0-1: workers on CPUs 0 and 1, as nginx's auto says"
wait_for "lib_lines | grep -q 'placed there at start'"
is "$(mapped_lines)" 0 "and nothing said of a mapping"
fresh

# ---- off, and a bad value: said once, ignored ----
start_on 1 MASTERAFF_AUTO=off
wait_workers_on 0 1
ok $? "MASTERAFF_AUTO=off: worker 0 on CPU 0, as without it"
is "$(mapped_lines)" 0 "MASTERAFF_AUTO=off: nothing mapped"
fresh

start_on 1 MASTERAFF_AUTO=cpusets
wait_workers_on 0 1
ok $? "MASTERAFF_AUTO=cpusets (bad): ignored, worker 0 on CPU 0"
grep -q '\[warn\] .*masteraff: MASTERAFF_AUTO="cpusets" is not valid (accepted: cpuset, off); ignored: worker_cpu_affinity auto is left as nginx makes it' "$T/stderr"
ok $? "the bad value is said, naming the value and the accepted ones"
wait_for "lib_lines | grep -q 'outside master'"
ok $? "the library is not inert: it still decides (worker 0 outside the master's mask)"
is "$(cat "$T/stderr" "$T/error.log" | grep -c 'MASTERAFF_AUTO=')" 1 "said once, neither again nor in error.log"
is "$(mapped_lines)" 0 "nothing mapped"
fresh

# ---- the command's --auto-cpuset ----
taskset -c 1 "$SRCDIR/masteraff" --library "$LIB" --sysfs "$T/sys" --auto-cpuset \
    -- "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
wait_workers_on 1 1
ok $? "masteraff --auto-cpuset: both workers on CPU 1"
is "$(mapped_lines)" 1 "and the mapping said once"

# ---- the binary upgrade keeps the setting ----
old_master=$m
kill -USR2 "$m"
wait_for "[ -s $T/nginx.pid.oldbin ] && [ -s $T/nginx.pid ] && [ \"\$(master_pid)\" != $old_master ]"
new_master=$(master_pid)
wait_for "[ \$(children_of $new_master worker | wc -w) -eq 2 ]"
read -r u0 u1 <<<"$(children_of "$new_master" worker | tr '\n' ' ')"
on "$u0" "$u1" 1 1
ok $? "binary upgrade: the new master's workers are mapped too (the setting came along)"
is "$(mapped_lines)" 2 "and the new master's worker 0 says it"
kill -QUIT "$old_master"
wait_for "gone $old_master"
fresh

# ---- two nodes: placed at start on the mapped CPU's node ----
"$SRCDIR/test/mktree" twonode "$T/twonode"
write_conf auto
start_on 1 MASTERAFF_AUTO=cpuset MASTERAFF_SYSFS="$T/twonode" MASTERAFF_SCOPE=node MASTERAFF_LOG=debug
wait_workers_on 1 1
ok $? "two nodes: both workers on CPU 1"
grep -q "master [0-9]* placed at start on CPUs 1 (node 1); memory" "$T/stderr"
ok $? "two nodes: the master placed at start on the mapped CPU's node 1" || sed 's/^/#   /' "$T/stderr"
fresh

# ---- four nodes over two packages, CPUs numbered across them ----
"$SRCDIR/test/mktree" interleaved128 "$T/four"
write_conf auto
start_on 1 MASTERAFF_AUTO=cpuset MASTERAFF_SYSFS="$T/four" MASTERAFF_SCOPE=node MASTERAFF_LOG=debug
wait_workers_on 1 1
ok $? "four nodes: both workers on CPU 1"
grep -q "master [0-9]* placed at start on CPUs 1 (node 2); memory" "$T/stderr"
ok $? "four nodes: the master placed at start on the mapped CPU's node 2" || sed 's/^/#   /' "$T/stderr"
fresh

# ---- a real cpuset: the kernel refuses CPU 0 ----
if ! make_cpuset 1; then
    skip "no cgroup cpuset can be made here" "a real cpuset"
    done_testing
    exit
fi
trap 'cleanup; drop_cpuset' EXIT

# in_cpuset VAR=VALUE...: nginx with the library, started in the cpuset.
in_cpuset() {
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
        env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" "$@" \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
}

in_cpuset MASTERAFF_LOG=notice
wait_workers

wait_for "grep -aq 'sched_setaffinity() failed (22: Invalid argument)' $T/error.log"
ok $? "cpuset 1, without the setting: the kernel refuses worker 0's CPU 0 and nginx says so"
is "$(mapped_lines)" 0 "nothing mapped"
fresh

in_cpuset MASTERAFF_AUTO=cpuset
wait_workers_on 1 1
wait_for "[ \$(mapped_lines) -eq 1 ]"
ok $? "cpuset 1, MASTERAFF_AUTO=cpuset: worker 0 says auto is mapped into the cpuset 1"
wait_for "lib_lines | grep -q 'placed there at start'"
lib_lines | grep -q "masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed"
ok $? "the master was placed at start where worker 0 pinned"
! grep -aq 'sched_setaffinity() failed' "$T/error.log"
ok $? "no pin refused"
fresh

# ---- the cpuset shrinks while nginx runs: the next reload maps ----
echo 0-1 >"$cg/cpuset.cpus"
in_cpuset MASTERAFF_AUTO=cpuset
wait_workers_on 0 1
ok $? "cpuset 0-1: workers on CPUs 0 and 1, as nginx's auto says"
is "$(mapped_lines)" 0 "nothing mapped"
echo 1 >"$cg/cpuset.cpus"
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
reload_workers
on "$n0" "$n1" 1 1
ok $? "shrunk to CPU 1, after a reload: both new workers on CPU 1"
wait_for "[ \$(mapped_lines) -eq 1 ]"
lib_lines | grep -q "\[notice\] $n0#$n0: masteraff: worker_cpu_affinity auto mapped into the cpuset 1 "
ok $? "the reload's worker 0 says auto is mapped into the new cpuset"
! grep -aq 'sched_setaffinity() failed' "$T/error.log"
ok $? "no pin refused"
fresh

# ---- a reload in the wake-up that respawns the cache manager, where the
# I/O counts are hidden: the generation is opened by the reload's fork
# after the respawn, and its configuration is read all the same ----
NOIO=$SRCDIR/test/noio.so
[ -f "$NOIO" ] || { echo "Bail out! $NOIO is not built (make test/noio.so)"; exit 1; }
echo 1 >"$cg/cpuset.cpus"
write_conf "10 10"
LIB="$NOIO $LIB" in_cpuset MASTERAFF_AUTO=cpuset
wait_workers_on 1 1
ok $? "cpuset 1, masks written out, no I/O counts: both workers on CPU 1"
old=$(workers)
kill -STOP "$m"
kill -9 "$(children_of "$m" "cache manager")"
write_conf auto
kill -HUP "$m"
kill -CONT "$m"
wait_new_workers "$old"
read -r n0 n1 <<<"$(new_workers "$old")"
on "$n0" "$n1" 1 1
ok $? "the manager's respawn and a reload to auto in one wake-up: both new workers on CPU 1"
! grep -aq 'sched_setaffinity() failed' "$T/error.log"
ok $? "no pin refused: auto is mapped for the reload's workers"
fresh

done_testing
