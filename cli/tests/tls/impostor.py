#!/usr/bin/python3
"""Mutual TLS seen from a client that is not ours (Python's grpcio, stubs
compiled from farm.proto by Debian's protoc).

It holds a certificate of its own and tries to speak for another agent, to
connect without a certificate or with one from another authority, and to
use a submitter's certificate on the agents' service. It prints one JSON
object of what the coordinator answered; cli/tests/tls.rs decides.
"""

import argparse
import json
import os
import sys

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "pylib"))
import farm_stubs  # noqa: E402


def read(path):
    with open(path, "rb") as f:
        return f.read()


def channel(addr, ca, cert=None, key=None):
    creds = grpc.ssl_channel_credentials(
        root_certificates=read(ca),
        private_key=read(key) if key else None,
        certificate_chain=read(cert) if cert else None,
    )
    return grpc.secure_channel(addr, creds)


def outcome(call):
    try:
        return {"code": "OK", "value": call()}
    except grpc.RpcError as e:
        return {"code": e.code().name, "message": e.details()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--proto", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--agent-cert", required=True, help="another agent's certificate")
    ap.add_argument("--agent-key", required=True)
    ap.add_argument("--foreign-cert", required=True, help="issued by another authority")
    ap.add_argument("--foreign-key", required=True)
    ap.add_argument("--submitter-cert", required=True)
    ap.add_argument("--submitter-key", required=True)
    ap.add_argument("--victim", required=True, help="the id of an agent bound to its certificate")
    args = ap.parse_args()
    pb = farm_stubs.load(args.proto)
    caps = pb.Capabilities(hostname="impostor", arch="x86_64", cpus_online=1)

    def register(ch, resume=""):
        rpc = ch.unary_unary(
            "/farm.v1.AgentService/Register",
            request_serializer=pb.RegisterRequest.SerializeToString,
            response_deserializer=pb.RegisterResponse.FromString,
        )
        return rpc(pb.RegisterRequest(capabilities=caps, resume_agent_id=resume), timeout=10).agent_id

    def hello(ch, agent_id):
        rpc = ch.stream_stream(
            "/farm.v1.AgentService/Session",
            request_serializer=pb.AgentMessage.SerializeToString,
            response_deserializer=pb.CoordinatorMessage.FromString,
        )
        msgs = iter([pb.AgentMessage(hello=pb.Hello(agent_id=agent_id))])
        for _ in rpc(msgs, timeout=10):
            return "streamed"
        return "closed"

    def agents(ch):
        rpc = ch.unary_unary(
            "/farm.v1.FarmService/ListAgents",
            request_serializer=pb.ListAgentsRequest.SerializeToString,
            response_deserializer=pb.ListAgentsResponse.FromString,
        )
        return sorted([a.agent_id, a.identity] for a in rpc(pb.ListAgentsRequest(), timeout=10).agents)

    report = {}
    other = channel(args.addr, args.ca, args.agent_cert, args.agent_key)
    # Asking to resume the victim's id gets the certificate's own id.
    report["resume_victim"] = outcome(lambda: register(other, args.victim))
    report["hello_as_victim"] = outcome(lambda: hello(other, args.victim))
    report["no_certificate"] = outcome(lambda: register(channel(args.addr, args.ca)))
    report["foreign_authority"] = outcome(
        lambda: register(channel(args.addr, args.ca, args.foreign_cert, args.foreign_key))
    )
    submitter = channel(args.addr, args.ca, args.submitter_cert, args.submitter_key)
    report["submitter_as_agent"] = outcome(lambda: register(submitter))
    report["agent_as_submitter"] = outcome(lambda: agents(other))
    report["agents"] = outcome(lambda: agents(submitter))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
