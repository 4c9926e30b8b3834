#!/usr/bin/env bash
# A 3-member etcd cluster on loopback for the benchmarks (Debian's
# etcd-server), in DIR, on client ports 23791-23793: the same shape as the
# tests' (coordinator/tests/support/etcd.rs). `cluster.sh DIR` starts it and
# prints the --store value; `cluster.sh DIR stop` stops it.
set -euo pipefail
dir=${1:?usage: cluster.sh DIR [stop]}
if [[ ${2:-} == stop ]]; then
    for i in 1 2 3; do
        [[ -f $dir/e$i.pid ]] && kill "$(cat "$dir/e$i.pid")" 2>/dev/null || true
    done
    # Gone before this returns: the next cluster takes the same ports.
    for i in 1 2 3; do
        while [[ -f $dir/e$i.pid ]] && kill -0 "$(cat "$dir/e$i.pid")" 2>/dev/null; do
            sleep 0.1
        done
    done
    exit 0
fi
mkdir -p "$dir"
initial="n1=http://127.0.0.1:23801,n2=http://127.0.0.1:23802,n3=http://127.0.0.1:23803"
for i in 1 2 3; do
    /usr/bin/etcd --name "n$i" --data-dir "$dir/e$i" \
        --listen-client-urls "http://127.0.0.1:2379$i" \
        --advertise-client-urls "http://127.0.0.1:2379$i" \
        --listen-peer-urls "http://127.0.0.1:2380$i" \
        --initial-advertise-peer-urls "http://127.0.0.1:2380$i" \
        --initial-cluster "$initial" --initial-cluster-state new \
        --initial-cluster-token farm-bench --logger zap --log-outputs stderr \
        >"$dir/e$i.log" 2>&1 &
    echo $! >"$dir/e$i.pid"
done
for i in 1 2 3; do
    for try in $(seq 100); do
        curl -fs "http://127.0.0.1:2379$i/health" | grep -q '"health":"true"' && break
        if ((try == 100)); then
            echo "etcd member n$i is not healthy; see $dir/e$i.log" >&2
            exit 1
        fi
        sleep 0.1
    done
done
echo "etcd://127.0.0.1:23791,127.0.0.1:23792,127.0.0.1:23793"
