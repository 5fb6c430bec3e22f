#!/usr/bin/env bash
# examples/docker/Dockerfile without Docker: checks the Dockerfile's syntax
# and what it promises (the official nginx image on bookworm, the library
# copied where LD_PRELOAD points), runs its build stage's commands on the
# sources, then runs what the container runs: nginx -g 'daemon off;',
# exec'd by a shell as the image's entrypoint does, as PID 1 of its own pid
# namespace, with the Dockerfile's ENV and the library its build stage
# built, on a fake sysfs tree where CPU 0 and CPU 1 are two packages. The
# master (PID 1) must follow worker 0 to CPU 1, serve, and stop cleanly on
# SIGQUIT (the image's STOPSIGNAL, what `docker stop` sends).
. "$(dirname "$0")/lib.sh"
PORT=18402
DOCKERFILE=$SRCDIR/examples/docker/Dockerfile

[ "$(id -u)" = 0 ] || skip_all "not root (unshare --pid)"
command -v unshare >/dev/null || skip_all "no unshare (util-linux)"
[ -f "$DOCKERFILE" ] || { echo "Bail out! no $DOCKERFILE"; exit 1; }
trap 'exit 1' INT TERM HUP PIPE

# nginx's pid file says 1 here: lib.sh's stop_nginx must never read it (it
# would signal this machine's init). The container goes by its host pids.
cur_unshare='' cur_master=''
container_cleanup() {
    [ -n "$cur_master" ] && kill -9 "$cur_master" 2>/dev/null
    [ -n "$cur_unshare" ] && kill -9 "$cur_unshare" 2>/dev/null
    rm -rf "$T"
}
trap container_cleanup EXIT
. "$SRCDIR/test/dockerfile.sh"

# ---- the Dockerfile ----

problems=$(dockerfile_lint "$DOCKERFILE")
is "$problems" "" "the Dockerfile's syntax is sound (instructions, stages, COPY --from, ENV, ARG)"

# The lint can fail: a broken copy of the Dockerfile.
sed -e 's/^COPY --from=build/COPY --from=builder/' -e 's/^ENV MASTERAFF_LOG=notice/ENVV MASTERAFF_LOG=notice/' \
    "$DOCKERFILE" >"$T/Dockerfile.broken"
printf 'RUN make \\\n' >>"$T/Dockerfile.broken"
is "$(dockerfile_lint "$T/Dockerfile.broken" | wc -l | tr -d ' ')" 3 \
    "the lint finds the 3 faults of a broken copy (COPY --from, ENVV, a dangling continuation)"

# Global ARG defaults, for the FROM lines that use them: FROM sees no
# other (podman and Docker's legacy builder predefine none there).
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
declare -A args=()
while read -r name value; do args[$name]=$value; done < <(
    logical_lines "$DOCKERFILE" | awk 'toupper($1) == "FROM" {exit}
        toupper($1) == "ARG" && $2 ~ /=/ {i = index($2, "="); print substr($2, 1, i - 1), substr($2, i + 1)}')

froms=$(logical_lines "$DOCKERFILE" | awk 'toupper($1) == "FROM" {for (i = 2; i <= NF; i++) if ($i !~ /^--/) {print $i; break}}')
build_image=$(expand "$(sed -n 1p <<<"$froms")")
final_image=$(expand "$(tail -1 <<<"$froms")")
! grep -q '\$' <<<"$build_image $final_image"
ok $? "every FROM names an image with the ARGs declared before the first FROM ($build_image, $final_image)"
[[ $build_image == debian:bookworm* ]]
ok $? "the build stage is Debian bookworm ($build_image)"
[[ $final_image =~ ^nginx:.*bookworm$ ]]
ok $? "the image is the official nginx image on bookworm ($final_image)"

final=$(stage_lines last)
envs=$(stage_env "$final")
preload=$(sed -n 's/^LD_PRELOAD=//p' <<<"$envs")
is "$preload" /usr/lib/libmasteraff.so "ENV LD_PRELOAD is /usr/lib/libmasteraff.so, the same on every architecture"
is "$(sed -n 's/^MASTERAFF_LOG=//p' <<<"$envs")" notice "ENV MASTERAFF_LOG=notice"
awk 'toupper($1) == "RUN" && / apt-get install / && / libnuma1( |$)/' <<<"$final" | grep -q .
ok $? "the image installs libnuma1 (the library opens libnuma.so.1 to move memory)"
# The build stage's out/ tree lands on /: the library must be where
# LD_PRELOAD points in it.
read -r _ from src dest <<<"$(awk 'toupper($1) == "COPY" && $2 ~ /^--from=/' <<<"$final")"
is "${from#--from=} $dest" "build /" "the build stage's tree is copied onto the image's root"

# ---- the build stage, run on the sources ----

stage=$T/stage
run_stage "$stage"
ok $? "the build stage's COPY and RUN work on the sources"
is "$(readlink "$stage${src%/}$preload")" "$multiarch/libmasteraff.so" \
    "$preload links to the library in the multiarch directory ($multiarch)"
built=$stage${src%/}/usr/lib/$multiarch/libmasteraff.so
[ -f "$built" ] && nm -D --defined-only "$built" | grep -qw sched_setaffinity
ok $? "the build stage makes the library where LD_PRELOAD points (${src%/}/usr/lib/$multiarch/libmasteraff.so)"

# ---- the container: nginx as PID 1 of a pid namespace ----

make_twopkg
write_conf "10 01"

# The container's environment: the image's PATH and the Dockerfile's ENV,
# LD_PRELOAD pointing at the library the build stage made.
cenv=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    MASTERAFF_SYSFS="$T/sys")
while IFS= read -r e; do
    [ -n "$e" ] || continue
    case $e in
    LD_PRELOAD=*) cenv+=("LD_PRELOAD=$built") ;;
    *) cenv+=("$e") ;;
    esac
done <<<"$envs"

# maps_file PID FILE: whether PID maps FILE, told by its device and inode
# (/proc/PID/map_files, root only), not by the path in /proc/PID/maps,
# which is not FILE's where / is not the real root (a chroot, a
# container's build tree).
maps_file() {
    local want f mapped
    want=$(stat -L -c '%d:%i' "$2") || return 1
    # Read whole before grep -q: a writer cut short by it would fail the
    # pipeline (pipefail).
    mapped=$(for f in /proc/"$1"/map_files/*; do stat -L -c '%d:%i' "$f" 2>/dev/null; done)
    grep -qx "$want" <<<"$mapped"
}

nspid() { awk '/^NSpid/ {print $NF}' "/proc/$1/status" 2>/dev/null; }

# container with|without: runs the container and checks it.
container() {
    local how=$1 u m w0 w1 rc e=("${cenv[@]}")
    [ "$how" = with ] || e=("${e[@]/#LD_PRELOAD=*/LD_PRELOAD=}")
    : >"$T/error.log"
    # The image's ENTRYPOINT is a shell script ending in `exec "$@"`.
    env -i "${e[@]}" unshare --pid --fork --mount-proc --kill-child \
        sh -c 'exec "$@"' docker-entrypoint \
        "$NGINX" -c "$T/nginx.conf" -g 'daemon off;' 2>"$T/stderr" &
    u=$!
    cur_unshare=$u
    wait_for "m=\$(pgrep -P $u) && grep -q 'nginx: master' /proc/\$m/cmdline 2>/dev/null"
    m=$(pgrep -P "$u")
    cur_master=$m
    is "$(nspid "$m") $(cat "$T/nginx.pid" 2>/dev/null)" "1 1" \
        "$how the library: nginx's master is PID 1 of its namespace (host pid $m)"
    wait_for "[ \$(children_of $m worker | wc -l) -eq 2 ]"
    read -r w0 w1 <<<"$(children_of "$m" worker | tr '\n' ' ')"
    wait_for "[ \"\$(cpus_of $w0)\" = 1 ] && [ \"\$(cpus_of $w1)\" = 0 ]"
    is "$(cpus_of "$w0") $(cpus_of "$w1")" "1 0" "$how the library: workers 0 and 1 pin to CPUs 1 and 0"
    if [ "$how" = with ]; then
        wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
        is "$(cpus_of "$m")" 1 "with the library: the master (PID 1) follows worker 0 to CPU 1"
        grep -Eq "\[notice\] 1#[0-9]+: masteraff: master 1 stays on CPUs 1 \(package 1\), placed there at start for worker $(nspid "$w0") on CPU 1," "$T/error.log"
        ok $? "with the library: the log line names PID 1 and worker 0 by their namespace pids" ||
            grep masteraff "$T/error.log" | sed 's/^/#   /'
        maps_file "$m" "$built"
        rc=$?
        ok $rc "with the library: the master maps the library the build stage made"
        [ "$rc" = 0 ] || grep libmasteraff "/proc/$m/maps" | sed 's/^/#   /'
        ! maps_file "$m" "$LIB"
        ok $? "with the library: ... and not the tree's own, another file (the comparison tells files apart)"
    else
        is "$(cpus_of "$m")" 0-1 "without the library: the master stays on CPUs 0-1"
    fi
    serves
    ok $? "$how the library: nginx serves on 127.0.0.1:$PORT"
    kill -QUIT "$m"
    wait_for "gone $m"
    ok $? "$how the library: the master exits on SIGQUIT"
    wait "$u"
    rc=$?
    is "$rc" 0 "$how the library: exit status 0 (unshare passes on nginx's)"
    ! kill -0 "$w0" 2>/dev/null && ! kill -0 "$w1" 2>/dev/null
    ok $? "$how the library: no worker is left"
    grep -q '\[notice\] 1#1: exit$' "$T/error.log"
    ok $? "$how the library: nginx logs its orderly exit"
    is "$(grep -E '\[(alert|emerg|crit)\]' "$T/error.log")" "" "$how the library: no alert, emerg or crit in error.log"
    is "$(cat "$T/stderr")" "" "$how the library: nothing on stderr"
    rm -f "$T/nginx.pid"
    cur_unshare='' cur_master=''
}

if why=$(no_namespace --pid); then
    skip "no pid namespace with its own /proc here ($why)" "nginx as PID 1 of its namespace, with and without the library"
else
    container without
    container with
fi
done_testing
