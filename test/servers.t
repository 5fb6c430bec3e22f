#!/usr/bin/env bash
# The matrix of real servers: every nginx-family tarball in
# $MASTERAFF_NGINX_SRC, built with its own defaults and the way nginx.org's
# packages build (test/servers/build, cached), each checked with the
# library: test/predict.t's table against that server (the server is the
# oracle), and test/servers/lifecycle (started without -c, with -p, -c, -g;
# placed at start and confirmed; respawn, reload, binary upgrade).
# MASTERAFF_SERVER_JOBS (default 4) servers are checked at a time.
. "$(dirname "$0")/lib.sh"
[ -n "${MASTERAFF_NGINX_SRC:-}" ] ||
    skip_all "MASTERAFF_NGINX_SRC is not set (a directory of nginx source tarballs)"
[ -d "$MASTERAFF_NGINX_SRC" ] || skip_all "no directory $MASTERAFF_NGINX_SRC"
why=$(no_namespace) && skip_all "no private mount namespace here ($why)"
need_programs predict mktree
JOBS=${MASTERAFF_SERVER_JOBS:-4}
export MASTERAFF_MINIMAL_SERVER=1
BASE_PORT=18300

start=$SECONDS
entries=$("$SRCDIR/test/servers/build")
ok $? "every tarball in $MASTERAFF_NGINX_SRC builds, both flavours ($((SECONDS - start)) s)"
[ -n "$entries" ] || { done_testing; exit; }

# check N ENTRY: both scripts against one build, their TAP in $T/N.*.
check() {
    local n=$1 entry=$2 exe prefix conf
    # shellcheck disable=SC1091
    exe=$(. "$entry/info"; echo "${exe/@/$entry}")
    prefix=$(. "$entry/info"; echo "$prefix")
    conf=$(. "$entry/info"; echo "$conf")
    NGINX=$exe PORT=$((BASE_PORT + 2 * n)) "$SRCDIR/test/predict.t" \
        >"$T/$n.predict" 2>&1
    echo "exit $?" >>"$T/$n.predict"
    NGINX=$exe PORT=$((BASE_PORT + 2 * n + 1)) SERVER_CONF=$conf \
        SERVER_PREFIX=$prefix unshare -m "$SRCDIR/test/servers/lifecycle" \
        >"$T/$n.lifecycle" 2>&1
    echo "exit $?" >>"$T/$n.lifecycle"
}

# relay_tap LABEL FILE: the TAP of one script as this test's own.
relay_tap() {
    local label=$1 line n=0 status=
    while IFS= read -r line; do
        case $line in
        "ok "*) ok 0 "$label: ${line#* - }"; n=$((n + 1)) ;;
        "not ok "*) ok 1 "$label: ${line#* - }"; n=$((n + 1)) ;;
        "exit "*) status=${line#exit } ;;
        "1.."*) ;;
        *) diag "$label: $line" ;;
        esac
    done <"$2"
    [ "$status" = 0 ] && [ "$n" -gt 0 ]
    ok $? "$label: exits 0 after $n checks (status $status)"
}

start=$SECONDS
n=0
for entry in $entries; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    check $n "$entry" &
    n=$((n + 1))
done
wait
diag "checked $n builds in $((SECONDS - start)) s, $JOBS at a time"

n=0
for entry in $entries; do
    label=$(. "$entry/info"; echo "$name $version $flavour")
    relay_tap "$label: predict" "$T/$n.predict"
    relay_tap "$label: lifecycle" "$T/$n.lifecycle"
    n=$((n + 1))
done
done_testing
