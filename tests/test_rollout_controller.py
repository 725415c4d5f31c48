"""The rollout controller (agents/rollout.py) against the fake API server and a fake ARM whose
instances say whether they run their scale set's model (tests/support/rollout_world.py). Kueue's and the health
agent's parts are played between rounds (`Cluster.kueue`, `Cluster.health`); make e2e runs the controller against
the real kube-apiserver and Kueue (e2e/tests/test_agents_real_server.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from gpucluster.agents import kube_client as kc
from gpucluster.agents import rollout as ro
from gpucluster.agents import rollout_drain as drain
from gpucluster.azure.scale_set.routes import SCALE_SET_API_VERSION
from tests.support.fake_kube import FakeKube, Fault
from tests.support.rollout_world import CPU_SET, NS, PODS, SETS, WORKLOADS, Cluster, gang, pod

IDLE = "idle: every instance runs its scale set's model"
CONFIGMAPS = f"/api/v1/namespaces/{NS}/configmaps"


def _state(cluster: Cluster) -> dict[str, Any]:
    return json.loads(cluster.kube.store[CONFIGMAPS][ro.STATE_CONFIGMAP]["data"]["state.json"])


def _gang(cluster: Cluster, name: str = "gang") -> dict[str, Any]:
    found = cluster.kube.get_object(WORKLOADS, name)
    assert found is not None
    return found


def test_a_cluster_whose_instances_run_their_model_rolls_nothing(cluster: Cluster) -> None:
    """A new cluster, or a change that left every model alone (a drain deadline, a new wave order): the plan
    ConfigMap changes, nothing is behind, nothing is fenced or asked of ARM; the controller idles, never exits."""
    cluster.plan(deadline_minutes=5, sets=SETS[::-1])
    said = ro.run(cluster.controller(), iter(range(3)), sleep=lambda s: None)
    assert said == IDLE and cluster.arm.posts == [] and cluster.fenced() == set()
    assert cluster.kube.requests("PATCH", r"^/api/v1/nodes/") == []


def test_an_image_bump_of_one_domain_rolls_exactly_its_instances_with_one_disk_each(cluster: Cluster) -> None:
    """The model names a new image: each instance is brought to it by the manual upgrade alone, which replaces its OS
    disk; no re-image on top, nothing else touched."""
    cluster.arm.bump(SETS[1], "1.0.1")
    said = cluster.steps(cluster.controller(), 40)
    assert said[-1] == IDLE, said
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[1]}/0", f"{SETS[1]}/1"]
    assert cluster.arm.asked("reimage") == []
    assert cluster.disks() == {**{k: 1 for k in cluster.disks()}, f"{SETS[1]}/0": 2, f"{SETS[1]}/1": 2}
    assert {n for f in cluster.fenced_history for n in f} == {f"{SETS[1]}-0", f"{SETS[1]}-1"}
    assert _gang(cluster)["spec"].get("active") is not False, "the gang on the other domain is untouched"
    assert cluster.fenced() == set()


def test_a_boot_document_change_is_upgraded_then_reimaged_one_disk_each(cluster: Cluster) -> None:
    cluster.arm.touch(SETS[1])
    assert cluster.steps(cluster.controller(), 40)[-1] == IDLE
    assert cluster.arm.asked("manualupgrade") == cluster.arm.asked("reimage") == [f"{SETS[1]}/0", f"{SETS[1]}/1"]
    assert cluster.disks()[f"{SETS[1]}/0"] == 2 and cluster.disks()[f"{SETS[0]}/0"] == 1


def test_a_running_gang_is_deactivated_only_after_its_deadline_and_reactivated_after(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[0], "1.0.1")
    controller = cluster.controller()
    said = cluster.steps(controller, 6)
    assert cluster.fenced() == {f"{SETS[0]}-0", f"{SETS[0]}-1"}, said
    assert _gang(cluster)["spec"].get("active") is not False, "no eviction before the deadline"
    pods = cluster.kube.store[PODS]
    assert all(ro.CHECKPOINT in p["metadata"]["annotations"] for p in pods.values()), "the checkpoint signal"
    assert cluster.arm.posts == []
    cluster.clock[0] += 60 * 60 + 1
    said = cluster.steps(controller, 30)
    assert said[-1] == IDLE, said
    found = _gang(cluster)
    assert found["spec"]["active"] is True and not found["status"].get("admission"), "evicted whole, then requeued"
    assert drain.DEACTIVATED_BY not in found["metadata"].get("annotations", {}), "unmarked in the same patch"
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[0]}/0", f"{SETS[0]}/1"]


def test_a_finished_gang_does_not_hold_its_wave(cluster: Cluster) -> None:
    """The gang checkpointed and exited: its Workload is Finished but keeps its admission and quota (as the real Kueue
    leaves it) and its pods have Succeeded; the wave goes on before the deadline without deactivating it."""
    found = _gang(cluster)
    cluster.kube.put_object(WORKLOADS, {**found, "status": {**found["status"], "conditions": [
        *found["status"]["conditions"], {"type": "Finished", "status": "True"}]}})
    for p in list(cluster.kube.store[PODS].values()):
        cluster.kube.put_object(PODS, {**p, "status": {"phase": "Succeeded"}})
    cluster.arm.bump(SETS[0], "1.0.1")
    assert cluster.steps(cluster.controller(), 40)[-1] == IDLE
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[0]}/0", f"{SETS[0]}/1"], "before the drain deadline"
    assert _gang(cluster)["spec"].get("active") is not False, "a finished workload is not deactivated"


def test_a_workload_without_topology_is_found_through_its_pods(cluster: Cluster) -> None:
    """A CPU job admitted by Kueue names no node in its Workload; its pod on the wave's node leads to it by the job's
    UID, so it is not re-imaged under it: deactivated (the CPU wave has no drain deadline), then reactivated."""
    cluster.kube.put_object(WORKLOADS, {**gang("cpu-job", [f"{CPU_SET}-0"], "uid-cpu"),
                                        "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}],
                                                   "admission": {"podSetAssignments": [{"name": "main"}]}}})
    cluster.kube.put_object(PODS, pod("cpu-job-0", f"{CPU_SET}-0", "uid-cpu"))
    cluster.arm.bump(CPU_SET, "1.0.1")
    controller = cluster.controller()
    said = cluster.steps(controller, 4)
    assert _gang(cluster, "cpu-job")["spec"].get("active") is False, said
    assert cluster.arm.posts == [], "nothing moved while the job's pod runs"
    said = cluster.steps(controller, 40)
    assert said[-1] == IDLE, said
    assert _gang(cluster, "cpu-job")["spec"]["active"] is True
    assert cluster.arm.asked("manualupgrade") == [f"{CPU_SET}/0", f"{CPU_SET}/1"]


def test_a_cpu_wave_cordons_evicts_through_the_eviction_api_and_waits_for_a_budget(cluster: Cluster) -> None:
    """A Deployment's pod on a CPU node leaves by eviction; while its PodDisruptionBudget forbids it (429) nothing
    is moved. CPU nodes are cordoned (nothing else keeps the pod off), never preflight-tainted (no health agent runs
    there), and are done when Ready again."""
    cluster.kube.put_object(PODS, pod("web-0", f"{CPU_SET}-1", "uid-rs", kind="ReplicaSet"))
    cluster.kube.budgeted.add("web-0")
    cluster.arm.bump(CPU_SET, "1.0.1")
    controller = cluster.controller()
    said = cluster.steps(controller, 6)
    assert "1 held by a disruption budget" in said[-1], said
    assert cluster.arm.posts == []
    assert all(cluster.kube.store["/api/v1/nodes"][f"{CPU_SET}-{i}"]["spec"].get("unschedulable") for i in (0, 1))
    cluster.kube.budgeted.clear()
    said = cluster.steps(controller, 40)
    assert said[-1] == IDLE, said
    assert "web-0" not in cluster.kube.store[PODS]
    nodes = cluster.kube.store["/api/v1/nodes"]
    assert not any(nodes[f"{CPU_SET}-{i}"]["spec"].get("unschedulable") for i in (0, 1)), "uncordoned"
    # nothing off the GPU pools takes a preflight taint away (Cluster.health plays the agent on GPU nodes only)
    assert not any(nodes[f"{CPU_SET}-{i}"]["spec"]["taints"] for i in (0, 1)), "no preflight taint off the GPU pools"


def test_an_empty_scale_set_and_one_emptied_mid_wave_complete(cluster: Cluster) -> None:
    cluster.arm.sets[SETS[0]].vms.clear()  # the autoscaler's minimum is 0
    cluster.arm.bump(SETS[1], "1.0.1")
    controller = cluster.controller()
    said = cluster.steps(controller, 3)
    assert _state(cluster)["phase"] in ("drain", "evict", "move"), said
    cluster.arm.sets[SETS[1]].vms.pop("1")  # scaled in while fenced
    said = cluster.steps(controller, 40)
    assert said[-1] == IDLE, said
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[1]}/0"]


def test_two_domains_are_never_out_at_once_and_the_waves_go_in_order(cluster: Cluster) -> None:
    for s in SETS:
        cluster.arm.bump(s, "1.0.1")
    cluster.arm.bump(CPU_SET, "1.0.1")
    cluster.plan(deadline_minutes=0)  # the gang is evicted at once
    said = cluster.steps(cluster.controller(), 120)
    assert said[-1] == IDLE, said
    assert [a.split("/")[0] for a in cluster.arm.asked("manualupgrade")][::2] == [CPU_SET, *SETS]
    for fenced in cluster.fenced_history:
        assert len({name.rsplit("-", 1)[0] for name in fenced}) <= 1, fenced
    assert not any(t for n in cluster.kube.store["/api/v1/nodes"].values() for t in n["spec"]["taints"])
    lists = cluster.kube.requests("GET", r"^/api/v1/nodes$")
    assert lists and all(r.query.get("labelSelector") for r in lists), "never a list of every node"


def test_a_controller_replaced_mid_wave_resumes_and_asks_arm_nothing_twice(cluster: Cluster) -> None:
    cluster.arm.touch(SETS[1])
    cluster.arm.busy_reads = 3
    cluster.steps(cluster.controller(), 6, until="wave 3: re-imaging")
    assert _state(cluster)["phase"] in ("upgrading", "reimaging")
    said = cluster.steps(cluster.controller(), 40)  # a new process, nothing in memory
    assert said[-1] == IDLE, said
    assert cluster.arm.asked("manualupgrade") == cluster.arm.asked("reimage") == [f"{SETS[1]}/0", f"{SETS[1]}/1"]


def test_a_lost_state_write_loses_no_deactivated_workload(cluster: Cluster) -> None:
    """The mark is on the Workload: a state ConfigMap deleted mid-wave starts from a scan, lifts its own fences and
    still reactivates the gang it deactivated."""
    cluster.arm.bump(SETS[0], "1.0.1")
    controller = cluster.controller()
    cluster.plan(deadline_minutes=0)
    cluster.steps(controller, 4, until="wave 2: deactivated")
    assert _gang(cluster)["spec"].get("active") is False
    del cluster.kube.store[CONFIGMAPS][ro.STATE_CONFIGMAP]
    said = cluster.steps(controller, 40)
    assert said[-1] == IDLE, said
    assert _gang(cluster)["spec"]["active"] is True and cluster.fenced() == set()


@pytest.mark.parametrize("text", ["not json", '{"phase": "dancing"}', '{"phase": "drain", "behind": {"a": "b"}}',
                                  json.dumps({"phase": "drain", "behind": {SETS[0]: ["0"]}, "current": {
                                      "index": 2, "pool": "h100", "scaleSets": [SETS[0]], "minutes": "soon"}})])
def test_a_corrupt_or_hand_edited_state_is_a_logged_round_then_a_scan(cluster: Cluster, text: str) -> None:
    cluster.kube.put_object(CONFIGMAPS, {"metadata": {"name": ro.STATE_CONFIGMAP}, "data": {"state.json": text}})
    said = ro.run(cluster.controller(), iter(range(2)), sleep=lambda s: None)
    assert said == IDLE
    assert _state(cluster) == {"phase": "scan"}


@pytest.mark.parametrize("plan", ["{", '{"waves": 3}', json.dumps({"waves": [{"kind": "pool", "index": 1, "pool": "x",
                                                                              "scaleSets": ["s"], "minutes": "ten"}],
                                                                   "fence": {"label": "a", "open": "b", "fenced": "c"}})])
def test_a_missing_or_unreadable_plan_is_a_logged_round(cluster: Cluster, plan: str) -> None:
    cluster.arm.bump(SETS[0], "1.0.1")
    found = cluster.kube.store[CONFIGMAPS][ro.PLAN_CONFIGMAP]
    cluster.kube.put_object(CONFIGMAPS, {**found, "data": {"plan.json": plan}})
    said = ro.run(cluster.controller(), iter(range(2)), sleep=lambda s: None)
    assert said.startswith("idle: the plan is unreadable") and cluster.fenced() == set()
    del cluster.kube.store[CONFIGMAPS][ro.PLAN_CONFIGMAP]
    assert ro.run(cluster.controller(), iter(range(1)), sleep=lambda s: None).startswith("idle: no ConfigMap")


def test_a_failed_instance_stops_the_rollout_with_the_domain_fenced(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[0], "1.0.1")
    cluster.plan(deadline_minutes=0)
    cluster.arm.failing.add(f"{SETS[0]}/1")
    said = cluster.steps(cluster.controller(), 40)
    assert said[-1].startswith(f"stopped: {SETS[0]} instance 1: upgrade ended in provisioningState Failed"), said
    assert cluster.fenced() == {f"{SETS[0]}-0", f"{SETS[0]}-1"}
    assert cluster.controller().step().startswith("stopped at wave 2")


def test_an_instance_that_never_returns_stops_the_wave_at_its_deadline_and_reopens_the_rest(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[1], "1.0.1")
    cluster.arm.stuck.add(f"{SETS[1]}/1")
    controller = cluster.controller()
    said = cluster.steps(controller, 12)
    assert not said[-1].startswith("stopped"), said
    assert cluster.fenced() == {f"{SETS[1]}-0", f"{SETS[1]}-1"}
    cluster.clock[0] += 2 * 35 * 60 + 1
    said = cluster.steps(controller, 3)
    assert said[-1].startswith("stopped: wave 3: past its time, still waiting for h100-z1-01/1"), said
    assert cluster.fenced() == {f"{SETS[1]}-1"}, "the node that came back is reopened"


def test_a_failed_health_check_stops_the_rollout_with_the_domain_fenced(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[1], "1.0.1")
    said = cluster.steps(cluster.controller(), 40, sick=f"{SETS[1]}-1")
    assert said[-1].startswith(f"stopped: health check failed on {SETS[1]}-1"), said
    assert cluster.fenced() == {f"{SETS[1]}-0", f"{SETS[1]}-1"}


def test_arm_429_and_409_are_sent_again_other_failures_read_first(cluster: Cluster) -> None:
    """429 and 409 (another operation on the scale set) say the POST was not taken: sent again after the wait. A
    500 may have been taken: the next round reads the instances before it asks again."""
    cluster.arm.bump(SETS[1], "1.0.1")
    upgrade = rf"/virtualMachineScaleSets/{SETS[1]}/manualupgrade"
    cluster.arm.inject("POST", upgrade, Fault(429, {"Retry-After": "1"}, times=2))
    cluster.arm.inject("POST", upgrade, Fault(409, times=1))
    cluster.kube.inject("GET", r"^/api/v1/nodes\?", Fault(410, times=2))
    said = ""
    controller = cluster.controller()
    for _ in range(60):
        said = ro.run(controller, iter(range(1)), sleep=lambda s: None)
        cluster.kueue()
        cluster.health()
        if said == IDLE:
            break
    assert said == IDLE
    assert len(cluster.arm.requests("POST", upgrade)) == 4 and cluster.arm.asked("manualupgrade") == [
        f"{SETS[1]}/0", f"{SETS[1]}/1"]


def test_a_post_that_may_have_been_taken_is_not_sent_again_blindly(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[1], "1.0.1")
    cluster.arm.busy_reads = 2
    upgrade = rf"/virtualMachineScaleSets/{SETS[1]}/manualupgrade"
    original = cluster.arm.answer

    def taken_then_500(method: str, path: str, query: dict[str, str], body: Any, who: str) -> Any:
        answered = original(method, path, query, body, who)
        if method == "POST" and re.search(upgrade, path) and len(cluster.arm.posts) == 1:
            return 500, {"error": {"code": "InternalServerError"}}, {}  # taken, but the answer lost
        return answered

    cluster.arm.answer = taken_then_500  # type: ignore[method-assign]
    assert cluster.steps(cluster.controller(), 40)[-1] == IDLE
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[1]}/0", f"{SETS[1]}/1"], "asked once"


def test_an_accepted_post_that_arm_shows_late_is_not_sent_again_within_the_grace(cluster: Cluster) -> None:
    """ARM answers 202 before the instance view shows the instance busy: rounds that read it unchanged wait, and ask
    again only once POST_GRACE_SECONDS have passed since the POST (then ARM would have shown it)."""
    cluster.arm.bump(SETS[1], "1.0.1")
    cluster.arm.lag_reads = 4
    controller = cluster.controller()
    said = cluster.steps(controller, 12, until="wave 3: upgrading")
    said += cluster.steps(controller, 3, until="nothing")  # three more rounds inside the grace, the clock still
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[1]}/0", f"{SETS[1]}/1"], said
    assert cluster.steps(controller, 40)[-1] == IDLE
    assert cluster.arm.asked("manualupgrade") == [f"{SETS[1]}/0", f"{SETS[1]}/1"], "never asked twice"
    cluster.arm.posts.clear()
    cluster.arm.touch(SETS[0])
    cluster.arm.stuck.clear()
    cluster.arm.lag_reads = 10 ** 6  # ARM never shows it: after the grace, asked again
    cluster.plan(deadline_minutes=0)
    cluster.steps(controller, 12, until="wave 2: upgrading")
    cluster.steps(controller, 2, until="nothing")
    assert len(cluster.arm.posts) == 1
    cluster.clock[0] += ro.POST_GRACE_SECONDS
    cluster.arm.lag_reads = 0
    for vm in cluster.arm.sets[SETS[0]].vms.values():
        vm.unseen, vm.busy, vm.state, vm.then = 0, 0, "Succeeded", None  # the lost request
    cluster.steps(controller, 1, until="nothing")
    assert len(cluster.arm.posts) == 2, "asked again after the grace"


def test_the_pause_annotation_holds_the_rollout(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[0], "1.0.1")
    plan = cluster.kube.store[CONFIGMAPS][ro.PLAN_CONFIGMAP]
    cluster.kube.put_object(CONFIGMAPS, {**plan, "metadata": {**plan["metadata"],
                                                              "annotations": {ro.PAUSE_ANNOTATION: "true"}}})
    assert cluster.steps(cluster.controller(), 3) == ["paused"] * 3
    assert cluster.fenced() == set()


def test_only_the_lease_holder_steps_and_a_lost_lease_writes_nothing(cluster: Cluster) -> None:
    cluster.arm.bump(SETS[1], "1.0.1")
    first, second = cluster.controller("replica-a"), cluster.controller("replica-b")
    assert first.step().startswith("wave 3: 2 instances behind")
    assert second.step() == "not the leader"
    assert cluster.kube.holder() == "replica-a"
    assert first.leader is not None
    first.leader.valid_until = float("-inf")  # the renew deadline passed mid-round
    before = len(cluster.kube.requests("PATCH"))
    assert first.step() == "not the leader" or first.step().startswith("lost the lease")
    assert len(cluster.kube.requests("PATCH")) == before


def test_a_round_writes_at_most_its_share_and_the_next_goes_on(cluster: Cluster) -> None:
    """The fence of a large domain is split over rounds so that a round's writes fit well inside the lease."""
    cluster.arm.bump(SETS[1], "1.0.1")
    controller = cluster.controller(writes=1)
    said = cluster.steps(controller, 80)
    assert said[-1] == IDLE, said
    assert any(s.endswith("fencing 2 nodes") for s in said), said


def test_the_controller_sends_the_providers_compute_api_version_and_the_vocabularys_names() -> None:
    from gpucluster.vocabulary import (
        ANNOTATION_CHECKPOINT_BY,
        LABEL_IB_DOMAIN,
        LABEL_POOL,
        LABEL_RACK,
        LABEL_SCALE_SET,
        TAINT_PREFLIGHT,
        TAINT_UNHEALTHY,
    )

    assert ro.COMPUTE_API_VERSION == SCALE_SET_API_VERSION
    assert (ro.CHECKPOINT, ro.PREFLIGHT, ro.UNHEALTHY) == (ANNOTATION_CHECKPOINT_BY, TAINT_PREFLIGHT, TAINT_UNHEALTHY)
    assert (ro.DOMAIN_LABEL, ro.RACK_LABEL, ro.POOL_LABEL, ro.SCALE_SET_LABEL) == (
        LABEL_IB_DOMAIN, LABEL_RACK, LABEL_POOL, LABEL_SCALE_SET)


def test_the_controller_sends_only_the_arm_requests_its_role_grants(cluster: Cluster) -> None:
    """Every ARM request of a whole rollout is one that components/catalog/arm_operations.py read from the
    controller's source, and its action is in the controller's role (tests/test_addon_roles.py checks the role
    against Azure's operations list)."""
    from gpucluster.catalog.addon_permissions import ROLLOUT
    from gpucluster.catalog.arm_operations import rbac_action, rollout_operations

    cluster.arm.touch(SETS[1])
    assert cluster.steps(cluster.controller(), 40)[-1] == IDLE
    templates = [re.compile("^" + re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(op.path)) + "$")
                 for op in rollout_operations()]
    sent = [s for s in cluster.arm.seen if s.path != "/metadata/identity/oauth2/token"]
    assert {s.method for s in sent} == {"POST", "GET"}
    for s in sent:
        assert any(t.match(s.path) for t in templates), s.path
        assert rbac_action(s.method, s.path).lower() in {p.action.lower() for p in ROLLOUT}


def test_a_node_changed_since_it_was_read_is_not_tainted_blindly(cluster: Cluster) -> None:
    """The preflight taint replaces the node's taint list: a node edited since the read makes the patch fail with
    409; nothing is asked of ARM in that round, and the next round reads again and keeps both taints."""
    cluster.arm.bump(SETS[1], "1.0.1")
    controller = cluster.controller()
    cluster.steps(controller, 6, until="wave 3: drained")
    bumped: list[str] = []

    def edit_first(method: str, path: str, kube: FakeKube) -> None:
        if method == "PATCH" and path.startswith("/api/v1/nodes/") and not bumped:
            name = path.rsplit("/", 1)[1]
            found = kube.store["/api/v1/nodes"][name]
            taint = {"key": "example.com/maintenance", "value": "x", "effect": "NoSchedule"}
            kube.put_object("/api/v1/nodes", {**found, "spec": {**found["spec"], "taints": [taint]}})
            bumped.append(name)

    cluster.kube.before_write = edit_first
    said = ro.run(controller, iter(range(1)), sleep=lambda s: None)
    assert "409" in said and cluster.arm.posts == []
    cluster.kube.before_write = None
    assert controller.step().startswith("wave 3: 2 instances to upgrade")
    taints = {t["key"] for t in cluster.kube.store["/api/v1/nodes"][bumped[0]]["spec"]["taints"]}
    assert taints == {"example.com/maintenance", ro.PREFLIGHT}


def test_kube_errors_are_logged_rounds(cluster: Cluster) -> None:
    cluster.kube.inject("GET", r"configmaps", Fault(500, times=50))
    said = ro.run(cluster.controller(), iter(range(2)), sleep=lambda s: None)
    assert said.startswith("error:"), said
    with pytest.raises(kc.ApiError):
        cluster.controller().step()
