#!/usr/bin/env bash
# nginx's binary upgrade (USR2): the new master, exec'd with a scrubbed
# environment, keeps the library and is placed by the same rules, with and
# without `env LD_PRELOAD;` in nginx.conf, and when nginx was started
# through a symlink or by a path relative to where it started.
. "$(dirname "$0")/lib.sh"
PORT=18089
make_twopkg

upgrade() { # upgrade DESCRIPTION: USR2, then check the new master
    local what=$1 old new
    start_nginx
    wait_workers
    old=$(master_pid)
    wait_for "[ \"\$(cpus_of $old)\" = 1 ]"
    kill -USR2 "$old"
    wait_for "[ -s $T/nginx.pid.oldbin ] && [ -s $T/nginx.pid ] && [ \"\$(master_pid)\" != $old ]"
    new=$(master_pid)
    if [ -n "$new" ] && [ "$new" != "$old" ]; then
        ok 0 "$what: USR2 starts a new master ($new)"
    else
        ok 1 "$what: USR2 starts a new master"
        tail -n 5 "$T/error.log" "$T/stderr" | sed 's/^/# /'
    fi
    wait_for "grep -qE 'masteraff: master $new (->|stays on) CPUs 1 \(package 1\)' $T/error.log"
    ok $? "$what: the new master follows its own worker 0 to CPU 1 (package 1 exists only in MASTERAFF_SYSFS's tree, so the settings came along)"
    is "$(cpus_of "$new")" 1 "$what: new master on CPU 1"
    # nginx writes its process title over environ: look at the mappings.
    is "$(grep -c 'libmasteraff.so' "/proc/$new/maps" | tr -d ' ')" \
        "$(grep -c 'libmasteraff.so' "/proc/$old/maps" | tr -d ' ')" \
        "$what: the library is loaded in the new master as in the old"
    kill -QUIT "$old"
    wait_for "! kill -0 $old 2>/dev/null"
    serves
    ok $? "$what: the new master serves"
    stop_nginx
    rm -f "$T/error.log"
}

write_conf "10 01"
upgrade "scrubbed environment"
write_conf "10 01" "env LD_PRELOAD; env MASTERAFF_SYSFS;"
upgrade "env LD_PRELOAD in nginx.conf"

# nginx re-executes its argv[0]: the library must know it for itself.
# (Not NGINX=... upgrade: nginx reads a variable of that name.)
write_conf "10 01"
mkdir -p "$T/bin" "$T/sbin"
ln -s "$NGINX" "$T/bin/nginx"
cp "$NGINX" "$T/sbin/nginx"
installed=$NGINX
NGINX=$T/bin/nginx
upgrade "started through a symlink"
cd "$T/sbin" || exit 1
NGINX=./nginx
upgrade "started as ./nginx from its directory"
cd / && NGINX=$installed
done_testing
