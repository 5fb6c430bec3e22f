#!/usr/bin/env bash
# musl, the libc of the nginx:alpine image: the library as `make musl`
# builds it, preloaded into an nginx built with musl-gcc from the source
# tarball in $MASTERAFF_NGINX_SRC (test/musl-nginx; skipped without it),
# on a fake tree where CPU 0 and CPU 1 are two packages. musl calls
# constructors without arguments: the placement at start reads the command
# line from /proc/self/cmdline. Then following a reload, a respawn of
# worker 0, a binary upgrade (USR2), libnuma's absence said (musl's loader
# finds no musl libnuma on this machine; Alpine's numactl has one), and
# pages moved with test/musl-libnuma.c, a stand-in built with musl-gcc,
# found through LD_LIBRARY_PATH.
# And test/errnos.c built with musl-gcc: the interposed fork,
# sched_setaffinity and pthread_setaffinity_np keep errno as libc's do.
. "$(dirname "$0")/lib.sh"
PORT=18231

musl_nginx=$("$SRCDIR/test/musl-nginx")
case $? in
0) ;;
2) skip_all "$musl_nginx" ;;
*) echo "Bail out! the musl nginx does not build:"; sed 's/^/# /' <<<"$musl_nginx"; exit 1 ;;
esac
make -s -C "$SRCDIR" musl >"$T/make.log" 2>&1 ||
    { echo "Bail out! make musl failed"; sed 's/^/# /' "$T/make.log"; exit 1; }
NGINX=$musl_nginx
LIB=$SRCDIR/build-musl/libmasteraff.so
make_twopkg

# said PATTERN DESCRIPTION: a library line of error.log matches PATTERN;
# the lines are shown when none does.
said() {
    lib_lines | grep -q "$1"
    ok $? "$2"
    lib_lines | grep -q "$1" || lib_lines | sed 's/^/#   /'
}
lib_stderr() { grep -a 'masteraff: ' "$T/stderr"; }

# musl_conf AFFINITY: write_conf's nginx.conf for an nginx without the
# rewrite and stub_status modules: a static page says hello, readable by
# the workers' user (nobody).
musl_conf() {
    write_conf "$1"
    sed -i -e "s|location / { return 200 \"hello\\\\n\"; }|root $T/html;|" \
        -e '/stub_status/d' "$T/nginx.conf"
    mkdir -p "$T/html"
    echo hello >"$T/html/index.html"
    chmod a+rx "$T" "$T/html"
}

# ---- both built against musl, and musl runs them here ----
[[ $(LC_ALL=C readelf -l "$NGINX") == *"interpreter: /lib/ld-musl-"* ]]
ok $? "nginx is a musl program ($NGINX)"
"$NGINX" -v 2>&1 | grep -q "nginx version: nginx/"
ok $? "musl's loader runs it: nginx -v"
needed=$(LC_ALL=C readelf -d "$LIB" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
is "$needed" "libc.so " "the library needs musl's libc.so alone (not glibc's libc.so.6)"

# The glibc build in a musl program: musl's loader refuses to start it.
out=$(env LD_PRELOAD="$SRCDIR/libmasteraff.so" "$NGINX" -v 2>&1)
is "$?" 127 "the glibc build preloaded: a musl nginx does not start (status 127)"
grep -q "^Error relocating $SRCDIR/libmasteraff.so: " <<<"$out"
ok $? "and musl's loader names the library it could not relocate"

# The musl build in a glibc program (Debian's nginx): glibc's loader
# ignores it, says so, and the program runs as without it.
out=$(env LD_PRELOAD="$LIB" /usr/sbin/nginx -v 2>&1)
is "$?" 0 "the musl build preloaded: a glibc nginx runs (nginx -v)"
grep -q "object '$LIB' from LD_PRELOAD cannot be preloaded (ELF file ABI version invalid): ignored" <<<"$out"
ok $? "and glibc's loader says it ignored the library" || sed 's/^/#   /' <<<"$out"

# ---- placement at start, from /proc/self/cmdline ----
musl_conf "10 01"
MASTERAFF_LOG=debug start_nginx
wait_pinned_workers
ok $? "the workers pin themselves to CPUs 1 and 0 (sched_setaffinity)"
lib_stderr | grep -q "\[debug\] .*masteraff: read 1 configuration file: $T/nginx.conf$"
ok $? "the constructor knows the command line: it read the configuration given by -c"
lib_stderr | grep -q "\[debug\] .*masteraff: master [0-9]* placed at start on CPUs 1 (package 1)"
ok $? "the master is placed at start, before main()"
wait_for "lib_lines | grep -q 'placed there at start'"
said "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed [0-9]*ms after the start; memory not moved to node 0 (libnuma.so.1 not found, nor $SRCDIR/build-musl/libnuma.so.1)" \
    "error.log: worker 0 confirms the placement (through fork and the daemon's setsid); libnuma's absence, here and beside the library, is said"
is "$(cpus_of "$m")" 1 "the master is on CPU 1"
serves
ok $? "nginx serves"

# ---- following a reload ----
musl_conf "01 10"
reload_workers
wait_for "lib_lines | grep -q 'following worker $n0 '"
lib_lines | grep -q "\[notice\] .*masteraff: master $m -> CPUs 0 (package 0), following worker $n0 on CPU 0"
ok $? "reload to 01 10: the master follows the new worker 0 to CPU 0"
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "the master is on CPU 0"

# ---- a respawn of worker 0 ----
kill -9 "$n0"
wait_for "[ \$(new_workers '$n0 $n1' | wc -w) -eq 1 ]"
r0=$(new_workers "$n0 $n1")
wait_for "lib_lines | grep -q 'worker $r0 now leads'"
lib_lines | grep -q "\[notice\] .*masteraff: master $m stays on CPUs 0: worker $r0 now leads, on CPU 0 as the worker before it"
ok $? "worker 0 killed: its respawn leads, and the master stays"
is "$(master_pid) $(cpus_of "$m")" "$m 0" "the same master, still on CPU 0"

# ---- binary upgrade: the new image is placed at start too ----
kill -USR2 "$m"
wait_for "[ -s $T/nginx.pid.oldbin ] && [ -s $T/nginx.pid ] && [ \"\$(master_pid)\" != $m ]"
new=$(master_pid)
[ -n "$new" ] && [ "$new" != "$m" ]
ok $? "USR2 starts a new master ($new) through execve"
wait_for "lib_lines | grep -q 'master $new stays on'"
said "\[notice\] .*masteraff: master $new stays on CPUs 0 (package 0), placed there at start for worker [0-9]* on CPU 0" \
    "the new master is placed at start on its worker 0's CPU 0"
is "$(grep -c 'libmasteraff.so' "/proc/$new/maps")" "$(grep -c 'libmasteraff.so' "/proc/$m/maps")" \
    "the library is loaded in the new master as in the old"
kill -QUIT "$m"
wait_for "gone $m"
ok $? "the old master exits on SIGQUIT"
serves
ok $? "the new master serves"
! lib_lines | grep -qE '\[(error|crit|alert|emerg)\]'
ok $? "no library line above warn"
stop_nginx

# ---- with a musl libnuma: opened by musl's dlopen, pages moved ----
mkdir -p "$T/numa"
musl-gcc -std=gnu11 -Wall -Wextra -Werror -O2 -fPIC -shared -Wl,-soname,libnuma.so.1 \
    -o "$T/numa/libnuma.so.1" "$SRCDIR/test/musl-libnuma.c" >"$T/cc.log" 2>&1 ||
    { echo "Bail out! test/musl-libnuma.c does not build"; sed 's/^/# /' "$T/cc.log"; exit 1; }
: >"$T/error.log"
musl_conf "10 01"
LD_LIBRARY_PATH=$T/numa start_nginx
wait_pinned_workers
wait_for "lib_lines | grep -q 'placed there at start'"
said "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed [0-9]*ms after the start; moved [0-9]* pages to node 0" \
    "with libnuma.so.1 in LD_LIBRARY_PATH: the library opens it with musl's dlopen and moves the master's pages"
stop_nginx

# ---- libnuma beside the library, as a Kubernetes init container puts it ----
# No libnuma where musl's loader looks: the copy in the library's own
# directory is opened, and the line names it.
cp "$LIB" "$T/numa/"
: >"$T/error.log"
LIB=$T/numa/libmasteraff.so start_nginx
wait_pinned_workers
wait_for "lib_lines | grep -q 'placed there at start'"
said "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed [0-9]*ms after the start; moved [0-9]* pages to node 0 in [0-9]*us (with $T/numa/libnuma.so.1, beside the library)" \
    "libnuma only beside the library: that copy is opened, and the line says so"
grep -q "$T/numa/libnuma.so.1" "/proc/$m/maps"
ok $? "the master maps the copy beside the library"
stop_nginx

# ---- the interposed calls keep errno, as with glibc (test/errnos.c) ----
musl-gcc -std=gnu11 -Wall -Wextra -Werror -g -O1 -pthread -o "$T/errnos" \
    "$SRCDIR/test/errnos.c" >"$T/cc.log" 2>&1 ||
    { echo "Bail out! test/errnos.c does not build with musl-gcc"; sed 's/^/# /' "$T/cc.log"; exit 1; }
errnos() {
    env LD_PRELOAD="$LIB" MASTERAFF_PROGRAMS=errnos MASTERAFF_SYSFS="$T/sys" \
        "$T/errnos" "$@" 2>"$T/err"
}
relay "musl errnos basic" errnos basic
grep -q "masteraff: master [0-9]* stays on CPUs 0-1 (packages 0,1), already there for worker" "$T/err"
ok $? "errnos basic: the library followed its children's pins (fork, sched_setaffinity, pthread_setaffinity_np)"
relay "musl errnos emfile" errnos emfile
# In a program that is not a target the library stays inert (busybox, the
# entrypoint's tools in nginx:alpine).
relay "musl errnos basic, not a target" env LD_PRELOAD="$LIB" "$T/errnos" basic

# ---- the command line's bounds ----
out=$(env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_LOG=debug "$NGINX" -t -c "$T/nginx.conf" 2>&1)
grep -q "no placement at start: nginx -t: not a server start" <<<"$out"
ok $? "nginx -t, read from /proc/self/cmdline: no placement, and the debug line says why"
# Two arguments of 70000 bytes each (one may not exceed 128 KiB).
pad=$(printf '%70000s' '')
out=$(env LD_PRELOAD="$LIB" MASTERAFF_SYSFS="$T/sys" MASTERAFF_LOG=debug \
    "$NGINX" -t -c "$T/nginx.conf" -g "$pad" -g "$pad" 2>&1)
grep -q "no placement at start: /proc/self/cmdline is longer than 131072 bytes" <<<"$out"
ok $? "a command line over 128 KiB: no placement, and the debug line says why"
done_testing
