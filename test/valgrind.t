#!/usr/bin/env bash
# The unit tests again under valgrind's memcheck: no invalid access, no leak.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "1..0 # SKIP no valgrind"; exit 0; }
n=0 failed=0
for t in test/t_cpulist test/t_topology test/t_brood test/t_nginxconf test/t_autocpus; do
    n=$((n + 1))
    [ -x "$t" ] || { echo "not ok $n - $t is not built"; failed=1; continue; }
    if valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=all \
        --show-leak-kinds=all "$t" >/tmp/valgrind.$$.out 2>&1; then
        echo "ok $n - $t is clean under memcheck"
    else
        echo "not ok $n - $t under memcheck"
        sed 's/^/# /' /tmp/valgrind.$$.out | grep -v '^# ok ' | tail -30
        failed=1
    fi
done
rm -f /tmp/valgrind.$$.out
echo "1..$n"
exit $failed
