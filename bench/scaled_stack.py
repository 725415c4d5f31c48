"""Generate prod scaled by k: every pool's count x k, and what such a cluster must declare to plan at all
(a wider address space, fewer SNAT ports per node for one NAT gateway,
team quotas x k); and a stack with many teams. Used by the benchmark only; nothing here is a shipped stack."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml

NAT_GATEWAY_PORTS = 16 * 64_512  # one NAT gateway: 16 public IPs x 64,512 SNAT ports


def scaled_config(prod: dict[str, Any], k: int) -> dict[str, Any]:
    config = copy.deepcopy(prod)
    cluster = config["config"]["gpucluster:cluster"]
    cluster["name"] = f"prodx{k}"
    nodes = 0
    for pool in cluster["pools"]:
        pool["count"] *= k
        if "minCount" in pool:
            pool["minCount"] *= k
        nodes += pool["count"]
    # prod's pins hold prod's pools; a cluster k times larger is a new layout, not a growth of prod's
    cluster["network"].pop("pinnedBlocks", None)
    ips = sum(p["count"] * (1 + p["podsPerNode"]) for p in cluster["pools"])
    entries = sum(p["count"] * (1 + math.ceil(p["podsPerNode"] / 16)) for p in cluster["pools"]) + 64
    if entries > 65_536:
        # Past Azure's fixed per-VNet limit even in /28 blocks: only the benchmark declares an exception.
        cluster.setdefault("limits", {})["privateIpsPerVnet"] = {
            "value": int(entries * 1.2), "note": "benchmark only", "azureException": {"reference": "benchmark only"}}
    prefix = 32 - math.ceil(math.log2(ips * 2))  # room for the scale-set spare and alignment
    cluster["network"]["addressSpace"] = [f"10.0.0.0/{min(12, prefix)}"]
    ports = max(64, 2 ** int(math.log2(NAT_GATEWAY_PORTS // (nodes + 20))))
    cluster["network"]["egress"]["snatPortsPerNode"] = ports
    public_ips = math.ceil((nodes + 20) * ports / 64_512)
    if public_ips > 16:
        # Beyond one NAT gateway (Azure's hard limit of 16 IPs): only the benchmark lifts the ceiling.
        cluster.setdefault("limits", {})["natGatewayPublicIps"] = {
            "value": public_ips, "note": "benchmark only", "azureException": {"reference": "benchmark only"}}
    for team in cluster.get("teams", []):
        team["quota"] = {key: value * k for key, value in team.get("quota", {}).items()}
    return config


def with_teams(stack_path: Path, teams: int, folder: Path) -> Path:
    """The stack with `teams` teams: its first team as it is, the rest with no quota of their own (each still a
    namespace, ClusterQueue and LocalQueues: what a team costs the plan)."""
    document = yaml.safe_load(stack_path.read_text(encoding="utf-8"))
    cluster = document["config"]["gpucluster:cluster"]
    first = cluster["teams"][0]
    cluster["teams"] = [first, *({"name": f"team-{i:03d}", "quota": {"gpus": 0}} for i in range(1, teams))]
    path = folder / f"{stack_path.stem}{teams}teams.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path


def write_scaled(prod_path: Path, k: int, folder: Path) -> Path:
    prod = yaml.safe_load(prod_path.read_text(encoding="utf-8"))
    path = folder / f"Pulumi.prodx{k}.yaml"
    path.write_text(yaml.safe_dump(scaled_config(prod, k), sort_keys=False), encoding="utf-8")
    return path
