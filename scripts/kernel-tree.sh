#!/usr/bin/env bash
# A git repository of the kernel made from Debian's linux-source-6.1, for
# kernels built from trees (`git:linux@v6.1`): the tests' tree, and a
# tree to try the farm's builds and bisections on.
#
#   scripts/kernel-tree.sh DIR      makes DIR/linux (once; again only if its
#                                   tag v6.1 is missing) and prints its path
#
# Commits (all by "farm", dated 2026-12-03), first parent only:
#   v6.1        Linux 6.1 (Debian's linux-source-6.1), with Debian's packaging
#               block cut from .gitignore (it ignores everything at the top
#               level)
#   then seven commits for bisection, one of which slows every context
#   switch on purpose ("sched/core: Delay finish_task_switch() by 50us",
#   the fifth); the others touch documentation and comments only
#   bisect-bad  the last of them (tag)
# Needs git, xz and flock (util-linux); the tarball comes with `apt-get install linux-source-6.1`.
set -Eeuo pipefail
trap 'echo "kernel-tree.sh: failed at line $LINENO" >&2' ERR
dir=${1:?usage: kernel-tree.sh DIR}
src=/usr/src/linux-source-6.1.tar.xz
repo=$dir/linux
git_() {
    GIT_AUTHOR_NAME=farm GIT_AUTHOR_EMAIL=farm@localhost \
    GIT_COMMITTER_NAME=farm GIT_COMMITTER_EMAIL=farm@localhost \
    GIT_AUTHOR_DATE=2026-12-03T00:00:00Z GIT_COMMITTER_DATE=2026-12-03T00:00:00Z \
        git -c gc.auto=0 -c maintenance.auto=false -C "$repo" "$@"
}
# One maker at a time: tests in one binary call this script in parallel,
# and a second one would extract into the directory the first is filling.
mkdir -p "$dir"
exec 9>"$dir/.kernel-tree.lock"
flock 9
commit_() {
    git_ add -A
    git_ commit -q -m "$1"
}
# The bisection's commits on top of v6.1; each is checked to have changed
# what it says, so an upstream edit of a context line fails loudly here.
bisection_commits() {
    git_ checkout -q -f -B master v6.1
    printf '%s\n' "Farm test tree" "==============" "" \
        "This tree carries commits for the farm's bisection test." \
        >"$repo/Documentation/scheduler/farm.rst"
    commit_ "Documentation: scheduler: Describe the farm's test tree"
    sed -i '0,/^ \* Update the current task.s runtime statistics\./s//&\n * (Comment only.)/' \
        "$repo/kernel/sched/fair.c"
    grep -q '^ \* (Comment only.)' "$repo/kernel/sched/fair.c"
    commit_ "sched/fair: Note that update_curr() comments are informative"
    printf '\n%s\n' "The farm's test tree has seven commits after v6.1." \
        >>"$repo/Documentation/scheduler/farm.rst"
    commit_ "Documentation: scheduler: Count the farm's commits"
    sed -i '0,/^ \* finish_task_switch - clean up after a task-switch$/s//&\n * (The farm tests bisection with this function.)/' \
        "$repo/kernel/sched/core.c"
    grep -q '(The farm tests bisection with this function.)' "$repo/kernel/sched/core.c"
    commit_ "sched/core: Mention the farm in finish_task_switch()'s comment"
    # The culprit: 50us of busy waiting on every context switch, after the
    # runqueue lock is released (so it slows switching, not locking).
    sed -i '0,/^#include <linux\/highmem.h>$/s//#include <linux\/delay.h>\n&/' \
        "$repo/kernel/sched/core.c"
    sed -i '0,/^\tkcov_finish_switch(current);$/s//&\n\tudelay(50);/' \
        "$repo/kernel/sched/core.c"
    grep -q '^#include <linux/delay.h>$' "$repo/kernel/sched/core.c"
    grep -qxF $'\tudelay(50);' "$repo/kernel/sched/core.c"
    commit_ "sched/core: Delay finish_task_switch() by 50us"
    printf '\n%s\n' "One of them slows the scheduler on purpose." \
        >>"$repo/Documentation/scheduler/farm.rst"
    commit_ "Documentation: scheduler: Warn about the farm's slow commit"
    printf '\n%s\n' "Bisecting v6.1..bisect-bad should name it." \
        >>"$repo/Documentation/scheduler/farm.rst"
    commit_ "Documentation: scheduler: Say what bisection should find"
    git_ tag -f bisect-bad >/dev/null
}
if [[ -d $repo/.git ]] && git_ rev-parse --verify -q v6.1 >/dev/null; then
    # Made before the commits were what they are now: make them again.
    if ! git_ grep -q 'udelay(50);' bisect-bad -- kernel/sched/core.c 2>/dev/null; then
        bisection_commits
        chmod -R a+rX "$dir"
    fi
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
commit_ "Linux 6.1 (Debian's linux-source-6.1)"
git_ tag v6.1
bisection_commits
# Readable by the build user, as an operator's clone is.
chmod -R a+rX "$dir"
echo "$repo"
