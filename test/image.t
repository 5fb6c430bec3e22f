#!/usr/bin/env bash
# examples/docker/Dockerfile as shipped, built and run with podman. The
# base images its FROM lines name are made here (test/images.sh):
# nginx:stable-bookworm stands for the official image, Debian's
# nginx-light plus the official image's conventions.
. "$(dirname "$0")/lib.sh"
PORT=18415
DOCKERFILE=$SRCDIR/examples/docker/Dockerfile
IMAGE=localhost/masteraff-test/nginx-masteraff:latest
IMAGE_TRIXIE=localhost/masteraff-test/nginx-masteraff:trixie

. "$SRCDIR/test/images.sh"

containers=() C=""
image_cleanup() {
    local c
    for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1; done
    rm -rf "$T"
}
trap image_cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# base_images SUITE: debian:SUITE and nginx:stable-SUITE.
base_images() {
    local start=$SECONDS
    SUITE=$1
    base_image "debian:$SUITE"
    ok $? "base image debian:$SUITE (debootstrap minbase from $MIRROR)"
    base_image "nginx:stable-$SUITE" nginx_tree
    ok $? "base image nginx:stable-$SUITE (minbase + nginx-light, the official image's conventions)"
    diag "base images of $SUITE: $((SECONDS - start)) s"
}
base_images bookworm

# ---- the image, as shipped ----

build_image "$DOCKERFILE" "$IMAGE"

# write_image_conf MASK...: one worker per CPU mask (worker 0 first).
write_image_conf() {
    cat >"$T/nginx.conf" <<CONF
worker_processes $#;
worker_cpu_affinity $*;
error_log stderr notice;
events { worker_connections 64; }
http {
    access_log off;
    server { listen 80; location / { return 200 "hello\n"; } }
}
CONF
}

# run_image NAME OPTIONS...: starts a container of the image with the
# nginx.conf, the port published, and waits for the masteraff: line.
run_image() {
    local name=masteraff-test-$1-$$; shift
    containers+=("$name")
    podman run -d --name "$name" -p "127.0.0.1:$PORT:80" \
        -v "$T/nginx.conf:/etc/nginx/nginx.conf:ro" "$@" "${RUN_IMAGE:-$IMAGE}" >/dev/null 2>"$T/run.err" ||
        { sed 's/^/#   /' "$T/run.err"; return 1; }
    C=$name
    # grep without -q reads all: podman logs must not die of SIGPIPE.
    wait_for 'podman logs "$C" 2>&1 | grep "masteraff: master" >/dev/null'
}

# logs: the container's log, in $T/log.
logs() { podman logs "$C" >"$T/log" 2>&1; }

# stop_clean WHAT: podman stop (the image's STOPSIGNAL, SIGQUIT), then
# its exit code and any alert in its log.
stop_clean() {
    podman stop -t 20 "$C" >/dev/null 2>&1
    is "$(podman inspect -f '{{.State.ExitCode}}' "$C")" 0 "$1: podman stop (SIGQUIT): exit code 0"
    logs
    grep -E '\[(alert|emerg)\]' "$T/log" | sed 's/^/#   /'
    ! grep -qE '\[(alert|emerg)\]' "$T/log"
    ok $? "$1: no [alert] or [emerg] in the log"
}

docker_like_seccomp >"$T/seccomp.json"
ok $? "a seccomp profile with Docker's rule for move_pages (podman's otherwise)"

line_of() { podman logs "$C" 2>&1 | grep 'masteraff: master' | tail -1; }

# ---- Docker's profile with SYS_NICE: it serves, pages move ----

write_image_conf 01 10
run_image nice --cap-add SYS_NICE --security-opt "seccomp=$T/seccomp.json"
ok $? "the container starts and logs its masteraff: line (podman logs)"
diag "$(line_of)"
curl -sf "http://127.0.0.1:$PORT/" | grep -q hello
ok $? "it serves on the published port"
line_of | grep -Eq ': master 1 stays on CPUs 0-1 \(package 0\), [a-z ]+ for worker [0-9]+ on CPU 0[ ,].*; moved [0-9]+ pages to node 0 in [0-9]+us'
ok $? "with SYS_NICE (Docker's profile) the memory line names pages moved"
logs
! grep -q libnuma "$T/log"
ok $? "... and no missing libnuma (the image ships libnuma1)"
podman exec "$C" masteraff status --check >"$T/status" 2>&1
ok $? "masteraff status --check exits 0 inside" || sed 's/^/#   /' "$T/status"
grep -q "shared=?" "$T/status" || podman exec "$C" masteraff status 1 >"$T/status" 2>&1
grep -Fq "master's memory: not counted (map_files: Operation not permitted; opening /proc/PID/map_files takes CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE in the host's user namespace" "$T/status"
ok $? "status says what keeps it from counting the memory: map_files' capability" ||
    sed 's/^/#   /' "$T/status"
# Given CAP_CHECKPOINT_RESTORE, map_files opens: then move_pages, refused
# by podman's own profile, is the reason.
stop_clean "SYS_NICE"

# ---- without SYS_NICE, and podman's profile: the line says why ----

run_image nonice --security-opt "seccomp=$T/seccomp.json"
ok $? "without SYS_NICE: the container starts"
diag "$(line_of)"
# podman's profile answers what it does not allow with ENOSYS (Docker's
# with EPERM).
line_of | grep -Fq "; memory not moved to node 0 (move_pages: Function not implemented; a seccomp filter refuses it: Docker's default profile without CAP_SYS_NICE, podman's always)"
ok $? "without SYS_NICE the memory line says why no page moved"
stop_clean "without SYS_NICE"

run_image podman --cap-add SYS_NICE --cap-add CHECKPOINT_RESTORE
ok $? "podman's own profile: the container starts"
line_of | grep -Fq "; memory not moved to node 0 (move_pages: Operation not permitted; a seccomp filter refuses it"
ok $? "podman's profile refuses move_pages even with SYS_NICE, and the line says so"
podman exec "$C" masteraff status 1 >"$T/status" 2>&1
grep -Fq "master's memory: not counted (move_pages: Operation not permitted; a seccomp filter refuses the system call" "$T/status"
ok $? "status, given map_files' capability, names the seccomp filter" || sed 's/^/#   /' "$T/status"
stop_clean "podman's profile"

# ---- a cpuset without CPU 0 ----

# The container may use CPU 1 only; worker 0 pins there. The master,
# started on CPU 1, stays within the cpuset: on this machine's one
# package (CPUs 0-1) that is CPU 1, not the package, and on the fake
# two-package tree (one CPU each) package 1. A library that ignored the
# master's original mask would say CPUs 0-1 in the first case (the
# kernel would clamp the mask, the line would not).
write_image_conf 10 10
run_image cpuset --cpuset-cpus 1 --cap-add SYS_NICE --security-opt "seccomp=$T/seccomp.json"
ok $? "--cpuset-cpus 1: the container starts"
diag "$(line_of)"
line_of | grep -Eq ': master 1 stays on CPUs 1 \(package [0-9]+\), placed there at start for worker [0-9]+ on CPU 1, confirmed'
ok $? "the master stays on CPU 1, its package within the cpuset, and says so"
host_master=$(podman inspect -f '{{.State.Pid}}' "$C")
is "$(cpus_of "$host_master")" 1 "the master (host pid $host_master) runs on CPU 1"
podman exec "$C" masteraff status --check >"$T/status" 2>&1
ok $? "status --check exits 0 inside the cpuset" || sed 's/^/#   /' "$T/status"
curl -sf "http://127.0.0.1:$PORT/" | grep -q hello
ok $? "it serves"
stop_clean "cpuset"

"$SRCDIR/test/mktree" twopkg "$T/sys"
run_image twopkg --cpuset-cpus 1 -v "$T/sys:/masteraff-sys:ro" -e MASTERAFF_SYSFS=/masteraff-sys \
    --cap-add SYS_NICE --security-opt "seccomp=$T/seccomp.json"
ok $? "--cpuset-cpus 1, two packages: the container starts"
diag "$(line_of)"
line_of | grep -Eq ': master 1 stays on CPUs 1 \(package 1\), placed there at start for worker [0-9]+ on CPU 1, confirmed'
ok $? "the master stays on package 1 (CPU 1) of the fake tree"
podman exec -e MASTERAFF_SYSFS=/masteraff-sys "$C" masteraff status --check >"$T/status" 2>&1
ok $? "status --check exits 0, two packages" || sed 's/^/#   /' "$T/status"
grep -q "package 1" "$T/status"
ok $? "status reads the fake tree (package 1)" || sed 's/^/#   /' "$T/status"
stop_clean "two packages"

# ---- Debian 13 (trixie): the same file, both stages on trixie ----

# Its essential checks: it serves, logs its line (placed at start on the
# two-package tree), status --check passes inside, it stops cleanly.
base_images trixie
build_image "$DOCKERFILE" "$IMAGE_TRIXIE" --build-arg DEBIAN_RELEASE=trixie --build-arg NGINX_IMAGE=nginx:stable-trixie
RUN_IMAGE=$IMAGE_TRIXIE
podman run --rm --network none "$RUN_IMAGE" sh -c '. /etc/os-release && echo "$VERSION_CODENAME $(nginx -v 2>&1)"' >"$T/version" 2>&1
diag "$(cat "$T/version")"
grep -Eq '^trixie nginx version: nginx/1\.2[6-9]' "$T/version"
ok $? "the trixie image runs Debian 13's nginx (1.26 or later)"
write_image_conf 10 01
run_image trixie -v "$T/sys:/masteraff-sys:ro" -e MASTERAFF_SYSFS=/masteraff-sys \
    --cap-add SYS_NICE --security-opt "seccomp=$T/seccomp.json"
ok $? "trixie: the container starts and logs its masteraff: line"
diag "$(line_of)"
line_of | grep -Eq ': master 1 stays on CPUs 1 \(package 1\), placed there at start for worker [0-9]+ on CPU 1, confirmed.*; moved [0-9]+ pages to node 0'
ok $? "trixie: placed at start on package 1 with worker 0, confirmed, pages moved"
curl -sf "http://127.0.0.1:$PORT/" | grep -q hello
ok $? "trixie: it serves on the published port"
podman exec -e MASTERAFF_SYSFS=/masteraff-sys "$C" masteraff status --check >"$T/status" 2>&1
ok $? "trixie: status --check exits 0 inside" || sed 's/^/#   /' "$T/status"
stop_clean "trixie"

done_testing
