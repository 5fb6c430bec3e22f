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
    near_numa=0-1
    ;;
epyc-nps4)
    far=6 near=1 far_node=3 all=0-7
    far_package=0-7 near_package=0-7 far_numa=6-7 far_llc=4-7 far_die=4-7
    near_numa=0-1
    ;;
2s)
    far=6 near=1 far_node=1 all=0-7
    far_package=4-7 near_package=0-3 far_numa=4-7 far_llc=4-7 far_die=4-7
    near_numa=0-3
    ;;
arm64-kunpeng)
    # The LLC is the L1 here (see smoke.sh), dies are absent (the die
    # scope falls back to the package).
    far=6 near=1 far_node=3 all=0-7
    far_package=4-7 near_package=0-3 far_numa=6-7 far_llc=6 far_die=4-7
    near_numa=0-1 far_cluster=6-7
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
# Waits up to 20 s (TCG is slow) for a shell condition.
wait_for() {
    i=0
    while [ $i -lt 200 ]; do
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

conf() { # conf AFFINITY [MAIN-CONTEXT-EXTRA]
    cat >/tmp/n.conf <<EOF
worker_processes 2;
${1:+worker_cpu_affinity $1;}
pid /run/nginx.pid;
error_log /tmp/error.log notice;
${2:-}
events { worker_connections 64; }
http {
    access_log off;
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

# 1. worker 0 in the last package; memory starts on node 0. With a single
# package, the node scope shows the memory moving between nodes.
conf "$(mask $far) $(mask $near)"
scope=package want=$far_package near_want=$near_package
if [ "$far_package" = "$all" ] && [ "$far_numa" != "$all" ]; then
    scope=node want=$far_numa near_want=$near_numa
fi
start MASTERAFF_SCOPE=$scope numactl --preferred=0
m=$(master)
wait_for "[ \"\$(cpus_of $m)\" = $want ]"
is "$(cpus_of "$m")" "$want" "worker 0 on CPU $far: master on its $scope ($want)"
if [ "$want" = "$all" ]; then
    is "$(masteraff_lines)" 0 "one package: the master is not moved, no line"
elif [ "$nnodes" -eq 1 ]; then
    wait_for 'grep -q "masteraff: master" /tmp/error.log'
    grep 'masteraff:' /tmp/error.log | sed 's/^/# /'
    # The unit is named by the kernel's id: a PPTT offset under ACPI.
    id=$(cat /sys/devices/system/cpu/cpu$far/topology/physical_package_id)
    is "$(grep -c "masteraff: master $m -> CPUs $want (package $id)," /tmp/error.log)" \
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

echo "1..$n"
