#!/usr/bin/env bash
# The README's first screen as a newcomer runs it, as root, from a clone in
# a directory only root may enter (mode 0700, as /root is on Debian): make
# demo works, shows the workers and status's verdict, and its closing hint
# names what still exists once it has ended; the tests that run programs
# as another uid (faults.t) pass from there too. (make check itself would
# recurse; make deps installs what this run already has.)
. "$(dirname "$0")/lib.sh"
PORT=18174

[ "$(id -u)" = 0 ] || skip_all "not root (the README's first screen is run as root)"
command -v pgrep >/dev/null || skip_all "no pgrep (procps)"

# The clone: the repository as git clone gives it, with the working tree's
# changes over it, so that what is tested is this tree; a copy when this
# is no git checkout.
C=$T/home/clone
mkdir -p "$T/home"
chmod 0700 "$T" "$T/home"
if git -C "$SRCDIR" rev-parse --git-dir >/dev/null 2>&1; then
    git clone -q "$SRCDIR" "$C" && (cd "$SRCDIR" &&
        git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
        cpio -0pdmu --quiet "$C")
else
    mkdir -p "$C" && cp -a "$SRCDIR/." "$C/" && make -s -C "$C" clean
fi
ok $? "a clone in $T/home (mode $(stat -c %a "$T/home"))"

# ---- make demo ----

(cd "$C" && PORT=$PORT make demo) >"$T/demo" 2>&1
ok $? "make demo exits 0"
sed 's/^/#   /' "$T/demo"
! grep -qiE "command not found|No such file|^[a-z/.]+: .*error|^make: \*\*\*" "$T/demo"
ok $? "make demo: no 'command not found', no error"
master=$(awk '/^== where they run now/ { getline; print $1 }' "$T/demo")
is "$(awk '/^== where they run now/ { on = 1; next } /^==/ { on = 0 } on' "$T/demo" |
    grep -c 'nginx: worker process')" 2 "the table shows both workers (pgrep is there)"
grep -q "^   ok: master shares package" "$T/demo"
ok $? "masteraff status's verdict is ok"
hint=$(sed -n '/Try it on your own/,$p' "$T/demo")
[ -n "$hint" ] && ! grep -q /tmp/masteraff-demo <<<"$hint"
ok $? "the closing hint names nothing in the demo's deleted directory"
missing=
for path in $(grep -oE "$C/[^ ]+" <<<"$hint"); do
    [ -e "$path" ] || missing="$missing $path"
done
is "$missing" "" "every path the closing hint names exists after the demo"
grep -q worker_cpu_affinity <<<"$hint"
ok $? "the hint says that nginx.conf needs worker_cpu_affinity"
[ -n "$master" ] && wait_for "! kill -0 $master 2>/dev/null"
ok $? "the demo's nginx is gone ($master)"

# ---- tests that switch uid ----

if command -v setpriv >/dev/null && command -v prlimit >/dev/null; then
    make -s -C "$C" test/errnos test/orphan test/mtmaster test/hostile \
        test/secure test/vforkexec test/blockinit.so >/dev/null 2>&1
    (cd "$C" && prove test/faults.t) >"$T/faults" 2>&1
    ok $? "faults.t passes from the clone (programs run as uid 54321 from copies it can reach)"
    grep -E "^not ok|Permission denied|Failed|Bail" "$T/faults" | sed 's/^/#   /'
else
    ok 0 "faults.t from the clone # SKIP no setpriv or prlimit"
fi

done_testing
