#!/usr/bin/env bash
# nginx's signals behave with the library as without it: the library
# listens in the master's sigsuspend, which must return as nginx's own
# would, when one of nginx's handlers ran, and never else. Each step runs
# twice, with nginx alone and with the library, on the fake two-package
# tree: HUP (taken, and refused), USR1, WINCH then HUP, USR2 (the library
# carried to the new master) and QUIT of the old one, QUIT with an open
# connection and worker_shutdown_timeout, TERM with a stopped worker (the
# master's timer sends SIGKILL), and SIGSTOP/SIGCONT of the master, also
# while its wait has a timeout. test/sigcount.so, loaded first, writes a
# line at each return of nginx's sigsuspend: "stray" when no handler of
# nginx's ran.
. "$(dirname "$0")/lib.sh"
PORT=18441
SLOW_PORT=18442
COUNT=$SRCDIR/test/sigcount.so

[ -f "$COUNT" ] || { echo "Bail out! $COUNT is not built (make test/sigcount.so)"; exit 1; }
make_twopkg
export SIGCOUNT_FILE=$T/returns

# The workers run as nobody: they must reach the file that is served
# slowly.
chmod 711 "$T"
mkdir -p "$T/slow" "$T/cache" "$T/tmp"
head -c 100000 /dev/zero >"$T/slow/big"
chmod -R a+rX "$T/slow"

# start_with LABEL PRELOAD: nginx, worker_cpu_affinity 10 01, a shutdown
# timeout and a server that sends a file at one byte a second, with
# PRELOAD; sets m, w0, w1.
start_with() {
    fresh
    : >"$SIGCOUNT_FILE"
    conf_text "worker_cpu_affinity 10 01;
worker_shutdown_timeout 1s;" "proxy_cache_path $T/cache keys_zone=cache:1m;
    server { listen 127.0.0.1:$SLOW_PORT; location / { root $T/slow; limit_rate 1; } }" \
        >"$T/nginx.conf"
    env LD_PRELOAD="$2" MASTERAFF_SYSFS="$T/sys" "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
    wait_pinned_workers
    serves
    ok $? "$1: nginx starts and serves"
}

emergs() { grep -ac '\[emerg\]' "$T/error.log"; }

# stop_continue: the master stopped and continued; nothing must happen.
stop_continue() {
    kill -STOP "$m"
    wait_for "grep -q '^State:[[:space:]]*T' /proc/$m/status"
    kill -CONT "$m"
    wait_for "! grep -q '^State:[[:space:]]*T' /proc/$m/status"
}

steps() {
    local label=$1 preload=$2 old n e newm
    start_with "$label" "$preload"

    stop_continue
    old=$(workers)
    kill -HUP "$m"
    # Right after the reload the library's wait has a timeout (its checks
    # of the new workers' pins): stopped and continued in it.
    stop_continue
    wait_new_workers "$old"
    ok $? "$label: SIGSTOP and SIGCONT, then HUP: new workers, and again stopped in the reload"
    wait_for "all_gone '$old'"
    serves
    ok $? "$label: the old workers leave, nginx serves"

    old=$(workers)
    e=$(emergs)
    cp "$T/nginx.conf" "$T/good.conf"
    echo "no_such_directive on;" >>"$T/nginx.conf"
    kill -HUP "$m"
    wait_for "[ \$(emergs) -gt $e ]"
    mv "$T/good.conf" "$T/nginx.conf"
    [ "$(workers)" = "$old" ] && serves
    ok $? "$label: a refused HUP says [emerg] and keeps the workers"

    mv "$T/error.log" "$T/error.log.1"
    kill -USR1 "$m"
    wait_for "[ -s '$T/error.log' ] || [ -e '$T/error.log' ]"
    ok $? "$label: USR1 reopens error.log"

    kill -WINCH "$m"
    wait_for "[ -z \"\$(workers)\" ]"
    ok $? "$label: WINCH: the workers leave gracefully, the master stays" 
    kill -0 "$m"
    ok $? "$label: the master lives on"
    kill -HUP "$m"
    wait_workers
    serves
    ok $? "$label: HUP after WINCH: two workers serve again"

    kill -USR2 "$m"
    wait_for "[ -s '$T/nginx.pid.oldbin' ] && [ -s '$T/nginx.pid' ] && [ \"\$(cat '$T/nginx.pid')\" != $m ]"
    newm=$(master_pid)
    ok $? "$label: USR2 starts a new master ($newm)"
    if [[ $preload == *libmasteraff* ]]; then
        grep -q libmasteraff "/proc/$newm/maps"
        ok $? "$label: the new master has the library again"
    fi
    kill -QUIT "$m"
    wait_for "gone $m"
    ok $? "$label: QUIT: the old master leaves"
    wait_for "[ \$(workers | wc -w) -eq 2 ]"
    serves
    ok $? "$label: the new master's workers serve"
    m=$newm

    # A response sent at one byte a second: QUIT waits for it until
    # worker_shutdown_timeout ends it.
    curl -s -o /dev/null "http://127.0.0.1:$SLOW_PORT/big" &
    bg_pids+=($!)
    wait_for "ss -tnH state established '( sport = :$SLOW_PORT )' | grep -q ."
    kill -QUIT "$m"
    wait_for "gone $m" 30
    ok $? "$label: QUIT during a slow response: worker_shutdown_timeout ends it, nginx exits"
    rm -f "$T/nginx.pid.oldbin"

    start_with "$label, again" "$preload"
    kill -STOP "$w1"
    kill -TERM "$m"
    wait_for "gone $m" 30
    ok $? "$label: TERM with a stopped worker: the master's timer escalates to SIGKILL, nginx exits"
    wait_for "gone $w1"
    ok $? "$label: and the stopped worker is gone"

    n=$(grep -c . "$SIGCOUNT_FILE")
    [ "$(grep -c '^own$' "$SIGCOUNT_FILE")" -gt 0 ]
    ok $? "$label: sigsuspend returned to nginx $n times"
    is "$(grep -c '^stray$' "$SIGCOUNT_FILE")" 0 "$label: never without one of nginx's handlers run"
}

steps "nginx alone" "$COUNT"
steps "with the library" "$COUNT $LIB"
! cat "$T/error.log" "$T/error.log.1" | grep -a 'masteraff: ' | grep -qE '\[(alert|crit|emerg)\]'
ok $? "no library line at [alert], [crit] or [emerg]"
done_testing
