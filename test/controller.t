#!/usr/bin/env bash
# nginx as the child of a controller that is not a target, as ingress-nginx
# runs it: the controller (here a copy of dash named as ingress-nginx's,
# nginx-ingress-controller) has LD_PRELOAD in its environment, as the
# Deployment would set it, starts nginx in the foreground (daemon off), and
# reloads it with `nginx -s reload` and with SIGHUP to the master, each
# time with a new worker_cpu_affinity. The master follows each reload on
# the two-package tree; neither the controller nor `nginx -s reload` gets
# anything from the library.
#
# ingress-nginx's executable name matches the default MASTERAFF_PROGRAMS
# (nginx*): its environment names the server alone, MASTERAFF_PROGRAMS=nginx,
# as docs/nginx.md says. The last part shows why.
. "$(dirname "$0")/lib.sh"
PORT=18421

make_twopkg
mkdir -p "$T/bin"
cp "$(command -v dash || command -v sh)" "$T/bin/nginx-ingress-controller"
mkfifo "$T/ctl.fifo"

# The controller: nginx in the foreground as its child, then one command
# a line from the FIFO (held open for reading and writing: never an EOF).
cat >"$T/controller.sh" <<'SH'
nginx=$1 conf=$2 dir=$3
exec 3<>"$dir/ctl.fifo"
"$nginx" -c "$conf" -g 'daemon off;' 2>>"$dir/nginx.stderr" &
child=$!
echo "$child" >"$dir/nginx.child"
while read -r command <&3; do
    case $command in
    signal-reload)
        "$nginx" -c "$conf" -s reload >"$dir/signal.out" 2>&1
        echo $? >"$dir/signal.rc" ;;
    hup) kill -HUP "$child" ;;
    quit) kill -QUIT "$child"; wait "$child"; echo $? >"$dir/nginx.rc"; exit 0 ;;
    esac
done
SH

write_conf "10 01"
env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_PROGRAMS=nginx \
    "$T/bin/nginx-ingress-controller" "$T/controller.sh" "$NGINX" "$T/nginx.conf" "$T" &
ctl=$!
bg_pids+=("$ctl")

wait_pinned_workers
ok $? "the controller starts nginx in the foreground; its two workers pin"
is "$(cat "$T/nginx.child" 2>/dev/null)" "$m" "the master is the controller's child (daemon off)"
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "start: the master is on worker 0's package (CPU 1)"
wait_for "grep -q 'masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed' '$T/error.log'"
ok $? "start: error.log says it was placed there at start, and confirmed"
serves
ok $? "nginx serves"

# reload WAY MASK0 MASK1 CPU: the controller reloads nginx WAY with a new
# worker_cpu_affinity; the master follows the new worker 0 to CPU.
reload() {
    local way=$1 cpu=$4 old
    old=$(workers)
    write_conf "$2 $3"
    lines=$(wc -l <"$T/error.log")
    echo "$way" >"$T/ctl.fifo"
    wait_new_workers "$old"
    ok $? "$way: nginx forks two new workers"
    read -r w0 w1 <<<"$(new_workers "$old")"
    wait_for "[ \"\$(cpus_of $m)\" = $cpu ]"
    is "$(cpus_of "$m")" "$cpu" "$way: the master follows the new worker 0 to CPU $cpu"
    wait_for "tail -n +$((lines + 1)) '$T/error.log' | grep -q 'masteraff: master $m -> CPUs $cpu (package $cpu), following worker $w0 on CPU $cpu'"
    ok $? "$way: error.log has the line for it (worker $w0)" ||
        tail -n +$((lines + 1)) "$T/error.log" | grep masteraff: | sed 's/^/#   /'
}

reload signal-reload 01 10 0
wait_for "[ -s '$T/signal.rc' ]"
is "$(cat "$T/signal.rc")" 0 "nginx -s reload, run by the controller, exits 0"
grep -q 'signal process started' "$T/signal.out" && ! grep -q masteraff: "$T/signal.out"
ok $? "it says only nginx's own line: the library does nothing in it" || sed 's/^/#   /' "$T/signal.out"
reload hup 10 01 1
reload signal-reload 01 10 0

# The controller: no thread, no descriptor from the library.
is "$(threads_of "$ctl")" 1 "the controller runs one thread"
ls -l "/proc/$ctl/fd" | grep -E 'socket:|eventpoll|eventfd' | sed 's/^/#   /'
! ls -l "/proc/$ctl/fd" | grep -qE 'socket:|eventpoll|eventfd'
ok $? "and holds no socket, epoll set or eventfd"
! grep -q masteraff: "$T/nginx.stderr"
ok $? "nothing of the library's on the controller's stderr" || sed 's/^/#   /' "$T/nginx.stderr"

echo quit >"$T/ctl.fifo"
wait "$ctl"
ok $? "the controller stops nginx (QUIT) and exits"
is "$(cat "$T/nginx.rc")" 0 "nginx exits 0"
! grep -qE '\[(alert|emerg)\]' "$T/error.log"
ok $? "no [alert] or [emerg] in error.log"
rm -f "$T/nginx.pid"

# With the default MASTERAFF_PROGRAMS the controller's name is a target's:
# the library would load in it as in nginx, and follow its children.
env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_LOG=debug \
    "$T/bin/nginx-ingress-controller" -c 'true' 2>"$T/default.err"
grep -q "masteraff: loaded in $T/bin/nginx-ingress-controller" "$T/default.err"
ok $? "the default nginx* takes nginx-ingress-controller for a target: hence MASTERAFF_PROGRAMS=nginx" ||
    sed 's/^/#   /' "$T/default.err"

done_testing
