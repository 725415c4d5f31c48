"""API Priority and Fairness: the node agents' level and schema, the break-glass schema, and the plan's check of
the agents' load against the level's seats.

Consumers: kube-apiserver's flowcontrol v1 schema (kubernetes-validate at 1.36), its validation
(kubernetes/kubernetes pkg/apis/flowcontrol/validation/validation.go: ValidateFlowSchemaSpec,
ValidatePriorityLevelConfigurationSpec, ValidatePriorityLevelQueuingConfiguration; read at a stored revision,
these rules unchanged since flowcontrol v1beta1), and how it orders schemas and divides seats
(kubernetes/apiserver v0.36.3 pkg/apis/flowcontrol/bootstrap/default.go, pkg/util/flowcontrol/apf_controller.go,
pkg/util/shufflesharding/shufflesharding.go).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpucluster.catalog.flowcontrol import CHART_AGENTS, DEFAULT_PRECEDENCE, DEFAULT_SHARES
from gpucluster.errors import SpecError
from gpucluster.kubernetes.objects.common import obj
from gpucluster.kubernetes.objects.flowcontrol import (
    BREAKGLASS_GROUP,
    NODE_AGENTS,
    calls_api,
    flowcontrol_objects,
    node_agent_accounts,
)
from gpucluster.kubernetes.objects.node_agents import layer_daemonsets
from gpucluster.offline.engine import ProgramRun
from gpucluster.offline.manifests import kubernetes_objects
from gpucluster.planning.agent_load import AgentLoad, nominal_seats, plan_agent_load
from gpucluster.simulation.check import plan_checked
from gpucluster.spec import ClusterSpec
from tests.support.manifest_validation import validate_object

MAX_HASH_BITS = 60
"""pkg/util/shufflesharding/shufflesharding.go MaxHashBits."""


def apiserver_problems(o: dict[str, Any]) -> list[str]:
    """The rules kube-apiserver's validation applies to these kinds, as the source states them."""
    spec, name, problems = o["spec"], o["metadata"]["name"], []
    if o["kind"] == "FlowSchema":
        precedence = spec["matchingPrecedence"]
        if not 1 <= precedence <= 10_000:
            problems.append("matchingPrecedence: must be a positive value, not greater than 10000")
        if precedence == 1 and name != "exempt":
            problems.append("matchingPrecedence: only the schema named 'exempt' may have matchingPrecedence 1")
        if spec.get("distinguisherMethod", {}).get("type", "ByUser") not in ("ByUser", "ByNamespace"):
            problems.append("distinguisherMethod.type: not supported")
        for rule in spec["rules"]:
            if not rule.get("subjects"):
                problems.append("subjects must contain at least one value")
            for subject in rule["subjects"]:
                if subject["kind"] == "ServiceAccount" and not subject["serviceAccount"].get("namespace"):
                    problems.append("must specify namespace for service account")
            if not rule.get("resourceRules") and not rule.get("nonResourceRules"):
                problems.append("at least one of resourceRules and nonResourceRules has to be non-empty")
    else:
        if (name == "exempt") != (spec["type"] == "Exempt"):
            problems.append("type must be 'Exempt' if and only if name is 'exempt'")
        queuing = spec["limited"]["limitResponse"].get("queuing")
        if queuing:
            if queuing["handSize"] > queuing["queues"]:
                problems.append("handSize: should not be greater than queues")
            if math.ceil(math.log2(queuing["queues"]) * queuing["handSize"]) > MAX_HASH_BITS:
                problems.append("handSize: required entropy bits greater than 60")
        if not 0 <= spec["limited"].get("lendablePercent", 0) <= 100:
            problems.append("lendablePercent: must be between 0 and 100")
    return problems


def _objects(prod_spec: ClusterSpec) -> dict[str, dict[str, Any]]:
    plan = plan_checked(prod_spec)
    return {f"{o['kind']}/{o['metadata']['name']}": o
            for o in flowcontrol_objects(node_agent_accounts(layer_daemonsets(plan)))}


def test_objects_validate_against_the_schema_and_the_apiservers_rules(prod_spec: ClusterSpec) -> None:
    for o in _objects(prod_spec).values():
        validate_object(o)
        if o["apiVersion"].startswith("flowcontrol."):
            assert apiserver_problems(o) == [], o["metadata"]["name"]


def test_the_rules_catch_what_the_apiserver_refuses(prod_spec: ClusterSpec) -> None:
    """The checks above fail on the objects the API server would refuse (so they can fail)."""
    objects = _objects(prod_spec)
    schema = objects[f"FlowSchema/{NODE_AGENTS}"]
    assert apiserver_problems({**schema, "spec": {**schema["spec"], "matchingPrecedence": 1}})
    level = objects[f"PriorityLevelConfiguration/{NODE_AGENTS}"]
    exempt_copy = {**level, "spec": {"type": "Exempt", "limited": level["spec"]["limited"]}}
    assert "type must be 'Exempt' if and only if name is 'exempt'" in apiserver_problems(exempt_copy)
    wide = {**level["spec"]["limited"]["limitResponse"]["queuing"], "handSize": 11}
    assert any("entropy" in p for p in apiserver_problems(
        {**level, "spec": {**level["spec"], "limited": {**level["spec"]["limited"], "limitResponse": {
            "type": "Queue", "queuing": wide}}}}))


def test_every_daemonset_account_is_routed_to_the_node_agents(prod_run: ProgramRun, prod_spec: ClusterSpec) -> None:
    """Read from the rendered DaemonSets (and the charts' agents), not written by hand."""
    rendered = kubernetes_objects(prod_run.registrations)
    schema = next(o for o in rendered if o["kind"] == "FlowSchema" and o["metadata"]["name"] == NODE_AGENTS)
    subjects = {(s["serviceAccount"]["namespace"], s["serviceAccount"]["name"])
                for s in schema["spec"]["rules"][0]["subjects"]}
    daemonsets = {(o["metadata"]["namespace"], o["spec"]["template"]["spec"].get("serviceAccountName", "default"))
                  for o in rendered if o["kind"] == "DaemonSet" and calls_api(o["spec"]["template"]["spec"])}
    assert daemonsets and daemonsets <= subjects
    # A DaemonSet whose pods hold no token (the RDMA device plugin) calls no API: its namespace's `default` account
    # is not put among the node agents.
    assert ("kube-system", "default") not in subjects
    assert {(a.namespace, a.service_account) for a in CHART_AGENTS} <= subjects
    # A DaemonSet added to the layer is routed without a list to edit.
    extra = obj("apps/v1", "DaemonSet", "new-agent", "monitoring", spec={"template": {"spec": {
        "serviceAccountName": "node-exporter"}}})
    assert ("monitoring", "node-exporter") in node_agent_accounts([extra])
    assert ("monitoring", "default") in node_agent_accounts([obj("apps/v1", "DaemonSet", "x", "monitoring", spec={
        "template": {"spec": {}}})])


def test_kubelets_stay_in_node_high_and_kube_system_agents_leave_workload_high(prod_spec: ClusterSpec) -> None:
    """default.go v0.36.3: `system-node-high` (400) and `system-nodes` (500) match the `system:nodes` group; a
    schema that matches first wins. Ours matches service accounts only, after 500, and before
    `kube-system-service-accounts` (900), which would otherwise take cilium's kube-system account."""
    objects = _objects(prod_spec)
    schema = objects[f"FlowSchema/{NODE_AGENTS}"]["spec"]
    assert all(s["kind"] == "ServiceAccount" for s in schema["rules"][0]["subjects"])
    assert DEFAULT_PRECEDENCE["system-nodes"][0] < schema["matchingPrecedence"]
    assert schema["matchingPrecedence"] < DEFAULT_PRECEDENCE["kube-controller-manager"][0]
    assert schema["matchingPrecedence"] < DEFAULT_PRECEDENCE["kube-system-service-accounts"][0]
    assert ("kube-system", "cilium") in {(s["serviceAccount"]["namespace"], s["serviceAccount"]["name"])
                                         for s in schema["rules"][0]["subjects"]}
    level = objects[f"PriorityLevelConfiguration/{NODE_AGENTS}"]["spec"]["limited"]
    assert level["borrowingLimitPercent"] == 0
    assert level["nominalConcurrencyShares"] < min(DEFAULT_SHARES["workload-low"], DEFAULT_SHARES["node-high"])


def test_breakglass_maps_the_admin_group_to_exempt(prod_spec: ClusterSpec) -> None:
    objects = _objects(prod_spec)
    schema = objects["FlowSchema/gpucluster-breakglass"]["spec"]
    assert schema["priorityLevelConfiguration"] == {"name": "exempt"}
    assert schema["rules"][0]["subjects"] == [{"kind": "Group", "group": {"name": BREAKGLASS_GROUP}}]
    # Before every built-in but the mandatory `exempt`, which alone may take 1.
    assert 1 < schema["matchingPrecedence"] <= min(p for n, (p, _) in DEFAULT_PRECEDENCE.items() if n != "exempt")
    binding = objects["ClusterRoleBinding/gpucluster-breakglass"]
    assert binding["roleRef"]["name"] == "cluster-admin" and binding["subjects"][0]["name"] == BREAKGLASS_GROUP


def test_seats_follow_the_apf_formula() -> None:
    """NominalCL = ceil(ServerCL x NCS / sum of NCS) over every level (apf_controller.go)."""
    assert sum(DEFAULT_SHARES.values()) == 245
    assert nominal_seats(600, 20, 265) == math.ceil(600 * 20 / 265) == 46
    plan = plan_agent_load(NODE_AGENTS, 20, 2_251, 3, (AgentLoad("a", "ns", "sa", 7_500, 2, "test"),))
    assert plan.seats == 170 * 3 and round(plan.seats_needed) == 250


def test_an_agent_over_the_levels_seats_fails_with_the_numbers() -> None:
    agents = (AgentLoad("chatty", "monitoring", "exporter", 7_500, 12, "its source"),
              AgentLoad("quiet", "monitoring", "other", 7_500, None, "not read"))
    with pytest.raises(SpecError) as caught:
        plan_agent_load(NODE_AGENTS, 20, 2_251, 3, agents)
    [line] = [str(p) for p in caught.value.problems]
    assert line.startswith("cluster.inCluster: the node agents need 1,500 seats of API Priority and Fairness level "
                           "gpucluster-node-agents and it has 510 (170 on each of 3 API servers")
    assert "monitoring/chatty: 12/min x 7,500 nodes = 1,500 req/s (its source)" in line
    assert "apf_controller.go" in line and "api_call_latency.md" in line


def test_prod_agents_fit_and_a_lost_zone_is_counted(prod_spec: ClusterSpec) -> None:
    load = plan_checked(prod_spec).agent_load
    assert load is not None and load.servers == 3  # 5 API servers, 2 in the largest zone
    assert 0 < load.seats_needed <= load.seats
    nfd = next(a for a in load.agents if a.service_account == "node-feature-discovery")
    assert nfd.nodes == 7_505 and nfd.calls_per_minute == 2


def test_a_stack_whose_agents_outgrow_one_api_server_fails_the_plan() -> None:
    """One API server for 1,500 GPU nodes: its 600 seats (400 + 200 in flight) give the node agents 46
    (ceil(600 x 20 / 265)); the health agents and NFD workers need about 100 at the SLO's second."""
    from tests.support.stacks import small_cluster, spec_of

    raw = small_cluster(controlPlane={"apiServers": {"count": 1}, "etcd": {"members": 3}, "eventsEtcd": None})
    raw["pools"][1]["count"] = 1_500
    with pytest.raises(SpecError) as caught:
        plan_checked(spec_of(raw))
    [line] = [str(p) for p in caught.value.problems if "node agents" in str(p)]
    assert "it has 46 (46 on each of 1 API servers" in line
    assert "gpucluster-health/gpu-health-gpu: 2/min x 1,500 nodes = 50 req/s" in line
    assert "cluster.controlPlane.apiServers.count" in line
