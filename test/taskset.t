#!/usr/bin/env bash
# An administrator's taskset -p on a master the library moved: the mask is
# the administrator's from then on. The next child the master forks (the
# cache manager nginx respawns) starts on it, the master stays on it when
# worker 0 is respawned and through a reload, and one line says so.
# Without the library the children would start on the administrator's
# mask too, and on a second one the administrator gives later.
. "$(dirname "$0")/lib.sh"
PORT=18236
command -v taskset >/dev/null || skip_all "no taskset"
taskset -c 0,1 true 2>/dev/null || skip_all "CPUs 0 and 1 are not both available here"

make_twopkg
write_conf "10 01"
start_nginx
wait_workers
m=$(master_pid)
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the library puts the master on worker 0's CPU 1"

taskset -p -c 0 "$m" >/dev/null
ok $? "taskset -p -c 0 on the master"

cm=$(children_of "$m" "cache manager")
kill -9 "$cm"
wait_for "new=\$(children_of $m 'cache manager') && [ -n \"\$new\" ] && [ \"\$new\" != $cm ]"
is "$(cpus_of "$new")" 0 "the respawned cache manager starts on the administrator's CPU 0"
grep -q "masteraff: master $m is on CPUs 0, not the CPUs 1 it was given: its mask was set by the program or an administrator, and the library no longer moves it or its memory" "$T/error.log"
ok $? "one line says the mask is the administrator's now"

# pinned_on LIST CPU...: each worker in LIST on its CPU, in order.
pinned_on() {
    local list=($1) i=0
    shift
    for c in "$@"; do
        [ "$(cpus_of "${list[$i]}")" = "$c" ] || return 1
        i=$((i + 1))
    done
}

read -r w0 w1 <<<"$(workers)"
kill -9 "$w0"
wait_for "[ \$(workers | wc -w) -eq 2 ] && ! workers | grep -qw $w0"
wait_for "pinned_on \"$w1 \$(new_workers '$w0 $w1')\" 0 1"
ok $? "worker 0 respawned and pinned to CPU 1"
is "$(cpus_of "$m")" 0 "the master stays on CPU 0"

old=$(workers)
kill -HUP "$m"
wait_new_workers "$old"
wait_for "pinned_on \"\$(new_workers '$old')\" 1 0"
ok $? "a reload: the new worker 0 pins to CPU 1 again"
wait_for "[ \$(workers | wc -w) -eq 2 ]"
is "$(cpus_of "$m")" 0 "the master stays on CPU 0"
is "$(grep -c 'masteraff: master .* following' "$T/error.log")" 0 "and the library moves it no more"

taskset -p -c 0-1 "$m" >/dev/null
ok $? "taskset -p -c 0-1 on the master, a second time"
cm=$(children_of "$m" "cache manager")
kill -9 "$cm"
wait_for "new=\$(children_of $m 'cache manager') && [ -n \"\$new\" ] && [ \"\$new\" != $cm ]"
is "$(cpus_of "$new")" 0-1 "the next cache manager starts on the administrator's new CPUs 0-1, as without the library"
serves
ok $? "nginx serves"
done_testing
