#!/usr/bin/env bash
# The copy of libnuma beside the library (an image without libnuma, a
# Kubernetes init container's volume) is opened at the first memory move,
# which can be long after the start, and its constructor runs in the root
# master. It is opened only when no one but root and the library's owner
# could have put it there: a file the workers' user plants after the start
# is refused at the next reload, and the line says why; so are a copy that
# is a symbolic link, not a regular file, or writable by others, and a
# directory (or one above it) that another user owns or may write, unless
# a read-only mount or the sticky bit keeps its entries. masteraff status
# tells the same. In a private mount namespace where the system's libnuma
# is hidden (an empty file over it), on the fake tree where CPU 0 and CPU 1
# are two packages.
. "$(dirname "$0")/privatens.sh"
. "$(dirname "$0")/lib.sh"
PORT=18702
[ "$(id -u)" = 0 ] || skip_all "not root (the master that would run the planted file)"
command -v setpriv >/dev/null || skip_all "no setpriv (to plant a file as the workers' user)"
[ -x "$SRCDIR/masteraff" ] || { echo "Bail out! $SRCDIR/masteraff is not built"; exit 1; }
numa=$(ldconfig -p | awk '$1 == "libnuma.so.1" { print $NF; exit }')
[ -n "$numa" ] || skip_all "no libnuma.so.1 on this system to copy"
make_twopkg

# The workers' user: the one nginx drops to, as its first worker shows.
write_conf ""
start_nginx
wait_workers
read -r wuid wgid < <(awk '/^Uid:/ { u = $2 } /^Gid:/ { g = $2 } END { print u, g }' \
    "/proc/$(workers | cut -d' ' -f1)/status")
stop_nginx
[ "$wuid" != 0 ] || skip_all "nginx's workers run as root here: no other user to plant a file"
as_worker_user() { setpriv --reuid="$wuid" --regid="$wgid" --clear-groups "$@"; }

# A stand-in that says, in $T/ran, which process ran its constructor:
# every copy that must be refused is one.
cc -shared -fPIC -o "$T/planted.so" -x c - <<EOF || { echo "Bail out! the planted file does not build"; exit 1; }
#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void planted(void)
{
    FILE *f = fopen("$T/ran", "a");
    if (f)
        fprintf(f, "pid %d uid %d\n", (int)getpid(), (int)geteuid());
    if (f)
        fclose(f);
}
EOF
cp -L "$numa" "$T/libnuma.so.1"
chmod a+x "$T"
mount --bind /dev/null "$(readlink -f "$numa")" || skip_all "cannot hide the system's libnuma"

# lay DIR [MODE [OWNER]]: DIR with the library's copy, made by root.
lay() {
    mkdir -p "$1"
    chmod "${2:-755}" "$1"
    chown "${3:-root}" "$1"
    cp "$SRCDIR/libmasteraff.so" "$1/"
}

# start_in DIR: nginx with the library copied in DIR, worker 0 on CPU 1;
# waits for the confirmation of the placement at start, and its memory.
start_in() {
    write_conf "10 01"
    LIB=$1/libmasteraff.so start_nginx
    wait_pinned_workers
    wait_for "lib_lines | grep -q 'placed there at start'"
}

# refused DIR WHY LABEL: the copy beside the library in DIR is not
# loaded, the line says WHY, and the planted file never ran.
refused() {
    said_once "memory not moved to node 0 (libnuma.so.1 not found, and $1/libnuma.so.1 not loaded: $2)" "$3: refused, and the line says why"
    ! grep -qE 'libnuma|planted' "/proc/$m/maps"
    ok $? "$3: the master maps neither libnuma nor the planted file"
    [ ! -e "$T/ran" ]
    ok $? "$3: the file's constructor never ran" || sed 's/^/#   ran: /' "$T/ran"
    rm -f "$T/ran"
    "$SRCDIR/masteraff" status "$T/nginx.pid" >"$T/status"
    grep -qxF "libnuma: not loaded; the copy beside the library would not be: $2" "$T/status"
    ok $? "$3: masteraff status says the same" || sed 's/^/#   /' "$T/status"
    fresh
}

# ---- a copy of root's in a directory of root's: opened ----
lay "$T/good"
cp "$T/libnuma.so.1" "$T/good/"
start_in "$T/good"
said_once "(with $T/good/libnuma.so.1, beside the library)" \
    "root's copy in root's directory: opened, and the line says so (the system's is hidden)"
grep -q "$T/good/libnuma.so.1" "/proc/$m/maps"
ok $? "the master maps that copy"
"$SRCDIR/masteraff" status "$T/nginx.pid" >"$T/status"
grep -qxF "libnuma: $T/good/libnuma.so.1, beside the library" "$T/status"
ok $? "masteraff status names it" || sed 's/^/#   /' "$T/status"
fresh

# ---- the issue's case: planted by the workers' user after the start ----
lay "$T/shared" 777
write_conf ""
LIB=$T/shared/libmasteraff.so start_nginx
wait_workers
m=$(master_pid)
as_worker_user cp "$T/planted.so" "$T/shared/libnuma.so.1"
ok $? "the workers' user (uid $wuid) plants libnuma.so.1 beside the library, after the start"
write_conf "10 01"
reload_workers
wait_pinned "$n0" "$n1"
wait_for "lib_lines | grep -q 'following worker'"
refused "$T/shared" "$T/shared/libnuma.so.1 is owned by uid $wuid, neither root nor the library's owner" \
    "planted after the start, then a reload"

# ---- root's file in a directory others may write (a shared volume) ----
lay "$T/open" 777
cp "$T/planted.so" "$T/open/libnuma.so.1"
start_in "$T/open"
refused "$T/open" "$T/open is writable by other users than its owner (mode 0777)" \
    "root's copy in a directory of mode 0777"

# ---- root's file in a directory the workers' user owns ----
lay "$T/theirs" 755 "$wuid"
cp "$T/planted.so" "$T/theirs/libnuma.so.1"
start_in "$T/theirs"
refused "$T/theirs" "$T/theirs is owned by uid $wuid, neither root nor the library's owner" \
    "root's copy in the workers' user's directory"

# ---- a directory above that others may write, without the sticky bit ----
mkdir -m 777 "$T/up"
lay "$T/up/lib"
cp "$T/planted.so" "$T/up/lib/libnuma.so.1"
start_in "$T/up/lib"
refused "$T/up/lib" "$T/up is writable by other users than its owner (mode 0777)" \
    "a directory above of mode 0777, whose entries another user may replace"

# ---- a group-writable copy ----
lay "$T/groupw"
cp "$T/planted.so" "$T/groupw/libnuma.so.1"
chmod 664 "$T/groupw/libnuma.so.1"
start_in "$T/groupw"
refused "$T/groupw" "$T/groupw/libnuma.so.1 is writable by other users than its owner (mode 0664)" \
    "a group-writable copy"

# ---- a symbolic link, even to root's copy ----
lay "$T/link"
ln -s "$T/planted.so" "$T/link/libnuma.so.1"
start_in "$T/link"
refused "$T/link" "$T/link/libnuma.so.1 is a symbolic link" "a symbolic link to a file of root's"

# ---- not a regular file ----
lay "$T/fifo"
mkfifo "$T/fifo/libnuma.so.1"
start_in "$T/fifo"
refused "$T/fifo" "$T/fifo/libnuma.so.1 is not a regular file" "a FIFO"

# ---- a sticky directory above (as /tmp): opened ----
mkdir -m 1777 "$T/sticky"
lay "$T/sticky/lib"
cp "$T/libnuma.so.1" "$T/sticky/lib/"
start_in "$T/sticky/lib"
said_once "(with $T/sticky/lib/libnuma.so.1, beside the library)" \
    "below a sticky directory of mode 1777, whose entries only their owners replace: opened"
fresh

# ---- a directory others may write, mounted read-only (the manifests'
# volume): opened ----
lay "$T/ro" 777
cp "$T/libnuma.so.1" "$T/ro/"
mount --bind "$T/ro" "$T/ro" && mount -o remount,bind,ro "$T/ro"
ok $? "a directory of mode 0777 bound read-only over itself"
start_in "$T/ro"
said_once "(with $T/ro/libnuma.so.1, beside the library)" \
    "a directory of mode 0777 on a read-only mount, which no one may write: opened"
fresh
umount "$T/ro"

# ---- the library's owner: a copy of its own, not of another user ----
lay "$T/owned"
chown daemon "$T/owned/libmasteraff.so"
cp "$T/libnuma.so.1" "$T/owned/"
chown daemon "$T/owned/libnuma.so.1"
start_in "$T/owned"
said_once "(with $T/owned/libnuma.so.1, beside the library)" \
    "the library and the copy both daemon's: the library's owner is trusted, opened"
fresh
cp "$T/planted.so" "$T/owned/libnuma.so.1"
chown "$wuid" "$T/owned/libnuma.so.1"
start_in "$T/owned"
refused "$T/owned" "$T/owned/libnuma.so.1 is owned by uid $wuid, neither root nor the library's owner" \
    "the library daemon's, the copy the workers' user's"

done_testing
