#!/bin/sh
# Runs inside the test VM (busybox sh, as /test.sh): checks that the guest
# has the topology test/vm/run promised and that nginx, numactl and the
# library work there. TAP on stdout. The expected sysfs values are those
# described in README.md.

n=0
is() { # GOT WANT NAME
    n=$((n + 1))
    if [ "$1" = "$2" ]; then
        echo "ok $n - $3"
    else
        echo "not ok $n - $3"
        echo "#   got:      '$1'"
        echo "#   expected: '$2'"
    fi
}
ok() { # STATUS NAME
    n=$((n + 1))
    if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}

# Defaults, as on x86: the LLC is the L3 (index3), dies are reported,
# clusters are not checked.
llcidx=index3 llclevel=3 multiarch=x86_64-linux-gnu cluster=
case $MA_TOPO in
kunpeng)
    nnodes=4
    ncpu=8
    nodes='0-1 2-3 4-5 6-7'
    pkg='0 0 0 0 1 1 1 1'
    die='0-3 0-3 0-3 0-3 4-7 4-7 4-7 4-7'
    llc='0-1 0-1 2-3 2-3 4-5 4-5 6-7 6-7'
    ;;
epyc-nps4)
    nnodes=4
    ncpu=8
    nodes='0-1 2-3 4-5 6-7'
    pkg='0 0 0 0 0 0 0 0'
    die='0-3 0-3 0-3 0-3 4-7 4-7 4-7 4-7'
    llc='0-3 0-3 0-3 0-3 4-7 4-7 4-7 4-7'
    ;;
2s)
    nnodes=2
    ncpu=8
    nodes='0-3 4-7'
    pkg='0 0 0 0 1 1 1 1'
    die='0-3 0-3 0-3 0-3 4-7 4-7 4-7 4-7'
    llc='0-3 0-3 0-3 0-3 4-7 4-7 4-7 4-7'
    ;;
1s)
    nnodes=1
    ncpu=4
    nodes='0-3'
    pkg='0 0 0 0'
    die='0-3 0-3 0-3 0-3'
    llc='0-3 0-3 0-3 0-3'
    ;;
arm64-kunpeng)
    # Device tree: package and cluster ids count from 0 in their parent,
    # no die attributes, and qemu's DT describes no caches, so the kernel
    # shows the L1 caches only (index0 data, index1 instructions).
    nnodes=4
    ncpu=8
    nodes='0-1 2-3 4-5 6-7'
    pkg='0 0 0 0 1 1 1 1'
    die=
    llcidx=index0 llclevel=1
    llc='0 1 2 3 4 5 6 7'
    cluster='0 0 1 1 0 0 1 1'
    multiarch=aarch64-linux-gnu
    ;;
arm64-kunpeng-acpi)
    # ACPI: package and cluster ids are the PPTT offsets of their nodes,
    # as on real Kunpeng 920s; one L2 (index2) over every CPU. The SRAT's
    # four nodes are lost (see README.md): one node.
    nnodes=1
    ncpu=8
    nodes='0-7'
    pkg='36 36 36 36 176 176 176 176'
    die=
    llcidx=index2 llclevel=2
    llc='0-7 0-7 0-7 0-7 0-7 0-7 0-7 0-7'
    cluster='56 56 116 116 196 196 256 256'
    multiarch=aarch64-linux-gnu
    ;;
*)
    echo "1..0 # SKIP unknown topology '$MA_TOPO'"
    exit 0
    ;;
esac

# sysfs is read with cat, not `read`: that reads byte by byte, and the
# kernel's cpulist files (bin attributes) return nothing past the first byte
# to such reads.

# ATTR: that attribute of each CPU, in CPU order, joined with spaces.
per_cpu() {
    attr=$1
    set --
    c=0
    while [ $c -lt $ncpu ]; do
        set -- "$@" "/sys/devices/system/cpu/cpu$c/$attr"
        c=$((c + 1))
    done
    cat "$@" | paste -sd ' '
}
# The cpulist of each NUMA node, in node order, joined with spaces.
node_cpus() {
    set --
    i=0
    while [ -d /sys/devices/system/node/node$i ]; do
        set -- "$@" "/sys/devices/system/node/node$i/cpulist"
        i=$((i + 1))
    done
    cat "$@" | paste -sd ' '
}

is "$(cat /sys/devices/system/cpu/online)" "0-$((ncpu - 1))" "CPUs online"
is "$(nproc)" "$ncpu" "nproc"
is "$(set -- /sys/devices/system/node/node[0-9]*; echo $#)" "$nnodes" \
    "number of NUMA nodes"
is "$(node_cpus)" "$nodes" "node cpulists"

is "$(per_cpu topology/physical_package_id)" "$pkg" \
    "physical_package_id per CPU"
if [ -n "$die" ]; then
    is "$(per_cpu topology/die_cpus_list)" "$die" "die_cpus_list per CPU"
else
    is "$(ls /sys/devices/system/cpu/cpu*/topology/die_* 2>/dev/null)" "" \
        "no die attributes"
fi
if [ -n "$cluster" ]; then
    is "$(per_cpu topology/cluster_id)" "$cluster" "cluster_id per CPU"
    is "$(per_cpu topology/cluster_cpus_list)" \
        '0-1 0-1 2-3 2-3 4-5 4-5 6-7 6-7' "cluster_cpus_list per CPU"
fi

# The LLC is the highest-level cache: index3 on every x86 CPU model qemu
# has; on arm64 what the firmware describes.
last=
for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    [ "$(cat "$d/type")" = Instruction ] || last=${d##*/}
done
is "$last" "$llcidx" "$llcidx is the last data or unified cache"
is "$(per_cpu cache/$llcidx/level | tr -d " $llclevel")" "" \
    "$llcidx is an L$llclevel everywhere"
is "$(per_cpu cache/$llcidx/shared_cpu_list)" "$llc" \
    "LLC shared_cpu_list per CPU"

numactl --hardware >/tmp/numactl.out 2>&1
ok $? "numactl --hardware runs"
is "$(sed -n 's/^available: \([0-9]*\) nodes.*/\1/p' /tmp/numactl.out)" \
    "$nnodes" "numactl sees $nnodes nodes"

ok "$([ -r /proc/self/numa_maps ]; echo $?)" "/proc/self/numa_maps exists"

# What libmasteraff dlopen()s must be found without LD_LIBRARY_PATH.
ok "$([ -e /usr/lib/$multiarch/libnuma.so.1 ]; echo $?)" \
    "libnuma.so.1 in a default library dir"

# numactl is no nginx, so the library stays inert in it: this only shows
# that the image has everything it links against.
if [ -e /usr/lib/libmasteraff.so ]; then
    LD_PRELOAD=/usr/lib/libmasteraff.so numactl --show >/dev/null 2>&1
    ok $? "libmasteraff.so preloads into a dynamic binary"
else
    n=$((n + 1))
    echo "ok $n # SKIP libmasteraff.so not in the image (not built)"
fi

cat >/tmp/nginx.conf <<'EOF'
master_process on;
worker_processes 2;
daemon on;
pid /run/nginx.pid;
error_log /tmp/error.log;
events { worker_connections 64; }
http {
    access_log off;
    server {
        listen 127.0.0.1:8080;
        location / { return 200 "hello from nginx\n"; }
    }
}
EOF
nginx -c /tmp/nginx.conf
ok $? "nginx starts"
# Not wget -T: Debian 12's busybox-static segfaults with it.
is "$(timeout 10 wget -q -O - http://127.0.0.1:8080/ 2>&1)" "hello from nginx" \
    "nginx answers on 127.0.0.1:8080"
# Workers are forked after the master has daemonized; give them a moment.
i=0
while [ $i -lt 50 ]; do
    # shellcheck disable=SC2009 # busybox has no pgrep
    workers=$(ps -o args | grep -c '^nginx: worker process')
    [ "$workers" -eq 2 ] && break
    sleep 0.1
    i=$((i + 1))
done
is "$workers" 2 "nginx runs 2 workers"
# The master removes its pid file last thing; its process may linger as a
# zombie of /init.
read -r master </run/nginx.pid
kill -QUIT "$master"
i=0
while [ -e /run/nginx.pid ] && [ $i -lt 100 ]; do
    sleep 0.1
    i=$((i + 1))
done
ok "$([ ! -e /run/nginx.pid ]; echo $?)" "nginx quits"
if [ -s /tmp/error.log ]; then
    sed 's/^/# error.log: /' /tmp/error.log
fi

[ -n "${SMOKE_SOURCED:-}" ] || echo "1..$n"
