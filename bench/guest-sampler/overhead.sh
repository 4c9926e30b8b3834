#!/usr/bin/env bash
# What sampling costs inside an x86_64 guest, side by side in one matrix:
# the in-guest sampler (farm-sample, a static C program) reporting on a
# virtio-serial port (a Debian kernel, whose modules the image carries)
# against the same kernel booted as a `file:` image without modules, which
# reports on the second serial port (a 16550 UART: a trap per byte under
# TCG); each with the built-in hackbench (40 threads) and rt-tests'
# hackbench (40 processes) of the same shape: 2 groups × 10 senders and 10
# receivers × LOOPS loops, 4 vCPUs on 2 NUMA nodes, TCG. Given an s390x
# kernel (debian:6.1.0-50-s390x), rt-hackbench alone on virtio-serial (the
# only channel there; 2 vCPUs, no NUMA).
#
#   bash bench/guest-sampler/overhead.sh [KERNEL] [REPETITIONS]
#
# Uses BIN (default target/release: cargo build --release -p farmctl
# --bins); the guest cache is farmctl run's (~/.cache/farm/guests, or
# XDG_CACHE_HOME), from which the `file:` copy of the kernel is taken (a
# one-run matrix fetches it first if need be). Prints, per channel and
# workload, the median and range of telemetry_overhead_pct (the sampler's
# CPU time against the workload's task clock), of the workload's time, and
# of runqueue_wait_s (the guest's runqueues' wait over the run).
set -euo pipefail
kernel=${1:-debian:6.1.0-57-cloud-amd64}
reps=${2:-5}
loops=${LOOPS:-500}
version=${kernel#debian:}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${BIN:-$root/target/release}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/farm/guests
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The farm's built-in workloads are x86_64 binaries.
builtin='
[[workloads]]
name = "hackbench"
params = { groups = 2, fds = 10, loops = '$loops' }
'
case $version in *-s390x) builtin= ;; esac
matrix() { # KERNELS REPS
    cat > "$work/m.toml" <<TOML
name = "guest-sampler"
repetitions = $2
timeout_s = 120
kernels = [$1]

$builtin
[[workloads]]
name = "rt-hackbench"
params = { groups = 2, fds = 10, loops = $loops }
TOML
}
mkdir "$work/kernels"
case $version in
*-s390x)
    # No second serial port on s390x: virtio-serial only.
    matrix "\"$kernel\"" "$reps"
    ;;
*)
    vmlinuz=$cache/kernels/$version/root/boot/vmlinuz-$version
    if [ ! -f "$vmlinuz" ]; then
        matrix "\"$kernel\"" 1
        "$bin/farmctl" run --json "$work/m.toml" > /dev/null
    fi
    cp "$vmlinuz" "$work/kernels/"
    matrix "\"$kernel\", \"file:$work/kernels/vmlinuz-$version\"" "$reps"
    ;;
esac
FARM_KERNEL_DIRS=$work/kernels "$bin/farmctl" run --json "$work/m.toml" > "$work/out.json"
python3 - "$work/out.json" <<'PY'
import json, statistics, sys
v = json.load(open(sys.argv[1]))
names = {c["index"]: c["name"] for c in v["cells"]}
rows = {}
for r in v["results"]:
    if not r["ok"]:
        sys.exit(f"run {r['run_id']} failed: {r['error']}")
    name = names[r["cell"]]
    channel = "serial (ttyS1)" if "file:" in name else "virtio-serial"
    w = "rt-hackbench (40 processes)" if "rt-hackbench" in name else "hackbench (40 threads)"
    rows.setdefault((channel, w), []).append(r["metrics"])
def fmt(xs, unit):
    xs = sorted(xs)
    return f"{statistics.median(xs):.2f}{unit} ({xs[0]:.2f}–{xs[-1]:.2f})"
print("| channel | workload | runs | overhead | workload time | runqueue wait |")
print("|---|---|---:|---:|---:|---:|")
for (c, w), ms in sorted(rows.items()):
    t = [m.get("time_s", m.get("wall_s")) for m in ms]
    o = [m["telemetry_overhead_pct"] for m in ms]
    q = [m.get("runqueue_wait_s", float("nan")) for m in ms]
    print(f"| {c} | {w} | {len(ms)} | {fmt(o, '%')} | {fmt(t, ' s')} | {fmt(q, ' s')} |")
PY
