"""The first boot follows `pulumi up`'s order, read from the registrations the program records: a child waits for its
parent's dependsOn, each object for its admission prerequisites (priority class, namespace, service account, CRD),
and each gate for the DaemonSet it watches. Each test puts back one ordering an earlier version declared."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpucluster.errors import SpecError
from gpucluster.offline.engine import ProgramRun
from gpucluster.planning.cluster_plan import ClusterPlan
from gpucluster.simulation.bring_up_layer import bring_up
from gpucluster.simulation.check import check_order, plan_checked
from gpucluster.simulation.pulumi_order import ApplyOrder, Recorded, prerequisite_problems
from tests.support.stacks import stack_spec


@pytest.fixture(scope="module")
def prod() -> ClusterPlan:
    return plan_checked(stack_spec("prod"))


@pytest.fixture(scope="module")
def recorded(prod_run: ProgramRun) -> list[Recorded]:
    return [Recorded(r.urn, r.type, r.parent, r.dependencies, r.inputs) for r in prod_run.registrations]


def _urn(recorded: list[Recorded], suffix: str) -> str:
    [urn] = [r.urn for r in recorded if r.urn.endswith(suffix)]
    return urn


def _changed(recorded: list[Recorded], suffix: str, add: tuple[str, ...] = (), drop: str = "") -> list[Recorded]:
    urn = _urn(recorded, suffix)
    return [replace(r, dependencies=tuple(d for d in (*r.dependencies, *add) if not drop or drop not in d))
            if r.urn == urn else r for r in recorded]


def _messages(plan: ClusterPlan, recorded: list[Recorded]) -> list[str]:
    with pytest.raises(SpecError) as error:
        check_order(plan, ({"urn": r.urn, "type": r.type, "parent": r.parent, "dependencies": list(r.dependencies),
                            "inputs": r.inputs} for r in recorded))
    return [p.message for p in error.value.problems]


def test_prod_as_declared_boots_in_pulumi_order(prod: ClusterPlan, recorded: list[Recorded]) -> None:
    order = ApplyOrder(recorded)
    assert prerequisite_problems(order) == []
    [gate] = order.gates
    assert (gate.namespace, gate.daemonset, gate.percent) == ("kube-system", "cilium", 90)
    steps = {s.workload: s.step for s in bring_up(prod, order=order).steps}
    # The prefix IPAM controller runs before the gate: the agents it gives addresses to are what the gate waits for.
    assert steps["gpucluster-prefix-ipam"] < steps["pulumi up: prod-in-cluster-cni-ready"] < steps["coredns"]


def test_priority_classes_behind_the_cni_gate_deadlock(prod: ClusterPlan, recorded: list[Recorded]) -> None:
    """As declared before: the priority classes were children of Scheduling, which depended on the CNI gate. The
    prefix IPAM controller runs at gpucluster-system; admission refuses its pods until the class exists."""
    gate = _urn(recorded, "command:local:Command::prod-in-cluster-cni-ready")
    messages = _messages(prod, _changed(recorded, "gpucluster:kubernetes:Scheduling::prod-in-cluster-scheduling",
                                        add=(gate,)))
    [line] = [m for m in messages if m.startswith("gpucluster-prefix-ipam cannot start")]
    assert "gpucluster-prefix-ipam waits: waits for gate:pulumi up: prod-in-cluster-cni-ready" in line
    assert "cilium-agent is ready on 0 of the 7505 nodes it is scheduled on; the gate needs 90%" in line
    assert "a cycle (gpucluster-prefix-ipam -> pulumi up: prod-in-cluster-cni-ready -> cilium-agent -> " \
           "gpucluster-prefix-ipam)" in line


def test_main_before_the_fix_deadlocks(prod: ClusterPlan, recorded: list[Recorded]) -> None:
    """Before: the prefix IPAM controller and CoreDNS were ordered after nothing, the priority class behind the gate:
    the pods wait for the class (admission), the class for the gate."""
    gate = _urn(recorded, "command:local:Command::prod-in-cluster-cni-ready")
    old = _changed(_changed(recorded, "gpucluster:kubernetes:Scheduling::prod-in-cluster-scheduling", add=(gate,)),
                   "Deployment::deployment-kube-system-gpucluster-prefix-ipam", drop="PriorityClass::")
    messages = _messages(prod, old)
    assert ("Deployment kube-system/gpucluster-prefix-ipam needs PriorityClass gpucluster-system to exist first: "
            "nothing orders it before (dependsOn, a parent's dependsOn)") in messages
    [line] = [m for m in messages if m.startswith("gpucluster-prefix-ipam cannot start")]
    assert ("a cycle (gpucluster-prefix-ipam -> pulumi up: PriorityClass gpucluster-system -> pulumi up: "
            "prod-in-cluster-cni-ready -> cilium-agent -> gpucluster-prefix-ipam)") in line


def test_a_namespace_applied_in_parallel_with_its_objects(prod: ClusterPlan, recorded: list[Recorded]) -> None:
    messages = _messages(prod, _changed(recorded, "DaemonSet::daemonset-gpucluster-health-gpu-health-h100",
                                        drop=":core/v1:"))
    assert ("DaemonSet gpucluster-health/gpu-health-h100 needs Namespace gpucluster-health to exist first: nothing "
            "orders it before (dependsOn, a parent's dependsOn)") in messages


def test_a_service_account_applied_in_parallel_with_its_pods(prod: ClusterPlan, recorded: list[Recorded]) -> None:
    messages = _messages(prod, _changed(recorded, "Deployment::deployment-kube-system-cluster-autoscaler",
                                        drop="ServiceAccount::serviceaccount-kube-system-cluster-autoscaler"))
    assert any(m.startswith("Deployment kube-system/cluster-autoscaler needs ServiceAccount "
                            "kube-system/cluster-autoscaler to exist first") for m in messages)


def test_a_custom_resource_before_the_release_with_its_crd(prod: ClusterPlan, recorded: list[Recorded]) -> None:
    [queue] = [r for r in recorded if r.type.endswith(":ClusterQueue")][:1]
    messages = _messages(prod, _changed(recorded, queue.urn.rsplit("$", 1)[-1], drop="Release::prod-in-cluster"
                                                                                     "-scheduling-kueue"))
    assert any(m.startswith(f"ClusterQueue {queue.inputs['metadata']['name']} needs CustomResourceDefinition "
                            "kueue.x-k8s.io to exist first") for m in messages)
