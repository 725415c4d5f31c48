"""A small model of kueue v0.19.2's admission for gangs on rack pools, each step cited (kubernetes-sigs/kueue v0.19.2),
over the Kueue objects the gb300 stack renders (tests/test_rack_admission.py, test_rack_dra.py, test_rollout_fence.py):

1. DRA: a PodSet's ResourceClaimTemplate devices are counted per DeviceClass and mapped through the Configuration's
   `resources.deviceClassMappings`; an unmapped class makes the workload inadmissible ("DeviceClass %s is not mapped
   in DRA configuration for podset %s", pkg/dra/claims.go GetResourceRequestsForResourceClaimTemplates, called from
   pkg/controller/core/workload_controller.go).
2. Flavor assignment: the ClusterQueue's flavors in order; a requested resource the group does not cover is
   unavailable; the flavor's nodeTaints must be tolerated (its own tolerations count); the PodSet's total must fit
   the nominal quota (pkg/scheduler/flavorassigner/flavorassigner.go).
3. TAS: placement uses the pod spec's requests only, not the DRA resources (tas_flavorassigner.go
   podSetTopologyRequest: "Use PodSpec directly for TAS placement"); with `podset-required-topology` every pod lands
   in one domain of that level, the fitting domain with the fewest free pod slots (pkg/cache/scheduler/
   tas_flavor_snapshot.go findBestFitDomain).
0. Before all of it, the Workload Kueue creates for the gang passes the cluster's ValidatingAdmissionPolicy on gang
   shapes (components/kubernetes/objects/rack_gangs.py), evaluated here by cel-python as kube-apiserver binds it
   (`object`: the Workload, apis/kueue/v1beta2 `spec.podSets[]` with `count`, `template`, `topologyRequest.required`).
   Channels are then one per pod, and a pod smaller than a node is packed beside others of its gang (TAS counts GPUs
   only) where the driver's one channel per node (dra-driver-nvidia-gpu v25.12.0) serves only one of them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from typing import Any

import celpy
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType

from gpucluster.kubernetes.objects.kueue import (
    COMPUTE_DOMAIN_CHANNEL_CLASS,
    kueue_configuration,
    kueue_objects,
)
from gpucluster.kubernetes.objects.rack_gangs import POLICY
from gpucluster.planning.cluster_plan import ClusterPlan, plan_cluster
from gpucluster.planning.node_template import node_labels
from tests.support.stacks import stack_spec

GPU = "nvidia.com/gpu"


HOSTNAME = "kubernetes.io/hostname"


@cache
def _plan() -> ClusterPlan:
    return plan_cluster(stack_spec("gb300"))


@cache
def rack_objects() -> dict[tuple[str, str], dict[str, Any]]:
    return {(o["kind"], o["metadata"]["name"]): o for o in kueue_objects(_plan().scheduling)}


@dataclass
class Node:
    name: str
    labels: dict[str, str]
    gpus: int


def rack_nodes(down: frozenset[str] = frozenset()) -> list[Node]:
    """Every rack VM as it registers (the planner's labels), Ready unless named in `down`."""
    plan = _plan()
    found = []
    for pool in plan.pools:
        for scale_set in pool.scale_sets:
            labels = node_labels(pool, scale_set, plan.spec.location)
            for i in range(scale_set.capacity):
                name = f"{scale_set.name}-{i:06d}"
                if name not in down:
                    found.append(Node(name, {**labels, HOSTNAME: name}, pool.size.gpus))
    return found


@dataclass(frozen=True)
class Gang:
    pods: int
    gpus_per_pod: int
    device_class: str = COMPUTE_DOMAIN_CHANNEL_CLASS
    required_level: str | None = "gpucluster.io/rack"
    tolerations: tuple[dict[str, str], ...] = ()

    def workload(self) -> dict[str, Any]:
        """The Workload Kueue's Job reconciler creates: one PodSet, the pod template as written."""
        container = {"name": "worker", "image": "trainer", "resources": {"limits": {GPU: str(self.gpus_per_pod)}}}
        claims = [{"name": "channel", "resourceClaimTemplateName": "domain-channel"}]
        podset: dict[str, Any] = {"name": "workers", "count": self.pods,
                                  "template": {"spec": {"containers": [container], "resourceClaims": claims}}}
        if self.required_level:
            podset["topologyRequest"] = {"required": self.required_level}
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Workload", "spec": {"podSets": [podset]}}


_CEL = celpy.Environment()


def _shape_policy(gang: Gang) -> None:
    """The rendered ValidatingAdmissionPolicy over the gang's Workload (`validationActions: [Deny]`)."""
    spec = rack_objects()[("ValidatingAdmissionPolicy", POLICY)]["spec"]
    activation = {"object": json_to_cel(gang.workload())}
    for validation in spec["validations"]:
        result = _CEL.program(_CEL.compile(validation["expression"])).evaluate(activation)
        assert isinstance(result, BoolType), result
        if not result:
            raise InadmissibleError(validation["message"])


def _dra(gang: Gang, config: dict[str, Any]) -> dict[str, int]:
    mapped = {c: m["name"] for m in config["resources"].get("deviceClassMappings", []) for c in m["deviceClassNames"]}
    if gang.device_class not in mapped:
        raise InadmissibleError(f"DeviceClass {gang.device_class} is not mapped in DRA configuration for podset workers")
    return {mapped[gang.device_class]: gang.pods}  # one channel per pod's claim


class InadmissibleError(Exception):
    pass


def _tolerated(taints: list[dict[str, Any]], tolerations: list[dict[str, Any]]) -> bool:
    return all(any(t.get("key") == taint["key"] and t.get("effect") in (None, taint["effect"])
                   and (t.get("operator") == "Exists" or t.get("value") == taint.get("value")) for t in tolerations)
               for taint in taints if taint["effect"] in ("NoSchedule", "NoExecute"))


def admit(gang: Gang, queue: str, nodes: list[Node], config: dict[str, Any]) -> dict[str, str]:
    """Pod -> node, or InadmissibleError."""
    _shape_policy(gang)
    requests = {GPU: gang.pods * gang.gpus_per_pod, **_dra(gang, config)}
    cq = rack_objects()[("ClusterQueue", queue)]["spec"]
    [group] = cq["resourceGroups"]
    for resource in requests:
        if resource not in group["coveredResources"]:
            raise InadmissibleError(f"resource {resource} unavailable in ClusterQueue")
    for entry in group["flavors"]:
        flavor = rack_objects()[("ResourceFlavor", entry["name"])]["spec"]
        if not _tolerated(flavor.get("nodeTaints", []), [*gang.tolerations, *flavor.get("tolerations", [])]):
            continue
        quota = {r["name"]: int(str(r["nominalQuota"])) for r in entry["resources"] if r["name"] in requests}
        if any(n > quota.get(r, 0) for r, n in requests.items()):
            continue
        placed = tas_placement(gang, flavor, nodes)
        if placed is not None:
            return placed
    raise InadmissibleError("couldn't assign flavors to pod set workers")


def tas_placement(gang: Gang, flavor: dict[str, Any], nodes: list[Node]) -> dict[str, str] | None:
    levels = [lv["nodeLabel"] for lv in rack_objects()[("Topology", flavor["topologyName"])]["spec"]["levels"]]
    mine = [n for n in nodes if all(n.labels.get(k) == v for k, v in flavor["nodeLabels"].items())]
    level = gang.required_level or levels[-1]
    assert level in levels
    slots: dict[str, list[Node]] = defaultdict(list)
    for node in mine:
        for _ in range(node.gpus // gang.gpus_per_pod):  # pod-spec requests only: DRA channels are not counted
            slots[node.labels[level]].append(node)
    fitting = sorted((len(s), d) for d, s in slots.items() if len(s) >= gang.pods)
    if not fitting:
        return None
    domain = fitting[0][1]  # best fit: the fewest free slots that still fit
    return {f"worker-{i}": node.name for i, node in enumerate(slots[domain][:gang.pods])}


def rack_kueue_config() -> dict[str, Any]:
    return kueue_configuration(30, racks=True)


def racks_of(placement: dict[str, str]) -> set[str]:
    by_name = {n.name: n for n in rack_nodes()}
    return {by_name[node].labels["gpucluster.io/rack"] for node in placement.values()}


TOLERATE_GPU = ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},)
