#!/usr/bin/env bash
# The executables the nginx family installs, by the default
# MASTERAFF_PROGRAMS: angie (Angie's sbin/angie), nginx under OpenResty's
# /usr/local/openresty/nginx/sbin/ and its bin/openresty symlink, nginx as
# freenginx and Tengine install it (sbin/nginx), and the names a packager
# may give them. Each is Debian's nginx copied under that name: the library
# must place its master at start and follow worker 0, on a fake tree where
# CPU 0 and CPU 1 are two packages. A name outside the patterns is left
# alone.
. "$(dirname "$0")/lib.sh"
PORT=18232
# nginx reads NGINX from its environment as the sockets it inherits in a
# binary upgrade: the executable is chosen here, never exported.
export -n NGINX
make_twopkg
write_conf "10 01"

lib_stderr() { grep -a 'masteraff: ' "$T/stderr"; }

# placed EXECUTABLE: started with the library, its master is placed at
# start on worker 0's package and worker 0 confirms it.
placed() {
    local exe=$1 name
    name=$(basename "$(readlink -f "$exe")")
    : >"$T/error.log"
    NGINX=$exe
    MASTERAFF_LOG=debug start_nginx
    wait_pinned_workers
    lib_stderr | grep -q "\[debug\] .*masteraff: master [0-9]* placed at start on CPUs 1 (package 1)"
    ok $? "$exe: placed at start (the name matched: $name)"
    wait_for "lib_lines | grep -q 'placed there at start'"
    lib_lines | grep -q "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1"
    ok $? "$exe: worker 0 confirms it in error.log"
    stop_nginx
}

mkdir -p "$T/sbin" "$T/usr/local/openresty/nginx/sbin" "$T/usr/local/openresty/bin"
for n in angie openresty freenginx tengine nginx-debug; do
    cp "$NGINX" "$T/sbin/$n"
    placed "$T/sbin/$n"
done
cp "$NGINX" "$T/usr/local/openresty/nginx/sbin/nginx"
placed "$T/usr/local/openresty/nginx/sbin/nginx"
ln -s ../nginx/sbin/nginx "$T/usr/local/openresty/bin/openresty"
placed "$T/usr/local/openresty/bin/openresty"

# A name outside the default patterns: the library does nothing, and says
# so at debug level.
cp "$NGINX" "$T/sbin/webserver"
: >"$T/error.log"
NGINX=$T/sbin/webserver
MASTERAFF_LOG=debug start_nginx
wait_pinned_workers
lib_stderr | grep -q "\[debug\] .*masteraff: $T/sbin/webserver is not a target: its name does not match MASTERAFF_PROGRAMS (nginx\*,openresty\*,angie\*,freenginx\*,tengine\*)"
ok $? "webserver: not a target, said at debug level"
is "$(lib_lines | wc -l)" 0 "webserver: the library says nothing in error.log"
is "$(cpus_of "$m")" 0-1 "webserver: the master keeps its mask"
stop_nginx

done_testing
