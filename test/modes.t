#!/usr/bin/env bash
# The ways nginx is run besides a daemon with workers: `daemon off`
# (containers), `master_process off`, `nginx -t` and `nginx -s reload`. Each
# must work as it does without the library.
. "$(dirname "$0")/lib.sh"
PORT=18082

make_twopkg

# Everything a process looks like from outside, but its pid: threads, signal
# handlers, CPUs and descriptors (socket and pipe inode numbers left out).
process_view() {
    local p=$1 f
    echo "Threads $(threads_of "$p")"
    echo "SigCgt $(awk '/^SigCgt/ {print $2}' "/proc/$p/status")"
    echo "Cpus $(cpus_of "$p")"
    for f in $(ls "/proc/$p/fd" | sort -n); do
        echo "fd $f $(fd_kind "$(readlink "/proc/$p/fd/$f")")"
    done
}

# A descriptor's target without inode numbers; a unix socket's with its type
# (0001 stream, nginx's channels; 0002 datagram, the library's) from
# /proc/net/unix.
fd_kind() {
    local inode type
    case $1 in
    socket:\[*\])
        inode=${1#socket:[}
        inode=${inode%]}
        type=$(awk -v i="$inode" '$7 == i {print $5}' /proc/net/unix)
        echo "socket${type:+(unix $type)}" ;;
    *) echo "$1" | sed 's/\[[0-9]*\]/[N]/' ;;
    esac
}

# Lines of nginx's output with the timestamps and pids made uniform.
normalize() {
    sed -E 's#^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} #TIME #;
            s/ [0-9]+#[0-9]+: / PID#TID: /'
}

# ---- daemon off: nginx in the foreground, as in a container ----

write_conf "10 01" "daemon off;"

# fg_run with|without: runs a foreground nginx and checks it; sets fg_view.
fg_run() {
    local how=$1 fg m w0 w1 rc procs
    : >"$T/error.log"
    if [ "$how" = with ]; then
        env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
            "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr" &
    else
        env -u LD_PRELOAD "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr" &
    fi
    fg=$!
    wait_for "[ \"\$(master_pid)\" = $fg ]"
    is "$(master_pid)" "$fg" "daemon off, $how the library: the process started is the master"
    m=$fg
    wait_workers
    read -r w0 w1 <<<"$(workers)"
    wait_pinned "$w0" "$w1"
    if [ "$how" = with ]; then
        wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
        is "$(cpus_of "$m")" 1 "daemon off, with the library: master follows worker 0 to CPU 1"
        grep -q "masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1" "$T/error.log"
        ok $? "daemon off, with the library: error.log has the line for the placement at start"
    else
        is "$(cpus_of "$m")" 0-1 "daemon off, without the library: master stays on 0-1"
    fi
    serves
    ok $? "daemon off, $how the library: nginx serves"
    procs=$((1 + $(pgrep -P "$m" | wc -l)))
    fg_procs[$how]=$procs
    kill -QUIT "$m"
    wait_for "gone $m"
    ok $? "daemon off, $how the library: the master exits on QUIT"
    wait "$fg"
    rc=$?
    is "$rc" 0 "daemon off, $how the library: exit status 0"
    for p in $w0 $w1; do
        wait_for "gone $p" 5 || diag "worker $p still there"
    done
    ! kill -0 "$w0" 2>/dev/null && ! kill -0 "$w1" 2>/dev/null
    ok $? "daemon off, $how the library: the workers are gone too"
    is "$(cat "$T/stderr")" "" "daemon off, $how the library: nothing on stderr"
    gone "$m" || kill -9 "$m" 2>/dev/null
    rm -f "$T/nginx.pid"
}
declare -A fg_procs
fg_run without
fg_run with
is "${fg_procs[with]}" "${fg_procs[without]}" "daemon off: as many processes with the library as without"

# ---- master_process off: a single process ----

write_conf "10 01" "master_process off;"

# single_run with|without: starts a single-process nginx and sets single_*.
single_run() {
    local how=$1 m
    : >"$T/error.log"
    if [ "$how" = with ]; then start_nginx; else start_nginx_without; fi
    ok $? "master_process off, $how the library: nginx starts"
    wait_for '[ -s "$T/nginx.pid" ] && kill -0 "$(master_pid)" 2>/dev/null'
    m=$(master_pid)
    wait_for serves
    ok $? "master_process off, $how the library: nginx serves"
    sleep 0.2 # give a stray helper thread or child the time to appear
    single_procs[$how]=$((1 + $(pgrep -P "$m" | wc -l)))
    single_threads[$how]=$(threads_of "$m")
    single_cpus[$how]=$(cpus_of "$m")
    single_view[$how]=$(process_view "$m")
    single_log[$how]=$(grep -h masteraff "$T/error.log" "$T/stderr")
    stop_nginx
}
declare -A single_procs single_threads single_cpus single_view single_log
single_run without
single_run with
is "${single_procs[with]}" "${single_procs[without]}" "master_process off: same process count (${single_procs[without]})"
is "${single_cpus[with]}" "${single_cpus[without]}" "master_process off: same Cpus_allowed_list"
is "${single_threads[with]}" "${single_threads[without]}" "master_process off: no thread added"
is "${single_log[with]}" "" "master_process off: masteraff logs nothing"
# Same signal dispositions and descriptors as without the library.
with_sig=$(grep '^SigCgt' <<<"${single_view[with]}")
without_sig=$(grep '^SigCgt' <<<"${single_view[without]}")
is "$with_sig" "$without_sig" "master_process off: same signal handlers (SigCgt)"
with_fds=$(grep '^fd' <<<"${single_view[with]}" | tr '\n' ' ')
without_fds=$(grep '^fd' <<<"${single_view[without]}" | tr '\n' ' ')
is "$with_fds" "$without_fds" "master_process off: same descriptors"

# ---- nginx -t ----

# t_run with|without: nginx -t; prints its exit status and all it said, on
# stdout, stderr and in the error logs, normalized.
t_run() {
    local out rc
    : >"$T/error.log"
    if [ "$1" = with ]; then
        out=$(env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
            "$NGINX" -t -c "$T/nginx.conf" 2>&1)
    else
        out=$(env -u LD_PRELOAD "$NGINX" -t -c "$T/nginx.conf" 2>&1)
    fi
    rc=$?
    rm -f "$T/nginx.pid" # nginx -t writes it
    echo "exit $rc"
    { echo "$out"; echo "-- error.log"; cat "$T/error.log"; } | normalize
}

write_conf "10 01"
with=$(t_run with)
without=$(t_run without)
is "$(head -1 <<<"$without")" "exit 0" "nginx -t, good config, without the library: exit 0"
is "$with" "$without" "nginx -t, good config: same exit status and output with the library"
grep -q "test is successful" <<<"$with"
ok $? "nginx -t, good config: says the test is successful"

write_conf "10 01" "no_such_directive on;"
with=$(t_run with)
without=$(t_run without)
is "$(head -1 <<<"$without")" "exit 1" "nginx -t, bad config, without the library: exit 1"
is "$with" "$without" "nginx -t, bad config: same exit status and output with the library"

# The same error before the error_log directive: reported on stderr.
write_conf "10 01"
sed -i '1i no_such_directive on;' "$T/nginx.conf"
with=$(t_run with)
without=$(t_run without)
is "$(head -1 <<<"$without")" "exit 1" "nginx -t, config bad on its first line, without the library: exit 1"
is "$with" "$without" "nginx -t, config bad on its first line: same exit status and output with the library"

# ---- nginx -s reload, with the library in the -s command's environment ----

write_conf "10 01"
: >"$T/error.log"
start_nginx
ok $? "nginx starts with the library"
wait_workers
m=$(master_pid)
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "master follows worker 0 to CPU 1"
wait_for "lib_lines | grep -q 'placed there at start'"
# The library's lines: nginx's own name the test's directory too (the
# cache loader's, 60 s after a reload).
lines=$(lib_lines | grep -c .)

# s_reload with|without: nginx -s reload; checks the master reloaded and
# sets s_out to what the -s command printed, s_new to the new workers.
s_reload() {
    local how=$1 old rc
    old=$(workers)
    if [ "$how" = with ]; then
        s_out=$(env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
            "$NGINX" -c "$T/nginx.conf" -s reload 2>&1)
    else
        s_out=$(env -u LD_PRELOAD "$NGINX" -c "$T/nginx.conf" -s reload 2>&1)
    fi
    rc=$?
    s_out=$(normalize <<<"$s_out")
    is "$rc" 0 "nginx -s reload $how the library in its environment: exit 0"
    wait_new_workers "$old"
    ok $? "nginx -s reload $how the library: the master reloads (new workers: $(new_workers "$old"))"
    s_new=$(new_workers "$old")
    is "$(master_pid)" "$m" "nginx -s reload $how the library: same master"
}
s_reload without
without=$s_out
s_reload with
with=$s_out
is "$with" "$without" "nginx -s reload: the -s process prints the same with the library as without"
grep -q "signal process started" <<<"$with"
ok $? "nginx -s reload: that is nginx's own notice"
read -r n0 n1 <<<"$s_new"
wait_pinned "$n0" "$n1"
# The last reload's worker 0 leads once the older workers are gone. Every
# generation that led said so: one to three lines, as the first workers
# exit before or after the second reload.
wait_for "lib_lines | grep -q 'worker $n0 now leads'"
is "$(cpus_of "$m")" 1 "master still on CPU 1 after the reloads"
# The lines counted are shown when their number is wrong.
counted=$(lib_lines | grep -v 'now leads, on CPU 1 as the worker before it')
is "$(grep -c . <<<"$counted")" "$lines" \
    "no masteraff line from the -s processes, and for the reloads only that the new worker 0 leads, on the same CPU"
[ "$(grep -c . <<<"$counted")" = "$lines" ] || sed 's/^/#   counted: /' <<<"$counted"
serves
ok $? "nginx serves"
stop_nginx
! pgrep -P "$m" >/dev/null && gone "$m"
ok $? "nginx stopped"

done_testing
