#!/usr/bin/env bash
# The documents hold together: every link between the README, docs/ and
# the manual pages resolves (a file that exists, a heading that is there),
# every document in docs/ is reachable from the README and opens with what
# it is for, the README stays a front door (at most 250 lines, make demo
# and make check in its first 60), and the figures in docs/bench are what
# scripts/plots draws from the data files beside them. Needs no nginx.
set -uo pipefail
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
T=$(mktemp -d /tmp/masteraff-test.XXXXXX)
trap 'rm -rf "$T"' EXIT
n=0 failed=0
ok() { n=$((n + 1)); if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=$((failed + 1)); fi; }
diag() { sed 's/^/#   /'; }

# The anchors of a Markdown file's headings, as GitHub makes them: lower
# case, punctuation but '-' and '_' dropped, spaces as '-'.
anchors() {
    sed -n 's/^#\{1,6\} \(.*\)/\1/p' "$1" | tr 'A-Z' 'a-z' |
        sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'
}

# bad_links FILE...: "FILE: TARGET" for each relative link of FILE (text
# or image) whose file or heading is not there.
bad_links() {
    local f dir link path anchor
    for f in "$@"; do
        dir=$(dirname "$f")
        grep -o '](\([^)]*\))' "$f" | sed 's/^](\(.*\))$/\1/' | while IFS= read -r link; do
            case $link in http://* | https://* | mailto:*) continue ;; esac
            path=${link%%#*} anchor=
            [ "$path" != "$link" ] && anchor=${link#*#}
            [ -n "$path" ] && path=$dir/$path || path=$f
            if [ ! -e "$path" ]; then
                echo "$f: $link"
            elif [ -n "$anchor" ] && ! anchors "$path" | grep -qxF -- "$anchor"; then
                echo "$f: $link (no such heading)"
            fi
        done
    done
}

cd "$SRCDIR" || exit 1
docs=(docs/*.md)

is_empty() { # is_empty TEXT DESCRIPTION
    [ -z "$1" ]
    ok $? "$2"
    [ -z "$1" ] || diag <<<"$1"
}

# ---- links ----

is_empty "$(bad_links README.md "${docs[@]}")" "every link of README.md and docs/*.md resolves, headings included"

# The checker finds what is broken: a copy with a missing file, a missing
# heading and a good link.
mkdir -p "$T/d"
printf '# A\n\nFor testing.\n\n## Some heading\n\n[x](nowhere.md) [y](#no-heading) [z](#some-heading)\n' >"$T/d/a.md"
found=$(bad_links "$T/d/a.md")
[ "$found" = "$T/d/a.md: nowhere.md
$T/d/a.md: #no-heading (no such heading)" ]
ok $? "the link checker finds a missing file and a missing heading, and passes a good link" || diag <<<"$found"

# The manual pages name documents and files of the repository by path.
missing=
for ref in $(grep -ohE '(docs/[A-Za-z0-9_./-]+\.(md|svg)|README\.md)' man/*.1 man/*.7 | sort -u); do
    [ -e "$ref" ] || missing="$missing $ref"
done
is_empty "$missing" "every document the manual pages name exists"

# ---- every document reachable, and saying what it is for ----

unlinked=
for d in "${docs[@]}"; do
    grep -qF "($d)" README.md || unlinked="$unlinked $d"
done
is_empty "$unlinked" "the README links every document in docs/"

unclear=
for d in "${docs[@]}"; do
    # A title, a blank line, then prose (not a table, a list or code).
    sed -n 1p "$d" | grep -q '^# ' && [ -z "$(sed -n 2p "$d")" ] &&
        sed -n 3p "$d" | grep -qE '^[A-Za-z`]' || unclear="$unclear $d"
done
is_empty "$unclear" "every document opens with a title and a sentence of what it is for"

# ---- the README, a front door ----

lines=$(wc -l <README.md)
[ "$lines" -le 250 ]
ok $? "README.md has at most 250 lines ($lines)"
top=$(head -60 README.md)
grep -qE '^ +make demo( |$)' <<<"$top" && grep -qE '^ +make check( |$)' <<<"$top"
ok $? "make demo and make check are in the README's first 60 lines"

# ---- the figures ----

if command -v gnuplot >/dev/null; then
    cp -r docs/bench "$T/bench"
    rm -f "$T"/bench/*.svg
    scripts/plots "$T/bench" >/dev/null 2>"$T/plots.err"
    ok $? "scripts/plots draws docs/bench's data files" || diag <"$T/plots.err"
    stale=
    for f in docs/bench/*.svg "$T"/bench/*.svg; do
        cmp -s "docs/bench/${f##*/}" "$T/bench/${f##*/}" || stale="$stale ${f##*/}"
    done
    is_empty "$(tr ' ' '\n' <<<"$stale" | sort -u | tr '\n' ' ' | sed 's/^ *//; s/ *$//')" \
        "every figure in docs/bench is what make plots draws from the data beside it"
else
    echo "ok $((n += 1)) - the figures # SKIP no gnuplot (apt-get install gnuplot-nox)"
fi

echo "1..$n"
[ "$failed" -eq 0 ]
