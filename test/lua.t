#!/usr/bin/env bash
# OpenResty-style configurations: *_by_lua_block bodies at the http,
# server, location and upstream levels, full of Lua that nginx's own
# tokenizer would misread (long brackets, strings holding braces and ';',
# comments holding braces and quotes), and worker_cpu_affinity after them,
# so that a misread loses it. The oracle is Debian's nginx with its Lua
# module loaded: what it gives worker 0 (test/predict must agree), and
# what it refuses. Then the library places such a master at start, on a
# fake tree where CPU 0 and CPU 1 are two packages.
. "$(dirname "$0")/lib.sh"
PORT=18231
need_programs predict

MODULES=${NGINX_MODULES:-/usr/lib/nginx/modules}
for m in ndk_http_module ngx_http_lua_module; do
    [ -f "$MODULES/$m.so" ] ||
        skip_all "no $MODULES/$m.so (apt-get install libnginx-mod-http-lua libnginx-mod-http-ndk)"
done
make_twopkg
orig=$(cpus_of $$)
[ "$orig" = 0-1 ] || diag "started on CPUs $orig (the table expects 0-1)"

# lua_conf AFFINITY [EXTRA-HTTP-LINES]: $T/nginx.conf with the Lua module,
# Lua blocks at every level, worker_cpu_affinity AFFINITY at the end.
lua_conf() {
    mkdir -p "$T/tmp"
    cat >"$T/nginx.conf" <<EOF
load_module $MODULES/ndk_http_module.so;
load_module $MODULES/ngx_http_lua_module.so;
worker_processes 2;
pid $T/nginx.pid;
error_log $T/error.log notice;
events { worker_connections 128; }
http {
$(http_files)
    init_by_lua_block {
        -- a comment with a brace } and a quote ' that nginx would read
        local t = { a = { "}" }, b = '{', c = "\"}\\\\", d = #"{" }
        local s = [==[ ]] } { ]==] .. [[;}]]
        --[[ worker_cpu_affinity 01; }
        } ]]
        --[=[ ]] } ]=]
        local z = "a\\z
            b" -- "\\z" ends no string for the module's lexer: read on
    }
    init_worker_by_lua_block { local _ = "}}};" }
    upstream backend {
        server 127.0.0.1:1;
        balancer_by_lua_block { local _ = '}' }
    }
    server {
        listen 127.0.0.1:$PORT;
        server_rewrite_by_lua_block { local _ = [[ } ]] }
        location / {
            set_by_lua_block \$v { return "{;}" }
            rewrite_by_lua_block { local a = { [1] = "}" } }
            access_by_lua_block {
                -- }
            }
            content_by_lua_block { ngx.say("hello") -- } ; {
            }
            header_filter_by_lua_block { local h = '}' }
            body_filter_by_lua_block { local b = "{" }
            log_by_lua_block { local l = #ngx.var.uri }
        }
        ${2:-}
    }
}
worker_cpu_affinity $1;
EOF
}

predicted() {
    "$SRCDIR/test/predict" -a -x "$NGINX" -- "$@" | head -1 |
        sed 's/^place //; s/^none:.*/none/'
}

# What nginx gives worker 0 (started without the library): its CPUs,
# "none" when it kept the original mask, "refused" when nginx did not
# start (test/predict.t's rule).
observed() {
    local w0 cpus
    : >"$T/error.log"
    if ! env -u LD_PRELOAD "$NGINX" "$@" 2>"$T/stderr"; then
        echo refused
        return
    fi
    wait_workers
    w0=$(workers | cut -d' ' -f1)
    wait_for "[ \"\$(cpus_of $w0)\" != '$orig' ]" 2
    cpus=$(cpus_of "$w0")
    stop_nginx
    if [ "$cpus" = "$orig" ]; then echo none; else echo "$cpus"; fi
}

row() { # row DESCRIPTION WANT NGINX-ARGS...
    local what=$1 want=$2
    shift 2
    is "$(observed "$@")" "$want" "$what: nginx's worker 0 gets $want"
    is "$(predicted "$@")" "$want" "$what: predicted $want"
}

lua_conf "10 01"
row "Lua blocks at every level, the mask after them" 1 -c "$T/nginx.conf"
lua_conf "01 10"
row "the same with the masks swapped" 0 -c "$T/nginx.conf"

# refused WHAT NGINX-ARGS...: nginx refuses to start; nothing predicted.
refused() {
    local what=$1
    shift
    is "$(observed "$@")" refused "$what: nginx refuses to start"
    is "$(predicted "$@")" none "$what: predicted none"
}

long=$(printf '%*s' 5000 '' | tr ' ' x)
lua_conf "10 01" "location /long { content_by_lua_block { -- $long }
        } }"
refused "a '}' in a comment line longer than nginx's buffer ends the block" \
    -c "$T/nginx.conf"
lua_conf "10 01" "location /long { content_by_lua_block { local s = [[$long]] } }"
refused "a long bracket longer than nginx's buffer" -c "$T/nginx.conf"
lua_conf "10 01" "location /open { content_by_lua_block { local t = {{{{ } }"
refused "an unterminated Lua block" -c "$T/nginx.conf"
is "$("$SRCDIR/test/predict" -x "$NGINX" -- -c "$T/nginx.conf" | head -1)" \
    "none: $T/nginx.conf:46: unexpected end of file, expecting terminating characters for lua code block (\"content_by_lua_block\" at line 44)" \
    "an unterminated Lua block: the reason says where it starts, and nginx's words"

# ---- the library: placed at start, confirmed by worker 0 ----
lib_stderr() { grep -a 'masteraff: ' "$T/stderr"; }

lua_conf "10 01"
: >"$T/error.log"
MASTERAFF_LOG=debug start_nginx
wait_pinned_workers
ok $? "with the library: the workers pin themselves to CPUs 1 and 0"
lib_stderr | grep -q "\[debug\] .*masteraff: worker 0 will pin to CPUs 1 (worker_cpu_affinity at $T/nginx.conf:47)"
ok $? "the Lua blocks are read, and the mask after them"
lib_stderr | grep -q "\[debug\] .*masteraff: master [0-9]* placed at start on CPUs 1 (package 1)"
ok $? "the master is placed at start on worker 0's package"
wait_for "lib_lines | grep -q 'placed there at start'"
lib_lines | grep -q "\[notice\] .*masteraff: master $m stays on CPUs 1 (package 1), placed there at start for worker $w0 on CPU 1"
ok $? "error.log: worker 0 confirmed the placement at start"
is "$(curl -s "http://127.0.0.1:$PORT/")" hello "content_by_lua_block serves"
stop_nginx

# ---- doubt: nginx refuses, the library says why in one debug line ----
lua_conf "10 01" "location /open { content_by_lua_block { local t = {{{{ } }"
MASTERAFF_LOG=debug start_nginx
is "$(lib_stderr | grep -c 'no placement at start: .*terminating characters for lua code block')" 1 \
    "an unterminated Lua block: no placement, one debug line"

done_testing
