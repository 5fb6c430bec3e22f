#!/usr/bin/env bash
# masteraff status --prometheus and --textfile with Debian's nginx on the
# two-package tree: promtool (Prometheus' own parser) accepts the output,
# its values are --json's, the textfile is replaced whole (a reader never
# sees part of one), a master that is gone still gets a file (up 0), and
# bad arguments are refused with nothing written.
. "$(dirname "$0")/lib.sh"
PORT=18420
CMD=$SRCDIR/masteraff

command -v promtool >/dev/null || skip_all "no promtool (apt-get install prometheus)"
command -v python3 >/dev/null || skip_all "no python3"

# check_metrics FILE WHAT: promtool check metrics accepts FILE, silently
# (it prints what it finds wrong, lint included).
check_metrics() {
    promtool check metrics <"$1" >"$T/promtool" 2>&1 && [ ! -s "$T/promtool" ]
    ok $? "$2: promtool check metrics accepts it" || sed 's/^/#   /' "$T/promtool"
}

# sample FILE NAME{LABELS}: the value of that sample, exactly as named.
sample() { awk -v s="$2" '$1 == s {print $2}' "$1"; }

make_twopkg
write_conf "10 01"
start_nginx
wait_pinned_workers
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"

"$CMD" status --prometheus "$T/nginx.pid" >"$T/prom" 2>"$T/err"
ok $? "status --prometheus exits 0" || sed 's/^/#   /' "$T/err"
check_metrics "$T/prom" "--prometheus"
is "$(sample "$T/prom" masteraff_up)" 1 "masteraff_up 1"
is "$(sample "$T/prom" masteraff_master_with_worker0)" 1 "the master is with worker 0"
is "$(sample "$T/prom" 'masteraff_verdict{verdict="ok"}') $(sample "$T/prom" 'masteraff_verdict{verdict="critical"}')" \
    "1 0" "the verdict as labels: ok 1, critical 0"
is "$(grep -c '^masteraff_verdict{' "$T/prom")" 4 "one verdict sample for each state"
grep -q "^masteraff_library_info{path=\"$LIB\",settings_from=\"[a-z]*\",scope=\"package\",migrate=\"on\",programs=\"nginx\*,openresty\*,angie\*,freenginx\*,tengine\*\",log=\"notice\",dry_run=\"0\",sysfs=\"$T/sys\",early=\"on\",auto=\"off\"} 1\$" "$T/prom"
ok $? "masteraff_library_info has the path and the settings as labels" || grep library_info "$T/prom" | sed 's/^/#   /'
! grep -v '^#' "$T/prom" | grep -v '^masteraff_' | grep -q .
ok $? "every sample's name starts with masteraff_"

# The same facts as --json, read a moment apart: the master is idle, but
# its resident pages may still change by a few.
"$CMD" status --json "$T/nginx.pid" >"$T/json"
python3 - "$T/json" "$T/prom" "$(getconf PAGESIZE)" >"$T/compare" 2>&1 <<'PY'
import json, re, sys
j = json.load(open(sys.argv[1]))
page = int(sys.argv[3])
prom = {}
for line in open(sys.argv[2]):
    if not line.startswith("#"):
        name, value = line.rsplit(" ", 1)
        prom[name] = float(value)
def same(what, a, b):
    print(("ok - " if a == b else "not ok - ") + f"{what}: json {a}, prometheus {b}")
master = j["processes"][0]
workers = [p for p in j["processes"] if p["worker"]]
same("master pid", j["master"], prom["masteraff_master_pid"])
same("library loaded", 1 if j["library"]["loaded"] else 0, prom["masteraff_library_loaded"])
same("verdict", j["verdict"], [k[len('masteraff_verdict{verdict="'):-2] for k, v in prom.items() if k.startswith("masteraff_verdict{") and v == 1][0])
same("verdict code", ["ok", "warning", "critical", "unknown"].index(j["verdict"]), prom["masteraff_verdict_code"])
same("workers", len(workers), prom["masteraff_workers"])
same("pinned workers", len([p for p in workers if p["pinned"]]), prom["masteraff_workers_pinned"])
for kind in ("private", "shared"):
    nodes = master["pages"][kind]
    got = {m.group(1): v for k, v in prom.items()
           if (m := re.match(r'masteraff_master_memory_bytes\{kind="%s",node="(\d+)"\}$' % kind, k))}
    same(f"{kind} memory's nodes", sorted(nodes), sorted(got))
    for n, pages in nodes.items():
        b = got.get(n, 0)
        close = abs(pages * page - b) <= max(0.02 * pages * page, 16 * page)
        print(("ok - " if close else "not ok - ") + f"{kind} memory on node {n}: json {pages} pages, prometheus {b:.0f} bytes")
PY
relay "as --json says" cat "$T/compare"

# ---- the textfile ----

mkdir "$T/textfiles"
"$CMD" status --textfile="$T/textfiles" "$T/nginx.pid" >"$T/out" 2>&1
ok $? "status --textfile=DIR exits 0" || sed 's/^/#   /' "$T/out"
is "$(cat "$T/out")" "" "and prints nothing"
F=$T/textfiles/masteraff.prom
is "$(ls -A "$T/textfiles")" masteraff.prom "DIR holds masteraff.prom, and no temporary file"
is "$(stat -c %a "$F")" 644 "the file is 0644: node_exporter runs as another user"
check_metrics "$F" "the textfile"
is "$(sample "$F" masteraff_up)" 1 "the textfile: masteraff_up 1"

"$CMD" status --textfile="$T/textfiles/nginx-main.prom" "$T/nginx.pid"
ok $? "status --textfile=FILE.prom exits 0"
[ -s "$T/textfiles/nginx-main.prom" ]
ok $? "and writes that file"

# Replaced whole, by rename: a new inode each time, and a reader that reads
# it over and over while it is rewritten sees every sample every time.
ino=$(stat -c %i "$F")
"$CMD" status --textfile="$T/textfiles" "$T/nginx.pid"
[ "$(stat -c %i "$F")" != "$ino" ]
ok $? "each run puts a new file in place (rename), not a rewrite of the old one"
lines=$(grep -c . "$F")
( for ((i = 0; i < 100; i++)); do "$CMD" status --textfile="$T/textfiles" "$T/nginx.pid" || exit 1; done ) &
writer=$!
bg_pids+=("$writer")
reads=0 partial=0
while kill -0 "$writer" 2>/dev/null; do
    n=$(grep -c . "$F" 2>/dev/null)
    tail -c1 "$F" | od -An -c | grep -q '\\n' && [ "$n" -ge "$lines" ] || partial=$((partial + 1))
    reads=$((reads + 1))
done
wait "$writer"
ok $? "100 runs in a row each write the file"
is "$partial" 0 "none of $reads reads during those runs saw a partial file"
is "$(ls -A "$T/textfiles" | tr '\n' ' ')" "masteraff.prom nginx-main.prom " "no temporary file is left behind"

# ---- the library not loaded: critical ----

# A setting that needs escaping, and a byte that is not UTF-8.
stop_nginx
MASTERAFF_SCOPE=$'a"b\\c\xff' start_nginx_without
wait_workers
"$CMD" status --prometheus "$T/nginx.pid" >"$T/prom"
check_metrics "$T/prom" "without the library"
grep -qF 'scope="a\"b\\c'$'\xef\xbf\xbd''"' "$T/prom"
ok $? "a label's quote and backslash escaped, a stray byte as U+FFFD" || grep library_info "$T/prom" | sed 's/^/#   /'
is "$(sample "$T/prom" masteraff_library_loaded) $(sample "$T/prom" 'masteraff_verdict{verdict="critical"}') $(sample "$T/prom" masteraff_verdict_code)" \
    "0 1 2" "without the library: masteraff_library_loaded 0, verdict critical (code 2)"

# ---- the master gone: the file still says so ----

stop_nginx
"$CMD" status --textfile="$T/textfiles" "$T/nginx.pid" >"$T/out" 2>&1
is "$?" 1 "no master: status --textfile exits 1"
grep -q "the master is not running: no pid file $T/nginx.pid" "$T/out"
ok $? "and says why on stderr" || sed 's/^/#   /' "$T/out"
check_metrics "$F" "no master"
is "$(sample "$F" masteraff_up) $(sample "$F" 'masteraff_verdict{verdict="unknown"}') $(sample "$F" masteraff_verdict_code)" \
    "0 1 3" "the textfile says masteraff_up 0, verdict unknown (code 3)"
grep -q '^# masteraff status: the master is not running: no pid file' "$F"
ok $? "with the reason as a comment"
"$CMD" status --prometheus 99999999 >"$T/prom" 2>/dev/null
is "$(sample "$T/prom" masteraff_up)" 0 "--prometheus on a pid that does not exist: masteraff_up 0 on stdout"

# ---- bad arguments: refused, nothing written ----

# fails STATUS WORD ARGS...: status ARGS exits STATUS, stderr names WORD,
# and no file appeared in $T/textfiles.
fails() {
    local want=$1 word=$2 before
    shift 2
    before=$(ls -A "$T/textfiles" | tr '\n' ' ')
    "$CMD" status "$@" >"$T/out" 2>&1
    is "$?" "$want" "status $*: exit status $want"
    grep -qF -- "$word" "$T/out"
    ok $? "... and says: $word" || sed 's/^/#   /' "$T/out"
    is "$(ls -A "$T/textfiles" | tr '\n' ' ')" "$before" "... and writes no file"
}
fails 2 "not a directory, nor a file name ending in .prom" --textfile="$T/textfiles/masteraff.txt" 1
fails 2 "--textfile= names no directory or file" --textfile= 1
fails 2 "--prometheus goes with neither --json nor --check" --prometheus --json 1
fails 3 "--textfile goes with neither --json nor --check" --textfile="$T/textfiles" --check 1
fails 1 "cannot write $T/nowhere/masteraff.prom: No such file or directory" --textfile="$T/nowhere/masteraff.prom" 1
if [ ! -d /var/lib/prometheus/node-exporter ]; then
    fails 1 "cannot write /var/lib/prometheus/node-exporter/masteraff.prom" --textfile 1
else
    skip "/var/lib/prometheus/node-exporter exists" "--textfile alone names Debian's node exporter directory"
fi

# ---- the systemd timer and service, and the documentation ----

if command -v systemd-analyze >/dev/null; then
    mkdir -p "$T/units"
    sed "s|/usr/bin/masteraff|$CMD|" "$SRCDIR/examples/systemd/masteraff-textfile.service" \
        >"$T/units/masteraff-textfile.service"
    cp "$SRCDIR/examples/systemd/masteraff-textfile.timer" "$T/units/"
    out=$(SYSTEMD_UNIT_PATH="$T/units:" systemd-analyze verify --man=no \
        "$T/units/masteraff-textfile.service" "$T/units/masteraff-textfile.timer" 2>&1)
    ok $? "systemd-analyze verify accepts examples/systemd/masteraff-textfile.{service,timer}"
    is "$out" "" "and says nothing about them"
fi
grep -q '^ExecStart=/usr/bin/masteraff status --textfile /run/nginx.pid$' \
    "$SRCDIR/examples/systemd/masteraff-textfile.service"
ok $? "the service writes the default textfile for /run/nginx.pid"

"$CMD" --help | grep -q -- '--prometheus' && "$CMD" --help | grep -q -- '--textfile'
ok $? "--help names --prometheus and --textfile"
grep -qF -- '\-\-prometheus' "$SRCDIR/man/masteraff.1" && grep -qF -- '\-\-textfile' "$SRCDIR/man/masteraff.1"
ok $? "masteraff(1) names --prometheus and --textfile"

done_testing
