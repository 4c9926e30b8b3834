#!/usr/bin/env bash
# Bisection in real guests: steps, rounds, runs and wall time to the
# culprit against log2(N), N the kernels from good to bad (both included).
#
#   bash bench/bisect/wall.sh TREE [GUEST_CACHE]
#
# TREE is scripts/kernel-tree.sh's repository (v6.1, then C0..C6 with
# C4 "sched/core: Delay finish_task_switch() by 50us" and C6 bisect-bad);
# GUEST_CACHE the agent's guest cache (default: the agent's own,
# /var/cache/farm/guests as root). Run it with the builds cached (after
# `cargo test --test bisect -p farmctl`, which builds into that default):
# the wall times are then the guests',
# not the compiler's. Uses the binaries in BIN (default target/release:
# cargo build --release --workspace --bins), a coordinator and an agent on
# 127.0.0.1, as root.
#
# Each bisection is the example's cell (oltp, 2-node TCG guest, tps) with
# 5 runs a round and at most 10 a step; the kernels between are given in
# order (--between), all from the kept builds:
#   N=2 C3..C4 (no step: the confirmation alone)
#   N=3 C3 C4 C5
#   N=4 v6.1 C3 C4 C6
#   N=5 v6.1 C3 C4 C5 C6
#   N=8 v6.1 C0..C6 (the git range)
set -euo pipefail
tree=${1:?usage: wall.sh TREE [GUEST_CACHE]}
# The agent runs as root here, so its default is root's.
cache=${2:-/var/cache/farm/guests}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/target/release}
work=$(mktemp -d)
port=7791
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true' EXIT

c=()
while read -r id; do c+=("git:linux@$id"); done \
    < <(git -C "$tree" rev-list --first-parent --reverse v6.1..bisect-bad)
((${#c[@]} == 7)) || { echo "$tree: expected 7 commits after v6.1" >&2; exit 2; }
good0=git:linux@v6.1
culprit=${c[4]}

"$bin/farm-coordinator" --listen 127.0.0.1:$port --data-dir "$work/data" \
    >"$work/coordinator.log" 2>&1 &
until [[ -f $work/data/submit.token ]]; do sleep 0.2; done
FARM_KERNEL_REPOS=linux=$tree FARM_BUILD_USER=nobody FARM_GUEST_CACHE=$cache \
    "$bin/farm-agent" --coordinator http://127.0.0.1:$port \
    --token-file "$work/data/agent.token" --workload-bin "$bin/farm-workload" \
    --state-dir "$work/agent-state" >"$work/agent.log" 2>&1 &
export FARM_COORDINATOR=http://127.0.0.1:$port FARM_TOKEN_FILE=$work/data/submit.token
until "$bin/farmctl" agents 2>/dev/null | grep -q connected; do sleep 0.5; done

# bisect GOOD BAD [BETWEEN,…|--git-range] N: one line of the table (only
# the N in $ONLY when it is set, e.g. ONLY="5 8").
bisect() {
    local good=$1 bad=$2 between=$3 n=$4
    [[ -z ${ONLY:-} || " $ONLY " == *" $n "* ]] || return 0
    local range=(--between "$between")
    [[ $between == --git-range ]] && range=(--git-range)
    [[ -z $between ]] && range=()
    local t0 t1
    t0=$(date +%s.%N)
    "$bin/farmctl" bisect --good "$good" --bad "$bad" "${range[@]}" \
        --workload oltp --param threads=2 --param seconds=1 --param tables=4 \
        --guest cpus=2 --guest numa_nodes=2 --guest memory_mib=512 \
        --timeout-s 900 --min-effect-pct 5 --repetitions 5 \
        --metric tps --runs 5 --max-runs 10 --json >"$work/b$n.json" 2>"$work/b$n.err" || true
    t1=$(date +%s.%N)
    python3 - "$work/b$n.json" "$n" "$t0" "$t1" "$culprit" <<'PY'
import json, math, sys
path, n, t0, t1, culprit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
b = json.load(open(path))
o = b["outcome"]
rounds = len({m for s in b["steps"] for m in s["matrix_ids"]} | set(o["matrix_ids"]))
runs = sum(s["runs"] for s in b["steps"])
right = o["kind"] == "culprit" and o["confirmed"] and o["first_bad_kernel"] == culprit
print(f"| {n} | {math.log2(n):.2f} | {len(b['steps'])} | {rounds} | {runs} | "
      f"{float(t1) - float(t0):.0f} | {'yes' if right else 'NO: ' + o['kind']} |")
PY
}

echo "| N | log2 N | steps | rounds (steps' + confirmation) | runs of the stepped kernels | wall s (ends' matrix + bisection) | culprit named, confirmed |"
echo "|---|---|---|---|---|---|---|"
bisect "${c[3]}" "${c[4]}" "" 2
bisect "${c[3]}" "${c[5]}" "${c[4]}" 3
bisect "$good0" "${c[6]}" "${c[3]},${c[4]}" 4
bisect "$good0" "${c[6]}" "${c[3]},${c[4]},${c[5]}" 5
bisect "$good0" "${c[6]}" --git-range 8
