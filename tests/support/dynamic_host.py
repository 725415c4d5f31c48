"""Pulumi's dynamic-provider host, the real one: `python -m pulumi.dynamic` (pulumi 3.272 `pulumi/dynamic/__main__.py`)
in a subprocess, driven over gRPC the way the engine drives it (ResourceProvider Configure, Check, Diff, Create, Read,
Update, Delete). It unpickles each resource's `__provider` from the properties it is sent, so what the state holds is
what runs, and it serves RPCs from its own `ThreadPoolExecutor(max_workers=4)`.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import struct_pb2
from pulumi.runtime import proto, rpc
from pulumi.runtime.proto import provider_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]


def props(values: dict[str, Any]) -> struct_pb2.Struct:
    return asyncio.run(rpc.serialize_properties(values, {}))


def unprops(struct: struct_pb2.Struct) -> dict[str, Any]:
    return rpc.deserialize_properties(struct)


@contextmanager
def dynamic_host(project: Path = ROOT) -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    """The host process running `project`'s code, configured, as a gRPC stub; stopped on exit."""
    env = {**os.environ, "PYTHONPATH": str(project), "PULUMI_PROJECT": "gpucluster"}
    process = subprocess.Popen([sys.executable, "-m", "pulumi.dynamic"], cwd=project, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().decode().strip())
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        grpc.channel_ready_future(channel).result(timeout=30)
        stub = provider_pb2_grpc.ResourceProviderStub(channel)
        stub.Configure(proto.ConfigureRequest(args=props({})))
        yield stub
        channel.close()
    finally:
        process.kill()
        process.wait(timeout=10)
