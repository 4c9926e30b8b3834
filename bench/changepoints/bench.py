"""Change-point detection: ours (farm-analysis) against Apache Otava's
defaults and ruptures' binary segmentation and PELT.

Run through run.sh, which makes the venv with apache-otava and ruptures and
builds our side. This script:

1. generates series with known change points, from a fixed seed, with the
   standard library's generator only (so the series do not depend on numpy's
   version): base level 100, noise of standard deviation 3 (3% of the level).
   **Step families** (1 to 5 change points per series, at least
   max(10, n/20) points apart and from either end, each a step of 2-20% of
   the current level, up or down at random), one per noise:
     normal:    Gaussian;
     heavy:     Student t with 3 degrees of freedom;
     bimodal:   one of two levels, +/- 2.83, with probability 1/2 each, plus
                Gaussian noise of standard deviation 1;
     lognormal: a log-normal of sigma 0.5, centred and scaled (skewed right);
     outlier:   Gaussian, and 2% of the points 30% above the level;
     trend+steps: Gaussian noise around a line that moves the level by
                10-30% over the series, up or down, and the steps on top;
   **no-change families** (no change point at all; what a history drifting
   looks like):
     trend:     Gaussian noise around a line moving the level 10-30%;
     walk:      a random walk of steps of standard deviation 0.3, plus
                Gaussian noise;
     seasonal:  a sine of period 20-100 points and amplitude 3-6, plus
                Gaussian noise;
     ar1:       AR(1) noise, phi uniform in 0.3-0.8, of standard deviation 3;
   lengths 100, 1,000 and 10,000 (200, 50 and 10 series of each family by
   default); plus one 10,000-point series with a single 10% step under
   normal noise (at index 5,000);
2. runs Otava in-process with the defaults of its CLI (`otava analyze`:
   window 50, max p-value 0.001, min magnitude 0), via
   `otava.analysis.compute_change_points`, the function its `Series.analyze`
   calls, timing only that call;
3. runs ruptures' `Binseg` and `Pelt` with their defaults (model "l2",
   min_size 2, jump 5) and the penalty its documentation gives for a
   change in mean, log(n) * sigma^2, sigma estimated as the MAD of the first
   differences / (0.6745 * sqrt 2) (ruptures has no default penalty);
4. runs ours through `analysis/examples/changepoints.rs` (default Options,
   or those of `--ours-args`, e.g. "--max-p 0.001"), which times only
   `detect` in-process;
5. scores each: a reported change point is a true positive when it is
   within 5 points of a true one (the issue's margin), matched one to one
   (closest pairs first); precision, recall and F1 are pooled over the
   series of a cell (micro-averaged); on the no-change families, false
   change points per 1,000 points; time is the median over the cell's
   series of each series' median over `--repeat` runs;
6. prints two markdown tables (ours in bold where it is at least as good as
   every other method).
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
STEP_FAMILIES = ("normal", "heavy", "bimodal", "lognormal", "outlier", "trend+steps")
FLAT_FAMILIES = ("trend", "walk", "seasonal", "ar1")
METHODS = ("otava", "binseg", "pelt", "ours")
LABELS = dict(otava="Otava", binseg="ruptures Binseg", pelt="ruptures PELT", ours="ours")
MARGIN = 5
SEED = 20261204


def noise(rng: random.Random, kind: str) -> float:
    if kind in ("normal", "trend+steps", "trend", "walk", "seasonal"):
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
    if kind == "lognormal":
        s = 0.5
        mean = math.exp(s * s / 2)
        sd = math.sqrt((math.exp(s * s) - 1) * math.exp(s * s))
        return SIGMA * (rng.lognormvariate(0.0, s) - mean) / sd
    if kind == "outlier":
        return rng.gauss(0.0, SIGMA) + (0.3 * LEVEL if rng.random() < 0.02 else 0.0)
    raise ValueError(kind)


def change_positions(rng: random.Random, n: int, k: int) -> list:
    gap = max(10, n // 20)
    while True:
        cps = sorted(rng.randrange(gap, n - gap + 1) for _ in range(k))
        if all(b - a >= gap for a, b in zip(cps, cps[1:])):
            return cps


def generate(rng: random.Random, n: int, kind: str, cps: list, steps: list) -> list:
    """Steps multiply the level; the no-change shapes add to it."""
    values = []
    level = LEVEL
    pending = list(zip(cps, steps))
    shape = [0.0] * n
    if kind in ("trend", "trend+steps"):
        total = rng.choice((-1.0, 1.0)) * rng.uniform(0.10, 0.30) * LEVEL
        shape = [total * i / max(1, n - 1) for i in range(n)]
    elif kind == "walk":
        x = 0.0
        for i in range(n):
            x += rng.gauss(0.0, 0.3)
            shape[i] = x
    elif kind == "seasonal":
        period = rng.uniform(20, 100)
        amplitude = rng.uniform(3.0, 6.0)
        phase = rng.uniform(0, 2 * math.pi)
        shape = [amplitude * math.sin(2 * math.pi * i / period + phase) for i in range(n)]
    elif kind == "ar1":
        phi = rng.uniform(0.3, 0.8)
        innovation = SIGMA * math.sqrt(1 - phi * phi)
        e = rng.gauss(0.0, SIGMA)
        for i in range(n):
            shape[i] = e
            e = phi * e + rng.gauss(0.0, innovation)
    for i in range(n):
        while pending and pending[0][0] == i:
            level *= 1.0 + pending.pop(0)[1]
        e = 0.0 if kind == "ar1" else noise(rng, kind)
        values.append(level + shape[i] + e)
    return values


def make_cases(series_per_length: dict, families: list, seed: int = SEED) -> list:
    rng = random.Random(seed)
    cases = []
    for kind in families:
        for n in LENGTHS:
            for j in range(series_per_length[n]):
                if kind in STEP_FAMILIES:
                    k = rng.randint(1, 5)
                    cps = change_positions(rng, n, k)
                    steps = [rng.choice((-1.0, 1.0)) * rng.uniform(0.02, 0.20) for _ in cps]
                else:
                    cps, steps = [], []
                values = generate(rng, n, kind, cps, steps)
                cases.append(dict(name=f"{kind}-{n}-{j}", kind=kind, n=n, truth=cps, values=values))
    single = generate(rng, 10_000, "normal", [5_000], [0.10])
    cases.append(dict(name="single-step-10000", kind="single", n=10_000, truth=[5_000], values=single))
    return cases


def timed(repeat: int, detect):
    times, found = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        found = detect()
        times.append(time.perf_counter() - started)
    return found, statistics.median(times)


def run_otava(values: list, repeat: int):
    from otava.analysis import compute_change_points

    def detect():
        # CLI defaults: window 50, p 0.001, magnitude 0.
        cps, _weak = compute_change_points(list(values))
        return [cp.index for cp in cps]

    return timed(repeat, detect)


def ruptures_penalty(values: list) -> float:
    diffs = sorted(abs(b - a) for a, b in zip(values, values[1:]))
    mad = statistics.median(diffs) if diffs else 0.0
    sigma = mad / (0.6745 * math.sqrt(2.0)) if mad > 0 else 1.0
    return math.log(len(values)) * sigma * sigma


def run_ruptures(method: str, values: list, repeat: int):
    import numpy as np
    import ruptures as rpt

    signal = np.asarray(values, dtype=float)
    pen = ruptures_penalty(values)
    algo = rpt.Binseg if method == "binseg" else rpt.Pelt

    def detect():
        # predict returns the segments' ends, the last being n.
        return [int(b) for b in algo(model="l2").fit(signal).predict(pen=pen)[:-1]]

    return timed(repeat, detect)


def run_ours(binary: str, path: str, repeat: int, extra: list):
    out = subprocess.run([binary, path, "--repeat", str(repeat), *extra], check=True, capture_output=True, text=True)
    doc = json.loads(out.stdout)
    return [cp["index"] for cp in doc["change_points"]], doc["seconds"]


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
    if s >= 1.0:
        return f"{s:.2f} s"
    return f"{s * 1e3:.1f} ms" if s >= 1e-3 else f"{s * 1e6:.0f} µs"


def bold_if(text: str, cond: bool) -> str:
    return f"**{text}**" if cond else text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ours", required=True, help="path to the built changepoints example")
    ap.add_argument("--work", required=True, help="directory for the series files")
    ap.add_argument("--repeat", type=int, default=3, help="runs per series and method (median taken)")
    ap.add_argument(
        "--series",
        default="200,50,10",
        help="series per cell for lengths 100,1000,10000 (many short ones: their F1 is the closest call)",
    )
    ap.add_argument("--families", default=",".join(STEP_FAMILIES + FLAT_FAMILIES), help="which families")
    ap.add_argument("--methods", default=",".join(METHODS), help="which methods (ours always runs)")
    ap.add_argument("--details", action="store_true", help="print each series' detections on stderr")
    ap.add_argument("--seed", type=int, default=SEED, help="seed of the series (other draws of the same families)")
    ap.add_argument(
        "--ours-args",
        default="",
        help='options for our side, split at spaces (e.g. "--max-p 0.001"); never run through a shell',
    )
    args = ap.parse_args()
    ours_args = args.ours_args.split()

    counts = dict(zip(LENGTHS, (int(x) for x in args.series.split(","))))
    families = [f for f in args.families.split(",") if f]
    methods = [m for m in METHODS if m in args.methods.split(",") or m == "ours"]
    cases = make_cases(counts, families, args.seed)
    os.makedirs(args.work, exist_ok=True)

    # Warm the Python methods up (imports, numpy first calls) outside the timings.
    for m in methods:
        if m == "otava":
            run_otava(cases[0]["values"], 1)
        elif m != "ours":
            run_ruptures(m, cases[0]["values"], 1)

    results = []
    for case in cases:
        path = os.path.join(args.work, case["name"] + ".txt")
        with open(path, "w") as f:
            f.write("\n".join(repr(v) for v in case["values"]) + "\n")
        row = dict(case=case, sides={})
        for m in methods:
            if m == "otava":
                found, secs = run_otava(case["values"], args.repeat)
            elif m == "ours":
                found, secs = run_ours(args.ours, path, args.repeat, ours_args)
            else:
                found, secs = run_ruptures(m, case["values"], args.repeat)
            tp = match(case["truth"], found, MARGIN)
            row["sides"][m] = dict(found=found, tp=tp, fp=len(found) - tp, fn=len(case["truth"]) - tp, time=secs)
        results.append(row)
        if args.details:
            lines = [f"{case['name']}: truth {case['truth']}"]
            lines += [f"  {m:6} {row['sides'][m]['found']}" for m in methods]
            print("\n".join(lines), file=sys.stderr)

    def cell(kind, n):
        return [r for r in results if r["case"]["kind"] == kind and r["case"]["n"] == n]

    steps = [k for k in families if k in STEP_FAMILIES]
    if steps:
        head = " | ".join(f"{LABELS[m]} P / R / F1" for m in methods)
        print(f"| family | length | series | true change points | {head} |")
        print("|---|---:|---:|---:|" + "---|" * len(methods))
        for kind in steps:
            for n in LENGTHS:
                rows = cell(kind, n)
                if not rows:
                    continue
                f1s = {}
                cells = {}
                for m in methods:
                    tp = sum(r["sides"][m]["tp"] for r in rows)
                    fp = sum(r["sides"][m]["fp"] for r in rows)
                    fn = sum(r["sides"][m]["fn"] for r in rows)
                    cells[m] = scores(tp, fp, fn)
                    f1s[m] = cells[m][2]
                best = max(v for m, v in f1s.items() if m != "ours")  if len(methods) > 1 else -1
                parts = []
                for m in methods:
                    p, rc, f1 = cells[m]
                    f1_text = fmt(f1, 3)
                    if m == "ours":
                        f1_text = bold_if(f1_text, f1 >= best)
                    parts.append(f"{fmt(p)} / {fmt(rc)} / {f1_text}")
                truth = sum(len(r["case"]["truth"]) for r in rows)
                print(f"| {kind} | {n:,} | {len(rows)} | {truth} | " + " | ".join(parts) + " |")
        print()
    flats = [k for k in families if k in FLAT_FAMILIES]
    if flats:
        head = " | ".join(LABELS[m] for m in methods)
        print(f"| no-change family | length | series | false change points per 1,000 points: {head} |")
        print("|---|---:|---:|" + "---:|" * len(methods))
        for kind in flats:
            for n in LENGTHS:
                rows = cell(kind, n)
                if not rows:
                    continue
                points = sum(r["case"]["n"] for r in rows)
                rate = {m: 1000.0 * sum(r["sides"][m]["fp"] for r in rows) / points for m in methods}
                best = min(v for m, v in rate.items() if m != "ours") if len(methods) > 1 else float("inf")
                parts = [bold_if(f"{rate[m]:.2f}", m == "ours" and rate[m] <= best) for m in methods]
                print(f"| {kind} | {n:,} | {len(rows)} | " + " | ".join(parts) + " |")
        print()
    head = " | ".join(LABELS[m] for m in methods)
    print(f"| median time per series | length | {head} |")
    print("|---|---:|" + "---:|" * len(methods))
    for label, kinds in (("step families", steps), ("no-change families", flats)):
        for n in LENGTHS:
            rows = [r for r in results if r["case"]["kind"] in kinds and r["case"]["n"] == n]
            if rows:
                parts = [fmt_time(statistics.median(r["sides"][m]["time"] for r in rows)) for m in methods]
                print(f"| {label} | {n:,} | " + " | ".join(parts) + " |")
    single = next(r for r in results if r["case"]["kind"] == "single")
    print()
    print("| 10,000 points, one 10% step at 5,000 (normal noise) | reported | false | time |")
    print("|---|---:|---:|---:|")
    for m in methods:
        s = single["sides"][m]
        print(f"| {LABELS[m]} | {len(s['found'])} | {s['fp']} | {fmt_time(s['time'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
