# Sourced first, before lib.sh, by a test that needs a private mount
# namespace (unshare -m): runs the test again inside one, or skips it
# where none can be made. Inside, the variable that says so is dropped,
# so that what the test starts does not inherit it.
if [ -z "${MASTERAFF_PRIVATE_NS:-}" ]; then
    if ! why=$(unshare -m --propagation private true 2>&1); then
        echo "1..0 # SKIP no private mount namespace: ${why:-unshare failed}"
        exit 0
    fi
    MASTERAFF_PRIVATE_NS=1 exec unshare -m --propagation private bash "$0" "$@"
fi
unset MASTERAFF_PRIVATE_NS
