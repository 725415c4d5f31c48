"""Team pods stay off the host (components/kubernetes/objects/team_pods.py): the ValidatingAdmissionPolicy evaluated
by cel-python as kube-apiserver binds it (`object`: the Pod; validationActions Deny), and its namespace selector
against the team namespaces the plan renders. Source of the refusal's reason: IMDS answers any process on the VM
(docs/capacity.md); the IMDS guard is a Cilium policy over pod-network endpoints (objects/imds_guard.py)."""

from __future__ import annotations

import copy
from typing import Any

import celpy
from celpy.adapter import json_to_cel

from components.kubernetes.objects.kueue import kueue_objects
from components.kubernetes.objects.team_pods import POLICY, team_pod_policy
from components.planning.cluster_plan import plan_cluster
from tests.support.stacks import stack_spec

_ENV = celpy.Environment()
TRAINING_POD = {"spec": {"containers": [{"name": "trainer", "image": "t", "securityContext": {
    "capabilities": {"add": ["IPC_LOCK"]}}, "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
"""docs/scheduling.md's training pod: IPC_LOCK (which Pod Security baseline would refuse), no host namespaces."""


def _refusals(pod: dict[str, Any]) -> list[str]:
    spec = team_pod_policy()[0]["spec"]
    activation = {"object": json_to_cel(pod)}
    return [v["message"] for v in spec["validations"]
            if not bool(_ENV.program(_ENV.compile(v["expression"])).evaluate(activation))]


def _with(change: Any) -> dict[str, Any]:
    pod = copy.deepcopy(TRAINING_POD)
    change(pod)
    return pod


def test_a_training_pod_is_admitted() -> None:
    assert _refusals(TRAINING_POD) == []
    assert _refusals(_with(lambda p: p["spec"].update(hostNetwork=False))) == []


def test_host_network_host_pid_and_privileged_are_refused_with_the_reason() -> None:
    [host] = _refusals(_with(lambda p: p["spec"].update(hostNetwork=True)))
    assert "may not use the host network" in host and "IMDS (169.254.169.254)" in host
    assert len(_refusals(_with(lambda p: p["spec"].update(hostPID=True)))) == 1
    assert len(_refusals(_with(lambda p: p["spec"]["containers"][0]["securityContext"].update(privileged=True)))) == 1
    init = {"name": "init", "image": "i", "securityContext": {"privileged": True}}
    assert len(_refusals(_with(lambda p: p["spec"].update(initContainers=[init])))) == 1


def test_the_policy_selects_every_team_namespace_and_prod_declares_it() -> None:
    objects = kueue_objects(plan_cluster(stack_spec("prod")).scheduling)
    policy = next(o for o in objects if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == POLICY)
    [expression] = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    assert namespaces and all(expression["key"] in o["metadata"]["labels"] for o in namespaces)
    assert expression["operator"] == "Exists"
    assert any(o["kind"] == "ValidatingAdmissionPolicyBinding" and o["spec"]["policyName"] == POLICY for o in objects)
