#!/usr/bin/env bash
# A git repository of the kernel made from Debian's linux-source-6.1, for
# kernels built from trees (`git:linux@v6.1`): the tests' tree, and a
# tree to try the farm's builds and bisections on.
#
#   scripts/kernel-tree.sh DIR      makes DIR/linux (once; again only if its
#                                   tag v6.1 is missing) and prints its path
#
# Commits (all by "farm", dated 2026-12-03):
#   v6.1   Linux 6.1 (Debian's linux-source-6.1), with Debian's packaging
#          block cut from .gitignore (it ignores everything at the top level)
# Needs git and xz; the tarball comes with `apt-get install linux-source-6.1`.
set -euo pipefail
dir=${1:?usage: kernel-tree.sh DIR}
src=/usr/src/linux-source-6.1.tar.xz
repo=$dir/linux
git_() {
    GIT_AUTHOR_NAME=farm GIT_AUTHOR_EMAIL=farm@localhost \
    GIT_COMMITTER_NAME=farm GIT_COMMITTER_EMAIL=farm@localhost \
    GIT_AUTHOR_DATE=2026-12-03T00:00:00Z GIT_COMMITTER_DATE=2026-12-03T00:00:00Z \
        git -c gc.auto=0 -c maintenance.auto=false -C "$repo" "$@"
}
if [[ -d $repo/.git ]] && git_ rev-parse --verify -q v6.1 >/dev/null; then
    echo "$repo"
    exit 0
fi
[[ -f $src ]] || { echo "$src is missing: apt-get install linux-source-6.1" >&2; exit 1; }
rm -rf "$repo" "$dir/linux-source-6.1"
mkdir -p "$dir"
tar -xf "$src" -C "$dir"
mv "$dir/linux-source-6.1" "$repo"
# Debian's block starts at its own comment and runs to the end.
sed -i '/^# Debian packaging/,$d' "$repo/.gitignore"
sed -i '$ { /^#$/d }' "$repo/.gitignore"
git_ init -q -b master
git_ add -A
git_ commit -q -m "Linux 6.1 (Debian's linux-source-6.1)"
git_ tag v6.1
# Readable by the build user, as an operator's clone is.
chmod -R a+rX "$dir"
echo "$repo"
