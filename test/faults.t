#!/usr/bin/env bash
# Never break the server: when something goes wrong (no descriptors, no or a
# damaged sysfs, a worker outside the master's CPUs, a dead or stopped
# parent, a multi-threaded master, failing calls), nginx and the programs
# still work as without the library, errno included, and one clear line
# says what was skipped.
#
# Needs the helper programs: make test/errnos test/orphan test/mtmaster
. "$(dirname "$0")/lib.sh"
PORT=18201 # used by lib.sh

need_programs errnos orphan mtmaster

make_twopkg

# The library's lines in nginx's logs (after the daemon fork, stderr is the
# error log).
lib_lines() { cat "$T/error.log" "$T/stderr" 2>/dev/null | grep 'masteraff: '; }
count_lines() { lib_lines | grep -c -- "$1"; }
has_line() { lib_lines | grep -q -- "$1"; }

# warns_once PATTERN KEY DESCRIPTION ONCE-DESCRIPTION: the line PATTERN
# comes, and no second line with KEY after it.
warns_once() {
    local pat=$1
    wait_for 'has_line "$pat"'
    ok $? "$3"
    sleep 0.3 # time for a second line, which must not come
    is "$(count_lines "$2")" 1 "$4"
    [ "$(count_lines "$2")" = 1 ] || lib_lines | sed 's/^/# /'
}

# The Cpus_allowed_list of every thread of $1, distinct values.
thread_cpus() {
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^Cpus_allowed_list/ {print $2}' | sort -u | tr '\n' ' ' | sed 's/ $//'
}

fresh_logs() { : >"$T/error.log"; : >"$T/stderr"; }

# ---- descriptors: the library takes 2 ----
#
# nginx needs a socketpair for each child it forks, and during a reload it
# holds the old children's and the new ones' at once (its workers raise
# their own limit: worker_rlimit_nofile). With 16 workers, a cache manager
# and a loader, nginx alone reloads under a soft limit of 78, not 77; the
# library holds 2 descriptors in the master whatever the number of
# children: with it 80 is just enough. test/nofile.t tries such a limit
# with hundreds of workers.

write_conf "auto" "worker_rlimit_nofile 1024;"
sed -i 's/worker_processes 2;/worker_processes 16;/' "$T/nginx.conf"
failures() { grep -E '\[(alert|emerg|crit)\]' "$T/error.log"; }
reload_under_limit() { # reload_under_limit start_nginx|start_nginx_without
    local old kids
    fresh_logs
    (ulimit -Sn 80 && "$1")
    wait_workers 16
    m=$(master_pid)
    wait_for "[ \$(pgrep -P $m | wc -l) -eq 18 ] || failures >/dev/null"
    old=$(workers)
    kids=$(pgrep -P "$m" | tr '\n' ' ')
    kill -HUP "$m"
    # The reload forks 16 workers, a cache manager and a loader: all of
    # them, or nginx says which it could not.
    wait_for "[ \$(children_but '$kids' | wc -w) -eq 18 ] || failures >/dev/null"
    wait_for "[ \$(new_workers '$old' | wc -w) -eq 16 ]"
    new=$(new_workers "$old" | wc -w)
}
for how in start_nginx_without start_nginx; do
    reload_under_limit "$how"
    is "$new" 16 "$how, soft limit 80: a reload starts 16 new workers"
    failures | sed 's/^/# /'
    ! failures >/dev/null
    ok $? "$how: nginx reports no failure (no socketpair() alert)"
    serves
    ok $? "$how: nginx serves"
    if [ "$how" = start_nginx ]; then
        is "$(channel_faults "$m")" "" "$how: the master holds the library's pair, each child its end, no more"
        is "$(count_lines '\[warn\]')" 0 "$how: the library has nothing to warn about"
    fi
    stop_nginx
done

# ---- no topology: sysfs missing or damaged ----

write_conf "10 01"
for kind in nowhere broken-empty broken-garbage broken-truncated broken-missing-cpu; do
    if [ "$kind" = nowhere ]; then
        sys=$T/no/such/sysfs
    else
        sys=$T/$kind
        "$SRCDIR/test/mktree" "$kind" "$sys"
    fi
    fresh_logs
    MASTERAFF_SYSFS=$sys start_nginx
    ok $? "$kind: nginx starts"
    wait_pinned_workers
    ok $? "$kind: the workers pin themselves"
    warns_once "\[warn\] .*masteraff: cannot read the package of CPUs 1 under $sys: .*; master $m not moved" \
        'cannot read' "$kind: a warn line says the topology cannot be read" "$kind: said once"
    is "$(thread_cpus "$m")" 0-1 "$kind: the master is not moved"
    serves
    ok $? "$kind: nginx serves"
    stop_nginx
done

# ---- CPUs offline ----

ok 0 "CPUs offline # SKIP CPU hotplug needs a kernel of its own (test/vm)"

# ---- the leader outside the master's original mask ----
#
# taskset -c 0 nginx, worker 0 on CPU 1: package 1 has nothing in common
# with the master's CPU 0, so the master stays where it is.

write_conf "10 01"
fresh_logs
env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" taskset -c 0 \
    "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
ok $? "taskset -c 0 nginx starts"
wait_pinned_workers
ok $? "worker 0 pins itself to CPU 1, worker 1 to CPU 0"
warns_once "\[warn\] .*masteraff: worker $w0 is on CPUs 1, outside master $m's CPUs 0; master not moved" \
    'outside master' "a warn line says worker 0 is outside the master's CPUs" "said once"
is "$(thread_cpus "$m")" 0 "every thread of the master stays on CPU 0"
kill -9 "$w0"
wait_for "[ \$(new_workers '$w0 $w1' | wc -w) -eq 1 ]"
n0=$(new_workers "$w0 $w1")
wait_for "[ \"\$(cpus_of $n0)\" = 1 ]"
is "$(cpus_of "$n0")" 1 "respawned worker 0 on CPU 1"
wait_for 'lib_lines | grep -q "worker $n0 now leads"'
is "$(thread_cpus "$m")" 0 "the master still stays on CPU 0"
! lib_lines | grep -q "master $m -> CPUs"
ok $? "and never said it moved"
serves
ok $? "nginx serves"
stop_nginx

# ---- the parent gone when the child reports ----

# run_lib PROGRAM ARGS...: PROGRAM from test/, with the library, a target;
# its stderr goes to $T/err.
run_lib() {
    local prog=$1
    shift
    env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS="$prog" MASTERAFF_SYSFS="$T/sys" \
        MASTERAFF_LOG="${LOG:-notice}" "$SRCDIR/test/$prog" "$@" 2>"$T/err"
}
run_plain() {
    local prog=$1
    shift
    "$SRCDIR/test/$prog" "$@" 2>"$T/err"
}
err_lines() { grep 'masteraff: ' "$T/err"; }

relay "dead parent, without the library" run_plain orphan dead
LOG=debug relay "dead parent, with the library" run_lib orphan dead channel
grep -q '^ok - the orphan survived its pins' "$T/relayed"
ok $? "dead parent: the orphan lived through its pins (no SIGPIPE, no blocking)"
err_lines | grep -v 'loaded in' | sed 's/^/# /'
is "$(err_lines | grep -vc 'loaded in')" 1 \
    "dead parent: one line says the report was skipped (at any level)"

relay "stopped parent, without the library" run_plain orphan stopped
relay "stopped parent, with the library" run_lib orphan stopped channel
# The children share one send buffer: once it is full a pin's report is
# lost, which the child says, once.
full=$(err_lines | grep -c 'cannot be told (its channel is full)')
is "$full" 1 "stopped parent: the child says once that its channel is full, not at each of its 20000 pins"
[ "$full" = 1 ] || err_lines | sed 's/^.*masteraff: /masteraff: /' | sort | uniq -c | sed 's/^/# /'
# The parent reaps the child before it reads what the child said.
is "$(err_lines | grep -c 'master [0-9]* -> CPUs')" 0 "stopped parent: running again, it does not follow the child it reaped"

# ---- a multi-threaded master ----

run_lib mtmaster >"$T/mt.out" &
bg_pids+=($!)
wait_for "grep -q '^ready' '$T/mt.out'"
read -r _ mt c0 c1 <"$T/mt.out"
ok $? "mtmaster started (master $mt, children $c0 $c1)"
bg_pids+=("$mt" "$c0" "$c1")
wait_for "[ \"\$(thread_cpus $mt)\" = 1 ]"
is "$(thread_cpus "$mt")" 1 "every thread of the master ends on CPU 1, child 0's package"
is "$(threads_of "$mt")" 4 "the master has its own 4 threads, none of the library's"
is "$(cpus_of "$c0") $(cpus_of "$c1")" "1 0" "the children pinned themselves"
grep -q "masteraff: master $mt -> CPUs 1 (package 1), following worker $c0 on CPU 1" "$T/err"
ok $? "the library says so"
kill -USR1 "$mt"
kill -9 "$c1"
wait_for "grep -q '^SIGCHLD' '$T/mt.out'"
grep -q '^SIGUSR1 main' "$T/mt.out"
ok $? "SIGUSR1 went to the main thread, the only one that takes it: $(grep '^SIGUSR1' "$T/mt.out")"
grep -q '^SIGCHLD main' "$T/mt.out"
ok $? "SIGCHLD went to the main thread, the only one that takes it: $(grep '^SIGCHLD' "$T/mt.out")"
wait_for "! kill -0 $mt 2>/dev/null && ! kill -0 $c0 2>/dev/null"
ok $? "mtmaster and its children are gone"

# ---- errno, with and without the library ----

relay "errno, without the library" run_plain errnos basic
relay "errno, with the library" run_lib errnos basic

relay "EMFILE, without the library" run_plain errnos emfile
relay "EMFILE, with the library" run_lib errnos emfile
no_follow() { err_lines | grep 'Too many open files; process [0-9]* will not follow its children'; }
masters=$(no_follow | wc -l)
[ "$masters" -ge 1 ]
ok $? "EMFILE: the library says why a process cannot follow its children ($masters lines)"
is "$(no_follow | sed -n 's/.*\] \([0-9]*\)#.*/\1/p' | sort -u | wc -l)" "$masters" \
    "EMFILE: one line per process that forks, not per fork"
# A full table also keeps the forking thread's reads from being counted
# (/proc/thread-self/io cannot be opened), which is said once by name.
is "$(err_lines | grep -v 'Too many open files; process [0-9]* will not follow its children' |
    grep -vc 'cannot count its reads (/proc/thread-self/io: Too many open files)')" 0 "EMFILE: no other line"

# RLIMIT_NPROC binds a user that is not root: one that owns no process.
# That user must reach what it runs wherever the checkout is (a clone in
# /root is mode 0700): errnos and the library run from copies in $T/uid,
# which it may enter ($T itself only traversed).
as_other() { # as_other NPROC COMMAND...
    local nproc=$1
    shift
    setpriv --reuid=54321 --regid=54321 --clear-groups \
        prlimit --nproc="$nproc:$nproc" "$@"
}
copy_for_other() {
    mkdir -p "$T/uid"
    cp "$SRCDIR/test/errnos" "$LIB" "$T/uid/"
    chmod 0711 "$T"
    chmod 0755 "$T/uid"
}
nproc_lib() { # nproc_lib NPROC MODE
    as_other "$1" env LD_PRELOAD="$T/uid/libmasteraff.so" MASTERAFF_PROGRAMS=errnos \
        MASTERAFF_SYSFS=/sys "$T/uid/errnos" "$2" 2>"$T/err"
}
nproc_plain() { as_other "$1" "$T/uid/errnos" "$2" 2>"$T/err"; }
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && command -v prlimit >/dev/null &&
    ! pgrep -u 54321 >/dev/null; then
    copy_for_other
    # One process: fork() fails.
    relay "RLIMIT_NPROC=1, without the library" nproc_plain 1 forkfail
    relay "RLIMIT_NPROC=1, with the library" nproc_lib 1 forkfail
    err_lines | sed 's/^/# /'
    # Two: fork() works, one child at a time, and the library, which
    # starts no thread, needs no more.
    relay "RLIMIT_NPROC=2, without the library" nproc_plain 2 forkok
    relay "RLIMIT_NPROC=2, with the library" nproc_lib 2 forkok
    err_lines | sed 's/^/# /'
    is "$(err_lines | grep -c '\[warn\]')" 0 "RLIMIT_NPROC=2: the library skips nothing, and says nothing"
else
    ok 0 "fork failures # SKIP need root, setpriv, prlimit and uid 54321 unused"
fi

done_testing
