#!/usr/bin/env bash
# Fifty reloads in a row: every one takes effect, the master leaks neither
# descriptors nor threads, stays on worker 0's package, and no child holds a
# descriptor of the library but its own channel to the master.
. "$(dirname "$0")/lib.sh"
PORT=18083
RELOADS=50

make_twopkg
write_conf "10 01"

# The inodes of the process's sockets, one a line.
socket_inodes() {
    local f
    for f in /proc/"$1"/fd/*; do
        readlink "$f" 2>/dev/null
    done | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p'
}
# The library's channels are the only SOCK_SEQPACKET (type 0005) sockets.
seqpacket_inodes() {
    awk 'NR > 1 && $5 == "0005" {print $7}' /proc/net/unix | sort -u
}
# How many of the process's descriptors are SOCK_SEQPACKET sockets.
seqpacket_count() {
    comm -12 <(socket_inodes "$1" | sort -u) <(seqpacket_inodes) | wc -l
}
eventpoll_count() {
    local f n=0
    for f in /proc/"$1"/fd/*; do
        [ "$(readlink "$f" 2>/dev/null)" = "anon_inode:[eventpoll]" ] && n=$((n + 1))
    done
    echo "$n"
}
# Says which of the master's SEQPACKET sockets no child holds the other end of.
master_extra_channels() {
    local i peer holders
    for i in $(comm -12 <(socket_inodes "$m" | sort -u) <(seqpacket_inodes)); do
        peer=$(ss -xa 2>/dev/null | awk -v i="$i" '$1 == "u_seq" && $6 == i {print $8}')
        holders=$(ss -xap 2>/dev/null | awk -v i="$peer" '$1 == "u_seq" && $6 == i {print $9}')
        case $holders in
        *pid=*) ;;
        *) diag "$1: master's SEQPACKET socket $i (fd $(fd_of "$m" "$i")) has peer '$peer', held by no process" ;;
        esac
    done
}
fd_of() { # fd_of PID INODE
    local f
    for f in /proc/"$1"/fd/*; do
        [ "$(readlink "$f" 2>/dev/null)" = "socket:[$2]" ] && echo "${f##*/}"
    done
}
children() { pgrep -P "$1" | sort -n | tr '\n' ' ' | sed 's/ $//'; }
# Children that are not on their way out (reloads leave old ones exiting).
settled() { # settled MASTER COUNT
    [ "$(pgrep -P "$1" | wc -l)" -eq "$2" ] &&
        ! grep -qs "shutting down" /dev/null $(pgrep -P "$1" | sed 's|.*|/proc/&/cmdline|')
}

# ---- the baseline: a worker of nginx without the library ----

start_nginx_without
ok $? "nginx starts without the library"
wait_workers
read -r w0 w1 <<<"$(workers)"
wait_pinned "$w0" "$w1"
base_epoll=$(eventpoll_count "$w0")
base_fds=$(fd_count "$w0")
base_seq=$(seqpacket_count "$w0")
diag "without the library, worker 0 has $base_fds descriptors, $base_epoll epoll, $base_seq SEQPACKET"
is "$base_seq" 0 "without the library no worker has a SEQPACKET socket"
stop_nginx

# ---- with the library ----

: >"$T/error.log"
start_nginx
ok $? "nginx starts with the library"
wait_pinned_workers
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "master follows worker 0 to CPU 1"

# check_children LABEL: every child of the master (workers, cache manager
# and loader) holds exactly one SEQPACKET socket, whose other end the master
# holds; workers have nginx's own epoll and nothing more.
check_children() {
    local label=$1 p bad=0 peer mine master_socks
    master_socks=" $(socket_inodes "$m" | tr '\n' ' ') "
    for p in $(children "$m"); do
        n=$(seqpacket_count "$p")
        [ "$n" -eq 1 ] || { diag "$label: child $p has $n SEQPACKET sockets"; bad=1; continue; }
        mine=$(comm -12 <(socket_inodes "$p" | sort -u) <(seqpacket_inodes))
        # ss prints a unix socket's inode and its peer's inode.
        peer=$(ss -xa 2>/dev/null | awk -v i="$mine" '$1 == "u_seq" && $6 == i {print $8}')
        case $master_socks in
        *" $peer "*) ;;
        *) diag "$label: child $p's channel $mine leads to $peer, not the master"; bad=1 ;;
        esac
    done
    ok "$bad" "$label: each child holds exactly one SEQPACKET socket, leading to the master"
    bad=0
    for p in $(workers); do
        n=$(eventpoll_count "$p")
        [ "$n" -eq "$base_epoll" ] || { diag "$label: worker $p has $n epoll descriptors"; bad=1; }
    done
    ok "$bad" "$label: each worker has as many epoll descriptors as without the library ($base_epoll)"
    local got want
    got=$(seqpacket_count "$m")
    want=$(pgrep -P "$m" | wc -l)
    is "$got" "$want" "$label: master holds one SEQPACKET socket per live child"
    [ "$got" = "$want" ] || master_extra_channels "$label"
}

is "$(fd_count "$w0")" "$((base_fds + 1))" "worker 0 has one descriptor more than without the library"
check_children "at start"

nkids=$(pgrep -P "$m" | wc -l)
wait_for "settled $m $nkids"
fds0=$(fd_count "$m")
threads0=$(threads_of "$m")
diag "before the reloads: master $m has $fds0 descriptors, $threads0 threads, $nkids children"

t0=$(date +%s.%N)
took_effect=0
for ((i = 1; i <= RELOADS; i++)); do
    old=$(workers)
    kill -HUP "$m"
    if wait_new_workers "$old"; then
        took_effect=$((took_effect + 1))
    else
        diag "reload $i: no new workers (workers: $(workers))"
    fi
done
t1=$(date +%s.%N)
is "$took_effect" "$RELOADS" "each of $RELOADS reloads brings a new set of workers"
diag "$RELOADS reloads took $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s"

wait_for "settled $m $nkids"
ok $? "the old workers are gone ($(children "$m"))"
read -r n0 n1 <<<"$(workers)"
wait_pinned "$n0" "$n1"
wait_for "[ \"\$(fd_count $m)\" -eq $fds0 ]"
is "$(fd_count "$m")" "$fds0" "after $RELOADS reloads the master has as many descriptors as before"
is "$(threads_of "$m")" "$threads0" "and as many threads"
wait_for 'lib_lines | grep -q "worker $n0 now leads"'
is "$(cpus_of "$m")" 1 "and it is still on CPU 1"
is "$(cpus_of "$n0") $(cpus_of "$n1")" "1 0" "the last workers are on CPUs 1 and 0"
check_children "after $RELOADS reloads"
is "$(grep -c "masteraff: master $m ->" "$T/error.log")" 0 "no move logged: the master was placed at start"
is "$(grep -c "masteraff: master $m stays on CPUs 1 (package 1), placed there at start" "$T/error.log")" 1 \
    "one line says worker 0 confirmed the placement at start"
is "$(grep -c 'masteraff:.*\[\(warn\|error\)\]\|\[\(warn\|error\)\].*masteraff' "$T/error.log")" 0 \
    "no masteraff warning or error"
serves
ok $? "nginx still serves"

done_testing
