#!/usr/bin/python3
"""A hostile agent, written against farm.proto with Python's grpcio: not our
client, so it sends what ours never would.

It holds the agent token (any agent does) and tries what issue 13 found
possible: take over a live agent's id, claim a queued run in its Hello, post
results for every run id it can guess (they are predictable:
`<matrix>.c<cell>.r<rep>`), and post values no run can have. It prints one
JSON object with what the coordinator answered; the Rust test
(cli/tests/attack.rs) decides from that and from the farm's results.

Needs python3-grpcio, python3-protobuf and protobuf-compiler (Debian).
"""

import argparse
import json
import math
import os
import queue
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pylib"))
import farm_stubs  # noqa: E402


def varint(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True, help="host:port of the coordinator")
    ap.add_argument("--token-file", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--victim", required=True, help="the id of a connected agent")
    ap.add_argument("--matrix", required=True)
    ap.add_argument("--cells", type=int, required=True)
    ap.add_argument("--reps", type=int, required=True)
    ap.add_argument("--submit-token-file", required=True)
    args = ap.parse_args()
    pb = farm_stubs.load(args.proto)
    token = open(args.token_file).read().strip()
    md = [("authorization", f"Bearer {token}")]
    ch = grpc.insecure_channel(args.addr)
    register = ch.unary_unary(
        "/farm.v1.AgentService/Register",
        request_serializer=pb.RegisterRequest.SerializeToString,
        response_deserializer=pb.RegisterResponse.FromString,
    )
    session = ch.stream_stream(
        "/farm.v1.AgentService/Session",
        request_serializer=pb.AgentMessage.SerializeToString,
        response_deserializer=pb.CoordinatorMessage.FromString,
    )
    # Offers nothing it could be given: every run it touches is a forgery.
    caps = pb.Capabilities(hostname="forger", arch="x86_64", cpus_online=1)
    report = {}

    try:
        register(pb.RegisterRequest(capabilities=caps, resume_agent_id=args.victim), metadata=md)
        report["takeover"] = "OK"
    except grpc.RpcError as e:
        report["takeover"] = e.code().name
        report["takeover_message"] = e.details()

    me = register(pb.RegisterRequest(capabilities=caps), metadata=md).agent_id
    report["forger"] = me

    runs = [f"{args.matrix}.c{c}.r{r}" for c in range(args.cells) for r in range(args.reps)]
    outgoing = queue.Queue()

    def requests():
        while True:
            m = outgoing.get()
            if m is None:
                return
            yield m

    def result(run_id, attempt, value):
        return pb.AgentMessage(
            result=pb.RunResult(
                run=pb.RunRef(run_id=run_id, attempt=attempt),
                ok=True,
                metrics=[pb.Metric(name="wall_s", value=value, unit="s", direction=1)],
            )
        )

    # The hello claims the last run, which is still queued.
    claim = pb.RunRef(run_id=runs[-1], attempt=1)
    outgoing.put(pb.AgentMessage(hello=pb.Hello(agent_id=me, running=claim)))
    for run_id in runs:
        for attempt in (1, 2):
            outgoing.put(result(run_id, attempt, 99.0))
        outgoing.put(result(run_id, 1, math.nan))
        outgoing.put(result(run_id, 1, -1.98))
        forged = pb.BuildProgress(step=pb.BUILD_STEP_COMPILE, elapsed_s=60, estimate_s=420)
        outgoing.put(pb.AgentMessage(progress=pb.RunProgress(run=pb.RunRef(run_id=run_id, attempt=1), build=forged)))
    outgoing.put(pb.AgentMessage(heartbeat=pb.Heartbeat(seq=1)))
    # A flood: 512 messages of 1 MiB each, as fast as the stream takes them.
    # Each is a progress report carrying 1 MiB in field 2 (the free-form
    # phase the contract no longer has): an unknown field the coordinator
    # must still receive, bound and skip.
    blob = b"x" * (1 << 20)
    raw = pb.RunProgress(run=pb.RunRef(run_id=runs[0], attempt=1)).SerializeToString()
    raw += bytes([2 << 3 | 2]) + varint(len(blob)) + blob
    bloated = pb.RunProgress.FromString(raw)
    for _ in range(512):
        message = pb.AgentMessage()
        message.progress.CopyFrom(bloated)
        outgoing.put(message)

    received = []

    def read(stream):
        try:
            for m in stream:
                kind = m.WhichOneof("msg")
                ref = getattr(m, kind).run if kind == "assign" else getattr(m, kind)
                received.append(f"{kind} {ref.run_id}@{ref.attempt}")
        except grpc.RpcError as e:
            report["stream_end"] = e.code().name

    stream = session(requests(), metadata=md)
    reader = threading.Thread(target=read, args=(stream,), daemon=True)
    reader.start()
    # Until the queue is drained (the flood is sent), then a little more.
    deadline = time.time() + 60
    while not outgoing.empty() and time.time() < deadline:
        time.sleep(0.1)
    report["flood_sent"] = outgoing.empty()
    time.sleep(2)
    outgoing.put(None)
    stream.cancel()
    reader.join(5)
    report["received"] = received

    # As a submitter, with grpc-core (whose clients refuse trailers over
    # 16 KiB): a matrix that is not UTF-8, and one whose error would quote
    # a 20 KB value.
    submit_md = [("authorization", "Bearer " + open(args.submit_token_file).read().strip())]
    submit = ch.unary_unary(
        "/farm.v1.FarmService/SubmitMatrix",
        request_serializer=pb.SubmitMatrixRequest.SerializeToString,
        response_deserializer=pb.SubmitMatrixResponse.FromString,
    )
    bad = {
        "not_utf8": b'name = "\xff"\n',
        "huge_value": ('name = "x"\n[[workloads]]\nname = "' + "w" * 20000 + '"\n').encode(),
    }
    for case, toml in bad.items():
        try:
            submit(pb.SubmitMatrixRequest(file_name=b"m.toml", toml=toml), metadata=submit_md)
            report[case] = {"code": "OK"}
        except grpc.RpcError as e:
            report[case] = {"code": e.code().name, "message": e.details()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
