#!/usr/bin/env bash
# test/vm/run stops a guest that has not started its script within
# VM_BOOT_TIMEOUT (an emulated boot that stalls): status 124 and nothing on
# stdout, which test/vm/relay.sh takes for a boot to try once more; one
# line that says why; no qemu left. The stall: the kernel runs busybox's
# sleep for PID 1 instead of the image's /init (the words of the command
# line the kernel does not take are its arguments), so the script never
# starts, however fast the boot.
. "$(dirname "$0")/lib.sh"

command -v qemu-system-x86_64 >/dev/null || skip_all "no qemu"

printf '#!/bin/sh\necho 1..0\n' >"$T/script.sh"
probe="ma_boot_probe=$$"
rc=0
VM_BOOT_TIMEOUT=3 VM_TIMEOUT=120 VM_APPEND="$probe rdinit=/bin/sleep 100000" \
    "$SRCDIR/test/vm/run" 1s "$T/script.sh" >"$T/out" 2>"$T/err" || rc=$?
is "$rc" 124 "run exits with 124 when the guest has not started the script in time"
is "$(cat "$T/out")" "" "it prints nothing on stdout, so relay.sh boots the guest again"
grep -q "run: 1s: the VM did not start the script within 3 s" "$T/err"
ok $? "it says why on stderr" || sed 's/^/#   /' "$T/err" | tail -5
pgrep -f "$probe" >/dev/null
ok $((!$?)) "no qemu of that guest is left"

done_testing
