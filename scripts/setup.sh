# Sourced by the benchmark scripts: builds the library and the command,
# then takes test/lib.sh's nginx set-up. What stops them (no
# nginx, a build that failed) is said on stderr and exits non-zero: a
# script run from a fresh clone must not end in silence.
SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
make -s -C "$SRCDIR" all || exit 1
# test/lib.sh would skip, with status 0, where a script must fail.
NGINX=${NGINX:-/usr/sbin/nginx}
if [ ! -x "$NGINX" ]; then
    echo "$(basename "$0"): no nginx at $NGINX (apt-get install nginx-light)" >&2
    exit 1
fi
. "$SRCDIR/test/lib.sh" >&2
