#!/usr/bin/env bash
# A worker that floods the library's channel cannot make nginx's master
# block, spin, hold back a signal or follow its word. test/flood.so makes
# worker 1 (pinned to CPU 0) send well-formed reports of every CPU on the
# channel, as fast as it can, for FLOOD_SECONDS, from inside its pin (so
# that nginx has not yet named it a worker); worker 0 pins to CPU 1,
# where the master was placed at start, on the fake two-package tree.
# test/sigcount.so counts the returns of nginx's sigsuspend: none may come
# without one of nginx's handlers run. Then worker 0 pins only once the
# flood has filled the channel (FLOOD_FIRST), with no placement at start:
# its report is lost, and the master learns from the kernel where it runs.
. "$(dirname "$0")/lib.sh"
PORT=18451
COUNT=$SRCDIR/test/sigcount.so
FLOOD=$SRCDIR/test/flood.so
for f in "$COUNT" "$FLOOD"; do
    [ -f "$f" ] || { echo "Bail out! $f is not built (make ${f#"$SRCDIR"/})"; exit 1; }
done
make_twopkg
# The workers run as nobody: the flooder writes its count there.
chmod 711 "$T"
mkdir -m 777 "$T/flood"
export SIGCOUNT_FILE=$T/returns FLOOD_CPU=0 FLOOD_SECONDS=4 FLOOD_FILE=$T/flood/count

# CPU time of a process so far, in clock ticks (user + system).
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# The master's child pinned to CPU $1.
child_on() {
    local p
    for p in $(pgrep -P "$m"); do
        [ "$(cpus_of "$p")" = "$1" ] && echo "$p"
    done
}

write_conf "10 01"
LIB="$COUNT $FLOOD $LIB" start_nginx
wait_for '[ -n "$(master_pid)" ]'
m=$(master_pid)
wait_for '[ -n "$(child_on 0)" ] && [ -n "$(child_on 1)" ]'
ok $? "worker 0 pins to CPU 1, worker 1 to CPU 0 and floods"
w1=$(child_on 0)
m0=$(ticks "$m")
f0=$(ticks "$w1")

mv "$T/error.log" "$T/error.log.1"
kill -USR1 "$m"
wait_for "[ -e '$T/error.log' ]"
ok $? "during the flood, USR1 reopens error.log: the signal is not held back"
[ ! -s "$FLOOD_FILE" ]
ok $? "and the flood was still going on"
serves
ok $? "nginx serves during the flood"
is "$(cpus_of "$m")" 1 "the master stays on worker 0's CPU 1"

wait_for "[ -s '$FLOOD_FILE' ]"
m1=$(ticks "$m")
f1=$(ticks "$w1")
diag "$(cat "$FLOOD_FILE") reports in ${FLOOD_SECONDS}s; CPU ticks: flooder $((f1 - f0)), master $((m1 - m0))"
[ $((f1 - f0)) -gt 0 ] && [ $(((m1 - m0) * 10)) -lt $((f1 - f0)) ]
ok $? "the master spent less than a tenth of the flooder's CPU time on it"

cat "$T/error.log.1" "$T/error.log" >"$T/all.log"
is "$(grep -ac "masteraff: child $w1 keeps reporting; no longer listening to it" "$T/all.log")" 1 \
    "one line says the master stops listening to the flooding worker"
! grep -a "masteraff: master $m -> " "$T/all.log"
ok $? "the master never followed the flooder's word"
is "$(grep -c '^stray$' "$SIGCOUNT_FILE")" 0 "sigsuspend never returned to nginx without one of its handlers run"

old=$(workers)
kill -HUP "$m"
wait_new_workers "$old"
ok $? "a reload after the flood brings new workers"
! grep -aqE '\[(alert|crit|emerg)\]' "$T/all.log" "$T/error.log"
ok $? "no [alert], [crit] or [emerg] line"

# ---- worker 0's report lost in the flood ----

fresh
rm -f "$FLOOD_FILE" "$FLOOD_FILE.started"
FLOOD_FIRST=1 MASTERAFF_EARLY=off LIB="$FLOOD $LIB" start_nginx
wait_for '[ -n "$(master_pid)" ]'
m=$(master_pid)
wait_for '[ -n "$(child_on 0)" ] && [ -n "$(child_on 1)" ]'
ok $? "worker 1 floods on CPU 0; worker 0 pins to CPU 1 once the channel is full"
w0=$(child_on 1)
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the master follows worker 0 to CPU 1 all the same"
grep -qa "masteraff: master $m -> CPUs 1 (package 1), following worker $w0 " "$T/error.log"
ok $? "the line names worker 0" || lib_lines | sed 's/^/#   /'
grep -qa "masteraff: process $w0 pinned itself, but its parent $m cannot be told (its channel is full)" "$T/error.log"
ok $? "worker 0 said its report was lost: the master did not hear it"
done_testing
