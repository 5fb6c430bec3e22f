#!/usr/bin/env bash
# libmasteraff on arm64 kernels: Debian's arm64 kernel, nginx and numactl
# under qemu-system-aarch64 (TCG) in the Kunpeng 920 shape, described by a
# device tree and by UEFI + ACPI (test/vm/run), with the library
# cross-built by aarch64-linux-gnu-gcc (make arm64). The same scenarios as
# test/vm.t, relayed the same way.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
vm=$here/vm

for need in qemu-system-aarch64 aarch64-linux-gnu-gcc; do
    if ! command -v $need >/dev/null; then
        echo "1..0 # SKIP no $need"
        exit 0
    fi
done
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "1..0 # SKIP arm64 is not a dpkg architecture here (dpkg --add-architecture arm64)"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s -C "$here/.." arm64 >&2
build=$here/../build-arm64
# nonuma (see test/vm.t), cross-built as the library is.
aarch64-linux-gnu-gcc -O2 -Wall -Wextra -Werror -o "$work/nonuma" "$here/nonuma.c"
export VM_ARCH=arm64 MASTERAFF_LIB=$build/libmasteraff.so
export VM_EXTRA="$vm/smoke.sh:/smoke.sh $build/masteraff:/usr/bin/masteraff
    $here/../scripts/crosschip:/usr/bin/crosschip $work/nonuma:/usr/bin/nonuma"
"$vm/prepare"

. "$vm/relay.sh"
topos="arm64-kunpeng"
# UEFI firmware for the ACPI boot, from qemu-efi-aarch64.
if [[ -r /usr/share/qemu-efi-aarch64/QEMU_EFI.fd ]]; then
    topos+=" arm64-kunpeng-acpi"
else
    echo "# no /usr/share/qemu-efi-aarch64/QEMU_EFI.fd: no ACPI guest"
fi
# shellcheck disable=SC2086 # a list of names
relay ${VM_TOPOLOGIES:-$topos}
