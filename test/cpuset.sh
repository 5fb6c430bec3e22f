# Shared by test/cpuset.t (cgroup v1) and test/cpuset2.t (cgroup2): nginx
# in a cpuset of its own whose CPUs change while it runs, as `docker
# update --cpuset-cpus`, `systemctl set-property nginx.service
# AllowedCPUs=` or a kubelet's CPU manager change them, on the fake tree
# where CPU 0 and CPU 1 are two packages. The kernel rewrites the mask of
# every task in the cpuset: the library takes that for the cpuset's doing,
# not the program's, and follows within the new CPUs. Sourced after
# lib.sh, never run.
PORT=18238
command -v taskset >/dev/null || skip_all "no taskset"
taskset -c 0,1 true 2>/dev/null || skip_all "CPUs 0 and 1 are not both available here"
[ "$(id -u)" = 0 ] || skip_all "not root (a cpuset of its own)"
V1=/sys/fs/cgroup/cpuset
[ -w "$V1/cgroup.procs" ] && [ -r "$V1/cpuset.effective_cpus" ] ||
    skip_all "no cgroup v1 cpuset hierarchy at $V1 to make a cpuset in"
case $(cat "$V1/cpuset.effective_cpus") in
0-1 | 0-*) ;;
*) skip_all "the root cpuset does not hold CPUs 0 and 1" ;;
esac

# The cpuset nginx runs in: a v1 cgroup, made and removed by the test.
CG_NAME=masteraff-test.$$
# Where the test writes the cpuset's files (cpuset2.t: "." once the v1
# mount is hidden), and the cgroup2 files that stand for it (cpuset2.t).
CG=$V1/$CG_NAME
CG2=""
CG2_AT=leaf

cg_make() { # cg_make CPUS
    mkdir "$CG" && cat "$V1/cpuset.mems" >"$CG/cpuset.mems" && cg_set "$1"
}

# cg_set CPUS: what the cgroup's owner does. The kernel applies it to the
# v1 cpuset; cpuset2.t's cgroup2 files say it after (the kernel changes a
# cgroup's CPUs before the masks of its tasks).
cg_set() {
    echo "$1" >"$CG/cpuset.cpus" || return 1
    [ -z "$CG2" ] && return 0
    rm -f "$CG2/$CG_NAME/cpuset.cpus.effective" "$CG2/cpuset.cpus.effective"
    if [ "$CG2_AT" = leaf ]; then
        echo "$1" >"$CG2/$CG_NAME/cpuset.cpus.effective"
    else
        echo "$1" >"$CG2/cpuset.cpus.effective"
    fi
}

cg_remove() {
    [ -d "$CG" ] && rmdir "$CG" 2>/dev/null
    return 0
}

cpuset_cleanup() {
    cleanup
    cg_remove
}
trap cpuset_cleanup EXIT

# Starts nginx with the library inside the cpuset.
start_in_cpuset() {
    sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" \
        env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
}

# Stops nginx and leaves an empty cpuset for the next case.
end_case() {
    stop_nginx
    wait_for "[ -z \"\$(cat '$CG/cgroup.procs')\" ]"
    cg_remove
    : >"$T/error.log"
}

never_taken() {
    ! lib_lines | grep -q 'set by the program or an administrator'
    ok $? "$1: the mask is not taken for the program's"
}

# Respawns the cache manager: the master forks, and looks at its mask.
respawn_cache_manager() {
    local cm new
    cm=$(children_of "$m" "cache manager")
    kill -9 "$cm"
    wait_for "new=\$(children_of $m 'cache manager') && [ -n \"\$new\" ] && [ \"\$new\" != $cm ]"
    children_of "$m" "cache manager"
}

# pinned_on LIST CPU...: each worker in LIST on its CPU, in order.
pinned_on() {
    local list=($1) i=0 c
    shift
    for c in "$@"; do
        [ "$(cpus_of "${list[$i]}")" = "$c" ] || return 1
        i=$((i + 1))
    done
}

# reload_to AFFINITY CPU0 CPU1: a reload with that worker_cpu_affinity;
# waits for the new workers pinned to CPU0 and CPU1 and the old ones gone.
reload_to() {
    write_conf "$1"
    reload_workers &&
        wait_for "pinned_on '$n0 $n1' $2 $3" &&
        wait_for "[ \$(workers | wc -w) -eq 2 ]"
}

# start_following LABEL: nginx in a cpuset of CPUs 0-1 with
# worker_cpu_affinity 10 01, the master on worker 0's CPU 1; sets m, w0
# and w1.
start_following() {
    make_twopkg
    write_conf "10 01"
    cg_make 0-1
    start_in_cpuset
    wait_pinned_workers
    wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
    ok $? "$1: the master is on worker 0's CPU 1"
}

# ---- the issue's case: a one-CPU cpuset widened, then a reload that
# pins worker 0 on the new CPU ----
case_widen() {
    local label="widened, no worker_cpu_affinity at start"
    make_twopkg
    write_conf ""
    cg_make 0
    start_in_cpuset
    wait_workers
    m=$(master_pid)
    is "$(cpus_of "$m")" 0 "$label: the master starts on the cpuset's CPU 0"
    cg_set 0-1
    wait_for "[ \"\$(cpus_of $m)\" = 0-1 ]"
    ok $? "$label: the kernel widens the master's mask to 0-1"
    reload_to "10 01" 1 0
    ok $? "$label: a reload with worker_cpu_affinity 10 01 pins worker 0 on CPU 1"
    wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
    ok $? "$label: the master follows worker 0 to CPU 1 (package 1)"
    said_once "master $m: the cpuset changed to 0-1 (was 0): its original mask is CPUs 0-1 now; master stays on CPUs 0-1 (its original mask), with no worker to follow" \
        "$label: one line says the cpuset changed"
    said_once "master $m -> CPUs 1 (package 1), following worker" "$label: one line says it follows"
    never_taken "$label"
    serves
    ok $? "$label: nginx serves"
    end_case
}

# ---- a cpuset shrunk under a master that follows worker 0, and widened
# back; an administrator's mask after that still wins ----
case_shrink_following() {
    local label="shrunk and widened, worker_cpu_affinity 10 01" cm w0
    start_following "$label"
    cg_set 0
    wait_for "[ \"\$(cpus_of $m)\" = 0 ] && [ \"\$(cpus_of $w0)\" = 0 ]"
    ok $? "$label: the kernel moves the master and worker 0 to CPU 0"
    cm=$(respawn_cache_manager)
    is "$(cpus_of "$cm")" 0 "$label: the next child starts on the new original mask, CPU 0"
    said_once "master $m: the cpuset changed to 0 (was 0-1): its original mask is CPUs 0 now; master stays on CPUs 0 (its original mask): worker $w0's CPUs 1 are outside it" \
        "$label: one line says the cpuset shrank, worker 0's CPU with it"

    cg_set 0-1
    wait_for "[ \"\$(cpus_of $m)\" = 1 ] && [ \"\$(cpus_of $w0)\" = 1 ]"
    ok $? "$label: widened back, the kernel gives the master and worker 0 CPU 1 again"
    cm=$(respawn_cache_manager)
    is "$(cpus_of "$cm")" 0-1 "$label: the next child starts on CPUs 0-1"
    said_once "master $m: the cpuset changed to 0-1 (was 0): its original mask is CPUs 0-1 now; master stays on CPUs 1 (package 1), following worker $w0 on CPUs 1" \
        "$label: one line says the cpuset widened and the master follows worker 0 again"
    reload_to "01 10" 0 1
    ok $? "$label: a reload pins the new worker 0 on CPU 0"
    wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
    ok $? "$label: the master follows it to CPU 0"
    never_taken "$label"

    taskset -p -c 1 "$m" >/dev/null
    cm=$(respawn_cache_manager)
    is "$(cpus_of "$cm")" 1 "$label: after taskset -p -c 1 the next child starts on CPU 1"
    said_once "master $m is on CPUs 1, not the CPUs 0 it was given: its mask was set by the program or an administrator" \
        "$label: an administrator's mask still wins"
    end_case
}

# ---- a cpuset shrunk and widened under a master with nothing to follow
# (on cgroup2, the cgroup's parent holds the CPUs file) ----
case_shrink_idle() {
    local label="shrunk and widened, no worker_cpu_affinity"
    make_twopkg
    write_conf ""
    cg_make 0-1
    start_in_cpuset
    wait_workers
    m=$(master_pid)
    is "$(cpus_of "$m")" 0-1 "$label: the master starts on CPUs 0-1"
    cg_set 0
    wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
    ok $? "$label: the kernel narrows the master's mask to CPU 0"
    reload_workers
    said_once "master $m: the cpuset changed to 0 (was 0-1): its original mask is CPUs 0 now; master stays on CPUs 0 (its original mask), with no worker to follow" \
        "$label: a reload; one line says the cpuset shrank"
    cg_set 0-1
    wait_for "[ \"\$(cpus_of $m)\" = 0-1 ]"
    ok $? "$label: widened back, the kernel gives the master CPUs 0-1"
    reload_to "10 01" 1 0
    ok $? "$label: a reload with worker_cpu_affinity 10 01"
    wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
    ok $? "$label: the master follows worker 0 to CPU 1"
    never_taken "$label"
    end_case
}
