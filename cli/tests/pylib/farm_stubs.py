"""farm_pb2 for the Python clients of the tests (attack/forge.py,
tls/impostor.py): compiled at test time from the project's proto with
Debian's protoc, so the stubs always match the proto under test."""

import os
import subprocess
import sys
import tempfile


def load(proto):
    out = tempfile.mkdtemp(prefix="farm-pb2-")
    root = os.path.dirname(os.path.dirname(os.path.dirname(proto)))
    subprocess.run(
        ["protoc", f"--proto_path={root}", f"--python_out={out}", os.path.relpath(proto, root)],
        check=True,
    )
    sys.path.insert(0, os.path.join(out, "farm", "v1"))
    import farm_pb2  # noqa: E402

    return farm_pb2
