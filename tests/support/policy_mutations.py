"""Mutations of a real preview that break one policy-pack rule each, for the rules only gb300 (racks) or a budget
can break; tests/test_policy_mutations.py holds every rule to having one."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

State = dict[str, Any]
Steps = list[dict[str, Any]]


GANG = "kubernetes-kueue-resourceflavor-rack-gang"


SPARE = "kubernetes-kueue-clusterqueue-spare-racks"


KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:"


def kueue_state(steps: Steps, kind: str, name: str) -> State:
    return next(s["newState"] for s in steps if s["newState"]["type"] == KUEUE + kind
                and s["newState"]["inputs"]["metadata"]["name"] == name)


def flavor_on_the_zone_topology(steps: Steps) -> State:
    """The rack flavor on the cluster's zone -> InfiniBand domain -> host topology: no rack level to require."""
    flavor = kueue_state(steps, "ResourceFlavor", "gb300")
    flavor["inputs"]["spec"]["topologyName"] = "infiniband"
    return flavor


def flavor_without_topology(steps: Steps) -> State:
    flavor = kueue_state(steps, "ResourceFlavor", "gb300")
    del flavor["inputs"]["spec"]["topologyName"]
    return flavor


def quota_into_the_spare_racks(steps: Steps) -> State:
    """One more rack of quota than 6 racks less one spare per zone leave (216 GPUs)."""
    queue = kueue_state(steps, "ClusterQueue", "frontier")
    for row in queue["inputs"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        if row["name"] == "nvidia.com/gpu":
            row["nominalQuota"] = 288
    return queue


def spare_racks_unstated(steps: Steps) -> State:
    flavor = kueue_state(steps, "ResourceFlavor", "gb300")
    flavor["inputs"]["metadata"].pop("annotations")
    return flavor


RACK_POLICY_MUTATIONS: list[tuple[Callable[[Steps], State], str]] = [
    (flavor_on_the_zone_topology, GANG),
    (flavor_without_topology, GANG),
    (quota_into_the_spare_racks, SPARE),
    (spare_racks_unstated, SPARE),
]


BUDGET = "stack-hourly-budget"


def t4_grown_by_one(steps: list[dict[str, Any]]) -> dict[str, Any]:
    state = next(s["newState"] for s in steps if s["newState"]["urn"].endswith("::t4-z1-00"))
    state["inputs"]["sku"]["capacity"] += 1
    return state


COST_POLICY_MUTATIONS: list[tuple[Callable[[list[dict[str, Any]]], dict[str, Any]], str]] = [(t4_grown_by_one, BUDGET)]
"""The budget rule's mutation (tests/test_policy_mutations.py checks every rule has one): it needs a budget set."""
