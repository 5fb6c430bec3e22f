#!/usr/bin/env bash
# Random scenarios. Each sequence starts Debian's nginx with the library on
# a fake tree (CPU 0 and CPU 1 two packages, or on two of four nodes),
# then does a few random things nginx, its operators and its platform do,
# with random gaps: reloads to other worker counts and worker_cpu_affinity
# (distinct masks, auto, none), refused reloads, SIGKILLs of any children
# at once, USR1, USR2 + WINCH + QUIT, the cache loader's exit, the cpuset
# widened and narrowed, taskset -p on the master, the master stopped and
# continued, new workers slow to pin (test/holdpin.so); with the I/O counts
# hidden (test/noio.so), MASTERAFF_AUTO=cpuset and a CPU hog on each CPU
# drawn too. At its quiet points an oracle that
# knows nothing of the library's workings checks what an operator sees:
#   - the master runs within the scope units (packages, or nodes) of the
#     live worker that pinned to the configuration's first mask, within its
#     original mask; on that mask when no worker pins; where taskset -p
#     put it once an administrator did;
#   - each worker is where its mask and the cpuset put it, each child that
#     does not pin on the master's original mask;
#   - nginx serves; no [alert] or [emerg] but nginx's own for what the
#     sequence did;
#   - the library moved the master no more often than the steps explain,
#     its last move line names where the master is, nothing above warn.
#
# SCENARIO_COUNT sequences (default 25), the first drawn from SCENARIO_SEED
# (default a fresh one, printed), each next from the next seed. A failure
# prints its seed and its plan; SCENARIO_SEED=S SCENARIO_COUNT=1 replays
# it, and SCENARIO_PLAN=FILE runs a plan as printed (its diagnostic lines
# copied, edited by hand to make it shorter). SCENARIO_PORT (default
# 18500) gives each of several runs at once its own port.
. "$(dirname "$0")/lib.sh"
PORT=${SCENARIO_PORT:-18500}
NOIO=$SRCDIR/test/noio.so
# In every sequence: workers forked while the hold file exists are slow to
# pin. (The workers, which run as nobody, reach $T: after USR1 they open
# error.log again too.)
use_holdpin

need_programs noio.so
command -v taskset >/dev/null || skip_all "no taskset"
[ "$(getconf _NPROCESSORS_ONLN)" = 2 ] && [ "$(cpus_of $$)" = 0-1 ] ||
    skip_all "the oracle models a machine of two CPUs, 0 and 1, both allowed"
COUNT=${SCENARIO_COUNT:-25}
SEED=${SCENARIO_SEED:-$((SRANDOM % 1000000))}

# ---- CPU sets as bit masks: CPU n is bit n. CPUs past 61 are left out:
# this machine has CPUs 0 and 1, and the oracle clamps every set to them ----
ALL=$(((1 << 62) - 1))

bits_of() { # bits_of CPULIST: REPLY = its mask
    local part c m=0 IFS=,
    for part in $1; do
        for ((c = ${part%-*}; c <= ${part#*-} && c < 62; c++)); do
            m=$((m | 1 << c))
        done
    done
    REPLY=$m
}

list_of() { # list_of MASK: REPLY = its CPUs, "0,1" (for the plan and the messages)
    local c l=
    for ((c = 0; c < 62; c++)); do
        (($1 >> c & 1)) && l+=${l:+,}$c
    done
    REPLY=${l:--}
}

binary() { # binary MASK: REPLY = nginx's worker_cpu_affinity word for it
    local m=$1 s=
    while ((m)); do
        s=$((m & 1))$s
        m=$((m >> 1))
    done
    REPLY=$s
}

mask_of() { bits_of "$(cpus_of "$1")"; } # REPLY = process $1's mask

# ---- configurations: "WORKERS:KIND", KIND none, auto, or the masks in
# nginx's binary words, comma-separated; ":nocache" after it for one
# without a cache (no cache manager or loader: a reload forks the workers
# alone) ----

kind_of() { REPLY=${1#*:} && REPLY=${REPLY%:nocache}; } # REPLY = CONF's KIND
cached() { [[ $1 != *:nocache ]]; }

# conf_masks CONF: masks = the mask each worker asks nginx for, 0 for none.
# auto gives worker i CPU i mod 2 (nginx counts the online CPUs).
conf_masks() {
    local n=${1%%:*} kind i words
    kind_of "$1"
    kind=$REPLY
    masks=()
    IFS=, read -ra words <<<"$kind"
    for ((i = 0; i < n; i++)); do
        case $kind in
        none) masks+=(0) ;;
        auto) masks+=($((1 << i % 2))) ;;
        *) masks+=($((2#${words[i]}))) ;;
        esac
    done
}

# Whether, with MASTERAFF_AUTO=cpuset, the library maps CONF's masks.
mapped() { kind_of "$1" && [ "$auto" = cpuset ] && [ "$REPLY" = auto ]; }

# fits CONF CPUSET: every worker of CONF can pin within the cpuset (nginx
# says [alert] where the kernel refuses a mask: the sequences stay clear).
fits() {
    local m
    mapped "$1" && return 0
    conf_masks "$1"
    for m in "${masks[@]}"; do
        ((m == 0 || m & $2)) || return 1
    done
}

# write_conf_of CONF: nginx.conf for it.
write_conf_of() {
    local affinity=
    kind_of "$1"
    [ "$REPLY" = none ] || affinity=${REPLY//,/ }
    if cached "$1"; then
        write_conf "$affinity" "" "${1%%:*}"
    else
        write_many_conf "${1%%:*}" "$affinity"
    fi
}

# ---- the plan, drawn from the seed alone: a seed replays it ----

rng=1
draw() { # draw N: REPLY = the next number in [0, N)
    rng=$(((rng * 1103515245 + 12345) & 0x7fffffff))
    REPLY=$(((rng >> 16) % $1))
}

pick() { # pick WORD...: REPLY = one of them
    draw $#
    shift "$REPLY"
    REPLY=$1
}

# draw_masks N: REPLY = N distinct masks, each with CPU 0 or 1 in it, the
# other bits CPUs this machine has not (the kernel drops them; nginx's
# error.log names them: which worker asked for which mask is known).
draw_masks() {
    local n=$1 top=256 taken=" " k=0 m words=
    draw 2
    ((REPLY == 0 && n <= 3)) && top=4
    while ((k < n)); do
        draw "$top"
        m=$REPLY
        ((m & 3)) && [[ $taken != *" $m "* ]] || continue
        taken+="$m "
        k=$((k + 1))
        binary "$m"
        words+=${words:+,}$REPLY
    done
    REPLY=$words
}

# draw_conf: REPLY = a configuration of 1-8 workers, with a cache or not,
# that fits the cpuset.
draw_conf() {
    local n kind cache
    while :; do
        draw 8
        n=$((REPLY + 1))
        pick none auto masks masks
        kind=$REPLY
        [ "$kind" = masks ] && draw_masks "$n" && kind=$REPLY
        pick "" "" "" :nocache
        cache=$REPLY
        fits "$n:$kind" "$g_cs" && break
    done
    REPLY=$n:$kind$cache
}

gen_start() {
    local tree scope=package io load cpuset=-
    pick twopkg fournode
    tree=$REPLY
    [ "$tree" = twopkg ] || { pick package node && scope=$REPLY; }
    pick off cpuset
    auto=$REPLY
    pick seen seen hidden
    io=$REPLY
    pick idle idle busy
    load=$REPLY
    g_cs=3
    if [ -n "$cg" ]; then
        pick 0-1 0-1 0 1
        cpuset=$REPLY
        bits_of "$cpuset"
        g_cs=$REPLY
    fi
    draw_conf
    g_conf=$REPLY g_prev=$REPLY
    plan+=("start tree=$tree scope=$scope auto=$auto io=$io load=$load cpuset=$cpuset conf=$g_conf")
}

gen_reload() {
    g_prev=$g_conf
    draw_conf
    g_conf=$REPLY
    plan+=("reload $g_conf")
}

# One to three children at once: any worker (worker 0 twice as likely),
# the cache manager, the cache loader.
gen_kill() {
    local roles=(w0) i n=${g_conf%%:*} k victims=
    for ((i = 0; i < n; i++)); do roles+=("w$i"); done
    roles+=(manager loader)
    draw 3
    n=$REPLY
    for ((k = 0; k <= n; k++)); do
        pick "${roles[@]}"
        [[ ,$victims, == *",$REPLY,"* ]] || victims+=${victims:+,}$REPLY
    done
    plan+=("kill $victims")
}

# A new cpuset among the ones that leave every worker a CPU, of the
# configuration and of the one before (nginx respawns a worker killed
# before a reload told it to quit).
gen_cpuset() {
    local c cpus fit=()
    for c in 0 1 0-1; do
        bits_of "$c"
        cpus=$REPLY
        ((cpus != g_cs)) && fits "$g_conf" "$cpus" && fits "$g_prev" "$cpus" && fit+=("$c")
    done
    [ ${#fit[@]} -gt 0 ] && [ -n "$cg" ] || return 0
    pick "${fit[@]}"
    plan+=("cpuset $REPLY")
    bits_of "$REPLY"
    g_cs=$REPLY
}

# taskset -p on the master, to CPUs the cpuset allows.
gen_taskset() {
    local c fit=()
    for c in 0 1 0-1; do
        bits_of "$c"
        ((REPLY & g_cs)) && fit+=("$c")
    done
    pick "${fit[@]}"
    plan+=("taskset $REPLY")
}

gen_gap() {
    draw 4
    ((REPLY == 0)) && return
    draw 300
    plan+=("sleep $REPLY")
}

# What can happen to a stopped master: signals and changes around it;
# and while new workers are slow to pin, that too (a master stopped while
# children die reaps them in one wake-up).
gen_signal() {
    pick reload kill kill usr1 cpuset taskset loader-exit stopped
    case $REPLY in
    reload | kill | cpuset | taskset) "gen_$REPLY" ;;
    stopped) [ "$1" = hold ] && gen_around stop cont || gen_kill ;;
    *) plan+=("$REPLY") ;;
    esac
}

# gen_around OPEN CLOSE: up to two of those between OPEN and CLOSE.
gen_around() {
    local k n
    plan+=("$1")
    draw 3
    n=$REPLY
    for ((k = 0; k < n; k++)); do
        gen_signal "$1"
        gen_gap
    done
    plan+=("$2")
}

gen_action() {
    draw 100
    if ((REPLY < 25)); then gen_reload
    elif ((REPLY < 50)); then gen_kill
    elif ((REPLY < 57)); then plan+=(refused)
    elif ((REPLY < 64)); then plan+=(loader-exit)
    elif ((REPLY < 68)); then plan+=(usr1)
    elif ((REPLY < 74)); then
        draw 300 && local g1=$REPLY
        draw 300 && plan+=("upgrade $g1 $REPLY")
    elif ((REPLY < 82)); then gen_cpuset
    elif ((REPLY < 88)); then gen_taskset
    elif ((REPLY < 94)); then gen_around stop cont
    else gen_around hold release
    fi
}

# gen_plan SEED: plan = a start and 2-6 steps with gaps, quiet points
# among them and at the end.
gen_plan() {
    local k steps
    rng=$1
    plan=()
    gen_start
    draw 2
    ((REPLY)) && plan+=(quiet)
    draw 5
    steps=$((REPLY + 2))
    for ((k = 0; k < steps; k++)); do
        gen_action
        gen_gap
        draw 3
        ((REPLY)) || [ "${plan[-1]}" = quiet ] || plan+=(quiet)
        [ "${plan[-1]}" != quiet ] || g_prev=$g_conf
    done
    [ "${plan[-1]}" = quiet ] || plan+=(quiet)
}

# ---- the sequence's state, as its steps made it ----

m=           # the master under test
masters=""   # every master the sequence started (USR2 makes more)
retiring=""  # the old master of the last upgrade
conf=        # the configuration in force
cs=3         # the cpuset's CPUs
req=$ALL     # what the master's original mask derives from: all CPUs, or taskset -p's
admin=0      # taskset -p set the master's mask
auto=off scope=package tree=
must_go=""   # processes to be gone at the next quiet point
killed=""    # processes the sequence killed (nginx's alerts name them)
exempt=""    # children alive at a change of the cpuset or of the master's mask
allowed=0    # moves of the master the steps since the last quiet point explain
unpinned_reloads="" # when reloads to a configuration without affinity came (s)
external=0   # the cpuset or taskset -p changed the master's mask since then
woken=1      # the master woke (a signal, a child's death) since the cpuset changed
seen=1       # the master woke since the last taskset -p
back=""      # the master's mask, req and admin as the library last saw them
reopened=0   # USR1 was sent in this sequence
mark=0       # error.log's lines at the last quiet point
last_mask=   # the master's mask then (empty for a master that had none)
declare -A asked # worker pid -> the mask nginx's error.log says it asked for
notes=()     # what each step found (the pids it killed)
failure=""

fail() { failure=$1; return 1; }

# kernel_mask REQUEST: REPLY = the mask the kernel gives a task that asked
# for REQUEST in the cpuset: what is left of it, or the whole cpuset.
kernel_mask() {
    REPLY=$(($1 & cs))
    ((REPLY)) || REPLY=$cs
}

# The master's original mask: what it would run on without the library.
original() { kernel_mask "$req"; }

# The master's children by role, in fork order: named workers, workers
# shutting down, children that bear the master's title still (forked, not
# yet pinned and named), cache managers and loaders. (Read without a
# fork: the quiet points poll it, on machines whose CPUs are all busy.)
survey() {
    local p title kids=()
    named=() shutting=() young=() managers=() loaders=()
    read -ra kids 2>/dev/null <"/proc/$m/task/$m/children"
    for p in "${kids[@]}"; do
        title=
        IFS= read -r -d '' title 2>/dev/null <"/proc/$p/cmdline"
        case $title in
        *"worker process is shutting down"*) shutting+=("$p") ;;
        *"worker process"*) named+=("$p") ;;
        *"cache manager process"*) managers+=("$p") ;;
        *"cache loader process"*) loaders+=("$p") ;;
        *"master process"*) young+=("$p") ;;
        esac
    done
}

# asked[pid] = the CPUs each live worker asked for, from nginx's own lines
# ("sched_setaffinity(): using cpu #N"); an exit line ends a pid's entry.
read_asked() {
    local pid mask
    asked=()
    while read -r pid mask; do
        asked[$pid]=$mask
    done < <(awk '
        / sched_setaffinity\(\): using cpu #/ {
            split($4, a, "#"); c = substr($NF, 2) + 0
            if (c < 62) mask[a[1]] += 2 ^ c
        }
        / exited (with code|on signal) / {
            for (i = 5; i <= NF; i++) if ($i == "exited") delete mask[$(i - 1)]
        }
        END { for (p in mask) printf "%s %d\n", p, mask[p] }' "$T/error.log")
}

# Whether the masks the named workers asked for are the configuration's.
asks_conf() {
    local w k
    local -A left=()
    conf_masks "$conf"
    [ ${#named[@]} -eq ${#masks[@]} ] || return 1
    for k in "${masks[@]}"; do left[$k]=$((${left[$k]:-0} + 1)); done
    for w in "${named[@]}"; do
        k=${asked[$w]:-0}
        ((${left[$k]:-0} > 0)) || return 1
        left[$k]=$((left[$k] - 1))
    done
}

# state_of PID: REPLY = its state (R, S, T, Z...), empty once it is gone.
state_of() {
    local line=
    read -r line 2>/dev/null <"/proc/$1/stat"
    line=${line##*) }
    REPLY=${line%% *}
}

# Whether the master runs (not stopped, not gone).
running() {
    state_of "$m"
    case $REPLY in "" | T | Z) return 1 ;; esac
}

# Whether the master has taken in every signal sent to it: it sleeps, with
# none pending (nginx reads a reload's configuration before it sleeps).
signals_handled() {
    state_of "$m"
    [ "$REPLY" = S ] &&
        ! grep -qE '^(SigPnd|ShdPnd):.*[1-9a-f]' "/proc/$m/status"
}

# The quiet point's first half: nginx has done what the steps asked. The
# processes killed, replaced and reloaded away are gone, the master runs,
# its workers are the configuration's, each named (pinned) and waiting in
# its event loop, with one cache manager if it has a cache.
settled() {
    running || return 1
    all_gone "$must_go" || return 1
    survey
    local cache=0
    cached "$conf" && cache=1
    [ ${#shutting[@]} -eq 0 ] && [ ${#young[@]} -eq 0 ] && [ ${#managers[@]} -eq $cache ] || return 1
    local w wchan
    for w in "${named[@]}"; do
        wchan=
        read -r wchan 2>/dev/null <"/proc/$w/wchan"
        [[ $wchan == *epoll* ]] || return 1
    done
    read_asked
    asks_conf
}

# Whether every thread of the master sleeps: none has an event of the
# children's to take in (a report wakes its reader, which runs until it
# has acted on it).
master_idle() {
    local t
    for t in /proc/"$m"/task/*; do
        state_of "$m/task/${t##*/}"
        [ "$REPLY" = S ] || return 1
    done
}

# expect_master: exps = where the master may be (one place, but for a
# worker 0 the oracle cannot tell from its siblings), why = why.
expect_master() {
    local w first orig eff place
    original
    orig=$REPLY exps=" $REPLY "
    if ((admin)); then
        why="taskset -p's mask: the administrator's"
        return
    fi
    conf_masks "$conf"
    first=${masks[0]}
    if ((first == 0)); then
        list_of "$orig"
        why="its original mask, CPUs $REPLY: no worker pins"
        return
    fi
    # auto asks the first CPU for worker 2, 4... too; in one place but
    # where a cpuset change came between their pins (a mapping kept).
    exps=" " why="worker 0, the one of"
    for w in "${named[@]}"; do
        [ "${asked[$w]:-0}" = "$first" ] || continue
        mask_of "$w"
        eff=$REPLY
        list_of "$eff"
        why+=" $w (on CPUs $REPLY)"
        units_of "$eff"
        place=$((REPLY & orig))
        ((place)) || place=$orig
        [[ $exps == *" $place "* ]] || exps+="$place "
    done
    why+=" that asked for the first mask"
}

# Whether the master is where it may be; exp = its mask.
master_placed() {
    mask_of "$m"
    exp=$REPLY
    [[ $exps == *" $exp "* ]]
}

# units_of MASK: REPLY = the scope units (packages, or nodes) of its CPUs,
# as the fake tree says.
units_of() {
    local c f u=0 sys=$tree/devices/system
    for ((c = 0; c < 62; c++)); do
        (($1 >> c & 1)) || continue
        if [ "$scope" = node ]; then
            for f in "$sys"/node/node*/cpulist; do
                bits_of "$(<"$f")"
                ((REPLY >> c & 1)) && u=$((u | REPLY))
            done
        else
            bits_of "$(<"$sys/cpu/cpu$c/topology/package_cpus_list")"
            u=$((u | REPLY))
        fi
    done
    REPLY=$u
}

# where_asked MASK: REPLY = where a child that asked for MASK (0: none) runs:
# the master's original mask for one that did not pin; with auto mapped
# into the allowed CPUs, the CPU of its rank there (on two CPUs: what of
# the ask they allow, else all they allow); else what the cpuset allows.
where_asked() {
    original
    local orig=$REPLY
    if (($1 == 0)); then
        REPLY=$orig
    elif mapped "$conf"; then
        REPLY=$(($1 & orig))
        ((REPLY)) || REPLY=$orig
    else
        REPLY=$(($1 & cs))
    fi
}

# Each worker and the cache manager where the masks put it.
check_children() {
    local p want ask
    for p in "${named[@]}" "${managers[@]}"; do
        [[ " $exempt " == *" $p "* ]] && continue
        where_asked "${asked[$p]:-0}"
        want=$REPLY
        mask_of "$p"
        ((REPLY == want)) && continue
        list_of "${asked[$p]:-0}"
        ask=$REPLY
        list_of "$want"
        fail "child $p (asked for CPUs $ask) is on CPUs $(cpus_of "$p"), not on CPUs $REPLY"
        return 1
    done
}

# nginx's own [alert] or [emerg] for what the sequence did: the directive
# of a refused reload, a child it killed ("exited on signal 9", or the
# master's kill() of it failing).
expected_alert() {
    local pid
    [[ $1 == *'unknown directive "masteraff_refused"'* ]] && return 0
    # A reload and USR1 in one wake-up (the master stopped): the new
    # workers fail to reopen error.log, with nginx alone too (STOP, HUP,
    # USR1, CONT: 20 such lines of 8 workers).
    ((reopened)) && [[ $1 == *"open() \"$T/error.log\" failed (13: Permission denied)"* ]] && return 0
    pid=$(sed -nE 's/.* ([0-9]+) exited on signal 9$/\1/p; s/.* kill\(([0-9]+), [0-9]+\) failed .*/\1/p' <<<"$1")
    [ -n "$pid" ] && [[ " $killed " == *" $pid "* ]]
}

check_alerts() {
    local line
    while IFS= read -r line; do
        expected_alert "$line" || fail "$line" || return 1
    done < <(grep -ahE '\[(alert|emerg)\]' "$T/error.log" "$T/stderr")
}

# Reloads to a configuration without affinity in the last 6 s: the library
# takes the master back to its original mask 3 s after such a reload's
# fork (README), maybe after the next quiet point.
late_returns() {
    local t n=0
    for t in $unpinned_reloads; do
        ((SECONDS - t <= 6)) && n=$((n + 1))
    done
    REPLY=$n
}

# The library's lines since the last quiet point: none above warn; no more
# moves of the master than the steps explain: elsewhere than where it ends,
# one fewer than them (the last step's place is where it ends), and to
# where it ends, as many as them and the late returns; and when the master
# went elsewhere by the library's own doing, the last move names where.
check_lines() {
    local lines moves said away=0 here=0
    lines=$(tail -n +"$((mark + 1))" "$T/error.log" | grep -a 'masteraff: ')
    grep -qE '\[(error|crit|alert|emerg)\] [0-9#]+: masteraff: ' <<<"$lines" &&
        { fail "a line of the library's above warn"; return 1; }
    moves=$(grep -a "masteraff: master $m -> CPUs " <<<"$lines" | sed -nE 's/.* -> CPUs ([0-9,-]+) .*/\1/p')
    for said in $moves; do
        bits_of "$said"
        ((REPLY == exp)) && here=$((here + 1)) || away=$((away + 1))
    done
    # The last step's place is where the master ends, unless the cpuset or
    # an administrator put it elsewhere after the library's last move.
    ((away <= (allowed > 0 ? allowed - 1 + external : 0))) ||
        { fail "the master moved $away times elsewhere than where it ends since the last quiet point, after $allowed steps that move it"; return 1; }
    late_returns
    ((here <= allowed + REPLY)) ||
        { fail "the master moved $here times to where it ends since the last quiet point, after $allowed steps that move it"; return 1; }
    ((external == 0)) && [ -n "$last_mask" ] && ((last_mask != exp)) || return 0
    said=$(tail -1 <<<"$moves")
    bits_of "$said"
    ((REPLY == exp)) || fail "the master went elsewhere, but its last move line says CPUs ${said:-(none)}"
}

# The oracle: waits for nginx to settle and the master to be idle where it
# must be, then checks everything else.
quiet() {
    wait_for settled 60 || { fail "nginx did not settle"; return 1; }
    if ((woken)); then
        expect_master
    else
        # With no thread, the library takes a cpuset's change in when the
        # master next wakes or forks: till then its mask is the kernel's.
        mask_of "$m"
        exps=" $REPLY " why="the kernel's, the master not woken since the cpuset changed"
        notes[step]="not woken since the cpuset changed: the master's mask not checked"
    fi
    wait_for "master_idle && master_placed" 15 || {
        local e wanted=
        for e in $exps; do
            list_of "$e"
            wanted+="${wanted:+ or }CPUs $REPLY"
        done
        fail "the master is on CPUs $(cpus_of "$m"), not on $wanted: $why"
        return 1
    }
    check_children && check_lines || return 1
    serves || { fail "nginx does not serve"; return 1; }
    check_alerts || return 1
    mark=$(wc -l <"$T/error.log")
    must_go=""
    # Not woken, the master has yet to take the cpuset's change in: the
    # moves it explains come later.
    if ((woken)); then
        allowed=0 external=0 last_mask=$exp
    else
        last_mask=
    fi
}

# ---- the steps ----

# The fake trees, made once.
tree_of() {
    local shape=$1
    [ "$shape" = fournode ] && shape=interleaved128
    [ -d "$T/$1" ] || "$SRCDIR/test/mktree" "$shape" "$T/$1"
    REPLY=$T/$1
}

step_start() {
    local kv io load cpuset
    for kv in "$@"; do
        case $kv in
        tree=*) tree_of "${kv#*=}" && tree=$REPLY ;;
        scope=*) scope=${kv#*=} ;;
        auto=*) auto=${kv#*=} ;;
        io=*) io=${kv#*=} ;;
        load=*) load=${kv#*=} ;;
        cpuset=*) cpuset=${kv#*=} ;;
        conf=*) conf=${kv#*=} ;;
        esac
    done
    cs=3 req=$ALL admin=0
    if [ "$cpuset" != - ]; then
        echo "$cpuset" >"$cg/cpuset.cpus" || { fail "cannot set the cpuset to $cpuset"; return 1; }
        bits_of "$cpuset"
        cs=$REPLY
    fi
    # A hog on each CPU, forked from a subshell that exits. Once in 1,660
    # sequences this shell hung in wait4(-1) with the hogs its only
    # children, its foreground child gone; without a child that never
    # ends, such a wait returns.
    if [ "$load" = busy ]; then
        bg_pids+=($(sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!))
        bg_pids+=($(sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!))
    fi
    write_conf_of "$conf"
    (
        [ "$cpuset" = - ] || echo "$BASHPID" >"$cg/cgroup.procs"
        [ "$io" = seen ] || LIB="$NOIO $LIB"
        LIB="$HOLD $LIB"
        [ "$auto" = off ] || export MASTERAFF_AUTO=$auto
        MASTERAFF_SCOPE=$scope MASTERAFF_SYSFS=$tree start_nginx
    ) || { fail "nginx does not start$(port_takers)"; return 1; }
    wait_for '[ -s "$T/nginx.pid" ]' || { fail "nginx wrote no pid file"; return 1; }
    m=$(master_pid)
    masters=$m retiring="" allowed=1 last_mask=
}

step_reload() {
    write_conf_of "$1"
    conf=$1
    must_go+=" $(pgrep -P "$m" | tr '\n' ' ')"
    allowed=$((allowed + 1)) woken=1 seen=1
    kind_of "$1"
    [ "$REPLY" != none ] || unpinned_reloads+=" $SECONDS"
    kill -HUP "$m"
}

# A configuration nginx refuses: it reads it, says [emerg], forks nothing;
# then the good one is put back.
step_refused() {
    local emergs
    # A reload not yet read would read the bad file.
    wait_for signals_handled || { fail "the master does not take its signals in"; return 1; }
    emergs=$(grep -acF '[emerg]' "$T/error.log")
    cp "$T/nginx.conf" "$T/good.conf"
    { cat "$T/good.conf" && echo "masteraff_refused on;"; } >"$T/nginx.conf.new"
    mv "$T/nginx.conf.new" "$T/nginx.conf"
    kill -HUP "$m"
    woken=1 seen=1
    wait_for "[ \$(grep -acF '[emerg]' '$T/error.log') -gt $emergs ]"
    local rc=$?
    mv "$T/good.conf" "$T/nginx.conf"
    ((rc == 0)) || fail "nginx did not refuse the configuration"
}

# role_pid ROLE: REPLY = the child playing it now, or empty. Worker k is
# the named worker that asked for the configuration's k-th mask (for auto,
# the (k/2)-th that asked for its CPU; without affinity, the k-th named),
# else a child not yet named (worker k being respawned, or forked by a
# reload).
role_pid() {
    local k cands=() w
    REPLY=
    case $1 in
    manager) [ ${#managers[@]} -eq 0 ] || REPLY=${managers[-1]} ;;
    loader) [ ${#loaders[@]} -eq 0 ] || REPLY=${loaders[-1]} ;;
    w*)
        k=${1#w}
        conf_masks "$conf"
        for w in "${named[@]}"; do
            [ "${asked[$w]:-0}" = "${masks[k]:--}" ] && cands+=("$w")
        done
        kind_of "$conf"
        case $REPLY in
        none) k=$((k < ${#cands[@]} ? k : ${#cands[@]} - 1)) ;;
        auto) k=$((k / 2 < ${#cands[@]} ? k / 2 : ${#cands[@]} - 1)) ;;
        *) k=$((${#cands[@]} - 1)) ;;
        esac
        if ((k >= 0)); then
            REPLY=${cands[k]}
        elif [ ${#young[@]} -gt 0 ]; then
            REPLY=${young[0]}
        else
            REPLY=
        fi
        ;;
    esac
}

step_kill() {
    local role pids=() said=()
    survey
    read_asked
    for role in ${1//,/ }; do
        role_pid "$role"
        said+=("$role=${REPLY:-none}")
        [ -n "$REPLY" ] && pids+=("$REPLY")
    done
    notes[step]="${said[*]}"
    [ ${#pids[@]} -eq 0 ] && return 0
    kill -9 "${pids[@]}" 2>/dev/null
    woken=1 seen=1
    killed+=" ${pids[*]}"
    must_go+=" ${pids[*]}"
}

# The cache loader's exit: it exits 0 on SIGTERM, as after its work.
step_loader_exit() {
    survey
    notes[step]="loader=${loaders[*]:-none}"
    [ ${#loaders[@]} -eq 0 ] && return 0
    kill -TERM "${loaders[@]}"
    woken=1 seen=1
    must_go+=" ${loaders[*]}"
}

# A binary upgrade: USR2; once the new master is there, WINCH and QUIT to
# the old one, with the gaps given (ms).
step_upgrade() {
    local old=$m
    # nginx ignores USR2 while the master of a previous upgrade lives.
    wait_for "all_gone '$retiring'" || { fail "the old master does not exit"; return 1; }
    kill -USR2 "$old"
    wait_for "[ -s $T/nginx.pid.oldbin ] && [ -s $T/nginx.pid ] && [ \"\$(master_pid)\" != $old ]" ||
        { fail "USR2 started no new master"; return 1; }
    m=$(master_pid)
    masters+=" $m"
    notes[step]="new master $m"
    sleep "$(ms "$1")"
    kill -WINCH "$old"
    sleep "$(ms "$2")"
    kill -QUIT "$old"
    must_go+=" $old"
    retiring=$old admin=0 allowed=1 last_mask= woken=1 seen=1
}

# Children alive when the cpuset or the master's mask changes may have
# pinned under the old one: where auto's mapping put them is not checked.
exempt_children() { exempt+=" $(pgrep -P "$m" | tr '\n' ' ')"; }

step_cpuset() {
    exempt_children
    echo "$1" >"$cg/cpuset.cpus" || { fail "cannot set the cpuset to $1"; return 1; }
    bits_of "$1"
    cs=$REPLY
    allowed=$((allowed + 1)) external=1 woken=0
}

# taskset -p on the master. Not to the CPUs it is on: the library could
# not see that (the kernel keeps the mask asked for, and gives it back
# when the cpuset changes, but shows none).
step_taskset() {
    mask_of "$m"
    local now=$REPLY
    bits_of "$1"
    if (((REPLY & cs) == now)); then
        notes[step]="not run: the master is on CPUs $1"
        return 0
    fi
    local want=$REPLY
    exempt_children
    taskset -p -c "$1" "$m" >/dev/null || fail "taskset -p -c $1 failed"
    external=1
    # Tasksets with no wake-up between them that end where the library
    # last saw the master are none that it could see.
    ((seen)) && back="$now $req $admin"
    if ((!seen && (want & cs) == ${back%% *})); then
        read -r _ req admin <<<"$back"
        notes[step]="back where the library last saw the master"
    else
        req=$want admin=1
    fi
    seen=0
}

ms() { printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)); }

run_step() { # run_step WORDS...
    local what=$1
    shift
    case $what in
    start) step_start "$@" ;;
    quiet) quiet ;;
    reload) step_reload "$@" ;;
    refused) step_refused ;;
    kill) step_kill "$@" ;;
    loader-exit) step_loader_exit ;;
    usr1) kill -USR1 "$m" && woken=1 seen=1 reopened=1 ;;
    upgrade) step_upgrade "$@" ;;
    cpuset) step_cpuset "$@" ;;
    taskset) step_taskset "$@" ;;
    stop) kill -STOP "$m" ;;
    cont) kill -CONT "$m" ;;
    hold) : >"$HOLDPIN_FILE" ;;
    release) rm -f "$HOLDPIN_FILE" ;;
    sleep) sleep "$(ms "$1")" ;;
    *) fail "unknown step: $what" ;;
    esac
}

# Who listens on the port, for a start that could not bind it.
port_takers() {
    local pids
    pids=$(ss -Hltnp "sport = :$PORT" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)
    [ -z "$pids" ] ||
        echo "; port $PORT held by (pid ppid state command): $(ps -o pid=,ppid=,stat=,args= -p "$(echo $pids | tr ' ' ,)" | tr -s ' \n' ' ')"
}

# Kills what the sequence started (in the cpuset, or its live masters and
# their children) and empties the logs for the next one.
end_sequence() {
    local p
    kill -9 "${bg_pids[@]}" 2>/dev/null
    bg_pids=()
    if [ -n "$cg" ]; then
        kill_cpuset
    else
        for p in $masters; do
            grep -qF "$T/nginx.conf" "/proc/$p/cmdline" 2>/dev/null || continue
            kill -9 $(pgrep -P "$p") "$p" 2>/dev/null
            wait_for "gone $p && [ -z \"\$(pgrep -P $p)\" ]"
        done
    fi
    # A process leaves cgroup.procs as it starts to exit, before it has
    # closed its listening socket: the next start needs the port.
    wait_for "[ -z \"\$(ss -Hltn 'sport = :$PORT')\" ]" ||
        diag "the port is still taken after 60 s$(port_takers)"
    rm -f "$T/nginx.pid" "$T/nginx.pid.oldbin" "$HOLDPIN_FILE"
    : >"$T/error.log"
    : >"$T/stderr"
    masters=""
}

# The failure's account: the plan (the failing step marked), what the
# steps found, the children, the library's lines.
show_failure() { # show_failure NAME
    local k
    diag "$1: $failure"
    for k in "${!plan[@]}"; do
        diag "$( ((k == step)) && echo '>>' || echo '  ') ${plan[k]}${notes[k]:+   [${notes[k]}]}"
    done
    survey
    diag "master $m on CPUs $(cpus_of "$m"); workers ${named[*]}; shutting down ${shutting[*]}; young ${young[*]}; cache manager ${managers[*]}; loader ${loaders[*]}"
    for k in "${named[@]}"; do
        list_of "${asked[$k]:-0}"
        diag "  worker $k asked for CPUs $REPLY, is on CPUs $(cpus_of "$k")"
    done
    grep -ahE 'masteraff: |\[(alert|emerg)\]' "$T/stderr" "$T/error.log" 2>/dev/null | tail -40 | sed 's/^/#   /'
    if [ -n "${SCENARIO_PLAN:-}" ]; then
        diag "replay: SCENARIO_PLAN=$SCENARIO_PLAN prove -v test/scenarios.t"
    else
        diag "replay: SCENARIO_SEED=${1#seed } SCENARIO_COUNT=1 prove -v test/scenarios.t"
    fi
}

# run_sequence SEED: draws its plan and runs it. A sequence that fails
# is shown, then played once more: a failure that replays is a failed
# test; one that does not (a timing the oracle does not model, or a race
# in the library) is said, with its seed, in the test's name and at the
# end, and does not fail a run of many sequences.
run_sequence() {
    local first
    gen_plan "$1"
    play_plan
    if [ -z "$failure" ]; then
        end_sequence
        ok 0 "seed $1: ${#plan[@]} steps"
        return
    fi
    show_failure "seed $1"
    end_sequence
    first="step $step (${plan[step]%% *}): $failure"
    play_plan
    if [ -z "$failure" ]; then
        ok 0 "seed $1: ${#plan[@]} steps, at the second try (the first failed at $first)"
        once+=" $1"
    else
        ok 1 "seed $1: $first; and again at step $step: $failure"
        show_failure "seed $1"
        failed+=" $1"
    fi
    end_sequence
}

# play_plan: runs the plan; sets failure (empty when it passed) and step.
play_plan() {
    notes=() failure="" killed="" exempt="" must_go="" mark=0 external=0 unpinned_reloads="" woken=1 seen=1 reopened=0
    for step in "${!plan[@]}"; do
        # shellcheck disable=SC2086 # a step is words
        run_step ${plan[step]} || break
    done
}

# run_plan NAME: runs the plan once, one test.
run_plan() {
    play_plan
    if [ -z "$failure" ]; then
        ok 0 "$1: ${#plan[@]} steps"
    else
        ok 1 "$1: step $step (${plan[step]%% *}): $failure"
        show_failure "$1"
        failed+=" ${1#seed }"
    fi
    end_sequence
}

cg=
make_cpuset 0-1 || diag "no cgroup cpuset can be made here: no cpuset steps"
trap 'end_sequence; cleanup; [ -z "$cg" ] || drop_cpuset' EXIT

failed="" once=""
started=$SECONDS
if [ -n "${SCENARIO_PLAN:-}" ]; then
    # The plan as a failure printed it, its marks and notes left out.
    mapfile -t plan < <(sed -E 's/^# *(>> *)?//; s/ *\[.*\]$//; /^$/d' "$SCENARIO_PLAN")
    run_plan "the plan in $SCENARIO_PLAN"
else
    diag "seed $SEED, $COUNT sequences: SCENARIO_SEED=$SEED SCENARIO_COUNT=$COUNT runs them again"
    for ((i = 0; i < COUNT; i++)); do
        run_sequence $((SEED + i))
    done
    diag "$COUNT sequences in $((SECONDS - started)) s${failed:+; failed:$failed}${once:+; failed once, passed when played again:$once}"
fi
done_testing
