#!/usr/bin/env python3
"""Failover time of a highly available farm, with the real binaries.

A 3-member etcd cluster on loopback (bench/etcd/cluster.sh), two
coordinators sharing it, one farm-agent given both URLs, and a matrix of
many short runs. KILLS times: SIGKILL the leader, and take the time from
the kill to the first run the agent is assigned after it (the agent logs
each assignment with its time), which is the new leader's first
assignment; then start the killed coordinator again as the standby.

    cargo build --release --workspace --features farm-coordinator/ha
    python3 bench/etcd/failover.py [--kills 10] [--ttl-s 5]

Prints each failover and the median and worst, in seconds.
"""

import argparse
import datetime
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, "target", "release")
PORTS = [7761, 7762]
MATRIX = """
name = "failover"
repetitions = 400
timeout_s = 60
[[workloads]]
name = "cpu-hog"
params = { threads = 1, seconds = 0.2 }
[verdict]
max_runs = 400
"""
ASSIGNED = re.compile(r"^(\S+Z) .*run assigned")


def standing(data_dir):
    try:
        addr = open(os.path.join(data_dir, "metrics.addr")).read().strip()
        body = urllib.request.urlopen(f"http://{addr}/metrics", timeout=2).read().decode()
    except OSError:
        return None
    m = re.search(r'farm_coordinator_standing\{standing="(\w+)"\} 1', body)
    return m and m.group(1)


def wait(what, f, timeout=60):
    t = time.time()
    while not f():
        if time.time() - t > timeout:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.05)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--ttl-s", type=int, default=5)
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="farm-failover-")
    store = subprocess.run(
        ["bash", os.path.join(ROOT, "bench/etcd/cluster.sh"), os.path.join(work, "etcd")],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    procs = {}

    def start(i):
        d = os.path.join(work, f"c{i}")
        os.makedirs(d, exist_ok=True)
        if i == 1 and not os.path.exists(os.path.join(d, "agent.token")):
            for t in ("agent.token", "submit.token"):
                shutil.copy(os.path.join(work, "c0", t), d)
                os.chmod(os.path.join(d, t), 0o600)
        if os.path.exists(os.path.join(d, "metrics.addr")):
            os.remove(os.path.join(d, "metrics.addr"))
        log = open(os.path.join(work, f"c{i}.log"), "a")
        procs[i] = subprocess.Popen(
            [os.path.join(BIN, "farm-coordinator"), "--listen", f"127.0.0.1:{PORTS[i]}",
             "--data-dir", d, "--store", store, "--store-prefix", "/bench",
             "--leader-ttl-s", str(args.ttl_s), "--metrics-listen", "127.0.0.1:0"],
            stdout=log, stderr=log, env={**os.environ, "RUST_LOG": "info"},
        )
        wait("its tokens", lambda: os.path.exists(os.path.join(d, "submit.token")))

    urls = ",".join(f"http://127.0.0.1:{p}" for p in PORTS)
    agent = None
    try:
        start(0)
        wait("coordinator 0 to lead", lambda: standing(os.path.join(work, "c0")) == "leading")
        start(1)
        wait("coordinator 1 to stand by",
             lambda: standing(os.path.join(work, "c1")) == "following")
        agent_log_path = os.path.join(work, "agent.log")
        agent = subprocess.Popen(
            [os.path.join(BIN, "farm-agent"), "--coordinator", urls,
             "--token-file", os.path.join(work, "c0", "agent.token"),
             "--state-dir", os.path.join(work, "agent"), "--no-guests"],
            stdout=open(agent_log_path, "w"), stderr=subprocess.STDOUT,
        )
        matrix = os.path.join(work, "m.toml")
        open(matrix, "w").write(MATRIX)
        env = {**os.environ, "FARM_COORDINATOR": urls,
               "FARM_TOKEN_FILE": os.path.join(work, "c0", "submit.token")}
        subprocess.run([os.path.join(BIN, "farmctl"), "submit", matrix], check=True,
                       env=env, capture_output=True)
        times = []
        for k in range(args.kills):
            leader = next(i for i in (0, 1)
                          if standing(os.path.join(work, f"c{i}")) == "leading")
            # Mid-run, as a failure would find it.
            time.sleep(1.0)
            killed_at = datetime.datetime.now(datetime.timezone.utc)
            procs[leader].send_signal(signal.SIGKILL)
            procs[leader].wait()

            def first_assignment():
                for line in open(agent_log_path):
                    m = ASSIGNED.match(line)
                    if m:
                        t = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00"))
                        if t > killed_at:
                            return t
                return None

            wait("an assignment by the new leader", lambda: first_assignment() is not None)
            took = (first_assignment() - killed_at).total_seconds()
            times.append(took)
            print(f"kill {k + 1}: coordinator {leader} killed; "
                  f"first assignment {took:.2f} s later", flush=True)
            start(leader)
            wait(f"coordinator {leader} to stand by",
                 lambda: standing(os.path.join(work, f"c{leader}")) == "following")
        print(f"failover over {len(times)} kills (lease TTL {args.ttl_s} s): "
              f"median {statistics.median(times):.2f} s, worst {max(times):.2f} s")
    finally:
        if agent:
            agent.kill()
        for p in procs.values():
            p.kill()
        subprocess.run(["bash", os.path.join(ROOT, "bench/etcd/cluster.sh"),
                        os.path.join(work, "etcd"), "stop"])
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
