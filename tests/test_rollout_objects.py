"""The rollout controller's objects (components/kubernetes/objects/rollout.py): the plan's ConfigMap is what the
controller reads, every request of a whole rollout under faults is allowed by the rendered roles and nothing more
is granted, the Deployment is leader-elected on the system pool over zones. Verbs as kubernetes' request info
computes them (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, read at commit 01bb682e: a GET
without a name is `list` or `watch`, with one `get`; POST `create`, PUT `update`, PATCH `patch`)."""

from __future__ import annotations

import json
from typing import Any

from components.kubernetes.objects.rollout import APP, plan_document, rollout_objects
from components.kubernetes.scripts import rollout as ro
from components.planning.cluster_plan import plan_cluster
from tests.support.fake_kube import Seen
from tests.support.manifest_validation import validate_object
from tests.support.rollout_world import NS, Cluster
from tests.support.stacks import stack_spec

AZURE = {"client_id": "00000000-0000-0000-0000-000000000001", "subscription_id": "sub", "resource_group": "rg"}


def _objects(stack: str = "prod") -> list[dict[str, Any]]:
    rollout = plan_cluster(stack_spec(stack)).rollout
    assert rollout is not None
    return rollout_objects(rollout, AZURE, "registry.example/gpucluster/agents:1-abc", "api.example", 6443)


def request_info(seen: Seen) -> tuple[str, str, str, str | None, str]:
    """(api group, namespace, resource, name, verb) of a resource request."""
    parts = seen.path.strip("/").split("/")
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
    verb = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[seen.method]
    if name is None and verb == "get":
        verb = "watch" if seen.query.get("watch") not in (None, "0", "false") else "list"
    return group, namespace, resource, name, verb


def allowed(info: tuple[str, str, str, str | None, str], objects: list[dict[str, Any]]) -> bool:
    group, namespace, resource, name, verb = info
    for role in objects:
        if role["kind"] not in ("ClusterRole", "Role"):
            continue
        if role["kind"] == "Role" and role["metadata"]["namespace"] != namespace:
            continue
        for rule in role["rules"]:
            if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"] and (
                    "resourceNames" not in rule or name in rule["resourceNames"]):
                return True
    return False


def test_every_request_of_a_rollout_is_allowed_by_the_rendered_roles(cluster: Cluster) -> None:
    del cluster.kube.store[f"/api/v1/namespaces/{NS}/configmaps"][ro.STATE_CONFIGMAP]  # a new cluster: state created
    controller = cluster.controller("replica-a")
    assert controller.step() == "idle: the machines were created from this plan"
    cluster.no_deadline()  # then a change to roll
    said = cluster.steps(controller, 60)
    assert said[-1] == "idle: every wave of this plan is rolled" and controller.leader is not None
    controller.leader.tried_at = float("-inf")  # a renewal (steps came faster than the lease's retry period)
    assert controller.leader.ensure()
    objects = _objects()
    made = {request_info(s) for s in cluster.kube.seen}
    denied = [i for i in made if not allowed(i, objects)]
    assert not denied, denied
    verbs = {(g, r, v) for g, _, r, _, v in made}
    granted = {(g, r, v) for o in objects if o["kind"] in ("ClusterRole", "Role")
               for rule in o["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    assert granted == verbs, "no right the controller never uses"


def test_the_rendered_plan_is_what_the_controller_reads(cluster: Cluster) -> None:
    rollout = plan_cluster(stack_spec("gb300")).rollout
    assert rollout is not None
    document = plan_document(rollout)
    plan = json.loads(document)
    assert [w["scaleSets"] for w in plan["waves"]] == [list(w.scale_sets) for w in rollout.waves]
    configmaps = f"/api/v1/namespaces/{NS}/configmaps"
    current = cluster.kube.store[configmaps][ro.PLAN_CONFIGMAP]
    cluster.kube.put_object(configmaps, {**current, "data": {"plan.json": document}})
    read, state, _ = cluster.controller().read()
    assert read["waves"] == plan["waves"] and read["drainDeadlineMinutes"] == 240 and state["phase"] == "fence"


def test_the_objects_validate_and_the_deployment_is_spread_and_leader_elected() -> None:
    objects = _objects()
    for o in objects:
        validate_object(o)
    [deployment] = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2 and deployment["metadata"]["name"] == APP
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "topology.kubernetes.io/zone"
    assert spec["nodeSelector"] == {"gpucluster.io/role": "system"}
    assert spec["containers"][0]["command"][-1].endswith("/rollout.py")
    assert json.dumps(objects, sort_keys=True) == json.dumps(_objects(), sort_keys=True), "deterministic"
