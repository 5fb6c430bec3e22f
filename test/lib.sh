# Shared by the shell tests: TAP output, and a real Debian nginx started with
# the library in a private directory. Sourced, never run.
set -uo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LIB=$SRCDIR/libmasteraff.so
# The server under test (test/servers.t runs tests against other builds).
# Not exported: nginx takes a variable of that name for inherited sockets,
# and would not daemonize.
NGINX=${NGINX:-/usr/sbin/nginx}
export -n NGINX
T=$(mktemp -d /tmp/masteraff-test.XXXXXX)
tap_n=0
tap_failed=0

# ok and is return the check's status, so that "ok ... || diag ..." says
# more only when the check failed.
ok() { # ok COND-STATUS DESCRIPTION
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
        return 0
    fi
    echo "not ok $tap_n - $2"
    tap_failed=$((tap_failed + 1))
    return 1
}

is() { # is GOT WANT DESCRIPTION
    [ "$1" = "$2" ]
    ok $? "$3" && return 0
    printf '#   got:  %s\n#   want: %s\n' "$1" "$2"
    return 1
}

diag() { printf '# %s\n' "$*"; }

skip_all() {
    echo "1..0 # SKIP $*"
    exit 0
}

skip() { # skip REASON DESCRIPTION: a check this machine cannot make
    tap_n=$((tap_n + 1))
    echo "ok $tap_n - $2 # SKIP $1"
}

# Prints why this machine cannot give a test a private mount namespace
# (unshare -m) or, with --pid, a pid namespace with its own /proc (unshare
# --pid --mount-proc); fails, printing nothing, when it can. Neither works
# where / is not a mount point (a chroot): unshare cannot make / private.
no_namespace() { # no_namespace [--pid]
    local why
    if [ "${1:-}" = --pid ]; then
        why=$(unshare --pid --fork --mount-proc true 2>&1) && return 1
    else
        why=$(unshare -m true 2>&1) && return 1
    fi
    echo "${why:-unshare failed}"
}

done_testing() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}

# Waits for the command $1 to succeed, trying every 50 ms. The limit, $2
# seconds (default 60), only ends a wait for what will never come: a loaded
# machine may take seconds for what an idle one does at once.
wait_for() {
    local cond=$1 limit=${2:-60} i
    for ((i = 0; i < limit * 20; i++)); do
        eval "$cond" && return 0
        sleep 0.05
    done
    return 1
}

# The library's lines in error.log.
lib_lines() { grep -a 'masteraff: ' "$T/error.log"; }

# How many lines say master $m moved.
moves() { grep -c "masteraff: master $m -> " "$T/error.log"; }

# said_once TEXT DESCRIPTION: error.log gets a library line with TEXT (it
# is waited for); the lines are shown when none comes.
said_once() {
    local text=$1
    wait_for 'lib_lines | grep -qF -- "$text"'
    ok $? "$2"
    lib_lines | grep -qF -- "$text" || { diag "no line with: $text"; lib_lines | sed 's/^/#   /'; }
}

# podman as CI can run it here: runc (crun refuses this host's mixed
# cgroup setup) and the nofile limit no higher than the hard one (raising
# it needs CAP_SYS_RESOURCE, which CI lacks).
podman_conf() {
    cat >"$T/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
    export CONTAINERS_CONF=$T/containers.conf
}

cpus_of() { awk '/^Cpus_allowed_list/ {print $2}' "/proc/$1/status" 2>/dev/null; }
threads_of() { awk '/^Threads/ {print $2}' "/proc/$1/status" 2>/dev/null; }
fd_count() { ls "/proc/$1/fd" 2>/dev/null | wc -l; }
master_pid() { cat "$T/nginx.pid" 2>/dev/null; }

# Children of the master by role, in pid order (nginx forks in order).
# The title starts with the program's name: "nginx: ", "angie: ".
children_of() { # children_of MASTER ROLE  (ROLE: worker, "cache manager", ...)
    local p
    [ -n "$1" ] || return 0 # no master yet
    for p in $(pgrep -P "$1" | sort -n); do
        grep -q "^[a-z]*: $2 process" "/proc/$p/cmdline" 2>/dev/null && echo "$p"
    done
}
workers() { children_of "$(master_pid)" worker | tr '\n' ' ' | sed 's/ $//'; }

# A fake sysfs tree in which CPU 0 and CPU 1 are two packages.
make_twopkg() {
    [ -d "$T/sys" ] || "$SRCDIR/test/mktree" twopkg "$T/sys"
}

# The server's locations. MASTERAFF_MINIMAL_SERVER=1 (test/servers.t's
# minimal builds: no rewrite module for return, no stub_status): a static
# file that says hello.
locations() {
    if [ "${MASTERAFF_MINIMAL_SERVER:-}" = 1 ]; then
        # The workers run as nobody.
        chmod a+x "$T" && mkdir -p "$T/html" && echo hello >"$T/html/index.html"
        echo "location / { root $T/html; }"
    else
        echo 'location / { return 200 "hello\n"; }'
        echo '        location /status { stub_status; }'
    fi
}

# The http block's first lines: no access log, temporary files in $T/tmp.
http_files() {
    cat <<EOF
    access_log off;
    client_body_temp_path $T/tmp/body;
    proxy_temp_path $T/tmp/proxy;
    fastcgi_temp_path $T/tmp/fastcgi;
    uwsgi_temp_path $T/tmp/uwsgi;
    scgi_temp_path $T/tmp/scgi;
EOF
}

# conf_text MAIN-LINES [HTTP-LINES] [WORKERS]: an nginx.conf with WORKERS
# workers (default 2), the main-context lines given (from line 2), and a
# server with stub_status inside http.
conf_text() {
    cat <<EOF
worker_processes ${3:-2};
$1
pid $T/nginx.pid;
error_log $T/error.log notice;
events { worker_connections 128; }
http {
$(http_files)
    ${2:-}
    server {
        listen 127.0.0.1:${PORT:-18080};
        $(locations)
    }
}
EOF
}

# write_conf [AFFINITY] [EXTRA-MAIN-DIRECTIVES] [WORKERS]: an nginx.conf in
# $T with WORKERS workers (default 2), a cache (for a cache manager that
# never pins), stub_status. Replaced whole: a reloading nginx may be
# reading it.
write_conf() {
    local affinity=${1:-} extra=${2:-}
    mkdir -p "$T/cache" "$T/tmp"
    conf_text "${affinity:+worker_cpu_affinity $affinity;}
$extra" "proxy_cache_path $T/cache keys_zone=cache:1m;" "${3:-2}" >"$T/nginx.conf.new"
    mv "$T/nginx.conf.new" "$T/nginx.conf"
}

# Starts nginx with the library and MASTERAFF_* from the caller's
# environment; stderr goes to $T/stderr.
start_nginx() {
    env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="${MASTERAFF_SYSFS-$T/sys}" \
        "$NGINX" -c "$T/nginx.conf" "$@" 2>"$T/stderr"
}

# Waits until the master has n workers (default 2) that are not exiting.
wait_workers() {
    local n=${1:-2}
    wait_for "[ \$(workers | wc -w) -eq $n ]"
}

# A server that stopped answering fails the check rather than hangs the test.
serves() { curl -sf --max-time 20 "http://127.0.0.1:${PORT:-18080}/" | grep -q hello; }

# Sends a signal and waits for the master to be gone. A master that died
# first (a stack limit, a kill) left its workers serving its port; they
# are still in its session (nginx's daemon calls setsid), and are ended.
stop_nginx() {
    local m
    m=$(master_pid) || return 0
    [ -n "$m" ] || return 0
    if gone "$m"; then
        pkill -9 -s "$m"
        wait_for "! pgrep -s $m >/dev/null"
    fi
    kill -QUIT "$m" 2>/dev/null
    # Exited is enough: a zombie holds no port, and its reaper may be slow.
    wait_for "gone $m" || kill -9 "$m" 2>/dev/null
    rm -f "$T/nginx.pid"
}

# Stops nginx and empties its logs: what follows reads the next start's.
fresh() { stop_nginx; : >"$T/error.log"; : >"$T/stderr"; }

# Processes a test started in the background, killed when it ends.
bg_pids=()

cleanup() {
    local p
    for p in "${bg_pids[@]}"; do
        kill -9 "$p" 2>/dev/null
    done
    stop_nginx
    rm -rf "$T"
}
trap cleanup EXIT

[ -x "$NGINX" ] || skip_all "no nginx at $NGINX"
[ -f "$LIB" ] || { echo "Bail out! $LIB is not built"; exit 1; }

# ---- helpers shared by modes.t, reloads.t, badconfig.t ----

# Starts nginx as start_nginx does, but without the library (the baseline).
start_nginx_without() {
    env -u LD_PRELOAD "$NGINX" -c "$T/nginx.conf" "$@" 2>"$T/stderr"
}

# True when process $1 has exited (gone, or a zombie not yet reaped).
gone() {
    [ ! -e "/proc/$1" ] || grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

# The workers that are not in the space-separated list $1.
new_workers() {
    local p
    for p in $(workers); do
        case " $1 " in *" $p "*) ;; *) echo "$p" ;; esac
    done | tr '\n' ' ' | sed 's/ $//'
}

# Waits (up to $2 seconds, as wait_for) for two workers none of which is in $1.
wait_new_workers() {
    wait_for "[ \$(new_workers '$1' | wc -w) -eq 2 ]" "${2:-60}"
}

# A reload: sends the master a HUP and waits for two new workers, which it
# sets as n0 and n1 (in their order).
reload_workers() {
    local old
    old=$(workers)
    n0= n1=
    kill -HUP "$(master_pid)"
    wait_new_workers "$old" && read -r n0 n1 <<<"$(new_workers "$old")"
}

# Waits until workers $1 and $2 have pinned themselves to CPUs 1 and 0
# (worker_cpu_affinity 10 01).
wait_pinned() {
    wait_for "[ \"\$(cpus_of $1)\" = 1 ] && [ \"\$(cpus_of $2)\" = 0 ]"
}

# Waits for the two workers of a start with worker_cpu_affinity 10 01 to
# pin themselves; sets m, w0 and w1.
wait_pinned_workers() {
    wait_workers
    m=$(master_pid)
    read -r w0 w1 <<<"$(workers)"
    wait_pinned "$w0" "$w1"
}

# relay PREFIX COMMAND...: runs a helper program and passes its "ok - ..." /
# "not ok - ..." lines on as TAP, prefixed; other lines become diagnostics.
# Fails when the program exits non-zero or says nothing. Its output is kept
# in $T/relayed.
relay() {
    local prefix=$1 line n=0 rc
    shift
    : >"$T/relayed"
    while IFS= read -r line; do
        echo "$line" >>"$T/relayed"
        case $line in
        "ok - "*) ok 0 "$prefix: ${line#ok - }"; n=$((n + 1)) ;;
        "not ok - "*) ok 1 "$prefix: ${line#not ok - }"; n=$((n + 1)) ;;
        rc=*) rc=${line#rc=} ;;
        *) diag "$prefix: $line" ;;
        esac
    done < <("$@"; echo "rc=$?")
    [ "$rc" = 0 ] && [ "$n" -gt 0 ]
    ok $? "$prefix: exits 0 after $n checks (status $rc)"
}

# Bails out unless the test programs named (test/NAME, built by make) exist.
need_programs() {
    local p
    for p in "$@"; do
        [ -x "$SRCDIR/test/$p" ] || { echo "Bail out! test/$p is not built (make test/$p)"; exit 1; }
    done
}

# Workers that wait before they pin while $HOLDPIN_FILE exists, as on a
# machine whose CPUs are all taken (test/holdpin.so, loaded before the
# library as $HOLD): the workers run as nobody, and must reach the file.
use_holdpin() {
    HOLD=$SRCDIR/test/holdpin.so
    need_programs holdpin.so
    chmod 711 "$T"
    export HOLDPIN_FILE=$T/hold
}

# ---- the library's channel, seen from outside ----
#
# A master's children report to it on one AF_UNIX datagram socket pair
# (type 0002 in /proc/net/unix, u_dgr in ss), whatever their number: the
# master holds both ends, each child the end it sends on. nginx's own
# channels are stream socket pairs (0001) and nginx alone holds no datagram
# socket, so a process's datagram sockets are the library's.

# library_sockets PID...: "PID INODE" for each descriptor of those
# processes that is an AF_UNIX datagram socket (one find and one awk for
# any number of processes).
library_sockets() {
    [ $# -gt 0 ] || return 0
    find $(printf '/proc/%s/fd ' "$@") -mindepth 1 -maxdepth 1 -lname 'socket:*' \
        -printf '%h %l\n' 2>/dev/null |
        awk 'NR == FNR { if ($5 == "0002") dgram["socket:[" $7 "]"]; next }
             $2 in dgram { split($1, d, "/"); i = $2; gsub(/[^0-9]/, "", i); print d[3], i }' \
            /proc/net/unix -
}

# channel_faults MASTER: one line for each way the channel departs from the
# design, nothing when it does not. The master holds exactly two datagram
# sockets, the two ends of one pair: one it reads, one shut for reading
# (ss -e: "<->" and "-->"). Each child holds exactly one, that send-only
# end: its reports reach the master, and no child can read a sibling's.
# A child that exits meanwhile (a reload's old worker, the cache loader)
# is no fault.
channel_faults() {
    local m=$1 kids line p
    kids=$(pgrep -P "$m" | tr '\n' ' ')
    awk -v m="$m" -v kids="$kids" '
        FNR == NR { if ($1 == "u_dgr") { peer[$6] = $8; way[$6] = $9 }; next }
        { n[$1]++; sock[$1] = $2; if ($1 == m) mine[n[m]] = $2 }
        END {
            if (n[m] != 2) {
                print "master " m " holds " n[m] + 0 " datagram sockets, not 2"
            } else if (peer[mine[1]] != mine[2] || peer[mine[2]] != mine[1]) {
                print "master " m "\047s datagram sockets " mine[1] " and " mine[2] " are not one pair"
            } else {
                for (i = 1; i <= 2; i++)
                    if (way[mine[i]] == "-->" && way[mine[3 - i]] == "<->") send = mine[i]
                if (send == "")
                    print "master " m "\047s pair is not one end read and one send-only (" way[mine[1]] " " way[mine[2]] ")"
            }
            k = split(kids, kid, " ")
            for (i = 1; i <= k; i++) {
                c = kid[i]
                if (n[c] != 1)
                    print "child " c " holds " n[c] + 0 " datagram sockets, not 1"
                else if (send != "" && sock[c] != send)
                    print "child " c " holds socket " sock[c] ", not the master\047s send-only end " send
            }
        }' <(ss -xae 2>/dev/null) <(library_sockets "$m" $kids) |
        while IFS= read -r line; do
            case $line in
            "child "*) p=${line#child } && gone "${p%% *}" && continue ;;
            esac
            echo "$line"
        done
}

# The kinds of process $1's anonymous descriptors (eventpoll, eventfd,
# timerfd, signalfd), sorted, on one line.
anon_inodes() {
    find "/proc/$1/fd" -mindepth 1 -maxdepth 1 -lname 'anon_inode:*' -printf '%l\n' 2>/dev/null |
        sort | tr '\n' ' ' | sed 's/ $//'
}

# ---- helpers shared by autocpuset.t and scenarios.t ----

# make_cpuset CPUS: a cpuset of those CPUs (cgroup v1, or v2 with the
# controller given to children) in $cg; fails, with $cg empty, where none
# can be made.
make_cpuset() {
    local root
    for root in /sys/fs/cgroup/cpuset /sys/fs/cgroup; do
        [ -f "$root/cpuset.cpus" ] || grep -qw cpuset "$root/cgroup.subtree_control" 2>/dev/null || continue
        cg=$root/masteraff-test.$$
        mkdir "$cg" 2>/dev/null || continue
        # v1 takes no task before its memory nodes are set.
        [ ! -f "$root/cpuset.mems" ] || cat "$root/cpuset.mems" >"$cg/cpuset.mems" 2>/dev/null
        echo "$1" >"$cg/cpuset.cpus" 2>/dev/null && return 0
        rmdir "$cg"
    done
    cg=
    return 1
}

# Kills every process in the cpuset, those forked after a kill included,
# until none is left. (A cgroup file's size is always 0: test -s cannot
# tell an empty one.)
kill_cpuset() {
    local pids
    wait_for "pids=\$(cat $cg/cgroup.procs 2>/dev/null); [ -z \"\$pids\" ] || { kill -9 \$pids 2>/dev/null; false; }"
}

# Removes the cpuset once its last process is gone.
drop_cpuset() { wait_for "[ -z \"\$(cat $cg/cgroup.procs 2>/dev/null)\" ]"; rmdir "$cg" 2>/dev/null; }

# ---- helpers shared by nofile.t and storm.t (hundreds of workers) ----

# write_many_conf N [AFFINITY]: nginx.conf with N workers and no cache
# (the workers are the master's only children), replaced whole: a
# reloading nginx may be reading it.
write_many_conf() {
    mkdir -p "$T/tmp"
    conf_text "${2:+worker_cpu_affinity $2;}" "" "$1" >"$T/nginx.conf.new"
    mv "$T/nginx.conf.new" "$T/nginx.conf"
}

# How many of the processes given are pinned to one CPU (one awk for all).
pinned_count() {
    [ $# -gt 0 ] || { echo 0; return; }
    printf '/proc/%s/status\n' "$@" | xargs cat 2>/dev/null |
        awk '/^Cpus_allowed_list/ && $2 !~ /[-,]/ { n++ } END { print n + 0 }'
}

# True when none of the space-separated pids in $1 is left.
all_gone() {
    local p
    for p in $1; do
        gone "$p" || return 1
    done
}

# The master's children not in the space-separated list $1 (one pgrep: the
# workers helper runs a grep per child).
children_but() {
    local p m
    m=$(master_pid)
    [ -n "$m" ] || return 0 # no master yet
    for p in $(pgrep -P "$m"); do
        case " $1 " in *" $p "*) ;; *) echo "$p" ;; esac
    done
}

# True when the master has N children not in OLD, all pinned, and no
# process of OLD is left: a start or reload has settled.
settled_workers() { # settled_workers N [OLD]
    local fresh
    all_gone "${2:-}" || return 1
    fresh=$(children_but "${2:-}")
    [ "$(echo $fresh | wc -w)" -eq "$1" ] && [ "$(pinned_count $fresh)" -eq "$1" ]
}
