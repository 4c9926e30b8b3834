#!/usr/bin/env bash
# What sampling costs inside an x86_64 guest, side by side in one matrix:
# the built-in hackbench (the guest carries farm-workload, whose --sample
# sweeps /proc without forking, every 100 ms) beside rt-tests' hackbench
# (Debian's binary: the guest has no farm-workload, and the runner's shell
# loop samples, every 500 ms, forking a sed or grep per kind). Same shape:
# 2 groups × 10 senders and 10 receivers × 500 loops, 40 threads or
# processes on 4 vCPUs, 2 NUMA nodes, TCG.
#
#   bash bench/guest-sampler/overhead.sh [KERNEL] [REPETITIONS]
#
# Uses BIN (default target/release: cargo build --release -p farmctl
# --bins); the guest cache is farmctl run's (~/.cache/farm/guests, or
# XDG_CACHE_HOME). Prints, per workload, the median and range of
# telemetry_overhead_pct (the sampler's CPU time against the workload's),
# of the workload's time, and of runqueue_wait_s.
set -euo pipefail
kernel=${1:-debian:6.1.0-57-cloud-amd64}
reps=${2:-5}
loops=${LOOPS:-500}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/target/release}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/m.toml" <<TOML
name = "guest-sampler"
repetitions = $reps
timeout_s = 120
kernels = ["$kernel"]

[[workloads]]
name = "hackbench"
params = { groups = 2, fds = 10, loops = $loops }

[[workloads]]
name = "rt-hackbench"
params = { groups = 2, fds = 10, loops = $loops }
TOML
"$bin/farmctl" run --json "$work/m.toml" > "$work/out.json"
python3 - "$work/out.json" <<'PY'
import json, statistics, sys
v = json.load(open(sys.argv[1]))
rows = {}
for r in v["results"]:
    if not r["ok"]:
        sys.exit(f"run {r['run_id']} failed: {r['error']}")
    w = "hackbench (farm-workload --sample)" if r["cell"] == 0 else "rt-hackbench (shell sampler)"
    rows.setdefault(w, []).append(r["metrics"])
def fmt(xs, unit):
    xs = sorted(xs)
    return f"{statistics.median(xs):.2f}{unit} ({xs[0]:.2f}–{xs[-1]:.2f})"
print("| sampler | runs | overhead | workload time | runqueue wait |")
print("|---|---:|---:|---:|---:|")
for w, ms in rows.items():
    t = [m.get("time_s", m.get("wall_s")) for m in ms]
    o = [m["telemetry_overhead_pct"] for m in ms]
    q = [m.get("runqueue_wait_s", float("nan")) for m in ms]
    print(f"| {w} | {len(ms)} | {fmt(o, '%')} | {fmt(t, ' s')} | {fmt(q, ' s')} |")
PY
