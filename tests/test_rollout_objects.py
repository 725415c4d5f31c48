"""The rollout controller's objects (components/kubernetes/objects/rollout.py): the plan's ConfigMap is what the
controller reads, every request of a whole rollout under faults is allowed by the rendered roles and nothing more
is granted, the Deployment is leader-elected on the system pool over zones. Verbs as kubernetes' request info
computes them (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go, read at commit 01bb682e: a GET
without a name is `list` or `watch`, with one `get`; POST `create`, PUT `update`, PATCH `patch`)."""

from __future__ import annotations

import json
from typing import Any

from gpucluster.agents import rollout as ro
from gpucluster.kubernetes.objects.rollout import APP, plan_document, rollout_objects
from gpucluster.planning.cluster_plan import plan_cluster
from tests.support.fake_kube import Seen
from tests.support.manifest_validation import validate_object
from tests.support.rollout_world import CPU_SET, PODS, SETS, Cluster, pod
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
    if len(rest) > 2:  # a subresource: pods/<name>/eviction is `create` on `pods/eviction`
        resource = f"{rest[0]}/{rest[2]}"
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
    """A rollout that does everything: a gang deactivated past its deadline and reactivated, a Deployment's pod evicted
    from a CPU node, cordons, taints, the state created and updated, the lease taken and renewed."""
    cluster.plan(deadline_minutes=0)
    cluster.kube.put_object(PODS, pod("web-0", f"{CPU_SET}-1", "uid-rs", kind="ReplicaSet"))
    for scale_set in (CPU_SET, *SETS):
        cluster.arm.touch(scale_set)
    controller = cluster.controller("replica-a")
    said = cluster.steps(controller, 120)
    assert said[-1] == "idle: every instance runs its scale set's model" and controller.leader is not None
    assert any("reactivated" in s for s in said) and any("evictions asked" in s for s in said), said
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
    read = ro.read_plan({"data": {"plan.json": document}})
    pools = [w for w in rollout.waves if w.kind == "pool"]
    assert [w["scaleSets"] for w in read["waves"]] == [list(w.scale_sets) for w in pools]
    assert {w["pool"]: (w["topology"], w["preflight"]) for w in read["waves"]} == {
        w.pool: (w.topology, w.preflight) for w in pools}
    assert any(w["topology"] for w in read["waves"]) and any(not w["topology"] for w in read["waves"])
    assert {w["drainMinutes"] for w in read["waves"] if w["preflight"]} == {240}


def test_an_image_bump_leaves_the_plan_document_alone() -> None:
    """What to re-image is what Azure says (latestModelApplied), not the plan: the h100 pool's image 1.0.0 -> 1.0.1
    changes nothing the controller reads, so no digest of it starts or restarts a rollout; the bump reaches the
    scale sets' models, and the controller sees their instances behind (tests/test_rollout_controller.py)."""
    spec = stack_spec("prod")
    before = plan_cluster(spec)
    pools = [p.model_copy(update={"image": p.image.model_copy(update={"version": "1.0.1"})}) if p.name == "h100" else p
             for p in spec.pools]
    after = plan_cluster(spec.model_copy(update={"pools": pools}))
    assert plan_document(after.rollout) == plan_document(before.rollout)
    changed = {m for m, v in after.images.machines.items() if before.images.machines.get(m) != v}
    assert changed and all(m.startswith("h100-") for m in changed), changed


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
