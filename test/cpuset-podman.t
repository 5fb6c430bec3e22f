#!/usr/bin/env bash
# The issue's case in a podman container: Debian's nginx (this machine's
# own, the container's root an overlay of /) with the library, in a
# one-CPU container (--cpuset-cpus 0) without worker_cpu_affinity;
# `podman update --cpuset-cpus 0-1`, then a reload with worker_cpu_affinity
# 10 01: the master follows worker 0 to CPU 1 (package 1 of the fake
# tree). Then `podman update --cpuset-cpus 0` and a reload without it: the
# master is on CPU 0, its new original mask, where it goes back once the
# new worker 0 has not pinned for 3 s. Then, as in a Guaranteed pod given CPU
# 1, `podman update --cpuset-cpus 1` and a reload with worker_cpu_affinity
# auto (MASTERAFF_AUTO=cpuset, set from the start, changes no mask written
# out): both workers get CPU 1 instead of nginx's refused CPU 0, and the
# master, moved there by the kernel, stays with worker 0. Inside, the
# cgroup's cpuset is the container's own mount of the hierarchy (its root
# the container's cgroup). Skipped where podman cannot run a container or
# update one.
. "$(dirname "$0")/lib.sh"
PORT=18239
[ "$(id -u)" = 0 ] || skip_all "not root (podman's store)"
for p in podman runc; do
    command -v "$p" >/dev/null || skip_all "no $p"
done
taskset -c 0,1 true 2>/dev/null || skip_all "CPUs 0 and 1 are not both available here"

C=masteraff-cpuset-$$
podman_cleanup() {
    podman rm -f -t 0 "$C" >/dev/null 2>&1
    rm -rf "$T"
}
trap podman_cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

podman_conf

make_twopkg
write_conf "" "daemon off;"
chmod a+rx "$T"
podman run -d --name "$C" --network none --cpuset-cpus 0 \
    -v "$T:$T" -v "$SRCDIR:$SRCDIR:ro" \
    -e LD_PRELOAD="$LIB" -e MASTERAFF_SYSFS="$T/sys" -e MASTERAFF_AUTO=cpuset \
    --rootfs /:O "$NGINX" -c "$T/nginx.conf" >/dev/null 2>"$T/err" ||
    skip_all "podman cannot run a container here: $(tail -1 "$T/err")"
m=$(podman inspect -f '{{.State.Pid}}' "$C")
# The pid file holds the master's pid in the container: lib.sh's workers
# and reloads find it by its pid here.
master_pid() { echo "$m"; }
wait_workers
ok $? "nginx runs in the container, with two workers"
is "$(cpus_of "$m")" 0 "the master is on the container's CPU 0"

podman update --cpuset-cpus 0-1 "$C" >/dev/null 2>"$T/err" ||
    skip_all "podman cannot update a container's cpuset here: $(tail -1 "$T/err")"
wait_for "[ \"\$(cpus_of $m)\" = 0-1 ]"
ok $? "podman update --cpuset-cpus 0-1: the kernel widens the master's mask"

# ctr_reload AFFINITY CPU0 CPU1: a reload; the new workers pinned, the old gone.
ctr_reload() {
    write_conf "$1" "daemon off;"
    reload_workers &&
        wait_for "[ \"\$(cpus_of $n0)\" = $2 ] && [ \"\$(cpus_of $n1)\" = $3 ]" &&
        wait_workers
}

ctr_reload "10 01" 1 0
ok $? "a reload with worker_cpu_affinity 10 01 pins worker 0 on CPU 1"
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
ok $? "the master follows worker 0 to CPU 1 (package 1)"
said_once "the cpuset changed to 0-1 (was 0): its original mask is CPUs 0-1 now" \
    "one line says the container's cpuset changed"

podman update --cpuset-cpus 0 "$C" >/dev/null
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
ok $? "podman update --cpuset-cpus 0: the kernel moves the master to CPU 0"
ctr_reload "" 0 0
ok $? "a reload without worker_cpu_affinity"
said_once "the cpuset changed to 0 (was 0-1): its original mask is CPUs 0 now" \
    "one line says the cpuset shrank"
said_once "master 1 stays on CPUs 0 (its original mask), no pinned worker left to follow" \
    "the new worker 0 does not pin: the master stays on its original mask, where the kernel put it"

podman update --cpuset-cpus 1 "$C" >/dev/null
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
ok $? "podman update --cpuset-cpus 1: the kernel moves the master to CPU 1"
ctr_reload auto 1 1
ok $? "a reload with worker_cpu_affinity auto: both workers on CPU 1"
# (The lines name pids as the container sees them.)
wait_for "lib_lines | grep -q \"worker_cpu_affinity auto mapped into the cpuset 1 (auto's CPUs 0-1 are not all in it): worker [0-9]* asked for CPU 0, gets CPU 1\""
ok $? "worker 0 says auto is mapped into the container's cpuset"
! grep -aq 'sched_setaffinity() failed' "$T/error.log"
ok $? "no pin refused"
wait_for "lib_lines | grep -q 'master 1 stays on CPUs 1 (package 1), already there for worker [0-9]* on CPU 1 '"
ok $? "the master stays on CPU 1 (package 1), worker 0's"
! lib_lines | grep -q 'set by the program or an administrator'
ok $? "the mask is never taken for the program's"
podman stop -t 10 "$C" >/dev/null
ok $? "podman stop"
done_testing
