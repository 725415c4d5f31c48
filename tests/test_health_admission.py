"""The GPU health accounts' ValidatingAdmissionPolicy, evaluated by a CEL engine (cel-python, an implementation of
the CEL spec; kube-apiserver runs cel-go). The expressions use core CEL only (`has()`, macros, `in`), which both
implement alike; the variables are bound as kube-apiserver binds them for a validating admission policy
(kubernetes `staging/src/k8s.io/apiserver/pkg/admission/plugin/policy/validating`: `object`, `oldObject`, `request`
with `userInfo.username` and `userInfo.extra`, a map of string lists). A request is admitted when the match condition
is false or every validation is true (`validationActions: [Deny]`)."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType

from gpucluster.kubernetes.objects.health import AGENT_ACCOUNT, NAMESPACE, NODE_NAME_CLAIM, RECHECK_ACCOUNT, node_policy
from gpucluster.vocabulary import TAINT_PREFLIGHT as PREFLIGHT_TAINT_KEY
from gpucluster.vocabulary import TAINT_UNHEALTHY as UNHEALTHY_TAINT_KEY

AGENT = f"system:serviceaccount:{NAMESPACE}:{AGENT_ACCOUNT}"
RECHECK = f"system:serviceaccount:{NAMESPACE}:{RECHECK_ACCOUNT}"
NODE = {"metadata": {"name": "h100-z1-00000001", "labels": {"gpucluster.io/pool": "h100"}},
        "spec": {"taints": [{"key": PREFLIGHT_TAINT_KEY, "value": "pending", "effect": "NoSchedule"},
                            {"key": "gpucluster.io/pool", "value": "h100", "effect": "NoSchedule"}]}}
_ENV = celpy.Environment()


def admitted(user: str, old: dict[str, Any], new: dict[str, Any], node_name: str | None = None) -> bool:
    spec = node_policy()[0]["spec"]
    extra = {NODE_NAME_CLAIM: [node_name]} if node_name else {}
    activation = {"object": json_to_cel(new), "oldObject": json_to_cel(old),
                  "request": json_to_cel({"userInfo": {"username": user, "extra": extra}})}

    def holds(expression: str) -> bool:
        result = _ENV.program(_ENV.compile(expression)).evaluate(activation)
        assert isinstance(result, BoolType), (expression, result)
        return bool(result)

    if not all(holds(c["expression"]) for c in spec["matchConditions"]):
        return True
    return all(holds(v["expression"]) for v in spec["validations"])


def _with(node: dict[str, Any], change: Any) -> dict[str, Any]:
    changed = copy.deepcopy(node)
    change(changed)
    return changed


def _untaint(n: dict[str, Any]) -> None:
    n["spec"]["taints"] = [t for t in n["spec"]["taints"] if t["key"] != PREFLIGHT_TAINT_KEY]


def _unhealthy(n: dict[str, Any]) -> None:
    n["spec"]["taints"].append({"key": UNHEALTHY_TAINT_KEY, "value": "diag-failed", "effect": "NoSchedule"})


def _relabel(n: dict[str, Any]) -> None:
    n["metadata"]["labels"]["gpucluster.io/pool"] = "cpu"


def _drop_pool_taint(n: dict[str, Any]) -> None:
    n["spec"]["taints"] = [t for t in n["spec"]["taints"] if t["key"] != "gpucluster.io/pool"]


def _cordon(n: dict[str, Any]) -> None:
    n["spec"]["unschedulable"] = True


def _annotate(n: dict[str, Any]) -> None:
    n["metadata"]["annotations"] = {"x": "y"}


def test_the_agent_changes_its_own_nodes_two_taints() -> None:
    name = NODE["metadata"]["name"]
    assert admitted(AGENT, NODE, _with(NODE, _untaint), name)
    assert admitted(AGENT, NODE, _with(NODE, _unhealthy), name)


def test_the_agent_cannot_touch_another_node_or_go_without_the_claim() -> None:
    assert not admitted(AGENT, NODE, _with(NODE, _untaint), "h100-z1-00000002")
    assert not admitted(AGENT, NODE, _with(NODE, _untaint), None)


@pytest.mark.parametrize("change", [_relabel, _drop_pool_taint, _cordon, _annotate])
def test_the_agent_cannot_change_anything_else_of_its_node(change: Any) -> None:
    assert not admitted(AGENT, NODE, _with(NODE, change), NODE["metadata"]["name"])


def test_the_recheck_moves_only_the_preflight_taint() -> None:
    back = {**copy.deepcopy(NODE)}
    _untaint(back)
    assert admitted(RECHECK, back, NODE)  # puts the preflight taint back on any node of a pool
    assert not admitted(RECHECK, NODE, _with(NODE, _unhealthy))
    assert not admitted(RECHECK, NODE, _with(NODE, _relabel))


def test_other_users_are_not_matched() -> None:
    assert admitted("system:node:h100-z1-00000001", NODE, _with(NODE, _relabel))
    assert admitted("kubernetes-admin", NODE, _with(NODE, _cordon))


def test_a_node_without_taints_or_labels_is_evaluated_not_an_error() -> None:
    bare = {"metadata": {"name": "n"}, "spec": {}}
    tainted = {"metadata": {"name": "n"}, "spec": {"taints": [
        {"key": UNHEALTHY_TAINT_KEY, "value": "x", "effect": "NoSchedule"}]}}
    assert admitted(AGENT, bare, tainted, "n")
    assert not admitted(AGENT, bare, {"metadata": {"name": "n", "labels": {"a": "b"}}, "spec": {}}, "n")
