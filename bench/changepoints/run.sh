#!/usr/bin/env bash
# Change-point detection, ours against Apache Otava's defaults and ruptures'
# binary segmentation and PELT, side by side.
#
#   bench/changepoints/run.sh [--repeat N] [--series 200,50,10] [--families a,b] [--methods a,b] [--details]
#
# Makes (once) a venv with apache-otava and ruptures from PyPI under the cache directory
# ($FARM_BENCH_CACHE, else $XDG_CACHE_HOME/farm-bench, else ~/.cache/farm-bench),
# builds our side (analysis/examples/changepoints.rs, release), generates the
# series into a temporary directory and prints the markdown table
# (see bench.py for the series, the scoring and the tolerance).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${FARM_BENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/farm-bench}
venv=$cache/otava-venv
otava_version=${OTAVA_VERSION:-0.8.0}
ruptures_version=${RUPTURES_VERSION:-1.1.9}

if [ ! -x "$venv/bin/python" ]; then
    mkdir -p "$cache"
    if ! python3 -m venv "$venv"; then
        # Debian and Ubuntu ship venv separately.
        rm -rf "$venv"
        apt-get install -y python3-venv >&2
        python3 -m venv "$venv"
    fi
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "apache-otava==$otava_version" "ruptures==$ruptures_version" >&2

(cd "$root" && cargo build --release --quiet -p farm-analysis --example changepoints)
target=${CARGO_TARGET_DIR:-$root/target}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" "$here/bench.py" --ours "$target/release/examples/changepoints" --work "$work" "$@"
