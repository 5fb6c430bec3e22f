#!/usr/bin/env bash
# A program that is not a target: with the library preloaded it has no extra
# thread, descriptor or signal handler. And no exec'd program, from a target
# or its children, inherits a descriptor of the library.
. "$(dirname "$0")/lib.sh"
PORT=18084 # unused: no nginx here

mkfifo "$T/f" "$T/g"

# Everything about process $1 the library could change: threads, caught
# signals, descriptors (inode numbers left out).
view() {
    local f
    awk '/^(Threads|SigCgt):/ {print $1, $2}' "/proc/$1/status"
    for f in $(ls "/proc/$1/fd" | sort -n); do
        echo "fd $f $(readlink "/proc/$1/fd/$f" | sed 's/\[[0-9]*\]/[N]/')"
    done
}

# probe [VAR=VALUE...]: a bash, run with those variables, that forks two
# children which neither exec nor exit (they wait on a fifo); prints the
# bash's view while they run, how many datagram sockets (the library's
# channel) the bash and its children hold, and how many ways the channel
# departs from the library's design (channel_faults); then stops them. An
# active library makes its channel before the first fork returns: once
# the children are there, so is the channel.
probe() {
    local p kids
    env "$@" bash -c '( read -r -t 20 <>"$1" ) & ( read -r -t 20 <>"$1" ) & wait' \
        probe "$T/f" &
    p=$!
    wait_for "[ \$(pgrep -P $p | wc -l) -eq 2 ]" 5 || diag "probe $p: children did not start"
    kids=$(pgrep -P "$p")
    view "$p"
    echo "datagram sockets: $(library_sockets "$p" | wc -l) in the bash, $(library_sockets $kids | wc -l) in its children"
    echo "channel faults: $(channel_faults "$p" | wc -l)"
    [ -n "$kids" ] && kill $kids
    wait "$p"
}

without=$(probe -u LD_PRELOAD)
with=$(probe LD_PRELOAD="$LIB")
star=$(probe LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS='*')
diag "without the library: " $without
diag "with the library:    " $with
diag "with MASTERAFF_PROGRAMS='*': " $star

is "$(grep Threads <<<"$without")" "Threads: 1" "without the library the forking bash has one thread"
is "$(grep Threads <<<"$with")" "Threads: 1" "with the library, bash (not a target) still has one thread"
is "$(grep SigCgt <<<"$with")" "$(grep SigCgt <<<"$without")" "with the library, bash catches the same signals (SigCgt)"
is "$(grep '^fd' <<<"$with" | tr '\n' ' ')" "$(grep '^fd' <<<"$without" | tr '\n' ' ')" \
    "with the library, bash has the same descriptors"
is "$with" "$without" "with the library, everything is the same"

is "$(grep '^datagram' <<<"$with")" "datagram sockets: 0 in the bash, 0 in its children" \
    "with the library, neither bash nor its children hold a datagram socket"

# The same bash made a target: the checks above now see the library, but
# no thread of it.
is "$(grep '^datagram' <<<"$star")" "datagram sockets: 2 in the bash, 2 in its children" \
    "with MASTERAFF_PROGRAMS='*' the forking bash holds the library's pair, each child one socket"
is "$(grep '^channel' <<<"$star")" "channel faults: 0" "and they are its ends as designed: the bash holds both, each child the one it sends on"
is "$(grep -c 'socket:\[N\]' <<<"$star")" 2 "the bash has no other socket"
is "$(grep Threads <<<"$star")" "Threads: 1" "with MASTERAFF_PROGRAMS='*' the forking bash still has one thread"
is "$(grep -c 'anon_inode:' <<<"$star")" 0 "and no epoll set or eventfd"
is "$(grep SigCgt <<<"$star")" "$(grep SigCgt <<<"$without")" "and catches the same signals"

# ---- nothing of the library reaches an exec'd program ----

# A target bash with a child that keeps its channel; ls exec'd by another
# child; ls exec'd by a child that forked first (a master itself); a pause
# while the test looks at the bash; ls exec'd by the bash itself.
execs='f=$1 g=$2
( read -r -t 20 <>"$f" ) & a=$!
echo "== child exec"; ls -l /proc/self/fd
echo "== nested master exec"
( ( read -r -t 20 <>"$f" ) & echo $! >"$3"; exec ls -l /proc/self/fd )
echo "== waiting"; read -r -t 20 <>"$g"
kill $a
echo "== master exec"; exec ls -l /proc/self/fd'
env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS=bash bash -c "$execs" execs "$T/f" "$T/g" "$T/orphan" \
    >"$T/execs.out" 2>&1 &
bp=$!
wait_for 'grep -q "^== waiting" "$T/execs.out"'
ok $? "the target bash runs its children"
bview=$(view "$bp")
is "$(channel_faults "$bp")" "" "MASTERAFF_PROGRAMS=bash: the bash holds the library's pair, its waiting child the end it sends on"
is "$(grep Threads <<<"$bview")" "Threads: 1" "and the bash has one thread"
echo go 1<>"$T/g" # never blocks, even if the bash gave up waiting
wait_for "gone $bp"
wait "$bp"
[ -s "$T/orphan" ] && kill "$(cat "$T/orphan")" 2>/dev/null

section() { awk -v s="== $1" '/^== / {on = ($0 == s); next} on' "$T/execs.out"; }
lib_fds() { grep -c 'socket:\|anon_inode:'; }
listed() { section "$1" | grep -c ' -> '; }

ok "$([ "$(listed "child exec")" -ge 3 ]; echo $?)" "ls exec'd by a forked child ran"
is "$(section "child exec" | lib_fds)" 0 "ls exec'd by a forked child has no socket, epoll set or eventfd"
ok "$([ "$(listed "nested master exec")" -ge 3 ]; echo $?)" "ls exec'd by a child that had forked ran"
is "$(section "nested master exec" | lib_fds)" 0 "ls exec'd by a child that had forked (a master itself) has none"
ok "$([ "$(listed "master exec")" -ge 3 ]; echo $?)" "ls exec'd by the target bash ran"
is "$(section "master exec" | lib_fds)" 0 "ls exec'd by the target bash itself has none"
[ "$tap_failed" -eq 0 ] || { diag "the target bash printed:"; sed 's/^/#   /' "$T/execs.out"; }

# ---- a vfork child that execs while another thread is inside dlopen, and
# so holds the dynamic linker's lock: the library must not wait for it ----
for call in execve execvp; do
    env LD_PRELOAD="$LIB" "$SRCDIR/test/vforkexec" "$SRCDIR/test/blockinit.so" \
        $call >"$T/vfork.out" 2>&1
    ok $? "a vfork child's setsid and $call do not wait for a dlopen in another thread ($(cat "$T/vfork.out"))"
done

# ---- which programs are targets: MASTERAFF_PROGRAMS against bash's file
# name (the debug line "loaded in" is written in a target only) ----
targets_bash() {
    env LD_PRELOAD="$LIB" MASTERAFF_LOG=debug MASTERAFF_PROGRAMS="$1" \
        bash -c true 2>&1 | grep -c 'loaded in .*/bash,'
}
while read -r pattern want; do
    is "$(targets_bash "$pattern")" "$want" "MASTERAFF_PROGRAMS='$pattern': bash is $([ "$want" = 1 ] || echo "not ")a target"
done <<'LIST'
bash 1
bas 0
bashx 0
bash* 1
b* 1
bash? 0
ba?h 1
[ab]ash 1
[!b]ash 0
*sh 1
ba\sh 1
nginx*,bash 1
nginx*,dash 0
* 1
LIST

# Without /proc the program is named by argv[0]'s file name, not by the
# path it was started by, which for a script is the script's.
if why=$(no_namespace); then
    skip "no private mount namespace here ($why)" "without /proc, a target named by argv[0]"
else
    printf '#!/bin/bash\ntrue\n' >"$T/nginx-script" && chmod +x "$T/nginx-script"
    noproc=$(unshare -m sh -c 'mount -t tmpfs none /proc &&
        env LD_PRELOAD="$1" MASTERAFF_LOG=debug MASTERAFF_PROGRAMS=bash \
            /bin/bash -c true &&
        env LD_PRELOAD="$1" MASTERAFF_LOG=debug "$2"' noproc "$LIB" "$T/nginx-script" 2>&1)
    ok "$(grep -q 'loaded in /bin/bash,' <<<"$noproc"; echo $?)" "without /proc, bash started as /bin/bash is a target, its path taken from argv[0]"
    ok "$(! grep -q 'nginx-script' <<<"$noproc"; echo $?)" "without /proc, a script named nginx-script does not make its bash a target"
    [ "$tap_failed" -eq 0 ] || diag "without /proc: $noproc"
    # A master knows its descriptors by what fstat says of them, which
    # needs no /proc: a target bash without it still makes its channel,
    # seen from outside its mount namespace.
    unshare -m sh -c 'mount -t tmpfs none /proc &&
        exec env LD_PRELOAD="$1" MASTERAFF_PROGRAMS=bash /bin/bash -c "$2" noproc "$3" "$4"' \
        noproc "$LIB" '( read -r -t 20 <>"$1" ) & echo $$ >"$2"; wait' "$T/f" "$T/noproc.pid" \
        2>"$T/noproc.err" &
    np_run=$!
    wait_for "[ -s '$T/noproc.pid' ] && [ \$(pgrep -P \$(cat '$T/noproc.pid') | wc -l) -eq 1 ]"
    np=$(cat "$T/noproc.pid")
    is "$(channel_faults "$np")" "" "without /proc, a target bash that forks holds the library's pair, its child the end it sends on"
    echo go 1<>"$T/f"
    wait "$np_run"
    ok $? "and it ends as it would"
    sed 's/^/#   /' "$T/noproc.err"
    ! grep -q 'masteraff:' "$T/noproc.err"
    ok $? "and the library has nothing to say"
fi

# Why the library does nothing, for the one who asks.
out=$(env LD_PRELOAD="$LIB" MASTERAFF_LOG=debug /bin/true 2>&1)
grep -q "\[debug\] .*masteraff: /usr/bin/true is not a target: its name does not match MASTERAFF_PROGRAMS (nginx\*,openresty\*,angie\*,freenginx\*,tengine\*)" <<<"$out"
ok $? "MASTERAFF_LOG=debug: a non-target says why it is not one"
is "$(env LD_PRELOAD="$LIB" /bin/true 2>&1)" "" "and says nothing without it"

done_testing
