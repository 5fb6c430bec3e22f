#!/usr/bin/env bash
# Since Linux 6.2 the kernel remembers the mask a thread last asked for
# and keeps it within its cpuset when the cpuset's CPUs change. The
# master's mask is then the library's request, kept: not the program's.
# A one-CPU cpuset widened under nginx with worker_cpu_affinity auto and
# MASTERAFF_AUTO=cpuset, then a reload: the original mask is the widened
# cpuset, and the new workers, the master and the cache manager go where
# they would without the library. A cpuset narrowed to exactly the CPU the
# library asked for, then widened back: the same. An administrator's
# taskset -p to all of a just widened cpuset: on such a kernel only a
# person asks for that, and it is taken as theirs. A worker 0 that asked
# for more CPUs than a one-CPU cpuset had gets them when it is widened:
# the master follows it there. On the fake tree where
# CPU 0 and CPU 1 are two packages, in a cgroup v1 cpuset (test/cpuset.sh).
# Kernels before 6.2 give every task all of its cpuset's new CPUs:
# test/vm.t runs that side in guests of Debian 12's kernel, 6.1
# (test/vm/scenarios.sh, 13).
. "$(dirname "$0")/lib.sh"
. "$SRCDIR/test/cpuset.sh"
PORT=18700

IFS=. read -r major minor _ <<<"$(uname -r)"
[ "$major" -gt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -ge 2 ]; } ||
    skip_all "Linux $(uname -r) gives a cpuset's tasks all its new CPUs (test/vm.t)"

# The master's cache manager other than $1 (a reload's, while the old one
# may still be exiting).
cache_manager_but() { children_of "$m" "cache manager" | grep -vx "$1"; }

# ---- the issue's case: cpuset 1, auto mapped into it, widened, reloaded ----
case_widen_auto() {
    local label="cpuset 1 widened, auto" cm old_cm
    make_twopkg
    write_conf auto
    cg_make 1
    MASTERAFF_AUTO=cpuset start_in_cpuset
    wait_workers
    m=$(master_pid)
    read -r w0 w1 <<<"$(workers)"
    wait_for "[ \"\$(cpus_of $w0)\" = 1 ] && [ \"\$(cpus_of $w1)\" = 1 ]"
    ok $? "$label: auto mapped into the cpuset: both workers on CPU 1"
    said_once "master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1" \
        "$label: the master was placed at start on CPU 1, all of its start mask"
    cg_set 0-1
    wait_for "[ \"\$(cpus_of $w0)\" = 1 ]"
    is "$(cpus_of "$m")" 1 "$label: widened to 0-1, the kernel keeps the master on the CPU 1 the library asked for"
    old_cm=$(children_of "$m" "cache manager")
    reload_to auto 0 1
    ok $? "$label: after a reload the new workers pin to CPUs 0 and 1, as nginx's auto says (nothing to map)"
    said_once "master $m: the cpuset changed to 0-1 (was 1): its original mask is CPUs 0-1 now" \
        "$label: one line says the original mask is the widened cpuset"
    wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
    ok $? "$label: the master follows the new worker 0 to CPU 0 (package 0)"
    said_once "master $m -> CPUs 0 (package 0), following worker $n0" "$label: and says so"
    wait_for "cm=\$(cache_manager_but $old_cm); [ -n \"\$cm\" ]"
    is "$(cpus_of "$cm")" 0-1 "$label: the reload's cache manager starts on CPUs 0-1, as without the library"
    never_taken "$label"
    end_case
}

# ---- narrowed to exactly the CPU the library asked for, widened back ----
case_narrow_to_asked() {
    local label="narrowed to the CPU asked for, widened back" cm
    start_following "$label"
    cg_set 1
    wait_for "[ \"\$(cpus_of $w1)\" = 1 ]"
    cm=$(respawn_cache_manager)
    is "$(cpus_of "$cm")" 1 "$label: narrowed to CPU 1, the next child starts on CPU 1"
    said_once "master $m: the cpuset changed to 1 (was 0-1): its original mask is CPUs 1 now; master stays on CPUs 1 (package 1), following worker $w0 on CPUs 1" \
        "$label: one line says the cpuset narrowed"
    cg_set 0-1
    wait_for "[ \"\$(cpus_of $w1)\" = 0 ]"
    is "$(cpus_of "$m")" 1 "$label: widened back, the kernel keeps the master on CPU 1"
    cm=$(respawn_cache_manager)
    is "$(cpus_of "$cm")" 0-1 "$label: the next child starts on CPUs 0-1, as without the library"
    said_once "master $m: the cpuset changed to 0-1 (was 1): its original mask is CPUs 0-1 now; master stays on CPUs 1 (package 1), following worker $w0 on CPUs 1" \
        "$label: one line says the cpuset widened back, and the original mask with it"
    never_taken "$label"
    end_case
}

# start_in_cpuset_of_1 AFFINITY: nginx in a cpuset of CPU 1 on the
# two-package tree, with two workers; sets m, w0 and w1.
start_in_cpuset_of_1() {
    make_twopkg
    write_conf "$1"
    cg_make 1
    start_in_cpuset
    wait_workers
    m=$(master_pid)
    read -r w0 w1 <<<"$(workers)"
}

# ---- an administrator's taskset -p to all of a just widened cpuset ----
case_taskset_after_widen() {
    local label="taskset -p after a widening" r
    start_in_cpuset_of_1 "10 10"
    wait_for "[ \"\$(cpus_of $m)\" = 1 ] && [ \"\$(cpus_of $w1)\" = 1 ]"
    ok $? "$label: in cpuset 1, the workers and the master on CPU 1"
    cg_set 0-1
    wait_for "[ \"\$(cpus_of $w0)\" = 1 ]"
    is "$(cpus_of "$m")" 1 "$label: widened to 0-1, the kernel keeps the master on CPU 1"
    taskset -p -c 0-1 "$m" >/dev/null
    ok $? "$label: taskset -p -c 0-1 on the master"
    kill -9 "$w1"
    wait_for "r=\$(new_workers '$w0 $w1') && [ -n \"\$r\" ] && [ \"\$(cpus_of \$r)\" = 1 ]"
    ok $? "$label: a worker dies and is respawned"
    said_once "master $m is on CPUs 0-1, not the CPUs 1 it was given: its mask was set by the program or an administrator (all of its changed cpuset, where this kernel keeps the CPUs 1 the library asked for), and the library no longer moves it or its memory" \
        "$label: one line says the mask is the administrator's, and why the cpuset does not explain it"
    is "$(cpus_of "$m")" 0-1 "$label: the master stays on the administrator's CPUs 0-1"
    ! lib_lines | grep -q 'the cpuset changed'
    ok $? "$label: the mask is not taken for the cpuset's doing"
    end_case
}

# ---- worker 0 asked for more than the cpuset gave, and it is widened ----
case_widen_wider_ask() {
    local label="worker 0 asked for 0-1 in cpuset 1, widened"
    start_in_cpuset_of_1 "11 10"
    wait_for "[ \"\$(cpus_of $m)\" = 1 ] && [ \"\$(cpus_of $w0)\" = 1 ]"
    ok $? "$label: worker 0 and the master on CPU 1, all the cpuset has"
    cg_set 0-1
    wait_for "[ \"\$(cpus_of $w0)\" = 0-1 ]"
    ok $? "$label: the kernel gives worker 0 the CPUs 0-1 it asked for"
    respawn_cache_manager >/dev/null
    wait_for "[ \"\$(cpus_of $m)\" = 0-1 ]"
    ok $? "$label: at its next wake-up the master follows worker 0 to both packages"
    said_once "master $m: the cpuset changed to 0-1 (was 1): its original mask is CPUs 0-1 now; master -> CPUs 0-1 (packages 0,1), following worker $w0 on CPUs 0-1" \
        "$label: one line says it, with worker 0's CPUs as the kernel has them now"
    is "$(lib_lines | grep -c " master $m -> ")" 0 "$label: no other move"
    never_taken "$label"
    end_case
}

case_widen_auto
case_narrow_to_asked
case_taskset_after_widen
case_widen_wider_ask
done_testing
