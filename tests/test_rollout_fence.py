"""The rollout's fence (components/planning/fence.py) against a model of kueue v0.19.2 (commit
8eab68778fc1b52affe165fdf5af29d1e9b4f3cb), each rule cited:

- a topology-aware flavor's snapshot keeps a node only when it carries every label of the flavor's nodeLabels
  (pkg/cache/scheduler/tas_nodes_cache.go `find`, lines 106-123; pkg/util/tas/node.go `NodeMatchesFlavor`, 21-33):
  tests/test_rack_admission.py's admission model applies it to the rendered flavors;
- the TAS node controller reconciles a node when its Ready condition or its taints change (pkg/controller/tas/
  node_controller.go `Update`, lines 216-233), and a workload there is unhealthy when the node is not Ready, or when
  it has a NoSchedule/NoExecute taint the workload's pods do not tolerate and none of them on the node is still
  running (`getWorkloadStatus`, 361-412; `hasSchedulingTaints`, 414-418; `checkPodsOnNode`, 480-484, with
  TASReplaceNodeOnNodeTaints and TASReplaceNodeOnPodTermination on, their defaults at this tag:
  pkg/features/kube_features.go 814-816 and 723-725)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from gpucluster.kubernetes.objects.kueue import kueue_objects
from gpucluster.planning.cluster_plan import plan_cluster
from gpucluster.planning.fence import FENCE
from tests.support.kueue_admission import (
    TOLERATE_GPU,
    Gang,
    InadmissibleError,
    Node,
    admit,
    rack_kueue_config,
    rack_nodes,
    racks_of,
)
from tests.support.stacks import stack_spec

CORDON = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


@dataclass(frozen=True)
class NodeState:
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...] = ()
    ready: bool = True


@dataclass(frozen=True)
class Pod:
    phase: str = "Running"
    deleting: bool = False
    tolerations: tuple[dict[str, str], ...] = field(default=TOLERATE_GPU)


def reconciles(old: NodeState, new: NodeState) -> bool:
    """node_controller.go `Update`: Ready changed, or the taints changed."""
    return old.ready != new.ready or old.taints != new.taints


def _tolerates(pods: list[Pod], taint: dict[str, str]) -> bool:
    return all(any(t.get("key") == taint["key"] and t.get("effect") in (None, taint["effect"]) for t in p.tolerations)
               for p in pods)


def workload_unhealthy(node: NodeState, pods: list[Pod]) -> bool:
    """`getWorkloadStatus` for a workload with a TAS assignment on the node, both feature gates on."""
    progressing = any(not p.deleting and p.phase not in ("Succeeded", "Failed") for p in pods)
    if not node.ready:
        return not progressing
    scheduling = [t for t in node.taints if t["effect"] in ("NoSchedule", "NoExecute")]
    if not scheduling:
        return False
    untolerated = [t for t in scheduling if not _tolerates(pods, t)]
    return bool(untolerated) and not progressing


def fenced(labels: dict[str, str]) -> dict[str, str]:
    return {**labels, FENCE.label: FENCE.fenced}


def test_every_rendered_flavor_requires_the_open_label_and_every_node_carries_it() -> None:
    for stack in ("prod", "gb300", "dev"):
        plan = plan_cluster(stack_spec(stack))
        flavors = [o for o in kueue_objects(plan.scheduling) if o["kind"] == "ResourceFlavor"]
        assert flavors
        for flavor in flavors:
            assert flavor["spec"]["nodeLabels"][FENCE.label] == FENCE.open, flavor["metadata"]["name"]
    assert all(n.labels[FENCE.label] == FENCE.open for n in rack_nodes())


def test_a_fenced_rack_takes_no_new_gang() -> None:
    nodes = rack_nodes()
    first = admit(Gang(18, 4, tolerations=TOLERATE_GPU), "frontier", nodes, rack_kueue_config())
    [rack] = racks_of(first)
    fenced_nodes = [replace(n, labels=fenced(n.labels)) if n.labels.get("gpucluster.io/rack") == rack else n
                    for n in nodes]
    again = admit(Gang(18, 4, tolerations=TOLERATE_GPU), "frontier", fenced_nodes, rack_kueue_config())
    assert rack not in racks_of(again) and len(racks_of(again)) == 1


def test_with_every_rack_fenced_nothing_is_admitted() -> None:
    every = [Node(n.name, fenced(n.labels), n.gpus) for n in rack_nodes()]
    with pytest.raises(InadmissibleError):
        admit(Gang(18, 4, tolerations=TOLERATE_GPU), "frontier", every, rack_kueue_config())


def test_fencing_never_makes_kueue_replace_a_node_or_evict_a_gang() -> None:
    """The fence changes a label: the node controller is not even called; and when it runs for another reason (a Ready
    flap that recovered), a fenced node without scheduling taints keeps its gang healthy, every pod there failed or
    not (a checkpointed gang whose pods exit is still not replaced by Kueue)."""
    labels = rack_nodes()[0].labels
    before, after = NodeState(labels), NodeState(fenced(labels))
    assert not reconciles(before, after)
    for pods in ([Pod()], [Pod("Failed")], [Pod(deleting=True)], [Pod("Succeeded"), Pod("Failed")]):
        assert not workload_unhealthy(after, pods)


def test_the_cordon_is_the_trap_the_fence_avoids() -> None:
    """`kubectl cordon` adds node.kubernetes.io/unschedulable:NoSchedule, which gang pods do not tolerate: the node
    controller runs, and as soon as no pod of the gang is still running there (one failed, or it checkpointed and
    exited) Kueue marks the node for replacement or evicts the workload."""
    labels = rack_nodes()[0].labels
    cordoned = NodeState(labels, taints=(CORDON,))
    assert reconciles(NodeState(labels), cordoned)
    assert not workload_unhealthy(cordoned, [Pod()])
    assert workload_unhealthy(cordoned, [Pod("Failed")])
    assert workload_unhealthy(cordoned, [Pod(deleting=True)])
