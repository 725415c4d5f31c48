"""Rack clique check: a CronJob on the system pool that holds every NVLink rack node's planned rack label against
the NVLink partition the hardware reports. Standard library only (with kube_client.py and health_agent.py, shipped
beside it in the agents image).

GPU feature discovery labels a node `nvidia.com/gpu.clique: <cluster UUID>.<clique id>` from NVML's GPU fabric info
when all its GPUs agree, and sets no label otherwise (NVIDIA/k8s-device-plugin v0.19.3, the GFD the pinned GPU
operator v26.3.3 runs: internal/lm/imex.go `newImexLabeler`, internal/resource/nvml-device.go `GetFabricIDs`). The
nodes of one rack (label `gpucluster.io/rack`, the rack's scale set) must share one clique, and no two racks one.
A node that does not (no clique, a clique other than its rack's, or a rack whose clique another rack also has) gets
the NoSchedule taint `gpucluster.io/rack-unproven` and takes no rack work; the taint comes off once it agrees.

  check <pool>[,<pool>...]   one pass over the rack pools' nodes
"""

from __future__ import annotations

import sys
from collections import Counter
from typing import Any

if __package__:
    from . import health_agent as ha
    from . import kube_client as kc
else:  # the agents image: the scripts side by side in /opt/gpucluster
    import health_agent as ha  # type: ignore[no-redef]
    import kube_client as kc  # type: ignore[no-redef]

CLIQUE = "nvidia.com/gpu.clique"
RACK = "gpucluster.io/rack"
POOL = "gpucluster.io/pool"
UNPROVEN = "gpucluster.io/rack-unproven"


def _labels(node: dict[str, Any]) -> dict[str, Any]:
    metadata = node.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def _name(node: dict[str, Any]) -> str:
    metadata = node.get("metadata")
    return str(metadata.get("name")) if isinstance(metadata, dict) else ""


def unproven(nodes: list[dict[str, Any]]) -> dict[str, str]:
    """Node name -> why its rack label is not borne out; nodes not listed agree. A rack's clique is the one most of
    its nodes report (a tie: none)."""
    racks: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        racks.setdefault(str(_labels(node).get(RACK, "")), []).append(node)
    majority: dict[str, str | None] = {}
    for rack, members in racks.items():
        counted = Counter(str(_labels(n)[CLIQUE]) for n in members if _labels(n).get(CLIQUE))
        top = counted.most_common(2)
        majority[rack] = top[0][0] if top and (len(top) == 1 or top[0][1] > top[1][1]) else None
    owners = Counter(c for r, c in majority.items() if c is not None and r)
    found = {}
    for rack, members in racks.items():
        clique = majority[rack]
        for node in members:
            mine = _labels(node).get(CLIQUE)
            if not rack:
                found[_name(node)] = f"no {RACK} label"
            elif not mine:
                found[_name(node)] = f"no {CLIQUE} label (GPU feature discovery found no single NVLink clique)"
            elif clique is None:
                found[_name(node)] = f"rack {rack} has no majority clique"
            elif mine != clique:
                found[_name(node)] = f"clique {mine}, its rack {rack}'s is {clique}"
            elif owners[clique] > 1:
                found[_name(node)] = f"clique {clique} is the majority of {owners[clique]} racks"
    return found


def check(kube: kc.Kube, pools: list[str]) -> int:
    selector = f"{POOL} in ({','.join(pools)})"
    nodes = [n for n in kube.list_items("/api/v1/nodes", {"labelSelector": selector}) if isinstance(n, dict)]
    wrong = unproven(nodes)
    failed = 0
    for node in nodes:
        name = _name(node)
        tainted = ha.has_taint(node, UNPROVEN)
        try:
            if name in wrong and not tainted:
                ha.set_taints(kube, name, lambda t: ha.with_taint(t, UNPROVEN, "clique"))
                print(f"{name}: tainted {UNPROVEN}: {wrong[name]}")
            elif name not in wrong and tainted:
                ha.set_taints(kube, name, lambda t: ha.without_taint(t, UNPROVEN))
                print(f"{name}: clique agrees with its rack, {UNPROVEN} removed")
        except kc.ApiError as error:
            failed += 1
            kc.log(f"{name}: {error}")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[1] == "check" and argv[2]:
        try:
            return check(ha.kube_from_env(), argv[2].split(","))
        except Exception as error:  # one line and exit 1 on anything a server sent, as the health agent does
            kc.log(f"rack-clique: {type(error).__name__}: {str(error)[:300]}")
            return 1
    kc.log("usage: rack_clique.py check <pool>[,<pool>...]")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
