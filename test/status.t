#!/usr/bin/env bash
# masteraff status judged by the master's own truth: the library loaded or
# not, workers pinned or not, the master's scope and topology root, a pid
# that is not a master; --json parsed by python3, --check's exit statuses.
. "$(dirname "$0")/lib.sh"
PORT=18171

MA=$SRCDIR/masteraff
[ -x "$MA" ] || skip_all "masteraff is not built"
command -v python3 >/dev/null || skip_all "no python3 (for --json)"
unset LD_PRELOAD MASTERAFF_SCOPE MASTERAFF_MIGRATE MASTERAFF_LOG \
    MASTERAFF_DRY_RUN MASTERAFF_SYSFS MASTERAFF_LIBRARY MASTERAFF_PROGRAMS

# check [ARGS...]: masteraff status --check's line in $T/check, its exit
# status in $rc.
check() {
    "$MA" status --check "$@" "$T/nginx.pid" >"$T/check" 2>&1
    rc=$?
    sed 's/^/#   check: /' "$T/check"
}

# json_field EXPRESSION: a field of masteraff status --json's object ($T/json),
# after python3 -m json.tool has parsed it.
json_field() {
    python3 -c "import json, sys; d = json.load(open(sys.argv[1])); print($1)" "$T/json"
}

verdict_line() { tail -1 "$T/status"; }

make_twopkg

# ---- the library loaded, worker 0 on package 1 ----

write_conf "10 01"
start_nginx
wait_pinned_workers
wait_for '[ "$(cpus_of $m)" = 1 ]'
"$MA" status "$T/nginx.pid" >"$T/status"
ok $? "status exits 0"
sed 's/^/#   /' "$T/status"
grep -qx "ok: master shares package 1 with worker 0 (pid $w0); master's memory: [0-9]*% on node 0, worker 0's node" \
    <(verdict_line)
ok $? "without --sysfs, status judges under the master's own MASTERAFF_SYSFS: ok"
grep -qx "library: $(readlink -f "$LIB")" "$T/status"
ok $? "it names the library loaded in the master"
wait_for "grep -q libnuma /proc/$m/maps"
"$MA" status "$T/nginx.pid" >"$T/status"
grep -qx "libnuma: .*/libnuma.so.1[.0-9]*, the system's" "$T/status"
ok $? "and the libnuma it opened, the system's" || sed 's/^/#   /' "$T/status"
grep -q "^settings: MASTERAFF_SYSFS=$T/sys " "$T/status"
ok $? "and the settings nginx keeps after writing its title over its environment"

check
is "$rc" 0 "--check: exit status 0"
grep -qx "MASTERAFF OK - master shares package 1 with worker 0 (pid $w0); .*" "$T/check"
ok $? "--check: one plugin line, MASTERAFF OK"

"$MA" status --json "$T/nginx.pid" >"$T/json"
ok $? "--json exits 0"
python3 -m json.tool "$T/json" >/dev/null
ok $? "--json is valid JSON (python3 -m json.tool)"
is "$(json_field 'd["verdict"], d["library"]["loaded"], d["scope"], d["sysfs"]')" \
    "ok True package $T/sys" "--json: verdict, library, scope, sysfs"
is "$(json_field '" ".join("%d:%s:%s:%s" % (p["pid"], p["role"], p["cpus"], p["pinned"]) for p in d["processes"][:3])')" \
    "$m:master:1:False $w0:worker:1:True $w1:worker:0:True" "--json: processes, CPUs, which pinned"
is "$(json_field 'd["processes"][0]["units"], d["library"]["settings"]["MASTERAFF_SCOPE"]')" \
    "package 1 package" "--json: units at the scope, and the settings"
if [ "$(id -u)" = 0 ]; then
    json_field 'd["processes"][0]["pages"]["private"]["0"] > 0' | grep -qx True
    ok $? "--json: as root, the master's pages per node"
fi
"$MA" status --json --check "$T/nginx.pid" | python3 -m json.tool >/dev/null
ok $? "--json --check: JSON too"

fails_with() { # fails_with STATUS WORD ARGS...: status ARGS exits STATUS, says WORD
    local want=$1 word=$2 got
    shift 2
    "$MA" status "$@" >"$T/out" 2>&1
    got=$?
    [ "$got" = "$want" ] && grep -qF -- "$word" "$T/out"
    ok $? "status $*: exit status $want, a message with '$word'"
    [ "$got" = "$want" ] || diag "exit status $got"
    sed 's/^/#   /' "$T/out"
}
fails_with 1 "process $w0 is a worker process, not a master: its master is $m" "$w0"
fails_with 3 "MASTERAFF UNKNOWN - masteraff status: process $w0 is a worker" --check "$w0"
sleep 60 &
bg_pids+=($!)
# Until it has exec'd sleep, $! is a fork of this shell, named bash.
wait_for "[ \"\$(cat /proc/$!/comm 2>/dev/null)\" = sleep ]"
fails_with 1 "process $! (sleep) is not a master" "$!"
fails_with 3 "MASTERAFF UNKNOWN - " --check "$!"
fails_with 1 "no CPUs under /nonexistent/devices/system/cpu" --sysfs /nonexistent "$m"
fails_with 3 "MASTERAFF UNKNOWN - " --check --sysfs /nonexistent "$m"
fails_with 3 "MASTERAFF UNKNOWN - " --check --bogus "$m"
# nginx stopped: said so, and critical for a monitoring plugin.
fails_with 1 "the master is not running: no pid file $T/none.pid" "$T/none.pid"
fails_with 2 "MASTERAFF CRITICAL - masteraff status: the master is not running: no pid file" --check "$T/none.pid"
echo 999999999 >"$T/stale.pid"
fails_with 2 "MASTERAFF CRITICAL - masteraff status: the master is not running: its pid file $T/stale.pid names process 999999999, which has exited" \
    --check "$T/stale.pid"
fails_with 1 "process 999999999 is not running" 999999999
long=$(head -c 100000 /dev/zero | tr '\0' y)
"$MA" status "$m" "$long" >"$T/out" 2>&1
is "$?:$(head -1 "$T/out")" "2:masteraff status: unexpected argument '$(head -c 64 <<<"$long")...'" \
    "a 100 KB argument: exit status 2, echoed cut after 64 bytes"

# Worker 0 respawned: the oldest worker is now worker 1, on package 0,
# while the master rightly stays with the new worker 0 on package 1.
kill -9 "$w0"
wait_for "[ \$(new_workers '$w0 $w1' | wc -w) -eq 1 ]"
n0=$(new_workers "$w0 $w1")
# The library's decision on the new worker 0's pin, not a guessed time.
wait_for "lib_lines | grep -q 'master $m stays on CPUs 1: worker $n0 now leads'"
is "$(cpus_of "$m")" 1 "worker 0 respawned: the master stays on CPU 1"
check
is "$rc" 1 "after a respawn, a mismatch with the oldest worker is only a warning"
grep -q "^MASTERAFF WARNING - master on package 1, worker 0 (pid $w1) on package 0 (a worker was respawned" "$T/check"
ok $? "and it says that a worker was respawned"
stop_nginx

# ---- scope node: on twopkg node 0 holds both packages ----

MASTERAFF_SCOPE=node start_nginx
wait_pinned_workers
wait_for "lib_lines | grep -q 'master $m stays on CPUs 0-1 (node 0), placed there at start for worker $w0 on CPU 1, confirmed'"
is "$(cpus_of "$m")" 0-1 "scope node: the master stays on node 0 (CPUs 0-1)"
"$MA" status --sysfs "$T/sys" "$T/nginx.pid" >"$T/status"
grep -qx "ok: master shares node 0 with worker 0 (pid $w0); .*" <(verdict_line)
ok $? "scope node: judged by nodes, not packages (ok)"
verdict_line | sed 's/^/#   /'
"$MA" status --json "$T/nginx.pid" >"$T/json"
is "$(json_field 'd["scope"], d["library"]["settings"]["MASTERAFF_SCOPE"]')" "node node" \
    "--json: the master's scope"
stop_nginx

# ---- workers that never pin ----

write_conf ""
start_nginx
wait_workers
"$MA" status "$T/nginx.pid" >"$T/status"
grep -q "^warning: no worker pinned itself to CPUs: .*worker_cpu_affinity" <(verdict_line)
ok $? "no worker_cpu_affinity: a warning that names worker_cpu_affinity"
verdict_line | sed 's/^/#   /'
check
is "$rc" 1 "--check: exit status 1 (warning)"
grep -q "^MASTERAFF WARNING - " "$T/check"
ok $? "--check: MASTERAFF WARNING"
stop_nginx

# ---- nginx without the library ----

write_conf "10 01"
start_nginx_without
wait_pinned_workers
"$MA" status --sysfs "$T/sys" "$T/nginx.pid" >"$T/status"
ok $? "without the library: status still exits 0"
grep -q "^critical: libmasteraff is not loaded in the master" <(verdict_line)
ok $? "without the library: the verdict is critical, not ok"
grep -qx "library: not loaded" "$T/status"
ok $? "without the library: 'library: not loaded'"
check --sysfs "$T/sys"
is "$rc" 2 "--check: exit status 2 (critical)"
grep -q "^MASTERAFF CRITICAL - libmasteraff is not loaded" "$T/check"
ok $? "--check: MASTERAFF CRITICAL"
"$MA" status --json --sysfs "$T/sys" "$T/nginx.pid" >"$T/json"
is "$(json_field 'd["verdict"], d["library"]["loaded"]')" "critical False" \
    "--json: critical, library not loaded"
stop_nginx

# ---- a value the library refuses ----

MASTERAFF_SCOPE=$'chip"\n' start_nginx
wait_pinned_workers
check --sysfs "$T/sys"
is "$rc" 2 "a bad MASTERAFF_SCOPE in the master: critical"
grep -qF 'MASTERAFF_SCOPE="chip"?" is not valid: the library is inert' "$T/check"
ok $? "the reason names the variable and its value, on one line"
"$MA" status --json --sysfs "$T/sys" "$T/nginx.pid" >"$T/json"
python3 -m json.tool "$T/json" >/dev/null
ok $? "--json escapes a value with a quote and a newline"
is "$(json_field 'repr(d["library"]["settings"]["MASTERAFF_SCOPE"])')" "'chip\"\\n'" \
    "--json: the value, whole"
stop_nginx

done_testing
