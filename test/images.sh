# Shared by the tests that run images with podman (image.t, kube.t):
# podman set up as CI can run it (runc, the nofile limit), the machine's
# Debian mirror, and base images made here, as no registry is reachable
# where the tests run: debootstrap's minbase of $SUITE from this machine's
# apt source, with steps run on it, imported under the name a FROM line or
# a manifest spells. They are kept in podman's store and made again only
# when their recipe (the functions that make them, the mirror) changes;
# debootstrap's output is cached as a tarball in $CACHE. Sourced after
# lib.sh; skips the whole test where podman cannot run a container.
CACHE=${MASTERAFF_TEST_CACHE:-/var/cache/masteraff-test}/images
SUITE=${SUITE:-bookworm}
. "$SRCDIR/test/debian.sh"

[ "$(id -u)" = 0 ] || skip_all "not root (podman's store, debootstrap)"
for p in podman runc debootstrap; do
    command -v "$p" >/dev/null || skip_all "no $p"
done

podman_conf

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
# on (Debian, apt, nginx in /usr/sbin, the error log on stderr,
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

# build_image FILE TAG [BUILD-ARG...]: podman build of FILE as shipped,
# from the repository, tagged TAG. The last run's image, untagged then, is
# removed: its layers stay cached in the build stage's images.
build_image() {
    local file=$1 tag=$2 start=$SECONDS old; shift 2
    old=$(podman image inspect -f '{{.Id}}' "$tag" 2>/dev/null)
    podman build -q --pull=never "$@" -f "$file" -t "$tag" "$SRCDIR" >"$T/build.log" 2>&1
    ok $? "podman build --pull=never of ${file#"$SRCDIR"/} as shipped${*:+ ($*)}" ||
        sed 's/^/#   /' "$T/build.log" | tail -20
    [ -n "$old" ] && [ "$old" != "$(podman image inspect -f '{{.Id}}' "$tag" 2>/dev/null)" ] &&
        podman rmi "$old" >/dev/null 2>&1
    diag "build of ${file#"$SRCDIR"/}: $((SECONDS - start)) s"
}
