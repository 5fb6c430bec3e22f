#!/usr/bin/env bash
# examples/docker/Dockerfile as shipped, built and run with podman. No
# registry is reachable where the tests run: the base images its FROM
# lines name are made here, debootstrap from this machine's own apt
# source, and imported under those names (nginx:stable-bookworm stands
# for the official image: Debian's nginx-light plus the official image's
# conventions). They are kept in podman's store and made again only when
# their recipe (this file's functions that make them, the mirror) changes;
# debootstrap's output is cached as a tarball in
# ${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/images.
. "$(dirname "$0")/lib.sh"
. "$SRCDIR/test/debian.sh"
PORT=18415
DOCKERFILE=$SRCDIR/examples/docker/Dockerfile
CACHE=${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/images
IMAGE=localhost/masteraff-test/nginx-masteraff:latest
IMAGE_TRIXIE=localhost/masteraff-test/nginx-masteraff:trixie

[ "$(id -u)" = 0 ] || skip_all "not root (podman's store, debootstrap)"
for p in podman runc debootstrap; do
    command -v "$p" >/dev/null || skip_all "no $p"
done

containers=() C=""
image_cleanup() {
    local c
    for c in "${containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1; done
    rm -rf "$T"
}
trap image_cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# crun refuses this host's mixed cgroup setup; raising the nofile limit
# above the hard one needs CAP_SYS_RESOURCE, which CI lacks.
cat >"$T/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
export CONTAINERS_CONF=$T/containers.conf

MIRROR=$(apt_mirror)
[ -n "$MIRROR" ] || skip_all "no Debian mirror in /etc/apt's sources"

# A trivial container first: one static program as its root.
mkdir -p "$T/tiny"
echo 'int main(void) { return 0; }' | cc -static -x c -o "$T/tiny/true" - ||
    skip_all "cc cannot link a static program"
podman run --rm --network none --rootfs "$T/tiny" /true >/dev/null 2>"$T/err" ||
    skip_all "podman cannot run a container here: $(tail -1 "$T/err")"

# ---- base images ----

# The stand-in for the official nginx image: what the Dockerfile relies
# on (Debian bookworm, apt, nginx in /usr/sbin, the error log on stderr,
# CMD nginx -g 'daemon off;', STOPSIGNAL SIGQUIT, the entrypoint script
# that runs /docker-entrypoint.d/ then execs its arguments).
nginx_tree() {
    local dir=$1
    cp /etc/resolv.conf "$dir/etc/resolv.conf"
    printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
    chmod +x "$dir/usr/sbin/policy-rc.d"
    chroot "$dir" sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends nginx-light' >"$T/nginx-tree.log" 2>&1 || {
        sed 's/^/#   /' "$T/nginx-tree.log" | tail -20 >&2; return 1; }
    rm -f "$dir/usr/sbin/policy-rc.d" "$dir/etc/nginx/sites-enabled/default"
    rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/archives/*.deb
    ln -sf /dev/stdout "$dir/var/log/nginx/access.log"
    ln -sf /dev/stderr "$dir/var/log/nginx/error.log"
    mkdir -p "$dir/docker-entrypoint.d"
    cat >"$dir/docker-entrypoint.sh" <<'SH'
#!/bin/sh
set -e
for f in /docker-entrypoint.d/*.sh; do [ -x "$f" ] && "$f"; done
exec "$@"
SH
    chmod +x "$dir/docker-entrypoint.sh"
}
NGINX_CHANGES=(--change 'ENTRYPOINT ["/docker-entrypoint.sh"]'
    --change 'CMD ["nginx", "-g", "daemon off;"]'
    --change 'STOPSIGNAL SIGQUIT' --change 'EXPOSE 80')

# base_image NAME [STEP...]: NAME (as FROM spells it): the minbase tree
# with each STEP function run on it, made unless an image of the recipe's
# hash is in the store already.
base_image() {
    local name=$1 hash dir tar; shift
    hash=$( { declare -f minbase_tarball "$@"; echo "$MIRROR $SUITE ${NGINX_CHANGES[*]}"; } |
        sha256sum | cut -c1-16)
    local id=localhost/masteraff-test/base-${name//[:\/]/-}:$hash
    if ! podman image exists "$id"; then
        tar=$(minbase_tarball "$(minbase_key)") ||
            return 1
        dir=$T/base; rm -rf "$dir"; mkdir -p "$dir"
        tar -C "$dir" -xf "$tar" || return 1
        local changes=()
        for step in "$@"; do
            "$step" "$dir" || return 1
            [ "$step" = nginx_tree ] && changes=("${NGINX_CHANGES[@]}")
        done
        tar -C "$dir" -c . | podman import -q "${changes[@]}" - "$id" >/dev/null || return 1
        rm -rf "$dir"
    fi
    podman tag "$id" "docker.io/library/$name"
}

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

# build_image TAG [BUILD-ARG...]: examples/docker/Dockerfile as shipped,
# built as TAG; the last run's image of that tag removed when it is
# replaced (its layers stay cached in the build stage's images).
build_image() {
    local tag=$1 start=$SECONDS old_image; shift
    old_image=$(podman image inspect -f '{{.Id}}' "$tag" 2>/dev/null)
    podman build -q --pull=never "$@" -f "$DOCKERFILE" -t "$tag" "$SRCDIR" >"$T/build.log" 2>&1
    ok $? "podman build --pull=never of examples/docker/Dockerfile as shipped${*:+ ($*)}" ||
        sed 's/^/#   /' "$T/build.log" | tail -20
    [ -n "$old_image" ] && [ "$old_image" != "$(podman image inspect -f '{{.Id}}' "$tag" 2>/dev/null)" ] &&
        podman rmi "$old_image" >/dev/null 2>&1
    diag "image build: $((SECONDS - start)) s"
}

base_images bookworm
build_image "$IMAGE"

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

# Docker's default seccomp profile allows move_pages and migrate_pages to
# a container with CAP_SYS_NICE; podman's refuses them always. This is
# podman's with Docker's rule for those two.
docker_like_seccomp() {
    perl -MJSON::PP -e '
        my $p = JSON::PP->new->decode(do { local $/; <STDIN> });
        my %nice = map { $_ => 1 } qw(move_pages migrate_pages);
        for my $s (@{$p->{syscalls}}) {
            $s->{names} = [grep { !$nice{$_} } @{$s->{names}}];
        }
        $p->{syscalls} = [grep { @{$_->{names}} } @{$p->{syscalls}}];
        push @{$p->{syscalls}}, {names => [sort keys %nice], action => "SCMP_ACT_ALLOW",
            includes => {caps => ["CAP_SYS_NICE"]}, excludes => {}};
        print JSON::PP->new->encode($p)' </usr/share/containers/seccomp.json
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
build_image "$IMAGE_TRIXIE" --build-arg DEBIAN_RELEASE=trixie --build-arg NGINX_IMAGE=nginx:stable-trixie
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
