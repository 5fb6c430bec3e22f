#!/usr/bin/env bash
# libmasteraff on real kernels: boots Debian's kernel under qemu with each
# emulated x86 topology (test/vm/run) and runs test/vm/scenarios.sh there
# (after test/vm/smoke.sh's checks of the VM itself). Relays the TAP,
# renumbered and prefixed with the topology, plus one test per VM that its
# plan was complete and the VM ended cleanly. test/vm-arm64.t does the same
# with arm64 guests.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/vm

if ! command -v qemu-system-x86_64 >/dev/null; then
    echo "1..0 # SKIP no qemu"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s -C "$here/.." libmasteraff.so masteraff
# nonuma: the NUMA system calls refused as under Docker's default seccomp
# profile (scenarios.sh's early placement).
cc -O2 -Wall -Wextra -Werror -o "$work/nonuma" "$here/nonuma.c"
export VM_EXTRA="$vm/smoke.sh:/smoke.sh $here/../masteraff:/usr/bin/masteraff
    $here/../scripts/crosschip:/usr/bin/crosschip $work/nonuma:/usr/bin/nonuma"
"$vm/prepare"

. "$vm/relay.sh"
# shellcheck disable=SC2086 # a list of names
relay ${VM_TOPOLOGIES:-kunpeng epyc-nps4 2s 1s}
