#!/usr/bin/env bash
# A reload storm with many workers: 10 reloads 0.1 s apart, each with the
# other worker_cpu_affinity (worker 0 on CPU 1, package 1, then CPU 0,
# package 0, and so on; the last one on CPU 0), then worker 0 killed. nginx
# folds the signals that come while it reloads into one reload, so several
# generations of workers live at once. The master ends on the final worker
# 0's package, and error.log has one line per decision: none lost (each
# line starts where the one before left the master), none repeated.
#
# STORM_WORKERS workers (default 32: enough for reloads that overlap on a
# loaded 2-CPU machine; scripts/scale runs the full sizes).
. "$(dirname "$0")/lib.sh"
PORT=18102
N=${STORM_WORKERS:-32}
W0_ON_1="10 01"
W0_ON_0="01 10"

make_twopkg
write_many_conf "$N" "$W0_ON_1"
start_nginx
ok $? "nginx starts with $N workers"
wait_for "settled_workers $N"
ok $? "$N workers pinned"
m=$(master_pid)
first=$(pgrep -P "$m" | tr '\n' ' ')
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the master is on worker 0's package 1"

# One worker on CPU $1 and the others on the other CPU: the layout of a
# generation whose worker 0 is on CPU $1.
layout_is() { # layout_is CPU PIDS...
    local cpu=$1
    shift
    [ "$(printf '/proc/%s/status\n' "$@" | xargs cat 2>/dev/null |
        awk -v c="$cpu" '/^Cpus_allowed_list/ && $2 == c { n++ } END { print n + 0 }')" = 1 ]
}
storm_over() {
    local kids
    settled_workers "$N" "$first" || return 1
    kids=$(pgrep -P "$m")
    layout_is 0 $kids
}

for ((i = 1; i <= 10; i++)); do
    if ((i % 2 == 1 || i == 10)); then
        write_many_conf "$N" "$W0_ON_0"
    else
        write_many_conf "$N" "$W0_ON_1"
    fi
    kill -HUP "$m"
    sleep 0.1
done
t0=$(date +%s)
wait_for "storm_over" 600
ok $? "after the storm: $N workers of the last configuration, every older one gone"
diag "nginx reloaded $(grep -c '#[0-9]*: reconfiguring$' "$T/error.log") times for 10 signals; settled $(($(date +%s) - t0)) s after the last"
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "the master is on the final worker 0's package 0"

for p in $(pgrep -P "$m"); do
    [ "$(cpus_of "$p")" = 0 ] && w0=$p
done
kill -9 "$w0"
wait_for "gone $w0 && settled_workers $N && layout_is 0 \$(pgrep -P $m)"
ok $? "worker 0 ($w0) killed: nginx respawns it on CPU 0"
for p in $(pgrep -P "$m"); do
    [ "$(cpus_of "$p")" = 0 ] && r0=$p
done
wait_for "grep -q 'masteraff: master $m stays on CPUs 0: worker $r0 now leads' '$T/error.log'"
ok $? "a line says the respawned worker 0 ($r0) leads"
is "$(cpus_of "$m")" 0 "the master stays on package 0"

# ---- the lines ----

grep 'masteraff:' "$T/error.log" >"$T/lines"
diag "$(wc -l <"$T/lines") lines of the library:"
sed 's/^[^]]*\] [0-9#]*: masteraff: /#   /' "$T/lines"
! grep -vE "^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} \[(notice|info|warn)\] $m#[0-9]+: masteraff: master $m .*[^ ]$" "$T/lines" |
    grep . && [ "$(grep -o 'masteraff:' "$T/lines" | wc -l)" = "$(wc -l <"$T/lines")" ]
ok $? "every line is whole, in nginx's shape, from the master, at notice, info or warn"
! grep -E '\[(alert|emerg|crit)\]' "$T/error.log" | grep -v "worker process $w0 exited on signal 9"
ok $? "no [alert], [crit] or [emerg] in error.log but nginx's own for the kill"

# The decisions in order: "-> CPUs X" (a move) or "stays on CPUs X".
sed -n "s/.*masteraff: master $m \(->\|stays on\) CPUs \([0-9,-]*\).*worker \([0-9][0-9]*\).*/\1 \2 \3/p" "$T/lines" |
    sed 's/^stays on/stays/' >"$T/decisions"
chain_ok() {
    local verb cpus worker prev= n=0
    while read -r verb cpus worker; do
        n=$((n + 1))
        if [ -n "$prev" ]; then
            case $verb in
            "->") [ "$cpus" != "$prev" ] || { diag "line $n moves the master to CPUs $cpus, where the line before left it"; return 1; } ;;
            stays) [ "$cpus" = "$prev" ] || { diag "line $n says the master stays on CPUs $cpus, but the line before left it on $prev"; return 1; } ;;
            esac
        fi
        prev=$cpus
    done <"$T/decisions"
    [ "$n" -ge 2 ] && [ "$prev" = 0 ]
}
chain_ok
ok $? "each decision starts where the one before left the master, and the last leaves it on CPU 0: none lost"
is "$(awk '{ print $3 }' "$T/decisions" | sort | uniq -d | tr '\n' ' ')" "" \
    "no worker is named by two decisions: none repeated"
is "$(tail -n 1 "$T/decisions")" "stays 0 $r0" "the last decision is the respawned worker 0's"
stop_nginx

done_testing
