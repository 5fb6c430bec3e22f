# shellcheck shell=bash disable=SC2154 # vm and work come from the test
# Sourced by test/vm.t and test/vm-arm64.t (bash): relay TOPOLOGY...
# boots each topology with test/vm/run on test/vm/scenarios.sh (after
# test/vm/smoke.sh's checks of the VM itself), relays the TAP renumbered and
# prefixed with the topology, plus one test per VM that its plan was
# complete and the VM ended cleanly, and prints the plan. Needs $vm (the
# test/vm directory) and $work (a scratch directory); VM_EXTRA and
# MASTERAFF_LIB as test/vm/prepare takes them.

relay() {
    local n=0 topo start attempt rc out ms plan inner line rounds limit
    # The limit is for a guest that hangs, never a measure of speed: an
    # emulated guest on a busy host is slow, and each busy round
    # (scenarios.sh's step 11, ma_busy_rounds=) takes about a minute more
    # on a quiet host, several times that while other jobs share its CPUs.
    rounds=$(sed -n 's/.*ma_busy_rounds=\([0-9]*\).*/\1/p' <<<"${VM_APPEND:-}")
    limit=${VM_TIMEOUT:-$((900 + 300 * ${rounds:-1}))}
    for topo in "$@"; do
        start=${EPOCHREALTIME/./}
        # A guest that never reaches the script (an emulated boot that
        # stalls, seen once in many runs; run stops it after
        # VM_BOOT_TIMEOUT) is booted once more; a script that started and
        # failed is not.
        for attempt in 1 2; do
            rc=0
            out=$(VM_TIMEOUT=$limit "$vm/run" "$topo" "$vm/scenarios.sh" \
                2>"$work/console") || rc=$?
            [[ $rc -eq 124 && -z $out ]] || break
            echo "# $topo: the VM printed nothing (attempt $attempt): $(tail -n 1 "$work/console")"
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
        printf '# %s: %d.%03d s (prepare + boot + tests)\n' "$topo" \
            $((ms / 1000)) $((ms % 1000))
    done
    echo "1..$n"
}
