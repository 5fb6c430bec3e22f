#!/usr/bin/env bash
# Debian 13 (trixie): `make deb` builds the package in a trixie chroot with
# trixie's compiler and debhelper, dpkg installs it there, and trixie's
# nginx (1.26) runs with the installed library on the two-package tree:
# placed at start and confirmed, a reload followed, a clean stop. The
# chroot is debootstrap's minbase of trixie from this machine's apt source
# with the build tools and nginx-light, kept as a tarball under a hash of
# its recipe in ${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/chroots
# (made once: its making needs the mirror, its use does not).
. "$(dirname "$0")/lib.sh"
. "$SRCDIR/test/debian.sh"
PORT=18422
PKG=masteraff
SUITE=trixie
CACHE=${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/images
CHROOTS=${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/chroots

[ "$(id -u)" = 0 ] || skip_all "not root (debootstrap, chroot)"
command -v debootstrap >/dev/null || skip_all "no debootstrap"
why=$(no_namespace) && skip_all "no private mount namespace for the chroot's /proc: $why"
MIRROR=$(apt_mirror)
[ -n "$MIRROR" ] || skip_all "no Debian mirror in /etc/apt's sources"

R=$T/root
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
SYSLIB=/usr/lib/$MULTIARCH/libmasteraff.so

# in_root COMMAND...: COMMAND in the chroot, with /proc and /sys (status
# reads the online CPUs and the cgroup there), in a mount namespace of its
# own (the mounts go with its last process).
in_root() {
    unshare -m --propagation private sh -c \
        'mount -t proc proc "$0/proc" && mount --rbind /sys "$0/sys" && exec chroot "$0" "$@"' \
        "$R" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"
}

# trixie_tools DIR: what make deb and the test need, in the minbase tree.
trixie_tools() {
    cp /etc/resolv.conf "$1/etc/resolv.conf"
    printf '#!/bin/sh\nexit 101\n' >"$1/usr/sbin/policy-rc.d"
    chmod +x "$1/usr/sbin/policy-rc.d"
    chroot "$1" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends build-essential debhelper \
        dpkg-dev nginx-light libnuma1' >"$T/tools.log" 2>&1 || {
        sed 's/^/#   /' "$T/tools.log" | tail -20 >&2; return 1; }
    rm -f "$1/usr/sbin/policy-rc.d" "$1/etc/nginx/sites-enabled/default"
    rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/archives/*.deb
}

# chroot_tarball: the minbase with trixie_tools, made unless cached.
chroot_tarball() {
    local key tar minbase
    key=$( { declare -f minbase_tarball trixie_tools; echo "$MIRROR $SUITE"; } | sha256sum | cut -c1-16)
    tar=$CHROOTS/$SUITE-build-$key.tar
    if [ ! -s "$tar" ]; then
        minbase=$(minbase_tarball "$(minbase_key)") || return 1
        rm -rf "$T/make"; mkdir -p "$T/make" "$CHROOTS"
        tar -C "$T/make" -xf "$minbase" && trixie_tools "$T/make" || return 1
        tar -C "$T/make" -c . >"$tar.tmp" && mv "$tar.tmp" "$tar" || return 1
        rm -rf "$T/make"
    fi
    echo "$tar"
}

# The master's pid, from the chroot's pid file; nginx stopped at the end.
master_pid() { cat "$R/run/masteraff-test.pid" 2>/dev/null; }
trixie_cleanup() {
    stop_nginx
    rm -rf "$T"
}
trap trixie_cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# ---- the chroot ----

start=$SECONDS
tar=$(chroot_tarball)
ok $? "a trixie chroot with build-essential, debhelper and nginx-light ($((SECONDS - start)) s)" ||
    { echo "Bail out! no trixie chroot"; exit 1; }
start=$SECONDS
mkdir -p "$R" && tar -C "$R" -xf "$tar"
ok $? "unpacked in $((SECONDS - start)) s"
. "$R/etc/os-release"
is "$VERSION_CODENAME" trixie "the chroot is Debian 13 ($PRETTY_NAME)"
version=$(in_root nginx -v 2>&1)
diag "$version"
[[ $version =~ nginx/1\.2[6-9]\. ]]
ok $? "with trixie's nginx 1.26 or later"

# ---- make deb, dpkg -i ----

copy_tree "$R/build/src"
ok $? "a copy of the working tree without build products"
start=$SECONDS
in_root sh -c 'cd /build/src && make deb' >"$T/build.log" 2>&1
ok $? "make deb builds the package in the chroot ($((SECONDS - start)) s)" ||
    tail -25 "$T/build.log" | sed 's/^/#   /'
! grep -q '^installing' "$T/build.log" && ! grep -q '== installing' "$T/build.log"
ok $? "with the chroot's own debhelper (make deb installed nothing)"
deb=$(cd "$R/build" && ls "${PKG}_"*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "Bail out! no .deb built"; exit 1; }
diag "built $deb"
in_root dpkg -i "/build/$deb" >"$T/dpkg.log" 2>&1
ok $? "dpkg -i installs it in the chroot" || sed 's/^/#   /' "$T/dpkg.log"
[ -f "$R$SYSLIB" ] && [ -x "$R/usr/bin/masteraff" ]
ok $? "the library and the command are in place ($SYSLIB, /usr/bin/masteraff)"
grep -q "GLIBC_2\.3[4-9]\|GLIBC_2\.4" <(objdump -T "$R$SYSLIB" 2>/dev/null) &&
    diag "the library uses symbol versions of trixie's glibc"

# ---- trixie's nginx with the installed library ----

"$SRCDIR/test/mktree" twopkg "$R/masteraff-sys"
mkdir -p "$R/etc/masteraff-test"
# trixie_conf MASK0 MASK1: the chroot's nginx.conf.
trixie_conf() {
    cat >"$R/etc/masteraff-test/nginx.conf" <<CONF
worker_processes 2;
worker_cpu_affinity $1 $2;
pid /run/masteraff-test.pid;
error_log /var/log/masteraff-test.log notice;
events { worker_connections 64; }
http {
    access_log off;
    server { listen 127.0.0.1:$PORT; location / { return 200 "hello\n"; } }
}
CONF
}
LOG=$R/var/log/masteraff-test.log
trixie_conf 10 01
in_root env LD_PRELOAD="$SYSLIB" MASTERAFF_SYSFS=/masteraff-sys \
    nginx -c /etc/masteraff-test/nginx.conf 2>"$T/stderr"
ok $? "trixie's nginx starts with LD_PRELOAD=$SYSLIB" || sed 's/^/#   /' "$T/stderr"
wait_pinned_workers
m=$(master_pid)
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the master is on worker 0's package (CPU 1)"
wait_for "grep -q 'masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, confirmed' '$LOG'"
ok $? "error.log: placed there at start, and confirmed" || grep masteraff: "$LOG" | sed 's/^/#   /'
grep -q "$SYSLIB\$" "/proc/$m/maps"
ok $? "the master maps the chroot's installed library"
curl -sf "http://127.0.0.1:$PORT/" | grep -q hello
ok $? "it serves"

old=$(workers)
trixie_conf 01 10
in_root env LD_PRELOAD="$SYSLIB" nginx -c /etc/masteraff-test/nginx.conf -s reload 2>"$T/stderr"
ok $? "nginx -s reload with the preload" || sed 's/^/#   /' "$T/stderr"
wait_new_workers "$old"
read -r w0 _ <<<"$(new_workers "$old")"
wait_for "[ \"\$(cpus_of $m)\" = 0 ]"
is "$(cpus_of "$m")" 0 "the reload: the master follows the new worker 0 to CPU 0"
wait_for "grep -q 'masteraff: master $m -> CPUs 0 (package 0), following worker $w0 on CPU 0' '$LOG'"
ok $? "error.log has the line for it" || grep masteraff: "$LOG" | sed 's/^/#   /'
in_root env MASTERAFF_SYSFS=/masteraff-sys masteraff status --check /run/masteraff-test.pid >"$T/status" 2>&1
ok $? "the installed masteraff status --check exits 0 in the chroot" || sed 's/^/#   /' "$T/status"
diag "$(cat "$T/status")"

stop_nginx
! grep -qE '\[(alert|emerg)\]' "$LOG"
ok $? "nginx stops (QUIT); no [alert] or [emerg] in error.log" || grep -E '\[(alert|emerg)\]' "$LOG" | sed 's/^/#   /'

done_testing
