"""Change-point detection: ours (farm-analysis) against Apache Otava's defaults.

Run through run.sh, which makes the venv with apache-otava and builds our
side. This script:

1. generates series with known change points, from a fixed seed, with the
   standard library's generator only (so the series do not depend on numpy's
   version): base level 100, noise of standard deviation 3 (3% of the level)
   of three kinds, all scaled to that same standard deviation —
     normal:  Gaussian;
     heavy:   Student t with 3 degrees of freedom;
     bimodal: one of two levels, +/- 2.83, with probability 1/2 each, plus
              Gaussian noise of standard deviation 1;
   lengths 100, 1,000 and 10,000 (200, 50 and 10 series of each noise by
   default); 1 to 5 change points per series, at least
   max(10, n/20) points apart and from either end, each a step of 2-20% of
   the current level, up or down at random; plus one 10,000-point series with
   a single 10% step under normal noise (at index 5,000);
2. runs Otava in-process with the defaults of its CLI (`otava analyze`:
   window 50, max p-value 0.001, min magnitude 0), via
   `otava.analysis.compute_change_points`, the function its `Series.analyze`
   calls, timing only that call;
3. runs ours through `analysis/examples/changepoints.rs` (default Options),
   which times only `detect` in-process;
4. scores both: a reported change point is a true positive when it is within
   `tol = max(5, n/100)` points of a true one, matched one to one (closest
   pairs first); precision, recall and F1 are pooled over the series of a
   cell (micro-averaged); time is the median over the cell's series of each
   series' median over `--repeat` runs;
5. prints a markdown table (ours in bold where its F1 is at least Otava's).
"""

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time

LEVEL = 100.0
SIGMA = 3.0
LENGTHS = (100, 1_000, 10_000)
NOISES = ("normal", "heavy", "bimodal")
SEED = 20261130


def noise(rng: random.Random, kind: str) -> float:
    if kind == "normal":
        return rng.gauss(0.0, SIGMA)
    if kind == "heavy":
        # t_3 = Z / sqrt(chi2_3 / 3), variance 3: divide by sqrt(3).
        z = rng.gauss(0.0, 1.0)
        chi2 = rng.gammavariate(1.5, 2.0)
        return SIGMA * z / math.sqrt(chi2 / 3.0) / math.sqrt(3.0)
    if kind == "bimodal":
        inner = SIGMA / 3.0
        offset = math.sqrt(SIGMA * SIGMA - inner * inner)
        return (offset if rng.random() < 0.5 else -offset) + rng.gauss(0.0, inner)
    raise ValueError(kind)


def change_positions(rng: random.Random, n: int, k: int) -> list:
    gap = max(10, n // 20)
    while True:
        cps = sorted(rng.randrange(gap, n - gap + 1) for _ in range(k))
        if all(b - a >= gap for a, b in zip(cps, cps[1:])):
            return cps


def generate(rng: random.Random, n: int, kind: str, cps: list, steps: list) -> list:
    values = []
    level = LEVEL
    pending = list(zip(cps, steps))
    for i in range(n):
        while pending and pending[0][0] == i:
            level *= 1.0 + pending.pop(0)[1]
        values.append(level + noise(rng, kind))
    return values


def make_cases(series_per_length: dict) -> list:
    rng = random.Random(SEED)
    cases = []
    for kind in NOISES:
        for n in LENGTHS:
            for j in range(series_per_length[n]):
                k = rng.randint(1, 5)
                cps = change_positions(rng, n, k)
                steps = [rng.choice((-1.0, 1.0)) * rng.uniform(0.02, 0.20) for _ in cps]
                values = generate(rng, n, kind, cps, steps)
                cases.append(dict(name=f"{kind}-{n}-{j}", kind=kind, n=n, truth=cps, values=values))
    single = generate(rng, 10_000, "normal", [5_000], [0.10])
    cases.append(dict(name="single-step-10000", kind="single", n=10_000, truth=[5_000], values=single))
    return cases


def run_otava(values: list, repeat: int):
    from otava.analysis import compute_change_points

    times = []
    found = None
    for _ in range(repeat):
        series = list(values)
        started = time.perf_counter()
        cps, _weak = compute_change_points(series)  # CLI defaults: window 50, p 0.001, magnitude 0
        times.append(time.perf_counter() - started)
        found = [cp.index for cp in cps]
    return found, statistics.median(times)


def run_ours(binary: str, path: str, repeat: int):
    out = subprocess.run([binary, path, "--repeat", str(repeat)], check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    return [cp["index"] for cp in doc["change_points"]], doc["seconds"]


def tolerance(n: int) -> int:
    return max(5, n // 100)


def match(truth: list, found: list, tol: int) -> int:
    """True positives: one-to-one matches within tol, closest pairs first."""
    pairs = sorted((abs(t - f), i, j) for i, t in enumerate(truth) for j, f in enumerate(found) if abs(t - f) <= tol)
    used_t, used_f, tp = set(), set(), 0
    for _, i, j in pairs:
        if i not in used_t and j not in used_f:
            used_t.add(i)
            used_f.add(j)
            tp += 1
    return tp


def scores(tp: int, fp: int, fn: int):
    precision = tp / (tp + fp) if tp + fp else float("nan")
    recall = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
    return precision, recall, f1


def fmt(x: float, digits: int = 2) -> str:
    return "–" if math.isnan(x) else f"{x:.{digits}f}"


def fmt_time(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 else f"{s * 1e6:.0f} µs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="path to the built changepoints example")
    ap.add_argument("--work", required=True, help="directory for the series files")
    ap.add_argument("--repeat", type=int, default=3, help="runs per series and side (median taken)")
    ap.add_argument(
        "--series",
        default="200,50,10",
        help="series per cell for lengths 100,1000,10000 (many short ones: their F1 is the closest call)",
    )
    ap.add_argument("--details", action="store_true", help="print each series' detections on stderr")
    args = ap.parse_args()

    counts = dict(zip(LENGTHS, (int(x) for x in args.series.split(","))))
    cases = make_cases(counts)
    os.makedirs(args.work, exist_ok=True)

    # Warm Otava up (imports, numpy/scipy first calls) outside the timings.
    run_otava(cases[0]["values"], 1)

    results = []
    for case in cases:
        path = os.path.join(args.work, case["name"] + ".txt")
        with open(path, "w") as f:
            f.write("\n".join(repr(v) for v in case["values"]) + "\n")
        otava_found, otava_time = run_otava(case["values"], args.repeat)
        ours_found, ours_time = run_ours(args.ours, path, args.repeat)
        tol = tolerance(case["n"])
        row = dict(case=case, sides={})
        for side, found, secs in (("otava", otava_found, otava_time), ("ours", ours_found, ours_time)):
            tp = match(case["truth"], found, tol)
            row["sides"][side] = dict(found=found, tp=tp, fp=len(found) - tp, fn=len(case["truth"]) - tp, time=secs)
        results.append(row)
        if args.details:
            print(f"{case['name']}: truth {case['truth']}\n  otava {otava_found}\n  ours  {ours_found}", file=sys.stderr)

    print("| noise | length | series | true change points | Otava P / R / F1 | ours P / R / F1 | Otava time | ours time | speed-up |")
    print("|---|---:|---:|---:|---|---|---:|---:|---:|")
    for kind in NOISES:
        for n in LENGTHS:
            rows = [r for r in results if r["case"]["kind"] == kind and r["case"]["n"] == n]
            cells = {}
            for side in ("otava", "ours"):
                tp = sum(r["sides"][side]["tp"] for r in rows)
                fp = sum(r["sides"][side]["fp"] for r in rows)
                fn = sum(r["sides"][side]["fn"] for r in rows)
                p, rc, f1 = scores(tp, fp, fn)
                t = statistics.median(r["sides"][side]["time"] for r in rows)
                cells[side] = (p, rc, f1, t)
            truth = sum(len(r["case"]["truth"]) for r in rows)
            o, u = cells["otava"], cells["ours"]
            better = "**" if u[2] >= o[2] else ""
            print(
                f"| {kind} | {n:,} | {len(rows)} | {truth} "
                f"| {fmt(o[0])} / {fmt(o[1])} / {fmt(o[2], 3)} "
                f"| {fmt(u[0])} / {fmt(u[1])} / {better}{fmt(u[2], 3)}{better} "
                f"| {fmt_time(o[3])} | {fmt_time(u[3])} | {o[3] / u[3]:.0f}× |"
            )
    single = next(r for r in results if r["case"]["kind"] == "single")
    print()
    print("| 10,000 points, one 10% step at 5,000 (normal noise) | reported | false | time |")
    print("|---|---:|---:|---:|")
    for side, label in (("otava", "Otava"), ("ours", "ours")):
        s = single["sides"][side]
        print(f"| {label} | {len(s['found'])} | {s['fp']} | {fmt_time(s['time'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
