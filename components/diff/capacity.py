"""What a side of a diff holds: nodes, GPUs and InfiniBand domains per pool, pod IPs, each team's quota."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from gpucluster.diff.sides import Side
from gpucluster.policies.rules.props import SCALE_SET, resource_kind
from gpucluster.vocabulary import AUTOSCALER_GPUS_TAG, INFINIBAND_TAG, LABEL_TEAM, POOL_TAG, ROLE_TAG

NOT_NODES = ("apiserver", "etcd", "etcd-events")
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
_QUANTITY = re.compile(r"^([0-9.]+)([KMGTPE]i|[kMGTPE]|m)?$")
_FACTORS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity(value: Any) -> float | None:
    """A Kubernetes resource quantity (apimachinery pkg/api/resource: `8`, `500m`, `56Gi`) as a number; None for
    what is not one (an unknown value during preview, a masked secret, `1.2.3`)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)  # the preview reader bounds numbers (components/offline/preview_shape.py)
    match = _QUANTITY.match(value) if isinstance(value, str) and len(value) <= 64 else None
    try:
        return float(match.group(1)) * _FACTORS[match.group(2)] if match else None
    except ValueError:
        return None


def _count(value: Any) -> int:
    """A count the side states as a whole number or its digits (a tag value); 0 for anything else (unknown during
    preview, masked, not a number)."""
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 15:
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 else 0


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[dict[str, Any]]:
    """The objects of a list (a preview may show an unknown or masked placeholder instead of the list or an item)."""
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _team_quotas(resources: dict[str, dict[str, Any]], by_flavor: bool = False) -> dict[str, dict[str, float]]:
    """Each team's nominal quota per resource (summed over flavors), or per `flavor/resource`."""
    quotas: dict[str, dict[str, float]] = {}
    for state in resources.values():
        if state.get("type") != CLUSTER_QUEUE:
            continue
        inputs = _object(state.get("inputs"))
        meta = _object(inputs.get("metadata"))
        team = _object(meta.get("labels")).get(LABEL_TEAM) or meta.get("name") or state["urn"].rsplit("::", 1)[-1]
        totals: dict[str, float] = defaultdict(float)
        for group in _items(_object(inputs.get("spec")).get("resourceGroups")):
            for flavor in _items(group.get("flavors")):
                for resource in _items(flavor.get("resources")):
                    amount = quantity(resource.get("nominalQuota"))
                    if amount is not None:
                        key = str(resource.get("name", "?"))
                        totals[f"{flavor.get('name', '?')}/{key}" if by_flavor else key] += amount
        quotas[str(team)] = dict(sorted(totals.items()))
    return dict(sorted(quotas.items()))


def capacity(side: Side) -> dict[str, Any]:
    pools: dict[str, dict[str, int]] = defaultdict(lambda: {"nodes": 0, "gpus": 0, "infinibandDomains": 0})
    for state in side.resources.values():
        if resource_kind(str(state.get("type", "")), state.get("inputs") or {}) != SCALE_SET:
            continue
        inputs = _object(state.get("inputs"))
        tags = _object(inputs.get("tags"))
        if tags.get(ROLE_TAG) in NOT_NODES:
            continue
        count = _count(_object(inputs.get("sku")).get("capacity"))
        pool = pools[str(tags.get(POOL_TAG, "?"))]
        pool["nodes"] += count
        pool["gpus"] += count * _count(tags.get(AUTOSCALER_GPUS_TAG))
        pool["infinibandDomains"] += tags.get(INFINIBAND_TAG) == "true"
    totals = {key: sum(p[key] for p in pools.values()) for key in ("nodes", "gpus", "infinibandDomains")}
    pod_ips = None
    if side.summary:
        ip = _object(_object(side.summary.get("ipPlan")).get("podIps"))
        needed, available = ip.get("needed"), ip.get("available")
        if all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**53 for v in (needed, available)):
            pod_ips = {"needed": needed, "available": available}  # a summary without them (or not numbers) says none
    return {**totals, "podIps": pod_ips, "pools": dict(sorted(pools.items())),
            "teamQuota": _team_quotas(side.resources), "teamQuotaByFlavor": _team_quotas(side.resources, True)}


def _delta(base: Any, head: Any) -> Any:
    if isinstance(base, dict) or isinstance(head, dict):
        base, head = base or {}, head or {}
        return {k: _delta(base.get(k), head.get(k)) for k in sorted(set(base) | set(head))}
    if isinstance(base, int | float) or isinstance(head, int | float):
        return (head or 0) - (base or 0)
    return None


def capacity_delta(base: Side, head: Side) -> dict[str, Any]:
    before, after = capacity(base), capacity(head)
    return {"base": before, "head": after, "delta": _delta(before, after)}
