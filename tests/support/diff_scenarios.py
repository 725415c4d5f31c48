"""dev and variations of it (a patch back, new images, zones reordered, InfiniBand pools), each planned once
in-process and read as one side of a diff."""

from __future__ import annotations

import functools
import json
from typing import Any

from gpucluster.diff.compare import PlanDiff, diff_sides
from gpucluster.diff.sides import Side, side_from_document
from gpucluster.planning.ip_plan import plan_ip
from gpucluster.planning.limits import effective_limits
from tests.support.plan_sides import plan_document, stack_raw
from tests.support.stacks import spec_of

IB_TEAMS = [{"name": "research", "quota": {"gpus": 8}}, {"name": "evals", "quota": {"gpus": 8}}]


def ib_stack(count: int, teams: list[dict[str, Any]]) -> dict[str, Any]:
    """dev with its T4 pool swapped for an InfiniBand H100 pool (100 VMs per domain)."""
    raw = stack_raw("dev")
    raw["pools"] = [p for p in raw["pools"] if p["name"] != "t4"] + [
        {"name": "h100", "kind": "gpu", "vmSize": "Standard_ND96isr_H100_v5", "count": count, "podsPerNode": 16}]
    raw["balloons"] = []
    raw["teams"] = teams
    return raw


def pinned(raw: dict[str, Any], layout_of: dict[str, Any]) -> dict[str, Any]:
    """`raw` with every block pinned where `layout_of` has it (a production stack's lock)."""
    spec = spec_of(layout_of)
    raw["network"]["pinnedBlocks"] = plan_ip(spec, effective_limits(spec)).pins
    return raw


def scenario(name: str) -> dict[str, Any]:
    raw = stack_raw("dev")
    if name == "previous-patch":
        major, minor, patch = raw["kubernetesVersion"].split(".")
        raw["kubernetesVersion"] = f"{major}.{minor}.{int(patch) - 1}"  # another released patch of the minor
    elif name == "new-images":  # dev's patch baked into new versions of every node image
        raw["images"] = {d: {"version": "1.1.0"} for d in ("gpu", "cpu", "confidential", "apiserver", "etcd")}
    elif name == "zones-reordered":
        raw["zones"] = ["3", "1", "2"]
    elif name == "pool-added":
        raw["pools"].append({"name": "cpu", "kind": "cpu", "vmSize": "Standard_D16ds_v5", "count": 1300,
                             "podsPerNode": 10})
    elif name == "system-grown":
        raw["pools"][0]["count"] = 20
    elif name == "ssh-and-etcd-size":
        raw["access"] = {"sshPublicKeys": [ssh_key()]}
        raw["controlPlane"]["etcd"]["vmSize"] = "Standard_L16s_v3"
    elif name == "ib-600":  # 6 domains of 100, two per zone
        raw = pinned(ib_stack(600, IB_TEAMS), ib_stack(600, IB_TEAMS))
    elif name == "ib-300-one-team":  # 3 domains of 100, one per zone
        raw = pinned(ib_stack(300, IB_TEAMS[:1]), ib_stack(600, IB_TEAMS))
    return raw


def ssh_key() -> str:
    """An OpenSSH ed25519 public key line (RFC 8709 wire format: string "ssh-ed25519", string key)."""
    import base64
    import struct

    def field(data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + data

    return "ssh-ed25519 " + base64.b64encode(field(b"ssh-ed25519") + field(bytes(range(32)))).decode() + " ops"


@functools.cache
def planned(name: str) -> tuple[str, str]:
    document, data = plan_document(scenario(name))
    return json.dumps(document), json.dumps(data)


def side(name: str, acknowledge: dict[str, Any] | None = None) -> Side:
    document, data = (json.loads(text) for text in planned(name))
    if acknowledge is not None:
        data["acknowledgeDeletions"] = acknowledge
    return side_from_document(name, document, data)


def diff(base: str, head: str, acknowledge: dict[str, Any] | None = None) -> PlanDiff:
    return diff_sides(side(base), side(head, acknowledge))
