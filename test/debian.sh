# Shared by the tests that make Debian trees with debootstrap (image.t,
# package-trixie.t) or build the package from a copy of the working tree
# (package.t, package-trixie.t). Sourced after lib.sh, never run.

# The machine's Debian mirror, from deb822 or one-line sources.
apt_mirror() {
    { awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources 2>/dev/null
      awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; break}}' \
          /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null
    } | grep -v -- -security | head -1
}

# minbase_tarball KEY: debootstrap's minbase of SUITE from MIRROR, as a
# tarball in the cache under KEY, the hash of its recipe (made once).
minbase_tarball() {
    local tar=$CACHE/minbase-$SUITE-$1.tar dir=$T/minbase
    if [ ! -s "$tar" ]; then
        mkdir -p "$CACHE"
        debootstrap --variant=minbase "$SUITE" "$dir" "$MIRROR" >"$T/debootstrap.log" 2>&1 || {
            debootstrap_failed "$dir"; return 1; }
        rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
        tar -C "$dir" -c . >"$tar.tmp" && mv "$tar.tmp" "$tar"
        rm -rf "$dir"
    fi
    echo "$tar"
}

# Why debootstrap failed, on stderr (the caller's stdout is the tarball's
# name): its own output says little more than "see debootstrap.log", a
# file in the tree that the test's cleanup removes, so its last lines too.
debootstrap_failed() { # debootstrap_failed DIR
    echo "# debootstrap --variant=minbase $SUITE from $MIRROR failed:" >&2
    sed 's/^/#   /' "$T/debootstrap.log" | tail -20 >&2
    if [ -s "$1/debootstrap/debootstrap.log" ]; then
        echo "# the last lines of its $1/debootstrap/debootstrap.log:" >&2
        sed 's/^/#   /' "$1/debootstrap/debootstrap.log" | tail -30 >&2
    fi
}

# The key of minbase_tarball's recipe.
minbase_key() {
    { declare -f minbase_tarball; echo "$MIRROR"; } | sha256sum | cut -c1-12
}

# The working tree without build products or VM images: the files git
# knows or would add (tracked, untracked, not ignored), or every file
# outside .git when this is no git checkout; ELF files never.
tree_files() {
    if git -C "$SRCDIR" rev-parse --git-dir >/dev/null 2>&1; then
        git -C "$SRCDIR" ls-files -z --cached --others --exclude-standard
    else
        (cd "$SRCDIR" && find . -path ./.git -prune -o -path ./test/vm/.cache -prune \
            -o -path ./debian/tmp -prune -o -path "./debian/$PKG" -prune \
            -o -type f -print0)
    fi | while IFS= read -r -d '' f; do
        [ -f "$SRCDIR/$f" ] || continue # deleted, not yet staged
        [ "$(head -c4 "$SRCDIR/$f" | od -An -c | tr -d ' ')" = '177ELF' ] && continue
        printf '%s\0' "$f"
    done
}

# copy_tree DIR: that copy of the working tree in DIR.
copy_tree() {
    mkdir -p "$1" && (cd "$SRCDIR" && tree_files | cpio -0pdm --quiet "$1")
}
