# Shared by the tests that check a Dockerfile without Docker (container.t,
# container-alpine.t): its logical lines, a lint of its syntax, its
# stages, ARG expansion, and its build stage run on the sources. Sourced
# after lib.sh, with DOCKERFILE set.

# Logical lines: comments and blank lines dropped, continuations joined.
logical_lines() {
    awk '
    /^[[:space:]]*#/ || /^[[:space:]]*$/ { next }
    {
        line = cont ? line " " $0 : $0
        if (sub(/[[:space:]]*\\[[:space:]]*$/, "", line)) { cont = 1; next }
        cont = 0
        print line
    }
    END { if (cont) print "\\UNTERMINATED " line }' "$1"
}

# Prints every syntax problem of the Dockerfile, one a line: instructions
# it does not know, something other than ARG before the first FROM, a bad
# FROM, COPY --from naming no earlier stage, a malformed ENV, ARG or
# WORKDIR, an empty RUN or CMD, a continuation at the end of the file.
dockerfile_lint() {
    logical_lines "$1" | awk '
    BEGIN {
        split("FROM RUN CMD LABEL MAINTAINER EXPOSE ENV ADD COPY ENTRYPOINT " \
              "VOLUME USER WORKDIR ARG ONBUILD STOPSIGNAL HEALTHCHECK SHELL", k)
        for (i in k) known[k[i]] = 1
        stages = 0
    }
    function problem(msg) { print NR ": " msg ": " $0 }
    {
        ins = toupper($1)
        if ($1 == "\\UNTERMINATED") { problem("line continuation at the end of the file"); next }
        if (!(ins in known)) { problem("unknown instruction " $1); next }
        if (stages == 0 && ins != "FROM" && ins != "ARG") { problem("before the first FROM"); next }
        n = 0
        for (i = 2; i <= NF; i++) if ($i !~ /^--/) a[++n] = $i
        if (ins == "FROM") {
            if (n == 1 || (n == 3 && toupper(a[2]) == "AS")) {
                if (n == 3) {
                    if (a[3] in stage) problem("stage " a[3] " named twice")
                    stage[tolower(a[3])] = 1
                }
                stages++
            } else problem("FROM wants IMAGE [AS NAME]")
        } else if (ins == "COPY" || ins == "ADD") {
            if (n < 2) problem(ins " wants a source and a destination")
            for (i = 2; i <= NF; i++) {
                if ($i !~ /^--/) break
                if ($i ~ /^--from=/) {
                    f = substr($i, 8)
                    if (!(tolower(f) in stage) && !(f ~ /^[0-9]+$/ && f + 0 < stages - 1) && f !~ /[:\/]/)
                        problem("--from=" f " names no earlier stage")
                } else if ($i !~ /^--(chown|chmod)=./ && $i != "--link")
                    problem("unknown flag " $i)
            }
        } else if (ins == "ENV") {
            if (n == 0) problem("empty ENV")
            else if (a[1] !~ /=/) { if (n < 2) problem("ENV wants NAME=VALUE") }
            else for (i = 1; i <= n; i++)
                if (a[i] !~ /^[A-Za-z_][A-Za-z0-9_]*=/) problem("bad ENV " a[i])
        } else if (ins == "ARG") {
            if (n != 1 || a[1] !~ /^[A-Za-z_][A-Za-z0-9_]*(=.*)?$/) problem("ARG wants NAME[=DEFAULT]")
        } else if (ins == "WORKDIR") {
            if (n != 1) problem("WORKDIR wants one path")
        } else if (ins == "RUN" || ins == "CMD" || ins == "ENTRYPOINT") {
            if (n == 0) problem("empty " ins)
        }
    }
    END { if (stages == 0) print "no FROM" }'
}

# expand TEXT: TEXT with ${NAME} and $NAME replaced by the values in the
# associative array args (the caller's).
expand() {
    local s=$1 n
    for n in "${!args[@]}"; do s=${s//\$\{$n\}/${args[$n]}}; s=${s//\$$n/${args[$n]}}; done
    echo "$s"
}

# stage_lines NAME|last: the logical lines of one stage, FROM excluded.
stage_lines() {
    logical_lines "$DOCKERFILE" | awk -v want="$1" '
        toupper($1) == "FROM" { n++; name = (toupper($(NF - 1)) == "AS" ? tolower($NF) : ""); next }
        n && (name == want) { print; next }
        n { last[n] = last[n] $0 "\n" }
        END { if (want == "last") printf "%s", last[n] }'
}

# stage_env LINES: the ENV of a stage's lines, NAME=VALUE, one a line.
stage_env() {
    awk 'toupper($1) == "ENV" {
        if ($2 !~ /=/) { print $2 "=" $3; next }
        for (i = 2; i <= NF; i++) print $i }' <<<"$1"
}

# run_stage DIR [TARGETARCH]: the build stage's WORKDIR, COPY and RUN with
# its paths below DIR; the build context is the repository. apt-get and
# apk need the network and install what is here already (test/musl.t's
# musl-gcc stands for Alpine's gcc).
run_stage() {
    local stage=$1 workdir=/ rc=0 ins rest words dst
    mkdir -p "$stage"
    while read -r ins rest; do
        case ${ins^^} in
        WORKDIR) workdir=$rest; mkdir -p "$stage$workdir" ;;
        COPY)
            read -ra words <<<"$rest"
            dst=${words[-1]}
            [[ $dst == /* ]] || dst=$workdir/$dst
            mkdir -p "$stage$dst"
            # Unquoted on purpose: the sources are globs, expanded in the
            # context. A folder's contents are copied, as COPY does.
            # shellcheck disable=SC2068
            (cd "$SRCDIR" && for s in ${words[@]:0:${#words[@]}-1}; do
                if [ -d "$s" ]; then cp -r -- "$s/." "$stage$dst/" || exit 1
                else cp -- "$s" "$stage$dst/" || exit 1; fi
            done) || rc=1 ;;
        RUN)
            if [[ $rest == apt-get* || $rest == apk* ]]; then
                diag "build stage: skipped (network): RUN ${rest:0:60}..."
            else
                (cd "$stage$workdir" && TARGETARCH=${2:-} sh -c "$rest") >"$T/stage.log" 2>&1 || {
                    rc=1
                    sed 's/^/#   /' "$T/stage.log"
                }
            fi ;;
        esac
    done < <(stage_lines build)
    return $rc
}
