"""The rollout controller's world: the fake API server with Kueue workloads and a fake ARM whose scale sets have a
model and instances (`latestModelApplied`, image, provisioning state, the time of the last change), and a cluster of
two InfiniBand domains with a running gang plus a CPU scale set (the `cluster` fixture).

The fake ARM moves an instance as Azure does, by what the request asks and nothing else: `manualupgrade` brings it
to the model (a new OS disk only when the model names another image), `reimage` gives it a new OS disk of the image
it runs; each takes `busy_reads` instance reads in state Updating, then ends Succeeded with a new change time. It
counts OS disks per instance (`disks`), so a test can say how many each change cost."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from gpucluster.agents import kube_client as kc
from gpucluster.agents import rollout as ro
from gpucluster.agents import rollout_arm
from gpucluster.agents import rollout_drain as drain
from gpucluster.agents.prefix_ipam import Leader
from gpucluster.azure.scale_set.routes import SCALE_SET_API_VERSION
from gpucluster.planning.fence import FENCE
from tests.support.fake_kube import FakeAzure, FakeKube

NS = ro.NAMESPACE
SETS = ("h100-z1-00", "h100-z1-01")
CPU_SET = "cpu-z1-00"
NODES_PER_SET = 2
WORKLOADS = f"{ro.WORKLOADS}/namespaces/team-a/workloads"
PODS = "/api/v1/namespaces/team-a/pods"
PROVIDER = "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachineScaleSets/{}/virtualMachines/{}"
IMAGE = "/subscriptions/sub/resourcegroups/rg/providers/microsoft.compute/galleries/g/images/{}/versions/{}"


class Kube(FakeKube):
    COLLECTIONS = re.compile(r"^(/api/v1/nodes|/api/v1/namespaces/[^/]+/(?:pods|configmaps)|"
                             r"/apis/coordination\.k8s\.io/v1/namespaces/[^/]+/leases|"
                             r"/apis/kueue\.x-k8s\.io/v1beta2/namespaces/[^/]+/workloads)(?:/([^/]+))?$")

    def __init__(self) -> None:
        super().__init__()
        self.budgeted: set[str] = set()
        """Pods a PodDisruptionBudget protects: their eviction is answered 429 (policy/v1 Eviction)."""

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        if path == f"{ro.WORKLOADS}/workloads" and method == "GET":
            with self.lock:
                items = [o for c, objs in self.store.items() if c.endswith("/workloads") for o in objs.values()]
                return 200, self._page(items, query), {}
        evicted = re.match(r"^(/api/v1/namespaces/[^/]+/pods)/([^/]+)/eviction$", path)
        if evicted and method == "POST":
            collection, name = evicted[1], evicted[2]
            if name in self.budgeted:
                return 429, {"kind": "Status", "status": "Failure", "reason": "TooManyRequests",
                             "message": "Cannot evict pod as it would violate the pod's disruption budget."}, {}
            with self.lock:
                gone = self.store.get(collection, {}).pop(name, None)
            if gone is None:
                return 404, {"kind": "Status", "status": "Failure", "reason": "NotFound"}, {}
            return 201, {"kind": "Status", "status": "Success"}, {}
        return super().answer(method, path, query, body, who)


@dataclass
class Vm:
    image: str
    latest: bool = True
    state: str = "Succeeded"
    changed: int = 0
    disks: int = 1
    busy: int = 0
    then: Callable[[], None] | None = None
    unseen: int = 0
    """Reads that still show the instance as it was after a POST was accepted (ARM has not started it yet)."""


@dataclass
class ScaleSet:
    image: str
    vms: dict[str, Vm] = field(default_factory=dict)


class Arm(FakeAzure):
    """IMDS's token (the parent), a scale set's model, its instances, manualupgrade and reimage."""

    def __init__(self) -> None:
        super().__init__()
        self.sets: dict[str, ScaleSet] = {}
        self.busy_reads = 1
        self.lag_reads = 0
        """Reads after an accepted POST before the instance shows busy (the fake's clock does not move meanwhile)."""
        self.finished = 0
        """Operations finished so far: each finished instance's `changed` stamp (not FakeHttp's `clock`)."""
        self.posts: list[tuple[str, str, tuple[str, ...]]] = []
        self.failing: set[str] = set()
        """Instances (`set/id`) whose next operation ends Failed."""
        self.stuck: set[str] = set()
        """Instances (`set/id`) whose next operation never ends."""
        self.done: Callable[[str, str], None] = lambda scale_set, instance: None
        """Called when an operation on an instance ends (the node reboots)."""
        self.moving: Callable[[str, str, tuple[str, ...]], None] = lambda scale_set, op, ids: None
        """Called with every POST before it is taken (a test checks what still runs on those machines)."""

    def bump(self, scale_set: str, version: str) -> None:
        """What `pulumi up` does to a scale set's model: a new image version; every instance is behind."""
        found = self.sets[scale_set]
        found.image = IMAGE.format(scale_set.split("-")[0], version)
        for vm in found.vms.values():
            vm.latest = False

    def touch(self, scale_set: str) -> None:
        """A model change that keeps the image (the boot document in customData)."""
        for vm in self.sets[scale_set].vms.values():
            vm.latest = False

    def _vm_body(self, scale_set: str, instance: str, vm: Vm) -> dict[str, Any]:
        key = f"{scale_set}/{instance}"
        if vm.unseen:
            vm.unseen -= 1
            state = "Succeeded"
            stamp = f"2026-11-29T08:{vm.changed // 60 % 60:02d}:{vm.changed % 60:02d}.1234567+00:00"
            return {"instanceId": instance, "name": f"{scale_set}_{instance}", "properties": {
                "latestModelApplied": False if vm.then else vm.latest, "provisioningState": state,
                "osProfile": {"computerName": f"{scale_set}-{instance}"},
                "storageProfile": {"imageReference": {"id": vm.image}},
                "instanceView": {"statuses": [{"code": "ProvisioningState/succeeded", "time": stamp}]}}}
        if vm.busy and key not in self.stuck:
            vm.busy -= 1
            if vm.busy == 0:
                self.finished += 1
                vm.state, vm.changed = ("Failed" if key in self.failing else "Succeeded"), self.finished
                if vm.then:
                    vm.then()
                    vm.then = None
                self.done(scale_set, instance)
        stamp = f"2026-11-29T08:{vm.changed // 60 % 60:02d}:{vm.changed % 60:02d}.1234567+00:00"
        return {"instanceId": instance, "name": f"{scale_set}_{instance}", "properties": {
            "latestModelApplied": vm.latest, "provisioningState": vm.state,
            "osProfile": {"computerName": f"{scale_set}-{instance}"},
            "storageProfile": {"imageReference": {"id": vm.image}},
            "instanceView": {"statuses": [{"code": f"ProvisioningState/{vm.state.lower()}", "time": stamp},
                                          {"code": "PowerState/running"}]}}}

    def answer(self, method: str, path: str, query: dict[str, str], body: Any, who: str) -> tuple[int, Any, dict[str, str]]:
        match = re.match(r"^/subscriptions/sub/resourceGroups/rg/providers/Microsoft\.Compute/"
                         r"virtualMachineScaleSets/([^/]+)(?:/(manualupgrade|reimage|virtualMachines))?$", path)
        if match is None:
            return super().answer(method, path, query, body, who)
        assert query.get("api-version") == SCALE_SET_API_VERSION
        name, op = match[1], match[2]
        found = self.sets.get(name)
        if found is None:
            return 404, {"error": {"code": "ResourceNotFound", "message": name}}, {}
        if op is None and method == "GET":
            return 200, {"name": name, "properties": {"virtualMachineProfile": {
                "storageProfile": {"imageReference": {"id": found.image}}}}}, {}
        if op == "virtualMachines" and method == "GET":
            assert query.get("$expand") == "instanceView"
            return 200, {"value": [self._vm_body(name, i, vm) for i, vm in sorted(found.vms.items())]}, {}
        assert method == "POST" and isinstance(body, dict) and body.get("instanceIds"), body
        ids = tuple(str(i) for i in body["instanceIds"])
        self.moving(name, op, ids)
        self.posts.append((name, op, ids))
        for instance in ids:
            vm = found.vms[instance]
            assert not vm.busy, f"{name}/{instance}: {op} while another operation runs"
            vm.state, vm.busy, vm.unseen = "Updating", self.busy_reads, self.lag_reads
            if op == "manualupgrade":
                new_image = vm.image != found.image

                def upgraded(vm: Vm = vm, image: str = found.image, new_image: bool = new_image) -> None:
                    vm.latest, vm.image = True, image
                    vm.disks += 1 if new_image else 0
                vm.then = upgraded
            else:
                def reimaged(vm: Vm = vm) -> None:
                    vm.disks += 1
                vm.then = reimaged
        return 202, {}, {}

    def asked(self, op: str) -> list[str]:
        return [f"{s}/{i}" for s, o, ids in self.posts if o == op for i in ids]


class Cluster:
    def __init__(self, kube: Kube, arm: Arm, tmp: Path) -> None:
        self.kube, self.arm, self.tmp = kube, arm, tmp
        self.clock = [1_000_000.0]
        self.fenced_history: list[set[str]] = []
        self.reboots = 0
        (tmp / "token").write_text("t")
        arm.done = self.reboot

    def reboot(self, scale_set: str, instance: str) -> None:
        """The node of a moved instance comes back: a new Ready transition."""
        self.reboots += 1
        name = f"{scale_set}-{instance}"
        node = self.kube.get_object("/api/v1/nodes", name)
        if node is not None:
            self.kube.put_object("/api/v1/nodes", {**node, "status": ready_status(f"2026-11-29T09:00:{self.reboots:02d}Z")})

    def controller(self, me: str | None = None, writes: int = 40) -> ro.Controller:
        http = kc.Http(sleep=lambda s: None, retry_cap=0.01)
        arm = ro.Arm(http, "client", "sub", "rg")
        kube = kc.Kube(self.kube.url, str(self.tmp), sleep=lambda s: None, retry_cap=0.01)
        leader = Leader(kube, NS, ro.LEASE, me) if me else None
        return ro.Controller(kube, arm, now=lambda: self.clock[0], leader=leader, writes_per_round=writes)

    def plan(self, **changes: Any) -> None:
        plan_map = self.kube.store[f"/api/v1/namespaces/{NS}/configmaps"][ro.PLAN_CONFIGMAP]
        self.kube.put_object(f"/api/v1/namespaces/{NS}/configmaps",
                             {**plan_map, "data": {"plan.json": json.dumps(rollout_plan(**changes))}})

    def fenced(self) -> set[str]:
        nodes = self.kube.store.get("/api/v1/nodes", {}).values()
        return {n["metadata"]["name"] for n in nodes if n["metadata"]["labels"][FENCE.label] == FENCE.fenced}

    def kueue(self) -> None:
        """Kueue: a deactivated workload is evicted (no quota, no admission, its pods deleted); a reactivated one
        waits in its queue. A finished one keeps its admission and quota whatever `active` says (kueue v0.19.2, held
        by make e2e's e2e/tests/test_kueue_dev.py against the real controller)."""
        for w in list(self.kube.store.get(WORKLOADS, {}).values()):
            done = drain.finished(w)
            if w["spec"].get("active") is False and w["status"].get("admission") and not done:
                self.kube.put_object(WORKLOADS, {**w, "status": {"conditions": [
                    {"type": "QuotaReserved", "status": "False"}, {"type": "Evicted", "status": "True"}]}})
                uids = drain.workload_job_uids(w)
                for pod in list(self.kube.store.get(PODS, {}).values()):
                    if drain.job_uids(pod) & uids:
                        del self.kube.store[PODS][pod["metadata"]["name"]]

    def health(self, sick: str | None = None) -> None:
        """The health agent: preflight taint off, or the unhealthy taint on `sick`."""
        for n in list(self.kube.store.get("/api/v1/nodes", {}).values()):
            if not n["metadata"]["labels"].get("gpucluster.io/infiniband-domain"):
                continue  # no health agent off the GPU pools
            taints = [t for t in n["spec"].get("taints", []) if t["key"] != ro.PREFLIGHT]
            if n["metadata"]["name"] == sick:
                taints = [*n["spec"].get("taints", []), {"key": ro.UNHEALTHY, "value": "dcgm", "effect": "NoSchedule"}]
            if taints != n["spec"].get("taints", []):
                self.kube.put_object("/api/v1/nodes", {**n, "spec": {**n["spec"], "taints": taints}})

    def steps(self, controller: ro.Controller, count: int, sick: str | None = None,
              until: str = "idle: every instance") -> list[str]:
        done = []
        for _ in range(count):
            done.append(controller.step())
            self.fenced_history.append(self.fenced())
            self.kueue()
            self.health(sick)
            if done[-1].startswith((until, "stopped")):
                break
        return done

    def disks(self) -> dict[str, int]:
        return {f"{s}/{i}": vm.disks for s, found in self.arm.sets.items() for i, vm in found.vms.items()}


def ready_status(since: str) -> dict[str, Any]:
    return {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}]}


def rollout_plan(deadline_minutes: int = 60, sets: tuple[str, ...] = SETS) -> dict[str, Any]:
    waves: list[dict[str, Any]] = [{"index": 0, "kind": "etcd", "pool": "etcd", "scaleSets": ["etcd-0"]},
                                   {"index": 1, "kind": "pool", "pool": "cpu", "scaleSets": [CPU_SET],
                                    "topology": False, "preflight": False, "drainMinutes": 0, "minutes": 20}]
    waves += [{"index": i + 2, "kind": "pool", "pool": "h100", "scaleSets": [s], "topology": True, "preflight": True,
               "drainMinutes": deadline_minutes, "minutes": 35} for i, s in enumerate(sets)]
    return {"waves": waves, "fence": {"label": FENCE.label, "open": FENCE.open, "fenced": FENCE.fenced}}


def node(scale_set: str, index: int, pool: str) -> dict[str, Any]:
    labels = {FENCE.label: FENCE.open, "gpucluster.io/pool": pool}
    if scale_set != CPU_SET:  # the CPU nodes joined before nodes carried their scale set: found by pool
        labels[ro.SCALE_SET_LABEL] = scale_set
    if pool == "h100":
        labels["gpucluster.io/infiniband-domain"] = scale_set
    return {"metadata": {"name": f"{scale_set}-{index}", "labels": labels},
            "spec": {"providerID": PROVIDER.format(scale_set, index), "taints": []},
            "status": ready_status("2026-11-29T07:00:00Z")}


def gang(name: str, nodes: list[str], uid: str) -> dict[str, Any]:
    """A topology-aware Workload admitted onto `nodes` (one pod per node) and owned by job `uid`."""
    prefix = nodes[0].rsplit("-", 1)[0] + "-"
    return {"metadata": {"name": name, "namespace": "team-a", "labels": {drain.JOB_UID_LABEL: uid}}, "spec": {},
            "status": {"conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
                       "admission": {"podSetAssignments": [{"topologyAssignment": {
                           "levels": ["kubernetes.io/hostname"], "slices": [
                               {"domainCount": len(nodes), "podCounts": {"universal": 1},
                                "valuesPerLevel": [{"individual": {"prefix": prefix,
                                                                   "roots": [n.rsplit("-", 1)[1] for n in nodes]}}]}]}}]}}}


def pod(name: str, on: str, uid: str | None = None, kind: str = "Job") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "team-a", "labels": {}}
    if uid is not None:
        meta["ownerReferences"] = [{"kind": kind, "name": "owner", "uid": uid, "controller": True}]
        if kind == "Job":
            meta["labels"][drain.PODSET_LABEL] = "main"
    return {"metadata": meta, "spec": {"nodeName": on}, "status": {"phase": "Running"}}


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cluster]:
    kube, arm = Kube(), Arm()
    with kube.running(), arm.running():
        monkeypatch.setattr(rollout_arm, "ARM", arm.url)
        monkeypatch.setattr(rollout_arm, "IMDS_TOKEN", f"{arm.url}/metadata/identity/oauth2/token")
        for scale_set, pool in [(CPU_SET, "cpu"), *((s, "h100") for s in SETS)]:
            image = IMAGE.format(pool, "1.0.0")
            arm.sets[scale_set] = ScaleSet(image, {str(i): Vm(image) for i in range(NODES_PER_SET)})
            for i in range(NODES_PER_SET):
                kube.put_object("/api/v1/nodes", node(scale_set, i, pool))
        kube.put_object(f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": ro.PLAN_CONFIGMAP},
                                                                 "data": {"plan.json": json.dumps(rollout_plan())}})
        # a running gang on the first domain, one pod per node
        kube.put_object(WORKLOADS, gang("gang", [f"{SETS[0]}-0", f"{SETS[0]}-1"], "uid-gang"))
        for i in range(NODES_PER_SET):
            kube.put_object(PODS, pod(f"gang-{i}", f"{SETS[0]}-{i}", "uid-gang"))
        yield Cluster(kube, arm, tmp_path)
