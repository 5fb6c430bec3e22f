#!/usr/bin/env bash
# The Debian package: builds it from a copy of the working tree with
# dpkg-buildpackage, checks it with lintian (any E: fails), installs it,
# checks that its files are where they belong, runs nginx through the
# installed library and the installed masteraff command on a fake sysfs
# tree where CPU 0 and CPU 1 are two packages, and purges it again. A
# masteraff package that was installed before the test is left alone: the
# test then unpacks its build elsewhere instead of installing it.
. "$(dirname "$0")/lib.sh"
. "$SRCDIR/test/debian.sh"
PORT=18401

[ "$(id -u)" = 0 ] || skip_all "not root (dpkg -i)"
command -v dpkg-buildpackage >/dev/null || skip_all "no dpkg-buildpackage (apt-get install dpkg-dev)"
command -v dh >/dev/null || skip_all "no debhelper (apt-get install debhelper)"

PKG=masteraff
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
SYSLIB=/usr/lib/$MULTIARCH/libmasteraff.so
EXAMPLES=/usr/share/doc/$PKG/examples
installed_by_us=0

installed() { dpkg-query -W -f='${Status}' "$PKG" 2>/dev/null | grep -q ' installed$'; }

# lib.sh's cleanup, and the package out again if this test put it in.
package_cleanup() {
    stop_nginx
    if [ "$installed_by_us" = 1 ] && installed; then
        dpkg --purge "$PKG" >/dev/null 2>&1
    fi
    rm -rf "$T"
}
trap package_cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# ---- build ----

copy_tree "$T/build/src"
ok $? "a copy of the working tree without build products"

start=$SECONDS
(cd "$T/build/src" && dpkg-buildpackage -us -uc -b) >"$T/build.log" 2>&1
rc=$?
ok $rc "dpkg-buildpackage -us -uc -b builds the package ($((SECONDS - start)) s)" ||
    tail -25 "$T/build.log" | sed 's/^/#   /'
grep -q '^1\.\.[1-9]' "$T/build.log" && ! grep -q '^not ok' "$T/build.log"
ok $? "the unit tests ran during the build and passed"
deb=$(ls "$T/build/${PKG}_"*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "Bail out! no .deb built"; exit 1; }
diag "built $(basename "$deb")"

# ---- lintian ----

if command -v lintian >/dev/null; then
    start=$SECONDS
    # (--show-overrides would list the overridden tags too, but lintian
    # 2.116 then exits 2 on a clean package.)
    lintian --display-info --pedantic "$deb" >"$T/lintian" 2>"$T/lintian.err"
    rc=$?
    sed 's/^/# lintian: /' "$T/lintian"
    errors=$(grep -c '^E: ' "$T/lintian")
    [ "$errors" -eq 0 ] && [ "$rc" -le 1 ]
    ok $? "lintian reports no error ($errors E: lines, exit status $rc, $((SECONDS - start)) s)" ||
        grep -v 'running with root privileges' "$T/lintian.err" | sed 's/^/#   /'
    # Each override must still be needed, else it hides nothing but noise.
    unused=$(grep -c 'unused-override\|mismatched-override' "$T/lintian")
    is "$unused" 0 "every lintian override matches a tag"
else
    echo "ok $((tap_n += 1)) # SKIP no lintian (apt-get install lintian)"
fi

# ---- contents ----

want="$SYSLIB
/usr/bin/masteraff
/usr/share/man/man1/masteraff.1.gz
/usr/share/man/man7/libmasteraff.7.gz
/usr/share/doc/$PKG/copyright
/usr/share/doc/$PKG/changelog.Debian.gz
$EXAMPLES/systemd/masteraff.conf
$EXAMPLES/systemd/masteraff-textfile.service
$EXAMPLES/systemd/masteraff-textfile.timer
$EXAMPLES/docker/Dockerfile
$EXAMPLES/docker/Dockerfile.alpine"
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ {sub(/^\./, "", $6); print $6}' | sort >"$T/contents"
missing=$(comm -23 <(echo "$want" | sort) "$T/contents")
is "$missing" "" "the .deb has the library, the command, both manual pages, copyright and the examples"
is "$(dpkg-deb -f "$deb" Package)" "$PKG" "binary package name"
is "$(dpkg-deb -f "$deb" Version)" "0.1.0-1" "version"
grep -q '^ *libc6' <<<"$(dpkg-deb -f "$deb" Depends)"
ok $? "Depends carries the shared libraries' dependencies (libc6)"
is "$(dpkg-deb -f "$deb" Recommends)" "libnuma1" "Recommends: libnuma1 (dlopen'ed)"
is "$(dpkg-deb -f "$deb" Suggests)" "nginx" "Suggests: nginx"
perm=$(dpkg-deb -c "$deb" | awk -v f="./${SYSLIB#/}" '$6 == f {print $1}')
is "$perm" "-rw-r--r--" "the library is installed 0644"

# ---- install ----

if installed; then
    diag "$PKG is already installed ($(dpkg-query -W -f='${Version}' "$PKG")): left alone; the build is unpacked below $T/root instead"
    ROOT=$T/root
    dpkg-deb -x "$deb" "$ROOT"
    ok $? "dpkg-deb -x unpacks the package"
else
    ROOT=
    dpkg -i "$deb" >"$T/dpkg.log" 2>&1
    rc=$?
    [ $rc -eq 0 ] && installed_by_us=1
    ok $rc "dpkg -i installs the package" || sed 's/^/#   /' "$T/dpkg.log"
    installed
    ok $? "dpkg-query: $PKG is installed"
    missing=$(comm -23 <(echo "$want" | sort) <(dpkg -L "$PKG" | sort))
    is "$missing" "" "dpkg -L lists every file expected"
    for f in $want; do [ -f "$f" ] || echo "$f"; done >"$T/absent"
    is "$(cat "$T/absent")" "" "every file is on disk"
fi
LIB=$ROOT$SYSLIB
CMD=$ROOT/usr/bin/masteraff

v=$("$CMD" --version 2>&1)
is "$v" "masteraff 0.1.0" "the installed command runs: masteraff --version"
gzip -dc "$ROOT/usr/share/man/man1/masteraff.1.gz" | grep -q '^\.TH MASTERAFF 1'
ok $? "masteraff(1) is a manual page"
gzip -dc "$ROOT/usr/share/man/man7/libmasteraff.7.gz" | grep -qi '^\.TH LIBMASTERAFF 7'
ok $? "libmasteraff(7) is a manual page"

# The drop-in points at the library the package installs.
dropin=$ROOT$EXAMPLES/systemd/masteraff.conf
is "$(sed -n 's/^Environment=LD_PRELOAD=//p' "$dropin")" "$SYSLIB" \
    "the systemd drop-in preloads $SYSLIB"
if command -v systemd-analyze >/dev/null && [ -f /lib/systemd/system/nginx.service ]; then
    mkdir -p "$T/units/nginx.service.d"
    cp /lib/systemd/system/nginx.service "$T/units/"
    cp "$dropin" "$T/units/nginx.service.d/"
    out=$(SYSTEMD_UNIT_PATH="$T/units:" systemd-analyze verify "$T/units/nginx.service" 2>&1)
    ok $? "systemd-analyze verify accepts nginx.service with the drop-in"
    is "$out" "" "and says nothing about it"
fi

# ---- nginx through the installed library ----

make_twopkg
write_conf "10 01"
start_nginx
ok $? "nginx starts with LD_PRELOAD=$LIB" || sed 's/^/#   /' "$T/stderr"
wait_workers
m=$(master_pid)
read -r w0 _ <<<"$(workers)"
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "installed library: the master follows worker 0 (CPU 1) to package 1"
grep -q "masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1" "$T/error.log"
ok $? "installed library: error.log has the line for the placement at start"
grep -q " $LIB\$" "/proc/$m/maps"
ok $? "the master maps the installed library, not the tree's"
serves
ok $? "nginx serves"
out=$("$CMD" status --sysfs "$T/sys" "$T/nginx.pid" 2>&1)
ok $? "masteraff status on the master exits 0" || sed 's/^/#   /' <<<"$out"
grep -qw "$m" <<<"$out"
ok $? "masteraff status names the master"
# The library and the system's libnuma in one directory: the loader found
# libnuma there, whatever is beside the library.
if [ -z "$ROOT" ] && wait_for "grep -q libnuma /proc/$m/maps"; then
    "$CMD" status --sysfs "$T/sys" "$T/nginx.pid" 2>&1 | grep -x "libnuma: .*, the system's" >/dev/null
    ok $? "masteraff status names the libnuma of the installed library's directory the system's" ||
        "$CMD" status --sysfs "$T/sys" "$T/nginx.pid" 2>&1 | sed 's/^/#   /'
fi
stop_nginx
: >"$T/error.log"

# The installed command finds the installed library on its own.
env -u LD_PRELOAD "$CMD" --sysfs "$T/sys" -- "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
ok $? "nginx starts through the installed masteraff command" || sed 's/^/#   /' "$T/stderr"
wait_workers
m=$(master_pid)
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "masteraff -- nginx: the master follows worker 0 to CPU 1"
if [ -z "$ROOT" ]; then
    grep -q " $SYSLIB\$" "/proc/$m/maps"
    ok $? "masteraff preloaded the installed library"
fi
stop_nginx

# ---- removal ----

if [ "$installed_by_us" = 1 ]; then
    dpkg --purge "$PKG" >"$T/dpkg.log" 2>&1
    ok $? "dpkg --purge removes the package" || sed 's/^/#   /' "$T/dpkg.log"
    ! installed && [ ! -e "$SYSLIB" ] && [ ! -e /usr/bin/masteraff ] && [ ! -d "/usr/share/doc/$PKG" ]
    ok $? "no file of the package is left"
    installed_by_us=0
fi
done_testing
