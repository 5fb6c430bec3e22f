#!/usr/bin/env bash
# examples/docker/Dockerfile.alpine without Docker, and without Alpine: no
# Alpine or nginx:alpine image can be fetched here or in CI, so the image
# is never built. What is checked instead: the Dockerfile's syntax (the
# lint of test/dockerfile.sh) and what it promises (ARGs that FROM uses
# declared before the first FROM, as podman and Docker's legacy builder
# need; an Alpine build stage with build-base and linux-headers; the
# nginx:alpine image with numactl for libnuma; the library copied where
# LD_PRELOAD points). Then its build stage's commands run on the sources
# with musl-gcc standing for Alpine's gcc (apk is skipped: the network),
# and what the container runs: the musl nginx of test/musl-nginx in the
# foreground (`nginx -g 'daemon off;'`) with the Dockerfile's ENV and the
# library the stage built, on a fake tree where CPU 0 and CPU 1 are two
# packages; the stage's masteraff command reads its status. Not run:
# apk, Alpine's own gcc and its fortify headers, Alpine's busybox and the
# image's entrypoint script (this machine's sh is glibc's, which cannot
# preload a musl library), Alpine's libnuma (the line says libnuma.so.1 is
# not found here), a container runtime.
. "$(dirname "$0")/lib.sh"
PORT=18403
DOCKERFILE=$SRCDIR/examples/docker/Dockerfile.alpine
[ -f "$DOCKERFILE" ] || { echo "Bail out! no $DOCKERFILE"; exit 1; }
. "$SRCDIR/test/dockerfile.sh"

# ---- the Dockerfile ----

is "$(dockerfile_lint "$DOCKERFILE")" "" "the Dockerfile's syntax is sound"

# global_args FILE: NAME VALUE of each ARG with a default before the first FROM.
global_args() {
    logical_lines "$1" | awk 'toupper($1) == "FROM" {exit}
        toupper($1) == "ARG" && $2 ~ /=/ {i = index($2, "="); print substr($2, 1, i - 1), substr($2, i + 1)}'
}
from_images() { logical_lines "$1" | awk 'toupper($1) == "FROM" {print $2}'; }

# The variables FILE's FROM lines use that no ARG before the first FROM
# declares with a default: podman and Docker's legacy builder expand them
# to nothing.
undeclared_in_from() {
    local globals v
    globals=" $(global_args "$1" | awk '{print $1}' | tr '\n' ' ')"
    from_images "$1" | grep -oE '\$\{?[A-Za-z_][A-Za-z0-9_]*' | tr -d '${' |
        while read -r v; do [[ $globals == *" $v "* ]] || echo "$v"; done
}
is "$(undeclared_in_from "$DOCKERFILE")" "" \
    "every ARG a FROM line uses is declared, with a default, before the first FROM"
sed '/^ARG NGINX_IMAGE=/d; /^FROM .* AS build$/a ARG NGINX_IMAGE=nginx:alpine' "$DOCKERFILE" >"$T/Dockerfile.late"
is "$(undeclared_in_from "$T/Dockerfile.late")" NGINX_IMAGE \
    "the check finds an ARG declared after the first FROM in a broken copy"

declare -A args=()
while read -r name value; do args[$name]=$value; done < <(global_args "$DOCKERFILE")
froms=$(from_images "$DOCKERFILE")
build_image=$(expand "$(sed -n 1p <<<"$froms")")
final_image=$(expand "$(tail -n 1 <<<"$froms")")
[[ $build_image == alpine:* ]]
ok $? "the build stage is Alpine ($build_image)"
[[ $final_image == nginx:*alpine* ]]
ok $? "the image is the official nginx image's Alpine variant ($final_image)"

build=$(stage_lines build)
grep -Eq '^RUN apk add .*build-base' <<<"$build" && grep -Eq '^RUN apk add .*linux-headers' <<<"$build"
ok $? "the build stage installs build-base and linux-headers"
final=$(stage_lines last)
grep -Eq '^RUN apk add .*\bnumactl\b' <<<"$final"
ok $? "the image installs numactl (libnuma.so.1)"
envs=$(stage_env "$final")
preload=$(sed -n 's/^LD_PRELOAD=//p' <<<"$envs")
is "$preload" /usr/lib/libmasteraff.so "ENV LD_PRELOAD is /usr/lib/libmasteraff.so (Alpine has no multiarch directory)"
is "$(sed -n 's/^MASTERAFF_LOG=//p' <<<"$envs")" notice "ENV MASTERAFF_LOG=notice"
read -r _ from src dest <<<"$(awk 'toupper($1) == "COPY" && $2 ~ /^--from=/' <<<"$final")"
is "${from#--from=} $dest" "build /" "the build stage's tree is copied onto the image's root"

# ---- the build stage, with musl-gcc for Alpine's gcc ----

if ! command -v musl-gcc >/dev/null; then
    diag "no musl-gcc (apt-get install musl-tools): the build stage and the container are not run"
    done_testing
    exit
fi
stage=$T/stage
CC=musl-gcc run_stage "$stage"
ok $? "the build stage's COPY and RUN work on the sources with musl-gcc"
built=$stage${src%/}$preload
cmd=$stage${src%/}/usr/bin/masteraff
needed=$(LC_ALL=C readelf -d "$built" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
is "$needed" "libc.so " "the build stage makes a musl library where LD_PRELOAD points (${src%/}$preload)"
# musl's crti.o makes _init and _fini global in every shared library.
exported=$(nm -D --defined-only "$built" 2>/dev/null | awk '$3 !~ /^_(init|fini)$/ {print $3}' | sort | tr '\n' ' ')
is "$exported" "execv execve execvp fork pthread_setaffinity_np sched_getaffinity sched_setaffinity setsid sigsuspend wait wait3 wait4 waitid waitpid " \
    "it exports the interposed functions alone"
out=$(env -u MASTERAFF_LIBRARY "$cmd" --log notice true 2>&1)
grep -q "nor as /usr/lib/libmasteraff.so" <<<"$out"
ok $? "the stage's masteraff command runs and looks for the library in /usr/lib"

# ---- what the container runs ----

musl_nginx=$("$SRCDIR/test/musl-nginx")
case $? in
0) NGINX=$musl_nginx ;;
2) diag "$musl_nginx: the container is not run"; done_testing; exit ;;
*) echo "Bail out! the musl nginx does not build:"; sed 's/^/# /' <<<"$musl_nginx"; exit 1 ;;
esac
make_twopkg
write_conf "10 01"
# No rewrite or stub_status module in that nginx: a static page.
sed -i -e "s|location / { return 200 \"hello\\\\n\"; }|root $T/html;|" -e '/stub_status/d' "$T/nginx.conf"
mkdir -p "$T/html" && echo hello >"$T/html/index.html" && chmod a+rx "$T" "$T/html"

cenv=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin MASTERAFF_SYSFS="$T/sys")
while IFS= read -r e; do
    case $e in
    LD_PRELOAD=*) cenv+=("LD_PRELOAD=$built") ;;
    ?*) cenv+=("$e") ;;
    esac
done <<<"$envs"
# Without the image's entrypoint script: this machine's sh is glibc's,
# which cannot preload a musl library (the image's busybox is musl's).
env -i "${cenv[@]}" "$NGINX" -c "$T/nginx.conf" -g 'daemon off;' 2>"$T/stderr" &
fg=$!
bg_pids+=("$fg")
wait_pinned_workers
is "$m" "$fg" "nginx runs in the foreground: the master is the process started"
wait_for "[ \"\$(cpus_of $m)\" = 1 ]"
is "$(cpus_of "$m")" 1 "the master follows worker 0 to CPU 1"
wait_for "grep -q 'placed there at start' $T/error.log"
grep -q "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1, .*; memory not moved to node 0 (libnuma.so.1 not found, nor .*/libnuma.so.1)" "$T/error.log"
ok $? "the log line says the placement, and that no libnuma is found here"
serves
ok $? "nginx serves"
"$cmd" status --check --sysfs "$T/sys" "$T/nginx.pid" >"$T/status" 2>&1
is "$?" 0 "the stage's masteraff status --check exits 0"
kill -QUIT "$m"
wait "$fg"
is "$?" 0 "SIGQUIT: nginx exits with status 0"
is "$(grep -E '\[(alert|emerg|crit)\]' "$T/error.log")" "" "no alert, emerg or crit in error.log"
rm -f "$T/nginx.pid"
done_testing
