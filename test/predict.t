#!/usr/bin/env bash
# What the library predicts for worker 0 (test/predict, nginxconf.c) against
# what a real nginx, started without the library, gives its worker 0: for a
# table of configurations, the prediction must be worker 0's CPUs, or "none"
# where worker 0 keeps the mask it was started with. Against another
# server: NGINX=EXECUTABLE PORT=N test/predict.t (test/servers.t does).
. "$(dirname "$0")/lib.sh"
PORT=${PORT:-18190}
need_programs predict

orig=$(cpus_of $$)

# conf DIR MAIN-LINES [HTTP-LINES]: DIR/nginx.conf (lib.sh's conf_text).
conf() {
    mkdir -p "$1" "$T/tmp"
    conf_text "$2" "${3:-}" >"$1/nginx.conf"
}

# The prediction for nginx ARGS within the CPUs this test may use: a
# cpulist, or "none".
predicted() {
    "$SRCDIR/test/predict" -a -x "$NGINX" -- "$@" | head -1 |
        sed 's/^place //; s/^none:.*/none/'
}

# A process nginx made that has its epoll instance: a worker past pinning
# itself (ngx_worker_process_init pins before the event module's
# init_process), or the one process of master_process off. A master
# without the library has none.
has_epoll() { ls -l "/proc/$1/fd" 2>/dev/null | grep -q 'anon_inode:\[eventpoll\]'; }
is_master() { grep -q '^[a-z]*: master process' "/proc/$1/cmdline" 2>/dev/null; }

# What nginx gives worker 0 when started with ARGS (without the library):
# its CPUs, "none" when it kept the original mask (or nginx started no
# worker and did not pin itself), "refused" when nginx did not start.
observed() {
    local m w0 cpus
    : >"$T/error.log"
    if ! env -u LD_PRELOAD "$NGINX" "$@" 2>"$T/stderr"; then
        echo refused
        return
    fi
    wait_for "[ -s $T/nginx.pid ]"
    m=$(master_pid)
    wait_for "is_master $m || has_epoll $m"
    if ! is_master "$m"; then
        # master_process off: the one process must not have pinned either.
        cpus=$(cpus_of "$m")
        stop_nginx
        if [ "$cpus" = "$orig" ]; then echo none; else echo "single $cpus"; fi
        return
    fi
    wait_workers
    w0=$(workers | cut -d' ' -f1)
    wait_for "has_epoll $w0"
    cpus=$(cpus_of "$w0")
    stop_nginx
    if [ "$cpus" = "$orig" ]; then echo none; else echo "$cpus"; fi
}

# row DESCRIPTION WANT NGINX-ARGS...: nginx gives worker 0 WANT, and the
# prediction is what nginx gave (the server is the oracle, also where a
# build departs from the table).
row() {
    local what=$1 want=$2 got seen
    shift 2
    got=$(predicted "$@")
    seen=$(observed "$@")
    is "$seen" "$want" "$what: nginx's worker 0 gets $want"
    is "$got" "$seen" "$what: predicted what nginx gave ($seen)"
}

[ "$orig" = 0-1 ] || diag "started on CPUs $orig (the table expects 0-1)"

d=$T/c
conf "$d" "worker_cpu_affinity 01 10;"
row "masks 01 10" 0 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 10 01;"
row "masks 10 01" 1 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 10;"
row "one mask for every worker" 1 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity auto;"
row "auto" 0 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity auto 10;"
row "auto 10" 1 -c "$d/nginx.conf"

conf "$d" ""
row "-g worker_cpu_affinity" 1 -c "$d/nginx.conf" -g "worker_cpu_affinity 10 01;"
row "-g with two directives" none -c "$d/nginx.conf" -g "worker_cpu_affinity 10 01; master_process off;"

rm -rf "$d"
mkdir -p "$d/conf/conf.d"
conf "$d/conf" "include conf.d/*.conf;"
echo "worker_cpu_affinity 10 01;" >"$d/conf/conf.d/affinity.conf"
echo "# nothing" >"$d/conf/conf.d/empty.conf"
row "-p with a relative -c, include with a relative glob" 1 -p "$d" -c conf/nginx.conf

rm -rf "$d"
conf "$d" "# worker_cpu_affinity 01 10;
env 'X=\\';worker_cpu_affinity 01;';
worker_cpu_affinity # the first worker on CPU 1
    \"10\"
    '01';"
row "comments, quotes, an escape, a directive over several lines" 1 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity \"1 0\" 01;"
row "spaces inside a quoted mask are skipped" 1 -c "$d/nginx.conf"

conf "$d" "env \"X=worker_cpu_affinity 01;\";
worker_cpu_affinity 10 01;" "map \$uri \$wca { default 'worker_cpu_affinity 01;'; }
    types { text/worker_cpu_affinity 01; }"
row "the name inside strings and other blocks" 1 -c "$d/nginx.conf"

long=$(printf '%*s' 4094 '' | tr ' ' x)
conf "$d" "worker_cpu_affinity 10 01;
#$long"
row "a comment of 4095 bytes" 1 -c "$d/nginx.conf"
conf "$d" "worker_cpu_affinity 10 01;
#x$long"
is "$(observed -c "$d/nginx.conf")" refused "a comment of 4096 bytes: nginx refuses to start"
is "$(predicted -c "$d/nginx.conf")" none "a comment of 4096 bytes: predicted none"

conf "$d" "worker_cpu_affinity 10 01;" "types { master_process off; }"
row "master_process inside a block is not the main one" 1 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 10 01; master_process off;"
row "master_process off" none -c "$d/nginx.conf"

conf "$d" ""
row "no worker_cpu_affinity" none -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 00 01;"
row "an empty mask for worker 0" none -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 101 01;"
row "a mask with a CPU past the machine's" 0 -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 100 01;"
row "a mask with only CPUs past the machine's" none -c "$d/nginx.conf"

conf "$d" "worker_cpu_affinity 1x 01;"
is "$(observed -c "$d/nginx.conf")" refused "a bad mask: nginx refuses to start"
is "$(predicted -c "$d/nginx.conf")" none "a bad mask: predicted none"

# nginx -t reads the configuration and starts nothing.
conf "$d" "worker_cpu_affinity 10 01;"
env -u LD_PRELOAD "$NGINX" -t -c "$d/nginx.conf" 2>"$T/stderr"
ok $? "nginx -t succeeds"
is "$(predicted -t -c "$d/nginx.conf")" none "nginx -t: predicted none"
is "$(predicted -T -c "$d/nginx.conf")" none "nginx -T: predicted none"
is "$(predicted -s reload -c "$d/nginx.conf")" none "nginx -s reload: predicted none"
is "$(predicted -q -c "$d/nginx.conf")" 1 "-q changes nothing"

# daemon off: the process started is the master.
conf "$d" "worker_cpu_affinity 10 01; daemon off;"
env -u LD_PRELOAD "$NGINX" -c "$d/nginx.conf" 2>"$T/stderr" &
fg=$!
bg_pids+=("$fg")
wait_workers
w0=$(workers | cut -d' ' -f1)
wait_for "has_epoll $w0"
is "$(cpus_of "$w0")" 1 "daemon off: nginx's worker 0 gets 1"
is "$(predicted -c "$d/nginx.conf")" 1 "daemon off: predicted 1"
stop_nginx
wait "$fg" 2>/dev/null

# The prediction names the files it read.
rm -rf "$d"
mkdir -p "$d/conf/conf.d"
conf "$d/conf" "include conf.d/*.conf;"
echo "worker_cpu_affinity 10 01;" >"$d/conf/conf.d/affinity.conf"
files=$("$SRCDIR/test/predict" -- -p "$d" -c conf/nginx.conf | sed -n 2p)
is "$files" "files 2: $d/conf/nginx.conf, $d/conf/conf.d/affinity.conf" "the files read are listed"

done_testing
