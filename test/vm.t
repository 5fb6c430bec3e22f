#!/usr/bin/env bash
# libmasteraff on real kernels: boots Debian's kernel under qemu with each
# emulated topology (test/vm/run) and runs test/vm/scenarios.sh there (after
# test/vm/smoke.sh's checks of the VM itself). Relays the TAP, renumbered
# and prefixed with the topology, plus one test per VM that its plan was
# complete and the VM ended cleanly.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/vm

if ! command -v qemu-system-x86_64 >/dev/null; then
    echo "1..0 # SKIP no qemu"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s -C "$here/.." masteraff
export VM_EXTRA="$vm/smoke.sh:/smoke.sh $here/../masteraff:/usr/bin/masteraff"
"$vm/prepare"

n=0
for topo in ${VM_TOPOLOGIES:-kunpeng epyc-nps4 2s 1s}; do
    start=${EPOCHREALTIME/./}
    # A guest that never reaches the script (an emulated boot that stalls,
    # seen once in many runs) is booted once more; a script that started
    # and failed is not.
    for attempt in 1 2; do
        rc=0
        out=$(VM_TIMEOUT=${VM_TIMEOUT:-150} "$vm/run" "$topo" "$vm/scenarios.sh" \
            2>"$work/console") || rc=$?
        [[ $rc -eq 124 && -z $out ]] || break
        echo "# $topo: the VM printed nothing in ${VM_TIMEOUT:-150} s (attempt $attempt)"
    done
    ms=$(((${EPOCHREALTIME/./} - start) / 1000))

    plan='' inner=0
    while IFS= read -r line; do
        if [[ $line =~ ^(not\ )?ok\ [0-9]+(\ -)?\ ?(.*)$ ]]; then
            n=$((n + 1)) inner=$((inner + 1))
            echo "${BASH_REMATCH[1]}ok $n - $topo: ${BASH_REMATCH[3]}"
        elif [[ $line =~ ^1\.\.([0-9]+) ]]; then
            plan=${BASH_REMATCH[1]}
        else
            echo "$line"
        fi
    done <<<"$out"

    n=$((n + 1))
    if [[ $rc -eq 0 && $plan == "$inner" ]]; then
        echo "ok $n - $topo: all $inner tests ran, VM exited cleanly"
    else
        echo "not ok $n - $topo: ran $inner of '${plan:-no plan}', run status $rc"
        sed 's/^/# console: /' "$work/console" | tail -40
    fi
    printf '# %s: %d.%03d s (prepare + boot + tests)\n' "$topo" $((ms / 1000)) $((ms % 1000))
done
echo "1..$n"
