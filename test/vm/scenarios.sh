#!/bin/sh
# Runs inside the test VM (busybox sh, as /test.sh): libmasteraff with
# Debian's nginx on a real kernel with an emulated topology, the real sysfs
# and no MASTERAFF_SYSFS. Starts with smoke.sh's checks of the VM itself.
# TAP on stdout.

SMOKE_SOURCED=1 . /smoke.sh

LIB=/usr/lib/libmasteraff.so

# far: a CPU in the last package (or node), near: one in the first. The
# expected units are written out from the topology test/vm/run promises.
case $MA_TOPO in
kunpeng)
    far=6 near=1 far_node=3 all=0-7
    far_package=4-7 near_package=0-3 far_numa=6-7 far_llc=6-7 far_die=4-7
    near_numa=0-1 wide="package 4-7 2 3"
    ;;
epyc-nps4)
    # One package: the unit beyond the node that leaves node 0 is the die.
    far=6 near=1 far_node=3 all=0-7
    far_package=0-7 near_package=0-7 far_numa=6-7 far_llc=4-7 far_die=4-7
    near_numa=0-1 wide="die 4-7 2 3"
    ;;
2s)
    far=6 near=1 far_node=1 all=0-7
    far_package=4-7 near_package=0-3 far_numa=4-7 far_llc=4-7 far_die=4-7
    near_numa=0-3 wide="package 4-7 1"
    ;;
arm64-kunpeng)
    # The LLC is the L1 here (see smoke.sh), dies are absent (the die
    # scope falls back to the package).
    far=6 near=1 far_node=3 all=0-7
    far_package=4-7 near_package=0-3 far_numa=6-7 far_llc=6 far_die=4-7
    near_numa=0-1 far_cluster=6-7 wide="package 4-7 2 3"
    ;;
arm64-kunpeng-acpi)
    # One node (see smoke.sh); the LLC is one L2 over every CPU.
    far=6 near=1 far_node=0 all=0-7
    far_package=4-7 near_package=0-3 far_numa=0-7 far_llc=0-7 far_die=4-7
    near_numa=0-7 far_cluster=6-7
    ;;
1s)
    far=3 near=1 far_node=0 all=0-3
    far_package=0-3 near_package=0-3 far_numa=0-3 far_llc=0-3 far_die=0-3
    near_numa=0-3
    ;;
esac

cpus_of() { sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' "/proc/$1/status"; }
master() { cat /run/nginx.pid 2>/dev/null; }
# The master's workers in pid order (busybox has no pgrep).
workers() {
    ps -o pid,ppid,args | awk -v m="$(master)" \
        '$2 == m && /nginx: worker process/ { print $1 }' | paste -sd ' '
}
# Waits up to $2 seconds (default 20: TCG is slow) for a shell condition.
wait_for() {
    i=0
    while [ $i -lt $((${2:-20} * 10)) ]; do
        eval "$1" && return 0
        sleep 0.1
        i=$((i + 1))
    done
    return 1
}
# nginx's mask for CPU $1: a 1 followed by $1 zeros.
mask() {
    printf 1
    [ "$1" -eq 0 ] || printf '0%.0s' $(seq "$1")
}

conf() { # conf AFFINITY [MAIN-CONTEXT-EXTRA] [HTTP-EXTRA]
    cat >/tmp/n.conf <<EOF
worker_processes 2;
${1:+worker_cpu_affinity $1;}
pid /run/nginx.pid;
error_log /tmp/error.log notice;
${2:-}
events { worker_connections 64; }
http {
    access_log off;
    ${3:-}
    limit_req_zone \$binary_remote_addr zone=perip:8m rate=10000r/s;
    server {
        listen 127.0.0.1:8080;
        location / { limit_req zone=perip burst=1000; return 200 "hello\n"; }
        location /status { stub_status; }
    }
}
EOF
}

# start [VAR=VALUE...] [numactl ...]: nginx with the library.
start() {
    rm -f /tmp/error.log
    env LD_PRELOAD=$LIB "$@" /usr/sbin/nginx -c /tmp/n.conf
    wait_for '[ -s /run/nginx.pid ] && [ "$(workers | wc -w)" -eq 2 ]'
}

stop() {
    m=$(master)
    [ -n "$m" ] || return 0
    kill -QUIT "$m"
    wait_for '[ ! -e /run/nginx.pid ]' || kill -9 "$m"
}

masteraff_lines() { grep -c 'masteraff: master' /tmp/error.log; }

# The percentage of a process's pages of KIND (private or shared) on node
# N, from `masteraff status`: "... private=node0:12,node3:400 shared=node3:16".
percent_on() { # percent_on KIND NODE PID
    masteraff status "$3" | awk -v k="$1" -v n="node$2" -v p="$3" '$1 == p {
        for (i = 2; i <= NF; i++) {
            if (index($i, k "=") != 1) continue
            split(substr($i, length(k) + 2), parts, ",")
            for (j in parts) { split(parts[j], kv, ":"); c[kv[1]] = kv[2]; t += kv[2] }
        }
        print (t ? int(100 * c[n] / t) : 100) }'
}

# "PERCENT ON TOTAL": of a process's pages of KIND (as percent_on counts
# them), how many are on the NODES (a list).
pages_in() { # pages_in KIND "NODES" PID [STATUS-OUTPUT-FILE]
    { if [ -n "${4:-}" ]; then cat "$4"; else masteraff status "$3"; fi; } | awk -v k="$1" -v nodes="$2" -v p="$3" '$1 == p {
        split(nodes, ns, " ")
        for (x in ns) want["node" ns[x]] = 1
        for (i = 2; i <= NF; i++) {
            if (index($i, k "=") != 1) continue
            split(substr($i, length(k) + 2), parts, ",")
            for (j in parts) {
                split(parts[j], kv, ":"); t += kv[2]
                if (kv[1] in want) on += kv[2]
            }
        }
        printf "%d %d %d\n", (t ? int(100 * on / t) : 0), on, t }'
}

# 1. worker 0 in the last package; memory starts on node 0. With a single
# package, the node scope shows the memory moving between nodes.
cache="proxy_cache_path /tmp/cache keys_zone=cache:1m;"
conf "$(mask $far) $(mask $near)" "" "$cache"
scope=package want=$far_package near_want=$near_package
if [ "$far_package" = "$all" ] && [ "$far_numa" != "$all" ]; then
    scope=node want=$far_numa near_want=$near_numa
fi
start MASTERAFF_SCOPE=$scope numactl --preferred=0
m=$(master)
wait_for "[ \"\$(cpus_of $m)\" = $want ]"
is "$(cpus_of "$m")" "$want" "worker 0 on CPU $far: master on its $scope ($want)"
if [ "$want" = "$all" ]; then
    grep 'masteraff:' /tmp/error.log | sed 's/^/# /'
    wait_for 'grep -q "masteraff: master" /tmp/error.log'
    is "$(masteraff_lines)" 1 "one package: the master is not moved, one line"
    grep -q "masteraff: master $m stays on CPUs $all (package [0-9]*), placed there at start for worker .*, confirmed" /tmp/error.log
    ok $? "one package: the line says worker 0's pin confirms the placement at start"
elif [ "$nnodes" -eq 1 ]; then
    wait_for 'grep -q "masteraff: master" /tmp/error.log'
    grep 'masteraff:' /tmp/error.log | sed 's/^/# /'
    # The unit is named by the kernel's id: a PPTT offset under ACPI.
    id=$(cat /sys/devices/system/cpu/cpu$far/topology/physical_package_id)
    # (placed there at start, or followed there)
    is "$(grep -c "masteraff: master $m \(-> \|stays on \)CPUs $want (package $id)," /tmp/error.log)" \
        1 "one node: the log line names package $id"
else
    wait_for 'grep -q "masteraff: master .* moved" /tmp/error.log'
    grep 'masteraff:' /tmp/error.log | sed 's/^/# /'
    is "$(percent_on shared "$far_node" "$m" | awk '{print ($1 >= 95)}')" 1 \
        "at least 95% of the shared zones' pages on node $far_node"
    # The master's own later forks leave it fresh copies of the pages it
    # writes; the library moves those too once the forks are over.
    wait_for "[ \$(percent_on private $far_node $m) -ge 95 ]"
    masteraff status "$m" | sed 's/^/# status: /'
    is "$(percent_on private "$far_node" "$m" | awk '{print ($1 >= 95)}')" 1 \
        "at least 95% of the master's private pages on node $far_node"
fi
i=0
while [ $i -lt 20 ]; do
    timeout 10 wget -q -O /dev/null http://127.0.0.1:8080/
    i=$((i + 1))
done
requests=$(timeout 10 wget -q -O - http://127.0.0.1:8080/status | awk 'NR == 3 { print $3 }')
is "$requests" 21 "stub_status counts every request after the move"

# 2. respawn of worker 0
read -r w0 w1 <<EOF
$(workers)
EOF
kill -9 "$w0"
wait_for "[ \"\$(workers | wc -w)\" -eq 2 ] && ! workers | grep -qw $w0"
sleep 1
is "$(cpus_of "$m")" "$want" "worker 0 killed and respawned: master stays"

# 3. reload with worker 0 in the first package
conf "$(mask $near) $(mask $far)"
kill -HUP "$m"
wait_for "[ \"\$(cpus_of $m)\" = $near_want ]"
is "$(cpus_of "$m")" "$near_want" "reload: master follows the new worker 0 to CPU $near's $scope"

# 3b. worker 0 killed and a reload at once, worker 0 back in the last
# package: nginx respawns it before it re-reads its configuration
read -r w0 w1 <<EOF
$(workers)
EOF
conf "$(mask $far) $(mask $near)"
kill -9 "$w0"
kill -HUP "$m"
wait_for "[ \"\$(cpus_of $m)\" = $want ] && ! workers | grep -qw $w1"
is "$(cpus_of "$m")" "$want" "worker 0 killed and a reload at once: master follows the new worker 0 to CPU $far's $scope"

# 4. reload without worker_cpu_affinity
conf ""
kill -HUP "$m"
wait_for "[ \"\$(cpus_of $m)\" = $all ]"
is "$(cpus_of "$m")" "$all" "reload without affinity: master back to all CPUs"
stop

# 5. the other scopes
for s in "node $far_numa" "llc $far_llc" "die $far_die" "worker $far" \
    ${far_cluster:+"cluster $far_cluster"}; do
    set -- $s
    conf "$(mask $far) $(mask $near)"
    start MASTERAFF_SCOPE="$1"
    m=$(master)
    wait_for "[ \"\$(cpus_of $m)\" = $2 ]"
    is "$(cpus_of "$m")" "$2" "MASTERAFF_SCOPE=$1: master on CPUs $2"
    stop
done

# 6. worker_cpu_affinity auto puts worker 0 on CPU 0
conf auto
start
m=$(master)
wait_for "[ \"\$(cpus_of $m)\" = $near_package ]"
is "$(cpus_of "$m")" "$near_package" "worker_cpu_affinity auto: master on worker 0's package"
stop

# 7. MASTERAFF_MIGRATE=off: the pages stay where they began
if [ "$want" != "$all" ]; then
    conf "$(mask $far) $(mask $near)"
    start MASTERAFF_SCOPE=$scope MASTERAFF_MIGRATE=off numactl --preferred=0
    m=$(master)
    wait_for 'grep -q "masteraff: master" /tmp/error.log'
    grep -q 'memory not moved (MASTERAFF_MIGRATE=off)' /tmp/error.log
    ok $? "MASTERAFF_MIGRATE=off: the log says memory was not moved"
    is "$(percent_on shared 0 "$m" | awk '{print ($1 >= 95)}')" 1 \
        "MASTERAFF_MIGRATE=off: the shared zones stay on node 0"
    stop
fi

# 8. binary upgrade: the new master is placed by the same rules
conf "$(mask $far) $(mask $near)"
start
old=$(master)
wait_for "[ \"\$(cpus_of $old)\" = $far_package ]"
kill -USR2 "$old"
wait_for "[ -s /run/nginx.pid.oldbin ] && [ \"\$(master)\" != $old ] && [ \"\$(workers | wc -w)\" -eq 2 ]"
new=$(master)
wait_for "[ \"\$(cpus_of $new)\" = $far_package ]"
is "$(cpus_of "$new")" "$far_package" "binary upgrade: the new master on worker 0's package"
kill -QUIT "$old"
wait_for "[ ! -e /run/nginx.pid.oldbin ]"
is "$(timeout 10 wget -q -O - http://127.0.0.1:8080/)" hello "the new master serves"
stop

# 9. scripts/crosschip, with rounds too short to mean anything (and under
# TCG no figure means anything): it must run, say where the master and its
# memory were, and leave nothing behind. Where there is one node it says
# it has nothing to measure. Only the Kunpeng shapes and the one-node
# guests, for time.
if [ -x /usr/bin/crosschip ]; then
    if [ "$nnodes" -eq 1 ]; then
        crosschip --library $LIB >/tmp/cc.out 2>&1
        ok $? "crosschip on one node exits 0"
        sed 's/^/# /' /tmp/cc.out
        grep -q 'no far start to measure' /tmp/cc.out
        ok $? "crosschip says it has nothing to measure"
    elif [ "$MA_TOPO" = kunpeng ] || [ "$MA_TOPO" = arm64-kunpeng ]; then
        echo "# crosschip's figures under TCG mean nothing; only the placement is checked"
        crosschip --rounds 1 --duration 1 --connections 8 --library $LIB \
            >/tmp/cc.out 2>&1
        ok $? "crosschip runs"
        sed 's/^/# /' /tmp/cc.out
        # Workers on node 2 (the first of package 1), CPU 5; master near
        # on CPU 4, far on CPU 0.
        grep -q '^crosschip: workers: 1 on node 2 (CPUs 5, package 1)' /tmp/cc.out
        ok $? "crosschip: workers on node 2, the first node of the last package"
        for row in "near start" "far start"; do
            is "$(awk -v r="$row" 'index($0, r) == 1 && /\(x[0-9.]+\).*\(x[0-9.]+\)/' /tmp/cc.out | wc -l)" \
                1 "crosschip: a row '$row' with three figures and two ratios"
        done
        # Without the library, where the master ran and where its memory
        # went is the scheduler's (and NUMA balancing's) choice: shown, not
        # checked.
        is "$(grep -c '^far start   without  CPUs 0-7 ' /tmp/cc.out)" 1 \
            "crosschip: far start without the library: master on every CPU"
        for w in near far; do
            for m in follow shipped; do
                grep "^$w start  *$m " /tmp/cc.out |
                    grep -q 'CPUs 4-7 .* node 2: \(9[5-9]\|100\)% -> \(9[5-9]\|100\)%$'
                ok $? "crosschip: $w start, $m: master on package 1, shared zones on node 2"
            done
        done
        # shellcheck disable=SC2009 # busybox has no pgrep
        is "$(ps -o args | grep -c '^[n]ginx\|^[w]rk')" 0 "crosschip leaves no nginx or wrk behind"
        is "$(ls -d /tmp/crosschip.* 2>/dev/null)" "" "crosschip leaves no directory behind"
    fi
fi

# 10. Early placement: nginx's shared zones, its configuration and its
# listening sockets are first touched on worker 0's chip, with no page
# moved and no privilege. nginx starts on CPU 0 (node 0) with every CPU
# allowed, worker 0 pins itself to CPU $far (another node, another package
# where there is one), and MASTERAFF_MIGRATE=off: where the pages are is
# the CPU placement's doing alone. The same without CAP_SYS_NICE
# (util-linux's setpriv drops it from the bounding set, so that root's
# nginx has it in no set) and under nonuma's seccomp filter (the NUMA
# system calls refused with EPERM, as in a Docker container under the
# default profile). Then following only (MASTERAFF_EARLY=off), for
# contrast: the master moves when worker 0 pins, after nginx has
# allocated; its figures are the scheduler's and are shown, not checked.
# Only where worker 0's node is not CPU 0's (the one-node guests have
# nothing to show).
#
# How nginx starts on CPU 0 with every CPU allowed, every time: pinned to
# CPU 0, it takes SCHED_RR with reset-on-fork (util-linux's chrt), widens
# its mask to every CPU and execs nginx. A shell that merely widens its
# mask and execs (scripts/crosschip) is not enough here: the kernel
# balances a fair task at exec, and with the guest idle it moves it to the
# idlest group, another node (seen: node 1). A real-time task is not
# balanced at exec, nor by the fair load balancer, so what exec, the
# dynamic loader and the library's constructor touch, and without early
# placement nginx's zones and configuration, is on node 0. nginx's daemon
# fork resets its master to SCHED_OTHER, and the workers are the master's
# children: only the start runs real-time. (Where the master goes after the
# daemon fork, with early placement off, is the scheduler's choice.)
start_on0() { # start_on0 [VAR=VALUE...] [WRAPPER...]
    rm -f /tmp/error.log
    taskset -c 0 /usr/bin/chrt --rr --reset-on-fork 1 \
        taskset -c "$all" env LD_PRELOAD=$LIB "$@" /usr/sbin/nginx -c /tmp/n.conf
    wait_for '[ -s /run/nginx.pid ] && [ "$(workers | wc -w)" -eq 2 ]'
}
# "PERCENT ON TOTAL": of the pages of a process's anonymous private
# mappings (heap, stack, anonymous mmaps: what nginx allocates), how many
# are on the NODES. pages_in's "private" counts also the copies the dynamic
# loader made of the libraries' pages when it relocated them, which happens
# before any constructor, so before any placement.
anon_in() { # anon_in "NODES" PID
    awk -v nodes="$1" 'BEGIN { split(nodes, ns, " "); for (x in ns) want[ns[x]] = 1 }
        / anon=/ && !/ file=/ {
            for (i = 3; i <= NF; i++) {
                if ($i !~ /^N[0-9]+=/) continue
                split(substr($i, 2), kv, "="); t += kv[2]
                if (kv[1] in want) on += kv[2]
            }
        }
        END { printf "%d %d %d\n", (t ? int(100 * on / t) : 0), on, t }' "/proc/$2/numa_maps"
}
# Pages of the mappings matching PATTERN in numa_maps, per node.
maps_nodes() { # maps_nodes PATTERN PID
    awk -v pat="$1" '$0 ~ pat && / anon=/ {
            for (i = 3; i <= NF; i++) if ($i ~ /^N[0-9]+=/) {
                split(substr($i, 2), kv, "="); c[kv[1]] += kv[2] } }
        END { for (n in c) printf "N%s=%d ", n, c[n] }' "/proc/$2/numa_maps"
}
# Prints the master's figures on NODES, where its stack, heap and copies
# of the libraries' pages are, and its status and library lines, as
# diagnostics.
early_figures() { # early_figures LABEL "NODES" PID (masteraff status in /tmp/st)
    f_sh=$(pages_in shared "$2" "$3" /tmp/st)
    f_an=$(anon_in "$2" "$3")
    f_pr=$(pages_in private "$2" "$3" /tmp/st)
    echo "# $1: on node(s) $2: shared zones ${f_sh%% *}% ($(echo "$f_sh" | awk '{ print $2 "/" $3 }')), anonymous ${f_an%% *}% ($(echo "$f_an" | awk '{ print $2 "/" $3 }')), all private ${f_pr%% *}% ($(echo "$f_pr" | awk '{ print $2 "/" $3 }'))"
    echo "#   stack: $(maps_nodes ' stack ' "$3")heap: $(maps_nodes ' heap ' "$3")libraries' copies: $(maps_nodes ' file=' "$3")"
    awk -v p="$3" '$1 == p' /tmp/st | sed 's/^/#   status: /'
    grep 'masteraff:' /tmp/error.log | sed 's/^.*masteraff: /#   line: /'
}
# What the library's own decision dirtied before it placed the master
# (stack and heap on the start node) it gives back once placed; what stays
# there is a few pages of exec and the dynamic loader.
if [ -n "${wide:-}" ]; then
    conf "$(mask $far) $(mask $near)"
    # shellcheck disable=SC2086 # "SCOPE CPUS NODE..." lists
    for s in "node $far_numa $far_node" "$wide"; do
        set -- $s
        scope=$1 cpus=$2
        shift 2
        early_nodes=$*
        for how in plain nocap seccomp; do
            case $how in
            plain) wrap='' label="early, $scope" ;;
            nocap) wrap="/usr/bin/setpriv --bounding-set -sys_nice" label="early, $scope, no CAP_SYS_NICE" ;;
            seccomp) wrap=nonuma label="early, $scope, NUMA calls refused" ;;
            esac
            start_on0 MASTERAFF_SCOPE=$scope MASTERAFF_MIGRATE=off $wrap
            m=$(master)
            wait_for 'grep -q "masteraff: master .* placed there at start" /tmp/error.log'
            ok $? "$label: the line says the master was placed at start"
            is "$(cpus_of "$m")" "$cpus" "$label: master on CPUs $cpus"
            case $how in
            nocap)
                eff=$(sed -n 's/^CapEff:[[:space:]]*//p' "/proc/$m/status")
                is "$(((0x$eff >> 23) & 1))" 0 "$label: the master lacks CAP_SYS_NICE"
                ;;
            seccomp)
                is "$(sed -n 's/^Seccomp:[[:space:]]*//p' "/proc/$m/status")" 2 \
                    "$label: the master runs under the filter"
                ;;
            esac
            masteraff status "$m" >/tmp/st
            early_figures "$label" "$early_nodes" "$m"
            is "$(pages_in shared "$early_nodes" "$m" /tmp/st | awk '{ print ($1 >= 95) }')" 1 \
                "$label: at least 95% of the shared zones' pages on node(s) $early_nodes"
            is "$(anon_in "$early_nodes" "$m" | awk '{ print ($1 >= 80) }')" 1 \
                "$label: at least 80% of the master's private anonymous pages on node(s) $early_nodes"
            stop
        done
        start_on0 MASTERAFF_SCOPE=$scope MASTERAFF_MIGRATE=off MASTERAFF_EARLY=off
        m=$(master)
        wait_for 'grep -q "masteraff: master" /tmp/error.log'
        wait_for "[ \"\$(cpus_of $m)\" = $cpus ]"
        is "$(cpus_of "$m")" "$cpus" "follow only, $scope: master on CPUs $cpus"
        masteraff status "$m" >/tmp/st
        early_figures "follow only, $scope (not checked)" "$early_nodes" "$m"
        early_figures "follow only, $scope, on node 0 (not checked)" 0 "$m" | head -1
        stop
    done
    # The filter refuses what numactl needs: it is in force.
    if nonuma numactl --preferred=0 true 2>/tmp/nonuma.err; then
        refused=1
    else
        grep -q 'Operation not permitted' /tmp/nonuma.err
        refused=$?
    fi
    ok $refused "nonuma: numactl's set_mempolicy fails with EPERM"
fi


# 11. A busy guest: a CPU hog on every CPU at nginx's priority while the
# master starts (placed at start, confirmed by worker 0's pin), loses
# worker 0 (its respawn leads again: the master stays), reloads with worker
# 0 in the first package (followed), then loses worker 0 and reloads at
# once (followed back), then reads a configuration it refuses and loses
# its cache manager, worker 1 and worker 0 in turn (each respawn keeps its
# place: the master stays). The master must make no other move. Rounds:
# ma_busy_rounds= on the kernel command line (VM_APPEND), 1 by default.
# Where worker 0's unit and the first CPU's are one, there is no wrong
# move to make.
busy_rounds=$(sed -n 's/.*ma_busy_rounds=\([0-9]*\).*/\1/p' /proc/cmdline)
busy_rounds=${busy_rounds:-1}
# The worker on CPU $1 when both have pinned, one on $1 and the other on
# $2, and no exiting worker is left.
pinned_pair() { # pinned_pair LEAD-CPU OTHER-CPU
    set -- "$1" "$2" $(workers)
    [ $# -eq 4 ] || return 1
    p_a=$(cpus_of "$3") p_b=$(cpus_of "$4")
    if [ "$p_a" = "$1" ] && [ "$p_b" = "$2" ]; then
        echo "$3"
    elif [ "$p_b" = "$1" ] && [ "$p_a" = "$2" ]; then
        echo "$4"
    else
        return 1
    fi
}
moves() { grep -c "masteraff: master $m -> " /tmp/error.log; }
# Whether a worker is not one of $before, the workers before a reload: until
# the reload's workers are there, the old pair (or a respawn beside the
# old worker 1) can stand on the same CPUs.
not_before() { case "$before" in *" $1 "*) return 1 ;; esac; }
# The master's child in ROLE ("cache manager").
role_pid() {
    ps -o pid,ppid,args | awk -v m="$(master)" -v r="nginx: $1 process" \
        '$2 == m && index($0, r) { print $1 }'
}
# busy_step STEP WANT-CPUS WANT-MOVES LINE: waits for LINE, then the
# master's place and its moves so far.
busy_step() {
    wait_for "grep -q \"$4\" /tmp/error.log" 180
    good=1
    [ "$(cpus_of "$m")" = "$2" ] && [ "$(moves)" -eq "$3" ] && grep -q "$4" /tmp/error.log && good=0
    ok $good "busy, round $round, $1: master on CPUs $2, $3 move(s) in all, for worker $w0"
    [ $good -eq 0 ] || grep 'masteraff:' /tmp/error.log | sed 's/^/#   /'
}
cache="proxy_cache_path /tmp/cache keys_zone=cache:1m;"
conf "$(mask $far) $(mask $near)" "" "$cache"
scope=package want=$far_package near_want=$near_package
if [ "$far_package" = "$all" ] && [ "$far_numa" != "$all" ]; then
    scope=node want=$far_numa near_want=$near_numa
fi
if [ "$want" != "$near_want" ]; then
    hogs=
    for c in $(seq 0 $(($(grep -c '^processor' /proc/cpuinfo) - 1))); do
        # (Not on the TAP channel: a hog still exiting holds the port
        # open past the end marker.)
        taskset -c "$c" sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
        hogs="$hogs $!"
    done
    round=1
    while [ $round -le "$busy_rounds" ]; do
        conf "$(mask $far) $(mask $near)" "" "$cache"
        start MASTERAFF_SCOPE=$scope MASTERAFF_MIGRATE=off
        wait_for '[ -s /run/nginx.pid ]' 180
        m=$(master)
        wait_for "w0=\$(pinned_pair $far $near)" 180
        busy_step start "$want" 0 "master $m stays on CPUs $want ([a-z]* [0-9]*), placed there at start for worker $w0 on CPU $far,"

        old=$w0
        kill -9 "$w0"
        wait_for "w0=\$(pinned_pair $far $near) && [ \$w0 != $old ]" 180
        busy_step "worker 0 killed" "$want" 0 "master $m stays on CPUs $want: worker $w0 now leads"

        conf "$(mask $near) $(mask $far)" "" "$cache"
        before=" $(workers) "
        kill -HUP "$m"
        wait_for "w0=\$(pinned_pair $near $far) && not_before \$w0" 180
        busy_step "reload, worker 0 on CPU $near" "$near_want" 1 "master $m -> CPUs $near_want ([a-z]* [0-9]*), following worker $w0 on CPU $near "

        conf "$(mask $far) $(mask $near)" "" "$cache"
        before=" $(workers) "
        kill -9 "$w0"
        kill -HUP "$m"
        wait_for "w0=\$(pinned_pair $far $near) && not_before \$w0" 180
        busy_step "worker 0 killed and a reload at once" "$want" 2 "master $m -> CPUs $want ([a-z]* [0-9]*), following worker $w0 on CPU $far "

        conf "$(mask $far) $(mask $near)" "no_such_directive on;" "$cache"
        emergs=$(grep -c 'emerg' /tmp/error.log)
        kill -HUP "$m"
        wait_for "[ \$(grep -c 'emerg' /tmp/error.log) -gt $emergs ]" 180
        cm=$(role_pid "cache manager")
        kill -9 "$cm"
        wait_for "cm_now=\$(role_pid 'cache manager') && [ -n \"\$cm_now\" ] && [ \"\$cm_now\" != $cm ]" 180
        w1=$(pinned_pair $near $far)
        kill -9 "$w1"
        wait_for "w=\$(pinned_pair $near $far) && [ \$w != $w1 ]" 180
        old=$w0
        kill -9 "$w0"
        wait_for "w0=\$(pinned_pair $far $near) && [ \$w0 != $old ]" 180
        busy_step "a refused reload, then the cache manager, worker 1 and worker 0 killed" "$want" 2 "master $m stays on CPUs $want: worker $w0 now leads"
        stop
        round=$((round + 1))
    done
    # shellcheck disable=SC2086 # a list of pids
    kill $hogs
    wait
fi

# 12. A pod's CPUs: nginx in a cgroup v2 cpuset of the far node's CPUs, as
# a kubelet's static CPU manager gives a Guaranteed pod, with
# worker_cpu_affinity auto, which asks for CPUs 0 and 1 whatever the set.
# With MASTERAFF_AUTO=cpuset each worker gets the allowed CPU of its rank
# (the far node's first two), and the master is placed at start on that
# node, so nginx's shared zones are allocated there.
if [ "$far_numa" != "$all" ] && mount -t cgroup2 none /sys/fs/cgroup &&
    echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control &&
    mkdir /sys/fs/cgroup/pod && echo "$far_numa" >/sys/fs/cgroup/pod/cpuset.cpus; then
    first=${far_numa%-*} second=$((${far_numa%-*} + 1))
    conf auto
    start MASTERAFF_AUTO=cpuset MASTERAFF_SCOPE=node \
        sh -c 'echo $$ >/sys/fs/cgroup/pod/cgroup.procs && exec "$@"' sh
    m=$(master)
    wait_for "w0=\$(pinned_pair $first $second)"
    ok $? "auto in the cpuset $far_numa: workers on CPUs $first and $second"
    grep -q "masteraff: worker_cpu_affinity auto mapped into the cpuset $far_numa (auto's CPUs $all are not all in it): worker $w0 asked for CPU 0, gets CPU $first" /tmp/error.log
    ok $? "auto in the cpuset: worker 0 says it is mapped"
    wait_for 'grep -q "masteraff: master .* placed there at start" /tmp/error.log'
    grep 'masteraff:' /tmp/error.log | sed 's/^/# /'
    grep -q "masteraff: master $m stays on CPUs $far_numa (node $far_node), placed there at start for worker $w0 on CPU $first, confirmed" /tmp/error.log
    ok $? "auto in the cpuset: the master placed at start on node $far_node"
    is "$(cpus_of "$m")" "$far_numa" "auto in the cpuset: master on CPUs $far_numa"
    is "$(percent_on shared "$far_node" "$m" | awk '{print ($1 >= 95)}')" 1 \
        "auto in the cpuset: at least 95% of the shared zones' pages on node $far_node"
    ! grep -q 'sched_setaffinity() failed' /tmp/error.log
    ok $? "auto in the cpuset: no pin refused"
    stop
    wait_for '[ -z "$(cat /sys/fs/cgroup/pod/cgroup.procs)" ]'
    rmdir /sys/fs/cgroup/pod
fi

# 13. A cpuset widened under a master its library placed, on this kernel:
# before Linux 6.2 the kernel gives every task of a cpuset all of its new
# CPUs, whatever mask the task asked for, so all of them is the kernel's
# doing, and an administrator's taskset -p to the same CPUs cannot be told
# from it. Placed on CPU $far in a cpuset of that CPU (the scope cpu), the
# master goes back there once the library looks (a worker's respawn), and
# its original mask is the widened cpuset. Linux 6.2 and later keep the
# CPU asked for, and there the same taskset -p is the administrator's
# (test/cpusetkeep.t, on the host).
release=$(uname -r)
major=${release%%.*} minor=${release#*.}
minor=${minor%%.*}
if { [ "$major" -lt 6 ] || { [ "$major" -eq 6 ] && [ "$minor" -lt 2 ]; }; } &&
    { grep -q '^[^ ]* /sys/fs/cgroup cgroup2 ' /proc/mounts ||
        mount -t cgroup2 none /sys/fs/cgroup; } &&
    echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control &&
    mkdir /sys/fs/cgroup/widen && echo "$far" >/sys/fs/cgroup/widen/cpuset.cpus; then
    conf "$(mask $far) $(mask $far)"
    start MASTERAFF_SCOPE=cpu \
        sh -c 'echo $$ >/sys/fs/cgroup/widen/cgroup.procs && exec "$@"' sh
    m=$(master)
    read -r w0 w1 <<EOF
$(workers)
EOF
    wait_for 'grep -q "masteraff: master .* placed there at start" /tmp/error.log'
    is "$(cpus_of "$m")" "$far" "cpuset $far: the master on CPU $far"
    echo "$far_package" >/sys/fs/cgroup/widen/cpuset.cpus
    wait_for "[ \"\$(cpus_of $m)\" = $far_package ]"
    ok $? "cpuset widened to $far_package: Linux $release gives the master all of it, not the CPU $far asked for"
    taskset -p -c "$far_package" "$m" >/dev/null
    kill -9 "$w1"
    wait_for 'grep -q "masteraff: master .* the cpuset changed" /tmp/error.log'
    grep 'masteraff:' /tmp/error.log | sed 's/^/# /'
    grep -q "masteraff: master $m: the cpuset changed to $far_package (was $far): its original mask is CPUs $far_package now; master -> CPUs $far (" /tmp/error.log
    ok $? "widened, taskset -p to all of it, a worker respawned: the cpuset's doing, said once"
    is "$(cpus_of "$m")" "$far" "widened: the master back on worker 0's CPU $far"
    ! grep -q 'set by the program or an administrator' /tmp/error.log
    ok $? "widened: the mask is not taken for the administrator's"
    stop
    wait_for '[ -z "$(cat /sys/fs/cgroup/widen/cgroup.procs)" ]'
    rmdir /sys/fs/cgroup/widen
fi
echo "1..$n"
