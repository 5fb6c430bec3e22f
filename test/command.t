#!/usr/bin/env bash
# The masteraff command: the wrapper's environment, nginx started through
# it on a fake sysfs tree where CPU 0 and CPU 1 are two packages, status,
# topology, and an exit status and a message for every bad argument.
. "$(dirname "$0")/lib.sh"
PORT=18170

MA=$SRCDIR/masteraff
[ -x "$MA" ] || skip_all "masteraff is not built"
LIBREAL=$(readlink -f "$LIB")
unset LD_PRELOAD MASTERAFF_SCOPE MASTERAFF_MIGRATE MASTERAFF_LOG \
    MASTERAFF_DRY_RUN MASTERAFF_SYSFS MASTERAFF_LIBRARY

# var NAME [ENV-ASSIGNMENT...] -- MASTERAFF-ARGS...: NAME's value in the
# environment masteraff gives its command (env), or "unset".
var() {
    local name=$1 assignments=()
    shift
    while [ "$1" != -- ]; do
        assignments+=("$1")
        shift
    done
    shift
    env "${assignments[@]}" "$MA" "$@" env | sed -n "s|^$name=||p" | grep . || echo unset
}

# fails STATUS WORD ARGS...: masteraff ARGS exits with STATUS, prints
# nothing on stdout, and its message on stderr names WORD.
fails() {
    local want=$1 word=$2 rc
    shift 2
    "$MA" "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ "$rc" = "$want" ] && [ ! -s "$T/out" ] && grep -qF -- "$word" "$T/err"
    ok $? "masteraff $*: exit status $want, a message naming '$word'"
    [ "$rc" = "$want" ] || diag "exit status $rc"
    sed 's/^/#   stderr: /' "$T/err"
}

# ---- the wrapper's environment ----

is "$(var MASTERAFF_SCOPE -- --scope node -- env)" node "--scope node sets MASTERAFF_SCOPE=node"
is "$(var LD_PRELOAD -- --scope node -- env)" "$LIBREAL" \
    "LD_PRELOAD is the library beside masteraff, as an absolute path"
is "$(var MASTERAFF_MIGRATE -- --no-migrate env)" off "--no-migrate sets MASTERAFF_MIGRATE=off"
is "$(var MASTERAFF_DRY_RUN -- --dry-run env)" 1 "--dry-run sets MASTERAFF_DRY_RUN=1"
is "$(var MASTERAFF_AUTO -- --auto-cpuset env)" cpuset "--auto-cpuset sets MASTERAFF_AUTO=cpuset"
is "$(var MASTERAFF_LOG -- --log=debug env)" debug "--log=debug sets MASTERAFF_LOG=debug"
is "$(var MASTERAFF_SYSFS -- --sysfs /sys env)" /sys "--sysfs /sys sets MASTERAFF_SYSFS"
is "$(env -i PATH="$PATH" "$MA" env | sed 's/=.*//' | sort | tr '\n' ' ')" "LD_PRELOAD PATH " \
    "without options only LD_PRELOAD is set"
is "$(var MASTERAFF_SCOPE MASTERAFF_SCOPE=core -- env)" core \
    "a variable the caller set is passed on"

cc -shared -o "$T/libdummy.so" -x c /dev/null
is "$(var LD_PRELOAD LD_PRELOAD="$T/libdummy.so" -- env)" "$LIBREAL:$T/libdummy.so" \
    "an existing LD_PRELOAD is kept, after the library"
is "$(var LD_PRELOAD LD_PRELOAD="$LIBREAL" -- env)" "$LIBREAL" \
    "the library already in LD_PRELOAD is not added twice"
is "$(var LD_PRELOAD LD_PRELOAD="$T/libdummy.so $LIB:" -- env)" "$LIBREAL:$T/libdummy.so" \
    "nor when listed among others, separated by spaces"

mkdir -p "$T/other"
cp "$LIB" "$T/other/libmasteraff.so"
is "$(var LD_PRELOAD -- --library "$T/other/libmasteraff.so" env)" "$T/other/libmasteraff.so" \
    "--library PATH chooses the library"
is "$(var LD_PRELOAD MASTERAFF_LIBRARY="$T/other/libmasteraff.so" -- env)" \
    "$T/other/libmasteraff.so" "so does MASTERAFF_LIBRARY"
is "$(cd "$T" && var LD_PRELOAD -- --library other/libmasteraff.so env)" \
    "$T/other/libmasteraff.so" "a relative --library is made absolute"
is "$(var LD_PRELOAD LD_PRELOAD="$LIB" -- --library "$T/other/libmasteraff.so" env)" \
    "$T/other/libmasteraff.so" "another copy already in LD_PRELOAD is replaced"

grep -qF "$LIBREAL" <<<"$("$MA" -- cat /proc/self/maps)"
ok $? "the command runs with the library loaded"
is "$("$MA" sh -c 'echo "$@"; exit 7' sh --scope bogus)" "--scope bogus" \
    "options after the command are the command's"
"$MA" sh -c 'exit 7'
is $? 7 "the command's exit status is masteraff's"

# ---- nginx started through masteraff ----

make_twopkg
write_conf "10 01"
"$MA" --sysfs "$T/sys" -- "$NGINX" -c "$T/nginx.conf" 2>"$T/stderr"
ok $? "nginx starts through masteraff"
wait_workers
m=$(master_pid)
read -r w0 w1 <<<"$(workers)"
cm=$(children_of "$m" "cache manager")
wait_for '[ "$(cpus_of $m)" = 1 ]'
is "$(cpus_of "$m")" 1 "the master follows worker 0 to CPU 1 (package 1)"
grep -q "masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1" "$T/error.log"
ok $? "error.log has the library's line"

# ---- status ----

"$MA" status --sysfs "$T/sys" "$T/nginx.pid" >"$T/status"
ok $? "masteraff status PIDFILE exits 0"
sed 's/^/#   /' "$T/status"
row() { awk -v p="$1" '$1 == p { print $2, $3, $4, $5 }' "$T/status"; }
is "$(head -1 "$T/status" | tr -s ' ')" "PID ROLE CPUS PACKAGES NODES PRIVATE SHARED" "the header"
is "$(row "$m")" "master 1 1 0" "the master: CPU 1, package 1, node 0"
is "$(row "$w0")" "worker 1 1 0" "worker 0: CPU 1, package 1, node 0"
is "$(row "$w1")" "worker 0 0 0" "worker 1: CPU 0, package 0, node 0"
is "$(row "$cm")" "cache-manager 0-1 0-1 0" "the cache manager: both CPUs and packages"
is "$(awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }' "$T/status" | tr '\n' ' ')" \
    "$m $(children_of "$m" '.*' | tr '\n' ' ')" "the master, then its children in fork order"
is "$(awk 'NR > 1 && $1 ~ /^[0-9]+$/ && !(NF == 7 && $6 ~ /^private=/ && $7 ~ /^shared=/)' "$T/status")" "" \
    "every process line has 7 columns, the last two private= and shared="
if [ "$(id -u)" = 0 ]; then
    grep -Eq "^$m .* private=node0:[0-9]+ +shared=node0:[0-9]+$" "$T/status"
    ok $? "as root, the master's private pages and shared zones are counted on node 0"
fi
grep -Eqx "ok: master shares package 1 with worker 0 \(pid $w0\); master's memory: [0-9]+% on node 0, worker 0's node" \
    <(tail -1 "$T/status")
ok $? "the verdict: the master shares package 1 with worker 0"

is "$("$MA" status --sysfs "$T/sys" "$m" | awk -v p="$m" '$1 == p { print $2, $3, $4 }')" \
    "master 1 1" "masteraff status PID"
is "$(MASTERAFF_SYSFS=$T/sys "$MA" status "$m" | row "$m")" "master 1 1 0" \
    "MASTERAFF_SYSFS gives the tree"
stop_nginx

write_conf "10 01"
start_nginx_without
wait_workers
m=$(master_pid)
read -r w0 w1 <<<"$(workers)"
wait_pinned "$w0" "$w1"
"$MA" status --sysfs "$T/sys" "$T/nginx.pid" >"$T/status"
grep -q "^critical: libmasteraff is not loaded in the master .*; master on packages 0,1, worker 0 (pid $w0) on package 1; " <(tail -1 "$T/status")
ok $? "without the library, the verdict is critical and says why"
tail -1 "$T/status" | sed 's/^/#   /'
stop_nginx

sh -c 'exit 0' &
wait $!
fails 1 "$!" status "$!"
fails 1 "$T/nginx.pid" status "$T/nginx.pid"
echo nonsense >"$T/garbage.pid"
fails 1 "$T/garbage.pid" status "$T/garbage.pid"

# ---- topology ----

"$MA" topology --sysfs "$T/sys" >"$T/topology"
ok $? "masteraff topology exits 0"
sed 's/^/#   /' "$T/topology"
is "$(grep '^package' "$T/topology" | tr '\n' ';')" "package 0: CPUs 0;package 1: CPUs 1;" \
    "twopkg: two packages"
grep -qx "die: as package (not reported or same as package)" "$T/topology"
ok $? "twopkg: dies fall back to packages"
grep -qx "node 0: CPUs 0-1" "$T/topology"
ok $? "twopkg: one node"
is "$(MASTERAFF_SYSFS=$T/sys "$MA" topology)" "$(cat "$T/topology")" "MASTERAFF_SYSFS gives the tree"

"$SRCDIR/test/mktree" kunpeng920 "$T/kunpeng"
"$MA" topology --sysfs "$T/kunpeng" >"$T/topology"
is "$(grep -E '^(package|node)' "$T/topology" | tr '\n' ';')" \
    "package 0: CPUs 0-47;package 1: CPUs 48-95;node 0: CPUs 0-23;node 1: CPUs 24-47;node 2: CPUs 48-71;node 3: CPUs 72-95;" \
    "kunpeng920: two packages of two nodes"
is "$(grep -c '^cluster [0-9]*: CPUs' "$T/topology")" 24 "kunpeng920: 24 clusters"

mkdir -p "$T/empty"
fails 1 "$T/empty" topology --sysfs "$T/empty"

# ---- usage ----

"$MA" --help >"$T/out"
ok $? "--help exits 0"
grep -q "^Usage: masteraff" "$T/out"
ok $? "--help prints the usage"
"$MA" status --help | grep -q "^Usage: masteraff"
ok $? "status --help too"
is "$("$MA" --version | sed 's/[0-9][0-9.]*.*/N/')" "masteraff N" "--version prints the version"

fails 2 --bogus --bogus
fails 2 "'x'" -x
fails 2 --scope --scope
fails 2 chip --scope chip -- true
fails 2 loud --log loud -- true
fails 2 relative --sysfs relative -- true
fails 2 "no command"
fails 2 "'2'" status 1 2
fails 2 "'0'" status 0
fails 2 99999999999 status 99999999999
fails 2 --bogus status --bogus
fails 2 --sysfs status --sysfs
fails 2 extra topology extra
fails 2 --sysfs topology --sysfs
fails 1 "$T/nope.so" --library "$T/nope.so" -- true
fails 1 "library /etc/passwd: not an ELF shared object" --library /etc/passwd -- true
fails 1 "library $(readlink -f /bin/true): an executable, not a shared object" --library /bin/true -- true
fails 2 "unknown command 'stats' (commands: status, topology;" stats
fails 2 "unknown command 'stats'" --scope node stats
fails 127 "cannot run stats" -- stats
long=$(head -c 100000 /dev/zero | tr '\0' x)
"$MA" --scope "$long" -- true 2>"$T/err"
is "$?:$(head -1 "$T/err")" "2:masteraff: bad --scope '$(head -c 64 <<<"$long")...' (accepted: $("$MA" --scope x true 2>&1 | sed -n 's/.*(accepted: //p' | head -1)" \
    "a 100 KB argument: exit status 2, echoed cut after 64 bytes"
fails 127 "$T/nope" -- "$T/nope"
fails 127 no-such-command-here -- no-such-command-here
echo 'echo hi' >"$T/notexec"
fails 126 "$T/notexec" -- "$T/notexec"

done_testing
