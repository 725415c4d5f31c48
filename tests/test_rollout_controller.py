"""The rollout controller (components/kubernetes/scripts/rollout.py) against the fake API server and a fake ARM, with
faults: a running gang is not evicted before its deadline, two domains of a pool are never out at once, a controller
replaced mid-wave resumes where the state says, a failed reimage or health check stops the rollout with the wave
fenced, ARM 429s and API 410s are survived, the pause annotation holds it. Kueue's and the health agent's parts are
played by the test between steps (`Cluster.kueue`, `Cluster.health`)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from components.azure.scale_set.routes import SCALE_SET_API_VERSION
from components.kubernetes.scripts import kube_client as kc
from components.kubernetes.scripts import rollout as ro
from tests.support.fake_kube import FakeKube, Fault
from tests.support.rollout_world import NS, SETS, WORKLOADS, Cluster, rollout_plan

ROLLED = "idle: every wave of this plan is rolled"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


def _state(cluster: Cluster) -> dict[str, Any]:
    return json.loads(cluster.kube.store[CONFIGMAPS][ro.STATE_CONFIGMAP]["data"]["state.json"])


def _new_plan(cluster: Cluster, plan: dict[str, Any]) -> None:
    """What a `pulumi up` that changes the machines' model does: a new plan.json in the plan ConfigMap."""
    plan_map = cluster.kube.store[CONFIGMAPS][ro.PLAN_CONFIGMAP]
    cluster.kube.put_object(CONFIGMAPS, {**plan_map, "data": {"plan.json": json.dumps(plan)}})


def test_a_new_cluster_is_not_rolled_the_plan_it_was_created_from(cluster: Cluster) -> None:
    """No state yet: the machines were created from this plan's model, so nothing is fenced or re-imaged, and the
    controller idles instead of exiting (an exiting Deployment pod is restarted and backs off)."""
    del cluster.kube.store[CONFIGMAPS][ro.STATE_CONFIGMAP]
    controller = cluster.controller()
    said = ro.run(controller, iter(range(3)), sleep=lambda s: None)
    assert said == ROLLED and cluster.arm.reimaged == [] and cluster.fenced() == set()
    assert _state(cluster)["plan"] and cluster.kube.requests("PATCH", r"^/api/v1/nodes/") == []


def test_a_second_change_is_rolled_again_from_the_first_wave(cluster: Cluster) -> None:
    cluster.no_deadline()
    assert cluster.steps(cluster.controller(), 40)[-1] == ROLLED
    assert cluster.arm.reimaged == list(SETS)
    _new_plan(cluster, rollout_plan(deadline_minutes=30))
    assert cluster.steps(cluster.controller(), 40)[-1] == ROLLED
    assert cluster.arm.reimaged == [*SETS, *SETS]


def test_a_plan_changed_mid_wave_finishes_that_wave_then_starts_over(cluster: Cluster) -> None:
    """The wave in progress keeps the scale sets it recorded; the new plan starts at its first wave after the lift."""
    cluster.no_deadline()
    cluster.steps(cluster.controller(), 3)
    assert _state(cluster)["phase"] != "fence" and _state(cluster)["current"]["scaleSets"] == [SETS[0]]
    changed = rollout_plan()
    changed["waves"] = [w for w in changed["waves"] if w["kind"] != "pool" or w["scaleSets"] != [SETS[0]]][::-1]
    _new_plan(cluster, changed)
    said = cluster.steps(cluster.controller(), 60)
    assert said[-1] == ROLLED, said
    assert cluster.arm.reimaged[0] == SETS[0] and sorted(cluster.arm.reimaged[1:]) == sorted(SETS[1:])
    assert cluster.fenced() == set()


def _gang(cluster: Cluster) -> dict[str, Any]:
    found = cluster.kube.get_object(WORKLOADS, "gang")
    assert found is not None
    return found


def test_a_running_gang_is_not_evicted_before_its_deadline(cluster: Cluster) -> None:
    controller = cluster.controller()
    cluster.steps(controller, 5)
    assert cluster.fenced() == {f"{SETS[0]}-0", f"{SETS[0]}-1"}
    assert _gang(cluster)["spec"].get("active") is not False, "no eviction before the deadline"
    pods = cluster.kube.store["/api/v1/namespaces/team-a/pods"]
    assert all(ro.CHECKPOINT in p["metadata"]["annotations"] for p in pods.values()), "the checkpoint signal"
    assert cluster.arm.reimaged == []
    cluster.clock[0] += 60 * 60 + 1
    cluster.steps(controller, 5)  # deadline seen, deactivated, reactivated once evicted, upgraded, re-imaged
    gang = _gang(cluster)
    assert gang["spec"]["active"] is True and not gang["status"].get("admission"), "evicted whole, then requeued"
    assert cluster.arm.reimaged == [SETS[0]]


def test_a_finished_gang_does_not_hold_its_wave(cluster: Cluster) -> None:
    """The gang checkpointed and exited: its Workload is Finished but keeps its admission and quota (as the real Kueue
    leaves it); the wave goes on without waiting for the deadline or deactivating it."""
    gang = _gang(cluster)
    cluster.kube.put_object(WORKLOADS, {**gang, "status": {**gang["status"], "conditions": [
        *gang["status"]["conditions"], {"type": "Finished", "status": "True"}]}})
    cluster.steps(cluster.controller(), 8)
    assert cluster.arm.reimaged[:1] == [SETS[0]], "re-imaged before the drain deadline"
    assert _gang(cluster)["spec"].get("active") is not False, "a finished workload is not deactivated"


def test_two_domains_of_a_pool_are_never_out_at_once_and_the_rollout_finishes(cluster: Cluster) -> None:
    cluster.no_deadline()
    said = cluster.steps(cluster.controller(), 40)
    assert said[-1] == ROLLED, said
    assert cluster.arm.reimaged == list(SETS)
    for fenced in cluster.fenced_history:
        assert len({name.rsplit("-", 1)[0] for name in fenced}) <= 1, fenced
    assert cluster.fenced() == set()
    assert not any(t for n in cluster.kube.store["/api/v1/nodes"].values() for t in n["spec"]["taints"])
    lists = cluster.kube.requests("GET", r"^/api/v1/nodes$")
    assert lists and all(r.query.get("labelSelector") for r in lists), "never a list of every node"


def test_a_controller_replaced_mid_wave_resumes_where_it_was(cluster: Cluster) -> None:
    cluster.no_deadline()
    cluster.steps(cluster.controller(), 6)  # fenced, deadline seen, deactivated, reactivated, upgraded, reimage asked
    state = json.loads(cluster.kube.store[f"/api/v1/namespaces/{NS}/configmaps"][ro.STATE_CONFIGMAP]["data"]["state.json"])
    assert (state["wave"], state["phase"]) == (1, "reimaging")
    said = cluster.steps(cluster.controller(), 40)  # a new process, nothing in memory
    assert said[-1] == ROLLED
    assert cluster.arm.reimaged == list(SETS), "the first domain is not asked to re-image again"
    assert cluster.arm.upgraded == list(SETS), "nor to upgrade again"


def test_a_failed_reimage_stops_the_rollout_with_the_domain_fenced(cluster: Cluster) -> None:
    cluster.no_deadline()
    cluster.arm.failing.add(SETS[0])
    said = cluster.steps(cluster.controller(), 40)
    assert said[-1].startswith("stopped: h100-z1-00: an instance ended ProvisioningState/failed"), said
    assert cluster.fenced() == {f"{SETS[0]}-0", f"{SETS[0]}-1"}
    assert cluster.controller().step().startswith("stopped at wave 1")
    assert cluster.arm.upgraded == [SETS[0]] and cluster.arm.reimaged == []


def test_a_failed_health_check_stops_the_rollout_with_the_domain_fenced(cluster: Cluster) -> None:
    cluster.no_deadline()
    said = cluster.steps(cluster.controller(), 40, sick=f"{SETS[0]}-1")
    assert said[-1].startswith("stopped: health check failed on h100-z1-00-1"), said
    assert cluster.fenced() == {f"{SETS[0]}-0", f"{SETS[0]}-1"} and cluster.arm.reimaged == [SETS[0]]


def test_arm_429s_and_api_410s_and_failed_reads_are_survived(cluster: Cluster) -> None:
    cluster.no_deadline()
    reimage = r"/virtualMachineScaleSets/h100-z1-00/reimage"  # faults match the path with its query
    cluster.arm.inject("POST", reimage, Fault(429, {"Retry-After": "1"}, times=3))
    cluster.kube.inject("GET", r"^/api/v1/nodes\?", Fault(410, times=2))
    cluster.arm.inject("GET", r"/instanceView", Fault(500, times=7))  # a read failing past its retries: next round
    controller = cluster.controller()
    said = ""
    for _ in range(60):
        said = ro.run(controller, iter(range(1)), sleep=lambda s: None)
        cluster.fenced_history.append(cluster.fenced())
        cluster.kueue()
        cluster.health()
        if said == ROLLED:
            break
    assert said == ROLLED
    assert cluster.arm.reimaged == list(SETS)
    assert len(cluster.arm.requests("POST", reimage)) == 4, "three 429s, then the reimage"
    assert len(cluster.kube.requests("GET", r"^/api/v1/nodes$")) > 2, "the 410s were asked again"


def test_the_pause_annotation_holds_the_rollout(cluster: Cluster) -> None:
    plan = cluster.kube.store[f"/api/v1/namespaces/{NS}/configmaps"][ro.PLAN_CONFIGMAP]
    cluster.kube.put_object(f"/api/v1/namespaces/{NS}/configmaps",
                            {**plan, "metadata": {**plan["metadata"], "annotations": {ro.PAUSE_ANNOTATION: "true"}}})
    assert cluster.steps(cluster.controller(), 3) == ["paused"] * 3
    assert cluster.fenced() == set()


def test_the_controller_sends_the_providers_compute_api_version_and_the_vocabularys_names() -> None:
    from components.vocabulary import (
        ANNOTATION_CHECKPOINT_BY,
        LABEL_IB_DOMAIN,
        LABEL_POOL,
        LABEL_RACK,
        TAINT_PREFLIGHT,
        TAINT_UNHEALTHY,
    )

    assert ro.COMPUTE_API_VERSION == SCALE_SET_API_VERSION
    assert (ro.CHECKPOINT, ro.PREFLIGHT, ro.UNHEALTHY) == (ANNOTATION_CHECKPOINT_BY, TAINT_PREFLIGHT, TAINT_UNHEALTHY)
    assert (ro.DOMAIN_LABEL, ro.RACK_LABEL, ro.POOL_LABEL) == (LABEL_IB_DOMAIN, LABEL_RACK, LABEL_POOL)


def test_only_the_lease_holder_steps(cluster: Cluster) -> None:
    first, second = cluster.controller("replica-a"), cluster.controller("replica-b")
    assert first.step().startswith("wave 1: fenced")
    assert second.step() == "not the leader"
    assert cluster.kube.holder() == "replica-a"


def test_the_controller_sends_only_the_arm_requests_its_role_grants(cluster: Cluster) -> None:
    """Every ARM request of a whole rollout is one that components/catalog/arm_operations.py read from the
    controller's source, and its action is in the controller's role (tests/test_addon_roles.py checks the role
    against Azure's operations list)."""
    from components.catalog.addon_permissions import ROLLOUT
    from components.catalog.arm_operations import rbac_action, rollout_operations

    cluster.no_deadline()
    assert cluster.steps(cluster.controller(), 40)[-1] == ROLLED
    templates = [re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(op.path)) + "$")
                 for op in rollout_operations()]
    sent = [s for s in cluster.arm.seen if s.path != "/metadata/identity/oauth2/token"]
    assert {s.method for s in sent} == {"POST", "GET"}
    for s in sent:
        assert any(t.match(s.path) for t in templates), s.path
        # as Microsoft's list spells it (`manualupgrade` is posted for `manualUpgrade/action`: test_addon_roles.py)
        assert rbac_action(s.method, s.path).lower() in {p.action.lower() for p in ROLLOUT}


def test_a_node_changed_since_it_was_read_is_not_tainted_blindly(cluster: Cluster) -> None:
    """The preflight taint replaces the node's taint list: a node edited since the read (another taint added) makes
    the patch fail with 409; nothing is re-imaged in that round, and the next round reads again and keeps both."""
    cluster.no_deadline()
    controller = cluster.controller()
    cluster.steps(controller, 4)  # fenced, deadline seen, deactivated, reactivated: next is reimage
    bumped: list[str] = []

    def edit_first(method: str, path: str, kube: FakeKube) -> None:
        if method == "PATCH" and path.startswith("/api/v1/nodes/") and not bumped:
            name = path.rsplit("/", 1)[1]
            node = kube.store["/api/v1/nodes"][name]
            taint = {"key": "example.com/maintenance", "value": "x", "effect": "NoSchedule"}
            kube.put_object("/api/v1/nodes", {**node, "spec": {**node["spec"], "taints": [taint]}})
            bumped.append(name)

    cluster.kube.before_write = edit_first
    with pytest.raises(kc.ApiError) as raised:
        controller.step()
    assert raised.value.status == 409 and cluster.arm.reimaged == []
    cluster.kube.before_write = None
    assert controller.step().startswith("wave 1: upgrade asked") and cluster.arm.upgraded == [SETS[0]]
    taints = {t["key"] for t in cluster.kube.store["/api/v1/nodes"][bumped[0]]["spec"]["taints"]}
    assert taints == {"example.com/maintenance", ro.PREFLIGHT}
