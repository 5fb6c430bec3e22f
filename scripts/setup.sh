# Sourced by the benchmark scripts: builds the library and the command,
# then takes test/lib.sh's nginx set-up. What stops them (no
# nginx, a build that failed) is said on stderr and exits non-zero: a
# script run from a fresh clone must not end in silence.
SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
make -s -C "$SRCDIR" all || exit 1
# test/lib.sh would skip, with status 0, where a script must fail.
NGINX=${NGINX:-/usr/sbin/nginx}
if [ ! -x "$NGINX" ]; then
    echo "$(basename "$0"): no nginx at $NGINX (apt-get install nginx-light)" >&2
    exit 1
fi
. "$SRCDIR/test/lib.sh" >&2

# ---- what the scripts' figures share ----

# The median of the numbers on stdin, one a line.
median() { sort -n | awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
# ratio A B [DECIMALS]: A / B, to 2 decimals unless told, "-" when B is 0.
ratio() { awk -v a="$1" -v b="$2" -v d="${3:-2}" 'BEGIN { if (b > 0) printf "%." d "f", a / b; else printf "-" }'; }
# children_proc PID FILE: /proc/CHILD/FILE of each child of PID, one after
# the other.
children_proc() { pgrep -P "$1" | sed "s|.*|/proc/&/$2|" | xargs cat 2>/dev/null; }
# serving N [OLD]: the master's children not in OLD are N pinned workers,
# no process of OLD is left, and a request is answered.
serving() { settled_workers "$1" "${2:-}" && serves; }
# tree_root NAME: the MASTERAFF_SYSFS of a tree: "sys" is this machine's
# /sys, any other name a fake tree test/mktree writes under $T.
tree_root() {
    case $1 in
    sys) echo /sys ;;
    *) [ -d "$T/$1" ] || "$SRCDIR/test/mktree" "$1" "$T/$1" || return 1
       echo "$T/$1" ;;
    esac
}

# stats FILE K: "median min max" of column K of FILE, or "NaN NaN NaN"
# when a value there is "-" (not measured), as gnuplot skips it.
stats() {
    local v
    if awk -v k="$2" '$k == "-" { f = 1 } END { exit !f }' "$1"; then
        echo NaN NaN NaN
    else
        v=$(awk -v k="$2" '{ print $k }' "$1" | sort -n)
        echo "$(median <<<"$v") $(head -1 <<<"$v") $(tail -1 <<<"$v")"
    fi
}

# When the measurement began, for data_header.
MEASURED=$(date -u '+%F %H:%M')

# data_header FILE SCRIPT ARGS...: starts the data file a script's
# figures go to (for scripts/plots): the machine, the date and the command
# as comments, so that a plot says where and when it was measured.
data_header() {
    local file=$1 script=$2
    shift 2
    mkdir -p "$(dirname "$file")" || return 1
    {
        echo "# machine: $(nproc) CPUs, $(uname -sr), $("$NGINX" -v 2>&1 | sed 's/.*: //'), measured $MEASURED UTC"
        echo "# command: scripts/$script $*"
    } >"$file"
}
