#!/usr/bin/env bash
# The Kubernetes manifests (examples/kubernetes) run with podman kube play,
# with the injector built from examples/kubernetes/Containerfile as shipped
# and the nginx images they name made here (test/images.sh): the official
# image on Debian 12 (nginx:1.27) and on Debian 13 (nginx:1.29), Debian's
# nginx-light with the official image's configuration and conventions, and
# nginx:1.27-alpine, the musl nginx of test/musl-nginx in an image of its
# own with musl's loader and no shell. None has libnuma: the copy the
# injector puts beside the library is the one opened.
#
# The Pods play as they are, with podman as with a kubelet: no $(NAME) in
# an env value (podman 4.3 does not expand it) and restartPolicy OnFailure
# (it restarts init containers under Always). A Deployment's pods must say
# Always: test/kube-manifest runs them as the kubelet would, and makes the
# bad inputs (the other libc's library, a read-only volume, no emptyDir,
# no libnuma anywhere) as edits of the shipped files.
#
# Each image: it serves; the master is placed at start and confirmed, on a
# two-package tree mounted at the same path in the container and on the
# host (MASTERAFF_SYSFS) and on this machine's own; its memory moves with
# SYS_NICE (Docker's seccomp rule, as the RuntimeDefault profile of
# containerd and CRI-O, given as the pod's profile) and the line says why
# without; masteraff status on the host finds the pod's master; nginx -s
# reload (podman exec) gets nothing from the library; a binary upgrade
# (USR2) of an nginx daemonized in the pod keeps it; nginx stops cleanly
# and podman kube down removes the pod.
. "$(dirname "$0")/lib.sh"
KUBE=$SRCDIR/examples/kubernetes
INJECTOR=localhost/masteraff-injector:0.1.0

. "$SRCDIR/test/images.sh"

podman kube play --help >/dev/null 2>&1 || skip_all "this podman has no kube play"
python3 -c 'import yaml' 2>/dev/null || skip_all "no python3-yaml (test/kube-manifest)"
[ -x "$SRCDIR/masteraff" ] || { echo "Bail out! $SRCDIR/masteraff is not built"; exit 1; }
musl_nginx=$("$SRCDIR/test/musl-nginx")
case $? in
0) ;;
2) diag "no musl image: $musl_nginx"; musl_nginx="" ;;
*) echo "Bail out! the musl nginx does not build:"; sed 's/^/# /' <<<"$musl_nginx"; exit 1 ;;
esac

played=() C="" HOSTPID=""
kube_cleanup() {
    local y
    for y in "${played[@]}"; do podman kube down "$y" >/dev/null 2>&1; done
    rm -rf "$T"
}
trap kube_cleanup EXIT
trap 'exit 1' INT TERM HUP PIPE

# ---- images ----

# The official image's configuration: error log at notice (the library's
# lines), the default site on port 80.
official_conf() {
    local dir=$1
    cat >"$dir/etc/nginx/nginx.conf" <<'CONF'
user  www-data;
worker_processes  auto;
error_log  /var/log/nginx/error.log notice;
pid        /run/nginx.pid;
events { worker_connections 1024; }
http {
    include       /etc/nginx/mime.types;
    default_type  application/octet-stream;
    access_log    /var/log/nginx/access.log;
    include       /etc/nginx/conf.d/*.conf;
}
CONF
    mkdir -p "$dir/usr/share/nginx/html"
    echo '<h1>Welcome to nginx!</h1>' >"$dir/usr/share/nginx/html/index.html"
    cat >"$dir/etc/nginx/conf.d/default.conf" <<'CONF'
server {
    listen 80;
    location / { root /usr/share/nginx/html; index index.html; }
}
CONF
}

# musl_image: the musl nginx as /usr/sbin/nginx with musl's loader, users
# and its compiled-in prefix, tagged as nginx:alpine is.
musl_image() {
    local dir=$T/musl hash id loader=/lib/ld-musl-$(uname -m).so.1
    hash=$( { declare -f musl_image; sha256sum "$musl_nginx" "$loader"; } | sha256sum | cut -c1-16)
    id=localhost/masteraff-test/base-nginx-alpine:$hash
    if ! podman image exists "$id"; then
        rm -rf "$dir"
        mkdir -p "$dir/lib" "$dir/usr/sbin" "$dir/etc" "$dir/tmp" \
            "$dir/usr/local/nginx/conf" "$dir/usr/local/nginx/logs" "$dir/usr/local/nginx/html"
        cp -L "$loader" "$dir$loader"
        cp "$musl_nginx" "$dir/usr/sbin/nginx"
        printf 'root:x:0:0::/root:/sbin/nologin\nnobody:x:65534:65534::/:/sbin/nologin\n' >"$dir/etc/passwd"
        printf 'root:x:0:\nnobody:x:65534:\nnogroup:x:65534:\n' >"$dir/etc/group"
        cat >"$dir/usr/local/nginx/conf/nginx.conf" <<'CONF'
worker_processes  auto;
error_log  stderr notice;
events { worker_connections 1024; }
http { server { listen 80; location / { root html; index index.html; } } }
CONF
        echo '<h1>Welcome to nginx!</h1>' >"$dir/usr/local/nginx/html/index.html"
        tar -C "$dir" -c . | podman import -q --change 'STOPSIGNAL SIGQUIT' \
            --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
            --change 'CMD ["nginx", "-g", "daemon off;"]' - "$id" >/dev/null || return 1
        rm -rf "$dir"
    fi
    podman tag "$id" docker.io/library/nginx:1.27-alpine
}

start=$SECONDS
base_image debian:bookworm
ok $? "base image debian:bookworm (the injector's)"
base_image nginx:1.27 nginx_tree official_conf
ok $? "base image nginx:1.27: Debian 12's nginx-light, the official image's conventions"
SUITE=trixie base_image nginx:1.29 nginx_tree official_conf
ok $? "base image nginx:1.29: Debian 13's nginx-light, the official image's conventions"
if [ -n "$musl_nginx" ]; then
    musl_image
    ok $? "base image nginx:1.27-alpine: the musl nginx with musl's loader"
fi
diag "base images: $((SECONDS - start)) s"

build_image "$KUBE/Containerfile" "$INJECTOR"
files=$(podman run --rm --network none --entrypoint find "$INJECTOR" /opt/masteraff -type f | sort | tr '\n' ' ')
is "$files" "/opt/masteraff/bin/masteraff /opt/masteraff/glibc/libmasteraff.so /opt/masteraff/glibc/libnuma.so.1 /opt/masteraff/musl/libmasteraff.so /opt/masteraff/musl/libnuma.so.1 " \
    "the injector holds the library and libnuma for each libc, and the command"

# ---- running a manifest ----

"$SRCDIR/test/mktree" twopkg "$T/sys"
cat >"$T/upgrade.conf" <<'CONF'
worker_processes 2;
worker_cpu_affinity auto;
pid /tmp/upgrade.pid;
error_log /tmp/upgrade.log notice;
events { worker_connections 64; }
http { access_log off; server { listen 8080; } }
CONF
docker_like_seccomp >"$T/seccomp.json"

# play NAME MANIFEST [EDIT...]: the manifest as the kubelet runs it, with
# the edits; sets C (the nginx container) and HOSTPID (its nginx, as the
# host sees it) once it runs.
play() {
    local yaml=$T/$1.yaml pod
    C="" HOSTPID=""
    "$SRCDIR/test/kube-manifest" "$2" seccomp=seccomp.json "${@:3}" >"$yaml" || return 1
    played+=("$yaml")
    podman kube play --seccomp-profile-root "$T" "$yaml" >"$T/play.out" 2>&1 ||
        { sed 's/^/#   /' "$T/play.out"; return 1; }
    pod=$(awk 'f { print; exit } /^Pod:/ { f = 1 }' "$T/play.out")
    C=$(podman pod inspect -f '{{.Name}}' "$pod")-nginx
    wait_for 'podman inspect -f "{{.State.Status}}" "$C" 2>/dev/null | grep -Eqx "running|exited"'
    [ "$(podman inspect -f '{{.State.Status}}' "$C")" = running ] &&
        HOSTPID=$(podman inspect -f '{{.State.Pid}}' "$C")
}

log_of() { podman logs "$C" 2>&1; }
line_of() { log_of | grep 'masteraff: master' | tail -1; }
# grep without -q reads all: podman logs must not die of SIGPIPE.
wait_line() { wait_for "log_of | grep -E '$1' >/dev/null"; }
serves() { nsenter -t "$HOSTPID" -n curl -sf http://127.0.0.1/ | grep -q 'Welcome to nginx'; }

# down YAML WHAT: stops the pod as a kubelet does (the image's STOPSIGNAL,
# SIGQUIT, and a grace period: podman 4.3's kube down kills at once, and
# nginx's log then ends without its shutdown), then podman kube down.
down() {
    local pod=${C%-nginx}
    podman pod stop -t 20 "$pod" >/dev/null 2>"$T/down.err"
    is "$(podman inspect -f '{{.State.ExitCode}}' "$C")" 0 "$2: nginx exits with 0 on SIGQUIT"
    log_of >"$T/final.log"
    grep -Eq '\[notice\] 1#[0-9]+: exit$' "$T/final.log"
    ok $? "$2: nginx's master says it exited" || tail -5 "$T/final.log" | sed 's/^/#   /'
    ! grep -E "\[(alert|emerg)\].*masteraff:" "$T/final.log" | sed 's/^/#   /' | grep -q .
    ok $? "$2: no [alert] or [emerg] from the library in the log"
    # nginx's own, with or without the library, when root's descriptors in
    # flight on this machine pass the container's RLIMIT_NOFILE (a
    # container has no CAP_SYS_RESOURCE): sendmsg() ETOOMANYREFS.
    grep -E '\[(alert|emerg)\]' "$T/final.log" | sed 's/^/# nginx: /' | head -3
    podman kube down "$1" >/dev/null 2>"$T/down.err"
    ok $? "$2: podman kube down" || sed 's/^/#   /' "$T/down.err"
    ! podman pod exists "$pod"
    ok $? "$2: the pod is gone"
}

# ---- each image, as shipped ----

# scenario NAME MANIFEST LIBC
scenario() {
    local name=$1 manifest=$KUBE/$2 libc=$3 m0 new out
    local beside="/masteraff/$libc/libnuma.so.1, beside the library"

    # The two-package tree: placed at start, confirmed, memory moved.
    play "$name" "$manifest" sysfs="$T/sys"
    ok $? "$name: podman kube play of $2 (two-package tree)"
    [ -n "$HOSTPID" ] || return
    wait_line 'masteraff: master 1 stays'
    diag "$(line_of)"
    line_of | grep -Fq "masteraff: master 1 stays on CPUs 0 (package 0), placed there at start for worker "
    ok $? "$name: the master is placed at start on worker 0's package, and worker 0 confirms it"
    line_of | grep -Eq "; moved [0-9]+ pages to node 0 in [0-9]+us \(with ${beside//./\\.}\)"
    ok $? "$name: with SYS_NICE its memory moves, with the libnuma beside the library"
    serves
    ok $? "$name: nginx serves"
    "$SRCDIR/masteraff" status "$HOSTPID" >"$T/status" 2>&1
    grep -q "^ok: master shares package 0 with worker 0" "$T/status"
    ok $? "$name: masteraff status on the host finds the pod's master ($HOSTPID)" ||
        sed 's/^/#   /' "$T/status"
    grep -Fq "library: /masteraff/$libc/libmasteraff.so" "$T/status"
    ok $? "$name: ... and the library it preloads" || sed 's/^/#   /' "$T/status"
    grep -Fxq "libnuma: /masteraff/$libc/libnuma.so.1, beside the library" "$T/status"
    ok $? "$name: ... and the libnuma it opened, beside the library" || sed 's/^/#   /' "$T/status"

    # nginx -s reload in the container: the library loads there and does
    # nothing; the master reloads and follows its new worker 0.
    m0=$(children_of "$HOSTPID" worker | head -1)
    said=$(log_of | grep -c 'masteraff: master 1 ')
    out=$(podman exec "$C" /usr/sbin/nginx -s reload 2>&1)
    ok $? "$name: nginx -s reload (podman exec) exits 0"
    ! grep -q masteraff <<<"$out"
    ok $? "$name: ... and the library says nothing in it" || sed 's/^/#   /' <<<"$out"
    wait_for "! kill -0 $m0 2>/dev/null"
    wait_for '[ "$(log_of | grep -c "masteraff: master 1 ")" -gt "$said" ]'
    log_of | grep 'masteraff: master 1 ' | tail -1 | grep -Eq "CPUs 0( \(package 0\))?[,:]"
    ok $? "$name: the reload's new worker 0 is followed, on package 0" ||
        log_of | grep 'masteraff: master 1 ' | tail -1 | sed 's/^/#   /'
    diag "$(log_of | grep 'masteraff: master 1 ' | tail -1)"

    # Binary upgrade: nginx ignores USR2 with daemon off (its parent never
    # changes), so a second nginx, daemonized, is started in the pod by
    # podman exec, with the pod's environment, and upgraded. nginx passes
    # only env-listed variables to the new binary; the library puts
    # LD_PRELOAD back.
    podman cp "$T/upgrade.conf" "$C:/tmp/upgrade.conf"
    podman exec "$C" /usr/sbin/nginx -c /tmp/upgrade.conf
    ok $? "$name: a daemonized nginx starts in the pod (podman exec)"
    wait_for "pgrep -f '^nginx: master process /usr/sbin/nginx -c /tmp/upgrade.conf' >/dev/null"
    old=$(pgrep -f '^nginx: master process /usr/sbin/nginx -c /tmp/upgrade.conf')
    # grep -s: the log does not exist until nginx opens it, and a wait
    # must be quiet (it printed a line per try, thousands of them).
    wait_for "grep -qs 'masteraff: master' /proc/$HOSTPID/root/tmp/upgrade.log"
    kill -USR2 "$old"
    wait_for "pgrep -P $old -f '^nginx: master' >/dev/null"
    new=$(pgrep -P "$old" -f '^nginx: master')
    wait_for "grep -Eqs 'masteraff: master [0-9]+ stays on CPUs 0 \(package 0\), placed there at start.*' /proc/$HOSTPID/root/tmp/upgrade.log &&
        [ \$(grep -cs 'placed there at start' /proc/$HOSTPID/root/tmp/upgrade.log) -ge 2 ]"
    ok $? "$name: USR2: the new master (host pid $new) is placed at start as well" ||
        sed 's/^/#   /' "/proc/$HOSTPID/root/tmp/upgrade.log"
    grep -q "/masteraff/$libc/libmasteraff.so" "/proc/$new/maps"
    ok $? "$name: ... with the library loaded from the volume"
    kill -QUIT "$new" "$old"
    wait_for "! kill -0 $old 2>/dev/null && ! kill -0 $new 2>/dev/null"
    down "$T/$name.yaml" "$name"

    # This machine's own topology, without SYS_NICE.
    play "$name-host" "$manifest" no-sys-nice
    ok $? "$name: this machine's topology, without SYS_NICE"
    [ -n "$HOSTPID" ] || return
    wait_line 'masteraff: master 1 stays'
    diag "$(line_of)"
    line_of | grep -Eq "masteraff: master 1 stays on CPUs [0-9,-]+ \(package [0-9]+\), placed there at start for worker [0-9]+ on CPU 0, confirmed"
    ok $? "$name: placed at start and confirmed on this machine's package"
    line_of | grep -Eq "; memory not moved to node 0 \(move_pages: (Operation not permitted|Function not implemented); a seccomp filter refuses it"
    ok $? "$name: without SYS_NICE the line says why no page moved"
    serves
    ok $? "$name: nginx serves"
    down "$T/$name-host.yaml" "$name-host"
}

# ---- pod.yaml as shipped, with podman kube play and nothing else ----

# No value holds a $(NAME) that podman would leave as text.
is "$(grep -lE '^ *value: .*\$\(' "$KUBE"/*.yaml | tr '\n' ' ')" "" "no manifest's value holds a \$(NAME) reference, which podman does not expand"
podman kube play "$KUBE/pod.yaml" >"$T/play.out" 2>&1
ok $? "pod.yaml as shipped: podman kube play starts it" || sed 's/^/#   /' "$T/play.out"
played+=("$KUBE/pod.yaml")
C=nginx-masteraff-nginx
wait_for 'podman inspect -f "{{.State.Status}}" "$C" 2>/dev/null | grep -qx running'
HOSTPID=$(podman inspect -f '{{.State.Pid}}' "$C" 2>/dev/null)
wait_line 'masteraff: master 1 '
# What podman gave the container (nginx writes its title over its own
# copy of the environment).
is "$(podman inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$C" 2>/dev/null | sed -n 's/^LD_PRELOAD=//p')" \
    /masteraff/glibc/libmasteraff.so "pod.yaml as shipped: nginx's LD_PRELOAD is the library's path"
grep -q ' /masteraff/glibc/libmasteraff\.so$' "/proc/$HOSTPID/maps" 2>/dev/null
ok $? "pod.yaml as shipped: nginx's master has the library loaded" || log_of | tail -5 | sed 's/^/#   /'
# podman removes an init container once it ran, unless it was restarted.
restarts=$(podman inspect -f '{{.RestartCount}}' nginx-masteraff-masteraff 2>/dev/null || echo 0)
is "$restarts" 0 "pod.yaml as shipped: the injector ran once, not restarted"
podman kube down "$KUBE/pod.yaml" >/dev/null 2>&1
ok $? "pod.yaml as shipped: podman kube down"

scenario debian12 pod.yaml glibc
scenario debian13 deployment.yaml glibc
if [ -n "$musl_nginx" ]; then
    scenario musl pod-alpine.yaml musl
fi

# ---- bad input: nginx starts and serves, one line says what is missing ----

# bad NAME MANIFEST EDIT PATTERN WHAT: the pod serves and its nginx's or
# its injector's log has a line matching PATTERN.
bad() {
    play "$1" "$KUBE/$2" "$3"
    ok $? "$5: the pod starts"
    [ -n "$HOSTPID" ] || return
    wait_for serves
    ok $? "$5: nginx serves"
    podman logs "${C%-nginx}-masteraff" >"$T/init.log" 2>&1
    { cat "$T/init.log"; log_of; } | grep -E "$4" >"$T/said"
    ok $? "$5: one line says what is missing"
    [ -s "$T/said" ] || { cat "$T/init.log"; log_of; } | sed 's/^/#   /'
    diag "$(head -1 "$T/said")"
    down "$T/$1.yaml" "$5"
}
bad wrong-libc pod.yaml libc=musl "object '/masteraff/musl/libmasteraff.so' from LD_PRELOAD cannot be preloaded \(ELF file ABI version invalid\): ignored" \
    "the musl library in a glibc nginx"
bad readonly pod.yaml init-readonly "masteraff-inject: cannot copy into /masteraff \(Read-only file system\)" \
    "a read-only volume"
bad no-volume pod.yaml no-volume "masteraff-inject: /masteraff is not a volume" "no emptyDir"
bad no-libnuma pod.yaml no-libnuma \
    "memory not moved to node 0 \(libnuma.so.1 not found, nor /masteraff/glibc/libnuma.so.1\)" \
    "no libnuma in the image nor beside the library"

if [ -n "$musl_nginx" ]; then
    play glibc-in-musl "$KUBE/pod-alpine.yaml" libc=glibc no-restart
    wait_for '[ "$(podman inspect -f "{{.State.Status}}" "$C" 2>/dev/null)" = exited ]'
    is "$(podman inspect -f '{{.State.ExitCode}}' "$C")" 127 \
        "the glibc library in a musl nginx: musl's loader refuses to start it (127)"
    # musl's loader writes a line per symbol: grep -q would leave podman
    # logs writing into a closed pipe, which pipefail takes for a failure.
    wait_line 'Error relocating /masteraff/glibc/libmasteraff\.so'
    named=$?
    ok $named "... and names the library"
    [ "$named" = 0 ] || log_of | sed 's/^/#   /'
    podman kube down "$T/glibc-in-musl.yaml" >/dev/null 2>&1
fi

is "$(podman pod ls -q --filter name=nginx-masteraff | wc -l)" 0 "no pod of the test is left"
done_testing
