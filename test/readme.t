#!/usr/bin/env bash
# The README's install and usage lines against what is really installed:
# make install into a staging directory (PREFIX /usr/local, and /usr as
# debian/rules builds the package), debian/masteraff.install, the name
# make deb gives the package, and the arm64 paths; make uninstall; the
# first screen's targets; and its samples of masteraff status and of the
# library's line against what the program prints in the same case.
. "$(dirname "$0")/lib.sh"
PORT=18601

README=$SRCDIR/README.md
MULTIARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
ARCH=$(dpkg --print-architecture 2>/dev/null) || skip_all "no dpkg"
[ -n "$MULTIARCH" ] || skip_all "no multiarch tuple"

# The README's indented (code) lines, and its first screen: up to "## Why".
code() { grep '^    ' "$README"; }
first_screen() { sed '/^## Why/q' "$README"; }

# ---- make install, PREFIX /usr/local ----

make -s -C "$SRCDIR" install DESTDIR="$T/local" >/dev/null 2>&1
ok $? "make install DESTDIR=... works"
locallib=/usr/local/lib/$MULTIARCH/libmasteraff.so
[ -f "$T/local$locallib" ]
ok $? "make install puts the library at $locallib"
code | grep -cF "LD_PRELOAD=$locallib nginx" >/dev/null
ok $? "the README's LD_PRELOAD line for make install names $locallib"
[ -x "$T/local/usr/local/bin/masteraff" ] && code | grep -cF "/usr/local/bin/masteraff" >/dev/null
ok $? "the README names /usr/local/bin/masteraff, where make install puts it"
[ -f "$T/local/usr/local/share/bash-completion/completions/masteraff" ]
ok $? "make install installs the bash completion"
make -s -C "$SRCDIR" uninstall DESTDIR="$T/local" >/dev/null 2>&1
is "$(find "$T/local" -type f | sed "s|^$T/local||")" "" "make uninstall removes every file make install put there"

# ---- the package: make install PREFIX=/usr as debian/rules runs it ----

make -s -C "$SRCDIR" install PREFIX=/usr DESTDIR="$T/pkg" >/dev/null 2>&1
missing=
while read -r f; do
    f=${f//\$\{DEB_HOST_MULTIARCH\}/$MULTIARCH}
    [ -e "$T/pkg/$f" ] || missing="$missing $f"
done <"$SRCDIR/debian/masteraff.install"
is "$missing" "" "every file debian/masteraff.install names is installed (dh_install would fail)"
pkglib=/usr/lib/$MULTIARCH/libmasteraff.so
grep -qx "usr/lib/\${DEB_HOST_MULTIARCH}/libmasteraff.so" "$SRCDIR/debian/masteraff.install" &&
    code | grep -cF "LD_PRELOAD=$pkglib nginx" >/dev/null
ok $? "the README's LD_PRELOAD line for the package names $pkglib"
grep -qx "usr/share/bash-completion/completions/masteraff" "$SRCDIR/debian/masteraff.install"
ok $? "the package installs the bash completion"

# ---- make deb and dpkg -i ----

version=$(sed -n '1s/^masteraff (\([^)]*\)).*/\1/p' "$SRCDIR/debian/changelog")
deb=../masteraff_${version}_$ARCH.deb
grep -q '^deb:' "$SRCDIR/Makefile" && grep -A8 '^deb:' "$SRCDIR/Makefile" | grep -q 'dpkg-buildpackage .*-b'
ok $? "make deb runs dpkg-buildpackage, which writes the package to the parent directory"
code | grep -cE "^ +dpkg -i $deb( |$)" >/dev/null
ok $? "the README's dpkg -i line names $deb"
grep -qF "masteraff_${version}_arm64.deb" "$README" &&
    grep -qF "/usr/lib/aarch64-linux-gnu/libmasteraff.so" "$README"
ok $? "the README gives the arm64 package and library paths"

# ---- paths: none that is not one of the above ----

stray=$(grep -oE '/usr(/local)?/lib/[a-z0-9_-]+/libmasteraff\.so' "$README" | sort -u |
    grep -vxF -e "$pkglib" -e "$locallib" -e /usr/lib/aarch64-linux-gnu/libmasteraff.so \
        -e /usr/local/lib/aarch64-linux-gnu/libmasteraff.so)
is "$stray" "" "every library path in the README is one an install really uses"

# ---- the first screen ----

first_screen | grep -c worker_cpu_affinity >/dev/null
ok $? "the first screen says that the library follows worker_cpu_affinity"
update=$(grep -n 'apt-get update' "$README" | head -1 | cut -d: -f1)
install=$(grep -n 'apt-get install' "$README" | head -1 | cut -d: -f1)
[ -n "$update" ] && [ -n "$install" ] && [ "$update" -le "$install" ]
ok $? "apt-get update comes no later than the first apt-get install"
for target in demo deps-quick check-quick deps check ci; do
    first_screen | grep -cE "^ +make $target( |$)" >/dev/null &&
        make -n -C "$SRCDIR" "$target" >/dev/null 2>&1
    ok $? "the first screen's make $target is a target of the Makefile"
done
for target in install uninstall deb; do
    code | grep -cE "^ +make $target( |$)" >/dev/null &&
        make -n -C "$SRCDIR" "$target" >/dev/null 2>&1
    ok $? "the README's make $target is a target of the Makefile"
done
first_screen | grep -c 'apt-get install -y .*\bgit\b' >/dev/null
ok $? "the first screen installs git, which the clone needs"
make -n -C "$SRCDIR" deps 2>/dev/null | grep -c 'MB' >/dev/null
ok $? "make deps says what it is about to install, with its size, before it does"

# ---- the samples: what the program prints ----

# Numbers, the test's or demo's directory and the library's directory
# differ from run to run; the rest is the program's own words.
normalize() {
    sed -E -e 's|/tmp/masteraff-[a-z]+\.[A-Za-z0-9]+|/tmp/DIR|g' \
        -e 's|^library: .*/libmasteraff\.so$|library: DIR/libmasteraff.so|' \
        -e 's/[0-9]+/N/g' -e 's/ +/ /g'
}
readme_status() {
    awk '/^    PID +ROLE/ { on = 1 } on { print } on && /^    (ok|warning|critical|unknown):/ { exit }' "$README" |
        sed 's/^    //'
}
readme_line() { grep -m1 '^    [0-9/]* [0-9:]* \[notice\] .*masteraff: master' "$README" | sed 's/.*masteraff: //'; }

# The README's case: worker 0 on CPU 1 (package 1 of the two-package
# tree), worker 1 on CPU 0, no cache (master and two workers).
make_twopkg
mkdir -p "$T/tmp" && conf_text "worker_cpu_affinity 10 01;" >"$T/nginx.conf"
start_nginx
wait_pinned_workers
wait_for "[ \"\$(cpus_of $m)\" = 1 ] && grep -q libnuma /proc/$m/maps"
"$SRCDIR/masteraff" status "$T/nginx.pid" >"$T/status" 2>&1
got=$(normalize <"$T/status") want=$(readme_status | normalize)
[ -n "$want" ] && [ "$got" = "$want" ]
ok $? "the README's masteraff status sample is what the command prints (numbers aside)"
[ "$got" = "$want" ] || { diag "the command printed:"; sed 's/^/#   /' "$T/status"; }
got=$(lib_lines | head -1 | sed 's/.*masteraff: //' | normalize) want=$(readme_line | normalize)
[ -n "$want" ] && [ "$got" = "$want" ]
ok $? "the README's sample of the library's line is what the library writes (numbers aside)"
[ "$got" = "$want" ] || { diag "the library wrote:"; lib_lines | sed 's/^/#   /'; }
stop_nginx

done_testing
