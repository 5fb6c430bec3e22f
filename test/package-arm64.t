#!/usr/bin/env bash
# The Debian package for arm64, cross-built on this machine: builds it from
# a copy of the working tree with dpkg-buildpackage -a arm64, checks it with
# lintian (any E: fails) and checks what it holds: the library in
# aarch64-linux-gnu's directory, arm64 code, and no export beyond the
# interposed functions. Needs crossbuild-essential-arm64 and libc6-dev:arm64
# (dpkg --add-architecture arm64); the package is never installed.
. "$(dirname "$0")/lib.sh"

command -v dpkg-buildpackage >/dev/null || skip_all "no dpkg-buildpackage (apt-get install dpkg-dev)"
command -v aarch64-linux-gnu-gcc >/dev/null ||
    skip_all "no aarch64-linux-gnu-gcc (apt-get install crossbuild-essential-arm64)"
(cd "$SRCDIR" && dpkg-checkbuilddeps -a arm64) >"$T/builddeps" 2>&1 ||
    skip_all "arm64 build dependencies missing: $(tail -1 "$T/builddeps")"

PKG=masteraff

# The working tree without build products (as in package.t).
mkdir -p "$T/build/src"
if git -C "$SRCDIR" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$SRCDIR" ls-files -z --cached --others --exclude-standard
else
    (cd "$SRCDIR" && find . -path ./.git -prune -o -path ./test/vm/.cache -prune \
        -o -path ./build-arm64 -prune -o -path ./debian/tmp -prune \
        -o -path "./debian/$PKG" -prune -o -type f -print0)
fi | while IFS= read -r -d '' f; do
    [ -f "$SRCDIR/$f" ] || continue
    [ "$(head -c4 "$SRCDIR/$f" | od -An -c | tr -d ' ')" = '177ELF' ] && continue
    printf '%s\0' "$f"
done | (cd "$SRCDIR" && cpio -0pdm --quiet "$T/build/src")
ok $? "a copy of the working tree without build products"

start=$SECONDS
(cd "$T/build/src" && dpkg-buildpackage -a arm64 -us -uc -b) >"$T/build.log" 2>&1
rc=$?
ok $rc "dpkg-buildpackage -a arm64 -us -uc -b builds the package ($((SECONDS - start)) s)" ||
    tail -25 "$T/build.log" | sed 's/^/#   /'
deb=$(ls "$T/build/${PKG}_"*_arm64.deb 2>/dev/null | head -1)
[ -n "$deb" ] || { echo "Bail out! no arm64 .deb built"; exit 1; }
diag "built $(basename "$deb")"
is "$(dpkg-deb -f "$deb" Architecture)" arm64 "the package is for arm64"
dpkg-deb -f "$deb" Depends | grep -q 'libc6 (>= '
ok $? "its Depends name libc6 with a version ($(dpkg-deb -f "$deb" Depends))"

if command -v lintian >/dev/null; then
    lintian --display-info --pedantic "$deb" >"$T/lintian" 2>"$T/lintian.err"
    rc=$?
    sed 's/^/# lintian: /' "$T/lintian"
    errors=$(grep -c '^E: ' "$T/lintian")
    [ "$errors" -eq 0 ] && [ "$rc" -le 1 ]
    ok $? "lintian reports no error ($errors E: lines, exit status $rc)"
    unused=$(grep -c 'unused-override\|mismatched-override' "$T/lintian")
    is "$unused" 0 "every lintian override matches a tag"
else
    echo "ok $((tap_n += 1)) # SKIP no lintian (apt-get install lintian)"
fi

mkdir "$T/root"
dpkg-deb -x "$deb" "$T/root"
lib=$T/root/usr/lib/aarch64-linux-gnu/libmasteraff.so
ok "$([ -f "$lib" ]; echo $?)" "the library is /usr/lib/aarch64-linux-gnu/libmasteraff.so"
for f in "$lib" "$T/root/usr/bin/masteraff"; do
    is "$(LC_ALL=C readelf -h "$f" 2>/dev/null | awk '/Machine:/ { print $2 }')" \
        AArch64 "$(basename "$f") is arm64 code"
done
exported=$(LC_ALL=C readelf --dyn-syms -W "$lib" |
    awk '$5 ~ /GLOBAL|WEAK/ && $7 != "UND" && $8 != "" { sub(/@.*/, "", $8); print $8 }' |
    sort | tr '\n' ' ')
is "$exported" "execv execve execvp fork pthread_setaffinity_np sched_getaffinity sched_setaffinity setsid sigsuspend wait wait3 wait4 waitid waitpid " \
    "the library exports the interposed functions only"
strings "$T/root/usr/bin/masteraff" >"$T/strings"
grep -qx /usr/lib/aarch64-linux-gnu/libmasteraff.so "$T/strings"
ok $? "masteraff looks for the library in the arm64 directory"

done_testing
