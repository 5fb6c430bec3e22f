#!/usr/bin/env bash
# masteraff's bash completion: commands, options, option values, the pids
# of nginx masters for status, and a program's own completion after it.
. "$(dirname "$0")/lib.sh"
PORT=18175

BC=/usr/share/bash-completion/bash_completion
[ -f "$BC" ] || skip_all "no bash-completion (apt-get install bash-completion)"

# comp WORD...: what completing the last word offers, sorted, on one line.
comp() {
    bash -c '
        . "$1" && . "$2" || exit 1
        shift 2
        COMP_WORDS=("$@") COMP_CWORD=$(($# - 1)) COMP_LINE="$*"
        COMP_POINT=${#COMP_LINE}
        _masteraff masteraff "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}" 2>/dev/null
        printf "%s\n" "${COMPREPLY[@]}" | sort -u | tr "\n" " "
    ' comp "$BC" "$SRCDIR/completion/masteraff" masteraff "$@" | sed 's/ $//'
}

is "$(comp "")" "status topology" "masteraff <TAB>: the commands"
is "$(comp st)" "status" "masteraff st<TAB>: status"
is "$(comp --s)" "--scope --sysfs" "options"
is "$(comp --a)" "--auto-cpuset" "--auto-cpuset"
is "$(comp --scope n)" "node" "--scope's values"
is "$(comp --log "")" "debug error info notice warn" "--log's values"
is "$(comp status --)" "--check --help --json --prometheus --sysfs --textfile" "status's options"
mkdir -p "$T/textfiles/sub" && touch "$T/textfiles/nginx.prom" "$T/textfiles/notes.txt"
is "$(comp status "--textfile=$T/textfiles/")" "$T/textfiles/nginx.prom $T/textfiles/sub" \
    "--textfile=: directories and .prom files"
is "$(comp topology -)" "--help --sysfs" "topology's options"
is "$(comp -- ech)" "echo" "after --, a program"
is "$(comp --dry-run -- ech)" "echo" "after options and --, a program"

write_conf "10 01"
start_nginx
wait_workers
m=$(master_pid)
grep -qw "$m" <<<"$(comp status "")"
ok $? "masteraff status <TAB>: the running master's pid ($m)"
! grep -qw "$(workers | cut -d' ' -f1)" <<<"$(comp status "")"
ok $? "not its workers' pids"
grep -qw "$m" <<<"$(comp status --textfile "")"
ok $? "after --textfile without =, the master's pid: the value is optional"
stop_nginx

done_testing
