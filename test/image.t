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
PORT=18415
DOCKERFILE=$SRCDIR/examples/docker/Dockerfile
CACHE=${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/images
IMAGE=localhost/masteraff-test/nginx-masteraff:latest
SUITE=bookworm

[ "$(id -u)" = 0 ] || skip_all "not root (podman's store, debootstrap)"
for p in podman runc debootstrap; do
    command -v "$p" >/dev/null || skip_all "no $p"
done

containers=()
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

# The machine's Debian mirror, from deb822 or one-line sources.
apt_mirror() {
    { awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null
      awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
          /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
    } | grep -v -- -security | head -1
}
MIRROR=$(apt_mirror)
[ -n "$MIRROR" ] || skip_all "no Debian mirror in /etc/apt's sources"

# A trivial container first: an image of one static program.
mkdir -p "$T/tiny"
echo 'int main(void) { return 0; }' | cc -static -x c -o "$T/tiny/true" - ||
    skip_all "cc cannot link a static program"
if ! tar -C "$T/tiny" -c . | podman import -q - localhost/masteraff-test/tiny:latest >/dev/null 2>"$T/err" ||
   ! podman run --rm --network none localhost/masteraff-test/tiny:latest /true >/dev/null 2>>"$T/err"; then
    skip_all "podman cannot run a container here: $(tail -1 "$T/err")"
fi

# ---- base images ----

# minbase_tarball: debootstrap's minbase of SUITE from MIRROR, as a
# tarball in the cache (made once).
minbase_tarball() {
    local tar=$CACHE/minbase-$SUITE-$1.tar dir=$T/minbase
    if [ ! -s "$tar" ]; then
        mkdir -p "$CACHE"
        debootstrap --variant=minbase "$SUITE" "$dir" "$MIRROR" >"$T/debootstrap.log" 2>&1 || {
            sed 's/^/#   /' "$T/debootstrap.log" | tail -20 >&2; return 1; }
        rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
        tar -C "$dir" -c . >"$tar.tmp" && mv "$tar.tmp" "$tar"
        rm -rf "$dir"
    fi
    echo "$tar"
}

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

# base_image NAME RECIPE...: NAME (as FROM spells it) made by the
# recipe unless an image of the recipe's hash is in the store already.
base_image() {
    local name=$1 hash dir tar; shift
    hash=$( { declare -f minbase_tarball "$@"; echo "$MIRROR $SUITE ${NGINX_CHANGES[*]}"; } |
        sha256sum | cut -c1-16)
    local id=localhost/masteraff-test/base-${name//[:\/]/-}:$hash
    if ! podman image exists "$id"; then
        tar=$(minbase_tarball "$(echo "$MIRROR" | sha256sum | cut -c1-12)") || return 1
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
minbase_tree() { :; }

start=$SECONDS
base_image debian:bookworm minbase_tree
ok $? "base image debian:bookworm (debootstrap minbase from $MIRROR)"
base_image nginx:stable-bookworm nginx_tree
ok $? "base image nginx:stable-bookworm (minbase + nginx-light, the official image's conventions)"
diag "base images: $((SECONDS - start)) s"
