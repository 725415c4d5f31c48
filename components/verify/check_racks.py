"""NVLink racks as the hardware shows them: every planned rack holds its `subgroupSize` nodes, all in one NVLink
clique (GPU feature discovery's `nvidia.com/gpu.clique`, NVIDIA/k8s-device-plugin v0.19.3 internal/lm/imex.go) that
no other rack has, and in one Azure subgroup (`gpucluster.io/interconnect-subgroup-id`, written at first boot from
IMDS, components/bootstrap/rack.py), with no node carrying the rack clique check's taint
(agents/rack_clique.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpucluster.azure.scale_set.body import interconnect_name
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.verify.arm import Arm
from gpucluster.verify.kube import Kube
from gpucluster.verify.results import Check, Result
from gpucluster.vocabulary import (
    LABEL_GPU_CLIQUE,
    LABEL_INTERCONNECT_SUBGROUP_ID,
    LABEL_POOL,
    LABEL_RACK,
    TAINT_RACK_UNPROVEN,
)

RACKS = Check("cluster.racks", "docs/rack-scale.md \"What verify checks on racks\": GFD's clique label (k8s-device-plugin "
                               "v0.19.3 internal/lm/imex.go), the subgroup id from IMDS (bootstrap/rack.py), the "
                               "planned rack label (planning/node_template.py)")
SUBGROUPS = Check("azure.subgroups", "Network 2025-07-01 interconnect groups: `subgroups` is read-only, created and "
                                    "named by Azure (the declared names are the stack's racks.groups[].subgroups, "
                                    "docs/rack-scale.md)")
NETWORK_API = "2025-07-01"
"""The interconnect group's Network API version: azure-native 3.29's network.InterconnectGroup ("Uses Azure REST API
version 2025-07-01")."""
FIX = ("a node short: the scale set's instances and the node's kubelet; several cliques or none: the node's NVLink "
       "(nvidia-smi -q | grep -A3 Fabric; GFD's pod logs), a clique shared with another rack or several subgroups: "
       "the rack label does not match the hardware; raise it with Azure support and keep the rack out of quota")


def _labels(node: dict[str, Any]) -> dict[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def _tainted(node: dict[str, Any]) -> bool:
    return any(t.get("key") == TAINT_RACK_UNPROVEN for t in (node.get("spec") or {}).get("taints") or [])


def check_racks(kube: Kube, plan: ClusterPlan) -> list[Result]:
    pools = [p for p in plan.pools if p.racks is not None]
    if not pools:
        return []
    nodes = kube.list("/api/v1/nodes")
    results = []
    for pool in pools:
        assert pool.racks is not None
        mine = [n for n in nodes if _labels(n).get(LABEL_POOL) == pool.name]
        by_rack = {s.name: [n for n in mine if _labels(n).get(LABEL_RACK) == s.name] for s in pool.scale_sets}
        cliques = {rack: {_labels(n).get(LABEL_GPU_CLIQUE, "") for n in members} for rack, members in by_rack.items()}
        shared = Counter(next(iter(c)) for c in cliques.values() if len(c) == 1 and "" not in c)
        for rack, members in by_rack.items():
            problems = []
            if len(members) != pool.racks.subgroup_size:
                problems.append(f"{len(members)} node(s), the rack holds {pool.racks.subgroup_size}")
            clique = cliques[rack]
            if "" in clique and members:
                problems.append(f"{sum(1 for n in members if not _labels(n).get(LABEL_GPU_CLIQUE))} node(s) without "
                                f"{LABEL_GPU_CLIQUE}")
            if len(clique - {""}) > 1:
                problems.append(f"{len(clique - {''})} cliques ({', '.join(sorted(clique - {''}))})")
            elif len(clique) == 1 and "" not in clique and shared[next(iter(clique))] > 1:
                problems.append(f"clique {next(iter(clique))} is also another rack's")
            subgroups = {_labels(n).get(LABEL_INTERCONNECT_SUBGROUP_ID, "") for n in members}
            if len(subgroups) > 1 or "" in subgroups:
                problems.append(f"subgroup ids {sorted(subgroups)} (one expected, from IMDS at first boot)")
            tainted = sorted(str((n.get("metadata") or {}).get("name")) for n in members if _tainted(n))
            if tainted:
                problems.append(f"{TAINT_RACK_UNPROVEN} on {', '.join(tainted)}")
            if problems:
                results.append(RACKS.failed(f"rack {rack}", "; ".join(problems), FIX))
            else:
                results.append(RACKS.passed(f"rack {rack}", f"{len(members)} nodes, clique {next(iter(clique))}, "
                                                            f"subgroup {next(iter(subgroups))}"))
    return results


def group_url(subscription: str, resource_group: str, name: str) -> str:
    return (f"/subscriptions/{subscription}/resourceGroups/{resource_group}/providers/Microsoft.Network/"
            f"interconnectGroups/{name}?api-version={NETWORK_API}")


def check_subgroups(arm: Arm, plan: ClusterPlan) -> list[Result]:
    """Every declared subgroup name is one the group's Subgroups list holds (read from the group itself)."""
    results = []
    for pool in plan.pools:
        if pool.spec.racks is None:
            continue
        for i, group in enumerate(pool.spec.racks.groups):
            name = interconnect_name(pool.name, group.name)
            found = arm.get_json(group_url(arm.subscription, arm.resource_group, name))
            listed = sorted(str(s.get("name")) for s in (found.get("properties") or {}).get("subgroups") or [])
            missing = [s for s in group.subgroups if s not in listed]
            key = f"cluster.pools[{plan.spec.pools.index(pool.spec)}].racks.groups[{i}].subgroups"
            if missing:
                results.append(SUBGROUPS.failed(f"interconnect group {name}", f"declared {', '.join(missing)} not in "
                                                f"the group's subgroups ({', '.join(listed) or 'none'})",
                                                f"set {key} to the names Azure lists, in rack order; a rack scale set "
                                                "naming a missing subgroup is refused at create"))
            else:
                results.append(SUBGROUPS.passed(f"interconnect group {name}",
                                                f"{len(group.subgroups)} declared subgroup(s) all listed"))
    return results
