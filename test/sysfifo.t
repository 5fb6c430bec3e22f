#!/usr/bin/env bash
# A file under MASTERAFF_SYSFS that is no regular file (a FIFO with no
# writer, a device) is never opened in a way that blocks: nginx starts when
# the start's placement would read it, and a reload goes through when only
# the master's decisions after the start would (in its sleep and at its
# forks). Each wait is bounded: a hang fails, it does not hang the test.
. "$(dirname "$0")/lib.sh"
PORT=18231
make_twopkg
write_conf "10 01"

lib_lines() { cat "$T/error.log" "$T/stderr" 2>/dev/null | grep -a 'masteraff: '; }

# fifo_at CPU FILE: replaces one topology file of the fake tree by a FIFO.
fifo_at() {
    rm -rf "$T/sys"
    make_twopkg
    rm -f "$T/sys/devices/system/cpu/cpu$1/$2"
    mkfifo "$T/sys/devices/system/cpu/cpu$1/$2"
}

# Stops nginx; a master that hangs is killed, and its workers with it, so
# that the next case has the port.
stop_all() {
    local m kids
    m=$(master_pid)
    kids=$([ -n "$m" ] && pgrep -P "$m")
    stop_nginx
    [ -z "$kids" ] || kill -9 $kids 2>/dev/null
    for m in $kids; do wait_for "gone $m"; done
}

# Starts nginx with the library; the foreground process is killed if it
# hangs (after 60 s). Returns its exit status (137 when killed).
start_bounded() {
    timeout -s KILL 60 env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" \
        "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
}

# ---- a CPU the start reads: worker 0's, CPU 1 ----
fifo_at 1 topology/package_cpus_list
start_bounded
is "$?" 0 "FIFO at CPU 1's package_cpus_list: nginx starts, not held by the FIFO"
wait_workers
ok $? "and has its two workers"
serves
ok $? "and serves"
is "$(cpus_of "$(master_pid)")" 0-1 "the master is not placed at start: its topology is unreadable"
stop_all
: >"$T/error.log"

# ---- a CPU only the decisions after the start read: CPU 0 ----
fifo_at 0 topology/package_cpus_list
start_bounded
is "$?" 0 "FIFO at CPU 0's package_cpus_list: nginx starts, not held by the FIFO"
wait_pinned_workers
ok $? "the workers pin themselves"
old=$(workers)
kill -HUP "$m"
wait_new_workers "$old"
ok $? "a reload goes through: two new workers"
wait_for "lib_lines | grep -q 'master $m -> CPUs 1\|master $m stays on CPUs 1'"
ok $? "the master follows worker 0 on CPU 1 all the same"
stop_all

# ---- a device: never opened (opening one can act) ----
rm -rf "$T/sys"
make_twopkg
rm -f "$T/sys/devices/system/cpu/cpu1/topology/package_cpus_list"
ln -s /dev/zero "$T/sys/devices/system/cpu/cpu1/topology/package_cpus_list"
start_bounded
is "$?" 0 "/dev/zero at CPU 1's package_cpus_list: nginx starts"
wait_workers
is "$(cpus_of "$(master_pid)")" 0-1 "and the master is not placed on a device's word"
stop_all

done_testing
